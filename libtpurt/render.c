// SPDX-License-Identifier: MIT
/*
 * The render node's backend: open and discovery (tpurt_open_path, and the
 * first node by driver name for tpurt_open in open.c), device info from
 * GET_PARAM, buffers (BO_CREATE, DMA copies through DRM_IOCTL_TPU_COPY,
 * mmap), grid jobs (SUBMIT, JOB_INFO), and what queue.c needs of the
 * device: its submit path (io_uring commands, or ioctls with sync_files)
 * and syncobjs.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xf86drm.h>

#include "tpu_drm.h"
#include "tpurt_private.h"

#define TPU_DRIVER_NAME "tpu"
#define MAX_DRM_DEVICES 64

static const struct tpurt_backend render_backend;

static int ioctl_fail(struct tpurt_device *dev, const char *what)
{
	int err = -errno;

	return tpurt_fail(err, "%s: %s: %s", dev->node, what, strerror(-err));
}

/* --- open --- */

/* 0 if @fd is a tpu node; otherwise a failure naming what it is. */
static int check_driver(int fd, const char *path)
{
	drmVersionPtr ver = drmGetVersion(fd);
	int ret = 0;

	if (!ver)
		return tpurt_fail(-ENODEV, "%s: not a DRM device", path);
	if (strcmp(ver->name, TPU_DRIVER_NAME))
		ret = tpurt_fail(-ENODEV, "%s: driver is \"%s\", not \"%s\"",
				 path, ver->name, TPU_DRIVER_NAME);
	drmFreeVersion(ver);
	return ret;
}

int tpurt_open_path(const char *path, struct tpurt_device **devp)
{
	struct tpurt_device *dev;
	int fd, ret;

	*devp = NULL;
	if (strlen(path) >= sizeof(dev->node))
		return tpurt_fail(-ENAMETOOLONG, "%s: path too long", path);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		return tpurt_fail(ret, "%s: %s", path, strerror(-ret));
	}
	ret = check_driver(fd, path);
	if (ret)
		goto err_close;
	dev = calloc(1, sizeof(*dev));
	if (!dev) {
		ret = tpurt_fail(-ENOMEM, "%s: out of memory", path);
		goto err_close;
	}
	dev->ops = &render_backend;
	dev->fd = fd;
	strcpy(dev->node, path);
	*devp = dev;
	return 0;

err_close:
	close(fd);
	return ret;
}

int tpurt_render_open_first(struct tpurt_device **devp)
{
	drmDevicePtr devs[MAX_DRM_DEVICES];
	int n, i, ret = -ENODEV;

	n = drmGetDevices2(0, devs, MAX_DRM_DEVICES);
	if (n < 0)
		n = 0;
	for (i = 0; i < n && ret; i++) {
		if (!(devs[i]->available_nodes & (1 << DRM_NODE_RENDER)))
			continue;
		ret = tpurt_open_path(devs[i]->nodes[DRM_NODE_RENDER], devp);
	}
	if (n)
		drmFreeDevices(devs, n);
	if (ret)
		return tpurt_fail(-ENODEV,
				  "no tpu render node among %d DRM device(s) "
				  "(is tpu.ko loaded? set TPURT_DEVICE to choose one)",
				  n);
	return 0;
}

static void render_close(struct tpurt_device *dev)
{
	close(dev->fd);
}

/* --- info --- */

static int get_param(struct tpurt_device *dev, uint32_t param, uint64_t *value)
{
	struct drm_tpu_get_param args = { .param = param };

	if (drmIoctl(dev->fd, DRM_IOCTL_TPU_GET_PARAM, &args)) {
		int err = -errno;

		return tpurt_fail(err, "%s: GET_PARAM %u: %s", dev->node, param,
				  strerror(-err));
	}
	*value = args.value;
	return 0;
}

/* GET_PARAM for each field of the device info, read by render_info(). */
static const struct {
	uint32_t param;
	size_t offset;
	size_t size;
} info_params[] = {
#define INFO_PARAM(param, field) \
	{ param, offsetof(struct tpurt_device_info, field), \
	  sizeof(((struct tpurt_device_info *)0)->field) },
	INFO_PARAM(DRM_TPU_PARAM_HW_VERSION, hw_version)
#define INFO_DEVICE_PARAM(id, field, ...) INFO_PARAM(DRM_TPU_PARAM_##id, field)
	TPU_PARAMS(INFO_DEVICE_PARAM)
#undef INFO_DEVICE_PARAM
#undef INFO_PARAM
};

