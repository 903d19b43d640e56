// SPDX-License-Identifier: MIT
/*
 * The DMA queue's descriptors: host <-> HBM through scatter-gather lists in
 * guest memory, HBM <-> HBM, and HBM fills, in chunks so a reset can stop
 * them.
 */
#include "tpu_copy.h"
#include "tpu_stream.h"

#include <string.h>

/* Copies are split so that a reset never waits long for the worker. */
#define COPY_CHUNK	(4u << 20)

static bool hbm_range_ok(uint64_t off, uint64_t len, uint64_t hbm_size)
{
	return off <= hbm_size && len <= hbm_size - off;
}

static bool aborted(const atomic_bool *abort)
{
	return abort && atomic_load_explicit(abort, memory_order_relaxed);
}

/*
 * Walks an SG list in guest memory, one segment read at a time, following
 * links. Every segment holds at least one data entry, so a list that links
 * back on itself still ends after sg_count data entries.
 */
struct sg_reader {
	const struct tpu_guest_mem *gm;
	const atomic_bool *abort;	/* polled at each segment */
	uint64_t first;		/* the list's address */
	uint32_t count;		/* data entries */
	uint64_t addr;		/* the next entry's address */
	uint32_t seen;		/* data entries returned so far */
	uint32_t pos;		/* next entry in batch */
	uint32_t filled;
	struct tpu_sg_entry batch[TPU_SG_SEGMENT_SIZE / sizeof(struct tpu_sg_entry)];
};

static void sg_rewind(struct sg_reader *r)
{
	r->addr = r->first;
	r->seen = 0;
	r->pos = r->filled = 0;
}

/*
 * Refill from r->addr up to the end of its 4 KiB segment: 0, or a
 * TPU_STATUS_*. A list of 2^24 entries (or one that loops) takes a while
 * to walk, so a reset is looked for at each segment.
 */
static uint32_t sg_refill(struct sg_reader *r)
{
	uint64_t room = TPU_SG_SEGMENT_SIZE - r->addr % TPU_SG_SEGMENT_SIZE;
	uint32_t n = room / sizeof(struct tpu_sg_entry);

	if (aborted(r->abort))
		return TPU_STATUS_ABORTED;
	if (tpu_guest_read(r->gm, r->addr, r->batch, n * sizeof(r->batch[0])))
		return TPU_STATUS_DMA_FAULT;
	r->pos = 0;
	r->filled = n;
	return 0;
}

/* The next data entry: 0, or a TPU_STATUS_* with r->seen as the detail. */
static uint32_t sg_next(struct sg_reader *r, struct tpu_sg_entry *e)
{
	bool linked = false;
	uint32_t status;

	for (;;) {
		if (r->pos == r->filled && (status = sg_refill(r)))
			return status;
		*e = r->batch[r->pos++];
		r->addr += sizeof(*e);
		if (e->len != TPU_SG_LINK)
			break;
		/* A link must follow a data entry: no empty segments. */
		if (linked || e->addr % 16)
			return TPU_STATUS_BAD_SG;
		linked = true;
		r->addr = e->addr;
		r->pos = r->filled = 0;
	}
	if (!e->len)
		return TPU_STATUS_BAD_SG;
	r->seen++;
	return 0;
}

/* The list must be readable, with non-zero entries summing to @length. */
static bool sg_check(struct sg_reader *r, uint64_t length,
		     struct tpu_desc_result *res)
{
	uint64_t total = 0;
	uint32_t status;

	if (!r->count || r->count > TPU_DMA_MAX_SG || r->first % 16) {
		tpu_desc_fail(res, TPU_STATUS_BAD_SG, 0);
		return false;
	}
	sg_rewind(r);
	while (r->seen < r->count) {
		struct tpu_sg_entry e;

		status = sg_next(r, &e);
		if (!status && e.len > length - total)
			status = TPU_STATUS_BAD_SG;
		if (status) {
			tpu_desc_fail(res, status, r->seen);
			return false;
		}
		total += e.len;
	}
	if (total != length) {
		tpu_desc_fail(res, TPU_STATUS_BAD_SG, r->count);
		return false;
	}
	return true;
}

static void copy_sg(struct sg_reader *r, uint8_t *hbm, bool to_guest,
		    bool stream, const atomic_bool *abort,
		    struct tpu_desc_result *res)
{
	sg_rewind(r);
	while (r->seen < r->count) {
		struct tpu_sg_entry e;
		uint64_t done = 0;
		uint32_t status = sg_next(r, &e);

		if (status) {
			tpu_desc_fail(res, status, r->seen);
			return;
		}
		while (done < e.len) {
			uint64_t n = e.len - done < COPY_CHUNK ? e.len - done : COPY_CHUNK;

			if (aborted(abort)) {
				tpu_desc_fail(res, TPU_STATUS_ABORTED, r->seen - 1);
				return;
			}
			if (tpu_guest_xfer(r->gm, e.addr + done, hbm + res->bytes, n,
					   to_guest, stream)) {
				tpu_desc_fail(res, TPU_STATUS_DMA_FAULT, r->seen - 1);
				return;
			}
			done += n;
			res->bytes += n;
		}
	}
}

