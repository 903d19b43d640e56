// SPDX-License-Identifier: MIT
/*
 * pallas_call: check a kernel, grid spec and arrays the way Pallas TPU
 * would, build the job descriptor, run the device's own decoder on it
 * (rules/tpu_job_check.c, the code the device runs) and submit it through
 * the device's backend. The runtime checks what the device cannot see: the
 * arguments against the grid spec, Pallas TPU's block shapes, the text of
 * index maps and predicates, the kernel's ref names. The device's rules
 * (dtypes, shapes and broadcasts of the kernel's ops, VMEM and SMEM) are
 * the decoder's alone; its message is put in the call's words, with the
 * names of the operands and scratch buffers and the kernel op's number and
 * kind, because the device can only name indices.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpu_plan.h"
#include "tpurt_private.h"

/* One pallas_call's job as it is built: the call, resolved, and its
 * descriptor. */
struct pallas_build {
	const struct tpurt_kernel *k;
	const struct tpurt_grid_spec *gs;
	struct tpurt_compiler_params params;
	struct tpurt_array *const *args;
	struct tpurt_device *dev;
	const struct tpurt_device_info *info;
	struct tpurt_desc *d;
	/* the kernel's temporaries in the job's scratch, after the grid spec's */
	int slot[TPURT_KERNEL_MAX_TEMPS], slot_temp[TPURT_KERNEL_MAX_TEMPS];
	int nslots;
};

static const char *role_name(int role)
{
	return role == TPU_ROLE_SCALAR_PREFETCH ? "scalar prefetch" :
	       role == TPU_ROLE_INPUT ? "input" : "output";
}

static int check_args(struct pallas_build *c, int nargs)
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
		at += shape[d] == TPURT_SQUEEZED ?
		      (size_t)snprintf(buf + at, len - at, "%sNone", d ? ", " : "") :
		      (size_t)snprintf(buf + at, len - at, "%s%lld", d ? ", " : "",
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

		if (b->shape[d] == TPURT_SQUEEZED)
			continue;
		if (b->shape[d] % t && b->shape[d] != shape[d])
			return tpurt_fail(-EINVAL,
					  "%s '%s': block shape %s: dimension %d is %lld, which is neither a multiple of %lld nor the array's %lld (array %s); Pallas TPU tiles the last two dimensions by (8, 128)",
					  role_name(o->role), o->name, bs, d,
					  (long long)b->shape[d], (long long)t,
					  (long long)shape[d], as);
	}
	return 0;
}

/* Pallas's block shapes; dtypes (scalar prefetch is int32) are the device's. */
static int check_operand(struct pallas_build *c, int i)
{
	const struct tpurt_operand_spec *o = &c->gs->operand[i];
	const struct tpurt_array *a = c->args[i];
	char as[96], ds[96];

	if (o->has_dtype && a->dtype != o->dtype)
		return tpurt_fail(-EINVAL, "%s '%s': the array is %s, the grid spec declares %s",
				  role_name(o->role), o->name, tpurt_dtype_name(a->dtype),
				  tpurt_dtype_name(o->dtype));
	if (o->role != TPU_ROLE_SCALAR_PREFETCH)
		return tpurt_check_block_shape(o, a->rank, a->shape);
	if (o->prefetch_rank && (a->rank != o->prefetch_rank ||
				 memcmp(a->shape, o->prefetch_shape,
					sizeof(a->shape[0]) * (size_t)a->rank))) {
		format_shape(as, sizeof(as), a->rank, a->shape);
		format_shape(ds, sizeof(ds), o->prefetch_rank, o->prefetch_shape);
		return tpurt_fail(-EINVAL, "scalar prefetch '%s': the array's shape is %s, the grid spec declares %s",
				  o->name, as, ds);
	}
	return 0;
}

/* "parallel, parallel, arbitrary" into the header. */
static int parse_semantics(struct pallas_build *c)
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

