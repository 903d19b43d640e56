// SPDX-License-Identifier: MIT
/*
 * Values of rank 3 and 4 in kernel statements: reductions along any
 * axis, transposes (any permutation) and reshapes that move elements
 * between rows and columns. The body's ops see 2-D refs (the last
 * dimension by the product of the others), so each is decomposed into
 * ops that are exact on such refs:
 * - a reduction along the last axis is the device's row reduction; along
 *   another, a chain of element-wise ops over contiguous slabs
 *   (x.at[p, b]), or column reductions of (B, C) slabs, or slabs gathered
 *   by the DMA engine (x.at[:, b] takes any window);
 * - a transpose permutes the leading dimensions with copies (window
 *   against window, the dimensions that stay in order moved whole) and
 *   swaps a dimension with the last by 2-D transposes of slabs;
 * - a reshape moves runs of a row into strided rows (or back) by copies,
 *   through a run length both row lengths divide.
 * - an iota along a leading dimension is the row index divided and taken
 *   modulo by constants.
 * The copies and ops a transpose, reshape, broadcast or reduction repeats
 * over many positions run in one device loop whose windows index from its
 * trip (struct walk): a kernel holds at most TPU_JOB_MAX_WINDOWS distinct
 * windows. The number of ops each costs is bounded (ND_MAX_OPS unrolled,
 * ND_MAX_TRIPS positions looped); past it the statement fails naming the
 * op and the shape.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "stmt_lower.h"

#define ND_MAX_OPS	512
#define ND_UNROLL	16		/* positions a walk unrolls; past it, a loop */
#define ND_MAX_TRIPS	65536		/* a looped walk's positions */

/* Ref text into @out (TPURT_TEXT_MAX bytes); 0, or -1 if it is too long. */
static int text(char *out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int text(char *out, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, TPURT_TEXT_MAX, fmt, ap);
	va_end(ap);
	return n < 0 || n >= TPURT_TEXT_MAX ? -1 : 0;
}

static int64_t prod(const int64_t *s, int lo, int hi)
{
	int64_t p = 1;

	for (int d = lo; d < hi; d++)
		p *= s[d];
	return p;
}

static const char *shape_text(int rank, const int64_t *s, char *buf, size_t len)
{
	size_t at = (size_t)snprintf(buf, len, "(");

	for (int d = 0; d < rank && at < len; d++)
		at += (size_t)snprintf(buf + at, len - at, "%s%lld", d ? ", " : "",
				       (long long)s[d]);
	if (at < len)
		snprintf(buf + at, len - at, "%s)", rank == 1 ? "," : "");
	return buf;
}

int stmt_dims(const struct value *x, int64_t *s)
{
	if (x->nd > 2) {
		memcpy(s, x->shape, (size_t)x->nd * sizeof(*s));
		return x->nd;
	}
	s[0] = x->rows;
	s[1] = x->cols;
	return 2;
}

void stmt_set_shape(struct value *v, int rank, const int64_t *s)
{
	v->rows = rank > 1 ? prod(s, 0, rank - 1) : 1;
	v->cols = rank ? s[rank - 1] : 1;
	v->nd = rank > 2 ? rank : 0;
	memset(v->shape, 0, sizeof(v->shape));
	if (rank > 2)
		memcpy(v->shape, s, (size_t)rank * sizeof(*s));
}

/* A new temporary of @shape: 2-D for rank 2 or less, else of the shape. */
static int new_shaped(struct stmt_ctx *c, enum tpurt_dtype dtype, int rank,
		      const int64_t *shape, int col, struct value *v)
{
	if (rank > 2)
		return stmt_new_tile_shaped(c, dtype, rank, shape, col, v);
	return stmt_new_tile(c, dtype, rank > 1 ? shape[0] : 1, shape[rank - 1], col, v);
}

/* @x's ref is a ref or temporary declared with @x's own N-D shape. */
int stmt_nd_is_buffer(struct stmt_ctx *c, const struct value *x)
{
	const struct tpurt_kernel_temp *t = NULL;
	struct ref_info r;
	int n = 0;

	if (strchr(x->ref, '.') || strchr(x->ref, '['))
		return 0;
	if (x->temp >= 0)
		t = &c->k->temp[x->temp];
	else if (stmt_find_ref(c, x->ref, (int)strlen(x->ref), &r)) {
		for (int d = 0; d < r.rank; d++)
			if (!(r.hidden >> d & 1)) {
				if (n >= x->nd || r.extent[d] != x->shape[n])
					return 0;
				n++;
			}
		return n == x->nd;
	} else
		for (int i = 0; i < c->k->ntemps; i++)
			if (!strcmp(c->k->temp[i].name, x->ref))
				t = &c->k->temp[i];
	return t && t->rank == x->nd &&
	       !memcmp(t->shape, x->shape, (size_t)x->nd * sizeof(*x->shape));
}

/* @x into a temporary of its N-D shape unless it is in one (or a ref of it). */
int stmt_nd_buffer(struct stmt_ctx *c, struct value *x, int col)
{
	struct value t;

	if (stmt_nd_is_buffer(c, x))
		return 0;
	if (stmt_new_tile_shaped(c, x->dtype, x->nd, x->shape, col, &t) ||
	    stmt_emitted(c, tpurt_kernel_store(c->k, t.ref, x->ref), col))
		return c->err;
	stmt_release(c, x);
	t.nd = x->nd;
	memcpy(t.shape, x->shape, sizeof(t.shape));
	*x = t;
	return 0;
}

