// SPDX-License-Identifier: MIT
/*
 * A block-sparse matmul driven by scalar prefetch (PrefetchScalarGridSpec
 * with num_scalar_prefetch=2): output block row i takes x's block row
 * rows[i], and a k block contributes only where mask[i, k] is set. Both
 * arrays are in SMEM before the first step; the index map and the
 * predicate read them, as in
 *
 *   in_specs=[pl.BlockSpec((b, b), lambda i, j, k, rows, mask: (rows[i], k)), ...]
 *   @pl.when(mask_ref[i * nk + k] != 0)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample_util.h"

#define NAME "block_sparse"
#define B 128
#define GI 4
#define GJ 3
#define GK 4
#define XR 6	/* block rows of x */

int main(void)
{
	static const int32_t rows[GI] = { 5, 0, 3, 3 };
	static const int32_t mask[GI * GK] = {
		1, 0, 1, 0,
		0, 0, 0, 0,
		1, 1, 1, 1,
		0, 1, 0, 0,
	};
	int64_t grid[3] = { GI, GJ, GK }, rshape[1] = { GI }, mshape[1] = { GI * GK };
	struct tpurt_block_spec xs = { 2, { B, B }, "i, j, k, rows, mask -> rows[i], k" };
	struct tpurt_block_spec ys = { 2, { B, B }, "i, j, k -> k, j" };
	struct tpurt_block_spec zs = { 2, { B, B }, "i, j, k -> i, j" };
	struct tpurt_compiler_params params = {
		.dimension_semantics = "parallel, parallel, arbitrary",
	};
	struct tpurt_array *x, *y, *z, *r, *mk;
	struct tpurt_grid_spec *gs;
	struct tpurt_device *dev;
	struct tpurt_job_stats st;
	struct tpurt_kernel *kern;
	float *hx, *hy, *hz, *want;
	double worst = 0;

	if (tpurt_open(&dev))
		return sample_fail(NAME, "open");
	x = sample_array(dev, TPURT_F32, XR * B, GK * B, 7, (void **)&hx);
	y = sample_array(dev, TPURT_F32, GK * B, GJ * B, 8, (void **)&hy);
	z = sample_array(dev, TPURT_F32, GI * B, GJ * B, 9, NULL);
	if (!x || !y || !z || tpurt_array_create(dev, TPURT_INT32, 1, rshape, &r) ||
	    tpurt_array_create(dev, TPURT_INT32, 1, mshape, &mk) ||
	    tpurt_array_write(r, rows) || tpurt_array_write(mk, mask))
		return sample_fail(NAME, "arrays");

	if (tpurt_grid_spec_create(3, grid, &gs) ||
	    tpurt_grid_spec_add_scalar_prefetch(gs, "rows") ||
	    tpurt_grid_spec_add_scalar_prefetch(gs, "mask") ||
	    tpurt_grid_spec_add_input(gs, "x", &xs) ||
	    tpurt_grid_spec_add_input(gs, "y", &ys) ||
	    tpurt_grid_spec_add_output(gs, "z", &zs))
		return sample_fail(NAME, "grid spec");
	if (tpurt_kernel_create(&kern) ||
	    tpurt_kernel_when(kern, "k == 0") ||
	    tpurt_kernel_zero(kern, "z") ||
	    tpurt_kernel_end_when(kern) ||
	    tpurt_kernel_when(kern, "mask[i * num_programs(k) + k] != 0") ||
	    tpurt_kernel_dot(kern, "z", "x", "y", TPURT_DOT_ACCUMULATE) ||
	    tpurt_kernel_end_when(kern))
		return sample_fail(NAME, "kernel");
	{
		struct tpurt_array *args[] = { r, mk, x, y, z };

		if (tpurt_pallas_call(kern, gs, &params, args, 5, &st))
			return sample_fail(NAME, "pallas_call");
	}
	printf("%s: %d x %d output blocks, %d k blocks, rows and mask in SMEM: "
	       "%llu steps, %llu blocks fetched, %llu fetches skipped\n", NAME,
	       GI, GJ, GK, (unsigned long long)st.steps,
	       (unsigned long long)st.blocks_fetched,
	       (unsigned long long)st.blocks_skipped);

	/* Small enough for the full reference. */
	hz = malloc(GI * B * GJ * B * sizeof(float));
	want = calloc(GI * B * GJ * B, sizeof(float));
	if (!hz || !want || tpurt_array_read(z, hz))
		return sample_fail(NAME, "read z");
	for (int i = 0; i < GI; i++)
		for (int kk = 0; kk < GK; kk++)
			for (int a = 0; mask[i * GK + kk] && a < B; a++)
				for (int c = 0; c < GJ * B; c++) {
					double s = 0;

					for (int p = 0; p < B; p++)
						s += (double)hx[(rows[i] * B + a) * GK * B + kk * B + p] *
						     hy[(kk * B + p) * GJ * B + c];
					want[(i * B + a) * GJ * B + c] += (float)s;
				}
	for (int i = 0; i < GI * B * GJ * B; i++) {
		double e = fabs(hz[i] - want[i]);

		worst = e > worst ? e : worst;
	}
	printf("%s: largest difference from the reference %.3g\n", NAME, worst);
	tpurt_kernel_free(kern);
	tpurt_grid_spec_free(gs);
	tpurt_close(dev);
	return sample_result(NAME, worst < 1e-3);
}
