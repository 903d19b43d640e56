#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole stack's matmul speed: the guide's tables run in the VM on a
# device with CORES cores (default 2), beside host OpenBLAS sgemm with the
# same number of threads, measured before and after the VM in the same run.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
case "$BUILD" in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
CORES=${CORES:-2}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

"$BUILD/bench/bench_openblas" "$CORES" | tee "$out"
QEMU_DEVICE_OPTS="cores=$CORES${QEMU_DEVICE_OPTS:+,$QEMU_DEVICE_OPTS}" VM_MEM=${VM_MEM:-3G} \
	"$TOP/scripts/vm-run.sh" --timeout 1200 -- bench_matmul | tee -a "$out"
"$BUILD/bench/bench_openblas" "$CORES" | tee -a "$out"

# Ratios to the anchor (the mean of its two runs), per size.
awk -v cores="$CORES" '
	match($2, /^host_openblas_sgemm_[0-9]+t_/) {
		n = substr($2, RLENGTH + 1); anchor[n] += $4 / 2
	}
	/^bench: vm_matmul_float32_b512x1024x1024_[0-9]+ / {
		split($2, p, "_"); vm[p[5]] = $4
	}
	END {
		for (n in vm)
			if (anchor[n])
				printf "bench: vm_matmul_vs_openblas_f32_%s = %.2f x\n", n, vm[n] / anchor[n]
	}' "$out"
