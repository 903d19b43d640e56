// SPDX-License-Identifier: MIT
/* Host test: the in-process device serves the buffer and array API. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt.h"
#include "kselftest_harness.h"

TEST(info_follows_the_config)
{
	struct tpurt_sim_config cfg = { .hbm_size = 64 << 20, .cores = 2,
					.vmem_limit = 32 << 20 };
	struct tpurt_device_info info;
	struct tpurt_device *dev;

	ASSERT_EQ(0, tpurt_open_sim(&cfg, &dev)) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_device_info(dev, &info));
	EXPECT_EQ(64 << 20, info.hbm_size);
	EXPECT_EQ(2, info.cores);
	EXPECT_EQ(32 << 20, info.vmem_limit);
	EXPECT_EQ(128, info.mxu_dim);			/* a default */
	EXPECT_EQ(819000000000ull, info.hbm_bandwidth);
	EXPECT_STREQ("tpu-sim", info.driver);
	EXPECT_EQ(-1, tpurt_device_fd(dev));
	tpurt_close(dev);
}

TEST(bad_config_is_refused)
{
	struct tpurt_sim_config cfg = { .hbm_size = 3 << 20 };
	struct tpurt_device *dev;

	EXPECT_EQ(-EINVAL, tpurt_open_sim(&cfg, &dev));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "hbm")) TH_LOG("%s", tpurt_last_error());
}

/* Queues are the render node's; the in-process device says so. */
TEST(queues_need_the_render_node)
{
	struct tpurt_queue *q = (void *)1;
	struct tpurt_buffer *buf;
	struct tpurt_device *dev;
	uint32_t sync = 0;
	char back[6];

	ASSERT_EQ(0, tpurt_open_sim(NULL, &dev));
	EXPECT_EQ(-EOPNOTSUPP, tpurt_queue_create(dev, 8, &q));
	EXPECT_EQ(NULL, q);
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "in-process device has no queues"))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(TPURT_PATH_AUTO, tpurt_device_submit_path(dev));
	EXPECT_EQ(-EOPNOTSUPP, tpurt_device_set_submit_path(dev, TPURT_PATH_IOCTL));
	EXPECT_EQ(-EOPNOTSUPP, tpurt_device_set_submit_path(dev, TPURT_PATH_URING));
	EXPECT_EQ(0, tpurt_device_set_submit_path(dev, TPURT_PATH_AUTO));
	EXPECT_EQ(-EOPNOTSUPP, tpurt_sync_create(dev, &sync));
	tpurt_sync_destroy(dev, sync);
	/* The device itself still works. */
	ASSERT_EQ(0, tpurt_buffer_create(dev, 6, &buf));
	EXPECT_EQ(0, tpurt_buffer_write(buf, 0, "queue", 6));
	EXPECT_EQ(0, tpurt_buffer_read(buf, 0, back, 6));
	EXPECT_STREQ("queue", back);
	tpurt_buffer_free(buf);
	tpurt_close(dev);
}

TEST(buffers_and_arrays)
{
	struct tpurt_sim_config cfg = { .hbm_size = 1 << 20 };
	struct tpurt_buffer *a, *b, *c;
	struct tpurt_device *dev;
	struct tpurt_array *arr;
	int64_t shape[2] = { 3, 5 };
	float v[15], back[15];
	uint8_t bytes[16];

	ASSERT_EQ(0, tpurt_open_sim(&cfg, &dev));
	ASSERT_EQ(0, tpurt_buffer_create(dev, 5000, &a));
	ASSERT_EQ(0, tpurt_buffer_create(dev, 100, &b));
	EXPECT_EQ(0, tpurt_buffer_write(a, 4990, "0123456789", 10));
	EXPECT_EQ(-EINVAL, tpurt_buffer_write(a, 4991, "0123456789", 10));
	EXPECT_EQ(0, tpurt_buffer_copy(b, 3, a, 4990, 10));
	EXPECT_EQ(0, tpurt_buffer_read(b, 0, bytes, 16));
	EXPECT_EQ(0, memcmp(bytes, "\0\0\0" "0123456789\0\0\0", 16));
	/* freed ranges are reused, and come back zeroed */
	tpurt_buffer_free(a);
	ASSERT_EQ(0, tpurt_buffer_create(dev, 4096, &c));
	EXPECT_EQ(0, tpurt_buffer_read(c, 4080, bytes, 16));
	EXPECT_EQ(0, memcmp(bytes, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16));
	EXPECT_EQ(-ENOSPC, tpurt_buffer_create(dev, 2 << 20, &a));

	ASSERT_EQ(0, tpurt_array_create(dev, TPURT_F32, 2, shape, &arr));
	for (int i = 0; i < 15; i++)
		v[i] = (float)i / 4;
	EXPECT_EQ(0, tpurt_array_write(arr, v));
	EXPECT_EQ(0, tpurt_array_read(arr, back));
	EXPECT_EQ(0, memcmp(v, back, sizeof(v)));
	EXPECT_EQ(0, tpurt_array_fill(arr, 2.5));
	EXPECT_EQ(2.5f, ((float *)tpurt_array_map(arr))[14]);
	tpurt_array_free(arr);
	tpurt_buffer_free(b);
	tpurt_buffer_free(c);
	tpurt_close(dev);
}

TEST_HARNESS_MAIN
