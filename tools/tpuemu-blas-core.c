// SPDX-License-Identifier: MIT
/*
 * tpuemu-blas-core: print the OPENBLAS_CORETYPE the engine's processes
 * should run with (QEMU, the benchmarks' OpenBLAS anchor), or nothing
 * when OpenBLAS already runs kernels made for this host. See
 * tpu_gemm_blas_coretype(); scripts/blas-env.sh exports what it prints.
 */
#include <stdio.h>

#include "tpu_gemm.h"

int main(void)
{
	const char *core = tpu_gemm_blas_coretype();

	if (core)
		printf("%s\n", core);
	return 0;
}
