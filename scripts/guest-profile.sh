#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Where the guest's instructions go while COMMAND runs in the VM, by function.
#
#   scripts/guest-profile.sh [--per N] [--top K] [--no-baseline] -- COMMAND...
#
# Under TCG every guest instruction is emulated, so a null job's round trip
# is mostly guest kernel code, and no profiler inside the guest works there
# (ftrace's function patching soft-locks it). This boots the VM on a QEMU
# built with TCG plugins (QEMU_VARIANT=profile scripts/build-qemu.sh, built
# here the first time) with tools/tcg_tb_count.c loaded, which counts each
# translated block's runs; the kernel boots with nokaslr, the guest prints
# where its modules' code is, and scripts/guest-profile.py turns the counts
# into instructions per function (kernel, modules, user space as one line).
# Debian's System.map is a stub, so the kernel's own symbols come from the
# guest's /proc/kallsyms, read once per kernel (nokaslr keeps them where
# they were) and kept in the cache.
# A program that marks where to count (tools/tcg_tb_count.c says how;
# bench_submit's BENCH_SUBMIT_JOBS does) is counted between its marks. For
# one that does not, a second boot that runs only `true` is the baseline,
# taken off each function's count, so boot and shutdown mostly drop out
# (--no-baseline keeps them; calibration loops and the like, timed, differ
# from boot to boot and stay in the noise).
# --per N divides by N (the number of jobs COMMAND ran, say); --top K lines.
# vm-run.sh's environment (VM_ENV, --add files as "ADD=FILE ...") applies.
#
# Example, 2000 null jobs, one at a time:
#   scripts/guest-profile.sh --per 2000 -- env BENCH_SUBMIT_JOBS=2000 bench_submit
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TPUEMU_CACHE:-/var/cache/tpuemu}
BUILD=${BUILD:-$TOP/build}
PER=1
TOPN=40
BASELINE=1
while [ $# -gt 0 ]; do
	case "$1" in
	--per) PER=$2; shift ;;
	--top) TOPN=$2; shift ;;
	--no-baseline) BASELINE=0 ;;
	--) shift; break ;;
	*) break ;;
	esac
	shift
done
[ $# -gt 0 ] || { echo "guest-profile: no command" >&2; exit 2; }

QEMU=$CACHE/qemu-system-x86_64-profile
[ -x "$QEMU" ] || QEMU_VARIANT=profile "$TOP/scripts/build-qemu.sh"
QKEY=$(cat "$CACHE/qemu-version")
PLUGIN=$BUILD/tools/tcg_tb_count.so
if [ ! -s "$PLUGIN" ] || [ "$TOP/tools/tcg_tb_count.c" -nt "$PLUGIN" ]; then
	mkdir -p "$(dirname "$PLUGIN")"
	# shellcheck disable=SC2046
	gcc -O2 -Wall -shared -fPIC -o "$PLUGIN" "$TOP/tools/tcg_tb_count.c" \
		-I"$CACHE/qemu/$QKEY/src/include/qemu" $(pkg-config --cflags glib-2.0)
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
ABI=$(cat "$CACHE/kernel-abi")
APPEND="console=ttyS0 quiet loglevel=3 panic=-1 oops=panic nokaslr tsc=reliable"
# Each module's code address, on a line of its own before the command runs.
BASES='for m in /sys/module/*/sections/.text; do
	n=${m#/sys/module/}; echo "TPUEMU-MODULE ${n%%/*} $(cat $m)"; done'

boot() {	# boot OUT COMMAND...: counts into OUT.blocks, console into OUT.log
	local out=$1
	shift
	VM_QEMU=$QEMU VM_APPEND=$APPEND \
	QEMU_EXTRA_ARGS="-plugin $PLUGIN,out=$out.blocks ${QEMU_EXTRA_ARGS:-}" \
		"$TOP/scripts/vm-run.sh" --timeout 900 -- "$BASES; $*" | tee "$out.log"
}

KALLSYMS=$CACHE/kernel/$ABI/kallsyms-nokaslr
if [ ! -s "$KALLSYMS" ]; then
	echo "guest-profile: reading the kernel's symbols into $KALLSYMS"
	VM_APPEND=$APPEND "$TOP/scripts/vm-run.sh" --timeout 300 -- \
		"echo TPUEMU-KALLSYMS-BEGIN; grep -v '\[' /proc/kallsyms |
		grep ' [tTwW] ' | gzip -1 | base64; echo TPUEMU-KALLSYMS-END" \
		> "$WORK/kallsyms.log"
	sed -n '/^TPUEMU-KALLSYMS-BEGIN/,/^TPUEMU-KALLSYMS-END/p' "$WORK/kallsyms.log" |
		sed '1d;$d' | base64 -d | gunzip > "$KALLSYMS.$$"
	mv "$KALLSYMS.$$" "$KALLSYMS"
fi

boot "$WORK/run" "$@"
if [ "$BASELINE" = 1 ] && grep -q '^# marks 0' "$WORK/run.blocks"; then
	boot "$WORK/base" true > /dev/null
	BASE_ARGS=(--baseline "$WORK/base.blocks")
fi
/usr/bin/python3 "$TOP/scripts/guest-profile.py" \
	--blocks "$WORK/run.blocks" ${BASE_ARGS[@]+"${BASE_ARGS[@]}"} \
	--console "$WORK/run.log" \
	--kallsyms "$KALLSYMS" \
	--modules "$CACHE/kernel/$ABI/lib/modules/$ABI/kernel" \
	--module tpu="${VM_TPU_KO:-$TOP/tpu.ko}" --per "$PER" --top "$TOPN"
