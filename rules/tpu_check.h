/* SPDX-License-Identifier: MIT */
/*
 * What the descriptor's checks share between their files: tpu_job_check.c
 * decodes the header, operands and scratch, tpu_window_check.c each window,
 * tpu_op_check.c each micro-op.
 * Internal to rules/.
 */
#ifndef TPU_CHECK_H
#define TPU_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpu_plan.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define le16(x) __builtin_bswap16(x)
#define le32(x) __builtin_bswap32(x)
#define le64(x) __builtin_bswap64(x)
#else
#define le16(x) (x)
#define le32(x) (x)
#define le64(x) (x)
#endif

/* Fail with TPU_JOB_ERR_DESCRIPTOR and the message; returns the code. */
int tpu_check_error(struct tpu_job_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

bool tpu_check_all_zero(const void *p, size_t n);

struct tpu_plan_prog tpu_check_decode_prog(const struct tpu_job_prog *p);

/*
 * Verify body program @prog, inside @loop_depth loops, leaves @nresults
 * values; fails with TPU_JOB_ERR_BYTECODE naming "@owner @index: @what"
 * ("op 2: predicate").
 */
int tpu_check_prog(const struct tpu_plan *plan, unsigned int loop_depth,
		   struct tpu_plan_prog prog, unsigned int nresults,
		   struct tpu_job_result *res, const char *owner,
		   unsigned int index, const char *what);

/* Decode and check window @i; operands and scratch decoded (tpu_window_check.c). */
int tpu_check_window(struct tpu_plan *plan, unsigned int i,
		     const struct tpu_job_window *raw, struct tpu_job_result *res);

/* How messages name a ref: "operand 2", "scratch 0", "window 1". */
void tpu_check_ref_name(struct tpu_plan_ref r, char *buf, size_t len);

/*
 * The checks of the memory-model ops (tpu_copy_check.c), once the generic
 * ones (fields the opcode does not use, programs) passed.
 */
int tpu_check_copy(const struct tpu_plan *plan, unsigned int i,
		   const struct tpu_plan_op *op, struct tpu_job_result *res);
int tpu_check_sem_op(const struct tpu_plan *plan, unsigned int i,
		     const struct tpu_plan_op *op, struct tpu_job_result *res);
int tpu_check_scalar_store(const struct tpu_plan *plan, unsigned int i,
			   const struct tpu_plan_op *op,
			   struct tpu_job_result *res);

/* The loop bodies open at the op being decoded (tpu_loop_check.c). */
struct tpu_loop_nest {
	unsigned int depth;
	unsigned int op[TPU_JOB_MAX_LOOP_DEPTH];	/* each loop's op */
	uint32_t end[TPU_JOB_MAX_LOOP_DEPTH];		/* one past its body */
};

/* Before op @i: close the bodies that ended there; op @i's depth. */
unsigned int tpu_loop_nest_enter(struct tpu_loop_nest *nest, unsigned int i);

/* After loop op @i was decoded and checked: its body is open. */
void tpu_loop_nest_open(struct tpu_loop_nest *nest, const struct tpu_plan *plan,
			unsigned int i);

/* A TPU_OP_LOOP's body range, fields and programs; sets its body_end. */
int tpu_check_loop(struct tpu_plan *plan, unsigned int i,
		   struct tpu_plan_op *op, const struct tpu_loop_nest *nest,
		   struct tpu_job_result *res);

/* Windows @op names whose starts read loop indices the op is not inside. */
int tpu_check_loop_refs(const struct tpu_plan *plan, unsigned int i,
			const struct tpu_plan_op *op, struct tpu_job_result *res);

/* Decode and check micro-op @i inside the loops of @nest (tpu_op_check.c). */
int tpu_check_op(struct tpu_plan *plan, unsigned int i,
		 const struct tpu_job_op *raw, const struct tpu_loop_nest *nest,
		 struct tpu_job_result *res);

#endif /* TPU_CHECK_H */
