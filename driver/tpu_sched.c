// SPDX-License-Identifier: GPL-2.0-only
/*
 * What copy and compute jobs share: a queue (a device ring and the
 * scheduler that feeds it), dependencies on syncobjs, buffer references,
 * submission to drm_sched, and recovery of a stuck queue.
 */
#include <linux/dma-fence-array.h>
#include <linux/slab.h>
#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/drm_syncobj.h>

#include "tpu_device.h"
#include "tpu_ring.h"
#include "tpu_sched.h"
#include "../uapi/tpu_drm.h"

/* Killed jobs wait for their queue's previous job; that ends at once. */
#define TPU_SCHED_DRAIN_TIMEOUT_MS	10000

/**
 * tpu_sched_job_add_syncobj() - make the job wait for a syncobj's fence
 * @job: the job, not yet pushed
 * @file: the submitting file, whose syncobj @handle is
 * @handle: the syncobj
 *
 * Return: 0, -ENOENT for an unknown syncobj, -EINVAL for too many.
 */
int tpu_sched_job_add_syncobj(struct tpu_sched_job *job, struct drm_file *file,
			      u32 handle)
{
	struct dma_fence *fence;
	int ret;

	if (job->ndeps == ARRAY_SIZE(job->deps))
		return -EINVAL;
	ret = drm_syncobj_find_fence(file, handle, 0, 0, &fence);
	if (ret)
		return ret;
	job->deps[job->ndeps++] = fence;
	return 0;
}

/*
 * The fence the scheduler should wait for before running @job: dependency
 * @i, made to count only once it has finished, so that its error is known
 * (and @job cancelled) when @job runs. drm_sched would otherwise start the
 * job as soon as a job of the same queue has merely started, and drop a
 * dependency on the same entity altogether as satisfied by order.
 */
static struct dma_fence *tpu_sched_dep_fence(struct tpu_sched_job *job,
					     struct drm_sched_entity *entity,
					     unsigned int i)
{
	struct dma_fence *dep = job->deps[i];
	struct dma_fence_array *array;
	struct dma_fence **wrapped;

	if (!to_drm_sched_fence(dep))
		return dma_fence_get(dep);
	if (dep->context != entity->fence_context &&
	    dep->context != entity->fence_context + 1) {
		set_bit(DRM_SCHED_FENCE_DONT_PIPELINE, &dep->flags);
		return dma_fence_get(dep);
	}
	/* Same entity: hide it in an array, which drm_sched waits for. */
	wrapped = kmalloc(sizeof(*wrapped), GFP_KERNEL);
	if (!wrapped)
		return dma_fence_get(dep);	/* ordered still, not cancelled */
	wrapped[0] = dma_fence_get(dep);
	array = dma_fence_array_create(1, wrapped, job->tdev->dep_fence_context,
				       atomic_inc_return(&job->tdev->dep_fence_seqno),
				       false);
	if (!array) {
		dma_fence_put(wrapped[0]);
		kfree(wrapped);
		return dma_fence_get(dep);
	}
	return &array->base;
}

/**
 * tpu_sched_job_push() - hand a prepared job to the scheduler
 * @job: the job, with its buffers and dependencies
 * @entity: the queue of the submitting file (or the driver's own)
 * @owner: drm_sched's owner cookie
 *
 * On failure the caller still owns @job and frees it.
 *
 * Return: the job's finished fence (a new reference), or an ERR_PTR.
 */
struct dma_fence *tpu_sched_job_push(struct tpu_sched_job *job,
				     struct drm_sched_entity *entity,
				     void *owner)
{
	struct tpu_device *tdev = job->tdev;
	struct dma_fence *done;
	unsigned int i;
	int ret;

	ret = drm_sched_job_init(&job->base, entity, owner);
	if (ret)
		return ERR_PTR(ret);
	for (i = 0; i < job->ndeps; i++) {
		/* The scheduler consumes its reference; we keep ours. */
		ret = drm_sched_job_add_dependency(&job->base,
						   tpu_sched_dep_fence(job, entity, i));
		if (ret) {
			drm_sched_job_cleanup(&job->base);
			return ERR_PTR(ret);
		}
	}
	/*
	 * drm_sched numbers a job's fences when it is armed and queues it when
	 * it is pushed: both under one lock, or two threads submitting to one
	 * entity (a file's ioctls and io_uring commands, every file's buffer
	 * clears on the kernel entity) can queue jobs out of fence order.
	 * Once pushed, the job may run and be freed at once: @tdev is read
	 * from it before.
	 */
	mutex_lock(&tdev->sched_lock);
	drm_sched_job_arm(&job->base);
	done = dma_fence_get(&job->base.s_fence->finished);
	atomic_inc(&tdev->jobs_alive);
	job->alive = true;
	drm_sched_entity_push_job(&job->base);
	mutex_unlock(&tdev->sched_lock);
	return done;
}

