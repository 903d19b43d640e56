// SPDX-License-Identifier: MIT
/*
 * TPU_OP_REDUCE: sum, max or min, or the index of the max or min, over
 * the rows (axis 0) or columns (axis 1) of the in-bounds part of src0;
 * rows or columns wholly out of bounds give the identity (index 0). Float data accumulates in double and rounds
 * once into dst (f32 rows through the vector kernels, in their fixed
 * order; others in element order); integer data in 64-bit integers, a sum
 * modulo 2^64 stored as dst's low bits: it wraps around in dst's width,
 * as XLA's does. max and min
 * propagate NaN (the first one met).
 */
#include <math.h>

#include "tpu_dtype.h"
#include "tpu_elem.h"
#include "tpu_ops_int.h"
#include "tpu_vec.h"

static double identity_f(uint8_t fn)
{
	return fn == TPU_REDUCE_SUM ? 0 : fn == TPU_REDUCE_MAX ? -INFINITY :
	       INFINITY;
}

/* The integer type's minimum (max) or maximum (min). */
static int64_t identity_i(uint8_t fn, uint8_t dtype)
{
	static const int64_t lo[TPU_DTYPE_COUNT] = {
		[TPU_DTYPE_INT8] = -128, [TPU_DTYPE_INT32] = INT32_MIN,
	};
	static const int64_t hi[TPU_DTYPE_COUNT] = {
		[TPU_DTYPE_INT8] = 127, [TPU_DTYPE_UINT8] = 255,
		[TPU_DTYPE_INT32] = INT32_MAX, [TPU_DTYPE_BOOL] = 1,
		[TPU_DTYPE_UINT32] = UINT32_MAX,
	};

	return fn == TPU_REDUCE_SUM ? 0 : fn == TPU_REDUCE_MAX ? lo[dtype] :
	       hi[dtype];
}

static double combine_f(uint8_t fn, double acc, double x)
{
	if (fn == TPU_REDUCE_SUM)
		return acc + x;
	if (isnan(acc))
		return acc;
	if (isnan(x))
		return x;
	return fn == TPU_REDUCE_MAX ? (x > acc ? x : acc) : (x < acc ? x : acc);
}

static int64_t combine_i(uint8_t fn, int64_t acc, int64_t x)
{
	if (fn == TPU_REDUCE_SUM)
		return tpu_elem_wrap_add(acc, x);
	return fn == TPU_REDUCE_MAX ? (x > acc ? x : acc) : (x < acc ? x : acc);
}

/* f32 data: the vector kernels, in double, in their fixed order. */
static void reduce_f32(const struct tpu_plan_op *op,
		       const struct tpu_op_args *args)
{
	const struct tpu_ref2d *d = &args->dst;
	double *acc = args->row_tmp[0];
	int64_t vr = args->valid_rows, vc = args->valid_cols;

	if (op->axis == 1) {
		for (int64_t i = 0; i < d->rows; i++) {
			acc[0] = i < vr ? tpu_vec_reduce_row(op->fn,
					tpu_elem_row(&args->src0, i), vc) :
				 identity_f(op->fn);
			tpu_elem_store(d, i, acc, 1, TPU_ROUND_NEAREST);
		}
		return;
	}
	tpu_vec_reduce_init(op->fn, acc, d->cols);
	for (int64_t i = 0; i < vr; i++)
		tpu_vec_reduce_cols(op->fn, acc, tpu_elem_row(&args->src0, i), vc);
	tpu_elem_store(d, 0, acc, d->cols, TPU_ROUND_NEAREST);
}

