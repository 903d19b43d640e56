// SPDX-License-Identifier: MIT
/*
 * Host test: kernel statements (tpurt_kernel_stmt) lowered to the device's
 * ops, read back through tpurt_kernel_dump(): each construct, a row
 * softmax and a flash-attention step; and every error, which names the
 * statement, points at the column and leaves the kernel as it was.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt.h"
#include "kselftest_harness.h"
#include "kernel_lowering.h"

/*
 * x, y: f32 inputs (128, 256); b: f32 row (1, 256); c: f32 column
 * (128, 1); q, k, v: bf16 (128, 64); o: f32 output (128, 256); ob: bf16
 * output (128, 64); i8: int8 (128, 64); acc f32 (128, 64), m, l f32
 * (128, 1), sq f32 (128, 128) scratch; s: a 2x3 scalar-prefetch table; t:
 * an f32 SMEM scratch. Grid (2, 3, 4).
 */
static struct tpurt_grid_spec *test_spec(void)
{
	static const struct {
		const char *name;
		int output;
		int64_t rows, cols;
		enum tpurt_dtype dtype;
	} refs[] = {
		{ "x", 0, 128, 256, TPURT_F32 }, { "y", 0, 128, 256, TPURT_F32 },
		{ "b", 0, 1, 256, TPURT_F32 }, { "c", 0, 128, 1, TPURT_F32 },
		{ "q", 0, 128, 64, TPURT_BF16 }, { "k", 0, 128, 64, TPURT_BF16 },
		{ "v", 0, 128, 64, TPURT_BF16 }, { "i8", 0, 128, 64, TPURT_INT8 },
		{ "o", 1, 128, 256, TPURT_F32 }, { "ob", 1, 128, 64, TPURT_BF16 },
	};
	int64_t grid[3] = { 2, 3, 4 }, st[2] = { 2, 3 }, acc[2] = { 128, 64 };
	int64_t col[2] = { 128, 1 }, one[1] = { 8 }, square[2] = { 128, 128 };
	struct tpurt_grid_spec *gs;

	if (tpurt_grid_spec_create(3, grid, &gs) ||
	    tpurt_grid_spec_add_scalar_prefetch_shaped(gs, "s", 2, st))
		return NULL;
	for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
		struct tpurt_block_spec bs = { 2, { refs[i].rows, refs[i].cols },
					       "i, j, k -> 0, 0" };

		if ((refs[i].output ? tpurt_grid_spec_add_output(gs, refs[i].name, &bs) :
		     tpurt_grid_spec_add_input(gs, refs[i].name, &bs)) ||
		    tpurt_grid_spec_set_dtype(gs, refs[i].name, refs[i].dtype))
			return NULL;
	}
	if (tpurt_grid_spec_add_scratch(gs, "acc", TPURT_VMEM, TPURT_F32, 2, acc) ||
	    tpurt_grid_spec_add_scratch(gs, "m", TPURT_VMEM, TPURT_F32, 2, col) ||
	    tpurt_grid_spec_add_scratch(gs, "l", TPURT_VMEM, TPURT_F32, 2, col) ||
	    tpurt_grid_spec_add_scratch(gs, "t", TPURT_SMEM, TPURT_F32, 1, one) ||
	    tpurt_grid_spec_add_scratch(gs, "sq", TPURT_VMEM, TPURT_F32, 2, square))
		return NULL;
	return gs;
}

FIXTURE(stmt) {
	struct tpurt_grid_spec *gs;
};

FIXTURE_SETUP(stmt)
{
	self->gs = test_spec();
	ASSERT_NE(NULL, self->gs) TH_LOG("%s", tpurt_last_error());
}

FIXTURE_TEARDOWN(stmt)
{
	tpurt_grid_spec_free(self->gs);
}

TEST_F(stmt, dots_transpose_cast_and_accumulate)
{
	EXPECT_LOWERS("sq[...] = jnp.dot(q[...], k[...].T, preferred_element_type=jnp.float32)\n"
		      "acc[...] += jnp.dot(sq[...].astype(jnp.bfloat16), v[...])\n"
		      "ob[...] = jnp.dot(sq[...].astype(jnp.bfloat16), v[...]).astype(ob.dtype)",
		      "temp %0: bfloat16[128, 128] in slot 0\n"
		      "temp %1: float32[128, 64] in slot 1\n"
		      "sq[...] = dot(q[...], k[...].T)\n"
		      "%0[...] = sq[...]\n"
		      "acc[...] += dot(%0[...], v[...])\n"
		      "%0[...] = sq[...]\n"
		      "%1[...] = dot(%0[...], v[...])\n"
		      "ob[...] = %1[...]\n");
}

