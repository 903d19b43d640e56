// SPDX-License-Identifier: MIT
/*
 * libtpurt-sim.so.0's one export: the in-process device (sim.c) for a
 * shared libtpurt.so.0 that loaded this library (simload.c). Here the
 * error functions of error.c are the loading libtpurt's, so its
 * tpurt_last_error() has the device's messages; being defined here, they
 * keep error.c out of this library's copy of libtpurt.
 */
#include <errno.h>

#include "sim_backend.h"

static struct tpurt_sim_host host_of_device;

int tpurt_vfail(int err, const char *fmt, va_list ap)
{
	return host_of_device.vfail(err, fmt, ap);
}

int tpurt_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = tpurt_vfail(err, fmt, ap);
	va_end(ap);
	return err;
}

const char *tpurt_last_error(void)
{
	return host_of_device.last_error();
}

int tpurt_sim_entry(const struct tpurt_sim_host *host,
		    const struct tpu_config *cfg, struct tpurt_device **devp)
{
	struct tpurt_sim_host mine = tpurt_sim_host_of_build();

	*devp = NULL;
	host_of_device.vfail = host->vfail;
	if (host->abi != mine.abi)
		return tpurt_fail(-EOPNOTSUPP,
				  "%s is from another build than this libtpurt.so.0 (internal ABI %u, libtpurt's %u): install both from one build",
				  TPURT_SIM_SONAME, mine.abi, host->abi);
	if (host->device_size != mine.device_size ||
	    host->buffer_size != mine.buffer_size ||
	    host->job_size != mine.job_size ||
	    host->backend_size != mine.backend_size ||
	    host->config_size != mine.config_size)
		return tpurt_fail(-EOPNOTSUPP,
				  "%s is from another build than this libtpurt.so.0 (its structs have %zu/%zu/%zu/%zu/%zu bytes, libtpurt's %zu/%zu/%zu/%zu/%zu): install both from one build",
				  TPURT_SIM_SONAME, mine.device_size,
				  mine.buffer_size, mine.job_size,
				  mine.backend_size, mine.config_size,
				  host->device_size, host->buffer_size,
				  host->job_size, host->backend_size,
				  host->config_size);
	host_of_device = *host;
	return tpurt_sim_create(cfg, devp);
}
