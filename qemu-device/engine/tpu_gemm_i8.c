// SPDX-License-Identifier: MIT
/*
 * Exact int8/uint8 GEMM into int32 (wrapping, like the MXU's accumulators).
 *
 * No packaged BLAS does exact 8-bit GEMM with int32 wrap-around, so this is
 * our own, laid out as GotoBLAS does: A is packed MA x KC at a time, B a
 * KC x NC block at a time, and a register-blocked micro-kernel computes
 * MR x NR tiles of C, MC rows of packed A (in L2) against each B block. Packing sign- or zero-extends to int16, so both
 * signednesses share one kernel: every int16 product of two 8-bit values
 * and the sum of two such products fit in int32 exactly (|x| <= 2 * 255^2),
 * which is what vpmaddwd computes; the int32 adds then wrap as required.
 * vpmaddubsw would do twice the work per instruction but saturates in
 * int16, so it is not exact and is not used.
 *
 * Packed layouts (kcp = KC rounded up to even, the k pairs vpmaddwd eats):
 *  A: per MR-row micro-panel, for each k pair, MR x {a[i][p], a[i][p+1]}
 *     (the kernel broadcasts a pair; one stream, not MR rows 1 KiB apart).
 *  B: per NR-column panel, for each k pair, NR x {b[p][j], b[p+1][j]}.
 */
#include "tpu_gemm.h"
#include "tpu_gemm_internal.h"
#include "tpu_panels.h"

#include <immintrin.h>
#include <string.h>

#define MR 6
#define NR 16
#define KC 512		/* k per block: an A row of kcp int16 is 1 KiB */
#define MC 96		/* A block MC x KC int16: 96 KiB, lives in L2 */
#define NC 256		/* B block KC x NC int16: 256 KiB, beside it in L2 */
#define MA 768		/* rows of A packed at once: 768 KiB, in L3 */
#define B_AHEAD 16	/* rows of B asked of the caches ahead of packing */

/* One 8-bit operand as op(X): element (r, c) with X stored transposed or not. */
struct i8_src {
	const void *p;
	int64_t ld;
	bool is_unsigned;
	bool trans;
};

/* The first @rows (2, 4 or MR) rows of a tile; the others are not written. */
typedef void i8_kernel_fn(int64_t kq, const int16_t *a, const int16_t *b,
			  int32_t *c, int64_t ldc, bool acc, int rows);

static int16_t src_at(const struct i8_src *s, int64_t r, int64_t c)
{
	int64_t idx = s->trans ? c * s->ld + r : r * s->ld + c;

	if (s->is_unsigned)
		return ((const uint8_t *)s->p)[idx];
	return ((const int8_t *)s->p)[idx];
}

static int64_t round_up(int64_t v, int64_t to)
{
	return (v + to - 1) / to * to;
}

static int64_t min64(int64_t x, int64_t y)
{
	return x < y ? x : y;
}

/* --- packing --- */

/* Element (r, p) of an A micro-panel: k pair p / 2, row r, half p & 1. */
static int64_t a_at(int64_t r, int64_t p)
{
	return (p / 2) * 2 * MR + r * 2 + (p & 1);
}

__attribute__((target("avx2")))
static __m256i widen16(const void *src, bool is_unsigned)
{
	__m128i v = _mm_loadu_si128(src);

	return is_unsigned ? _mm256_cvtepu8_epi16(v) : _mm256_cvtepi8_epi16(v);
}

/* The two 64-bit halves of @v to @lo and @hi. */
__attribute__((target("avx2")))
static void store_halves(int16_t *lo, int16_t *hi, __m128i v)
{
	_mm_storel_epi64((__m128i *)lo, v);
	_mm_storeh_pd((double *)hi, _mm_castsi128_pd(v));
}

/*
 * One micro-panel from row-major A: rows r0.. (mr valid, the others zero),
 * k from p0, the first kc16 (a multiple of 16) of them; the caller packs
 * the rest. 16 k of the MR rows widen to 8 k pairs each and are transposed
 * 64 bits (a pair of rows' pair) at a time.
 */
