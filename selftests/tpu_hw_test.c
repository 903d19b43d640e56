// SPDX-License-Identifier: MIT
/*
 * The device's own robustness, with the driver unloaded: the test maps BAR0
 * through sysfs and does what a buggy or hostile driver could do (unknown
 * offsets, wrong access sizes, writes to read-only registers, bad keys,
 * bad queue configurations, rings and SG lists pointing at MMIO or at no
 * memory at all, doorbells beyond the ring). QEMU must log and refuse each,
 * never crash; completions must say what went wrong; and the driver must
 * bind again to a working device afterwards. Runs as root in the VM.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tpu_hw.h"
#include "tpurt.h"
#include "kselftest_harness.h"
#include "tpu_require_device.h"

#define PCI_ROOT	"/sys/bus/pci/devices"
#define NO_MEMORY	0x7f0000000000ull	/* far beyond any guest RAM */
#define LAPIC_MMIO	0xfee00000ull		/* MMIO, not RAM */

static int find_device(char *dir, size_t len)
{
	struct dirent *e;
	DIR *d = opendir(PCI_ROOT);
	int found = -1;

	while (d && (e = readdir(d)) && found) {
		char path[600], ids[2][16] = { "", "" };
		FILE *f;

		snprintf(path, sizeof(path), PCI_ROOT "/%s/vendor", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		fscanf(f, "%15s", ids[0]);
		fclose(f);
		snprintf(path, sizeof(path), PCI_ROOT "/%s/device", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		fscanf(f, "%15s", ids[1]);
		fclose(f);
		if (strtoul(ids[0], NULL, 16) == TPU_PCI_VENDOR_ID &&
		    strtoul(ids[1], NULL, 16) == TPU_PCI_DEVICE_ID) {
			snprintf(dir, len, PCI_ROOT "/%s", e->d_name);
			found = 0;
		}
	}
	if (d)
		closedir(d);
	return found;
}

/* Memory decoding and bus mastering on, as a driver would leave them. */
static int enable_device(const char *dir)
{
	char path[600];
	uint16_t cmd;
	int fd, ret = -1;

	snprintf(path, sizeof(path), "%s/config", dir);
	fd = open(path, O_RDWR);
	if (fd < 0)
		return -1;
	if (pread(fd, &cmd, 2, 4) == 2) {
		cmd |= 0x6;
		ret = pwrite(fd, &cmd, 2, 4) == 2 ? 0 : -1;
	}
	close(fd);
	return ret;
}

/* The guest-physical address of a locked page of ours. */
static uint64_t phys_addr(void *p)
{
	uint64_t entry = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY);

	if (fd < 0)
		return 0;
	pread(fd, &entry, 8, ((uintptr_t)p / 4096) * 8);
	close(fd);
	if (!(entry >> 63))
		return 0;
	return (entry & ((1ull << 55) - 1)) * 4096 + (uintptr_t)p % 4096;
}

static void settle(void)
{
	usleep(20000);	/* the device's worker runs asynchronously */
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

FIXTURE(hw) {
	volatile uint32_t *regs;
	volatile uint8_t *bytes;
	uint8_t *page;		/* ring, completions and SG list, in RAM */
	uint64_t page_pa;
	char dir[512];
	int fd;
};

static uint32_t rd(FIXTURE_DATA(hw) *self, uint32_t reg)
{
	return self->regs[reg / 4];
}

static void wr(FIXTURE_DATA(hw) *self, uint32_t reg, uint32_t val)
{
	self->regs[reg / 4] = val;
}

#define QREG(reg) TPU_REG_Q(TPU_QUEUE_DMA, reg)

/*
 * The DMA queue consumed every descriptor its tail offers, and settled. A
 * fixed wait alone was too short under a slow QEMU (ASan, make
 * check-debug) on a busy host: at most 5 s.
 */
static void wait_consumed(FIXTURE_DATA(hw) *self)
{
	double t0 = now_ms();

	while (rd(self, QREG(TPU_Q_HEAD)) != rd(self, QREG(TPU_Q_TAIL)) &&
	       now_ms() - t0 < 5000)
		usleep(1000);
	settle();
}

FIXTURE_SETUP(hw)
{
	char path[600];

	if (getuid())
		SKIP(return, "needs root");
	ASSERT_EQ(0, find_device(self->dir, sizeof(self->dir)));
	/* Unbind the driver: this test is the driver now. */
	if (syscall(SYS_delete_module, "tpu", O_NONBLOCK) && errno != ENOENT)
		ASSERT_EQ(0, -errno) TH_LOG("cannot unload tpu.ko");
	ASSERT_EQ(0, enable_device(self->dir));
	snprintf(path, sizeof(path), "%s/resource0", self->dir);
	self->fd = open(path, O_RDWR | O_SYNC);
	ASSERT_LE(0, self->fd);
	self->regs = mmap(NULL, TPU_REGS_SIZE, PROT_READ | PROT_WRITE,
			  MAP_SHARED, self->fd, 0);
	ASSERT_NE(MAP_FAILED, self->regs);
	self->bytes = (volatile uint8_t *)self->regs;
	self->page = aligned_alloc(4096, 4096);
	ASSERT_NE(NULL, self->page);
	memset(self->page, 0, 4096);
	ASSERT_EQ(0, mlock(self->page, 4096));
	self->page_pa = phys_addr(self->page);
	ASSERT_NE(0, self->page_pa);
	wr(self, TPU_REG_RESET, TPU_RESET_KEY);
}

/* The driver binds to the device and a copy round-trips. */
static int driver_works(void)
{
	uint8_t a[100] = { 1, 2, 3 }, b[100];
	struct tpurt_buffer *buf;
	struct tpurt_device *dev;
	int ret;

	ret = tpurt_open(&dev);
	if (ret)
		return ret;
	ret = tpurt_buffer_create(dev, 4096, &buf);
	if (!ret) {
		ret = tpurt_buffer_write(buf, 5, a, sizeof(a)) ?:
		      tpurt_buffer_read(buf, 5, b, sizeof(b)) ?:
		      memcmp(a, b, sizeof(a)) ? -EIO : 0;
		tpurt_buffer_free(buf);
	}
	tpurt_close(dev);
	return ret;
}

/* Whatever the test did, the driver binds again to a working device. */
FIXTURE_TEARDOWN(hw)
{
	int fd;

	wr(self, TPU_REG_RESET, TPU_RESET_KEY);
	munmap((void *)self->regs, TPU_REGS_SIZE);
	close(self->fd);
	fd = open(getenv("TPU_KO") ?: "/lib/modules/tpu.ko", O_RDONLY);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, syscall(SYS_finit_module, fd, "", 0));
	close(fd);
	EXPECT_EQ(0, driver_works()) TH_LOG("%s", tpurt_last_error());
}

TEST_F(hw, identity_and_scratch)
{
	EXPECT_EQ(TPU_MAGIC, rd(self, TPU_REG_MAGIC));
	EXPECT_EQ(TPU_ABI_MAJOR, TPU_VERSION_MAJOR(rd(self, TPU_REG_VERSION)));
	wr(self, TPU_REG_SCRATCH, 0x12345678);
	EXPECT_EQ(0x12345678, rd(self, TPU_REG_SCRATCH));
	EXPECT_EQ(TPU_STATUS_READY, rd(self, TPU_REG_STATUS));
}

TEST_F(hw, bad_register_accesses_are_ignored)
{
	uint32_t resets = rd(self, TPU_REG_RESET_COUNT);

	wr(self, TPU_REG_SCRATCH, 0xcafe);
	EXPECT_EQ(0, rd(self, 0xff0));			/* unknown offset */
	wr(self, 0xff0, 1);
	wr(self, TPU_REG_MAGIC, 0);			/* read-only */
	EXPECT_EQ(TPU_MAGIC, rd(self, TPU_REG_MAGIC));
	wr(self, TPU_REG_CAP(TPU_CAP_HBM_SIZE), 1);
	EXPECT_NE(1, rd(self, TPU_REG_CAP(TPU_CAP_HBM_SIZE)));
	self->bytes[TPU_REG_SCRATCH] = 0xff;		/* wrong sizes */
	*(volatile uint16_t *)(self->bytes + TPU_REG_SCRATCH) = 0xffff;
	*(volatile uint64_t *)(self->bytes + TPU_REG_SCRATCH) = ~0ull;
	(void)self->bytes[TPU_REG_MAGIC + 1];
	EXPECT_EQ(0xcafe, rd(self, TPU_REG_SCRATCH));
	wr(self, TPU_REG_RESET, 0x1234);		/* wrong key */
	EXPECT_EQ(resets, rd(self, TPU_REG_RESET_COUNT));
	EXPECT_EQ(0xcafe, rd(self, TPU_REG_SCRATCH));
	wr(self, TPU_REG_RESET, TPU_RESET_KEY);
	EXPECT_EQ(resets + 1, rd(self, TPU_REG_RESET_COUNT));
	EXPECT_EQ(0, rd(self, TPU_REG_SCRATCH));
}

TEST_F(hw, bad_queue_configurations_are_refused)
{
	wr(self, QREG(TPU_Q_TAIL), 1);			/* doorbell while off */
	EXPECT_TRUE(rd(self, QREG(TPU_Q_STATUS)) & TPU_Q_STATUS_BAD_TAIL);
	wr(self, QREG(TPU_Q_SIZE), 3);			/* not a power of 2 */
	wr(self, QREG(TPU_Q_CTRL), TPU_Q_CTRL_ENABLE);
	EXPECT_EQ(TPU_Q_STATUS_BAD_CONFIG | TPU_Q_STATUS_BAD_TAIL,
		  rd(self, QREG(TPU_Q_STATUS)));
	wr(self, QREG(TPU_Q_SIZE), 8);
	wr(self, QREG(TPU_Q_RING_LO), 0x1010);		/* misaligned */
	wr(self, QREG(TPU_Q_CTRL), TPU_Q_CTRL_ENABLE);
	EXPECT_FALSE(rd(self, QREG(TPU_Q_STATUS)) & TPU_Q_STATUS_ENABLED);
	wr(self, QREG(TPU_Q_CTRL), 0x80);		/* unknown bit */
	EXPECT_EQ(0, rd(self, QREG(TPU_Q_CTRL)));
}

/* Enable the DMA queue with its ring at @ring and completions at @cpl. */
static void start_queue(FIXTURE_DATA(hw) *self, uint64_t ring, uint64_t cpl)
{
	wr(self, QREG(TPU_Q_RING_LO), (uint32_t)ring);
	wr(self, QREG(TPU_Q_RING_HI), ring >> 32);
	wr(self, QREG(TPU_Q_CPL_LO), (uint32_t)cpl);
	wr(self, QREG(TPU_Q_CPL_HI), cpl >> 32);
	wr(self, QREG(TPU_Q_SIZE), 4);
	wr(self, QREG(TPU_Q_CTRL), TPU_Q_CTRL_ENABLE);
}

TEST_F(hw, rings_outside_memory_do_not_stall_the_queue)
{
	start_queue(self, NO_MEMORY, LAPIC_MMIO);
	ASSERT_TRUE(rd(self, QREG(TPU_Q_STATUS)) & TPU_Q_STATUS_ENABLED);
	wr(self, QREG(TPU_Q_TAIL), 3);
	wait_consumed(self);
	/* Every descriptor was consumed, and each counted as an error. */
	EXPECT_EQ(3, rd(self, QREG(TPU_Q_HEAD)));
	EXPECT_EQ(3, rd(self, QREG(TPU_Q_ERRORS)));
	wr(self, QREG(TPU_Q_TAIL), 3 + 5);		/* beyond the ring */
	EXPECT_TRUE(rd(self, QREG(TPU_Q_STATUS)) & TPU_Q_STATUS_BAD_TAIL);
	EXPECT_EQ(3, rd(self, QREG(TPU_Q_TAIL)));
}

TEST_F(hw, bad_descriptors_complete_with_their_error)
{
	struct tpu_dma_desc *ring = (void *)self->page;
	struct tpu_completion *cpl = (void *)(self->page + 1024);
	struct tpu_sg_entry *sg = (void *)(self->page + 2048);
	uint64_t pa = self->page_pa;

	/* 0: SG list entry pointing at MMIO; 1: unknown op; 2: HBM overflow;
	 * 3: a good fill of HBM. */
	sg[0] = (struct tpu_sg_entry){ LAPIC_MMIO, 64 };
	ring[0] = (struct tpu_dma_desc){ .op = TPU_DMA_OP_D2H, .sg_count = 1,
					 .length = 64, .sg_addr = pa + 2048 };
	ring[1] = (struct tpu_dma_desc){ .op = 77, .length = 1 };
	ring[2] = (struct tpu_dma_desc){ .op = TPU_DMA_OP_FILL, .length = 2,
					 .hbm_offset = ~0ull };
	ring[3] = (struct tpu_dma_desc){ .op = TPU_DMA_OP_FILL, .length = 4096 };
	for (int i = 0; i < 4; i++)
		ring[i].id = 100 + i;
	start_queue(self, pa, pa + 1024);
	wr(self, QREG(TPU_Q_TAIL), 4);
	wait_consumed(self);
	ASSERT_EQ(4, rd(self, QREG(TPU_Q_HEAD)));
	EXPECT_EQ(TPU_STATUS_DMA_FAULT, cpl[0].status);
	EXPECT_EQ(TPU_STATUS_BAD_DESC, cpl[1].status);
	EXPECT_EQ(TPU_STATUS_HBM_RANGE, cpl[2].status);
	EXPECT_EQ(TPU_STATUS_OK, cpl[3].status);
	EXPECT_EQ(4096, cpl[3].bytes);
	for (int i = 0; i < 4; i++)
		EXPECT_EQ(100 + i, cpl[i].id);
	EXPECT_EQ(3, rd(self, QREG(TPU_Q_ERRORS)));
}

/*
 * TPU_Q_CTRL_DRIVER_AREA: the device reads the driver's word after the
 * completion array each time HEAD moves, to know whether to interrupt.
 * Set or unreadable (completions pointed beyond memory), it must never
 * hold back a completion; the bit reads back, and is refused with RESET.
 * TPU_Q_IRQS_HELD counts the interrupts the set flag held back, and only
 * those.
 */
TEST_F(hw, driver_area_never_holds_back_completions)
{
	struct tpu_dma_desc *ring = (void *)self->page;
	struct tpu_driver_area *area = (void *)(self->page + 1024 + 4 * TPU_CPL_SIZE);
	struct tpu_completion *cpl = (void *)(self->page + 1024);
	uint64_t pa = self->page_pa;

	for (int i = 0; i < 4; i++)
		ring[i] = (struct tpu_dma_desc){ .op = TPU_DMA_OP_FILL, .length = 64,
						 .id = 200 + i };
	area->flags = TPU_DRIVER_NO_IRQ;
	start_queue(self, pa, pa + 1024);
	wr(self, QREG(TPU_Q_CTRL), TPU_Q_CTRL_ENABLE | TPU_Q_CTRL_DRIVER_AREA);
	EXPECT_EQ(TPU_Q_CTRL_ENABLE | TPU_Q_CTRL_DRIVER_AREA, rd(self, QREG(TPU_Q_CTRL)));
	wr(self, QREG(TPU_Q_TAIL), 2);
	wait_consumed(self);
	EXPECT_EQ(2, rd(self, QREG(TPU_Q_HEAD)));
	EXPECT_EQ(201, cpl[1].id);
	/* ABI 1.2: each advance with the flag set is an MSI held back. */
	EXPECT_EQ(2, rd(self, QREG(TPU_Q_IRQS_HELD)));
	area->flags = 0;
	wr(self, QREG(TPU_Q_TAIL), 4);
	wait_consumed(self);
	EXPECT_EQ(4, rd(self, QREG(TPU_Q_HEAD)));
	EXPECT_EQ(0, rd(self, QREG(TPU_Q_ERRORS)));
	EXPECT_EQ(2, rd(self, QREG(TPU_Q_IRQS_HELD)));

	wr(self, QREG(TPU_Q_CTRL), TPU_Q_CTRL_RESET | TPU_Q_CTRL_DRIVER_AREA);
	EXPECT_TRUE(rd(self, QREG(TPU_Q_STATUS)) & TPU_Q_STATUS_ENABLED);
	wr(self, QREG(TPU_Q_CTRL), TPU_Q_CTRL_RESET);
	wait_consumed(self);
	EXPECT_EQ(0, rd(self, QREG(TPU_Q_IRQS_HELD)));
	wr(self, QREG(TPU_Q_RING_LO), (uint32_t)pa);
	wr(self, QREG(TPU_Q_RING_HI), pa >> 32);
	wr(self, QREG(TPU_Q_CPL_LO), (uint32_t)NO_MEMORY);
	wr(self, QREG(TPU_Q_CPL_HI), NO_MEMORY >> 32);
	wr(self, QREG(TPU_Q_SIZE), 4);
	wr(self, QREG(TPU_Q_CTRL), TPU_Q_CTRL_ENABLE | TPU_Q_CTRL_DRIVER_AREA);
	ASSERT_TRUE(rd(self, QREG(TPU_Q_STATUS)) & TPU_Q_STATUS_ENABLED);
	wr(self, QREG(TPU_Q_TAIL), 3);
	wait_consumed(self);
	EXPECT_EQ(3, rd(self, QREG(TPU_Q_HEAD)));
	EXPECT_EQ(0, rd(self, QREG(TPU_Q_IRQS_HELD)));
}

/* TPU_Q_IRQS_HELD once it has stopped moving (the MSIs go out after HEAD). */
static uint32_t held_when_settled(FIXTURE_DATA(hw) *self)
{
	uint32_t held = rd(self, QREG(TPU_Q_IRQS_HELD)), last;
	double t0 = now_ms();

	do {
		last = held;
		usleep(20000);
		held = rd(self, QREG(TPU_Q_IRQS_HELD));
	} while (held != last && now_ms() - t0 < 2000);
	return held;
}

/*
 * TPU_DRIVER_HEAD (ABI 1.2): just before it sends a queue's MSI the device
 * reads the driver's @head, and holds the message back only if the driver
 * has already retired up to HEAD; one that is behind gets it.
 */
TEST_F(hw, driver_head_holds_back_only_what_was_retired)
{
	struct tpu_dma_desc *ring = (void *)self->page;
	struct tpu_driver_area *area = (void *)(self->page + 1024 + 4 * TPU_CPL_SIZE);
	uint64_t pa = self->page_pa;

	for (int i = 0; i < 4; i++)
		ring[i] = (struct tpu_dma_desc){ .op = TPU_DMA_OP_FILL, .length = 64,
						 .id = 300 + i };
	area->flags = TPU_DRIVER_HEAD;
	area->head = 0;
	start_queue(self, pa, pa + 1024);
	wr(self, QREG(TPU_Q_CTRL), TPU_Q_CTRL_ENABLE | TPU_Q_CTRL_DRIVER_AREA);
	wr(self, QREG(TPU_Q_TAIL), 2);
	wait_consumed(self);
	EXPECT_EQ(2, rd(self, QREG(TPU_Q_HEAD)));
	EXPECT_EQ(0, held_when_settled(self)) TH_LOG("held back although behind");
	/* A driver that says it has retired all four needs no message. */
	area->head = 4;
	wr(self, QREG(TPU_Q_TAIL), 4);
	wait_consumed(self);
	EXPECT_EQ(4, rd(self, QREG(TPU_Q_HEAD)));
	EXPECT_LE(1, held_when_settled(self)) TH_LOG("sent although caught up");
	EXPECT_EQ(0, rd(self, QREG(TPU_Q_ERRORS)));
	area->flags = 0;
	area->head = 0;
}

/*
 * A looping SG list of 2^24 entries (each segment one entry and a link to
 * itself) takes seconds to walk. A queue reset written meanwhile must not
 * hold the vCPU (the whole guest, under QEMU's big lock) until the walk
 * ends: the write returns at once, and the reset finishes within ms.
 */
TEST_F(hw, reset_during_a_looping_sg_walk_does_not_block)
{
	struct tpu_dma_desc *ring = (void *)self->page;
	struct tpu_sg_entry *sg = (void *)(self->page + 2048);
	uint64_t pa = self->page_pa;
	double t0, write_ms, done_ms;

	sg[0] = (struct tpu_sg_entry){ pa + 3072, 1 };
	sg[1] = (struct tpu_sg_entry){ pa + 2048, TPU_SG_LINK };
	ring[0] = (struct tpu_dma_desc){ .op = TPU_DMA_OP_H2D,
					 .sg_count = TPU_DMA_MAX_SG,
					 .length = TPU_DMA_MAX_SG,
					 .sg_addr = pa + 2048 };
	start_queue(self, pa, pa + 1024);
	wr(self, QREG(TPU_Q_TAIL), 1);
	usleep(20000);
	t0 = now_ms();
	wr(self, QREG(TPU_Q_CTRL), TPU_Q_CTRL_RESET);
	write_ms = now_ms() - t0;
	while (rd(self, QREG(TPU_Q_STATUS)) & TPU_Q_STATUS_RESETTING &&
	       now_ms() - t0 < 5000)
		usleep(100);
	done_ms = now_ms() - t0;
	EXPECT_GT(50, write_ms) TH_LOG("the reset write took %.1f ms", write_ms);
	EXPECT_GT(200, done_ms) TH_LOG("the reset took %.1f ms", done_ms);
	EXPECT_EQ(0, rd(self, QREG(TPU_Q_CTRL)));
	EXPECT_EQ(0, rd(self, QREG(TPU_Q_HEAD)));
}

/*
 * Disable, then enable, a queue whose worker is still busy (a hostile
 * driver): the enable restarted HEAD and TAIL at 0 and the worker's end
 * then moved HEAD to 1, ahead of TAIL, running stale descriptors. Now the
 * enable is refused while busy, and HEAD and TAIL stay consistent.
 */
TEST_F(hw, enable_while_busy_keeps_head_and_tail_consistent)
{
	struct tpu_dma_desc *ring = (void *)self->page;
	uint64_t hbm = rd(self, TPU_REG_CAP(TPU_CAP_HBM_SIZE)) |
		       (uint64_t)rd(self, TPU_REG_CAP(TPU_CAP_HBM_SIZE) + 4) << 32;
	double t0;

	/*
	 * Long enough to outlast a disable and an enable (64 MiB: about a
	 * tenth of a second; 1 GiB took 6.5 s on a loaded host, first touch).
	 */
	ring[0] = (struct tpu_dma_desc){ .op = TPU_DMA_OP_FILL,
					 .length = hbm < (64ull << 20) ? hbm : 64ull << 20,
					 .pattern = 0x5a };
	start_queue(self, self->page_pa, self->page_pa + 1024);
	wr(self, QREG(TPU_Q_TAIL), 1);
	/* the worker must hold the fill: on a loaded host it starts late */
	t0 = now_ms();
	while (!(rd(self, QREG(TPU_Q_STATUS)) & TPU_Q_STATUS_BUSY) &&
	       !rd(self, QREG(TPU_Q_DONE)) && now_ms() - t0 < 5000)
		usleep(100);
	wr(self, QREG(TPU_Q_CTRL), 0);
	if (rd(self, QREG(TPU_Q_DONE)))
		SKIP(return, "the fill ended before the disable");
	ASSERT_TRUE(rd(self, QREG(TPU_Q_STATUS)) & TPU_Q_STATUS_BUSY)
		TH_LOG("the worker never started the fill");
	wr(self, QREG(TPU_Q_CTRL), TPU_Q_CTRL_ENABLE);
	EXPECT_TRUE(rd(self, QREG(TPU_Q_STATUS)) & TPU_Q_STATUS_BAD_CONFIG);
	t0 = now_ms();
	while (!rd(self, QREG(TPU_Q_DONE)) && now_ms() - t0 < 10000)
		usleep(1000);
	EXPECT_EQ(1, rd(self, QREG(TPU_Q_DONE)));
	EXPECT_EQ(rd(self, QREG(TPU_Q_TAIL)), rd(self, QREG(TPU_Q_HEAD)));
	/* Enabled now, it starts afresh and runs nothing stale. */
	wr(self, QREG(TPU_Q_CTRL), TPU_Q_CTRL_ENABLE);
	EXPECT_TRUE(rd(self, QREG(TPU_Q_STATUS)) & TPU_Q_STATUS_ENABLED);
	settle();
	EXPECT_EQ(0, rd(self, QREG(TPU_Q_HEAD)));
	EXPECT_EQ(0, rd(self, QREG(TPU_Q_TAIL)));
}

TPU_HARNESS_MAIN
