/* SPDX-License-Identifier: MIT */
/*
 * Kernel statements' lowering, shared by its files: stmt_lower.c (values,
 * expressions, stores, locals) and stmt_memory.c (windows, async copies,
 * semaphores, SMEM element stores, run_scoped). A node of a statement's
 * tree becomes a struct value.
 */
#ifndef TPURT_STMT_LOWER_H
#define TPURT_STMT_LOWER_H

#include "stmt.h"

enum value_kind {
	V_TILE,		/* @ref (a ref or temporary), rows x cols of dtype */
	V_IMM,		/* @imm */
	V_SCALAR,	/* @text: index-map syntax, a 64-bit integer */
	V_SMEM,		/* @ref[@text]: one element of an SMEM ref */
	V_DTYPE,	/* @dtype: an argument of astype, iota, zeros */
	V_REF,		/* a bare ref: only its shape and dtype are read */
	V_TUPLE,	/* a shape (rows, cols) */
};

struct value {
	enum value_kind kind;
	char ref[TPURT_TEXT_MAX];	/* a name or a window */
	int temp;		/* an intermediate to release after use, or -1 */
	int64_t rows, cols;
	enum tpurt_dtype dtype;
	int weak;		/* a Python scalar: takes the other side's dtype */
	double imm;
	char text[TPURT_TEXT_MAX];
	int compound;		/* @text needs parentheses as an operand */
	int transposed;		/* read through .T (a dot operand) */
	/* a value of rank 3 or 4 (a whole read of such a ref, a local bound
	 * to one): its shape, which @ref has too; 0: rows x cols */
	int nd;
	int64_t shape[TPURT_MAX_RANK];
};

/* Where the last op of an expression may write: the statement's target. */
struct dest {
	const char *name;
	int64_t rows, cols;
	enum tpurt_dtype dtype;
};

/* What a name of the grid spec (or an open scope) is to the body. */
enum ref_kind { R_PREFETCH, R_INPUT, R_OUTPUT, R_VMEM, R_SMEM, R_ANY, R_SEM };

struct ref_info {
	enum ref_kind kind;
	const char *name;
	int64_t rows, cols;	/* the body's 2-D view; SMEM: its flat shape */
	int has_dtype;
	enum tpurt_dtype dtype;
	int rank2;		/* SMEM: indexed s[i, j] with rows x cols */
	int role;		/* an operand's, or -1 */
	/* for windows: the ref's dimensions (rank 0: not known, an ANY
	 * operand whose shape is not declared); squeezed ones @hidden */
	int rank;
	int64_t extent[TPURT_MAX_RANK];
	unsigned int hidden;
};

/* --- stmt_lower.c --- */

const char *stmt_dtype_str(enum tpurt_dtype t);
int stmt_name_is(const struct stmt_node *n, const char *s);
/* The grid spec's ref (or an open scope's) named [@name, @name + @len). */
int stmt_find_ref(const struct stmt_ctx *c, const char *name, int len,
		  struct ref_info *r);
struct tpurt_kernel_local *stmt_find_local(struct stmt_ctx *c,
					   const char *name, int len);
void stmt_tile_of(struct value *v, const char *ref, int64_t rows,
		  int64_t cols, enum tpurt_dtype dtype);
void stmt_scalar_of(struct value *v, const char *text, int compound);
int stmt_is_scalar(const struct value *v);
/* A builder call's failure, at the column of the term it lowers. */
int stmt_emitted(struct stmt_ctx *c, int ret, int col);
/* A scalar value as index-map text (in parentheses if @parens and needed). */
int stmt_scalar_text(struct stmt_ctx *c, const struct value *v, int col,
		     char *buf, size_t len, int parens);
/*
 * SMEM elements the scalar core reads as integers, exactly (int32, uint32,
 * int8, uint8, bool: the device widens them); float32 and bfloat16 ones are
 * (1, 1) tiles in arithmetic.
 */
int stmt_smem_int(enum tpurt_dtype t);
/* @v is no SMEM element of a float type: the scalar core's integers only. */
int stmt_smem_scalar_ok(struct stmt_ctx *c, const struct value *v, int col);
/* A scalar (scalar-core value, SMEM element) .astype(@t), as jnp casts. */
int stmt_scalar_cast(struct stmt_ctx *c, const struct value *x,
		     enum tpurt_dtype t, int col, struct value *v);
/* A new temporary tile. */
int stmt_new_tile(struct stmt_ctx *c, enum tpurt_dtype dtype, int64_t rows,
		  int64_t cols, int col, struct value *v);
/* A new temporary of an N-D @shape (rank 3 or 4), seen rows x cols. */
int stmt_new_tile_shaped(struct stmt_ctx *c, enum tpurt_dtype dtype, int rank,
			 const int64_t *shape, int col, struct value *v);
/* A scalar value (immediate, scalar-core, SMEM element) as a (1, 1) tile of its dtype. */
int stmt_scalar_tile(struct stmt_ctx *c, struct value *x, int col);
int stmt_lower_binary(struct stmt_ctx *c, int fn, int floor_div,
		      struct value *a, struct value *b, const struct dest *d,
		      int col, struct value *v);
const struct stmt_node *stmt_kwarg(const struct stmt_node *call,
				   const char *name);
int stmt_check_kwargs(struct stmt_ctx *c, const struct stmt_node *call,
		      const char *const *allowed);
int stmt_nargs_are(struct stmt_ctx *c, const struct stmt_node *call,
		   int lo, int hi, const char *fn);
int stmt_const_int(struct stmt_ctx *c, const struct stmt_node *n, int64_t *out);
/* s[i] or s[i, j] of SMEM ref @r as a value. */
int stmt_lower_smem_read(struct stmt_ctx *c, const struct stmt_node *n,
			 const struct ref_info *r, struct value *v);
