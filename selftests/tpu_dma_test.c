// SPDX-License-Identifier: MIT
/*
 * DMA correctness: buffers, copies in every direction and size, mmap
 * coherence, isolation between files and processes, and every error.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xf86drm.h>

#include "tpu_drm.h"
#include "tpurt.h"
#include "kselftest_harness.h"
#include "tpu_require_device.h"

#define MiB (1ull << 20)

FIXTURE(dma) {
	struct tpurt_device *dev;
	int fd;
};

FIXTURE_SETUP(dma)
{
	ASSERT_EQ(0, tpurt_open(&self->dev)) TH_LOG("%s", tpurt_last_error());
	self->fd = tpurt_device_fd(self->dev);
}

FIXTURE_TEARDOWN(dma)
{
	tpurt_close(self->dev);
}

/*
 * A pattern that differs for every byte position and every @seed: eight
 * bytes a step of a 64-bit generator, not one: the guest's CPU is
 * emulated.
 */
static void pattern(uint8_t *p, size_t n, uint32_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1, v;

	for (size_t i = 0; i < n; i += 8) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		v = x ^ (x >> 29);
		memcpy(p + i, &v, n - i < 8 ? n - i : 8);
	}
}

static int copy_ioctl(int fd, struct drm_tpu_copy *args)
{
	return drmIoctl(fd, DRM_IOCTL_TPU_COPY, args) ? -errno : 0;
}

static int bo_create(int fd, uint64_t size, uint32_t *handle)
{
	struct drm_tpu_bo_create c = { .size = size };

	if (drmIoctl(fd, DRM_IOCTL_TPU_BO_CREATE, &c))
		return -errno;
	*handle = c.handle;
	return 0;
}

/*
 * Buffers of finished copies return to the allocator asynchronously, once
 * the scheduler frees their jobs: wait (boundedly) for them to drain.
 */
static int bo_create_settled(int fd, uint64_t size, uint32_t *handle)
{
	int ret, tries;

	for (tries = 0; tries < 500; tries++) {
		ret = bo_create(fd, size, handle);
		if (ret != -ENOSPC)
			break;
		usleep(10000);
	}
	return ret;
}

static int gem_close(int fd, uint32_t handle)
{
	struct drm_gem_close c = { .handle = handle };

	return drmIoctl(fd, DRM_IOCTL_GEM_CLOSE, &c) ? -errno : 0;
}

static uint64_t hbm_size(int fd)
{
	struct drm_tpu_get_param p = { .param = DRM_TPU_PARAM_HBM_SIZE };

	return drmIoctl(fd, DRM_IOCTL_TPU_GET_PARAM, &p) ? 0 : p.value;
}

/*
 * Write @len bytes from a user pointer misaligned by @skew into @buf at
 * @offset, read them back to another misaligned pointer, compare; also
 * check that the bytes around the range in the buffer kept their values.
 */
static int round_trip(struct tpurt_buffer *buf, uint64_t offset, uint64_t len,
		      unsigned int skew, uint32_t seed)
{
	uint8_t *src = malloc(len + 64), *dst = malloc(len + 64);
	uint8_t before = 0xee, after = 0xee, edge;
	int ret = -1;

	if (!src || !dst)
		goto out;
	pattern(src + skew, len, seed);
	if (offset && tpurt_buffer_write(buf, offset - 1, &before, 1))
		goto out;
	if (offset + len < tpurt_buffer_size(buf) &&
	    tpurt_buffer_write(buf, offset + len, &after, 1))
		goto out;
	if (tpurt_buffer_write(buf, offset, src + skew, len))
		goto out;
	memset(dst, 0x11, len + 64);
	if (tpurt_buffer_read(buf, offset, dst + 3, len))
		goto out;
	if (memcmp(src + skew, dst + 3, len) || dst[2] != 0x11 ||
	    dst[3 + len] != 0x11)
		goto out;
	if (offset && (tpurt_buffer_read(buf, offset - 1, &edge, 1) ||
		       edge != before))
		goto out;
	if (offset + len < tpurt_buffer_size(buf) &&
	    (tpurt_buffer_read(buf, offset + len, &edge, 1) || edge != after))
		goto out;
	ret = 0;
out:
	free(src);
	free(dst);
	return ret;
}

