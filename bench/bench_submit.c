// SPDX-License-Identifier: MIT
/*
 * Job submission rates in the VM: null jobs (a 1-step grid, 16 floats in,
 * 16 out) through
 *   - ioctl_wait: SUBMIT, then JOB_INFO with WAIT, one job at a time;
 *   - ioctl_pipelined: SUBMIT with an out-syncobj from a ring of 64, a
 *     syncobj waited for only before it is reused;
 *   - uring_batchN: libtpurt's queue on io_uring, N jobs per submission,
 *     completions reaped in batches (batch 1: one job at a time);
 *   - uring_polled_batchN: the same on a polled queue (TPURT_QUEUE_POLL,
 *     IORING_SETUP_IOPOLL), its reaper polling the device, beside batch 1.
 * Prints `bench: NAME = VALUE UNIT` lines, latencies (median, p99) for the
 * one-at-a-time paths, and io_uring at batch 64 against ioctl_wait, the
 * anchor, measured in the same run. ioctl_wait's latency is split into its
 * parts: the SUBMIT ioctl, the JOB_INFO wait, and the device's own time for
 * the job (its report's wall_ns), to see where a slow round trip went.
 * Where the driver's wait_spin_us can be written (root), ioctl_wait runs
 * in turns of SPIN_TURN jobs with the driver's setting and with spinning
 * off (`ioctl_wait_nospin_*`), so both see the same load.
 *
 * BENCH_SUBMIT_JOBS=N runs just N ioctl_wait jobs, with the driver's spin
 * setting, and prints nothing but their count: a fixed amount of work for
 * scripts/guest-profile.sh to count instructions over.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xf86drm.h>

#include "tpu_drm.h"
#include "tpurt.h"
#include "../selftests/tpu_job_blob.h"
#include "../selftests/tpu_wait_spin.h"

#define VEC		16
#define RUN_NS		2000000000ll	/* each path runs this long */
#define WARMUP		64
#define MAX_SAMPLES	200000
#define WINDOW		64		/* syncobjs of the pipelined ioctl path */
#define SPIN_TURN	16		/* jobs per turn of a spin setting */

/* Microseconds, one per job. */
struct samples {
	double *us;
	unsigned int n;
};

struct bench {
	struct tpurt_device *dev;
	int fd;
	struct tpurt_buffer *in, *out;
	uint32_t handles[2];
	struct tpu_add_job job;
	struct samples lat, submit, wait, device;
	struct samples nospin;		/* ioctl_wait's latency without spinning */
	unsigned long failures;
};

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void print_samples(struct samples *s, const char *name)
{
	if (!s->n)
		return;
	qsort(s->us, s->n, sizeof(double), cmp_double);
	printf("bench: %s_median = %.1f us\n", name, s->us[s->n / 2]);
	printf("bench: %s_p90 = %.1f us\n", name, s->us[(size_t)(s->n * 0.9)]);
	printf("bench: %s_p99 = %.1f us\n", name, s->us[(size_t)(s->n * 0.99)]);
}

static void print_latency(struct bench *b, const char *name)
{
	char what[64];

	snprintf(what, sizeof(what), "%s_latency", name);
	print_samples(&b->lat, what);
}

static void add_sample(struct samples *s, double us)
{
	if (s->n < MAX_SAMPLES)
		s->us[s->n++] = us;
}

static void record_latency(struct bench *b, long long t0)
{
	add_sample(&b->lat, (now_ns() - t0) / 1000.0);
}

static struct drm_tpu_submit submit_args(struct bench *b, uint32_t flags,
					 uint32_t out_syncobj)
{
	return (struct drm_tpu_submit){
		.desc_ptr = (uintptr_t)&b->job,
		.desc_size = sizeof(b->job),
		.flags = flags,
		.handles_ptr = (uintptr_t)b->handles,
		.handle_count = 2,
		.out_syncobj = out_syncobj,
	};
}

/*
 * One job, waited for: submit, then JOB_INFO(WAIT | RELEASE); with @parts,
 * the time of each ioctl and the device's own time go into their samples.
 */
static int ioctl_wait_one(struct bench *b, bool parts)
{
	struct drm_tpu_submit s = submit_args(b, 0, 0);
	struct tpu_job_report report = { 0 };
	struct drm_tpu_job_info info = {
		.flags = DRM_TPU_JOB_INFO_WAIT | DRM_TPU_JOB_INFO_RELEASE,
		.report_ptr = (uintptr_t)&report,
		.report_size = sizeof(report),
	};
	long long t0 = now_ns(), t1;

	if (drmIoctl(b->fd, DRM_IOCTL_TPU_SUBMIT, &s))
		return -errno;
	t1 = now_ns();
	info.job_id = s.job_id;
	if (drmIoctl(b->fd, DRM_IOCTL_TPU_JOB_INFO, &info))
		return -errno;
	if (info.status)
		b->failures++;
	if (parts) {
		add_sample(&b->submit, (t1 - t0) / 1000.0);
		add_sample(&b->wait, (now_ns() - t1) / 1000.0);
		add_sample(&b->device, report.wall_ns / 1000.0);
	}
	return 0;
}

