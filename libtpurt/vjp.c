// SPDX-License-Identifier: MIT
/*
 * tpurt_matmul_vjp: the backward pass of tpurt_matmul (the guide's third
 * exercise, jax.custom_vjp). Two matmuls over the forward operands, each
 * read transposed in place through a transpose view, with the cotangent
 * dz multiplied by the activation's derivative inside the kernel:
 *
 *	dx = s * (g @ y.T)	dy = s * (x.T @ g)	g = dz * act'(pre)
 *
 * The device has no derivative ops, so each derivative is a short chain
 * of the elementwise ops every kernel has (UNARY, BINARY with a scalar or
 * a same-shape operand), computed in f32 scratch.
 */
#include <errno.h>
#include <string.h>

#include "tpurt_private.h"

/* sqrt(2 / pi) and the cubic coefficient of jax.nn.gelu's tanh form. */
#define GELU_C	0.7978845608028654f
#define GELU_A	0.044715f
/*
 * 2^126: the largest power of two a binary32 immediate holds. Twice
 * multiplied and clamped to 1, it takes every positive f32, subnormals
 * included, to exactly 1, so relu's mask is exact.
 */
#define MASK_GAIN	8.507059173023462e37f

static int mul_s(struct tpurt_kernel *k, const char *d, float v)
{
	return tpurt_kernel_binary_scalar(k, TPURT_MUL, d, d, v);
}

static int add_s(struct tpurt_kernel *k, const char *d, float v)
{
	return tpurt_kernel_binary_scalar(k, TPURT_ADD, d, d, v);
}

/* d = a * b, both full blocks. */
static int mul(struct tpurt_kernel *k, const char *d, const char *a, const char *b)
{
	return tpurt_kernel_binary(k, TPURT_MUL, d, a, b, TPURT_BCAST_NONE);
}

/* d = 1 - d */
static int one_minus(struct tpurt_kernel *k, const char *d)
{
	int ret = tpurt_kernel_unary(k, TPURT_NEG, d, d);

	return ret ? ret : add_s(k, d, 1.0f);
}

/* relu'(x) = [x > 0], as jax.grad(relu)(0) = 0: min(relu(x) * G * G, 1). */
static int relu_mask(struct tpurt_kernel *k, const char *d, const char *pre)
{
	int ret = tpurt_kernel_unary(k, TPURT_RELU, d, pre);

	for (int i = 0; i < 2 && !ret; i++) {
		ret = mul_s(k, d, MASK_GAIN);
		if (!ret)
			ret = tpurt_kernel_binary_scalar(k, TPURT_MIN, d, d, 1.0f);
	}
	return ret;
}

/* d = s = sigmoid(x) and t = 1 - s: what sigmoid' and silu' start from. */
static int sigmoid_and_complement(struct tpurt_kernel *k, const char *d,
				  const char *pre, const char *t)
{
	int ret = tpurt_kernel_unary(k, TPURT_SIGMOID, d, pre);

	if (!ret)
		ret = tpurt_kernel_store(k, t, d);
	return ret ? ret : one_minus(k, t);
}

/* sigmoid'(x) = s (1 - s) */
static int sigmoid_grad(struct tpurt_kernel *k, const char *d, const char *pre,
			const char *t)
{
	int ret = sigmoid_and_complement(k, d, pre, t);

	return ret ? ret : mul(k, d, d, t);
}

/* tanh'(x) = 1 - t^2 */
static int tanh_grad(struct tpurt_kernel *k, const char *d, const char *pre)
{
	int ret = tpurt_kernel_unary(k, TPURT_TANH, d, pre);

	if (!ret)
		ret = mul(k, d, d, d);
	return ret ? ret : one_minus(k, d);
}

/* silu'(x) = s (1 + x (1 - s)) */
static int silu_grad(struct tpurt_kernel *k, const char *d, const char *pre,
		     const char *t)
{
	int ret = sigmoid_and_complement(k, d, pre, t);

	if (!ret)
		ret = mul(k, t, t, pre);
	if (!ret)
		ret = add_s(k, t, 1.0f);
	return ret ? ret : mul(k, d, d, t);
}

/* d = c * x * (1 + a x^2), the shape of both gelu terms below. */
static int gelu_poly(struct tpurt_kernel *k, const char *d, const char *pre,
		     float a, float c)
{
	int ret = mul(k, d, pre, pre);

	if (!ret)
		ret = mul_s(k, d, a);
	if (!ret)
		ret = add_s(k, d, 1.0f);
	if (!ret)
		ret = mul(k, d, d, pre);
	return ret ? ret : mul_s(k, d, c);
}

