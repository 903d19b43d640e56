// SPDX-License-Identifier: GPL-2.0-only
/*
 * Grid jobs: SUBMIT copies and checks a job descriptor, builds its buffer
 * table from the caller's buffers and queues it on the compute queue
 * through drm_sched; JOB_INFO reports how it went.
 */
#include <linux/dma-mapping.h>
#include <linux/dmapool.h>
#include <linux/moduleparam.h>
#include <linux/sched/clock.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_syncobj.h>
#include <drm/gpu_scheduler.h>

#include "tpu_device.h"
#include "tpu_gem.h"
#include "tpu_job.h"
#include "tpu_job_check.h"
#include "tpu_ring.h"
#include "tpu_sched.h"
#include "../uapi/tpu_drm.h"
#include "../uapi/tpu_hw.h"
#include "../uapi/tpu_job.h"

#define TPU_COMPUTE_RING_SIZE		64
#define TPU_JOB_DEFAULT_TIMEOUT_MS	10000
/* Below io_uring's 5-minute patience with commands at ring teardown. */
#define TPU_JOB_MAX_TIMEOUT_MS		120000
/* How often the scheduler asks whether the running job is past its limit. */
#define TPU_JOB_TIMEOUT_TICK_MS		100

/**
 * struct tpu_job_record - what JOB_INFO reports about one job
 * @ref: held by the file's job table and by the job until it is freed
 * @tdev: the device
 * @done: the job's finished fence
 * @report: written by the device when the job ends
 * @report_dma: its bus address
 */
struct tpu_job_record {
	struct kref ref;
	struct tpu_device *tdev;
	struct dma_fence *done;
	struct tpu_job_report *report;
	dma_addr_t report_dma;
};

/**
 * struct tpu_compute_job - one grid job on the compute queue
 * @sjob: the scheduler's job, with the buffer table's buffers
 * @mem: the descriptor, then the buffer table, device-visible
 * @mem_dma: its bus address
 * @mem_size: its size
 * @record: where the outcome goes
 * @timeout: how long it may run once the device starts it (jiffies)
 * @desc: the compute queue descriptor
 */
struct tpu_compute_job {
	struct tpu_sched_job sjob;
	void *mem;
	dma_addr_t mem_dma;
	size_t mem_size;
	struct tpu_job_record *record;
	unsigned long timeout;
	struct tpu_compute_desc desc;
};

static struct tpu_compute_job *to_compute_job(struct drm_sched_job *job)
{
	return container_of(job, struct tpu_compute_job, sjob.base);
}

static void tpu_job_record_free(struct kref *ref)
{
	struct tpu_job_record *rec = container_of(ref, struct tpu_job_record, ref);

	dma_fence_put(rec->done);
	dma_pool_free(rec->tdev->report_pool, rec->report, rec->report_dma);
	kfree(rec);
}

static void tpu_job_record_put(struct tpu_job_record *rec)
{
	kref_put(&rec->ref, tpu_job_record_free);
}

static struct tpu_job_record *tpu_job_record_create(struct tpu_device *tdev)
{
	struct tpu_job_record *rec = kzalloc(sizeof(*rec), GFP_KERNEL);

	if (!rec)
		return NULL;
	rec->report = dma_pool_zalloc(tdev->report_pool, GFP_KERNEL,
				      &rec->report_dma);
	if (!rec->report) {
		kfree(rec);
		return NULL;
	}
	kref_init(&rec->ref);
	rec->tdev = tdev;
	return rec;
}

static void tpu_compute_job_free(struct tpu_compute_job *job)
{
	struct device *dev = &job->sjob.tdev->pdev->dev;

	if (job->mem)
		dma_free_coherent(dev, job->mem_size, job->mem, job->mem_dma);
	if (job->record)
		tpu_job_record_put(job->record);
	tpu_sched_job_release(&job->sjob);
	kfree(job);
}

static struct dma_fence *tpu_compute_run_job(struct drm_sched_job *sched_job)
{
	struct tpu_compute_job *job = to_compute_job(sched_job);

