// SPDX-License-Identifier: MIT
/*
 * TPURT_TRACE=file.json: every grid job a device runs, as one Chrome /
 * Perfetto trace (rules/tpu_trace_json.h). The same on both backends: the
 * job goes to the device with TPU_JOB_F_TRACE and one more buffer-table
 * slot, a trace buffer the device fills (uapi/tpu_trace.h) with each
 * core's modeled timeline and its host wall time per step; after the
 * job, the records are read back and appended to the file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpu_trace.h"
#include "tpu_trace_json.h"
#include "tpurt_private.h"

/* Beyond this a trace buffer drops records (the header still counts them). */
#define TRACE_BUFFER_MAX	(64ull << 20)

struct tpurt_trace {
	struct tpu_trace_log log;
	struct tpu_trace_json json;
	char path[256];
};

/* Open the device's trace on its first job, when TPURT_TRACE asks for one. */
static int trace_open(struct tpurt_device *dev)
{
	const char *path = getenv("TPURT_TRACE");
	struct tpurt_trace *t;
	int ret;

	if (dev->trace || dev->trace_off || !path || !*path) {
		dev->trace_off = !dev->trace;
		return 0;
	}
	if (strlen(path) >= sizeof(t->path))
		return tpurt_fail(-ENAMETOOLONG, "TPURT_TRACE=%s: path too long",
				  path);
	t = calloc(1, sizeof(*t));
	if (!t)
		return tpurt_fail(-ENOMEM, "out of memory");
	snprintf(t->path, sizeof(t->path), "%s", path);
	ret = tpu_trace_json_open(&t->json, path);
	if (ret) {
		free(t);
		return tpurt_fail(ret, "TPURT_TRACE=%s: cannot create it: %s",
				  path, strerror(-ret));
	}
	tpu_trace_log_init(&t->log);
	dev->trace = t;
	return 0;
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

/*
 * Room for every record the job can emit: per step its interval, DMA in
 * and out, MXU, vector unit, bubble and host time; per core a prologue
 * and an epilogue (DMA and bubble each).
 */
static uint64_t trace_buffer_size(const struct tpu_job_header *h,
				  unsigned int cores)
{
	uint64_t steps = 1, records;

	for (unsigned int d = 0; d < h->grid_rank && d < TPU_JOB_MAX_GRID_RANK; d++)
		steps *= h->grid[d];
	if (steps > TRACE_BUFFER_MAX)
		return TRACE_BUFFER_MAX;
	records = TPU_TRACE_LANES * steps + 4ull * cores;
	if (records > TRACE_BUFFER_MAX / sizeof(struct tpu_trace_record))
		return TRACE_BUFFER_MAX;
	return sizeof(struct tpu_trace_header) +
	       records * sizeof(struct tpu_trace_record);
}

int tpurt_job_submit(struct tpurt_job *job, const void *desc, size_t len,
		     struct tpurt_buffer *const *bufs, unsigned int nbufs)
{
	struct tpurt_device *dev = job->dev;
	struct tpurt_buffer *table[TPU_JOB_MAX_SLOTS];
	const struct tpurt_device_info *info;
	struct tpu_job_header *h;
	int ret = trace_open(dev);

	if (ret)
		return ret;
	if (!dev->trace || len < sizeof(*h))
		return dev->ops->job_submit(job, desc, len, bufs, nbufs);
	if (nbufs >= TPU_JOB_MAX_SLOTS)
		return tpurt_fail(-E2BIG, "TPURT_TRACE: the job's %u buffers leave no slot for the trace",
				  nbufs);
	ret = tpurt_device_cached_info(dev, &info);
	if (ret)
		return ret;
	h = malloc(len);
	if (!h)
		return tpurt_fail(-ENOMEM, "out of memory");
	memcpy(h, desc, len);
	ret = tpurt_buffer_create(dev, trace_buffer_size(h, info->cores),
				  &job->trace_buf);
	if (ret) {
		free(h);
		return tpurt_fail(ret, "TPURT_TRACE: no room for the job's trace buffer: %s",
				  tpurt_last_error());
	}
	h->flags |= TPU_JOB_F_TRACE;
	h->trace_slot = (uint16_t)nbufs;
	memcpy(table, bufs, nbufs * sizeof(*bufs));
	table[nbufs] = job->trace_buf;
	/* the job's wall time, and its place in the trace, start here */
	job->submit_ns = tpurt_now_ns();
	ret = dev->ops->job_submit(job, h, len, table, nbufs + 1);
	free(h);
	if (ret) {
		tpurt_buffer_free(job->trace_buf);
		job->trace_buf = NULL;
	}
	return ret;
}

/* The buffer's records into the log; false when it holds no whole trace. */
static bool read_records(struct tpurt_trace *t, struct tpurt_buffer *buf,
			 uint64_t *dropped)
{
	struct tpu_trace_header h;
	uint64_t cap = (buf->size - sizeof(h)) / sizeof(struct tpu_trace_record);
	struct tpu_trace_record *r;
	uint64_t n;

	tpu_trace_log_clear(&t->log);
	if (tpurt_buffer_read(buf, 0, &h, sizeof(h)) ||
	    h.magic != TPU_TRACE_MAGIC ||
	    h.record_size != sizeof(struct tpu_trace_record))
		return false;
	n = h.count < cap ? h.count : cap;
	*dropped = h.count - n;
	r = malloc(n ? n * sizeof(*r) : 1);
	if (!r || tpurt_buffer_read(buf, sizeof(h), r, n * sizeof(*r))) {
		free(r);
		return false;
	}
	for (uint64_t i = 0; i < n; i++)
		t->log.sink.emit(t->log.sink.ctx, &r[i]);
	free(r);
	return true;
}

/* The report's modeled figures as the model's (whole picoseconds). */
static void report_model(const struct tpu_job_report *r,
			 struct tpu_model_stats *m)
{
	memset(m, 0, sizeof(*m));
	m->time_s = (double)r->model_time_ps * 1e-12;
	m->mxu_busy_s = (double)r->model_mxu_busy_ps * 1e-12;
	m->dma_busy_s = (double)r->model_dma_busy_ps * 1e-12;
	m->bubble_s = (double)r->model_bubble_ps * 1e-12;
	m->hbm_bytes_in = r->hbm_bytes_in;
	m->hbm_bytes_out = r->hbm_bytes_out;
	m->flops = r->mxu_flops;
	m->steps = r->steps;
}

void tpurt_trace_job_done(struct tpurt_job *job)
{
	struct tpurt_device *dev = job->dev;
	struct tpurt_trace *t = dev->trace;
	const struct tpurt_device_info *info;
	struct tpu_model_stats model;
	struct tpu_trace_job tj = { .host = true };
	uint64_t dropped = 0;

	if (!job->trace_buf)
		return;
	if (job->waited && t && !tpurt_device_cached_info(dev, &info)) {
		if (read_records(t, job->trace_buf, &dropped)) {
			report_model(&job->report, &model);
			tj.model = &model;
			tj.launch_ps = info->launch_cost_ns * 1000;
			tj.host_start_ns = job->submit_ns;
			tj.host_wall_ns = job->done_ns - job->submit_ns;
			tpu_trace_json_job(&t->json, &t->log, &tj);
			/* a program that never closes its device keeps its jobs */
			fflush(t->json.f);
		} else {
			fprintf(stderr, "libtpurt: TPURT_TRACE=%s: job %llu left no trace\n",
				t->path, (unsigned long long)job->id);
		}
		if (dropped || tpu_trace_log_lost(&t->log))
			fprintf(stderr, "libtpurt: TPURT_TRACE=%s: job %llu's trace is incomplete (%llu records dropped)\n",
				t->path, (unsigned long long)job->id,
				(unsigned long long)dropped);
	}
	tpurt_buffer_free(job->trace_buf);
	job->trace_buf = NULL;
}
