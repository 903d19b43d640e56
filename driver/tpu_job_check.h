/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef __TPU_JOB_CHECK_H__
#define __TPU_JOB_CHECK_H__

#include <linux/types.h>

struct tpu_device;

int tpu_job_check(struct tpu_device *tdev, const void *blob, u32 size,
		  const u64 *slot_sizes, unsigned int nslots);

#endif /* __TPU_JOB_CHECK_H__ */
