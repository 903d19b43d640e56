// SPDX-License-Identifier: MIT
/*
 * The guide's performance model: FLOPs, bytes, arithmetic intensity, the
 * per-block bytes formula, compute- or memory-bound on the modeled chip,
 * and a block-size sweep. The estimate follows the device's timing model
 * (qemu-device/engine/tpu_model.h) in closed form from the device's
 * parameters, because libtpurt must work with the render node alone and
 * cannot link the engine; host tests hold the two together.
 */
#include <errno.h>
#include <string.h>

#include "tpurt_private.h"

uint64_t tpurt_matmul_flops(uint64_t m, uint64_t k, uint64_t n)
{
	return 2 * m * k * n;
}

uint64_t tpurt_matmul_min_bytes(uint64_t m, uint64_t k, uint64_t n,
				enum tpurt_dtype dtype)
{
	return (m * k + k * n + m * n) * tpurt_dtype_size(dtype);
}

double tpurt_matmul_intensity(uint64_t m, uint64_t k, uint64_t n,
			      enum tpurt_dtype dtype)
{
	uint64_t bytes = tpurt_matmul_min_bytes(m, k, n, dtype);

	return bytes ? (double)tpurt_matmul_flops(m, k, n) / (double)bytes : 0;
}

uint64_t tpurt_matmul_block_bytes(uint64_t m, uint64_t k, uint64_t n,
				  uint64_t bm, uint64_t bk, uint64_t bn,
				  enum tpurt_dtype dtype)
{
	/* x is re-read once per column block, y once per row block. */
	if (!bm || !bn)
		return 0;
	return (m * k * n / bn + k * n * m / bm + m * n) * tpurt_dtype_size(dtype);
}

static int is_8bit(enum tpurt_dtype t)
{
	return t == TPURT_INT8 || t == TPURT_UINT8;
}

double tpurt_device_peak(const struct tpurt_device_info *info,
			 enum tpurt_dtype dtype)
{
	if (dtype == TPURT_BF16)
		return (double)info->peak_flops_bf16;
	if (is_8bit(dtype))
		return (double)info->peak_ops_int8;
	return (double)info->peak_flops_f32;
}

double tpurt_device_ridge(const struct tpurt_device_info *info,
			  enum tpurt_dtype dtype)
{
	return info->hbm_bandwidth ?
	       tpurt_device_peak(info, dtype) / (double)info->hbm_bandwidth : 0;
}

static uint64_t cdiv(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
	return cdiv(v, to) * to;
}

/* The accumulator and the output: int32 for 8-bit inputs. */
static size_t out_size(enum tpurt_dtype dtype)
{
	return is_8bit(dtype) ? 4 : tpurt_dtype_size(dtype);
}

static uint64_t vmem_need(uint64_t bm, uint64_t bk, uint64_t bn,
			  enum tpurt_dtype dtype)
{
	uint64_t in = tpurt_dtype_size(dtype);

	return 2 * (bm * bk * in + bk * bn * in + bm * bn * out_size(dtype)) +
	       bm * bn * 4;
}

/*
 * The timing model per core: a prologue fetch, then each step costs the
 * longer of its MXU time and the DMA overlapping it, plus a fixed cost; an
 * epilogue write-back; a launch cost per job. Blocks are averaged over the
 * grid, so edge blocks count by the bytes they really move.
 */
static double estimate(const struct tpurt_device_info *info, uint64_t m,
		       uint64_t k, uint64_t n, uint64_t bm, uint64_t bk,
		       uint64_t bn, enum tpurt_dtype dtype)
{
	uint64_t gi = cdiv(m, bm), gj = cdiv(n, bn), gk = cdiv(k, bk);
	uint64_t d = info->mxu_dim ? info->mxu_dim : 128;
	uint64_t cores = info->cores ? info->cores : 1;
	uint64_t units = cdiv(gi * gj, cores), steps = units * gk;
	double bw = (double)info->hbm_bandwidth, in = (double)tpurt_dtype_size(dtype);
	double xb = (double)(m * k) * in / (double)(gi * gk);
	double yb = (double)(k * n) * in / (double)(gk * gj);
	double zb = (double)(m * n) * (double)out_size(dtype) / (double)(gi * gj);
	double dot = 2.0 * (double)(bm > d ? bm : d) * (double)round_up(bn, d) *
		     (double)round_up(bk, d) / tpurt_device_peak(info, dtype);
	double io, step;

	/* With one k step, x's block repeats along j; y's too if one j. */
	io = gk > 1 ? xb + yb : xb / (double)gj + (gj > 1 ? yb : yb / (double)units);
	io = (io + zb / (double)gk) / bw;
	step = (io > dot ? io : dot) + (double)info->step_cost_ns * 1e-9;
	return (double)info->launch_cost_ns * 1e-9 + (xb + yb) / bw +
	       (double)steps * step + zb / bw;
}

