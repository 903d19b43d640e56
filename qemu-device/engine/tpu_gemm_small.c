// SPDX-License-Identifier: MIT
/*
 * f32 and bf16 GEMM on small blocks (a Pallas kernel's 128 x 128 tiles),
 * our own instead of OpenBLAS's.
 *
 * A grid job with small blocks calls the GEMM tens of thousands of times.
 * OpenBLAS packs both operands on every call: at 128^3 its copy routines
 * took a quarter of an f32 step (a third of its kernel's time), and bf16
 * paid a widening pass into f32 buffers before that. Here B is packed (and
 * widened) once per call straight into NR-column panels and A into panels
 * of a tile's rows, k-major: a k step's broadcasts then come from one line
 * (read in place, six rows of A took 15 % more time a step); a block that
 * a job reads again is packed once and kept for the job (tpu_panels.h).
 * Each C element is summed over k in order with fused multiply-adds from zero, then added to
 * C (accumulate) or stored: bf16 products are exact in f32, so results
 * differ from OpenBLAS's in the rounding of the sums only.
 */
#include "tpu_gemm_internal.h"
#include "tpu_panels.h"
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
 * The next step's lines go into L2 spread over a tile's k steps: issued
 * all at once at a tile's start they held every line-fill buffer while the
 * kernel's own loads of B waited behind them (a 128^3 f32 step on hot data
 * took 37.5 us with a step's worth of them, 32.7 us spread). A tile takes
 * at most this many.
 */
#define PF_MAX		128
#define PF_ROW_MAX	1024	/* a row of tiles' */

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
 * Eight consecutive elements at @p as f32, @f32 or bf16 (an f32's top half,
 * so a shift); inlined with a constant @f32, so the load has no branch.
 */
__attribute__((target("avx2"), always_inline))
static inline __m256 load8(const void *p, bool f32)
{
	if (f32)
		return _mm256_loadu_ps(p);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(
		_mm_loadu_si128(p)), 16));
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
 * Rows of B stored k x n, columns [0, @full) as whole panels: one element
 * type per inlining, so the moves have no branch.
 */
__attribute__((target("avx2"), always_inline))
static inline void pack_b_rows(float *dst, const struct small_src *b,
			       int64_t k, int64_t full, int NR, int64_t ps,
			       bool f32)
{
	for (int64_t q = 0; q < k; q++) {
		const char *row = (const char *)b->p + q * b->rs * (f32 ? 4 : 2);
		float *d = dst + q * NR;

		for (int64_t j = 0; j < full; j += NR, d += ps)
			for (int c = 0; c < NR; c += 8)
				_mm256_storeu_ps(d + c, load8(row + (j + c) *
							    (f32 ? 4 : 2), f32));
	}
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

	if (b->f32)
		pack_b_rows(dst, b, k, full, NR, ps, true);
	else
		pack_b_rows(dst, b, k, full, NR, ps, false);
	for (int64_t q = 0; q < k; q++) {
		float *d = dst + q * NR + full / NR * ps;

		for (int64_t j = full; j < n; j += NR, d += ps)
			for (int c = 0; c < NR; c++)
				d[c] = j + c < n ? src_at(b, q, j + c) : 0.0f;
	}
}

/*
 * Eight rows of eight columns transposed: @v[r] holds row r's columns on
 * entry, column r's rows on return.
 */
