// SPDX-License-Identifier: MIT
/*
 * Host test: TPU_OP_PRNG_SEED and TPU_OP_PRNG_BITS (pltpu.prng_seed and
 * pltpu.prng_random_bits): Philox-4x32-10's known answers; bits that are
 * the same for the same seeds and draws (on one core or two), different
 * for other seeds, other draws and other blocks, and roughly uniform; the
 * per-core state living across the ops of a step; and the checks that
 * refuse a float dst, a seed op with a dst, without its program or with
 * too many seeds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"
#include "tpu_prng.h"

enum { R = 16, C = 256, BR = 8, BC = 128 };	/* a 2 x 2 grid of blocks */

struct prng {
	struct tdev *d;
	unsigned int z1, z2;
	struct tpu_job_result res;
};

static void setup(struct prng *p, unsigned int cores)
{
	p->d = tdev_new(1 << 20, cores);
	p->z1 = tdev_alloc(p->d, R * C * 4);
	p->z2 = tdev_alloc(p->d, R * C * 4);
}

/*
 * Each step: prng_seed(@seeds) (none: no seed op), z1 block = bits,
 * z2 block = bits; @dtype is z's, @nseeds the seed op's count.
 */
static int run_prng(struct prng *p, const char *seeds, unsigned int nseeds,
		    unsigned int dtype)
{
	uint64_t s[2] = { R, C };
	uint32_t grid[2] = { R / BR, C / BC }, b2[2] = { BR, BC };
	struct jb *b = jb_new();
	struct tpu_job_op *op;
	unsigned int z1, z2;
	size_t len;
	void *blob;
	int ret;

	jb_grid(b, 2, grid, "pp");
	z1 = jb_operand(b, TPU_ROLE_OUTPUT, p->z1, dtype, 2, s, b2, "pid0 pid1");
	z2 = jb_operand(b, TPU_ROLE_OUTPUT, p->z2, dtype, 2, s, b2, "pid0 pid1");
	if (seeds) {
		op = jb_zero(b, JB_NONE, NULL);
		op->opcode = TPU_OP_PRNG_SEED;
		op->fn = nseeds - 1;
		if (*seeds)
			op->scalar_index = jb_prog(b, seeds);
	}
	op = jb_zero(b, JB_OPND(z1), NULL);
	op->opcode = TPU_OP_PRNG_BITS;
	op = jb_zero(b, JB_OPND(z2), NULL);
	op->opcode = TPU_OP_PRNG_BITS;
	blob = jb_finish(b, &len);
	ret = tdev_run(p->d, blob, len, 0, &p->res);
	free(blob);
	jb_free(b);
	return ret;
}

static uint32_t *copy_out(struct prng *p, unsigned int slot)
{
	uint32_t *v = malloc(R * C * 4);

	memcpy(v, tdev_ptr(p->d, slot), R * C * 4);
	return v;
}

/* How many of @n words differ between @a and @b. */
static int ndiff(const uint32_t *a, const uint32_t *b, int n)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		k += a[i] != b[i];
	return k;
}

TEST(philox_known_answers)
{
	/* Random123's kat_vectors for philox4x32_10 */
	static const uint32_t kat[3][10] = {
		{ 0, 0, 0, 0, 0, 0,
		  0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 },
		{ ~0u, ~0u, ~0u, ~0u, ~0u, ~0u,
		  0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd },
		{ 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344,
		  0xa4093822, 0x299f31d0,
		  0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 },
	};

	for (int t = 0; t < 3; t++) {
		uint32_t c[4] = { kat[t][0], kat[t][1], kat[t][2], kat[t][3] };

		tpu_philox4x32(&kat[t][4], c);
		for (int k = 0; k < 4; k++) {
			ASSERT_EQ(kat[t][6 + k], c[k]) { TH_LOG("vector %d word %d", t, k); }
		}
	}
}

TEST(same_seeds_same_bits_on_any_core_count)
{
	struct prng a, b;
	uint32_t *a1, *a2, *b1, *b2;

	setup(&a, 1);
	setup(&b, 2);
	ASSERT_EQ(0, run_prng(&a, "pid0 pid1", 2, TPU_DTYPE_INT32)) { TH_LOG("%s", a.res.message); }
	ASSERT_EQ(0, run_prng(&b, "pid0 pid1", 2, TPU_DTYPE_INT32)) { TH_LOG("%s", b.res.message); }
	a1 = copy_out(&a, a.z1);
	a2 = copy_out(&a, a.z2);
	b1 = copy_out(&b, b.z1);
	b2 = copy_out(&b, b.z2);
	EXPECT_EQ(0, ndiff(a1, b1, R * C));
	EXPECT_EQ(0, ndiff(a2, b2, R * C));
	/* the second draw is not the first */
	EXPECT_GT(ndiff(a1, a2, R * C), R * C - 4);
	/* each block (its own seeds) differs from the others */
	for (int r = 0; r < BR; r++) {
		for (int c = 0; c < BC; c++) {
			uint32_t v = a1[r * C + c];

			EXPECT_NE(v, a1[r * C + c + BC]);
			EXPECT_NE(v, a1[(r + BR) * C + c]);
		}
	}
	/* a rerun gives the same bits */
	ASSERT_EQ(0, run_prng(&b, "pid0 pid1", 2, TPU_DTYPE_INT32));
	EXPECT_EQ(0, ndiff(a1, tdev_ptr(b.d, b.z1), R * C));
	free(a1);
	free(a2);
	free(b1);
	free(b2);
	tdev_free(a.d);
	tdev_free(b.d);
}

