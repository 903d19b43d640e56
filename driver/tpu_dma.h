/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef __TPU_DMA_H__
#define __TPU_DMA_H__

#include <linux/types.h>

struct dma_fence;
struct drm_device;
struct drm_file;
struct drm_tpu_copy;
struct tpu_device;
struct tpu_file;

int tpu_dma_init(struct tpu_device *tdev);
void tpu_dma_fini(struct tpu_device *tdev);
int tpu_dma_file_open(struct tpu_device *tdev, struct tpu_file *tfile);
void tpu_dma_file_close(struct tpu_file *tfile);
int tpu_dma_fill_sync(struct tpu_device *tdev, u64 hbm_offset, u64 length,
		      u8 pattern);
struct dma_fence *tpu_copy_submit(struct drm_file *file,
				  const struct drm_tpu_copy *args);
int tpu_ioctl_copy(struct drm_device *drm, void *data, struct drm_file *file);
int tpu_wait_fence(struct dma_fence *fence);

#endif /* __TPU_DMA_H__ */
