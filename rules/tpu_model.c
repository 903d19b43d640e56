// SPDX-License-Identifier: MIT
/*
 * The per-core pipeline timeline. Step s's interval is the time from the
 * start of its compute to the start of step s+1's; during it the DMA engine
 * fetches step s+1's input blocks and writes back the output block step s-1
 * released (double-buffered outputs: the write-back starts once the block's
 * last step has finished, so it overlaps the following step). Both share
 * HBM bandwidth, so their times add; the interval is the longer of that and
 * step s's compute, plus the fixed step cost.
 */
#include "tpu_model.h"

#include <string.h>

static double dma_s(const struct tpu_config *cfg, uint64_t bytes)
{
	return (double)bytes / (double)cfg->hbm_bandwidth;
}

static double step_cost_s(const struct tpu_config *cfg)
{
	return (double)cfg->step_cost_ns * 1e-9;
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
	uint64_t rows = m > d ? m : d;

	/*
	 * The MXU holds a d x d tile of the RHS (k x n) and streams LHS rows
	 * through it, a row a cycle: a tile that is only partly filled costs
	 * a whole one. Loading the next tile (d cycles) overlaps streaming the
	 * rows through this one, so fewer than d rows still cost d cycles.
	 */
	return 2.0 * (double)rows * (double)round_up(n, d) *
	       (double)round_up(k, d) / peak(cfg, dtype);
}

void tpu_model_begin(struct tpu_model *m, const struct tpu_config *cfg)
{
	memset(m, 0, sizeof(*m));
	m->cfg = cfg;
}

/*
 * Close the interval of the previous step, now that the DMA overlapping it
 * is known: @fetch_bytes for the next step plus the write-back in flight.
 */
static void close_interval(struct tpu_model *m, uint64_t fetch_bytes)
{
	struct tpu_model_stats *s = &m->stats;
	double io = dma_s(m->cfg, fetch_bytes) +
		    dma_s(m->cfg, m->inflight_writeback_bytes);
	double ahead = m->prev_ahead_s, busy;

	/* Buffered(n >= 3): what the credit does not cover competes here */
	if (ahead > 0) {
		double used = ahead < m->ahead_credit_s ? ahead : m->ahead_credit_s;

		m->ahead_credit_s -= used;
		io += ahead - used;
	}
	busy = io > m->prev_compute_s ? io : m->prev_compute_s;
	s->bubble_s += busy - m->prev_compute_s;
	if (m->ahead_steps) {
		double cap = (double)m->ahead_steps * busy;

		m->ahead_credit_s += busy - io;
		if (m->ahead_credit_s > cap)
			m->ahead_credit_s = cap;
	}
	/* Buffered(1): the fetch into the only buffer waits for the step */
	busy += m->prev_serial_s;
	s->bubble_s += m->prev_serial_s;
	s->time_s += busy + step_cost_s(m->cfg);
	m->inflight_writeback_bytes = m->prev_writeback_bytes;
	m->prev_serial_s = 0;
	m->prev_ahead_s = 0;
}

/*
 * One step: its fetches @f, @compute_s of work plus @stall_s waiting for
 * manual copies (the step's compute interval is their sum).
 */
static void step(struct tpu_model *m, const struct tpu_model_fetch *f,
		 double compute_s, double stall_s, uint64_t flops,
		 uint64_t writeback_bytes)
{
	struct tpu_model_stats *s = &m->stats;
	uint64_t fetch = f->bytes + f->serial_bytes + f->ahead_bytes;

	if (!s->steps) {
		/* prologue: the MXU has nothing to do until the first blocks land */
		s->time_s += dma_s(m->cfg, fetch);
		s->bubble_s += dma_s(m->cfg, fetch);
	} else {
		m->prev_serial_s = dma_s(m->cfg, f->serial_bytes);
		m->prev_ahead_s = dma_s(m->cfg, f->ahead_bytes);
		if (f->ahead_steps > m->ahead_steps)
			m->ahead_steps = f->ahead_steps;
		close_interval(m, f->bytes);
	}
	s->dma_busy_s += dma_s(m->cfg, fetch) + dma_s(m->cfg, writeback_bytes);
	s->mxu_busy_s += compute_s;
	s->bubble_s += stall_s;
	s->hbm_bytes_in += fetch;
	s->hbm_bytes_out += writeback_bytes;
	s->flops += flops;
	s->steps++;
	m->prev_compute_s = compute_s + stall_s;
	m->prev_writeback_bytes = writeback_bytes;
	m->clock_s += compute_s + stall_s;
}

