// SPDX-License-Identifier: MIT
/*
 * Micro-op checks: each op's opcode, fn, broadcasts, axis, refs, dtypes,
 * shapes and programs, and that every field its opcode does not use is
 * zero. Messages name the op, the field and the ref ("op 2: src1 operand
 * 3 is 8x1; bcast row needs 1x16 ...").
 */
#include <stdio.h>
#include <string.h>

#include "tpu_check.h"
#include "tpu_dtype.h"

static const char *const bcast_name[TPU_BCAST_COUNT] = {
	"none", "row", "col", "smem", "imm", "scalar",
};

/* Shape and dtype of a ref as the body sees it. */
static bool ref_shape(const struct tpu_plan *plan, struct tpu_plan_ref r,
		      int64_t *rows, int64_t *cols, uint8_t *dtype)
{
	if (r.kind == TPU_REF_OPERAND && r.index < plan->num_operands) {
		const struct tpu_plan_operand *o = &plan->operand[r.index];

		*rows = o->rows;
		*cols = o->cols;
		*dtype = o->dtype;
		return true;
	}
	if (r.kind == TPU_REF_SCRATCH && r.index < plan->num_scratch) {
		*rows = plan->scratch[r.index].rows;
		*cols = plan->scratch[r.index].cols;
		*dtype = plan->scratch[r.index].dtype;
		return true;
	}
	if (r.kind == TPU_REF_WINDOW && r.index < plan->num_windows) {
		*rows = plan->window[r.index].rows;
		*cols = plan->window[r.index].cols;
		*dtype = plan->window[r.index].dtype;
		return true;
	}
	return false;
}

/* A VMEM block, a VMEM scratch, or a contiguous window of either. */
static bool is_vmem_ref(const struct tpu_plan *plan, struct tpu_plan_ref r)
{
	if (r.kind == TPU_REF_OPERAND)
		return r.index < plan->num_operands &&
		       plan->operand[r.index].role != TPU_ROLE_SCALAR_PREFETCH &&
		       plan->operand[r.index].space == TPU_MEM_VMEM;
	if (r.kind == TPU_REF_SCRATCH)
		return r.index < plan->num_scratch &&
		       plan->scratch[r.index].space == TPU_MEM_VMEM;
	if (r.kind == TPU_REF_WINDOW)
		return r.index < plan->num_windows && plan->window[r.index].body_ok;
	return false;
}

/* A scalar-prefetch array, an SMEM-space block or an SMEM scratch. */
static bool is_smem_ref(const struct tpu_plan *plan, struct tpu_plan_ref r)
{
	if (r.kind == TPU_REF_OPERAND)
		return r.index < plan->num_operands &&
		       (plan->operand[r.index].role == TPU_ROLE_SCALAR_PREFETCH ||
			plan->operand[r.index].space == TPU_MEM_SMEM);
	if (r.kind == TPU_REF_SCRATCH)
		return r.index < plan->num_scratch &&
		       plan->scratch[r.index].space == TPU_MEM_SMEM;
	return false;
}

/* Why @r is not a VMEM ref, for messages. */
static const char *not_vmem_why(const struct tpu_plan *plan, struct tpu_plan_ref r)
{
	if (r.kind == TPU_REF_WINDOW && r.index < plan->num_windows)
		return plan->window[r.index].space == TPU_MEM_VMEM ?
		       "the body takes a window that is a 2-D VMEM slice without strides: dimensions after its first unsqueezed one unsqueezed, and whole but for the last" :
		       plan->window[r.index].space == TPU_MEM_ANY ?
		       "it slices an array in space ANY, which only async copies reach" :
		       "it slices SMEM, which bcast smem and scalar programs read";
	if (r.kind == TPU_REF_OPERAND && r.index < plan->num_operands &&
	    plan->operand[r.index].space == TPU_MEM_ANY)
		return "space ANY: only async copies reach it";
	return "SMEM is read by bcast smem only";
}

/* An input operand, or a window of one: read-only to the body. */
static bool is_input_ref(const struct tpu_plan *plan, struct tpu_plan_ref r)
{
	if (r.kind == TPU_REF_WINDOW && r.index < plan->num_windows)
		r = plan->window[r.index].base;
	return r.kind == TPU_REF_OPERAND && r.index < plan->num_operands &&
	       plan->operand[r.index].role == TPU_ROLE_INPUT;
}

static bool is_none(struct tpu_plan_ref r)
{
	return r.kind == TPU_REF_NONE && r.index == 0;
}

/*
 * How messages name an op's refs: "operand 2", "scratch 0". libtpurt, which
 * runs this decoder before it submits, puts its names on them.
 */
struct ref_names {
	char dst[24], src0[24], src1[24], src2[24];
};

