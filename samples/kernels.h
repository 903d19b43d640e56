/* SPDX-License-Identifier: MIT */
/*
 * Kernels beyond matmul, written as Pallas statements: a row softmax and
 * flash attention's forward pass, with their grid specs and
 * double-precision references. The samples, tpu_attention_test and
 * bench_attention share them, so each runs the same kernel.
 */
#ifndef SAMPLE_KERNELS_H
#define SAMPLE_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpurt.h"

/*
 * Row softmax of an (rows, cols) array of @dtype into one of the same
 * dtype, over blocks of @br rows: grid (cdiv(rows, br),), refs x_ref and
 * o_ref.
 */
struct tpurt_grid_spec *softmax_spec(enum tpurt_dtype dtype, int64_t rows,
				     int64_t cols, int64_t br);
int softmax_kernel(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs);
/* softmax(@x) of each row, in double, into @out (rows * cols). */
void softmax_reference(const float *x, int64_t rows, int64_t cols,
		       double *out);

/*
 * Flash attention forward over bf16 q, k, v and o of shape (bh, seq, d)
 * (batch * heads first), blocks of bq query and bk key rows: grid
 * (bh, cdiv(seq, bq), cdiv(seq, bk)), the last dimension "arbitrary";
 * f32 scratch m, l (bq, 1) and acc (bq, d).
 */
struct attn_shape {
	int64_t bh, seq, d;
	int64_t bq, bk;
	bool causal;
};

/* Break the kernel on purpose: leave m or l uninitialised (debug tests). */
#define ATTN_SKIP_INIT_M	(1u << 0)
#define ATTN_SKIP_INIT_L	(1u << 1)

struct tpurt_grid_spec *attn_spec(const struct attn_shape *s);
int attn_kernel(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		const struct attn_shape *s, unsigned int flags);
/* (bh parallel, q blocks parallel, k blocks arbitrary); @flags TPURT_DEBUG. */
struct tpurt_compiler_params attn_params(unsigned int flags);
/*
 * softmax(q k^T / sqrt(d), causally masked) v in double, for the rows r of
 * every head with r % @row_step == 0, into @out (bh * seq * d; other rows
 * are left alone).
 */
void attn_reference(const float *q, const float *k, const float *v,
		    const struct attn_shape *s, int64_t row_step, double *out);
/* 4 * bh * d * (query, key) pairs attended: seq^2, or seq (seq + 1) / 2. */
double attn_flops(const struct attn_shape *s);

/*
 * A kernel's text, built a line at a time (kernel bodies are straight-line
 * code, so static loops are unrolled into lines) and lowered by
 * tpurt_kernel_stmts().
 */
struct kernel_text {
	char buf[1 << 16];
	size_t len;
	bool overflow;		/* a line did not fit: the text is cut short */
};

/* A new empty text (malloc'd; NULL when out of memory). */
struct kernel_text *kernel_text_new(void);
/* Append @indent and the formatted line to @t; -1 (remembered) if it does not fit. */
int kernel_line(struct kernel_text *t, const char *indent, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* tpurt_kernel_stmts(@k, @gs, text) unless @t overflowed (@who says so); frees @t. */
int kernel_text_lower(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		      struct kernel_text *t, const char *who);

/* @v rounded to bf16 and back, so host and device see the same values. */
void round_to_bf16(float *v, size_t n);
/* @n values uniform in [-@scale, @scale), rounded to @dtype's (malloc'd). */
float *random_values(size_t n, float scale, enum tpurt_dtype dtype,
		     uint32_t seed);

#endif /* SAMPLE_KERNELS_H */
