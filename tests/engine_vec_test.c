// SPDX-License-Identifier: MIT
/*
 * Host test: the vector unit's f32 row kernels (tpu_vec.h) on every
 * instruction set the host has (AVX-512, AVX2, plain C, each forced in
 * turn) against a double (or long double) reference, within the bounds
 * doc/numerics.md promises: special values, a few million random inputs,
 * tails of every length 0..33 (the same bits as a full vector, nothing
 * written past the end), the paths agreeing with each other, and
 * reductions bit-identical from run to run and path to path. The largest
 * errors seen are printed as "# ulp ..." lines for doc/numerics.md.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "tpu_job.h"
#include "tpu_vec.h"

/*
 * Random inputs per function: 2^19 find worst errors within 0.02 ulp of
 * what 2^21 found, in a quarter of the time.
 */
enum { NRAND = 1 << 19, NTAIL = 33, GUARD = 0x7fbadbad };

static float fbits(uint32_t b)
{
	float f;

	memcpy(&f, &b, 4);
	return f;
}

static uint32_t bitsf(float f)
{
	uint32_t b;

	memcpy(&b, &f, 4);
	return b;
}

static const uint32_t special_bits[] = {
	0x00000000, 0x80000000, 0x7f800000, 0xff800000,	/* +-0, +-inf */
	0x7fc00000, 0xffc00000, 0x7fa00000, 0x7f800001,	/* NaNs, signalling */
	0x00000001, 0x80000001, 0x007fffff, 0x00400000,	/* subnormals */
	0x00800000, 0x80800000, 0x7f7fffff, 0xff7fffff,	/* FLT_MIN, FLT_MAX */
	0x3f800000, 0xbf800000, 0x3f000000, 0xbf000000,	/* +-1, +-0.5 */
	0x3fc00000, 0x40200000, 0xc0200000, 0x40400000,	/* 1.5, +-2.5, 3 */
	0x42b17218, 0x42b20000, 0xc2ae0000, 0xc2d00000,	/* exp's edges */
	0xc2c80000, 0x42c80000, 0x501502f9, 0xd01502f9,	/* +-100, +-1e10 */
	0x3dcccccd, 0x33d6bf95, 0x4b000001, 0xcb7fffff,	/* 0.1, 1e-7, 2^23.. */
	0x3f7fffff, 0x3f800001, 0xbf7fffff, 0x41200000,	/* around 1, 10 */
};
#define NSPECIAL	(sizeof(special_bits) / sizeof(special_bits[0]))

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rand32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static float uniform(float lo, float hi)
{
	return lo + (hi - lo) * (float)(rand32() >> 8) * 0x1p-24f;
}

/*
 * Inputs: the specials, then half random bit patterns (every exponent,
 * NaNs too), half uniform in [lo, hi).
 */
static float *inputs(size_t n, float lo, float hi)
{
	float *p = malloc(n * sizeof(float));

	for (size_t i = 0; i < n; i++) {
		if (i < NSPECIAL)
			p[i] = fbits(special_bits[i]);
		else
			p[i] = i & 1 ? fbits(rand32()) : uniform(lo, hi);
	}
	return p;
}

/* ---- the references ---- */

static long double py_mod(long double a, long double b)
{
	long double r = fmodl(a, b);

	if (r != 0 && (r < 0) != (b < 0))
		r += b;
	return r == 0 ? copysignl(0, b) : r;
}

static double max_ref(double a, double b)
{
	if (isnan(a) || isnan(b))
		return NAN;
	if (a == b)
		return signbit(a) ? b : a;	/* +0 above -0 */
	return a > b ? a : b;
}

static double min_ref(double a, double b)
{
	if (isnan(a) || isnan(b))
		return NAN;
	if (a == b)
		return signbit(a) ? a : b;
	return a < b ? a : b;
}

static double logistic_ref(long double x, long double scale, long double arg)
{
	if (isinf(x) && x < 0)
		return scale == 1 ? 0.0 : -0.0;	/* the limits */
	return (double)(scale / (1 + expl(-arg)));
}

