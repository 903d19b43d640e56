// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copies between user memory and HBM buffers, and within HBM: jobs on the
 * DMA queue, scheduled by drm_sched with one entity per open file.
 */
#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <drm/drm_file.h>
#include <drm/drm_syncobj.h>

#include "tpu_device.h"
#include "tpu_dma.h"
#include "tpu_gem.h"
#include "tpu_ring.h"
#include "tpu_sched.h"
#include "../uapi/tpu_drm.h"
#include "../uapi/tpu_hw.h"

#define TPU_DMA_RING_SIZE	256
#define TPU_DMA_TIMEOUT_MS	10000
#define SG_PER_SEGMENT		(TPU_SG_SEGMENT_SIZE / sizeof(struct tpu_sg_entry))

/**
 * struct tpu_copy_job - one copy on the DMA queue
 * @sjob: the scheduler's job, with the buffers it touches
 * @pages: pinned user pages, or NULL
 * @npages: entries of @pages
 * @device_writes_pages: the device writes @pages (mark them dirty)
 * @sgt: @pages as a scatter-gather table, DMA-mapped if @mapped
 * @mapped: @sgt is DMA-mapped: from run_job until the device is done
 * @unmap: unmaps @sgt when the descriptor retires from the ring
 * @segs: the device's SG list, one 4 KiB coherent segment each
 * @seg_dma: bus addresses of @segs
 * @nsegs: entries of @segs
 * @desc: the descriptor for the ring
 */
struct tpu_copy_job {
	struct tpu_sched_job sjob;
	struct page **pages;
	unsigned long npages;
	bool device_writes_pages;
	struct sg_table sgt;
	bool mapped;
	struct tpu_ring_retire unmap;
	struct tpu_sg_entry **segs;
	dma_addr_t *seg_dma;
	unsigned int nsegs;
	struct tpu_dma_desc desc;
};

static struct tpu_copy_job *to_copy_job(struct drm_sched_job *job)
{
	return container_of(job, struct tpu_copy_job, sjob.base);
}

static enum dma_data_direction tpu_copy_job_dma_dir(struct tpu_copy_job *job)
{
	return job->device_writes_pages ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
}

static void tpu_copy_job_unmap_user(struct tpu_copy_job *job)
{
	dma_unmap_sgtable(&job->sjob.tdev->pdev->dev, &job->sgt,
			  tpu_copy_job_dma_dir(job), 0);
	job->mapped = false;
}

static void tpu_copy_job_free(struct tpu_copy_job *job)
{
	struct device *dev = &job->sjob.tdev->pdev->dev;
	unsigned int i;

	for (i = 0; i < job->nsegs; i++)
		dma_free_coherent(dev, TPU_SG_SEGMENT_SIZE, job->segs[i],
				  job->seg_dma[i]);
	kfree(job->segs);
	kfree(job->seg_dma);
	/*
	 * Normally the ring has unmapped it when the copy retired; still
	 * mapped, it may be on the ring after a reset that failed.
	 */
	if (job->mapped) {
		tpu_ring_forget(&job->sjob.tdev->dma_queue.ring, &job->unmap);
		if (job->mapped)
			tpu_copy_job_unmap_user(job);
	}
	if (job->sgt.sgl)
		sg_free_table(&job->sgt);
	if (job->pages) {
		unpin_user_pages_dirty_lock(job->pages, job->npages,
					    job->device_writes_pages);
		kvfree(job->pages);
	}
	tpu_sched_job_release(&job->sjob);
	kfree(job);
}

/* Segments for @nents SG entries: SG_PER_SEGMENT - 1 each, and a link. */
static unsigned int tpu_sg_segments(unsigned int nents)
{
	unsigned int nsegs, capacity;

	for (nsegs = 1, capacity = SG_PER_SEGMENT; nents > capacity; nsegs++)
		capacity += SG_PER_SEGMENT - 1;
	return nsegs;
}

