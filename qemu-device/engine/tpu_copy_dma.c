// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpu_copy_dma.h"
#include "tpu_core_fail.h"
#include "tpu_semaphore.h"
#include "tpu_window.h"

/* Bytes moved between two polls of the abort flag. */
#define ABORT_POLL_BYTES	(16ull << 20)

static bool regions_overlap(const struct tpu_region *a, const struct tpu_region *b)
{
	if (a->base.kind != b->base.kind || a->base.index != b->base.index)
		return false;
	for (unsigned int d = 0; d < a->rank; d++)
		if ((uint64_t)a->start[d] >= (uint64_t)b->start[d] + b->size[d] ||
		    (uint64_t)b->start[d] >= (uint64_t)a->start[d] + a->size[d])
			return false;
	return true;
}

/* A read and a write, or two writes, of common bytes. */
static bool conflict(const struct tpu_region *a, const struct tpu_region *b)
{
	return (a->write || b->write) && regions_overlap(a, b);
}

/* Fail the job in op @n at this step with @code and the message. Returns -1. */
static int fail_op(struct tpu_core *core, unsigned int n, unsigned int code,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int fail_op(struct tpu_core *core, unsigned int n, unsigned int code,
		   const char *fmt, ...)
{
	char msg[sizeof(core->res.message)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	core->res.error.op = n;
	tpu_job_fail(&core->res, code, "%s", msg);
	tpu_core_fail_step(core, core->step);
	return -1;
}

static int hazard(struct tpu_core *core, unsigned int n,
		  const struct tpu_region *r, const struct tpu_inflight *c,
		  const struct tpu_region *cr)
{
	char name[24];

	if (r->base.kind == TPU_REF_OPERAND)
		snprintf(name, sizeof(name), "operand %u", r->base.index);
	else
		snprintf(name, sizeof(name), "scratch %u", r->base.index);
	return fail_op(core, n, TPU_JOB_ERR_HAZARD,
		       "step %llu: op %u %s %s while the async copy of op %u (started at step %llu) %s it: wait for the copy first",
		       (unsigned long long)core->step, n,
		       r->write ? "writes" : "reads", name, c->op,
		       (unsigned long long)c->step, cr->write ? "writes" : "reads");
}

int tpu_copy_hazard_op(struct tpu_core *core, unsigned int n,
		       const struct tpu_region *r)
{
	for (unsigned int k = 0; k < core->ninflight; k++) {
		const struct tpu_inflight *c = &core->inflight[k];

		if (conflict(r, &c->dst))
			return hazard(core, n, r, c, &c->dst);
		if (conflict(r, &c->src))
			return hazard(core, n, r, c, &c->src);
	}
	return 0;
}

int tpu_copy_hazard_block(struct tpu_core *core, unsigned int i,
			  const char *what)
{
	for (unsigned int k = 0; k < core->ninflight; k++) {
		const struct tpu_inflight *c = &core->inflight[k];

		if ((c->src.base.kind == TPU_REF_OPERAND && c->src.base.index == i) ||
		    (c->dst.base.kind == TPU_REF_OPERAND && c->dst.base.index == i &&
		     core->run->plan->operand[i].space != TPU_MEM_ANY)) {
			core->res.error.op = c->op;
			core->res.error.operand = i;
			tpu_job_fail(&core->res, TPU_JOB_ERR_HAZARD,
				     "step %llu: operand %u's block is %s while the async copy of op %u (started at step %llu) touches it",
				     (unsigned long long)core->step, i, what, c->op,
				     (unsigned long long)c->step);
			tpu_core_fail_step(core, core->step);
			return -1;
		}
	}
	return 0;
}

/* The unsqueezed dimensions of a box, outermost first. */
static unsigned int kept_dims(const struct tpu_plan_box *b, unsigned int *dim)
{
	unsigned int n = 0;

	for (unsigned int d = 0; d < b->rank; d++)
		if (!(b->squeeze >> d & 1))
			dim[n++] = d;
	return n;
}

struct box_mem {
	uint8_t *p;			/* the box's first element */
	uint64_t stride[TPU_JOB_MAX_RANK];	/* bytes, per kept dimension */
};

static int box_memory(const struct tpu_core *core, const struct tpu_box_at *at,
		      const unsigned int *dim, unsigned int n, struct box_mem *m)
{
	uint64_t es = tpu_dtype_size(at->box.dtype), stride[TPU_JOB_MAX_RANK];
	uint64_t off = 0;
	uint8_t *base;

	if (tpu_window_memory(core, at, &base, stride))
		return -1;
	for (unsigned int d = 0; d < at->box.rank; d++)
		off += (uint64_t)at->start[d] * stride[d];
	m->p = base + off * es;
	for (unsigned int k = 0; k < n; k++)
		m->stride[k] = stride[dim[k]] * at->box.stride[dim[k]] * es;
	return 0;
}

static bool aborted(const struct tpu_core *core)
{
	return core->run->abort &&
	       atomic_load_explicit(core->run->abort, memory_order_relaxed);
}

/*
 * Move the box: rows of the innermost kept dimension, whole when both ends
 * are dense there. Overlapping ends (a copy within one ref) move row by
 * row through memmove. -1 if stopped by an abort.
 */
static int move_box(const struct tpu_core *core, const struct box_mem *s,
		    const struct box_mem *d, const uint64_t *shape,
		    unsigned int n, uint64_t es)
{
	uint64_t idx[TPU_JOB_MAX_RANK] = { 0 }, rows = 1, len, since = 0;
	uint64_t chunk = ABORT_POLL_BYTES / es;	/* elements between polls */
	bool dense;

	if (!n) {	/* every dimension squeezed: one element */
		memmove(d->p, s->p, es);
		return 0;
	}
	dense = s->stride[n - 1] == es && d->stride[n - 1] == es;
	len = shape[n - 1];
	for (unsigned int k = 0; k + 1 < n; k++)
		rows *= shape[k];
	for (uint64_t r = 0; r < rows; r++) {
		uint64_t so = 0, dof = 0, q = r;

		for (int k = (int)n - 2; k >= 0; k--) {
			idx[k] = q % shape[k];
			q /= shape[k];
			so += idx[k] * s->stride[k];
			dof += idx[k] * d->stride[k];
		}
		for (uint64_t c = 0; c < len; c += chunk) {
			uint64_t k = len - c < chunk ? len - c : chunk;

			if (dense)
				memmove(d->p + dof + c * es, s->p + so + c * es,
					k * es);
			else
				for (uint64_t j = c; j < c + k; j++)
					memmove(d->p + dof + j * d->stride[n - 1],
						s->p + so + j * s->stride[n - 1], es);
			since += k * es;
			if (since >= ABORT_POLL_BYTES) {
				since = 0;
				if (aborted(core))
					return -1;
			}
		}
	}
	return 0;
}

/*
 * Defence in depth for HBM: the box's last element lies inside its array,
 * which tpu_job_check_buffers placed inside the operand's slot.
 */
static bool hbm_box_inside(const struct tpu_core *core, const struct tpu_box_at *at)
{
	const struct tpu_plan_operand *o;
	uint64_t last = 0;

	if (at->box.space != TPU_MEM_ANY)
		return true;
	o = &core->run->plan->operand[at->box.base.index];
	for (unsigned int d = 0; d < o->rank; d++) {
		if (at->start[d] < 0 ||
		    (uint64_t)at->start[d] + tpu_plan_box_span(&at->box, d) > o->shape[d])
			return false;
		last += ((uint64_t)at->start[d] + tpu_plan_box_span(&at->box, d) - 1) *
			o->stride[d];
	}
	return last < o->elems;
}

static int copy_data(struct tpu_core *core, unsigned int n,
		     const struct tpu_box_at *src, const struct tpu_box_at *dst)
{
	unsigned int sd[TPU_JOB_MAX_RANK], dd[TPU_JOB_MAX_RANK];
	unsigned int k = kept_dims(&src->box, sd);
	uint64_t shape[TPU_JOB_MAX_RANK], es;
	struct box_mem sm, dm;

	kept_dims(&dst->box, dd);
	if (!hbm_box_inside(core, src) || !hbm_box_inside(core, dst))
		return fail_op(core, n, TPU_JOB_ERR_BUFFER,
			       "op %u at step %llu: the async copy leaves its array in HBM",
			       n, (unsigned long long)core->step);
	for (unsigned int j = 0; j < k; j++)
		shape[j] = src->box.size[sd[j]];
	if (box_memory(core, src, sd, k, &sm) || box_memory(core, dst, dd, k, &dm))
		return 0;	/* nothing behind it: a model-only run */
	es = tpu_dtype_size(src->box.dtype);
	if (es != tpu_dtype_size(dst->box.dtype)) {
		/* a width-changing bitcast (tpu_check_copy: dense last
		 * dimensions of as many bytes): rows of bytes */
		if (!k || sm.stride[k - 1] != es ||
		    dm.stride[k - 1] != tpu_dtype_size(dst->box.dtype))
			return fail_op(core, n, TPU_JOB_ERR_INTERNAL,
				       "op %u: a copy between dtypes of two widths needs dense rows",
				       n);
		shape[k - 1] *= es;
		sm.stride[k - 1] = dm.stride[k - 1] = 1;
		es = 1;
	}
	if (!move_box(core, &sm, &dm, shape, k, es))
		return 0;
	return fail_op(core, n, TPU_JOB_ERR_ABORTED,
		       "stopped in the async copy of op %u at step %llu: the queue was reset",
		       n, (unsigned long long)core->step);
}

static int track(struct tpu_core *core, const struct tpu_inflight *c)
{
	if (core->ninflight == core->inflight_cap) {
		unsigned int cap = core->inflight_cap ? 2 * core->inflight_cap : 16;
		struct tpu_inflight *p = realloc(core->inflight, cap * sizeof(*p));

		if (!p) {
			tpu_job_fail(&core->res, TPU_JOB_ERR_INTERNAL,
				     "out of host memory for copies in flight");
			tpu_core_fail_step(core, core->step);
			return -1;
		}
		core->inflight = p;
		core->inflight_cap = cap;
	}
	core->inflight[core->ninflight++] = *c;
	return 0;
}

static bool in_hbm(const struct tpu_box_at *at)
{
	return at->box.space == TPU_MEM_ANY;
}

int tpu_copy_start(struct tpu_core *core, unsigned int n,
		   const struct tpu_plan_op *op, int64_t e, double at_s)
{
	struct tpu_box_at src, dst;
	struct tpu_inflight c = { .op = n, .step = core->step };

	if (tpu_sem_index(core, n, op->src1, e, &c.sem) ||
	    tpu_window_resolve(core, n, op->src0, &src) ||
	    tpu_window_resolve(core, n, op->dst, &dst))
		return -1;
	tpu_window_region(core, &src, false, &c.src);
	tpu_window_region(core, &dst, true, &c.dst);
	if (core->run->debug &&
	    (tpu_copy_hazard_op(core, n, &c.src) ||
	     tpu_copy_hazard_op(core, n, &c.dst)))
		return -1;
	if (!core->run->model_only && copy_data(core, n, &src, &dst))
		return -1;
	c.bytes = dst.box.bytes;
	c.done_s = tpu_model_copy_start(&core->model, at_s, c.bytes,
					in_hbm(&src) || in_hbm(&dst));
	core->sems[c.sem] += (int64_t)c.bytes;
	core->stats.copies++;
	if (in_hbm(&src))
		core->stats.hbm_bytes_in += c.bytes;
	if (in_hbm(&dst))
		core->stats.hbm_bytes_out += c.bytes;
	return track(core, &c);
}

int tpu_copy_wait(struct tpu_core *core, unsigned int n,
		  const struct tpu_plan_op *op, int64_t e, double at_s,
		  double *stall_s)
{
	struct tpu_plan_box dst;
	uint64_t need;
	double done = 0;
	uint32_t flat;
	unsigned int k, kept = 0;

	/* a wait needs dst's size only: its starts are not evaluated */
	tpu_plan_ref_box(core->run->plan, op->dst, &dst);
	need = dst.bytes;
	if (tpu_sem_index(core, n, op->src1, e, &flat))
		return -1;
	if (core->sems[flat] < (int64_t)need)
		return tpu_sem_fail_wait(core, n, op->src1, e, flat, (int64_t)need,
					 true);
	core->sems[flat] -= (int64_t)need;
	/* retire the oldest copies on this semaphore that add up to @need */
	for (k = 0; k < core->ninflight; k++) {
		struct tpu_inflight *c = &core->inflight[k];
		uint64_t take;

		if (c->sem != flat || !need) {
			core->inflight[kept++] = *c;
			continue;
		}
		take = c->bytes < need ? c->bytes : need;
		c->bytes -= take;
		need -= take;
		if (c->done_s > done)
			done = c->done_s;
		if (c->bytes)
			core->inflight[kept++] = *c;
	}
	core->ninflight = kept;
	*stall_s += tpu_model_copy_wait(&core->model, at_s, done);
	return 0;
}
