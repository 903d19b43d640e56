// SPDX-License-Identifier: MIT
/*
 * TPURT_TRACE through the whole stack: matmuls with the variable set go to
 * the driver with TPU_JOB_F_TRACE and a trace buffer, the device fills it,
 * libtpurt writes the file. The file's events are counted (one per line,
 * as libtpurt writes them) against each job's statistics: a device and a
 * host step event per step, the DMA events' bytes, and the job event's
 * duration. The host tests check the JSON itself in depth
 * (tests/tpurt_trace_test.c); this is the transport. TPUEMU_SAMPLE_SIM=1
 * runs it on the in-process device instead.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpurt.h"
#include "kselftest_harness.h"
#include "tpu_require_device.h"

#define TRACE_PATH	"/tmp/tpu_trace_test.json"
#define JOBS		3

static int open_device(struct tpurt_device **dev)
{
	const char *sim = getenv("TPUEMU_SAMPLE_SIM");
	struct tpurt_sim_config cfg = { .hbm_size = 64 << 20, .cores = 2 };

	return sim && !strcmp(sim, "1") ? tpurt_open_sim(&cfg, dev) :
					  tpurt_open(dev);
}

struct job_counts {
	uint64_t device_steps, host_steps, bytes_in, bytes_out, job_dur_ps;
};

static uint64_t field_u64(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* A duration or time: microseconds with six decimals, as picoseconds. */
static uint64_t field_ps(const char *line, const char *key)
{
	const char *p = strstr(line, key);
	char *end;
	uint64_t us;

	if (!p)
		return 0;
	us = strtoull(p + strlen(key), &end, 10);
	return us * 1000000 + (*end == '.' ? strtoull(end + 1, NULL, 10) : 0);
}

/* Count each job's events; -1 if the file is not there or not whole. */
static int count_events(struct job_counts *c, unsigned int njobs)
{
	FILE *f = fopen(TRACE_PATH, "r");
	char line[1024];
	int closed = 0;

	if (!f)
		return -1;
	memset(c, 0, njobs * sizeof(*c));
	while (fgets(line, sizeof(line), f)) {
		uint64_t job = field_u64(line, "\"job\":");
		bool device = strstr(line, "\"pid\":1,") != NULL;

		closed |= !strcmp(line, "]}\n");
		if (!strstr(line, "\"ph\":\"X\"") || job >= njobs)
			continue;
		if (strstr(line, "\"name\":\"step\""))
			(*(device ? &c[job].device_steps : &c[job].host_steps))++;
		else if (strstr(line, "\"name\":\"DMA in\""))
			c[job].bytes_in += field_u64(line, "\"bytes\":");
		else if (strstr(line, "\"name\":\"DMA out\""))
			c[job].bytes_out += field_u64(line, "\"bytes\":");
		else if (device && strstr(line, "\"tid\":0,") &&
			 !strstr(line, "\"name\":\"launch\""))
			c[job].job_dur_ps = field_ps(line, "\"dur\":");
	}
	fclose(f);
	return closed ? 0 : -1;
}

static int matmul(struct tpurt_device *dev, int64_t m, int64_t k, int64_t n,
		  int64_t block, struct tpurt_job_stats *st)
{
	int64_t xs[2] = { m, k }, ys[2] = { k, n }, zs[2] = { m, n };
	struct tpurt_matmul_opts opts = { .bm = block, .bk = block, .bn = block };
	struct tpurt_array *x = NULL, *y = NULL, *z = NULL;
	int ret = tpurt_array_create(dev, TPURT_BF16, 2, xs, &x) ||
		  tpurt_array_create(dev, TPURT_BF16, 2, ys, &y) ||
		  tpurt_array_create(dev, TPURT_BF16, 2, zs, &z) ||
		  tpurt_matmul(x, y, z, &opts, st);

	tpurt_array_free(x);
	tpurt_array_free(y);
	tpurt_array_free(z);
	return ret;
}

TEST(traced_jobs_match_their_statistics)
{
	static const int64_t shapes[JOBS][4] = {
		{ 256, 256, 256, 128 }, { 384, 256, 200, 128 }, { 128, 1024, 128, 128 },
	};
	struct tpurt_job_stats st[JOBS];
	struct job_counts c[JOBS];
	struct tpurt_device *dev;

	unlink(TRACE_PATH);
	ASSERT_EQ(0, setenv("TPURT_TRACE", TRACE_PATH, 1));
	if (open_device(&dev))
		SKIP(return, "no tpu device: %s", tpurt_last_error());
	for (int i = 0; i < JOBS; i++) {
		ASSERT_EQ(0, matmul(dev, shapes[i][0], shapes[i][1], shapes[i][2],
				    shapes[i][3], &st[i]))
			TH_LOG("job %d: %s", i, tpurt_last_error());
	}
	tpurt_close(dev);
	unsetenv("TPURT_TRACE");

	ASSERT_EQ(0, count_events(c, JOBS)) TH_LOG("%s missing or unfinished", TRACE_PATH);
	for (int i = 0; i < JOBS; i++) {
		TH_LOG("job %d: %" PRIu64 " steps, %" PRIu64 " ps modeled", i,
		       st[i].steps, st[i].model_time_ps);
		EXPECT_EQ(st[i].steps, c[i].device_steps);
		EXPECT_EQ(st[i].steps, c[i].host_steps);
		EXPECT_EQ(st[i].hbm_bytes_in, c[i].bytes_in);
		EXPECT_EQ(st[i].hbm_bytes_out, c[i].bytes_out);
		EXPECT_EQ(st[i].model_time_ps, c[i].job_dur_ps);
	}
	unlink(TRACE_PATH);
}

TPU_HARNESS_MAIN_OPEN(open_device)
