// SPDX-License-Identifier: MIT
/* Job descriptors and a pretend device for the engine's host tests. */
#include "job_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for one op past the limit: tests build the job the device refuses. */
struct jb {
	struct tpu_job_header h;
	struct tpu_job_operand operand[TPU_JOB_MAX_OPERANDS];
	struct tpu_job_scratch scratch[TPU_JOB_MAX_SCRATCH];
	struct tpu_job_op op[TPU_JOB_MAX_OPS + 1];
	struct tpu_job_insn insn[TPU_JOB_MAX_INSNS];
	struct tpu_job_window window[TPU_JOB_MAX_WINDOWS];
};

static void die(const char *what, const char *arg)
{
	fprintf(stderr, "job_builder: %s: %s\n", what, arg);
	abort();
}

struct jb *jb_new(void)
{
	struct jb *b = calloc(1, sizeof(*b));

	if (!b)
		die("out of memory", "jb_new");
	return b;
}

void jb_free(struct jb *b)
{
	free(b);
}

void jb_grid(struct jb *b, unsigned int rank, const uint32_t *grid,
	     const char *sem)
{
	b->h.grid_rank = rank;
	for (unsigned int d = 0; d < rank; d++) {
		b->h.grid[d] = grid[d];
		b->h.dim_semantics[d] = sem && sem[d] == 'a' ?
					TPU_DIM_ARBITRARY : TPU_DIM_PARALLEL;
	}
}

void jb_flags(struct jb *b, uint32_t flags)
{
	b->h.flags = flags;
}

void jb_vmem_limit(struct jb *b, uint64_t bytes)
{
	b->h.vmem_limit_bytes = bytes;
}

static const struct {
	const char *name;
	uint8_t op;
} words[] = {
	{ "+", TPU_INSN_ADD }, { "-", TPU_INSN_SUB }, { "*", TPU_INSN_MUL },
	{ "//", TPU_INSN_DIV }, { "%", TPU_INSN_MOD }, { "min", TPU_INSN_MIN },
	{ "max", TPU_INSN_MAX }, { "==", TPU_INSN_EQ }, { "!=", TPU_INSN_NE },
	{ "<", TPU_INSN_LT }, { "<=", TPU_INSN_LE }, { ">", TPU_INSN_GT },
	{ ">=", TPU_INSN_GE }, { "and", TPU_INSN_AND }, { "or", TPU_INSN_OR },
	{ "not", TPU_INSN_NOT },
};

static struct tpu_job_insn assemble(const char *tok)
{
	static const struct { const char *prefix; uint8_t op; } arg_ops[] = {
		{ "pid", TPU_INSN_PUSH_PID }, { "nprog", TPU_INSN_PUSH_NPROG },
		{ "smem", TPU_INSN_LOAD_SMEM }, { "scr", TPU_INSN_LOAD_SCRATCH },
		{ "loop", TPU_INSN_PUSH_LOOP_INDEX },
	};
	char *end;
	long v;

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (!strcmp(tok, words[i].name))
			return (struct tpu_job_insn){ .op = words[i].op };
	for (size_t i = 0; i < sizeof(arg_ops) / sizeof(arg_ops[0]); i++) {
		size_t n = strlen(arg_ops[i].prefix);

		if (!strncmp(tok, arg_ops[i].prefix, n)) {
			v = strtol(tok + n, &end, 10);
			if (*end || end == tok + n)
				die("bad token", tok);
			return (struct tpu_job_insn){ .op = arg_ops[i].op,
						      .arg = (int32_t)v };
		}
	}
	v = strtol(tok, &end, 10);
	if (*end || end == tok)
		die("bad token", tok);
	return (struct tpu_job_insn){ .op = TPU_INSN_PUSH_CONST, .arg = (int32_t)v };
}

struct tpu_job_prog jb_prog(struct jb *b, const char *text)
{
	struct tpu_job_prog p = { .offset = b->h.num_insns };
	char buf[512], *save, *tok;

	if (!text)
		return (struct tpu_job_prog){ 0 };
	snprintf(buf, sizeof(buf), "%s", text);
	for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		if (b->h.num_insns >= TPU_JOB_MAX_INSNS)
			die("too many instructions", text);
		b->insn[b->h.num_insns++] = assemble(tok);
		p.len++;
	}
	return p;
}

