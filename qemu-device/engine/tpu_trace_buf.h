/* SPDX-License-Identifier: MIT */
/*
 * A job's trace buffer (TPU_JOB_F_TRACE): the records of uapi/tpu_trace.h
 * written into the job's trace slot in HBM as the cores emit them, the
 * header when the job ends. The cores share one counter; records past the
 * buffer's end are counted, not written.
 */
#ifndef TPU_TRACE_BUF_H
#define TPU_TRACE_BUF_H

#include <stdatomic.h>
#include <stdint.h>

#include "tpu_trace_sink.h"

struct tpu_trace_buf {
	struct tpu_trace_sink sink;
	uint8_t *base;			/* the slot's bytes in HBM */
	uint64_t capacity;		/* records that fit after the header */
	_Atomic uint64_t count;		/* records emitted */
};

/* Start a trace in the @size bytes at @base (at least the header's). */
void tpu_trace_buf_open(struct tpu_trace_buf *b, uint8_t *base, uint64_t size);

/* Write the header: the magic and how many records the job emitted. */
void tpu_trace_buf_close(struct tpu_trace_buf *b);

#endif /* TPU_TRACE_BUF_H */