__attribute__((target("avx2"), always_inline))
static inline void transpose8(__m256 v[8])
{
	__m256 t0 = _mm256_unpacklo_ps(v[0], v[1]);
	__m256 t1 = _mm256_unpackhi_ps(v[0], v[1]);
	__m256 t2 = _mm256_unpacklo_ps(v[2], v[3]);
	__m256 t3 = _mm256_unpackhi_ps(v[2], v[3]);
	__m256 t4 = _mm256_unpacklo_ps(v[4], v[5]);
	__m256 t5 = _mm256_unpackhi_ps(v[4], v[5]);
	__m256 t6 = _mm256_unpacklo_ps(v[6], v[7]);
	__m256 t7 = _mm256_unpackhi_ps(v[6], v[7]);
	/* u0 holds columns 0 and 4 of rows 0-3, u1 columns 1 and 5, ... */
	__m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44);
	__m256 u1 = _mm256_shuffle_ps(t0, t2, 0xee);
	__m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44);
	__m256 u3 = _mm256_shuffle_ps(t1, t3, 0xee);
	__m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44);
	__m256 u5 = _mm256_shuffle_ps(t4, t6, 0xee);
	__m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44);
	__m256 u7 = _mm256_shuffle_ps(t5, t7, 0xee);

	v[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
	v[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
	v[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
	v[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
	v[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
	v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
	v[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
	v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* What a tile's rows past the end of A read: zeros, as f32 or bf16. */
static const float zero_row[SMALL_MAX_DIM];

/*
 * Columns [0, @vec) of eight rows (@row[r], f32 or bf16 by @f32) into a
 * panel @rows high, eight columns at a time through a transpose; inlined
 * once per element type so the loads have no branch.
 */
__attribute__((target("avx2"), always_inline))
static inline void pack_a_cols(float *dst, const void *const row[8],
			       int rows, int64_t vec, bool f32)
{
	for (int64_t q = 0; q < vec; q += 8) {
		__m256 v[8];

#pragma GCC unroll 8
		for (int r = 0; r < 8; r++)
			v[r] = load8((const char *)row[r] + q * (f32 ? 4 : 2),
				     f32);
		transpose8(v);
#pragma GCC unroll 8
		for (int c = 0; c < 8; c++)
			_mm256_storeu_ps(dst + (q + c) * rows, v[c]);
	}
}

/*
 * Rows [@r0, @r0 + @rows) of op(A), zero rows from @valid on, as one panel:
 * element (r, q) at @dst[q * rows + r]. When A's rows are contiguous, eight
 * columns at a time; a column's stores are 8 wide and overlap the next
 * column's, so the panel needs 8 - @rows floats of slack after it.
 */
__attribute__((target("avx2")))
static void pack_a_panel(float *dst, const struct small_src *a, int64_t r0,
			 int rows, int valid, int64_t k)
{
	int64_t vec = a->cs == 1 ? k / 8 * 8 : 0;
	const void *row[8];

	for (int r = 0; r < 8; r++)
		row[r] = r < valid ? (const char *)a->p +
				     (r0 + r) * a->rs * (a->f32 ? 4 : 2) :
				     (const void *)zero_row;
	if (a->f32)
		pack_a_cols(dst, row, rows, vec, true);
	else
		pack_a_cols(dst, row, rows, vec, false);
	for (int64_t q = vec; q < k; q++)
		for (int r = 0; r < rows; r++)
			dst[q * rows + r] = r < valid ? src_at(a, r0 + r, q) : 0.0f;
}

/*
 * --- micro-kernels: the same loop for each ISA, in macros over the
 * intrinsics' prefix P (_mm512 or _mm256); W floats a vector ---
 */

#define KROW(P, r) do {							\
		__typeof__(b0) x = P##_set1_ps(a[(r) * as]);		\
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

#define KSTEP(P, ROWS) do {						\
		__typeof__(c00) b0 = P##_loadu_ps(b);			\
		__typeof__(c00) b1 = P##_loadu_ps(b + W);		\
									\
		ROWS(P, KROW);						\
		a += ak;						\
		b += 2 * W;						\
	} while (0)

#define KGROUP(P, ROWS) do {						\
		KSTEP(P, ROWS);						\
		KSTEP(P, ROWS);						\
		KSTEP(P, ROWS);						\
		KSTEP(P, ROWS);						\
	} while (0)

/*
 * The AVX2 6 x 16 kernel's four steps in assembly: its 12 accumulators,
 * two B vectors and a broadcast fill 15 of the 16 registers, and GCC's
 * schedule of the unrolled C spilled two accumulators (a fifth slower).
 * @A(s, r) is row r's address at step s: in a packed panel, or in place
 * (rows 0-2 from a, 3-5 from a3, lda bytes apart).
 */
#define AVX2_ROW(A, s, r, lo, hi)					\
	"vbroadcastss " A(s, r) ", %%ymm13\n\t"				\
	"vfmadd231ps %%ymm13, %%ymm14, %[" #lo "]\n\t"			\
	"vfmadd231ps %%ymm13, %%ymm15, %[" #hi "]\n\t"

#define AVX2_STEP6(A, s)						\
	"vmovups " #s "*64(%[b]), %%ymm14\n\t"				\
	"vmovups " #s "*64+32(%[b]), %%ymm15\n\t"			\
	AVX2_ROW(A, s, 0, c00, c01) AVX2_ROW(A, s, 1, c10, c11)		\
	AVX2_ROW(A, s, 2, c20, c21) AVX2_ROW(A, s, 3, c30, c31)		\
	AVX2_ROW(A, s, 4, c40, c41) AVX2_ROW(A, s, 5, c50, c51)

#define A_PACKED(s, r)	#s "*24+" #r "*4(%[a])"
#define A_ROWS(s, r)	#s "*4" A_ROW##r
#define A_ROW0		"(%[a])"
#define A_ROW1		"(%[a],%[l])"
#define A_ROW2		"(%[a],%[l],2)"
#define A_ROW3		"(%[a3])"
#define A_ROW4		"(%[a3],%[l])"
#define A_ROW5		"(%[a3],%[l],2)"

#define AVX2_ACC							\
	[c00] "+x"(c00), [c01] "+x"(c01), [c10] "+x"(c10),		\
	[c11] "+x"(c11), [c20] "+x"(c20), [c21] "+x"(c21),		\
	[c30] "+x"(c30), [c31] "+x"(c31), [c40] "+x"(c40),		\
	[c41] "+x"(c41), [c50] "+x"(c50), [c51] "+x"(c51)

/* The asm reads memory its operands do not name: "memory" says so. */
#define AVX2_GROUP6(P, ROWS) do {					\
		__asm__(AVX2_STEP6(A_PACKED, 0) AVX2_STEP6(A_PACKED, 1)	\
			AVX2_STEP6(A_PACKED, 2) AVX2_STEP6(A_PACKED, 3)	\
			: AVX2_ACC					\
			: [a] "r"(a), [b] "r"(b)			\
			: "xmm13", "xmm14", "xmm15", "memory");		\
		a += 4 * ak;						\
		b += 8 * W;						\
	} while (0)

#define AVX2_GROUP6_ROWS(P, ROWS) do {					\
		__asm__(AVX2_STEP6(A_ROWS, 0) AVX2_STEP6(A_ROWS, 1)	\
			AVX2_STEP6(A_ROWS, 2) AVX2_STEP6(A_ROWS, 3)	\
			: AVX2_ACC					\
			: [a] "r"(a), [a3] "r"(a + 3 * as),		\
			  [l] "r"(as * 4), [b] "r"(b)			\
			: "xmm13", "xmm14", "xmm15", "memory");		\
		a += 4 * ak;						\
		b += 8 * W;						\
	} while (0)

/*
 * k steps four at a time (the loop's own work was a fifth of each step's
 * instructions), each group issuing its share of the prefetches.
 */
#define KLOOP(P, ROWS, GROUP) do {						\
		int64_t groups = k / 4 ? k / 4 : 1;			\
		int64_t per = (npf + groups - 1) / groups, at = 0, q = 0; \
									\
		for (; q + 4 <= k; q += 4) {				\
			for (int64_t e = at + per; at < e && at < npf; at++) \
				_mm_prefetch(pf[at], _MM_HINT_T1);	\
			GROUP(P, ROWS);					\
		}							\
		for (; q < k; q++)					\
			KSTEP(P, ROWS);					\
		for (; at < npf; at++)					\
			_mm_prefetch(pf[at], _MM_HINT_T1);		\
		ROWS(P, KSTORE);					\
	} while (0)

#define ROWS8(P, F) do {						\
		F(P, 0); F(P, 1); F(P, 2); F(P, 3);			\
		F(P, 4); F(P, 5); F(P, 6); F(P, 7);			\
	} while (0)