void tpu_check_ref_name(struct tpu_plan_ref r, char *buf, size_t len)
{
	if (r.kind == TPU_REF_OPERAND)
		snprintf(buf, len, "operand %u", r.index);
	else if (r.kind == TPU_REF_SCRATCH)
		snprintf(buf, len, "scratch %u", r.index);
	else if (r.kind == TPU_REF_WINDOW)
		snprintf(buf, len, "window %u", r.index);
	else if (r.kind == TPU_REF_NONE)
		snprintf(buf, len, "(none)");
	else
		snprintf(buf, len, "(ref kind %u)", r.kind);
}

static void ref_names(const struct tpu_plan_op *op, struct ref_names *n)
{
	tpu_check_ref_name(op->dst, n->dst, sizeof(n->dst));
	tpu_check_ref_name(op->src0, n->src0, sizeof(n->src0));
	tpu_check_ref_name(op->src1, n->src1, sizeof(n->src1));
	tpu_check_ref_name(op->src2, n->src2, sizeof(n->src2));
}

static bool same_ref(struct tpu_plan_ref a, struct tpu_plan_ref b)
{
	return a.kind == b.kind && a.index == b.index;
}

/* --- which fields each opcode uses --- */

enum op_field {
	F_FN = 1 << 0, F_BCAST = 1 << 1, F_DOT = 1 << 2, F_AXIS = 1 << 3,
	F_BCAST2 = 1 << 4, F_SRC0 = 1 << 5, F_SRC1 = 1 << 6, F_SRC2 = 1 << 7,
	F_IMM = 1 << 8, F_IMM2 = 1 << 9, F_SCALAR_INDEX = 1 << 10,
};

static bool bcast_reads_ref(unsigned int bcast)
{
	return bcast <= TPU_BCAST_COL;
}

/* The fields @op may set, given its opcode, fn and broadcasts. */
static unsigned int used_fields(const struct tpu_plan_op *op)
{
	unsigned int f;

	switch (op->opcode) {
	case TPU_OP_DOT:
		return F_DOT | F_SRC0 | F_SRC1;
	case TPU_OP_UNARY:
		f = F_FN | F_SRC0;
		return op->fn == TPU_UNARY_CLAMP ? f | F_IMM | F_IMM2 : f;
	case TPU_OP_REDUCE:
		return F_FN | F_AXIS | F_SRC0;
	case TPU_OP_IOTA:
	case TPU_OP_ROLL:
		return F_AXIS | F_SCALAR_INDEX | (op->opcode == TPU_OP_ROLL ? F_SRC0 : 0);
	case TPU_OP_TRANSPOSE:
		return F_SRC0;
	case TPU_OP_GATHER:
		f = F_FN | F_AXIS | F_SRC0 | F_SRC1;
		return op->fn == TPU_GATHER_FILL ? f | F_IMM : f;
	case TPU_OP_BINARY:
	case TPU_OP_SELECT:
		f = F_BCAST | F_SRC0;
		f |= op->opcode == TPU_OP_BINARY ? F_FN : F_BCAST2;
		if (op->bcast == TPU_BCAST_IMM)
			f |= F_IMM;
		else if (op->bcast == TPU_BCAST_SMEM)
			f |= F_SRC1 | F_SCALAR_INDEX;
		else if (op->bcast == TPU_BCAST_SCALAR)
			f |= F_SCALAR_INDEX;
		else
			f |= F_SRC1;
		if (op->opcode == TPU_OP_SELECT)
			f |= op->bcast2 == TPU_BCAST_IMM ? F_IMM2 : F_SRC2;
		return f;
	case TPU_OP_COPY_START:
	case TPU_OP_COPY_WAIT:
		return F_SRC0 | F_SRC1 | F_SCALAR_INDEX;
	case TPU_OP_SEM_SIGNAL:
	case TPU_OP_SEM_WAIT:
		return F_SRC1 | F_SCALAR_INDEX;
	case TPU_OP_SCALAR_STORE:
		return F_SCALAR_INDEX;
	case TPU_OP_PRNG_SEED:
		return F_FN | F_SCALAR_INDEX;
	case TPU_OP_LOOP:
		return F_FN | F_IMM | F_SCALAR_INDEX |
		       (op->fn == TPU_LOOP_WHILE ? F_IMM2 : 0);
	case TPU_OP_DEBUG_PRINT:
		return F_FN | F_IMM | F_SRC0 | F_SRC1 | F_SRC2 |
		       (op->fn ? F_SCALAR_INDEX : 0);
	case TPU_OP_DELAY:
		return F_IMM;
	default:	/* TPU_OP_ZERO, TPU_OP_PRNG_BITS */
		return 0;
	}
}

static const char *const opcode_name[TPU_OP_COUNT] = {
	"zero", "dot", "unary", "binary", "reduce", "select", "iota",
	"copy_start", "copy_wait", "sem_signal", "sem_wait", "scalar_store",
	"transpose", "roll", "gather", "prng_seed", "prng_random_bits",
	"loop", "debug_print", "delay",
};

