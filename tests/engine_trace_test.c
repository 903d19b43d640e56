// SPDX-License-Identifier: MIT
/*
 * Host test: the device's trace buffer (TPU_JOB_F_TRACE, uapi/tpu_trace.h).
 * The slot rules (in the table, room for the header, nobody's operand, no
 * slot without the flag), the records against the job's statistics, a
 * buffer too small for them (counted, not written past its end), and
 * results that do not change with tracing.
 */
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "tpu_trace.h"
#include "kselftest_harness.h"

FIXTURE(tr) {
	struct tdev *d;
	struct mm_job j;
	struct tpu_job_result res;
	unsigned int trace_slot;
	void *blob;
	size_t len;
};

FIXTURE_SETUP(tr)
{
	self->d = tdev_new(8 << 20, 2);
	self->j = (struct mm_job){ .m = 100, .k = 80, .n = 64, .bm = 32, .bk = 32,
				   .bn = 32, .in_dtype = TPU_DTYPE_F32,
				   .out_dtype = TPU_DTYPE_F32, .acc_scratch = true,
				   .flags = TPU_JOB_F_TRACE };
	self->j.x_slot = tdev_alloc(self->d, 100 * 80 * 4);
	self->j.y_slot = tdev_alloc(self->d, 80 * 64 * 4);
	self->j.z_slot = tdev_alloc(self->d, 100 * 64 * 4);
	self->trace_slot = tdev_alloc(self->d, 1 << 20);
	ref_fill(tdev_ptr(self->d, self->j.x_slot), TPU_DTYPE_F32, 100 * 80, 1, -2, 2);
	ref_fill(tdev_ptr(self->d, self->j.y_slot), TPU_DTYPE_F32, 80 * 64, 2, -2, 2);
	self->blob = mm_build(&self->j, &self->len);
	jb_header(self->blob)->trace_slot = self->trace_slot;
}

FIXTURE_TEARDOWN(tr)
{
	free(self->blob);
	tdev_free(self->d);
}

static int run(struct _test_data_tr *self)
{
	return tdev_run(self->d, self->blob, self->len, 0, &self->res);
}

#define EXPECT_REFUSED(text) do {						\
	EXPECT_NE(0, run(self));						\
	EXPECT_NE(NULL, strstr(self->res.message, text))			\
		TH_LOG("%s", self->res.message);				\
} while (0)

TEST_F(tr, records_sum_to_the_statistics)
{
	const struct tpu_trace_header *h = tdev_ptr(self->d, self->trace_slot);
	const struct tpu_trace_record *r = (const void *)(h + 1);
	const struct tpu_job_stats *st = &self->res.stats;
	uint64_t in = 0, out = 0, steps = 0, host = 0, end[2] = { 0 };

	ASSERT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
	ASSERT_EQ(TPU_TRACE_MAGIC, h->magic);
	ASSERT_EQ(sizeof(*r), h->record_size);
	ASSERT_LT(st->steps, h->count);
	for (uint64_t i = 0; i < h->count; i++) {
		ASSERT_GT(2, r[i].core);
		ASSERT_GT(TPU_TRACE_LANES, r[i].lane);
		in += r[i].lane == TPU_TRACE_DMA_IN ? r[i].bytes : 0;
		out += r[i].lane == TPU_TRACE_DMA_OUT ? r[i].bytes : 0;
		steps += r[i].lane == TPU_TRACE_STEP;
		host += r[i].lane == TPU_TRACE_HOST;
		if (r[i].lane != TPU_TRACE_HOST &&
		    r[i].start_ps + r[i].dur_ps > end[r[i].core])
			end[r[i].core] = r[i].start_ps + r[i].dur_ps;
	}
	EXPECT_EQ(st->hbm_bytes_in, in);
	EXPECT_EQ(st->hbm_bytes_out, out);
	EXPECT_EQ(st->steps, steps);
	EXPECT_EQ(st->steps, host);
	/* the slowest core's timeline plus the launch cost is the job's */
	EXPECT_GE(2, llabs((long long)(tpu_trace_ps(st->model.time_s) -
				       (end[0] > end[1] ? end[0] : end[1]) -
				       self->d->cfg.launch_cost_ns * 1000)));
}

TEST_F(tr, results_do_not_change)
{
	size_t bytes = 100 * 64 * 4;
	void *traced = malloc(bytes);

	ASSERT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
	memcpy(traced, tdev_ptr(self->d, self->j.z_slot), bytes);
	memset(tdev_ptr(self->d, self->j.z_slot), 0, bytes);
	jb_header(self->blob)->flags = 0;
	jb_header(self->blob)->trace_slot = 0;
	ASSERT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
	EXPECT_EQ(0, memcmp(traced, tdev_ptr(self->d, self->j.z_slot), bytes));
	free(traced);
}

TEST_F(tr, a_small_buffer_counts_what_it_drops)
{
	uint8_t *p = tdev_ptr(self->d, self->trace_slot);
	const struct tpu_trace_header *h = (const void *)p;
	uint64_t room = sizeof(*h) + 3 * sizeof(struct tpu_trace_record);

	self->d->slots[self->trace_slot].size = room + 5;
	memset(p, 0xa5, 1 << 20);
	ASSERT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
	EXPECT_EQ(TPU_TRACE_MAGIC, h->magic);
	EXPECT_LT(3, h->count);
	/* nothing written past the three records that fit */
	while (room < 1 << 20 && p[room] == 0xa5)
		room++;
	EXPECT_EQ(1 << 20, room) TH_LOG("byte %llu written", (unsigned long long)room);
}

TEST_F(tr, slot_rules)
{
	struct tpu_job_header *h = jb_header(self->blob);

	h->trace_slot = self->d->nslots;
	EXPECT_REFUSED("not in the");
	h->trace_slot = self->j.y_slot;
	EXPECT_REFUSED("is operand 1's slot too");
	h->trace_slot = self->trace_slot;
	self->d->slots[self->trace_slot].size = sizeof(struct tpu_trace_header) - 1;
	EXPECT_REFUSED("less than the");
	self->d->slots[self->trace_slot].size = 1 << 20;
	h->flags = 0;
	EXPECT_REFUSED("without TPU_JOB_F_TRACE");
	h->trace_slot = 0;
	EXPECT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
}

TEST_HARNESS_MAIN
