/* SPDX-License-Identifier: MIT */
/*
 * Trace records (tpu_trace.h) as Chrome / Perfetto trace-event JSON, one
 * file for any number of jobs: load it in ui.perfetto.dev or
 * chrome://tracing.
 *
 * Process 1, "device (modeled chip time)": a "job" track with each job's
 * launch and its whole modeled time, then per core the tracks step, DMA
 * in, MXU, vector unit, DMA out and bubble. Jobs follow each other in
 * modeled time. Process 2, "host (wall clock)": each job's run on the
 * host and per core the wall time of each step, at their real offsets
 * from the trace's start. Modeled and wall time never share a process.
 * Times are microseconds with picosecond decimals.
 */
#ifndef TPU_TRACE_JSON_H
#define TPU_TRACE_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tpu_model.h"
#include "tpu_trace_sink.h"

#define TPU_TRACE_PID_DEVICE	1
#define TPU_TRACE_PID_HOST	2

struct tpu_trace_json {
	FILE *f;
	uint64_t jobs;
	uint64_t model_at_ps;	/* where the next job starts, modeled */
	uint64_t host_t0_ns;	/* CLOCK_MONOTONIC at open */
	bool tracks_named[TPU_MAX_CORES];
};

/* One job's summary, as its report gives it. */
struct tpu_trace_job {
	const char *name;		/* NULL: "job N" */
	const struct tpu_model_stats *model;	/* the job's (tpu_model_job) */
	uint64_t launch_ps;		/* the config's launch cost */
	bool host;			/* the records include TPU_TRACE_HOST */
	uint64_t host_start_ns;		/* CLOCK_MONOTONIC at the engine's start */
	uint64_t host_wall_ns;		/* the engine's wall time for the job */
};

/* Create @path and write the header. 0, or -errno. */
int tpu_trace_json_open(struct tpu_trace_json *j, const char *path);

/* Append @job's events from @log. */
void tpu_trace_json_job(struct tpu_trace_json *j, const struct tpu_trace_log *log,
			const struct tpu_trace_job *job);

/* Finish the file and close it. 0, or -errno if anything failed to write. */
int tpu_trace_json_close(struct tpu_trace_json *j);

#endif /* TPU_TRACE_JSON_H */
