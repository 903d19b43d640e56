// SPDX-License-Identifier: MIT
/*
 * Fast casts (tpu_cast.h). The elementwise path widens every element to a
 * double and back, which costs more than the dot feeding it on small
 * blocks; these loops do the same rounding on the raw bits, eight lanes at
 * a time where the host has AVX2.
 */
#include "tpu_cast.h"

#include <immintrin.h>
#include <string.h>

#include "tpu_gemm_internal.h"
#include "tpu_job.h"

#define F32_QUIET	0x00400000u

static bool same_word(uint8_t dtype)
{
	return dtype == TPU_DTYPE_INT32 || dtype == TPU_DTYPE_UINT32;
}

/* A float through a double and back: the same bits, but NaNs made quiet. */
static uint32_t f32_quiet(uint32_t b)
{
	return (b & 0x7fffffff) > 0x7f800000 ? b | F32_QUIET : b;
}

static void f32_row(uint32_t *dst, const uint32_t *src, int64_t n)
{
	for (int64_t j = 0; j < n; j++)
		dst[j] = f32_quiet(src[j]);
}

static void bf16_row(uint16_t *dst, const uint32_t *src, int64_t n)
{
	for (int64_t j = 0; j < n; j++)
		dst[j] = tpu_bf16_round(src[j]);
}

/* Lanes of @b that hold a NaN: |b| above infinity's bits (as integers). */
__attribute__((target("avx2")))
static __m256i nan_lanes(__m256i b)
{
	__m256i mag = _mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff));

	return _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
}

__attribute__((target("avx2")))
static void f32_row_avx2(uint32_t *dst, const uint32_t *src, int64_t n)
{
	int64_t j = 0;

	for (; j + 8 <= n; j += 8) {
		__m256i b = _mm256_loadu_si256((const __m256i *)(src + j));
		__m256i q = _mm256_and_si256(nan_lanes(b),
					     _mm256_set1_epi32(F32_QUIET));

		_mm256_storeu_si256((__m256i *)(dst + j), _mm256_or_si256(b, q));
	}
	f32_row(dst + j, src + j, n - j);
}

__attribute__((target("avx2")))
static void bf16_row_avx2(uint16_t *dst, const uint32_t *src, int64_t n)
{
	const __m256i one = _mm256_set1_epi32(1);
	int64_t j = 0;

	for (; j + 8 <= n; j += 8) {
		__m256i b = _mm256_loadu_si256((const __m256i *)(src + j));
		__m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), one);
		__m256i r = _mm256_add_epi32(b, _mm256_add_epi32(
					_mm256_set1_epi32(0x7fff), odd));
		__m256i nan = _mm256_or_si256(_mm256_srli_epi32(b, 16),
					      _mm256_set1_epi32(0x40));

		r = _mm256_blendv_epi8(_mm256_srli_epi32(r, 16), nan,
				       nan_lanes(b));
		/* 32 -> 16 bits: packus works per 128-bit lane, so gather 0 and 2 */
		r = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
		_mm_storeu_si128((__m128i *)(dst + j), _mm256_castsi256_si128(r));
	}
	/*
	 * Leave no dirty upper YMM state for the SSE code that follows on
	 * this thread (OpenBLAS's kernels ran several times slower after it).
	 */
	_mm256_zeroupper();
	bf16_row(dst + j, src + j, n - j);
}

bool tpu_cast_row(void *dst, uint8_t dt, const void *src, uint8_t st,
		  int64_t n)
{
	if (st == TPU_DTYPE_F32 && dt == TPU_DTYPE_F32) {
		if (tpu_gemm_has_avx2)
			f32_row_avx2(dst, src, n);
		else
			f32_row(dst, src, n);
	} else if (st == TPU_DTYPE_F32 && dt == TPU_DTYPE_BF16) {
		if (tpu_gemm_has_avx2)
			bf16_row_avx2(dst, src, n);
		else
			bf16_row(dst, src, n);
	} else if (st == dt && same_word(st)) {
		/* an int32 or uint32 is exact in a double and rounds to itself */
		if (dst != src)
			memmove(dst, src, n * sizeof(int32_t));
	} else {
		return false;
	}
	return true;
}
