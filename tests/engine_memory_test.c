// SPDX-License-Identifier: MIT
/*
 * Host test: the Pallas TPU memory model. Memory spaces (VMEM, SMEM, ANY),
 * windows (ref.at[pl.ds(...)]), async copies with DMA semaphores, regular
 * semaphores, scalar stores, pl.Buffered(n) and input_output_aliases, each
 * checked against a reference computed here from the inputs; and each
 * misuse failing with its error and a message naming it.
 */
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "tpu_dtype.h"
#include "kselftest_harness.h"

/* A job under construction on a pretend device. */
struct mt {
	struct tdev *d;
	struct jb *b;
	struct tpu_job_result res;
	void *blob;
	size_t len;
};

static void mt_init(struct mt *t, unsigned int cores)
{
	memset(t, 0, sizeof(*t));
	t->d = tdev_new(32 << 20, cores);
	t->b = jb_new();
}

static int mt_run(struct mt *t, uint32_t flags)
{
	free(t->blob);
	jb_flags(t->b, flags);
	t->blob = jb_finish(t->b, &t->len);
	return tdev_run(t->d, t->blob, t->len, 0, &t->res);
}

static void mt_fini(struct mt *t)
{
	free(t->blob);
	jb_free(t->b);
	tdev_free(t->d);
}

static uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* dst = src * k (bcast imm) */
static struct tpu_job_op *scale(struct jb *b, struct tpu_job_ref dst,
				struct tpu_job_ref src, float k, const char *pred)
{
	struct tpu_job_op *op = jb_binary(b, TPU_BINARY_MUL, TPU_BCAST_IMM, dst,
					  src, JB_NONE, pred);

	op->imm = f32_bits(k);
	return op;
}

static unsigned int sem_scratch(struct jb *b, unsigned int space, uint32_t n)
{
	uint32_t shape[1] = { n };

	return jb_scratch(b, space, TPU_DTYPE_INT32, 1, shape);
}

#define EXPECT_FAIL(t, code, text) do {						\
	EXPECT_EQ(code, mt_run(t, 0)) TH_LOG("%s", (t)->res.message);		\
	EXPECT_NE(NULL, strstr((t)->res.message, text))				\
		TH_LOG("message \"%s\" lacks \"%s\"", (t)->res.message, text);	\
} while (0)

#define EXPECT_FAIL_FLAGS(t, flags, code, text) do {				\
	EXPECT_EQ(code, mt_run(t, flags)) TH_LOG("%s", (t)->res.message);	\
	EXPECT_NE(NULL, strstr((t)->res.message, text))				\
		TH_LOG("message \"%s\" lacks \"%s\"", (t)->res.message, text);	\
} while (0)

/* --- paged gather: HBM -> VMEM windows with starts from a page table --- */

enum { PAGES = 4, PR = 8, PC = 16 };

/*
 * out block i = pages[table[i]]: the page table is scalar prefetch, the
 * pages an ANY input, each step copies one page into a VMEM scratch.
 */
static void build_paged(struct mt *t, const int32_t *table, unsigned int *out)
{
	uint64_t ts[1] = { PAGES }, ps[3] = { PAGES, PR, PC };
	uint64_t os[2] = { PAGES * PR, PC };
	uint32_t ob[2] = { PR, PC }, grid[1] = { PAGES }, ss[2] = { PR, PC };
	uint32_t ws[3] = { 1, PR, PC };
	unsigned int tsl = tdev_alloc(t->d, sizeof(int32_t) * PAGES);
	unsigned int psl = tdev_alloc(t->d, PAGES * PR * PC * 4);
	unsigned int osl = tdev_alloc(t->d, PAGES * PR * PC * 4);
	unsigned int buf, sem, page;

	memcpy(tdev_ptr(t->d, tsl), table, sizeof(int32_t) * PAGES);
	ref_fill(tdev_ptr(t->d, psl), TPU_DTYPE_F32, PAGES * PR * PC, 7, -50, 50);
	jb_grid(t->b, 1, grid, "a");
	jb_operand(t->b, TPU_ROLE_SCALAR_PREFETCH, tsl, TPU_DTYPE_INT32, 1, ts,
		   NULL, NULL);
	jb_operand(t->b, TPU_ROLE_INPUT, psl, TPU_DTYPE_F32, 3, ps, NULL, NULL);
	jb_space(t->b, 1, TPU_MEM_ANY);
	jb_operand(t->b, TPU_ROLE_OUTPUT, osl, TPU_DTYPE_F32, 2, os, ob, "pid0 0");
	buf = jb_scratch(t->b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, ss);
	sem = sem_scratch(t->b, TPU_MEM_SEM_DMA, 1);
	page = jb_window(t->b, JB_OPND(1), 1, ws, 3, "pid0 smem0 0 0");
	jb_copy(t->b, TPU_OP_COPY_START, JB_SCR(buf), JB_WIN(page), JB_SCR(sem),
		NULL, NULL);
	jb_copy(t->b, TPU_OP_COPY_WAIT, JB_SCR(buf), JB_WIN(page), JB_SCR(sem),
		NULL, NULL);
	jb_unary(t->b, TPU_UNARY_IDENTITY, JB_OPND(2), JB_SCR(buf), NULL);
	*out = osl;
}

TEST(hbm_to_vmem_window_from_a_page_table)
{
	static const int32_t table[PAGES] = { 2, 0, 3, 1 };
	struct mt t;
	unsigned int osl;
	const float *pages, *out;
	int bad = 0;

	mt_init(&t, 1);
	build_paged(&t, table, &osl);
	ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
	pages = tdev_ptr(t.d, 1);
	out = tdev_ptr(t.d, osl);
	for (int i = 0; i < PAGES; i++)
		for (int e = 0; e < PR * PC; e++)
			bad += out[i * PR * PC + e] != pages[table[i] * PR * PC + e];
	EXPECT_EQ(0, bad);
	EXPECT_EQ(PAGES, t.res.stats.copies);
	/* the copies' HBM bytes count with the pipeline's */
	EXPECT_EQ((uint64_t)PAGES * PR * PC * 4, t.res.stats.hbm_bytes_in);
	/* debug mode sees no hazard in it */
	EXPECT_EQ(0, mt_run(&t, TPU_JOB_F_DEBUG)) TH_LOG("%s", t.res.message);
	mt_fini(&t);
}

TEST(window_out_of_range_at_run_time_names_op_window_and_step)
{
	static const int32_t table[PAGES] = { 2, 0, 7, 1 };
	struct mt t;
	unsigned int osl;

	mt_init(&t, 1);
	build_paged(&t, table, &osl);
	EXPECT_FAIL(&t, TPU_JOB_ERR_WINDOW_OOB, "op 0: window 0 at step 2");
	EXPECT_NE(NULL, strstr(t.res.message, "dimension 0 starts at 7 with size 1"))
		TH_LOG("%s", t.res.message);
	EXPECT_EQ(0, t.res.error.op);
	EXPECT_EQ(2, t.res.error.step);
	EXPECT_EQ(1, t.res.error.operand);
	EXPECT_EQ(7, t.res.error.block[0]);
	EXPECT_EQ(0, t.res.error.need);		/* the window */
	EXPECT_EQ(0, t.res.error.limit);	/* the dimension */
	mt_fini(&t);
}

/* --- VMEM -> HBM into an ANY output; VMEM -> VMEM; HBM -> HBM --- */

