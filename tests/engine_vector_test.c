// SPDX-License-Identifier: MIT
/*
 * Host test: the vector unit's ops on the engine. Reductions over edge
 * blocks in debug mode (padding is NaN, so reading it shows), integer
 * div/mod by zero, iota with program-id offsets, select with masks and
 * broadcasts, casts between every pair of dtypes, descriptor errors for
 * every new field, a forgotten scratch init failing visibly, and the
 * vector unit's modeled cost.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"
#include "tpu_model.h"

enum { R = 13, C = 37, BR = 8, BC = 16, GR = 2, GC = 3 };

struct vt {
	struct tdev *d;
	unsigned int x, z;
	struct tpu_job_result res;
};

static void vt_setup(struct vt *v, unsigned int xt)
{
	v->d = tdev_new(1 << 20, 2);
	v->x = tdev_alloc(v->d, R * C * 4);
	v->z = tdev_alloc(v->d, R * C * 4);
	ref_fill(tdev_ptr(v->d, v->x), xt, R * C, 7, xt == TPU_DTYPE_F32 ? 1 : -9,
		 xt == TPU_DTYPE_F32 ? 0 : 9);
}

static int vt_finish(struct vt *v, struct jb *b, uint32_t flags)
{
	size_t len;
	void *blob;
	int ret;

	jb_flags(b, flags);
	blob = jb_finish(b, &len);
	memset(&v->res, 0, sizeof(v->res));
	ret = tdev_run(v->d, blob, len, 0, &v->res);
	free(blob);
	jb_free(b);
	return ret;
}

/* A (2, 3) grid over x (R x C, 8 x 16 blocks) with output z. */
static struct jb *vt_job(struct vt *v, unsigned int xt, unsigned int zt,
			 const uint64_t *zshape, const uint32_t *zblock,
			 unsigned int *xi, unsigned int *zi)
{
	uint64_t full[2] = { R, C };
	uint32_t blk[2] = { BR, BC }, grid[2] = { GR, GC };
	struct jb *b = jb_new();

	jb_grid(b, 2, grid, "pa");
	*xi = jb_operand(b, TPU_ROLE_INPUT, v->x, xt, 2, full, blk, "pid0 pid1");
	*zi = jb_operand(b, TPU_ROLE_OUTPUT, v->z, zt, 2, zshape, zblock,
			 "pid0 pid1");
	return b;
}

static double x_at(struct vt *v, unsigned int xt, int i, int j)
{
	return ref_get(tdev_ptr(v->d, v->x), xt, (uint64_t)i * C + j);
}

/* Each block's row sums/maxes (axis 1) and column ones (axis 0). */
TEST(reduce_edge_blocks_read_no_padding)
{
	for (unsigned int fn = 0; fn < TPU_REDUCE_ARGMAX; fn++)	/* into f32 */
		for (unsigned int axis = 0; axis < 2; axis++) {
			uint64_t zs[2] = { axis ? R : GR, axis ? GC : C };
			uint32_t zb[2] = { axis ? BR : 1, axis ? 1 : BC };
			struct vt v;
			unsigned int x, z;
			struct jb *b;
			int bad = 0;

			vt_setup(&v, TPU_DTYPE_F32);
			b = vt_job(&v, TPU_DTYPE_F32, TPU_DTYPE_F32, zs, zb, &x, &z);
			{
				struct tpu_job_op *op = jb_unary(b, 0, JB_OPND(z), JB_OPND(x), NULL);

				op->opcode = TPU_OP_REDUCE;
				op->fn = fn;
				op->axis = axis;
			}
			ASSERT_EQ(0, vt_finish(&v, b, TPU_JOB_F_DEBUG)) TH_LOG("%s", v.res.message);
			for (int p = 0; p < (int)(zs[0] * zs[1]); p++) {
				int i0 = axis ? p / GC : (p / C) * BR;
				int j0 = axis ? (p % GC) * BC : p % C;
				int ni = axis ? 1 : BR, nj = axis ? BC : 1;
				double acc = fn == 0 ? 0 : fn == 1 ? -INFINITY : INFINITY;

				for (int i = i0; i < i0 + ni && i < R; i++)
					for (int j = j0; j < j0 + nj && j < C; j++) {
						double e = x_at(&v, TPU_DTYPE_F32, i, j);

						acc = fn == 0 ? acc + e : fn == 1 ? fmax(acc, e) :
						      fmin(acc, e);
					}
				bad += ((float *)tdev_ptr(v.d, v.z))[p] != (float)acc;
			}
			EXPECT_EQ(0, bad) TH_LOG("reduce %u axis %u", fn, axis);
			tdev_free(v.d);
		}
}

