// SPDX-License-Identifier: MIT
/*
 * Host test: a job stops soon once its queue's abort flag is set (a reset
 * after a timeout), reporting TPU_JOB_ERR_ABORTED: at the next grid step,
 * inside a long op, and while a core skips the other cores' steps.
 */
#include <pthread.h>
#include <string.h>
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

static double ms_of(clockid_t clock)
{
	struct timespec t;

	clock_gettime(clock, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double now_ms(void)
{
	return ms_of(CLOCK_MONOTONIC);
}

/*
 * The CPU time of the calling thread, which runs a one-core engine's work
 * (its GEMM runs one thread a core). Unlike the wall clock it does not run
 * on while a busy host leaves the worker off the CPU. The aborting thread
 * reads it through pthread_getcpuclockid(), which samples a running
 * thread exactly; the process clock it read before counts another running
 * thread only up to its last tick, and once charged up to 4 ms of the copy
 * before the abort to the time after it.
 */
static double cpu_ms(void)
{
	return ms_of(CLOCK_THREAD_CPUTIME_ID);
}

struct late_abort {
	atomic_bool flag;
	unsigned int delay_us;
	clockid_t worker_cpu;		/* the engine's thread's CPU clock */
	double set_at, set_at_cpu;	/* now_ms(), its CPU ms when set */
};

static void *abort_later(void *arg)
{
	struct late_abort *a = arg;

	usleep(a->delay_us);
	a->set_at = now_ms();
	a->set_at_cpu = ms_of(a->worker_cpu);
	atomic_store(&a->flag, true);
	return NULL;
}

/* From an abort to the end of the job: wall and CPU ms. */
struct latency {
	double wall, cpu;
};

/* Run @blob on @d, aborting after @delay_us. */
static struct latency abort_latency(struct tdev *d, const void *blob,
				    size_t len, unsigned int delay_us, int *ret)
{
	struct late_abort a = { .delay_us = delay_us };
	struct tpu_job_result res;
	double end, end_cpu;
	pthread_t t;

	atomic_init(&a.flag, false);
	if (pthread_getcpuclockid(pthread_self(), &a.worker_cpu))
		a.worker_cpu = CLOCK_PROCESS_CPUTIME_ID;
	pthread_create(&t, NULL, abort_later, &a);
	*ret = tpu_engine_run_abortable(d->engine, blob, len, d->hbm,
					d->hbm_size, d->slots, d->nslots, 0,
					&a.flag, &res);
	end = now_ms();
	end_cpu = ms_of(a.worker_cpu);
	pthread_join(t, NULL);
	if (!a.set_at)
		return (struct latency){ 0, 0 };
	return (struct latency){ end - a.set_at, end_cpu - a.set_at_cpu };
}

/*
 * Time @blob (the quicker of two runs: the first also faults the arrays'
 * pages in), then run it again aborting a third of the way in: the abort
 * stops it within a quarter of the full CPU time (@what: the op or the
 * copy it stops inside). CPU time, not wall time: beside the VM's threads
 * (make check runs the host tests at nice 10) the worker was once left
 * off the CPU for 18 ms of a 25 ms copy's wall time after the abort. On a
 * busy host a run can still finish before its abort lands (the aborting
 * thread woke late, or the run was quicker than the timed ones): that run
 * proves nothing either way, so up to three more, each aborted earlier,
 * until one is stopped.
 */
static void expect_prompt_abort(struct __test_metadata *_metadata,
				struct tdev *d, const void *blob, size_t len,
				const char *what)
{
	struct tpu_job_result res;
	struct latency late = { 0, 0 };
	double full = 0, full_cpu = 0;
	int ret = 0;

	for (int i = 0; i < 2; i++) {
		double t = now_ms(), c = cpu_ms();

		ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
		t = now_ms() - t;
		c = cpu_ms() - c;
		if (!i || t < full)
			full = t;
		if (!i || c < full_cpu)
			full_cpu = c;
	}
	for (int i = 0; i < 4 && ret != TPU_JOB_ERR_ABORTED; i++) {
		late = abort_latency(d, blob, len,
				     (unsigned int)(full * 1000 / (3 << i)), &ret);
		if (ret != TPU_JOB_ERR_ABORTED)
			TH_LOG("run %d ended (%d) before its abort, after 1/%d of %.1f ms",
			       i, ret, 3 << i, full);
	}
	EXPECT_EQ(TPU_JOB_ERR_ABORTED, ret);
	EXPECT_GT(full_cpu / 4, late.cpu)
		TH_LOG("used %.1f ms of CPU (%.1f ms of wall time) after the abort; the %s takes %.1f ms of CPU",
		       late.cpu, late.wall, what, full_cpu);
}

/*
 * One grid step with one 4096 x 1024 x 1024 f32 matmul: stopped between
 * row panels (a third of the way in: inside the op, after the fetches).
 * Eight panels of 512 rows, so the abort lands within an eighth of the op:
 * with 2048 rows, a panel was a quarter, the test's own bound.
 */
TEST(abort_inside_a_long_op)
{
	struct mm_job j = {
		.m = 4096, .k = 1024, .n = 1024, .bm = 4096, .bk = 1024, .bn = 1024,
		.in_dtype = TPU_DTYPE_F32, .out_dtype = TPU_DTYPE_F32,
	};
	struct tdev *d = tdev_new(64ull << 20, 1);
	size_t len;
	void *blob;

	j.x_slot = tdev_alloc(d, 4096 * 1024 * 4);
	j.y_slot = tdev_alloc(d, 1024 * 1024 * 4);
	j.z_slot = tdev_alloc(d, 4096 * 1024 * 4);
	blob = mm_build(&j, &len);
	jb_header(blob)->vmem_limit_bytes = 120ull << 20;
	expect_prompt_abort(_metadata, d, blob, len, "op");
	free(blob);
	tdev_free(d);
}

/*
 * One grid step whose body copies 128 MiB from one ANY array to another:
 * a single dense row, which the copy still moves in chunks between polls.
 */
TEST(abort_inside_a_long_copy)
{
	enum { N = 32 << 20 };	/* int32 elements */
	struct tdev *d = tdev_new(2ull * N * 4 + 4096, 1);
	struct jb *b = jb_new();
	uint64_t shape[1] = { N };
	uint32_t grid[1] = { 1 }, one[1] = { 1 };
	unsigned int x = tdev_alloc(d, 4ull * N), y = tdev_alloc(d, 4ull * N);
	size_t len;
	void *blob;

	jb_grid(b, 1, grid, "a");
	jb_operand(b, TPU_ROLE_INPUT, x, TPU_DTYPE_INT32, 1, shape, NULL, NULL);
	jb_space(b, 0, TPU_MEM_ANY);
	jb_operand(b, TPU_ROLE_OUTPUT, y, TPU_DTYPE_INT32, 1, shape, NULL, NULL);
	jb_space(b, 1, TPU_MEM_ANY);
	jb_scratch(b, TPU_MEM_SEM_DMA, TPU_DTYPE_INT32, 1, one);
	jb_copy(b, TPU_OP_COPY_START, JB_OPND(1), JB_OPND(0), JB_SCR(0), NULL, NULL);
	jb_copy(b, TPU_OP_COPY_WAIT, JB_OPND(1), JB_NONE, JB_SCR(0), NULL, NULL);
	blob = jb_finish(b, &len);
	jb_free(b);
	expect_prompt_abort(_metadata, d, blob, len, "copy");
	free(blob);
	tdev_free(d);
}

/*
 * A legal (2, 2^31, 2) grid split over two cores: the second core's steps
 * come after 2^32 steps of the first's, which it must skip in one jump.
 */
TEST(abort_while_a_core_skips_steps)
{
	struct jb *b = jb_new();
	struct tdev *d = tdev_new(1 << 20, 2);
	uint32_t grid[3] = { 2, 1u << 31, 2 }, blk[1] = { 16 };
	uint64_t xs[1] = { 16 }, zs[1] = { 32 };
	unsigned int x = tdev_alloc(d, 64), z = tdev_alloc(d, 128);
	struct latency late;
	size_t len;
	void *blob;
	int ret;

	jb_grid(b, 3, grid, "paa");
	jb_operand(b, TPU_ROLE_INPUT, x, TPU_DTYPE_F32, 1, xs, blk, "0");
	jb_operand(b, TPU_ROLE_OUTPUT, z, TPU_DTYPE_F32, 1, zs, blk, "pid0");
	jb_unary(b, TPU_UNARY_IDENTITY, JB_OPND(1), JB_OPND(0), NULL);
	blob = jb_finish(b, &len);
	jb_free(b);
	late = abort_latency(d, blob, len, 20000, &ret);
	EXPECT_EQ(TPU_JOB_ERR_ABORTED, ret);
	EXPECT_GT(500, late.wall) TH_LOG("stopped %.1f ms after the abort", late.wall);
	free(blob);
	tdev_free(d);
}

TEST_HARNESS_MAIN
