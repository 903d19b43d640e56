// SPDX-License-Identifier: MIT
/*
 * tpurt-model: the modeled v5e time of a Pallas TPU matmul, from the
 * engine's timing model alone (no arithmetic, so 8192^3 is instant).
 *
 *   tpurt-model --m M --k K --n N --bm BM --bk BK --bn BN --dtype bf16
 *   tpurt-model --m M --k K --n N --dtype bf16 --best
 *   tpurt-model --table tools/v5e-published.tsv
 *   tpurt-model ... --json              (the figures as one JSON object)
 *   tpurt-model ... --trace FILE.json   (each core's timeline, Perfetto)
 *   tpurt-model --roofline FILE.svg|.png [--table tools/v5e-published.tsv]
 *
 * Figures are modeled chip time, never host wall time.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "published.h"
#include "roofline.h"
#include "tpu_model_matmul.h"
#include "tpu_trace_json.h"

static const char *const activations[] = {
	"identity", "relu", "gelu", "silu", "sigmoid", "tanh", "exp",
};

struct opts {
	struct tpu_config cfg;
	struct tpu_matmul_desc d;
	bool best;
	bool out_dtype_set;
	bool json;
	const char *table;
	const char *trace;		/* --trace FILE */
	const char *roofline;		/* --roofline FILE */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tpurt-model --m M --k K --n N (--bm BM --bk BK --bn BN | --best)\n"
		"                   [--dtype f32|bf16|int8|uint8] [--out-dtype T]\n"
		"                   [--transpose-rhs] [--activation NAME] [--cores N]\n"
		"                   [--vmem-limit BYTES] [--step-cost-ns NS] [--launch-cost-ns NS]\n"
		"                   [--json] [--trace FILE.json]\n"
		"       tpurt-model --table FILE.tsv [--json] [parameter options]\n"
		"       tpurt-model --roofline FILE.svg|FILE.png [--table FILE.tsv]\n"
		"                   [parameter options]\n");
}

static int die(const char *fmt, const char *arg)
{
	fprintf(stderr, "tpurt-model: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	return 2;
}

static int number(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 0);
	return errno || end == s || *end || s[0] == '-' ? -1 : 0;
}

static int activation(const char *name)
{
	for (size_t i = 0; i < sizeof(activations) / sizeof(*activations); i++)
		if (!strcmp(name, activations[i]))
			return strcmp(name, "identity") != 0;
	return -1;
}

enum { O_M = 256, O_K, O_N, O_BM, O_BK, O_BN, O_DTYPE, O_OUT_DTYPE,
       O_TRANSPOSE, O_ACT, O_CORES, O_BEST, O_VMEM, O_STEP, O_LAUNCH,
       O_TABLE, O_JSON, O_TRACE, O_ROOFLINE, O_HELP };

static const struct option longopts[] = {
	{ "m", required_argument, NULL, O_M },
	{ "k", required_argument, NULL, O_K },
	{ "n", required_argument, NULL, O_N },
	{ "bm", required_argument, NULL, O_BM },
	{ "bk", required_argument, NULL, O_BK },
	{ "bn", required_argument, NULL, O_BN },
	{ "dtype", required_argument, NULL, O_DTYPE },
	{ "out-dtype", required_argument, NULL, O_OUT_DTYPE },
	{ "transpose-rhs", no_argument, NULL, O_TRANSPOSE },
	{ "activation", required_argument, NULL, O_ACT },
	{ "cores", required_argument, NULL, O_CORES },
	{ "best", no_argument, NULL, O_BEST },
	{ "vmem-limit", required_argument, NULL, O_VMEM },
	{ "step-cost-ns", required_argument, NULL, O_STEP },
	{ "launch-cost-ns", required_argument, NULL, O_LAUNCH },
	{ "table", required_argument, NULL, O_TABLE },
	{ "json", no_argument, NULL, O_JSON },
	{ "trace", required_argument, NULL, O_TRACE },
	{ "roofline", required_argument, NULL, O_ROOFLINE },
	{ "help", no_argument, NULL, O_HELP },
	{ 0 },
};

