// SPDX-License-Identifier: MIT
#include <math.h>
#include <string.h>

#include "tpu_cast.h"
#include "tpu_dtype.h"
#include "tpu_elem.h"

void *tpu_elem_row(const struct tpu_ref2d *r, int64_t row)
{
	return (uint8_t *)r->p + row * r->ld * tpu_dtype_size(r->dtype);
}

static float f32_from_bits(uint32_t b)
{
	float f;

	memcpy(&f, &b, sizeof(f));
	return f;
}

void tpu_elem_load(const struct tpu_ref2d *r, int64_t row, double *out,
		   int64_t n)
{
	const void *p = tpu_elem_row(r, row);

	if (r->dtype == TPU_DTYPE_F32) {
		for (int64_t j = 0; j < n; j++)
			out[j] = ((const float *)p)[j];
	} else if (r->dtype == TPU_DTYPE_BF16) {
		for (int64_t j = 0; j < n; j++)
			out[j] = f32_from_bits((uint32_t)((const uint16_t *)p)[j] << 16);
	} else {
		/* integers: as int64s, then widened in place */
		tpu_elem_load_i64(r, row, (int64_t *)out, n);
		for (int64_t j = 0; j < n; j++) {
			int64_t v;

			memcpy(&v, &out[j], sizeof(v));
			out[j] = (double)v;
		}
	}
}

void tpu_elem_load_i64(const struct tpu_ref2d *r, int64_t row, int64_t *out,
		       int64_t n)
{
	const void *p = tpu_elem_row(r, row);

	switch (r->dtype) {
	case TPU_DTYPE_INT8:
		for (int64_t j = 0; j < n; j++)
			out[j] = ((const int8_t *)p)[j];
		break;
	case TPU_DTYPE_UINT8:
		for (int64_t j = 0; j < n; j++)
			out[j] = ((const uint8_t *)p)[j];
		break;
	case TPU_DTYPE_BOOL:
		for (int64_t j = 0; j < n; j++)
			out[j] = ((const uint8_t *)p)[j] != 0;
		break;
	case TPU_DTYPE_UINT32:
		for (int64_t j = 0; j < n; j++)
			out[j] = ((const uint32_t *)p)[j];
		break;
	default:	/* int32: the only other integer type */
		for (int64_t j = 0; j < n; j++)
			out[j] = ((const int32_t *)p)[j];
		break;
	}
}

/* Round by @mode and saturate into [lo, hi]; NaN becomes 0. */
static int64_t to_int(double v, enum tpu_round mode, double lo, double hi)
{
	if (isnan(v))
		return 0;
	v = mode == TPU_ROUND_TRUNC ? trunc(v) : nearbyint(v);
	return (int64_t)(v < lo ? lo : v > hi ? hi : v);
}

/* A double rounded to odd as a binary32: then one more rounding is exact. */
static uint32_t f32_odd_bits(double d)
{
	float f = (float)d;
	uint32_t b;

	memcpy(&b, &f, sizeof(b));
	if (isnan(d) || (double)f == d)
		return b;
	if (isinf(f) || fabs((double)f) > fabs(d))
		b = (b & 0x80000000u) | ((b & 0x7fffffffu) - 1);	/* toward 0 */
	return b | 1;
}

uint16_t tpu_elem_bf16(double d)
{
	return tpu_bf16_round(f32_odd_bits(d));
}

double tpu_elem_from_i64(int64_t v)
{
	double d = (double)v;
	__int128 err = (__int128)v - (__int128)d;	/* d is an integer */

	return tpu_elem_sticky(d, (double)err);
}

void tpu_elem_store(const struct tpu_ref2d *r, int64_t row, const double *in,
		    int64_t n, enum tpu_round mode)
{
	void *p = tpu_elem_row(r, row);

	switch (r->dtype) {
	case TPU_DTYPE_F32:
		for (int64_t j = 0; j < n; j++)
			((float *)p)[j] = (float)in[j];
		break;
	case TPU_DTYPE_BF16:
		for (int64_t j = 0; j < n; j++)
			((uint16_t *)p)[j] = tpu_elem_bf16(in[j]);
		break;
	case TPU_DTYPE_INT8:
		for (int64_t j = 0; j < n; j++)
			((int8_t *)p)[j] = (int8_t)to_int(in[j], mode, -128, 127);
		break;
	case TPU_DTYPE_UINT8:
		for (int64_t j = 0; j < n; j++)
			((uint8_t *)p)[j] = (uint8_t)to_int(in[j], mode, 0, 255);
		break;
	case TPU_DTYPE_BOOL:
		for (int64_t j = 0; j < n; j++)
			((uint8_t *)p)[j] = in[j] != 0;
		break;
	case TPU_DTYPE_UINT32:	/* XLA's f32 -> u32: NaN and negatives 0 */
		for (int64_t j = 0; j < n; j++)
			((uint32_t *)p)[j] = (uint32_t)to_int(in[j], mode, 0,
							      UINT32_MAX);
		break;
	default:
		for (int64_t j = 0; j < n; j++)
			((int32_t *)p)[j] = (int32_t)to_int(in[j], mode, INT32_MIN,
							    INT32_MAX);
		break;
	}
}

void tpu_elem_store_i64(const struct tpu_ref2d *r, int64_t row,
			const int64_t *in, int64_t n)
{
	void *p = tpu_elem_row(r, row);

	/* integers keep the low bits (the casts through unsigned are modular) */
	switch (r->dtype) {
	case TPU_DTYPE_F32:
		for (int64_t j = 0; j < n; j++)
			((float *)p)[j] = (float)in[j];	/* rounded once */
		break;
	case TPU_DTYPE_BF16:
		for (int64_t j = 0; j < n; j++)
			((uint16_t *)p)[j] = tpu_elem_bf16(tpu_elem_from_i64(in[j]));
		break;
	case TPU_DTYPE_INT8:
	case TPU_DTYPE_UINT8:
		for (int64_t j = 0; j < n; j++)
			((uint8_t *)p)[j] = (uint8_t)in[j];
		break;
	case TPU_DTYPE_BOOL:
		for (int64_t j = 0; j < n; j++)
			((uint8_t *)p)[j] = in[j] != 0;
		break;
	default:	/* int32, uint32 */
		for (int64_t j = 0; j < n; j++)
			((uint32_t *)p)[j] = (uint32_t)in[j];
		break;
	}
}
