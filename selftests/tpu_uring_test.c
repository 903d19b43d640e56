// SPDX-License-Identifier: MIT
/*
 * io_uring submission (DRM_TPU_URING_CMD_*): thousands of jobs through one
 * ring with every result checked, copies and jobs chained by syncobjs,
 * ordering, one CQE per SQE, refused commands, a ring without SQE128,
 * closing with commands in flight, two processes with their own rings, each
 * on a ring the interrupt completes and on a polled one (IORING_SETUP_IOPOLL);
 * and libtpurt's queue over both submission paths.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xf86drm.h>

#include "tpu_drm.h"
#include "tpurt.h"
#include "tpu_blocker.h"
#include "tpu_job_blob.h"
#include "tpu_kernel_health.h"
#include "kselftest_harness.h"
#include "tpu_require_device.h"

#define VEC		16			/* f32 elements per job */
#define VEC_BYTES	(VEC * sizeof(float))
#define NO_CQE		INT32_MIN

/* --- raw helpers --- */

static int bo_create(int fd, uint64_t size, uint32_t *handle)
{
	struct drm_tpu_bo_create c = { .size = size };

	if (drmIoctl(fd, DRM_IOCTL_TPU_BO_CREATE, &c))
		return -errno;
	*handle = c.handle;
	return 0;
}

static int copy_sync(int fd, uint32_t op, uint32_t handle, uint64_t offset,
		     void *ptr, uint64_t len)
{
	struct drm_tpu_copy c = {
		.op = op, .flags = DRM_TPU_COPY_WAIT, .handle = handle,
		.offset = offset, .user_ptr = (uintptr_t)ptr, .length = len,
	};

	return drmIoctl(fd, DRM_IOCTL_TPU_COPY, &c) ? -errno : 0;
}

static int ring_init(struct io_uring *ring, unsigned int entries,
		     unsigned int flags)
{
	struct io_uring_params p = { .flags = flags };

	return io_uring_queue_init_params(entries, ring, &p);
}

/* Fill a 128-byte SQE by hand: liburing 2.3 has no uring_cmd helper. */
static struct io_uring_sqe *prep_cmd(struct io_uring *ring, int fd,
				     uint32_t op, const void *args, size_t size,
				     uint64_t user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe)
		return NULL;
	memset(sqe, 0, (ring->flags & IORING_SETUP_SQE128) ? 128 : 64);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = op;
	if (ring->flags & IORING_SETUP_SQE128)
		memcpy(sqe->cmd, args, size);
	sqe->user_data = user_data;
	return sqe;
}

static struct io_uring_sqe *prep_submit(struct io_uring *ring, int fd,
					const struct drm_tpu_submit *s,
					uint64_t user_data)
{
	return prep_cmd(ring, fd, DRM_TPU_URING_CMD_SUBMIT, s, sizeof(*s),
			user_data);
}

static struct io_uring_sqe *prep_copy(struct io_uring *ring, int fd,
				      const struct drm_tpu_copy *c,
				      uint64_t user_data)
{
	return prep_cmd(ring, fd, DRM_TPU_URING_CMD_COPY, c, sizeof(*c),
			user_data);
}

struct cqe_log {
	int32_t *res;		/* by user_data; NO_CQE until it arrives */
	uint64_t *extra;
	unsigned int n, seen, dup;
};

static void log_init(struct cqe_log *l, unsigned int n)
{
	l->res = malloc(n * sizeof(*l->res));
	l->extra = calloc(n, sizeof(*l->extra));
	for (unsigned int i = 0; i < n; i++)
		l->res[i] = NO_CQE;
	l->n = n;
	l->seen = 0;
	l->dup = 0;
}

static void log_free(struct cqe_log *l)
{
	free(l->res);
	free(l->extra);
}

/*
 * The next CQE within @ms. A polled ring (IORING_SETUP_IOPOLL) ignores
 * the kernel-side wait timeout, so there the waiting is a loop of polls
 * (io_uring_enter with GETEVENTS returns at least when the task should
 * yield) against this clock.
 */
static int next_cqe(struct io_uring *ring, struct io_uring_cqe **cqe, int ms)
{
	struct __kernel_timespec ts = {
		.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L
	};
	double end = tpu_now() + ms / 1000.0;

	if (!(ring->flags & IORING_SETUP_IOPOLL))
		return io_uring_wait_cqe_timeout(ring, cqe, &ts);
	for (;;) {
		int ret = io_uring_peek_cqe(ring, cqe);

		if (ret != -EAGAIN)
			return ret;
		if (tpu_now() > end)
			return -ETIME;
		ret = io_uring_enter(ring->ring_fd, 0, 1,
				     IORING_ENTER_GETEVENTS, NULL);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN)
			return ret;
	}
}