TEST(vmem_to_hbm_into_an_any_output)
{
	uint64_t s[2] = { 32, 16 };
	uint32_t blk[2] = { 8, 16 }, grid[1] = { 4 }, ws[2] = { 8, 16 };
	struct mt t;
	unsigned int xsl, ysl, tmp, sem, win;
	const float *x, *y;
	int bad = 0;

	mt_init(&t, 2);
	xsl = tdev_alloc(t.d, 32 * 16 * 4);
	ysl = tdev_alloc(t.d, 32 * 16 * 4);
	ref_fill(tdev_ptr(t.d, xsl), TPU_DTYPE_F32, 32 * 16, 3, -9, 9);
	jb_grid(t.b, 1, grid, "p");
	jb_operand(t.b, TPU_ROLE_INPUT, xsl, TPU_DTYPE_F32, 2, s, blk, "pid0 0");
	jb_operand(t.b, TPU_ROLE_OUTPUT, ysl, TPU_DTYPE_F32, 2, s, NULL, NULL);
	jb_space(t.b, 1, TPU_MEM_ANY);
	tmp = jb_scratch(t.b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, blk);
	sem = sem_scratch(t.b, TPU_MEM_SEM_DMA, 1);
	win = jb_window(t.b, JB_OPND(1), 0, ws, 2, "pid0 8 * 0");
	scale(t.b, JB_SCR(tmp), JB_OPND(0), 2, NULL);
	jb_copy(t.b, TPU_OP_COPY_START, JB_WIN(win), JB_SCR(tmp), JB_SCR(sem),
		NULL, NULL);
	jb_copy(t.b, TPU_OP_COPY_WAIT, JB_WIN(win), JB_SCR(tmp), JB_SCR(sem),
		NULL, NULL);
	ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
	x = tdev_ptr(t.d, xsl);
	y = tdev_ptr(t.d, ysl);
	for (int e = 0; e < 32 * 16; e++)
		bad += y[e] != 2 * x[e];
	EXPECT_EQ(0, bad);
	EXPECT_EQ(4, t.res.stats.copies);
	EXPECT_EQ(32 * 16 * 4, t.res.stats.hbm_bytes_out);
	EXPECT_EQ(0, t.res.stats.blocks_written);	/* ANY: no write-back */
	mt_fini(&t);
}

TEST(vmem_to_vmem_and_hbm_to_hbm)
{
	uint64_t xs[2] = { 8, 16 }, hs[1] = { 32 };
	uint32_t blk[2] = { 8, 16 }, grid[1] = { 1 }, rows4[2] = { 4, 16 };
	uint32_t half[1] = { 16 };
	struct mt t;
	unsigned int xsl, zsl, hsl, gsl, acc, sem, wx, wacc, wh0, wh1, wg0, wg1;
	const float *x, *z;
	const int32_t *h, *g;
	int bad = 0;

	mt_init(&t, 1);
	xsl = tdev_alloc(t.d, 8 * 16 * 4);
	zsl = tdev_alloc(t.d, 8 * 16 * 4);
	hsl = tdev_alloc(t.d, 32 * 4);
	gsl = tdev_alloc(t.d, 32 * 4);
	ref_fill(tdev_ptr(t.d, xsl), TPU_DTYPE_F32, 8 * 16, 4, -9, 9);
	ref_fill(tdev_ptr(t.d, hsl), TPU_DTYPE_INT32, 32, 5, -1000, 1000);
	jb_grid(t.b, 1, grid, "a");
	jb_operand(t.b, TPU_ROLE_INPUT, xsl, TPU_DTYPE_F32, 2, xs, blk, "0 0");
	jb_operand(t.b, TPU_ROLE_OUTPUT, zsl, TPU_DTYPE_F32, 2, xs, blk, "0 0");
	jb_operand(t.b, TPU_ROLE_INPUT, hsl, TPU_DTYPE_INT32, 1, hs, NULL, NULL);
	jb_space(t.b, 2, TPU_MEM_ANY);
	jb_operand(t.b, TPU_ROLE_OUTPUT, gsl, TPU_DTYPE_INT32, 1, hs, NULL, NULL);
	jb_space(t.b, 3, TPU_MEM_ANY);
	acc = jb_scratch(t.b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, blk);
	sem = sem_scratch(t.b, TPU_MEM_SEM_DMA, 2);
	/* x rows 2..5 -> acc rows 4..7; acc rows 0..3 zeroed */
	wx = jb_window(t.b, JB_OPND(0), 0, rows4, 2, "2 0");
	wacc = jb_window(t.b, JB_SCR(acc), 0, rows4, 2, "4 0");
	/* h[8:24] -> g[0:16], h[0:16] -> g[16:32] */
	wh0 = jb_window(t.b, JB_OPND(2), 0, half, 1, "8");
	wg0 = jb_window(t.b, JB_OPND(3), 0, half, 1, "0");
	wh1 = jb_window(t.b, JB_OPND(2), 0, half, 1, NULL);
	wg1 = jb_window(t.b, JB_OPND(3), 0, half, 1, "16");
	jb_zero(t.b, JB_SCR(acc), NULL);
	jb_copy(t.b, TPU_OP_COPY_START, JB_WIN(wacc), JB_WIN(wx), JB_SCR(sem),
		NULL, NULL);
	jb_copy(t.b, TPU_OP_COPY_START, JB_WIN(wg0), JB_WIN(wh0), JB_SCR(sem),
		"1", NULL);
	jb_copy(t.b, TPU_OP_COPY_START, JB_WIN(wg1), JB_WIN(wh1), JB_SCR(sem),
		"1", NULL);
	jb_copy(t.b, TPU_OP_COPY_WAIT, JB_WIN(wacc), JB_NONE, JB_SCR(sem), NULL,
		NULL);
	/* one wait may take both copies' bytes: 2 x 64 */
	jb_copy(t.b, TPU_OP_COPY_WAIT, JB_OPND(3), JB_NONE, JB_SCR(sem), "1",
		NULL);
	jb_unary(t.b, TPU_UNARY_IDENTITY, JB_OPND(1), JB_SCR(acc), NULL);
	ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
	x = tdev_ptr(t.d, xsl);
	z = tdev_ptr(t.d, zsl);
	h = tdev_ptr(t.d, hsl);
	g = tdev_ptr(t.d, gsl);
	for (int r = 0; r < 8; r++)
		for (int c = 0; c < 16; c++)
			bad += z[r * 16 + c] != (r < 4 ? 0 : x[(r - 2) * 16 + c]);
	for (int i = 0; i < 16; i++)
		bad += g[i] != h[8 + i] || g[16 + i] != h[i];
	EXPECT_EQ(0, bad);
	EXPECT_EQ(3, t.res.stats.copies);
	mt_fini(&t);
}

/* --- the manual double-buffering pattern across grid steps --- */

enum { DB_STEPS = 5, DB_R = 8, DB_C = 128 };

/*
 * y block i = 3 * x rows of step i, x in ANY: step i starts step i+1's
 * copy into the other slot of buf (2 x 8 x 128) and waits for its own.
 * @compute_k: extra work per step (dots), so the model has compute to hide
 * copies behind. @wait_at_once: start and wait each step's own copy
 * (no overlap).
 */
static void build_double_buffer(struct mt *t, bool wait_at_once)
{
	uint64_t xs[2] = { DB_STEPS * DB_R, DB_C }, ys[2] = { DB_STEPS * DB_R, DB_C };
	uint32_t yb[2] = { DB_R, DB_C }, grid[1] = { DB_STEPS };
	uint32_t bs[3] = { 2, DB_R, DB_C }, ws[2] = { DB_R, DB_C };
	uint32_t slot[3] = { 1, DB_R, DB_C }, sq[2] = { 128, 128 };
	unsigned int xsl = tdev_alloc(t->d, DB_STEPS * DB_R * DB_C * 4);
	unsigned int ysl = tdev_alloc(t->d, DB_STEPS * DB_R * DB_C * 4);
	unsigned int buf, sem, cur_src, next_src, cur_dst, next_dst, a, p;

	ref_fill(tdev_ptr(t->d, xsl), TPU_DTYPE_F32, DB_STEPS * DB_R * DB_C, 9,
		 -20, 20);
	jb_grid(t->b, 1, grid, "a");
	jb_operand(t->b, TPU_ROLE_INPUT, xsl, TPU_DTYPE_F32, 2, xs, NULL, NULL);
	jb_space(t->b, 0, TPU_MEM_ANY);
	jb_operand(t->b, TPU_ROLE_OUTPUT, ysl, TPU_DTYPE_F32, 2, ys, yb, "pid0 0");
	buf = jb_scratch(t->b, TPU_MEM_VMEM, TPU_DTYPE_F32, 3, bs);
	sem = sem_scratch(t->b, TPU_MEM_SEM_DMA, 2);
	a = jb_scratch(t->b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, sq);
	p = jb_scratch(t->b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, sq);
	cur_src = jb_window(t->b, JB_OPND(0), 0, ws, 2, "pid0 8 * 0");
	next_src = jb_window(t->b, JB_OPND(0), 0, ws, 2, "pid0 1 + 8 * 0");
	cur_dst = jb_window(t->b, JB_SCR(buf), 1, slot, 3, "pid0 2 % 0 0");
	next_dst = jb_window(t->b, JB_SCR(buf), 1, slot, 3, "pid0 1 + 2 % 0 0");
	if (wait_at_once) {
		jb_copy(t->b, TPU_OP_COPY_START, JB_WIN(cur_dst), JB_WIN(cur_src),
			JB_SCR(sem), "pid0 2 %", NULL);
		jb_copy(t->b, TPU_OP_COPY_WAIT, JB_WIN(cur_dst), JB_WIN(cur_src),
			JB_SCR(sem), "pid0 2 %", NULL);
	} else {
		jb_copy(t->b, TPU_OP_COPY_START, JB_WIN(cur_dst), JB_WIN(cur_src),
			JB_SCR(sem), "pid0 2 %", "pid0 0 ==");
		jb_copy(t->b, TPU_OP_COPY_START, JB_WIN(next_dst), JB_WIN(next_src),
			JB_SCR(sem), "pid0 1 + 2 %", "pid0 1 + nprog0 <");
	}
	/* work for the copies to hide behind: a 128^3 product per step */
	jb_zero(t->b, JB_SCR(a), "pid0 0 ==");
	jb_dot(t->b, JB_SCR(p), JB_SCR(a), JB_SCR(a), 0, NULL);
	jb_dot(t->b, JB_SCR(a), JB_SCR(p), JB_SCR(p), 0, NULL);
	if (!wait_at_once)
		jb_copy(t->b, TPU_OP_COPY_WAIT, JB_WIN(cur_dst), JB_WIN(cur_src),
			JB_SCR(sem), "pid0 2 %", NULL);
	/* a compute op on a window: buf.at[slot] */
	scale(t->b, JB_OPND(1), JB_WIN(cur_dst), 3, NULL);
}

