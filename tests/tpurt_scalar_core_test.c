// SPDX-License-Identifier: MIT
/*
 * Host test: the runtime's evaluation of index maps and the device's
 * scalar core agree on the edge cases, because they are one code
 * (rules/tpu_scalar.c). Each case is index-map text compiled by libtpurt
 * and run three ways: through tpurt_program_eval (what the schedule dump
 * uses), through the device's tpu_scalar_run on a plan holding the same
 * bytecode, and, for where a program fails, as an index map of a job the
 * engine runs. Values and errors must match, and match Python's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "tpu_plan.h"
#include "../libtpurt/tpurt_private.h"
#include "kselftest_harness.h"

/* INT64_MIN from 32-bit constants: -2^31 * 2^16 * 2^16. */
#define MIN64	"(-2147483648 * 65536 * 65536)"

/* The environment: grid (4, 5, 6), scalar prefetch s = [10, -20, 30] and
 * t = [7, 8]; the direct runs are at grid index (i, j, k) = (1, 2, 3). */
static const char *const prefetch_names[] = { "s", "t" };
static const struct tpurt_index_map_env env = {
	.grid_rank = 3, .num_prefetch = 2, .prefetch_names = prefetch_names,
};
static const int64_t grid[3] = { 4, 5, 6 };
static const int64_t pid[3] = { 1, 2, 3 };
static const int32_t s_vals[3] = { 10, -20, 30 }, t_vals[2] = { 7, 8 };

enum { OK = 0, DIV = -EDOM, RANGE = -ERANGE };

static const struct scalar_case {
	const char *text;
	int err;		/* OK, DIV or RANGE */
	int64_t value;
} cases[] = {
	/* INT64_MIN // -1 wraps; x % -1 is 0 */
	{ MIN64 " // -1", OK, INT64_MIN },
	{ MIN64 " % -1", OK, 0 },
	{ "7 % -1", OK, 0 },
	{ "-7 % -1", OK, 0 },
	{ "(i - 8) % -1", OK, 0 },
	{ MIN64 " // 1", OK, INT64_MIN },
	{ MIN64 " // 2", OK, INT64_MIN / 2 },
	{ MIN64 " % 3", OK, 1 },	/* Python: -2**63 % 3 == 1 */
	/* floor division and modulo, Python's signs */
	{ "-7 // 2", OK, -4 },
	{ "7 // -2", OK, -4 },
	{ "-7 // -2", OK, 3 },
	{ "7 // 2", OK, 3 },
	{ "-7 % 2", OK, 1 },
	{ "7 % -2", OK, -1 },
	{ "-7 % -2", OK, -1 },
	{ "-6 % 3", OK, 0 },
	{ "(i - 8) // k", OK, -3 },
	{ "(i - 8) % k", OK, 2 },
	/* 64-bit wrap-around of +, -, * */
	{ MIN64 " - 1", OK, INT64_MAX },
	{ MIN64 " - 1 + 1", OK, INT64_MIN },
	{ "0 - " MIN64, OK, INT64_MIN },
	{ "-" MIN64, OK, INT64_MIN },
	{ MIN64 " * 2", OK, 0 },
	{ MIN64 " * -1", OK, INT64_MIN },
	{ "65536 * 65536 * 65536 * 65536", OK, 0 },
	{ "2147483647 * 2147483647 * 2147483647", OK, 0x400000017fffffffLL },
	/* division by zero, also under an SMEM load */
	{ "i // 0", DIV, 0 },
	{ "i % 0", DIV, 0 },
	{ "i // (j - 2)", DIV, 0 },
	{ "i % (j - 2)", DIV, 0 },
	{ MIN64 " // 0", DIV, 0 },
	{ "s[i // 0]", DIV, 0 },
	/* SMEM indices: -1, len, len + 1; a 2-element array's last index */
	{ "s[-1]", RANGE, 0 },
	{ "s[i - 2]", RANGE, 0 },
	{ "s[0]", OK, 10 },
	{ "s[2]", OK, 30 },
	/* past s's end but inside the job's SMEM: t's words, as on a TPU */
	{ "s[3]", OK, 7 },
	{ "s[4]", OK, 8 },
	{ "s[5]", RANGE, 0 },
	{ "s[" MIN64 "]", RANGE, 0 },
	{ "t[1]", OK, 8 },
	{ "t[j - 1]", OK, 8 },
	{ "t[2]", RANGE, 0 },
	{ "t[-1]", RANGE, 0 },
	{ "t[s[0]]", RANGE, 0 },
	{ "t[s[0] - 10]", OK, 7 },
	{ "s[t[1] - 7] + s[1]", OK, -40 },
};

