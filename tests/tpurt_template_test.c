// SPDX-License-Identifier: MIT
/*
 * Host test: the templated matmul of the guide's second half on the
 * in-process device: transpose views in both directions, every activation
 * with bias and scale through views, int8 and bf16 saturation and rounding
 * edges, and tpurt_matmul_vjp (every activation's derivative, saved or
 * recomputed pre-activation, transposed operands) against double-precision
 * references.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "tpurt.h"
#include "kselftest_harness.h"

static const enum tpurt_activation acts[] = {
	TPURT_ACT_IDENTITY, TPURT_ACT_RELU, TPURT_ACT_GELU,
	TPURT_ACT_SILU, TPURT_ACT_SIGMOID, TPURT_ACT_TANH,
};
#define NACTS (sizeof(acts) / sizeof(acts[0]))

FIXTURE(tm) {
	struct tpurt_device *dev;
};

FIXTURE_SETUP(tm)
{
	struct tpurt_sim_config cfg = { .hbm_size = 64 << 20 };

	ASSERT_EQ(0, tpurt_open_sim(&cfg, &self->dev)) TH_LOG("%s", tpurt_last_error());
}

FIXTURE_TEARDOWN(tm)
{
	tpurt_close(self->dev);
}

static struct tpurt_array *arr(struct tpurt_device *dev, enum tpurt_dtype t,
			       int64_t r, int64_t c, uint32_t seed)
{
	int64_t shape[2] = { r, c };
	struct tpurt_array *a;

	if (tpurt_array_create(dev, t, c ? 2 : 1, shape, &a))
		return NULL;
	if (seed)
		ref_fill(tpurt_array_map(a), t, tpurt_array_size(a), seed, 1, 0);
	return a;
}

/* Element (r, c) of a logical (rows, cols) matrix stored transposed or not. */
static double at(struct tpurt_array *a, int tr, int64_t r, int64_t c,
		 int64_t cols, int64_t rows)
{
	uint64_t i = tr ? (uint64_t)(c * rows + r) : (uint64_t)(r * cols + c);

	return ref_get(tpurt_array_map(a), tpurt_array_dtype(a), i);
}

static double act_ref(enum tpurt_activation a, double x)
{
	return a == TPURT_ACT_IDENTITY ? x : ref_unary((unsigned int)a, x);
}

static double act_grad_ref(enum tpurt_activation a, double x)
{
	const double c = 0.7978845608028654, k = 0.044715;
	double s = 1 / (1 + exp(-x)), t;

	switch (a) {
	case TPURT_ACT_RELU:
		return x > 0;
	case TPURT_ACT_GELU:
		t = tanh(c * (x + k * x * x * x));
		return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * k * x * x);
	case TPURT_ACT_SILU:
		return s * (1 + x * (1 - s));
	case TPURT_ACT_SIGMOID:
		return s * (1 - s);
	case TPURT_ACT_TANH:
		return 1 - tanh(x) * tanh(x);
	default:
		return 1;
	}
}

/* Count elements of @got (logical (r, c), row-major) off @want by more
 * than @tol of @scale. */
static int compare(struct __test_metadata *_metadata, const char *what,
		   struct tpurt_array *got, const double *want,
		   const double *scale, int64_t n, double tol)
{
	int bad = 0;

	for (int64_t i = 0; i < n; i++) {
		double g = ref_get(tpurt_array_map(got), tpurt_array_dtype(got), i);

		if (fabs(g - want[i]) > tol * (scale[i] + 1e-30) && bad++ < 3)
			TH_LOG("%s[%lld]: got %.9g want %.9g", what, (long long)i,
			       g, want[i]);
	}
	return bad;
}

/*
 * out = act(s * x @ y + bias) with x given (m, k) or as a view of (k, m),
 * y given (k, n) or as a view of (n, k), against a double reference.
 */