__attribute__((target("avx2")))
static void pack_a_panel_avx2(int16_t *dst, const struct i8_src *a, int64_t r0,
			      int64_t mr, int64_t p0, int64_t kc16, bool ahead)
{
	const int8_t *row[MR];
	_Static_assert(MR == 6, "the transpose below pairs three row pairs");

	for (int r = 0; r < MR; r++)
		row[r] = (const int8_t *)a->p + (r0 + min64(r, mr - 1)) * a->ld + p0;
	for (int64_t p = 0; p < kc16; p += 16, dst += 16 * MR) {
		/*
		 * Rows an array's row apart are six streams no hardware
		 * prefetcher follows: ask for the next panel's, a panel ahead.
		 */
		if (ahead && p % 64 == 0)
			for (int r = 0; r < MR; r++)
				_mm_prefetch((const char *)(row[r] + MR * a->ld + p),
					     _MM_HINT_T0);
		for (int r = 0; r < MR; r += 2) {
			__m256i x = widen16(row[r] + p, a->is_unsigned);
			__m256i y = widen16(row[r + 1] + p, a->is_unsigned);
			__m256i lo, hi;
			int16_t *d = dst + 2 * r;

			/* rows past mr read row mr - 1: zero them */
			if (r >= mr)
				x = _mm256_setzero_si256();
			if (r + 1 >= mr)
				y = _mm256_setzero_si256();
			/* per 128-bit lane, pairs {0, 1 | 4, 5} and {2, 3 | 6, 7} */
			lo = _mm256_unpacklo_epi32(x, y);
			hi = _mm256_unpackhi_epi32(x, y);
			store_halves(d + 0 * 2 * MR, d + 1 * 2 * MR,
				     _mm256_castsi256_si128(lo));
			store_halves(d + 2 * 2 * MR, d + 3 * 2 * MR,
				     _mm256_castsi256_si128(hi));
			store_halves(d + 4 * 2 * MR, d + 5 * 2 * MR,
				     _mm256_extracti128_si256(lo, 1));
			store_halves(d + 6 * 2 * MR, d + 7 * 2 * MR,
				     _mm256_extracti128_si256(hi, 1));
		}
	}
}

/* Rows i0.. of op(A), k from p0, into MR-row micro-panels padded with zeros. */
static void pack_a(int16_t *dst, const struct i8_src *a, int64_t i0, int64_t mc,
		   int64_t p0, int64_t kc, int64_t kcp, bool simd)
{
	for (int64_t i = 0; i < mc; i += MR, dst += MR * kcp) {
		int64_t mr = min64(MR, mc - i), p = 0;

		if (simd && !a->trans) {
			p = kc & ~(int64_t)15;
			pack_a_panel_avx2(dst, a, i0 + i, mr, p0, p,
					  i + 2 * MR <= mc);
		}
		/* the rest (k outer: a stored transposed is read along its rows) */
		for (int64_t q = p; q < kc; q++)
			for (int64_t r = 0; r < mr; r++)
				dst[a_at(r, q)] = src_at(a, i0 + i + r, p0 + q);
		/* zeros: rows past mc, the k pair's half past kc */
		for (int64_t q = p; (mr < MR || kc < kcp) && q < kcp; q++)
			for (int64_t r = q < kc ? mr : 0; r < MR; r++)
				dst[a_at(r, q)] = 0;
	}
}

/*
 * A full NR-column panel of row-major B, columns j.., k from p0: each pair
 * of rows (k = p, p + 1) interleaved, kc2 (even) rows of them.
 */