TEST_F(dma, round_trips_all_sizes)
{
	static const uint64_t sizes[] = {
		1, 2, 3, 7, 63, 4095, 4096, 4097, 65537, MiB + 13, 16 * MiB,
		64 * MiB,
	};
	struct tpurt_buffer *buf;
	unsigned int i;

	ASSERT_EQ(0, tpurt_buffer_create(self->dev, 64 * MiB + 8192, &buf))
		TH_LOG("%s", tpurt_last_error());
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint64_t len = sizes[i];

		EXPECT_EQ(0, round_trip(buf, 0, len, 0, i))
			TH_LOG("size %llu aligned: %s", (unsigned long long)len,
			       tpurt_last_error());
		EXPECT_EQ(0, round_trip(buf, 4097, len, 1 + i % 7, i + 100))
			TH_LOG("size %llu at offset 4097, skewed pointer",
			       (unsigned long long)len);
	}
	tpurt_buffer_free(buf);
}

TEST_F(dma, copy_ending_at_buffer_end)
{
	const uint64_t size = 3 * 4096 + 100;	/* not a page multiple */
	struct tpurt_buffer *buf;
	uint8_t byte = 1;

	ASSERT_EQ(0, tpurt_buffer_create(self->dev, size, &buf));
	EXPECT_EQ(0, round_trip(buf, size - 5000, 5000, 5, 7));
	EXPECT_EQ(0, round_trip(buf, 0, size, 0, 8));
	/* One byte past the end is refused, however it is reached. */
	EXPECT_EQ(-EINVAL, tpurt_buffer_write(buf, size - 4999, &byte, 5000));
	EXPECT_EQ(-EINVAL, tpurt_buffer_write(buf, size, &byte, 1));
	tpurt_buffer_free(buf);
}

/*
 * Dirty pages come back as zeros: the device discards the whole 2 MiB
 * pages of a zero fill and writes the partial ones at its ends.
 */
TEST_F(dma, new_buffers_are_zeroed)
{
	const uint64_t size = 6 * MiB + 12 * 1024;
	struct tpurt_buffer *buf;
	uint8_t *p = malloc(size);
	uint64_t i, nonzero = 0;

	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, tpurt_buffer_create(self->dev, size, &buf));
	memset(p, 0xa5, size);
	ASSERT_EQ(0, tpurt_buffer_write(buf, 0, p, size));
	tpurt_buffer_free(buf);
	/* The allocator reuses the range just freed. */
	ASSERT_EQ(0, tpurt_buffer_create(self->dev, size, &buf));
	ASSERT_EQ(0, tpurt_buffer_read(buf, 0, p, size));
	for (i = 0; i < size; i++)
		nonzero += p[i] != 0;
	EXPECT_EQ(0, nonzero);
	tpurt_buffer_free(buf);
	free(p);
}

TEST_F(dma, hbm_to_hbm)
{
	const uint64_t len = 3 * MiB + 17;
	struct tpurt_buffer *a, *b;
	uint8_t *src = malloc(len), *dst = malloc(len);

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, tpurt_buffer_create(self->dev, 4 * MiB, &a));
	ASSERT_EQ(0, tpurt_buffer_create(self->dev, 4 * MiB, &b));
	pattern(src, len, 42);
	ASSERT_EQ(0, tpurt_buffer_write(a, 5, src, len));
	ASSERT_EQ(0, tpurt_buffer_copy(b, 1000, a, 5, len))
		TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_buffer_read(b, 1000, dst, len));
	EXPECT_EQ(0, memcmp(src, dst, len));

	/* Overlapping, inside one buffer: memmove semantics. */
	ASSERT_EQ(0, tpurt_buffer_copy(a, 100, a, 5, len));
	ASSERT_EQ(0, tpurt_buffer_read(a, 100, dst, len));
	EXPECT_EQ(0, memcmp(src, dst, len));
	EXPECT_EQ(-EINVAL, tpurt_buffer_copy(b, 4 * MiB - 10, a, 0, 11));
	tpurt_buffer_free(a);
	tpurt_buffer_free(b);
	free(src);
	free(dst);
}

