// SPDX-License-Identifier: MIT
/*
 * Kernels: the body of a pallas_call as a list of operations on refs. The
 * builder records names and predicate texts only; pallas_call resolves them
 * against the grid spec it is given, as Pallas binds a kernel function's
 * parameters at call time.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tpu_plan.h"
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

/* The when() blocks opened inside the innermost open loop (all if none). */
static int when_base(const struct tpurt_kernel *k)
{
	return k->nloops ? k->loop_when[k->nloops - 1] : 0;
}

int tpurt_kernel_end_when(struct tpurt_kernel *k)
{
	if (!k->nwhen)
		return tpurt_fail(-EINVAL, "kernel: end_when() without when()");
	if (k->nwhen == when_base(k))
		return tpurt_fail(-EINVAL, "kernel: end_when() of a when() opened outside the open loop: end_loop() first");
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
	ret = dst || !(tpu_opcode_is_memory(opcode) || opcode == TPU_OP_PRNG_SEED ||
		       opcode == TPU_OP_LOOP || opcode == TPU_OP_DEBUG_PRINT ||
		       opcode == TPU_OP_DELAY) ?
	      copy_text(op->dst, TPURT_TEXT_MAX, dst, "destination ref") : 0;
	if (!ret && src0)
		ret = copy_text(op->src0, TPURT_TEXT_MAX, src0, "source ref");
	if (!ret && src1)
		ret = copy_text(op->src1, TPURT_TEXT_MAX, src1,
				tpu_opcode_is_memory(opcode) ? "semaphore" : "source ref");
	if (ret)
		return ret;
	/* a loop's body runs under its predicate, read once when it is entered */
	op->npred = k->nwhen - when_base(k);
	memcpy(op->pred, k->when[when_base(k)],
	       (size_t)op->npred * sizeof(op->pred[0]));
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

/* A loop op over the ops added until the matching end_loop(). */
static int open_loop(struct tpurt_kernel *k, uint8_t kind, const char *prog,
		     uint32_t max_trips)
{
	struct tpurt_kernel_op *op;
	int ret;

	if (k->nloops == TPU_JOB_MAX_LOOP_DEPTH)
		return tpurt_fail(-E2BIG, "kernel: loops nested deeper than %d",
				  TPU_JOB_MAX_LOOP_DEPTH);
	ret = add_op(k, TPU_OP_LOOP, NULL, NULL, NULL, &op);
	if (!ret)
		ret = set_scalar(k, op, prog, kind == TPU_LOOP_FOR ? "loop bounds" :
				 "loop condition");
	if (ret)
		return ret;
	op->fn = kind;
	op->max_trips = max_trips;
	k->loop_op[k->nloops] = k->nops - 1;
	k->loop_when[k->nloops++] = k->nwhen;
	return 0;
}

int tpurt_kernel_loop(struct tpurt_kernel *k, const char *lo, const char *hi)
{
	char prog[2 * TPURT_TEXT_MAX + 8];

	if (!lo || !*lo || !hi || !*hi)
		return tpurt_fail(-EINVAL, "kernel: loop(): lo and hi are index-map expressions");
	if (snprintf(prog, sizeof(prog), "%s, %s", lo, hi) >= TPURT_TEXT_MAX)
		return tpurt_fail(-EINVAL, "kernel: loop bounds '%s', '%s' longer than %d characters",
				  lo, hi, TPURT_TEXT_MAX - 3);
	return open_loop(k, TPU_LOOP_FOR, prog, 0);
}

int tpurt_kernel_while(struct tpurt_kernel *k, const char *cond,
		       int64_t max_trips)
{
	if (max_trips < 0 || max_trips > TPU_JOB_MAX_TRIPS)
		return tpurt_fail(-EINVAL, "kernel: while(): max_trips %lld not in 0..%u",
				  (long long)max_trips, TPU_JOB_MAX_TRIPS);
	return open_loop(k, TPU_LOOP_WHILE, cond, (uint32_t)max_trips);
}

int tpurt_kernel_end_loop(struct tpurt_kernel *k)
{
	int n;

	if (!k->nloops)
		return tpurt_fail(-EINVAL, "kernel: end_loop() without loop() or while()");
	if (k->nwhen != k->loop_when[k->nloops - 1])
		return tpurt_fail(-EINVAL, "kernel: end_loop() with %d when() block(s) of its body open",
				  k->nwhen - k->loop_when[k->nloops - 1]);
	n = k->loop_op[k->nloops - 1];
	if (n == k->nops - 1)
		return tpurt_fail(-EINVAL, "kernel: the loop of op %d has no operations in its body",
				  n);
	k->op[n].body = k->nops - 1 - n;
	k->nloops--;
	return 0;
}

int tpurt_kernel_loop_depth(const struct tpurt_kernel *k)
{
	return k->nloops;
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
	return copy_text(ref, TPURT_TEXT_MAX, v->ref, "select operand ref");
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

int tpurt_kernel_transpose(struct tpurt_kernel *k, const char *dst,
			   const char *src)
{
	if (!src)
		return tpurt_fail(-EINVAL, "kernel: transpose: source ref missing");
	return add_op(k, TPU_OP_TRANSPOSE, dst, src, NULL, NULL);
}

int tpurt_kernel_roll(struct tpurt_kernel *k, const char *dst,
		      const char *src, const char *shift, int axis)
{
	struct tpurt_kernel_op *op;
	int ret = check_axis(axis, "roll");

	if (!ret && (!src || !shift))
		ret = tpurt_fail(-EINVAL, "kernel: roll: %s missing",
				 src ? "shift" : "source ref");
	if (!ret)
		ret = add_op(k, TPU_OP_ROLL, dst, src, NULL, &op);
	if (!ret)
		ret = set_scalar(k, op, shift, "roll shift");
	if (ret)
		return ret;
	op->axis = (uint8_t)axis;
	return 0;
}

int tpurt_kernel_gather(struct tpurt_kernel *k, const char *dst,
			const char *src, const char *indices, int axis,
			enum tpurt_gather_mode mode, const float *fill)
{
	struct tpurt_kernel_op *op;
	int ret = check_axis(axis, "gather");

	if (!ret && (!src || !indices))
		ret = tpurt_fail(-EINVAL, "kernel: gather: %s missing",
				 src ? "indices ref" : "source ref");
	if (!ret && mode != TPURT_GATHER_FILL &&
	    mode != TPURT_GATHER_PROMISE_IN_BOUNDS)
		ret = tpurt_fail(-EINVAL, "kernel: gather: mode %d unknown (fill or promise_in_bounds)",
				 (int)mode);
	if (!ret && fill && mode != TPURT_GATHER_FILL)
		ret = tpurt_fail(-EINVAL, "kernel: gather: a fill value needs mode fill");
	if (!ret)
		ret = add_op(k, TPU_OP_GATHER, dst, src, indices, &op);
	if (ret)
		return ret;
	op->axis = (uint8_t)axis;
	op->fn = mode == TPURT_GATHER_FILL ? TPU_GATHER_FILL : TPU_GATHER_PROMISE;
	op->imm = fill ? *fill : NAN;
	return 0;
}

int tpurt_kernel_prng_seed(struct tpurt_kernel *k, int n,
			   const char *const *seeds)
{
	char text[TPURT_TEXT_MAX];
	struct tpurt_kernel_op *op;
	size_t len = 0;
	int ret;

	if (n < 1 || n > TPU_PRNG_MAX_SEEDS || !seeds)
		return tpurt_fail(-EINVAL, "kernel: prng_seed: %d seeds (1 to %d)",
				  n, TPU_PRNG_MAX_SEEDS);
	text[0] = 0;
	for (int i = 0; i < n; i++) {
		int w;

		if (!seeds[i] || !*seeds[i])
			return tpurt_fail(-EINVAL, "kernel: prng_seed: seed %d missing", i);
		w = snprintf(text + len, sizeof(text) - len, "%s%s", i ? ", " : "",
			     seeds[i]);
		if (w < 0 || (size_t)w >= sizeof(text) - len)
			return tpurt_fail(-ENAMETOOLONG, "kernel: prng_seed: seeds longer than %d characters",
					  TPURT_TEXT_MAX - 1);
		len += (size_t)w;
	}
	ret = add_op(k, TPU_OP_PRNG_SEED, NULL, NULL, NULL, &op);
	if (!ret)
		ret = set_scalar(k, op, text, "prng seeds");
	if (ret)
		return ret;
	op->fn = (uint8_t)(n - 1);
	return 0;
}

int tpurt_kernel_delay(struct tpurt_kernel *k, int64_t nanos)
{
	struct tpurt_kernel_op *op;
	int ret;

	if (nanos < 1 || nanos > TPU_JOB_MAX_DELAY_NS)
		return tpurt_fail(-EINVAL, "kernel: delay(%lld): nanoseconds are 1 to %u",
				  (long long)nanos, TPU_JOB_MAX_DELAY_NS);
	ret = add_op(k, TPU_OP_DELAY, NULL, NULL, NULL, &op);
	if (ret)
		return ret;
	op->delay_ns = (uint32_t)nanos;
	return 0;
}

int tpurt_kernel_prng_random_bits(struct tpurt_kernel *k, const char *dst)
{
	return add_op(k, TPU_OP_PRNG_BITS, dst, NULL, NULL, NULL);
}

/* The scalar arguments' texts joined ("a, b") and the refs' names. */
static int print_operands(struct tpurt_kernel_print *p, int nargs,
			  const struct tpurt_print_arg *args, char *scalars,
			  const char **refs, int *nscalars, int *nrefs)
{
	size_t len = 0;

	scalars[0] = 0;
	*nscalars = *nrefs = 0;
	for (int i = 0; i < nargs; i++) {
		const struct tpurt_print_arg *a = &args[i];
		int ref = a->kind == TPURT_PRINT_REF, w;

		if (!a->text || !*a->text || (unsigned int)a->kind > TPURT_PRINT_REF)
			return tpurt_fail(-EINVAL, "kernel: debug_print: argument %d missing or of unknown kind %d",
					  i, (int)a->kind);
		if (ref ? *nrefs == TPU_PRINT_MAX_REFS : *nscalars == TPU_PRINT_MAX_SCALARS)
			return tpurt_fail(-EINVAL, "kernel: debug_print: argument %d: more than %d %s",
					  i, ref ? TPU_PRINT_MAX_REFS : TPU_PRINT_MAX_SCALARS,
					  ref ? "refs" : "scalar values");
		p->kind[i] = (uint8_t)a->kind;
		if (ref) {
			p->slot[i] = (uint8_t)*nrefs;
			refs[(*nrefs)++] = a->text;
			continue;
		}
		p->slot[i] = (uint8_t)(*nscalars)++;
		w = snprintf(scalars + len, TPURT_TEXT_MAX - len, "%s%s",
			     len ? ", " : "", a->text);
		if (w < 0 || (size_t)w >= TPURT_TEXT_MAX - len)
			return tpurt_fail(-ENAMETOOLONG, "kernel: debug_print: values longer than %d characters",
					  TPURT_TEXT_MAX - 1);
		len += (size_t)w;
	}
	return 0;
}

int tpurt_kernel_debug_print(struct tpurt_kernel *k, const char *fmt,
			     int nargs, const struct tpurt_print_arg *args)
{
	char scalars[TPURT_TEXT_MAX];
	const char *refs[TPU_PRINT_MAX_REFS] = { NULL, NULL, NULL };
	struct tpurt_kernel_print *p;
	struct tpurt_kernel_op *op;
	int nscalars, nrefs, ret;

	if (k->nprints == TPURT_KERNEL_MAX_PRINTS)
		return tpurt_fail(-E2BIG, "kernel: more than %d debug_print formats",
				  TPURT_KERNEL_MAX_PRINTS);
	if (nargs < 0 || nargs > TPURT_PRINT_MAX_ARGS || (nargs && !args))
		return tpurt_fail(-EINVAL, "kernel: debug_print: %d arguments (0 to %d)",
				  nargs, TPURT_PRINT_MAX_ARGS);
	p = &k->print[k->nprints];
	memset(p, 0, sizeof(*p));
	ret = tpurt_print_check_format(fmt, nargs);
	if (!ret && strlen(fmt) >= sizeof(p->fmt))
		ret = tpurt_fail(-ENAMETOOLONG, "kernel: debug_print: format longer than %zu characters",
				 sizeof(p->fmt) - 1);
	if (!ret)
		ret = print_operands(p, nargs, args, scalars, refs, &nscalars, &nrefs);
	if (!ret)
		ret = add_op(k, TPU_OP_DEBUG_PRINT, NULL, refs[0], refs[1], &op);
	if (ret)
		return ret;
	if (refs[2]) {
		ret = copy_text(op->src2, TPURT_TEXT_MAX, refs[2], "source ref");
		if (ret) {
			k->nops--;
			return ret;
		}
	}
	if (nscalars) {
		ret = set_scalar(k, op, scalars, "debug_print values");
		if (ret)
			return ret;
	}
	strcpy(p->fmt, fmt);
	p->nargs = nargs;
	op->fn = (uint8_t)nscalars;
	op->print = k->nprints++;
	return 0;
}

/* --- the memory model: copies, semaphores, SMEM stores, scopes --- */

static int copy_op(struct tpurt_kernel *k, uint8_t opcode, const char *src,
		   const char *dst, const char *sem)
{
	if (!sem || !*sem)
		return tpurt_fail(-EINVAL, "kernel: async copy: semaphore missing");
	return add_op(k, opcode, dst, src, sem, NULL);
}

int tpurt_kernel_copy_start(struct tpurt_kernel *k, const char *src,
			    const char *dst, const char *sem)
{
	if (!src || !dst)
		return tpurt_fail(-EINVAL, "kernel: copy_start: %s ref missing",
				  src ? "destination" : "source");
	return copy_op(k, TPU_OP_COPY_START, src, dst, sem);
}

int tpurt_kernel_copy_wait(struct tpurt_kernel *k, const char *src,
			   const char *dst, const char *sem)
{
	if (!dst)
		return tpurt_fail(-EINVAL, "kernel: copy_wait: destination ref missing");
	if (src && !*src)
		src = NULL;
	return copy_op(k, TPU_OP_COPY_WAIT, src, dst, sem);
}

/* The hidden DMA semaphore of sync copies, a scope over the whole kernel. */
static int sync_semaphore(struct tpurt_kernel *k)
{
	struct tpurt_kernel_scope *s;

	for (int i = 0; i < k->nscopes; i++)
		if (!strcmp(k->scope[i].name, TPURT_SYNC_SEM))
			return 0;
	if (k->nscopes == TPURT_KERNEL_MAX_SCOPES)
		return tpurt_fail(-E2BIG, "kernel: more than %d scoped scratch buffers",
				  TPURT_KERNEL_MAX_SCOPES);
	s = &k->scope[k->nscopes++];
	memset(s, 0, sizeof(*s));
	strcpy(s->name, TPURT_SYNC_SEM);
	s->space = TPURT_SEMAPHORE_DMA;
	s->dtype = TPURT_INT32;
	s->rank = 1;
	s->shape[0] = 1;
	s->first = 0;
	s->end = INT_MAX;
	return 0;
}

int tpurt_kernel_sync_copy(struct tpurt_kernel *k, const char *src,
			   const char *dst)
{
	int nscopes = k->nscopes;
	int ret = !src || !dst ?
		  tpurt_fail(-EINVAL, "kernel: sync_copy: source or destination ref missing") :
		  sync_semaphore(k);

	if (!ret)
		ret = tpurt_kernel_copy_start(k, src, dst, TPURT_SYNC_SEM);
	if (ret) {
		k->nscopes = nscopes;
		return ret;
	}
	ret = tpurt_kernel_copy_wait(k, src, dst, TPURT_SYNC_SEM);
	if (ret) {
		k->nops--;	/* the start just added */
		k->nscopes = nscopes;
	}
	return ret;
}

static int semaphore_op(struct tpurt_kernel *k, uint8_t opcode,
			const char *sem, const char *amount)
{
	struct tpurt_kernel_op *op;
	int ret;

	if (!sem || !*sem)
		return tpurt_fail(-EINVAL, "kernel: %s: semaphore missing",
				  tpurt_kernel_opcode_name(opcode));
	ret = add_op(k, opcode, NULL, NULL, sem, &op);
	return ret ? ret : set_scalar(k, op, amount, "semaphore amount");
}

int tpurt_kernel_semaphore_signal(struct tpurt_kernel *k, const char *sem,
				  const char *amount)
{
	return semaphore_op(k, TPU_OP_SEM_SIGNAL, sem, amount);
}

int tpurt_kernel_semaphore_wait(struct tpurt_kernel *k, const char *sem,
				const char *amount)
{
	return semaphore_op(k, TPU_OP_SEM_WAIT, sem, amount);
}

int tpurt_kernel_scalar_store(struct tpurt_kernel *k, const char *dst,
			      const char *value)
{
	struct tpurt_kernel_op *op;
	int ret;

	if (!dst || !strchr(dst, '['))
		return tpurt_fail(-EINVAL, "kernel: scalar_store: destination '%s' is not an SMEM element, ref[index]",
				  dst ? dst : "(null)");
	ret = add_op(k, TPU_OP_SCALAR_STORE, dst, NULL, NULL, &op);
	return ret ? ret : set_scalar(k, op, value, "stored value");
}

int tpurt_kernel_run_scoped(struct tpurt_kernel *k, const char *name,
			    enum tpurt_memory_space space,
			    enum tpurt_dtype dtype, int rank,
			    const int64_t *shape)
{
	int sem = space == TPURT_SEMAPHORE_DMA || space == TPURT_SEMAPHORE_REGULAR;
	struct tpurt_kernel_scope *s;

	if (!name || !*name || strlen(name) >= TPURT_NAME_MAX || name[0] == '%' ||
	    name[0] == '#')
		return tpurt_fail(-EINVAL, "kernel: run_scoped: name '%s' must be 1..%d characters, not starting with '#' or '%%'",
				  name ? name : "(null)", TPURT_NAME_MAX - 1);
	if (space == TPURT_ANY || (unsigned int)space > TPURT_SEMAPHORE_REGULAR)
		return tpurt_fail(-EINVAL, "kernel: run_scoped '%s': memory space %d is not VMEM, SMEM or a semaphore type",
				  name, (int)space);
	if (!tpurt_dtype_size(dtype) || (sem && dtype != TPURT_INT32))
		return tpurt_fail(-EINVAL, "kernel: run_scoped '%s': dtype %d%s", name,
				  (int)dtype, sem ? ": semaphores are int32" : " unknown");
	if (rank < 1 || rank > (sem ? TPU_JOB_MAX_RANK : TPURT_MAX_RANK) || !shape)
		return tpurt_fail(-EINVAL, "kernel: run_scoped '%s': rank %d not in 1..%d",
				  name, rank, sem ? TPU_JOB_MAX_RANK : TPURT_MAX_RANK);
	if (sem && !tpurt_semaphore_count_ok(rank, shape))
		return tpurt_fail(-EINVAL, "kernel: run_scoped '%s': %lld semaphores, must be 1..%d",
				  name, (long long)tpurt_semaphore_count(rank, shape),
				  TPU_JOB_MAX_SEMAPHORES);
	for (int d = 0; d < rank; d++)
		if (shape[d] < 1 || (uint64_t)shape[d] > TPU_JOB_MAX_DIM)
			return tpurt_fail(-EINVAL, "kernel: run_scoped '%s': dimension %d is %lld",
					  name, d, (long long)shape[d]);
	if (k->nscopes == TPURT_KERNEL_MAX_SCOPES || k->nopen == TPURT_SCOPE_DEPTH)
		return tpurt_fail(-E2BIG, "kernel: run_scoped '%s': more than %d scopes, or nested deeper than %d",
				  name, TPURT_KERNEL_MAX_SCOPES, TPURT_SCOPE_DEPTH);
	for (int i = 0; i < k->nopen; i++)
		if (!strcmp(k->scope[k->open[i]].name, name))
			return tpurt_fail(-EINVAL, "kernel: run_scoped '%s': a scope of that name is open",
					  name);
	s = &k->scope[k->nscopes];
	memset(s, 0, sizeof(*s));
	strcpy(s->name, name);
	s->space = space;
	s->dtype = dtype;
	s->rank = rank;
	memcpy(s->shape, shape, (size_t)rank * sizeof(*shape));
	s->first = k->nops;
	s->end = -1;
	k->open[k->nopen++] = k->nscopes++;
	return 0;
}

int tpurt_kernel_end_scoped(struct tpurt_kernel *k)
{
	if (!k->nopen)
		return tpurt_fail(-EINVAL, "kernel: end_scoped() without run_scoped()");
	k->scope[k->open[--k->nopen]].end = k->nops;
	return 0;
}

int tpurt_kernel_scope_at(const struct tpurt_kernel *k, int n, const char *name,
			  size_t len)
{
	for (int i = k->nscopes - 1; i >= 0; i--) {
		const struct tpurt_kernel_scope *s = &k->scope[i];
		int end = s->end < 0 ? INT_MAX : s->end;

		if (n >= s->first && n < end && strlen(s->name) == len &&
		    !strncmp(s->name, name, len))
			return i;
	}
	return -1;
}

static int same_scope_type(const struct tpurt_kernel_scope *a,
			   const struct tpurt_kernel_scope *b)
{
	return a->space == b->space && a->dtype == b->dtype && a->rank == b->rank &&
	       !memcmp(a->shape, b->shape, sizeof(a->shape));
}

int tpurt_kernel_scope_slots(const struct tpurt_kernel *k, int *slot,
			     int *slot_scope)
{
	int slot_end[TPURT_KERNEL_MAX_SCOPES], nslots = 0;

	for (int i = 0; i < k->nscopes; i++) {
		const struct tpurt_kernel_scope *sc = &k->scope[i];
		int end = sc->end < 0 ? INT_MAX : sc->end, s;

		for (s = 0; s < nslots; s++)
			if (same_scope_type(&k->scope[slot_scope[s]], sc) &&
			    slot_end[s] <= sc->first)
				break;
		if (s == nslots)
			slot_scope[nslots++] = i;
		slot[i] = s;
		slot_end[s] = end;
	}
	return nslots;
}

const char *tpurt_kernel_opcode_name(unsigned int opcode)
{
	static const char *const names[TPU_OP_COUNT] = {
		[TPU_OP_ZERO] = "zero", [TPU_OP_DOT] = "dot",
		[TPU_OP_UNARY] = "unary", [TPU_OP_BINARY] = "binary",
		[TPU_OP_REDUCE] = "reduce", [TPU_OP_SELECT] = "select",
		[TPU_OP_IOTA] = "iota", [TPU_OP_COPY_START] = "copy_start",
		[TPU_OP_COPY_WAIT] = "copy_wait",
		[TPU_OP_SEM_SIGNAL] = "semaphore_signal",
		[TPU_OP_SEM_WAIT] = "semaphore_wait",
		[TPU_OP_SCALAR_STORE] = "scalar_store",
		[TPU_OP_TRANSPOSE] = "transpose", [TPU_OP_ROLL] = "roll",
		[TPU_OP_GATHER] = "gather", [TPU_OP_PRNG_SEED] = "prng_seed",
		[TPU_OP_PRNG_BITS] = "prng_random_bits", [TPU_OP_LOOP] = "loop",
		[TPU_OP_DEBUG_PRINT] = "debug_print", [TPU_OP_DELAY] = "delay",
	};

	return opcode < TPU_OP_COUNT ? names[opcode] : "?";
}

/* Ref text @text names @name: whole, or a window of it ("name.at[...]"). */
static int text_names(const char *text, const char *name)
{
	size_t n = strlen(name);

	return !strncmp(text, name, n) && (!text[n] || text[n] == '.' || text[n] == '[');
}

static int names_ref(const struct tpurt_kernel_op *op, const char *name)
{
	return text_names(op->dst, name) || text_names(op->src0, name) ||
	       text_names(op->src1, name) || text_names(op->src2, name);
}

/*
 * Whether op @i of @k gives temporary @name a new value without reading
 * it: it writes the whole temporary (no window), unpredicated, from
 * sources that do not name it (a sync_copy's start and wait, too). An
 * async copy, an accumulating dot or a window write keeps the value it
 * changes.
 */
static int starts_life(const struct tpurt_kernel *k, int i, const char *name)
{
	const struct tpurt_kernel_op *op = &k->op[i], *next = &k->op[i + 1];

	if (op->npred || strcmp(op->dst, name) || text_names(op->src0, name) ||
	    text_names(op->src1, name) || text_names(op->src2, name))
		return 0;
	switch (op->opcode) {
	case TPU_OP_COPY_START:	/* a sync_copy: its wait follows at once */
		return i + 1 < k->nops && next->opcode == TPU_OP_COPY_WAIT && !next->npred &&
		       !strcmp(op->src1, TPURT_SYNC_SEM) && !strcmp(next->src1, TPURT_SYNC_SEM) &&
		       !strcmp(op->src0, next->src0) && !strcmp(op->dst, next->dst);
	case TPU_OP_ZERO: case TPU_OP_UNARY: case TPU_OP_BINARY:
	case TPU_OP_REDUCE: case TPU_OP_SELECT: case TPU_OP_IOTA:
	case TPU_OP_TRANSPOSE: case TPU_OP_ROLL: case TPU_OP_GATHER:
	case TPU_OP_PRNG_BITS:
		return 1;
	case TPU_OP_DOT:
		return !(op->dot & TPU_DOT_ACCUMULATE);
	default:
		return 0;
	}
}

/*
 * Temporary @t's lives into @out (from @n on; returns the new count): a
 * life runs from an op that starts one (starts_life) to the last op naming
 * the temporary before the next such op. Loops join lives: a life begun
 * before a loop and used in its body lives to the body's end (the next
 * trip reads it again), taking in the lives begun there; a life begun in
 * a body and used after it joins the one before (the loop may run no
 * trip). A temporary whose first op reads it has one life (it reads what
 * a later op, or an earlier trip, left).
 */
static int temp_lives(const struct tpurt_kernel *k, const int *loops, int nloops, int t,
		      struct tpurt_temp_life *out, int n)
{
	const char *name = k->temp[t].name;
	int first = n, changed = 1;

	for (int i = 0; i < k->nops; i++) {
		if (!names_ref(&k->op[i], name))
			continue;
		if (n == first || (starts_life(k, i, name) &&
				   starts_life(k, out[first].first, name)))
			out[n++] = (struct tpurt_temp_life){ t, i, i, -1 };
		else
			out[n - 1].last = i;
	}
	while (changed) {
		changed = 0;
		for (int l = first; l < n; l++) {
			for (int j = 0; j < nloops; j++) {
				int i = loops[j], end = i + k->op[i].body;

				if (out[l].first < i && out[l].last > i && out[l].last < end) {
					out[l].last = end;	/* around the loop */
					changed = 1;
				}
				if (l > first && out[l].first > i && out[l].first <= end &&
				    out[l].last > end) {
					out[l - 1].last = out[l].last;	/* out of it */
					out[l].first = -1;
					changed = 1;
					break;
				}
			}
			/* lives the one before now covers are part of it */
			for (int m = l + 1; out[l].first >= 0 && m < n; m++)
				if (out[m].first >= 0 && out[m].first <= out[l].last) {
					if (out[m].last > out[l].last)
						out[l].last = out[m].last;
					out[m].first = -1;
					changed = 1;
				}
			if (changed) {
				int w = first;

				for (int m = first; m < n; m++)
					if (out[m].first >= 0)
						out[w++] = out[m];
				n = w;
				break;
			}
		}
	}
	return n;
}

static int same_type(const struct tpurt_kernel_temp *a,
		     const struct tpurt_kernel_temp *b)
{
	return a->dtype == b->dtype && a->rows == b->rows && a->cols == b->cols &&
	       a->rank == b->rank &&
	       !memcmp(a->shape, b->shape, sizeof(a->shape));
}

static int life_order(const void *a, const void *b)
{
	const struct tpurt_temp_life *x = a, *y = b;

	return x->first != y->first ? x->first - y->first : x->temp - y->temp;
}

int tpurt_kernel_temp_lives(const struct tpurt_kernel *k, struct tpurt_temp_life **livesp,
			    int *nlivesp, int *slot_temp)
{
	int slot_end[TPURT_KERNEL_MAX_TEMPS], nslots = 0, n = 0, nloops = 0;
	struct tpurt_temp_life *lives;
	int *loops;

	*livesp = NULL;
	*nlivesp = 0;
	/* an op names at most 4 temporaries, each in one of its lives */
	lives = calloc(4 * (size_t)k->nops + 1, sizeof(*lives));
	loops = calloc((size_t)k->nops + 1, sizeof(*loops));
	if (!lives || !loops) {
		free(lives);
		free(loops);
		return tpurt_fail(-ENOMEM, "out of memory");
	}
	for (int i = 0; i < k->nops; i++)
		if (k->op[i].opcode == TPU_OP_LOOP)
			loops[nloops++] = i;
	for (int t = 0; t < k->ntemps; t++)
		n = temp_lives(k, loops, nloops, t, lives, n);
	free(loops);
	qsort(lives, (size_t)n, sizeof(*lives), life_order);
	for (int l = 0; l < n; l++) {
		int s;

		for (s = 0; s < nslots; s++)
			if (same_type(&k->temp[slot_temp[s]], &k->temp[lives[l].temp]) &&
			    slot_end[s] < lives[l].first)
				break;
		if (s == nslots) {
			if (nslots == TPURT_KERNEL_MAX_TEMPS) {
				free(lives);
				return tpurt_fail(-E2BIG, "kernel: more than %d slots for temporaries",
						  TPURT_KERNEL_MAX_TEMPS);
			}
			slot_temp[nslots++] = lives[l].temp;
		}
		lives[l].slot = s;
		slot_end[s] = lives[l].last;
	}
	*livesp = lives;
	*nlivesp = n;
	return nslots;
}

int tpurt_kernel_temp_slot_at(const struct tpurt_temp_life *lives, int nlives, int t, int op)
{
	for (int l = 0; l < nlives; l++)
		if (lives[l].temp == t && lives[l].first <= op && op <= lives[l].last)
			return lives[l].slot;
	return -1;
}
