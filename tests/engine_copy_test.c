// SPDX-License-Identifier: MIT
/*
 * Host test: DMA descriptors against a fake guest memory (a plain array;
 * the real path through QEMU is covered by the selftests in the VM).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpu_copy.h"
#include "tpu_stream.h"
#include "kselftest_harness.h"

#define GUEST_SIZE	(1u << 20)
#define HBM_SIZE	(1u << 20)

struct fake_guest {
	uint8_t *mem;
	uint64_t size;
};

/* Maps at most to the end of the enclosing 64 KiB, to exercise short maps. */
static void *fake_map(void *opaque, uint64_t addr, uint64_t *len, bool write)
{
	struct fake_guest *g = opaque;
	uint64_t room = 65536 - addr % 65536;

	if (addr >= g->size)
		return NULL;
	if (*len > room)
		*len = room;
	if (*len > g->size - addr)
		*len = g->size - addr;
	return g->mem + addr;
}

static void fake_unmap(void *opaque, void *p, uint64_t len, bool write)
{
}

FIXTURE(copy) {
	struct fake_guest g;
	struct tpu_guest_mem gm;
	uint8_t *hbm;
};

FIXTURE_SETUP(copy)
{
	self->g.size = GUEST_SIZE;
	self->g.mem = calloc(1, GUEST_SIZE);
	self->hbm = calloc(1, HBM_SIZE);
	ASSERT_NE(NULL, self->g.mem);
	ASSERT_NE(NULL, self->hbm);
	self->gm = (struct tpu_guest_mem){ &self->g, fake_map, fake_unmap };
}

FIXTURE_TEARDOWN(copy)
{
	free(self->g.mem);
	free(self->hbm);
}

static void put_sg(uint8_t *mem, uint64_t at, uint64_t addr, uint64_t len)
{
	struct tpu_sg_entry e = { addr, len };

	memcpy(mem + at, &e, sizeof(e));
}

static void fill_pattern(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131 + seed);
}

/*
 * A list at 0x1000 of @n data entries of @each bytes, data from 0x80000,
 * split over segments with a link at the end of each 4 KiB page.
 */
static uint64_t build_chain(uint8_t *mem, unsigned int n, uint64_t each)
{
	uint64_t at = 0x1000, data = 0x80000;

	for (unsigned int i = 0; i < n; i++) {
		if ((at + 16) % TPU_SG_SEGMENT_SIZE == 0 && i) {
			/* last slot of the page: link to the page after next */
			put_sg(mem, at, at + 16 + TPU_SG_SEGMENT_SIZE, TPU_SG_LINK);
			at += 16 + TPU_SG_SEGMENT_SIZE;
		}
		put_sg(mem, at, data, each);
		at += 16;
		data += each + 3;	/* gaps: entries are not contiguous */
	}
	return 0x1000;
}

TEST_F(copy, round_trip_through_chained_sg)
{
	const unsigned int n = 600;	/* three segments */
	const uint64_t each = 100;
	struct tpu_dma_desc d = {
		.op = TPU_DMA_OP_H2D, .sg_count = n, .hbm_offset = 4096,
		.length = n * each, .sg_addr = build_chain(self->g.mem, n, each),
	};
	struct tpu_desc_result res;
	uint64_t data = 0x80000;

	for (unsigned int i = 0; i < n; i++, data += each + 3)
		fill_pattern(self->g.mem + data, each, i);
	tpu_copy_run(&d, self->hbm, HBM_SIZE, &self->gm, NULL, NULL, &res);
	ASSERT_EQ(TPU_STATUS_OK, res.status) TH_LOG("detail %u", res.detail);
	ASSERT_EQ(n * each, res.bytes);
	for (unsigned int i = 0; i < n; i++) {
		uint8_t want[100];

		fill_pattern(want, each, i);
		ASSERT_EQ(0, memcmp(want, self->hbm + 4096 + i * each, each))
			TH_LOG("entry %u", i);
	}
	EXPECT_EQ(0, self->hbm[4095]);
	EXPECT_EQ(0, self->hbm[4096 + n * each]);

	/* And back, into cleared guest ranges. */
	data = 0x80000;
	for (unsigned int i = 0; i < n; i++, data += each + 3)
		memset(self->g.mem + data, 0, each);
	d.op = TPU_DMA_OP_D2H;
	tpu_copy_run(&d, self->hbm, HBM_SIZE, &self->gm, NULL, NULL, &res);
	ASSERT_EQ(TPU_STATUS_OK, res.status);
	data = 0x80000;
	for (unsigned int i = 0; i < n; i++, data += each + 3) {
		uint8_t want[100];

		fill_pattern(want, each, i);
		ASSERT_EQ(0, memcmp(want, self->g.mem + data, each));
		EXPECT_EQ(0, self->g.mem[data + each]);	/* the gap */
	}
}

