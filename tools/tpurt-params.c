// SPDX-License-Identifier: MIT
/*
 * tpurt-params: the device's parameters, from the one table that defines
 * them (uapi/tpu_params.h).
 *
 *   tpurt-params --markdown   the table in README.md (a host test keeps
 *                             README's copy equal to this output)
 *   tpurt-params --names      one QEMU property name per line
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpu_drm.h"
#include "tpu_params.h"

enum param_type { TYPE_SIZE, TYPE_UINT32, TYPE_UINT64 };

struct param {
	const char *name;
	enum param_type type;
	unsigned long long def, min, max;
	unsigned int get_param;
	const char *unit;
	const char *desc;
};

static const struct param params[] = {
#define PARAM(id, field, index, name, type, def, min, max, unit, desc) \
	{ name, TYPE_##type, def, min, max, DRM_TPU_PARAM_##id, unit, desc },
	TPU_PARAMS(PARAM)
#undef PARAM
};

#define NPARAMS (sizeof(params) / sizeof(params[0]))

/* A byte count as QEMU takes it: 16M, 1G, or plain bytes. */
static void format_size(char *buf, size_t len, unsigned long long v)
{
	static const char suffix[] = "KMGT";
	int i = -1;

	while (v && !(v % 1024) && i < 3) {
		v /= 1024;
		i++;
	}
	if (i < 0)
		snprintf(buf, len, "%llu", v);
	else
		snprintf(buf, len, "%llu%c", v, suffix[i]);
}

static void format_value(char *buf, size_t len, const struct param *p,
			 unsigned long long v)
{
	int exp = 0;

	if (p->type == TYPE_SIZE) {
		format_size(buf, len, v);
		return;
	}
	while (v >= 1000 && !(v % 1000)) {
		v /= 1000;
		exp += 3;
	}
	/* Large rates read better as 197e12, but QEMU takes the digits. */
	if (exp >= 9)
		snprintf(buf, len, "%llu%0*d (%llue%d)", v, exp, 0, v, exp);
	else if (exp)
		snprintf(buf, len, "%llu%0*d", v, exp, 0);
	else
		snprintf(buf, len, "%llu", v);
}

static void format_range(char *buf, size_t len, const struct param *p)
{
	char min[48], max[48];

	format_value(min, sizeof(min), p, p->min);
	format_value(max, sizeof(max), p, p->max);
	if (p->max != TPU_PARAM_NO_MAX)
		snprintf(buf, len, "%s to %s", min, max);
	else if (p->min)
		snprintf(buf, len, "at least %s", min);
	else
		snprintf(buf, len, "any");
}

static void print_markdown(void)
{
	char def[64], range[128];

	printf("| property | default | valid | unit | GET_PARAM | what |\n");
	printf("|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < NPARAMS; i++) {
		const struct param *p = &params[i];

		format_value(def, sizeof(def), p, p->def);
		format_range(range, sizeof(range), p);
		printf("| `%s` | %s | %s | %s | %u | %s |\n", p->name, def, range,
		       p->unit, p->get_param, p->desc);
	}
}

static void print_names(void)
{
	for (size_t i = 0; i < NPARAMS; i++)
		printf("%s\n", params[i].name);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--markdown")) {
		print_markdown();
		return EXIT_SUCCESS;
	}
	if (argc == 2 && !strcmp(argv[1], "--names")) {
		print_names();
		return EXIT_SUCCESS;
	}
	fprintf(stderr, "usage: tpurt-params --markdown | --names\n");
	return EXIT_FAILURE;
}
