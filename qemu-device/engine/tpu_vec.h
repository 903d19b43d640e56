/* SPDX-License-Identifier: MIT */
/*
 * The vector unit's f32 row kernels: the elementwise functions, reductions
 * and select of the kernel body (uapi/tpu_job.h: enum tpu_unary,
 * tpu_binary, tpu_reduce) on rows of binary32, at close to memory speed.
 * The engine's ops call them as fast paths when their operands are f32.
 *
 * Each kernel runs on the best instruction set the host has (AVX-512,
 * AVX2 + FMA, or plain C), chosen once at first use; TPU_VEC_ISA=scalar,
 * avx2 or avx512 in the environment caps it, and tpu_vec_use_isa() forces
 * it (tests, benchmarks). Transcendentals are SLEEF's 1-ulp (u10)
 * functions of the same instruction set; doc/numerics.md gives every
 * function's accuracy bound and its IEEE behaviour. A row's tail shorter
 * than a vector is computed as one masked vector, so a result never
 * depends on where its element sits in the row.
 *
 * NaN results are quiet. dst may be one of the sources (in place), but
 * must not overlap them otherwise.
 */
#ifndef TPU_VEC_H
#define TPU_VEC_H

#include <stdbool.h>
#include <stdint.h>

/**
 * enum tpu_vec_isa - the instruction set the kernels run on
 * @TPU_VEC_SCALAR: plain C and SLEEF's scalar functions, any host
 * @TPU_VEC_AVX2: AVX2 and FMA, 8 lanes
 * @TPU_VEC_AVX512: AVX-512 F and DQ, 16 lanes
 * @TPU_VEC_ISA_COUNT: number of instruction sets
 */
enum tpu_vec_isa {
	TPU_VEC_SCALAR = 0,
	TPU_VEC_AVX2 = 1,
	TPU_VEC_AVX512 = 2,
	TPU_VEC_ISA_COUNT
};

/* The instruction set the kernels use now. */
enum tpu_vec_isa tpu_vec_isa(void);

/*
 * Use @isa, or the best the host has below it; returns the one chosen.
 * Not safe while kernels run on other threads: for tests and benchmarks.
 */
enum tpu_vec_isa tpu_vec_use_isa(enum tpu_vec_isa isa);

/* "scalar", "avx2" or "avx512" */
const char *tpu_vec_isa_name(enum tpu_vec_isa isa);

/*
 * dst[i] = fn(src[i]) for i < @n, @fn an &enum tpu_unary; @lo and @hi are
 * %TPU_UNARY_CLAMP's bounds (ignored by the others).
 */
void tpu_vec_unary(uint8_t fn, float *dst, const float *src, int64_t n,
		   float lo, float hi);

/*
 * dst[i] = fn(a[i], b[i * b_step]) for i < @n, @fn an &enum tpu_binary:
 * @b_step 1 reads a row, 0 broadcasts b[0] (a scalar, or a column's
 * element for this row). Compares and and/or give 0.0f or 1.0f; and/or
 * take non-zero (NaN included) as true.
 */
void tpu_vec_binary(uint8_t fn, float *dst, const float *a, const float *b,
		    int64_t b_step, int64_t n);

/*
 * @fn (an &enum tpu_reduce) of a row of @n elements, to be rounded once
 * into its destination. Sums accumulate in double in a fixed order, the
 * same on every instruction set, so the result is bit-identical from run
 * to run and host to host. The identity (0, -inf, +inf) for @n 0. NaN
 * propagates: the result is then the row's first NaN, made quiet.
 */
double tpu_vec_reduce_row(uint8_t fn, const float *src, int64_t n);

/* Fill an accumulator row for tpu_vec_reduce_cols() with fn's identity. */
void tpu_vec_reduce_init(uint8_t fn, double *acc, int64_t n);

/*
 * acc[j] = fn(acc[j], row[j]) for j < @n: one row of a reduction over the
 * rows (axis 0), in double, rows in the order given. A NaN in a column
 * stays the first one met there.
 */
void tpu_vec_reduce_cols(uint8_t fn, double *acc, const float *row,
			 int64_t n);

/*
 * dst[i] = mask[i] ? a[i * a_step] : b[i * b_step] (jnp.where), steps 0
 * (a scalar) or 1 (a row). The mask is a row of @mask_dtype: one byte per
 * element (%TPU_DTYPE_BOOL, INT8, UINT8) or f32, non-zero (NaN included)
 * is true. False, doing nothing, for other mask types.
 */
bool tpu_vec_select(float *dst, const void *mask, uint8_t mask_dtype,
		    const float *a, int64_t a_step, const float *b,
		    int64_t b_step, int64_t n);

/*
 * bf16 to f32 (exact: the bf16 is the high half). The other way, with
 * rounding to nearest even, is tpu_cast_row() (tpu_cast.h).
 */
void tpu_vec_bf16_to_f32(float *dst, const uint16_t *src, int64_t n);

#endif /* TPU_VEC_H */
