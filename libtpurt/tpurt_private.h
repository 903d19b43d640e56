/* SPDX-License-Identifier: MIT */
#ifndef TPURT_PRIVATE_H
#define TPURT_PRIVATE_H

#include "tpurt.h"

struct tpurt_device {
	int fd;
	char node[64];
	int submit_path;	/* enum tpurt_submit_path; AUTO until probed */
};

struct tpurt_buffer {
	struct tpurt_device *dev;
	uint32_t handle;
	uint64_t size;		/* as asked for */
	uint64_t alloc_size;	/* page-rounded, as allocated */
	uint64_t mmap_offset;
	void *map;		/* lazily mmapped, or NULL */
};

struct tpurt_array {
	struct tpurt_buffer *buf;
	enum tpurt_dtype dtype;
	int rank;
	int64_t shape[TPURT_MAX_RANK];
	uint64_t size;		/* elements */
};

/* Record a message for tpurt_last_error() and return @err (negative). */
int tpurt_fail(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* TPURT_PRIVATE_H */