static int check_double_buffer(struct mt *t)
{
	const float *x = tdev_ptr(t->d, 0), *y = tdev_ptr(t->d, 1);
	int bad = 0;

	for (int e = 0; e < DB_STEPS * DB_R * DB_C; e++)
		bad += y[e] != 3 * x[e];
	return bad;
}

TEST(double_buffering_across_steps_with_two_semaphores)
{
	struct mt t;

	mt_init(&t, 1);
	build_double_buffer(&t, false);
	ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
	EXPECT_EQ(0, check_double_buffer(&t));
	EXPECT_EQ(DB_STEPS, t.res.stats.copies);
	memset(tdev_ptr(t.d, 1), 0, DB_STEPS * DB_R * DB_C * 4);
	/* no false hazard: the copy in flight writes the other slot */
	ASSERT_EQ(0, mt_run(&t, TPU_JOB_F_DEBUG)) TH_LOG("%s", t.res.message);
	EXPECT_EQ(0, check_double_buffer(&t));
	mt_fini(&t);
}

TEST(model_a_copy_waited_at_once_stalls_one_waited_later_overlaps)
{
	struct mt once, later;

	mt_init(&once, 1);
	mt_init(&later, 1);
	build_double_buffer(&once, true);
	build_double_buffer(&later, false);
	ASSERT_EQ(0, mt_run(&once, 0)) TH_LOG("%s", once.res.message);
	ASSERT_EQ(0, mt_run(&later, 0)) TH_LOG("%s", later.res.message);
	EXPECT_EQ(0, check_double_buffer(&once));
	EXPECT_EQ(0, check_double_buffer(&later));
	/* the same work and bytes ... */
	EXPECT_EQ(once.res.stats.hbm_bytes_in, later.res.stats.hbm_bytes_in);
	EXPECT_EQ(once.res.stats.mxu_flops, later.res.stats.mxu_flops);
	/* ... but waiting at once stalls for every copy, later only the first */
	EXPECT_GT(once.res.stats.model.bubble_s, later.res.stats.model.bubble_s);
	EXPECT_GT(once.res.stats.model.time_s, later.res.stats.model.time_s);
	/* the stall of a wait at once is the copy's transfer time per step */
	EXPECT_GE(once.res.stats.model.bubble_s,
		  DB_STEPS * (double)(DB_R * DB_C * 4) /
		  (double)once.d->cfg.hbm_bandwidth * 0.999);
	mt_fini(&once);
	mt_fini(&later);
}

/* --- SMEM: blocks, scalar stores, LOAD_SCRATCH --- */

TEST(smem_space_input_and_output)
{
	enum { R = 4, C = 8 };
	uint64_t s[2] = { R, C };
	uint32_t blk[2] = { 1, C }, grid[1] = { R };
	struct mt t;
	unsigned int isl, osl;
	const int32_t *in, *out;
	int bad = 0;

	mt_init(&t, 2);
	isl = tdev_alloc(t.d, R * C * 4);
	osl = tdev_alloc(t.d, R * C * 4);
	ref_fill(tdev_ptr(t.d, isl), TPU_DTYPE_INT32, R * C, 11, -100, 100);
	jb_grid(t.b, 1, grid, "p");
	jb_operand(t.b, TPU_ROLE_INPUT, isl, TPU_DTYPE_INT32, 2, s, blk, "pid0 0");
	jb_space(t.b, 0, TPU_MEM_SMEM);
	jb_operand(t.b, TPU_ROLE_OUTPUT, osl, TPU_DTYPE_INT32, 2, s, blk, "pid0 0");
	jb_space(t.b, 1, TPU_MEM_SMEM);
	for (int j = 0; j < C; j++) {
		char prog[64];

		/* out[i][j] = in[i][C - 1 - j] * i + 1 */
		snprintf(prog, sizeof(prog), "%d %d smem0 pid0 * 1 +", j, C - 1 - j);
		jb_scalar_store(t.b, JB_OPND(1), prog, NULL);
	}
	ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
	in = tdev_ptr(t.d, isl);
	out = tdev_ptr(t.d, osl);
	for (int i = 0; i < R; i++)
		for (int j = 0; j < C; j++)
			bad += out[i * C + j] != in[i * C + C - 1 - j] * i + 1;
	EXPECT_EQ(0, bad);
	EXPECT_EQ(R, t.res.stats.blocks_fetched);
	EXPECT_EQ(R, t.res.stats.blocks_written);
	/* an index map may not read an SMEM-space block */
	t.b = (jb_free(t.b), jb_new());
	jb_grid(t.b, 1, grid, "p");
	jb_operand(t.b, TPU_ROLE_INPUT, isl, TPU_DTYPE_INT32, 2, s, blk, "pid0 0");
	jb_space(t.b, 0, TPU_MEM_SMEM);
	jb_operand(t.b, TPU_ROLE_OUTPUT, osl, TPU_DTYPE_INT32, 2, s, blk,
		   "0 smem0 0");
	jb_space(t.b, 1, TPU_MEM_SMEM);
	jb_scalar_store(t.b, JB_OPND(1), "0 0", NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_BYTECODE, "operand 0 is not scalar prefetch");
	mt_fini(&t);
}

TEST(scalar_store_into_smem_scratch_read_back_in_a_predicate)
{
	uint64_t os[2] = { 32, 16 };
	uint32_t ob[2] = { 8, 16 }, grid[1] = { 4 }, one[1] = { 1 };
	struct mt t;
	unsigned int osl, flag;
	struct tpu_job_op *op;
	const float *out;
	int bad = 0;

	mt_init(&t, 1);
	osl = tdev_alloc(t.d, 32 * 16 * 4);
	jb_grid(t.b, 1, grid, "a");
	jb_operand(t.b, TPU_ROLE_OUTPUT, osl, TPU_DTYPE_F32, 2, os, ob, "pid0 0");
	flag = jb_scratch(t.b, TPU_MEM_SMEM, TPU_DTYPE_INT32, 1, one);
	jb_scalar_store(t.b, JB_SCR(flag), "0 pid0 10 *", NULL);
	jb_zero(t.b, JB_OPND(0), NULL);
	op = jb_binary(t.b, TPU_BINARY_ADD, TPU_BCAST_IMM, JB_OPND(0), JB_OPND(0),
		       JB_NONE, "0 scr0 20 ==");
	op->imm = f32_bits(1);
	ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
	out = tdev_ptr(t.d, osl);
	for (int e = 0; e < 32 * 16; e++)
		bad += out[e] != (e / (8 * 16) == 2 ? 1 : 0);
	EXPECT_EQ(0, bad);
	mt_fini(&t);
}

