// SPDX-License-Identifier: MIT
/*
 * `make bench-attention`: flash attention's forward pass (the samples'
 * kernel, samples/kernels.c) on the in-process device with two cores,
 * bf16 q, k, v of (batch * heads = 8, seq, d = 128), seq 2048 and 4096,
 * causal and not, beside a host reference in the same run computing the
 * same per head in f32 with OpenBLAS sgemm on two threads: S = Q K^T
 * scaled (and masked), a row softmax on two threads, O = P V. And a
 * (8192, 4096) f32 row softmax beside the host's memcpy of its bytes.
 *
 * Each figure is the median of interleaved rounds; ratios are the median
 * of each round's ratio. Wall time is the host's; the modeled v5e figures
 * come from the job's report, under their own names.
 *
 * Usage: bench_attention [SEQ BQ BK | softmax] (one configuration, one
 * round: for choosing block sizes, or for a profile).
 */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"
#include "sample_util.h"
#include "bench_util.h"

#define CORES		2
#define ROUNDS		3
#define BH		8
#define D		128
#define BQ		256
#define BK		512
#define SOFTMAX_ROWS	8192
#define SOFTMAX_COLS	4096
#define SOFTMAX_BR	32
#define VMEM_LIMIT	(64ull << 20)

/* OpenBLAS's idle workers spin for a while; let them sleep before the device runs. */
static void blas_quiesce(void)
{
	openblas_set_num_threads(1);
	nanosleep(&(struct timespec){ .tv_nsec = 250000000 }, NULL);
}

/* --- the host reference: per head, f32, OpenBLAS and two threads --- */

struct softmax_rows {
	float *s;
	int64_t n, first, last;
	bool causal;
};

/* Rows [first, last) of the (n, n) scores: masked, stable softmax. */
static void *softmax_rows(void *arg)
{
	const struct softmax_rows *w = arg;

	for (int64_t r = w->first; r < w->last; r++) {
		float *row = w->s + r * w->n, m = -INFINITY, sum = 0;
		int64_t keys = w->causal ? r + 1 : w->n;

		for (int64_t c = 0; c < keys; c++)
			m = fmaxf(m, row[c]);
		for (int64_t c = 0; c < keys; c++) {
			row[c] = expf(row[c] - m);
			sum += row[c];
		}
		for (int64_t c = 0; c < keys; c++)
			row[c] /= sum;
		for (int64_t c = keys; c < w->n; c++)
			row[c] = 0;
	}
	return NULL;
}

/* The causal half has fewer keys per row early on: split by work. */
static void softmax_two_threads(float *s, int64_t n, bool causal)
{
	int64_t half = causal ? (int64_t)(n / sqrt(2.0)) : n / 2;
	struct softmax_rows w[2] = { { s, n, 0, half, causal },
				     { s, n, half, n, causal } };
	pthread_t t;

	if (pthread_create(&t, NULL, softmax_rows, &w[1])) {
		softmax_rows(&w[1]);
		softmax_rows(&w[0]);
		return;
	}
	softmax_rows(&w[0]);
	pthread_join(t, NULL);
}

/* o = softmax(q k^T / sqrt(d), masked) v for every head; @s is seq^2 scratch. */
static double host_reference(const float *q, const float *k, const float *v,
			     int64_t seq, bool causal, float *s, float *o)
{
	int64_t head = seq * D;
	double t;

	openblas_set_num_threads(CORES);
	bench_clean_upper_state();
	t = bench_now();
	for (int64_t b = 0; b < BH; b++) {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, seq, seq, D,
			    1 / sqrtf(D), q + b * head, D, k + b * head, D, 0, s,
			    seq);
		softmax_two_threads(s, seq, causal);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, seq, D,
			    seq, 1, s, seq, v + b * head, D, 0, o + b * head, D);
	}
	t = bench_now() - t;
	blas_quiesce();
	return t;
}

/* --- flash attention on the device --- */

struct attn_bench {
	struct attn_shape s;
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	struct tpurt_compiler_params params;
	struct tpurt_array *a[4];	/* q, k, v, o */
	float *h[3];			/* q, k, v, bf16 values */
	float *s_ref, *o_ref;
	double dev[ROUNDS], ref[ROUNDS];
	struct tpurt_job_stats st;
};

