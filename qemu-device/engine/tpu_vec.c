// SPDX-License-Identifier: MIT
/*
 * The vector unit's f32 row kernels (tpu_vec.h): the choice of instruction
 * set, and what is the same on all of them (the fixed tree that adds a
 * row's partial sums, the NaN a reduction returns).
 */
#include "tpu_vec.h"
#include "tpu_isa_env.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tpu_job.h"
#include "tpu_vec_int.h"

static const struct tpu_vec_kernels *const isa_kernels[TPU_VEC_ISA_COUNT] = {
	[TPU_VEC_SCALAR] = &tpu_vec_scalar_kernels,
	[TPU_VEC_AVX2] = &tpu_vec_avx2_kernels,
	[TPU_VEC_AVX512] = &tpu_vec_avx512_kernels,
};

static const char *const isa_names[TPU_VEC_ISA_COUNT] = {
	[TPU_VEC_SCALAR] = "scalar",
	[TPU_VEC_AVX2] = "avx2",
	[TPU_VEC_AVX512] = "avx512",
};

static enum tpu_vec_isa best_isa;	/* the host's, capped by TPU_VEC_ISA */
static enum tpu_vec_isa cur_isa;
static const struct tpu_vec_kernels *kernels;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static enum tpu_vec_isa host_isa(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512dq"))
		return TPU_VEC_AVX512;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return TPU_VEC_AVX2;
	return TPU_VEC_SCALAR;
}

static void probe(void)
{
	best_isa = tpu_isa_env_cap("TPU_VEC_ISA", isa_names, TPU_VEC_ISA_COUNT,
				   host_isa());
	cur_isa = best_isa;
	kernels = isa_kernels[cur_isa];
}

static const struct tpu_vec_kernels *k(void)
{
	pthread_once(&probe_once, probe);
	return kernels;
}

enum tpu_vec_isa tpu_vec_isa(void)
{
	k();
	return cur_isa;
}

enum tpu_vec_isa tpu_vec_use_isa(enum tpu_vec_isa isa)
{
	k();
	cur_isa = isa < best_isa ? isa : best_isa;
	kernels = isa_kernels[cur_isa];
	return cur_isa;
}

const char *tpu_vec_isa_name(enum tpu_vec_isa isa)
{
	return isa < TPU_VEC_ISA_COUNT ? isa_names[isa] : "?";
}

void tpu_vec_unary(uint8_t fn, float *dst, const float *src, int64_t n,
		   float lo, float hi)
{
	k()->unary[fn](dst, src, n, lo, hi);
}

void tpu_vec_binary(uint8_t fn, float *dst, const float *a, const float *b,
		    int64_t b_step, int64_t n)
{
	k()->binary[fn](dst, a, b, b_step, n);
}

/* Halve the partial sums, pairing lane l with lane l + half, down to one. */
static double sum_tree(double lanes[TPU_VEC_SUM_LANES])
{
	for (int half = TPU_VEC_SUM_LANES / 2; half > 0; half /= 2)
		for (int l = 0; l < half; l++)
			lanes[l] += lanes[l + half];
	return lanes[0];
}

/* A reduction that met a NaN gives the row's first one, made quiet. */
static double first_nan(const float *src, int64_t n, double r)
{
	for (int64_t i = 0; i < n; i++)
		if (isnan(src[i]))
			return src[i];	/* widening makes it quiet */
	return r;	/* made here: inf - inf */
}

double tpu_vec_reduce_row(uint8_t fn, const float *src, int64_t n)
{
	double lanes[TPU_VEC_SUM_LANES], r;

	if (fn == TPU_REDUCE_SUM) {
		k()->sum_lanes(lanes, src, n);
		r = sum_tree(lanes);
	} else if (fn == TPU_REDUCE_MAX) {
		r = k()->max_row(src, n);
	} else {
		r = k()->min_row(src, n);
	}
	return isnan(r) ? first_nan(src, n, r) : r;
}

void tpu_vec_reduce_init(uint8_t fn, double *acc, int64_t n)
{
	double id = fn == TPU_REDUCE_SUM ? 0.0 :
		    fn == TPU_REDUCE_MAX ? -INFINITY : INFINITY;

	for (int64_t j = 0; j < n; j++)
		acc[j] = id;
}

void tpu_vec_reduce_cols(uint8_t fn, double *acc, const float *row,
			 int64_t n)
{
	k()->cols[fn](acc, row, n);
}

bool tpu_vec_select(float *dst, const void *mask, uint8_t mask_dtype,
		    const float *a, int64_t a_step, const float *b,
		    int64_t b_step, int64_t n)
{
	switch (mask_dtype) {
	case TPU_DTYPE_BOOL:
	case TPU_DTYPE_INT8:
	case TPU_DTYPE_UINT8:
		k()->select_bytes(dst, mask, a, a_step, b, b_step, n);
		return true;
	case TPU_DTYPE_F32:
		k()->select_f32(dst, mask, a, a_step, b, b_step, n);
		return true;
	default:
		return false;
	}
}

void tpu_vec_bf16_to_f32(float *dst, const uint16_t *src, int64_t n)
{
	k()->bf16_to_f32(dst, src, n);
}
