// SPDX-License-Identifier: MIT
/*
 * Host test: the timing model. Its pipeline properties, driven through the
 * step API by hand; the matmul walker's block traffic against the guide's
 * formula; and the calibration against the published v5e table.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "published.h"
#include "tpu_dtype.h"
#include "tpu_model_matmul.h"
#include "kselftest_harness.h"

#define MIB			(1ull << 20)
#define CALIBRATION_TOL		0.15

/* Relative comparison: the model computes in doubles. */
#define EXPECT_NEAR(want, got) \
	EXPECT_LE(fabs((got) - (want)), 1e-9 * fabs(want) + 1e-15) \
		TH_LOG("want %.12g, got %.12g", (double)(want), (double)(got))

FIXTURE(model) {
	struct tpu_config cfg;
	double bw;		/* bytes per second */
	double step;		/* step cost, seconds */
};

FIXTURE_SETUP(model)
{
	tpu_config_defaults(&self->cfg);
	self->bw = (double)self->cfg.hbm_bandwidth;
	self->step = self->cfg.step_cost_ns * 1e-9;
}

FIXTURE_TEARDOWN(model)
{
}

static void one_step_job(struct tpu_config *cfg, uint64_t in, double compute,
			 uint64_t out, struct tpu_model_stats *st)
{
	struct tpu_model m;

	tpu_model_begin(&m, cfg);
	tpu_model_step(&m, in, compute, 0, out);
	tpu_model_end(&m, st);
}

TEST_F(model, prologue_and_epilogue_not_overlapped)
{
	struct tpu_model_stats st, job;
	double c = 1e-6;

	one_step_job(&self->cfg, 4 * MIB, c, 2 * MIB, &st);
	EXPECT_NEAR(4 * MIB / self->bw + c + self->step + 2 * MIB / self->bw,
		    st.time_s);
	EXPECT_NEAR(6 * MIB / self->bw, st.bubble_s);
	tpu_model_job(&self->cfg, &st, 1, &job);
	EXPECT_NEAR(st.time_s + self->cfg.launch_cost_ns * 1e-9, job.time_s);
}

/* Two steps: step 0's interval hides step 1's fetch, or waits for it. */
TEST_F(model, step_costs_max_of_compute_and_dma_plus_step_cost)
{
	struct tpu_model m;
	struct tpu_model_stats st;
	uint64_t f = 1 * MIB;
	double dma = f / self->bw;

	for (int dma_bound = 0; dma_bound < 2; dma_bound++) {
		double c = dma_bound ? dma / 4 : dma * 4;

		tpu_model_begin(&m, &self->cfg);
		tpu_model_step(&m, f, c, 0, 0);
		tpu_model_step(&m, f, c, 0, 0);
		tpu_model_end(&m, &st);
		EXPECT_NEAR(dma + fmax(c, dma) + self->step + c + self->step,
			    st.time_s);
		EXPECT_NEAR(dma + fmax(c, dma) - c, st.bubble_s);
		EXPECT_NEAR(2 * c, st.mxu_busy_s);
		EXPECT_EQ(2, st.steps);
	}
}

/*
 * A write-back starts when its step ends, so it overlaps the next step's
 * compute and shares HBM with the fetch that runs beside it.
 */
TEST_F(model, writeback_overlaps_the_following_step)
{
	struct tpu_model m;
	struct tpu_model_stats st;
	uint64_t f = 1 * MIB, w = 2 * MIB;
	double c = 10 * (f + w) / self->bw;

	tpu_model_begin(&m, &self->cfg);
	tpu_model_step(&m, f, c, 0, w);
	tpu_model_step(&m, f, c / 100, 0, 0);
	tpu_model_step(&m, f, c, 0, 0);
	tpu_model_end(&m, &st);
	/* step 0 hides step 1's fetch; step 1 is too short for fetch + w */
	EXPECT_NEAR(f / self->bw + c + (f + w) / self->bw + c +
		    3 * self->step, st.time_s);
	EXPECT_EQ(3 * f, st.hbm_bytes_in);
	EXPECT_EQ(w, st.hbm_bytes_out);
}