TEST_F(dma, mmap_coherence)
{
	const uint64_t size = 2 * MiB;
	struct tpurt_buffer *buf;
	uint8_t *map, *src = malloc(size), *dst = malloc(size);

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, tpurt_buffer_create(self->dev, size, &buf));
	map = tpurt_buffer_map(buf);
	ASSERT_NE(NULL, map) TH_LOG("%s", tpurt_last_error());

	/* Written through the mapping, read by DMA. */
	pattern(src, size, 1);
	memcpy(map, src, size);
	ASSERT_EQ(0, tpurt_buffer_read(buf, 0, dst, size));
	EXPECT_EQ(0, memcmp(src, dst, size));

	/* Written by DMA, read through the mapping. */
	pattern(src, size, 2);
	ASSERT_EQ(0, tpurt_buffer_write(buf, 0, src, size));
	EXPECT_EQ(0, memcmp(src, map, size));
	tpurt_buffer_free(buf);
	free(src);
	free(dst);
}

/* Each process fills and checks its own buffer many times over. */
static int hammer(uint32_t seed)
{
	const uint64_t size = 8 * MiB;
	struct tpurt_buffer *buf;
	struct tpurt_device *dev;
	int i, bad = 0;

	if (tpurt_open(&dev) || tpurt_buffer_create(dev, size, &buf))
		return 2;
	for (i = 0; i < 8 && !bad; i++)
		bad = round_trip(buf, (uint64_t)i * 4099, size - 40000, i, seed + i) != 0;
	tpurt_buffer_free(buf);
	tpurt_close(dev);
	return bad;
}

TEST_F(dma, two_processes_at_once)
{
	pid_t pids[2];
	int i, status;

	for (i = 0; i < 2; i++) {
		pids[i] = fork();
		ASSERT_LE(0, pids[i]);
		if (!pids[i])
			_exit(hammer(1000 * (i + 1)));
	}
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(pids[i], waitpid(pids[i], &status, 0));
		EXPECT_TRUE(WIFEXITED(status));
		EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("process %d", i);
	}
}

TEST_F(dma, handles_are_per_file)
{
	struct tpurt_device *other;
	struct tpurt_buffer *mine;
	uint8_t byte = 0;
	struct drm_tpu_copy args = {
		.op = DRM_TPU_COPY_TO_BO, .flags = DRM_TPU_COPY_WAIT,
		.user_ptr = (uintptr_t)&byte, .length = 1,
	};
	struct drm_tpu_bo_info info = { 0 };

	ASSERT_EQ(0, tpurt_buffer_create(self->dev, 4096, &mine));
	ASSERT_EQ(0, tpurt_open(&other));
	/* The same number on another file names nothing there. */
	args.handle = tpurt_buffer_handle(mine);
	info.handle = args.handle;
	EXPECT_EQ(-ENOENT, copy_ioctl(tpurt_device_fd(other), &args));
	EXPECT_EQ(-1, drmIoctl(tpurt_device_fd(other), DRM_IOCTL_TPU_BO_INFO, &info));
	EXPECT_EQ(ENOENT, errno);
	EXPECT_EQ(0, copy_ioctl(self->fd, &args));
	tpurt_close(other);
	tpurt_buffer_free(mine);
}

