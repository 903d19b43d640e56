// SPDX-License-Identifier: MIT
/*
 * `make bench-paged`: decode attention over a paged KV cache (the
 * paged_attention sample's kernel, samples/memory_kernels.c) on the
 * in-process device, beside a host reference in the same run: batch 8,
 * heads 8 (kv heads 8), head_dim 128, bf16 pages of 16 and 64 tokens,
 * every sequence 512, 2048 or 8192 tokens long, 8 pages a grid step.
 *
 * The reference does the same work in f32 the way a host would: for each
 * sequence and head, gather its K pages (bf16 -> f32) into one (length,
 * 128) matrix, scores = K q with OpenBLAS sgemv, a stable softmax, gather
 * V, o = V^T p with sgemv. Both sides get one thread: the kernel's grid
 * is all "arbitrary" (each step prefetches the next one's pages), so the
 * device runs it on one core.
 *
 * Figures are medians of interleaved rounds (ratios: the median of each
 * round's ratio): `bench: paged_attention_vs_reference_<len> = R x`
 * (reference time / device time, wall clock; pages of 16 tokens) and
 * `bench: paged_attention_model_us_<len> = T us` (the modeled v5e time of
 * the decode step, from the job's report), and the same for pages of 64
 * tokens under paged_attention_page64_*.
 *
 * Usage: bench_paged [LEN PAGE_SIZE] (one configuration, one round).
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"
#include "memory_kernels.h"
#include "sample_util.h"
#include "bench_util.h"

#define ROUNDS		3
#define BATCH		8
#define HEADS		8
#define KV_HEADS	8
#define D		128
#define PAGES_PER_BLOCK	8	/* pages_per_compute_block: a grid step's pages */

struct paged_bench {
	struct paged_shape s;
	int32_t lengths[BATCH];
	int32_t *pages;
	float *q;
	uint16_t *k, *v;		/* the pages as the device holds them */
	float *kc, *vc, *p, *o_ref;	/* the reference's gathered rows, scores, o */
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *kern;
	struct tpurt_array *args[10];
	struct tpurt_job_stats st;
	double dev[ROUNDS], ref[ROUNDS];
};

/* Gather the @n tokens of sequence @b, kv head @h, from @pages into @out (n, D). */
static void gather(const struct paged_bench *pb, const uint16_t *pages,
		   int64_t b, int64_t h, int64_t n, float *out)
{
	const struct paged_shape *s = &pb->s;
	int64_t page = s->page_size * D;

	for (int64_t t0 = 0; t0 < n; t0 += s->page_size) {
		int64_t p = pb->pages[b * s->pages_per_seq + t0 / s->page_size];
		const uint16_t *src = pages + (h * s->total_pages + p) * page;
		int64_t len = (n - t0 < s->page_size ? n - t0 : s->page_size) * D;

		for (int64_t e = 0; e < len; e++) {	/* bf16: f32's upper half */
			uint32_t bits = (uint32_t)src[e] << 16;

			memcpy(&out[t0 * D + e], &bits, sizeof(bits));
		}
	}
}

static double host_reference(struct paged_bench *pb)
{
	const struct paged_shape *s = &pb->s;
	double t;

	openblas_set_num_threads(1);
	bench_clean_upper_state();
	t = bench_now();
	for (int64_t b = 0; b < s->batch; b++)
		for (int64_t h = 0; h < s->heads; h++) {
			int64_t n = pb->lengths[b], kvh = h / (s->heads / s->kv_heads);
			float *o = pb->o_ref + (b * s->heads + h) * D, m = -INFINITY, sum = 0;

			gather(pb, pb->k, b, kvh, n, pb->kc);
			cblas_sgemv(CblasRowMajor, CblasNoTrans, n, D, 1, pb->kc, D,
				    pb->q + (b * s->heads + h) * D, 1, 0, pb->p, 1);
			for (int64_t j = 0; j < n; j++)
				m = fmaxf(m, pb->p[j]);
			for (int64_t j = 0; j < n; j++) {
				pb->p[j] = expf(pb->p[j] - m);
				sum += pb->p[j];
			}
			gather(pb, pb->v, b, kvh, n, pb->vc);
			cblas_sgemv(CblasRowMajor, CblasTrans, n, D, 1 / sum, pb->vc, D,
				    pb->p, 1, 0, o, 1);
		}
	return bench_now() - t;
}

static uint16_t *to_bf16(const float *f, size_t n)
{
	uint16_t *h = malloc(n * sizeof(*h));

	for (size_t i = 0; h && i < n; i++)
		h[i] = tpurt_f32_to_bf16(f[i]);
	return h;
}

