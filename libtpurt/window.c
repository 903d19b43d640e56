// SPDX-License-Identifier: MIT
/*
 * Ref text: a ref's name, or a window of it as Pallas writes one,
 * "buf.at[slot, pl.ds(i * 8, 8), :]". The builder records the text;
 * pallas_call and the statement lowering both read it here, so a window
 * means one thing to both: which dimensions are indexed (dropped), which
 * sliced, and the index-map text of every start.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt_private.h"

static const char *skip_space(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

/* The end of the item starting at @p: the first top-level @stop or ']'. */
static const char *item_end(const char *p, char stop)
{
	int level = 0;

	for (; *p; p++) {
		if (*p == '(' || *p == '[')
			level++;
		else if ((*p == ')' || *p == ']') && level)
			level--;
		else if (!level && (*p == stop || *p == ']'))
			break;
	}
	return p;
}

/* [@p, @end) trimmed into @buf. */
static int copy_trimmed(const char *p, const char *end, char *buf, size_t len)
{
	p = skip_space(p);
	while (end > p && isspace((unsigned char)end[-1]))
		end--;
	if ((size_t)(end - p) >= len)
		return -1;
	memcpy(buf, p, (size_t)(end - p));
	buf[end - p] = 0;
	return 0;
}

/* A whole-text integer constant. */
static int const_int(const char *s, int64_t *v)
{
	char *end;

	if (!*s)
		return -1;
	*v = strtoll(s, &end, 10);
	return *skip_space(end) ? -1 : 0;
}

/* The end of a ds argument at @p: the first top-level ',' or ')'. */
static const char *arg_end(const char *p)
{
	const char *comma = item_end(p, ','), *close = item_end(p, ')');

	return comma < close ? comma : close;
}

/*
 * "pl.ds(start, size[, stride])" or "ds(...)": the start's text, the
 * size and the stride (constants; "stride=" may name the third).
 */
static int parse_ds(const char *item, struct tpurt_index *ix)
{
	const char *p = item, *comma, *end;
	char size[TPURT_TEXT_MAX], stride[TPURT_TEXT_MAX];

	if (!strncmp(p, "pl.", 3))
		p += 3;
	if (strncmp(p, "ds", 2) || *skip_space(p + 2) != '(')
		return 1;		/* not a ds */
	p = skip_space(p + 2) + 1;
	comma = item_end(p, ',');
	if (*comma != ',')
		return -1;
	end = arg_end(comma + 1);
	if (copy_trimmed(p, comma, ix->start, sizeof(ix->start)) ||
	    copy_trimmed(comma + 1, end, size, sizeof(size)) ||
	    const_int(size, &ix->size) || !ix->start[0])
		return -1;
	ix->stride = 1;
	if (*end == ',') {
		const char *s = skip_space(end + 1);

		if (!strncmp(s, "stride", 6) && *skip_space(s + 6) == '=')
			s = skip_space(s + 6) + 1;
		end = arg_end(s);
		if (copy_trimmed(s, end, stride, sizeof(stride)) ||
		    const_int(stride, &ix->stride) || ix->stride < 1)
			return -1;
	}
	if (*end != ')' || *skip_space(end + 1))
		return -1;
	ix->kind = TPURT_IX_SLICE;
	return 0;
}

/* One index: ":", "a:b", pl.ds(...), or an expression. */
static int parse_item(const char *item, struct tpurt_index *ix)
{
	const char *colon = item_end(item, ':');
	int64_t lo = 0, hi;
	char a[TPURT_TEXT_MAX], b[TPURT_TEXT_MAX], c[TPURT_TEXT_MAX];
	int ret;

	memset(ix, 0, sizeof(*ix));
	ix->stride = 1;
	if (*colon == ':') {
		const char *colon2 = item_end(colon + 1, ':');

		if (copy_trimmed(item, colon, a, sizeof(a)) ||
		    copy_trimmed(colon + 1, colon2, b, sizeof(b)))
			return -1;
		/* a:b:s, the constants of a NumPy slice (s >= 1) */
		if (*colon2 == ':' &&
		    (copy_trimmed(colon2 + 1, colon2 + strlen(colon2), c, sizeof(c)) ||
		     const_int(c, &ix->stride) || ix->stride < 1))
			return -1;
		if (!a[0] && !b[0] && ix->stride == 1) {
			ix->kind = TPURT_IX_WHOLE;
			return 0;
		}
		if ((a[0] && const_int(a, &lo)) || !b[0] || const_int(b, &hi) ||
		    hi <= lo || lo < 0)
			return -1;
		ix->kind = TPURT_IX_SLICE;
		snprintf(ix->start, sizeof(ix->start), "%lld", (long long)lo);
		ix->size = (hi - lo + ix->stride - 1) / ix->stride;
		return 0;
	}
	ret = parse_ds(item, ix);
	if (ret <= 0)
		return ret;
	ix->kind = TPURT_IX_INDEX;
	snprintf(ix->start, sizeof(ix->start), "%s", item);
	return item[0] ? 0 : -1;
}

