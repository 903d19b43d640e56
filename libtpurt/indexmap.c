// SPDX-License-Identifier: MIT
/*
 * Index maps and predicates: the guide's lambdas in text ("i, j, k -> i,
 * k"), compiled by recursive descent straight into the scalar core's
 * postfix bytecode (uapi/tpu_job.h, enum tpu_insn_op). The syntax is in
 * tpurt.h. Errors carry the 1-based column and a caret line, because the
 * text is all the user wrote. What the compiler emits passes the device's
 * verifier, and runs on the host on the device's scalar core
 * (rules/tpu_scalar.c): the runtime has no interpreter of its own.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpu_plan.h"
#include "tpurt_private.h"

#define MAX_NAMES	(TPU_JOB_MAX_GRID_RANK + TPU_JOB_MAX_OPERANDS)

enum tok_kind { T_END, T_NUM, T_NAME, T_PUNCT, T_BAD };

struct tok {
	enum tok_kind kind;
	const char *start;
	size_t len;
};

struct parser {
	const char *text;
	const char *what;		/* "index map of input 'x'" */
	const char *p;			/* next unread character */
	struct tok t;			/* current token */
	const struct tpurt_index_map_env *env;
	/* grid index names, then positional scalar-prefetch names */
	struct tok names[MAX_NAMES];
	int nnames;
	const char *default_names;	/* when there is no "->" */
	struct tpurt_program *prog;
	const struct tpurt_body_names *body;	/* kernel-body programs only */
	int depth;
	int err;
};

static void next(struct parser *ps)
{
	static const char *const two[] = { "->", "//", "==", "!=", "<=", ">=" };
	const char *p = ps->p;

	while (isspace((unsigned char)*p))
		p++;
	ps->t.start = p;
	if (!*p) {
		ps->t.kind = T_END;
		ps->t.len = 0;
	} else if (isdigit((unsigned char)*p)) {
		while (isalnum((unsigned char)*p) || *p == '_')
			p++;
		ps->t.kind = T_NUM;
	} else if (isalpha((unsigned char)*p) || *p == '_') {
		while (isalnum((unsigned char)*p) || *p == '_')
			p++;
		ps->t.kind = T_NAME;
	} else {
		ps->t.kind = T_PUNCT;
		p++;
		for (size_t i = 0; i < sizeof(two) / sizeof(two[0]); i++)
			if (!strncmp(ps->t.start, two[i], 2)) {
				p++;
				break;
			}
		if (!strchr("->,()[]+*/%=!<>.", *ps->t.start) ||
		    (p - ps->t.start == 1 && strchr("/=!", *ps->t.start)))
			ps->t.kind = T_BAD;
	}
	ps->t.len = (size_t)(p - ps->t.start);
	ps->p = p;
}

static int is(const struct parser *ps, const char *s)
{
	return ps->t.kind != T_END && ps->t.kind != T_NUM &&
	       ps->t.len == strlen(s) && !strncmp(ps->t.start, s, ps->t.len);
}

/* The first error wins; later ones are consequences. */
__attribute__((format(printf, 3, 4)))
static int fail_at(struct parser *ps, const char *at, const char *fmt, ...)
{
	char msg[192];
	int col = (int)(at - ps->text) + 1;
	va_list ap;

	if (ps->err)
		return ps->err;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ps->err = tpurt_fail(-EINVAL, "%s: %s at column %d\n    %s\n    %*s^",
			     ps->what, msg, col, ps->text, col - 1, "");
	return ps->err;
}

static void emit(struct parser *ps, uint8_t op, int32_t arg, int stack_delta)
{
	struct tpurt_program *prog = ps->prog;

	if (ps->err)
		return;
	if (prog->len >= TPURT_PROGRAM_MAX_LEN) {
		fail_at(ps, ps->t.start, "longer than %d instructions",
			TPURT_PROGRAM_MAX_LEN);
		return;
	}
	ps->depth += stack_delta;
	if (ps->depth > TPU_JOB_MAX_STACK) {
		fail_at(ps, ps->t.start,
			"needs more than %d values on the scalar core's stack",
			TPU_JOB_MAX_STACK);
		return;
	}
	prog->insn[prog->len++] = (struct tpurt_insn){ op, arg };
}

