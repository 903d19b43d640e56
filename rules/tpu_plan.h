/* SPDX-License-Identifier: MIT */
/*
 * The device's rules for a grid job: the descriptor decoded into host byte
 * order and checked (the "plan"), and the scalar core that runs its
 * programs. The engine runs plans; libtpurt decodes the jobs it builds with
 * the same code before it submits them.
 */
#ifndef TPU_PLAN_H
#define TPU_PLAN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tpu_config.h"
#include "tpu_job.h"
#include "tpu_job_result.h"

/* One buffer-table slot: a byte range of HBM, filled by the driver. */
struct tpu_buffer_slot {
	uint64_t offset;
	uint64_t size;
};

struct tpu_plan_prog {
	uint32_t offset;
	uint32_t len;
};

struct tpu_plan_operand {
	uint32_t slot;
	uint8_t role, dtype, rank;
	uint8_t space;			/* enum tpu_memory_space */
	uint8_t buffers;		/* VMEM blocks: 1..TPU_JOB_MAX_BUFFERS (0 given: 2) */
	uint8_t alias;			/* output: 1 + aliased input, or 0 */
	uint8_t revisit;		/* enum tpu_revisit_mode */
	uint64_t offset;		/* of element 0 in the slot */
	uint64_t shape[TPU_JOB_MAX_RANK];
	uint32_t block[TPU_JOB_MAX_RANK];
	uint8_t element_dims;		/* bit d: pl.Element, indexed by element */
	uint16_t element_pad[TPU_JOB_MAX_RANK];	/* their low padding */
	struct tpu_plan_prog index_map;
	/* derived */
	uint64_t stride[TPU_JOB_MAX_RANK];	/* elements */
	uint64_t nblocks[TPU_JOB_MAX_RANK];	/* indices a block may take:
						 * cdiv(shape, block), or
						 * pad + shape by element */
	uint64_t elems;				/* of the array */
	uint64_t block_bytes;
	int64_t rows, cols;			/* the block as a 2-D ref */
	uint64_t smem_base;			/* scalar prefetch, SMEM-space block:
						 * in the core's SMEM words */
};

struct tpu_plan_scratch {
	uint8_t space, dtype, rank;
	uint32_t shape[TPU_JOB_MAX_RANK];
	int64_t rows, cols;
	uint64_t bytes;
	uint64_t smem_base;			/* SMEM scratch: in SMEM words */
	uint32_t sem_base;			/* semaphores: first in the core's
						 * semaphore array */
};

struct tpu_plan_ref {
	uint8_t kind, index;
};

/* A struct tpu_job_window, with what the checks derived. */
struct tpu_plan_window {
	struct tpu_plan_ref base;
	uint8_t rank, squeeze;
	uint8_t space, dtype;			/* the base's */
	uint32_t size[TPU_JOB_MAX_RANK];
	uint32_t stride[TPU_JOB_MAX_RANK];	/* 1 or more: pl.ds(.., .., stride) */
	uint64_t extent[TPU_JOB_MAX_RANK];	/* the base's: block, array or scratch */
	struct tpu_plan_prog start;
	uint64_t elems, bytes;
	bool body_ok;				/* a contiguous VMEM window */
	uint8_t loop_need;			/* 1 + the deepest loop index its
						 * start reads: its users are
						 * inside that many loops */
	int64_t rows, cols;			/* as a 2-D ref, when body_ok */
};

struct tpu_plan_op {
	uint8_t opcode, fn, bcast, dot, axis, bcast2;
	struct tpu_plan_ref dst, src0, src1, src2;
	struct tpu_plan_prog pred, scalar_index;
	uint32_t imm, imm2;
	int64_t m, n, k;			/* TPU_OP_DOT */
	uint8_t depth;				/* loops enclosing the op */
	uint32_t body_end;			/* TPU_OP_LOOP: one past its body */
};

/* The memory model's ops (copies, semaphores, scalar stores), not the vector unit's. */
static inline bool tpu_opcode_is_memory(unsigned int opcode)
{
	return opcode >= TPU_OP_COPY_START && opcode <= TPU_OP_SCALAR_STORE;
}

