// SPDX-License-Identifier: MIT
/*
 * The guide's third exercise: the backward pass (jax.custom_vjp) of
 * z = act(x @ y + b). Given the cotangent dz and g = dz * act'(pre):
 *
 *   dx = g @ y.T   the transpose_rhs kernel, y read in place
 *   dy = x.T @ g   a transposed-LHS contraction, x read in place
 *
 * with act'(pre) * dz computed in VMEM on each dz block. A small case
 * (gelu) is checked against central finite differences of the scalar loss
 * sum(dz * z), computed on the host in double; a large one (relu) against
 * the formulas above with the randomized check, and once more with the
 * pre-activation recomputed instead of saved (same bits).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample_util.h"

#define NAME "matmul_vjp"
#define SM 8
#define SK 16
#define SN 24
#define BIG 1024

static struct tpurt_device_info info;

static double gelu(double v)
{
	return 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

/* sum(w * gelu(x @ y + b)) in double: the loss the gradients are of. */
static double loss(const double *x, const double *y, const double *b,
		   const double *w)
{
	double l = 0;

	for (int r = 0; r < SM; r++) {
		for (int c = 0; c < SN; c++) {
			double acc = b[c];

			for (int p = 0; p < SK; p++)
				acc += x[r * SK + p] * y[p * SN + c];
			l += w[r * SN + c] * gelu(acc);
		}
	}
	return l;
}

/* dL/dv[i] by central differences, against the device's @got. */
static bool check_fd(const char *name, double *v, int n, const float *got,
		     const double *x, const double *y, const double *b,
		     const double *w)
{
	const double h = 1e-3;
	double worst = 0;

	for (int i = 0; i < n; i++) {
		double keep = v[i], lp, lm, fd;

		v[i] = keep + h;
		lp = loss(x, y, b, w);
		v[i] = keep - h;
		lm = loss(x, y, b, w);
		v[i] = keep;
		fd = (lp - lm) / (2 * h);
		worst = fmax(worst, fabs(fd - got[i]) / (1 + fabs(fd)));
	}
	printf("  %s: worst relative difference to finite differences %.2e\n", name, worst);
	return worst < 1e-4;
}

static struct tpurt_array *from_doubles(struct tpurt_device *dev, int rank,
					int64_t r, int64_t c, double *h, uint32_t seed)
{
	int64_t shape[2] = { r, c };
	size_t n = (size_t)(r * (rank == 2 ? c : 1));
	float *f = malloc(n * sizeof(float));
	struct tpurt_array *a = NULL;

	sample_fill(f, TPURT_F32, n, seed);
	for (size_t i = 0; f && i < n; i++)
		h[i] = f[i];
	if (f && (tpurt_array_create(dev, TPURT_F32, rank, shape, &a) ||
		  tpurt_array_write(a, f)))
		a = NULL;
	free(f);
	return a;
}

static bool small_case(struct tpurt_device *dev)
{
	static double hx[SM * SK], hy[SK * SN], hb[SN], hw[SM * SN];
	struct tpurt_array *x = from_doubles(dev, 2, SM, SK, hx, 61);
	struct tpurt_array *y = from_doubles(dev, 2, SK, SN, hy, 62);
	struct tpurt_array *b = from_doubles(dev, 1, SN, 0, hb, 63);
	struct tpurt_array *dz = from_doubles(dev, 2, SM, SN, hw, 64);
	struct tpurt_array *dx = sample_array(dev, TPURT_F32, SM, SK, 65, NULL);
	struct tpurt_array *dy = sample_array(dev, TPURT_F32, SK, SN, 66, NULL);
	struct tpurt_matmul_opts o = { .activation = TPURT_ACT_GELU, .bias = b };
	float *gx = NULL, *gy = NULL;
	bool ok = x && y && b && dz && dx && dy;

	printf("%s: small (%d, %d) @ (%d, %d), gelu and bias, pre recomputed\n", NAME,
	       SM, SK, SK, SN);
	if (ok && tpurt_matmul_vjp(x, y, dz, NULL, dx, dy, &o, NULL)) {
		printf("  vjp: %s\n", tpurt_last_error());
		ok = false;
	}
	if (ok) {
		gx = sample_read(dx);
		gy = sample_read(dy);
		ok = gx && gy && check_fd("dx", hx, SM * SK, gx, hx, hy, hb, hw);
		ok = ok && check_fd("dy", hy, SK * SN, gy, hx, hy, hb, hw);
	}
	free(gx), free(gy);
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(b);
	tpurt_array_free(dz), tpurt_array_free(dx), tpurt_array_free(dy);
	return ok;
}

/* g = dz * [pre > 0] on the host, exactly as the device forms it. */
static float *relu_cotangent(const float *dz, const float *pre, size_t n)
{
	float *g = malloc(n * sizeof(float));

	for (size_t i = 0; g && i < n; i++)
		g[i] = pre[i] > 0 ? dz[i] : 0;
	return g;
}

