// SPDX-License-Identifier: MIT
/*
 * Host test: the scalar core (index maps and predicates): Python-style
 * floor division and modulo, comparisons, SMEM loads, the verifier, and a
 * block-sparse matmul whose index maps and predicate read scalar prefetch.
 */
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "tpu_plan.h"
#include "kselftest_harness.h"

static struct tpu_plan *plan_with(const char *prog, struct tpu_plan_prog *p)
{
	struct tpu_plan *plan = calloc(1, sizeof(*plan));
	struct jb *b = jb_new();
	struct tpu_job_prog jp = jb_prog(b, prog);
	size_t len;
	uint8_t *blob = jb_finish(b, &len);
	const struct tpu_job_header *h = (const void *)blob;
	const struct tpu_job_insn *in = (const void *)(blob + h->code_offset);

	for (unsigned int i = 0; i < h->num_insns; i++)
		plan->insn[i] = (struct tpu_plan_insn){ in[i].op, in[i].arg };
	plan->num_insns = h->num_insns;
	plan->grid_rank = 3;
	plan->grid[0] = 4, plan->grid[1] = 5, plan->grid[2] = 6;
	plan->num_scalar_prefetch = 1;
	plan->operand[0].elems = 3;
	*p = (struct tpu_plan_prog){ jp.offset, jp.len };
	free(blob);
	jb_free(b);
	return plan;
}

static int64_t eval(struct __test_metadata *_metadata, const char *prog)
{
	static const int64_t pid[3] = { 1, 2, 3 };
	static const int32_t smem[3] = { 10, -20, 30 };
	struct tpu_scalar_fault f;
	struct tpu_plan_prog p;
	struct tpu_plan *plan = plan_with(prog, &p);
	char why[128];
	int64_t v = -999;

	EXPECT_EQ(0, tpu_scalar_verify(plan, p, 1, why, sizeof(why)))
		TH_LOG("%s: %s", prog, why);
	struct tpu_scalar_ctx ctx = { pid, smem, NULL, NULL };

	EXPECT_EQ(0, tpu_scalar_run(plan, p, &ctx, &v, 1, &f)) TH_LOG("%s", prog);
	free(plan);
	return v;
}

TEST(arithmetic_is_pythons)
{
	EXPECT_EQ(-4, eval(_metadata, "-7 2 //"));
	EXPECT_EQ(-4, eval(_metadata, "7 -2 //"));
	EXPECT_EQ(3, eval(_metadata, "7 2 //"));
	EXPECT_EQ(1, eval(_metadata, "-7 2 %"));
	EXPECT_EQ(-1, eval(_metadata, "7 -2 %"));
	EXPECT_EQ(0, eval(_metadata, "6 3 %"));
	EXPECT_EQ(-5, eval(_metadata, "2 7 -"));
	EXPECT_EQ(42, eval(_metadata, "6 7 *"));
	EXPECT_EQ(2, eval(_metadata, "2 9 min"));
	EXPECT_EQ(9, eval(_metadata, "2 9 max"));
}

TEST(comparisons_and_logic)
{
	EXPECT_EQ(1, eval(_metadata, "3 3 =="));
	EXPECT_EQ(0, eval(_metadata, "3 3 !="));
	EXPECT_EQ(1, eval(_metadata, "2 3 <"));
	EXPECT_EQ(0, eval(_metadata, "3 2 <="));
	EXPECT_EQ(1, eval(_metadata, "3 2 >"));
	EXPECT_EQ(1, eval(_metadata, "3 3 >="));
	EXPECT_EQ(0, eval(_metadata, "1 0 and"));
	EXPECT_EQ(1, eval(_metadata, "0 5 or"));
	EXPECT_EQ(1, eval(_metadata, "0 not"));
}

TEST(grid_and_smem)
{
	EXPECT_EQ(3, eval(_metadata, "pid2"));
	EXPECT_EQ(5, eval(_metadata, "nprog1"));
	/* program_id(2) == nsteps - 1 with nsteps 6, pid 3: false */
	EXPECT_EQ(0, eval(_metadata, "pid2 nprog2 1 - =="));
	EXPECT_EQ(-20, eval(_metadata, "pid0 smem0"));
	EXPECT_EQ(30, eval(_metadata, "pid1 smem0"));
}