#define NCASES	(sizeof(cases) / sizeof(cases[0]))

static int compile(const struct scalar_case *c, struct tpurt_program *prog)
{
	char text[256];

	snprintf(text, sizeof(text), "i, j, k -> %s", c->text);
	return tpurt_index_map_compile(text, &env, prog);
}

/* The runtime: libtpurt's evaluation, as the schedule dump runs it (its
 * arrays back to back, as the device's SMEM holds them). */
static int runtime_eval(const struct tpurt_program *prog, const int64_t *at,
			int64_t *v)
{
	static const int32_t image[5] = { 10, -20, 30, 7, 8 };	/* s, t */
	const int32_t *smem[2] = { image, image + 3 };
	const uint64_t len[2] = { 3, 2 }, reach[2] = { 5, 2 };

	return tpurt_program_eval(prog, at, grid, smem, len, reach, v);
}

/* The device: its verifier and scalar core on a plan with the same code,
 * its SMEM laid out as a job's (s at word 0, t after it). */
static int device_eval(struct __test_metadata *_metadata,
		       const struct tpurt_program *prog, int64_t *v,
		       struct tpu_scalar_fault *f)
{
	static const int32_t smem[5] = { 10, -20, 30, 7, 8 };
	struct tpu_plan *plan = calloc(1, sizeof(*plan));
	struct tpu_plan_prog p = { 0, prog->len };
	struct tpu_scalar_ctx ctx;
	char why[128];
	int ret;

	for (unsigned int i = 0; i < prog->len; i++)
		plan->insn[i] = (struct tpu_plan_insn){ prog->insn[i].op,
							prog->insn[i].arg };
	plan->num_insns = prog->len;
	plan->grid_rank = 3;
	for (int d = 0; d < 3; d++)
		plan->grid[d] = (uint64_t)grid[d];
	plan->num_operands = plan->num_scalar_prefetch = 2;
	plan->operand[0].elems = 3;
	plan->operand[1].elems = 2;
	plan->operand[1].smem_base = 3;
	plan->smem_words = 5;
	EXPECT_EQ(0, tpu_scalar_verify(plan, p, 1, why, sizeof(why))) TH_LOG("%s", why);
	ctx = (struct tpu_scalar_ctx){ pid, smem, NULL, NULL };
	ret = tpu_scalar_run(plan, p, &ctx, v, 1, f);
	free(plan);
	if (!ret)
		return OK;
	return f->code == TPU_JOB_ERR_DIV_ZERO ? DIV :
	       f->code == TPU_JOB_ERR_SMEM_RANGE ? RANGE : -1;
}

TEST(runtime_and_device_agree_on_values_and_errors)
{
	for (size_t i = 0; i < NCASES; i++) {
		const struct scalar_case *c = &cases[i];
		struct tpurt_program prog;
		struct tpu_scalar_fault f;
		int64_t rv = -999, dv = -999;
		int rerr, derr;

		ASSERT_EQ(0, compile(c, &prog)) TH_LOG("%s: %s", c->text, tpurt_last_error());
		rerr = runtime_eval(&prog, pid, &rv);
		derr = device_eval(_metadata, &prog, &dv, &f);
		EXPECT_EQ(c->err, rerr) TH_LOG("runtime: %s", c->text);
		EXPECT_EQ(c->err, derr) TH_LOG("device: %s", c->text);
		if (c->err == OK) {
			EXPECT_EQ(c->value, rv) TH_LOG("runtime: %s", c->text);
			EXPECT_EQ(c->value, dv) TH_LOG("device: %s", c->text);
		}
		/* the device names the array and the index it refused */
		if (c->err == RANGE && derr == RANGE)
			EXPECT_TRUE(f.index < 0 || f.index >= (f.operand ? 2 : 3))
				TH_LOG("%s: operand %d index %lld", c->text, f.operand,
				       (long long)f.index);
	}
}

/* The first row-major step of the grid where the runtime's evaluation
 * fails, and how; UINT64_MAX and OK where none does. */
static uint64_t runtime_first_failure(const struct tpurt_program *prog, int *err)
{
	uint64_t step = 0;
	int64_t at[3], v;

	for (at[0] = 0; at[0] < grid[0]; at[0]++)
		for (at[1] = 0; at[1] < grid[1]; at[1]++)
			for (at[2] = 0; at[2] < grid[2]; at[2]++, step++) {
				*err = runtime_eval(prog, at, &v);
				if (*err)
					return step;
			}
	*err = OK;
	return UINT64_MAX;
}

/*
 * A job whose input's index map is the case's program times 0 (block 0
 * whatever the value), on one core in row-major order: the engine fails it
 * at the step, and with the error, the runtime predicts.
 */
