/* SPDX-License-Identifier: MIT */
/*
 * Inside the vector kernels: what each instruction set provides
 * (tpu_vec_scalar.c, tpu_vec_avx2.c, tpu_vec_avx512.c, all three from the
 * one body in tpu_vec_impl.h). Not part of the engine's interface.
 */
#ifndef TPU_VEC_INT_H
#define TPU_VEC_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "tpu_job.h"

/* Row sums keep this many double partial sums: lane i takes element i mod 16. */
#define TPU_VEC_SUM_LANES	16

typedef void (*tpu_vec_unary_fn)(float *dst, const float *src, int64_t n,
				 float lo, float hi);
typedef void (*tpu_vec_binary_fn)(float *dst, const float *a, const float *b,
				  int64_t b_step, int64_t n);
typedef void (*tpu_vec_cols_fn)(double *acc, const float *row, int64_t n);
typedef void (*tpu_vec_select_fn)(float *dst, const void *mask,
				  const float *a, int64_t a_step,
				  const float *b, int64_t b_step, int64_t n);

struct tpu_vec_kernels {
	tpu_vec_unary_fn unary[TPU_UNARY_COUNT];
	tpu_vec_binary_fn binary[TPU_BINARY_COUNT];	/* NULL from BITAND on */
	/* the partial sums of a row, lane by lane, before the fixed tree */
	void (*sum_lanes)(double lanes[TPU_VEC_SUM_LANES], const float *src,
			  int64_t n);
	/* max or min of a row (+0 above -0); NaN if it holds one */
	float (*max_row)(const float *src, int64_t n);
	float (*min_row)(const float *src, int64_t n);
	tpu_vec_cols_fn cols[TPU_REDUCE_COUNT];	/* NULL for ARGMAX, ARGMIN */
	tpu_vec_select_fn select_bytes;	/* one byte per mask element */
	tpu_vec_select_fn select_f32;	/* f32 mask */
	void (*bf16_to_f32)(float *dst, const uint16_t *src, int64_t n);
};

extern const struct tpu_vec_kernels tpu_vec_scalar_kernels;
extern const struct tpu_vec_kernels tpu_vec_avx2_kernels;
extern const struct tpu_vec_kernels tpu_vec_avx512_kernels;

#endif /* TPU_VEC_INT_H */
