// SPDX-License-Identifier: MIT
/*
 * Host test: tpurt_matmul on the in-process device, against the engine
 * tests' reference (tests/job_builder.c): f32, bf16 and int8, edge shapes,
 * transpose_rhs/transpose_lhs, every activation, bias, scale, input fusion,
 * and the runtime's own block choice.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "tpurt.h"
#include "kselftest_harness.h"

FIXTURE(mm) {
	struct tpurt_device *dev;
};

FIXTURE_SETUP(mm)
{
	struct tpurt_sim_config cfg = { .hbm_size = 64 << 20 };

	ASSERT_EQ(0, tpurt_open_sim(&cfg, &self->dev)) TH_LOG("%s", tpurt_last_error());
}

FIXTURE_TEARDOWN(mm)
{
	tpurt_close(self->dev);
}

static struct tpurt_array *filled(struct tpurt_device *dev, enum tpurt_dtype t,
				  int rank, int64_t r, int64_t c, uint32_t seed,
				  int lo, int hi)
{
	int64_t shape[2] = { r, c };
	struct tpurt_array *a;

	if (tpurt_array_create(dev, t, rank, shape, &a))
		return NULL;
	ref_fill(tpurt_array_map(a), t, tpurt_array_size(a), seed, lo, hi);
	return a;
}

/*
 * Run tpurt_matmul for @j (shapes, dtypes, transposes, activation, bias)
 * with @opts, and compare with ref_matmul within @tol (0: bit-exact).
 */
static void run_case(struct __test_metadata *_metadata, struct tpurt_device *dev,
		     struct mm_job *j, struct tpurt_matmul_opts *opts, double tol,
		     int lo, int hi)
{
	struct tpurt_array *x = j->transpose_lhs ?
		filled(dev, j->in_dtype, 2, j->k, j->m, 11, lo, hi) :
		filled(dev, j->in_dtype, 2, j->m, j->k, 11, lo, hi);
	struct tpurt_array *y = j->transpose_rhs ?
		filled(dev, j->in_dtype, 2, j->n, j->k, 12, lo, hi) :
		filled(dev, j->in_dtype, 2, j->k, j->n, 12, lo, hi);
	struct tpurt_array *z = filled(dev, j->out_dtype, 2, j->m, j->n, 13, 0, 0);
	struct tpurt_array *bias = j->bias ? filled(dev, TPURT_F32, 1, j->n, 0, 14, -2, 2) : NULL;
	size_t n = j->m * j->n;
	void *want = malloc(n * 4);
	struct tpurt_job_stats st;
	uint64_t bad = 0;

	ASSERT_NE(NULL, x);
	ASSERT_NE(NULL, y);
	opts->transpose_lhs = j->transpose_lhs;
	opts->transpose_rhs = j->transpose_rhs;
	opts->activation = (enum tpurt_activation)j->activation;
	opts->bias = bias;
	ASSERT_EQ(0, tpurt_matmul(x, y, z, opts, &st)) TH_LOG("%s", tpurt_last_error());
	ref_matmul(j, tpurt_array_map(x), tpurt_array_map(y),
		   bias ? tpurt_array_map(bias) : NULL, want);
	for (size_t i = 0; i < n; i++) {
		double a = ref_get(want, j->out_dtype, i);
		double b = ref_get(tpurt_array_map(z), j->out_dtype, i);

		if (fabs(a - b) > tol * (1 + fabs(a)) && bad++ < 3)
			TH_LOG("[%zu] want %g got %g", i, a, b);
	}
	EXPECT_EQ(0, bad);
	EXPECT_GE(st.mxu_flops, 2 * j->m * j->n * j->k);	/* padding counts */
	free(want);
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(z);
	tpurt_array_free(bias);
}