/* Wait for @count CQEs (5 s each at most) and record them. */
static int reap(struct io_uring *ring, struct cqe_log *l, unsigned int count)
{
	struct io_uring_cqe *cqe;

	while (count--) {
		int ret = next_cqe(ring, &cqe, 5000);

		if (ret)
			return ret;
		if (cqe->user_data >= l->n || l->res[cqe->user_data] != NO_CQE) {
			l->dup++;
		} else {
			l->res[cqe->user_data] = cqe->res;
			if (ring->flags & IORING_SETUP_CQE32)
				l->extra[cqe->user_data] = cqe->big_cqe[0];
			l->seen++;
		}
		io_uring_cqe_seen(ring, cqe);
	}
	return 0;
}

/* No further CQE within @ms. */
static int ring_quiet(struct io_uring *ring, int ms)
{
	struct io_uring_cqe *cqe;

	return next_cqe(ring, &cqe, ms) == -ETIME;
}

/* Submit until the kernel took every prepared SQE. */
static int submit_all(struct io_uring *ring)
{
	int ret = io_uring_submit(ring);

	return ret < 0 ? ret : 0;
}

/*
 * @count add jobs through @ring in batches of @batch: job i writes
 * in + i to element block i of @out. Returns 0 when every CQE arrived
 * exactly once with res 0 and the data is right; else a line number.
 */
static int run_add_jobs(int fd, struct io_uring *ring, unsigned int count,
			unsigned int batch, uint32_t submit_flags)
{
	uint32_t in = 0, out = 0, handles[2];
	struct tpu_add_job *jobs;
	struct cqe_log log;
	float src[VEC], *dst;
	unsigned int i, done = 0;
	int ret = 0;

	if (bo_create(fd, VEC_BYTES, &in) ||
	    bo_create(fd, (uint64_t)count * VEC_BYTES, &out))
		return __LINE__;
	for (i = 0; i < VEC; i++)
		src[i] = (float)i * 0.5f;
	if (copy_sync(fd, DRM_TPU_COPY_TO_BO, in, 0, src, VEC_BYTES))
		return __LINE__;
	handles[TPU_BLOB_IN_SLOT] = in;
	handles[TPU_BLOB_OUT_SLOT] = out;

	jobs = malloc(count * sizeof(*jobs));
	dst = malloc((size_t)count * VEC_BYTES);
	log_init(&log, count);
	for (i = 0; i < count; i++)
		tpu_add_job_init(&jobs[i], VEC, (uint64_t)i * VEC_BYTES, (float)i, 0);

	while (done < count) {
		unsigned int n = count - done < batch ? count - done : batch;

		for (i = 0; i < n; i++) {
			struct drm_tpu_submit s = {
				.desc_ptr = (uintptr_t)&jobs[done + i],
				.desc_size = sizeof(jobs[0]),
				.flags = submit_flags,
				.handles_ptr = (uintptr_t)handles,
				.handle_count = 2,
			};

			if (!prep_submit(ring, fd, &s, done + i)) {
				ret = __LINE__;
				goto out;
			}
		}
		if (submit_all(ring) || reap(ring, &log, n)) {
			ret = __LINE__;
			goto out;
		}
		done += n;
	}
	if (log.seen != count || log.dup || !ring_quiet(ring, 50)) {
		ret = __LINE__;
		goto out;
	}
	for (i = 0; i < count; i++) {
		if (log.res[i] != 0) {
			ret = __LINE__;
			goto out;
		}
		/* Job ids: unique and non-zero with records, 0 without. */
		if ((submit_flags & DRM_TPU_SUBMIT_NO_RECORD) ? log.extra[i] != 0 :
		    !log.extra[i] || (i && log.extra[i] == log.extra[i - 1])) {
			ret = __LINE__;
			goto out;
		}
	}
	if (copy_sync(fd, DRM_TPU_COPY_FROM_BO, out, 0, dst,
		      (uint64_t)count * VEC_BYTES)) {
		ret = __LINE__;
		goto out;
	}
	for (i = 0; i < count * VEC; i++) {
		if (dst[i] != src[i % VEC] + (float)(i / VEC)) {
			ret = __LINE__;
			goto out;
		}
	}
out:
	log_free(&log);
	free(jobs);
	free(dst);
	return ret;
}

