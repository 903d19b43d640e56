// SPDX-License-Identifier: MIT
/*
 * The guide's fused RHS transpose, x @ y.T: y lives in HBM as (n, k); a
 * transpose view hands it over as a logical (k, n) array with no copy
 * (the guide's y.swapaxes(0, 1)), and the kernel reads its blocks as
 * BlockSpec((bn, bk), lambda i, j, k: (j, k)), contracting dot_general's
 * dims ((1,), (1,)). Beside it the plain kernel on a (k, n) y, both blocks
 * of the guide, wall-clock and modeled: the transpose should barely move
 * the utilization.
 */
#include <stdio.h>
#include <stdlib.h>

#include "sample_util.h"

#define NAME "matmul_transpose_rhs"
/* m = k = n: the guide's 2048 with TPUEMU_SAMPLE_FULL=1 (sample_size). */
static int64_t size;

static const int64_t blocks[2][3] = { { 128, 128, 128 }, { 512, 1024, 1024 } };

/* Run z = x @ y with blocks @b, report it, check it. */
static bool run(const char *label, const struct tpurt_device_info *info,
		struct tpurt_array *x, struct tpurt_array *y, struct tpurt_array *z,
		const void *hx, const void *hy, bool tr, const int64_t *b,
		struct tpurt_job_stats *st)
{
	struct tpurt_matmul_opts o = { .bm = b[0], .bk = b[1], .bn = b[2] };
	char what[96];
	void *hz;
	bool ok;

	if (tpurt_matmul(x, y, z, &o, st)) {
		printf("  %s: %s\n", label, tpurt_last_error());
		return false;
	}
	snprintf(what, sizeof(what), "%-9s m=k=n=%lld blocks (%lld, %lld, %lld)",
		 label, (long long)size, (long long)b[0], (long long)b[1], (long long)b[2]);
	sample_report(what, info, st, size, size, size, TPURT_BF16);
	hz = sample_read(z);
	ok = hz && sample_check_matmul(hx, hy, hz, size, size, size, TPURT_BF16,
				       TPURT_BF16, tr, 1.0 / 128);
	free(hz);
	return ok;
}

int main(void)
{
	struct tpurt_array *x, *y, *yt_store, *yt, *z;
	struct tpurt_job_stats plain, fused;
	struct tpurt_device_info info;
	struct tpurt_device *dev;
	void *hx, *hy, *hyt;
	bool ok = true;

	size = sample_size(1024, 2048);
	if (tpurt_open(&dev) || tpurt_device_info(dev, &info))
		return sample_fail(NAME, "open");
	x = sample_array(dev, TPURT_BF16, size, size, 21, &hx);
	y = sample_array(dev, TPURT_BF16, size, size, 22, &hy);
	/* y.T as stored: (n, k), physically transposed */
	yt_store = sample_array(dev, TPURT_BF16, size, size, 23, &hyt);
	z = sample_array(dev, TPURT_BF16, size, size, 24, NULL);
	if (!x || !y || !yt_store || !z)
		return sample_fail(NAME, "arrays");
	if (tpurt_array_transpose_view(yt_store, &yt))
		return sample_fail(NAME, "transpose view");
	printf("%s: bf16 x @ y.T, y stored (n, k) and viewed as (k, n) (%lld, %lld), no copy\n",
	       NAME, (long long)tpurt_array_dim(yt, 0), (long long)tpurt_array_dim(yt, 1));
	for (int b = 0; b < 2; b++) {
		ok &= run("plain", &info, x, y, z, hx, hy, false, blocks[b], &plain);
		ok &= run("transpose", &info, x, yt, z, hx, hyt, true, blocks[b], &fused);
		sample_ratio("transpose", &fused, &plain);
	}
	tpurt_array_free(yt);
	tpurt_array_free(yt_store);
	tpurt_array_free(x);
	tpurt_array_free(y);
	tpurt_array_free(z);
	free(hx), free(hy), free(hyt);
	tpurt_close(dev);
	return sample_result(NAME, ok);
}
