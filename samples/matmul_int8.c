// SPDX-License-Identifier: MIT
/*
 * The guide's second exercise: an int8 matmul. int8 x int8 on the MXU
 * accumulates in an int32 VMEM scratch (as the repository's
 * ops/tpu/matmul.py switches its accumulator for 8-bit inputs); the output
 * is the int32 result, or a scaled f32 (acc * scale, rounded once). The
 * modeled chip has twice the bf16 peak for int8; beside the bf16 kernel of
 * the same shape and blocks, int8 should be faster in both figures.
 */
#include <stdio.h>
#include <stdlib.h>

#include "sample_util.h"

#define NAME "matmul_int8"
/* m = k = n: the guide's 2048 with TPUEMU_SAMPLE_FULL=1 (sample_size). */
static int64_t size;
#define SCALE (1.0f / 64)

static struct tpurt_device_info info;

static bool run(const char *label, struct tpurt_array *x, struct tpurt_array *y,
		struct tpurt_array *z, float scale, enum tpurt_dtype in,
		struct tpurt_job_stats *st)
{
	struct tpurt_matmul_opts o = { .bm = 512, .bk = 1024, .bn = 1024,
				       .out_scale = scale };
	char what[96];

	if (tpurt_matmul(x, y, z, &o, st)) {
		printf("  %s: %s\n", label, tpurt_last_error());
		return false;
	}
	snprintf(what, sizeof(what), "%-10s m=k=n=%lld blocks (512, 1024, 1024)", label, (long long)size);
	sample_report(what, &info, st, size, size, size, in);
	return true;
}

/* The scaled output is exactly (float)(int32 result * scale). */
static bool check_scaled(const int32_t *z32, const float *zf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (zf[i] != (float)((double)z32[i] * SCALE)) {
			printf("  zf[%zu] = %g, want %g\n", i, zf[i], z32[i] * (double)SCALE);
			return false;
		}
	}
	return true;
}

int main(void)
{
	struct tpurt_array *xb, *yb, *zb, *x, *y, *z32, *zf;
	struct tpurt_job_stats bf16, i8, i8f;
	struct tpurt_device *dev;
	void *hx, *hy, *h32 = NULL, *hf = NULL;
	bool ok = true;

	size = sample_size(1024, 2048);
	if (tpurt_open(&dev) || tpurt_device_info(dev, &info))
		return sample_fail(NAME, "open");
	xb = sample_array(dev, TPURT_BF16, size, size, 51, NULL);
	yb = sample_array(dev, TPURT_BF16, size, size, 52, NULL);
	zb = sample_array(dev, TPURT_BF16, size, size, 53, NULL);
	x = sample_array(dev, TPURT_INT8, size, size, 54, &hx);
	y = sample_array(dev, TPURT_INT8, size, size, 55, &hy);
	z32 = sample_array(dev, TPURT_INT32, size, size, 56, NULL);
	zf = sample_array(dev, TPURT_F32, size, size, 57, NULL);
	if (!xb || !yb || !zb || !x || !y || !z32 || !zf)
		return sample_fail(NAME, "arrays");
	printf("%s: int8 x int8 -> int32 accumulator; modeled peak %.0f TOP/s int8, %.0f TFLOP/s bf16\n",
	       NAME, tpurt_device_total_peak(&info, TPURT_INT8) / 1e12,
	       tpurt_device_total_peak(&info, TPURT_BF16) / 1e12);
	ok &= run("bf16", xb, yb, zb, 0, TPURT_BF16, &bf16);
	ok &= run("int8>int32", x, y, z32, 0, TPURT_INT8, &i8);
	ok &= run("int8>f32", x, y, zf, SCALE, TPURT_INT8, &i8f);
	printf("  int8 / bf16: wall %.3f x, modeled %.3f x (speed-up %.2f x wall, %.2f x modeled)\n",
	       (double)i8.call_wall_ns / bf16.call_wall_ns,
	       (double)i8.model_time_ps / bf16.model_time_ps,
	       (double)bf16.call_wall_ns / i8.call_wall_ns,
	       (double)bf16.model_time_ps / i8.model_time_ps);
	if (ok) {
		h32 = sample_read(z32);
		hf = sample_read(zf);
		/* small integers: every sum is exact, so tolerance 0 */
		ok = h32 && hf && sample_check_matmul(hx, hy, h32, size, size, size,
						      TPURT_INT8, TPURT_INT32, false, 0) &&
		     check_scaled(h32, hf, (size_t)size * size);
	}
	free(hx), free(hy), free(h32), free(hf);
	tpurt_array_free(xb), tpurt_array_free(yb), tpurt_array_free(zb);
	tpurt_array_free(x), tpurt_array_free(y);
	tpurt_array_free(z32), tpurt_array_free(zf);
	tpurt_close(dev);
	return sample_result(NAME, ok);
}
