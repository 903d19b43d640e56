// SPDX-License-Identifier: MIT
/*
 * f32 and bf16 GEMM through OpenBLAS (on small blocks through our own
 * kernels, tpu_gemm_small.c), per-thread scratch, and set-up.
 *
 * OpenBLAS (Debian's libopenblas, kernels picked at run time for the host)
 * is the fastest sgemm packaged for this machine. The engine parallelises
 * over blocks itself, one worker per emulated core, so OpenBLAS must stay
 * on the caller's thread: its own pool would oversubscribe the host.
 */
#include "tpu_gemm.h"
#include "tpu_gemm_internal.h"
#include "tpu_isa_env.h"

#include <cblas.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

bool tpu_gemm_has_avx2;
bool tpu_gemm_vnni_ok;
enum tpu_gemm_isa tpu_gemm_isa;

static const char *const isa_names[TPU_GEMM_ISA_COUNT] = {
	[TPU_GEMM_PORTABLE] = "portable",
	[TPU_GEMM_AVX2] = "avx2",
	[TPU_GEMM_AVX512] = "avx512",
};

/* The host's best, capped by TPU_GEMM_ISA (to try an AVX2-only host's paths). */
static enum tpu_gemm_isa host_isa, probed_isa;

struct gemm_scratch {
	void *buf[TPU_GEMM_SLOTS];
	size_t size[TPU_GEMM_SLOTS];
};

static pthread_once_t gemm_once = PTHREAD_ONCE_INIT;
static pthread_key_t scratch_key;

static void scratch_free(void *p)
{
	struct gemm_scratch *s = p;

	for (int i = 0; i < TPU_GEMM_SLOTS; i++)
		free(s->buf[i]);
	free(s);
}

static void gemm_setup(void)
{
	openblas_set_num_threads(1);
	pthread_key_create(&scratch_key, scratch_free);

	__builtin_cpu_init();
	host_isa = TPU_GEMM_PORTABLE;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		host_isa = TPU_GEMM_AVX2;
	if (host_isa && __builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw"))
		host_isa = TPU_GEMM_AVX512;
	probed_isa = host_isa;
	host_isa = tpu_isa_env_cap("TPU_GEMM_ISA", isa_names, TPU_GEMM_ISA_COUNT,
				   host_isa);
	tpu_gemm_use_isa(NULL);
}

void tpu_gemm_init(void)
{
	pthread_once(&gemm_once, gemm_setup);
}

int tpu_gemm_use_isa(const char *name)
{
	enum tpu_gemm_isa isa = host_isa;

	for (int i = 0; name && i < TPU_GEMM_ISA_COUNT; i++)
		if (!strcmp(name, isa_names[i]))
			isa = i;
	if (name && (isa > host_isa || strcmp(name, isa_names[isa])))
		return -1;
	tpu_gemm_isa = isa;
	tpu_gemm_has_avx2 = isa >= TPU_GEMM_AVX2;
	tpu_gemm_vnni_ok = isa == probed_isa && tpu_gemm_has_avx2;
	return 0;
}

const char *tpu_gemm_isa_name(void)
{
	return isa_names[tpu_gemm_isa];
}

/* OpenBLAS 0.3.21's core types whose sgemm kernels use AVX-512. */
static bool blas_core_has_avx512(const char *core)
{
	return !strcmp(core, "SkylakeX") || !strcmp(core, "Cooperlake") ||
	       !strcmp(core, "SapphireRapids");
}

const char *tpu_gemm_blas_coretype(void)
{
	const char *isa, *core;

	tpu_gemm_init();
	isa = tpu_gemm_isa_name();
	core = openblas_get_corename();

	if (getenv("OPENBLAS_CORETYPE"))
		return NULL;
	/*
	 * Kernels capped to AVX2 stand for an AVX2-only host: the engine's
	 * f32 path and the anchor are OpenBLAS, which would run its AVX2
	 * kernels there.
	 */
	if (!strcmp(isa, "avx2") && blas_core_has_avx512(core))
		return "Haswell";
	if (strcmp(core, "Prescott"))
		return NULL;
	return !strcmp(isa, "avx512") ? "SkylakeX" :
	       !strcmp(isa, "avx2") ? "Haswell" : NULL;
}

bool tpu_gemm_blas_core_narrower(void)
{
	tpu_gemm_init();
	return getenv("OPENBLAS_CORETYPE") &&
	       !strcmp(tpu_gemm_isa_name(), "avx512") &&
	       !blas_core_has_avx512(openblas_get_corename());
}

static struct gemm_scratch *thread_scratch(void)
{
	struct gemm_scratch *s = pthread_getspecific(scratch_key);

	if (!s) {
		s = calloc(1, sizeof(*s));
		if (s && pthread_setspecific(scratch_key, s)) {
			free(s);
			s = NULL;
		}
	}
	return s;
}

void *tpu_gemm_scratch(enum tpu_gemm_slot slot, size_t bytes)
{
	struct gemm_scratch *s = thread_scratch();
	void *p;

	if (!s)
		return NULL;
	if (s->size[slot] >= bytes)
		return s->buf[slot];
	/* Grow by half again, so slowly growing shapes do not realloc each call. */
	bytes += bytes / 2;
	bytes = (bytes + 63) & ~(size_t)63;
	p = aligned_alloc(64, bytes);
	if (!p)
		return NULL;
	free(s->buf[slot]);
	s->buf[slot] = p;
	s->size[slot] = bytes;
	return p;
}

/* k == 0 leaves nothing to multiply: C keeps its value or becomes zero. */
static bool gemm_trivial(int64_t m, int64_t n, int64_t k, void *c,
			 int64_t ldc, size_t elem, bool accumulate)
{
	if (m > 0 && n > 0 && k > 0)
		return false;
	if (k <= 0 && !accumulate)
		for (int64_t i = 0; i < m && n > 0; i++)
			memset((char *)c + i * ldc * elem, 0, n * elem);
	return true;
}

/* BLAS wants a leading dimension of at least 1, even for an empty operand. */
static int blas_ld(int64_t ld)
{
	return ld > 0 ? (int)ld : 1;
}

static void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
		  const float *a, int64_t lda, const float *b, int64_t ldb,
		  float *c, int64_t ldc, bool accumulate)
{
	cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
		    trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
		    1.0f, a, blas_ld(lda), b, blas_ld(ldb),
		    accumulate ? 1.0f : 0.0f, c, blas_ld(ldc));
}

