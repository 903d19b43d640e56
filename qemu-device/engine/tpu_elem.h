/* SPDX-License-Identifier: MIT */
/*
 * Rows of elements to and from the two forms the reference path computes
 * in: doubles (which hold every element type exactly) and 64-bit integers
 * (exact integer arithmetic), and the one rounding into a destination's
 * type (uapi/tpu_job.h, above enum tpu_opcode).
 *
 * A double handed to a store is either exact or rounded to odd (its last
 * bit set when inexact, tpu_elem_sticky()): rounding that value to at most
 * 51 bits gives what rounding the exact result would, so each arithmetic
 * op rounds once into its dst whatever its type.
 */
#ifndef TPU_ELEM_H
#define TPU_ELEM_H

#include <stdbool.h>
#include <stdint.h>

#include "tpu_ref2d.h"

enum tpu_round {
	TPU_ROUND_NEAREST,	/* to nearest even: results of arithmetic */
	TPU_ROUND_TRUNC,	/* toward zero: astype casts to integers */
};

void *tpu_elem_row(const struct tpu_ref2d *r, int64_t row);

/* @n elements of row @row (bool as 0 or 1). */
void tpu_elem_load(const struct tpu_ref2d *r, int64_t row, double *out,
		   int64_t n);
void tpu_elem_load_i64(const struct tpu_ref2d *r, int64_t row, int64_t *out,
		       int64_t n);

/*
 * Store @n values into row @row: f32 and bf16 to nearest even; integers
 * by @mode, saturating, NaN to 0; bool: non-zero (NaN too) is 1.
 */
void tpu_elem_store(const struct tpu_ref2d *r, int64_t row, const double *in,
		    int64_t n, enum tpu_round mode);
/*
 * The same from exact integers: floats round to nearest even; integers
 * keep the low bits of dst's width, two's complement, as XLA's integer
 * arithmetic and convert do (int32 2^31 is -2^31, int8 300 is 44); bool:
 * non-zero is 1.
 */
void tpu_elem_store_i64(const struct tpu_ref2d *r, int64_t row,
			const int64_t *in, int64_t n);

/* @s = RN(x) with x - s = @err: x rounded to odd instead. */
static inline double tpu_elem_sticky(double s, double err)
{
	union { double d; uint64_t u; } v = { s };

	if (s == 0 || err == 0 || err != err || !(s - s == 0) || (v.u & 1))
		return s;
	v.u += (s > 0) == (err > 0) ? 1 : -1;	/* one ulp toward x */
	return v.d;
}

/* An int64 as a double rounded to odd (exact below 2^53). */
double tpu_elem_from_i64(int64_t v);

/* A double rounded once to bf16 (to nearest even; NaN stays quiet NaN). */
uint16_t tpu_elem_bf16(double d);

/* 64-bit arithmetic modulo 2^64: its low bits are those of any narrower width. */
static inline int64_t tpu_elem_wrap_add(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

static inline int64_t tpu_elem_wrap_sub(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

static inline int64_t tpu_elem_wrap_mul(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a * (uint64_t)b);
}

#endif /* TPU_ELEM_H */