static double unary_ref(int fn, float xf, float lo, float hi)
{
	long double x = xf, u;

	switch (fn) {
	case TPU_UNARY_IDENTITY:	return x;
	case TPU_UNARY_RELU:		return x > 0 || x != x ? x : 0;
	case TPU_UNARY_GELU:
		u = 0.7978845608028654L * (x + 0.044715L * x * x * x);
		return logistic_ref(x, x, 2 * u);
	case TPU_UNARY_SILU:		return logistic_ref(x, x, x);
	case TPU_UNARY_SIGMOID:		return logistic_ref(x, 1, x);
	case TPU_UNARY_TANH:		return tanh(xf);
	case TPU_UNARY_EXP:		return exp(xf);
	case TPU_UNARY_NEG:		return -x;
	case TPU_UNARY_ABS:		return fabsl(x);
	case TPU_UNARY_RECIPROCAL:	return 1 / x;
	case TPU_UNARY_SQRT:		return sqrtl(x);
	case TPU_UNARY_RSQRT:		return 1 / sqrtl(x);
	case TPU_UNARY_LOG:		return log(xf);
	case TPU_UNARY_LOG1P:		return log1p(xf);
	case TPU_UNARY_EXP2:		return exp2(xf);
	case TPU_UNARY_SQUARE:		return x * x;
	case TPU_UNARY_FLOOR:		return floorl(x);
	case TPU_UNARY_CEIL:		return ceill(x);
	case TPU_UNARY_SIGN:		return x > 0 ? 1 : x < 0 ? -1 : x;
	case TPU_UNARY_NOT:		return x == 0;
	case TPU_UNARY_CLAMP:		return min_ref(max_ref(xf, lo), hi);
	case TPU_UNARY_SIN:		return sinl(x);
	case TPU_UNARY_COS:		return cosl(x);
	case TPU_UNARY_ERF:		return erfl(x);
	default:			return nearbyintl(x);	/* ROUND */
	}
}

