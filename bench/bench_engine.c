// SPDX-License-Identifier: MIT
/*
 * `make bench-engine`: whole matmul jobs (the guide's kernel, built by the
 * tests' job builder) run by the engine on two cores, beside OpenBLAS's
 * sgemm on two threads over the same arrays, in the same run.
 *
 * The host is shared and noisy: every round measures the anchor and every
 * job once, interleaved, and each figure is the median of its rounds. Wall
 * time is the host's; the modeled v5e figures come from the job report and
 * are printed under their own names, never mixed with it.
 */
#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "job_builder.h"
#include "tpu_dtype.h"
#include "tpu_engine.h"
#include "tpu_gemm.h"
#include "tpu_vmem.h"

#define CORES		2
#define MAX_SIZE	4096	/* the main table's largest */
#define MAX_SCALE_SIZE	8192	/* the scaling table's */
#define MAX_ROUNDS	7
#define VMEM_LIMIT	(96ull << 20)

enum { X, Y, Z, ARRAYS };

struct kind {
	const char *name;
	unsigned int in, out;
	const char *unit;
};

static const struct kind kinds[] = {
	{ "f32", TPU_DTYPE_F32, TPU_DTYPE_F32, "GFLOP/s" },
	{ "bf16", TPU_DTYPE_BF16, TPU_DTYPE_BF16, "GFLOP/s" },
	{ "int8", TPU_DTYPE_INT8, TPU_DTYPE_INT32, "GOP/s" },
};
#define NKINDS	(sizeof(kinds) / sizeof(kinds[0]))

static const uint32_t blocks[][3] = {	/* bm, bk, bn */
	{ 512, 1024, 1024 },
	{ 128, 128, 128 },
};
#define NBLOCKS	(sizeof(blocks) / sizeof(blocks[0]))

/* A pretend device whose HBM is backed by huge pages, as QEMU's RAM is. */
struct bench_dev {
	struct tpu_config cfg;
	struct tpu_engine *engine;	/* CORES cores */
	struct tpu_engine *engine1;	/* one core, on the same HBM */
	uint8_t *hbm;
	uint64_t hbm_size, used;
	struct tpu_buffer_slot slots[NKINDS * ARRAYS + 1];
	unsigned int nslots;
};

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "bench_engine: %s\n", what);
	exit(1);
}

static struct tpu_engine *engine_with(struct tpu_config *cfg,
				      unsigned int cores)
{
	struct tpu_engine *e;
	char err[256];

	cfg->cores = cores;
	e = tpu_engine_create(cfg, err, sizeof(err));
	if (!e)
		die(err);
	return e;
}

static void dev_init(struct bench_dev *d, uint64_t hbm_size)
{
	tpu_config_defaults(&d->cfg);
	d->engine1 = engine_with(&d->cfg, 1);
	d->engine = engine_with(&d->cfg, CORES);
	d->hbm_size = hbm_size;
	d->hbm = tpu_vmem_alloc(hbm_size);
	if (!d->hbm)
		die("out of memory for HBM");
}

static unsigned int dev_alloc(struct bench_dev *d, uint64_t bytes)
{
	unsigned int slot = d->nslots++;

	if (d->used + bytes > d->hbm_size)
		die("out of HBM");
	d->slots[slot] = (struct tpu_buffer_slot){ d->used, bytes };
	d->used = (d->used + bytes + 4095) & ~4095ull;
	return slot;
}

static void *dev_ptr(struct bench_dev *d, unsigned int slot)
{
	return d->hbm + d->slots[slot].offset;
}

/* One size: the arrays of every kind and the anchor's output. */
struct problem {
	uint64_t size;
	unsigned int slot[NKINDS][ARRAYS];
	unsigned int anchor_c;
};

static void problem_init(struct bench_dev *d, struct problem *p, uint64_t size)
{
	uint64_t n = size * size;

	d->used = 0;
	d->nslots = 0;
	p->size = size;
	for (unsigned int t = 0; t < NKINDS; t++) {
		unsigned int in = tpu_dtype_size(kinds[t].in);

		p->slot[t][X] = dev_alloc(d, n * in);
		p->slot[t][Y] = dev_alloc(d, n * in);
		p->slot[t][Z] = dev_alloc(d, n * tpu_dtype_size(kinds[t].out));
		/* small integers: exact in every dtype, so results can be checked */
		ref_fill(dev_ptr(d, p->slot[t][X]), kinds[t].in, n, 1 + t, -4, 4);
		ref_fill(dev_ptr(d, p->slot[t][Y]), kinds[t].in, n, 2 + t, -4, 4);
	}
	p->anchor_c = dev_alloc(d, n * 4);
}