#define ROWS6(P, F) do {						\
		F(P, 0); F(P, 1); F(P, 2); F(P, 3); F(P, 4); F(P, 5);	\
	} while (0)

#define ROWS4(P, F) do {						\
		F(P, 0); F(P, 1); F(P, 2); F(P, 3);			\
	} while (0)

/*
 * A micro-kernel: C[rows x NR] (+)= A @ a packed B panel, issuing the @npf
 * prefetches of @pf over its k steps. A is a packed panel (k x rows,
 * k-major) or, for the _ROWS kernels, rows of @lda floats in place.
 */
#define KERNEL_AVX512(name, ROWS, rows, GROUP)				\
__attribute__((target("avx512f")))					\
static void name(int64_t k, const float *a, int64_t lda, const float *b, \
		 float *c, int64_t ldc, bool acc, const char *const *pf,	\
		 int64_t npf)						\
{									\
	enum { W = 16, MR = rows, as = 1, ak = MR };			\
	__m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00; \
	__m512 c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00;	\
	__m512 c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00;	\
	__m512 c70 = c00, c71 = c00;					\
									\
	KLOOP(_mm512, ROWS, GROUP);					\
	(void)c40; (void)c41; (void)c50; (void)c51;			\
	(void)c60; (void)c61; (void)c70; (void)c71;			\
}

