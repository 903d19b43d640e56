// SPDX-License-Identifier: MIT
/*
 * Host test: blocks indexed by element (pl.Element, the operand's
 * element_dims): the index map gives the block's first element, blocks may
 * overlap, reach into the low padding (element_pad: zeros there) or overhang
 * the array's end; an output so indexed writes only in bounds. And the
 * decoder's refusals of element dimensions that cannot be.
 */
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"

#define R	20	/* rows of x */
#define C	8	/* its columns */

/* o[i] = x's 4-row block whose index map is @map (copied by a cast op). */
static int run_gather(const char *map, unsigned int dims, const uint16_t *pad,
		      unsigned int steps, float *out, struct tpu_job_result *res)
{
	struct tdev *d = tdev_new(1 << 20, 1);
	uint64_t xs[2] = { R, C }, os[2] = { 4 * steps, C };
	uint32_t blk[2] = { 4, C }, grid[1] = { steps };
	unsigned int xsl = tdev_alloc(d, R * C * 4);
	unsigned int osl = tdev_alloc(d, 4 * steps * C * 4);
	float *x = tdev_ptr(d, xsl);
	struct jb *b = jb_new();
	size_t len;
	void *blob;
	int ret;

	for (int i = 0; i < R * C; i++)
		x[i] = (float)(i + 1);
	jb_grid(b, 1, grid, "a");
	jb_operand(b, TPU_ROLE_INPUT, xsl, TPU_DTYPE_F32, 2, xs, blk, map);
	jb_element(b, 0, dims, pad);
	jb_operand(b, TPU_ROLE_OUTPUT, osl, TPU_DTYPE_F32, 2, os, blk, "pid0 0");
	jb_unary(b, TPU_UNARY_IDENTITY, JB_OPND(1), JB_OPND(0), NULL);
	blob = jb_finish(b, &len);
	ret = tdev_run(d, blob, len, 0, res);
	memcpy(out, tdev_ptr(d, osl), 4 * steps * C * 4);
	free(blob);
	jb_free(b);
	tdev_free(d);
	return ret;
}

/* x's element at padded row @r, column @c: 0 in the padding or past the end */
static float x_at(int r, int c)
{
	return r < 0 || r >= R || c < 0 || c >= C ? 0.0f : (float)(r * C + c + 1);
}

/*
 * The first element of @o (steps of 4 rows at row offsets @step_rows * s in
 * x padded by @pad_r rows and @pad_c columns) that is not x's, or -1.
 */
static int first_wrong(const float *o, int steps, int step_rows, int pad_r,
		       int pad_c)
{
	for (int s = 0; s < steps; s++)
		for (int r = 0; r < 4; r++)
			for (int c = 0; c < C; c++)
				if (o[(4 * s + r) * C + c] !=
				    x_at(step_rows * s + r - pad_r, c - pad_c))
					return (4 * s + r) * C + c;
	return -1;
}

TEST(rows_at_element_offsets_overlap)
{
	struct tpu_job_result res;
	float o[4 * 5 * C];

	/* offsets 0, 3, 6, 9, 12: each block shares a row with the next */
	ASSERT_EQ(0, run_gather("pid0 3 * 0", 1, NULL, 5, o, &res))
		TH_LOG("%s", res.message);
	EXPECT_EQ(-1, first_wrong(o, 5, 3, 0, 0));
}

TEST(low_padding_reads_zeros_and_the_end_overhangs)
{
	/* rows padded by 2, columns by 3: offsets (0, 0), (19, 0) */
	static const uint16_t pad[TPU_JOB_MAX_RANK] = { 2, 3 };
	struct tpu_job_result res;
	float o[4 * 2 * C];

	ASSERT_EQ(0, run_gather("pid0 19 * 0", 3, pad, 2, o, &res))
		TH_LOG("%s", res.message);
	EXPECT_EQ(-1, first_wrong(o, 2, 19, 2, 3));
}