struct tpu_plan_insn {
	uint8_t op;
	int32_t arg;
};

/*
 * A decoded job. Its arrays are sized by the job's limits (uapi/tpu_job.h):
 * about 400 KB, most of it op[] (TPU_JOB_MAX_OPS) and insn[]
 * (TPU_JOB_MAX_INSNS). Allocate it (the engine mallocs one per job) or make
 * it static; never put one on a thread's stack. Code walks the num_*
 * entries in use, never a whole array.
 */
struct tpu_plan {
	uint32_t flags;
	unsigned int trace_slot;	/* TPU_JOB_F_TRACE: the trace buffer */
	unsigned int print_slot;	/* TPU_JOB_F_PRINT: the print buffer */
	uint64_t vmem_limit;
	uint32_t grid_rank;
	uint64_t grid[TPU_JOB_MAX_GRID_RANK];
	uint8_t semantics[TPU_JOB_MAX_GRID_RANK];
	uint32_t num_operands, num_scalar_prefetch, num_scratch, num_ops;
	uint32_t num_insns;
	struct tpu_plan_operand operand[TPU_JOB_MAX_OPERANDS];
	struct tpu_plan_scratch scratch[TPU_JOB_MAX_SCRATCH];
	struct tpu_plan_op op[TPU_JOB_MAX_OPS];
	struct tpu_plan_insn insn[TPU_JOB_MAX_INSNS];
	uint32_t num_windows;
	struct tpu_plan_window window[TPU_JOB_MAX_WINDOWS];
	/* derived */
	uint64_t steps;
	uint64_t parallel_iters;		/* product of parallel extents */
	uint64_t vmem_need;
	uint64_t smem_words;			/* prefetch + SMEM blocks + SMEM
						 * scratch, per core */
	uint32_t num_sems;			/* semaphores, per core */
};

/*
 * A ref as async copies see it (tpu_window_check.c): a box of a base, an
 * operand (its block, or the array for ANY and scalar prefetch) or a
 * scratch. A plain ref is the whole base; a window a slice whose starts
 * its start program gives at run time.
 */
struct tpu_plan_box {
	struct tpu_plan_ref base;		/* TPU_REF_OPERAND or _SCRATCH */
	uint8_t space, dtype, rank, squeeze;
	uint64_t extent[TPU_JOB_MAX_RANK];	/* the base's */
	uint64_t size[TPU_JOB_MAX_RANK];	/* the box's */
	uint64_t stride[TPU_JOB_MAX_RANK];	/* its steps, 1 or more */
	struct tpu_plan_prog start;		/* len 0: every start is 0 */
	int window;				/* its index, or -1 */
	uint64_t elems, bytes;
};

/* The elements dimension @d of @b spans, from its first to its last. */
static inline uint64_t tpu_plan_box_span(const struct tpu_plan_box *b,
					 unsigned int d)
{
	return (b->size[d] - 1) * b->stride[d] + 1;
}

/* @r's box; false if @r has no data (none, a semaphore, out of range). */
bool tpu_plan_ref_box(const struct tpu_plan *plan, struct tpu_plan_ref r,
		      struct tpu_plan_box *box);

/* tpu_job_check.c */
int tpu_job_decode(const void *desc, size_t len, const struct tpu_config *cfg,
		   struct tpu_plan *plan, struct tpu_job_result *res);
int tpu_job_check_buffers(const struct tpu_plan *plan, uint64_t hbm_size,
			  const struct tpu_buffer_slot *slots,
			  unsigned int nslots, struct tpu_job_result *res);

/*
 * tpu_scalar.c: the scalar core, the one interpreter of the job's bytecode
 * (uapi/tpu_job.h, enum tpu_insn_op). The engine runs a plan's programs
 * through tpu_scalar_verify/tpu_scalar_run; libtpurt runs the programs it
 * compiles from index-map text through tpu_scalar_verify_code and
 * tpu_scalar_run_code, on a plain instruction array.
 */
