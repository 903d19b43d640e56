// SPDX-License-Identifier: MIT
/*
 * Host test: pallas_call on the in-process device. The guide's kernels
 * (f32 accumulating into the output; bf16 with an f32 scratch through
 * PrefetchScalarGridSpec; block-sparse through scalar prefetch) against a
 * naive reference; Pallas TPU's block-shape rules; VMEM and kernel errors;
 * the schedule dump's counts against the job's statistics.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "tpurt.h"
#include "kselftest_harness.h"

static struct tpurt_array *new_array(struct __test_metadata *_metadata,
				     struct tpurt_device *dev,
				     enum tpurt_dtype t, int64_t r, int64_t c,
				     uint32_t seed)
{
	int64_t shape[2] = { r, c };
	struct tpurt_array *a;

	if (tpurt_array_create(dev, t, c ? 2 : 1, shape, &a))
		return NULL;
	/* small integers: every sum is exact, in any order */
	ref_fill(tpurt_array_map(a), t, tpurt_array_size(a), seed, -3, 3);
	return a;
}

/* The guide's first kernel: z += x @ y, zeroed at k == 0. */
static struct tpurt_kernel *first_kernel(void)
{
	struct tpurt_kernel *k;

	tpurt_kernel_create(&k);
	tpurt_kernel_when(k, "k == 0");
	tpurt_kernel_zero(k, "z");
	tpurt_kernel_end_when(k);
	tpurt_kernel_dot(k, "z", "x", "y", TPURT_DOT_ACCUMULATE);
	return k;
}

static struct tpurt_grid_spec *matmul_spec(int64_t m, int64_t k, int64_t n,
					   int64_t bm, int64_t bk, int64_t bn)
{
	int64_t grid[3] = { (m + bm - 1) / bm, (n + bn - 1) / bn, (k + bk - 1) / bk };
	struct tpurt_block_spec xs = { 2, { bm, bk }, "i, j, k -> i, k" };
	struct tpurt_block_spec ys = { 2, { bk, bn }, "i, j, k -> k, j" };
	struct tpurt_block_spec zs = { 2, { bm, bn }, "i, j, k -> i, j" };
	struct tpurt_grid_spec *gs;

	if (tpurt_grid_spec_create(3, grid, &gs))
		return NULL;
	if (tpurt_grid_spec_add_input(gs, "x", &xs) ||
	    tpurt_grid_spec_add_input(gs, "y", &ys) ||
	    tpurt_grid_spec_add_output(gs, "z", &zs)) {
		tpurt_grid_spec_free(gs);
		return NULL;
	}
	return gs;
}

static const struct tpurt_compiler_params ppa = {
	.dimension_semantics = "parallel, parallel, arbitrary",
};

FIXTURE(sim) {
	struct tpurt_device *dev;
};

FIXTURE_SETUP(sim)
{
	struct tpurt_sim_config cfg = { .hbm_size = 64 << 20 };

	ASSERT_EQ(0, tpurt_open_sim(&cfg, &self->dev)) TH_LOG("%s", tpurt_last_error());
}

FIXTURE_TEARDOWN(sim)
{
	tpurt_close(self->dev);
}

static void check_matmul(struct __test_metadata *_metadata, struct tpurt_array *x,
			 struct tpurt_array *y, struct tpurt_array *z,
			 enum tpurt_dtype out)
{
	struct mm_job j = {
		.m = (uint64_t)tpurt_array_dim(x, 0), .k = (uint64_t)tpurt_array_dim(x, 1),
		.n = (uint64_t)tpurt_array_dim(y, 1),
		.in_dtype = tpurt_array_dtype(x), .out_dtype = out,
	};
	size_t bytes = j.m * j.n * tpurt_dtype_size(out);
	void *want = malloc(bytes);

	ref_matmul(&j, tpurt_array_map(x), tpurt_array_map(y), NULL, want);
	EXPECT_EQ(0, memcmp(want, tpurt_array_map(z), bytes));
	free(want);
}

TEST_F(sim, first_kernel_f32_accumulates_into_the_output)
{
	struct tpurt_array *x = new_array(_metadata, self->dev, TPURT_F32, 256, 384, 1);
	struct tpurt_array *y = new_array(_metadata, self->dev, TPURT_F32, 384, 256, 2);
	struct tpurt_array *z = new_array(_metadata, self->dev, TPURT_F32, 256, 256, 3);
	struct tpurt_array *args[] = { x, y, z };
	struct tpurt_grid_spec *gs = matmul_spec(256, 384, 256, 128, 128, 128);
	struct tpurt_kernel *k = first_kernel();
	struct tpurt_schedule_counts cnt;
	struct tpurt_job_stats st;

	ASSERT_NE(NULL, gs);
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, &ppa, args, 3, &st)) TH_LOG("%s", tpurt_last_error());
	check_matmul(_metadata, x, y, z, TPURT_F32);
	EXPECT_EQ(2 * 2 * 3, st.steps);
	EXPECT_EQ(2ull * 256 * 384 * 256, st.mxu_flops);
	EXPECT_GT(st.model_time_ps, 0);
	EXPECT_GT(st.call_wall_ns, 0);
	/* the schedule the runtime predicts is the one the device ran */
	ASSERT_EQ(0, tpurt_schedule_dump(gs, args, 3, NULL, 0, &cnt));
	EXPECT_EQ(st.steps, cnt.steps);
	EXPECT_EQ(st.blocks_fetched, cnt.blocks_fetched);
	EXPECT_EQ(st.blocks_skipped, cnt.blocks_skipped);
	EXPECT_EQ(st.blocks_written, cnt.blocks_written);
	EXPECT_EQ(4, cnt.blocks_written);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(z);
}