static double binary_ref(int fn, float af, float bf)
{
	long double a = af, b = bf;

	switch (fn) {
	case TPU_BINARY_ADD:	return a + b;
	case TPU_BINARY_SUB:	return a - b;
	case TPU_BINARY_MUL:	return a * b;
	case TPU_BINARY_MAX:	return max_ref(af, bf);
	case TPU_BINARY_MIN:	return min_ref(af, bf);
	case TPU_BINARY_DIV:	return a / b;
	case TPU_BINARY_POW:	return pow(af, bf);
	case TPU_BINARY_MOD:	return py_mod(a, b);
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

/*
 * The error of @got in units of the last place of the float nearest
 * @want; 0 when it is that float. Infinite for a wrong NaN, infinity or
 * sign of zero, and for a NaN left signalling.
 */
static double ulp_err(float got, double want)
{
	int e;

	if (isnan(want) || isnan(got))
		return isnan(want) && isnan(got) && (bitsf(got) & 0x00400000) ?
		       0 : INFINITY;
	if (want == 0 && got == 0)
		return !signbit(want) == !signbit(got) ? 0 : INFINITY;
	if ((float)want == got)
		return 0;
	if (isinf(want))
		return INFINITY;
	if (isinf(got))	/* past FLT_MAX: count from 2^128 */
		return !signbit(got) == !signbit(want) ?
		       (0x1p128 - fabs(want)) / 0x1p104 : INFINITY;
	frexp(want, &e);
	return fabs(got - want) / ldexp(1, (e - 1 < -126 ? -126 : e - 1) - 23);
}

/* promised bounds, in ulp (doc/numerics.md) */
static double unary_bound(int fn)
{
	switch (fn) {
	case TPU_UNARY_TANH: case TPU_UNARY_EXP: case TPU_UNARY_LOG:
	case TPU_UNARY_LOG1P: case TPU_UNARY_EXP2: case TPU_UNARY_SIN:
	case TPU_UNARY_COS: case TPU_UNARY_ERF:
		return 1.001;	/* SLEEF u10: 1.0 and a hair */
	case TPU_UNARY_GELU: case TPU_UNARY_SILU: case TPU_UNARY_SIGMOID:
	case TPU_UNARY_RSQRT:
		return 0.501;	/* double, then one rounding */
	default:
		return 0.5;	/* exact, rounded once */
	}
}

static double binary_bound(int fn)
{
	return fn == TPU_BINARY_POW ? 1.001 : 0.5;
}

/* ---- the instruction sets ---- */

static int isa_list(enum tpu_vec_isa *out)
{
	int n = 0;

	for (int i = TPU_VEC_ISA_COUNT - 1; i >= 0; i--)
		if (tpu_vec_use_isa(i) == (enum tpu_vec_isa)i)
			out[n++] = i;
	return n;
}

static void use(struct __test_metadata *_metadata, enum tpu_vec_isa isa)
{
	ASSERT_EQ(isa, tpu_vec_use_isa(isa));
}

/* ulp distance of two floats, NaNs equal to each other */
static double ulp_apart(float a, float b)
{
	int32_t ia = (int32_t)bitsf(a), ib = (int32_t)bitsf(b);

	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b) ? 0 : INFINITY;
	ia = ia < 0 ? INT32_MIN - ia : ia;
	ib = ib < 0 ? INT32_MIN - ib : ib;
	return fabs((double)ia - (double)ib);
}

/* The unary fn on each ISA over @x; checks the bound, returns outputs. */
static void check_unary(struct __test_metadata *_metadata, int fn,
			const float *x, size_t n, float lo, float hi)
{
	enum tpu_vec_isa isa[TPU_VEC_ISA_COUNT];
	int ni = isa_list(isa);
	float *out[TPU_VEC_ISA_COUNT];
	double *want = malloc(n * sizeof(double));

	for (size_t i = 0; i < n; i++)
		want[i] = unary_ref(fn, x[i], lo, hi);
	for (int k = 0; k < ni; k++) {
		double worst = 0, apart = 0;
		size_t at = 0;

		out[k] = malloc(n * sizeof(float));
		use(_metadata, isa[k]);
		tpu_vec_unary(fn, out[k], x, n, lo, hi);
		for (size_t i = 0; i < n; i++) {
			double e = ulp_err(out[k][i], want[i]);

			if (e > worst)
				worst = e, at = i;
			if (k > 0 && ulp_apart(out[k][i], out[0][i]) > apart)
				apart = ulp_apart(out[k][i], out[0][i]);
		}
		printf("# ulp unary %2d %-6s max %.6f (x=%a got %a want %a) vs %s %.0f\n",
		       fn, tpu_vec_isa_name(isa[k]), worst, x[at], out[k][at],
		       want[at], tpu_vec_isa_name(isa[0]), apart);
		fflush(stdout);
		EXPECT_TRUE(worst <= unary_bound(fn));
		EXPECT_TRUE(apart <= 2 * unary_bound(fn));
	}
	for (int k = 0; k < ni; k++)
		free(out[k]);
	free(want);
}

static void unary_range(int fn, float *lo, float *hi)
{
	switch (fn) {
	case TPU_UNARY_EXP:	*lo = -104, *hi = 89; break;
	case TPU_UNARY_EXP2:	*lo = -150, *hi = 128; break;
	case TPU_UNARY_LOG1P:	*lo = -1, *hi = 10; break;
	case TPU_UNARY_LOG:	*lo = 0, *hi = 4; break;
	case TPU_UNARY_GELU:	*lo = -14, *hi = 6; break;
	case TPU_UNARY_SIGMOID:
	case TPU_UNARY_SILU:	*lo = -110, *hi = 90; break;
	case TPU_UNARY_TANH:	*lo = -10, *hi = 10; break;
	case TPU_UNARY_ERF:	*lo = -5, *hi = 5; break;
	default:		*lo = -100, *hi = 100; break;
	}
}

TEST(unary_within_bounds)
{
	for (int fn = 0; fn < TPU_UNARY_POPCNT; fn++) {
		float lo, hi, *x;

		unary_range(fn, &lo, &hi);
		x = inputs(NRAND, lo, hi);
		check_unary(_metadata, fn, x, NRAND, -2.5f, 3.0f);
		free(x);
	}
}

TEST(clamp_bounds_special)
{
	static const float b[][2] = {
		{ 0, 0 }, { -0.0f, 0 }, { 1, -1 }, { -INFINITY, INFINITY },
		{ NAN, 1 }, { -1, NAN },
	};
	float *x = inputs(4096, -4, 4);

	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++)
		check_unary(_metadata, TPU_UNARY_CLAMP, x, 4096, b[i][0], b[i][1]);
	free(x);
}

