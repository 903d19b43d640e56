/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * tpu DRM driver userspace interface.
 *
 * The driver exposes the emulated tpu-mxu accelerator as a DRM render node
 * (/dev/dri/renderD*, driver name "tpu").
 */
#ifndef TPU_DRM_H
#define TPU_DRM_H

#include "drm.h"

#if defined(__cplusplus)
extern "C" {
#endif

#define DRM_TPU_GET_PARAM		0x00

#define DRM_IOCTL_TPU_GET_PARAM \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TPU_GET_PARAM, struct drm_tpu_get_param)

/*
 * Parameters for DRM_IOCTL_TPU_GET_PARAM. Sizes are in bytes, rates per
 * second, costs in nanoseconds. The rates and costs parameterise the device's
 * timing model of a TPU-like chip; they say nothing about the host's speed.
 */
#define DRM_TPU_PARAM_HW_VERSION	0	/* major << 16 | minor */
#define DRM_TPU_PARAM_HBM_SIZE		1	/* device memory */
#define DRM_TPU_PARAM_VMEM_SIZE		2	/* physical VMEM per core */
#define DRM_TPU_PARAM_VMEM_LIMIT	3	/* default scoped VMEM limit */
#define DRM_TPU_PARAM_SMEM_SIZE		4	/* SMEM per core */
#define DRM_TPU_PARAM_CORES		5	/* TensorCores */
#define DRM_TPU_PARAM_MXU_DIM		6	/* MXU is MXU_DIM x MXU_DIM */
#define DRM_TPU_PARAM_MXU_COUNT		7	/* MXUs per core */
#define DRM_TPU_PARAM_PEAK_FLOPS_BF16	8	/* FLOP/s with bf16 inputs */
#define DRM_TPU_PARAM_PEAK_FLOPS_F32	9	/* FLOP/s with f32 inputs */
#define DRM_TPU_PARAM_PEAK_OPS_INT8	10	/* OP/s with int8 inputs */
#define DRM_TPU_PARAM_HBM_BANDWIDTH	11	/* HBM bytes per second */
#define DRM_TPU_PARAM_STEP_COST_NS	12	/* fixed cost of a grid step */
#define DRM_TPU_PARAM_LAUNCH_COST_NS	13	/* fixed cost of a job */
#define DRM_TPU_PARAM_COUNT		14

/**
 * struct drm_tpu_get_param - query a device parameter
 *
 * Returns -EINVAL for an unknown @param or a non-zero @pad.
 */
struct drm_tpu_get_param {
	/** @param: in, one of DRM_TPU_PARAM_*. */
	__u32 param;
	/** @pad: must be zero. */
	__u32 pad;
	/** @value: out, the parameter's value. */
	__u64 value;
};

#if defined(__cplusplus)
}
#endif

#endif /* TPU_DRM_H */
