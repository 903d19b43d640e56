/* SPDX-License-Identifier: MIT */
/*
 * The micro-ops of a kernel body (enum tpu_opcode) on 2-D refs the caller
 * has resolved; shapes and dtypes were checked by tpu_job_decode().
 */
#ifndef TPU_OPS_H
#define TPU_OPS_H

#include <stdatomic.h>
#include <stdbool.h>

#include "tpu_plan.h"
#include "tpu_ref2d.h"

/* A scalar operand: bcast smem/imm/scalar's value, iota's offset, roll's shift. */
struct tpu_op_scalar {
	double f;		/* the value (rounded to odd if a huge int) */
	int64_t i;		/* the value, if is_int */
	bool is_int;		/* an integer: int32 SMEM or a program's */
};

struct tpu_op_args {
	struct tpu_ref2d dst;
	struct tpu_ref2d src0;		/* if tpu_op_reads_src(op, 0) */
	struct tpu_ref2d src1;		/* if tpu_op_reads_src(op, 1) */
	struct tpu_ref2d src2;		/* if tpu_op_reads_src(op, 2) */
	struct tpu_op_scalar scalar;
	int64_t valid_rows, valid_cols;	/* in-bounds part of src0 (REDUCE) */
	double *row_tmp[4];		/* work rows, as wide as any block */
	/* set: stop early (a reset); the caller sees the flag and fails */
	const atomic_bool *abort;
};

/* Where an op failed (integer division by zero, a gather's index). */
struct tpu_op_fault {
	unsigned int code;		/* enum tpu_job_error */
	int64_t row, col;		/* the element, in dst */
	int64_t index;			/* a gather's index out of range */
};

/* Whether @op reads source @k as a VMEM ref (not SMEM, not a scalar). */
static inline bool tpu_op_reads_src(const struct tpu_plan_op *op, int k)
{
	static const uint8_t reads_ref[TPU_BCAST_COUNT] = {
		[TPU_BCAST_NONE] = 1, [TPU_BCAST_ROW] = 1, [TPU_BCAST_COL] = 1,
	};

	switch (op->opcode) {
	case TPU_OP_ZERO:
	case TPU_OP_IOTA:
	case TPU_OP_PRNG_SEED:	/* scalars: the scalar core's */
	case TPU_OP_PRNG_BITS:
	case TPU_OP_DELAY:
		return false;
	case TPU_OP_DOT:
	case TPU_OP_GATHER:
		return k < 2;
	case TPU_OP_BINARY:
		return k == 0 || (k == 1 && reads_ref[op->bcast]);
	case TPU_OP_SELECT:
		return k == 0 || reads_ref[k == 1 ? op->bcast : op->bcast2];
	case TPU_OP_DEBUG_PRINT:	/* each source that is not none */
		return true;
	default:	/* UNARY, REDUCE, TRANSPOSE, ROLL */
		return k == 0;
	}
}

/* Run @op: 0, or -1 with @fault filled (integer div/mod by zero, a gather
 * index out of range). */
int tpu_op_run(const struct tpu_plan_op *op, const struct tpu_op_args *args,
	       struct tpu_op_fault *fault);

#endif /* TPU_OPS_H */
