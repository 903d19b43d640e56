/* SPDX-License-Identifier: MIT */
/*
 * Copies of large buffers with non-temporal stores: the destination is not
 * read first and does not evict the caches, which is how the host's own
 * memcpy moves big buffers. Call tpu_stream_fence() before anyone else may
 * look at the data.
 */
#ifndef TPU_STREAM_H
#define TPU_STREAM_H

#include <stddef.h>

/* Copies at or above this size are worth streaming (beyond the caches). */
#define TPU_STREAM_MIN	(8u << 20)

void tpu_stream_copy(void *dst, const void *src, size_t n);
void tpu_stream_fence(void);

#endif /* TPU_STREAM_H */
