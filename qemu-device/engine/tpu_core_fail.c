// SPDX-License-Identifier: MIT
#include <stdio.h>

#include "tpu_core_fail.h"

/*
 * Record that the job fails at @step. Cores stop once past the lowest
 * failing step, and run steps in increasing order, so the error reported is
 * the first in row-major order whatever the core count.
 */
static void stop_at(struct tpu_core *core, uint64_t step)
{
	uint64_t cur = atomic_load(&core->run->fail_step);

	while (step < cur &&
	       !atomic_compare_exchange_weak(&core->run->fail_step, &cur, step))
		;
}

void tpu_core_fail_step(struct tpu_core *core, uint64_t step)
{
	core->res.error.step = step;
	stop_at(core, step);
}

void tpu_core_fail_block(struct tpu_core *core, uint64_t step,
			 unsigned int operand, const int64_t *idx,
			 unsigned int rank)
{
	core->res.error.operand = operand;
	for (unsigned int d = 0; d < rank; d++)
		core->res.error.block[d] = idx[d];
	tpu_core_fail_step(core, step);
}

/*
 * "(6 elements)", or with the reach of a load past the array's end
 * (tpu_smem_reach) "(6 elements, 9 to the end of the job's SMEM)".
 */
void tpu_format_smem_extent(char *buf, size_t len, uint64_t elems,
			    uint64_t reach)
{
	if (reach > elems)
		snprintf(buf, len, "(%llu elements, %llu to the end of the job's SMEM)",
			 (unsigned long long)elems, (unsigned long long)reach);
	else
		snprintf(buf, len, "(%llu elements)", (unsigned long long)elems);
}

int tpu_core_fail_scalar(struct tpu_core *core, uint64_t step,
			 const char *what, unsigned int index,
			 const struct tpu_scalar_fault *f)
{
	char extent[96];

	tpu_format_smem_extent(extent, sizeof(extent), f->len, f->reach);
	if (f->code == TPU_JOB_ERR_DIV_ZERO)
		tpu_job_fail(&core->res, f->code,
			     "%s %u at step %llu: division by zero", what, index,
			     (unsigned long long)step);
	else if (f->scratch)
		tpu_job_fail(&core->res, f->code,
			     "%s %u at step %llu: LOAD_SCRATCH index %lld outside scratch %d %s",
			     what, index, (unsigned long long)step,
			     (long long)f->index, f->operand, extent);
	else
		tpu_job_fail(&core->res, f->code,
			     "%s %u at step %llu: SMEM index %lld outside %s operand %d %s",
			     what, index, (unsigned long long)step,
			     (long long)f->index,
			     (uint32_t)f->operand < core->run->plan->num_scalar_prefetch ?
			     "scalar-prefetch" : "SMEM-space",
			     f->operand, extent);
	tpu_core_fail_step(core, step);
	return -1;
}

void tpu_format_index(char *buf, size_t len, const int64_t *v, unsigned int n)
{
	int at = 0;

	for (unsigned int d = 0; d < n && at < (int)len; d++)
		at += snprintf(buf + at, len - at, "%s%lld", d ? ", " : "",
			       (long long)v[d]);
}
