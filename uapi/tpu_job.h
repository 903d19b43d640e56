/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * tpu job descriptor: the format userspace builds, the driver checks and the
 * device runs. Little-endian, fixed-size fields.
 *
 * (Work in progress: the grid-job format is being defined; only the element
 * types are fixed so far.)
 */
#ifndef TPU_JOB_H
#define TPU_JOB_H

/**
 * enum tpu_dtype - element types of arrays, blocks and scratch buffers
 * @TPU_DTYPE_F32: IEEE binary32
 * @TPU_DTYPE_BF16: bfloat16 (the high half of a binary32)
 * @TPU_DTYPE_INT8: signed 8-bit integer
 * @TPU_DTYPE_UINT8: unsigned 8-bit integer
 * @TPU_DTYPE_INT32: signed 32-bit integer
 * @TPU_DTYPE_COUNT: number of element types
 */
enum tpu_dtype {
	TPU_DTYPE_F32 = 0,
	TPU_DTYPE_BF16 = 1,
	TPU_DTYPE_INT8 = 2,
	TPU_DTYPE_UINT8 = 3,
	TPU_DTYPE_INT32 = 4,
	TPU_DTYPE_COUNT
};

#endif /* TPU_JOB_H */
