// SPDX-License-Identifier: MIT
/*
 * Per-file limits (uapi/tpu_drm.h, DRM_TPU_MAX_QUEUED_*), each at its exact
 * boundary: behind a blocker (another file's long job) a file queues jobs,
 * copies or descriptor bytes up to its limit, the next one fails with
 * -EAGAIN, a second file still queues, and once the blocker ends
 * everything drains, every result is right and new work goes through.
 * Then a killed process: a child with buffers, jobs, copies and io_uring
 * commands queued behind the blocker is SIGKILLed, and everything it held
 * is freed (the driver's debugfs "usage"), with no kernel complaint.
 */
#include <errno.h>
#include <liburing.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xf86drm.h>

#include "tpu_drm.h"
#include "tpu_hw.h"
#include "tpu_job.h"
#include "tpurt.h"
#include "tpu_blocker.h"
#include "tpu_kernel_health.h"
#include "kselftest_harness.h"
#include "tpu_require_device.h"

#define VEC		16			/* f32 elements per small job */
#define VEC_BYTES	(VEC * sizeof(float))
/*
 * How long the blocker runs (TPU_BLOCK_SECONDS sets it): filling a queue
 * takes well under that, 0.02-0.25 s in make check's idle guest.
 */
#define BLOCK_SECONDS	2.0
/* How long freeing may lag behind a job's end (the scheduler's worker). */
#define DRAIN_SECONDS	10.0
/*
 * A descriptor whose 2-slot buffer table fills its memory to exactly
 * 1 MiB: what the driver charges against DRM_TPU_MAX_QUEUED_DESC_BYTES.
 */
#define BIG_DESC	(TPU_JOB_MAX_SIZE - 2 * sizeof(struct tpu_hw_slot))
#define BIG_COST	TPU_JOB_MAX_SIZE

FIXTURE(limits) {
	struct tpurt_device *dev, *blocker_dev, *other_dev;
	int fd, bfd, ofd;
	uint32_t in, out;		/* of @fd: job i writes block i of out */
	float src[VEC];
	struct tpu_blocker blocker;
	uint32_t after, oafter;		/* the blocker's syncobj in fd, ofd */
};

FIXTURE_SETUP(limits)
{
	ASSERT_EQ(0, tpurt_open(&self->dev)) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_open(&self->blocker_dev));
	ASSERT_EQ(0, tpurt_open(&self->other_dev));
	self->fd = tpurt_device_fd(self->dev);
	self->bfd = tpurt_device_fd(self->blocker_dev);
	self->ofd = tpurt_device_fd(self->other_dev);
	ASSERT_EQ(0, tpu_bo_create(self->fd, VEC_BYTES, &self->in));
	ASSERT_EQ(0, tpu_bo_create(self->fd, (uint64_t)DRM_TPU_MAX_QUEUED_JOBS *
				   VEC_BYTES, &self->out));
	for (int i = 0; i < VEC; i++)
		self->src[i] = (float)i * 0.25f;
	ASSERT_EQ(0, tpu_copy_wait(self->fd, DRM_TPU_COPY_TO_BO, self->in, 0,
				   self->src, VEC_BYTES));
}

FIXTURE_TEARDOWN(limits)
{
	tpurt_close(self->other_dev);
	tpurt_close(self->blocker_dev);
	tpurt_close(self->dev);
}

/*
 * Start the blocker in its own file; @self->after and @self->oafter are
 * its syncobj in the test's two files. Work queued after it stays queued
 * whatever order the scheduler picks files in.
 */
static int block(FIXTURE_DATA(limits) *self)
{
	return tpu_blocker_start(self->bfd, BLOCK_SECONDS, &self->blocker) ?:
	       tpu_sync_import(self->bfd, self->blocker.sync, self->fd, &self->after) ?:
	       tpu_sync_import(self->bfd, self->blocker.sync, self->ofd, &self->oafter);
}

/* Job @i of @fd after @in_sync: out block @i = in + @i; no record kept. */
static int submit_add(int fd, uint32_t in, uint32_t out, unsigned int i,
		      uint32_t in_sync, uint32_t out_sync)
{
	struct tpu_add_job j;
	uint32_t h[2];
	struct drm_tpu_submit s = {
		.desc_ptr = (uintptr_t)&j, .desc_size = sizeof(j),
		.flags = DRM_TPU_SUBMIT_NO_RECORD,
		.handles_ptr = (uintptr_t)h, .handle_count = 2,
		.in_syncobjs_ptr = (uintptr_t)&in_sync,
		.in_syncobj_count = in_sync ? 1 : 0,
		.out_syncobj = out_sync,
	};

	h[TPU_BLOB_IN_SLOT] = in;
	h[TPU_BLOB_OUT_SLOT] = out;
	tpu_add_job_init(&j, VEC, (uint64_t)i * VEC_BYTES, (float)i, 0);
	return tpu_ioctl(fd, DRM_IOCTL_TPU_SUBMIT, &s);
}