/* The option's numeric target, or NULL for a non-numeric option. */
static uint64_t *numeric(struct opts *o, int c, uint64_t *scratch)
{
	switch (c) {
	case O_M: return &o->d.m;
	case O_K: return &o->d.k;
	case O_N: return &o->d.n;
	case O_BM: return &o->d.bm;
	case O_BK: return &o->d.bk;
	case O_BN: return &o->d.bn;
	case O_VMEM: return &o->cfg.vmem_limit;
	case O_STEP: return &o->cfg.step_cost_ns;
	case O_LAUNCH: return &o->cfg.launch_cost_ns;
	case O_CORES: return scratch;
	default: return NULL;
	}
}

static int parse_other(struct opts *o, int c, const char *arg)
{
	int act;

	switch (c) {
	case O_DTYPE:
		return published_dtype(arg, &o->d.in_dtype) ?
		       die("unknown dtype '%s'", arg) : 0;
	case O_OUT_DTYPE:
		o->out_dtype_set = true;
		return published_dtype(arg, &o->d.out_dtype) ?
		       die("unknown dtype '%s'", arg) : 0;
	case O_TRANSPOSE:
		o->d.transpose_rhs = true;
		return 0;
	case O_ACT:
		act = activation(arg);
		if (act < 0)
			return die("unknown activation '%s' (identity relu "
				   "gelu silu sigmoid tanh exp)", arg);
		o->d.activation = act;
		return 0;
	case O_BEST:
		o->best = true;
		return 0;
	case O_TABLE:
		o->table = arg;
		return 0;
	case O_JSON:
		o->json = true;
		return 0;
	case O_TRACE:
		o->trace = arg;
		return 0;
	case O_ROOFLINE:
		o->roofline = arg;
		return 0;
	case O_HELP:
		usage(stdout);
		exit(0);
	default:
		usage(stderr);
		return 2;
	}
}

static int parse(struct opts *o, int argc, char **argv)
{
	uint64_t cores = 0, *num;
	int c, ret;

	tpu_config_defaults(&o->cfg);
	o->d.in_dtype = TPU_DTYPE_BF16;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		num = numeric(o, c, &cores);
		if (num)
			ret = number(optarg, num) ? die("bad number '%s'", optarg) : 0;
		else
			ret = parse_other(o, c, optarg);
		if (ret)
			return ret;
	}
	if (optind < argc)
		return die("unexpected argument '%s'", argv[optind]);
	if (cores) {
		o->cfg.cores = cores > TPU_MAX_CORES ? TPU_MAX_CORES + 1 : cores;
		o->d.cores = o->cfg.cores;
	}
	if (!o->out_dtype_set)
		o->d.out_dtype = o->d.in_dtype;	/* as the guide's out_shape */
	return 0;
}

static double peak(const struct tpu_config *cfg, enum tpu_dtype t)
{
	if (t == TPU_DTYPE_INT8 || t == TPU_DTYPE_UINT8)
		return (double)cfg->peak_ops_int8;
	if (t == TPU_DTYPE_BF16)
		return (double)cfg->peak_flops_bf16;
	return (double)cfg->peak_flops_f32;
}

/* Of the peak of the cores that run: each TensorCore has its own MXUs. */
static double utilization(const struct tpu_config *cfg,
			  const struct tpu_matmul_desc *d, double time_s)
{
	double chip = peak(cfg, d->in_dtype) * (d->cores ? d->cores : cfg->cores);

	return 2.0 * d->m * d->n * d->k / time_s / chip * 100;
}