TEST_F(sim, bf16_with_an_f32_scratch_accumulator)
{
	struct tpurt_array *x = new_array(_metadata, self->dev, TPURT_BF16, 256, 512, 4);
	struct tpurt_array *y = new_array(_metadata, self->dev, TPURT_BF16, 512, 384, 5);
	struct tpurt_array *z = new_array(_metadata, self->dev, TPURT_BF16, 256, 384, 6);
	struct tpurt_array *args[] = { x, y, z };
	struct tpurt_grid_spec *gs = matmul_spec(256, 512, 384, 128, 256, 128);
	int64_t acc[2] = { 128, 128 };
	struct tpurt_kernel *k;
	struct tpurt_job_stats st;

	ASSERT_NE(NULL, gs);
	ASSERT_EQ(0, tpurt_grid_spec_add_scratch(gs, "acc", TPURT_VMEM, TPURT_F32, 2, acc));
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	tpurt_kernel_when(k, "k == 0");
	tpurt_kernel_zero(k, "acc");
	tpurt_kernel_end_when(k);
	tpurt_kernel_dot(k, "acc", "x", "y", TPURT_DOT_ACCUMULATE);
	tpurt_kernel_when(k, "i, j, k -> k == num_programs(k) - 1");
	tpurt_kernel_store(k, "z", "acc");
	ASSERT_EQ(0, tpurt_kernel_end_when(k));
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, &ppa, args, 3, &st)) TH_LOG("%s", tpurt_last_error());
	check_matmul(_metadata, x, y, z, TPURT_BF16);
	EXPECT_EQ(2 * 3 * 2, st.steps);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(z);
}

/*
 * Block-sparse: output block row i is x's block row rows[i] times y,
 * accumulated only where mask[i * nk + k] is set.
 */
TEST_F(sim, block_sparse_through_scalar_prefetch)
{
	enum { B = 128, GI = 3, GJ = 2, GK = 3, XR = 4 };
	static const int32_t rows[GI] = { 3, 0, 2 };
	static const int32_t mask[GI * GK] = { 1, 0, 1, 0, 0, 0, 1, 1, 1 };
	int64_t rshape[1] = { GI }, mshape[1] = { GI * GK };
	struct tpurt_array *x = new_array(_metadata, self->dev, TPURT_F32, XR * B, GK * B, 7);
	struct tpurt_array *y = new_array(_metadata, self->dev, TPURT_F32, GK * B, GJ * B, 8);
	struct tpurt_array *z = new_array(_metadata, self->dev, TPURT_F32, GI * B, GJ * B, 9);
	struct tpurt_array *r, *mk;
	int64_t grid[3] = { GI, GJ, GK };
	struct tpurt_block_spec xs = { 2, { B, B }, "i, j, k, rows, mask -> rows[i], k" };
	struct tpurt_block_spec ys = { 2, { B, B }, "i, j, k -> k, j" };
	struct tpurt_block_spec zs = { 2, { B, B }, "i, j, k -> i, j" };
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	struct tpurt_schedule_counts cnt;
	struct tpurt_job_stats st;
	float *want = calloc(GI * B * GJ * B, sizeof(float));
	const float *xv, *yv;

	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_INT32, 1, rshape, &r));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_INT32, 1, mshape, &mk));
	tpurt_array_write(r, rows);
	tpurt_array_write(mk, mask);
	ASSERT_EQ(0, tpurt_grid_spec_create(3, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_scalar_prefetch(gs, "rows"));
	ASSERT_EQ(0, tpurt_grid_spec_add_scalar_prefetch(gs, "mask"));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "x", &xs)) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "y", &ys));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "z", &zs));
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	tpurt_kernel_when(k, "k == 0");
	tpurt_kernel_zero(k, "z");
	tpurt_kernel_end_when(k);
	tpurt_kernel_when(k, "mask[i * num_programs(k) + k] != 0");
	tpurt_kernel_dot(k, "#4", "#2", "#3", TPURT_DOT_ACCUMULATE);	/* by index */
	tpurt_kernel_end_when(k);
	{
		struct tpurt_array *args[] = { r, mk, x, y, z };

		ASSERT_EQ(0, tpurt_pallas_call(k, gs, &ppa, args, 5, &st))
			TH_LOG("%s", tpurt_last_error());
		ASSERT_EQ(0, tpurt_schedule_dump(gs, args, 5, NULL, 0, &cnt));
	}
	xv = tpurt_array_map(x);
	yv = tpurt_array_map(y);
	for (int i = 0; i < GI; i++)
		for (int kk = 0; kk < GK; kk++) {
			if (!mask[i * GK + kk])
				continue;
			for (int a = 0; a < B; a++)
				for (int c = 0; c < GJ * B; c++) {
					double s = 0;

					for (int p = 0; p < B; p++)
						s += xv[(rows[i] * B + a) * GK * B + kk * B + p] *
						     yv[(kk * B + p) * GJ * B + c];
					want[(i * B + a) * GJ * B + c] += (float)s;
				}
		}
	EXPECT_EQ(0, memcmp(want, tpurt_array_map(z), GI * B * GJ * B * sizeof(float)));
	EXPECT_EQ(st.blocks_fetched, cnt.blocks_fetched);
	EXPECT_EQ(st.blocks_skipped, cnt.blocks_skipped);
	EXPECT_EQ(st.blocks_written, cnt.blocks_written);
	free(want);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(z);
	tpurt_array_free(r), tpurt_array_free(mk);
}