static int tok_eq(const struct tok *a, const struct tok *b)
{
	return a->len == b->len && !strncmp(a->start, b->start, a->len);
}

/* Grid dimension named by the current token, or -1. */
static int grid_index(struct parser *ps, const struct tok *t)
{
	for (int d = 0; d < ps->env->grid_rank && d < ps->nnames; d++)
		if (tok_eq(&ps->names[d], t))
			return d;
	return -1;
}

/* Scalar-prefetch operand named by @t (positionally or by its name), or -1. */
static int prefetch_index(struct parser *ps, const struct tok *t)
{
	const struct tpurt_index_map_env *env = ps->env;

	for (int i = env->grid_rank; i < ps->nnames; i++)
		if (tok_eq(&ps->names[i], t))
			return i - env->grid_rank;
	for (int i = 0; i < env->num_prefetch; i++)
		if (env->prefetch_names && env->prefetch_names[i] &&
		    strlen(env->prefetch_names[i]) == t->len &&
		    !strncmp(env->prefetch_names[i], t->start, t->len))
			return i;
	return -1;
}

static void expect(struct parser *ps, const char *s)
{
	if (is(ps, s))
		next(ps);
	else
		fail_at(ps, ps->t.start, "expected '%s'", s);
}

static void parse_expr(struct parser *ps);

static int parse_int(struct parser *ps, int negate, int32_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(ps->t.start, &end, 10);
	if (end != ps->t.start + ps->t.len)
		return fail_at(ps, ps->t.start, "bad number '%.*s'",
			       (int)ps->t.len, ps->t.start);
	if (negate)
		v = -v;
	if (errno || v < INT32_MIN || v > INT32_MAX)
		return fail_at(ps, ps->t.start,
			       "constant %.*s does not fit in 32 bits",
			       (int)ps->t.len, ps->t.start);
	*out = (int32_t)v;
	next(ps);
	return 0;
}

/* num_programs(d) / program_id(d): d a grid index name or number. */
static void parse_grid_fn(struct parser *ps, uint8_t op)
{
	int32_t d = -1;
	const char *at;

	next(ps);
	expect(ps, "(");
	at = ps->t.start;
	if (ps->t.kind == T_NUM) {
		if (parse_int(ps, 0, &d))
			return;
	} else if (ps->t.kind == T_NAME) {
		d = grid_index(ps, &ps->t);
		if (d < 0) {
			fail_at(ps, at, "'%.*s' is not a grid index",
				(int)ps->t.len, ps->t.start);
			return;
		}
		next(ps);
	}
	if (d < 0 || d >= ps->env->grid_rank) {
		fail_at(ps, at, "expected a grid dimension (0 to %d or its name)",
			ps->env->grid_rank - 1);
		return;
	}
	expect(ps, ")");
	emit(ps, op, d, 1);
}

static void parse_minmax(struct parser *ps, uint8_t op)
{
	next(ps);
	expect(ps, "(");
	parse_expr(ps);
	expect(ps, ",");
	parse_expr(ps);
	expect(ps, ")");
	emit(ps, op, 0, -1);
}

/* s[i, j] of a 2-D ref: the flat index i * cols + j. */
static void parse_second_index(struct parser *ps, const struct tok *t, int s)
{
	const int64_t *cols = ps->env->prefetch_cols;

	if (!cols || cols[s] < 1 || cols[s] > INT32_MAX) {
		fail_at(ps, ps->t.start,
			"'%.*s' is indexed [i, j] but is not declared 2-D (tpurt_grid_spec_add_scalar_prefetch_shaped)",
			(int)t->len, t->start);
		return;
	}
	next(ps);
	emit(ps, TPU_INSN_PUSH_CONST, (int32_t)cols[s], 1);
	emit(ps, TPU_INSN_MUL, 0, -1);
	parse_expr(ps);
	emit(ps, TPU_INSN_ADD, 0, -1);
}

