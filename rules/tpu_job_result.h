/* SPDX-License-Identifier: MIT */
/*
 * A job's outcome as the device's rules describe it: where it failed, a
 * message naming the field, operand, op and step, and its statistics
 * (counted by the engine, modeled by tpu_model). Filled by the decoder
 * (tpu_job_check.c) before a job runs and by the engine while it runs.
 */
#ifndef TPU_JOB_RESULT_H
#define TPU_JOB_RESULT_H

#include <stdint.h>

#include "tpu_job.h"
#include "tpu_model.h"

/*
 * Per-job statistics. Block counts and bytes are per core schedule: a block
 * is skipped when its index equals the previous step's on the same core, so
 * they may change with the core count (the results do not).
 */
struct tpu_job_stats {
	uint64_t steps;			/* grid steps run */
	uint64_t blocks_fetched;	/* input blocks brought into VMEM */
	uint64_t blocks_skipped;	/* input blocks reused from the last step */
	uint64_t blocks_written;	/* output blocks written back */
	uint64_t hbm_bytes_in;		/* in-bounds bytes of fetched blocks */
	uint64_t hbm_bytes_out;		/* in-bounds bytes written back */
	uint64_t mxu_flops;		/* 2*m*n*k of each dot run, padding incl. */
	uint64_t copies;		/* async copies started (COPY_START) */
	uint64_t loop_trips;		/* TPU_OP_LOOP bodies run, every loop */
	uint64_t wall_ns;		/* host time of tpu_engine_run */
	unsigned int cores_used;
	struct tpu_model_stats model;	/* modeled v5e figures, never wall time */
};

struct tpu_job_result {
	struct tpu_job_error_info error;	/* error.code 0 on success */
	char message[256];			/* names the field, operand, step */
	struct tpu_job_stats stats;
};

/* Record @code and a message in @res; returns @code. */
int tpu_job_fail(struct tpu_job_result *res, unsigned int code,
		 const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Short name of an enum tpu_job_error, for messages. */
const char *tpu_job_error_name(unsigned int code);

#endif /* TPU_JOB_RESULT_H */