TEST(copies_into_smem_from_scalar_prefetch_and_hbm)
{
	static const int32_t table[8] = { 10, 11, 12, 13, 14, 15, 16, 17 };
	static const int32_t hbm[4] = { -1, -2, -3, -4 };
	uint64_t ts[1] = { 8 }, hs[1] = { 4 }, os[2] = { 1, 8 };
	uint32_t grid[1] = { 1 }, eight[1] = { 8 }, four[1] = { 4 };
	struct mt t;
	unsigned int tsl, hsl, osl, scr, sem, wt, lo, hi;
	const int32_t *out;

	mt_init(&t, 1);
	tsl = tdev_alloc(t.d, sizeof(table));
	hsl = tdev_alloc(t.d, sizeof(hbm));
	osl = tdev_alloc(t.d, 8 * 4);
	memcpy(tdev_ptr(t.d, tsl), table, sizeof(table));
	memcpy(tdev_ptr(t.d, hsl), hbm, sizeof(hbm));
	jb_grid(t.b, 1, grid, "a");
	jb_operand(t.b, TPU_ROLE_SCALAR_PREFETCH, tsl, TPU_DTYPE_INT32, 1, ts,
		   NULL, NULL);
	jb_operand(t.b, TPU_ROLE_INPUT, hsl, TPU_DTYPE_INT32, 1, hs, NULL, NULL);
	jb_space(t.b, 1, TPU_MEM_ANY);
	jb_operand(t.b, TPU_ROLE_OUTPUT, osl, TPU_DTYPE_INT32, 2, os,
		   (const uint32_t[2]){ 1, 8 }, "0 0");
	jb_space(t.b, 2, TPU_MEM_SMEM);
	scr = jb_scratch(t.b, TPU_MEM_SMEM, TPU_DTYPE_INT32, 1, eight);
	sem = sem_scratch(t.b, TPU_MEM_SEM_DMA, 1);
	wt = jb_window(t.b, JB_OPND(0), 0, four, 1, "2");
	lo = jb_window(t.b, JB_SCR(scr), 0, four, 1, NULL);
	hi = jb_window(t.b, JB_SCR(scr), 0, four, 1, "4");
	/* scratch[0:4] = table[2:6], scratch[4:8] = the ANY array */
	jb_copy(t.b, TPU_OP_COPY_START, JB_WIN(lo), JB_WIN(wt), JB_SCR(sem), NULL,
		NULL);
	jb_copy(t.b, TPU_OP_COPY_START, JB_WIN(hi), JB_OPND(1), JB_SCR(sem), NULL,
		NULL);
	jb_copy(t.b, TPU_OP_COPY_WAIT, JB_SCR(scr), JB_NONE, JB_SCR(sem), NULL,
		NULL);
	for (int j = 0; j < 8; j++) {
		char prog[32];

		snprintf(prog, sizeof(prog), "%d %d scr0", j, j);
		jb_scalar_store(t.b, JB_OPND(2), prog, NULL);
	}
	ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
	out = tdev_ptr(t.d, osl);
	for (int j = 0; j < 8; j++)
		EXPECT_EQ(j < 4 ? table[2 + j] : hbm[j - 4], out[j]);
	/* SMEM was the prefetch's copy: its array in HBM is unchanged */
	EXPECT_EQ(0, memcmp(tdev_ptr(t.d, tsl), table, sizeof(table)));
	mt_fini(&t);
}

TEST(load_scratch_outside_its_scratch_fails)
{
	uint64_t os[2] = { 8, 16 };
	uint32_t ob[2] = { 8, 16 }, grid[1] = { 2 }, two[1] = { 2 };
	struct mt t;

	mt_init(&t, 1);
	jb_grid(t.b, 1, grid, "a");
	jb_operand(t.b, TPU_ROLE_OUTPUT, tdev_alloc(t.d, 8 * 16 * 4),
		   TPU_DTYPE_F32, 2, os, ob, "0 0");
	jb_scratch(t.b, TPU_MEM_SMEM, TPU_DTYPE_INT32, 1, two);
	jb_scalar_store(t.b, JB_SCR(0), "pid0 1", NULL);
	jb_zero(t.b, JB_OPND(0), "pid0 1 + scr0 1 ==");
	EXPECT_FAIL(&t, TPU_JOB_ERR_SMEM_RANGE,
		    "LOAD_SCRATCH index 2 outside scratch 0 (2 elements)");
	EXPECT_EQ(1, t.res.error.step);
	mt_fini(&t);
}

/*
 * SMEM blocks of bfloat16, int8, uint8, bool and uint32, at their own
 * size: LOAD_SMEM widens each element (bf16 exactly, then truncated toward
 * zero; int8 sign-extended; uint8, bool and uint32 zero-extended; bool any
 * non-zero byte as 1) into an int32 SMEM output.
 */
TEST(narrow_smem_blocks_widen_on_load)
{
	enum { C = 6 };
	static const uint16_t bf[C] = { 0x3fc0, 0xc030, 0x4f00, 0x7fc0, 0xbf00, 0x0001 };
	static const int32_t bf_want[C] = { 1, -2, INT32_MIN, 0, 0, 0 };
	static const uint8_t by[C] = { 0, 1, 2, 127, 128, 255 };
	static const int32_t i8_want[C] = { 0, 1, 2, 127, -128, -1 };
	static const int32_t u8_want[C] = { 0, 1, 2, 127, 128, 255 };
	static const int32_t b_want[C] = { 0, 1, 1, 1, 1, 1 };
	static const unsigned int dt[4] = { TPU_DTYPE_BF16, TPU_DTYPE_INT8,
					    TPU_DTYPE_UINT8, TPU_DTYPE_BOOL };
	const int32_t *want[4] = { bf_want, i8_want, u8_want, b_want };
	uint64_t s[2] = { 1, C };
	uint32_t blk[2] = { 1, C }, grid[1] = { 1 };

	for (int k = 0; k < 5; k++) {
		static const uint32_t u32[C] = { 0, 1, 0x7fffffff, 0x80000000,
						 0xfffffffe, 0xffffffff };
		unsigned int dtype = k < 4 ? dt[k] : TPU_DTYPE_UINT32;
		unsigned int size = tpu_dtype_size(dtype);
		unsigned int isl, osl;
		const int32_t *out;
		struct mt t;

		mt_init(&t, 1);
		isl = tdev_alloc(t.d, C * 4);
		osl = tdev_alloc(t.d, C * 4);
		memcpy(tdev_ptr(t.d, isl), k == 0 ? (const void *)bf :
		       k < 4 ? (const void *)by : (const void *)u32, C * size);
		jb_grid(t.b, 1, grid, "a");
		jb_operand(t.b, TPU_ROLE_INPUT, isl, dtype, 2, s, blk, "0 0");
		jb_space(t.b, 0, TPU_MEM_SMEM);
		jb_operand(t.b, TPU_ROLE_OUTPUT, osl, TPU_DTYPE_INT32, 2, s, blk, "0 0");
		jb_space(t.b, 1, TPU_MEM_SMEM);
		for (int j = 0; j < C; j++) {
			char prog[64];

			/* uint32: whether the element is above INT32_MAX */
			snprintf(prog, sizeof(prog), k < 4 ? "%d %d smem0" :
				 "%d %d smem0 2147483647 >", j, j);
			jb_scalar_store(t.b, JB_OPND(1), prog, NULL);
		}
		ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
		out = tdev_ptr(t.d, osl);
		for (int j = 0; j < C; j++) {
			int32_t w = k < 4 ? want[k][j] : (int32_t)(u32[j] > INT32_MAX);

			EXPECT_EQ(w, out[j])
				TH_LOG("%s element %d", tpu_dtype_name(dtype), j);
		}
		mt_fini(&t);
	}
}

/*
 * The other way: int32 values stored into SMEM outputs (and scratch) of
 * the narrow types. bf16 rounds once to nearest even, also from int64
 * values past 2^24; int8 and uint8 keep the low byte; bool is 0 or 1.
 */
