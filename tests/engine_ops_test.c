// SPDX-License-Identifier: MIT
/*
 * Host test: elementwise micro-ops (every unary and binary function, every
 * broadcast), integer arithmetic wrapping in dst's width (XLA's), casts
 * with rounding to nearest even and saturation, and input fusion (an op on
 * an input block before the dot).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"

enum { R = 13, C = 37, BR = 8, BC = 16 };	/* edge blocks on both dims */

struct ew {
	struct tdev *d;
	unsigned int a, b, row, col, s, z;
	float *av, *bv, *rowv, *colv;
};

static void ew_setup(struct ew *e)
{
	e->d = tdev_new(1 << 20, 2);
	e->a = tdev_alloc(e->d, R * C * 4);
	e->b = tdev_alloc(e->d, R * C * 4);
	e->row = tdev_alloc(e->d, C * 4);
	e->col = tdev_alloc(e->d, R * 4);
	e->s = tdev_alloc(e->d, 3 * 4);
	e->z = tdev_alloc(e->d, R * C * 4);
	e->av = tdev_ptr(e->d, e->a);
	e->bv = tdev_ptr(e->d, e->b);
	e->rowv = tdev_ptr(e->d, e->row);
	e->colv = tdev_ptr(e->d, e->col);
	ref_fill(e->av, TPU_DTYPE_F32, R * C, 1, 1, 0);
	ref_fill(e->bv, TPU_DTYPE_F32, R * C, 2, 1, 0);
	ref_fill(e->rowv, TPU_DTYPE_F32, C, 3, 1, 0);
	ref_fill(e->colv, TPU_DTYPE_F32, R, 4, 1, 0);
	memcpy(tdev_ptr(e->d, e->s), (int32_t[3]){ 5, -7, 11 }, 12);
}

/* z = op(a, b') over a (2, 3) grid, z of @zt; returns the engine's code. */
static int ew_run(struct ew *e, unsigned int opcode, unsigned int fn,
		  unsigned int bcast, unsigned int zt)
{
	uint64_t full[2] = { R, C }, rs[2] = { 1, C }, cs[2] = { R, 1 }, ss[1] = { 3 };
	uint32_t blk[2] = { BR, BC }, rb[2] = { 1, BC }, cb[2] = { BR, 1 };
	uint32_t grid[2] = { (R + BR - 1) / BR, (C + BC - 1) / BC };
	struct jb *b = jb_new();
	struct tpu_job_result res;
	struct tpu_job_op *op;
	unsigned int a, src1 = 0, z;
	size_t len;
	void *blob;
	int ret;

	jb_grid(b, 2, grid, "pp");
	jb_operand(b, TPU_ROLE_SCALAR_PREFETCH, e->s, TPU_DTYPE_INT32, 1, ss, NULL, NULL);
	a = jb_operand(b, TPU_ROLE_INPUT, e->a, TPU_DTYPE_F32, 2, full, blk, "pid0 pid1");
	if (bcast == TPU_BCAST_NONE)
		src1 = jb_operand(b, TPU_ROLE_INPUT, e->b, TPU_DTYPE_F32, 2, full, blk,
				  "pid0 pid1");
	else if (bcast == TPU_BCAST_ROW)
		src1 = jb_operand(b, TPU_ROLE_INPUT, e->row, TPU_DTYPE_F32, 2, rs, rb,
				  "0 pid1");
	else if (bcast == TPU_BCAST_COL)
		src1 = jb_operand(b, TPU_ROLE_INPUT, e->col, TPU_DTYPE_F32, 2, cs, cb,
				  "pid0 0");
	z = jb_operand(b, TPU_ROLE_OUTPUT, e->z, zt, 2, full, blk, "pid0 pid1");
	if (opcode == TPU_OP_UNARY) {
		jb_unary(b, fn, JB_OPND(z), JB_OPND(a), NULL);
	} else {
		op = jb_binary(b, fn, bcast, JB_OPND(z), JB_OPND(a),
			       bcast == TPU_BCAST_IMM || bcast == TPU_BCAST_SCALAR ? JB_NONE :
			       JB_OPND(bcast == TPU_BCAST_SMEM ? 0 : src1), NULL);
		if (bcast == TPU_BCAST_SMEM)
			op->scalar_index = jb_prog(b, "1");
		if (bcast == TPU_BCAST_SCALAR)
			op->scalar_index = jb_prog(b, "nprog1 nprog0 -");	/* 3 - 2 */
		if (bcast == TPU_BCAST_IMM) {
			float imm = 0.375f;

			memcpy(&op->imm, &imm, 4);
		}
	}
	blob = jb_finish(b, &len);
	ret = tdev_run(e->d, blob, len, 0, &res);
	free(blob);
	jb_free(b);
	return ret;
}

static double operand_b(const struct ew *e, unsigned int bcast, int i, int j)
{
	switch (bcast) {
	case TPU_BCAST_NONE:	return e->bv[i * C + j];
	case TPU_BCAST_ROW:	return e->rowv[j];
	case TPU_BCAST_COL:	return e->colv[i];
	case TPU_BCAST_SMEM:	return -7;
	case TPU_BCAST_SCALAR:	return 1;
	default:		return 0.375;
	}
}

/* The same float, NaN matching NaN. */
static bool same_f(float a, float b)
{
	return a == b || (a != a && b != b);
}

/*
 * The engine's result for a unary function into f32: the double
 * reference rounded once, except exp, whose vector kernel is within the
 * 1.001 ulp doc/numerics.md promises.
 */
static bool unary_ok(unsigned int fn, float got, double want)
{
	float w = (float)want;

	if (same_f(got, w))
		return true;
	if (fn != TPU_UNARY_EXP || !isfinite(w))
		return false;
	return fabs(got - want) <= 1.001 * (nextafterf(fabsf(w), INFINITY) - fabsf(w));
}

TEST(every_unary_function)
{
	struct ew e;

	ew_setup(&e);
	for (unsigned int fn = 0; fn < TPU_UNARY_POPCNT; fn++) {
		const float *z = tdev_ptr(e.d, e.z);
		int bad = 0;

		ASSERT_EQ(0, ew_run(&e, TPU_OP_UNARY, fn, 0, TPU_DTYPE_F32));
		for (int i = 0; i < R * C; i++)
			bad += !unary_ok(fn, z[i], ref_unary(fn, e.av[i]));
		EXPECT_EQ(0, bad) TH_LOG("unary %u", fn);
	}
	tdev_free(e.d);
}

/* Bitwise functions and shifts on int32 (dst's width), as XLA's. */
static int64_t ref_bitwise(unsigned int fn, int32_t a, int32_t b)
{
	uint32_t u = (uint32_t)a;

	switch (fn) {
	case TPU_BINARY_BITAND:	return a & b;
	case TPU_BINARY_BITOR:	return a | b;
	case TPU_BINARY_BITXOR:	return a ^ b;
	case TPU_BINARY_SHL:	return b < 0 || b > 31 ? 0 : (int32_t)(u << b);
	case TPU_BINARY_SHR_LOGICAL:
		return b < 0 || b > 31 ? 0 : (int32_t)(u >> b);
	default:		return b < 0 || b > 31 ? (a < 0 ? -1 : 0) : a >> b;
	}
}

