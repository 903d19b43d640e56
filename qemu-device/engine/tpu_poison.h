/* SPDX-License-Identifier: MIT */
/*
 * Debug mode's poison: uninitialised VMEM and SMEM scratch, and output
 * blocks on their first visit, hold a pattern no kernel computes by
 * accident (a quiet NaN for floats), so that a kernel that forgets to zero
 * its accumulator fails visibly.
 */
#ifndef TPU_POISON_H
#define TPU_POISON_H

#include <stdint.h>

/* Fill @elems elements of dtype @dtype at @p with the poison pattern. */
void tpu_poison_fill(void *p, uint8_t dtype, uint64_t elems);

#endif /* TPU_POISON_H */
