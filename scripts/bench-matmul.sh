#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole stack's matmul speed: the guide's tables run in the VM on a
# device with CORES cores (default 2), beside host OpenBLAS sgemm with the
# same number of threads, measured before and after the VM in the same run;
# and, while the device runs jobs, the share of QEMU's CPU time its own
# threads take (the rest is the guest's vCPUs and QEMU's main loop).
# BENCH_MATMUL_ARGS=headline runs only the f32 (512, 1024, 1024) rows.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
case "$BUILD" in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
# The anchor and the engine in QEMU on the same, real OpenBLAS kernels.
. "$TOP/scripts/blas-env.sh"
CORES=${CORES:-2}
tmp=$(mktemp -d)
out=$tmp/out
sampler=
trap '[ -z "$sampler" ] || kill "$sampler" 2>/dev/null; rm -rf "$tmp"' EXIT

# Per-thread CPU of the QEMU process, every second, as "TID NAME TICKS"
# lines after a "sample" line, until the process ends.
sample_threads() {
	local pid t name stat
	while [ ! -s "$tmp/qemu.pid" ]; do sleep 0.2; done
	pid=$(cat "$tmp/qemu.pid")
	while [ -d "/proc/$pid" ]; do
		echo sample
		for t in /proc/"$pid"/task/*; do
			name=$(cat "$t/comm" 2>/dev/null) || continue
			stat=$(cat "$t/stat" 2>/dev/null) || continue
			stat=${stat##*) }
			set -- $stat
			echo "${t##*/} ${name// /_} $((${12} + ${13}))"
		done
		sleep 1
	done
}

# While the device runs a job (its threads busy for at least half of a
# core in that second), the share of the QEMU process's CPU time each
# thread took: the device's threads should be the only busy ones.
thread_shares() {
	awk -v hz="$(getconf CLK_TCK)" '
		$1 == "sample" { flush(); n++; next }
		{ cur[$1] = $3; name[$1] = $2 }
		function flush(   t, d, dev, all) {
			if (n > 1) {
				for (t in cur) {
					d[t] = cur[t] - prev[t]
					all += d[t]
					if (name[t] ~ /^tpu-(mxu-q|core)/)
						dev += d[t]
				}
				if (dev >= hz / 2) {
					for (t in d)
						busy[name[t]] += d[t]
					total += all
				}
			}
			for (t in cur)
				prev[t] = cur[t]
			delete cur
		}
		END {
			flush()
			if (!total)
				exit
			for (t in busy)
				if (busy[t] && t ~ /^tpu-(mxu-q|core)/)
					devsum += busy[t]
			printf "bench: vm_device_threads_cpu_share = %.1f %%\n", 100 * devsum / total
			for (t in busy)
				if (busy[t] && t !~ /^tpu-(mxu-q|core)/)
					printf "# while jobs ran, %s took %.1f %% of the QEMU process'"'"'s CPU\n", t, 100 * busy[t] / total
		}' "$tmp/threads"
}

"$BUILD/bench/bench_openblas" "$CORES" | tee "$out"
sample_threads > "$tmp/threads" &
sampler=$!
QEMU_DEVICE_OPTS="cores=$CORES${QEMU_DEVICE_OPTS:+,$QEMU_DEVICE_OPTS}" VM_MEM=${VM_MEM:-3G} \
	QEMU_EXTRA_ARGS="${QEMU_EXTRA_ARGS:+$QEMU_EXTRA_ARGS }-pidfile $tmp/qemu.pid -name tpuemu-bench,debug-threads=on" \
	"$TOP/scripts/vm-run.sh" --timeout 1200 -- bench_matmul ${BENCH_MATMUL_ARGS:-} | tee -a "$out"
kill "$sampler" 2>/dev/null || true	# if QEMU never started
wait "$sampler" || true
sampler=
thread_shares
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
