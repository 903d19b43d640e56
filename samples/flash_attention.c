// SPDX-License-Identifier: MIT
/*
 * Flash attention's forward pass, following the Pallas TPU ops library's
 * kernel (jax/experimental/pallas/ops/tpu/flash_attention.py) over q, k, v
 * of shape (batch * heads, seq, d) in bf16 with f32 accumulation:
 *
 *   grid (bh, cdiv(seq, bq), cdiv(seq, bk)), ("parallel", "parallel", "arbitrary")
 *   q, o: BlockSpec((None, bq, d), lambda b, i, j: (b, i, 0))
 *   k, v: BlockSpec((None, bk, d), lambda b, i, j: (b, j, 0))
 *   scratch: m, l (bq, 1) and acc (bq, d), f32 in VMEM
 *
 *   @pl.when(pl.program_id(2) == 0)			# a new q block
 *   def _():
 *       acc[...] = jnp.zeros_like(acc)
 *       m[...] = jnp.full_like(m, -jnp.inf)
 *       l[...] = jnp.zeros_like(l)
 *   @pl.when(below_or_on_diag)				# causal only
 *   def _():
 *       s = jnp.dot(q[...], k[...].T, preferred_element_type=jnp.float32) * scale
 *       k_ids = lax.broadcasted_iota(jnp.int32, (bq, bk), 1) + pl.program_id(2) * bk
 *       q_ids = lax.broadcasted_iota(jnp.int32, (bq, bk), 0) + pl.program_id(1) * bq
 *       s = jnp.where(k_ids <= q_ids, s, -jnp.inf)
 *       m_new = jnp.maximum(m[...], jnp.max(s, axis=1, keepdims=True))
 *       alpha = jnp.exp(m[...] - m_new)
 *       p = jnp.exp(s - m_new)
 *       l[...] = alpha * l[...] + jnp.sum(p, axis=1, keepdims=True)
 *       acc[...] = acc[...] * alpha
 *       acc[...] += jnp.dot(p.astype(v.dtype), v[...], preferred_element_type=jnp.float32)
 *       m[...] = m_new
 *   @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
 *   def _():
 *       o[...] = (acc[...] / l[...]).astype(o.dtype)
 *
 * (samples/kernels.c writes it.) Causal and not, blocks bq = bk and not,
 * and edge blocks (seq not a multiple of the blocks: key columns past the
 * end are masked). Checked against a double-precision softmax(q k^T /
 * sqrt(d)) v of the same bf16 values; prints the host's wall time beside
 * the modeled v5e time and utilization.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kernels.h"
#include "sample_util.h"

#define NAME "flash_attention"

static const struct attn_shape cases[] = {
	/* bh, seq, d, bq, bk, causal */
	{ 4, 512, 128, 128, 128, false },
	{ 4, 512, 128, 128, 128, true },
	{ 4, 512, 64, 128, 256, true },
	{ 4, 512, 64, 256, 128, true },
	{ 3, 200, 64, 128, 128, false },	/* edge blocks */
	{ 3, 200, 64, 128, 128, true },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* q, k or v: uniform in [-1, 1) (q scaled up for peakier scores), in bf16. */
static float *input(const struct attn_shape *s, float scale, uint32_t seed)
{
	return random_values(s->bh * s->seq * s->d, scale, TPURT_BF16, seed);
}

/* Compare the rows the reference computed (every @step-th of each head). */
static bool check_rows(const uint16_t *o, const double *want,
		       const struct attn_shape *s, int64_t step)
{
	int64_t rows = s->bh * ((s->seq + step - 1) / step), n = 0;
	uint16_t *got = malloc(rows * s->d * sizeof(*got));
	double *ref = malloc(rows * s->d * sizeof(*ref));
	bool ok = got && ref;

	for (int64_t b = 0; ok && b < s->bh; b++)
		for (int64_t r = 0; r < s->seq; r += step, n++)
			for (int64_t c = 0; c < s->d; c++) {
				int64_t at = (b * s->seq + r) * s->d + c;

				got[n * s->d + c] = o[at];
				ref[n * s->d + c] = want[at];
			}
	ok = ok && sample_check_close("o", got, TPURT_BF16, ref, n * s->d,
				      4e-3, 1e-2);
	free(got);
	free(ref);
	return ok;
}