static void attn_init(struct tpurt_device *dev, struct attn_bench *ab,
		      int64_t seq, bool causal, int64_t bq, int64_t bk)
{
	int64_t shape[3] = { BH, seq, D };
	size_t n = BH * seq * D;

	ab->s = (struct attn_shape){ BH, seq, D, bq, bk, causal };
	ab->gs = attn_spec(&ab->s);
	if (!ab->gs || tpurt_kernel_create(&ab->k) ||
	    attn_kernel(ab->k, ab->gs, &ab->s, 0))
		bench_die("kernel");
	ab->params = attn_params(0);
	ab->params.vmem_limit_bytes = VMEM_LIMIT;
	for (int i = 0; i < 3; i++) {
		ab->h[i] = malloc(n * sizeof(float));
		if (!ab->h[i])
			bench_die("host arrays");
		sample_fill(ab->h[i], TPURT_F32, n, 61 + i);
		round_to_bf16(ab->h[i], n);
		ab->a[i] = sample_array_of(dev, TPURT_BF16, 3, shape, ab->h[i], NULL);
		if (!ab->a[i])
			bench_die("arrays");
	}
	if (tpurt_array_create(dev, TPURT_BF16, 3, shape, &ab->a[3]))
		bench_die("arrays");
	ab->s_ref = malloc(seq * seq * sizeof(float));
	ab->o_ref = malloc(n * sizeof(float));
	if (!ab->s_ref || !ab->o_ref)
		bench_die("host arrays");
}

static void attn_fini(struct attn_bench *ab)
{
	for (int i = 0; i < 4; i++)
		tpurt_array_free(ab->a[i]);
	for (int i = 0; i < 3; i++)
		free(ab->h[i]);
	free(ab->s_ref), free(ab->o_ref);
	tpurt_kernel_free(ab->k);
	tpurt_grid_spec_free(ab->gs);
}

static double attn_device(struct attn_bench *ab)
{
	double t = bench_now();

	if (tpurt_pallas_call(ab->k, ab->gs, &ab->params, ab->a, 4, &ab->st))
		bench_die("pallas_call");
	return bench_now() - t;
}

static void attn_round(struct attn_bench *ab, int round)
{
	ab->ref[round] = host_reference(ab->h[0], ab->h[1], ab->h[2], ab->s.seq,
					ab->s.causal, ab->s_ref, ab->o_ref);
	ab->dev[round] = attn_device(ab);
}

/* The device's bf16 output against the host's f32 one. */
static double attn_max_error(struct attn_bench *ab)
{
	uint16_t *o = sample_read(ab->a[3]);
	double worst = 0;

	if (!o)
		bench_die("read");
	for (uint64_t i = 0; i < tpurt_array_size(ab->a[3]); i++)
		worst = fmax(worst, fabs(tpurt_bf16_to_f32(o[i]) - ab->o_ref[i]));
	free(o);
	return worst;
}

static void attn_print(const struct tpurt_device_info *info,
		       struct attn_bench *ab, int rounds)
{
	const char *kind = ab->s.causal ? "_causal" : "";
	long long seq = ab->s.seq;
	double flops = attn_flops(&ab->s);
	double dev = bench_median(ab->dev, rounds), ref = bench_median(ab->ref, rounds);
	double model = ab->st.model_time_ps * 1e-12;

	printf("bench: flash_attention%s_%lld = %.4f s\n", kind, seq, dev);
	printf("bench: flash_attention%s_gflops_%lld = %.1f GFLOP/s\n", kind, seq,
	       flops / dev / 1e9);
	printf("bench: host_reference%s_%lld = %.4f s\n", kind, seq, ref);
	printf("bench: flash_attention%s_vs_reference_%lld = %.2f x\n", kind, seq,
	       bench_median_ratio(ab->ref, ab->dev, rounds));
	printf("bench: flash_attention%s_max_abs_error_%lld = %.2g\n", kind, seq,
	       attn_max_error(ab));
	printf("bench: modeled_v5e_time_flash_attention%s_%lld = %.3f ms\n", kind,
	       seq, model * 1e3);
	printf("bench: modeled_v5e_utilization_flash_attention%s_%lld = %.1f %%\n",
	       kind, seq, tpurt_model_utilization(info, TPURT_BF16, flops, model));
}

/* --- softmax against memcpy --- */

