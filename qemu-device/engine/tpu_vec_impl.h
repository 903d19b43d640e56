/* SPDX-License-Identifier: MIT */
/*
 * The vector kernels, written once over an instruction set's vectors.
 * tpu_vec_scalar.c, tpu_vec_avx2.c and tpu_vec_avx512.c each define, then
 * include this file:
 *
 *   V, VW     a vector of VW floats; M its lane mask
 *   D, DW     a vector of DW doubles; DM its lane mask; NDH = VW / DW
 *   vload vstore vset1 vbits vadd vsub vmul vdiv vsqrt vfloor vceil vrint
 *   vand vor vxor vmax_raw vmin_raw (a > b ? a : b, as x86's maxps)
 *   veq vlt vle vgt vge (ordered) vne vunord (true on NaN) mand mor
 *   vblend(m, f, t) (m ? t : f)
 *   vexp vlog vlog1p vexp2 vtanh vpow (SLEEF)
 *   vmask_bytes (VW bytes, non-zero) vbf16 (VW bf16 widened)
 *   dset1 dadd dmul ddiv dsqrt dexp dfmod dload dstore dload_f (DW floats)
 *   dmax_raw dmin_raw dand dor deq dunord dblend vsplit vjoin
 *   KERNELS   the name of the struct tpu_vec_kernels to define
 *
 * A tail shorter than VW goes through a full vector in a local buffer, so
 * it gets exactly the bits a full vector would.
 */
#include <math.h>
#include <string.h>

#define ALWAYS_INLINE	inline __attribute__((always_inline))

static ALWAYS_INLINE V load_tail(const float *p, int64_t r, float fill)
{
	float t[VW];

	for (int64_t i = 0; i < VW; i++)
		t[i] = i < r ? p[i] : fill;
	return vload(t);
}

static ALWAYS_INLINE void store_tail(float *p, V x, int64_t r)
{
	float t[VW];

	vstore(t, x);
	memcpy(p, t, r * sizeof(float));
}

/* A NaN made quiet (x + x keeps its payload and sign); others as they are. */
static ALWAYS_INLINE V quiet(V x)
{
	return vblend(vunord(x, x), x, vadd(x, x));
}

/*
 * r where a and b are numbers, else a's NaN, else b's, made quiet: the
 * compiler may swap the operands of a + b, so that cannot choose.
 */
static ALWAYS_INLINE V nan_first(V a, V b, V r)
{
	r = vblend(vunord(b, b), r, quiet(b));
	return vblend(vunord(a, a), r, quiet(a));
}

/* jnp.maximum: NaN propagates, +0 above -0. */
static ALWAYS_INLINE V max_nan(V a, V b)
{
	return nan_first(a, b, vblend(veq(a, b), vmax_raw(a, b), vand(a, b)));
}

static ALWAYS_INLINE V min_nan(V a, V b)
{
	return nan_first(a, b, vblend(veq(a, b), vmin_raw(a, b), vor(a, b)));
}

static ALWAYS_INLINE V bool01(M m)
{
	return vblend(m, vset1(0.0f), vset1(1.0f));
}

static ALWAYS_INLINE V sign(V x)
{
	V r = vblend(vgt(x, vset1(0.0f)), x, vset1(1.0f));

	return quiet(vblend(vlt(x, vset1(0.0f)), r, vset1(-1.0f)));
}

/* fmod in double: exact, and a subnormal b is a normal double there */
static ALWAYS_INLINE V fmod_exact(V a, V b)
{
	D ha[NDH], hb[NDH];

	vsplit(a, ha);
	vsplit(b, hb);
	for (int k = 0; k < NDH; k++)
		ha[k] = dfmod(ha[k], hb[k]);
	return vjoin(ha);
}

/* Python's %: fmod, moved into b's sign; a zero takes b's sign. */
static ALWAYS_INLINE V py_mod(V a, V b)
{
	const V zero = vset1(0.0f);
	V r = fmod_exact(a, b);
	M flip = mor(mand(vlt(r, zero), vgt(b, zero)),
		     mand(vgt(r, zero), vlt(b, zero)));

	r = vblend(flip, r, vadd(r, b));
	return vblend(veq(r, zero), r, vand(b, vset1(-0.0f)));
}