FIXTURE(uring) {
	struct tpurt_device *dev;
	int fd;
	struct io_uring ring;
};

/*
 * Each test on a ring whose waiter sleeps until the interrupt, and on one
 * made with IORING_SETUP_IOPOLL, whose waiter polls the device's queues
 * (the driver's uring_cmd_iopoll) as NVMe passthrough does.
 */
FIXTURE_VARIANT(uring) {
	unsigned int ring_flags;
};

FIXTURE_VARIANT_ADD(uring, interrupt) { 0 };
FIXTURE_VARIANT_ADD(uring, polled) { IORING_SETUP_IOPOLL };

FIXTURE_SETUP(uring)
{
	ASSERT_EQ(0, tpurt_open(&self->dev)) TH_LOG("%s", tpurt_last_error());
	self->fd = tpurt_device_fd(self->dev);
	ASSERT_EQ(0, ring_init(&self->ring, 128, IORING_SETUP_SQE128 |
			       IORING_SETUP_CQE32 | variant->ring_flags));
}

FIXTURE_TEARDOWN(uring)
{
	io_uring_queue_exit(&self->ring);
	tpurt_close(self->dev);
}

/*
 * 4096 jobs in batches of 64: every CQE once, res 0, every result right.
 * How many the poller retired (debugfs "polled") is logged, not checked:
 * the interrupt handler and the poller race for each completion, and on
 * a loaded host the handler can win them all.
 */
TEST_F(uring, thousands_of_jobs)
{
	long polled = tpu_queue_count(self->fd, "tpu-q1", "polled");
	long irqs = tpu_queue_count(self->fd, "tpu-q1", "irqs");

	EXPECT_EQ(0, run_add_jobs(self->fd, &self->ring, 4096, 64, 0));
	if (polled >= 0 && irqs >= 0)
		TH_LOG("%ld retired by polling, %ld interrupts",
		       tpu_queue_count(self->fd, "tpu-q1", "polled") - polled,
		       tpu_queue_count(self->fd, "tpu-q1", "irqs") - irqs);
}

/* The same without JOB_INFO records, one SQE per submit for a while. */
TEST_F(uring, jobs_without_records)
{
	EXPECT_EQ(0, run_add_jobs(self->fd, &self->ring, 256, 1,
				  DRM_TPU_SUBMIT_NO_RECORD));
	EXPECT_EQ(0, run_add_jobs(self->fd, &self->ring, 2048, 128,
				  DRM_TPU_SUBMIT_NO_RECORD));
}

/*
 * Copy in, job, copy back: 32 chains in one submission, each ordered only
 * by syncobjs, none waited for in userspace until the CQEs.
 */
TEST_F(uring, copy_job_copy_chains)
{
	enum { CHAINS = 32 };
	uint32_t bo_in[CHAINS], bo_out[CHAINS], sync[CHAINS][2];
	static float host_in[CHAINS][VEC], host_out[CHAINS][VEC];
	struct tpu_add_job jobs[CHAINS];
	uint32_t handles[CHAINS][2];
	struct cqe_log log;
	int c, i;

	log_init(&log, 3 * CHAINS);
	for (c = 0; c < CHAINS; c++) {
		ASSERT_EQ(0, bo_create(self->fd, VEC_BYTES, &bo_in[c]));
		ASSERT_EQ(0, bo_create(self->fd, VEC_BYTES, &bo_out[c]));
		ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &sync[c][0]));
		ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &sync[c][1]));
		for (i = 0; i < VEC; i++) {
			host_in[c][i] = (float)(c * 100 + i);
			host_out[c][i] = -1.0f;
		}
		handles[c][TPU_BLOB_IN_SLOT] = bo_in[c];
		handles[c][TPU_BLOB_OUT_SLOT] = bo_out[c];
		tpu_add_job_init(&jobs[c], VEC, 0, 1000.0f, 0);
	}
	for (c = 0; c < CHAINS; c++) {
		struct drm_tpu_copy in = {
			.op = DRM_TPU_COPY_TO_BO, .handle = bo_in[c],
			.user_ptr = (uintptr_t)host_in[c], .length = VEC_BYTES,
			.out_syncobj = sync[c][0],
		};
		struct drm_tpu_submit s = {
			.desc_ptr = (uintptr_t)&jobs[c],
			.desc_size = sizeof(jobs[c]),
			.handles_ptr = (uintptr_t)handles[c], .handle_count = 2,
			.in_syncobjs_ptr = (uintptr_t)&sync[c][0],
			.in_syncobj_count = 1, .out_syncobj = sync[c][1],
		};
		struct drm_tpu_copy back = {
			.op = DRM_TPU_COPY_FROM_BO, .handle = bo_out[c],
			.user_ptr = (uintptr_t)host_out[c], .length = VEC_BYTES,
			.in_syncobj = sync[c][1],
		};

		ASSERT_NE(NULL, prep_copy(&self->ring, self->fd, &in, 3 * c));
		ASSERT_NE(NULL, prep_submit(&self->ring, self->fd, &s, 3 * c + 1));
		ASSERT_NE(NULL, prep_copy(&self->ring, self->fd, &back, 3 * c + 2));
	}
	ASSERT_EQ(0, submit_all(&self->ring));
	ASSERT_EQ(0, reap(&self->ring, &log, 3 * CHAINS));
	EXPECT_EQ(0, log.dup);
	for (c = 0; c < 3 * CHAINS; c++) {
		EXPECT_EQ(0, log.res[c]) TH_LOG("SQE %d", c);
	}
	for (c = 0; c < CHAINS; c++) {
		for (i = 0; i < VEC; i++) {
			ASSERT_EQ(host_in[c][i] + 1000.0f, host_out[c][i])
				TH_LOG("chain %d element %d", c, i);
		}
	}
	log_free(&log);
}

