/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef __TPU_SCHED_H__
#define __TPU_SCHED_H__

#include <drm/gpu_scheduler.h>

#include "../uapi/tpu_job.h"
#include "tpu_ring.h"

struct drm_file;
struct drm_gem_object;
struct tpu_device;
struct tpu_file;

#define TPU_MAX_IN_SYNCOBJS	64

/**
 * struct tpu_queue - a device queue and the scheduler that feeds it
 * @ring: the device queue's ring
 * @sched: the scheduler, one descriptor per job
 */
struct tpu_queue {
	struct tpu_ring ring;
	struct drm_gpu_scheduler sched;
};

/**
 * struct tpu_queue_config - what tells one queue from another
 * @hw_queue: TPU_QUEUE_*
 * @ring_size: ring entries, a power of two no larger than TPU_Q_MAX_SIZE
 * @ops: the scheduler's backend for this kind of job
 * @timeout_ms: how long a job runs before @ops->timedout_job is called
 * @name: the scheduler's name
 */
struct tpu_queue_config {
	unsigned int hw_queue;
	u32 ring_size;
	const struct drm_sched_backend_ops *ops;
	unsigned int timeout_ms;
	const char *name;
};

/**
 * struct tpu_sched_job - what copy and compute jobs share
 * @base: the scheduler's job
 * @tdev: the device
 * @bos: buffers the job uses, referenced until it is freed
 * @nbos: entries of @bos
 * @deps: fences the job waits for, kept to check their errors at run time
 * @ndeps: entries of @deps
 * @timed_out: recovery failed this job; it must not run again
 * @tfile: the submitting file, referenced while @queued counts the job
 * @queued: the file's count of such jobs in flight, or NULL
 * @desc_bytes: what the job adds to the file's queued_desc_bytes
 * @alive: counted in the device's jobs_alive
 */
struct tpu_sched_job {
	struct drm_sched_job base;
	struct tpu_device *tdev;
	struct drm_gem_object *bos[TPU_JOB_MAX_SLOTS];
	unsigned int nbos;
	struct dma_fence *deps[TPU_MAX_IN_SYNCOBJS];
	unsigned int ndeps;
	bool timed_out;
	struct tpu_file *tfile;
	atomic_t *queued;
	u64 desc_bytes;
	bool alive;
};

static inline struct tpu_sched_job *to_tpu_sched_job(struct drm_sched_job *job)
{
	return container_of(job, struct tpu_sched_job, base);
}

int tpu_sched_job_add_syncobj(struct tpu_sched_job *job, struct drm_file *file,
			      u32 handle);
struct dma_fence *tpu_sched_job_push(struct tpu_sched_job *job,
				     struct drm_sched_entity *entity,
				     void *owner);
int tpu_sched_job_charge(struct tpu_sched_job *job, struct tpu_file *tfile,
			 atomic_t *queued, int limit, u64 desc_bytes);
bool tpu_sched_job_cancelled(struct tpu_sched_job *job);
void tpu_sched_drain(struct tpu_device *tdev);
void tpu_sched_job_release(struct tpu_sched_job *job);
void tpu_sched_recover(struct tpu_queue *queue,
		       struct drm_sched_job *hung_job);

int tpu_queue_init(struct tpu_device *tdev, struct tpu_queue *queue,
		   const struct tpu_queue_config *config);
void tpu_queue_fini(struct tpu_queue *queue);
int tpu_queue_entity_init(struct tpu_queue *queue,
			  struct drm_sched_entity *entity,
			  enum drm_sched_priority priority);

#endif /* __TPU_SCHED_H__ */