/* A name of the kernel body's SMEM refs or semaphores, or NULL. */
static const struct tpurt_body_name *body_name(struct parser *ps,
					       const struct tok *t)
{
	for (int i = 0; ps->body && i < ps->body->n; i++) {
		const struct tpurt_body_name *b = &ps->body->name[i];

		if (strlen(b->name) == t->len && !strncmp(b->name, t->start, t->len))
			return b;
	}
	return NULL;
}

/* [i] or [i, j] after an SMEM ref's name: its flat index. */
static void parse_smem_index(struct parser *ps, const struct tok *t, int64_t cols)
{
	expect(ps, "[");
	parse_expr(ps);
	if (is(ps, ",")) {
		if (cols < 1 || cols > INT32_MAX) {
			fail_at(ps, ps->t.start, "'%.*s' is indexed [i, j] but is not 2-D",
				(int)t->len, t->start);
			return;
		}
		next(ps);
		emit(ps, TPU_INSN_PUSH_CONST, (int32_t)cols, 1);
		emit(ps, TPU_INSN_MUL, 0, -1);
		parse_expr(ps);
		emit(ps, TPU_INSN_ADD, 0, -1);
	}
	expect(ps, "]");
}

/* [i] or [i, j, ...] after a semaphore array's .at: its row-major flat
 * index, as the device's semaphores are flat (tpurt_semaphore_count). */
static void parse_semaphore_index(struct parser *ps, const struct tok *t,
				  const struct tpurt_body_name *b)
{
	int n = 1;

	expect(ps, "[");
	parse_expr(ps);
	while (!ps->err && is(ps, ",")) {
		if (n >= b->rank) {
			fail_at(ps, ps->t.start, "'%.*s' is a semaphore array of rank %d",
				(int)t->len, t->start, b->rank);
			return;
		}
		next(ps);
		emit(ps, TPU_INSN_PUSH_CONST, (int32_t)b->extent[n++], 1);
		emit(ps, TPU_INSN_MUL, 0, -1);
		parse_expr(ps);
		emit(ps, TPU_INSN_ADD, 0, -1);
	}
	if (!ps->err && n != b->rank)
		fail_at(ps, ps->t.start, "'%.*s' is a semaphore array of rank %d: name one element with %d indices",
			(int)t->len, t->start, b->rank, b->rank);
	expect(ps, "]");
}

/* semaphore_read(sem) or semaphore_read(sem.at[i, ...]): a semaphore's count. */
static void parse_semaphore_read(struct parser *ps)
{
	const struct tpurt_body_name *b;
	struct tok t;

	next(ps);
	expect(ps, "(");
	t = ps->t;
	b = ps->t.kind == T_NAME ? body_name(ps, &t) : NULL;
	if (!b || !b->semaphore) {
		fail_at(ps, t.start, "expected a semaphore");
		return;
	}
	next(ps);
	if (is(ps, ".")) {
		next(ps);
		if (!is(ps, "at"))
			fail_at(ps, ps->t.start, "expected '.at[index]'");
		next(ps);
		parse_semaphore_index(ps, &t, b);
	} else {
		emit(ps, TPU_INSN_PUSH_CONST, 0, 1);
	}
	expect(ps, ")");
	emit(ps, b->insn, b->arg, 0);
}

/* loop_index(d): the trip index of the open loop at depth d (the body's). */
static void parse_loop_index(struct parser *ps)
{
	const char *at;
	int32_t d = -1;

	next(ps);
	expect(ps, "(");
	at = ps->t.start;
	if (ps->t.kind != T_NUM || parse_int(ps, 0, &d) || d < 0 ||
	    d >= TPU_JOB_MAX_LOOP_DEPTH) {
		fail_at(ps, at, "expected a loop depth, 0 to %d", TPU_JOB_MAX_LOOP_DEPTH - 1);
		return;
	}
	expect(ps, ")");
	emit(ps, TPU_INSN_PUSH_LOOP_INDEX, d, 1);
}

