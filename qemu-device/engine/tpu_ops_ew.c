// SPDX-License-Identifier: MIT
/*
 * The reference path of the elementwise ops (UNARY, BINARY, SELECT, IOTA):
 * rows of doubles, exact conversions of the inputs, each function in
 * double with add, sub, mul, div, mod and sqrt rounded to odd
 * (tpu_elem.h) so that the one rounding into dst is that of the exact
 * result; integer inputs with an integer dst in 64-bit integers modulo
 * 2^64, stored as their low bits: add, sub, mul, neg, abs, square, pow and
 * iota wrap around in dst's width, two's complement, as XLA's do.
 */
#include <math.h>

#include "tpu_dtype.h"
#include "tpu_elem.h"
#include "tpu_ops_int.h"

/* --- one element --- */

static double add_odd(double a, double b)
{
	double s = a + b, bb = s - a;

	return tpu_elem_sticky(s, (a - (s - bb)) + (b - bb));
}

static double mul_odd(double a, double b)
{
	double p = a * b;

	return tpu_elem_sticky(p, fma(a, b, -p));
}

static double div_odd(double a, double b)
{
	double q = a / b, r;

	if (!isfinite(q) || !isfinite(b) || b == 0)
		return q;
	r = fma(-q, b, a);		/* exact: a - q b */
	return tpu_elem_sticky(q, r == 0 ? 0 : (r > 0) == (b > 0) ? 1 : -1);
}

static double sqrt_odd(double x)
{
	double s = sqrt(x);

	return isfinite(s) ? tpu_elem_sticky(s, fma(-s, s, x)) : s;
}

/* Python's float %: the sign of b; x % 0 is NaN. */
static double mod_f(double a, double b)
{
	double r = fmod(a, b);

	if (r == 0)
		return copysign(0, b);
	if ((r < 0) != (b < 0))
		return add_odd(r, b);
	return r;
}

/* jnp.maximum and jnp.minimum: NaN propagates. */
static double max_f(double a, double b)
{
	return isnan(a) ? a : isnan(b) ? b : a >= b ? a : b;
}

static double min_f(double a, double b)
{
	return isnan(a) ? a : isnan(b) ? b : a <= b ? a : b;
}

static double sigmoid(double x)
{
	return 1.0 / (1.0 + exp(-x));
}

