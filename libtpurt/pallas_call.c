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
 * kind, because the device can only name indices. The kernel's ops go in
 * through pallas_ops.c; input_output_aliases are resolved here.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pallas_build.h"
#include "tpu_plan.h"


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
	/* Pallas's interpreter takes any block shape of the array's rank */
	if (o->role != TPU_ROLE_SCALAR_PREFETCH && c->params.flags & TPURT_INTERPRET)
		return o->spec.rank == a->rank ? 0 :
		       tpurt_check_block_shape(o, a->rank, a->shape);
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

/*
 * A grid of one step has no next block to fetch while a step runs, so its
 * VMEM blocks take one buffer each unless pl.Buffered asks for more: as
 * Mosaic's, a whole-array block of 8 MiB then needs 8 MiB, not 16.
 */
static bool one_step(const struct tpurt_grid_spec *gs)
{
	for (int d = 0; d < gs->rank; d++)
		if (gs->grid[d] != 1)
			return false;
	return true;
}

static int fill_operands(struct pallas_build *c)
{
	const struct tpurt_grid_spec *gs = c->gs;
	struct tpu_job_header *h = &c->d->h;
	bool single = one_step(gs);
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
			if (single && !jo->buffers && jo->space == TPU_MEM_VMEM)
				jo->buffers = 1;
			jo->revisit = (uint8_t)o->spec.revisit;
		}
		for (int d = 0; d < a->rank; d++) {
			jo->shape[d] = (uint64_t)a->shape[d];
			if (o->role != TPU_ROLE_SCALAR_PREFETCH && jo->space != TPU_MEM_ANY)
				jo->block[d] = o->spec.shape[d] == TPURT_SQUEEZED ?
					       1 : (uint32_t)o->spec.shape[d];
		}
		if (o->role != TPU_ROLE_SCALAR_PREFETCH && jo->space != TPU_MEM_ANY) {
			jo->element_dims = (uint8_t)o->spec.element_dims;
			for (int d = 0; d < a->rank; d++)
				jo->element_pad[d] = (uint16_t)o->spec.element_pad[d];
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
	if (space == TPURT_SEMAPHORE_DMA || space == TPURT_SEMAPHORE_REGULAR) {
		/* the device's semaphores are flat; ops index them row-major */
		js->rank = 1;
		js->shape[0] = (uint32_t)tpurt_semaphore_count(rank, shape);
		return;
	}
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
	c->nslots = tpurt_kernel_temp_lives(k, &c->lives, &c->nlives, c->slot_temp);
	if (c->nslots < 0)
		return c->nslots;
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

		scratch_entry(&c->d->scratch[first_temp + s], TPURT_VMEM, t->dtype,
			      t->rank ? t->rank : 2, t->rank ? t->shape : shape);
	}
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
			       role_name(gs->operand[r].role), tpurt_pallas_ref_name(c, r));
		else
			append(out, len, &at, "scratch '%s': ", tpurt_pallas_ref_name(c, r));
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
			append(out, len, &at, "'%s'", tpurt_pallas_ref_name(c, r));
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
	return tpurt_pallas_ref_name(c, ref_at(c, text, text, &end));
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
			size_t len, struct tpu_plan *keep)
{
	struct tpu_job_result res = { 0 };
	struct tpu_config cfg;
	struct tpu_plan *plan = keep ? keep : malloc(sizeof(*plan));
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
	if (plan != keep)
		free(plan);
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

/* The descriptor of @k's call on @args into *@blobp (malloc'd), checked as
 * the device checks it, its decoded plan in @plan unless NULL; @c keeps what
 * the callers read after. */
static int build(struct pallas_build *c, const struct tpurt_kernel *k,
		 const struct tpurt_grid_spec *gs,
		 const struct tpurt_compiler_params *params,
		 struct tpurt_array *const *args, int nargs, void **blobp,
		 size_t *lenp, struct tpu_plan *plan)
{
	int ret;

	init_build(c, k, gs, params, args);
	*blobp = NULL;
	c->d = calloc(1, sizeof(*c->d));
	c->window_text = calloc(TPU_JOB_MAX_WINDOWS, sizeof(*c->window_text));
	c->window_base = calloc(TPU_JOB_MAX_WINDOWS, sizeof(*c->window_base));
	if (!c->d || !c->window_text || !c->window_base) {
		ret = tpurt_fail(-ENOMEM, "out of memory");
		goto out;
	}
	ret = check_args(c, nargs);
	if (!ret)
		ret = fill_operands(c);
	if (!ret)
		ret = parse_semantics(c);
	if (!ret)
		ret = fill_scratch(c);
	if (!ret)
		ret = tpurt_pallas_fill_ops(c);
	if (!ret) {
		c->d->h.flags = c->params.flags & TPURT_DEBUG ? TPU_JOB_F_DEBUG : 0;
		if (k->nprints) {	/* the slot after the operands' */
			c->d->h.flags |= TPU_JOB_F_PRINT;
			c->d->h.print_slot = (uint16_t)nargs;
		}
		c->d->h.vmem_limit_bytes = c->params.vmem_limit_bytes;
		ret = tpurt_desc_finish(c->d, blobp, lenp);
	}
	if (!ret)
		ret = device_check(c, *blobp, *lenp, plan);
	if (ret) {
		free(*blobp);
		*blobp = NULL;
	}
out:
	free(c->lives);
	free(c->window_base);
	free(c->window_text);
	free(c->d);
	c->lives = NULL;
	c->window_base = NULL;
	c->window_text = NULL;
	c->d = NULL;
	return ret;
}

int tpurt_pallas_call_build(const struct tpurt_kernel *k,
			    const struct tpurt_grid_spec *gs,
			    const struct tpurt_compiler_params *params,
			    struct tpurt_array *const *args, int nargs,
			    void **descp, size_t *lenp)
{
	struct pallas_build c;

	return build(&c, k, gs, params, args, nargs, descp, lenp, NULL);
}

int tpurt_pallas_plan(const struct tpurt_kernel *k,
		      const struct tpurt_grid_spec *gs,
		      const struct tpurt_compiler_params *params,
		      struct tpurt_array *const *args, int nargs,
		      struct tpu_plan *plan,
		      char (*scratch_names)[TPURT_NAME_MAX])
{
	struct pallas_build c;
	void *blob;
	size_t len;
	int ret;

	/* the build's own device check decodes it: keep that plan */
	ret = build(&c, k, gs, params, args, nargs, &blob, &len, plan);
	if (ret)
		return ret;
	free(blob);
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
	struct tpurt_buffer *bufs[TPU_JOB_MAX_OPERANDS + 1];
	struct tpurt_job *job;
	struct pallas_build c;
	void *blob;
	size_t len;
	int ret;

	*jobp = NULL;
	ret = build(&c, k, gs, params, args, nargs, &blob, &len, NULL);
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
	ret = tpurt_print_job_new(c.dev, k, &job->print);
	if (ret) {
		free(blob);
		free(job);
		return ret;
	}
	if (job->print)
		bufs[nargs] = tpurt_print_job_buffer(job->print);
	job->submit_ns = tpurt_now_ns();
	ret = tpurt_job_submit(job, blob, len, bufs,
			       (unsigned int)nargs + !!job->print);
	free(blob);
	if (ret) {
		tpurt_print_job_free(job->print);
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
