// SPDX-License-Identifier: MIT
/*
 * pallas_call: check a kernel, grid spec and arrays the way Pallas TPU
 * would, build the job descriptor and submit it through the device's
 * backend. Every check names the operand or kernel operation it is about,
 * because the device's own checks can only name indices.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt_private.h"

/* Everything a call needs, resolved. */
struct call {
	const struct tpurt_kernel *k;
	const struct tpurt_grid_spec *gs;
	struct tpurt_compiler_params params;
	struct tpurt_array *const *args;
	struct tpurt_device *dev;
	const struct tpurt_device_info *info;
	struct tpurt_desc *d;
};

static const char *role_name(int role)
{
	return role == TPU_ROLE_SCALAR_PREFETCH ? "scalar prefetch" :
	       role == TPU_ROLE_INPUT ? "input" : "output";
}

static int check_args(struct call *c, int nargs)
{
	const struct tpurt_grid_spec *gs = c->gs;

	if (nargs != gs->num_operands)
		return tpurt_fail(-EINVAL,
				  "pallas_call: %d arrays given, the grid spec has %d (%d scalar prefetch, %d inputs, %d outputs)",
				  nargs, gs->num_operands, gs->num_prefetch,
				  gs->num_inputs, gs->num_outputs);
	if (!gs->num_outputs)
		return tpurt_fail(-EINVAL, "pallas_call: the grid spec has no output");
	for (int i = 0; i < nargs; i++) {
		if (!c->args[i])
			return tpurt_fail(-EINVAL, "pallas_call: array for %s '%s' is NULL",
					  role_name(gs->operand[i].role), gs->operand[i].name);
		if (c->args[i]->transposed)
			return tpurt_fail(-EINVAL,
					  "pallas_call: %s '%s' is a transpose view; pass its base array with a transposed block spec (pallas_call takes arrays in their physical layout)",
					  role_name(gs->operand[i].role), gs->operand[i].name);
		if (c->args[i]->buf->dev != c->args[0]->buf->dev)
			return tpurt_fail(-EINVAL,
					  "pallas_call: %s '%s' is on another device than '%s'",
					  role_name(gs->operand[i].role), gs->operand[i].name,
					  gs->operand[0].name);
	}
	c->dev = c->args[0]->buf->dev;
	return tpurt_device_cached_info(c->dev, &c->info);
}

static void format_shape(char *buf, size_t len, int rank, const int64_t *shape)
{
	size_t at = (size_t)snprintf(buf, len, "(");

	for (int d = 0; d < rank && at < len; d++)
		at += (size_t)snprintf(buf + at, len - at, "%s%lld", d ? ", " : "",
				       (long long)shape[d]);
	if (at < len)
		snprintf(buf + at, len - at, "%s)", rank == 1 ? "," : "");
}

/*
 * Pallas TPU: the last block dim is a multiple of 128 or the array's, the
 * second-to-last a multiple of 8 or the array's; a rank-1 block is a
 * multiple of 128 or the whole array.
 */
int tpurt_check_block_shape(const struct tpurt_operand_spec *o, int rank,
			    const int64_t *shape)
{
	static const int64_t tile[2] = { 8, 128 };
	const struct tpurt_block_spec *b = &o->spec;
	char bs[96], as[96];

	format_shape(bs, sizeof(bs), b->rank, b->shape);
	format_shape(as, sizeof(as), rank, shape);
	if (b->rank != rank)
		return tpurt_fail(-EINVAL, "%s '%s': block shape %s has rank %d, the array %s rank %d",
				  role_name(o->role), o->name, bs, b->rank, as, rank);
	for (int d = rank >= 2 ? rank - 2 : rank - 1; d < rank; d++) {
		int64_t t = tile[d == rank - 1 ? 1 : 0];

		if (b->shape[d] % t && b->shape[d] != shape[d])
			return tpurt_fail(-EINVAL,
					  "%s '%s': block shape %s: dimension %d is %lld, which is neither a multiple of %lld nor the array's %lld (array %s); Pallas TPU tiles the last two dimensions by (8, 128)",
					  role_name(o->role), o->name, bs, d,
					  (long long)b->shape[d], (long long)t,
					  (long long)shape[d], as);
	}
	return 0;
}

