// SPDX-License-Identifier: MIT
/*
 * The fast path of the vector unit's elementwise ops: f32 data through the
 * vectorised row kernels (tpu_vec.h). Integer data (iotas, masks made from
 * them) takes the reference path's exact 64-bit rows (tpu_ops_ew.c).
 *
 * f32 results are the reference path's bits (exact or correctly rounded:
 * +, -, *, /, sqrt, max, compares, select, ...), except exp, within 1 ulp
 * (SLEEF's, doc/numerics.md). They go to an f32 dst, or to a bf16 or bool
 * dst where the f32 result is exact (relu, floor, max, compares, select,
 * ...) so that dst still sees one rounding; other results into bf16 take
 * the reference path. Every f32 row ends in tpu_cast_row(), which quiets
 * NaNs as the reference's trip through a double does.
 */
#include <math.h>
#include <string.h>

#include "tpu_cast.h"
#include "tpu_dtype.h"
#include "tpu_elem.h"
#include "tpu_ops_int.h"
#include "tpu_vec.h"

/* A broadcast operand as floats: a row (step 1) or one value (step 0). */
struct fsrc {
	const struct tpu_ref2d *ref;
	unsigned int bcast;
	float scalar;
};

/* Whether b reads as f32: an f32 ref, or a scalar a float holds exactly. */
static bool fsrc_of(const struct tpu_ref2d *ref, unsigned int bcast,
		    const struct tpu_op_scalar *s, uint32_t imm,
		    struct fsrc *out)
{
	double v = bcast == TPU_BCAST_IMM ? tpu_op_imm(imm) : s->f;

	*out = (struct fsrc){ ref, bcast, (float)v };
	if (bcast <= TPU_BCAST_COL)
		return ref->dtype == TPU_DTYPE_F32;
	return !s->is_int || (double)out->scalar == v || bcast == TPU_BCAST_IMM;
}

static const float *fsrc_row(const struct fsrc *b, int64_t i, int64_t *step)
{
	*step = b->bcast == TPU_BCAST_NONE || b->bcast == TPU_BCAST_ROW;
	if (b->bcast == TPU_BCAST_NONE)
		return tpu_elem_row(b->ref, i);
	if (b->bcast == TPU_BCAST_ROW)
		return tpu_elem_row(b->ref, 0);
	if (b->bcast == TPU_BCAST_COL)
		return tpu_elem_row(b->ref, i);	/* this row's one element */
	return &b->scalar;
}

/* An f32 result that is exact, so it may be stored in any float dst. */
static bool exact_in_f32(const struct tpu_plan_op *op)
{
	if (op->opcode == TPU_OP_SELECT)
		return true;
	if (op->opcode == TPU_OP_UNARY) {
		switch (op->fn) {
		case TPU_UNARY_RELU: case TPU_UNARY_NEG: case TPU_UNARY_ABS:
		case TPU_UNARY_FLOOR: case TPU_UNARY_CEIL: case TPU_UNARY_SIGN:
		case TPU_UNARY_NOT: case TPU_UNARY_CLAMP: case TPU_UNARY_ROUND:
			return true;
		default:
			return false;
		}
	}
	return op->fn == TPU_BINARY_MAX || op->fn == TPU_BINARY_MIN ||
	       (op->fn >= TPU_BINARY_EQ && op->fn <= TPU_BINARY_OR);
}

/* A result of 0 or 1 (a mask). */
static bool is_mask_result(const struct tpu_plan_op *op)
{
	if (op->opcode == TPU_OP_UNARY)
		return op->fn == TPU_UNARY_NOT;
	return op->opcode == TPU_OP_BINARY && op->fn >= TPU_BINARY_EQ &&
	       op->fn <= TPU_BINARY_OR;
}