unsigned int jb_operand(struct jb *b, unsigned int role, unsigned int slot,
			unsigned int dtype, unsigned int rank,
			const uint64_t *shape, const uint32_t *block,
			const char *index_map)
{
	unsigned int i = b->h.num_operands++;
	struct tpu_job_operand *o = &b->operand[i];

	o->slot = slot;
	o->role = role;
	o->dtype = dtype;
	o->rank = rank;
	for (unsigned int d = 0; d < rank; d++) {
		o->shape[d] = shape[d];
		o->block[d] = block ? block[d] : 0;
	}
	o->index_map = jb_prog(b, index_map);
	if (role == TPU_ROLE_SCALAR_PREFETCH)
		b->h.num_scalar_prefetch++;
	return i;
}

unsigned int jb_scratch(struct jb *b, unsigned int space, unsigned int dtype,
			unsigned int rank, const uint32_t *shape)
{
	unsigned int i = b->h.num_scratch++;
	struct tpu_job_scratch *s = &b->scratch[i];

	s->space = space;
	s->dtype = dtype;
	s->rank = rank;
	memcpy(s->shape, shape, rank * sizeof(*shape));
	return i;
}

static struct tpu_job_op *new_op(struct jb *b, unsigned int opcode,
				 struct tpu_job_ref dst, const char *pred)
{
	struct tpu_job_op *op;

	if (b->h.num_ops > TPU_JOB_MAX_OPS)
		die("too many ops", "");
	op = &b->op[b->h.num_ops++];
	op->opcode = opcode;
	op->dst = dst;
	op->pred = jb_prog(b, pred);
	return op;
}

struct tpu_job_op *jb_zero(struct jb *b, struct tpu_job_ref dst,
			   const char *pred)
{
	return new_op(b, TPU_OP_ZERO, dst, pred);
}

struct tpu_job_op *jb_dot(struct jb *b, struct tpu_job_ref dst,
			  struct tpu_job_ref lhs, struct tpu_job_ref rhs,
			  unsigned int dot_flags, const char *pred)
{
	struct tpu_job_op *op = new_op(b, TPU_OP_DOT, dst, pred);

	op->src0 = lhs;
	op->src1 = rhs;
	op->dot = dot_flags;
	return op;
}

struct tpu_job_op *jb_unary(struct jb *b, unsigned int fn,
			    struct tpu_job_ref dst, struct tpu_job_ref src,
			    const char *pred)
{
	struct tpu_job_op *op = new_op(b, TPU_OP_UNARY, dst, pred);

	op->fn = fn;
	op->src0 = src;
	return op;
}

/*
 * The last k step's store of the accumulator, as libtpurt's template does
 * it: an int32 accumulator into an 8-bit output saturates (a clamp; astype
 * alone would wrap).
 */
static void store_acc(struct jb *b, const struct mm_job *j, struct tpu_job_ref z,
		      struct tpu_job_ref acc)
{
	struct tpu_job_op *op = jb_unary(b, j->activation, z, acc, "pid2 nprog2 1 - ==");
	float lo = j->out_dtype == TPU_DTYPE_INT8 ? -128.0f : 0.0f;
	float hi = j->out_dtype == TPU_DTYPE_INT8 ? 127.0f : 255.0f;

	if (j->activation != TPU_UNARY_IDENTITY || !tpu_dtype_is_8bit(j->in_dtype) ||
	    !tpu_dtype_is_8bit(j->out_dtype))
		return;
	op->fn = TPU_UNARY_CLAMP;
	memcpy(&op->imm, &lo, sizeof(lo));
	memcpy(&op->imm2, &hi, sizeof(hi));
}

struct tpu_job_op *jb_binary(struct jb *b, unsigned int fn, unsigned int bcast,
			     struct tpu_job_ref dst, struct tpu_job_ref src0,
			     struct tpu_job_ref src1, const char *pred)
{
	struct tpu_job_op *op = new_op(b, TPU_OP_BINARY, dst, pred);

	op->fn = fn;
	op->bcast = bcast;
	op->src0 = src0;
	op->src1 = src1;
	return op;
}

/* --- the memory model --- */

void jb_space(struct jb *b, unsigned int i, unsigned int space)
{
	b->operand[i].space = space;
}

void jb_buffers(struct jb *b, unsigned int i, unsigned int n)
{
	b->operand[i].buffers = n;
}

void jb_revisit(struct jb *b, unsigned int i, unsigned int mode)
{
	b->operand[i].revisit = mode;
}

