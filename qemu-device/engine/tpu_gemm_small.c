// SPDX-License-Identifier: MIT
/*
 * f32 and bf16 GEMM on small blocks (a Pallas kernel's 128 x 128 tiles),
 * our own instead of OpenBLAS's.
 *
 * A grid job with small blocks calls the GEMM tens of thousands of times.
 * OpenBLAS packs both operands on every call: at 128^3 its copy routines
 * took a quarter of an f32 step (a third of its kernel's time), and bf16
 * paid a widening pass into f32 buffers before that. Here B is packed (and
 * widened) once per call straight into NR-column panels; A is read in
 * place when it is f32 rows, else widened into rows. Each C element is
 * summed over k in order with fused multiply-adds from zero, then added to
 * C (accumulate) or stored: bf16 products are exact in f32, so results
 * differ from OpenBLAS's in the rounding of the sums only.
 */
#include "tpu_gemm_internal.h"
#include "tpu_prefetch.h"

#include <immintrin.h>
#include <string.h>

/* B of at most this many elements (k x n) stays in L2 once packed. */
#define SMALL_KN	(256 * 256)
#define SMALL_MAX_DIM	512

/* Tiles: AVX-512 8 x 32 (16 zmm accumulators), AVX2 6 x 16 (12 ymm). */
#define MR_MAX		8
#define NR_MAX		32

/*
 * One operand as op(X), f32 or bf16: element (r, c) is at element
 * r * rs + c * cs of @p.
 */
struct small_src {
	const void *p;
	int64_t rs, cs;
	bool f32;
};

/*
 * Micro-kernel: C[MR x NR] (+)= A(MR rows of k, lda apart) @ packed B,
 * issuing the @npf (at most @k) prefetches of @pf evenly over its k steps.
 */
typedef void small_kernel_fn(int64_t k, const float *a, int64_t lda,
			     const float *b, float *c, int64_t ldc, bool acc,
			     const char *const *pf, int64_t npf);

/*
 * The next step's lines go into L2 spread over a tile's k steps: issued
 * all at once at a tile's start they held every line-fill buffer while the
 * kernel's own loads of B waited behind them (a 128^3 f32 step on hot data
 * took 37.5 us with a step's worth of them, 32.7 us spread). A tile takes
 * at most this many.
 */
#define PF_MAX		128

static float src_at(const struct small_src *s, int64_t r, int64_t c)
{
	int64_t at = r * s->rs + c * s->cs;
	uint32_t bits;
	float f;

	if (s->f32)
		return ((const float *)s->p)[at];
	bits = (uint32_t)((const uint16_t *)s->p)[at] << 16;
	memcpy(&f, &bits, sizeof(f));
	return f;
}

/*
 * Eight elements of row @r from column @c on as f32 (the row is stored
 * contiguously): bf16 is an f32's top half, so a shift.
 */
__attribute__((target("avx2")))
static inline __m256 load8(const struct small_src *s, int64_t r, int64_t c)
{
	int64_t at = r * s->rs + c;

	if (s->f32)
		return _mm256_loadu_ps((const float *)s->p + at);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(
		_mm_loadu_si128((const __m128i *)((const uint16_t *)s->p + at))), 16));
}

/*
 * Panels of packed B start this many floats apart beyond their k x NR: at a
 * power-of-two distance the row-by-row packing's stores fought over the
 * same L1 sets.
 */
#define PANEL_PAD	16

static int64_t panel_stride(int64_t k, int NR)
{
	return k * NR + PANEL_PAD;
}

/*
 * op(B) (k x n) into NR-column panels of k rows each, columns past n zero.
 * Row by row, eight columns per move when B is stored k x n (B is a new
 * block at each grid step: whole rows are what the hardware fetches ahead
 * best), one element at a time when it is stored transposed.
 */
__attribute__((target("avx2")))
static void pack_b(float *dst, const struct small_src *b, int64_t k, int64_t n,
		   int NR)
{
	int64_t full = b->cs == 1 ? n / NR * NR : 0, ps = panel_stride(k, NR);

	for (int64_t q = 0; q < k; q++) {
		float *d = dst + q * NR;

		for (int64_t j = 0; j < full; j += NR, d += ps)
			for (int c = 0; c < NR; c += 8)
				_mm256_storeu_ps(d + c, load8(b, q, j + c));
		for (int64_t j = full; j < n; j += NR, d += ps)
			for (int c = 0; c < NR; c++)
				d[c] = j + c < n ? src_at(b, q, j + c) : 0.0f;
	}
}

