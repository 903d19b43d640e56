/* SPDX-License-Identifier: MIT */
/*
 * How libtpurt reaches the in-process device (sim.c).
 *
 * libtpurt-sim.a links sim.c in. The shared libtpurt.so.0, which the guest
 * loads and which must not need the engine or OpenBLAS, loads
 * libtpurt-sim.so.0 when a program first opens the in-process device
 * (simload.c). That library holds sim.c, what it uses of libtpurt's own
 * code (a private copy), the engine and the rules, and exports one
 * function, TPURT_SIM_ENTRY, to which libtpurt hands its error reporting
 * (so tpurt_last_error() sees the device's messages) and a description of
 * its internal structs (so a libtpurt-sim.so.0 from another build is
 * refused instead of misread).
 */
#ifndef TPURT_SIM_BACKEND_H
#define TPURT_SIM_BACKEND_H

#include <stdarg.h>
#include <stddef.h>

#include "tpu_config.h"
#include "tpurt_private.h"

/*
 * Create the in-process device with exactly @cfg (the engine checks it):
 * sim.c's, or simload.c's, which loads libtpurt-sim.so.0 and calls that.
 */
int tpurt_sim_create(const struct tpu_config *cfg, struct tpurt_device **devp);

/* 1 if a TPURT_DEVICE value names the in-process device: "sim" or "sim:..." */
int tpurt_sim_spec_is(const char *spec);

/*
 * The device's parameters from a TPURT_DEVICE value "sim" or
 * "sim:NAME=VALUE,...", NAME a QEMU property of uapi/tpu_params.h: the
 * defaults, then each one given (a later one wins). -EINVAL or -ERANGE
 * (too large for its field), naming the item, for anything else; the
 * parameters' ranges are left to tpu_config_check().
 */
int tpurt_sim_spec_parse(const char *spec, struct tpu_config *cfg);

#define TPURT_SIM_SONAME	"libtpurt-sim.so.0"
#define TPURT_SIM_ENTRY		"tpurt_sim_entry"
/* Bump when struct tpurt_backend or the sharing of structs changes. */
#define TPURT_SIM_ABI		1

/*
 * What libtpurt hands the device: its error reporting, which the device's
 * copy of libtpurt's code reports through, and its structs' sizes. @abi
 * and @vfail stay first, always.
 */
struct tpurt_sim_host {
	unsigned int abi;
	int (*vfail)(int err, const char *fmt, va_list ap);
	const char *(*last_error)(void);
	size_t device_size, buffer_size, job_size, backend_size, config_size;
};

/* This build's description of itself, the functions left NULL. */
static inline struct tpurt_sim_host tpurt_sim_host_of_build(void)
{
	return (struct tpurt_sim_host){
		.abi = TPURT_SIM_ABI,
		.device_size = sizeof(struct tpurt_device),
		.buffer_size = sizeof(struct tpurt_buffer),
		.job_size = sizeof(struct tpurt_job),
		.backend_size = sizeof(struct tpurt_backend),
		.config_size = sizeof(struct tpu_config),
	};
}

/* libtpurt-sim.so.0's one export (sim_entry.c): tpurt_sim_create there. */
int tpurt_sim_entry(const struct tpurt_sim_host *host,
		    const struct tpu_config *cfg, struct tpurt_device **devp);
typedef int tpurt_sim_entry_fn(const struct tpurt_sim_host *host,
			       const struct tpu_config *cfg,
			       struct tpurt_device **devp);

#endif /* TPURT_SIM_BACKEND_H */
