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

/* fuzz_u8() ... fuzz_u64(): the next field, in host byte order. */
#define FUZZ_READER(type, name)					\
	static inline type name(struct fuzz_input *in)		\
	{							\
		type v;						\
								\
		fuzz_take(in, &v, sizeof(v));			\
		return v;					\
	}
FUZZ_READER(uint8_t, fuzz_u8)
FUZZ_READER(uint16_t, fuzz_u16)
FUZZ_READER(uint32_t, fuzz_u32)
FUZZ_READER(uint64_t, fuzz_u64)

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