/* Every pair of specials, then random pairs; b as a row and as a scalar. */
static void check_binary(struct __test_metadata *_metadata, int fn)
{
	enum { NP = NSPECIAL * NSPECIAL };
	size_t n = NP + NRAND / 2;
	float *a = malloc(n * 4), *b = malloc(n * 4), *out = malloc(n * 4);
	float *ref0 = malloc(n * 4);
	enum tpu_vec_isa isa[TPU_VEC_ISA_COUNT];
	int ni = isa_list(isa);
	float lo = fn == TPU_BINARY_POW ? 0 : -100, hi = fn == TPU_BINARY_POW ? 10 : 100;

	for (size_t i = 0; i < n; i++) {
		bool bits = i & 1;

		a[i] = i < NP ? fbits(special_bits[i / NSPECIAL]) :
		       bits ? fbits(rand32()) : uniform(lo, hi);
		b[i] = i < NP ? fbits(special_bits[i % NSPECIAL]) :
		       bits ? fbits(rand32()) :
		       fn == TPU_BINARY_POW ? uniform(-40, 40) : uniform(lo, hi);
	}
	for (int k = 0; k < ni; k++) {
		double worst = 0, apart = 0;
		size_t at = 0;

		use(_metadata, isa[k]);
		tpu_vec_binary(fn, out, a, b, 1, n);
		for (size_t i = 0; i < n; i++) {
			double e = ulp_err(out[i], binary_ref(fn, a[i], b[i]));

			if (e > worst)
				worst = e, at = i;
			if (k == 0)
				ref0[i] = out[i];
			else if (ulp_apart(out[i], ref0[i]) > apart)
				apart = ulp_apart(out[i], ref0[i]);
		}
		printf("# ulp binary %2d %-6s max %.6f (a=%a b=%a got %a) vs %s %.0f\n",
		       fn, tpu_vec_isa_name(isa[k]), worst, a[at], b[at], out[at],
		       tpu_vec_isa_name(isa[0]), apart);
		fflush(stdout);
		EXPECT_TRUE(worst <= binary_bound(fn));
		EXPECT_TRUE(apart <= 2 * binary_bound(fn));
		/* a broadcast b: each special against the first 4096 a's */
		for (size_t s = 0; s < NSPECIAL; s++) {
			float bs = fbits(special_bits[s]);

			tpu_vec_binary(fn, out, a + NP, &bs, 0, 4096);
			for (size_t i = 0; i < 4096; i++) {
				double want = binary_ref(fn, a[NP + i], bs);

				ASSERT_TRUE(ulp_err(out[i], want) <= binary_bound(fn))
					TH_LOG("fn %d %a, %a: %a, not %a", fn,
					       a[NP + i], bs, out[i], want);
			}
		}
	}
	free(a);
	free(b);
	free(out);
	free(ref0);
}

/* The float functions: the bitwise ones, from BITAND on, take integers. */
TEST(binary_within_bounds)
{
	for (int fn = 0; fn < TPU_BINARY_BITAND; fn++)
		check_binary(_metadata, fn);
}

/* ---- tails: every length 0..33 gives the full vector's bits ---- */

static void run_kernel(int kind, int fn, float *dst, const float *x,
		       const float *y, int off, int64_t n)
{
	static const float nine = 9.0f;
	static const uint8_t masks[64] = { 1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 2, 255,
		0, 1, 1, 0, 1, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 0, 1, 0, 1, 1 };
	const uint8_t *mask = masks + off;

	if (kind == 0)
		tpu_vec_unary(fn, dst, x, n, -1, 2);
	else if (kind == 1)
		tpu_vec_binary(fn, dst, x, y, 1, n);
	else if (kind == 2)
		tpu_vec_select(dst, mask, TPU_DTYPE_BOOL, x, 1, y, 1, n);
	else
		tpu_vec_select(dst, y, TPU_DTYPE_F32, x, 1, &nine, 0, n);
}

static void check_tails(struct __test_metadata *_metadata, int kind, int fn)
{
	float x[64], y[64], full[64], out[64 + 8];

	for (int i = 0; i < 64; i++) {
		x[i] = i < (int)NSPECIAL ? fbits(special_bits[i]) : uniform(-5, 5);
		y[i] = fbits(special_bits[(i * 7) % NSPECIAL]);
	}
	run_kernel(kind, fn, full, x, y, 0, 64);
	for (int n = 0; n <= NTAIL; n++)
		for (int off = 0; off + n <= 64 && off < 20; off += 1 + (n & 3)) {
			for (int i = 0; i < 64 + 8; i++)
				out[i] = fbits(GUARD);
			run_kernel(kind, fn, out + 4, x + off, y + off, off, n);
			for (int i = 0; i < n; i++) {
				float want = full[off + i];

				ASSERT_EQ(bitsf(want), bitsf(out[4 + i]))
					TH_LOG("kind %d fn %d n %d off %d i %d",
					       kind, fn, n, off, i);
			}
			for (int i = 0; i < 4; i++) {
				ASSERT_EQ(GUARD, bitsf(out[i]));
				ASSERT_EQ(GUARD, bitsf(out[4 + n + i]));
			}
		}
}

