// SPDX-License-Identifier: MIT
/*
 * Host test: TPU_OP_DELAY (pltpu.delay): a stall the timing model charges
 * to each step it runs in, with the results unchanged; and the checks that
 * refuse a delay of 0 ns or past TPU_JOB_MAX_DELAY_NS, one with a dst, a
 * source or an fn.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"

enum { R = 16, C = 128, BR = 8 };	/* two steps of (8, 128) */

struct run {
	struct tpu_job_result res;
	float out[R * C];
};

/* o = x + 1 each step, after a delay op @tweak sets up (NULL: none). */
static int run_delay(uint32_t ns, void (*tweak)(struct tpu_job_op *op, unsigned int x),
		     struct run *r)
{
	uint64_t s[2] = { R, C };
	uint32_t grid[1] = { R / BR }, blk[2] = { BR, C };
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int xs = tdev_alloc(d, R * C * 4), os = tdev_alloc(d, R * C * 4), x, o;
	struct jb *b = jb_new();
	struct tpu_job_op *op;
	float *in = tdev_ptr(d, xs);
	size_t len;
	void *blob;
	int ret;

	for (int i = 0; i < R * C; i++)
		in[i] = (float)i;
	jb_grid(b, 1, grid, "a");
	x = jb_operand(b, TPU_ROLE_INPUT, xs, TPU_DTYPE_F32, 2, s, blk, "pid0 0");
	o = jb_operand(b, TPU_ROLE_OUTPUT, os, TPU_DTYPE_F32, 2, s, blk, "pid0 0");
	if (ns || tweak) {
		op = jb_zero(b, JB_NONE, NULL);
		op->opcode = TPU_OP_DELAY;
		op->imm = ns;
		if (tweak)
			tweak(op, x);
	}
	op = jb_binary(b, TPU_BINARY_ADD, TPU_BCAST_IMM, JB_OPND(o), JB_OPND(x), JB_NONE, NULL);
	op->imm = 0x3f800000;	/* 1.0f */
	blob = jb_finish(b, &len);
	ret = tdev_run(d, blob, len, 0, &r->res);
	memcpy(r->out, tdev_ptr(d, os), sizeof(r->out));
	free(blob);
	jb_free(b);
	tdev_free(d);
	return ret;
}

TEST(a_delay_is_modeled_time_only)
{
	static struct run base, delayed;

	ASSERT_EQ(0, run_delay(0, NULL, &base)) { TH_LOG("%s", base.res.message); }
	ASSERT_EQ(0, run_delay(250000, NULL, &delayed)) { TH_LOG("%s", delayed.res.message); }
	EXPECT_EQ(0, memcmp(base.out, delayed.out, sizeof(base.out)));
	EXPECT_EQ((float)R * C, delayed.out[R * C - 1]);
	/* two steps of 250 us each, within a microsecond */
	EXPECT_GT(1e-6, delayed.res.stats.model.time_s - base.res.stats.model.time_s - 2 * 250e-6)
		TH_LOG("%g s, %g s without", delayed.res.stats.model.time_s,
		       base.res.stats.model.time_s);
	EXPECT_LT(-1e-6, delayed.res.stats.model.time_s - base.res.stats.model.time_s - 2 * 250e-6);
}

static void with_dst(struct tpu_job_op *op, unsigned int x)
{
	op->dst = JB_OPND(x + 1);
}

static void with_src(struct tpu_job_op *op, unsigned int x)
{
	op->src0 = JB_OPND(x);
}

static void with_fn(struct tpu_job_op *op, unsigned int x)
{
	(void)x;
	op->fn = 1;
}

TEST(bad_delays_are_refused_by_field)
{
	static struct run r;

	ASSERT_NE(0, run_delay(0, with_fn, &r));	/* 0 ns, and an fn */
	EXPECT_NE(NULL, strstr(r.res.message, "fn")) { TH_LOG("%s", r.res.message); }
	ASSERT_NE(0, run_delay(TPU_JOB_MAX_DELAY_NS + 1, NULL, &r));
	EXPECT_NE(NULL, strstr(r.res.message, "delay of 1000000001 ns (1 to 1000000000)"))
		TH_LOG("%s", r.res.message);
	ASSERT_NE(0, run_delay(1000, with_dst, &r));
	EXPECT_NE(NULL, strstr(r.res.message, "dst must be (none) for opcode delay"))
		TH_LOG("%s", r.res.message);
	ASSERT_NE(0, run_delay(1000, with_src, &r));
	EXPECT_NE(NULL, strstr(r.res.message, "src0 must be (none) for opcode delay"))
		TH_LOG("%s", r.res.message);
}

static void zero_ns(struct tpu_job_op *op, unsigned int x)
{
	(void)x;
	op->imm = 0;
}

TEST(a_delay_of_zero_is_refused)
{
	static struct run r;

	ASSERT_NE(0, run_delay(0, zero_ns, &r));
	EXPECT_NE(NULL, strstr(r.res.message, "delay of 0 ns (1 to 1000000000)"))
		TH_LOG("%s", r.res.message);
}

TEST_HARNESS_MAIN
