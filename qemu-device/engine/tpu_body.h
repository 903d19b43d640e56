/* SPDX-License-Identifier: MIT */
/*
 * The kernel body of one grid step: each micro-op's predicate, its scalar
 * operand (from SMEM or an immediate), its cost for the timing model, then
 * the op itself on the core's VMEM refs.
 */
#ifndef TPU_BODY_H
#define TPU_BODY_H

#include <stdint.h>

#include "tpu_core.h"

/*
 * Run the body at the core's current step, adding the MXU's modeled time
 * to @compute_s, the dots' FLOPs to @flops and their in-bounds FLOPs to
 * @useful. -1 when an index program faults (the job fails).
 */
int tpu_body_run(struct tpu_core *core, double *compute_s, uint64_t *flops,
		 uint64_t *useful);

#endif /* TPU_BODY_H */
