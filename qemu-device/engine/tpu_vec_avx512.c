// SPDX-License-Identifier: MIT
/*
 * The vector kernels on AVX-512 F and DQ, 16 floats a vector (the kernels
 * themselves are tpu_vec_impl.h). The whole file targets AVX-512:
 * tpu_vec.c calls it only on a host that has it. The pragma comes first
 * so that sleef.h declares its AVX-512 functions.
 */
#pragma GCC target("avx512f,avx512dq")

#include <immintrin.h>
#include <sleef.h>

#include "tpu_vec_int.h"

#define VW	16
#define DW	8
#define NDH	2
#define KERNELS	tpu_vec_avx512_kernels

typedef __m512 V;
typedef __mmask16 M;
typedef __m512d D;
typedef __mmask8 DM;

static inline V vload(const float *p) { return _mm512_loadu_ps(p); }
static inline void vstore(float *p, V x) { _mm512_storeu_ps(p, x); }
static inline V vset1(float f) { return _mm512_set1_ps(f); }
static inline V vbits(uint32_t b)
{
	return _mm512_castsi512_ps(_mm512_set1_epi32((int)b));
}

static inline V vadd(V a, V b) { return _mm512_add_ps(a, b); }
static inline V vsub(V a, V b) { return _mm512_sub_ps(a, b); }
static inline V vmul(V a, V b) { return _mm512_mul_ps(a, b); }
static inline V vdiv(V a, V b) { return _mm512_div_ps(a, b); }
static inline V vsqrt(V x) { return _mm512_sqrt_ps(x); }
static inline V vfloor(V x)
{
	return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
static inline V vceil(V x)
{
	return _mm512_roundscale_ps(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
}
static inline V vrint(V x)
{
	return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline V vand(V a, V b) { return _mm512_and_ps(a, b); }
static inline V vor(V a, V b) { return _mm512_or_ps(a, b); }
static inline V vxor(V a, V b) { return _mm512_xor_ps(a, b); }
static inline V vmax_raw(V a, V b) { return _mm512_max_ps(a, b); }
static inline V vmin_raw(V a, V b) { return _mm512_min_ps(a, b); }

static inline M veq(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
static inline M vne(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ); }
static inline M vlt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline M vle(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
static inline M vgt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
static inline M vge(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
static inline M vunord(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q); }
static inline M mand(M a, M b) { return a & b; }
static inline M mor(M a, M b) { return a | b; }
static inline V vblend(M m, V f, V t) { return _mm512_mask_blend_ps(m, f, t); }

static inline V vexp(V x) { return Sleef_expf16_u10avx512f(x); }
static inline V vlog(V x) { return Sleef_logf16_u10avx512f(x); }
static inline V vlog1p(V x) { return Sleef_log1pf16_u10avx512f(x); }
static inline V vexp2(V x) { return Sleef_exp2f16_u10avx512f(x); }
static inline V vtanh(V x) { return Sleef_tanhf16_u10avx512f(x); }
static inline V vsin(V x) { return Sleef_sinf16_u10avx512f(x); }
static inline V vcos(V x) { return Sleef_cosf16_u10avx512f(x); }
static inline V verf(V x) { return Sleef_erff16_u10avx512f(x); }
static inline V vpow(V a, V b) { return Sleef_powf16_u10avx512f(a, b); }

static inline M vmask_bytes(const uint8_t *p)
{
	__m512i w = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));

	return _mm512_test_epi32_mask(w, w);
}

static inline V vbf16(const uint16_t *p)
{
	__m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));

	return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

static inline D dset1(double d) { return _mm512_set1_pd(d); }
static inline D dadd(D a, D b) { return _mm512_add_pd(a, b); }
static inline D dmul(D a, D b) { return _mm512_mul_pd(a, b); }
static inline D ddiv(D a, D b) { return _mm512_div_pd(a, b); }
static inline D dsqrt(D x) { return _mm512_sqrt_pd(x); }
static inline D dfmod(D a, D b) { return Sleef_fmodd8_avx512f(a, b); }
static inline D dexp(D x) { return Sleef_expd8_u10avx512f(x); }
static inline D dload(const double *p) { return _mm512_loadu_pd(p); }
static inline void dstore(double *p, D x) { _mm512_storeu_pd(p, x); }
static inline D dload_f(const float *p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
static inline D dmax_raw(D a, D b) { return _mm512_max_pd(a, b); }
static inline D dmin_raw(D a, D b) { return _mm512_min_pd(a, b); }
static inline D dand(D a, D b) { return _mm512_and_pd(a, b); }
static inline D dor(D a, D b) { return _mm512_or_pd(a, b); }
static inline DM deq(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ); }
static inline DM dunord(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q); }
static inline D dblend(DM m, D f, D t) { return _mm512_mask_blend_pd(m, f, t); }

static inline void vsplit(V x, D h[NDH])
{
	h[0] = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
	h[1] = _mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1));
}

static inline V vjoin(const D h[NDH])
{
	V lo = _mm512_castps256_ps512(_mm512_cvtpd_ps(h[0]));

	return _mm512_insertf32x8(lo, _mm512_cvtpd_ps(h[1]), 1);
}

#include "tpu_vec_impl.h"