__attribute__((target("avx2")))
static void pack_b_panel_avx2(int16_t *dst, const struct i8_src *b, int64_t p0,
			      int64_t kc2, int64_t j)
{
	const int8_t *r0 = (const int8_t *)b->p + p0 * b->ld + j;

	for (int64_t p = 0; p < kc2; p += 2, r0 += 2 * b->ld, dst += 2 * NR) {
		__m256i w0 = widen16(r0, b->is_unsigned);
		__m256i w1 = widen16(r0 + b->ld, b->is_unsigned);
		/* unpack works within 128-bit lanes: columns 0-3|8-11 and 4-7|12-15. */
		__m256i lo = _mm256_unpacklo_epi16(w0, w1);
		__m256i hi = _mm256_unpackhi_epi16(w0, w1);

		_mm256_storeu_si256((__m256i *)dst,
				    _mm256_permute2x128_si256(lo, hi, 0x20));
		_mm256_storeu_si256((__m256i *)dst + 1,
				    _mm256_permute2x128_si256(lo, hi, 0x31));
	}
}

/*
 * Four full panels at once, columns j.. j + 4 * NR - 1: a whole 64-byte
 * line of each row. B's rows are an array's row apart, all in one L1 set,
 * so a line read for one panel was gone when the next panel came back for
 * it (three times the time); and the rows ahead are asked for, as no
 * hardware prefetcher follows rows 4 KiB apart.
 */
__attribute__((target("avx2")))
static void pack_b_4panels_avx2(int16_t *dst, const struct i8_src *b,
				int64_t p0, int64_t kc2, int64_t kcp, int64_t j)
{
	const int8_t *r0 = (const int8_t *)b->p + p0 * b->ld + j;

	for (int64_t p = 0; p < kc2; p += 2, r0 += 2 * b->ld, dst += 2 * NR) {
		if (p + B_AHEAD < kc2) {
			_mm_prefetch((const char *)(r0 + B_AHEAD * b->ld), _MM_HINT_T0);
			_mm_prefetch((const char *)(r0 + (B_AHEAD + 1) * b->ld),
				     _MM_HINT_T0);
		}
		for (int q = 0; q < 4; q++) {
			__m256i w0 = widen16(r0 + q * NR, b->is_unsigned);
			__m256i w1 = widen16(r0 + b->ld + q * NR, b->is_unsigned);
			__m256i lo = _mm256_unpacklo_epi16(w0, w1);
			__m256i hi = _mm256_unpackhi_epi16(w0, w1);
			__m256i *d = (__m256i *)(dst + q * NR * kcp);

			_mm256_storeu_si256(d, _mm256_permute2x128_si256(lo, hi, 0x20));
			_mm256_storeu_si256(d + 1, _mm256_permute2x128_si256(lo, hi, 0x31));
		}
	}
}

/* k from p on of an NR-column panel of op(B), zeros past kc and nr. */
static void pack_b_panel_rest(int16_t *dst, const struct i8_src *b, int64_t p0,
			      int64_t kc, int64_t kcp, int64_t j, int64_t nr,
			      int64_t p)
{
	for (int64_t jj = 0; jj < NR; jj++)
		for (int64_t q = p; q < kcp; q++) {
			int16_t v = q < kc && jj < nr ? src_at(b, p0 + q, j + jj) : 0;

			dst[(q / 2) * 2 * NR + jj * 2 + (q & 1)] = v;
		}
}

/* One NR-column panel of op(B): columns j.. (nr valid), k from p0. */
static void pack_b_panel(int16_t *dst, const struct i8_src *b, int64_t p0,
			 int64_t kc, int64_t kcp, int64_t j, int64_t nr, bool simd)
{
	int64_t p = 0;

	if (simd && !b->trans && nr == NR) {
		p = kc & ~(int64_t)1;
		pack_b_panel_avx2(dst, b, p0, p, j);
	}
	pack_b_panel_rest(dst, b, p0, kc, kcp, j, nr, p);
}