TEST(bitwise_functions_of_int32_and_an_immediate)
{
	enum { N = 8, M = 128 };
	uint64_t shape[2] = { N, M };
	uint32_t grid[1] = { 1 }, blk[2] = { N, M };
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int xs = tdev_alloc(d, N * M * 4), ys = tdev_alloc(d, N * M * 4);
	unsigned int zs = tdev_alloc(d, N * M * 4);
	int32_t *x = tdev_ptr(d, xs), *y = tdev_ptr(d, ys), *z = tdev_ptr(d, zs);

	for (int i = 0; i < N * M; i++) {
		x[i] = (int32_t)(0x9E3779B9u * (uint32_t)(i + 1));
		y[i] = i % 41 - 4;	/* shift counts -4 to 36 */
	}
	for (unsigned int fn = TPU_BINARY_BITAND; fn < TPU_BINARY_COUNT; fn++)
		for (int imm = 0; imm < 2; imm++) {
			struct jb *b = jb_new();
			struct tpu_job_result res;
			struct tpu_job_op *op;
			unsigned int xo, yo, zo;
			float three = 3.0f;
			int bad = 0;
			size_t len;
			void *blob;

			jb_grid(b, 1, grid, "a");
			xo = jb_operand(b, TPU_ROLE_INPUT, xs, TPU_DTYPE_INT32, 2, shape, blk, "0 0");
			yo = jb_operand(b, TPU_ROLE_INPUT, ys, TPU_DTYPE_INT32, 2, shape, blk, "0 0");
			zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, TPU_DTYPE_INT32, 2, shape, blk, "0 0");
			op = jb_binary(b, fn, imm ? TPU_BCAST_IMM : TPU_BCAST_NONE, JB_OPND(zo),
				       JB_OPND(xo), imm ? JB_NONE : JB_OPND(yo), NULL);
			if (imm)
				memcpy(&op->imm, &three, 4);
			blob = jb_finish(b, &len);
			ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
			for (int i = 0; i < N * M; i++)
				bad += z[i] != ref_bitwise(fn, x[i], imm ? 3 : y[i]);
			EXPECT_EQ(0, bad) TH_LOG("fn %u, %s", fn, imm ? "immediate 3" : "array");
			free(blob);
			jb_free(b);
		}
	tdev_free(d);
}

/* lax.population_count and lax.clz on src0's width: int32, and int8 into int32. */
TEST(bit_counts_of_int32_and_int8)
{
	enum { N = 8, M = 128 };
	uint64_t shape[2] = { N, M };
	uint32_t grid[1] = { 1 }, blk[2] = { N, M };
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int xs = tdev_alloc(d, N * M * 4), bs = tdev_alloc(d, N * M);
	unsigned int zs = tdev_alloc(d, N * M * 4);
	int32_t *x = tdev_ptr(d, xs), *z = tdev_ptr(d, zs);
	int8_t *x8 = tdev_ptr(d, bs);

	for (int i = 0; i < N * M; i++) {
		x[i] = i < 4 ? (int32_t[]){ 0, -1, 1, INT32_MIN }[i] :
			       (int32_t)(0x9E3779B9u * (uint32_t)i) >> (i % 31);
		x8[i] = (int8_t)(i * 37);
	}
	for (unsigned int fn = TPU_UNARY_POPCNT; fn <= TPU_UNARY_CLZ; fn++)
		for (int narrow = 0; narrow < 2; narrow++) {
			struct jb *b = jb_new();
			struct tpu_job_result res;
			unsigned int xo, zo;
			int bad = 0;
			size_t len;
			void *blob;

			jb_grid(b, 1, grid, "a");
			xo = jb_operand(b, TPU_ROLE_INPUT, narrow ? bs : xs,
					narrow ? TPU_DTYPE_INT8 : TPU_DTYPE_INT32, 2, shape, blk, "0 0");
			zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, TPU_DTYPE_INT32, 2, shape, blk, "0 0");
			jb_unary(b, fn, JB_OPND(zo), JB_OPND(xo), NULL);
			blob = jb_finish(b, &len);
			ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
			for (int i = 0; i < N * M; i++) {
				uint32_t u = narrow ? (uint8_t)x8[i] : (uint32_t)x[i];
				int w = narrow ? 8 : 32, want = 0;

				for (int k = 0; k < w; k++)
					want += fn == TPU_UNARY_POPCNT ? (u >> k) & 1 : 0;
				if (fn == TPU_UNARY_CLZ)
					while (want < w && !((u >> (w - 1 - want)) & 1))
						want++;
				bad += z[i] != want;
			}
			EXPECT_EQ(0, bad) TH_LOG("fn %u, %s", fn, narrow ? "int8" : "int32");
			free(blob);
			jb_free(b);
		}
	tdev_free(d);
}

/* A bit count of floats is refused by the op checks. */
TEST(bit_counts_refuse_floats)
{
	uint64_t shape[2] = { 8, 128 };
	uint32_t grid[1] = { 1 }, blk[2] = { 8, 128 };
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int xs = tdev_alloc(d, 8 * 128 * 4), zs = tdev_alloc(d, 8 * 128 * 4);
	struct jb *b = jb_new();
	struct tpu_job_result res;
	unsigned int xo, zo;
	size_t len;
	void *blob;

	jb_grid(b, 1, grid, "a");
	xo = jb_operand(b, TPU_ROLE_INPUT, xs, TPU_DTYPE_F32, 2, shape, blk, "0 0");
	zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, TPU_DTYPE_INT32, 2, shape, blk, "0 0");
	jb_unary(b, TPU_UNARY_POPCNT, JB_OPND(zo), JB_OPND(xo), NULL);
	blob = jb_finish(b, &len);
	EXPECT_NE(0, tdev_run(d, blob, len, 0, &res));
	EXPECT_NE(NULL, strstr(res.message, "bit count fn 25 takes integer types"));
	free(blob);
	jb_free(b);
	tdev_free(d);
}

/* --- uint32, as XLA's u32 --- */

enum { UN = 8, UM = 128 };

/* Edge values first, then hashed bit patterns of every magnitude. */
static uint32_t u32_value(int i, uint32_t seed)
{
	static const uint32_t edge[] = {
		0, 1, 2, 3, 31, 32, 33, 0x7fffffffu, 0x80000000u, 0x80000001u,
		0xfffffffeu, 0xffffffffu, 0x10000u, 0xffffu, 0x9e3779b9u,
	};
	uint32_t h = (uint32_t)(i + 1) * 0x9e3779b9u ^ seed;

	h ^= h >> 15;
	h *= 0x2c1b3c6du;
	if (i < (int)(sizeof(edge) / sizeof(edge[0])))
		return edge[(i + seed) % (sizeof(edge) / sizeof(edge[0]))];
	return h >> (h % 29);	/* small ones too */
}