/* op(A) (m rows of k) as f32 rows, then zero rows up to @padded. */
__attribute__((target("avx2")))
static void widen_a(float *dst, const struct small_src *a, int64_t m,
		    int64_t padded, int64_t k)
{
	int64_t vec = a->cs == 1 ? k / 8 * 8 : 0;

	for (int64_t r = 0; r < m; r++, dst += k) {
		int64_t q = 0;

		for (; q < vec; q += 8)
			_mm256_storeu_ps(dst + q, load8(a, r, q));
		for (; q < k; q++)
			dst[q] = src_at(a, r, q);
	}
	memset(dst, 0, (padded - m) * k * sizeof(float));
}

/*
 * --- micro-kernels: the same loop for each ISA, in macros over the
 * intrinsics' prefix P (_mm512 or _mm256); W floats a vector ---
 */

#define KROW(P, r) do {							\
		__typeof__(b0) x = P##_set1_ps(a[(r) * lda + q]);	\
		c##r##0 = P##_fmadd_ps(x, b0, c##r##0);			\
		c##r##1 = P##_fmadd_ps(x, b1, c##r##1);			\
	} while (0)

#define KSTORE(P, r) do {						\
		float *d = c + (r) * ldc;				\
		if (acc) {						\
			c##r##0 = P##_add_ps(c##r##0, P##_loadu_ps(d));	\
			c##r##1 = P##_add_ps(c##r##1, P##_loadu_ps(d + W)); \
		}							\
		P##_storeu_ps(d, c##r##0);				\
		P##_storeu_ps(d + W, c##r##1);				\
	} while (0)

#define KLOOP(P, ROWS) do {						\
		int64_t every = npf ? k / npf : k, next = 0, at = 0;	\
									\
		for (int64_t q = 0; q < k; q++, b += 2 * W) {		\
			if (q == next && at < npf) {			\
				_mm_prefetch(pf[at++], _MM_HINT_T1);	\
				next += every;				\
			}						\
			__typeof__(c00) b0 = P##_loadu_ps(b);		\
			__typeof__(c00) b1 = P##_loadu_ps(b + W);	\
									\
			ROWS(P, KROW);					\
		}							\
		ROWS(P, KSTORE);					\
	} while (0)

#define ROWS8(P, F) do {						\
		F(P, 0); F(P, 1); F(P, 2); F(P, 3);			\
		F(P, 4); F(P, 5); F(P, 6); F(P, 7);			\
	} while (0)

#define ROWS6(P, F) do {						\
		F(P, 0); F(P, 1); F(P, 2); F(P, 3); F(P, 4); F(P, 5);	\
	} while (0)

__attribute__((target("avx512f")))
static void kernel_avx512(int64_t k, const float *a, int64_t lda,
			  const float *b, float *c, int64_t ldc, bool acc,
			  const char *const *pf, int64_t npf)
{
	enum { W = 16 };
	__m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
	__m512 c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00;
	__m512 c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;

	KLOOP(_mm512, ROWS8);
}

__attribute__((target("avx2,fma")))
static void kernel_avx2(int64_t k, const float *a, int64_t lda,
			const float *b, float *c, int64_t ldc, bool acc,
			const char *const *pf, int64_t npf)
{
	enum { W = 8 };
	__m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
	__m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00;
	__m256 c40 = c00, c41 = c00, c50 = c00, c51 = c00;

	KLOOP(_mm256, ROWS6);
}

struct small_isa {
	small_kernel_fn *kern;
	int mr, nr;
};

static const struct small_isa isa_avx512 = { kernel_avx512, 8, 32 };
static const struct small_isa isa_avx2 = { kernel_avx2, 6, 16 };

/* A partial tile goes through a whole one on the stack. */
static void tile(const struct small_isa *isa, int64_t k, const float *a,
		 int64_t lda, const float *b, float *c, int64_t ldc, int64_t mr,
		 int64_t nr, bool acc, const char *const *pf, int64_t npf)
{
	float t[MR_MAX * NR_MAX];

	if (mr == isa->mr && nr == isa->nr) {
		isa->kern(k, a, lda, b, c, ldc, acc, pf, npf);
		return;
	}
	isa->kern(k, a, lda, b, t, isa->nr, false, pf, npf);
	for (int64_t r = 0; r < mr; r++)
		for (int64_t j = 0; j < nr; j++)
			c[r * ldc + j] = acc ? c[r * ldc + j] + t[r * isa->nr + j] :
					       t[r * isa->nr + j];
}

