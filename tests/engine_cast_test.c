// SPDX-License-Identifier: MIT
/*
 * Host test: the fast casts (tpu_cast.c) give the bits of the elementwise
 * path, a double and one rounding, for every special case: bf16 ties both
 * ways, NaNs signalling and quiet, infinities, subnormals, overflow to
 * infinity, tails shorter than a vector; on the AVX2 loops and the plain
 * ones. Then through the engine: an identity store of such values.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"
#include "tpu_cast.h"
#include "tpu_dtype.h"
#include "tpu_gemm.h"
#include "tpu_gemm_internal.h"

static const uint32_t specials[] = {
	0x00000000, 0x80000000,			/* +-0 */
	0x7f800000, 0xff800000,			/* +-inf */
	0x7fc00000, 0xffc00000, 0x7fc0dead,	/* quiet NaNs */
	0x7f800001, 0xff800001, 0x7fa00000,	/* signalling NaNs */
	0x7f80ffff, 0x7f810000,			/* NaN payload only low, high */
	0x00000001, 0x807fffff, 0x00008000,	/* subnormals, one a tie */
	0x3f808000, 0x3f818000,			/* ties: down to even, up */
	0x3f808001, 0x3f807fff,			/* just above, just below */
	0x7f7fffff, 0xff7fffff, 0x7f7f8000,	/* overflow to inf, a tie */
	0x3f800000, 0xbf800000, 0x4b7fffff,
};
#define NSPECIAL	(sizeof(specials) / sizeof(specials[0]))

/* The elementwise path, spelled out: through a double, then rounded. */
static uint32_t slow_f32(uint32_t b)
{
	volatile double d;	/* keep the compiler from folding the trip */
	float f;

	memcpy(&f, &b, 4);
	d = f;
	f = (float)d;
	memcpy(&b, &f, 4);
	return b;
}

static uint16_t slow_bf16(uint32_t b)
{
	float f;

	b = slow_f32(b);
	memcpy(&f, &b, 4);
	return ref_bf16(f);	/* the tests' own long-hand rounding */
}

/* specials, then pseudo-random bit patterns (every exponent, NaNs too) */
static uint32_t *patterns(size_t n)
{
	uint32_t *p = malloc(n * 4), s = 12345;

	for (size_t i = 0; i < n; i++) {
		s = s * 1664525u + 1013904223u;
		p[i] = i < NSPECIAL ? specials[i] : s ^ (s << 7);
	}
	return p;
}

static void check_paths(struct __test_metadata *_metadata, bool avx2)
{
	enum { N = 1 << 16 };
	uint32_t *in = patterns(N), *f = malloc(N * 4);
	uint16_t *h = malloc(N * 2);
	bool had = tpu_gemm_has_avx2;

	tpu_gemm_has_avx2 = avx2 && had;
	/* odd lengths and offsets exercise the scalar tails */
	for (int64_t len = 1; len < 40; len += 3) {
		ASSERT_TRUE(tpu_cast_row(f, TPU_DTYPE_F32, in + len, TPU_DTYPE_F32, len));
		ASSERT_TRUE(tpu_cast_row(h, TPU_DTYPE_BF16, in + len, TPU_DTYPE_F32, len));
		for (int64_t j = 0; j < len; j++) {
			ASSERT_EQ(slow_f32(in[len + j]), f[j]);
			ASSERT_EQ(slow_bf16(in[len + j]), h[j]);
		}
	}
	ASSERT_TRUE(tpu_cast_row(f, TPU_DTYPE_F32, in, TPU_DTYPE_F32, N));
	ASSERT_TRUE(tpu_cast_row(h, TPU_DTYPE_BF16, in, TPU_DTYPE_F32, N));
	for (size_t j = 0; j < N; j++) {
		ASSERT_EQ(slow_f32(in[j]), f[j]) TH_LOG("f32 %#x", in[j]);
		ASSERT_EQ(slow_bf16(in[j]), h[j]) TH_LOG("bf16 %#x", in[j]);
	}
	tpu_gemm_has_avx2 = had;
	free(in);
	free(f);
	free(h);
}

