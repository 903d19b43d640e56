/* SPDX-License-Identifier: MIT */
/*
 * Timeline traces: what each core of a job did, step by step, as the
 * fixed-size records of uapi/tpu_trace.h. Modeled chip time comes from the
 * timing model itself (tpu_model.c emits each interval as it closes it, so
 * a trace shows the schedule the job's report sums up, not a
 * re-derivation); the host's wall time of each step comes from the
 * engine's pipeline. tpu_trace_json.h
 * turns the records into Chrome / Perfetto trace-event JSON.
 */
#ifndef TPU_TRACE_SINK_H
#define TPU_TRACE_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpu_params.h"
#include "tpu_trace.h"

/* Where records go. @emit may be called from each core's thread at once. */
struct tpu_trace_sink {
	void (*emit)(void *ctx, const struct tpu_trace_record *r);
	void *ctx;
};

/* CLOCK_MONOTONIC in nanoseconds: the host lane's clock. */
uint64_t tpu_trace_now_ns(void);

/* Seconds to whole picoseconds, rounded as the job's report rounds. */
uint64_t tpu_trace_ps(double s);

/*
 * Emit a record on @lane of @core for [@start_s, @end_s); empty intervals
 * that move no bytes are dropped, except on TPU_TRACE_STEP and
 * TPU_TRACE_HOST (one record per step each). @sink NULL: nothing.
 */
void tpu_trace_emit(const struct tpu_trace_sink *sink, unsigned int core,
		    enum tpu_trace_lane lane, uint64_t step, double start_s,
		    double end_s, uint64_t bytes);

/* The lane's name in a trace ("DMA in", "MXU"). */
const char *tpu_trace_lane_name(enum tpu_trace_lane lane);

/*
 * A sink that keeps the records in memory, one array per core, so the
 * cores' threads never share one. tpu_trace_log_init() points @sink at it.
 */
struct tpu_trace_log {
	struct tpu_trace_sink sink;
	struct tpu_trace_record *rec[TPU_MAX_CORES];
	size_t count[TPU_MAX_CORES], cap[TPU_MAX_CORES];
	bool lost[TPU_MAX_CORES];	/* out of memory: records dropped */
};

void tpu_trace_log_init(struct tpu_trace_log *log);
/* Forget the records, keep the memory (between jobs). */
void tpu_trace_log_clear(struct tpu_trace_log *log);
void tpu_trace_log_free(struct tpu_trace_log *log);
bool tpu_trace_log_lost(const struct tpu_trace_log *log);

#endif /* TPU_TRACE_SINK_H */