/* XLA's u32 semantics, written out on uint32_t. */
static uint32_t ref_u32_binary(unsigned int fn, uint32_t a, uint32_t b)
{
	switch (fn) {
	case TPU_BINARY_ADD:	return a + b;
	case TPU_BINARY_SUB:	return a - b;
	case TPU_BINARY_MUL:	return a * b;
	case TPU_BINARY_MAX:	return a > b ? a : b;
	case TPU_BINARY_MIN:	return a < b ? a : b;
	case TPU_BINARY_DIV:	return b ? a / b : UINT32_MAX;
	case TPU_BINARY_MOD:	return b ? a % b : a;
	case TPU_BINARY_EQ:	return a == b;
	case TPU_BINARY_NE:	return a != b;
	case TPU_BINARY_LT:	return a < b;
	case TPU_BINARY_LE:	return a <= b;
	case TPU_BINARY_GT:	return a > b;
	case TPU_BINARY_GE:	return a >= b;
	case TPU_BINARY_AND:	return a && b;
	case TPU_BINARY_OR:	return a || b;
	case TPU_BINARY_BITAND:	return a & b;
	case TPU_BINARY_BITOR:	return a | b;
	case TPU_BINARY_BITXOR:	return a ^ b;
	case TPU_BINARY_SHL:	return b >= 32 ? 0 : a << b;
	case TPU_BINARY_SHR_LOGICAL:
		return b >= 32 ? 0 : a >> b;
	default:		/* SHR: the top bit copied in */
		if (b >= 32)
			return a >> 31 ? UINT32_MAX : 0;
		return a >> 31 ? ~(~a >> b) : a >> b;
	}
}

static bool is_compare(unsigned int fn)
{
	return fn >= TPU_BINARY_EQ && fn <= TPU_BINARY_OR;
}

/* z = fn(x, y) of uint32 x and y (y an array, or the immediate 3 or 40). */
TEST(uint32_binary_functions_wrap_and_compare_unsigned)
{
	uint64_t shape[2] = { UN, UM };
	uint32_t grid[1] = { 1 }, blk[2] = { UN, UM };
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int xs = tdev_alloc(d, UN * UM * 4), ys = tdev_alloc(d, UN * UM * 4);
	unsigned int zs = tdev_alloc(d, UN * UM * 4);
	uint32_t *x = tdev_ptr(d, xs), *y = tdev_ptr(d, ys), *z = tdev_ptr(d, zs);
	uint8_t *zb = tdev_ptr(d, zs);

	for (int i = 0; i < UN * UM; i++) {
		x[i] = u32_value(i, 0);
		/* y: every edge against x's, zeros, shift counts up to 40 */
		y[i] = i % 7 == 0 ? 0 : i % 7 == 1 ? (uint32_t)(i % 41) :
		       u32_value(i / 15 + (i % 15) * 7, 5);
	}
	for (unsigned int fn = 0; fn < TPU_BINARY_COUNT; fn++)
		for (int imm = 0; imm < 3; imm++) {
			unsigned int zt = is_compare(fn) ? TPU_DTYPE_BOOL :
					  TPU_DTYPE_UINT32;
			float k = imm == 1 ? 3.0f : 40.0f;
			struct jb *b = jb_new();
			struct tpu_job_result res;
			struct tpu_job_op *op;
			unsigned int xo, yo, zo;
			int bad = 0;
			size_t len;
			void *blob;

			if (fn == TPU_BINARY_POW)
				continue;
			jb_grid(b, 1, grid, "a");
			xo = jb_operand(b, TPU_ROLE_INPUT, xs, TPU_DTYPE_UINT32, 2, shape, blk, "0 0");
			yo = jb_operand(b, TPU_ROLE_INPUT, ys, TPU_DTYPE_UINT32, 2, shape, blk, "0 0");
			zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, zt, 2, shape, blk, "0 0");
			op = jb_binary(b, fn, imm ? TPU_BCAST_IMM : TPU_BCAST_NONE, JB_OPND(zo),
				       JB_OPND(xo), imm ? JB_NONE : JB_OPND(yo), NULL);
			if (imm)
				memcpy(&op->imm, &k, 4);
			blob = jb_finish(b, &len);
			ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res))
				TH_LOG("fn %u: %s", fn, res.message);
			for (int i = 0; i < UN * UM; i++) {
				uint32_t want = ref_u32_binary(fn, x[i], imm ? (uint32_t)k : y[i]);
				uint32_t got = zt == TPU_DTYPE_BOOL ? zb[i] : z[i];

				if (got != want && bad++ < 3)
					TH_LOG("fn %u: %#x, %#x gives %#x, want %#x", fn,
					       x[i], imm ? (uint32_t)k : y[i], got, want);
			}
			EXPECT_EQ(0, bad) TH_LOG("fn %u, %s", fn, imm ? "immediate" : "array");
			free(blob);
			jb_free(b);
		}
	tdev_free(d);
}

static uint32_t ref_u32_unary(unsigned int fn, uint32_t a)
{
	int n = 0;

	switch (fn) {
	case TPU_UNARY_IDENTITY: case TPU_UNARY_ABS: case TPU_UNARY_RELU:
		return a;
	case TPU_UNARY_NEG:	return 0u - a;
	case TPU_UNARY_SQUARE:	return a * a;
	case TPU_UNARY_SIGN:	return a != 0;
	case TPU_UNARY_NOT:	return a == 0;
	case TPU_UNARY_POPCNT:
		for (int k = 0; k < 32; k++)
			n += (a >> k) & 1;
		return (uint32_t)n;
	default:		/* CLZ */
		while (n < 32 && !((a >> (31 - n)) & 1))
			n++;
		return (uint32_t)n;
	}
}

TEST(uint32_unary_functions_and_bit_counts)
{
	static const unsigned int fns[] = {
		TPU_UNARY_IDENTITY, TPU_UNARY_ABS, TPU_UNARY_RELU, TPU_UNARY_NEG,
		TPU_UNARY_SQUARE, TPU_UNARY_SIGN, TPU_UNARY_NOT, TPU_UNARY_POPCNT,
		TPU_UNARY_CLZ,
	};
	uint64_t shape[2] = { UN, UM };
	uint32_t grid[1] = { 1 }, blk[2] = { UN, UM };
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int xs = tdev_alloc(d, UN * UM * 4), zs = tdev_alloc(d, UN * UM * 4);
	uint32_t *x = tdev_ptr(d, xs), *z = tdev_ptr(d, zs);

	for (int i = 0; i < UN * UM; i++)
		x[i] = u32_value(i, 3);
	for (size_t f = 0; f < sizeof(fns) / sizeof(fns[0]); f++) {
		struct jb *b = jb_new();
		struct tpu_job_result res;
		unsigned int xo, zo;
		int bad = 0;
		size_t len;
		void *blob;

		jb_grid(b, 1, grid, "a");
		xo = jb_operand(b, TPU_ROLE_INPUT, xs, TPU_DTYPE_UINT32, 2, shape, blk, "0 0");
		zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, TPU_DTYPE_UINT32, 2, shape, blk, "0 0");
		jb_unary(b, fns[f], JB_OPND(zo), JB_OPND(xo), NULL);
		blob = jb_finish(b, &len);
		ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
		for (int i = 0; i < UN * UM; i++)
			if (z[i] != ref_u32_unary(fns[f], x[i]) && bad++ < 3)
				TH_LOG("fn %u of %#x: %#x, want %#x", fns[f], x[i], z[i],
				       ref_u32_unary(fns[f], x[i]));
		EXPECT_EQ(0, bad) TH_LOG("fn %u", fns[f]);
		free(blob);
		jb_free(b);
	}
	tdev_free(d);
}

