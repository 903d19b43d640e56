// SPDX-License-Identifier: MIT
/*
 * The Pallas TPU memory model on the device, through the samples' kernels
 * (samples/memory_kernels.c): the hand-made double-buffered pipeline with
 * DMA semaphores, the sparse doc's DSD kernel with its zeros array aliased
 * to the output, and paged attention with async page copies prefetched
 * across grid steps; at small and edge sizes (one step, odd steps, rows
 * with no blocks, lengths not a multiple of the block, lengths 0), each
 * against a double-precision reference computed here, and each again in
 * debug mode. And two broken pipelines: a wait with no copy in flight
 * fails the job with a semaphore error (never hangs), and reading a slot
 * before its copy's wait is a hazard in debug mode.
 *
 * TPUEMU_SAMPLE_SIM=1 runs it on the in-process device (the host build,
 * `make host-samples`).
 */
#include <string.h>

#include "tpu_job.h"
#include "memory_kernels.h"
#include "sample_util.h"
#include "kselftest_harness.h"
#include "tpu_require_device.h"

/* --- manual_pipeline --- */

FIXTURE(manual_pipeline) {
	struct tpurt_device *dev;
};

FIXTURE_VARIANT(manual_pipeline) {
	struct mp_shape s;
};

/* dtype, rows, cols, bm */
FIXTURE_VARIANT_ADD(manual_pipeline, one_step) { { TPURT_F32, 64, 128, 64 } };
FIXTURE_VARIANT_ADD(manual_pipeline, two_steps) { { TPURT_F32, 16, 256, 8 } };
FIXTURE_VARIANT_ADD(manual_pipeline, odd_steps_bf16) { { TPURT_BF16, 48, 128, 16 } };
FIXTURE_VARIANT_ADD(manual_pipeline, many_steps) { { TPURT_F32, 512, 128, 32 } };

FIXTURE_SETUP(manual_pipeline)
{
	ASSERT_EQ(0, sample_open(&self->dev)) TH_LOG("%s", tpurt_last_error());
}

FIXTURE_TEARDOWN(manual_pipeline)
{
	tpurt_close(self->dev);
}

TEST_F(manual_pipeline, matches_reference)
{
	bool correct;

	ASSERT_EQ(0, mp_run(self->dev, &variant->s, 0, 0, NULL, &correct))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_TRUE(correct);
}

TEST_F(manual_pipeline, debug_mode)
{
	bool correct;

	ASSERT_EQ(0, mp_run(self->dev, &variant->s, 0, TPURT_DEBUG, NULL, &correct))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_TRUE(correct);
}

/*
 * Step 0 waits for a copy nobody started: the job fails at once (no hang)
 * with a semaphore error at step 0, the message naming the semaphore.
 */
TEST_F(manual_pipeline, wait_without_copy_fails)
{
	struct tpurt_job_stats st = { 0 };
	bool correct;

	EXPECT_NE(0, mp_run(self->dev, &variant->s, MP_NO_PROLOGUE, 0, &st,
			    &correct));
	EXPECT_EQ(TPU_JOB_ERR_SEMAPHORE, st.error.code);
	EXPECT_EQ(0, st.error.step);
	EXPECT_NE(NULL, strcasestr(tpurt_last_error(), "semaphore"))
		TH_LOG("%s", tpurt_last_error());
}

/*
 * Adding before the wait reads a slot a copy in flight writes: a hazard
 * at step 0 in debug mode (elsewhere the copy's data has moved when it
 * starts, so only debug mode can see it).
 */
TEST_F(manual_pipeline, read_before_wait_is_a_hazard_in_debug)
{
	struct tpurt_job_stats st = { 0 };
	bool correct;

	EXPECT_NE(0, mp_run(self->dev, &variant->s, MP_READ_BEFORE_WAIT,
			    TPURT_DEBUG, &st, &correct));
	EXPECT_EQ(TPU_JOB_ERR_HAZARD, st.error.code)
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(0, st.error.step);
}

/* --- sparse_dsd --- */

FIXTURE(sparse_dsd) {
	struct tpurt_device *dev;
};

FIXTURE_VARIANT(sparse_dsd) {
	struct dsd_shape s;
	const char *mask;
};

