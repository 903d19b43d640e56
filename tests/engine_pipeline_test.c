// SPDX-License-Identifier: MIT
/*
 * Host test: pipeline semantics. Fetch skipping and write-back counts,
 * grid ranks 1 to 4, rank-3 blocks (copied, not viewed), edge blocks that
 * read zeros and write only in bounds, parallel/arbitrary mixes split
 * across cores.
 */
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"

static struct tpu_job_result run_mm_stats(uint32_t gi, uint32_t gj, uint32_t gk,
					  unsigned int cores)
{
	struct tdev *d = tdev_new(4 << 20, cores);
	struct mm_job j = { .m = gi * 16, .n = gj * 8, .k = gk * 32, .bm = 16,
			    .bn = 8, .bk = 32, .in_dtype = TPU_DTYPE_F32,
			    .out_dtype = TPU_DTYPE_F32 };
	struct tpu_job_result res;
	size_t len;
	void *blob;

	j.x_slot = tdev_alloc(d, j.m * j.k * 4);
	j.y_slot = tdev_alloc(d, j.k * j.n * 4);
	j.z_slot = tdev_alloc(d, j.m * j.n * 4);
	blob = mm_build(&j, &len);
	tdev_run(d, blob, len, 0, &res);
	free(blob);
	tdev_free(d);
	return res;
}

TEST(unchanged_input_block_is_not_refetched)
{
	/* grid (2, 3, 1): x's block (i, 0) repeats along j, y's (0, j) never */
	struct tpu_job_result r = run_mm_stats(2, 3, 1, 1);

	ASSERT_EQ(0, r.error.code) TH_LOG("%s", r.message);
	EXPECT_EQ(6, r.stats.steps);
	EXPECT_EQ(2 + 6, r.stats.blocks_fetched);
	EXPECT_EQ(4, r.stats.blocks_skipped);
	EXPECT_EQ(6, r.stats.blocks_written);
	EXPECT_EQ(2 * 16 * 32 * 4 + 6 * 32 * 8 * 4, r.stats.hbm_bytes_in);
	EXPECT_EQ(2 * 16 * 3 * 8 * 4, r.stats.hbm_bytes_out);
	EXPECT_EQ(r.stats.hbm_bytes_in, r.stats.model.hbm_bytes_in);
	EXPECT_EQ(2ull * 32 * 24 * 32, r.stats.mxu_flops);	/* m, n, k */
}

TEST(output_block_stays_resident_along_k)
{
	/* grid (2, 2, 3): inputs change every step; each z block written once */
	struct tpu_job_result r = run_mm_stats(2, 2, 3, 1);

	ASSERT_EQ(0, r.error.code) TH_LOG("%s", r.message);
	EXPECT_EQ(12, r.stats.steps);
	EXPECT_EQ(24, r.stats.blocks_fetched);
	EXPECT_EQ(0, r.stats.blocks_skipped);
	EXPECT_EQ(4, r.stats.blocks_written);
}

TEST(cores_split_parallel_iterations)
{
	struct tpu_job_result r = run_mm_stats(4, 3, 2, 3);

	ASSERT_EQ(0, r.error.code) TH_LOG("%s", r.message);
	EXPECT_EQ(3, r.stats.cores_used);
	EXPECT_EQ(24, r.stats.steps);
	EXPECT_EQ(12, r.stats.blocks_written);
	r = run_mm_stats(1, 1, 5, 4);	/* one parallel iteration: one core */
	EXPECT_EQ(1, r.stats.cores_used);
}

/* out = in through an identity op, with arbitrary rank and blocks. */
static void copy_job(struct __test_metadata *_metadata, unsigned int rank,
		     const uint64_t *shape, const uint32_t *block,
		     unsigned int cores, const char *sem)
{
	struct tdev *d = tdev_new(4 << 20, cores);
	uint64_t n = 1;
	uint32_t grid[4];
	char map[64] = "";
	struct jb *b = jb_new();
	struct tpu_job_result res;
	unsigned int in, out, guard;
	uint8_t *g;
	size_t len;
	void *blob;

	for (unsigned int dd = 0; dd < rank; dd++) {
		n *= shape[dd];
		grid[dd] = (shape[dd] + block[dd] - 1) / block[dd];
		snprintf(map + strlen(map), sizeof(map) - strlen(map), "pid%u ", dd);
	}
	in = tdev_alloc(d, n * 4);
	out = tdev_alloc(d, n * 4);
	guard = tdev_alloc(d, 256);
	ref_fill(tdev_ptr(d, in), TPU_DTYPE_F32, n, 5, -100, 100);
	jb_grid(b, rank, grid, sem);
	jb_operand(b, TPU_ROLE_INPUT, in, TPU_DTYPE_F32, rank, shape, block, map);
	jb_operand(b, TPU_ROLE_OUTPUT, out, TPU_DTYPE_F32, rank, shape, block, map);
	jb_unary(b, TPU_UNARY_IDENTITY, JB_OPND(1), JB_OPND(0), NULL);
	blob = jb_finish(b, &len);
	ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
	EXPECT_EQ(0, memcmp(tdev_ptr(d, in), tdev_ptr(d, out), n * 4));
	g = tdev_ptr(d, guard);
	for (int i = 0; i < 256; i++) {
		ASSERT_EQ(0x5c, g[i]) TH_LOG("write past the output at %d", i);
	}
	free(blob);
	jb_free(b);
	tdev_free(d);
}

