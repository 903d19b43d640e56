// SPDX-License-Identifier: MIT
/*
 * tpu.ko unloads and reloads cleanly, repeatedly, and refuses to unload
 * while a file is open. Runs as root in the VM; $TPU_KO names the module.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xf86drm.h>

#include "tpu_drm.h"
#include "tpu_job_blob.h"
#include "tpurt.h"
#include "kselftest_harness.h"
#include "tpu_require_device.h"

#define RELOADS 5

static int unload(void)
{
	return syscall(SYS_delete_module, "tpu", O_NONBLOCK) ? -errno : 0;
}

static int load(void)
{
	const char *path = getenv("TPU_KO");
	int fd, ret;

	fd = open(path ? path : "/lib/modules/tpu.ko", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, "", 0) ? -errno : 0;
	close(fd);
	return ret;
}

static int device_answers(void)
{
	struct tpurt_device_info info;
	struct tpurt_device *dev;
	int ret;

	ret = tpurt_open(&dev);
	if (ret)
		return ret;
	ret = tpurt_device_info(dev, &info);
	tpurt_close(dev);
	return ret;
}

TEST(busy_while_open)
{
	struct tpurt_device *dev;

	if (getuid() != 0)
		SKIP(return, "needs root to unload modules");
	ASSERT_EQ(0, tpurt_open(&dev)) TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(-EWOULDBLOCK, unload());
	tpurt_close(dev);
	EXPECT_EQ(0, device_answers()) TH_LOG("%s", tpurt_last_error());
}

TEST(reload)
{
	struct tpurt_device *dev;
	int i;

	if (getuid() != 0)
		SKIP(return, "needs root to unload modules");
	for (i = 0; i < RELOADS; i++) {
		ASSERT_EQ(0, unload()) TH_LOG("unload #%d", i);
		EXPECT_EQ(-ENODEV, tpurt_open(&dev))
			TH_LOG("device still there after unload #%d", i);
		ASSERT_EQ(0, load()) TH_LOG("load #%d", i);
		ASSERT_EQ(0, device_answers())
			TH_LOG("after load #%d: %s", i, tpurt_last_error());
	}
}

/*
 * Unload right after the last close, with jobs still on the device: the
 * driver must drain or cancel them and free their buffers (it used to leak
 * them, with "Memory manager not clean during takedown" warnings, which
 * fail the run), then load again to a working device.
 */
TEST(unload_with_jobs_in_flight)
{
	const uint32_t n = 2u << 20;	/* elements: ms per job */
	struct tpurt_buffer *in, *out;
	struct tpurt_device *dev;
	struct tpu_add_job j;
	uint32_t h[2];
	int i, queued = 0;

	if (getuid() != 0)
		SKIP(return, "needs root to unload modules");
	ASSERT_EQ(0, tpurt_open(&dev)) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_buffer_create(dev, (uint64_t)n * 4, &in));
	ASSERT_EQ(0, tpurt_buffer_create(dev, (uint64_t)n * 4, &out));
	h[TPU_BLOB_IN_SLOT] = tpurt_buffer_handle(in);
	h[TPU_BLOB_OUT_SLOT] = tpurt_buffer_handle(out);
	tpu_add_job_init(&j, n, 0, 1.0f, 0);
	/* 4 x 8 MiB blocks: within the smallest VMEM check.sh gives (64M) */
	j.h.vmem_limit_bytes = 48ull << 20;
	for (i = 0; i < 40; i++) {
		struct drm_tpu_submit s = {
			.desc_ptr = (uintptr_t)&j, .desc_size = sizeof(j),
			.handles_ptr = (uintptr_t)h, .handle_count = 2,
			.flags = DRM_TPU_SUBMIT_NO_RECORD,
		};

		if (!drmIoctl(tpurt_device_fd(dev), DRM_IOCTL_TPU_SUBMIT, &s))
			queued++;
		else
			TH_LOG("submit %d: %s", i, strerror(errno));
	}
	EXPECT_EQ(40, queued);
	/* Buffers and file closed; the jobs hold the buffers. */
	tpurt_buffer_free(in);
	tpurt_buffer_free(out);
	tpurt_close(dev);
	ASSERT_EQ(0, unload());
	ASSERT_EQ(0, load());
	EXPECT_EQ(0, device_answers()) TH_LOG("%s", tpurt_last_error());
}

TPU_HARNESS_MAIN
