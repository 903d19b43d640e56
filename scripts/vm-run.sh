#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Boot the guest kernel with the tpu-mxu device and run one command in it.
#
#   scripts/vm-run.sh [--shell] [--timeout SECONDS] [--log FILE] [-- COMMAND...]
#
# The initramfs holds busybox, the DRM modules tpu.ko needs, tpu.ko itself,
# every program in $BUILD/guest/bin and the shared libraries they use, the
# test runner scripts/tap-run.sh as /bin/tap-run, and the selftests as the
# kernel's kselftest install lays them out ($BUILD/guest/kselftest, from
# `make guest-selftests`) in /kselftest, with what its run_kselftest.sh
# uses. The guest loads the modules, runs COMMAND with /bin/sh, prints its
# exit code on the serial console and powers off; this script exits with
# that code, or 124 if the guest did not finish in time, 125 if it died
# without an answer. The console shows as it comes; when the guest says
# nothing for 10 s, a line on stderr says it is still running.
#
# Environment: ACCEL=tcg (default) or kvm; QEMU_DEVICE_OPTS, extra tpu-mxu
# properties (hbm-size=2G,cores=2); VM_MEM (default 2G); VM_SMP (default 2);
# VM_ENV, "NAME=VALUE ..." exported to COMMAND; QEMU_EXTRA_ARGS, more QEMU
# options (e.g. "-d guest_errors -D FILE"); BUILD (default build);
# TPUEMU_CACHE (default /var/cache/tpuemu).
#
# Another kernel, driver or QEMU (scripts/check-debug.sh swaps them all):
# VM_KERNEL, the kernel image; VM_MODULES, the folder searched for the
# modules tpu.ko depends on (none when the kernel has them built in);
# VM_TPU_KO, the tpu.ko built for that kernel; VM_QEMU, the QEMU binary;
# VM_APPEND, the kernel command line. Defaults: Debian's kernel and its
# modules, ./tpu.ko, the cache's qemu-system-x86_64, and a quiet console
# where an oops panics.
#
# Your own files: --add FILE (a file or a folder, repeatable) copies it into
# /tmp, the folder COMMAND starts in, under its own name, with the shared
# libraries of the programs among them, so
#   scripts/vm-run.sh --add ./myprog -- ./myprog
# runs a program built against build/lib/libtpurt.so or an installed
# libtpurt. --list builds the initramfs and lists it instead of booting.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TPUEMU_CACHE:-/var/cache/tpuemu}
BUILD=${BUILD:-$TOP/build}
case "$BUILD" in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
ACCEL=${ACCEL:-tcg}
VM_MEM=${VM_MEM:-2G}
VM_SMP=${VM_SMP:-2}
TIMEOUT=600
SHELL_MODE=0
LOG=
LIST=0
ADD=()

while [ $# -gt 0 ]; do
	case "$1" in
	--shell) SHELL_MODE=1 ;;
	--timeout) TIMEOUT=$2; shift ;;
	--log) LOG=$2; shift ;;
	--add)
		[ $# -ge 2 ] || { echo "vm-run: --add needs a FILE" >&2; exit 2; }
		[ -e "$2" ] || { echo "vm-run: --add $2: no such file or folder" >&2; exit 2; }
		ADD+=("$2"); shift ;;
	--list) LIST=1 ;;
	--) shift; break ;;
	*) break ;;
	esac
	shift
done
COMMAND="$*"
[ -n "$COMMAND" ] || [ "$SHELL_MODE" = 1 ] || [ "$LIST" = 1 ] ||
	{ echo "vm-run: no command" >&2; exit 2; }