TEST(grid_rank_1_with_edge)
{
	uint64_t s[1] = { 1000 };
	uint32_t bl[1] = { 128 };

	copy_job(_metadata, 1, s, bl, 2, "p");
	copy_job(_metadata, 1, s, bl, 1, "a");
}

TEST(rank_3_blocks_copied_with_edges)
{
	uint64_t s[3] = { 5, 7, 11 };
	uint32_t bl[3] = { 2, 3, 5 };

	copy_job(_metadata, 3, s, bl, 1, "ppp");
	copy_job(_metadata, 3, s, bl, 4, "apa");
}

TEST(rank_4_grid)
{
	uint64_t s[4] = { 3, 4, 9, 33 };
	uint32_t bl[4] = { 1, 3, 4, 16 };

	copy_job(_metadata, 4, s, bl, 2, "ppap");
	copy_job(_metadata, 4, s, bl, 3, "aapp");
}

TEST(batched_matmul_rank_4_grid_viewed_rank_3_blocks)
{
	/* z[b] = x[b] @ y[b], grid (B, M/bm, N/bn, K/bk), blocks (1, bm, bk) */
	enum { B = 3, M = 40, K = 48, N = 24, BM = 16, BK = 16, BN = 8 };
	struct tdev *d = tdev_new(4 << 20, 2);
	uint64_t xs[3] = { B, M, K }, ys[3] = { B, K, N }, zs[3] = { B, M, N };
	uint32_t xb[3] = { 1, BM, BK }, yb[3] = { 1, BK, BN }, zb[3] = { 1, BM, BN };
	uint32_t grid[4] = { B, (M + BM - 1) / BM, N / BN, K / BK };
	unsigned int xsl = tdev_alloc(d, B * M * K * 4);
	unsigned int ysl = tdev_alloc(d, B * K * N * 4);
	unsigned int zsl = tdev_alloc(d, B * M * N * 4);
	float *x = tdev_ptr(d, xsl), *y = tdev_ptr(d, ysl), *z = tdev_ptr(d, zsl);
	struct jb *b = jb_new();
	struct tpu_job_result res;
	size_t len;
	void *blob;
	int bad = 0;

	ref_fill(x, TPU_DTYPE_F32, B * M * K, 1, -4, 4);
	ref_fill(y, TPU_DTYPE_F32, B * K * N, 2, -4, 4);
	jb_grid(b, 4, grid, "pppa");
	jb_operand(b, TPU_ROLE_INPUT, xsl, TPU_DTYPE_F32, 3, xs, xb, "pid0 pid1 pid3");
	jb_operand(b, TPU_ROLE_INPUT, ysl, TPU_DTYPE_F32, 3, ys, yb, "pid0 pid3 pid2");
	jb_operand(b, TPU_ROLE_OUTPUT, zsl, TPU_DTYPE_F32, 3, zs, zb, "pid0 pid1 pid2");
	jb_zero(b, JB_OPND(2), "pid3 0 ==");
	jb_dot(b, JB_OPND(2), JB_OPND(0), JB_OPND(1), TPU_DOT_ACCUMULATE, NULL);
	blob = jb_finish(b, &len);
	ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
	for (int bb = 0; bb < B; bb++)
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++) {
				float acc = 0;

				for (int p = 0; p < K; p++)
					acc += x[(bb * M + i) * K + p] * y[(bb * K + p) * N + j];
				bad += acc != z[(bb * M + i) * N + j];
			}
	EXPECT_EQ(0, bad);
	free(blob);
	jb_free(b);
	tdev_free(d);
}

TEST(edge_block_reads_zero_padding)
{
	/* sum of a padded block: the padding must contribute nothing */
	struct tdev *d = tdev_new(1 << 20, 1);
	uint64_t xs[2] = { 3, 5 }, zs[2] = { 3, 1 }, os[2] = { 8, 1 };
	uint32_t xb[2] = { 4, 8 }, zb[2] = { 4, 1 }, ob[2] = { 8, 1 };
	unsigned int xsl = tdev_alloc(d, 15 * 4), osl = tdev_alloc(d, 8 * 4);
	unsigned int zsl = tdev_alloc(d, 3 * 4);
	float *ones = tdev_ptr(d, osl), *z = tdev_ptr(d, zsl);
	struct jb *b = jb_new();
	struct tpu_job_result res;
	uint32_t grid[1] = { 1 };
	size_t len;
	void *blob;

	/* the bytes after x in HBM are 0x5c: garbage if read unpadded */
	ref_fill(tdev_ptr(d, xsl), TPU_DTYPE_F32, 15, 1, 1, 1);
	for (int i = 0; i < 8; i++)
		ones[i] = 1;
	jb_grid(b, 1, grid, "p");
	jb_operand(b, TPU_ROLE_INPUT, xsl, TPU_DTYPE_F32, 2, xs, xb, "0 0");
	jb_operand(b, TPU_ROLE_INPUT, osl, TPU_DTYPE_F32, 2, os, ob, "0 0");
	jb_operand(b, TPU_ROLE_OUTPUT, zsl, TPU_DTYPE_F32, 2, zs, zb, "0 0");
	jb_dot(b, JB_OPND(2), JB_OPND(0), JB_OPND(1), 0, NULL);
	blob = jb_finish(b, &len);
	ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
	for (int i = 0; i < 3; i++)
		EXPECT_EQ(5.0f, z[i]);
	free(blob);
	jb_free(b);
	tdev_free(d);
}

TEST_HARNESS_MAIN
