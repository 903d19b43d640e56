// SPDX-License-Identifier: MIT
/*
 * Host test: the index-map compiler. Valid forms against the postfix the
 * engine's tests write by hand; each error with its column and caret.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt.h"
#include "kselftest_harness.h"

static const char *const prefetch[] = { "rows", "mask" };

static const struct tpurt_index_map_env env3 = {
	.grid_rank = 3, .num_prefetch = 2, .prefetch_names = prefetch,
};

/* The program of @text in postfix, or the error message. */
static const char *compile(const char *text, const struct tpurt_index_map_env *env)
{
	static char out[512];
	struct tpurt_program prog;

	if (tpurt_index_map_compile(text, env, &prog))
		snprintf(out, sizeof(out), "error: %s", tpurt_last_error());
	else if (tpurt_program_format(&prog, out, sizeof(out)))
		snprintf(out, sizeof(out), "format: %s", tpurt_last_error());
	return out;
}

#define EXPECT_PROG(want, text) EXPECT_STREQ(want, compile(text, &env3))

TEST(guide_index_maps)
{
	EXPECT_PROG("pid0 pid2", "i, j, k -> i, k");
	EXPECT_PROG("pid2 pid1", "i, j, k -> k, j");
	EXPECT_PROG("pid1 pid2", "i, j, k -> j, k");
	EXPECT_PROG("pid0 pid1", "i, j, k -> (i, j)");
	EXPECT_PROG("pid0 pid1", "m,n,kk->m,n");
	EXPECT_PROG("0 pid1", "i, j, k -> 0, j");
}

TEST(scalar_prefetch)
{
	/* by position after the grid indices, as Pallas passes refs */
	EXPECT_PROG("pid0 smem0 pid2", "i, j, k, s -> s[i], k");
	EXPECT_PROG("pid0 4 * pid2 + smem1", "i, j, k, r, m -> m[i * 4 + k]");
	/* by the operand's own name */
	EXPECT_PROG("pid0 smem0 pid1", "i, j, k -> rows[i], j");
	EXPECT_PROG("pid0 smem0 smem0", "i, j, k -> rows[rows[i]]");
}

TEST(arithmetic_and_precedence)
{
	EXPECT_PROG("pid0 2 pid1 * +", "i, j, k -> i + 2 * j");
	EXPECT_PROG("pid0 2 + pid1 *", "i, j, k -> (i + 2) * j");
	EXPECT_PROG("pid0 3 // pid1 2 % -", "i, j, k -> i // 3 - j % 2");
	EXPECT_PROG("pid0 pid1 - pid2 -", "i, j, k -> i - j - k");
	EXPECT_PROG("-5", "i, j, k -> -5");
	EXPECT_PROG("0 pid0 - pid1 *", "i, j, k -> -i * j");
	EXPECT_PROG("pid0 pid1 min 7 max", "i, j, k -> max(min(i, j), 7)");
	EXPECT_PROG("2147483647 -2147483648", "i, j, k -> 2147483647, -2147483648");
}

TEST(predicates)
{
	EXPECT_PROG("pid2 0 ==", "i, j, k -> k == 0");
	EXPECT_PROG("pid2 0 ==", "k == 0");	/* default names i, j, k */
	EXPECT_PROG("pid2 nprog2 1 - ==", "k == num_programs(k) - 1");
	EXPECT_PROG("pid2 nprog2 1 - ==", "k == num_programs(2) - 1");
	EXPECT_PROG("pid0 0 > pid1 2 < and", "i > 0 and j < 2");
	EXPECT_PROG("pid0 not pid1 pid2 != or", "not i or j != k");
	EXPECT_PROG("pid0 smem1 0 !=", "mask[i] != 0");
	EXPECT_PROG("pid1", "program_id(1)");
}

TEST(index_names_of_the_grid)
{
	const struct tpurt_index_map_env e = {
		.grid_rank = 2, .index_names = "row, col",
	};

	EXPECT_STREQ("pid1 1 <=", compile("col <= 1", &e));
	EXPECT_STREQ("pid0", compile("a, b -> a", &e));
}

