// SPDX-License-Identifier: MIT
/*
 * Kernel statements, lowered: each node of a statement's tree becomes a
 * value (a 2-D tile in a ref or temporary, an immediate, a scalar the
 * scalar core computes, or an SMEM element) and, for tiles, the device ops
 * that compute it. Shapes broadcast as NumPy's do, through the ops' ROW,
 * COL, IMM, SCALAR and SMEM modes; dtypes promote as jnp's do where the
 * device can follow. The last op of an expression writes straight into
 * the statement's target when its shape and dtype are the target's;
 * intermediates live in temporaries that later intermediates reuse.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stmt_lower.h"

static int lower_ref_ok(struct stmt_ctx *c, const struct stmt_node *n,
			struct value *v);
static int lower_transpose_call(struct stmt_ctx *c, const struct stmt_node *call,
				int kind, const struct dest *d, struct value *v);
static int lower_roll(struct stmt_ctx *c, const struct stmt_node *call,
		      const struct dest *d, struct value *v);
static int lower_take_along_axis(struct stmt_ctx *c, const struct stmt_node *call,
				 const struct dest *d, struct value *v);
static int lower_concatenate(struct stmt_ctx *c, const struct stmt_node *call,
			     struct value *v);
static int lower_prng_bits(struct stmt_ctx *c, const struct stmt_node *call,
			   const struct dest *d, struct value *v);
static int lower_reshape(struct stmt_ctx *c, const struct stmt_node *call,
			 struct value *v);
static int lower_bitcast(struct stmt_ctx *c, const struct stmt_node *call,
			 const struct dest *d, struct value *v);

static const char *shape_str(const struct value *v, char *buf)
{
	snprintf(buf, 48, "(%lld, %lld)", (long long)v->rows, (long long)v->cols);
	return buf;
}

const char *stmt_dtype_str(enum tpurt_dtype t)
{
	return tpurt_stmt_dtype_name(t);
}

int stmt_name_is(const struct stmt_node *n, const char *s)
{
	return n->len == (int)strlen(s) && !strncmp(n->name, s, (size_t)n->len);
}

/* --- names: the grid spec's refs and the kernel's locals --- */

/* The 2-D view of a block: the last dim the columns, the rest the rows. */
static void block_view(const struct tpurt_operand_spec *o, struct ref_info *r)
{
	const struct tpurt_block_spec *b = &o->spec;

	r->rows = 1;
	for (int d = 0; d + 1 < b->rank; d++)
		r->rows *= b->shape[d] == TPURT_SQUEEZED ? 1 : b->shape[d];
	r->cols = b->shape[b->rank - 1] == TPURT_SQUEEZED ? 1 : b->shape[b->rank - 1];
}

static void operand_info(const struct tpurt_operand_spec *o, struct ref_info *r)
{
	const struct tpurt_block_spec *b = &o->spec;

	r->name = o->name;
	r->role = o->role;
	if (o->role == TPU_ROLE_SCALAR_PREFETCH) {
		r->kind = R_PREFETCH;
		r->has_dtype = 1;
		r->dtype = o->has_dtype ? o->dtype : TPURT_INT32;
		r->rank2 = o->prefetch_rank == 2;
		r->rows = r->rank2 ? o->prefetch_shape[0] : 1;
		r->cols = r->rank2 ? o->prefetch_shape[1] : 0;
		r->rank = o->prefetch_rank;	/* 0: not declared */
		memcpy(r->extent, o->prefetch_shape, sizeof(o->prefetch_shape));
		return;
	}
	r->kind = b->memory_space == TPURT_ANY ? R_ANY :
		  b->memory_space == TPURT_SMEM ? R_SMEM :
		  o->role == TPU_ROLE_INPUT ? R_INPUT : R_OUTPUT;
	r->has_dtype = o->has_dtype;
	r->dtype = o->dtype;
	r->rank = b->rank;
	for (int d = 0; d < b->rank; d++) {
		r->extent[d] = b->shape[d] == TPURT_SQUEEZED ? 1 : b->shape[d];
		if (b->shape[d] == TPURT_SQUEEZED)
			r->hidden |= 1u << d;
	}
	if (r->kind == R_ANY)
		return;
	block_view(o, r);
	if (r->kind == R_SMEM)
		r->rank2 = b->rank == 2 && !r->hidden;
}

static void scratch_view(const char *name, enum tpurt_memory_space space,
			 enum tpurt_dtype dtype, int rank, const int64_t *shape,
			 struct ref_info *r)
{
	r->name = name;
	r->role = -1;
	r->kind = space == TPURT_SMEM ? R_SMEM : space == TPURT_VMEM ? R_VMEM : R_SEM;
	r->has_dtype = 1;
	r->dtype = dtype;
	r->cols = shape[rank - 1];
	r->rows = 1;
	for (int d = 0; d + 1 < rank; d++)
		r->rows *= shape[d];
	r->rank2 = rank == 2;
	r->rank = rank;
	memcpy(r->extent, shape, (size_t)rank * sizeof(*shape));
}

static void scratch_info(const struct tpurt_scratch_spec *s, struct ref_info *r)
{
	scratch_view(s->name, s->space, s->dtype, s->rank, s->shape, r);
}

int stmt_find_ref(const struct stmt_ctx *c, const char *name, int len,
		  struct ref_info *r)
{
	const struct tpurt_grid_spec *gs = c->gs;
	const struct tpurt_kernel *k = c->k;

	memset(r, 0, sizeof(*r));
	for (int i = k->nopen - 1; i >= 0; i--) {
		const struct tpurt_kernel_scope *s = &k->scope[k->open[i]];

		if ((int)strlen(s->name) == len && !strncmp(s->name, name, (size_t)len)) {
			scratch_view(s->name, s->space, s->dtype, s->rank, s->shape, r);
			return 1;
		}
	}
	for (int i = 0; i < gs->num_operands; i++)
		if ((int)strlen(gs->operand[i].name) == len &&
		    !strncmp(gs->operand[i].name, name, (size_t)len)) {
			operand_info(&gs->operand[i], r);
			return 1;
		}
	for (int i = 0; i < gs->num_scratch; i++)
		if ((int)strlen(gs->scratch[i].name) == len &&
		    !strncmp(gs->scratch[i].name, name, (size_t)len)) {
			scratch_info(&gs->scratch[i], r);
			return 1;
		}
	return 0;
}

struct tpurt_kernel_local *stmt_find_local(struct stmt_ctx *c,
					   const char *name, int len)
{
	for (int i = 0; i < c->k->nlocals; i++)
		if ((int)strlen(c->k->local[i].name) == len &&
		    !strncmp(c->k->local[i].name, name, (size_t)len))
			return &c->k->local[i];
	return NULL;
}

/* --- values --- */

void stmt_tile_of(struct value *v, const char *ref, int64_t rows,
		  int64_t cols, enum tpurt_dtype dtype)
{
	memset(v, 0, sizeof(*v));
	v->kind = V_TILE;
	v->temp = -1;
	snprintf(v->ref, sizeof(v->ref), "%s", ref);
	v->rows = rows;
	v->cols = cols;
	v->dtype = dtype;
}

/* A whole read of @r: of its N-D shape (squeezed block dimensions
 * dropped) when that has more than two dimensions. */
static void nd_of_ref(struct value *v, const struct ref_info *r)
{
	int n = 0;

	for (int d = 0; d < r->rank; d++)
		if (!(r->hidden >> d & 1))
			v->shape[n++] = r->extent[d];
	v->nd = n > 2 ? n : 0;
}

static void imm_of(struct value *v, double x, int is_int)
{
	memset(v, 0, sizeof(*v));
	v->kind = V_IMM;
	v->temp = -1;
	v->imm = x;
	v->weak = 1;
	v->dtype = is_int ? TPURT_INT32 : TPURT_F32;
}

/* A scalar-core value: @text in the index-map syntax. */
void stmt_scalar_of(struct value *v, const char *text, int compound)
{
	memset(v, 0, sizeof(*v));
	v->kind = V_SCALAR;
	v->temp = -1;
	v->weak = 1;
	v->dtype = TPURT_INT32;
	v->compound = compound;
	snprintf(v->text, sizeof(v->text), "%s", text);
}

static int is_tile(const struct value *v)
{
	return v->kind == V_TILE;
}

int stmt_is_scalar(const struct value *v)
{
	return v->kind == V_IMM || v->kind == V_SCALAR || v->kind == V_SMEM;
}

static int is_float(enum tpurt_dtype t)
{
	return t == TPURT_F32 || t == TPURT_BF16;
}

static void release(struct stmt_ctx *c, const struct value *v)
{
	if (v->temp >= 0 && !c->k->temp[v->temp].bound)
		c->k->temp[v->temp].busy = 0;
}

void stmt_release(struct stmt_ctx *c, const struct value *v)
{
	release(c, v);
}

/* A free temporary of this type, or a new one named "%N". */
static int temp_alloc(struct stmt_ctx *c, enum tpurt_dtype dtype, int64_t rows,
		      int64_t cols, int col, struct value *v)
{
	struct tpurt_kernel *k = c->k;
	struct tpurt_kernel_temp *t;

	for (int i = 0; i < k->ntemps; i++) {
		t = &k->temp[i];
		if (!t->bound && !t->busy && t->dtype == dtype && t->rows == rows &&
		    t->cols == cols && !t->rank) {
			t->busy = 1;
			stmt_tile_of(v, t->name, rows, cols, dtype);
			v->temp = i;
			return 0;
		}
	}
	if (k->ntemps == TPURT_KERNEL_MAX_TEMPS)
		return stmt_fail(c, col, "needs more than %d temporaries",
				 TPURT_KERNEL_MAX_TEMPS);
	t = &k->temp[k->ntemps];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%%%d", k->ntemps);
	t->dtype = dtype;
	t->rows = rows;
	t->cols = cols;
	t->busy = 1;
	stmt_tile_of(v, t->name, rows, cols, dtype);
	v->temp = k->ntemps++;
	return 0;
}

/* Where an op producing @dtype rows x cols writes: the target if it fits. */
int stmt_new_tile(struct stmt_ctx *c, enum tpurt_dtype dtype, int64_t rows,
		  int64_t cols, int col, struct value *v)
{
	return temp_alloc(c, dtype, rows, cols, col, v);
}

int stmt_new_tile_shaped(struct stmt_ctx *c, enum tpurt_dtype dtype, int rank,
			 const int64_t *shape, int col, struct value *v)
{
	struct tpurt_kernel *k = c->k;
	int64_t rows = 1;
	int n = k->ntemps;

	for (int d = 0; d + 1 < rank; d++)
		rows *= shape[d];
	for (int i = 0; i < k->ntemps; i++) {
		struct tpurt_kernel_temp *t = &k->temp[i];

		if (!t->bound && !t->busy && t->dtype == dtype && t->rank == rank &&
		    !memcmp(t->shape, shape, (size_t)rank * sizeof(*shape))) {
			t->busy = 1;
			stmt_tile_of(v, t->name, rows, shape[rank - 1], dtype);
			v->temp = i;
			return 0;
		}
	}
	/* a new one: not one of the 2-D ones temp_alloc would reuse */
	if (k->ntemps == TPURT_KERNEL_MAX_TEMPS)
		return stmt_fail(c, col, "needs more than %d temporaries",
				 TPURT_KERNEL_MAX_TEMPS);
	k->temp[n] = (struct tpurt_kernel_temp){ .dtype = dtype, .rows = rows,
		.cols = shape[rank - 1], .rank = rank, .busy = 1 };
	snprintf(k->temp[n].name, sizeof(k->temp[n].name), "%%%d", n);
	memcpy(k->temp[n].shape, shape, (size_t)rank * sizeof(*shape));
	stmt_tile_of(v, k->temp[n].name, rows, shape[rank - 1], dtype);
	v->temp = k->ntemps++;
	return 0;
}

static int result(struct stmt_ctx *c, const struct dest *d, enum tpurt_dtype dtype,
		  int64_t rows, int64_t cols, int col, struct value *v)
{
	if (d && d->dtype == dtype && d->rows == rows && d->cols == cols) {
		stmt_tile_of(v, d->name, rows, cols, dtype);
		return 0;
	}
	return temp_alloc(c, dtype, rows, cols, col, v);
}

/* A builder call's failure, at the column of the term it lowers. */
int stmt_emitted(struct stmt_ctx *c, int ret, int col)
{
	return ret ? stmt_fail(c, col, "%s", tpurt_last_error()) : 0;
}

/* --- dtypes, as jnp promotes them --- */

static enum tpurt_dtype promote_strong(enum tpurt_dtype a, enum tpurt_dtype b)
{
	if (a == b)
		return a;
	if (a == TPURT_BOOL)
		return b;
	if (b == TPURT_BOOL)
		return a;
	if (is_float(a) && is_float(b))
		return TPURT_F32;
	if (is_float(a) || is_float(b))
		return is_float(a) ? a : b;
	if ((a == TPURT_UINT32 && b == TPURT_UINT8) ||
	    (a == TPURT_UINT8 && b == TPURT_UINT32))
		return TPURT_UINT32;
	/* int8 with uint8 or int32 (jnp: int16 or int32); uint32 with a signed
	 * type (jnp: int64, int32 without x64) */
	return TPURT_INT32;
}

/* A Python scalar keeps the array's dtype unless it is a float and the
 * array is not. */
static enum tpurt_dtype promote(const struct value *a, const struct value *b)
{
	const struct value *weak = a->weak ? a : b, *strong = a->weak ? b : a;

	if (a->weak && b->weak)
		return a->dtype == TPURT_F32 || b->dtype == TPURT_F32 ?
		       TPURT_F32 : TPURT_INT32;
	if (!a->weak && !b->weak)
		return promote_strong(a->dtype, b->dtype);
	if (weak->dtype == TPURT_F32 && !is_float(strong->dtype))
		return TPURT_F32;
	if (strong->dtype == TPURT_BOOL)
		return TPURT_INT32;
	return strong->dtype;
}

/*
 * A whole number a float32 cannot hold (uint32 0xffffffff, a hash's
 * multiplier), for an integer tile: scalar-core text, whose literals are
 * 32-bit, so hi * 65536 + lo; the device takes it as a 64-bit scalar. 0 if
 * @x is not such a number.
 */
static int wide_int_text(double x, char *buf, size_t len)
{
	long long i;

	if (isnan(x) || x != floor(x) || fabs(x) >= 0x1p46)
		return 0;
	i = (long long)x;
	snprintf(buf, len, "(%lld * 65536 + %lld)",
		 (i - (i & 0xffff)) / 65536, i & 0xffff);
	return 1;
}

static int big_int_text(double x, char *buf, size_t len)
{
	return (double)(float)x != x && wide_int_text(x, buf, len);
}

/* --- scalars: constants folded, scalar-core expressions as text --- */

int stmt_scalar_text(struct stmt_ctx *c, const struct value *v, int col,
		     char *buf, size_t len, int parens)
{
	const char *fmt = parens && v->compound ? "(%s)" : "%s";
	int n;

	if (v->kind == V_IMM && fabs(v->imm) > INT32_MAX &&
	    wide_int_text(v->imm, buf, len)) {
		n = 0;	/* a uint32's 2^31 and up: hi * 65536 + lo */
	} else if (v->kind == V_IMM) {
		if (v->imm != floor(v->imm) || fabs(v->imm) > INT32_MAX)
			return stmt_fail(c, col, "the scalar core computes in integers; %g is not a 32-bit integer",
					 v->imm);
		n = snprintf(buf, len, v->imm < 0 && parens ? "(%lld)" : "%lld",
			     (long long)v->imm);
	} else if (v->kind == V_SCALAR) {
		n = snprintf(buf, len, fmt, v->text);
	} else if (v->kind == V_SMEM) {
		n = snprintf(buf, len, "%s[%s]", v->ref, v->text);
	} else {
		return stmt_fail(c, col, "expected a scalar (pl.program_id, pl.num_programs, an SMEM element, an integer)");
	}
	if (n < 0 || (size_t)n >= len)
		return stmt_fail(c, col, "scalar expression longer than %zu characters",
				 len - 1);
	return 0;
}

int stmt_smem_int(enum tpurt_dtype t)
{
	return t == TPURT_INT32 || t == TPURT_UINT32 || t == TPURT_INT8 ||
	       t == TPURT_UINT8 || t == TPURT_BOOL;
}

/* The scalar core computes in integers: it reads integer SMEM. */
int stmt_smem_scalar_ok(struct stmt_ctx *c, const struct value *v, int col)
{
	struct ref_info r;

	if (v->kind == V_SMEM && stmt_find_ref(c, v->ref, (int)strlen(v->ref), &r) &&
	    !stmt_smem_int(r.dtype))
		return stmt_fail(c, col, "'%s' is SMEM of %s: the scalar core reads integer SMEM (int32, uint32, int8, uint8, bool) in arithmetic",
				 v->ref, stmt_dtype_str(r.dtype));
	return 0;
}