static int fill_operands(struct pallas_build *c)
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
				jo->block[d] = o->spec.shape[d] == TPURT_SQUEEZED ?
					       1 : (uint32_t)o->spec.shape[d];
		}
		if (o->role != TPU_ROLE_SCALAR_PREFETCH) {
			ret = tpurt_desc_add_program(c->d, &o->map, &jo->index_map);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* The grid spec's scratch, then the kernel's temporaries (VMEM, 2-D). */
static int fill_scratch(struct pallas_build *c)
{
	const struct tpurt_grid_spec *gs = c->gs;
	const struct tpurt_kernel *k = c->k;

	c->nslots = tpurt_kernel_temp_slots(k, c->slot, c->slot_temp);
	if (gs->num_scratch + c->nslots > TPU_JOB_MAX_SCRATCH)
		return tpurt_fail(-E2BIG,
				  "pallas_call: %d scratch buffers and %d for the kernel's temporaries exceed the job's %d",
				  gs->num_scratch, c->nslots, TPU_JOB_MAX_SCRATCH);
	c->d->h.num_scratch = (uint8_t)(gs->num_scratch + c->nslots);
	for (int i = 0; i < gs->num_scratch; i++) {
		const struct tpurt_scratch_spec *s = &gs->scratch[i];
		struct tpu_job_scratch *js = &c->d->scratch[i];

		js->space = s->space == TPURT_SMEM ? TPU_MEM_SMEM : TPU_MEM_VMEM;
		js->dtype = (uint8_t)s->dtype;
		js->rank = (uint8_t)s->rank;
		for (int d = 0; d < s->rank; d++)
			js->shape[d] = (uint32_t)s->shape[d];
	}
	for (int s = 0; s < c->nslots; s++) {
		const struct tpurt_kernel_temp *t = &k->temp[c->slot_temp[s]];
		struct tpu_job_scratch *js = &c->d->scratch[gs->num_scratch + s];

		js->space = TPU_MEM_VMEM;
		js->dtype = (uint8_t)t->dtype;
		js->rank = 2;
		js->shape[0] = (uint32_t)t->rows;
		js->shape[1] = (uint32_t)t->cols;
	}
	return 0;
}

/* --- the kernel's refs --- */

/* Ref @index in Pallas's order (operands, then scratch) as the job names it. */
static struct tpu_job_ref job_ref(const struct pallas_build *c, int index)
{
	const struct tpurt_grid_spec *gs = c->gs;

	if (index < gs->num_operands)
		return (struct tpu_job_ref){ TPU_REF_OPERAND, (uint8_t)index };
	index -= gs->num_operands;
	if (index >= gs->num_scratch)	/* a temporary: its slot */
		index = gs->num_scratch + c->slot[index - gs->num_scratch];
	return (struct tpu_job_ref){ TPU_REF_SCRATCH, (uint8_t)index };
}

/* Refs in Pallas's order, then the kernel's temporaries. */
static int num_refs(const struct pallas_build *c)
{
	return c->gs->num_operands + c->gs->num_scratch + c->k->ntemps;
}

static const char *ref_name(const struct pallas_build *c, int index)
{
	const struct tpurt_grid_spec *gs = c->gs;

	if (index < gs->num_operands)
		return gs->operand[index].name;
	index -= gs->num_operands;
	return index < gs->num_scratch ? gs->scratch[index].name :
	       c->k->temp[index - gs->num_scratch].name;
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
			  tpurt_kernel_opcode_name(op->opcode), msg);
}

/* Resolve "name" or "#N" in Pallas's ref order. */
static int resolve(struct pallas_build *c, int n,
		   const struct tpurt_kernel_op *op, const char *text,
		   struct tpu_job_ref *r)
{
	int nrefs = num_refs(c);
	char names[256] = "";
	size_t at = 0;

	if (text[0] == '#') {
		char *end;
		long i = strtol(text + 1, &end, 10);

		if (*end || end == text + 1 || i < 0 || i >= nrefs)
			return op_fail(n, op, "ref '%s': refs are #0 to #%d", text,
				       nrefs - 1);
		*r = job_ref(c, (int)i);
		return 0;
	}
	for (int i = 0; i < nrefs; i++) {
		if (!strcmp(ref_name(c, i), text)) {
			*r = job_ref(c, i);
			return 0;
		}
		if (at < sizeof(names))
			at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s",
					       i ? ", " : "", ref_name(c, i));
	}
	return op_fail(n, op, "no ref named '%s' (refs: %s)", text, names);
}

