// SPDX-License-Identifier: MIT
/*
 * The guide's bf16 kernel: bf16 inputs and output, an f32 VMEM scratch
 * accumulator declared through PrefetchScalarGridSpec's scratch_shapes, and
 * the cast to bf16 at the last k step:
 *
 *   @pl.when(pl.program_id(2) == 0)
 *   def _(): acc_ref[...] = jnp.zeros_like(acc_ref)
 *   acc_ref[...] += jnp.dot(x_ref[...], y_ref[...],
 *                           preferred_element_type=jnp.float32)
 *   @pl.when(pl.program_id(2) == nsteps - 1)
 *   def _(): z_ref[...] = acc_ref[...].astype(z_ref.dtype)
 */
#include <stdio.h>
#include <stdlib.h>

#include "sample_util.h"

#define NAME "matmul_bf16"

int main(void)
{
	const int64_t m = 1024, k = 2048, n = 1024, bm = 512, bk = 1024, bn = 512;
	int64_t grid[3] = { m / bm, n / bn, k / bk }, acc[2] = { bm, bn };
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
	x = sample_array(dev, TPURT_BF16, m, k, 4, &hx);
	y = sample_array(dev, TPURT_BF16, k, n, 5, &hy);
	z = sample_array(dev, TPURT_BF16, m, n, 6, NULL);
	if (!x || !y || !z)
		return sample_fail(NAME, "arrays");

	/* num_scalar_prefetch=0, scratch_shapes=[pltpu.VMEM((bm, bn), f32)] */
	if (tpurt_grid_spec_create(3, grid, &gs) ||
	    tpurt_grid_spec_add_input(gs, "x", &xs) ||
	    tpurt_grid_spec_add_input(gs, "y", &ys) ||
	    tpurt_grid_spec_add_output(gs, "z", &zs) ||
	    tpurt_grid_spec_add_scratch(gs, "acc", TPURT_VMEM, TPURT_F32, 2, acc))
		return sample_fail(NAME, "grid spec");
	if (tpurt_kernel_create(&kern) ||
	    tpurt_kernel_when(kern, "k == 0") ||
	    tpurt_kernel_zero(kern, "acc") ||
	    tpurt_kernel_end_when(kern) ||
	    tpurt_kernel_dot(kern, "acc", "x", "y", TPURT_DOT_ACCUMULATE) ||
	    tpurt_kernel_when(kern, "k == num_programs(k) - 1") ||
	    tpurt_kernel_store(kern, "z", "acc") ||
	    tpurt_kernel_end_when(kern))
		return sample_fail(NAME, "kernel");
	{
		struct tpurt_array *args[] = { x, y, z };

		if (tpurt_pallas_call(kern, gs, &params, args, 3, &st))
			return sample_fail(NAME, "pallas_call");
	}
	printf("%s: bf16 (%lld x %lld) @ (%lld x %lld) with an f32 accumulator, "
	       "blocks (%lld, %lld, %lld)\n", NAME, (long long)m, (long long)k,
	       (long long)k, (long long)n, (long long)bm, (long long)bk,
	       (long long)bn);
	sample_report("bf16", &info, &st, m, k, n, TPURT_BF16);

	hz = malloc(tpurt_array_nbytes(z));
	if (!hz || tpurt_array_read(z, hz))
		return sample_fail(NAME, "read z");
	/* f32 accumulation, then one bf16 rounding: 2^-8 relative. */
	ok = sample_check_matmul(hx, hy, hz, m, k, n, TPURT_BF16, TPURT_BF16,
				 false, 1.0 / 128);
	tpurt_kernel_free(kern);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x);
	tpurt_array_free(y);
	tpurt_array_free(z);
	tpurt_close(dev);
	return sample_result(NAME, ok);
}
