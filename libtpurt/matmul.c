// SPDX-License-Identifier: MIT
/*
 * tpurt_matmul: the guide's templated matmul kernel, written with the same
 * grid spec and kernel builder a user has. Grid (m/bm, n/bn, k/bk),
 * (parallel, parallel, arbitrary); an f32 (int32 for 8-bit inputs) VMEM
 * accumulator zeroed at k == 0; at the last k step the epilogue (scale,
 * bias, activation) and the cast into the output block.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tpurt_private.h"

#define LAST_K	"k == num_programs(k) - 1"

/* One tpurt_matmul() call: its arrays and options, then the grid spec and
 * kernel built from them. */
struct matmul_build {
	struct tpurt_array *x, *y, *out;
	const struct tpurt_matmul_opts *o;
	const struct tpurt_act_grad *xg, *yg;	/* vjp.c's fused gradients */
	uint64_t m, k, n;
	int64_t bm, bk, bn;
	enum tpurt_dtype dot_dtype;	/* what the dot's operands are */
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *kern;
	struct tpurt_array *args[TPU_JOB_MAX_OPERANDS];
	int nargs;
	const char *lhs, *rhs;		/* the dot's operands: inputs or fused */
};

static int check_shapes(struct matmul_build *mb)
{
	const struct tpurt_matmul_opts *o = mb->o;
	struct tpurt_array *x = mb->x, *y = mb->y, *z = mb->out;
	uint64_t yk;

	if (x->rank != 2 || y->rank != 2 || z->rank != 2)
		return tpurt_fail(-EINVAL, "matmul: x, y and out must be rank 2 (ranks %d, %d, %d)",
				  x->rank, y->rank, z->rank);
	mb->m = (uint64_t)x->shape[o->transpose_lhs ? 1 : 0];
	mb->k = (uint64_t)x->shape[o->transpose_lhs ? 0 : 1];
	yk = (uint64_t)y->shape[o->transpose_rhs ? 1 : 0];
	mb->n = (uint64_t)y->shape[o->transpose_rhs ? 0 : 1];
	if (yk != mb->k)
		return tpurt_fail(-EINVAL,
				  "matmul: x%s is (%lld, %lld) and y%s is (%lld, %lld): contraction sizes %llu and %llu differ",
				  o->transpose_lhs ? ".T" : "", (long long)x->shape[0],
				  (long long)x->shape[1], o->transpose_rhs ? ".T" : "",
				  (long long)y->shape[0], (long long)y->shape[1],
				  (unsigned long long)mb->k, (unsigned long long)yk);
	if ((uint64_t)z->shape[0] != mb->m || (uint64_t)z->shape[1] != mb->n)
		return tpurt_fail(-EINVAL, "matmul: out is (%lld, %lld), the product is (%llu, %llu)",
				  (long long)z->shape[0], (long long)z->shape[1],
				  (unsigned long long)mb->m, (unsigned long long)mb->n);
	if (o->bias && (o->bias->rank != 1 || (uint64_t)o->bias->shape[0] != mb->n))
		return tpurt_fail(-EINVAL, "matmul: bias must be a (%llu,) row vector",
				  (unsigned long long)mb->n);
	return 0;
}

/* The dot's operand dtype: x's, or what its fusion produces. */
static int dot_dtypes(struct matmul_build *mb)
{
	const struct tpurt_matmul_opts *o = mb->o;
	enum tpurt_dtype a = o->x_fusion.enabled ? o->x_fusion.dtype : mb->x->dtype;
	enum tpurt_dtype b = o->y_fusion.enabled ? o->y_fusion.dtype : mb->y->dtype;

	a = mb->xg ? mb->xg->dtype : a;
	b = mb->yg ? mb->yg->dtype : b;

	if (!(a == b || (tpu_dtype_is_8bit(a) && tpu_dtype_is_8bit(b))))
		return tpurt_fail(-EINVAL,
				  "matmul: the dot would multiply %s by %s; inputs (after fusion) must both be float32, both bfloat16 or both 8-bit",
				  tpurt_dtype_name(a), tpurt_dtype_name(b));
	if (a == TPURT_INT32)
		return tpurt_fail(-EINVAL, "matmul: the MXU has no int32 x int32 routine");
	mb->dot_dtype = a;
	return 0;
}

/*
 * The VMEM the sweep may plan for. A fused gradient keeps up to four more
 * f32 blocks of its input and a second input (pre) in VMEM, which the
 * sweep's model of the plain kernel does not count: give it a third.
 */
static uint64_t block_budget(const struct matmul_build *mb,
			     const struct tpurt_device_info *info)
{
	uint64_t limit = mb->o->vmem_limit_bytes ? mb->o->vmem_limit_bytes :
			 info->vmem_limit;

	return mb->xg || mb->yg ? limit / 3 : mb->o->vmem_limit_bytes;
}