/*
 * gelu(x) = 0.5 x (1 + t), t = tanh(c (x + a x^3)), so
 * gelu'(x) = 0.5 (1 + t) + (1 - t^2) p, p = 0.5 c x (1 + 3 a x^2)
 *          = (1 + t) (0.5 + p (1 - t)) = (1 + t) (0.5 + p - p t).
 */
static int gelu_grad(struct tpurt_kernel *k, const char *d, const char *pre,
		     const char *t, const char *u)
{
	int ret = gelu_poly(k, t, pre, GELU_A, GELU_C);

	if (!ret)
		ret = tpurt_kernel_unary(k, TPURT_TANH, d, t);		/* d = t */
	if (!ret)
		ret = gelu_poly(k, t, pre, 3 * GELU_A, 0.5f * GELU_C);	/* t = p */
	if (!ret)
		ret = mul(k, u, t, d);					/* u = p t */
	if (!ret)
		ret = tpurt_kernel_binary(k, TPURT_SUB, t, t, u, TPURT_BCAST_NONE);
	if (!ret)
		ret = add_s(k, t, 0.5f);
	if (!ret)
		ret = add_s(k, d, 1.0f);
	return ret ? ret : mul(k, d, d, t);
}

int tpurt_kernel_act_derivative(struct tpurt_kernel *k, enum tpurt_activation act,
				const char *dst, const char *pre,
				const char *t, const char *u)
{
	switch (act) {
	case TPURT_ACT_IDENTITY: {
		int ret = tpurt_kernel_zero(k, dst);

		return ret ? ret : add_s(k, dst, 1.0f);
	}
	case TPURT_ACT_RELU:
		return relu_mask(k, dst, pre);
	case TPURT_ACT_GELU:
		return gelu_grad(k, dst, pre, t, u);
	case TPURT_ACT_SILU:
		return silu_grad(k, dst, pre, t);
	case TPURT_ACT_SIGMOID:
		return sigmoid_grad(k, dst, pre, t);
	case TPURT_ACT_TANH:
		return tanh_grad(k, dst, pre);
	}
	return tpurt_fail(-EINVAL, "matmul: unknown activation %d", (int)act);
}

/* An (r, c) float array in its own layout, or NULL where allowed. */
static int check_grad_array(const struct tpurt_array *a, const char *name,
			    uint64_t r, uint64_t c)
{
	if (!a)
		return 0;
	if (a->transposed)
		return tpurt_fail(-EINVAL, "matmul_vjp: %s must not be a transpose view", name);
	if (a->rank != 2 || (uint64_t)a->shape[0] != r || (uint64_t)a->shape[1] != c)
		return tpurt_fail(-EINVAL, "matmul_vjp: %s must be (%llu, %llu)", name,
				  (unsigned long long)r, (unsigned long long)c);
	if (!tpu_dtype_is_float(a->dtype))
		return tpurt_fail(-EINVAL, "matmul_vjp: %s is %s; gradients are float32 or bfloat16",
				  name, tpurt_dtype_name(a->dtype));
	return 0;
}

/* Logical sizes of the forward product, after its transposes. */
static int forward_dims(const struct tpurt_array *x, const struct tpurt_array *y,
			const struct tpurt_matmul_opts *o, uint64_t dims[3])
{
	if (x->rank != 2 || y->rank != 2)
		return tpurt_fail(-EINVAL, "matmul_vjp: x and y must be rank 2");
	if (!tpu_dtype_is_float(x->dtype) || !tpu_dtype_is_float(y->dtype))
		return tpurt_fail(-EINVAL, "matmul_vjp: x and y are %s and %s; the backward pass is for float32 or bfloat16",
				  tpurt_dtype_name(x->dtype), tpurt_dtype_name(y->dtype));
	if (o->x_fusion.enabled || o->y_fusion.enabled)
		return tpurt_fail(-EOPNOTSUPP, "matmul_vjp: input fusions have no backward pass");
	dims[0] = (uint64_t)x->shape[o->transpose_lhs ? 1 : 0];
	dims[1] = (uint64_t)x->shape[o->transpose_lhs ? 0 : 1];
	dims[2] = (uint64_t)y->shape[o->transpose_rhs ? 0 : 1];
	return 0;
}

/* pre = s * (x @ y) + bias, in f32, when the caller did not save it. */
static int recompute_pre(struct tpurt_array *x, struct tpurt_array *y,
			 const struct tpurt_matmul_opts *o, const uint64_t dims[3],
			 struct tpurt_array **prep, struct tpurt_job_stats *st)
{
	struct tpurt_matmul_opts f = *o;
	int64_t shape[2] = { (int64_t)dims[0], (int64_t)dims[2] };
	int ret = tpurt_array_create(x->buf->dev, TPURT_F32, 2, shape, prep);

	f.activation = TPURT_ACT_IDENTITY;
	if (!ret)
		ret = tpurt_matmul(x, y, *prep, &f, st);
	return ret;
}