TEST_F(model, blocks_smaller_than_the_mxu_waste_it)
{
	struct tpu_config *cfg = &self->cfg;
	struct tpu_matmul_desc d = {
		.m = 1024, .k = 1024, .n = 1024, .bm = 128, .bk = 128, .bn = 128,
		.in_dtype = TPU_DTYPE_BF16, .out_dtype = TPU_DTYPE_BF16,
	};
	struct tpu_matmul_result r128, r64;

	/* n and k fill the weight tile; m rows take at least its load time */
	EXPECT_NEAR(tpu_model_dot_s(cfg, TPU_DTYPE_BF16, 128, 128, 128),
		    tpu_model_dot_s(cfg, TPU_DTYPE_BF16, 64, 64, 64));
	EXPECT_NEAR(2.0 * 128 * 128 * 128 / cfg->peak_flops_bf16,
		    tpu_model_dot_s(cfg, TPU_DTYPE_BF16, 128, 100, 1));
	EXPECT_NEAR(2.0 * 200 * 256 * 384 / cfg->peak_flops_bf16,
		    tpu_model_dot_s(cfg, TPU_DTYPE_BF16, 200, 130, 300));
	ASSERT_EQ(0, tpu_model_matmul(cfg, &d, &r128));
	d.bm = d.bk = d.bn = 64;
	ASSERT_EQ(0, tpu_model_matmul(cfg, &d, &r64));
	EXPECT_NEAR(8 * r128.stats.mxu_busy_s, r64.stats.mxu_busy_s);
	EXPECT_EQ(r128.stats.flops, r64.stats.flops);
	EXPECT_GT(r64.stats.time_s, r128.stats.time_s);
}

static int matmul(struct tpu_config *cfg, uint64_t mkn, uint64_t bm,
		  uint64_t bk, uint64_t bn, enum tpu_dtype t,
		  struct tpu_matmul_result *r)
{
	struct tpu_matmul_desc d = {
		.m = mkn, .k = mkn, .n = mkn, .bm = bm, .bk = bk, .bn = bn,
		.in_dtype = t, .out_dtype = t,
	};

	return tpu_model_matmul(cfg, &d, r);
}

TEST_F(model, int8_twice_as_fast_as_bf16_when_compute_bound)
{
	struct tpu_matmul_result bf, i8;

	ASSERT_EQ(0, matmul(&self->cfg, 8192, 512, 1024, 1024,
			    TPU_DTYPE_BF16, &bf));
	ASSERT_EQ(0, matmul(&self->cfg, 8192, 512, 1024, 1024,
			    TPU_DTYPE_INT8, &i8));
	EXPECT_NEAR(2 * i8.stats.mxu_busy_s, bf.stats.mxu_busy_s);
	EXPECT_GT(bf.stats.time_s / i8.stats.time_s, 1.8);
	/* Without fixed costs, every term halves: exactly twice as fast. */
	self->cfg.step_cost_ns = 0;
	self->cfg.launch_cost_ns = 0;
	ASSERT_EQ(0, matmul(&self->cfg, 8192, 512, 1024, 1024,
			    TPU_DTYPE_BF16, &bf));
	ASSERT_EQ(0, matmul(&self->cfg, 8192, 512, 1024, 1024,
			    TPU_DTYPE_INT8, &i8));
	EXPECT_NEAR(2 * i8.stats.time_s, bf.stats.time_s);
}

/* The guide: (m*k*n/bn + k*n*m/bm + m*n) * itemsize when k has > 1 step. */
TEST_F(model, fetch_skipping_matches_the_guide_formula)
{
	struct tpu_matmul_desc d = {
		.m = 512, .k = 1024, .n = 768, .bm = 128, .bk = 256, .bn = 256,
		.in_dtype = TPU_DTYPE_BF16, .out_dtype = TPU_DTYPE_BF16,
	};
	struct tpu_matmul_result r;
	uint64_t steps = 4 * 3 * 4;

	for (int t = 0; t < 2; t++) {
		d.transpose_rhs = t;
		ASSERT_EQ(0, tpu_model_matmul(&self->cfg, &d, &r));
		EXPECT_EQ((d.m * d.k * d.n / d.bn + d.k * d.n * d.m / d.bm) * 2,
			  r.stats.hbm_bytes_in);
		EXPECT_EQ(d.m * d.n * 2, r.stats.hbm_bytes_out);
		EXPECT_EQ(steps, r.stats.steps);
		EXPECT_EQ(2 * steps, r.blocks_fetched);
		EXPECT_EQ(0, r.blocks_skipped);
		EXPECT_EQ(4 * 3, r.blocks_written);
		EXPECT_EQ(2 * d.m * d.n * d.k, r.stats.flops);
	}
	/* One k step: x's index (i, 0) repeats along j and is skipped. */
	d.bk = d.k;
	ASSERT_EQ(0, tpu_model_matmul(&self->cfg, &d, &r));
	EXPECT_EQ(4 * 2, r.blocks_skipped);
	EXPECT_EQ((d.m * d.k + d.k * d.n * d.m / d.bm) * 2,
		  r.stats.hbm_bytes_in);
}

