/* SPDX-License-Identifier: MIT */
/*
 * The grid pipeline of one core: its steps in row-major order, with the
 * blocks fetched, kept and written back around each step's body.
 */
#ifndef TPU_PIPELINE_H
#define TPU_PIPELINE_H

#include "tpu_core.h"

/*
 * Run the core's share of the job's steps (its VMEM set up by
 * tpu_core_alloc()); statistics and the first error go into the core.
 */
void tpu_core_run(struct tpu_core *core);

#endif /* TPU_PIPELINE_H */
