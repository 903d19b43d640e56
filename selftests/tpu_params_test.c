// SPDX-License-Identifier: MIT
/*
 * The render node and GET_PARAM: every parameter equals what the QEMU
 * device was configured with. The VM launcher passes the configuration as
 * TPU_EXPECT_<PARAM> variables, one per parameter of uapi/tpu_params.h
 * (scripts/check.sh reads the defaults from QEMU's own `-device tpu-mxu,help`).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <xf86drm.h>

#include "tpu_drm.h"
#include "tpurt.h"
#include "kselftest_harness.h"
#include "tpu_require_device.h"

#define DRM_MAJOR_NUMBER	226
#define DRM_RENDER_MINOR_BASE	128

static const struct {
	uint32_t param;
	const char *env;
} expected[] = {
#define EXPECTED(id, ...) { DRM_TPU_PARAM_##id, "TPU_EXPECT_" #id },
	TPU_PARAMS(EXPECTED)
#undef EXPECTED
};

static int get_param(int fd, uint32_t param, uint32_t pad, uint64_t *value)
{
	struct drm_tpu_get_param args = { .param = param, .pad = pad };

	if (drmIoctl(fd, DRM_IOCTL_TPU_GET_PARAM, &args))
		return -errno;
	*value = args.value;
	return 0;
}

FIXTURE(tpu) {
	struct tpurt_device *dev;
	int fd;
};

FIXTURE_SETUP(tpu)
{
	ASSERT_EQ(0, tpurt_open(&self->dev))
		TH_LOG("%s", tpurt_last_error());
	self->fd = tpurt_device_fd(self->dev);
}

FIXTURE_TEARDOWN(tpu)
{
	tpurt_close(self->dev);
}

TEST_F(tpu, render_node)
{
	struct tpurt_device_info info;
	struct stat st;

	ASSERT_EQ(0, tpurt_device_info(self->dev, &info));
	EXPECT_STREQ("tpu", info.driver);
	ASSERT_EQ(0, strncmp(info.node, "/dev/dri/renderD", 16))
		TH_LOG("node %s", info.node);
	ASSERT_EQ(0, fstat(self->fd, &st));
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT_EQ(DRM_MAJOR_NUMBER, major(st.st_rdev));
	EXPECT_LE(DRM_RENDER_MINOR_BASE, minor(st.st_rdev));
}

TEST_F(tpu, params_match_config)
{
	unsigned int i, given = 0;

	for (i = 0; i < sizeof(expected) / sizeof(expected[0]); i++)
		given += getenv(expected[i].env) != NULL;
	if (!given)
		SKIP(return, "no TPU_EXPECT_* variables: nothing to compare with");

	for (i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
		const char *want = getenv(expected[i].env);
		uint64_t value = 0;

		ASSERT_NE(NULL, want) TH_LOG("%s is not set", expected[i].env);
		ASSERT_EQ(0, get_param(self->fd, expected[i].param, 0, &value));
		EXPECT_EQ(strtoull(want, NULL, 0), value)
			TH_LOG("param %u (%s)", expected[i].param, expected[i].env);
	}
}

TEST_F(tpu, hw_version)
{
	uint64_t version = 0;

	ASSERT_EQ(0, get_param(self->fd, DRM_TPU_PARAM_HW_VERSION, 0, &version));
	EXPECT_EQ(1, version >> 16);
}

TEST_F(tpu, info_matches_params)
{
	struct tpurt_device_info info;
	uint64_t v = 0;

	ASSERT_EQ(0, tpurt_device_info(self->dev, &info));
#define INFO_MATCHES(id, field, ...) \
	ASSERT_EQ(0, get_param(self->fd, DRM_TPU_PARAM_##id, 0, &v)); \
	EXPECT_EQ(v, info.field) TH_LOG("%s", #field);
	TPU_PARAMS(INFO_MATCHES)
#undef INFO_MATCHES
}

TEST_F(tpu, unknown_param_rejected)
{
	static const uint32_t bad[] = { DRM_TPU_PARAM_COUNT, 0x7fffffff,
					UINT32_MAX };
	uint64_t value = 0xdeadbeef;
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-EINVAL, get_param(self->fd, bad[i], 0, &value))
			TH_LOG("param 0x%x", bad[i]);
	}
	EXPECT_EQ(0xdeadbeef, value);
	EXPECT_EQ(-EINVAL, get_param(self->fd, DRM_TPU_PARAM_CORES, 1, &value));
	/* A rejected call leaves the device usable. */
	EXPECT_EQ(0, get_param(self->fd, DRM_TPU_PARAM_CORES, 0, &value));
	EXPECT_LE(1, value);
}

TPU_HARNESS_MAIN
