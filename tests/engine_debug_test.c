// SPDX-License-Identifier: MIT
/*
 * Host test: debug mode. Poison makes a kernel that forgets to zero its
 * accumulator fail visibly; hazards catch a parallel dimension whose steps
 * write the same output block, and output blocks revisited after their
 * write-back. Correct kernels are unaffected.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"

static int run(struct mm_job *j, unsigned int cores, struct tpu_job_result *res,
	       float *z_out)
{
	struct tdev *d = tdev_new(1 << 20, cores);
	size_t len;
	void *blob;
	int ret;

	j->x_slot = tdev_alloc(d, j->m * j->k * 4);
	j->y_slot = tdev_alloc(d, j->k * j->n * 4);
	j->z_slot = tdev_alloc(d, j->m * j->n * 4);
	ref_fill(tdev_ptr(d, j->x_slot), TPU_DTYPE_F32, j->m * j->k, 1, -2, 2);
	ref_fill(tdev_ptr(d, j->y_slot), TPU_DTYPE_F32, j->k * j->n, 2, -2, 2);
	blob = mm_build(j, &len);
	ret = tdev_run(d, blob, len, 0, res);
	if (z_out)
		memcpy(z_out, tdev_ptr(d, j->z_slot), j->m * j->n * 4);
	free(blob);
	tdev_free(d);
	return ret;
}

static struct mm_job base(void)
{
	return (struct mm_job){ .m = 32, .k = 32, .n = 32, .bm = 16, .bk = 8,
				.bn = 16, .in_dtype = TPU_DTYPE_F32,
				.out_dtype = TPU_DTYPE_F32 };
}

static int count_nan(const float *z, int n)
{
	int c = 0;

	for (int i = 0; i < n; i++)
		c += isnan(z[i]);
	return c;
}

TEST(correct_kernels_pass_in_debug_mode)
{
	struct mm_job j = base();
	struct tpu_job_result res;
	float plain[32 * 32], debug[32 * 32];

	for (int scratch = 0; scratch < 2; scratch++) {
		j.acc_scratch = scratch;
		j.flags = 0;
		ASSERT_EQ(0, run(&j, 2, &res, plain)) TH_LOG("%s", res.message);
		j.flags = TPU_JOB_F_DEBUG;
		ASSERT_EQ(0, run(&j, 2, &res, debug)) TH_LOG("%s", res.message);
		EXPECT_EQ(0, memcmp(plain, debug, sizeof(plain)));
		EXPECT_EQ(0, count_nan(debug, 32 * 32));
	}
}

TEST(poison_shows_a_missing_accumulator_zeroing)
{
	struct mm_job j = base();
	struct tpu_job_result res;
	float z[32 * 32];

	j.no_zero = true;
	for (int scratch = 0; scratch < 2; scratch++) {
		j.acc_scratch = scratch;
		j.flags = TPU_JOB_F_DEBUG;
		ASSERT_EQ(0, run(&j, 1, &res, z)) TH_LOG("%s", res.message);
		EXPECT_EQ(32 * 32, count_nan(z, 32 * 32)) TH_LOG("scratch %d", scratch);
		/* without debug mode the bug is silent: no NaN anywhere */
		j.flags = 0;
		ASSERT_EQ(0, run(&j, 1, &res, z));
		EXPECT_EQ(0, count_nan(z, 32 * 32));
	}
}

TEST(racing_parallel_dimension_is_a_hazard)
{
	/* k marked parallel: its steps accumulate into the same z block */
	struct mm_job j = base();
	struct tpu_job_result res;

	j.sem = "ppp";
	for (unsigned int cores = 1; cores <= 3; cores++) {
		j.flags = 0;
		EXPECT_EQ(0, run(&j, cores, &res, NULL));	/* silently racy */
		j.flags = TPU_JOB_F_DEBUG;
		EXPECT_EQ(TPU_JOB_ERR_HAZARD, run(&j, cores, &res, NULL))
			TH_LOG("cores %u: %s", cores, res.message);
		EXPECT_NE(NULL, strstr(res.message, "parallel iterations"))
			TH_LOG("%s", res.message);
		EXPECT_EQ(2, res.error.operand);
	}
}

TEST(arbitrary_reduction_dims_are_not_hazards)
{
	/* j and k both arbitrary: z (i, j) is visited once, in order, and
	 * all of a z block's steps share one parallel iteration */
	struct mm_job j = base();
	struct tpu_job_result res;

	j.sem = "paa";
	j.flags = TPU_JOB_F_DEBUG;
	EXPECT_EQ(0, run(&j, 2, &res, NULL)) TH_LOG("%s", res.message);
}

TEST(revisit_after_write_back)
{
	/* grid (i, k, j): z block (i, j) is left after each j and revisited at
	 * the next k, after its write-back: Pallas would lose the partial sum */
	struct tdev *d = tdev_new(1 << 20, 2);
	uint64_t s[2] = { 16, 16 };
	uint32_t blk[2] = { 8, 8 }, grid[3] = { 2, 2, 2 };
	unsigned int x = tdev_alloc(d, 1024), y = tdev_alloc(d, 1024);
	unsigned int z = tdev_alloc(d, 1024);
	struct jb *b = jb_new();
	struct tpu_job_result res;
	size_t len;
	void *blob;

	jb_grid(b, 3, grid, "pap");
	jb_operand(b, TPU_ROLE_INPUT, x, TPU_DTYPE_F32, 2, s, blk, "pid0 pid1");
	jb_operand(b, TPU_ROLE_INPUT, y, TPU_DTYPE_F32, 2, s, blk, "pid1 pid2");
	jb_operand(b, TPU_ROLE_OUTPUT, z, TPU_DTYPE_F32, 2, s, blk, "pid0 pid2");
	jb_zero(b, JB_OPND(2), "pid1 0 ==");
	jb_dot(b, JB_OPND(2), JB_OPND(0), JB_OPND(1), TPU_DOT_ACCUMULATE, NULL);
	blob = jb_finish(b, &len);
	EXPECT_EQ(0, tdev_run(d, blob, len, 0, &res));
	jb_header(blob)->flags = TPU_JOB_F_DEBUG;
	EXPECT_EQ(TPU_JOB_ERR_HAZARD, tdev_run(d, blob, len, 0, &res));
	EXPECT_NE(NULL, strstr(res.message, "revisited")) TH_LOG("%s", res.message);
	/* step (0, 1, 0) = 2 revisits block (0, 0) */
	EXPECT_EQ(2, res.error.step);
	EXPECT_EQ(0, res.error.block[0]);
	EXPECT_EQ(0, res.error.block[1]);
	free(blob);
	jb_free(b);
	tdev_free(d);
}

TEST_HARNESS_MAIN