/* Index-map operators for the device's binary functions. */
static const char *scalar_op(int fn)
{
	static const char *const ops[TPU_BINARY_COUNT] = {
		[TPU_BINARY_ADD] = "+", [TPU_BINARY_SUB] = "-",
		[TPU_BINARY_MUL] = "*", [TPU_BINARY_DIV] = "//",
		[TPU_BINARY_MOD] = "%", [TPU_BINARY_EQ] = "==",
		[TPU_BINARY_NE] = "!=", [TPU_BINARY_LT] = "<",
		[TPU_BINARY_LE] = "<=", [TPU_BINARY_GT] = ">",
		[TPU_BINARY_GE] = ">=", [TPU_BINARY_AND] = "and",
		[TPU_BINARY_OR] = "or",
	};

	return fn >= 0 && fn < TPU_BINARY_COUNT ? ops[fn] : NULL;
}

static double fold_binary(int fn, double a, double b, int ints)
{
	switch (fn) {
	case TPU_BINARY_ADD: return a + b;
	case TPU_BINARY_SUB: return a - b;
	case TPU_BINARY_MUL: return a * b;
	case TPU_BINARY_MAX: return a > b ? a : b;
	case TPU_BINARY_MIN: return a < b ? a : b;
	case TPU_BINARY_DIV: return ints ? floor(a / b) : a / b;
	case TPU_BINARY_POW: return pow(a, b);
	case TPU_BINARY_MOD: return a - b * floor(a / b);
	case TPU_BINARY_EQ: return a == b;
	case TPU_BINARY_NE: return a != b;
	case TPU_BINARY_LT: return a < b;
	case TPU_BINARY_LE: return a <= b;
	case TPU_BINARY_GT: return a > b;
	case TPU_BINARY_GE: return a >= b;
	case TPU_BINARY_AND: return a && b;
	case TPU_BINARY_OR: return a || b;
	case TPU_BINARY_BITAND: return (double)((int64_t)a & (int64_t)b);
	case TPU_BINARY_BITOR: return (double)((int64_t)a | (int64_t)b);
	case TPU_BINARY_BITXOR: return (double)((int64_t)a ^ (int64_t)b);
	case TPU_BINARY_SHL:	/* Python ints: no width to shift out of */
		return b < 0 || b > 62 ? 0 :
		       (double)(int64_t)((uint64_t)(int64_t)a << (int)b);
	default:		/* SHR, SHR_LOGICAL */
		return b < 0 ? 0 : b > 62 ? (a < 0 ? -1 : 0) :
		       (double)((int64_t)a >> (int)b);
	}
}

/* Two scalars: constants fold; otherwise a scalar-core expression. */
static int scalar_binary(struct stmt_ctx *c, int fn, int floor_div,
			 const struct value *a, const struct value *b, int col,
			 struct value *v)
{
	char ta[TPURT_TEXT_MAX], tb[TPURT_TEXT_MAX];
	const char *op = scalar_op(fn);
	int ints = a->dtype != TPURT_F32 && b->dtype != TPURT_F32;

	if (a->kind == V_IMM && b->kind == V_IMM) {
		if ((fn == TPU_BINARY_DIV && floor_div) || fn != TPU_BINARY_DIV)
			imm_of(v, fold_binary(fn, a->imm, b->imm, floor_div), ints &&
			       fn != TPU_BINARY_POW);
		else
			imm_of(v, a->imm / b->imm, 0);
		return 0;
	}
	if (fn == TPU_BINARY_MAX || fn == TPU_BINARY_MIN)
		op = fn == TPU_BINARY_MAX ? "max" : "min";
	if (!op || fn == TPU_BINARY_POW || (fn == TPU_BINARY_DIV && !floor_div))
		return stmt_fail(c, col, "the scalar core has no '%s'; it computes + - * // %% min max and compares on integers",
				 tpurt_stmt_binary_name((unsigned int)fn));
	if (stmt_smem_scalar_ok(c, a, col) || stmt_smem_scalar_ok(c, b, col) ||
	    stmt_scalar_text(c, a, col, ta, sizeof(ta), 1) ||
	    stmt_scalar_text(c, b, col, tb, sizeof(tb), 1))
		return c->err;
	stmt_scalar_of(v, "", 1);
	if (fn == TPU_BINARY_MAX || fn == TPU_BINARY_MIN) {
		v->compound = 0;
		if (snprintf(v->text, sizeof(v->text), "%s(%s, %s)", op, ta, tb) >=
		    (int)sizeof(v->text))
			return stmt_fail(c, col, "scalar expression too long");
		return 0;
	}
	if (snprintf(v->text, sizeof(v->text), "%s %s %s", ta, op, tb) >=
	    (int)sizeof(v->text))
		return stmt_fail(c, col, "scalar expression too long");
	return 0;
}

/* --- tiles --- */

/* A scalar-core value cast to a float type (i.astype(jnp.float32)). */
static int is_float_scalar(const struct value *v)
{
	return (v->kind == V_SCALAR && is_float(v->dtype)) ||
	       (v->kind == V_SMEM && !stmt_smem_int(v->dtype));
}

/* An immediate as the device holds it: binary32, exactly. */
static int imm_bits_ok(struct stmt_ctx *c, double x, int col)
{
	if (!isnan(x) && !isinf(x) && (double)(float)x != x &&
	    x == floor(x))
		return stmt_fail(c, col, "%.17g is not exact in float32, the device's immediates", x);
	return 0;
}

/* A (1, 1) tile that must spread over both dimensions of rows x cols. */
static bool is_corner(const struct value *x, int64_t rows, int64_t cols)
{
	return is_tile(x) && x->rows == 1 && x->cols == 1 && rows > 1 && cols > 1;
}

/* @x (a scalar or a row or column) broadcast to rows x cols of @dtype. */
static int materialize(struct stmt_ctx *c, const struct value *x,
		       enum tpurt_dtype dtype, int64_t rows, int64_t cols,
		       int col, const struct dest *d, struct value *v)
{
	struct tpurt_kernel *k = c->k;
	char text[64];
	struct value column;
	int ret;

	if (is_corner(x, rows, cols)) {
		/* the device broadcasts rows and columns: down a column first */
		if (materialize(c, x, dtype, rows, 1, col, NULL, &column))
			return c->err;
		x = &column;
	}
	ret = result(c, d, dtype, rows, cols, col, v);
	if (ret)
		return ret;
	ret = stmt_emitted(c, tpurt_kernel_zero(k, v->ref), col);
	if (ret || (x->kind == V_IMM && x->imm == 0))
		return ret;
	if (x->kind == V_IMM && !is_float(dtype) &&
	    big_int_text(x->imm, text, sizeof(text)))
		ret = tpurt_kernel_binary_expr(k, TPURT_ADD, v->ref, v->ref, text);
	else if (x->kind == V_IMM)
		ret = imm_bits_ok(c, x->imm, col) ? c->err :
		      tpurt_kernel_binary_scalar(k, TPURT_ADD, v->ref, v->ref,
						 (float)x->imm);
	else if (x->kind == V_SCALAR)
		ret = tpurt_kernel_binary_expr(k, TPURT_ADD, v->ref, v->ref, x->text);
	else if (x->kind == V_SMEM)
		ret = tpurt_kernel_binary_smem(k, TPURT_ADD, v->ref, v->ref, x->ref,
					       x->text);
	else
		ret = tpurt_kernel_binary(k, TPURT_ADD, v->ref, v->ref, x->ref,
					  x->rows == rows ? TPURT_BCAST_COL :
					  TPURT_BCAST_ROW);
	release(c, x);
	return c->err ? c->err : stmt_emitted(c, ret, col);
}

int stmt_scalar_tile(struct stmt_ctx *c, struct value *x, int col)
{
	struct value t;

	if (materialize(c, x, x->dtype, 1, 1, col, NULL, &t))
		return c->err;
	*x = t;
	return 0;
}

/* NumPy's broadcast of two 2-D shapes. */
static int broadcast(struct stmt_ctx *c, const struct value *a,
		     const struct value *b, int col, int64_t *rows, int64_t *cols)
{
	char sa[48], sb[48];

	if ((a->rows != b->rows && a->rows != 1 && b->rows != 1) ||
	    (a->cols != b->cols && a->cols != 1 && b->cols != 1))
		return stmt_fail(c, col, "shapes %s and %s do not broadcast",
				 shape_str(a, sa), shape_str(b, sb));
	*rows = a->rows > b->rows ? a->rows : b->rows;
	*cols = a->cols > b->cols ? a->cols : b->cols;
	return 0;
}

/* How @b is read against rows x cols, or -1 if it must be broadcast first. */
static int bcast_mode(const struct value *b, int64_t rows, int64_t cols)
{
	if (b->rows == rows && b->cols == cols)
		return TPU_BCAST_NONE;
	if (b->rows == 1 && b->cols == cols)
		return TPU_BCAST_ROW;
	if (b->cols == 1 && b->rows == rows)
		return TPU_BCAST_COL;
	return -1;
}

static int commutes(int fn)
{
	return fn == TPU_BINARY_ADD || fn == TPU_BINARY_MUL ||
	       fn == TPU_BINARY_MAX || fn == TPU_BINARY_MIN ||
	       fn == TPU_BINARY_EQ || fn == TPU_BINARY_NE ||
	       fn == TPU_BINARY_AND || fn == TPU_BINARY_OR ||
	       fn == TPU_BINARY_BITAND || fn == TPU_BINARY_BITOR ||
	       fn == TPU_BINARY_BITXOR;
}

/* fn(a, b) as fn'(b, a), or -1. */
static int swapped(int fn)
{
	switch (fn) {
	case TPU_BINARY_LT: return TPU_BINARY_GT;
	case TPU_BINARY_LE: return TPU_BINARY_GE;
	case TPU_BINARY_GT: return TPU_BINARY_LT;
	case TPU_BINARY_GE: return TPU_BINARY_LE;
	default: return commutes(fn) ? fn : -1;
	}
}

static int is_compare(int fn)
{
	return fn >= TPU_BINARY_EQ && fn <= TPU_BINARY_GE;
}

static int binary_dtype(struct stmt_ctx *c, int fn, const struct value *a,
			const struct value *b, int col, enum tpurt_dtype *t)
{
	if (is_compare(fn)) {
		*t = TPURT_BOOL;
		return 0;
	}
	if (fn >= TPU_BINARY_BITAND) {
		*t = promote(a, b);
		if (is_float(*t) || (!a->weak && is_float(a->dtype)) ||
		    (!b->weak && is_float(b->dtype)))
			return stmt_fail(c, col, "%s takes integers, not %s and %s",
					 tpurt_stmt_binary_name((unsigned int)fn),
					 stmt_dtype_str(a->dtype), stmt_dtype_str(b->dtype));
		return 0;
	}
	if (fn == TPU_BINARY_AND || fn == TPU_BINARY_OR) {
		if ((!a->weak && a->dtype != TPURT_BOOL) ||
		    (!b->weak && b->dtype != TPURT_BOOL))
			return stmt_fail(c, col, "& and | combine masks (bool), not %s and %s",
					 stmt_dtype_str(a->dtype), stmt_dtype_str(b->dtype));
		*t = TPURT_BOOL;
		return 0;
	}
	*t = promote(a, b);
	return 0;
}

/* The op itself: @a a tile of the result's shape, @b read by @mode. */
static int emit_binary(struct stmt_ctx *c, int fn, const struct value *a,
		       const struct value *b, int mode, const struct value *v,
		       int col)
{
	struct tpurt_kernel *k = c->k;
	enum tpurt_binary f = (enum tpurt_binary)fn;
	char text[64];

	if (b->kind == V_IMM && !is_float(a->dtype) &&
	    big_int_text(b->imm, text, sizeof(text)))
		return stmt_emitted(c, tpurt_kernel_binary_expr(k, f, v->ref, a->ref,
								text), col);
	if (b->kind == V_IMM)
		return imm_bits_ok(c, b->imm, col) ? c->err :
		       stmt_emitted(c, tpurt_kernel_binary_scalar(k, f, v->ref, a->ref,
								  (float)b->imm), col);
	if (b->kind == V_SCALAR)
		return stmt_emitted(c, tpurt_kernel_binary_expr(k, f, v->ref, a->ref,
								b->text), col);
	if (b->kind == V_SMEM)
		return stmt_emitted(c, tpurt_kernel_binary_smem(k, f, v->ref, a->ref,
								b->ref, b->text), col);
	return stmt_emitted(c, tpurt_kernel_binary(k, f, v->ref, a->ref, b->ref,
						   (enum tpurt_broadcast)mode), col);
}

/* fn(a, b) with at least one tile. */
static int tile_binary(struct stmt_ctx *c, int fn, struct value a,
		       struct value b, const struct dest *d, int col,
		       struct value *v)
{
	enum tpurt_dtype t = TPURT_F32;
	int64_t rows, cols;
	int mode;

	if (!is_tile(&a) && swapped(fn) >= 0) {
		struct value x = a;

		a = b;
		b = x;
		fn = swapped(fn);
	}
	if (binary_dtype(c, fn, &a, &b, col, &t))
		return c->err;
	if (is_tile(&a) && is_tile(&b)) {
		if (broadcast(c, &a, &b, col, &rows, &cols))
			return c->err;
	} else {
		rows = is_tile(&a) ? a.rows : b.rows;
		cols = is_tile(&a) ? a.cols : b.cols;
	}
	if (is_tile(&a) && (a.rows != rows || a.cols != cols) && is_tile(&b) &&
	    b.rows == rows && b.cols == cols && swapped(fn) >= 0) {
		struct value x = a;

		a = b;
		b = x;
		fn = swapped(fn);
	}
	if (!is_tile(&a) || a.rows != rows || a.cols != cols) {
		struct value full;

		if (materialize(c, &a, a.weak ? t : a.dtype, rows, cols, col, NULL,
				&full))
			return c->err;
		a = full;
	}
	if (is_corner(&b, rows, cols)) {
		struct value column;

		if (materialize(c, &b, b.dtype, rows, 1, col, NULL, &column))
			return c->err;
		b = column;
	}
	mode = is_tile(&b) ? bcast_mode(&b, rows, cols) : TPU_BCAST_NONE;
	release(c, &a);
	release(c, &b);
	if (result(c, d, t, rows, cols, col, v))
		return c->err;
	return emit_binary(c, fn, &a, &b, mode, v, col);
}

/* An element-wise result keeps the N-D shape of an operand of its own
 * rows x cols (x_ref[...] * 2 of a 3-D block is 3-D, though in a 2-D
 * temporary: lower_nd_index copies it into an N-D one when indexed). */
static void keep_nd(struct value *v, const struct value *a, const struct value *b)
{
	const struct value *s = a && a->nd > 2 && a->rows == v->rows && a->cols == v->cols ? a :
				b && b->nd > 2 && b->rows == v->rows && b->cols == v->cols ? b :
				NULL;

	if (s && is_tile(v) && !v->nd) {
		v->nd = s->nd;
		memcpy(v->shape, s->shape, sizeof(v->shape));
	}
}

static int lower_binary_2d(struct stmt_ctx *c, int fn, int floor_div,
			   struct value *a, struct value *b, const struct dest *d,
			   int col, struct value *v);

int stmt_lower_binary(struct stmt_ctx *c, int fn, int floor_div,
		      struct value *a, struct value *b, const struct dest *d,
		      int col, struct value *v)
{
	struct value sa = *a, sb = *b;

	if (stmt_nd_broadcasts(a, b))
		return stmt_nd_binary(c, fn, floor_div, a, b, col, v);
	if (lower_binary_2d(c, fn, floor_div, a, b, d, col, v))
		return c->err;
	keep_nd(v, &sa, &sb);
	return 0;
}

int stmt_lower_binary_2d(struct stmt_ctx *c, int fn, int floor_div,
			 struct value *a, struct value *b, const struct dest *d,
			 int col, struct value *v)
{
	return lower_binary_2d(c, fn, floor_div, a, b, d, col, v);
}

static int lower_binary_2d(struct stmt_ctx *c, int fn, int floor_div,
			   struct value *a, struct value *b, const struct dest *d,
			   int col, struct value *v)
{
	if (!is_tile(a) && !stmt_is_scalar(a))
		return stmt_fail(c, col, "expected an array or a scalar operand");
	if (!is_tile(b) && !stmt_is_scalar(b))
		return stmt_fail(c, col, "expected an array or a scalar operand");
	if (!is_tile(a) && !is_tile(b) && (is_float_scalar(a) || is_float_scalar(b))) {
		/* the scalar core computes on integers: on the vector unit, as (1, 1) */
		struct value *s = is_float_scalar(a) ? a : b, t;

		if (materialize(c, s, s->dtype, 1, 1, col, NULL, &t))
			return c->err;
		*s = t;
	}
	if (!is_tile(a) && !is_tile(b) && fn >= TPU_BINARY_BITAND &&
	    !(a->kind == V_IMM && b->kind == V_IMM)) {
		/* the scalar core has no bitwise ops or shifts: on the vector unit, as (1, 1) */
		struct value *s = a->kind != V_IMM ? a : b, t;

		if (materialize(c, s, s->dtype, 1, 1, col, NULL, &t))
			return c->err;
		*s = t;
	}
	if (!is_tile(a) && !is_tile(b))
		return scalar_binary(c, fn, floor_div, a, b, col, v);
	/* x / y of integers is a float in jnp; x // y of floats floors */
	if (fn == TPU_BINARY_DIV && !floor_div && !is_float(promote(a, b))) {
		struct value fa;

		if (is_tile(a)) {
			if (result(c, NULL, TPURT_F32, a->rows, a->cols, col, &fa) ||
			    stmt_emitted(c, tpurt_kernel_store(c->k, fa.ref, a->ref), col))
				return c->err;
			release(c, a);
			*a = fa;
		} else {
			a->dtype = TPURT_F32;
		}
	}
	if (tile_binary(c, fn, *a, *b, floor_div && is_float(promote(a, b)) ? NULL : d,
			col, v))
		return c->err;
	if (floor_div && is_float(v->dtype)) {
		struct value f;

		release(c, v);
		if (result(c, d, v->dtype, v->rows, v->cols, col, &f) ||
		    stmt_emitted(c, tpurt_kernel_unary(c->k, TPURT_FLOOR, f.ref, v->ref), col))
			return c->err;
		*v = f;
	}
	return 0;
}