TEST(tails_every_length)
{
	enum tpu_vec_isa isa[TPU_VEC_ISA_COUNT];
	int ni = isa_list(isa);

	for (int k = 0; k < ni; k++) {
		use(_metadata, isa[k]);
		for (int fn = 0; fn < TPU_UNARY_POPCNT; fn++)
			check_tails(_metadata, 0, fn);
		for (int fn = 0; fn < TPU_BINARY_BITAND; fn++)
			check_tails(_metadata, 1, fn);
		check_tails(_metadata, 2, 0);
		check_tails(_metadata, 3, 0);
	}
}

/* ---- reductions ---- */

static double reduce_ref(int fn, const float *x, int64_t n)
{
	long double s = 0;
	double r = fn == TPU_REDUCE_MAX ? -INFINITY : INFINITY;

	for (int64_t i = 0; i < n; i++) {
		if (isnan(x[i]))
			return x[i];
		s += x[i];
		r = fn == TPU_REDUCE_MAX ? max_ref(r, x[i]) : min_ref(r, x[i]);
	}
	return fn == TPU_REDUCE_SUM ? (double)s : r;
}

static bool same_double(double a, double b)
{
	return !memcmp(&a, &b, sizeof(a));
}

TEST(reduce_row_reference_and_bit_identical)
{
	enum tpu_vec_isa isa[TPU_VEC_ISA_COUNT];
	int ni = isa_list(isa);
	enum { N = 5000 };
	float *x = malloc(N * 4);

	for (int trial = 0; trial < 200; trial++) {
		int64_t n = trial < 40 ? trial : rand32() % N;

		for (int64_t i = 0; i < n; i++)
			x[i] = uniform(-1000, 1000) * (trial & 1 ? 1 : 1e-3f);
		if (trial % 7 == 3 && n > 2)	/* a NaN, or two */
			x[n / 2] = fbits(0x7fa00000 + trial), x[n - 1] = NAN;
		if (trial % 11 == 5 && n > 2)	/* zeros of both signs only */
			for (int64_t i = 0; i < n; i++)
				x[i] = i % 3 ? -0.0f : 0.0f;
		for (int fn = 0; fn < TPU_REDUCE_ARGMAX; fn++)	/* argmax/min: no vector kernel */ {
			double want = reduce_ref(fn, x, n), first = 0;
			long double abs = 0;

			for (int64_t i = 0; i < n; i++)
				abs += fabsl(x[i]);
			for (int k = 0; k < ni; k++) {
				double got;

				use(_metadata, isa[k]);
				got = tpu_vec_reduce_row(fn, x, n);
				ASSERT_TRUE(same_double(got, tpu_vec_reduce_row(fn, x, n)));
				if (k == 0)
					first = got;
				ASSERT_TRUE(same_double(got, first))
					TH_LOG("fn %d n %ld on %s", fn, (long)n,
					       tpu_vec_isa_name(isa[k]));
				if (isnan(want)) {
					ASSERT_EQ(bitsf(want), bitsf(got));
				} else if (fn == TPU_REDUCE_SUM) {
					ASSERT_LE(fabs(got - want),
						  n * 0x1p-53 * (double)abs);
					if (want == 0)
						ASSERT_FALSE(signbit(got));
				} else {
					ASSERT_TRUE(same_double(got, want));
				}
			}
		}
	}
	free(x);
}

