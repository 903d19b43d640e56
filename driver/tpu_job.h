/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef __TPU_JOB_H__
#define __TPU_JOB_H__

struct dma_fence;
struct drm_device;
struct drm_file;
struct tpu_device;
struct tpu_file;
struct drm_tpu_submit;

int tpu_job_init(struct tpu_device *tdev);
void tpu_job_fini(struct tpu_device *tdev);
int tpu_job_file_open(struct tpu_device *tdev, struct tpu_file *tfile);
void tpu_job_file_close(struct tpu_file *tfile);
struct dma_fence *tpu_job_submit(struct drm_file *file,
				 struct drm_tpu_submit *args);
int tpu_ioctl_submit(struct drm_device *drm, void *data, struct drm_file *file);
int tpu_ioctl_job_info(struct drm_device *drm, void *data,
		       struct drm_file *file);

#endif /* __TPU_JOB_H__ */
