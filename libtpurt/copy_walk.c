// SPDX-License-Identifier: MIT
/*
 * A kernel's async copies, followed step by step on the host for the
 * schedule dump: the job pallas_call would run, decoded by the device's
 * rules; at each step its predicates, scalar stores and copy windows run
 * on the device's scalar core (rules/tpu_scalar.c) over a host copy of one
 * core's SMEM, so a slot the kernel carries in SMEM scratch is followed as
 * the device would. Semaphore counts are not modeled (they read 0), nor
 * SMEM-space blocks' contents.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpu_dtype.h"
#include "tpu_plan.h"
#include "tpurt_private.h"

struct tpurt_copy_walk {
	const struct tpurt_grid_spec *gs;
	struct tpu_plan *plan;
	char scratch_names[TPU_JOB_MAX_SCRATCH][TPURT_NAME_MAX];
	int32_t *smem;			/* plan->smem_words of one core */
};

void tpurt_copy_walk_free(struct tpurt_copy_walk *w)
{
	if (!w)
		return;
	free(w->plan);
	free(w->smem);
	free(w);
}

/* Scalar prefetch into its SMEM words, as the device loads it. */
static int load_prefetch(struct tpurt_copy_walk *w, struct tpurt_array *const *args)
{
	const struct tpu_plan *plan = w->plan;

	for (unsigned int i = 0; i < plan->num_scalar_prefetch; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];
		int ret;

		if (o->smem_base + o->elems > plan->smem_words)
			return tpurt_fail(-EINVAL, "schedule: internal: SMEM layout");
		ret = tpurt_array_read(args[i], w->smem + o->smem_base);
		if (ret)
			return ret;
	}
	return 0;
}

int tpurt_copy_walk_create(const struct tpurt_kernel *k,
			   const struct tpurt_grid_spec *gs,
			   const struct tpurt_compiler_params *params,
			   struct tpurt_array *const *args, int nargs,
			   struct tpurt_copy_walk **wp)
{
	struct tpurt_copy_walk *w = calloc(1, sizeof(*w));
	int ret;

	*wp = NULL;
	if (!w || !(w->plan = calloc(1, sizeof(*w->plan)))) {
		free(w);
		return tpurt_fail(-ENOMEM, "out of memory");
	}
	w->gs = gs;
	ret = tpurt_pallas_plan(k, gs, params, args, nargs, w->plan, w->scratch_names);
	if (!ret && !(w->smem = calloc(w->plan->smem_words + 1, sizeof(int32_t))))
		ret = tpurt_fail(-ENOMEM, "out of memory");
	if (!ret)
		ret = load_prefetch(w, args);
	if (ret) {
		tpurt_copy_walk_free(w);
		return ret;
	}
	*wp = w;
	return 0;
}

static int run_prog(struct tpurt_copy_walk *w, struct tpu_plan_prog prog,
		    const int64_t *pid, int64_t *out, unsigned int n,
		    uint64_t step, unsigned int op, const char *what)
{
	const struct tpu_scalar_ctx ctx = { pid, w->smem, NULL, NULL };
	struct tpu_scalar_fault f;

	if (!tpu_scalar_run(w->plan, prog, &ctx, out, n, &f))
		return 0;
	return tpurt_fail(f.code == TPU_JOB_ERR_DIV_ZERO ? -EDOM : -ERANGE,
			  "schedule: step %llu, kernel op %u (%s): %s: %s",
			  (unsigned long long)step, op,
			  tpurt_kernel_opcode_name(w->plan->op[op].opcode), what,
			  f.code == TPU_JOB_ERR_DIV_ZERO ? "division by zero" :
			  "SMEM index out of range");
}

static const char *base_name(const struct tpurt_copy_walk *w, struct tpu_plan_ref r)
{
	if (r.kind == TPU_REF_OPERAND)
		return w->gs->operand[r.index].name;
	return w->scratch_names[r.index];
}

