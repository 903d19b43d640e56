// SPDX-License-Identifier: MIT
/*
 * Host test: timeline traces. Jobs on the in-process device with
 * TPURT_TRACE set (the device fills each job's trace buffer, as in the VM), and a what-if of tpurt-model --trace, are loaded as JSON
 * (tests/trace_check.py, python's json module) and checked against the
 * statistics their jobs reported: step, MXU and host events per step, the
 * bytes of DMA events, busy and bubble sums, steps tiling each core's
 * timeline, and the last event ending at the job's modeled time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tpurt.h"
#include "kselftest_harness.h"

#ifndef TRACE_CHECK
#error "build with -DTRACE_CHECK=path/to/trace_check.py"
#endif
#ifndef TPURT_MODEL
#error "build with -DTPURT_MODEL=path/to/tpurt-model"
#endif

FIXTURE(trace) {
	char dir[64];
	char trace[96], expected[96];
};

FIXTURE_SETUP(trace)
{
	snprintf(self->dir, sizeof(self->dir), "/tmp/tpurt_trace_test.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->dir));
	snprintf(self->trace, sizeof(self->trace), "%s/trace.json", self->dir);
	snprintf(self->expected, sizeof(self->expected), "%s/expected.json",
		 self->dir);
	if (system("python3 -c 'import json' 2>/dev/null"))
		SKIP(return, "no python3 to load the JSON with");
}

FIXTURE_TEARDOWN(trace)
{
	unlink(self->trace);
	unlink(self->expected);
	rmdir(self->dir);
}

/* The checker's verdict on @trace against @expected: its exit status. */
static int check(const char *trace, const char *expected)
{
	char cmd[512];
	int st;

	snprintf(cmd, sizeof(cmd), "python3 %s %s %s", TRACE_CHECK, trace,
		 expected);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct mm_case {
	int64_t m, k, n, bm, bk, bn;
	enum tpurt_dtype in, out;
	enum tpurt_activation act;
};

static int run_matmul(struct tpurt_device *dev, const struct mm_case *c,
		      struct tpurt_job_stats *st)
{
	int64_t xs[2] = { c->m, c->k }, ys[2] = { c->k, c->n };
	int64_t zs[2] = { c->m, c->n };
	struct tpurt_matmul_opts opts = {
		.bm = c->bm, .bk = c->bk, .bn = c->bn, .activation = c->act,
	};
	struct tpurt_array *x = NULL, *y = NULL, *z = NULL;
	int ret = tpurt_array_create(dev, c->in, 2, xs, &x) ||
		  tpurt_array_create(dev, c->in, 2, ys, &y) ||
		  tpurt_array_create(dev, c->out, 2, zs, &z) ||
		  tpurt_matmul(x, y, z, &opts, st);

	tpurt_array_free(x);
	tpurt_array_free(y);
	tpurt_array_free(z);
	return ret;
}

static void put_stats(FILE *f, const struct tpurt_job_stats *st, bool last)
{
	fprintf(f, "{\"steps\": %llu, \"cores_used\": %u, "
		"\"model_time_ps\": %llu, \"model_mxu_busy_ps\": %llu, "
		"\"model_dma_busy_ps\": %llu, \"model_bubble_ps\": %llu, "
		"\"hbm_bytes_in\": %llu, \"hbm_bytes_out\": %llu, "
		"\"every_step_mxu\": true}%s\n",
		(unsigned long long)st->steps, st->cores_used,
		(unsigned long long)st->model_time_ps,
		(unsigned long long)st->model_mxu_busy_ps,
		(unsigned long long)st->model_dma_busy_ps,
		(unsigned long long)st->model_bubble_ps,
		(unsigned long long)st->hbm_bytes_in,
		(unsigned long long)st->hbm_bytes_out, last ? "" : ",");
}

/*
 * Matmuls on a 2-core device: edge blocks, blocks that repeat (fetches
 * skipped), a fused transcendental activation (vector work beside the
 * MXU's), 8-bit inputs, and a grid with fewer parallel units than cores.
 */
TEST_F(trace, sim_jobs_match_their_reports)
{
	static const struct mm_case cases[] = {
		{ 300, 200, 260, 128, 128, 128, TPURT_F32, TPURT_F32, TPURT_IDENTITY },
		{ 256, 512, 384, 128, 256, 128, TPURT_BF16, TPURT_BF16, TPURT_GELU },
		{ 128, 256, 256, 128, 128, 256, TPURT_INT8, TPURT_INT32, TPURT_IDENTITY },
		{ 64, 640, 128, 64, 128, 128, TPURT_F32, TPURT_F32, TPURT_TANH },
	};
	const size_t n = sizeof(cases) / sizeof(cases[0]);
	struct tpurt_sim_config cfg = { .hbm_size = 64 << 20, .cores = 2 };
	struct tpurt_job_stats st[sizeof(cases) / sizeof(cases[0])];
	struct tpurt_device *dev;
	FILE *f;

	ASSERT_EQ(0, setenv("TPURT_TRACE", self->trace, 1));
	ASSERT_EQ(0, tpurt_open_sim(&cfg, &dev)) TH_LOG("%s", tpurt_last_error());
	for (size_t i = 0; i < n; i++) {
		ASSERT_EQ(0, run_matmul(dev, &cases[i], &st[i]))
			TH_LOG("case %zu: %s", i, tpurt_last_error());
	}
	unsetenv("TPURT_TRACE");
	tpurt_close(dev);
	EXPECT_EQ(2, st[0].cores_used);

	f = fopen(self->expected, "w");
	ASSERT_NE(NULL, f);
	fprintf(f, "{\"host\": true, \"jobs\": [\n");
	for (size_t i = 0; i < n; i++)
		put_stats(f, &st[i], i == n - 1);
	fprintf(f, "]}\n");
	ASSERT_EQ(0, fclose(f));
	EXPECT_EQ(0, check(self->trace, self->expected));
}

/* tpurt-model's what-if trace against its own --json figures. */
TEST_F(trace, model_what_if_matches_its_figures)
{
	static const char *const what_ifs[] = {
		"--m 1024 --k 1024 --n 1024 --bm 128 --bk 128 --bn 128",
		"--m 1000 --k 700 --n 900 --bm 256 --bk 512 --bn 128 --dtype f32 --cores 2",
		"--m 2048 --k 2048 --n 2048 --best --cores 3",
		"--m 300 --k 5000 --n 200 --bm 128 --bk 1024 --bn 256 --dtype int8 --out-dtype int32 --cores 4",
	};
	char cmd[512];

	for (size_t i = 0; i < sizeof(what_ifs) / sizeof(*what_ifs); i++) {
		snprintf(cmd, sizeof(cmd), "%s %s --json --trace %s > %s",
			 TPURT_MODEL, what_ifs[i], self->trace, self->expected);
		ASSERT_EQ(0, system(cmd)) TH_LOG("%s", cmd);
		EXPECT_EQ(0, check(self->trace, self->expected))
			TH_LOG("%s", what_ifs[i]);
	}
}

/* A trace that cannot be written fails the job, naming the variable. */
TEST_F(trace, unwritable_trace_fails_the_job)
{
	static const struct mm_case c = {
		128, 128, 128, 128, 128, 128, TPURT_F32, TPURT_F32, TPURT_IDENTITY,
	};
	struct tpurt_sim_config cfg = { .hbm_size = 64 << 20 };
	struct tpurt_job_stats st;
	struct tpurt_device *dev;
	char path[128];

	snprintf(path, sizeof(path), "%s/no/such/dir/trace.json", self->dir);
	ASSERT_EQ(0, setenv("TPURT_TRACE", path, 1));
	ASSERT_EQ(0, tpurt_open_sim(&cfg, &dev)) TH_LOG("%s", tpurt_last_error());
	EXPECT_NE(0, run_matmul(dev, &c, &st));
	unsetenv("TPURT_TRACE");
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "TPURT_TRACE"))
		TH_LOG("%s", tpurt_last_error());
	tpurt_close(dev);
}

TEST_HARNESS_MAIN
