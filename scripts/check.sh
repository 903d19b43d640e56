#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run every test: driver style, host unit tests, and the selftests and
# samples inside the VM (once with the device's defaults, once with other
# properties). Prints TAP as it goes and ends with "N passed, N failed,
# N skipped"; exits non-zero on any failure. Every test binary's own results
# count, and so does one more for the binary as a whole (not found, a
# non-zero exit, a signal, no plan, fewer or more results than its plan
# fail it): on the host and for the guest's samples scripts/tap-run.sh
# judges it; the guest's selftests run under the kernel's own
# run_kselftest.sh, whose output "tap-run.sh --kselftest" holds to the
# same rules.
#
# --debug (make check-debug): the two VM passes alone, on the debug kernel
# (scripts/build-debug-kernel.sh), the tpu.ko built for it
# ($BUILD/debug/module) and the sanitizer QEMU (QEMU_VARIANT=asan
# scripts/build-qemu.sh), all built beforehand; each pass's console is then
# searched for kernel reports, kmemleak's leaks and sanitizer reports
# (scripts/debug-reports.sh). Logs in $BUILD/check-debug.
set -uo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
CACHE=${TPUEMU_CACHE:-/var/cache/tpuemu}
BUILD=${BUILD:-build}
LOGS=$BUILD/check
DEBUG=0
[ "${1:-}" = --debug ] && DEBUG=1 LOGS=$BUILD/check-debug
rm -rf "$LOGS" && mkdir -p "$LOGS"

# One TAP result line written by this script (not by a test binary).
result() {	# result LOG ok|fail NAME
	if [ "$2" = ok ]; then echo "ok - $3"; else echo "not ok - $3"; fi | tee -a "$1"
}

