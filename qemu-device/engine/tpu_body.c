// SPDX-License-Identifier: MIT
#include <string.h>

#include "tpu_body.h"
#include "tpu_core_fail.h"
#include "tpu_elem.h"
#include "tpu_ops.h"

/* The 2-D ref an op's operand names: the block in VMEM or a scratch buffer. */
static struct tpu_ref2d core_ref(const struct tpu_core *core,
				 struct tpu_plan_ref ref)
{
	const struct tpu_plan_scratch *s;

	if (ref.kind == TPU_REF_OPERAND)
		return core->block[ref.index];
	s = &core->run->plan->scratch[ref.index];
	return (struct tpu_ref2d){ core->scratch_buf[ref.index], s->rows,
				   s->cols, s->cols, s->dtype };
}

static double smem_scalar(const struct tpu_run *run, struct tpu_plan_ref ref,
			  int64_t index)
{
	const struct tpu_plan *plan = run->plan;
	uint64_t base;
	uint8_t dtype;
	int32_t w;
	float f;

	if (ref.kind == TPU_REF_OPERAND) {
		base = plan->operand[ref.index].smem_base;
		dtype = TPU_DTYPE_INT32;
	} else {
		base = plan->scratch[ref.index].smem_base;
		dtype = plan->scratch[ref.index].dtype;
	}
	w = run->smem ? run->smem[base + index] : 0;
	if (dtype == TPU_DTYPE_INT32)
		return w;
	memcpy(&f, &w, sizeof(f));
	return f;
}

static bool smem_is_int(const struct tpu_plan *plan, struct tpu_plan_ref ref)
{
	return ref.kind == TPU_REF_OPERAND ||
	       plan->scratch[ref.index].dtype == TPU_DTYPE_INT32;
}

static uint64_t smem_elems(const struct tpu_plan *plan, struct tpu_plan_ref ref)
{
	if (ref.kind == TPU_REF_OPERAND)
		return plan->operand[ref.index].elems;
	return plan->scratch[ref.index].bytes / 4;
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
	if (ref.kind == TPU_REF_OPERAND) {
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
	bool scratch = op->src1.kind != TPU_REF_OPERAND;

	core->res.error.op = n;
	tpu_job_fail(&core->res, TPU_JOB_ERR_SMEM_RANGE,
		     "op scalar_index %u at step %llu: SMEM index %lld outside %s %u (%llu elements)",
		     n, (unsigned long long)core->step, (long long)at,
		     scratch ? "SMEM scratch" : "scalar-prefetch operand",
		     op->src1.index,
		     (unsigned long long)smem_elems(core->run->plan, op->src1));
	tpu_core_fail_step(core, core->step);
	return -1;
}

/* The scalar of bcast smem or scalar, or iota's offset, at this step. */
static int op_scalar(struct tpu_core *core, unsigned int n,
		     const struct tpu_plan_op *op, struct tpu_op_scalar *s)
{
	const struct tpu_plan *plan = core->run->plan;
	const struct tpu_scalar_ctx ctx = { core->pid, core->run->smem, NULL };
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
	if (v < 0 || (uint64_t)v >= smem_elems(plan, op->src1))
		return fail_bcast_index(core, op, n, v);
	s->f = smem_scalar(core->run, op->src1, v);
	s->is_int = smem_is_int(plan, op->src1);
	s->i = s->is_int ? (int64_t)s->f : 0;
	return 0;
}

static bool aborted(const struct tpu_core *core)
{
	return core->run->abort &&
	       atomic_load_explicit(core->run->abort, memory_order_relaxed);
}

static int run_op(struct tpu_core *core, unsigned int n,
		  const struct tpu_plan_op *op, const struct tpu_op_scalar *s)
{
	static const char *const fn_name[TPU_BINARY_COUNT] = {
		[TPU_BINARY_DIV] = "div", [TPU_BINARY_MOD] = "mod",
	};
	struct tpu_op_args args = {
		.dst = core_ref(core, op->dst),
		.scalar = *s,
		.row_tmp = { core->row_tmp[0], core->row_tmp[1],
			     core->row_tmp[2], core->row_tmp[3] },
		.abort = core->run->abort,
	};
	struct tpu_op_fault f;

	if (tpu_op_reads_src(op, 0)) {
		args.src0 = core_ref(core, op->src0);
		args.valid_rows = valid_extent(core, op->src0, 0, args.src0.rows);
		args.valid_cols = valid_extent(core, op->src0, 1, args.src0.cols);
	}
	if (tpu_op_reads_src(op, 1))
		args.src1 = core_ref(core, op->src1);
	if (tpu_op_reads_src(op, 2))
		args.src2 = core_ref(core, op->src2);
	if (!tpu_op_run(op, &args, &f))
		return 0;
	core->res.error.op = n;
	tpu_job_fail(&core->res, f.code,
		     "op %u at step %llu: integer %s by zero (dst row %lld, col %lld)",
		     n, (unsigned long long)core->step, fn_name[op->fn],
		     (long long)f.row, (long long)f.col);
	tpu_core_fail_step(core, core->step);
	return -1;
}

int tpu_body_run(struct tpu_core *core, struct tpu_model_work *work,
		 uint64_t *flops, uint64_t *useful)
{
	const struct tpu_plan *plan = core->run->plan;
	const struct tpu_scalar_ctx ctx = { core->pid, core->run->smem, NULL };
	struct tpu_scalar_fault f;
	struct tpu_op_scalar s;

	for (unsigned int n = 0; n < plan->num_ops; n++) {
		const struct tpu_plan_op *op = &plan->op[n];
		int64_t v = 1;

		if (op->pred.len &&
		    tpu_scalar_run(plan, op->pred, &ctx, &v, 1, &f))
			return fail_scalar(core, n, "op predicate", &f);
		if (!v)
			continue;
		charge_op(core, op, work, flops, useful);
		if (op_scalar(core, n, op, &s))
			return -1;
		if (!core->run->model_only && run_op(core, n, op, &s))
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
