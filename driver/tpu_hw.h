/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef __TPU_HW_H__
#define __TPU_HW_H__

#include <linux/io.h>

#include "tpu_device.h"

static inline u32 tpu_reg_read(struct tpu_device *tdev, u32 reg)
{
	return readl(tdev->regs + reg);
}

static inline void tpu_reg_write(struct tpu_device *tdev, u32 reg, u32 val)
{
	writel(val, tdev->regs + reg);
}

int tpu_hw_init(struct tpu_device *tdev);
int tpu_hw_reset(struct tpu_device *tdev);
int tpu_hw_irq_init(struct tpu_device *tdev);

#endif /* __TPU_HW_H__ */