static void parse_name(struct parser *ps)
{
	const struct tpurt_body_name *b;
	struct tok t;
	int d, s;

	if (is(ps, "pl") && ps->t.start[ps->t.len] == '.') {
		/* pl.program_id(0), as Python writes it */
		next(ps);
		next(ps);
	}
	t = ps->t;
	if (is(ps, "min"))
		return parse_minmax(ps, TPU_INSN_MIN);
	if (is(ps, "max"))
		return parse_minmax(ps, TPU_INSN_MAX);
	if (is(ps, "num_programs"))
		return parse_grid_fn(ps, TPU_INSN_PUSH_NPROG);
	if (is(ps, "program_id"))
		return parse_grid_fn(ps, TPU_INSN_PUSH_PID);
	if (ps->body && is(ps, "semaphore_read"))
		return parse_semaphore_read(ps);
	if (ps->body && is(ps, "loop_index"))
		return parse_loop_index(ps);
	d = grid_index(ps, &t);
	s = prefetch_index(ps, &t);
	next(ps);
	if (d >= 0) {
		if (is(ps, "["))
			fail_at(ps, ps->t.start,
				"'%.*s' is a grid index, not a scalar-prefetch ref",
				(int)t.len, t.start);
		emit(ps, TPU_INSN_PUSH_PID, d, 1);
	} else if (s >= 0) {
		if (!is(ps, "[")) {
			fail_at(ps, ps->t.start,
				"scalar-prefetch ref '%.*s' must be indexed: %.*s[...]",
				(int)t.len, t.start, (int)t.len, t.start);
			return;
		}
		next(ps);
		parse_expr(ps);
		if (is(ps, ","))
			parse_second_index(ps, &t, s);
		expect(ps, "]");
		emit(ps, TPU_INSN_LOAD_SMEM, s, 0);
	} else if ((b = body_name(ps, &t)) && !b->semaphore) {
		parse_smem_index(ps, &t, b->cols);
		emit(ps, b->insn, b->arg, 0);
	} else if (b) {
		fail_at(ps, t.start, "'%.*s' is a semaphore: read it with semaphore_read(%.*s.at[i])",
			(int)t.len, t.start, (int)t.len, t.start);
	} else {
		fail_at(ps, t.start, "unknown name '%.*s'", (int)t.len, t.start);
	}
}

static void parse_primary(struct parser *ps)
{
	int32_t v;

	if (ps->err)
		return;
	if (ps->t.kind == T_NUM) {
		if (!parse_int(ps, 0, &v))
			emit(ps, TPU_INSN_PUSH_CONST, v, 1);
	} else if (ps->t.kind == T_NAME) {
		parse_name(ps);
	} else if (is(ps, "(")) {
		next(ps);
		parse_expr(ps);
		expect(ps, ")");
	} else if (ps->t.kind == T_END) {
		fail_at(ps, ps->t.start, "expression ends early");
	} else {
		fail_at(ps, ps->t.start, "unexpected '%.*s'", (int)ps->t.len,
			ps->t.start);
	}
}

static void parse_unary(struct parser *ps)
{
	int32_t v;

	if (!is(ps, "-"))
		return parse_primary(ps);
	next(ps);
	if (ps->t.kind == T_NUM) {	/* a negative literal: one constant */
		if (!parse_int(ps, 1, &v))
			emit(ps, TPU_INSN_PUSH_CONST, v, 1);
		return;
	}
	emit(ps, TPU_INSN_PUSH_CONST, 0, 1);
	parse_unary(ps);
	emit(ps, TPU_INSN_SUB, 0, -1);
}

struct binop {
	const char *s;
	uint8_t op;
};

/* Left-associative levels: one operator table each. */
static void parse_level(struct parser *ps, const struct binop *ops, size_t n,
			void (*sub)(struct parser *))
{
	sub(ps);
	for (;;) {
		size_t i;

		for (i = 0; i < n && !is(ps, ops[i].s); i++)
			;
		if (i == n || ps->err)
			return;
		next(ps);
		sub(ps);
		emit(ps, ops[i].op, 0, -1);
	}
}

static const struct binop mul_ops[] = {
	{ "*", TPU_INSN_MUL }, { "//", TPU_INSN_DIV }, { "%", TPU_INSN_MOD },
};
static const struct binop add_ops[] = {
	{ "+", TPU_INSN_ADD }, { "-", TPU_INSN_SUB },
};
static const struct binop cmp_ops[] = {
	{ "==", TPU_INSN_EQ }, { "!=", TPU_INSN_NE }, { "<", TPU_INSN_LT },
	{ "<=", TPU_INSN_LE }, { ">", TPU_INSN_GT }, { ">=", TPU_INSN_GE },
};