/* Every field @op's opcode does not use must be zero (or a none ref). */
static int check_unused(const struct tpu_plan_op *op, unsigned int i,
			struct tpu_job_result *res)
{
	unsigned int used = used_fields(op);
	const struct {
		unsigned int field;
		bool set;
		const char *name;
	} f[] = {
		{ F_FN, op->fn, "fn" },
		{ F_BCAST, op->bcast, "bcast" },
		{ F_DOT, op->dot, "dot" },
		{ F_AXIS, op->axis, "axis" },
		{ F_BCAST2, op->bcast2, "bcast2" },
		{ F_SRC0, !is_none(op->src0), "src0" },
		{ F_SRC1, !is_none(op->src1), "src1" },
		{ F_SRC2, !is_none(op->src2), "src2" },
		{ F_IMM, op->imm, "imm" },
		{ F_IMM2, op->imm2, "imm2" },
		{ F_SCALAR_INDEX, op->scalar_index.len, "scalar_index" },
	};

	for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
		if (!(used & f[k].field) && f[k].set)
			return tpu_check_error(res, "op %u: %s must be %s for opcode %s%s",
					       i, f[k].name,
					       f[k].field & (F_SRC0 | F_SRC1 | F_SRC2) ?
					       "(none)" : "zero",
					       opcode_name[op->opcode],
					       f[k].field & (F_IMM | F_IMM2 | F_SRC1 |
							     F_SRC2 | F_SCALAR_INDEX) ?
					       " with this fn/bcast" : "");
	return 0;
}

/* --- each opcode --- */

static int check_dot(struct tpu_plan *plan, unsigned int i,
		     struct tpu_plan_op *op, struct tpu_job_result *res)
{
	int64_t ar, ac, br, bc, cr, cc, ka, kb;
	uint8_t at, bt, ct;
	struct ref_names n;

	ref_names(op, &n);
	if (!is_vmem_ref(plan, op->src0) || !is_vmem_ref(plan, op->src1))
		return tpu_check_error(res, "op %u: dot sources must be VMEM refs, %s %s is not",
				       i, is_vmem_ref(plan, op->src0) ? "src1" : "src0",
				       is_vmem_ref(plan, op->src0) ? n.src1 : n.src0);
	if (same_ref(op->dst, op->src0) || same_ref(op->dst, op->src1))
		return tpu_check_error(res, "op %u: dot dst %s must not be one of its sources",
				       i, n.dst);
	if (op->dot & ~(unsigned int)TPU_DOT_ALL)
		return tpu_check_error(res, "op %u: dot flags %#x unknown",
				       i, op->dot);
	ref_shape(plan, op->src0, &ar, &ac, &at);
	ref_shape(plan, op->src1, &br, &bc, &bt);
	ref_shape(plan, op->dst, &cr, &cc, &ct);
	if (tpu_dtype_is_8bit(at) && tpu_dtype_is_8bit(bt)) {
		if (ct != TPU_DTYPE_INT32)
			return tpu_check_error(res, "op %u: %s x %s dot accumulates into int32, but dst %s is %s",
					       i, tpu_dtype_name(at),
					       tpu_dtype_name(bt), n.dst,
					       tpu_dtype_name(ct));
	} else if (at == bt && tpu_dtype_is_float(at)) {
		if (ct != TPU_DTYPE_F32)
			return tpu_check_error(res, "op %u: %s x %s dot accumulates into float32, but dst %s is %s",
					       i, tpu_dtype_name(at),
					       tpu_dtype_name(bt), n.dst,
					       tpu_dtype_name(ct));
	} else {
		return tpu_check_error(res, "op %u: dot of dtypes %s x %s (src0 %s, src1 %s) unsupported: the MXU multiplies float32 x float32, bfloat16 x bfloat16 or 8-bit x 8-bit",
				       i, tpu_dtype_name(at), tpu_dtype_name(bt),
				       n.src0, n.src1);
	}
	op->m = op->dot & TPU_DOT_LHS_CONTRACT_0 ? ac : ar;
	ka = op->dot & TPU_DOT_LHS_CONTRACT_0 ? ar : ac;
	op->n = op->dot & TPU_DOT_RHS_CONTRACT_1 ? br : bc;
	kb = op->dot & TPU_DOT_RHS_CONTRACT_1 ? bc : br;
	op->k = ka;
	if (ka != kb)
		return tpu_check_error(res, "op %u: contraction sizes differ: src0 %s gives %lld, src1 %s gives %lld",
				       i, n.src0, (long long)ka, n.src1,
				       (long long)kb);
	if (cr != op->m || cc != op->n)
		return tpu_check_error(res, "op %u: the product is %lldx%lld but dst %s is %lldx%lld",
				       i, (long long)op->m, (long long)op->n, n.dst,
				       (long long)cr, (long long)cc);
	return 0;
}

/* Shapes the messages print: a source's and the dst's. */
struct shapes {
	const char *dst;
	int64_t dr, dc;
};