static void copy_hbm(uint8_t *dst, const uint8_t *src, uint64_t len,
		     const atomic_bool *abort, struct tpu_desc_result *res)
{
	/* Overlapping ranges: copy in the direction that reads before writing. */
	bool backwards = dst > src && dst < src + len;

	while (res->bytes < len) {
		uint64_t n = len - res->bytes < COPY_CHUNK ? len - res->bytes : COPY_CHUNK;
		uint64_t off = backwards ? len - res->bytes - n : res->bytes;

		if (aborted(abort)) {
			tpu_desc_fail(res, TPU_STATUS_ABORTED, 0);
			return;
		}
		memmove(dst + off, src + off, n);
		res->bytes += n;
	}
}

static void fill_hbm(uint8_t *dst, uint8_t pattern, uint64_t len,
		     const atomic_bool *abort, struct tpu_desc_result *res)
{
	while (res->bytes < len) {
		uint64_t n = len - res->bytes < COPY_CHUNK ? len - res->bytes : COPY_CHUNK;

		if (aborted(abort)) {
			tpu_desc_fail(res, TPU_STATUS_ABORTED, 0);
			return;
		}
		memset(dst + res->bytes, pattern, n);
		res->bytes += n;
	}
}

/*
 * A zero fill: the huge pages wholly inside [off, off + len) discarded,
 * the ends (and everything, if the discard fails) written.
 */
static void zero_hbm(uint8_t *hbm, uint64_t off, uint64_t len,
		     const struct tpu_hbm_discard *discard,
		     const atomic_bool *abort, struct tpu_desc_result *res)
{
	const uint64_t align = TPU_HBM_DISCARD_ALIGN;
	uintptr_t start = (uintptr_t)(hbm + off), end = start + len;
	uintptr_t mid = (start + align - 1) & ~(uintptr_t)(align - 1);
	uintptr_t mid_end = end & ~(uintptr_t)(align - 1);
	uint64_t head = mid - start;

	if (!discard || mid_end <= mid ||
	    discard->zero(discard->opaque, off + head, mid_end - mid)) {
		fill_hbm(hbm + off, 0, len, abort, res);
		return;
	}
	fill_hbm(hbm + off, 0, head, abort, res);
	if (res->status)
		return;
	/* The discarded middle is done: the same fill goes on from its end. */
	res->bytes = mid_end - start;
	fill_hbm(hbm + off, 0, len, abort, res);
}

void tpu_copy_run(const struct tpu_dma_desc *d, uint8_t *hbm,
		  uint64_t hbm_size, const struct tpu_guest_mem *gm,
		  const struct tpu_hbm_discard *discard,
		  const atomic_bool *abort, struct tpu_desc_result *res)
{
	bool uses_sg = d->op == TPU_DMA_OP_H2D || d->op == TPU_DMA_OP_D2H;

	memset(res, 0, sizeof(*res));
	if (d->reserved || (!uses_sg && (d->sg_count || d->sg_addr)) ||
	    (d->op != TPU_DMA_OP_D2D && d->hbm_offset2) ||
	    (d->op != TPU_DMA_OP_FILL && d->pattern)) {
		tpu_desc_fail(res, TPU_STATUS_BAD_DESC, 0);
		return;
	}
	if (!d->length) {
		tpu_desc_fail(res, TPU_STATUS_BAD_LENGTH, 0);
		return;
	}
	if (!hbm_range_ok(d->hbm_offset, d->length, hbm_size)) {
		tpu_desc_fail(res, TPU_STATUS_HBM_RANGE, 0);
		return;
	}

	switch (d->op) {
	case TPU_DMA_OP_H2D:
	case TPU_DMA_OP_D2H: {
		struct sg_reader r = {
			.gm = gm, .abort = abort, .first = d->sg_addr,
			.count = d->sg_count,
		};
		bool stream = d->length >= TPU_STREAM_MIN;

		if (sg_check(&r, d->length, res))
			copy_sg(&r, hbm + d->hbm_offset, d->op == TPU_DMA_OP_D2H,
				stream, abort, res);
		if (stream)
			tpu_stream_fence();	/* before the completion record */
		return;
	}
	case TPU_DMA_OP_D2D:
		if (!hbm_range_ok(d->hbm_offset2, d->length, hbm_size)) {
			tpu_desc_fail(res, TPU_STATUS_HBM_RANGE, 1);
			return;
		}
		copy_hbm(hbm + d->hbm_offset2, hbm + d->hbm_offset, d->length,
			 abort, res);
		return;
	case TPU_DMA_OP_FILL:
		if (!d->pattern)
			zero_hbm(hbm, d->hbm_offset, d->length, discard, abort, res);
		else
			fill_hbm(hbm + d->hbm_offset, (uint8_t)d->pattern,
				 d->length, abort, res);
		return;
	default:
		tpu_desc_fail(res, TPU_STATUS_BAD_DESC, 0);
		return;
	}
}
