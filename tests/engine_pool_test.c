// SPDX-License-Identifier: MIT
/*
 * Host test: the engine's worker pool and the VMEM it keeps between jobs.
 * Jobs of changing shapes on one engine give the results of fresh engines
 * (no state leaks from one job into the next), and jobs submitted from
 * several threads at once (one holds the pool, the others run on threads
 * of their own) all finish with the right results.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"

struct mm_case {
	struct tdev *d;
	struct mm_job j;
	void *blob, *want;
	size_t len, out_bytes;
	int ret;
};

static void case_init(struct mm_case *c, struct tdev *d, uint64_t m,
		      uint64_t k, uint64_t n, uint32_t b, unsigned int in,
		      unsigned int out)
{
	unsigned int es = tpu_dtype_size(in);

	memset(c, 0, sizeof(*c));
	c->d = d;
	c->j = (struct mm_job){ .m = m, .k = k, .n = n, .bm = b, .bk = b,
				.bn = b, .in_dtype = in, .out_dtype = out,
				.acc_scratch = true };
	c->j.x_slot = tdev_alloc(d, m * k * es);
	c->j.y_slot = tdev_alloc(d, k * n * es);
	c->j.z_slot = tdev_alloc(d, m * n * tpu_dtype_size(out));
	ref_fill(tdev_ptr(d, c->j.x_slot), in, m * k, (uint32_t)m, -3, 3);
	ref_fill(tdev_ptr(d, c->j.y_slot), in, k * n, (uint32_t)n, -3, 3);
	c->out_bytes = m * n * tpu_dtype_size(out);
	c->want = malloc(c->out_bytes);
	ref_matmul(&c->j, tdev_ptr(d, c->j.x_slot), tdev_ptr(d, c->j.y_slot),
		   NULL, c->want);
	c->blob = mm_build(&c->j, &c->len);
}

static int case_run(struct mm_case *c)
{
	struct tpu_job_result res;

	memset(tdev_ptr(c->d, c->j.z_slot), 0x5c, c->out_bytes);
	c->ret = tdev_run(c->d, c->blob, c->len, 0, &res);
	if (c->ret)
		return c->ret;
	return memcmp(c->want, tdev_ptr(c->d, c->j.z_slot), c->out_bytes) ? -1 : 0;
}

static void case_free(struct mm_case *c)
{
	free(c->blob);
	free(c->want);
}

TEST(jobs_of_changing_shapes_on_one_engine)
{
	struct tdev *d = tdev_new(16 << 20, 3);
	struct mm_case c[4];

	case_init(&c[0], d, 256, 256, 256, 128, TPU_DTYPE_F32, TPU_DTYPE_F32);
	case_init(&c[1], d, 100, 70, 90, 32, TPU_DTYPE_BF16, TPU_DTYPE_BF16);
	case_init(&c[2], d, 130, 300, 129, 64, TPU_DTYPE_INT8, TPU_DTYPE_INT32);
	case_init(&c[3], d, 7, 200, 3, 4, TPU_DTYPE_F32, TPU_DTYPE_BF16);
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 4; i++) {
			EXPECT_EQ(0, case_run(&c[i]))
				TH_LOG("case %d round %d", i, round);
		}
	for (int i = 0; i < 4; i++)
		case_free(&c[i]);
	tdev_free(d);
}

static void *run_thread(void *arg)
{
	struct mm_case *c = arg;

	for (int i = 0; i < 5 && !c->ret; i++)
		c->ret = case_run(c);
	return NULL;
}

TEST(jobs_from_several_threads_at_once)
{
	struct tdev *d = tdev_new(16 << 20, 2);
	struct mm_case c[3];
	pthread_t t[3];

	case_init(&c[0], d, 256, 128, 256, 64, TPU_DTYPE_F32, TPU_DTYPE_F32);
	case_init(&c[1], d, 200, 96, 72, 32, TPU_DTYPE_BF16, TPU_DTYPE_F32);
	case_init(&c[2], d, 192, 256, 160, 32, TPU_DTYPE_INT8, TPU_DTYPE_INT32);
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(0, pthread_create(&t[i], NULL, run_thread, &c[i]));
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		EXPECT_EQ(0, c[i].ret) TH_LOG("thread %d", i);
		case_free(&c[i]);
	}
	tdev_free(d);
}

TEST_HARNESS_MAIN