/* Job 0 padded to @size bytes at @desc, after @in_sync; its id in @id. */
static int submit_padded(int fd, uint32_t in, uint32_t out, void *desc,
			 uint32_t size, uint32_t in_sync, uint64_t *id)
{
	struct tpu_add_job j;
	uint32_t h[2] = { in, out };

	tpu_add_job_init(&j, VEC, 0, 0.0f, 0);
	tpu_add_job_pad(desc, size, &j);
	return tpu_submit(fd, desc, size, h, 2, in_sync, 0, 0, id);
}

/*
 * A job on new buffers of @fd after @in_sync: padded to @size bytes at
 * @desc, or small.
 */
static int other_file_submits(int fd, void *desc, uint32_t size,
			      uint32_t in_sync)
{
	uint32_t in, out;
	int ret;

	if ((ret = tpu_bo_create(fd, VEC_BYTES, &in)) ||
	    (ret = tpu_bo_create(fd, VEC_BYTES, &out)))
		return ret;
	return desc ? submit_padded(fd, in, out, desc, size, in_sync, NULL) :
		      submit_add(fd, in, out, 0, in_sync, 0);
}

/* Retry @expr while it fails with -EAGAIN: freeing lags a job's end. */
#define UNTIL_ACCEPTED(ret, expr) do {					\
	double __end = tpu_now() + DRAIN_SECONDS;			\
	while (((ret) = (expr)) == -EAGAIN && tpu_now() < __end)	\
		usleep(10000);						\
} while (0)

/* Blocks 0..@n-1 of @out hold in + i. */
static int adds_are_right(int fd, uint32_t out, const float *src, unsigned int n)
{
	float *got = malloc((size_t)n * VEC_BYTES);
	int bad = 0;

	if (!got || tpu_copy_wait(fd, DRM_TPU_COPY_FROM_BO, out, 0, got,
				  (uint64_t)n * VEC_BYTES)) {
		free(got);
		return -1;
	}
	for (unsigned int i = 0; i < n * VEC; i++)
		bad += got[i] != src[i % VEC] + (float)(i / VEC);
	free(got);
	return bad;
}

/* Otherwise the work was not all in flight at once: the test proved nothing. */
#define ASSERT_STILL_BLOCKED(self)					\
	ASSERT_TRUE(tpu_blocker_busy(&(self)->blocker))			\
		TH_LOG("the blocker ended after %.2f s, before the checks " \
		       "(TPU_BLOCK_SECONDS=N runs it longer)",		\
		       tpu_now() - (self)->blocker.started)

/*
 * DRM_TPU_MAX_QUEUED_JOBS jobs queue; the next fails with -EAGAIN, another
 * file's does not; after the blocker all of them ran, and more go through.
 */
TEST_F_TIMEOUT(limits, queued_jobs, 120)
{
	const unsigned int n = DRM_TPU_MAX_QUEUED_JOBS;
	uint32_t last;
	int ret = 0;
	unsigned int i;

	ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &last));
	ASSERT_EQ(0, block(self));
	for (i = 0; i < n; i++) {
		ret = submit_add(self->fd, self->in, self->out, i, self->after,
				 i == n - 1 ? last : 0);
		if (ret)
			break;
	}
	EXPECT_EQ(0, ret) TH_LOG("job %u of %u refused", i, n);
	EXPECT_EQ(n, i);
	EXPECT_EQ(-EAGAIN, submit_add(self->fd, self->in, self->out, 0, self->after, 0));
	EXPECT_EQ(-EAGAIN, submit_add(self->fd, self->in, self->out, 0, 0, 0));
	/* The limit is the file's: another file queues behind the same job. */
	EXPECT_EQ(0, other_file_submits(self->ofd, NULL, 0, self->oafter));
	ASSERT_STILL_BLOCKED(self);
	EXPECT_EQ(0, tpu_blocker_finish(&self->blocker));

	ASSERT_EQ(0, drmSyncobjWait(self->fd, &last, 1, INT64_MAX, 0, NULL));
	EXPECT_EQ(0, adds_are_right(self->fd, self->out, self->src, n));
	UNTIL_ACCEPTED(ret, submit_add(self->fd, self->in, self->out, 7, 0, 0));
	EXPECT_EQ(0, ret);
	drmSyncobjDestroy(self->fd, last);
}