static int check_operand(struct call *c, int i)
{
	const struct tpurt_operand_spec *o = &c->gs->operand[i];
	const struct tpurt_array *a = c->args[i];

	if (o->role == TPU_ROLE_SCALAR_PREFETCH) {
		if (a->dtype != TPURT_INT32)
			return tpurt_fail(-EINVAL,
					  "scalar prefetch '%s': the array is %s, must be int32",
					  o->name, tpurt_dtype_name(a->dtype));
		return 0;
	}
	return tpurt_check_block_shape(o, a->rank, a->shape);
}

static uint64_t block_bytes(const struct tpurt_block_spec *b, enum tpurt_dtype t)
{
	uint64_t n = tpurt_dtype_size(t);

	for (int d = 0; d < b->rank; d++)
		n *= (uint64_t)b->shape[d];
	return n;
}

static uint64_t scratch_bytes(const struct tpurt_scratch_spec *s)
{
	uint64_t n = tpurt_dtype_size(s->dtype);

	for (int d = 0; d < s->rank; d++)
		n *= (uint64_t)s->shape[d];
	return n;
}

/* Double-buffered blocks plus VMEM scratch, against the scoped limit. */
static int check_vmem(struct call *c)
{
	const struct tpurt_grid_spec *gs = c->gs;
	uint64_t limit = c->params.vmem_limit_bytes ? c->params.vmem_limit_bytes :
			 c->info->vmem_limit;
	uint64_t need = 0;
	char parts[256] = "";
	size_t at = 0;

	if (limit > c->info->vmem_size)
		return tpurt_fail(-EINVAL,
				  "vmem_limit_bytes %llu is over the device's %llu bytes of VMEM",
				  (unsigned long long)limit,
				  (unsigned long long)c->info->vmem_size);
	for (int i = gs->num_prefetch; i < gs->num_operands; i++) {
		uint64_t b = block_bytes(&gs->operand[i].spec, c->args[i]->dtype);

		need += 2 * b;
		if (at < sizeof(parts))
			at += (size_t)snprintf(parts + at, sizeof(parts) - at, "%s'%s' 2 x %llu",
					       at ? ", " : "", gs->operand[i].name,
					       (unsigned long long)b);
	}
	for (int i = 0; i < gs->num_scratch; i++) {
		if (gs->scratch[i].space != TPURT_VMEM)
			continue;
		need += scratch_bytes(&gs->scratch[i]);
		if (at < sizeof(parts))
			at += (size_t)snprintf(parts + at, sizeof(parts) - at, ", scratch '%s' %llu",
					       gs->scratch[i].name,
					       (unsigned long long)scratch_bytes(&gs->scratch[i]));
	}
	if (need > limit)
		return tpurt_fail(-ENOSPC,
				  "VMEM: the kernel needs %llu bytes (%s) but the limit is %llu (over by %llu); use smaller blocks or raise vmem_limit_bytes (the device has %llu)",
				  (unsigned long long)need, parts,
				  (unsigned long long)limit,
				  (unsigned long long)(need - limit),
				  (unsigned long long)c->info->vmem_size);
	c->d->h.vmem_limit_bytes = c->params.vmem_limit_bytes;
	return 0;
}

