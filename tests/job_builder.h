/* SPDX-License-Identifier: MIT */
/*
 * Building grid-job descriptors (uapi/tpu_job.h) for the engine's host
 * tests, and a pretend device (HBM + buffer table) to run them on. Kept
 * small and clean so libtpurt can mirror it.
 *
 * Programs are written in postfix, one token per instruction:
 *   pidN nprogN smemN  (grid index, grid extent, load from scalar-prefetch
 *   operand N), integers, + - * // % min max == != < <= > >= and or not.
 * E.g. the index map "i, j, k -> i, k" is "pid0 pid2", the predicate
 * program_id(2) == nsteps - 1 is "pid2 nprog2 1 - ==", and the block-sparse
 * "i, j, s -> s[i], j" is "pid0 smem0 pid1". scrN loads from SMEM or
 * semaphore scratch N (LOAD_SCRATCH), loopN pushes the trip index of loop
 * depth N (PUSH_LOOP_INDEX).
 */
#ifndef JOB_BUILDER_H
#define JOB_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpu_dtype.h"
#include "tpu_engine.h"
#include "tpu_job.h"

struct jb;

struct jb *jb_new(void);
void jb_free(struct jb *b);

/* Grid of @rank dims; @sem is a string of 'p' (parallel) / 'a' (arbitrary). */
void jb_grid(struct jb *b, unsigned int rank, const uint32_t *grid,
	     const char *sem);
void jb_flags(struct jb *b, uint32_t flags);
void jb_vmem_limit(struct jb *b, uint64_t bytes);

/* Assemble a postfix program into the code array; aborts on a bad token. */
struct tpu_job_prog jb_prog(struct jb *b, const char *text);

/* Returns the operand's index. @block NULL for scalar prefetch. */
unsigned int jb_operand(struct jb *b, unsigned int role, unsigned int slot,
			unsigned int dtype, unsigned int rank,
			const uint64_t *shape, const uint32_t *block,
			const char *index_map);
unsigned int jb_scratch(struct jb *b, unsigned int space, unsigned int dtype,
			unsigned int rank, const uint32_t *shape);

#define JB_OPND(i)	((struct tpu_job_ref){ TPU_REF_OPERAND, (i) })
#define JB_SCR(i)	((struct tpu_job_ref){ TPU_REF_SCRATCH, (i) })
#define JB_NONE		((struct tpu_job_ref){ TPU_REF_NONE, 0 })

/* The memory model: an operand's space, pl.Buffered(n), an output's alias. */
void jb_space(struct jb *b, unsigned int i, unsigned int space);
void jb_buffers(struct jb *b, unsigned int i, unsigned int n);
void jb_alias(struct jb *b, unsigned int out, unsigned int in);
/* pl.RevisitMode of an output: &enum tpu_revisit_mode. */
void jb_revisit(struct jb *b, unsigned int i, unsigned int mode);
/* pl.Element: dims indexed by element (a bit each), low padding (NULL: 0). */
void jb_element(struct jb *b, unsigned int i, unsigned int dims,
		const uint16_t *pad);

/* A window of @base (@rank sizes); @start a postfix program or NULL. */
unsigned int jb_window(struct jb *b, struct tpu_job_ref base,
		       unsigned int squeeze, const uint32_t *size,
		       unsigned int rank, const char *start);
#define JB_WIN(i)	((struct tpu_job_ref){ TPU_REF_WINDOW, (i) })

/*
 * Micro-ops; @pred is a postfix predicate or NULL. Return the op to tweak.
 * Up to TPU_JOB_MAX_OPS + 1 of them: one more than a job may have.
 */
struct tpu_job_op *jb_zero(struct jb *b, struct tpu_job_ref dst,
			   const char *pred);
struct tpu_job_op *jb_dot(struct jb *b, struct tpu_job_ref dst,
			  struct tpu_job_ref lhs, struct tpu_job_ref rhs,
			  unsigned int dot_flags, const char *pred);
struct tpu_job_op *jb_unary(struct jb *b, unsigned int fn,
			    struct tpu_job_ref dst, struct tpu_job_ref src,
			    const char *pred);
struct tpu_job_op *jb_binary(struct jb *b, unsigned int fn, unsigned int bcast,
			     struct tpu_job_ref dst, struct tpu_job_ref src0,
			     struct tpu_job_ref src1, const char *pred);

/*
 * TPU_OP_COPY_START or TPU_OP_COPY_WAIT: @src (NONE for a wait) to @dst on
 * DMA semaphore @sem, element from @sem_index (NULL: 0).
 */
