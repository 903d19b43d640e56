/* SPDX-License-Identifier: MIT */
/*
 * DMA queue descriptors: check and execute one struct tpu_dma_desc against
 * the device's HBM and the guest's memory.
 */
#ifndef TPU_COPY_H
#define TPU_COPY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tpu_desc_result.h"
#include "tpu_guest_mem.h"
#include "tpu_hw.h"

/*
 * Execute @d. Nothing outside the HBM range and the SG entries it names is
 * ever written. A malformed descriptor or SG list is refused before anything
 * is written; a data range that turns out not to be RAM stops the copy
 * there (TPU_STATUS_DMA_FAULT, res->bytes tells how far it got). @abort is
 * polled between chunks: once set, the copy stops with TPU_STATUS_ABORTED.
 */
void tpu_copy_run(const struct tpu_dma_desc *d, uint8_t *hbm,
		  uint64_t hbm_size, const struct tpu_guest_mem *gm,
		  const atomic_bool *abort, struct tpu_desc_result *res);

#endif /* TPU_COPY_H */
