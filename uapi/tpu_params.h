/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * tpu-mxu device parameters: the one table of the device's configuration.
 *
 * Each parameter is a property of the QEMU device (-device tpu-mxu,NAME=V),
 * a capability register (TPU_CAP_<ID> in tpu_hw.h, at TPU_REG_CAP(index)),
 * a GET_PARAM value (DRM_TPU_PARAM_<ID> in tpu_drm.h: DRM_TPU_PARAM_OF_CAP), a field of
 * the engine's struct tpu_config and of libtpurt's struct tpurt_device_info
 * and struct tpurt_sim_config. All of them follow from TPU_PARAMS below.
 *
 * TPU_PARAMS(X) calls X(ID, field, index, name, type, def, min, max, unit,
 * desc) for each parameter, in index order:
 *   ID     the suffix of TPU_CAP_ and DRM_TPU_PARAM_
 *   field  the C field name
 *   index  the capability register index: ABI, never renumbered
 *   name   the QEMU property name
 *   type   QEMU's property type: SIZE (bytes, with K/M/G suffixes), UINT32
 *          or UINT64
 *   def    the default; the defaults describe a TPU v5e (one TensorCore,
 *          four 128x128 MXUs, 197 TFLOP/s bf16, 819 GB/s HBM)
 *   min, max  the valid range, checked when the device is created
 *          (TPU_PARAM_NO_MAX: none); rules beyond a range are in desc and
 *          in rules/tpu_config.c
 *   unit   sizes in bytes, rates per second, costs in nanoseconds; the
 *          rates and costs parameterise the device's timing model of the
 *          chip, not the host's speed
 *   desc   one line
 *
 * The two costs are calibrated against the published v5e matmul table
 * (tools/v5e-published.tsv) with `make model-table`. The step cost is the
 * fixed work of one grid step beyond its MXU and DMA time (scalar-core
 * loop, DMA issue and semaphore waits): 128-blocks are DMA-bound at 80 ns a
 * step and take ~355 ns. The launch cost is the per-call time the published
 * means include (host dispatch, kernel launch): a two-step 1024^3 call takes
 * 127 us, of which the pipeline is ~17 us.
 */
#ifndef TPU_PARAMS_H
#define TPU_PARAMS_H

#define TPU_PARAM_NO_MAX	(~0ull)
#define TPU_MIN_HBM_SIZE	(1ull << 20)
#define TPU_MAX_CORES		16

#define TPU_PARAMS(X) \
	X(HBM_SIZE, hbm_size, 0, "hbm-size", SIZE, 1ull << 30, \
	  TPU_MIN_HBM_SIZE, TPU_PARAM_NO_MAX, "bytes", \
	  "HBM, the device memory (BAR2); a power of two") \
	X(VMEM_SIZE, vmem_size, 1, "vmem-size", SIZE, 128ull << 20, \
	  1, TPU_PARAM_NO_MAX, "bytes", "physical VMEM per core") \
	X(VMEM_LIMIT, vmem_limit, 2, "vmem-limit", SIZE, 16ull << 20, \
	  1, TPU_PARAM_NO_MAX, "bytes", \
	  "default scoped VMEM limit of a job (Pallas's); at most vmem-size") \
	X(SMEM_SIZE, smem_size, 3, "smem-size", SIZE, 1ull << 20, \
	  1, TPU_PARAM_NO_MAX, "bytes", "SMEM per core") \
	X(CORES, cores, 4, "cores", UINT32, 1, \
	  1, TPU_MAX_CORES, "cores", \
	  "TensorCores, each run by a host worker thread") \
	X(MXU_DIM, mxu_dim, 5, "mxu-dim", UINT32, 128, \
	  1, TPU_PARAM_NO_MAX, "elements", "each MXU is mxu-dim x mxu-dim") \
	X(MXU_COUNT, mxu_count, 6, "mxu-count", UINT32, 4, \
	  1, TPU_PARAM_NO_MAX, "MXUs", "matrix units per core") \
	X(PEAK_FLOPS_BF16, peak_flops_bf16, 7, "peak-flops-bf16", UINT64, \
	  197000000000000ull, 1, TPU_PARAM_NO_MAX, "FLOP/s", \
	  "peak rate with bf16 inputs") \
	X(PEAK_FLOPS_F32, peak_flops_f32, 8, "peak-flops-f32", UINT64, \
	  197000000000000ull, 1, TPU_PARAM_NO_MAX, "FLOP/s", \
	  "peak rate with f32 inputs") \
	X(PEAK_OPS_INT8, peak_ops_int8, 9, "peak-ops-int8", UINT64, \
	  394000000000000ull, 1, TPU_PARAM_NO_MAX, "OP/s", \
	  "peak rate with int8 inputs") \
	X(HBM_BANDWIDTH, hbm_bandwidth, 10, "hbm-bandwidth", UINT64, \
	  819000000000ull, 1, TPU_PARAM_NO_MAX, "bytes/s", "HBM bandwidth") \
	X(STEP_COST_NS, step_cost_ns, 11, "step-cost-ns", UINT64, 275, \
	  0, TPU_PARAM_NO_MAX, "ns", "fixed cost of a grid step") \
	X(LAUNCH_COST_NS, launch_cost_ns, 12, "launch-cost-ns", UINT64, 110000, \
	  0, TPU_PARAM_NO_MAX, "ns", "fixed cost of a job") \
	X(VPU_ELEMS_PER_S, vpu_elems_per_s, 13, "vpu-elems-per-s", UINT64, \
	  6144000000000ull, 1, TPU_PARAM_NO_MAX, "elements/s", \
	  "vector ALU throughput per core (an estimate: 1.5 GHz x 8 x 128 lanes x 4 slots)") \
	X(EUP_ELEMS_PER_S, eup_elems_per_s, 14, "eup-elems-per-s", UINT64, \
	  1536000000000ull, 1, TPU_PARAM_NO_MAX, "elements/s", \
	  "transcendental unit throughput per core (an estimate: 1.5 GHz x 8 x 128 lanes)")

/* How many parameters the table has. */
#define TPU_PARAM_COUNT_ONE(...)	+ 1
#define TPU_PARAMS_COUNT		(0 TPU_PARAMS(TPU_PARAM_COUNT_ONE))

#endif /* TPU_PARAMS_H */
