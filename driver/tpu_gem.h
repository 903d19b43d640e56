/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef __TPU_GEM_H__
#define __TPU_GEM_H__

#include <drm/drm_gem.h>
#include <drm/drm_mm.h>

struct tpu_device;

/**
 * struct tpu_bo - a buffer object: a range of the device's HBM
 * @base: the GEM object
 * @node: the HBM range, from &tpu_device.hbm_mm
 */
struct tpu_bo {
	struct drm_gem_object base;
	struct drm_mm_node node;
};

static inline struct tpu_bo *to_tpu_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct tpu_bo, base);
}

int tpu_gem_init(struct tpu_device *tdev);
int tpu_ioctl_bo_create(struct drm_device *drm, void *data,
			struct drm_file *file);
int tpu_ioctl_bo_info(struct drm_device *drm, void *data,
		      struct drm_file *file);

#endif /* __TPU_GEM_H__ */