/* @x in a 2-D temporary (or a 2-D ref), which row windows index. */
static int flat_buffer(struct stmt_ctx *c, struct value *x, int col)
{
	struct value t;
	struct ref_info r;

	if (!strchr(x->ref, '.') && !strchr(x->ref, '[')) {
		if (x->temp >= 0 ? !c->k->temp[x->temp].rank :
		    stmt_find_ref(c, x->ref, (int)strlen(x->ref), &r) && r.rank == 2 &&
		    !r.hidden && r.rows == x->rows && r.cols == x->cols)
			return 0;
	}
	if (stmt_new_tile(c, x->dtype, x->rows, x->cols, col, &t) ||
	    stmt_emitted(c, tpurt_kernel_store(c->k, t.ref, x->ref), col))
		return c->err;
	stmt_release(c, x);
	*x = t;
	return 0;
}

/*
 * One copy or op per position of some dimensions of a shape (their flat
 * index): unrolled while there are few, each with constant windows; past
 * ND_UNROLL positions, one device loop (lax.fori_loop) whose windows index
 * from its loop_index, so the kernel's window table holds one window per
 * ref the walk names, not one per position. The result, made before the
 * loop, is first named in the body by a window write; what a trip makes
 * before that is a slab's size, never the result's, so no temporary of
 * the body shares its slot.
 */
struct walk {
	const int64_t *s;	/* the shape */
	int dims[TPURT_MAX_RANK];	/* its dimensions walked, outermost first */
	int n;
	int64_t count;		/* positions */
	int depth;		/* loop_index(depth) in a loop, else -1 */
};

/* An index of walked dimension i, to window(): -2 - i. */
#define WALKED(i)	(-2 - (i))

static int walk_begin(struct stmt_ctx *c, struct walk *w, const int64_t *s,
		      const int *dims, int n, int col)
{
	char hi[32];

	w->s = s;
	w->n = n;
	w->count = 1;
	w->depth = -1;
	for (int i = 0; i < n; i++) {
		w->dims[i] = dims[i];
		w->count *= s[dims[i]];
	}
	if (w->count <= ND_UNROLL ||
	    tpurt_kernel_loop_depth(c->k) == TPU_JOB_MAX_LOOP_DEPTH)
		return 0;
	w->depth = tpurt_kernel_loop_depth(c->k);
	snprintf(hi, sizeof(hi), "%lld", (long long)w->count);
	return stmt_emitted(c, tpurt_kernel_loop(c->k, "0", hi), col);
}

/* Positions to emit: all of them unrolled, one trip's in a loop. */
static int64_t walk_emits(const struct walk *w)
{
	return w->depth < 0 ? w->count : 1;
}

/* @ix of emitted position @f: constants unrolled, WALKED(i) in a loop. */
static void walk_at(const struct walk *w, int64_t f, int64_t *ix)
{
	for (int i = w->n - 1; i >= 0; i--) {
		ix[w->dims[i]] = w->depth < 0 ? f % w->s[w->dims[i]] : WALKED(i);
		f /= w->s[w->dims[i]];
	}
}

static int walk_end(struct stmt_ctx *c, const struct walk *w, int col)
{
	return w->depth < 0 ? 0 : stmt_emitted(c, tpurt_kernel_end_loop(c->k), col);
}

/* The index text of walked dimension @i in a loop's trip. */
static void walked_text(const struct walk *w, int i, char *out, size_t len)
{
	int64_t inner = 1;

	for (int j = i + 1; j < w->n; j++)
		inner *= w->s[w->dims[j]];
	if (i && inner > 1)
		snprintf(out, len, "(loop_index(%d) // %lld) %% %lld", w->depth,
			 (long long)inner, (long long)w->s[w->dims[i]]);
	else if (i)
		snprintf(out, len, "loop_index(%d) %% %lld", w->depth,
			 (long long)w->s[w->dims[i]]);
	else if (inner > 1)
		snprintf(out, len, "loop_index(%d) // %lld", w->depth, (long long)inner);
	else
		snprintf(out, len, "loop_index(%d)", w->depth);
}

/*
 * "ref.at[i, :, j]": @ix[d] an index, -1 for the whole dimension, or
 * WALKED(i) for @w's walked dimension i.
 */
static int window(struct stmt_ctx *c, char *out, const char *ref, int rank,
		  const int64_t *ix, const struct walk *w, int col)
{
	size_t at = (size_t)snprintf(out, TPURT_TEXT_MAX, "%s.at[", ref);
	char t[96];

	for (int d = 0; d < rank && at < TPURT_TEXT_MAX; d++) {
		if (ix[d] <= WALKED(0))
			walked_text(w, WALKED(0) - (int)ix[d], t, sizeof(t));
		else if (ix[d] < 0)
			strcpy(t, ":");
		else
			snprintf(t, sizeof(t), "%lld", (long long)ix[d]);
		at += (size_t)snprintf(out + at, TPURT_TEXT_MAX - at, "%s%s", d ? ", " : "", t);
	}
	if (at + 2 > TPURT_TEXT_MAX)
		return stmt_fail(c, col, "window text too long");
	strcat(out, "]");
	return 0;
}

/* Rows [@r0, @r0 + @n) of a 2-D ref (all of it when they are). */
static void rows_of(char *out, const char *ref, int64_t r0, int64_t n, int64_t rows)
{
	/* temporaries' names are short: the text fits */
	if (!r0 && n == rows)
		(void)text(out, "%s", ref);
	else
		(void)text(out, "%s.at[pl.ds(%lld, %lld)]", ref, (long long)r0, (long long)n);
}

/*
 * @mult times @w's flat position: @f's (unrolled) or the trip's (looped;
 * row-major, the flat position is the trip itself).
 */
static void walk_pos(const struct walk *w, int64_t f, int64_t mult, char *out, size_t len)
{
	if (w->depth < 0)
		snprintf(out, len, "%lld", (long long)(f * mult));
	else if (mult == 1)
		snprintf(out, len, "loop_index(%d)", w->depth);
	else
		snprintf(out, len, "loop_index(%d) * %lld", w->depth, (long long)mult);
}

