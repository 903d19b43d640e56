// SPDX-License-Identifier: MIT
#include <string.h>

#include "tpu_dtype.h"
#include "tpu_poison.h"

#define POISON_F32	0x7fc00000	/* interpret mode's NaN */
#define POISON_BF16	0x7fc0

void tpu_poison_fill(void *p, uint8_t dtype, uint64_t elems)
{
	static const int32_t i32 = INT32_MIN;
	static const uint32_t f32 = POISON_F32;

	switch (dtype) {
	case TPU_DTYPE_UINT32:
		memset(p, 0, 4 * elems);		/* uint32's minimum, as uint8's */
		break;
	case TPU_DTYPE_F32:
	case TPU_DTYPE_INT32:
		for (uint64_t i = 0; i < elems; i++)
			memcpy((uint8_t *)p + 4 * i,
			       dtype == TPU_DTYPE_F32 ? (const void *)&f32 :
			       (const void *)&i32, 4);
		break;
	case TPU_DTYPE_BF16:
		for (uint64_t i = 0; i < elems; i++)
			((uint16_t *)p)[i] = POISON_BF16;
		break;
	case TPU_DTYPE_INT8:
		memset(p, 0x80, elems);			/* -128 */
		break;
	case TPU_DTYPE_BOOL:
		memset(p, 1, elems);			/* true */
		break;
	default:
		memset(p, 0, elems);			/* uint8's minimum */
		break;
	}
}