/*
 * @src (the op's @field, named @name) is a VMEM ref of the shape @bcast
 * gives for dst (TPU_BCAST_NONE: dst's shape).
 */
static int check_src_shape(const struct tpu_plan *plan, unsigned int i,
			   struct tpu_plan_ref src, const char *field,
			   const char *name, unsigned int bcast,
			   const struct shapes *d, struct tpu_job_result *res)
{
	int64_t r, c, wr = bcast == TPU_BCAST_ROW ? 1 : d->dr;
	int64_t wc = bcast == TPU_BCAST_COL ? 1 : d->dc;
	uint8_t t;

	if (!is_vmem_ref(plan, src))
		return tpu_check_error(res, "op %u: %s %s is not a VMEM ref (%s)",
				       i, field, name, not_vmem_why(plan, src));
	ref_shape(plan, src, &r, &c, &t);
	if (r == wr && c == wc)
		return 0;
	if (!strcmp(field, "src0"))
		return tpu_check_error(res, "op %u: src0 %s is %lldx%lld but dst %s is %lldx%lld",
				       i, name, (long long)r, (long long)c, d->dst,
				       (long long)d->dr, (long long)d->dc);
	return tpu_check_error(res, "op %u: %s %s is %lldx%lld; %s %s needs %lldx%lld for dst %s (%lldx%lld)",
			       i, field, name, (long long)r, (long long)c,
			       strcmp(field, "src1") ? "bcast2" : "bcast",
			       bcast_name[bcast], (long long)wr, (long long)wc,
			       d->dst, (long long)d->dr, (long long)d->dc);
}

/* A broadcast source: src1 read with @bcast, or src2 with bcast2. */
static int check_bcast_src(const struct tpu_plan *plan, unsigned int i,
			   struct tpu_plan_ref src, unsigned int bcast,
			   const char *field, const char *name,
			   const struct shapes *d, struct tpu_job_result *res)
{
	if (bcast == TPU_BCAST_SMEM) {
		if (!is_smem_ref(plan, src))
			return tpu_check_error(res, "op %u: bcast smem needs an SMEM %s (scalar prefetch or SMEM scratch), %s is %s",
					       i, field, field, name);
		return 0;
	}
	if (!bcast_reads_ref(bcast))
		return 0;
	return check_src_shape(plan, i, src, field, name, bcast, d, res);
}

static int check_fn(const struct tpu_plan_op *op, unsigned int i,
		    struct tpu_job_result *res)
{
	unsigned int count = op->opcode == TPU_OP_UNARY ? TPU_UNARY_COUNT :
			     op->opcode == TPU_OP_BINARY ? TPU_BINARY_COUNT :
			     op->opcode == TPU_OP_REDUCE ? TPU_REDUCE_COUNT :
			     op->opcode == TPU_OP_GATHER ? TPU_GATHER_COUNT :
			     op->opcode == TPU_OP_PRNG_SEED ? TPU_PRNG_MAX_SEEDS :
			     op->opcode == TPU_OP_LOOP ? TPU_LOOP_COUNT :
			     op->opcode == TPU_OP_DEBUG_PRINT ? TPU_PRINT_MAX_SCALARS + 1 : 1;

	if (op->fn >= count)
		return tpu_check_error(res, "op %u: fn %u unknown for opcode %s (at most %u)",
				       i, op->fn, opcode_name[op->opcode], count - 1);
	return 0;
}

static int check_bcasts(const struct tpu_plan_op *op, unsigned int i,
			struct tpu_job_result *res)
{
	if (op->bcast >= TPU_BCAST_COUNT)
		return tpu_check_error(res, "op %u: bcast %u unknown", i, op->bcast);
	if (op->bcast2 >= TPU_BCAST_COUNT)
		return tpu_check_error(res, "op %u: bcast2 %u unknown", i, op->bcast2);
	if (op->bcast2 == TPU_BCAST_SMEM || op->bcast2 == TPU_BCAST_SCALAR)
		return tpu_check_error(res, "op %u: bcast2 %s: select's b may be a ref or imm2, the scalar program serves its a only",
				       i, bcast_name[op->bcast2]);
	if (op->axis > 1)
		return tpu_check_error(res, "op %u: axis %u, must be 0 or 1", i, op->axis);
	return 0;
}

/* The bitwise functions' operands and dst: integer types, whole immediates. */
static int check_bitwise(struct tpu_plan *plan, unsigned int i,
			 const struct tpu_plan_op *op, const struct ref_names *n,
			 struct tpu_job_result *res)
{
	int64_t r, c;
	uint8_t dt, st, bt;
	float imm;

