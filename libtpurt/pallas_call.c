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
	/* the arrays, an aliased output's NULL replaced by its input's */
	struct tpurt_array *argv[TPU_JOB_MAX_OPERANDS];
	int alias[TPU_JOB_MAX_OPERANDS];	/* operand: its input, or -1 */
	/* the job's scratch: the grid spec's, the kernel's scopes, its
	 * temporaries */
	int scope_slot[TPURT_KERNEL_MAX_SCOPES];
	int slot_scope[TPURT_KERNEL_MAX_SCOPES];
	int nscope_slots;
	int slot[TPURT_KERNEL_MAX_TEMPS], slot_temp[TPURT_KERNEL_MAX_TEMPS];
	int nslots;
	/* windows, by the text and ref that made them */
	char window_text[TPU_JOB_MAX_WINDOWS][TPURT_TEXT_MAX];
	struct tpu_job_ref window_base[TPU_JOB_MAX_WINDOWS];
};

static const char *role_name(int role)
{
	return role == TPU_ROLE_SCALAR_PREFETCH ? "scalar prefetch" :
	       role == TPU_ROLE_INPUT ? "input" : "output";
}

/* input_output_aliases: which input each output is; NULL outputs take it. */
static int resolve_aliases(struct pallas_build *c, int nargs)
{
	const struct tpurt_grid_spec *gs = c->gs;
	const struct tpurt_compiler_params *p = &c->params;
	int first_out = gs->num_operands - gs->num_outputs;

	for (int i = 0; i < nargs; i++) {
		c->argv[i] = c->args[i];
		c->alias[i] = -1;
	}
	if (p->num_aliases < 0 || (p->num_aliases && !p->input_output_aliases))
		return tpurt_fail(-EINVAL, "pallas_call: input_output_aliases: %d entries",
				  p->num_aliases);
	for (int a = 0; a < p->num_aliases; a++) {
		const struct tpurt_alias *al = &p->input_output_aliases[a];
		int in = al->input, out = first_out + al->output;

		if (in < 0 || in >= nargs || gs->operand[in].role != TPU_ROLE_INPUT)
			return tpurt_fail(-EINVAL,
					  "pallas_call: input_output_aliases[%d]: arg %d is not an input (inputs are args %d to %d, counting scalar prefetch)",
					  a, in, gs->num_prefetch, first_out - 1);
		if (al->output < 0 || al->output >= gs->num_outputs)
			return tpurt_fail(-EINVAL,
					  "pallas_call: input_output_aliases[%d]: output %d, the grid spec has %d",
					  a, al->output, gs->num_outputs);
		for (int b = 0; b < nargs; b++)
			if ((c->alias[b] == in && b != out) || (b == out && c->alias[b] >= 0))
				return tpurt_fail(-EINVAL,
						  "pallas_call: input_output_aliases[%d]: input '%s' or output '%s' is aliased twice",
						  a, gs->operand[in].name, gs->operand[out].name);
		if (c->args[out] && c->args[out] != c->args[in])
			return tpurt_fail(-EINVAL,
					  "pallas_call: output '%s' is aliased to input '%s' (input_output_aliases): pass '%s''s array (or NULL) as arg %d",
					  gs->operand[out].name, gs->operand[in].name,
					  gs->operand[in].name, out);
		c->alias[out] = in;
		c->argv[out] = c->args[in];
	}
	return 0;
}

/* Two arguments on one buffer: only an output and its declared input. */
static int check_sharing(const struct pallas_build *c, int nargs)
{
	const struct tpurt_grid_spec *gs = c->gs;

	for (int i = 0; i < nargs; i++)
		for (int j = i + 1; j < nargs; j++) {
			int out = gs->operand[i].role == TPU_ROLE_OUTPUT ||
				  gs->operand[j].role == TPU_ROLE_OUTPUT;

			if (!out || c->argv[i]->buf != c->argv[j]->buf ||
			    c->alias[j] == i)
				continue;
			return tpurt_fail(-EINVAL,
					  "pallas_call: args %d and %d share a buffer: declare input_output_aliases (%s '%s' and %s '%s')",
					  i, j, role_name(gs->operand[i].role),
					  gs->operand[i].name, role_name(gs->operand[j].role),
					  gs->operand[j].name);
		}
	return 0;
}