/* argmax/argmin within each block, as int32: the first of equal values. */
TEST(argmax_argmin_of_edge_blocks)
{
	for (unsigned int fn = TPU_REDUCE_ARGMAX; fn < TPU_REDUCE_COUNT; fn++)
		for (unsigned int axis = 0; axis < 2; axis++) {
			uint64_t zs[2] = { axis ? R : GR, axis ? GC : C };
			uint32_t zb[2] = { axis ? BR : 1, axis ? 1 : BC };
			struct tpu_job_op *op;
			struct vt v;
			unsigned int x, z;
			struct jb *b;
			float *xv;
			int bad = 0;

			vt_setup(&v, TPU_DTYPE_F32);
			xv = tdev_ptr(v.d, v.x);
			for (int j = 0; j < C; j++)	/* a tie in every column */
				xv[(R - 1) * C + j] = xv[j];
			b = vt_job(&v, TPU_DTYPE_F32, TPU_DTYPE_INT32, zs, zb, &x, &z);
			op = jb_unary(b, 0, JB_OPND(z), JB_OPND(x), NULL);
			op->opcode = TPU_OP_REDUCE;
			op->fn = fn;
			op->axis = axis;
			ASSERT_EQ(0, vt_finish(&v, b, 0)) TH_LOG("%s", v.res.message);
			for (int p = 0; p < (int)(zs[0] * zs[1]); p++) {
				int i0 = axis ? p / GC : (p / C) * BR;
				int j0 = axis ? (p % GC) * BC : p % C;
				int ni = axis ? 1 : BR, nj = axis ? BC : 1, at = 0, k = 0;
				double best = 0;

				for (int i = i0; i < i0 + ni && i < R; i++)
					for (int j = j0; j < j0 + nj && j < C; j++, k++) {
						double e = x_at(&v, TPU_DTYPE_F32, i, j);

						if (!k || (fn == TPU_REDUCE_ARGMAX ? e > best : e < best))
							best = e, at = k;
					}
				bad += ((int32_t *)tdev_ptr(v.d, v.z))[p] != at;
			}
			EXPECT_EQ(0, bad) TH_LOG("reduce %u axis %u", fn, axis);
			tdev_free(v.d);
		}
}

/* int32 // and % by a scalar that is 0 at step 1: the job fails there. */
TEST(integer_div_mod_by_zero_fail_with_op_and_step)
{
	static const unsigned int fns[] = { TPU_BINARY_DIV, TPU_BINARY_MOD };
	uint64_t full[2] = { R, C };
	uint32_t blk[2] = { BR, BC };

	for (int k = 0; k < 2; k++) {
		struct vt v;
		unsigned int x, z;
		struct jb *b;
		struct tpu_job_op *op;

		vt_setup(&v, TPU_DTYPE_INT32);
		b = vt_job(&v, TPU_DTYPE_INT32, TPU_DTYPE_INT32, full, blk, &x, &z);
		op = jb_binary(b, fns[k], TPU_BCAST_SCALAR, JB_OPND(z), JB_OPND(x),
			       JB_NONE, NULL);
		op->scalar_index = jb_prog(b, "pid1 1 -");	/* -1, 0, 1 */
		EXPECT_EQ(TPU_JOB_ERR_DIV_ZERO, vt_finish(&v, b, 0));
		EXPECT_EQ(0u, v.res.error.op);
		EXPECT_EQ(1u, v.res.error.step);
		EXPECT_NE(NULL, strstr(v.res.message, "op 0 at step 1"))
			TH_LOG("%s", v.res.message);
		EXPECT_NE(NULL, strstr(v.res.message, k ? "mod" : "div"));
		tdev_free(v.d);
	}
}

