// SPDX-License-Identifier: MIT
/*
 * Micro-ops of the kernel body on 2-D refs. Matmuls go to tpu_gemm;
 * elementwise ops go through rows of doubles, which hold every element type
 * exactly, so each op rounds once into its destination's type.
 */
#include <math.h>
#include <string.h>

#include "tpu_cast.h"
#include "tpu_dtype.h"
#include "tpu_gemm.h"
#include "tpu_ops.h"

static void *row_ptr(const struct tpu_ref2d *r, int64_t row)
{
	return (uint8_t *)r->p + row * r->ld * tpu_dtype_size(r->dtype);
}

static float f32_from_bits(uint32_t b)
{
	float f;

	memcpy(&f, &b, sizeof(f));
	return f;
}

static uint32_t f32_bits(float f)
{
	uint32_t b;

	memcpy(&b, &f, sizeof(b));
	return b;
}

static uint16_t bf16_round(float f)
{
	return tpu_bf16_round(f32_bits(f));
}

static void load_row(const struct tpu_ref2d *r, int64_t row, double *out,
		     int64_t n)
{
	const void *p = row_ptr(r, row);

	switch (r->dtype) {
	case TPU_DTYPE_F32:
		for (int64_t j = 0; j < n; j++)
			out[j] = ((const float *)p)[j];
		break;
	case TPU_DTYPE_BF16:
		for (int64_t j = 0; j < n; j++)
			out[j] = f32_from_bits((uint32_t)((const uint16_t *)p)[j] << 16);
		break;
	case TPU_DTYPE_INT8:
		for (int64_t j = 0; j < n; j++)
			out[j] = ((const int8_t *)p)[j];
		break;
	case TPU_DTYPE_UINT8:
		for (int64_t j = 0; j < n; j++)
			out[j] = ((const uint8_t *)p)[j];
		break;
	default:
		for (int64_t j = 0; j < n; j++)
			out[j] = ((const int32_t *)p)[j];
		break;
	}
}

/* Round to nearest even and saturate; NaN becomes 0. */
static double to_int(double v, double lo, double hi)
{
	if (isnan(v))
		return 0;
	v = nearbyint(v);
	return v < lo ? lo : v > hi ? hi : v;
}

static void store_row(const struct tpu_ref2d *r, int64_t row, const double *in,
		      int64_t n)
{
	void *p = row_ptr(r, row);

	switch (r->dtype) {
	case TPU_DTYPE_F32:
		for (int64_t j = 0; j < n; j++)
			((float *)p)[j] = (float)in[j];
		break;
	case TPU_DTYPE_BF16:
		for (int64_t j = 0; j < n; j++)
			((uint16_t *)p)[j] = bf16_round((float)in[j]);
		break;
	case TPU_DTYPE_INT8:
		for (int64_t j = 0; j < n; j++)
			((int8_t *)p)[j] = (int8_t)to_int(in[j], -128, 127);
		break;
	case TPU_DTYPE_UINT8:
		for (int64_t j = 0; j < n; j++)
			((uint8_t *)p)[j] = (uint8_t)to_int(in[j], 0, 255);
		break;
	default:
		for (int64_t j = 0; j < n; j++)
			((int32_t *)p)[j] = (int32_t)to_int(in[j], INT32_MIN,
							   INT32_MAX);
		break;
	}
}