/* pallas_call's error for @xb x @yb blocks on (m, k) @ (k, n) arrays. */
static int block_error(struct tpurt_device *dev, int64_t m, int64_t k, int64_t n,
		       const int64_t *xb, const int64_t *yb)
{
	int64_t xs[2] = { m, k }, ys[2] = { k, n }, zs[2] = { m, n };
	int64_t grid[3] = { 1, 1, 1 };
	struct tpurt_block_spec x = { 2, { xb[0], xb[1] }, "i, j, k -> 0, 0" };
	struct tpurt_block_spec y = { 2, { yb[0], yb[1] }, "i, j, k -> 0, 0" };
	struct tpurt_block_spec z = { 2, { xb[0], yb[1] }, "i, j, k -> 0, 0" };
	struct tpurt_array *a[3] = { 0 };
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *kern = first_kernel();
	void *desc = NULL;
	size_t len;
	int ret;

	tpurt_array_create(dev, TPURT_F32, 2, xs, &a[0]);
	tpurt_array_create(dev, TPURT_F32, 2, ys, &a[1]);
	tpurt_array_create(dev, TPURT_F32, 2, zs, &a[2]);
	tpurt_grid_spec_create(3, grid, &gs);
	tpurt_grid_spec_add_input(gs, "x", &x);
	tpurt_grid_spec_add_input(gs, "y", &y);
	tpurt_grid_spec_add_output(gs, "z", &z);
	ret = tpurt_pallas_call_build(kern, gs, NULL, a, 3, &desc, &len);
	free(desc);
	tpurt_kernel_free(kern);
	tpurt_grid_spec_free(gs);
	for (int i = 0; i < 3; i++)
		tpurt_array_free(a[i]);
	return ret;
}

TEST_F(sim, block_shapes_follow_pallas_tpu)
{
	const int64_t b8x128[2] = { 8, 128 }, b128[2] = { 128, 128 };
	const int64_t b4x128[2] = { 4, 128 }, b8x64[2] = { 8, 64 };
	const int64_t b100x200[2] = { 100, 200 }, b200x100[2] = { 200, 100 };

	EXPECT_EQ(0, block_error(self->dev, 256, 256, 256, b8x128, b128));
	/* equal to the array's dims: allowed whatever they are */
	EXPECT_EQ(0, block_error(self->dev, 100, 200, 100, b100x200, b200x100));
	EXPECT_EQ(-EINVAL, block_error(self->dev, 256, 256, 256, b4x128, b128));
	EXPECT_NE(NULL, strstr(tpurt_last_error(),
			       "input 'x': block shape (4, 128): dimension 0 is 4, which is neither a multiple of 8 nor the array's 256"))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(-EINVAL, block_error(self->dev, 256, 256, 256, b8x64, b128));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "dimension 1 is 64, which is neither a multiple of 128"))
		TH_LOG("%s", tpurt_last_error());
}

TEST_F(sim, rank_one_blocks)
{
	int64_t shape[1] = { 1000 }, grid[1] = { 8 };
	struct tpurt_block_spec ok = { 1, { 128 }, "i -> i" };
	struct tpurt_block_spec whole = { 1, { 1000 }, "i -> 0" };
	struct tpurt_block_spec bad = { 1, { 100 }, "i -> i" };
	struct tpurt_array *a, *b;
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	struct tpurt_job_stats st;

	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 1, shape, &a));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 1, shape, &b));
	tpurt_array_fill(a, -2);
	tpurt_kernel_create(&k);
	tpurt_kernel_unary(k, TPURT_ABS, "out", "in");
	{
		struct tpurt_array *args[] = { a, b };
		const struct tpurt_block_spec *specs[3] = { &ok, &whole, &bad };
		const int want[3] = { 0, 0, -EINVAL };

		for (int i = 0; i < 3; i++) {
			grid[0] = i == 1 ? 1 : 8;
			ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &gs));
			ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "in", specs[i]));
			ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "out", specs[i]));
			EXPECT_EQ(want[i], tpurt_pallas_call(k, gs, NULL, args, 2, &st))
				TH_LOG("%d: %s", i, tpurt_last_error());
			tpurt_grid_spec_free(gs);
		}
		EXPECT_NE(NULL, strstr(tpurt_last_error(), "neither a multiple of 128 nor the array's 1000"));
	}
	EXPECT_EQ(2.0f, ((float *)tpurt_array_map(b))[999]);	/* the edge block */
	tpurt_kernel_free(k);
	tpurt_array_free(a), tpurt_array_free(b);
}

