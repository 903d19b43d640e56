/* SPDX-License-Identifier: MIT */
/*
 * Timing model: the time a job would take on the configured chip (a v5e by
 * default). Modeled time only; the host's wall time is measured elsewhere
 * and never mixed with it.
 *
 * The pipeline is modeled step by step, per core, as Pallas TPU runs it:
 * step s+1's input blocks are fetched, and the output block step s-1
 * released is written back, while step s computes; a step costs the longer
 * of its compute and that overlapped DMA, plus a fixed step cost; the first
 * fetch (prologue) and the last write-back (epilogue) are not overlapped.
 * A job adds a fixed launch cost to its slowest core.
 *
 * Whoever drives the API (the engine's pipeline, tpu_model_matmul) gets the
 * same figures for the same job as long as it passes the same per-step
 * numbers: the bytes actually moved (edge blocks clipped to the array),
 * and for compute tpu_model_dot_s of the whole block shape (the MXU runs
 * on the padded block).
 *
 * The vector unit: each micro-op that is not a dot is charged to the VPU
 * (vector ALUs) and, for transcendentals, the EUP, at elements / throughput,
 * its elements padded to whole (8 x 128) vregs as the hardware lays them
 * out (tpu_model_vector_op). Within a step the MXU, VPU and EUP are issued
 * from the same VLIW bundles and run concurrently with each other, while
 * the EUP's results come back through the VPU's slots, so a step's compute
 * is max(MXU, VPU + EUP) (tpu_model_compute_s): a matmul whose only vector
 * work is zeroing, casting or a fused activation of its block stays
 * MXU-bound, as the published figures show (no measurable cost for a fused
 * activation), while softmax or layer norm steps are VPU/EUP-bound. DMA
 * overlaps compute as above.
 *
 * The memory model (uapi/tpu_job.h):
 *  - pl.Buffered(n) of an input: with n = 1 its block for step s+1 cannot
 *    be fetched while step s uses the only buffer, so that fetch runs
 *    after step s's compute, serially (its time is a bubble). With n >= 3
 *    fetches may run ahead: the DMA time the interval before left idle
 *    (compute longer than its transfers) is a credit, capped at n - 2
 *    intervals' length, that such an operand's fetch uses first; only the
 *    rest competes in the step's interval. n = 2 (the default) is the
 *    pipeline above; a job without other n models exactly as before. An
 *    output's n changes its VMEM only: its write-backs are modeled as
 *    double-buffered whatever n is (a simplification).
 *  - Manual async copies run on the core's DMA engine, one after another,
 *    at HBM bandwidth when an end is in HBM, else (VMEM/SMEM to VMEM/SMEM)
 *    at 2 bytes per VPU element-op (a vreg loaded and stored per pair of
 *    vector slots: 2 x vpu-elems-per-s bytes/s). They are timed on the
 *    core's compute timeline (the steps' compute and stalls so far plus
 *    the compute of the step's earlier ops): a copy starts when issued or
 *    when the previous manual copy ends, and overlaps everything after it;
 *    a wait issued before its copies end stalls the core until they do,
 *    charged as bubble. They do not slow the pipeline's own DMA (a
 *    simplification: both share HBM on a real chip). Their time adds to
 *    the DMA busy time.
 */
#ifndef TPU_MODEL_H
#define TPU_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "tpu_config.h"
#include "tpu_job.h"

/*
 * The vector unit works on vregs of 8 x 128 lanes. Its throughputs are the
 * device parameters vpu-elems-per-s and eup-elems-per-s (uapi/tpu_params.h),
 * per core. Their v5e defaults are estimates (no published figure found):
 * the clock is 197e12 / (4 MXUs x 128 x 128 x 2) = 1.5 GHz, the VPU issues
 * 4 vector ALU ops a cycle and the EUP one transcendental vreg a cycle.
 */
#define TPU_MODEL_VREG_ROWS		8
#define TPU_MODEL_VREG_COLS		128

/* One step's work per unit, in seconds. */
struct tpu_model_work {
	double mxu_s;
	double vpu_s;
	double eup_s;
	double stall_s;		/* waits for manual copies (a bubble) */
};

/* A step's input fetches by buffering (pl.Buffered(n)), in bytes. */
struct tpu_model_fetch {
	uint64_t bytes;		/* double-buffered: overlap the step before */
	uint64_t serial_bytes;	/* Buffered(1): after the step before */
	uint64_t ahead_bytes;	/* Buffered(n >= 3): may run ahead */
	unsigned int ahead_steps;	/* the largest such n - 2 */
};

