// SPDX-License-Identifier: MIT
/*
 * Kernel statements: one line of a Pallas kernel body parsed by recursive
 * descent into a tree (stmt.h), with Python's precedence. Module prefixes
 * (jnp., pl., lax., jax.nn., pltpu.) are dropped, so "jnp.maximum" and
 * "maximum" are one function. Errors point at the column, as index maps'
 * do.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stmt.h"

enum tok_kind { T_END, T_NUM, T_NAME, T_PUNCT, T_STR };

struct parser {
	struct stmt_ctx *c;
	const char *p;			/* next unread character */
	enum tok_kind kind;		/* current token */
	const char *start;
	int len;
};

int stmt_fail(struct stmt_ctx *c, int col, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (c->err)
		return c->err;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->err = tpurt_fail(-EINVAL, "%s: %s at column %d\n    %s\n    %*s^",
			    c->what, msg, col + 1, c->text, col, "");
	return c->err;
}

static int col_of(const struct parser *ps)
{
	return (int)(ps->start - ps->c->text);
}

/* A number: digits, '.', an exponent with its sign. */
static const char *scan_number(const char *p)
{
	while (isalnum((unsigned char)*p) || *p == '_' || *p == '.' ||
	       ((*p == '-' || *p == '+') && (p[-1] == 'e' || p[-1] == 'E')))
		p++;
	return p;
}

static void next(struct parser *ps)
{
	static const char *const multi[] = {
		"...", "//", "**", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=",
		"<<", ">>",
	};
	const char *p = ps->p;

	while (isspace((unsigned char)*p))
		p++;
	ps->start = p;
	if (!*p) {
		ps->kind = T_END;
	} else if (isdigit((unsigned char)*p) ||
		   (*p == '.' && isdigit((unsigned char)p[1]))) {
		p = scan_number(p + 1);
		ps->kind = T_NUM;
	} else if (isalpha((unsigned char)*p) || *p == '_') {
		while (isalnum((unsigned char)*p) || *p == '_')
			p++;
		ps->kind = T_NAME;
	} else if (*p == '"') {	/* to the closing quote, \" inside */
		for (p++; *p && *p != '"'; p++)
			if (*p == '\\' && p[1])
				p++;
		if (*p == '"') {
			p++;
			ps->kind = T_STR;
		} else {	/* unclosed: the quote alone, an unexpected '"' */
			p = ps->start + 1;
			ps->kind = T_PUNCT;
		}
	} else {
		ps->kind = T_PUNCT;
		p++;
		for (size_t i = 0; i < sizeof(multi) / sizeof(multi[0]); i++)
			if (!strncmp(ps->start, multi[i], strlen(multi[i]))) {
				p = ps->start + strlen(multi[i]);
				break;
			}
	}
	ps->len = (int)(p - ps->start);
	ps->p = p;
}

static int is(const struct parser *ps, const char *s)
{
	return ps->kind != T_END && ps->kind != T_NUM &&
	       ps->len == (int)strlen(s) && !strncmp(ps->start, s, (size_t)ps->len);
}

static int failed(const struct parser *ps)
{
	return ps->c->err != 0;
}

static void expect(struct parser *ps, const char *s)
{
	if (is(ps, s))
		next(ps);
	else if (ps->kind == T_END)
		stmt_fail(ps->c, col_of(ps), "expected '%s', the statement ends", s);
	else
		stmt_fail(ps->c, col_of(ps), "expected '%s', found '%.*s'", s,
			  ps->len, ps->start);
}

static struct stmt_node *new_node(struct parser *ps, enum stmt_node_kind kind,
				  int col)
{
	struct stmt_ctx *c = ps->c;
	struct stmt_node *n;

	if (c->nnodes == STMT_MAX_NODES) {
		stmt_fail(c, col, "more than %d terms", STMT_MAX_NODES);
		return NULL;
	}
	n = &c->node[c->nnodes++];
	memset(n, 0, sizeof(*n));
	n->kind = kind;
	n->col = col;
	return n;
}