static size_t untouched_bytes(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n && !p[i])
		i++;
	return i;
}

static uint32_t run(struct __test_metadata *_metadata, FIXTURE_DATA(copy) *self,
		    struct tpu_dma_desc *d, uint32_t *detail)
{
	struct tpu_desc_result res;

	tpu_copy_run(d, self->hbm, HBM_SIZE, &self->gm, NULL, NULL, &res);
	if (detail)
		*detail = res.detail;
	return res.status;
}

/* A discard hook that records its ranges and clears them itself. */
struct discard_log {
	uint8_t *hbm;
	unsigned int calls;
	uint64_t offset, len;
	int ret;
};

static int log_discard(void *opaque, uint64_t offset, uint64_t len)
{
	struct discard_log *log = opaque;

	log->calls++;
	log->offset = offset;
	log->len = len;
	if (!log->ret)
		memset(log->hbm + offset, 0, len);
	return log->ret;
}

/*
 * Zero fills hand the huge pages wholly inside them to the discard hook
 * and write the ends; a fill smaller than a page, or a hook that fails,
 * writes every byte. Nothing outside the fill changes.
 */
TEST(zero_fill_discards_whole_huge_pages)
{
	const uint64_t page = TPU_HBM_DISCARD_ALIGN, size = 4 * page;
	uint8_t *hbm = aligned_alloc(page, size);
	struct discard_log log = { .hbm = hbm };
	const struct tpu_hbm_discard discard = { log_discard, &log };
	static const struct { uint64_t off, len, mid_off, mid_len; int ret; } cases[] = {
		{ page - 4096, 2 * page + 8192, page, 2 * page, 0 },
		{ page, page, page, page, 0 },
		{ 100, page, 0, 0, 0 },			/* no whole page */
		{ 4096, 3 * page, page, 2 * page, -1 },	/* hook fails */
	};

	ASSERT_NE(NULL, hbm);
	for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tpu_dma_desc d = {
			.op = TPU_DMA_OP_FILL, .hbm_offset = cases[i].off,
			.length = cases[i].len,
		};
		uint64_t end = cases[i].off + cases[i].len;
		struct tpu_desc_result res;

		memset(hbm, 0xa5, size);
		log.calls = 0;
		log.ret = cases[i].ret;
		tpu_copy_run(&d, hbm, size, NULL, &discard, NULL, &res);
		ASSERT_EQ(TPU_STATUS_OK, res.status) TH_LOG("case %u", i);
		EXPECT_EQ(cases[i].len, res.bytes);
		EXPECT_EQ(cases[i].mid_len ? 1u : 0u, log.calls) TH_LOG("case %u", i);
		if (cases[i].mid_len) {
			EXPECT_EQ(cases[i].mid_off, log.offset);
			EXPECT_EQ(cases[i].mid_len, log.len);
		}
		EXPECT_EQ(cases[i].len, untouched_bytes(hbm + cases[i].off, cases[i].len))
			TH_LOG("case %u: fill not all zero", i);
		EXPECT_EQ(0xa5, hbm[cases[i].off - 1]) TH_LOG("case %u", i);
		if (end < size)
			EXPECT_EQ(0xa5, hbm[end]) TH_LOG("case %u", i);
	}
	free(hbm);
}