static double gelu_tanh(double x)
{
	const double k = 0.7978845608028654;	/* sqrt(2 / pi) */

	return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

static double unary_f(uint8_t fn, double x, double lo, double hi)
{
	switch (fn) {
	case TPU_UNARY_IDENTITY:	return x;
	case TPU_UNARY_RELU:		return max_f(x, 0);
	case TPU_UNARY_GELU:		return gelu_tanh(x);
	case TPU_UNARY_SILU:		return x * sigmoid(x);
	case TPU_UNARY_SIGMOID:		return sigmoid(x);
	case TPU_UNARY_TANH:		return tanh(x);
	case TPU_UNARY_SIN:		return sin(x);
	case TPU_UNARY_COS:		return cos(x);
	case TPU_UNARY_ERF:		return erf(x);
	case TPU_UNARY_EXP:		return exp(x);
	case TPU_UNARY_NEG:		return -x;
	case TPU_UNARY_ABS:		return fabs(x);
	case TPU_UNARY_RECIPROCAL:	return div_odd(1, x);
	case TPU_UNARY_SQRT:		return sqrt_odd(x);
	case TPU_UNARY_RSQRT:		return 1 / sqrt(x);
	case TPU_UNARY_LOG:		return log(x);
	case TPU_UNARY_LOG1P:		return log1p(x);
	case TPU_UNARY_EXP2:		return exp2(x);
	case TPU_UNARY_SQUARE:		return mul_odd(x, x);
	case TPU_UNARY_FLOOR:		return floor(x);
	case TPU_UNARY_CEIL:		return ceil(x);
	case TPU_UNARY_SIGN:		return x > 0 ? 1 : x < 0 ? -1 : x;
	case TPU_UNARY_NOT:		return x == 0;
	case TPU_UNARY_CLAMP:		return min_f(max_f(x, lo), hi);
	default:			return nearbyint(x);	/* ROUND */
	}
}

static double binary_f(uint8_t fn, double a, double b)
{
	switch (fn) {
	case TPU_BINARY_ADD:	return add_odd(a, b);
	case TPU_BINARY_SUB:	return add_odd(a, -b);
	case TPU_BINARY_MUL:	return mul_odd(a, b);
	case TPU_BINARY_MAX:	return max_f(a, b);
	case TPU_BINARY_MIN:	return min_f(a, b);
	case TPU_BINARY_DIV:	return div_odd(a, b);
	case TPU_BINARY_POW:	return pow(a, b);
	case TPU_BINARY_MOD:	return mod_f(a, b);
	case TPU_BINARY_EQ:	return a == b;
	case TPU_BINARY_NE:	return a != b;
	case TPU_BINARY_LT:	return a < b;
	case TPU_BINARY_LE:	return a <= b;
	case TPU_BINARY_GT:	return a > b;
	case TPU_BINARY_GE:	return a >= b;
	case TPU_BINARY_AND:	return a != 0 && b != 0;
	default:		return a != 0 || b != 0;	/* OR */
	}
}

/* Python's // and % on integers; false when b is 0. */
static bool floor_divmod(int64_t a, int64_t b, int64_t *q, int64_t *r)
{
	if (!b)
		return false;
	if (a == INT64_MIN && b == -1) {
		*q = INT64_MIN;		/* wraps, as XLA's INT_MIN / -1 does */
		*r = 0;
		return true;
	}
	*q = a / b;
	*r = a % b;
	if (*r && (*r < 0) != (b < 0)) {
		*q -= 1;
		*r += b;
	}
	return true;
}

/* @v's low @bits bits as a two's complement (or, !@is_signed, plain) value. */
static int64_t wrap_to(uint64_t v, unsigned int bits, bool is_signed)
{
	uint64_t m = bits >= 64 ? ~0ull : (1ull << bits) - 1;

	v &= m;
	if (is_signed && bits < 64 && v >> (bits - 1))
		v |= ~m;
	return (int64_t)v;
}

/*
 * XLA's shifts on dst's width: a count outside [0, width) shifts it all
 * out. SHR of a uint32 dst copies the top bit in, as XLA's
 * shift_right_arithmetic of u32 does, and wraps back to unsigned (uint8
 * keeps its older meaning: a plain >> of the unsigned value).
 */
static int64_t shift_i(uint8_t fn, int64_t a, int64_t n, unsigned int bits,
		       uint8_t dtype)
{
	bool is_signed = !tpu_dtype_is_unsigned(dtype);
	uint64_t u = (uint64_t)wrap_to((uint64_t)a, bits, false);
	bool out = n < 0 || n >= (int64_t)bits;

	if (fn == TPU_BINARY_SHL)
		return out ? 0 : wrap_to(u << n, bits, is_signed);
	if (fn == TPU_BINARY_SHR_LOGICAL)
		return out ? 0 : wrap_to(u >> n, bits, is_signed);
	/* SHR: arithmetic */
	a = wrap_to(u, bits, is_signed || dtype == TPU_DTYPE_UINT32);
	a = out ? (a < 0 ? -1 : 0) : a >> n;
	return wrap_to((uint64_t)a, bits, is_signed);
}

/*
 * XLA's u32 division by zero for a uint32 dst: x / 0 = UINT32_MAX and
 * x % 0 = x (non-zero divisors truncate: the floor of non-negative values).
 * False where that is not the case (the integer path serves).
 */
static bool div_zero_u32(uint8_t fn, int64_t a, int64_t b, int64_t *out)
{
	if (b || (fn != TPU_BINARY_DIV && fn != TPU_BINARY_MOD))
		return false;
	*out = fn == TPU_BINARY_DIV ? UINT32_MAX : a;
	return true;
}

/*
 * x ** n by repeated squaring modulo 2^64, as lax.integer_pow's multiplies
 * wrap. n < 0: the exact value truncated toward zero (1 of 1, +-1 of -1,
 * else 0; 0 ** -n is 0, as XLA's, not a division by zero).
 */
static int64_t pow_i(int64_t x, int64_t n)
{
	int64_t acc = 1;

	if (n < 0)
		return x == 1 ? 1 : x == -1 ? (n & 1 ? -1 : 1) : 0;
	for (; n; n >>= 1) {
		if (n & 1)
			acc = tpu_elem_wrap_mul(acc, x);
		x = tpu_elem_wrap_mul(x, x);
	}
	return acc;
}

/* fn on integers (modulo 2^64); false on division by zero. */
static bool binary_i(uint8_t fn, int64_t a, int64_t b, int64_t *out)
{
	int64_t q, r;

	switch (fn) {
	case TPU_BINARY_BITAND:	*out = a & b; return true;
	case TPU_BINARY_BITOR:	*out = a | b; return true;
	case TPU_BINARY_BITXOR:	*out = a ^ b; return true;
	case TPU_BINARY_ADD:	*out = tpu_elem_wrap_add(a, b); return true;
	case TPU_BINARY_SUB:	*out = tpu_elem_wrap_sub(a, b); return true;
	case TPU_BINARY_MUL:	*out = tpu_elem_wrap_mul(a, b); return true;
	case TPU_BINARY_POW:	*out = pow_i(a, b); return true;
	case TPU_BINARY_MAX:	*out = a > b ? a : b; return true;
	case TPU_BINARY_MIN:	*out = a < b ? a : b; return true;
	case TPU_BINARY_EQ:	*out = a == b; return true;
	case TPU_BINARY_NE:	*out = a != b; return true;
	case TPU_BINARY_LT:	*out = a < b; return true;
	case TPU_BINARY_LE:	*out = a <= b; return true;
	case TPU_BINARY_GT:	*out = a > b; return true;
	case TPU_BINARY_GE:	*out = a >= b; return true;
	case TPU_BINARY_AND:	*out = a && b; return true;
	case TPU_BINARY_OR:	*out = a || b; return true;
	default:
		if (!floor_divmod(a, b, &q, &r))
			return false;
		*out = fn == TPU_BINARY_DIV ? q : r;
		return true;
	}
}

/* --- broadcast sources --- */

/* A broadcast operand: src1 with bcast, or select's src2 with bcast2. */
struct bsrc {
	const struct tpu_ref2d *ref;
	unsigned int bcast;
	double f;		/* its scalar, when it has one */
	int64_t i;
	bool is_int;
};

static struct bsrc bsrc_of(const struct tpu_ref2d *ref, unsigned int bcast,
			   const struct tpu_op_scalar *s, uint32_t imm)
{
	struct bsrc b = { ref, bcast, s->f, s->i, s->is_int };

	if (bcast == TPU_BCAST_IMM) {
		/* x // 3 on integers floors exactly: a whole immediate is an int */
		b.f = tpu_op_imm(imm);
		b.is_int = b.f == nearbyint(b.f) && fabs(b.f) <= 0x1p62;
		b.i = b.is_int ? (int64_t)b.f : 0;
	} else if (bcast <= TPU_BCAST_COL) {
		b.is_int = tpu_dtype_is_int(ref->dtype);
	}
	return b;
}

/* b's values for dst row @i: @n of them (step 1), or one (step 0). */
static int64_t bsrc_load(const struct bsrc *b, int64_t i, int64_t n,
			 double *buf)
{
	if (b->bcast == TPU_BCAST_NONE || b->bcast == TPU_BCAST_ROW) {
		tpu_elem_load(b->ref, b->bcast == TPU_BCAST_ROW ? 0 : i, buf, n);
		return 1;
	}
	if (b->bcast == TPU_BCAST_COL)
		tpu_elem_load(b->ref, i, buf, 1);
	else
		buf[0] = b->f;
	return 0;
}

static int64_t bsrc_load_i64(const struct bsrc *b, int64_t i, int64_t n,
			     int64_t *buf)
{
	if (b->bcast == TPU_BCAST_NONE || b->bcast == TPU_BCAST_ROW) {
		tpu_elem_load_i64(b->ref, b->bcast == TPU_BCAST_ROW ? 0 : i, buf, n);
		return 1;
	}
	if (b->bcast == TPU_BCAST_COL)
		tpu_elem_load_i64(b->ref, i, buf, 1);
	else
		buf[0] = b->i;
	return 0;
}

/* --- the ops --- */

/* An integer dst's width and sign, for wrapping. */
static unsigned int int_bits(uint8_t dtype)
{
	return 8 * (unsigned int)tpu_dtype_size(dtype);
}

/* The unary functions an integer computes in the integers (floor of one is itself). */
static bool int_unary_fn(uint8_t fn, int64_t *x)
{
	switch (fn) {
	case TPU_UNARY_IDENTITY: case TPU_UNARY_FLOOR: case TPU_UNARY_CEIL:
	case TPU_UNARY_ROUND:
		return true;
	case TPU_UNARY_NEG:	*x = tpu_elem_wrap_sub(0, *x); return true;
	case TPU_UNARY_ABS:	*x = *x < 0 ? tpu_elem_wrap_sub(0, *x) : *x; return true;
	case TPU_UNARY_SQUARE:	*x = tpu_elem_wrap_mul(*x, *x); return true;
	case TPU_UNARY_RELU:	*x = *x > 0 ? *x : 0; return true;
	case TPU_UNARY_SIGN:	*x = (*x > 0) - (*x < 0); return true;
	default:		return false;
	}
}

/*
 * Integer functions of integers into an integer dst, modulo 2^64 and
 * stored as dst's low bits (tpu_elem_store_i64): astype keeps the low
 * bits, as XLA's convert (int32 300 is int8 44; bool: non-zero is 1); neg,
 * abs and square wrap, as XLA's (-(-2^31) and abs(-2^31) are -2^31 in
 * int32; -x of a uint32 is 2^32 - x); into a narrower dst every result
 * wraps, as XLA's function and then its convert (relu of int32 200 is
 * int8 -56). Others (clamp, not, exp, ...) take the double path.
 */
static bool int_unary(const struct tpu_plan_op *op, const struct tpu_op_args *args)
{
	const struct tpu_ref2d *d = &args->dst;
	int64_t *a = (int64_t *)args->row_tmp[0];
	int64_t probe = 0;

	if (!tpu_dtype_is_int(d->dtype) || !tpu_dtype_is_int(args->src0.dtype) ||
	    !int_unary_fn(op->fn, &probe))
		return false;
	for (int64_t i = 0; i < d->rows; i++) {
		tpu_elem_load_i64(&args->src0, i, a, d->cols);
		for (int64_t j = 0; j < d->cols; j++)
			int_unary_fn(op->fn, &a[j]);
		tpu_elem_store_i64(d, i, a, d->cols);
	}
	return true;
}

/*
 * lax.population_count and lax.clz: bit counts of src0's own width (an
 * int8 -1 has 8 one bits), exact in int64 and stored into dst.
 */
static bool int_bitcount(const struct tpu_plan_op *op,
			 const struct tpu_op_args *args)
{
	const struct tpu_ref2d *d = &args->dst;
	int64_t *a = (int64_t *)args->row_tmp[0];
	unsigned int w = int_bits(args->src0.dtype);

	if (op->fn != TPU_UNARY_POPCNT && op->fn != TPU_UNARY_CLZ)
		return false;
	for (int64_t i = 0; i < d->rows; i++) {
		tpu_elem_load_i64(&args->src0, i, a, d->cols);
		for (int64_t j = 0; j < d->cols; j++) {
			uint64_t u = (uint64_t)a[j] & (w < 64 ? (1ull << w) - 1 : ~0ull);

			if (op->fn == TPU_UNARY_POPCNT)
				a[j] = __builtin_popcountll(u);
			else
				a[j] = u ? __builtin_clzll(u) - (64 - (int)w) : (int)w;
		}
		tpu_elem_store_i64(d, i, a, d->cols);
	}
	return true;
}

static void op_unary(const struct tpu_plan_op *op, const struct tpu_op_args *args)
{
	const struct tpu_ref2d *d = &args->dst;
	double *a = args->row_tmp[0];
	double lo = tpu_op_imm(op->imm), hi = tpu_op_imm(op->imm2);
	enum tpu_round mode = op->fn == TPU_UNARY_IDENTITY ? TPU_ROUND_TRUNC :
			      TPU_ROUND_NEAREST;

	if (int_unary(op, args) || int_bitcount(op, args))
		return;
	for (int64_t i = 0; i < d->rows; i++) {
		tpu_elem_load(&args->src0, i, a, d->cols);
		for (int64_t j = 0; j < d->cols; j++)
			a[j] = unary_f(op->fn, a[j], lo, hi);
		tpu_elem_store(d, i, a, d->cols, mode);
	}
}

static int op_binary_int(const struct tpu_plan_op *op,
			 const struct tpu_op_args *args, const struct bsrc *bs,
			 struct tpu_op_fault *fault)
{
	const struct tpu_ref2d *d = &args->dst;
	int64_t *a = (int64_t *)args->row_tmp[0], *b = (int64_t *)args->row_tmp[1];
	unsigned int bits = int_bits(d->dtype);
	bool u32 = d->dtype == TPU_DTYPE_UINT32;

	for (int64_t i = 0; i < d->rows; i++) {
		int64_t step = bsrc_load_i64(bs, i, d->cols, b);

		tpu_elem_load_i64(&args->src0, i, a, d->cols);
		for (int64_t j = 0; j < d->cols; j++) {
			if (op->fn >= TPU_BINARY_SHL) {
				a[j] = shift_i(op->fn, a[j], b[j * step], bits,
					       d->dtype);
				continue;
			}
			if (u32 && div_zero_u32(op->fn, a[j], b[j * step], &a[j]))
				continue;
			if (binary_i(op->fn, a[j], b[j * step], &a[j]))
				continue;
			*fault = (struct tpu_op_fault){ TPU_JOB_ERR_DIV_ZERO, i, j };
			return -1;
		}
		tpu_elem_store_i64(d, i, a, d->cols);
	}
	return 0;
}

static int op_binary(const struct tpu_plan_op *op, const struct tpu_op_args *args,
		     struct tpu_op_fault *fault)
{
	const struct tpu_ref2d *d = &args->dst;
	struct bsrc bs = bsrc_of(&args->src1, op->bcast, &args->scalar, op->imm);
	double *a = args->row_tmp[0], *b = args->row_tmp[1];

	/* the bitwise functions: integers only (the op checks saw to it) */
	if ((bs.is_int && tpu_dtype_is_int(args->src0.dtype) &&
	     tpu_dtype_is_int(d->dtype)) ||
	    op->fn >= TPU_BINARY_BITAND)
		return op_binary_int(op, args, &bs, fault);
	for (int64_t i = 0; i < d->rows; i++) {
		int64_t step = bsrc_load(&bs, i, d->cols, b);

		tpu_elem_load(&args->src0, i, a, d->cols);
		for (int64_t j = 0; j < d->cols; j++)
			a[j] = binary_f(op->fn, a[j], b[j * step]);
		tpu_elem_store(d, i, a, d->cols, TPU_ROUND_NEAREST);
	}
	return 0;
}

static void op_select_int(const struct tpu_op_args *args, const struct bsrc *x,
			  const struct bsrc *y)
{
	const struct tpu_ref2d *d = &args->dst;
	double *m = args->row_tmp[0];
	int64_t *a = (int64_t *)args->row_tmp[1], *b = (int64_t *)args->row_tmp[2];
	int64_t *out = (int64_t *)args->row_tmp[3];

	for (int64_t i = 0; i < d->rows; i++) {
		int64_t sa = bsrc_load_i64(x, i, d->cols, a);
		int64_t sb = bsrc_load_i64(y, i, d->cols, b);

		tpu_elem_load(&args->src0, i, m, d->cols);
		for (int64_t j = 0; j < d->cols; j++)
			out[j] = m[j] != 0 ? a[j * sa] : b[j * sb];
		tpu_elem_store_i64(d, i, out, d->cols);
	}
}

static void op_select(const struct tpu_plan_op *op, const struct tpu_op_args *args)
{
	const struct tpu_ref2d *d = &args->dst;
	struct bsrc x = bsrc_of(&args->src1, op->bcast, &args->scalar, op->imm);
	struct bsrc y = bsrc_of(&args->src2, op->bcast2, &args->scalar, op->imm2);
	double *m = args->row_tmp[0], *a = args->row_tmp[1], *b = args->row_tmp[2];

	if (x.is_int && y.is_int && tpu_dtype_is_int(d->dtype)) {
		op_select_int(args, &x, &y);
		return;
	}
	for (int64_t i = 0; i < d->rows; i++) {
		int64_t sa = bsrc_load(&x, i, d->cols, a);
		int64_t sb = bsrc_load(&y, i, d->cols, b);

		tpu_elem_load(&args->src0, i, m, d->cols);
		for (int64_t j = 0; j < d->cols; j++)
			m[j] = m[j] != 0 ? a[j * sa] : b[j * sb];
		tpu_elem_store(d, i, m, d->cols, TPU_ROUND_NEAREST);
	}
}

static void op_iota(const struct tpu_plan_op *op, const struct tpu_op_args *args)
{
	const struct tpu_ref2d *d = &args->dst;
	int64_t *v = (int64_t *)args->row_tmp[0];

	for (int64_t i = 0; i < d->rows; i++) {
		for (int64_t j = 0; j < d->cols; j++)
			v[j] = tpu_elem_wrap_add(op->axis ? j : i, args->scalar.i);
		tpu_elem_store_i64(d, i, v, d->cols);
	}
}

int tpu_op_elementwise(const struct tpu_plan_op *op,
		       const struct tpu_op_args *args,
		       struct tpu_op_fault *fault)
{
	switch (op->opcode) {
	case TPU_OP_UNARY:
		op_unary(op, args);
		return 0;
	case TPU_OP_BINARY:
		return op_binary(op, args, fault);
	case TPU_OP_SELECT:
		op_select(op, args);
		return 0;
	default:	/* TPU_OP_IOTA */
		op_iota(op, args);
		return 0;
	}
}
