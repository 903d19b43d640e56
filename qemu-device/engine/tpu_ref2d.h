/* SPDX-License-Identifier: MIT */
/*
 * A 2-D view of a block in VMEM (or in HBM: in-bounds input blocks are read
 * in place), what the micro-ops and the GEMMs work on.
 */
#ifndef TPU_REF2D_H
#define TPU_REF2D_H

#include <stdint.h>

struct tpu_ref2d {
	void *p;
	int64_t rows, cols, ld;		/* ld: row stride in elements */
	uint8_t dtype;
};

#endif /* TPU_REF2D_H */