/*
 * Pin the user range and allocate the device's SG list for it. Mapping
 * waits for run_job: a queued copy holds no mapping.
 */
static int tpu_copy_job_pin_user(struct tpu_copy_job *job, u64 user_ptr,
				 u64 length)
{
	struct device *dev = &job->sjob.tdev->pdev->dev;
	unsigned long first_page = user_ptr >> PAGE_SHIFT;
	unsigned long last_page = (user_ptr + length - 1) >> PAGE_SHIFT;
	unsigned int gup_flags = job->device_writes_pages ? FOLL_WRITE : 0;
	unsigned long pinned = 0;
	unsigned int nsegs, seg;
	int ret;

	job->npages = last_page - first_page + 1;
	job->pages = kvmalloc_array(job->npages, sizeof(*job->pages), GFP_KERNEL);
	if (!job->pages)
		return -ENOMEM;
	while (pinned < job->npages) {
		ret = pin_user_pages_fast((first_page + pinned) << PAGE_SHIFT,
					  min_t(unsigned long, job->npages - pinned, INT_MAX),
					  gup_flags, job->pages + pinned);
		if (ret <= 0) {
			job->npages = pinned;
			return ret ? ret : -EFAULT;
		}
		pinned += ret;
	}

	ret = sg_alloc_table_from_pages(&job->sgt, job->pages, job->npages,
					offset_in_page(user_ptr), length,
					GFP_KERNEL);
	if (ret)
		return ret;

	/* Mapping only merges entries: orig_nents bounds the mapped count. */
	nsegs = tpu_sg_segments(job->sgt.orig_nents);
	job->segs = kcalloc(nsegs, sizeof(*job->segs), GFP_KERNEL);
	job->seg_dma = kcalloc(nsegs, sizeof(*job->seg_dma), GFP_KERNEL);
	if (!job->segs || !job->seg_dma)
		return -ENOMEM;
	/* @job->nsegs counts what tpu_copy_job_free() has to free. */
	for (seg = 0; seg < nsegs; seg++) {
		job->segs[seg] = dma_alloc_coherent(dev, TPU_SG_SEGMENT_SIZE,
						    &job->seg_dma[seg], GFP_KERNEL);
		if (!job->segs[seg])
			return -ENOMEM;
		job->nsegs++;
	}
	return 0;
}

/* DMA-map the pinned pages and describe them to the device. */
static int tpu_copy_job_map_user(struct tpu_copy_job *job)
{
	struct device *dev = &job->sjob.tdev->pdev->dev;
	unsigned int nents, seg = 0, slot = 0;
	struct scatterlist *sg;
	int ret, i;

	ret = dma_map_sgtable(dev, &job->sgt, tpu_copy_job_dma_dir(job), 0);
	if (ret)
		return ret;
	job->mapped = true;

	nents = job->sgt.nents;
	for_each_sgtable_dma_sg(&job->sgt, sg, i) {
		if (slot == SG_PER_SEGMENT - 1 && i < nents - 1) {
			job->segs[seg][slot].addr = job->seg_dma[seg + 1];
			job->segs[seg][slot].len = TPU_SG_LINK;
			seg++;
			slot = 0;
		}
		job->segs[seg][slot].addr = sg_dma_address(sg);
		job->segs[seg][slot].len = sg_dma_len(sg);
		slot++;
	}
	job->desc.sg_addr = job->seg_dma[0];
	job->desc.sg_count = nents;
	return 0;
}

/*
 * The device is done with the pages (or was reset): give them back to the
 * CPU before the copy's fence can signal, so a waiter never reads memory
 * still mapped for the device, and a later copy may map the same cache
 * lines. dma_unmap_*() may be called from the interrupt.
 */
static void tpu_copy_job_retired(struct tpu_ring_retire *retire)
{
	tpu_copy_job_unmap_user(container_of(retire, struct tpu_copy_job, unmap));
}

