// SPDX-License-Identifier: MIT
/*
 * Host test: output blocks revisited after other blocks
 * (pl.Buffered(1, revisit=pl.RevisitMode.ANY)). Each new visit reads the
 * block back from HBM, so o += x accumulates across non-consecutive
 * visits; the reads are counted and modeled; edge blocks write only in
 * bounds; aliased outputs start from the input's data; debug mode passes
 * the legal revisits and still reports two parallel iterations sharing a
 * block; the rules refuse ANY where there is nothing to read back.
 */
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"

/*
 * JAX's test_block_reduction_with_non_immediate_revisit, with a leading
 * dimension p that may be parallel: o[p] (rows x cols) = sum over i of
 * x[p, i], grid (np, ni, nj) with o's block (p, 0, j) left after each j
 * and revisited at the next i. @zero: o zeroed at i == 0 (else it starts
 * from HBM's contents, the aliased input's with @alias).
 */
struct revisit_job {
	unsigned int np, ni;
	uint64_t rows, cols;		/* of o[p] */
	uint32_t brows, bcols;		/* its block */
	const char *sem;
	unsigned int revisit, cores;
	uint32_t flags;
	bool zero, alias;
};

struct revisit_run {
	struct tpu_job_result res;
	int ret;
	bool sums_match, guard_intact;
};

static struct revisit_run run_revisit(const struct revisit_job *j)
{
	struct tdev *d = tdev_new(4 << 20, j->cores);
	uint64_t xs[4] = { j->np, j->ni, j->rows, j->cols };
	uint64_t os[3] = { j->np, j->rows, j->cols };
	uint32_t xblk[4] = { 1, 1, j->brows, j->bcols };
	uint32_t blk[3] = { 1, j->brows, j->bcols };
	uint32_t grid[3] = { j->np, j->ni,
			     (uint32_t)((j->cols + j->bcols - 1) / j->bcols) };
	uint64_t on = j->np * j->rows * j->cols, xn = on * j->ni;
	unsigned int x = tdev_alloc(d, xn * 4), o = tdev_alloc(d, on * 4);
	unsigned int guard = tdev_alloc(d, 256), out, init = 0;
	struct revisit_run r = { .sums_match = true, .guard_intact = true };
	float *xp = tdev_ptr(d, x), *op = tdev_ptr(d, o), *want;
	struct jb *b = jb_new();
	uint8_t *g;
	size_t len;
	void *blob;

	ref_fill(xp, TPU_DTYPE_F32, xn, 7, -50, 50);
	ref_fill(op, TPU_DTYPE_F32, on, 8, -50, 50);	/* what HBM held */
	want = malloc(on * 4);
	for (uint64_t e = 0; e < on; e++) {
		uint64_t p = e / (j->rows * j->cols), rc = e % (j->rows * j->cols);

		want[e] = j->zero ? 0 : op[e];
		for (unsigned int i = 0; i < j->ni; i++)
			want[e] += xp[(p * j->ni + i) * j->rows * j->cols + rc];
	}
	jb_grid(b, 3, grid, j->sem);
	jb_operand(b, TPU_ROLE_INPUT, x, TPU_DTYPE_F32, 4, xs, xblk,
		   "pid0 pid1 0 pid2");
	if (j->alias)
		init = jb_operand(b, TPU_ROLE_INPUT, o, TPU_DTYPE_F32, 3, os,
				  blk, "pid0 0 pid2");
	out = jb_operand(b, TPU_ROLE_OUTPUT, o, TPU_DTYPE_F32, 3, os, blk,
			 "pid0 0 pid2");
	jb_buffers(b, out, 1);
	jb_revisit(b, out, j->revisit);
	if (j->alias)
		jb_alias(b, out, init);
	if (j->zero)
		jb_zero(b, JB_OPND(out), "pid1 0 ==");
	jb_binary(b, TPU_BINARY_ADD, TPU_BCAST_NONE, JB_OPND(out),
		  JB_OPND(out), JB_OPND(0), NULL);
	jb_flags(b, j->flags);
	blob = jb_finish(b, &len);
	r.ret = tdev_run(d, blob, len, 0, &r.res);
	for (uint64_t e = 0; e < on; e++)
		r.sums_match &= op[e] == want[e];
	g = tdev_ptr(d, guard);
	for (int i = 0; i < 256; i++)
		r.guard_intact &= g[i] == 0x5c;
	free(want);
	free(blob);
	jb_free(b);
	tdev_free(d);
	return r;
}

static struct revisit_job jax_test(void)
{
	/* x (3 x 8, 3 x 128), o (8, 3 x 128), blocks (8, 128), grid (3, 3) */
	return (struct revisit_job){ .np = 1, .ni = 3, .rows = 8, .cols = 384,
				     .brows = 8, .bcols = 128, .sem = "aaa",
				     .revisit = TPU_REVISIT_ANY, .cores = 1,
				     .zero = true };
}

