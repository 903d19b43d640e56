// SPDX-License-Identifier: MIT
/* libtpurt arrays on the device: dtypes, fill, map, and .npy files. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt.h"
#include "kselftest_harness.h"
#include "tpu_require_device.h"

FIXTURE(array) {
	struct tpurt_device *dev;
	char path[64];
};

FIXTURE_SETUP(array)
{
	ASSERT_EQ(0, tpurt_open(&self->dev)) TH_LOG("%s", tpurt_last_error());
	snprintf(self->path, sizeof(self->path), "/tmp/array-%d.npy", getpid());
}

FIXTURE_TEARDOWN(array)
{
	unlink(self->path);
	tpurt_close(self->dev);
}

TEST_F(array, create_write_read_every_dtype)
{
	static const enum tpurt_dtype dtypes[] = {
		TPURT_F32, TPURT_BF16, TPURT_INT8, TPURT_UINT8, TPURT_INT32,
	};
	const int64_t shape[3] = { 3, 5, 7 };
	uint8_t src[3 * 5 * 7 * 4], dst[sizeof(src)];
	unsigned int i, j;

	for (i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
		struct tpurt_array *a;
		size_t n;

		ASSERT_EQ(0, tpurt_array_create(self->dev, dtypes[i], 3, shape, &a));
		EXPECT_EQ(105, tpurt_array_size(a));
		n = tpurt_array_nbytes(a);
		EXPECT_EQ(105 * tpurt_dtype_size(dtypes[i]), n);
		for (j = 0; j < n; j++)
			src[j] = (uint8_t)(j * 13 + i);
		ASSERT_EQ(0, tpurt_array_write(a, src));
		ASSERT_EQ(0, tpurt_array_read(a, dst));
		EXPECT_EQ(0, memcmp(src, dst, n)) TH_LOG("%s", tpurt_dtype_name(dtypes[i]));
		EXPECT_EQ(0, memcmp(src, tpurt_array_map(a), n));
		tpurt_array_free(a);
	}
}

TEST_F(array, bad_shapes)
{
	const int64_t zero[2] = { 4, 0 }, ok[5] = { 1, 1, 1, 1, 1 };
	struct tpurt_array *a;

	EXPECT_EQ(-EINVAL, tpurt_array_create(self->dev, TPURT_F32, 2, zero, &a));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "dim 1"));
	EXPECT_EQ(-EINVAL, tpurt_array_create(self->dev, TPURT_F32, 5, ok, &a));
	EXPECT_EQ(-EINVAL, tpurt_array_create(self->dev, TPURT_F32, 0, ok, &a));
	EXPECT_EQ(-EINVAL, tpurt_array_create(self->dev, 9, 1, ok, &a));
	EXPECT_EQ(NULL, a);
}

TEST_F(array, fill_converts_per_dtype)
{
	const int64_t shape[1] = { 1000 };
	struct tpurt_array *a;
	uint16_t h[1000];
	int8_t i8[1000];
	float f[1000];

	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 1, shape, &a));
	ASSERT_EQ(0, tpurt_array_fill(a, 1.5));
	ASSERT_EQ(0, tpurt_array_read(a, f));
	EXPECT_EQ(1.5f, f[0]);
	EXPECT_EQ(1.5f, f[999]);
	tpurt_array_free(a);

	/* 1 + 2^-8 is a tie between two bf16 values: round to even (1.0). */
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_BF16, 1, shape, &a));
	ASSERT_EQ(0, tpurt_array_fill(a, 1.0 + 1.0 / 256));
	ASSERT_EQ(0, tpurt_array_read(a, h));
	EXPECT_EQ(0x3f80, h[0]);
	ASSERT_EQ(0, tpurt_array_fill(a, 1.0 + 3.0 / 256));
	ASSERT_EQ(0, tpurt_array_read(a, h));
	EXPECT_EQ(0x3f82, h[999]);		/* tie, rounds up to even */
	tpurt_array_free(a);

	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_INT8, 1, shape, &a));
	ASSERT_EQ(0, tpurt_array_fill(a, 300));
	ASSERT_EQ(0, tpurt_array_read(a, i8));
	EXPECT_EQ(127, i8[0]);			/* saturates */
	ASSERT_EQ(0, tpurt_array_fill(a, -1000));
	ASSERT_EQ(0, tpurt_array_read(a, i8));
	EXPECT_EQ(-128, i8[500]);
	EXPECT_EQ(-EINVAL, tpurt_array_fill(a, NAN));
	tpurt_array_free(a);
}

