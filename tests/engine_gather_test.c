// SPDX-License-Identifier: MIT
/*
 * Host test: TPU_OP_GATHER (jnp.take_along_axis) along each axis, in each
 * element size, per block of a grid; out-of-range indices in mode fill
 * (normalised negatives, jnp's default fill per dtype, an explicit one)
 * and in mode promise_in_bounds (the job fails, naming the element); and
 * the checks that refuse float indices, shapes that do not match and a
 * dst that is one of the sources.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"

enum { R = 16, C = 32, BR = 8, BC = 16 };	/* a 2 x 2 grid of blocks */

struct gather {
	struct tdev *d;
	unsigned int x, i, z;
	struct tpu_job_result res;
};

static const unsigned int dtypes[] = { TPU_DTYPE_INT8, TPU_DTYPE_BF16, TPU_DTYPE_F32,
					TPU_DTYPE_INT32 };

static void setup(struct gather *g, unsigned int dtype)
{
	g->d = tdev_new(1 << 20, 2);
	g->x = tdev_alloc(g->d, R * C * 4);
	g->i = tdev_alloc(g->d, R * C * 4);
	g->z = tdev_alloc(g->d, R * C * 4);
	ref_fill(tdev_ptr(g->d, g->x), dtype, R * C, 11, -100, 100);
}

/* Indices in [lo, hi): deterministic in @seed. */
static void fill_index(struct gather *g, uint32_t seed, int lo, int hi)
{
	int32_t *ix = tdev_ptr(g->d, g->i);

	for (int k = 0; k < R * C; k++) {
		seed = seed * 1103515245u + 12345u;
		ix[k] = lo + (int)((seed >> 8) % (uint32_t)(hi - lo));
	}
}

/* z block = take_along_axis(x block, i block, @axis, @fn), imm @fill. */
static int run_gather(struct gather *g, unsigned int dtype, unsigned int idtype,
		      unsigned int axis, unsigned int fn, float fill,
		      const uint32_t *zb)
{
	uint64_t s[2] = { R, C };
	uint32_t grid[2] = { R / BR, C / BC }, b2[2] = { BR, BC };
	struct jb *b = jb_new();
	struct tpu_job_op *op;
	unsigned int x, i, z;
	size_t len;
	void *blob;
	int ret;

	jb_grid(b, 2, grid, "pp");
	x = jb_operand(b, TPU_ROLE_INPUT, g->x, dtype, 2, s, b2, "pid0 pid1");
	i = jb_operand(b, TPU_ROLE_INPUT, g->i, idtype, 2, s, b2, "pid0 pid1");
	z = jb_operand(b, TPU_ROLE_OUTPUT, g->z, dtype, 2, s, zb ? zb : b2, "pid0 pid1");
	op = jb_unary(b, 0, JB_OPND(z), JB_OPND(x), NULL);
	op->opcode = TPU_OP_GATHER;
	op->src1 = JB_OPND(i);
	op->axis = axis;
	op->fn = fn;
	if (fn == TPU_GATHER_FILL)
		memcpy(&op->imm, &fill, sizeof(fill));
	blob = jb_finish(b, &len);
	ret = tdev_run(g->d, blob, len, 0, &g->res);
	free(blob);
	jb_free(b);
	return ret;
}

/* x's element the index at (r, c) names in its block, or NAN outside. */
static double expect(struct gather *g, unsigned int dtype, unsigned int axis,
		     int r, int c, int64_t ix)
{
	int r0 = r / BR * BR, c0 = c / BC * BC;
	int64_t n = axis ? BC : BR;

	if (ix < 0 || ix >= n)
		return NAN;
	return ref_get(tdev_ptr(g->d, g->x), dtype,
		       axis ? (uint64_t)r * C + c0 + ix : (uint64_t)(r0 + ix) * C + c);
}

TEST(gather_along_each_axis_in_each_element_size)
{
	for (unsigned int axis = 0; axis < 2; axis++) {
		for (size_t t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
			struct gather g;
			const int32_t *ix;
			const void *z;

			setup(&g, dtypes[t]);
			fill_index(&g, 3 + axis, 0, axis ? BC : BR);
			ASSERT_EQ(0, run_gather(&g, dtypes[t], TPU_DTYPE_INT32, axis,
						TPU_GATHER_PROMISE, 0, NULL))
				TH_LOG("%s", g.res.message);
			ix = tdev_ptr(g.d, g.i);
			z = tdev_ptr(g.d, g.z);
			for (int r = 0; r < R; r++) {
				for (int c = 0; c < C; c++) {
					ASSERT_EQ(expect(&g, dtypes[t], axis, r, c, ix[r * C + c]),
						  ref_get(z, dtypes[t], r * C + c)) {
						TH_LOG("dtype %u axis %u: z[%d][%d]", dtypes[t], axis, r, c);
					}
				}
			}
			tdev_free(g.d);
		}
	}
}