static double gelu_tanh(double x)
{
	const double k = 0.7978845608028654;	/* sqrt(2 / pi) */

	return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

static double sigmoid(double x)
{
	return 1.0 / (1.0 + exp(-x));
}

static void unary_row(uint8_t fn, double *v, int64_t n)
{
	switch (fn) {
	case TPU_UNARY_IDENTITY:
		break;
	case TPU_UNARY_RELU:
		for (int64_t j = 0; j < n; j++)
			v[j] = v[j] > 0 ? v[j] : 0;	/* NaN -> 0, as max(x, 0) */
		break;
	case TPU_UNARY_GELU:
		for (int64_t j = 0; j < n; j++)
			v[j] = gelu_tanh(v[j]);
		break;
	case TPU_UNARY_SILU:
		for (int64_t j = 0; j < n; j++)
			v[j] = v[j] * sigmoid(v[j]);
		break;
	case TPU_UNARY_SIGMOID:
		for (int64_t j = 0; j < n; j++)
			v[j] = sigmoid(v[j]);
		break;
	case TPU_UNARY_TANH:
		for (int64_t j = 0; j < n; j++)
			v[j] = tanh(v[j]);
		break;
	case TPU_UNARY_EXP:
		for (int64_t j = 0; j < n; j++)
			v[j] = exp(v[j]);
		break;
	case TPU_UNARY_NEG:
		for (int64_t j = 0; j < n; j++)
			v[j] = -v[j];
		break;
	default:	/* TPU_UNARY_ABS */
		for (int64_t j = 0; j < n; j++)
			v[j] = fabs(v[j]);
		break;
	}
}

/* a[j] = fn(a[j], b[j * bstep]): bstep 0 broadcasts b[0] */
static void binary_row(uint8_t fn, double *a, const double *b, int64_t bstep,
		       int64_t n)
{
	switch (fn) {
	case TPU_BINARY_ADD:
		for (int64_t j = 0; j < n; j++)
			a[j] += b[j * bstep];
		break;
	case TPU_BINARY_SUB:
		for (int64_t j = 0; j < n; j++)
			a[j] -= b[j * bstep];
		break;
	case TPU_BINARY_MUL:
		for (int64_t j = 0; j < n; j++)
			a[j] *= b[j * bstep];
		break;
	case TPU_BINARY_MAX:
		for (int64_t j = 0; j < n; j++)
			a[j] = a[j] >= b[j * bstep] ? a[j] : b[j * bstep];
		break;
	default:	/* TPU_BINARY_MIN */
		for (int64_t j = 0; j < n; j++)
			a[j] = a[j] <= b[j * bstep] ? a[j] : b[j * bstep];
		break;
	}
}

static void op_zero(const struct tpu_ref2d *d)
{
	for (int64_t i = 0; i < d->rows; i++)
		memset(row_ptr(d, i), 0, d->cols * tpu_dtype_size(d->dtype));
}

/*
 * Row panels of a large matmul hold about this many flops (a few ms of
 * host time), so a reset stops the op between two of them.
 */
#define DOT_PANEL_FLOPS		(1ull << 28)

static bool aborted(const atomic_bool *abort)
{
	return abort && atomic_load_explicit(abort, memory_order_relaxed);
}

static void dot_rows(const struct tpu_plan_op *op, const struct tpu_ref2d *a,
		     const struct tpu_ref2d *b, const struct tpu_ref2d *c,
		     int64_t row, int64_t rows)
{
	bool ta = op->dot & TPU_DOT_LHS_CONTRACT_0;
	bool tb = op->dot & TPU_DOT_RHS_CONTRACT_1;
	bool acc = op->dot & TPU_DOT_ACCUMULATE;
	/* Row @row of op(A) is a column of A when A is stored transposed. */
	const uint8_t *ap = (const uint8_t *)a->p +
			    (ta ? row : row * a->ld) * tpu_dtype_size(a->dtype);
	void *cp = row_ptr(c, row);

	switch (a->dtype) {
	case TPU_DTYPE_F32:
		tpu_gemm_f32(ta, tb, rows, op->n, op->k, (const float *)ap, a->ld,
			     b->p, b->ld, cp, c->ld, acc);
		break;
	case TPU_DTYPE_BF16:
		tpu_gemm_bf16(ta, tb, rows, op->n, op->k, (const uint16_t *)ap,
			      a->ld, b->p, b->ld, cp, c->ld, acc);
		break;
	default:
		tpu_gemm_i8(a->dtype == TPU_DTYPE_UINT8,
			    b->dtype == TPU_DTYPE_UINT8, ta, tb, rows, op->n,
			    op->k, ap, a->ld, b->p, b->ld, cp, c->ld, acc);
		break;
	}
}

static void op_dot(const struct tpu_plan_op *op, const struct tpu_ref2d *a,
		   const struct tpu_ref2d *b, const struct tpu_ref2d *c,
		   const atomic_bool *abort)
{
	uint64_t row_flops = 2ull * op->n * op->k;
	int64_t panel = op->m;

	if (row_flops && row_flops * op->m > DOT_PANEL_FLOPS) {
		panel = DOT_PANEL_FLOPS / row_flops;
		panel = panel < 16 ? 16 : panel & ~(int64_t)15;
	}
	for (int64_t row = 0; row < op->m; row += panel) {
		if (row && aborted(abort))
			return;
		dot_rows(op, a, b, c, row,
			 op->m - row < panel ? op->m - row : panel);
	}
}

/* A plain cast or copy (the accumulator stored) without the double rows. */
static bool cast_rows(const struct tpu_ref2d *d, const struct tpu_ref2d *s)
{
	for (int64_t i = 0; i < d->rows; i++)
		if (!tpu_cast_row(row_ptr(d, i), d->dtype, row_ptr(s, i),
				  s->dtype, d->cols))
			return false;	/* no fast path: fails on row 0 */
	return true;
}

/*
 * relu of an f32 ref, and add/sub/mul/max/min of f32 refs (a bias row, a
 * scalar): exact in float, so the same bits as the double rows give (a sum
 * or product of two floats is exact in double and rounds once either way).
 * Then one cast into the destination. The fused epilogue of a matmul.
 */
static bool f32_rows(const struct tpu_plan_op *op,
		     const struct tpu_op_args *args)
{
	const struct tpu_ref2d *d = &args->dst, *s0 = &args->src0;
	const struct tpu_ref2d *s1 = &args->src1;
	double dscalar = args->scalar;
	float scalar = (float)dscalar;
	float *t = (float *)args->row_tmp[0];
	bool binary = op->opcode == TPU_OP_BINARY;
	const float *b = NULL;
	int64_t bstep = 1;

	if (s0->dtype != TPU_DTYPE_F32 ||
	    (d->dtype != TPU_DTYPE_F32 && d->dtype != TPU_DTYPE_BF16) ||
	    (!binary && op->fn != TPU_UNARY_RELU))
		return false;
	if (binary && (op->bcast == TPU_BCAST_SMEM || op->bcast == TPU_BCAST_IMM)) {
		if ((double)scalar != dscalar)
			return false;	/* an int32 that float cannot hold */
		b = &scalar;
		bstep = 0;
	} else if (binary && (op->bcast == TPU_BCAST_COL ||
			      s1->dtype != TPU_DTYPE_F32)) {
		return false;
	}
	for (int64_t i = 0; i < d->rows; i++) {
		const float *a = row_ptr(s0, i);

		if (binary && bstep)
			b = row_ptr(s1, op->bcast == TPU_BCAST_ROW ? 0 : i);
		for (int64_t j = 0; j < d->cols; j++) {
			float x = a[j], y = binary ? b[j * bstep] : 0;

			if (!binary)
				t[j] = x > 0 ? x : 0;	/* NaN -> 0 */
			else if (op->fn == TPU_BINARY_ADD)
				t[j] = x + y;
			else if (op->fn == TPU_BINARY_SUB)
				t[j] = x - y;
			else if (op->fn == TPU_BINARY_MUL)
				t[j] = x * y;
			else if (op->fn == TPU_BINARY_MAX)
				t[j] = x >= y ? x : y;
			else
				t[j] = x <= y ? x : y;
		}
		tpu_cast_row(row_ptr(d, i), d->dtype, t, TPU_DTYPE_F32, d->cols);
	}
	return true;
}

static void op_elementwise(const struct tpu_plan_op *op,
			   const struct tpu_op_args *args)
{
	const struct tpu_ref2d *d = &args->dst, *s0 = &args->src0;
	const struct tpu_ref2d *s1 = &args->src1;
	double *a = args->row_tmp[0], *b = args->row_tmp[1];
	bool binary = op->opcode == TPU_OP_BINARY;
	bool bcast_scalar = op->bcast == TPU_BCAST_SMEM ||
			    op->bcast == TPU_BCAST_IMM;

	if (!binary && op->fn == TPU_UNARY_IDENTITY &&
	    cast_rows(d, s0))
		return;
	if (f32_rows(op, args))
		return;
	if (binary && op->bcast == TPU_BCAST_ROW)
		load_row(s1, 0, b, d->cols);
	if (bcast_scalar)
		b[0] = args->scalar;
	for (int64_t i = 0; i < d->rows; i++) {
		if (i % 256 == 255 && aborted(args->abort))
			return;
		load_row(s0, i, a, d->cols);
		if (!binary) {
			unary_row(op->fn, a, d->cols);
		} else if (op->bcast == TPU_BCAST_NONE) {
			load_row(s1, i, b, d->cols);
			binary_row(op->fn, a, b, 1, d->cols);
		} else if (op->bcast == TPU_BCAST_ROW) {
			binary_row(op->fn, a, b, 1, d->cols);
		} else if (op->bcast == TPU_BCAST_COL) {
			load_row(s1, i, b, 1);
			binary_row(op->fn, a, b, 0, d->cols);
		} else {
			binary_row(op->fn, a, b, 0, d->cols);
		}
		store_row(d, i, a, d->cols);
	}
}

void tpu_op_run(const struct tpu_plan_op *op, const struct tpu_op_args *args)
{
	switch (op->opcode) {
	case TPU_OP_ZERO:
		op_zero(&args->dst);
		break;
	case TPU_OP_DOT:
		op_dot(op, &args->src0, &args->src1, &args->dst, args->abort);
		break;
	default:
		op_elementwise(op, args);
		break;
	}
}