/* A copy's end at this step: "x_hbm[8:16, 0:128]", "buf[1, 0:8, 0:128]". */
static int put_box(struct tpurt_copy_walk *w, struct tpu_plan_ref r,
		   const int64_t *pid, uint64_t step, unsigned int op, FILE *out)
{
	int64_t start[TPU_JOB_MAX_RANK] = { 0 };
	struct tpu_plan_box box;
	int ret;

	if (!tpu_plan_ref_box(w->plan, r, &box))
		return tpurt_fail(-EINVAL, "schedule: internal: kernel op %u's ref", op);
	if (box.start.len) {
		ret = run_prog(w, box.start, pid, start, box.rank, step, op, "window start");
		if (ret)
			return ret;
	}
	fprintf(out, "%s[", base_name(w, box.base));
	for (unsigned int d = 0; d < box.rank; d++) {
		if (box.squeeze >> d & 1)
			fprintf(out, "%s%lld", d ? ", " : "", (long long)start[d]);
		else
			fprintf(out, "%s%lld:%lld", d ? ", " : "", (long long)start[d],
				(long long)(start[d] + (int64_t)box.size[d]));
	}
	fputc(']', out);
	return 0;
}

/* dst[i] = v into the host's SMEM words, as the device stores it. */
static int scalar_store(struct tpurt_copy_walk *w, const struct tpu_plan_op *op,
			const int64_t *pid, uint64_t step, unsigned int n)
{
	const struct tpu_plan *plan = w->plan;
	uint64_t base, len;
	int64_t v[2];
	uint8_t dtype;
	int ret = run_prog(w, op->scalar_index, pid, v, 2, step, n, "index and value");

	if (ret)
		return ret;
	if (op->dst.kind == TPU_REF_SCRATCH) {
		base = plan->scratch[op->dst.index].smem_base;
		dtype = plan->scratch[op->dst.index].dtype;
		len = plan->scratch[op->dst.index].bytes / tpu_dtype_size(dtype);
	} else {
		base = plan->operand[op->dst.index].smem_base;
		dtype = plan->operand[op->dst.index].dtype;
		len = plan->operand[op->dst.index].role == TPU_ROLE_SCALAR_PREFETCH ?
		      plan->operand[op->dst.index].elems :
		      plan->operand[op->dst.index].block_bytes / tpu_dtype_size(dtype);
	}
	if (v[0] < 0 || (uint64_t)v[0] >= len)
		return tpurt_fail(-ERANGE, "schedule: step %llu, kernel op %u (scalar_store): index %lld outside %llu elements",
				  (unsigned long long)step, n, (long long)v[0],
				  (unsigned long long)len);
	tpu_smem_put(w->smem + base, dtype, (uint64_t)v[0], v[1]);
	return 0;
}

int tpurt_copy_walk_step(struct tpurt_copy_walk *w, const int64_t *pid,
			 uint64_t step, FILE *out)
{
	const struct tpu_plan *plan = w->plan;

	for (unsigned int n = 0; n < plan->num_ops; n++) {
		const struct tpu_plan_op *op = &plan->op[n];
		int64_t v = 1;
		int ret = op->pred.len ?
			  run_prog(w, op->pred, pid, &v, 1, step, n, "predicate") : 0;

		if (ret)
			return ret;
		if (!v)
			continue;
		if (op->opcode == TPU_OP_SCALAR_STORE)
			ret = scalar_store(w, op, pid, step, n);
		if (op->opcode != TPU_OP_COPY_START || !out || ret)
			continue;
		if (op->scalar_index.len)
			ret = run_prog(w, op->scalar_index, pid, &v, 1, step, n,
				       "semaphore index");
		else
			v = 0;
		fputs("    copy ", out);
		if (!ret)
			ret = put_box(w, op->src0, pid, step, n, out);
		fputs(" -> ", out);
		if (!ret)
			ret = put_box(w, op->dst, pid, step, n, out);
		if (ret)
			return ret;
		fprintf(out, " on %s[%lld]\n", base_name(w, op->src1), (long long)v);
	}
	return 0;
}
