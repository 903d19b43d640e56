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

/* "pl.ds(start, size)" or "ds(...)": the start's text and the size. */
static int parse_ds(const char *item, struct tpurt_index *ix)
{
	const char *p = item, *comma, *close;
	char size[TPURT_TEXT_MAX];

	if (!strncmp(p, "pl.", 3))
		p += 3;
	if (strncmp(p, "ds", 2) || *skip_space(p + 2) != '(')
		return 1;		/* not a ds */
	p = skip_space(p + 2) + 1;
	comma = item_end(p, ',');
	if (*comma != ',')
		return -1;
	close = item_end(comma + 1, ')');
	if (*close != ')' || *skip_space(close + 1))
		return -1;
	if (copy_trimmed(p, comma, ix->start, sizeof(ix->start)) ||
	    copy_trimmed(comma + 1, close, size, sizeof(size)) ||
	    const_int(size, &ix->size) || !ix->start[0])
		return -1;
	ix->kind = TPURT_IX_SLICE;
	return 0;
}

/* One index: ":", "a:b", pl.ds(...), or an expression. */
static int parse_item(const char *item, struct tpurt_index *ix)
{
	const char *colon = item_end(item, ':');
	int64_t lo = 0, hi;
	char a[TPURT_TEXT_MAX], b[TPURT_TEXT_MAX];
	int ret;

	memset(ix, 0, sizeof(*ix));
	if (*colon == ':') {
		if (copy_trimmed(item, colon, a, sizeof(a)) ||
		    copy_trimmed(colon + 1, colon + strlen(colon), b, sizeof(b)))
			return -1;
		if (!a[0] && !b[0]) {
			ix->kind = TPURT_IX_WHOLE;
			return 0;
		}
		if ((a[0] && const_int(a, &lo)) || const_int(b, &hi) || hi <= lo ||
		    lo < 0)
			return -1;
		ix->kind = TPURT_IX_SLICE;
		snprintf(ix->start, sizeof(ix->start), "%lld", (long long)lo);
		ix->size = hi - lo;
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
					  "%s: ref '%s': index %d '%s' is not an expression, pl.ds(start, size), a:b (constants) or ':'",
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
		if (first >= 0 && d < rank - 1 && w->size[d] != (uint64_t)extent[d])
			w->contiguous = 0;
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
		     struct tpurt_window_fit *w)
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
			if (ix && !const_int(ix->start, &start) &&
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
			if (ix->size < 1 || ix->size > extent[d])
				return tpurt_fail(-EINVAL, "%s: window of '%s': dimension %d takes %lld of %lld elements",
						  what, r->base, d, (long long)ix->size,
						  (long long)extent[d]);
			if (!const_int(ix->start, &start) &&
			    (start < 0 || start + ix->size > extent[d]))
				return tpurt_fail(-EINVAL, "%s: window of '%s': dimension %d: [%lld, %lld) leaves the ref's %lld elements",
						  what, r->base, d, (long long)start,
						  (long long)(start + ix->size),
						  (long long)extent[d]);
			w->size[d] = (uint32_t)ix->size;
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