TEST(non_immediate_revisits_accumulate)
{
	struct revisit_job j = jax_test();
	struct revisit_run r = run_revisit(&j);

	ASSERT_EQ(0, r.ret) TH_LOG("%s", r.res.message);
	EXPECT_TRUE(r.sums_match);
	/* 9 x blocks and 9 o read-backs; each visit written back */
	EXPECT_EQ(9, r.res.stats.steps);
	EXPECT_EQ(9 + 9, r.res.stats.blocks_fetched);
	EXPECT_EQ(9, r.res.stats.blocks_written);
	EXPECT_EQ(2 * 9 * 8 * 128 * 4, r.res.stats.hbm_bytes_in);
	EXPECT_EQ(r.res.stats.hbm_bytes_in, r.res.stats.model.hbm_bytes_in);
}

TEST(immediate_mode_loses_the_earlier_visits)
{
	struct revisit_job j = jax_test();
	struct revisit_run r;

	j.revisit = TPU_REVISIT_IMMEDIATE;
	r = run_revisit(&j);
	ASSERT_EQ(0, r.ret) TH_LOG("%s", r.res.message);
	EXPECT_FALSE(r.sums_match);
	EXPECT_EQ(9, r.res.stats.blocks_fetched);
	j.flags = TPU_JOB_F_DEBUG;
	r = run_revisit(&j);
	EXPECT_EQ(TPU_JOB_ERR_HAZARD, r.ret);
	EXPECT_NE(NULL, strstr(r.res.message, "revisited after its write-back"))
		TH_LOG("%s", r.res.message);
}

TEST(read_backs_are_modeled_dma)
{
	struct revisit_job j = jax_test();
	struct revisit_run any = run_revisit(&j), imm;

	j.revisit = TPU_REVISIT_IMMEDIATE;
	imm = run_revisit(&j);
	ASSERT_EQ(0, any.ret);
	ASSERT_EQ(0, imm.ret);
	EXPECT_EQ(imm.res.stats.model.hbm_bytes_in + 9 * 8 * 128 * 4,
		  any.res.stats.model.hbm_bytes_in);
	EXPECT_GT(any.res.stats.model.dma_busy_s, imm.res.stats.model.dma_busy_s);
	EXPECT_GT(any.res.stats.model.time_s, imm.res.stats.model.time_s);
}

TEST(debug_mode_passes_legal_revisits)
{
	struct revisit_job j = jax_test();
	struct revisit_run r;

	j.flags = TPU_JOB_F_DEBUG;
	r = run_revisit(&j);
	ASSERT_EQ(0, r.ret) TH_LOG("%s", r.res.message);
	EXPECT_TRUE(r.sums_match);
}

TEST(edge_blocks_read_and_write_in_bounds)
{
	/* o (6, 200) in (8, 128) blocks: padding read, never written */
	struct revisit_job j = jax_test();

	j.rows = 6;
	j.cols = 200;
	for (int debug = 0; debug < 2; debug++) {
		struct revisit_run r;

		j.flags = debug ? TPU_JOB_F_DEBUG : 0;
		r = run_revisit(&j);
		ASSERT_EQ(0, r.ret) TH_LOG("%s", r.res.message);
		EXPECT_TRUE(r.sums_match) TH_LOG("debug %d", debug);
		EXPECT_TRUE(r.guard_intact);
	}
}

TEST(an_aliased_output_starts_from_the_input)
{
	struct revisit_job j = jax_test();
	struct revisit_run r;

	j.zero = false;
	j.alias = true;
	r = run_revisit(&j);
	ASSERT_EQ(0, r.ret) TH_LOG("%s", r.res.message);
	EXPECT_TRUE(r.sums_match);
}

TEST(a_non_aliased_output_starts_from_hbm)
{
	struct revisit_job j = jax_test();
	struct revisit_run r;

	j.zero = false;
	r = run_revisit(&j);
	ASSERT_EQ(0, r.ret) TH_LOG("%s", r.res.message);
	EXPECT_TRUE(r.sums_match);
}

TEST(cores_split_the_parallel_dimension)
{
	struct revisit_job j = jax_test();

	j.np = 4;
	j.sem = "paa";
	for (unsigned int cores = 1; cores <= 3; cores++) {
		for (int debug = 0; debug < 2; debug++) {
			struct revisit_run r;

			j.cores = cores;
			j.flags = debug ? TPU_JOB_F_DEBUG : 0;
			r = run_revisit(&j);
			ASSERT_EQ(0, r.ret) TH_LOG("cores %u debug %d: %s",
						   cores, debug, r.res.message);
			EXPECT_TRUE(r.sums_match) TH_LOG("cores %u", cores);
			EXPECT_EQ(4 * 9, r.res.stats.blocks_written);
		}
	}
}

