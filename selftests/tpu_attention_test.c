// SPDX-License-Identifier: MIT
/*
 * Kernels beyond matmul on the device: the row softmax and flash
 * attention's forward pass (the samples' kernels, samples/kernels.c) at a
 * single tile, edge blocks and unequal blocks, causal and not, against
 * double-precision references on the guest. And debug mode: a flash
 * attention that forgets to initialise m or l must fail visibly under
 * TPURT_DEBUG (a NaN in the output, or a failed job), and the same kernel
 * with its initialisation must pass there.
 *
 * TPUEMU_SAMPLE_SIM=1 runs it on the in-process device (the host build,
 * `make host-samples`).
 */
#include <math.h>
#include <stdlib.h>

#include "kernels.h"
#include "sample_util.h"
#include "kselftest_harness.h"
#include "tpu_require_device.h"

/* --- softmax --- */

FIXTURE(softmax) {
	struct tpurt_device *dev;
};

FIXTURE_VARIANT(softmax) {
	enum tpurt_dtype dtype;
	int64_t rows, cols, br;
	float scale;			/* logits in [-scale, scale) */
};

FIXTURE_VARIANT_ADD(softmax, one_tile_f32) { TPURT_F32, 8, 128, 8, 4.0f };
FIXTURE_VARIANT_ADD(softmax, edge_f32_huge_logits) { TPURT_F32, 200, 300, 64, 1e4f };
FIXTURE_VARIANT_ADD(softmax, edge_bf16) { TPURT_BF16, 130, 256, 128, 8.0f };
FIXTURE_VARIANT_ADD(softmax, edge_bf16_huge_logits) { TPURT_BF16, 77, 128, 32, 1e4f };

FIXTURE_SETUP(softmax)
{
	ASSERT_EQ(0, sample_open(&self->dev)) TH_LOG("%s", tpurt_last_error());
}

FIXTURE_TEARDOWN(softmax)
{
	tpurt_close(self->dev);
}

TEST_F(softmax, matches_reference)
{
	const struct tpurt_compiler_params params = {
		.dimension_semantics = "parallel",
	};
	int64_t rows = variant->rows, cols = variant->cols;
	int64_t shape[2] = { rows, cols };
	struct tpurt_grid_spec *gs = softmax_spec(variant->dtype, rows, cols,
						  variant->br);
	float *x = malloc(rows * cols * sizeof(float));
	double *want = malloc(rows * cols * sizeof(double));
	struct tpurt_array *xa, *oa;
	struct tpurt_kernel *k;
	void *o;

	ASSERT_NE(NULL, gs) TH_LOG("%s", tpurt_last_error());
	ASSERT_TRUE(x && want);
	sample_fill(x, TPURT_F32, rows * cols, 41);
	for (int64_t i = 0; i < rows * cols; i++)
		x[i] *= variant->scale;
	if (variant->dtype == TPURT_BF16)
		round_to_bf16(x, rows * cols);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, softmax_kernel(k, gs)) TH_LOG("%s", tpurt_last_error());
	xa = sample_array_of(self->dev, variant->dtype, 2, shape, x, NULL);
	ASSERT_NE(NULL, xa);
	ASSERT_EQ(0, tpurt_array_create(self->dev, variant->dtype, 2, shape, &oa));
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, &params,
				       (struct tpurt_array *[]){ xa, oa }, 2, NULL))
		TH_LOG("%s", tpurt_last_error());
	o = sample_read(oa);
	ASSERT_NE(NULL, o);
	softmax_reference(x, rows, cols, want);
	EXPECT_TRUE(sample_check_close("softmax", o, variant->dtype, want,
				       rows * cols, 1e-7,
				       variant->dtype == TPURT_BF16 ? 8e-3 : 3e-5));
	free(x), free(want), free(o);
	tpurt_array_free(xa), tpurt_array_free(oa);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
}

/* --- flash attention --- */

/* A device, the kernel's grid spec, and q, k, v, o on it and on the host. */
struct attn_data {
	struct tpurt_device *dev;
	struct attn_shape s;
	struct tpurt_grid_spec *gs;
	float *h[3];			/* q, k, v as bf16 values */
	struct tpurt_array *a[4];	/* q, k, v, o */
};

static void attn_data_init(struct __test_metadata *_metadata, struct attn_data *d,
		       const struct attn_shape *s)
{
	int64_t shape[3] = { s->bh, s->seq, s->d };
	size_t n = shape[0] * shape[1] * shape[2];

	d->s = *s;
	ASSERT_EQ(0, sample_open(&d->dev)) TH_LOG("%s", tpurt_last_error());
	d->gs = attn_spec(s);
	ASSERT_NE(NULL, d->gs) TH_LOG("%s", tpurt_last_error());
	for (int i = 0; i < 3; i++) {
		d->h[i] = malloc(n * sizeof(float));
		ASSERT_NE(NULL, d->h[i]);
		sample_fill(d->h[i], TPURT_F32, n, 51 + i);
		for (size_t j = 0; !i && j < n; j++)
			d->h[i][j] *= 4;	/* peakier scores */
		round_to_bf16(d->h[i], n);
		d->a[i] = sample_array_of(d->dev, TPURT_BF16, 3, shape, d->h[i],
					  NULL);
		ASSERT_NE(NULL, d->a[i]);
	}
	ASSERT_EQ(0, tpurt_array_create(d->dev, TPURT_BF16, 3, shape, &d->a[3]));
}