/*
 * 1 MiB jobs reach DRM_TPU_MAX_QUEUED_DESC_BYTES long before the job
 * count: exactly that many bytes queue; then nothing more, not even a
 * small job, until the blocker ends. Another file still queues.
 */
TEST_F_TIMEOUT(limits, queued_descriptor_bytes, 120)
{
	const unsigned int fit = DRM_TPU_MAX_QUEUED_DESC_BYTES / BIG_COST;
	void *desc = malloc(BIG_DESC);
	uint64_t last_id = 0;
	unsigned int i;
	int ret = 0;

	ASSERT_NE(NULL, desc);
	ASSERT_LT(fit, DRM_TPU_MAX_QUEUED_JOBS);
	ASSERT_EQ(0, block(self));
	for (i = 0; i < fit; i++) {
		ret = submit_padded(self->fd, self->in, self->out, desc, BIG_DESC,
				    self->after, &last_id);
		if (ret)
			break;
	}
	EXPECT_EQ(0, ret) TH_LOG("job %u of %u refused", i, fit);
	EXPECT_EQ(fit, i);
	EXPECT_EQ(-EAGAIN, submit_padded(self->fd, self->in, self->out, desc,
					 BIG_DESC, self->after, NULL));
	/* The smallest descriptor is over the limit too. */
	EXPECT_EQ(-EAGAIN, submit_add(self->fd, self->in, self->out, 0, 0, 0));
	EXPECT_EQ(0, other_file_submits(self->ofd, desc, BIG_DESC, self->oafter));
	ASSERT_STILL_BLOCKED(self);
	EXPECT_EQ(0, tpu_blocker_finish(&self->blocker));

	/* The last of them ran, and the padded jobs computed out = in + 0. */
	EXPECT_EQ(0, tpu_job_status(self->fd, last_id, 1));
	EXPECT_EQ(0, adds_are_right(self->fd, self->out, self->src, 1));
	UNTIL_ACCEPTED(ret, submit_padded(self->fd, self->in, self->out, desc,
					  BIG_DESC, 0, NULL));
	EXPECT_EQ(0, ret);
	free(desc);
}

static int copy_after(int fd, uint32_t dst, uint64_t dst_off, uint32_t src,
		      uint64_t src_off, uint64_t len, uint32_t flags,
		      uint32_t in_sync, uint32_t out_sync)
{
	struct drm_tpu_copy c = {
		.op = DRM_TPU_COPY_BO_TO_BO, .flags = flags, .handle = dst,
		.src_handle = src, .offset = dst_off, .src_offset = src_off,
		.length = len, .in_syncobj = in_sync, .out_syncobj = out_sync,
	};

	return tpu_ioctl(fd, DRM_IOCTL_TPU_COPY, &c);
}

/*
 * DRM_TPU_MAX_QUEUED_COPIES copies waiting for the blocker queue; the next
 * fails with -EAGAIN (with DRM_TPU_COPY_WAIT too, at once); another file's
 * copy is accepted; afterwards every copy has run.
 */
TEST_F_TIMEOUT(limits, queued_copies, 120)
{
	const unsigned int n = DRM_TPU_MAX_QUEUED_COPIES;
	uint8_t *pat = malloc(n * 64), *got = malloc(n * 64);
	uint32_t src, dst, sync, osync, last, oin, oout;
	unsigned int i;
	int ret = 0;

	ASSERT_NE(NULL, pat);
	ASSERT_NE(NULL, got);
	for (i = 0; i < n * 64; i++)
		pat[i] = (uint8_t)(i * 7 + i / 64);
	ASSERT_EQ(0, tpu_bo_create(self->fd, n * 64, &src));
	ASSERT_EQ(0, tpu_bo_create(self->fd, n * 64, &dst));
	ASSERT_EQ(0, tpu_copy_wait(self->fd, DRM_TPU_COPY_TO_BO, src, 0, pat, n * 64));
	ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &last));
	ASSERT_EQ(0, tpu_bo_create(self->ofd, 64, &oin));
	ASSERT_EQ(0, tpu_bo_create(self->ofd, 64, &oout));

	ASSERT_EQ(0, block(self));
	sync = self->after;
	osync = self->oafter;
	/* Copy i moves bytes [64 i, 64 i + 64) once the blocker is done. */
	for (i = 0; i < n; i++) {
		ret = copy_after(self->fd, dst, i * 64, src, i * 64, 64, 0, sync,
				 i == n - 1 ? last : 0);
		if (ret)
			break;
	}
	EXPECT_EQ(0, ret) TH_LOG("copy %u of %u refused", i, n);
	EXPECT_EQ(n, i);
	EXPECT_EQ(-EAGAIN, copy_after(self->fd, dst, 0, src, 0, 64, 0, sync, 0));
	EXPECT_EQ(-EAGAIN, copy_after(self->fd, dst, 0, src, 0, 64, 0, 0, 0));
	EXPECT_EQ(-EAGAIN, copy_after(self->fd, dst, 0, src, 0, 64,
				      DRM_TPU_COPY_WAIT, 0, 0));
	EXPECT_EQ(0, copy_after(self->ofd, oout, 0, oin, 0, 64, 0, osync, 0));
	ASSERT_STILL_BLOCKED(self);
	EXPECT_EQ(0, tpu_blocker_finish(&self->blocker));

	ASSERT_EQ(0, drmSyncobjWait(self->fd, &last, 1, INT64_MAX, 0, NULL));
	ASSERT_EQ(0, tpu_copy_wait(self->fd, DRM_TPU_COPY_FROM_BO, dst, 0, got, n * 64));
	EXPECT_EQ(0, memcmp(pat, got, n * 64));
	UNTIL_ACCEPTED(ret, copy_after(self->fd, dst, 0, src, 0, 64,
				       DRM_TPU_COPY_WAIT, 0, 0));
	EXPECT_EQ(0, ret);
	free(pat);
	free(got);
}

