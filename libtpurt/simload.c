// SPDX-License-Identifier: MIT
/*
 * The in-process device for the shared libtpurt.so.0. The engine and
 * OpenBLAS live in libtpurt-sim.so.0, loaded only when a program opens the
 * in-process device (TPURT_DEVICE=sim, tpurt_open_sim()), so programs on
 * the render node (all of the guest's) never need them. It is looked for
 * beside libtpurt.so.0 first (a build tree, an install), then on the
 * loader's search path. It stays loaded: its devices point into it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sim_backend.h"

/* TPURT_SIM_SONAME in the directory of this libtpurt, if it is there. */
static const char *sim_beside_us(char *path, size_t size)
{
	Dl_info self;
	const char *slash;
	int n;

	if (!dladdr((void *)tpurt_sim_create, &self) || !self.dli_fname)
		return NULL;
	slash = strrchr(self.dli_fname, '/');
	if (!slash)
		return NULL;
	n = snprintf(path, size, "%.*s/%s", (int)(slash - self.dli_fname),
		     self.dli_fname, TPURT_SIM_SONAME);
	if (n < 0 || (size_t)n >= size || access(path, F_OK))
		return NULL;
	return path;
}

int tpurt_sim_create(const struct tpu_config *cfg, struct tpurt_device **devp)
{
	struct tpurt_sim_host host = tpurt_sim_host_of_build();
	char beside[PATH_MAX];
	const char *lib = sim_beside_us(beside, sizeof(beside));
	tpurt_sim_entry_fn *entry;
	void *handle;

	*devp = NULL;
	host.vfail = tpurt_vfail;
	host.last_error = tpurt_last_error;
	handle = dlopen(lib ? lib : TPURT_SIM_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!handle)
		return tpurt_fail(-EOPNOTSUPP,
				  "the in-process device is %s (the engine and OpenBLAS), which cannot be loaded: %s (it belongs beside libtpurt.so.0: make userspace puts it in build/lib, make install in the install's lib)",
				  TPURT_SIM_SONAME, dlerror());
	entry = (tpurt_sim_entry_fn *)dlsym(handle, TPURT_SIM_ENTRY);
	if (!entry) {
		int ret = tpurt_fail(-EOPNOTSUPP, "%s: no %s: %s",
				     lib ? lib : TPURT_SIM_SONAME,
				     TPURT_SIM_ENTRY, dlerror());

		dlclose(handle);
		return ret;
	}
	return entry(&host, cfg, devp);
}
