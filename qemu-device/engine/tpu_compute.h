/* SPDX-License-Identifier: MIT */
/*
 * Compute queue descriptors: fetch a grid job and its buffer table from
 * guest memory, run it on the engine, write its report back.
 */
#ifndef TPU_COMPUTE_H
#define TPU_COMPUTE_H

#include "tpu_desc_result.h"
#include "tpu_engine.h"
#include "tpu_guest_mem.h"
#include "tpu_hw.h"
#include "tpu_job.h"

/* The uAPI report of an engine result. */
void tpu_job_report_fill(const struct tpu_job_result *res,
			 struct tpu_job_report *report);

/*
 * Execute @d. @res->status is TPU_STATUS_OK, TPU_STATUS_JOB_FAILED (the
 * report written to d->report_addr says why), or a descriptor-level error
 * (BAD_DESC, HBM_RANGE with the slot as detail, DMA_FAULT) when no report
 * could be written, or TPU_STATUS_ABORTED once @abort stopped it. @res->bytes
 * counts HBM bytes the job moved.
 */
void tpu_compute_run(struct tpu_engine *engine,
		     const struct tpu_compute_desc *d, uint8_t *hbm,
		     uint64_t hbm_size, const struct tpu_guest_mem *gm,
		     const atomic_bool *abort, struct tpu_desc_result *res);

#endif /* TPU_COMPUTE_H */
