/* SPDX-License-Identifier: MIT */
/*
 * An environment variable that caps a kernel family's instruction set
 * (TPU_VEC_ISA, TPU_GEMM_ISA), so an AVX-512 host can run and measure
 * what a lesser host runs. One rule for every family: a name below the
 * host's best wins, anything else is ignored.
 */
#ifndef TPU_ISA_ENV_H
#define TPU_ISA_ENV_H

#include <stdlib.h>
#include <string.h>

/* @best (an index into @names), or the lower one @var names. */
static inline int tpu_isa_env_cap(const char *var, const char *const *names,
				  int count, int best)
{
	const char *env = getenv(var);

	for (int i = 0; env && i < best && i < count; i++)
		if (!strcmp(env, names[i]))
			return i;
	return best;
}

#endif /* TPU_ISA_ENV_H */
