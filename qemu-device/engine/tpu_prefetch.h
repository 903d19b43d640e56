/* SPDX-License-Identifier: MIT */
/*
 * The next grid step's input blocks, asked of the host's caches while this
 * step computes: what Pallas's pipeline does with its second buffer (the
 * DMA of step s + 1 overlaps step s), done here with prefetch instructions.
 *
 * Blocks read in place in HBM have rows a whole array's row apart, each in
 * its own page, where the hardware prefetchers do not look ahead: at 128^3
 * f32 the GEMM waited on them for a quarter of each step. The pipeline
 * queues the next step's rows; long kernels take them a share at a time
 * (tpu_prefetch_take) and issue them between their own loads, so the
 * requests overlap arithmetic instead of queueing up behind each other.
 * Only hints: the results never depend on them. One queue per thread: a
 * core runs on one worker thread.
 */
#ifndef TPU_PREFETCH_H
#define TPU_PREFETCH_H

#include <stdint.h>

/* Forget what is queued (a new step). */
void tpu_prefetch_clear(void);

/* Queue @rows rows of @row_bytes bytes, @stride bytes apart, from @p. */
void tpu_prefetch_rows(const void *p, uint64_t rows, uint64_t row_bytes,
		       uint64_t stride);

/*
 * Up to @max of the lines still queued, 1/@parts of them (all if @parts
 * <= 1), as addresses into @lines; returns how many. A kernel with @parts
 * pieces of work left takes its share per piece and issues it spread over
 * the piece's arithmetic: a burst of misses fills the core's line-fill
 * buffers and stalls the kernel's own loads behind them.
 */
unsigned int tpu_prefetch_take(const char **lines, unsigned int max,
			       uint64_t parts);

#endif /* TPU_PREFETCH_H */
