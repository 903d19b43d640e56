// SPDX-License-Identifier: MIT
/*
 * Queues: copies and grid jobs enqueued in batches, ordered by syncobjs,
 * completed in batches. Over io_uring (DRM_TPU_URING_CMD_*, SQE128 and
 * CQE32 rings) or, where that is missing, over ioctls with one syncobj per
 * command exported as a sync_file to poll and to read the status from.
 * Both are the render node's: a queue exists only on a device whose
 * backend offers a submit path (the in-process device has none, and
 * tpurt_queue_create says so).
 */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/sync_file.h>
#include <xf86drm.h>

#include "tpu_drm.h"
#include "tpu_job.h"
#include "tpurt_private.h"

enum qcmd_kind { QCMD_COPY, QCMD_SUBMIT };

/* One command, from enqueue to reap; its id is its index. */
struct qcmd {
	enum qcmd_kind kind;
	uint64_t user_data;
	union {
		struct drm_tpu_copy copy;
		struct drm_tpu_submit submit;
	} args;
	uint32_t handles[TPU_JOB_MAX_SLOTS];
	uint32_t waits[TPURT_QUEUE_MAX_WAIT];
	void *desc;		/* the job's descriptor, copied */
	size_t desc_cap;
	/* ioctl path */
	uint32_t signal;	/* the caller's syncobj to signal */
	uint32_t own_sync;	/* this command's out syncobj */
	int sync_fd;		/* its fence as a sync_file, while in flight */
	int32_t status;		/* refused by the ioctl: its error */
};

struct tpurt_queue {
	struct tpurt_device *dev;
	enum tpurt_submit_path path;
	unsigned int entries;
	struct qcmd *cmds;
	unsigned int *free_ids, nfree;
	unsigned int *queued, nqueued;		/* enqueued, not submitted */
	unsigned int *inflight, ninflight;	/* ioctl path, in order */
	unsigned int *done, ndone;		/* ioctl path: refused */
	struct pollfd *pfds;
	struct io_uring ring;
	int have_ring;
};

/* --- paths --- */

/* The path queues of @dev take, probed once; a failure if it has none. */
static int device_path(struct tpurt_device *dev, enum tpurt_submit_path *path)
{
	if (dev->submit_path == TPURT_PATH_AUTO) {
		enum tpurt_submit_path probed;
		int ret = dev->ops->submit_path(dev, TPURT_PATH_AUTO, &probed);

		if (ret)
			return ret;
		dev->submit_path = probed;
	}
	*path = dev->submit_path;
	return 0;
}

enum tpurt_submit_path tpurt_device_submit_path(struct tpurt_device *dev)
{
	enum tpurt_submit_path path;

	return device_path(dev, &path) ? TPURT_PATH_AUTO : path;
}

int tpurt_device_set_submit_path(struct tpurt_device *dev,
				 enum tpurt_submit_path path)
{
	enum tpurt_submit_path got;
	int ret;

	switch (path) {
	case TPURT_PATH_AUTO:
		dev->submit_path = path;
		return 0;
	case TPURT_PATH_URING:
	case TPURT_PATH_IOCTL:
		ret = dev->ops->submit_path(dev, path, &got);
		if (ret)
			return ret;
		dev->submit_path = got;
		return 0;
	default:
		return tpurt_fail(-EINVAL, "unknown submit path %d", path);
	}
}

int tpurt_sync_create(struct tpurt_device *dev, uint32_t *syncp)
{
	return dev->ops->sync_create(dev, syncp);
}

void tpurt_sync_destroy(struct tpurt_device *dev, uint32_t sync)
{
	if (sync)
		dev->ops->sync_destroy(dev, sync);
}

/* --- queue life --- */

enum tpurt_submit_path tpurt_queue_path(const struct tpurt_queue *q)
{
	return q->path;
}

unsigned int tpurt_queue_pending(const struct tpurt_queue *q)
{
	return q->entries - q->nfree;
}

int tpurt_queue_create(struct tpurt_device *dev, unsigned int entries,
		       struct tpurt_queue **qp)
{
	return tpurt_queue_create_flags(dev, entries, 0, qp);
}