/* The error message of @text contains @what at column @col with a caret. */
static void expect_error(struct __test_metadata *_metadata, const char *text,
			 const char *what, int col)
{
	struct tpurt_program prog;
	char at[32], caret[300];
	const char *msg;

	ASSERT_EQ(-EINVAL, tpurt_index_map_compile(text, &env3, &prog)) TH_LOG("%s", text);
	msg = tpurt_last_error();
	snprintf(at, sizeof(at), "at column %d\n", col);
	snprintf(caret, sizeof(caret), "\n    %s\n    %*s^", text, col - 1, "");
	EXPECT_NE(NULL, strstr(msg, what)) TH_LOG("%s -> %s", text, msg);
	EXPECT_NE(NULL, strstr(msg, at)) TH_LOG("%s -> %s", text, msg);
	EXPECT_NE(NULL, strstr(msg, caret)) TH_LOG("%s -> %s", text, msg);
}

TEST(errors_point_at_the_character)
{
	expect_error(_metadata, "i, j, k -> i, q", "unknown name 'q'", 15);
	expect_error(_metadata, "i, j -> i", "the grid has 3 dimensions but 2", 6);
	expect_error(_metadata, "i, j, k -> i +", "expression ends early", 15);
	expect_error(_metadata, "i, j, k -> i $ k", "unexpected '$'", 14);
	expect_error(_metadata, "i, j, k -> i / 2", "unexpected '/'", 14);
	expect_error(_metadata, "i, j, k -> (i, k", "expected ')'", 14);
	expect_error(_metadata, "i, j, k -> 4294967296", "does not fit in 32 bits", 12);
	expect_error(_metadata, "i, j, i -> i", "'i' named twice", 7);
	expect_error(_metadata, "i, j, k -> rows", "must be indexed", 16);
	expect_error(_metadata, "i, j, k -> i[0]", "is a grid index", 13);
	expect_error(_metadata, "i, j, k -> 0 < i < 2", "chained comparisons", 18);
	expect_error(_metadata, "i, j, k -> num_programs(q)", "'q' is not a grid index", 25);
	expect_error(_metadata, "i, j, k -> program_id(3)", "expected a grid dimension", 23);
	expect_error(_metadata, "i, j, k, a, b, c -> i", "more names than grid indices (3)", 16);
	expect_error(_metadata, "i, j, k ->", "nothing after '->'", 11);
	expect_error(_metadata, "i j k -> i", "expected ',' or '->'", 3);
}

TEST(too_deep_or_too_long)
{
	char text[512];
	struct tpurt_program prog;
	int at;

	/* 17 nested additions need 17 stack slots: the device has 16 */
	at = snprintf(text, sizeof(text), "i, j, k -> ");
	for (int i = 0; i < 17; i++)
		at += snprintf(text + at, sizeof(text) - at, "1 + (");
	at += snprintf(text + at, sizeof(text) - at, "1");
	for (int i = 0; i < 17; i++)
		at += snprintf(text + at, sizeof(text) - at, ")");
	EXPECT_EQ(-EINVAL, tpurt_index_map_compile(text, &env3, &prog));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "stack")) TH_LOG("%s", tpurt_last_error());

	at = snprintf(text, sizeof(text), "i, j, k -> 0");
	for (int i = 0; i < 40; i++)
		at += snprintf(text + at, sizeof(text) - at, " + i");
	EXPECT_EQ(-EINVAL, tpurt_index_map_compile(text, &env3, &prog));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "longer than 64")) TH_LOG("%s", tpurt_last_error());
}

TEST(result_count_is_counted)
{
	struct tpurt_program prog;

	ASSERT_EQ(0, tpurt_index_map_compile("i, j, k -> i, j, k, 0", &env3, &prog));
	EXPECT_EQ(4, prog.nresults);
	ASSERT_EQ(0, tpurt_index_map_compile("i, j, k -> (i,)", &env3, &prog));
	EXPECT_EQ(1, prog.nresults);
}

TEST_HARNESS_MAIN
