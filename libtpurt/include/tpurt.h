/* SPDX-License-Identifier: MIT */
/*
 * libtpurt: the tpuemu runtime.
 *
 * Every function that can fail returns 0 or a negative errno value; a
 * readable message for the calling thread's most recent failure is then
 * available from tpurt_last_error(). errno itself is left alone.
 */
#ifndef TPURT_H
#define TPURT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tpurt_device;

/**
 * struct tpurt_device_info - identity and capabilities of a device
 *
 * Sizes are in bytes, rates per second, costs in nanoseconds. The rates and
 * costs are those of the chip the device models, not of the host.
 */
struct tpurt_device_info {
	char node[64];			/* render node path */
	char driver[32];		/* kernel driver name */
	uint32_t hw_version;		/* register ABI, major << 16 | minor */
	uint64_t hbm_size;
	uint64_t vmem_size;		/* physical VMEM per core */
	uint64_t vmem_limit;		/* default scoped VMEM limit */
	uint64_t smem_size;
	uint32_t cores;			/* TensorCores */
	uint32_t mxu_dim;		/* each MXU is mxu_dim x mxu_dim */
	uint32_t mxu_count;		/* MXUs per core */
	uint64_t peak_flops_bf16;
	uint64_t peak_flops_f32;
	uint64_t peak_ops_int8;
	uint64_t hbm_bandwidth;		/* bytes per second */
	uint64_t step_cost_ns;		/* fixed cost of one grid step */
	uint64_t launch_cost_ns;	/* fixed cost of one job */
};

/*
 * Open the device named by $TPURT_DEVICE (a render node path) or, if it is
 * unset, the first render node whose driver is "tpu".
 * Errors: -ENODEV no tpu device; -ENOENT, -EACCES opening the node.
 */
int tpurt_open(struct tpurt_device **devp);

/* Open the render node at @path; -ENODEV if its driver is not "tpu". */
int tpurt_open_path(const char *path, struct tpurt_device **devp);

/* Close a device opened by tpurt_open(); NULL is ignored. */
void tpurt_close(struct tpurt_device *dev);

/* The device's file descriptor, for the raw uAPI of uapi/tpu_drm.h. */
int tpurt_device_fd(const struct tpurt_device *dev);

/* Fill @info with the device's identity and capabilities. */
int tpurt_device_info(struct tpurt_device *dev, struct tpurt_device_info *info);

/*
 * The message of the calling thread's most recent failed call, or "" if
 * none failed yet. Valid until the thread's next failing call.
 */
const char *tpurt_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* TPURT_H */