static double run_ioctl_wait(struct bench *b)
{
	long spin = tpu_wait_spin_get();
	long long t0, start, busy = 0;
	unsigned long n = 0;
	int i;

	for (i = 0; i < WARMUP; i++)
		if (ioctl_wait_one(b, false))
			return -1;
	b->lat.n = 0;
	start = now_ns();
	do {
		/* Odd turns without spinning, when the setting can change. */
		bool nospin = spin > 0 && (n / SPIN_TURN) % 2;

		if (spin > 0 && n % SPIN_TURN == 0)
			tpu_wait_spin_set(nospin ? 0 : spin);
		t0 = now_ns();
		if (ioctl_wait_one(b, !nospin))
			return -1;
		if (nospin) {
			add_sample(&b->nospin, (now_ns() - t0) / 1000.0);
		} else {
			record_latency(b, t0);
			busy += now_ns() - t0;
		}
		n++;
	} while (now_ns() - start < RUN_NS);
	if (spin > 0)
		tpu_wait_spin_set(spin);
	return busy ? b->lat.n * 1e9 / busy : 0;
}

static double run_ioctl_pipelined(struct bench *b)
{
	uint32_t sync[WINDOW];
	long long start = 0;
	unsigned long n = 0, i;
	double rate = -1;

	for (i = 0; i < WINDOW; i++)
		if (tpurt_sync_create(b->dev, &sync[i]))
			return -1;
	for (i = 0;; i++) {
		uint32_t *s = &sync[i % WINDOW];
		struct drm_tpu_submit args;

		if (i == WARMUP)
			start = now_ns();
		if (i >= WINDOW &&
		    drmSyncobjWait(b->fd, s, 1, INT64_MAX, 0, NULL))
			goto out;
		args = submit_args(b, DRM_TPU_SUBMIT_NO_RECORD, *s);
		if (drmIoctl(b->fd, DRM_IOCTL_TPU_SUBMIT, &args))
			goto out;
		if (i > WARMUP) {
			n++;
			if (now_ns() - start >= RUN_NS)
				break;
		}
	}
	/* Count the time until the last job is done. */
	if (drmSyncobjWait(b->fd, sync, WINDOW, INT64_MAX,
			   DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL, NULL))
		goto out;
	rate = n * 1e9 / (now_ns() - start);
out:
	for (i = 0; i < WINDOW; i++)
		tpurt_sync_destroy(b->dev, sync[i]);
	return rate;
}

static int reap_some(struct bench *b, struct tpurt_queue *q, int timeout_ms)
{
	struct tpurt_completion c[64];
	int i, n = tpurt_queue_reap(q, c, 64, timeout_ms);

	for (i = 0; i < n; i++)
		if (c[i].status)
			b->failures++;
	return n;
}

/*
 * @batch jobs per submission; with batch 1, one job at a time (latency);
 * otherwise at most two batches in flight, reaped as they complete. On a
 * queue of @queue_flags (TPURT_QUEUE_POLL: the reaper polls the device).
 */
static double run_uring(struct bench *b, unsigned int batch,
			unsigned int queue_flags)
{
	struct tpurt_buffer *slots[2] = { b->in, b->out };
	struct tpurt_queue *q;
	unsigned long n = 0, warm = 0;
	long long start = 0, t0;
	double rate = -1;
	unsigned int i;

	if (tpurt_queue_create_flags(b->dev, 2 * batch, queue_flags, &q))
		return -1;
	b->lat.n = 0;
	for (;;) {
		if (warm >= WARMUP && !start)
			start = now_ns();
		t0 = now_ns();
		for (i = 0; i < batch; i++)
			if (tpurt_queue_job(q, &b->job, sizeof(b->job), slots, 2,
					    0, 0, NULL, i))
				goto out;
		if (tpurt_queue_submit(q) != (int)batch)
			goto out;
		/* Keep one batch in flight while the next is prepared. */
		while (tpurt_queue_pending(q) > (batch == 1 ? 0 : batch))
			if (reap_some(b, q, -1) < 0)
				goto out;
		if (batch == 1 && start)
			record_latency(b, t0);
		if (!start) {
			warm += batch;
			continue;
		}
		n += batch;
		if (now_ns() - start >= RUN_NS)
			break;
	}
	while (tpurt_queue_pending(q))
		if (reap_some(b, q, -1) < 0)
			goto out;
	rate = n * 1e9 / (now_ns() - start);
out:
	tpurt_queue_destroy(q);
	return rate;
}

/*
 * tools/tcg_tb_count.c's mark: counting starts at the first and stops at
 * the second. Elsewhere it does nothing; no compiler emits it.
 */
static void profile_mark(void)
{
	__asm__ volatile("xchg %%rbx, %%rbx" ::: "memory");
}

