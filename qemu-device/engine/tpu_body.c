// SPDX-License-Identifier: MIT
#include <string.h>

#include "tpu_body.h"
#include "tpu_core_fail.h"
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

static bool aborted(const struct tpu_core *core)
{
	return core->run->abort &&
	       atomic_load_explicit(core->run->abort, memory_order_relaxed);
}

static void run_op(const struct tpu_core *core, const struct tpu_plan_op *op,
		   double scalar)
{
	struct tpu_op_args args = {
		.dst = core_ref(core, op->dst),
		.scalar = scalar,
		.row_tmp = { core->row_tmp[0], core->row_tmp[1] },
		.abort = core->run->abort,
	};

	if (tpu_op_reads_src0(op))
		args.src0 = core_ref(core, op->src0);
	if (tpu_op_reads_src1(op))
		args.src1 = core_ref(core, op->src1);
	tpu_op_run(op, &args);
}

int tpu_body_run(struct tpu_core *core, double *compute_s, uint64_t *flops,
		 uint64_t *useful)
{
	const struct tpu_plan *plan = core->run->plan;
	struct tpu_scalar_fault f;
	double scalar = 0;

	for (unsigned int n = 0; n < plan->num_ops; n++) {
		const struct tpu_plan_op *op = &plan->op[n];
		int64_t v = 1;

		if (op->pred.len &&
		    tpu_scalar_run(plan, op->pred, core->pid, core->run->smem,
				   &v, 1, &f)) {
			core->res.error.op = n;
			return tpu_core_fail_scalar(core, core->step,
						    "op predicate", n, &f);
		}
		if (!v)
			continue;
		if (op->opcode == TPU_OP_DOT) {
			uint8_t t = core_ref(core, op->src0).dtype;

			if (core->run->model_only)
				t = op->src0.kind == TPU_REF_OPERAND ?
				    plan->operand[op->src0.index].dtype :
				    plan->scratch[op->src0.index].dtype;
			*flops += 2ull * op->m * op->n * op->k;
			*useful += useful_flops(core, op);
			*compute_s += tpu_model_dot_s(core->run->cfg, t, op->m,
						      op->n, op->k);
		}
		if (op->bcast == TPU_BCAST_SMEM) {
			int64_t at;

			if (tpu_scalar_run(plan, op->scalar_index, core->pid,
					   core->run->smem, &at, 1, &f)) {
				core->res.error.op = n;
				return tpu_core_fail_scalar(core, core->step,
							    "op scalar_index",
							    n, &f);
			}
			if (at < 0 || (uint64_t)at >= smem_elems(plan, op->src1))
				return fail_bcast_index(core, op, n, at);
			scalar = smem_scalar(core->run, op->src1, at);
		} else if (op->bcast == TPU_BCAST_IMM) {
			float imm;

			memcpy(&imm, &op->imm, sizeof(imm));
			scalar = imm;
		}
		if (!core->run->model_only)
			run_op(core, op, scalar);
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
