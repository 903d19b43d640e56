// SPDX-License-Identifier: MIT
/* Arrays: a dtype and a row-major shape over a device buffer. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt_private.h"

int tpurt_array_create(struct tpurt_device *dev, enum tpurt_dtype dtype,
		       int rank, const int64_t *shape,
		       struct tpurt_array **arrayp)
{
	struct tpurt_array *a;
	uint64_t size = 1;
	size_t item = tpurt_dtype_size(dtype);
	int i, ret;

	*arrayp = NULL;
	if (!item)
		return tpurt_fail(-EINVAL, "array: unknown dtype %d", (int)dtype);
	if (rank < 1 || rank > TPURT_MAX_RANK)
		return tpurt_fail(-EINVAL, "array: rank %d not in 1..%d", rank,
				  TPURT_MAX_RANK);
	for (i = 0; i < rank; i++) {
		if (shape[i] <= 0)
			return tpurt_fail(-EINVAL,
					  "array: dim %d is %lld, must be positive",
					  i, (long long)shape[i]);
		if ((uint64_t)shape[i] > UINT64_MAX / item / size)
			return tpurt_fail(-EOVERFLOW, "array: too many elements");
		size *= (uint64_t)shape[i];
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return tpurt_fail(-ENOMEM, "out of memory");
	ret = tpurt_buffer_create(dev, size * item, &a->buf);
	if (ret) {
		free(a);
		return ret;
	}
	a->dtype = dtype;
	a->rank = rank;
	memcpy(a->shape, shape, rank * sizeof(*shape));
	a->size = size;
	*arrayp = a;
	return 0;
}

void tpurt_array_free(struct tpurt_array *a)
{
	if (!a)
		return;
	if (!a->base)
		tpurt_buffer_free(a->buf);
	free(a);
}

/*
 * The guide's y.swapaxes(0, 1): only the logical shape changes. A view of
 * a view borrows the same base, untransposed: views never chain.
 */
int tpurt_array_transpose_view(const struct tpurt_array *a,
			       struct tpurt_array **viewp)
{
	struct tpurt_array *v;

	*viewp = NULL;
	if (a->rank != 2)
		return tpurt_fail(-EINVAL, "array: a transpose view needs rank 2, not %d",
				  a->rank);
	v = calloc(1, sizeof(*v));
	if (!v)
		return tpurt_fail(-ENOMEM, "out of memory");
	*v = *a;
	v->shape[0] = a->shape[1];
	v->shape[1] = a->shape[0];
	v->base = a->base ? a->base : a;
	v->transposed = !a->transposed;
	*viewp = v;
	return 0;
}

const struct tpurt_array *tpurt_array_physical(const struct tpurt_array *a,
					       int *transposed)
{
	*transposed = a->transposed;
	return a->base ? a->base : a;
}

int tpurt_array_is_transposed(const struct tpurt_array *a)
{
	return a->transposed;
}

enum tpurt_dtype tpurt_array_dtype(const struct tpurt_array *a)
{
	return a->dtype;
}

int tpurt_array_rank(const struct tpurt_array *a)
{
	return a->rank;
}

int64_t tpurt_array_dim(const struct tpurt_array *a, int axis)
{
	return axis >= 0 && axis < a->rank ? a->shape[axis] : 0;
}

uint64_t tpurt_array_size(const struct tpurt_array *a)
{
	return a->size;
}

uint64_t tpurt_array_nbytes(const struct tpurt_array *a)
{
	return a->size * tpurt_dtype_size(a->dtype);
}

struct tpurt_buffer *tpurt_array_buffer(const struct tpurt_array *a)
{
	return a->buf;
}

int tpurt_array_write(struct tpurt_array *a, const void *src)
{
	return tpurt_buffer_write(a->buf, 0, src, tpurt_array_nbytes(a));
}

int tpurt_array_read(const struct tpurt_array *a, void *dst)
{
	return tpurt_buffer_read(a->buf, 0, dst, tpurt_array_nbytes(a));
}

void *tpurt_array_map(struct tpurt_array *a)
{
	return tpurt_buffer_map(a->buf);
}

static double clamp(double v, double lo, double hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* One element of @dtype holding @value, in @out. */
static void encode(enum tpurt_dtype dtype, double value, void *out)
{
	switch (dtype) {
	case TPURT_F32: {
		float f = (float)value;

		memcpy(out, &f, sizeof(f));
		break;
	}
	case TPURT_BF16: {
		uint16_t h = tpurt_f32_to_bf16((float)value);

		memcpy(out, &h, sizeof(h));
		break;
	}
	case TPURT_INT8:
		*(int8_t *)out = (int8_t)clamp(nearbyint(value), -128, 127);
		break;
	case TPURT_UINT8:
		*(uint8_t *)out = (uint8_t)clamp(nearbyint(value), 0, 255);
		break;
	case TPURT_INT32: {
		int32_t v = (int32_t)clamp(nearbyint(value), INT32_MIN, INT32_MAX);

		memcpy(out, &v, sizeof(v));
		break;
	}
	case TPURT_BOOL:
		*(uint8_t *)out = value != 0;
		break;
	case TPURT_UINT32: {
		uint32_t v = (uint32_t)clamp(nearbyint(value), 0, UINT32_MAX);

		memcpy(out, &v, sizeof(v));
		break;
	}
	}
}

int tpurt_array_fill(struct tpurt_array *a, double value)
{
	size_t item = tpurt_dtype_size(a->dtype);
	uint64_t nbytes = tpurt_array_nbytes(a), done, chunk;
	uint8_t elem[4];
	uint8_t *buf;
	int ret = 0;

	if (isnan(value) && a->dtype != TPURT_F32 && a->dtype != TPURT_BF16)
		return tpurt_fail(-EINVAL, "array fill: NaN in an integer array");
	encode(a->dtype, value, elem);
	/* One pattern-filled staging chunk, copied as often as needed. */
	chunk = nbytes < (4u << 20) ? nbytes : (4u << 20);
	buf = malloc(chunk);
	if (!buf)
		return tpurt_fail(-ENOMEM, "out of memory");
	for (done = 0; done < chunk; done += item)
		memcpy(buf + done, elem, item);
	for (done = 0; done < nbytes && !ret; done += chunk) {
		uint64_t n = nbytes - done < chunk ? nbytes - done : chunk;

		ret = tpurt_buffer_write(a->buf, done, buf, n);
	}
	free(buf);
	return ret;
}