static void pack_b(int16_t *dst, const struct i8_src *b, int64_t p0, int64_t kc,
		   int64_t kcp, int64_t j0, int64_t nc, bool simd)
{
	int64_t kc2 = kc & ~(int64_t)1, j = 0;

	for (; simd && !b->trans && j + 4 * NR <= nc; j += 4 * NR) {
		pack_b_4panels_avx2(dst + j * kcp, b, p0, kc2, kcp, j0 + j);
		for (int q = 0; kc2 < kcp && q < 4; q++)
			pack_b_panel_rest(dst + (j + q * NR) * kcp, b, p0, kc,
					  kcp, j0 + j + q * NR, NR, kc2);
	}
	for (; j < nc; j += NR)
		pack_b_panel(dst + j * kcp, b, p0, kc, kcp, j0 + j,
			     min64(NR, nc - j), simd);
}

/* --- micro-kernels: C[MR x NR] (+)= A panel @ B panel --- */

static void kernel_portable(int64_t kq, const int16_t *a, const int16_t *b,
			    int32_t *c, int64_t ldc, bool acc, int rows)
{
	uint32_t t[MR][NR] = { { 0 } };

	for (int64_t q = 0; q < kq; q++, b += 2 * NR)
		for (int r = 0; r < MR; r++) {
			int32_t a0 = a[a_at(r, 2 * q)], a1 = a[a_at(r, 2 * q + 1)];

			for (int j = 0; j < NR; j++)
				t[r][j] += (uint32_t)(a0 * b[2 * j] + a1 * b[2 * j + 1]);
		}
	for (int r = 0; r < rows; r++)
		for (int j = 0; j < NR; j++) {
			uint32_t old = acc ? (uint32_t)c[r * ldc + j] : 0;

			c[r * ldc + j] = (int32_t)(old + t[r][j]);
		}
}