	if (unlikely(tpu_sched_job_cancelled(&job->sjob)))
		return NULL;
	return tpu_ring_submit(&job->sjob.tdev->compute_queue.ring, &job->desc,
			       &sched_job->s_fence->finished, NULL);
}

static enum drm_gpu_sched_stat
tpu_compute_timedout_job(struct drm_sched_job *sched_job)
{
	struct tpu_compute_job *job = to_compute_job(sched_job);
	struct tpu_device *tdev = job->sjob.tdev;
	struct drm_gpu_scheduler *sched = sched_job->sched;
	unsigned long started;

	/*
	 * The limit runs from when the device starts the job: time behind
	 * another file's long job does not count against it.
	 */
	if (!tpu_ring_started(&tdev->compute_queue.ring,
			      &sched_job->s_fence->finished, &started) ||
	    time_before(jiffies, started + job->timeout)) {
		/*
		 * Not started, or within its own limit: the scheduler took the
		 * job off its pending list to look at it; put it back and
		 * keep waiting.
		 */
		spin_lock(&sched->job_list_lock);
		list_add(&sched_job->list, &sched->pending_list);
		spin_unlock(&sched->job_list_lock);
		return DRM_GPU_SCHED_STAT_NOMINAL;
	}
	tpu_err(tdev, "job ran past its %u ms limit; resetting the compute queue\n",
		jiffies_to_msecs(job->timeout));
	tpu_sched_recover(&tdev->compute_queue, sched_job);
	return DRM_GPU_SCHED_STAT_NOMINAL;
}

static void tpu_compute_free_job(struct drm_sched_job *sched_job)
{
	drm_sched_job_cleanup(sched_job);
	tpu_compute_job_free(to_compute_job(sched_job));
}

static const struct drm_sched_backend_ops tpu_compute_sched_ops = {
	.run_job = tpu_compute_run_job,
	.timedout_job = tpu_compute_timedout_job,
	.free_job = tpu_compute_free_job,
};

/* The scheduler's timeout is a tick: each job has its own limit. */
static const struct tpu_queue_config tpu_compute_queue_config = {
	.hw_queue = TPU_QUEUE_COMPUTE,
	.ring_size = TPU_COMPUTE_RING_SIZE,
	.ops = &tpu_compute_sched_ops,
	.timeout_ms = TPU_JOB_TIMEOUT_TICK_MS,
	.name = "tpu-compute",
};

/* What the job's device-visible copy costs: a power-of-two page block. */
static u64 tpu_submit_mem_cost(const struct drm_tpu_submit *args)
{
	return PAGE_SIZE << get_order(ALIGN(args->desc_size, 16) +
				      args->handle_count *
				      sizeof(struct tpu_hw_slot));
}

static int tpu_submit_check_args(const struct drm_tpu_submit *args)
{
	if (args->flags & ~DRM_TPU_SUBMIT_NO_RECORD ||
	    args->desc_size < sizeof(struct tpu_job_header) ||
	    args->handle_count > TPU_JOB_MAX_SLOTS ||
	    args->in_syncobj_count > TPU_MAX_IN_SYNCOBJS ||
	    args->timeout_ms > TPU_JOB_MAX_TIMEOUT_MS)
		return -EINVAL;
	if (args->desc_size > TPU_JOB_MAX_SIZE)
		return -E2BIG;
	return 0;
}

/* The buffer table: slot i is the caller's buffer handles[i]. */
static int tpu_submit_fill_slots(struct tpu_compute_job *job,
				 struct drm_file *file,
				 const struct drm_tpu_submit *args,
				 struct tpu_hw_slot *slots, u64 *slot_sizes)
{
	u32 __user *uhandles = u64_to_user_ptr(args->handles_ptr);
	struct tpu_sched_job *sjob = &job->sjob;
	unsigned int i;
	u32 handle;

