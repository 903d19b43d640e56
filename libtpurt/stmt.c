// SPDX-License-Identifier: MIT
/*
 * tpurt_kernel_stmt() and tpurt_kernel_stmts(): a Pallas kernel body as
 * text, a statement at a time (stmt_parse.c, stmt_lower.c). A statement
 * either lowers whole or leaves the kernel as it was.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stmt.h"

#define LINE_MAX_LEN	512

static struct stmt_ctx *new_ctx(struct tpurt_kernel *k,
				const struct tpurt_grid_spec *gs,
				const char *text)
{
	struct stmt_ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->k = k;
	c->gs = gs;
	c->text = text;
	snprintf(c->what, sizeof(c->what), "statement %d", k->nstmts + 1);
	return c;
}

/* Lower @st under its own when(), if it has one. */
static int lower_stmt(struct stmt_ctx *c, const struct stmt *st)
{
	struct tpurt_kernel *k = c->k;
	int ret;

	if (st->when) {
		if (k->nwhen == TPURT_WHEN_DEPTH)
			return stmt_fail(c, st->when->col, "when() nested deeper than %d",
					 TPURT_WHEN_DEPTH);
		if (stmt_lower_pred(c, st->when, k->when[k->nwhen], TPURT_TEXT_MAX))
			return c->err;
		k->nwhen++;
	}
	ret = stmt_lower(c, st);
	if (st->when)
		k->nwhen--;
	return ret;
}

int tpurt_kernel_stmt(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		      const char *text)
{
	void *saved;			/* the kernel before op[] */
	struct stmt_ctx *c;
	struct stmt st;
	int ret;

	if (!k || !gs || !text)
		return tpurt_fail(-EINVAL, "kernel statement: kernel, grid spec or text missing");
	saved = malloc(TPURT_KERNEL_STATE_SIZE);
	c = new_ctx(k, gs, text);
	if (!saved || !c) {
		free(saved);
		free(c);
		return tpurt_fail(-ENOMEM, "out of memory");
	}
	memcpy(saved, k, TPURT_KERNEL_STATE_SIZE);
	ret = stmt_parse(c, &st);
	if (!ret)
		ret = lower_stmt(c, &st);
	for (int i = 0; i < k->ntemps; i++)
		k->temp[i].busy = 0;
	if (ret)
		memcpy(k, saved, TPURT_KERNEL_STATE_SIZE);
	else
		k->nstmts++;
	free(saved);
	free(c);
	return ret;
}

/* One open decorator block: @pl.when, or @pl.run_scoped opening @scopes. */
struct block_level {
	int indent;			/* the decorator's indentation */
	int scopes;			/* run_scoped: scopes opened; when: 0 */
	char params[128];		/* run_scoped: the def's parameters */
};

/*
 * "@pl.when(cond)" or "@pl.run_scoped(sem=..., buf=...)" opens a block;
 * its "def _(...):" line follows.
 */
static int open_block(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		      const char *line, struct block_level *b)
{
	struct stmt_ctx *c = new_ctx(k, gs, line);
	struct stmt_node *n;
	int ret;

	if (!c)
		return tpurt_fail(-ENOMEM, "out of memory");
	ret = stmt_parse_expr(c, &n);
	if (!ret && n->kind == SN_CALL && n->base->kind == SN_NAME &&
	    n->base->len == 10 && !strncmp(n->base->name, "run_scoped", 10)) {
		ret = stmt_lower_run_scoped(c, n, &b->scopes, b->params,
					    sizeof(b->params));
		while (ret && b->scopes--)
			tpurt_kernel_end_scoped(k);
		free(c);
		return ret;
	}
	if (!ret && (n->kind != SN_CALL || n->nargs != 1 || n->base->kind != SN_NAME ||
		     n->base->len != 4 || strncmp(n->base->name, "when", 4)))
		ret = stmt_fail(c, 0, "expected @pl.when(condition) or @pl.run_scoped(name=type, ...)");
	if (!ret && k->nwhen == TPURT_WHEN_DEPTH)
		ret = stmt_fail(c, 0, "when() nested deeper than %d", TPURT_WHEN_DEPTH);
	if (!ret)
		ret = stmt_lower_pred(c, n->arg[0], k->when[k->nwhen], TPURT_TEXT_MAX);
	if (!ret)
		k->nwhen++;
	free(c);
	return ret;
}

/* "def _():" after @pl.when; "def _(sem, buf):" naming @params (in any
 * order) after @pl.run_scoped. */