static void forward_case(struct __test_metadata *_metadata,
			 struct tpurt_device *dev, int tx, int ty,
			 enum tpurt_activation act, int use_bias, float scale)
{
	const int64_t m = 136, k = 200, n = 130;
	struct tpurt_array *xb = tx ? arr(dev, TPURT_F32, k, m, 1) : arr(dev, TPURT_F32, m, k, 1);
	struct tpurt_array *yb = ty ? arr(dev, TPURT_F32, n, k, 2) : arr(dev, TPURT_F32, k, n, 2);
	struct tpurt_array *z = arr(dev, TPURT_F32, m, n, 0);
	struct tpurt_array *bias = use_bias ? arr(dev, TPURT_F32, n, 0, 3) : NULL;
	struct tpurt_array *x = xb, *y = yb;
	struct tpurt_matmul_opts o = { .bm = 128, .bk = 128, .bn = 128,
				       .activation = act, .bias = bias,
				       .out_scale = scale };
	double *want = malloc(m * n * sizeof(double)), *mag = malloc(m * n * sizeof(double));

	ASSERT_NE(NULL, z);
	if (tx)
		ASSERT_EQ(0, tpurt_array_transpose_view(xb, &x));
	if (ty)
		ASSERT_EQ(0, tpurt_array_transpose_view(yb, &y));
	ASSERT_EQ(m, tpurt_array_dim(x, 0));
	ASSERT_EQ(n, tpurt_array_dim(y, 1));
	ASSERT_EQ(0, tpurt_matmul(x, y, z, &o, NULL)) TH_LOG("%s", tpurt_last_error());
	for (int64_t r = 0; r < m; r++) {
		for (int64_t c = 0; c < n; c++) {
			double acc = 0, sum = 0;

			for (int64_t p = 0; p < k; p++) {
				double t = at(xb, tx, r, p, k, m) * at(yb, ty, p, c, n, k);

				acc += t;
				sum += fabs(t);
			}
			acc = acc * (scale ? scale : 1) +
			      (bias ? ((float *)tpurt_array_map(bias))[c] : 0);
			want[r * n + c] = act_ref(act, acc);
			mag[r * n + c] = sum * (scale ? fabs(scale) : 1) + 1;
		}
	}
	EXPECT_EQ(0, compare(_metadata, "z", z, want, mag, m * n, 1e-6));
	free(want), free(mag);
	if (tx)
		tpurt_array_free(x);
	if (ty)
		tpurt_array_free(y);
	tpurt_array_free(xb), tpurt_array_free(yb), tpurt_array_free(z);
	tpurt_array_free(bias);
}

TEST_F(tm, transpose_views_in_both_directions)
{
	forward_case(_metadata, self->dev, 0, 1, TPURT_ACT_IDENTITY, 0, 0);
	forward_case(_metadata, self->dev, 1, 0, TPURT_ACT_IDENTITY, 0, 0);
	forward_case(_metadata, self->dev, 1, 1, TPURT_ACT_IDENTITY, 0, 0);
}

TEST_F(tm, every_activation_with_bias_and_scale_through_views)
{
	for (size_t a = 0; a < NACTS; a++) {
		forward_case(_metadata, self->dev, (int)a % 2, 1, acts[a], 1, 0.75f);
	}
}

