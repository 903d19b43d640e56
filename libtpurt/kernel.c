// SPDX-License-Identifier: MIT
/*
 * Kernels: the body of a pallas_call as a list of operations on refs. The
 * builder records names and predicate texts only; pallas_call resolves them
 * against the grid spec it is given, as Pallas binds a kernel function's
 * parameters at call time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt_private.h"

int tpurt_kernel_create(struct tpurt_kernel **kp)
{
	*kp = calloc(1, sizeof(**kp));
	return *kp ? 0 : tpurt_fail(-ENOMEM, "out of memory");
}

void tpurt_kernel_free(struct tpurt_kernel *k)
{
	free(k);
}

static int copy_text(char *dst, size_t size, const char *src, const char *what)
{
	if (!src || !*src)
		return tpurt_fail(-EINVAL, "kernel: %s missing", what);
	if (strlen(src) >= size)
		return tpurt_fail(-EINVAL, "kernel: %s '%s' longer than %zu characters",
				  what, src, size - 1);
	strcpy(dst, src);
	return 0;
}

int tpurt_kernel_when(struct tpurt_kernel *k, const char *pred)
{
	int ret;

	if (k->nwhen == TPURT_WHEN_DEPTH)
		return tpurt_fail(-E2BIG, "kernel: when() nested deeper than %d",
				  TPURT_WHEN_DEPTH);
	ret = copy_text(k->when[k->nwhen], TPURT_TEXT_MAX, pred, "predicate");
	if (!ret)
		k->nwhen++;
	return ret;
}

int tpurt_kernel_end_when(struct tpurt_kernel *k)
{
	if (!k->nwhen)
		return tpurt_fail(-EINVAL, "kernel: end_when() without when()");
	k->nwhen--;
	return 0;
}

/* A new operation under the open when() blocks. */
static int add_op(struct tpurt_kernel *k, uint8_t opcode, const char *dst,
		  const char *src0, const char *src1,
		  struct tpurt_kernel_op **opp)
{
	struct tpurt_kernel_op *op;
	int ret;

	if (k->nops == TPU_JOB_MAX_OPS)
		return tpurt_fail(-E2BIG, "kernel: more than %d operations",
				  TPU_JOB_MAX_OPS);
	op = &k->op[k->nops];
	memset(op, 0, sizeof(*op));
	op->opcode = opcode;
	ret = copy_text(op->dst, TPURT_NAME_MAX, dst, "destination ref");
	if (!ret && src0)
		ret = copy_text(op->src0, TPURT_NAME_MAX, src0, "source ref");
	if (!ret && src1)
		ret = copy_text(op->src1, TPURT_NAME_MAX, src1, "source ref");
	if (ret)
		return ret;
	op->npred = k->nwhen;
	memcpy(op->pred, k->when, sizeof(op->pred));
	k->nops++;
	if (opp)
		*opp = op;
	return 0;
}

/* The scalar program text of the op just added; on failure the op goes. */
static int set_scalar(struct tpurt_kernel *k, struct tpurt_kernel_op *op,
		      const char *text, const char *what)
{
	int ret = copy_text(op->scalar, TPURT_TEXT_MAX, text, what);

	if (ret)
		k->nops--;
	return ret;
}

int tpurt_kernel_zero(struct tpurt_kernel *k, const char *dst)
{
	return add_op(k, TPU_OP_ZERO, dst, NULL, NULL, NULL);
}

int tpurt_kernel_dot(struct tpurt_kernel *k, const char *dst, const char *lhs,
		     const char *rhs, unsigned int flags)
{
	struct tpurt_kernel_op *op;
	int ret;

	if (flags & ~(TPURT_DOT_ACCUMULATE | TPURT_DOT_TRANSPOSE_LHS |
		      TPURT_DOT_TRANSPOSE_RHS))
		return tpurt_fail(-EINVAL, "kernel: dot: unknown flags %#x", flags);
	ret = add_op(k, TPU_OP_DOT, dst, lhs, rhs, &op);
	if (ret)
		return ret;
	op->dot = (flags & TPURT_DOT_ACCUMULATE ? TPU_DOT_ACCUMULATE : 0) |
		  (flags & TPURT_DOT_TRANSPOSE_LHS ? TPU_DOT_LHS_CONTRACT_0 : 0) |
		  (flags & TPURT_DOT_TRANSPOSE_RHS ? TPU_DOT_RHS_CONTRACT_1 : 0);
	return 0;
}