static int is_def(const char *s, const char *params)
{
	const char *open = strchr(s, '('), *close = strrchr(s, ')');
	char want[8][TPURT_NAME_MAX], got[256];
	int nwant = 0, ngot = 0;
	size_t n = strlen(s);

	if (strncmp(s, "def ", 4) || !open || !close || close < open ||
	    strcmp(close, "):") || n < 7)
		return 0;
	snprintf(got, sizeof(got), "%.*s", (int)(close - open - 1), open + 1);
	for (char *t = strtok(got, ", "); t; t = strtok(NULL, ", ")) {
		int found = 0;

		if (!*params)
			return 0;
		for (const char *p = params; *p; ) {
			size_t len = strcspn(p, ",");

			if (strlen(t) == len && !strncmp(p, t, len))
				found = 1;
			p += len;
			p += strspn(p, ", ");
		}
		if (!found)
			return 0;
		ngot++;
	}
	for (const char *p = params; *p && nwant < 8; nwant++) {
		size_t len = strcspn(p, ",");

		snprintf(want[nwant], sizeof(want[0]), "%.*s", (int)len, p);
		p += len;
		p += strspn(p, ", ");
	}
	return ngot == nwant;
}

/* Brackets opened and not closed in @s. */
static int open_brackets(const char *s)
{
	int level = 0;

	for (; *s; s++)
		level += *s == '(' || *s == '[' ? 1 : *s == ')' || *s == ']' ? -1 : 0;
	return level;
}

/* The rest of one physical line into @buf at @at, without its comment. */
static const char *take_line(const char *p, char *buf, size_t at)
{
	size_t n = strcspn(p, "\n");
	char *hash;

	if (at + n >= LINE_MAX_LEN)
		n = at < LINE_MAX_LEN - 1 ? LINE_MAX_LEN - 1 - at : 0;
	memcpy(buf + at, p, n);
	buf[at + n] = 0;
	hash = strchr(buf + at, '#');
	if (hash)
		*hash = 0;
	for (size_t e = strlen(buf); e && isspace((unsigned char)buf[e - 1]); e--)
		buf[e - 1] = 0;
	p += strcspn(p, "\n");
	return *p ? p + 1 : p;
}

/*
 * One logical line of @text: its indentation and its text without
 * comments; as in Python, a line with brackets still open goes on.
 */
static const char *next_line(const char *p, char *buf, int *indent)
{
	*indent = 0;
	while (*p == ' ' || *p == '\t') {
		*indent += *p == '\t' ? 8 - *indent % 8 : 1;
		p++;
	}
	p = take_line(p, buf, 0);
	while (*p && open_brackets(buf) > 0) {
		size_t at = strlen(buf);

		p += strspn(p, " \t");
		if (at + 1 < LINE_MAX_LEN)
			buf[at++] = ' ';
		p = take_line(p, buf, at);
	}
	return p;
}

#define BLOCK_DEPTH	(TPURT_WHEN_DEPTH + TPURT_SCOPE_DEPTH)

struct block {
	struct block_level level[BLOCK_DEPTH];
	int n;
	int want_def;
};

static void close_block(struct tpurt_kernel *k, struct block *b)
{
	const struct block_level *l = &b->level[--b->n];

	if (!l->scopes)
		k->nwhen--;
	for (int i = 0; i < l->scopes; i++)
		tpurt_kernel_end_scoped(k);
}

static int add_line(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		    struct block *b, const char *line, int indent)
{
	while (b->n && indent <= b->level[b->n - 1].indent && !b->want_def)
		close_block(k, b);
	if (b->want_def) {
		const struct block_level *l = &b->level[b->n - 1];

		b->want_def = 0;
		if (!is_def(line, l->scopes ? l->params : ""))
			return tpurt_fail(-EINVAL, "statement %d: expected 'def _(%s):' after @pl.%s, found '%s'",
					  k->nstmts + 1, l->scopes ? l->params : "",
					  l->scopes ? "run_scoped" : "when", line);
		return 0;
	}
	if (line[0] == '@') {
		struct block_level *l = &b->level[b->n];
		int ret;

		if (b->n == BLOCK_DEPTH)
			return tpurt_fail(-EINVAL, "statement %d: blocks nested deeper than %d",
					  k->nstmts + 1, BLOCK_DEPTH);
		memset(l, 0, sizeof(*l));
		ret = open_block(k, gs, line + 1, l);
		if (ret)
			return ret;
		l->indent = indent;
		b->n++;
		b->want_def = 1;
		return 0;
	}
	return tpurt_kernel_stmt(k, gs, line);
}

int tpurt_kernel_stmts(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		       const char *text)
{
	void *saved;			/* the kernel before op[] */
	struct block b = { .n = 0 };
	char line[LINE_MAX_LEN];
	int indent, ret = 0;

	if (!k || !gs || !text)
		return tpurt_fail(-EINVAL, "kernel statements: kernel, grid spec or text missing");
	saved = malloc(TPURT_KERNEL_STATE_SIZE);
	if (!saved)
		return tpurt_fail(-ENOMEM, "out of memory");
	memcpy(saved, k, TPURT_KERNEL_STATE_SIZE);
	for (const char *p = text; *p && !ret;) {
		p = next_line(p, line, &indent);
		if (line[0])
			ret = add_line(k, gs, &b, line, indent);
	}
	if (!ret && b.want_def)
		ret = tpurt_fail(-EINVAL, "kernel statements: a decorator without its 'def _(...):'");
	while (b.n)
		close_block(k, &b);
	if (ret)
		memcpy(k, saved, TPURT_KERNEL_STATE_SIZE);
	free(saved);
	return ret;
}