/* A view is the transpose_rhs path: same job, same bits as the flag. */
TEST_F(tm, view_equals_flag_and_they_cancel)
{
	struct tpurt_array *x = arr(self->dev, TPURT_BF16, 256, 384, 4);
	struct tpurt_array *y = arr(self->dev, TPURT_BF16, 128, 384, 5);
	struct tpurt_array *z1 = arr(self->dev, TPURT_F32, 256, 128, 0);
	struct tpurt_array *z2 = arr(self->dev, TPURT_F32, 256, 128, 0);
	struct tpurt_array *yv, *yvv;
	struct tpurt_matmul_opts flag = { .bm = 128, .bk = 128, .bn = 128, .transpose_rhs = 1 };
	struct tpurt_matmul_opts plain = { .bm = 128, .bk = 128, .bn = 128 };
	struct tpurt_job_stats s1, s2;

	ASSERT_EQ(0, tpurt_array_transpose_view(y, &yv));
	ASSERT_EQ(1, tpurt_array_is_transposed(yv));
	ASSERT_EQ(0, tpurt_array_transpose_view(yv, &yvv));
	EXPECT_EQ(0, tpurt_array_is_transposed(yvv));
	EXPECT_EQ(128, tpurt_array_dim(yvv, 0));
	EXPECT_EQ(tpurt_array_buffer(y), tpurt_array_buffer(yv));
	ASSERT_EQ(0, tpurt_matmul(x, y, z1, &flag, &s1)) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_matmul(x, yv, z2, &plain, &s2)) TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(0, memcmp(tpurt_array_map(z1), tpurt_array_map(z2), 256 * 128 * 4));
	EXPECT_EQ(s1.model_time_ps, s2.model_time_ps);
	EXPECT_EQ(s1.hbm_bytes_in, s2.hbm_bytes_in);
	/* the flag on a view transposes it back: (256, 384) @ (384, 128).T fails */
	EXPECT_EQ(-EINVAL, tpurt_matmul(x, yv, z2, &flag, NULL));
	EXPECT_EQ(0, tpurt_matmul(x, yvv, z2, &flag, NULL)) TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(0, memcmp(tpurt_array_map(z1), tpurt_array_map(z2), 256 * 128 * 4));
	tpurt_array_free(yvv), tpurt_array_free(yv);
	tpurt_array_free(x), tpurt_array_free(y);
	tpurt_array_free(z1), tpurt_array_free(z2);
}

TEST_F(tm, views_refused_where_layout_is_physical)
{
	struct tpurt_array *x = arr(self->dev, TPURT_F32, 128, 128, 4), *xv, *v1;
	struct tpurt_block_spec bs = { 2, { 128, 128 }, "i -> 0, 0" };
	int64_t grid[1] = { 1 }, shape1[1] = { 128 };
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;

	ASSERT_EQ(0, tpurt_array_transpose_view(x, &xv));
	EXPECT_EQ(-EINVAL, tpurt_matmul(x, x, xv, NULL, NULL));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "out is a transpose view"));
	ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "z", &bs));
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_zero(k, "z"));
	EXPECT_EQ(-EINVAL, tpurt_pallas_call(k, gs, NULL, &xv, 1, NULL));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "transpose view"));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 1, shape1, &v1));
	EXPECT_EQ(-EINVAL, tpurt_array_transpose_view(v1, &xv));
	tpurt_kernel_free(k), tpurt_grid_spec_free(gs);
	tpurt_array_free(xv), tpurt_array_free(x), tpurt_array_free(v1);
}

/* x row r holds v[r] in column 0, y is ones: out[r][c] = v[r] * scale. */
static void one_hot(struct tpurt_array *x, struct tpurt_array *y, const double *v,
		    int rows)
{
	memset(tpurt_array_map(x), 0, tpurt_array_nbytes(x));
	for (int r = 0; r < rows; r++)
		ref_set(tpurt_array_map(x), tpurt_array_dtype(x),
			(uint64_t)r * tpurt_array_dim(x, 1), v[r]);
	tpurt_array_fill(y, 1);
}

