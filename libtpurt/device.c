// SPDX-License-Identifier: MIT
/* Device discovery, open and capability queries over the tpu render node. */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xf86drm.h>

#include "tpu_config.h"
#include "tpu_drm.h"
#include "tpurt_private.h"

#define TPU_DRIVER_NAME "tpu"
#define MAX_DRM_DEVICES 64

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
	dev->ops = &tpurt_render_backend;
	dev->fd = fd;
	strcpy(dev->node, path);
	*devp = dev;
	return 0;

err_close:
	close(fd);
	return ret;
}

/* The first render node whose driver is tpu. */
static int open_first_tpu(struct tpurt_device **devp)
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

int tpurt_open(struct tpurt_device **devp)
{
	const char *path = getenv("TPURT_DEVICE");

	if (path && *path)
		return tpurt_open_path(path, devp);
	return open_first_tpu(devp);
}

static void render_close(struct tpurt_device *dev)
{
	close(dev->fd);
}

void tpurt_close(struct tpurt_device *dev)
{
	if (!dev)
		return;
	dev->ops->close(dev);
	free(dev);
}

int tpurt_device_fd(const struct tpurt_device *dev)
{
	return dev->fd;
}

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

/*
 * The public structs spell out the device parameters of uapi/tpu_params.h
 * for programs to read: each parameter is a field of the engine's width,
 * in table order, and there are no others.
 */
#define SAME_FIELD(type, id, field, ...) \
	_Static_assert(sizeof(((type *)0)->field) == \
		       sizeof(((struct tpu_config *)0)->field) && \
		       offsetof(type, field) - offsetof(type, hbm_size) == \
		       offsetof(struct tpu_config, field), \
		       #type "." #field " differs from the device parameter");
#define DEVICE_INFO_FIELD(...) SAME_FIELD(struct tpurt_device_info, __VA_ARGS__)
#define SIM_CONFIG_FIELD(...) SAME_FIELD(struct tpurt_sim_config, __VA_ARGS__)
TPU_PARAMS(DEVICE_INFO_FIELD)
TPU_PARAMS(SIM_CONFIG_FIELD)
_Static_assert(sizeof(struct tpurt_device_info) ==
	       offsetof(struct tpurt_device_info, hbm_size) + sizeof(struct tpu_config),
	       "struct tpurt_device_info: a field after the device parameters");
_Static_assert(sizeof(struct tpurt_sim_config) == sizeof(struct tpu_config) &&
	       offsetof(struct tpurt_sim_config, hbm_size) == 0,
	       "struct tpurt_sim_config: a field that is no device parameter");

int tpurt_device_info(struct tpurt_device *dev, struct tpurt_device_info *info)
{
	return dev->ops->info(dev, info);
}

int tpurt_device_cached_info(struct tpurt_device *dev,
			     const struct tpurt_device_info **infop)
{
	if (!dev->have_info) {
		int ret = dev->ops->info(dev, &dev->info);

		if (ret)
			return ret;
		dev->have_info = 1;
	}
	*infop = &dev->info;
	return 0;
}

const struct tpurt_backend tpurt_render_backend = {
	.close = render_close,
	.info = render_info,
	.buffer_create = tpurt_render_buffer_create,
	.buffer_free = tpurt_render_buffer_free,
	.buffer_write = tpurt_render_buffer_write,
	.buffer_read = tpurt_render_buffer_read,
	.buffer_copy = tpurt_render_buffer_copy,
	.buffer_map = tpurt_render_buffer_map,
	.job_submit = tpurt_render_job_submit,
	.job_wait = tpurt_render_job_wait,
};
