/* SPDX-License-Identifier: MIT */
/*
 * Blocks of an operand in HBM: where block @idx lies, its in-bounds part
 * (edge blocks, and pl.Element blocks reaching into their low padding,
 * are zero-padded on read, poisoned in debug mode, and written only in
 * bounds), and
 * the copies between HBM and the core's VMEM.
 */
#ifndef TPU_BLOCK_H
#define TPU_BLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "tpu_core.h"

struct tpu_block_span {
	uint64_t start[TPU_JOB_MAX_RANK];	/* first in-bounds element, per dim */
	uint64_t lead[TPU_JOB_MAX_RANK];	/* padding before it (pl.Element) */
	uint64_t valid[TPU_JOB_MAX_RANK];	/* in-bounds extent, per dim */
	uint64_t first, end;			/* byte range in the slot */
	bool full;				/* no padding */
};

/*
 * Where block @idx of operand @i lies; fails the job at @step (-1) if it
 * starts outside the array or (defence in depth) ends outside the
 * operand's slot.
 */
int tpu_block_locate(struct tpu_core *core, unsigned int i, const int64_t *idx,
		     uint64_t step, struct tpu_block_span *sp);

/*
 * Record the in-bounds part of block @i as a 2-D ref, for the useful FLOPs.
 * This and tpu_block_bytes() are inline: they run for every block and step.
 */
static inline void tpu_block_set_valid(struct tpu_core *core, unsigned int i,
				       const struct tpu_block_span *sp)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];
	int64_t rows = 1;

	for (unsigned int d = 0; d + 1 < o->rank; d++)
		rows *= (int64_t)sp->valid[d];
	core->valid_rows[i] = rows;
	core->valid_cols[i] = (int64_t)sp->valid[o->rank - 1];
}

/* Bytes of the in-bounds part: what moves between HBM and VMEM. */
static inline uint64_t tpu_block_bytes(const struct tpu_plan_operand *o,
				       const struct tpu_block_span *sp)
{
	uint64_t n = tpu_dtype_size(o->dtype);

	for (unsigned int d = 0; d < o->rank; d++)
		n *= sp->valid[d];
	return n;
}

/*
 * Make input block @i readable at core->block[i]: in place in HBM when its
 * rows are equally spaced and it needs no padding (and not in debug mode),
 * else copied into VMEM. An output's block (pl.RevisitMode.ANY) is always
 * copied into its buffer. -1 if out of memory for the VMEM buffer.
 */
int tpu_block_fetch(struct tpu_core *core, unsigned int i,
		    const struct tpu_block_span *sp);

/*
 * Queue input block @idx of operand @i for tpu_prefetch_take() when its
 * rows are equally spaced; nothing if @idx is bad (its own step fails).
 */
void tpu_block_prefetch(struct tpu_core *core, unsigned int i,
			const int64_t *idx);

/* Copy the in-bounds part of output block @i from VMEM back to HBM. */
void tpu_block_write_back(struct tpu_core *core, unsigned int i,
			  const struct tpu_block_span *sp);

#endif /* TPU_BLOCK_H */
