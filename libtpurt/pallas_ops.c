// SPDX-License-Identifier: MIT
/*
 * pallas_call: the kernel's ops into the job descriptor. Refs are resolved
 * by name at each op (a scope open there, the grid spec's refs, the
 * kernel's temporaries); windows (ref.at[...]) become entries of the
 * window table, one per text, their starts programs of the scalar core;
 * copies, semaphore ops and SMEM stores get their semaphore and element
 * programs; predicates and scalars compile as body programs, which may
 * read SMEM refs and semaphores by name. The device's decoder checks the
 * result (pallas_call.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pallas_build.h"
#include "tpu_plan.h"

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

/* Ref @index as op @n of the job names it (a temporary: the slot of its
 * life there). */
static struct tpu_job_ref job_ref(const struct pallas_build *c, int index, int n)
{
	const struct tpurt_grid_spec *gs = c->gs;

	if (index < gs->num_operands)
		return (struct tpu_job_ref){ TPU_REF_OPERAND, (uint8_t)index };
	index -= gs->num_operands;
	if (index >= gs->num_scratch + c->k->nscopes)	/* a temporary: its slot */
		index = gs->num_scratch + c->nscope_slots +
			tpurt_kernel_temp_slot_at(c->lives, c->nlives,
						  index - gs->num_scratch - c->k->nscopes, n);
	else if (index >= gs->num_scratch)		/* a scope: its slot */
		index = gs->num_scratch + c->scope_slot[index - gs->num_scratch];
	return (struct tpu_job_ref){ TPU_REF_SCRATCH, (uint8_t)index };
}

const char *tpurt_pallas_ref_name(const struct pallas_build *c, int index)
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
	if (c->k->temp[i].rank) {
		b->rank = c->k->temp[i].rank;
		memcpy(b->extent, c->k->temp[i].shape, sizeof(c->k->temp[i].shape));
	}
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

		if (!scope && !strcmp(tpurt_pallas_ref_name(c, i), name))
			return i;
		if (!scope && at < sizeof(names))
			at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s",
					       at ? ", " : "", tpurt_pallas_ref_name(c, i));
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
			.name = tpurt_pallas_ref_name(c, i),
			.insn = i < gs->num_operands ? TPU_INSN_LOAD_SMEM :
				TPU_INSN_LOAD_SCRATCH,
			.arg = i < gs->num_operands ? i : job_ref(c, i, n).index,
			.cols = b.rank == 2 && !b.hidden ? b.extent[1] : 0,
			.semaphore = is_semaphore(b.space),
			.rank = b.rank,
		};
		memcpy(names[count - 1].extent, b.extent, sizeof(b.extent));
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
	struct tpu_job_ref base = job_ref(c, b->index, n);
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
	ret = tpurt_window_fit(rt, what, b->rank, b->extent, b->hidden,
			       op->npred > 0, &fit);
	if (ret)
		return ret;
	w = &c->d->window[h->num_windows];
	memset(w, 0, sizeof(*w));
	w->base = base;
	w->squeeze = fit.squeeze;
	memcpy(w->size, fit.size, sizeof(w->size));
	memcpy(w->stride, fit.stride, sizeof(w->stride));
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

/*
 * Parse @text, as op @n names a ref (@kind: "" or ": semaphore", for
 * errors), into @rt; find the ref it names and its base @b. Returns the
 * ref's index, or a negative errno.
 */
static int parse_ref(struct pallas_build *c, int n,
		     const struct tpurt_kernel_op *op, const char *text,
		     const char *kind, struct tpurt_ref_text *rt,
		     struct ref_base *b)
{
	char what[64];
	int i, ret;

	snprintf(what, sizeof(what), "kernel op %d (%s)%s", n,
		 tpurt_kernel_opcode_name(op->opcode), kind);
	ret = tpurt_ref_parse(text, what, rt);
	if (ret)
		return ret;
	i = find_ref(c, n, op, rt->base);
	if (i >= 0)
		base_of(c, i, b);
	return i;
}

/*
 * A ref or a window of one, as the op names it: never a semaphore. A
 * copy's whole block with squeezed dimensions (BlockSpec((None, 8, 128)))
 * is a window that squeezes them, as the device sees only their size 1.
 */
static int resolve_ref(struct pallas_build *c, int n,
		       const struct tpurt_kernel_op *op, const char *text,
		       int copy, struct tpu_job_ref *r)
{
	struct tpurt_ref_text rt;
	struct ref_base b;
	int i = parse_ref(c, n, op, text, "", &rt, &b);

	if (i < 0)
		return i;
	if (is_semaphore(b.space))
		return op_fail(n, op, "'%s' is a semaphore, not a ref to compute on or copy",
			       rt.base);
	if (!rt.windowed && copy && b.hidden)
		rt.windowed = 1;	/* no indices: the hidden ones squeezed */
	if (!rt.windowed) {
		*r = job_ref(c, i, n);
		return 0;
	}
	return add_window(c, n, op, text, &rt, &b, r);
}

static int resolve(struct pallas_build *c, int n,
		   const struct tpurt_kernel_op *op, const char *text,
		   struct tpu_job_ref *r)
{
	return resolve_ref(c, n, op, text, 0, r);
}

/* The row-major flat index of the element @rt names, as program text:
 * "((i) * 3 + (j))" of a (2, 3) array. */
