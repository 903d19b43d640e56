// SPDX-License-Identifier: MIT
/*
 * The grid pipeline of one core, as Pallas TPU runs it: steps in row-major
 * order (restricted to the core's share of the parallel iterations); input
 * blocks fetched unless their index repeats the previous step's; output
 * blocks kept in VMEM while their index repeats and written back when it
 * changes and after the last step, those with pl.RevisitMode.ANY read
 * back from HBM at each new index (after the old block's write-back, so
 * a block revisited later sees its last visit's data; other cores' blocks
 * are theirs: only the parallel iterations split, and two of them sharing
 * a block race as in Pallas); edge blocks zero-padded on read and
 * written only in bounds (tpu_block.c). Double buffering is not emulated on
 * the host (the fetch of step s+1 happens after step s), only modeled: the
 * results are the same since input blocks are read-only. The host's caches
 * are asked for step s+1's blocks during step s (tpu_prefetch.h).
 */
#include <string.h>

#include "tpu_block.h"
#include "tpu_body.h"
#include "tpu_copy_dma.h"
#include "tpu_core_fail.h"
#include "tpu_hazard.h"
#include "tpu_panels.h"
#include "tpu_pipeline.h"
#include "tpu_poison.h"
#include "tpu_prefetch.h"
#include "tpu_semaphore.h"

/* Operands in space ANY have no blocks: the body's copies move them. */
static bool is_blocked(const struct tpu_plan_operand *o)
{
	return o->space != TPU_MEM_ANY;
}

static bool is_output(const struct tpu_plan_operand *o)
{
	return o->role == TPU_ROLE_OUTPUT && is_blocked(o);
}

/* --- the step sequence --- */

static uint64_t parallel_index(const struct tpu_plan *plan, const int64_t *pid)
{
	uint64_t p = 0;

	for (unsigned int d = 0; d < plan->grid_rank; d++)
		if (plan->semantics[d] == TPU_DIM_PARALLEL)
			p = p * plan->grid[d] + (uint64_t)pid[d];
	return p;
}

/*
 * The core's next grid index at or after @pid in row-major order, from
 * dimension @d on: dimensions before @d are fixed, @pp is their parallel
 * index and @tight says they equal @pid's (so @d starts at @pid[d], not 0).
 * Whole ranges of other cores' steps are skipped arithmetically, not one
 * by one: a (2, 2^31, 2) grid's other half is one jump, so a reset never
 * waits for a core counting through steps it does not run. Two candidates
 * per dimension suffice: if the first (tight) one has no step of ours
 * after @pid, the next one starts its inner dimensions at 0 and has one
 * whenever its parallel range meets the core's share.
 */
static bool seek_step(const struct tpu_core *core, const int64_t *pid,
		      int64_t *out, unsigned int d, uint64_t pp, bool tight)
{
	const struct tpu_plan *plan = core->run->plan;
	uint64_t inner = 1, g, lo, hi, first, last;

	if (d == plan->grid_rank)
		return pp >= core->pbegin && pp < core->pend;
	for (unsigned int e = d + 1; e < plan->grid_rank; e++)
		if (plan->semantics[e] == TPU_DIM_PARALLEL)
			inner *= plan->grid[e];
	g = plan->grid[d];
	first = tight ? (uint64_t)pid[d] : 0;
	last = g - 1;
	if (plan->semantics[d] == TPU_DIM_PARALLEL) {
		/* v such that [(pp*g + v) * inner, + inner) meets [pbegin, pend) */
		lo = core->pbegin / inner;
		hi = (core->pend + inner - 1) / inner;
		if (hi <= pp * g || lo >= pp * g + g)
			return false;
		if (lo > pp * g && lo - pp * g > first)
			first = lo - pp * g;
		if (hi - pp * g - 1 < last)
			last = hi - pp * g - 1;
	}
	for (uint64_t v = first; v <= last && v <= first + 1; v++) {
		uint64_t npp = plan->semantics[d] == TPU_DIM_PARALLEL ?
			       pp * g + v : pp;

		out[d] = (int64_t)v;
		if (seek_step(core, pid, out, d + 1, npp,
			      tight && v == (uint64_t)pid[d]))
			return true;
	}
	return false;
}

static uint64_t step_number(const struct tpu_plan *plan, const int64_t *pid)
{
	uint64_t step = 0;

	for (unsigned int d = 0; d < plan->grid_rank; d++)
		step = step * plan->grid[d] + (uint64_t)pid[d];
	return step;
}

/* Move @pid/@step to the core's first step at or after @pid. */
static bool seek_own_step(const struct tpu_core *core, int64_t *pid,
			  uint64_t *step)
{
	int64_t out[TPU_JOB_MAX_GRID_RANK] = { 0 };

	if (!seek_step(core, pid, out, 0, 0, true))
		return false;
	memcpy(pid, out, sizeof(out));
	*step = step_number(core->run->plan, pid);
	return true;
}