static void report(const struct opts *o, const struct tpu_matmul_desc *d,
		   const struct tpu_matmul_result *r)
{
	const struct tpu_model_stats *s = &r->stats;

	printf("model: %llu x %llu x %llu %s -> %s, "
	       "blocks (bm, bk, bn) = (%llu, %llu, %llu)%s%s\n",
	       (unsigned long long)d->m, (unsigned long long)d->k,
	       (unsigned long long)d->n, published_dtype_name(d->in_dtype),
	       published_dtype_name(d->out_dtype), (unsigned long long)d->bm,
	       (unsigned long long)d->bk, (unsigned long long)d->bn,
	       d->transpose_rhs ? ", transposed rhs" : "",
	       d->activation ? ", fused activation" : "");
	printf("model: grid (i, j, k) = (%llu, %llu, %llu), %llu steps on %u core(s)\n",
	       (unsigned long long)r->grid[0], (unsigned long long)r->grid[1],
	       (unsigned long long)r->grid[2], (unsigned long long)s->steps,
	       r->cores);
	printf("model: VMEM need %llu bytes of a %llu-byte limit\n",
	       (unsigned long long)r->vmem_bytes,
	       (unsigned long long)o->cfg.vmem_limit);
	printf("model: blocks fetched %llu, skipped %llu, written back %llu\n",
	       (unsigned long long)r->blocks_fetched,
	       (unsigned long long)r->blocks_skipped,
	       (unsigned long long)r->blocks_written);
	printf("model: HBM bytes in %llu, out %llu\n",
	       (unsigned long long)s->hbm_bytes_in,
	       (unsigned long long)s->hbm_bytes_out);
	printf("model: MXU busy %.6g s, DMA busy %.6g s, bubbles %.6g s (over cores)\n",
	       s->mxu_busy_s, s->dma_busy_s, s->bubble_s);
	printf("model: fixed costs %llu ns per step, %.6g s per launch\n",
	       (unsigned long long)o->cfg.step_cost_ns,
	       o->cfg.launch_cost_ns * 1e-9);
	printf("bench: modeled_time_s = %.9g s\n", s->time_s);
	printf("bench: modeled_utilization = %.4f %%\n",
	       utilization(&o->cfg, d, s->time_s));
}

/*
 * The figures as one JSON object, named and rounded as a job's statistics
 * (struct tpurt_job_stats) name them, times in picoseconds.
 */
static void report_json(const struct opts *o, const struct tpu_matmul_desc *d,
			const struct tpu_matmul_result *r)
{
	const struct tpu_model_stats *s = &r->stats;

	printf("{\"m\": %llu, \"k\": %llu, \"n\": %llu, "
	       "\"bm\": %llu, \"bk\": %llu, \"bn\": %llu, "
	       "\"dtype\": \"%s\", \"out_dtype\": \"%s\", "
	       "\"transpose_rhs\": %s, \"activation\": %s, \"best\": %s,\n",
	       (unsigned long long)d->m, (unsigned long long)d->k,
	       (unsigned long long)d->n, (unsigned long long)d->bm,
	       (unsigned long long)d->bk, (unsigned long long)d->bn,
	       published_dtype_name(d->in_dtype),
	       published_dtype_name(d->out_dtype),
	       d->transpose_rhs ? "true" : "false",
	       d->activation ? "true" : "false", o->best ? "true" : "false");
	printf(" \"grid\": [%llu, %llu, %llu], \"steps\": %llu, \"cores_used\": %u, "
	       "\"vmem_bytes\": %llu, \"vmem_limit\": %llu,\n",
	       (unsigned long long)r->grid[0], (unsigned long long)r->grid[1],
	       (unsigned long long)r->grid[2], (unsigned long long)s->steps,
	       r->cores, (unsigned long long)r->vmem_bytes,
	       (unsigned long long)o->cfg.vmem_limit);
	printf(" \"blocks_fetched\": %llu, \"blocks_skipped\": %llu, "
	       "\"blocks_written\": %llu, \"hbm_bytes_in\": %llu, "
	       "\"hbm_bytes_out\": %llu, \"flops\": %llu,\n",
	       (unsigned long long)r->blocks_fetched,
	       (unsigned long long)r->blocks_skipped,
	       (unsigned long long)r->blocks_written,
	       (unsigned long long)s->hbm_bytes_in,
	       (unsigned long long)s->hbm_bytes_out,
	       (unsigned long long)s->flops);
	printf(" \"model_time_ps\": %llu, \"model_mxu_busy_ps\": %llu, "
	       "\"model_vpu_busy_ps\": %llu, \"model_eup_busy_ps\": %llu, "
	       "\"model_dma_busy_ps\": %llu, \"model_bubble_ps\": %llu,\n",
	       (unsigned long long)tpu_trace_ps(s->time_s),
	       (unsigned long long)tpu_trace_ps(s->mxu_busy_s),
	       (unsigned long long)tpu_trace_ps(s->vpu_busy_s),
	       (unsigned long long)tpu_trace_ps(s->eup_busy_s),
	       (unsigned long long)tpu_trace_ps(s->dma_busy_s),
	       (unsigned long long)tpu_trace_ps(s->bubble_s));
	printf(" \"model_time_s\": %.9g, \"utilization_pct\": %.4f, "
	       "\"step_cost_ns\": %llu, \"launch_cost_ns\": %llu}\n",
	       s->time_s, utilization(&o->cfg, d, s->time_s),
	       (unsigned long long)o->cfg.step_cost_ns,
	       (unsigned long long)o->cfg.launch_cost_ns);
}

