// SPDX-License-Identifier: MIT
/*
 * Host test: kernels written as statements run on the in-process device,
 * for statements that lower to the ops the device runs today (zero, dot,
 * unary and binary with row, column, immediate and SMEM operands): a
 * matmul gives the builder version's bits; elementwise statements match a
 * host reference; squeezed block dims and 2-D scalar prefetch work end to
 * end.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "tpurt.h"
#include "kselftest_harness.h"

FIXTURE(sim) {
	struct tpurt_device *dev;
};

FIXTURE_SETUP(sim)
{
	struct tpurt_sim_config cfg = { .hbm_size = 64 << 20 };

	ASSERT_EQ(0, tpurt_open_sim(&cfg, &self->dev)) TH_LOG("%s", tpurt_last_error());
}

FIXTURE_TEARDOWN(sim)
{
	tpurt_close(self->dev);
}

static struct tpurt_array *new_array(struct tpurt_device *dev, enum tpurt_dtype t,
				     int rank, int64_t d0, int64_t d1, int64_t d2,
				     uint32_t seed)
{
	int64_t shape[3] = { d0, d1, d2 };
	struct tpurt_array *a;

	if (tpurt_array_create(dev, t, rank, shape, &a))
		return NULL;
	/* small integers: every result is exact */
	ref_fill(tpurt_array_map(a), t, tpurt_array_size(a), seed, -3, 3);
	return a;
}

/* The guide's bf16 matmul with an f32 accumulator: (256, 512) @ (512, 384). */
static struct tpurt_grid_spec *matmul_spec(void)
{
	int64_t grid[3] = { 2, 3, 2 }, acc[2] = { 128, 128 };
	struct tpurt_block_spec xs = { 2, { 128, 256 }, "i, j, k -> i, k" };
	struct tpurt_block_spec ys = { 2, { 256, 128 }, "i, j, k -> k, j" };
	struct tpurt_block_spec zs = { 2, { 128, 128 }, "i, j, k -> i, j" };
	struct tpurt_grid_spec *gs;

	if (tpurt_grid_spec_create(3, grid, &gs) ||
	    tpurt_grid_spec_add_input(gs, "x", &xs) ||
	    tpurt_grid_spec_add_input(gs, "y", &ys) ||
	    tpurt_grid_spec_add_output(gs, "z", &zs) ||
	    tpurt_grid_spec_set_dtype(gs, "x", TPURT_BF16) ||
	    tpurt_grid_spec_set_dtype(gs, "y", TPURT_BF16) ||
	    tpurt_grid_spec_set_dtype(gs, "z", TPURT_BF16) ||
	    tpurt_grid_spec_add_scratch(gs, "acc", TPURT_VMEM, TPURT_F32, 2, acc))
		return NULL;
	return gs;
}

static const struct tpurt_compiler_params ppa = {
	.dimension_semantics = "parallel, parallel, arbitrary",
};

TEST_F(sim, matmul_as_statements_matches_the_builder)
{
	struct tpurt_array *x = new_array(self->dev, TPURT_BF16, 2, 256, 512, 0, 1);
	struct tpurt_array *y = new_array(self->dev, TPURT_BF16, 2, 512, 384, 0, 2);
	struct tpurt_array *z1 = new_array(self->dev, TPURT_BF16, 2, 256, 384, 0, 3);
	struct tpurt_array *z2 = new_array(self->dev, TPURT_BF16, 2, 256, 384, 0, 4);
	struct tpurt_array *a1[] = { x, y, z1 }, *a2[] = { x, y, z2 };
	struct tpurt_grid_spec *gs = matmul_spec();
	struct tpurt_kernel *built, *stmts;

	ASSERT_NE(NULL, gs) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_kernel_create(&built));
	tpurt_kernel_when(built, "k == 0");
	tpurt_kernel_zero(built, "acc");
	tpurt_kernel_end_when(built);
	tpurt_kernel_dot(built, "acc", "x", "y", TPURT_DOT_ACCUMULATE);
	tpurt_kernel_when(built, "k == num_programs(k) - 1");
	tpurt_kernel_store(built, "z", "acc");
	tpurt_kernel_end_when(built);
	ASSERT_EQ(0, tpurt_kernel_create(&stmts));
	ASSERT_EQ(0, tpurt_kernel_stmts(stmts, gs,
		"@pl.when(pl.program_id(2) == 0)\n"
		"def _():\n"
		"    acc[...] = jnp.zeros_like(acc)\n"
		"acc[...] += jnp.dot(x[...], y[...], preferred_element_type=jnp.float32)\n"
		"@pl.when(pl.program_id(2) == pl.num_programs(2) - 1)\n"
		"def _():\n"
		"    z[...] = acc[...].astype(z.dtype)\n")) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_pallas_call(built, gs, &ppa, a1, 3, NULL)) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_pallas_call(stmts, gs, &ppa, a2, 3, NULL)) TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(0, memcmp(tpurt_array_map(z1), tpurt_array_map(z2),
			    tpurt_array_nbytes(z1)));
	tpurt_kernel_free(built), tpurt_kernel_free(stmts);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x), tpurt_array_free(y);
	tpurt_array_free(z1), tpurt_array_free(z2);
}