int tpurt_kernel_unary(struct tpurt_kernel *k, enum tpurt_unary fn,
		       const char *dst, const char *src)
{
	struct tpurt_kernel_op *op;
	int ret;

	if ((unsigned int)fn >= TPU_UNARY_COUNT)
		return tpurt_fail(-EINVAL, "kernel: unknown unary function %d", (int)fn);
	ret = add_op(k, TPU_OP_UNARY, dst, src, NULL, &op);
	if (!ret)
		op->fn = (uint8_t)fn;
	return ret;
}

int tpurt_kernel_store(struct tpurt_kernel *k, const char *dst,
		       const char *src)
{
	return tpurt_kernel_unary(k, TPURT_IDENTITY, dst, src);
}

static int check_binary(enum tpurt_binary fn)
{
	if ((unsigned int)fn >= TPU_BINARY_COUNT)
		return tpurt_fail(-EINVAL, "kernel: unknown binary function %d", (int)fn);
	return 0;
}

int tpurt_kernel_binary(struct tpurt_kernel *k, enum tpurt_binary fn,
			const char *dst, const char *a, const char *b,
			enum tpurt_broadcast bcast)
{
	struct tpurt_kernel_op *op;
	int ret = check_binary(fn);

	if (ret)
		return ret;
	if ((unsigned int)bcast > TPURT_BCAST_COL)
		return tpurt_fail(-EINVAL, "kernel: unknown broadcast %d", (int)bcast);
	ret = add_op(k, TPU_OP_BINARY, dst, a, b, &op);
	if (ret)
		return ret;
	op->fn = (uint8_t)fn;
	op->bcast = bcast == TPURT_BCAST_ROW ? TPU_BCAST_ROW :
		    bcast == TPURT_BCAST_COL ? TPU_BCAST_COL : TPU_BCAST_NONE;
	return 0;
}

int tpurt_kernel_binary_scalar(struct tpurt_kernel *k, enum tpurt_binary fn,
			       const char *dst, const char *a, float value)
{
	struct tpurt_kernel_op *op;
	int ret = check_binary(fn);

	if (!ret)
		ret = add_op(k, TPU_OP_BINARY, dst, a, NULL, &op);
	if (ret)
		return ret;
	op->fn = (uint8_t)fn;
	op->bcast = TPU_BCAST_IMM;
	op->imm = value;
	return 0;
}

/* fn(a, b) with b a scalar from a program: an SMEM element or its value. */
static int binary_program(struct tpurt_kernel *k, enum tpurt_binary fn,
			  const char *dst, const char *a, const char *smem,
			  const char *text, uint8_t bcast, const char *what)
{
	struct tpurt_kernel_op *op = NULL;
	int ret = check_binary(fn);

	if (!ret)
		ret = add_op(k, TPU_OP_BINARY, dst, a, smem, &op);
	if (!ret)
		ret = set_scalar(k, op, text, what);
	if (ret)
		return ret;
	op->fn = (uint8_t)fn;
	op->bcast = bcast;
	return 0;
}

int tpurt_kernel_binary_smem(struct tpurt_kernel *k, enum tpurt_binary fn,
			     const char *dst, const char *a, const char *smem,
			     const char *index)
{
	return binary_program(k, fn, dst, a, smem, index, TPU_BCAST_SMEM,
			      "SMEM index");
}

int tpurt_kernel_binary_expr(struct tpurt_kernel *k, enum tpurt_binary fn,
			     const char *dst, const char *a, const char *expr)
{
	return binary_program(k, fn, dst, a, NULL, expr, TPU_BCAST_SCALAR,
			      "scalar expression");
}

static int check_axis(int axis, const char *what)
{
	if (axis != 0 && axis != 1)
		return tpurt_fail(-EINVAL, "kernel: %s: axis %d is neither 0 nor 1 (refs are 2-D in the body)",
				  what, axis);
	return 0;
}

int tpurt_kernel_reduce(struct tpurt_kernel *k, enum tpurt_reduce fn,
			const char *dst, const char *src, int axis)
{
	struct tpurt_kernel_op *op;
	int ret = check_axis(axis, "reduce");

	if (!ret && (unsigned int)fn >= TPU_REDUCE_COUNT)
		ret = tpurt_fail(-EINVAL, "kernel: unknown reduction %d", (int)fn);
	if (!ret)
		ret = add_op(k, TPU_OP_REDUCE, dst, src, NULL, &op);
	if (ret)
		return ret;
	op->fn = (uint8_t)fn;
	op->axis = (uint8_t)axis;
	return 0;
}