TEST_F(tm, int8_saturation_and_rounding_edges)
{
	/*
	 * int32 acc -> scaled f32 -> int8 out: the store is a cast, which
	 * truncates toward zero as astype does; saturation both ways
	 */
	static const double v[8] = { 3, 5, -3, -5, 127, -128, 1, -1 };
	static const double s = 0.5;
	static const int8_t want8[8] = { 1, 2, -1, -2, 63, -64, 0, -0 };
	struct tpurt_array *x = arr(self->dev, TPURT_INT8, 8, 128, 0);
	struct tpurt_array *y = arr(self->dev, TPURT_INT8, 128, 128, 0);
	struct tpurt_array *z = arr(self->dev, TPURT_INT8, 8, 128, 0);
	struct tpurt_array *z32 = arr(self->dev, TPURT_INT32, 8, 128, 0);
	struct tpurt_matmul_opts o = { .out_scale = (float)s };
	const int8_t *zv = tpurt_array_map(z);
	const int32_t *z32v = tpurt_array_map(z32);

	one_hot(x, y, v, 8);
	ASSERT_EQ(0, tpurt_matmul(x, y, z, &o, NULL)) TH_LOG("%s", tpurt_last_error());
	for (int r = 0; r < 8; r++) {
		EXPECT_EQ(want8[r], zv[r * 128 + 5]) TH_LOG("row %d", r);
	}
	/* every x 127 or -128, y 127: 128 * 127 * 127 saturates int8 */
	tpurt_array_fill(x, 127);
	tpurt_array_fill(y, 127);
	ASSERT_EQ(0, tpurt_matmul(x, y, z, NULL, NULL));
	ASSERT_EQ(0, tpurt_matmul(x, y, z32, NULL, NULL));
	EXPECT_EQ(127, zv[77]);
	EXPECT_EQ(128 * 127 * 127, z32v[77]);
	tpurt_array_fill(x, -128);
	ASSERT_EQ(0, tpurt_matmul(x, y, z, NULL, NULL));
	EXPECT_EQ(-128, zv[300]);
	/* uint8 255 * 255: no sign trouble in the int32 accumulator */
	tpurt_array_free(x), tpurt_array_free(y);
	x = arr(self->dev, TPURT_UINT8, 8, 128, 0);
	y = arr(self->dev, TPURT_UINT8, 128, 128, 0);
	tpurt_array_fill(x, 255);
	tpurt_array_fill(y, 255);
	ASSERT_EQ(0, tpurt_matmul(x, y, z32, NULL, NULL));
	EXPECT_EQ(128 * 255 * 255, z32v[5]);
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(z), tpurt_array_free(z32);
}

TEST_F(tm, bf16_output_rounds_to_nearest_even)
{
	/* halfway cases between bf16 neighbours, and the overflow to inf */
	static const double v[8] = { 1 + 0x1p-8, 1 + 3 * 0x1p-8, -(1 + 0x1p-8),
				     1 + 0x1p-8 + 0x1p-20, 3.4028234663852886e38,
				     0x1p-133, 2, 0 };
	static const float want[8] = { 1, 1 + 0x1p-6, -1, 1 + 0x1p-7, INFINITY,
				       0x1p-133, 2, 0 };
	struct tpurt_array *x = arr(self->dev, TPURT_F32, 8, 128, 0);
	struct tpurt_array *y = arr(self->dev, TPURT_F32, 128, 128, 0);
	struct tpurt_array *z = arr(self->dev, TPURT_BF16, 8, 128, 0);
	const uint16_t *zv = tpurt_array_map(z);

	one_hot(x, y, v, 8);
	ASSERT_EQ(0, tpurt_matmul(x, y, z, NULL, NULL)) TH_LOG("%s", tpurt_last_error());
	for (int r = 0; r < 8; r++) {
		EXPECT_EQ(want[r], ref_from_bf16(zv[r * 128 + 9])) TH_LOG("row %d", r);
	}
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(z);
}

struct vjp_case {
	enum tpurt_activation act;
	int tx, ty;		/* x, y given as transpose views */
	int flag_rhs;		/* y given (n, k) with opts.transpose_rhs */
	int save_pre;
	enum tpurt_dtype dtype;
};

