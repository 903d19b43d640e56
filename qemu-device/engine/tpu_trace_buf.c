// SPDX-License-Identifier: MIT
#include "tpu_trace_buf.h"

#include <endian.h>
#include <string.h>

static void buf_emit(void *ctx, const struct tpu_trace_record *r)
{
	struct tpu_trace_buf *b = ctx;
	uint64_t i = atomic_fetch_add_explicit(&b->count, 1, memory_order_relaxed);
	struct tpu_trace_record le = {
		.lane = htole16(r->lane), .core = htole16(r->core),
		.step = htole64(r->step), .start_ps = htole64(r->start_ps),
		.dur_ps = htole64(r->dur_ps), .bytes = htole64(r->bytes),
	};

	if (i < b->capacity)
		memcpy(b->base + sizeof(struct tpu_trace_header) + i * sizeof(le),
		       &le, sizeof(le));
}

void tpu_trace_buf_open(struct tpu_trace_buf *b, uint8_t *base, uint64_t size)
{
	b->sink = (struct tpu_trace_sink){ buf_emit, b };
	b->base = base;
	b->capacity = (size - sizeof(struct tpu_trace_header)) /
		      sizeof(struct tpu_trace_record);
	atomic_init(&b->count, 0);
	/* no magic until the job ends: a reader never takes a partial trace */
	memset(base, 0, sizeof(struct tpu_trace_header));
}

void tpu_trace_buf_close(struct tpu_trace_buf *b)
{
	struct tpu_trace_header h = {
		.magic = htole32(TPU_TRACE_MAGIC),
		.record_size = htole32(sizeof(struct tpu_trace_record)),
		.count = htole64(atomic_load(&b->count)),
	};

	memcpy(b->base, &h, sizeof(h));
}
