// SPDX-License-Identifier: MIT
/*
 * Window checks: a struct tpu_job_window (ref.at[pl.ds(start, size), i])
 * decoded against the ref it slices, with what the engine and the op
 * checks need derived once: the base's extents, the window's bytes, and
 * whether the body can use it as a 2-D ref (a contiguous VMEM slice).
 */
#include "tpu_check.h"
#include "tpu_dtype.h"

/* The base's space, dtype, rank and extents; -1 if it cannot be sliced. */
static int window_base(const struct tpu_plan *plan, unsigned int i,
		       struct tpu_plan_window *w, struct tpu_job_result *res)
{
	if (w->base.kind == TPU_REF_OPERAND && w->base.index < plan->num_operands) {
		const struct tpu_plan_operand *o = &plan->operand[w->base.index];
		bool whole = o->role == TPU_ROLE_SCALAR_PREFETCH ||
			     o->space == TPU_MEM_ANY;

		/* scalar prefetch: its SMEM array; ANY: its HBM array */
		w->space = o->role == TPU_ROLE_SCALAR_PREFETCH ? TPU_MEM_SMEM :
			   o->space;
		w->dtype = o->dtype;
		w->rank = o->rank;
		for (unsigned int d = 0; d < o->rank; d++)
			w->extent[d] = whole ? o->shape[d] : o->block[d];
		return 0;
	}
	if (w->base.kind == TPU_REF_SCRATCH && w->base.index < plan->num_scratch) {
		const struct tpu_plan_scratch *s = &plan->scratch[w->base.index];

		if (s->space >= TPU_MEM_SEM_DMA)
			return tpu_check_error(res, "window %u: base scratch %u holds semaphores, which have no data to slice",
					       i, w->base.index);
		w->space = s->space;
		w->dtype = s->dtype;
		w->rank = s->rank;
		for (unsigned int d = 0; d < s->rank; d++)
			w->extent[d] = s->shape[d];
		return 0;
	}
	return tpu_check_error(res, "window %u: base (kind %u, index %u) is not an operand or scratch of the job",
			       i, w->base.kind, w->base.index);
}

/*
 * The body sees a VMEM window as a 2-D ref when its rows are a run of the
 * base's rows, evenly strided: every dimension after the first unsqueezed
 * one unsqueezed, and whole but for the last (the columns: x.at[:,
 * pl.ds(128, 128)] is rows of 128 a base row apart). Squeezed dimensions
 * have size 1, so the products are the same.
 */
static void derive_body_ref(struct tpu_plan_window *w)
{
	unsigned int last = w->rank - 1, d = 0;

	w->body_ok = w->space == TPU_MEM_VMEM;
	for (d = 0; d <= last; d++)
		if (w->stride[d] > 1)
			w->body_ok = false;	/* strided: copies only */
	d = 0;
	while (d < last && (w->squeeze >> d & 1))
		d++;
	for (d++; d <= last; d++)
		if ((w->squeeze >> d & 1) ||
		    (d < last && w->size[d] != w->extent[d]))
			w->body_ok = false;
	w->cols = w->size[last];
	w->rows = (int64_t)(w->elems / w->size[last]);
}

int tpu_check_window(struct tpu_plan *plan, unsigned int i,
		     const struct tpu_job_window *raw, struct tpu_job_result *res)
{
	struct tpu_plan_window *w = &plan->window[i];
	int ret;

	*w = (struct tpu_plan_window){
		.base = { raw->base.kind, raw->base.index },
		.squeeze = raw->squeeze,
		.start = tpu_check_decode_prog(&raw->start),
	};
	if (raw->reserved0 || raw->start.reserved)
		return tpu_check_error(res, "window %u: reserved fields must be zero", i);
	ret = window_base(plan, i, w, res);
	if (ret)
		return ret;
	if (w->squeeze >> w->rank)
		return tpu_check_error(res, "window %u: squeeze %#x has bits at or beyond the base's rank %u",
				       i, w->squeeze, w->rank);
	w->elems = 1;
	for (unsigned int d = 0; d < TPU_JOB_MAX_RANK; d++) {
		w->size[d] = le32(raw->size[d]);
		w->stride[d] = raw->stride[d] ? raw->stride[d] : 1;
		if (d >= w->rank) {
			if (w->size[d] || w->stride[d] > 1)
				return tpu_check_error(res, "window %u: size[%u] and stride[%u] must be zero beyond rank %u",
						       i, d, d, w->rank);
			continue;
		}
		if ((w->squeeze >> d & 1) && (w->size[d] != 1 || w->stride[d] > 1))
			return tpu_check_error(res, "window %u: size[%u] %u, stride %u: dimension %u is squeezed (indexed), its size is 1 and it has no stride",
					       i, d, w->size[d], w->stride[d], d);
		/* the span start .. start + (size - 1) * stride fits the base */
		if (w->size[d] < 1 ||
		    (uint64_t)(w->size[d] - 1) * w->stride[d] + 1 > w->extent[d])
			return tpu_check_error(res, "window %u: size[%u] %u with stride %u: must span 1 to the base's extent %llu",
					       i, d, w->size[d], w->stride[d],
					       (unsigned long long)w->extent[d]);
		w->elems *= w->size[d];
	}
	w->bytes = w->elems * tpu_dtype_size(w->dtype);
	derive_body_ref(w);
	if (!w->start.len)
		return 0;
	/* its users' loop depth is checked where they name it (tpu_check_op) */
	ret = tpu_check_prog(plan, TPU_JOB_MAX_LOOP_DEPTH, w->start, w->rank,
			     res, "window", i, "start");
	if (ret)
		return ret;
	w->loop_need = (uint8_t)tpu_scalar_loop_need(&plan->insn[w->start.offset],
						     w->start.len);
	return 0;
}

bool tpu_plan_ref_box(const struct tpu_plan *plan, struct tpu_plan_ref r,
		      struct tpu_plan_box *box)
{
	struct tpu_plan_window w = { .base = r };

	*box = (struct tpu_plan_box){ .window = -1 };
	if (r.kind == TPU_REF_WINDOW) {
		if (r.index >= plan->num_windows)
			return false;
		w = plan->window[r.index];
		box->window = r.index;
	} else {
		struct tpu_job_result res;	/* a plain ref: all of its base */

		if (window_base(plan, 0, &w, &res))
			return false;
	}
	box->base = w.base;
	box->space = w.space;
	box->dtype = w.dtype;
	box->rank = w.rank;
	box->squeeze = w.squeeze;
	box->start = w.start;
	box->elems = 1;
	for (unsigned int d = 0; d < w.rank; d++) {
		box->extent[d] = w.extent[d];
		box->size[d] = box->window < 0 ? w.extent[d] : w.size[d];
		box->stride[d] = box->window < 0 ? 1 : w.stride[d];
		if (__builtin_mul_overflow(box->elems, box->size[d], &box->elems))
			box->elems = UINT64_MAX;	/* no array is that big */
	}
	if (__builtin_mul_overflow(box->elems, tpu_dtype_size(box->dtype),
				   &box->bytes))
		box->bytes = UINT64_MAX;
	return true;
}
