// SPDX-License-Identifier: MIT
#include <string.h>

#include "tpu_body.h"
#include "tpu_copy_dma.h"
#include "tpu_core_fail.h"
#include "tpu_elem.h"
#include "tpu_ops.h"
#include "tpu_print_buf.h"
#include "tpu_semaphore.h"
#include "tpu_smem.h"
#include "tpu_window.h"

/* An op's refs at this step: windows resolved (index 0 dst, 1-3 srcs). */
struct op_refs {
	struct tpu_box_at at[4];
	struct tpu_plan_ref ref[4];
	bool used[4];
};

/*
 * The 2-D ref an op's operand names: the block in VMEM, a scratch buffer
 * or a window of either (resolved in @at).
 */
static struct tpu_ref2d core_ref(const struct tpu_core *core,
				 struct tpu_plan_ref ref,
				 const struct tpu_box_at *at)
{
	const struct tpu_plan_scratch *s;

	if (ref.kind == TPU_REF_WINDOW)
		return tpu_window_ref2d(core, at);
	if (ref.kind == TPU_REF_OPERAND)
		return core->block[ref.index];
	s = &core->run->plan->scratch[ref.index];
	return (struct tpu_ref2d){ core->scratch_buf[ref.index], s->rows,
				   s->cols, s->cols, s->dtype };
}

static double smem_scalar(const struct tpu_core *core, struct tpu_plan_ref ref,
			  int64_t index, bool *is_int)
{
	uint8_t dtype;
	const int32_t *w = tpu_smem_words(core, ref, &dtype);

	return tpu_smem_value(w, dtype, (uint64_t)index, is_int);
}

/* In-bounds extent of @ref along dim @d (0 rows, 1 cols); scratch: all. */
static int64_t valid_extent(const struct tpu_core *core, struct tpu_plan_ref ref,
			    int d, int64_t whole)
{
	if (ref.kind != TPU_REF_OPERAND)
		return whole;
	return d ? core->valid_cols[ref.index] : core->valid_rows[ref.index];
}

/*
 * FLOPs of a dot on the in-bounds parts of its operands: what the model
 * counts as useful work (the MXU's time is still that of the whole block).
 */
static uint64_t useful_flops(const struct tpu_core *core,
			     const struct tpu_plan_op *op)
{
	bool ta = op->dot & TPU_DOT_LHS_CONTRACT_0;
	bool tb = op->dot & TPU_DOT_RHS_CONTRACT_1;
	int64_t m = valid_extent(core, op->src0, ta, op->m);
	int64_t ka = valid_extent(core, op->src0, !ta, op->k);
	int64_t kb = valid_extent(core, op->src1, tb, op->k);
	int64_t n = valid_extent(core, op->src1, !tb, op->n);

	return 2ull * m * n * (ka < kb ? ka : kb);
}

/* The ref's shape and dtype from the plan (model-only jobs have no refs). */
static void plan_ref(const struct tpu_plan *plan, struct tpu_plan_ref ref,
		     int64_t *rows, int64_t *cols, uint8_t *dtype)
{
	if (ref.kind == TPU_REF_WINDOW) {
		*rows = plan->window[ref.index].rows;
		*cols = plan->window[ref.index].cols;
		*dtype = plan->window[ref.index].dtype;
	} else if (ref.kind == TPU_REF_OPERAND) {
		*rows = plan->operand[ref.index].rows;
		*cols = plan->operand[ref.index].cols;
		*dtype = plan->operand[ref.index].dtype;
	} else {
		*rows = plan->scratch[ref.index].rows;
		*cols = plan->scratch[ref.index].cols;
		*dtype = plan->scratch[ref.index].dtype;
	}
}