static uint32_t clip(uint32_t block, uint64_t size)
{
	return block < size ? block : (uint32_t)size;
}

/* Blocks @b (bm, bk, bn), each cut to the problem's size. */
static void *job_blob(const struct problem *p, unsigned int t,
		      const uint32_t *b, size_t *len)
{
	struct mm_job j = {
		.m = p->size, .k = p->size, .n = p->size,
		.bm = clip(b[0], p->size), .bk = clip(b[1], p->size),
		.bn = clip(b[2], p->size),
		.in_dtype = kinds[t].in, .out_dtype = kinds[t].out,
		.acc_scratch = true,
		.x_slot = p->slot[t][X], .y_slot = p->slot[t][Y],
		.z_slot = p->slot[t][Z],
	};

	void *blob = mm_build(&j, len);

	/* as the guide raises vmem_limit_bytes for its large blocks */
	jb_header(blob)->vmem_limit_bytes = VMEM_LIMIT;
	return blob;
}

static double run_job_on(struct bench_dev *d, struct tpu_engine *e,
			 const void *blob, size_t len, struct tpu_job_result *res)
{
	double t = now();

	if (tpu_engine_run(e, blob, len, d->hbm, d->hbm_size, d->slots,
			   d->nslots, 0, res))
		die(res->message);
	return now() - t;
}

static double run_job(struct bench_dev *d, const void *blob, size_t len,
		      struct tpu_job_result *res)
{
	return run_job_on(d, d->engine, blob, len, res);
}

static double run_anchor_on(struct bench_dev *d, const struct problem *p,
			    int threads)
{
	int n = (int)p->size;
	double t;

	openblas_set_num_threads(threads);
	t = now();
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
		    dev_ptr(d, p->slot[0][X]), n, dev_ptr(d, p->slot[0][Y]), n,
		    0.0f, dev_ptr(d, p->anchor_c), n);
	t = now() - t;
	openblas_set_num_threads(1);	/* the engine's GEMM runs one per core */
	/*
	 * OpenBLAS's idle workers spin (yielding) for about 2^28 cycles before
	 * they sleep; let them, or they steal the next job's cores.
	 */
	nanosleep(&(struct timespec){ .tv_nsec = 250000000 }, NULL);
	return t;
}

static double run_anchor(struct bench_dev *d, const struct problem *p)
{
	return run_anchor_on(d, p, CORES);
}

