// SPDX-License-Identifier: MIT
/*
 * Host test: device loops built with tpurt_kernel_loop() / _while() and
 * statements reading loop_index(d), on the in-process device: windows and
 * scalars that follow the trip, a value carried in a VMEM temporary across
 * trips, nested loops, a while loop counting in SMEM scratch, and the
 * builder's refusals, each with its message.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "tpurt.h"
#include "kselftest_harness.h"

#define ROWS 512
#define COLS 128

FIXTURE(loop) {
	struct tpurt_device *dev;
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	struct tpurt_array *x, *o;
};

FIXTURE_SETUP(loop)
{
	struct tpurt_sim_config cfg = { .hbm_size = 64 << 20 };
	struct tpurt_block_spec bs = { 2, { ROWS, COLS }, "i -> 0, 0" };
	int64_t grid[1] = { 1 }, shape[2] = { ROWS, COLS }, one[1] = { 1 };

	ASSERT_EQ(0, tpurt_open_sim(&cfg, &self->dev)) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &self->gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(self->gs, "x", &bs));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(self->gs, "o", &bs));
	ASSERT_EQ(0, tpurt_grid_spec_set_dtype(self->gs, "x", TPURT_F32));
	ASSERT_EQ(0, tpurt_grid_spec_set_dtype(self->gs, "o", TPURT_F32));
	ASSERT_EQ(0, tpurt_grid_spec_add_scratch(self->gs, "c", TPURT_SMEM,
						 TPURT_INT32, 1, one));
	ASSERT_EQ(0, tpurt_kernel_create(&self->k));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 2, shape, &self->x));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 2, shape, &self->o));
	ref_fill(tpurt_array_map(self->x), TPURT_F32, ROWS * COLS, 9, -3, 3);
}

FIXTURE_TEARDOWN(loop)
{
	tpurt_array_free(self->x);
	tpurt_array_free(self->o);
	tpurt_kernel_free(self->k);
	tpurt_grid_spec_free(self->gs);
	tpurt_close(self->dev);
}

static int call(FIXTURE_DATA(loop) *self)
{
	struct tpurt_array *args[] = { self->x, self->o };

	return tpurt_pallas_call(self->k, self->gs, NULL, args, 2, NULL);
}

static const float *xs(FIXTURE_DATA(loop) *self)
{
	return tpurt_array_map(self->x);
}

static const float *os(FIXTURE_DATA(loop) *self)
{
	return tpurt_array_map(self->o);
}

#define ROWS8(r) "pl.ds(" r " * 8, 8), :"

TEST_F(loop, windows_and_scalars_follow_the_trip)
{
	int bad = 0;

	ASSERT_EQ(0, tpurt_kernel_loop(self->k, "0", "64"));
	ASSERT_EQ(0, tpurt_kernel_stmt(self->k, self->gs,
		"o.at[" ROWS8("loop_index(0)") "][...] = x.at[" ROWS8("loop_index(0)")
		"][...] + loop_index(0)")) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_kernel_end_loop(self->k));
	ASSERT_EQ(0, call(self)) TH_LOG("%s", tpurt_last_error());
	for (int i = 0; i < ROWS * COLS; i++)
		bad += os(self)[i] != xs(self)[i] + (float)(i / COLS / 8);
	EXPECT_EQ(0, bad);
}

/* acc = zeros; for i: acc = acc + 2 * x[8 i : 8 i + 8]; o[0:8] = acc */
TEST_F(loop, a_value_made_before_the_loop_is_carried_across_trips)
{
	int bad = 0;

	ASSERT_EQ(0, tpurt_kernel_stmt(self->k, self->gs,
				       "acc = jnp.zeros((8, 128), jnp.float32)"));
	ASSERT_EQ(0, tpurt_kernel_stmt(self->k, self->gs, "o[...] = x[...]"));
	ASSERT_EQ(0, tpurt_kernel_loop(self->k, "0", "64"));
	ASSERT_EQ(0, tpurt_kernel_stmt(self->k, self->gs,
		"t = x.at[" ROWS8("loop_index(0)") "][...] * 2"));
	ASSERT_EQ(0, tpurt_kernel_stmt(self->k, self->gs, "acc = acc + t"))
		TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_kernel_end_loop(self->k));
	ASSERT_EQ(0, tpurt_kernel_stmt(self->k, self->gs,
				       "o.at[pl.ds(0, 8), :][...] = acc"));
	ASSERT_EQ(0, call(self)) TH_LOG("%s", tpurt_last_error());
	for (int r = 0; r < 8; r++)
		for (int c = 0; c < COLS; c++) {
			float want = 0;

			for (int b = 0; b < ROWS / 8; b++)
				want += 2 * xs(self)[(b * 8 + r) * COLS + c];
			bad += os(self)[r * COLS + c] != want;
		}
	EXPECT_EQ(0, bad);
}

