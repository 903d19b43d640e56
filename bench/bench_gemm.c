// SPDX-License-Identifier: MIT
/*
 * `make bench-gemm`: the engine's GEMM kernels beside OpenBLAS's sgemm,
 * measured in the same run, as `bench: NAME = VALUE UNIT` lines.
 *
 * The host is shared and noisy, so the variants run in interleaved rounds
 * and each keeps its best round: a burst of noise then hurts one round of
 * every variant alike instead of one variant's only figure.
 */
#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "isa_peak.h"
#include "tpu_gemm.h"
#include "tpu_prefetch.h"
#include "tpu_vmem.h"

/* K_INT8_AVX2: the AVX2 int8 kernel even where a faster one exists. */
enum kind { K_OPENBLAS, K_F32, K_BF16, K_INT8, K_INT8_AVX2, KINDS };

static const char *const kind_name[KINDS] = {
	"openblas", "f32", "bf16", "int8", "int8_avx2"
};

/* Row-major operands of one problem in every dtype. */
struct operands {
	int64_t m, n, k, lda, ldb, ldc;
	float *af, *bf, *cf;
	uint16_t *ah, *bh;
	int8_t *ai, *bi;
	int32_t *ci;
};

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/*
 * On huge pages, as QEMU's guest RAM and bench_engine's HBM are: walking
 * 128^3 blocks of 4096^2 f32 arrays, a step's two blocks took 22-24 us on
 * 4 KiB pages, 12-19 us on huge ones.
 */
static void *alloc(size_t bytes)
{
	void *p = tpu_vmem_alloc(bytes);

	if (!p) {
		perror("bench_gemm");
		exit(1);
	}
	return p;
}

static void operands_init(struct operands *o, int64_t m, int64_t n, int64_t k)
{
	*o = (struct operands){ .m = m, .n = n, .k = k, .lda = k, .ldb = n, .ldc = n };
	o->af = alloc(m * k * 4);
	o->bf = alloc(k * n * 4);
	o->cf = alloc(m * n * 4);
	o->ah = alloc(m * k * 2);
	o->bh = alloc(k * n * 2);
	o->ai = alloc(m * k);
	o->bi = alloc(k * n);
	o->ci = alloc(m * n * 4);
	for (int64_t i = 0; i < m * k; i++) {
		o->ai[i] = (int8_t)(i * 7 + 3);
		o->ah[i] = 0x3f80 + (i % 97);	/* bf16 around 1.0 */
		o->af[i] = (float)(i % 13) * 0.25f;
	}
	for (int64_t i = 0; i < k * n; i++) {
		o->bi[i] = (int8_t)(i * 5 + 1);
		o->bh[i] = 0xbf80 + (i % 89);
		o->bf[i] = (float)(i % 11) * 0.5f;
	}
	memset(o->cf, 0, m * n * 4);
	memset(o->ci, 0, m * n * 4);
}

static void operands_free(struct operands *o)
{
	free(o->af);
	free(o->bf);
	free(o->cf);
	free(o->ah);
	free(o->bh);
	free(o->ai);
	free(o->bi);
	free(o->ci);
}

/* C block (i, j) of size m x n, k-range from p, operands read in place. */
static void block_gemm(enum kind kind, const struct operands *o, int64_t i,
		       int64_t j, int64_t p, int64_t m, int64_t n, int64_t k,
		       bool acc)
{
	switch (kind) {
	case K_OPENBLAS:
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k,
			    1.0f, o->af + i * o->lda + p, o->lda,
			    o->bf + p * o->ldb + j, o->ldb, acc ? 1.0f : 0.0f,
			    o->cf + i * o->ldc + j, o->ldc);
		break;
	case K_F32:
		tpu_gemm_f32(false, false, m, n, k, o->af + i * o->lda + p, o->lda,
			     o->bf + p * o->ldb + j, o->ldb,
			     o->cf + i * o->ldc + j, o->ldc, acc);
		break;
	case K_BF16:
		tpu_gemm_bf16(false, false, m, n, k, o->ah + i * o->lda + p, o->lda,
			      o->bh + p * o->ldb + j, o->ldb,
			      o->cf + i * o->ldc + j, o->ldc, acc);
		break;
	default:
		tpu_gemm_i8(false, false, false, false, m, n, k,
			    o->ai + i * o->lda + p, o->lda,
			    o->bi + p * o->ldb + j, o->ldb,
			    o->ci + i * o->ldc + j, o->ldc, acc);
	}
}

/* Seconds for one whole-problem call, the fastest of @reps. */
static double time_single(enum kind kind, const struct operands *o, int reps)
{
	double best = 1e30;

	if (kind == K_INT8_AVX2 && tpu_gemm_i8_use("avx2"))
		return 1e30;
	for (int r = 0; r < reps; r++) {
		double t = now();

		block_gemm(kind, o, 0, 0, 0, o->m, o->n, o->k, false);
		t = now() - t;
		if (t < best)
			best = t;
	}
	tpu_gemm_i8_use(NULL);
	return best;
}

