/* SPDX-License-Identifier: MIT */
/*
 * Device configuration: memory sizes, core count and the timing model's
 * parameters. Defaults describe a TPU v5e (one TensorCore, four 128x128
 * MXUs, 197 TFLOP/s bf16, 819 GB/s HBM); the QEMU device exposes each field
 * as a property and reports it through the capability registers.
 */
#ifndef TPU_CONFIG_H
#define TPU_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define TPU_DEFAULT_HBM_SIZE		(1ull << 30)
#define TPU_DEFAULT_VMEM_SIZE		(128ull << 20)
#define TPU_DEFAULT_VMEM_LIMIT		(16ull << 20)	/* Pallas's scoped default */
#define TPU_DEFAULT_SMEM_SIZE		(1ull << 20)
#define TPU_DEFAULT_CORES		1
#define TPU_DEFAULT_MXU_DIM		128
#define TPU_DEFAULT_MXU_COUNT		4
#define TPU_DEFAULT_PEAK_FLOPS_BF16	197000000000000ull
#define TPU_DEFAULT_PEAK_FLOPS_F32	197000000000000ull
#define TPU_DEFAULT_PEAK_OPS_INT8	394000000000000ull
#define TPU_DEFAULT_HBM_BANDWIDTH	819000000000ull
/*
 * Calibrated against the published v5e matmul table (tools/v5e-published.tsv)
 * with `make model-table`. The step cost is the fixed work of one grid step
 * beyond its MXU and DMA time (scalar-core loop, DMA issue and semaphore
 * waits): 128-blocks are DMA-bound at 80 ns a step and take ~355 ns. The
 * launch cost is the per-call time the published means include (host
 * dispatch, kernel launch): a two-step 1024^3 call takes 127 us, of which
 * the pipeline is ~17 us.
 */
#define TPU_DEFAULT_STEP_COST_NS	275
#define TPU_DEFAULT_LAUNCH_COST_NS	110000

#define TPU_MIN_HBM_SIZE		(1ull << 20)
#define TPU_MAX_CORES			16

struct tpu_config {
	uint64_t hbm_size;
	uint64_t vmem_size;
	uint64_t vmem_limit;
	uint64_t smem_size;
	uint32_t cores;
	uint32_t mxu_dim;
	uint32_t mxu_count;
	uint64_t peak_flops_bf16;
	uint64_t peak_flops_f32;
	uint64_t peak_ops_int8;
	uint64_t hbm_bandwidth;
	uint64_t step_cost_ns;
	uint64_t launch_cost_ns;
};

void tpu_config_defaults(struct tpu_config *cfg);

/*
 * Check that @cfg describes a device that can exist. On failure returns -1
 * and writes a message naming the offending field into @err.
 */
int tpu_config_check(const struct tpu_config *cfg, char *err, size_t errlen);

/* The value of capability register TPU_CAP_<index>, or 0 past the last one. */
uint64_t tpu_config_cap(const struct tpu_config *cfg, unsigned int index);

#endif /* TPU_CONFIG_H */
