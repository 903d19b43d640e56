/* SPDX-License-Identifier: MIT */
/*
 * Kernels of the Pallas TPU memory model, written as Pallas statements:
 * operands left in HBM (pl.ANY) and moved by the kernel's own async copies
 * and DMA semaphores, scalar state in SMEM, input_output_aliases. The
 * samples manual_pipeline, sparse_dsd and paged_attention, the selftest
 * tpu_memory_test and bench_paged share them, so each runs the same
 * kernel; the references beside them are plain C in double.
 */
#ifndef SAMPLE_MEMORY_KERNELS_H
#define SAMPLE_MEMORY_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpurt.h"

/* --- manual_pipeline: o = x + y, double-buffered HBM -> VMEM by hand --- */

/*
 * x and y (rows, cols) of @dtype stay in HBM; grid (rows / bm,), one step a
 * block of bm rows (rows a multiple of bm); o is blocked (bm, cols). Scratch
 * x_buf, y_buf (2, bm, cols) and two DMA semaphores, one a slot.
 */
struct mp_shape {
	enum tpurt_dtype dtype;
	int64_t rows, cols, bm;
};

/* Break the kernel on purpose (tpu_memory_test). */
#define MP_NO_PROLOGUE		(1u << 0)	/* step 0 starts no copy: its wait has nothing in flight */
#define MP_READ_BEFORE_WAIT	(1u << 1)	/* add before the wait: a hazard in debug mode */

struct tpurt_grid_spec *mp_spec(const struct mp_shape *s);
int mp_kernel(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
	      const struct mp_shape *s, unsigned int flags);
/* The steps are in order: "arbitrary" (the next step's copy starts in this one). */
struct tpurt_compiler_params mp_params(unsigned int flags);
/*
 * Run the kernel (@kflags MP_*, compiler @flags) on random x and y; *@correct
 * says whether o matches x + y in double (printing the worst error).
 * Returns pallas_call's result (0: the job ran; else tpurt_last_error()).
 */
int mp_run(struct tpurt_device *dev, const struct mp_shape *s,
	   unsigned int kflags, unsigned int flags, struct tpurt_job_stats *st,
	   bool *correct);

/* --- sparse_dsd: dense = block-sparse X @ dense Y (the sparse doc's kernel) --- */

/*
 * X (m, k) in blocks (bm, bk), of which nblocks are non-zero, stored
 * grouped by block row as X_blocks (nblocks, bm, bk) with their block
 * coordinates indices_i, indices_k (scalar prefetch); Y (k, n) dense;
 * a zeros (m, n) input aliased to the output, so output blocks no X block
 * reaches stay zero. Grid (n / bn, nblocks); f32 accumulator (bm, bn).
 */
struct dsd_shape {
	enum tpurt_dtype dtype;		/* of X, Y and the output */
	int64_t m, k, n, bm, bk, bn;
};

struct tpurt_grid_spec *dsd_spec(const struct dsd_shape *s, int64_t nblocks);
int dsd_kernel(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
	       int64_t nblocks);
/* input_output_aliases={4: 0}: the zeros array (arg 4) is the output. */
struct tpurt_compiler_params dsd_params(unsigned int flags);
/*
 * Run the kernel (compiler @flags) with X's non-zero blocks where the
 * (m / bm, k / bk) block mask @mask, row-major '0'/'1' characters, has a
 * '1' (at least one), random values; *@correct says whether the output
 * matches X @ Y in double and is exactly zero in block rows without blocks.
 * Returns pallas_call's result, or -1 for a bad mask or no memory.
 */
int dsd_run(struct tpurt_device *dev, const struct dsd_shape *s,
	    const char *mask, unsigned int flags, struct tpurt_job_stats *st,
	    bool *correct);

/* --- paged_attention: one query a sequence over a paged KV cache --- */

/*
 * q (batch, heads, head_dim); k_pages, v_pages (kv_heads, total_pages,
 * page_size, head_dim) in HBM; lengths (batch) and page_indices (batch *
 * pages_per_seq) in scalar prefetch. Grid (batch, kv_heads, pages_per_seq
 * / pages_per_block); a step attends a block of pages_per_block pages, at
 * most 15 (a copy a page of k and of v, each a window of the HBM array and
 * of the buffer: 4 windows a page and 2 more, of a job's 64).
 */
struct paged_shape {
	enum tpurt_dtype dtype;		/* of q and the pages */
	int64_t batch, heads, kv_heads, head_dim;
	int64_t page_size, total_pages, pages_per_seq, pages_per_block;
};

/* heads / kv_heads query heads share a kv head; o is f32 unless that is a multiple of 8. */
enum tpurt_dtype paged_out_dtype(const struct paged_shape *s);
/* q's (and o's) shape as the kernel takes it: rank 3, or 4 with a unit dimension. */
int paged_q_shape(const struct paged_shape *s, int64_t *shape);
struct tpurt_grid_spec *paged_spec(const struct paged_shape *s);
int paged_kernel(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		 const struct paged_shape *s);
struct tpurt_compiler_params paged_params(unsigned int flags);
/*
 * The arrays of a call, in Pallas's order: lengths, page_indices,
 * buffer_index and step (both zeros), q, k_pages, v_pages, o, m, l; the
 * last three are created. @q, @k and @v hold q and the pages as floats
 * (rounded to @s->dtype). 0, or -1 with the arrays freed.
 */
int paged_arrays(struct tpurt_device *dev, const struct paged_shape *s,
		 const int32_t *lengths, const int32_t *page_indices,
		 const float *q, const float *k, const float *v,
		 struct tpurt_array *args[10]);
void paged_arrays_free(struct tpurt_array *args[10]);
/* @s->batch * @s->pages_per_seq distinct pages, scattered over the cache (malloc'd). */
int32_t *paged_page_table(const struct paged_shape *s, uint32_t seed);
/*
 * softmax(q k^T) v over each sequence's first lengths[b] tokens, gathered
 * from the pages, in double, into @out (batch * heads * head_dim); zero for
 * a sequence of length 0. No 1/sqrt(d) scale: as in the Pallas kernel, q
 * comes scaled.
 */
void paged_reference(const struct paged_shape *s, const int32_t *lengths,
		     const int32_t *page_indices, const float *q,
		     const float *k, const float *v, double *out);
/*
 * Run the kernel (compiler @flags) on random q, k, v and a scattered page
 * table with @lengths; *@correct says whether o matches paged_reference().
 * Returns pallas_call's result (0: the job ran), or -1 for no memory.
 */
int paged_run(struct tpurt_device *dev, const struct paged_shape *s,
	      const int32_t *lengths, unsigned int flags,
	      struct tpurt_job_stats *st, bool *correct);
/* 4 * heads * head_dim per token attended. */
double paged_flops(const struct paged_shape *s, const int32_t *lengths);

#endif /* SAMPLE_MEMORY_KERNELS_H */