static int check_smem(struct call *c)
{
	const struct tpurt_grid_spec *gs = c->gs;
	uint64_t need = 0;

	for (int i = 0; i < gs->num_prefetch; i++)
		need += tpurt_array_nbytes(c->args[i]);
	for (int i = 0; i < gs->num_scratch; i++)
		if (gs->scratch[i].space == TPURT_SMEM)
			need += scratch_bytes(&gs->scratch[i]);
	if (need > c->info->smem_size)
		return tpurt_fail(-ENOSPC,
				  "SMEM: scalar prefetch and SMEM scratch need %llu bytes, the device has %llu (over by %llu)",
				  (unsigned long long)need,
				  (unsigned long long)c->info->smem_size,
				  (unsigned long long)(need - c->info->smem_size));
	return 0;
}

/* "parallel, parallel, arbitrary" into the header. */
static int parse_semantics(struct call *c)
{
	const char *p = c->params.dimension_semantics;
	struct tpu_job_header *h = &c->d->h;
	int d = 0;

	for (int i = 0; i < c->gs->rank; i++)
		h->dim_semantics[i] = TPU_DIM_ARBITRARY;
	if (!p)
		return 0;
	while (*p) {
		size_t n;

		p += strspn(p, " ,");
		n = strcspn(p, " ,");
		if (!n)
			break;
		if (d == c->gs->rank)
			return tpurt_fail(-EINVAL,
					  "dimension_semantics '%s': more entries than the grid's %d dimensions",
					  c->params.dimension_semantics, c->gs->rank);
		if (n == 8 && !strncmp(p, "parallel", 8))
			h->dim_semantics[d++] = TPU_DIM_PARALLEL;
		else if (n == 9 && !strncmp(p, "arbitrary", 9))
			h->dim_semantics[d++] = TPU_DIM_ARBITRARY;
		else
			return tpurt_fail(-EINVAL,
					  "dimension_semantics '%s': '%.*s' is neither parallel nor arbitrary",
					  c->params.dimension_semantics, (int)n, p);
		p += n;
	}
	if (d != c->gs->rank)
		return tpurt_fail(-EINVAL,
				  "dimension_semantics '%s': %d entries for a grid of %d dimensions",
				  c->params.dimension_semantics, d, c->gs->rank);
	return 0;
}

