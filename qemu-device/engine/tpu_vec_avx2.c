// SPDX-License-Identifier: MIT
/*
 * The vector kernels on AVX2 and FMA, 8 floats a vector (the kernels
 * themselves are tpu_vec_impl.h). The whole file targets AVX2: tpu_vec.c
 * calls it only on a host that has it. The pragma comes first so that
 * sleef.h declares its AVX2 functions.
 */
#pragma GCC target("avx2,fma")

#include <immintrin.h>
#include <sleef.h>

#include "tpu_vec_int.h"

#define VW	8
#define DW	4
#define NDH	2
#define KERNELS	tpu_vec_avx2_kernels

typedef __m256 V;
typedef __m256 M;
typedef __m256d D;
typedef __m256d DM;

static inline V vload(const float *p) { return _mm256_loadu_ps(p); }
static inline void vstore(float *p, V x) { _mm256_storeu_ps(p, x); }
static inline V vset1(float f) { return _mm256_set1_ps(f); }
static inline V vbits(uint32_t b)
{
	return _mm256_castsi256_ps(_mm256_set1_epi32((int)b));
}

static inline V vadd(V a, V b) { return _mm256_add_ps(a, b); }
static inline V vsub(V a, V b) { return _mm256_sub_ps(a, b); }
static inline V vmul(V a, V b) { return _mm256_mul_ps(a, b); }
static inline V vdiv(V a, V b) { return _mm256_div_ps(a, b); }
static inline V vsqrt(V x) { return _mm256_sqrt_ps(x); }
static inline V vfloor(V x)
{
	return _mm256_round_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
static inline V vceil(V x)
{
	return _mm256_round_ps(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
}
static inline V vrint(V x)
{
	return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline V vand(V a, V b) { return _mm256_and_ps(a, b); }
static inline V vor(V a, V b) { return _mm256_or_ps(a, b); }
static inline V vxor(V a, V b) { return _mm256_xor_ps(a, b); }
static inline V vmax_raw(V a, V b) { return _mm256_max_ps(a, b); }
static inline V vmin_raw(V a, V b) { return _mm256_min_ps(a, b); }

static inline M veq(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
static inline M vne(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_NEQ_UQ); }
static inline M vlt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline M vle(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
static inline M vgt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
static inline M vge(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
static inline M vunord(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_UNORD_Q); }
static inline M mand(M a, M b) { return _mm256_and_ps(a, b); }
static inline M mor(M a, M b) { return _mm256_or_ps(a, b); }
static inline V vblend(M m, V f, V t) { return _mm256_blendv_ps(f, t, m); }

static inline V vexp(V x) { return Sleef_expf8_u10avx2(x); }
static inline V vlog(V x) { return Sleef_logf8_u10avx2(x); }
static inline V vlog1p(V x) { return Sleef_log1pf8_u10avx2(x); }
static inline V vexp2(V x) { return Sleef_exp2f8_u10avx2(x); }
static inline V vtanh(V x) { return Sleef_tanhf8_u10avx2(x); }
static inline V vsin(V x) { return Sleef_sinf8_u10avx2(x); }
static inline V vcos(V x) { return Sleef_cosf8_u10avx2(x); }
static inline V verf(V x) { return Sleef_erff8_u10avx2(x); }
static inline V vpow(V a, V b) { return Sleef_powf8_u10avx2(a, b); }

static inline M vmask_bytes(const uint8_t *p)
{
	__m256i w = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));

	return _mm256_castsi256_ps(_mm256_cmpgt_epi32(w, _mm256_setzero_si256()));
}

static inline V vbf16(const uint16_t *p)
{
	__m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));

	return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

static inline D dset1(double d) { return _mm256_set1_pd(d); }
static inline D dadd(D a, D b) { return _mm256_add_pd(a, b); }
static inline D dmul(D a, D b) { return _mm256_mul_pd(a, b); }
static inline D ddiv(D a, D b) { return _mm256_div_pd(a, b); }
static inline D dsqrt(D x) { return _mm256_sqrt_pd(x); }
static inline D dfmod(D a, D b) { return Sleef_fmodd4_avx2(a, b); }
static inline D dexp(D x) { return Sleef_expd4_u10avx2(x); }
static inline D dload(const double *p) { return _mm256_loadu_pd(p); }
static inline void dstore(double *p, D x) { _mm256_storeu_pd(p, x); }
static inline D dload_f(const float *p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
static inline D dmax_raw(D a, D b) { return _mm256_max_pd(a, b); }
static inline D dmin_raw(D a, D b) { return _mm256_min_pd(a, b); }
static inline D dand(D a, D b) { return _mm256_and_pd(a, b); }
static inline D dor(D a, D b) { return _mm256_or_pd(a, b); }
static inline DM deq(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_EQ_OQ); }
static inline DM dunord(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_UNORD_Q); }
static inline D dblend(DM m, D f, D t) { return _mm256_blendv_pd(f, t, m); }

static inline void vsplit(V x, D h[NDH])
{
	h[0] = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
	h[1] = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
}

static inline V vjoin(const D h[NDH])
{
	return _mm256_set_m128(_mm256_cvtpd_ps(h[1]), _mm256_cvtpd_ps(h[0]));
}

#include "tpu_vec_impl.h"