/* --- unary functions --- */

static int transcendental(int fn)
{
	return fn == TPU_UNARY_GELU || fn == TPU_UNARY_SILU ||
	       fn == TPU_UNARY_SIGMOID || fn == TPU_UNARY_TANH ||
	       fn == TPU_UNARY_EXP || fn == TPU_UNARY_RECIPROCAL ||
	       fn == TPU_UNARY_SQRT || fn == TPU_UNARY_RSQRT ||
	       fn == TPU_UNARY_LOG || fn == TPU_UNARY_LOG1P ||
	       fn == TPU_UNARY_EXP2 || fn == TPU_UNARY_SIN ||
	       fn == TPU_UNARY_COS || fn == TPU_UNARY_ERF;
}

static int fold_unary(int fn, double x, double *out)
{
	switch (fn) {
	case TPU_UNARY_NEG: *out = -x; break;
	case TPU_UNARY_ABS: *out = fabs(x); break;
	case TPU_UNARY_EXP: *out = exp(x); break;
	case TPU_UNARY_EXP2: *out = exp2(x); break;
	case TPU_UNARY_LOG: *out = log(x); break;
	case TPU_UNARY_LOG1P: *out = log1p(x); break;
	case TPU_UNARY_SQRT: *out = sqrt(x); break;
	case TPU_UNARY_RSQRT: *out = 1 / sqrt(x); break;
	case TPU_UNARY_RECIPROCAL: *out = 1 / x; break;
	case TPU_UNARY_SQUARE: *out = x * x; break;
	case TPU_UNARY_FLOOR: *out = floor(x); break;
	case TPU_UNARY_CEIL: *out = ceil(x); break;
	case TPU_UNARY_ROUND: *out = nearbyint(x); break;
	case TPU_UNARY_TANH: *out = tanh(x); break;
	case TPU_UNARY_SIN: *out = sin(x); break;
	case TPU_UNARY_COS: *out = cos(x); break;
	case TPU_UNARY_ERF: *out = erf(x); break;
	case TPU_UNARY_SIGMOID: *out = 1 / (1 + exp(-x)); break;
	case TPU_UNARY_RELU: *out = x > 0 ? x : 0; break;
	case TPU_UNARY_NOT: *out = !x; break;
	case TPU_UNARY_POPCNT:	/* of an int32 constant */
		*out = __builtin_popcount((uint32_t)(int32_t)x);
		break;
	case TPU_UNARY_CLZ:
		*out = (int32_t)x ? __builtin_clz((uint32_t)(int32_t)x) : 32;
		break;
	default: return -1;
	}
	return 0;
}

static int lower_unary_2d(struct stmt_ctx *c, int fn, struct value *x,
			  const struct dest *d, int col, struct value *v);

static int lower_unary(struct stmt_ctx *c, int fn, struct value *x,
		       const struct dest *d, int col, struct value *v)
{
	struct value sx = *x;

	if (lower_unary_2d(c, fn, x, d, col, v))
		return c->err;
	keep_nd(v, &sx, NULL);
	return 0;
}

static int lower_unary_2d(struct stmt_ctx *c, int fn, struct value *x,
			  const struct dest *d, int col, struct value *v)
{
	enum tpurt_dtype t;
	double y;

	if ((fn == TPU_UNARY_POPCNT || fn == TPU_UNARY_CLZ) &&
	    (is_float(x->dtype) || (x->kind == V_IMM && x->imm != floor(x->imm))))
		return stmt_fail(c, col, "%s takes integers, not %s",
				 tpurt_stmt_unary_name((unsigned int)fn),
				 tpurt_dtype_name(x->dtype));
	if (x->kind == V_IMM) {
		if (fold_unary(fn, x->imm, &y))
			return stmt_fail(c, col, "%s of a constant is not supported",
					 tpurt_stmt_unary_name((unsigned int)fn));
		imm_of(v, y, x->dtype == TPURT_INT32 && !transcendental(fn));
		return 0;
	}
	if ((x->kind == V_SCALAR || x->kind == V_SMEM) &&
	    !(x->kind == V_SCALAR && fn == TPU_UNARY_NEG && !is_float(x->dtype)) &&
	    stmt_scalar_tile(c, x, col))
		return c->err;	/* the scalar core negates integers only: a (1, 1) tile */
	if (x->kind == V_SCALAR && fn == TPU_UNARY_NEG) {
		*v = *x;
		if (snprintf(v->text, sizeof(v->text), x->compound ? "-(%s)" : "-%s",
			     x->text) >= (int)sizeof(v->text))
			return stmt_fail(c, col, "scalar expression too long");
		v->compound = 1;
		return 0;
	}
	if (!is_tile(x))
		return stmt_fail(c, col, "%s takes an array here",
				 tpurt_stmt_unary_name((unsigned int)fn));
	t = fn == TPU_UNARY_NOT ? TPURT_BOOL :
	    transcendental(fn) && !is_float(x->dtype) ? TPURT_F32 : x->dtype;
	release(c, x);
	if (result(c, d, t, x->rows, x->cols, col, v))
		return c->err;
	return stmt_emitted(c, tpurt_kernel_unary(c->k, (enum tpurt_unary)fn, v->ref,
						  x->ref), col);
}

/* x.astype(t) */
/*
 * astype of a scalar-core value (a 64-bit integer): to int32 or a float
 * type it only changes how the value promotes and stores (exact to 2^24
 * as a float); to an 8-bit type, uint32 or bool it wraps or tests, in the
 * scalar core's arithmetic.
 */
static int scalar_cast(struct stmt_ctx *c, const struct value *x,
		       enum tpurt_dtype t, int col, struct value *v)
{
	/* integer sources wrap, float ones (whole numbers here) saturate */
	static const char *const fmt[2][TPURT_UINT32 + 1] = {
		{ [TPURT_INT8] = "(%s + 128) %% 256 - 128",
		  [TPURT_UINT8] = "%s %% 256", [TPURT_BOOL] = "%s != 0",
		  [TPURT_UINT32] = "%s %% (65536 * 65536)" },
		{ [TPURT_INT8] = "max(-128, min(127, %s))",
		  [TPURT_UINT8] = "max(0, min(255, %s))", [TPURT_BOOL] = "%s != 0",
		  [TPURT_UINT32] = "max(0, %s)" },
	};
	const char *f = (unsigned int)t <= TPURT_UINT32 ? fmt[is_float(x->dtype)][t] : NULL;
	char text[TPURT_TEXT_MAX];

	if (stmt_smem_scalar_ok(c, x, col))
		return c->err;
	*v = *x;
	v->weak = 0;
	v->dtype = t;
	if (!f)
		return 0;
	if (stmt_scalar_text(c, x, col, text, sizeof(text), 1))
		return c->err;
	stmt_scalar_of(v, "", 1);
	v->weak = 0;
	v->dtype = t;
	if (snprintf(v->text, sizeof(v->text), f, text) >= (int)sizeof(v->text))
		return stmt_fail(c, col, "scalar expression too long");
	return 0;
}

int stmt_scalar_cast(struct stmt_ctx *c, const struct value *x,
		     enum tpurt_dtype t, int col, struct value *v)
{
	return scalar_cast(c, x, t, col, v);
}

static int lower_cast(struct stmt_ctx *c, struct value *x, enum tpurt_dtype t,
		      const struct dest *d, int col, struct value *v)
{
	if (x->kind == V_IMM) {
		*v = *x;
		v->weak = 0;
		v->dtype = t;
		return 0;
	}
	if (x->kind == V_SMEM && !stmt_smem_int(x->dtype) && stmt_scalar_tile(c, x, col))
		return c->err;	/* the scalar core reads integer SMEM only */
	if (x->kind == V_SCALAR || x->kind == V_SMEM)
		return scalar_cast(c, x, t, col, v);
	if (!is_tile(x))
		return stmt_fail(c, col, "astype of this value is not supported");
	if (x->dtype == t) {
		*v = *x;
		return 0;
	}
	release(c, x);
	if (result(c, d, t, x->rows, x->cols, col, v) ||
	    stmt_emitted(c, tpurt_kernel_store(c->k, v->ref, x->ref), col))
		return c->err;
	keep_nd(v, x, NULL);
	return 0;
}

/* --- calls --- */

const struct stmt_node *stmt_kwarg(const struct stmt_node *call,
				   const char *name)
{
	for (int i = 0; i < call->nkw; i++)
		if (call->kwlen[i] == (int)strlen(name) &&
		    !strncmp(call->kw[i], name, (size_t)call->kwlen[i]))
			return call->kwval[i];
	return NULL;
}

int stmt_check_kwargs(struct stmt_ctx *c, const struct stmt_node *call,
		      const char *const *allowed)
{
	for (int i = 0; i < call->nkw; i++) {
		int ok = 0;

		for (int j = 0; allowed && allowed[j]; j++)
			ok |= call->kwlen[i] == (int)strlen(allowed[j]) &&
			      !strncmp(call->kw[i], allowed[j], (size_t)call->kwlen[i]);
		if (!ok)
			return stmt_fail(c, call->kwval[i]->col - call->kwlen[i] - 1,
					 "unknown keyword argument '%.*s'",
					 call->kwlen[i], call->kw[i]);
	}
	return 0;
}

int stmt_nargs_are(struct stmt_ctx *c, const struct stmt_node *call,
		   int lo, int hi, const char *fn)
{
	if (call->nargs < lo || call->nargs > hi)
		return stmt_fail(c, call->col, lo == hi ?
				 "%s takes %d arguments, %d given" :
				 "%s takes %d to %d arguments, %d given",
				 fn, lo, hi, call->nargs);
	return 0;
}

/* A constant integer argument (an axis, a dimension, a shape entry). */
int stmt_const_int(struct stmt_ctx *c, const struct stmt_node *n, int64_t *out)
{
	struct value v;

	if (stmt_lower_node(c, n, NULL, &v))
		return c->err;
	if (v.kind != V_IMM || v.imm != floor(v.imm))
		return stmt_fail(c, n->col, "expected a constant integer");
	*out = (int64_t)v.imm;
	return 0;
}

static int const_bool(struct stmt_ctx *c, const struct stmt_node *n, int *out)
{
	int64_t x = 0;

	if (n && stmt_const_int(c, n, &x))
		return c->err;
	*out = x != 0;
	return 0;
}

/* axis=1, -1 (columns of each row) or 0, -2 */
static int const_axis(struct stmt_ctx *c, const struct stmt_node *n, int *axis)
{
	int64_t a;

	if (stmt_const_int(c, n, &a))
		return c->err;
	if (a < -2 || a > 1)
		return stmt_fail(c, n->col, "axis %lld: the body's arrays are 2-D",
				 (long long)a);
	*axis = (int)(a < 0 ? a + 2 : a);
	return 0;
}

/* A reduction's axis or tuple of axes of a value of @rank: bit d of @axes. */
static int reduce_axes(struct stmt_ctx *c, const struct stmt_node *n, int rank,
		       unsigned int *axes)
{
	int count = n->kind == SN_TUPLE ? n->nargs : 1;

	*axes = 0;
	for (int i = 0; i < count; i++) {
		const struct stmt_node *e = n->kind == SN_TUPLE ? n->arg[i] : n;
		int64_t a;

		if (stmt_const_int(c, e, &a))
			return c->err;
		if (a < -rank || a >= rank)
			return stmt_fail(c, e->col, "axis %lld of a value of rank %d",
					 (long long)a, rank);
		a = a < 0 ? a + rank : a;
		if (*axes >> a & 1)
			return stmt_fail(c, e->col, "axis %lld repeated", (long long)a);
		*axes |= 1u << a;
	}
	if (!*axes)
		return stmt_fail(c, n->col, "an empty tuple of axes");
	return 0;
}

static int lower_tile_arg(struct stmt_ctx *c, const struct stmt_node *n,
			  struct value *v, const char *fn)
{
	if (stmt_lower_node(c, n, NULL, v))
		return c->err;
	if (!is_tile(v))
		return stmt_fail(c, n->col, "%s takes an array here", fn);
	return 0;
}

/* @x.T into @d or a temporary: another ref (the device moves elements). */
static int transposed(struct stmt_ctx *c, struct value x, const struct dest *d,
		      int col, struct value *v)
{
	if (d && !strcmp(d->name, x.ref))
		d = NULL;
	if (result(c, d, x.dtype, x.cols, x.rows, col, v))
		return c->err;
	release(c, &x);
	return stmt_emitted(c, tpurt_kernel_transpose(c->k, v->ref, x.ref), col);
}

/* The dtype a reduction of @x gives. */
static enum tpurt_dtype reduce_dtype(int fn, enum tpurt_dtype x)
{
	if (fn >= TPU_REDUCE_ARGMAX)
		return TPURT_INT32;	/* indices */
	return fn == TPU_REDUCE_SUM && x == TPURT_BOOL ? TPURT_INT32 : x;
}

/*
 * jnp.sum/max/min(x) over the whole array: each row, then the column of
 * results, into a (1, 1) tile, which broadcasts as the 0-d result would.
 */
static int reduce_all_of(struct stmt_ctx *c, int fn, struct value x,
			 const struct dest *d, int col, struct value *v,
			 int64_t *count)
{
	enum tpurt_dtype t = reduce_dtype(fn, x.dtype);
	struct value rows;

	if (count)
		*count = x.rows * x.cols;
	if (d && !strcmp(d->name, x.ref))
		d = NULL;
	if (result(c, NULL, t, x.rows, 1, col, &rows))
		return c->err;
	release(c, &x);
	if (stmt_emitted(c, tpurt_kernel_reduce(c->k, (enum tpurt_reduce)fn,
						rows.ref, x.ref, 1), col) ||
	    result(c, d, t, 1, 1, col, v))
		return c->err;
	release(c, &rows);
	return stmt_emitted(c, tpurt_kernel_reduce(c->k, (enum tpurt_reduce)fn, v->ref,
						   rows.ref, 0), col);
}

static int lower_reduce_all(struct stmt_ctx *c, const struct stmt_node *call,
			    int fn, const char *name, const struct dest *d,
			    struct value *v, int64_t *count)
{
	struct value x;

	if (fn >= TPU_REDUCE_ARGMAX)
		return stmt_fail(c, call->col, "%s over the whole array (a flat index) is not supported: give axis=1 (each row) or axis=0 (each column)",
				 name);
	if (lower_tile_arg(c, call->arg[0], &x, name))
		return c->err;
	return reduce_all_of(c, fn, x, d, call->col, v, count);
}

/*
 * jnp.sum/max/min(x, axis, keepdims); for jnp.mean, @count (when not NULL)
 * gets how many elements each result summed and @name is "mean".
 */
static int lower_reduce(struct stmt_ctx *c, const struct stmt_node *call, int fn,
			const char *name, const struct dest *d, struct value *v,
			int64_t *count)
{
	static const char *const kws[] = { "axis", "keepdims", NULL };
	const struct stmt_node *axis_node = stmt_kwarg(call, "axis");
	struct value x, y;
	enum tpurt_dtype t;
	int axis = 0, keep = 0;

	if (!name)
		name = tpurt_stmt_reduce_name((unsigned int)fn);
	if (call->nargs == 2 && !call->nkw &&
	    (fn == TPU_REDUCE_MAX || fn == TPU_REDUCE_MIN)) {
		/* Python's max(a, b) on scalars: a pl.when condition's */
		if (stmt_lower_node(c, call->arg[0], NULL, &x) || stmt_lower_node(c, call->arg[1], NULL, &y))
			return c->err;
		if (!stmt_is_scalar(&x) || !stmt_is_scalar(&y))
			return stmt_fail(c, call->col, "%s(a, b) of arrays: use jnp.%s",
					 name, fn == TPU_REDUCE_MAX ? "maximum" : "minimum");
		return scalar_binary(c, fn == TPU_REDUCE_MAX ? TPU_BINARY_MAX :
				     TPU_BINARY_MIN, 0, &x, &y, call->col, v);
	}
	if (stmt_check_kwargs(c, call, kws) || stmt_nargs_are(c, call, 1, 2, name))
		return c->err;
	if (call->nargs == 2)
		axis_node = call->arg[1];
	if (!axis_node)
		return lower_reduce_all(c, call, fn, name, d, v, count);
	{
		/* an axis or a tuple of them, of a 2-D value or one of rank 3 or 4 */
		unsigned int axes = 0;
		int rank;

		if (const_bool(c, stmt_kwarg(call, "keepdims"), &keep) ||
		    lower_tile_arg(c, call->arg[0], &x, name))
			return c->err;
		rank = x.nd > 2 ? x.nd : 2;
		if (reduce_axes(c, axis_node, rank, &axes))
			return c->err;
		if (fn >= TPU_REDUCE_ARGMAX && axis_node->kind == SN_TUPLE)
			return stmt_fail(c, axis_node->col, "%s takes one axis, not a tuple", name);
		if (x.nd > 2)
			return stmt_nd_reduce(c, fn, &x, axes, keep, reduce_dtype(fn, x.dtype),
					      call->col, v, count);
		if (axes == 3)	/* both axes of a 2-D value: a (1, 1) tile */
			return reduce_all_of(c, fn, x, d, call->col, v, count);
		axis = axes == 2;
	}
	t = reduce_dtype(fn, x.dtype);
	if (d && !strcmp(d->name, x.ref))
		d = NULL;
	if (count)
		*count = axis ? x.cols : x.rows;
	if (axis == 1 && !keep) {
		/* a (rows,) vector: viewed 2-D as 1-D arrays are, a row */
		struct value col;

		if (result(c, NULL, t, x.rows, 1, call->col, &col))
			return c->err;
		release(c, &x);
		if (stmt_emitted(c, tpurt_kernel_reduce(c->k, (enum tpurt_reduce)fn, col.ref,
							x.ref, 1), call->col))
			return c->err;
		return transposed(c, col, d, call->col, v);
	}
	if (result(c, d, t, axis ? x.rows : 1, axis ? 1 : x.cols, call->col, v))
		return c->err;
	release(c, &x);
	return stmt_emitted(c, tpurt_kernel_reduce(c->k, (enum tpurt_reduce)fn, v->ref,
						   x.ref, axis), call->col);
}

