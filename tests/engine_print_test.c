// SPDX-License-Identifier: MIT
/*
 * Host test: the device's print buffer (TPU_OP_DEBUG_PRINT,
 * TPU_JOB_F_PRINT, uapi/tpu_print.h). Records of scalar values and a
 * ref's elements at every step, from two cores, a predicate, a buffer too
 * small (records dropped and counted, the job still succeeds), and the
 * rules each with its message.
 */
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "tpu_print.h"
#include "kselftest_harness.h"

#define ROWS 8
#define COLS 128
#define STEPS 4

FIXTURE(pr) {
	struct tdev *d;
	struct jb *b;
	unsigned int xsl, osl, psl, x, o;
	struct tpu_job_op *op;
	struct tpu_job_result res;
	void *blob;
	size_t len;
};

FIXTURE_SETUP(pr)
{
	static const uint32_t grid[1] = { STEPS }, block[2] = { ROWS, COLS };
	static const uint32_t two[2] = { 1, 2 };
	static const uint64_t shape[2] = { STEPS * ROWS, COLS };
	unsigned int w;
	float *x;

	self->d = tdev_new(32 << 20, 2);
	self->b = jb_new();
	jb_grid(self->b, 1, grid, "p");
	jb_flags(self->b, TPU_JOB_F_PRINT);
	self->xsl = tdev_alloc(self->d, STEPS * ROWS * COLS * 4);
	self->osl = tdev_alloc(self->d, STEPS * ROWS * COLS * 4);
	self->psl = tdev_alloc(self->d, 1 << 16);
	x = tdev_ptr(self->d, self->xsl);
	for (int i = 0; i < STEPS * ROWS * COLS; i++)
		x[i] = (float)i * 0.25f;
	self->x = jb_operand(self->b, TPU_ROLE_INPUT, self->xsl, TPU_DTYPE_F32, 2,
			     shape, block, "pid0 0");
	self->o = jb_operand(self->b, TPU_ROLE_OUTPUT, self->osl, TPU_DTYPE_F32, 2,
			     shape, block, "pid0 0");
	w = jb_window(self->b, JB_OPND(self->x), 0, two, 2, "0 3");
	jb_unary(self->b, TPU_UNARY_IDENTITY, JB_OPND(self->o), JB_OPND(self->x), NULL);
	/* debug_print(fmt 7, pid, pid * 10, x[0, 3:5]) */
	self->op = jb_zero(self->b, JB_NONE, NULL);
	self->op->opcode = TPU_OP_DEBUG_PRINT;
	self->op->fn = 2;
	self->op->imm = 7;
	self->op->scalar_index = jb_prog(self->b, "pid0 pid0 10 *");
	self->op->src0 = JB_WIN(w);
}

FIXTURE_TEARDOWN(pr)
{
	free(self->blob);
	jb_free(self->b);
	tdev_free(self->d);
}

static int run(FIXTURE_DATA(pr) *self)
{
	free(self->blob);
	self->blob = jb_finish(self->b, &self->len);
	jb_header(self->blob)->print_slot = (uint16_t)self->psl;
	return tdev_run(self->d, self->blob, self->len, 0, &self->res);
}

#define EXPECT_REFUSED(text) do {						\
	EXPECT_NE(0, run(self));						\
	EXPECT_NE(NULL, strstr(self->res.message, text))			\
		TH_LOG("%s", self->res.message);				\
} while (0)

TEST_F(pr, a_record_per_step_from_each_core)
{
	const struct tpu_print_header *h = tdev_ptr(self->d, self->psl);
	const uint8_t *p = (const uint8_t *)(h + 1);
	unsigned int seen = 0, cores = 0;

	ASSERT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
	ASSERT_EQ(TPU_PRINT_MAGIC, h->magic);
	ASSERT_EQ(sizeof(struct tpu_print_record), h->record_size);
	ASSERT_EQ(STEPS, h->records);
	EXPECT_EQ(0, h->dropped);
	EXPECT_EQ(STEPS * (sizeof(struct tpu_print_record) + 4 * 8), h->bytes);
	for (unsigned int i = 0; i < STEPS; i++) {
		const struct tpu_print_record *r = (const void *)p;
		const int64_t *v = (const int64_t *)(const void *)r->values;
		double e[2];

		ASSERT_EQ(sizeof(*r) + 4 * 8, r->size);
		ASSERT_GT(STEPS, r->step);
		seen |= 1u << r->step;
		cores |= 1u << r->core;
		EXPECT_EQ(1, r->op);
		EXPECT_EQ(7, r->fmt);
		EXPECT_EQ(2, r->num_scalars);
		EXPECT_EQ(1, r->num_refs);
		EXPECT_EQ(1, r->ref_rows[0]);
		EXPECT_EQ(2, r->ref_cols[0]);
		EXPECT_EQ(TPU_DTYPE_F32, r->ref_dtype[0]);
		EXPECT_EQ((int64_t)r->step, v[0]);
		EXPECT_EQ((int64_t)r->step * 10, v[1]);
		memcpy(e, v + 2, sizeof(e));
		/* x[step * 8, 3] and its right neighbour */
		EXPECT_EQ((double)(r->step * ROWS * COLS + 3) * 0.25, e[0]);
		EXPECT_EQ((double)(r->step * ROWS * COLS + 4) * 0.25, e[1]);
		p += r->size;
	}
	EXPECT_EQ((1u << STEPS) - 1, seen);
	EXPECT_EQ(3u, cores);
}