static unsigned int fault_of(const char *prog, int64_t *index)
{
	static const int64_t pid[3] = { 1, 2, 0 };
	static const int32_t smem[3] = { 0 };
	struct tpu_scalar_fault f = { 0 };
	struct tpu_plan_prog p;
	struct tpu_plan *plan = plan_with(prog, &p);
	int64_t v;

	struct tpu_scalar_ctx ctx = { pid, smem, NULL, NULL };

	if (!tpu_scalar_run(plan, p, &ctx, &v, 1, &f))
		f.code = 0;
	*index = f.index;
	free(plan);
	return f.code;
}

TEST(run_time_faults)
{
	int64_t idx;

	EXPECT_EQ(TPU_JOB_ERR_DIV_ZERO, fault_of("pid0 pid2 //", &idx));
	EXPECT_EQ(TPU_JOB_ERR_DIV_ZERO, fault_of("5 0 %", &idx));
	EXPECT_EQ(TPU_JOB_ERR_SMEM_RANGE, fault_of("3 smem0", &idx));
	EXPECT_EQ(3, idx);
	EXPECT_EQ(TPU_JOB_ERR_SMEM_RANGE, fault_of("-1 smem0", &idx));
	EXPECT_EQ(0, fault_of("2 smem0", &idx));
}

/* The plain entry point: code and an environment, no plan. Without SMEM
 * data (a model-only run) loads read 0, still range-checked. */
TEST(run_code_on_an_environment)
{
	static const struct tpu_plan_insn code[] = {
		{ TPU_INSN_PUSH_PID, 1 }, { TPU_INSN_LOAD_SMEM, 1 },
		{ TPU_INSN_PUSH_NPROG, 0 }, { TPU_INSN_ADD, 0 },
	};
	static const uint64_t grid[2] = { 7, 9 }, len[2] = { 0, 3 };
	static const int32_t t[3] = { 100, 200, 300 };
	const int32_t *arrays[2] = { NULL, t };
	int64_t pid[2] = { 0, 2 }, v = -1;
	struct tpu_scalar_env env = { grid, pid, arrays, len };
	struct tpu_scalar_fault f = { 0 };
	char why[128];

	ASSERT_EQ(0, tpu_scalar_verify_code(code, 4, 2, 2, 1, why, sizeof(why)))
		TH_LOG("%s", why);
	EXPECT_EQ(0, tpu_scalar_run_code(code, 4, &env, &v, 1, &f));
	EXPECT_EQ(307, v);
	env.smem = NULL;
	EXPECT_EQ(0, tpu_scalar_run_code(code, 4, &env, &v, 1, &f));
	EXPECT_EQ(7, v);
	pid[1] = 3;
	EXPECT_EQ(-1, tpu_scalar_run_code(code, 4, &env, &v, 1, &f));
	EXPECT_EQ(TPU_JOB_ERR_SMEM_RANGE, f.code);
	EXPECT_EQ(1, f.operand);
	EXPECT_EQ(3, f.index);
	/* programs are numbered from their first instruction */
	EXPECT_EQ(-1, tpu_scalar_verify_code(code, 4, 1, 2, 1, why, sizeof(why)));
	EXPECT_STREQ("insn 0: grid dimension 1, grid rank is 1", why);
}

static int verify(const char *prog, unsigned int nresults)
{
	struct tpu_plan_prog p;
	struct tpu_plan *plan = plan_with(prog, &p);
	char why[128];
	int ret = tpu_scalar_verify(plan, p, nresults, why, sizeof(why));

	free(plan);
	return ret;
}

TEST(verifier_rejects_malformed_programs)
{
	EXPECT_EQ(0, verify("pid0 pid1", 2));
	EXPECT_NE(0, verify("pid0 pid1", 1));		/* result count */
	EXPECT_NE(0, verify("+", 1));			/* underflow */
	EXPECT_NE(0, verify("pid3", 1));		/* grid rank 3 */
	EXPECT_NE(0, verify("nprog-1", 1));
	EXPECT_NE(0, verify("0 smem1", 1));		/* not scalar prefetch */
	EXPECT_NE(0, verify("1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1", 17)); /* depth */
	EXPECT_EQ(0, verify("1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1", 16));
}