int tpurt_ref_parse(const char *text, const char *what, struct tpurt_ref_text *r)
{
	const char *p = skip_space(text), *name = p, *at;
	size_t n;

	memset(r, 0, sizeof(*r));
	while (isalnum((unsigned char)*p) || *p == '_' || *p == '#' || *p == '%')
		p++;
	n = (size_t)(p - name);
	if (!n || n >= sizeof(r->base))
		return tpurt_fail(-EINVAL, "%s: ref '%s': expected a ref's name", what,
				  text);
	memcpy(r->base, name, n);
	p = skip_space(p);
	if (!*p)
		return 0;
	if (strncmp(p, ".at", 3) || *(at = skip_space(p + 3)) != '[')
		return tpurt_fail(-EINVAL, "%s: ref '%s': expected name or name.at[...]",
				  what, text);
	r->windowed = 1;
	p = at + 1;
	for (;;) {
		const char *end = item_end(p, ',');
		char item[TPURT_TEXT_MAX];

		if (!*end)
			return tpurt_fail(-EINVAL, "%s: ref '%s': ']' missing", what, text);
		if (r->nidx == TPU_JOB_MAX_RANK)
			return tpurt_fail(-EINVAL, "%s: ref '%s': more than %d indices",
					  what, text, TPU_JOB_MAX_RANK);
		if (copy_trimmed(p, end, item, sizeof(item)) ||
		    parse_item(item, &r->idx[r->nidx]))
			return tpurt_fail(-EINVAL,
					  "%s: ref '%s': index %d '%s' is not an expression, pl.ds(start, size[, stride]), a:b[:s] (constants) or ':'",
					  what, text, r->nidx, item);
		r->nidx++;
		if (*end == ']')
			break;
		p = end + 1;
	}
	if (*skip_space(item_end(p, ',') + 1))
		return tpurt_fail(-EINVAL, "%s: ref '%s': text after ']'", what, text);
	return 0;
}

static int append_start(struct tpurt_window_fit *w, const char *start)
{
	size_t at = strlen(w->starts);
	int n = snprintf(w->starts + at, sizeof(w->starts) - at, "%s%s",
			 at ? ", " : "", start);

	if (strcmp(start, "0"))
		w->all_zero = 0;
	return n < 0 || (size_t)n >= sizeof(w->starts) - at ? -1 : 0;
}

/*
 * Every dimension after the first unsqueezed one is unsqueezed, and whole
 * but for the last: the window's rows are a run of its base's rows, a base
 * row apart (the device's rule, rules/tpu_window_check.c).
 */
static void body_view(struct tpurt_window_fit *w, int rank, const int64_t *extent)
{
	int first = -1;

	w->contiguous = 1;
	w->rows = 1;
	for (int d = 0; d < rank; d++) {
		if (w->squeeze & (1u << d))
			continue;
		if ((first >= 0 && d < rank - 1 && w->size[d] != (uint64_t)extent[d]) ||
		    w->stride[d] > 1)
			w->contiguous = 0;	/* strided: copies only */
		if (first < 0)
			first = d;
	}
	for (int d = first; d >= 0 && d < rank; d++)
		if (w->squeeze & (1u << d))
			w->contiguous = 0;
	for (int i = 0; i + 1 < w->ndims; i++)
		w->rows *= w->shape[i];
	w->cols = w->ndims ? w->shape[w->ndims - 1] : 1;
}

int tpurt_window_fit(const struct tpurt_ref_text *r, const char *what,
		     int rank, const int64_t *extent, unsigned int hidden,
		     int predicated, struct tpurt_window_fit *w)
{
	int visible = 0, i = 0;

	memset(w, 0, sizeof(*w));
	w->all_zero = 1;
	for (int d = 0; d < rank; d++)
		visible += !(hidden & (1u << d));
	if (r->nidx > visible)
		return tpurt_fail(-EINVAL, "%s: window of '%s' has %d indices, the ref has %d dimensions",
				  what, r->base, r->nidx, visible);
	for (int d = 0; d < rank; d++) {
		const struct tpurt_index *ix = i < r->nidx && !(hidden & (1u << d)) ?
					       &r->idx[i] : NULL;
		int64_t start;

		if (!(hidden & (1u << d)))
			i++;
		if (hidden & (1u << d) || (ix && ix->kind == TPURT_IX_INDEX)) {
			if (ix && !predicated && !const_int(ix->start, &start) &&
			    (start < 0 || start >= extent[d]))
				return tpurt_fail(-EINVAL, "%s: window of '%s': index %lld of dimension %d is outside its %lld elements",
						  what, r->base, (long long)start, d,
						  (long long)extent[d]);
			w->squeeze |= (uint8_t)(1u << d);
			w->size[d] = 1;
			if (append_start(w, ix ? ix->start : "0"))
				goto too_long;
			continue;
		}
		if (!ix || ix->kind == TPURT_IX_WHOLE) {
			w->size[d] = (uint32_t)extent[d];
			if (append_start(w, "0"))
				goto too_long;
		} else {
			int64_t step = ix->stride > 1 ? ix->stride : 1;
			int64_t span = (ix->size - 1) * step + 1;

			if (step > 255)
				return tpurt_fail(-EINVAL, "%s: window of '%s': dimension %d: stride %lld, the device takes 1 to 255",
						  what, r->base, d, (long long)step);
			if (ix->size < 1 || span > extent[d])
				return tpurt_fail(-EINVAL, "%s: window of '%s': dimension %d takes %lld of %lld elements",
						  what, r->base, d, (long long)span,
						  (long long)extent[d]);
			if (!predicated && !const_int(ix->start, &start) &&
			    (start < 0 || start + span > extent[d]))
				return tpurt_fail(-EINVAL, "%s: window of '%s': dimension %d: [%lld, %lld) leaves the ref's %lld elements",
						  what, r->base, d, (long long)start,
						  (long long)(start + span),
						  (long long)extent[d]);
			w->size[d] = (uint32_t)ix->size;
			w->stride[d] = step > 1 ? (uint8_t)step : 0;
			if (append_start(w, ix->start))
				goto too_long;
		}
		w->shape[w->ndims++] = w->size[d];
	}
	body_view(w, rank, extent);
	return 0;
too_long:
	return tpurt_fail(-EINVAL, "%s: window of '%s': its starts are too long",
			  what, r->base);
}
