/* SPDX-License-Identifier: MIT */
/* The per-core PRNG of pltpu.prng_seed / prng_random_bits (tpu_prng.c). */
#ifndef TPU_PRNG_H
#define TPU_PRNG_H

#include <stdint.h>

#include "tpu_ref2d.h"

struct tpu_prng {
	uint32_t key[2];	/* the seeds, folded */
	uint64_t draw;		/* prng_random_bits calls since the seed */
};

/* Philox-4x32-10 of @ctr under @key, in place. */
void tpu_philox4x32(const uint32_t key[2], uint32_t ctr[4]);
/* Key @p from @n seeds (each taken as int32), the draw counter at zero. */
void tpu_prng_seed(struct tpu_prng *p, const int64_t *seeds, unsigned int n);
/* Fill the int32 @dst with bits (row-major element e, the draw), then count the draw. */
void tpu_prng_bits(struct tpu_prng *p, const struct tpu_ref2d *dst);

#endif /* TPU_PRNG_H */