int tpurt_queue_create_flags(struct tpurt_device *dev, unsigned int entries,
			     unsigned int flags, struct tpurt_queue **qp)
{
	struct tpurt_queue *q;
	unsigned int i;
	int ret;

	*qp = NULL;
	if (!entries || entries > 4096)
		return tpurt_fail(-EINVAL, "queue of %u entries (1..4096)",
				  entries);
	if (flags & ~TPURT_QUEUE_POLL)
		return tpurt_fail(-EINVAL, "unknown queue flags %#x",
				  flags & ~TPURT_QUEUE_POLL);
	q = calloc(1, sizeof(*q));
	if (!q)
		return tpurt_fail(-ENOMEM, "out of memory");
	q->dev = dev;
	ret = device_path(dev, &q->path);
	if (ret) {
		free(q);
		return ret;
	}
	q->entries = entries;
	q->cmds = calloc(entries, sizeof(*q->cmds));
	q->free_ids = calloc(entries, sizeof(unsigned int));
	q->queued = calloc(entries, sizeof(unsigned int));
	q->inflight = calloc(entries, sizeof(unsigned int));
	q->done = calloc(entries, sizeof(unsigned int));
	q->pfds = calloc(entries, sizeof(*q->pfds));
	if (!q->cmds || !q->free_ids || !q->queued || !q->inflight ||
	    !q->done || !q->pfds) {
		ret = tpurt_fail(-ENOMEM, "out of memory");
		goto err;
	}
	for (i = 0; i < entries; i++) {
		q->free_ids[i] = entries - 1 - i;
		q->cmds[i].sync_fd = -1;
	}
	q->nfree = entries;

	if (q->path == TPURT_PATH_URING) {
		struct io_uring_params p = {
			.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQE32 |
				 (flags & TPURT_QUEUE_POLL ? IORING_SETUP_IOPOLL : 0),
		};

		ret = io_uring_queue_init_params(entries, &q->ring, &p);
		if (ret) {
			tpurt_fail(ret, "io_uring_queue_init: %s", strerror(-ret));
			goto err;
		}
		q->have_ring = 1;
	} else {
		for (i = 0; i < entries; i++) {
			ret = tpurt_sync_create(dev, &q->cmds[i].own_sync);
			if (ret)
				goto err;
		}
	}
	*qp = q;
	return 0;

err:
	tpurt_queue_destroy(q);
	return ret;
}

void tpurt_queue_destroy(struct tpurt_queue *q)
{
	struct tpurt_completion c[64];
	unsigned int i;

	if (!q)
		return;
	/* Everything enqueued or in flight completes before its memory goes. */
	while (q->cmds && tpurt_queue_pending(q))
		if (tpurt_queue_reap(q, c, 64, -1) < 0)
			break;
	if (q->have_ring)
		io_uring_queue_exit(&q->ring);
	for (i = 0; q->cmds && i < q->entries; i++) {
		tpurt_sync_destroy(q->dev, q->cmds[i].own_sync);
		if (q->cmds[i].sync_fd >= 0)
			close(q->cmds[i].sync_fd);
		free(q->cmds[i].desc);
	}
	free(q->cmds);
	free(q->free_ids);
	free(q->queued);
	free(q->inflight);
	free(q->done);
	free(q->pfds);
	free(q);
}

/* --- enqueue --- */

static int take_cmd(struct tpurt_queue *q, enum qcmd_kind kind,
		    const struct tpurt_deps *deps, uint64_t user_data,
		    struct qcmd **cmdp)
{
	unsigned int nwait = deps ? deps->nwait : 0;
	struct qcmd *cmd;

	if (!q->nfree)
		return tpurt_fail(-EBUSY, "queue full: %u commands not reaped",
				  q->entries);
	if (nwait > (kind == QCMD_COPY ? 1 : TPURT_QUEUE_MAX_WAIT) ||
	    (nwait && !deps->wait))
		return tpurt_fail(-EINVAL, "%u syncobjs to wait for: a copy waits for at most 1, a job %d",
				  nwait, TPURT_QUEUE_MAX_WAIT);
	cmd = &q->cmds[q->free_ids[q->nfree - 1]];
	cmd->kind = kind;
	cmd->user_data = user_data;
	memset(&cmd->args, 0, sizeof(cmd->args));
	if (nwait)
		memcpy(cmd->waits, deps->wait, nwait * sizeof(*cmd->waits));
	cmd->signal = deps ? deps->signal : 0;
	cmd->status = 0;
	*cmdp = cmd;
	return 0;
}

