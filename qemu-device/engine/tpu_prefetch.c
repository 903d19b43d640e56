// SPDX-License-Identifier: MIT
#include "tpu_prefetch.h"

#define LINE		64
#define MAX_RANGES	8	/* blocks queued per step; more are dropped */

struct prefetch_range {
	const char *p;
	uint64_t rows, row_lines, stride;
};

struct prefetch_queue {
	struct prefetch_range range[MAX_RANGES];
	unsigned int n, at;		/* ranges queued; the one being issued */
	uint64_t row, line;		/* next line of range[at] */
	uint64_t lines_left;
};

static _Thread_local struct prefetch_queue queue;

void tpu_prefetch_clear(void)
{
	queue.n = queue.at = 0;
	queue.row = queue.line = queue.lines_left = 0;
}

void tpu_prefetch_rows(const void *p, uint64_t rows, uint64_t row_bytes,
		       uint64_t stride)
{
	struct prefetch_range *r;

	if (queue.n == MAX_RANGES || !rows || !row_bytes)
		return;
	r = &queue.range[queue.n++];
	r->p = p;
	r->rows = rows;
	/* a row not starting on a line may touch one line more */
	r->row_lines = (row_bytes + LINE - 1) / LINE +
		       ((uintptr_t)p % LINE || stride % LINE);
	r->stride = stride;
	queue.lines_left += rows * r->row_lines;
}

unsigned int tpu_prefetch_take(const char **lines, unsigned int max,
			       uint64_t parts)
{
	uint64_t n = queue.lines_left;
	unsigned int got = 0;

	if (parts > 1)
		n = (n + parts - 1) / parts;
	if (n > max)
		n = max;
	queue.lines_left -= n;
	while (got < n) {
		const struct prefetch_range *r = &queue.range[queue.at];
		const char *row = r->p + queue.row * r->stride;
		uint64_t take = r->row_lines - queue.line;

		if (take > n - got)
			take = n - got;
		for (uint64_t l = queue.line; l < queue.line + take; l++)
			lines[got++] = row + l * LINE;
		queue.line += take;
		if (queue.line < r->row_lines)
			break;
		queue.line = 0;
		if (++queue.row < r->rows)
			continue;
		queue.row = 0;
		queue.at++;
	}
	return got;
}
