// SPDX-License-Identifier: MIT
/*
 * pl.debug_print: a kernel's formats stay here; its jobs get a print
 * buffer (TPU_JOB_F_PRINT, one more buffer-table slot) that the device
 * fills with records of a format's number and values (uapi/tpu_print.h).
 * After the job the records are sorted into the grid's step order (a
 * step's own in the order its ops ran) and written as lines, the format's
 * {} replaced by the values, Python's str.format style.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt_private.h"

#define PRINT_BUFFER_DEFAULT	(1ull << 20)
#define PRINT_BUFFER_MIN	64

struct tpurt_print_job {
	struct tpurt_kernel_print *fmts;
	int nfmts;
	struct tpurt_buffer *buf;
	FILE *out;
};

int tpurt_print_check_format(const char *fmt, int nargs)
{
	int fields = 0;

	if (!fmt)
		return tpurt_fail(-EINVAL, "kernel: debug_print: no format");
	for (const char *p = fmt; *p; p++) {
		if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
			p++;
		} else if (p[0] == '{' && p[1] == '}') {
			fields++;
			p++;
		} else if (*p == '{' || *p == '}') {
			return tpurt_fail(-EINVAL, "kernel: debug_print: format \"%s\": only {} placeholders (and {{ }} for braces), not '%.8s'",
					  fmt, p);
		}
	}
	if (fields != nargs)
		return tpurt_fail(-EINVAL, "kernel: debug_print: format \"%s\" has %d {} placeholder%s for %d argument%s",
				  fmt, fields, fields == 1 ? "" : "s", nargs,
				  nargs == 1 ? "" : "s");
	return 0;
}

void tpurt_device_set_print_stream(struct tpurt_device *dev, FILE *out)
{
	dev->print_out = out;
}

int tpurt_device_set_print_buffer(struct tpurt_device *dev, uint64_t bytes)
{
	if (bytes && bytes < PRINT_BUFFER_MIN)
		return tpurt_fail(-EINVAL, "print buffer of %llu bytes: at least %d",
				  (unsigned long long)bytes, PRINT_BUFFER_MIN);
	dev->print_bytes = bytes;
	return 0;
}

static uint64_t print_buffer_size(const struct tpurt_device *dev)
{
	const char *env = getenv("TPURT_PRINT_BUFFER");
	unsigned long long n;

	if (dev->print_bytes)
		return dev->print_bytes;
	if (env && sscanf(env, "%llu", &n) == 1 && n >= PRINT_BUFFER_MIN)
		return n;
	return PRINT_BUFFER_DEFAULT;
}

int tpurt_print_job_new(struct tpurt_device *dev, const struct tpurt_kernel *k,
			struct tpurt_print_job **pjp)
{
	struct tpurt_print_job *pj;
	int ret;

	*pjp = NULL;
	if (!k->nprints)
		return 0;
	pj = calloc(1, sizeof(*pj));
	if (pj)
		pj->fmts = malloc((size_t)k->nprints * sizeof(*pj->fmts));
	if (!pj || !pj->fmts) {
		free(pj);
		return tpurt_fail(-ENOMEM, "out of memory");
	}
	memcpy(pj->fmts, k->print, (size_t)k->nprints * sizeof(*pj->fmts));
	pj->nfmts = k->nprints;
	pj->out = dev->print_out;
	ret = tpurt_buffer_create(dev, print_buffer_size(dev), &pj->buf);
	if (ret) {
		free(pj->fmts);
		free(pj);
		return tpurt_fail(ret, "debug_print: no room for the job's print buffer: %s",
				  tpurt_last_error());
	}
	*pjp = pj;
	return 0;
}

struct tpurt_buffer *tpurt_print_job_buffer(const struct tpurt_print_job *pj)
{
	return pj->buf;
}

void tpurt_print_job_free(struct tpurt_print_job *pj)
{
	if (!pj)
		return;
	tpurt_buffer_free(pj->buf);
	free(pj->fmts);
	free(pj);
}

/*
 * A float as Python prints a float32: the shortest digits that read back,
 * positional unless the exponent is below -4 or 16 and up (repr's rule;
 * %g alone would print 10.0 as 1e+01, its one digit being enough).
 */