/* jnp.mean(x, axis, keepdims): the sum, then true division by the count. */
static int lower_mean(struct stmt_ctx *c, const struct stmt_node *call,
		      const struct dest *d, struct value *v)
{
	struct value sum, n;
	int64_t count;

	if (lower_reduce(c, call, TPU_REDUCE_SUM, "mean", NULL, &sum, &count))
		return c->err;
	imm_of(&n, (double)count, 1);
	return stmt_lower_binary(c, TPU_BINARY_DIV, 0, &sum, &n, d, call->col, v);
}

/* One side of where(): a ref whole, a row, a column or an immediate. */
static int select_side(struct stmt_ctx *c, struct value *x, enum tpurt_dtype t,
		       int64_t rows, int64_t cols, int col, struct tpurt_value *s)
{
	char text[64];

	memset(s, 0, sizeof(*s));
	if (x->kind == V_IMM && !is_float(t) && big_int_text(x->imm, text, sizeof(text))) {
		/* a tile of it below: the immediate is binary32 */
	} else if (x->kind == V_IMM) {
		s->bcast = TPURT_BCAST_IMM;
		s->imm = (float)x->imm;
		return imm_bits_ok(c, x->imm, col);
	}
	if (!is_tile(x) || bcast_mode(x, rows, cols) < 0) {
		struct value full;

		if (materialize(c, x, x->weak ? t : x->dtype, rows, cols, col, NULL,
				&full))
			return c->err;
		*x = full;
	}
	s->ref = x->ref;
	s->bcast = (enum tpurt_broadcast)bcast_mode(x, rows, cols);
	return 0;
}

/* where(m, a, b) of scalars, on the scalar core: m * a + (1 - m) * b with
 * m made 0 or 1. */
static int scalar_where(struct stmt_ctx *c, const struct value *m,
			const struct value *a, const struct value *b, int col,
			struct value *v)
{
	char tm[TPURT_TEXT_MAX], ta[TPURT_TEXT_MAX], tb[TPURT_TEXT_MAX];

	if (stmt_smem_scalar_ok(c, m, col) || stmt_smem_scalar_ok(c, a, col) ||
	    stmt_smem_scalar_ok(c, b, col) || stmt_scalar_text(c, m, col, tm, sizeof(tm), 1) ||
	    stmt_scalar_text(c, a, col, ta, sizeof(ta), 1) ||
	    stmt_scalar_text(c, b, col, tb, sizeof(tb), 1))
		return c->err;
	stmt_scalar_of(v, "", 1);
	if (snprintf(v->text, sizeof(v->text), "(%s != 0) * %s + (%s == 0) * %s",
		     tm, ta, tm, tb) >= (int)sizeof(v->text))
		return stmt_fail(c, col, "scalar expression too long");
	return 0;
}

static int lower_where(struct stmt_ctx *c, const struct stmt_node *call,
		       const struct dest *d, struct value *v)
{
	struct value m, a, b, nd;
	struct tpurt_value sa, sb;
	int64_t rows, cols;
	enum tpurt_dtype t;

	if (stmt_check_kwargs(c, call, NULL) || stmt_nargs_are(c, call, 3, 3, "where") ||
	    stmt_lower_node(c, call->arg[0], NULL, &m) || stmt_lower_node(c, call->arg[1], NULL, &a) ||
	    stmt_lower_node(c, call->arg[2], NULL, &b))
		return c->err;
	if (m.kind == V_IMM) {
		*v = m.imm ? a : b;
		release(c, m.imm ? &b : &a);
		return 0;
	}
	if (stmt_is_scalar(&m) && stmt_is_scalar(&a) && stmt_is_scalar(&b))
		return scalar_where(c, &m, &a, &b, call->col, v);
	if (stmt_nd_broadcasts(&m, &a) || stmt_nd_broadcasts(&m, &b) ||
	    stmt_nd_broadcasts(&a, &b))
		return stmt_fail(c, call->col, "where of values of rank 3 or 4 that broadcast across their leading dimensions is not supported: broadcast them first (jnp.broadcast_to)");
	nd = m.nd > 2 ? m : a.nd > 2 ? a : b;	/* the result's N-D shape, if any */
	rows = m.rows, cols = m.cols;
	if (!is_tile(&m))
		rows = cols = 1;
	if (is_tile(&a) && broadcast(c, &(struct value){ .rows = rows, .cols = cols },
				     &a, call->col, &rows, &cols))
		return c->err;
	if (is_tile(&b) && broadcast(c, &(struct value){ .rows = rows, .cols = cols },
				     &b, call->col, &rows, &cols))
		return c->err;
	t = promote(&a, &b);
	if (!is_tile(&m) || m.rows != rows || m.cols != cols) {
		struct value full;

		if (materialize(c, &m, TPURT_BOOL, rows, cols, call->col, NULL, &full))
			return c->err;
		m = full;
	}
	if (select_side(c, &a, t, rows, cols, call->col, &sa) ||
	    select_side(c, &b, t, rows, cols, call->col, &sb))
		return c->err;
	release(c, &m), release(c, &a), release(c, &b);
	if (result(c, d, t, rows, cols, call->col, v) ||
	    stmt_emitted(c, tpurt_kernel_select(c->k, v->ref, m.ref, &sa, &sb), call->col))
		return c->err;
	keep_nd(v, &nd, NULL);
	return 0;
}

/* A dot operand: a tile, maybe read through .T, in a ref of dtype @t. */
static int dot_operand(struct stmt_ctx *c, const struct stmt_node *n,
		       struct value *v)
{
	int t = n->kind == SN_ATTR && stmt_name_is(n, "T");

	if (lower_tile_arg(c, t ? n->base : n, v, "dot"))
		return c->err;
	if (v->transposed)
		return stmt_fail(c, n->col, "dot operand transposed twice");
	v->transposed = t;
	return 0;
}

static int dot_cast(struct stmt_ctx *c, struct value *x, enum tpurt_dtype t,
		    int col)
{
	struct value y;
	int tr = x->transposed;

	if (x->dtype == t)
		return 0;
	if (lower_cast(c, x, t, NULL, col, &y))
		return c->err;
	*x = y;
	x->transposed = tr;
	return 0;
}

static int dot_types(struct stmt_ctx *c, struct value *a, struct value *b,
		     int col, enum tpurt_dtype *acc)
{
	int int8a = a->dtype == TPURT_INT8 || a->dtype == TPURT_UINT8;
	int int8b = b->dtype == TPURT_INT8 || b->dtype == TPURT_UINT8;

	if (int8a && int8b) {
		*acc = TPURT_INT32;
		return 0;
	}
	if (!is_float(a->dtype) || !is_float(b->dtype))
		return stmt_fail(c, col, "dot of %s and %s: the MXU multiplies float32, bfloat16 or 8-bit integers",
				 stmt_dtype_str(a->dtype), stmt_dtype_str(b->dtype));
	*acc = TPURT_F32;
	if (a->dtype != b->dtype)	/* jnp promotes to float32 */
		return dot_cast(c, a, TPURT_F32, col) ? c->err :
		       dot_cast(c, b, TPURT_F32, col);
	return 0;
}

/*
 * dot(a, b), a @ b. Its dtype is preferred_element_type, else jnp's
 * promotion; but written or added straight into a ref of the MXU's
 * accumulator type it is that type, as the MXU accumulates.
 */
static int lower_dot(struct stmt_ctx *c, const struct stmt_node *call,
		     const struct stmt_node *ln, const struct stmt_node *rn,
		     const struct dest *d, int accumulate, struct value *v)
{
	static const char *const kws[] = { "preferred_element_type", "precision", NULL };
	const struct stmt_node *pref = call ? stmt_kwarg(call, "preferred_element_type") : NULL;
	int col = call ? call->col : ln->col;
	struct value a, b, p, acc;
	enum tpurt_dtype acc_t = TPURT_F32, t;
	int64_t m, ka, kb, n;
	unsigned int flags;
	char sa[48], sb[48];

	if (call && stmt_check_kwargs(c, call, kws))
		return c->err;
	if (dot_operand(c, ln, &a) || dot_operand(c, rn, &b) ||
	    dot_types(c, &a, &b, col, &acc_t))
		return c->err;
	m = a.transposed ? a.cols : a.rows;
	ka = a.transposed ? a.rows : a.cols;
	kb = b.transposed ? b.cols : b.rows;
	n = b.transposed ? b.rows : b.cols;
	if (ka != kb)
		return stmt_fail(c, col, "dot of %s%s and %s%s: contraction sizes %lld and %lld differ",
				 shape_str(&a, sa), a.transposed ? ".T" : "",
				 shape_str(&b, sb), b.transposed ? ".T" : "",
				 (long long)ka, (long long)kb);
	t = promote(&a, &b);
	if (pref) {
		if (stmt_lower_node(c, pref, NULL, &p))
			return c->err;
		if (p.kind != V_DTYPE)
			return stmt_fail(c, pref->col, "expected a dtype");
		t = p.dtype;
	}
	if (d && (!strcmp(d->name, a.ref) || !strcmp(d->name, b.ref)))
		d = NULL;	/* the MXU does not write what it reads */
	if (d && d->dtype == acc_t && (!pref || t == acc_t))
		t = acc_t;
	if (accumulate && (!d || t != acc_t || d->rows != m || d->cols != n))
		return 1;	/* not the MXU's +=; the caller adds */
	flags = (accumulate ? TPURT_DOT_ACCUMULATE : 0) |
		(a.transposed ? TPURT_DOT_TRANSPOSE_LHS : 0) |
		(b.transposed ? TPURT_DOT_TRANSPOSE_RHS : 0);
	if (result(c, t == acc_t ? d : NULL, acc_t, m, n, col, &acc) ||
	    stmt_emitted(c, tpurt_kernel_dot(c->k, acc.ref, a.ref, b.ref, flags), col))
		return c->err;
	release(c, &a), release(c, &b);
	if (t == acc_t) {
		*v = acc;
		return 0;
	}
	return lower_cast(c, &acc, t, d, col, v);
}

static int lower_iota(struct stmt_ctx *c, const struct stmt_node *call,
		      const struct value *offset, const struct dest *d,
		      struct value *v)
{
	static const char *const kws[] = { "dtype", "shape", "dimension", NULL };
	const struct stmt_node *arg[3];
	struct value t, shape;
	int64_t dim;
	char text[TPURT_TEXT_MAX] = "";

	for (int i = 0; i < 3; i++)
		arg[i] = i < call->nargs ? call->arg[i] : stmt_kwarg(call, kws[i]);
	if (stmt_check_kwargs(c, call, kws))
		return c->err;
	if (!arg[0] || !arg[1] || !arg[2])
		return stmt_fail(c, call->col, "iota takes (dtype, shape, dimension)");
	if (stmt_lower_node(c, arg[0], NULL, &t) || stmt_lower_node(c, arg[1], NULL, &shape) ||
	    stmt_const_int(c, arg[2], &dim))
		return c->err;
	if (t.kind != V_DTYPE)
		return stmt_fail(c, arg[0]->col, "expected a dtype");
	if (shape.kind != V_TUPLE)
		return stmt_fail(c, arg[1]->col, "expected a shape");
	if (shape.nd) {
		if (dim < 0 || dim >= shape.nd)
			return stmt_fail(c, arg[2]->col, "iota dimension %lld of a shape of rank %d",
					 (long long)dim, shape.nd);
		if (offset && stmt_scalar_text(c, offset, call->col, text, sizeof(text), 0))
			return c->err;
		return stmt_nd_iota(c, t.dtype, shape.nd, shape.shape, (int)dim,
				    offset ? text : NULL, call->col, v);
	}
	if (dim != 0 && dim != 1)
		return stmt_fail(c, arg[2]->col, "iota dimension %lld: 0 (rows) or 1 (columns)",
				 (long long)dim);
	if (offset && stmt_scalar_text(c, offset, call->col, text, sizeof(text), 0))
		return c->err;
	if (result(c, d, t.dtype, shape.rows, shape.cols, call->col, v))
		return c->err;
	return stmt_emitted(c, tpurt_kernel_iota(c->k, v->ref, (int)dim,
						 offset ? text : NULL), call->col);
}

/* The shape and dtype of zeros_like's and full_like's argument. */
static int like(struct stmt_ctx *c, const struct stmt_node *n, struct value *x)
{
	if (lower_ref_ok(c, n, x))
		return c->err;
	release(c, x);
	if (x->kind != V_TILE && x->kind != V_REF)
		return stmt_fail(c, n->col, "expected an array or a ref");
	return 0;
}

static int lower_fill(struct stmt_ctx *c, const struct stmt_node *call,
		      enum stmt_fn_kind kind, const struct dest *d,
		      struct value *v)
{
	struct value x, fill, t;
	int shaped = kind == FN_ZEROS || kind == FN_FULL;
	int nfill = kind == FN_FULL || kind == FN_FULL_LIKE;
	const struct stmt_node *dt = call->nargs > 1 + nfill ? call->arg[1 + nfill] :
				     stmt_kwarg(call, "dtype");
	static const char *const kws[] = { "dtype", NULL };

	if (stmt_check_kwargs(c, call, kws) ||
	    stmt_nargs_are(c, call, 1 + nfill, 2 + nfill, "zeros/full"))
		return c->err;
	if (shaped ? stmt_lower_node(c, call->arg[0], NULL, &x) : like(c, call->arg[0], &x))
		return c->err;
	if (shaped && x.kind != V_TUPLE)
		return stmt_fail(c, call->arg[0]->col, "expected a shape (rows, cols)");
	imm_of(&fill, kind == FN_ONES_LIKE ? 1 : 0, 1);
	if (nfill && stmt_lower_node(c, call->arg[1], NULL, &fill))
		return c->err;
	if (shaped)	/* jnp.zeros: float32; jnp.full: the fill's */
		x.dtype = kind == FN_FULL ? fill.dtype : TPURT_F32;
	if (dt) {
		if (stmt_lower_node(c, dt, NULL, &t))
			return c->err;
		if (t.kind != V_DTYPE)
			return stmt_fail(c, dt->col, "expected a dtype");
		x.dtype = t.dtype;
	}
	if (!stmt_is_scalar(&fill) && !(is_tile(&fill) && fill.rows == 1 && fill.cols == 1))
		return stmt_fail(c, call->col, "the fill value must be a scalar (or a (1, 1) array: a reduction over the whole array)");
	if (materialize(c, &fill, x.dtype, x.rows, x.cols, call->col, d, v))
		return c->err;
	keep_nd(v, &x, NULL);
	return 0;
}

/* pl.program_id(d), pl.num_programs(d) */
static int lower_grid_fn(struct stmt_ctx *c, const struct stmt_node *call,
			 const char *name, struct value *v)
{
	char text[32];
	int64_t dim;

	if (stmt_check_kwargs(c, call, NULL) || stmt_nargs_are(c, call, 1, 1, name) ||
	    stmt_const_int(c, call->arg[0], &dim))
		return c->err;
	if (dim < 0 || dim >= c->gs->rank)
		return stmt_fail(c, call->arg[0]->col, "the grid has dimensions 0 to %d",
				 c->gs->rank - 1);
	snprintf(text, sizeof(text), "%s(%lld)", name, (long long)dim);
	stmt_scalar_of(v, text, 0);
	return 0;
}

/* loop_index(d): the trip index of the open loop at depth d */
static int lower_loop_index(struct stmt_ctx *c, const struct stmt_node *call,
			    struct value *v)
{
	int open = tpurt_kernel_loop_depth(c->k);
	char text[32];
	int64_t d;

	if (stmt_check_kwargs(c, call, NULL) ||
	    stmt_nargs_are(c, call, 1, 1, "loop_index") ||
	    stmt_const_int(c, call->arg[0], &d))
		return c->err;
	if (d < 0 || d >= open)
		return stmt_fail(c, call->arg[0]->col, "loop_index(%lld): %d loop%s open here (tpurt_kernel_loop)",
				 (long long)d, open, open == 1 ? " is" : "s are");
	snprintf(text, sizeof(text), "loop_index(%lld)", (long long)d);
	stmt_scalar_of(v, text, 0);
	return 0;
}