TEST(f32_and_bf16_rows_match_the_double_path_avx2)
{
	tpu_gemm_init();
	if (!tpu_gemm_has_avx2)
		SKIP(return, "no AVX2 on this host");
	check_paths(_metadata, true);
}

TEST(f32_and_bf16_rows_match_the_double_path_plain)
{
	tpu_gemm_init();
	check_paths(_metadata, false);
}

TEST(bf16_ties_and_nan_by_value)
{
	static const uint32_t in[] = { 0x3f808000, 0x3f818000, 0x7f800001,
				       0x7f7fffff, 0xff800000 };
	static const uint16_t want[] = { 0x3f80, 0x3f82, 0x7fc0, 0x7f80, 0xff80 };
	uint16_t h[5];

	tpu_gemm_init();
	ASSERT_TRUE(tpu_cast_row(h, TPU_DTYPE_BF16, in, TPU_DTYPE_F32, 5));
	for (int i = 0; i < 5; i++)
		EXPECT_EQ(want[i], h[i]);
}

TEST(int32_copy_and_pairs_without_a_fast_path)
{
	int32_t in[5] = { INT32_MIN, -1, 0, 1, INT32_MAX }, out[5];
	uint8_t b[5];

	ASSERT_TRUE(tpu_cast_row(out, TPU_DTYPE_INT32, in, TPU_DTYPE_INT32, 5));
	EXPECT_EQ(0, memcmp(in, out, sizeof(in)));
	/* saturating and widening casts stay on the double path */
	EXPECT_FALSE(tpu_cast_row(b, TPU_DTYPE_INT8, in, TPU_DTYPE_INT32, 5));
	EXPECT_FALSE(tpu_cast_row(out, TPU_DTYPE_F32, b, TPU_DTYPE_BF16, 2));
}

/* z = identity(x) on the engine, over edge blocks, as bits of @zt. */
static void engine_identity(struct __test_metadata *_metadata, unsigned int zt)
{
	enum { R = 21, C = 45, BR = 8, BC = 16 };
	uint64_t shape[2] = { R, C };
	uint32_t blk[2] = { BR, BC }, grid[2] = { 3, 3 };
	struct tdev *d = tdev_new(1 << 20, 2);
	unsigned int xs = tdev_alloc(d, R * C * 4), zs = tdev_alloc(d, R * C * 4);
	uint32_t *x = tdev_ptr(d, xs), *pat = patterns(R * C);
	struct tpu_job_result res;
	struct jb *b = jb_new();
	unsigned int xo, zo;
	size_t len;
	void *blob;

	memcpy(x, pat, R * C * 4);
	jb_grid(b, 2, grid, "pp");
	xo = jb_operand(b, TPU_ROLE_INPUT, xs, TPU_DTYPE_F32, 2, shape, blk, "pid0 pid1");
	zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, zt, 2, shape, blk, "pid0 pid1");
	jb_unary(b, TPU_UNARY_IDENTITY, JB_OPND(zo), JB_OPND(xo), NULL);
	blob = jb_finish(b, &len);
	ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
	for (int i = 0; i < R * C; i++) {
		if (zt == TPU_DTYPE_BF16) {
			ASSERT_EQ(slow_bf16(pat[i]), ((uint16_t *)tdev_ptr(d, zs))[i]);
		} else {
			ASSERT_EQ(slow_f32(pat[i]), ((uint32_t *)tdev_ptr(d, zs))[i]);
		}
	}
	free(blob);
	free(pat);
	jb_free(b);
	tdev_free(d);
}

TEST(engine_store_f32_keeps_bits_and_quiets_nans)
{
	engine_identity(_metadata, TPU_DTYPE_F32);
}

TEST(engine_store_bf16_rounds_to_nearest_even)
{
	engine_identity(_metadata, TPU_DTYPE_BF16);
}

/* --- uint32 casts, as XLA's convert --- */

/* f32 -> u32: toward zero, saturating; NaN and negatives give 0. */
static uint32_t ref_f32_to_u32(float f)
{
	if (f != f || f <= -1.0f)
		return 0;
	if (f >= 4294967296.0f)
		return UINT32_MAX;
	return f < 0 ? 0 : (uint32_t)f;	/* C's conversion truncates */
}