static struct dma_fence *tpu_dma_run_job(struct drm_sched_job *sched_job)
{
	struct tpu_copy_job *job = to_copy_job(sched_job);
	struct tpu_ring *ring = &job->sjob.tdev->dma_queue.ring;
	struct dma_fence *fence;
	int ret;

	if (unlikely(tpu_sched_job_cancelled(&job->sjob)))
		return NULL;
	if (!job->pages)
		return tpu_ring_submit(ring, &job->desc,
				       &sched_job->s_fence->finished, NULL);
	/*
	 * A rerun after a reset that failed still has its mapping, and its
	 * retire work may still be on the ring.
	 */
	if (job->mapped)
		tpu_ring_forget(ring, &job->unmap);
	if (!job->mapped) {
		ret = tpu_copy_job_map_user(job);
		if (ret)
			return ERR_PTR(ret);
	}
	job->unmap.fn = tpu_copy_job_retired;
	fence = tpu_ring_submit(ring, &job->desc, &sched_job->s_fence->finished,
				&job->unmap);
	if (IS_ERR(fence))
		tpu_copy_job_unmap_user(job);
	return fence;
}

static enum drm_gpu_sched_stat tpu_dma_timedout_job(struct drm_sched_job *sched_job)
{
	struct tpu_device *tdev = to_copy_job(sched_job)->sjob.tdev;

	tpu_err(tdev, "copy timed out after %d ms; resetting the DMA queue\n",
		TPU_DMA_TIMEOUT_MS);
	tpu_sched_recover(&tdev->dma_queue, sched_job);
	return DRM_GPU_SCHED_STAT_NOMINAL;
}

static void tpu_dma_free_job(struct drm_sched_job *sched_job)
{
	drm_sched_job_cleanup(sched_job);
	tpu_copy_job_free(to_copy_job(sched_job));
}

static const struct drm_sched_backend_ops tpu_dma_sched_ops = {
	.run_job = tpu_dma_run_job,
	.timedout_job = tpu_dma_timedout_job,
	.free_job = tpu_dma_free_job,
};

static const struct tpu_queue_config tpu_dma_queue_config = {
	.hw_queue = TPU_QUEUE_DMA,
	.ring_size = TPU_DMA_RING_SIZE,
	.ops = &tpu_dma_sched_ops,
	.timeout_ms = TPU_DMA_TIMEOUT_MS,
	.name = "tpu-dma",
};

/* Push @job; on failure it is freed here. */
static struct dma_fence *tpu_copy_job_push(struct tpu_copy_job *job,
					   struct drm_sched_entity *entity,
					   void *owner)
{
	struct dma_fence *done = tpu_sched_job_push(&job->sjob, entity, owner);

	if (IS_ERR(done))
		tpu_copy_job_free(job);
	return done;
}

struct tpu_fence_waiter {
	struct dma_fence_cb cb;
	struct completion done;
};

static void tpu_fence_waiter_wake(struct dma_fence *fence,
				  struct dma_fence_cb *cb)
{
	complete(&container_of(cb, struct tpu_fence_waiter, cb)->done);
}

/**
 * tpu_wait_fence() - wait for a queued job; only a fatal signal stops it
 * @fence: the job's finished fence
 *
 * An interruptible wait would return -ERESTARTSYS on any signal, and the
 * restarted ioctl would queue the job again: a copy between overlapping
 * ranges would then run twice. The wait is bounded by the queue's time
 * limit, after which recovery fails the job.
 *
 * Return: the job's error, or -EINTR if the caller is being killed.
 */
int tpu_wait_fence(struct dma_fence *fence)
{
	struct tpu_fence_waiter w;

	init_completion(&w.done);
	if (dma_fence_add_callback(fence, &w.cb, tpu_fence_waiter_wake))
		return fence->error;	/* already signalled */
	if (wait_for_completion_killable(&w.done)) {
		/* Removed, or the callback has run: @w is unused either way. */
		dma_fence_remove_callback(fence, &w.cb);
		return -EINTR;
	}
	return fence->error;
}