# Style and the host tests: not in --debug, which is about the guest.
# --- style: checkpatch on the driver, kernel-doc on the uAPI; part of the
# host part below (beside the VM passes) ---
style_part() {
	local f out all_clean=0
	echo "# style"
	# One checkpatch for every file (perl's start is most of its time);
	# only when it complains, one per file to say which.
	checkpatch() {
		"$CACHE/kernel-scripts/checkpatch.pl" --no-tree --strict --quiet -f "$@" \
			> "$LOGS/checkpatch.out" 2>&1
	}
	checkpatch driver/*.[ch] Kbuild && all_clean=1
	for f in driver/*.[ch] Kbuild; do
		if [ "$all_clean" = 1 ] || checkpatch "$f"; then
			result "$LOGS/style.tap" ok "checkpatch $f"
		else
			cat "$LOGS/checkpatch.out"
			result "$LOGS/style.tap" fail "checkpatch $f"
		fi
	done
	if make -s --no-print-directory sparse > "$LOGS/sparse.out" 2>&1; then
		result "$LOGS/style.tap" ok "sparse driver/"
	else
		cat "$LOGS/sparse.out"
		result "$LOGS/style.tap" fail "sparse driver/"
	fi
	for f in uapi/tpu_drm.h uapi/tpu_job.h; do
		if out=$("$CACHE/kernel-scripts/kernel-doc" -none "$f" 2>&1) && [ -z "$out" ]; then
			result "$LOGS/style.tap" ok "kernel-doc $f"
		else
			echo "$out"
			result "$LOGS/style.tap" fail "kernel-doc $f"
		fi
	done
}

# --- style, the test runner's own test, then the host unit tests (the Makefile's
# list: a listed test that was not built fails) and the fuzz targets:
# beside the VM passes, at nice 10, their output held in $LOGS/host.out and
# shown after the VM's. The guest's selftests run one at a time on a vCPU
# and a device worker, so the host part mostly takes what they leave idle,
# and the guest's threads win the CPU when both want it (the timing-
# dependent guest tests keep their margin). CHECK_PARALLEL=0 runs it
# first, alone. ---
host_part() {
	local t host_tests py_pid=
	host_tests=$(make -s --no-print-directory list-host-tests 2>&1) ||
		{ echo "$host_tests"; host_tests=; }
	# The Python suite, the longest host test by far (1400 cases), in a
	# lane of its own beside the rest; its output is shown when it ends.
	if [[ " $(echo $host_tests) " == *" python_test "* ]]; then
		scripts/tap-run.sh "$BUILD/tests/python_test" > "$LOGS/host-python_test.tap" 2>&1 &
		py_pid=$!
	fi
	style_part
	echo "# host: tap-run-test.sh"
	scripts/tap-run.sh tests/runner/tap-run-test.sh | tee "$LOGS/host-runner.tap"
	echo "# host: kselftest-tap-test.sh"
	scripts/tap-run.sh tests/runner/kselftest-tap-test.sh | tee "$LOGS/host-kselftest-runner.tap"
	echo "# host: run-lanes-test.sh"
	scripts/tap-run.sh tests/runner/run-lanes-test.sh | tee "$LOGS/host-run-lanes.tap"
	echo "# host: debug-reports-test.sh"
	scripts/tap-run.sh tests/runner/debug-reports-test.sh | tee "$LOGS/host-debug-reports.tap"
	[ -n "$host_tests" ] ||
		result "$LOGS/host-list.tap" fail "host tests: make list-host-tests listed none"
	for t in $host_tests; do
		[ "$t" = python_test ] && continue
		echo "# host: $t"
		scripts/tap-run.sh "$BUILD/tests/$t" | tee "$LOGS/host-$t.tap"
	done
	# The fuzz targets: their committed corpora, then FUZZ_CHECK_SECONDS
	# (default 1 here) of fuzzing each; make fuzz fuzzes for longer.
	echo "# host: fuzz-check"
	make -s --no-print-directory fuzz-check FUZZ_CHECK_SECONDS="${FUZZ_CHECK_SECONDS:-1}" 2>&1 |
		tee "$LOGS/host-fuzz.tap" ||
		result "$LOGS/host-fuzz.tap" fail "make fuzz-check"
	if [ -n "$py_pid" ]; then
		wait "$py_pid"
		echo "# host: python_test"
		cat "$LOGS/host-python_test.tap"
	fi
}
host_pid=
if [ "$DEBUG" = 1 ]; then
	:
elif [ "${CHECK_PARALLEL:-1}" != 1 ]; then
	host_part
else
	echo "# host: tests and fuzz-check run beside the VM passes (nice 10); shown after them"
	(renice -n 10 -p "$BASHPID" > /dev/null; host_part) > "$LOGS/host.out" 2>&1 &
	host_pid=$!
fi

# --- in the VM ---
QEMU=$CACHE/qemu-system-x86_64
ABI=$(cat "$CACHE/kernel-abi")
KNAME=$ABI KCONFIG=$CACHE/kernel/$ABI/boot/config-$ABI
VM_TIMEOUT=900
GUEST_BEFORE= GUEST_AFTER= GUEST_ENV=
if [ "$DEBUG" = 1 ]; then
	# KASAN, lockdep and kmemleak in the guest and ASan in QEMU make a
	# pass several times slower: more time for the VM and each selftest.
	# QEMU's allocations still live at exit are not reported
	# (detect_leaks=0); every other ASan or UBSan report is.
	dk=$(scripts/build-debug-kernel.sh --print-dir)
	QEMU=$CACHE/qemu-system-x86_64-asan VM_TIMEOUT=3600
	KNAME="debug $(basename "$dk")" KCONFIG=$dk/build/.config
	export VM_QEMU=$QEMU VM_KERNEL=$dk/bzImage VM_MODULES=$dk \
		VM_TPU_KO=$BUILD/debug/module/tpu.ko \
		VM_APPEND="console=ttyS0 loglevel=5 panic=-1"
	export ASAN_OPTIONS=detect_leaks=0 \
		UBSAN_OPTIONS=print_stacktrace=1
	for f in "$VM_QEMU" "$VM_KERNEL" "$VM_TPU_KO" "$KCONFIG"; do
		[ -e "$f" ] || { echo "check: missing $f (make check-debug builds it)" >&2; exit 1; }
	done
	GUEST_BEFORE="echo timeout=1500 > /kselftest/tpu/settings"
	# Filling a queue behind tpu_limits_test's blocker is slower there.
	GUEST_ENV="TPU_BLOCK_SECONDS=6"
	GUEST_AFTER=$(scripts/debug-reports.sh --guest-script)
fi

# Bytes from a QEMU size ("2G", "512K", "4096").
to_bytes() {
	local v=$1 m=1
	case "$v" in
	*[kK]) m=1024 ;; *M) m=$((1024 ** 2)) ;; *G) m=$((1024 ** 3)) ;; *T) m=$((1024 ** 4)) ;;
	esac
	echo $(( ${v%[kKMGT]} * m ))
}

# TPU_EXPECT_* for a device given OPTS: QEMU's own defaults, then OPTS.
expectations() {
	declare -A val=()
	local line name kv names
	while read -r line; do
		name=${line%%=*}
		val[$name]=$(sed -n 's/.*(default: \([0-9]*\))$/\1/p' <<<"$line")
	done < <("$QEMU" -device tpu-mxu,help | sed -n 's/^ *\([a-z0-9-]*=<[a-z0-9]*>\) .*(default: [0-9]*)$/&/p')
	IFS=, read -ra kvs <<<"$1"
	for kv in "${kvs[@]}"; do
		[ -n "$kv" ] && val[${kv%%=*}]=$(to_bytes "${kv#*=}")
	done
	# The parameters, as uapi/tpu_params.h lists them.
	names=$("$BUILD/bin/tpurt-params" --names) || return 1
	for name in $names; do
		local env=TPU_EXPECT_$(tr 'a-z-' 'A-Z_' <<<"$name")
		printf '%s=%s ' "$env" "${val[$name]:?no default for $name in QEMU}"
	done
}

# The kernel options the selftests need (selftests/config) are on in the
# guest's kernel: =y as built in, =m as a module or built in.
echo "# guest: selftests/config"
while IFS== read -r opt want; do
	have=$(sed -n "s/^$opt=//p" "$KCONFIG" 2>/dev/null)
	case "$want:$have" in
	y:y | m:m | m:y) result "$LOGS/guest-config.tap" ok "kernel $KNAME: $opt=$have" ;;
	*) result "$LOGS/guest-config.tap" fail "kernel $KNAME: $opt=${have:-unset}, selftests/config wants $want" ;;
	esac
done < <(grep '^CONFIG_' selftests/config)

# The guest's script: SAMPLES (one result each, under tap-run --single)
# and, with a third argument, the Python samples, in two lanes (run-lanes:
# both guest CPUs; each sample's output whole and in order); then the
# selftests alone under the kernel's runner, in selftests/Makefile's order
# (the tests that unload the driver last): SELFTESTS of them, or all when
# SELFTESTS is empty; its output goes through tap-run --kselftest here.
# Each start is named, so a long pass shows where it is. The script ends
# with "true", so a guest exit code other than 0 means the guest did not
# finish. A name that is not a sample or a selftest fails the run.
#
# The Python samples: samples/py/run_all.py runs them in one python3
# (NumPy is imported once; each start costs seconds under TCG), a TAP
# result each, tap-run one more for the run. They come first: the longest
# command, so the lanes even out. vm-run.sh puts Python in the image for a
# command that runs python3.
samples=$(make -s --no-print-directory list-samples) ||
	result "$LOGS/guest-list.tap" fail "make list-samples: $samples"
# The installed list names the selftests the guest's runner knows; a
# list that is anything else (once it held a make database, from a
# "make -p" run beside the build) would leave them unrun without a word.
if grep -qvE '^tpu:tpu_[a-z0-9_]+$' "$BUILD/guest/kselftest/kselftest-list.txt"; then
	result "$LOGS/guest-list.tap" fail "kselftest-list.txt has lines that are not tpu:NAME: make guest-selftests again"
	selftests=
else
	selftests=$(cut -d: -f2 "$BUILD/guest/kselftest/kselftest-list.txt")
fi
guest_cmd() {	# guest_cmd SAMPLES SELFTESTS [python]
	local t s want=" $(echo $2) " only= lanes=
	if [ -n "$2" ]; then
		for t in $selftests; do
			[[ "$want" == *" $t "* ]] && only="$only -t tpu:$t"
		done
	fi
	[ -z "${3:-}" ] ||
		lanes="\"echo '# guest: python samples'; tap-run --name 'python samples' python3 samples/py/run_all.py\""
	for s in $1; do
		lanes="$lanes \"echo '# guest: sample $s'; tap-run --single --name 'sample $s' $s\""
	done
	echo "
$GUEST_BEFORE
run-lanes 2 $lanes
/kselftest/run_kselftest.sh$only
$GUEST_AFTER
true"
}
GUEST_CMD=$(guest_cmd "$samples" "")
# Under --debug without the Python samples: they run the same driver paths
# as the C samples, and Python's start under KASAN and ASan costs minutes.
[ "$DEBUG" = 1 ] || GUEST_CMD=$(guest_cmd "$samples" "" python)

# The second pass runs what depends on the device's properties: the
# parameters (tpu_params_test), the limits and VMEM sizes, multi-core
# splits of the matmul, template, attention and memory-model kernels
# (their selftests run the samples' kernels), 64-bit DMA above 4 GiB, the
# model's figures for other peaks (tpu-info, analyze_matmul, matmul_int8)
# and tpu_hw_test (QEMU's log of its bad accesses, checked per pass).
# Everything else runs in the first pass only.
CUSTOM_SAMPLES="tpu-info matmul_first analyze_matmul matmul_int8"
CUSTOM_SELFTESTS="tpu_params_test tpu_dma_test tpu_job_test tpu_template_test
	tpu_attention_test tpu_memory_test tpu_limits_test tpu_hw_test"
for t in $CUSTOM_SAMPLES; do
	[[ " $(echo $samples) " == *" $t "* ]] ||
		result "$LOGS/guest-list.tap" fail "check.sh: $t is not a sample"
done
for t in $CUSTOM_SELFTESTS; do
	[[ " $(echo $selftests) " == *" $t "* ]] ||
		result "$LOGS/guest-list.tap" fail "check.sh: $t is not a selftest"
done

vm_pass() {	# vm_pass NAME OPTS VM_MEM GUEST_COMMAND SELFTESTS
	local name=$1 opts=$2 mem=$3 cmd=$4 want=$5 rc t
	echo "# vm: $name (tpu-mxu${opts:+,$opts})"
	# A missing device fails the selftests here rather than skipping them.
	# A pass took over 8 minutes on a busy 2-core machine (load 10): 900 s.
	# The storm is short here (TPU_STORM_SECONDS, default 3 in make check).
	QEMU_DEVICE_OPTS=$opts VM_MEM=$mem \
		VM_ENV="$(expectations "$opts") TPU_SELFTEST_REQUIRE_DEVICE=1 TPU_STORM_SECONDS=${TPU_STORM_SECONDS:-3} $GUEST_ENV" \
		QEMU_EXTRA_ARGS="-d guest_errors -D $LOGS/qemu-$name.log" \
		scripts/vm-run.sh --timeout "$VM_TIMEOUT" --log "$LOGS/vm-$name.console" -- "$cmd" 2>&1 |
		tee "$LOGS/vm-$name.out" | scripts/tap-run.sh --kselftest | tee "$LOGS/vm-$name.shown"
	rc=${PIPESTATUS[0]}
	grep -E '^(not )?ok ' "$LOGS/vm-$name.shown" > "$LOGS/vm-$name.tap"
	if [ "$rc" = 0 ]; then
		result "$LOGS/vm-$name.tap" ok "vm $name: guest finished cleanly"
	else
		result "$LOGS/vm-$name.tap" fail "vm $name: guest exit $rc"
	fi
	# Each selftest the pass asked for has its runner's result line (a
	# test the runner does not know only prints "No such test").
	for t in $want; do
		grep -qE "^(not )?ok [0-9]+ selftests: tpu: $t( |\$)" "$LOGS/vm-$name.out" ||
			result "$LOGS/vm-$name.tap" fail "vm $name: selftest $t gave no result"
	done
	# tpu_hw_test's bad accesses must each have been logged by QEMU: the
	# device's own refusals, and the wrong access sizes its MemoryRegionOps
	# declare invalid.
	local refused sizes
	refused=$(grep -c '^tpu-mxu' "$LOGS/qemu-$name.log" 2>/dev/null)
	sizes=$(grep -c "region 'tpu-mxu.regs', reason: invalid size" "$LOGS/qemu-$name.log" 2>/dev/null)
	if [ "${refused:-0}" -ge 10 ] && [ "${sizes:-0}" -ge 4 ]; then
		result "$LOGS/vm-$name.tap" ok "vm $name: QEMU logged the guest errors ($refused refused, $sizes bad sizes)"
	else
		result "$LOGS/vm-$name.tap" fail "vm $name: QEMU logged ${refused:-0} refusals and ${sizes:-0} bad sizes; tpu_hw_test makes at least 10 and 4"
	fi
	[ "$DEBUG" = 0 ] ||
		scripts/debug-reports.sh "$name" "$LOGS/vm-$name.console" | tee "$LOGS/debug-$name.tap"
}
vm_pass defaults "" 2G "$GUEST_CMD" "$selftests"
# 4G of guest RAM puts pages above 4 GiB: DMA must use 64-bit addresses.
vm_pass custom "hbm-size=2G,vmem-size=64M,vmem-limit=32M,smem-size=512K,cores=2,mxu-dim=256,mxu-count=2,peak-flops-bf16=918000000000000,peak-flops-f32=459000000000000,peak-ops-int8=1836000000000000,hbm-bandwidth=1640000000000,step-cost-ns=200,launch-cost-ns=50000,vpu-elems-per-s=12288000000000,eup-elems-per-s=3072000000000" 4G \
	"$(guest_cmd "$CUSTOM_SAMPLES" "$CUSTOM_SELFTESTS")" "$CUSTOM_SELFTESTS"

if [ -n "$host_pid" ]; then
	wait "$host_pid"
	cat "$LOGS/host.out"
fi

# --- summary ---
scripts/tap-run.sh --summary "$LOGS"/*.tap