/*
 * One file's jobs run in submission order without syncobjs: job i reads
 * buffer i % 2 and writes buffer (i + 1) % 2 plus one, so the final value
 * counts the jobs only if none overtook another. A copy back waiting on
 * the last job's syncobj then sees it.
 */
TEST_F(uring, ordering)
{
	enum { JOBS = 200 };
	struct tpu_add_job job;
	uint32_t bo[2], sync, ping[2], pong[2];
	float zero[VEC] = { 0 }, result[VEC];
	struct cqe_log log;
	int i;

	ASSERT_EQ(0, bo_create(self->fd, VEC_BYTES, &bo[0]));
	ASSERT_EQ(0, bo_create(self->fd, VEC_BYTES, &bo[1]));
	ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &sync));
	ASSERT_EQ(0, copy_sync(self->fd, DRM_TPU_COPY_TO_BO, bo[0], 0, zero,
			       VEC_BYTES));
	ping[TPU_BLOB_IN_SLOT] = bo[0];
	ping[TPU_BLOB_OUT_SLOT] = bo[1];
	pong[TPU_BLOB_IN_SLOT] = bo[1];
	pong[TPU_BLOB_OUT_SLOT] = bo[0];
	tpu_add_job_init(&job, VEC, 0, 1.0f, 0);
	log_init(&log, JOBS + 1);
	for (i = 0; i < JOBS; i++) {
		struct drm_tpu_submit s = {
			.desc_ptr = (uintptr_t)&job, .desc_size = sizeof(job),
			.handles_ptr = (uintptr_t)(i % 2 ? pong : ping),
			.handle_count = 2,
			.out_syncobj = i == JOBS - 1 ? sync : 0,
		};

		if (io_uring_sq_space_left(&self->ring) == 0)
			ASSERT_EQ(0, submit_all(&self->ring));
		ASSERT_NE(NULL, prep_submit(&self->ring, self->fd, &s, i));
	}
	struct drm_tpu_copy back = {
		.op = DRM_TPU_COPY_FROM_BO, .handle = bo[JOBS % 2],
		.user_ptr = (uintptr_t)result, .length = VEC_BYTES,
		.in_syncobj = sync,
	};
	ASSERT_NE(NULL, prep_copy(&self->ring, self->fd, &back, JOBS));
	ASSERT_EQ(0, submit_all(&self->ring));
	ASSERT_EQ(0, reap(&self->ring, &log, JOBS + 1));
	for (i = 0; i <= JOBS; i++) {
		ASSERT_EQ(0, log.res[i]) TH_LOG("SQE %d", i);
	}
	for (i = 0; i < VEC; i++)
		ASSERT_EQ((float)JOBS, result[i]);
	log_free(&log);
}

