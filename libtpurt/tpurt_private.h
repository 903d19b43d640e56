/* SPDX-License-Identifier: MIT */
#ifndef TPURT_PRIVATE_H
#define TPURT_PRIVATE_H

#include "tpurt.h"

struct tpurt_device {
	int fd;
	char node[64];
};

/* Record a message for tpurt_last_error() and return @err (negative). */
int tpurt_fail(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* TPURT_PRIVATE_H */