/* @n as a value, its last op writing into @d (may be NULL) if it fits. */
int stmt_lower_node(struct stmt_ctx *c, const struct stmt_node *n,
		    const struct dest *d, struct value *v);
int stmt_aug_fn(char aug);
/* The value of @st written into @d (x op= value reads @cur first). */
int stmt_assign(struct stmt_ctx *c, const struct stmt *st, const struct dest *d,
		const struct value *cur);
/* The local @st's target names, new or rebound. */
struct tpurt_kernel_local *stmt_new_local(struct stmt_ctx *c,
					  const struct stmt *st);

/* A temporary @v holds (if any) free for reuse. */
void stmt_release(struct stmt_ctx *c, const struct value *v);

/* --- stmt_nd.c: values of rank 3 and 4 --- */

/* @x's dimensions into @s (its N-D shape, or rows and cols); the rank. */
int stmt_dims(const struct value *x, int64_t *s);
/* @v's rows, cols and N-D shape from @s of rank 0 to 4 (the 2-D view:
 * the last dimension by the product of the others; (n,) is (1, n)). */
void stmt_set_shape(struct value *v, int rank, const int64_t *s);
/* @x's ref is a ref or temporary declared with @x's N-D shape. */
int stmt_nd_is_buffer(struct stmt_ctx *c, const struct value *x);
/* @x into a temporary of its N-D shape unless it is in one already. */
int stmt_nd_buffer(struct stmt_ctx *c, struct value *x, int col);
/* jnp.sum/max/min/argmax/argmin(x, axis, keepdims) of a value of rank 3
 * or 4 over the axes in @axes (bit d: axis d), into dtype @t; @count (may
 * be NULL) gets the number of elements each result takes. */
int stmt_nd_reduce(struct stmt_ctx *c, int fn, struct value *x, unsigned int axes,
		   int keep, enum tpurt_dtype t, int col, struct value *v,
		   int64_t *count);
/* jnp.transpose(x, perm) of a value of rank 3 or 4. */
int stmt_nd_transpose(struct stmt_ctx *c, struct value *x, const int *perm,
		      int col, struct value *v);
/* jnp.reshape(x, shape), @shape of rank 0 to 4 (no -1), moving elements
 * between rows and columns when the 2-D views differ. */
int stmt_reshape_to(struct stmt_ctx *c, struct value *x, int rank,
		    const int64_t *shape, int col, struct value *v);

/* lax.broadcasted_iota(dtype, shape, dim) of a shape of rank 3 or 4, plus
 * @offset (an index-map expression, or NULL). */
int stmt_nd_iota(struct stmt_ctx *c, enum tpurt_dtype dtype, int rank,
		 const int64_t *shape, int dim, const char *offset, int col,
		 struct value *v);

/* @a op @b where the 2-D views would not broadcast as the N-D shapes do
 * ((4, 1, 128) and (1, 4, 128)), so stmt_nd_binary is needed. */
int stmt_nd_broadcasts(const struct value *a, const struct value *b);
/* fn(a, b) of tiles broadcasting their N-D shapes, by slabs. */
int stmt_nd_binary(struct stmt_ctx *c, int fn, int floor_div, struct value *a,
		   struct value *b, int col, struct value *v);
/* fn(a, b) on the 2-D views (rows, columns, scalars broadcast). */
int stmt_lower_binary_2d(struct stmt_ctx *c, int fn, int floor_div,
			 struct value *a, struct value *b, const struct dest *d,
			 int col, struct value *v);

/* jnp.roll(x, shift, axis) of a value of rank 3 or 4: @s the shift's
 * value, @shift its index-map text (a leading middle axis takes a
 * constant). */
int stmt_nd_roll(struct stmt_ctx *c, struct value *x, int axis,
		 const struct value *s, const char *shift, int col, struct value *v);
/* jnp.concatenate of @n values of one rank (3 or 4) along @axis. */
int stmt_nd_concatenate(struct stmt_ctx *c, struct value *x, int n, int axis,
			int col, struct value *v);

/* --- stmt_memory.c --- */

/* A scalar local that reads what a later statement changed: an error at
 * @col naming both. */
int stmt_stale_local(struct stmt_ctx *c, const struct tpurt_kernel_local *l,
		     int col);

int stmt_is_call_of(const struct stmt_node *n, enum stmt_fn_kind kind);
/* buf.at[slot][...] or buf[slot]: a window of a VMEM ref as a value. */
int stmt_lower_window_read(struct stmt_ctx *c, const struct stmt_node *n,
			   struct value *v);
/* pltpu.prng_seed(s0, ...) as a statement (stmt_lower.c). */
int stmt_lower_prng_seed(struct stmt_ctx *c, const struct stmt_node *call);
/* pl.debug_print("format", *args): a statement of its own. */
int stmt_lower_debug_print(struct stmt_ctx *c, const struct stmt_node *call);
/* pltpu.semaphore_read(sem.at[i]) */
int stmt_lower_semaphore_read(struct stmt_ctx *c, const struct stmt_node *call,
			      struct value *v);
/* A statement that is a call: copies' start and wait, sync_copy,
 * semaphore signal and wait. */
int stmt_lower_call_stmt(struct stmt_ctx *c, const struct stmt_node *call);
/* A store into a window or an SMEM element. */
int stmt_store_to_node(struct stmt_ctx *c, const struct stmt *st);
/* cp = pltpu.make_async_copy(src, dst, sem) */
int stmt_bind_copy(struct stmt_ctx *c, const struct stmt *st);

#endif /* TPURT_STMT_LOWER_H */
