/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef __TPU_DRV_H__
#define __TPU_DRV_H__

/* What the driver calls itself: the DRM driver, its interrupts and regions. */

#define DRIVER_NAME	"tpu"
#define DRIVER_DESC	"Emulated TPU-style accelerator"
#define DRIVER_DATE	"20261129"
#define DRIVER_MAJOR	1
#define DRIVER_MINOR	0

#endif /* __TPU_DRV_H__ */
