# SPDX-License-Identifier: MIT
# Sourced: export OPENBLAS_CORETYPE when the host's OpenBLAS would fall back
# to its slow generic kernels (a CPU newer than Debian's OpenBLAS knows), so
# the engine in QEMU and the benchmarks' anchor run the host's real kernels;
# or when TPU_GEMM_ISA=avx2 caps the engine on an AVX-512 host, so both run
# an AVX2 host's kernels.
# Needs $BUILD/bin/tpuemu-blas-core (make userspace); without it, or with
# OPENBLAS_CORETYPE already set, nothing changes.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -x "$BUILD/bin/tpuemu-blas-core" ]; then
	blas_core=$("$BUILD/bin/tpuemu-blas-core" 2>/dev/null) || blas_core=
	if [ -n "$blas_core" ]; then
		export OPENBLAS_CORETYPE=$blas_core
		echo "blas-env: OpenBLAS's own kernels do not fit the engine's: OPENBLAS_CORETYPE=$blas_core" >&2
	fi
	unset blas_core
fi