TEST(reduce_cols_reference_and_bit_identical)
{
	enum tpu_vec_isa isa[TPU_VEC_ISA_COUNT];
	int ni = isa_list(isa);
	enum { ROWS = 37, COLS = 61 };
	static float x[ROWS][COLS];
	double acc[COLS], first[COLS];

	for (int i = 0; i < ROWS; i++)
		for (int j = 0; j < COLS; j++)
			x[i][j] = uniform(-10, 10);
	x[5][3] = fbits(0x7fa00001), x[9][3] = NAN;	/* first NaN wins */
	x[2][4] = -0.0f;
	for (int i = 0; i < ROWS; i++)
		x[i][6] = i & 1 ? 0.0f : -0.0f;
	for (int fn = 0; fn < TPU_REDUCE_ARGMAX; fn++)	/* argmax/min: no vector kernel */
		for (int k = 0; k < ni; k++) {
			use(_metadata, isa[k]);
			tpu_vec_reduce_init(fn, acc, COLS);
			for (int i = 0; i < ROWS; i++)
				tpu_vec_reduce_cols(fn, acc, x[i], COLS);
			for (int j = 0; j < COLS; j++) {
				double want = fn == TPU_REDUCE_SUM ? 0 :
					      fn == TPU_REDUCE_MAX ? -INFINITY : INFINITY;
				bool nan = false;

				for (int i = 0; i < ROWS && !nan; i++) {
					if (isnan(x[i][j]))
						want = x[i][j], nan = true;
					else if (fn == TPU_REDUCE_SUM)
						want += x[i][j];
					else if (fn == TPU_REDUCE_MAX)
						want = max_ref(want, x[i][j]);
					else
						want = min_ref(want, x[i][j]);
				}
				ASSERT_TRUE(same_double(want, acc[j]))
					TH_LOG("fn %d col %d on %s: %a, not %a", fn,
					       j, tpu_vec_isa_name(isa[k]), acc[j], want);
				if (k == 0)
					first[j] = acc[j];
				ASSERT_TRUE(same_double(first[j], acc[j]));
			}
		}
}

/* ---- select and bf16 ---- */

TEST(select_masks_and_scalars)
{
	enum tpu_vec_isa isa[TPU_VEC_ISA_COUNT];
	int ni = isa_list(isa);
	enum { N = 301 };
	float a[N], b[N], fm[N], out[N], sa = 7.5f, sb = fbits(0x7fa00000);
	uint8_t m[N];

	for (int i = 0; i < N; i++) {
		a[i] = uniform(-3, 3);
		b[i] = fbits(special_bits[i % NSPECIAL]);
		m[i] = rand32() % 3 ? 0 : rand32();
		fm[i] = i % 5 == 0 ? NAN : i % 5 == 1 ? -0.0f : i % 5 == 2 ? 2 : 0;
	}
	for (int k = 0; k < ni; k++) {
		use(_metadata, isa[k]);
		ASSERT_FALSE(tpu_vec_select(out, m, TPU_DTYPE_INT32, a, 1, b, 1, N));
		for (int mode = 0; mode < 4; mode++) {
			const float *pa = mode & 1 ? &sa : a, *pb = mode & 2 ? &sb : b;
			int64_t as = !(mode & 1), bs = !(mode & 2);

			ASSERT_TRUE(tpu_vec_select(out, m, TPU_DTYPE_BOOL, pa, as, pb, bs, N));
			for (int i = 0; i < N; i++)
				ASSERT_TRUE(ulp_err(out[i], m[i] ? pa[i * as] : pb[i * bs]) == 0)
					TH_LOG("%a", out[0]);
			ASSERT_TRUE(tpu_vec_select(out, fm, TPU_DTYPE_F32, pa, as, pb, bs, N));
			for (int i = 0; i < N; i++)	/* NaN is true, -0 false */
				ASSERT_TRUE(ulp_err(out[i], fm[i] != 0 ?
						    pa[i * as] : pb[i * bs]) == 0);
		}
	}
}

TEST(bf16_to_f32_exact)
{
	enum tpu_vec_isa isa[TPU_VEC_ISA_COUNT];
	int ni = isa_list(isa);
	enum { N = 65536 + 13 };
	uint16_t *h = malloc(N * 2);
	float *f = malloc(N * 4);

	for (int i = 0; i < N; i++)
		h[i] = (uint16_t)i;
	for (int k = 0; k < ni; k++) {
		use(_metadata, isa[k]);
		tpu_vec_bf16_to_f32(f, h, N);
		for (int i = 0; i < N; i++)
			ASSERT_EQ((uint32_t)h[i] << 16, bitsf(f[i]));
	}
	free(h);
	free(f);
}

TEST(isa_names_and_capping)
{
	enum tpu_vec_isa best = tpu_vec_use_isa(TPU_VEC_AVX512);

	printf("# vec isa: best %s\n", tpu_vec_isa_name(best));
	ASSERT_EQ(TPU_VEC_SCALAR, tpu_vec_use_isa(TPU_VEC_SCALAR));
	ASSERT_EQ(TPU_VEC_SCALAR, tpu_vec_isa());
	ASSERT_STREQ("avx2", tpu_vec_isa_name(TPU_VEC_AVX2));
	ASSERT_EQ(best, tpu_vec_use_isa(TPU_VEC_AVX512));
}

TEST_HARNESS_MAIN
