// SPDX-License-Identifier: MIT
/*
 * The scalar core (rules/tpu_scalar.c): verify, then run, arbitrary
 * programs against arbitrary grids, grid indices and SMEM arrays, each
 * array in an allocation of its own size so ASan sees any stray load. A
 * program that verifies runs to the same values and faults as a reference
 * interpreter written here from uapi/tpu_job.h (Python's // and %, 64-bit
 * wrapping), and to the same values through the plan entry points.
 *
 * Input: rank, nsmem, nresults (a byte each), rank grid extents (u32),
 * rank grid indices (u64), per SMEM array a length byte (0..15) and its
 * int32 elements, a length byte, then per instruction a byte: the opcode in
 * bits 0-4, and either bit 7 clear and a small argument in bits 5-6, or
 * bit 7 set and an int32 argument following.
 */
#include "fuzz_input.h"
#include "tpu_plan.h"

#define MAX_SMEM	4
#define MAX_LEN		(TPU_JOB_MAX_PROG_LEN + 8)

struct program {
	unsigned int rank, nsmem, nresults, len;
	uint64_t *grid;
	int64_t *pid;
	int32_t *smem[MAX_SMEM];
	uint64_t smem_len[MAX_SMEM];
	struct tpu_plan_insn insn[MAX_LEN];
};

static void read_program(struct fuzz_input *in, struct program *p)
{
	p->rank = 1 + fuzz_u8(in) % TPU_JOB_MAX_GRID_RANK;
	p->nsmem = fuzz_u8(in) % (MAX_SMEM + 1);
	p->nresults = fuzz_u8(in) % (TPU_JOB_MAX_RANK + 1);
	/* exact sizes: an index past them is a heap overflow ASan reports */
	p->grid = malloc(p->rank * sizeof(*p->grid));
	p->pid = malloc(p->rank * sizeof(*p->pid));
	for (unsigned int d = 0; d < p->rank; d++)
		p->grid[d] = fuzz_u32(in);
	for (unsigned int d = 0; d < p->rank; d++)
		p->pid[d] = (int64_t)fuzz_u64(in);
	for (unsigned int i = 0; i < p->nsmem; i++) {
		p->smem_len[i] = fuzz_u8(in) % 16;
		p->smem[i] = malloc(p->smem_len[i] * sizeof(int32_t) + 1);
		for (uint64_t j = 0; j < p->smem_len[i]; j++)
			p->smem[i][j] = (int32_t)fuzz_u32(in);
	}
	p->len = fuzz_u8(in) % (MAX_LEN + 1);
	for (unsigned int pc = 0; pc < p->len; pc++) {
		uint8_t b = fuzz_u8(in);

		p->insn[pc].op = b & 0x1f;
		p->insn[pc].arg = b & 0x80 ? (int32_t)fuzz_u32(in) : (b >> 5) & 3;
	}
}

static void free_program(struct program *p)
{
	free(p->grid);
	free(p->pid);
	for (unsigned int i = 0; i < p->nsmem; i++)
		free(p->smem[i]);
}

/* The reference: the semantics uapi/tpu_job.h gives, in 128-bit arithmetic. */
static int64_t wrap128(__int128 v)
{
	return (int64_t)(uint64_t)(unsigned __int128)v;
}

