// SPDX-License-Identifier: MIT
/*
 * Host test: device loops (TPU_OP_LOOP). For loops with static and SMEM
 * bounds whose windows and scalars read the trip index, nested loops, a
 * while loop counting in SMEM, the trip limits, the model charging the
 * body once per trip, a reset noticed inside a loop, and each malformed
 * loop failing with a message naming its op and field.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job_builder.h"
#include "tpu_dtype.h"
#include "kselftest_harness.h"

#define ROWS 512
#define COLS 128

/* A job on a pretend device: x (ROWS x COLS f32) in, o out, one step. */
struct lt {
	struct tdev *d;
	struct jb *b;
	struct tpu_job_result res;
	void *blob;
	size_t len;
	unsigned int xsl, osl, ssl;
	unsigned int x, o;		/* their operand indices */
};

static void lt_init(struct lt *t, const int32_t *prefetch, unsigned int n)
{
	static const uint32_t grid[1] = { 1 };
	static const uint64_t shape[2] = { ROWS, COLS };
	static const uint32_t block[2] = { ROWS, COLS };
	float *x;

	memset(t, 0, sizeof(*t));
	t->d = tdev_new(32 << 20, 1);
	t->b = jb_new();
	jb_grid(t->b, 1, grid, "a");
	if (prefetch) {
		uint64_t ps[1] = { n };

		t->ssl = tdev_alloc(t->d, n * 4);
		memcpy(tdev_ptr(t->d, t->ssl), prefetch, n * 4);
		jb_operand(t->b, TPU_ROLE_SCALAR_PREFETCH, t->ssl, TPU_DTYPE_INT32,
			   1, ps, NULL, NULL);
	}
	t->xsl = tdev_alloc(t->d, ROWS * COLS * 4);
	t->osl = tdev_alloc(t->d, ROWS * COLS * 4);
	x = tdev_ptr(t->d, t->xsl);
	for (int i = 0; i < ROWS * COLS; i++)
		x[i] = (float)(i % 1000) * 0.5f;
	t->x = jb_operand(t->b, TPU_ROLE_INPUT, t->xsl, TPU_DTYPE_F32, 2, shape,
			  block, "0 0");
	t->o = jb_operand(t->b, TPU_ROLE_OUTPUT, t->osl, TPU_DTYPE_F32, 2, shape,
			  block, "0 0");
}

static int lt_run_abortable(struct lt *t, const atomic_bool *abort)
{
	free(t->blob);
	t->blob = jb_finish(t->b, &t->len);
	return tpu_engine_run_abortable(t->d->engine, t->blob, t->len, t->d->hbm,
					t->d->hbm_size, t->d->slots, t->d->nslots,
					0, abort, &t->res);
}

static int lt_run(struct lt *t)
{
	free(t->blob);
	t->blob = jb_finish(t->b, &t->len);
	return tdev_run(t->d, t->blob, t->len, 0, &t->res);
}

static void lt_fini(struct lt *t)
{
	free(t->blob);
	jb_free(t->b);
	tdev_free(t->d);
}

/* Rows [r * 8, r * 8 + 8) of operand @opnd, r from the postfix @row. */
static unsigned int rows8(struct lt *t, unsigned int opnd, const char *row)
{
	static const uint32_t size[2] = { 8, COLS };
	char start[64];

	snprintf(start, sizeof(start), "%s 8 * 0", row);
	return jb_window(t->b, JB_OPND(opnd), 0, size, 2, start);
}

/* dst = src + the scalar @scalar (bcast scalar) */
static struct tpu_job_op *add_scalar(struct jb *b, struct tpu_job_ref dst,
				     struct tpu_job_ref src, const char *scalar)
{
	struct tpu_job_op *op = jb_binary(b, TPU_BINARY_ADD, TPU_BCAST_SCALAR,
					  dst, src, JB_NONE, NULL);

	op->scalar_index = jb_prog(b, scalar);
	return op;
}

static const float *x_of(struct lt *t)
{
	return tdev_ptr(t->d, t->xsl);
}

static const float *o_of(struct lt *t)
{
	return tdev_ptr(t->d, t->osl);
}

