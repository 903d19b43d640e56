// SPDX-License-Identifier: MIT
/*
 * Device loops (TPU_OP_LOOP): each loop's fields and programs, its body's
 * range (inside the op array and inside every enclosing body, no deeper
 * than TPU_JOB_MAX_LOOP_DEPTH), and that a window whose start reads a
 * loop index is only named by ops inside that loop. Ops are decoded in
 * order; @nest follows the bodies open at the op being decoded.
 */
#include "tpu_check.h"

unsigned int tpu_loop_nest_enter(struct tpu_loop_nest *nest, unsigned int i)
{
	while (nest->depth && nest->end[nest->depth - 1] <= i)
		nest->depth--;
	return nest->depth;
}

void tpu_loop_nest_open(struct tpu_loop_nest *nest, const struct tpu_plan *plan,
			unsigned int i)
{
	nest->op[nest->depth] = i;
	nest->end[nest->depth++] = plan->op[i].body_end;
}

/* The body's range: [i + 1, i + 1 + imm), nested in the enclosing one. */
static int check_body(const struct tpu_plan *plan, unsigned int i,
		      const struct tpu_plan_op *op,
		      const struct tpu_loop_nest *nest,
		      struct tpu_job_result *res)
{
	uint64_t end = (uint64_t)i + 1 + op->imm;

	if (op->depth >= TPU_JOB_MAX_LOOP_DEPTH)
		return tpu_check_error(res, "op %u: loop nested %u deep, at most %d loops nest",
				       i, op->depth + 1, TPU_JOB_MAX_LOOP_DEPTH);
	if (!op->imm)
		return tpu_check_error(res, "op %u: imm: a loop's body has at least one op, imm is 0",
				       i);
	if (end > plan->num_ops)
		return tpu_check_error(res, "op %u: imm: a body of %u ops runs to op %llu, past the last op (%u)",
				       i, op->imm, (unsigned long long)end - 1,
				       plan->num_ops - 1);
	if (nest->depth && end > nest->end[nest->depth - 1])
		return tpu_check_error(res, "op %u: imm: a body of %u ops ends at op %llu, past the end of the enclosing loop of op %u (its body ends at op %u)",
				       i, op->imm, (unsigned long long)end - 1,
				       nest->op[nest->depth - 1],
				       nest->end[nest->depth - 1] - 1);
	return 0;
}

int tpu_check_loop(struct tpu_plan *plan, unsigned int i,
		   struct tpu_plan_op *op, const struct tpu_loop_nest *nest,
		   struct tpu_job_result *res)
{
	bool is_while = op->fn == TPU_LOOP_WHILE;
	int ret = check_body(plan, i, op, nest, res);

	if (ret)
		return ret;
	op->body_end = i + 1 + op->imm;
	if (is_while && op->imm2 > TPU_JOB_MAX_TRIPS)
		return tpu_check_error(res, "op %u: imm2: a while loop takes at most %u trips, imm2 is %u",
				       i, TPU_JOB_MAX_TRIPS, op->imm2);
	if (!op->scalar_index.len)
		return tpu_check_error(res, "op %u: scalar_index: a %s loop needs a program leaving %s",
				       i, is_while ? "while" : "for",
				       is_while ? "its condition" : "lo and hi");
	return tpu_check_prog(plan, op->depth, op->scalar_index, is_while ? 1 : 2,
			      res, "op", i, is_while ? "scalar_index (loop condition)" :
			      "scalar_index (loop bounds)");
}

int tpu_check_loop_refs(const struct tpu_plan *plan, unsigned int i,
			const struct tpu_plan_op *op, struct tpu_job_result *res)
{
	const struct tpu_plan_ref refs[4] = { op->dst, op->src0, op->src1,
					      op->src2 };
	static const char *const field[4] = { "dst", "src0", "src1", "src2" };

	for (int k = 0; k < 4; k++) {
		const struct tpu_plan_window *w;

		if (refs[k].kind != TPU_REF_WINDOW || refs[k].index >= plan->num_windows)
			continue;
		w = &plan->window[refs[k].index];
		if (w->loop_need > op->depth)
			return tpu_check_error(res, "op %u: %s window %u's start reads the index of loop depth %u, but the op is inside %u loop%s",
					       i, field[k], refs[k].index,
					       w->loop_need - 1u, op->depth,
					       op->depth == 1 ? "" : "s");
	}
	return 0;
}
