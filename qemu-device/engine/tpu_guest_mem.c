// SPDX-License-Identifier: MIT
/* Copies between host buffers and the guest's memory, a mapping at a time. */
#include "tpu_guest_mem.h"
#include "tpu_stream.h"

#include <string.h>

int tpu_guest_xfer(const struct tpu_guest_mem *gm, uint64_t addr, void *buf,
		   uint64_t len, bool write, bool stream)
{
	uint8_t *b = buf;

	while (len) {
		uint64_t n = len;
		void *p = gm->map(gm->opaque, addr, &n, write);

		if (!p || !n)
			return -1;
		if (stream)
			tpu_stream_copy(write ? p : b, write ? b : p, n);
		else if (write)
			memcpy(p, b, n);
		else
			memcpy(b, p, n);
		gm->unmap(gm->opaque, p, n, write);
		addr += n;
		b += n;
		len -= n;
	}
	return 0;
}

int tpu_guest_read(const struct tpu_guest_mem *gm, uint64_t addr, void *buf,
		   uint64_t len)
{
	return tpu_guest_xfer(gm, addr, buf, len, false, false);
}

int tpu_guest_write(const struct tpu_guest_mem *gm, uint64_t addr,
		    const void *buf, uint64_t len)
{
	return tpu_guest_xfer(gm, addr, (void *)buf, len, true, false);
}