/* z = x @ y.T through the dot's contraction flags, into a temporary. */
TEST_F(sim, dot_with_a_transposed_operand)
{
	struct tpurt_array *x = new_array(self->dev, TPURT_F32, 2, 128, 256, 0, 5);
	struct tpurt_array *y = new_array(self->dev, TPURT_F32, 2, 128, 256, 0, 6);
	struct tpurt_array *z = new_array(self->dev, TPURT_F32, 2, 128, 128, 0, 7);
	struct tpurt_array *args[] = { x, y, z };
	struct tpurt_block_spec bs = { 2, { 128, 256 }, "i -> 0, 0" };
	struct tpurt_block_spec zs = { 2, { 128, 128 }, "i -> 0, 0" };
	int64_t grid[1] = { 1 };
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	const float *xv, *yv, *zv;

	ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "x", &bs));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "y", &bs));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "z", &zs));
	tpurt_grid_spec_set_dtype(gs, "x", TPURT_F32);
	tpurt_grid_spec_set_dtype(gs, "y", TPURT_F32);
	tpurt_grid_spec_set_dtype(gs, "z", TPURT_F32);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmt(k, gs, "p = jnp.dot(x[...], y[...].T) * 2.0"))
		TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_kernel_stmt(k, gs, "z[...] = p - 1.0"));
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, NULL, args, 3, NULL)) TH_LOG("%s", tpurt_last_error());
	xv = tpurt_array_map(x), yv = tpurt_array_map(y), zv = tpurt_array_map(z);
	for (int i = 0; i < 128; i += 17)
		for (int j = 0; j < 128; j += 13) {
			double want = 0;

			for (int c = 0; c < 256; c++)
				want += (double)xv[i * 256 + c] * yv[j * 256 + c];
			EXPECT_EQ((float)(want * 2 - 1), zv[i * 128 + j]);
		}
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(z);
}

/*
 * Row, column, immediate and SMEM operands: o = max(x * 2 + b, 0) - c *
 * s[i, 1], with b a bias row, c a column and s a 2-D scalar-prefetch table
 * that also picks x's block.
 */
TEST_F(sim, elementwise_broadcasts_and_smem_scalars)
{
	enum { R = 128, C = 256, G = 2 };
	static const int32_t table[G * 2] = { 1, 3, 0, -2 };
	int64_t grid[1] = { G }, sshape[2] = { G, 2 };
	struct tpurt_array *s, *x, *b, *c, *o;
	struct tpurt_block_spec xs = { 2, { R, C }, "i, tab -> tab[i, 0], 0" };
	struct tpurt_block_spec bs = { 2, { 1, C }, "i -> 0, 0" };
	struct tpurt_block_spec cs = { 2, { R, 1 }, "i -> i, 0" };
	struct tpurt_block_spec os = { 2, { R, C }, "i -> i, 0" };
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	const float *xv, *bv, *cv, *ov;

	x = new_array(self->dev, TPURT_F32, 2, G * R, C, 0, 8);
	b = new_array(self->dev, TPURT_F32, 2, 1, C, 0, 9);
	c = new_array(self->dev, TPURT_F32, 2, G * R, 1, 0, 10);
	o = new_array(self->dev, TPURT_F32, 2, G * R, C, 0, 11);
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_INT32, 2, sshape, &s));
	tpurt_array_write(s, table);
	ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_scalar_prefetch_shaped(gs, "tab", 2, sshape));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "x", &xs)) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "b", &bs));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "c", &cs));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "o", &os));
	tpurt_grid_spec_set_dtype(gs, "x", TPURT_F32);
	tpurt_grid_spec_set_dtype(gs, "b", TPURT_F32);
	tpurt_grid_spec_set_dtype(gs, "c", TPURT_F32);
	tpurt_grid_spec_set_dtype(gs, "o", TPURT_F32);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmts(k, gs,
		"h = jnp.maximum(x[...] * 2.0 + b[...], 0.0)\n"
		"o[...] = h - c[...] * tab[pl.program_id(0), 1]\n")) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, NULL, (struct tpurt_array *[]){ s, x, b, c, o },
				       5, NULL)) TH_LOG("%s", tpurt_last_error());
	xv = tpurt_array_map(x), bv = tpurt_array_map(b);
	cv = tpurt_array_map(c), ov = tpurt_array_map(o);
	for (int g = 0; g < G; g++)
		for (int i = 0; i < R; i += 7)
			for (int j = 0; j < C; j += 11) {
				int xr = table[g * 2] * R + i, r = g * R + i;
				float h = fmaxf(xv[xr * C + j] * 2 + bv[j], 0);

				EXPECT_EQ(h - cv[r] * (float)table[g * 2 + 1], ov[r * C + j]);
			}
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(s), tpurt_array_free(x), tpurt_array_free(b);
	tpurt_array_free(c), tpurt_array_free(o);
}

