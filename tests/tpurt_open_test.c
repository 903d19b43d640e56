// SPDX-License-Identifier: MIT
/* Host test: libtpurt's open paths fail clearly where there is no device. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt.h"
#include "kselftest_harness.h"

TEST(missing_path)
{
	struct tpurt_device *dev = (void *)1;

	EXPECT_EQ(-ENOENT, tpurt_open_path("/nonexistent/renderD999", &dev));
	EXPECT_EQ(NULL, dev);
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "/nonexistent/renderD999"))
		TH_LOG("message: %s", tpurt_last_error());
}

TEST(not_a_drm_device)
{
	struct tpurt_device *dev;

	EXPECT_EQ(-ENODEV, tpurt_open_path("/dev/null", &dev));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "not a DRM device"))
		TH_LOG("message: %s", tpurt_last_error());
}

TEST(env_names_the_device)
{
	struct tpurt_device *dev;

	setenv("TPURT_DEVICE", "/dev/null", 1);
	EXPECT_EQ(-ENODEV, tpurt_open(&dev));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "/dev/null"));
	unsetenv("TPURT_DEVICE");
}

TEST(no_tpu_on_the_host)
{
	struct tpurt_device *dev;

	unsetenv("TPURT_DEVICE");
	EXPECT_EQ(-ENODEV, tpurt_open(&dev));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "no tpu render node"))
		TH_LOG("message: %s", tpurt_last_error());
}

static void *fail_in_thread(void *arg)
{
	struct tpurt_device *dev;

	tpurt_open_path("/nonexistent/other-thread", &dev);
	return NULL;
}

TEST(errors_are_per_thread)
{
	struct tpurt_device *dev;
	pthread_t t;

	tpurt_open_path("/nonexistent/this-thread", &dev);
	ASSERT_EQ(0, pthread_create(&t, NULL, fail_in_thread, NULL));
	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "this-thread"));
}

TEST(close_null)
{
	tpurt_close(NULL);
}

TEST_HARNESS_MAIN