static void print_rate(const char *what, const char *shape, double ops,
		       double secs, const char *unit)
{
	printf("bench: %s_%s = %.1f %s\n", what, shape, ops / secs / 1e9, unit);
}

/* Single-thread throughput of each kind on one block shape. */
static void bench_block_shape(int64_t m, int64_t n, int64_t k, int rounds)
{
	struct operands o;
	double best[KINDS], ops = 2.0 * m * n * k;
	int reps = ops > 1e8 ? 2 : 200;
	char shape[64];

	snprintf(shape, sizeof(shape), "%ldx%ldx%ld", (long)m, (long)k, (long)n);
	operands_init(&o, m, n, k);
	for (int c = 0; c < KINDS; c++)
		best[c] = time_single(c, &o, 1);	/* warm scratch and caches */
	for (int r = 0; r < rounds; r++)
		for (int c = 0; c < KINDS; c++) {
			double t = time_single(c, &o, reps);

			if (t < best[c])
				best[c] = t;
		}
	print_rate("openblas_sgemm_1t", shape, ops, best[K_OPENBLAS], "GFLOP/s");
	print_rate("gemm_f32", shape, ops, best[K_F32], "GFLOP/s");
	print_rate("gemm_bf16", shape, ops, best[K_BF16], "GFLOP/s");
	print_rate("gemm_int8", shape, ops, best[K_INT8], "GOP/s");
	print_rate("gemm_int8_avx2", shape, ops, best[K_INT8_AVX2], "GOP/s");
	printf("bench: gemm_f32_vs_openblas_%s = %.2f x\n", shape,
	       best[K_OPENBLAS] / best[K_F32]);
	printf("bench: gemm_bf16_vs_f32_%s = %.2f x\n", shape,
	       best[K_OPENBLAS] / best[K_BF16]);
	printf("bench: gemm_int8_vs_f32_%s = %.2f x\n", shape,
	       best[K_OPENBLAS] / best[K_INT8]);
	printf("bench: gemm_int8_avx2_vs_f32_%s = %.2f x\n", shape,
	       best[K_OPENBLAS] / best[K_INT8_AVX2]);
	operands_free(&o);
}

/* --- the engine-style loop: two workers taking output blocks in turn --- */

#define BM 512
#define BN 1024
#define BK 1024

struct blockloop {
	enum kind kind;
	const struct operands *o;
	atomic_int next;
};

static void *blockloop_worker(void *arg)
{
	struct blockloop *bl = arg;
	const struct operands *o = bl->o;
	int cols = o->n / BN, blocks = (o->m / BM) * cols;

	for (int b; (b = atomic_fetch_add(&bl->next, 1)) < blocks;) {
		int64_t i = (b / cols) * BM, j = (b % cols) * BN;

		for (int64_t p = 0; p < o->k; p += BK)
			block_gemm(bl->kind, o, i, j, p, BM, BN, BK, p > 0);
	}
	return NULL;
}

static double time_blockloop(enum kind kind, const struct operands *o)
{
	struct blockloop bl = { .kind = kind, .o = o };
	pthread_t th[2];
	double t = now();

	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, blockloop_worker, &bl);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	return now() - t;
}

static double time_openblas_2t(const struct operands *o)
{
	double t;

	openblas_set_num_threads(2);
	t = now();
	block_gemm(K_OPENBLAS, o, 0, 0, 0, o->m, o->n, o->k, false);
	t = now() - t;
	openblas_set_num_threads(1);	/* tpu_gemm_* assume one thread */
	return t;
}

static void bench_blockloop(const struct operands *o, int rounds)
{
	double anchor = 1e30, best[KINDS], ops = 2.0 * o->m * o->n * o->k;
	const enum kind kinds[] = { K_F32, K_BF16, K_INT8 };

	for (int c = 0; c < KINDS; c++)
		best[c] = 1e30;
	for (int r = 0; r < rounds; r++) {
		double t = time_openblas_2t(o);

		if (t < anchor)
			anchor = t;
		for (int c = 0; c < 3; c++) {
			t = time_blockloop(kinds[c], o);
			if (t < best[kinds[c]])
				best[kinds[c]] = t;
		}
	}
	print_rate("openblas_sgemm_2t", "4096", ops, anchor, "GFLOP/s");
	for (int c = 0; c < 3; c++) {
		char what[64];

		snprintf(what, sizeof(what), "blockloop_%s_2t", kind_name[kinds[c]]);
		print_rate(what, "4096", ops, best[kinds[c]],
			   kinds[c] == K_INT8 ? "GOP/s" : "GFLOP/s");
		printf("bench: blockloop_vs_openblas_%s_4096 = %.2f x\n",
		       kind_name[kinds[c]], anchor / best[kinds[c]]);
	}
}

/*
 * --- a Pallas grid of 128^3 blocks on one thread: each step's two input
 * blocks are new, read in place from 4096 x 4096 arrays (rows 16 KiB
 * apart). Beside it, the same call on hot data, copying a step's two
 * blocks alone, and OpenBLAS on the whole problem: where a 128^3 grid
 * loses against the whole sgemm ---
 */

#define SB	128

/* Output blocks (i, j) of a walk, spread over the arrays: never hot. */
#define WALK_BLOCKS	8

