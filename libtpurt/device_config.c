// SPDX-License-Identifier: MIT
/*
 * The device's info as a struct tpu_config, the form the device's rules
 * (rules/) take: the job decoder pallas_call runs before it submits and
 * the timing model the analysis uses.
 */
#include "tpurt_private.h"

void tpurt_device_config(const struct tpurt_device_info *info,
			 struct tpu_config *cfg)
{
	*cfg = (struct tpu_config){
		.hbm_size = info->hbm_size,
		.vmem_size = info->vmem_size,
		.vmem_limit = info->vmem_limit,
		.smem_size = info->smem_size,
		.cores = info->cores,
		.mxu_dim = info->mxu_dim,
		.mxu_count = info->mxu_count,
		.peak_flops_bf16 = info->peak_flops_bf16,
		.peak_flops_f32 = info->peak_flops_f32,
		.peak_ops_int8 = info->peak_ops_int8,
		.hbm_bandwidth = info->hbm_bandwidth,
		.step_cost_ns = info->step_cost_ns,
		.launch_cost_ns = info->launch_cost_ns,
	};
}