/* sum wraps modulo 2^32; max, min and argmax order unsigned; edge blocks. */
TEST(uint32_reductions_wrap_and_order_unsigned)
{
	enum { RR = 13, RC = 37, RBR = 16, RBC = 40 };
	uint64_t shape[2] = { RR, RC }, rs[2] = { RR, 1 }, cs[2] = { 1, RC };
	uint32_t grid[1] = { 1 }, blk[2] = { RBR, RBC }, rb[2] = { RBR, 1 };
	uint32_t cb[2] = { 1, RBC };
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int xs = tdev_alloc(d, RR * RC * 4), zs = tdev_alloc(d, RR * RC * 4);
	uint32_t *x = tdev_ptr(d, xs), *z = tdev_ptr(d, zs);

	for (int i = 0; i < RR * RC; i++)
		x[i] = u32_value(i, 9) | (i % 3 ? 0x80000000u : 0);	/* sums overflow */
	for (unsigned int fn = 0; fn < TPU_REDUCE_COUNT; fn++)
		for (unsigned int axis = 0; axis < 2; axis++) {
			unsigned int zt = fn >= TPU_REDUCE_ARGMAX ? TPU_DTYPE_INT32 :
					  TPU_DTYPE_UINT32;
			int n = axis ? RR : RC, m = axis ? RC : RR, bad = 0;
			struct jb *b = jb_new();
			struct tpu_job_result res;
			struct tpu_job_op *op;
			unsigned int xo, zo;
			size_t len;
			void *blob;

			jb_grid(b, 1, grid, "a");
			xo = jb_operand(b, TPU_ROLE_INPUT, xs, TPU_DTYPE_UINT32, 2, shape, blk, "0 0");
			zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, zt, 2, axis ? rs : cs,
					axis ? rb : cb, "0 0");
			op = jb_unary(b, 0, JB_OPND(zo), JB_OPND(xo), NULL);
			op->opcode = TPU_OP_REDUCE;
			op->fn = (uint8_t)fn;
			op->axis = (uint8_t)axis;
			blob = jb_finish(b, &len);
			ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
			for (int o = 0; o < n; o++) {
				uint32_t acc = fn == TPU_REDUCE_MIN ? UINT32_MAX : 0;
				uint32_t at = 0, best = 0;

				for (int k = 0; k < m; k++) {
					uint32_t v = axis ? x[o * RC + k] : x[k * RC + o];

					if (fn == TPU_REDUCE_SUM)
						acc += v;
					else if (fn == TPU_REDUCE_MAX)
						acc = v > acc ? v : acc;
					else if (fn == TPU_REDUCE_MIN)
						acc = v < acc ? v : acc;
					else if (!k || (fn == TPU_REDUCE_ARGMAX ? v > best : v < best))
						best = v, at = (uint32_t)k;
				}
				if (fn >= TPU_REDUCE_ARGMAX)
					acc = at;
				if (z[o] != acc && bad++ < 3)
					TH_LOG("fn %u axis %u [%d]: %#x, want %#x", fn, axis,
					       o, z[o], acc);
			}
			EXPECT_EQ(0, bad) TH_LOG("fn %u axis %u", fn, axis);
			free(blob);
			jb_free(b);
		}
	tdev_free(d);
}

/* where() of uint32 keeps the bits; prng_random_bits fills a uint32 dst. */
TEST(uint32_select_and_random_bits)
{
	uint64_t shape[2] = { UN, UM };
	uint32_t grid[1] = { 1 }, blk[2] = { UN, UM };
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int ms = tdev_alloc(d, UN * UM), xs = tdev_alloc(d, UN * UM * 4);
	unsigned int ys = tdev_alloc(d, UN * UM * 4), zs = tdev_alloc(d, UN * UM * 4);
	unsigned int ps = tdev_alloc(d, UN * UM * 4);
	uint8_t *m = tdev_ptr(d, ms);
	uint32_t *x = tdev_ptr(d, xs), *y = tdev_ptr(d, ys), *z = tdev_ptr(d, zs);
	uint32_t *p = tdev_ptr(d, ps);
	struct tpu_job_result res;
	struct jb *b = jb_new();
	struct tpu_job_op *op;
	unsigned int mo, xo, yo, zo, po;
	int bad = 0, high = 0;
	size_t len;
	void *blob;

	for (int i = 0; i < UN * UM; i++) {
		m[i] = (uint8_t)(i % 3 == 0);
		x[i] = u32_value(i, 1);
		y[i] = u32_value(i, 2);
	}
	jb_grid(b, 1, grid, "a");
	mo = jb_operand(b, TPU_ROLE_INPUT, ms, TPU_DTYPE_BOOL, 2, shape, blk, "0 0");
	xo = jb_operand(b, TPU_ROLE_INPUT, xs, TPU_DTYPE_UINT32, 2, shape, blk, "0 0");
	yo = jb_operand(b, TPU_ROLE_INPUT, ys, TPU_DTYPE_UINT32, 2, shape, blk, "0 0");
	zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, TPU_DTYPE_UINT32, 2, shape, blk, "0 0");
	po = jb_operand(b, TPU_ROLE_OUTPUT, ps, TPU_DTYPE_UINT32, 2, shape, blk, "0 0");
	op = jb_binary(b, 0, TPU_BCAST_NONE, JB_OPND(zo), JB_OPND(mo), JB_OPND(xo), NULL);
	op->opcode = TPU_OP_SELECT;
	op->src2 = JB_OPND(yo);
	op = jb_zero(b, JB_OPND(po), NULL);
	op->opcode = TPU_OP_PRNG_BITS;
	blob = jb_finish(b, &len);
	ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
	for (int i = 0; i < UN * UM; i++) {
		bad += z[i] != (m[i] ? x[i] : y[i]);
		high += p[i] >> 31;
	}
	EXPECT_EQ(0, bad);
	/* 32 random bits an element: about half have the top bit */
	EXPECT_GT(high, UN * UM / 3);
	EXPECT_LT(high, UN * UM * 2 / 3);
	free(blob);
	jb_free(b);
	tdev_free(d);
}

/* What uint32 may not do, refused by name (uint32 SMEM is allowed). */
TEST(uint32_refusals_name_the_dtype)
{
	uint64_t shape[2] = { 8, 128 }, ss[1] = { 4 };
	uint32_t grid[1] = { 1 }, blk[2] = { 8, 128 };
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int xs = tdev_alloc(d, 8 * 128 * 4), zs = tdev_alloc(d, 8 * 128 * 4);
	static const char *const want[] = {
		"dot of dtypes uint32 x uint32",
		"operand 0: dtype uint32, scalar prefetch must be int32 or float32",
		"prng_random_bits dst operand 1 is float32, must be int32 or uint32",
	};

	for (int t = 0; t < 3; t++) {
		struct jb *b = jb_new();
		struct tpu_job_result res;
		struct tpu_job_op *op;
		unsigned int xo, zo;
		size_t len;
		void *blob;

		jb_grid(b, 1, grid, "a");
		if (t == 1)
			jb_operand(b, TPU_ROLE_SCALAR_PREFETCH, xs, TPU_DTYPE_UINT32, 1, ss,
				   NULL, NULL);
		xo = jb_operand(b, TPU_ROLE_INPUT, xs, TPU_DTYPE_UINT32, 2, shape, blk, "0 0");
		zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, t == 2 ? TPU_DTYPE_F32 :
				TPU_DTYPE_UINT32, 2, shape, blk, "0 0");
		if (t == 0) {
			jb_dot(b, JB_OPND(zo), JB_OPND(xo), JB_OPND(xo),
			       TPU_DOT_RHS_CONTRACT_1, NULL);
		} else if (t == 2) {
			op = jb_zero(b, JB_OPND(zo), NULL);
			op->opcode = TPU_OP_PRNG_BITS;
		} else {
			jb_zero(b, JB_OPND(zo), NULL);
		}
		blob = jb_finish(b, &len);
		EXPECT_NE(0, tdev_run(d, blob, len, 0, &res));
		EXPECT_NE(NULL, strstr(res.message, want[t]))
			TH_LOG("case %d: %s", t, res.message);
		free(blob);
		jb_free(b);
	}
	tdev_free(d);
}

