// SPDX-License-Identifier: MIT
#include "tpu_core_fail.h"
#include "tpu_semaphore.h"

/* The error's fields: scratch, element and count in block[], @need. */
static int fail_sem(struct tpu_core *core, unsigned int n, uint64_t step,
		    unsigned int scratch, int64_t e, int64_t count,
		    uint64_t need)
{
	struct tpu_job_error_info *err = &core->res.error;

	err->op = n;
	err->block[0] = scratch;
	err->block[1] = e;
	err->block[2] = count;
	err->block[3] = 0;
	err->need = need;
	tpu_core_fail_step(core, step);
	return -1;
}

int tpu_sem_index(struct tpu_core *core, unsigned int n, struct tpu_plan_ref ref,
		  int64_t e, uint32_t *flat)
{
	const struct tpu_plan_scratch *s = &core->run->plan->scratch[ref.index];

	if (e >= 0 && (uint64_t)e < s->shape[0]) {
		*flat = s->sem_base + (uint32_t)e;
		return 0;
	}
	tpu_job_fail(&core->res, TPU_JOB_ERR_SEMAPHORE,
		     "step %llu: op %u names semaphore sem[%lld] of scratch %u, which has %u",
		     (unsigned long long)core->step, n, (long long)e, ref.index,
		     s->shape[0]);
	return fail_sem(core, n, core->step, ref.index, e, 0, 0);
}

int tpu_sem_signal(struct tpu_core *core, unsigned int n,
		   const struct tpu_plan_op *op, int64_t e, int64_t amount)
{
	uint32_t flat;

	if (tpu_sem_index(core, n, op->src1, e, &flat))
		return -1;
	if (amount < 0) {
		tpu_job_fail(&core->res, TPU_JOB_ERR_SEMAPHORE,
			     "step %llu: op %u signals semaphore sem[%lld] (scratch %u) with %lld: a signal adds a count >= 0",
			     (unsigned long long)core->step, n, (long long)e,
			     op->src1.index, (long long)amount);
		return fail_sem(core, n, core->step, op->src1.index, e,
				core->sems[flat], 0);
	}
	core->sems[flat] += amount;
	return 0;
}

int tpu_sem_fail_wait(struct tpu_core *core, unsigned int n,
		      struct tpu_plan_ref ref, int64_t e, uint32_t flat,
		      int64_t need, bool bytes)
{
	int64_t have = core->sems[flat];

	if (bytes)
		tpu_job_fail(&core->res, TPU_JOB_ERR_SEMAPHORE,
			     "step %llu: op %u waits on semaphore sem[%lld] (scratch %u) for %lld bytes: %lld in flight",
			     (unsigned long long)core->step, n, (long long)e,
			     ref.index, (long long)need, (long long)have);
	else
		tpu_job_fail(&core->res, TPU_JOB_ERR_SEMAPHORE,
			     "step %llu: op %u waits on semaphore sem[%lld] (scratch %u) for %lld: it holds %lld and nothing else on the core can signal it",
			     (unsigned long long)core->step, n, (long long)e,
			     ref.index, (long long)need, (long long)have);
	return fail_sem(core, n, core->step, ref.index, e, have,
			need < 0 ? 0 : (uint64_t)need);
}

int tpu_sem_wait(struct tpu_core *core, unsigned int n,
		 const struct tpu_plan_op *op, int64_t e, int64_t amount)
{
	uint32_t flat;

	if (tpu_sem_index(core, n, op->src1, e, &flat))
		return -1;
	if (amount < 0 || core->sems[flat] < amount)
		return tpu_sem_fail_wait(core, n, op->src1, e, flat, amount, false);
	core->sems[flat] -= amount;
	return 0;
}

int tpu_sem_check_end(struct tpu_core *core, uint64_t last_step)
{
	const struct tpu_plan *plan = core->run->plan;

	for (unsigned int i = 0; i < plan->num_scratch; i++) {
		const struct tpu_plan_scratch *s = &plan->scratch[i];
		bool dma = s->space == TPU_MEM_SEM_DMA;

		if (s->space < TPU_MEM_SEM_DMA)
			continue;
		for (uint32_t e = 0; e < s->shape[0]; e++) {
			int64_t count = core->sems[s->sem_base + e];

			if (!count)
				continue;
			tpu_job_fail(&core->res, TPU_JOB_ERR_SEMAPHORE,
				     "after the core's last step (%llu), semaphore sem[%u] (scratch %u) holds %lld, not 0: %s",
				     (unsigned long long)last_step, e, i,
				     (long long)count,
				     dma ? "a copy started but never waited?" :
				     "a signal never waited for?");
			core->res.error.op = UINT32_MAX;
			return fail_sem(core, UINT32_MAX, last_step, i, e, count, 0);
		}
	}
	return 0;
}
