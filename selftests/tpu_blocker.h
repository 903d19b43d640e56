/* SPDX-License-Identifier: MIT */
/*
 * Work that stays queued: a blocker, a long grid job at the head of the
 * compute queue, keeps every job submitted after it (from any file) in
 * flight until it ends, and copies that wait for its syncobj stay queued
 * on the DMA queue as long. The device runs as fast as the host, so the
 * blocker's length is measured first (a short run of the same job) and
 * scaled to the seconds asked for. Also raw ioctl helpers, and a job
 * padded to any descriptor size, for the per-file limits of tpu_drm.h.
 */
#ifndef TPU_BLOCKER_H
#define TPU_BLOCKER_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <xf86drm.h>

#include "tpu_drm.h"
#include "tpu_job_blob.h"

/* Elements per step of the blocker: 64 KiB of f32, a few µs of work. */
#define TPU_BLOCKER_VEC		16384
#define TPU_BLOCKER_VEC_BYTES	(TPU_BLOCKER_VEC * sizeof(float))

static inline double tpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * ioctl() retried on EINTR only, 0 or -errno: libdrm's drmIoctl() also
 * retries EAGAIN, the per-file limits' answer, and would spin there until
 * work completes.
 */
static inline int tpu_ioctl(int fd, unsigned long request, void *arg)
{
	int ret;

	do
		ret = ioctl(fd, request, arg);
	while (ret == -1 && errno == EINTR);
	return ret ? -errno : 0;
}

static inline int tpu_bo_create(int fd, uint64_t size, uint32_t *handle)
{
	struct drm_tpu_bo_create c = { .size = size };
	int ret = tpu_ioctl(fd, DRM_IOCTL_TPU_BO_CREATE, &c);

	if (ret)
		return ret;
	*handle = c.handle;
	return 0;
}

static inline int tpu_bo_close(int fd, uint32_t handle)
{
	struct drm_gem_close c = { .handle = handle };

	return tpu_ioctl(fd, DRM_IOCTL_GEM_CLOSE, &c);
}

/* A copy between user memory and a buffer, waited for. */
static inline int tpu_copy_wait(int fd, uint32_t op, uint32_t handle,
				uint64_t offset, void *ptr, uint64_t len)
{
	struct drm_tpu_copy c = {
		.op = op, .flags = DRM_TPU_COPY_WAIT, .handle = handle,
		.offset = offset, .user_ptr = (uintptr_t)ptr, .length = len,
	};

	return tpu_ioctl(fd, DRM_IOCTL_TPU_COPY, &c);
}

/*
 * SUBMIT a descriptor on slots @handles, after syncobj @in_sync if not 0;
 * its id in @id.
 */
static inline int tpu_submit(int fd, const void *desc, uint32_t size,
			     const uint32_t *handles, uint32_t nh,
			     uint32_t in_sync, uint32_t out_sync,
			     uint32_t timeout_ms, uint64_t *id)
{
	struct drm_tpu_submit s = {
		.desc_ptr = (uintptr_t)desc, .desc_size = size,
		.handles_ptr = (uintptr_t)handles, .handle_count = nh,
		.in_syncobjs_ptr = (uintptr_t)&in_sync,
		.in_syncobj_count = in_sync ? 1 : 0,
		.out_syncobj = out_sync, .timeout_ms = timeout_ms,
	};
	int ret = tpu_ioctl(fd, DRM_IOCTL_TPU_SUBMIT, &s);

	if (ret)
		return ret;
	if (id)
		*id = s.job_id;
	return 0;
}

/* A job's status: with @wait, once done, and then its record released. */
static inline int tpu_job_status(int fd, uint64_t id, int wait)
{
	struct drm_tpu_job_info ji = {
		.job_id = id,
		.flags = wait ? DRM_TPU_JOB_INFO_WAIT | DRM_TPU_JOB_INFO_RELEASE : 0,
	};
	int ret = tpu_ioctl(fd, DRM_IOCTL_TPU_JOB_INFO, &ji);

	return ret ? ret : ji.status;
}

/*
 * @j padded to @size bytes at @desc: the code array moves to the end, the
 * bytes between the arrays are unused (zero).
 */
static inline void tpu_add_job_pad(void *desc, uint32_t size,
				   const struct tpu_add_job *j)
{
	struct tpu_job_header *h = desc;
	uint32_t code = (size - sizeof(j->code)) & ~7u;

	memset(desc, 0, size);
	memcpy(desc, j, offsetof(struct tpu_add_job, code));
	memcpy((char *)desc + code, j->code, sizeof(j->code));
	h->code_offset = code;
	h->total_size = size;
}