/* The command is filled in: queue it (and its SQE on the io_uring path). */
static int commit_cmd(struct tpurt_queue *q, struct qcmd *cmd)
{
	unsigned int id = cmd - q->cmds;

	if (q->path == TPURT_PATH_URING) {
		int copy = cmd->kind == QCMD_COPY;

		if (copy)
			cmd->args.copy.out_syncobj = cmd->signal;
		else
			cmd->args.submit.out_syncobj = cmd->signal;
		/* Never full: each of the @entries commands takes one SQE. */
		if (!tpurt_uring_prep_cmd(&q->ring, q->dev->fd,
					  copy ? DRM_TPU_URING_CMD_COPY :
						 DRM_TPU_URING_CMD_SUBMIT,
					  &cmd->args,
					  copy ? sizeof(cmd->args.copy) :
						 sizeof(cmd->args.submit), id))
			return tpurt_fail(-EBUSY, "submission ring full");
	}
	q->queued[q->nqueued++] = id;
	q->nfree--;
	return 0;
}

static int queue_transfer(struct tpurt_queue *q, uint32_t op,
			  struct tpurt_buffer *buf, uint64_t offset,
			  struct tpurt_buffer *src, uint64_t src_offset,
			  const void *host, uint64_t len,
			  const struct tpurt_deps *deps, uint64_t user_data)
{
	struct qcmd *cmd;
	int ret;

	if (!buf || buf->dev != q->dev || (src && src->dev != q->dev) || !len)
		return tpurt_fail(-EINVAL, "copy: bad buffer or zero length");
	ret = take_cmd(q, QCMD_COPY, deps, user_data, &cmd);
	if (ret)
		return ret;
	cmd->args.copy = (struct drm_tpu_copy){
		.op = op,
		.handle = buf->handle,
		.src_handle = src ? src->handle : 0,
		.offset = offset,
		.src_offset = src_offset,
		.user_ptr = (uintptr_t)host,
		.length = len,
		.in_syncobj = deps && deps->nwait ? deps->wait[0] : 0,
	};
	return commit_cmd(q, cmd);
}

int tpurt_queue_write(struct tpurt_queue *q, struct tpurt_buffer *dst,
		      uint64_t offset, const void *src, uint64_t len,
		      const struct tpurt_deps *deps, uint64_t user_data)
{
	return queue_transfer(q, DRM_TPU_COPY_TO_BO, dst, offset, NULL, 0, src,
			      len, deps, user_data);
}

int tpurt_queue_read(struct tpurt_queue *q, struct tpurt_buffer *src,
		     uint64_t offset, void *dst, uint64_t len,
		     const struct tpurt_deps *deps, uint64_t user_data)
{
	return queue_transfer(q, DRM_TPU_COPY_FROM_BO, src, offset, NULL, 0,
			      dst, len, deps, user_data);
}

int tpurt_queue_copy(struct tpurt_queue *q, struct tpurt_buffer *dst,
		     uint64_t dst_offset, struct tpurt_buffer *src,
		     uint64_t src_offset, uint64_t len,
		     const struct tpurt_deps *deps, uint64_t user_data)
{
	if (!src)
		return tpurt_fail(-EINVAL, "copy: no source buffer");
	return queue_transfer(q, DRM_TPU_COPY_BO_TO_BO, dst, dst_offset, src,
			      src_offset, NULL, len, deps, user_data);
}