	for (i = 0; i < args->handle_count; i++) {
		if (get_user(handle, uhandles + i))
			return -EFAULT;
		sjob->bos[i] = drm_gem_object_lookup(file, handle);
		if (!sjob->bos[i])
			return -ENOENT;
		sjob->nbos++;
		slots[i].hbm_offset = to_tpu_bo(sjob->bos[i])->node.start;
		slots[i].size = sjob->bos[i]->size;
		slot_sizes[i] = slots[i].size;
	}
	return 0;
}

static int tpu_submit_add_deps(struct tpu_compute_job *job,
			       struct drm_file *file,
			       const struct drm_tpu_submit *args)
{
	u32 __user *uhandles = u64_to_user_ptr(args->in_syncobjs_ptr);
	unsigned int i;
	u32 handle;
	int ret;

	for (i = 0; i < args->in_syncobj_count; i++) {
		if (get_user(handle, uhandles + i))
			return -EFAULT;
		ret = tpu_sched_job_add_syncobj(&job->sjob, file, handle);
		if (ret)
			return ret;
	}
	return 0;
}

/* Copy, check and describe the job; everything but queueing it. */
static int tpu_submit_prepare(struct tpu_compute_job *job, struct drm_file *file,
			      const struct drm_tpu_submit *args)
{
	struct tpu_device *tdev = job->sjob.tdev;
	u32 table_offset = ALIGN(args->desc_size, 16);
	u64 slot_sizes[TPU_JOB_MAX_SLOTS];
	struct tpu_hw_slot *slots;
	int ret;

	job->mem_size = table_offset + args->handle_count * sizeof(*slots);
	job->mem = dma_alloc_coherent(&tdev->pdev->dev, job->mem_size,
				      &job->mem_dma, GFP_KERNEL);
	if (!job->mem)
		return -ENOMEM;
	/* The device runs this copy: userspace cannot change it after the check. */
	if (copy_from_user(job->mem, u64_to_user_ptr(args->desc_ptr),
			   args->desc_size))
		return -EFAULT;
	slots = job->mem + table_offset;
	ret = tpu_submit_fill_slots(job, file, args, slots, slot_sizes);
	if (ret)
		return ret;
	ret = tpu_job_check(tdev, job->mem, args->desc_size, slot_sizes,
			    args->handle_count);
	if (ret)
		return ret;
	ret = tpu_submit_add_deps(job, file, args);
	if (ret)
		return ret;

	job->record = tpu_job_record_create(tdev);
	if (!job->record)
		return -ENOMEM;
	job->desc = (struct tpu_compute_desc){
		.op = TPU_COMPUTE_OP_RUN,
		.job_size = args->desc_size,
		.job_addr = job->mem_dma,
		.slots_addr = job->mem_dma + table_offset,
		.slot_count = args->handle_count,
		.report_addr = job->record->report_dma,
	};
	job->timeout = msecs_to_jiffies(args->timeout_ms ?: TPU_JOB_DEFAULT_TIMEOUT_MS);
	return 0;
}

/**
 * tpu_job_submit() - check a grid job and queue it on the compute queue
 * @file: the submitting file
 * @args: the job, as DRM_IOCTL_TPU_SUBMIT and DRM_TPU_URING_CMD_SUBMIT
 *	pass it; @args->job_id is set on success
 *
 * Return: the job's finished fence (a new reference), or an ERR_PTR.
 */
struct dma_fence *tpu_job_submit(struct drm_file *file,
				 struct drm_tpu_submit *args)
{
	struct tpu_file *tfile = file->driver_priv;
	struct drm_syncobj *out_sync = NULL;
	struct tpu_job_record *rec;
	struct tpu_compute_job *job;
	struct dma_fence *done;
	u32 id = 0;
	int ret;

