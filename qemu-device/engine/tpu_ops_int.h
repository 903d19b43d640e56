/* SPDX-License-Identifier: MIT */
/* The micro-ops' files (tpu_ops*.c) to each other. Internal. */
#ifndef TPU_OPS_INT_H
#define TPU_OPS_INT_H

#include "tpu_ops.h"

/* UNARY, BINARY, SELECT, IOTA: the reference path (tpu_ops_ew.c). */
int tpu_op_elementwise(const struct tpu_plan_op *op,
		       const struct tpu_op_args *args,
		       struct tpu_op_fault *fault);

/* REDUCE over the in-bounds part of src0 (tpu_ops_reduce.c). */
void tpu_op_reduce(const struct tpu_plan_op *op,
		   const struct tpu_op_args *args);

/* TRANSPOSE, ROLL: src0's elements into dst, as bytes (tpu_ops_move.c). */
void tpu_op_move(const struct tpu_plan_op *op, const struct tpu_op_args *args);

/* GATHER: jnp.take_along_axis; -1 with @fault for a broken promise (tpu_ops_gather.c). */
int tpu_op_gather(const struct tpu_plan_op *op, const struct tpu_op_args *args,
		  struct tpu_op_fault *fault);

/*
 * The fast path for f32 data (the vector kernels), without the rows of
 * doubles (tpu_ops_f32.c). False, doing nothing, when @op's data has none.
 */
bool tpu_op_fast(const struct tpu_plan_op *op, const struct tpu_op_args *args);

/* binary32 bits as a double (imm, imm2). */
double tpu_op_imm(uint32_t bits);

#endif /* TPU_OPS_INT_H */