/* What the killed child queues behind the blocker. */
#define CHILD_BUFFERS	8
#define CHILD_BUF_BYTES	(1u << 20)
#define CHILD_BIG_JOBS	16
#define CHILD_JOBS	300
#define CHILD_COPIES	200
#define CHILD_URING	32

/*
 * CHILD_URING submits of @job after @sync through a new ring, each SQE
 * filled by hand (liburing 2.3 has no uring_cmd helper).
 */
static int child_uring_submits(int fd, struct io_uring *ring, const void *job,
			       uint32_t size, const uint32_t *h, uint32_t sync)
{
	struct io_uring_params p = {
		.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQE32,
	};
	struct drm_tpu_submit s = {
		.desc_ptr = (uintptr_t)job, .desc_size = size,
		.flags = DRM_TPU_SUBMIT_NO_RECORD,
		.handles_ptr = (uintptr_t)h, .handle_count = 2,
		.in_syncobjs_ptr = (uintptr_t)&sync, .in_syncobj_count = 1,
	};

	if (io_uring_queue_init_params(CHILD_URING, ring, &p))
		return -1;
	for (int i = 0; i < CHILD_URING; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

		if (!sqe)
			return -1;
		memset(sqe, 0, 128);
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = fd;
		sqe->cmd_op = DRM_TPU_URING_CMD_SUBMIT;
		memcpy(sqe->cmd, &s, sizeof(s));
		sqe->user_data = i;
	}
	return io_uring_submit(ring) == CHILD_URING ? 0 : -1;
}

/*
 * The child: its own file, buffers, jobs (some with 1 MiB descriptors),
 * copies waiting for the blocker and io_uring commands, all in flight;
 * it says "ready" on @ready and waits to be killed. Exits 1 on a failure.
 */
static void child_queue_and_wait(int blocker_sync_fd, int ready)
{
	struct tpurt_device *dev;
	struct io_uring ring;
	uint32_t bo[CHILD_BUFFERS], sync, h[2];
	struct tpu_add_job j;
	void *big = malloc(BIG_DESC);
	int fd, i;

	if (!big || tpurt_open(&dev))
		_exit(1);
	fd = tpurt_device_fd(dev);
	for (i = 0; i < CHILD_BUFFERS; i++)
		if (tpu_bo_create(fd, CHILD_BUF_BYTES, &bo[i]))
			_exit(1);
	if (drmSyncobjFDToHandle(fd, blocker_sync_fd, &sync))
		_exit(1);
	h[0] = bo[0];
	h[1] = bo[1];
	tpu_add_job_init(&j, VEC, 0, 1.0f, 0);
	tpu_add_job_pad(big, BIG_DESC, &j);
	for (i = 0; i < CHILD_BIG_JOBS; i++)
		if (tpu_submit(fd, big, BIG_DESC, h, 2, sync, 0, 0, NULL))
			_exit(1);
	for (i = 0; i < CHILD_JOBS; i++)
		if (tpu_submit(fd, &j, sizeof(j), h, 2, sync, 0, 0, NULL))
			_exit(1);
	for (i = 0; i < CHILD_COPIES; i++)
		if (copy_after(fd, bo[2 + i % 4], 0, bo[6], 4096, 65536, 0, sync, 0))
			_exit(1);
	if (child_uring_submits(fd, &ring, &j, sizeof(j), h, sync))
		_exit(1);
	if (write(ready, "r", 1) != 1)
		_exit(1);
	for (;;)
		pause();
}