void jb_element(struct jb *b, unsigned int i, unsigned int dims,
		const uint16_t *pad)
{
	b->operand[i].element_dims = dims;
	for (unsigned int d = 0; pad && d < TPU_JOB_MAX_RANK; d++)
		b->operand[i].element_pad[d] = pad[d];
}

void jb_alias(struct jb *b, unsigned int out, unsigned int in)
{
	b->operand[out].alias = in + 1;
}

unsigned int jb_window(struct jb *b, struct tpu_job_ref base,
		       unsigned int squeeze, const uint32_t *size,
		       unsigned int rank, const char *start)
{
	unsigned int i = b->h.num_windows++;
	struct tpu_job_window *w;

	if (i >= TPU_JOB_MAX_WINDOWS)
		die("too many windows", "");
	w = &b->window[i];
	w->base = base;
	w->squeeze = squeeze;
	memcpy(w->size, size, rank * sizeof(*size));
	w->start = jb_prog(b, start);
	return i;
}

struct tpu_job_op *jb_copy(struct jb *b, unsigned int opcode,
			   struct tpu_job_ref dst, struct tpu_job_ref src,
			   struct tpu_job_ref sem, const char *sem_index,
			   const char *pred)
{
	struct tpu_job_op *op = new_op(b, opcode, dst, pred);

	op->src0 = src;
	op->src1 = sem;
	op->scalar_index = jb_prog(b, sem_index);
	return op;
}

struct tpu_job_op *jb_sem_op(struct jb *b, unsigned int opcode,
			     struct tpu_job_ref sem, const char *index_amount,
			     const char *pred)
{
	struct tpu_job_op *op = new_op(b, opcode, JB_NONE, pred);

	op->src1 = sem;
	op->scalar_index = jb_prog(b, index_amount);
	return op;
}

struct tpu_job_op *jb_scalar_store(struct jb *b, struct tpu_job_ref dst,
				   const char *index_value, const char *pred)
{
	struct tpu_job_op *op = new_op(b, TPU_OP_SCALAR_STORE, dst, pred);

	op->scalar_index = jb_prog(b, index_value);
	return op;
}

struct tpu_job_op *jb_loop(struct jb *b, unsigned int kind, const char *prog,
			   unsigned int body_ops, const char *pred)
{
	struct tpu_job_op *op = new_op(b, TPU_OP_LOOP, JB_NONE, pred);

	op->fn = (uint8_t)kind;
	op->imm = body_ops;
	op->scalar_index = jb_prog(b, prog);
	return op;
}

static size_t align8(size_t v)
{
	return (v + 7) & ~(size_t)7;
}

void *jb_finish(struct jb *b, size_t *len)
{
	size_t at = sizeof(b->h), n;
	uint8_t *blob;
	struct tpu_job_header *h = &b->h;

	h->magic = TPU_JOB_MAGIC;
	h->version = TPU_JOB_VERSION;
	h->header_size = sizeof(*h);
	h->operands_offset = at;
	at = align8(at + h->num_operands * sizeof(b->operand[0]));
	h->scratch_offset = at;
	at = align8(at + h->num_scratch * sizeof(b->scratch[0]));
	h->ops_offset = at;
	at = align8(at + h->num_ops * sizeof(b->op[0]));
	h->code_offset = at;
	at = align8(at + h->num_insns * sizeof(b->insn[0]));
	h->windows_offset = at;
	at = align8(at + h->num_windows * sizeof(b->window[0]));
	h->total_size = at;
	blob = calloc(1, at);
	if (!blob)
		die("out of memory", "jb_finish");
	memcpy(blob, h, sizeof(*h));
	n = h->num_operands * sizeof(b->operand[0]);
	memcpy(blob + h->operands_offset, b->operand, n);
	memcpy(blob + h->scratch_offset, b->scratch,
	       h->num_scratch * sizeof(b->scratch[0]));
	memcpy(blob + h->ops_offset, b->op, h->num_ops * sizeof(b->op[0]));
	memcpy(blob + h->code_offset, b->insn, h->num_insns * sizeof(b->insn[0]));
	memcpy(blob + h->windows_offset, b->window,
	       h->num_windows * sizeof(b->window[0]));
	*len = at;
	return blob;
}

struct tpu_job_header *jb_header(void *blob)
{
	return blob;
}

