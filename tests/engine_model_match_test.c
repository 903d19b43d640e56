// SPDX-License-Identifier: MIT
/*
 * Host test: the engine running the guide's matmul job in model-only mode
 * reports the modeled time and statistics tpu_model_matmul() computes for
 * the same matmul (edge blocks, uneven core splits, each dtype, 1 and 2
 * cores), and a full run reports the same model as a model-only one.
 * Two walks of one schedule must agree, or one of them is not Pallas's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"
#include "tpu_model_matmul.h"

struct mcase {
	uint64_t m, k, n;
	uint32_t bm, bk, bn;
	unsigned int in, out;
	bool transpose_rhs;
};

static const struct mcase cases[] = {
	{ 256, 256, 256, 128, 128, 128, TPU_DTYPE_F32, TPU_DTYPE_F32, false },
	{ 300, 200, 260, 128, 128, 128, TPU_DTYPE_BF16, TPU_DTYPE_BF16, false },
	{ 100, 70, 90, 32, 16, 64, TPU_DTYPE_INT8, TPU_DTYPE_INT32, false },
	{ 320, 96, 64, 64, 32, 64, TPU_DTYPE_BF16, TPU_DTYPE_F32, false }, /* 5 units */
	{ 130, 300, 129, 64, 128, 32, TPU_DTYPE_INT8, TPU_DTYPE_INT8, true },
	{ 1024, 1024, 1024, 512, 1024, 1024, TPU_DTYPE_F32, TPU_DTYPE_F32, false },
	{ 7, 200, 3, 4, 64, 2, TPU_DTYPE_F32, TPU_DTYPE_BF16, true },
};

static bool close_to(double a, double b)
{
	return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

static void engine_model(struct __test_metadata *_metadata,
			 const struct mcase *c, unsigned int cores,
			 unsigned int flags, struct tpu_job_result *res)
{
	struct tdev *d = tdev_new(32 << 20, cores);
	struct mm_job j = { .m = c->m, .k = c->k, .n = c->n, .bm = c->bm,
			    .bk = c->bk, .bn = c->bn, .in_dtype = c->in,
			    .out_dtype = c->out, .transpose_rhs = c->transpose_rhs,
			    .acc_scratch = true };
	size_t len;
	void *blob;

	j.x_slot = tdev_alloc(d, c->m * c->k * tpu_dtype_size(c->in));
	j.y_slot = tdev_alloc(d, c->k * c->n * tpu_dtype_size(c->in));
	j.z_slot = tdev_alloc(d, c->m * c->n * tpu_dtype_size(c->out));
	ref_fill(tdev_ptr(d, j.x_slot), c->in, c->m * c->k, 1, -2, 2);
	ref_fill(tdev_ptr(d, j.y_slot), c->in, c->k * c->n, 2, -2, 2);
	blob = mm_build(&j, &len);
	jb_header(blob)->vmem_limit_bytes = 96ull << 20;
	ASSERT_EQ(0, tdev_run(d, blob, len, flags, res)) TH_LOG("%s", res->message);
	free(blob);
	tdev_free(d);
}

static void check_case(struct __test_metadata *_metadata, const struct mcase *c,
		       unsigned int cores)
{
	struct tpu_matmul_desc md = { .m = c->m, .k = c->k, .n = c->n,
				      .bm = c->bm, .bk = c->bk, .bn = c->bn,
				      .in_dtype = c->in, .out_dtype = c->out,
				      .transpose_rhs = c->transpose_rhs,
				      .cores = cores };
	struct tpu_matmul_result want;
	struct tpu_job_result got, full;
	struct tpu_config cfg;
	const struct tpu_model_stats *w = &want.stats, *g = &got.stats.model;

	tpu_config_defaults(&cfg);
	cfg.cores = cores;
	ASSERT_EQ(0, tpu_model_matmul(&cfg, &md, &want));
	engine_model(_metadata, c, cores, TPU_RUN_MODEL_ONLY, &got);
	TH_LOG("case %llux%llux%llu b %u,%u,%u dtype %u cores %u",
	       (unsigned long long)c->m, (unsigned long long)c->k,
	       (unsigned long long)c->n, c->bm, c->bk, c->bn, c->in, cores);
	EXPECT_TRUE(close_to(w->time_s, g->time_s))
		TH_LOG("time %.12g != %.12g", g->time_s, w->time_s);
	EXPECT_TRUE(close_to(w->mxu_busy_s, g->mxu_busy_s));
	EXPECT_TRUE(close_to(w->dma_busy_s, g->dma_busy_s));
	EXPECT_TRUE(close_to(w->bubble_s, g->bubble_s))
		TH_LOG("bubble %.12g != %.12g", g->bubble_s, w->bubble_s);
	EXPECT_EQ(w->hbm_bytes_in, g->hbm_bytes_in);
	EXPECT_EQ(w->hbm_bytes_out, g->hbm_bytes_out);
	EXPECT_EQ(w->flops, g->flops);
	EXPECT_EQ(w->steps, g->steps);
	EXPECT_EQ(want.blocks_fetched, got.stats.blocks_fetched);
	EXPECT_EQ(want.blocks_skipped, got.stats.blocks_skipped);
	EXPECT_EQ(want.blocks_written, got.stats.blocks_written);
	EXPECT_EQ(want.cores, got.stats.cores_used);
	/* running the data does not change the model */
	engine_model(_metadata, c, cores, 0, &full);
	EXPECT_EQ(0, memcmp(&got.stats.model, &full.stats.model,
			    sizeof(full.stats.model)));
}

TEST(model_only_engine_runs_match_tpu_model_matmul)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (unsigned int cores = 1; cores <= 2; cores++)
			check_case(_metadata, &cases[i], cores);
}

TEST_HARNESS_MAIN