/* --- int8, uint8 and int32 wrap around in dst's width, as XLA's --- */

enum { WN = 8, WM = 64 };

/* @v's low bits as a value of @dtype: two's complement, as XLA's convert. */
static int64_t wrap_dt(uint64_t v, unsigned int dtype)
{
	switch (dtype) {
	case TPU_DTYPE_INT8:	return (int8_t)(uint8_t)v;
	case TPU_DTYPE_UINT8:	return (uint8_t)v;
	default:		return (int32_t)(uint32_t)v;	/* INT32 */
	}
}

static int64_t int_get(const void *p, unsigned int dtype, int i)
{
	switch (dtype) {
	case TPU_DTYPE_INT8:	return ((const int8_t *)p)[i];
	case TPU_DTYPE_UINT8:	return ((const uint8_t *)p)[i];
	default:		return ((const int32_t *)p)[i];
	}
}

static void int_set(void *p, unsigned int dtype, int i, int64_t v)
{
	if (dtype == TPU_DTYPE_INT32)
		((uint32_t *)p)[i] = (uint32_t)v;
	else
		((uint8_t *)p)[i] = (uint8_t)v;
}

/* The edges of each width first (wrapped into @dtype), then hashed bits. */
static int64_t int_value(int i, uint32_t seed, unsigned int dtype)
{
	static const int64_t edge[] = {
		0, 1, -1, 2, 3, -2, 100, 127, -128, 128, 255, -127, 46341, -46341,
		65535, INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1,
		0x9e3779b1, 0x7f4a7c15,
	};
	enum { NE = sizeof(edge) / sizeof(edge[0]) };
	uint32_t h = (uint32_t)(i + 1) * 0x9e3779b9u ^ seed;

	h ^= h >> 15;
	h *= 0x2c1b3c6du;
	h ^= h >> 13;
	return wrap_dt(i < 2 * NE ? (uint64_t)edge[(i + seed) % NE] : h, dtype);
}

/* Python's floor division and modulo of exact values. */
static __int128 floor_div128(__int128 a, __int128 b)
{
	__int128 q = a / b;

	return q * b != a && (a < 0) != (b < 0) ? q - 1 : q;
}

/* XLA's result: the exact value wrapped into @zt (pow by n multiplies). */
static int64_t ref_int_binary(unsigned int fn, int64_t a, int64_t b,
			      unsigned int zt)
{
	uint64_t p = 1;

	switch (fn) {
	case TPU_BINARY_ADD:	return wrap_dt((uint64_t)((__int128)a + b), zt);
	case TPU_BINARY_SUB:	return wrap_dt((uint64_t)((__int128)a - b), zt);
	case TPU_BINARY_MUL:	return wrap_dt((uint64_t)((__int128)a * b), zt);
	case TPU_BINARY_DIV:	return wrap_dt((uint64_t)floor_div128(a, b), zt);
	case TPU_BINARY_MOD:
		return wrap_dt((uint64_t)(a - floor_div128(a, b) * b), zt);
	case TPU_BINARY_MAX:	return wrap_dt((uint64_t)(a > b ? a : b), zt);
	case TPU_BINARY_MIN:	return wrap_dt((uint64_t)(a < b ? a : b), zt);
	default:		/* POW */
		if (b < 0)	/* the exact value truncated toward zero */
			return wrap_dt(a == 1 ? 1 : a == -1 ? (b & 1 ? -1ull : 1) : 0, zt);
		for (int64_t k = 0; k < b; k++)
			p *= (uint64_t)a;
		return wrap_dt(p, zt);
	}
}

/* The (src, dst) dtypes: same width, widened, narrowed. */
static const unsigned int int_pairs[][2] = {
	{ TPU_DTYPE_INT8, TPU_DTYPE_INT8 }, { TPU_DTYPE_UINT8, TPU_DTYPE_UINT8 },
	{ TPU_DTYPE_INT32, TPU_DTYPE_INT32 }, { TPU_DTYPE_INT8, TPU_DTYPE_INT32 },
	{ TPU_DTYPE_INT32, TPU_DTYPE_INT8 }, { TPU_DTYPE_INT32, TPU_DTYPE_UINT8 },
};

enum { Y_ARRAY, Y_IMM, Y_SCALAR, Y_KINDS };

/*
 * z = fn(x, y): y an array, the immediate -3 (253 for uint8), or a
 * scalar-core value 2^32 + 5 (64 bits: add and mul see it modulo dst's
 * width, div, mod, max and min its whole value).
 */
static int int_binary_run(struct __test_metadata *_metadata, struct tdev *d,
			  unsigned int fn, unsigned int xt, unsigned int zt,
			  int ykind, unsigned int xs, unsigned int ys,
			  unsigned int zs)
{
	uint64_t shape[2] = { WN, WM };
	uint32_t grid[1] = { 1 }, blk[2] = { WN, WM };
	const void *x = tdev_ptr(d, xs), *y = tdev_ptr(d, ys), *z = tdev_ptr(d, zs);
	float k = xt == TPU_DTYPE_UINT8 ? 253.0f : -3.0f;
	struct jb *b = jb_new();
	struct tpu_job_result res;
	struct tpu_job_op *op;
	unsigned int xo, yo, zo;
	int bad = 0;
	size_t len;
	void *blob;

	jb_grid(b, 1, grid, "a");
	xo = jb_operand(b, TPU_ROLE_INPUT, xs, xt, 2, shape, blk, "0 0");
	yo = jb_operand(b, TPU_ROLE_INPUT, ys, xt, 2, shape, blk, "0 0");
	zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, zt, 2, shape, blk, "0 0");
	op = jb_binary(b, fn, ykind == Y_ARRAY ? TPU_BCAST_NONE :
		       ykind == Y_IMM ? TPU_BCAST_IMM : TPU_BCAST_SCALAR,
		       JB_OPND(zo), JB_OPND(xo), ykind ? JB_NONE : JB_OPND(yo), NULL);
	if (ykind == Y_IMM)
		memcpy(&op->imm, &k, 4);
	if (ykind == Y_SCALAR)
		op->scalar_index = jb_prog(b, "65536 65536 * 5 +");
	blob = jb_finish(b, &len);
	EXPECT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
	for (int i = 0; i < WN * WM; i++) {
		int64_t a = int_get(x, xt, i);
		int64_t bv = ykind == Y_ARRAY ? int_get(y, xt, i) :
			     ykind == Y_IMM ? (int64_t)k : (1ll << 32) + 5;
		int64_t want = ref_int_binary(fn, a, bv, zt);

		if (int_get(z, zt, i) != want && bad++ < 3)
			TH_LOG("fn %u (%u -> %u, y %d): %lld, %lld gives %lld, want %lld",
			       fn, xt, zt, ykind, (long long)a, (long long)bv,
			       (long long)int_get(z, zt, i), (long long)want);
	}
	free(blob);
	jb_free(b);
	return bad;
}