/**
 * tpu_sched_job_charge() - count the job against its file's limits
 * @job: the job, not yet pushed; tpu_sched_job_release() uncharges it
 * @tfile: the submitting file
 * @queued: the file's count of jobs of this kind in flight
 * @limit: how many may be in flight
 * @desc_bytes: descriptor memory the job holds, against
 *	DRM_TPU_MAX_QUEUED_DESC_BYTES
 *
 * Return: 0, or -EAGAIN when the file is at a limit.
 */
int tpu_sched_job_charge(struct tpu_sched_job *job, struct tpu_file *tfile,
			 atomic_t *queued, int limit, u64 desc_bytes)
{
	if (!atomic_add_unless(queued, 1, limit))
		return -EAGAIN;
	if (atomic64_add_return(desc_bytes, &tfile->queued_desc_bytes) >
	    DRM_TPU_MAX_QUEUED_DESC_BYTES) {
		atomic64_sub(desc_bytes, &tfile->queued_desc_bytes);
		atomic_dec(queued);
		return -EAGAIN;
	}
	kref_get(&tfile->ref);
	job->tfile = tfile;
	job->queued = queued;
	job->desc_bytes = desc_bytes;
	return 0;
}

/**
 * tpu_sched_job_cancelled() - whether the job must not reach the device
 * @job: the job, about to run (its dependencies have signalled)
 *
 * A job whose dependency failed would compute on bad data: it fails with
 * -ECANCELED instead, and so do the jobs that depend on it.
 *
 * Return: true if the job must be skipped; its finished fence has an error.
 */
bool tpu_sched_job_cancelled(struct tpu_sched_job *job)
{
	struct dma_fence *finished = &job->base.s_fence->finished;
	unsigned int i;

	if (job->timed_out || finished->error)
		return true;
	if (drm_dev_is_unplugged(&job->tdev->drm)) {
		/* The device is reset and its queues are going away. */
		dma_fence_set_error(finished, -ENODEV);
		return true;
	}
	for (i = 0; i < job->ndeps; i++) {
		if (job->deps[i]->error) {
			dma_fence_set_error(finished, -ECANCELED);
			return true;
		}
	}
	return false;
}

/**
 * tpu_sched_job_release() - drop the job's buffers and dependencies
 * @job: the job
 */
void tpu_sched_job_release(struct tpu_sched_job *job)
{
	unsigned int i;

	for (i = 0; i < job->nbos; i++)
		drm_gem_object_put(job->bos[i]);
	for (i = 0; i < job->ndeps; i++)
		dma_fence_put(job->deps[i]);
	job->nbos = 0;
	job->ndeps = 0;
	if (job->tfile) {
		atomic64_sub(job->desc_bytes, &job->tfile->queued_desc_bytes);
		atomic_dec(job->queued);
		tpu_file_put(job->tfile);
		job->tfile = NULL;
	}
	if (job->alive && atomic_dec_and_test(&job->tdev->jobs_alive))
		wake_up_all(&job->tdev->jobs_idle);
	job->alive = false;
}

/**
 * tpu_sched_drain() - end every job before the queues are torn down
 * @tdev: the device, unplugged and reset: it no longer runs descriptors
 *
 * Jobs still on the rings fail with -ENODEV, jobs not yet run are cancelled
 * when the scheduler picks them, and the schedulers free them all (with
 * their buffers) before this returns, so nothing is left to leak at
 * drm_sched_fini().
 */