struct tpu_scalar_fault {
	unsigned int code;		/* enum tpu_job_error */
	int32_t operand;		/* LOAD_SMEM's operand, LOAD_SCRATCH's scratch */
	int64_t index;			/* the offending SMEM index */
	uint64_t len;			/* elements of the array it indexed */
	uint64_t reach;			/* elements a load of it may read */
	bool scratch;			/* LOAD_SCRATCH: @operand is a scratch */
};

/* A scratch LOAD_SCRATCH reads: SMEM words or semaphore counts. */
struct tpu_scalar_scratch {
	const int32_t *words;		/* SMEM scratch; NULL: reads 0 */
	const int64_t *sems;		/* semaphore scratch; NULL: reads 0 */
	uint64_t len;			/* elements (0: not readable) */
	uint64_t reach;			/* SMEM scratch: elements a load may
					 * read (tpu_smem_reach); 0: @len */
	uint8_t dtype;			/* SMEM scratch: its elements' type */
};

/* What a program reads besides its code. */
struct tpu_scalar_env {
	const uint64_t *grid;		/* grid extents (PUSH_NPROG) */
	const int64_t *pid;		/* the step's grid index (PUSH_PID) */
	const int32_t *const *smem;	/* scalar-prefetch array of each operand
					 * (LOAD_SMEM); NULL, or a NULL entry:
					 * loads read 0 after the range check */
	const uint64_t *smem_len;	/* elements of each array */
	const uint64_t *smem_reach;	/* NULL (@smem_len), or per operand:
					 * elements a load may read, past the
					 * array's end to the job's SMEM end
					 * (tpu_smem_reach) */
	const uint8_t *smem_dtype;	/* NULL (all int32), or per operand:
					 * its elements' type (tpu_smem_load) */
	const struct tpu_scalar_scratch *scratch; /* LOAD_SCRATCH, per
					 * scratch; NULL in index maps */
	const int64_t *loop;		/* trip index of each enclosing loop
					 * (PUSH_LOOP_INDEX); NULL: reads 0 */
};

/* What LOAD_SMEM and LOAD_SCRATCH may name, for the verifier. */
struct tpu_scalar_scope {
	unsigned int grid_rank;
	uint64_t smem_operands;		/* bit i: LOAD_SMEM may read operand i */
	uint64_t scratch;		/* bit i: LOAD_SCRATCH may read scratch i */
	unsigned int loop_depth;	/* PUSH_LOOP_INDEX may name loops below */
};

/* A bit of tpu_scalar_scope for every operand and scratch buffer. */
_Static_assert(TPU_JOB_MAX_OPERANDS <= 64 && TPU_JOB_MAX_SCRATCH <= 64,
	       "tpu_scalar_scope's masks hold 64 operands and 64 scratch buffers");

/*
 * Check @len instructions at @insn before they run: known opcodes,
 * arguments in range for a grid of @grid_rank dimensions and @num_smem
 * scalar-prefetch operands, a stack that never underflows nor exceeds
 * TPU_JOB_MAX_STACK, exactly @nresults values left. 0, or -1 with a
 * message (instructions numbered from 0) in @why.
 */
int tpu_scalar_verify_code(const struct tpu_plan_insn *insn, unsigned int len,
			   unsigned int grid_rank, unsigned int num_smem,
			   unsigned int nresults, char *why, size_t whylen);

/* The same with what loads may name given in @scope. */
int tpu_scalar_verify_scope(const struct tpu_plan_insn *insn, unsigned int len,
			    const struct tpu_scalar_scope *scope,
			    unsigned int nresults, char *why, size_t whylen);

/*
 * Run a verified program: leaves its first @nout values in @out. Returns 0,
 * or -1 with @fault filled: TPU_JOB_ERR_DIV_ZERO (// or % by zero) or
 * TPU_JOB_ERR_SMEM_RANGE (a load before its array or past its reach).
 * Values are 64-bit and wrap; // and % round as Python's, INT64_MIN // -1
 * wraps to INT64_MIN and x % -1 is 0.
 */
int tpu_scalar_run_code(const struct tpu_plan_insn *insn, unsigned int len,
			const struct tpu_scalar_env *env, int64_t *out,
			unsigned int nout, struct tpu_scalar_fault *fault);