/* dx, dy of the case, checked against g = dz * act'(pre) in double. */
static void vjp_case(struct __test_metadata *_metadata, struct tpurt_device *dev,
		     const struct vjp_case *c)
{
	const int64_t m = 136, k = 200, n = 130;
	const float s = 0.5f;
	int ytr = c->ty || c->flag_rhs;	/* y stored (n, k) */
	struct tpurt_array *xb = c->tx ? arr(dev, c->dtype, k, m, 1) : arr(dev, c->dtype, m, k, 1);
	struct tpurt_array *yb = ytr ? arr(dev, c->dtype, n, k, 2) : arr(dev, c->dtype, k, n, 2);
	struct tpurt_array *dz = arr(dev, c->dtype, m, n, 6), *bias = arr(dev, TPURT_F32, n, 0, 3);
	struct tpurt_array *pre = arr(dev, TPURT_F32, m, n, 0);
	struct tpurt_array *dx = arr(dev, TPURT_F32, m, k, 0), *dy = arr(dev, TPURT_F32, k, n, 0);
	struct tpurt_array *x = xb, *y = yb;
	struct tpurt_matmul_opts o = { .bm = 128, .bk = 128, .bn = 128, .activation = c->act,
				       .bias = bias, .out_scale = s,
				       .transpose_rhs = c->flag_rhs };
	struct tpurt_matmul_opts lin = o;
	double *g = malloc(m * n * sizeof(double));
	size_t big = (m > n ? m : n) * k * sizeof(double);	/* dx or dy */
	double *want = malloc(big), *mag = malloc(big);
	double tol = c->dtype == TPURT_BF16 ? 1.0 / 64 : 1e-5;
	struct tpurt_vjp_stats st;

	if (c->tx)
		ASSERT_EQ(0, tpurt_array_transpose_view(xb, &x));
	if (c->ty)
		ASSERT_EQ(0, tpurt_array_transpose_view(yb, &y));
	/* the reference's pre is the device's, so relu's kink agrees */
	lin.activation = TPURT_ACT_IDENTITY;
	ASSERT_EQ(0, tpurt_matmul(x, y, pre, &lin, NULL)) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_matmul_vjp(x, y, dz, c->save_pre ? pre : NULL, dx, dy, &o, &st))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(!c->save_pre && c->act != TPURT_ACT_IDENTITY, st.recompute.steps != 0);
	EXPECT_NE(0, st.dx.steps);
	for (int64_t i = 0; i < m * n; i++)
		g[i] = ref_get(tpurt_array_map(dz), c->dtype, i) *
		       act_grad_ref(c->act, ((float *)tpurt_array_map(pre))[i]);
	/* dx[r][p] = s * sum_c g[r][c] y[p][c] */
	for (int64_t r = 0; r < m; r++) {
		for (int64_t p = 0; p < k; p++) {
			double acc = 0, sum = 0;

			for (int64_t q = 0; q < n; q++) {
				double t = g[r * n + q] * at(yb, ytr, p, q, n, k);

				acc += t, sum += fabs(t);
			}
			want[r * k + p] = s * acc;
			mag[r * k + p] = s * sum + 1e-3;
		}
	}
	EXPECT_EQ(0, compare(_metadata, "dx", dx, want, mag, m * k, tol));
	/* dy[p][q] = s * sum_r x[r][p] g[r][q] */
	for (int64_t p = 0; p < k; p++) {
		for (int64_t q = 0; q < n; q++) {
			double acc = 0, sum = 0;

			for (int64_t r = 0; r < m; r++) {
				double t = at(xb, c->tx, r, p, k, m) * g[r * n + q];

				acc += t, sum += fabs(t);
			}
			want[p * n + q] = s * acc;
			mag[p * n + q] = s * sum + 1e-3;
		}
	}
	EXPECT_EQ(0, compare(_metadata, "dy", dy, want, mag, k * n, tol));
	free(g), free(want), free(mag);
	if (c->tx)
		tpurt_array_free(x);
	if (c->ty)
		tpurt_array_free(y);
	tpurt_array_free(xb), tpurt_array_free(yb), tpurt_array_free(dz);
	tpurt_array_free(bias), tpurt_array_free(pre);
	tpurt_array_free(dx), tpurt_array_free(dy);
}

TEST_F(tm, vjp_every_activation_saved_and_recomputed)
{
	for (size_t a = 0; a < NACTS; a++) {
		struct vjp_case c = { .act = acts[a], .save_pre = 1, .dtype = TPURT_F32 };

		vjp_case(_metadata, self->dev, &c);
		c.save_pre = 0;
		vjp_case(_metadata, self->dev, &c);
	}
}

