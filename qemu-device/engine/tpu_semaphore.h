/* SPDX-License-Identifier: MIT */
/*
 * A core's semaphores (Mosaic's DMA and regular semaphores): element
 * lookup, signal and wait, and the rule that every count is back at zero
 * after the core's last step. A wait nothing can satisfy fails at once:
 * the body runs in order on one core, so nothing else could signal it.
 */
#ifndef TPU_SEMAPHORE_H
#define TPU_SEMAPHORE_H

#include <stdint.h>

#include "tpu_core.h"

/*
 * Element @e of semaphore scratch @ref (op @n's src1) as an index into
 * core->sems; fails the job with TPU_JOB_ERR_SEMAPHORE if @e is outside it.
 */
int tpu_sem_index(struct tpu_core *core, unsigned int n, struct tpu_plan_ref ref,
		  int64_t e, uint32_t *flat);

/* pltpu.semaphore_signal(src1.at[@e], @amount) / semaphore_wait. */
int tpu_sem_signal(struct tpu_core *core, unsigned int n,
		   const struct tpu_plan_op *op, int64_t e, int64_t amount);
int tpu_sem_wait(struct tpu_core *core, unsigned int n,
		 const struct tpu_plan_op *op, int64_t e, int64_t amount);

/*
 * Fail op @n's wait for @need (bytes of a copy, or a count) on element @e
 * of @ref, which holds less.
 */
int tpu_sem_fail_wait(struct tpu_core *core, unsigned int n,
		      struct tpu_plan_ref ref, int64_t e, uint32_t flat,
		      int64_t need, bool bytes);

/* After the core's last step (@last_step): every count zero, or fail. */
int tpu_sem_check_end(struct tpu_core *core, uint64_t last_step);

#endif /* TPU_SEMAPHORE_H */