TEST(int_binary_functions_wrap_in_the_dst_width)
{
	static const unsigned int fns[] = {
		TPU_BINARY_ADD, TPU_BINARY_SUB, TPU_BINARY_MUL, TPU_BINARY_POW,
		TPU_BINARY_DIV, TPU_BINARY_MOD, TPU_BINARY_MAX, TPU_BINARY_MIN,
	};
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int xs = tdev_alloc(d, WN * WM * 4), ys = tdev_alloc(d, WN * WM * 4);
	unsigned int zs = tdev_alloc(d, WN * WM * 4);

	for (size_t p = 0; p < sizeof(int_pairs) / sizeof(int_pairs[0]); p++) {
		unsigned int xt = int_pairs[p][0], zt = int_pairs[p][1];

		for (size_t f = 0; f < sizeof(fns) / sizeof(fns[0]); f++) {
			unsigned int fn = fns[f];

			for (int i = 0; i < WN * WM; i++) {
				int64_t v = int_value(i / 3 + (i % 3) * 97, 7, xt);

				int_set(tdev_ptr(d, xs), xt, i, int_value(i, 0, xt));
				/* exponents -4..40 (0..40 unsigned); no zero divisors */
				if (fn == TPU_BINARY_POW)
					v = xt == TPU_DTYPE_UINT8 ? i % 41 : i % 45 - 4;
				else if ((fn == TPU_BINARY_DIV || fn == TPU_BINARY_MOD) && !v)
					v = -1;
				int_set(tdev_ptr(d, ys), xt, i, wrap_dt((uint64_t)v, xt));
			}
			/* (the reference raises to a power by multiplying) */
			for (int yk = 0; yk < (fn == TPU_BINARY_POW ? Y_SCALAR : Y_KINDS); yk++)
				EXPECT_EQ(0, int_binary_run(_metadata, d, fn, xt, zt, yk,
							    xs, ys, zs));
		}
	}
	tdev_free(d);
}

/* An int32 dst of INT32_MIN // -1 is INT32_MIN and % is 0, as XLA's. */
TEST(int32_min_floor_divided_by_minus_one_wraps)
{
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int xs = tdev_alloc(d, WN * WM * 4), ys = tdev_alloc(d, WN * WM * 4);
	unsigned int zs = tdev_alloc(d, WN * WM * 4);
	int32_t *x = tdev_ptr(d, xs), *y = tdev_ptr(d, ys), *z = tdev_ptr(d, zs);

	for (int i = 0; i < WN * WM; i++) {
		x[i] = INT32_MIN;
		y[i] = -1;
	}
	EXPECT_EQ(0, int_binary_run(_metadata, d, TPU_BINARY_DIV, TPU_DTYPE_INT32,
				    TPU_DTYPE_INT32, Y_ARRAY, xs, ys, zs));
	EXPECT_EQ(INT32_MIN, z[0]);
	EXPECT_EQ(0, int_binary_run(_metadata, d, TPU_BINARY_MOD, TPU_DTYPE_INT32,
				    TPU_DTYPE_INT32, Y_ARRAY, xs, ys, zs));
	EXPECT_EQ(0, z[0]);
	tdev_free(d);
}

static int64_t ref_int_unary(unsigned int fn, int64_t a, unsigned int zt)
{
	switch (fn) {
	case TPU_UNARY_NEG:	return wrap_dt(0 - (uint64_t)a, zt);
	case TPU_UNARY_ABS:	return wrap_dt(a < 0 ? 0 - (uint64_t)a : (uint64_t)a, zt);
	case TPU_UNARY_SQUARE:	return wrap_dt((uint64_t)a * (uint64_t)a, zt);
	case TPU_UNARY_SIGN:	return a > 0 ? 1 : a < 0 ? wrap_dt((uint64_t)-1, zt) : 0;
	case TPU_UNARY_RELU:	return wrap_dt((uint64_t)(a > 0 ? a : 0), zt);
	default:		return wrap_dt((uint64_t)a, zt);	/* IDENTITY */
	}
}

/*
 * neg, abs, square wrap (abs(INT32_MIN) is INT32_MIN); every function
 * computes in the integers and its result wraps into a narrower dst.
 */
TEST(int_unary_functions_wrap_in_the_dst_width)
{
	static const unsigned int fns[] = {
		TPU_UNARY_NEG, TPU_UNARY_ABS, TPU_UNARY_SQUARE, TPU_UNARY_SIGN,
		TPU_UNARY_RELU, TPU_UNARY_IDENTITY, TPU_UNARY_FLOOR, TPU_UNARY_ROUND,
	};
	uint64_t shape[2] = { WN, WM };
	uint32_t grid[1] = { 1 }, blk[2] = { WN, WM };
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int xs = tdev_alloc(d, WN * WM * 4), zs = tdev_alloc(d, WN * WM * 4);
	const void *x = tdev_ptr(d, xs), *z = tdev_ptr(d, zs);

	for (size_t p = 0; p < sizeof(int_pairs) / sizeof(int_pairs[0]); p++)
		for (size_t f = 0; f < sizeof(fns) / sizeof(fns[0]); f++) {
			unsigned int xt = int_pairs[p][0], zt = int_pairs[p][1];
			struct jb *b = jb_new();
			struct tpu_job_result res;
			unsigned int xo, zo;
			int bad = 0;
			size_t len;
			void *blob;

			for (int i = 0; i < WN * WM; i++)
				int_set(tdev_ptr(d, xs), xt, i, int_value(i, 3, xt));
			jb_grid(b, 1, grid, "a");
			xo = jb_operand(b, TPU_ROLE_INPUT, xs, xt, 2, shape, blk, "0 0");
			zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, zt, 2, shape, blk, "0 0");
			jb_unary(b, fns[f], JB_OPND(zo), JB_OPND(xo), NULL);
			blob = jb_finish(b, &len);
			ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
			for (int i = 0; i < WN * WM; i++) {
				int64_t a = int_get(x, xt, i);
				int64_t want = ref_int_unary(fns[f], a, zt);

				if (int_get(z, zt, i) != want && bad++ < 3)
					TH_LOG("fn %u (%u -> %u) of %lld: %lld, want %lld",
					       fns[f], xt, zt, (long long)a,
					       (long long)int_get(z, zt, i), (long long)want);
			}
			EXPECT_EQ(0, bad) TH_LOG("fn %u, %u -> %u", fns[f], xt, zt);
			free(blob);
			jb_free(b);
		}
	tdev_free(d);
}