TEST_F(copy, bad_descriptors_write_nothing)
{
	struct tpu_dma_desc d = {
		.op = TPU_DMA_OP_H2D, .sg_count = 2, .length = 200,
		.sg_addr = 0x1000,
	};
	uint32_t detail;

	memset(self->g.mem + 0x80000, 0x5a, 4096);
	put_sg(self->g.mem, 0x1000, 0x80000, 100);
	put_sg(self->g.mem, 0x1010, 0x80100, 99);	/* sums to 199 */
	EXPECT_EQ(TPU_STATUS_BAD_SG, run(_metadata, self, &d, &detail));
	EXPECT_EQ(2, detail);
	put_sg(self->g.mem, 0x1010, 0x80100, 0);	/* zero-length entry */
	EXPECT_EQ(TPU_STATUS_BAD_SG, run(_metadata, self, &d, &detail));
	EXPECT_EQ(1, detail);
	d.sg_addr = GUEST_SIZE;				/* list not in RAM */
	EXPECT_EQ(TPU_STATUS_DMA_FAULT, run(_metadata, self, &d, NULL));
	d.sg_addr = 0x1008;				/* misaligned list */
	EXPECT_EQ(TPU_STATUS_BAD_SG, run(_metadata, self, &d, NULL));
	d.sg_addr = 0x1000;
	d.sg_count = 0;
	EXPECT_EQ(TPU_STATUS_BAD_SG, run(_metadata, self, &d, NULL));
	/* Every refused descriptor left HBM untouched. */
	EXPECT_EQ(4096, untouched_bytes(self->hbm, 4096));

	/* A data range that is not RAM stops the copy there. */
	d.sg_count = 2;
	put_sg(self->g.mem, 0x1010, GUEST_SIZE + 4096, 100);
	EXPECT_EQ(TPU_STATUS_DMA_FAULT, run(_metadata, self, &d, &detail));
	EXPECT_EQ(1, detail);
	EXPECT_EQ(0x5a, self->hbm[99]);
	EXPECT_EQ(0, self->hbm[100]);

	d = (struct tpu_dma_desc){ .op = TPU_DMA_OP_FILL, .length = 0 };
	EXPECT_EQ(TPU_STATUS_BAD_LENGTH, run(_metadata, self, &d, NULL));
	d.length = 16;
	d.hbm_offset = HBM_SIZE - 8;
	EXPECT_EQ(TPU_STATUS_HBM_RANGE, run(_metadata, self, &d, NULL));
	d.hbm_offset = UINT64_MAX - 4;			/* offset + length wraps */
	EXPECT_EQ(TPU_STATUS_HBM_RANGE, run(_metadata, self, &d, NULL));
	d.hbm_offset = 0;
	d.reserved = 1;
	EXPECT_EQ(TPU_STATUS_BAD_DESC, run(_metadata, self, &d, NULL));
	d.reserved = 0;
	d.op = 99;
	EXPECT_EQ(TPU_STATUS_BAD_DESC, run(_metadata, self, &d, NULL));
	d = (struct tpu_dma_desc){ .op = TPU_DMA_OP_D2D, .length = 16,
				   .hbm_offset2 = HBM_SIZE };
	EXPECT_EQ(TPU_STATUS_HBM_RANGE, run(_metadata, self, &d, &detail));
	EXPECT_EQ(1, detail);
}

TEST_F(copy, link_loops_and_empty_segments)
{
	struct tpu_dma_desc d = {
		.op = TPU_DMA_OP_H2D, .sg_count = 3, .length = 300,
		.sg_addr = 0x1000,
	};

	/* One data entry, then a link back to itself: ends after 3 entries. */
	put_sg(self->g.mem, 0x1000, 0x80000, 100);
	put_sg(self->g.mem, 0x1010, 0x1000, TPU_SG_LINK);
	EXPECT_EQ(TPU_STATUS_OK, run(_metadata, self, &d, NULL));
	/* A link to a link: an empty segment, refused. */
	put_sg(self->g.mem, 0x1010, 0x2000, TPU_SG_LINK);
	put_sg(self->g.mem, 0x2000, 0x2000, TPU_SG_LINK);
	EXPECT_EQ(TPU_STATUS_BAD_SG, run(_metadata, self, &d, NULL));
	/* A misaligned link. */
	put_sg(self->g.mem, 0x1010, 0x2008, TPU_SG_LINK);
	EXPECT_EQ(TPU_STATUS_BAD_SG, run(_metadata, self, &d, NULL));
}