/* Refused commands complete once, with the ioctl's error. */
TEST_F(uring, bad_commands)
{
	struct tpu_add_job job, oob;
	uint32_t in = 0, out = 0, handles[2], bad_handles[2], sync = 0;
	uint8_t payload[DRM_TPU_URING_CMD_PAYLOAD];
	float buf[VEC];
	struct cqe_log log;
	int i;

	ASSERT_EQ(0, bo_create(self->fd, VEC_BYTES, &in));
	ASSERT_EQ(0, bo_create(self->fd, VEC_BYTES, &out));
	ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &sync));
	handles[0] = in;
	handles[1] = out;
	bad_handles[0] = in;
	bad_handles[1] = 0xdead;
	tpu_add_job_init(&job, VEC, 0, 1.0f, 0);
	tpu_add_job_init(&oob, VEC, 0, 1.0f, 5);	/* fails on the device */

	struct drm_tpu_submit good = {
		.desc_ptr = (uintptr_t)&job, .desc_size = sizeof(job),
		.handles_ptr = (uintptr_t)handles, .handle_count = 2,
	};
	struct drm_tpu_submit s;
	struct drm_tpu_copy c = {
		.op = DRM_TPU_COPY_TO_BO, .handle = in,
		.user_ptr = (uintptr_t)buf, .length = VEC_BYTES,
	};
	struct drm_tpu_copy cc;
	static const int32_t want[] = {
		-EINVAL, -EINVAL, -EINVAL, -EINVAL, -ENOENT, -EFAULT, -EINVAL,
		-EINVAL, -EINVAL, -EIO, -ECANCELED, 0,
	};

	log_init(&log, 16);
	/* 0: unknown op; 1: op 0 */
	ASSERT_NE(NULL, prep_cmd(&self->ring, self->fd, 0x77, &good,
				 sizeof(good), 0));
	ASSERT_NE(NULL, prep_cmd(&self->ring, self->fd, 0, &good,
				 sizeof(good), 1));
	/* 2: a non-zero byte after the struct */
	memset(payload, 0, sizeof(payload));
	memcpy(payload, &good, sizeof(good));
	payload[sizeof(payload) - 1] = 1;
	ASSERT_NE(NULL, prep_cmd(&self->ring, self->fd,
				 DRM_TPU_URING_CMD_SUBMIT, payload,
				 sizeof(payload), 2));
	/* 3: unknown submit flag */
	s = good;
	s.flags = 0x80;
	ASSERT_NE(NULL, prep_submit(&self->ring, self->fd, &s, 3));
	/* 4: unknown buffer handle */
	s = good;
	s.handles_ptr = (uintptr_t)bad_handles;
	ASSERT_NE(NULL, prep_submit(&self->ring, self->fd, &s, 4));
	/* 5: descriptor at a bad address */
	s = good;
	s.desc_ptr = 8;
	ASSERT_NE(NULL, prep_submit(&self->ring, self->fd, &s, 5));
	/* 6: copy with WAIT; 7: copy with a zero length; 8: bad copy op */
	cc = c;
	cc.flags = DRM_TPU_COPY_WAIT;
	ASSERT_NE(NULL, prep_copy(&self->ring, self->fd, &cc, 6));
	cc = c;
	cc.length = 0;
	ASSERT_NE(NULL, prep_copy(&self->ring, self->fd, &cc, 7));
	cc = c;
	cc.op = 9;
	ASSERT_NE(NULL, prep_copy(&self->ring, self->fd, &cc, 8));
	/*
	 * 9: a job that fails on the device; 10: a copy that depends on it.
	 * (A job on the same queue would only wait for it to be scheduled,
	 * as drm_sched does within one scheduler, and could not see it fail.)
	 */
	s = good;
	s.desc_ptr = (uintptr_t)&oob;
	s.out_syncobj = sync;
	ASSERT_NE(NULL, prep_submit(&self->ring, self->fd, &s, 9));
	cc = c;
	cc.op = DRM_TPU_COPY_FROM_BO;
	cc.handle = out;
	cc.in_syncobj = sync;
	ASSERT_NE(NULL, prep_copy(&self->ring, self->fd, &cc, 10));
	/* 11: and a good one still works */
	ASSERT_NE(NULL, prep_submit(&self->ring, self->fd, &good, 11));

	ASSERT_EQ(0, submit_all(&self->ring));
	ASSERT_EQ(0, reap(&self->ring, &log, 12));
	EXPECT_EQ(0, log.dup);
	for (i = 0; i < 12; i++) {
		EXPECT_EQ(want[i], log.res[i]) TH_LOG("SQE %d", i);
	}
	EXPECT_EQ(0, log.extra[0]);
	EXPECT_NE(0, log.extra[9]);
	EXPECT_NE(0, log.extra[11]);
	EXPECT_TRUE(ring_quiet(&self->ring, 50));

	/* The failed job's record says why. */
	struct tpu_job_report report;
	struct drm_tpu_job_info info = {
		.job_id = log.extra[9], .report_ptr = (uintptr_t)&report,
		.report_size = sizeof(report),
		.flags = DRM_TPU_JOB_INFO_RELEASE,
	};
	ASSERT_EQ(0, drmIoctl(self->fd, DRM_IOCTL_TPU_JOB_INFO, &info));
	EXPECT_EQ(-EIO, info.status);
	EXPECT_EQ(TPU_JOB_ERR_BLOCK_OOB, report.error.code);
	log_free(&log);
}