TEST_F(tm, vjp_transposed_operands_and_bf16)
{
	struct vjp_case c = { .act = TPURT_ACT_GELU, .tx = 1, .ty = 1, .dtype = TPURT_F32 };

	vjp_case(_metadata, self->dev, &c);
	c = (struct vjp_case){ .act = TPURT_ACT_RELU, .flag_rhs = 1, .dtype = TPURT_F32 };
	vjp_case(_metadata, self->dev, &c);
	c = (struct vjp_case){ .act = TPURT_ACT_SILU, .tx = 1, .dtype = TPURT_BF16,
			       .save_pre = 1 };
	vjp_case(_metadata, self->dev, &c);
}

/* relu's mask is exact: subnormal positives pass, zero and negatives not. */
TEST_F(tm, vjp_relu_mask_at_the_edges)
{
	static const float pre_v[6] = { 0x1p-149f, 0x1p-126f, 0.0f, -0.0f, -0x1p-149f, 3e38f };
	static const float want[6] = { 1, 1, 0, 0, 0, 1 };
	struct tpurt_array *x = arr(self->dev, TPURT_F32, 8, 128, 0);
	struct tpurt_array *y = arr(self->dev, TPURT_F32, 128, 128, 0);
	struct tpurt_array *dz = arr(self->dev, TPURT_F32, 8, 128, 0);
	struct tpurt_array *pre = arr(self->dev, TPURT_F32, 8, 128, 0);
	struct tpurt_array *dx = arr(self->dev, TPURT_F32, 8, 128, 0);
	struct tpurt_matmul_opts o = { .activation = TPURT_ACT_RELU };
	float *pv = tpurt_array_map(pre), *dxv = tpurt_array_map(dx);

	/* y = I: dx = g @ I.T = g = dz * mask */
	for (int i = 0; i < 128; i++)
		((float *)tpurt_array_map(y))[i * 128 + i] = 1;
	tpurt_array_fill(dz, 1);
	for (int r = 0; r < 6; r++) {
		for (int c = 0; c < 128; c++)
			pv[r * 128 + c] = pre_v[r];
	}
	ASSERT_EQ(0, tpurt_matmul_vjp(x, y, dz, pre, dx, NULL, &o, NULL))
		TH_LOG("%s", tpurt_last_error());
	for (int r = 0; r < 6; r++) {
		EXPECT_EQ(want[r], dxv[r * 128 + 17]) TH_LOG("pre %g", pre_v[r]);
	}
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(dz);
	tpurt_array_free(pre), tpurt_array_free(dx);
}

TEST_F(tm, vjp_errors)
{
	struct tpurt_array *x = arr(self->dev, TPURT_F32, 128, 256, 1);
	struct tpurt_array *y = arr(self->dev, TPURT_F32, 256, 128, 2);
	struct tpurt_array *dz = arr(self->dev, TPURT_F32, 128, 128, 3), *dzv;
	struct tpurt_array *i8 = arr(self->dev, TPURT_INT8, 128, 256, 0);
	struct tpurt_array *dx = arr(self->dev, TPURT_F32, 128, 256, 0);
	struct tpurt_matmul_opts o = { 0 };

	EXPECT_EQ(-EINVAL, tpurt_matmul_vjp(i8, y, dz, NULL, dx, NULL, NULL, NULL));
	EXPECT_EQ(-EINVAL, tpurt_matmul_vjp(x, y, dz, NULL, y, NULL, NULL, NULL));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "dx must be (128, 256)"));
	EXPECT_EQ(-EINVAL, tpurt_matmul_vjp(x, y, NULL, NULL, dx, NULL, NULL, NULL));
	ASSERT_EQ(0, tpurt_array_transpose_view(dz, &dzv));
	EXPECT_EQ(-EINVAL, tpurt_matmul_vjp(x, y, dzv, NULL, dx, NULL, NULL, NULL));
	o.x_fusion.enabled = 1;
	EXPECT_EQ(-EOPNOTSUPP, tpurt_matmul_vjp(x, y, dz, NULL, dx, NULL, &o, NULL));
	tpurt_array_free(dzv);
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(dz);
	tpurt_array_free(i8), tpurt_array_free(dx);
}

TEST_HARNESS_MAIN