/* --- the pretend device --- */

struct tdev *tdev_new(uint64_t hbm_size, unsigned int cores)
{
	struct tdev *d = calloc(1, sizeof(*d));

	if (!d)
		die("out of memory", "tdev_new");
	tpu_config_defaults(&d->cfg);
	d->cfg.cores = cores;
	d->hbm_size = hbm_size;
	d->hbm = aligned_alloc(4096, hbm_size);
	if (!d->hbm)
		die("out of memory", "hbm");
	memset(d->hbm, 0x5c, hbm_size);
	tdev_reconfigure(d);
	return d;
}

void tdev_reconfigure(struct tdev *d)
{
	char err[256];

	tpu_engine_destroy(d->engine);
	d->engine = tpu_engine_create(&d->cfg, err, sizeof(err));
	if (!d->engine)
		die("tpu_engine_create", err);
}

void tdev_free(struct tdev *d)
{
	tpu_engine_destroy(d->engine);
	free(d->hbm);
	free(d);
}

unsigned int tdev_alloc(struct tdev *d, uint64_t bytes)
{
	unsigned int slot = d->nslots++;

	if (slot >= TPU_JOB_MAX_SLOTS || d->used + bytes > d->hbm_size)
		die("tdev_alloc", "out of HBM or slots");
	d->slots[slot] = (struct tpu_buffer_slot){ d->used, bytes };
	d->used = (d->used + bytes + 63) & ~63ull;
	return slot;
}

void *tdev_ptr(struct tdev *d, unsigned int slot)
{
	return d->hbm + d->slots[slot].offset;
}

int tdev_run(struct tdev *d, const void *blob, size_t len, unsigned int flags,
	     struct tpu_job_result *res)
{
	return tpu_engine_run(d->engine, blob, len, d->hbm, d->hbm_size,
			      d->slots, d->nslots, flags, res);
}

/* --- the guide's matmul --- */

static uint32_t cdiv(uint64_t a, uint64_t b)
{
	return (uint32_t)((a + b - 1) / b);
}

void *mm_build(const struct mm_job *j, size_t *len)
{
	struct jb *b = jb_new();
	uint32_t grid[3] = { cdiv(j->m, j->bm), cdiv(j->n, j->bn), cdiv(j->k, j->bk) };
	uint64_t xs[2] = { j->m, j->k }, ys[2] = { j->k, j->n };
	uint64_t zs[2] = { j->m, j->n }, bs[1] = { j->n };
	uint32_t xb[2] = { j->bm, j->bk }, yb[2] = { j->bk, j->bn };
	uint32_t zb[2] = { j->bm, j->bn }, bb[1] = { j->bn };
	const char *xmap = "pid0 pid2", *ymap = "pid2 pid1";
	bool int8 = j->in_dtype == TPU_DTYPE_INT8 || j->in_dtype == TPU_DTYPE_UINT8;
	unsigned int dot = TPU_DOT_ACCUMULATE, x, y, z, bias = 0;
	struct tpu_job_ref acc;
	void *blob;

	if (j->transpose_lhs) {
		xs[0] = j->k, xs[1] = j->m, xb[0] = j->bk, xb[1] = j->bm;
		xmap = "pid2 pid0";
		dot |= TPU_DOT_LHS_CONTRACT_0;
	}
	if (j->transpose_rhs) {
		ys[0] = j->n, ys[1] = j->k, yb[0] = j->bn, yb[1] = j->bk;
		ymap = "pid1 pid2";
		dot |= TPU_DOT_RHS_CONTRACT_1;
	}
	jb_grid(b, 3, grid, j->sem ? j->sem : "ppa");
	jb_flags(b, j->flags);
	x = jb_operand(b, TPU_ROLE_INPUT, j->x_slot, j->in_dtype, 2, xs, xb, xmap);
	y = jb_operand(b, TPU_ROLE_INPUT, j->y_slot, j->in_dtype, 2, ys, yb, ymap);
	if (j->bias)
		bias = jb_operand(b, TPU_ROLE_INPUT, j->bias_slot, TPU_DTYPE_F32,
				  1, bs, bb, "pid1");
	z = jb_operand(b, TPU_ROLE_OUTPUT, j->z_slot, j->out_dtype, 2, zs, zb,
		       "pid0 pid1");
	if (j->alias)
		jb_alias(b, z, j->alias == 1 ? x : y);
	acc = JB_OPND(z);
	if (j->acc_scratch)
		acc = JB_SCR(jb_scratch(b, TPU_MEM_VMEM,
					int8 ? TPU_DTYPE_INT32 : TPU_DTYPE_F32, 2, zb));
	if (!j->no_zero)
		jb_zero(b, acc, "pid2 0 ==");
	jb_dot(b, acc, JB_OPND(x), JB_OPND(y), dot, NULL);
	if (j->acc_scratch) {
		if (j->bias)
			jb_binary(b, TPU_BINARY_ADD, TPU_BCAST_ROW, acc, acc,
				  JB_OPND(bias), "pid2 nprog2 1 - ==");
		store_acc(b, j, JB_OPND(z), acc);
	} else if (j->activation) {
		jb_unary(b, j->activation, JB_OPND(z), acc, "pid2 nprog2 1 - ==");
	}
	blob = jb_finish(b, len);
	jb_free(b);
	return blob;
}