/* Mode fill: [-n, 0) counts from the end; others give the fill value. */
TEST(fill_mode_normalises_negatives_and_fills_the_rest)
{
	struct {
		unsigned int dtype;
		float imm;
		double want;
	} cases[] = {
		{ TPU_DTYPE_F32, NAN, NAN }, { TPU_DTYPE_INT32, NAN, INT32_MIN },
		{ TPU_DTYPE_INT8, NAN, -128 }, { TPU_DTYPE_UINT8, NAN, 255 },
		{ TPU_DTYPE_BOOL, NAN, 1 }, { TPU_DTYPE_INT8, 2.75f, 2 },
		{ TPU_DTYPE_F32, -1.5f, -1.5 },
	};

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		unsigned int dt = cases[k].dtype;
		struct gather g;
		const int32_t *ix;
		const void *z;
		int fills = 0;

		setup(&g, dt);
		fill_index(&g, 9, -2 * BC, 2 * BC);
		ASSERT_EQ(0, run_gather(&g, dt, TPU_DTYPE_INT32, 1, TPU_GATHER_FILL,
					cases[k].imm, NULL)) TH_LOG("%s", g.res.message);
		ix = tdev_ptr(g.d, g.i);
		z = tdev_ptr(g.d, g.z);
		for (int r = 0; r < R; r++) {
			for (int c = 0; c < C; c++) {
				int64_t i = ix[r * C + c];
				double got = ref_get(z, dt, r * C + c);
				double want = expect(&g, dt, 1, r, c, i >= -BC && i < 0 ? i + BC : i);

				if (isnan(want)) {
					want = cases[k].want;
					fills++;
				}
				if (isnan(want)) {
					ASSERT_TRUE(isnan(got)) {
						TH_LOG("case %zu z[%d][%d]", k, r, c);
					}
					continue;
				}
				ASSERT_EQ(want, got) {
					TH_LOG("case %zu z[%d][%d] index %lld", k, r, c, (long long)i);
				}
			}
		}
		ASSERT_LT(0, fills);
		tdev_free(g.d);
	}
}

TEST(broken_promise_fails_the_job_naming_the_element)
{
	struct gather g;
	int32_t *ix;

	setup(&g, TPU_DTYPE_F32);
	fill_index(&g, 5, 0, BR);
	ix = tdev_ptr(g.d, g.i);
	ix[(BR + 3) * C + BC + 4] = -1;	/* block (1, 1), row 3, col 4 */
	ASSERT_EQ(TPU_JOB_ERR_WINDOW_OOB,
		  run_gather(&g, TPU_DTYPE_F32, TPU_DTYPE_INT32, 0, TPU_GATHER_PROMISE, 0, NULL));
	EXPECT_NE(NULL, strstr(g.res.message,
			       "gather index -1 outside src0's 8 rows, promised in bounds (dst row 3, col 4)"))
		TH_LOG("%s", g.res.message);
	tdev_free(g.d);
}

#define EXPECT_REFUSED(call, text) do {						\
	EXPECT_NE(0, call);							\
	EXPECT_NE(NULL, strstr(g.res.message, text))				\
		TH_LOG("message \"%s\" lacks \"%s\"", g.res.message, text);	\
} while (0)

TEST(checks_name_the_indices_dtype_and_shapes)
{
	uint32_t wide[2] = { BR, 2 * BC };
	struct gather g;

	setup(&g, TPU_DTYPE_F32);
	EXPECT_REFUSED(run_gather(&g, TPU_DTYPE_F32, TPU_DTYPE_F32, 1, TPU_GATHER_FILL, 0, NULL),
		       "gather indices src1 operand 1 are float32, must be int32");
	EXPECT_REFUSED(run_gather(&g, TPU_DTYPE_F32, TPU_DTYPE_INT32, 1, TPU_GATHER_FILL, 0, wide),
		       "gather gives src1 operand 1's shape 8x16, but dst operand 2 is 8x32");
	EXPECT_REFUSED(run_gather(&g, TPU_DTYPE_F32, TPU_DTYPE_INT32, 1, TPU_GATHER_COUNT, 0, NULL),
		       "fn 2 unknown for opcode gather");
	tdev_free(g.d);
}

TEST_HARNESS_MAIN
