// SPDX-License-Identifier: MIT
/*
 * Queue resets (through debugfs' reset_queues, as the driver's timeout
 * recovery does them): copies in flight run again and complete with the
 * right data, nothing hangs, and the device works afterwards.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xf86drm.h>

#include "tpu_drm.h"
#include "tpurt.h"
#include "tpu_kernel_health.h"
#include "kselftest_harness.h"
#include "tpu_require_device.h"

#define COPIES	16
#define LEN	(8u << 20)

/* Descriptors the driver has on the DMA queue right now. */
static int dma_in_flight(int fd)
{
	unsigned int head, tail;
	char path[96];
	FILE *f;
	int n;

	tpu_debugfs_path(fd, "queues", path, sizeof(path));
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fscanf(f, "tpu-q0: driver head %u tail %u", &head, &tail);
	fclose(f);
	return n == 2 ? (int)(tail - head) : -1;
}

/* Reset both queues through the render node's debugfs directory. */
static int reset_queues(int fd)
{
	char path[96];
	int dfd, ret = 0;

	tpu_debugfs_path(fd, "reset_queues", path, sizeof(path));
	dfd = open(path, O_WRONLY);
	if (dfd < 0)
		return -errno;
	if (write(dfd, "1", 1) != 1)
		ret = -errno;
	close(dfd);
	return ret;
}

static void pattern(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 2654435761u) >> 13) ^ (uint8_t)seed;
}

FIXTURE(reset) {
	struct tpurt_device *dev;
	struct tpurt_buffer *buf;
	int fd;
};

FIXTURE_SETUP(reset)
{
	ASSERT_EQ(0, tpurt_open(&self->dev)) TH_LOG("%s", tpurt_last_error());
	self->fd = tpurt_device_fd(self->dev);
	ASSERT_EQ(0, tpurt_buffer_create(self->dev, (uint64_t)COPIES * LEN,
					 &self->buf));
	if (access("/sys/kernel/debug/dri", F_OK))
		SKIP(return, "debugfs is not mounted");
}

FIXTURE_TEARDOWN(reset)
{
	tpurt_buffer_free(self->buf);
	tpurt_close(self->dev);
}

TEST_F(reset, copies_in_flight_run_again)
{
	uint8_t *src = malloc((size_t)COPIES * LEN), *dst = malloc(LEN);
	uint32_t sync[COPIES];
	int i, round, busy = 0;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	for (i = 0; i < COPIES; i++)
		pattern(src + (size_t)i * LEN, LEN, i);
	/* At least 3 rounds, more until one reset found copies in flight. */
	for (round = 0; round < 3 || (!busy && round < 10); round++) {
		for (i = 0; i < COPIES; i++) {
			struct drm_tpu_copy args = {
				.op = DRM_TPU_COPY_TO_BO,
				.handle = tpurt_buffer_handle(self->buf),
				.offset = (uint64_t)i * LEN,
				.user_ptr = (uintptr_t)(src + (size_t)i * LEN),
				.length = LEN,
			};

			ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &sync[i]));
			args.out_syncobj = sync[i];
			ASSERT_EQ(0, drmIoctl(self->fd, DRM_IOCTL_TPU_COPY, &args));
		}
		/* Reset while some of them are queued or running. */
		busy += dma_in_flight(self->fd) > 0;
		ASSERT_EQ(0, reset_queues(self->fd));
		ASSERT_EQ(0, drmSyncobjWait(self->fd, sync, COPIES, INT64_MAX,
					    DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL, NULL));
		for (i = 0; i < COPIES; i++) {
			drmSyncobjDestroy(self->fd, sync[i]);
			ASSERT_EQ(0, tpurt_buffer_read(self->buf, (uint64_t)i * LEN,
						       dst, LEN));
			EXPECT_EQ(0, memcmp(src + (size_t)i * LEN, dst, LEN))
				TH_LOG("round %d copy %d", round, i);
			memset(dst, 0, LEN);
		}
		/* Clear for the next round, so stale data cannot pass. */
		ASSERT_EQ(0, tpurt_buffer_write(self->buf, 0, src + LEN, LEN));
	}
	/* Otherwise the test proved nothing about work in flight. */
	EXPECT_LT(0, busy) TH_LOG("no round had copies in flight at the reset");
	free(src);
	free(dst);
}

TEST_F(reset, idle_reset_then_work)
{
	uint8_t a[4096], b[4096];
	int i;

	for (i = 0; i < 5; i++)
		ASSERT_EQ(0, reset_queues(self->fd));
	pattern(a, sizeof(a), 99);
	ASSERT_EQ(0, tpurt_buffer_write(self->buf, 123, a, sizeof(a)));
	ASSERT_EQ(0, tpurt_buffer_read(self->buf, 123, b, sizeof(b)));
	EXPECT_EQ(0, memcmp(a, b, sizeof(a)));
}

TPU_HARNESS_MAIN