#define KERNEL_AVX2(name, ROWS, rows, GROUP, in_place)			\
__attribute__((target("avx2,fma")))					\
static void name(int64_t k, const float *a, int64_t lda, const float *b, \
		 float *c, int64_t ldc, bool acc, const char *const *pf,	\
		 int64_t npf)						\
{									\
	enum { W = 8, MR = rows };					\
	const int64_t as = in_place ? lda : 1, ak = in_place ? 1 : MR;	\
	__m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00; \
	__m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00;		\
	__m256 c40 = c00, c41 = c00, c50 = c00, c51 = c00;		\
									\
	KLOOP(_mm256, ROWS, GROUP);					\
	(void)c40; (void)c41; (void)c50; (void)c51;			\
}

KERNEL_AVX512(kernel_avx512, ROWS8, 8, KGROUP)
KERNEL_AVX512(kernel_avx512_4, ROWS4, 4, KGROUP)
KERNEL_AVX2(kernel_avx2, ROWS6, 6, AVX2_GROUP6, false)
KERNEL_AVX2(kernel_avx2_rows, ROWS6, 6, AVX2_GROUP6_ROWS, true)
KERNEL_AVX2(kernel_avx2_4, ROWS4, 4, KGROUP, false)

typedef void small_kernel_fn(int64_t k, const float *a, int64_t lda,
			     const float *b, float *c, int64_t ldc, bool acc,
			     const char *const *pf, int64_t npf);

/*
 * A tile's kernel is one of two heights, the ISA's and 4 rows; whole tiles
 * of f32 rows run in place where the ISA has a kernel for that (AVX2's
 * asm addresses six rows from two registers as cheaply as a panel, and
 * packing them cost a pass over A).
 */
struct small_isa {
	small_kernel_fn *kern, *kern4, *kern_rows;
	int mr, nr;
};

static const struct small_isa isa_avx512 = {
	kernel_avx512, kernel_avx512_4, NULL, 8, 32
};
static const struct small_isa isa_avx2 = {
	kernel_avx2, kernel_avx2_4, kernel_avx2_rows, 6, 16
};

static int64_t min64(int64_t x, int64_t y)
{
	return x < y ? x : y;
}

/*
 * Rows 0..m as @whole tiles of the ISA's height, then @fours of 4 rows:
 * where one whole tile and the remainder make 8 rows (6 + 2), they run as
 * two 4-row tiles, so a 128-row block has no padding rows; any other
 * remainder pads one tile.
 */
