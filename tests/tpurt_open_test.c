// SPDX-License-Identifier: MIT
/*
 * Host test: libtpurt's open paths fail clearly where there is no device,
 * and TPURT_DEVICE=sim[:NAME=VALUE,...] opens the in-process device, which
 * this test (linked with libtpurt.so.0 alone) gets by libtpurt loading
 * libtpurt-sim.so.0 from beside itself.
 */
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

/* tpurt_open() with TPURT_DEVICE=@spec; the info of what it opened. */
static int open_env(const char *spec, struct tpurt_device_info *info)
{
	struct tpurt_device *dev;
	int ret;

	setenv("TPURT_DEVICE", spec, 1);
	ret = tpurt_open(&dev);
	unsetenv("TPURT_DEVICE");
	if (ret)
		return ret;
	ret = tpurt_device_info(dev, info);
	tpurt_close(dev);
	return ret;
}

TEST(env_sim_defaults)
{
	struct tpurt_device_info info;

	ASSERT_EQ(0, open_env("sim", &info))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_STREQ("sim", info.node);
	/* uapi/tpu_params.h's defaults: a TPU v5e. */
	EXPECT_EQ(1ull << 30, info.hbm_size);
	EXPECT_EQ(1, info.cores);
	EXPECT_EQ(275, info.step_cost_ns);
}

TEST(env_sim_parameters)
{
	struct tpurt_device_info info;

	ASSERT_EQ(0, open_env("sim:cores=2,hbm-size=2G,vmem-limit=32m,smem-size=512K,step-cost-ns=0,peak-flops-f32=1000",
			      &info))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(2, info.cores);
	EXPECT_EQ(2ull << 30, info.hbm_size);
	EXPECT_EQ(32ull << 20, info.vmem_limit);
	EXPECT_EQ(512ull << 10, info.smem_size);
	EXPECT_EQ(0, info.step_cost_ns);	/* 0 as given, not the default */
	EXPECT_EQ(1000, info.peak_flops_f32);
	EXPECT_EQ(128ull << 20, info.vmem_size);	/* untouched: default */
}

TEST(env_sim_later_wins)
{
	struct tpurt_device_info info;

	ASSERT_EQ(0, open_env("sim:cores=2,cores=3", &info))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(3, info.cores);
}

/* The in-process device runs jobs: a buffer's bytes make the round trip. */
TEST(env_sim_buffer_round_trip)
{
	char out[8] = "", in[8] = "tpurt!";
	struct tpurt_buffer *buf;
	struct tpurt_device *dev;

	setenv("TPURT_DEVICE", "sim:hbm-size=1M", 1);
	ASSERT_EQ(0, tpurt_open(&dev)) TH_LOG("%s", tpurt_last_error());
	unsetenv("TPURT_DEVICE");
	EXPECT_EQ(-1, tpurt_device_fd(dev));
	ASSERT_EQ(0, tpurt_buffer_create(dev, sizeof(in), &buf));
	EXPECT_EQ(0, tpurt_buffer_write(buf, 0, in, sizeof(in)));
	EXPECT_EQ(0, tpurt_buffer_read(buf, 0, out, sizeof(out)));
	EXPECT_STREQ(in, out);
	tpurt_buffer_free(buf);
	tpurt_close(dev);
}

TEST(open_sim_struct)
{
	struct tpurt_sim_config cfg = { .cores = 2, .hbm_size = 1ull << 24 };
	struct tpurt_device_info info;
	struct tpurt_device *dev;

	ASSERT_EQ(0, tpurt_open_sim(&cfg, &dev)) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_device_info(dev, &info));
	EXPECT_EQ(2, info.cores);
	EXPECT_EQ(1ull << 24, info.hbm_size);
	tpurt_close(dev);
}

/* Each bad TPURT_DEVICE=sim... fails, names what is wrong, opens nothing. */
TEST(env_sim_bad)
{
	static const struct {
		const char *spec;
		int err;
		const char *says;
	} bad[] = {
		{ "sim:", -EINVAL, "an empty parameter" },
		{ "sim:cores=2,", -EINVAL, "an empty parameter" },
		{ "sim:cores", -EINVAL, "'cores' has no value" },
		{ "sim:core=2", -EINVAL, "'core' is not a device parameter (they are hbm-size," },
		{ "sim:=2", -EINVAL, "'' is not a device parameter" },
		{ "sim:cores=", -EINVAL, "cores=: not a number" },
		{ "sim:cores=two", -EINVAL, "cores=two: not a number" },
		{ "sim:cores=2K", -EINVAL, "only sizes take K, M, G, T" },
		{ "sim:cores=-1", -EINVAL, "cores=-1: not a number" },
		{ "sim:hbm-size=1.5G", -EINVAL, "hbm-size=1.5G: not a size" },
		{ "sim:hbm-size=2GB", -EINVAL, "hbm-size=2GB: not a size" },
		{ "sim:hbm-size=2P", -EINVAL, "hbm-size=2P: not a size" },
		{ "sim:cores=4294967296", -ERANGE, "cores=4294967296: too large" },
		{ "sim:hbm-size=18446744073709551616", -ERANGE, "too large" },
		{ "sim:hbm-size=16777216T", -ERANGE, "too large" },
		{ "sim:cores=17", -EINVAL, "cores" },
		{ "sim:hbm-size=3M", -EINVAL, "power of two" },
		{ "sim:vmem-limit=256M", -EINVAL, "vmem-limit" },
	};
	struct tpurt_device_info info;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(bad[i].err, open_env(bad[i].spec, &info))
			TH_LOG("%s", bad[i].spec);
		EXPECT_NE(NULL, strstr(tpurt_last_error(), bad[i].says))
			TH_LOG("%s: message: %s", bad[i].spec, tpurt_last_error());
		EXPECT_NE(NULL, strstr(tpurt_last_error(), bad[i].spec))
			TH_LOG("%s: the message does not quote it: %s",
			       bad[i].spec, tpurt_last_error());
	}
}

/* "sim" is a word of its own: anything else is a render node's path. */
TEST(env_sim_prefix_is_a_path)
{
	struct tpurt_device_info info;

	EXPECT_EQ(-ENOENT, open_env("simulator", &info));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "simulator: "))
		TH_LOG("message: %s", tpurt_last_error());
}

TEST(close_null)
{
	tpurt_close(NULL);
}

TEST_HARNESS_MAIN
