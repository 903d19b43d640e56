// SPDX-License-Identifier: MIT
/*
 * Kernel statements, lowered: the memory model. Refs and windows as ref
 * text (window.c's syntax, fitted here as pallas_call will fit them),
 * async copies with their semaphores, semaphore signal, wait and read,
 * SMEM element stores, copy descriptors bound to names, and the scoped
 * scratch of @pl.run_scoped. Checks that need the statement's column
 * (unknown refs, semaphores, shapes, inputs) are made here; the rest is
 * the device decoder's at pallas_call.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "stmt_lower.h"

int stmt_stale_local(struct stmt_ctx *c, const struct tpurt_kernel_local *l,
		     int col)
{
	return stmt_fail(c, col, "'%s' reads '%s', which statement %d changed after '%s' was bound; bind it again to read the new value",
			 l->name, l->stale_ref, l->stale, l->name);
}

/* Whether index-map text @text names @ref as a whole word. */
static int names_word(const char *text, const char *ref)
{
	size_t n = strlen(ref);

	for (const char *p = strstr(text, ref); p; p = strstr(p + 1, ref))
		if ((p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')) &&
		    !(isalnum((unsigned char)p[n]) || p[n] == '_'))
			return 1;
	return 0;
}

static void stale_locals(struct stmt_ctx *c, const char *ref);

/* The same for the ref a ref text ("sem.at[1]", "buf") names. */
static int stale_base(struct stmt_ctx *c, const char *text)
{
	char name[TPURT_NAME_MAX];

	snprintf(name, sizeof(name), "%.*s", (int)strcspn(text, ".["), text);
	stale_locals(c, name);
	return 0;
}

/* The statement changes SMEM ref or semaphore @ref: scalar locals that
 * read it hold what it was. */
static void stale_locals(struct stmt_ctx *c, const char *ref)
{
	for (int i = 0; i < c->k->nlocals; i++) {
		struct tpurt_kernel_local *l = &c->k->local[i];

		if (l->kind == TPURT_LOCAL_SCALAR && !l->stale && names_word(l->text, ref)) {
			l->stale = c->k->nstmts + 1;
			snprintf(l->stale_ref, sizeof(l->stale_ref), "%s", ref);
		}
	}
}

/* --- the memory model: windows, copies, semaphores, SMEM stores --- */

/* A ref or a window of one, as the builder's ref text names it. */
struct window {
	char text[TPURT_TEXT_MAX];
	struct ref_info r;
	int known;			/* its shape is known (@fit) */
	struct tpurt_window_fit fit;
	int col;
};

static int append_text(struct stmt_ctx *c, char *buf, size_t len, int col,
		       const char *fmt, const char *a, const char *b)
{
	size_t at = strlen(buf);
	int n = snprintf(buf + at, len - at, fmt, a, b);

	if (n < 0 || (size_t)n >= len - at)
		return stmt_fail(c, col, "window longer than %zu characters", len - 1);
	return 0;
}

int stmt_is_call_of(const struct stmt_node *n, enum stmt_fn_kind kind)
{
	return n && n->kind == SN_CALL && n->base->kind == SN_NAME &&
	       tpurt_stmt_function(n->base->name, n->base->len).kind == kind;
}

/*
 * One index of a window as ref text: an expression, ds(start, size[,
 * stride]), a:b[:s] (constants; a:b:s of a dimension of @extent, or
 * ::s, as ds).
 */
static int window_item(struct stmt_ctx *c, const struct stmt_node *n,
		       int64_t extent, char *buf, size_t len)
{
	static const char *const kws[] = { "stride", NULL };
	char t[TPURT_TEXT_MAX], u[TPURT_TEXT_MAX];
	struct value v;
	int64_t lo = 0, hi = extent, step = 1;

	if (n->kind == SN_SLICE) {
		if (n->arg[2] && stmt_const_int(c, n->arg[2], &step))
			return c->err;
		if (step < 1)
			return stmt_fail(c, n->col, "a slice's step must be a positive constant");
		if (!n->arg[0] && !n->arg[1] && step == 1)
			return append_text(c, buf, len, n->col, "%s%s", ":", "");
		if ((n->arg[0] && stmt_const_int(c, n->arg[0], &lo)) ||
		    (n->arg[1] ? stmt_const_int(c, n->arg[1], &hi) : extent <= 0))
			return c->err ? c->err :
			       stmt_fail(c, n->col, "a slice a:b of a window takes constants; use pl.ds(start, size)");
		if (step == 1) {
			snprintf(t, sizeof(t), "%lld:%lld", (long long)lo, (long long)hi);
			return append_text(c, buf, len, n->col, "%s%s", t, "");
		}
		lo = lo < 0 ? lo + extent : lo;
		hi = hi < 0 ? hi + extent : hi > extent ? extent : hi;
		if (lo < 0 || lo >= hi)
			return stmt_fail(c, n->col, "an empty slice, or one outside the ref's %lld elements",
					 (long long)extent);
		snprintf(t, sizeof(t), "ds(%lld, %lld, %lld)", (long long)lo,
			 (long long)((hi - lo + step - 1) / step), (long long)step);
		return append_text(c, buf, len, n->col, "%s%s", t, "");
	}
	if (stmt_is_call_of(n, FN_DS)) {
		const struct stmt_node *sn = n->nargs > 2 ? n->arg[2] : stmt_kwarg(n, "stride");
		int64_t size;

		if (stmt_check_kwargs(c, n, kws) || stmt_nargs_are(c, n, 2, 3, "pl.ds") ||
		    stmt_lower_node(c, n->arg[0], NULL, &v) ||
		    stmt_scalar_text(c, &v, n->arg[0]->col, t, sizeof(t), 0) ||
		    stmt_const_int(c, n->arg[1], &size) ||
		    (sn && stmt_const_int(c, sn, &step)))
			return c->err;
		if (step < 1)
			return stmt_fail(c, sn->col, "pl.ds's stride must be a positive constant");
		if (step > 1)
			snprintf(u, sizeof(u), "%lld, %lld)", (long long)size, (long long)step);
		else
			snprintf(u, sizeof(u), "%lld)", (long long)size);
		return append_text(c, buf, len, n->col, "ds(%s, %s", t, u);
	}
	if (stmt_lower_node(c, n, NULL, &v) || stmt_smem_scalar_ok(c, &v, n->col) ||
	    stmt_scalar_text(c, &v, n->col, t, sizeof(t), 0))
		return c->err;
	return append_text(c, buf, len, n->col, "%s%s", t, "");
}

/*
 * @n as a ref or a window: name, name.at[...], or, for a VMEM ref,
 * name[i, ...] (NumPy indexing of a ref: a window of its leading
 * dimensions). Its shape is fitted as pallas_call will.
 */
static int lower_window(struct stmt_ctx *c, const struct stmt_node *n,
			struct window *w)
{
	const struct stmt_node *base = n, *idx = NULL;
	struct tpurt_ref_text rt;

	memset(w, 0, sizeof(*w));
	w->col = n->col;
	if (n->kind == SN_INDEX && n->nargs) {
		idx = n;
		base = n->base;
		if (base->kind == SN_ATTR && stmt_name_is(base, "at"))
			base = base->base;
	}
	if (base->kind != SN_NAME || stmt_find_local(c, base->name, base->len) ||
	    !stmt_find_ref(c, base->name, base->len, &w->r))
		return stmt_fail(c, base->col, base->kind == SN_NAME ?
				 "unknown ref '%.*s'" : "expected a ref or ref.at[...]%.*s",
				 base->kind == SN_NAME ? base->len : 0,
				 base->kind == SN_NAME ? base->name : "");
	snprintf(w->text, sizeof(w->text), "%s", w->r.name);
	if (idx) {
		if (append_text(c, w->text, sizeof(w->text), n->col, "%s%s", ".at[", ""))
			return c->err;
		for (int i = 0, d = 0; i < idx->nargs; i++, d++) {
			while (d < w->r.rank && (w->r.hidden >> d & 1))
				d++;	/* squeezed block dimensions are not indexed */
			if ((i && append_text(c, w->text, sizeof(w->text), n->col, "%s%s",
					      ", ", "")) ||
			    window_item(c, idx->arg[i], d < w->r.rank ? w->r.extent[d] : 0,
					w->text, sizeof(w->text)))
				return c->err;
		}
		if (append_text(c, w->text, sizeof(w->text), n->col, "%s%s", "]", ""))
			return c->err;
	}
	if (!w->r.rank || w->r.kind == R_SEM)
		return 0;
	if (tpurt_ref_parse(w->text, "window", &rt) ||
	    tpurt_window_fit(&rt, "window", w->r.rank, w->r.extent, w->r.hidden,
			     c->k->nwhen > 0, &w->fit))
		return stmt_fail(c, n->col, "%s", tpurt_last_error());
	w->known = 1;
	return 0;
}

/* A window the body's ops cannot take as a 2-D ref: strided
 * (x_ref[::2]), an index in a middle dimension (y_ref[:, 1, :]), a column
 * (s[:, i]), or a slice of a middle dimension. Reads and stores of it go
 * through a copy, which takes any window. */
static int gathered(const struct window *w)
{
	return !w->fit.contiguous;
}

/* A window a body op reads or writes: a contiguous one of a VMEM ref, or
 * any other (through a copy). */
static int body_window(struct stmt_ctx *c, const struct stmt_node *n,
		       struct window *w)
{
	if (lower_window(c, n, w))
		return c->err;
	if (w->r.kind == R_SEM)
		return stmt_fail(c, n->col, "'%s' is a semaphore, not a VMEM ref", w->r.name);
	if (w->r.kind == R_ANY)
		return stmt_fail(c, n->col, "'%s' is in HBM (pl.ANY): copy it into VMEM with pltpu.make_async_copy or sync_copy",
				 w->r.name);
	if (w->r.kind == R_SMEM || w->r.kind == R_PREFETCH)
		return stmt_fail(c, n->col, "'%s' is in SMEM: read one element, %s[index]",
				 w->r.name, w->r.name);
	if (!w->r.has_dtype)
		return stmt_fail(c, n->col, "the dtype of '%s' is not declared: tpurt_grid_spec_set_dtype()",
				 w->r.name);
	return 0;
}

/*
 * A window the body cannot take (x_ref[::2], y_ref[:, 1, :], s[:, i]) and
 * a temporary of its shape: the DMA engine gathers the window into the
 * temporary for a read, and scatters the temporary into the window after
 * a store, as the body's ops take contiguous refs. @t's ref is the temporary as the
 * copy names it (one dimension: its row).
 */
static int strided_temp(struct stmt_ctx *c, const struct window *w,
			struct value *t, char *ref, size_t len)
{
	if (w->fit.ndims > 2) {
		/* of the window's own shape, so that the copy's shapes agree */
		if (stmt_new_tile_shaped(c, w->r.dtype, w->fit.ndims, w->fit.shape,
					 w->col, t))
			return c->err;
		snprintf(ref, len, "%s", t->ref);
		return 0;
	}
	if (stmt_new_tile(c, w->r.dtype, w->fit.rows, w->fit.cols, w->col, t))
		return c->err;
	snprintf(ref, len, w->fit.ndims == 2 ? "%s" : "%s.at[0]", t->ref);
	return 0;
}

/* A read of a window: buf.at[slot][...] or buf[slot]. */
int stmt_lower_window_read(struct stmt_ctx *c, const struct stmt_node *n,
			   struct value *v)
{
	char ref[TPURT_TEXT_MAX];
	struct window w;

	if (body_window(c, n, &w))
		return c->err;
	if (!gathered(&w)) {
		stmt_tile_of(v, w.text, w.fit.rows, w.fit.cols, w.r.dtype);
	} else if (strided_temp(c, &w, v, ref, sizeof(ref)) ||
		   stmt_emitted(c, tpurt_kernel_sync_copy(c->k, w.text, ref), n->col)) {
		return c->err;
	}
	if (w.fit.ndims > 2)	/* x_ref[:, :, :] of a 3-D ref is 3-D */
		stmt_set_shape(v, w.fit.ndims, w.fit.shape);
	return 0;
}

/* "sem" or "sem.at[i]": a semaphore and its element, as ref text. */
static int lower_semaphore(struct stmt_ctx *c, const struct stmt_node *n,
			   char *text, size_t len)
{
	struct window w;

	if (lower_window(c, n, &w))
		return c->err;
	if (w.r.kind != R_SEM)
		return stmt_fail(c, n->col, "'%s' is not a semaphore (scratch of pltpu.SemaphoreType.DMA or REGULAR)",
				 w.r.name);
	if ((n->kind == SN_INDEX && n->nargs != w.r.rank) ||
	    (n->kind != SN_INDEX && w.r.rank > 1))
		return stmt_fail(c, n->col, "semaphore '%s': name one element, %s.at[%s]",
				 w.r.name, w.r.name, w.r.rank == 1 ? "i" :
				 w.r.rank == 2 ? "i, j" : "i, j, ...");
	snprintf(text, len, "%s", w.text);
	return 0;
}

static void shape_text(const struct window *w, char *buf, size_t len)
{
	size_t at = (size_t)snprintf(buf, len, "(");

	for (int i = 0; i < w->fit.ndims && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? ", " : "",
				       (long long)w->fit.shape[i]);
	if (at < len)
		snprintf(buf + at, len - at, "%s)", w->fit.ndims == 1 ? "," : "");
}

/* make_async_copy(src, dst, sem): the three as ref text, checked. */
static int lower_copy_args(struct stmt_ctx *c, const struct stmt_node *call,
			   int with_sem, struct tpurt_kernel_local *out)
{
	struct window src, dst;
	char ss[64], ds[64];

	if (stmt_check_kwargs(c, call, NULL) ||
	    stmt_nargs_are(c, call, 2 + with_sem, 2 + with_sem,
			   with_sem ? "make_async_copy" : "sync_copy") ||
	    lower_window(c, call->arg[0], &src) || lower_window(c, call->arg[1], &dst))
		return c->err;
	if (src.r.kind == R_SEM || dst.r.kind == R_SEM)
		return stmt_fail(c, (src.r.kind == R_SEM ? &src : &dst)->col,
				 "'%s' is a semaphore, not a ref to copy",
				 (src.r.kind == R_SEM ? &src : &dst)->r.name);
	if (dst.r.role == TPU_ROLE_INPUT)
		return stmt_fail(c, dst.col, "'%s' is an input: a copy cannot write into it",
				 dst.r.name);
	if (src.r.has_dtype && dst.r.has_dtype && src.r.dtype != dst.r.dtype)
		return stmt_fail(c, call->col, "copy of %s into %s: the dtypes differ",
				 stmt_dtype_str(src.r.dtype), stmt_dtype_str(dst.r.dtype));
	shape_text(&src, ss, sizeof(ss));
	shape_text(&dst, ds, sizeof(ds));
	if (src.known && dst.known && strcmp(ss, ds))
		return stmt_fail(c, call->col, "copy of %s %s into %s %s: the shapes differ",
				 src.text, ss, dst.text, ds);
	memset(out, 0, sizeof(*out));
	snprintf(out->ref, sizeof(out->ref), "%s", src.text);
	snprintf(out->dst, sizeof(out->dst), "%s", dst.text);
	return with_sem ? lower_semaphore(c, call->arg[2], out->sem, sizeof(out->sem)) : 0;
}

/* cp.start(), cp.wait(), make_async_copy(...).start() */
static int lower_copy_method(struct stmt_ctx *c, const struct stmt_node *call)
{
	const struct stmt_node *f = call->base, *obj = f->base;
	const struct tpurt_kernel_local *l;
	struct tpurt_kernel_local cp;
	int start = stmt_name_is(f, "start");

	if (!start && !stmt_name_is(f, "wait"))
		return stmt_fail(c, f->col, "a copy descriptor has .start() and .wait(), not .%.*s()",
				 f->len, f->name);
	if (stmt_check_kwargs(c, call, NULL) || stmt_nargs_are(c, call, 0, 0, f->len == 5 ? "start" : "wait"))
		return c->err;
	if (obj->kind == SN_NAME && (l = stmt_find_local(c, obj->name, obj->len)) &&
	    l->kind == TPURT_LOCAL_COPY)
		cp = *l;
	else if (!stmt_is_call_of(obj, FN_ASYNC_COPY))
		return stmt_fail(c, obj->col, "expected pltpu.make_async_copy(src, dst, sem) or a name bound to one");
	else if (lower_copy_args(c, obj, 1, &cp))
		return c->err;
	if (stmt_emitted(c, (start ? tpurt_kernel_copy_start : tpurt_kernel_copy_wait)
			 (c->k, cp.ref, cp.dst, cp.sem), call->col))
		return c->err;
	return stale_base(c, cp.sem) || stale_base(c, cp.dst);
}

/* semaphore_signal(sem, inc=1), semaphore_wait(sem, value=1) */
static int lower_semaphore_op(struct stmt_ctx *c, const struct stmt_node *call,
			      int signal)
{
	static const char *const kws[] = { "inc", "value", NULL };
	const struct stmt_node *amount = call->nargs > 1 ? call->arg[1] :
					 stmt_kwarg(call, signal ? "inc" : "value");
	char sem[TPURT_TEXT_MAX], text[TPURT_TEXT_MAX] = "1";
	struct value v;

	if (stmt_check_kwargs(c, call, kws) ||
	    stmt_nargs_are(c, call, 1, 2, signal ? "semaphore_signal" : "semaphore_wait") ||
	    lower_semaphore(c, call->arg[0], sem, sizeof(sem)))
		return c->err;
	if (amount && (stmt_lower_node(c, amount, NULL, &v) || stmt_smem_scalar_ok(c, &v, amount->col) ||
		       stmt_scalar_text(c, &v, amount->col, text, sizeof(text), 0)))
		return c->err;
	if (stmt_emitted(c, (signal ? tpurt_kernel_semaphore_signal :
			     tpurt_kernel_semaphore_wait)(c->k, sem, text), call->col))
		return c->err;
	return stale_base(c, sem);
}

/* pltpu.delay(nanos): a constant stall the timing model charges. */
static int lower_delay(struct stmt_ctx *c, const struct stmt_node *call)
{
	struct value v;

	if (stmt_check_kwargs(c, call, NULL) || stmt_nargs_are(c, call, 1, 1, "delay") ||
	    stmt_lower_node(c, call->arg[0], NULL, &v))
		return c->err;
	if (v.kind != V_IMM || v.imm != (double)(int64_t)v.imm)
		return stmt_fail(c, call->arg[0]->col, "delay takes a constant number of nanoseconds");
	return stmt_emitted(c, tpurt_kernel_delay(c->k, (int64_t)v.imm), call->col);
}

/* A statement that is a call: copies and semaphores. */
int stmt_lower_call_stmt(struct stmt_ctx *c, const struct stmt_node *call)
{
	struct tpurt_kernel_local cp;

	if (call->base->kind == SN_ATTR)
		return lower_copy_method(c, call);
	if (stmt_is_call_of(call, FN_SYNC_COPY))
		return lower_copy_args(c, call, 0, &cp) ? c->err :
		       stmt_emitted(c, tpurt_kernel_sync_copy(c->k, cp.ref, cp.dst),
				    call->col) ? c->err : stale_base(c, cp.dst);
	if (stmt_is_call_of(call, FN_SEM_SIGNAL) || stmt_is_call_of(call, FN_SEM_WAIT))
		return lower_semaphore_op(c, call, stmt_is_call_of(call, FN_SEM_SIGNAL));
	if (stmt_is_call_of(call, FN_PRNG_SEED))
		return stmt_lower_prng_seed(c, call);
	if (stmt_is_call_of(call, FN_DEBUG_PRINT))
		return stmt_lower_debug_print(c, call);
	if (stmt_is_call_of(call, FN_DELAY))
		return lower_delay(c, call);
	return stmt_fail(c, call->col, "a statement is an assignment, a copy's .start() or .wait(), sync_copy, a semaphore signal or wait, pltpu.prng_seed, pl.debug_print or pltpu.delay");
}

/* pltpu.semaphore_read(sem.at[i]): a scalar-core value. */
int stmt_lower_semaphore_read(struct stmt_ctx *c, const struct stmt_node *call,
			      struct value *v)
{
	char sem[TPURT_TEXT_MAX];

	if (stmt_check_kwargs(c, call, NULL) || stmt_nargs_are(c, call, 1, 1, "semaphore_read") ||
	    lower_semaphore(c, call->arg[0], sem, sizeof(sem)))
		return c->err;
	stmt_scalar_of(v, "", 0);
	if (snprintf(v->text, sizeof(v->text), "semaphore_read(%s)", sem) >=
	    (int)sizeof(v->text))
		return stmt_fail(c, call->col, "scalar expression too long");
	return 0;
}

/*
 * s[i] = value where the scalar core cannot store it (a float, a vector
 * result such as jnp.sum(x), an 8-bit SMEM ref): the value as a (1, 1)
 * VMEM tile of s's dtype, copied into the element by the DMA engine.
 */
static int store_smem_by_copy(struct stmt_ctx *c, const struct stmt *st,
			      const struct stmt_node *n, const struct ref_info *r,
			      const struct value *idx, struct value *v)
{
	char src[TPURT_TEXT_MAX], dst[2 * TPURT_TEXT_MAX + 64];
	int col = st->value->col;
	struct value t;

	if (r->kind != R_SMEM || r->rank > 2)
		return stmt_fail(c, col, "'%s': only an SMEM scratch or block of rank 1 or 2 takes this value (a float or a vector result)",
				 r->name);
	if (v->kind != V_TILE && stmt_scalar_tile(c, v, col))
		return c->err;
	if (v->rows != 1 || v->cols != 1)
		return stmt_fail(c, col, "an SMEM element takes one value, not a (%lld, %lld) array",
				 (long long)v->rows, (long long)v->cols);
	if (v->dtype != r->dtype || strchr(v->ref, '.')) {
		/* into a temporary of the element's dtype (a cast, as a store does) */
		if (stmt_new_tile(c, r->dtype, 1, 1, col, &t) ||
		    stmt_emitted(c, tpurt_kernel_store(c->k, t.ref, v->ref), col))
			return c->err;
		*v = t;
	}
	if (r->rank2)
		snprintf(dst, sizeof(dst), "%s.at[pl.ds((%s) // %lld, 1), pl.ds((%s) %% %lld, 1)]",
			 r->name, idx->text, (long long)r->cols, idx->text, (long long)r->cols);
	else
		snprintf(dst, sizeof(dst), "%s.at[pl.ds(%s, 1)]", r->name, idx->text);
	snprintf(src, sizeof(src), r->rank2 ? "%s" : "%s.at[0]", v->ref);
	if (stmt_emitted(c, tpurt_kernel_sync_copy(c->k, src, dst), n->col))
		return c->err;
	stale_locals(c, r->name);
	return 0;
}

/* s[i] = value: one element of an SMEM ref. */
static int store_smem_element(struct stmt_ctx *c, const struct stmt *st,
			      const struct stmt_node *n, const struct ref_info *r)
{
	char dst[TPURT_TEXT_MAX + 8], text[TPURT_TEXT_MAX];
	struct value idx, v, cur;

	if (r->role == TPU_ROLE_INPUT)
		return stmt_fail(c, n->col, "'%s' is an input: its block is read-only",
				 r->name);
	if (stmt_lower_smem_read(c, n, r, &idx))
		return c->err;
	cur = idx;
	if (st->aug) {
		struct value rhs;

		if (stmt_lower_node(c, st->value, NULL, &rhs) ||
		    stmt_lower_binary(c, stmt_aug_fn(st->aug), 0, &cur, &rhs, NULL,
				      st->value->col, &v))
			return c->err;
	} else if (stmt_lower_node(c, st->value, NULL, &v)) {
		return c->err;
	}
	if (v.kind == V_TILE || (v.kind == V_SMEM && !stmt_smem_int(v.dtype)) ||
	    !stmt_smem_int(r->dtype))
		return store_smem_by_copy(c, st, n, r, &idx, &v);
	if (!stmt_is_scalar(&v))
		return stmt_fail(c, st->value->col, "an SMEM element takes a scalar (an integer the scalar core computes)");
	if (v.kind == V_IMM && v.imm != floor(v.imm) && !isnan(v.imm))
		v.imm = trunc(v.imm);	/* 2.5 into int8 SMEM: 2, as astype */
	/*
	 * A scalar of another dtype is cast as jnp's astype (int32 300 into
	 * int8 is 44, float scalars saturate, bool is != 0); the store then
	 * keeps the cast value's bits.
	 */
	if (v.kind != V_IMM && v.dtype != r->dtype && r->dtype != TPURT_INT32 &&
	    stmt_scalar_cast(c, &v, r->dtype, st->value->col, &v))
		return c->err;
	if (stmt_smem_scalar_ok(c, &v, st->value->col) ||
	    stmt_scalar_text(c, &v, st->value->col, text, sizeof(text), 0))
		return c->err;
	snprintf(dst, sizeof(dst), "%s[%s]", r->name, idx.text);
	if (stmt_emitted(c, tpurt_kernel_scalar_store(c->k, dst, text), n->col))
		return c->err;
	stale_locals(c, r->name);
	return 0;
}

/* x_ref[::2] = value, y_ref[:, 1, :] = value: the value into a
 * temporary, scattered by a copy (x_ref[::2] += value gathers the window
 * first). */
static int store_strided(struct stmt_ctx *c, const struct stmt *st,
			 const struct window *w)
{
	char ref[TPURT_TEXT_MAX];
	struct value t;
	struct dest d;

	if (strided_temp(c, w, &t, ref, sizeof(ref)) ||
	    (st->aug && stmt_emitted(c, tpurt_kernel_sync_copy(c->k, w->text, ref),
				     st->target_node->col)))
		return c->err;
	d = (struct dest){ t.ref, t.rows, t.cols, t.dtype };
	if (w->fit.ndims > 2)	/* its own shape, which x op= value broadcasts to */
		stmt_set_shape(&t, w->fit.ndims, w->fit.shape);
	if (stmt_assign(c, st, &d, &t) ||
	    stmt_emitted(c, tpurt_kernel_sync_copy(c->k, ref, w->text), st->target_node->col))
		return c->err;
	c->k->temp[t.temp].busy = 0;	/* the copy was its last use */
	return 0;
}

/* A target other than name or name[...]: a window or an SMEM element. */
int stmt_store_to_node(struct stmt_ctx *c, const struct stmt *st)
{
	const struct stmt_node *n = st->target_node, *win = n;
	struct ref_info r;
	struct window w;
	struct value cur;
	struct dest d;

	if (n->kind == SN_INDEX && n->base->kind == SN_NAME &&
	    stmt_find_ref(c, n->base->name, n->base->len, &r) &&
	    (r.kind == R_SMEM || r.kind == R_PREFETCH) && n->nargs)
		return store_smem_element(c, st, n, &r);
	if (n->kind == SN_INDEX && !n->nargs)
		win = n->base;		/* buf.at[i][...] */
	if (win->kind != SN_INDEX || !win->nargs)
		return stmt_fail(c, n->col, "expected a ref[...], a window buf.at[i][...] or an SMEM element s[i] to assign");
	if (body_window(c, win, &w))
		return c->err;
	if (w.r.role == TPU_ROLE_INPUT)
		return stmt_fail(c, n->col, "'%s' is an input: its block is read-only",
				 w.r.name);
	if (gathered(&w))
		return store_strided(c, st, &w);
	stmt_tile_of(&cur, w.text, w.fit.rows, w.fit.cols, w.r.dtype);
	if (w.fit.ndims > 2)
		stmt_set_shape(&cur, w.fit.ndims, w.fit.shape);
	d = (struct dest){ cur.ref, cur.rows, cur.cols, cur.dtype };
	return stmt_assign(c, st, &d, &cur);
}

/* cp = pltpu.make_async_copy(src, dst, sem): a descriptor, no ops. */
int stmt_bind_copy(struct stmt_ctx *c, const struct stmt *st)
{
	struct tpurt_kernel_local cp, *l;

	if (st->aug)
		return stmt_fail(c, st->tcol, "a copy descriptor is bound with '='");
	if (lower_copy_args(c, st->value, 1, &cp))
		return c->err;
	l = stmt_new_local(c, st);
	if (!l)
		return c->err;
	if (l->kind == TPURT_LOCAL_TEMP && l->temp >= 0)
		c->k->temp[l->temp].bound = 0;
	memcpy(cp.name, l->name, sizeof(cp.name));
	cp.kind = TPURT_LOCAL_COPY;
	cp.temp = -1;
	*l = cp;
	return 0;
}

/* A type of run_scoped: SemaphoreType.DMA[((n,))], VMEM(shape, dtype). */
static int scoped_type(struct stmt_ctx *c, const struct stmt_node *n,
		       enum tpurt_memory_space *space, enum tpurt_dtype *dtype,
		       int *rank, int64_t *shape)
{
	const struct stmt_node *t = n->kind == SN_CALL ? n->base : n, *s = NULL;
	struct value dt;

	*rank = 1;
	shape[0] = 1;
	*dtype = TPURT_INT32;
	if (t->kind == SN_ATTR && t->base->kind == SN_NAME &&
	    t->base->len == 13 && !strncmp(t->base->name, "SemaphoreType", 13) &&
	    (stmt_name_is(t, "DMA") || stmt_name_is(t, "REGULAR"))) {
		*space = stmt_name_is(t, "DMA") ? TPURT_SEMAPHORE_DMA : TPURT_SEMAPHORE_REGULAR;
		if (n->kind == SN_CALL && (stmt_nargs_are(c, n, 1, 1, "SemaphoreType") ||
					   stmt_check_kwargs(c, n, NULL)))
			return c->err;
		s = n->kind == SN_CALL ? n->arg[0] : NULL;
	} else if (n->kind == SN_CALL && t->kind == SN_NAME &&
		   (stmt_name_is(t, "VMEM") || stmt_name_is(t, "SMEM"))) {
		*space = stmt_name_is(t, "VMEM") ? TPURT_VMEM : TPURT_SMEM;
		if (stmt_nargs_are(c, n, 2, 2, stmt_name_is(t, "VMEM") ? "VMEM" : "SMEM") ||
		    stmt_check_kwargs(c, n, NULL) || stmt_lower_node(c, n->arg[1], NULL, &dt))
			return c->err;
		if (dt.kind != V_DTYPE)
			return stmt_fail(c, n->arg[1]->col, "expected a dtype");
		*dtype = dt.dtype;
		s = n->arg[0];
	} else {
		return stmt_fail(c, n->col, "expected pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.REGULAR, pltpu.VMEM(shape, dtype) or pltpu.SMEM(shape, dtype)");
	}
	if (!s)
		return 0;
	if (s->kind != SN_TUPLE)
		return stmt_fail(c, s->col, "expected a shape tuple, (n,) or (rows, cols)");
	*rank = s->nargs;
	for (int i = 0; i < s->nargs; i++)
		if (stmt_const_int(c, s->arg[i], &shape[i]))
			return c->err;
	return 0;
}

int stmt_lower_run_scoped(struct stmt_ctx *c, const struct stmt_node *call,
			  int *nscopes, char *names, size_t len)
{
	size_t at = 0;

	*nscopes = 0;
	names[0] = 0;
	if (!stmt_is_call_of(call, FN_RUN_SCOPED) || call->nargs || !call->nkw)
		return stmt_fail(c, call->col, "expected @pl.run_scoped(name=type, ...)");
	for (int i = 0; i < call->nkw; i++) {
		enum tpurt_memory_space space = TPURT_VMEM;
		enum tpurt_dtype dtype;
		int64_t shape[TPURT_MAX_RANK];
		char name[TPURT_NAME_MAX];
		int rank;

		if (scoped_type(c, call->kwval[i], &space, &dtype, &rank, shape))
			return c->err;
		snprintf(name, sizeof(name), "%.*s", call->kwlen[i], call->kw[i]);
		if (stmt_emitted(c, tpurt_kernel_run_scoped(c->k, name, space, dtype, rank,
							    shape), call->kwval[i]->col))
			return c->err;
		++*nscopes;
		at += (size_t)snprintf(names + at, at < len ? len - at : 0, "%s%s",
				       i ? ", " : "", name);
	}
	return 0;
}
