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
# Environment: ACCEL=tcg (default) or kvm; VM_TCG_OPTS, more -accel tcg
# options (thread=single, tb-size=...); VM_PVH=0 boots the kernel's
# bzImage as it is (by default its ELF, below); QEMU_DEVICE_OPTS, extra tpu-mxu
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
#
# Python: --python adds Debian's python3 with numpy and cffi, the tree's
# python/tpuemu package and samples/py (in /tmp/samples/py, so
# "python3 samples/py/matmul.py" runs from the folder COMMAND starts in);
# a COMMAND that runs python3 gets it without asking.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TPUEMU_CACHE:-/var/cache/tpuemu}
BUILD=${BUILD:-$TOP/build}
case "$BUILD" in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
# The engine in QEMU computes with OpenBLAS: its real kernels for this host.
. "$TOP/scripts/blas-env.sh"
ACCEL=${ACCEL:-tcg}
VM_MEM=${VM_MEM:-2G}
VM_SMP=${VM_SMP:-2}
TIMEOUT=600
SHELL_MODE=0
LOG=
LIST=0
ADD=()
PYTHON=0

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
	--python) PYTHON=1 ;;
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

# Programs (their shared libraries: the library pass below).
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

# --- Python (--python, or a COMMAND that runs python3) ---
# Debian's python3 (the version /usr/bin/python3 names) without what a
# kernel script never imports (tests, IDLE, Tk, pip's bootstrap, 2to3, docs,
# distutils, the static libpython, and the extension modules behind
# OpenSSL, SQLite, curses, readline and Berkeley DB); numpy (without its
# tests, f2py and headers), cffi, pycparser and ply from dist-packages;
# python/tpuemu byte-compiled, with its cffi declarations parsed here
# (out-of-line ABI mode), so the guest's slow CPU does neither at every
# start. NumPy gets Debian's reference BLAS and LAPACK (libblas3,
# liblapack3) where they are installed: 11 MB against OpenBLAS's 40, and
# the samples' NumPy references are small.
#
# Python itself, NumPy and their libraries do not change from run to run:
# they are one cpio archive built once into $CACHE/vm (keyed by this
# function's text and the installed packages' versions), given to the
# kernel ahead of the run's own archive (the kernel unpacks concatenated
# archives in turn), which adds tpuemu and the samples. Building it took
# 3 s of every run. Both archives are left uncompressed: the guest's
# emulated CPU inflating gzip cost more than QEMU reading 60 MB more
# (vm-run --python -- true 6.3 s, 4.9 s uncompressed).
PY_DIST=/usr/lib/python3/dist-packages
REF_BLAS=/usr/lib/x86_64-linux-gnu/blas/libblas.so.3
REF_LAPACK=/usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3
PY_BASE=
python_base() {	# python_base DIR: Python, NumPy, cffi and their libraries
	local base=$1 py lib so libdir=$1/lib/x86_64-linux-gnu
	py=$(readlink /usr/bin/python3 || true)
	[ -x "/usr/bin/$py" ] && [ -d "/usr/lib/$py" ] && [ -d "$PY_DIST/numpy" ] && [ -d "$PY_DIST/cffi" ] ||
		{ echo "vm-run: --python needs Debian's python3, python3-numpy and python3-cffi (make deps)" >&2; exit 2; }
	mkdir -p "$base/usr/bin" "$base$PY_DIST" "$libdir"
	cp "/usr/bin/$py" "$base/usr/bin/$py"
	ln -sf "$py" "$base/usr/bin/python3"
	tar -C /usr/lib -c \
		--exclude="$py/"{test,idlelib,tkinter,turtledemo,ensurepip,lib2to3,pydoc_data,distutils,venv,dist-packages,site-packages,'config-*',turtle.py} \
		--exclude='lib-dynload/'{_ssl,_hashlib,_sqlite3,_dbm,_curses,_curses_panel,readline,nis,ossaudiodev,_test,_xx,xxlimited,_ctypes_test}'*' \
		"$py" | tar -C "$base/usr/lib" -x
	(cd "$PY_DIST" && tar -c --exclude='tests' --exclude='numpy/'{f2py,distutils,array_api,_pyinstaller,doc} \
		--exclude='*.pyi' --exclude='*.h' --exclude='*.a' --exclude='*.pxd' --exclude='*.c' \
		numpy cffi pycparser ply _cffi_backend.*.so) | tar -C "$base$PY_DIST" -x
	if [ -e "$REF_BLAS" ] && [ -e "$REF_LAPACK" ]; then
		cp -L "$REF_BLAS" "$REF_LAPACK" "$libdir/"
	fi
	# The libraries of every ELF file above, the guest's copies first.
	for so in "$base/usr/bin/$py" "$libdir"/lib{blas.so.3,lapack.so.3} \
		$(find "$base/usr/lib/$py/lib-dynload" "$base$PY_DIST" -name '*.so'); do
		[ -e "$so" ] || continue
		{ LD_LIBRARY_PATH=$libdir ldd "$so" 2>/dev/null || true; } | awk '/=> \// { print $3 }'
	done | sort -u | while read -r lib; do
		case "$lib" in "$base"/*) continue ;; esac
		[ -e "$libdir/${lib##*/}" ] || cp -L "$lib" "$libdir/"
	done
}
add_python() {
	local key
	key=$( { declare -f python_base; dpkg-query -W -f='${Package} ${Version}\n'; } |
		sha256sum | cut -c1-16)
	PY_BASE=$CACHE/vm/python-$key.cpio
	if [ ! -f "$PY_BASE" ]; then
		python_base "$WORK/pybase"
		mkdir -p "$CACHE/vm"
		# Older keys' archives, not another run's half-written one.
		find "$CACHE/vm" -name 'python-*' ! -name '*.[0-9]*' -delete
		(cd "$WORK/pybase" && find . | cpio -o -H newc --quiet) > "$PY_BASE.$$"
		mv "$PY_BASE.$$" "$PY_BASE"
		rm -rf "$WORK/pybase"
	fi
	mkdir -p "$ROOT$PY_DIST"
	cp -a "$TOP/python/tpuemu" "$ROOT$PY_DIST/tpuemu"
	find "$ROOT$PY_DIST/tpuemu" -name __pycache__ -prune -exec rm -rf {} +
	# cffi's out-of-line ABI module (tpuemu/_ffi.py): declarations parsed here
	/usr/bin/python3 -c 'import cffi, runpy, sys
b = cffi.FFI(); b.cdef(runpy.run_path(sys.argv[1])["CDEF"]); b.set_source("tpuemu._ffi", None)
b.emit_python_code(sys.argv[2])' "$TOP/python/tpuemu/_cdef.py" "$ROOT$PY_DIST/tpuemu/_ffi.py" >/dev/null
	/usr/bin/python3 -m compileall -q "$ROOT$PY_DIST/tpuemu" >/dev/null
	[ ! -e "$ROOT/added/samples" ] ||
		{ echo "vm-run: --python puts samples/py in /tmp/samples: --add a folder with another name" >&2; exit 2; }
	mkdir -p "$ROOT/added/samples"
	cp -a "$TOP/samples/py" "$ROOT/added/samples/py"
	# The package's loader finds libtpurt.so.0 where the loader looks; the
	# library pass below adds what it needs.
	cp -L "$BUILD/lib/libtpurt.so.0" "$ROOT/lib/x86_64-linux-gnu/"
}
if [ "$PYTHON" = 1 ] || [[ "$COMMAND" =~ (^|[^[:alnum:]_.-])python3(\.[0-9]+)?([^[:alnum:]_.-]|$) ]]; then
	add_python
