// SPDX-License-Identifier: MIT
/*
 * The driver's queueing ioctls, retried on EINTR only. libdrm's drmIoctl()
 * also retries EAGAIN, which the driver returns when a file reaches one of
 * its queue limits (DRM_TPU_MAX_QUEUED_*, uapi/tpu_drm.h): retried, the
 * caller would spin until other jobs finish instead of hearing about it.
 */
#include <errno.h>
#include <sys/ioctl.h>

#include "tpurt_private.h"

int tpurt_ioctl(int fd, unsigned long request, void *arg)
{
	int ret;

	do
		ret = ioctl(fd, request, arg);
	while (ret == -1 && errno == EINTR);
	return ret;
}