/*
 * A kernel of TPU_JOB_MAX_OPS operations, each under a when() (more
 * scalar-core code than the 4096 instructions a job held before), runs
 * through pallas_call; one more operation is refused by the builder.
 */
TEST_F(sim, kernel_of_the_most_operations)
{
	int64_t shape[2] = { 8, 128 }, grid[1] = { 2 };
	struct tpurt_block_spec zs = { 2, { 8, 128 }, "i -> 0, 0" };
	const struct tpurt_compiler_params arb = { .dimension_semantics = "arbitrary" };
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	struct tpurt_array *z;
	struct tpurt_job_stats st;
	const float *out;

	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 2, shape, &z));
	ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "z", &zs));
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_when(k, "i == 0"));
	ASSERT_EQ(0, tpurt_kernel_zero(k, "z"));
	ASSERT_EQ(0, tpurt_kernel_end_when(k));
	ASSERT_EQ(0, tpurt_kernel_when(k, "i >= 0"));
	for (int n = 1; n < TPU_JOB_MAX_OPS; n++) {
		ASSERT_EQ(0, tpurt_kernel_binary_scalar(k, TPURT_ADD, "z", "z", 1.0f))
			TH_LOG("op %d: %s", n, tpurt_last_error());
	}
	ASSERT_EQ(0, tpurt_kernel_end_when(k));
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, &arb, &z, 1, &st)) TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(2, st.steps);
	out = tpurt_array_map(z);
	for (int e = 0; e < 8 * 128; e++) {
		ASSERT_EQ(2.0f * (TPU_JOB_MAX_OPS - 1), out[e]) TH_LOG("element %d", e);
	}

	EXPECT_EQ(-E2BIG, tpurt_kernel_zero(k, "z"));
	EXPECT_STREQ("kernel: more than 2048 operations", tpurt_last_error());
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(z);
}

TEST_F(sim, vmem_need_against_the_limit)
{
	struct tpurt_array *x = new_array(_metadata, self->dev, TPURT_F32, 1024, 1024, 1);
	struct tpurt_array *y = new_array(_metadata, self->dev, TPURT_F32, 1024, 1024, 2);
	struct tpurt_array *z = new_array(_metadata, self->dev, TPURT_F32, 1024, 1024, 3);
	struct tpurt_array *args[] = { x, y, z };
	/* x and y blocks of 2 MiB, z of 1 MiB, double-buffered: 10 MiB */
	struct tpurt_grid_spec *gs = matmul_spec(1024, 1024, 1024, 512, 1024, 512);
	struct tpurt_kernel *k = first_kernel();
	struct tpurt_compiler_params small = { .vmem_limit_bytes = 8 << 20 };
	struct tpurt_compiler_params huge = { .vmem_limit_bytes = 1ull << 30 };

	ASSERT_NE(NULL, gs);
	EXPECT_EQ(-ENOSPC, tpurt_pallas_call(k, gs, &small, args, 3, NULL));
	EXPECT_NE(NULL, strstr(tpurt_last_error(),
			       "needs 10485760 bytes ('x' 2 x 2097152, 'y' 2 x 2097152, 'z' 2 x 1048576) but the limit is 8388608 (over by 2097152)"))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(-EINVAL, tpurt_pallas_call(k, gs, &huge, args, 3, NULL));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "over the device's 134217728 bytes of VMEM"));
	/* the default limit (16 MiB) holds it */
	EXPECT_EQ(0, tpurt_pallas_call(k, gs, NULL, args, 3, NULL)) TH_LOG("%s", tpurt_last_error());
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(z);
}

/* The message pallas_call gives for kernel @k on the first kernel's spec. */
static const char *kernel_error(struct tpurt_device *dev, struct tpurt_kernel *k,
				enum tpurt_dtype zt, const char *sem)
{
	int64_t s[2] = { 128, 128 }, grid[3] = { 1, 1, 1 };
	struct tpurt_block_spec b = { 2, { 128, 128 }, "i, j, k -> 0, 0" };
	struct tpurt_compiler_params p = { .dimension_semantics = sem };
	struct tpurt_array *a[3] = { 0 };
	struct tpurt_grid_spec *gs;
	static char msg[512];