/* One double-precision accumulator per dst element, then one store. */
static void reduce_f(const struct tpu_plan_op *op, const struct tpu_op_args *args)
{
	const struct tpu_ref2d *d = &args->dst;
	double *acc = args->row_tmp[0], *x = args->row_tmp[1];
	int64_t vr = args->valid_rows, vc = args->valid_cols;

	if (op->axis == 1) {
		for (int64_t i = 0; i < d->rows; i++) {
			acc[0] = identity_f(op->fn);
			if (i < vr) {
				tpu_elem_load(&args->src0, i, x, vc);
				for (int64_t j = 0; j < vc; j++)
					acc[0] = combine_f(op->fn, acc[0], x[j]);
			}
			tpu_elem_store(d, i, acc, 1, TPU_ROUND_NEAREST);
		}
		return;
	}
	for (int64_t j = 0; j < d->cols; j++)
		acc[j] = identity_f(op->fn);
	for (int64_t i = 0; i < vr; i++) {
		tpu_elem_load(&args->src0, i, x, vc);
		for (int64_t j = 0; j < vc; j++)
			acc[j] = combine_f(op->fn, acc[j], x[j]);
	}
	tpu_elem_store(d, 0, acc, d->cols, TPU_ROUND_NEAREST);
}

static void reduce_i(const struct tpu_plan_op *op, const struct tpu_op_args *args)
{
	const struct tpu_ref2d *d = &args->dst;
	int64_t *acc = (int64_t *)args->row_tmp[0], *x = (int64_t *)args->row_tmp[1];
	int64_t vr = args->valid_rows, vc = args->valid_cols;
	int64_t id = identity_i(op->fn, args->src0.dtype);

	if (op->axis == 1) {
		for (int64_t i = 0; i < d->rows; i++) {
			acc[0] = id;
			if (i < vr) {
				tpu_elem_load_i64(&args->src0, i, x, vc);
				for (int64_t j = 0; j < vc; j++)
					acc[0] = combine_i(op->fn, acc[0], x[j]);
			}
			tpu_elem_store_i64(d, i, acc, 1);
		}
		return;
	}
	for (int64_t j = 0; j < d->cols; j++)
		acc[j] = id;
	for (int64_t i = 0; i < vr; i++) {
		tpu_elem_load_i64(&args->src0, i, x, vc);
		for (int64_t j = 0; j < vc; j++)
			acc[j] = combine_i(op->fn, acc[j], x[j]);
	}
	tpu_elem_store_i64(d, 0, acc, d->cols);
}

/* Whether @x beats @best for argmax/argmin: NaN beats all, ties keep the first. */
static bool arg_better(uint8_t fn, double x, double best)
{
	if (isnan(best))
		return false;
	if (isnan(x))
		return true;
	return fn == TPU_REDUCE_ARGMAX ? x > best : x < best;
}

/* argmax/argmin of any dtype (int32 and narrower are exact in double). */
static void reduce_arg(const struct tpu_plan_op *op, const struct tpu_op_args *args)
{
	const struct tpu_ref2d *d = &args->dst;
	double *best = args->row_tmp[0], *x = args->row_tmp[1];
	int64_t *at = (int64_t *)args->row_tmp[2];
	int64_t vr = args->valid_rows, vc = args->valid_cols;

	if (op->axis == 1) {
		for (int64_t i = 0; i < d->rows; i++) {
			at[0] = 0;
			if (i < vr && vc > 0) {
				tpu_elem_load(&args->src0, i, x, vc);
				best[0] = x[0];
				for (int64_t j = 1; j < vc; j++)
					if (arg_better(op->fn, x[j], best[0]))
						best[0] = x[j], at[0] = j;
			}
			tpu_elem_store_i64(d, i, at, 1);
		}
		return;
	}
	for (int64_t j = 0; j < d->cols; j++)
		at[j] = 0;
	for (int64_t i = 0; i < vr; i++) {
		tpu_elem_load(&args->src0, i, x, vc);
		for (int64_t j = 0; j < vc; j++)
			if (!i || arg_better(op->fn, x[j], best[j]))
				best[j] = x[j], at[j] = i;
	}
	tpu_elem_store_i64(d, 0, at, d->cols);
}

void tpu_op_reduce(const struct tpu_plan_op *op, const struct tpu_op_args *args)
{
	if (op->fn >= TPU_REDUCE_ARGMAX)
		reduce_arg(op, args);
	else if (tpu_dtype_is_int(args->src0.dtype))
		reduce_i(op, args);
	else if (args->src0.dtype == TPU_DTYPE_F32)
		reduce_f32(op, args);
	else
		reduce_f(op, args);
}
