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
 * on the padded block). Elementwise work (zeroing, activations, casts) is
 * not charged: the VPU runs beside the MXU and the published figures show
 * no measurable cost for a fused activation.
 */
#ifndef TPU_MODEL_H
#define TPU_MODEL_H

#include <stdint.h>

#include "tpu_config.h"
#include "tpu_job.h"

struct tpu_model_stats {
	double time_s;		/* modeled wall time */
	double mxu_busy_s;	/* MXU compute time */
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
 * Account one grid step: @fetch_bytes of input blocks it needed fetched
 * (0 when every block index repeated), its @compute_s (sum of
 * tpu_model_dot_s and other work), @flops of useful work, and the
 * @writeback_bytes of output blocks written back after it.
 */
void tpu_model_step(struct tpu_model *m, uint64_t fetch_bytes,
		    double compute_s, uint64_t flops, uint64_t writeback_bytes);

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
