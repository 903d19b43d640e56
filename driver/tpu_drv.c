// SPDX-License-Identifier: GPL-2.0-only
/*
 * tpu: DRM render-only driver for the emulated tpu-mxu accelerator.
 */
#include <linux/dma-mapping.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>

#include "tpu_debugfs.h"
#include "tpu_device.h"
#include "tpu_dma.h"
#include "tpu_drv.h"
#include "tpu_gem.h"
#include "tpu_hw.h"
#include "tpu_job.h"
#include "tpu_uring.h"
#include "../uapi/tpu_drm.h"
#include "../uapi/tpu_hw.h"

static u64 tpu_queue_reg64(struct tpu_device *tdev, unsigned int queue, u32 lo)
{
	u64 val = tpu_reg_read(tdev, TPU_REG_Q(queue, lo));

	return (u64)tpu_reg_read(tdev, TPU_REG_Q(queue, lo + 4)) << 32 | val;
}

/* A queue statistic, read live from the device. */
static u64 tpu_queue_stat(struct tpu_device *tdev, u32 param)
{
	switch (param) {
	case DRM_TPU_PARAM_DMA_DESCRIPTORS:
		return tpu_reg_read(tdev, TPU_REG_Q(TPU_QUEUE_DMA, TPU_Q_DONE));
	case DRM_TPU_PARAM_DMA_ERRORS:
		return tpu_reg_read(tdev, TPU_REG_Q(TPU_QUEUE_DMA, TPU_Q_ERRORS));
	case DRM_TPU_PARAM_DMA_BYTES:
		return tpu_queue_reg64(tdev, TPU_QUEUE_DMA, TPU_Q_BYTES_LO);
	case DRM_TPU_PARAM_DMA_BUSY_NS:
		return tpu_queue_reg64(tdev, TPU_QUEUE_DMA, TPU_Q_BUSY_NS_LO);
	case DRM_TPU_PARAM_COMPUTE_JOBS:
		return tpu_reg_read(tdev, TPU_REG_Q(TPU_QUEUE_COMPUTE, TPU_Q_DONE));
	case DRM_TPU_PARAM_COMPUTE_ERRORS:
		return tpu_reg_read(tdev, TPU_REG_Q(TPU_QUEUE_COMPUTE, TPU_Q_ERRORS));
	default:
		return tpu_queue_reg64(tdev, TPU_QUEUE_COMPUTE, TPU_Q_BUSY_NS_LO);
	}
}

static int tpu_ioctl_get_param(struct drm_device *drm, void *data,
			       struct drm_file *file)
{
	struct tpu_device *tdev = to_tpu_device(drm);
	struct drm_tpu_get_param *args = data;
	unsigned int i;

	if (args->pad)
		return -EINVAL;

	switch (args->param) {
	case DRM_TPU_PARAM_HW_VERSION:
		args->value = tdev->hw_version;
		return 0;
	case DRM_TPU_PARAM_DMA_DESCRIPTORS ... DRM_TPU_PARAM_COMPUTE_BUSY_NS:
		args->value = tpu_queue_stat(tdev, args->param);
		return 0;
	}
	for (i = 0; i < TPU_CAP_COUNT; i++) {
		if (args->param == DRM_TPU_PARAM_OF_CAP(i)) {
			args->value = tdev->caps[i];
			return 0;
		}
	}
	tpu_dbg(tdev, "unknown param %u\n", args->param);
	return -EINVAL;
}

static const struct drm_ioctl_desc tpu_ioctls[] = {
	DRM_IOCTL_DEF_DRV(TPU_GET_PARAM, tpu_ioctl_get_param, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TPU_BO_CREATE, tpu_ioctl_bo_create, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TPU_BO_INFO, tpu_ioctl_bo_info, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TPU_COPY, tpu_ioctl_copy, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TPU_SUBMIT, tpu_ioctl_submit, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TPU_JOB_INFO, tpu_ioctl_job_info, DRM_RENDER_ALLOW),
};

static int tpu_open(struct drm_device *drm, struct drm_file *file)
{
	struct tpu_device *tdev = to_tpu_device(drm);
	struct tpu_file *tfile;
	int ret;

	tfile = kzalloc(sizeof(*tfile), GFP_KERNEL);
	if (!tfile)
		return -ENOMEM;
	tfile->tdev = tdev;
	kref_init(&tfile->ref);
	ret = tpu_dma_file_open(tdev, tfile);
	if (ret)
		goto err_free_tfile;
	ret = tpu_job_file_open(tdev, tfile);
	if (ret)
		goto err_dma_close;
	file->driver_priv = tfile;
	return 0;

err_dma_close:
	tpu_dma_file_close(tfile);
err_free_tfile:
	kfree(tfile);
	return ret;
}

static void tpu_file_free(struct kref *ref)
{
	kfree(container_of(ref, struct tpu_file, ref));
}

/**
 * tpu_file_put() - drop a reference to a file's state
 * @tfile: the file's state; freed with the last reference
 */
void tpu_file_put(struct tpu_file *tfile)
{
	kref_put(&tfile->ref, tpu_file_free);
}