/**
 * tpu_dma_fill_sync() - fill a range of HBM and wait
 * @tdev: the device
 * @hbm_offset: start of the range
 * @length: bytes
 * @pattern: the byte to fill with
 *
 * Return: 0 or a negative errno.
 */
int tpu_dma_fill_sync(struct tpu_device *tdev, u64 hbm_offset, u64 length,
		      u8 pattern)
{
	struct tpu_copy_job *job;
	struct dma_fence *done;
	int ret;

	job = kzalloc(sizeof(*job), GFP_KERNEL);
	if (!job)
		return -ENOMEM;
	job->sjob.tdev = tdev;
	job->desc.op = TPU_DMA_OP_FILL;
	job->desc.hbm_offset = hbm_offset;
	job->desc.length = length;
	job->desc.pattern = pattern;
	done = tpu_copy_job_push(job, &tdev->kernel_entity, tdev);
	if (IS_ERR(done))
		return PTR_ERR(done);
	ret = tpu_wait_fence(done);
	dma_fence_put(done);
	return ret;
}

/* The buffer @handle, if [@offset, @offset + @length) lies inside it. */
static int tpu_lookup_bo_range(struct drm_file *file, u32 handle, u64 offset,
			       u64 length, struct drm_gem_object **objp)
{
	struct drm_gem_object *obj = drm_gem_object_lookup(file, handle);

	if (!obj)
		return -ENOENT;
	if (offset > obj->size || length > obj->size - offset) {
		drm_gem_object_put(obj);
		return -EINVAL;
	}
	*objp = obj;
	return 0;
}

static int tpu_copy_check_args(const struct drm_tpu_copy *args)
{
	if (args->flags & ~DRM_TPU_COPY_WAIT || !args->length)
		return -EINVAL;
	switch (args->op) {
	case DRM_TPU_COPY_TO_BO:
	case DRM_TPU_COPY_FROM_BO:
		if (args->src_handle || args->src_offset || !args->user_ptr ||
		    args->user_ptr + args->length < args->user_ptr)
			return -EINVAL;
		return 0;
	case DRM_TPU_COPY_BO_TO_BO:
		return args->user_ptr ? -EINVAL : 0;
	default:
		return -EINVAL;
	}
}

static int tpu_copy_job_prepare(struct tpu_copy_job *job, struct drm_file *file,
				const struct drm_tpu_copy *args)
{
	struct tpu_sched_job *sjob = &job->sjob;
	u64 dst;
	int ret;

	ret = tpu_lookup_bo_range(file, args->handle, args->offset,
				  args->length, &sjob->bos[0]);
	if (ret)
		return ret;
	sjob->nbos = 1;
	dst = to_tpu_bo(sjob->bos[0])->node.start + args->offset;
	job->desc.length = args->length;

	switch (args->op) {
	case DRM_TPU_COPY_TO_BO:
		job->desc.op = TPU_DMA_OP_H2D;
		job->desc.hbm_offset = dst;
		return tpu_copy_job_pin_user(job, args->user_ptr, args->length);
	case DRM_TPU_COPY_FROM_BO:
		job->desc.op = TPU_DMA_OP_D2H;
		job->desc.hbm_offset = dst;
		job->device_writes_pages = true;
		return tpu_copy_job_pin_user(job, args->user_ptr, args->length);
	default:
		ret = tpu_lookup_bo_range(file, args->src_handle,
					  args->src_offset, args->length,
					  &sjob->bos[1]);
		if (ret)
			return ret;
		sjob->nbos = 2;
		job->desc.op = TPU_DMA_OP_D2D;
		job->desc.hbm_offset = to_tpu_bo(sjob->bos[1])->node.start +
				       args->src_offset;
		job->desc.hbm_offset2 = dst;
		return 0;
	}
}