static int write_trace(const struct opts *o, const struct tpu_trace_log *log,
		       const struct tpu_matmul_result *r)
{
	const struct tpu_matmul_desc *d = &o->d;
	struct tpu_trace_json j;
	char name[128];
	struct tpu_trace_job job = {
		.name = name, .model = &r->stats,
		.launch_ps = tpu_trace_ps((double)o->cfg.launch_cost_ns * 1e-9),
	};
	int ret = tpu_trace_json_open(&j, o->trace);

	if (ret) {
		fprintf(stderr, "tpurt-model: --trace %s: %s\n", o->trace,
			strerror(-ret));
		return 1;
	}
	snprintf(name, sizeof(name), "matmul %llu x %llu x %llu %s, blocks (%llu, %llu, %llu)",
		 (unsigned long long)d->m, (unsigned long long)d->k,
		 (unsigned long long)d->n, published_dtype_name(d->in_dtype),
		 (unsigned long long)d->bm, (unsigned long long)d->bk,
		 (unsigned long long)d->bn);
	tpu_trace_json_job(&j, log, &job);
	ret = tpu_trace_json_close(&j);
	if (ret || tpu_trace_log_lost(log)) {
		fprintf(stderr, "tpurt-model: --trace %s: %s\n", o->trace,
			ret ? strerror(-ret) : "out of memory, trace incomplete");
		return 1;
	}
	return 0;
}

static int vmem_fits(const struct opts *o)
{
	uint64_t need = tpu_model_matmul_vmem(&o->d);

	if (need <= o->cfg.vmem_limit)
		return 1;
	fprintf(stderr,
		"tpurt-model: VMEM need %llu bytes exceeds the limit %llu by %llu\n",
		(unsigned long long)need, (unsigned long long)o->cfg.vmem_limit,
		(unsigned long long)(need - o->cfg.vmem_limit));
	return 0;
}

/* Model the job; traced, when asked, with the blocks --best chose. */
static int model_job(struct opts *o, struct tpu_trace_log *log,
		     struct tpu_matmul_result *r)
{
	int ret = 0;

	if (o->best) {
		ret = tpu_model_matmul_best(&o->cfg, &o->d, o->cfg.vmem_limit, r);
		if (ret == -ENOSPC)
			return die("no block choice fits the VMEM limit%s", "");
	} else if (!vmem_fits(o)) {
		return 1;
	}
	if (!ret && (!o->best || o->trace)) {
		o->d.trace = o->trace ? &log->sink : NULL;
		ret = tpu_model_matmul(&o->cfg, &o->d, r);
		o->d.trace = NULL;
	}
	if (ret) {
		usage(stderr);
		return die("invalid shape, blocks, dtypes or cores%s", "");
	}
	return 0;
}

static int run_one(struct opts *o)
{
	struct tpu_matmul_result r;
	struct tpu_trace_log log;
	int ret;

	tpu_trace_log_init(&log);
	ret = model_job(o, &log, &r);
	if (!ret && o->trace)
		ret = write_trace(o, &log, &r);
	tpu_trace_log_free(&log);
	if (ret)
		return ret;
	if (o->json) {
		report_json(o, &o->d, &r);
		return 0;
	}
	if (o->best)
		printf("best: bm = %llu, bk = %llu, bn = %llu\n",
		       (unsigned long long)o->d.bm, (unsigned long long)o->d.bk,
		       (unsigned long long)o->d.bn);
	report(o, &o->d, &r);
	return 0;
}

#define TABLE_TOLERANCE_PCT	15.0

/* Model one published row; 'xla' rows (no blocks) take the best choice. */
static int model_row(const struct opts *o, const struct published_row *p,
		     struct tpu_matmul_desc *d, struct tpu_matmul_result *r)
{
	*d = (struct tpu_matmul_desc){
		.m = p->m, .k = p->k, .n = p->n,
		.bm = p->bm, .bk = p->bk, .bn = p->bn,
		.in_dtype = p->dtype, .out_dtype = p->dtype,
		.cores = o->cfg.cores,
	};
	if (!p->bm)
		return tpu_model_matmul_best(&o->cfg, d, o->cfg.vmem_limit, r);
	return tpu_model_matmul(&o->cfg, d, r);
}