TEST(narrow_smem_stores_round_and_wrap)
{
	enum { C = 9 };
	static const char *const val[C] = {
		"300", "-1", "128", "257", "259", "65536 65536 * 16777216 +",
		"65536 65536 * 16777216 + 1 +", "65536 65536 * 65536 * 32768 *", "0",
	};
	static const uint16_t bf_want[C] = { 0x4396, 0xbf80, 0x4300, 0x4380,
					     0x4382, 0x4f80, 0x4f81, 0xdf00, 0 };
	/* read back: truncated, stored into int32 (low bits: 2^32 is 0) */
	static const int32_t bf_back[C] = { 300, -1, 128, 256, 260, 0, 1 << 25, 0, 0 };
	static const uint8_t byte_want[C] = { 44, 0xff, 128, 1, 3, 0, 1, 0, 0 };
	static const uint8_t bool_want[C] = { 1, 1, 1, 1, 1, 1, 1, 1, 0 };
	static const unsigned int dt[4] = { TPU_DTYPE_BF16, TPU_DTYPE_INT8,
					    TPU_DTYPE_UINT8, TPU_DTYPE_BOOL };
	const void *want[4] = { bf_want, byte_want, byte_want, bool_want };
	uint64_t s[2] = { 1, C };
	uint32_t blk[2] = { 1, C }, grid[1] = { 1 }, sc[1] = { C };

	for (int k = 0; k < 4; k++) {
		unsigned int size = tpu_dtype_size(dt[k]), osl, psl, scr;
		struct mt t;

		mt_init(&t, 1);
		osl = tdev_alloc(t.d, C * 4);
		psl = tdev_alloc(t.d, C * 4);
		jb_grid(t.b, 1, grid, "a");
		jb_operand(t.b, TPU_ROLE_OUTPUT, osl, dt[k], 2, s, blk, "0 0");
		jb_space(t.b, 0, TPU_MEM_SMEM);
		/* through a scratch of the type too: stored, read back, stored */
		jb_operand(t.b, TPU_ROLE_OUTPUT, psl, TPU_DTYPE_INT32, 2, s, blk, "0 0");
		jb_space(t.b, 1, TPU_MEM_SMEM);
		scr = jb_scratch(t.b, TPU_MEM_SMEM, dt[k], 1, sc);
		for (int j = 0; j < C; j++) {
			char prog[80];

			snprintf(prog, sizeof(prog), "%d %s", j, val[j]);
			jb_scalar_store(t.b, JB_OPND(0), prog, NULL);
			jb_scalar_store(t.b, JB_SCR(scr), prog, NULL);
			snprintf(prog, sizeof(prog), "%d %d scr0", j, j);
			jb_scalar_store(t.b, JB_OPND(1), prog, NULL);
		}
		ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
		EXPECT_EQ(0, memcmp(tdev_ptr(t.d, osl), want[k], C * size))
			TH_LOG("%s", tpu_dtype_name(dt[k]));
		for (int j = 0; j < C; j++) {
			const int32_t *back = tdev_ptr(t.d, psl);
			int32_t w;

			if (k == 0)
				w = bf_back[j];
			else if (k == 1)
				w = (int8_t)byte_want[j];
			else
				w = k == 2 ? byte_want[j] : bool_want[j];
			EXPECT_EQ(w, back[j]) TH_LOG("%s element %d", tpu_dtype_name(dt[k]), j);
		}
		mt_fini(&t);
	}
}

/*
 * Bounds of narrow SMEM are in elements. A store one past the end fails;
 * a load past the end reads on to the job's SMEM end (tpu_smem_reach):
 * the zeros padding the array to a word, then nothing.
 */
TEST(narrow_smem_past_the_end)
{
	uint64_t os[2] = { 8, 16 };
	uint32_t ob[2] = { 8, 16 }, grid[1] = { 1 }, five[1] = { 5 }, three[1] = { 3 };
	struct mt t;

	/* 5 int8 take two words: index 5 is in the padding, still outside */
	mt_init(&t, 1);
	jb_grid(t.b, 1, grid, "a");
	jb_operand(t.b, TPU_ROLE_OUTPUT, tdev_alloc(t.d, 8 * 16 * 4),
		   TPU_DTYPE_F32, 2, os, ob, "0 0");
	jb_scratch(t.b, TPU_MEM_SMEM, TPU_DTYPE_INT8, 1, five);
	jb_scalar_store(t.b, JB_SCR(0), "4 1", NULL);
	jb_scalar_store(t.b, JB_SCR(0), "5 1", NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_SMEM_RANGE,
		    "index 5 outside scratch 0 (5 elements)");
	mt_fini(&t);

	/* 3 bf16 in two words: index 3 is padding (0), index 4 past SMEM */
	for (int k = 0; k < 2; k++) {
		mt_init(&t, 1);
		jb_grid(t.b, 1, grid, "a");
		jb_operand(t.b, TPU_ROLE_OUTPUT, tdev_alloc(t.d, 8 * 16 * 4),
			   TPU_DTYPE_F32, 2, os, ob, "0 0");
		jb_scratch(t.b, TPU_MEM_SMEM, TPU_DTYPE_BF16, 1, three);
		jb_zero(t.b, JB_OPND(0), "2 scr0 0 ==");
		jb_zero(t.b, JB_OPND(0), k ? "4 scr0 0 ==" : "3 scr0 0 ==");
		if (k)
			EXPECT_FAIL(&t, TPU_JOB_ERR_SMEM_RANGE,
				    "LOAD_SCRATCH index 4 outside scratch 0 (3 elements, 4 to the end of the job's SMEM)");
		else
			EXPECT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
		mt_fini(&t);
	}

	/* bcast smem of a bool SMEM scratch: its elements, as 0.0 or 1.0 */
	mt_init(&t, 1);
	jb_grid(t.b, 1, grid, "a");
	jb_operand(t.b, TPU_ROLE_OUTPUT, tdev_alloc(t.d, 8 * 16 * 4),
		   TPU_DTYPE_F32, 2, os, ob, "0 0");
	jb_scratch(t.b, TPU_MEM_SMEM, TPU_DTYPE_BOOL, 1, three);
	jb_binary(t.b, TPU_BINARY_ADD, TPU_BCAST_SMEM, JB_OPND(0), JB_OPND(0),
		  JB_SCR(0), NULL)->scalar_index = jb_prog(t.b, "4");
	EXPECT_FAIL(&t, TPU_JOB_ERR_SMEM_RANGE,
		    "SMEM index 4 outside SMEM scratch 0 (3 elements, 4 to the end of the job's SMEM)");
	mt_fini(&t);
}

/*
 * A load past an SMEM array's end reads the next array's words, as a
 * TPU's scalar core does: scratch a[2] is b[0] (what a store put there),
 * by LOAD_SCRATCH and by bcast smem alike; a store to a[2] still fails.
 */
TEST(smem_load_past_the_end_reads_the_next_array)
{
	uint64_t os[2] = { 8, 16 };
	uint32_t ob[2] = { 8, 16 }, grid[1] = { 1 }, two[1] = { 2 };
	const float *out;
	unsigned int o;
	int bad = 0;
	struct mt t;

	mt_init(&t, 1);
	o = tdev_alloc(t.d, 8 * 16 * 4);
	jb_grid(t.b, 1, grid, "a");
	jb_operand(t.b, TPU_ROLE_OUTPUT, o, TPU_DTYPE_F32, 2, os, ob, "0 0");
	jb_scratch(t.b, TPU_MEM_SMEM, TPU_DTYPE_INT32, 1, two);
	jb_scratch(t.b, TPU_MEM_SMEM, TPU_DTYPE_INT32, 1, two);
	jb_scalar_store(t.b, JB_SCR(1), "0 42", NULL);
	jb_zero(t.b, JB_OPND(0), NULL);
	/* out = 0 + a[2], only if a[2] == 42 through the other path too */
	jb_binary(t.b, TPU_BINARY_ADD, TPU_BCAST_SMEM, JB_OPND(0), JB_OPND(0),
		  JB_SCR(0), "2 scr0 42 ==")->scalar_index = jb_prog(t.b, "2");
	ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
	out = tdev_ptr(t.d, o);
	for (int i = 0; i < 8 * 16; i++)
		bad += out[i] != 42.0f;
	EXPECT_EQ(0, bad);
	mt_fini(&t);

	mt_init(&t, 1);
	jb_grid(t.b, 1, grid, "a");
	jb_operand(t.b, TPU_ROLE_OUTPUT, tdev_alloc(t.d, 8 * 16 * 4),
		   TPU_DTYPE_F32, 2, os, ob, "0 0");
	jb_scratch(t.b, TPU_MEM_SMEM, TPU_DTYPE_INT32, 1, two);
	jb_scratch(t.b, TPU_MEM_SMEM, TPU_DTYPE_INT32, 1, two);
	jb_scalar_store(t.b, JB_SCR(0), "2 42", NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_SMEM_RANGE,
		    "index 2 outside scratch 0 (2 elements)");
	mt_fini(&t);
}