/*
 * & | ^ of SMEM integer elements are bitwise, computed on the vector unit
 * as (1, 1) (the scalar core has no bitwise ops); & of scalar compares
 * stays logical.
 */
TEST_F(sim, bitwise_ops_of_smem_integers)
{
	static const int32_t table[4] = { 6, 11, 0, 0 };
	int64_t grid[1] = { 1 }, sshape[2] = { 1, 4 }, oshape[2] = { 8, 128 };
	struct tpurt_block_spec os = { 2, { 8, 128 }, "i -> 0, 0" };
	struct tpurt_array *s, *o;
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	const int32_t *ov;

	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_INT32, 2, sshape, &s));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_INT32, 2, oshape, &o));
	tpurt_array_write(s, table);
	ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_scalar_prefetch_shaped(gs, "tab", 2, sshape));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "o", &os));
	tpurt_grid_spec_set_dtype(gs, "o", TPURT_INT32);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmts(k, gs,
		"o[...] = jnp.zeros_like(o) + (tab[0, 0] & tab[0, 1]) * 100 + "
		"(tab[0, 0] | tab[0, 1]) + (tab[0, 0] ^ tab[0, 1]) * 10000\n"
		"pl.when((tab[0, 0] == 6) & (tab[0, 1] > 2)): o[0, 0] = 7\n"))
		TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, NULL, (struct tpurt_array *[]){ s, o }, 2, NULL))
		TH_LOG("%s", tpurt_last_error());
	ov = tpurt_array_map(o);
	EXPECT_EQ(7, ov[0]);
	EXPECT_EQ((6 & 11) * 100 + (6 | 11) + (6 ^ 11) * 10000, ov[1]);
	EXPECT_EQ((6 & 11) * 100 + (6 | 11) + (6 ^ 11) * 10000, ov[8 * 128 - 1]);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(s), tpurt_array_free(o);
}

/* jnp.mean along rows and columns: the sum divided by the count, in f32. */
TEST_F(sim, mean_is_the_sum_over_the_count)
{
	enum { R = 16, C = 256 };
	int64_t grid[1] = { 1 };
	struct tpurt_array *x, *r, *c;
	struct tpurt_block_spec xs = { 2, { R, C }, "i -> 0, 0" };
	struct tpurt_block_spec rs = { 2, { R, 1 }, "i -> 0, 0" };
	struct tpurt_block_spec cs = { 2, { 1, C }, "i -> 0, 0" };
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	const float *xv, *rv, *cv;

	x = new_array(self->dev, TPURT_F32, 2, R, C, 0, 12);
	r = new_array(self->dev, TPURT_F32, 2, R, 1, 0, 13);
	c = new_array(self->dev, TPURT_F32, 2, 1, C, 0, 14);
	ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "x", &xs));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "r", &rs));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "c", &cs));
	tpurt_grid_spec_set_dtype(gs, "x", TPURT_F32);
	tpurt_grid_spec_set_dtype(gs, "r", TPURT_F32);
	tpurt_grid_spec_set_dtype(gs, "c", TPURT_F32);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmts(k, gs,
		"r[...] = jnp.mean(x[...], axis=1, keepdims=True)\n"
		"c[...] = jnp.mean(x[...], axis=0, keepdims=True)\n")) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, NULL, (struct tpurt_array *[]){ x, r, c },
				       3, NULL)) TH_LOG("%s", tpurt_last_error());
	xv = tpurt_array_map(x), rv = tpurt_array_map(r), cv = tpurt_array_map(c);
	for (int i = 0; i < R; i++) {
		double s = 0;

		for (int j = 0; j < C; j++)
			s += xv[i * C + j];
		EXPECT_EQ((float)(s / C), rv[i]);	/* small integers: exact */
	}
	for (int j = 0; j < C; j++) {
		double s = 0;

		for (int i = 0; i < R; i++)
			s += xv[i * C + j];
		EXPECT_EQ((float)(s / R), cv[j]);
	}
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x), tpurt_array_free(r), tpurt_array_free(c);
}