/* Rows [p * n, p * n + n) of a 2-D ref of @rows rows, p @w's position @f. */
static int rows_at(struct stmt_ctx *c, char *out, const char *ref, const struct walk *w,
		   int64_t f, int64_t n, int64_t rows, int col)
{
	char at[64];

	if (w->depth < 0) {
		rows_of(out, ref, f * n, n, rows);
		return 0;
	}
	walk_pos(w, f, n, at, sizeof(at));
	if (text(out, "%s.at[pl.ds(%s, %lld)]", ref, at, (long long)n))
		return stmt_fail(c, col, "window text too long");
	return 0;
}

static int too_many(struct stmt_ctx *c, int col, const char *what, int rank,
		    const int64_t *s, int64_t ops, int64_t most)
{
	char sh[64];

	return stmt_fail(c, col, "%s of a value of shape %s would take %lld ops (at most %lld): not supported",
			 what, shape_text(rank, s, sh, sizeof(sh)), (long long)ops,
			 (long long)most);
}

static int emit(struct stmt_ctx *c, int ret, int col)
{
	return stmt_emitted(c, ret, col);
}

/* --- reductions --- */

static int reduce_binary(int fn)
{
	return fn == TPU_REDUCE_SUM ? TPURT_ADD : fn == TPU_REDUCE_MAX ? TPURT_MAX :
	       fn == TPU_REDUCE_MIN ? TPURT_MIN : -1;
}

/*
 * @x (rank n > 2) reduced along @a with keepdims: @v of shape s with
 * s[a] = 1, of dtype @t. P, B, Q, C: the dimensions before @a, @a, those
 * after it but the last, and the last.
 */
static int reduce_axis(struct stmt_ctx *c, int fn, struct value *x, int a,
		       enum tpurt_dtype t, int col, struct value *v)
{
	int64_t s[TPURT_MAX_RANK], ix[TPURT_MAX_RANK], os[TPURT_MAX_RANK];
	int n = stmt_dims(x, s), bin = reduce_binary(fn), lead[TPURT_MAX_RANK], nl = 0;
	int64_t P = prod(s, 0, a), B = s[a], Q = prod(s, a + 1, n - 1), C = s[n - 1];
	int64_t chain = P * (B - 1), bycol = Q == 1 ? P : -1, gather = 2 * B - 1;
	int64_t moved = B + P * Q;
	char src[TPURT_TEXT_MAX], dst[TPURT_TEXT_MAX], src2[TPURT_TEXT_MAX];
	const char *what = tpurt_stmt_reduce_name((unsigned int)fn);
	enum tpurt_dtype acc;
	struct value o, g;
	struct walk w;

	memcpy(os, s, sizeof(os));
	os[a] = 1;
	if (a == n - 1) {
		/* each row of the 2-D view: the device's row reduction */
		if (stmt_new_tile(c, t, x->rows, 1, col, v) ||
		    emit(c, tpurt_kernel_reduce(c->k, (enum tpurt_reduce)fn, v->ref, x->ref, 1), col))
			return c->err;
		stmt_release(c, x);
		stmt_set_shape(v, n, os);
		return 0;
	}
	if (B == 1 && fn < TPU_REDUCE_ARGMAX && t == x->dtype) {
		*v = *x;
		stmt_set_shape(v, n, os);
		return 0;
	}
	if (bin < 0) {		/* argmax, argmin: column reductions of (B, C) slabs */
		chain = gather = -1;
		if (Q > 1)
			bycol = -1;
	} else {
		moved = -1;
		if (P == 1 || Q == 1)
			gather = -1;	/* the chain takes contiguous slabs, no copies */
	}
	/* the cheapest way that applies */
	int64_t best = -1, walked, per, unrolled;
	int how = 0;
	const int64_t cost[4] = { chain, bycol, gather, moved };