/* clip(x, lo, hi) or lax.clamp(lo, x, hi) */
static int lower_clamp(struct stmt_ctx *c, const struct stmt_node *call,
		       int lax_order, const struct dest *d, struct value *v)
{
	struct value x, lo, hi;
	int xi = lax_order ? 1 : 0;

	if (stmt_check_kwargs(c, call, NULL) || stmt_nargs_are(c, call, 3, 3, "clip") ||
	    lower_tile_arg(c, call->arg[xi], &x, "clip") ||
	    stmt_lower_node(c, call->arg[lax_order ? 0 : 1], NULL, &lo) ||
	    stmt_lower_node(c, call->arg[2], NULL, &hi))
		return c->err;
	if (lo.kind != V_IMM || hi.kind != V_IMM)
		return stmt_fail(c, call->col, "clip's bounds must be constants");
	if (imm_bits_ok(c, lo.imm, call->col) || imm_bits_ok(c, hi.imm, call->col))
		return c->err;
	release(c, &x);
	if (result(c, d, x.dtype, x.rows, x.cols, call->col, v) ||
	    stmt_emitted(c, tpurt_kernel_clamp(c->k, v->ref, x.ref, (float)lo.imm,
					       (float)hi.imm), call->col))
		return c->err;
	keep_nd(v, &x, NULL);
	return 0;
}

/*
 * x >> y and jnp.right_shift: arithmetic on signed types, logical on
 * unsigned ones (NumPy's, and jnp's); lax.shift_right_arithmetic keeps the
 * device's SHR, which copies a uint32's top bit in as XLA's does.
 */
static int right_shift_fn(int fn, const struct value *a, const struct value *b)
{
	enum tpurt_dtype t = promote(a, b);

	if (fn == TPU_BINARY_SHR && (t == TPURT_UINT8 || t == TPURT_UINT32))
		return TPU_BINARY_SHR_LOGICAL;
	return fn;
}

static int lower_call(struct stmt_ctx *c, const struct stmt_node *call,
		      const struct dest *d, struct value *v)
{
	const struct stmt_node *f = call->base;
	struct stmt_fn fn;
	struct value x, t;

	if (f->kind == SN_ATTR && stmt_name_is(f, "astype")) {
		if (stmt_nargs_are(c, call, 1, 1, "astype") ||
		    stmt_lower_node(c, call->arg[0], NULL, &t))
			return c->err;
		if (t.kind != V_DTYPE)
			return stmt_fail(c, call->arg[0]->col, "expected a dtype");
		/* x written into the target only if it has the target's dtype */
		if (stmt_lower_node(c, f->base, d && d->dtype == t.dtype ? d : NULL, &x))
			return c->err;
		return lower_cast(c, &x, t.dtype, d, call->col, v);
	}
	if (f->kind != SN_NAME)
		return stmt_fail(c, f->col, "not a function");
	fn = tpurt_stmt_function(f->name, f->len);
	switch (fn.kind) {
	case FN_UNARY:
		if (stmt_check_kwargs(c, call, NULL) ||
		    stmt_nargs_are(c, call, 1, 1, tpurt_stmt_unary_name((unsigned int)fn.fn)) ||
		    stmt_lower_node(c, call->arg[0], NULL, &x))
			return c->err;
		return lower_unary(c, fn.fn, &x, d, call->col, v);
	case FN_BINARY: {
		struct value y;

		if (stmt_check_kwargs(c, call, NULL) ||
		    stmt_nargs_are(c, call, 2, 2, tpurt_stmt_binary_name((unsigned int)fn.fn)) ||
		    stmt_lower_node(c, call->arg[0], NULL, &x) || stmt_lower_node(c, call->arg[1], NULL, &y))
			return c->err;
		if (!(f->len == 22 && !strncmp(f->name, "shift_right_arithmetic", 22)))
			fn.fn = right_shift_fn(fn.fn, &x, &y);
		return stmt_lower_binary(c, fn.fn, 0, &x, &y, d, call->col, v);
	}
	case FN_REDUCE:
		return lower_reduce(c, call, fn.fn, NULL, d, v, NULL);
	case FN_MEAN:
		return lower_mean(c, call, d, v);
	case FN_WHERE:
		return lower_where(c, call, d, v);
	case FN_DOT:
		if (stmt_nargs_are(c, call, 2, 2, "dot"))
			return c->err;
		return lower_dot(c, call, call->arg[0], call->arg[1], d, 0, v);
	case FN_IOTA:
		return lower_iota(c, call, NULL, d, v);
	case FN_TRANSPOSE:
		return lower_transpose_call(c, call, fn.fn, d, v);
	case FN_ROLL:
		return lower_roll(c, call, d, v);
	case FN_GATHER:
		return lower_take_along_axis(c, call, d, v);
	case FN_PRNG_BITS:
		return lower_prng_bits(c, call, d, v);
	case FN_PRNG_SEED:
		return stmt_fail(c, f->col, "pltpu.prng_seed is a statement of its own, not a value");
	case FN_DEBUG_PRINT:
		return stmt_fail(c, f->col, "pl.debug_print is a statement of its own, not a value");
	case FN_CONCATENATE:
		return lower_concatenate(c, call, v);
	case FN_RESHAPE:
		return lower_reshape(c, call, v);
	case FN_BITCAST:
		return lower_bitcast(c, call, d, v);
	case FN_CLIP:
	case FN_CLAMP:
		return lower_clamp(c, call, fn.kind == FN_CLAMP, d, v);
	case FN_ZEROS_LIKE:
	case FN_ONES_LIKE:
	case FN_FULL_LIKE:
	case FN_ZEROS:
	case FN_FULL:
		return lower_fill(c, call, fn.kind, d, v);
	case FN_PROGRAM_ID:
		return lower_grid_fn(c, call, "program_id", v);
	case FN_NUM_PROGRAMS:
		return lower_grid_fn(c, call, "num_programs", v);
	case FN_LOOP_INDEX:
		return lower_loop_index(c, call, v);
	case FN_SEM_READ:
		return stmt_lower_semaphore_read(c, call, v);
	case FN_ASYNC_COPY:
	case FN_SYNC_COPY:
	case FN_SEM_SIGNAL:
	case FN_SEM_WAIT:
		return stmt_fail(c, f->col, "'%.*s' is a statement of its own, not a value",
				 f->len, f->name);
	case FN_DS:
		return stmt_fail(c, f->col, "pl.ds slices a window: ref.at[pl.ds(start, size)]");
	default:
		return stmt_fail(c, f->col, "unknown function '%.*s'", f->len, f->name);
	}
}

/* --- operators --- */

struct op_entry {
	const char *op;
	int fn;
};

static int operator_fn(const struct stmt_node *n)
{
	static const struct op_entry ops[] = {
		{ "+", TPU_BINARY_ADD }, { "-", TPU_BINARY_SUB },
		{ "*", TPU_BINARY_MUL }, { "/", TPU_BINARY_DIV },
		{ "//", TPU_BINARY_DIV }, { "%", TPU_BINARY_MOD },
		{ "**", TPU_BINARY_POW }, { "==", TPU_BINARY_EQ },
		{ "!=", TPU_BINARY_NE }, { "<", TPU_BINARY_LT },
		{ "<=", TPU_BINARY_LE }, { ">", TPU_BINARY_GT },
		{ ">=", TPU_BINARY_GE }, { "&", TPU_BINARY_AND },
		{ "|", TPU_BINARY_OR }, { "and", TPU_BINARY_AND },
		{ "or", TPU_BINARY_OR }, { "^", TPU_BINARY_BITXOR },
		{ "<<", TPU_BINARY_SHL }, { ">>", TPU_BINARY_SHR },
	};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (stmt_name_is(n, ops[i].op))
			return ops[i].fn;
	return -1;
}

static int is_iota_call(const struct stmt_node *n)
{
	return n->kind == SN_CALL && n->base->kind == SN_NAME &&
	       tpurt_stmt_function(n->base->name, n->base->len).kind == FN_IOTA;
}

/* An integer of its own dtype (not a Python number's, not a mask). */
static int strong_int(const struct value *x)
{
	return !x->weak && !is_float(x->dtype) && x->dtype != TPURT_BOOL;
}

/*
 * An integer element of SMEM (its ref's dtype). Scalar-core expressions
 * are not: their compares are int32 0 or 1 there, and & | of them stay
 * logical (pl.when conditions).
 */
static int smem_int(const struct value *x)
{
	return x->kind == V_SMEM && !is_float(x->dtype) && x->dtype != TPURT_BOOL;
}

/*
 * & | ^ as Python and jnp mean them: bitwise when an operand is an integer
 * array or scalar, logical on masks (^ of masks is !=).
 */
static int bitwise_or_logical(const struct stmt_node *n, int fn,
			      const struct value *a, const struct value *b)
{
	int ints = strong_int(a) || strong_int(b) || smem_int(a) || smem_int(b);

	if (stmt_name_is(n, "&"))
		return ints ? TPU_BINARY_BITAND : TPU_BINARY_AND;
	if (stmt_name_is(n, "|"))
		return ints ? TPU_BINARY_BITOR : TPU_BINARY_OR;
	if (stmt_name_is(n, "^") && !ints && (is_tile(a) || is_tile(b)))
		return TPU_BINARY_NE;
	return fn;
}

static int lower_binop(struct stmt_ctx *c, const struct stmt_node *n,
		       const struct dest *d, struct value *v)
{
	struct value a, b;
	int fn = operator_fn(n);

	if (stmt_name_is(n, "@"))
		return lower_dot(c, NULL, n->arg[0], n->arg[1], d, 0, v);
	/* iota(...) + offset: the offset is the op's own */
	if (fn == TPU_BINARY_ADD && is_iota_call(n->arg[0])) {
		if (stmt_lower_node(c, n->arg[1], NULL, &b))
			return c->err;
		if (b.kind == V_SCALAR || (b.kind == V_IMM && b.imm == floor(b.imm)))
			return lower_iota(c, n->arg[0], &b, d, v);
		if (stmt_lower_node(c, n->arg[0], NULL, &a))
			return c->err;
	} else if (stmt_lower_node(c, n->arg[0], NULL, &a) || stmt_lower_node(c, n->arg[1], NULL, &b)) {
		return c->err;
	}
	if ((stmt_name_is(n, "and") || stmt_name_is(n, "or")) && (is_tile(&a) || is_tile(&b)))
		return stmt_fail(c, n->col, "'%.*s' of arrays: use & or |", n->len,
				 n->name);
	fn = right_shift_fn(bitwise_or_logical(n, fn, &a, &b), &a, &b);
	return stmt_lower_binary(c, fn, stmt_name_is(n, "//"), &a, &b, d, n->col, v);
}

static int lower_unop(struct stmt_ctx *c, const struct stmt_node *n,
		      const struct dest *d, struct value *v)
{
	struct value x;

	if (stmt_lower_node(c, n->arg[0], NULL, &x))
		return c->err;
	if (stmt_name_is(n, "+"))
		return *v = x, 0;
	if (stmt_name_is(n, "-"))
		return lower_unary(c, TPU_UNARY_NEG, &x, d, n->col, v);
	if (is_tile(&x) && !is_float(x.dtype) && x.dtype != TPURT_BOOL) {
		struct value ones;	/* ~x of integers: x ^ -1 */

		imm_of(&ones, -1, 1);
		return stmt_lower_binary(c, TPU_BINARY_BITXOR, 0, &x, &ones, d,
					 n->col, v);
	}
	if (is_tile(&x) && x.dtype != TPURT_BOOL)
		return stmt_fail(c, n->col, "~ of %s: only masks (bool) and integers are inverted",
				 stmt_dtype_str(x.dtype));
	if (stmt_is_scalar(&x) && x.kind != V_IMM) {
		char t[TPURT_TEXT_MAX - 4];

		if (stmt_scalar_text(c, &x, n->col, t, sizeof(t), 1))
			return c->err;
		*v = x;
		v->kind = V_SCALAR;
		v->compound = 1;
		snprintf(v->text, sizeof(v->text), "not %s", t);
		return 0;
	}
	return lower_unary(c, TPU_UNARY_NOT, &x, d, n->col, v);
}

/* --- names, refs and subscripts --- */

static int lower_local(struct stmt_ctx *c, const struct tpurt_kernel_local *l,
		       struct value *v)
{
	const struct tpurt_kernel_temp *t;
	struct ref_info r;

	switch (l->kind) {
	case TPURT_LOCAL_COPY:
		return stmt_fail(c, 0, "'%s' is a copy descriptor: use %s.start() or %s.wait()",
				 l->name, l->name, l->name);
	case TPURT_LOCAL_CONST:
		imm_of(v, l->value, l->is_int);
		return 0;
	case TPURT_LOCAL_SCALAR:	/* "slot_ref[0]" needs no parentheses */
		stmt_scalar_of(v, l->text, strcspn(l->text, " +-*/%<>=!") < strlen(l->text));
		return 0;
	case TPURT_LOCAL_INPUT:
		stmt_find_ref(c, l->ref, (int)strlen(l->ref), &r);
		stmt_tile_of(v, r.name, r.rows, r.cols, r.dtype);
		nd_of_ref(v, &r);
		return 0;
	default:
		t = &c->k->temp[l->temp];
		stmt_tile_of(v, t->name, t->rows, t->cols, t->dtype);
		if (t->rank > 2) {
			v->nd = t->rank;
			memcpy(v->shape, t->shape, sizeof(v->shape));
		}
		return 0;
	}
}

static int lower_name(struct stmt_ctx *c, const struct stmt_node *n,
		      struct value *v)
{
	const struct tpurt_kernel_local *l = stmt_find_local(c, n->name, n->len);
	struct ref_info r;
	int dt;

	if (l && l->kind == TPURT_LOCAL_COPY)
		return stmt_fail(c, n->col, "'%s' is a copy descriptor: use %s.start() or %s.wait()",
				 l->name, l->name, l->name);
	if (l && l->stale)
		return stmt_stale_local(c, l, n->col);
	if (l)
		return lower_local(c, l, v);
	if (stmt_find_ref(c, n->name, n->len, &r)) {
		memset(v, 0, sizeof(*v));
		v->kind = V_REF;
		v->temp = -1;
		snprintf(v->ref, sizeof(v->ref), "%s", r.name);
		v->rows = r.rows;
		v->cols = r.cols;
		v->dtype = r.dtype;
		if (!r.has_dtype)
			return stmt_fail(c, n->col, "the dtype of '%s' is not declared: tpurt_grid_spec_set_dtype()",
					 r.name);
		return 0;
	}
	dt = tpurt_stmt_dtype(n->name, n->len);
	if (dt >= 0) {
		memset(v, 0, sizeof(*v));
		v->kind = V_DTYPE;
		v->temp = -1;
		v->dtype = (enum tpurt_dtype)dt;
		return 0;
	}
	if (stmt_name_is(n, "inf") || stmt_name_is(n, "nan")) {
		imm_of(v, stmt_name_is(n, "inf") ? INFINITY : NAN, 0);
		return 0;
	}
	if (stmt_name_is(n, "True") || stmt_name_is(n, "False")) {
		imm_of(v, stmt_name_is(n, "True"), 1);
		return 0;
	}
	if (tpurt_stmt_function(n->name, n->len).kind != FN_NONE)
		return stmt_fail(c, n->col, "'%.*s' is a function: call it", n->len, n->name);
	return stmt_fail(c, n->col, "unknown name '%.*s'", n->len, n->name);
}

/* @v becomes an element of SMEM ref @r; the caller writes its index text. */
static void smem_value(struct value *v, const struct ref_info *r)
{
	memset(v, 0, sizeof(*v));
	v->kind = V_SMEM;
	v->temp = -1;
	v->weak = 1;
	v->dtype = r->dtype;
	snprintf(v->ref, sizeof(v->ref), "%s", r->name);
}

/*
 * s[i, j, k, ...] of an SMEM ref of rank 3 or 4 (or 2 with squeezed
 * dimensions): one index per dimension the kernel sees, flattened
 * row-major. Without this the first two indices alone picked the word.
 */
static int smem_read_nd(struct stmt_ctx *c, const struct stmt_node *n,
			const struct ref_info *r, const int64_t *ext, int nvis,
			struct value *v)
{
	char flat[TPURT_TEXT_MAX], t[TPURT_TEXT_MAX], acc[TPURT_TEXT_MAX];
	struct value x;

	if (n->nargs != nvis)
		return stmt_fail(c, n->col, "'%s' has %d dimensions: index each, not %d",
				 r->name, nvis, n->nargs);
	for (int k = 0; k < n->nargs; k++) {
		if (stmt_lower_node(c, n->arg[k], NULL, &x) ||
		    stmt_scalar_text(c, &x, n->arg[k]->col, t, sizeof(t), 1))
			return c->err;
		if (!k)
			snprintf(flat, sizeof(flat), "%s", t);
		else if (snprintf(acc, sizeof(acc), "(%s) * %lld + %s", flat,
				  (long long)ext[k], t) >= (int)sizeof(acc))
			return stmt_fail(c, n->col, "SMEM index too long");
		else
			memcpy(flat, acc, sizeof(flat));
	}
	smem_value(v, r);
	snprintf(v->text, sizeof(v->text), "%s", flat);
	return 0;
}

