// SPDX-License-Identifier: MIT
/*
 * tpurt_open_sim in the shared library, which does not link the engine
 * (it would drag OpenBLAS into every guest program). libtpurt-sim.a has
 * the real one (sim.c).
 */
#include <errno.h>

#include "tpurt_private.h"

int tpurt_open_sim(const struct tpurt_sim_config *cfg,
		   struct tpurt_device **devp)
{
	*devp = NULL;
	return tpurt_fail(-EOPNOTSUPP,
			  "this libtpurt has no in-process device: link libtpurt-sim.a, the engine and OpenBLAS");
}
