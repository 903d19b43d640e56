/* SPDX-License-Identifier: MIT */
/*
 * A core's SMEM and semaphores: its own copy of the scalar-prefetch
 * arrays, its SMEM-space blocks and SMEM scratch (plan->smem_words words,
 * each array at its smem_base, its elements at their own size), and its
 * semaphore counts, all persisting across the core's steps; scalar stores
 * into them.
 */
#ifndef TPU_SMEM_H
#define TPU_SMEM_H

#include <stdint.h>

#include "tpu_core.h"

/* Allocate them, prefetch copied from run->smem (if any); -1: no memory. */
int tpu_smem_alloc(struct tpu_core *core);
void tpu_smem_free(struct tpu_core *core);

/* TPU_OP_SCALAR_STORE @n: its dst[@index] = @value. 0, or -1 (failed). */
int tpu_smem_store(struct tpu_core *core, unsigned int n,
		   const struct tpu_plan_op *op, int64_t index, int64_t value);

/* Elements of SMEM ref @ref (prefetch array, SMEM block, SMEM scratch). */
uint64_t tpu_smem_elems(const struct tpu_plan *plan, struct tpu_plan_ref ref);

/* Elements a scalar read of @ref may reach: to the job's SMEM end. */
uint64_t tpu_smem_ref_reach(const struct tpu_plan *plan, struct tpu_plan_ref ref);

/*
 * Its words in the core's SMEM and its elements' type (at their own size:
 * tpu_smem_load and tpu_smem_put of rules/tpu_plan.h address them).
 */
int32_t *tpu_smem_words(const struct tpu_core *core, struct tpu_plan_ref ref,
			uint8_t *dtype);

#endif /* TPU_SMEM_H */