/* Add @op's modeled time on the MXU or the vector unit to @w. */
static void charge_op(struct tpu_core *core, const struct tpu_plan_op *op,
		      struct tpu_model_work *w, uint64_t *flops,
		      uint64_t *useful)
{
	const struct tpu_plan *plan = core->run->plan;
	int64_t rows, cols;
	uint8_t t;

	if (tpu_opcode_is_memory(op->opcode))
		return;		/* the DMA engine's and scalar core's */
	if (op->opcode != TPU_OP_DOT) {
		plan_ref(plan, op->opcode == TPU_OP_REDUCE ? op->src0 : op->dst,
			 &rows, &cols, &t);
		tpu_model_vector_op(core->run->cfg, op->opcode, op->fn, rows,
				    cols, w);
		return;
	}
	plan_ref(plan, op->src0, &rows, &cols, &t);
	*flops += 2ull * op->m * op->n * op->k;
	*useful += useful_flops(core, op);
	w->mxu_s += tpu_model_dot_s(core->run->cfg, t, op->m, op->n, op->k);
}

static int fail_scalar(struct tpu_core *core, unsigned int n,
		       const char *what, struct tpu_scalar_fault *f)
{
	core->res.error.op = n;
	return tpu_core_fail_scalar(core, core->step, what, n, f);
}

/* The broadcast's SMEM ref, operand or scratch, is named as what it is. */
static int fail_bcast_index(struct tpu_core *core, const struct tpu_plan_op *op,
			    unsigned int n, int64_t at)
{
	const struct tpu_plan *plan = core->run->plan;
	bool scratch = op->src1.kind != TPU_REF_OPERAND;
	char extent[96];

	tpu_format_smem_extent(extent, sizeof(extent),
			       tpu_smem_elems(plan, op->src1),
			       tpu_smem_ref_reach(plan, op->src1));
	core->res.error.op = n;
	tpu_job_fail(&core->res, TPU_JOB_ERR_SMEM_RANGE,
		     "op scalar_index %u at step %llu: SMEM index %lld outside %s %u %s",
		     n, (unsigned long long)core->step, (long long)at,
		     scratch ? "SMEM scratch" : "SMEM operand",
		     op->src1.index, extent);
	tpu_core_fail_step(core, core->step);
	return -1;
}

/* The scalar of bcast smem or scalar, or iota's offset, at this step. */
static int op_scalar(struct tpu_core *core, unsigned int n,
		     const struct tpu_plan_op *op, struct tpu_op_scalar *s)
{
	const struct tpu_plan *plan = core->run->plan;
	const struct tpu_scalar_ctx ctx = { core->pid, core->smem, core->sems,
					    core->loop };
	struct tpu_scalar_fault f;
	int64_t v = 0;

	*s = (struct tpu_op_scalar){ 0 };
	if (!op->scalar_index.len)
		return 0;
	if (tpu_scalar_run(plan, op->scalar_index, &ctx, &v, 1, &f))
		return fail_scalar(core, n, "op scalar_index", &f);
	if (op->bcast != TPU_BCAST_SMEM) {
		*s = (struct tpu_op_scalar){ tpu_elem_from_i64(v), v, true };
		return 0;
	}
	/* a read past the ref's end reaches on to the job's SMEM end */
	if (v < 0 || (uint64_t)v >= tpu_smem_ref_reach(plan, op->src1))
		return fail_bcast_index(core, op, n, v);
	s->f = smem_scalar(core, op->src1, v, &s->is_int);
	s->i = s->is_int ? (int64_t)s->f : 0;
	return 0;
}

static bool aborted(const struct tpu_core *core)
{
	return core->run->abort &&
	       atomic_load_explicit(core->run->abort, memory_order_relaxed);
}