/* Advance @pid/@step to the core's next step; false after the last. */
static bool next_step(const struct tpu_core *core, int64_t *pid, uint64_t *step)
{
	const struct tpu_plan *plan = core->run->plan;
	int d = plan->grid_rank - 1;

	while (d >= 0 && (uint64_t)++pid[d] == plan->grid[d])
		pid[d--] = 0;
	if (d < 0)
		return false;
	return seek_own_step(core, pid, step);
}

static bool first_step(const struct tpu_core *core, int64_t *pid,
		       uint64_t *step)
{
	memset(pid, 0, TPU_JOB_MAX_GRID_RANK * sizeof(*pid));
	*step = 0;
	return seek_own_step(core, pid, step);
}

/* --- one step --- */

typedef int64_t block_index[TPU_JOB_MAX_OPERANDS][TPU_JOB_MAX_RANK];

static int eval_index_maps(struct tpu_core *core, const int64_t *pid,
			   uint64_t step, block_index idx)
{
	const struct tpu_plan *plan = core->run->plan;
	struct tpu_scalar_fault f;

	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];
		const struct tpu_scalar_ctx ctx = { pid, core->smem, core->sems, NULL };

		if (!is_blocked(o))
			continue;
		if (tpu_scalar_run(plan, o->index_map, &ctx, idx[i], o->rank,
				   &f)) {
			core->res.error.operand = i;
			return tpu_core_fail_scalar(core, step,
						    "operand index map", i, &f);
		}
	}
	return 0;
}

static bool same_index(const int64_t *a, const int64_t *b, unsigned int rank)
{
	return !memcmp(a, b, rank * sizeof(*a));
}

/* The fetch's bytes, by how the operand is buffered (pl.Buffered(n)). */
static void count_fetch(const struct tpu_plan_operand *o, uint64_t bytes,
			struct tpu_model_fetch *f)
{
	if (o->buffers == 1) {
		f->serial_bytes += bytes;
	} else if (o->buffers > 2) {
		f->ahead_bytes += bytes;
		if (o->buffers - 2u > f->ahead_steps)
			f->ahead_steps = o->buffers - 2u;
	} else {
		f->bytes += bytes;
	}
}

static int fetch_inputs(struct tpu_core *core, block_index idx,
			struct tpu_model_fetch *fetch)
{
	const struct tpu_plan *plan = core->run->plan;
	struct tpu_block_span sp;

	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];

		if (o->role != TPU_ROLE_INPUT || !is_blocked(o))
			continue;
		if (core->resident[i] && same_index(core->idx[i], idx[i], o->rank)) {
			core->stats.blocks_skipped++;
			continue;
		}
		if (tpu_block_locate(core, i, idx[i], core->step, &sp))
			return -1;
		if (core->run->debug && core->resident[i] &&
		    tpu_copy_hazard_block(core, i, "refetched"))
			return -1;
		tpu_block_set_valid(core, i, &sp);
		if (!core->run->model_only && tpu_block_fetch(core, i, &sp)) {
			tpu_job_fail(&core->res, TPU_JOB_ERR_INTERNAL,
				     "out of host memory for a VMEM block");
			tpu_core_fail_step(core, core->step);
			return -1;
		}
		memcpy(core->idx[i], idx[i], sizeof(idx[i]));
		core->resident[i] = true;
		core->stats.blocks_fetched++;
		count_fetch(o, tpu_block_bytes(o, &sp), fetch);
	}
	return 0;
}

/* Ask the caches for the next step's new input blocks (tpu_prefetch.h). */
static void prefetch_inputs(struct tpu_core *core, block_index cur,
			    block_index next)
{
	const struct tpu_plan *plan = core->run->plan;

	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];

		if (o->role == TPU_ROLE_INPUT && is_blocked(o) &&
		    !same_index(cur[i], next[i], o->rank))
			tpu_block_prefetch(core, i, next[i]);
	}
}

/*
 * pl.RevisitMode.ANY: the new block's data from HBM, what its last visit
 * wrote back (or the array's first contents), DMA the model counts.
 */
static int read_back_output(struct tpu_core *core, unsigned int i,
			    const struct tpu_block_span *sp,
			    struct tpu_model_fetch *fetch)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];

	if (!core->run->model_only && tpu_block_fetch(core, i, sp)) {
		tpu_job_fail(&core->res, TPU_JOB_ERR_INTERNAL,
			     "out of host memory for a VMEM block");
		tpu_core_fail_step(core, core->step);
		return -1;
	}
	core->stats.blocks_fetched++;
	count_fetch(o, tpu_block_bytes(o, sp), fetch);
	return 0;
}

