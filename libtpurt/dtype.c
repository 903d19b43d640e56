// SPDX-License-Identifier: MIT
/* Element types: the device's (rules/tpu_dtype.h) sizes and names; bf16
 * conversion. */
#include <math.h>
#include <string.h>

#include "tpurt_private.h"

_Static_assert(TPURT_F32 == (int)TPU_DTYPE_F32, "dtype values");
_Static_assert(TPURT_BF16 == (int)TPU_DTYPE_BF16, "dtype values");
_Static_assert(TPURT_INT8 == (int)TPU_DTYPE_INT8, "dtype values");
_Static_assert(TPURT_UINT8 == (int)TPU_DTYPE_UINT8, "dtype values");
_Static_assert(TPURT_INT32 == (int)TPU_DTYPE_INT32, "dtype values");
_Static_assert(TPURT_BOOL == (int)TPU_DTYPE_BOOL, "dtype values");
_Static_assert(TPURT_UINT32 == (int)TPU_DTYPE_UINT32, "dtype values");
_Static_assert(TPURT_UINT32 + 1 == (int)TPU_DTYPE_COUNT, "every device dtype");

size_t tpurt_dtype_size(enum tpurt_dtype dtype)
{
	return tpu_dtype_size((unsigned int)dtype);
}

const char *tpurt_dtype_name(enum tpurt_dtype dtype)
{
	return tpu_dtype_size((unsigned int)dtype) ?
	       tpu_dtype_name((unsigned int)dtype) : "unknown";
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
