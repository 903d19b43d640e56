// SPDX-License-Identifier: MIT
/*
 * Buffers: HBM ranges owned by a device. The public calls check their
 * arguments and hand over to the device's backend; the render node's
 * backend (DMA copies through DRM_IOCTL_TPU_COPY) is below.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <xf86drm.h>

#include "tpu_drm.h"
#include "tpurt_private.h"

int tpurt_buffer_create(struct tpurt_device *dev, uint64_t size,
			struct tpurt_buffer **bufp)
{
	struct tpurt_buffer *buf;
	int ret;

	*bufp = NULL;
	if (!size)
		return tpurt_fail(-EINVAL, "buffer size must not be zero");
	buf = calloc(1, sizeof(*buf));
	if (!buf)
		return tpurt_fail(-ENOMEM, "out of memory");
	buf->dev = dev;
	buf->size = size;
	ret = dev->ops->buffer_create(buf);
	if (ret) {
		free(buf);
		return ret;
	}
	*bufp = buf;
	return 0;
}

void tpurt_buffer_free(struct tpurt_buffer *buf)
{
	if (!buf)
		return;
	buf->dev->ops->buffer_free(buf);
	free(buf);
}

uint64_t tpurt_buffer_size(const struct tpurt_buffer *buf)
{
	return buf->size;
}

uint32_t tpurt_buffer_handle(const struct tpurt_buffer *buf)
{
	return buf->handle;
}

static int check_range(const struct tpurt_buffer *buf, uint64_t offset,
		       uint64_t len, const char *what)
{
	if (!len)
		return tpurt_fail(-EINVAL, "%s: length must not be zero", what);
	if (offset > buf->size || len > buf->size - offset)
		return tpurt_fail(-EINVAL,
				  "%s: range [%llu, %llu) outside the buffer's %llu bytes",
				  what, (unsigned long long)offset,
				  (unsigned long long)(offset + len),
				  (unsigned long long)buf->size);
	return 0;
}

int tpurt_buffer_write(struct tpurt_buffer *buf, uint64_t offset,
		       const void *src, uint64_t len)
{
	int ret = check_range(buf, offset, len, "buffer write");

	return ret ? ret : buf->dev->ops->buffer_write(buf, offset, src, len);
}

int tpurt_buffer_read(struct tpurt_buffer *buf, uint64_t offset, void *dst,
		      uint64_t len)
{
	int ret = check_range(buf, offset, len, "buffer read");

	return ret ? ret : buf->dev->ops->buffer_read(buf, offset, dst, len);
}

int tpurt_buffer_copy(struct tpurt_buffer *dst, uint64_t dst_offset,
		      struct tpurt_buffer *src, uint64_t src_offset,
		      uint64_t len)
{
	int ret = check_range(dst, dst_offset, len, "buffer copy destination");

	if (!ret)
		ret = check_range(src, src_offset, len, "buffer copy source");
	if (!ret && src->dev != dst->dev)
		ret = tpurt_fail(-EINVAL, "buffer copy between two devices");
	return ret ? ret : dst->dev->ops->buffer_copy(dst, dst_offset, src,
						      src_offset, len);
}

void *tpurt_buffer_map(struct tpurt_buffer *buf)
{
	return buf->dev->ops->buffer_map(buf);
}

/* --- the render node --- */

static int ioctl_fail(struct tpurt_device *dev, const char *what)
{
	int err = -errno;

	return tpurt_fail(err, "%s: %s: %s", dev->node, what, strerror(-err));
}

int tpurt_render_buffer_create(struct tpurt_buffer *buf)
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

void tpurt_render_buffer_free(struct tpurt_buffer *buf)
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
	if (drmIoctl(buf->dev->fd, DRM_IOCTL_TPU_COPY, args))
		return ioctl_fail(buf->dev, what);
	return 0;
}

int tpurt_render_buffer_write(struct tpurt_buffer *buf, uint64_t offset,
			      const void *src, uint64_t len)
{
	struct drm_tpu_copy args = {
		.op = DRM_TPU_COPY_TO_BO, .offset = offset,
		.user_ptr = (uintptr_t)src, .length = len,
	};

	return copy(buf, &args, "COPY to buffer");
}

int tpurt_render_buffer_read(struct tpurt_buffer *buf, uint64_t offset,
			     void *dst, uint64_t len)
{
	struct drm_tpu_copy args = {
		.op = DRM_TPU_COPY_FROM_BO, .offset = offset,
		.user_ptr = (uintptr_t)dst, .length = len,
	};

	return copy(buf, &args, "COPY from buffer");
}

int tpurt_render_buffer_copy(struct tpurt_buffer *dst, uint64_t dst_offset,
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

void *tpurt_render_buffer_map(struct tpurt_buffer *buf)
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