	ret = tpu_submit_check_args(args);
	if (ret)
		return ERR_PTR(ret);
	job = kzalloc(sizeof(*job), GFP_KERNEL);
	if (!job)
		return ERR_PTR(-ENOMEM);
	job->sjob.tdev = tfile->tdev;
	ret = tpu_sched_job_charge(&job->sjob, tfile, &tfile->queued_jobs,
				   DRM_TPU_MAX_QUEUED_JOBS,
				   tpu_submit_mem_cost(args));
	if (ret) {
		kfree(job);
		return ERR_PTR(ret);
	}
	ret = tpu_submit_prepare(job, file, args);
	if (!ret && args->out_syncobj) {
		out_sync = drm_syncobj_find(file, args->out_syncobj);
		if (!out_sync)
			ret = -ENOENT;
	}
	if (ret)
		goto err_free_job;

	/*
	 * Reserve the id now, so nothing can fail once the job is queued, and
	 * take the table's reference on the record before the job can finish
	 * and drop its own.
	 */
	rec = job->record;
	if (!(args->flags & DRM_TPU_SUBMIT_NO_RECORD)) {
		if (!atomic_add_unless(&tfile->records, 1,
				       DRM_TPU_MAX_JOB_RECORDS)) {
			ret = -ENOSPC;
			goto err_free_job;
		}
		ret = xa_alloc_cyclic(&tfile->jobs, &id, NULL, xa_limit_32b,
				      &tfile->next_job_id, GFP_KERNEL);
		if (ret < 0) {
			atomic_dec(&tfile->records);
			goto err_free_job;
		}
		kref_get(&rec->ref);
	}

	done = tpu_sched_job_push(&job->sjob, &tfile->compute_entity, file);
	if (IS_ERR(done)) {
		ret = PTR_ERR(done);
		if (id) {
			xa_erase(&tfile->jobs, id);
			atomic_dec(&tfile->records);
			tpu_job_record_put(rec);
		}
		goto err_free_job;
	}
	if (id) {
		rec->done = dma_fence_get(done);
		xa_store(&tfile->jobs, id, rec, GFP_KERNEL);
	}
	if (out_sync) {
		drm_syncobj_replace_fence(out_sync, done);
		drm_syncobj_put(out_sync);
	}
	args->job_id = id;
	return done;

err_free_job:
	if (out_sync)
		drm_syncobj_put(out_sync);
	tpu_compute_job_free(job);
	return ERR_PTR(ret);
}

int tpu_ioctl_submit(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct dma_fence *done = tpu_job_submit(file, data);

	if (IS_ERR(done))
		return PTR_ERR(done);
	dma_fence_put(done);
	return 0;
}

/*
 * A short job is done in about the time a sleeping waiter takes to be
 * woken by its interrupt (on an emulated CPU, tens of microseconds each for
 * the MSI, the halted vCPU and the wake-up), so a waiter first polls the
 * queue for a while, as i915 spins on its requests before it sleeps. Only
 * while the queue's jobs are short: when the last one took the device
 * longer than the spin, this one likely will too, and a spinning vCPU
 * takes host CPU from the device that is running it.
 */
#define TPU_JOB_WAIT_SPIN_MAX_US	1000

static unsigned int wait_spin_us = 300;
module_param(wait_spin_us, uint, 0644);
MODULE_PARM_DESC(wait_spin_us,
		 "Microseconds a JOB_INFO waiter polls the compute queue before it sleeps, while its jobs are shorter (0: never, at most 1000)");

static void tpu_job_spin(struct tpu_device *tdev, struct dma_fence *done)
{
	struct drm_sched_fence *s_fence = to_drm_sched_fence(done);
	struct tpu_ring *ring = &tdev->compute_queue.ring;
	unsigned int us = min(READ_ONCE(wait_spin_us), TPU_JOB_WAIT_SPIN_MAX_US);
	u64 spin_ns = (u64)us * NSEC_PER_USEC, end = local_clock() + spin_ns;
	int idx;

	if (!us || !s_fence || READ_ONCE(ring->last_busy_ns) > spin_ns)
		return;
	/* The ring outlives the spin: removal waits for drm_dev_exit(). */
	if (!drm_dev_enter(&tdev->drm, &idx))
		return;
	tpu_ring_poll_begin(ring);
	while (!dma_fence_is_signaled(done)) {
		tpu_ring_poll(ring);
		if (signal_pending(current) || local_clock() > end)
			break;
		/*
		 * Until the scheduler's thread has handed the job to the
		 * device, let it have this CPU if it is waiting here for it
		 * (a woken thread runs before a spinning one).
		 */
		if (!dma_fence_is_signaled(&s_fence->scheduled))
			schedule();
		else
			cond_resched();
		cpu_relax();
	}
	tpu_ring_poll_end(ring);
	drm_dev_exit(idx);
}

