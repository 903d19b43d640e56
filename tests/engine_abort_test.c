// SPDX-License-Identifier: MIT
/*
 * Host test: a job stops at the next grid step once its queue's abort flag
 * is set (a reset after a timeout), reporting TPU_JOB_ERR_ABORTED.
 */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "job_builder.h"
#include "kselftest_harness.h"

FIXTURE(abort) {
	struct tdev *d;
	void *blob;
	size_t len;
	uint64_t total_steps;
};

FIXTURE_SETUP(abort)
{
	struct mm_job j = {
		.m = 1024, .k = 1024, .n = 1024, .bm = 128, .bk = 128, .bn = 128,
		.in_dtype = TPU_DTYPE_F32, .out_dtype = TPU_DTYPE_F32,
	};

	self->d = tdev_new(64 << 20, 1);
	j.x_slot = tdev_alloc(self->d, 1024 * 1024 * 4);
	j.y_slot = tdev_alloc(self->d, 1024 * 1024 * 4);
	j.z_slot = tdev_alloc(self->d, 1024 * 1024 * 4);
	self->blob = mm_build(&j, &self->len);
	self->total_steps = 8 * 8 * 8;
}

FIXTURE_TEARDOWN(abort)
{
	free(self->blob);
	tdev_free(self->d);
}

static int run(FIXTURE_DATA(abort) *self, const atomic_bool *abort,
	       struct tpu_job_result *res)
{
	return tpu_engine_run_abortable(self->d->engine, self->blob, self->len,
					self->d->hbm, self->d->hbm_size,
					self->d->slots, self->d->nslots, 0,
					abort, res);
}

TEST_F(abort, clear_flag_runs_to_the_end)
{
	atomic_bool abort = false;
	struct tpu_job_result res;

	EXPECT_EQ(0, run(self, &abort, &res));
	EXPECT_EQ(self->total_steps, res.stats.steps);
}

TEST_F(abort, set_flag_stops_before_the_first_step)
{
	atomic_bool abort = true;
	struct tpu_job_result res;

	EXPECT_EQ(TPU_JOB_ERR_ABORTED, run(self, &abort, &res));
	EXPECT_EQ(TPU_JOB_ERR_ABORTED, res.error.code);
	EXPECT_EQ(0, res.error.step);
	EXPECT_EQ(0, res.stats.steps);
}

static void *set_later(void *arg)
{
	usleep(2000);
	atomic_store((atomic_bool *)arg, true);
	return NULL;
}

TEST_F(abort, flag_set_mid_job_stops_it_early)
{
	atomic_bool abort = false;
	struct tpu_job_result res;
	pthread_t t;
	int i, stopped = 0;

	/* Timing decides where it stops; a few tries make "early" certain. */
	for (i = 0; i < 5 && !stopped; i++) {
		atomic_store(&abort, false);
		ASSERT_EQ(0, pthread_create(&t, NULL, set_later, &abort));
		if (run(self, &abort, &res) == TPU_JOB_ERR_ABORTED) {
			EXPECT_LT(res.stats.steps, self->total_steps);
			EXPECT_EQ(res.stats.steps, res.error.step);
			stopped = 1;
		}
		pthread_join(t, NULL);
	}
	EXPECT_TRUE(stopped);
}

TEST_HARNESS_MAIN
