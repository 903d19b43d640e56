// SPDX-License-Identifier: MIT
/*
 * A first kernel outside the tree: the Pallas guide's blocked matmul,
 * z = x @ y, on whichever device tpurt_open() finds ($TPURT_DEVICE: a
 * render node, or "sim" for the in-process device), checked element by
 * element against the host. README's walkthrough builds it with
 * pkg-config, and tests/install_test.sh does exactly that from a staged
 * `make install`.
 *
 *   def kernel(x_ref, y_ref, z_ref):
 *     @pl.when(pl.program_id(2) == 0)
 *     def _(): z_ref[...] = jnp.zeros_like(z_ref)
 *     z_ref[...] += x_ref[...] @ y_ref[...]
 */
#include <stdio.h>
#include <stdlib.h>

#include <tpurt.h>

#define M 256
#define K 384
#define N 256
#define B 128

static int fail(const char *what)
{
	fprintf(stderr, "first_kernel: %s: %s\n", what, tpurt_last_error());
	return 1;
}

int main(void)
{
	int64_t grid[3] = { M / B, N / B, K / B };
	struct tpurt_block_spec xs = { .rank = 2, .shape = { B, B },
					.index_map = "i, j, k -> i, k" };
	struct tpurt_block_spec ys = { .rank = 2, .shape = { B, B },
					.index_map = "i, j, k -> k, j" };
	struct tpurt_block_spec zs = { .rank = 2, .shape = { B, B },
					.index_map = "i, j, k -> i, j" };
	struct tpurt_compiler_params params = {
		.dimension_semantics = "parallel, parallel, arbitrary",
	};
	static float x[M * K], y[K * N], z[M * N];
	struct tpurt_device_info info;
	struct tpurt_array *args[3];
	struct tpurt_grid_spec *gs;
	struct tpurt_device *dev;
	struct tpurt_job_stats st;
	struct tpurt_kernel *kern;
	long bad = 0;

	if (tpurt_open(&dev))
		return fail("open");	/* no device: dev is not usable */
	if (tpurt_device_info(dev, &info))
		return fail("info");
	printf("device %s (%s), %u core(s)\n", info.node, info.driver,
	       info.cores);

	/* Small integers: every product and sum is exact in f32. */
	for (int i = 0; i < M * K; i++)
		x[i] = (float)(i % 7 - 3);
	for (int i = 0; i < K * N; i++)
		y[i] = (float)(i % 5 - 2);
	if (tpurt_array_create(dev, TPURT_F32, 2, (int64_t[]){ M, K }, &args[0]) ||
	    tpurt_array_create(dev, TPURT_F32, 2, (int64_t[]){ K, N }, &args[1]) ||
	    tpurt_array_create(dev, TPURT_F32, 2, (int64_t[]){ M, N }, &args[2]) ||
	    tpurt_array_write(args[0], x) || tpurt_array_write(args[1], y))
		return fail("arrays");

	if (tpurt_grid_spec_create(3, grid, &gs) ||
	    tpurt_grid_spec_add_input(gs, "x", &xs) ||
	    tpurt_grid_spec_add_input(gs, "y", &ys) ||
	    tpurt_grid_spec_add_output(gs, "z", &zs))
		return fail("grid spec");
	if (tpurt_kernel_create(&kern) ||
	    tpurt_kernel_when(kern, "k == 0") ||
	    tpurt_kernel_zero(kern, "z") ||
	    tpurt_kernel_end_when(kern) ||
	    tpurt_kernel_dot(kern, "z", "x", "y", TPURT_DOT_ACCUMULATE))
		return fail("kernel");
	if (tpurt_pallas_call(kern, gs, &params, args, 3, &st))
		return fail("pallas_call");
	if (tpurt_array_read(args[2], z))
		return fail("read z");

	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double want = 0;

			for (int p = 0; p < K; p++)
				want += (double)x[i * K + p] * y[p * N + j];
			if (z[i * N + j] != want && !bad++)
				printf("z[%d, %d] = %g, want %g\n", i, j,
				       z[i * N + j], want);
		}
	printf("%llu steps, modeled %.1f us: %s\n",
	       (unsigned long long)st.steps, st.model_time_ps * 1e-6,
	       bad ? "FAIL" : "PASS");

	tpurt_kernel_free(kern);
	tpurt_grid_spec_free(gs);
	for (int i = 0; i < 3; i++)
		tpurt_array_free(args[i]);
	tpurt_close(dev);
	return bad ? 1 : 0;
}
