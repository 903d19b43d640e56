// SPDX-License-Identifier: MIT
#include "tpu_compute.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PS_PER_S 1e12

void tpu_job_report_fill(const struct tpu_job_result *res,
			 struct tpu_job_report *report)
{
	const struct tpu_job_stats *s = &res->stats;

	memset(report, 0, sizeof(*report));
	report->error = res->error;
	report->steps = s->steps;
	report->blocks_fetched = s->blocks_fetched;
	report->blocks_skipped = s->blocks_skipped;
	report->blocks_written = s->blocks_written;
	report->hbm_bytes_in = s->hbm_bytes_in;
	report->hbm_bytes_out = s->hbm_bytes_out;
	report->mxu_flops = s->mxu_flops;
	report->wall_ns = s->wall_ns;
	report->model_time_ps = (uint64_t)(s->model.time_s * PS_PER_S + 0.5);
	report->model_mxu_busy_ps = (uint64_t)(s->model.mxu_busy_s * PS_PER_S + 0.5);
	report->model_dma_busy_ps = (uint64_t)(s->model.dma_busy_s * PS_PER_S + 0.5);
	report->model_bubble_ps = (uint64_t)(s->model.bubble_s * PS_PER_S + 0.5);
	report->cores_used = s->cores_used;
	report->copies = (uint32_t)(s->copies > UINT32_MAX ? UINT32_MAX : s->copies);
	report->loop_trips = s->loop_trips;
	snprintf(report->message, sizeof(report->message), "%s", res->message);
}

/* The buffer table, each slot checked to lie inside HBM. */
static int read_slots(const struct tpu_compute_desc *d, uint64_t hbm_size,
		      const struct tpu_guest_mem *gm,
		      struct tpu_buffer_slot *slots, struct tpu_desc_result *res)
{
	struct tpu_hw_slot hw[TPU_JOB_MAX_SLOTS];
	uint32_t i;

	if (d->slot_count &&
	    tpu_guest_read(gm, d->slots_addr, hw, d->slot_count * sizeof(hw[0]))) {
		tpu_desc_fail(res, TPU_STATUS_DMA_FAULT, 0);
		return -1;
	}
	for (i = 0; i < d->slot_count; i++) {
		if (hw[i].hbm_offset > hbm_size ||
		    hw[i].size > hbm_size - hw[i].hbm_offset) {
			tpu_desc_fail(res, TPU_STATUS_HBM_RANGE, i);
			return -1;
		}
		slots[i].offset = hw[i].hbm_offset;
		slots[i].size = hw[i].size;
	}
	return 0;
}

void tpu_compute_run(struct tpu_engine *engine,
		     const struct tpu_compute_desc *d, uint8_t *hbm,
		     uint64_t hbm_size, const struct tpu_guest_mem *gm,
		     const atomic_bool *abort, struct tpu_desc_result *res)
{
	struct tpu_buffer_slot slots[TPU_JOB_MAX_SLOTS];
	struct tpu_job_result *result;
	struct tpu_job_report report;
	void *job;

	memset(res, 0, sizeof(*res));
	if (d->op != TPU_COMPUTE_OP_RUN || d->reserved0 || d->reserved[0] ||
	    d->reserved[1] || !d->job_size || d->job_size > TPU_JOB_MAX_SIZE ||
	    d->slot_count > TPU_JOB_MAX_SLOTS) {
		tpu_desc_fail(res, TPU_STATUS_BAD_DESC, 0);
		return;
	}
	if (read_slots(d, hbm_size, gm, slots, res))
		return;
	job = malloc(d->job_size);
	result = malloc(sizeof(*result));
	if (!job || !result || tpu_guest_read(gm, d->job_addr, job, d->job_size)) {
		tpu_desc_fail(res, TPU_STATUS_DMA_FAULT, 0);
		goto out;
	}

	tpu_engine_run_abortable(engine, job, d->job_size, hbm, hbm_size,
				 slots, d->slot_count, 0, abort, result);
	tpu_job_report_fill(result, &report);
	if (tpu_guest_write(gm, d->report_addr, &report, sizeof(report))) {
		tpu_desc_fail(res, TPU_STATUS_DMA_FAULT, 1);
		goto out;
	}
	res->bytes = report.hbm_bytes_in + report.hbm_bytes_out;
	if (report.error.code == TPU_JOB_ERR_ABORTED)
		tpu_desc_fail(res, TPU_STATUS_ABORTED, report.error.code);
	else if (report.error.code)
		tpu_desc_fail(res, TPU_STATUS_JOB_FAILED, report.error.code);
out:
	free(result);
	free(job);
}
