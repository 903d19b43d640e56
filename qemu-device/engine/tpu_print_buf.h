/* SPDX-License-Identifier: MIT */
/*
 * A job's print buffer (TPU_JOB_F_PRINT): the records of uapi/tpu_print.h
 * that TPU_OP_DEBUG_PRINT appends into the job's print slot in HBM, the
 * header when the job ends. The cores share one byte cursor, advanced by
 * compare-and-swap so a record is claimed whole or not at all: a record
 * that does not fit is counted as dropped, and a smaller later one may
 * still fit.
 */
#ifndef TPU_PRINT_BUF_H
#define TPU_PRINT_BUF_H

#include <stdatomic.h>
#include <stdint.h>

#include "tpu_print.h"
#include "tpu_ref2d.h"

struct tpu_print_buf {
	uint8_t *base;			/* the slot's bytes in HBM */
	uint64_t room;			/* bytes after the header */
	_Atomic uint64_t used;		/* bytes claimed after the header */
	_Atomic uint64_t records, dropped;
};

/* Start the prints in the @size bytes at @base (at least the header's). */
void tpu_print_buf_open(struct tpu_print_buf *b, uint8_t *base, uint64_t size);

/*
 * Claim @size bytes (a multiple of 8) for one record: where to write it,
 * or NULL when it does not fit (counted as dropped).
 */
uint8_t *tpu_print_buf_claim(struct tpu_print_buf *b, uint64_t size);

/*
 * One TPU_OP_DEBUG_PRINT run: op @op of @step on @core, format @fmt, the
 * @nscalars values at @scalars, then every element of the @nrefs refs.
 */
void tpu_print_buf_record(struct tpu_print_buf *b, uint64_t step,
			  unsigned int op, uint32_t fmt, unsigned int core,
			  const int64_t *scalars, unsigned int nscalars,
			  const struct tpu_ref2d *refs, unsigned int nrefs);

/* Write the header: the magic and the counts. */
void tpu_print_buf_close(struct tpu_print_buf *b);

#endif /* TPU_PRINT_BUF_H */