/* A ring with 64-byte SQEs has no room for the payload: -EINVAL. */
TEST_F(uring, ring_without_sqe128)
{
	struct io_uring small;
	struct tpu_add_job job;
	uint32_t handles[2] = { 1, 2 };
	struct io_uring_cqe *cqe;
	struct drm_tpu_submit s = {
		.desc_ptr = (uintptr_t)&job, .desc_size = sizeof(job),
		.handles_ptr = (uintptr_t)handles, .handle_count = 2,
	};

	tpu_add_job_init(&job, VEC, 0, 1.0f, 0);
	ASSERT_EQ(0, ring_init(&small, 8, variant->ring_flags));
	ASSERT_NE(NULL, prep_submit(&small, self->fd, &s, 42));
	ASSERT_EQ(1, io_uring_submit(&small));
	ASSERT_EQ(0, next_cqe(&small, &cqe, 5000));
	EXPECT_EQ(42, cqe->user_data);
	EXPECT_EQ(-EINVAL, cqe->res);
	io_uring_cqe_seen(&small, cqe);
	io_uring_queue_exit(&small);
}

/* Queue @n jobs on a fresh ring (@ring_flags) and device file, then leave. */
static void submit_and_leave(int n, int how, unsigned int ring_flags)
{
	struct tpurt_device *dev;
	struct io_uring ring;
	static struct tpu_add_job job;
	uint32_t in = 0, out = 0, handles[2];
	int fd, i;

	if (tpurt_open(&dev) ||
	    ring_init(&ring, 256, IORING_SETUP_SQE128 | ring_flags))
		_exit(2);
	fd = tpurt_device_fd(dev);
	if (bo_create(fd, VEC_BYTES, &in) || bo_create(fd, 1 << 20, &out))
		_exit(3);
	handles[0] = in;
	handles[1] = out;
	tpu_add_job_init(&job, VEC, 0, 1.0f, 0);
	for (i = 0; i < n; i++) {
		struct drm_tpu_submit s = {
			.desc_ptr = (uintptr_t)&job, .desc_size = sizeof(job),
			.handles_ptr = (uintptr_t)handles, .handle_count = 2,
		};

		if (!prep_submit(&ring, fd, &s, i))
			_exit(4);
	}
	if (io_uring_submit(&ring) != n)
		_exit(5);
	switch (how) {
	case 0:		/* close the ring, then the device */
		io_uring_queue_exit(&ring);
		tpurt_close(dev);
		break;
	case 1:		/* close the device, then the ring */
		tpurt_close(dev);
		io_uring_queue_exit(&ring);
		break;
	default:	/* just exit */
		break;
	}
	_exit(0);
}