/* Python's // and % on exact integers; float x / 0 is IEEE, no error. */
TEST(integer_floor_div_and_float_div_by_zero)
{
	uint64_t full[2] = { R, C };
	uint32_t blk[2] = { BR, BC };
	struct vt v;
	unsigned int x, z;
	struct jb *b;
	struct tpu_job_op *op;
	int bad = 0;

	vt_setup(&v, TPU_DTYPE_INT32);
	b = vt_job(&v, TPU_DTYPE_INT32, TPU_DTYPE_INT32, full, blk, &x, &z);
	op = jb_binary(b, TPU_BINARY_DIV, TPU_BCAST_SCALAR, JB_OPND(z), JB_OPND(x),
		       JB_NONE, NULL);
	op->scalar_index = jb_prog(b, "-4");
	ASSERT_EQ(0, vt_finish(&v, b, 0)) TH_LOG("%s", v.res.message);
	for (int i = 0; i < R * C; i++) {
		int32_t a = ((int32_t *)tdev_ptr(v.d, v.x))[i];

		bad += ((int32_t *)tdev_ptr(v.d, v.z))[i] != (int32_t)floor(a / -4.0);
	}
	EXPECT_EQ(0, bad);
	tdev_free(v.d);

	vt_setup(&v, TPU_DTYPE_F32);
	((float *)tdev_ptr(v.d, v.x))[0] = 0;
	b = vt_job(&v, TPU_DTYPE_F32, TPU_DTYPE_F32, full, blk, &x, &z);
	jb_binary(b, TPU_BINARY_DIV, TPU_BCAST_IMM, JB_OPND(z), JB_OPND(x),
		  JB_NONE, NULL);	/* imm 0.0 */
	ASSERT_EQ(0, vt_finish(&v, b, 0)) TH_LOG("%s", v.res.message);
	EXPECT_TRUE(isnan(((float *)tdev_ptr(v.d, v.z))[0]));
	EXPECT_TRUE(isinf(((float *)tdev_ptr(v.d, v.z))[1]));
	tdev_free(v.d);
}

/* iota + the block's offset from the program ids: the global index. */
TEST(iota_with_program_id_offset)
{
	uint64_t full[2] = { R, C };
	uint32_t blk[2] = { BR, BC };

	for (unsigned int axis = 0; axis < 2; axis++) {
		struct vt v;
		unsigned int x, z;
		struct jb *b;
		struct tpu_job_op *op;
		int bad = 0;

		vt_setup(&v, TPU_DTYPE_F32);
		b = vt_job(&v, TPU_DTYPE_F32, TPU_DTYPE_INT32, full, blk, &x, &z);
		op = jb_zero(b, JB_OPND(z), NULL);
		op->opcode = TPU_OP_IOTA;
		op->axis = axis;
		op->scalar_index = jb_prog(b, axis ? "pid1 16 *" : "pid0 8 *");
		ASSERT_EQ(0, vt_finish(&v, b, TPU_JOB_F_DEBUG)) TH_LOG("%s", v.res.message);
		for (int i = 0; i < R; i++)
			for (int j = 0; j < C; j++)
				bad += ((int32_t *)tdev_ptr(v.d, v.z))[i * C + j] !=
				       (axis ? j : i);
		EXPECT_EQ(0, bad) TH_LOG("axis %u", axis);
		tdev_free(v.d);
	}
}