	if (op->fn < TPU_BINARY_BITAND)
		return 0;
	ref_shape(plan, op->dst, &r, &c, &dt);
	ref_shape(plan, op->src0, &r, &c, &st);
	if (!tpu_dtype_is_int(dt) || !tpu_dtype_is_int(st))
		return tpu_check_error(res, "op %u: bitwise fn %u takes integer types: src0 %s is %s, dst %s is %s",
				       i, op->fn, n->src0, tpu_dtype_name(st),
				       n->dst, tpu_dtype_name(dt));
	if (op->bcast <= TPU_BCAST_SMEM && ref_shape(plan, op->src1, &r, &c, &bt) &&
	    !tpu_dtype_is_int(bt))
		return tpu_check_error(res, "op %u: bitwise fn %u takes integer types: src1 %s is %s",
				       i, op->fn, n->src1, tpu_dtype_name(bt));
	memcpy(&imm, &op->imm, sizeof(imm));
	if (op->bcast == TPU_BCAST_IMM &&
	    (!(imm >= -0x1p62f && imm <= 0x1p62f) || imm != (float)(int64_t)imm))
		return tpu_check_error(res, "op %u: bitwise fn %u of immediate %g, not a whole number",
				       i, op->fn, (double)imm);
	return 0;
}

/* The bit counts (population_count, clz): integer src0 and dst. */
static int check_bitcount(struct tpu_plan *plan, unsigned int i,
			  const struct tpu_plan_op *op, const struct ref_names *n,
			  struct tpu_job_result *res)
{
	int64_t r, c;
	uint8_t dt, st;

	if (op->fn != TPU_UNARY_POPCNT && op->fn != TPU_UNARY_CLZ)
		return 0;
	ref_shape(plan, op->dst, &r, &c, &dt);
	ref_shape(plan, op->src0, &r, &c, &st);
	if (!tpu_dtype_is_int(dt) || !tpu_dtype_is_int(st))
		return tpu_check_error(res, "op %u: bit count fn %u takes integer types: src0 %s is %s, dst %s is %s",
				       i, op->fn, n->src0, tpu_dtype_name(st),
				       n->dst, tpu_dtype_name(dt));
	return 0;
}

/* UNARY, BINARY, SELECT: src0 has dst's shape, the others broadcast. */
static int check_elementwise(struct tpu_plan *plan, unsigned int i,
			     struct tpu_plan_op *op, struct tpu_job_result *res)
{
	struct ref_names n;
	struct shapes d = { .dst = n.dst };
	uint8_t dt;
	int ret;

	ref_names(op, &n);
	ref_shape(plan, op->dst, &d.dr, &d.dc, &dt);
	ret = check_src_shape(plan, i, op->src0, "src0", n.src0,
			      TPU_BCAST_NONE, &d, res);
	if (ret || op->opcode == TPU_OP_UNARY)
		return ret ? ret : check_bitcount(plan, i, op, &n, res);
	ret = check_bcast_src(plan, i, op->src1, op->bcast, "src1", n.src1, &d,
			      res);
	if (!ret && op->opcode == TPU_OP_BINARY)
		ret = check_bitwise(plan, i, op, &n, res);
	if (ret || op->opcode == TPU_OP_BINARY)
		return ret;
	return check_bcast_src(plan, i, op->src2, op->bcast2, "src2", n.src2,
			       &d, res);
}

static int src0_not_vmem(const struct tpu_plan *plan, unsigned int i,
			 const struct tpu_plan_op *op, const struct ref_names *n,
			 struct tpu_job_result *res)
{
	return tpu_check_error(res, "op %u: src0 %s is not a VMEM ref (%s)",
			       i, n->src0, not_vmem_why(plan, op->src0));
}

static int check_reduce(struct tpu_plan *plan, unsigned int i,
			struct tpu_plan_op *op, struct tpu_job_result *res)
{
	int64_t dr, dc, sr, sc, wr, wc;
	uint8_t dt, st;
	struct ref_names n;

	ref_names(op, &n);
	if (!is_vmem_ref(plan, op->src0))
		return src0_not_vmem(plan, i, op, &n, res);
	ref_shape(plan, op->dst, &dr, &dc, &dt);
	ref_shape(plan, op->src0, &sr, &sc, &st);
	wr = op->axis ? sr : 1;
	wc = op->axis ? 1 : sc;
	if (dr != wr || dc != wc)
		return tpu_check_error(res, "op %u: reduce over axis %u of src0 %s (%lldx%lld) gives %lldx%lld, but dst %s is %lldx%lld",
				       i, op->axis, n.src0, (long long)sr,
				       (long long)sc, (long long)wr, (long long)wc,
				       n.dst, (long long)dr, (long long)dc);
	if (op->fn >= TPU_REDUCE_ARGMAX && dt != TPU_DTYPE_INT32)
		return tpu_check_error(res, "op %u: argmax/argmin gives indices: dst %s must be int32, not %s",
				       i, n.dst, tpu_dtype_name(dt));
	return 0;
}

/* The ref a window slices, or @r itself. */
static struct tpu_plan_ref base_ref(const struct tpu_plan *plan, struct tpu_plan_ref r)
{
	return r.kind == TPU_REF_WINDOW && r.index < plan->num_windows ?
	       plan->window[r.index].base : r;
}