static void parse_term(struct parser *ps)
{
	parse_level(ps, mul_ops, 3, parse_unary);
}

static void parse_sum(struct parser *ps)
{
	parse_level(ps, add_ops, 2, parse_term);
}

static int at_cmp(struct parser *ps)
{
	for (size_t i = 0; i < 6; i++)
		if (is(ps, cmp_ops[i].s))
			return (int)i;
	return -1;
}

static void parse_cmp(struct parser *ps)
{
	int c;

	parse_sum(ps);
	c = at_cmp(ps);
	if (c < 0 || ps->err)
		return;
	next(ps);
	parse_sum(ps);
	emit(ps, cmp_ops[c].op, 0, -1);
	if (at_cmp(ps) >= 0)
		fail_at(ps, ps->t.start,
			"chained comparisons are not supported; use 'and'");
}

static void parse_not(struct parser *ps)
{
	if (!is(ps, "not"))
		return parse_cmp(ps);
	next(ps);
	parse_not(ps);
	emit(ps, TPU_INSN_NOT, 0, 0);
}

static const struct binop and_ops[] = { { "and", TPU_INSN_AND } };
static const struct binop or_ops[] = { { "or", TPU_INSN_OR } };

static void parse_and(struct parser *ps)
{
	parse_level(ps, and_ops, 1, parse_not);
}

static void parse_expr(struct parser *ps)
{
	parse_level(ps, or_ops, 1, parse_and);
}

/* Record one name of the lambda's parameter list (or the default list). */
static void add_name(struct parser *ps)
{
	if (ps->t.kind != T_NAME) {
		fail_at(ps, ps->t.start, "expected a name");
		return;
	}
	for (int i = 0; i < ps->nnames; i++)
		if (tok_eq(&ps->names[i], &ps->t)) {
			fail_at(ps, ps->t.start, "'%.*s' named twice",
				(int)ps->t.len, ps->t.start);
			return;
		}
	if (ps->nnames == ps->env->grid_rank + ps->env->num_prefetch) {
		fail_at(ps, ps->t.start,
			"more names than grid indices (%d) and scalar-prefetch refs (%d)",
			ps->env->grid_rank, ps->env->num_prefetch);
		return;
	}
	ps->names[ps->nnames++] = ps->t;
	next(ps);
}

static void parse_params(struct parser *ps, const char *arrow)
{
	add_name(ps);
	while (!ps->err && is(ps, ",")) {
		next(ps);
		add_name(ps);
	}
	if (!ps->err && !is(ps, "->"))
		fail_at(ps, ps->t.start, "expected ',' or '->'");
	if (!ps->err && ps->nnames < ps->env->grid_rank)
		fail_at(ps, arrow,
			"the grid has %d dimensions but %d grid indices are named",
			ps->env->grid_rank, ps->nnames);
	next(ps);
}

/* The grid spec's names for text without "->": "i, j, k". */
static int default_params(struct parser *ps)
{
	static const char *const fallback = "i, j, k, l";
	struct parser sub = *ps;
	const char *names = ps->env->index_names ? ps->env->index_names : fallback;

	sub.text = names;
	sub.p = names;
	sub.what = "grid index names";
	sub.nnames = 0;
	next(&sub);
	while (!sub.err && sub.t.kind != T_END && sub.nnames < ps->env->grid_rank) {
		add_name(&sub);
		if (is(&sub, ","))
			next(&sub);
	}
	if (sub.err)
		return sub.err;
	memcpy(ps->names, sub.names, sizeof(sub.names));
	ps->nnames = sub.nnames;
	if (ps->nnames < ps->env->grid_rank)
		return tpurt_fail(-EINVAL, "%s: '%s' names %d grid indices, the grid has %d",
				  ps->what, names, ps->nnames, ps->env->grid_rank);
	return 0;
}

