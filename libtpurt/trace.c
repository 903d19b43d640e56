// SPDX-License-Identifier: MIT
/*
 * TPURT_TRACE=file.json: a device's jobs as one Chrome / Perfetto trace
 * (rules/tpu_trace_json.h). The device's engine hands over each core's
 * modeled timeline and the host's wall time of each step as records; this
 * file collects them per job and appends them to the trace.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpu_trace_json.h"
#include "tpurt_private.h"

struct tpurt_trace {
	struct tpu_trace_log log;
	struct tpu_trace_json json;
	char path[256];
};

int tpurt_trace_open_env(struct tpurt_trace **tracep)
{
	const char *path = getenv("TPURT_TRACE");
	struct tpurt_trace *t;
	int ret;

	*tracep = NULL;
	if (!path || !*path)
		return 0;
	if (strlen(path) >= sizeof(t->path))
		return tpurt_fail(-ENAMETOOLONG, "TPURT_TRACE=%s: path too long",
				  path);
	t = calloc(1, sizeof(*t));
	if (!t)
		return tpurt_fail(-ENOMEM, "out of memory");
	snprintf(t->path, sizeof(t->path), "%s", path);
	tpu_trace_log_init(&t->log);
	ret = tpu_trace_json_open(&t->json, path);
	if (ret) {
		free(t);
		return tpurt_fail(ret, "TPURT_TRACE=%s: cannot create it: %s",
				  path, strerror(-ret));
	}
	*tracep = t;
	return 0;
}

const struct tpu_trace_sink *tpurt_trace_sink(struct tpurt_trace *t)
{
	return t ? &t->log.sink : NULL;
}

void tpurt_trace_job_begin(struct tpurt_trace *t)
{
	if (t)
		tpu_trace_log_clear(&t->log);
}

void tpurt_trace_job_end(struct tpurt_trace *t, const struct tpu_config *cfg,
			 const struct tpu_model_stats *model,
			 uint64_t start_ns, uint64_t end_ns)
{
	struct tpu_trace_job job = {
		.model = model,
		.launch_ps = tpu_trace_ps((double)cfg->launch_cost_ns * 1e-9),
		.host = true,
		.host_start_ns = start_ns,
		.host_wall_ns = end_ns - start_ns,
	};

	if (!t)
		return;
	if (tpu_trace_log_lost(&t->log))
		fprintf(stderr, "libtpurt: TPURT_TRACE=%s: out of memory, "
			"job %llu's trace is incomplete\n", t->path,
			(unsigned long long)t->json.jobs);
	tpu_trace_json_job(&t->json, &t->log, &job);
	/* a program that never closes its device still leaves its jobs */
	fflush(t->json.f);
}

void tpurt_trace_close(struct tpurt_trace *t)
{
	if (!t)
		return;
	if (tpu_trace_json_close(&t->json))
		fprintf(stderr, "libtpurt: TPURT_TRACE=%s: write failed\n",
			t->path);
	tpu_trace_log_free(&t->log);
	free(t);
}
