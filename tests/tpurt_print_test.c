// SPDX-License-Identifier: MIT
/*
 * Host test: pl.debug_print through libtpurt on the in-process device
 * (tpurt_kernel_debug_print, TPU_OP_DEBUG_PRINT): a plain string, program
 * ids at every step in step order (one core and two), pl.when, booleans,
 * braces, refs of one element and of several, a full print buffer's
 * dropped count, and the refusals of bad formats.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "tpurt.h"
#include "kselftest_harness.h"

#define ROWS 8
#define COLS 128

FIXTURE(print) {
	struct tpurt_device *dev;
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	struct tpurt_array *x, *o;
	char *text;
	size_t len;
	FILE *out;
};

static void setup(struct __test_metadata *_metadata, FIXTURE_DATA(print) *self,
		  unsigned int cores)
{
	struct tpurt_sim_config cfg = { .hbm_size = 64 << 20, .cores = cores };
	struct tpurt_block_spec bs = { 2, { ROWS, COLS }, "i -> i, 0" };
	int64_t grid[1] = { 4 }, shape[2] = { 4 * ROWS, COLS };

	ASSERT_EQ(0, tpurt_open_sim(&cfg, &self->dev)) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &self->gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(self->gs, "x", &bs));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(self->gs, "o", &bs));
	ASSERT_EQ(0, tpurt_grid_spec_set_dtype(self->gs, "x", TPURT_F32));
	ASSERT_EQ(0, tpurt_grid_spec_set_dtype(self->gs, "o", TPURT_F32));
	ASSERT_EQ(0, tpurt_kernel_create(&self->k));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 2, shape, &self->x));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 2, shape, &self->o));
	for (int i = 0; i < 4 * ROWS * COLS; i++)
		((float *)tpurt_array_map(self->x))[i] = (float)i * 0.5f;
	self->out = open_memstream(&self->text, &self->len);
	ASSERT_NE(NULL, self->out);
	tpurt_device_set_print_stream(self->dev, self->out);
	ASSERT_EQ(0, tpurt_kernel_stmt(self->k, self->gs, "o[...] = x[...]"));
}

static void teardown(FIXTURE_DATA(print) *self)
{
	fclose(self->out);
	free(self->text);
	tpurt_array_free(self->x);
	tpurt_array_free(self->o);
	tpurt_kernel_free(self->k);
	tpurt_grid_spec_free(self->gs);
	tpurt_close(self->dev);
}

FIXTURE_SETUP(print)
{
	setup(_metadata, self, 1);
}

FIXTURE_TEARDOWN(print)
{
	teardown(self);
}

/* Run the kernel; the lines it printed, NUL-terminated, in self->text. */
static int call(FIXTURE_DATA(print) *self, const char *semantics)
{
	struct tpurt_array *args[] = { self->x, self->o };
	struct tpurt_compiler_params p = { .dimension_semantics = semantics };
	int ret = tpurt_pallas_call(self->k, self->gs, &p, args, 2, NULL);

	fflush(self->out);
	return ret;
}

static const struct tpurt_print_arg pid = { TPURT_PRINT_INT, "i" };

TEST_F(print, a_string_once_per_step)
{
	ASSERT_EQ(0, tpurt_kernel_debug_print(self->k, "It works!", 0, NULL));
	ASSERT_EQ(0, call(self, NULL)) TH_LOG("%s", tpurt_last_error());
	EXPECT_STREQ("It works!\nIt works!\nIt works!\nIt works!\n", self->text);
}

TEST_F(print, program_ids_in_step_order)
{
	struct tpurt_print_arg a[2] = { pid, { TPURT_PRINT_INT, "i * 10 - 3" } };

	ASSERT_EQ(0, tpurt_kernel_debug_print(self->k, "i = {}, {}", 2, a));
	ASSERT_EQ(0, call(self, NULL)) TH_LOG("%s", tpurt_last_error());
	EXPECT_STREQ("i = 0, -3\ni = 1, 7\ni = 2, 17\ni = 3, 27\n", self->text);
}