/* u32 -> f32 to nearest even, on the integer: keep 24 significant bits. */
static uint32_t ref_u32_to_f32_bits(uint32_t v)
{
	int shift = 0;
	uint64_t m = v;
	float f;
	uint32_t b;

	while (m >> (24 + shift))
		shift++;
	if (shift) {
		uint64_t rest = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
		uint64_t q = m >> shift;

		if (rest > half || (rest == half && (q & 1)))
			q++;
		m = q << shift;
	}
	f = (float)(double)m;	/* exact: m has at most 25 significant bits */
	memcpy(&b, &f, 4);
	return b;
}

/* One identity op of @n elements from @st at @src to @dt, returned in @out. */
static void engine_cast(struct __test_metadata *_metadata, unsigned int st,
			const void *src, unsigned int dt, void *out, int n)
{
	uint64_t shape[2] = { 1, (uint64_t)n };
	uint32_t blk[2] = { 1, (uint32_t)n }, grid[1] = { 1 };
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int xs = tdev_alloc(d, (uint64_t)n * 4), zs = tdev_alloc(d, (uint64_t)n * 4);
	struct tpu_job_result res;
	struct jb *b = jb_new();
	unsigned int xo, zo;
	size_t len;
	void *blob;

	memcpy(tdev_ptr(d, xs), src, (size_t)n * tpu_dtype_size(st));
	jb_grid(b, 1, grid, "a");
	xo = jb_operand(b, TPU_ROLE_INPUT, xs, st, 2, shape, blk, "0 0");
	zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, dt, 2, shape, blk, "0 0");
	jb_unary(b, TPU_UNARY_IDENTITY, JB_OPND(zo), JB_OPND(xo), NULL);
	blob = jb_finish(b, &len);
	ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
	memcpy(out, tdev_ptr(d, zs), (size_t)n * tpu_dtype_size(dt));
	free(blob);
	jb_free(b);
	tdev_free(d);
}

TEST(f32_to_uint32_truncates_and_saturates)
{
	static const float edge[] = {
		NAN, -NAN, INFINITY, -INFINITY, -0.0f, 0.0f, -0.5f, -0.99f, -1.0f,
		-1e30f, 0.5f, 0.99f, 1.0f, 1.5f, 2.5f, 16777217.0f,
		2147483648.0f, 4294967040.0f /* the largest f32 below 2^32 */,
		4294967296.0f, 1e30f, 0x1p-149f, 3.99f,
	};
	enum { N = 256 };
	float x[N];
	uint32_t z[N];
	int bad = 0;

	for (int i = 0; i < N; i++)
		x[i] = i < (int)(sizeof(edge) / sizeof(edge[0])) ? edge[i] :
		       ldexpf((float)((i * 2654435761u) >> 8), i % 40 - 20) *
		       (i % 5 ? 1.0f : -1.0f);
	engine_cast(_metadata, TPU_DTYPE_F32, x, TPU_DTYPE_UINT32, z, N);
	for (int i = 0; i < N; i++)
		if (z[i] != ref_f32_to_u32(x[i]) && bad++ < 4)
			TH_LOG("%a gives %u, want %u", (double)x[i], z[i],
			       ref_f32_to_u32(x[i]));
	EXPECT_EQ(0, bad);
}