static int choose_blocks(struct matmul_build *mb)
{
	const struct tpurt_matmul_opts *o = mb->o;
	const struct tpurt_device_info *info;
	int64_t b[3] = { o->bm, o->bk, o->bn };
	int ret;

	if (!b[0] || !b[1] || !b[2]) {
		ret = tpurt_device_cached_info(mb->x->buf->dev, &info);
		if (!ret)
			ret = tpurt_matmul_choose_blocks(info, mb->m, mb->k, mb->n,
							 mb->dot_dtype, block_budget(mb, info),
							 b);
		if (ret)
			return ret;
		b[0] = o->bm ? o->bm : b[0];
		b[1] = o->bk ? o->bk : b[1];
		b[2] = o->bn ? o->bn : b[2];
	}
	mb->bm = b[0];
	mb->bk = b[1];
	mb->bn = b[2];
	return 0;
}

static int add_input(struct matmul_build *mb, const char *name, struct tpurt_array *a,
		     int rank, int64_t d0, int64_t d1, const char *map)
{
	struct tpurt_block_spec spec = { rank, { d0, d1 }, map };
	int ret = tpurt_grid_spec_add_input(mb->gs, name, &spec);

	if (!ret)
		mb->args[mb->nargs++] = a;
	return ret;
}

/*
 * Input fusion: @name's block, transformed into a scratch @fused that the
 * dot reads. @cols_map indexes the per-column operand by the block's
 * column grid index.
 */
static int add_fusion(struct matmul_build *mb, const struct tpurt_input_fusion *f,
		      const char *name, const char *fused, const char *cols,
		      int64_t rows, int64_t ncols, const char *cols_map)
{
	int64_t shape[2] = { rows, ncols };
	int ret = tpurt_grid_spec_add_scratch(mb->gs, fused, TPURT_VMEM, f->dtype,
					      2, shape);

	if (!ret && f->operand == TPURT_FUSE_COLUMNS) {
		if (!f->columns || f->columns->rank != 1)
			return tpurt_fail(-EINVAL, "matmul: %s fusion: columns must be a rank-1 array",
					  name);
		ret = add_input(mb, cols, f->columns, 1, ncols, 0, cols_map);
	}
	if (!ret)
		ret = tpurt_kernel_unary(mb->kern, f->fn, fused, name);
	if (ret || f->operand == TPURT_FUSE_NONE)
		return ret;
	if (f->operand == TPURT_FUSE_SCALAR)
		return tpurt_kernel_binary_scalar(mb->kern, f->op, fused, fused,
						  f->scalar);
	return tpurt_kernel_binary(mb->kern, f->op, fused, fused, cols,
				   TPURT_BCAST_ROW);
}

/*
 * A fused gradient: @name's block (dz) times act'(pre), pre's block read
 * with the same spec, into "<name>_fused" for the dot. The derivative is
 * computed in f32 and rounded once, by the product, into the dot's dtype.
 */
static int add_grad(struct matmul_build *mb, const struct tpurt_act_grad *g,
		    const char *name, int64_t rows, int64_t cols, const char *map)
{
	int64_t shape[2] = { rows, cols };
	int need_t = g->act == TPURT_ACT_SIGMOID || g->act == TPURT_ACT_SILU ||
		     g->act == TPURT_ACT_GELU;
	char pre[TPURT_NAME_MAX], d[TPURT_NAME_MAX], t[TPURT_NAME_MAX];
	char u[TPURT_NAME_MAX], fused[TPURT_NAME_MAX];
	int ret;

	snprintf(pre, sizeof(pre), "%s_pre", name);
	snprintf(d, sizeof(d), "%s_dact", name);
	snprintf(t, sizeof(t), "%s_t", name);
	snprintf(u, sizeof(u), "%s_u", name);
	snprintf(fused, sizeof(fused), "%s_fused", name);
	ret = tpurt_grid_spec_add_scratch(mb->gs, fused, TPURT_VMEM, g->dtype, 2, shape);
	if (ret || g->act == TPURT_ACT_IDENTITY)
		return ret ? ret : tpurt_kernel_store(mb->kern, fused, name);
	if (!g->pre)
		return tpurt_fail(-EINVAL, "matmul: a fused gradient needs the pre-activation");
	ret = add_input(mb, pre, g->pre, 2, rows, cols, map);
	if (!ret)
		ret = tpurt_grid_spec_add_scratch(mb->gs, d, TPURT_VMEM, TPURT_F32, 2, shape);
	if (!ret && need_t)
		ret = tpurt_grid_spec_add_scratch(mb->gs, t, TPURT_VMEM, TPURT_F32, 2, shape);
	if (!ret && g->act == TPURT_ACT_GELU)
		ret = tpurt_grid_spec_add_scratch(mb->gs, u, TPURT_VMEM, TPURT_F32, 2, shape);
	if (!ret)
		ret = tpurt_kernel_act_derivative(mb->kern, g->act, d, pre, t, u);
	return ret ? ret : tpurt_kernel_binary(mb->kern, TPURT_MUL, fused, name, d,
					       TPURT_BCAST_NONE);
}

