// SPDX-License-Identifier: MIT
#include "tpu_config.h"

#include <stdarg.h>
#include <stdio.h>

#include "tpu_hw.h"

/*
 * The indexes have no gaps (a duplicate would be a duplicate case in
 * tpu_config_cap below).
 */
#define TPU_PARAM_ONE(...) + 1
_Static_assert(TPU_CAP_COUNT == 0 TPU_PARAMS(TPU_PARAM_ONE),
	       "tpu_params.h: the indexes must be 0 to the count - 1");
#undef TPU_PARAM_ONE

void tpu_config_defaults(struct tpu_config *cfg)
{
	*cfg = (struct tpu_config){
#define TPU_PARAM_DEFAULT(id, field, index, name, type, def, ...) \
		.field = def,
		TPU_PARAMS(TPU_PARAM_DEFAULT)
#undef TPU_PARAM_DEFAULT
	};
}

/* Write the message into @err (if any) and return -1, the check's failure. */
static int reject_config(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static int check_range(const char *name, uint64_t v, uint64_t min,
		       uint64_t max, char *err, size_t errlen)
{
	if (v >= min && v <= max)
		return 0;
	if (min == 1 && max == TPU_PARAM_NO_MAX)
		return reject_config(err, errlen, "%s must not be zero", name);
	if (max == TPU_PARAM_NO_MAX)
		return reject_config(err, errlen, "%s %llu: must be at least %llu",
				     name, (unsigned long long)v,
				     (unsigned long long)min);
	return reject_config(err, errlen, "%s %llu: must be between %llu and %llu",
			     name, (unsigned long long)v,
			     (unsigned long long)min, (unsigned long long)max);
}

static int is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

int tpu_config_check(const struct tpu_config *cfg, char *err, size_t errlen)
{
#define TPU_PARAM_CHECK_RANGE(id, field, index, name, type, def, min, max, ...) \
	if (check_range(name, cfg->field, min, max, err, errlen))	\
		return -1;
	TPU_PARAMS(TPU_PARAM_CHECK_RANGE)
#undef TPU_PARAM_CHECK_RANGE

	/* BAR sizes must be powers of two; the driver maps HBM through BAR2. */
	if (!is_pow2(cfg->hbm_size))
		return reject_config(err, errlen,
				     "hbm-size %llu: must be a power of two",
				     (unsigned long long)cfg->hbm_size);
	if (cfg->vmem_limit > cfg->vmem_size)
		return reject_config(err, errlen,
				     "vmem-limit %llu: must be at most vmem-size (%llu)",
				     (unsigned long long)cfg->vmem_limit,
				     (unsigned long long)cfg->vmem_size);
	return 0;
}

uint64_t tpu_config_cap(const struct tpu_config *cfg, unsigned int index)
{
	switch (index) {
#define TPU_PARAM_CAP(id, field, ...) \
	case TPU_CAP_##id:						\
		return cfg->field;
	TPU_PARAMS(TPU_PARAM_CAP)
#undef TPU_PARAM_CAP
	default:
		return 0;
	}
}
