/* SPDX-License-Identifier: MIT */
/*
 * How a core fails its job: the error goes into the core's result (after
 * tpu_job_fail() has set its code and message), with the step it happened
 * at, and the job's cores stop once past the lowest failing step.
 */
#ifndef TPU_CORE_FAIL_H
#define TPU_CORE_FAIL_H

#include <stddef.h>
#include <stdint.h>

#include "tpu_core.h"

/* The error is at @step. */
void tpu_core_fail_step(struct tpu_core *core, uint64_t step);

/* The error is at @step, on block @idx (of @rank dims) of operand @operand. */
void tpu_core_fail_block(struct tpu_core *core, uint64_t step,
			 unsigned int operand, const int64_t *idx,
			 unsigned int rank);

/* Fail the job with the scalar core's fault @f in @what @index. Returns -1. */
int tpu_core_fail_scalar(struct tpu_core *core, uint64_t step,
			 const char *what, unsigned int index,
			 const struct tpu_scalar_fault *f);

/* An SMEM array's elements (and a load's reach past them), for errors. */
void tpu_format_smem_extent(char *buf, size_t len, uint64_t elems,
			    uint64_t reach);

/* "1, 0, 3": a block or grid index, for error messages. */
void tpu_format_index(char *buf, size_t len, const int64_t *v, unsigned int n);

#endif /* TPU_CORE_FAIL_H */
