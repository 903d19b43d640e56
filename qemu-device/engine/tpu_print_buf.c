// SPDX-License-Identifier: MIT
#include "tpu_print_buf.h"

#include <endian.h>
#include <string.h>

#include "tpu_dtype.h"
#include "tpu_elem.h"

void tpu_print_buf_open(struct tpu_print_buf *b, uint8_t *base, uint64_t size)
{
	b->base = base;
	b->room = size - sizeof(struct tpu_print_header);
	atomic_init(&b->used, 0);
	atomic_init(&b->records, 0);
	atomic_init(&b->dropped, 0);
	/* no magic until the job ends: a reader never takes partial prints */
	memset(base, 0, sizeof(struct tpu_print_header));
}

uint8_t *tpu_print_buf_claim(struct tpu_print_buf *b, uint64_t size)
{
	uint64_t at = atomic_load_explicit(&b->used, memory_order_relaxed);

	do {
		if (size > b->room || at > b->room - size) {
			atomic_fetch_add_explicit(&b->dropped, 1, memory_order_relaxed);
			return NULL;
		}
	} while (!atomic_compare_exchange_weak_explicit(&b->used, &at, at + size,
							memory_order_relaxed,
							memory_order_relaxed));
	atomic_fetch_add_explicit(&b->records, 1, memory_order_relaxed);
	return b->base + sizeof(struct tpu_print_header) + at;
}

/* A ref's elements, row-major: integers as int64, floats as binary64. */
static void store_elems(const struct tpu_ref2d *r, int64_t *out)
{
	bool is_float = tpu_dtype_is_float(r->dtype);

	for (int64_t row = 0; row < r->rows; row++, out += r->cols) {
		if (is_float)
			tpu_elem_load(r, row, (double *)(void *)out, r->cols);
		else
			tpu_elem_load_i64(r, row, out, r->cols);
		for (int64_t c = 0; c < r->cols; c++)
			out[c] = (int64_t)htole64((uint64_t)out[c]);
	}
}

void tpu_print_buf_record(struct tpu_print_buf *b, uint64_t step,
			  unsigned int op, uint32_t fmt, unsigned int core,
			  const int64_t *scalars, unsigned int nscalars,
			  const struct tpu_ref2d *refs, unsigned int nrefs)
{
	struct tpu_print_record h = {
		.op = htole32(op), .step = htole64(step), .fmt = htole32(fmt),
		.core = htole16((uint16_t)core), .num_scalars = (uint8_t)nscalars,
		.num_refs = (uint8_t)nrefs,
	};
	uint64_t nvalues = nscalars, size;
	int64_t *v;
	uint8_t *p;

	for (unsigned int k = 0; k < nrefs; k++) {
		uint64_t elems = (uint64_t)refs[k].rows * (uint64_t)refs[k].cols;

		h.ref_rows[k] = htole32((uint32_t)refs[k].rows);
		h.ref_cols[k] = htole32((uint32_t)refs[k].cols);
		h.ref_dtype[k] = refs[k].dtype;
		nvalues += elems;
	}
	size = sizeof(h) + nvalues * sizeof(int64_t);
	h.size = htole32((uint32_t)size);
	p = size <= UINT32_MAX ? tpu_print_buf_claim(b, size) : NULL;
	if (!p) {
		if (size > UINT32_MAX)
			atomic_fetch_add_explicit(&b->dropped, 1, memory_order_relaxed);
		return;
	}
	memcpy(p, &h, sizeof(h));
	v = (int64_t *)(void *)(p + sizeof(h));
	for (unsigned int k = 0; k < nscalars; k++)
		*v++ = (int64_t)htole64((uint64_t)scalars[k]);
	for (unsigned int k = 0; k < nrefs; k++) {
		store_elems(&refs[k], v);
		v += refs[k].rows * refs[k].cols;
	}
}

void tpu_print_buf_close(struct tpu_print_buf *b)
{
	struct tpu_print_header h = {
		.magic = htole32(TPU_PRINT_MAGIC),
		.record_size = htole32(sizeof(struct tpu_print_record)),
		.records = htole64(atomic_load(&b->records)),
		.dropped = htole64(atomic_load(&b->dropped)),
		.bytes = htole64(atomic_load(&b->used)),
	};

	memcpy(b->base, &h, sizeof(h));
}
