// SPDX-License-Identifier: MIT
/*
 * The templated matmul's kernels on the device, at small and edge-block
 * shapes: each sample's kernel (transpose views both ways, fused relu and
 * gelu with a bias, int8 dequantising input fusion, int8 into int32 and
 * into a scaled f32, the backward pass) against a double-precision
 * reference on the guest. Values are multiples of 1/8, so plain sums are
 * exact and compare bit for bit.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt.h"
#include "kselftest_harness.h"
#include "tpu_require_device.h"

struct shape {
	int64_t m, k, n, b;	/* b: block size of every dim, 0: the runtime's */
};

/* Whole tiny arrays, one (8, 128) tile, and edge blocks (grid = cdiv). */
static const struct shape shapes[] = {
	{ 3, 5, 7, 0 }, { 8, 128, 128, 0 }, { 200, 300, 130, 128 },
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

FIXTURE(tmpl) {
	struct tpurt_device *dev;
};

FIXTURE_SETUP(tmpl)
{
	ASSERT_EQ(0, tpurt_open(&self->dev)) TH_LOG("%s", tpurt_last_error());
}

FIXTURE_TEARDOWN(tmpl)
{
	tpurt_close(self->dev);
}

/* A device array and its values on the host, as doubles. */
struct mat {
	struct tpurt_array *a;
	double *h;
	int64_t r, c;
};

static double value(enum tpurt_dtype t, uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	if (t == TPURT_INT8 || t == TPURT_INT32)
		return (double)((*s >> 16) % 16) - 8;
	return ((double)((*s >> 16) % 17) - 8) / 8;	/* exact in bf16 */
}

static void put(void *p, enum tpurt_dtype t, size_t i, double v)
{
	if (t == TPURT_F32)
		((float *)p)[i] = (float)v;
	else if (t == TPURT_BF16)
		((uint16_t *)p)[i] = tpurt_f32_to_bf16((float)v);
	else if (t == TPURT_INT8)
		((int8_t *)p)[i] = (int8_t)v;
	else
		((int32_t *)p)[i] = (int32_t)v;
}

static double get(const void *p, enum tpurt_dtype t, size_t i)
{
	if (t == TPURT_F32)
		return ((const float *)p)[i];
	if (t == TPURT_BF16)
		return tpurt_bf16_to_f32(((const uint16_t *)p)[i]);
	if (t == TPURT_INT8)
		return ((const int8_t *)p)[i];
	return ((const int32_t *)p)[i];
}

/* @c 0: rank 1 of @r. @seed 0: zeros. */
static int mat_new(struct tpurt_device *dev, struct mat *m, enum tpurt_dtype t,
		   int64_t r, int64_t c, uint32_t seed)
{
	int64_t shape[2] = { r, c };
	size_t n = (size_t)(r * (c ? c : 1));
	void *buf = calloc(n, 4);
	int ret;

	m->r = r, m->c = c ? c : 1;
	m->h = calloc(n, sizeof(double));
	ret = !buf || !m->h ? -ENOMEM : tpurt_array_create(dev, t, c ? 2 : 1, shape, &m->a);
	for (size_t i = 0; !ret && seed && i < n; i++) {
		m->h[i] = value(t, &seed);
		put(buf, t, i, m->h[i]);
	}
	if (!ret)
		ret = tpurt_array_write(m->a, buf);
	free(buf);
	return ret;
}

/* Read the device's values back into m->h. */
static int mat_sync(struct mat *m)
{
	enum tpurt_dtype t = tpurt_array_dtype(m->a);
	void *buf = malloc(tpurt_array_nbytes(m->a));
	int ret = buf ? tpurt_array_read(m->a, buf) : -ENOMEM;

	for (int64_t i = 0; !ret && i < m->r * m->c; i++)
		m->h[i] = get(buf, t, i);
	free(buf);
	return ret;
}

static void mat_free(struct mat *m)
{
	tpurt_array_free(m->a);
	free(m->h);
}

/* Element (i, j) of the logical matrix @m holds, @tr: stored transposed. */
static double at(const struct mat *m, int tr, int64_t i, int64_t j)
{
	return tr ? m->h[j * m->c + i] : m->h[i * m->c + j];
}

static double act_ref(enum tpurt_activation a, double v)
{
	if (a == TPURT_ACT_RELU)
		return v > 0 ? v : 0;
	if (a == TPURT_ACT_GELU)
		return 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
	return v;
}

/*
 * @rows rows of @k elements: logical row r of @m (@tr: stored transposed),
 * or with @cols its logical column r. The references then read in order.
 */
static double *lines_of(const struct mat *m, int tr, bool cols, int64_t rows,
			int64_t k)
{
	double *d = malloc((rows * k + 1) * sizeof(*d));

	for (int64_t r = 0; d && r < rows; r++)
		for (int64_t p = 0; p < k; p++)
			d[r * k + p] = cols ? at(m, tr, p, r) : at(m, tr, r, p);
	return d;
}

/*
 * Count elements of z off act(s * x @ y + b) by more than @tol relative;
 * x (m, k) and y (k, n) logical.
 */
static int check(struct __test_metadata *_metadata, struct mat *z,
		 const struct mat *x, int tx, const struct mat *y, int ty,
		 int64_t k, const struct mat *b, double s, enum tpurt_activation a,
		 double tol)
{
	double *xr = lines_of(x, tx, false, z->r, k);
	double *yc = lines_of(y, ty, true, z->c, k);
	int bad = 0;

	if (!xr || !yc || mat_sync(z)) {
		free(xr), free(yc);
		return -1;
	}
	for (int64_t i = 0; i < z->r; i++) {
		for (int64_t j = 0; j < z->c; j++) {
			double acc = 0, want, got = z->h[i * z->c + j];

			for (int64_t p = 0; p < k; p++)
				acc += xr[i * k + p] * yc[j * k + p];
			want = act_ref(a, acc * s + (b ? b->h[j] : 0));
			if (fabs(got - want) > tol * (1 + fabs(want)) && bad++ < 3)
				TH_LOG("(%lld, %lld): got %.9g want %.9g", (long long)i,
				       (long long)j, got, want);
		}
	}
	free(xr), free(yc);
	return bad;
}

static struct tpurt_matmul_opts blocks_of(const struct shape *s)
{
	return (struct tpurt_matmul_opts){ .bm = s->b, .bk = s->b, .bn = s->b };
}

/* x @ y.T and x.T @ y through transpose views of (n, k) and (k, m) arrays. */
TEST_F(tmpl, transpose_views)
{
	for (size_t i = 0; i < NSHAPES; i++) {
		const struct shape *s = &shapes[i];
		struct tpurt_matmul_opts o = blocks_of(s);
		struct mat x, xs, y, ys, z;
		struct tpurt_array *yv, *xv;

		ASSERT_EQ(0, mat_new(self->dev, &x, TPURT_F32, s->m, s->k, 1));
		ASSERT_EQ(0, mat_new(self->dev, &xs, TPURT_F32, s->k, s->m, 2));
		ASSERT_EQ(0, mat_new(self->dev, &y, TPURT_F32, s->k, s->n, 3));
		ASSERT_EQ(0, mat_new(self->dev, &ys, TPURT_F32, s->n, s->k, 4));
		ASSERT_EQ(0, mat_new(self->dev, &z, TPURT_F32, s->m, s->n, 0));
		ASSERT_EQ(0, tpurt_array_transpose_view(ys.a, &yv));
		ASSERT_EQ(0, tpurt_array_transpose_view(xs.a, &xv));
		ASSERT_EQ(0, tpurt_matmul(x.a, yv, z.a, &o, NULL)) TH_LOG("%s", tpurt_last_error());
		EXPECT_EQ(0, check(_metadata, &z, &x, 0, &ys, 1, s->k, NULL, 1, 0, 0))
			TH_LOG("x @ y.T, shape %zu", i);
		ASSERT_EQ(0, tpurt_matmul(xv, y.a, z.a, &o, NULL)) TH_LOG("%s", tpurt_last_error());
		EXPECT_EQ(0, check(_metadata, &z, &xs, 1, &y, 0, s->k, NULL, 1, 0, 0))
			TH_LOG("x.T @ y, shape %zu", i);
		tpurt_array_free(yv), tpurt_array_free(xv);
		mat_free(&x), mat_free(&xs), mat_free(&y), mat_free(&ys), mat_free(&z);
	}
}

TEST_F(tmpl, fused_relu_and_gelu_with_bias)
{
	static const enum tpurt_activation acts[2] = { TPURT_ACT_RELU, TPURT_ACT_GELU };

	for (size_t i = 0; i < NSHAPES * 2; i++) {
		const struct shape *s = &shapes[i / 2];
		struct tpurt_matmul_opts o = blocks_of(s);
		struct mat x, y, b, z;

		ASSERT_EQ(0, mat_new(self->dev, &x, TPURT_BF16, s->m, s->k, 5));
		ASSERT_EQ(0, mat_new(self->dev, &y, TPURT_BF16, s->k, s->n, 6));
		ASSERT_EQ(0, mat_new(self->dev, &b, TPURT_F32, s->n, 0, 7));
		ASSERT_EQ(0, mat_new(self->dev, &z, TPURT_F32, s->m, s->n, 0));
		o.activation = acts[i % 2];
		o.bias = b.a;
		ASSERT_EQ(0, tpurt_matmul(x.a, y.a, z.a, &o, NULL)) TH_LOG("%s", tpurt_last_error());
		EXPECT_EQ(0, check(_metadata, &z, &x, 0, &y, 0, s->k, &b, 1, o.activation, 1e-6))
			TH_LOG("activation %d, shape %zu", o.activation, i / 2);
		mat_free(&x), mat_free(&y), mat_free(&b), mat_free(&z);
	}
}

/* int8 x, per-column scales 1/8 .. 1: the dequantised x is exact in f32. */
TEST_F(tmpl, input_fusion_dequantises_int8)
{
	for (size_t i = 0; i < NSHAPES; i++) {
		const struct shape *s = &shapes[i];
		struct tpurt_matmul_opts o = blocks_of(s);
		struct mat q, x, y, sc, z;
		float *hs = malloc(s->k * sizeof(float));

		ASSERT_EQ(0, mat_new(self->dev, &q, TPURT_INT8, s->m, s->k, 8));
		ASSERT_EQ(0, mat_new(self->dev, &x, TPURT_F32, s->m, s->k, 0));
		ASSERT_EQ(0, mat_new(self->dev, &y, TPURT_F32, s->k, s->n, 9));
		ASSERT_EQ(0, mat_new(self->dev, &sc, TPURT_F32, s->k, 0, 0));
		ASSERT_EQ(0, mat_new(self->dev, &z, TPURT_F32, s->m, s->n, 0));
		for (int64_t c = 0; c < s->k; c++)
			hs[c] = (float)(1 + c % 8) / 8;
		ASSERT_EQ(0, tpurt_array_write(sc.a, hs));
		for (int64_t e = 0; e < s->m * s->k; e++)
			x.h[e] = q.h[e] * hs[e % s->k];
		o.x_fusion = (struct tpurt_input_fusion){
			.enabled = 1, .dtype = TPURT_F32, .fn = TPURT_IDENTITY,
			.op = TPURT_MUL, .operand = TPURT_FUSE_COLUMNS, .columns = sc.a,
		};
		ASSERT_EQ(0, tpurt_matmul(q.a, y.a, z.a, &o, NULL)) TH_LOG("%s", tpurt_last_error());
		EXPECT_EQ(0, check(_metadata, &z, &x, 0, &y, 0, s->k, NULL, 1, 0, 0))
			TH_LOG("shape %zu", i);
		free(hs);
		mat_free(&q), mat_free(&x), mat_free(&y), mat_free(&sc), mat_free(&z);
	}
}

TEST_F(tmpl, int8_into_int32_and_scaled_f32)
{
	for (size_t i = 0; i < NSHAPES; i++) {
		const struct shape *s = &shapes[i];
		struct tpurt_matmul_opts o = blocks_of(s);
		struct mat x, y, z32, zf;

		ASSERT_EQ(0, mat_new(self->dev, &x, TPURT_INT8, s->m, s->k, 10));
		ASSERT_EQ(0, mat_new(self->dev, &y, TPURT_INT8, s->k, s->n, 11));
		ASSERT_EQ(0, mat_new(self->dev, &z32, TPURT_INT32, s->m, s->n, 0));
		ASSERT_EQ(0, mat_new(self->dev, &zf, TPURT_F32, s->m, s->n, 0));
		ASSERT_EQ(0, tpurt_matmul(x.a, y.a, z32.a, &o, NULL)) TH_LOG("%s", tpurt_last_error());
		EXPECT_EQ(0, check(_metadata, &z32, &x, 0, &y, 0, s->k, NULL, 1, 0, 0))
			TH_LOG("int32, shape %zu", i);
		o.out_scale = 0.25f;
		ASSERT_EQ(0, tpurt_matmul(x.a, y.a, zf.a, &o, NULL)) TH_LOG("%s", tpurt_last_error());
		EXPECT_EQ(0, check(_metadata, &zf, &x, 0, &y, 0, s->k, NULL, 0.25, 0, 0))
			TH_LOG("scaled f32, shape %zu", i);
		mat_free(&x), mat_free(&y), mat_free(&z32), mat_free(&zf);
	}
}

static double dact(enum tpurt_activation a, double v)
{
	const double c = 0.7978845608028654, k = 0.044715;
	double t = tanh(c * (v + k * v * v * v));

	if (a == TPURT_ACT_RELU)
		return v > 0;
	return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * c * (1 + 3 * k * v * v);
}

/* dx = g @ y.T and dy = x.T @ g, g = dz * act'(pre): @g is filled here. */
static int check_vjp(struct __test_metadata *_metadata, struct mat *dx,
		     struct mat *dy, const struct mat *x, const struct mat *y,
		     struct mat *g, const struct mat *pre, const struct mat *dz,
		     enum tpurt_activation a)
{
	int64_t m = x->r, n = y->c;

	for (int64_t e = 0; e < m * n; e++)
		g->h[e] = dz->h[e] * dact(a, pre->h[e]);
	return check(_metadata, dx, g, 0, y, 1, n, NULL, 1, 0, 1e-5) +
	       check(_metadata, dy, x, 1, g, 0, m, NULL, 1, 0, 1e-5);
}

TEST_F(tmpl, backward_pass_relu_and_gelu)
{
	static const enum tpurt_activation acts[2] = { TPURT_ACT_RELU, TPURT_ACT_GELU };

	for (size_t i = 0; i < NSHAPES * 2; i++) {
		const struct shape *s = &shapes[i / 2];
		struct tpurt_matmul_opts o = blocks_of(s);
		struct mat x, y, dz, pre, dx, dy, g;

		ASSERT_EQ(0, mat_new(self->dev, &x, TPURT_F32, s->m, s->k, 12));
		ASSERT_EQ(0, mat_new(self->dev, &y, TPURT_F32, s->k, s->n, 13));
		ASSERT_EQ(0, mat_new(self->dev, &dz, TPURT_F32, s->m, s->n, 14));
		ASSERT_EQ(0, mat_new(self->dev, &pre, TPURT_F32, s->m, s->n, 0));
		ASSERT_EQ(0, mat_new(self->dev, &g, TPURT_F32, s->m, s->n, 0));
		ASSERT_EQ(0, mat_new(self->dev, &dx, TPURT_F32, s->m, s->k, 0));
		ASSERT_EQ(0, mat_new(self->dev, &dy, TPURT_F32, s->k, s->n, 0));
		ASSERT_EQ(0, tpurt_matmul(x.a, y.a, pre.a, &o, NULL));
		ASSERT_EQ(0, mat_sync(&pre));
		o.activation = acts[i % 2];
		/* relu from the saved pre-activation, gelu recomputing it */
		ASSERT_EQ(0, tpurt_matmul_vjp(x.a, y.a, dz.a, i % 2 ? NULL : pre.a,
					      dx.a, dy.a, &o, NULL))
			TH_LOG("%s", tpurt_last_error());
		EXPECT_EQ(0, check_vjp(_metadata, &dx, &dy, &x, &y, &g, &pre, &dz, o.activation))
			TH_LOG("activation %d, shape %zu", o.activation, i / 2);
		mat_free(&x), mat_free(&y), mat_free(&dz), mat_free(&pre);
		mat_free(&g), mat_free(&dx), mat_free(&dy);
	}
}

TPU_HARNESS_MAIN