/* mask = x > 0 (bool scratch); z = where(mask, x, -1) and where(mask, 2, x) */
TEST(select_with_a_compare_mask)
{
	uint64_t full[2] = { R, C };
	uint32_t blk[2] = { BR, BC }, mshape[2] = { BR, BC };
	float m1 = -1.0f, two = 2.0f;
	struct vt v;
	unsigned int x, z, m;
	struct jb *b;
	struct tpu_job_op *op;
	int bad = 0;

	vt_setup(&v, TPU_DTYPE_F32);
	b = vt_job(&v, TPU_DTYPE_F32, TPU_DTYPE_F32, full, blk, &x, &z);
	m = jb_scratch(b, TPU_MEM_VMEM, TPU_DTYPE_BOOL, 2, mshape);
	jb_binary(b, TPU_BINARY_GT, TPU_BCAST_IMM, JB_SCR(m), JB_OPND(x), JB_NONE,
		  NULL);
	op = jb_zero(b, JB_OPND(z), NULL);
	op->opcode = TPU_OP_SELECT;
	op->src0 = JB_SCR(m);
	op->src1 = JB_OPND(x);
	op->bcast2 = TPU_BCAST_IMM;
	memcpy(&op->imm2, &m1, 4);
	ASSERT_EQ(0, vt_finish(&v, b, TPU_JOB_F_DEBUG)) TH_LOG("%s", v.res.message);
	for (int i = 0; i < R * C; i++) {
		float e = ((float *)tdev_ptr(v.d, v.x))[i];

		bad += ((float *)tdev_ptr(v.d, v.z))[i] != (e > 0 ? e : -1.0f);
	}
	EXPECT_EQ(0, bad);

	b = vt_job(&v, TPU_DTYPE_F32, TPU_DTYPE_F32, full, blk, &x, &z);
	m = jb_scratch(b, TPU_MEM_VMEM, TPU_DTYPE_BOOL, 2, mshape);
	jb_binary(b, TPU_BINARY_GT, TPU_BCAST_IMM, JB_SCR(m), JB_OPND(x), JB_NONE,
		  NULL);
	op = jb_zero(b, JB_OPND(z), NULL);
	op->opcode = TPU_OP_SELECT;
	op->src0 = JB_SCR(m);
	op->bcast = TPU_BCAST_IMM;
	memcpy(&op->imm, &two, 4);
	op->src2 = JB_OPND(x);
	ASSERT_EQ(0, vt_finish(&v, b, 0)) TH_LOG("%s", v.res.message);
	bad = 0;
	for (int i = 0; i < R * C; i++) {
		float e = ((float *)tdev_ptr(v.d, v.x))[i];

		bad += ((float *)tdev_ptr(v.d, v.z))[i] != (e > 0 ? 2.0f : e);
	}
	EXPECT_EQ(0, bad);
	tdev_free(v.d);
}

/*
 * identity between every pair of dtypes: floats to integers truncate and
 * saturate (NaN -> 0), integers to narrower integers wrap as XLA's convert
 */
TEST(casts_between_every_pair)
{
	static const double vals[16] = {
		0, -0.0, 1.5, -1.5, 2.5, 300, -300, 127.9, NAN, INFINITY,
		-INFINITY, 1e10, 0.3, -0.7, 255, 1,
	};
	uint64_t shape[2] = { 1, 16 };
	uint32_t blk[2] = { 1, 16 }, grid[1] = { 1 };

	for (unsigned int st = 0; st < TPU_DTYPE_COUNT; st++)
		for (unsigned int dt = 0; dt < TPU_DTYPE_COUNT; dt++) {
			struct tdev *d = tdev_new(1 << 16, 1);
			unsigned int xs = tdev_alloc(d, 64), zs = tdev_alloc(d, 64);
			struct tpu_job_result res;
			struct jb *b = jb_new();
			unsigned int x, z;
			uint8_t want[64];
			size_t len;
			void *blob;
			int bad = 0;

			for (int i = 0; i < 16; i++)
				ref_set(tdev_ptr(d, xs), st, i, vals[i]);
			jb_grid(b, 1, grid, "p");
			x = jb_operand(b, TPU_ROLE_INPUT, xs, st, 2, shape, blk, "0 0");
			z = jb_operand(b, TPU_ROLE_OUTPUT, zs, dt, 2, shape, blk, "0 0");
			jb_unary(b, TPU_UNARY_IDENTITY, JB_OPND(z), JB_OPND(x), NULL);
			blob = jb_finish(b, &len);
			ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
			for (int i = 0; i < 16; i++) {
				double u = ref_get(tdev_ptr(d, xs), st, i);

				if (!tpu_dtype_is_float(dt) && dt != TPU_DTYPE_BOOL)
					u = isnan(u) ? 0 : trunc(u);
				if (tpu_dtype_is_int(st) && dt == TPU_DTYPE_INT8)
					u = (int8_t)(uint8_t)(int64_t)u;
				else if (tpu_dtype_is_int(st) && dt == TPU_DTYPE_UINT8)
					u = (uint8_t)(int64_t)u;
				else if (tpu_dtype_is_int(st) && dt == TPU_DTYPE_INT32)
					u = (int32_t)(uint32_t)(int64_t)u;
				else if (tpu_dtype_is_int(st) && dt == TPU_DTYPE_UINT32)
					u = (uint32_t)(int64_t)u;
				ref_set(want, dt, i, u);
			}
			for (int i = 0; i < 16; i++) {
				double g = ref_get(tdev_ptr(d, zs), dt, i);
				double w = ref_get(want, dt, i);

				bad += !(g == w || (isnan(g) && isnan(w)));
			}
			EXPECT_EQ(0, bad) TH_LOG("%s -> %s", tpu_dtype_name(st),
						 tpu_dtype_name(dt));
			free(blob);
			jb_free(b);
			tdev_free(d);
		}
}

