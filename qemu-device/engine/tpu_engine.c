// SPDX-License-Identifier: MIT
/*
 * The engine's entry points: check a job, set up SMEM and the debug tables,
 * run one worker thread per core (the caller's thread is core 0), and merge
 * the cores' statistics and errors. The worker threads and each core's VMEM
 * live as long as the engine; a job that finds them taken by another runs
 * on threads and buffers of its own.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpu_core.h"
#include "tpu_gemm.h"
#include "tpu_hazard.h"
#include "tpu_panels.h"
#include "tpu_pipeline.h"
#include "tpu_pool.h"
#include "tpu_print_buf.h"
#include "tpu_trace_buf.h"
#include "tpu_vmem.h"

struct tpu_engine {
	struct tpu_config cfg;
	struct tpu_pool *pool;			/* cores - 1 workers */
	struct tpu_vmem vmem[TPU_MAX_CORES];	/* with the pool */
	struct tpu_panels *panels;		/* with the pool; may be NULL */
};

static pthread_once_t gemm_once = PTHREAD_ONCE_INIT;

struct tpu_engine *tpu_engine_create(const struct tpu_config *cfg,
				     char *err, size_t errlen)
{
	struct tpu_engine *e;

	if (tpu_config_check(cfg, err, errlen))
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e) {
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		return NULL;
	}
	e->cfg = *cfg;
	pthread_once(&gemm_once, tpu_gemm_init);
	/* out of memory for it: jobs run as well without */
	e->panels = tpu_panels_new();
	e->pool = tpu_pool_create(cfg->cores - 1);
	if (!e->pool) {
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		tpu_panels_free(e->panels);
		free(e);
		return NULL;
	}
	return e;
}

void tpu_engine_destroy(struct tpu_engine *engine)
{
	if (!engine)
		return;
	tpu_pool_destroy(engine->pool);
	tpu_panels_free(engine->panels);
	for (unsigned int c = 0; c < TPU_MAX_CORES; c++)
		tpu_vmem_release(&engine->vmem[c]);
	free(engine);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Scalar prefetch: copy each array from HBM once, before the first step. */
static int load_smem(struct tpu_run *run, struct tpu_job_result *res)
{
	const struct tpu_plan *plan = run->plan;

	run->smem = calloc(plan->smem_words ? plan->smem_words : 1,
			   sizeof(int32_t));
	if (!run->smem)
		return tpu_job_fail(res, TPU_JOB_ERR_INTERNAL, "out of host memory for SMEM");
	for (unsigned int i = 0; i < plan->num_scalar_prefetch; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];

		/* offset and size were checked against the slot */
		memcpy(run->smem + o->smem_base,
		       run->hbm + run->slots[o->slot].offset + o->offset,
		       o->elems * sizeof(int32_t));
	}
	/* each core starts from a copy (tpu_smem.c): SMEM is per core */
	return 0;
}

static void free_run(struct tpu_run *run)
{
	free(run->smem);
	tpu_hazard_tables_free(run);
}

static void *core_thread(void *arg)
{
	tpu_core_run(arg);
	return NULL;
}

static void core_task(void *arg)
{
	tpu_core_run(arg);
}

/* Without the pool: a thread per core, as many as can be started. */
static void run_on_threads(struct tpu_core *cores, unsigned int ncores)
{
	pthread_t tid[TPU_MAX_CORES];
	bool started[TPU_MAX_CORES] = { false };

	for (unsigned int c = 1; c < ncores; c++)
		started[c] = !pthread_create(&tid[c], NULL, core_thread, &cores[c]);
	for (unsigned int c = 1; c < ncores; c++)
		if (!started[c])
			tpu_core_run(&cores[c]);	/* no thread: run it here */
	tpu_core_run(&cores[0]);
	for (unsigned int c = 1; c < ncores; c++)
		if (started[c])
			pthread_join(tid[c], NULL);
}

static void sum_stats(struct tpu_job_stats *job, const struct tpu_job_stats *c)
{
	job->steps += c->steps;
	job->blocks_fetched += c->blocks_fetched;
	job->blocks_skipped += c->blocks_skipped;
	job->blocks_written += c->blocks_written;
	job->hbm_bytes_in += c->hbm_bytes_in;
	job->hbm_bytes_out += c->hbm_bytes_out;
	job->mxu_flops += c->mxu_flops;
	job->copies += c->copies;
	job->loop_trips += c->loop_trips;
}

/*
 * Run the cores; the job's error is the failing core's with the lowest step,
 * so that a job failing on several cores reports the same error as far as
 * the schedule allows.
 */
