// SPDX-License-Identifier: MIT
/*
 * In-bounds input blocks are not copied: the ref points into HBM with the
 * array's row stride, which reads the same values a copy would.
 */
#include <string.h>

#include "tpu_block.h"
#include "tpu_core_fail.h"
#include "tpu_panels.h"
#include "tpu_poison.h"
#include "tpu_prefetch.h"
#include "tpu_vmem.h"

enum span_fault { SPAN_OK, SPAN_OUTSIDE_ARRAY, SPAN_OUTSIDE_SLOT };

static enum span_fault block_span(const struct tpu_core *core,
				  const struct tpu_plan_operand *o,
				  const int64_t *idx, struct tpu_block_span *sp)
{
	uint64_t first = 0, last = 0, es = tpu_dtype_size(o->dtype);

	bool empty = false;

	sp->full = true;
	for (unsigned int d = 0; d < o->rank; d++) {
		uint64_t room;

		if (idx[d] < 0 || (uint64_t)idx[d] >= o->nblocks[d])
			return SPAN_OUTSIDE_ARRAY;
		sp->lead[d] = 0;
		if (o->element_dims >> d & 1) {
			/* an element offset into the array padded by element_pad */
			uint64_t pad = o->element_pad[d];

			sp->lead[d] = pad > (uint64_t)idx[d] ? pad - (uint64_t)idx[d] : 0;
			sp->start[d] = (uint64_t)idx[d] + sp->lead[d] - pad;
			/* a block all in the padding holds only that much of it */
			if (sp->lead[d] > o->block[d])
				sp->lead[d] = o->block[d];
		} else {
			sp->start[d] = (uint64_t)idx[d] * o->block[d];
		}
		room = sp->lead[d] < o->block[d] ? o->block[d] - sp->lead[d] : 0;
		sp->valid[d] = o->shape[d] - sp->start[d];
		if (sp->valid[d] > room)
			sp->valid[d] = room;
		if (sp->lead[d] || sp->valid[d] < o->block[d])
			sp->full = false;
		empty |= !sp->valid[d];
		first += sp->start[d] * o->stride[d];
		last += (sp->start[d] + sp->valid[d] - 1) * o->stride[d];
	}
	if (empty) {	/* all padding: no byte of HBM */
		sp->first = sp->end = o->offset;
		return SPAN_OK;
	}
	sp->first = o->offset + first * es;
	sp->end = o->offset + (last + 1) * es;
	if (sp->end > core->run->slots[o->slot].size)
		return SPAN_OUTSIDE_SLOT;
	return SPAN_OK;
}

int tpu_block_locate(struct tpu_core *core, unsigned int i, const int64_t *idx,
		     uint64_t step, struct tpu_block_span *sp)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];
	enum span_fault f = block_span(core, o, idx, sp);
	char b[96], n[96];

	if (f == SPAN_OK)
		return 0;
	tpu_format_index(b, sizeof(b), idx, o->rank);
	if (f == SPAN_OUTSIDE_ARRAY) {
		tpu_format_index(n, sizeof(n), (const int64_t *)o->nblocks,
				 o->rank);
		tpu_job_fail(&core->res, TPU_JOB_ERR_BLOCK_OOB,
			     "operand %u: block (%s) at step %llu outside the array's (%s) blocks",
			     i, b, (unsigned long long)step, n);
	} else {
		tpu_job_fail(&core->res, TPU_JOB_ERR_BUFFER,
			     "operand %u: block (%s) at step %llu ends at byte %llu of slot %u (%llu bytes)",
			     i, b, (unsigned long long)step,
			     (unsigned long long)sp->end, o->slot,
			     (unsigned long long)core->run->slots[o->slot].size);
	}
	tpu_core_fail_block(core, step, i, idx, o->rank);
	return -1;
}

/*
 * HBM address of block row @r (a row of the flattened 2-D block) or NULL
 * when the row lies past the array's edge.
 */
static uint8_t *hbm_row(struct tpu_core *core, const struct tpu_plan_operand *o,
			const struct tpu_block_span *sp, int64_t r)
{
	uint64_t off = 0, es = tpu_dtype_size(o->dtype);

	for (int d = o->rank - 2; d >= 0; d--) {
		uint64_t c = (uint64_t)r % o->block[d];

		r /= o->block[d];
		if (c < sp->lead[d] || c - sp->lead[d] >= sp->valid[d])
			return NULL;
		off += (sp->start[d] + c - sp->lead[d]) * o->stride[d];
	}
	off += sp->start[o->rank - 1];
	return core->run->hbm + core->run->slots[o->slot].offset + o->offset +
	       off * es;
}