/* An SMEM element: s[i] or s[i, j] (row-major in s's declared shape). */
int stmt_lower_smem_read(struct stmt_ctx *c, const struct stmt_node *n,
			 const struct ref_info *r, struct value *v)
{
	struct value i, j;
	char ti[TPURT_TEXT_MAX], tj[TPURT_TEXT_MAX];
	int64_t ext[TPURT_MAX_RANK];
	int nvis = 0;

	for (int d = 0; d < r->rank && d < TPURT_MAX_RANK; d++)
		if (!(r->hidden & (1u << d)))
			ext[nvis++] = r->extent[d];
	if (n->nargs > 2 || (n->nargs == 2 && !r->rank2 && nvis == 2))
		return smem_read_nd(c, n, r, ext, nvis, v);
	if (n->nargs == 2 && !r->rank2)
		return stmt_fail(c, n->col, "'%s' is indexed [i, j] but is not declared 2-D", r->name);
	if (n->nargs == 1 && r->rank2)
		return stmt_fail(c, n->col, "'%s' is 2-D: index it [i, j]", r->name);
	if (stmt_lower_node(c, n->arg[0], NULL, &i) ||
	    stmt_scalar_text(c, &i, n->arg[0]->col, ti, sizeof(ti), n->nargs == 2))
		return c->err;
	smem_value(v, r);
	if (n->nargs == 1) {
		snprintf(v->text, sizeof(v->text), "%s", ti);
		return 0;
	}
	if (stmt_lower_node(c, n->arg[1], NULL, &j) ||
	    stmt_scalar_text(c, &j, n->arg[1]->col, tj, sizeof(tj), 1))
		return c->err;
	if (snprintf(v->text, sizeof(v->text), "%s * %lld + %s", ti,
		     (long long)r->cols, tj) >= (int)sizeof(v->text))
		return stmt_fail(c, n->col, "SMEM index too long");
	return 0;
}

/* One constant index of a value's dimension of @extent: a:b, :, i. */
static int value_index_item(struct stmt_ctx *c, const struct stmt_node *n,
			    int64_t extent, int64_t *start, int64_t *size,
			    int *dropped)
{
	int64_t lo = 0, hi = extent;

	*dropped = n->kind != SN_SLICE;
	if (n->kind == SN_SLICE) {
		if (n->arg[2])
			return stmt_fail(c, n->col, "a slice with a step of a value is not supported; slice the ref (x_ref[a:b:s])");
		if ((n->arg[0] && stmt_const_int(c, n->arg[0], &lo)) ||
		    (n->arg[1] && stmt_const_int(c, n->arg[1], &hi)))
			return c->err;
	} else {
		if (stmt_const_int(c, n, &lo))
			return c->err;
		hi = (lo < 0 ? lo + extent : lo) + 1;
	}
	lo = lo < 0 ? lo + extent : lo;
	hi = hi < 0 ? hi + extent : hi > extent ? extent : hi;
	if (lo < 0 || lo >= hi)
		return stmt_fail(c, n->col, "index out of the value's %lld elements, or an empty slice",
				 (long long)extent);
	*start = lo;
	*size = hi - lo;
	return 0;
}

/*
 * x[i], x[i, a:b], x[:, a:b] of a value of rank 3 or 4 (constant indices),
 * in its own dimensions: a window of the ref or temporary holding it,
 * which has them too. A window the body cannot take whole (x[:, a:b], a
 * column) is gathered into a temporary by the DMA engine.
 */
static int lower_nd_index(struct stmt_ctx *c, const struct stmt_node *n,
			  struct value *v)
{
	char text[TPURT_TEXT_MAX], dst[TPURT_TEXT_MAX];
	struct tpurt_window_fit fit;
	struct tpurt_ref_text rt;
	struct value x = *v;
	size_t at;

	if (n->nargs > x.nd)
		return stmt_fail(c, n->col, "a value of rank %d: at most %d indices", x.nd, x.nd);
	if (!stmt_nd_is_buffer(c, &x)) {	/* a window, or a 2-D temporary: into an N-D one */
		if (stmt_new_tile_shaped(c, x.dtype, x.nd, x.shape, n->col, v) ||
		    stmt_emitted(c, tpurt_kernel_store(c->k, v->ref, x.ref), n->col))
			return c->err;
		release(c, &x);
		v->nd = x.nd;
		memcpy(v->shape, x.shape, sizeof(v->shape));
		x = *v;
	}
	at = (size_t)snprintf(text, sizeof(text), "%s.at[", x.ref);
	for (int d = 0; d < x.nd; d++) {
		int64_t start = 0, size = x.shape[d];
		int dropped = 0;

		if (d < n->nargs && value_index_item(c, n->arg[d], x.shape[d], &start,
						     &size, &dropped))
			return c->err;
		if (at < sizeof(text))
			at += (size_t)snprintf(text + at, sizeof(text) - at,
					       dropped ? "%s%lld" : "%spl.ds(%lld, %lld)",
					       d ? ", " : "", (long long)start,
					       (long long)size);
	}
	if (at + 2 > sizeof(text))
		return stmt_fail(c, n->col, "window text too long");
	strcat(text, "]");
	if (tpurt_ref_parse(text, "value index", &rt) ||
	    tpurt_window_fit(&rt, "value index", x.nd, x.shape, 0, 0, &fit))
		return stmt_fail(c, n->col, "%s", tpurt_last_error());
	if (fit.contiguous) {
		stmt_tile_of(v, text, fit.rows, fit.cols, x.dtype);
	} else {
		if ((fit.ndims > 2 ?
		     stmt_new_tile_shaped(c, x.dtype, fit.ndims, fit.shape, n->col, v) :
		     stmt_new_tile(c, x.dtype, fit.rows, fit.cols, n->col, v)))
			return c->err;
		snprintf(dst, sizeof(dst), fit.ndims == 1 ? "%s.at[0]" : "%s", v->ref);
		if (stmt_emitted(c, tpurt_kernel_sync_copy(c->k, text, dst), n->col))
			return c->err;
		release(c, &x);
	}
	if (fit.ndims > 2) {
		v->nd = fit.ndims;
		memcpy(v->shape, fit.shape, (size_t)fit.ndims * sizeof(*fit.shape));
	}
	return 0;
}

/*
 * x[i, j], x[a:b], x[:, j] of a value, constant indices: a window of the
 * temporary holding it (a copy first if x is itself a window). Indexing
 * drops a dimension as jnp's does, so x[:, j] is a (rows,) vector: a row.
 */
static int lower_value_index(struct stmt_ctx *c, const struct stmt_node *n,
			     struct value *v)
{
	int64_t r0, nr, c0 = 0, nc = v->cols;
	int drop_r, drop_c = 0;
	struct value x = *v;

	if (v->nd > 2)
		return lower_nd_index(c, n, v);
	if (n->nargs > 2)
		return stmt_fail(c, n->col, "a value is 2-D: at most two indices");
	if (value_index_item(c, n->arg[0], x.rows, &r0, &nr, &drop_r) ||
	    (n->nargs == 2 &&
	     value_index_item(c, n->arg[1], x.cols, &c0, &nc, &drop_c)))
		return c->err;
	if (nr == x.rows && nc == x.cols)
		return 0;
	if (strchr(x.ref, '.') || strchr(x.ref, '[')) {
		if (result(c, NULL, x.dtype, x.rows, x.cols, n->col, v) ||
		    stmt_emitted(c, tpurt_kernel_store(c->k, v->ref, x.ref), n->col))
			return c->err;
		release(c, &x);
		x = *v;
	}
	v->rows = nr;
	v->cols = nc;
	if (snprintf(v->ref, sizeof(v->ref), "%s.at[pl.ds(%lld, %lld), pl.ds(%lld, %lld)]",
		     x.ref, (long long)r0, (long long)nr, (long long)c0,
		     (long long)nc) >= (int)sizeof(v->ref))
		return stmt_fail(c, n->col, "window text too long");
	if (drop_c && !drop_r && nr > 1) {
		/* a column picked out of the rows: jnp's (rows,), viewed as a row */
		return transposed(c, *v, NULL, n->col, v);
	}
	return 0;
}

static int lower_index(struct stmt_ctx *c, const struct stmt_node *n,
		       struct value *v)
{
	const struct stmt_node *b = n->base;
	struct ref_info r;

	if (b->kind == SN_NAME && !stmt_find_local(c, b->name, b->len) &&
	    stmt_find_ref(c, b->name, b->len, &r)) {
		if (r.kind == R_PREFETCH || r.kind == R_SMEM) {
			if (!n->nargs)
				return stmt_fail(c, n->col, "'%s' is in SMEM: read one element, %s[index]",
						 r.name, r.name);
			return stmt_lower_smem_read(c, n, &r, v);
		}
		if (r.kind == R_SEM)
			return stmt_fail(c, n->col, "'%s' is a semaphore: read it with pltpu.semaphore_read(%s.at[i])",
					 r.name, r.name);
		if (r.kind == R_ANY)
			return stmt_fail(c, n->col, "'%s' is in HBM (pl.ANY): copy it into VMEM with pltpu.make_async_copy or sync_copy",
					 r.name);
		if (n->nargs)
			return stmt_lower_window_read(c, n, v);	/* buf[slot] */
		if (!r.has_dtype)
			return stmt_fail(c, n->col, "the dtype of '%s' is not declared: tpurt_grid_spec_set_dtype()",
					 r.name);
		stmt_tile_of(v, r.name, r.rows, r.cols, r.dtype);
		nd_of_ref(v, &r);
		return 0;
	}
	if (!n->nargs && b->kind == SN_INDEX && b->nargs && b->base->kind == SN_ATTR &&
	    stmt_name_is(b->base, "at"))
		return stmt_lower_window_read(c, b, v);	/* buf.at[slot][...] */
	if (stmt_lower_node(c, b, NULL, v))
		return c->err;
	if (!is_tile(v))
		return stmt_fail(c, n->col, "only [...] of an array is supported");
	return n->nargs ? lower_value_index(c, n, v) : 0;
}

/* @x transposed by @perm (of its rank; NULL: reversed, as x.T). */
static int transpose_value(struct stmt_ctx *c, struct value x, const int *perm,
			   int col, const struct dest *d, struct value *v)
{
	int rev[TPURT_MAX_RANK], n = x.nd > 2 ? x.nd : 2;

	if (!perm) {
		for (int i = 0; i < n; i++)
			rev[i] = n - 1 - i;
		perm = rev;
	}
	if (x.nd > 2)
		return stmt_nd_transpose(c, &x, perm, col, v);
	if (!perm[0])
		return *v = x, 0;	/* (0, 1): x as it is */
	return transposed(c, x, d, col, v);
}

/* x.T: into another ref (the device moves elements). */
static int lower_transpose(struct stmt_ctx *c, const struct stmt_node *xn,
			   int col, const struct dest *d, struct value *v)
{
	struct value x;

	if (lower_tile_arg(c, xn, &x, "transpose"))
		return c->err;
	return transpose_value(c, x, NULL, col, d, v);
}

/* A constant axis of a value of @rank, negative ones counted from the end. */
static int rank_axis(struct stmt_ctx *c, const struct stmt_node *n, int rank, int *axis)
{
	int64_t a;

	if (stmt_const_int(c, n, &a))
		return c->err;
	if (a < -rank || a >= rank)
		return stmt_fail(c, n->col, "axis %lld of a value of rank %d", (long long)a, rank);
	*axis = (int)(a < 0 ? a + rank : a);
	return 0;
}

/*
 * jnp.transpose(x[, axes]), lax.transpose(x, permutation) (@kind 0),
 * jnp.swapaxes(x, a, b) (1), jnp.moveaxis(x, source, destination) (2).
 */
static int lower_transpose_call(struct stmt_ctx *c, const struct stmt_node *call,
				int kind, const struct dest *d, struct value *v)
{
	static const char *const kws[] = { "axes", "permutation", NULL };
	static const char *const names[] = { "transpose", "swapaxes", "moveaxis" };
	const struct stmt_node *axes = call->nargs == 2 ? call->arg[1] :
				       stmt_kwarg(call, "axes");
	int perm[TPURT_MAX_RANK], n, a0, a1;
	unsigned int seen = 0;
	struct value x;

	if (!axes)
		axes = stmt_kwarg(call, "permutation");
	if (stmt_check_kwargs(c, call, kind ? NULL : kws) ||
	    stmt_nargs_are(c, call, kind ? 3 : 1, kind ? 3 : 2, names[kind]) ||
	    lower_tile_arg(c, call->arg[0], &x, names[kind]))
		return c->err;
	n = x.nd > 2 ? x.nd : 2;
	if (kind) {
		if (rank_axis(c, call->arg[1], n, &a0) || rank_axis(c, call->arg[2], n, &a1))
			return c->err;
		for (int i = 0, j = 0; i < n; i++) {
			if (kind == 1)
				perm[i] = i == a0 ? a1 : i == a1 ? a0 : i;
			else if (i == a1)
				perm[i] = a0;
			else {
				j += j == a0;	/* the moved axis is taken at a1 */
				perm[i] = j++;
			}
		}
		return transpose_value(c, x, perm, call->col, d, v);
	}
	if (!axes)
		return transpose_value(c, x, NULL, call->col, d, v);
	if (axes->kind != SN_TUPLE || axes->nargs != n)
		return stmt_fail(c, axes->col, "transpose of a value of rank %d takes a permutation of its %d axes",
				 n, n);
	for (int i = 0; i < n; i++) {
		if (rank_axis(c, axes->arg[i], n, &perm[i]))
			return c->err;
		if (seen >> perm[i] & 1)
			return stmt_fail(c, axes->arg[i]->col, "transpose: axis %d repeated: not a permutation",
					 perm[i]);
		seen |= 1u << perm[i];
	}
	return transpose_value(c, x, perm, call->col, d, v);
}

/* pltpu.roll(x, shift, axis), jnp.roll(x, shift, axis): a scalar shift. */
static int lower_roll(struct stmt_ctx *c, const struct stmt_node *call,
		      const struct dest *d, struct value *v)
{
	static const char *const kws[] = { "shift", "axis", NULL };
	const struct stmt_node *sn = call->nargs >= 2 ? call->arg[1] :
				     stmt_kwarg(call, "shift");
	const struct stmt_node *an = call->nargs == 3 ? call->arg[2] :
				     stmt_kwarg(call, "axis");
	char text[TPURT_TEXT_MAX];
	struct value x, s;
	int axis;

	if (stmt_check_kwargs(c, call, kws) || stmt_nargs_are(c, call, 1, 3, "roll"))
		return c->err;
	if (!sn || !an)
		return stmt_fail(c, call->col, "roll takes x, shift and axis (a flattened roll is not supported)");
	if (stmt_lower_node(c, sn, NULL, &s))
		return c->err;
	if (!stmt_is_scalar(&s))
		return stmt_fail(c, sn->col, "roll's shift is a scalar");
	if (stmt_smem_scalar_ok(c, &s, sn->col) ||
	    stmt_scalar_text(c, &s, sn->col, text, sizeof(text), 0) ||
	    lower_tile_arg(c, call->arg[0], &x, "roll"))
		return c->err;
	if (x.nd > 2) {
		if (rank_axis(c, an, x.nd, &axis))
			return c->err;
		return stmt_nd_roll(c, &x, axis, &s, text, call->col, v);
	}
	if (const_axis(c, an, &axis))
		return c->err;
	if (d && !strcmp(d->name, x.ref))
		d = NULL;
	if (result(c, d, x.dtype, x.rows, x.cols, call->col, v))
		return c->err;
	release(c, &x);
	return stmt_emitted(c, tpurt_kernel_roll(c->k, v->ref, x.ref, text, axis),
			    call->col);
}

/* take_along_axis's mode=fill or mode=promise_in_bounds (names: no strings). */
static int gather_mode(struct stmt_ctx *c, const struct stmt_node *m,
		       enum tpurt_gather_mode *mode)
{
	*mode = TPURT_GATHER_FILL;
	if (!m || (m->kind == SN_NAME && (stmt_name_is(m, "fill") || stmt_name_is(m, "None"))))
		return 0;
	if (m->kind == SN_NAME && stmt_name_is(m, "promise_in_bounds")) {
		*mode = TPURT_GATHER_PROMISE_IN_BOUNDS;
		return 0;
	}
	return stmt_fail(c, m->col, "take_along_axis mode: fill or promise_in_bounds (Pallas TPU gathers have no clip or wrap mode)");
}

/*
 * jnp.take_along_axis(x, idx, axis, mode=, fill_value=): a device gather
 * within the tile, int32 indices of the result's shape.
 */
