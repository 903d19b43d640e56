/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef __TPU_DEBUGFS_H__
#define __TPU_DEBUGFS_H__

struct drm_minor;

#if IS_ENABLED(CONFIG_DEBUG_FS)
void tpu_debugfs_init(struct drm_minor *minor);
#else
static inline void tpu_debugfs_init(struct drm_minor *minor)
{
}
#endif

#endif /* __TPU_DEBUGFS_H__ */