TEST_F(copy, hbm_to_hbm_overlapping_and_fill)
{
	struct tpu_dma_desc d = { .op = TPU_DMA_OP_D2D, .hbm_offset = 1000,
				  .hbm_offset2 = 1100, .length = 5000 };
	uint8_t want[5000];

	fill_pattern(self->hbm + 1000, 5000, 7);
	fill_pattern(want, 5000, 7);
	ASSERT_EQ(TPU_STATUS_OK, run(_metadata, self, &d, NULL));
	EXPECT_EQ(0, memcmp(want, self->hbm + 1100, 5000));

	d = (struct tpu_dma_desc){ .op = TPU_DMA_OP_FILL, .hbm_offset = 10,
				   .length = 20, .pattern = 0xab };
	ASSERT_EQ(TPU_STATUS_OK, run(_metadata, self, &d, NULL));
	EXPECT_EQ(0, self->hbm[9]);
	EXPECT_EQ(0xab, self->hbm[10]);
	EXPECT_EQ(0xab, self->hbm[29]);
	EXPECT_EQ(0, self->hbm[30]);
}

TEST_F(copy, abort_stops_the_copy)
{
	struct tpu_dma_desc d = { .op = TPU_DMA_OP_FILL, .length = HBM_SIZE,
				  .pattern = 1 };
	atomic_bool abort = true;
	struct tpu_desc_result res;

	tpu_copy_run(&d, self->hbm, HBM_SIZE, &self->gm, NULL, &abort, &res);
	EXPECT_EQ(TPU_STATUS_ABORTED, res.status);
	EXPECT_EQ(0, res.bytes);
	EXPECT_EQ(0, self->hbm[0]);
}

/* Streaming copies: every size and misalignment, same bytes as memcpy. */
TEST(stream_copy_matches_memcpy)
{
	static const size_t sizes[] = { 0, 1, 15, 63, 64, 65, 127, 4096, 100003 };
	uint8_t *src = malloc(100200), *dst = malloc(100200), *want = malloc(100200);
	unsigned int i, so, dof;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_NE(NULL, want);
	fill_pattern(src, 100200, 9);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (so = 0; so < 17; so += 5) {
			for (dof = 0; dof < 17; dof += 3) {
				memset(dst, 0xee, 100200);
				memset(want, 0xee, 100200);
				tpu_stream_copy(dst + dof, src + so, sizes[i]);
				tpu_stream_fence();
				memcpy(want + dof, src + so, sizes[i]);
				ASSERT_EQ(0, memcmp(want, dst, 100200))
					TH_LOG("size %zu, offsets %u/%u", sizes[i], so, dof);
			}
		}
	}
	free(src);
	free(dst);
	free(want);
}

/*
 * A looping list (a hostile driver's): every segment holds one data entry
 * and links back to its own start, so the walk rereads a whole 4 KiB page
 * per entry for 2^20 entries. A reset must stop it at once, not after the
 * whole list has been checked.
 */
TEST_F(copy, reset_stops_a_looping_sg_list_at_once)
{
	atomic_bool abort = true;
	struct tpu_dma_desc d = {
		.op = TPU_DMA_OP_H2D, .sg_count = HBM_SIZE, .length = HBM_SIZE,
		.sg_addr = 0x2000,
	};
	struct tpu_desc_result res;
	struct timespec t0, t1;
	double ms;

	put_sg(self->g.mem, 0x2000, 0x80000, 1);
	put_sg(self->g.mem, 0x2010, 0x2000, TPU_SG_LINK);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	tpu_copy_run(&d, self->hbm, HBM_SIZE, &self->gm, NULL, &abort, &res);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	EXPECT_EQ(TPU_STATUS_ABORTED, res.status);
	EXPECT_EQ(0, res.bytes);
	EXPECT_GT(20, ms) TH_LOG("the walk took %.1f ms before the abort", ms);
}

TEST_HARNESS_MAIN
