// SPDX-License-Identifier: MIT
#include "tpu_config.h"

#include <stdarg.h>
#include <stdio.h>

#include "tpu_hw.h"

void tpu_config_defaults(struct tpu_config *cfg)
{
	*cfg = (struct tpu_config){
		.hbm_size = TPU_DEFAULT_HBM_SIZE,
		.vmem_size = TPU_DEFAULT_VMEM_SIZE,
		.vmem_limit = TPU_DEFAULT_VMEM_LIMIT,
		.smem_size = TPU_DEFAULT_SMEM_SIZE,
		.cores = TPU_DEFAULT_CORES,
		.mxu_dim = TPU_DEFAULT_MXU_DIM,
		.mxu_count = TPU_DEFAULT_MXU_COUNT,
		.peak_flops_bf16 = TPU_DEFAULT_PEAK_FLOPS_BF16,
		.peak_flops_f32 = TPU_DEFAULT_PEAK_FLOPS_F32,
		.peak_ops_int8 = TPU_DEFAULT_PEAK_OPS_INT8,
		.hbm_bandwidth = TPU_DEFAULT_HBM_BANDWIDTH,
		.step_cost_ns = TPU_DEFAULT_STEP_COST_NS,
		.launch_cost_ns = TPU_DEFAULT_LAUNCH_COST_NS,
	};
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static int is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

int tpu_config_check(const struct tpu_config *cfg, char *err, size_t errlen)
{
	/* BAR sizes must be powers of two; the driver maps HBM through BAR2. */
	if (!is_pow2(cfg->hbm_size) || cfg->hbm_size < TPU_MIN_HBM_SIZE)
		return fail(err, errlen,
			    "hbm-size %llu: must be a power of two of at least %llu bytes",
			    (unsigned long long)cfg->hbm_size,
			    (unsigned long long)TPU_MIN_HBM_SIZE);
	if (!cfg->vmem_size)
		return fail(err, errlen, "vmem-size must not be zero");
	if (!cfg->vmem_limit || cfg->vmem_limit > cfg->vmem_size)
		return fail(err, errlen,
			    "vmem-limit %llu: must be between 1 and vmem-size (%llu)",
			    (unsigned long long)cfg->vmem_limit,
			    (unsigned long long)cfg->vmem_size);
	if (!cfg->smem_size)
		return fail(err, errlen, "smem-size must not be zero");
	if (cfg->cores < 1 || cfg->cores > TPU_MAX_CORES)
		return fail(err, errlen, "cores %u: must be between 1 and %d",
			    cfg->cores, TPU_MAX_CORES);
	if (!cfg->mxu_dim || !cfg->mxu_count)
		return fail(err, errlen, "mxu-dim and mxu-count must not be zero");
	if (!cfg->peak_flops_bf16 || !cfg->peak_flops_f32 ||
	    !cfg->peak_ops_int8 || !cfg->hbm_bandwidth)
		return fail(err, errlen,
			    "peak rates and hbm-bandwidth must not be zero");
	return 0;
}

uint64_t tpu_config_cap(const struct tpu_config *cfg, unsigned int index)
{
	switch (index) {
	case TPU_CAP_HBM_SIZE:		return cfg->hbm_size;
	case TPU_CAP_VMEM_SIZE:		return cfg->vmem_size;
	case TPU_CAP_VMEM_LIMIT:	return cfg->vmem_limit;
	case TPU_CAP_SMEM_SIZE:		return cfg->smem_size;
	case TPU_CAP_CORES:		return cfg->cores;
	case TPU_CAP_MXU_DIM:		return cfg->mxu_dim;
	case TPU_CAP_MXU_COUNT:		return cfg->mxu_count;
	case TPU_CAP_PEAK_FLOPS_BF16:	return cfg->peak_flops_bf16;
	case TPU_CAP_PEAK_FLOPS_F32:	return cfg->peak_flops_f32;
	case TPU_CAP_PEAK_OPS_INT8:	return cfg->peak_ops_int8;
	case TPU_CAP_HBM_BANDWIDTH:	return cfg->hbm_bandwidth;
	case TPU_CAP_STEP_COST_NS:	return cfg->step_cost_ns;
	case TPU_CAP_LAUNCH_COST_NS:	return cfg->launch_cost_ns;
	default:			return 0;
	}
}