TEST_F(model, edge_blocks_move_only_what_is_in_bounds)
{
	struct tpu_matmul_desc d = {
		.m = 1000, .k = 300, .n = 200, .bm = 256, .bk = 128, .bn = 128,
		.in_dtype = TPU_DTYPE_F32, .out_dtype = TPU_DTYPE_F32,
	};
	struct tpu_matmul_result r;

	ASSERT_EQ(0, tpu_model_matmul(&self->cfg, &d, &r));
	EXPECT_EQ(4, r.grid[0]);
	EXPECT_EQ(2, r.grid[1]);
	EXPECT_EQ(3, r.grid[2]);
	/* x is read once per j, y once per i, z written once */
	EXPECT_EQ((d.m * d.k * 2 + d.k * d.n * 4) * 4, r.stats.hbm_bytes_in);
	EXPECT_EQ(d.m * d.n * 4, r.stats.hbm_bytes_out);
	EXPECT_EQ(2 * d.m * d.n * d.k, r.stats.flops);
	/* but the MXU works on whole blocks */
	EXPECT_NEAR(24 * tpu_model_dot_s(&self->cfg, TPU_DTYPE_F32, 256, 128, 128),
		    r.stats.mxu_busy_s);
}

TEST_F(model, parallel_dims_split_across_cores)
{
	struct tpu_matmul_result one, two;
	double launch = self->cfg.launch_cost_ns * 1e-9, ratio;
	uint64_t b, e, sizes[3];

	for (unsigned int c = 0; c < 3; c++) {
		tpu_model_core_range(4, 3, c, &b, &e);
		sizes[c] = e - b;
	}
	EXPECT_EQ(2, sizes[0]);
	EXPECT_EQ(1, sizes[1]);
	EXPECT_EQ(1, sizes[2]);

	ASSERT_EQ(0, matmul(&self->cfg, 4096, 512, 1024, 1024,
			    TPU_DTYPE_BF16, &one));
	self->cfg.cores = 2;
	ASSERT_EQ(0, matmul(&self->cfg, 4096, 512, 1024, 1024,
			    TPU_DTYPE_BF16, &two));
	EXPECT_EQ(2, two.cores);
	EXPECT_EQ(one.stats.steps, two.stats.steps);
	EXPECT_EQ(one.stats.flops, two.stats.flops);
	EXPECT_NEAR(one.stats.mxu_busy_s, two.stats.mxu_busy_s);
	/* Each core does half the work, once the launch is set aside. */
	ratio = (one.stats.time_s - launch) / (two.stats.time_s - launch);

	EXPECT_GT(ratio, 1.95);
	EXPECT_LT(ratio, 2.05);
}

TEST_F(model, bad_descriptions_rejected)
{
	struct tpu_matmul_desc d = {
		.m = 128, .k = 128, .n = 128, .bm = 128, .bk = 0, .bn = 128,
		.in_dtype = TPU_DTYPE_BF16, .out_dtype = TPU_DTYPE_BF16,
	};
	struct tpu_matmul_result r;

	EXPECT_EQ(-EINVAL, tpu_model_matmul(&self->cfg, &d, &r));
	d.bk = 128;
	d.cores = 2;	/* the config has one */
	EXPECT_EQ(-EINVAL, tpu_model_matmul(&self->cfg, &d, &r));
	d.cores = 0;
	d.in_dtype = TPU_DTYPE_INT8;	/* 8-bit in, bf16 out: no routine */
	EXPECT_EQ(-EINVAL, tpu_model_matmul(&self->cfg, &d, &r));
	d.out_dtype = TPU_DTYPE_INT32;
	EXPECT_EQ(0, tpu_model_matmul(&self->cfg, &d, &r));
}