TEST_F(dma, bad_arguments)
{
	uint8_t bytes[16] = { 0 };
	struct drm_tpu_bo_create create = { .size = 0 };
	struct drm_tpu_bo_info info = { 0 };
	struct drm_tpu_copy args;
	uint32_t h = 0;

	EXPECT_EQ(-1, drmIoctl(self->fd, DRM_IOCTL_TPU_BO_CREATE, &create));
	EXPECT_EQ(EINVAL, errno);				/* zero size */
	create.size = 4096;
	create.flags = 1;
	EXPECT_EQ(-1, drmIoctl(self->fd, DRM_IOCTL_TPU_BO_CREATE, &create));
	EXPECT_EQ(EINVAL, errno);				/* flags */
	ASSERT_EQ(0, bo_create(self->fd, 4096, &h));
	info.handle = h;
	info.pad = 1;
	EXPECT_EQ(-1, drmIoctl(self->fd, DRM_IOCTL_TPU_BO_INFO, &info));
	EXPECT_EQ(EINVAL, errno);

#define COPY(...) (args = (struct drm_tpu_copy){ .op = DRM_TPU_COPY_TO_BO, \
	.flags = DRM_TPU_COPY_WAIT, .handle = h, \
	.user_ptr = (uintptr_t)bytes, .length = 16, __VA_ARGS__ }, \
	copy_ioctl(self->fd, &args))
	EXPECT_EQ(0, COPY());
	EXPECT_EQ(-EINVAL, COPY(.length = 0));
	EXPECT_EQ(-EINVAL, COPY(.op = 0));
	EXPECT_EQ(-EINVAL, COPY(.op = 4));
	EXPECT_EQ(-EINVAL, COPY(.flags = 2));
	EXPECT_EQ(-EINVAL, COPY(.offset = 4096 - 15));
	EXPECT_EQ(-EINVAL, COPY(.offset = UINT64_MAX - 8));
	EXPECT_EQ(-EINVAL, COPY(.user_ptr = 0));
	EXPECT_EQ(-EINVAL, COPY(.src_handle = h));
	EXPECT_EQ(-ENOENT, COPY(.handle = h + 100));
	EXPECT_EQ(-ENOENT, COPY(.out_syncobj = 12345));
	EXPECT_EQ(-ENOENT, COPY(.in_syncobj = 12345));
	EXPECT_EQ(-EFAULT, COPY(.user_ptr = 4096));		/* unmapped */
	EXPECT_EQ(-EINVAL, COPY(.op = DRM_TPU_COPY_BO_TO_BO, .user_ptr = 0,
				.src_handle = h, .src_offset = 4090));
	/* Reading into read-only memory cannot pin it for writing. */
	EXPECT_EQ(-EFAULT, COPY(.op = DRM_TPU_COPY_FROM_BO,
				.user_ptr = (uintptr_t)"read-only string"));
	EXPECT_EQ(0, COPY(.op = DRM_TPU_COPY_FROM_BO));	/* still works */
#undef COPY
	EXPECT_EQ(0, gem_close(self->fd, h));
}

TEST_F(dma, hbm_exhaustion_and_recovery)
{
	uint64_t total = hbm_size(self->fd), chunk = total / 4;
	uint32_t h[4] = { 0 }, extra = 0;
	int i;

	ASSERT_NE(0, total);
	EXPECT_EQ(-ENOSPC, bo_create(self->fd, total + 4096, &extra));
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, bo_create_settled(self->fd, chunk, &h[i]));
	EXPECT_EQ(-ENOSPC, bo_create(self->fd, 4096, &extra));
	EXPECT_EQ(0, gem_close(self->fd, h[2]));
	/* The freed range is usable again, and nothing leaked. */
	ASSERT_EQ(0, bo_create(self->fd, chunk, &h[2]));
	for (i = 0; i < 4; i++)
		EXPECT_EQ(0, gem_close(self->fd, h[i]));
	ASSERT_EQ(0, bo_create_settled(self->fd, total, &extra));
	EXPECT_EQ(0, gem_close(self->fd, extra));
}