int tpurt_matmul_analyze(const struct tpurt_device_info *info, uint64_t m,
			 uint64_t k, uint64_t n, uint64_t bm, uint64_t bk,
			 uint64_t bn, enum tpurt_dtype dtype,
			 struct tpurt_matmul_analysis *out)
{
	memset(out, 0, sizeof(*out));
	if (!m || !k || !n || !tpurt_dtype_size(dtype))
		return tpurt_fail(-EINVAL, "matmul analysis: zero dimension or unknown dtype");
	if (!info->hbm_bandwidth || !tpurt_device_peak(info, dtype))
		return tpurt_fail(-EINVAL, "matmul analysis: the device reports no peak or bandwidth");
	bm = bm ? bm : m;
	bk = bk ? bk : k;
	bn = bn ? bn : n;
	out->flops = tpurt_matmul_flops(m, k, n);
	out->min_bytes = tpurt_matmul_min_bytes(m, k, n, dtype);
	out->intensity = (double)out->flops / (double)out->min_bytes;
	out->block_bytes = tpurt_matmul_block_bytes(m, k, n, bm, bk, bn, dtype);
	out->block_intensity = (double)out->flops / (double)out->block_bytes;
	out->ridge = tpurt_device_ridge(info, dtype);
	out->compute_bound = out->block_intensity >= out->ridge;
	out->vmem_bytes = vmem_need(bm, bk, bn, dtype);
	out->est_time_s = estimate(info, m, k, n, bm, bk, bn, dtype);
	return 0;
}

#define MAX_CANDIDATES	32

/* The whole dimension, and MXU multiples that are powers of two or divide it. */
static int candidates(uint64_t dim, uint64_t unit, uint64_t *out)
{
	int n = 0;

	out[n++] = dim;
	for (uint64_t b = unit; b < dim && n < MAX_CANDIDATES; b += unit) {
		uint64_t q = b / unit;

		if (!(q & (q - 1)) || dim % b == 0)
			out[n++] = b;
	}
	return n;
}

int tpurt_matmul_choose_blocks(const struct tpurt_device_info *info,
			       uint64_t m, uint64_t k, uint64_t n,
			       enum tpurt_dtype dtype, uint64_t vmem_limit,
			       int64_t blocks[3])
{
	uint64_t cm[MAX_CANDIDATES], ck[MAX_CANDIDATES], cn[MAX_CANDIDATES];
	uint64_t unit = info->mxu_dim ? info->mxu_dim : 128;
	int nm = candidates(m, unit, cm), nk = candidates(k, unit, ck);
	int nn = candidates(n, unit, cn);
	double best = 0;

	if (!m || !k || !n || !tpurt_dtype_size(dtype) || !info->hbm_bandwidth)
		return tpurt_fail(-EINVAL, "matmul blocks: zero dimension, unknown dtype or no device model");
	vmem_limit = vmem_limit ? vmem_limit : info->vmem_limit;
	blocks[0] = blocks[1] = blocks[2] = 0;
	for (int a = 0; a < nm; a++)
		for (int b = 0; b < nk; b++)
			for (int c = 0; c < nn; c++) {
				double t;

				if (vmem_need(cm[a], ck[b], cn[c], dtype) > vmem_limit)
					continue;
				t = estimate(info, m, k, n, cm[a], ck[b], cn[c], dtype);
				if (blocks[0] && t >= best)
					continue;
				best = t;
				blocks[0] = (int64_t)cm[a];
				blocks[1] = (int64_t)ck[b];
				blocks[2] = (int64_t)cn[c];
			}
	if (!blocks[0])
		return tpurt_fail(-ENOSPC,
				  "matmul blocks: no block sizes for %llu x %llu x %llu fit in %llu bytes of VMEM",
				  (unsigned long long)m, (unsigned long long)k,
				  (unsigned long long)n, (unsigned long long)vmem_limit);
	return 0;
}
