// SPDX-License-Identifier: MIT
/*
 * Jobs: waiting for a submitted grid job and turning the device's report
 * into statistics and a message. Submitting and waiting are the device's
 * backend's (render.c, sim.c).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpurt_private.h"

uint64_t tpurt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *ref_name(const struct tpurt_job *job, uint32_t index)
{
	return index < job->nrefs ? job->names[index] : "?";
}

static int64_t or_minus_one(uint64_t v, uint64_t none)
{
	return v == none ? -1 : (int64_t)v;
}

static void fill_stats(const struct tpurt_job *job, struct tpurt_job_stats *st)
{
	const struct tpu_job_report *r = &job->report;

	memset(st, 0, sizeof(*st));
	st->steps = r->steps;
	st->blocks_fetched = r->blocks_fetched;
	st->blocks_skipped = r->blocks_skipped;
	st->blocks_written = r->blocks_written;
	st->hbm_bytes_in = r->hbm_bytes_in;
	st->hbm_bytes_out = r->hbm_bytes_out;
	st->mxu_flops = r->mxu_flops;
	st->cores_used = r->cores_used;
	st->device_wall_ns = r->wall_ns;
	st->call_wall_ns = job->done_ns - job->submit_ns;
	st->model_time_ps = r->model_time_ps;
	st->model_mxu_busy_ps = r->model_mxu_busy_ps;
	st->model_dma_busy_ps = r->model_dma_busy_ps;
	st->model_bubble_ps = r->model_bubble_ps;
	st->loop_trips = r->loop_trips;
	st->error.code = r->error.code;
	st->error.operand = (int32_t)or_minus_one(r->error.operand, 0xffffffffu);
	st->error.op = (int32_t)or_minus_one(r->error.op, 0xffffffffu);
	st->error.step = or_minus_one(r->error.step, ~0ull);
	memcpy(st->error.block, r->error.block, sizeof(st->error.block));
	st->error.need = r->error.need;
	st->error.limit = r->error.limit;
}

/* "operand N" or "scratch N" at @p as the call names it, or NULL. */
static const char *name_at(const struct tpurt_job *job, const char *msg,
			   const char *p, const char **end)
{
	int scratch = !strncmp(p, "scratch ", 8);
	char *e;
	long i;

	if ((p > msg && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) ||
	    (!scratch && strncmp(p, "operand ", 8)) || !isdigit((unsigned char)p[8]))
		return NULL;
	i = strtol(p + 8, &e, 10);
	*end = e;
	if (scratch)
		return i < job->nscratch ? job->names[TPU_JOB_MAX_OPERANDS + i] : NULL;
	return i < job->nrefs ? job->names[i] : NULL;
}

/* The device's message with the refs' names: "writes 'o'". */
static void named(const struct tpurt_job *job, const char *msg, size_t max,
		  char *out, size_t len)
{
	size_t at = 0;

	for (const char *p = msg; *p && p < msg + max && at + 1 < len;) {
		const char *end, *name = name_at(job, msg, p, &end);

		if (name) {
			int n = snprintf(out + at, len - at, "'%s'", name);

			at = n < 0 || (size_t)n >= len - at ? len - 1 : at + (size_t)n;
			p = end;
		} else {
			out[at++] = *p++;
		}
	}
	out[at] = 0;
}

/* The device's explanation, with the names from the grid spec and kernel. */
static int job_failure(const struct tpurt_job *job)
{
	const struct tpu_job_report *r = &job->report;
	char where[96] = "", msg[384];

	if (job->status == -ETIMEDOUT)
		return tpurt_fail(-ETIMEDOUT, "job %llu ran past its time limit",
				  (unsigned long long)job->id);
	if (job->status == -ECANCELED)
		return tpurt_fail(-ECANCELED,
				  "job %llu was cancelled (a dependency failed or the device was reset)",
				  (unsigned long long)job->id);
	if (r->error.operand != 0xffffffffu)
		snprintf(where, sizeof(where), " [operand '%s']",
			 ref_name(job, r->error.operand));
	named(job, r->message, sizeof(r->message), msg, sizeof(msg));
	return tpurt_fail(job->status ? job->status : -EIO, "job failed%s: %s",
			  where, msg);
}

int tpurt_job_wait(struct tpurt_job *job, struct tpurt_job_stats *stats)
{
	if (!job->waited) {
		int ret = job->dev->ops->job_wait(job);

		if (ret)
			return ret;
		job->done_ns = tpurt_now_ns();
		job->waited = 1;
		tpurt_trace_job_done(job);
		tpurt_print_job_done(job);
	}
	if (stats)
		fill_stats(job, stats);
	if (job->status || job->report.error.code)
		return job_failure(job);
	return 0;
}

uint32_t tpurt_job_syncobj(const struct tpurt_job *job)
{
	return job->syncobj;
}

void tpurt_job_free(struct tpurt_job *job)
{
	if (!job)
		return;
	if (!job->waited)
		job->dev->ops->job_wait(job);
	tpurt_trace_job_done(job);	/* frees a trace buffer never read */
	tpurt_print_job_free(job->print);
	free(job);
}