int tpu_ioctl_job_info(struct drm_device *drm, void *data,
		       struct drm_file *file)
{
	struct tpu_file *tfile = file->driver_priv;
	struct drm_tpu_job_info *args = data;
	struct tpu_job_record *rec;
	int ret = 0;

	if (args->pad || args->flags & ~(DRM_TPU_JOB_INFO_WAIT |
					 DRM_TPU_JOB_INFO_RELEASE) ||
	    args->job_id > U32_MAX)
		return -EINVAL;

	xa_lock(&tfile->jobs);
	rec = xa_load(&tfile->jobs, args->job_id);
	if (rec)
		kref_get(&rec->ref);
	xa_unlock(&tfile->jobs);
	if (!rec)
		return -ENOENT;

	if (args->flags & DRM_TPU_JOB_INFO_WAIT) {
		long wait;

		tpu_job_spin(tfile->tdev, rec->done);
		wait = dma_fence_wait(rec->done, true);

		if (wait) {
			ret = wait;
			goto out;
		}
	}
	if (!dma_fence_is_signaled(rec->done)) {
		args->status = -EINPROGRESS;
	} else {
		args->status = rec->done->error;
		if (args->report_ptr &&
		    copy_to_user(u64_to_user_ptr(args->report_ptr), rec->report,
				 min_t(u32, args->report_size, sizeof(*rec->report)))) {
			ret = -EFAULT;
			goto out;
		}
	}
	if (args->flags & DRM_TPU_JOB_INFO_RELEASE &&
	    xa_erase(&tfile->jobs, args->job_id)) {
		atomic_dec(&tfile->records);
		tpu_job_record_put(rec);
	}
out:
	tpu_job_record_put(rec);
	return ret;
}

int tpu_job_file_open(struct tpu_device *tdev, struct tpu_file *tfile)
{
	xa_init_flags(&tfile->jobs, XA_FLAGS_ALLOC1);
	return tpu_queue_entity_init(&tdev->compute_queue, &tfile->compute_entity,
				     DRM_SCHED_PRIORITY_NORMAL);
}

void tpu_job_file_close(struct tpu_file *tfile)
{
	struct tpu_job_record *rec;
	unsigned long id;

	drm_sched_entity_destroy(&tfile->compute_entity);
	xa_for_each(&tfile->jobs, id, rec)
		tpu_job_record_put(rec);
	xa_destroy(&tfile->jobs);
}

/**
 * tpu_job_init() - start the compute queue and its scheduler
 * @tdev: the device, with interrupts set up
 *
 * Return: 0 or a negative errno.
 */
int tpu_job_init(struct tpu_device *tdev)
{
	int ret;

	tdev->report_pool = dma_pool_create("tpu-job-report", &tdev->pdev->dev,
					    sizeof(struct tpu_job_report), 64, 0);
	if (!tdev->report_pool)
		return -ENOMEM;
	ret = tpu_queue_init(tdev, &tdev->compute_queue,
			     &tpu_compute_queue_config);
	if (ret)
		dma_pool_destroy(tdev->report_pool);
	return ret;
}

/**
 * tpu_job_fini() - stop the compute queue
 * @tdev: the device, reset: the device no longer touches job memory
 */
void tpu_job_fini(struct tpu_device *tdev)
{
	tpu_queue_fini(&tdev->compute_queue);
	dma_pool_destroy(tdev->report_pool);
}