TEST_F(dma, close_while_in_flight)
{
	const uint64_t len = 64 * MiB;
	uint8_t *src = malloc(len);
	uint32_t h = 0, syncobj = 0;
	struct drm_tpu_copy args;
	int i;

	ASSERT_NE(NULL, src);
	pattern(src, len, 3);
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, bo_create(self->fd, len, &h));
		ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &syncobj));
		args = (struct drm_tpu_copy){
			.op = DRM_TPU_COPY_TO_BO, .handle = h,
			.user_ptr = (uintptr_t)src, .length = len,
			.out_syncobj = syncobj,
		};
		ASSERT_EQ(0, copy_ioctl(self->fd, &args));
		/* Drop the handle at once; the copy still holds the buffer. */
		EXPECT_EQ(0, gem_close(self->fd, h));
		EXPECT_EQ(0, drmSyncobjWait(self->fd, &syncobj, 1, INT64_MAX, 0, NULL));
		drmSyncobjDestroy(self->fd, syncobj);
	}
	/* And a whole process that exits with a copy in flight. */
	if (!fork()) {
		struct tpurt_device *dev;
		uint32_t ch = 0;

		if (tpurt_open(&dev) || bo_create(tpurt_device_fd(dev), len, &ch))
			_exit(1);
		args = (struct drm_tpu_copy){
			.op = DRM_TPU_COPY_TO_BO, .handle = ch,
			.user_ptr = (uintptr_t)src, .length = len,
		};
		_exit(copy_ioctl(tpurt_device_fd(dev), &args) ? 1 : 0);
	}
	ASSERT_LT(0, wait(&i));
	EXPECT_EQ(0, WEXITSTATUS(i));
	/* Every buffer came back: the whole HBM can be allocated again. */
	ASSERT_EQ(0, bo_create_settled(self->fd, hbm_size(self->fd), &h));
	EXPECT_EQ(0, gem_close(self->fd, h));
	free(src);
}

static volatile sig_atomic_t alarms;

static void count_alarm(int sig)
{
	alarms++;
}

/*
 * COPY with DRM_TPU_COPY_WAIT under a storm of signals (a 1 ms timer),
 * with SA_RESTART off and on: an overlapping copy inside one buffer
 * (each byte moved @shift up) must run exactly once per ioctl, which
 * returns 0. It used to be queued again on every restart, and libdrm's
 * drmIoctl retries EINTR too.
 */
static void copy_wait_under_signals(struct __test_metadata *_metadata,
				    int fd, struct tpurt_device *dev,
				    int sa_flags)
{
	const uint64_t len = 32 * MiB, shift = 4096;
	struct itimerval tv = { { 0, 1000 }, { 0, 1000 } }, off = { 0 };
	struct sigaction sa = { .sa_handler = count_alarm, .sa_flags = sa_flags };
	struct tpurt_buffer *buf;
	uint8_t *src = malloc(len + shift), *dst = malloc(len + shift);
	int round;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, tpurt_buffer_create(dev, len + shift, &buf));
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
	alarms = 0;
	for (round = 0; round < 4; round++) {
		struct drm_tpu_copy c = {
			.op = DRM_TPU_COPY_BO_TO_BO, .flags = DRM_TPU_COPY_WAIT,
			.handle = tpurt_buffer_handle(buf), .offset = shift,
			.src_handle = tpurt_buffer_handle(buf), .length = len,
		};
		int ret;

		pattern(src, len + shift, round);
		ASSERT_EQ(0, tpurt_buffer_write(buf, 0, src, len + shift));
		setitimer(ITIMER_REAL, &tv, NULL);
		ret = copy_ioctl(fd, &c);
		setitimer(ITIMER_REAL, &off, NULL);
		ASSERT_EQ(0, ret);
		ASSERT_EQ(0, tpurt_buffer_read(buf, 0, dst, len + shift));
		/* Once: [shift, shift + len) holds the old [0, len). */
		EXPECT_EQ(0, memcmp(dst, src, shift));
		EXPECT_EQ(0, memcmp(dst + shift, src, len))
			TH_LOG("round %d: the copy ran more than once", round);
	}
	EXPECT_LT(0, alarms) TH_LOG("no signal arrived during the waits");
	signal(SIGALRM, SIG_DFL);
	tpurt_buffer_free(buf);
	free(src);
	free(dst);
}

TEST_F(dma, copy_wait_runs_once_under_signals)
{
	copy_wait_under_signals(_metadata, self->fd, self->dev, 0);
}

TEST_F(dma, copy_wait_runs_once_under_restarting_signals)
{
	copy_wait_under_signals(_metadata, self->fd, self->dev, SA_RESTART);
}

TPU_HARNESS_MAIN