/*
 * Online softmax's running max in a scratch that the kernel forgets to
 * initialise: NaN in debug mode; right once it is initialised at k == 0.
 */
TEST(forgotten_scratch_init_fails_visibly_in_debug_mode)
{
	uint64_t zs[2] = { R, 1 };
	uint32_t zb[2] = { BR, 1 }, ms[2] = { BR, 1 };

	for (int init = 0; init < 2; init++) {
		struct vt v;
		unsigned int x, z, m, t;
		struct jb *b;
		struct tpu_job_op *op;
		int bad = 0;

		vt_setup(&v, TPU_DTYPE_F32);
		{
			uint64_t full[2] = { R, C };
			uint32_t blk[2] = { BR, BC }, grid[2] = { GR, GC };

			b = jb_new();
			jb_grid(b, 2, grid, "pa");
			x = jb_operand(b, TPU_ROLE_INPUT, v.x, TPU_DTYPE_F32, 2, full, blk,
				       "pid0 pid1");
			z = jb_operand(b, TPU_ROLE_OUTPUT, v.z, TPU_DTYPE_F32, 2, zs, zb,
				       "pid0 0");
		}
		m = jb_scratch(b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, ms);
		t = jb_scratch(b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, ms);
		op = jb_unary(b, 0, JB_SCR(t), JB_OPND(x), NULL);
		op->opcode = TPU_OP_REDUCE;
		op->fn = TPU_REDUCE_MAX;
		op->axis = 1;
		if (init)
			jb_unary(b, TPU_UNARY_IDENTITY, JB_SCR(m), JB_SCR(t), "pid1 0 ==");
		jb_binary(b, TPU_BINARY_MAX, TPU_BCAST_NONE, JB_SCR(m), JB_SCR(m),
			  JB_SCR(t), NULL);
		jb_unary(b, TPU_UNARY_IDENTITY, JB_OPND(z), JB_SCR(m), "pid1 nprog1 1 - ==");
		ASSERT_EQ(0, vt_finish(&v, b, TPU_JOB_F_DEBUG)) TH_LOG("%s", v.res.message);
		for (int i = 0; i < R; i++) {
			double mx = -INFINITY;
			float g = ((float *)tdev_ptr(v.d, v.z))[i];

			for (int j = 0; j < C; j++)
				mx = fmax(mx, x_at(&v, TPU_DTYPE_F32, i, j));
			bad += init ? g != (float)mx : !isnan(g);
		}
		EXPECT_EQ(0, bad) TH_LOG("init %d", init);
		tdev_free(v.d);
	}
}

/* A model-only exp charges the VPU and the EUP by elements over vregs. */
TEST(model_only_vector_cost)
{
	uint64_t full[2] = { R, C };
	uint32_t blk[2] = { BR, BC };
	struct tpu_model_work w = { 0 };
	struct vt v;
	unsigned int x, z;
	struct jb *b;
	size_t len;
	void *blob;

	vt_setup(&v, TPU_DTYPE_F32);
	b = vt_job(&v, TPU_DTYPE_F32, TPU_DTYPE_F32, full, blk, &x, &z);
	jb_unary(b, TPU_UNARY_EXP, JB_OPND(z), JB_OPND(x), NULL);
	blob = jb_finish(b, &len);
	ASSERT_EQ(0, tpu_engine_run(v.d->engine, blob, len, NULL, v.d->hbm_size,
				    v.d->slots, v.d->nslots, TPU_RUN_MODEL_ONLY,
				    &v.res)) TH_LOG("%s", v.res.message);
	tpu_model_vector_op(&v.d->cfg, TPU_OP_UNARY, TPU_UNARY_EXP, BR, BC,
			    &w);
	EXPECT_GT(w.eup_s, 0);
	EXPECT_LT(fabs(v.res.stats.model.eup_busy_s - GR * GC * w.eup_s), 1e-15);
	EXPECT_LT(fabs(v.res.stats.model.vpu_busy_s - GR * GC * w.vpu_s), 1e-15);
	/* 8 x 16 pads to one 8 x 128 vreg: 1024 elements */
	EXPECT_LT(fabs(w.eup_s - 1024.0 / v.d->cfg.eup_elems_per_s),
		  1e-18);
	free(blob);
	jb_free(b);
	tdev_free(v.d);
}

