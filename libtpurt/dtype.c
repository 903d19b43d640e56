// SPDX-License-Identifier: MIT
/* Element types: sizes, NumPy names, bf16 conversion. */
#include <math.h>
#include <string.h>

#include "tpurt_private.h"

size_t tpurt_dtype_size(enum tpurt_dtype dtype)
{
	switch (dtype) {
	case TPURT_F32:
	case TPURT_INT32:
		return 4;
	case TPURT_BF16:
		return 2;
	case TPURT_INT8:
	case TPURT_UINT8:
		return 1;
	}
	return 0;
}

const char *tpurt_dtype_name(enum tpurt_dtype dtype)
{
	switch (dtype) {
	case TPURT_F32:		return "float32";
	case TPURT_BF16:	return "bfloat16";
	case TPURT_INT8:	return "int8";
	case TPURT_UINT8:	return "uint8";
	case TPURT_INT32:	return "int32";
	}
	return "unknown";
}

uint16_t tpurt_f32_to_bf16(float f)
{
	uint32_t bits;

	memcpy(&bits, &f, sizeof(bits));
	if (isnan(f))
		return (uint16_t)((bits >> 16) | 0x40);	/* stay a quiet NaN */
	/* Round to nearest, ties to even, on the 16 bits that go. */
	bits += 0x7fff + ((bits >> 16) & 1);
	return (uint16_t)(bits >> 16);
}

float tpurt_bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}