TEST_F(stmt, broadcasts_rows_columns_and_immediates)
{
	EXPECT_LOWERS("o[...] = jnp.maximum(x[...] * 2.0 + b[...], 0.0)",
		      "temp %0: float32[128, 256] in slot 0\n"
		      "%0[...] = multiply(x[...], 2)\n"
		      "%0[...] = add(%0[...], row(b[...]))\n"
		      "o[...] = maximum(%0[...], 0)\n");
	/* a scalar or a column on the left of a non-commutative op is
	 * broadcast first; a compare flips instead */
	EXPECT_LOWERS("o[...] = 1.0 - x[...] / c[...]",
		      "temp %0: float32[128, 256] in slot 0\n"
		      "temp %1: float32[128, 256] in slot 1\n"
		      "%0[...] = divide(x[...], col(c[...]))\n"
		      "%1[...] = 0\n"
		      "%1[...] = add(%1[...], 1)\n"
		      "o[...] = subtract(%1[...], %0[...])\n");
	EXPECT_LOWERS("o[...] = jnp.where(0.5 < x[...], x[...], -jnp.inf)",
		      "temp %0: bool[128, 256] in slot 0\n"
		      "%0[...] = greater(x[...], 0.5)\n"
		      "o[...] = where(%0[...], x[...], -inf)\n");
}

TEST_F(stmt, masks_where_iota_and_scalar_core_values)
{
	EXPECT_LOWERS("o[...] = jnp.where((x[...] > 0) & (y[...] < 1), b[...], c[...])",
		      "temp %0: bool[128, 256] in slot 0\n"
		      "temp %1: bool[128, 256] in slot 1\n"
		      "%0[...] = greater(x[...], 0)\n"
		      "%1[...] = less(y[...], 1)\n"
		      "%0[...] = logical_and(%0[...], %1[...])\n"
		      "o[...] = where(%0[...], row(b[...]), col(c[...]))\n");
	EXPECT_LOWERS("ids = lax.broadcasted_iota(jnp.int32, (128, 256), 1) + pl.program_id(1) * 256\n"
		      "o[...] = jnp.where(ids < 300, x[...], 0.0)",
		      "temp ids: int32[128, 256] in slot 0\n"
		      "temp %1: bool[128, 256] in slot 1\n"
		      "ids[...] = iota(1, program_id(1) * 256)\n"
		      "%1[...] = less(ids[...], 300)\n"
		      "o[...] = where(%1[...], x[...], 0)\n");
	EXPECT_LOWERS("o[...] = x[...] + (s[pl.program_id(0), 2] + pl.program_id(2)) * 128",
		      "o[...] = add(x[...], scalar((s[program_id(0) * 3 + 2] + program_id(2)) * 128))\n");
}

TEST_F(stmt, smem_scalars)
{
	EXPECT_LOWERS("o[...] = x[...] * s[pl.program_id(0), pl.program_id(1)]",
		      "o[...] = multiply(x[...], s[program_id(0) * 3 + program_id(1)])\n");
	EXPECT_LOWERS("o[...] = x[...] * t[pl.program_id(2)]",
		      "o[...] = multiply(x[...], t[program_id(2)])\n");
	/* float SMEM arithmetic: on the vector unit, as a (1, 1) tile */
	EXPECT_LOWERS("o[...] = x[...] + t[0] * 2",
		      "temp %0: float32[1, 1] in slot 0\n"
		      "temp %1: float32[128, 1] in slot 1\n"
		      "%0[...] = 0\n"
		      "%0[...] = add(%0[...], t[0])\n"
		      "%0[...] = multiply(%0[...], 2)\n"
		      "%1[...] = 0\n"
		      "%1[...] = add(%1[...], row(%0[...]))\n"
		      "o[...] = add(x[...], col(%1[...]))\n");
}

TEST_F(stmt, unary_functions_reductions_and_fills)
{
	EXPECT_LOWERS("o[...] = lax.rsqrt(jnp.square(x[...]) + 1e-5) * pl.reciprocal(c[...])",
		      "temp %0: float32[128, 256] in slot 0\n"
		      "temp %1: float32[128, 1] in slot 1\n"
		      "%0[...] = square(x[...])\n"
		      "%0[...] = add(%0[...], 9.99999975e-06)\n"
		      "%0[...] = rsqrt(%0[...])\n"
		      "%1[...] = reciprocal(c[...])\n"
		      "o[...] = multiply(%0[...], col(%1[...]))\n");
	EXPECT_LOWERS("o[...] = jnp.clip(x[...], -1.0, 1.0)\n"
		      "m[...] = jnp.min(x[...], axis=-1, keepdims=True)\n"
		      "l[...] = jnp.full_like(l, 2.5)\n"
		      "o[...] = x[...] // 2.0",
		      "temp %0: float32[128, 256] in slot 0\n"
		      "o[...] = clip(x[...], -1, 1)\n"
		      "m[...] = min(x[...], axis=1)\n"
		      "l[...] = 0\n"
		      "l[...] = add(l[...], 2.5)\n"
		      "%0[...] = divide(x[...], 2)\n"
		      "o[...] = floor(%0[...])\n");
}