fi

# The shared libraries of every program above (and of libtpurt for Python),
# from one ldd for all of them (one each took a second of every boot).
progs=()
for prog in "$ROOT"/bin/* "$ROOT"/usr/bin/* "$ROOT"/kselftest/*/* "$ROOT"/added/** \
	"$ROOT"/lib/x86_64-linux-gnu/*; do
	[ -L "$prog" ] || [ ! -f "$prog" ] || progs+=("$prog")
done
{ LD_LIBRARY_PATH=$BUILD/lib ldd "${progs[@]}" 2>/dev/null || true; } |
	awk '/=> \// { print $3 } /^\t\/lib64\// { print $1 }' |
	sort -u | while read -r lib; do
	case "$lib" in
	/lib64/*) cp -L "$lib" "$ROOT/lib64/" ;;
	*) cp -L "$lib" "$ROOT/lib/x86_64-linux-gnu/" ;;
	esac
done

cp "$TOP/scripts/tap-run.sh" "$ROOT/bin/tap-run"
cp "$TOP/scripts/run-lanes.sh" "$ROOT/bin/run-lanes"

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

(cd "$ROOT" && find . | cpio -o -H newc --quiet) > "$WORK/run.cpio"
if [ "$LIST" = 1 ]; then
	for part in $PY_BASE "$WORK/run.cpio"; do
		cpio -t --quiet < "$part"
	done | sort -u
	exit 0
fi
cat $PY_BASE "$WORK/run.cpio" > "$WORK/initramfs"

# The guest's CPU is emulated: a bzImage's own xz decompression costs
# about 10 s of every boot under TCG. Boot the ELF inside it instead, by
# its PVH entry (CONFIG_PVH), extracted once into $BUILD/vm; a kernel
# without one boots as it is, and so does any with VM_PVH=0.
pvh_kernel() {	# pvh_kernel BZIMAGE: prints the file to boot
	local bz=$1 elf off
	elf=$BUILD/vm/$(basename "$bz")-$(cksum <<<"$bz" | cut -d' ' -f1).elf
	if [ ! -s "$elf" ] || [ "$bz" -nt "$elf" ]; then
		mkdir -p "$BUILD/vm"
		off=$(grep -abo -m1 $'\xfd7zXZ' "$bz" | head -n 1 | cut -d: -f1) || true
		if [ -n "$off" ] &&
			{ tail -c +$((off + 1)) "$bz" | xz -dcq > "$elf.$$" 2>/dev/null || true; } &&
			readelf -n "$elf.$$" 2>/dev/null | grep -q 'type: (0x00000012)'; then
			mv "$elf.$$" "$elf"
		else
			rm -f "$elf.$$"
			echo "$bz"
			return
		fi
	fi
	echo "$elf"
}
[ "${VM_PVH:-1}" = 0 ] || KERNEL=$(pvh_kernel "$KERNEL")

# Under TCG every vCPU's TSC is QEMU's one monotonic tick count, but the
# guest sees an AMD CPU without invariant TSC (TCG cannot offer it) and on
# two CPUs calls its TSCs unsynchronized: it then clocks itself with the
# ACPI PM timer, an I/O-port exit per read (clock_gettime included, the
# vDSO cannot read it). Tell it the truth.
[ "$ACCEL" != tcg ] || case " $APPEND " in
*" tsc="*) ;;
*) APPEND+=" tsc=reliable" ;;
esac

DEVICE=tpu-mxu${QEMU_DEVICE_OPTS:+,$QEMU_DEVICE_OPTS}
QEMU_ARGS=(-M q35 -nodefaults -display none -no-reboot
	-m "$VM_MEM" -smp "$VM_SMP"
	-L /usr/share/seabios -L /usr/share/qemu
	-kernel "$KERNEL" -initrd "$WORK/initramfs"
	-append "$APPEND"
	-device "$DEVICE" ${QEMU_EXTRA_ARGS:-})
case "$ACCEL" in
tcg) QEMU_ARGS+=(-accel "tcg${VM_TCG_OPTS:+,$VM_TCG_OPTS}") ;;
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
	why="qemu exit $qemu_rc"
	# QEMU itself died: name the signal (SIGILL: an instruction the host lacks)
	[ "$qemu_rc" -gt 128 ] && why="$why: QEMU killed by SIG$(kill -l $((qemu_rc - 128)))"
	echo "vm-run: guest ended without an exit code ($why)" >&2
	exit 125
fi
if grep -q '^TPUEMU-KERNEL-UNHAPPY' "$OUT"; then
	echo "vm-run: the guest kernel warned or oopsed during the run" >&2
	[ "$rc" != 0 ] || rc=1
fi
exit "$rc"
