/* SPDX-License-Identifier: MIT */
/*
 * The tpu module's wait_spin_us: how long a JOB_INFO waiter polls the
 * compute queue before it sleeps. Root can change it at run time; shared
 * by the job selftest and the submission benchmark.
 */
#ifndef TPU_WAIT_SPIN_H
#define TPU_WAIT_SPIN_H

#include <errno.h>
#include <stdio.h>

#define TPU_WAIT_SPIN_PARAM	"/sys/module/tpu/parameters/wait_spin_us"

/* The setting in microseconds, or -1 where it cannot be read. */
static inline long tpu_wait_spin_get(void)
{
	FILE *f = fopen(TPU_WAIT_SPIN_PARAM, "r");
	long us = -1;

	if (f) {
		if (fscanf(f, "%ld", &us) != 1)
			us = -1;
		fclose(f);
	}
	return us;
}

/* 0, or a negative errno (not root, no such module). */
static inline int tpu_wait_spin_set(long us)
{
	FILE *f = fopen(TPU_WAIT_SPIN_PARAM, "w");
	int ret;

	if (!f)
		return -errno;
	ret = fprintf(f, "%ld\n", us) < 0 ? -EIO : 0;
	return fclose(f) ? -errno : ret;
}

#endif /* TPU_WAIT_SPIN_H */
