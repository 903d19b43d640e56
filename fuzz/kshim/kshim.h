/* SPDX-License-Identifier: MIT */
/*
 * Just enough of the kernel for driver/tpu_job_check.c in userspace,
 * force-included before it. The driver's own tpu_device.h and
 * tpu_job_check.h (DRM, PCI) are kept out by defining their include guards;
 * struct tpu_device is reduced to what the check reads, and tpu_dbg keeps
 * the last message for the fuzzer to print.
 */
#ifndef FUZZ_KSHIM_H
#define FUZZ_KSHIM_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tpu_hw.h"

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef unsigned long long u64;	/* the kernel's, so %llu fits */

#define U64_MAX		((u64)~0ull)
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

#define check_add_overflow(a, b, d)	__builtin_add_overflow(a, b, d)
#define check_mul_overflow(a, b, d)	__builtin_mul_overflow(a, b, d)

static inline void *memchr_inv(const void *p, int c, size_t n)
{
	const u8 *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i] != (u8)c)
			return (void *)(b + i);
	return NULL;
}

#define __TPU_DEVICE_H__
#define __TPU_JOB_CHECK_H__

struct tpu_device {
	u64 caps[TPU_CAP_COUNT];
	char last_dbg[256];
};

#define tpu_dbg(tdev, fmt, ...) \
	snprintf((tdev)->last_dbg, sizeof((tdev)->last_dbg), fmt, ##__VA_ARGS__)

int tpu_job_check(struct tpu_device *tdev, const void *blob, u32 size,
		  const u64 *slot_sizes, unsigned int nslots);

#endif /* FUZZ_KSHIM_H */