static int run_op(struct tpu_core *core, unsigned int n,
		  const struct tpu_plan_op *op, const struct tpu_op_scalar *s,
		  const struct op_refs *r)
{
	static const char *const fn_name[TPU_BINARY_COUNT] = {
		[TPU_BINARY_DIV] = "div", [TPU_BINARY_MOD] = "mod",
	};
	struct tpu_op_args args = {
		.dst = core_ref(core, op->dst, &r->at[0]),
		.scalar = *s,
		.row_tmp = { core->row_tmp[0], core->row_tmp[1],
			     core->row_tmp[2], core->row_tmp[3] },
		.abort = core->run->abort,
	};
	struct tpu_op_fault f;

	if (tpu_op_reads_src(op, 0)) {
		args.src0 = core_ref(core, op->src0, &r->at[1]);
		args.valid_rows = valid_extent(core, op->src0, 0, args.src0.rows);
		args.valid_cols = valid_extent(core, op->src0, 1, args.src0.cols);
	}
	if (tpu_op_reads_src(op, 1))
		args.src1 = core_ref(core, op->src1, &r->at[2]);
	if (tpu_op_reads_src(op, 2))
		args.src2 = core_ref(core, op->src2, &r->at[3]);
	if (!tpu_op_run(op, &args, &f))
		return 0;
	core->res.error.op = n;
	if (op->opcode == TPU_OP_GATHER)
		tpu_job_fail(&core->res, f.code,
			     "op %u at step %llu: gather index %lld outside src0's %lld %s, promised in bounds (dst row %lld, col %lld)",
			     n, (unsigned long long)core->step, (long long)f.index,
			     (long long)(op->axis ? args.src0.cols : args.src0.rows),
			     op->axis ? "columns" : "rows",
			     (long long)f.row, (long long)f.col);
	else
		tpu_job_fail(&core->res, f.code,
			     "op %u at step %llu: integer %s by zero (dst row %lld, col %lld)",
			     n, (unsigned long long)core->step, fn_name[op->fn],
			     (long long)f.row, (long long)f.col);
	tpu_core_fail_step(core, core->step);
	return -1;
}

/*
 * Resolve the windows a compute op names and, in debug mode, check its
 * reads and writes against the copies in flight.
 */
static int resolve_refs(struct tpu_core *core, unsigned int n,
			const struct tpu_plan_op *op, struct op_refs *r)
{
	const struct tpu_plan_ref refs[4] = { op->dst, op->src0, op->src1,
					      op->src2 };
	struct tpu_region reg;

	for (int k = 0; k < 4; k++) {
		/* bcast smem reads one SMEM word: checked as its whole ref */
		bool smem_read = k == 2 && op->bcast == TPU_BCAST_SMEM;

		r->used[k] = k == 0 || (tpu_op_reads_src(op, k - 1) &&
					refs[k].kind != TPU_REF_NONE);
		r->ref[k] = refs[k];
		if (!r->used[k] && !smem_read)
			continue;
		if (refs[k].kind == TPU_REF_WINDOW &&
		    tpu_window_resolve(core, n, refs[k], &r->at[k]))
			return -1;
		if (!core->run->debug || !core->ninflight)
			continue;
		if (refs[k].kind != TPU_REF_WINDOW)
			tpu_window_resolve(core, n, refs[k], &r->at[k]);
		tpu_window_region(core, &r->at[k], k == 0, &reg);
		if (tpu_copy_hazard_op(core, n, &reg))
			return -1;
	}
	return 0;
}

/* The values @op's scalar_index leaves (zeros when it has none). */
static int op_values(struct tpu_core *core, unsigned int n,
		     const struct tpu_plan_op *op, int64_t *v, unsigned int nv)
{
	const struct tpu_scalar_ctx ctx = { core->pid, core->smem, core->sems,
					    core->loop };
	struct tpu_scalar_fault f;

	for (unsigned int k = 0; k < nv; k++)
		v[k] = 0;
	if (op->scalar_index.len &&
	    tpu_scalar_run(core->run->plan, op->scalar_index, &ctx, v, nv, &f))
		return fail_scalar(core, n, "op scalar_index", &f);
	return 0;
}

/* A scalar store's one-element region, for the hazard checks. */
static int store_hazard(struct tpu_core *core, unsigned int n,
			const struct tpu_plan_op *op, int64_t index)
{
	struct tpu_box_at at;
	struct tpu_region reg;
	int64_t q = index;

	if (!core->run->debug || !core->ninflight ||
	    index < 0 || (uint64_t)index >= tpu_smem_elems(core->run->plan, op->dst))
		return 0;
	tpu_window_resolve(core, n, op->dst, &at);
	for (int d = at.box.rank - 1; d >= 0; d--) {
		at.start[d] = q % (int64_t)at.box.extent[d];
		q /= (int64_t)at.box.extent[d];
	}
	tpu_window_region(core, &at, true, &reg);
	for (unsigned int d = 0; d < reg.rank; d++)
		reg.size[d] = 1;
	return tpu_copy_hazard_op(core, n, &reg);
}

