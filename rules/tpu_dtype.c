// SPDX-License-Identifier: MIT
#include "tpu_dtype.h"

unsigned int tpu_dtype_size(unsigned int dtype)
{
	static const unsigned int size[TPU_DTYPE_COUNT] = {
		[TPU_DTYPE_F32] = 4, [TPU_DTYPE_BF16] = 2,
		[TPU_DTYPE_INT8] = 1, [TPU_DTYPE_UINT8] = 1,
		[TPU_DTYPE_INT32] = 4, [TPU_DTYPE_BOOL] = 1,
		[TPU_DTYPE_UINT32] = 4,
	};

	return dtype < TPU_DTYPE_COUNT ? size[dtype] : 0;
}

bool tpu_dtype_is_8bit(unsigned int dtype)
{
	return dtype == TPU_DTYPE_INT8 || dtype == TPU_DTYPE_UINT8;
}

bool tpu_dtype_is_float(unsigned int dtype)
{
	return dtype == TPU_DTYPE_F32 || dtype == TPU_DTYPE_BF16;
}

const char *tpu_dtype_name(unsigned int dtype)
{
	static const char *const name[TPU_DTYPE_COUNT] = {
		[TPU_DTYPE_F32] = "float32", [TPU_DTYPE_BF16] = "bfloat16",
		[TPU_DTYPE_INT8] = "int8", [TPU_DTYPE_UINT8] = "uint8",
		[TPU_DTYPE_INT32] = "int32", [TPU_DTYPE_BOOL] = "bool",
		[TPU_DTYPE_UINT32] = "uint32",
	};

	return dtype < TPU_DTYPE_COUNT ? name[dtype] : "?";
}

bool tpu_dtype_is_int(unsigned int dtype)
{
	return dtype == TPU_DTYPE_INT8 || dtype == TPU_DTYPE_UINT8 ||
	       dtype == TPU_DTYPE_INT32 || dtype == TPU_DTYPE_BOOL ||
	       dtype == TPU_DTYPE_UINT32;
}

bool tpu_dtype_is_unsigned(unsigned int dtype)
{
	return dtype == TPU_DTYPE_UINT8 || dtype == TPU_DTYPE_UINT32 ||
	       dtype == TPU_DTYPE_BOOL;
}
