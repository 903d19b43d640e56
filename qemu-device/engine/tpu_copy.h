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
 * A way to make a range of HBM read as zeros without writing it: QEMU's
 * ram_block_discard_range(), madvise(MADV_DONTNEED) of private anonymous
 * memory. Zero fills (how the driver clears every new buffer) hand it their
 * whole 2 MiB huge pages, so clearing costs neither the time nor the host
 * memory of touching pages the buffer may never use: the first touch of a
 * fresh page is the slow part (3.7 s a GiB on a nested VM, against 0.04 s
 * to rewrite resident memory). @zero returns 0 when the range now reads as
 * zeros; on any other value the fill writes the zeros itself.
 */
struct tpu_hbm_discard {
	int (*zero)(void *opaque, uint64_t hbm_offset, uint64_t len);
	void *opaque;
};

#define TPU_HBM_DISCARD_ALIGN	(2ull << 20)

/*
 * Execute @d. Nothing outside the HBM range and the SG entries it names is
 * ever written. A malformed descriptor or SG list is refused before anything
 * is written; a data range that turns out not to be RAM stops the copy
 * there (TPU_STATUS_DMA_FAULT, res->bytes tells how far it got). @abort is
 * polled between chunks: once set, the copy stops with TPU_STATUS_ABORTED.
 * @discard (may be NULL) clears the aligned middle of zero fills.
 */
void tpu_copy_run(const struct tpu_dma_desc *d, uint8_t *hbm,
		  uint64_t hbm_size, const struct tpu_guest_mem *gm,
		  const struct tpu_hbm_discard *discard,
		  const atomic_bool *abort, struct tpu_desc_result *res);

#endif /* TPU_COPY_H */
