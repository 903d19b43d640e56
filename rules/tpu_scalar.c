// SPDX-License-Identifier: MIT
/*
 * The scalar core: a stack machine for index maps, predicates and scalar
 * indices. Programs are verified once, before the job starts (opcodes,
 * arguments, stack depth, result count), so the interpreter that runs at
 * every grid step only checks what depends on data: division by zero and
 * SMEM indices. This is the only interpreter: the engine runs plans through
 * tpu_scalar_run, libtpurt its compiled index maps through
 * tpu_scalar_run_code, so the runtime's predictions and the device agree
 * by construction.
 */
#include <stdio.h>
#include <string.h>

#include "tpu_dtype.h"
#include "tpu_plan.h"

/* Values an instruction pops and pushes. */
static int stack_effect(uint8_t op, int *pops, int *pushes)
{
	*pushes = 1;
	switch (op) {
	case TPU_INSN_PUSH_PID:
	case TPU_INSN_PUSH_NPROG:
	case TPU_INSN_PUSH_CONST:
	case TPU_INSN_PUSH_LOOP_INDEX:
		*pops = 0;
		return 0;
	case TPU_INSN_LOAD_SMEM:
	case TPU_INSN_LOAD_SCRATCH:
	case TPU_INSN_NOT:
		*pops = 1;
		return 0;
	default:
		*pops = 2;
		return op < TPU_INSN_COUNT ? 0 : -1;
	}
}

static int check_arg(const struct tpu_plan_insn *in,
		     const struct tpu_scalar_scope *scope, char *why,
		     size_t whylen, unsigned int pc)
{
	switch (in->op) {
	case TPU_INSN_PUSH_PID:
	case TPU_INSN_PUSH_NPROG:
		if (in->arg < 0 || (uint32_t)in->arg >= scope->grid_rank) {
			snprintf(why, whylen, "insn %u: grid dimension %d, grid rank is %u",
				 pc, in->arg, scope->grid_rank);
			return -1;
		}
		return 0;
	case TPU_INSN_LOAD_SMEM:
		if (in->arg < 0 || in->arg >= 64 ||
		    !(scope->smem_operands >> in->arg & 1)) {
			snprintf(why, whylen, "insn %u: operand %d is not scalar prefetch%s",
				 pc, in->arg, scope->scratch ?
				 " or an SMEM-space operand" : "");
			return -1;
		}
		return 0;
	case TPU_INSN_LOAD_SCRATCH:
		if (in->arg < 0 || in->arg >= 64 ||
		    !(scope->scratch >> in->arg & 1)) {
			snprintf(why, whylen, "insn %u: scratch %d is not an SMEM or semaphore scratch%s",
				 pc, in->arg, scope->scratch ? "" :
				 " (index maps read only scalar prefetch)");
			return -1;
		}
		return 0;
	case TPU_INSN_PUSH_LOOP_INDEX:
		if (in->arg < 0 || (uint32_t)in->arg >= scope->loop_depth) {
			snprintf(why, whylen, "insn %u: loop index %d, but the program is inside %u loop%s",
				 pc, in->arg, scope->loop_depth,
				 scope->loop_depth == 1 ? "" : "s");
			return -1;
		}
		return 0;
	case TPU_INSN_PUSH_CONST:
		return 0;
	default:
		if (in->arg) {
			snprintf(why, whylen, "insn %u: op %u takes no argument", pc,
				 in->op);
			return -1;
		}
		return 0;
	}
}

