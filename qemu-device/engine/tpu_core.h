/* SPDX-License-Identifier: MIT */
/*
 * Engine internals: the state of a running job and of each core, which the
 * engine's files share (each declares its functions in its own header).
 * Not part of the engine's API.
 */
#ifndef TPU_CORE_H
#define TPU_CORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tpu_engine.h"
#include "tpu_dtype.h"
#include "tpu_plan.h"
#include "tpu_prng.h"
#include "tpu_ref2d.h"
#include "tpu_trace_sink.h"

/* A running job, shared by its cores. */
struct tpu_run {
	const struct tpu_config *cfg;
	const struct tpu_plan *plan;
	uint8_t *hbm;
	const struct tpu_buffer_slot *slots;
	bool model_only, debug;
	int32_t *smem;				/* scalar prefetch, from HBM once;
						 * each core starts from a copy */
	_Atomic uint64_t *owner[TPU_JOB_MAX_OPERANDS];	/* debug: per block */
	_Atomic uint64_t fail_step;	/* lowest failing step so far */
	const atomic_bool *abort;	/* set: stop at the next step */
	const struct tpu_trace_sink *trace;	/* NULL: no trace */
	struct tpu_print_buf *print;		/* NULL: no print buffer */
	struct tpu_panels *panels;		/* NULL: packings not kept */
	uint64_t start_ns;		/* CLOCK_MONOTONIC at the job's start */
};

/* Host buffers behind a core's VMEM: blocks, scratch, elementwise rows. */
#define TPU_VMEM_SCRATCH	TPU_JOB_MAX_OPERANDS
#define TPU_VMEM_ROWS		(TPU_VMEM_SCRATCH + TPU_JOB_MAX_SCRATCH)
#define TPU_VMEM_BUFS		(TPU_VMEM_ROWS + 4)

struct tpu_vmem {
	void *p[TPU_VMEM_BUFS];
	uint64_t size[TPU_VMEM_BUFS];
};

/*
 * Where an async copy's end or a body op's ref lies: a box of a base ref
 * (a block, a scratch, an array in HBM), in the base's coordinates. Two
 * regions with the same base overlap when their boxes do.
 */
struct tpu_region {
	struct tpu_plan_ref base;	/* ANY outputs: the aliased input's */
	uint8_t rank;
	bool write;
	int64_t start[TPU_JOB_MAX_RANK];
	uint64_t size[TPU_JOB_MAX_RANK];
};

/* An async copy between its start and the wait that retires it. */
struct tpu_inflight {
	unsigned int op;		/* its COPY_START */
	uint64_t step;
	uint32_t sem;			/* in the core's semaphore array */
	uint64_t bytes;			/* not yet taken by a wait */
	double done_s;			/* modeled: when its DMA finishes */
	struct tpu_region src, dst;
};

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
	double *row_tmp[4];		/* elementwise work rows */
	/* pipeline state */
	struct tpu_ref2d block[TPU_JOB_MAX_OPERANDS];
	int64_t idx[TPU_JOB_MAX_OPERANDS][TPU_JOB_MAX_RANK];
	bool resident[TPU_JOB_MAX_OPERANDS];
	int64_t valid_rows[TPU_JOB_MAX_OPERANDS];	/* in bounds, of the */
	int64_t valid_cols[TPU_JOB_MAX_OPERANDS];	/* block as a 2-D ref */
	uint64_t visit_owner[TPU_JOB_MAX_OPERANDS];
	int64_t pid[TPU_JOB_MAX_GRID_RANK];
	uint64_t step;			/* row-major number of the current step */
	int64_t loop[TPU_JOB_MAX_LOOP_DEPTH];	/* trip index of each open loop */
	/* the memory model: per core, persisting across the core's steps */
	int32_t *smem;			/* prefetch copy, SMEM blocks, scratch */
	int64_t *sems;			/* plan->num_sems counts */
	struct tpu_inflight *inflight;	/* in start order */
	unsigned int ninflight, inflight_cap;
	struct tpu_prng prng;		/* pltpu.prng_seed's state */
	struct tpu_model model;
	struct tpu_job_stats stats;
	struct tpu_job_result res;	/* this core's first error */
};

#endif /* TPU_CORE_H */
