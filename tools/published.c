// SPDX-License-Identifier: MIT
#include "published.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dtype_names[TPU_DTYPE_COUNT] = {
	[TPU_DTYPE_F32] = "f32",
	[TPU_DTYPE_BF16] = "bf16",
	[TPU_DTYPE_INT8] = "int8",
	[TPU_DTYPE_UINT8] = "uint8",
	[TPU_DTYPE_INT32] = "int32",
};

int published_dtype(const char *name, enum tpu_dtype *out)
{
	for (int t = 0; t < TPU_DTYPE_COUNT; t++) {
		if (!strcmp(name, dtype_names[t])) {
			*out = t;
			return 0;
		}
	}
	return -1;
}

const char *published_dtype_name(enum tpu_dtype dtype)
{
	return dtype < TPU_DTYPE_COUNT ? dtype_names[dtype] : "?";
}

/* A block size column: a number, or "-" for the compiler's choice. */
static uint64_t block(const char *s)
{
	return strcmp(s, "-") ? strtoull(s, NULL, 10) : 0;
}

static int parse_row(char *line, struct published_row *r)
{
	char kernel[16], bm[16], bk[16], bn[16], dtype[16];
	unsigned long long m, k, n;

	if (sscanf(line, "%15s %15s %15s %15s %llu %llu %llu %15s %lf %lf",
		   kernel, bm, bk, bn, &m, &k, &n, dtype, &r->time_s,
		   &r->util_pct) != 10)
		return -1;
	if (published_dtype(dtype, &r->dtype) || r->time_s <= 0)
		return -1;
	snprintf(r->kernel, sizeof(r->kernel), "%s", kernel);
	r->bm = block(bm);
	r->bk = block(bk);
	r->bn = block(bn);
	r->m = m;
	r->k = k;
	r->n = n;
	return 0;
}

int published_load(const char *path, struct published_row *rows, int max,
		   char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int n = 0, lineno = 0;

	if (!f) {
		snprintf(err, errlen, "%s: cannot open", path);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0')
			continue;
		if (n == max || parse_row(line, &rows[n])) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno,
				 n == max ? "too many rows" : "malformed row");
			fclose(f);
			return -1;
		}
		n++;
	}
	fclose(f);
	return n;
}