/* "(a, b)" around the whole result list: a Python tuple. */
static int wrapped_in_parens(const char *p)
{
	int level = 0;

	while (isspace((unsigned char)*p))
		p++;
	if (*p != '(')
		return 0;
	for (; *p; p++) {
		level += *p == '(' ? 1 : *p == ')' ? -1 : 0;
		if (!level)
			break;
	}
	if (!*p)
		return 0;
	for (p++; isspace((unsigned char)*p); p++)
		;
	return !*p;
}

static void parse_results(struct parser *ps)
{
	int tuple = wrapped_in_parens(ps->t.start);

	if (tuple)
		next(ps);
	for (;;) {
		int before = ps->depth;

		parse_expr(ps);
		if (ps->err)
			return;
		if (ps->depth != before + 1)
			fail_at(ps, ps->t.start, "internal: stack imbalance");
		ps->prog->nresults++;
		if (!is(ps, ","))
			break;
		next(ps);
		if (tuple && is(ps, ")"))
			break;	/* (a,) */
	}
	if (tuple)
		expect(ps, ")");
	if (!ps->err && ps->t.kind != T_END)
		fail_at(ps, ps->t.start, "unexpected '%.*s'", (int)ps->t.len,
			ps->t.start);
}

/* @prog's instructions as the scalar core takes them. */
static void to_code(const struct tpurt_program *prog, struct tpu_plan_insn *code)
{
	for (unsigned int i = 0; i < prog->len; i++)
		code[i] = (struct tpu_plan_insn){ prog->insn[i].op, prog->insn[i].arg };
}

/*
 * What the compiler emitted, through the device's own verifier: a body
 * program may load what @body names besides scalar prefetch.
 */
static int verify(const struct tpurt_program *prog,
		  const struct tpurt_index_map_env *env,
		  const struct tpurt_body_names *body, const char *what)
{
	/* the device checks each loop index against its op's depth */
	struct tpu_scalar_scope scope = { (unsigned int)env->grid_rank, 0, 0,
					  body ? TPU_JOB_MAX_LOOP_DEPTH : 0 };
	struct tpu_plan_insn code[TPURT_PROGRAM_MAX_LEN];
	char why[128];

	for (int i = 0; i < env->num_prefetch; i++)
		scope.smem_operands |= 1ull << i;
	for (int i = 0; body && i < body->n; i++) {
		uint64_t bit = 1ull << body->name[i].arg;

		if (body->name[i].insn == TPU_INSN_LOAD_SMEM)
			scope.smem_operands |= bit;
		else
			scope.scratch |= bit;
	}
	to_code(prog, code);
	if (tpu_scalar_verify_scope(code, prog->len, &scope, prog->nresults,
				    why, sizeof(why)))
		return tpurt_fail(-EINVAL, "%s: internal: the device's verifier rejects the compiled program: %s",
				  what, why);
	return 0;
}

static int compile(const char *text, const struct tpurt_index_map_env *env,
		   const struct tpurt_body_names *body, int nresults,
		   const char *what, struct tpurt_program *prog)
{
	struct parser ps = { .text = text, .p = text, .env = env, .prog = prog,
			     .what = what, .body = body };
	const char *arrow;
	const char *results;
	int ret;

	memset(prog, 0, sizeof(*prog));
	if (!text)
		return tpurt_fail(-EINVAL, "%s: no text", what);
	if (env->grid_rank < 1 || env->grid_rank > TPU_JOB_MAX_GRID_RANK)
		return tpurt_fail(-EINVAL, "%s: grid rank %d not in 1..%d", what,
				  env->grid_rank, TPU_JOB_MAX_GRID_RANK);
	arrow = strstr(text, "->");
	next(&ps);
	if (arrow) {
		parse_params(&ps, arrow);
	} else {
		ret = default_params(&ps);
		if (ret)
			return ret;
	}
	results = ps.t.start;
	if (!ps.err && ps.t.kind == T_END)
		fail_at(&ps, ps.t.start, "nothing after '->'");
	if (!ps.err)
		parse_results(&ps);
	if (!ps.err && nresults >= 0 && (int)prog->nresults != nresults)
		fail_at(&ps, results, "gives %u value%s, expected %d",
			prog->nresults, prog->nresults == 1 ? "" : "s",
			nresults);
	return ps.err ? ps.err : verify(prog, env, body, what);
}

