/* SPDX-License-Identifier: MIT */
/*
 * Windows at run time: a ref's box at the current step (a window's starts
 * from its start program, checked against its base), the 2-D ref the body
 * sees for a contiguous VMEM window, and the host memory behind a box,
 * which async copies move.
 */
#ifndef TPU_WINDOW_H
#define TPU_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#include "tpu_core.h"

/* A ref's box with its starts at this step (all 0 for a plain ref). */
struct tpu_box_at {
	struct tpu_plan_box box;
	int64_t start[TPU_JOB_MAX_RANK];
};

/*
 * Resolve @ref, named by op @op, at the core's current step. A window
 * whose start program faults or whose box leaves its base fails the job
 * (TPU_JOB_ERR_WINDOW_OOB names the op, window, dimension, start, size,
 * extent and step). 0 or -1.
 */
int tpu_window_resolve(struct tpu_core *core, unsigned int op,
		       struct tpu_plan_ref ref, struct tpu_box_at *at);

/* The region @at covers, for the debug mode's hazard checks. */
void tpu_window_region(const struct tpu_core *core, const struct tpu_box_at *at,
		       bool write, struct tpu_region *r);

/* The 2-D ref of a contiguous VMEM window (its plan's body_ok). */
struct tpu_ref2d tpu_window_ref2d(const struct tpu_core *core,
				  const struct tpu_box_at *at);

/*
 * Host memory behind @at's base: element (0, ...) at *@p and each base
 * dimension's stride in elements. -1 when the base has no memory (a
 * model-only run, an input block not fetched).
 */
int tpu_window_memory(const struct tpu_core *core, const struct tpu_box_at *at,
		      uint8_t **p, uint64_t *stride);

#endif /* TPU_WINDOW_H */