static void table_header(const struct opts *o)
{
	if (o->json) {
		printf("{\"rows\": [\n");
		return;
	}
	printf("model: step cost %llu ns, launch cost %llu ns, HBM %llu B/s, "
	       "VMEM limit %llu bytes\n",
	       (unsigned long long)o->cfg.step_cost_ns,
	       (unsigned long long)o->cfg.launch_cost_ns,
	       (unsigned long long)o->cfg.hbm_bandwidth,
	       (unsigned long long)o->cfg.vmem_limit);
	printf("%-7s %-22s %6s %6s %13s %13s %9s %9s %8s\n", "kernel",
	       "blocks (bm, bk, bn)", "m=k=n", "dtype", "published s",
	       "model s", "pub util", "mod util", "error");
}

static void table_row(const struct opts *o, const struct published_row *p,
		      const struct tpu_matmul_desc *d,
		      const struct tpu_matmul_result *r, double e, bool last)
{
	char blocks[48];

	if (o->json) {
		printf(" {\"kernel\": \"%s\", \"bm\": %llu, \"bk\": %llu, "
		       "\"bn\": %llu, \"best\": %s, \"m\": %llu, \"k\": %llu, "
		       "\"n\": %llu, \"dtype\": \"%s\", \"published_s\": %.9g, "
		       "\"model_s\": %.9g, \"published_util_pct\": %.4f, "
		       "\"model_util_pct\": %.4f, \"error_pct\": %.4f}%s\n",
		       p->kernel, (unsigned long long)d->bm,
		       (unsigned long long)d->bk, (unsigned long long)d->bn,
		       p->bm ? "false" : "true", (unsigned long long)p->m,
		       (unsigned long long)p->k, (unsigned long long)p->n,
		       published_dtype_name(p->dtype), p->time_s,
		       r->stats.time_s, p->util_pct,
		       utilization(&o->cfg, d, r->stats.time_s), e,
		       last ? "" : ",");
		return;
	}
	snprintf(blocks, sizeof(blocks), "%s%llu, %llu, %llu",
		 p->bm ? "" : "best ", (unsigned long long)d->bm,
		 (unsigned long long)d->bk, (unsigned long long)d->bn);
	printf("%-7s %-22s %6llu %6s %13.6e %13.6e %8.3f%% %8.3f%% %+7.2f%%\n",
	       p->kernel, blocks, (unsigned long long)p->m,
	       published_dtype_name(p->dtype), p->time_s,
	       r->stats.time_s, p->util_pct,
	       utilization(&o->cfg, d, r->stats.time_s), e);
}

static int run_table(const struct opts *o)
{
	struct published_row rows[PUBLISHED_MAX_ROWS];
	char err[256];
	double max_err = 0;
	int n = published_load(o->table, rows, PUBLISHED_MAX_ROWS, err,
			       sizeof(err));

	if (n < 0)
		return die("%s", err);
	table_header(o);
	for (int i = 0; i < n; i++) {
		const struct published_row *p = &rows[i];
		struct tpu_matmul_desc d;
		struct tpu_matmul_result r;
		double e;

		if (model_row(o, p, &d, &r))
			return die("row %s: no valid block choice", p->kernel);
		e = (r.stats.time_s - p->time_s) / p->time_s * 100;
		if (p->bm && fabs(e) > max_err)
			max_err = fabs(e);
		table_row(o, p, &d, &r, e, i == n - 1);
	}
	if (o->json)
		printf("], \"max_error_pct\": %.4f, \"tolerance_pct\": %.0f}\n",
		       max_err, TABLE_TOLERANCE_PCT);
	else
		printf("model-table: max |error| over the Pallas rows = %.2f %% (tolerance %.0f %%)\n",
		       max_err, TABLE_TOLERANCE_PCT);
	return max_err <= TABLE_TOLERANCE_PCT ? 0 : 1;
}

/* --- the roofline: the published rows, the model's, a block sweep --- */

