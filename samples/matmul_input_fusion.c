// SPDX-License-Identifier: MIT
/*
 * The guide's first exercise, input fusion (Pallas's allow_input_fusion):
 * x is int8 in HBM with a per-column (per-k) f32 scale; each x block is
 * dequantised in VMEM, x_fused = (x * scale[col]).astype(bf16), right
 * before the bf16 dot. Beside it the plain kernel on an x dequantised
 * beforehand: the two must agree bit for bit (the same bf16 values meet
 * the same sums), and the fused one moves half of x's bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample_util.h"

#define NAME "matmul_input_fusion"
/* m = k = n: the guide's 2048 with TPUEMU_SAMPLE_FULL=1 (sample_size). */
static int64_t size;

static struct tpurt_device_info info;

static bool run(const char *label, struct tpurt_array *x, struct tpurt_array *y,
		struct tpurt_array *z, struct tpurt_matmul_opts *o,
		struct tpurt_job_stats *st)
{
	char what[96];

	o->bm = 512, o->bk = 1024, o->bn = 1024;
	if (tpurt_matmul(x, y, z, o, st)) {
		printf("  %s: %s\n", label, tpurt_last_error());
		return false;
	}
	snprintf(what, sizeof(what), "%-5s m=k=n=%lld blocks (512, 1024, 1024)", label, (long long)size);
	sample_report(what, &info, st, size, size, size, TPURT_BF16);
	return true;
}

int main(void)
{
	int64_t kdim[1];
	struct tpurt_matmul_opts plain_o = { 0 }, fused_o = { 0 };
	struct tpurt_array *q, *scale, *xd, *y, *z0, *z;
	struct tpurt_job_stats plain, fused;
	struct tpurt_device *dev;
	float *hs;
	int8_t *hq;
	uint16_t *hxd;
	void *hy, *h0 = NULL, *h = NULL;
	bool ok = true;

	size = sample_size(1024, 2048);
	kdim[0] = size;
	if (tpurt_open(&dev) || tpurt_device_info(dev, &info))
		return sample_fail(NAME, "open");
	q = sample_array(dev, TPURT_INT8, size, size, 41, (void **)&hq);
	y = sample_array(dev, TPURT_BF16, size, size, 42, &hy);
	xd = sample_array(dev, TPURT_BF16, size, size, 43, (void **)&hxd);
	z0 = sample_array(dev, TPURT_F32, size, size, 44, NULL);
	z = sample_array(dev, TPURT_F32, size, size, 45, NULL);
	hs = malloc(size * sizeof(float));
	if (!q || !y || !xd || !z0 || !z || !hs ||
	    tpurt_array_create(dev, TPURT_F32, 1, kdim, &scale))
		return sample_fail(NAME, "arrays");
	/* scales 1/64 .. 1/8: the int8 range [-8, 8) maps to about [-1, 1) */
	for (int c = 0; c < size; c++)
		hs[c] = (float)(1 + c % 8) / 64;
	for (size_t i = 0; i < (size_t)size * size; i++)
		hxd[i] = tpurt_f32_to_bf16((float)(hq[i] * (double)hs[i % size]));
	if (tpurt_array_write(scale, hs) || tpurt_array_write(xd, hxd))
		return sample_fail(NAME, "write");

	printf("%s: (int8 x * scale[col]).astype(bf16) @ y, dequantised in VMEM\n", NAME);
	ok &= run("plain", xd, y, z0, &plain_o, &plain);
	fused_o.x_fusion = (struct tpurt_input_fusion){
		.enabled = 1, .dtype = TPURT_BF16, .fn = TPURT_IDENTITY,
		.op = TPURT_MUL, .operand = TPURT_FUSE_COLUMNS, .columns = scale,
	};
	ok &= run("fused", q, y, z, &fused_o, &fused);
	sample_ratio("fused", &fused, &plain);
	printf("  HBM bytes in: plain %llu, fused %llu\n",
	       (unsigned long long)plain.hbm_bytes_in,
	       (unsigned long long)fused.hbm_bytes_in);
	if (ok) {
		h0 = sample_read(z0);
		h = sample_read(z);
		ok = h0 && h && sample_check_matmul(hxd, hy, h0, size, size, size,
						    TPURT_BF16, TPURT_F32, false, 1e-5);
		if (ok && memcmp(h0, h, (size_t)size * size * sizeof(float))) {
			printf("  fused and plain results differ\n");
			ok = false;
		}
	}
	free(h0), free(h), free(hs), free(hq), free(hy), free(hxd);
	tpurt_array_free(q), tpurt_array_free(y), tpurt_array_free(xd);
	tpurt_array_free(z0), tpurt_array_free(z), tpurt_array_free(scale);
	tpurt_close(dev);
	return sample_result(NAME, ok);
}