struct tpu_blocker {
	int fd;
	uint32_t handles[2];	/* in, out: TPU_BLOCKER_VEC elements each */
	uint32_t sync;		/* signalled when it ends */
	uint64_t id;
	uint32_t steps;
	double seconds;		/* how long it should run */
	double started;
};

/* The blocker's job: @steps grid steps of out = in + 1, in order. */
static inline void tpu_blocker_job(struct tpu_add_job *j, uint32_t steps)
{
	tpu_add_job_init(j, TPU_BLOCKER_VEC, 0, 1.0f, 0);
	j->h.grid[0] = steps;
	j->h.dim_semantics[0] = TPU_DIM_ARBITRARY;
}

/* Run @steps steps now; the seconds it took, or < 0. */
static inline double tpu_blocker_time(struct tpu_blocker *b, uint32_t steps)
{
	struct tpu_add_job j;
	double start = tpu_now();
	uint64_t id;

	tpu_blocker_job(&j, steps);
	if (tpu_submit(b->fd, &j, sizeof(j), b->handles, 2, 0, 0, 0, &id) ||
	    tpu_job_status(b->fd, id, 1))
		return -1;
	return tpu_now() - start;
}

/*
 * How long a blocker runs: @seconds, or TPU_BLOCK_SECONDS from the
 * environment (a slower kernel, e.g. make check-debug's KASAN guest, takes
 * longer to fill a queue behind it).
 */
static inline double tpu_blocker_seconds(double seconds)
{
	const char *v = getenv("TPU_BLOCK_SECONDS");
	double s = v ? strtod(v, NULL) : 0;

	return s > 0 ? s : seconds;
}

/*
 * Submit a blocker on @fd that runs about @seconds (see
 * tpu_blocker_seconds()), with a limit far beyond that. 0 or a negative
 * errno.
 */
static inline int tpu_blocker_start(int fd, double seconds,
				    struct tpu_blocker *b)
{
	uint32_t steps = 1024, limit_ms;
	struct tpu_add_job j;
	double t = 0, want;
	int ret;

	memset(b, 0, sizeof(*b));
	b->fd = fd;
	if ((ret = tpu_bo_create(fd, TPU_BLOCKER_VEC_BYTES, &b->handles[0])) ||
	    (ret = tpu_bo_create(fd, TPU_BLOCKER_VEC_BYTES, &b->handles[1])) ||
	    (ret = drmSyncobjCreate(fd, 0, &b->sync) ? -errno : 0))
		return ret;
	seconds = tpu_blocker_seconds(seconds);
	/*
	 * Calibrate on a run of 0.05 s or more: a short run gives the rate,
	 * one run sized from it confirms it.
	 */
	while ((t = tpu_blocker_time(b, steps)) >= 0 && t < 0.05 && steps < (1u << 28)) {
		want = t > 0.005 ? 0.1 * steps / t : 16.0 * steps;
		steps = want > (1u << 28) ? (1u << 28) : (uint32_t)want;
	}
	if (t <= 0)
		return -EIO;
	want = seconds * steps / t;
	b->steps = want > (1u << 30) ? (1u << 30) : (uint32_t)want;
	b->seconds = seconds;
	limit_ms = (uint32_t)(seconds * 10000) + 10000;
	if (limit_ms > 120000)
		limit_ms = 120000;
	tpu_blocker_job(&j, b->steps);
	b->started = tpu_now();
	return tpu_submit(fd, &j, sizeof(j), b->handles, 2, 0, b->sync,
			  limit_ms, &b->id);
}

/* @to_fd's handle for syncobj @sync of @from_fd: files have their own. */
static inline int tpu_sync_import(int from_fd, uint32_t sync, int to_fd,
				  uint32_t *handle)
{
	int sfd, ret;

	if (drmSyncobjHandleToFD(from_fd, sync, &sfd))
		return -errno;
	ret = drmSyncobjFDToHandle(to_fd, sfd, handle) ? -errno : 0;
	close(sfd);
	return ret;
}

/* Still running (or waiting to): what queued behind it is still queued. */
static inline int tpu_blocker_busy(struct tpu_blocker *b)
{
	return tpu_job_status(b->fd, b->id, 0) == -EINPROGRESS;
}

/* Wait for the end of the blocker; its status, and its buffers freed. */
static inline int tpu_blocker_finish(struct tpu_blocker *b)
{
	int ret = tpu_job_status(b->fd, b->id, 1);

	tpu_bo_close(b->fd, b->handles[0]);
	tpu_bo_close(b->fd, b->handles[1]);
	drmSyncobjDestroy(b->fd, b->sync);
	return ret;
}

#endif /* TPU_BLOCKER_H */
