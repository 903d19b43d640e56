/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef __TPU_DEVICE_H__
#define __TPU_DEVICE_H__

/*
 * The state of the device and of each open file, shared by every part of
 * the driver, and the logging wrappers. Each part includes this header and
 * the headers of the parts it calls, not the other way round.
 */

#include <linux/completion.h>
#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/wait.h>
#include <linux/xarray.h>
#include <drm/drm_device.h>
#include <drm/drm_mm.h>
#include <drm/drm_print.h>
#include <drm/gpu_scheduler.h>

#include "../uapi/tpu_hw.h"
#include "tpu_sched.h"

/**
 * struct tpu_device - one tpu-mxu PCI function
 * @drm: the DRM device; its render node is the userspace interface
 * @pdev: the PCI function
 * @regs: BAR0, the registers of uapi/tpu_hw.h
 * @hw_version: the device's register ABI version (TPU_REG_VERSION)
 * @caps: the capability registers, read once at probe
 * @irq_test_done: completed by the test vector's interrupt handler
 * @hbm_bus_addr: where BAR2 (HBM) sits in the CPU's physical address space
 * @hbm_mm: allocator of HBM ranges
 * @hbm_lock: protects @hbm_mm
 * @dma_queue: the DMA queue: copies
 * @kernel_entity: the driver's own DMA jobs (clearing new buffers)
 * @compute_queue: the compute queue: grid jobs
 * @report_pool: device-visible memory for job reports
 * @dep_fence_context: fence context of dependencies wrapped by tpu_sched
 * @dep_fence_seqno: their last sequence number
 * @reset_lock: serialises queue resets
 * @sched_lock: held from arming a scheduler job to pushing it, so jobs
 *	reach their entity in fence order
 * @jobs_alive: jobs pushed to a scheduler and not yet freed
 * @jobs_idle: woken when @jobs_alive drops to 0
 */
struct tpu_device {
	struct drm_device drm;
	struct pci_dev *pdev;
	void __iomem *regs;
	u32 hw_version;
	u64 caps[TPU_CAP_COUNT];
	struct completion irq_test_done;

	resource_size_t hbm_bus_addr;
	struct drm_mm hbm_mm;
	struct mutex hbm_lock; /* protects hbm_mm */

	struct tpu_queue dma_queue;
	struct drm_sched_entity kernel_entity;
	struct tpu_queue compute_queue;
	struct dma_pool *report_pool;
	u64 dep_fence_context;
	atomic_t dep_fence_seqno;
	struct mutex reset_lock; /* one reset at a time */
	struct mutex sched_lock; /* arm + push of scheduler jobs */
	atomic_t jobs_alive;
	wait_queue_head_t jobs_idle;
};

/**
 * struct tpu_file - per open file state
 * @tdev: the device
 * @dma_entity: this file's queue of copies
 * @compute_entity: this file's queue of grid jobs
 * @jobs: records of this file's grid jobs, by id
 * @next_job_id: where the id search starts
 * @ref: held by the open file and by each of its jobs until freed, so the
 *	counts below outlive a close (DRM_TPU_MAX_* of uapi/tpu_drm.h)
 * @queued_jobs: grid jobs submitted and not yet freed
 * @queued_copies: copies submitted and not yet freed
 * @queued_desc_bytes: descriptor memory of @queued_jobs
 * @records: job records in @jobs
 */
struct tpu_file {
	struct tpu_device *tdev;
	struct drm_sched_entity dma_entity;
	struct drm_sched_entity compute_entity;
	struct xarray jobs;
	u32 next_job_id;
	struct kref ref;
	atomic_t queued_jobs;
	atomic_t queued_copies;
	atomic64_t queued_desc_bytes;
	atomic_t records;
};

void tpu_file_put(struct tpu_file *tfile);

static inline struct tpu_device *to_tpu_device(struct drm_device *drm)
{
	return container_of(drm, struct tpu_device, drm);
}

#define tpu_err(tdev, fmt, ...) \
	drm_err(&(tdev)->drm, "%s(): " fmt, __func__, ##__VA_ARGS__)
#define tpu_warn(tdev, fmt, ...) \
	drm_warn(&(tdev)->drm, "%s(): " fmt, __func__, ##__VA_ARGS__)
#define tpu_info(tdev, fmt, ...) \
	drm_info(&(tdev)->drm, fmt, ##__VA_ARGS__)
#define tpu_dbg(tdev, fmt, ...) \
	drm_dbg_driver(&(tdev)->drm, "%s(): " fmt, __func__, ##__VA_ARGS__)

#endif /* __TPU_DEVICE_H__ */
