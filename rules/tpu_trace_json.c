// SPDX-License-Identifier: MIT
#include "tpu_trace_json.h"

#include <errno.h>
#include <inttypes.h>

/* Picoseconds as microseconds, exactly. */
static void put_us(FILE *f, const char *key, uint64_t ps)
{
	fprintf(f, ",\"%s\":%" PRIu64 ".%06" PRIu64, key, ps / 1000000,
		ps % 1000000);
}

static void put_meta(FILE *f, const char *what, int pid, int tid,
		     const char *name, int sort)
{
	fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,"
		"\"args\":{\"name\":\"%s\"}}", what, pid, tid, name);
	fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"%s_sort_index\",\"pid\":%d,"
		"\"tid\":%d,\"args\":{\"sort_index\":%d}}",
		what[0] == 'p' ? "process" : "thread", pid, tid, sort);
}

/* Device tracks: 0 the job, then TPU_TRACE_HOST lanes per core. */
static int device_tid(unsigned int core, unsigned int lane)
{
	return 1 + (int)(core * TPU_TRACE_HOST + lane);
}

static void name_core_tracks(struct tpu_trace_json *j, unsigned int core)
{
	char name[48];

	if (core >= TPU_MAX_CORES || j->tracks_named[core])
		return;
	j->tracks_named[core] = true;
	for (unsigned int l = 0; l < TPU_TRACE_HOST; l++) {
		snprintf(name, sizeof(name), "core %u: %s", core,
			 tpu_trace_lane_name(l));
		put_meta(j->f, "thread_name", TPU_TRACE_PID_DEVICE,
			 device_tid(core, l), name, device_tid(core, l));
	}
	snprintf(name, sizeof(name), "core %u: steps", core);
	put_meta(j->f, "thread_name", TPU_TRACE_PID_HOST, 1 + (int)core, name,
		 1 + (int)core);
}

int tpu_trace_json_open(struct tpu_trace_json *j, const char *path)
{
	*j = (struct tpu_trace_json){ .host_t0_ns = tpu_trace_now_ns() };
	j->f = fopen(path, "w");
	if (!j->f)
		return -errno;
	/* the metadata first, so that every event after it starts with ',' */
	fprintf(j->f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"
		"{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,"
		"\"args\":{\"name\":\"device (modeled chip time)\"}}",
		TPU_TRACE_PID_DEVICE);
	put_meta(j->f, "process_name", TPU_TRACE_PID_HOST, 0,
		 "host (wall clock)", 2);
	put_meta(j->f, "thread_name", TPU_TRACE_PID_DEVICE, 0, "jobs", 0);
	put_meta(j->f, "thread_name", TPU_TRACE_PID_HOST, 0, "jobs", 0);
	return 0;
}

static void put_event(FILE *f, const char *name, int pid, int tid,
		      uint64_t ts_ps, uint64_t dur_ps)
{
	fprintf(f, ",\n{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d",
		name, pid, tid);
	put_us(f, "ts", ts_ps);
	put_us(f, "dur", dur_ps);
}

static void put_job(struct tpu_trace_json *j, const char *name,
		    const struct tpu_trace_job *job)
{
	const struct tpu_model_stats *s = job->model;
	FILE *f = j->f;

	put_event(f, "launch", TPU_TRACE_PID_DEVICE, 0, j->model_at_ps,
		  job->launch_ps);
	fprintf(f, ",\"args\":{\"job\":%" PRIu64 "}}", j->jobs);
	put_event(f, name, TPU_TRACE_PID_DEVICE, 0, j->model_at_ps,
		  tpu_trace_ps(s->time_s));
	fprintf(f, ",\"args\":{\"job\":%" PRIu64 ",\"model_time_ps\":%" PRIu64
		",\"steps\":%" PRIu64 ",\"flops\":%" PRIu64
		",\"hbm_bytes_in\":%" PRIu64 ",\"hbm_bytes_out\":%" PRIu64
		",\"mxu_busy_ps\":%" PRIu64 ",\"vpu_busy_ps\":%" PRIu64
		",\"eup_busy_ps\":%" PRIu64 ",\"dma_busy_ps\":%" PRIu64
		",\"bubble_ps\":%" PRIu64 "}}",
		j->jobs, tpu_trace_ps(s->time_s), s->steps, s->flops,
		s->hbm_bytes_in, s->hbm_bytes_out, tpu_trace_ps(s->mxu_busy_s),
		tpu_trace_ps(s->vpu_busy_s), tpu_trace_ps(s->eup_busy_s),
		tpu_trace_ps(s->dma_busy_s), tpu_trace_ps(s->bubble_s));
	if (!job->host)
		return;
	put_event(f, name, TPU_TRACE_PID_HOST, 0,
		  (job->host_start_ns - j->host_t0_ns) * 1000,
		  job->host_wall_ns * 1000);
	fprintf(f, ",\"args\":{\"job\":%" PRIu64 "}}", j->jobs);
}

static void put_record(struct tpu_trace_json *j, const struct tpu_trace_job *job,
		       const struct tpu_trace_record *r)
{
	FILE *f = j->f;

	if (r->lane >= TPU_TRACE_LANES)
		return;
	name_core_tracks(j, r->core);
	if (r->lane == TPU_TRACE_HOST)
		put_event(f, "step", TPU_TRACE_PID_HOST, 1 + r->core,
			  (job->host_start_ns - j->host_t0_ns) * 1000 +
			  r->start_ps, r->dur_ps);
	else
		put_event(f, tpu_trace_lane_name(r->lane), TPU_TRACE_PID_DEVICE,
			  device_tid(r->core, r->lane),
			  j->model_at_ps + job->launch_ps + r->start_ps,
			  r->dur_ps);
	fprintf(f, ",\"args\":{\"job\":%" PRIu64 ",\"core\":%u,\"step\":%llu",
		j->jobs, r->core, (unsigned long long)r->step);
	if (r->lane == TPU_TRACE_DMA_IN || r->lane == TPU_TRACE_DMA_OUT)
		fprintf(f, ",\"bytes\":%llu", (unsigned long long)r->bytes);
	fputs("}}", f);
}

void tpu_trace_json_job(struct tpu_trace_json *j, const struct tpu_trace_log *log,
			const struct tpu_trace_job *job)
{
	char name[64];

	if (!j->f)
		return;
	snprintf(name, sizeof(name), "%s", job->name ? job->name : "");
	if (!job->name)
		snprintf(name, sizeof(name), "job %" PRIu64, j->jobs);
	put_job(j, name, job);
	for (unsigned int c = 0; c < TPU_MAX_CORES; c++)
		for (size_t i = 0; i < log->count[c]; i++)
			put_record(j, job, &log->rec[c][i]);
	j->model_at_ps += tpu_trace_ps(job->model->time_s);
	j->jobs++;
}

int tpu_trace_json_close(struct tpu_trace_json *j)
{
	int ret = 0;

	if (!j->f)
		return 0;
	fputs("\n]}\n", j->f);
	if (ferror(j->f))
		ret = -EIO;
	if (fclose(j->f) && !ret)
		ret = -errno;
	j->f = NULL;
	return ret;
}