/* --- references --- */

#include <math.h>

float ref_from_bf16(uint16_t h)
{
	uint32_t b = (uint32_t)h << 16;
	float f;

	memcpy(&f, &b, sizeof(f));
	return f;
}

uint16_t ref_bf16(float f)
{
	uint32_t b;

	memcpy(&b, &f, sizeof(b));
	if (isnan(f))
		return (uint16_t)((b >> 16) | 0x40);
	/* ties to even, written the long way round as a cross-check */
	uint32_t lower = b & 0xffff, upper = b >> 16;

	if (lower > 0x8000 || (lower == 0x8000 && (upper & 1)))
		upper++;
	return (uint16_t)upper;
}

double ref_get(const void *p, unsigned int dtype, uint64_t i)
{
	switch (dtype) {
	case TPU_DTYPE_F32:	return ((const float *)p)[i];
	case TPU_DTYPE_BF16:	return ref_from_bf16(((const uint16_t *)p)[i]);
	case TPU_DTYPE_INT8:	return ((const int8_t *)p)[i];
	case TPU_DTYPE_UINT8:	return ((const uint8_t *)p)[i];
	case TPU_DTYPE_BOOL:	return ((const uint8_t *)p)[i] != 0;
	case TPU_DTYPE_UINT32:	return ((const uint32_t *)p)[i];
	default:		return ((const int32_t *)p)[i];
	}
}

static double sat(double v, double lo, double hi)
{
	if (isnan(v))
		return 0;
	v = nearbyint(v);
	return v < lo ? lo : v > hi ? hi : v;
}

void ref_set(void *p, unsigned int dtype, uint64_t i, double v)
{
	switch (dtype) {
	case TPU_DTYPE_F32:
		((float *)p)[i] = (float)v;
		break;
	case TPU_DTYPE_BF16:
		((uint16_t *)p)[i] = ref_bf16((float)v);
		break;
	case TPU_DTYPE_INT8:
		((int8_t *)p)[i] = (int8_t)sat(v, -128, 127);
		break;
	case TPU_DTYPE_UINT8:
		((uint8_t *)p)[i] = (uint8_t)sat(v, 0, 255);
		break;
	case TPU_DTYPE_BOOL:
		((uint8_t *)p)[i] = v != 0;
		break;
	case TPU_DTYPE_UINT32:
		((uint32_t *)p)[i] = (uint32_t)sat(v, 0, UINT32_MAX);
		break;
	default:
		((int32_t *)p)[i] = (int32_t)sat(v, INT32_MIN, INT32_MAX);
		break;
	}
}

void ref_fill(void *p, unsigned int dtype, uint64_t n, uint32_t seed,
	      int lo, int hi)
{
	uint32_t s = seed * 2654435761u + 1;

	for (uint64_t i = 0; i < n; i++) {
		double v;

		s = s * 1664525u + 1013904223u;
		if (lo <= hi)
			v = lo + (int)((s >> 8) % (uint32_t)(hi - lo + 1));
		else
			v = (double)(s >> 8) / (1 << 23) - 1.0;
		ref_set(p, dtype, i, v);
	}
}

static double ref_max(double a, double b)
{
	return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
}

static double ref_min(double a, double b)
{
	return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
}