int tpu_scalar_verify_scope(const struct tpu_plan_insn *insn, unsigned int len,
			    const struct tpu_scalar_scope *scope,
			    unsigned int nresults, char *why, size_t whylen)
{
	int depth = 0;

	if (!len) {
		snprintf(why, whylen, "empty program, %u results needed", nresults);
		return -1;
	}
	for (unsigned int pc = 0; pc < len; pc++) {
		const struct tpu_plan_insn *in = &insn[pc];
		int pops, pushes;

		if (stack_effect(in->op, &pops, &pushes)) {
			snprintf(why, whylen, "insn %u: unknown op %u", pc, in->op);
			return -1;
		}
		if (check_arg(in, scope, why, whylen, pc))
			return -1;
		if (depth < pops) {
			snprintf(why, whylen, "insn %u: stack underflow", pc);
			return -1;
		}
		depth += pushes - pops;
		if (depth > TPU_JOB_MAX_STACK) {
			snprintf(why, whylen, "insn %u: stack deeper than %d", pc,
				 TPU_JOB_MAX_STACK);
			return -1;
		}
	}
	if (depth != (int)nresults) {
		snprintf(why, whylen, "leaves %d values, %u needed", depth, nresults);
		return -1;
	}
	return 0;
}

static uint64_t low_bits(unsigned int n)
{
	return n >= 64 ? UINT64_MAX : (1ull << n) - 1;
}

int tpu_scalar_verify_code(const struct tpu_plan_insn *insn, unsigned int len,
			   unsigned int grid_rank, unsigned int num_smem,
			   unsigned int nresults, char *why, size_t whylen)
{
	const struct tpu_scalar_scope scope = { grid_rank, low_bits(num_smem), 0, 0 };

	return tpu_scalar_verify_scope(insn, len, &scope, nresults, why, whylen);
}

int tpu_scalar_verify(const struct tpu_plan *plan, struct tpu_plan_prog prog,
		      unsigned int nresults, char *why, size_t whylen)
{
	return tpu_scalar_verify_code(&plan->insn[prog.offset], prog.len,
				      plan->grid_rank, plan->num_scalar_prefetch,
				      nresults, why, whylen);
}

/* SMEM-space operands' blocks and SMEM/semaphore scratch, besides prefetch. */
int tpu_scalar_verify_body(const struct tpu_plan *plan, struct tpu_plan_prog prog,
			   unsigned int loop_depth, unsigned int nresults,
			   char *why, size_t whylen)
{
	struct tpu_scalar_scope scope = { plan->grid_rank,
					  low_bits(plan->num_scalar_prefetch), 0,
					  loop_depth };

	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++)
		if (plan->operand[i].space == TPU_MEM_SMEM)
			scope.smem_operands |= 1ull << i;
	for (unsigned int i = 0; i < plan->num_scratch; i++)
		if (plan->scratch[i].space != TPU_MEM_VMEM)
			scope.scratch |= 1ull << i;
	return tpu_scalar_verify_scope(&plan->insn[prog.offset], prog.len, &scope,
				       nresults, why, whylen);
}

unsigned int tpu_scalar_loop_need(const struct tpu_plan_insn *insn,
				  unsigned int len)
{
	unsigned int need = 0;

	for (unsigned int pc = 0; pc < len; pc++)
		if (insn[pc].op == TPU_INSN_PUSH_LOOP_INDEX && insn[pc].arg >= 0 &&
		    (unsigned int)insn[pc].arg + 1 > need)
			need = (unsigned int)insn[pc].arg + 1;
	return need;
}

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q;

	if (a == INT64_MIN && b == -1)
		return INT64_MIN;	/* wraps, like the other arithmetic */
	q = a / b;
	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

static int64_t floor_mod(int64_t a, int64_t b)
{
	int64_t r;

	if (b == -1)
		return 0;
	r = a % b;
	if (r != 0 && ((r < 0) != (b < 0)))
		r += b;
	return r;
}

static int64_t wrap(uint64_t v)
{
	return (int64_t)v;
}

/*
 * Apply a two-operand instruction; b == 0 was checked for DIV and MOD.
 * Values are 64-bit, arithmetic modulo 2^64: an SMEM store keeps the low
 * bits of the ref's width, so an int32 product stored back is XLA's s32
 * one; unstored (an index, a condition) it is the 64-bit value, which
 * differs only where int32 arithmetic overflows (doc/numerics.md).
 */