TEST_F(stmt, when_prefix_and_blocks)
{
	EXPECT_LOWERS("pl.when(pl.program_id(2) == 0): acc[...] = jnp.zeros_like(acc)\n"
		      "@pl.when((pl.program_id(2) == pl.num_programs(2) - 1) & (s[0, 1] > 0))\n"
		      "def _():\n"
		      "    ob[...] = acc[...].astype(ob.dtype)   # the last step\n"
		      "o[...] = x[...]",
		      "when(program_id(2) == 0): acc[...] = 0\n"
		      "when((program_id(2) == (num_programs(2) - 1)) and (s[0 * 3 + 1] > 0)): ob[...] = acc[...]\n"
		      "o[...] = x[...]\n");
}

/* The example: a row softmax in the statement syntax. */
TEST_F(stmt, row_softmax)
{
	EXPECT_LOWERS("m_row = jnp.max(x[...], axis=1, keepdims=True)\n"
		      "e = jnp.exp(x[...] - m_row)\n"
		      "o[...] = e / jnp.sum(e, axis=1, keepdims=True)",
		      "temp m_row: float32[128, 1] in slot 0\n"
		      "temp e: float32[128, 256] in slot 2\n"
		      "temp %2: float32[128, 256] in slot 1\n"
		      "temp %3: float32[128, 1] in slot 0\n"
		      "m_row[...] = max(x[...], axis=1)\n"
		      "%2[...] = subtract(x[...], col(m_row[...]))\n"
		      "e[...] = exp(%2[...])\n"
		      "%3[...] = sum(e[...], axis=1)\n"
		      "o[...] = divide(e[...], col(%3[...]))\n");
}

/* One step of causal flash attention: locals, masks, rescaling. */
TEST_F(stmt, flash_attention_step)
{
	EXPECT_LOWERS("bq = 128\n"
		      "scale = 0.125\n"
		      "s_ = jnp.dot(q[...], k[...].T, preferred_element_type=jnp.float32) * scale\n"
		      "q_ids = lax.broadcasted_iota(jnp.int32, (bq, bq), 0) + pl.program_id(0) * bq\n"
		      "k_ids = lax.broadcasted_iota(jnp.int32, (bq, bq), 1) + pl.program_id(2) * bq\n"
		      "s_ = jnp.where(q_ids >= k_ids, s_, -jnp.inf)\n"
		      "m_new = jnp.maximum(m[...], jnp.max(s_, axis=1, keepdims=True))\n"
		      "alpha = jnp.exp(m[...] - m_new)\n"
		      "p = jnp.exp(s_ - m_new)\n"
		      "l[...] = alpha * l[...] + jnp.sum(p, axis=1, keepdims=True)\n"
		      "acc[...] = acc[...] * alpha\n"
		      "acc[...] += jnp.dot(p.astype(jnp.bfloat16), v[...], preferred_element_type=jnp.float32)\n"
		      "m[...] = m_new",
		      "temp s_: float32[128, 128] in slot 1\n"
		      "temp %1: float32[128, 128] in slot 0\n"
		      "temp q_ids: int32[128, 128] in slot 2\n"
		      "temp k_ids: int32[128, 128] in slot 3\n"
		      "temp %4: bool[128, 128] in slot 4\n"
		      "temp m_new: float32[128, 1] in slot 6\n"
		      "temp %6: float32[128, 1] in slot 5\n"
		      "temp alpha: float32[128, 1] in slot 7\n"
		      "temp p: float32[128, 128] in slot 1\n"
		      "temp %9: float32[128, 1] in slot 8\n"
		      "temp %10: bfloat16[128, 128] in slot 9\n"
		      "%1[...] = dot(q[...], k[...].T)\n"
		      "s_[...] = multiply(%1[...], 0.125)\n"
		      "q_ids[...] = iota(0, program_id(0) * 128)\n"
		      "k_ids[...] = iota(1, program_id(2) * 128)\n"
		      "%4[...] = greater_equal(q_ids[...], k_ids[...])\n"
		      "s_[...] = where(%4[...], s_[...], -inf)\n"
		      "%6[...] = max(s_[...], axis=1)\n"
		      "m_new[...] = maximum(m[...], %6[...])\n"
		      "%6[...] = subtract(m[...], m_new[...])\n"
		      "alpha[...] = exp(%6[...])\n"
		      "%1[...] = subtract(s_[...], col(m_new[...]))\n"
		      "p[...] = exp(%1[...])\n"
		      "%6[...] = multiply(alpha[...], l[...])\n"
		      "%9[...] = sum(p[...], axis=1)\n"
		      "l[...] = add(%6[...], %9[...])\n"
		      "acc[...] = multiply(acc[...], col(alpha[...]))\n"
		      "%10[...] = p[...]\n"
		      "acc[...] += dot(%10[...], v[...])\n"
		      "m[...] = m_new[...]\n");
}

