// SPDX-License-Identifier: MIT
/*
 * The guide's analyze_matmul as a benchmark, in the guest: f32 and bf16
 * matmuls with blocks (128, 128, 128), (512, 1024, 1024) and the runtime's
 * choice, at 1024, 2048 and 4096 run on the device (host wall-clock,
 * median of 3), 8192 from the model only; and the round trip of a null
 * job (a 1-step grid) through SUBMIT + JOB_INFO(WAIT). Host wall time and
 * modeled chip time are separate lines, never mixed. Then the templates
 * at 4096 beside the plain bf16 kernel of the same run: the fused RHS
 * transpose's and the fused relu's overheads, and int8's speed-up.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpurt.h"

#define REPS 3
#define NULL_JOBS 300
/* a 4096^3 f32 job takes over the driver's default 10 s on a busy host */
#define JOB_TIMEOUT_MS 120000

static struct tpurt_device *dev;
static struct tpurt_device_info info;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static struct tpurt_array *square(enum tpurt_dtype dt, int64_t n, double v)
{
	int64_t shape[2] = { n, n };
	struct tpurt_array *a;

	if (tpurt_array_create(dev, dt, 2, shape, &a) || tpurt_array_fill(a, v)) {
		fprintf(stderr, "bench_matmul: %s\n", tpurt_last_error());
		return NULL;
	}
	return a;
}

static int row(enum tpurt_dtype dt, int64_t n, const int64_t *blocks,
	       const char *label)
{
	struct tpurt_matmul_opts opts = { .timeout_ms = JOB_TIMEOUT_MS };
	struct tpurt_array *x = square(dt, n, 0.5), *y = square(dt, n, 0.25);
	struct tpurt_array *z = square(dt, n, 0);
	uint64_t wall[REPS], device[REPS];
	struct tpurt_job_stats st;
	const char *name = tpurt_dtype_name(dt);
	double flops = 2.0 * n * n * n, model;

	if (!x || !y || !z)
		return -1;
	if (blocks) {
		opts.bm = blocks[0];
		opts.bk = blocks[1];
		opts.bn = blocks[2];
		/* f32 at (512, 1024, 1024) needs 18 MiB: raise the scoped
		 * limit as a Pallas user would (vmem_limit_bytes) */
		opts.vmem_limit_bytes = info.vmem_size;
	}
	for (int r = 0; r < REPS; r++) {
		if (tpurt_matmul(x, y, z, &opts, &st)) {
			fprintf(stderr, "bench_matmul: %s\n", tpurt_last_error());
			return -1;
		}
		wall[r] = st.call_wall_ns;
		device[r] = st.device_wall_ns;
	}
	qsort(wall, REPS, sizeof(wall[0]), cmp_u64);
	qsort(device, REPS, sizeof(device[0]), cmp_u64);
	model = st.model_time_ps * 1e-12;
	printf("bench: vm_matmul_%s_%s_%lld = %.1f GFLOP/s\n", name, label,
	       (long long)n, flops / (wall[REPS / 2] * 1e-9) / 1e9);
	printf("bench: vm_matmul_%s_%s_%lld_wall = %.6f s\n", name, label,
	       (long long)n, wall[REPS / 2] * 1e-9);
	/* the rest of the call is the guest's ioctls, interrupts and wake-ups */
	printf("bench: vm_matmul_%s_%s_%lld_device_fraction = %.4f\n", name,
	       label, (long long)n, (double)device[REPS / 2] / wall[REPS / 2]);
	printf("bench: modeled_matmul_%s_%s_%lld = %.6f s\n", name, label,
	       (long long)n, model);
	printf("bench: modeled_utilization_%s_%s_%lld = %.2f %%\n", name, label,
	       (long long)n, tpurt_model_utilization(&info, dt, flops, model));
	tpurt_array_free(x);
	tpurt_array_free(y);
	tpurt_array_free(z);
	return 0;
}

static void model_row(enum tpurt_dtype dt, const int64_t *b, const char *label)
{
	struct tpurt_matmul_analysis an;
	int64_t chosen[3];

	if (!b) {
		if (tpurt_matmul_choose_blocks(&info, 8192, 8192, 8192, dt, 0, chosen))
			return;
		b = chosen;
	}
	if (tpurt_matmul_analyze(&info, 8192, 8192, 8192, b[0], b[1], b[2], dt, &an))
		return;
	printf("bench: modeled_matmul_%s_%s_8192 = %.6f s\n",
	       tpurt_dtype_name(dt), label, an.est_time_s);
	printf("bench: modeled_utilization_%s_%s_8192 = %.2f %%\n",
	       tpurt_dtype_name(dt), label,
	       tpurt_model_utilization(&info, dt, 2.0 * 8192 * 8192 * 8192,
				       an.est_time_s));
}

