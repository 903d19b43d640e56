// SPDX-License-Identifier: MIT
/*
 * Exact 8-bit GEMM on AVX-VNNI's vpdpbusd: four u8 x s8 products summed
 * into each int32 lane per instruction, twice what the int16 kernels of
 * tpu_gemm_i8.c get from vpmaddwd or vpdpwssd. vpdpbusd (unlike
 * vpdpbusds) wraps, and each u8 x s8 product fits its int32 sum exactly.
 *
 * It wants A unsigned and B signed, so packing shifts the others by 128
 * (an XOR of the top bit): a = a' - alpha, b = b' + beta, alpha = 128 for a
 * signed A, beta = 128 for an unsigned B, and over one k-block of kc
 *   sum a b = sum a'b' + beta * sum_p a'[i][p] - alpha * sum_p b'[p][j]
 *             - alpha * beta * kc,
 * a row term and a column term added when the tile is stored. Everything
 * is modulo 2^32, so the result is exact with the same wrap-around.
 *
 * Two micro-kernels share the packing: AVX-VNNI's (ymm, 6 x 16 tiles) and,
 * where the host has AVX512-VNNI, one on zmm (12 x 16 tiles: one vpdpbusd
 * covers a row's 16 columns), twice the products per instruction.
 *
 * Packed layouts (kc4 = kc rounded up to 4, zero padded; zeros add nothing
 * to the products or to the sums):
 *  A block: rows of kc4 bytes (mr at a time), then the row terms.
 *  B panel: for each k quad, NR x {b'[p..p+3][j]}, then the NR column terms.
 */
#include "tpu_gemm_internal.h"

#include <immintrin.h>
#include <string.h>

#define MR 6		/* AVX-VNNI tile rows */
#define MR_WIDE 12	/* AVX512-VNNI tile rows */
#define MR_MAX MR_WIDE
#define NR 16
#define KC 1024		/* k per block: an A row is 1 KiB, a B panel 16 KiB */
#define MC 96		/* a multiple of both tile heights */
#define NC 1024		/* B block: 1 MiB, stays in L2 */

struct i8_src {
	const uint8_t *p;
	int64_t ld;
	bool trans;
	uint8_t flip;	/* 0x80: shift by 128 into the sign vpdpbusd wants */
};

static int64_t round_up(int64_t v, int64_t to)
{
	return (v + to - 1) / to * to;
}

static int64_t min64(int64_t x, int64_t y)
{
	return x < y ? x : y;
}

static uint8_t src_at(const struct i8_src *s, int64_t r, int64_t c)
{
	return s->p[s->trans ? c * s->ld + r : r * s->ld + c] ^ s->flip;
}

/* --- packing --- */

__attribute__((target("avx2")))
static void copy_flip(uint8_t *dst, const uint8_t *src, int64_t n, uint8_t flip)
{
	__m256i f = _mm256_set1_epi8((char)flip);
	int64_t j = 0;

	for (; j + 32 <= n; j += 32) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(src + j));

		_mm256_storeu_si256((__m256i *)(dst + j), _mm256_xor_si256(v, f));
	}
	for (; j < n; j++)
		dst[j] = src[j] ^ flip;
}

/* sum of a row of kc4 (a multiple of 4, >= 4) unsigned bytes. */
__attribute__((target("avx2")))
static int32_t row_sum(const uint8_t *row, int64_t kc4)
{
	__m256i s = _mm256_setzero_si256(), zero = s;
	int64_t j = 0;
	uint32_t t = 0;

	for (; j + 32 <= kc4; j += 32)
		s = _mm256_add_epi64(s, _mm256_sad_epu8(
			_mm256_loadu_si256((const __m256i *)(row + j)), zero));
	for (; j < kc4; j++)
		t += row[j];
	t += (uint32_t)(_mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 1) +
			_mm256_extract_epi64(s, 2) + _mm256_extract_epi64(s, 3));
	return (int32_t)t;
}

