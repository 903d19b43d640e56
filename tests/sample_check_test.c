// SPDX-License-Identifier: MIT
/*
 * Host test: the samples' matmul check (samples/sample_util.c) passes a
 * right product and catches rows left unwritten (a lost grid step), for
 * each dtype pair and transposed rhs: a check that cannot fail would let
 * every sample PASS. Its bound is the worst case of rounding (the sum of
 * |terms|), so one element off by a little passes unless spot-checked.
 */
#include <stdlib.h>
#include <string.h>

#include "../samples/sample_util.h"
#include "kselftest_harness.h"

/* z = x @ op(y) in doubles, stored as @out (bf16 through libtpurt). */
static void *product(const void *x, const void *y, int64_t m, int64_t k,
		     int64_t n, enum tpurt_dtype in, enum tpurt_dtype out,
		     bool tr)
{
	size_t es = out == TPURT_F32 ? 4 : 2;
	char *z = malloc(m * n * es);

	for (int64_t a = 0; z && a < m; a++)
		for (int64_t b = 0; b < n; b++) {
			double s = 0;
			float f;

			for (int64_t p = 0; p < k; p++)
				s += sample_get(x, in, a * k + p) *
				     sample_get(y, in, tr ? b * k + p : p * n + b);
			f = (float)s;
			if (out == TPURT_F32) {
				memcpy(z + (a * n + b) * es, &f, 4);
			} else {
				uint16_t h = tpurt_f32_to_bf16(f);

				memcpy(z + (a * n + b) * es, &h, 2);
			}
		}
	return z;
}

static void *filled(enum tpurt_dtype dtype, size_t n, uint32_t seed)
{
	void *p = malloc(n * (dtype == TPURT_F32 ? 4 : 2));

	if (p)
		sample_fill(p, dtype, n, seed);
	return p;
}

/* One shape: the right product passes; four rows of zeros fail. */
static void check_shape(struct __test_metadata *_metadata, enum tpurt_dtype in,
			enum tpurt_dtype out, bool tr, int64_t m, int64_t k,
			int64_t n)
{
	void *x = filled(in, m * k, 1), *y = filled(in, k * n, 2);
	void *z = x && y ? product(x, y, m, k, n, in, out, tr) : NULL;
	size_t es = out == TPURT_F32 ? 4 : 2;

	ASSERT_NE(NULL, z);
	EXPECT_TRUE(sample_check_matmul(x, y, z, m, k, n, in, out, tr, 1.0 / 128));
	memset((char *)z + m / 3 * n * es, 0, 4 * n * es);
	EXPECT_FALSE(sample_check_matmul(x, y, z, m, k, n, in, out, tr, 1.0 / 128));
	free(x), free(y), free(z);
}

TEST(f32_and_bf16_right_and_wrong)
{
	for (int tr = 0; tr < 2; tr++) {
		check_shape(_metadata, TPURT_F32, TPURT_F32, tr, 37, 64, 29);
		check_shape(_metadata, TPURT_BF16, TPURT_F32, tr, 64, 48, 80);
		check_shape(_metadata, TPURT_BF16, TPURT_BF16, tr, 33, 128, 40);
	}
}

TEST_HARNESS_MAIN
