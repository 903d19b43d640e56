// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "tpu_core_fail.h"
#include "tpu_dtype.h"
#include "tpu_poison.h"
#include "tpu_prng.h"
#include "tpu_smem.h"

int tpu_smem_alloc(struct tpu_core *core)
{
	const struct tpu_run *run = core->run;
	const struct tpu_plan *plan = run->plan;
	uint64_t words = plan->smem_words ? plan->smem_words : 1;

	core->smem = calloc(words, sizeof(int32_t));
	core->sems = calloc(plan->num_sems ? plan->num_sems : 1, sizeof(int64_t));
	if (!core->smem || !core->sems)
		return -1;
	tpu_prng_seed(&core->prng, &(int64_t){ 0 }, 1);
	if (run->smem)
		memcpy(core->smem, run->smem, plan->smem_words * sizeof(int32_t));
	if (run->debug)
		for (unsigned int i = 0; i < plan->num_scratch; i++) {
			const struct tpu_plan_scratch *s = &plan->scratch[i];

			if (s->space == TPU_MEM_SMEM)
				tpu_poison_fill(core->smem + s->smem_base, s->dtype,
						s->bytes / tpu_dtype_size(s->dtype));
		}
	return 0;
}

void tpu_smem_free(struct tpu_core *core)
{
	free(core->smem);
	free(core->sems);
	free(core->inflight);
	core->smem = NULL;
	core->sems = NULL;
	core->inflight = NULL;
}

uint64_t tpu_smem_elems(const struct tpu_plan *plan, struct tpu_plan_ref ref)
{
	const struct tpu_plan_operand *o;

	if (ref.kind != TPU_REF_OPERAND)
		return plan->scratch[ref.index].bytes /
		       tpu_dtype_size(plan->scratch[ref.index].dtype);
	o = &plan->operand[ref.index];
	return o->role == TPU_ROLE_SCALAR_PREFETCH ? o->elems :
	       o->block_bytes / tpu_dtype_size(o->dtype);
}

uint64_t tpu_smem_ref_reach(const struct tpu_plan *plan, struct tpu_plan_ref ref)
{
	uint64_t elems = tpu_smem_elems(plan, ref);

	if (ref.kind != TPU_REF_OPERAND)
		return tpu_smem_reach(plan, plan->scratch[ref.index].smem_base,
				      plan->scratch[ref.index].dtype, elems);
	return tpu_smem_reach(plan, plan->operand[ref.index].smem_base,
			      plan->operand[ref.index].dtype, elems);
}

int32_t *tpu_smem_words(const struct tpu_core *core, struct tpu_plan_ref ref,
			uint8_t *dtype)
{
	const struct tpu_plan *plan = core->run->plan;

	if (ref.kind != TPU_REF_OPERAND) {
		*dtype = plan->scratch[ref.index].dtype;
		return core->smem + plan->scratch[ref.index].smem_base;
	}
	/* scalar prefetch is int32 or float32 words, as LOAD_SMEM reads */
	*dtype = plan->operand[ref.index].dtype;
	return core->smem + plan->operand[ref.index].smem_base;
}

int tpu_smem_store(struct tpu_core *core, unsigned int n,
		   const struct tpu_plan_op *op, int64_t index, int64_t value)
{
	const struct tpu_plan *plan = core->run->plan;
	uint64_t elems = tpu_smem_elems(plan, op->dst);
	uint8_t dtype;
	int32_t *w = tpu_smem_words(core, op->dst, &dtype);

	if (index < 0 || (uint64_t)index >= elems) {
		core->res.error.op = n;
		tpu_job_fail(&core->res, TPU_JOB_ERR_SMEM_RANGE,
			     "op %u (scalar_store) at step %llu: index %lld outside %s %u (%llu elements)",
			     n, (unsigned long long)core->step, (long long)index,
			     op->dst.kind == TPU_REF_OPERAND ? "operand" : "scratch",
			     op->dst.index, (unsigned long long)elems);
		tpu_core_fail_step(core, core->step);
		return -1;
	}
	tpu_smem_put(w, dtype, (uint64_t)index, value);
	return 0;
}