static int lower_take_along_axis(struct stmt_ctx *c, const struct stmt_node *call,
				 const struct dest *d, struct value *v)
{
	static const char *const kws[] = { "axis", "mode", "fill_value", NULL };
	const struct stmt_node *an = call->nargs == 3 ? call->arg[2] :
				     stmt_kwarg(call, "axis");
	const struct stmt_node *fn = stmt_kwarg(call, "fill_value");
	enum tpurt_gather_mode mode;
	struct value x, idx, fv;
	float fill, *fillp = NULL;
	int axis;

	if (stmt_check_kwargs(c, call, kws) ||
	    stmt_nargs_are(c, call, 2, 3, "take_along_axis"))
		return c->err;
	if (!an)
		return stmt_fail(c, call->col, "take_along_axis takes an axis (axis=None gathers from the flattened array, which is not supported)");
	if (const_axis(c, an, &axis) || gather_mode(c, stmt_kwarg(call, "mode"), &mode))
		return c->err;
	if (fn && !(fn->kind == SN_NAME && stmt_name_is(fn, "None"))) {
		if (stmt_lower_node(c, fn, NULL, &fv))
			return c->err;
		if (fv.kind != V_IMM)
			return stmt_fail(c, fn->col, "take_along_axis fill_value is a Python number");
		if (mode != TPURT_GATHER_FILL)
			return stmt_fail(c, fn->col, "take_along_axis fill_value needs mode fill");
		fill = (float)fv.imm;
		fillp = &fill;
	}
	if (lower_tile_arg(c, call->arg[0], &x, "take_along_axis") ||
	    lower_tile_arg(c, call->arg[1], &idx, "take_along_axis"))
		return c->err;
	if (idx.dtype != TPURT_INT32)
		return stmt_fail(c, call->arg[1]->col, "take_along_axis indices are %s, must be int32",
				 stmt_dtype_str(idx.dtype));
	if (axis ? idx.rows != x.rows : idx.cols != x.cols) {
		char sx[48], si[48];

		return stmt_fail(c, call->arg[1]->col, "take_along_axis along axis %d: indices %s and array %s differ in the other axis (no broadcasting)",
				 axis, shape_str(&idx, si), shape_str(&x, sx));
	}
	if (d && (!strcmp(d->name, x.ref) || !strcmp(d->name, idx.ref)))
		d = NULL;
	if (result(c, d, x.dtype, idx.rows, idx.cols, call->col, v))
		return c->err;
	release(c, &x);
	release(c, &idx);
	return stmt_emitted(c, tpurt_kernel_gather(c->k, v->ref, x.ref, idx.ref,
						   axis, mode, fillp), call->col);
}

/*
 * pltpu.prng_random_bits((rows, cols)): the core PRNG's next draw, int32
 * as JAX's primitive gives (bitcast to uint32 for the same bits unsigned).
 */
static int lower_prng_bits(struct stmt_ctx *c, const struct stmt_node *call,
			   const struct dest *d, struct value *v)
{
	struct value x;

	if (stmt_check_kwargs(c, call, NULL) ||
	    stmt_nargs_are(c, call, 1, 1, "prng_random_bits") ||
	    stmt_lower_node(c, call->arg[0], NULL, &x))
		return c->err;
	if (x.kind != V_TUPLE || x.nd)
		return stmt_fail(c, call->arg[0]->col, "prng_random_bits takes a shape (rows, cols)");
	if (result(c, d, TPURT_INT32, x.rows, x.cols, call->col, v))
		return c->err;
	return stmt_emitted(c, tpurt_kernel_prng_random_bits(c->k, v->ref), call->col);
}

/* pltpu.prng_seed(s0, ...): 1 to 4 int32 scalars key the core's PRNG. */
int stmt_lower_prng_seed(struct stmt_ctx *c, const struct stmt_node *call)
{
	char text[TPU_PRNG_MAX_SEEDS][TPURT_TEXT_MAX];
	const char *seeds[TPU_PRNG_MAX_SEEDS];
	struct value s;

	if (stmt_check_kwargs(c, call, NULL))
		return c->err;
	if (call->nargs < 1 || call->nargs > TPU_PRNG_MAX_SEEDS)
		return stmt_fail(c, call->col, "prng_seed takes 1 to %d seeds, not %d",
				 TPU_PRNG_MAX_SEEDS, call->nargs);
	for (int i = 0; i < call->nargs; i++) {
		const struct stmt_node *a = call->arg[i];

		if (stmt_lower_node(c, a, NULL, &s))
			return c->err;
		if (!stmt_is_scalar(&s))
			return stmt_fail(c, a->col, "prng_seed's seeds are scalars (program ids, SMEM values, constants)");
		if (s.dtype != TPURT_INT32 && s.kind != V_IMM)
			return stmt_fail(c, a->col, "prng_seed's seeds are int32, this one is %s",
					 stmt_dtype_str(s.dtype));
		if (stmt_smem_scalar_ok(c, &s, a->col) ||
		    stmt_scalar_text(c, &s, a->col, text[i], sizeof(text[i]), 0))
			return c->err;
		seeds[i] = text[i];
	}
	return stmt_emitted(c, tpurt_kernel_prng_seed(c->k, call->nargs, seeds), call->col);
}

/* A string node's text with \\, \" and \n taken as Python takes them. */
static int unescape(struct stmt_ctx *c, const struct stmt_node *s, char *out,
		    size_t len)
{
	size_t at = 0;

	for (int i = 0; i < s->len; i++) {
		char ch = s->name[i];

		if (ch == '\\' && i + 1 < s->len) {
			ch = s->name[++i];
			ch = ch == 'n' ? '\n' : ch == 't' ? '\t' : ch;
		}
		if (at + 1 == len)
			return stmt_fail(c, s->col, "debug_print's format is longer than %zu characters",
					 len - 1);
		out[at++] = ch;
	}
	out[at] = 0;
	return 0;
}

/* A comparison or logical operator: a scalar the scalar core gives as 0 or 1. */
static int is_truth(const struct stmt_node *n)
{
	static const char *const ops[] = { "==", "!=", "<", "<=", ">", ">=",
					   "and", "or", "not" };

	if (n->kind != SN_BINOP && n->kind != SN_UNOP)
		return 0;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (stmt_name_is(n, ops[i]))
			return 1;
	return 0;
}

/*
 * One debug_print argument: an integer or bool scalar the scalar core
 * computes; anything else (arrays, floats) a ref whose elements the
 * device copies into the record.
 */
static int print_arg(struct stmt_ctx *c, const struct stmt_node *a,
		     struct value *x, char *text, struct tpurt_print_arg *arg)
{
	struct ref_info r;
	int int_smem = x->kind != V_SMEM ||
		       (stmt_find_ref(c, x->ref, (int)strlen(x->ref), &r) &&
			stmt_smem_int(r.dtype));

	if (x->kind == V_IMM)
		return stmt_fail(c, a->col, "debug_print: put Python constants into the format");
	if (stmt_is_scalar(x) && int_smem && x->dtype != TPURT_F32 &&
	    x->dtype != TPURT_BF16) {
		arg->kind = x->dtype == TPURT_BOOL || is_truth(a) ? TPURT_PRINT_BOOL :
			    TPURT_PRINT_INT;
		arg->text = text;
		return stmt_scalar_text(c, x, a->col, text, TPURT_TEXT_MAX, 0);
	}
	if (stmt_is_scalar(x) && stmt_scalar_tile(c, x, a->col))
		return c->err;
	if (!is_tile(x))
		return stmt_fail(c, a->col, "debug_print prints scalars and arrays");
	arg->kind = TPURT_PRINT_REF;
	arg->text = x->ref;
	return 0;
}

/* pl.debug_print("format", *args): one record each time it runs. */
int stmt_lower_debug_print(struct stmt_ctx *c, const struct stmt_node *call)
{
	char fmt[TPURT_PRINT_FMT_MAX], text[STMT_MAX_ARGS][TPURT_TEXT_MAX];
	struct tpurt_print_arg args[STMT_MAX_ARGS];
	struct value x[STMT_MAX_ARGS];
	int n = call->nargs - 1, ret;

	if (stmt_check_kwargs(c, call, NULL))
		return c->err;
	if (call->nargs < 1 || call->arg[0]->kind != SN_STR)
		return stmt_fail(c, call->col, "debug_print takes its format string first");
	if (unescape(c, call->arg[0], fmt, sizeof(fmt)))
		return c->err;
	for (int i = 0; i < n; i++) {
		x[i].temp = -1;
		if (stmt_lower_node(c, call->arg[i + 1], NULL, &x[i]) ||
		    print_arg(c, call->arg[i + 1], &x[i], text[i], &args[i]))
			return c->err;
	}
	ret = tpurt_kernel_debug_print(c->k, fmt, n, args);
	for (int i = 0; i < n; i++)
		if (is_tile(&x[i]))
			release(c, &x[i]);
	return stmt_emitted(c, ret, call->col);
}

/*
 * jnp.concatenate((a, b, ...), axis): each part stored into its slice of
 * a new temporary (rows for axis 0, columns for axis 1: body windows).
 */
static int lower_concatenate(struct stmt_ctx *c, const struct stmt_node *call,
			     struct value *v)
{
	static const char *const kws[] = { "axis", NULL };
	const struct stmt_node *parts = call->nargs ? call->arg[0] : NULL;
	const struct stmt_node *an = call->nargs == 2 ? call->arg[1] :
				     stmt_kwarg(call, "axis");
	struct value x[STMT_MAX_ARGS];
	int64_t rows, cols, at = 0;
	int axis = 0, n, nd = 0;

	if (stmt_check_kwargs(c, call, kws) || stmt_nargs_are(c, call, 1, 2, "concatenate"))
		return c->err;
	if (parts->kind != SN_TUPLE || !parts->nargs)
		return stmt_fail(c, parts->col, "concatenate takes a tuple of arrays");
	n = parts->nargs;
	for (int i = 0; i < n; i++) {
		if (lower_tile_arg(c, parts->arg[i], &x[i], "concatenate"))
			return c->err;
		nd |= x[i].nd > 2;
	}
	if (nd) {
		if (an && rank_axis(c, an, x[0].nd > 2 ? x[0].nd : 2, &axis))
			return c->err;
		return stmt_nd_concatenate(c, x, n, axis, call->col, v);
	}
	if (an && const_axis(c, an, &axis))
		return c->err;
	for (int i = 0; i < n; i++) {
		char sa[48], sb[48];

		if (i && x[i].dtype != x[0].dtype)
			return stmt_fail(c, parts->arg[i]->col, "concatenate of %s and %s: cast the parts to one dtype",
					 stmt_dtype_str(x[0].dtype), stmt_dtype_str(x[i].dtype));
		if (i && (axis ? x[i].rows != x[0].rows : x[i].cols != x[0].cols))
			return stmt_fail(c, parts->arg[i]->col, "concatenate along axis %d of %s and %s: the other dimension differs",
					 axis, shape_str(&x[0], sa), shape_str(&x[i], sb));
		at += axis ? x[i].cols : x[i].rows;
	}
	rows = axis ? x[0].rows : at;
	cols = axis ? at : x[0].cols;
	if (result(c, NULL, x[0].dtype, rows, cols, call->col, v))
		return c->err;
	at = 0;
	for (int i = 0; i < n; i++) {
		int64_t size = axis ? x[i].cols : x[i].rows;
		char win[TPURT_TEXT_MAX];

		snprintf(win, sizeof(win), axis ? "%s.at[:, pl.ds(%lld, %lld)]" :
			 "%s.at[pl.ds(%lld, %lld), :]", v->ref, (long long)at,
			 (long long)size);
		at += size;
		release(c, &x[i]);
		if (stmt_emitted(c, tpurt_kernel_store(c->k, win, x[i].ref), call->col))
			return c->err;
	}
	return 0;
}

/*
 * jnp.reshape(x, shape), a shape of 1 to 4 dimensions (one may be -1):
 * the elements in row-major order, as jnp's. A reshape that keeps the
 * 2-D view (the last dimension, the product of the others) only renames
 * the shape; one that moves elements between rows and columns copies
 * them (stmt_reshape_to).
 */
static int lower_reshape(struct stmt_ctx *c, const struct stmt_node *call,
			 struct value *v)
{
	const struct stmt_node *s = call->nargs == 2 ? call->arg[1] : NULL;
	int64_t shape[TPURT_MAX_RANK], known = 1, total;
	int rank, unknown = -1;

	if (stmt_check_kwargs(c, call, NULL) || stmt_nargs_are(c, call, 2, 2, "reshape"))
		return c->err;
	if (s->kind != SN_TUPLE || s->nargs < 1 || s->nargs > TPURT_MAX_RANK)
		return stmt_fail(c, s->col, "reshape takes a shape of 1 to %d dimensions",
				 TPURT_MAX_RANK);
	rank = s->nargs;
	for (int d = 0; d < rank; d++) {
		if (stmt_const_int(c, s->arg[d], &shape[d]))
			return c->err;
		if (shape[d] == -1 && unknown < 0)
			unknown = d;
		else if (shape[d] < 1)
			return stmt_fail(c, s->arg[d]->col, "reshape: dimension %lld (one may be -1)",
					 (long long)shape[d]);
		else
			known *= shape[d];
	}
	if (lower_tile_arg(c, call->arg[0], v, "reshape"))
		return c->err;
	total = v->rows * v->cols;
	if (unknown >= 0) {
		if (total % known)
			return stmt_fail(c, s->col, "reshape of %lld elements: -1 cannot make up the rest of %lld",
					 (long long)total, (long long)known);
		shape[unknown] = total / known;
	}
	return stmt_reshape_to(c, v, rank, shape, call->col, v);
}

static int bare_name(const char *ref)
{
	return ref[0] && !ref[strspn(ref, "abcdefghijklmnopqrstuvwxyz"
				      "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_%")];
}

/* A bitcast's last copy lands in the statement's target when that is a
 * whole ref of its shape and dtype: no body op (a float store would
 * quiet signalling NaNs) touches the bits on the way. */
static int bitcast_result(struct stmt_ctx *c, const struct dest *d,
			  enum tpurt_dtype to, int64_t rows, int64_t cols, int col,
			  struct value *v)
{
	if (d && bare_name(d->name) && d->dtype == to && d->rows == rows && d->cols == cols) {
		stmt_tile_of(v, d->name, rows, cols, to);
		return 0;
	}
	return stmt_new_tile(c, to, rows, cols, col, v);
}

/*
 * A bitcast that changes the width, as pltpu.bitcast packs them on a TPU:
 * the second-to-last dimension scales by the ratio, so an int32 row i
 * holds bf16 rows 2i (low half) and 2i + 1 (high half). Byte for byte,
 * the wide (R, C) tile is the narrow rows interleaved along the lanes:
 * narrow row r*i + k is element k of every r-element group of a narrow
 * (R, C*r) tile with the wide tile's bytes. The DMA engine moves both
 * ways: strided copies between the value and that tile (ratio r), and
 * one copy of the tile's bytes into the tile of the other dtype.
 */
static int bitcast_width(struct stmt_ctx *c, const struct stmt_node *call,
			 struct value *x, enum tpurt_dtype to, const struct dest *d,
			 struct value *v)
{
	int64_t fs = tpurt_dtype_size(x->dtype), ts = tpurt_dtype_size(to);
	int wider = ts > fs;
	int64_t r = wider ? ts / fs : fs / ts;
	enum tpurt_dtype narrow = wider ? x->dtype : to;
	int64_t rows = wider ? x->rows / r : x->rows, cols = x->cols;	/* wide rows */
	char src[TPURT_TEXT_MAX], dst[TPURT_TEXT_MAX];
	struct value packed, in = *x;

	if (x->nd > 2 || x->rows < 1 || (wider && x->rows % r))
		return stmt_fail(c, call->col, "bitcast of a %s (%lld, %lld) value to %s: the rows (the second-to-last dimension) must be a multiple of %lld, the width ratio",
				 tpurt_dtype_name(x->dtype), (long long)x->rows,
				 (long long)x->cols, tpurt_dtype_name(to), (long long)r);
	/* the copies read x where it is when that is a whole ref or its own
	 * temporary (no body op touches the bits); else a tile of its own */
	if (x->temp < 0 && !bare_name(x->ref)) {
		if (stmt_new_tile(c, x->dtype, x->rows, x->cols, call->col, &in) ||
		    stmt_emitted(c, tpurt_kernel_store(c->k, in.ref, x->ref), call->col))
			return c->err;
	}
	if (stmt_new_tile(c, narrow, rows, cols * r, call->col, &packed))
		return c->err;
	if (wider) {
		for (int64_t k = 0; k < r; k++) {
			snprintf(src, sizeof(src), "%.64s.at[pl.ds(%lld, %lld, %lld), :]", in.ref,
				 (long long)k, (long long)rows, (long long)r);
			snprintf(dst, sizeof(dst), "%.64s.at[:, pl.ds(%lld, %lld, %lld)]", packed.ref,
				 (long long)k, (long long)cols, (long long)r);
			if (stmt_emitted(c, tpurt_kernel_sync_copy(c->k, src, dst), call->col))
				return c->err;
		}
		release(c, &in);
		if (bitcast_result(c, d, to, rows, cols, call->col, v) ||
		    stmt_emitted(c, tpurt_kernel_sync_copy(c->k, packed.ref, v->ref), call->col))
			return c->err;
		release(c, &packed);
		return 0;
	}
	if (stmt_emitted(c, tpurt_kernel_sync_copy(c->k, in.ref, packed.ref), call->col))
		return c->err;
	release(c, &in);
	if (bitcast_result(c, d, to, rows * r, cols, call->col, v))
		return c->err;
	for (int64_t k = 0; k < r; k++) {
		snprintf(src, sizeof(src), "%.64s.at[:, pl.ds(%lld, %lld, %lld)]", packed.ref,
			 (long long)k, (long long)cols, (long long)r);
		snprintf(dst, sizeof(dst), "%.64s.at[pl.ds(%lld, %lld, %lld), :]", v->ref,
			 (long long)k, (long long)rows, (long long)r);
		if (stmt_emitted(c, tpurt_kernel_sync_copy(c->k, src, dst), call->col))
			return c->err;
	}
	release(c, &packed);
	return 0;
}