TEST(other_seeds_other_bits)
{
	static const struct { const char *seeds; unsigned int n; } s[] = {
		{ "7", 1 }, { "8", 1 }, { "7 0", 2 }, { "0 7", 2 },
		{ "-1", 1 }, { "1 2 3 4", 4 },
	};
	uint32_t *v[6];
	struct prng p;

	setup(&p, 2);
	for (int i = 0; i < 6; i++) {
		ASSERT_EQ(0, run_prng(&p, s[i].seeds, s[i].n, TPU_DTYPE_INT32))
			{ TH_LOG("%s: %s", s[i].seeds, p.res.message); }
		v[i] = copy_out(&p, p.z1);
	}
	for (int i = 0; i < 6; i++) {
		for (int j = 0; j < i; j++) {
			EXPECT_GT(ndiff(v[i], v[j], R * C), R * C - 4) {
				TH_LOG("seeds %s and %s", s[i].seeds, s[j].seeds);
			}
		}
	}
	for (int i = 0; i < 6; i++)
		free(v[i]);
	tdev_free(p.d);
}

TEST(bits_are_roughly_uniform)
{
	int ones[32] = { 0 }, hist[16] = { 0 };
	const uint32_t *z;
	struct prng p;

	setup(&p, 2);
	ASSERT_EQ(0, run_prng(&p, "42", 1, TPU_DTYPE_INT32));
	z = tdev_ptr(p.d, p.z1);
	for (int i = 0; i < R * C; i++) {
		for (int k = 0; k < 32; k++)
			ones[k] += z[i] >> k & 1;
		hist[z[i] >> 28]++;
	}
	/* 4096 draws: a bit is set 2048 +- 32 times (sd); 8 sd is generous */
	for (int k = 0; k < 32; k++) {
		EXPECT_GT(ones[k], 2048 - 256) { TH_LOG("bit %d", k); }
		EXPECT_LT(ones[k], 2048 + 256) { TH_LOG("bit %d", k); }
	}
	for (int k = 0; k < 16; k++) {
		EXPECT_GT(hist[k], 256 - 96) { TH_LOG("top nibble %d", k); }
		EXPECT_LT(hist[k], 256 + 96) { TH_LOG("top nibble %d", k); }
	}
	tdev_free(p.d);
}

TEST(unseeded_state_is_seed_zero)
{
	struct prng p;
	uint32_t *u;

	setup(&p, 1);
	ASSERT_EQ(0, run_prng(&p, NULL, 1, TPU_DTYPE_INT32)) { TH_LOG("%s", p.res.message); }
	u = copy_out(&p, p.z1);
	/* one core, no reseeding: the four blocks are draws 0, 2, 4, 6 */
	EXPECT_GT(ndiff(u, u + BC, BC), BC - 4);
	ASSERT_EQ(0, run_prng(&p, "0", 1, TPU_DTYPE_INT32));
	/* seeding 0 each step gives the first block's bits at every block */
	EXPECT_EQ(0, ndiff(u, tdev_ptr(p.d, p.z1), BC));
	free(u);
	tdev_free(p.d);
}

TEST(checks_refuse_bad_prng_ops)
{
	struct prng p;

	setup(&p, 1);
	ASSERT_NE(0, run_prng(&p, "1", 1, TPU_DTYPE_F32));
	EXPECT_NE(NULL, strstr(p.res.message, "prng_random_bits dst")) { TH_LOG("%s", p.res.message); }
	EXPECT_NE(NULL, strstr(p.res.message, "must be int32")) { TH_LOG("%s", p.res.message); }
	ASSERT_NE(0, run_prng(&p, "", 1, TPU_DTYPE_INT32));
	EXPECT_NE(NULL, strstr(p.res.message, "prng_seed needs a program")) { TH_LOG("%s", p.res.message); }
	ASSERT_NE(0, run_prng(&p, "1 2 3 4 5", 5, TPU_DTYPE_INT32));
	EXPECT_NE(NULL, strstr(p.res.message, "fn 4 unknown for opcode prng_seed")) { TH_LOG("%s", p.res.message); }
	/* a program leaving one value where two seeds are named */
	ASSERT_NE(0, run_prng(&p, "1", 2, TPU_DTYPE_INT32));
	EXPECT_NE(NULL, strstr(p.res.message, "prng seeds")) { TH_LOG("%s", p.res.message); }
	tdev_free(p.d);
}

TEST(seed_op_writes_no_ref)
{
	uint64_t s[2] = { R, C };
	uint32_t grid[2] = { 1, 1 }, b2[2] = { R, C };
	struct tpu_job_result res;
	struct tdev *d = tdev_new(1 << 20, 1);
	unsigned int slot = tdev_alloc(d, R * C * 4), z;
	struct jb *b = jb_new();
	struct tpu_job_op *op;
	size_t len;
	void *blob;

	jb_grid(b, 2, grid, "pp");
	z = jb_operand(b, TPU_ROLE_OUTPUT, slot, TPU_DTYPE_INT32, 2, s, b2, "pid0 pid1");
	op = jb_zero(b, JB_OPND(z), NULL);
	op->opcode = TPU_OP_PRNG_SEED;
	op->scalar_index = jb_prog(b, "1");
	blob = jb_finish(b, &len);
	ASSERT_NE(0, tdev_run(d, blob, len, 0, &res));
	EXPECT_NE(NULL, strstr(res.message, "dst must be (none) for opcode prng_seed")) { TH_LOG("%s", res.message); }
	free(blob);
	jb_free(b);
	tdev_free(d);
}

TEST_HARNESS_MAIN