/*
 * The logistic functions and rsqrt compute in double and round once: their
 * argument (-2u of gelu) or result (a subnormal sigmoid) would lose bits
 * in float.
 */
static ALWAYS_INLINE D d_logistic(D x, D scale)
{
	return ddiv(scale, dadd(dset1(1.0), dexp(dmul(x, dset1(-1.0)))));
}

static inline D d_sigmoid(D x)
{
	return d_logistic(x, dset1(1.0));
}

static inline D d_silu(D x)
{
	return d_logistic(x, x);
}

/* 0.5 x (1 + tanh(u)) = x sigmoid(2u), free of 1 + tanh's cancellation */
static inline D d_gelu(D x)
{
	const double sqrt_2_over_pi = 0.7978845608028654;
	D cube = dmul(dset1(0.044715), dmul(x, x));
	D u2 = dmul(dmul(x, dset1(2 * sqrt_2_over_pi)), dadd(dset1(1.0), cube));

	return d_logistic(u2, x);
}

static inline D d_rsqrt(D x)
{
	return ddiv(dset1(1.0), dsqrt(x));
}

static ALWAYS_INLINE V via_double(V x, D (*f)(D))
{
	D h[NDH];

	vsplit(x, h);
	for (int k = 0; k < NDH; k++)
		h[k] = f(h[k]);
	return vjoin(h);
}

/* x sigmoid(x) at -inf: the limit, -0, not -inf * 0 */
static ALWAYS_INLINE V at_minus_inf_zero(V x, V r)
{
	return vblend(veq(x, vset1(-INFINITY)), r, vset1(-0.0f));
}

/* where |x| < @tiny, f(x) rounds to x: SLEEF is a hair past 1 ulp there */
static ALWAYS_INLINE V tiny_is_x(V x, V fx, float tiny)
{
	return vblend(vlt(vand(x, vbits(0x7fffffff)), vset1(tiny)), fx, x);
}

static ALWAYS_INLINE D d_erf_first_term(D x)
{
	return dmul(x, dset1(1.1283791670955126));	/* 2 / sqrt(pi) */
}

/*
 * erf(x) = 2x/sqrt(pi) (1 - x^2/3 + ...): below 2^-24 the series' first
 * term, in double and rounded once; SLEEF's erff misses tiny and
 * subnormal results by up to 1.8 ulp
 */
static ALWAYS_INLINE V erf_small(V x)
{
	return vblend(vlt(vand(x, vbits(0x7fffffff)), vset1(0x1p-24f)), verf(x),
		      via_double(x, d_erf_first_term));
}

/* SLEEF's log1pf overflows to inf above ~1e38; log(x) is as good there */
static ALWAYS_INLINE V log1p_wide(V x)
{
	V r = vblend(vgt(x, vset1(1e30f)), vlog1p(x), vlog(x));

	return tiny_is_x(x, r, 0x1p-24f);
}

#define UNARY(name, expr)						\
static void name(float *dst, const float *src, int64_t n, float lo_,	\
		 float hi_)						\
{									\
	const V lo = vset1(lo_), hi = vset1(hi_);			\
	int64_t i = 0;							\
									\
	(void)lo;							\
	(void)hi;							\
	for (; i + VW <= n; i += VW) {					\
		V x = vload(src + i);					\
									\
		vstore(dst + i, expr);					\
	}								\
	if (i < n) {							\
		V x = load_tail(src + i, n - i, 0.0f);			\
									\
		store_tail(dst + i, expr, n - i);			\
	}								\
}

UNARY(u_identity, quiet(x))
UNARY(u_relu, quiet(vblend(mor(vgt(x, vset1(0.0f)), vunord(x, x)),
			   vset1(0.0f), x)))	/* max(x, 0): NaN stays */