/* Rows i0.. of op(A) x k-range [p0, p0 + kc); returns the row terms. */
static int32_t *pack_a(uint8_t *dst, const struct i8_src *a, int64_t i0,
		       int64_t mc, int64_t p0, int64_t kc, int64_t kc4,
		       uint32_t beta, int64_t mr)
{
	int64_t rows = round_up(mc, mr);
	int32_t *corr = (int32_t *)(dst + rows * kc4);

	memset(dst, 0, rows * kc4);
	if (a->trans) {
		for (int64_t p = 0; p < kc; p++)
			for (int64_t r = 0; r < mc; r++)
				dst[r * kc4 + p] = src_at(a, i0 + r, p0 + p);
	} else {
		for (int64_t r = 0; r < mc; r++)
			copy_flip(dst + r * kc4, a->p + (i0 + r) * a->ld + p0, kc,
				  a->flip);
	}
	for (int64_t r = 0; r < rows; r++)
		corr[r] = beta ? (int32_t)(beta * (uint32_t)row_sum(dst + r * kc4, kc4)) : 0;
	return corr;
}

/* Four rows of op(B) from p, NR full columns from j, into one k quad. */
static void pack_b_quad_sse(uint8_t *dst, const struct i8_src *b, int64_t p,
			    int64_t j)
{
	const uint8_t *s = b->p + p * b->ld + j;
	__m128i f = _mm_set1_epi8((char)b->flip);
	__m128i r0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)s), f);
	__m128i r1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(s + b->ld)), f);
	__m128i r2 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(s + 2 * b->ld)), f);
	__m128i r3 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(s + 3 * b->ld)), f);
	__m128i lo01 = _mm_unpacklo_epi8(r0, r1), hi01 = _mm_unpackhi_epi8(r0, r1);
	__m128i lo23 = _mm_unpacklo_epi8(r2, r3), hi23 = _mm_unpackhi_epi8(r2, r3);
	__m128i *d = (__m128i *)dst;

	_mm_storeu_si128(d, _mm_unpacklo_epi16(lo01, lo23));
	_mm_storeu_si128(d + 1, _mm_unpackhi_epi16(lo01, lo23));
	_mm_storeu_si128(d + 2, _mm_unpacklo_epi16(hi01, hi23));
	_mm_storeu_si128(d + 3, _mm_unpackhi_epi16(hi01, hi23));
}

/*
 * Column terms of a packed panel: -alpha * sum b' - alpha * beta * kc.
 * Plain AVX2 (vpmaddubsw, then vpmaddwd: four signed bytes into each
 * int32), not vpdpbusd: the zmm kernel shares this packing, and a host with
 * AVX512-VNNI need not have AVX-VNNI (AMD's Zen 4 has only the former).
 */
__attribute__((target("avx2")))
static void panel_terms(int32_t *corr, const uint8_t *panel, int64_t kc4,
			int64_t kc, uint32_t alpha, uint32_t beta)
{
	__m256i ones = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
	__m256i s0 = _mm256_setzero_si256(), s1 = s0;
	__m256i k_term = _mm256_set1_epi32((int32_t)(alpha * beta * (uint32_t)kc));
	__m256i neg_alpha = _mm256_set1_epi32(-(int32_t)alpha);

	for (int64_t q = 0; q < kc4 / 4; q++, panel += 4 * NR) {
		__m256i p0 = _mm256_loadu_si256((const __m256i *)panel);
		__m256i p1 = _mm256_loadu_si256((const __m256i *)panel + 1);

		/* pairs of signed bytes fit int16 exactly: |sum| <= 256 */
		s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(
			_mm256_maddubs_epi16(ones, p0), ones16));
		s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(
			_mm256_maddubs_epi16(ones, p1), ones16));
	}
	s0 = _mm256_sub_epi32(_mm256_mullo_epi32(s0, neg_alpha), k_term);
	s1 = _mm256_sub_epi32(_mm256_mullo_epi32(s1, neg_alpha), k_term);
	_mm256_storeu_si256((__m256i *)corr, s0);
	_mm256_storeu_si256((__m256i *)corr + 1, s1);
}

static int64_t panel_bytes(int64_t kc4)
{
	return kc4 * NR + NR * sizeof(int32_t);
}

/* One NR-column panel of op(B): columns j.. (nr valid), k from p0. */
static void pack_b_panel(uint8_t *dst, const struct i8_src *b, int64_t p0,
			 int64_t kc, int64_t kc4, int64_t j, int64_t nr,
			 uint32_t alpha, uint32_t beta)
{
	int64_t q = 0;

	if (!b->trans && nr == NR)
		for (; 4 * q + 3 < kc; q++)
			pack_b_quad_sse(dst + q * 4 * NR, b, p0 + 4 * q, j);
	for (int64_t jj = 0; jj < NR; jj++)
		for (int64_t p = 4 * q; p < kc4; p++) {
			uint8_t v = p < kc && jj < nr ? src_at(b, p0 + p, j + jj) : 0;

			dst[(p / 4) * 4 * NR + jj * 4 + (p & 3)] = v;
		}
	panel_terms((int32_t *)(dst + kc4 * NR), dst, kc4, kc, alpha, beta);
}

