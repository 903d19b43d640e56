/* SPDX-License-Identifier: MIT */
/*
 * Reading a fuzzer's input as a stream of fields: every read succeeds and
 * returns zeros once the input runs out, so a short input is still a valid
 * (if dull) test case.
 */
#ifndef FUZZ_INPUT_H
#define FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fuzz_input {
	const uint8_t *data;
	size_t len, pos;
};

static inline void fuzz_take(struct fuzz_input *in, void *out, size_t n)
{
	size_t avail = in->len - in->pos < n ? in->len - in->pos : n;

	memcpy(out, in->data + in->pos, avail);
	memset((uint8_t *)out + avail, 0, n - avail);
	in->pos += avail;
}

static inline uint8_t fuzz_u8(struct fuzz_input *in)
{
	uint8_t v;

	fuzz_take(in, &v, sizeof(v));
	return v;
}

static inline uint16_t fuzz_u16(struct fuzz_input *in)
{
	uint16_t v;

	fuzz_take(in, &v, sizeof(v));
	return v;
}

static inline uint32_t fuzz_u32(struct fuzz_input *in)
{
	uint32_t v;

	fuzz_take(in, &v, sizeof(v));
	return v;
}

static inline uint64_t fuzz_u64(struct fuzz_input *in)
{
	uint64_t v;

	fuzz_take(in, &v, sizeof(v));
	return v;
}

static inline size_t fuzz_left(const struct fuzz_input *in)
{
	return in->len - in->pos;
}

/* A failed invariant: print it and abort, which libFuzzer reports as a crash. */
#define FUZZ_ASSERT(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "fuzz: %s:%d: %s: ", __FILE__,	\
				__LINE__, #cond);			\
			fprintf(stderr, __VA_ARGS__);			\
			fputc('\n', stderr);				\
			abort();					\
		}							\
	} while (0)

#endif /* FUZZ_INPUT_H */