static void tpu_postclose(struct drm_device *drm, struct drm_file *file)
{
	struct tpu_file *tfile = file->driver_priv;

	tpu_job_file_close(tfile);
	tpu_dma_file_close(tfile);
	tpu_file_put(tfile);
}

/* DEFINE_DRM_GEM_FOPS() plus io_uring commands. */
static const struct file_operations tpu_fops = {
	.owner = THIS_MODULE,
	DRM_GEM_FOPS,
	.uring_cmd = tpu_uring_cmd,
	.uring_cmd_iopoll = tpu_uring_cmd_iopoll,
};

static const struct drm_driver tpu_drm_driver = {
	.driver_features = DRIVER_RENDER | DRIVER_GEM | DRIVER_SYNCOBJ,
	.open = tpu_open,
	.postclose = tpu_postclose,
	.debugfs_init = tpu_debugfs_init,
	.fops = &tpu_fops,
	.ioctls = tpu_ioctls,
	.num_ioctls = ARRAY_SIZE(tpu_ioctls),
	.name = DRIVER_NAME,
	.desc = DRIVER_DESC,
	.date = DRIVER_DATE,
	.major = DRIVER_MAJOR,
	.minor = DRIVER_MINOR,
};

static int tpu_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct tpu_device *tdev;
	int ret;

	tdev = devm_drm_dev_alloc(&pdev->dev, &tpu_drm_driver,
				  struct tpu_device, drm);
	if (IS_ERR(tdev))
		return PTR_ERR(tdev);
	tdev->pdev = pdev;
	pci_set_drvdata(pdev, tdev);

	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	ret = pcim_iomap_regions(pdev, BIT(TPU_BAR_REGS), DRIVER_NAME);
	if (ret) {
		tpu_err(tdev, "cannot map BAR%d: %d\n", TPU_BAR_REGS, ret);
		return ret;
	}
	tdev->regs = pcim_iomap_table(pdev)[TPU_BAR_REGS];
	pci_set_master(pdev);
	/* The device's DMA takes 64-bit addresses: no bounce buffers. */
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret) {
		tpu_err(tdev, "no 64-bit DMA: %d\n", ret);
		return ret;
	}
	/*
	 * An SG entry's length has 64 bits: the device takes any segment the
	 * DMA API makes, not the PCI default of 64 KiB that copies exceeded.
	 */
	ret = dma_set_max_seg_size(&pdev->dev, UINT_MAX);
	if (ret) {
		tpu_err(tdev, "cannot set the DMA segment size: %d\n", ret);
		return ret;
	}

	ret = tpu_hw_init(tdev);
	if (ret)
		return ret;
	ret = tpu_hw_irq_init(tdev);
	if (ret)
		return ret;
	tdev->dep_fence_context = dma_fence_context_alloc(1);
	mutex_init(&tdev->reset_lock);
	mutex_init(&tdev->sched_lock);
	init_waitqueue_head(&tdev->jobs_idle);
	ret = tpu_gem_init(tdev);
	if (ret)
		return ret;
	ret = tpu_dma_init(tdev);
	if (ret)
		return ret;
	ret = tpu_job_init(tdev);
	if (ret)
		goto err_dma_fini;

	ret = drm_dev_register(&tdev->drm, 0);
	if (ret) {
		tpu_err(tdev, "cannot register the DRM device: %d\n", ret);
		goto err_job_fini;
	}
	tpu_info(tdev, "tpu-mxu %u.%u: %llu MiB HBM, %llu MiB VMEM, %llu core(s)\n",
		 TPU_VERSION_MAJOR(tdev->hw_version),
		 TPU_VERSION_MINOR(tdev->hw_version),
		 tdev->caps[TPU_CAP_HBM_SIZE] >> 20,
		 tdev->caps[TPU_CAP_VMEM_SIZE] >> 20,
		 tdev->caps[TPU_CAP_CORES]);
	return 0;

err_job_fini:
	tpu_hw_reset(tdev);
	tpu_job_fini(tdev);
	tpu_dma_fini(tdev);
	return ret;
err_dma_fini:
	tpu_hw_reset(tdev);
	tpu_dma_fini(tdev);
	return ret;
}

static void tpu_remove(struct pci_dev *pdev)
{
	struct tpu_device *tdev = pci_get_drvdata(pdev);

	drm_dev_unplug(&tdev->drm);
	/* Stop the device touching memory before the queues are freed. */
	tpu_hw_reset(tdev);
	tpu_sched_drain(tdev);
	tpu_job_fini(tdev);
	tpu_dma_fini(tdev);
}

static const struct pci_device_id tpu_pci_ids[] = {
	{ PCI_DEVICE(TPU_PCI_VENDOR_ID, TPU_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, tpu_pci_ids);

static struct pci_driver tpu_pci_driver = {
	.name = DRIVER_NAME,
	.id_table = tpu_pci_ids,
	.probe = tpu_probe,
	.remove = tpu_remove,
};
module_pci_driver(tpu_pci_driver);

MODULE_DESCRIPTION(DRIVER_DESC);
MODULE_LICENSE("GPL");