static void put_float(FILE *f, double v, int f32)
{
	char s[64], digits[24];
	int prec, exp, n = 0;

	if (isnan(v)) {
		fputs("nan", f);
		return;
	}
	if (isinf(v)) {
		fputs(v < 0 ? "-inf" : "inf", f);
		return;
	}
	for (prec = 1; prec <= 17; prec++) {
		snprintf(s, sizeof(s), "%.*e", prec - 1, v);
		if (f32 ? strtof(s, NULL) == (float)v : strtod(s, NULL) == v)
			break;
	}
	exp = atoi(strchr(s, 'e') + 1);
	if (exp < -4 || exp >= 16) {
		snprintf(s, sizeof(s), "%.*g", prec, v);
		fputs(s, f);
		if (!strchr(s, '.') && !strchr(s, 'e'))
			fputs(".0", f);
		return;
	}
	/* the shortest digits placed around the point, as repr places them */
	for (const char *c = s; *c && *c != 'e'; c++)
		if (*c >= '0' && *c <= '9')
			digits[n++] = *c;
	while (n > 1 && digits[n - 1] == '0')
		n--;
	if (signbit(v))
		fputc('-', f);
	if (exp < 0) {
		fputs("0.", f);
		for (int i = 0; i < -exp - 1; i++)
			fputc('0', f);
		fwrite(digits, 1, n, f);
		return;
	}
	for (int i = 0; i <= exp; i++)
		fputc(i < n ? digits[i] : '0', f);
	fputc('.', f);
	if (n > exp + 1)
		fwrite(digits + exp + 1, 1, n - exp - 1, f);
	else
		fputc('0', f);
}

static void put_elem(FILE *f, int64_t bits, uint8_t dtype)
{
	double d;

	if (dtype == TPU_DTYPE_BOOL) {
		fputs(bits ? "True" : "False", f);
	} else if (tpu_dtype_is_float(dtype)) {
		memcpy(&d, &bits, sizeof(d));
		put_float(f, d, 1);
	} else {
		fprintf(f, "%lld", (long long)bits);
	}
}

/* A ref's elements: one as a number, a row as [a b], more as [[a b]\n [c d]]. */
static void put_ref(FILE *f, const int64_t *v, uint32_t rows, uint32_t cols,
		    uint8_t dtype)
{
	if (rows * (uint64_t)cols == 1) {
		put_elem(f, v[0], dtype);
		return;
	}
	if (rows > 1)
		fputc('[', f);
	for (uint32_t r = 0; r < rows; r++) {
		fputs(r ? "\n [" : "[", f);
		for (uint32_t c = 0; c < cols; c++) {
			if (c)
				fputc(' ', f);
			put_elem(f, v[(uint64_t)r * cols + c], dtype);
		}
		fputc(']', f);
	}
	if (rows > 1)
		fputc(']', f);
}