int tpurt_queue_job(struct tpurt_queue *q, const void *desc, size_t desc_size,
		    struct tpurt_buffer *const *slots, unsigned int nslots,
		    uint32_t timeout_ms, unsigned int flags,
		    const struct tpurt_deps *deps, uint64_t user_data)
{
	struct qcmd *cmd;
	unsigned int i;
	int ret;

	if (!desc || !desc_size || desc_size > TPU_JOB_MAX_SIZE ||
	    nslots > TPU_JOB_MAX_SLOTS || (nslots && !slots) ||
	    flags & ~TPURT_JOB_RECORD)
		return tpurt_fail(-EINVAL, "job: bad descriptor, slots or flags");
	for (i = 0; i < nslots; i++)
		if (!slots[i] || slots[i]->dev != q->dev)
			return tpurt_fail(-EINVAL, "job: slot %u: no buffer of this device", i);
	ret = take_cmd(q, QCMD_SUBMIT, deps, user_data, &cmd);
	if (ret)
		return ret;
	if (cmd->desc_cap < desc_size) {
		void *p = realloc(cmd->desc, desc_size);

		if (!p)
			return tpurt_fail(-ENOMEM, "out of memory");
		cmd->desc = p;
		cmd->desc_cap = desc_size;
	}
	memcpy(cmd->desc, desc, desc_size);
	for (i = 0; i < nslots; i++)
		cmd->handles[i] = slots[i]->handle;
	cmd->args.submit = (struct drm_tpu_submit){
		.desc_ptr = (uintptr_t)cmd->desc,
		.desc_size = desc_size,
		.flags = flags & TPURT_JOB_RECORD ? 0 : DRM_TPU_SUBMIT_NO_RECORD,
		.handles_ptr = (uintptr_t)cmd->handles,
		.handle_count = nslots,
		.in_syncobjs_ptr = (uintptr_t)cmd->waits,
		.in_syncobj_count = deps ? deps->nwait : 0,
		.timeout_ms = timeout_ms,
	};
	return commit_cmd(q, cmd);
}

/* --- submit --- */

/* Issue one command by ioctl; track its fence as a sync_file. */
static void submit_ioctl(struct tpurt_queue *q, unsigned int id)
{
	struct qcmd *cmd = &q->cmds[id];
	int fd = q->dev->fd, ret;

	if (cmd->kind == QCMD_COPY) {
		cmd->args.copy.out_syncobj = cmd->own_sync;
		ret = tpurt_ioctl(fd, DRM_IOCTL_TPU_COPY, &cmd->args.copy);
	} else {
		cmd->args.submit.out_syncobj = cmd->own_sync;
		ret = tpurt_ioctl(fd, DRM_IOCTL_TPU_SUBMIT, &cmd->args.submit);
	}
	if (!ret)
		ret = drmSyncobjExportSyncFile(fd, cmd->own_sync, &cmd->sync_fd);
	if (!ret && cmd->signal)
		ret = drmSyncobjImportSyncFile(fd, cmd->signal, cmd->sync_fd);
	if (ret) {
		cmd->status = -errno;
		q->done[q->ndone++] = id;
		return;
	}
	q->inflight[q->ninflight++] = id;
}

int tpurt_queue_submit(struct tpurt_queue *q)
{
	unsigned int i, n = q->nqueued;
	int ret;

	if (q->path == TPURT_PATH_URING) {
		ret = io_uring_submit(&q->ring);
		if (ret < 0)
			return tpurt_fail(ret, "io_uring_submit: %s", strerror(-ret));
		/* The kernel takes SQEs in order: drop the taken ones. */
		n = (unsigned int)ret;
		memmove(q->queued, q->queued + n,
			(q->nqueued - n) * sizeof(*q->queued));
		q->nqueued -= n;
		return ret;
	}
	for (i = 0; i < n; i++)
		submit_ioctl(q, q->queued[i]);
	q->nqueued = 0;
	return n;
}

/* --- reap --- */

static void finish(struct tpurt_queue *q, unsigned int id, int32_t status,
		   uint64_t job_id, struct tpurt_completion *out)
{
	*out = (struct tpurt_completion){
		.user_data = q->cmds[id].user_data,
		.status = status,
		.job_id = job_id,
	};
	q->free_ids[q->nfree++] = id;
}

/*
 * A polled ring ignores the kernel's wait timeout: each io_uring_enter with
 * GETEVENTS polls until a CQE or until the task should yield, and the
 * timeout is this loop's. 0 once a CQE is there, -ETIME, or an error.
 */