/* The memory-model ops: copies, semaphores, scalar stores. */
static int run_memory_op(struct tpu_core *core, unsigned int n,
			 const struct tpu_plan_op *op,
			 struct tpu_model_work *work)
{
	double at_s = tpu_model_compute_s(work) + work->stall_s;
	int64_t v[2];

	if (op_values(core, n, op, v, op->opcode >= TPU_OP_SEM_SIGNAL ? 2 : 1))
		return -1;
	switch (op->opcode) {
	case TPU_OP_COPY_START:
		return tpu_copy_start(core, n, op, v[0], at_s);
	case TPU_OP_COPY_WAIT:
		return tpu_copy_wait(core, n, op, v[0], at_s, &work->stall_s);
	case TPU_OP_SEM_SIGNAL:
		return tpu_sem_signal(core, n, op, v[0], v[1]);
	case TPU_OP_SEM_WAIT:
		return tpu_sem_wait(core, n, op, v[0], v[1]);
	default:	/* TPU_OP_SCALAR_STORE */
		if (store_hazard(core, n, op, v[0]))
			return -1;
		return tpu_smem_store(core, n, op, v[0], v[1]);
	}
}

/* A loop past its trips: the trip count or maximum in need and limit. */
static int fail_trips(struct tpu_core *core, unsigned int n,
		      const struct tpu_plan_op *op, uint64_t trips, uint64_t max)
{
	core->res.error.op = n;
	if (op->fn == TPU_LOOP_WHILE)
		tpu_job_fail(&core->res, TPU_JOB_ERR_LOOP,
			     "op %u: while loop at step %llu: its condition still holds after %llu trips, its maximum",
			     n, (unsigned long long)core->step,
			     (unsigned long long)max);
	else
		tpu_job_fail(&core->res, TPU_JOB_ERR_LOOP,
			     "op %u: loop at step %llu: %llu trips, more than the %llu a loop may take",
			     n, (unsigned long long)core->step,
			     (unsigned long long)trips, (unsigned long long)max);
	core->res.error.need = trips;
	core->res.error.limit = max;
	tpu_core_fail_step(core, core->step);
	return -1;
}

/* A reset is noticed at every trip, even of a body of scalar ops only. */
static int trip_aborted(struct tpu_core *core, unsigned int n, int64_t trip)
{
	if (!aborted(core))
		return 0;
	tpu_job_fail(&core->res, TPU_JOB_ERR_ABORTED,
		     "stopped in trip %lld of the loop of op %u, step %llu: the queue was reset",
		     (long long)trip, n, (unsigned long long)core->step);
	tpu_core_fail_step(core, core->step);
	return -1;
}

static int run_ops(struct tpu_core *core, unsigned int begin, unsigned int end,
		   struct tpu_model_work *work, uint64_t *flops, uint64_t *useful);

/*
 * TPU_OP_DEBUG_PRINT @n: its values and refs' elements as one record of
 * the print buffer. The scalar core's work: no modeled time, as a scalar
 * store.
 */
static int run_print(struct tpu_core *core, unsigned int n,
		     const struct tpu_plan_op *op)
{
	int64_t v[TPU_PRINT_MAX_SCALARS];
	struct tpu_ref2d refs[TPU_PRINT_MAX_REFS];
	unsigned int nrefs = 0;
	struct op_refs r;

	if (op_values(core, n, op, v, op->fn) || resolve_refs(core, n, op, &r))
		return -1;
	for (int k = 1; k < 4 && r.used[k]; k++)
		refs[nrefs++] = core_ref(core, r.ref[k], &r.at[k]);
	if (core->run->print && !core->run->model_only)
		tpu_print_buf_record(core->run->print, core->step, n, op->imm,
				     core->id, v, op->fn, refs, nrefs);
	return 0;
}

/*
 * TPU_OP_LOOP @n: its body once per trip, the trip index in the core's
 * loop[depth] for the body's programs. A for loop's bounds are read once,
 * a while loop's condition before every trip.
 */
