// SPDX-License-Identifier: MIT
/*
 * TPURT_DEVICE's names for the in-process device: "sim" (the defaults, a
 * TPU v5e) or "sim:cores=2,hbm-size=2G,...", each NAME a QEMU property of
 * the device (uapi/tpu_params.h) and each VALUE written as QEMU takes it:
 * sizes with an optional K, M, G or T suffix, counts and rates in plain
 * digits. So one spelling configures the QEMU device and this one.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sim_backend.h"

#define SIM_NAME	"sim"

/* One parameter: its QEMU name and where its value goes in the config. */
struct sim_param {
	const char *name;
	int is_size;		/* QEMU SIZE: takes a K/M/G/T suffix */
	size_t offset, width;
};

#define SIM_IS_SIZE_SIZE	1
#define SIM_IS_SIZE_UINT32	0
#define SIM_IS_SIZE_UINT64	0

static const struct sim_param sim_params[] = {
#define SIM_PARAM(id, field, index, name, type, ...) \
	{ name, SIM_IS_SIZE_##type, offsetof(struct tpu_config, field), \
	  sizeof(((struct tpu_config *)0)->field) },
	TPU_PARAMS(SIM_PARAM)
#undef SIM_PARAM
};

#define NPARAMS	(sizeof(sim_params) / sizeof(sim_params[0]))

int tpurt_sim_spec_is(const char *spec)
{
	size_t n = strlen(SIM_NAME);

	return !strncmp(spec, SIM_NAME, n) && (!spec[n] || spec[n] == ':');
}

static const struct sim_param *find_param(const char *name, size_t len)
{
	for (size_t i = 0; i < NPARAMS; i++)
		if (strlen(sim_params[i].name) == len &&
		    !strncmp(sim_params[i].name, name, len))
			return &sim_params[i];
	return NULL;
}

/* "hbm-size, vmem-size, ..." for messages. */
static const char *param_names(void)
{
	static _Thread_local char names[512];
	size_t at = 0;

	for (size_t i = 0; i < NPARAMS && at < sizeof(names); i++)
		at += snprintf(names + at, sizeof(names) - at, "%s%s",
			       i ? ", " : "", sim_params[i].name);
	return names;
}

/* The multiplier of a size suffix (QEMU's K, M, G, T, any case), or 0. */
static uint64_t suffix_scale(char c)
{
	static const char suffixes[] = "KMGT";
	const char *at = c ? strchr(suffixes, toupper((unsigned char)c)) : NULL;

	return at ? 1ull << (10 * (at - suffixes + 1)) : 0;
}

/* The value [@s, @s + @len) of @p; a message on failure. */
static int parse_value(const struct sim_param *p, const char *s, size_t len,
		       uint64_t *out, const char **why)
{
	uint64_t v = 0, scale = 1;
	size_t i;

	for (i = 0; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10) {
			*why = "too large";
			return -ERANGE;
		}
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (!i) {
		*why = p->is_size ? "not a size (digits, then K, M, G or T)"
				  : "not a number (plain digits)";
		return -EINVAL;
	}
	if (i < len) {
		scale = p->is_size && i + 1 == len ? suffix_scale(s[i]) : 0;
		if (!scale) {
			*why = p->is_size ? "not a size (digits, then K, M, G or T)"
					  : "not a number (plain digits; only sizes take K, M, G, T)";
			return -EINVAL;
		}
	}
	if (v > UINT64_MAX / scale ||
	    (p->width == sizeof(uint32_t) && v * scale > UINT32_MAX)) {
		*why = "too large";
		return -ERANGE;
	}
	*out = v * scale;
	return 0;
}

static void set_param(struct tpu_config *cfg, const struct sim_param *p,
		      uint64_t v)
{
	char *at = (char *)cfg + p->offset;

	if (p->width == sizeof(uint32_t)) {
		uint32_t v32 = (uint32_t)v;

		memcpy(at, &v32, sizeof(v32));
	} else {
		memcpy(at, &v, sizeof(v));
	}
}

/* One "NAME=VALUE" item, [@item, @item + @len). */
static int parse_item(const char *spec, const char *item, size_t len,
		      struct tpu_config *cfg)
{
	const char *eq = memchr(item, '=', len), *why;
	const struct sim_param *p;
	uint64_t v;
	int ret;

	if (!len)
		return tpurt_fail(-EINVAL,
				  "TPURT_DEVICE=%s: an empty parameter (write sim:NAME=VALUE,NAME=VALUE)",
				  spec);
	if (!eq)
		return tpurt_fail(-EINVAL,
				  "TPURT_DEVICE=%s: '%.*s' has no value (write NAME=VALUE)",
				  spec, (int)len, item);
	p = find_param(item, (size_t)(eq - item));
	if (!p)
		return tpurt_fail(-EINVAL,
				  "TPURT_DEVICE=%s: '%.*s' is not a device parameter (they are %s)",
				  spec, (int)(eq - item), item, param_names());
	ret = parse_value(p, eq + 1, len - (size_t)(eq + 1 - item), &v, &why);
	if (ret)
		return tpurt_fail(ret, "TPURT_DEVICE=%s: %.*s: %s", spec,
				  (int)len, item, why);
	set_param(cfg, p, v);
	return 0;
}

int tpurt_sim_spec_parse(const char *spec, struct tpu_config *cfg)
{
	const char *at = spec + strlen(SIM_NAME);

	tpu_config_defaults(cfg);
	if (!tpurt_sim_spec_is(spec))
		return tpurt_fail(-EINVAL,
				  "TPURT_DEVICE=%s: not the in-process device (sim or sim:NAME=VALUE,...)",
				  spec);
	if (!*at)
		return 0;
	for (at++;; ) {
		const char *end = strchr(at, ',');
		size_t len = end ? (size_t)(end - at) : strlen(at);
		int ret = parse_item(spec, at, len, cfg);

		if (ret)
			return ret;
		if (!end)
			return 0;
		at = end + 1;
	}
}