/* TRANSPOSE, ROLL: src0 moved into dst, of its dtype, in another ref. */
static int check_move(struct tpu_plan *plan, unsigned int i,
		      const struct tpu_plan_op *op, struct tpu_job_result *res)
{
	bool transpose = op->opcode == TPU_OP_TRANSPOSE;
	int64_t dr, dc, sr, sc;
	uint8_t dt, st;
	struct ref_names n;

	ref_names(op, &n);
	if (!is_vmem_ref(plan, op->src0))
		return src0_not_vmem(plan, i, op, &n, res);
	if (same_ref(base_ref(plan, op->dst), base_ref(plan, op->src0)))
		return tpu_check_error(res, "op %u: %s dst %s and src0 %s are one ref: the elements move, so write into another",
				       i, opcode_name[op->opcode], n.dst, n.src0);
	ref_shape(plan, op->dst, &dr, &dc, &dt);
	ref_shape(plan, op->src0, &sr, &sc, &st);
	if (dt != st)
		return tpu_check_error(res, "op %u: %s keeps the dtype: src0 %s is %s but dst %s is %s",
				       i, opcode_name[op->opcode], n.src0,
				       tpu_dtype_name(st), n.dst, tpu_dtype_name(dt));
	if (dr != (transpose ? sc : sr) || dc != (transpose ? sr : sc))
		return tpu_check_error(res, "op %u: %s of src0 %s (%lldx%lld) gives %lldx%lld, but dst %s is %lldx%lld",
				       i, opcode_name[op->opcode], n.src0,
				       (long long)sr, (long long)sc,
				       (long long)(transpose ? sc : sr),
				       (long long)(transpose ? sr : sc), n.dst,
				       (long long)dr, (long long)dc);
	return 0;
}

/*
 * GATHER: src0's elements picked by src1's int32 indices along the axis,
 * into a dst of src0's dtype and src1's shape that is neither source.
 */
static int check_gather(struct tpu_plan *plan, unsigned int i,
			const struct tpu_plan_op *op, struct tpu_job_result *res)
{
	int64_t dr, dc, sr, sc, ir, ic;
	uint8_t dt, st, it;
	struct ref_names n;

	ref_names(op, &n);
	if (!is_vmem_ref(plan, op->src0) || !is_vmem_ref(plan, op->src1))
		return tpu_check_error(res, "op %u: gather sources must be VMEM refs, %s %s is not (%s)",
				       i, is_vmem_ref(plan, op->src0) ? "src1" : "src0",
				       is_vmem_ref(plan, op->src0) ? n.src1 : n.src0,
				       not_vmem_why(plan, is_vmem_ref(plan, op->src0) ?
						    op->src1 : op->src0));
	if (same_ref(base_ref(plan, op->dst), base_ref(plan, op->src0)) ||
	    same_ref(base_ref(plan, op->dst), base_ref(plan, op->src1)))
		return tpu_check_error(res, "op %u: gather dst %s is a source's ref: the elements move, so write into another",
				       i, n.dst);
	ref_shape(plan, op->dst, &dr, &dc, &dt);
	ref_shape(plan, op->src0, &sr, &sc, &st);
	ref_shape(plan, op->src1, &ir, &ic, &it);
	if (it != TPU_DTYPE_INT32)
		return tpu_check_error(res, "op %u: gather indices src1 %s are %s, must be int32",
				       i, n.src1, tpu_dtype_name(it));
	if (dt != st)
		return tpu_check_error(res, "op %u: gather keeps the dtype: src0 %s is %s but dst %s is %s",
				       i, n.src0, tpu_dtype_name(st), n.dst,
				       tpu_dtype_name(dt));
	if (op->axis ? ir != sr : ic != sc)
		return tpu_check_error(res, "op %u: gather along axis %u: indices src1 %s (%lldx%lld) need src0 %s's %lld %s",
				       i, op->axis, n.src1, (long long)ir,
				       (long long)ic, n.src0,
				       (long long)(op->axis ? sr : sc),
				       op->axis ? "rows" : "columns");
	if (dr != ir || dc != ic)
		return tpu_check_error(res, "op %u: gather gives src1 %s's shape %lldx%lld, but dst %s is %lldx%lld",
				       i, n.src1, (long long)ir, (long long)ic,
				       n.dst, (long long)dr, (long long)dc);
	return 0;
}

/* PRNG_BITS: 32 bits per element, so an int32 or uint32 dst. */
static int check_prng_bits(struct tpu_plan *plan, unsigned int i,
			   const struct tpu_plan_op *op, struct tpu_job_result *res)
{
	int64_t r, c;
	uint8_t t;
	struct ref_names n;

	ref_names(op, &n);
	ref_shape(plan, op->dst, &r, &c, &t);
	if (t != TPU_DTYPE_INT32 && t != TPU_DTYPE_UINT32)
		return tpu_check_error(res, "op %u: prng_random_bits dst %s is %s, must be int32 or uint32 (32 bits an element)",
				       i, n.dst, tpu_dtype_name(t));
	return 0;
}