#define SWEEP_BLOCKS	4	/* 128, 256, 512, 1024 along each dimension */
#define SWEEP_SIZES	3	/* m = k = n = 1024, 4096, 8192 */
#define SWEEP_MAX	(SWEEP_SIZES * SWEEP_BLOCKS * SWEEP_BLOCKS * SWEEP_BLOCKS)

static struct roofline_point point(const struct tpu_matmul_desc *d,
				   const struct tpu_matmul_result *r,
				   double time_s)
{
	double flops = 2.0 * d->m * d->n * d->k;
	uint64_t bytes = r->stats.hbm_bytes_in + r->stats.hbm_bytes_out;

	return (struct roofline_point){ flops / (double)bytes, flops / time_s,
					"" };
}

/* The guide's sweep: every (bm, bk, bn) of 128..1024 that fits VMEM, bf16. */
static int sweep(const struct opts *o, struct roofline_point *pts)
{
	static const uint64_t sizes[SWEEP_SIZES] = { 1024, 4096, 8192 };
	struct tpu_matmul_result r;
	int n = 0;

	for (int s = 0; s < SWEEP_SIZES; s++)
		for (int i = 0; i < SWEEP_BLOCKS * SWEEP_BLOCKS * SWEEP_BLOCKS; i++) {
			struct tpu_matmul_desc d = {
				.m = sizes[s], .k = sizes[s], .n = sizes[s],
				.bm = 128ull << (i % SWEEP_BLOCKS),
				.bk = 128ull << (i / SWEEP_BLOCKS % SWEEP_BLOCKS),
				.bn = 128ull << (i / SWEEP_BLOCKS / SWEEP_BLOCKS),
				.in_dtype = TPU_DTYPE_BF16,
				.out_dtype = TPU_DTYPE_BF16,
				.cores = o->cfg.cores,
			};

			if (tpu_model_matmul_vmem(&d) > o->cfg.vmem_limit ||
			    tpu_model_matmul(&o->cfg, &d, &r))
				continue;
			pts[n++] = point(&d, &r, r.stats.time_s);
		}
	return n;
}

static int run_roofline(const struct opts *o)
{
	static struct roofline_point sweep_pts[SWEEP_MAX];
	struct roofline_point pub[PUBLISHED_MAX_ROWS], mod[PUBLISHED_MAX_ROWS];
	struct published_row rows[PUBLISHED_MAX_ROWS];
	struct roofline_set sets[3] = {
		{ "model: blocks 128..1024 at 1024, 4096, 8192 (bf16)",
		  1, sweep_pts, sweep(o, sweep_pts) },
		{ "published v5e (the guide)", 7, pub, 0 },
		{ "model, the same rows", 6, mod, 0 },
	};
	char err[256];
	int n = 0;

	if (o->table) {
		n = published_load(o->table, rows, PUBLISHED_MAX_ROWS, err,
				   sizeof(err));
		if (n < 0)
			return die("%s", err);
	}
	for (int i = 0; i < n; i++) {
		struct tpu_matmul_desc d;
		struct tpu_matmul_result r;

		if (model_row(o, &rows[i], &d, &r))
			return die("row %s: no valid block choice", rows[i].kernel);
		pub[i] = point(&d, &r, rows[i].time_s);
		mod[i] = point(&d, &r, r.stats.time_s);
		snprintf(pub[i].label, sizeof(pub[i].label), "%.15s %llu/%llu/%llu @%llu",
			 rows[i].kernel, (unsigned long long)d.bm,
			 (unsigned long long)d.bk, (unsigned long long)d.bn,
			 (unsigned long long)d.m);
	}
	sets[1].n = sets[2].n = n;
	if (roofline_plot(&o->cfg, sets, n ? 3 : 1, o->roofline, err, sizeof(err)))
		return die("%s", err);
	printf("roofline: %s: %d sweep points, %d published rows\n",
	       o->roofline, sets[0].n, n);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	char err[256];
	int ret = parse(&o, argc, argv);

	if (ret)
		return ret;
	if (tpu_config_check(&o.cfg, err, sizeof(err)))
		return die("%s", err);
	if (o.roofline)
		return run_roofline(&o);
	if (o.table)
		return run_table(&o);
	if (!o.d.m || !o.d.k || !o.d.n ||
	    (!o.best && (!o.d.bm || !o.d.bk || !o.d.bn))) {
		usage(stderr);
		return 2;
	}
	return run_one(&o);
}