static int fill_operands(struct call *c)
{
	const struct tpurt_grid_spec *gs = c->gs;
	struct tpu_job_header *h = &c->d->h;
	int ret;

	h->grid_rank = (uint8_t)gs->rank;
	for (int d = 0; d < gs->rank; d++)
		h->grid[d] = (uint32_t)gs->grid[d];
	h->num_operands = (uint8_t)gs->num_operands;
	h->num_scalar_prefetch = (uint8_t)gs->num_prefetch;
	for (int i = 0; i < gs->num_operands; i++) {
		const struct tpurt_operand_spec *o = &gs->operand[i];
		const struct tpurt_array *a = c->args[i];
		struct tpu_job_operand *jo = &c->d->operand[i];

		ret = check_operand(c, i);
		if (ret)
			return ret;
		jo->slot = (uint32_t)i;
		jo->role = (uint8_t)o->role;
		jo->dtype = (uint8_t)a->dtype;
		jo->rank = (uint8_t)a->rank;
		for (int d = 0; d < a->rank; d++) {
			jo->shape[d] = (uint64_t)a->shape[d];
			if (o->role != TPU_ROLE_SCALAR_PREFETCH)
				jo->block[d] = (uint32_t)o->spec.shape[d];
		}
		if (o->role != TPU_ROLE_SCALAR_PREFETCH) {
			ret = tpurt_desc_add_program(c->d, &o->map, &jo->index_map);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static void fill_scratch(struct call *c)
{
	const struct tpurt_grid_spec *gs = c->gs;

	c->d->h.num_scratch = (uint8_t)gs->num_scratch;
	for (int i = 0; i < gs->num_scratch; i++) {
		const struct tpurt_scratch_spec *s = &gs->scratch[i];
		struct tpu_job_scratch *js = &c->d->scratch[i];

		js->space = s->space == TPURT_SMEM ? TPU_MEM_SMEM : TPU_MEM_VMEM;
		js->dtype = (uint8_t)s->dtype;
		js->rank = (uint8_t)s->rank;
		for (int d = 0; d < s->rank; d++)
			js->shape[d] = (uint32_t)s->shape[d];
	}
}

/* --- the kernel's refs --- */

struct ref {
	struct tpu_job_ref jr;
	const char *name;
	int role;			/* operand role, or -1 for scratch */
	int smem;			/* SMEM array: prefetch or SMEM scratch */
	enum tpurt_dtype dtype;
	uint64_t rows, cols;		/* the 2-D view of a block or scratch */
};

static const char *const opcode_names[] = { "zero", "dot", "unary", "binary" };

static void view(int rank, const int64_t *shape, struct ref *r)
{
	r->rows = 1;
	for (int d = 0; d < rank - 1; d++)
		r->rows *= (uint64_t)shape[d];
	r->cols = (uint64_t)shape[rank - 1];
}

static void ref_of(struct call *c, int index, struct ref *r)
{
	const struct tpurt_grid_spec *gs = c->gs;

	memset(r, 0, sizeof(*r));
	if (index < gs->num_operands) {
		const struct tpurt_operand_spec *o = &gs->operand[index];

		r->jr = (struct tpu_job_ref){ TPU_REF_OPERAND, (uint8_t)index };
		r->name = o->name;
		r->role = o->role;
		r->dtype = c->args[index]->dtype;
		r->smem = o->role == TPU_ROLE_SCALAR_PREFETCH;
		if (!r->smem)
			view(o->spec.rank, o->spec.shape, r);
	} else {
		const struct tpurt_scratch_spec *s = &gs->scratch[index - gs->num_operands];

		r->jr = (struct tpu_job_ref){ TPU_REF_SCRATCH,
					      (uint8_t)(index - gs->num_operands) };
		r->name = s->name;
		r->role = -1;
		r->dtype = s->dtype;
		r->smem = s->space == TPURT_SMEM;
		view(s->rank, s->shape, r);
	}
}

static int op_fail(int n, const struct tpurt_kernel_op *op, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int op_fail(int n, const struct tpurt_kernel_op *op, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tpurt_fail(-EINVAL, "kernel op %d (%s): %s", n,
			  opcode_names[op->opcode], msg);
}

/* Resolve "name" or "#N" in Pallas's ref order. */
static int resolve(struct call *c, int n, const struct tpurt_kernel_op *op,
		   const char *text, struct ref *r)
{
	const struct tpurt_grid_spec *gs = c->gs;
	int nrefs = gs->num_operands + gs->num_scratch;
	char names[256] = "";
	size_t at = 0;

	if (text[0] == '#') {
		char *end;
		long i = strtol(text + 1, &end, 10);

		if (*end || end == text + 1 || i < 0 || i >= nrefs)
			return op_fail(n, op, "ref '%s': refs are #0 to #%d", text,
				       nrefs - 1);
		ref_of(c, (int)i, r);
		return 0;
	}
	for (int i = 0; i < nrefs; i++) {
		ref_of(c, i, r);
		if (!strcmp(r->name, text))
			return 0;
		if (at < sizeof(names))
			at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s",
					       i ? ", " : "", r->name);
	}
	return op_fail(n, op, "no ref named '%s' (refs: %s)", text, names);
}

static int is_8bit(enum tpurt_dtype t)
{
	return t == TPURT_INT8 || t == TPURT_UINT8;
}

static int check_dst(struct call *c, int n, const struct tpurt_kernel_op *op,
		     const struct ref *dst)
{
	if (dst->role == TPU_ROLE_INPUT)
		return op_fail(n, op, "'%s' is an input: input blocks are read-only",
			       dst->name);
	if (dst->smem)
		return op_fail(n, op, "'%s' is in SMEM: the body writes VMEM refs only",
			       dst->name);
	return 0;
}

static int check_vmem_src(int n, const struct tpurt_kernel_op *op,
			  const struct ref *r)
{
	if (r->smem)
		return op_fail(n, op, "'%s' is in SMEM; only SMEM broadcasts read it",
			       r->name);
	return 0;
}

static int check_dot(int n, const struct tpurt_kernel_op *op,
		     const struct ref *dst, const struct ref *a,
		     const struct ref *b)
{
	uint64_t m = op->dot & TPU_DOT_LHS_CONTRACT_0 ? a->cols : a->rows;
	uint64_t ka = op->dot & TPU_DOT_LHS_CONTRACT_0 ? a->rows : a->cols;
	uint64_t kb = op->dot & TPU_DOT_RHS_CONTRACT_1 ? b->cols : b->rows;
	uint64_t nn = op->dot & TPU_DOT_RHS_CONTRACT_1 ? b->rows : b->cols;
	int f = (a->dtype == TPURT_F32 && b->dtype == TPURT_F32) ||
		(a->dtype == TPURT_BF16 && b->dtype == TPURT_BF16);

	if (!f && !(is_8bit(a->dtype) && is_8bit(b->dtype)))
		return op_fail(n, op, "no MXU routine for %s x %s (f32 x f32, bf16 x bf16, 8-bit x 8-bit)",
			       tpurt_dtype_name(a->dtype), tpurt_dtype_name(b->dtype));
	if (f && dst->dtype != TPURT_F32)
		return op_fail(n, op, "%s x %s accumulates into float32 (preferred_element_type), but '%s' is %s; accumulate in an f32 scratch and cast at the last step",
			       tpurt_dtype_name(a->dtype), tpurt_dtype_name(b->dtype),
			       dst->name, tpurt_dtype_name(dst->dtype));
	if (!f && dst->dtype != TPURT_INT32)
		return op_fail(n, op, "8-bit inputs accumulate into int32, but '%s' is %s",
			       dst->name, tpurt_dtype_name(dst->dtype));
	if (ka != kb)
		return op_fail(n, op, "contraction sizes differ: '%s' gives %llu, '%s' gives %llu",
			       a->name, (unsigned long long)ka, b->name,
			       (unsigned long long)kb);
	if (dst->rows != m || dst->cols != nn)
		return op_fail(n, op, "the product is %llu x %llu but '%s' is %llu x %llu",
			       (unsigned long long)m, (unsigned long long)nn, dst->name,
			       (unsigned long long)dst->rows,
			       (unsigned long long)dst->cols);
	return 0;
}

static int check_same_shape(int n, const struct tpurt_kernel_op *op,
			    const struct ref *dst, const struct ref *a)
{
	if (dst->rows != a->rows || dst->cols != a->cols)
		return op_fail(n, op, "'%s' is %llu x %llu but '%s' is %llu x %llu",
			       a->name, (unsigned long long)a->rows,
			       (unsigned long long)a->cols, dst->name,
			       (unsigned long long)dst->rows,
			       (unsigned long long)dst->cols);
	return 0;
}

static int check_bcast(int n, const struct tpurt_kernel_op *op,
		       const struct ref *dst, const struct ref *b)
{
	uint64_t rows = op->bcast == TPU_BCAST_ROW ? 1 : dst->rows;
	uint64_t cols = op->bcast == TPU_BCAST_COL ? 1 : dst->cols;
	static const char *const kind[] = { "elementwise", "row", "column" };

	if (b->rows != rows || b->cols != cols)
		return op_fail(n, op, "%s operand '%s' is %llu x %llu, expected %llu x %llu",
			       kind[op->bcast], b->name, (unsigned long long)b->rows,
			       (unsigned long long)b->cols, (unsigned long long)rows,
			       (unsigned long long)cols);
	return 0;
}

/* The op's predicates, and-ed, as one program. */
static int compile_pred(struct call *c, int n, const struct tpurt_kernel_op *op,
			struct tpu_job_prog *out)
{
	struct tpurt_index_map_env env;
	struct tpurt_program all = { .nresults = 1 }, one;
	char what[64];

	memset(out, 0, sizeof(*out));
	if (!op->npred)
		return 0;
	tpurt_grid_spec_env(c->gs, &env);
	snprintf(what, sizeof(what), "kernel op %d (%s): predicate", n,
		 opcode_names[op->opcode]);
	for (int i = 0; i < op->npred; i++) {
		int ret = tpurt_index_map_compile_as(op->pred[i], &env, 1, what, &one);

		if (ret)
			return ret;
		if (all.len + one.len + (i ? 1 : 0) > TPURT_PROGRAM_MAX_LEN)
			return op_fail(n, op, "nested predicates longer than %d instructions",
				       TPURT_PROGRAM_MAX_LEN);
		memcpy(&all.insn[all.len], one.insn, one.len * sizeof(one.insn[0]));
		all.len += one.len;
		if (i)
			all.insn[all.len++] = (struct tpurt_insn){ TPU_INSN_AND, 0 };
	}
	return tpurt_desc_add_program(c->d, &all, out);
}

static int compile_smem_index(struct call *c, int n,
			      const struct tpurt_kernel_op *op,
			      struct tpu_job_prog *out)
{
	struct tpurt_index_map_env env;
	struct tpurt_program prog;
	char what[64];
	int ret;

	tpurt_grid_spec_env(c->gs, &env);
	snprintf(what, sizeof(what), "kernel op %d (binary): SMEM index", n);
	ret = tpurt_index_map_compile_as(op->index, &env, 1, what, &prog);
	return ret ? ret : tpurt_desc_add_program(c->d, &prog, out);
}

static int check_op(struct call *c, int n, const struct tpurt_kernel_op *op,
		    struct tpu_job_op *jo)
{
	struct ref dst, a = { 0 }, b = { 0 };
	int ret = resolve(c, n, op, op->dst, &dst);

	if (!ret)
		ret = check_dst(c, n, op, &dst);
	if (!ret && op->src0[0])
		ret = resolve(c, n, op, op->src0, &a);
	if (!ret && op->src0[0])
		ret = check_vmem_src(n, op, &a);
	if (!ret && op->src1[0])
		ret = resolve(c, n, op, op->src1, &b);
	if (ret)
		return ret;
	switch (op->opcode) {
	case TPU_OP_DOT:
		ret = check_vmem_src(n, op, &b);
		if (!ret)
			ret = check_dot(n, op, &dst, &a, &b);
		break;
	case TPU_OP_UNARY:
		ret = check_same_shape(n, op, &dst, &a);
		break;
	case TPU_OP_BINARY:
		ret = check_same_shape(n, op, &dst, &a);
		if (ret || op->bcast == TPU_BCAST_IMM)
			break;
		if (op->bcast == TPU_BCAST_SMEM) {
			if (!b.smem)
				ret = op_fail(n, op, "'%s' is not in SMEM (a scalar-prefetch ref or SMEM scratch)",
					      b.name);
			else
				ret = compile_smem_index(c, n, op, &jo->scalar_index);
			break;
		}
		ret = check_vmem_src(n, op, &b);
		if (!ret)
			ret = check_bcast(n, op, &dst, &b);
		break;
	}
	if (ret)
		return ret;
	jo->opcode = op->opcode;
	jo->fn = op->fn;
	jo->bcast = op->bcast;
	jo->dot = op->dot;
	jo->dst = dst.jr;
	jo->src0 = a.jr;
	jo->src1 = b.jr;
	if (op->bcast == TPU_BCAST_IMM && op->opcode == TPU_OP_BINARY)
		memcpy(&jo->imm, &op->imm, sizeof(jo->imm));
	return compile_pred(c, n, op, &jo->pred);
}

static int fill_ops(struct call *c)
{
	const struct tpurt_kernel *k = c->k;

	if (!k->nops)
		return tpurt_fail(-EINVAL, "kernel: no operations");
	if (k->nwhen)
		return tpurt_fail(-EINVAL, "kernel: %d when() block(s) not ended",
				  k->nwhen);
	for (int i = 0; i < k->nops; i++) {
		int ret = check_op(c, i, &k->op[i], &c->d->op[i]);

		if (ret)
			return ret;
	}
	c->d->h.num_ops = (uint16_t)k->nops;
	return 0;
}

static int build(struct call *c, int nargs, void **blobp, size_t *lenp)
{
	int ret;

	c->d = calloc(1, sizeof(*c->d));
	if (!c->d)
		return tpurt_fail(-ENOMEM, "out of memory");
	ret = check_args(c, nargs);
	if (!ret)
		ret = fill_operands(c);
	if (!ret)
		ret = check_vmem(c);
	if (!ret)
		ret = check_smem(c);
	if (!ret)
		ret = parse_semantics(c);
	if (!ret) {
		fill_scratch(c);
		ret = fill_ops(c);
	}
	if (!ret) {
		c->d->h.flags = c->params.flags & TPURT_DEBUG ? TPU_JOB_F_DEBUG : 0;
		ret = tpurt_desc_finish(c->d, blobp, lenp);
	}
	free(c->d);
	return ret;
}

static void init_call(struct call *c, const struct tpurt_kernel *k,
		      const struct tpurt_grid_spec *gs,
		      const struct tpurt_compiler_params *params,
		      struct tpurt_array *const *args)
{
	memset(c, 0, sizeof(*c));
	c->k = k;
	c->gs = gs;
	c->args = args;
	if (params)
		c->params = *params;
}

int tpurt_pallas_call_build(const struct tpurt_kernel *k,
			    const struct tpurt_grid_spec *gs,
			    const struct tpurt_compiler_params *params,
			    struct tpurt_array *const *args, int nargs,
			    void **descp, size_t *lenp)
{
	struct call c;

	*descp = NULL;
	init_call(&c, k, gs, params, args);
	return build(&c, nargs, descp, lenp);
}

int tpurt_pallas_call_async(const struct tpurt_kernel *k,
			    const struct tpurt_grid_spec *gs,
			    const struct tpurt_compiler_params *params,
			    struct tpurt_array *const *args, int nargs,
			    struct tpurt_job **jobp)
{
	struct tpurt_buffer *bufs[TPU_JOB_MAX_OPERANDS];
	struct tpurt_job *job;
	struct call c;
	void *blob;
	size_t len;
	int ret;

	*jobp = NULL;
	init_call(&c, k, gs, params, args);
	ret = build(&c, nargs, &blob, &len);
	if (ret)
		return ret;
	job = calloc(1, sizeof(*job));
	if (!job) {
		free(blob);
		return tpurt_fail(-ENOMEM, "out of memory");
	}
	job->dev = c.dev;
	job->nrefs = (unsigned int)gs->num_operands;
	for (int i = 0; i < nargs; i++) {
		bufs[i] = args[i]->buf;
		strcpy(job->names[i], gs->operand[i].name);
	}
	job->submit_ns = tpurt_now_ns();
	ret = c.dev->ops->job_submit(job, blob, len, bufs, (unsigned int)nargs);
	free(blob);
	if (ret) {
		free(job);
		return ret;
	}
	*jobp = job;
	return 0;
}

int tpurt_pallas_call(const struct tpurt_kernel *k,
		      const struct tpurt_grid_spec *gs,
		      const struct tpurt_compiler_params *params,
		      struct tpurt_array *const *args, int nargs,
		      struct tpurt_job_stats *stats)
{
	struct tpurt_job *job;
	int ret = tpurt_pallas_call_async(k, gs, params, args, nargs, &job);

	if (ret)
		return ret;
	ret = tpurt_job_wait(job, stats);
	tpurt_job_free(job);
	return ret;
}