/* Each new field set where its opcode does not take it, or out of range. */
TEST(descriptor_errors_name_the_field)
{
	static const struct {
		unsigned int opcode, fn, bcast, bcast2, axis, src2, imm2;
		const char *want;
	} c[] = {
		{ TPU_OP_UNARY, 0, 0, 0, 1, 0, 0, "op 0: axis must be zero" },
		{ TPU_OP_UNARY, 0, 0, 0, 2, 0, 0, "op 0: axis 2" },
		{ TPU_OP_UNARY, 0, 0, 0, 0, 1, 0, "op 0: src2 must be (none)" },
		{ TPU_OP_UNARY, 0, 0, 0, 0, 0, 1, "op 0: imm2 must be zero" },
		{ TPU_OP_UNARY, TPU_UNARY_COUNT, 0, 0, 0, 0, 0, "op 0: fn 27 unknown" },
		{ TPU_OP_BINARY, TPU_BINARY_COUNT, 0, 0, 0, 0, 0, "op 0: fn 22 unknown" },
		{ TPU_OP_BINARY, TPU_BINARY_SHL, TPU_BCAST_IMM, 0, 0, 0, 0, "bitwise fn 19 takes integer types" },
		{ TPU_OP_BINARY, 0, 6, 0, 0, 0, 0, "op 0: bcast 6 unknown" },
		{ TPU_OP_BINARY, 0, 0, 4, 0, 0, 0, "op 0: bcast2 must be zero" },
		{ TPU_OP_REDUCE, TPU_REDUCE_COUNT, 0, 0, 1, 0, 0, "op 0: fn 5 unknown" },
		{ TPU_OP_REDUCE, 0, 0, 0, 1, 0, 0, "reduce over axis 1" },
		{ TPU_OP_SELECT, 0, 0, 3, 0, 0, 0, "op 0: bcast2 smem" },
		{ TPU_OP_SELECT, 0, 0, 5, 0, 0, 0, "op 0: bcast2 scalar" },
		{ TPU_OP_SELECT, 0, 5, 0, 0, 0, 0, "op 0: scalar_index" },
		{ TPU_OP_IOTA, 0, 0, 0, 0, 0, 0, "op 0: src0 must be (none)" },
		{ TPU_OP_COUNT, 0, 0, 0, 0, 0, 0, "op 0: opcode 20 unknown" },
	};
	uint64_t full[2] = { R, C };
	uint32_t blk[2] = { BR, BC };

	for (size_t k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
		struct vt v;
		unsigned int x, z;
		struct jb *b;
		struct tpu_job_op *op;

		vt_setup(&v, TPU_DTYPE_F32);
		b = vt_job(&v, TPU_DTYPE_F32, TPU_DTYPE_F32, full, blk, &x, &z);
		op = jb_unary(b, 0, JB_OPND(z), JB_OPND(x), NULL);
		op->opcode = c[k].opcode;
		op->fn = c[k].fn;
		op->bcast = c[k].bcast;
		op->bcast2 = c[k].bcast2;
		op->axis = c[k].axis;
		op->imm2 = c[k].imm2;
		if (c[k].src2)
			op->src2 = JB_OPND(x);
		if (c[k].opcode == TPU_OP_SELECT && !c[k].bcast)
			op->src1 = JB_OPND(x);
		if (c[k].opcode == TPU_OP_SELECT && c[k].bcast2 < 3)
			op->src2 = JB_OPND(x);
		EXPECT_EQ(TPU_JOB_ERR_DESCRIPTOR, vt_finish(&v, b, 0)) TH_LOG("case %zu", k);
		EXPECT_NE(NULL, strstr(v.res.message, c[k].want))
			TH_LOG("case %zu: %s", k, v.res.message);
		tdev_free(v.d);
	}
}

TEST_HARNESS_MAIN
