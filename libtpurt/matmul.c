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

struct mm {
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

static int is_8bit(enum tpurt_dtype t)
{
	return t == TPURT_INT8 || t == TPURT_UINT8;
}

static int check_shapes(struct mm *mm)
{
	const struct tpurt_matmul_opts *o = mm->o;
	struct tpurt_array *x = mm->x, *y = mm->y, *z = mm->out;
	uint64_t yk;

	if (x->rank != 2 || y->rank != 2 || z->rank != 2)
		return tpurt_fail(-EINVAL, "matmul: x, y and out must be rank 2 (ranks %d, %d, %d)",
				  x->rank, y->rank, z->rank);
	mm->m = (uint64_t)x->shape[o->transpose_lhs ? 1 : 0];
	mm->k = (uint64_t)x->shape[o->transpose_lhs ? 0 : 1];
	yk = (uint64_t)y->shape[o->transpose_rhs ? 1 : 0];
	mm->n = (uint64_t)y->shape[o->transpose_rhs ? 0 : 1];
	if (yk != mm->k)
		return tpurt_fail(-EINVAL,
				  "matmul: x%s is (%lld, %lld) and y%s is (%lld, %lld): contraction sizes %llu and %llu differ",
				  o->transpose_lhs ? ".T" : "", (long long)x->shape[0],
				  (long long)x->shape[1], o->transpose_rhs ? ".T" : "",
				  (long long)y->shape[0], (long long)y->shape[1],
				  (unsigned long long)mm->k, (unsigned long long)yk);
	if ((uint64_t)z->shape[0] != mm->m || (uint64_t)z->shape[1] != mm->n)
		return tpurt_fail(-EINVAL, "matmul: out is (%lld, %lld), the product is (%llu, %llu)",
				  (long long)z->shape[0], (long long)z->shape[1],
				  (unsigned long long)mm->m, (unsigned long long)mm->n);
	if (o->bias && (o->bias->rank != 1 || (uint64_t)o->bias->shape[0] != mm->n))
		return tpurt_fail(-EINVAL, "matmul: bias must be a (%llu,) row vector",
				  (unsigned long long)mm->n);
	return 0;
}

/* The dot's operand dtype: x's, or what its fusion produces. */
static int dot_dtypes(struct mm *mm)
{
	const struct tpurt_matmul_opts *o = mm->o;
	enum tpurt_dtype a = o->x_fusion.enabled ? o->x_fusion.dtype : mm->x->dtype;
	enum tpurt_dtype b = o->y_fusion.enabled ? o->y_fusion.dtype : mm->y->dtype;

	a = mm->xg ? mm->xg->dtype : a;
	b = mm->yg ? mm->yg->dtype : b;

	if (!(a == b || (is_8bit(a) && is_8bit(b))))
		return tpurt_fail(-EINVAL,
				  "matmul: the dot would multiply %s by %s; inputs (after fusion) must both be float32, both bfloat16 or both 8-bit",
				  tpurt_dtype_name(a), tpurt_dtype_name(b));
	if (a == TPURT_INT32)
		return tpurt_fail(-EINVAL, "matmul: the MXU has no int32 x int32 routine");
	mm->dot_dtype = a;
	return 0;
}

/*
 * The VMEM the sweep may plan for. A fused gradient keeps up to four more
 * f32 blocks of its input and a second input (pre) in VMEM, which the
 * sweep's model of the plain kernel does not count: give it a third.
 */
static uint64_t block_budget(const struct mm *mm, const struct tpurt_device_info *info)
{
	uint64_t limit = mm->o->vmem_limit_bytes ? mm->o->vmem_limit_bytes :
			 info->vmem_limit;

	return mm->xg || mm->yg ? limit / 3 : mm->o->vmem_limit_bytes;
}

static int choose_blocks(struct mm *mm)
{
	const struct tpurt_matmul_opts *o = mm->o;
	const struct tpurt_device_info *info;
	int64_t b[3] = { o->bm, o->bk, o->bn };
	int ret;

	if (!b[0] || !b[1] || !b[2]) {
		ret = tpurt_device_cached_info(mm->x->buf->dev, &info);
		if (!ret)
			ret = tpurt_matmul_choose_blocks(info, mm->m, mm->k, mm->n,
							 mm->dot_dtype, block_budget(mm, info),
							 b);
		if (ret)
			return ret;
		b[0] = o->bm ? o->bm : b[0];
		b[1] = o->bk ? o->bk : b[1];
		b[2] = o->bn ? o->bn : b[2];
	}
	mm->bm = b[0];
	mm->bk = b[1];
	mm->bn = b[2];
	return 0;
}

static int add_input(struct mm *mm, const char *name, struct tpurt_array *a,
		     int rank, int64_t d0, int64_t d1, const char *map)
{
	struct tpurt_block_spec spec = { rank, { d0, d1 }, map };
	int ret = tpurt_grid_spec_add_input(mm->gs, name, &spec);

	if (!ret)
		mm->args[mm->nargs++] = a;
	return ret;
}

/*
 * Input fusion: @name's block, transformed into a scratch @fused that the
 * dot reads. @cols_map indexes the per-column operand by the block's
 * column grid index.
 */
static int add_fusion(struct mm *mm, const struct tpurt_input_fusion *f,
		      const char *name, const char *fused, const char *cols,
		      int64_t rows, int64_t ncols, const char *cols_map)
{
	int64_t shape[2] = { rows, ncols };
	int ret = tpurt_grid_spec_add_scratch(mm->gs, fused, TPURT_VMEM, f->dtype,
					      2, shape);

	if (!ret && f->operand == TPURT_FUSE_COLUMNS) {
		if (!f->columns || f->columns->rank != 1)
			return tpurt_fail(-EINVAL, "matmul: %s fusion: columns must be a rank-1 array",
					  name);
		ret = add_input(mm, cols, f->columns, 1, ncols, 0, cols_map);
	}
	if (!ret)
		ret = tpurt_kernel_unary(mm->kern, f->fn, fused, name);
	if (ret || f->operand == TPURT_FUSE_NONE)
		return ret;
	if (f->operand == TPURT_FUSE_SCALAR)
		return tpurt_kernel_binary_scalar(mm->kern, f->op, fused, fused,
						  f->scalar);
	return tpurt_kernel_binary(mm->kern, f->op, fused, fused, cols,
				   TPURT_BCAST_ROW);
}

/*
 * A fused gradient: @name's block (dz) times act'(pre), pre's block read
 * with the same spec, into "<name>_fused" for the dot. The derivative is
 * computed in f32 and rounded once, by the product, into the dot's dtype.
 */
static int add_grad(struct mm *mm, const struct tpurt_act_grad *g,
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
	ret = tpurt_grid_spec_add_scratch(mm->gs, fused, TPURT_VMEM, g->dtype, 2, shape);
	if (ret || g->act == TPURT_ACT_IDENTITY)
		return ret ? ret : tpurt_kernel_store(mm->kern, fused, name);
	if (!g->pre)
		return tpurt_fail(-EINVAL, "matmul: a fused gradient needs the pre-activation");
	ret = add_input(mm, pre, g->pre, 2, rows, cols, map);
	if (!ret)
		ret = tpurt_grid_spec_add_scratch(mm->gs, d, TPURT_VMEM, TPURT_F32, 2, shape);
	if (!ret && need_t)
		ret = tpurt_grid_spec_add_scratch(mm->gs, t, TPURT_VMEM, TPURT_F32, 2, shape);
	if (!ret && g->act == TPURT_ACT_GELU)
		ret = tpurt_grid_spec_add_scratch(mm->gs, u, TPURT_VMEM, TPURT_F32, 2, shape);
	if (!ret)
		ret = tpurt_kernel_act_derivative(mm->kern, g->act, d, pre, t, u);
	return ret ? ret : tpurt_kernel_binary(mm->kern, TPURT_MUL, fused, name, d,
					       TPURT_BCAST_NONE);
}

static int add_operands(struct mm *mm)
{
	const struct tpurt_matmul_opts *o = mm->o;
	int64_t xr = o->transpose_lhs ? mm->bk : mm->bm;
	int64_t xc = o->transpose_lhs ? mm->bm : mm->bk;
	int64_t yr = o->transpose_rhs ? mm->bn : mm->bk;
	int64_t yc = o->transpose_rhs ? mm->bk : mm->bn;
	const char *xmap = o->transpose_lhs ? "i, j, k -> k, i" : "i, j, k -> i, k";
	const char *ymap = o->transpose_rhs ? "i, j, k -> j, k" : "i, j, k -> k, j";
	int ret;

	ret = add_input(mm, "x", mm->x, 2, xr, xc, xmap);
	if (!ret)
		ret = add_input(mm, "y", mm->y, 2, yr, yc, ymap);
	mm->lhs = mm->xg ? "x_fused" : "x";
	mm->rhs = mm->yg ? "y_fused" : "y";
	if (!ret && mm->xg)
		ret = add_grad(mm, mm->xg, "x", xr, xc, xmap);
	if (!ret && mm->yg)
		ret = add_grad(mm, mm->yg, "y", yr, yc, ymap);
	if (!ret && o->x_fusion.enabled) {
		ret = add_fusion(mm, &o->x_fusion, "x", "x_fused", "x_columns", xr, xc,
				 o->transpose_lhs ? "i, j, k -> i" : "i, j, k -> k");
		mm->lhs = "x_fused";
	}
	if (!ret && o->y_fusion.enabled) {
		ret = add_fusion(mm, &o->y_fusion, "y", "y_fused", "y_columns", yr, yc,
				 o->transpose_rhs ? "i, j, k -> k" : "i, j, k -> j");
		mm->rhs = "y_fused";
	}
	if (!ret && o->bias)
		ret = add_input(mm, "bias", o->bias, 1, mm->bn, 0, "i, j, k -> j");
	if (!ret) {
		struct tpurt_block_spec z = { 2, { mm->bm, mm->bn }, "i, j, k -> i, j" };

		ret = tpurt_grid_spec_add_output(mm->gs, "out", &z);
		mm->args[mm->nargs++] = mm->out;
	}
	return ret;
}

/* At the last k step: out = act(acc * scale + bias). */
static int add_epilogue(struct mm *mm, enum tpurt_dtype acc_dtype)
{
	const struct tpurt_matmul_opts *o = mm->o;
	struct tpurt_kernel *k = mm->kern;
	const char *src = "acc";
	int ret = tpurt_kernel_when(k, LAST_K);

	/* An int32 accumulator cannot hold a scaled or biased value. */
	if (!ret && (o->out_scale || o->bias) && acc_dtype == TPURT_INT32) {
		int64_t shape[2] = { mm->bm, mm->bn };

		ret = tpurt_grid_spec_add_scratch(mm->gs, "acc_f32", TPURT_VMEM,
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
	if (!ret)
		ret = tpurt_kernel_unary(k, (enum tpurt_unary)o->activation, "out", src);
	return ret ? ret : tpurt_kernel_end_when(k);
}

static int build_kernel(struct mm *mm)
{
	const struct tpurt_matmul_opts *o = mm->o;
	enum tpurt_dtype acc = is_8bit(mm->dot_dtype) ? TPURT_INT32 : TPURT_F32;
	int64_t acc_shape[2] = { mm->bm, mm->bn };
	unsigned int flags = TPURT_DOT_ACCUMULATE |
			     (o->transpose_lhs ? TPURT_DOT_TRANSPOSE_LHS : 0) |
			     (o->transpose_rhs ? TPURT_DOT_TRANSPOSE_RHS : 0);
	int ret;

	if ((unsigned int)o->activation > TPURT_ACT_TANH)
		return tpurt_fail(-EINVAL, "matmul: unknown activation %d",
				  (int)o->activation);
	ret = tpurt_grid_spec_add_scratch(mm->gs, "acc", TPURT_VMEM, acc, 2, acc_shape);
	if (!ret)
		ret = tpurt_kernel_when(mm->kern, "k == 0");
	if (!ret)
		ret = tpurt_kernel_zero(mm->kern, "acc");
	if (!ret)
		ret = tpurt_kernel_end_when(mm->kern);
	if (!ret)
		ret = add_operands(mm);	/* fusion ops run before the dot */
	if (!ret)
		ret = tpurt_kernel_dot(mm->kern, "acc", mm->lhs, mm->rhs, flags);
	return ret ? ret : add_epilogue(mm, acc);
}

/*
 * Transpose views become their base arrays read through the transposed
 * paths: the kernel sees physical layouts only, as pallas_call does.
 */
static int resolve_views(struct mm *mm, struct tpurt_matmul_opts *o)
{
	int tx, ty;

	if (mm->out->transposed)
		return tpurt_fail(-EINVAL, "matmul: out is a transpose view; outputs are written in their own layout only");
	mm->x = (struct tpurt_array *)tpurt_array_physical(mm->x, &tx);
	mm->y = (struct tpurt_array *)tpurt_array_physical(mm->y, &ty);
	o->transpose_lhs = !!o->transpose_lhs ^ tx;
	o->transpose_rhs = !!o->transpose_rhs ^ ty;
	mm->o = o;
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
	struct mm mm = { .x = x, .y = y, .out = out, .xg = xg, .yg = yg };
	struct tpurt_compiler_params params = {
		.dimension_semantics = "parallel, parallel, arbitrary",
	};
	int64_t grid[3];
	int ret;

	if (opts)
		o = *opts;
	params.vmem_limit_bytes = o.vmem_limit_bytes;
	params.flags = o.flags;
	ret = resolve_views(&mm, &o);
	if (!ret)
		ret = check_shapes(&mm);
	if (!ret)
		ret = dot_dtypes(&mm);
	if (!ret)
		ret = choose_blocks(&mm);
	if (ret)
		return ret;
	grid[0] = (int64_t)((mm.m + mm.bm - 1) / mm.bm);
	grid[1] = (int64_t)((mm.n + mm.bn - 1) / mm.bn);
	grid[2] = (int64_t)((mm.k + mm.bk - 1) / mm.bk);
	ret = tpurt_grid_spec_create(3, grid, &mm.gs);
	if (!ret)
		ret = tpurt_kernel_create(&mm.kern);
	if (!ret)
		ret = tpurt_grid_spec_set_index_names(mm.gs, "i, j, k");
	if (!ret)
		ret = build_kernel(&mm);
	if (!ret)
		ret = tpurt_pallas_call(mm.kern, mm.gs, &params, mm.args, mm.nargs,
					stats);
	tpurt_kernel_free(mm.kern);
	tpurt_grid_spec_free(mm.gs);
	return ret;
}

int tpurt_matmul(struct tpurt_array *x, struct tpurt_array *y,
		 struct tpurt_array *out, const struct tpurt_matmul_opts *opts,
		 struct tpurt_job_stats *stats)
{
	return tpurt_matmul_fused(x, y, out, opts, NULL, NULL, stats);
}