static int check_args(struct pallas_build *c, int nargs)
{
	const struct tpurt_grid_spec *gs = c->gs;
	int ret;

	if (nargs != gs->num_operands)
		return tpurt_fail(-EINVAL,
				  "pallas_call: %d arrays given, the grid spec has %d (%d scalar prefetch, %d inputs, %d outputs)",
				  nargs, gs->num_operands, gs->num_prefetch,
				  gs->num_inputs, gs->num_outputs);
	if (!gs->num_outputs)
		return tpurt_fail(-EINVAL, "pallas_call: the grid spec has no output");
	ret = resolve_aliases(c, nargs);
	if (ret)
		return ret;
	c->args = c->argv;
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
	ret = check_sharing(c, nargs);
	if (ret)
		return ret;
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
	if (o->role != TPU_ROLE_SCALAR_PREFETCH && o->spec.memory_space == TPURT_SMEM)
		return o->spec.rank == a->rank ? 0 :
		       tpurt_check_block_shape(o, a->rank, a->shape);	/* no tiling */
	if (o->role != TPU_ROLE_SCALAR_PREFETCH && o->spec.memory_space == TPURT_ANY) {
		if (!o->spec.rank || (a->rank == o->spec.rank &&
				      !memcmp(a->shape, o->spec.shape,
					      sizeof(a->shape[0]) * (size_t)a->rank)))
			return 0;
		format_shape(as, sizeof(as), a->rank, a->shape);
		format_shape(ds, sizeof(ds), o->spec.rank, o->spec.shape);
		return tpurt_fail(-EINVAL, "%s '%s': the array's shape is %s, the grid spec declares %s",
				  role_name(o->role), o->name, as, ds);
	}
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
		jo->slot = (uint32_t)(c->alias[i] >= 0 ? c->alias[i] : i);
		jo->alias = (uint8_t)(c->alias[i] + 1);
		jo->role = (uint8_t)o->role;
		jo->dtype = (uint8_t)a->dtype;
		jo->rank = (uint8_t)a->rank;
		if (o->role != TPU_ROLE_SCALAR_PREFETCH) {
			jo->space = (uint8_t)o->spec.memory_space;
			jo->buffers = (uint8_t)o->spec.buffer_count;
		}
		for (int d = 0; d < a->rank; d++) {
			jo->shape[d] = (uint64_t)a->shape[d];
			if (o->role != TPU_ROLE_SCALAR_PREFETCH && jo->space != TPU_MEM_ANY)
				jo->block[d] = o->spec.shape[d] == TPURT_SQUEEZED ?
					       1 : (uint32_t)o->spec.shape[d];
		}
		if (o->role != TPU_ROLE_SCALAR_PREFETCH && jo->space != TPU_MEM_ANY) {
			ret = tpurt_desc_add_program(c->d, &o->map, &jo->index_map);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static void scratch_entry(struct tpu_job_scratch *js, enum tpurt_memory_space space,
			  enum tpurt_dtype dtype, int rank, const int64_t *shape)
{
	js->space = (uint8_t)space;	/* enum tpurt_memory_space is the uapi's */
	js->dtype = (uint8_t)dtype;
	js->rank = (uint8_t)rank;
	for (int d = 0; d < rank; d++)
		js->shape[d] = (uint32_t)shape[d];
}

/* The grid spec's scratch, the kernel's scopes, then its temporaries
 * (VMEM, 2-D). */
static int fill_scratch(struct pallas_build *c)
{
	const struct tpurt_grid_spec *gs = c->gs;
	const struct tpurt_kernel *k = c->k;
	int first_temp;

	c->nscope_slots = tpurt_kernel_scope_slots(k, c->scope_slot, c->slot_scope);
	c->nslots = tpurt_kernel_temp_slots(k, c->slot, c->slot_temp);
	first_temp = gs->num_scratch + c->nscope_slots;
	if (first_temp + c->nslots > TPU_JOB_MAX_SCRATCH)
		return tpurt_fail(-E2BIG,
				  "pallas_call: %d scratch buffers, %d for the kernel's scopes and %d for its temporaries exceed the job's %d",
				  gs->num_scratch, c->nscope_slots, c->nslots,
				  TPU_JOB_MAX_SCRATCH);
	c->d->h.num_scratch = (uint8_t)(first_temp + c->nslots);
	for (int i = 0; i < gs->num_scratch; i++) {
		const struct tpurt_scratch_spec *s = &gs->scratch[i];

		scratch_entry(&c->d->scratch[i], s->space, s->dtype, s->rank, s->shape);
	}
	for (int i = 0; i < c->nscope_slots; i++) {
		const struct tpurt_kernel_scope *s = &k->scope[c->slot_scope[i]];

		scratch_entry(&c->d->scratch[gs->num_scratch + i], s->space, s->dtype,
			      s->rank, s->shape);
	}
	for (int s = 0; s < c->nslots; s++) {
		const struct tpurt_kernel_temp *t = &k->temp[c->slot_temp[s]];
		int64_t shape[2] = { t->rows, t->cols };

		scratch_entry(&c->d->scratch[first_temp + s], TPURT_VMEM, t->dtype, 2,
			      shape);
	}
	return 0;
}

/* --- the kernel's refs --- */

/*
 * Refs in Pallas's order (operands, then the grid spec's scratch), then
 * the kernel's scopes and temporaries.
 */
static int num_refs(const struct pallas_build *c)
{
	return c->gs->num_operands + c->gs->num_scratch + c->k->nscopes +
	       c->k->ntemps;
}

/* Ref @index as the job names it. */
static struct tpu_job_ref job_ref(const struct pallas_build *c, int index)
{
	const struct tpurt_grid_spec *gs = c->gs;

	if (index < gs->num_operands)
		return (struct tpu_job_ref){ TPU_REF_OPERAND, (uint8_t)index };
	index -= gs->num_operands;
	if (index >= gs->num_scratch + c->k->nscopes)	/* a temporary: its slot */
		index = gs->num_scratch + c->nscope_slots +
			c->slot[index - gs->num_scratch - c->k->nscopes];
	else if (index >= gs->num_scratch)		/* a scope: its slot */
		index = gs->num_scratch + c->scope_slot[index - gs->num_scratch];
	return (struct tpu_job_ref){ TPU_REF_SCRATCH, (uint8_t)index };
}

static const char *ref_name(const struct pallas_build *c, int index)
{
	const struct tpurt_grid_spec *gs = c->gs;

	if (index < gs->num_operands)
		return gs->operand[index].name;
	index -= gs->num_operands;
	if (index < gs->num_scratch)
		return gs->scratch[index].name;
	index -= gs->num_scratch;
	if (index < c->k->nscopes)
		return c->k->scope[index].name;
	return c->k->temp[index - c->k->nscopes].name;
}

/* What a ref is, for windows, semaphores and SMEM stores. */
struct ref_base {
	int index;				/* in num_refs() order */
	int role;				/* an operand's, or -1 */
	enum tpurt_memory_space space;		/* TPURT_VMEM for temporaries */
	enum tpurt_dtype dtype;
	int rank;
	int64_t extent[TPU_JOB_MAX_RANK];
	unsigned int hidden;			/* squeezed block dimensions */
};

static void base_of(const struct pallas_build *c, int index, struct ref_base *b)
{
	const struct tpurt_grid_spec *gs = c->gs;
	const struct tpurt_scratch_spec *sc = NULL;
	const struct tpurt_kernel_scope *scope = NULL;
	int i = index - gs->num_operands;

	memset(b, 0, sizeof(*b));
	b->index = index;
	b->role = -1;
	if (index < gs->num_operands) {
		const struct tpurt_operand_spec *o = &gs->operand[index];
		const struct tpurt_array *a = c->args[index];

		b->role = o->role;
		b->dtype = a->dtype;
		b->rank = a->rank;
		b->space = o->role == TPU_ROLE_SCALAR_PREFETCH ? TPURT_SMEM :
			   o->spec.memory_space;
		for (int d = 0; d < a->rank; d++) {
			int squeezed = o->spec.shape[d] == TPURT_SQUEEZED;

			b->extent[d] = b->space == TPURT_ANY ||
				       o->role == TPU_ROLE_SCALAR_PREFETCH ?
				       a->shape[d] : squeezed ? 1 : o->spec.shape[d];
			if (squeezed && b->space != TPURT_ANY)
				b->hidden |= 1u << d;
		}
		return;
	}
	if (i < gs->num_scratch)
		sc = &gs->scratch[i];
	else if (i - gs->num_scratch < c->k->nscopes)
		scope = &c->k->scope[i - gs->num_scratch];
	if (sc || scope) {
		b->space = sc ? sc->space : scope->space;
		b->dtype = sc ? sc->dtype : scope->dtype;
		b->rank = sc ? sc->rank : scope->rank;
		memcpy(b->extent, sc ? sc->shape : scope->shape, sizeof(b->extent));
		return;
	}
	i -= gs->num_scratch + c->k->nscopes;
	b->space = TPURT_VMEM;
	b->dtype = c->k->temp[i].dtype;
	b->rank = 2;
	b->extent[0] = c->k->temp[i].rows;
	b->extent[1] = c->k->temp[i].cols;
}

static int is_semaphore(enum tpurt_memory_space space)
{
	return space == TPURT_SEMAPHORE_DMA || space == TPURT_SEMAPHORE_REGULAR;
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

/* The ref named @name at op @n: a scope open there, else a ref of the grid
 * spec or a temporary; "#N" in Pallas's order. */
static int find_ref(struct pallas_build *c, int n, const struct tpurt_kernel_op *op,
		    const char *name)
{
	const struct tpurt_grid_spec *gs = c->gs;
	int nrefs = num_refs(c), first_scope = gs->num_operands + gs->num_scratch;
	int s = tpurt_kernel_scope_at(c->k, n, name, strlen(name));
	char names[256] = "";
	size_t at = 0;

	if (name[0] == '#') {
		char *end;
		long i = strtol(name + 1, &end, 10);

		if (*end || end == name + 1 || i < 0 || i >= nrefs)
			return op_fail(n, op, "ref '%s': refs are #0 to #%d", name,
				       nrefs - 1);
		return (int)i;
	}
	if (s >= 0)
		return first_scope + s;
	for (int i = 0; i < nrefs; i++) {
		int scope = i >= first_scope && i < first_scope + c->k->nscopes;

		if (!scope && !strcmp(ref_name(c, i), name))
			return i;
		if (!scope && at < sizeof(names))
			at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s",
					       at ? ", " : "", ref_name(c, i));
	}
	return op_fail(n, op, "no ref named '%s' (refs: %s)", name, names);
}

/* The names a body program of op @n may read besides scalar prefetch. */
static void body_names(const struct pallas_build *c, int n,
		       struct tpurt_body_name *names, struct tpurt_body_names *list)
{
	const struct tpurt_grid_spec *gs = c->gs;
	int count = 0;

	for (int i = gs->num_prefetch; i < gs->num_operands + gs->num_scratch +
	     c->k->nscopes; i++) {
		struct ref_base b;
		int scope = i - gs->num_operands - gs->num_scratch;

		if (i >= gs->num_operands && i < gs->num_operands + gs->num_scratch)
			base_of(c, i, &b);
		else if (scope >= 0 && tpurt_kernel_scope_at(c->k, n, c->k->scope[scope].name,
							     strlen(c->k->scope[scope].name)) == scope)
			base_of(c, i, &b);
		else if (i < gs->num_operands && gs->operand[i].spec.memory_space == TPURT_SMEM)
			base_of(c, i, &b);
		else
			continue;
		if (b.space != TPURT_SMEM && !is_semaphore(b.space))
			continue;
		names[count++] = (struct tpurt_body_name){
			.name = ref_name(c, i),
			.insn = i < gs->num_operands ? TPU_INSN_LOAD_SMEM :
				TPU_INSN_LOAD_SCRATCH,
			.arg = i < gs->num_operands ? i : job_ref(c, i).index,
			.cols = b.rank == 2 && !b.hidden ? b.extent[1] : 0,
			.semaphore = is_semaphore(b.space),
		};
	}
	list->name = names;
	list->n = count;
}

/* @text, a body program of op @n leaving @nresults values, into the job. */
static int body_program(struct pallas_build *c, int n,
			const struct tpurt_kernel_op *op, const char *text,
			int nresults, const char *part, struct tpu_job_prog *out)
{
	struct tpurt_body_name names[TPU_JOB_MAX_OPERANDS + TPU_JOB_MAX_SCRATCH +
				     TPURT_KERNEL_MAX_SCOPES];
	struct tpurt_body_names list;
	struct tpurt_index_map_env env;
	struct tpurt_program prog;
	char what[96];
	int ret;

	tpurt_grid_spec_env(c->gs, &env);
	body_names(c, n, names, &list);
	snprintf(what, sizeof(what), "kernel op %d (%s): %s", n,
		 tpurt_kernel_opcode_name(op->opcode), part);
	ret = tpurt_body_program_compile(text, &env, &list, nresults, what, &prog);
	return ret ? ret : tpurt_desc_add_program(c->d, &prog, out);
}

/* A window of ref @b into the job's window table (one entry per text). */
static int add_window(struct pallas_build *c, int n, const struct tpurt_kernel_op *op,
		      const char *text, const struct tpurt_ref_text *rt,
		      const struct ref_base *b, struct tpu_job_ref *r)
{
	struct tpu_job_header *h = &c->d->h;
	struct tpu_job_ref base = job_ref(c, b->index);
	struct tpurt_window_fit fit;
	struct tpu_job_window *w;
	char what[64];
	int ret;

	for (unsigned int i = 0; i < h->num_windows; i++)
		if (!strcmp(c->window_text[i], text) &&
		    !memcmp(&c->window_base[i], &base, sizeof(base))) {
			*r = (struct tpu_job_ref){ TPU_REF_WINDOW, (uint8_t)i };
			return 0;
		}
	if (h->num_windows == TPU_JOB_MAX_WINDOWS)
		return op_fail(n, op, "more than %d distinct windows in the kernel",
			       TPU_JOB_MAX_WINDOWS);
	snprintf(what, sizeof(what), "kernel op %d (%s)", n,
		 tpurt_kernel_opcode_name(op->opcode));
	ret = tpurt_window_fit(rt, what, b->rank, b->extent, b->hidden, &fit);
	if (ret)
		return ret;
	w = &c->d->window[h->num_windows];
	memset(w, 0, sizeof(*w));
	w->base = base;
	w->squeeze = fit.squeeze;
	memcpy(w->size, fit.size, sizeof(w->size));
	if (!fit.all_zero) {
		ret = body_program(c, n, op, fit.starts, b->rank, "window start",
				   &w->start);
		if (ret)
			return ret;
	}
	snprintf(c->window_text[h->num_windows], TPURT_TEXT_MAX, "%s", text);
	c->window_base[h->num_windows] = base;
	*r = (struct tpu_job_ref){ TPU_REF_WINDOW, (uint8_t)h->num_windows++ };
	return 0;
}

/* A ref or a window of one, as the op names it: never a semaphore. */
static int resolve(struct pallas_build *c, int n,
		   const struct tpurt_kernel_op *op, const char *text,
		   struct tpu_job_ref *r)
{
	struct tpurt_ref_text rt;
	struct ref_base b;
	char what[64];
	int i, ret;

	snprintf(what, sizeof(what), "kernel op %d (%s)", n,
		 tpurt_kernel_opcode_name(op->opcode));
	ret = tpurt_ref_parse(text, what, &rt);
	if (ret)
		return ret;
	i = find_ref(c, n, op, rt.base);
	if (i < 0)
		return i;
	base_of(c, i, &b);
	if (is_semaphore(b.space))
		return op_fail(n, op, "'%s' is a semaphore, not a ref to compute on or copy",
			       rt.base);
	if (!rt.windowed) {
		*r = job_ref(c, i);
		return 0;
	}
	if (b.role == TPU_ROLE_SCALAR_PREFETCH)
		return op_fail(n, op, "'%s' is scalar prefetch: it has no windows",
			       rt.base);
	return add_window(c, n, op, text, &rt, &b, r);
}

/* "sem" or "sem.at[i]": the semaphore scratch and the element's text. */
static int resolve_semaphore(struct pallas_build *c, int n,
			     const struct tpurt_kernel_op *op, const char *text,
			     struct tpu_job_ref *r, char *index, size_t len)
{
	struct tpurt_ref_text rt;
	struct ref_base b;
	char what[64];
	int i, ret;

	snprintf(what, sizeof(what), "kernel op %d (%s): semaphore",
		 n, tpurt_kernel_opcode_name(op->opcode));
	ret = tpurt_ref_parse(text, what, &rt);
	if (ret)
		return ret;
	i = find_ref(c, n, op, rt.base);
	if (i < 0)
		return i;
	base_of(c, i, &b);
	if (!is_semaphore(b.space))
		return op_fail(n, op, "'%s' is not a semaphore (scratch of TPURT_SEMAPHORE_DMA or _REGULAR)",
			       rt.base);
	if (rt.windowed && (rt.nidx != 1 || rt.idx[0].kind != TPURT_IX_INDEX))
		return op_fail(n, op, "semaphore '%s': name one element, %s.at[i]",
			       text, rt.base);
	*r = job_ref(c, i);
	snprintf(index, len, "%s", rt.windowed ? rt.idx[0].start : "0");
	return 0;
}

/* "ref[i]" or "ref[i, j]" of an SMEM ref: the ref and the flat index. */
static int resolve_smem_element(struct pallas_build *c, int n,
				const struct tpurt_kernel_op *op,
				struct tpu_job_ref *r, char *index, size_t len)
{
	const char *open = strchr(op->dst, '['), *close = strrchr(op->dst, ']');
	char name[TPURT_NAME_MAX], inner[TPURT_TEXT_MAX];
	const char *comma;
	struct ref_base b;
	int i;

	if (!open || !close || close < open || close[1] ||
	    (size_t)(open - op->dst) >= sizeof(name))
		return op_fail(n, op, "'%s' is not ref[index]", op->dst);
	snprintf(name, sizeof(name), "%.*s", (int)(open - op->dst), op->dst);
	snprintf(inner, sizeof(inner), "%.*s", (int)(close - open - 1), open + 1);
	i = find_ref(c, n, op, name);
	if (i < 0)
		return i;
	base_of(c, i, &b);
	if (b.space != TPURT_SMEM || b.role == TPU_ROLE_INPUT)
		return op_fail(n, op, "'%s' is %s: scalar stores go to SMEM scratch, scalar prefetch or an SMEM-space output",
			       name, b.role == TPU_ROLE_INPUT ? "an input" : "not in SMEM");
	comma = strchr(inner, ',');
	if (comma && (b.rank != 2 || b.hidden))
		return op_fail(n, op, "'%s' is indexed [i, j] but is not 2-D", name);
	if (comma)
		snprintf(index, len, "(%.*s) * %lld + (%s)", (int)(comma - inner),
			 inner, (long long)b.extent[1], comma + 1);
	else
		snprintf(index, len, "%s", inner);
	*r = job_ref(c, i);
	return 0;
}

/* The op's predicates, and-ed, as one program. */
static int compile_pred(struct pallas_build *c, int n,
			const struct tpurt_kernel_op *op, struct tpu_job_prog *out)
{
	char all[TPURT_WHEN_DEPTH * (TPURT_TEXT_MAX + 8)] = "";
	size_t at = 0;

	memset(out, 0, sizeof(*out));
	if (!op->npred)
		return 0;
	for (int i = 0; i < op->npred; i++)
		at += (size_t)snprintf(all + at, sizeof(all) - at,
				       op->npred > 1 ? "%s(%s)" : "%s%s",
				       i ? " and " : "", op->pred[i]);
	return body_program(c, n, op, all, 1, "predicate", out);
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

/* Copies, semaphores and SMEM stores: refs and their scalar programs. */
static int fill_memory_op(struct pallas_build *c, int n,
			  const struct tpurt_kernel_op *op, struct tpu_job_op *jo)
{
	char index[TPURT_TEXT_MAX + 32], prog[2 * TPURT_TEXT_MAX + 64];
	int copy = op->opcode == TPU_OP_COPY_START || op->opcode == TPU_OP_COPY_WAIT;
	int ret;

	if (op->opcode == TPU_OP_SCALAR_STORE) {
		ret = resolve_smem_element(c, n, op, &jo->dst, index, sizeof(index));
		if (ret)
			return ret;
		snprintf(prog, sizeof(prog), "%s, %s", index, op->scalar);
		return body_program(c, n, op, prog, 2, "index and value",
				    &jo->scalar_index);
	}
	ret = resolve_semaphore(c, n, op, op->src1, &jo->src1, index, sizeof(index));
	if (!ret && copy)
		ret = resolve(c, n, op, op->dst, &jo->dst);
	if (!ret && copy && op->src0[0])
		ret = resolve(c, n, op, op->src0, &jo->src0);
	if (ret)
		return ret;
	if (copy)
		return strcmp(index, "0") ?
		       body_program(c, n, op, index, 1, "semaphore index",
				    &jo->scalar_index) : 0;
	snprintf(prog, sizeof(prog), "%s, %s", index, op->scalar);
	return body_program(c, n, op, prog, 2, "semaphore index and amount",
			    &jo->scalar_index);
}

/* The op's refs and programs into the descriptor; the device checks the rest. */
static int fill_op(struct pallas_build *c, int n,
		   const struct tpurt_kernel_op *op, struct tpu_job_op *jo)
{
	int ret;

	jo->opcode = op->opcode;
	if (op->opcode >= TPU_OP_COPY_START) {
		ret = fill_memory_op(c, n, op, jo);
		return ret ? ret : compile_pred(c, n, op, &jo->pred);
	}
	ret = resolve(c, n, op, op->dst, &jo->dst);
	if (!ret && op->src0[0])
		ret = resolve(c, n, op, op->src0, &jo->src0);
	if (!ret && op->src1[0])
		ret = resolve(c, n, op, op->src1, &jo->src1);
	if (!ret && op->src2[0])
		ret = resolve(c, n, op, op->src2, &jo->src2);
	if (!ret && op->scalar[0])
		ret = body_program(c, n, op, op->scalar, 1,
				   op->bcast == TPU_BCAST_SMEM ? "SMEM index" :
				   op->opcode == TPU_OP_IOTA ? "iota offset" : "scalar",
				   &jo->scalar_index);
	if (ret)
		return ret;
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
	if (k->nopen)
		return tpurt_fail(-EINVAL, "kernel: %d run_scoped() block(s) not ended",
				  k->nopen);
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
		i = index_at(p + 8, end) - gs->num_scratch;
		if (i >= c->nscope_slots && i < c->nscope_slots + c->nslots)
			return gs->num_operands + gs->num_scratch + c->k->nscopes +
			       c->slot_temp[i - c->nscope_slots];
		if (i >= 0 && i < c->nscope_slots)
			return gs->num_operands + gs->num_scratch + c->slot_scope[i];
		i += gs->num_scratch;
		return i >= 0 && i < gs->num_scratch ? gs->num_operands + (int)i : -1;
	}
	return -1;
}

/* "window N" at @p as its text, or NULL. */
static const char *window_at(const struct pallas_build *c, const char *msg,
			     const char *p, const char **end)
{
	long i;

	if ((p > msg && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) ||
	    strncmp(p, "window ", 7))
		return NULL;
	i = index_at(p + 7, end);
	return i >= 0 && i < c->d->h.num_windows ? c->window_text[i] : NULL;
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
		const char *w = window_at(c, msg, p, &end);

		r = ref_at(c, msg, p, &end);
		if (w) {
			append(out, len, &at, "window '%s'", w);
			p = end;
		} else if (r >= 0) {
			append(out, len, &at, "'%s'", ref_name(c, r));
			p = end;
		} else {
			out[at++] = *p++;
			out[at] = 0;
		}
	}
}

/* A scratch of the job as the call names it. */
static const char *scratch_name(const struct pallas_build *c, unsigned int i)
{
	const char *end;
	char text[32];

	snprintf(text, sizeof(text), "scratch %u", i);
	return ref_name(c, ref_at(c, text, text, &end));
}

/* VMEM blocks (n buffers each, pl.Buffered(n)) plus VMEM scratch, as the
 * device counted them. */
static int vmem_fail(const struct pallas_build *c, const struct tpu_plan *plan,
		     const struct tpu_job_result *res)
{
	const struct tpurt_grid_spec *gs = c->gs;
	char parts[320] = "";
	size_t at = 0;

	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++)
		if (plan->operand[i].space == TPU_MEM_VMEM)
			append(parts, sizeof(parts), &at, "%s'%s' %u x %llu",
			       at ? ", " : "", gs->operand[i].name,
			       plan->operand[i].buffers ? plan->operand[i].buffers : 2,
			       (unsigned long long)plan->operand[i].block_bytes);
	for (unsigned int i = 0; i < plan->num_scratch; i++)
		if (plan->scratch[i].space == TPU_MEM_VMEM)
			append(parts, sizeof(parts), &at, "%sscratch '%s' %llu",
			       at ? ", " : "", scratch_name(c, i),
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
			       at ? ", " : "", scratch_name(c, i),
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

int tpurt_pallas_plan(const struct tpurt_kernel *k,
		      const struct tpurt_grid_spec *gs,
		      const struct tpurt_compiler_params *params,
		      struct tpurt_array *const *args, int nargs,
		      struct tpu_plan *plan,
		      char (*scratch_names)[TPURT_NAME_MAX])
{
	struct tpu_job_result res = { 0 };
	struct pallas_build c;
	struct tpu_config cfg;
	void *blob;
	size_t len;
	int ret;

	init_build(&c, k, gs, params, args);
	ret = build(&c, nargs, &blob, &len);
	if (ret)
		return ret;
	tpurt_device_config(c.info, &cfg);
	ret = tpu_job_decode(blob, len, &cfg, plan, &res);
	free(blob);
	if (ret)	/* device_check took it: the decoder is deterministic */
		return tpurt_fail(-EINVAL, "pallas_call: internal: %s", res.message);
	for (unsigned int i = 0; i < plan->num_scratch; i++)
		snprintf(scratch_names[i], TPURT_NAME_MAX, "%s", scratch_name(&c, i));
	return 0;
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
		bufs[i] = c.argv[i]->buf;
		strcpy(job->names[i], gs->operand[i].name);
	}
	job->nscratch = (unsigned int)(gs->num_scratch + c.nscope_slots + c.nslots);
	for (unsigned int i = 0; i < job->nscratch; i++)
		snprintf(job->names[TPU_JOB_MAX_OPERANDS + i], TPURT_NAME_MAX, "%s",
			 scratch_name(&c, i));
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