static struct stmt_node *parse_expr(struct parser *ps);

static struct stmt_node *parse_number(struct parser *ps)
{
	struct stmt_node *n = new_node(ps, SN_NUM, col_of(ps));
	char buf[64], *end;
	int j = 0;

	if (!n)
		return NULL;
	for (int i = 0; i < ps->len && j < (int)sizeof(buf) - 1; i++)
		if (ps->start[i] != '_')
			buf[j++] = ps->start[i];
	buf[j] = 0;
	n->num = strtod(buf, &end);
	n->is_int = !strpbrk(buf, ".eE");
	if (*end || (n->is_int && !isdigit((unsigned char)buf[0])))
		stmt_fail(ps->c, n->col, "bad number '%.*s'", ps->len, ps->start);
	next(ps);
	return n;
}

/* "jnp", "pl", "lax", ...: dropped before a '.'. */
static int is_module(const struct parser *ps)
{
	static const char *const modules[] = {
		"jnp", "np", "numpy", "jax", "lax", "pl", "pltpu", "nn",
	};

	for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++)
		if (is(ps, modules[i]))
			return *ps->p == '.';
	return 0;
}

static struct stmt_node *parse_name(struct parser *ps)
{
	struct stmt_node *n;
	int col = col_of(ps);

	while (is_module(ps)) {
		next(ps);
		next(ps);	/* the '.' */
		if (ps->kind != T_NAME) {
			stmt_fail(ps->c, col_of(ps), "expected a name after '.'");
			return NULL;
		}
	}
	n = new_node(ps, SN_NAME, col);
	if (!n)
		return NULL;
	n->name = ps->start;
	n->len = ps->len;
	next(ps);
	return n;
}

/* "text": the node keeps the characters between the quotes, escapes and all. */
static struct stmt_node *parse_string(struct parser *ps)
{
	struct stmt_node *n;

	n = new_node(ps, SN_STR, col_of(ps));
	if (!n)
		return NULL;
	n->name = ps->start + 1;
	n->len = ps->len - 2;
	next(ps);
	return n;
}

/* (a), or the tuple (a, b, ...) */
static struct stmt_node *parse_parens(struct parser *ps)
{
	int col = col_of(ps);
	struct stmt_node *first, *t;

	next(ps);
	first = parse_expr(ps);
	if (!is(ps, ",")) {
		expect(ps, ")");
		return first;
	}
	t = new_node(ps, SN_TUPLE, col);
	if (!t)
		return NULL;
	t->arg[t->nargs++] = first;
	while (!failed(ps) && is(ps, ",")) {
		next(ps);
		if (is(ps, ")"))
			break;
		if (t->nargs == STMT_MAX_ARGS) {
			stmt_fail(ps->c, col_of(ps), "more than %d items", STMT_MAX_ARGS);
			return NULL;
		}
		t->arg[t->nargs++] = parse_expr(ps);
	}
	expect(ps, ")");
	return t;
}

static struct stmt_node *parse_primary(struct parser *ps)
{
	if (failed(ps))
		return NULL;
	if (ps->kind == T_NUM)
		return parse_number(ps);
	if (ps->kind == T_NAME)
		return parse_name(ps);
	if (ps->kind == T_STR)
		return parse_string(ps);
	if (is(ps, "("))
		return parse_parens(ps);
	if (ps->kind == T_END)
		stmt_fail(ps->c, col_of(ps), "the statement ends early");
	else
		stmt_fail(ps->c, col_of(ps), "unexpected '%.*s'", ps->len, ps->start);
	return NULL;
}