/*
 * DEBUG_PRINT: the job has a print buffer; its refs, VMEM refs whose
 * elements the record copies, come first (a none source ends them).
 */
static int check_debug_print(const struct tpu_plan *plan, unsigned int i,
			     const struct tpu_plan_op *op,
			     struct tpu_job_result *res)
{
	const struct tpu_plan_ref refs[3] = { op->src0, op->src1, op->src2 };
	static const char *const field[3] = { "src0", "src1", "src2" };
	bool ended = false;

	if (!(plan->flags & TPU_JOB_F_PRINT))
		return tpu_check_error(res, "op %u: debug_print in a job without TPU_JOB_F_PRINT (no print buffer)",
				       i);
	if (!is_none(op->dst))
		return tpu_check_error(res, "op %u: dst must be (none) for opcode debug_print",
				       i);
	for (int k = 0; k < 3; k++) {
		char name[24];

		if (is_none(refs[k])) {
			ended = true;
			continue;
		}
		tpu_check_ref_name(refs[k], name, sizeof(name));
		if (ended)
			return tpu_check_error(res, "op %u: debug_print %s %s after a none source: its refs come first",
					       i, field[k], name);
		if (!is_vmem_ref(plan, refs[k]))
			return tpu_check_error(res, "op %u: debug_print %s %s is not a VMEM ref (%s)",
					       i, field[k], name,
					       not_vmem_why(plan, refs[k]));
	}
	return 0;
}

/*
 * The scalar program: one value where a broadcast or iota uses it, the
 * semaphore element of a copy; (index, amount) or (index, value) for the
 * semaphore ops and scalar stores.
 */
static int check_scalar_index(struct tpu_plan *plan, unsigned int i,
			      const struct tpu_plan_op *op,
			      struct tpu_job_result *res)
{
	bool copy = op->opcode == TPU_OP_COPY_START || op->opcode == TPU_OP_COPY_WAIT;

	if ((op->opcode == TPU_OP_IOTA || copy) && !op->scalar_index.len)
		return 0;
	if (!(used_fields(op) & F_SCALAR_INDEX))
		return 0;
	if (op->opcode == TPU_OP_PRNG_SEED)
		return op->scalar_index.len ?
		       tpu_check_prog(plan, op->depth, op->scalar_index, op->fn + 1, res,
				      "op", i, "scalar_index (prng seeds)") :
		       tpu_check_error(res, "op %u: scalar_index: prng_seed needs a program leaving its %u seed%s",
				       i, op->fn + 1, op->fn ? "s" : "");
	if (op->opcode == TPU_OP_DEBUG_PRINT)
		return op->scalar_index.len ?
		       tpu_check_prog(plan, op->depth, op->scalar_index, op->fn, res,
				      "op", i, "scalar_index (debug_print values)") :
		       tpu_check_error(res, "op %u: scalar_index: debug_print needs a program leaving its %u value%s",
				       i, op->fn, op->fn > 1 ? "s" : "");
	if (op->opcode == TPU_OP_ROLL)
		return op->scalar_index.len ?
		       tpu_check_prog(plan, op->depth, op->scalar_index, 1, res, "op", i,
				      "scalar_index (roll shift)") :
		       tpu_check_error(res, "op %u: scalar_index: roll needs a program leaving its shift",
				       i);
	if (op->opcode >= TPU_OP_SEM_SIGNAL) {
		if (!op->scalar_index.len)
			return tpu_check_error(res, "op %u: scalar_index: %s needs a program leaving 2 values (%s)",
					       i, opcode_name[op->opcode],
					       op->opcode == TPU_OP_SCALAR_STORE ?
					       "flat index, value" : "index, amount");
		return tpu_check_prog(plan, op->depth, op->scalar_index, 2, res, "op", i,
				      "scalar_index");
	}
	if (copy)
		return tpu_check_prog(plan, op->depth, op->scalar_index, 1, res, "op", i,
				      "scalar_index (semaphore element)");
	if (!op->scalar_index.len)
		return tpu_check_error(res, "op %u: scalar_index: bcast %s needs a program leaving one value",
				       i, bcast_name[op->bcast]);
	return tpu_check_prog(plan, op->depth, op->scalar_index, 1, res, "op", i,
			      "scalar_index");
}

static int check_dst(const struct tpu_plan *plan, unsigned int i,
		     const struct tpu_plan_op *op, struct tpu_job_result *res)
{
	char dst[24];

	tpu_check_ref_name(op->dst, dst, sizeof(dst));
	if (!is_vmem_ref(plan, op->dst))
		return tpu_check_error(res, "op %u: dst %s is not a VMEM ref (an output block or VMEM scratch)",
				       i, dst);
	if (op->dst.kind == TPU_REF_OPERAND && is_input_ref(plan, op->dst))
		return tpu_check_error(res, "op %u: dst is input operand %u, which is read-only",
				       i, op->dst.index);
	if (is_input_ref(plan, op->dst))
		return tpu_check_error(res, "op %u: dst %s is a window of input operand %u, which is read-only",
				       i, dst, plan->window[op->dst.index].base.index);
	return 0;
}