/* The op's predicates, and-ed, as one program. */
static int compile_pred(struct pallas_build *c, int n,
			const struct tpurt_kernel_op *op, struct tpu_job_prog *out)
{
	struct tpurt_index_map_env env;
	struct tpurt_program all = { .nresults = 1 }, one;
	char what[64];

	memset(out, 0, sizeof(*out));
	if (!op->npred)
		return 0;
	tpurt_grid_spec_env(c->gs, &env);
	snprintf(what, sizeof(what), "kernel op %d (%s): predicate", n,
		 tpurt_kernel_opcode_name(op->opcode));
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

/* The op's scalar program: an SMEM index, a scalar or an iota offset. */
static int compile_scalar(struct pallas_build *c, int n,
			  const struct tpurt_kernel_op *op,
			  struct tpu_job_prog *out)
{
	struct tpurt_index_map_env env;
	struct tpurt_program prog;
	char what[64];
	int ret;

	tpurt_grid_spec_env(c->gs, &env);
	snprintf(what, sizeof(what), "kernel op %d (%s): %s", n,
		 tpurt_kernel_opcode_name(op->opcode),
		 op->bcast == TPU_BCAST_SMEM ? "SMEM index" :
		 op->opcode == TPU_OP_IOTA ? "iota offset" : "scalar");
	ret = tpurt_index_map_compile_as(op->scalar, &env, 1, what, &prog);
	return ret ? ret : tpurt_desc_add_program(c->d, &prog, out);
}

static uint32_t float_bits(float f)
{
	uint32_t bits;

	memcpy(&bits, &f, sizeof(bits));
	return bits;
}

/* Immediates where the op reads them: uapi's imm and imm2 rules. */
static void fill_imms(const struct tpurt_kernel_op *op, struct tpu_job_op *jo)
{
	int clamp = op->opcode == TPU_OP_UNARY && op->fn == TPU_UNARY_CLAMP;
	int has_bcast = op->opcode == TPU_OP_BINARY || op->opcode == TPU_OP_SELECT;

	if (clamp || (has_bcast && op->bcast == TPU_BCAST_IMM))
		jo->imm = float_bits(op->imm);
	if (clamp || (op->opcode == TPU_OP_SELECT && op->bcast2 == TPU_BCAST_IMM))
		jo->imm2 = float_bits(op->imm2);
}

/* The op's refs and programs into the descriptor; the device checks the rest. */
static int fill_op(struct pallas_build *c, int n,
		   const struct tpurt_kernel_op *op, struct tpu_job_op *jo)
{
	int ret = resolve(c, n, op, op->dst, &jo->dst);

	if (!ret && op->src0[0])
		ret = resolve(c, n, op, op->src0, &jo->src0);
	if (!ret && op->src1[0])
		ret = resolve(c, n, op, op->src1, &jo->src1);
	if (!ret && op->src2[0])
		ret = resolve(c, n, op, op->src2, &jo->src2);
	if (!ret && op->scalar[0])
		ret = compile_scalar(c, n, op, &jo->scalar_index);
	if (ret)
		return ret;
	jo->opcode = op->opcode;
	jo->fn = op->fn;
	jo->bcast = op->bcast;
	jo->bcast2 = op->bcast2;
	jo->dot = op->dot;
	jo->axis = op->axis;
	fill_imms(op, jo);
	return compile_pred(c, n, op, &jo->pred);
}

static int fill_ops(struct pallas_build *c)
{
	const struct tpurt_kernel *k = c->k;

	if (!k->nops)
		return tpurt_fail(-EINVAL, "kernel: no operations");
	if (k->nwhen)
		return tpurt_fail(-EINVAL, "kernel: %d when() block(s) not ended",
				  k->nwhen);
	for (int i = 0; i < k->nops; i++) {
		int ret = fill_op(c, i, &k->op[i], &c->d->op[i]);

		if (ret)
			return ret;
	}
	c->d->h.num_ops = (uint16_t)k->nops;
	return 0;
}

/* --- the device's decoder, in the call's words --- */

/* A decimal index at @p: its value and end, or -1. */
static long index_at(const char *p, const char **end)
{
	char *e;
	long v;

	if (!isdigit((unsigned char)*p))
		return -1;
	v = strtol(p, &e, 10);
	*end = e;
	return v;
}

/*
 * The ref the decoder calls "operand N" or "scratch N" at @p (a word
 * starting there), as the call names it: its index in Pallas's ref order
 * and where the designation ends, or -1.
 */
static int ref_at(const struct pallas_build *c, const char *msg, const char *p,
		  const char **end)
{
	const struct tpurt_grid_spec *gs = c->gs;
	long i;

	if (p > msg && (isalnum((unsigned char)p[-1]) || p[-1] == '_'))
		return -1;
	if (!strncmp(p, "operand ", 8)) {
		i = index_at(p + 8, end);
		return i >= 0 && i < gs->num_operands ? (int)i : -1;
	}
	if (!strncmp(p, "scratch ", 8)) {
		i = index_at(p + 8, end);
		if (i >= gs->num_scratch && i < gs->num_scratch + c->nslots)
			return gs->num_operands + gs->num_scratch +
			       c->slot_temp[i - gs->num_scratch];
		return i >= 0 && i < gs->num_scratch ? gs->num_operands + (int)i : -1;
	}
	return -1;
}

static void append(char *out, size_t len, size_t *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void append(char *out, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*at >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(out + *at, len - *at, fmt, ap);
	va_end(ap);
	*at = n < 0 ? len : *at + (size_t)n;
}

/*
 * The decoder's @msg with the call's names: its subject ("op 3: ",
 * "operand 1: ", "scratch 0: ") becomes "kernel op 3 (dot): ", "input 'y': ",
 * "scratch 'acc': "; refs in the text ("dst operand 2") become their names
 * ("dst 'z'").
 */
static void in_call_words(const struct pallas_build *c, const char *msg,
			  char *out, size_t len)
{
	const struct tpurt_grid_spec *gs = c->gs;
	const char *p = msg, *end;
	size_t at = 0;
	long n;
	int r;

	out[0] = 0;
	if (!strncmp(p, "op ", 3) && (n = index_at(p + 3, &end)) >= 0 &&
	    n < c->k->nops && !strncmp(end, ": ", 2)) {
		append(out, len, &at, "kernel op %ld (%s): ", n,
		       tpurt_kernel_opcode_name(c->k->op[n].opcode));
		p = end + 2;
	} else if ((r = ref_at(c, msg, p, &end)) >= 0 && !strncmp(end, ": ", 2)) {
		if (r < gs->num_operands)
			append(out, len, &at, "%s '%s': ",
			       role_name(gs->operand[r].role), ref_name(c, r));
		else
			append(out, len, &at, "scratch '%s': ", ref_name(c, r));
		p = end + 2;
	} else {
		append(out, len, &at, "pallas_call: ");
	}
	while (*p && at + 1 < len) {
		r = ref_at(c, msg, p, &end);
		if (r >= 0) {
			append(out, len, &at, "'%s'", ref_name(c, r));
			p = end;
		} else {
			out[at++] = *p++;
			out[at] = 0;
		}
	}
}

/* Double-buffered blocks plus VMEM scratch, as the device counted them. */
static int vmem_fail(const struct pallas_build *c, const struct tpu_plan *plan,
		     const struct tpu_job_result *res)
{
	const struct tpurt_grid_spec *gs = c->gs;
	char parts[256] = "";
	size_t at = 0;

	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++)
		append(parts, sizeof(parts), &at, "%s'%s' 2 x %llu", at ? ", " : "",
		       gs->operand[i].name,
		       (unsigned long long)plan->operand[i].block_bytes);
	for (unsigned int i = 0; i < plan->num_scratch; i++)
		if (plan->scratch[i].space == TPU_MEM_VMEM)
			append(parts, sizeof(parts), &at, "%sscratch '%s' %llu",
			       at ? ", " : "", i < (unsigned int)gs->num_scratch ?
			       gs->scratch[i].name :
			       c->k->temp[c->slot_temp[i - gs->num_scratch]].name,
			       (unsigned long long)plan->scratch[i].bytes);
	return tpurt_fail(-ENOSPC,
			  "VMEM: the kernel needs %llu bytes (%s) but the limit is %llu (over by %llu); use smaller blocks or raise vmem_limit_bytes (the device has %llu)",
			  (unsigned long long)res->error.need, parts,
			  (unsigned long long)res->error.limit,
			  (unsigned long long)(res->error.need - res->error.limit),
			  (unsigned long long)c->info->vmem_size);
}

/* Scalar-prefetch arrays plus SMEM scratch, as the device counted them. */
static int smem_fail(const struct pallas_build *c, const struct tpu_plan *plan,
		     const struct tpu_job_result *res)
{
	const struct tpurt_grid_spec *gs = c->gs;
	char parts[256] = "";
	size_t at = 0;

	for (unsigned int i = 0; i < plan->num_scalar_prefetch; i++)
		append(parts, sizeof(parts), &at, "%s'%s' %llu", at ? ", " : "",
		       gs->operand[i].name,
		       (unsigned long long)plan->operand[i].elems * 4);
	for (unsigned int i = 0; i < plan->num_scratch; i++)
		if (plan->scratch[i].space == TPU_MEM_SMEM)
			append(parts, sizeof(parts), &at, "%sscratch '%s' %llu",
			       at ? ", " : "", gs->scratch[i].name,
			       (unsigned long long)plan->scratch[i].bytes);
	return tpurt_fail(-ENOSPC,
			  "SMEM: scalar prefetch and SMEM scratch need %llu bytes (%s), the device has %llu (over by %llu)",
			  (unsigned long long)res->error.need, parts,
			  (unsigned long long)res->error.limit,
			  (unsigned long long)(res->error.need - res->error.limit));
}

/* Pallas's advice where a dot's accumulator has the wrong dtype. */
static const char *hint(const struct tpu_job_result *res)
{
	if (strstr(res->message, "dot accumulates into float32"))
		return "; accumulate in an f32 scratch (preferred_element_type) and cast at the last step";
	if (strstr(res->message, "dot accumulates into int32"))
		return "; accumulate in an int32 scratch and cast at the last step";
	return "";
}

/*
 * Run the device's decoder on @blob with the device's parameters, as the
 * device will before it runs the job; its rejection, in the call's words.
 */
static int device_check(const struct pallas_build *c, const void *blob,
			size_t len)
{
	struct tpu_job_result res = { 0 };
	struct tpu_config cfg;
	struct tpu_plan *plan = malloc(sizeof(*plan));
	char msg[512];
	int ret;

	if (!plan)
		return tpurt_fail(-ENOMEM, "out of memory");
	tpurt_device_config(c->info, &cfg);
	if (!tpu_job_decode(blob, len, &cfg, plan, &res)) {
		ret = 0;
	} else if (res.error.code == TPU_JOB_ERR_VMEM_LIMIT) {
		ret = vmem_fail(c, plan, &res);
	} else if (res.error.code == TPU_JOB_ERR_SMEM_LIMIT) {
		ret = smem_fail(c, plan, &res);
	} else {
		in_call_words(c, res.message, msg, sizeof(msg));
		ret = tpurt_fail(-EINVAL, "%s%s", msg, hint(&res));
	}
	free(plan);
	return ret;
}

static int build(struct pallas_build *c, int nargs, void **blobp, size_t *lenp)
{
	int ret;

	*blobp = NULL;
	c->d = calloc(1, sizeof(*c->d));
	if (!c->d)
		return tpurt_fail(-ENOMEM, "out of memory");
	ret = check_args(c, nargs);
	if (!ret)
		ret = fill_operands(c);
	if (!ret)
		ret = parse_semantics(c);
	if (!ret)
		ret = fill_scratch(c);
	if (!ret)
		ret = fill_ops(c);
	if (!ret) {
		c->d->h.flags = c->params.flags & TPURT_DEBUG ? TPU_JOB_F_DEBUG : 0;
		c->d->h.vmem_limit_bytes = c->params.vmem_limit_bytes;
		ret = tpurt_desc_finish(c->d, blobp, lenp);
	}
	if (!ret)
		ret = device_check(c, *blobp, *lenp);
	if (ret) {
		free(*blobp);
		*blobp = NULL;
	}
	free(c->d);
	return ret;
}

static void init_build(struct pallas_build *c, const struct tpurt_kernel *k,
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
	struct pallas_build c;

	*descp = NULL;
	init_build(&c, k, gs, params, args);
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
	struct pallas_build c;
	void *blob;
	size_t len;
	int ret;

	*jobp = NULL;
	init_build(&c, k, gs, params, args);
	ret = build(&c, nargs, &blob, &len);
	if (ret)
		return ret;
	job = calloc(1, sizeof(*job));
	if (!job) {
		free(blob);
		return tpurt_fail(-ENOMEM, "out of memory");
	}
	job->dev = c.dev;
	job->timeout_ms = c.params.timeout_ms;
	job->nrefs = (unsigned int)gs->num_operands;
	for (int i = 0; i < nargs; i++) {
		bufs[i] = args[i]->buf;
		strcpy(job->names[i], gs->operand[i].name);
	}
	job->submit_ns = tpurt_now_ns();
	ret = tpurt_job_submit(job, blob, len, bufs, (unsigned int)nargs);
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