TEST_F(mm, f32_bf16_int8_exact)
{
	struct mm_job f = { .m = 256, .k = 384, .n = 256, .in_dtype = TPURT_F32,
			    .out_dtype = TPURT_F32 };
	struct mm_job b = { .m = 256, .k = 512, .n = 384, .in_dtype = TPURT_BF16,
			    .out_dtype = TPURT_BF16 };
	struct mm_job i8 = { .m = 128, .k = 512, .n = 256, .in_dtype = TPURT_INT8,
			     .out_dtype = TPURT_INT32 };
	struct tpurt_matmul_opts o = { .bm = 128, .bk = 128, .bn = 128 };

	run_case(_metadata, self->dev, &f, &o, 0, -3, 3);
	run_case(_metadata, self->dev, &b, &o, 0, -3, 3);
	run_case(_metadata, self->dev, &i8, &o, 0, -128, 127);
	i8.in_dtype = TPURT_UINT8;
	run_case(_metadata, self->dev, &i8, &o, 0, 0, 255);
}

TEST_F(mm, edge_shapes_with_cdiv_grids)
{
	struct mm_job j = { .m = 200, .k = 300, .n = 130, .in_dtype = TPURT_F32,
			    .out_dtype = TPURT_F32 };
	struct tpurt_matmul_opts o = { .bm = 128, .bk = 128, .bn = 128 };
	struct mm_job tiny = { .m = 3, .k = 5, .n = 7, .in_dtype = TPURT_BF16,
			       .out_dtype = TPURT_F32 };
	struct tpurt_matmul_opts whole = { 0 };

	run_case(_metadata, self->dev, &j, &o, 0, -3, 3);
	run_case(_metadata, self->dev, &tiny, &whole, 0, -3, 3);
}

TEST_F(mm, transposed_operands)
{
	struct mm_job j = { .m = 256, .k = 384, .n = 128, .in_dtype = TPURT_BF16,
			    .out_dtype = TPURT_F32, .transpose_rhs = true };
	struct tpurt_matmul_opts o = { .bm = 128, .bk = 128, .bn = 128 };

	run_case(_metadata, self->dev, &j, &o, 0, -3, 3);
	j.transpose_rhs = false;
	j.transpose_lhs = true;
	run_case(_metadata, self->dev, &j, &o, 0, -3, 3);
}

TEST_F(mm, every_activation_with_bias)
{
	static const int acts[] = { TPURT_ACT_IDENTITY, TPURT_ACT_RELU, TPURT_ACT_GELU,
				    TPURT_ACT_SILU, TPURT_ACT_SIGMOID, TPURT_ACT_TANH };

	for (size_t a = 0; a < sizeof(acts) / sizeof(acts[0]); a++) {
		struct mm_job j = { .m = 128, .k = 256, .n = 256, .in_dtype = TPURT_F32,
				    .out_dtype = TPURT_F32, .activation = acts[a],
				    .bias = a % 2 };
		struct tpurt_matmul_opts o = { .bm = 128, .bk = 128, .bn = 128 };

		/* the device rounds in double, the reference too: tiny slack */
		run_case(_metadata, self->dev, &j, &o, 1e-6, -1, 1);
	}
}

TEST_F(mm, int8_scaled_to_f32_with_bias_and_relu)
{
	int64_t xs[2] = { 128, 256 }, ys[2] = { 256, 128 }, zs[2] = { 128, 128 };
	struct tpurt_array *x, *y, *z, *bias;
	struct tpurt_matmul_opts o = { .out_scale = 0.5f, .activation = TPURT_ACT_RELU };
	const int8_t *xv, *yv;
	const float *zv, *bv;

	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_INT8, 2, xs, &x));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_INT8, 2, ys, &y));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 2, zs, &z));
	bias = filled(self->dev, TPURT_F32, 1, 128, 0, 5, -50, 50);
	ref_fill(tpurt_array_map(x), TPURT_INT8, 128 * 256, 1, -128, 127);
	ref_fill(tpurt_array_map(y), TPURT_INT8, 256 * 128, 2, -128, 127);
	o.bias = bias;
	ASSERT_EQ(0, tpurt_matmul(x, y, z, &o, NULL)) TH_LOG("%s", tpurt_last_error());
	xv = tpurt_array_map(x), yv = tpurt_array_map(y);
	zv = tpurt_array_map(z), bv = tpurt_array_map(bias);
	for (int r = 0; r < 128; r++)
		for (int c = 0; c < 128; c++) {
			int64_t acc = 0;
			float want;

			for (int p = 0; p < 256; p++)
				acc += xv[r * 256 + p] * yv[p * 128 + c];
			want = (float)((double)acc * 0.5 + bv[c]);
			want = want > 0 ? want : 0;
			ASSERT_EQ(want, zv[r * 128 + c]) TH_LOG("(%d, %d)", r, c);
		}
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(z);
	tpurt_array_free(bias);
}