void tpu_sched_drain(struct tpu_device *tdev)
{
	tpu_ring_fail_all(&tdev->compute_queue.ring, -ENODEV);
	tpu_ring_fail_all(&tdev->dma_queue.ring, -ENODEV);
	if (!wait_event_timeout(tdev->jobs_idle, !atomic_read(&tdev->jobs_alive),
				msecs_to_jiffies(TPU_SCHED_DRAIN_TIMEOUT_MS)))
		tpu_err(tdev, "%d jobs still alive at unload\n",
			atomic_read(&tdev->jobs_alive));
}

/*
 * The job may have finished between the timeout firing and the scheduler's
 * stop: then it keeps its result (setting an error on a signalled fence is
 * a bug). The fence's lock orders this against the signal.
 */
static void tpu_sched_fail_hung(struct drm_sched_job *hung_job)
{
	struct dma_fence *finished = &hung_job->s_fence->finished;
	unsigned long flags;

	spin_lock_irqsave(finished->lock, flags);
	if (!test_bit(DMA_FENCE_FLAG_SIGNALED_BIT, &finished->flags)) {
		to_tpu_sched_job(hung_job)->timed_out = true;
		dma_fence_set_error(finished, -ETIMEDOUT);
	}
	spin_unlock_irqrestore(finished->lock, flags);
}

/**
 * tpu_sched_recover() - reset one queue, failing a stuck job if there is one
 * @queue: the queue
 * @hung_job: the job that ran past its limit, or NULL
 *
 * Only this queue is reset: other queues, and so other kinds of work, go
 * on. @hung_job fails with -ETIMEDOUT; the other jobs in flight on the queue
 * run again from the start (copies and grid jobs compute their results
 * from their inputs, so a rerun gives the same result).
 */
void tpu_sched_recover(struct tpu_queue *queue,
		       struct drm_sched_job *hung_job)
{
	struct tpu_device *tdev = queue->ring.tdev;

	mutex_lock(&tdev->reset_lock);
	drm_sched_stop(&queue->sched, hung_job);
	if (hung_job)
		tpu_sched_fail_hung(hung_job);
	if (tpu_ring_reset(&queue->ring))
		tpu_err(tdev, "%s did not restart\n", queue->ring.name);
	drm_sched_resubmit_jobs(&queue->sched);
	drm_sched_start(&queue->sched, true);
	mutex_unlock(&tdev->reset_lock);
}

/**
 * tpu_queue_init() - bring up a device queue and its scheduler
 * @tdev: the device, with interrupts set up
 * @queue: the queue to set up
 * @config: which device queue, its size, and the scheduler's backend
 *
 * Return: 0 or a negative errno.
 */
int tpu_queue_init(struct tpu_device *tdev, struct tpu_queue *queue,
		   const struct tpu_queue_config *config)
{
	const struct drm_sched_init_args args = {
		.ops = config->ops,
		/* One descriptor per job: never more jobs than ring slots. */
		.credit_limit = config->ring_size - 1,
		.hang_limit = 0,
		.timeout = msecs_to_jiffies(config->timeout_ms),
		.name = config->name,
		.dev = tdev->drm.dev,
	};
	int ret;

	ret = tpu_ring_init(tdev, &queue->ring, config->hw_queue,
			    config->ring_size);
	if (ret)
		return ret;
	ret = drm_sched_init(&queue->sched, &args);
	if (ret) {
		tpu_err(tdev, "cannot start the %s scheduler: %d\n",
			config->name, ret);
		tpu_ring_fini(&queue->ring);
	}
	return ret;
}

/**
 * tpu_queue_fini() - tear down a queue and its scheduler
 * @queue: the queue, whose device queue has been stopped by a reset
 */
void tpu_queue_fini(struct tpu_queue *queue)
{
	drm_sched_fini(&queue->sched);
	tpu_ring_fini(&queue->ring);
}

/**
 * tpu_queue_entity_init() - open a queue of jobs on @queue
 * @queue: the queue
 * @entity: the entity to set up, destroyed with drm_sched_entity_destroy()
 * @priority: DRM_SCHED_PRIORITY_*
 *
 * Return: 0 or a negative errno.
 */
int tpu_queue_entity_init(struct tpu_queue *queue,
			  struct drm_sched_entity *entity,
			  enum drm_sched_priority priority)
{
	struct drm_gpu_scheduler *sched = &queue->sched;

	return drm_sched_entity_init(entity, priority, &sched, 1, NULL);
}