double ref_unary_clamp(unsigned int fn, double x, double lo, double hi)
{
	switch (fn) {
	case TPU_UNARY_IDENTITY:	return x;
	case TPU_UNARY_RELU:		return ref_max(x, 0);
	case TPU_UNARY_GELU:
		return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
	case TPU_UNARY_SILU:		return x / (1 + exp(-x));
	case TPU_UNARY_SIGMOID:		return 1 / (1 + exp(-x));
	case TPU_UNARY_TANH:		return tanh(x);
	case TPU_UNARY_EXP:		return exp(x);
	case TPU_UNARY_NEG:		return -x;
	case TPU_UNARY_ABS:		return fabs(x);
	case TPU_UNARY_RECIPROCAL:	return 1 / x;
	case TPU_UNARY_SQRT:		return sqrt(x);
	case TPU_UNARY_RSQRT:		return 1 / sqrt(x);
	case TPU_UNARY_LOG:		return log(x);
	case TPU_UNARY_LOG1P:		return log1p(x);
	case TPU_UNARY_EXP2:		return exp2(x);
	case TPU_UNARY_SQUARE:		return x * x;
	case TPU_UNARY_FLOOR:		return floor(x);
	case TPU_UNARY_CEIL:		return ceil(x);
	case TPU_UNARY_SIGN:		return isnan(x) || x == 0 ? x : x > 0 ? 1 : -1;
	case TPU_UNARY_NOT:		return x == 0;
	case TPU_UNARY_CLAMP:		return ref_min(ref_max(x, lo), hi);
	case TPU_UNARY_SIN:		return sin(x);
	case TPU_UNARY_COS:		return cos(x);
	case TPU_UNARY_ERF:		return erf(x);
	default:			return rint(x);
	}
}

double ref_unary(unsigned int fn, double x)
{
	return ref_unary_clamp(fn, x, 0, 0);
}

double ref_binary(unsigned int fn, double a, double b)
{
	double r;

	switch (fn) {
	case TPU_BINARY_ADD:	return a + b;
	case TPU_BINARY_SUB:	return a - b;
	case TPU_BINARY_MUL:	return a * b;
	case TPU_BINARY_MAX:	return ref_max(a, b);
	case TPU_BINARY_MIN:	return ref_min(a, b);
	case TPU_BINARY_DIV:	return a / b;
	case TPU_BINARY_POW:	return pow(a, b);
	case TPU_BINARY_MOD:
		r = fmod(a, b);
		if (r == 0)
			return copysign(0, b);
		return (r < 0) != (b < 0) ? r + b : r;
	case TPU_BINARY_EQ:	return a == b;
	case TPU_BINARY_NE:	return a != b;
	case TPU_BINARY_LT:	return a < b;
	case TPU_BINARY_LE:	return a <= b;
	case TPU_BINARY_GT:	return a > b;
	case TPU_BINARY_GE:	return a >= b;
	case TPU_BINARY_AND:	return a != 0 && b != 0;
	default:		return a != 0 || b != 0;
	}
}

/* @rows rows of @k doubles; element (r, p) of @src at r * @rs + p * @ps. */
static double *ref_rows(const void *src, unsigned int dtype, uint64_t rows,
			uint64_t k, uint64_t rs, uint64_t ps)
{
	double *d = malloc((rows * k + 1) * sizeof(*d));

	for (uint64_t r = 0; r < rows; r++)
		for (uint64_t p = 0; p < k; p++)
			d[r * k + p] = ref_get(src, dtype, r * rs + p * ps);
	return d;
}

void ref_matmul(const struct mm_job *j, const void *x, const void *y,
		const float *bias, void *z)
{
	/* x's rows and y's columns as doubles, once: the loop reads both in order */
	bool tl = j->transpose_lhs, tr = j->transpose_rhs;
	double *xd = ref_rows(x, j->in_dtype, j->m, j->k, tl ? 1 : j->k, tl ? j->m : 1);
	double *yd = ref_rows(y, j->in_dtype, j->n, j->k, tr ? j->k : 1, tr ? 1 : j->n);

	for (uint64_t r = 0; r < j->m; r++)
		for (uint64_t c = 0; c < j->n; c++) {
			const double *xr = xd + r * j->k, *yc = yd + c * j->k;
			double acc = 0;

			for (uint64_t p = 0; p < j->k; p++)
				acc += xr[p] * yc[p];
			if (j->bias)
				acc += bias[c];
			ref_set(z, j->out_dtype, r * j->n + c,
				ref_unary(j->activation, acc));
		}
	free(xd);
	free(yd);
}