static float *transposed(const float *a, int64_t r, int64_t c)
{
	float *t = malloc((size_t)(r * c) * sizeof(float));

	for (int64_t i = 0; t && i < r; i++)
		for (int64_t j = 0; j < c; j++)
			t[j * r + i] = a[i * c + j];
	return t;
}

struct big {
	struct tpurt_array *x, *y, *b, *dz, *pre, *dx, *dy, *dx2;
	float *hx, *hy, *hdz;
};

static void report(const char *what, const struct tpurt_job_stats *st)
{
	char label[64];

	snprintf(label, sizeof(label), "%-9s m=k=n=%d", what, BIG);
	sample_report(label, &info, st, BIG, BIG, BIG, TPURT_F32);
}

/* Forward (saving pre), backward with it, and backward recomputing it. */
static bool big_run(struct big *t)
{
	struct tpurt_matmul_opts lin = { .bias = t->b };
	struct tpurt_matmul_opts o = { .activation = TPURT_ACT_RELU, .bias = t->b };
	struct tpurt_job_stats fwd;
	struct tpurt_vjp_stats st, st2;

	if (tpurt_matmul(t->x, t->y, t->pre, &lin, &fwd) ||
	    tpurt_matmul_vjp(t->x, t->y, t->dz, t->pre, t->dx, t->dy, &o, &st) ||
	    tpurt_matmul_vjp(t->x, t->y, t->dz, NULL, t->dx2, NULL, &o, &st2)) {
		printf("  %s\n", tpurt_last_error());
		return false;
	}
	report("forward", &fwd);
	report("dx", &st.dx);
	report("dy", &st.dy);
	sample_ratio("dx", &st.dx, &fwd);
	sample_ratio("dy", &st.dy, &fwd);
	report("recompute", &st2.recompute);
	return true;
}

static bool big_check(struct big *t)
{
	size_t n = (size_t)BIG * BIG;
	float *pre = sample_read(t->pre), *dx = sample_read(t->dx);
	float *dy = sample_read(t->dy), *dx2 = sample_read(t->dx2);
	float *g = pre ? relu_cotangent(t->hdz, pre, n) : NULL;
	float *xt = transposed(t->hx, BIG, BIG);
	bool ok = g && xt && dx && dy && dx2;

	/* dx = g @ y.T (y stored (k, n): the checker's transposed RHS) */
	ok = ok && sample_check_matmul(g, t->hy, dx, BIG, BIG, BIG, TPURT_F32,
				       TPURT_F32, true, 1e-5);
	ok = ok && sample_check_matmul(xt, g, dy, BIG, BIG, BIG, TPURT_F32,
				       TPURT_F32, false, 1e-5);
	if (ok && memcmp(dx, dx2, n * sizeof(float))) {
		printf("  dx with pre recomputed differs from dx with pre saved\n");
		ok = false;
	}
	free(pre), free(dx), free(dy), free(dx2), free(g), free(xt);
	return ok;
}

static bool big_case(struct tpurt_device *dev)
{
	int64_t nshape[1] = { BIG };
	struct big t = { 0 };
	bool ok;

	printf("%s: large (%d, %d) @ (%d, %d), relu and bias, f32\n", NAME, BIG, BIG,
	       BIG, BIG);
	t.x = sample_array(dev, TPURT_F32, BIG, BIG, 71, (void **)&t.hx);
	t.y = sample_array(dev, TPURT_F32, BIG, BIG, 72, (void **)&t.hy);
	t.dz = sample_array(dev, TPURT_F32, BIG, BIG, 73, (void **)&t.hdz);
	t.pre = sample_array(dev, TPURT_F32, BIG, BIG, 74, NULL);
	t.dx = sample_array(dev, TPURT_F32, BIG, BIG, 75, NULL);
	t.dx2 = sample_array(dev, TPURT_F32, BIG, BIG, 76, NULL);
	t.dy = sample_array(dev, TPURT_F32, BIG, BIG, 77, NULL);
	ok = t.x && t.y && t.dz && t.pre && t.dx && t.dx2 && t.dy &&
	     !tpurt_array_create(dev, TPURT_F32, 1, nshape, &t.b) &&
	     !tpurt_array_fill(t.b, 0.125);
	ok = ok && big_run(&t) && big_check(&t);
	free(t.hx), free(t.hy), free(t.hdz);
	tpurt_array_free(t.x), tpurt_array_free(t.y), tpurt_array_free(t.b);
	tpurt_array_free(t.dz), tpurt_array_free(t.pre);
	tpurt_array_free(t.dx), tpurt_array_free(t.dx2), tpurt_array_free(t.dy);
	return ok;
}

int main(void)
{
	struct tpurt_device *dev;
	bool ok;

	if (tpurt_open(&dev) || tpurt_device_info(dev, &info))
		return sample_fail(NAME, "open");
	ok = small_case(dev);
	ok = big_case(dev) && ok;
	tpurt_close(dev);
	return sample_result(NAME, ok);
}
