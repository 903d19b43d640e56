// SPDX-License-Identifier: MIT
/*
 * NumPy .npy files: the format's own header rules (magic, version, a
 * Python-literal dict with descr, fortran_order and shape, 64-byte aligned
 * data), little-endian C-order data only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt_private.h"

#define NPY_MAGIC	"\x93NUMPY"
#define NPY_MAGIC_LEN	6
#define NPY_ALIGN	64
#define NPY_MAX_HEADER	(1u << 20)
#define IO_CHUNK	(4u << 20)

struct npy_type {
	const char *descr;
	enum tpurt_dtype dtype;
};

/* What we write, and what we accept besides. */
static const struct npy_type npy_types[] = {
	{ "<f4", TPURT_F32 },
	{ "<u2", TPURT_BF16 },	/* raw bf16 bits; see tpurt.h */
	{ "|i1", TPURT_INT8 },
	{ "|u1", TPURT_UINT8 },
	{ "<i4", TPURT_INT32 },
	{ "|b1", TPURT_BOOL },
	{ "<u4", TPURT_UINT32 },
	{ "|V2", TPURT_BF16 },
	{ "<V2", TPURT_BF16 },
	{ "<i1", TPURT_INT8 },
	{ "<u1", TPURT_UINT8 },
};

/* The quoted value after 'key': in @hdr, copied into @out. */
static int dict_string(const char *hdr, const char *key, char *out, size_t len)
{
	const char *p = strstr(hdr, key), *end;

	if (!p)
		return -1;
	p = strchr(p + strlen(key), ':');
	if (!p)
		return -1;
	p = strpbrk(p, "'\"");
	if (!p)
		return -1;
	end = strchr(p + 1, *p);
	if (!end || (size_t)(end - p - 1) >= len)
		return -1;
	memcpy(out, p + 1, end - p - 1);
	out[end - p - 1] = '\0';
	return 0;
}

static int parse_shape(const char *hdr, const char *path, int *rank,
		       int64_t *shape)
{
	const char *p = strstr(hdr, "'shape'");
	char *end;

	if (!p || !(p = strchr(p, '(')))
		return tpurt_fail(-EINVAL, "%s: header has no shape tuple", path);
	*rank = 0;
	for (p++;;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == ')')
			break;
		if (*rank == TPURT_MAX_RANK)
			return tpurt_fail(-EINVAL, "%s: rank above %d", path,
					  TPURT_MAX_RANK);
		shape[*rank] = strtoll(p, &end, 10);
		if (end == p || shape[*rank] <= 0)
			return tpurt_fail(-EINVAL,
					  "%s: dim %d of the shape is not a positive integer",
					  path, *rank);
		(*rank)++;
		p = end;
	}
	if (!*rank)
		return tpurt_fail(-EINVAL, "%s: 0-d arrays are not supported", path);
	return 0;
}

static int read_header(FILE *f, const char *path, char **hdrp)
{
	unsigned char pre[NPY_MAGIC_LEN + 2 + 4];
	uint32_t hlen;
	size_t lenbytes;
	char *hdr;

	if (fread(pre, 1, NPY_MAGIC_LEN + 2, f) != NPY_MAGIC_LEN + 2 ||
	    memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN))
		return tpurt_fail(-EINVAL, "%s: not a .npy file (bad magic)", path);
	if (pre[6] < 1 || pre[6] > 3)
		return tpurt_fail(-EINVAL, "%s: .npy version %u.%u not supported",
				  path, pre[6], pre[7]);
	lenbytes = pre[6] == 1 ? 2 : 4;
	if (fread(pre + 8, 1, lenbytes, f) != lenbytes)
		return tpurt_fail(-EINVAL, "%s: truncated header", path);
	hlen = pre[8] | pre[9] << 8;
	if (lenbytes == 4)
		hlen |= (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
	if (hlen > NPY_MAX_HEADER)
		return tpurt_fail(-EINVAL, "%s: header of %u bytes is too long",
				  path, hlen);
	hdr = malloc(hlen + 1);
	if (!hdr)
		return tpurt_fail(-ENOMEM, "out of memory");
	if (fread(hdr, 1, hlen, f) != hlen) {
		free(hdr);
		return tpurt_fail(-EINVAL, "%s: truncated header", path);
	}
	hdr[hlen] = '\0';
	*hdrp = hdr;
	return 0;
}

static int parse_dtype(const char *hdr, const char *path, int as_bf16,
		       enum tpurt_dtype *dtype)
{
	char descr[32];
	size_t i;

	if (dict_string(hdr, "'descr'", descr, sizeof(descr)))
		return tpurt_fail(-EINVAL, "%s: header has no descr", path);
	if (!strcmp(descr, "<u2") && !as_bf16)
		return tpurt_fail(-EINVAL,
				  "%s: uint16 data: load it with as_bf16 if it holds bfloat16 bits",
				  path);
	for (i = 0; i < sizeof(npy_types) / sizeof(npy_types[0]); i++) {
		if (!strcmp(descr, npy_types[i].descr)) {
			*dtype = npy_types[i].dtype;
			return 0;
		}
	}
	return tpurt_fail(-EINVAL,
			  "%s: dtype '%s' not supported (float32, bfloat16, int8, uint8, int32, little-endian)",
			  path, descr);
}

