// SPDX-License-Identifier: MIT
/*
 * The device's info as a struct tpu_config, the form the device's rules
 * (rules/) take: the job decoder pallas_call runs before it submits and
 * the timing model the analysis uses.
 */
#include <string.h>

#include "tpurt_private.h"

void tpurt_device_config(const struct tpurt_device_info *info,
			 struct tpu_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
#define CONFIG_FROM_INFO(id, field, ...) cfg->field = info->field;
	TPU_PARAMS(CONFIG_FROM_INFO)
#undef CONFIG_FROM_INFO
}