static int64_t walk_block(int round, int b, int64_t nb)
{
	return ((int64_t)round * 5 + (int64_t)b * 3) % nb;
}

/* One walk: WALK_BLOCKS output blocks, each over every k step. */
static double time_walk(enum kind kind, const struct operands *o, int round,
			bool prefetch, bool copy_only)
{
	static float buf[2][SB * SB];
	int64_t nb = o->n / SB;
	double t = now();

	for (int b = 0; b < WALK_BLOCKS; b++) {
		int64_t i = walk_block(round, b, nb) * SB;
		int64_t j = walk_block(round + 1, b, nb) * SB;

		for (int64_t p = 0; p < o->k; p += SB) {
			const float *pa = o->af + i * o->lda + p;
			const float *pb = o->bf + p * o->ldb + j;

			if (copy_only) {
				for (int r = 0; r < SB; r++) {
					memcpy(buf[0] + r * SB, pa + r * o->lda, SB * 4);
					memcpy(buf[1] + r * SB, pb + r * o->ldb, SB * 4);
				}
				continue;
			}
			/* as the engine's pipeline does (tpu_pipeline.c) */
			tpu_prefetch_clear();
			if (prefetch && p + SB < o->k) {
				tpu_prefetch_rows(pa + SB, SB, SB * 4, o->lda * 4);
				tpu_prefetch_rows(pb + SB * o->ldb, SB, SB * 4, o->ldb * 4);
			}
			block_gemm(kind, o, i, j, p, SB, SB, SB, p > 0);
		}
	}
	return now() - t;
}

static void bench_stream128(const struct operands *o, int rounds)
{
	enum { WHOLE, HOT, COLD, COLD_PF, BLAS_COLD, COPY, N };
	static const char *const name[N] = {
		"openblas_sgemm_1t_4096", "stream128_f32_hot_1t",
		"stream128_f32_cold_1t", "stream128_f32_cold_prefetch_1t",
		"stream128_openblas_cold_1t",
	};
	int64_t nb = o->n / SB;
	double best[N], steps = WALK_BLOCKS * (double)nb;
	double step_ops = 2.0 * SB * SB * SB;
	struct operands hot;

	operands_init(&hot, SB, SB, SB);
	for (int c = 0; c < N; c++)
		best[c] = 1e30;
	for (int r = 0; r < rounds; r++) {
		double t[N];

		/* the whole problem's time for as many flops as a walk */
		t[WHOLE] = time_single(K_OPENBLAS, o, 1) / nb / nb / nb * steps;
		t[HOT] = time_single(K_F32, &hot, (int)steps) * steps;
		t[COLD] = time_walk(K_F32, o, r, false, false);
		t[COLD_PF] = time_walk(K_F32, o, r, true, false);
		t[BLAS_COLD] = time_walk(K_OPENBLAS, o, r, false, false);
		t[COPY] = time_walk(K_F32, o, r, false, true);
		for (int c = 0; c < N; c++)
			if (t[c] < best[c])
				best[c] = t[c];
	}
	for (int c = 0; c < COPY; c++)
		printf("bench: %s = %.1f GFLOP/s\n", name[c],
		       step_ops * steps / best[c] / 1e9);
	printf("bench: stream128_f32_cold_prefetch_vs_openblas_1t_4096 = %.2f x\n",
	       best[WHOLE] / best[COLD_PF]);
	printf("bench: stream128_f32_hot_vs_openblas_1t_4096 = %.2f x\n",
	       best[WHOLE] / best[HOT]);
	printf("bench: stream128_block_copy = %.1f GB/s\n",
	       2.0 * SB * SB * 4 * steps / best[COPY] / 1e9);
	printf("bench: stream128_block_copy_per_step = %.1f us\n",
	       best[COPY] / steps * 1e6);
	printf("bench: stream128_f32_hot_per_step = %.1f us\n",
	       best[HOT] / steps * 1e6);
	operands_free(&hot);
}

/* The int8 kernels' ceiling on AVX2: their instructions' rate against f32's. */
static void bench_isa_peak(void)
{
	double f32, i16;

	if (isa_peak(7, &f32, &i16) || !f32 || !i16)
		return;
	printf("bench: peak_avx2_f32_fma = %.1f GFLOP/s\n", f32 / 1e9);
	printf("bench: peak_avx2_int16_madd = %.1f GOP/s\n", i16 / 1e9);
	printf("bench: peak_avx2_int16_vs_f32 = %.2f x\n", i16 / f32);
}

int main(void)
{
	struct operands big;

	tpu_gemm_init();
	printf("# openblas core %s; int8 kernel %s\n", openblas_get_corename(),
	       tpu_gemm_i8_kernel());
	bench_isa_peak();
	bench_block_shape(512, 1024, 1024, 5);
	bench_block_shape(128, 128, 128, 5);
	/* one 4096^3 problem for both: filling it takes seconds */
	operands_init(&big, 4096, 4096, 4096);
	bench_blockloop(&big, 3);
	bench_stream128(&big, 5);
	operands_free(&big);
	return 0;
}