TEST_F(print, when_bool_and_braces)
{
	struct tpurt_print_arg a[2] = { pid, { TPURT_PRINT_BOOL, "i > 2" } };

	ASSERT_EQ(0, tpurt_kernel_when(self->k, "i % 2 == 1"));
	ASSERT_EQ(0, tpurt_kernel_debug_print(self->k, "{{odd}} {} {}", 2, a))
		TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_kernel_end_when(self->k));
	ASSERT_EQ(0, call(self, NULL)) TH_LOG("%s", tpurt_last_error());
	EXPECT_STREQ("{odd} 1 False\n{odd} 3 True\n", self->text);
}

TEST_F(print, refs_of_one_element_and_of_a_row)
{
	struct tpurt_print_arg a[2] = {
		{ TPURT_PRINT_REF, "x.at[pl.ds(0, 1), pl.ds(1, 1)]" },
		{ TPURT_PRINT_REF, "x.at[pl.ds(1, 1), pl.ds(0, 4)]" },
	};

	ASSERT_EQ(0, tpurt_kernel_when(self->k, "i == 1"));
	ASSERT_EQ(0, tpurt_kernel_debug_print(self->k, "x01 = {} row = {}", 2, a))
		TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_kernel_end_when(self->k));
	ASSERT_EQ(0, call(self, NULL)) TH_LOG("%s", tpurt_last_error());
	/* step 1's block starts at row 8: x[8, 1] = 1025 * 0.5, row 9 */
	EXPECT_STREQ("x01 = 512.5 row = [576.0 576.5 577.0 577.5]\n", self->text);
}

TEST_F(print, two_cores_in_step_order)
{
	teardown(self);
	setup(_metadata, self, 2);
	ASSERT_EQ(0, tpurt_kernel_debug_print(self->k, "step {}", 1, &pid));
	ASSERT_EQ(0, call(self, "parallel")) TH_LOG("%s", tpurt_last_error());
	EXPECT_STREQ("step 0\nstep 1\nstep 2\nstep 3\n", self->text);
}

TEST_F(print, a_full_buffer_counts_what_it_dropped)
{
	static const char want[] = "0\n1\nlibtpurt: debug_print: 2 records dropped";

	ASSERT_EQ(0, tpurt_kernel_debug_print(self->k, "{}", 1, &pid));
	/* the header (32 bytes) and two 64-byte records */
	ASSERT_EQ(0, tpurt_device_set_print_buffer(self->dev, 32 + 2 * 64));
	ASSERT_EQ(0, call(self, NULL)) TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(0, strncmp(self->text, want, strlen(want)))
		TH_LOG("%s", self->text);
	EXPECT_EQ(-EINVAL, tpurt_device_set_print_buffer(self->dev, 8));
}

TEST_F(print, bad_formats_are_refused)
{
	EXPECT_EQ(-EINVAL, tpurt_kernel_debug_print(self->k, "{} {}", 1, &pid));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "\"{} {}\" has 2 {} placeholders for 1 argument"))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(-EINVAL, tpurt_kernel_debug_print(self->k, "{0}", 1, &pid));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "only {} placeholders"));
	EXPECT_EQ(-EINVAL, tpurt_kernel_debug_print(self->k, "}", 0, NULL));
}

/* The statement syntax's pl.debug_print: a string, scalars and arrays. */
TEST_F(print, a_statement)
{
	ASSERT_EQ(0, tpurt_kernel_stmt(self->k, self->gs,
		"pl.when(pl.program_id(0) == 3): pl.debug_print(\"i=\\\"{}\\\" {} {}\", "
		"pl.program_id(0), pl.program_id(0) < 2, x[0:1, 0:2] * 2)"))
		TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, call(self, NULL)) TH_LOG("%s", tpurt_last_error());
	/* x[24, 0:2] * 2: (3072, 3073) * 0.5 * 2 */
	EXPECT_STREQ("i=\"3\" False [3072.0 3073.0]\n", self->text);
	EXPECT_EQ(-EINVAL, tpurt_kernel_stmt(self->k, self->gs, "o[...] = \"text\""));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "a string is only pl.debug_print's format"));
	EXPECT_EQ(-EINVAL, tpurt_kernel_stmt(self->k, self->gs, "pl.debug_print(\"{}\", 1.5)"));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "put Python constants into the format"));
}

TEST_HARNESS_MAIN