/*
 * Block-sparse matmul: z block row i = sum over k of mask[i][k] *
 * x[rows[i], k] @ y[k, j], rows and mask scalar-prefetched ("i, j, k ->
 * s[i], k" and a pl.when on the mask).
 */
TEST(block_sparse_matmul_through_scalar_prefetch)
{
	enum { GI = 3, GJ = 2, GK = 4, B = 8, XR = 5 };
	static const int32_t rows[GI] = { 4, 0, 2 };
	static const int32_t mask[GI * GK] = { 1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1 };
	struct tdev *d = tdev_new(1 << 20, 2);
	uint64_t rs[1] = { GI }, ms[1] = { GI * GK };
	uint64_t xs[2] = { XR * B, GK * B }, ys[2] = { GK * B, GJ * B };
	uint64_t zs[2] = { GI * B, GJ * B };
	uint32_t blk[2] = { B, B }, grid[3] = { GI, GJ, GK };
	unsigned int rsl = tdev_alloc(d, sizeof(rows)), msl = tdev_alloc(d, sizeof(mask));
	unsigned int xsl = tdev_alloc(d, xs[0] * xs[1] * 4);
	unsigned int ysl = tdev_alloc(d, ys[0] * ys[1] * 4);
	unsigned int zsl = tdev_alloc(d, zs[0] * zs[1] * 4);
	float *x = tdev_ptr(d, xsl), *y = tdev_ptr(d, ysl), *z = tdev_ptr(d, zsl);
	struct jb *b = jb_new();
	struct tpu_job_result res;
	size_t len;
	void *blob;
	int bad = 0;

	memcpy(tdev_ptr(d, rsl), rows, sizeof(rows));
	memcpy(tdev_ptr(d, msl), mask, sizeof(mask));
	ref_fill(x, TPU_DTYPE_F32, xs[0] * xs[1], 1, -3, 3);
	ref_fill(y, TPU_DTYPE_F32, ys[0] * ys[1], 2, -3, 3);
	jb_grid(b, 3, grid, "ppa");
	jb_operand(b, TPU_ROLE_SCALAR_PREFETCH, rsl, TPU_DTYPE_INT32, 1, rs, NULL, NULL);
	jb_operand(b, TPU_ROLE_SCALAR_PREFETCH, msl, TPU_DTYPE_INT32, 1, ms, NULL, NULL);
	jb_operand(b, TPU_ROLE_INPUT, xsl, TPU_DTYPE_F32, 2, xs, blk, "pid0 smem0 pid2");
	jb_operand(b, TPU_ROLE_INPUT, ysl, TPU_DTYPE_F32, 2, ys, blk, "pid2 pid1");
	jb_operand(b, TPU_ROLE_OUTPUT, zsl, TPU_DTYPE_F32, 2, zs, blk, "pid0 pid1");
	jb_zero(b, JB_OPND(4), "pid2 0 ==");
	jb_dot(b, JB_OPND(4), JB_OPND(2), JB_OPND(3), TPU_DOT_ACCUMULATE,
	       "pid0 nprog2 * pid2 + smem1");
	blob = jb_finish(b, &len);
	ASSERT_EQ(0, tdev_run(d, blob, len, 0, &res)) TH_LOG("%s", res.message);
	/* only unmasked dots count */
	EXPECT_EQ(6ull * GJ * 2 * B * B * B, res.stats.mxu_flops);
	for (int i = 0; i < GI * B; i++)
		for (int j = 0; j < GJ * B; j++) {
			float acc = 0;

			for (int p = 0; p < GK * B; p++)
				if (mask[(i / B) * GK + p / B])
					acc += x[(rows[i / B] * B + i % B) * xs[1] + p] *
					       y[p * ys[1] + j];
			bad += acc != z[i * zs[1] + j];
		}
	EXPECT_EQ(0, bad);
	free(blob);
	jb_free(b);
	tdev_free(d);
}

TEST_HARNESS_MAIN