	for (int i = 0; i < 4; i++)
		if (cost[i] >= 0 && (best < 0 || cost[i] < best))
			best = cost[i], how = i;
	/* chain, bycol and moved repeat over P (P * Q) positions: a walk */
	walked = how == 2 ? 1 : how == 3 ? P * Q : P;
	per = how == 0 ? B - 1 : how == 2 ? best : 1;
	unrolled = (how == 3 ? B : 0) + (walked > ND_UNROLL ? per : walked * per);
	if (unrolled > ND_MAX_OPS || walked > ND_MAX_TRIPS)
		return too_many(c, col, what, n, s, walked > ND_MAX_TRIPS ? walked : unrolled,
				walked > ND_MAX_TRIPS ? ND_MAX_TRIPS : ND_MAX_OPS);
	if (stmt_nd_buffer(c, x, col))
		return c->err;
	for (int d = 0; d < a; d++)
		lead[nl++] = d;
	/* a bf16 sum accumulates in float32, rounded once at the end */
	acc = bin == TPURT_ADD && t == TPURT_BF16 ? TPURT_F32 : t;
	if (how == 0 || how == 1) {
		if (stmt_new_tile(c, how ? t : acc, P * Q, C, col, &o) ||
		    walk_begin(c, &w, s, lead, nl, col))
			return c->err;
		for (int64_t p = 0; p < walk_emits(&w); p++) {
			for (int d = 0; d < n; d++)
				ix[d] = -1;
			walk_at(&w, p, ix);
			if (how == 1) {
				/* x.at[p] is (B, C): reduce its columns into row p */
				if (rows_at(c, dst, o.ref, &w, p, 1, P * Q, col) ||
				    (a ? window(c, src, x->ref, a, ix, &w, col) :
				     text(src, "%s", x->ref)) ||
				    emit(c, tpurt_kernel_reduce(c->k, (enum tpurt_reduce)fn, dst,
								 src, 0), col))
					return c->err;
				continue;
			}
			ix[a] = 0;
			if (rows_at(c, dst, o.ref, &w, p, Q, P * Q, col) ||
			    window(c, src, x->ref, a + 1, ix, &w, col))
				return c->err;
			if (B == 1) {
				if (emit(c, tpurt_kernel_unary(c->k, TPURT_IDENTITY, dst, src), col))
					return c->err;
				continue;
			}
			for (int64_t b = 1; b < B; b++) {
				ix[a] = b;
				if (window(c, src2, x->ref, a + 1, ix, &w, col) ||
				    emit(c, tpurt_kernel_binary(c->k, (enum tpurt_binary)bin, dst,
								 b == 1 ? src : dst, src2,
								 TPURT_BCAST_NONE), col))
					return c->err;
			}
		}
		if (walk_end(c, &w, col))
			return c->err;
	} else if (how == 2) {
		/* slabs x.at[:, b] gathered by the DMA engine, folded */
		int64_t gs[TPURT_MAX_RANK];
		int gn = 0;

		for (int d = 0; d < n; d++)
			if (d != a)
				gs[gn++] = s[d];
		if (new_shaped(c, acc, gn, gs, col, &o) ||
		    new_shaped(c, x->dtype, gn, gs, col, &g))
			return c->err;
		for (int64_t b = 0; b < B; b++) {
			for (int d = 0; d < n; d++)
				ix[d] = d == a ? b : -1;
			if (window(c, src, x->ref, n, ix, NULL, col) ||
			    emit(c, tpurt_kernel_sync_copy(c->k, src, g.ref), col) ||
			    emit(c, b ? tpurt_kernel_binary(c->k, (enum tpurt_binary)bin, o.ref,
							    o.ref, g.ref, TPURT_BCAST_NONE) :
				 tpurt_kernel_unary(c->k, TPURT_IDENTITY, o.ref, g.ref), col))
				return c->err;
		}
		stmt_release(c, &g);
	} else {
		/* argmax along a middle axis: @a moved next to the last by copies
		 * (into T), then column reductions of T's (B, C) slabs */
		int64_t ts[TPURT_MAX_RANK], tix[TPURT_MAX_RANK];
		int tn = 0;

		for (int d = 0; d < n - 1; d++)
			if (d != a)
				ts[tn++] = s[d];
		ts[tn++] = B;
		ts[tn++] = C;
		if (stmt_new_tile_shaped(c, x->dtype, n, ts, col, &g) ||
		    stmt_new_tile(c, t, P * Q, C, col, &o))
			return c->err;
		for (int64_t b = 0; b < B; b++) {
			for (int d = 0; d < n; d++) {
				ix[d] = d == a ? b : -1;
				tix[d] = d == n - 2 ? b : -1;
			}
			if (window(c, src, x->ref, n, ix, NULL, col) ||
			    window(c, dst, g.ref, n, tix, NULL, col) ||
			    emit(c, tpurt_kernel_sync_copy(c->k, src, dst), col))
				return c->err;
		}
		for (int d = 0; d < n - 2; d++)
			lead[d] = d;
		if (walk_begin(c, &w, ts, lead, n - 2, col))
			return c->err;
		for (int64_t p = 0; p < walk_emits(&w); p++) {
			walk_at(&w, p, tix);
			if (rows_at(c, dst, o.ref, &w, p, 1, P * Q, col) ||
			    window(c, src, g.ref, n - 2, tix, &w, col) ||
			    emit(c, tpurt_kernel_reduce(c->k, (enum tpurt_reduce)fn, dst, src, 0),
				 col))
				return c->err;
		}
		if (walk_end(c, &w, col))
			return c->err;
		stmt_release(c, &g);
	}
	stmt_release(c, x);
	if (o.dtype != t) {
		struct value r;

		if (stmt_new_tile(c, t, o.rows, o.cols, col, &r) ||
		    emit(c, tpurt_kernel_unary(c->k, TPURT_IDENTITY, r.ref, o.ref), col))
			return c->err;
		stmt_release(c, &o);
		o = r;
	}
	*v = o;
	stmt_set_shape(v, n, os);
	return 0;
}

int stmt_nd_reduce(struct stmt_ctx *c, int fn, struct value *x, unsigned int axes,
		   int keep, enum tpurt_dtype t, int col, struct value *v,
		   int64_t *count)
{
	int64_t s[TPURT_MAX_RANK], rs[TPURT_MAX_RANK];
	int n = stmt_dims(x, s), rn = 0;
	struct value cur = *x;

	if (count)
		*count = 1;
	for (int a = n - 1; a >= 0; a--) {
		if (!(axes >> a & 1))
			continue;
		if (count)
			*count *= s[a];
		if (reduce_axis(c, fn, &cur, a, t, col, v))
			return c->err;
		cur = *v;
	}
	*v = cur;
	if (keep)
		return 0;
	for (int d = 0; d < n; d++)
		if (!(axes >> d & 1))
			rs[rn++] = s[d];
	return stmt_reshape_to(c, v, rn, rs, col, v);
}

/* --- reshapes --- */

