/* SPDX-License-Identifier: MIT */
/*
 * Kernel statements (tpurt_kernel_stmt): the parser (stmt_parse.c) turns
 * one line of a Pallas kernel body into a tree; the lowering
 * (stmt_lower.c) checks its shapes and dtypes against the grid spec and
 * emits the device's ops; stmt_names.c holds the names both read.
 */
#ifndef TPURT_STMT_H
#define TPURT_STMT_H

#include "tpurt_private.h"

#define STMT_MAX_NODES	128
#define STMT_MAX_ARGS	12	/* debug_print: a format, 8 scalars, 3 arrays */
#define STMT_MAX_KW	4

enum stmt_node_kind {
	SN_NUM,		/* 1, 0.5, 1e-5, inf */
	SN_NAME,	/* a name, module prefixes (jnp., pl., lax.) dropped */
	SN_CALL,	/* base(args, kw=value): base a name or an attribute */
	SN_ATTR,	/* base.name: x.T, o.dtype, x.astype */
	SN_INDEX,	/* base[args]; no args: base[...] */
	SN_BINOP,	/* args[0] op args[1] */
	SN_UNOP,	/* op args[0]: -, +, ~, not */
	SN_TUPLE,	/* (a, b) */
	SN_SLICE,	/* a:b[:s] inside [], any part may be missing (NULL) */
	SN_STR,		/* "text" (debug_print's format): @name, @len inside the quotes */
};

struct stmt_node {
	enum stmt_node_kind kind;
	int col;			/* 0-based offset of its first character */
	const char *name;		/* name, attribute or operator */
	int len;
	double num;
	int is_int;
	struct stmt_node *base;
	struct stmt_node *arg[STMT_MAX_ARGS];
	int nargs;
	const char *kw[STMT_MAX_KW];
	int kwlen[STMT_MAX_KW];
	struct stmt_node *kwval[STMT_MAX_KW];
	int nkw;
};

/*
 * One statement: [pl.when(cond):] target (=|+=|-=|*=|/=) value, or a call
 * (make_async_copy(...).start(), semaphore_signal(...)). A target is a
 * name, name[...], or (@target_node) a window store buf.at[i][...] or an
 * SMEM element s[i].
 */
struct stmt {
	struct stmt_node *when;
	const char *target;
	int tlen, tcol;
	int target_indexed;		/* target[...] */
	struct stmt_node *target_node;	/* any other target */
	char aug;			/* 0 for '=', else '+', '-', '*', '/' */
	struct stmt_node *value;
	struct stmt_node *call;		/* an expression statement */
};

struct stmt_ctx {
	const char *text;
	char what[48];			/* "statement 3" */
	int err;
	struct stmt_node node[STMT_MAX_NODES];
	int nnodes;
	struct tpurt_kernel *k;
	const struct tpurt_grid_spec *gs;
};

/* Report an error at column @col (0-based) of the text; the first wins. */
int stmt_fail(struct stmt_ctx *c, int col, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Parse c->text into @st. */
int stmt_parse(struct stmt_ctx *c, struct stmt *st);
/* Parse c->text as one expression (a pl.when condition). */
int stmt_parse_expr(struct stmt_ctx *c, struct stmt_node **out);

/* Check @st against c->gs and append its ops to c->k. */
int stmt_lower(struct stmt_ctx *c, const struct stmt *st);
/* A pl.when condition as index-map text. */
int stmt_lower_pred(struct stmt_ctx *c, const struct stmt_node *cond,
		    char *text, size_t len);
/* "@pl.run_scoped(name=type, ...)": open a scope per keyword, in order,
 * and give their names ("sem, buf") for the def line's check. */
int stmt_lower_run_scoped(struct stmt_ctx *c, const struct stmt_node *call,
			  int *nscopes, char *names, size_t len);

/* Names: the statement syntax's functions and dtypes. */
enum stmt_fn_kind {
	FN_NONE, FN_UNARY, FN_BINARY, FN_REDUCE, FN_WHERE, FN_DOT, FN_IOTA,
	FN_CLIP, FN_CLAMP, FN_ZEROS_LIKE, FN_ONES_LIKE, FN_FULL_LIKE,
	FN_ZEROS, FN_FULL, FN_PROGRAM_ID, FN_NUM_PROGRAMS,
	FN_ASYNC_COPY, FN_SYNC_COPY, FN_SEM_SIGNAL, FN_SEM_WAIT, FN_SEM_READ,
	FN_DS, FN_RUN_SCOPED, FN_MEAN, FN_TRANSPOSE, FN_ROLL, FN_GATHER,
	FN_PRNG_SEED, FN_PRNG_BITS, FN_LOOP_INDEX,
	FN_CONCATENATE, FN_RESHAPE, FN_BITCAST, FN_DEBUG_PRINT, FN_DELAY,
};

struct stmt_fn {
	enum stmt_fn_kind kind;
	int fn;				/* enum tpu_unary, tpu_binary, tpu_reduce */
};

struct stmt_fn tpurt_stmt_function(const char *name, int len);
/* -1 if @name is not a dtype. */
int tpurt_stmt_dtype(const char *name, int len);
const char *tpurt_stmt_dtype_name(enum tpurt_dtype dtype);
const char *tpurt_stmt_unary_name(unsigned int fn);
const char *tpurt_stmt_binary_name(unsigned int fn);
const char *tpurt_stmt_reduce_name(unsigned int fn);

#endif /* TPURT_STMT_H */