ABI=$(cat "$CACHE/kernel-abi")
KROOT=$CACHE/kernel/$ABI
KERNEL=${VM_KERNEL:-$KROOT/boot/vmlinuz-$ABI}
MODULES=${VM_MODULES:-$KROOT/lib/modules/$ABI/kernel}
QEMU=${VM_QEMU:-$CACHE/qemu-system-x86_64}
TPU_KO=${VM_TPU_KO:-$TOP/tpu.ko}
APPEND=${VM_APPEND:-console=ttyS0 quiet loglevel=3 panic=-1 oops=panic}
for f in "$KERNEL" "$QEMU" "$TPU_KO"; do
	[ -e "$f" ] || { echo "vm-run: missing $f (run 'make' first)" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpuemu-vm.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
ROOT=$WORK/root
mkdir -p "$ROOT"/{bin,dev,proc,sys,tmp,etc,lib/modules,usr/bin}

# busybox as every tool
cp /bin/busybox "$ROOT/bin/busybox"
for tool in $("$ROOT/bin/busybox" --list); do
	[ -e "$ROOT/bin/$tool" ] || ln -s busybox "$ROOT/bin/$tool"
done

# Kernel modules, dependencies before dependants.
declare -A seen=()
order=()
find_module() {
	local pattern=${1//[-_]/[-_]}
	find "$MODULES" -name "$pattern.ko" -print -quit
}
add_module() {
	local path=$1 dep
	[ -n "${seen[$path]:-}" ] && return
	seen[$path]=1
	for dep in $(modinfo -F depends "$path" | tr ',' ' '); do
		local dpath
		dpath=$(find_module "$dep")
		[ -n "$dpath" ] || { echo "vm-run: module $dep not found" >&2; exit 2; }
		add_module "$dpath"
	done
	order+=("$path")
}
add_module "$TPU_KO"
for m in "${order[@]}"; do
	cp "$m" "$ROOT/lib/modules/"
	[ "$m" = "$TPU_KO" ] || basename "$m" >> "$ROOT/etc/modules.load"
done
touch "$ROOT/etc/modules.load"

# The user's files (--add) in /added, which init copies into /tmp (a tmpfs
# over the initramfs's); the library pass below covers their programs.
mkdir -p "$ROOT/added"
for f in ${ADD[@]+"${ADD[@]}"}; do
	name=$(basename "$f")
	[ ! -e "$ROOT/added/$name" ] ||
		{ echo "vm-run: --add: two files named $name" >&2; exit 2; }
	cp -a "$f" "$ROOT/added/$name"
done
shopt -s globstar

# Programs and the shared libraries they need.
if [ -d "$BUILD/guest/bin" ]; then
	cp -a "$BUILD/guest/bin/." "$ROOT/bin/"
fi

# The selftests under the kernel's runner, and what it uses: perl for its
# prefix.pl (which passes a test's lines on as they come; busybox's sed,
# its fallback, holds them until the test ends) and /usr/bin/timeout for
# settings' timeout: busybox's, given coreutils' --foreground.
PERL_LIB=/usr/lib/x86_64-linux-gnu/perl-base
if [ -d "$BUILD/guest/kselftest" ]; then
	cp -a "$BUILD/guest/kselftest" "$ROOT/kselftest"
	cp /usr/bin/perl "$ROOT/usr/bin/perl"
	mkdir -p "$ROOT$PERL_LIB"
	cp -a "$PERL_LIB/." "$ROOT$PERL_LIB/"
	ln -s ../../bin/busybox "$ROOT/usr/bin/env"
	cat > "$ROOT/usr/bin/timeout" <<'TIMEOUT'
#!/bin/sh
[ "$1" = --foreground ] && shift
exec busybox timeout "$@"
TIMEOUT
	chmod +x "$ROOT/usr/bin/timeout"
fi

mkdir -p "$ROOT/lib64" "$ROOT/lib/x86_64-linux-gnu"
for prog in "$ROOT"/bin/* "$ROOT"/usr/bin/* "$ROOT"/kselftest/*/* "$ROOT"/added/**; do
	[ -L "$prog" ] && continue
	{ LD_LIBRARY_PATH=$BUILD/lib ldd "$prog" 2>/dev/null || true; } | awk '/=> \// { print $3 } /^\t\/lib64\// { print $1 }'
done | sort -u | while read -r lib; do
	case "$lib" in
	/lib64/*) cp -L "$lib" "$ROOT/lib64/" ;;
	*) cp -L "$lib" "$ROOT/lib/x86_64-linux-gnu/" ;;
	esac
done

cp "$TOP/scripts/tap-run.sh" "$ROOT/bin/tap-run"

cat > "$ROOT/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# What udev would add: the kselftest runner writes to /dev/stdout.
ln -s /proc/self/fd /dev/fd
for f in 0:stdin 1:stdout 2:stderr; do ln -s /proc/self/fd/${f%%:*} /dev/${f#*:}; done
mount -t tmpfs tmp /tmp
mount -t debugfs debugfs /sys/kernel/debug
export PATH=/bin:/usr/bin TPU_KO=/lib/modules/tpu.ko
for m in $(cat /etc/modules.load); do
	insmod /lib/modules/$m || echo "init: insmod $m failed"
done
insmod $TPU_KO || echo "init: insmod tpu.ko failed"
cp -a /added/. /tmp/
. /etc/run.env
if [ -e /etc/shell ]; then
	setsid cttyhack sh -l
	rc=$?
else
	cd /tmp
	sh /etc/run.sh
	rc=$?
fi
# Taint bits 7 (oops) and 9 (warning): the kernel was unhappy during the run.
taint=$(cat /proc/sys/kernel/tainted)
if [ $((taint & 640)) -ne 0 ]; then
	echo "TPUEMU-KERNEL-UNHAPPY taint=$taint"
	dmesg | tail -n 60
fi
echo "TPUEMU-EXIT=$rc"
poweroff -f
INIT
chmod +x "$ROOT/init"
printf '%s\n' "$COMMAND" > "$ROOT/etc/run.sh"
: > "$ROOT/etc/run.env"
for kv in ${VM_ENV:-}; do
	printf 'export %q\n' "$kv" >> "$ROOT/etc/run.env"
done
[ "$SHELL_MODE" = 1 ] && touch "$ROOT/etc/shell"

(cd "$ROOT" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initramfs.gz"
if [ "$LIST" = 1 ]; then
	gzip -dc "$WORK/initramfs.gz" | cpio -t --quiet | sort
	exit 0
fi

DEVICE=tpu-mxu${QEMU_DEVICE_OPTS:+,$QEMU_DEVICE_OPTS}
QEMU_ARGS=(-M q35 -nodefaults -display none -no-reboot
	-m "$VM_MEM" -smp "$VM_SMP"
	-L /usr/share/seabios -L /usr/share/qemu
	-kernel "$KERNEL" -initrd "$WORK/initramfs.gz"
	-append "$APPEND"
	-device "$DEVICE" ${QEMU_EXTRA_ARGS:-})
case "$ACCEL" in
tcg) QEMU_ARGS+=(-accel tcg) ;;
kvm) QEMU_ARGS+=(-accel kvm -cpu host,-arch-capabilities) ;;
*) echo "vm-run: ACCEL must be tcg or kvm" >&2; exit 2 ;;
esac

if [ "$SHELL_MODE" = 1 ]; then
	exec "$QEMU" "${QEMU_ARGS[@]}" -serial mon:stdio
fi

# The console line by line as it comes (into $OUT whole; shown without
# carriage returns and our exit marker), and a word on stderr when the
# guest has been quiet for QUIET seconds, with the last thing it said.
QUIET=10
console() {
	local line part= last= start=$SECONDS rc
	while :; do
		rc=0
		IFS= read -r -t "$QUIET" line || rc=$?
		if [ "$rc" -gt 128 ]; then
			part=$part$line
			echo "vm-run: guest running for $((SECONDS - start)) s, quiet for $QUIET s${last:+ since: ${last:0:72}}" >&2
			continue
		fi
		line=$part$line part=
		[ "$rc" = 0 ] || [ -n "$line" ] || break
		line=${line//$'\r'/}
		printf '%s\n' "$line" >> "$OUT"
		case "$line" in
		TPUEMU-EXIT=* | *'reboot: Power down'*) ;;
		*) printf '%s\n' "$line"; last=$line ;;
		esac
		[ "$rc" = 0 ] || break
	done
}

OUT=$WORK/console.log
: > "$OUT"
echo "vm-run: booting the guest (ACCEL=$ACCEL, $DEVICE)" >&2
set +e
timeout -k 5 "$TIMEOUT" "$QEMU" "${QEMU_ARGS[@]}" -serial stdio < /dev/null 2>&1 | console
qemu_rc=${PIPESTATUS[0]}
set -e
[ -n "$LOG" ] && cp "$OUT" "$LOG"

rc=$(sed -n 's/^TPUEMU-EXIT=\([0-9]*\)$/\1/p' "$OUT" | tail -n 1)
if [ "$qemu_rc" = 124 ] || [ "$qemu_rc" = 137 ]; then
	echo "vm-run: guest did not finish within ${TIMEOUT}s" >&2
	exit 124
fi
if [ -z "$rc" ]; then
	echo "vm-run: guest ended without an exit code (qemu exit $qemu_rc)" >&2
	exit 125
fi
if grep -q '^TPUEMU-KERNEL-UNHAPPY' "$OUT"; then
	echo "vm-run: the guest kernel warned or oopsed during the run" >&2
	[ "$rc" != 0 ] || rc=1
fi
exit "$rc"
