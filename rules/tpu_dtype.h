/* SPDX-License-Identifier: MIT */
/* The device's element types (enum tpu_dtype): sizes, names, classes. */
#ifndef TPU_DTYPE_H
#define TPU_DTYPE_H

#include <stdbool.h>

#include "tpu_job.h"

/* Bytes of one element of @dtype, 0 if unknown. */
unsigned int tpu_dtype_size(unsigned int dtype);

/* The name JAX gives @dtype ("float32", "bfloat16", ...), "?" if unknown. */
const char *tpu_dtype_name(unsigned int dtype);

/* int8 or uint8: the MXU's integer inputs, accumulated in int32. */
bool tpu_dtype_is_8bit(unsigned int dtype);

/* f32 or bf16. */
bool tpu_dtype_is_float(unsigned int dtype);

/*
 * int8, uint8, int32, uint32 or bool: the types whose elementwise integer
 * arithmetic is exact in 64-bit integers (bool holds 0 or 1).
 */
bool tpu_dtype_is_int(unsigned int dtype);

/* uint8, uint32 or bool: integers without a sign bit. */
bool tpu_dtype_is_unsigned(unsigned int dtype);

#endif /* TPU_DTYPE_H */
