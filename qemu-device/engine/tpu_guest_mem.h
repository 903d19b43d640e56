/* SPDX-License-Identifier: MIT */
/*
 * The guest's memory as the engine sees it: ranges mapped on demand by the
 * caller (QEMU's PCI DMA in the device, a plain array in host tests). The
 * DMA and compute queues read descriptors, SG lists and jobs through it
 * and write reports back.
 */
#ifndef TPU_GUEST_MEM_H
#define TPU_GUEST_MEM_H

#include <stdbool.h>
#include <stdint.h>

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

/*
 * Either of the above (@write: @buf to the guest), with @stream through
 * non-temporal stores (tpu_stream.h) for copies beyond the caches: the
 * caller then calls tpu_stream_fence() before anyone looks at the data.
 */
int tpu_guest_xfer(const struct tpu_guest_mem *gm, uint64_t addr, void *buf,
		   uint64_t len, bool write, bool stream);

#endif /* TPU_GUEST_MEM_H */
