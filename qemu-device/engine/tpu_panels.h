/* SPDX-License-Identifier: MIT */
/*
 * Packed GEMM operands kept for the rest of a job. A grid of small blocks
 * multiplies the same input blocks many times: in the guide's matmul
 * (grid (i, j, k)) x's block (i, k) comes back at every j and y's block
 * (k, j) at every i, and each visit packed it again from rows a whole
 * array row apart (at 4096 wide, 16 KiB: a 128-row block falls in 32 of
 * L2's 1024 sets, so a block asked for a step ahead was mostly evicted
 * before its use). Kept packed, a block is read again as one contiguous
 * run, and the next step's prefetch asks for that run instead.
 *
 * Only blocks read in place from an input no one writes during the job
 * qualify: an input's array overlapping no output (aliased or not) and no
 * trace or print buffer. The rules make inputs read-only to the body and
 * to async copies, so such an array holds the same bytes from the job's
 * first step to its last. Writing it from outside (the guest, another
 * queue) during the job is a race, as it is for blocks read in place.
 *
 * Two kinds of keeping, with bounded memory; a miss or a full cache
 * falls back to packing per call, with the same results:
 * - shared: job-wide, all cores, never evicted, up to TPU_PANELS_SHARED_MAX
 *   bytes (the GEMM's right-hand side: y's blocks, reused across i);
 * - core: the calling core's own, emptied when full, up to
 *   TPU_PANELS_CORE_MAX bytes a core (the left-hand side: x's row of blocks,
 *   reused across j, a small working set that an empty-when-full cache
 *   keeps as well as any).
 */
#ifndef TPU_PANELS_H
#define TPU_PANELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpu_core.h"

/* A 4096^3 f32 job's y packed is 64.5 MiB; x's row of blocks 2 MiB. */
#define TPU_PANELS_SHARED_MAX	(72ull << 20)
#define TPU_PANELS_CORE_MAX	(8ull << 20)

enum tpu_panels_kind { TPU_PANELS_SHARED, TPU_PANELS_CORE };

/* What a packing is of: the source and how it was read and laid out. */
struct tpu_panel_key {
	const void *src;
	int64_t rows, cols, rs, cs;	/* op(X) rows x cols; element strides */
	uint32_t layout;		/* the packer's own: element type, tile */
};

struct tpu_panel;

/*
 * The memory of both caches, reserved (only what is packed is touched) and
 * kept from job to job as VMEM is: fresh pages cost more than packing.
 * NULL: out of memory.
 */
struct tpu_panels *tpu_panels_new(void);
void tpu_panels_free(struct tpu_panels *c);

/*
 * @run (before its cores start) keeps its packings in @c, which no other
 * job uses until it ends, if any input qualifies (else, or with @c NULL,
 * run->panels stays NULL).
 */
void tpu_panels_open(struct tpu_run *run, struct tpu_panels *c);

/* The calling thread runs @core (NULL: no more). */
void tpu_panels_bind(const struct tpu_core *core);

/*
 * The packing of @key (its source spanning @span bytes), @bytes long and
 * 64-byte aligned, or NULL: no job bound, not an input that qualifies, or
 * no room. *@fill non-NULL: the buffer is new, the caller packs into it
 * and then calls tpu_panels_filled(*@fill).
 */
float *tpu_panels_get(enum tpu_panels_kind kind, const struct tpu_panel_key *key,
		      uint64_t span, size_t bytes, struct tpu_panel **fill);
void tpu_panels_filled(struct tpu_panel *p);

/*
 * A packing of the block at @src kept by this job (any layout), for the
 * prefetcher: NULL, or its address and *@bytes.
 */
const void *tpu_panels_find(const void *src, size_t *bytes);

/*
 * Tests and benchmarks: keep packings (the default) or not; how many GEMM
 * operands were read from a kept packing so far (summed when a core's
 * thread unbinds). Not while a job runs.
 */
void tpu_panels_use(bool on);
uint64_t tpu_panels_reused(void);

#endif /* TPU_PANELS_H */
