// SPDX-License-Identifier: MIT
#include <stdio.h>

#include "tpu_core_fail.h"
#include "tpu_window.h"

static int fail_oob(struct tpu_core *core, unsigned int op, unsigned int w,
		    const struct tpu_box_at *at, unsigned int d)
{
	const struct tpu_plan_box *b = &at->box;
	char base[32];
	struct tpu_job_error_info *e = &core->res.error;

	if (b->base.kind == TPU_REF_OPERAND)
		snprintf(base, sizeof(base), "operand %u", b->base.index);
	else
		snprintf(base, sizeof(base), "scratch %u", b->base.index);
	tpu_job_fail(&core->res, TPU_JOB_ERR_WINDOW_OOB,
		     "op %u: window %u at step %llu: dimension %u starts at %lld with size %llu%s%.0llu, outside its base %s (extent %llu)",
		     op, w, (unsigned long long)core->step, d,
		     (long long)at->start[d], (unsigned long long)b->size[d],
		     b->stride[d] > 1 ? " and stride " : "",
		     (unsigned long long)(b->stride[d] > 1 ? b->stride[d] : 0),
		     base, (unsigned long long)b->extent[d]);
	e->op = op;
	e->operand = b->base.kind == TPU_REF_OPERAND ? b->base.index : UINT32_MAX;
	for (unsigned int k = 0; k < TPU_JOB_MAX_RANK; k++)
		e->block[k] = k < b->rank ? at->start[k] : 0;
	e->need = w;
	e->limit = d;
	tpu_core_fail_step(core, core->step);
	return -1;
}

int tpu_window_resolve(struct tpu_core *core, unsigned int op,
		       struct tpu_plan_ref ref, struct tpu_box_at *at)
{
	const struct tpu_plan *plan = core->run->plan;
	const struct tpu_scalar_ctx ctx = { core->pid, core->smem, core->sems,
					    core->loop };
	const struct tpu_plan_box *b = &at->box;
	struct tpu_scalar_fault f;

	for (unsigned int d = 0; d < TPU_JOB_MAX_RANK; d++)
		at->start[d] = 0;
	/* the decoder checked every ref an op names */
	tpu_plan_ref_box(plan, ref, &at->box);
	if (b->window < 0 || !b->start.len)
		return 0;
	if (tpu_scalar_run(plan, b->start, &ctx, at->start, b->rank, &f)) {
		core->res.error.op = op;
		return tpu_core_fail_scalar(core, core->step, "window start of op",
					    op, &f);
	}
	for (unsigned int d = 0; d < b->rank; d++)
		if (at->start[d] < 0 ||
		    (uint64_t)at->start[d] > b->extent[d] - tpu_plan_box_span(b, d))
			return fail_oob(core, op, (unsigned int)b->window, at, d);
	return 0;
}

void tpu_window_region(const struct tpu_core *core, const struct tpu_box_at *at,
		       bool write, struct tpu_region *r)
{
	const struct tpu_plan *plan = core->run->plan;
	struct tpu_plan_ref base = at->box.base;

	/* an ANY output and the input it aliases are one array in HBM */
	if (base.kind == TPU_REF_OPERAND && plan->operand[base.index].alias)
		base.index = plan->operand[base.index].alias - 1;
	*r = (struct tpu_region){ .base = base, .rank = at->box.rank,
				  .write = write };
	for (unsigned int d = 0; d < at->box.rank; d++) {
		r->start[d] = at->start[d];
		r->size[d] = tpu_plan_box_span(&at->box, d);	/* strided: the hull */
	}
}

/* The base as a 2-D ref: the block in VMEM (or in place) or the scratch. */
static struct tpu_ref2d base_ref2d(const struct tpu_core *core,
				   struct tpu_plan_ref base)
{
	const struct tpu_plan_scratch *s;

	if (base.kind == TPU_REF_OPERAND)
		return core->block[base.index];
	s = &core->run->plan->scratch[base.index];
	return (struct tpu_ref2d){ core->scratch_buf[base.index], s->rows,
				   s->cols, s->cols, s->dtype };
}

struct tpu_ref2d tpu_window_ref2d(const struct tpu_core *core,
				  const struct tpu_box_at *at)
{
	const struct tpu_plan *plan = core->run->plan;
	const struct tpu_plan_window *w = &plan->window[at->box.window];
	struct tpu_ref2d r = base_ref2d(core, at->box.base);
	unsigned int last = at->box.rank - 1;
	uint64_t row0 = 0;

	/* contiguous: a run of the base's rows, or part of one row */
	for (unsigned int d = 0; d < last; d++)
		row0 = row0 * at->box.extent[d] + (uint64_t)at->start[d];
	if (r.p)
		r.p = (uint8_t *)r.p + (row0 * (uint64_t)r.ld +
					(uint64_t)at->start[last]) *
				       tpu_dtype_size(r.dtype);
	r.rows = w->rows;
	r.cols = w->cols;
	return r;
}

/* Strides of a dense row-major array of @rank dimensions @extent. */
static void dense_strides(const uint64_t *extent, unsigned int rank,
			  uint64_t *stride)
{
	uint64_t s = 1;

	for (int d = (int)rank - 1; d >= 0; d--) {
		stride[d] = s;
		s *= extent[d];
	}
}

int tpu_window_memory(const struct tpu_core *core, const struct tpu_box_at *at,
		      uint8_t **p, uint64_t *stride)
{
	const struct tpu_run *run = core->run;
	const struct tpu_plan_box *b = &at->box;
	const struct tpu_plan_operand *o;
	const struct tpu_plan_scratch *s;

	dense_strides(b->extent, b->rank, stride);
	if (b->base.kind == TPU_REF_SCRATCH) {
		s = &run->plan->scratch[b->base.index];
		*p = s->space == TPU_MEM_SMEM ?
		     (uint8_t *)(core->smem + s->smem_base) :
		     core->scratch_buf[b->base.index];
		return *p ? 0 : -1;
	}
	o = &run->plan->operand[b->base.index];
	if (o->role == TPU_ROLE_SCALAR_PREFETCH) {
		*p = (uint8_t *)(core->smem + o->smem_base);
	} else if (o->space == TPU_MEM_ANY) {
		if (!run->hbm)
			return -1;
		/* the array lies inside its slot (tpu_job_check_buffers) */
		*p = run->hbm + run->slots[o->slot].offset + o->offset;
		for (unsigned int d = 0; d < o->rank; d++)
			stride[d] = o->stride[d];
	} else {
		*p = core->block[b->base.index].p;
		/* an in-bounds input block read in place has the array's strides */
		if (*p && *p != core->block_buf[b->base.index])
			for (unsigned int d = 0; d < o->rank; d++)
				stride[d] = o->stride[d];
	}
	return *p ? 0 : -1;
}