TEST(a_block_shared_by_parallel_iterations_is_a_hazard)
{
	/* i parallel: o's blocks are visited by every iteration of i */
	struct revisit_job j = jax_test();

	j.sem = "apa";
	j.flags = TPU_JOB_F_DEBUG;
	for (unsigned int cores = 1; cores <= 2; cores++) {
		struct revisit_run r;

		j.cores = cores;
		r = run_revisit(&j);
		EXPECT_EQ(TPU_JOB_ERR_HAZARD, r.ret) TH_LOG("cores %u", cores);
		EXPECT_NE(NULL, strstr(r.res.message, "parallel iterations"))
			TH_LOG("%s", r.res.message);
	}
}

/* A one-operand job with these memory fields; its error must say @text. */
static void expect_refusal(struct __test_metadata *_metadata,
			   unsigned int role, unsigned int space,
			   unsigned int buffers, unsigned int revisit,
			   const char *text)
{
	struct tdev *d = tdev_new(1 << 20, 1);
	uint64_t s[2] = { 8, 128 };
	uint32_t blk[2] = { 8, 128 }, grid[1] = { 2 };
	unsigned int slot = tdev_alloc(d, 8 * 128 * 4), o;
	struct jb *b = jb_new();
	struct tpu_job_result res;
	size_t len;
	void *blob;

	jb_grid(b, 1, grid, "a");
	o = jb_operand(b, role, slot, TPU_DTYPE_F32, 2, s, blk,
		       space == TPU_MEM_ANY ? NULL : "0 0");
	jb_space(b, o, space);
	jb_buffers(b, o, buffers);
	jb_revisit(b, o, revisit);
	blob = jb_finish(b, &len);
	EXPECT_EQ(TPU_JOB_ERR_DESCRIPTOR, tdev_run(d, blob, len, 0, &res));
	EXPECT_NE(NULL, strstr(res.message, text))
		TH_LOG("message \"%s\" lacks \"%s\"", res.message, text);
	free(blob);
	jb_free(b);
	tdev_free(d);
}

TEST(revisit_any_of_an_input_is_refused)
{
	expect_refusal(_metadata, TPU_ROLE_INPUT, TPU_MEM_VMEM, 1,
		       TPU_REVISIT_ANY,
		       "operand 0: revisit ANY is of outputs only");
}

TEST(revisit_any_needs_one_buffer)
{
	expect_refusal(_metadata, TPU_ROLE_OUTPUT, TPU_MEM_VMEM, 0,
		       TPU_REVISIT_ANY,
		       "operand 0: revisit ANY with buffers 0: it takes pl.Buffered(1)");
	expect_refusal(_metadata, TPU_ROLE_OUTPUT, TPU_MEM_VMEM, 2,
		       TPU_REVISIT_ANY, "revisit ANY with buffers 2");
}

TEST(revisit_any_of_an_unblocked_output_is_refused)
{
	expect_refusal(_metadata, TPU_ROLE_OUTPUT, TPU_MEM_ANY, 0,
		       TPU_REVISIT_ANY,
		       "operand 0: revisit ANY: an output in space ANY has no blocks to read back");
}

TEST(an_unknown_revisit_mode_is_refused)
{
	expect_refusal(_metadata, TPU_ROLE_OUTPUT, TPU_MEM_VMEM, 1, 2,
		       "operand 0: revisit 2 unknown");
}

TEST(revisit_any_of_an_smem_output_is_accepted)
{
	struct tdev *d = tdev_new(1 << 20, 1);
	uint64_t s[1] = { 4 };
	uint32_t blk[1] = { 2 }, grid[2] = { 3, 2 };
	unsigned int slot = tdev_alloc(d, 16), o;
	int32_t *v = tdev_ptr(d, slot);
	struct jb *b = jb_new();
	struct tpu_job_result res;
	size_t len;
	void *blob;

	memset(v, 0, 16);
	jb_grid(b, 2, grid, "aa");
	o = jb_operand(b, TPU_ROLE_OUTPUT, slot, TPU_DTYPE_INT32, 1, s, blk,
		       "pid1");
	jb_space(b, o, TPU_MEM_SMEM);
	jb_revisit(b, o, TPU_REVISIT_ANY);
	/* element 0: j + 1 at i == 0 only; element 1: i + 1 at every step */
	jb_scalar_store(b, JB_OPND(o), "0 pid1 1 +", "pid0 0 ==");
	jb_scalar_store(b, JB_OPND(o), "1 pid0 1 +", NULL);
	blob = jb_finish(b, &len);
	ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
	/* element 0 kept by the read-backs (without, block 1 would leak in) */
	EXPECT_EQ(1, v[0]);
	EXPECT_EQ(3, v[1]);
	EXPECT_EQ(2, v[2]);
	EXPECT_EQ(3, v[3]);
	free(blob);
	jb_free(b);
	tdev_free(d);
}

TEST_HARNESS_MAIN
