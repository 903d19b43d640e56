// SPDX-License-Identifier: MIT
#include <string.h>

#include "tpu_dtype.h"
#include "tpu_poison.h"

#define POISON_F32	0x7fc0dead	/* a quiet NaN, recognisable in a dump */
#define POISON_BF16	0x7fc1
#define POISON_BYTE	0xaa

void tpu_poison_fill(void *p, uint8_t dtype, uint64_t elems)
{
	if (dtype == TPU_DTYPE_F32) {
		uint32_t *w = p;

		for (uint64_t i = 0; i < elems; i++)
			w[i] = POISON_F32;
	} else if (dtype == TPU_DTYPE_BF16) {
		uint16_t *h = p;

		for (uint64_t i = 0; i < elems; i++)
			h[i] = POISON_BF16;
	} else {
		memset(p, POISON_BYTE, elems * tpu_dtype_size(dtype));
	}
}
