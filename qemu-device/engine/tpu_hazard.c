// SPDX-License-Identifier: MIT
/*
 * An owner table holds a word per block: 0 while unvisited, then the
 * owning parallel iteration + 1, with CLOSED set once written back. A
 * closed block is reopened only by its owner, and only with
 * pl.RevisitMode.ANY (its data is read back); other revisits are hazards.
 */
#include <stdlib.h>

#include "tpu_core_fail.h"
#include "tpu_hazard.h"

#define CLOSED	(1ull << 63)

/* Owner tables are bounded: one word per output block. */
#define MAX_TRACKED_BLOCKS	(1ull << 24)

int tpu_hazard_tables_alloc(struct tpu_run *run, struct tpu_job_result *res)
{
	const struct tpu_plan *plan = run->plan;

	for (unsigned int i = 0; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];
		uint64_t n = 1;

		if (o->role != TPU_ROLE_OUTPUT || o->space == TPU_MEM_ANY)
			continue;	/* ANY: no blocks to own */
		for (unsigned int d = 0; d < o->rank; d++)
			n = n * o->nblocks[d] > MAX_TRACKED_BLOCKS ?
			    MAX_TRACKED_BLOCKS + 1 : n * o->nblocks[d];
		if (n > MAX_TRACKED_BLOCKS)
			return tpu_job_fail(res, TPU_JOB_ERR_INTERNAL,
					    "debug mode: output operand %u has more than %llu blocks to track",
					    i, MAX_TRACKED_BLOCKS);
		run->owner[i] = calloc(n, sizeof(*run->owner[i]));
		if (!run->owner[i])
			return tpu_job_fail(res, TPU_JOB_ERR_INTERNAL,
					    "debug mode: out of host memory");
	}
	return 0;
}

void tpu_hazard_tables_free(struct tpu_run *run)
{
	for (unsigned int i = 0; i < TPU_JOB_MAX_OPERANDS; i++)
		free(run->owner[i]);
}

static uint64_t flat_block(const struct tpu_plan_operand *o, const int64_t *idx)
{
	uint64_t f = 0;

	for (unsigned int d = 0; d < o->rank; d++)
		f = f * o->nblocks[d] + (uint64_t)idx[d];
	return f;
}

static int hazard(struct tpu_core *core, unsigned int i, const int64_t *idx,
		  const char *why, uint64_t a, uint64_t b)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];
	char s[96];

	tpu_format_index(s, sizeof(s), idx, o->rank);
	tpu_job_fail(&core->res, TPU_JOB_ERR_HAZARD,
		     "output operand %u: block (%s) at step %llu %s %llu and %llu",
		     i, s, (unsigned long long)core->step, why,
		     (unsigned long long)a, (unsigned long long)b);
	tpu_core_fail_block(core, core->step, i, idx, o->rank);
	return -1;
}

int tpu_hazard_claim(struct tpu_core *core, unsigned int i, const int64_t *idx,
		     uint64_t pflat)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];
	_Atomic uint64_t *slot = &core->run->owner[i][flat_block(o, idx)];
	uint64_t v = 0;

	core->visit_owner[i] = pflat;
	if (atomic_compare_exchange_strong(slot, &v, pflat + 1))
		return 0;
	/* pl.RevisitMode.ANY: back to a block its own iteration wrote back */
	if (o->revisit == TPU_REVISIT_ANY && v == (CLOSED | (pflat + 1)) &&
	    atomic_compare_exchange_strong(slot, &v, pflat + 1))
		return 0;
	if ((v & ~CLOSED) != pflat + 1)
		return hazard(core, i, idx,
			      "is written by parallel iterations",
			      (v & ~CLOSED) - 1, pflat);
	return hazard(core, i, idx,
		      "is revisited after its write-back (parallel iteration, step)",
		      pflat, core->step);
}

int tpu_hazard_check_owner(struct tpu_core *core, unsigned int i,
			   const int64_t *idx, uint64_t pflat)
{
	if (core->visit_owner[i] == pflat)
		return 0;
	return hazard(core, i, idx, "is written by parallel iterations",
		      core->visit_owner[i], pflat);
}

void tpu_hazard_close(struct tpu_core *core, unsigned int i,
		      const int64_t *idx)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];

	atomic_store(&core->run->owner[i][flat_block(o, idx)],
		     (core->visit_owner[i] + 1) | CLOSED);
}