static void decode_fields(struct tpu_plan_op *op, const struct tpu_job_op *raw)
{
	*op = (struct tpu_plan_op){
		.opcode = raw->opcode, .fn = raw->fn, .bcast = raw->bcast,
		.dot = raw->dot, .axis = raw->axis, .bcast2 = raw->bcast2,
		.dst = { raw->dst.kind, raw->dst.index },
		.src0 = { raw->src0.kind, raw->src0.index },
		.src1 = { raw->src1.kind, raw->src1.index },
		.src2 = { raw->src2.kind, raw->src2.index },
		.pred = tpu_check_decode_prog(&raw->pred),
		.scalar_index = tpu_check_decode_prog(&raw->scalar_index),
		.imm = le32(raw->imm), .imm2 = le32(raw->imm2),
	};
}

int tpu_check_op(struct tpu_plan *plan, unsigned int i,
		 const struct tpu_job_op *raw, const struct tpu_loop_nest *nest,
		 struct tpu_job_result *res)
{
	struct tpu_plan_op *op = &plan->op[i];
	int ret;

	res->error.op = i;
	decode_fields(op, raw);
	op->depth = (uint8_t)nest->depth;
	if (raw->reserved0 || raw->pred.reserved || raw->scalar_index.reserved ||
	    !tpu_check_all_zero(raw->reserved1, sizeof(raw->reserved1)))
		return tpu_check_error(res, "op %u: reserved fields must be zero", i);
	if (op->opcode >= TPU_OP_COUNT)
		return tpu_check_error(res, "op %u: opcode %u unknown", i, op->opcode);
	ret = check_fn(op, i, res);
	if (!ret)
		ret = check_bcasts(op, i, res);
	if (!ret)
		ret = check_unused(op, i, res);
	if (!ret && op->opcode == TPU_OP_PRNG_SEED) {
		if (!is_none(op->dst))
			ret = tpu_check_error(res, "op %u: dst must be (none) for opcode prng_seed (the seeds key the core's PRNG)",
					      i);
	} else if (!ret && op->opcode == TPU_OP_LOOP) {
		if (!is_none(op->dst))
			ret = tpu_check_error(res, "op %u: dst must be (none) for opcode loop",
					      i);
	} else if (!ret && op->opcode == TPU_OP_DEBUG_PRINT) {
		ret = check_debug_print(plan, i, op, res);
	} else if (!ret && op->opcode == TPU_OP_DELAY) {
		if (!is_none(op->dst))
			ret = tpu_check_error(res, "op %u: dst must be (none) for opcode delay",
					      i);
		else if (!op->imm || op->imm > TPU_JOB_MAX_DELAY_NS)
			ret = tpu_check_error(res, "op %u: delay of %u ns (1 to %u)", i,
					      op->imm, TPU_JOB_MAX_DELAY_NS);
	} else if (!ret && !tpu_opcode_is_memory(op->opcode))
		ret = check_dst(plan, i, op, res);
	if (!ret && op->pred.len)
		ret = tpu_check_prog(plan, op->depth, op->pred, 1, res, "op", i, "predicate");
	if (!ret)
		ret = tpu_check_loop_refs(plan, i, op, res);
	if (!ret && op->opcode == TPU_OP_LOOP)
		return tpu_check_loop(plan, i, op, nest, res);
	if (!ret)
		ret = check_scalar_index(plan, i, op, res);
	if (ret)
		return ret;
	switch (op->opcode) {
	case TPU_OP_DOT:
		return check_dot(plan, i, op, res);
	case TPU_OP_REDUCE:
		return check_reduce(plan, i, op, res);
	case TPU_OP_UNARY:
	case TPU_OP_BINARY:
	case TPU_OP_SELECT:
		return check_elementwise(plan, i, op, res);
	case TPU_OP_COPY_START:
	case TPU_OP_COPY_WAIT:
		return tpu_check_copy(plan, i, op, res);
	case TPU_OP_SEM_SIGNAL:
	case TPU_OP_SEM_WAIT:
		return tpu_check_sem_op(plan, i, op, res);
	case TPU_OP_SCALAR_STORE:
		return tpu_check_scalar_store(plan, i, op, res);
	case TPU_OP_TRANSPOSE:
	case TPU_OP_ROLL:
		return check_move(plan, i, op, res);
	case TPU_OP_GATHER:
		return check_gather(plan, i, op, res);
	case TPU_OP_PRNG_BITS:
		return check_prng_bits(plan, i, op, res);
	default:	/* ZERO, IOTA: dst only */
		return 0;
	}
}