UNARY(u_gelu, at_minus_inf_zero(x, via_double(x, d_gelu)))
UNARY(u_silu, at_minus_inf_zero(x, via_double(x, d_silu)))
UNARY(u_sigmoid, via_double(x, d_sigmoid))
UNARY(u_tanh, tiny_is_x(x, vtanh(x), 0x1p-12f))
UNARY(u_exp, vexp(x))
UNARY(u_neg, quiet(vxor(x, vset1(-0.0f))))
UNARY(u_abs, quiet(vand(x, vbits(0x7fffffff))))
UNARY(u_reciprocal, vdiv(vset1(1.0f), x))
UNARY(u_sqrt, vsqrt(x))
UNARY(u_rsqrt, via_double(x, d_rsqrt))
UNARY(u_log, vlog(x))
UNARY(u_log1p, log1p_wide(x))
UNARY(u_sin, vsin(x))
UNARY(u_cos, vcos(x))
UNARY(u_erf, erf_small(x))
UNARY(u_exp2, vexp2(x))
UNARY(u_square, vmul(x, x))
UNARY(u_floor, vfloor(x))
UNARY(u_ceil, vceil(x))
UNARY(u_sign, sign(x))
UNARY(u_not, bool01(veq(x, vset1(0.0f))))
UNARY(u_clamp, min_nan(max_nan(x, lo), hi))
UNARY(u_round, vrint(x))

/* b_step is 0 or 1: the branch on it is taken the same way every time */
#define BINARY(name, expr)						\
static void name(float *dst, const float *a_, const float *b_,		\
		 int64_t b_step, int64_t n)				\
{									\
	const V b0 = n > 0 ? vset1(*b_) : vset1(0.0f);			\
	int64_t i = 0;							\
									\
	for (; i + VW <= n; i += VW) {					\
		V a = vload(a_ + i);					\
		V b = b_step ? vload(b_ + i) : b0;			\
									\
		vstore(dst + i, expr);					\
	}								\
	if (i < n) {							\
		V a = load_tail(a_ + i, n - i, 0.0f);			\
		V b = b_step ? load_tail(b_ + i, n - i, 0.0f) : b0;	\
									\
		store_tail(dst + i, expr, n - i);			\
	}								\
}

BINARY(b_add, vadd(a, b))
BINARY(b_sub, vsub(a, b))
BINARY(b_mul, vmul(a, b))
BINARY(b_max, max_nan(a, b))
BINARY(b_min, min_nan(a, b))
BINARY(b_div, vdiv(a, b))
BINARY(b_pow, vpow(a, b))
BINARY(b_mod, py_mod(a, b))
BINARY(b_eq, bool01(veq(a, b)))
BINARY(b_ne, bool01(vne(a, b)))
BINARY(b_lt, bool01(vlt(a, b)))
BINARY(b_le, bool01(vle(a, b)))
BINARY(b_gt, bool01(vgt(a, b)))
BINARY(b_ge, bool01(vge(a, b)))
BINARY(b_and, bool01(mand(vne(a, vset1(0.0f)), vne(b, vset1(0.0f)))))
BINARY(b_or, bool01(mor(vne(a, vset1(0.0f)), vne(b, vset1(0.0f)))))

/*
 * Lane l of the partial sums takes elements l, l + 16, ...: the same
 * order whatever DW is. The tail is padded with +0, which changes no lane
 * (a lane starts at +0 and so is never -0).
 */
static void sum_lanes(double lanes[TPU_VEC_SUM_LANES], const float *src,
		      int64_t n)
{
	enum { NACC = TPU_VEC_SUM_LANES / DW };
	float t[TPU_VEC_SUM_LANES];
	D acc[NACC];
	int64_t i = 0;

	for (int k = 0; k < NACC; k++)
		acc[k] = dset1(0.0);
	for (; i + TPU_VEC_SUM_LANES <= n; i += TPU_VEC_SUM_LANES)
		for (int k = 0; k < NACC; k++)
			acc[k] = dadd(acc[k], dload_f(src + i + k * DW));
	if (i < n) {
		memset(t, 0, sizeof(t));
		memcpy(t, src + i, (n - i) * sizeof(float));
		for (int k = 0; k < NACC; k++)
			acc[k] = dadd(acc[k], dload_f(t + k * DW));
	}
	for (int k = 0; k < NACC; k++)
		dstore(lanes + k * DW, acc[k]);
}

static ALWAYS_INLINE V extreme(V a, V b, bool is_max)
{
	return is_max ? max_nan(a, b) : min_nan(a, b);
}