/* bcast smem of bf16 and int8 SMEM blocks: the elements' values. */
TEST(bcast_smem_of_narrow_smem_blocks)
{
	static const uint16_t bf[4] = { 0x3fc0, 0xc030, 0x4000, 0x3f80 };	/* 1.5 -2.75 2 1 */
	static const int8_t i8[4] = { -3, 5, -128, 127 };
	uint64_t xs[2] = { 8, 128 }, ss[1] = { 4 };
	uint32_t xb[2] = { 8, 128 }, sb[1] = { 4 }, grid[1] = { 1 };

	for (int k = 0; k < 2; k++) {
		struct mt t;
		unsigned int ssl, osl;
		const float *out;
		int bad = 0;

		mt_init(&t, 1);
		ssl = tdev_alloc(t.d, 16);
		osl = tdev_alloc(t.d, 8 * 128 * 4);
		memcpy(tdev_ptr(t.d, ssl), k ? (const void *)i8 : (const void *)bf,
		       k ? sizeof(i8) : sizeof(bf));
		jb_grid(t.b, 1, grid, "a");
		jb_operand(t.b, TPU_ROLE_INPUT, ssl, k ? TPU_DTYPE_INT8 : TPU_DTYPE_BF16,
			   1, ss, sb, "0");
		jb_space(t.b, 0, TPU_MEM_SMEM);
		jb_operand(t.b, TPU_ROLE_OUTPUT, osl, TPU_DTYPE_F32, 2, xs, xb, "0 0");
		jb_zero(t.b, JB_OPND(1), NULL);
		jb_binary(t.b, TPU_BINARY_ADD, TPU_BCAST_SMEM, JB_OPND(1), JB_OPND(1),
			  JB_OPND(0), NULL)->scalar_index = jb_prog(t.b, "1");
		ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
		out = tdev_ptr(t.d, osl);
		for (int e = 0; e < 8 * 128; e++)
			bad += out[e] != (k ? 5.0f : -2.75f);
		EXPECT_EQ(0, bad);
		mt_fini(&t);
	}
}

/* --- regular semaphores --- */

/* Three steps; each signals sem[1] by pid + 2 and waits @wait1 then 1. */
static void build_regular(struct mt *t, const char *signal, const char *wait1)
{
	uint64_t os[2] = { 24, 16 };
	uint32_t ob[2] = { 8, 16 }, grid[1] = { 3 };
	struct tpu_job_op *op;

	jb_grid(t->b, 1, grid, "a");
	jb_operand(t->b, TPU_ROLE_OUTPUT, tdev_alloc(t->d, 24 * 16 * 4),
		   TPU_DTYPE_F32, 2, os, ob, "pid0 0");
	sem_scratch(t->b, TPU_MEM_SEM_REGULAR, 2);
	jb_zero(t->b, JB_OPND(0), NULL);
	jb_sem_op(t->b, TPU_OP_SEM_SIGNAL, JB_SCR(0), signal, NULL);
	/* pltpu.semaphore_read sees the count */
	op = jb_binary(t->b, TPU_BINARY_ADD, TPU_BCAST_IMM, JB_OPND(0),
		       JB_OPND(0), JB_NONE, "1 scr0 pid0 2 + ==");
	op->imm = f32_bits(1);
	if (wait1)
		jb_sem_op(t->b, TPU_OP_SEM_WAIT, JB_SCR(0), wait1, NULL);
	jb_sem_op(t->b, TPU_OP_SEM_WAIT, JB_SCR(0), "1 1", NULL);
}

TEST(regular_semaphore_signal_and_wait)
{
	struct mt t;
	const float *out;
	int bad = 0;

	mt_init(&t, 1);
	build_regular(&t, "1 pid0 2 +", "1 pid0 1 +");
	ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
	out = tdev_ptr(t.d, 0);
	for (int e = 0; e < 24 * 16; e++)
		bad += out[e] != 1;
	EXPECT_EQ(0, bad);
	mt_fini(&t);
}

TEST(semaphore_errors)
{
	struct mt t;

	/* a wait for more than the count: nothing else can signal it */
	mt_init(&t, 1);
	build_regular(&t, "1 pid0 2 +", "1 pid0 2 +");
	EXPECT_FAIL(&t, TPU_JOB_ERR_SEMAPHORE,
		    "step 0: op 4 waits on semaphore sem[1] (scratch 0) for 1: it holds 0");
	EXPECT_EQ(0, t.res.error.block[0]);
	EXPECT_EQ(1, t.res.error.block[1]);
	EXPECT_EQ(0, t.res.error.block[2]);
	EXPECT_EQ(1, t.res.error.need);
	mt_fini(&t);
	/* a negative signal */
	mt_init(&t, 1);
	build_regular(&t, "1 pid0 2 -", "1 1");
	EXPECT_FAIL(&t, TPU_JOB_ERR_SEMAPHORE, "signals semaphore sem[1] (scratch 0) with -2");
	mt_fini(&t);
	/* an index outside the scratch */
	mt_init(&t, 1);
	build_regular(&t, "2 1", "1 1");
	EXPECT_FAIL(&t, TPU_JOB_ERR_SEMAPHORE, "sem[2] of scratch 0, which has 2");
	mt_fini(&t);
	/* a count left over after the core's last step */
	mt_init(&t, 1);
	build_regular(&t, "1 pid0 2 +", NULL);
	/* signalled 2 + 3 + 4, waited 1 a step */
	EXPECT_FAIL(&t, TPU_JOB_ERR_SEMAPHORE,
		    "after the core's last step (2), semaphore sem[1] (scratch 0) holds 6, not 0: a signal never waited for?");
	EXPECT_EQ(6, t.res.error.block[2]);
	mt_fini(&t);
}

/* --- pl.Buffered(n) --- */

enum { BR = 256, BC = 256, BSTEPS = 8 };

/*
 * y = x + 1 in blocks of 256 x 256 f32; x's index map @x_map; @nexp exps
 * of x into a scratch, work for the fetches to hide behind.
 */
static void build_buffered(struct mt *t, unsigned int buffers, const char *x_map,
			   unsigned int nexp)
{
	uint32_t ss[2] = { BR, BC };
	uint64_t s[2] = { BSTEPS * BR, BC };
	uint32_t blk[2] = { BR, BC }, grid[1] = { BSTEPS };
	unsigned int xsl = tdev_alloc(t->d, BSTEPS * BR * BC * 4);
	unsigned int ysl = tdev_alloc(t->d, BSTEPS * BR * BC * 4);
	struct tpu_job_op *op;

	ref_fill(tdev_ptr(t->d, xsl), TPU_DTYPE_F32, BSTEPS * BR * BC, 13, -99, 99);
	jb_grid(t->b, 1, grid, "a");
	jb_operand(t->b, TPU_ROLE_INPUT, xsl, TPU_DTYPE_F32, 2, s, blk, x_map);
	jb_buffers(t->b, 0, buffers);
	jb_operand(t->b, TPU_ROLE_OUTPUT, ysl, TPU_DTYPE_F32, 2, s, blk, "pid0 0");
	op = jb_binary(t->b, TPU_BINARY_ADD, TPU_BCAST_IMM, JB_OPND(1),
		       JB_OPND(0), JB_NONE, NULL);
	op->imm = f32_bits(1);
	if (nexp)
		jb_scratch(t->b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, ss);
	for (unsigned int k = 0; k < nexp; k++)
		jb_unary(t->b, TPU_UNARY_EXP, JB_SCR(0), JB_OPND(0), NULL);
}

static int check_buffered(struct mt *t, bool halves)
{
	const float *x = tdev_ptr(t->d, 0), *y = tdev_ptr(t->d, 1);
	int bad = 0;

	for (int e = 0; e < BSTEPS * BR * BC; e++) {
		int step = e / (BR * BC), xb = halves ? step / 2 : step;

		bad += y[e] != x[xb * BR * BC + e % (BR * BC)] + 1;
	}
	return bad;
}

TEST(buffered_1_fits_where_double_buffering_does_not_and_models_slower)
{
	struct mt one, two;
	uint64_t block = BR * BC * 4;

	mt_init(&one, 1);
	mt_init(&two, 1);
	build_buffered(&one, 1, "pid0 0", 0);
	build_buffered(&two, 0, "pid0 0", 0);
	/* 1 x + 2 y blocks fit in 3 blocks of VMEM; 2 + 2 do not */
	jb_vmem_limit(one.b, 3 * block);
	jb_vmem_limit(two.b, 3 * block);
	ASSERT_EQ(0, mt_run(&one, 0)) TH_LOG("%s", one.res.message);
	EXPECT_EQ(0, check_buffered(&one, false));
	EXPECT_FAIL(&two, TPU_JOB_ERR_VMEM_LIMIT, "over");
	EXPECT_EQ(4 * block, two.res.error.need);
	jb_vmem_limit(two.b, 4 * block);
	ASSERT_EQ(0, mt_run(&two, 0)) TH_LOG("%s", two.res.message);
	EXPECT_EQ(0, check_buffered(&two, false));
	/* the single buffer's fetches cannot hide behind compute */
	EXPECT_GT(one.res.stats.model.time_s, two.res.stats.model.time_s);
	EXPECT_GT(one.res.stats.model.bubble_s, two.res.stats.model.bubble_s);
	EXPECT_EQ(one.res.stats.hbm_bytes_in, two.res.stats.hbm_bytes_in);
	mt_fini(&one);
	mt_fini(&two);
}