static int64_t min64(int64_t x, int64_t y)
{
	return x < y ? x : y;
}

/*
 * Rows of A as the kernel reads them, whole tiles of rows: f32 rows in
 * place (@lda apart) but for a last partial tile, which is copied and
 * zero-padded (@tail, k apart); anything else widened into scratch.
 */
struct a_rows {
	const float *p, *tail;
	int64_t lda, whole;	/* rows read in place, before @tail */
};

static bool rows_of_a(const struct small_src *a, int64_t m, int64_t k,
		      int64_t mr, struct a_rows *ar)
{
	int64_t whole = a->f32 && a->cs == 1 ? m / mr * mr : 0;
	int64_t rest = m - whole, padded = (rest + mr - 1) / mr * mr;
	struct small_src t = *a;
	float *buf = NULL;

	if (rest) {
		buf = tpu_gemm_scratch(TPU_GEMM_SLOT_A, padded * k * sizeof(float));
		if (!buf)
			return false;
		t.p = (const char *)a->p + whole * a->rs * (a->f32 ? 4 : 2);
		widen_a(buf, &t, rest, padded, k);
	}
	*ar = (struct a_rows){ a->p, buf, a->rs, whole };
	return true;
}

static bool gemm_small(const struct small_src *sa, const struct small_src *sb,
		       int64_t m, int64_t n, int64_t k, float *c, int64_t ldc,
		       bool accumulate)
{
	const struct small_isa *isa;
	int64_t mr, nr, ps, tiles;
	struct a_rows ar;
	float *pb;

	if (tpu_gemm_isa < TPU_GEMM_AVX2 || n > SMALL_MAX_DIM ||
	    k > SMALL_MAX_DIM || n * k > SMALL_KN || m <= 0 || n <= 0 || k <= 0)
		return false;
	isa = tpu_gemm_isa >= TPU_GEMM_AVX512 ? &isa_avx512 : &isa_avx2;
	mr = isa->mr;
	nr = isa->nr;
	ps = panel_stride(k, nr);
	pb = tpu_gemm_scratch(TPU_GEMM_SLOT_B,
			      ((n + nr - 1) / nr) * ps * sizeof(float));
	if (!pb || !rows_of_a(sa, m, k, mr, &ar))
		return false;
	pack_b(pb, sb, k, n, nr);
	/*
	 * An A panel stays in L1 while the B panels stream from L2; a share
	 * of the next grid step's blocks is asked for at each tile.
	 */
	tiles = ((m + mr - 1) / mr) * ((n + nr - 1) / nr);
	for (int64_t i = 0; i < m; i += mr) {
		const float *pa = i < ar.whole ? ar.p + i * ar.lda :
						 ar.tail + (i - ar.whole) * k;
		int64_t lda = i < ar.whole ? ar.lda : k;

		for (int64_t j = 0; j < n; j += nr, tiles--) {
			const char *pf[PF_MAX];
			int64_t npf = tpu_prefetch_take(pf, PF_MAX, tiles);

			/* more than the tile has k steps for: the rest now */
			for (int64_t p = k; p < npf; p++)
				_mm_prefetch(pf[p], _MM_HINT_T1);
			tile(isa, k, pa, lda, pb + j / nr * ps,
			     c + i * ldc + j, ldc, min64(mr, m - i),
			     min64(nr, n - j), accumulate, pf, min64(npf, k));
		}
	}
	return true;
}

bool tpu_gemm_f32_small(bool trans_a, bool trans_b, int64_t m, int64_t n,
			int64_t k, const float *a, int64_t lda, const float *b,
			int64_t ldb, float *c, int64_t ldc, bool accumulate)
{
	struct small_src sa = { a, trans_a ? 1 : lda, trans_a ? lda : 1, true };
	struct small_src sb = { b, trans_b ? 1 : ldb, trans_b ? ldb : 1, true };

	return gemm_small(&sa, &sb, m, n, k, c, ldc, accumulate);
}

bool tpu_gemm_bf16_small(bool trans_a, bool trans_b, int64_t m, int64_t n,
			 int64_t k, const uint16_t *a, int64_t lda,
			 const uint16_t *b, int64_t ldb, float *c, int64_t ldc,
			 bool accumulate)
{
	struct small_src sa = { a, trans_a ? 1 : lda, trans_a ? lda : 1, false };
	struct small_src sb = { b, trans_b ? 1 : ldb, trans_b ? ldb : 1, false };

	return gemm_small(&sa, &sb, m, n, k, c, ldc, accumulate);
}