static int32_t load_pair(const int16_t *p)
{
	int32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

#define KERNEL_ROW(r, n)						\
	do {								\
		if ((r) >= (n))						\
			break;						\
		__m256i x = _mm256_set1_epi32(load_pair(a + 2 * (r))); \
		c##r##0 = MADD_ACC(c##r##0, x, b0);			\
		c##r##1 = MADD_ACC(c##r##1, x, b1);			\
	} while (0)

#define KERNEL_STORE(r, n)						\
	do {								\
		if ((r) >= (n))						\
			break;						\
		__m256i *d = (__m256i *)(c + (r) * ldc);		\
		if (acc) {						\
			c##r##0 = _mm256_add_epi32(c##r##0, _mm256_loadu_si256(d)); \
			c##r##1 = _mm256_add_epi32(c##r##1, _mm256_loadu_si256(d + 1)); \
		}							\
		_mm256_storeu_si256(d, c##r##0);			\
		_mm256_storeu_si256(d + 1, c##r##1);			\
	} while (0)

/*
 * The same body for each ISA, only the multiply-accumulate differs. @n
 * rows, a constant: a 2- or 4-row tile (the last of 512 rows has 2) has
 * only its own accumulators and instructions.
 */
#define KERNEL_BODY(n)							\
	__m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00; \
									\
	/* C's rows are ldc apart, past any hardware prefetcher's reach:	\
	 * fetch them now, a whole k loop ahead of the read at the end. */ \
	for (int r = 0; r < (n); r++) {					\
		_mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);	\
		_mm_prefetch((const char *)(c + r * ldc + NR - 1), _MM_HINT_T0); \
	}								\
	__m256i c20 = c00, c21 = c00, c30 = c00, c31 = c00;		\
	__m256i c40 = c00, c41 = c00, c50 = c00, c51 = c00;		\
									\
	/* unrolled: the loop's own instructions compete for dispatch */ \
	_Pragma("GCC unroll 4")					\
	for (int64_t q = 0; q < kq; q++, a += 2 * MR, b += 2 * NR) {	\
		__m256i b0 = _mm256_loadu_si256((const __m256i *)b);	\
		__m256i b1 = _mm256_loadu_si256((const __m256i *)b + 1); \
									\
		KERNEL_ROW(0, n); KERNEL_ROW(1, n); KERNEL_ROW(2, n);	\
		KERNEL_ROW(3, n); KERNEL_ROW(4, n); KERNEL_ROW(5, n);	\
	}								\
	KERNEL_STORE(0, n); KERNEL_STORE(1, n); KERNEL_STORE(2, n);	\
	KERNEL_STORE(3, n); KERNEL_STORE(4, n); KERNEL_STORE(5, n)

/* A kernel of @rows (MR, 4 or 2) rows, with the MADD_ACC in force. */
#define KERNEL_FOR_ROWS(rows)						\
	do {								\
		if ((rows) == MR) {					\
			KERNEL_BODY(MR);				\
		} else if ((rows) == 4) {				\
			KERNEL_BODY(4);					\
		} else {						\
			KERNEL_BODY(2);					\
		}							\
	} while (0)

/* vpmaddwd then vpaddd: 16 exact products per instruction pair. */
#define MADD_ACC(s, x, y) _mm256_add_epi32((s), _mm256_madd_epi16((x), (y)))
__attribute__((target("avx2")))
static void kernel_avx2(int64_t kq, const int16_t *a, const int16_t *b,
			int32_t *c, int64_t ldc, bool acc, int rows)
{
	KERNEL_FOR_ROWS(rows);
}
#undef MADD_ACC

/* AVX-VNNI's vpdpwssd fuses the two (the non-saturating form, so exact). */
#define MADD_ACC(s, x, y) _mm256_dpwssd_avx_epi32((s), (x), (y))
__attribute__((target("avx2,avxvnni")))
static void kernel_avxvnni(int64_t kq, const int16_t *a, const int16_t *b,
			   int32_t *c, int64_t ldc, bool acc, int rows)
{
	KERNEL_FOR_ROWS(rows);
}
#undef MADD_ACC

/*
 * A tile of 2 or 4 rows runs a kernel of that many (the packed panel is
 * MR rows still); any other partial tile goes through the next larger one
 * on the stack.
 */
static void tile(i8_kernel_fn *kern, int64_t kq, const int16_t *a,
		 const int16_t *b, int32_t *c, int64_t ldc, int64_t mr,
		 int64_t nr, bool acc)
{
	int rows = mr > 4 ? MR : mr > 2 ? 4 : 2;
	int32_t t[MR * NR];

	if (mr == rows && nr == NR) {
		kern(kq, a, b, c, ldc, acc, rows);
		return;
	}
	kern(kq, a, b, t, NR, false, rows);
	for (int64_t r = 0; r < mr; r++)
		for (int64_t j = 0; j < nr; j++) {
			uint32_t old = acc ? (uint32_t)c[r * ldc + j] : 0;

			c[r * ldc + j] = (int32_t)(old + (uint32_t)t[r * NR + j]);
		}
}

/* Packed A (mc x kcp) times packed B (kcp x nc) into C. */
static void macro_kernel(i8_kernel_fn *kern, const int16_t *pa,
			 const int16_t *pb, int64_t mc, int64_t nc, int64_t kcp,
			 int32_t *c, int64_t ldc, bool acc)
{
	/* A B panel stays in L1 while the A panels stream from L2. */
	for (int64_t j = 0; j < nc; j += NR)
		for (int64_t i = 0; i < mc; i += MR)
			tile(kern, kcp / 2, pa + i * kcp, pb + j * kcp,
			     c + i * ldc + j, ldc, min64(MR, mc - i),
			     min64(NR, nc - j), acc);
}

/* Out of scratch memory: exact but slow. */
static void i8_naive(const struct i8_src *a, const struct i8_src *b, int64_t m,
		     int64_t n, int64_t k, int32_t *c, int64_t ldc, bool acc)
{
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++) {
			uint32_t s = acc ? (uint32_t)c[i * ldc + j] : 0;

			for (int64_t p = 0; p < k; p++)
				s += (uint32_t)(src_at(a, i, p) * src_at(b, p, j));
			c[i * ldc + j] = (int32_t)s;
		}
}

/* vpdpbusd kernels (their own packing: tpu_gemm_i8_vnni.c) have no fn. */
enum vnni { NO_VNNI, VNNI_YMM, VNNI_ZMM };

static const struct {
	const char *name;
	i8_kernel_fn *fn;
	enum vnni vnni;
} i8_kernels[] = {
	{ "avx512vnni", NULL, VNNI_ZMM },
	{ "avxvnni", NULL, VNNI_YMM },
	{ "avxvnni-i16", kernel_avxvnni, NO_VNNI },
	{ "avx2", kernel_avx2, NO_VNNI },
	{ "portable", kernel_portable, NO_VNNI },
};

/* Index into i8_kernels of the one chosen by tpu_gemm_i8_use(), or -1. */
static int chosen_kernel = -1;

static bool kernel_runs_here(int i)
{
	if (i8_kernels[i].fn == kernel_portable)
		return true;
	if (!tpu_gemm_has_avx2)
		return false;
	if (i8_kernels[i].fn == kernel_avx2)
		return true;
	if (!tpu_gemm_vnni_ok)
		return false;
	if (i8_kernels[i].vnni == VNNI_ZMM)
		return tpu_gemm_isa >= TPU_GEMM_AVX512 &&
		       __builtin_cpu_supports("avx512vnni");
	return __builtin_cpu_supports("avxvnni");
}

static int best_kernel(void)
{
	int i = 0;

	while (!kernel_runs_here(i))
		i++;
	return i;
}

static int picked(void)
{
	/* a later tpu_gemm_use_isa() cap may rule the choice out */
	if (chosen_kernel >= 0 && kernel_runs_here(chosen_kernel))
		return chosen_kernel;
	return best_kernel();
}

const char *tpu_gemm_i8_kernel(void)
{
	return i8_kernels[picked()].name;
}

int tpu_gemm_i8_use(const char *name)
{
	if (!name) {
		chosen_kernel = -1;
		return 0;
	}
	for (int i = 0; i < (int)(sizeof(i8_kernels) / sizeof(i8_kernels[0])); i++)
		if (!strcmp(name, i8_kernels[i].name)) {
			if (!kernel_runs_here(i))
				return -1;
			chosen_kernel = i;
			return 0;
		}
	return -1;
}

/* int16 elements of one packed B block: kcp x nc, in NR-column panels. */
static int64_t b_block_elems(int64_t kcp, int64_t nc)
{
	return round_up(nc, NR) * kcp;
}

/* The packer's own tag in a panel key: not one of tpu_gemm_small.c's. */
#define I8_PANEL_LAYOUT	(1u << 16)

/*
 * All of op(B), packed block after block in the order i8_blocked() reads
 * them, kept for the job when B may be (tpu_panels.h): a grid's y block
 * comes back at every i step, and widening it to int16 again each time
 * is a few percent of the call. Packed here the first time. NULL: B is
 * not kept, pack it per block.
 */
static const int16_t *kept_b(const struct i8_src *b, int64_t k, int64_t n,
			     bool simd)
{
	int64_t rs = b->trans ? 1 : b->ld, cs = b->trans ? b->ld : 1;
	struct tpu_panel_key key = {
		b->p, k, n, rs, cs,
		I8_PANEL_LAYOUT | (uint32_t)b->is_unsigned << 1 | simd
	};
	struct tpu_panel *fill;
	uint64_t bytes = 0;
	int16_t *kept, *dst;

	for (int64_t pc = 0; pc < k; pc += KC)
		for (int64_t jc = 0; jc < n; jc += NC)
			bytes += b_block_elems(round_up(min64(KC, k - pc), 2),
					       min64(NC, n - jc)) * sizeof(int16_t);
	kept = (int16_t *)tpu_panels_get(TPU_PANELS_SHARED, &key,
					 (uint64_t)((k - 1) * rs + (n - 1) * cs + 1),
					 bytes, &fill);
	if (!kept || !fill)
		return kept;
	dst = kept;
	for (int64_t pc = 0; pc < k; pc += KC) {
		int64_t kc = min64(KC, k - pc), kcp = round_up(kc, 2);

		for (int64_t jc = 0; jc < n; jc += NC) {
			int64_t nc = min64(NC, n - jc);

			pack_b(dst, b, pc, kc, kcp, jc, nc, simd);
			dst += b_block_elems(kcp, nc);
		}
	}
	tpu_panels_filled(fill);
	return kept;
}

static void i8_blocked(i8_kernel_fn *kern, const struct i8_src *a,
		       const struct i8_src *b, int64_t m, int64_t n, int64_t k,
		       int32_t *c, int64_t ldc, bool accumulate)
{
	bool simd = kern != kernel_portable;
	int64_t kcp_max = round_up(min64(k, KC), 2);
	int16_t *pa = tpu_gemm_scratch(TPU_GEMM_SLOT_A, round_up(min64(m, MA), MR) *
				       kcp_max * sizeof(int16_t));
	int16_t *pb = tpu_gemm_scratch(TPU_GEMM_SLOT_B, round_up(min64(n, NC), NR) *
				       kcp_max * sizeof(int16_t));
	const int16_t *kept;

	if (!pa || !pb) {
		i8_naive(a, b, m, n, k, c, ldc, accumulate);
		return;
	}
	kept = kept_b(b, k, n, simd);
	/*
	 * All MA rows of A are packed once per k block, so B's blocks can be
	 * narrow enough to stay in L2 from their packing to their last use.
	 */
	for (int64_t ia = 0; ia < m; ia += MA) {
		int64_t ma = min64(MA, m - ia);
		const int16_t *next = kept;

		for (int64_t pc = 0; pc < k; pc += KC) {
			int64_t kc = min64(KC, k - pc), kcp = round_up(kc, 2);

			pack_a(pa, a, ia, ma, pc, kc, kcp, simd);
			for (int64_t jc = 0; jc < n; jc += NC) {
				int64_t nc = min64(NC, n - jc);
				const int16_t *bb = next;

				if (kept) {
					next += b_block_elems(kcp, nc);
				} else {
					pack_b(pb, b, pc, kc, kcp, jc, nc, simd);
					bb = pb;
				}
				for (int64_t ic = 0; ic < ma; ic += MC)
					macro_kernel(kern, pa + ic * kcp, bb,
						     min64(MC, ma - ic), nc, kcp,
						     c + (ia + ic) * ldc + jc, ldc,
						     accumulate || pc > 0);
			}
		}
	}
}

void tpu_gemm_i8(bool a_unsigned, bool b_unsigned, bool trans_a, bool trans_b,
		 int64_t m, int64_t n, int64_t k,
		 const void *a, int64_t lda, const void *b, int64_t ldb,
		 int32_t *c, int64_t ldc, bool accumulate)
{
	struct i8_src sa = { a, lda, a_unsigned, trans_a };
	struct i8_src sb = { b, ldb, b_unsigned, trans_b };
	int pick = picked();
	i8_kernel_fn *kern = i8_kernels[pick].fn;

	if (m <= 0 || n <= 0)
		return;
	if (k <= 0) {
		for (int64_t i = 0; i < m && !accumulate; i++)
			memset(c + i * ldc, 0, n * sizeof(*c));
		return;
	}
	if (!kern) {
		if (tpu_gemm_i8_vnni(i8_kernels[pick].vnni == VNNI_ZMM,
				     a_unsigned, b_unsigned, trans_a, trans_b,
				     m, n, k, a, lda, b, ldb, c, ldc, accumulate))
			return;
		/* out of scratch: an int16 kernel (AVX512-VNNI hosts may lack AVX-VNNI) */
		kern = i8_kernels[pick].vnni == VNNI_ZMM ? kernel_avx2 :
							   kernel_avxvnni;
	}
	i8_blocked(kern, &sa, &sb, m, n, k, c, ldc, accumulate);
}
