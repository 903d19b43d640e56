// SPDX-License-Identifier: MIT
/*
 * Which device a program gets. tpurt_open() follows $TPURT_DEVICE: a render
 * node's path, "sim" or "sim:NAME=VALUE,..." for the in-process device
 * with the QEMU device's parameter names (sim_spec.c), or, unset, the first
 * tpu render node. tpurt_open_sim() takes the in-process device's
 * parameters as a struct. Either way the in-process device is sim.c,
 * linked in (libtpurt-sim.a) or loaded (simload.c).
 */
#include <errno.h>
#include <stdlib.h>

#include "sim_backend.h"
#include "tpurt_private.h"

static int open_sim_spec(const char *spec, struct tpurt_device **devp)
{
	struct tpu_config cfg;
	char err[256];
	int ret;

	ret = tpurt_sim_spec_parse(spec, &cfg);
	if (ret)
		return ret;
	if (tpu_config_check(&cfg, err, sizeof(err)))
		return tpurt_fail(-EINVAL, "TPURT_DEVICE=%s: %s", spec, err);
	return tpurt_sim_create(&cfg, devp);
}

int tpurt_open(struct tpurt_device **devp)
{
	const char *spec = getenv("TPURT_DEVICE");

	*devp = NULL;
	if (!spec || !*spec)
		return tpurt_render_open_first(devp);
	if (tpurt_sim_spec_is(spec))
		return open_sim_spec(spec, devp);
	return tpurt_open_path(spec, devp);
}

int tpurt_open_sim(const struct tpurt_sim_config *c, struct tpurt_device **devp)
{
	struct tpu_config cfg;

	*devp = NULL;
	tpu_config_defaults(&cfg);
	/* The fields of the two structs are the same (device.c asserts it). */
#define TAKE_GIVEN(id, field, ...) \
	if (c && c->field) \
		cfg.field = c->field;
	TPU_PARAMS(TAKE_GIVEN)
#undef TAKE_GIVEN
	return tpurt_sim_create(&cfg, devp);
}
