// SPDX-License-Identifier: MIT
/*
 * TPU_OP_PRNG_SEED and TPU_OP_PRNG_BITS: pltpu.prng_seed and
 * pltpu.prng_random_bits as a counter-based generator, Philox-4x32-10
 * (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"). The bits
 * are deterministic for the same seeds and draws, and are not a TPU's:
 * its hardware generator is not documented.
 */
#include <stdint.h>

#include "tpu_elem.h"
#include "tpu_prng.h"

static void philox_round(uint32_t c[4], const uint32_t k[2])
{
	uint64_t p0 = (uint64_t)0xD2511F53u * c[0];
	uint64_t p1 = (uint64_t)0xCD9E8D57u * c[2];
	uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k[0];
	uint32_t n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k[1];

	c[0] = n0;
	c[1] = (uint32_t)p1;
	c[2] = n2;
	c[3] = (uint32_t)p0;
}

void tpu_philox4x32(const uint32_t key[2], uint32_t ctr[4])
{
	uint32_t k[2] = { key[0], key[1] };

	for (int r = 0; r < 10; r++) {
		philox_round(ctr, k);
		k[0] += 0x9E3779B9u;
		k[1] += 0xBB67AE85u;
	}
}

void tpu_prng_seed(struct tpu_prng *p, const int64_t *seeds, unsigned int n)
{
	uint32_t key[2] = { 0x243F6A88u, 0x85A308D3u };	/* pi's digits */

	/* each seed, with its position and the count, through the cipher */
	for (unsigned int i = 0; i < n; i++) {
		uint32_t c[4] = { (uint32_t)seeds[i], i, n, 0x5EEDu };

		tpu_philox4x32(key, c);
		key[0] = c[0];
		key[1] = c[1];
	}
	p->key[0] = key[0];
	p->key[1] = key[1];
	p->draw = 0;
}

void tpu_prng_bits(struct tpu_prng *p, const struct tpu_ref2d *dst)
{
	uint64_t e = 0;
	uint32_t c[4] = { 0 };

	for (int64_t r = 0; r < dst->rows; r++) {
		int32_t *row = tpu_elem_row(dst, r);

		for (int64_t col = 0; col < dst->cols; col++, e++) {
			if (!(e & 3)) {
				c[0] = (uint32_t)(e >> 2);
				c[1] = (uint32_t)(e >> 34);
				c[2] = (uint32_t)p->draw;
				c[3] = (uint32_t)(p->draw >> 32);
				tpu_philox4x32(p->key, c);
			}
			row[col] = (int32_t)c[e & 3];
		}
	}
	p->draw++;
}
