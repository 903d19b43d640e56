/* SPDX-License-Identifier: MIT */
/*
 * Debug mode's poison: uninitialised VMEM and SMEM scratch, output blocks
 * on their first visit and the padding of edge input blocks hold the
 * values Pallas's interpret mode gives uninitialised memory (NaN for f32
 * and bf16, INT32_MIN, -128, 0 for uint8, true for bool), so that a kernel
 * that forgets to zero its accumulator or reads padding fails visibly.
 */
#ifndef TPU_POISON_H
#define TPU_POISON_H

#include <stdint.h>

/* Fill @elems elements of dtype @dtype at @p with the poison pattern. */
void tpu_poison_fill(void *p, uint8_t dtype, uint64_t elems);

#endif /* TPU_POISON_H */