/* Sums over either axis wrap in dst's width (jnp.sum of int32 overflowing). */
TEST(int_sums_wrap_in_the_dst_width)
{
	enum { RR = 13, RC = 37, RBR = 16, RBC = 40 };
	uint64_t shape[2] = { RR, RC }, rs[2] = { RR, 1 }, cs[2] = { 1, RC };
	uint32_t grid[1] = { 1 }, blk[2] = { RBR, RBC }, rb[2] = { RBR, 1 };
	uint32_t cb[2] = { 1, RBC };
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int xs = tdev_alloc(d, RR * RC * 4), zs = tdev_alloc(d, RR * RC * 4);
	const void *x = tdev_ptr(d, xs), *z = tdev_ptr(d, zs);

	for (size_t p = 0; p < sizeof(int_pairs) / sizeof(int_pairs[0]); p++)
		for (unsigned int axis = 0; axis < 2; axis++) {
			unsigned int xt = int_pairs[p][0], zt = int_pairs[p][1];
			int n = axis ? RR : RC, m = axis ? RC : RR, bad = 0;
			struct jb *b = jb_new();
			struct tpu_job_result res;
			struct tpu_job_op *op;
			unsigned int xo, zo;
			size_t len;
			void *blob;

			/* big values of one sign, so that sums overflow every width */
			for (int i = 0; i < RR * RC; i++) {
				int64_t v = int_value(i, 9, xt);

				int_set(tdev_ptr(d, xs), xt, i, i % 4 ? (v < 0 ? -v : v) | 0x70 : v);
			}
			jb_grid(b, 1, grid, "a");
			xo = jb_operand(b, TPU_ROLE_INPUT, xs, xt, 2, shape, blk, "0 0");
			zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, zt, 2, axis ? rs : cs,
					axis ? rb : cb, "0 0");
			op = jb_unary(b, 0, JB_OPND(zo), JB_OPND(xo), NULL);
			op->opcode = TPU_OP_REDUCE;
			op->fn = TPU_REDUCE_SUM;
			op->axis = (uint8_t)axis;
			blob = jb_finish(b, &len);
			ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
			for (int o = 0; o < n; o++) {
				__int128 sum = 0;

				for (int k = 0; k < m; k++)
					sum += int_get(x, xt, axis ? o * RC + k : k * RC + o);
				if (int_get(z, zt, o) != wrap_dt((uint64_t)sum, zt) && bad++ < 3)
					TH_LOG("axis %u [%d] (%u -> %u): %lld, want %lld", axis, o,
					       xt, zt, (long long)int_get(z, zt, o),
					       (long long)wrap_dt((uint64_t)sum, zt));
			}
			EXPECT_EQ(0, bad) TH_LOG("axis %u, %u -> %u", axis, xt, zt);
			free(blob);
			jb_free(b);
		}
	tdev_free(d);
}

/* An iota's offset wraps: INT32_MAX - 10 + column 11 is INT32_MIN; int8 too. */
TEST(iota_offsets_wrap_in_the_dst_width)
{
	static const struct { unsigned int zt; const char *offset; int64_t base; } c[] = {
		{ TPU_DTYPE_INT32, "2147483647 10 -", INT32_MAX - 10 },
		{ TPU_DTYPE_INT8, "120", 120 },
		{ TPU_DTYPE_UINT8, "250", 250 },
	};
	uint64_t shape[2] = { WN, WM };
	uint32_t grid[1] = { 1 }, blk[2] = { WN, WM };
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int zs = tdev_alloc(d, WN * WM * 4);
	const void *z = tdev_ptr(d, zs);

	for (size_t t = 0; t < sizeof(c) / sizeof(c[0]); t++) {
		struct jb *b = jb_new();
		struct tpu_job_result res;
		struct tpu_job_op *op;
		unsigned int zo;
		int bad = 0;
		size_t len;
		void *blob;

		jb_grid(b, 1, grid, "a");
		zo = jb_operand(b, TPU_ROLE_OUTPUT, zs, c[t].zt, 2, shape, blk, "0 0");
		op = jb_unary(b, 0, JB_OPND(zo), JB_NONE, NULL);
		op->opcode = TPU_OP_IOTA;
		op->axis = 1;
		op->scalar_index = jb_prog(b, c[t].offset);
		blob = jb_finish(b, &len);
		ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
		for (int i = 0; i < WN * WM; i++)
			bad += int_get(z, c[t].zt, i) !=
			       wrap_dt((uint64_t)(c[t].base + i % WM), c[t].zt);
		EXPECT_EQ(0, bad) TH_LOG("dtype %u", c[t].zt);
		free(blob);
		jb_free(b);
	}
	tdev_free(d);
}

TEST(every_binary_function_and_broadcast)
{
	struct ew e;

	ew_setup(&e);
	for (unsigned int bc = 0; bc < TPU_BCAST_COUNT; bc++)
		for (unsigned int fn = 0; fn < TPU_BINARY_BITAND; fn++) {
			const float *z = tdev_ptr(e.d, e.z);
			int bad = 0;

			ASSERT_EQ(0, ew_run(&e, TPU_OP_BINARY, fn, bc, TPU_DTYPE_F32));
			for (int i = 0; i < R; i++)
				for (int j = 0; j < C; j++)
					bad += !same_f(z[i * C + j],
						       (float)ref_binary(fn, e.av[i * C + j],
									 operand_b(&e, bc, i, j)));
			EXPECT_EQ(0, bad) TH_LOG("binary %u bcast %u", fn, bc);
		}
	tdev_free(e.d);
}

/* The special values every function meets, both as a and as b. */
static const float specials[] = {
	0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -2.5f, 3.0f, INFINITY, -INFINITY, NAN,
	-NAN, 1e-45f, -1e-45f, 1.17549435e-38f, 3.40282347e38f, -3.40282347e38f,
	88.7f, -103.9f, 1e-7f, 100.0f, 1e4f, -1e4f, 0.1f, 7.0f, -7.0f,
};
#define NSPECIAL (sizeof(specials) / sizeof(specials[0]))

/*
 * Every unary function, and every binary function against every special
 * b (a scalar, and a whole block so the vector path's rows see it too), on
 * the special values: the double reference rounded once (exp within its
 * documented ulp), NaN where the reference is NaN. Edge blocks included.
 */
TEST(every_function_on_special_values)
{
	struct ew e;

	ew_setup(&e);
	for (int i = 0; i < R * C; i++)
		e.av[i] = specials[i % NSPECIAL];
	for (unsigned int fn = 0; fn < TPU_UNARY_POPCNT; fn++) {
		const float *z = tdev_ptr(e.d, e.z);
		int bad = 0;

		if (fn == TPU_UNARY_CLAMP)
			continue;	/* its bounds are imm and imm2: below */
		ASSERT_EQ(0, ew_run(&e, TPU_OP_UNARY, fn, 0, TPU_DTYPE_F32));
		for (int i = 0; i < R * C; i++)
			bad += !unary_ok(fn, z[i], ref_unary(fn, e.av[i]));
		EXPECT_EQ(0, bad) TH_LOG("unary %u", fn);
	}
	for (unsigned int k = 0; k < NSPECIAL; k++) {
		for (int i = 0; i < R * C; i++)
			e.bv[i] = specials[k];
		for (unsigned int fn = 0; fn < TPU_BINARY_BITAND; fn++) {
			const float *z = tdev_ptr(e.d, e.z);
			int bad = 0;

			ASSERT_EQ(0, ew_run(&e, TPU_OP_BINARY, fn, TPU_BCAST_NONE,
					    TPU_DTYPE_F32));
			for (int i = 0; i < R * C; i++)
				bad += !same_f(z[i], (float)ref_binary(fn, e.av[i],
									e.bv[i]));
			EXPECT_EQ(0, bad) TH_LOG("binary %u, b = %g", fn, specials[k]);
		}
	}
	tdev_free(e.d);
}

