// SPDX-License-Identifier: MIT
/*
 * tpu-info: print the identity of the tpu device and each of its
 * parameters (uapi/tpu_params.h), with its property name and meaning.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpu_params.h"
#include "tpurt.h"

static void format_size(char *buf, size_t len, uint64_t bytes)
{
	static const char *const units[] = { "GiB", "MiB", "KiB" };

	for (int i = 0; i < 3; i++) {
		uint64_t scale = 1ull << (10 * (3 - i));

		if (bytes >= scale && !(bytes % scale)) {
			snprintf(buf, len, "%llu %s",
				 (unsigned long long)(bytes / scale), units[i]);
			return;
		}
	}
	snprintf(buf, len, "%llu bytes", (unsigned long long)bytes);
}

/* A value in its unit, rates scaled to what a chip's data sheet says. */
static void format_value(char *buf, size_t len, uint64_t v, const char *unit)
{
	if (!strcmp(unit, "bytes"))
		format_size(buf, len, v);
	else if (!strcmp(unit, "FLOP/s") || !strcmp(unit, "OP/s"))
		snprintf(buf, len, "%.1f T%s", v / 1e12, unit);
	else if (!strcmp(unit, "bytes/s"))
		snprintf(buf, len, "%.1f GB/s", v / 1e9);
	else if (!strcmp(unit, "ns"))
		snprintf(buf, len, "%llu ns", (unsigned long long)v);
	else		/* a count: the description says of what */
		snprintf(buf, len, "%llu", (unsigned long long)v);
}

static void print_params(const struct tpurt_device_info *info)
{
	char value[64];

#define PRINT_PARAM(id, field, index, name, type, def, min, max, unit, desc) \
	format_value(value, sizeof(value), info->field, unit);		\
	printf("  %-16s %-18s %s\n", name, value, desc);
	TPU_PARAMS(PRINT_PARAM)
#undef PRINT_PARAM
}

int main(void)
{
	struct tpurt_device_info info;
	struct tpurt_device *dev;
	int ret;

	ret = tpurt_open(&dev);
	if (ret) {
		fprintf(stderr, "tpu-info: %s\n", tpurt_last_error());
		return EXIT_FAILURE;
	}
	ret = tpurt_device_info(dev, &info);
	if (ret) {
		fprintf(stderr, "tpu-info: %s\n", tpurt_last_error());
		tpurt_close(dev);
		return EXIT_FAILURE;
	}

	printf("%s: driver %s, tpu-mxu register ABI %u.%u\n", info.node,
	       info.driver, info.hw_version >> 16, info.hw_version & 0xffff);
	printf("Parameters (rates and costs: the modeled chip, not the host):\n");
	print_params(&info);
	printf("  %-16s %.0f FLOP/byte (bf16)\n", "ridge point",
	       (double)info.peak_flops_bf16 / info.hbm_bandwidth);

	tpurt_close(dev);
	return EXIT_SUCCESS;
}