static int wait_child(pid_t pid, int seconds)
{
	int status, i;

	for (i = 0; i < seconds * 100; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

/* Buffers of jobs freed asynchronously: wait (boundedly) until HBM is free. */
static int hbm_all_free(int fd)
{
	struct drm_tpu_get_param p = { .param = DRM_TPU_PARAM_HBM_SIZE };
	struct drm_gem_close gc = { 0 };
	int tries;

	if (drmIoctl(fd, DRM_IOCTL_TPU_GET_PARAM, &p))
		return 0;
	for (tries = 0; tries < 500; tries++) {
		/* All of HBM but what this fixture's file holds (none yet). */
		if (!bo_create(fd, p.value, &gc.handle)) {
			drmIoctl(fd, DRM_IOCTL_GEM_CLOSE, &gc);
			return 1;
		}
		usleep(10000);
	}
	return 0;
}

/* Closing or exiting with commands in flight: no hang, no leak, no oops. */
TEST_F(uring, close_in_flight)
{
	for (int how = 0; how < 3; how++) {
		pid_t pid = fork();

		ASSERT_LE(0, pid);
		if (pid == 0)
			submit_and_leave(200, how, variant->ring_flags);
		ASSERT_EQ(0, wait_child(pid, 20)) TH_LOG("variant %d", how);
	}
	ASSERT_TRUE(hbm_all_free(self->fd));
	/* The device still works. */
	EXPECT_EQ(0, run_add_jobs(self->fd, &self->ring, 64, 64, 0));
}

/* Two processes, each with its own file and ring, at the same time. */
TEST_F(uring, two_processes)
{
	pid_t pid[2];
	int i;

	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		ASSERT_LE(0, pid[i]);
		if (pid[i] == 0) {
			struct tpurt_device *dev;
			struct io_uring ring;
			int ret;

			if (tpurt_open(&dev) ||
			    ring_init(&ring, 64, IORING_SETUP_SQE128 |
				      IORING_SETUP_CQE32 | variant->ring_flags))
				_exit(100);
			ret = run_add_jobs(tpurt_device_fd(dev), &ring, 1000,
					   32, i ? DRM_TPU_SUBMIT_NO_RECORD : 0);
			_exit(ret ? 1 : 0);
		}
	}
	for (i = 0; i < 2; i++)
		EXPECT_EQ(0, wait_child(pid[i], 25)) TH_LOG("child %d", i);
}

/*
 * libtpurt's queue over each path: chains of write -> job -> read ordered
 * by syncobjs, enqueued in one batch, reaped in batches.
 */
static int queue_chains(struct tpurt_device *dev, enum tpurt_submit_path path,
			unsigned int queue_flags)
{
	enum { CHAINS = 40 };
	struct tpurt_buffer *in[CHAINS] = { 0 }, *out[CHAINS] = { 0 };
	static float host_in[CHAINS][VEC], host_out[CHAINS][VEC];
	uint32_t sync[CHAINS][2] = { { 0 } };
	struct tpurt_completion comp[16];
	int seen[3 * CHAINS] = { 0 };
	struct tpu_add_job job;
	struct tpurt_queue *q = NULL;
	int c, i, n, got = 0, ret = 0;

	if (tpurt_device_set_submit_path(dev, path) ||
	    tpurt_queue_create_flags(dev, 3 * CHAINS, queue_flags, &q) ||
	    tpurt_queue_path(q) != path)
		return __LINE__;
	tpu_add_job_init(&job, VEC, 0, 7.0f, 0);
	for (c = 0; c < CHAINS && !ret; c++) {
		struct tpurt_buffer *slots[2];
		struct tpurt_deps d0, d1, d2;

		if (tpurt_buffer_create(dev, VEC_BYTES, &in[c]) ||
		    tpurt_buffer_create(dev, VEC_BYTES, &out[c]) ||
		    tpurt_sync_create(dev, &sync[c][0]) ||
		    tpurt_sync_create(dev, &sync[c][1])) {
			ret = __LINE__;
			break;
		}
		for (i = 0; i < VEC; i++) {
			host_in[c][i] = (float)(c - i);
			host_out[c][i] = 0;
		}
		slots[TPU_BLOB_IN_SLOT] = in[c];
		slots[TPU_BLOB_OUT_SLOT] = out[c];
		d0 = (struct tpurt_deps){ .signal = sync[c][0] };
		d1 = (struct tpurt_deps){ .wait = &sync[c][0], .nwait = 1,
					  .signal = sync[c][1] };
		d2 = (struct tpurt_deps){ .wait = &sync[c][1], .nwait = 1 };
		if (tpurt_queue_write(q, in[c], 0, host_in[c], VEC_BYTES, &d0,
				      3 * c) ||
		    tpurt_queue_job(q, &job, sizeof(job), slots, 2, 0,
				    c % 2 ? TPURT_JOB_RECORD : 0, &d1, 3 * c + 1) ||
		    tpurt_queue_read(q, out[c], 0, host_out[c], VEC_BYTES, &d2,
				     3 * c + 2))
			ret = __LINE__;
	}
	if (!ret && tpurt_queue_submit(q) != 3 * CHAINS)
		ret = __LINE__;
	while (!ret && got < 3 * CHAINS) {
		n = tpurt_queue_reap(q, comp, 16, 5000);
		if (n <= 0) {
			ret = __LINE__;
			break;
		}
		for (i = 0; i < n; i++) {
			uint64_t u = comp[i].user_data;

			if (u >= 3 * CHAINS || seen[u]++ || comp[i].status ||
			    (u % 3 == 1 && (u / 3) % 2 && !comp[i].job_id)) {
				fprintf(stderr, "completion %llu: status %d job %llu\n",
					       (unsigned long long)u, comp[i].status,
					       (unsigned long long)comp[i].job_id);
				ret = __LINE__;
			}
		}
		got += n;
	}
	if (!ret && (tpurt_queue_pending(q) || tpurt_queue_reap(q, comp, 16, 0)))
		ret = __LINE__;
	for (c = 0; c < CHAINS && !ret; c++)
		for (i = 0; i < VEC; i++)
			if (host_out[c][i] != host_in[c][i] + 7.0f) {
				fprintf(stderr, "chain %d [%d]: %f, not %f\n", c, i,
					       host_out[c][i], host_in[c][i] + 7.0f);
				ret = __LINE__;
				break;
			}
	tpurt_queue_destroy(q);
	for (c = 0; c < CHAINS; c++) {
		tpurt_buffer_free(in[c]);
		tpurt_buffer_free(out[c]);
		tpurt_sync_destroy(dev, sync[c][0]);
		tpurt_sync_destroy(dev, sync[c][1]);
	}
	return ret;
}

FIXTURE(runtime) {
	struct tpurt_device *dev;
};

FIXTURE_SETUP(runtime)
{
	ASSERT_EQ(0, tpurt_open(&self->dev)) TH_LOG("%s", tpurt_last_error());
}

FIXTURE_TEARDOWN(runtime)
{
	tpurt_close(self->dev);
}

TEST_F(runtime, queue)
{
	/* io_uring is the default where the driver has it, as here. */
	EXPECT_EQ(TPURT_PATH_URING, tpurt_device_submit_path(self->dev));
	EXPECT_EQ(0, queue_chains(self->dev, TPURT_PATH_URING, 0));
	EXPECT_EQ(0, queue_chains(self->dev, TPURT_PATH_IOCTL, 0));
	/* A polled queue (TPURT_QUEUE_POLL); the ioctl path ignores the flag. */
	EXPECT_EQ(0, queue_chains(self->dev, TPURT_PATH_URING, TPURT_QUEUE_POLL));
	EXPECT_EQ(0, queue_chains(self->dev, TPURT_PATH_IOCTL, TPURT_QUEUE_POLL));
}

/*
 * A polled queue's reap keeps its timeout, which the kernel ignores on a
 * polled ring: a job queued behind a 2 s blocker is not reaped within
 * 100 ms and the reap returns 0 after about that long; once the blocker
 * ends the job completes. Unknown flags are refused.
 */
TEST_F(runtime, polled_queue_reap_times_out)
{
	struct tpurt_buffer *in = NULL, *out = NULL, *slots[2];
	int fd = tpurt_device_fd(self->dev);
	struct tpurt_completion comp[4];
	struct tpurt_queue *q = NULL;
	struct tpu_blocker blocker;
	struct tpu_add_job job;
	double t0;
	int n;

	EXPECT_EQ(-EINVAL, tpurt_queue_create_flags(self->dev, 8, 1u << 7, &q));
	EXPECT_EQ(NULL, q);
	ASSERT_EQ(0, tpurt_device_set_submit_path(self->dev, TPURT_PATH_URING));
	ASSERT_EQ(0, tpurt_queue_create_flags(self->dev, 8, TPURT_QUEUE_POLL, &q));
	ASSERT_EQ(0, tpurt_buffer_create(self->dev, VEC_BYTES, &in));
	ASSERT_EQ(0, tpurt_buffer_create(self->dev, VEC_BYTES, &out));
	slots[TPU_BLOB_IN_SLOT] = in;
	slots[TPU_BLOB_OUT_SLOT] = out;
	tpu_add_job_init(&job, VEC, 0, 1.0f, 0);
	ASSERT_EQ(0, tpu_blocker_start(fd, 2.0, &blocker));
	ASSERT_EQ(0, tpurt_queue_job(q, &job, sizeof(job), slots, 2, 0, 0,
				     NULL, 7));
	t0 = tpu_now();
	n = tpurt_queue_reap(q, comp, 4, 100);
	if (!n) {
		EXPECT_LE(0.1, tpu_now() - t0);
		n = tpurt_queue_reap(q, comp, 4, -1);
	} else {
		/* its length is calibrated from a short run, which noise skews */
		TH_LOG("the blocker ended within the reap's 100 ms: the timeout went untested");
	}
	EXPECT_EQ(1, n);
	EXPECT_EQ(7, comp[0].user_data);
	EXPECT_EQ(0, comp[0].status);
	EXPECT_EQ(0, tpu_blocker_finish(&blocker));
	tpurt_queue_destroy(q);
	tpurt_buffer_free(in);
	tpurt_buffer_free(out);
}

TPU_HARNESS_MAIN