static void paged_init(struct tpurt_device *dev, struct paged_bench *pb,
		       int64_t len, int64_t page_size)
{
	int64_t pps = len / page_size;
	size_t nq = BATCH * HEADS * D, np;
	float *k, *v;

	pb->s = (struct paged_shape){ TPURT_BF16, BATCH, HEADS, KV_HEADS, D,
				      page_size, BATCH * pps, pps,
				      PAGES_PER_BLOCK };
	np = KV_HEADS * pb->s.total_pages * page_size * D;
	for (int b = 0; b < BATCH; b++)
		pb->lengths[b] = (int32_t)len;
	pb->q = random_values(nq, 0.25f, TPURT_BF16, 41);
	k = random_values(np, 1.0f, TPURT_BF16, 42);
	v = random_values(np, 1.0f, TPURT_BF16, 43);
	pb->pages = paged_page_table(&pb->s, 44);
	pb->gs = paged_spec(&pb->s);
	if (!pb->q || !k || !v || !pb->pages || !pb->gs ||
	    tpurt_kernel_create(&pb->kern) || paged_kernel(pb->kern, pb->gs, &pb->s) ||
	    paged_arrays(dev, &pb->s, pb->lengths, pb->pages, pb->q, k, v, pb->args))
		bench_die("paged attention set-up");
	pb->k = to_bf16(k, np);
	pb->v = to_bf16(v, np);
	free(k), free(v);
	pb->kc = malloc(len * D * sizeof(float));
	pb->vc = malloc(len * D * sizeof(float));
	pb->p = malloc(len * sizeof(float));
	pb->o_ref = malloc(nq * sizeof(float));
	if (!pb->k || !pb->v || !pb->kc || !pb->vc || !pb->p || !pb->o_ref)
		bench_die("host arrays");
}

static void paged_fini(struct paged_bench *pb)
{
	paged_arrays_free(pb->args);
	tpurt_kernel_free(pb->kern);
	tpurt_grid_spec_free(pb->gs);
	free(pb->pages), free(pb->q), free(pb->k), free(pb->v);
	free(pb->kc), free(pb->vc), free(pb->p), free(pb->o_ref);
}

static double paged_device(struct paged_bench *pb)
{
	struct tpurt_compiler_params params = paged_params(0);
	double t = bench_now();

	if (tpurt_pallas_call(pb->kern, pb->gs, &params, pb->args, 10, &pb->st))
		bench_die("pallas_call");
	return bench_now() - t;
}

/* The device's o (f32: one query head a kv head) against the host's. */
static double max_error(struct paged_bench *pb)
{
	float *o = sample_read(pb->args[7]);
	double worst = 0;

	if (!o)
		bench_die("read");
	for (size_t i = 0; i < BATCH * HEADS * D; i++)
		worst = fmax(worst, fabs(o[i] - pb->o_ref[i]));
	free(o);
	return worst;
}

static void report(struct paged_bench *pb, int rounds)
{
	const char *tag = pb->s.page_size == 16 ? "" : "_page64";
	long long len = pb->lengths[0];

	printf("bench: paged_attention%s_%lld = %.4f s\n", tag, len,
	       bench_median(pb->dev, rounds));
	printf("bench: paged_attention%s_host_reference_%lld = %.4f s\n", tag, len,
	       bench_median(pb->ref, rounds));
	printf("bench: paged_attention%s_vs_reference_%lld = %.2f x\n", tag, len,
	       bench_median_ratio(pb->ref, pb->dev, rounds));
	printf("bench: paged_attention%s_max_abs_error_%lld = %.2g\n", tag, len,
	       max_error(pb));
	printf("bench: paged_attention%s_model_us_%lld = %.1f us\n", tag, len,
	       pb->st.model_time_ps * 1e-6);
	printf("bench: paged_attention%s_model_hbm_gbps_%lld = %.1f GB/s\n", tag, len,
	       (pb->st.hbm_bytes_in + pb->st.hbm_bytes_out) /
	       (pb->st.model_time_ps * 1e-12) / 1e9);
}

static void bench(struct tpurt_device *dev, int64_t len, int64_t page_size,
		  int rounds)
{
	struct paged_bench pb = { 0 };

	printf("# paged attention: bf16 pages of %lld tokens, batch %d, heads %d (kv %d), "
	       "head_dim %d, length %lld, %lld pages a step; host: gather + sgemv, 1 thread\n",
	       (long long)page_size, BATCH, HEADS, KV_HEADS, D, (long long)len,
	       (long long)PAGES_PER_BLOCK);
	paged_init(dev, &pb, len, page_size);
	for (int r = 0; r < rounds; r++) {
		pb.ref[r] = host_reference(&pb);
		pb.dev[r] = paged_device(&pb);
	}
	report(&pb, rounds);
	paged_fini(&pb);
}

int main(int argc, char **argv)
{
	static const int64_t lens[] = { 512, 2048, 8192 };
	struct tpurt_sim_config cfg = { .cores = 1, .hbm_size = 1ull << 30 };
	struct tpurt_device *dev;

	if (tpurt_open_sim(&cfg, &dev))
		bench_die("open");
	if (argc == 3) {
		bench(dev, atoll(argv[1]), atoll(argv[2]), 1);
	} else {
		for (int p = 0; p < 2; p++)
			for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
				bench(dev, lens[l], p ? 64 : 16, ROUNDS);
	}
	tpurt_close(dev);
	return 0;
}
