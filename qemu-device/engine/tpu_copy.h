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

#include "tpu_hw.h"

/*
 * Access to guest memory, supplied by the caller (QEMU's PCI DMA in the
 * device, a plain array in host tests).
 */
struct tpu_guest_mem {
	void *opaque;
	/*
	 * Map up to *len bytes at @addr for direct access; on return *len is
	 * the length mapped (it may be shorter). NULL if @addr is not RAM the
	 * device may access.
	 */
	void *(*map)(void *opaque, uint64_t addr, uint64_t *len, bool write);
	void (*unmap)(void *opaque, void *ptr, uint64_t len, bool write);
};

/* Copy whole ranges of guest memory; 0 or -1 when a range cannot be mapped. */
int tpu_guest_read(const struct tpu_guest_mem *gm, uint64_t addr, void *buf,
		   uint64_t len);
int tpu_guest_write(const struct tpu_guest_mem *gm, uint64_t addr,
		    const void *buf, uint64_t len);

struct tpu_copy_result {
	uint32_t status;	/* TPU_STATUS_* */
	uint32_t detail;
	uint64_t bytes;		/* moved before completion or failure */
};

/*
 * Execute @d. Nothing outside the HBM range and the SG entries it names is
 * ever written. A malformed descriptor or SG list is refused before anything
 * is written; a data range that turns out not to be RAM stops the copy
 * there (TPU_STATUS_DMA_FAULT, res->bytes tells how far it got). @abort is
 * polled between chunks: once set, the copy stops with TPU_STATUS_ABORTED.
 */
void tpu_copy_run(const struct tpu_dma_desc *d, uint8_t *hbm,
		  uint64_t hbm_size, const struct tpu_guest_mem *gm,
		  const atomic_bool *abort, struct tpu_copy_result *res);

#endif /* TPU_COPY_H */
