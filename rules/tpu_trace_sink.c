// SPDX-License-Identifier: MIT
#include "tpu_trace_sink.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t tpu_trace_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t tpu_trace_ps(double s)
{
	return s > 0 ? (uint64_t)(s * 1e12 + 0.5) : 0;
}

void tpu_trace_emit(const struct tpu_trace_sink *sink, unsigned int core,
		    enum tpu_trace_lane lane, uint64_t step, double start_s,
		    double end_s, uint64_t bytes)
{
	/* Both ends rounded, so adjacent events tile without gaps. */
	uint64_t start = tpu_trace_ps(start_s), end = tpu_trace_ps(end_s);
	struct tpu_trace_record r = {
		.lane = (uint16_t)lane, .core = (uint16_t)core, .step = step,
		.start_ps = start, .dur_ps = end > start ? end - start : 0,
		.bytes = bytes,
	};

	if (!sink || (end <= start && !bytes && lane != TPU_TRACE_STEP &&
		      lane != TPU_TRACE_HOST))
		return;
	sink->emit(sink->ctx, &r);
}

const char *tpu_trace_lane_name(enum tpu_trace_lane lane)
{
	static const char *const names[TPU_TRACE_LANES] = {
		[TPU_TRACE_STEP] = "step",
		[TPU_TRACE_DMA_IN] = "DMA in",
		[TPU_TRACE_MXU] = "MXU",
		[TPU_TRACE_VECTOR] = "vector unit",
		[TPU_TRACE_DMA_OUT] = "DMA out",
		[TPU_TRACE_BUBBLE] = "bubble",
		[TPU_TRACE_HOST] = "host step",
	};

	return (unsigned int)lane < TPU_TRACE_LANES ? names[lane] : "?";
}

static void log_emit(void *ctx, const struct tpu_trace_record *r)
{
	struct tpu_trace_log *log = ctx;
	unsigned int c = r->core;

	if (c >= TPU_MAX_CORES)
		return;
	if (log->count[c] == log->cap[c]) {
		size_t cap = log->cap[c] ? 2 * log->cap[c] : 1024;
		struct tpu_trace_record *p = realloc(log->rec[c],
						     cap * sizeof(*p));

		if (!p) {
			log->lost[c] = true;
			return;
		}
		log->rec[c] = p;
		log->cap[c] = cap;
	}
	log->rec[c][log->count[c]++] = *r;
}

void tpu_trace_log_init(struct tpu_trace_log *log)
{
	memset(log, 0, sizeof(*log));
	log->sink.emit = log_emit;
	log->sink.ctx = log;
}

void tpu_trace_log_clear(struct tpu_trace_log *log)
{
	memset(log->count, 0, sizeof(log->count));
	memset(log->lost, 0, sizeof(log->lost));
}

void tpu_trace_log_free(struct tpu_trace_log *log)
{
	for (unsigned int c = 0; c < TPU_MAX_CORES; c++)
		free(log->rec[c]);
	tpu_trace_log_init(log);
}

bool tpu_trace_log_lost(const struct tpu_trace_log *log)
{
	for (unsigned int c = 0; c < TPU_MAX_CORES; c++)
		if (log->lost[c])
			return true;
	return false;
}