static int64_t binop(uint8_t op, int64_t a, int64_t b)
{
	switch (op) {
	case TPU_INSN_ADD:	return wrap((uint64_t)a + (uint64_t)b);
	case TPU_INSN_SUB:	return wrap((uint64_t)a - (uint64_t)b);
	case TPU_INSN_MUL:	return wrap((uint64_t)a * (uint64_t)b);
	case TPU_INSN_DIV:	return floor_div(a, b);
	case TPU_INSN_MOD:	return floor_mod(a, b);
	case TPU_INSN_MIN:	return a < b ? a : b;
	case TPU_INSN_MAX:	return a > b ? a : b;
	case TPU_INSN_EQ:	return a == b;
	case TPU_INSN_NE:	return a != b;
	case TPU_INSN_LT:	return a < b;
	case TPU_INSN_LE:	return a <= b;
	case TPU_INSN_GT:	return a > b;
	case TPU_INSN_GE:	return a >= b;
	case TPU_INSN_AND:	return a && b;
	default:		return a || b;	/* TPU_INSN_OR */
	}
}

/* A float as the scalar core's integer: truncated toward zero. */
static int64_t float_value(float f)
{
	if (!(f == f))
		return 0;
	if (f >= 9.2e18f)
		return INT64_MAX;
	if (f <= -9.2e18f)
		return INT64_MIN;
	return (int64_t)f;
}