static void bench_softmax(struct tpurt_device *dev, int rounds)
{
	int64_t shape[2] = { SOFTMAX_ROWS, SOFTMAX_COLS };
	size_t n = SOFTMAX_ROWS * SOFTMAX_COLS, bytes = n * sizeof(float);
	const struct tpurt_compiler_params params = {
		.dimension_semantics = "parallel",
		.vmem_limit_bytes = VMEM_LIMIT,
	};
	struct tpurt_grid_spec *gs = softmax_spec(TPURT_F32, SOFTMAX_ROWS,
						  SOFTMAX_COLS, SOFTMAX_BR);
	float *src = malloc(bytes), *dst = malloc(bytes);
	double sm[ROUNDS], cp[ROUNDS];
	struct tpurt_array *x, *o;
	struct tpurt_job_stats st;
	struct tpurt_kernel *k;

	if (!gs || !src || !dst || tpurt_kernel_create(&k) ||
	    softmax_kernel(k, gs))
		bench_die("softmax kernel");
	sample_fill(src, TPURT_F32, n, 71);
	memset(dst, 0, bytes);
	x = sample_array_of(dev, TPURT_F32, 2, shape, src, NULL);
	if (!x || tpurt_array_create(dev, TPURT_F32, 2, shape, &o))
		bench_die("softmax arrays");
	for (int r = 0; r < rounds; r++) {
		double t = bench_now();

		memcpy(dst, src, bytes);
		cp[r] = bench_now() - t;
		t = bench_now();
		if (tpurt_pallas_call(k, gs, &params,
				      (struct tpurt_array *[]){ x, o }, 2, &st))
			bench_die("softmax pallas_call");
		sm[r] = bench_now() - t;
	}
	printf("bench: softmax_%dx%d_f32 = %.4f s\n", SOFTMAX_ROWS, SOFTMAX_COLS,
	       bench_median(sm, rounds));
	printf("bench: host_memcpy_%zu_MiB = %.4f s\n", bytes >> 20,
	       bench_median(cp, rounds));
	printf("bench: softmax_vs_host_memcpy = %.2f x\n",
	       bench_median_ratio(cp, sm, rounds));
	printf("bench: modeled_v5e_time_softmax_%dx%d_f32 = %.3f ms\n",
	       SOFTMAX_ROWS, SOFTMAX_COLS, st.model_time_ps * 1e-9);
	free(src), free(dst);
	tpurt_array_free(x), tpurt_array_free(o);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
}

static void bench_attention(struct tpurt_device *dev,
			    const struct tpurt_device_info *info, int64_t seq,
			    int64_t bq, int64_t bk, int rounds)
{
	struct attn_bench ab[2] = { 0 };

	printf("# flash attention: bf16 (bh %d, seq %lld, d %d), blocks bq %lld, bk %lld, "
	       "%d cores; host reference: f32 OpenBLAS sgemm and softmax, %d threads\n",
	       BH, (long long)seq, D, (long long)bq, (long long)bk, CORES, CORES);

	for (int c = 0; c < 2; c++)
		attn_init(dev, &ab[c], seq, c, bq, bk);
	for (int r = 0; r < rounds; r++)
		for (int c = 0; c < 2; c++)
			attn_round(&ab[c], r);
	for (int c = 0; c < 2; c++) {
		attn_print(info, &ab[c], rounds);
		attn_fini(&ab[c]);
	}
}

int main(int argc, char **argv)
{
	struct tpurt_sim_config cfg = { .cores = CORES, .hbm_size = 2ull << 30 };
	struct tpurt_device_info info;
	struct tpurt_device *dev;

	if (tpurt_open_sim(&cfg, &dev) || tpurt_device_info(dev, &info))
		bench_die("open");
	if (argc == 2 && !strcmp(argv[1], "softmax")) {
		bench_softmax(dev, 1);
	} else if (argc == 4) {
		bench_attention(dev, &info, atoll(argv[1]), atoll(argv[2]),
				atoll(argv[3]), 1);
	} else {
		bench_attention(dev, &info, 2048, BQ, BK, ROUNDS);
		bench_attention(dev, &info, 4096, BQ, BK, ROUNDS);
		bench_softmax(dev, ROUNDS);
	}
	tpurt_close(dev);
	return 0;
}