struct row_plan {
	int64_t m, whole, fours;
};

/* A row tile: @rows high (the kernel's), of which @valid are rows of C. */
struct row_tile {
	int64_t r0;
	int rows, valid;
};

static struct row_plan row_plan(const struct small_isa *isa, int64_t m)
{
	struct row_plan p = { m, m / isa->mr, 0 };
	int64_t rest = m % isa->mr;

	if (rest && isa->mr + rest == 8 && p.whole) {
		p.whole--;
		p.fours = 2;
	} else if (rest) {
		p.fours = rest <= 4;
		p.whole += !p.fours;
	}
	return p;
}

static int64_t row_tile_count(const struct row_plan *p)
{
	return p->whole + p->fours;
}

static struct row_tile row_tile(const struct small_isa *isa,
				const struct row_plan *p, int64_t i)
{
	int64_t r0 = i < p->whole ? i * isa->mr :
				    p->whole * isa->mr + (i - p->whole) * 4;
	int rows = i < p->whole ? isa->mr : 4;

	return (struct row_tile){ r0, rows, (int)min64(rows, p->m - r0) };
}

/* A row tile's A: a packed panel, or @lda apart in place (@lda > 0). */
struct tile_a {
	const float *p;
	int64_t lda;
};

/* A partial tile goes through a whole one on the stack. */
static void tile(const struct small_isa *isa, const struct row_tile *rt,
		 int64_t k, struct tile_a a, const float *b, float *c,
		 int64_t ldc, int64_t nr, bool acc, const char *const *pf,
		 int64_t npf)
{
	small_kernel_fn *kern = a.lda ? isa->kern_rows :
			       rt->rows == 4 ? isa->kern4 : isa->kern;
	float t[MR_MAX * NR_MAX];

	if (rt->valid == rt->rows && nr == isa->nr) {
		kern(k, a.p, a.lda, b, c, ldc, acc, pf, npf);
		return;
	}
	kern(k, a.p, a.lda, b, t, isa->nr, false, pf, npf);
	for (int64_t r = 0; r < rt->valid; r++)
		for (int64_t j = 0; j < nr; j++)
			c[r * ldc + j] = acc ? c[r * ldc + j] + t[r * isa->nr + j] :
					       t[r * isa->nr + j];
}

static struct tile_a tile_a(const struct small_isa *isa,
			    const struct small_src *sa,
			    const struct row_tile *rt, const float *pa,
			    int64_t k)
{
	if (isa->kern_rows && sa->f32 && sa->cs == 1 && rt->rows == isa->mr &&
	    rt->valid == rt->rows)
		return (struct tile_a){ (const float *)sa->p + rt->r0 * sa->rs,
					sa->rs };
	return (struct tile_a){ pa + rt->r0 * k, 0 };
}

/* Bytes of @s's storage an op(X) of @rows x @cols reads, from its start. */
static uint64_t src_span(const struct small_src *s, int64_t rows, int64_t cols)
{
	return (uint64_t)((rows - 1) * s->rs + (cols - 1) * s->cs + 1) *
	       (s->f32 ? 4 : 2);
}

static struct tpu_panel_key panel_key(const struct small_src *s, int64_t rows,
				      int64_t cols, int tile, bool lhs)
{
	return (struct tpu_panel_key){ s->p, rows, cols, s->rs, s->cs,
				       (uint32_t)tile << 2 | lhs << 1 | s->f32 };
}

/*
 * Packed B: kept for the job if the block may be (tpu_panels.h), packed
 * there the first time; else packed into scratch at every call.
 */
static float *packed_b(const struct small_isa *isa, const struct small_src *sb,
		       int64_t k, int64_t n, size_t bytes)
{
	struct tpu_panel_key key = panel_key(sb, k, n, isa->nr, false);
	struct tpu_panel *fill;
	float *pb = tpu_panels_get(TPU_PANELS_SHARED, &key, src_span(sb, k, n),
				   bytes, &fill);

	if (pb && !fill)
		return pb;
	if (!pb)
		pb = tpu_gemm_scratch(TPU_GEMM_SLOT_B, bytes);
	if (pb)
		pack_b(pb, sb, k, n, isa->nr);
	if (fill)
		tpu_panels_filled(fill);
	return pb;
}

