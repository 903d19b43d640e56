// SPDX-License-Identifier: MIT
/*
 * TPU_OP_GATHER: jnp.take_along_axis within a tile. Elements are moved as
 * their dtype's bytes (NaN payloads kept); the op checks keep dst apart
 * from both sources, so no index or element is read after it was written.
 */
#include <stdint.h>
#include <string.h>

#include "tpu_dtype.h"
#include "tpu_elem.h"
#include "tpu_ops_int.h"

/*
 * The fill value's bytes in dst's dtype, converted as a cast would; NaN,
 * jnp's default, is each integer type's "invalid" value as jnp's is.
 */
static void fill_bytes(const struct tpu_plan_op *op, uint8_t dtype,
		       uint8_t out[8])
{
	double f = tpu_op_imm(op->imm);
	struct tpu_ref2d r = { out, 1, 1, 1, dtype };

	if (f != f && dtype == TPU_DTYPE_INT8)
		f = INT8_MIN;
	else if (f != f && dtype == TPU_DTYPE_UINT8)
		f = UINT8_MAX;
	else if (f != f && dtype == TPU_DTYPE_INT32)
		f = INT32_MIN;		/* bool: NaN is non-zero, true */
	else if (f != f && dtype == TPU_DTYPE_UINT32)
		f = UINT32_MAX;
	memset(out, 0, 8);
	tpu_elem_store(&r, 0, &f, 1, TPU_ROUND_TRUNC);
}

int tpu_op_gather(const struct tpu_plan_op *op, const struct tpu_op_args *args,
		  struct tpu_op_fault *fault)
{
	const struct tpu_ref2d *d = &args->dst, *s = &args->src0;
	const struct tpu_ref2d *ix = &args->src1;
	size_t size = tpu_dtype_size(s->dtype);
	int64_t n = op->axis ? s->cols : s->rows;
	bool fill = op->fn == TPU_GATHER_FILL;
	uint8_t fillv[8];

	if (fill)
		fill_bytes(op, d->dtype, fillv);
	for (int64_t r = 0; r < d->rows; r++) {
		const int32_t *ip = tpu_elem_row(ix, r);
		uint8_t *dp = tpu_elem_row(d, r);

		for (int64_t c = 0; c < d->cols; c++) {
			int64_t i = ip[c];
			const uint8_t *sp;

			if (fill && i < 0 && i >= -n)
				i += n;		/* jnp normalises these */
			if (i < 0 || i >= n) {
				if (!fill) {
					*fault = (struct tpu_op_fault){
						TPU_JOB_ERR_WINDOW_OOB, r, c, ip[c] };
					return -1;
				}
				memcpy(dp + c * size, fillv, size);
				continue;
			}
			sp = op->axis ? (const uint8_t *)tpu_elem_row(s, r) + i * size :
				(const uint8_t *)tpu_elem_row(s, i) + c * size;
			memcpy(dp + c * size, sp, size);
		}
	}
	return 0;
}
