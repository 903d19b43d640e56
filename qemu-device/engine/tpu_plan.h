/* SPDX-License-Identifier: MIT */
/*
 * Engine internals: a checked job descriptor decoded into host byte order
 * (the "plan"), the state of a running job and of each core, and the
 * functions the engine's files share. Not part of the engine's API.
 */
#ifndef TPU_PLAN_H
#define TPU_PLAN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tpu_engine.h"

struct tpu_plan_prog {
	uint32_t offset;
	uint32_t len;
};

struct tpu_plan_operand {
	uint32_t slot;
	uint8_t role, dtype, rank;
	uint64_t offset;		/* of element 0 in the slot */
	uint64_t shape[TPU_JOB_MAX_RANK];
	uint32_t block[TPU_JOB_MAX_RANK];
	struct tpu_plan_prog index_map;
	/* derived */
	uint64_t stride[TPU_JOB_MAX_RANK];	/* elements */
	uint64_t nblocks[TPU_JOB_MAX_RANK];	/* cdiv(shape, block) */
	uint64_t elems;				/* of the array */
	uint64_t block_bytes;
	int64_t rows, cols;			/* the block as a 2-D ref */
	uint64_t smem_base;			/* scalar prefetch: in SMEM words */
};

struct tpu_plan_scratch {
	uint8_t space, dtype, rank;
	uint32_t shape[TPU_JOB_MAX_RANK];
	int64_t rows, cols;
	uint64_t bytes;
	uint64_t smem_base;			/* SMEM scratch: in SMEM words */
};

struct tpu_plan_ref {
	uint8_t kind, index;
};

struct tpu_plan_op {
	uint8_t opcode, fn, bcast, dot;
	struct tpu_plan_ref dst, src0, src1;
	struct tpu_plan_prog pred, scalar_index;
	uint32_t imm;
	int64_t m, n, k;			/* TPU_OP_DOT */
};

struct tpu_plan_insn {
	uint8_t op;
	int32_t arg;
};

struct tpu_plan {
	uint32_t flags;
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
	/* derived */
	uint64_t steps;
	uint64_t parallel_iters;		/* product of parallel extents */
	uint64_t vmem_need;
	uint64_t smem_words;			/* prefetch + SMEM scratch */
};

/* tpu_job_check.c */
int tpu_job_fail(struct tpu_job_result *res, unsigned int code,
		 const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int tpu_job_decode(const void *desc, size_t len, const struct tpu_config *cfg,
		   struct tpu_plan *plan, struct tpu_job_result *res);
int tpu_job_check_buffers(const struct tpu_plan *plan, uint64_t hbm_size,
			  const struct tpu_buffer_slot *slots,
			  unsigned int nslots, struct tpu_job_result *res);

/* tpu_scalar.c: the scalar core */
struct tpu_scalar_fault {
	unsigned int code;		/* enum tpu_job_error */
	int32_t operand;		/* LOAD_SMEM's operand */
	int64_t index;			/* the offending SMEM index */
};

int tpu_scalar_verify(const struct tpu_plan *plan, struct tpu_plan_prog prog,
		      unsigned int nresults, char *why, size_t whylen);
int tpu_scalar_run(const struct tpu_plan *plan, struct tpu_plan_prog prog,
		   const int64_t *pid, const int32_t *smem, int64_t *out,
		   unsigned int nout, struct tpu_scalar_fault *fault);

/* A running job, shared by its cores. */
struct tpu_run {
	const struct tpu_config *cfg;
	const struct tpu_plan *plan;
	uint8_t *hbm;
	const struct tpu_buffer_slot *slots;
	bool model_only, debug;
	int32_t *smem;				/* scalar prefetch + SMEM scratch */
	_Atomic uint64_t *owner[TPU_JOB_MAX_OPERANDS];	/* debug: per block */
	_Atomic uint64_t fail_step;	/* lowest failing step so far */
	const atomic_bool *abort;	/* set: stop at the next step */
};

/* A 2-D view of a VMEM (or HBM, for read-only inputs) block. */
struct tpu_ref2d {
	void *p;
	int64_t rows, cols, ld;		/* ld: row stride in elements */
	uint8_t dtype;
};

/* Host buffers behind a core's VMEM: blocks, scratch, elementwise rows. */
#define TPU_VMEM_SCRATCH	TPU_JOB_MAX_OPERANDS
#define TPU_VMEM_ROWS		(TPU_VMEM_SCRATCH + TPU_JOB_MAX_SCRATCH)
#define TPU_VMEM_BUFS		(TPU_VMEM_ROWS + 2)

struct tpu_vmem {
	void *p[TPU_VMEM_BUFS];
	uint64_t size[TPU_VMEM_BUFS];
};

void tpu_vmem_release(struct tpu_vmem *v);

struct tpu_core {
	struct tpu_run *run;
	unsigned int id;
	uint64_t pbegin, pend;		/* its share of the parallel iterations */
	/*
	 * The engine's VMEM for this core when the job holds the worker pool,
	 * kept from job to job (no page faults per job); else own_vmem.
	 */
	struct tpu_vmem *vmem;
	struct tpu_vmem own_vmem;
	/* VMEM: one buffer per block (double buffering is only modeled) */
	void *block_buf[TPU_JOB_MAX_OPERANDS];
	void *scratch_buf[TPU_JOB_MAX_SCRATCH];
	double *row_tmp[2];		/* elementwise work rows */
	/* pipeline state */
	struct tpu_ref2d block[TPU_JOB_MAX_OPERANDS];
	int64_t idx[TPU_JOB_MAX_OPERANDS][TPU_JOB_MAX_RANK];
	bool resident[TPU_JOB_MAX_OPERANDS];
	int64_t valid_rows[TPU_JOB_MAX_OPERANDS];	/* in bounds, of the */
	int64_t valid_cols[TPU_JOB_MAX_OPERANDS];	/* block as a 2-D ref */
	uint64_t visit_owner[TPU_JOB_MAX_OPERANDS];
	int64_t pid[TPU_JOB_MAX_GRID_RANK];
	uint64_t step;			/* row-major number of the current step */
	struct tpu_model model;
	struct tpu_job_stats stats;
	struct tpu_job_result res;	/* this core's first error */
};

/* tpu_pipeline.c */
int tpu_core_alloc(struct tpu_core *core);
void tpu_core_free(struct tpu_core *core);
void tpu_core_run(struct tpu_core *core);

/* tpu_ops.c: micro-ops; shapes and dtypes were checked by tpu_job_decode */
void tpu_ops_poison(void *p, uint8_t dtype, uint64_t elems);
void tpu_op_run(struct tpu_core *core, const struct tpu_plan_op *op,
		double scalar);
struct tpu_ref2d tpu_op_ref(struct tpu_core *core, struct tpu_plan_ref ref);

#endif /* TPU_PLAN_H */