static int render_info(struct tpurt_device *dev, struct tpurt_device_info *info)
{
	drmVersionPtr ver;
	size_t i;
	int ret;

	memset(info, 0, sizeof(*info));
	snprintf(info->node, sizeof(info->node), "%s", dev->node);
	ver = drmGetVersion(dev->fd);
	if (!ver)
		return tpurt_fail(-EIO, "%s: cannot read the driver version",
				  dev->node);
	snprintf(info->driver, sizeof(info->driver), "%s", ver->name);
	drmFreeVersion(ver);

	for (i = 0; i < sizeof(info_params) / sizeof(info_params[0]); i++) {
		char *dst = (char *)info + info_params[i].offset;
		uint64_t v = 0;

		ret = get_param(dev, info_params[i].param, &v);
		if (ret)
			return ret;
		if (info_params[i].size == sizeof(uint32_t)) {
			uint32_t v32 = (uint32_t)v;

			memcpy(dst, &v32, sizeof(v32));
		} else {
			memcpy(dst, &v, sizeof(v));
		}
	}
	return 0;
}

/* --- buffers --- */

static int render_buffer_create(struct tpurt_buffer *buf)
{
	struct tpurt_device *dev = buf->dev;
	struct drm_tpu_bo_create create = { .size = buf->size };
	struct drm_tpu_bo_info info = { 0 };
	struct drm_gem_close close_args = { 0 };
	int ret;

	if (drmIoctl(dev->fd, DRM_IOCTL_TPU_BO_CREATE, &create)) {
		if (errno == ENOSPC)
			return tpurt_fail(-ENOSPC,
					  "no free HBM range of %llu bytes",
					  (unsigned long long)buf->size);
		return ioctl_fail(dev, "BO_CREATE");
	}
	info.handle = create.handle;
	if (drmIoctl(dev->fd, DRM_IOCTL_TPU_BO_INFO, &info)) {
		ret = ioctl_fail(dev, "BO_INFO");
		goto err_close;
	}
	buf->handle = create.handle;
	buf->alloc_size = info.size;
	buf->mmap_offset = info.mmap_offset;
	return 0;

err_close:
	close_args.handle = create.handle;
	drmIoctl(dev->fd, DRM_IOCTL_GEM_CLOSE, &close_args);
	return ret;
}

static void render_buffer_free(struct tpurt_buffer *buf)
{
	struct drm_gem_close close_args = { .handle = buf->handle };

	if (buf->map)
		munmap(buf->map, buf->alloc_size);
	drmIoctl(buf->dev->fd, DRM_IOCTL_GEM_CLOSE, &close_args);
}

static int copy(struct tpurt_buffer *buf, struct drm_tpu_copy *args,
		const char *what)
{
	args->flags = DRM_TPU_COPY_WAIT;
	args->handle = buf->handle;
	if (tpurt_ioctl(buf->dev->fd, DRM_IOCTL_TPU_COPY, args))
		return ioctl_fail(buf->dev, what);
	return 0;
}

static int render_buffer_write(struct tpurt_buffer *buf, uint64_t offset,
			       const void *src, uint64_t len)
{
	struct drm_tpu_copy args = {
		.op = DRM_TPU_COPY_TO_BO, .offset = offset,
		.user_ptr = (uintptr_t)src, .length = len,
	};

	return copy(buf, &args, "COPY to buffer");
}

static int render_buffer_read(struct tpurt_buffer *buf, uint64_t offset,
			      void *dst, uint64_t len)
{
	struct drm_tpu_copy args = {
		.op = DRM_TPU_COPY_FROM_BO, .offset = offset,
		.user_ptr = (uintptr_t)dst, .length = len,
	};

	return copy(buf, &args, "COPY from buffer");
}

static int render_buffer_copy(struct tpurt_buffer *dst, uint64_t dst_offset,
			      struct tpurt_buffer *src, uint64_t src_offset,
			      uint64_t len)
{
	struct drm_tpu_copy args = {
		.op = DRM_TPU_COPY_BO_TO_BO, .offset = dst_offset,
		.src_handle = src->handle, .src_offset = src_offset,
		.length = len,
	};

	return copy(dst, &args, "COPY between buffers");
}

static void *render_buffer_map(struct tpurt_buffer *buf)
{
	void *p;

	if (buf->map)
		return buf->map;
	p = mmap(NULL, buf->alloc_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 buf->dev->fd, (off_t)buf->mmap_offset);
	if (p == MAP_FAILED) {
		tpurt_fail(-errno, "%s: mmap of a %llu-byte buffer: %s",
			   buf->dev->node, (unsigned long long)buf->alloc_size,
			   strerror(errno));
		return NULL;
	}
	buf->map = p;
	return p;
}

/* --- jobs --- */