TEST_F(array, npy_round_trip)
{
	const int64_t shape[2] = { 17, 129 };
	struct tpurt_array *a, *b;
	float src[17 * 129], dst[17 * 129];
	unsigned char head[128];
	FILE *f;
	int i;

	for (i = 0; i < 17 * 129; i++)
		src[i] = (float)i / 7.0f - 100.0f;
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_F32, 2, shape, &a));
	ASSERT_EQ(0, tpurt_array_write(a, src));
	ASSERT_EQ(0, tpurt_array_save_npy(a, self->path)) TH_LOG("%s", tpurt_last_error());

	/* The header is NumPy's: magic, v1.0, the dict, data 64-aligned. */
	f = fopen(self->path, "rb");
	ASSERT_NE(NULL, f);
	ASSERT_EQ(sizeof(head), fread(head, 1, sizeof(head), f));
	fclose(f);
	EXPECT_EQ(0, memcmp(head, "\x93NUMPY\x01\x00", 8));
	EXPECT_EQ(0, (10 + (head[8] | head[9] << 8)) % 64);
	EXPECT_EQ(0, memcmp(head + 10,
			    "{'descr': '<f4', 'fortran_order': False, 'shape': (17, 129), }",
			    62));

	ASSERT_EQ(0, tpurt_array_load_npy(self->dev, self->path, 0, &b))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(TPURT_F32, tpurt_array_dtype(b));
	EXPECT_EQ(2, tpurt_array_rank(b));
	EXPECT_EQ(17, tpurt_array_dim(b, 0));
	EXPECT_EQ(129, tpurt_array_dim(b, 1));
	ASSERT_EQ(0, tpurt_array_read(b, dst));
	EXPECT_EQ(0, memcmp(src, dst, sizeof(src)));
	tpurt_array_free(a);
	tpurt_array_free(b);
}

TEST_F(array, npy_bf16_as_uint16)
{
	const int64_t shape[1] = { 5 };
	struct tpurt_array *a, *b;
	uint16_t src[5] = { 0x3f80, 0x4000, 0xbf80, 0x7fc0, 0 }, dst[5];

	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_BF16, 1, shape, &a));
	ASSERT_EQ(0, tpurt_array_write(a, src));
	ASSERT_EQ(0, tpurt_array_save_npy(a, self->path));
	/* Without as_bf16, a uint16 file is refused with a hint. */
	EXPECT_EQ(-EINVAL, tpurt_array_load_npy(self->dev, self->path, 0, &b));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "as_bf16"));
	ASSERT_EQ(0, tpurt_array_load_npy(self->dev, self->path, 1, &b));
	EXPECT_EQ(TPURT_BF16, tpurt_array_dtype(b));
	ASSERT_EQ(0, tpurt_array_read(b, dst));
	EXPECT_EQ(0, memcmp(src, dst, sizeof(src)));
	tpurt_array_free(a);
	tpurt_array_free(b);
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	fwrite(data, 1, len, f);
	fclose(f);
}

/* A v1.0 file with @dict as its header and @data_len bytes of data. */
static void write_npy(const char *path, const char *dict, size_t data_len)
{
	char buf[256 + 4096] = "\x93NUMPY\x01\x00";
	size_t n = strlen(dict), total = (10 + n + 1 + 63) / 64 * 64;

	buf[8] = (char)(total - 10);
	buf[9] = 0;
	memset(buf + 10, ' ', total - 10);
	memcpy(buf + 10, dict, n);
	buf[total - 1] = '\n';
	memset(buf + total, 0, data_len);
	write_file(path, buf, total + data_len);
}

TEST_F(array, npy_bad_files)
{
	struct tpurt_array *a;

	write_file(self->path, "not numpy at all", 16);
	EXPECT_EQ(-EINVAL, tpurt_array_load_npy(self->dev, self->path, 0, &a));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "magic"));

	write_npy(self->path, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16);
	EXPECT_EQ(-EINVAL, tpurt_array_load_npy(self->dev, self->path, 0, &a));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "C-order"));

	write_npy(self->path, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", 16);
	EXPECT_EQ(-EINVAL, tpurt_array_load_npy(self->dev, self->path, 0, &a));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), ">f4"));

	write_npy(self->path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 15);
	EXPECT_EQ(-EINVAL, tpurt_array_load_npy(self->dev, self->path, 0, &a));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "ends after 15 of 16"));

	write_npy(self->path, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4);
	EXPECT_EQ(-EINVAL, tpurt_array_load_npy(self->dev, self->path, 0, &a));

	write_npy(self->path, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", 12);
	EXPECT_EQ(0, tpurt_array_load_npy(self->dev, self->path, 0, &a));
	EXPECT_EQ(TPURT_INT32, tpurt_array_dtype(a));
	EXPECT_EQ(3, tpurt_array_dim(a, 0));
	tpurt_array_free(a);

	EXPECT_EQ(-ENOENT, tpurt_array_load_npy(self->dev, "/nonexistent.npy", 0, &a));
}

TPU_HARNESS_MAIN