TEST_F(loop, nested_loops_and_a_while_loop_in_smem)
{
	int bad = 0;

	ASSERT_EQ(0, tpurt_kernel_stmt(self->k, self->gs, "c[0] = 0"));
	ASSERT_EQ(0, tpurt_kernel_while(self->k, "c[0] < 5", 0));
	ASSERT_EQ(0, tpurt_kernel_stmt(self->k, self->gs, "c[0] = c[0] + 1"));
	ASSERT_EQ(0, tpurt_kernel_end_loop(self->k));
	ASSERT_EQ(0, tpurt_kernel_loop(self->k, "0", "4"));
	ASSERT_EQ(0, tpurt_kernel_loop(self->k, "0", "16"));
	ASSERT_EQ(2, tpurt_kernel_loop_depth(self->k));
	ASSERT_EQ(0, tpurt_kernel_stmt(self->k, self->gs,
		"o.at[" ROWS8("(loop_index(0) * 16 + loop_index(1))") "][...] = x.at["
		ROWS8("(loop_index(0) * 16 + loop_index(1))") "][...] + c[0] * 100 + loop_index(0)"))
		TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_kernel_end_loop(self->k));
	ASSERT_EQ(0, tpurt_kernel_end_loop(self->k));
	ASSERT_EQ(0, call(self)) TH_LOG("%s", tpurt_last_error());
	for (int i = 0; i < ROWS * COLS; i++)
		bad += os(self)[i] != xs(self)[i] + 500 + (float)(i / COLS / 8 / 16);
	EXPECT_EQ(0, bad);
}

TEST_F(loop, misuse_is_refused_with_a_message)
{
	EXPECT_EQ(-EINVAL, tpurt_kernel_end_loop(self->k));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "end_loop() without loop() or while()"));
	EXPECT_EQ(-EINVAL, tpurt_kernel_stmt(self->k, self->gs,
					     "o[...] = x[...] + loop_index(0)"));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "loop_index(0): 0 loops are open here"))
		TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_kernel_loop(self->k, "0", "4"));
	EXPECT_EQ(-EINVAL, tpurt_kernel_end_loop(self->k));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "the loop of op 0 has no operations in its body"));
	ASSERT_EQ(0, tpurt_kernel_when(self->k, "loop_index(0) == 1"));
	ASSERT_EQ(0, tpurt_kernel_stmt(self->k, self->gs, "o[...] = x[...]"));
	EXPECT_EQ(-EINVAL, tpurt_kernel_end_loop(self->k));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "end_loop() with 1 when() block(s) of its body open"));
	ASSERT_EQ(0, tpurt_kernel_end_when(self->k));
	for (int d = 1; d < 4; d++)
		ASSERT_EQ(0, tpurt_kernel_loop(self->k, "0", "2"));
	EXPECT_EQ(-E2BIG, tpurt_kernel_loop(self->k, "0", "2"));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "loops nested deeper than 4"));
	EXPECT_EQ(-EINVAL, tpurt_kernel_while(self->k, "1", (1 << 24) + 1));
	EXPECT_EQ(-EINVAL, call(self));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "4 loop(s) not ended"))
		TH_LOG("%s", tpurt_last_error());
}

/* The device's own check, named in the kernel's terms. */
TEST_F(loop, a_bound_reading_its_own_index_is_refused_by_the_device_rules)
{
	ASSERT_EQ(0, tpurt_kernel_loop(self->k, "0", "4"));
	ASSERT_EQ(0, tpurt_kernel_loop(self->k, "0", "loop_index(1)"));
	ASSERT_EQ(0, tpurt_kernel_stmt(self->k, self->gs, "o[...] = x[...]"));
	ASSERT_EQ(0, tpurt_kernel_end_loop(self->k));
	ASSERT_EQ(0, tpurt_kernel_end_loop(self->k));
	EXPECT_NE(0, call(self));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "loop index 1, but the program is inside 1 loop"))
		TH_LOG("%s", tpurt_last_error());
}

TEST_HARNESS_MAIN