TEST(buffered_3_runs_ahead_of_uneven_fetches)
{
	struct mt three, two;

	mt_init(&three, 1);
	mt_init(&two, 1);
	/*
	 * A new x block every other step, and compute (11 exps: ~0.48 us)
	 * between one block's transfer (0.32 us: the write-back of y) and
	 * two (the write-back and x's fetch): double buffering is DMA-bound
	 * every other step, a third buffer fetches in the idle time before.
	 */
	build_buffered(&three, 3, "pid0 2 // 0", 11);
	build_buffered(&two, 2, "pid0 2 // 0", 11);
	ASSERT_EQ(0, mt_run(&three, 0)) TH_LOG("%s", three.res.message);
	ASSERT_EQ(0, mt_run(&two, 0)) TH_LOG("%s", two.res.message);
	EXPECT_EQ(0, check_buffered(&three, true));
	EXPECT_EQ(0, check_buffered(&two, true));
	EXPECT_LT(three.res.stats.model.time_s, two.res.stats.model.time_s);
	EXPECT_EQ(three.res.stats.hbm_bytes_in, two.res.stats.hbm_bytes_in);
	mt_fini(&three);
	mt_fini(&two);
}

/* --- input_output_aliases --- */

TEST(aliased_output_keeps_the_inputs_data_where_not_written)
{
	uint64_t s[2] = { 32, 16 };
	uint32_t blk[2] = { 8, 16 }, grid[1] = { 2 };
	struct mt t;
	unsigned int xsl;
	float before[32 * 16];
	const float *x;
	struct tpu_job_op *op;
	int bad = 0;

	mt_init(&t, 2);
	xsl = tdev_alloc(t.d, sizeof(before));
	ref_fill(tdev_ptr(t.d, xsl), TPU_DTYPE_F32, 32 * 16, 17, -9, 9);
	memcpy(before, tdev_ptr(t.d, xsl), sizeof(before));
	jb_grid(t.b, 1, grid, "p");
	jb_operand(t.b, TPU_ROLE_INPUT, xsl, TPU_DTYPE_F32, 2, s, blk, "pid0 2 * 0");
	jb_operand(t.b, TPU_ROLE_OUTPUT, xsl, TPU_DTYPE_F32, 2, s, blk, "pid0 2 * 0");
	op = jb_binary(t.b, TPU_BINARY_ADD, TPU_BCAST_IMM, JB_OPND(1), JB_OPND(0),
		       JB_NONE, NULL);
	op->imm = f32_bits(1);
	/* undeclared, the overlap is refused before anything runs */
	EXPECT_FAIL(&t, TPU_JOB_ERR_BUFFER,
		    "operands 0 and 1 share bytes of HBM: declare the alias (input_output_aliases)");
	EXPECT_EQ(0, memcmp(before, tdev_ptr(t.d, xsl), sizeof(before)));
	jb_alias(t.b, 1, 0);
	ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
	x = tdev_ptr(t.d, xsl);
	for (int e = 0; e < 32 * 16; e++) {
		int block = e / (8 * 16);

		bad += x[e] != (block % 2 ? before[e] : before[e] + 1);
	}
	EXPECT_EQ(0, bad);
	/* an alias must name an input */
	jb_alias(t.b, 1, 1);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR, "alias 2 names operand 1, which is an output, not an input");
	mt_fini(&t);
}

/* --- decode errors of copies and windows --- */

/* A new one-core job: x: ANY @x_dtype 16 x 16 (operand 0), o: ANY f32
 * 16 x 16 (operand 1); scratch 0: VMEM f32 8 x 16; scratch 1: 2 DMA sems. */
static void copy_base_init(struct mt *t, unsigned int x_dtype)
{
	uint64_t xs[2] = { 16, 16 };
	uint32_t ss[2] = { 8, 16 }, grid[1] = { 1 };

	mt_init(t, 1);
	jb_grid(t->b, 1, grid, "a");
	jb_operand(t->b, TPU_ROLE_INPUT, tdev_alloc(t->d, 16 * 16 * 4), x_dtype,
		   2, xs, NULL, NULL);
	jb_space(t->b, 0, TPU_MEM_ANY);
	jb_operand(t->b, TPU_ROLE_OUTPUT, tdev_alloc(t->d, 16 * 16 * 4),
		   TPU_DTYPE_F32, 2, xs, NULL, NULL);
	jb_space(t->b, 1, TPU_MEM_ANY);
	jb_scratch(t->b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, ss);
	sem_scratch(t->b, TPU_MEM_SEM_DMA, 2);
}

