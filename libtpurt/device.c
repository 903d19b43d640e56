// SPDX-License-Identifier: MIT
/*
 * A device, whichever its backend (render.c, sim.c): close, info, and the
 * public structs' tie to the device's parameters.
 */
#include <stddef.h>
#include <stdlib.h>

#include "tpu_config.h"
#include "tpurt_private.h"

void tpurt_close(struct tpurt_device *dev)
{
	if (!dev)
		return;
	tpurt_trace_close(dev->trace);
	dev->ops->close(dev);
	free(dev);
}

int tpurt_device_fd(const struct tpurt_device *dev)
{
	return dev->fd;
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