static __int128 floor_div128(__int128 a, __int128 b)
{
	__int128 q = a / b;

	return (a % b && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64_t ref_binop(uint8_t op, int64_t a, int64_t b)
{
	switch (op) {
	case TPU_INSN_ADD:	return wrap128((__int128)a + b);
	case TPU_INSN_SUB:	return wrap128((__int128)a - b);
	case TPU_INSN_MUL:	return wrap128((__int128)a * b);
	case TPU_INSN_DIV:	return wrap128(floor_div128(a, b));
	case TPU_INSN_MOD:	return wrap128(a - (__int128)b * floor_div128(a, b));
	case TPU_INSN_MIN:	return a < b ? a : b;
	case TPU_INSN_MAX:	return a > b ? a : b;
	case TPU_INSN_EQ:	return a == b;
	case TPU_INSN_NE:	return a != b;
	case TPU_INSN_LT:	return a < b;
	case TPU_INSN_LE:	return a <= b;
	case TPU_INSN_GT:	return a > b;
	case TPU_INSN_GE:	return a >= b;
	case TPU_INSN_AND:	return a && b;
	default:		return a || b;
	}
}

/* Returns the fault code (0: none); @out gets the stack's bottom values. */
static unsigned int ref_run(const struct program *p, int64_t *out,
			    struct tpu_scalar_fault *fault)
{
	int64_t stack[MAX_LEN];
	unsigned int sp = 0;

	for (unsigned int pc = 0; pc < p->len; pc++) {
		const struct tpu_plan_insn *in = &p->insn[pc];
		int64_t a, b;

		switch (in->op) {
		case TPU_INSN_PUSH_PID:
			stack[sp++] = p->pid[in->arg];
			break;
		case TPU_INSN_PUSH_NPROG:
			stack[sp++] = (int64_t)p->grid[in->arg];
			break;
		case TPU_INSN_PUSH_CONST:
			stack[sp++] = in->arg;
			break;
		case TPU_INSN_LOAD_SMEM:
			a = stack[sp - 1];
			if (a < 0 || (uint64_t)a >= p->smem_len[in->arg]) {
				*fault = (struct tpu_scalar_fault){
					.code = TPU_JOB_ERR_SMEM_RANGE,
					.operand = in->arg, .index = a };
				return fault->code;
			}
			stack[sp - 1] = p->smem[in->arg][a];
			break;
		case TPU_INSN_NOT:
			stack[sp - 1] = !stack[sp - 1];
			break;
		default:
			b = stack[--sp];
			a = stack[sp - 1];
			if ((in->op == TPU_INSN_DIV || in->op == TPU_INSN_MOD) && !b) {
				fault->code = TPU_JOB_ERR_DIV_ZERO;
				return fault->code;
			}
			stack[sp - 1] = ref_binop(in->op, a, b);
		}
	}
	memcpy(out, stack, p->nresults * sizeof(*out));
	return 0;
}

static void check_same(const struct program *p, int ret, const int64_t *out,
		       const struct tpu_scalar_fault *fault, unsigned int ref,
		       const int64_t *want, const struct tpu_scalar_fault *wf,
		       const char *path)
{
	FUZZ_ASSERT(ret == (ref ? -1 : 0), "%s: returned %d, reference fault %u",
		    path, ret, ref);
	if (ref) {
		FUZZ_ASSERT(fault->code == wf->code, "%s: fault %u, reference %u",
			    path, fault->code, wf->code);
		FUZZ_ASSERT(ref != TPU_JOB_ERR_SMEM_RANGE ||
			    (fault->operand == wf->operand && fault->index == wf->index),
			    "%s: SMEM fault on operand %d index %lld", path,
			    fault->operand, (long long)fault->index);
		return;
	}
	for (unsigned int i = 0; i < p->nresults; i++)
		FUZZ_ASSERT(out[i] == want[i], "%s: result %u is %lld, reference %lld",
			    path, i, (long long)out[i], (long long)want[i]);
}

/* The same program through the plan: code at an offset, SMEM in one array. */
static void run_as_plan(const struct program *p, unsigned int ref,
			const int64_t *want, const struct tpu_scalar_fault *wf)
{
	static struct tpu_plan plan;
	struct tpu_plan_prog prog = { .offset = 7, .len = p->len };
	struct tpu_scalar_fault fault = { 0 };
	struct tpu_scalar_ctx ctx;
	int32_t *smem = malloc((MAX_SMEM * 16 + 1) * sizeof(int32_t));
	int64_t out[TPU_JOB_MAX_RANK];
	uint64_t words = 0;
	char why[128];
	int ret;

	plan.grid_rank = p->rank;
	plan.num_insns = prog.offset + p->len;
	plan.num_scalar_prefetch = p->nsmem;
	for (unsigned int d = 0; d < p->rank; d++)
		plan.grid[d] = p->grid[d];
	memcpy(&plan.insn[prog.offset], p->insn, p->len * sizeof(p->insn[0]));
	for (unsigned int i = 0; i < p->nsmem; i++) {
		plan.operand[i].smem_base = words;
		plan.operand[i].elems = p->smem_len[i];
		memcpy(smem + words, p->smem[i], p->smem_len[i] * sizeof(int32_t));
		words += p->smem_len[i];
	}
	FUZZ_ASSERT(!tpu_scalar_verify(&plan, prog, p->nresults, why, sizeof(why)),
		    "plan verify refuses a verified program: %s", why);
	ctx = (struct tpu_scalar_ctx){ p->pid, smem, NULL, NULL };
	ret = tpu_scalar_run(&plan, prog, &ctx, out, p->nresults, &fault);
	check_same(p, ret, out, &fault, ref, want, wf, "plan");
	free(smem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_input in = { data, size, 0 };
	struct tpu_scalar_fault fault = { 0 }, wf = { 0 };
	int64_t out[TPU_JOB_MAX_RANK], want[TPU_JOB_MAX_RANK];
	struct program p = { 0 };
	struct tpu_scalar_env env;
	unsigned int ref;
	char why[128];
	int ret;

	read_program(&in, &p);
	env = (struct tpu_scalar_env){ .grid = p.grid, .pid = p.pid,
				       .smem = (const int32_t *const *)p.smem,
				       .smem_len = p.smem_len };
	ret = tpu_scalar_verify_code(p.insn, p.len, p.rank, p.nsmem, p.nresults,
				     why, sizeof(why));
	FUZZ_ASSERT(!ret || memchr(why, 0, sizeof(why)), "why not terminated");
	if (!ret) {
		ref = ref_run(&p, want, &wf);
		ret = tpu_scalar_run_code(p.insn, p.len, &env, out, p.nresults,
					  &fault);
		check_same(&p, ret, out, &fault, ref, want, &wf, "code");
		run_as_plan(&p, ref, want, &wf);
	}
	free_program(&p);
	return 0;
}