void tpu_gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
		  const float *a, int64_t lda, const float *b, int64_t ldb,
		  float *c, int64_t ldc, bool accumulate)
{
	if (gemm_trivial(m, n, k, c, ldc, sizeof(*c), accumulate) ||
	    tpu_gemm_f32_small(trans_a, trans_b, m, n, k, a, lda, b, ldb, c,
			       ldc, accumulate))
		return;
	sgemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

/* bf16 is the top half of an f32: widening is a shift, exact. */
__attribute__((target("avx2")))
static void widen_row_avx2(float *dst, const uint16_t *src, int64_t n)
{
	int64_t j = 0;

	for (; j + 8 <= n; j += 8) {
		__m128i h = _mm_loadu_si128((const __m128i *)(src + j));
		__m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);

		_mm256_storeu_si256((__m256i *)(dst + j), w);
	}
	for (; j < n; j++) {
		uint32_t bits = (uint32_t)src[j] << 16;

		memcpy(dst + j, &bits, sizeof(bits));
	}
}

static void widen_row(float *dst, const uint16_t *src, int64_t n)
{
	for (int64_t j = 0; j < n; j++) {
		uint32_t bits = (uint32_t)src[j] << 16;

		memcpy(dst + j, &bits, sizeof(bits));
	}
}

/* Widens a rows x cols bf16 matrix into a dense f32 one (leading dim cols). */
static float *widen(enum tpu_gemm_slot slot, const uint16_t *src, int64_t ld,
		    int64_t rows, int64_t cols)
{
	float *dst = tpu_gemm_scratch(slot, (size_t)rows * cols * sizeof(float));

	if (!dst)
		return NULL;
	for (int64_t i = 0; i < rows; i++) {
		if (tpu_gemm_has_avx2)
			widen_row_avx2(dst + i * cols, src + i * ld, cols);
		else
			widen_row(dst + i * cols, src + i * ld, cols);
	}
	return dst;
}

/* Out of scratch memory: still exact, one column of B at a time. */
static void bf16_by_columns(bool trans_a, bool trans_b, int64_t m, int64_t n,
			    int64_t k, const uint16_t *a, int64_t lda,
			    const uint16_t *b, int64_t ldb, float *c,
			    int64_t ldc, bool accumulate)
{
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++) {
			float acc = accumulate ? c[i * ldc + j] : 0.0f;

			for (int64_t p = 0; p < k; p++) {
				float x, y;

				widen_row(&x, &a[trans_a ? p * lda + i : i * lda + p], 1);
				widen_row(&y, &b[trans_b ? j * ldb + p : p * ldb + j], 1);
				acc += x * y;
			}
			c[i * ldc + j] = acc;
		}
}

/*
 * Widening the whole of A and B would stream megabytes of f32 through
 * memory before sgemm reads them again; a k-slice at a time they stay in
 * L2 (a 1024-wide slice of B is 1 MiB) and are still hot when sgemm packs.
 */
#define BF16_KSLICE 256

/* One k-slice [p, p + kk) of op(A) @ op(B), widened then multiplied. */
static bool bf16_slice(bool trans_a, bool trans_b, int64_t m, int64_t n,
		       int64_t p, int64_t kk, const uint16_t *a, int64_t lda,
		       const uint16_t *b, int64_t ldb, float *c, int64_t ldc,
		       bool accumulate)
{
	const uint16_t *sa = trans_a ? a + p * lda : a + p;
	const uint16_t *sb = trans_b ? b + p : b + p * ldb;
	int64_t a_cols = trans_a ? m : kk, b_cols = trans_b ? kk : n;
	float *fa = widen(TPU_GEMM_SLOT_A, sa, lda, trans_a ? kk : m, a_cols);
	float *fb = fa ? widen(TPU_GEMM_SLOT_B, sb, ldb, trans_b ? n : kk, b_cols) :
			 NULL;

	if (!fb)
		return false;
	sgemm(trans_a, trans_b, m, n, kk, fa, a_cols, fb, b_cols, c, ldc,
	      accumulate);
	return true;
}

void tpu_gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
		   const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
		   float *c, int64_t ldc, bool accumulate)
{
	if (gemm_trivial(m, n, k, c, ldc, sizeof(*c), accumulate) ||
	    tpu_gemm_bf16_small(trans_a, trans_b, m, n, k, a, lda, b, ldb, c,
				ldc, accumulate))
		return;
	for (int64_t p = 0; p < k; p += BF16_KSLICE) {
		int64_t kk = k - p < BF16_KSLICE ? k - p : BF16_KSLICE;

		if (!bf16_slice(trans_a, trans_b, m, n, p, kk, a, lda, b, ldb,
				c, ldc, accumulate || p > 0)) {
			/* Nothing was written for this slice: redo it slowly. */
			bf16_by_columns(trans_a, trans_b, m, n, k - p,
					trans_a ? a + p * lda : a + p, lda,
					trans_b ? b + p : b + p * ldb, ldb, c,
					ldc, accumulate || p > 0);
			return;
		}
	}
}
