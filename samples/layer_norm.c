// SPDX-License-Identifier: MIT
/*
 * Layer normalisation of each row, as a Pallas kernel over blocks of rows,
 * grid (cdiv(rows, br),); gamma and beta are (1, cols) blocks that every
 * step shares (fetched once):
 *
 *   def layer_norm_kernel(x_ref, gamma, beta, o_ref):
 *     x = x_ref[...].astype(jnp.float32)
 *     mean = jnp.sum(x, axis=1, keepdims=True) / cols
 *     xc = x - mean
 *     var = jnp.sum(xc * xc, axis=1, keepdims=True) / cols
 *     y = xc * lax.rsqrt(var + eps) * gamma[...] + beta[...]
 *     o_ref[...] = y.astype(o_ref.dtype)
 *
 * f32 and bf16 (computed in f32), whole blocks and an edge block. Rows have
 * a mean far from 0, where var = E[x^2] - mean^2 would lose digits; the
 * kernel centres first. Checked against a double-precision reference of
 * the same (rounded) inputs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "sample_util.h"

#define NAME "layer_norm"
#define EPS 1e-5

static const struct sample_rows_case cases[] = {
	{ TPURT_F32, 1024, 512, 128 },
	{ TPURT_BF16, 1024, 512, 128 },
	{ TPURT_F32, 1000, 768, 64 },	/* edge block: 1000 = 15 * 64 + 40 */
	{ TPURT_BF16, 1000, 768, 64 },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* The kernel, with the row length written in as Python would bake it in. */
static int build_kernel(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
			int64_t cols)
{
	char text[512];

	snprintf(text, sizeof(text),
		 "x = x_ref[...].astype(jnp.float32)\n"
		 "mean = jnp.sum(x, axis=1, keepdims=True) / %lld.0\n"
		 "xc = x - mean\n"
		 "var = jnp.sum(xc * xc, axis=1, keepdims=True) / %lld.0\n"
		 "y = xc * lax.rsqrt(var + %g) * gamma[...] + beta[...]\n"
		 "o_ref[...] = y.astype(o_ref.dtype)\n",
		 (long long)cols, (long long)cols, EPS);
	return tpurt_kernel_stmts(k, gs, text);
}

static struct tpurt_grid_spec *layer_norm_spec(const struct sample_rows_case *c)
{
	int64_t grid[1] = { (c->rows + c->br - 1) / c->br };
	struct tpurt_block_spec xs = { 2, { c->br, c->cols }, "i -> i, 0" };
	struct tpurt_block_spec ps = { 2, { 1, c->cols }, "i -> 0, 0" };
	static const char *const names[] = { "x_ref", "gamma", "beta", "o_ref" };
	struct tpurt_grid_spec *gs;
	int ret;

	if (tpurt_grid_spec_create(1, grid, &gs))
		return NULL;
	ret = tpurt_grid_spec_add_input(gs, "x_ref", &xs) ||
	      tpurt_grid_spec_add_input(gs, "gamma", &ps) ||
	      tpurt_grid_spec_add_input(gs, "beta", &ps) ||
	      tpurt_grid_spec_add_output(gs, "o_ref", &xs);
	for (int i = 0; !ret && i < 4; i++)
		ret = tpurt_grid_spec_set_dtype(gs, names[i], c->dtype);
	if (ret) {
		tpurt_grid_spec_free(gs);
		return NULL;
	}
	return gs;
}

/* Values @offset + @scale * u, u uniform in [-1, 1). */
static float *values(int64_t n, float offset, float scale, uint32_t seed)
{
	float *v = malloc(n * sizeof(float));

	if (!v)
		return NULL;
	sample_fill(v, TPURT_F32, n, seed);
	for (int64_t i = 0; i < n; i++)
		v[i] = offset + scale * v[i];
	return v;
}

