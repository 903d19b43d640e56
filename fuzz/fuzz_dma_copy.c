// SPDX-License-Identifier: MIT
/*
 * The DMA queue's descriptors and SG lists (qemu-device/engine/tpu_copy.c)
 * against a fake guest memory the input fills: SG segments with links,
 * loops, huge lengths and holes. Beyond the sanitizers: a refused
 * descriptor changes nothing, a copy changes HBM only in its destination
 * range and guest memory only for D2H, and a finished copy moved exactly
 * its length.
 *
 * Input: a struct tpu_dma_desc (64 bytes), a flags byte (bit 0: abort is
 * set; bits 1-3: the largest mapping the guest memory grants, 16 bytes to
 * all of it), then the guest memory's first bytes (the rest are zero).
 */
#include "fuzz_input.h"
#include "tpu_copy.h"

#define GUEST_SIZE	(16u << 10)
#define HOLE_START	(12u << 10)	/* [12 KiB, 13 KiB) is not RAM */
#define HOLE_END	(13u << 10)
#define HBM_SIZE	(16u << 10)
#define MAX_SG		256		/* keeps a looping list fast */

struct guest {
	uint8_t *ram;
	uint64_t max_map;
	bool may_write;
};

static void *guest_map(void *opaque, uint64_t addr, uint64_t *len, bool write)
{
	struct guest *g = opaque;
	uint64_t end;

	FUZZ_ASSERT(!write || g->may_write, "write to guest memory at %#llx",
		    (unsigned long long)addr);
	if (addr >= GUEST_SIZE || (addr >= HOLE_START && addr < HOLE_END))
		return NULL;
	end = addr < HOLE_START ? HOLE_START : GUEST_SIZE;
	if (*len > end - addr)
		*len = end - addr;
	if (*len > g->max_map)
		*len = g->max_map;
	return g->ram + addr;
}

static void guest_unmap(void *opaque, void *ptr, uint64_t len, bool write)
{
}

static bool refused(uint32_t status)
{
	return status == TPU_STATUS_BAD_DESC || status == TPU_STATUS_BAD_LENGTH ||
	       status == TPU_STATUS_HBM_RANGE || status == TPU_STATUS_BAD_SG;
}

/* HBM bytes outside [start, start + len) are as they were. */
static void check_hbm_outside(const uint8_t *hbm, const uint8_t *before,
			      uint64_t start, uint64_t len)
{
	for (uint64_t at = 0; at < HBM_SIZE; at++)
		if (at < start || at - start >= len)
			FUZZ_ASSERT(hbm[at] == before[at],
				    "HBM byte %#llx changed outside [%#llx, +%#llx)",
				    (unsigned long long)at, (unsigned long long)start,
				    (unsigned long long)len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *hbm, *hbm_before, *ram, *ram_before;
	struct fuzz_input in = { data, size, 0 };
	struct tpu_dma_desc d;
	struct tpu_desc_result res;
	struct guest g;
	struct tpu_guest_mem gm = { &g, guest_map, guest_unmap };
	atomic_bool abort_flag;
	uint8_t flags;

	if (!hbm) {	/* exact sizes, so ASan sees any byte beyond */
		hbm = malloc(HBM_SIZE);
		hbm_before = malloc(HBM_SIZE);
		ram = malloc(GUEST_SIZE);
		ram_before = malloc(GUEST_SIZE);
	}
	fuzz_take(&in, &d, sizeof(d));
	if (d.sg_count > MAX_SG && d.sg_count <= TPU_DMA_MAX_SG)
		return -1;
	flags = fuzz_u8(&in);
	atomic_init(&abort_flag, flags & 1);
	g = (struct guest){ ram, 16ull << ((flags >> 1) & 7) * 2,
			    d.op == TPU_DMA_OP_D2H };
	if (((flags >> 1) & 7) == 7)
		g.max_map = UINT64_MAX;
	memset(ram, 0, GUEST_SIZE);
	fuzz_take(&in, ram, fuzz_left(&in) < GUEST_SIZE ? fuzz_left(&in) : GUEST_SIZE);
	memcpy(ram_before, ram, GUEST_SIZE);
	for (uint32_t i = 0; i < HBM_SIZE; i++)
		hbm[i] = (uint8_t)(i * 7 + 1);
	memcpy(hbm_before, hbm, HBM_SIZE);

	tpu_copy_run(&d, hbm, HBM_SIZE, &gm, NULL, &abort_flag, &res);

	FUZZ_ASSERT(res.status <= TPU_STATUS_ABORTED && res.status != TPU_STATUS_JOB_FAILED,
		    "status %u", res.status);
	FUZZ_ASSERT(res.bytes <= d.length, "moved %llu of %llu bytes",
		    (unsigned long long)res.bytes, (unsigned long long)d.length);
	FUZZ_ASSERT(res.status || res.bytes == d.length, "ok after %llu of %llu bytes",
		    (unsigned long long)res.bytes, (unsigned long long)d.length);
	FUZZ_ASSERT(!(flags & 1) || res.status, "ok with abort set");
	if (refused(res.status)) {
		FUZZ_ASSERT(!res.bytes, "refused after %llu bytes",
			    (unsigned long long)res.bytes);
		check_hbm_outside(hbm, hbm_before, 0, 0);
		FUZZ_ASSERT(!memcmp(ram, ram_before, GUEST_SIZE),
			    "refused, but guest memory changed");
		return 0;
	}
	check_hbm_outside(hbm, hbm_before,
			  d.op == TPU_DMA_OP_D2D ? d.hbm_offset2 :
			  d.op == TPU_DMA_OP_D2H ? 0 : d.hbm_offset,
			  d.op == TPU_DMA_OP_D2H ? 0 : d.length);
	return 0;
}
