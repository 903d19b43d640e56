// SPDX-License-Identifier: MIT
/*
 * The guide's first Pallas kernel, f32: a 3-D grid (m/bm, n/bn, k/bk); the
 * output block stays in VMEM across the k steps and accumulates the
 * products, zeroed at k == 0:
 *
 *   def matmul_kernel(x_ref, y_ref, z_ref):
 *     @pl.when(pl.program_id(2) == 0)
 *     def _(): z_ref[...] = jnp.zeros_like(z_ref)
 *     z_ref[...] += x_ref[...] @ y_ref[...]
 */
#include <stdio.h>
#include <stdlib.h>

#include "sample_util.h"

#define NAME "matmul_first"

int main(void)
{
	const int64_t m = 1024, k = 1024, n = 1024, bm = 256, bk = 256, bn = 256;
	int64_t grid[3] = { m / bm, n / bn, k / bk };
	struct tpurt_block_spec xs = { 2, { bm, bk }, "i, j, k -> i, k" };
	struct tpurt_block_spec ys = { 2, { bk, bn }, "i, j, k -> k, j" };
	struct tpurt_block_spec zs = { 2, { bm, bn }, "i, j, k -> i, j" };
	struct tpurt_compiler_params params = {
		.dimension_semantics = "parallel, parallel, arbitrary",
	};
	struct tpurt_array *x, *y, *z;
	struct tpurt_device_info info;
	struct tpurt_grid_spec *gs;
	struct tpurt_device *dev;
	struct tpurt_job_stats st;
	struct tpurt_kernel *kern;
	void *hx, *hy, *hz;
	bool ok;

	if (tpurt_open(&dev) || tpurt_device_info(dev, &info))
		return sample_fail(NAME, "open");
	x = sample_array(dev, TPURT_F32, m, k, 1, &hx);
	y = sample_array(dev, TPURT_F32, k, n, 2, &hy);
	z = sample_array(dev, TPURT_F32, m, n, 3, NULL);	/* garbage in z */
	if (!x || !y || !z)
		return sample_fail(NAME, "arrays");

	if (tpurt_grid_spec_create(3, grid, &gs) ||
	    tpurt_grid_spec_add_input(gs, "x", &xs) ||
	    tpurt_grid_spec_add_input(gs, "y", &ys) ||
	    tpurt_grid_spec_add_output(gs, "z", &zs))
		return sample_fail(NAME, "grid spec");
	if (tpurt_kernel_create(&kern) ||
	    tpurt_kernel_when(kern, "k == 0") ||
	    tpurt_kernel_zero(kern, "z") ||
	    tpurt_kernel_end_when(kern) ||
	    tpurt_kernel_dot(kern, "z", "x", "y", TPURT_DOT_ACCUMULATE))
		return sample_fail(NAME, "kernel");
	{
		struct tpurt_array *args[] = { x, y, z };

		if (tpurt_pallas_call(kern, gs, &params, args, 3, &st))
			return sample_fail(NAME, "pallas_call");
	}
	printf("%s: (%lld x %lld) @ (%lld x %lld), blocks (%lld, %lld, %lld), "
	       "grid (%lld, %lld, %lld): %llu steps, %llu blocks fetched, "
	       "%llu skipped, %llu written back\n", NAME,
	       (long long)m, (long long)k, (long long)k, (long long)n,
	       (long long)bm, (long long)bk, (long long)bn,
	       (long long)grid[0], (long long)grid[1], (long long)grid[2],
	       (unsigned long long)st.steps, (unsigned long long)st.blocks_fetched,
	       (unsigned long long)st.blocks_skipped,
	       (unsigned long long)st.blocks_written);
	sample_report("f32", &info, &st, m, k, n, TPURT_F32);

	hz = malloc(tpurt_array_nbytes(z));
	if (!hz || tpurt_array_read(z, hz))
		return sample_fail(NAME, "read z");
	ok = sample_check_matmul(hx, hy, hz, m, k, n, TPURT_F32, TPURT_F32,
				 false, 1e-5);
	ok = ok && st.steps == (uint64_t)(grid[0] * grid[1] * grid[2]);
	tpurt_kernel_free(kern);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x);
	tpurt_array_free(y);
	tpurt_array_free(z);
	tpurt_close(dev);
	return sample_result(NAME, ok);
}
