/* SPDX-License-Identifier: MIT */
/*
 * Modeled time of a Pallas TPU blocked matmul, z = act(x @ y) or
 * act(x @ y.T), without running it: the grid (cdiv(m, bm), cdiv(n, bn),
 * cdiv(k, bk)) is walked in row-major order with the guide's BlockSpecs
 * (x block (i, k); y block (k, j), or (j, k) with transpose_rhs; z block
 * (i, j); an f32 (int32 for 8-bit inputs) (bm, bn) accumulator scratch;
 * dimension semantics (parallel, parallel, arbitrary)), and every step is
 * fed to the tpu_model_* step API, as the engine's pipeline does.
 */
#ifndef TPU_MODEL_MATMUL_H
#define TPU_MODEL_MATMUL_H

#include <stdbool.h>
#include <stdint.h>

#include "tpu_model.h"

struct tpu_matmul_desc {
	uint64_t m, k, n;
	uint64_t bm, bk, bn;
	enum tpu_dtype in_dtype;	/* x and y */
	enum tpu_dtype out_dtype;	/* z */
	bool transpose_rhs;		/* y stored (n, k) */
	bool activation;		/* fused at the last k step (free) */
	unsigned int cores;		/* 0: the config's */
	const struct tpu_trace_sink *trace;	/* NULL, or each core's timeline */
};

struct tpu_matmul_result {
	struct tpu_model_stats stats;	/* the job: slowest core + launch */
	uint64_t grid[3];		/* (i, j, k) extents */
	uint64_t blocks_fetched;	/* x and y blocks copied into VMEM */
	uint64_t blocks_skipped;	/* index unchanged from the previous step */
	uint64_t blocks_written;	/* z blocks written back */
	uint64_t vmem_bytes;		/* see tpu_model_matmul_vmem */
	unsigned int cores;		/* cores that ran steps */
};

/*
 * VMEM the kernel needs: x, y and z blocks, each double-buffered, plus the
 * accumulator scratch. A caller rejects a configuration whose need exceeds
 * its vmem_limit_bytes.
 */
uint64_t tpu_model_matmul_vmem(const struct tpu_matmul_desc *d);

/*
 * Model @d on @cfg. Returns 0, or -EINVAL for a zero dimension, a block
 * size of zero, more cores than the config has, or a dtype pair the MXU
 * has no routine for.
 */
int tpu_model_matmul(const struct tpu_config *cfg,
		     const struct tpu_matmul_desc *d,
		     struct tpu_matmul_result *res);

/*
 * Search block sizes for @d's shape: along each dimension the whole of it
 * and the multiples of the MXU size that are powers of two or divide it,
 * keeping configurations whose VMEM need fits @vmem_limit. Sets d->bm, bk,
 * bn to the fastest and fills @res. Returns 0, -EINVAL for a bad @d, or
 * -ENOSPC when nothing fits.
 */
int tpu_model_matmul_best(const struct tpu_config *cfg,
			  struct tpu_matmul_desc *d, uint64_t vmem_limit,
			  struct tpu_matmul_result *res);

#endif /* TPU_MODEL_MATMUL_H */