/* max or min of two numbers, +0 above -0; NaNs are the caller's business */
static ALWAYS_INLINE V extreme_num(V a, V b, bool is_max)
{
	if (is_max)
		return vblend(veq(a, b), vmax_raw(a, b), vand(a, b));
	return vblend(veq(a, b), vmin_raw(a, b), vor(a, b));
}

/*
 * The loop only notes that it met a NaN (tpu_vec.c then finds the row's
 * first): half the work of carrying it.
 */
static ALWAYS_INLINE float extreme_row(const float *src, int64_t n,
				       bool is_max)
{
	const float fill = is_max ? -INFINITY : INFINITY;
	V acc = vset1(fill), x;
	M nan = vunord(acc, acc);	/* none */
	float t[VW];
	int64_t i = 0;

	for (; i + VW <= n; i += VW) {
		x = vload(src + i);
		nan = mor(nan, vunord(x, x));
		acc = extreme_num(acc, x, is_max);
	}
	if (i < n) {
		x = load_tail(src + i, n - i, fill);
		nan = mor(nan, vunord(x, x));
		acc = extreme_num(acc, x, is_max);
	}
	vstore(t, vblend(nan, acc, vset1(NAN)));
	acc = vset1(t[0]);
	for (int k = 1; k < VW; k++)
		acc = extreme(acc, vset1(t[k]), is_max);
	vstore(t, acc);
	return t[0];
}

static float max_row(const float *src, int64_t n)
{
	return extreme_row(src, n, true);
}

static float min_row(const float *src, int64_t n)
{
	return extreme_row(src, n, false);
}

/* One column step in double: a NaN already in acc stays (the first met). */
static ALWAYS_INLINE D col_step(uint8_t fn, D acc, D x)
{
	D r;

	if (fn == TPU_REDUCE_SUM)
		r = dadd(acc, x);
	else if (fn == TPU_REDUCE_MAX)
		r = dblend(deq(acc, x), dmax_raw(acc, x), dand(acc, x));
	else
		r = dblend(deq(acc, x), dmin_raw(acc, x), dor(acc, x));
	/* a NaN: acc's, else x's (quiet: widened to double), never a + b's choice */
	r = dblend(dunord(x, x), r, x);
	return dblend(dunord(acc, acc), r, acc);
}

static ALWAYS_INLINE void cols(uint8_t fn, double *acc, const float *row,
			       int64_t n)
{
	double ta[DW];
	float tr[DW];
	int64_t i = 0;

	for (; i + DW <= n; i += DW)
		dstore(acc + i, col_step(fn, dload(acc + i), dload_f(row + i)));
	if (i < n) {
		memset(ta, 0, sizeof(ta));
		memset(tr, 0, sizeof(tr));
		memcpy(ta, acc + i, (n - i) * sizeof(double));
		memcpy(tr, row + i, (n - i) * sizeof(float));
		dstore(ta, col_step(fn, dload(ta), dload_f(tr)));
		memcpy(acc + i, ta, (n - i) * sizeof(double));
	}
}

static void cols_sum(double *acc, const float *row, int64_t n)
{
	cols(TPU_REDUCE_SUM, acc, row, n);
}

static void cols_max(double *acc, const float *row, int64_t n)
{
	cols(TPU_REDUCE_MAX, acc, row, n);
}

static void cols_min(double *acc, const float *row, int64_t n)
{
	cols(TPU_REDUCE_MIN, acc, row, n);
}

static ALWAYS_INLINE M mask_at(const void *mask, bool f32, int64_t i)
{
	if (f32)
		return vne(vload((const float *)mask + i), vset1(0.0f));
	return vmask_bytes((const uint8_t *)mask + i);
}

static ALWAYS_INLINE void select_row(float *dst, const void *mask, bool f32,
				     const float *a, int64_t a_step,
				     const float *b, int64_t b_step, int64_t n)
{
	size_t esize = f32 ? sizeof(float) : 1;
	uint8_t tm[VW * sizeof(float)];
	V a0, b0;
	int64_t i = 0;

	if (n <= 0)
		return;
	a0 = vset1(a[0]);
	b0 = vset1(b[0]);
	for (; i + VW <= n; i += VW) {
		V x = a_step ? vload(a + i) : a0;
		V y = b_step ? vload(b + i) : b0;

		vstore(dst + i, quiet(vblend(mask_at(mask, f32, i), y, x)));
	}
	if (i < n) {
		V x = a_step ? load_tail(a + i, n - i, 0.0f) : a0;
		V y = b_step ? load_tail(b + i, n - i, 0.0f) : b0;

		memset(tm, 0, sizeof(tm));
		memcpy(tm, (const uint8_t *)mask + i * esize, (n - i) * esize);
		store_tail(dst + i, quiet(vblend(mask_at(tm, f32, 0), y, x)),
			   n - i);
	}
}

