// SPDX-License-Identifier: MIT
/*
 * Buffers: HBM ranges owned by a device. The public calls check their
 * arguments and hand over to the device's backend (render.c, sim.c).
 */
#include <errno.h>
#include <stdlib.h>

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
