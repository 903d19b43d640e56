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
	struct tpurt_kernel *saved;
	struct stmt_ctx *c;
	struct stmt st;
	int ret;

	if (!k || !gs || !text)
		return tpurt_fail(-EINVAL, "kernel statement: kernel, grid spec or text missing");
	saved = malloc(sizeof(*saved));
	c = new_ctx(k, gs, text);
	if (!saved || !c) {
		free(saved);
		free(c);
		return tpurt_fail(-ENOMEM, "out of memory");
	}
	*saved = *k;
	ret = stmt_parse(c, &st);
	if (!ret)
		ret = lower_stmt(c, &st);
	for (int i = 0; i < k->ntemps; i++)
		k->temp[i].busy = 0;
	if (ret)
		*k = *saved;
	else
		k->nstmts++;
	free(saved);
	free(c);
	return ret;
}

/* "@pl.when(cond)" opens a block; its "def _():" line follows. */
static int open_when(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		     const char *line)
{
	struct stmt_ctx *c = new_ctx(k, gs, line);
	struct stmt_node *n;
	int ret;

	if (!c)
		return tpurt_fail(-ENOMEM, "out of memory");
	ret = stmt_parse_expr(c, &n);
	if (!ret && (n->kind != SN_CALL || n->nargs != 1 || n->base->kind != SN_NAME ||
		     n->base->len != 4 || strncmp(n->base->name, "when", 4)))
		ret = stmt_fail(c, 0, "expected @pl.when(condition)");
	if (!ret && k->nwhen == TPURT_WHEN_DEPTH)
		ret = stmt_fail(c, 0, "when() nested deeper than %d", TPURT_WHEN_DEPTH);
	if (!ret)
		ret = stmt_lower_pred(c, n->arg[0], k->when[k->nwhen], TPURT_TEXT_MAX);
	if (!ret)
		k->nwhen++;
	free(c);
	return ret;
}

static int is_def(const char *s)
{
	size_t n = strlen(s);

	return !strncmp(s, "def ", 4) && n > 5 && !strcmp(s + n - 3, "():");
}

/* One line of @text: its indentation and its text without the comment. */
static const char *next_line(const char *p, char *buf, int *indent)
{
	size_t n = strcspn(p, "\n");
	char *hash;

	*indent = 0;
	while (n && (*p == ' ' || *p == '\t')) {
		*indent += *p == '\t' ? 8 - *indent % 8 : 1;
		p++, n--;
	}
	if (n >= LINE_MAX_LEN)
		n = LINE_MAX_LEN - 1;
	memcpy(buf, p, n);
	buf[n] = 0;
	hash = strchr(buf, '#');
	if (hash)
		*hash = 0;
	for (size_t e = strlen(buf); e && isspace((unsigned char)buf[e - 1]); e--)
		buf[e - 1] = 0;
	p += strcspn(p, "\n");
	return *p ? p + 1 : p;
}

struct block {
	int indent[TPURT_WHEN_DEPTH];	/* the decorators' indentation */
	int n;
	int want_def;
};

static int add_line(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		    struct block *b, const char *line, int indent)
{
	while (b->n && indent <= b->indent[b->n - 1] && !b->want_def) {
		b->n--;
		k->nwhen--;
	}
	if (b->want_def) {
		b->want_def = 0;
		if (!is_def(line))
			return tpurt_fail(-EINVAL, "statement %d: expected 'def _():' after @pl.when, found '%s'",
					  k->nstmts + 1, line);
		return 0;
	}
	if (line[0] == '@') {
		int ret = open_when(k, gs, line + 1);

		if (ret)
			return ret;
		b->indent[b->n++] = indent;
		b->want_def = 1;
		return 0;
	}
	return tpurt_kernel_stmt(k, gs, line);
}

int tpurt_kernel_stmts(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		       const char *text)
{
	struct tpurt_kernel *saved;
	struct block b = { .n = 0 };
	char line[LINE_MAX_LEN];
	int indent, ret = 0;

	if (!k || !gs || !text)
		return tpurt_fail(-EINVAL, "kernel statements: kernel, grid spec or text missing");
	saved = malloc(sizeof(*saved));
	if (!saved)
		return tpurt_fail(-ENOMEM, "out of memory");
	*saved = *k;
	for (const char *p = text; *p && !ret;) {
		p = next_line(p, line, &indent);
		if (line[0])
			ret = add_line(k, gs, &b, line, indent);
	}
	if (!ret && b.want_def)
		ret = tpurt_fail(-EINVAL, "kernel statements: @pl.when without its 'def _():'");
	k->nwhen -= b.n;
	if (ret)
		*k = *saved;
	free(saved);
	return ret;
}