static bool f32_dst_ok(const struct tpu_plan_op *op, uint8_t dt)
{
	if (dt == TPU_DTYPE_F32)
		return true;
	if (dt == TPU_DTYPE_BF16)
		return exact_in_f32(op);
	return dt == TPU_DTYPE_BOOL && is_mask_result(op);
}

static void store_row(const struct tpu_ref2d *d, int64_t i, const float *t)
{
	if (d->dtype == TPU_DTYPE_BOOL) {
		uint8_t *o = tpu_elem_row(d, i);

		for (int64_t j = 0; j < d->cols; j++)
			o[j] = t[j] != 0;
		return;
	}
	tpu_cast_row(tpu_elem_row(d, i), d->dtype, t, TPU_DTYPE_F32, d->cols);
}

/*
 * The functions whose vector kernel gives the reference path's bits
 * (exact, or one correct rounding either way), and exp, within 1 ulp
 * (doc/numerics.md): softmax and attention live on it. The others
 * (tanh, log, pow, gelu, ...) stay on the reference path, so their
 * results do not depend on the data's dtype.
 */
static bool vec_fn(const struct tpu_plan_op *op)
{
	if (op->opcode == TPU_OP_SELECT || exact_in_f32(op))
		return true;
	if (op->opcode == TPU_OP_UNARY)
		return op->fn == TPU_UNARY_EXP || op->fn == TPU_UNARY_SQUARE ||
		       op->fn == TPU_UNARY_RECIPROCAL || op->fn == TPU_UNARY_SQRT;
	return op->opcode == TPU_OP_BINARY &&
	       (op->fn == TPU_BINARY_ADD || op->fn == TPU_BINARY_SUB ||
		op->fn == TPU_BINARY_MUL || op->fn == TPU_BINARY_DIV);
}

static bool f32_sources(const struct tpu_plan_op *op,
			const struct tpu_op_args *args,
			struct fsrc *x, struct fsrc *y)
{
	const struct tpu_ref2d *s0 = &args->src0;

	if (!vec_fn(op))
		return false;
	switch (op->opcode) {
	case TPU_OP_UNARY:
		return s0->dtype == TPU_DTYPE_F32;
	case TPU_OP_BINARY:
		return s0->dtype == TPU_DTYPE_F32 &&
		       fsrc_of(&args->src1, op->bcast, &args->scalar, op->imm, x);
	case TPU_OP_SELECT:
		return (s0->dtype == TPU_DTYPE_F32 ||
			tpu_dtype_size(s0->dtype) == 1) &&
		       fsrc_of(&args->src1, op->bcast, &args->scalar, op->imm, x) &&
		       fsrc_of(&args->src2, op->bcast2, &args->scalar, op->imm2, y);
	default:
		return false;
	}
}

bool tpu_op_fast(const struct tpu_plan_op *op, const struct tpu_op_args *args)
{
	const struct tpu_ref2d *d = &args->dst, *s0 = &args->src0;
	float *t = (float *)args->row_tmp[3];
	float lo = (float)tpu_op_imm(op->imm), hi = (float)tpu_op_imm(op->imm2);
	struct fsrc x = { 0 }, y = { 0 };
	int64_t sa, sb;

	if (!f32_dst_ok(op, d->dtype) || !f32_sources(op, args, &x, &y))
		return false;
	for (int64_t i = 0; i < d->rows; i++) {
		const void *a = tpu_elem_row(s0, i);

		if (op->opcode == TPU_OP_UNARY) {
			tpu_vec_unary(op->fn, t, a, d->cols, lo, hi);
		} else if (op->opcode == TPU_OP_BINARY) {
			const float *b = fsrc_row(&x, i, &sa);

			tpu_vec_binary(op->fn, t, a, b, sa, d->cols);
		} else {
			const float *av = fsrc_row(&x, i, &sa);
			const float *bv = fsrc_row(&y, i, &sb);

			tpu_vec_select(t, a, s0->dtype, av, sa, bv, sb, d->cols);
		}
		store_row(d, i, t);
	}
	return true;
}
