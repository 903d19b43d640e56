// SPDX-License-Identifier: MIT
/*
 * The guide's timing experiment (analyze_matmul): bf16 matmuls with blocks
 * (128, 128, 128) and (512, 1024, 1024) at m = k = n = 1024 and 4096, run on
 * the device; for each, the host's wall-clock time and the modeled v5e time,
 * side by side and never mixed, with FLOP/s and utilization of the modeled
 * peak. 8192 is printed from the model alone (not run). Then a block-size
 * sweep picks the best blocks for 4096, and the "XLA" row is the runtime's
 * own choice (tpurt_matmul with no blocks given). Every run is checked.
 * The 4096 rows run with TPUEMU_SAMPLE_FULL=1 (make run FULL=1); by
 * default they come from the model too, as 8192's do.
 */
#include <stdio.h>
#include <stdlib.h>

#include "sample_util.h"

#define NAME "analyze_matmul"

static struct tpurt_device *dev;
static struct tpurt_device_info info;

/* x, y and z of one size, made once and reused by every row of that size. */
struct operands {
	int64_t size;
	struct tpurt_array *x, *y, *z;
	void *hx, *hy, *hz;
};

static bool operands_make(struct operands *o, int64_t size)
{
	o->size = size;
	o->x = sample_array(dev, TPURT_BF16, size, size, 11, &o->hx);
	o->y = sample_array(dev, TPURT_BF16, size, size, 12, &o->hy);
	o->z = sample_array(dev, TPURT_BF16, size, size, 13, NULL);
	o->hz = o->z ? malloc(tpurt_array_nbytes(o->z)) : NULL;
	return o->x && o->y && o->hz;
}

static void operands_free(struct operands *o)
{
	free(o->hx);
	free(o->hy);
	free(o->hz);
	tpurt_array_free(o->x);
	tpurt_array_free(o->y);
	tpurt_array_free(o->z);
}

/* Run one matmul (blocks 0: the runtime's choice), print its row, check it. */
static bool run_row(const char *label, struct operands *o, int64_t bm,
		    int64_t bk, int64_t bn)
{
	/*
	 * A 4096^3 job is a few seconds of host time, more on a busy host
	 * under TCG: allow a minute rather than the driver's 10 s.
	 */
	struct tpurt_matmul_opts opts = {
		.bm = bm, .bk = bk, .bn = bn, .timeout_ms = 60000,
	};
	struct tpurt_job_stats st;
	int64_t chosen[3] = { bm, bk, bn };
	char what[96];

	if (!bm && tpurt_matmul_choose_blocks(&info, o->size, o->size, o->size,
					      TPURT_BF16, 0, chosen))
		return false;
	if (tpurt_array_fill(o->z, 0) || tpurt_matmul(o->x, o->y, o->z, &opts, &st)) {
		printf("  %s: %s\n", label, tpurt_last_error());
		return false;
	}
	snprintf(what, sizeof(what), "%-6s m=k=n=%-5lld blocks (%lld, %lld, %lld)",
		 label, (long long)o->size, (long long)chosen[0],
		 (long long)chosen[1], (long long)chosen[2]);
	sample_report(what, &info, &st, o->size, o->size, o->size, TPURT_BF16);
	return !tpurt_array_read(o->z, o->hz) &&
	       sample_check_matmul(o->hx, o->hy, o->hz, o->size, o->size, o->size,
				   TPURT_BF16, TPURT_BF16, false, 1.0 / 128);
}

static void model_row(const char *label, int64_t size, int64_t bm, int64_t bk,
		      int64_t bn)
{
	struct tpurt_matmul_analysis an;
	double flops = 2.0 * size * size * size;

	if (tpurt_matmul_analyze(&info, size, size, size, bm, bk, bn,
				 TPURT_BF16, &an))
		return;
	printf("  %-6s m=k=n=%-5lld blocks (%lld, %lld, %lld): modeled v5e "
	       "%.6f s, %.1f TFLOP/s, %.2f%% of peak (model only, not run)\n",
	       label, (long long)size, (long long)bm, (long long)bk, (long long)bn,
	       an.est_time_s, flops / an.est_time_s / 1e12,
	       tpurt_model_utilization(&info, TPURT_BF16, flops, an.est_time_s));
}

/*
 * A 4096 row (blocks 0: the runtime's choice): run with TPUEMU_SAMPLE_FULL=1,
 * else from the model alone.
 */
static bool large_row(const char *label, struct operands *large, const int64_t *b)
{
	int64_t chosen[3];

	if (large->size)
		return run_row(label, large, b[0], b[1], b[2]);
	if (!b[0]) {
		if (tpurt_matmul_choose_blocks(&info, 4096, 4096, 4096, TPURT_BF16,
					       0, chosen))
			return false;
		b = chosen;
	}
	model_row(label, 4096, b[0], b[1], b[2]);
	return true;
}

int main(void)
{
	static const int64_t blocks[2][3] = { { 128, 128, 128 }, { 512, 1024, 1024 } };
	struct operands small, large = { 0 };
	int64_t best[3];
	bool ok = true;
	int b;

	if (tpurt_open(&dev) || tpurt_device_info(dev, &info))
		return sample_fail(NAME, "open");
	if (!operands_make(&small, 1024) ||
	    (sample_full() && !operands_make(&large, 4096)))
		return sample_fail(NAME, "arrays");
	printf("%s: bf16 inputs, f32 accumulator; modeled peak %.0f TFLOP/s, "
	       "HBM %.0f GB/s\n", NAME,
	       tpurt_device_total_peak(&info, TPURT_BF16) / 1e12,
	       info.hbm_bandwidth / 1e9);
	for (b = 0; b < 2; b++) {
		ok &= run_row("pallas", &small, blocks[b][0], blocks[b][1], blocks[b][2]);
		ok &= large_row("pallas", &large, blocks[b]);
		model_row("pallas", 8192, blocks[b][0], blocks[b][1], blocks[b][2]);
	}

	/* The sweep: the fastest blocks by the model, within the VMEM limit. */
	if (tpurt_matmul_choose_blocks(&info, 4096, 4096, 4096, TPURT_BF16, 0, best))
		return sample_fail(NAME, "block sweep");
	printf("%s: block sweep at 4096 picks (%lld, %lld, %lld)\n", NAME,
	       (long long)best[0], (long long)best[1], (long long)best[2]);
	ok &= large_row("best", &large, best);
	/* "XLA": whatever the runtime chooses when given no blocks. */
	ok &= run_row("xla", &small, 0, 0, 0);
	ok &= large_row("xla", &large, (const int64_t[3]){ 0 });
	operands_free(&small);
	operands_free(&large);
	tpurt_close(dev);
	return sample_result(NAME, ok);
}