/* One argument: an expression, or name=expression. */
static void parse_arg(struct parser *ps, struct stmt_node *call)
{
	if (ps->kind == T_NAME && ps->p[strspn(ps->p, " ")] == '=' &&
	    ps->p[strspn(ps->p, " ") + 1] != '=') {
		if (call->nkw == STMT_MAX_KW) {
			stmt_fail(ps->c, col_of(ps), "more than %d keyword arguments",
				  STMT_MAX_KW);
			return;
		}
		call->kw[call->nkw] = ps->start;
		call->kwlen[call->nkw] = ps->len;
		next(ps);
		next(ps);
		call->kwval[call->nkw++] = parse_expr(ps);
		return;
	}
	if (call->nkw) {
		stmt_fail(ps->c, col_of(ps), "positional argument after a keyword argument");
		return;
	}
	if (call->nargs == STMT_MAX_ARGS) {
		stmt_fail(ps->c, col_of(ps), "more than %d arguments", STMT_MAX_ARGS);
		return;
	}
	call->arg[call->nargs++] = parse_expr(ps);
}

static struct stmt_node *parse_call(struct parser *ps, struct stmt_node *base)
{
	struct stmt_node *n = new_node(ps, SN_CALL, base->col);

	if (!n)
		return NULL;
	n->base = base;
	next(ps);
	while (!failed(ps) && !is(ps, ")")) {
		parse_arg(ps, n);
		if (!is(ps, ","))
			break;
		next(ps);
	}
	expect(ps, ")");
	return n;
}

/* One index: an expression, or a slice a:b, a:, :b, :, with a step a:b:s */
static struct stmt_node *parse_subscript(struct parser *ps)
{
	struct stmt_node *lo = NULL, *n;
	int col = col_of(ps);

	if (!is(ps, ":"))
		lo = parse_expr(ps);
	if (!is(ps, ":") || failed(ps))
		return lo;
	next(ps);
	n = new_node(ps, SN_SLICE, col);
	if (!n)
		return NULL;
	n->arg[0] = lo;
	n->arg[1] = is(ps, ",") || is(ps, "]") || is(ps, ":") ? NULL : parse_expr(ps);
	n->nargs = 2;
	if (is(ps, ":") && !failed(ps)) {
		next(ps);
		n->arg[2] = is(ps, ",") || is(ps, "]") ? NULL : parse_expr(ps);
		n->nargs = 3;
	}
	return n;
}

/* base[...] or base[e, ...] (up to 4 indices or slices) */
static struct stmt_node *parse_index(struct parser *ps, struct stmt_node *base)
{
	struct stmt_node *n = new_node(ps, SN_INDEX, base->col);

	if (!n)
		return NULL;
	n->base = base;
	next(ps);
	if (is(ps, "...")) {
		next(ps);
		expect(ps, "]");
		return n;
	}
	do {
		if (n->nargs && is(ps, ","))
			next(ps);
		if (n->nargs == STMT_MAX_ARGS) {
			stmt_fail(ps->c, col_of(ps), "more than %d indices", STMT_MAX_ARGS);
			return NULL;
		}
		n->arg[n->nargs++] = parse_subscript(ps);
	} while (!failed(ps) && is(ps, ","));
	expect(ps, "]");
	return n;
}

static struct stmt_node *parse_attr(struct parser *ps, struct stmt_node *base)
{
	struct stmt_node *n;

	next(ps);
	if (ps->kind != T_NAME) {
		stmt_fail(ps->c, col_of(ps), "expected a name after '.'");
		return NULL;
	}
	n = new_node(ps, SN_ATTR, base->col);
	if (!n)
		return NULL;
	n->base = base;
	n->name = ps->start;
	n->len = ps->len;
	next(ps);
	return n;
}

static struct stmt_node *parse_postfix(struct parser *ps)
{
	struct stmt_node *n = parse_primary(ps);

	while (n && !failed(ps)) {
		if (is(ps, "("))
			n = parse_call(ps, n);
		else if (is(ps, "["))
			n = parse_index(ps, n);
		else if (is(ps, "."))
			n = parse_attr(ps, n);
		else
			break;
	}
	return n;
}

