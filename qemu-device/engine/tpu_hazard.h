/* SPDX-License-Identifier: MIT */
/*
 * Debug mode's hazard tracker: a job-wide table per output operand records
 * which parallel iteration owns each block and whether it was written back,
 * so that two cores writing the same output block, or a block revisited
 * after its write-back, fail the job with TPU_JOB_ERR_HAZARD instead of
 * giving a silent wrong answer.
 */
#ifndef TPU_HAZARD_H
#define TPU_HAZARD_H

#include <stdint.h>

#include "tpu_core.h"

/* The owner tables of @run's output operands (0, or -1 failing @res). */
int tpu_hazard_tables_alloc(struct tpu_run *run, struct tpu_job_result *res);
void tpu_hazard_tables_free(struct tpu_run *run);

/* The first step of a visit to output block @idx of operand @i claims it. */
int tpu_hazard_claim(struct tpu_core *core, unsigned int i, const int64_t *idx,
		     uint64_t pflat);

/* A later step of the visit: it must belong to the same parallel iteration. */
int tpu_hazard_check_owner(struct tpu_core *core, unsigned int i,
			   const int64_t *idx, uint64_t pflat);

/* The block was written back: the visit is over. */
void tpu_hazard_close(struct tpu_core *core, unsigned int i,
		      const int64_t *idx);

#endif /* TPU_HAZARD_H */