TEST(copy_shape_and_dtype_mismatches)
{
	uint32_t w8[2] = { 8, 16 }, w4[2] = { 4, 16 };
	struct mt t;
	unsigned int w;

	copy_base_init(&t, TPU_DTYPE_F32);
	w = jb_window(t.b, JB_OPND(0), 0, w4, 2, NULL);
	jb_copy(t.b, TPU_OP_COPY_START, JB_SCR(0), JB_WIN(w), JB_SCR(1), NULL, NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 0: copy shapes differ: src0 is 4x16 (ANY), dst is 8x16 (VMEM)");
	mt_fini(&t);

	/* int32 into float32 is a bitcast (one width); bfloat16 into float32
	 * one of two widths, whose rows must hold as many bytes */
	copy_base_init(&t, TPU_DTYPE_BF16);
	w = jb_window(t.b, JB_OPND(0), 0, w8, 2, NULL);
	jb_copy(t.b, TPU_OP_COPY_START, JB_SCR(0), JB_WIN(w), JB_SCR(1), NULL, NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 0: copy of bfloat16 8x16 into float32 8x16: a copy between dtypes of two widths moves whole rows of bytes");
	mt_fini(&t);

	/* a wait without a source: (none), index 0, as the driver requires */
	copy_base_init(&t, TPU_DTYPE_F32);
	jb_copy(t.b, TPU_OP_COPY_WAIT, JB_SCR(0),
		(struct tpu_job_ref){ TPU_REF_NONE, 2 }, JB_SCR(1), NULL, NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 0: src0 (none) has index 2: must be 0");
	mt_fini(&t);
}

/* A width-changing bitcast's copies: int32 rows into bfloat16 rows of as
 * many bytes and on into int8 ones move the bytes untouched. */
TEST(copies_between_two_widths_move_row_bytes)
{
	uint64_t xs[2] = { 8, 16 }, os[2] = { 8, 64 };
	uint32_t ss[2] = { 8, 32 }, grid[1] = { 1 };
	unsigned int xsl, osl, scr, sem;
	const uint8_t *x, *o;
	struct mt t;

	mt_init(&t, 1);
	xsl = tdev_alloc(t.d, 8 * 16 * 4);
	osl = tdev_alloc(t.d, 8 * 64);
	ref_fill(tdev_ptr(t.d, xsl), TPU_DTYPE_INT32, 8 * 16, 7, -2000000000, 2000000000);
	jb_grid(t.b, 1, grid, "a");
	jb_operand(t.b, TPU_ROLE_INPUT, xsl, TPU_DTYPE_INT32, 2, xs, NULL, NULL);
	jb_space(t.b, 0, TPU_MEM_ANY);
	jb_operand(t.b, TPU_ROLE_OUTPUT, osl, TPU_DTYPE_INT8, 2, os, NULL, NULL);
	jb_space(t.b, 1, TPU_MEM_ANY);
	scr = jb_scratch(t.b, TPU_MEM_VMEM, TPU_DTYPE_BF16, 2, ss);
	sem = sem_scratch(t.b, TPU_MEM_SEM_DMA, 1);
	jb_copy(t.b, TPU_OP_COPY_START, JB_SCR(scr), JB_OPND(0), JB_SCR(sem), NULL, NULL);
	jb_copy(t.b, TPU_OP_COPY_WAIT, JB_SCR(scr), JB_NONE, JB_SCR(sem), NULL, NULL);
	jb_copy(t.b, TPU_OP_COPY_START, JB_OPND(1), JB_SCR(scr), JB_SCR(sem), NULL, NULL);
	jb_copy(t.b, TPU_OP_COPY_WAIT, JB_OPND(1), JB_NONE, JB_SCR(sem), NULL, NULL);
	ASSERT_EQ(0, mt_run(&t, 0)) TH_LOG("%s", t.res.message);
	x = tdev_ptr(t.d, xsl);
	o = tdev_ptr(t.d, osl);
	EXPECT_EQ(0, memcmp(x, o, 8 * 64));
	mt_fini(&t);

	/* rows of different byte counts are refused, naming both ends */
	mt_init(&t, 1);
	xsl = tdev_alloc(t.d, 8 * 16 * 4);
	jb_grid(t.b, 1, grid, "a");
	jb_operand(t.b, TPU_ROLE_INPUT, xsl, TPU_DTYPE_INT32, 2, xs, NULL, NULL);
	jb_space(t.b, 0, TPU_MEM_ANY);
	jb_operand(t.b, TPU_ROLE_OUTPUT, tdev_alloc(t.d, 8 * 16 * 4), TPU_DTYPE_F32, 2, xs,
		   NULL, NULL);
	jb_space(t.b, 1, TPU_MEM_ANY);
	scr = jb_scratch(t.b, TPU_MEM_VMEM, TPU_DTYPE_INT8, 2, ss);
	sem = sem_scratch(t.b, TPU_MEM_SEM_DMA, 1);
	jb_copy(t.b, TPU_OP_COPY_START, JB_SCR(scr), JB_OPND(0), JB_SCR(sem), NULL, NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 0: copy of int32 8x16 into int8 8x32: a copy between dtypes of two widths moves whole rows of bytes");
	mt_fini(&t);
}

TEST(compute_ops_never_touch_any_and_never_write_inputs)
{
	uint64_t xs[2] = { 16, 16 };
	uint32_t blk[2] = { 8, 16 }, w4[2] = { 4, 16 }, grid[1] = { 1 };
	struct mt t;
	unsigned int w;

	copy_base_init(&t, TPU_DTYPE_F32);
	jb_unary(t.b, TPU_UNARY_RELU, JB_SCR(0), JB_OPND(0), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 0: src0 operand 0 is not a VMEM ref (space ANY: only async copies reach it)");
	mt_fini(&t);

	mt_init(&t, 1);
	jb_grid(t.b, 1, grid, "a");
	jb_operand(t.b, TPU_ROLE_INPUT, tdev_alloc(t.d, 16 * 16 * 4),
		   TPU_DTYPE_F32, 2, xs, blk, "0 0");
	jb_operand(t.b, TPU_ROLE_OUTPUT, tdev_alloc(t.d, 16 * 16 * 4),
		   TPU_DTYPE_F32, 2, xs, blk, "0 0");
	w = jb_window(t.b, JB_OPND(0), 0, w4, 2, "4 0");
	jb_zero(t.b, JB_WIN(w), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 0: dst window 0 is a window of input operand 0, which is read-only");
	mt_fini(&t);
}

/* --- run-time errors of copies --- */

TEST(copy_wait_errors)
{
	uint32_t w4[2] = { 4, 16 };
	struct mt t;
	unsigned int w;

	/* a semaphore index outside its scratch */
	copy_base_init(&t, TPU_DTYPE_F32);
	jb_copy(t.b, TPU_OP_COPY_START, JB_OPND(1), JB_OPND(0), JB_SCR(1), "5",
		NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_SEMAPHORE,
		    "op 0 names semaphore sem[5] of scratch 1, which has 2");
	mt_fini(&t);

	/* a wait with nothing in flight */
	copy_base_init(&t, TPU_DTYPE_F32);
	jb_copy(t.b, TPU_OP_COPY_WAIT, JB_SCR(0), JB_NONE, JB_SCR(1), "1", NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_SEMAPHORE,
		    "step 0: op 0 waits on semaphore sem[1] (scratch 1) for 512 bytes: 0 in flight");
	EXPECT_EQ(512, t.res.error.need);
	EXPECT_EQ(1, t.res.error.block[0]);
	EXPECT_EQ(1, t.res.error.block[1]);
	mt_fini(&t);

	/* a wait for more bytes than are in flight */
	copy_base_init(&t, TPU_DTYPE_F32);
	w = jb_window(t.b, JB_OPND(0), 0, w4, 2, NULL);
	jb_window(t.b, JB_SCR(0), 0, w4, 2, NULL);
	jb_copy(t.b, TPU_OP_COPY_START, JB_WIN(1), JB_WIN(w), JB_SCR(1), NULL, NULL);
	jb_copy(t.b, TPU_OP_COPY_WAIT, JB_SCR(0), JB_NONE, JB_SCR(1), NULL, NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_SEMAPHORE, "for 512 bytes: 256 in flight");
	mt_fini(&t);

	/* a copy never waited for */
	copy_base_init(&t, TPU_DTYPE_F32);
	jb_copy(t.b, TPU_OP_COPY_START, JB_OPND(1), JB_OPND(0), JB_SCR(1), NULL,
		NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_SEMAPHORE,
		    "semaphore sem[0] (scratch 1) holds 1024, not 0: a copy started but never waited?");
	mt_fini(&t);
}

/* --- debug mode: hazards of copies in flight --- */

static void expect_hazard_only_in_debug(struct __test_metadata *_metadata,
					struct mt *t, const char *text)
{
	EXPECT_EQ(0, mt_run(t, 0)) TH_LOG("%s", t->res.message);
	EXPECT_FAIL_FLAGS(t, TPU_JOB_F_DEBUG, TPU_JOB_ERR_HAZARD, text);
}

TEST(debug_hazards_of_copies_in_flight)
{
	uint32_t w8[2] = { 8, 16 };
	struct mt t;
	unsigned int w;

	/* reading the destination before the wait */
	copy_base_init(&t, TPU_DTYPE_F32);
	jb_scratch(t.b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, w8);
	w = jb_window(t.b, JB_OPND(0), 0, w8, 2, NULL);
	jb_copy(t.b, TPU_OP_COPY_START, JB_SCR(0), JB_WIN(w), JB_SCR(1), NULL, NULL);
	scale(t.b, JB_SCR(2), JB_SCR(0), 2, NULL);
	jb_copy(t.b, TPU_OP_COPY_WAIT, JB_SCR(0), JB_WIN(w), JB_SCR(1), NULL, NULL);
	expect_hazard_only_in_debug(_metadata, &t,
		"step 0: op 1 reads scratch 0 while the async copy of op 0 (started at step 0) writes it");
	EXPECT_EQ(1, t.res.error.op);
	mt_fini(&t);

	/* writing a copy's source while it is in flight */
	copy_base_init(&t, TPU_DTYPE_F32);
	w = jb_window(t.b, JB_OPND(1), 0, w8, 2, "8 0");
	jb_zero(t.b, JB_SCR(0), NULL);
	jb_copy(t.b, TPU_OP_COPY_START, JB_WIN(w), JB_SCR(0), JB_SCR(1), NULL, NULL);
	jb_zero(t.b, JB_SCR(0), NULL);
	jb_copy(t.b, TPU_OP_COPY_WAIT, JB_WIN(w), JB_SCR(0), JB_SCR(1), NULL, NULL);
	expect_hazard_only_in_debug(_metadata, &t,
		"op 2 writes scratch 0 while the async copy of op 1 (started at step 0) reads it");
	mt_fini(&t);

	/* a copy into a buffer another copy in flight reads */
	copy_base_init(&t, TPU_DTYPE_F32);
	w = jb_window(t.b, JB_OPND(1), 0, w8, 2, NULL);
	jb_window(t.b, JB_OPND(0), 0, w8, 2, NULL);
	jb_zero(t.b, JB_SCR(0), NULL);
	jb_copy(t.b, TPU_OP_COPY_START, JB_WIN(w), JB_SCR(0), JB_SCR(1), NULL, NULL);
	jb_copy(t.b, TPU_OP_COPY_START, JB_SCR(0), JB_WIN(1), JB_SCR(1), "1", NULL);
	jb_copy(t.b, TPU_OP_COPY_WAIT, JB_WIN(w), JB_NONE, JB_SCR(1), NULL, NULL);
	jb_copy(t.b, TPU_OP_COPY_WAIT, JB_SCR(0), JB_NONE, JB_SCR(1), "1", NULL);
	expect_hazard_only_in_debug(_metadata, &t,
		"op 2 writes scratch 0 while the async copy of op 1 (started at step 0) reads it");
	mt_fini(&t);
}

TEST_HARNESS_MAIN