static struct stmt_node *binop(struct parser *ps, const char *op, int len,
			       struct stmt_node *a, struct stmt_node *b, int col)
{
	struct stmt_node *n = a && b ? new_node(ps, SN_BINOP, col) : NULL;

	if (!n)
		return NULL;
	n->name = op;
	n->len = len;
	n->arg[0] = a;
	n->arg[1] = b;
	n->nargs = 2;
	return n;
}

static struct stmt_node *parse_unary(struct parser *ps);

/* a ** b binds tighter than a unary minus on its left */
static struct stmt_node *parse_power(struct parser *ps)
{
	struct stmt_node *a = parse_postfix(ps);

	if (!is(ps, "**") || failed(ps))
		return a;
	{
		const char *op = ps->start;
		int col = col_of(ps);

		next(ps);
		return binop(ps, op, 2, a, parse_unary(ps), col);
	}
}

static struct stmt_node *parse_unary(struct parser *ps)
{
	struct stmt_node *n;

	if (!is(ps, "-") && !is(ps, "+") && !is(ps, "~"))
		return parse_power(ps);
	n = new_node(ps, SN_UNOP, col_of(ps));
	if (!n)
		return NULL;
	n->name = ps->start;
	n->len = 1;
	next(ps);
	n->arg[0] = parse_unary(ps);
	n->nargs = 1;
	return n->arg[0] ? n : NULL;
}

/* Left-associative levels, each a list of operators. */
static struct stmt_node *parse_level(struct parser *ps, const char *const *ops,
				     struct stmt_node *(*sub)(struct parser *))
{
	struct stmt_node *a = sub(ps);

	while (a && !failed(ps)) {
		const char *op = NULL;
		int col = col_of(ps), len = ps->len;

		for (int i = 0; ops[i]; i++)
			if (is(ps, ops[i]))
				op = ps->start;
		if (!op)
			break;
		next(ps);
		a = binop(ps, op, len, a, sub(ps), col);
	}
	return a;
}

static const char *const mul_ops[] = { "*", "/", "//", "%", "@", NULL };
static const char *const add_ops[] = { "+", "-", NULL };
static const char *const shift_ops[] = { "<<", ">>", NULL };
static const char *const and_ops[] = { "&", NULL };
static const char *const xor_ops[] = { "^", NULL };
static const char *const or_ops[] = { "|", NULL };
static const char *const cmp_ops[] = { "==", "!=", "<", "<=", ">", ">=", NULL };
static const char *const kand_ops[] = { "and", NULL };
static const char *const kor_ops[] = { "or", NULL };

static struct stmt_node *parse_term(struct parser *ps)
{
	return parse_level(ps, mul_ops, parse_unary);
}

static struct stmt_node *parse_sum(struct parser *ps)
{
	return parse_level(ps, add_ops, parse_term);
}

static struct stmt_node *parse_shift(struct parser *ps)
{
	return parse_level(ps, shift_ops, parse_sum);
}

static struct stmt_node *parse_band(struct parser *ps)
{
	return parse_level(ps, and_ops, parse_shift);
}

static struct stmt_node *parse_bxor(struct parser *ps)
{
	return parse_level(ps, xor_ops, parse_band);
}

static struct stmt_node *parse_bor(struct parser *ps)
{
	return parse_level(ps, or_ops, parse_bxor);
}

static int at_cmp(const struct parser *ps)
{
	for (int i = 0; cmp_ops[i]; i++)
		if (is(ps, cmp_ops[i]))
			return 1;
	return 0;
}

static struct stmt_node *parse_cmp(struct parser *ps)
{
	struct stmt_node *a = parse_bor(ps);
	const char *op = ps->start;
	int col = col_of(ps), len = ps->len;

	if (!a || failed(ps) || !at_cmp(ps))
		return a;
	next(ps);
	a = binop(ps, op, len, a, parse_bor(ps), col);
	if (!failed(ps) && at_cmp(ps))
		stmt_fail(ps->c, col_of(ps), "chained comparisons are not supported; use &");
	return a;
}

