// SPDX-License-Identifier: MIT
/* Reference GEMM: plain loops, correct and slow; to be replaced by a fast one. */
#include "tpu_gemm.h"

#include <string.h>

void tpu_gemm_init(void)
{
}

static float bf16_to_f32(uint16_t v)
{
	uint32_t bits = (uint32_t)v << 16;
	float f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

#define AT(p, ld, r, c, t) ((t) ? (p)[(int64_t)(c) * (ld) + (r)] : (p)[(int64_t)(r) * (ld) + (c)])

void tpu_gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
		  const float *a, int64_t lda, const float *b, int64_t ldb,
		  float *c, int64_t ldc, bool accumulate)
{
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++) {
			float acc = accumulate ? c[i * ldc + j] : 0.0f;

			for (int64_t p = 0; p < k; p++)
				acc += AT(a, lda, i, p, trans_a) * AT(b, ldb, p, j, trans_b);
			c[i * ldc + j] = acc;
		}
}

void tpu_gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
		   const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
		   float *c, int64_t ldc, bool accumulate)
{
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++) {
			float acc = accumulate ? c[i * ldc + j] : 0.0f;

			for (int64_t p = 0; p < k; p++)
				acc += bf16_to_f32(AT(a, lda, i, p, trans_a)) *
				       bf16_to_f32(AT(b, ldb, p, j, trans_b));
			c[i * ldc + j] = acc;
		}
}

static int32_t i8_at(const void *p, bool is_unsigned, int64_t idx)
{
	return is_unsigned ? ((const uint8_t *)p)[idx] : ((const int8_t *)p)[idx];
}

void tpu_gemm_i8(bool a_unsigned, bool b_unsigned, bool trans_a, bool trans_b,
		 int64_t m, int64_t n, int64_t k,
		 const void *a, int64_t lda, const void *b, int64_t ldb,
		 int32_t *c, int64_t ldc, bool accumulate)
{
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++) {
			uint32_t acc = accumulate ? (uint32_t)c[i * ldc + j] : 0;

			for (int64_t p = 0; p < k; p++) {
				int64_t ia = trans_a ? p * lda + i : i * lda + p;
				int64_t ib = trans_b ? j * ldb + p : p * ldb + j;

				acc += (uint32_t)(i8_at(a, a_unsigned, ia) *
						  i8_at(b, b_unsigned, ib));
			}
			c[i * ldc + j] = (int32_t)acc;
		}
}
