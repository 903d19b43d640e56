// SPDX-License-Identifier: MIT
/*
 * Host test: the ops that move elements, TPU_OP_TRANSPOSE (x.T) and
 * TPU_OP_ROLL (pltpu.roll, as jnp.roll), in each element size, with edge
 * blocks, static and per-step shifts; and the checks that refuse a dst
 * that is src0's ref, another dtype or the wrong shape.
 */
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"

enum { R = 13, C = 37, BR = 8, BC = 16 };	/* edge blocks on both dims */

struct move {
	struct tdev *d;
	unsigned int x, z;
	struct tpu_job_result res;
};

static const unsigned int dtypes[] = { TPU_DTYPE_INT8, TPU_DTYPE_BF16, TPU_DTYPE_F32 };

static void setup(struct move *m, unsigned int dtype, uint64_t elems)
{
	m->d = tdev_new(1 << 20, 2);
	m->x = tdev_alloc(m->d, elems * 4);
	m->z = tdev_alloc(m->d, elems * 4);
	/* small integers: exact in every dtype, so each element is its own */
	ref_fill(tdev_ptr(m->d, m->x), dtype, elems, 7, -100, 100);
}

/* A one-op job: z block = op(x block), @zmap the output's index map. */
static int run_op(struct move *m, unsigned int opcode, unsigned int dtype,
		  const uint64_t *xs, const uint32_t *xb, const uint64_t *zs,
		  const uint32_t *zb, const char *zmap, unsigned int axis,
		  const char *shift)
{
	uint32_t grid[2] = { (uint32_t)((xs[0] + xb[0] - 1) / xb[0]),
			     (uint32_t)((xs[1] + xb[1] - 1) / xb[1]) };
	struct jb *b = jb_new();
	struct tpu_job_op *op;
	unsigned int x, z;
	size_t len;
	void *blob;
	int ret;

	jb_grid(b, 2, grid, "pp");
	x = jb_operand(b, TPU_ROLE_INPUT, m->x, dtype, 2, xs, xb, "pid0 pid1");
	z = jb_operand(b, TPU_ROLE_OUTPUT, m->z, dtype, 2, zs, zb, zmap);
	op = jb_unary(b, 0, JB_OPND(z), JB_OPND(x), NULL);
	op->opcode = opcode;
	op->axis = axis;
	if (shift)
		op->scalar_index = jb_prog(b, shift);
	blob = jb_finish(b, &len);
	ret = tdev_run(m->d, blob, len, 0, &m->res);
	free(blob);
	jb_free(b);
	return ret;
}

TEST(transpose_in_each_element_size_with_edge_blocks)
{
	uint64_t xs[2] = { R, C }, zs[2] = { C, R };
	uint32_t xb[2] = { BR, BC }, zb[2] = { BC, BR };

	for (size_t t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
		struct move m;
		const void *x, *z;

		setup(&m, dtypes[t], R * C);
		ASSERT_EQ(0, run_op(&m, TPU_OP_TRANSPOSE, dtypes[t], xs, xb, zs, zb,
				    "pid1 pid0", 0, NULL)) TH_LOG("%s", m.res.message);
		x = tdev_ptr(m.d, m.x);
		z = tdev_ptr(m.d, m.z);
		for (int i = 0; i < R; i++) {
			for (int j = 0; j < C; j++) {
				ASSERT_EQ(ref_get(x, dtypes[t], i * C + j),
					  ref_get(z, dtypes[t], j * R + i))
					TH_LOG("dtype %u: x[%d][%d]", dtypes[t], i, j);
			}
		}
		tdev_free(m.d);
	}
}