void tpu_model_step(struct tpu_model *m, uint64_t fetch_bytes,
		    double compute_s, uint64_t flops, uint64_t writeback_bytes)
{
	const struct tpu_model_fetch f = { .bytes = fetch_bytes };

	step(m, &f, compute_s, 0, flops, writeback_bytes);
}

void tpu_model_step_fetch(struct tpu_model *m, const struct tpu_model_fetch *f,
			  const struct tpu_model_work *w, uint64_t flops,
			  uint64_t writeback_bytes)
{
	step(m, f, tpu_model_compute_s(w), w->stall_s, flops, writeback_bytes);
	m->stats.vpu_busy_s += w->vpu_s;
	m->stats.eup_busy_s += w->eup_s;
}

void tpu_model_step_work(struct tpu_model *m, uint64_t fetch_bytes,
			 const struct tpu_model_work *w, uint64_t flops,
			 uint64_t writeback_bytes)
{
	const struct tpu_model_fetch f = { .bytes = fetch_bytes };

	tpu_model_step_fetch(m, &f, w, flops, writeback_bytes);
}

double tpu_model_copy_start(struct tpu_model *m, double at_s, uint64_t bytes,
			    bool hbm)
{
	/* on-chip: a vreg loaded and stored per two vector slots */
	double rate = hbm ? (double)m->cfg->hbm_bandwidth :
			    2.0 * (double)m->cfg->vpu_elems_per_s;
	double now = m->clock_s + at_s;
	double start = now > m->copy_free_s ? now : m->copy_free_s;
	double t = (double)bytes / rate;

	m->copy_free_s = start + t;
	m->stats.dma_busy_s += t;
	return m->copy_free_s;
}

double tpu_model_copy_wait(const struct tpu_model *m, double at_s,
			   double done_s)
{
	double now = m->clock_s + at_s;

	return done_s > now ? done_s - now : 0;
}

void tpu_model_end(struct tpu_model *m, struct tpu_model_stats *out)
{
	struct tpu_model_stats *s = &m->stats;

	if (s->steps) {
		double epilogue = dma_s(m->cfg, m->prev_writeback_bytes);

		close_interval(m, 0);
		/* epilogue: the last output block has nothing to hide behind */
		s->time_s += epilogue;
		s->bubble_s += epilogue;
		m->prev_writeback_bytes = 0;
		m->inflight_writeback_bytes = 0;
		m->prev_compute_s = 0;
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
		job->vpu_busy_s += cores[i].vpu_busy_s;
		job->eup_busy_s += cores[i].eup_busy_s;
		job->hbm_bytes_in += cores[i].hbm_bytes_in;
		job->hbm_bytes_out += cores[i].hbm_bytes_out;
		job->flops += cores[i].flops;
		job->steps += cores[i].steps;
	}
	job->time_s += (double)cfg->launch_cost_ns * 1e-9;
}

void tpu_model_core_range(uint64_t units, unsigned int ncores,
			  unsigned int core, uint64_t *begin, uint64_t *end)
{
	/* Contiguous, balanced: the first units % ncores cores get one more. */
	uint64_t base = units / ncores, extra = units % ncores;

	*begin = core * base + (core < extra ? core : extra);
	*end = *begin + base + (core < extra ? 1 : 0);
}