struct tpu_model_stats {
	double time_s;		/* modeled wall time */
	double mxu_busy_s;	/* compute time: MXU, or vector work beyond it */
	double vpu_busy_s;	/* VPU time (vector ALUs) */
	double eup_busy_s;	/* EUP time (transcendentals) */
	double dma_busy_s;	/* HBM <-> VMEM transfer time */
	double bubble_s;	/* MXU idle for DMA: stalls, prologue, epilogue */
	uint64_t hbm_bytes_in;
	uint64_t hbm_bytes_out;
	uint64_t flops;		/* useful FLOPs (OPs for integer inputs) */
	uint64_t steps;
};

/* One core's timeline. */
struct tpu_model {
	const struct tpu_config *cfg;
	struct tpu_model_stats stats;
	double prev_compute_s;		/* the step whose successor is fetching */
	uint64_t prev_writeback_bytes;	/* released by that step */
	uint64_t inflight_writeback_bytes; /* released by the one before */
	double prev_serial_s;		/* Buffered(1) fetch after that step */
	double prev_ahead_s;		/* Buffered(n >= 3) fetch for it */
	unsigned int ahead_steps;
	double ahead_credit_s;		/* idle DMA time such fetches may use */
	double clock_s;			/* compute timeline: steps' compute
					 * and stalls so far (manual copies) */
	double copy_free_s;		/* when the manual copies end */
};

void tpu_model_begin(struct tpu_model *m, const struct tpu_config *cfg);

/*
 * MXU seconds of one (m x k) @ (k x n) product with @dtype inputs. k and n
 * are padded up to whole MXU tiles and m to at least the MXU size (a tile's
 * weight load): a block smaller than the MXU wastes cycles.
 */
double tpu_model_dot_s(const struct tpu_config *cfg, enum tpu_dtype dtype,
		       uint64_t m, uint64_t n, uint64_t k);

/*
 * Add the vector work of a micro-op (@opcode, @fn: not a dot) on a
 * @rows x @cols ref (a reduction's source, else its dst) to @w: VPU and
 * EUP passes per element by function, over whole vregs, at @cfg's rates.
 */
void tpu_model_vector_op(const struct tpu_config *cfg, unsigned int opcode,
			 unsigned int fn, uint64_t rows, uint64_t cols,
			 struct tpu_model_work *w);

/* A step's compute time: max(MXU, VPU + EUP). */
double tpu_model_compute_s(const struct tpu_model_work *w);

/*
 * Account one grid step: @fetch_bytes of input blocks it needed fetched
 * (0 when every block index repeated), its @compute_s (sum of
 * tpu_model_dot_s and other work), @flops of useful work, and the
 * @writeback_bytes of output blocks written back after it.
 */
void tpu_model_step(struct tpu_model *m, uint64_t fetch_bytes,
		    double compute_s, uint64_t flops, uint64_t writeback_bytes);

/* The same with the step's work per unit (compute: tpu_model_compute_s). */
void tpu_model_step_work(struct tpu_model *m, uint64_t fetch_bytes,
			 const struct tpu_model_work *w, uint64_t flops,
			 uint64_t writeback_bytes);

/* The same with the step's fetches split by buffering (pl.Buffered(n)). */
void tpu_model_step_fetch(struct tpu_model *m, const struct tpu_model_fetch *f,
			  const struct tpu_model_work *w, uint64_t flops,
			  uint64_t writeback_bytes);

/*
 * A manual copy of @bytes (@hbm: an end in HBM) issued @at_s into the
 * current step's compute: returns when it ends on the compute timeline.
 */
double tpu_model_copy_start(struct tpu_model *m, double at_s, uint64_t bytes,
			    bool hbm);

/* The stall of a wait issued @at_s into the step for copies ending @done_s. */
double tpu_model_copy_wait(const struct tpu_model *m, double at_s,
			   double done_s);

/* Close the timeline (epilogue) and return the core's statistics. */
void tpu_model_end(struct tpu_model *m, struct tpu_model_stats *out);

/* A job's statistics from its cores': slowest core plus the launch cost. */
void tpu_model_job(const struct tpu_config *cfg,
		   const struct tpu_model_stats *cores, unsigned int ncores,
		   struct tpu_model_stats *job);

/*
 * The share of @units parallel work units (the row-major linear index over a
 * grid's parallel dimensions) that @core of @ncores runs: [*begin, *end).
 * Contiguous and balanced, so each core keeps Pallas's fetch skipping along
 * its own run of steps.
 */
void tpu_model_core_range(uint64_t units, unsigned int ncores,
			  unsigned int core, uint64_t *begin, uint64_t *end);

#endif /* TPU_MODEL_H */