/* --- the micro-kernel: C[MR x NR] (+)= A panel @ B panel + terms --- */

static int32_t load_quad(const uint8_t *p)
{
	int32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

#define ROW(r)								\
	do {								\
		__m256i x = _mm256_set1_epi32(load_quad(a + (r) * kc4 + 4 * q)); \
		c##r##0 = _mm256_dpbusd_avx_epi32(c##r##0, x, b0);	\
		c##r##1 = _mm256_dpbusd_avx_epi32(c##r##1, x, b1);	\
	} while (0)

#define STORE(r)							\
	do {								\
		__m256i *d = (__m256i *)(c + (r) * ldc);		\
		__m256i rt = _mm256_set1_epi32(row_terms[r]);		\
		c##r##0 = _mm256_add_epi32(c##r##0, _mm256_add_epi32(rt, ct0)); \
		c##r##1 = _mm256_add_epi32(c##r##1, _mm256_add_epi32(rt, ct1)); \
		if (acc) {						\
			c##r##0 = _mm256_add_epi32(c##r##0, _mm256_loadu_si256(d)); \
			c##r##1 = _mm256_add_epi32(c##r##1, _mm256_loadu_si256(d + 1)); \
		}							\
		_mm256_storeu_si256(d, c##r##0);			\
		_mm256_storeu_si256(d + 1, c##r##1);			\
	} while (0)

__attribute__((target("avx2,avxvnni")))
static void kernel(int64_t kc4, const uint8_t *a, const int32_t *row_terms,
		   const uint8_t *b, int32_t *c, int64_t ldc, bool acc)
{
	const __m256i *col_terms = (const __m256i *)(b + kc4 * NR);
	__m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00;
	__m256i c20 = c00, c21 = c00, c30 = c00, c31 = c00;
	__m256i c40 = c00, c41 = c00, c50 = c00, c51 = c00;
	__m256i ct0, ct1;

	for (int64_t q = 0; q < kc4 / 4; q++, b += 4 * NR) {
		__m256i b0 = _mm256_loadu_si256((const __m256i *)b);
		__m256i b1 = _mm256_loadu_si256((const __m256i *)b + 1);

		ROW(0); ROW(1); ROW(2); ROW(3); ROW(4); ROW(5);
	}
	ct0 = _mm256_loadu_si256(col_terms);
	ct1 = _mm256_loadu_si256(col_terms + 1);
	STORE(0); STORE(1); STORE(2); STORE(3); STORE(4); STORE(5);
}

#define TARGET_WIDE __attribute__((target("avx512f,avx512bw,avx512vnni")))

/* One row of the zmm tile: a k quad of A broadcast against all 16 columns. */
#define ROW_WIDE(r)							\
	c##r = _mm512_dpbusd_epi32(c##r,				\
		_mm512_set1_epi32(load_quad(a + (r) * kc4 + 4 * q)), b0)

#define STORE_WIDE(r)							\
	do {								\
		int32_t *d = c + (r) * ldc;				\
		c##r = _mm512_add_epi32(c##r, _mm512_add_epi32(		\
			_mm512_set1_epi32(row_terms[r]), ct));		\
		if (acc)						\
			c##r = _mm512_add_epi32(c##r, _mm512_loadu_si512(d)); \
		_mm512_storeu_si512(d, c##r);				\
	} while (0)

TARGET_WIDE
static void kernel_wide(int64_t kc4, const uint8_t *a, const int32_t *row_terms,
			const uint8_t *b, int32_t *c, int64_t ldc, bool acc)
{
	__m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0;
	__m512i c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0, c9 = c0;
	__m512i c10 = c0, c11 = c0, ct;

	for (int64_t q = 0; q < kc4 / 4; q++, b += 4 * NR) {
		__m512i b0 = _mm512_loadu_si512(b);

		ROW_WIDE(0); ROW_WIDE(1); ROW_WIDE(2); ROW_WIDE(3);
		ROW_WIDE(4); ROW_WIDE(5); ROW_WIDE(6); ROW_WIDE(7);
		ROW_WIDE(8); ROW_WIDE(9); ROW_WIDE(10); ROW_WIDE(11);
	}
	ct = _mm512_loadu_si512(b);	/* the column terms follow the panel */
	STORE_WIDE(0); STORE_WIDE(1); STORE_WIDE(2); STORE_WIDE(3);
	STORE_WIDE(4); STORE_WIDE(5); STORE_WIDE(6); STORE_WIDE(7);
	STORE_WIDE(8); STORE_WIDE(9); STORE_WIDE(10); STORE_WIDE(11);
}

/* Full tiles of the kernel in use: MR x NR, or MR_WIDE x NR on zmm. */
static void full_tile(bool wide, int64_t kc4, const uint8_t *a,
		      const int32_t *row_terms, const uint8_t *b, int32_t *c,
		      int64_t ldc, bool acc)
{
	if (wide)
		kernel_wide(kc4, a, row_terms, b, c, ldc, acc);
	else
		kernel(kc4, a, row_terms, b, c, ldc, acc);
}

/* A partial tile goes through a full one on the stack. */
static void tile(bool wide, int64_t kc4, const uint8_t *a,
		 const int32_t *row_terms, const uint8_t *b, int32_t *c,
		 int64_t ldc, int64_t mr, int64_t nr, bool acc)
{
	int32_t t[MR_MAX * NR];

	if (mr == (wide ? MR_WIDE : MR) && nr == NR) {
		full_tile(wide, kc4, a, row_terms, b, c, ldc, acc);
		return;
	}
	full_tile(wide, kc4, a, row_terms, b, t, NR, false);
	for (int64_t r = 0; r < mr; r++)
		for (int64_t j = 0; j < nr; j++) {
			uint32_t old = acc ? (uint32_t)c[r * ldc + j] : 0;

			c[r * ldc + j] = (int32_t)(old + (uint32_t)t[r * NR + j]);
		}
}

static void macro_kernel(bool wide, const uint8_t *pa,
			 const int32_t *row_terms, const uint8_t *pb,
			 int64_t mc, int64_t nc, int64_t kc4, int32_t *c,
			 int64_t ldc, bool acc)
{
	int64_t mr = wide ? MR_WIDE : MR;

	/* A B panel stays in L1 while the A panels stream from L2. */
	for (int64_t j = 0; j < nc; j += NR)
		for (int64_t i = 0; i < mc; i += mr)
			tile(wide, kc4, pa + i * kc4, row_terms + i,
			     pb + (j / NR) * panel_bytes(kc4), c + i * ldc + j,
			     ldc, min64(mr, mc - i), min64(NR, nc - j), acc);
}

bool tpu_gemm_i8_vnni(bool wide, bool a_unsigned, bool b_unsigned,
		      bool trans_a, bool trans_b, int64_t m, int64_t n,
		      int64_t k, const void *a, int64_t lda, const void *b,
		      int64_t ldb, int32_t *c, int64_t ldc, bool accumulate)
{
	struct i8_src sa = { a, lda, trans_a, a_unsigned ? 0 : 0x80 };
	struct i8_src sb = { b, ldb, trans_b, b_unsigned ? 0x80 : 0 };
	uint32_t alpha = sa.flip, beta = sb.flip;
	int64_t mr = wide ? MR_WIDE : MR;
	int64_t kc4_max = round_up(min64(k, KC), 4), mc_max = round_up(min64(m, MC), mr);
	uint8_t *pa = tpu_gemm_scratch(TPU_GEMM_SLOT_A, mc_max * (kc4_max + 4));
	uint8_t *pb = tpu_gemm_scratch(TPU_GEMM_SLOT_B, round_up(min64(n, NC), NR) /
				       NR * panel_bytes(kc4_max));

	if (!pa || !pb)
		return false;
	for (int64_t jc = 0; jc < n; jc += NC) {
		int64_t nc = min64(NC, n - jc);

		for (int64_t pc = 0; pc < k; pc += KC) {
			int64_t kc = min64(KC, k - pc), kc4 = round_up(kc, 4);

			for (int64_t j = 0; j < nc; j += NR)
				pack_b_panel(pb + (j / NR) * panel_bytes(kc4), &sb,
					     pc, kc, kc4, jc + j,
					     min64(NR, nc - j), alpha, beta);
			for (int64_t ic = 0; ic < m; ic += MC) {
				int64_t mc = min64(MC, m - ic);
				int32_t *rt = pack_a(pa, &sa, ic, mc, pc, kc,
						     kc4, beta, mr);

				macro_kernel(wide, pa, rt, pb, mc, nc, kc4,
					     c + ic * ldc + jc, ldc,
					     accumulate || pc > 0);
			}
		}
	}
	return true;
}