/* BENCH_SUBMIT_JOBS: @jobs null jobs, one at a time, untimed. */
static int run_fixed(struct bench *b, long jobs)
{
	long long t0;
	long i;

	for (i = 0; i < WARMUP; i++)
		if (ioctl_wait_one(b, false))
			return 1;
	profile_mark();
	t0 = now_ns();
	for (i = 0; i < jobs; i++)
		if (ioctl_wait_one(b, false))
			return 1;
	t0 = now_ns() - t0;
	profile_mark();
	printf("bench_submit: %ld ioctl_wait jobs, %lu failed, %.1f us each\n",
	       jobs, b->failures, jobs ? t0 / 1e3 / jobs : 0);
	return b->failures != 0;
}

int main(void)
{
	struct bench b = { 0 };
	double wait_rate, pipe_rate, rate[3], uring1_median = 0;
	static const unsigned int batches[3] = { 1, 8, 64 };
	const char *fixed = getenv("BENCH_SUBMIT_JOBS");
	int i;

	if (tpurt_open(&b.dev) ||
	    tpurt_buffer_create(b.dev, VEC * sizeof(float), &b.in) ||
	    tpurt_buffer_create(b.dev, VEC * sizeof(float), &b.out)) {
		fprintf(stderr, "bench_submit: %s\n", tpurt_last_error());
		return 1;
	}
	b.fd = tpurt_device_fd(b.dev);
	b.handles[TPU_BLOB_IN_SLOT] = tpurt_buffer_handle(b.in);
	b.handles[TPU_BLOB_OUT_SLOT] = tpurt_buffer_handle(b.out);
	b.lat.us = malloc(MAX_SAMPLES * sizeof(double));
	b.submit.us = malloc(MAX_SAMPLES * sizeof(double));
	b.wait.us = malloc(MAX_SAMPLES * sizeof(double));
	b.device.us = malloc(MAX_SAMPLES * sizeof(double));
	b.nospin.us = malloc(MAX_SAMPLES * sizeof(double));
	if (!b.lat.us || !b.submit.us || !b.wait.us || !b.device.us ||
	    !b.nospin.us) {
		fprintf(stderr, "bench_submit: out of memory\n");
		return 1;
	}
	tpu_add_job_init(&b.job, VEC, 0, 1.0f, 0);
	if (fixed)
		return run_fixed(&b, strtol(fixed, NULL, 0));
	if (tpurt_device_submit_path(b.dev) != TPURT_PATH_URING) {
		fprintf(stderr, "bench_submit: no io_uring commands here\n");
		return 1;
	}

	wait_rate = run_ioctl_wait(&b);
	if (wait_rate < 0)
		goto fail;
	printf("bench: ioctl_wait_jobs_per_s = %.0f jobs/s\n", wait_rate);
	print_latency(&b, "ioctl_wait");
	print_samples(&b.submit, "ioctl_wait_submit_part");
	print_samples(&b.wait, "ioctl_wait_wait_part");
	print_samples(&b.device, "ioctl_wait_device_part");
	if (b.nospin.n) {
		double spin_median = b.lat.us[b.lat.n / 2];

		print_samples(&b.nospin, "ioctl_wait_nospin_latency");
		printf("bench: ioctl_wait_spin_vs_nospin_median = %.2f x\n",
		       spin_median / b.nospin.us[b.nospin.n / 2]);
	}

	pipe_rate = run_ioctl_pipelined(&b);
	if (pipe_rate < 0)
		goto fail;
	printf("bench: ioctl_pipelined_jobs_per_s = %.0f jobs/s\n", pipe_rate);

	for (i = 0; i < 3; i++) {
		char name[32];

		rate[i] = run_uring(&b, batches[i], 0);
		if (rate[i] < 0)
			goto fail;
		snprintf(name, sizeof(name), "uring_batch%u", batches[i]);
		printf("bench: %s_jobs_per_s = %.0f jobs/s\n", name, rate[i]);
		if (batches[i] == 1) {
			print_latency(&b, name);
			uring1_median = b.lat.us[b.lat.n / 2];
		}
	}
	/* The same on a polled queue: the reaper polls instead of sleeping. */
	for (i = 0; i < 3; i += 2) {
		char name[40];
		double polled = run_uring(&b, batches[i], TPURT_QUEUE_POLL);

		if (polled < 0)
			goto fail;
		snprintf(name, sizeof(name), "uring_polled_batch%u", batches[i]);
		printf("bench: %s_jobs_per_s = %.0f jobs/s\n", name, polled);
		if (batches[i] == 1) {
			print_latency(&b, name);
			printf("bench: uring_polled_vs_uring_batch1_median = %.2f x\n",
			       b.lat.us[b.lat.n / 2] / uring1_median);
		}
	}
	printf("bench: uring_batch64_vs_ioctl_jobs_per_s = %.2f x\n",
	       rate[2] / wait_rate);
	printf("bench: uring_batch64_vs_ioctl_pipelined = %.2f x\n",
	       rate[2] / pipe_rate);
	if (b.failures) {
		fprintf(stderr, "bench_submit: %lu jobs failed\n", b.failures);
		return 1;
	}
	return 0;

fail:
	fprintf(stderr, "bench_submit: %s (errno %d)\n", tpurt_last_error(), errno);
	return 1;
}