static int open_outputs(struct tpu_core *core, block_index idx, uint64_t pflat,
			struct tpu_model_fetch *fetch)
{
	const struct tpu_plan *plan = core->run->plan;
	struct tpu_block_span sp;

	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];

		if (!is_output(o))
			continue;
		if (core->resident[i] && same_index(core->idx[i], idx[i], o->rank)) {
			if (core->run->debug &&
			    tpu_hazard_check_owner(core, i, idx[i], pflat))
				return -1;
			continue;
		}
		if (tpu_block_locate(core, i, idx[i], core->step, &sp))
			return -1;
		tpu_block_set_valid(core, i, &sp);
		memcpy(core->idx[i], idx[i], sizeof(idx[i]));
		core->resident[i] = true;
		if (core->run->debug &&
		    tpu_hazard_claim(core, i, idx[i], pflat))
			return -1;
		if (o->revisit == TPU_REVISIT_ANY) {
			if (read_back_output(core, i, &sp, fetch))
				return -1;
			continue;
		}
		if (core->run->debug && !core->run->model_only)
			tpu_poison_fill(core->block_buf[i], o->dtype,
					o->block_bytes / tpu_dtype_size(o->dtype));
	}
	return 0;
}

/* Write back the output blocks whose index changes after this step. */
static int close_outputs(struct tpu_core *core, block_index next,
			 bool has_next, uint64_t *bytes)
{
	const struct tpu_plan *plan = core->run->plan;
	struct tpu_block_span sp;

	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];

		if (!is_output(o))
			continue;
		if (has_next && same_index(core->idx[i], next[i], o->rank))
			continue;
		if (core->run->debug &&
		    tpu_copy_hazard_block(core, i, "written back"))
			return -1;
		/* cannot fail: it was located when the block was opened */
		tpu_block_locate(core, i, core->idx[i], core->step, &sp);
		if (!core->run->model_only)
			tpu_block_write_back(core, i, &sp);
		if (core->run->debug)
			tpu_hazard_close(core, i, core->idx[i]);
		core->resident[i] = false;
		core->stats.blocks_written++;
		*bytes += tpu_block_bytes(o, &sp);
	}
	return 0;
}

/* The host's wall time of the step just run, begun at @t0, beside its
 * modeled interval. */
static void trace_host_step(const struct tpu_core *core, uint64_t t0)
{
	const struct tpu_run *run = core->run;

	tpu_trace_emit(run->trace, core->id, TPU_TRACE_HOST, core->stats.steps,
		       (t0 - run->start_ns) * 1e-9,
		       (tpu_trace_now_ns() - run->start_ns) * 1e-9, 0);
}

void tpu_core_run(struct tpu_core *core)
{
	const struct tpu_plan *plan = core->run->plan;
	block_index cur, next;
	int64_t npid[TPU_JOB_MAX_GRID_RANK];
	uint64_t nstep, last = 0;
	bool has_next, ran = false;

	tpu_model_begin(&core->model, core->run->cfg);
	tpu_model_trace(&core->model, core->run->trace, core->id);
	tpu_panels_bind(core);
	has_next = first_step(core, core->pid, &core->step);
	if (has_next && eval_index_maps(core, core->pid, core->step, cur))
		goto out;
	while (has_next && core->step < atomic_load_explicit(&core->run->fail_step,
							     memory_order_relaxed)) {
		uint64_t flops = 0, useful = 0, out_bytes = 0;
		struct tpu_model_fetch fetch = { 0 };
		uint64_t t0 = core->run->trace ? tpu_trace_now_ns() : 0;
		struct tpu_model_work work = { 0 };

		if (core->run->abort &&
		    atomic_load_explicit(core->run->abort, memory_order_relaxed)) {
			tpu_job_fail(&core->res, TPU_JOB_ERR_ABORTED,
				     "stopped at step %llu: the queue was reset",
				     (unsigned long long)core->step);
			core->res.error.step = core->step;
			break;
		}
		memcpy(npid, core->pid, sizeof(npid));
		nstep = core->step;
		has_next = next_step(core, npid, &nstep);
		if (has_next && eval_index_maps(core, npid, nstep, next))
			break;
		if (fetch_inputs(core, cur, &fetch))
			break;
		tpu_prefetch_clear();
		if (has_next && !core->run->model_only)
			prefetch_inputs(core, cur, next);
		if (open_outputs(core, cur, parallel_index(plan, core->pid),
				 &fetch) ||
		    tpu_body_run(core, &work, &flops, &useful))
			break;
		if (close_outputs(core, next, has_next, &out_bytes))
			break;
		tpu_model_step_fetch(&core->model, &fetch, &work, useful,
				     out_bytes);
		if (core->run->trace)
			trace_host_step(core, t0);
		core->stats.steps++;
		core->stats.hbm_bytes_in += fetch.bytes + fetch.serial_bytes +
					    fetch.ahead_bytes;
		core->stats.hbm_bytes_out += out_bytes;
		core->stats.mxu_flops += flops;
		last = core->step;
		ran = !has_next;
		memcpy(core->pid, npid, sizeof(npid));
		core->step = nstep;
		memcpy(cur, next, sizeof(cur));
	}
	/* Mosaic's rule: every semaphore back at zero after the last step */
	if (ran && !core->res.error.code)
		tpu_sem_check_end(core, last);
out:
	tpu_panels_bind(NULL);
	tpu_model_end(&core->model, &core->stats.model);
}