static int64_t gcd64(int64_t a, int64_t b)
{
	while (b) {
		int64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/*
 * (r, c) into (r * c / c2, c2) for c2 dividing c (split) or c dividing c2
 * (merge), by copies: a split moves the k = c / c2 runs of each row into
 * every k-th row; a merge the reverse. The copies take strided windows.
 */
static int split_merge(struct stmt_ctx *c, struct value *xp, int64_t c2, int col,
		       struct value *v)
{
	struct value xv = *xp, *x = &xv;	/* @v may be @xp */
	int64_t r = x->rows, k, r2 = x->rows * x->cols / c2;
	char src[TPURT_TEXT_MAX], dst[TPURT_TEXT_MAX];
	int split = x->cols > c2, dim0 = 0;
	struct walk w;

	if (x->cols == c2)
		return *v = *x, 0;
	if (flat_buffer(c, x, col) || stmt_new_tile(c, x->dtype, r2, c2, col, v))
		return c->err;
	k = split ? x->cols / c2 : c2 / x->cols;
	if (walk_begin(c, &w, &k, &dim0, 1, col))
		return c->err;
	for (int64_t m = 0; m < walk_emits(&w); m++) {
		int64_t n = split ? r : r2;	/* rows of the strided side */
		int64_t run = split ? c2 : x->cols;
		char rows[160], at[64], cols[160];

		walk_pos(&w, m, 1, at, sizeof(at));
		if (n == 1)
			snprintf(rows, sizeof(rows), "pl.ds(%s, 1)", at);
		else
			snprintf(rows, sizeof(rows), "pl.ds(%s, %lld, %lld)", at, (long long)n,
				 (long long)k);
		walk_pos(&w, m, run, at, sizeof(at));
		snprintf(cols, sizeof(cols), "pl.ds(%s, %lld)", at, (long long)run);
		if (split ? text(src, "%s.at[:, %s]", x->ref, cols) ||
			    text(dst, "%s.at[%s, :]", v->ref, rows) :
			    text(src, "%s.at[%s, :]", x->ref, rows) ||
			    text(dst, "%s.at[:, %s]", v->ref, cols))
			return stmt_fail(c, col, "window text too long");
		if (emit(c, tpurt_kernel_sync_copy(c->k, src, dst), col))
			return c->err;
	}
	if (walk_end(c, &w, col))
		return c->err;
	stmt_release(c, x);
	return 0;
}

/* A row (1, n) and a column (n, 1) are each other's transpose. */
static int row_col(struct stmt_ctx *c, struct value *xp, int col, struct value *v)
{
	struct value xv = *xp, *x = &xv;	/* @v may be @xp */

	if (stmt_new_tile(c, x->dtype, x->cols, x->rows, col, v) ||
	    emit(c, tpurt_kernel_transpose(c->k, v->ref, x->ref), col))
		return c->err;
	stmt_release(c, x);
	return 0;
}

/* Ops (r, c) -> (1, r * c) takes, and back: a copy per row, or one transpose. */
static int64_t row_cost(int64_t r, int64_t c)
{
	return r == 1 ? 0 : c == 1 ? 1 : r;
}

/* Copies a split or merge from @c to @c2 takes; -1 if a stride is too big. */
static int64_t sm_cost(int64_t r, int64_t c, int64_t c2)
{
	int64_t k = c > c2 ? c / c2 : c2 / c, strided = c > c2 ? r : r * c / c2;

	if (c == c2)
		return 0;
	return strided > 1 && k > 255 ? -1 : k;
}

int stmt_reshape_to(struct stmt_ctx *c, struct value *x, int rank,
		    const int64_t *shape, int col, struct value *v)
{
	int64_t r = x->rows, k = x->cols, n = r * k, r2, k2, g, via_g, via_row;
	int64_t s[TPURT_MAX_RANK];
	struct value t = *x;
	char sh[64];

	r2 = rank > 1 ? prod(shape, 0, rank - 1) : 1;
	k2 = rank ? shape[rank - 1] : 1;
	if (r2 * k2 != n)
		return stmt_fail(c, col, "reshape of %lld elements to %s", (long long)n,
				 shape_text(rank, shape, sh, sizeof(sh)));
	if (r2 == r && k2 == k) {
		*v = *x;
		stmt_set_shape(v, rank, shape);
		return 0;
	}
	g = gcd64(k, k2);
	via_g = sm_cost(r, k, g) < 0 || sm_cost(n / g, g, k2) < 0 ? -1 :
		sm_cost(r, k, g) + sm_cost(n / g, g, k2);
	via_row = row_cost(r, k) + row_cost(r2, k2);
	if (via_g >= 0 && via_g < via_row ? via_g > ND_MAX_TRIPS : via_row > ND_MAX_TRIPS)
		return too_many(c, col, "reshape", stmt_dims(x, s), s,
				via_g >= 0 && via_g < via_row ? via_g : via_row, ND_MAX_TRIPS);
	if (via_g >= 0 && via_g <= via_row) {
		if (split_merge(c, &t, g, col, &t) || split_merge(c, &t, k2, col, v))
			return c->err;
	} else {
		/* through one row of all the elements */
		if (r > 1 && (k == 1 ? row_col(c, &t, col, &t) : split_merge(c, &t, n, col, &t)))
			return c->err;
		if (r2 > 1 && (k2 == 1 ? row_col(c, &t, col, v) : split_merge(c, &t, k2, col, v)))
			return c->err;
		if (r2 == 1)
			*v = t;
	}
	stmt_set_shape(v, rank, shape);
	return 0;
}

/* --- transposes --- */

/*
 * @x (an N-D buffer of rank @n) with its leading dimensions permuted:
 * out dimension j is x's @perm[j], perm[n - 1] == n - 1. Copies window to
 * window, one per index of the dimensions that do not keep their order
 * (the fewest elements' worth), the others whole.
 */
static int permute_leading(struct stmt_ctx *c, struct value *x, const int *perm,
			   int col, struct value *v)
{
	int64_t s[TPURT_MAX_RANK], os[TPURT_MAX_RANK], ix[TPURT_MAX_RANK], oix[TPURT_MAX_RANK];
	int n = stmt_dims(x, s), pos[TPURT_MAX_RANK], fixed[TPURT_MAX_RANK], nf = 0;
	unsigned int best_set = 0;
	int64_t best = -1;
	char src[TPURT_TEXT_MAX], dst[TPURT_TEXT_MAX];
	struct walk w;
	int ident = 1;

	for (int j = 0; j < n; j++) {
		os[j] = s[perm[j]];
		pos[perm[j]] = j;
		ident &= perm[j] == j;
	}
	if (ident)
		return *v = *x, 0;
	for (unsigned int set = 0; set < 1u << (n - 1); set++) {
		int64_t cost = 1, last = -1;
		int ok = 1;

		for (int i = 0; i < n; i++) {
			if (set >> i & 1) {
				cost *= s[i];
				continue;
			}
			if (pos[i] < last)
				ok = 0;
			last = pos[i];
		}
		if (ok && (best < 0 || cost < best))
			best = cost, best_set = set;
	}
	if (best > ND_MAX_TRIPS)
		return too_many(c, col, "transpose", n, s, best, ND_MAX_TRIPS);
	if (stmt_nd_buffer(c, x, col) ||
	    stmt_new_tile_shaped(c, x->dtype, n, os, col, v))
		return c->err;
	for (int i = 0; i < n; i++)
		if (best_set >> i & 1)
			fixed[nf++] = i;
	if (walk_begin(c, &w, s, fixed, nf, col))
		return c->err;
	for (int64_t f = 0; f < walk_emits(&w); f++) {
		for (int d = 0; d < n; d++)
			ix[d] = -1;
		walk_at(&w, f, ix);
		for (int j = 0; j < n; j++)
			oix[j] = ix[perm[j]];
		if (window(c, src, x->ref, n, ix, &w, col) ||
		    window(c, dst, v->ref, n, oix, &w, col) ||
		    emit(c, tpurt_kernel_sync_copy(c->k, nf ? src : x->ref, nf ? dst : v->ref),
			 col))
			return c->err;
	}
	if (walk_end(c, &w, col))
		return c->err;
	stmt_release(c, x);
	stmt_set_shape(v, n, os);
	return 0;
}

int stmt_nd_transpose(struct stmt_ctx *c, struct value *x, const int *perm,
		      int col, struct value *v)
{
	int64_t s[TPURT_MAX_RANK], ts[TPURT_MAX_RANK], ix[TPURT_MAX_RANK];
	int n = stmt_dims(x, s), k = perm[n - 1], p1[TPURT_MAX_RANK] = { 0 };
	int p2[TPURT_MAX_RANK] = { 0 }, order[TPURT_MAX_RANK] = { 0 }, no = 0;
	int lead[TPURT_MAX_RANK];
	char src[TPURT_TEXT_MAX], dst[TPURT_TEXT_MAX];
	struct value t1, t2;
	struct walk w;
	int64_t groups;

	if (k == n - 1)
		return permute_leading(c, x, perm, col, v);
	/* 1: x's dimension k moved next to the last (T1: others, k, last) */
	for (int d = 0; d < n - 1; d++)
		if (d != k)
			order[no++] = d;
	order[no++] = k;
	order[no++] = n - 1;
	for (int d = 0; d < n; d++)
		p1[d] = order[d];
	groups = prod(s, 0, n) / (s[k] * s[n - 1]);
	if (groups > ND_MAX_TRIPS)
		return too_many(c, col, "transpose", n, s, groups, ND_MAX_TRIPS);
	if (permute_leading(c, x, p1, col, &t1))
		return c->err;
	/* 2: each (s[k], s[last]) slab of T1 transposed (T2: others, last, k) */
	for (int d = 0; d < n; d++)
		ts[d] = s[order[d]];
	ts[n - 2] = s[n - 1];
	ts[n - 1] = s[k];
	if (stmt_nd_buffer(c, &t1, col) ||
	    stmt_new_tile_shaped(c, x->dtype, n, ts, col, &t2))
		return c->err;
	for (int d = 0; d < n - 2; d++)
		lead[d] = d;
	if (walk_begin(c, &w, ts, lead, n - 2, col))
		return c->err;
	for (int64_t gi = 0; gi < walk_emits(&w); gi++) {
		walk_at(&w, gi, ix);
		if (window(c, src, t1.ref, n - 2, ix, &w, col) ||
		    window(c, dst, t2.ref, n - 2, ix, &w, col) ||
		    emit(c, tpurt_kernel_transpose(c->k, n > 2 ? dst : t2.ref,
						   n > 2 ? src : t1.ref), col))
			return c->err;
	}
	if (walk_end(c, &w, col))
		return c->err;
	stmt_release(c, &t1);
	t2.nd = n;
	memcpy(t2.shape, ts, sizeof(ts));
	/* 3: T2's leading dimensions into the order asked for */
	order[n - 2] = n - 1;
	order[n - 1] = k;
	for (int j = 0; j < n; j++)
		for (int d = 0; d < n; d++)
			if (order[d] == perm[j])
				p2[j] = d;
	return permute_leading(c, &t2, p2, col, v);
}

/* --- iota --- */

int stmt_nd_iota(struct stmt_ctx *c, enum tpurt_dtype dtype, int rank,
		 const int64_t *shape, int dim, const char *offset, int col,
		 struct value *v)
{
	int64_t inner = prod(shape, dim + 1, rank - 1);
	struct value t;

	if (stmt_new_tile(c, TPURT_INT32, prod(shape, 0, rank - 1), shape[rank - 1], col, &t))
		return c->err;
	if (dim == rank - 1) {		/* the column index */
		if (emit(c, tpurt_kernel_iota(c->k, t.ref, 1, NULL), col))
			return c->err;
	} else if (emit(c, tpurt_kernel_iota(c->k, t.ref, 0, NULL), col) ||
		   (inner > 1 &&
		    emit(c, tpurt_kernel_binary_scalar(c->k, TPURT_DIV, t.ref, t.ref,
						       (float)inner), col)) ||
		   (dim > 0 &&
		    emit(c, tpurt_kernel_binary_scalar(c->k, TPURT_MOD, t.ref, t.ref,
						       (float)shape[dim]), col))) {
		return c->err;	/* the row's index along @dim */
	}
	if (offset && emit(c, tpurt_kernel_binary_expr(c->k, TPURT_ADD, t.ref, t.ref, offset),
			   col))
		return c->err;
	if (dtype == TPURT_INT32) {
		*v = t;
	} else {
		if (stmt_new_tile(c, dtype, t.rows, t.cols, col, v) ||
		    emit(c, tpurt_kernel_unary(c->k, TPURT_IDENTITY, v->ref, t.ref), col))
			return c->err;
		stmt_release(c, &t);
	}
	stmt_set_shape(v, rank, shape);
	return 0;
}

/* --- element-wise ops broadcasting N-D shapes --- */

/* @x's shape padded with leading ones to rank @n. */
static void padded(const struct value *x, int n, int64_t *s)
{
	int64_t own[TPURT_MAX_RANK];
	int m = stmt_dims(x, own);

	for (int d = 0; d < n; d++)
		s[d] = d < n - m ? 1 : own[d - (n - m)];
}

/* The result's shape of broadcasting @a and @b (rank @n): -1 if they do not. */
static int broadcast_shape(const struct value *a, const struct value *b, int n,
			   int64_t *sa, int64_t *sb, int64_t *so)
{
	padded(a, n, sa);
	padded(b, n, sb);
	for (int d = 0; d < n; d++) {
		if (sa[d] != sb[d] && sa[d] != 1 && sb[d] != 1)
			return -1;
		so[d] = sa[d] > sb[d] ? sa[d] : sb[d];
	}
	return 0;
}

/* @s's dimensions [lo, hi) are all @so's, or all 1. */
static int whole_or_one(const int64_t *s, const int64_t *so, int lo, int hi)
{
	int whole = 1, one = 1;

	for (int d = lo; d < hi; d++) {
		whole &= s[d] == so[d];
		one &= s[d] == 1;
	}
	return whole || one;
}

int stmt_nd_broadcasts(const struct value *a, const struct value *b)
{
	int64_t sa[TPURT_MAX_RANK], sb[TPURT_MAX_RANK], so[TPURT_MAX_RANK];
	int n = a->nd > b->nd ? a->nd : b->nd;

	if (n <= 2 || a->kind != V_TILE || b->kind != V_TILE)
		return 0;
	/* a 2-D value of the other's 2-D view (a store's target, o_ref[...]
	 * += x of a 3-D o_ref) is taken element for element, as stores are */
	if ((!a->nd || !b->nd) && a->rows == b->rows && a->cols == b->cols)
		return 0;
	if (broadcast_shape(a, b, n, sa, sb, so))
		return 1;	/* the N-D path names the shapes */
	/* the 2-D views broadcast as the N-D shapes do: whole, a row (leading
	 * dimensions all 1) or a column (the leading ones whole, the last 1) */
	return !whole_or_one(sa, so, 0, n - 1) || !whole_or_one(sb, so, 0, n - 1);
}

/*
 * The part of @x (padded to rank @n, shape @sx) that the result's slab at
 * leading index @ix (its first @k dimensions) reads: indexed in x's own
 * dimensions, 0 where x has 1, the rest whole.
 */
static int slab(struct stmt_ctx *c, const struct value *x, int n, const int64_t *sx,
		int k, const int64_t *ix, const struct walk *w, int col, struct value *v)
{
	int m = x->nd > 2 ? x->nd : 2, lead = k - (n - m);
	int64_t own[TPURT_MAX_RANK];

	*v = *x;
	v->temp = -1;
	v->nd = 0;
	v->rows = prod(sx, k, n - 1);
	v->cols = sx[n - 1];
	if (lead <= 0)
		return 0;
	for (int d = 0; d < lead; d++)
		own[d] = sx[d + n - m] == 1 ? 0 : ix[d + n - m];
	return window(c, v->ref, x->ref, lead, own, w, col);
}

int stmt_nd_binary(struct stmt_ctx *c, int fn, int floor_div, struct value *a,
		   struct value *b, int col, struct value *v)
{
	int64_t sa[TPURT_MAX_RANK], sb[TPURT_MAX_RANK], so[TPURT_MAX_RANK];
	int64_t ix[TPURT_MAX_RANK], ops;
	int n = a->nd > b->nd ? a->nd : b->nd, k, lead[TPURT_MAX_RANK];
	char sh1[64], sh2[64];
	struct value o, r, va, vb;
	enum tpurt_dtype t;
	struct walk w;

	if (broadcast_shape(a, b, n, sa, sb, so))
		return stmt_fail(c, col, "shapes %s and %s do not broadcast",
				 shape_text(n, sa, sh1, sizeof(sh1)),
				 shape_text(n, sb, sh2, sizeof(sh2)));
	/* slabs of the dimensions from k on, where each operand is whole or 1 */
	for (k = 0; k < n - 1; k++)
		if (whole_or_one(sa, so, k, n - 1) && whole_or_one(sb, so, k, n - 1))
			break;
	ops = prod(so, 0, k);
	if (ops > ND_MAX_TRIPS)
		return too_many(c, col, "broadcasting", n, so, ops, ND_MAX_TRIPS);
	for (int i = 0; i < 2; i++) {
		struct value *x = i ? b : a;

		if ((x->nd > 2 ? stmt_nd_buffer(c, x, col) : flat_buffer(c, x, col)))
			return c->err;
	}
	for (int d = 0; d < k; d++)
		lead[d] = d;
	if (walk_begin(c, &w, so, lead, k, col))
		return c->err;
	for (int64_t f = 0; f < walk_emits(&w); f++) {
		struct dest d;
		char out[TPURT_TEXT_MAX];

		walk_at(&w, f, ix);
		if (slab(c, a, n, sa, k, ix, &w, col, &va) ||
		    slab(c, b, n, sb, k, ix, &w, col, &vb))
			return c->err;
		if (!f) {
			/* the result's dtype, from the first slab's op */
			if (stmt_lower_binary_2d(c, fn, floor_div, &va, &vb, NULL, col, &r))
				return c->err;
			t = r.dtype;
			if (new_shaped(c, t, n, so, col, &o))
				return c->err;
		}
		if (k ? window(c, out, o.ref, k, ix, &w, col) : text(out, "%s", o.ref))
			return c->err;
		d = (struct dest){ out, prod(so, k, n - 1), so[n - 1], t };
		if (f && stmt_lower_binary_2d(c, fn, floor_div, &va, &vb, &d, col, &r))
			return c->err;
		if (strcmp(r.ref, out)) {
			if (emit(c, tpurt_kernel_store(c->k, out, r.ref), col))
				return c->err;
			stmt_release(c, &r);
		}
	}
	if (walk_end(c, &w, col))
		return c->err;
	stmt_release(c, a);
	stmt_release(c, b);
	*v = o;
	stmt_set_shape(v, n, so);
	return 0;
}

/* --- rolls and concatenations along any axis --- */

/* "ref.at[:, pl.ds(start, size), :]": dimension @d sliced, the others whole. */
static int range_window(struct stmt_ctx *c, char *out, const char *ref, int rank,
			int d, int64_t start, int64_t size, int col)
{
	size_t at = (size_t)snprintf(out, TPURT_TEXT_MAX, "%s.at[", ref);

	for (int i = 0; i < rank && at < TPURT_TEXT_MAX; i++)
		at += (size_t)snprintf(out + at, TPURT_TEXT_MAX - at, i == d ?
				       "%spl.ds(%lld, %lld)" : "%s:", i ? ", " : "",
				       (long long)start, (long long)size);
	if (at + 2 > TPURT_TEXT_MAX)
		return stmt_fail(c, col, "window text too long");
	strcat(out, "]");
	return 0;
}

int stmt_nd_roll(struct stmt_ctx *c, struct value *x, int axis,
		 const struct value *s, const char *shift, int col, struct value *v)
{
	int64_t sh[TPURT_MAX_RANK], q, b, k;
	int n = stmt_dims(x, sh);
	char src[TPURT_TEXT_MAX], dst[TPURT_TEXT_MAX];

	if (axis == n - 1 || axis == 0) {
		/* along each row of the 2-D view, or of whole (Q, C) slabs of rows */
		q = axis ? 1 : prod(sh, 1, n - 1);
		if (text(src, q > 1 ? "(%s) * %lld" : "%s", shift, (long long)q))
			return stmt_fail(c, col, "roll: shift text too long");
		if (stmt_new_tile(c, x->dtype, x->rows, x->cols, col, v) ||
		    emit(c, tpurt_kernel_roll(c->k, v->ref, x->ref, src, axis ? 1 : 0), col))
			return c->err;
		stmt_release(c, x);
		stmt_set_shape(v, n, sh);
		return 0;
	}
	if (s->kind != V_IMM)
		return stmt_fail(c, col, "roll along axis %d of a value of rank %d takes a constant shift (its two parts are copied)",
				 axis, n);
	b = sh[axis];
	k = ((int64_t)s->imm % b + b) % b;
	if (!k)
		return *v = *x, 0;
	if (stmt_nd_buffer(c, x, col) ||
	    stmt_new_tile_shaped(c, x->dtype, n, sh, col, v))
		return c->err;
	/* [0, b - k) moves to [k, b), [b - k, b) to [0, k) */
	if (range_window(c, src, x->ref, n, axis, 0, b - k, col) ||
	    range_window(c, dst, v->ref, n, axis, k, b - k, col) ||
	    emit(c, tpurt_kernel_sync_copy(c->k, src, dst), col) ||
	    range_window(c, src, x->ref, n, axis, b - k, k, col) ||
	    range_window(c, dst, v->ref, n, axis, 0, k, col) ||
	    emit(c, tpurt_kernel_sync_copy(c->k, src, dst), col))
		return c->err;
	stmt_release(c, x);
	stmt_set_shape(v, n, sh);
	return 0;
}

int stmt_nd_concatenate(struct stmt_ctx *c, struct value *x, int n, int axis,
			int col, struct value *v)
{
	int64_t s0[TPURT_MAX_RANK], si[TPURT_MAX_RANK], so[TPURT_MAX_RANK], at = 0;
	int rank = stmt_dims(&x[0], s0);
	char sa[64], sb[64], dst[TPURT_TEXT_MAX];

	memcpy(so, s0, sizeof(so));
	so[axis] = 0;
	for (int i = 0; i < n; i++) {
		int ri = stmt_dims(&x[i], si);
		int same = ri == rank;

		for (int d = 0; same && d < rank; d++)
			same = d == axis || si[d] == s0[d];
		if (!same)
			return stmt_fail(c, col, "concatenate along axis %d of %s and %s: the other dimensions differ",
					 axis, shape_text(rank, s0, sa, sizeof(sa)),
					 shape_text(ri, si, sb, sizeof(sb)));
		if (x[i].dtype != x[0].dtype)
			return stmt_fail(c, col, "concatenate of %s and %s: cast the parts to one dtype",
					 stmt_dtype_str(x[0].dtype), stmt_dtype_str(x[i].dtype));
		so[axis] += si[axis];
	}
	if (axis ? stmt_new_tile_shaped(c, x[0].dtype, rank, so, col, v) :
	    stmt_new_tile(c, x[0].dtype, prod(so, 0, rank - 1), so[rank - 1], col, v))
		return c->err;
	for (int i = 0; i < n; i++) {
		int64_t size = x[i].nd > 2 ? x[i].shape[axis] : 0;

		if (!axis) {
			/* the parts' rows one after another: a store each */
			rows_of(dst, v->ref, at * (x[i].rows / size), x[i].rows, v->rows);
			if (emit(c, tpurt_kernel_store(c->k, dst, x[i].ref), col))
				return c->err;
		} else if (stmt_nd_buffer(c, &x[i], col) ||
			   range_window(c, dst, v->ref, rank, axis, at, size, col) ||
			   emit(c, tpurt_kernel_sync_copy(c->k, x[i].ref, dst), col)) {
			return c->err;
		}
		at += size;
		stmt_release(c, &x[i]);
	}
	stmt_set_shape(v, rank, so);
	return 0;
}