int tpurt_kernel_clamp(struct tpurt_kernel *k, const char *dst,
		       const char *src, float lo, float hi)
{
	struct tpurt_kernel_op *op;
	int ret = add_op(k, TPU_OP_UNARY, dst, src, NULL, &op);

	if (ret)
		return ret;
	op->fn = TPU_UNARY_CLAMP;
	op->imm = lo;
	op->imm2 = hi;
	return 0;
}

/* One side of a select into @bcast, @ref and @imm. */
static int select_side(const struct tpurt_value *v, const char *which,
		       uint8_t *bcast, char *ref, float *imm)
{
	if (!v)
		return tpurt_fail(-EINVAL, "kernel: select: %s missing", which);
	if (v->bcast == TPURT_BCAST_IMM) {
		*imm = v->imm;
		*bcast = TPU_BCAST_IMM;
		return 0;
	}
	if ((unsigned int)v->bcast > TPURT_BCAST_COL)
		return tpurt_fail(-EINVAL, "kernel: select: %s: unknown broadcast %d",
				  which, (int)v->bcast);
	*bcast = (uint8_t)v->bcast;
	return copy_text(ref, TPURT_NAME_MAX, v->ref, "select operand ref");
}

int tpurt_kernel_select(struct tpurt_kernel *k, const char *dst,
			const char *cond, const struct tpurt_value *a,
			const struct tpurt_value *b)
{
	struct tpurt_kernel_op *op;
	int ret = add_op(k, TPU_OP_SELECT, dst, cond, NULL, &op);

	if (ret)
		return ret;
	ret = select_side(a, "a", &op->bcast, op->src1, &op->imm);
	if (!ret)
		ret = select_side(b, "b", &op->bcast2, op->src2, &op->imm2);
	if (ret)
		k->nops--;	/* the op just added */
	return ret;
}

int tpurt_kernel_iota(struct tpurt_kernel *k, const char *dst, int axis,
		      const char *offset)
{
	struct tpurt_kernel_op *op;
	int ret = check_axis(axis, "iota");

	if (!ret)
		ret = add_op(k, TPU_OP_IOTA, dst, NULL, NULL, &op);
	if (!ret && offset)
		ret = set_scalar(k, op, offset, "iota offset");
	if (ret)
		return ret;
	op->axis = (uint8_t)axis;
	return 0;
}

const char *tpurt_kernel_opcode_name(unsigned int opcode)
{
	static const char *const names[TPU_OP_COUNT] = {
		[TPU_OP_ZERO] = "zero", [TPU_OP_DOT] = "dot",
		[TPU_OP_UNARY] = "unary", [TPU_OP_BINARY] = "binary",
		[TPU_OP_REDUCE] = "reduce", [TPU_OP_SELECT] = "select",
		[TPU_OP_IOTA] = "iota",
	};

	return opcode < TPU_OP_COUNT ? names[opcode] : "?";
}

static int names_ref(const struct tpurt_kernel_op *op, const char *name)
{
	return !strcmp(op->dst, name) || !strcmp(op->src0, name) ||
	       !strcmp(op->src1, name) || !strcmp(op->src2, name);
}

/* The first and last op naming temporary @t (-1, -1 if none does). */
static void live_range(const struct tpurt_kernel *k, int t, int *first, int *last)
{
	*first = *last = -1;
	for (int i = 0; i < k->nops; i++)
		if (names_ref(&k->op[i], k->temp[t].name)) {
			if (*first < 0)
				*first = i;
			*last = i;
		}
}

static int same_type(const struct tpurt_kernel_temp *a,
		     const struct tpurt_kernel_temp *b)
{
	return a->dtype == b->dtype && a->rows == b->rows && a->cols == b->cols;
}

/* Temporaries hold values within a step only, so a slot whose last user
 * comes before a temporary's first can hold it. */
int tpurt_kernel_temp_slots(const struct tpurt_kernel *k, int *slot,
			    int *slot_temp)
{
	int first[TPURT_KERNEL_MAX_TEMPS], last[TPURT_KERNEL_MAX_TEMPS];
	int slot_end[TPURT_KERNEL_MAX_TEMPS], nslots = 0;

	for (int t = 0; t < k->ntemps; t++)
		live_range(k, t, &first[t], &last[t]);
	for (int t = 0; t < k->ntemps; t++) {
		int s;

		slot[t] = -1;
		if (first[t] < 0)
			continue;	/* no op names it */
		for (s = 0; s < nslots; s++)
			if (same_type(&k->temp[slot_temp[s]], &k->temp[t]) &&
			    slot_end[s] < first[t])
				break;
		if (s == nslots)
			slot_temp[nslots++] = t;
		slot[t] = s;
		slot_end[s] = last[t];
	}
	return nslots;
}
