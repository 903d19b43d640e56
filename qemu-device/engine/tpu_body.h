/* SPDX-License-Identifier: MIT */
/*
 * The kernel body of one grid step: each micro-op's predicate, its scalar
 * operand (from SMEM or the scalar core), its cost for the timing model, then
 * the op itself on the core's VMEM refs.
 */
#ifndef TPU_BODY_H
#define TPU_BODY_H

#include <stdint.h>

#include "tpu_core.h"

/*
 * Run the body at the core's current step, adding the modeled time of the
 * MXU, VPU and EUP to @work, the dots' FLOPs to @flops and their in-bounds
 * FLOPs to @useful. -1 when an index program faults or an integer op
 * divides by zero (the job fails).
 */
int tpu_body_run(struct tpu_core *core, struct tpu_model_work *work,
		 uint64_t *flops, uint64_t *useful);

#endif /* TPU_BODY_H */
