// SPDX-License-Identifier: MIT
/*
 * Host test: scripts/bench-json.sh gathers a benchmark's "bench: NAME =
 * VALUE UNIT" lines into one JSON file, keeps the benchmark's exit status,
 * and passes its output through. The file is loaded with python's json
 * module and compared field by field.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"

#ifndef BENCH_JSON
#error "build with -DBENCH_JSON=path/to/bench-json.sh"
#endif

static int run(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(figures_status_and_output)
{
	char dir[] = "/tmp/bench_json_test.XXXXXX", cmd[1024];

	if (run("python3 -c 'import json' 2>/dev/null"))
		SKIP(return, "no python3 to load the JSON with");
	ASSERT_NE(NULL, mkdtemp(dir));
	/* a benchmark that prints figures among other lines and fails */
	snprintf(cmd, sizeof(cmd),
		 "BENCH_JSON_DIR=%s %s demo -- sh -c '"
		 "echo \"bench: gflops_4096 = 150.8 GFLOP/s\"; echo noise; "
		 "printf \"bench: ratio = 0.95 x\\r\\n\"; "
		 "echo \"  [guest] bench: util = 91.60 %%\"; "
		 "echo \"bench: err = 1.2e-05\"; echo \"bench: odd = 1. x\"; exit 3' "
		 "> %s/out.txt", dir, BENCH_JSON, dir);
	EXPECT_EQ(3, run(cmd));
	snprintf(cmd, sizeof(cmd), "grep -q '^noise$' %s/out.txt", dir);
	EXPECT_EQ(0, run(cmd)) TH_LOG("the output is not passed through");
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import json, glob, sys\n"
		 "files = glob.glob(\"%s/results-*-demo.json\")\n"
		 "assert len(files) == 1, files\n"
		 "d = json.load(open(files[0]))\n"
		 "f = [(x[\"name\"], x[\"value\"], x[\"unit\"]) for x in d[\"figures\"]]\n"
		 "want = [(\"gflops_4096\", 150.8, \"GFLOP/s\"), (\"ratio\", 0.95, \"x\"),\n"
		 "        (\"util\", 91.6, \"%%\"), (\"err\", 1.2e-05, \"\"),\n"
		 "        (\"odd\", \"1.\", \"x\")]\n"
		 "assert f == want, f\n"
		 "assert d[\"run\"] == \"demo\" and d[\"exit_status\"] == 3, d\n"
		 "'", dir);
	EXPECT_EQ(0, run(cmd));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	run(cmd);
}

TEST(bad_usage)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "%s demo true 2>/dev/null", BENCH_JSON);
	EXPECT_EQ(2, run(cmd));
	snprintf(cmd, sizeof(cmd), "%s 'a b' -- true 2>/dev/null", BENCH_JSON);
	EXPECT_EQ(2, run(cmd));
}

TEST_HARNESS_MAIN