	tpurt_array_create(dev, TPURT_BF16, 2, s, &a[0]);
	tpurt_array_create(dev, TPURT_BF16, 2, s, &a[1]);
	tpurt_array_create(dev, zt, 2, s, &a[2]);
	tpurt_grid_spec_create(3, grid, &gs);
	tpurt_grid_spec_add_input(gs, "x", &b);
	tpurt_grid_spec_add_input(gs, "y", &b);
	tpurt_grid_spec_add_output(gs, "z", &b);
	snprintf(msg, sizeof(msg), "%d: ", tpurt_pallas_call(k, gs, &p, a, 3, NULL));
	strncat(msg, tpurt_last_error(), sizeof(msg) - strlen(msg) - 1);
	tpurt_grid_spec_free(gs);
	tpurt_kernel_free(k);
	for (int i = 0; i < 3; i++)
		tpurt_array_free(a[i]);
	return msg;
}

static struct tpurt_kernel *one_op(int which)
{
	struct tpurt_kernel *k;

	tpurt_kernel_create(&k);
	switch (which) {
	case 0: tpurt_kernel_dot(k, "z", "x", "y", 0); break;
	case 1: tpurt_kernel_dot(k, "acc", "x", "y", 0); break;
	case 2: tpurt_kernel_zero(k, "x"); break;
	case 3: tpurt_kernel_when(k, "k == q"); tpurt_kernel_zero(k, "z");
		tpurt_kernel_end_when(k); break;
	case 4: tpurt_kernel_zero(k, "#7"); break;
	case 5: tpurt_kernel_when(k, "k == 0"); tpurt_kernel_zero(k, "z"); break;
	}
	return k;
}

TEST_F(sim, kernel_errors_name_the_op)
{
	/* the device's rules, in the call's words */
	EXPECT_STREQ("-22: kernel op 0 (dot): bfloat16 x bfloat16 dot accumulates into float32, but dst 'z' is bfloat16; accumulate in an f32 scratch (preferred_element_type) and cast at the last step",
		     kernel_error(self->dev, one_op(0), TPURT_BF16, NULL));
	EXPECT_STREQ("-22: kernel op 0 (zero): dst is input 'x', which is read-only",
		     kernel_error(self->dev, one_op(2), TPURT_F32, NULL));
	/* the runtime's own: names, text, the builder's state */
	EXPECT_STREQ("-22: kernel op 0 (dot): no ref named 'acc' (refs: x, y, z)",
		     kernel_error(self->dev, one_op(1), TPURT_F32, NULL));
	EXPECT_NE(NULL, strstr(kernel_error(self->dev, one_op(3), TPURT_F32, NULL),
			       "kernel op 0 (zero): predicate: unknown name 'q' at column 6"));
	EXPECT_STREQ("-22: kernel op 0 (zero): ref '#7': refs are #0 to #2",
		     kernel_error(self->dev, one_op(4), TPURT_F32, NULL));
	EXPECT_STREQ("-22: kernel: 1 when() block(s) not ended",
		     kernel_error(self->dev, one_op(5), TPURT_F32, NULL));
	EXPECT_STREQ("-22: dimension_semantics 'parallel, sideways, arbitrary': 'sideways' is neither parallel nor arbitrary",
		     kernel_error(self->dev, one_op(0), TPURT_F32, "parallel, sideways, arbitrary"));
}

/*
 * The message pallas_call_build gives for @k over scalar prefetch s ((4,),
 * of @st), inputs x (bf16 (128, 256)), y (bf16 (256, 128)), f (f32 (128,
 * 128)), output z (f32 (128, 128)), scratch acc (VMEM f32 (128, 128)) and
 * sm (SMEM int32 (16,)), every block the whole array.
 */
static const char *rules_error(struct tpurt_device *dev, struct tpurt_kernel *k,
			       enum tpurt_dtype st)
{
	static const struct { const char *name; enum tpurt_dtype t; int64_t r, c; } in[] = {
		{ "x", TPURT_BF16, 128, 256 }, { "y", TPURT_BF16, 256, 128 },
		{ "f", TPURT_F32, 128, 128 }, { "z", TPURT_F32, 128, 128 },
	};
	int64_t grid[3] = { 1, 1, 1 }, sshape[1] = { 4 }, acc[2] = { 128, 128 };
	int64_t sm[1] = { 16 };
	struct tpurt_array *a[5] = { 0 };
	struct tpurt_grid_spec *gs;
	static char msg[512];
	void *desc = NULL;
	size_t len;

	tpurt_array_create(dev, st, 1, sshape, &a[0]);
	tpurt_grid_spec_create(3, grid, &gs);
	tpurt_grid_spec_add_scalar_prefetch(gs, "s");
	for (int i = 0; i < 4; i++) {
		int64_t shape[2] = { in[i].r, in[i].c };
		struct tpurt_block_spec b = { 2, { in[i].r, in[i].c }, "i, j, k -> 0, 0" };

		tpurt_array_create(dev, in[i].t, 2, shape, &a[i + 1]);
		if (i < 3)
			tpurt_grid_spec_add_input(gs, in[i].name, &b);
		else
			tpurt_grid_spec_add_output(gs, in[i].name, &b);
	}
	tpurt_grid_spec_add_scratch(gs, "acc", TPURT_VMEM, TPURT_F32, 2, acc);
	tpurt_grid_spec_add_scratch(gs, "sm", TPURT_SMEM, TPURT_INT32, 1, sm);
	snprintf(msg, sizeof(msg), "%d: ",
		 tpurt_pallas_call_build(k, gs, NULL, a, 5, &desc, &len));
	strncat(msg, desc ? "built" : tpurt_last_error(), sizeof(msg) - strlen(msg) - 1);
	free(desc);
	tpurt_grid_spec_free(gs);
	tpurt_kernel_free(k);
	for (int i = 0; i < 5; i++)
		tpurt_array_free(a[i]);
	return msg;
}