static void report(const struct tpurt_device_info *info,
		   const struct attn_shape *s, const struct tpurt_job_stats *st)
{
	double flops = attn_flops(s);
	double wall = st->call_wall_ns * 1e-9, model = st->model_time_ps * 1e-12;

	printf("  %llu steps | host wall %.6f s, %.1f GFLOP/s | modeled v5e %.1f us, "
	       "%.1f TFLOP/s, %.1f%% of peak\n",
	       (unsigned long long)st->steps, wall, flops / wall / 1e9,
	       model * 1e6, flops / model / 1e12,
	       tpurt_model_utilization(info, TPURT_BF16, flops, model));
}

static bool run_case(struct tpurt_device *dev,
		     const struct tpurt_device_info *info, size_t i)
{
	const struct attn_shape *s = &cases[i];
	struct tpurt_compiler_params params = attn_params(0);
	int64_t shape[3] = { s->bh, s->seq, s->d };
	/*
	 * The reference's rows: every 17th (every 3rd of short sequences),
	 * rows in every q block, edge blocks included. The reference in
	 * double is most of the sample's time on the guest's emulated CPU.
	 */
	int64_t step = s->seq >= 512 ? 17 : 3;
	float *hq = input(s, 4.0f, 31), *hk = input(s, 1.0f, 32);
	float *hv = input(s, 1.0f, 33);
	struct tpurt_array *q = NULL, *k = NULL, *v = NULL, *o = NULL;
	struct tpurt_grid_spec *gs = attn_spec(s);
	struct tpurt_kernel *kern = NULL;
	double *want = NULL;
	struct tpurt_job_stats st;
	void *ho = NULL;
	bool ok = false;

	printf("%s: %s, (bh %lld, seq %lld, d %lld), blocks bq %lld, bk %lld\n",
	       NAME, s->causal ? "causal" : "non-causal", (long long)s->bh,
	       (long long)s->seq, (long long)s->d, (long long)s->bq,
	       (long long)s->bk);
	if (!gs || !hq || !hk || !hv || tpurt_kernel_create(&kern) ||
	    attn_kernel(kern, gs, s, 0)) {
		printf("  kernel: %s\n", tpurt_last_error());
		goto out;
	}
	q = sample_array_of(dev, TPURT_BF16, 3, shape, hq, NULL);
	k = sample_array_of(dev, TPURT_BF16, 3, shape, hk, NULL);
	v = sample_array_of(dev, TPURT_BF16, 3, shape, hv, NULL);
	if (!q || !k || !v || tpurt_array_create(dev, TPURT_BF16, 3, shape, &o) ||
	    tpurt_pallas_call(kern, gs, &params,
			      (struct tpurt_array *[]){ q, k, v, o }, 4, &st) ||
	    !(ho = sample_read(o))) {
		printf("  run: %s\n", tpurt_last_error());
		goto out;
	}
	report(info, s, &st);
	want = calloc(s->bh * s->seq * s->d, sizeof(double));
	if (want)
		attn_reference(hq, hk, hv, s, step, want);
	ok = want && check_rows(ho, want, s, step);
out:
	free(hq), free(hk), free(hv), free(ho), free(want);
	tpurt_array_free(q), tpurt_array_free(k);
	tpurt_array_free(v), tpurt_array_free(o);
	tpurt_kernel_free(kern);
	tpurt_grid_spec_free(gs);
	return ok;
}

int main(void)
{
	return sample_run_cases(NAME, NCASES, run_case);
}