/*
 * Reductions without an axis reduce the whole array into a (1, 1) tile,
 * which broadcasts over both dimensions as jnp's 0-d result does.
 */
TEST_F(sim, whole_array_reductions_broadcast_as_scalars)
{
	enum { R = 16, C = 256 };
	int64_t grid[1] = { 1 };
	struct tpurt_array *x, *m, *d;
	struct tpurt_block_spec xs = { 2, { R, C }, "i -> 0, 0" };
	struct tpurt_block_spec ms = { 2, { 1, 1 }, "i -> 0, 0" };
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	const float *xv, *mv, *dv;
	double sum = 0;
	float max;

	x = new_array(self->dev, TPURT_F32, 2, R, C, 0, 15);
	m = new_array(self->dev, TPURT_F32, 2, 1, 1, 0, 16);
	d = new_array(self->dev, TPURT_F32, 2, R, C, 0, 17);
	ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "x", &xs));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "m", &ms));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "d", &xs));
	tpurt_grid_spec_set_dtype(gs, "x", TPURT_F32);
	tpurt_grid_spec_set_dtype(gs, "m", TPURT_F32);
	tpurt_grid_spec_set_dtype(gs, "d", TPURT_F32);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmts(k, gs,
		"m[...] = jnp.mean(x[...])\n"
		"d[...] = x[...] - jnp.max(x[...]) + jnp.sum(x[...]) * 0.0\n")) TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(-EINVAL, tpurt_kernel_stmt(k, gs, "m[...] = jnp.argmax(x[...])"));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "argmax over the whole array (a flat index)"));
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, NULL, (struct tpurt_array *[]){ x, m, d },
				       3, NULL)) TH_LOG("%s", tpurt_last_error());
	xv = tpurt_array_map(x), mv = tpurt_array_map(m), dv = tpurt_array_map(d);
	max = xv[0];
	for (int i = 0; i < R * C; i++) {
		sum += xv[i];
		max = xv[i] > max ? xv[i] : max;
	}
	EXPECT_EQ((float)(sum / (R * C)), mv[0]);	/* small integers: exact */
	for (int i = 0; i < R * C; i++) {
		ASSERT_EQ(xv[i] - max, dv[i]) TH_LOG("element %d", i);
	}
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x), tpurt_array_free(m), tpurt_array_free(d);
}

/* A (None, 128, 64) block of a (4, 128, 64) array is a (128, 64) ref. */
TEST_F(sim, squeezed_block_dims)
{
	struct tpurt_array *x = new_array(self->dev, TPURT_F32, 3, 4, 128, 64, 12);
	struct tpurt_array *o = new_array(self->dev, TPURT_F32, 3, 4, 128, 64, 13);
	struct tpurt_block_spec bs = { 3, { TPURT_SQUEEZED, 128, 64 }, "h -> h, 0, 0" };
	int64_t grid[1] = { 4 };
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	const float *xv, *ov;

	ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "x", &bs)) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "o", &bs));
	tpurt_grid_spec_set_dtype(gs, "x", TPURT_F32);
	tpurt_grid_spec_set_dtype(gs, "o", TPURT_F32);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmt(k, gs, "o[...] = x[...] * 3.0 + 1.0"))
		TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, NULL, (struct tpurt_array *[]){ x, o }, 2, NULL))
		TH_LOG("%s", tpurt_last_error());
	xv = tpurt_array_map(x), ov = tpurt_array_map(o);
	for (int i = 0; i < 4 * 128 * 64; i += 101)
		EXPECT_EQ(xv[i] * 3 + 1, ov[i]);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x), tpurt_array_free(o);
}

TEST_F(sim, pallas_call_checks_declared_dtypes_and_prefetch_shapes)
{
	struct tpurt_array *x = new_array(self->dev, TPURT_BF16, 2, 256, 512, 0, 1);
	struct tpurt_array *y = new_array(self->dev, TPURT_BF16, 2, 512, 384, 0, 2);
	struct tpurt_array *z = new_array(self->dev, TPURT_F32, 2, 256, 384, 0, 3);
	struct tpurt_array *args[] = { x, y, z };
	struct tpurt_grid_spec *gs = matmul_spec();
	struct tpurt_kernel *k;

	ASSERT_NE(NULL, gs);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmt(k, gs, "acc[...] = jnp.dot(x[...], y[...])"));
	EXPECT_EQ(-EINVAL, tpurt_pallas_call(k, gs, NULL, args, 3, NULL));
	EXPECT_NE(NULL, strstr(tpurt_last_error(),
			       "output 'z': the array is float32, the grid spec declares bfloat16"));
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(z);
}

TEST_HARNESS_MAIN