static struct tpurt_kernel *rule_op(int which)
{
	struct tpurt_kernel *k;

	tpurt_kernel_create(&k);
	switch (which) {
	case 0: tpurt_kernel_dot(k, "acc", "x", "f", 0); break;
	case 1: tpurt_kernel_dot(k, "acc", "x", "x", 0); break;
	case 2: tpurt_kernel_dot(k, "acc", "y", "x", 0); break;
	case 3: tpurt_kernel_dot(k, "acc", "s", "y", 0); break;
	case 4: tpurt_kernel_unary(k, TPURT_RELU, "z", "x"); break;
	case 5: tpurt_kernel_store(k, "z", "s"); break;
	case 6: tpurt_kernel_zero(k, "acc");
		tpurt_kernel_binary(k, TPURT_ADD, "z", "acc", "f", TPURT_BCAST_ROW);
		break;
	case 7: tpurt_kernel_binary_smem(k, TPURT_MUL, "z", "f", "f", "0"); break;
	case 8: tpurt_kernel_zero(k, "sm"); break;
	default: tpurt_kernel_zero(k, "z"); break;
	}
	return k;
}

TEST_F(sim, device_rules_in_the_calls_words)
{
	struct tpurt_sim_config small = { .hbm_size = 64 << 20, .smem_size = 64 };
	struct tpurt_device *dev;

	EXPECT_STREQ("0: built", rules_error(self->dev, rule_op(-1), TPURT_INT32));
	EXPECT_STREQ("-22: kernel op 0 (dot): dot of dtypes bfloat16 x float32 (src0 'x', src1 'f') unsupported: the MXU multiplies float32 x float32, bfloat16 x bfloat16 or 8-bit x 8-bit",
		     rules_error(self->dev, rule_op(0), TPURT_INT32));
	EXPECT_STREQ("-22: kernel op 0 (dot): contraction sizes differ: src0 'x' gives 256, src1 'x' gives 128",
		     rules_error(self->dev, rule_op(1), TPURT_INT32));
	EXPECT_STREQ("-22: kernel op 0 (dot): the product is 256x256 but dst 'acc' is 128x128",
		     rules_error(self->dev, rule_op(2), TPURT_INT32));
	EXPECT_STREQ("-22: kernel op 0 (dot): dot sources must be VMEM refs, src0 's' is not",
		     rules_error(self->dev, rule_op(3), TPURT_INT32));
	EXPECT_STREQ("-22: kernel op 0 (unary): src0 'x' is 128x256 but dst 'z' is 128x128",
		     rules_error(self->dev, rule_op(4), TPURT_INT32));
	EXPECT_STREQ("-22: kernel op 0 (unary): src0 's' is not a VMEM ref (SMEM is read by bcast smem only)",
		     rules_error(self->dev, rule_op(5), TPURT_INT32));
	EXPECT_STREQ("-22: kernel op 1 (binary): src1 'f' is 128x128; bcast row needs 1x128 for dst 'z' (128x128)",
		     rules_error(self->dev, rule_op(6), TPURT_INT32));
	EXPECT_STREQ("-22: kernel op 0 (binary): bcast smem needs an SMEM src1 (scalar prefetch or SMEM scratch), src1 is 'f'",
		     rules_error(self->dev, rule_op(7), TPURT_INT32));
	EXPECT_STREQ("-22: kernel op 0 (zero): dst 'sm' is not a VMEM ref (an output block or VMEM scratch)",
		     rules_error(self->dev, rule_op(8), TPURT_INT32));
	EXPECT_STREQ("0: built", rules_error(self->dev, rule_op(-1), TPURT_F32));
	EXPECT_STREQ("-22: scalar prefetch 's': dtype bfloat16, scalar prefetch must be int32 or float32",
		     rules_error(self->dev, rule_op(-1), TPURT_BF16));
	/* 16 bytes of s and 64 of sm in a 64-byte SMEM */
	ASSERT_EQ(0, tpurt_open_sim(&small, &dev)) TH_LOG("%s", tpurt_last_error());
	EXPECT_STREQ("-28: SMEM: scalar prefetch and SMEM scratch need 80 bytes ('s' 16, scratch 'sm' 64), the device has 64 (over by 16)",
		     rules_error(dev, rule_op(-1), TPURT_INT32));
	tpurt_close(dev);
}

