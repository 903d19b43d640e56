// SPDX-License-Identifier: MIT
/*
 * The guide's performance model: FLOPs, bytes, arithmetic intensity, the
 * per-block bytes formula, compute- or memory-bound on the modeled chip,
 * and a block-size sweep. The time estimate and the sweep are the device's
 * own timing model (rules/tpu_model_matmul.h, the model the engine reports
 * from), run on the device's parameters: there is one model.
 */
#include <errno.h>
#include <string.h>

#include "tpu_model_matmul.h"
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

double tpurt_device_peak(const struct tpurt_device_info *info,
			 enum tpurt_dtype dtype)
{
	if (dtype == TPURT_BF16)
		return (double)info->peak_flops_bf16;
	if (tpu_dtype_is_8bit(dtype))
		return (double)info->peak_ops_int8;
	return (double)info->peak_flops_f32;
}

double tpurt_device_ridge(const struct tpurt_device_info *info,
			  enum tpurt_dtype dtype)
{
	return info->hbm_bandwidth ?
	       tpurt_device_peak(info, dtype) / (double)info->hbm_bandwidth : 0;
}

double tpurt_device_total_peak(const struct tpurt_device_info *info,
			       enum tpurt_dtype dtype)
{
	return tpurt_device_peak(info, dtype) * (double)info->cores;
}

double tpurt_model_utilization(const struct tpurt_device_info *info,
			       enum tpurt_dtype dtype, double flops,
			       double model_time_s)
{
	double peak = tpurt_device_total_peak(info, dtype);

	return model_time_s > 0 && peak > 0 ?
	       100 * flops / model_time_s / peak : 0;
}

/*
 * The timing model's matmul: @dtype inputs, accumulated in f32 (int32 for
 * 8-bit inputs), the output of the input dtype (int32 for 8-bit), as
 * tpurt_matmul() runs it.
 */
static struct tpu_matmul_desc model_desc(uint64_t m, uint64_t k, uint64_t n,
					 enum tpurt_dtype dtype)
{
	return (struct tpu_matmul_desc){
		.m = m, .k = k, .n = n,
		.in_dtype = (enum tpu_dtype)dtype,
		.out_dtype = tpu_dtype_is_8bit(dtype) ? TPU_DTYPE_INT32 :
			     (enum tpu_dtype)dtype,
	};
}

/* The device's parameters, with what the timing model divides by. */
static int model_config(const struct tpurt_device_info *info,
			enum tpurt_dtype dtype, const char *what,
			struct tpu_config *cfg)
{
	tpurt_device_config(info, cfg);
	if (!cfg->hbm_bandwidth || !tpurt_device_peak(info, dtype) ||
	    !cfg->mxu_dim || !cfg->cores)
		return tpurt_fail(-EINVAL,
				  "%s: the device reports no peak, bandwidth, MXU size or core count",
				  what);
	return 0;
}

int tpurt_matmul_analyze(const struct tpurt_device_info *info, uint64_t m,
			 uint64_t k, uint64_t n, uint64_t bm, uint64_t bk,
			 uint64_t bn, enum tpurt_dtype dtype,
			 struct tpurt_matmul_analysis *out)
{
	struct tpu_matmul_desc d = model_desc(m, k, n, dtype);
	struct tpu_matmul_result r;
	struct tpu_config cfg;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!m || !k || !n || !tpurt_dtype_size(dtype))
		return tpurt_fail(-EINVAL, "matmul analysis: zero dimension or unknown dtype");
	ret = model_config(info, dtype, "matmul analysis", &cfg);
	if (ret)
		return ret;
	d.bm = bm ? bm : m;
	d.bk = bk ? bk : k;
	d.bn = bn ? bn : n;
	if (tpu_model_matmul(&cfg, &d, &r))
		return tpurt_fail(-EINVAL,
				  "matmul analysis: the MXU has no routine for %s inputs, or the device's %u cores are more than the model knows",
				  tpurt_dtype_name(dtype), cfg.cores);
	out->flops = tpurt_matmul_flops(m, k, n);
	out->min_bytes = tpurt_matmul_min_bytes(m, k, n, dtype);
	out->intensity = (double)out->flops / (double)out->min_bytes;
	out->block_bytes = tpurt_matmul_block_bytes(m, k, n, d.bm, d.bk, d.bn, dtype);
	out->block_intensity = (double)out->flops / (double)out->block_bytes;
	out->ridge = tpurt_device_ridge(info, dtype);
	out->compute_bound = out->block_intensity >= out->ridge;
	out->vmem_bytes = r.vmem_bytes;
	out->est_time_s = r.stats.time_s;
	return 0;
}

int tpurt_matmul_choose_blocks(const struct tpurt_device_info *info,
			       uint64_t m, uint64_t k, uint64_t n,
			       enum tpurt_dtype dtype, uint64_t vmem_limit,
			       int64_t blocks[3])
{
	struct tpu_matmul_desc d = model_desc(m, k, n, dtype);
	struct tpu_matmul_result r;
	struct tpu_config cfg;
	int ret;

	blocks[0] = blocks[1] = blocks[2] = 0;
	if (!m || !k || !n || !tpurt_dtype_size(dtype))
		return tpurt_fail(-EINVAL, "matmul blocks: zero dimension or unknown dtype");
	ret = model_config(info, dtype, "matmul blocks", &cfg);
	if (ret)
		return ret;
	vmem_limit = vmem_limit ? vmem_limit : cfg.vmem_limit;
	ret = tpu_model_matmul_best(&cfg, &d, vmem_limit, &r);
	if (ret == -ENOSPC)
		return tpurt_fail(-ENOSPC,
				  "matmul blocks: no block sizes for %llu x %llu x %llu fit in %llu bytes of VMEM",
				  (unsigned long long)m, (unsigned long long)k,
				  (unsigned long long)n, (unsigned long long)vmem_limit);
	if (ret)
		return tpurt_fail(-EINVAL,
				  "matmul blocks: the MXU has no routine for %s inputs, or the device's %u cores are more than the model knows",
				  tpurt_dtype_name(dtype), cfg.cores);
	blocks[0] = (int64_t)d.bm;
	blocks[1] = (int64_t)d.bk;
	blocks[2] = (int64_t)d.bn;
	return 0;
}