/*
 * Rows of the block are equally spaced in HBM at @p and its elements are
 * aligned for their type: it can be viewed in place. An operand's offset
 * may be any byte, and the ops load elements through typed pointers.
 */
static bool viewable(const struct tpu_plan_operand *o, const uint8_t *p)
{
	if ((uintptr_t)p % tpu_dtype_size(o->dtype))
		return false;
	for (int d = 0; d + 2 < o->rank; d++)
		if (o->block[d] != 1)
			return false;
	return true;
}

void tpu_block_prefetch(struct tpu_core *core, unsigned int i,
			const int64_t *idx)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];
	uint64_t es = tpu_dtype_size(o->dtype), rows = 1;
	struct tpu_block_span sp;
	const uint8_t *first;
	const void *packed;
	size_t bytes;

	/* a bad index fails the step that uses it, not this one */
	if (block_span(core, o, idx, &sp) != SPAN_OK)
		return;
	first = core->run->hbm + core->run->slots[o->slot].offset + sp.first;
	if (!viewable(o, first))
		return;
	/* kept packed: the GEMM reads that, one contiguous run */
	packed = tpu_panels_find(first, &bytes);
	if (packed) {
		tpu_prefetch_rows(packed, 1, bytes, 0);
		return;
	}
	for (unsigned int d = 0; d + 1 < o->rank; d++)
		rows *= sp.valid[d];
	tpu_prefetch_rows(first, rows, sp.valid[o->rank - 1] * es,
			  o->rank >= 2 ? o->stride[o->rank - 2] * es : 0);
}

/* @n elements of a block's padding: zeros, or poison a kernel must not read. */
static void pad_fill(struct tpu_core *core, const struct tpu_plan_operand *o,
		     uint8_t *p, uint64_t n)
{
	if (core->run->debug)
		tpu_poison_fill(p, o->dtype, n);
	else
		memset(p, 0, n * tpu_dtype_size(o->dtype));
}

int tpu_block_fetch(struct tpu_core *core, unsigned int i,
		    const struct tpu_block_span *sp)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];
	uint64_t es = tpu_dtype_size(o->dtype);
	uint64_t valid_cols = sp->valid[o->rank - 1];
	uint8_t *first = core->run->hbm + core->run->slots[o->slot].offset + sp->first;
	uint8_t *buf;

	/* an output's block is written in its buffer: never a view of HBM */
	if (sp->full && !core->run->debug && o->space == TPU_MEM_VMEM &&
	    o->role == TPU_ROLE_INPUT && viewable(o, first)) {
		uint64_t ld = o->rank >= 2 ? o->stride[o->rank - 2] : (uint64_t)o->cols;

		core->block[i] = (struct tpu_ref2d){ first, o->rows, o->cols,
						     (int64_t)ld, o->dtype };
		return 0;
	}
	if (!core->block_buf[i]) {
		core->block_buf[i] = tpu_vmem_get(core, i, o->block_bytes);
		if (!core->block_buf[i])
			return -1;
	}
	buf = core->block_buf[i];
	for (int64_t r = 0; r < o->rows; r++) {
		uint8_t *dst = buf + r * o->cols * es;
		const uint8_t *src = hbm_row(core, o, sp, r);
		uint64_t lead = src ? sp->lead[o->rank - 1] : 0;
		uint64_t n = src ? valid_cols : 0;

		if (n)
			memcpy(dst + lead * es, src, n * es);
		pad_fill(core, o, dst, lead);
		pad_fill(core, o, dst + (lead + n) * es, (uint64_t)o->cols - lead - n);
	}
	core->block[i] = (struct tpu_ref2d){ buf, o->rows, o->cols, o->cols,
					     o->dtype };
	return 0;
}

void tpu_block_write_back(struct tpu_core *core, unsigned int i,
			  const struct tpu_block_span *sp)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];
	uint64_t es = tpu_dtype_size(o->dtype);
	const uint8_t *buf = core->block_buf[i];

	for (int64_t r = 0; r < o->rows; r++) {
		uint8_t *dst = hbm_row(core, o, sp, r);

		if (dst)
			memcpy(dst, buf + (r * o->cols + sp->lead[o->rank - 1]) * es,
			       sp->valid[o->rank - 1] * es);
	}
}