static int poll_cqe(struct io_uring *ring, int timeout_ms)
{
	uint64_t end = tpurt_now_ns() + (uint64_t)timeout_ms * 1000000;

	while (!io_uring_cq_ready(ring)) {
		int ret;

		if (timeout_ms >= 0 && tpurt_now_ns() >= end)
			return -ETIME;
		ret = io_uring_enter(ring->ring_fd, 0, 1, IORING_ENTER_GETEVENTS,
				     NULL);
		if (ret < 0 && ret != -EAGAIN)
			return ret;
	}
	return 0;
}

static int reap_uring(struct tpurt_queue *q, struct tpurt_completion *out,
		      unsigned int max, int timeout_ms)
{
	struct io_uring_cqe *cqe;
	unsigned int head, n = 0;
	int ret;

	if (!io_uring_cq_ready(&q->ring) && timeout_ms) {
		if (q->ring.flags & IORING_SETUP_IOPOLL) {
			ret = poll_cqe(&q->ring, timeout_ms);
		} else if (timeout_ms < 0) {
			ret = io_uring_wait_cqe(&q->ring, &cqe);
		} else {
			struct __kernel_timespec ts = {
				.tv_sec = timeout_ms / 1000,
				.tv_nsec = (timeout_ms % 1000) * 1000000L,
			};

			ret = io_uring_wait_cqe_timeout(&q->ring, &cqe, &ts);
		}
		if (ret == -ETIME || ret == -EINTR)
			return 0;
		if (ret)
			return tpurt_fail(ret, "io_uring_wait_cqe: %s", strerror(-ret));
	}
	io_uring_for_each_cqe(&q->ring, head, cqe) {
		if (n == max)
			break;
		finish(q, cqe->user_data, cqe->res,
		       q->cmds[cqe->user_data].kind == QCMD_SUBMIT ?
		       cqe->big_cqe[0] : 0, &out[n++]);
	}
	io_uring_cq_advance(&q->ring, n);
	return n;
}

static int32_t sync_file_status(int fd)
{
	struct sync_file_info info = { 0 };

	if (ioctl(fd, SYNC_IOC_FILE_INFO, &info))
		return -errno;
	return info.status < 0 ? info.status : 0;
}

static int reap_ioctl(struct tpurt_queue *q, struct tpurt_completion *out,
		      unsigned int max, int timeout_ms)
{
	unsigned int i, kept = 0, n = 0;

	while (q->ndone && n < max) {
		unsigned int id = q->done[--q->ndone];

		finish(q, id, q->cmds[id].status, 0, &out[n++]);
	}
	if (n || !q->ninflight)
		return n;

	for (i = 0; i < q->ninflight; i++)
		q->pfds[i] = (struct pollfd){
			.fd = q->cmds[q->inflight[i]].sync_fd,
			.events = POLLIN,
		};
	if (poll(q->pfds, q->ninflight, timeout_ms) < 0)
		return errno == EINTR ? 0 : tpurt_fail(-errno, "poll: %s",
						       strerror(errno));
	for (i = 0; i < q->ninflight; i++) {
		unsigned int id = q->inflight[i];
		struct qcmd *cmd = &q->cmds[id];

		if (n == max || !(q->pfds[i].revents & (POLLIN | POLLERR))) {
			q->inflight[kept++] = id;
			continue;
		}
		finish(q, id, sync_file_status(cmd->sync_fd),
		       cmd->kind == QCMD_SUBMIT ? cmd->args.submit.job_id : 0,
		       &out[n++]);
		close(cmd->sync_fd);
		cmd->sync_fd = -1;
	}
	q->ninflight = kept;
	return n;
}

int tpurt_queue_reap(struct tpurt_queue *q, struct tpurt_completion *out,
		     unsigned int max, int timeout_ms)
{
	if (q->nqueued) {
		int ret = tpurt_queue_submit(q);

		if (ret < 0)
			return ret;
	}
	if (!max || !tpurt_queue_pending(q))
		return 0;
	if (q->path == TPURT_PATH_URING)
		return reap_uring(q, out, max, timeout_ms);
	return reap_ioctl(q, out, max, timeout_ms);
}