TEST_F(sim, device_errors_name_the_operand)
{
	struct tpurt_array *x = new_array(_metadata, self->dev, TPURT_F32, 256, 256, 1);
	struct tpurt_array *y = new_array(_metadata, self->dev, TPURT_F32, 256, 256, 2);
	struct tpurt_array *z = new_array(_metadata, self->dev, TPURT_F32, 256, 256, 3);
	struct tpurt_array *args[] = { x, y, z };
	int64_t grid[3] = { 2, 2, 2 };
	struct tpurt_block_spec xs = { 2, { 128, 128 }, "i, j, k -> i + 1, k" };
	struct tpurt_block_spec ys = { 2, { 128, 128 }, "i, j, k -> k, j" };
	struct tpurt_block_spec zs = { 2, { 128, 128 }, "i, j, k -> i, j" };
	struct tpurt_kernel *k = first_kernel();
	struct tpurt_grid_spec *gs;
	struct tpurt_job *job;
	struct tpurt_job_stats st;

	ASSERT_EQ(0, tpurt_grid_spec_create(3, grid, &gs));
	tpurt_grid_spec_add_input(gs, "x", &xs);
	tpurt_grid_spec_add_input(gs, "y", &ys);
	tpurt_grid_spec_add_output(gs, "z", &zs);
	ASSERT_EQ(0, tpurt_pallas_call_async(k, gs, &ppa, args, 3, &job));
	EXPECT_EQ(0, tpurt_job_syncobj(job));
	EXPECT_EQ(-EIO, tpurt_job_wait(job, &st));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "[operand 'x']")) TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(6, st.error.code);	/* TPU_JOB_ERR_BLOCK_OOB */
	EXPECT_EQ(0, st.error.operand);
	EXPECT_EQ(2, st.error.block[0]);
	tpurt_job_free(job);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(z);
}

TEST_F(sim, schedule_dump_shows_fetches_and_skips)
{
	struct tpurt_array *x = new_array(_metadata, self->dev, TPURT_F32, 256, 128, 1);
	struct tpurt_array *y = new_array(_metadata, self->dev, TPURT_F32, 128, 256, 2);
	struct tpurt_array *z = new_array(_metadata, self->dev, TPURT_F32, 256, 256, 3);
	struct tpurt_array *args[] = { x, y, z };
	struct tpurt_grid_spec *gs = matmul_spec(256, 128, 256, 128, 128, 128);
	struct tpurt_schedule_counts cnt;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	ASSERT_NE(NULL, gs);
	ASSERT_EQ(0, tpurt_schedule_dump(gs, args, 3, f, 3, &cnt));
	fclose(f);
	/* one k step: x's block repeats along j */
	EXPECT_STREQ("step 0 (0, 0, 0):  x[0, 0] fetch  y[0, 0] fetch  z[0, 0] write\n"
		     "step 1 (0, 1, 0):  x[0, 0] skip  y[0, 1] fetch  z[0, 1] write\n"
		     "step 2 (1, 0, 0):  x[1, 0] fetch  y[0, 0] fetch  z[1, 0] write\n"
		     "... 1 more steps\n", text);
	EXPECT_EQ(4, cnt.steps);
	EXPECT_EQ(6, cnt.blocks_fetched);
	EXPECT_EQ(2, cnt.blocks_skipped);
	EXPECT_EQ(4, cnt.blocks_written);
	free(text);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(z);
}

/*
 * An index map reading one past scalar prefetch s: the device reads t[0]
 * there (its SMEM holds s and t back to back), and the schedule dump,
 * laying them out so, predicts the same blocks; two past t fails in both.
 */
