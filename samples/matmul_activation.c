// SPDX-License-Identifier: MIT
/*
 * The guide's fused activation: at the last k step the activation runs on
 * the f32 accumulator, before the one cast into the output block,
 *
 *   @pl.when(pl.program_id(2) == nsteps - 1)
 *   def _(): z_ref[...] = activation(acc_ref[...]).astype(z_ref.dtype)
 *
 * here jax.nn.relu and jax.nn.gelu, beside the plain kernel, wall-clock
 * and modeled: the activation should barely move the utilization. The
 * plain result is checked with the randomized test; each activated result
 * against the activation of the plain one (same blocks, same sums).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample_util.h"

#define NAME "matmul_activation"
/* m = k = n: the guide's 2048 with TPUEMU_SAMPLE_FULL=1 (sample_size). */
static int64_t size;

static struct tpurt_device_info info;

static double gelu(double v)
{
	return 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

/*
 * z against act(plain), element by element. relu commutes with the bf16
 * rounding, so it is exact; gelu of a rounded value is within a rounding.
 */
static bool check_act(enum tpurt_activation act, const uint16_t *plain,
		      const uint16_t *z, size_t n)
{
	/*
	 * act of each bf16 value once: a million tanh calls were most of the
	 * sample's own time under TCG in the VM.
	 */
	static double table[1 << 16];
	static bool known[1 << 16];

	memset(known, 0, sizeof(known));
	for (size_t i = 0; i < n; i++) {
		double p = tpurt_bf16_to_f32(plain[i]), got = tpurt_bf16_to_f32(z[i]);
		double want, tol;

		if (!known[plain[i]]) {
			table[plain[i]] = act == TPURT_ACT_RELU ? (p > 0 ? p : 0) : gelu(p);
			known[plain[i]] = true;
		}
		want = table[plain[i]];
		tol = act == TPURT_ACT_RELU ? 0 : fabs(want) / 64 + 1.0 / 256;

		if (fabs(got - want) > tol) {
			printf("  z[%zu] = %g, want %g\n", i, got, want);
			return false;
		}
	}
	return true;
}

static bool run(const char *label, struct tpurt_array *x, struct tpurt_array *y,
		struct tpurt_array *z, const int64_t *b, enum tpurt_activation act,
		struct tpurt_job_stats *st)
{
	struct tpurt_matmul_opts o = { .bm = b[0], .bk = b[1], .bn = b[2],
				       .activation = act };
	char what[96];

	if (tpurt_matmul(x, y, z, &o, st)) {
		printf("  %s: %s\n", label, tpurt_last_error());
		return false;
	}
	snprintf(what, sizeof(what), "%-5s m=k=n=%lld blocks (%lld, %lld, %lld)",
		 label, (long long)size, (long long)b[0], (long long)b[1], (long long)b[2]);
	sample_report(what, &info, st, size, size, size, TPURT_BF16);
	return true;
}

int main(void)
{
	static const int64_t blocks[2][3] = { { 128, 128, 128 }, { 512, 1024, 1024 } };
	static const enum tpurt_activation acts[2] = { TPURT_ACT_RELU, TPURT_ACT_GELU };
	static const char *const names[2] = { "relu", "gelu" };
	struct tpurt_job_stats plain, fused;
	struct tpurt_array *x, *y, *z0, *z;
	struct tpurt_device *dev;
	void *hx, *hy, *h0, *h;
	bool ok = true;

	size = sample_size(1024, 2048);
	if (tpurt_open(&dev) || tpurt_device_info(dev, &info))
		return sample_fail(NAME, "open");
	x = sample_array(dev, TPURT_BF16, size, size, 31, &hx);
	y = sample_array(dev, TPURT_BF16, size, size, 32, &hy);
	z0 = sample_array(dev, TPURT_BF16, size, size, 33, NULL);
	z = sample_array(dev, TPURT_BF16, size, size, 34, NULL);
	if (!x || !y || !z0 || !z)
		return sample_fail(NAME, "arrays");
	printf("%s: bf16 act(x @ y), the activation fused at the last k step\n", NAME);
	for (int b = 0; b < 2; b++) {
		ok &= run("plain", x, y, z0, blocks[b], TPURT_ACT_IDENTITY, &plain);
		h0 = sample_read(z0);
		ok &= h0 && sample_check_matmul(hx, hy, h0, size, size, size, TPURT_BF16,
						TPURT_BF16, false, 1.0 / 128);
		for (int a = 0; a < 2 && h0; a++) {
			ok &= run(names[a], x, y, z, blocks[b], acts[a], &fused);
			h = sample_read(z);
			ok &= h && check_act(acts[a], h0, h, size * size);
			sample_ratio(names[a], &fused, &plain);
			free(h);
		}
		free(h0);
	}
	tpurt_array_free(x);
	tpurt_array_free(y);
	tpurt_array_free(z0);
	tpurt_array_free(z);
	free(hx), free(hy);
	tpurt_close(dev);
	return sample_result(NAME, ok);
}