static int run_cores(struct tpu_engine *engine, struct tpu_run *run,
		     unsigned int ncores, struct tpu_job_result *res)
{
	struct tpu_core *cores = calloc(ncores, sizeof(*cores));
	struct tpu_model_stats model[TPU_MAX_CORES];
	const struct tpu_core *failed = NULL;
	uint64_t p = run->plan->parallel_iters;
	bool pooled = tpu_pool_get(engine->pool);
	int ret = 0;

	if (!cores) {
		ret = tpu_job_fail(res, TPU_JOB_ERR_INTERNAL, "out of host memory");
		goto out;
	}
	if (pooled)
		tpu_panels_open(run, engine->panels);
	for (unsigned int c = 0; c < ncores; c++) {
		cores[c].run = run;
		cores[c].id = c;
		/* the model's split, so the job's modeled time is the model's */
		tpu_model_core_range(p, ncores, c, &cores[c].pbegin,
				     &cores[c].pend);
		if (pooled)
			cores[c].vmem = &engine->vmem[c];
		cores[c].res.error = res->error;
		if (tpu_core_alloc(&cores[c])) {
			ret = tpu_job_fail(res, TPU_JOB_ERR_INTERNAL,
					   "out of host memory for VMEM");
			goto out;
		}
	}
	if (pooled)
		tpu_pool_run(engine->pool, core_task, cores, sizeof(*cores), ncores);
	else
		run_on_threads(cores, ncores);

	for (unsigned int c = 0; c < ncores; c++) {
		const struct tpu_core *core = &cores[c];

		sum_stats(&res->stats, &core->stats);
		model[c] = core->stats.model;
		if (core->res.error.code &&
		    (!failed || core->res.error.step < failed->res.error.step))
			failed = core;
	}
	tpu_model_job(run->cfg, model, ncores, &res->stats.model);
	res->stats.cores_used = ncores;
	if (failed) {
		res->error = failed->res.error;
		memcpy(res->message, failed->res.message, sizeof(res->message));
		ret = (int)res->error.code;
	}
out:
	for (unsigned int c = 0; cores && c < ncores; c++)
		tpu_core_free(&cores[c]);
	free(cores);
	if (pooled)
		tpu_pool_put(engine->pool);
	return ret;
}

int tpu_engine_run(struct tpu_engine *engine, const void *desc, size_t len,
		   void *hbm, uint64_t hbm_size,
		   const struct tpu_buffer_slot *slots, unsigned int nslots,
		   unsigned int flags, struct tpu_job_result *res)
{
	return tpu_engine_run_abortable(engine, desc, len, hbm, hbm_size, slots,
					nslots, flags, NULL, res);
}

int tpu_engine_run_abortable(struct tpu_engine *engine, const void *desc,
			     size_t len, void *hbm, uint64_t hbm_size,
			     const struct tpu_buffer_slot *slots,
			     unsigned int nslots, unsigned int flags,
			     const atomic_bool *abort, struct tpu_job_result *res)
{
	uint64_t start = now_ns();
	struct tpu_plan *plan = malloc(sizeof(*plan));
	struct tpu_run run = { .cfg = &engine->cfg, .plan = plan,
			       .hbm = hbm, .slots = slots,
			       .fail_step = UINT64_MAX, .abort = abort,
			       .start_ns = start };
	struct tpu_trace_buf trace = { 0 };
	struct tpu_print_buf print = { 0 };
	unsigned int ncores;
	int ret;

	memset(res, 0, sizeof(*res));
	if (!plan)
		return tpu_job_fail(res, TPU_JOB_ERR_INTERNAL, "out of host memory");
	ret = tpu_job_decode(desc, len, &engine->cfg, plan, res);
	if (!ret)
		ret = tpu_job_check_buffers(plan, hbm_size, slots, nslots, res);
	if (ret)
		goto out;
	run.model_only = flags & TPU_RUN_MODEL_ONLY;
	run.debug = plan->flags & TPU_JOB_F_DEBUG;
	if (!run.model_only || hbm)
		ret = load_smem(&run, res);
	if (!ret && run.debug)
		ret = tpu_hazard_tables_alloc(&run, res);
	if (ret)
		goto out;
	ncores = engine->cfg.cores;
	if (plan->parallel_iters < ncores)
		ncores = (unsigned int)plan->parallel_iters;
	if ((plan->flags & TPU_JOB_F_TRACE) && hbm) {
		/* the slot was checked: in HBM, room for the header */
		tpu_trace_buf_open(&trace, run.hbm + slots[plan->trace_slot].offset,
				   slots[plan->trace_slot].size);
		run.trace = &trace.sink;
	}
	if ((plan->flags & TPU_JOB_F_PRINT) && hbm) {
		/* the slot was checked: in HBM, room for the header */
		tpu_print_buf_open(&print, run.hbm + slots[plan->print_slot].offset,
				   slots[plan->print_slot].size);
		run.print = &print;
	}
	ret = run_cores(engine, &run, ncores, res);
	if (run.trace)
		tpu_trace_buf_close(&trace);
	if (run.print)
		tpu_print_buf_close(&print);
out:
	free_run(&run);
	free(plan);
	res->stats.wall_ns = now_ns() - start;
	return ret;
}