struct vjp {
	/* x.T (k, m) and y.T (n, k) of the forward's logical x and y: views,
	 * or the arrays given when the forward call transposed them */
	struct tpurt_array *xt, *yt;
	int own_xt, own_yt, own_pre;
	struct tpurt_array *pre;
};

static void vjp_free(struct vjp *v)
{
	if (v->own_xt)
		tpurt_array_free(v->xt);
	if (v->own_yt)
		tpurt_array_free(v->yt);
	if (v->own_pre)
		tpurt_array_free(v->pre);
}

/* The gradient fused into dz, or NULL when dz can be read as it is. */
static const struct tpurt_act_grad *grad_of(struct tpurt_act_grad *g,
					    const struct tpurt_array *dz)
{
	return g->act == TPURT_ACT_IDENTITY && g->dtype == dz->dtype ? NULL : g;
}

/* dx = s * (g @ y.T): blocks (bm, bn, bk) of the forward's names. */
static int run_dx(struct vjp *v, struct tpurt_array *dz, struct tpurt_array *dx,
		  const struct tpurt_matmul_opts *o, struct tpurt_job_stats *st)
{
	struct tpurt_matmul_opts b = {
		.bm = o->bm, .bk = o->bn, .bn = o->bk, .out_scale = o->out_scale,
		.vmem_limit_bytes = o->vmem_limit_bytes, .flags = o->flags,
	};
	struct tpurt_act_grad g = { o->activation, v->pre, v->yt->dtype };

	return tpurt_matmul_fused(dz, v->yt, dx, &b, grad_of(&g, dz), NULL, st);
}

/* dy = s * (x.T @ g): blocks (bk, bm, bn). */
static int run_dy(struct vjp *v, struct tpurt_array *dz, struct tpurt_array *dy,
		  const struct tpurt_matmul_opts *o, struct tpurt_job_stats *st)
{
	struct tpurt_matmul_opts b = {
		.bm = o->bk, .bk = o->bm, .bn = o->bn, .out_scale = o->out_scale,
		.vmem_limit_bytes = o->vmem_limit_bytes, .flags = o->flags,
	};
	struct tpurt_act_grad g = { o->activation, v->pre, v->xt->dtype };

	return tpurt_matmul_fused(v->xt, dz, dy, &b, NULL, grad_of(&g, dz), st);
}

/* An array given transposed (opts) is its own transpose; else a view. */
static int transposed(struct tpurt_array *a, int given_transposed,
		      struct tpurt_array **tp, int *own)
{
	*own = !given_transposed;
	if (given_transposed) {
		*tp = a;
		return 0;
	}
	return tpurt_array_transpose_view(a, tp);
}

static int vjp_views(struct vjp *v, struct tpurt_array *x, struct tpurt_array *y,
		     const struct tpurt_matmul_opts *o)
{
	int ret = transposed(x, o->transpose_lhs, &v->xt, &v->own_xt);

	return ret ? ret : transposed(y, o->transpose_rhs, &v->yt, &v->own_yt);
}

int tpurt_matmul_vjp(struct tpurt_array *x, struct tpurt_array *y,
		     struct tpurt_array *dz, struct tpurt_array *pre,
		     struct tpurt_array *dx, struct tpurt_array *dy,
		     const struct tpurt_matmul_opts *opts,
		     struct tpurt_vjp_stats *stats)
{
	static const struct tpurt_matmul_opts defaults;
	const struct tpurt_matmul_opts *o = opts ? opts : &defaults;
	struct tpurt_vjp_stats st = { 0 };
	struct vjp v = { .pre = pre };
	uint64_t d[3] = { 0 };
	int ret;

	ret = forward_dims(x, y, o, d);
	if (!ret)
		ret = check_grad_array(dz, "dz", d[0], d[2]);
	if (!ret && !dz)
		ret = tpurt_fail(-EINVAL, "matmul_vjp: dz is NULL");
	if (!ret)
		ret = check_grad_array(pre, "pre", d[0], d[2]);
	if (!ret)
		ret = check_grad_array(dx, "dx", d[0], d[1]);
	if (!ret)
		ret = check_grad_array(dy, "dy", d[1], d[2]);
	if (!ret && !pre && o->activation != TPURT_ACT_IDENTITY) {
		ret = recompute_pre(x, y, o, d, &v.pre, &st.recompute);
		v.own_pre = 1;
	}
	if (!ret)
		ret = vjp_views(&v, x, y, o);
	if (!ret && dx)
		ret = run_dx(&v, dz, dx, o, &st.dx);
	if (!ret && dy)
		ret = run_dy(&v, dz, dy, o, &st.dy);
	vjp_free(&v);
	if (stats)
		*stats = st;
	return ret;
}
