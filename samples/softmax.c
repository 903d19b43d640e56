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

#include "kernels.h"
#include "sample_util.h"

#define NAME "softmax"

static const struct sample_rows_case cases[] = {
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

/* Run one case on the device; false on a failure or a wrong result. */
static bool run_case(struct tpurt_device *dev,
		     const struct tpurt_device_info *info, size_t i)
{
	const struct sample_rows_case *c = &cases[i];
	const struct tpurt_compiler_params params = {
		.dimension_semantics = "parallel",
	};
	int64_t shape[2] = { c->rows, c->cols };
	struct tpurt_grid_spec *gs = softmax_spec(c->dtype, c->rows, c->cols,
						  c->br);
	struct tpurt_array *x = NULL, *o = NULL;
	struct tpurt_kernel *k = NULL;
	float *vals = logits(c->rows, c->cols);
	void *ho = NULL;
	double *want = NULL, bytes;
	struct tpurt_job_stats st;
	bool ok = false;

	printf("%s: %s (%lld, %lld), blocks of %lld rows\n", NAME,
	       tpurt_dtype_name(c->dtype), (long long)c->rows,
	       (long long)c->cols, (long long)c->br);
	if (!gs || !vals || tpurt_kernel_create(&k) ||
	    softmax_kernel(k, gs)) {
		printf("  kernel: %s\n", tpurt_last_error());
		goto out;
	}
	if (c->dtype == TPURT_BF16)
		round_to_bf16(vals, c->rows * c->cols);
	x = sample_array_of(dev, c->dtype, 2, shape, vals, NULL);
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
	want = malloc(c->rows * c->cols * sizeof(double));
	if (want)
		softmax_reference(vals, c->rows, c->cols, want);
	ok = want && sample_check_close("o", ho, c->dtype, want,
					c->rows * c->cols, 1e-7,
					c->dtype == TPURT_BF16 ? 8e-3 : 3e-5);
out:
	free(vals), free(ho), free(want);
	tpurt_array_free(x), tpurt_array_free(o);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	return ok;
}

int main(void)
{
	return sample_run_cases(NAME, NCASES, run_case);
}