/* dtype, m, k, n, bm, bk, bn; block mask rows */
FIXTURE_VARIANT_ADD(sparse_dsd, one_block) {
	{ TPURT_F32, 128, 128, 128, 128, 128, 128 }, "1" };
FIXTURE_VARIANT_ADD(sparse_dsd, empty_first_and_last_rows) {
	{ TPURT_F32, 512, 256, 256, 128, 128, 128 }, "00" "11" "10" "00" };
FIXTURE_VARIANT_ADD(sparse_dsd, single_block_rows_bf16) {
	{ TPURT_BF16, 384, 384, 256, 128, 128, 128 }, "001" "000" "100" };
FIXTURE_VARIANT_ADD(sparse_dsd, dense_bf16) {
	{ TPURT_BF16, 256, 256, 256, 128, 128, 128 }, "11" "11" };

FIXTURE_SETUP(sparse_dsd)
{
	ASSERT_EQ(0, sample_open(&self->dev)) TH_LOG("%s", tpurt_last_error());
}

FIXTURE_TEARDOWN(sparse_dsd)
{
	tpurt_close(self->dev);
}

TEST_F(sparse_dsd, matches_reference)
{
	bool correct;

	ASSERT_EQ(0, dsd_run(self->dev, &variant->s, variant->mask, 0, NULL,
			     &correct))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_TRUE(correct);
}

/* Debug mode poisons new output blocks; blocks never visited keep the alias's zeros. */
TEST_F(sparse_dsd, debug_mode)
{
	bool correct;

	ASSERT_EQ(0, dsd_run(self->dev, &variant->s, variant->mask, TPURT_DEBUG,
			     NULL, &correct))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_TRUE(correct);
}

/* --- paged_attention --- */

#define MAX_BATCH 8

FIXTURE(paged) {
	struct tpurt_device *dev;
};

FIXTURE_VARIANT(paged) {
	struct paged_shape s;
	int32_t lengths[MAX_BATCH];
};

/*
 * dtype, batch, heads, kv_heads, head_dim, page_size, total_pages,
 * pages_per_seq, pages_per_block; lengths
 */
FIXTURE_VARIANT_ADD(paged, one_block) {
	{ TPURT_F32, 1, 1, 1, 128, 16, 4, 2, 2 }, { 32 } };
FIXTURE_VARIANT_ADD(paged, one_page_blocks) {
	{ TPURT_F32, 2, 2, 2, 128, 8, 8, 4, 1 }, { 32, 9 } };
FIXTURE_VARIANT_ADD(paged, ragged_lengths_gqa) {
	{ TPURT_F32, 3, 4, 2, 128, 16, 40, 8, 2 }, { 5, 128, 33 } };
FIXTURE_VARIANT_ADD(paged, zero_lengths_bf16) {
	{ TPURT_BF16, 5, 2, 1, 128, 16, 40, 4, 2 }, { 0, 17, 0, 0, 64 } };
FIXTURE_VARIANT_ADD(paged, mqa_bf16_out) {
	{ TPURT_BF16, 2, 8, 1, 128, 32, 12, 4, 2 }, { 100, 1 } };
FIXTURE_VARIANT_ADD(paged, all_zero_lengths) {
	{ TPURT_F32, 2, 1, 1, 128, 16, 4, 2, 1 }, { 0, 0 } };

FIXTURE_SETUP(paged)
{
	ASSERT_EQ(0, sample_open(&self->dev)) TH_LOG("%s", tpurt_last_error());
}

FIXTURE_TEARDOWN(paged)
{
	tpurt_close(self->dev);
}

TEST_F(paged, matches_reference)
{
	bool correct;

	ASSERT_EQ(0, paged_run(self->dev, &variant->s, variant->lengths, 0, NULL,
			       &correct))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_TRUE(correct);
}

/*
 * Debug mode: hazards between the page copies in flight and the body's
 * reads, semaphores left non-zero, poisoned scratch reaching o.
 */
TEST_F(paged, debug_mode)
{
	bool correct;

	ASSERT_EQ(0, paged_run(self->dev, &variant->s, variant->lengths,
			       TPURT_DEBUG, NULL, &correct))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_TRUE(correct);
}

TPU_HARNESS_MAIN_OPEN(sample_open)