static void attn_data_fini(struct attn_data *d)
{
	for (int i = 0; i < 4; i++)
		tpurt_array_free(d->a[i]);
	for (int i = 0; i < 3; i++)
		free(d->h[i]);
	tpurt_grid_spec_free(d->gs);
	tpurt_close(d->dev);
}

/* Run the kernel (@kflags ATTN_SKIP_*) with compiler @flags; the job's return. */
static int run_attn(struct __test_metadata *_metadata, struct attn_data *d,
		    unsigned int kflags, unsigned int flags)
{
	struct tpurt_compiler_params params = attn_params(flags);
	struct tpurt_kernel *k;
	int ret;

	EXPECT_EQ(0, tpurt_kernel_create(&k));
	EXPECT_EQ(0, attn_kernel(k, d->gs, &d->s, kflags))
		TH_LOG("%s", tpurt_last_error());
	ret = tpurt_pallas_call(k, d->gs, &params, d->a, 4, NULL);
	tpurt_kernel_free(k);
	return ret;
}

/* The output against the reference, every row. */
static bool attn_correct(struct attn_data *d)
{
	const struct attn_shape *s = &d->s;
	size_t n = s->bh * s->seq * s->d;
	double *want = malloc(n * sizeof(double));
	void *o = sample_read(d->a[3]);
	bool ok = want && o;

	if (ok) {
		attn_reference(d->h[0], d->h[1], d->h[2], s, 1, want);
		ok = sample_check_close("o", o, TPURT_BF16, want, n, 4e-3, 1e-2);
	}
	free(want);
	free(o);
	return ok;
}

static bool any_nan(const struct tpurt_array *a)
{
	uint16_t *o = sample_read(a);
	bool nan = false;

	for (uint64_t i = 0; o && i < tpurt_array_size(a); i++)
		nan = nan || isnan(tpurt_bf16_to_f32(o[i]));
	free(o);
	return nan;
}

FIXTURE(attn) {
	struct attn_data d;
};

FIXTURE_VARIANT(attn) {
	struct attn_shape s;
};

/* bh, seq, d, bq, bk, causal */
FIXTURE_VARIANT_ADD(attn, one_block) { { 2, 128, 64, 128, 128, false } };
FIXTURE_VARIANT_ADD(attn, one_block_causal) { { 2, 128, 64, 128, 128, true } };
FIXTURE_VARIANT_ADD(attn, blocks) { { 2, 256, 128, 128, 128, false } };
FIXTURE_VARIANT_ADD(attn, blocks_causal) { { 2, 256, 128, 128, 128, true } };
FIXTURE_VARIANT_ADD(attn, edge) { { 3, 200, 64, 128, 128, false } };
FIXTURE_VARIANT_ADD(attn, edge_causal) { { 3, 200, 64, 128, 128, true } };
FIXTURE_VARIANT_ADD(attn, unequal_edge) { { 1, 300, 64, 64, 128, false } };
FIXTURE_VARIANT_ADD(attn, unequal_edge_causal) { { 1, 300, 64, 128, 64, true } };

FIXTURE_SETUP(attn)
{
	attn_data_init(_metadata, &self->d, &variant->s);
}

FIXTURE_TEARDOWN(attn)
{
	attn_data_fini(&self->d);
}

TEST_F(attn, matches_reference)
{
	ASSERT_EQ(0, run_attn(_metadata, &self->d, 0, 0))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_TRUE(attn_correct(&self->d));
}

/*
 * Debug mode poisons scratch, and edge blocks' padding too (as interpret
 * mode does), which p @ v would carry into the output: whole blocks only.
 */
FIXTURE(attn_debug) {
	struct attn_data d;
};

FIXTURE_VARIANT(attn_debug) {
	struct attn_shape s;
};

FIXTURE_VARIANT_ADD(attn_debug, blocks) { { 2, 256, 64, 128, 128, false } };
FIXTURE_VARIANT_ADD(attn_debug, blocks_causal) { { 2, 256, 64, 128, 64, true } };

FIXTURE_SETUP(attn_debug)
{
	attn_data_init(_metadata, &self->d, &variant->s);
}

FIXTURE_TEARDOWN(attn_debug)
{
	attn_data_fini(&self->d);
}

TEST_F(attn_debug, passes_when_initialised)
{
	ASSERT_EQ(0, run_attn(_metadata, &self->d, 0, TPURT_DEBUG))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_TRUE(attn_correct(&self->d));
}

/* Poisoned m or l reach the output as NaN (or the job fails). */
TEST_F(attn_debug, catches_uninitialised_m)
{
	EXPECT_TRUE(run_attn(_metadata, &self->d, ATTN_SKIP_INIT_M, TPURT_DEBUG) ||
		    any_nan(self->d.a[3]));
}

TEST_F(attn_debug, catches_uninitialised_l)
{
	EXPECT_TRUE(run_attn(_metadata, &self->d, ATTN_SKIP_INIT_L, TPURT_DEBUG) ||
		    any_nan(self->d.a[3]));
}

TPU_HARNESS_MAIN_OPEN(sample_open)