/*
 * The templates beside the plain kernel at 4096, blocks (512, 1024, 1024):
 * bf16 plain, x @ y.T through a transpose view, relu fused, int8 x int8
 * into int32; and bf16 and int8 at the blocks the runtime picks for each
 * (int8's bytes are half bf16's, so its best blocks differ: the speed-up
 * is best against best). The variants take turns in each round, so drift
 * on the host hits them alike; medians of REPS rounds.
 */
enum { T_PLAIN, T_TRANSPOSE, T_RELU, T_INT8, T_PLAIN_AUTO, T_INT8_AUTO, T_COUNT };

struct template_run {
	struct tpurt_array *x, *y, *z;
	struct tpurt_matmul_opts o;
	uint64_t wall[REPS], model;
	int64_t blocks[3];	/* the runtime's, when it picks them */
};

static int template_setup(struct template_run *t, struct tpurt_array *yt_view)
{
	static const enum tpurt_dtype in[T_COUNT] = { TPURT_BF16, TPURT_BF16,
						      TPURT_BF16, TPURT_INT8,
						      TPURT_BF16, TPURT_INT8 };

	for (int v = 0; v < T_COUNT; v++) {
		int auto_blocks = v == T_PLAIN_AUTO || v == T_INT8_AUTO;

		t[v].o = (struct tpurt_matmul_opts){ .bm = 512, .bk = 1024, .bn = 1024 };
		if (auto_blocks)
			t[v].o = (struct tpurt_matmul_opts){ 0 };
		t[v].o.timeout_ms = JOB_TIMEOUT_MS;
		t[v].x = square(in[v], 4096, 0.5);
		t[v].y = v == T_TRANSPOSE ? yt_view : square(in[v], 4096, 0.25);
		t[v].z = square(in[v] == TPURT_INT8 ? TPURT_INT32 : TPURT_BF16, 4096, 0);
		if (!t[v].x || !t[v].y || !t[v].z)
			return -1;
		if (auto_blocks && tpurt_matmul_choose_blocks(&info, 4096, 4096, 4096,
							      in[v], 0, t[v].blocks))
			return -1;
	}
	t[T_RELU].o.activation = TPURT_ACT_RELU;
	return 0;
}

static void template_ratio(const char *name, const struct template_run *a,
			   const struct template_run *b)
{
	printf("bench: %s_wall = %.3f x\n", name,
	       (double)a->wall[REPS / 2] / b->wall[REPS / 2]);
	printf("bench: %s_modeled = %.3f x\n", name, (double)a->model / b->model);
}

static int template_rows(void)
{
	static const char *const label[T_COUNT] = {
		"bfloat16_plain", "bfloat16_transpose_rhs", "bfloat16_relu",
		"int8_int32", "bfloat16_default", "int8_int32_default",
	};
	struct template_run t[T_COUNT] = { 0 };
	struct tpurt_array *yt_store = square(TPURT_BF16, 4096, 0.25), *yt = NULL;
	struct tpurt_job_stats st;
	double flops = 2.0 * 4096 * 4096 * 4096;

	if (!yt_store || tpurt_array_transpose_view(yt_store, &yt) || template_setup(t, yt))
		return -1;
	for (int r = 0; r < REPS; r++) {
		for (int v = 0; v < T_COUNT; v++) {
			if (tpurt_matmul(t[v].x, t[v].y, t[v].z, &t[v].o, &st))
				return -1;
			t[v].wall[r] = st.call_wall_ns;
			t[v].model = st.model_time_ps;
		}
	}
	for (int v = 0; v < T_COUNT; v++) {
		qsort(t[v].wall, REPS, sizeof(t[v].wall[0]), cmp_u64);
		printf("bench: vm_matmul_%s_4096_wall = %.6f s\n", label[v],
		       t[v].wall[REPS / 2] * 1e-9);
		printf("bench: vm_matmul_%s_4096 = %.1f GFLOP/s\n", label[v],
		       flops / (t[v].wall[REPS / 2] * 1e-9) / 1e9);
		printf("bench: modeled_matmul_%s_4096 = %.6f s\n", label[v],
		       t[v].model * 1e-12);
		if (t[v].blocks[0])
			printf("# %s: the runtime picked blocks (%lld, %lld, %lld)\n",
			       label[v], (long long)t[v].blocks[0],
			       (long long)t[v].blocks[1], (long long)t[v].blocks[2]);
	}
	template_ratio("fused_transpose_overhead_4096", &t[T_TRANSPOSE], &t[T_PLAIN]);
	template_ratio("fused_relu_overhead_4096", &t[T_RELU], &t[T_PLAIN]);
	template_ratio("int8_vs_bf16_speedup_4096", &t[T_PLAIN_AUTO], &t[T_INT8_AUTO]);
	template_ratio("int8_vs_bf16_speedup_4096_b512x1024x1024", &t[T_PLAIN], &t[T_INT8]);
	for (int v = 0; v < T_COUNT; v++) {
		tpurt_array_free(t[v].x);
		if (v != T_TRANSPOSE)
			tpurt_array_free(t[v].y);
		tpurt_array_free(t[v].z);
	}
	tpurt_array_free(yt);
	tpurt_array_free(yt_store);
	return 0;
}