/* A few elements of the engine's result against a dot product in double. */
static void check_result(struct bench_dev *d, const struct problem *p,
			 unsigned int t)
{
	const void *x = dev_ptr(d, p->slot[t][X]), *y = dev_ptr(d, p->slot[t][Y]);
	const void *z = dev_ptr(d, p->slot[t][Z]);
	uint64_t n = p->size;

	for (uint64_t s = 0; s < 16; s++) {
		uint64_t r = (s * 2654435761u) % n, c = (s * 40503u + 7) % n;
		double want = 0, got = ref_get(z, kinds[t].out, r * n + c);

		for (uint64_t q = 0; q < n; q++)
			want += ref_get(x, kinds[t].in, r * n + q) *
				ref_get(y, kinds[t].in, q * n + c);
		if (kinds[t].out == TPU_DTYPE_BF16)
			want = ref_from_bf16(ref_bf16((float)want));
		if (want != got) {
			fprintf(stderr, "bench_engine: %s %llu: z[%llu][%llu] = %g, want %g\n",
				kinds[t].name, (unsigned long long)n,
				(unsigned long long)r, (unsigned long long)c,
				got, want);
			exit(1);
		}
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Rounds: fewer where a job has tens of thousands of small steps. */
static int rounds_for(uint64_t size, const uint32_t *b)
{
	return size >= 4096 && b[0] < 256 ? 3 : 5;
}

static double peak(const struct tpu_config *cfg, unsigned int dtype)
{
	if (dtype == TPU_DTYPE_BF16)
		return (double)cfg->peak_flops_bf16;
	if (dtype == TPU_DTYPE_INT8)
		return (double)cfg->peak_ops_int8;
	return (double)cfg->peak_flops_f32;
}

static void print_modeled(const struct bench_dev *d, const char *name,
			  unsigned int t, const struct tpu_job_result *res)
{
	const struct tpu_model_stats *m = &res->stats.model;
	double chip = peak(&d->cfg, kinds[t].in) * d->cfg.cores;

	printf("bench: modeled_v5e_time_%s = %.6f s\n", name, m->time_s);
	printf("bench: modeled_v5e_utilization_%s = %.1f %%\n", name,
	       (double)m->flops / m->time_s / chip * 100);
}

struct figures {
	double anchor;			/* s, median */
	double job[NBLOCKS][NKINDS];	/* s, median */
	double ratio[NBLOCKS][NKINDS];	/* anchor / job, median of rounds */
};

/* Median of each round's ratio: a burst of load hits both sides of one. */
static double median_ratio(const double *anchor, const double *job, int n)
{
	double r[MAX_ROUNDS];

	for (int i = 0; i < n; i++)
		r[i] = anchor[i] / job[i];
	return median(r, n);
}

static void bench_size(struct bench_dev *d, uint64_t size, struct figures *f)
{
	double ops = 2.0 * size * size * size;
	double anchor[MAX_ROUNDS], t[NBLOCKS][NKINDS][MAX_ROUNDS];
	struct tpu_job_result res[NBLOCKS][NKINDS];
	void *blob[NBLOCKS][NKINDS];
	size_t len[NBLOCKS][NKINDS];
	struct problem p;
	char name[96];

	problem_init(d, &p, size);
	for (unsigned int b = 0; b < NBLOCKS; b++)
		for (unsigned int k = 0; k < NKINDS; k++)
			blob[b][k] = job_blob(&p, k, blocks[b], &len[b][k]);
	run_anchor(d, &p);				/* warm up */
	for (int r = 0; r < MAX_ROUNDS; r++) {
		if (r < 5)
			anchor[r] = run_anchor(d, &p);
		for (unsigned int b = 0; b < NBLOCKS; b++)
			for (unsigned int k = 0; k < NKINDS; k++)
				if (r < rounds_for(size, blocks[b]))
					t[b][k][r] = run_job(d, blob[b][k],
							     len[b][k], &res[b][k]);
	}
	for (unsigned int b = 0; b < NBLOCKS; b++)
		for (unsigned int k = 0; k < NKINDS; k++)
			f->ratio[b][k] = median_ratio(anchor, t[b][k],
						      rounds_for(size, blocks[b]));
	f->anchor = median(anchor, 5);
	printf("bench: openblas_sgemm_%dt_%llu = %.1f GFLOP/s\n", CORES,
	       (unsigned long long)size, ops / f->anchor / 1e9);
	for (unsigned int b = 0; b < NBLOCKS; b++)
		for (unsigned int k = 0; k < NKINDS; k++) {
			check_result(d, &p, k);
			f->job[b][k] = median(t[b][k], rounds_for(size, blocks[b]));
			snprintf(name, sizeof(name), "%s_%llu_b%ux%ux%u",
				 kinds[k].name, (unsigned long long)size,
				 blocks[b][0], blocks[b][1], blocks[b][2]);
			printf("bench: engine_%s = %.1f %s\n", name,
			       ops / f->job[b][k] / 1e9, kinds[k].unit);
			printf("bench: engine_vs_openblas_%s = %.2f x\n", name,
			       f->ratio[b][k]);
			print_modeled(d, name, k, &res[b][k]);
			free(blob[b][k]);
		}
}

/* The scaling table: sizes, and the kinds it runs (f32, bf16). */
static const uint64_t scale_sizes[] = { 1024, 2048, 4096, MAX_SCALE_SIZE };
#define SCALE_KINDS	2
#define SCALE_ROUNDS	3

/* One size of the scaling table: 1 and CORES cores beside as many threads. */
static void bench_scaling(struct bench_dev *d, uint64_t size)
{
	static const uint32_t block[3] = { 512, 1024, 1024 };
	double ops = 2.0 * size * size * size;
	/* an 8192^3 job is over a TFLOP: once is enough to see its cost */
	int rounds = size >= MAX_SCALE_SIZE ? 1 : SCALE_ROUNDS;
	double anchor[SCALE_ROUNDS], t[SCALE_KINDS][SCALE_ROUNDS];
	struct tpu_job_result res;
	void *blob[SCALE_KINDS];
	size_t len[SCALE_KINDS];
	struct problem p;

	problem_init(d, &p, size);
	for (unsigned int k = 0; k < SCALE_KINDS; k++)
		blob[k] = job_blob(&p, k, block, &len[k]);
	for (int cores = 1; cores <= CORES; cores++) {
		struct tpu_engine *e = cores == 1 ? d->engine1 : d->engine;

		for (int r = 0; r < rounds; r++) {
			anchor[r] = run_anchor_on(d, &p, cores);
			for (unsigned int k = 0; k < SCALE_KINDS; k++)
				t[k][r] = run_job_on(d, e, blob[k], len[k], &res);
		}
		printf("bench: scaling_openblas_sgemm_%dt_%llu = %.1f GFLOP/s\n",
		       cores, (unsigned long long)size,
		       ops / median(anchor, rounds) / 1e9);
		for (unsigned int k = 0; k < SCALE_KINDS; k++) {
			check_result(d, &p, k);
			printf("bench: scaling_engine_%s_%dc_%llu = %.1f GFLOP/s\n",
			       kinds[k].name, cores, (unsigned long long)size,
			       ops / median(t[k], rounds) / 1e9);
			printf("bench: scaling_engine_vs_openblas_%s_%dc_%llu = %.2f x\n",
			       kinds[k].name, cores, (unsigned long long)size,
			       median_ratio(anchor, t[k], rounds));
		}
	}
	for (unsigned int k = 0; k < SCALE_KINDS; k++)
		free(blob[k]);
}

/*
 * OpenBLAS fell back to its generic kernels on a host with AVX2 or
 * AVX-512, or runs AVX-512 kernels while the engine's are capped to AVX2:
 * run again with the kernels of the engine's instruction set.
 * Returns only if nothing needs doing (or exec failed).
 */
static void openblas_use_host_kernels(char **argv)
{
	const char *core = tpu_gemm_blas_coretype();

	if (tpu_gemm_blas_core_narrower())
		fprintf(stderr, "bench_engine: warning: OPENBLAS_CORETYPE=%s is set: the anchor runs %s kernels, the engine's own run avx512, so small-block ratios flatter the engine (unset it for this host's own kernels)\n",
			getenv("OPENBLAS_CORETYPE"), openblas_get_corename());
	if (!core)
		return;
	fprintf(stderr, "bench_engine: OpenBLAS picked %s with the engine's kernels at %s; running again with OPENBLAS_CORETYPE=%s\n",
		openblas_get_corename(), tpu_gemm_isa_name(), core);
	setenv("OPENBLAS_CORETYPE", core, 1);
	execv("/proc/self/exe", argv);
	perror("bench_engine: exec");
}

/* The figures: blocks (512, 1024, 1024) at 4096^3. */
static void print_headlines(const struct figures *f)
{
	printf("bench: engine_vs_openblas_f32_4096 = %.2f x\n", f->ratio[0][0]);
	/* bf16 against the same f32 anchor: OpenBLAS has no bf16 sgemm */
	printf("bench: engine_vs_openblas_bf16_4096 = %.2f x\n", f->ratio[0][1]);
	printf("bench: engine_int8_vs_f32_4096 = %.2f x\n",
	       f->ratio[0][2] / f->ratio[0][0]);
}

static bool wanted(int argc, char **argv, uint64_t size)
{
	bool yes = argc < 2;

	for (int a = 1; a < argc; a++)
		yes |= strtoull(argv[a], NULL, 0) == size;
	return yes;
}

/*
 * Arguments: the sizes to run (default all: 1024, 2048, 4096 and the
 * scaling table's 8192); the headlines need 4096.
 */
int main(int argc, char **argv)
{
	static const uint64_t sizes[] = { 1024, 2048, MAX_SIZE };
	struct bench_dev d = { 0 };
	struct figures f = { 0 };
	uint64_t hbm_side = MAX_SIZE;
	double start = now();
	bool any = false;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tpu_gemm_init();
	openblas_use_host_kernels(argv);
	if (wanted(argc, argv, MAX_SCALE_SIZE))
		hbm_side = MAX_SCALE_SIZE;
	/* every kind's x, y and z plus the anchor's output, at the largest size */
	dev_init(&d, hbm_side * hbm_side * (4 * 4 + 2 * 3 + 1 * 2 + 4));
	printf("# engine: %d cores; openblas %s; GEMM ISA %s; int8 kernel %s; median of rounds\n",
	       CORES, openblas_get_corename(), tpu_gemm_isa_name(),
	       tpu_gemm_i8_kernel());
	for (unsigned int s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		bool run = wanted(argc, argv, sizes[s]);

		if (run)
			bench_size(&d, sizes[s], &f);
		any |= run && sizes[s] == MAX_SIZE;
	}
	if (any)
		print_headlines(&f);
	for (unsigned int s = 0; s < sizeof(scale_sizes) / sizeof(scale_sizes[0]); s++)
		if (wanted(argc, argv, scale_sizes[s]))
			bench_scaling(&d, scale_sizes[s]);
	printf("bench: bench_engine_wall_time = %.1f s\n", now() - start);
	tpu_engine_destroy(d.engine);
	tpu_engine_destroy(d.engine1);
	free(d.hbm);
	return 0;
}
