// SPDX-License-Identifier: MIT
/*
 * A numerically stable row softmax as a Pallas kernel over blocks of rows,
 * grid (cdiv(rows, br),), BlockSpec((br, cols), lambda i: (i, 0)):
 *
 *   def softmax_kernel(x_ref, o_ref):
 *     x = x_ref[...].astype(jnp.float32)
 *     m = jnp.max(x, axis=1, keepdims=True)
 *     e = jnp.exp(x - m)
 *     o_ref[...] = (e / jnp.sum(e, axis=1, keepdims=True)).astype(o_ref.dtype)
 *
 * Logits reach +-1e4, where exp(x) alone overflows: subtracting the row's
 * max keeps every exponent <= 0. f32 and bf16 (computed in f32), whole
 * blocks and an edge block (rows not a multiple of br: the padding rows
 * are computed and never written back). Checked against a double-precision
 * softmax of the same (rounded) inputs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "sample_util.h"

#define NAME "softmax"

static const char kernel_text[] =
	"x = x_ref[...].astype(jnp.float32)\n"
	"m = jnp.max(x, axis=1, keepdims=True)\n"
	"e = jnp.exp(x - m)\n"
	"o_ref[...] = (e / jnp.sum(e, axis=1, keepdims=True)).astype(o_ref.dtype)\n";

struct softmax_case {
	enum tpurt_dtype dtype;
	int64_t rows, cols, br;
};

static const struct softmax_case cases[] = {
	{ TPURT_F32, 1024, 512, 128 },
	{ TPURT_BF16, 1024, 512, 128 },
	{ TPURT_F32, 1000, 384, 128 },	/* edge block: 1000 = 7 * 128 + 104 */
	{ TPURT_BF16, 1000, 384, 128 },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* Rows of three kinds: logits up to +-1e4, up to +-30, up to +-1. */
static float *logits(int64_t rows, int64_t cols)
{
	static const float scale[] = { 1e4f, 30.0f, 1.0f };
	float *v = malloc(rows * cols * sizeof(float));

	if (!v)
		return NULL;
	sample_fill(v, TPURT_F32, rows * cols, 11);
	for (int64_t r = 0; r < rows; r++)
		for (int64_t c = 0; c < cols; c++)
			v[r * cols + c] *= scale[r % 3];
	return v;
}

/* The softmax of each row of @x (as stored, @dtype), in double. */
static double *reference(const void *x, enum tpurt_dtype dtype, int64_t rows,
			 int64_t cols)
{
	double *want = malloc(rows * cols * sizeof(double));

	for (int64_t r = 0; want && r < rows; r++) {
		double m = -INFINITY, sum = 0;
		double *w = want + r * cols;

		for (int64_t c = 0; c < cols; c++)
			m = fmax(m, sample_get(x, dtype, r * cols + c));
		for (int64_t c = 0; c < cols; c++) {
			w[c] = exp(sample_get(x, dtype, r * cols + c) - m);
			sum += w[c];
		}
		for (int64_t c = 0; c < cols; c++)
			w[c] /= sum;
	}
	return want;
}

static struct tpurt_grid_spec *softmax_spec(const struct softmax_case *c)
{
	int64_t grid[1] = { (c->rows + c->br - 1) / c->br };
	struct tpurt_block_spec bs = { 2, { c->br, c->cols }, "i -> i, 0" };
	struct tpurt_grid_spec *gs;

	if (tpurt_grid_spec_create(1, grid, &gs))
		return NULL;
	if (tpurt_grid_spec_add_input(gs, "x_ref", &bs) ||
	    tpurt_grid_spec_add_output(gs, "o_ref", &bs) ||
	    tpurt_grid_spec_set_dtype(gs, "x_ref", c->dtype) ||
	    tpurt_grid_spec_set_dtype(gs, "o_ref", c->dtype)) {
		tpurt_grid_spec_free(gs);
		return NULL;
	}
	return gs;
}

/* Run one case on the device; false on a failure or a wrong result. */
static bool run_case(struct tpurt_device *dev,
		     const struct tpurt_device_info *info,
		     const struct softmax_case *c)
{
	const struct tpurt_compiler_params params = {
		.dimension_semantics = "parallel",
	};
	int64_t shape[2] = { c->rows, c->cols };
	struct tpurt_grid_spec *gs = softmax_spec(c);
	struct tpurt_array *x = NULL, *o = NULL;
	struct tpurt_kernel *k = NULL;
	float *vals = logits(c->rows, c->cols);
	void *hx = NULL, *ho = NULL;
	double *want = NULL, bytes;
	struct tpurt_job_stats st;
	bool ok = false;

	printf("%s: %s (%lld, %lld), blocks of %lld rows\n", NAME,
	       tpurt_dtype_name(c->dtype), (long long)c->rows,
	       (long long)c->cols, (long long)c->br);
	if (!gs || !vals || tpurt_kernel_create(&k) ||
	    tpurt_kernel_stmts(k, gs, kernel_text)) {
		printf("  kernel: %s\n", tpurt_last_error());
		goto out;
	}
	x = sample_array_of(dev, c->dtype, 2, shape, vals, &hx);
	if (!x || tpurt_array_create(dev, c->dtype, 2, shape, &o) ||
	    tpurt_pallas_call(k, gs, &params, (struct tpurt_array *[]){ x, o },
			      2, &st) ||
	    !(ho = sample_read(o))) {
		printf("  run: %s\n", tpurt_last_error());
		goto out;
	}
	bytes = 2.0 * tpurt_array_nbytes(x);
	printf("  host wall %.6f s | modeled v5e %.3f us, %.1f GB/s of %.0f GB/s HBM\n",
	       st.call_wall_ns * 1e-9, st.model_time_ps * 1e-6,
	       bytes / (st.model_time_ps * 1e-12) / 1e9,
	       info->hbm_bandwidth / 1e9);
	want = reference(hx, c->dtype, c->rows, c->cols);
	ok = want && sample_check_close("o", ho, c->dtype, want,
					c->rows * c->cols, 1e-7,
					c->dtype == TPURT_BF16 ? 8e-3 : 3e-5);
out:
	free(vals), free(hx), free(ho), free(want);
	tpurt_array_free(x), tpurt_array_free(o);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	return ok;
}

int main(void)
{
	struct tpurt_device_info info;
	struct tpurt_device *dev;
	bool ok = true;

	if (sample_open(&dev) || tpurt_device_info(dev, &info))
		return sample_fail(NAME, "open");
	for (size_t i = 0; i < NCASES; i++)
		ok = run_case(dev, &info, &cases[i]) && ok;
	tpurt_close(dev);
	return sample_result(NAME, ok);
}