TEST_F(model, fused_transpose_and_activation_cost_nothing)
{
	struct tpu_matmul_desc d = {
		.m = 4096, .k = 4096, .n = 4096, .bm = 512, .bk = 1024, .bn = 1024,
		.in_dtype = TPU_DTYPE_BF16, .out_dtype = TPU_DTYPE_BF16,
	};
	struct tpu_matmul_result plain, fused;

	ASSERT_EQ(0, tpu_model_matmul(&self->cfg, &d, &plain));
	d.transpose_rhs = true;
	d.activation = true;
	ASSERT_EQ(0, tpu_model_matmul(&self->cfg, &d, &fused));
	EXPECT_NEAR(plain.stats.time_s, fused.stats.time_s);
}

TEST_F(model, vmem_need_counts_double_buffers_and_scratch)
{
	struct tpu_matmul_desc d = {
		.m = 4096, .k = 4096, .n = 4096, .bm = 512, .bk = 1024, .bn = 1024,
		.in_dtype = TPU_DTYPE_BF16, .out_dtype = TPU_DTYPE_BF16,
	};
	struct tpu_matmul_result r;

	/* 2 * (1 + 2 + 1) MiB of bf16 blocks + a 2 MiB f32 accumulator */
	EXPECT_EQ(10 * MIB, tpu_model_matmul_vmem(&d));
	ASSERT_EQ(0, tpu_model_matmul_best(&self->cfg, &d, 16 * MIB, &r));
	EXPECT_LE(tpu_model_matmul_vmem(&d), 16 * MIB);
	EXPECT_EQ(r.vmem_bytes, tpu_model_matmul_vmem(&d));
	EXPECT_EQ(-ENOSPC, tpu_model_matmul_best(&self->cfg, &d, 1024, &r));
}

/*
 * The engine's way, spelled out: evaluate each operand's index map at every
 * step, fetch an input whose block index changed, write an output back when
 * the next step's index differs or the core's run ends, and feed the step
 * API. tpu_model_matmul must give the same figures.
 */
static void block_index(const struct tpu_matmul_desc *d, int op, uint64_t i,
			uint64_t j, uint64_t k, uint64_t idx[2])
{
	uint64_t maps[3][2] = {
		{ i, k },					/* x */
		{ d->transpose_rhs ? j : k, d->transpose_rhs ? k : j },	/* y */
		{ i, j },					/* z */
	};

	idx[0] = maps[op][0];
	idx[1] = maps[op][1];
}

static uint64_t extent(uint64_t idx, uint64_t b, uint64_t dim)
{
	return idx * b + b > dim ? dim - idx * b : b;
}

/* In-bounds bytes of operand @op's block @idx. */
static uint64_t block_bytes(const struct tpu_matmul_desc *d, int op,
			    const uint64_t idx[2])
{
	uint64_t rows[3] = { d->m, d->transpose_rhs ? d->n : d->k, d->m };
	uint64_t cols[3] = { d->k, d->transpose_rhs ? d->k : d->n, d->n };
	uint64_t br[3] = { d->bm, d->transpose_rhs ? d->bn : d->bk, d->bm };
	uint64_t bc[3] = { d->bk, d->transpose_rhs ? d->bk : d->bn, d->bn };
	enum tpu_dtype t = op == 2 ? d->out_dtype : d->in_dtype;

	return extent(idx[0], br[op], rows[op]) *
	       extent(idx[1], bc[op], cols[op]) * tpu_dtype_size(t);
}

