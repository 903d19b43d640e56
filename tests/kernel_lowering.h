/* SPDX-License-Identifier: MIT */
/*
 * For host tests of kernel statements: a kernel's dump as a string, the
 * dump of statements lowered into a new kernel, and EXPECT_LOWERS /
 * EXPECT_FAILS for a fixture that holds its grid spec in self->gs.
 * Include after tpurt.h and kselftest_harness.h.
 */
#ifndef KERNEL_LOWERING_H
#define KERNEL_LOWERING_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* tpurt_kernel_dump() of @k into a malloc'd string. */
static inline char *kernel_dump_string(const struct tpurt_kernel *k)
{
	char *buf = NULL;
	size_t len;
	FILE *f = open_memstream(&buf, &len);

	tpurt_kernel_dump(k, f);
	fclose(f);
	return buf;
}

/* The dump of @text lowered into a new kernel; NULL (and the error in
 * tpurt_last_error()) if it does not lower. */
static inline char *lowered(const struct tpurt_grid_spec *gs, const char *text)
{
	struct tpurt_kernel *k;
	char *buf;

	if (tpurt_kernel_create(&k))
		return NULL;
	if (tpurt_kernel_stmts(k, gs, text)) {
		tpurt_kernel_free(k);
		return NULL;
	}
	buf = kernel_dump_string(k);
	tpurt_kernel_free(k);
	return buf;
}

#define EXPECT_LOWERS(text, want) do {					\
	char *got = lowered(self->gs, text);				\
									\
	ASSERT_NE(NULL, got) TH_LOG("%s", tpurt_last_error());		\
	EXPECT_STREQ(want, got);					\
	free(got);							\
} while (0)

#define EXPECT_FAILS(text, want) do {					\
	char *got = lowered(self->gs, text);				\
									\
	EXPECT_EQ(NULL, got);						\
	EXPECT_NE(NULL, strstr(tpurt_last_error(), want))		\
		TH_LOG("got: %s", tpurt_last_error());			\
	free(got);							\
} while (0)

#endif /* KERNEL_LOWERING_H */