/* What a program of a plan reads at one step on one core. */
struct tpu_scalar_ctx {
	const int64_t *pid;		/* the step's grid index */
	const int32_t *smem;		/* the core's SMEM words: prefetch arrays,
					 * SMEM-space blocks and SMEM scratch at
					 * their smem_base; NULL: loads read 0 */
	const int64_t *sems;		/* the core's semaphore counts at each
					 * semaphore scratch's sem_base; NULL: 0 */
	const int64_t *loop;		/* trip indices of the enclosing loops */
};

/*
 * The same for @prog in @plan's code array, its grid, SMEM and semaphores.
 * tpu_scalar_verify checks an index map (LOAD_SMEM of scalar prefetch
 * only); tpu_scalar_verify_body a program of the body (predicates, scalar
 * indices, window starts), which may also read SMEM-space operands' blocks
 * and, with LOAD_SCRATCH, SMEM and semaphore scratch, and the trip indices
 * of the @loop_depth loops around it. The plan's operands and scratch must
 * be decoded.
 */
int tpu_scalar_verify(const struct tpu_plan *plan, struct tpu_plan_prog prog,
		      unsigned int nresults, char *why, size_t whylen);
int tpu_scalar_verify_body(const struct tpu_plan *plan, struct tpu_plan_prog prog,
			   unsigned int loop_depth, unsigned int nresults,
			   char *why, size_t whylen);

/* 1 + the deepest loop depth @len instructions read (0: none). */
unsigned int tpu_scalar_loop_need(const struct tpu_plan_insn *insn,
				  unsigned int len);
int tpu_scalar_run(const struct tpu_plan *plan, struct tpu_plan_prog prog,
		   const struct tpu_scalar_ctx *ctx, int64_t *out,
		   unsigned int nout, struct tpu_scalar_fault *fault);

/*
 * SMEM elements. Each SMEM array (a scalar prefetch, an SMEM-space block,
 * an SMEM scratch) starts on a word at its smem_base and holds its elements
 * at their own size, as in HBM: 4 bytes for float32, int32 and uint32, 2
 * for bfloat16, 1 for int8, uint8 and bool; tpu_smem_words_of(bytes)
 * words. The caller checks @i against the array's elements (a load
 * against its reach).
 *
 * tpu_smem_load: element @i of @dtype as the scalar core's integer:
 * int8 sign-extended, uint8 and uint32 zero-extended, bool 0 or 1 (any
 * non-zero byte is true), float32 and bfloat16 (widened exactly) truncated
 * toward zero (NaN 0, saturated at the int64 range).
 * tpu_smem_value: the element as bcast smem reads it: a float for float32
 * and bfloat16 (*@is_int false), else the integer of tpu_smem_load.
 * tpu_smem_put: store the scalar core's @v: float32 rounded once to nearest
 * even, bfloat16 too (straight from @v, not through float32), integers
 * keep @v's low bits (as XLA's convert: 300 is 44 in int8), bool 0 or 1.
 */
static inline uint64_t tpu_smem_words_of(uint64_t bytes)
{
	return bytes / 4 + (bytes % 4 != 0);
}

/*
 * Elements of @dtype from an SMEM array of @elems elements at word
 * @smem_base to the end of the job's SMEM (plan->smem_words), and at least
 * @elems (a plan laid out by hand may leave smem_words 0): how far a scalar
 * load from it may read. As on a TPU, whose scalar core does not bound SMEM
 * loads, a load past the array's end but inside the job's SMEM reads the
 * element there (the next array's, or the zeros padding an array to a
 * word): JAX's paged attention reads lengths_ref[batch_size] and drops it.
 * Loads outside the job's SMEM, before an array's start, and every store
 * past an array's end (it would change another operand) are refused.
 */
uint64_t tpu_smem_reach(const struct tpu_plan *plan, uint64_t smem_base,
			unsigned int dtype, uint64_t elems);

int64_t tpu_smem_load(const int32_t *words, unsigned int dtype, uint64_t i);
double tpu_smem_value(const int32_t *words, unsigned int dtype, uint64_t i,
		      bool *is_int);
void tpu_smem_put(int32_t *words, unsigned int dtype, uint64_t i, int64_t v);

#endif /* TPU_PLAN_H */
