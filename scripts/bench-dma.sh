#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# DMA bandwidth in the VM beside the host's memcpy, measured in the same run;
# prints each device-side figure of 16 MiB and more as a ratio to the anchor.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
case "$BUILD" in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
out=$(mktemp)
trap 'rm -f "$out"' EXIT

"$BUILD/bench/bench_memcpy" | tee "$out"
VM_MEM=${VM_MEM:-2G} "$TOP/scripts/vm-run.sh" --timeout 600 -- bench_dma | tee -a "$out"
"$BUILD/bench/bench_memcpy" | tee -a "$out"

# The anchor is the mean of the runs before and after the VM's.
awk '
	/^bench: host_memcpy_256MiB/ { anchor += $4; n++ }
	/^bench: dma_(h2d|d2h)_device_(16|64|256)MiB/ { name[++k] = $2; val[k] = $4 }
	END {
		anchor /= n
		for (i = 1; i <= k; i++)
			printf "bench: %s_vs_host_memcpy = %.2f x\n", name[i], val[i] / anchor
	}' "$out"