/* The f32 epilogue's fast path into bf16: the same bits as the double rows. */
TEST(f32_ops_into_bf16)
{
	static const unsigned int bcasts[] = {
		TPU_BCAST_NONE, TPU_BCAST_ROW, TPU_BCAST_SMEM, TPU_BCAST_IMM,
	};
	uint16_t want[R * C];
	struct ew e;

	ew_setup(&e);
	e.av[5] = NAN;			/* relu(NaN) and NaN + b stay NaN */
	e.av[6] = -0.0f;
	e.av[7] = INFINITY;
	ASSERT_EQ(0, ew_run(&e, TPU_OP_UNARY, TPU_UNARY_RELU, 0, TPU_DTYPE_BF16));
	for (int i = 0; i < R * C; i++)
		ref_set(want, TPU_DTYPE_BF16, i, ref_unary(TPU_UNARY_RELU, e.av[i]));
	EXPECT_EQ(0, memcmp(want, tdev_ptr(e.d, e.z), sizeof(want)));
	for (unsigned int k = 0; k < 4; k++) {
		for (unsigned int fn = 0; fn < TPU_BINARY_BITAND; fn++) {
			ASSERT_EQ(0, ew_run(&e, TPU_OP_BINARY, fn, bcasts[k],
					    TPU_DTYPE_BF16));
			for (int i = 0; i < R; i++)
				for (int j = 0; j < C; j++)
					ref_set(want, TPU_DTYPE_BF16, i * C + j,
						ref_binary(fn, e.av[i * C + j],
							   operand_b(&e, bcasts[k], i, j)));
			EXPECT_EQ(0, memcmp(want, tdev_ptr(e.d, e.z), sizeof(want)))
				TH_LOG("binary %u bcast %u", fn, bcasts[k]);
		}
	}
	tdev_free(e.d);
}

/*
 * Casts round to nearest even into bf16; into integers they truncate
 * toward zero (astype) and saturate; the results of arithmetic round to
 * nearest even.
 */
TEST(cast_rounds_bf16_truncates_ints_and_saturates)
{
	static const float in[] = {
		1.0f + 0x1p-8f,		/* bf16 tie: down to even 1.0 */
		1.0f + 3 * 0x1p-8f,	/* bf16 tie: up to even */
		1.0f + 0x1p-8f + 0x1p-20f, /* above the tie: up */
		2.5f, 3.5f, -2.5f, 300.0f, -300.0f, 127.5f, NAN,
	};
	struct ew e;
	uint16_t *hz;
	int8_t *iz;

	ew_setup(&e);
	for (int i = 0; i < R * C; i++)
		e.av[i] = in[i % 10];
	ASSERT_EQ(0, ew_run(&e, TPU_OP_UNARY, TPU_UNARY_IDENTITY, 0, TPU_DTYPE_BF16));
	hz = tdev_ptr(e.d, e.z);
	EXPECT_EQ(0x3f80, hz[0]);
	EXPECT_EQ(0x3f82, hz[1]);
	EXPECT_EQ(0x3f81, hz[2]);
	EXPECT_EQ(0x4020, hz[3]);
	EXPECT_TRUE(isnan(ref_from_bf16(hz[9])));
	ASSERT_EQ(0, ew_run(&e, TPU_OP_UNARY, TPU_UNARY_IDENTITY, 0, TPU_DTYPE_INT8));
	iz = tdev_ptr(e.d, e.z);
	EXPECT_EQ(2, iz[3]);
	EXPECT_EQ(3, iz[4]);
	EXPECT_EQ(-2, iz[5]);
	EXPECT_EQ(127, iz[6]);
	EXPECT_EQ(-128, iz[7]);
	EXPECT_EQ(127, iz[8]);
	EXPECT_EQ(0, iz[9]);
	/* x * 1.0 is arithmetic: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2 */
	ASSERT_EQ(0, ew_run(&e, TPU_OP_BINARY, TPU_BINARY_MUL, TPU_BCAST_SCALAR,
			    TPU_DTYPE_INT8));
	EXPECT_EQ(2, iz[3]);
	EXPECT_EQ(4, iz[4]);
	EXPECT_EQ(-2, iz[5]);
	EXPECT_EQ(0, iz[9]);
	tdev_free(e.d);
}

TEST(input_fusion_relu_before_the_dot)
{
	/* z = relu(x) @ y: relu into a VMEM scratch, then the dot from it */
	enum { M = 24, K = 40, N = 16, B = 8 };
	struct tdev *d = tdev_new(1 << 20, 2);
	uint64_t xs[2] = { M, K }, ys[2] = { K, N }, zs[2] = { M, N };
	uint32_t blk[2] = { B, B }, grid[3] = { M / B, N / B, K / B };
	unsigned int xsl = tdev_alloc(d, M * K * 4), ysl = tdev_alloc(d, K * N * 4);
	unsigned int zsl = tdev_alloc(d, M * N * 4);
	float *x = tdev_ptr(d, xsl), *y = tdev_ptr(d, ysl), *z = tdev_ptr(d, zsl);
	struct jb *b = jb_new();
	struct tpu_job_result res;
	unsigned int t;
	size_t len;
	void *blob;
	int bad = 0;

	ref_fill(x, TPU_DTYPE_F32, M * K, 1, -3, 3);
	ref_fill(y, TPU_DTYPE_F32, K * N, 2, -3, 3);
	jb_grid(b, 3, grid, "ppa");
	jb_operand(b, TPU_ROLE_INPUT, xsl, TPU_DTYPE_F32, 2, xs, blk, "pid0 pid2");
	jb_operand(b, TPU_ROLE_INPUT, ysl, TPU_DTYPE_F32, 2, ys, blk, "pid2 pid1");
	jb_operand(b, TPU_ROLE_OUTPUT, zsl, TPU_DTYPE_F32, 2, zs, blk, "pid0 pid1");
	t = jb_scratch(b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, blk);
	jb_zero(b, JB_OPND(2), "pid2 0 ==");
	jb_unary(b, TPU_UNARY_RELU, JB_SCR(t), JB_OPND(0), NULL);
	jb_dot(b, JB_OPND(2), JB_SCR(t), JB_OPND(1), TPU_DOT_ACCUMULATE, NULL);
	blob = jb_finish(b, &len);
	ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			float acc = 0;

			for (int p = 0; p < K; p++)
				acc += fmaxf(x[i * K + p], 0) * y[p * N + j];
			bad += acc != z[i * N + j];
		}
	EXPECT_EQ(0, bad);
	free(blob);
	jb_free(b);
	tdev_free(d);
}

TEST_HARNESS_MAIN