static float bf16_float(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

/* Round binary32 bits to bfloat16: nearest, ties to even; NaN stays NaN. */
static uint16_t bf16_round(uint32_t b)
{
	if ((b & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((b >> 16) | 0x40);
	return (uint16_t)((b + 0x7fffu + (b >> 16 & 1)) >> 16);
}

/* An int64 rounded once to bfloat16 (nearest, ties to even). */
static uint16_t bf16_of_int(int64_t v)
{
	uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	uint64_t sticky = 0;
	int shift = 0;
	uint32_t bits;
	float f;

	/*
	 * Down to 24 bits, what is shifted out kept as a sticky low bit: the
	 * rounding to bfloat16's 8 bits sees the same ties, and the float is
	 * exact.
	 */
	while (m >> 24) {
		sticky |= m & 1;
		m >>= 1;
		shift++;
	}
	f = (float)(m | sticky);
	while (shift--)
		f *= 2.0f;
	if (v < 0)
		f = -f;
	memcpy(&bits, &f, sizeof(bits));
	return bf16_round(bits);
}

int64_t tpu_smem_load(const int32_t *words, unsigned int dtype, uint64_t i)
{
	const uint8_t *bytes = (const uint8_t *)words;
	uint16_t h;
	uint32_t u;
	float f;

	switch (dtype) {
	case TPU_DTYPE_F32:
		memcpy(&f, &words[i], sizeof(f));
		return float_value(f);
	case TPU_DTYPE_BF16:
		memcpy(&h, bytes + 2 * i, sizeof(h));
		return float_value(bf16_float(h));
	case TPU_DTYPE_INT8:
		return (int8_t)bytes[i];
	case TPU_DTYPE_UINT8:
		return bytes[i];
	case TPU_DTYPE_BOOL:
		return bytes[i] != 0;
	case TPU_DTYPE_UINT32:
		memcpy(&u, &words[i], sizeof(u));
		return u;
	default:	/* TPU_DTYPE_INT32 */
		return words[i];
	}
}

double tpu_smem_value(const int32_t *words, unsigned int dtype, uint64_t i,
		      bool *is_int)
{
	uint16_t h;
	float f;

	*is_int = dtype != TPU_DTYPE_F32 && dtype != TPU_DTYPE_BF16;
	if (*is_int)
		return (double)tpu_smem_load(words, dtype, i);
	if (dtype == TPU_DTYPE_BF16) {
		memcpy(&h, (const uint8_t *)words + 2 * i, sizeof(h));
		return bf16_float(h);
	}
	memcpy(&f, &words[i], sizeof(f));
	return f;
}

void tpu_smem_put(int32_t *words, unsigned int dtype, uint64_t i, int64_t v)
{
	uint8_t *bytes = (uint8_t *)words;
	uint32_t u = (uint32_t)(uint64_t)v;	/* low bits: wraps */
	uint16_t h;
	float f;

	switch (dtype) {
	case TPU_DTYPE_F32:
		f = (float)v;
		memcpy(&words[i], &f, sizeof(f));
		return;
	case TPU_DTYPE_BF16:
		h = bf16_of_int(v);
		memcpy(bytes + 2 * i, &h, sizeof(h));
		return;
	case TPU_DTYPE_INT8:
	case TPU_DTYPE_UINT8:
		bytes[i] = (uint8_t)u;
		return;
	case TPU_DTYPE_BOOL:
		bytes[i] = v != 0;
		return;
	default:	/* int32, uint32: the low 32 bits */
		memcpy(&words[i], &u, sizeof(u));
		return;
	}
}

uint64_t tpu_smem_reach(const struct tpu_plan *plan, uint64_t smem_base,
			unsigned int dtype, uint64_t elems)
{
	uint64_t reach = smem_base >= plan->smem_words ? 0 :
			 (plan->smem_words - smem_base) * 4 / tpu_dtype_size(dtype);

	return reach > elems ? reach : elems;
}

/* An SMEM element as a scalar, or 0 when its array is absent. */
static int64_t elem_value(const int32_t *words, int64_t i, unsigned int dtype)
{
	return words ? tpu_smem_load(words, dtype, (uint64_t)i) : 0;
}

int tpu_scalar_run_code(const struct tpu_plan_insn *insn, unsigned int len,
			const struct tpu_scalar_env *env, int64_t *out,
			unsigned int nout, struct tpu_scalar_fault *fault)
{
	static const struct tpu_scalar_scratch none;
	const struct tpu_scalar_scratch *sc;
	int64_t stack[TPU_JOB_MAX_STACK];
	int sp = 0;

	for (unsigned int pc = 0; pc < len; pc++) {
		const struct tpu_plan_insn *in = &insn[pc];
		const int32_t *array;
		uint64_t reach;
		int64_t a, b;

		switch (in->op) {
		case TPU_INSN_PUSH_PID:
			stack[sp++] = env->pid[in->arg];
			break;
		case TPU_INSN_PUSH_NPROG:
			stack[sp++] = (int64_t)env->grid[in->arg];
			break;
		case TPU_INSN_PUSH_CONST:
			stack[sp++] = in->arg;
			break;
		case TPU_INSN_PUSH_LOOP_INDEX:
			stack[sp++] = env->loop ? env->loop[in->arg] : 0;
			break;
		case TPU_INSN_LOAD_SMEM:
			a = stack[sp - 1];
			reach = env->smem_reach ? env->smem_reach[in->arg] :
				env->smem_len[in->arg];
			if (a < 0 || (uint64_t)a >= reach) {
				*fault = (struct tpu_scalar_fault){
					.code = TPU_JOB_ERR_SMEM_RANGE,
					.operand = in->arg, .index = a,
					.len = env->smem_len[in->arg],
					.reach = reach };
				return -1;
			}
			array = env->smem ? env->smem[in->arg] : NULL;
			stack[sp - 1] = elem_value(array, a, env->smem_dtype ?
						   env->smem_dtype[in->arg] :
						   TPU_DTYPE_INT32);
			break;
		case TPU_INSN_LOAD_SCRATCH:
			a = stack[sp - 1];
			sc = env->scratch ? &env->scratch[in->arg] : &none;
			reach = sc->reach ? sc->reach : sc->len;
			if (a < 0 || (uint64_t)a >= reach) {
				*fault = (struct tpu_scalar_fault){
					.code = TPU_JOB_ERR_SMEM_RANGE,
					.operand = in->arg, .index = a,
					.len = sc->len, .reach = reach,
					.scratch = true };
				return -1;
			}
			stack[sp - 1] = sc->sems ? sc->sems[a] :
					elem_value(sc->words, a, sc->dtype);
			break;
		case TPU_INSN_NOT:
			stack[sp - 1] = !stack[sp - 1];
			break;
		default:
			b = stack[--sp];
			a = stack[sp - 1];
			if ((in->op == TPU_INSN_DIV || in->op == TPU_INSN_MOD) && !b) {
				*fault = (struct tpu_scalar_fault){
					.code = TPU_JOB_ERR_DIV_ZERO, .operand = -1 };
				return -1;
			}
			stack[sp - 1] = binop(in->op, a, b);
			break;
		}
	}
	for (unsigned int i = 0; i < nout; i++)
		out[i] = stack[i];
	return 0;
}

int tpu_scalar_run(const struct tpu_plan *plan, struct tpu_plan_prog prog,
		   const struct tpu_scalar_ctx *ctx, int64_t *out,
		   unsigned int nout, struct tpu_scalar_fault *fault)
{
	const int32_t *smem = ctx->smem;
	const int32_t *arrays[TPU_JOB_MAX_OPERANDS];
	uint64_t lens[TPU_JOB_MAX_OPERANDS];
	uint64_t reach[TPU_JOB_MAX_OPERANDS];
	uint8_t dtype[TPU_JOB_MAX_OPERANDS];
	struct tpu_scalar_scratch scratch[TPU_JOB_MAX_SCRATCH];
	struct tpu_scalar_env env = {
		.grid = plan->grid, .pid = ctx->pid, .smem = arrays,
		.smem_len = lens, .smem_reach = reach, .smem_dtype = dtype,
		.scratch = scratch,
		.loop = ctx->loop,
	};

	/*
	 * Operand i's array is its scalar prefetch or its SMEM-space block at
	 * smem_base; the verifier let only those be named.
	 */
	for (unsigned int i = 0; i < plan->num_scalar_prefetch; i++) {
		arrays[i] = smem ? smem + plan->operand[i].smem_base : NULL;
		lens[i] = plan->operand[i].elems;
		dtype[i] = TPU_DTYPE_INT32;	/* prefetch: read as int32 words */
		reach[i] = tpu_smem_reach(plan, plan->operand[i].smem_base,
					  dtype[i], lens[i]);
	}
	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];
		bool in_smem = o->space == TPU_MEM_SMEM;

		arrays[i] = smem && in_smem ? smem + o->smem_base : NULL;
		lens[i] = in_smem ? o->block_bytes / tpu_dtype_size(o->dtype) : 0;
		dtype[i] = o->dtype;
		reach[i] = in_smem ? tpu_smem_reach(plan, o->smem_base, o->dtype,
						    lens[i]) : 0;
	}
	for (unsigned int i = 0; i < plan->num_scratch; i++) {
		const struct tpu_plan_scratch *s = &plan->scratch[i];

		scratch[i] = (struct tpu_scalar_scratch){ 0 };
		if (s->space == TPU_MEM_SMEM)
			scratch[i] = (struct tpu_scalar_scratch){
				.words = smem ? smem + s->smem_base : NULL,
				.len = s->bytes / tpu_dtype_size(s->dtype),
				.reach = tpu_smem_reach(plan, s->smem_base,
							s->dtype, s->bytes /
							tpu_dtype_size(s->dtype)),
				.dtype = s->dtype };
		else if (s->space != TPU_MEM_VMEM)
			scratch[i] = (struct tpu_scalar_scratch){
				.sems = ctx->sems ? ctx->sems + s->sem_base : NULL,
				.len = s->shape[0] };
		/* a NULL semaphore array reads its words, also NULL: 0 */
	}
	return tpu_scalar_run_code(&plan->insn[prog.offset], prog.len, &env, out,
				   nout, fault);
}