static int device_job(struct __test_metadata *_metadata,
		      const struct tpurt_program *prog, uint64_t *step)
{
	struct tdev *d = tdev_new(1 << 20, 1);
	uint64_t ss[1] = { 3 }, ts[1] = { 2 }, xs[1] = { 1 };
	uint32_t xb[1] = { 1 }, g[3] = { 4, 5, 6 };
	unsigned int s = tdev_alloc(d, sizeof(s_vals)), t = tdev_alloc(d, sizeof(t_vals));
	unsigned int x = tdev_alloc(d, 4), z = tdev_alloc(d, 4);
	struct tpu_job_result res;
	char map[600];
	struct jb *b = jb_new();
	size_t len;
	void *blob;
	int ret;

	memcpy(tdev_ptr(d, s), s_vals, sizeof(s_vals));
	memcpy(tdev_ptr(d, t), t_vals, sizeof(t_vals));
	ASSERT_EQ(0, tpurt_program_format(prog, map, sizeof(map) - 8));
	strcat(map, " 0 *");
	jb_grid(b, 3, g, "aaa");
	jb_operand(b, TPU_ROLE_SCALAR_PREFETCH, s, TPU_DTYPE_INT32, 1, ss, NULL, NULL);
	jb_operand(b, TPU_ROLE_SCALAR_PREFETCH, t, TPU_DTYPE_INT32, 1, ts, NULL, NULL);
	jb_operand(b, TPU_ROLE_INPUT, x, TPU_DTYPE_F32, 1, xs, xb, map);
	jb_operand(b, TPU_ROLE_OUTPUT, z, TPU_DTYPE_F32, 1, xs, xb, "0");
	jb_unary(b, TPU_UNARY_IDENTITY, JB_OPND(3), JB_OPND(2), NULL);
	blob = jb_finish(b, &len);
	ret = tdev_run(d, blob, len, 0, &res);
	*step = res.error.step;
	if (ret)
		EXPECT_EQ(2, res.error.operand) TH_LOG("%s", res.message);
	free(blob);
	jb_free(b);
	tdev_free(d);
	return ret == TPU_JOB_OK ? OK : ret == TPU_JOB_ERR_DIV_ZERO ? DIV :
	       ret == TPU_JOB_ERR_SMEM_RANGE ? RANGE : -1;
}

TEST(jobs_fail_where_and_how_the_runtime_predicts)
{
	for (size_t i = 0; i < NCASES; i++) {
		const struct scalar_case *c = &cases[i];
		struct tpurt_program prog;
		uint64_t want_step, got_step = 0;
		int want, got;

		ASSERT_EQ(0, compile(c, &prog)) TH_LOG("%s: %s", c->text, tpurt_last_error());
		want_step = runtime_first_failure(&prog, &want);
		got = device_job(_metadata, &prog, &got_step);
		EXPECT_EQ(want, got) TH_LOG("%s", c->text);
		if (want != OK)
			EXPECT_EQ(want_step, got_step) TH_LOG("%s", c->text);
	}
}

/* What the compiler emits passes the device's verifier: a program too deep
 * for the device's stack never leaves the compiler. */
TEST(compiled_programs_are_the_devices_to_run)
{
	struct tpurt_program prog;
	char why[128];
	struct tpu_plan_insn code[TPURT_PROGRAM_MAX_LEN];

	ASSERT_EQ(0, tpurt_index_map_compile("i, j, k -> s[t[k // 2] - 7], k % -1, i",
					     &env, &prog));
	for (unsigned int i = 0; i < prog.len; i++)
		code[i] = (struct tpu_plan_insn){ prog.insn[i].op, prog.insn[i].arg };
	EXPECT_EQ(0, tpu_scalar_verify_code(code, prog.len, 3, 2, 3, why, sizeof(why)))
		TH_LOG("%s", why);
	/* the same code needs the grid and both arrays it names */
	EXPECT_EQ(-1, tpu_scalar_verify_code(code, prog.len, 2, 2, 3, why, sizeof(why)));
	EXPECT_NE(NULL, strstr(why, "grid dimension 2, grid rank is 2")) TH_LOG("%s", why);
	EXPECT_EQ(-1, tpu_scalar_verify_code(code, prog.len, 3, 1, 3, why, sizeof(why)));
	EXPECT_NE(NULL, strstr(why, "operand 1 is not scalar prefetch")) TH_LOG("%s", why);
	EXPECT_EQ(-1, tpu_scalar_verify_code(code, prog.len, 3, 2, 2, why, sizeof(why)));
	EXPECT_NE(NULL, strstr(why, "leaves 3 values, 2 needed")) TH_LOG("%s", why);
}

TEST_HARNESS_MAIN