#define EXPECT_FAIL(t, code, text) do {						\
	EXPECT_EQ(code, lt_run(t)) TH_LOG("%s", (t)->res.message);		\
	EXPECT_NE(NULL, strstr((t)->res.message, text))				\
		TH_LOG("message \"%s\" lacks \"%s\"", (t)->res.message, text);	\
} while (0)

/* for i in range(64): o[pl.ds(i * 8, 8), :] = x[pl.ds(i * 8, 8), :] + i */
TEST(for_loop_windows_and_scalars_read_the_trip_index)
{
	struct lt t;
	int bad = 0;

	lt_init(&t, NULL, 0);
	jb_loop(t.b, TPU_LOOP_FOR, "0 64", 1, NULL);
	add_scalar(t.b, JB_WIN(rows8(&t, t.o, "loop0")),
		   JB_WIN(rows8(&t, t.x, "loop0")), "loop0");
	ASSERT_EQ(0, lt_run(&t)) TH_LOG("%s", t.res.message);
	for (int i = 0; i < ROWS * COLS; i++)
		bad += o_of(&t)[i] != x_of(&t)[i] + (float)(i / COLS / 8);
	EXPECT_EQ(0, bad);
	EXPECT_EQ(64, t.res.stats.loop_trips);
	lt_fini(&t);
}

/* for i in range(4): for j in range(16): rows block 16 i + j += 100 i + j */
TEST(nested_loops_see_both_indices)
{
	struct lt t;
	int bad = 0;

	lt_init(&t, NULL, 0);
	jb_loop(t.b, TPU_LOOP_FOR, "0 4", 2, NULL);
	jb_loop(t.b, TPU_LOOP_FOR, "0 16", 1, NULL);
	add_scalar(t.b, JB_WIN(rows8(&t, t.o, "loop0 16 * loop1 +")),
		   JB_WIN(rows8(&t, t.x, "loop0 16 * loop1 +")),
		   "loop0 100 * loop1 +");
	ASSERT_EQ(0, lt_run(&t)) TH_LOG("%s", t.res.message);
	for (int i = 0; i < ROWS * COLS; i++) {
		int blk = i / COLS / 8;

		bad += o_of(&t)[i] != x_of(&t)[i] + (float)(blk / 16 * 100 + blk % 16);
	}
	EXPECT_EQ(0, bad);
	EXPECT_EQ(4 + 64, t.res.stats.loop_trips);
	lt_fini(&t);
}

/* lax.fori_loop(s[0], s[1], ...): the bounds are read from SMEM */
TEST(for_loop_bounds_from_scalar_prefetch)
{
	static const int32_t s[2] = { 3, 10 };
	struct lt t;
	int bad = 0;

	lt_init(&t, s, 2);
	jb_zero(t.b, JB_OPND(t.o), NULL);
	jb_loop(t.b, TPU_LOOP_FOR, "0 smem0 1 smem0", 1, NULL);
	add_scalar(t.b, JB_WIN(rows8(&t, t.o, "loop0")),
		   JB_WIN(rows8(&t, t.x, "loop0")), "1");
	ASSERT_EQ(0, lt_run(&t)) TH_LOG("%s", t.res.message);
	for (int i = 0; i < ROWS * COLS; i++) {
		int blk = i / COLS / 8;
		float want = blk >= 3 && blk < 10 ? x_of(&t)[i] + 1 : 0;

		bad += o_of(&t)[i] != want;
	}
	EXPECT_EQ(0, bad);
	EXPECT_EQ(7, t.res.stats.loop_trips);
	lt_fini(&t);
}

/* hi <= lo: no trip; a false predicate: the loop does not run at all */
TEST(empty_and_predicated_loops_skip_their_body)
{
	struct lt t;
	int bad = 0;

	lt_init(&t, NULL, 0);
	jb_zero(t.b, JB_OPND(t.o), NULL);
	jb_loop(t.b, TPU_LOOP_FOR, "5 2", 1, NULL);
	add_scalar(t.b, JB_OPND(t.o), JB_OPND(t.x), "1");
	jb_loop(t.b, TPU_LOOP_FOR, "0 3", 1, "pid0 1 ==");
	add_scalar(t.b, JB_OPND(t.o), JB_OPND(t.x), "1");
	ASSERT_EQ(0, lt_run(&t)) TH_LOG("%s", t.res.message);
	for (int i = 0; i < ROWS * COLS; i++)
		bad += o_of(&t)[i] != 0;
	EXPECT_EQ(0, bad);
	EXPECT_EQ(0, t.res.stats.loop_trips);
	lt_fini(&t);
}