static void select_bytes(float *dst, const void *mask, const float *a,
			 int64_t a_step, const float *b, int64_t b_step,
			 int64_t n)
{
	select_row(dst, mask, false, a, a_step, b, b_step, n);
}

static void select_f32(float *dst, const void *mask, const float *a,
		       int64_t a_step, const float *b, int64_t b_step,
		       int64_t n)
{
	select_row(dst, mask, true, a, a_step, b, b_step, n);
}

static void bf16_to_f32(float *dst, const uint16_t *src, int64_t n)
{
	uint16_t t[VW];
	int64_t i = 0;

	for (; i + VW <= n; i += VW)
		vstore(dst + i, vbf16(src + i));
	if (i < n) {
		memset(t, 0, sizeof(t));
		memcpy(t, src + i, (n - i) * sizeof(uint16_t));
		store_tail(dst + i, vbf16(t), n - i);
	}
}

const struct tpu_vec_kernels KERNELS = {
	.unary = {
		[TPU_UNARY_IDENTITY] = u_identity,
		[TPU_UNARY_RELU] = u_relu,
		[TPU_UNARY_GELU] = u_gelu,
		[TPU_UNARY_SILU] = u_silu,
		[TPU_UNARY_SIGMOID] = u_sigmoid,
		[TPU_UNARY_TANH] = u_tanh,
		[TPU_UNARY_EXP] = u_exp,
		[TPU_UNARY_NEG] = u_neg,
		[TPU_UNARY_ABS] = u_abs,
		[TPU_UNARY_RECIPROCAL] = u_reciprocal,
		[TPU_UNARY_SQRT] = u_sqrt,
		[TPU_UNARY_RSQRT] = u_rsqrt,
		[TPU_UNARY_LOG] = u_log,
		[TPU_UNARY_LOG1P] = u_log1p,
		[TPU_UNARY_EXP2] = u_exp2,
		[TPU_UNARY_SQUARE] = u_square,
		[TPU_UNARY_FLOOR] = u_floor,
		[TPU_UNARY_CEIL] = u_ceil,
		[TPU_UNARY_SIGN] = u_sign,
		[TPU_UNARY_NOT] = u_not,
		[TPU_UNARY_CLAMP] = u_clamp,
		[TPU_UNARY_ROUND] = u_round,
		[TPU_UNARY_SIN] = u_sin,
		[TPU_UNARY_COS] = u_cos,
		[TPU_UNARY_ERF] = u_erf,
	},
	.binary = {
		[TPU_BINARY_ADD] = b_add,
		[TPU_BINARY_SUB] = b_sub,
		[TPU_BINARY_MUL] = b_mul,
		[TPU_BINARY_MAX] = b_max,
		[TPU_BINARY_MIN] = b_min,
		[TPU_BINARY_DIV] = b_div,
		[TPU_BINARY_POW] = b_pow,
		[TPU_BINARY_MOD] = b_mod,
		[TPU_BINARY_EQ] = b_eq,
		[TPU_BINARY_NE] = b_ne,
		[TPU_BINARY_LT] = b_lt,
		[TPU_BINARY_LE] = b_le,
		[TPU_BINARY_GT] = b_gt,
		[TPU_BINARY_GE] = b_ge,
		[TPU_BINARY_AND] = b_and,
		[TPU_BINARY_OR] = b_or,
	},
	.sum_lanes = sum_lanes,
	.max_row = max_row,
	.min_row = min_row,
	.cols = {
		[TPU_REDUCE_SUM] = cols_sum,
		[TPU_REDUCE_MAX] = cols_max,
		[TPU_REDUCE_MIN] = cols_min,
	},
	.select_bytes = select_bytes,
	.select_f32 = select_f32,
	.bf16_to_f32 = bf16_to_f32,
};