/*
 * Packed A: every row tile's panel when kept for the job (reading a kept
 * panel beats reading rows in place), else what is not read in place.
 * *@kept: all tiles are packed.
 */
static float *packed_a(const struct small_isa *isa, const struct small_src *sa,
		       const struct row_plan *plan, int64_t k, size_t bytes,
		       bool *kept)
{
	struct tpu_panel_key key = panel_key(sa, plan->m, k, isa->mr, true);
	struct tpu_panel *fill;
	float *pa = tpu_panels_get(TPU_PANELS_CORE, &key,
				   src_span(sa, plan->m, k), bytes, &fill);

	*kept = pa;
	if (pa && !fill)
		return pa;
	if (!pa)
		pa = tpu_gemm_scratch(TPU_GEMM_SLOT_A, bytes);
	for (int64_t i = 0; pa && i < row_tile_count(plan); i++) {
		struct row_tile rt = row_tile(isa, plan, i);

		if (*kept || !tile_a(isa, sa, &rt, pa, k).lda)
			pack_a_panel(pa + rt.r0 * k, sa, rt.r0, rt.rows,
				     rt.valid, k);
	}
	if (fill)
		tpu_panels_filled(fill);
	return pa;
}

static bool gemm_small(const struct small_src *sa, const struct small_src *sb,
		       int64_t m, int64_t n, int64_t k, float *c, int64_t ldc,
		       bool accumulate)
{
	const struct small_isa *isa;
	int64_t nr, ps, cols, nrt;
	struct row_plan plan;
	struct row_tile last;
	float *pa, *pb;
	bool a_kept;

	if (tpu_gemm_isa < TPU_GEMM_AVX2 || n > SMALL_MAX_DIM ||
	    k > SMALL_MAX_DIM || n * k > SMALL_KN || m <= 0 || n <= 0 || k <= 0)
		return false;
	isa = tpu_gemm_isa >= TPU_GEMM_AVX512 ? &isa_avx512 : &isa_avx2;
	nr = isa->nr;
	ps = panel_stride(k, nr);
	plan = row_plan(isa, m);
	nrt = row_tile_count(&plan);
	last = row_tile(isa, &plan, nrt - 1);
	pb = packed_b(isa, sb, k, n, ((n + nr - 1) / nr) * ps * sizeof(float));
	/* 8 floats of slack for pack_a_panel's overlapping stores */
	pa = pb ? packed_a(isa, sa, &plan, k,
			   ((last.r0 + last.rows) * k + 8) * sizeof(float),
			   &a_kept) : NULL;
	if (!pb || !pa)
		return false;
	/*
	 * An A panel stays in L1 while the B panels stream from L2; a share
	 * of the next grid step's blocks is asked for at each tile, taken a
	 * row of tiles at once (a take per tile was 5 % of a 128^3 step).
	 */
	cols = (n + nr - 1) / nr;
	for (int64_t i = 0; i < nrt; i++) {
		struct row_tile rt = row_tile(isa, &plan, i);
		struct tile_a a = a_kept ? (struct tile_a){ pa + rt.r0 * k, 0 } :
				  tile_a(isa, sa, &rt, pa, k);
		const char *pf[PF_ROW_MAX];
		int64_t npf = tpu_prefetch_take(pf, (unsigned int)min64(
						PF_ROW_MAX, cols * PF_MAX), nrt - i);

		for (int64_t j = 0, at = 0; j < n; j += nr) {
			int64_t left = cols - j / nr;
			int64_t share = (npf - at + left - 1) / left;

			tile(isa, &rt, k, a, pb + j / nr * ps,
			     c + rt.r0 * ldc + j, ldc, min64(nr, n - j),
			     accumulate, pf + at, share);
			at += share;
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
