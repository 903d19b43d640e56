// SPDX-License-Identifier: MIT
/*
 * f32 fast paths of the hot elementwise ops (the epilogue of a matmul,
 * softmax's exp, masks): plain loops the compiler vectorises, giving the
 * reference path's bits. Exact float results (relu, neg, abs, max, min,
 * compares, select) may go to an f32 or bf16 dst; add, sub, mul and div
 * are correctly rounded in binary32 as the reference rounds the exact
 * result once, and exp is the reference's own double exp, so those go to
 * an f32 dst only (into bf16 they would round twice). Every row ends in
 * tpu_cast_row(), which quiets NaNs as the trip through a double does.
 */
#include <math.h>
#include <string.h>

#include "tpu_cast.h"
#include "tpu_dtype.h"
#include "tpu_elem.h"
#include "tpu_ops_int.h"

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
	if (b->bcast == TPU_BCAST_NONE || b->bcast == TPU_BCAST_COL)
		return tpu_elem_row(b->ref, i);
	if (b->bcast == TPU_BCAST_ROW)
		return tpu_elem_row(b->ref, 0);
	return &b->scalar;
}

static bool exact_in_f32(const struct tpu_plan_op *op)
{
	if (op->opcode == TPU_OP_SELECT)
		return true;
	if (op->opcode == TPU_OP_UNARY)
		return op->fn == TPU_UNARY_RELU || op->fn == TPU_UNARY_NEG ||
		       op->fn == TPU_UNARY_ABS;
	return op->fn == TPU_BINARY_MAX || op->fn == TPU_BINARY_MIN ||
	       (op->fn >= TPU_BINARY_EQ && op->fn <= TPU_BINARY_GE);
}

static bool has_f32_path(const struct tpu_plan_op *op)
{
	if (op->opcode == TPU_OP_UNARY)
		return exact_in_f32(op) || op->fn == TPU_UNARY_EXP;
	if (op->opcode == TPU_OP_BINARY)
		return op->fn != TPU_BINARY_POW && op->fn != TPU_BINARY_MOD &&
		       op->fn != TPU_BINARY_AND && op->fn != TPU_BINARY_OR;
	return op->opcode == TPU_OP_SELECT;
}

static void unary_row(uint8_t fn, float *t, const float *a, int64_t n)
{
	switch (fn) {
	case TPU_UNARY_RELU:
		for (int64_t j = 0; j < n; j++)
			t[j] = a[j] != a[j] ? a[j] : a[j] > 0 ? a[j] : 0;
		break;
	case TPU_UNARY_NEG:
		for (int64_t j = 0; j < n; j++)
			t[j] = -a[j];
		break;
	case TPU_UNARY_ABS:
		for (int64_t j = 0; j < n; j++)
			t[j] = fabsf(a[j]);
		break;
	default:	/* EXP: the reference's double exp, rounded once */
		for (int64_t j = 0; j < n; j++)
			t[j] = (float)exp(a[j]);
		break;
	}
}

#define ROW_LOOP(expr)						\
	do {							\
		for (int64_t j = 0; j < n; j++) {		\
			float x = a[j], y = b[j * step];	\
			t[j] = (expr);				\
		}						\
	} while (0)

static void binary_row(uint8_t fn, float *t, const float *a, const float *b,
		       int64_t step, int64_t n)
{
	switch (fn) {
	case TPU_BINARY_ADD:	ROW_LOOP(x + y); break;
	case TPU_BINARY_SUB:	ROW_LOOP(x - y); break;
	case TPU_BINARY_MUL:	ROW_LOOP(x * y); break;
	case TPU_BINARY_DIV:	ROW_LOOP(x / y); break;
	case TPU_BINARY_MAX:	ROW_LOOP(x != x ? x : y != y ? y : x >= y ? x : y); break;
	case TPU_BINARY_MIN:	ROW_LOOP(x != x ? x : y != y ? y : x <= y ? x : y); break;
	case TPU_BINARY_EQ:	ROW_LOOP(x == y); break;
	case TPU_BINARY_NE:	ROW_LOOP(x != y); break;
	case TPU_BINARY_LT:	ROW_LOOP(x < y); break;
	case TPU_BINARY_LE:	ROW_LOOP(x <= y); break;
	case TPU_BINARY_GT:	ROW_LOOP(x > y); break;
	default:		ROW_LOOP(x >= y); break;	/* GE */
	}
}

static bool mask_is_fast(uint8_t dtype)
{
	return dtype == TPU_DTYPE_F32 || tpu_dtype_size(dtype) == 1;
}

static void select_row(float *t, const struct tpu_ref2d *mask, int64_t i,
		       const float *a, int64_t sa, const float *b, int64_t sb,
		       int64_t n)
{
	if (mask->dtype == TPU_DTYPE_F32) {
		const float *m = tpu_elem_row(mask, i);

		for (int64_t j = 0; j < n; j++)
			t[j] = m[j] != 0 ? a[j * sa] : b[j * sb];
	} else {
		const uint8_t *m = tpu_elem_row(mask, i);

		for (int64_t j = 0; j < n; j++)
			t[j] = m[j] ? a[j * sa] : b[j * sb];
	}
}

bool tpu_op_f32(const struct tpu_plan_op *op, const struct tpu_op_args *args)
{
	const struct tpu_ref2d *d = &args->dst, *s0 = &args->src0;
	float *t = (float *)args->row_tmp[3];
	struct fsrc x = { 0 }, y = { 0 };
	int64_t sa, sb;

	if (!has_f32_path(op) || (d->dtype != TPU_DTYPE_F32 &&
				  !(d->dtype == TPU_DTYPE_BF16 && exact_in_f32(op))))
		return false;
	if (op->opcode == TPU_OP_SELECT ?
	    !mask_is_fast(s0->dtype) ||
	    !fsrc_of(&args->src1, op->bcast, &args->scalar, op->imm, &x) ||
	    !fsrc_of(&args->src2, op->bcast2, &args->scalar, op->imm2, &y) :
	    s0->dtype != TPU_DTYPE_F32 || (op->opcode == TPU_OP_BINARY &&
	    !fsrc_of(&args->src1, op->bcast, &args->scalar, op->imm, &x)))
		return false;
	for (int64_t i = 0; i < d->rows; i++) {
		const float *a = tpu_elem_row(s0, i);

		if (op->opcode == TPU_OP_UNARY) {
			unary_row(op->fn, t, a, d->cols);
		} else if (op->opcode == TPU_OP_BINARY) {
			const float *b = fsrc_row(&x, i, &sa);

			binary_row(op->fn, t, a, b, sa, d->cols);
		} else {
			const float *av = fsrc_row(&x, i, &sa);
			const float *bv = fsrc_row(&y, i, &sb);

			select_row(t, s0, i, av, sa, bv, sb, d->cols);
		}
		tpu_cast_row(tpu_elem_row(d, i), d->dtype, t, TPU_DTYPE_F32,
			     d->cols);
	}
	return true;
}
