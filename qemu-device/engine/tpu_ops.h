/* SPDX-License-Identifier: MIT */
/*
 * The micro-ops of a kernel body (enum tpu_op) on 2-D refs the caller has
 * resolved; shapes and dtypes were checked by tpu_job_decode().
 */
#ifndef TPU_OPS_H
#define TPU_OPS_H

#include <stdatomic.h>
#include <stdbool.h>

#include "tpu_plan.h"
#include "tpu_ref2d.h"

struct tpu_op_args {
	struct tpu_ref2d dst;
	struct tpu_ref2d src0;		/* if tpu_op_reads_src0() */
	struct tpu_ref2d src1;		/* if tpu_op_reads_src1() */
	double scalar;			/* TPU_BCAST_SMEM or _IMM: its value */
	double *row_tmp[2];		/* work rows, as wide as any block */
	/* set: stop early (a reset); the caller sees the flag and fails */
	const atomic_bool *abort;
};

/* Whether @op reads its sources as VMEM refs (not SMEM, not an immediate). */
static inline bool tpu_op_reads_src0(const struct tpu_plan_op *op)
{
	return op->opcode != TPU_OP_ZERO;
}

static inline bool tpu_op_reads_src1(const struct tpu_plan_op *op)
{
	return op->opcode == TPU_OP_DOT ||
	       (op->opcode == TPU_OP_BINARY && op->bcast != TPU_BCAST_SMEM &&
		op->bcast != TPU_BCAST_IMM);
}

void tpu_op_run(const struct tpu_plan_op *op, const struct tpu_op_args *args);

#endif /* TPU_OPS_H */