static int add_operands(struct matmul_build *mb)
{
	const struct tpurt_matmul_opts *o = mb->o;
	int64_t xr = o->transpose_lhs ? mb->bk : mb->bm;
	int64_t xc = o->transpose_lhs ? mb->bm : mb->bk;
	int64_t yr = o->transpose_rhs ? mb->bn : mb->bk;
	int64_t yc = o->transpose_rhs ? mb->bk : mb->bn;
	const char *xmap = o->transpose_lhs ? "i, j, k -> k, i" : "i, j, k -> i, k";
	const char *ymap = o->transpose_rhs ? "i, j, k -> j, k" : "i, j, k -> k, j";
	int ret;

	ret = add_input(mb, "x", mb->x, 2, xr, xc, xmap);
	if (!ret)
		ret = add_input(mb, "y", mb->y, 2, yr, yc, ymap);
	mb->lhs = mb->xg ? "x_fused" : "x";
	mb->rhs = mb->yg ? "y_fused" : "y";
	if (!ret && mb->xg)
		ret = add_grad(mb, mb->xg, "x", xr, xc, xmap);
	if (!ret && mb->yg)
		ret = add_grad(mb, mb->yg, "y", yr, yc, ymap);
	if (!ret && o->x_fusion.enabled) {
		ret = add_fusion(mb, &o->x_fusion, "x", "x_fused", "x_columns", xr, xc,
				 o->transpose_lhs ? "i, j, k -> i" : "i, j, k -> k");
		mb->lhs = "x_fused";
	}
	if (!ret && o->y_fusion.enabled) {
		ret = add_fusion(mb, &o->y_fusion, "y", "y_fused", "y_columns", yr, yc,
				 o->transpose_rhs ? "i, j, k -> k" : "i, j, k -> j");
		mb->rhs = "y_fused";
	}
	if (!ret && o->bias)
		ret = add_input(mb, "bias", o->bias, 1, mb->bn, 0, "i, j, k -> j");
	if (!ret) {
		struct tpurt_block_spec z = { 2, { mb->bm, mb->bn }, "i, j, k -> i, j" };

		ret = tpurt_grid_spec_add_output(mb->gs, "out", &z);
		mb->args[mb->nargs++] = mb->out;
	}
	return ret;
}

/* At the last k step: out = act(acc * scale + bias). */
static int add_epilogue(struct matmul_build *mb, enum tpurt_dtype acc_dtype)
{
	const struct tpurt_matmul_opts *o = mb->o;
	struct tpurt_kernel *k = mb->kern;
	const char *src = "acc";
	int ret = tpurt_kernel_when(k, LAST_K);

	/* An int32 accumulator cannot hold a scaled or biased value. */
	if (!ret && (o->out_scale || o->bias) && acc_dtype == TPURT_INT32) {
		int64_t shape[2] = { mb->bm, mb->bn };

		ret = tpurt_grid_spec_add_scratch(mb->gs, "acc_f32", TPURT_VMEM,
						  TPURT_F32, 2, shape);
		if (!ret)
			ret = tpurt_kernel_binary_scalar(k, TPURT_MUL, "acc_f32", "acc",
							 o->out_scale ? o->out_scale : 1.0f);
		src = "acc_f32";
	} else if (!ret && o->out_scale) {
		ret = tpurt_kernel_binary_scalar(k, TPURT_MUL, "acc", "acc", o->out_scale);
	}
	if (!ret && o->bias)
		ret = tpurt_kernel_binary(k, TPURT_ADD, src, src, "bias", TPURT_BCAST_ROW);
	if (!ret && o->activation == TPURT_ACT_IDENTITY && acc_dtype == TPURT_INT32 &&
	    !strcmp(src, "acc") && tpu_dtype_is_8bit(mb->out->dtype))
		/* an 8-bit output saturates; astype alone would wrap */
		ret = mb->out->dtype == TPURT_INT8 ?
		      tpurt_kernel_clamp(k, "out", src, -128.0f, 127.0f) :
		      tpurt_kernel_clamp(k, "out", src, 0.0f, 255.0f);
	else if (!ret)
		ret = tpurt_kernel_unary(k, (enum tpurt_unary)o->activation, "out", src);
	return ret ? ret : tpurt_kernel_end_when(k);
}