/* Dequantise int8 x by a per-column scale in VMEM, then an f32 dot. */
TEST_F(mm, input_fusion_dequantises_int8)
{
	int64_t xs[2] = { 128, 256 }, ys[2] = { 256, 128 }, zs[2] = { 128, 128 };
	struct tpurt_array *x, *y, *z, *scales;
	struct tpurt_matmul_opts o = { 0 };
	const int8_t *xv;
	const float *yv, *zv, *sv;

	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_INT8, 2, xs, &x));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 2, ys, &y));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 2, zs, &z));
	scales = filled(self->dev, TPURT_F32, 1, 256, 0, 9, 1, 4);
	ref_fill(tpurt_array_map(x), TPURT_INT8, 128 * 256, 1, -20, 20);
	ref_fill(tpurt_array_map(y), TPURT_F32, 256 * 128, 2, -3, 3);
	o.x_fusion = (struct tpurt_input_fusion){
		.enabled = 1, .dtype = TPURT_F32, .fn = TPURT_IDENTITY,
		.op = TPURT_MUL, .operand = TPURT_FUSE_COLUMNS, .columns = scales,
	};
	o.bm = 128, o.bk = 128, o.bn = 128;
	ASSERT_EQ(0, tpurt_matmul(x, y, z, &o, NULL)) TH_LOG("%s", tpurt_last_error());
	xv = tpurt_array_map(x), yv = tpurt_array_map(y);
	zv = tpurt_array_map(z), sv = tpurt_array_map(scales);
	for (int r = 0; r < 128; r++)
		for (int c = 0; c < 128; c++) {
			double acc = 0;

			for (int p = 0; p < 256; p++)
				acc += xv[r * 256 + p] * sv[p] * yv[p * 128 + c];
			ASSERT_EQ((float)acc, zv[r * 128 + c]) TH_LOG("(%d, %d)", r, c);
		}
	/* a fused block must match the other operand's dtype */
	o.x_fusion.dtype = TPURT_BF16;
	EXPECT_EQ(-EINVAL, tpurt_matmul(x, y, z, &o, NULL));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "multiply bfloat16 by float32"));
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(z);
	tpurt_array_free(scales);
}

TEST_F(mm, runtime_picks_blocks_within_the_vmem_limit)
{
	struct mm_job j = { .m = 512, .k = 1024, .n = 512, .in_dtype = TPURT_BF16,
			    .out_dtype = TPURT_BF16 };
	struct tpurt_matmul_opts o = { 0 };
	struct tpurt_matmul_opts tight = { .vmem_limit_bytes = 1 << 20 };

	run_case(_metadata, self->dev, &j, &o, 0, -3, 3);
	run_case(_metadata, self->dev, &j, &tight, 0, -3, 3);
}

TEST_F(mm, shape_errors)
{
	int64_t a[2] = { 128, 256 }, b[2] = { 128, 128 };
	struct tpurt_array *x, *y;

	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 2, a, &x));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 2, b, &y));
	EXPECT_EQ(-EINVAL, tpurt_matmul(x, y, y, NULL, NULL));
	EXPECT_STREQ("matmul: x is (128, 256) and y is (128, 128): contraction sizes 256 and 128 differ",
		     tpurt_last_error());
	tpurt_array_free(x), tpurt_array_free(y);
}

TEST_HARNESS_MAIN