TEST_F(sim, schedule_dump_reads_past_a_prefetch_array_as_the_device)
{
	static const int32_t sv[2] = { 0, 1 }, tv[1] = { 3 };
	int64_t one[1] = { 1 }, two[1] = { 2 }, grid[1] = { 3 };
	struct tpurt_array *x = new_array(_metadata, self->dev, TPURT_F32, 32, 128, 4);
	struct tpurt_array *z = new_array(_metadata, self->dev, TPURT_F32, 24, 128, 5);
	struct tpurt_block_spec xs = { 2, { 8, 128 }, "i, s, t -> s[i], 0" };
	struct tpurt_block_spec bad = { 2, { 8, 128 }, "i, s, t -> s[i + 2], 0" };
	struct tpurt_block_spec zs = { 2, { 8, 128 }, "i, s, t -> i, 0" };
	struct tpurt_array *s, *t;
	struct tpurt_schedule_counts cnt;
	struct tpurt_grid_spec *gs;
	struct tpurt_job_stats st;
	struct tpurt_kernel *k;
	const float *xv, *zv;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int bad_elems = 0;

	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_INT32, 1, two, &s));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_INT32, 1, one, &t));
	tpurt_array_write(s, sv);
	tpurt_array_write(t, tv);
	for (int pass = 0; pass < 2; pass++) {
		struct tpurt_array *args[] = { s, t, x, z };

		ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &gs));
		ASSERT_EQ(0, tpurt_grid_spec_add_scalar_prefetch(gs, "s"));
		ASSERT_EQ(0, tpurt_grid_spec_add_scalar_prefetch(gs, "t"));
		ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "x", pass ? &bad : &xs))
			TH_LOG("%s", tpurt_last_error());
		ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "z", &zs));
		ASSERT_EQ(0, tpurt_kernel_create(&k));
		tpurt_kernel_unary(k, TPURT_IDENTITY, "z", "x");
		if (!pass) {
			ASSERT_EQ(0, tpurt_pallas_call(k, gs, NULL, args, 4, &st))
				TH_LOG("%s", tpurt_last_error());
			ASSERT_EQ(0, tpurt_schedule_dump(gs, args, 4, f, 0, &cnt))
				TH_LOG("%s", tpurt_last_error());
		} else {
			/* s[3] is past s and t, the job's whole SMEM */
			EXPECT_GT(0, tpurt_pallas_call(k, gs, NULL, args, 4, &st));
			EXPECT_NE(NULL, strstr(tpurt_last_error(), "SMEM index 3 outside"))
				TH_LOG("%s", tpurt_last_error());
			EXPECT_EQ(-ERANGE, tpurt_schedule_dump(gs, args, 4, NULL, 0, &cnt));
		}
		tpurt_kernel_free(k);
		tpurt_grid_spec_free(gs);
	}
	fclose(f);
	EXPECT_STREQ("step 0 (0):  x[0, 0] fetch  z[0, 0] write\n"
		     "step 1 (1):  x[1, 0] fetch  z[1, 0] write\n"
		     "step 2 (2):  x[3, 0] fetch  z[2, 0] write\n", text);
	xv = tpurt_array_map(x);
	zv = tpurt_array_map(z);
	for (int r = 0; r < 24; r++)
		for (int c = 0; c < 128; c++)
			bad_elems += zv[r * 128 + c] !=
				     xv[((r < 16 ? r : r + 8)) * 128 + c];
	EXPECT_EQ(0, bad_elems);	/* step 2 read block t[0] = 3 */
	free(text);
	tpurt_array_free(s), tpurt_array_free(t);
	tpurt_array_free(x), tpurt_array_free(z);
}

/*
 * pl.Buffered(1, revisit=pl.RevisitMode.ANY): o's block (0, j) revisited
 * at every i, read back each time; the schedule dump predicts the reads.
 */
TEST_F(sim, revisit_any_output_accumulates_across_visits)
{
	struct tpurt_array *x = new_array(_metadata, self->dev, TPURT_F32, 24, 384, 10);
	struct tpurt_array *o = new_array(_metadata, self->dev, TPURT_F32, 8, 384, 11);
	struct tpurt_array *args[] = { x, o };
	int64_t grid[2] = { 3, 3 };
	struct tpurt_block_spec xs = { 2, { 8, 128 }, "i, j -> i, j" };
	struct tpurt_block_spec os = { 2, { 8, 128 }, "i, j -> 0, j",
				       .buffer_count = 1,
				       .revisit = TPURT_REVISIT_ANY };
	const float *xv, *ov;
	struct tpurt_schedule_counts cnt;
	struct tpurt_grid_spec *gs;
	struct tpurt_job_stats st;
	struct tpurt_kernel *k;
	char *dump = NULL;
	size_t dump_len = 0;
	FILE *f;

	ASSERT_EQ(0, tpurt_grid_spec_create(2, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "x", &xs));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "o", &os));
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	tpurt_kernel_when(k, "i == 0");
	tpurt_kernel_zero(k, "o");
	tpurt_kernel_end_when(k);
	tpurt_kernel_binary(k, TPURT_ADD, "o", "o", "x", TPURT_BCAST_NONE);
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, NULL, args, 2, &st)) TH_LOG("%s", tpurt_last_error());
	xv = tpurt_array_map(x);
	ov = tpurt_array_map(o);
	for (int e = 0; e < 8 * 384; e++) {
		ASSERT_EQ(xv[e] + xv[8 * 384 + e] + xv[16 * 384 + e], ov[e]) TH_LOG("element %d", e);
	}
	EXPECT_EQ(9 + 9, st.blocks_fetched);
	EXPECT_EQ(9, st.blocks_written);
	f = open_memstream(&dump, &dump_len);
	ASSERT_EQ(0, tpurt_schedule_dump(gs, args, 2, f, 0, &cnt));
	fclose(f);
	EXPECT_EQ(st.blocks_fetched, cnt.blocks_fetched);
	EXPECT_EQ(st.blocks_written, cnt.blocks_written);
	EXPECT_NE(NULL, strstr(dump, "step 3 (1, 0):  x[1, 0] fetch  o[0, 0] read+write")) TH_LOG("%s", dump);
	free(dump);
	/* the device's rule, in the runtime's names: ANY takes one buffer */
	os.buffer_count = 0;
	tpurt_grid_spec_free(gs);
	ASSERT_EQ(0, tpurt_grid_spec_create(2, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "x", &xs));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "o", &os));
	EXPECT_EQ(-EINVAL, tpurt_pallas_call(k, gs, NULL, args, 2, &st));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "revisit ANY with buffers 0")) TH_LOG("%s", tpurt_last_error());
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x), tpurt_array_free(o);
}

TEST_HARNESS_MAIN