static int render_job_submit(struct tpurt_job *job, const void *desc,
			     size_t len, struct tpurt_buffer *const *bufs,
			     unsigned int nbufs)
{
	struct tpurt_device *dev = job->dev;
	uint32_t handles[TPU_JOB_MAX_SLOTS];
	struct drm_tpu_submit args = {
		.desc_ptr = (uintptr_t)desc, .desc_size = (uint32_t)len,
		.handles_ptr = (uintptr_t)handles, .handle_count = nbufs,
		.timeout_ms = job->timeout_ms,
	};
	int err;

	for (unsigned int i = 0; i < nbufs; i++)
		handles[i] = bufs[i]->handle;
	/* The out syncobj is what io_uring users and other jobs wait on. */
	if (drmSyncobjCreate(dev->fd, 0, &job->syncobj)) {
		err = -errno;
		return tpurt_fail(err, "%s: syncobj create: %s", dev->node,
				  strerror(-err));
	}
	args.out_syncobj = job->syncobj;
	if (tpurt_ioctl(dev->fd, DRM_IOCTL_TPU_SUBMIT, &args)) {
		err = -errno;
		drmSyncobjDestroy(dev->fd, job->syncobj);
		job->syncobj = 0;
		return tpurt_fail(err, "%s: SUBMIT: %s%s", dev->node,
				  strerror(-err),
				  err == -ENOSPC ? " (VMEM need over the device's VMEM)" : "");
	}
	job->id = args.job_id;
	return 0;
}

static int render_job_wait(struct tpurt_job *job)
{
	struct tpurt_device *dev = job->dev;
	struct drm_tpu_job_info args = {
		.job_id = job->id,
		.report_ptr = (uintptr_t)&job->report,
		.report_size = sizeof(job->report),
		.flags = DRM_TPU_JOB_INFO_WAIT | DRM_TPU_JOB_INFO_RELEASE,
	};

	if (drmIoctl(dev->fd, DRM_IOCTL_TPU_JOB_INFO, &args)) {
		int err = -errno;

		return tpurt_fail(err, "%s: JOB_INFO of job %llu: %s", dev->node,
				  (unsigned long long)job->id, strerror(-err));
	}
	job->status = args.status;
	if (job->syncobj) {
		drmSyncobjDestroy(dev->fd, job->syncobj);
		job->syncobj = 0;
	}
	return 0;
}

/* --- what queues need --- */

struct io_uring_sqe *tpurt_uring_prep_cmd(struct io_uring *ring, int fd,
					  uint32_t op, const void *args,
					  size_t size, uint64_t user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe)
		return NULL;
	/*
	 * 128 bytes: the SQE and its payload, which must be zero past @args.
	 * The offset is zero too: it shares its bytes with cmd_op, so it must
	 * not be written after it.
	 */
	memset(sqe, 0, 2 * sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = op;
	memcpy(sqe->cmd, args, size);
	sqe->user_data = user_data;
	return sqe;
}

/* Whether the driver takes io_uring commands: an unknown op gets -EINVAL. */
static int probe_uring(int fd)
{
	struct io_uring_params p = {
		.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQE32,
	};
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	int ok = 0;

	if (io_uring_queue_init_params(2, &ring, &p))
		return 0;
	if (tpurt_uring_prep_cmd(&ring, fd, 0, NULL, 0, 1) &&
	    io_uring_submit(&ring) == 1 && !io_uring_wait_cqe(&ring, &cqe)) {
		ok = cqe->res == -EINVAL;
		io_uring_cqe_seen(&ring, cqe);
	}
	io_uring_queue_exit(&ring);
	return ok;
}

static int render_submit_path(struct tpurt_device *dev,
			      enum tpurt_submit_path want,
			      enum tpurt_submit_path *path)
{
	if (want == TPURT_PATH_IOCTL) {
		*path = TPURT_PATH_IOCTL;
		return 0;
	}
	if (probe_uring(dev->fd)) {
		*path = TPURT_PATH_URING;
		return 0;
	}
	if (want == TPURT_PATH_URING)
		return tpurt_fail(-EOPNOTSUPP,
				  "%s: no io_uring commands (kernel or driver too old, or io_uring disabled)",
				  dev->node);
	*path = TPURT_PATH_IOCTL;
	return 0;
}

static int render_sync_create(struct tpurt_device *dev, uint32_t *syncp)
{
	if (drmSyncobjCreate(dev->fd, 0, syncp))
		return ioctl_fail(dev, "SYNCOBJ_CREATE");
	return 0;
}

static void render_sync_destroy(struct tpurt_device *dev, uint32_t sync)
{
	drmSyncobjDestroy(dev->fd, sync);
}

static const struct tpurt_backend render_backend = {
	.close = render_close,
	.info = render_info,
	.buffer_create = render_buffer_create,
	.buffer_free = render_buffer_free,
	.buffer_write = render_buffer_write,
	.buffer_read = render_buffer_read,
	.buffer_copy = render_buffer_copy,
	.buffer_map = render_buffer_map,
	.job_submit = render_job_submit,
	.job_wait = render_job_wait,
	.submit_path = render_submit_path,
	.sync_create = render_sync_create,
	.sync_destroy = render_sync_destroy,
};