/*
 * A process killed with work in flight frees it all: buffers, jobs,
 * copies, io_uring commands, its file. No kernel complaint; the device
 * works afterwards.
 */
TEST_F_TIMEOUT(limits, sigkill_frees_everything, 120)
{
	unsigned long taint = tpu_taint();
	struct tpu_usage before, held, after;
	int kmsg = tpu_kmsg_mark(), ready[2], status, sfd, busy;
	char complaint[256], c;
	pid_t pid;

	/* Lines, not a buffer the harness's _exit() would drop. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (tpu_usage_read(self->fd, &before) == -ENOENT)
		SKIP(return, "no debugfs usage (debugfs not mounted?)");
	ASSERT_EQ(0, tpu_usage_quiet(self->fd, DRAIN_SECONDS, &before))
		TH_LOG("%d jobs of earlier tests still alive", before.jobs_alive);
	ASSERT_LE(0, kmsg);
	ASSERT_EQ(0, tpu_blocker_start(self->bfd, BLOCK_SECONDS, &self->blocker));
	ASSERT_EQ(0, drmSyncobjHandleToFD(self->bfd, self->blocker.sync, &sfd));
	ASSERT_EQ(0, pipe(ready));

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(ready[0]);
		child_queue_and_wait(sfd, ready[1]);
	}
	close(ready[1]);
	close(sfd);
	ASSERT_EQ(1, read(ready[0], &c, 1)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	close(ready[0]);

	/* The child holds what it queued: the checks below can fail. */
	ASSERT_EQ(0, tpu_usage_read(self->fd, &held));
	EXPECT_LE(before.hbm_bytes + CHILD_BUFFERS * CHILD_BUF_BYTES, held.hbm_bytes);
	EXPECT_LE(before.jobs_alive + CHILD_BIG_JOBS + CHILD_JOBS + CHILD_COPIES +
		  CHILD_URING, held.jobs_alive);
	EXPECT_EQ(before.clients + 1, held.clients);
	/* Each job has a report, kept as its record after it ends. */
	EXPECT_LE(before.reports + CHILD_BIG_JOBS + CHILD_JOBS + CHILD_URING,
		  held.reports);

	ksft_print_msg("the child held %lu HBM bytes in %lu buffers, %d jobs, %d reports (the test %lu, %lu, %d, %d)\n",
		       held.hbm_bytes - before.hbm_bytes, held.hbm_buffers - before.hbm_buffers,
		       held.jobs_alive - before.jobs_alive, held.reports - before.reports,
		       before.hbm_bytes, before.hbm_buffers, before.jobs_alive,
		       before.reports);
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	busy = tpu_blocker_busy(&self->blocker);
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		TH_LOG("the child did not die of SIGKILL: status %#x", status);
	EXPECT_TRUE(busy) TH_LOG("the blocker ended before the kill (%.2f s)",
				 tpu_now() - self->blocker.started);
	EXPECT_EQ(0, tpu_blocker_finish(&self->blocker));

	/* Everything freed: back to the usage before the test. */
	EXPECT_EQ(0, tpu_usage_settle(self->fd, &before, DRAIN_SECONDS, &after))
		TH_LOG("after: %lu HBM bytes in %lu buffers, %d jobs, %d files, %d reports; before: %lu, %lu, %d, %d, %d",
		       after.hbm_bytes, after.hbm_buffers, after.jobs_alive, after.clients,
		       after.reports, before.hbm_bytes, before.hbm_buffers,
		       before.jobs_alive, before.clients, before.reports);
	/* And the device works: block 0 of out (zero so far) = in + 0. */
	{
		uint32_t done;

		ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &done));
		EXPECT_EQ(0, submit_add(self->fd, self->in, self->out, 0, 0, done));
		EXPECT_EQ(0, drmSyncobjWait(self->fd, &done, 1, INT64_MAX, 0, NULL));
		EXPECT_EQ(0, adds_are_right(self->fd, self->out, self->src, 1));
		drmSyncobjDestroy(self->fd, done);
	}
	EXPECT_EQ(0, tpu_kmsg_complaints(kmsg, complaint, sizeof(complaint)))
		TH_LOG("kernel log: %s", complaint);
	EXPECT_EQ(0, tpu_taint() & ~taint & TPU_TAINT_COMPLAINTS);
}

TPU_HARNESS_MAIN