TEST_F(pr, a_predicate_and_no_values)
{
	const struct tpu_print_header *h = tdev_ptr(self->d, self->psl);
	const struct tpu_print_record *r = (const void *)(h + 1);

	self->op->fn = 0;
	self->op->scalar_index = (struct tpu_job_prog){ 0 };
	self->op->src0 = JB_NONE;
	self->op->pred = jb_prog(self->b, "pid0 2 ==");
	ASSERT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
	ASSERT_EQ(1, h->records);
	EXPECT_EQ(2, r->step);
	EXPECT_EQ(sizeof(*r), r->size);
}

TEST_F(pr, a_full_buffer_drops_records_and_the_job_succeeds)
{
	const struct tpu_print_header *h = tdev_ptr(self->d, self->psl);

	self->d->slots[self->psl].size = sizeof(*h) + sizeof(struct tpu_print_record) + 4 * 8 + 7;
	ASSERT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
	EXPECT_EQ(1, h->records);
	EXPECT_EQ(STEPS - 1, h->dropped);
	EXPECT_EQ(sizeof(struct tpu_print_record) + 4 * 8, h->bytes);
}

TEST_F(pr, rules)
{
	self->op->src1 = JB_OPND(self->x);
	self->op->src0 = JB_NONE;
	EXPECT_REFUSED("op 1: debug_print src1 operand 0 after a none source");
	self->op->src1 = JB_NONE;
	self->op->fn = TPU_PRINT_MAX_SCALARS + 1;
	EXPECT_REFUSED("op 1: fn 9 unknown for opcode debug_print");
	self->op->fn = 3;
	EXPECT_REFUSED("op 1: scalar_index (debug_print values)");
	self->op->fn = 2;
	self->op->dst = JB_OPND(self->o);
	EXPECT_REFUSED("op 1: dst must be (none) for opcode debug_print");
	self->op->dst = JB_NONE;
	jb_flags(self->b, 0);
	free(self->blob);
	self->blob = jb_finish(self->b, &self->len);
	EXPECT_NE(0, tdev_run(self->d, self->blob, self->len, 0, &self->res));
	EXPECT_NE(NULL, strstr(self->res.message, "op 1: debug_print in a job without TPU_JOB_F_PRINT"))
		TH_LOG("%s", self->res.message);
	jb_flags(self->b, TPU_JOB_F_PRINT | TPU_JOB_F_TRACE);
	free(self->blob);
	self->blob = jb_finish(self->b, &self->len);
	jb_header(self->blob)->print_slot = (uint16_t)self->psl;
	jb_header(self->blob)->trace_slot = (uint16_t)self->psl;
	EXPECT_NE(0, tdev_run(self->d, self->blob, self->len, 0, &self->res));
	EXPECT_NE(NULL, strstr(self->res.message, "print_slot 2 is the trace_slot too"))
		TH_LOG("%s", self->res.message);
	jb_flags(self->b, TPU_JOB_F_PRINT);
	self->d->slots[self->psl].size = sizeof(struct tpu_print_header) - 1;
	EXPECT_REFUSED("print_slot 2: 31 bytes, less than the 32-byte header");
}

TEST_F(pr, no_slot_without_the_flag)
{
	/* no op printing, no flag: a print_slot must be zero */
	self->op->opcode = TPU_OP_ZERO;
	self->op->fn = 0;
	self->op->imm = 0;
	self->op->scalar_index = (struct tpu_job_prog){ 0 };
	self->op->src0 = JB_NONE;
	self->op->dst = JB_OPND(self->o);
	jb_flags(self->b, 0);
	EXPECT_REFUSED("print_slot 2 without TPU_JOB_F_PRINT");
}

TEST_HARNESS_MAIN