/* (x - mean) / sqrt(var + eps) * gamma + beta per row, in double. */
static double *reference(const void *x, const void *gamma, const void *beta,
			 enum tpurt_dtype t, int64_t rows, int64_t cols)
{
	double *want = malloc(rows * cols * sizeof(double));
	double *g = malloc(2 * cols * sizeof(double)), *b = g + cols;

	if (!want || !g) {
		free(want), free(g);
		return NULL;
	}
	sample_get_run(gamma, t, 0, cols, g);
	sample_get_run(beta, t, 0, cols, b);
	for (int64_t r = 0; r < rows; r++) {
		double *row = want + r * cols, mean = 0, var = 0, inv;

		sample_get_run(x, t, r * cols, cols, row);
		for (int64_t c = 0; c < cols; c++)
			mean += row[c];
		mean /= cols;
		for (int64_t c = 0; c < cols; c++) {
			double d = row[c] - mean;

			var += d * d;
		}
		inv = 1 / sqrt(var / cols + EPS);
		for (int64_t c = 0; c < cols; c++)
			row[c] = (row[c] - mean) * inv * g[c] + b[c];
	}
	free(g);
	return want;
}

static bool run_case(struct tpurt_device *dev,
		     const struct tpurt_device_info *info, size_t i)
{
	const struct sample_rows_case *c = &cases[i];
	const struct tpurt_compiler_params params = {
		.dimension_semantics = "parallel",
	};
	int64_t shape[2] = { c->rows, c->cols }, pshape[2] = { 1, c->cols };
	struct tpurt_array *x = NULL, *g = NULL, *b = NULL, *o = NULL;
	struct tpurt_grid_spec *gs = layer_norm_spec(c);
	float *vx = values(c->rows * c->cols, 3.0f, 2.0f, 21);
	float *vg = values(c->cols, 1.0f, 0.5f, 22);
	float *vb = values(c->cols, 0.0f, 0.1f, 23);
	void *hx = NULL, *hg = NULL, *hb = NULL, *ho = NULL;
	struct tpurt_kernel *k = NULL;
	struct tpurt_job_stats st;
	double *want = NULL;
	bool ok = false;

	printf("%s: %s (%lld, %lld), blocks of %lld rows\n", NAME,
	       tpurt_dtype_name(c->dtype), (long long)c->rows,
	       (long long)c->cols, (long long)c->br);
	if (!gs || !vx || !vg || !vb || tpurt_kernel_create(&k) ||
	    build_kernel(k, gs, c->cols)) {
		printf("  kernel: %s\n", tpurt_last_error());
		goto out;
	}
	x = sample_array_of(dev, c->dtype, 2, shape, vx, &hx);
	g = sample_array_of(dev, c->dtype, 2, pshape, vg, &hg);
	b = sample_array_of(dev, c->dtype, 2, pshape, vb, &hb);
	if (!x || !g || !b || tpurt_array_create(dev, c->dtype, 2, shape, &o) ||
	    tpurt_pallas_call(k, gs, &params,
			      (struct tpurt_array *[]){ x, g, b, o }, 4, &st) ||
	    !(ho = sample_read(o))) {
		printf("  run: %s\n", tpurt_last_error());
		goto out;
	}
	printf("  host wall %.6f s | modeled v5e %.3f us, %llu steps\n",
	       st.call_wall_ns * 1e-9, st.model_time_ps * 1e-6,
	       (unsigned long long)st.steps);
	want = reference(hx, hg, hb, c->dtype, c->rows, c->cols);
	ok = want && (c->dtype == TPURT_BF16 ?
		      sample_check_close("o", ho, c->dtype, want,
					 c->rows * c->cols, 1e-3, 8e-3) :
		      sample_check_close("o", ho, c->dtype, want,
					 c->rows * c->cols, 5e-6, 1e-5));
out:
	free(vx), free(vg), free(vb), free(want);
	free(hx), free(hg), free(hb), free(ho);
	tpurt_array_free(x), tpurt_array_free(g);
	tpurt_array_free(b), tpurt_array_free(o);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	return ok;
}

int main(void)
{
	return sample_run_cases(NAME, NCASES, run_case);
}