static void reference_core(const struct tpu_config *cfg,
			   const struct tpu_matmul_desc *d, uint64_t begin,
			   uint64_t end, struct tpu_model_stats *st)
{
	uint64_t gn = (d->n + d->bn - 1) / d->bn, gk = (d->k + d->bk - 1) / d->bk;
	uint64_t steps = (end - begin) * gk, prev[2][2];
	struct tpu_model m;

	tpu_model_begin(&m, cfg);
	for (uint64_t s = 0; s < steps; s++) {
		uint64_t p = begin + s / gk, kk = s % gk, idx[2], next[2];
		uint64_t fetch = 0, wb = 0, i = p / gn, j = p % gn;
		uint64_t np = begin + (s + 1) / gk, nk = (s + 1) % gk;

		for (int op = 0; op < 2; op++) {
			block_index(d, op, i, j, kk, idx);
			if (s == 0 || idx[0] != prev[op][0] || idx[1] != prev[op][1])
				fetch += block_bytes(d, op, idx);
			prev[op][0] = idx[0];
			prev[op][1] = idx[1];
		}
		block_index(d, 2, i, j, kk, idx);
		block_index(d, 2, np / gn, np % gn, nk, next);
		if (s + 1 == steps || idx[0] != next[0] || idx[1] != next[1])
			wb = block_bytes(d, 2, idx);
		tpu_model_step(&m, fetch,
			       tpu_model_dot_s(cfg, d->in_dtype, d->bm, d->bn, d->bk),
			       2 * extent(i, d->bm, d->m) * extent(j, d->bn, d->n) *
			       extent(kk, d->bk, d->k), wb);
	}
	tpu_model_end(&m, st);
}

TEST_F(model, matmul_walk_equals_the_step_api_driven_per_step)
{
	static const uint64_t shapes[][6] = {
		{ 1024, 1024, 1024, 128, 128, 128 },
		{ 1000, 300, 200, 256, 128, 128 },
		{ 384, 2048, 640, 128, 512, 256 },
		{ 512, 512, 512, 512, 512, 512 },
	};

	self->cfg.cores = 3;
	for (size_t t = 0; t < sizeof(shapes) / sizeof(*shapes); t++)
		for (unsigned int v = 0; v < 6; v++) {
			const uint64_t *s = shapes[t];
			struct tpu_matmul_desc d = {
				.m = s[0], .k = s[1], .n = s[2],
				.bm = s[3], .bk = s[4], .bn = s[5],
				.in_dtype = v & 1 ? TPU_DTYPE_F32 : TPU_DTYPE_INT8,
				.out_dtype = v & 1 ? TPU_DTYPE_BF16 : TPU_DTYPE_INT32,
				.transpose_rhs = v & 2, .cores = 1 + v / 2,
			};
			struct tpu_model_stats per_core[3], want;
			struct tpu_matmul_result got;
			uint64_t units = ((d.m + d.bm - 1) / d.bm) *
					 ((d.n + d.bn - 1) / d.bn), b, e;

			for (unsigned int c = 0; c < d.cores; c++) {
				tpu_model_core_range(units, d.cores, c, &b, &e);
				reference_core(&self->cfg, &d, b, e, &per_core[c]);
			}
			tpu_model_job(&self->cfg, per_core, d.cores, &want);
			ASSERT_EQ(0, tpu_model_matmul(&self->cfg, &d, &got));
			EXPECT_EQ(0, memcmp(&want, &got.stats, sizeof(want)))
				TH_LOG("shape %zu variant %u: %.9g s vs %.9g s",
				       t, v, want.time_s, got.stats.time_s);
		}
}

/* Every Pallas row of the published table within 15 %, blocks as published. */
TEST_F(model, calibrated_against_published_v5e)
{
	struct published_row rows[PUBLISHED_MAX_ROWS];
	char err[256];
	int n = published_load(PUBLISHED_TSV, rows, PUBLISHED_MAX_ROWS, err,
			       sizeof(err));
	int pallas = 0;

	ASSERT_GT(n, 0) TH_LOG("%s", err);
	for (int i = 0; i < n; i++) {
		struct tpu_matmul_result r;
		double e;

		if (!rows[i].bm)
			continue;	/* XLA's rows: the compiler chose blocks */
		pallas++;
		ASSERT_EQ(0, matmul(&self->cfg, rows[i].m, rows[i].bm,
				    rows[i].bk, rows[i].bn, rows[i].dtype, &r));
		e = (r.stats.time_s - rows[i].time_s) / rows[i].time_s;
		EXPECT_LE(fabs(e), CALIBRATION_TOL)
			TH_LOG("%llu^3 blocks %llu,%llu,%llu: model %g s, published %g s",
			       (unsigned long long)rows[i].m,
			       (unsigned long long)rows[i].bm,
			       (unsigned long long)rows[i].bk,
			       (unsigned long long)rows[i].bn,
			       r.stats.time_s, rows[i].time_s);
	}
	EXPECT_EQ(6, pallas);
}

TEST_HARNESS_MAIN