struct tpu_job_op *jb_copy(struct jb *b, unsigned int opcode,
			   struct tpu_job_ref dst, struct tpu_job_ref src,
			   struct tpu_job_ref sem, const char *sem_index,
			   const char *pred);
/* TPU_OP_SEM_SIGNAL or TPU_OP_SEM_WAIT; @index_amount leaves i then n. */
struct tpu_job_op *jb_sem_op(struct jb *b, unsigned int opcode,
			     struct tpu_job_ref sem, const char *index_amount,
			     const char *pred);
/* TPU_OP_SCALAR_STORE; @index_value leaves the flat index then the value. */
struct tpu_job_op *jb_scalar_store(struct jb *b, struct tpu_job_ref dst,
				   const char *index_value, const char *pred);

/*
 * TPU_OP_LOOP of &enum tpu_loop_kind @kind over the next @body_ops ops:
 * @prog leaves lo and hi (for) or the condition (while; imm2 its maximum).
 */
struct tpu_job_op *jb_loop(struct jb *b, unsigned int kind, const char *prog,
			   unsigned int body_ops, const char *pred);

/* The descriptor blob (malloc'd, caller frees) and its length. */
void *jb_finish(struct jb *b, size_t *len);
/* Direct access to the header of a finished blob, to corrupt it in tests. */
struct tpu_job_header *jb_header(void *blob);

/* --- a pretend device --- */

struct tdev {
	struct tpu_config cfg;
	struct tpu_engine *engine;
	uint8_t *hbm;
	uint64_t hbm_size, used;
	struct tpu_buffer_slot slots[TPU_JOB_MAX_SLOTS];
	unsigned int nslots;
};

struct tdev *tdev_new(uint64_t hbm_size, unsigned int cores);
void tdev_free(struct tdev *d);
/* A new buffer of @bytes, 64-byte aligned, filled with 0x5c; its slot. */
unsigned int tdev_alloc(struct tdev *d, uint64_t bytes);
void *tdev_ptr(struct tdev *d, unsigned int slot);
/* Recreate the engine after changing d->cfg. */
void tdev_reconfigure(struct tdev *d);
int tdev_run(struct tdev *d, const void *blob, size_t len, unsigned int flags,
	     struct tpu_job_result *res);

/* --- the guide's matmul kernels --- */

struct mm_job {
	uint64_t m, k, n;
	uint32_t bm, bk, bn;
	unsigned int in_dtype, out_dtype;
	bool transpose_rhs;	/* y is stored n x k: x @ y.T */
	bool transpose_lhs;	/* x is stored k x m: x.T @ y (backward) */
	bool acc_scratch;	/* accumulate in a VMEM scratch (f32/int32) */
	bool no_zero;		/* a buggy kernel: forgets to zero */
	int activation;		/* enum tpu_unary applied at the last k step */
	bool bias;		/* + a row vector of n (out dtype f32 only) */
	const char *sem;	/* dimension semantics, default "ppa" */
	unsigned int alias;	/* z aliases x (1) or y (2), in its slot */
	uint32_t flags;		/* TPU_JOB_F_* */
	unsigned int x_slot, y_slot, z_slot, bias_slot;
};

/* Build the guide's matmul: grid (cdiv m/bm, cdiv n/bn, cdiv k/bk). */
void *mm_build(const struct mm_job *j, size_t *len);

#endif /* JOB_BUILDER_H */

/* --- element access and references for checking results --- */

uint16_t ref_bf16(float f);		/* round to nearest even */
float ref_from_bf16(uint16_t h);
double ref_get(const void *p, unsigned int dtype, uint64_t i);
/* Store @v as the engine stores an op's result: f32 RNE; bf16 via f32; ints
 * RNE+saturate; bool non-zero. */
void ref_set(void *p, unsigned int dtype, uint64_t i, double v);
/* Small integers in [lo, hi] (exact sums in any order), or uniform floats
 * in [-1, 1) when lo > hi. Deterministic in @seed. */
void ref_fill(void *p, unsigned int dtype, uint64_t n, uint32_t seed,
	      int lo, int hi);
/* fn in double (clamp's bounds 0, 0); max/min propagate NaN. */
double ref_unary(unsigned int fn, double x);
double ref_unary_clamp(unsigned int fn, double x, double lo, double hi);
/* fn in double; mod with Python's sign. */
double ref_binary(unsigned int fn, double a, double b);
/* The guide's matmul in double, activation and bias included, stored into
 * @z as @j->out_dtype would be. */
void ref_matmul(const struct mm_job *j, const void *x, const void *y,
		const float *bias, void *z);