/**
 * tpu_copy_submit() - check a copy and queue it on the DMA queue
 * @file: the submitting file
 * @args: the copy, as DRM_IOCTL_TPU_COPY and DRM_TPU_URING_CMD_COPY pass
 *	it; DRM_TPU_COPY_WAIT is the caller's business
 *
 * Return: the copy's finished fence (a new reference), or an ERR_PTR.
 */
struct dma_fence *tpu_copy_submit(struct drm_file *file,
				  const struct drm_tpu_copy *args)
{
	struct tpu_file *tfile = file->driver_priv;
	struct drm_syncobj *out_sync = NULL;
	struct tpu_copy_job *job;
	struct dma_fence *done;
	int ret;

	ret = tpu_copy_check_args(args);
	if (ret)
		return ERR_PTR(ret);

	job = kzalloc(sizeof(*job), GFP_KERNEL);
	if (!job)
		return ERR_PTR(-ENOMEM);
	job->sjob.tdev = tfile->tdev;
	ret = tpu_sched_job_charge(&job->sjob, tfile, &tfile->queued_copies,
				   DRM_TPU_MAX_QUEUED_COPIES, 0);
	if (ret) {
		kfree(job);
		return ERR_PTR(ret);
	}
	ret = tpu_copy_job_prepare(job, file, args);
	if (!ret && args->in_syncobj)
		ret = tpu_sched_job_add_syncobj(&job->sjob, file, args->in_syncobj);
	if (!ret && args->out_syncobj) {
		out_sync = drm_syncobj_find(file, args->out_syncobj);
		if (!out_sync)
			ret = -ENOENT;
	}
	if (ret) {
		tpu_copy_job_free(job);
		return ERR_PTR(ret);
	}

	done = tpu_copy_job_push(job, &tfile->dma_entity, file);
	if (!IS_ERR(done) && out_sync)
		drm_syncobj_replace_fence(out_sync, done);
	if (out_sync)
		drm_syncobj_put(out_sync);
	return done;
}

int tpu_ioctl_copy(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct drm_tpu_copy *args = data;
	struct dma_fence *done;
	int ret = 0;

	done = tpu_copy_submit(file, args);
	if (IS_ERR(done))
		return PTR_ERR(done);
	if (args->flags & DRM_TPU_COPY_WAIT)
		ret = tpu_wait_fence(done);
	dma_fence_put(done);
	return ret;
}

int tpu_dma_file_open(struct tpu_device *tdev, struct tpu_file *tfile)
{
	return tpu_queue_entity_init(&tdev->dma_queue, &tfile->dma_entity,
				     DRM_SCHED_PRIORITY_NORMAL);
}

void tpu_dma_file_close(struct tpu_file *tfile)
{
	drm_sched_entity_destroy(&tfile->dma_entity);
}

/**
 * tpu_dma_init() - start the DMA queue and its scheduler
 * @tdev: the device, with interrupts set up
 *
 * Return: 0 or a negative errno.
 */
int tpu_dma_init(struct tpu_device *tdev)
{
	int ret;

	ret = tpu_queue_init(tdev, &tdev->dma_queue, &tpu_dma_queue_config);
	if (ret)
		return ret;
	ret = tpu_queue_entity_init(&tdev->dma_queue, &tdev->kernel_entity,
				    DRM_SCHED_PRIORITY_KERNEL);
	if (ret)
		tpu_queue_fini(&tdev->dma_queue);
	return ret;
}

/**
 * tpu_dma_fini() - stop the DMA queue
 * @tdev: the device, reset: it no longer touches memory of the jobs
 */
void tpu_dma_fini(struct tpu_device *tdev)
{
	drm_sched_entity_destroy(&tdev->kernel_entity);
	tpu_queue_fini(&tdev->dma_queue);
}
