// SPDX-License-Identifier: MIT
#include "tpu_model_matmul.h"

#include "tpu_dtype.h"

#include <errno.h>
#include <string.h>

/* The MXU routines: f32/bf16 -> f32 and 8-bit -> int32, then a cast. */
static bool dtypes_ok(enum tpu_dtype in, enum tpu_dtype out)
{
	if (in == TPU_DTYPE_F32 || in == TPU_DTYPE_BF16)
		return out == TPU_DTYPE_F32 || out == TPU_DTYPE_BF16;
	if (tpu_dtype_is_8bit(in))
		return tpu_dtype_is_8bit(out) || out == TPU_DTYPE_INT32;
	return false;
}

static uint64_t cdiv(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

/* Elements of block @idx of size @b that lie inside a dimension of @dim. */
static uint64_t clip(uint64_t idx, uint64_t b, uint64_t dim)
{
	uint64_t start = idx * b;

	return dim - start < b ? dim - start : b;
}

uint64_t tpu_model_matmul_vmem(const struct tpu_matmul_desc *d)
{
	uint64_t in = tpu_dtype_size(d->in_dtype);
	uint64_t out = tpu_dtype_size(d->out_dtype);
	uint64_t blocks = d->bm * d->bk * in + d->bk * d->bn * in +
			  d->bm * d->bn * out;

	/* The accumulator is f32 or int32: 4 bytes either way. */
	return 2 * blocks + d->bm * d->bn * 4;
}

/* One core's walk: the block indices it last fetched, for skipping. */
struct walk {
	const struct tpu_config *cfg;
	const struct tpu_matmul_desc *d;
	struct tpu_matmul_result *res;
	struct tpu_model model;
	bool have_prev;
	uint64_t x_prev[2], y_prev[2];
};

/* Bytes of an (r x c) block of the input dtype if its index changed. */
static uint64_t fetch(struct walk *w, uint64_t prev[2], uint64_t a,
		      uint64_t b, uint64_t elems)
{
	if (w->have_prev && prev[0] == a && prev[1] == b) {
		w->res->blocks_skipped++;
		return 0;
	}
	prev[0] = a;
	prev[1] = b;
	w->res->blocks_fetched++;
	return elems * tpu_dtype_size(w->d->in_dtype);
}

static void walk_step(struct walk *w, uint64_t i, uint64_t j, uint64_t kk)
{
	const struct tpu_matmul_desc *d = w->d;
	uint64_t rows = clip(i, d->bm, d->m), cols = clip(j, d->bn, d->n);
	uint64_t depth = clip(kk, d->bk, d->k);
	uint64_t bytes = fetch(w, w->x_prev, i, kk, rows * depth);
	uint64_t wb = 0;

	/* y's index is (k, j) or (j, k): either way it changes with k or j. */
	bytes += fetch(w, w->y_prev, kk, j, depth * cols);
	w->have_prev = true;
	/* z's index (i, j) changes after the last k step, or the core ends. */
	if (kk == w->res->grid[2] - 1) {
		wb = rows * cols * tpu_dtype_size(d->out_dtype);
		w->res->blocks_written++;
	}
	tpu_model_step(&w->model, bytes,
		       tpu_model_dot_s(w->cfg, d->in_dtype, d->bm, d->bn, d->bk),
		       2 * rows * cols * depth, wb);
}

static void walk_core(struct walk *w, unsigned int core, uint64_t begin,
		      uint64_t end, struct tpu_model_stats *out)
{
	uint64_t gn = w->res->grid[1], gk = w->res->grid[2];

	tpu_model_begin(&w->model, w->cfg);
	tpu_model_trace(&w->model, w->d->trace, core);
	w->have_prev = false;
	for (uint64_t p = begin; p < end; p++)
		for (uint64_t kk = 0; kk < gk; kk++)
			walk_step(w, p / gn, p % gn, kk);
	tpu_model_end(&w->model, out);
}

static int check_desc(const struct tpu_config *cfg,
		      const struct tpu_matmul_desc *d, unsigned int cores)
{
	if (!d->m || !d->k || !d->n || !d->bm || !d->bk || !d->bn)
		return -EINVAL;
	if (cores < 1 || cores > cfg->cores || cores > TPU_MAX_CORES)
		return -EINVAL;
	if (!dtypes_ok(d->in_dtype, d->out_dtype))
		return -EINVAL;
	return 0;
}

int tpu_model_matmul(const struct tpu_config *cfg,
		     const struct tpu_matmul_desc *d,
		     struct tpu_matmul_result *res)
{
	struct tpu_model_stats per_core[TPU_MAX_CORES];
	unsigned int cores = d->cores ? d->cores : cfg->cores;
	struct walk w = { .cfg = cfg, .d = d, .res = res };
	uint64_t units;
	int ret = check_desc(cfg, d, cores);

	if (ret)
		return ret;
	memset(res, 0, sizeof(*res));
	res->grid[0] = cdiv(d->m, d->bm);
	res->grid[1] = cdiv(d->n, d->bn);
	res->grid[2] = cdiv(d->k, d->bk);
	res->vmem_bytes = tpu_model_matmul_vmem(d);
	/* (i, j) are parallel and split across cores; k stays on one core. */
	units = res->grid[0] * res->grid[1];
	for (unsigned int c = 0; c < cores; c++) {
		uint64_t begin, end;

		tpu_model_core_range(units, cores, c, &begin, &end);
		walk_core(&w, c, begin, end, &per_core[c]);
		if (end > begin)
			res->cores++;
	}
	tpu_model_job(cfg, per_core, cores, &res->stats);
	return 0;
}

/*
 * Block sizes worth trying along a dimension of @dim: the whole dimension
 * (always a legal block), and multiples of the MXU size that are powers of
 * two or divide @dim (no edge blocks). Returns how many, at most @max.
 */
static int candidates(uint64_t dim, uint64_t unit, uint64_t *out, int max)
{
	int n = 0;

	out[n++] = dim;
	for (uint64_t b = unit; b < dim && n < max; b += unit) {
		bool pow2 = !((b / unit) & (b / unit - 1));

		if (pow2 || dim % b == 0)
			out[n++] = b;
	}
	return n;
}

#define MAX_CANDIDATES	32

int tpu_model_matmul_best(const struct tpu_config *cfg,
			  struct tpu_matmul_desc *d, uint64_t vmem_limit,
			  struct tpu_matmul_result *res)
{
	uint64_t cm[MAX_CANDIDATES], ck[MAX_CANDIDATES], cn[MAX_CANDIDATES];
	int nm = candidates(d->m, cfg->mxu_dim, cm, MAX_CANDIDATES);
	int nk = candidates(d->k, cfg->mxu_dim, ck, MAX_CANDIDATES);
	int nn = candidates(d->n, cfg->mxu_dim, cn, MAX_CANDIDATES);
	struct tpu_matmul_desc best = *d, t = *d;
	struct tpu_matmul_result r;
	bool found = false;

	t.bm = t.bk = t.bn = 1;
	t.trace = NULL;		/* the candidates are not the job */
	if (check_desc(cfg, &t, d->cores ? d->cores : cfg->cores))
		return -EINVAL;
	for (int a = 0; a < nm; a++)
		for (int b = 0; b < nk; b++)
			for (int c = 0; c < nn; c++) {
				t.bm = cm[a];
				t.bk = ck[b];
				t.bn = cn[c];
				if (tpu_model_matmul_vmem(&t) > vmem_limit ||
				    tpu_model_matmul(cfg, &t, &r))
					continue;
				if (!found || r.stats.time_s < res->stats.time_s) {
					best = t;
					*res = r;
					found = true;
				}
			}
	if (!found)
		return -ENOSPC;
	best.trace = d->trace;
	*d = best;
	return 0;
}
