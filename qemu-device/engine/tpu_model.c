// SPDX-License-Identifier: MIT
#include "tpu_model.h"

#include <string.h>

static double dma_s(const struct tpu_config *cfg, uint64_t bytes)
{
	return (double)bytes / (double)cfg->hbm_bandwidth;
}

static double peak(const struct tpu_config *cfg, enum tpu_dtype dtype)
{
	switch (dtype) {
	case TPU_DTYPE_BF16:
		return (double)cfg->peak_flops_bf16;
	case TPU_DTYPE_INT8:
	case TPU_DTYPE_UINT8:
		return (double)cfg->peak_ops_int8;
	default:
		return (double)cfg->peak_flops_f32;
	}
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) / to * to;
}

double tpu_model_dot_s(const struct tpu_config *cfg, enum tpu_dtype dtype,
		       uint64_t m, uint64_t n, uint64_t k)
{
	uint64_t d = cfg->mxu_dim;

	/* The MXU streams rows of LHS through a d x d weight tile (k x n). */
	return 2.0 * (double)m * (double)round_up(n, d) * (double)round_up(k, d) /
	       peak(cfg, dtype);
}

void tpu_model_begin(struct tpu_model *m, const struct tpu_config *cfg)
{
	memset(m, 0, sizeof(*m));
	m->cfg = cfg;
}

void tpu_model_step(struct tpu_model *m, uint64_t fetch_bytes,
		    double compute_s, uint64_t flops, uint64_t writeback_bytes)
{
	struct tpu_model_stats *s = &m->stats;
	double step_cost = m->cfg->step_cost_ns * 1e-9;
	double dma = dma_s(m->cfg, fetch_bytes);

	if (!s->steps) {
		s->time_s += dma;		/* prologue: nothing to overlap */
	} else {
		double io = dma + dma_s(m->cfg, m->prev_writeback_bytes);
		double busy = io > m->prev_compute_s ? io : m->prev_compute_s;

		s->bubble_s += busy - m->prev_compute_s;
		s->time_s += busy + step_cost;
	}
	s->dma_busy_s += dma + dma_s(m->cfg, writeback_bytes);
	s->mxu_busy_s += compute_s;
	s->hbm_bytes_in += fetch_bytes;
	s->hbm_bytes_out += writeback_bytes;
	s->flops += flops;
	s->steps++;
	m->prev_compute_s = compute_s;
	m->prev_writeback_bytes = writeback_bytes;
}

void tpu_model_end(struct tpu_model *m, struct tpu_model_stats *out)
{
	struct tpu_model_stats *s = &m->stats;

	if (s->steps) {
		/* epilogue: the last step, then its write-back */
		s->time_s += m->prev_compute_s + m->cfg->step_cost_ns * 1e-9 +
			     dma_s(m->cfg, m->prev_writeback_bytes);
		s->bubble_s += dma_s(m->cfg, m->prev_writeback_bytes);
	}
	*out = *s;
}

void tpu_model_job(const struct tpu_config *cfg,
		   const struct tpu_model_stats *cores, unsigned int ncores,
		   struct tpu_model_stats *job)
{
	memset(job, 0, sizeof(*job));
	for (unsigned int i = 0; i < ncores; i++) {
		if (cores[i].time_s > job->time_s)
			job->time_s = cores[i].time_s;
		job->mxu_busy_s += cores[i].mxu_busy_s;
		job->dma_busy_s += cores[i].dma_busy_s;
		job->bubble_s += cores[i].bubble_s;
		job->hbm_bytes_in += cores[i].hbm_bytes_in;
		job->hbm_bytes_out += cores[i].hbm_bytes_out;
		job->flops += cores[i].flops;
		job->steps += cores[i].steps;
	}
	job->time_s += cfg->launch_cost_ns * 1e-9;
}