/* c = 0; while c < 37: c += 1; o = x + c (the condition reads SMEM) */
static void build_count(struct lt *t, uint32_t max_trips)
{
	static const uint32_t one[1] = { 1 };
	unsigned int c = jb_scratch(t->b, TPU_MEM_SMEM, TPU_DTYPE_INT32, 1, one);
	struct tpu_job_op *loop;

	jb_scalar_store(t->b, JB_SCR(c), "0 0", NULL);
	loop = jb_loop(t->b, TPU_LOOP_WHILE, "0 scr0 37 <", 1, NULL);
	loop->imm2 = max_trips;
	jb_scalar_store(t->b, JB_SCR(c), "0 0 scr0 1 +", NULL);
	add_scalar(t->b, JB_OPND(t->o), JB_OPND(t->x), "0 scr0");
}

TEST(while_loop_counts_in_smem)
{
	struct lt t;
	int bad = 0;

	lt_init(&t, NULL, 0);
	build_count(&t, 0);
	ASSERT_EQ(0, lt_run(&t)) TH_LOG("%s", t.res.message);
	for (int i = 0; i < ROWS * COLS; i++)
		bad += o_of(&t)[i] != x_of(&t)[i] + 37;
	EXPECT_EQ(0, bad);
	EXPECT_EQ(37, t.res.stats.loop_trips);
	lt_fini(&t);
}

TEST(while_loop_past_its_maximum_fails)
{
	struct lt t;

	lt_init(&t, NULL, 0);
	build_count(&t, 10);
	EXPECT_FAIL(&t, TPU_JOB_ERR_LOOP,
		    "op 1: while loop at step 0: its condition still holds after 10 trips, its maximum");
	EXPECT_EQ(1, t.res.error.op);
	EXPECT_EQ(10, t.res.error.limit);
	lt_fini(&t);
}

TEST(for_loop_over_the_trip_limit_fails)
{
	struct lt t;

	lt_init(&t, NULL, 0);
	jb_loop(t.b, TPU_LOOP_FOR, "-1 16777216", 1, NULL);
	add_scalar(t.b, JB_OPND(t.o), JB_OPND(t.x), "1");
	EXPECT_FAIL(&t, TPU_JOB_ERR_LOOP,
		    "op 0: loop at step 0: 16777217 trips, more than the 16777216 a loop may take");
	EXPECT_EQ(16777217, t.res.error.need);
	lt_fini(&t);
}

static void *set_later(void *arg)
{
	usleep(20000);
	atomic_store((atomic_bool *)arg, true);
	return NULL;
}

/*
 * A body of scalar stores only still notices a reset at every trip: 2^48
 * trips of a hostile job stop within the step they were reset in.
 */
TEST(a_reset_stops_a_long_loop)
{
	static const uint32_t one[1] = { 1 };
	atomic_bool abort = false;
	struct lt t;
	pthread_t th;
	unsigned int c;

	lt_init(&t, NULL, 0);
	c = jb_scratch(t.b, TPU_MEM_SMEM, TPU_DTYPE_INT32, 1, one);
	jb_loop(t.b, TPU_LOOP_FOR, "0 16777216", 2, NULL);
	jb_loop(t.b, TPU_LOOP_FOR, "0 16777216", 1, NULL);
	jb_scalar_store(t.b, JB_SCR(c), "0 loop1", NULL);
	ASSERT_EQ(0, pthread_create(&th, NULL, set_later, &abort));
	EXPECT_EQ(TPU_JOB_ERR_ABORTED, lt_run_abortable(&t, &abort));
	pthread_join(th, NULL);
	EXPECT_NE(NULL, strstr(t.res.message, "stopped in trip"))
		TH_LOG("%s", t.res.message);
	lt_fini(&t);
	/* the flag clear: a 2^20-trip loop of scalar stores runs to its end */
	abort = false;
	lt_init(&t, NULL, 0);
	c = jb_scratch(t.b, TPU_MEM_SMEM, TPU_DTYPE_INT32, 1, one);
	jb_loop(t.b, TPU_LOOP_FOR, "0 1048576", 1, NULL);
	jb_scalar_store(t.b, JB_SCR(c), "0 loop0", NULL);
	EXPECT_EQ(0, lt_run_abortable(&t, &abort)) TH_LOG("%s", t.res.message);
	EXPECT_EQ(1048576, t.res.stats.loop_trips);
	lt_fini(&t);
}