/* One record as its format's line; false if it does not match the kernel's. */
static bool put_record(FILE *f, const struct tpurt_print_job *pj,
		       const struct tpu_print_record *r)
{
	const struct tpurt_kernel_print *p;
	const int64_t *ref_at[TPU_PRINT_MAX_REFS];
	uint64_t nvalues;
	int arg = 0;

	if (r->fmt >= (uint32_t)pj->nfmts || r->num_refs > TPU_PRINT_MAX_REFS)
		return false;
	p = &pj->fmts[r->fmt];
	nvalues = r->num_scalars;
	for (unsigned int k = 0; k < r->num_refs; k++) {
		ref_at[k] = (const int64_t *)(const void *)(r->values + nvalues);
		nvalues += (uint64_t)r->ref_rows[k] * r->ref_cols[k];
	}
	if (sizeof(*r) + nvalues * sizeof(int64_t) != r->size)
		return false;
	for (const char *c = p->fmt; *c; c++) {
		if ((c[0] == '{' || c[0] == '}') && c[1] == c[0]) {
			fputc(*c++, f);
			continue;
		}
		if (c[0] != '{') {
			fputc(*c, f);
			continue;
		}
		c++;	/* "{}": the next argument */
		if (arg >= p->nargs)
			return false;
		if (p->kind[arg] == TPURT_PRINT_REF && p->slot[arg] < r->num_refs)
			put_ref(f, ref_at[p->slot[arg]], r->ref_rows[p->slot[arg]],
				r->ref_cols[p->slot[arg]], r->ref_dtype[p->slot[arg]]);
		else if (p->kind[arg] == TPURT_PRINT_BOOL && p->slot[arg] < r->num_scalars)
			fputs(r->values[p->slot[arg]] ? "True" : "False", f);
		else if (p->slot[arg] < r->num_scalars)
			fprintf(f, "%lld", (long long)r->values[p->slot[arg]]);
		arg++;
	}
	fputc('\n', f);
	return true;
}

struct record_at {
	uint64_t step;
	uint64_t seq;
	const struct tpu_print_record *r;
};

static int by_step(const void *a, const void *b)
{
	const struct record_at *x = a, *y = b;

	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The records between @p and @end, in step order, as lines on @f. */
static void put_records(FILE *f, const struct tpurt_print_job *pj,
			const uint8_t *p, const uint8_t *end, uint64_t count)
{
	struct record_at *at = malloc((count ? count : 1) * sizeof(*at));
	uint64_t n = 0, bad = 0;

	if (!at) {
		fprintf(f, "libtpurt: debug_print: out of memory for %llu records\n",
			(unsigned long long)count);
		return;
	}
	while (n < count && end - p >= (ptrdiff_t)sizeof(struct tpu_print_record)) {
		const struct tpu_print_record *r = (const void *)p;

		if (r->size < sizeof(*r) || r->size % 8 || r->size > (uint64_t)(end - p))
			break;
		at[n] = (struct record_at){ r->step, n, r };
		n++;
		p += r->size;
	}
	qsort(at, n, sizeof(*at), by_step);
	for (uint64_t i = 0; i < n; i++)
		bad += !put_record(f, pj, at[i].r);
	if (bad || n < count)
		fprintf(f, "libtpurt: debug_print: %llu records unreadable\n",
			(unsigned long long)(bad + count - n));
	free(at);
}

void tpurt_print_job_done(struct tpurt_job *job)
{
	struct tpurt_print_job *pj = job->print;
	FILE *f;
	struct tpu_print_header h;
	uint8_t *data;

	if (!pj)
		return;
	f = pj->out ? pj->out : stderr;
	if (tpurt_buffer_read(pj->buf, 0, &h, sizeof(h)) || h.magic != TPU_PRINT_MAGIC ||
	    h.record_size != sizeof(struct tpu_print_record) ||
	    h.bytes > pj->buf->size - sizeof(h)) {
		/* a job that failed before it ran leaves no prints */
		return;
	}
	data = malloc(h.bytes ? h.bytes : 1);
	if (!data || tpurt_buffer_read(pj->buf, sizeof(h), data, h.bytes)) {
		fprintf(f, "libtpurt: debug_print: cannot read the job's print buffer\n");
		free(data);
		return;
	}
	put_records(f, pj, data, data + h.bytes, h.records);
	if (h.dropped)
		fprintf(f, "libtpurt: debug_print: %llu records dropped: the %llu-byte print buffer was full (tpurt_device_set_print_buffer, TPURT_PRINT_BUFFER)\n",
			(unsigned long long)h.dropped,
			(unsigned long long)pj->buf->size);
	fflush(f);
	free(data);
}
