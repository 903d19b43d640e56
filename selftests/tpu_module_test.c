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

#include "tpurt.h"
#include "kselftest_harness.h"

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

TEST_HARNESS_MAIN
