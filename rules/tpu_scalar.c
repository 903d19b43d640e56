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

#include "tpu_plan.h"

/* Values an instruction pops and pushes. */
static int stack_effect(uint8_t op, int *pops, int *pushes)
{
	*pushes = 1;
	switch (op) {
	case TPU_INSN_PUSH_PID:
	case TPU_INSN_PUSH_NPROG:
	case TPU_INSN_PUSH_CONST:
		*pops = 0;
		return 0;
	case TPU_INSN_LOAD_SMEM:
	case TPU_INSN_NOT:
		*pops = 1;
		return 0;
	default:
		*pops = 2;
		return op < TPU_INSN_COUNT ? 0 : -1;
	}
}

static int check_arg(const struct tpu_plan_insn *in, unsigned int grid_rank,
		     unsigned int num_smem, char *why, size_t whylen,
		     unsigned int pc)
{
	switch (in->op) {
	case TPU_INSN_PUSH_PID:
	case TPU_INSN_PUSH_NPROG:
		if (in->arg < 0 || (uint32_t)in->arg >= grid_rank) {
			snprintf(why, whylen, "insn %u: grid dimension %d, grid rank is %u",
				 pc, in->arg, grid_rank);
			return -1;
		}
		return 0;
	case TPU_INSN_LOAD_SMEM:
		if (in->arg < 0 || (uint32_t)in->arg >= num_smem) {
			snprintf(why, whylen, "insn %u: operand %d is not scalar prefetch",
				 pc, in->arg);
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

int tpu_scalar_verify_code(const struct tpu_plan_insn *insn, unsigned int len,
			   unsigned int grid_rank, unsigned int num_smem,
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
		if (check_arg(in, grid_rank, num_smem, why, whylen, pc))
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

int tpu_scalar_verify(const struct tpu_plan *plan, struct tpu_plan_prog prog,
		      unsigned int nresults, char *why, size_t whylen)
{
	return tpu_scalar_verify_code(&plan->insn[prog.offset], prog.len,
				      plan->grid_rank, plan->num_scalar_prefetch,
				      nresults, why, whylen);
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

/* Apply a two-operand instruction; b == 0 was checked for DIV and MOD. */
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

int tpu_scalar_run_code(const struct tpu_plan_insn *insn, unsigned int len,
			const struct tpu_scalar_env *env, int64_t *out,
			unsigned int nout, struct tpu_scalar_fault *fault)
{
	int64_t stack[TPU_JOB_MAX_STACK];
	int sp = 0;

	for (unsigned int pc = 0; pc < len; pc++) {
		const struct tpu_plan_insn *in = &insn[pc];
		const int32_t *array;
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
		case TPU_INSN_LOAD_SMEM:
			a = stack[sp - 1];
			if (a < 0 || (uint64_t)a >= env->smem_len[in->arg]) {
				*fault = (struct tpu_scalar_fault){
					TPU_JOB_ERR_SMEM_RANGE, in->arg, a };
				return -1;
			}
			array = env->smem ? env->smem[in->arg] : NULL;
			stack[sp - 1] = array ? array[a] : 0;
			break;
		case TPU_INSN_NOT:
			stack[sp - 1] = !stack[sp - 1];
			break;
		default:
			b = stack[--sp];
			a = stack[sp - 1];
			if ((in->op == TPU_INSN_DIV || in->op == TPU_INSN_MOD) && !b) {
				*fault = (struct tpu_scalar_fault){
					TPU_JOB_ERR_DIV_ZERO, -1, 0 };
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
	const int64_t *pid = ctx->pid;
	const int32_t *smem = ctx->smem;
	const int32_t *arrays[TPU_JOB_MAX_OPERANDS];
	uint64_t lens[TPU_JOB_MAX_OPERANDS];
	struct tpu_scalar_env env = {
		.grid = plan->grid, .pid = pid, .smem = arrays, .smem_len = lens,
	};

	/* Scalar prefetch comes first: operand i's array is SMEM array i. */
	for (unsigned int i = 0; i < plan->num_scalar_prefetch; i++) {
		arrays[i] = smem ? smem + plan->operand[i].smem_base : NULL;
		lens[i] = plan->operand[i].elems;
	}
	return tpu_scalar_run_code(&plan->insn[prog.offset], prog.len, &env, out,
				   nout, fault);
}