static struct stmt_node *parse_not(struct parser *ps)
{
	struct stmt_node *n;

	if (!is(ps, "not"))
		return parse_cmp(ps);
	n = new_node(ps, SN_UNOP, col_of(ps));
	if (!n)
		return NULL;
	n->name = "not";
	n->len = 3;
	next(ps);
	n->arg[0] = parse_not(ps);
	n->nargs = 1;
	return n->arg[0] ? n : NULL;
}

static struct stmt_node *parse_kand(struct parser *ps)
{
	return parse_level(ps, kand_ops, parse_not);
}

static struct stmt_node *parse_expr(struct parser *ps)
{
	return parse_level(ps, kor_ops, parse_kand);
}

static void parse_when(struct parser *ps, struct stmt *st)
{
	struct stmt_node *n = parse_postfix(ps);

	if (failed(ps))
		return;
	if (n->kind != SN_CALL || n->nargs != 1 || n->nkw ||
	    n->base->kind != SN_NAME || n->base->len != 4) {
		stmt_fail(ps->c, n->col, "expected when(condition):");
		return;
	}
	st->when = n->arg[0];
	expect(ps, ":");
}

/* name, name[...], or any other target (a window, an SMEM element) */
static void parse_target(struct parser *ps, struct stmt *st)
{
	struct stmt_node *n;

	if (ps->kind != T_NAME) {
		stmt_fail(ps->c, col_of(ps), "expected a name or a ref[...] to assign");
		return;
	}
	st->target = ps->start;
	st->tlen = ps->len;
	st->tcol = col_of(ps);
	n = parse_postfix(ps);
	if (failed(ps))
		return;
	if (n->kind == SN_NAME && n->name == st->target)
		return;
	if (n->kind == SN_INDEX && !n->nargs && n->base->kind == SN_NAME &&
	    n->base->name == st->target) {
		st->target_indexed = 1;
		return;
	}
	if (n->kind == SN_CALL) {
		st->call = n;
		return;
	}
	st->target_node = n;
}

static void parse_assign_op(struct parser *ps, struct stmt *st)
{
	if (is(ps, "=")) {
		st->aug = 0;
	} else if (is(ps, "+=") || is(ps, "-=") || is(ps, "*=") || is(ps, "/=")) {
		st->aug = ps->start[0];
	} else {
		stmt_fail(ps->c, col_of(ps), ps->kind == T_END ?
			  "expected '=' or an augmented assignment, the statement ends" :
			  "expected '=' or an augmented assignment");
		return;
	}
	next(ps);
}

int stmt_parse(struct stmt_ctx *c, struct stmt *st)
{
	struct parser ps = { .c = c, .p = c->text };

	memset(st, 0, sizeof(*st));
	next(&ps);
	if (is(&ps, "when") || (is(&ps, "pl") && !strncmp(ps.p, ".when", 5)))
		parse_when(&ps, st);
	if (!c->err)
		parse_target(&ps, st);
	if (!c->err && st->call && ps.kind == T_END)
		return 0;	/* a call: make_async_copy(...).start() */
	if (st->call) {
		st->target_node = st->call;
		st->call = NULL;
	}
	if (!c->err)
		parse_assign_op(&ps, st);
	if (!c->err)
		st->value = parse_expr(&ps);
	if (!c->err && ps.kind != T_END)
		stmt_fail(c, col_of(&ps), "unexpected '%.*s' after the statement",
			  ps.len, ps.start);
	return c->err;
}

int stmt_parse_expr(struct stmt_ctx *c, struct stmt_node **out)
{
	struct parser ps = { .c = c, .p = c->text };

	next(&ps);
	*out = parse_expr(&ps);
	if (!c->err && ps.kind != T_END)
		stmt_fail(c, col_of(&ps), "unexpected '%.*s' after the expression",
			  ps.len, ps.start);
	return c->err;
}