static int copy_file_to_array(FILE *f, const char *path, struct tpurt_array *a)
{
	uint64_t nbytes = tpurt_array_nbytes(a), done;
	uint8_t *chunk = malloc(IO_CHUNK);
	int ret = 0;

	if (!chunk)
		return tpurt_fail(-ENOMEM, "out of memory");
	for (done = 0; done < nbytes && !ret; ) {
		size_t want = nbytes - done < IO_CHUNK ? nbytes - done : IO_CHUNK;
		size_t got = fread(chunk, 1, want, f);

		if (got != want) {
			ret = tpurt_fail(-EINVAL, "%s: data ends after %llu of %llu bytes",
					 path, (unsigned long long)(done + got),
					 (unsigned long long)nbytes);
			break;
		}
		ret = tpurt_buffer_write(a->buf, done, chunk, want);
		done += want;
	}
	free(chunk);
	return ret;
}

int tpurt_array_load_npy(struct tpurt_device *dev, const char *path,
			 int as_bf16, struct tpurt_array **arrayp)
{
	int64_t shape[TPURT_MAX_RANK];
	enum tpurt_dtype dtype = TPURT_F32;
	char *hdr = NULL;
	int rank = 0, ret;
	FILE *f;

	*arrayp = NULL;
	f = fopen(path, "rb");
	if (!f)
		return tpurt_fail(-errno, "%s: %s", path, strerror(errno));
	ret = read_header(f, path, &hdr);
	if (ret)
		goto out;
	ret = parse_dtype(hdr, path, as_bf16, &dtype);
	if (ret)
		goto out;
	if (!strstr(hdr, "'fortran_order': False")) {
		ret = tpurt_fail(-EINVAL, "%s: only C-order arrays are supported",
				 path);
		goto out;
	}
	ret = parse_shape(hdr, path, &rank, shape);
	if (ret)
		goto out;
	ret = tpurt_array_create(dev, dtype, rank, shape, arrayp);
	if (ret)
		goto out;
	ret = copy_file_to_array(f, path, *arrayp);
	if (ret) {
		tpurt_array_free(*arrayp);
		*arrayp = NULL;
	}
out:
	free(hdr);
	fclose(f);
	return ret;
}

static const char *descr_of(enum tpurt_dtype dtype)
{
	size_t i;

	for (i = 0; i < sizeof(npy_types) / sizeof(npy_types[0]); i++)
		if (npy_types[i].dtype == dtype)
			return npy_types[i].descr;
	return NULL;
}

/* Version 1.0 header, padded with spaces so the data starts 64-aligned. */
static int format_header(const struct tpurt_array *a, char *out, size_t len)
{
	char dict[256];
	int n, i, total;

	/* A transpose view's bytes are its logical shape in Fortran order. */
	n = snprintf(dict, sizeof(dict),
		     "{'descr': '%s', 'fortran_order': %s, 'shape': (",
		     descr_of(a->dtype), a->transposed ? "True" : "False");
	/* Python's tuple syntax: (3,) and (2, 3). */
	for (i = 0; i < a->rank; i++)
		n += snprintf(dict + n, sizeof(dict) - n, "%lld%s",
			      (long long)a->shape[i],
			      i + 1 < a->rank ? ", " : a->rank == 1 ? "," : "");
	n += snprintf(dict + n, sizeof(dict) - n, "), }");
	total = (NPY_MAGIC_LEN + 4 + n + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
	if ((size_t)total > len)
		return -1;
	memcpy(out, NPY_MAGIC "\x01\x00", 8);
	out[8] = (char)((total - 10) & 0xff);
	out[9] = (char)((total - 10) >> 8);
	memcpy(out + 10, dict, n);
	memset(out + 10 + n, ' ', total - 10 - n - 1);
	out[total - 1] = '\n';
	return total;
}

int tpurt_array_save_npy(const struct tpurt_array *a, const char *path)
{
	uint64_t nbytes = tpurt_array_nbytes(a), done;
	char header[512];
	uint8_t *chunk;
	int hlen, ret = 0;
	FILE *f;

	hlen = format_header(a, header, sizeof(header));
	if (hlen < 0)
		return tpurt_fail(-EINVAL, "%s: header too long", path);
	chunk = malloc(IO_CHUNK);
	if (!chunk)
		return tpurt_fail(-ENOMEM, "out of memory");
	f = fopen(path, "wb");
	if (!f) {
		ret = tpurt_fail(-errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (fwrite(header, 1, hlen, f) != (size_t)hlen)
		ret = tpurt_fail(-EIO, "%s: write failed", path);
	for (done = 0; done < nbytes && !ret; ) {
		size_t n = nbytes - done < IO_CHUNK ? nbytes - done : IO_CHUNK;

		ret = tpurt_buffer_read(a->buf, done, chunk, n);
		if (!ret && fwrite(chunk, 1, n, f) != n)
			ret = tpurt_fail(-EIO, "%s: write failed", path);
		done += n;
	}
	if (fclose(f) && !ret)
		ret = tpurt_fail(-EIO, "%s: write failed", path);
out:
	free(chunk);
	return ret;
}
