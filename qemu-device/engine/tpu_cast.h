/* SPDX-License-Identifier: MIT */
/*
 * Fast row conversions for the common casts and copies of a kernel body
 * (the accumulator stored into the output block: f32 -> f32, f32 -> bf16,
 * int32 -> int32, uint32 -> uint32). Each gives exactly the bits the elementwise path (a row
 * of doubles, then one rounding into the destination) gives, NaNs included:
 * a signalling NaN comes out quiet, as it does through a double.
 */
#ifndef TPU_CAST_H
#define TPU_CAST_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Convert @n elements of dtype @st at @src into dtype @dt at @dst (they
 * may not overlap unless equal). False, doing nothing, when the pair has
 * no fast path.
 */
bool tpu_cast_row(void *dst, uint8_t dt, const void *src, uint8_t st,
		  int64_t n);

/* Round an f32 (as bits) to bf16: nearest, ties to even; NaN stays NaN. */
static inline uint16_t tpu_bf16_round(uint32_t b)
{
	if ((b & 0x7fffffff) > 0x7f800000)	/* NaN: keep it quiet and a NaN */
		return (uint16_t)((b >> 16) | 0x40);
	b += 0x7fff + ((b >> 16) & 1);		/* to nearest, ties to even */
	return (uint16_t)(b >> 16);
}

#endif /* TPU_CAST_H */