static int semaphore_index(const struct tpurt_ref_text *rt, const struct ref_base *b,
			   char *index, size_t len)
{
	size_t at;

	if (!rt->windowed) {
		snprintf(index, len, "0");
		return 0;
	}
	at = (size_t)snprintf(index, len, "%s", rt->idx[0].start);
	for (int d = 1; d < rt->nidx && at < len; d++) {
		char prev[TPURT_TEXT_MAX + 32];

		snprintf(prev, sizeof(prev), "%s", index);
		at = (size_t)snprintf(index, len, "(%s) * %lld + (%s)", prev,
				      (long long)b->extent[d], rt->idx[d].start);
	}
	return at >= len;
}

/* "sem" or "sem.at[i]" ("sem.at[i, j]" of a 2-D array): the semaphore
 * scratch and the element's flat index. */
static int resolve_semaphore(struct pallas_build *c, int n,
			     const struct tpurt_kernel_op *op, const char *text,
			     struct tpu_job_ref *r, char *index, size_t len)
{
	struct tpurt_ref_text rt;
	struct ref_base b;
	int i = parse_ref(c, n, op, text, ": semaphore", &rt, &b);

	if (i < 0)
		return i;
	if (!is_semaphore(b.space))
		return op_fail(n, op, "'%s' is not a semaphore (scratch of TPURT_SEMAPHORE_DMA or _REGULAR)",
			       rt.base);
	if (!rt.windowed && b.rank > 1)
		return op_fail(n, op, "semaphore '%s' of rank %d: name one element, %s.at[%s]",
			       text, b.rank, rt.base, b.rank == 2 ? "i, j" : "i, j, ...");
	if (rt.windowed && rt.nidx != b.rank)
		return op_fail(n, op, "semaphore '%s': %d indices for a semaphore array of rank %d (name one element)",
			       text, rt.nidx, b.rank);
	for (int d = 0; rt.windowed && d < rt.nidx; d++)
		if (rt.idx[d].kind != TPURT_IX_INDEX)
			return op_fail(n, op, "semaphore '%s': index %d is a slice; name one element, %s.at[i%s]",
				       text, d, rt.base, b.rank > 1 ? ", j" : "");
	*r = job_ref(c, i, n);
	return semaphore_index(&rt, &b, index, len) ?
	       op_fail(n, op, "semaphore '%s': index text too long", text) : 0;
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
	*r = job_ref(c, i, n);
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
	int gather_fill = op->opcode == TPU_OP_GATHER && op->fn == TPU_GATHER_FILL;

	if (clamp || gather_fill || (has_bcast && op->bcast == TPU_BCAST_IMM))
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
		ret = resolve_ref(c, n, op, op->dst, 1, &jo->dst);
	if (!ret && copy && op->src0[0])
		ret = resolve_ref(c, n, op, op->src0, 1, &jo->src0);
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
	if (op->opcode == TPU_OP_LOOP) {
		jo->fn = op->fn;
		jo->imm = (uint32_t)op->body;
		jo->imm2 = op->max_trips;
		ret = body_program(c, n, op, op->scalar, op->fn == TPU_LOOP_FOR ? 2 : 1,
				   op->fn == TPU_LOOP_FOR ? "loop bounds" : "loop condition",
				   &jo->scalar_index);
		return ret ? ret : compile_pred(c, n, op, &jo->pred);
	}
	if (op->opcode == TPU_OP_PRNG_SEED) {	/* no ref: the core's PRNG */
		jo->fn = op->fn;
		ret = body_program(c, n, op, op->scalar, op->fn + 1, "prng seeds",
				   &jo->scalar_index);
		return ret ? ret : compile_pred(c, n, op, &jo->pred);
	}
	if (op->opcode == TPU_OP_DELAY) {	/* the timing model's stall */
		jo->imm = op->delay_ns;
		return compile_pred(c, n, op, &jo->pred);
	}
	if (op->opcode == TPU_OP_DEBUG_PRINT) {	/* values and refs, no dst */
		const char *src[3] = { op->src0, op->src1, op->src2 };
		struct tpu_job_ref *ref[3] = { &jo->src0, &jo->src1, &jo->src2 };

		jo->fn = op->fn;
		jo->imm = (uint32_t)op->print;
		ret = op->fn ? body_program(c, n, op, op->scalar, op->fn,
					    "debug_print values", &jo->scalar_index) : 0;
		for (int k = 0; k < 3 && !ret && src[k][0]; k++)
			ret = resolve(c, n, op, src[k], ref[k]);
		return ret ? ret : compile_pred(c, n, op, &jo->pred);
	}
	if (tpu_opcode_is_memory(op->opcode)) {
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
				   op->opcode == TPU_OP_IOTA ? "iota offset" :
				   op->opcode == TPU_OP_ROLL ? "roll shift" : "scalar",
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

int tpurt_pallas_fill_ops(struct pallas_build *c)
{
	const struct tpurt_kernel *k = c->k;

	if (k->nwhen)
		return tpurt_fail(-EINVAL, "kernel: %d when() block(s) not ended",
				  k->nwhen);
	if (k->nopen)
		return tpurt_fail(-EINVAL, "kernel: %d run_scoped() block(s) not ended",
				  k->nopen);
	if (k->nloops)
		return tpurt_fail(-EINVAL, "kernel: %d loop(s) not ended", k->nloops);
	for (int i = 0; i < k->nops; i++) {
		int ret = fill_op(c, i, &k->op[i], &c->d->op[i]);

		if (ret)
			return ret;
	}
	c->d->h.num_ops = (uint16_t)k->nops;
	return 0;
}