/* Each (8, 16) block rolls by its own shift: 3 + 5 * i - 7 * j steps. */
TEST(roll_each_block_along_each_axis_by_a_per_step_shift)
{
	enum { RR = 16, CC = 48 };
	uint64_t xs[2] = { RR, CC };
	uint32_t xb[2] = { BR, BC };

	for (unsigned int axis = 0; axis < 2; axis++) {
		for (size_t t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
			struct move m;
			const void *x, *z;

			setup(&m, dtypes[t], RR * CC);
			ASSERT_EQ(0, run_op(&m, TPU_OP_ROLL, dtypes[t], xs, xb, xs, xb,
					    "pid0 pid1", axis,
					    "3 pid0 5 * + pid1 7 * -"))
				TH_LOG("%s", m.res.message);
			x = tdev_ptr(m.d, m.x);
			z = tdev_ptr(m.d, m.z);
			for (int i = 0; i < RR; i++) {
				for (int j = 0; j < CC; j++) {
					int bi = i / BR, bj = j / BC, n = axis ? BC : BR;
					int s = 3 + 5 * bi - 7 * bj;
					int k = ((axis ? j % BC : i % BR) - s) % n;
					int si = i, sj = j;

					k = k < 0 ? k + n : k;
					if (axis)
						sj = bj * BC + k;
					else
						si = bi * BR + k;
					ASSERT_EQ(ref_get(x, dtypes[t], si * CC + sj),
						  ref_get(z, dtypes[t], i * CC + j))
						TH_LOG("axis %u dtype %u: z[%d][%d]",
						       axis, dtypes[t], i, j);
				}
			}
			tdev_free(m.d);
		}
	}
}

#define EXPECT_REFUSED(call, text) do {						\
	EXPECT_NE(0, call);							\
	EXPECT_NE(NULL, strstr(m.res.message, text))				\
		TH_LOG("message \"%s\" lacks \"%s\"", m.res.message, text);	\
} while (0)

TEST(checks_name_the_shape_dtype_ref_and_shift)
{
	uint64_t xs[2] = { R, C }, zs[2] = { C, R };
	uint32_t xb[2] = { BR, BC }, zb[2] = { BC, BR };
	struct move m;

	setup(&m, TPU_DTYPE_F32, R * C);
	EXPECT_REFUSED(run_op(&m, TPU_OP_TRANSPOSE, TPU_DTYPE_F32, xs, xb, xs, xb,
			      "pid0 pid1", 0, NULL),
		       "transpose of src0 operand 0 (8x16) gives 16x8, but dst operand 1 is 8x16");
	EXPECT_REFUSED(run_op(&m, TPU_OP_ROLL, TPU_DTYPE_F32, xs, xb, xs, xb,
			      "pid0 pid1", 1, NULL),
		       "roll needs a program leaving its shift");
	EXPECT_REFUSED(run_op(&m, TPU_OP_TRANSPOSE, TPU_DTYPE_F32, xs, xb, zs, zb,
			      "pid1 pid0", 1, NULL),
		       "axis must be zero for opcode transpose");
	tdev_free(m.d);
}

/* A dst of another dtype, or src0's own ref (built by hand: scratch). */
TEST(dst_keeps_the_dtype_and_is_another_ref)
{
	uint64_t xs[2] = { 8, 16 };
	uint32_t xb[2] = { 8, 16 }, ss[2] = { 8, 16 };
	uint32_t grid[2] = { 1, 1 };
	struct move m;
	const char *want[2] = { "transpose keeps the dtype: src0 operand 0 is float32 but dst operand 1 is int32",
				"roll dst scratch 0 and src0 scratch 0 are one ref" };

	setup(&m, TPU_DTYPE_F32, 8 * 16);
	for (int c = 0; c < 2; c++) {
		struct jb *b = jb_new();
		struct tpu_job_op *op;
		unsigned int x, z, s;
		size_t len;
		void *blob;

		jb_grid(b, 2, grid, "pp");
		x = jb_operand(b, TPU_ROLE_INPUT, m.x, TPU_DTYPE_F32, 2, xs, xb, "0 0");
		z = jb_operand(b, TPU_ROLE_OUTPUT, m.z, TPU_DTYPE_INT32, 2, xs, xb, "0 0");
		s = jb_scratch(b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, ss);
		op = jb_unary(b, 0, c ? JB_SCR(s) : JB_OPND(z),
			      c ? JB_SCR(s) : JB_OPND(x), NULL);
		op->opcode = c ? TPU_OP_ROLL : TPU_OP_TRANSPOSE;
		if (c)
			op->scalar_index = jb_prog(b, "1");
		blob = jb_finish(b, &len);
		EXPECT_REFUSED(tdev_run(m.d, blob, len, 0, &m.res), want[c]);
		free(blob);
		jb_free(b);
	}
	tdev_free(m.d);
}

TEST_HARNESS_MAIN
