/* SPDX-License-Identifier: MIT */
/*
 * Device configuration: memory sizes, core count and the timing model's
 * parameters, one field per parameter of uapi/tpu_params.h (which has their
 * defaults, units and valid ranges). The QEMU device exposes each field as
 * a property and reports it through the capability registers.
 */
#ifndef TPU_CONFIG_H
#define TPU_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "tpu_params.h"

/* The C type of a field, by its QEMU property type. */
#define TPU_CONFIG_TYPE_SIZE	uint64_t
#define TPU_CONFIG_TYPE_UINT32	uint32_t
#define TPU_CONFIG_TYPE_UINT64	uint64_t

struct tpu_config {
#define TPU_CONFIG_FIELD(id, field, index, name, type, ...) \
	TPU_CONFIG_TYPE_##type field;
	TPU_PARAMS(TPU_CONFIG_FIELD)
#undef TPU_CONFIG_FIELD
};

void tpu_config_defaults(struct tpu_config *cfg);

/*
 * Check that @cfg describes a device that can exist. On failure returns -1
 * and writes a message naming the offending property into @err.
 */
int tpu_config_check(const struct tpu_config *cfg, char *err, size_t errlen);

/* The value of capability register TPU_CAP_<index>, or 0 past the last one. */
uint64_t tpu_config_cap(const struct tpu_config *cfg, unsigned int index);

#endif /* TPU_CONFIG_H */
