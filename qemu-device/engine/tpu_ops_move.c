// SPDX-License-Identifier: MIT
/*
 * TPU_OP_TRANSPOSE and TPU_OP_ROLL: elements moved, not computed, so they
 * are copied as their dtype's bytes (NaN payloads kept); dst is never
 * src0's ref (the op checks refuse it), so no element is read after it
 * was overwritten.
 */
#include <stdint.h>
#include <string.h>

#include "tpu_dtype.h"
#include "tpu_elem.h"
#include "tpu_ops_int.h"

/* Square tiles of this many elements a side keep both refs' lines in cache. */
#define TRANSPOSE_TILE	32

#define DEFINE_TRANSPOSE(name, type)					\
static void name(const struct tpu_ref2d *d, const struct tpu_ref2d *s)	\
{									\
	for (int64_t i0 = 0; i0 < s->rows; i0 += TRANSPOSE_TILE)	\
		for (int64_t j0 = 0; j0 < s->cols; j0 += TRANSPOSE_TILE) { \
			int64_t ie = i0 + TRANSPOSE_TILE < s->rows ?	\
				     i0 + TRANSPOSE_TILE : s->rows;	\
			int64_t je = j0 + TRANSPOSE_TILE < s->cols ?	\
				     j0 + TRANSPOSE_TILE : s->cols;	\
									\
			for (int64_t i = i0; i < ie; i++) {		\
				const type *sp = tpu_elem_row(s, i);	\
				type *dp = (type *)d->p + i;		\
									\
				for (int64_t j = j0; j < je; j++)	\
					dp[j * d->ld] = sp[j];		\
			}						\
		}							\
}

DEFINE_TRANSPOSE(transpose8, uint8_t)
DEFINE_TRANSPOSE(transpose16, uint16_t)
DEFINE_TRANSPOSE(transpose32, uint32_t)

static void op_transpose(const struct tpu_ref2d *d, const struct tpu_ref2d *s)
{
	switch (tpu_dtype_size(s->dtype)) {
	case 1:
		transpose8(d, s);
		break;
	case 2:
		transpose16(d, s);
		break;
	default:
		transpose32(d, s);
		break;
	}
}

/* @shift as a rotation in [0, @n). */
static int64_t rotation(int64_t shift, int64_t n)
{
	int64_t r = shift % n;

	return r < 0 ? r + n : r;
}

/* jnp.roll: element i along the axis moves to (i + shift) mod n. */
static void op_roll(const struct tpu_plan_op *op, const struct tpu_ref2d *d,
		    const struct tpu_ref2d *s, int64_t shift)
{
	size_t size = tpu_dtype_size(s->dtype);

	if (op->axis == 0) {
		int64_t r = rotation(shift, s->rows);

		for (int64_t i = 0; i < s->rows; i++)
			memcpy(tpu_elem_row(d, (i + r) % s->rows),
			       tpu_elem_row(s, i), (size_t)s->cols * size);
		return;
	}
	for (int64_t i = 0; i < s->rows; i++) {
		int64_t r = rotation(shift, s->cols);
		const uint8_t *sp = tpu_elem_row(s, i);
		uint8_t *dp = tpu_elem_row(d, i);

		memcpy(dp + r * size, sp, (size_t)(s->cols - r) * size);
		memcpy(dp, sp + (s->cols - r) * size, (size_t)r * size);
	}
}

void tpu_op_move(const struct tpu_plan_op *op, const struct tpu_op_args *args)
{
	if (op->opcode == TPU_OP_TRANSPOSE)
		op_transpose(&args->dst, &args->src0);
	else
		op_roll(op, &args->dst, &args->src0, args->scalar.i);
}