static int build_kernel(struct matmul_build *mb)
{
	const struct tpurt_matmul_opts *o = mb->o;
	enum tpurt_dtype acc = tpu_dtype_is_8bit(mb->dot_dtype) ? TPURT_INT32 : TPURT_F32;
	int64_t acc_shape[2] = { mb->bm, mb->bn };
	unsigned int flags = TPURT_DOT_ACCUMULATE |
			     (o->transpose_lhs ? TPURT_DOT_TRANSPOSE_LHS : 0) |
			     (o->transpose_rhs ? TPURT_DOT_TRANSPOSE_RHS : 0);
	int ret;

	if ((unsigned int)o->activation > TPURT_ACT_TANH)
		return tpurt_fail(-EINVAL, "matmul: unknown activation %d",
				  (int)o->activation);
	ret = tpurt_grid_spec_add_scratch(mb->gs, "acc", TPURT_VMEM, acc, 2, acc_shape);
	if (!ret)
		ret = tpurt_kernel_when(mb->kern, "k == 0");
	if (!ret)
		ret = tpurt_kernel_zero(mb->kern, "acc");
	if (!ret)
		ret = tpurt_kernel_end_when(mb->kern);
	if (!ret)
		ret = add_operands(mb);	/* fusion ops run before the dot */
	if (!ret)
		ret = tpurt_kernel_dot(mb->kern, "acc", mb->lhs, mb->rhs, flags);
	return ret ? ret : add_epilogue(mb, acc);
}

/*
 * Transpose views become their base arrays read through the transposed
 * paths: the kernel sees physical layouts only, as pallas_call does.
 */
static int resolve_views(struct matmul_build *mb, struct tpurt_matmul_opts *o)
{
	int tx, ty;

	if (mb->out->transposed)
		return tpurt_fail(-EINVAL, "matmul: out is a transpose view; outputs are written in their own layout only");
	mb->x = (struct tpurt_array *)tpurt_array_physical(mb->x, &tx);
	mb->y = (struct tpurt_array *)tpurt_array_physical(mb->y, &ty);
	o->transpose_lhs = !!o->transpose_lhs ^ tx;
	o->transpose_rhs = !!o->transpose_rhs ^ ty;
	mb->o = o;
	return 0;
}

int tpurt_matmul_fused(struct tpurt_array *x, struct tpurt_array *y,
		       struct tpurt_array *out,
		       const struct tpurt_matmul_opts *opts,
		       const struct tpurt_act_grad *xg,
		       const struct tpurt_act_grad *yg,
		       struct tpurt_job_stats *stats)
{
	struct tpurt_matmul_opts o = { 0 };
	struct matmul_build mb = { .x = x, .y = y, .out = out, .xg = xg, .yg = yg };
	struct tpurt_compiler_params params = {
		.dimension_semantics = "parallel, parallel, arbitrary",
	};
	int64_t grid[3];
	int ret;

	if (opts)
		o = *opts;
	params.vmem_limit_bytes = o.vmem_limit_bytes;
	params.flags = o.flags;
	params.timeout_ms = o.timeout_ms;
	ret = resolve_views(&mb, &o);
	if (!ret)
		ret = check_shapes(&mb);
	if (!ret)
		ret = dot_dtypes(&mb);
	if (!ret)
		ret = choose_blocks(&mb);
	if (ret)
		return ret;
	grid[0] = (int64_t)((mb.m + mb.bm - 1) / mb.bm);
	grid[1] = (int64_t)((mb.n + mb.bn - 1) / mb.bn);
	grid[2] = (int64_t)((mb.k + mb.bk - 1) / mb.bk);
	ret = tpurt_grid_spec_create(3, grid, &mb.gs);
	if (!ret)
		ret = tpurt_kernel_create(&mb.kern);
	if (!ret)
		ret = tpurt_grid_spec_set_index_names(mb.gs, "i, j, k");
	if (!ret)
		ret = build_kernel(&mb);
	if (!ret)
		ret = tpurt_pallas_call(mb.kern, mb.gs, &params, mb.args, mb.nargs,
					stats);
	tpurt_kernel_free(mb.kern);
	tpurt_grid_spec_free(mb.gs);
	return ret;
}

int tpurt_matmul(struct tpurt_array *x, struct tpurt_array *y,
		 struct tpurt_array *out, const struct tpurt_matmul_opts *opts,
		 struct tpurt_job_stats *stats)
{
	return tpurt_matmul_fused(x, y, out, opts, NULL, NULL, stats);
}