/* --- errors --- */

TEST_F(stmt, errors_point_at_the_column)
{
	EXPECT_FAILS("m_new = jnp.maximum(m[...], mx(x[...]))",
		     "statement 1: unknown function 'mx' at column 29\n"
		     "    m_new = jnp.maximum(m[...], mx(x[...]))\n"
		     "                                ^");
	EXPECT_FAILS("o[...] = x[...] + zz", "unknown name 'zz' at column 19");
	EXPECT_FAILS("o[...] = x[...] + acc[...]",
		     "shapes (128, 256) and (128, 64) do not broadcast at column 17");
	EXPECT_FAILS("ob[...] = acc[...]",
		     "a float32 value stored into 'ob' of bfloat16: write .astype(bfloat16) at column 11");
	EXPECT_FAILS("x[...] = o[...]", "'x' is an input: its block is read-only at column 1");
	EXPECT_FAILS("o[...] = x", "'x' is a ref: read it with x[...] at column 11");
	EXPECT_FAILS("o = x[...]", "'o' is a ref: store into it with o[...] = ... at column 2");
	EXPECT_FAILS("o[...] = x[...] y", "unexpected 'y' after the statement at column 17");
	EXPECT_FAILS("o[...] = x[...].T",
		     "a value of shape (256, 128) stored into 'o' of shape (128, 256) at column 10");
	EXPECT_FAILS("o[...] = pltpu.roll(x[...], 1)",
		     "roll takes x, shift and axis (a flattened roll is not supported) at column 10");
	EXPECT_FAILS("acc[...] = jnp.dot(q[...], k[...])",
		     "dot of (128, 64) and (128, 64): contraction sizes 64 and 128 differ at column 12");
	EXPECT_FAILS("m[...] = jnp.sum(x[...], axis=1)",	/* a 1-D (rows,) result */
		     "a value of shape (1, 128) stored into 'm' of shape (128, 1)");
	EXPECT_FAILS("o[...] = x[...] * s[1]", "'s' is 2-D: index it [i, j]");
	EXPECT_FAILS("o[...] = x[...] + 1.5 * pl.program_id(9)", "the grid has dimensions 0 to 2");
	EXPECT_FAILS("o[...] = x[...] + pl.program_id(0) * 1.5", "the scalar core computes in integers");
	EXPECT_FAILS("o[...] = x[...]\nx[...] = o[...]", "statement 2: 'x' is an input");
}

TEST_F(stmt, a_failed_statement_leaves_the_kernel_as_it_was)
{
	struct tpurt_kernel *k;
	char *buf;

	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmt(k, self->gs, "e = jnp.exp(x[...])"));
	EXPECT_EQ(-EINVAL, tpurt_kernel_stmt(k, self->gs, "o[...] = jnp.exp(e) + acc[...]"));
	EXPECT_EQ(-EINVAL, tpurt_kernel_stmts(k, self->gs, "o[...] = e\nbad = mx(e)"));
	buf = kernel_dump_string(k);
	EXPECT_STREQ("temp e: float32[128, 256] in slot 0\ne[...] = exp(x[...])\n", buf);
	/* numbering counts the statements added */
	EXPECT_EQ(-EINVAL, tpurt_kernel_stmt(k, self->gs, "o[...] = q[...]"));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "statement 2:"));
	free(buf);
	tpurt_kernel_free(k);
}

TEST(undeclared_dtype_and_squeezed_refs)
{
	int64_t grid[1] = { 4 };
	struct tpurt_block_spec xs = { 3, { TPURT_SQUEEZED, 128, 64 }, "i -> i, 0, 0" };
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;

	ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "x", &xs)) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "o", &xs));
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_grid_spec_set_dtype(gs, "o", TPURT_F32));
	EXPECT_EQ(-EINVAL, tpurt_kernel_stmt(k, gs, "o[...] = x[...]"));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "the dtype of 'x' is not declared"));
	ASSERT_EQ(0, tpurt_grid_spec_set_dtype(gs, "x", TPURT_F32));
	/* a (None, 128, 64) block is a (128, 64) ref */
	EXPECT_EQ(0, tpurt_kernel_stmt(k, gs, "o[...] = x[...] + jnp.sum(x[...], axis=1, keepdims=True)"))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(-EINVAL, tpurt_kernel_stmt(k, gs, "o[...] = jnp.dot(x[...], x[...])"));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "dot of (128, 64) and (128, 64)"));
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
}

TEST_HARNESS_MAIN
