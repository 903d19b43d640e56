/* SPDX-License-Identifier: MIT */
/*
 * The published v5e matmul table (tools/v5e-published.tsv) and the dtype
 * names the model's tools accept.
 */
#ifndef TPU_PUBLISHED_H
#define TPU_PUBLISHED_H

#include <stddef.h>
#include <stdint.h>

#include "tpu_job.h"

#define PUBLISHED_MAX_ROWS	64

struct published_row {
	char kernel[16];	/* "pallas" or "xla" */
	uint64_t bm, bk, bn;	/* 0: the compiler chose */
	uint64_t m, k, n;
	enum tpu_dtype dtype;
	double time_s;
	double util_pct;
};

/* f32, bf16, int8, uint8, int32 -> 0 and *@out, or -1. */
int published_dtype(const char *name, enum tpu_dtype *out);
const char *published_dtype_name(enum tpu_dtype dtype);

/*
 * Read up to @max rows from @path ('#' lines are comments). Returns the
 * number of rows, or -1 with a message in @err.
 */
int published_load(const char *path, struct published_row *rows, int max,
		   char *err, size_t errlen);

#endif /* TPU_PUBLISHED_H */