/*
 * pltpu.bitcast(x, dtype), lax.bitcast_convert_type: x's bits as another
 * dtype. Of one width (float32 and int32, int8 and uint8), the DMA engine
 * moves bytes whatever their dtype: x (in a temporary of its own, so both
 * ends are rows x cols) is copied into one of the new dtype. Of another
 * width, bitcast_width().
 */
static int lower_bitcast(struct stmt_ctx *c, const struct stmt_node *call,
			 const struct dest *d, struct value *v)
{
	struct value x, t, src;
	enum tpurt_dtype to;

	if (stmt_check_kwargs(c, call, NULL) || stmt_nargs_are(c, call, 2, 2, "bitcast") ||
	    lower_tile_arg(c, call->arg[0], &x, "bitcast") ||
	    stmt_lower_node(c, call->arg[1], NULL, &t))
		return c->err;
	if (t.kind != V_DTYPE)
		return stmt_fail(c, call->arg[1]->col, "expected a dtype");
	to = t.dtype;
	if (to == x.dtype)
		return *v = x, 0;
	if (to == TPURT_BOOL || x.dtype == TPURT_BOOL)
		return stmt_fail(c, call->col, "bitcast of %s to %s: bool has no bits to cast",
				 tpurt_dtype_name(x.dtype), tpurt_dtype_name(to));
	if (x.transposed)
		return stmt_fail(c, call->col, "bitcast of a transposed value (.T) is not supported");
	if (tpurt_dtype_size(to) != tpurt_dtype_size(x.dtype))
		return bitcast_width(c, call, &x, to, d, v);
	if (stmt_new_tile(c, x.dtype, x.rows, x.cols, call->col, &src) ||
	    stmt_emitted(c, tpurt_kernel_store(c->k, src.ref, x.ref), call->col))
		return c->err;
	release(c, &x);
	if (stmt_new_tile(c, to, x.rows, x.cols, call->col, v) ||
	    stmt_emitted(c, tpurt_kernel_sync_copy(c->k, src.ref, v->ref), call->col))
		return c->err;
	release(c, &src);
	keep_nd(v, &x, NULL);
	return 0;
}

static int lower_attr(struct stmt_ctx *c, const struct stmt_node *n,
		      const struct dest *d, struct value *v)
{
	if (stmt_name_is(n, "T"))
		return lower_transpose(c, n->base, n->col, d, v);
	if (stmt_name_is(n, "at"))
		return stmt_fail(c, n->col, "ref.at[...] is a window: read it with ref.at[i][...], or copy it");
	if (!stmt_name_is(n, "dtype"))
		return stmt_fail(c, n->col, "unknown attribute '.%.*s'", n->len, n->name);
	if (lower_ref_ok(c, n->base, v))
		return c->err;
	if (v->kind != V_TILE && v->kind != V_REF)
		return stmt_fail(c, n->col, ".dtype of something that is not an array");
	release(c, v);
	v->kind = V_DTYPE;
	return 0;
}

/* A shape (rows, cols), or of 1 to 4 dimensions: its 2-D view and, for
 * rank 3 and 4, its dimensions. */
static int lower_tuple(struct stmt_ctx *c, const struct stmt_node *n,
		       struct value *v)
{
	int64_t dim[TPURT_MAX_RANK];

	if (n->nargs < 1 || n->nargs > TPURT_MAX_RANK)
		return stmt_fail(c, n->col, "a shape has 1 to %d dimensions", TPURT_MAX_RANK);
	for (int d = 0; d < n->nargs; d++) {
		if (stmt_const_int(c, n->arg[d], &dim[d]))
			return c->err;
		if (dim[d] < 1)
			return stmt_fail(c, n->col, "shape with a dimension %lld is empty",
					 (long long)dim[d]);
	}
	memset(v, 0, sizeof(*v));
	v->kind = V_TUPLE;
	v->temp = -1;
	stmt_set_shape(v, n->nargs, dim);
	return 0;
}

int stmt_lower_node(struct stmt_ctx *c, const struct stmt_node *n,
		    const struct dest *d, struct value *v)
{
	if (c->err)
		return c->err;
	switch (n->kind) {
	case SN_NUM:
		imm_of(v, n->num, n->is_int);
		return 0;
	case SN_NAME:
		if (lower_name(c, n, v))
			return c->err;
		if (v->kind == V_REF)
			return stmt_fail(c, n->col + n->len, "'%s' is a ref: read it with %s[...]",
					 v->ref, v->ref);
		return 0;
	case SN_CALL:
		return lower_call(c, n, d, v);
	case SN_ATTR:
		return lower_attr(c, n, d, v);
	case SN_INDEX:
		return lower_index(c, n, v);
	case SN_BINOP:
		return lower_binop(c, n, d, v);
	case SN_UNOP:
		return lower_unop(c, n, d, v);
	case SN_STR:
		return stmt_fail(c, n->col, "a string is only pl.debug_print's format");
	default:
		return lower_tuple(c, n, v);
	}
}

/* Inside like() and .dtype a bare ref is fine: lower_name's V_REF. */
static int lower_ref_ok(struct stmt_ctx *c, const struct stmt_node *n,
			struct value *v)
{
	return n->kind == SN_NAME ? lower_name(c, n, v) : stmt_lower_node(c, n, NULL, v);
}

/* --- statements --- */

/* @v into the target @d: a copy or cast if it is elsewhere. */
static int store(struct stmt_ctx *c, const struct dest *d, struct value *v,
		 int col)
{
	struct value out;
	char sv[48], sd[48];

	if (is_tile(v) && !strcmp(v->ref, d->name))
		return 0;
	if (stmt_is_scalar(v))
		return materialize(c, v, d->dtype, d->rows, d->cols, col, d, &out);
	if (!is_tile(v))
		return stmt_fail(c, col, "expected an array");
	if (v->rows != d->rows || v->cols != d->cols)
		return stmt_fail(c, col, "a value of shape %s stored into '%s' of shape %s",
				 shape_str(v, sv), d->name,
				 shape_str(&(struct value){ .rows = d->rows, .cols = d->cols }, sd));
	if (v->dtype != d->dtype)
		return stmt_fail(c, col, "a %s value stored into '%s' of %s: write .astype(%s)",
				 stmt_dtype_str(v->dtype), d->name, stmt_dtype_str(d->dtype),
				 stmt_dtype_str(d->dtype));
	release(c, v);
	return stmt_emitted(c, tpurt_kernel_store(c->k, d->name, v->ref), col);
}

int stmt_aug_fn(char aug)
{
	return aug == '+' ? TPU_BINARY_ADD : aug == '-' ? TPU_BINARY_SUB :
	       aug == '*' ? TPU_BINARY_MUL : TPU_BINARY_DIV;
}

static int is_dot(const struct stmt_node *n)
{
	return (n->kind == SN_BINOP && stmt_name_is(n, "@")) ||
	       (n->kind == SN_CALL && n->base->kind == SN_NAME &&
		tpurt_stmt_function(n->base->name, n->base->len).kind == FN_DOT &&
		n->nargs == 2);
}

/* The value of @st, written into @d (x op= value reads @cur first). */
int stmt_assign(struct stmt_ctx *c, const struct stmt *st, const struct dest *d,
		const struct value *cur)
{
	struct value v, rhs, old = *cur;
	const struct stmt_node *n = st->value;

	if (st->aug == '+' && is_dot(n)) {
		struct tpurt_kernel *saved = malloc(sizeof(*saved));
		int ret;

		if (!saved)
			return stmt_fail(c, n->col, "out of memory");
		*saved = *c->k;
		ret = lower_dot(c, n->kind == SN_CALL ? n : NULL, n->arg[0],
				n->arg[1], d, 1, &v);
		if (ret > 0 && !c->err)
			*c->k = *saved;	/* not the MXU's +=: add below */
		free(saved);
		if (ret <= 0 || c->err)
			return c->err;
	}
	if (!st->aug)
		return stmt_lower_node(c, n, d, &v) ? c->err : store(c, d, &v, n->col);
	if (stmt_lower_node(c, n, NULL, &rhs) ||
	    stmt_lower_binary(c, stmt_aug_fn(st->aug), 0, &old, &rhs, d, n->col, &v))
		return c->err;
	return store(c, d, &v, n->col);
}

static int store_to_ref(struct stmt_ctx *c, const struct stmt *st,
			const struct ref_info *r)
{
	struct dest d = { r->name, r->rows, r->cols, r->dtype };
	struct value cur;

	if (r->kind == R_INPUT)
		return stmt_fail(c, st->tcol, "'%s' is an input: its block is read-only",
				 r->name);
	if (r->kind == R_PREFETCH || r->kind == R_SMEM)
		return stmt_fail(c, st->tcol, "'%s' is in SMEM: statements store to VMEM refs",
				 r->name);
	if (!r->has_dtype)
		return stmt_fail(c, st->tcol, "the dtype of '%s' is not declared: tpurt_grid_spec_set_dtype()",
				 r->name);
	stmt_tile_of(&cur, r->name, r->rows, r->cols, r->dtype);
	nd_of_ref(&cur, r);	/* o[...] += x of a 3-D o broadcasts as 3-D */
	return stmt_assign(c, st, &d, &cur);
}

struct tpurt_kernel_local *stmt_new_local(struct stmt_ctx *c,
					  const struct stmt *st)
{
	struct tpurt_kernel_local *l = stmt_find_local(c, st->target, st->tlen);

	if (l)
		return l;
	if (c->k->nlocals == TPURT_KERNEL_MAX_LOCALS) {
		stmt_fail(c, st->tcol, "more than %d local names", TPURT_KERNEL_MAX_LOCALS);
		return NULL;
	}
	if (st->tlen >= TPURT_NAME_MAX) {
		stmt_fail(c, st->tcol, "name longer than %d characters", TPURT_NAME_MAX - 1);
		return NULL;
	}
	l = &c->k->local[c->k->nlocals++];
	memset(l, 0, sizeof(*l));
	memcpy(l->name, st->target, (size_t)st->tlen);
	l->temp = -1;
	return l;
}

/* A temporary for local @l of @v's type: its own if that fits, else a new
 * one named after it. */
/* @v, a read of input @r, sees r's own dimensions (not a reshape of it),
 * so that a local naming r is indexed as @v would be. */
static int same_view(const struct value *v, const struct ref_info *r)
{
	struct value w = { 0 };

	nd_of_ref(&w, r);
	return w.nd == v->nd;
}

static int local_temp(struct stmt_ctx *c, struct tpurt_kernel_local *l,
		      const struct value *v, int col)
{
	struct tpurt_kernel *k = c->k;
	struct tpurt_kernel_temp *t;
	char name[TPURT_NAME_MAX];

	if (l->kind == TPURT_LOCAL_TEMP && l->temp >= 0) {
		t = &k->temp[l->temp];
		if (t->dtype == v->dtype && t->rows == v->rows && t->cols == v->cols &&
		    (t->rank > 2 ? t->rank : 0) == v->nd &&
		    !memcmp(t->shape, v->shape, (size_t)v->nd * sizeof(*v->shape)))
			return 0;
		t->bound = 0;
	}
	if (k->ntemps == TPURT_KERNEL_MAX_TEMPS)
		return stmt_fail(c, col, "'%s' needs a temporary beyond the kernel's %d",
				 l->name, TPURT_KERNEL_MAX_TEMPS);
	snprintf(name, sizeof(name), "%s", l->name);
	for (int i = 0, n = 1; i < k->ntemps; i++)
		if (!strcmp(k->temp[i].name, name)) {
			snprintf(name, sizeof(name), "%.20s_%d", l->name, n++);
			i = -1;
		}
	t = &k->temp[k->ntemps];
	memset(t, 0, sizeof(*t));
	strcpy(t->name, name);
	t->dtype = v->dtype;
	t->rows = v->rows;
	t->cols = v->cols;
	if (v->nd > 2) {	/* N-D, so that indexing the local sees its dimensions */
		t->rank = v->nd;
		memcpy(t->shape, v->shape, (size_t)v->nd * sizeof(*v->shape));
	}
	t->bound = 1;
	l->kind = TPURT_LOCAL_TEMP;
	l->temp = k->ntemps++;
	return 0;
}

/*
 * name = value: lowered once to learn its type (then undone), then into
 * the local's temporary. Constants, scalar-core values and inputs read
 * whole are bound without ops.
 */
static int bind_local(struct stmt_ctx *c, const struct stmt *st)
{
	struct tpurt_kernel *saved = malloc(sizeof(*saved));
	struct tpurt_kernel_local *l;
	struct ref_info r;
	struct value v, cur;
	struct dest d;
	int ret;

	if (!saved)
		return stmt_fail(c, st->tcol, "out of memory");
	*saved = *c->k;
	l = stmt_find_local(c, st->target, st->tlen);
	if (st->aug && !l) {
		free(saved);
		return stmt_fail(c, st->tcol, "unknown name '%.*s'", st->tlen, st->target);
	}
	memset(&cur, 0, sizeof(cur));
	if (l && st->aug && l->stale) {
		free(saved);
		return stmt_stale_local(c, l, st->tcol);
	}
	if (l && (st->aug || l->kind != TPURT_LOCAL_COPY) && lower_local(c, l, &cur)) {
		free(saved);
		return c->err;
	}
	if (st->aug) {
		struct value rhs;

		ret = stmt_lower_node(c, st->value, NULL, &rhs) ? c->err :
		      stmt_lower_binary(c, stmt_aug_fn(st->aug), 0, &cur, &rhs, NULL,
					st->value->col, &v);
	} else {
		ret = stmt_lower_node(c, st->value, NULL, &v);
	}
	*c->k = *saved;
	free(saved);
	if (ret)
		return c->err;
	l = stmt_new_local(c, st);
	if (!l)
		return c->err;
	if (v.kind == V_IMM || v.kind == V_SCALAR || v.kind == V_SMEM) {
		if (v.kind != V_IMM && stmt_scalar_text(c, &v, st->value->col, l->text,
							sizeof(l->text), 0))
			return c->err;
		if (stmt_smem_scalar_ok(c, &v, st->value->col))
			return c->err;
		l->kind = v.kind == V_IMM ? TPURT_LOCAL_CONST : TPURT_LOCAL_SCALAR;
		l->value = v.imm;
		l->is_int = v.dtype == TPURT_INT32;
		l->stale = 0;
		return 0;
	}
	if (!is_tile(&v))
		return stmt_fail(c, st->value->col, "expected an array or a scalar");
	/* in a loop a local holding a temporary keeps it: the body's ops name it */
	if (v.temp < 0 && stmt_find_ref(c, v.ref, (int)strlen(v.ref), &r) &&
	    r.kind == R_INPUT && !st->aug && same_view(&v, &r) &&
	    !(l->kind == TPURT_LOCAL_TEMP && tpurt_kernel_loop_depth(c->k))) {
		l->kind = TPURT_LOCAL_INPUT;	/* read-only: no copy needed */
		snprintf(l->ref, sizeof(l->ref), "%s", v.ref);
		return 0;
	}
	if (local_temp(c, l, &v, st->tcol))
		return c->err;
	d = (struct dest){ c->k->temp[l->temp].name, v.rows, v.cols, v.dtype };
	return stmt_assign(c, st, &d, &cur);
}

int stmt_lower(struct stmt_ctx *c, const struct stmt *st)
{
	struct ref_info r;

	if (st->call)
		return stmt_lower_call_stmt(c, st->call);
	if (st->target_node)
		return stmt_store_to_node(c, st);
	if (!st->target_indexed && stmt_is_call_of(st->value, FN_ASYNC_COPY) &&
	    !stmt_find_ref(c, st->target, st->tlen, &r))
		return stmt_bind_copy(c, st);

	if (stmt_find_ref(c, st->target, st->tlen, &r)) {
		if (!st->target_indexed)
			return stmt_fail(c, st->tcol + st->tlen,
					 "'%s' is a ref: store into it with %s[...] %s= ...",
					 r.name, r.name, st->aug ? (char[2]){ st->aug, 0 } : "");
		return store_to_ref(c, st, &r);
	}
	if (st->target_indexed)
		return stmt_fail(c, st->tcol, stmt_find_local(c, st->target, st->tlen) ?
				 "'%.*s' is a local value, not a ref: assign it without [...]" :
				 "unknown ref '%.*s'", st->tlen, st->target);
	/*
	 * A local may take a function's name (mean = jnp.mean(x, ...)): a call
	 * names the function, a bare name the local. Not a dtype's: those are
	 * read as bare names.
	 */
	if (tpurt_stmt_dtype(st->target, st->tlen) >= 0)
		return stmt_fail(c, st->tcol, "'%.*s' is a dtype name",
				 st->tlen, st->target);
	return bind_local(c, st);
}

int stmt_lower_pred(struct stmt_ctx *c, const struct stmt_node *cond,
		    char *text, size_t len)
{
	struct value v;

	if (stmt_lower_node(c, cond, NULL, &v))
		return c->err;
	if (v.kind == V_TILE)
		return stmt_fail(c, cond->col, "pl.when takes a scalar condition (pl.program_id, SMEM reads), not an array");
	if (stmt_smem_scalar_ok(c, &v, cond->col))
		return c->err;
	return stmt_scalar_text(c, &v, cond->col, text, len, 0);
}