TEST(uint32_to_f32_and_bf16_round_to_nearest_even)
{
	enum { N = 256 };
	uint32_t x[N], z[N];
	uint16_t h[N];
	int bad = 0;

	for (int i = 0; i < N; i++) {
		static const uint32_t edge[] = {
			0, 1, 16777216, 16777217 /* tie: down */, 16777219 /* up */,
			16777218, 0x7fffffffu, 0x80000000u, 0xffffff7fu,
			0xffffff80u /* tie to 2^32 */, 0xffffffffu,
		};

		x[i] = i < 11 ? edge[i] : (uint32_t)(i * 2654435761u) >> (i % 24);
	}
	engine_cast(_metadata, TPU_DTYPE_UINT32, x, TPU_DTYPE_F32, z, N);
	for (int i = 0; i < N; i++)
		if (z[i] != ref_u32_to_f32_bits(x[i]) && bad++ < 4)
			TH_LOG("%u gives %#x, want %#x", x[i], z[i],
			       ref_u32_to_f32_bits(x[i]));
	EXPECT_EQ(0, bad);
	/* bf16: one rounding of the integer, not two through an f32 */
	engine_cast(_metadata, TPU_DTYPE_UINT32, x, TPU_DTYPE_BF16, h, N);
	for (int i = 0; i < N; i++) {
		uint64_t m = x[i];
		int shift = 0;

		while (m >> (8 + shift))
			shift++;
		if (shift) {
			uint64_t rest = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
			uint64_t q = m >> shift;

			q += rest > half || (rest == half && (q & 1));
			m = q << shift;
		}
		if (h[i] != ref_bf16((float)(double)m) && bad++ < 4)
			TH_LOG("bf16 of %u: %#x, want %#x", x[i], h[i],
			       ref_bf16((float)(double)m));
	}
	EXPECT_EQ(0, bad);
}

/* Between integer types the low bits are kept, two's complement. */
TEST(uint32_integer_casts_keep_the_low_bits)
{
	static const uint32_t u[] = { 0, 1, 127, 128, 255, 256, 300, 0x7fffffffu,
				      0x80000000u, 0xfffffffeu, 0xffffffffu, 0x12345678u };
	static const int32_t s[] = { 0, 1, -1, -128, 300, INT32_MIN, INT32_MAX, -300,
				     7, -7, 0x7f00, -0x7f01 };
	enum { N = 12 };
	int32_t zi[N];
	uint32_t zu[N];
	int8_t z8[N];
	uint8_t zu8[N], zb[N];

	engine_cast(_metadata, TPU_DTYPE_UINT32, u, TPU_DTYPE_INT32, zi, N);
	engine_cast(_metadata, TPU_DTYPE_UINT32, u, TPU_DTYPE_INT8, z8, N);
	engine_cast(_metadata, TPU_DTYPE_UINT32, u, TPU_DTYPE_UINT8, zu8, N);
	engine_cast(_metadata, TPU_DTYPE_UINT32, u, TPU_DTYPE_BOOL, zb, N);
	for (int i = 0; i < N; i++) {
		uint32_t lo = u[i] & 0xff;

		EXPECT_EQ((int64_t)(u[i] >= 0x80000000u ? (int64_t)u[i] - 0x100000000ll :
				    (int64_t)u[i]), zi[i]);
		EXPECT_EQ(lo >= 128 ? (int)lo - 256 : (int)lo, z8[i]);
		EXPECT_EQ(lo, zu8[i]);
		EXPECT_EQ(u[i] != 0, zb[i]);
	}
	engine_cast(_metadata, TPU_DTYPE_INT32, s, TPU_DTYPE_UINT32, zu, N);
	for (int i = 0; i < N; i++)
		EXPECT_EQ(s[i] < 0 ? (uint32_t)((int64_t)s[i] + 0x100000000ll) :
			  (uint32_t)s[i], zu[i]);
	/* int8 -1 is uint32 0xffffffff (sign-extended first, as XLA's) */
	engine_cast(_metadata, TPU_DTYPE_INT8, (int8_t[]){ -1, -128, 5, 127 },
		    TPU_DTYPE_UINT32, zu, 4);
	EXPECT_EQ(0xffffffffu, zu[0]);
	EXPECT_EQ(0xffffff80u, zu[1]);
	EXPECT_EQ(5u, zu[2]);
	EXPECT_EQ(127u, zu[3]);
	/* uint32 -> uint32 takes the fast path and keeps every bit */
	ASSERT_TRUE(tpu_cast_row(zu, TPU_DTYPE_UINT32, u, TPU_DTYPE_UINT32, N));
	EXPECT_EQ(0, memcmp(u, zu, sizeof(u)));
	EXPECT_FALSE(tpu_cast_row(zi, TPU_DTYPE_INT32, u, TPU_DTYPE_UINT32, N));
}

TEST_HARNESS_MAIN