/* A 1-step job that zeroes one (8, 128) block: all submission overhead. */
static int null_job_latency(void)
{
	int64_t shape[2] = { 8, 128 }, grid[1] = { 1 };
	struct tpurt_block_spec bs = { 2, { 8, 128 }, "i -> 0, 0" };
	struct tpurt_compiler_params params = { 0 };
	static uint64_t lat[NULL_JOBS];
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	struct tpurt_array *z;
	struct tpurt_job_stats st;

	if (tpurt_array_create(dev, TPURT_F32, 2, shape, &z) ||
	    tpurt_grid_spec_create(1, grid, &gs) ||
	    tpurt_grid_spec_add_output(gs, "z", &bs) ||
	    tpurt_kernel_create(&k) || tpurt_kernel_zero(k, "z"))
		return -1;
	for (int i = 0; i < NULL_JOBS; i++) {
		if (tpurt_pallas_call(k, gs, &params, &z, 1, &st))
			return -1;
		lat[i] = st.call_wall_ns;
	}
	qsort(lat, NULL_JOBS, sizeof(lat[0]), cmp_u64);
	printf("bench: null_job_ioctl_wait_median = %.1f us\n", lat[NULL_JOBS / 2] / 1e3);
	printf("bench: null_job_ioctl_wait_p99 = %.1f us\n",
	       lat[NULL_JOBS * 99 / 100] / 1e3);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(z);
	return 0;
}

/*
 * "bench_matmul headline": only the f32 (512, 1024, 1024) rows and the null
 * job, for iterating on the VM's overheads in a minute instead of several.
 */
int main(int argc, char **argv)
{
	int headline = argc > 1 && !strcmp(argv[1], "headline");
	static const int64_t small[3] = { 128, 128, 128 }, big[3] = { 512, 1024, 1024 };
	static const int64_t sizes[] = { 1024, 2048, 4096 };
	static const enum tpurt_dtype dtypes[] = { TPURT_F32, TPURT_BF16 };

	if (tpurt_open(&dev) || tpurt_device_info(dev, &info)) {
		fprintf(stderr, "bench_matmul: %s\n", tpurt_last_error());
		return 1;
	}
	printf("# device: %u core(s); modeled chip: %.0f TFLOP/s bf16, %.0f GB/s HBM\n",
	       info.cores, info.peak_flops_bf16 / 1e12, info.hbm_bandwidth / 1e9);
	if (headline) {
		for (unsigned int s = 0; s < 3; s++)
			if (row(TPURT_F32, sizes[s], big, "b512x1024x1024"))
				return 1;
		if (null_job_latency())
			return 1;
		tpurt_close(dev);
		return 0;
	}
	for (unsigned int d = 0; d < 2; d++) {
		for (unsigned int s = 0; s < 3; s++) {
			if (row(dtypes[d], sizes[s], small, "b128") ||
			    row(dtypes[d], sizes[s], big, "b512x1024x1024") ||
			    row(dtypes[d], sizes[s], NULL, "default"))
				return 1;
		}
		model_row(dtypes[d], small, "b128");
		model_row(dtypes[d], big, "b512x1024x1024");
		model_row(dtypes[d], NULL, "default");
	}
	if (template_rows()) {
		fprintf(stderr, "bench_matmul: templates: %s\n", tpurt_last_error());
		return 1;
	}
	if (null_job_latency()) {
		fprintf(stderr, "bench_matmul: %s\n", tpurt_last_error());
		return 1;
	}
	tpurt_close(dev);
	return 0;
}