static int run_loop(struct tpu_core *core, unsigned int n,
		    const struct tpu_plan_op *op, struct tpu_model_work *work,
		    uint64_t *flops, uint64_t *useful)
{
	uint64_t max = op->fn == TPU_LOOP_WHILE && op->imm2 ? op->imm2 :
		       TPU_JOB_MAX_TRIPS;
	unsigned int d = op->depth;
	int64_t v[2];

	if (op->fn == TPU_LOOP_FOR) {
		if (op_values(core, n, op, v, 2))
			return -1;
		if (v[1] > v[0] && (uint64_t)v[1] - (uint64_t)v[0] > max)
			return fail_trips(core, n, op,
					  (uint64_t)v[1] - (uint64_t)v[0], max);
		for (int64_t i = v[0]; i < v[1]; i++) {
			core->loop[d] = i;
			core->stats.loop_trips++;
			if (trip_aborted(core, n, i) ||
			    run_ops(core, n + 1, op->body_end, work, flops, useful))
				return -1;
		}
		return 0;
	}
	for (uint64_t t = 0;; t++) {
		if (op_values(core, n, op, v, 1))
			return -1;
		if (!v[0])
			return 0;
		if (t == max)
			return fail_trips(core, n, op, t + 1, max);
		core->loop[d] = (int64_t)t;
		core->stats.loop_trips++;
		if (trip_aborted(core, n, (int64_t)t) ||
		    run_ops(core, n + 1, op->body_end, work, flops, useful))
			return -1;
	}
}

/* Ops [@begin, @end) of the body; a loop runs its body and skips past it. */
static int run_ops(struct tpu_core *core, unsigned int begin, unsigned int end,
		   struct tpu_model_work *work, uint64_t *flops, uint64_t *useful)
{
	const struct tpu_plan *plan = core->run->plan;
	const struct tpu_scalar_ctx ctx = { core->pid, core->smem, core->sems,
					    core->loop };
	struct tpu_scalar_fault f;
	struct tpu_op_scalar s;
	struct op_refs r;

	for (unsigned int n = begin; n < end; n++) {
		const struct tpu_plan_op *op = &plan->op[n];
		int64_t v = 1;

		if (op->pred.len &&
		    tpu_scalar_run(plan, op->pred, &ctx, &v, 1, &f))
			return fail_scalar(core, n, "op predicate", &f);
		if (op->opcode == TPU_OP_LOOP) {
			if (v && run_loop(core, n, op, work, flops, useful))
				return -1;
			n = op->body_end - 1;
			continue;
		}
		if (!v)
			continue;
		if (tpu_opcode_is_memory(op->opcode)) {
			if (run_memory_op(core, n, op, work))
				return -1;
			continue;
		}
		if (op->opcode == TPU_OP_DEBUG_PRINT) {
			if (run_print(core, n, op))
				return -1;
			continue;
		}
		if (op->opcode == TPU_OP_DELAY) {	/* a modeled stall only */
			work->stall_s += op->imm * 1e-9;
			continue;
		}
		if (op->opcode == TPU_OP_PRNG_SEED) {	/* the scalar core's */
			int64_t seeds[TPU_PRNG_MAX_SEEDS];

			if (op_values(core, n, op, seeds, op->fn + 1u))
				return -1;
			tpu_prng_seed(&core->prng, seeds, op->fn + 1u);
			continue;
		}
		if (resolve_refs(core, n, op, &r))
			return -1;
		charge_op(core, op, work, flops, useful);
		if (op->opcode == TPU_OP_PRNG_BITS) {
			struct tpu_ref2d d = core_ref(core, op->dst, &r.at[0]);

			if (core->run->model_only)
				core->prng.draw++;
			else
				tpu_prng_bits(&core->prng, &d);
			continue;
		}
		if (op_scalar(core, n, op, &s))
			return -1;
		if (!core->run->model_only && run_op(core, n, op, &s, &r))
			return -1;
		/* An op cut short by a reset leaves its results unfinished. */
		if (aborted(core)) {
			tpu_job_fail(&core->res, TPU_JOB_ERR_ABORTED,
				     "stopped in op %u of step %llu: the queue was reset",
				     n, (unsigned long long)core->step);
			tpu_core_fail_step(core, core->step);
			return -1;
		}
	}
	return 0;
}

int tpu_body_run(struct tpu_core *core, struct tpu_model_work *work,
		 uint64_t *flops, uint64_t *useful)
{
	return run_ops(core, 0, core->run->plan->num_ops, work, flops, useful);
}