int tpurt_index_map_compile_as(const char *text,
			       const struct tpurt_index_map_env *env,
			       int nresults, const char *what,
			       struct tpurt_program *prog)
{
	return compile(text, env, NULL, nresults, what, prog);
}

int tpurt_body_program_compile(const char *text,
			       const struct tpurt_index_map_env *env,
			       const struct tpurt_body_names *names,
			       int nresults, const char *what,
			       struct tpurt_program *prog)
{
	return compile(text, env, names, nresults, what, prog);
}

int tpurt_index_map_compile(const char *text,
			    const struct tpurt_index_map_env *env,
			    struct tpurt_program *prog)
{
	return tpurt_index_map_compile_as(text, env, -1, "index map", prog);
}

static const char *const insn_names[TPU_INSN_COUNT] = {
	[TPU_INSN_PUSH_PID] = "pid", [TPU_INSN_PUSH_NPROG] = "nprog",
	[TPU_INSN_PUSH_CONST] = "", [TPU_INSN_LOAD_SMEM] = "smem",
	[TPU_INSN_ADD] = "+", [TPU_INSN_SUB] = "-", [TPU_INSN_MUL] = "*",
	[TPU_INSN_DIV] = "//", [TPU_INSN_MOD] = "%", [TPU_INSN_MIN] = "min",
	[TPU_INSN_MAX] = "max", [TPU_INSN_EQ] = "==", [TPU_INSN_NE] = "!=",
	[TPU_INSN_LT] = "<", [TPU_INSN_LE] = "<=", [TPU_INSN_GT] = ">",
	[TPU_INSN_GE] = ">=", [TPU_INSN_AND] = "and", [TPU_INSN_OR] = "or",
	[TPU_INSN_NOT] = "not", [TPU_INSN_LOAD_SCRATCH] = "scratch",
	[TPU_INSN_PUSH_LOOP_INDEX] = "loop",
};

static int takes_arg(uint8_t op)
{
	return op <= TPU_INSN_LOAD_SMEM || op == TPU_INSN_LOAD_SCRATCH ||
	       op == TPU_INSN_PUSH_LOOP_INDEX;
}

int tpurt_program_format(const struct tpurt_program *prog, char *buf,
			 size_t len)
{
	size_t at = 0;

	if (!len)
		return tpurt_fail(-ENOSPC, "program format: no room");
	buf[0] = 0;
	for (unsigned int i = 0; i < prog->len; i++) {
		const struct tpurt_insn *in = &prog->insn[i];
		const char *name = in->op < TPU_INSN_COUNT ? insn_names[in->op] : "?";
		int n;

		if (takes_arg(in->op))
			n = snprintf(buf + at, len - at, "%s%s%d", i ? " " : "",
				     name, in->arg);
		else
			n = snprintf(buf + at, len - at, "%s%s", i ? " " : "", name);
		if (n < 0 || (size_t)n >= len - at)
			return tpurt_fail(-ENOSPC, "program format: %zu bytes are not enough",
					  len);
		at += (size_t)n;
	}
	return 0;
}

int tpurt_program_eval(const struct tpurt_program *prog, const int64_t *pid,
		       const int64_t *grid, const int32_t *const *smem,
		       const uint64_t *smem_len, const uint64_t *smem_reach,
		       int64_t *out)
{
	struct tpu_plan_insn code[TPURT_PROGRAM_MAX_LEN];
	struct tpu_scalar_fault fault;
	/* Extents are positive: read as uint64_t, as the device holds them. */
	struct tpu_scalar_env env = {
		.grid = (const uint64_t *)grid, .pid = pid, .smem = smem,
		.smem_len = smem_len, .smem_reach = smem_reach,
	};

	to_code(prog, code);
	if (!tpu_scalar_run_code(code, prog->len, &env, out, prog->nresults, &fault))
		return 0;
	return fault.code == TPU_JOB_ERR_DIV_ZERO ? -EDOM : -ERANGE;
}