TEST(an_offset_past_the_array_fails_the_step)
{
	struct tpu_job_result res;
	float o[4 * 2 * C];

	/* step 1 starts at row 20 of 20 rows */
	EXPECT_NE(0, run_gather("pid0 20 * 0", 1, NULL, 2, o, &res));
	EXPECT_EQ(TPU_JOB_ERR_BLOCK_OOB, res.error.code) TH_LOG("%s", res.message);
	EXPECT_NE(NULL, strstr(res.message, "block (20, 0) at step 1"))
		TH_LOG("%s", res.message);
}

TEST(an_output_indexed_by_element_writes_only_in_bounds)
{
	struct tdev *d = tdev_new(1 << 20, 1);
	uint64_t os[2] = { 10, C };
	uint32_t blk[2] = { 4, C }, grid[1] = { 3 };
	unsigned int osl = tdev_alloc(d, 10 * C * 4);
	float *o = tdev_ptr(d, osl);
	struct tpu_job_result res;
	struct jb *b = jb_new();
	size_t len;
	void *blob;

	/* step s zeroes rows [4s - 1, 4s + 3): padding 1 before the array */
	jb_grid(b, 1, grid, "a");
	jb_operand(b, TPU_ROLE_OUTPUT, osl, TPU_DTYPE_F32, 2, os, blk, "pid0 4 * 0");
	jb_element(b, 0, 1, (const uint16_t[TPU_JOB_MAX_RANK]){ 1 });
	jb_zero(b, JB_OPND(0), NULL);
	blob = jb_finish(b, &len);
	ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
	/* every row written (zero): none is left with the buffer's 0x5c */
	for (int i = 0; i < 10 * C; i++) {
		ASSERT_EQ(0.0f, o[i]) TH_LOG("element %d", i);
	}
	free(blob);
	jb_free(b);
	tdev_free(d);
}

/* A 1-step job with operand 0 as given, for the decoder's refusals. */
static void expect_refusal(struct __test_metadata *_metadata, unsigned int space,
			   unsigned int dims, const uint16_t *pad, const char *text)
{
	struct tdev *d = tdev_new(1 << 20, 1);
	uint64_t xs[2] = { R, C };
	uint32_t blk[2] = { 4, C }, none[2] = { 0, 0 }, grid[1] = { 1 };
	unsigned int xsl = tdev_alloc(d, R * C * 4);
	struct tpu_job_result res;
	struct jb *b = jb_new();
	size_t len;
	void *blob;

	jb_grid(b, 1, grid, "a");
	jb_operand(b, TPU_ROLE_OUTPUT, xsl, TPU_DTYPE_F32, 2, xs,
		   space == TPU_MEM_ANY ? none : blk,
		   space == TPU_MEM_ANY ? NULL : "0 0");
	jb_space(b, 0, space);
	jb_element(b, 0, dims, pad);
	if (space != TPU_MEM_ANY)
		jb_zero(b, JB_OPND(0), NULL);
	blob = jb_finish(b, &len);
	EXPECT_EQ(TPU_JOB_ERR_DESCRIPTOR, tdev_run(d, blob, len, 0, &res));
	EXPECT_NE(NULL, strstr(res.message, text))
		TH_LOG("message \"%s\" lacks \"%s\"", res.message, text);
	free(blob);
	jb_free(b);
	tdev_free(d);
}

TEST(element_dims_beyond_the_rank_are_refused)
{
	expect_refusal(_metadata, TPU_MEM_VMEM, 4, NULL, "beyond rank 2");
}

TEST(padding_of_a_blocked_dimension_is_refused)
{
	expect_refusal(_metadata, TPU_MEM_VMEM, 1,
		       (const uint16_t[TPU_JOB_MAX_RANK]){ 0, 5 },
		       "element_pad[1] 5: padding is of element dimensions only");
}

TEST(an_operand_without_blocks_has_no_element_dims)
{
	expect_refusal(_metadata, TPU_MEM_ANY, 1, NULL,
		       "an operand in space ANY has no blocks to index by element");
}

TEST_HARNESS_MAIN