/* The model charges the body at every trip: 64 trips cost 64 of one. */
TEST(model_charges_the_body_per_trip)
{
	double one, many;
	struct lt t;

	lt_init(&t, NULL, 0);
	jb_loop(t.b, TPU_LOOP_FOR, "0 1", 1, NULL);
	add_scalar(t.b, JB_OPND(t.o), JB_OPND(t.x), "1");
	ASSERT_EQ(0, lt_run(&t)) TH_LOG("%s", t.res.message);
	one = t.res.stats.model.vpu_busy_s;
	lt_fini(&t);
	lt_init(&t, NULL, 0);
	jb_loop(t.b, TPU_LOOP_FOR, "0 64", 1, NULL);
	add_scalar(t.b, JB_OPND(t.o), JB_OPND(t.x), "1");
	ASSERT_EQ(0, lt_run(&t)) TH_LOG("%s", t.res.message);
	many = t.res.stats.model.vpu_busy_s;
	EXPECT_TRUE(one > 0);
	EXPECT_TRUE(many > 63.9 * one && many < 64.1 * one)
		TH_LOG("one trip %g s, 64 trips %g s", one, many);
	lt_fini(&t);
}

/* --- malformed loops: each names its op and field --- */

TEST(loop_with_an_empty_body_is_refused)
{
	struct lt t;

	lt_init(&t, NULL, 0);
	jb_loop(t.b, TPU_LOOP_FOR, "0 4", 0, NULL);
	jb_zero(t.b, JB_OPND(t.o), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 0: imm: a loop's body has at least one op, imm is 0");
	lt_fini(&t);
}

TEST(loop_body_past_the_last_op_is_refused)
{
	struct lt t;

	lt_init(&t, NULL, 0);
	jb_loop(t.b, TPU_LOOP_FOR, "0 4", 3, NULL);
	jb_zero(t.b, JB_OPND(t.o), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 0: imm: a body of 3 ops runs to op 3, past the last op (1)");
	lt_fini(&t);
}

TEST(loop_body_crossing_its_enclosing_body_is_refused)
{
	struct lt t;

	lt_init(&t, NULL, 0);
	jb_loop(t.b, TPU_LOOP_FOR, "0 4", 2, NULL);
	jb_loop(t.b, TPU_LOOP_FOR, "0 4", 2, NULL);
	jb_zero(t.b, JB_OPND(t.o), NULL);
	jb_zero(t.b, JB_OPND(t.o), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 1: imm: a body of 2 ops ends at op 3, past the end of the enclosing loop of op 0 (its body ends at op 2)");
	lt_fini(&t);
}

TEST(loops_nested_too_deep_are_refused)
{
	struct lt t;

	lt_init(&t, NULL, 0);
	for (unsigned int d = 0; d <= TPU_JOB_MAX_LOOP_DEPTH; d++)
		jb_loop(t.b, TPU_LOOP_FOR, "0 2", TPU_JOB_MAX_LOOP_DEPTH + 1 - d, NULL);
	jb_zero(t.b, JB_OPND(t.o), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 4: loop nested 5 deep, at most 4 loops nest");
	lt_fini(&t);
}

TEST(loop_index_outside_its_loop_is_refused)
{
	struct lt t;

	lt_init(&t, NULL, 0);
	jb_loop(t.b, TPU_LOOP_FOR, "0 4", 1, NULL);
	jb_zero(t.b, JB_OPND(t.o), "loop0 0 ==");
	add_scalar(t.b, JB_OPND(t.o), JB_OPND(t.x), "loop0");
	EXPECT_FAIL(&t, TPU_JOB_ERR_BYTECODE,
		    "op 2: scalar_index: insn 0: loop index 0, but the program is inside 0 loops");
	lt_fini(&t);
	/* a loop's own bounds run outside it */
	lt_init(&t, NULL, 0);
	jb_loop(t.b, TPU_LOOP_FOR, "0 loop0", 1, NULL);
	jb_zero(t.b, JB_OPND(t.o), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_BYTECODE,
		    "op 0: scalar_index (loop bounds): insn 1: loop index 0, but the program is inside 0 loops");
	lt_fini(&t);
	/* an inner index in an op of the outer body only */
	lt_init(&t, NULL, 0);
	jb_loop(t.b, TPU_LOOP_FOR, "0 4", 3, NULL);
	jb_loop(t.b, TPU_LOOP_FOR, "0 4", 1, NULL);
	jb_zero(t.b, JB_OPND(t.o), "loop1 0 ==");
	jb_zero(t.b, JB_OPND(t.o), "loop1 0 ==");
	EXPECT_FAIL(&t, TPU_JOB_ERR_BYTECODE,
		    "op 3: predicate: insn 0: loop index 1, but the program is inside 1 loop");
	lt_fini(&t);
}

TEST(window_reading_a_loop_index_outside_the_loop_is_refused)
{
	struct lt t;

	lt_init(&t, NULL, 0);
	jb_zero(t.b, JB_WIN(rows8(&t, t.o, "loop0")), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 0: dst window 0's start reads the index of loop depth 0, but the op is inside 0 loops");
	lt_fini(&t);
}

TEST(loop_fields_are_checked)
{
	struct tpu_job_op *op;
	struct lt t;

	lt_init(&t, NULL, 0);
	op = jb_loop(t.b, TPU_LOOP_FOR, "0 4", 1, NULL);
	op->scalar_index = (struct tpu_job_prog){ 0 };
	jb_zero(t.b, JB_OPND(t.o), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 0: scalar_index: a for loop needs a program leaving lo and hi");
	lt_fini(&t);

	lt_init(&t, NULL, 0);
	jb_loop(t.b, TPU_LOOP_FOR, "4", 1, NULL);
	jb_zero(t.b, JB_OPND(t.o), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_BYTECODE,
		    "op 0: scalar_index (loop bounds): leaves 1 values, 2 needed");
	lt_fini(&t);

	lt_init(&t, NULL, 0);
	op = jb_loop(t.b, TPU_LOOP_FOR, "0 4", 1, NULL);
	op->imm2 = 3;
	jb_zero(t.b, JB_OPND(t.o), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 0: imm2 must be zero for opcode loop");
	lt_fini(&t);

	lt_init(&t, NULL, 0);
	op = jb_loop(t.b, TPU_LOOP_WHILE, "1", 1, NULL);
	op->imm2 = TPU_JOB_MAX_TRIPS + 1;
	jb_zero(t.b, JB_OPND(t.o), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR,
		    "op 0: imm2: a while loop takes at most 16777216 trips, imm2 is 16777217");
	lt_fini(&t);

	lt_init(&t, NULL, 0);
	op = jb_loop(t.b, TPU_LOOP_COUNT, "0 4", 1, NULL);
	jb_zero(t.b, JB_OPND(t.o), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR, "op 0: fn 2 unknown for opcode loop (at most 1)");
	lt_fini(&t);

	lt_init(&t, NULL, 0);
	op = jb_loop(t.b, TPU_LOOP_FOR, "0 4", 1, NULL);
	op->dst = JB_OPND(t.o);
	jb_zero(t.b, JB_OPND(t.o), NULL);
	EXPECT_FAIL(&t, TPU_JOB_ERR_DESCRIPTOR, "op 0: dst must be (none) for opcode loop");
	lt_fini(&t);
}

TEST_HARNESS_MAIN
