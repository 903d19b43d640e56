#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install everything tpuemu needs from Debian's archive (run as root; idempotent).
# Writes into $TPUEMU_CACHE (default /var/cache/tpuemu): guest kernel, kselftest
# harness headers and the QEMU source tree, each keyed by its Debian version.
set -euo pipefail

CACHE=${TPUEMU_CACHE:-/var/cache/tpuemu}
export DEBIAN_FRONTEND=noninteractive
PROGRESS_NAME=deps
. "$(dirname "$0")/progress.sh"
. "$(dirname "$0")/linux-source.sh"

log() { echo "deps: $*"; }

# apt-cache takes about a second a call here (Debian's images keep no
# pkgcache.bin), three calls of every make run: its answers are kept in
# $CACHE/apt-answers until the package index or the installed set changes.
apt_answer() {	# apt_answer NAME COMMAND...: COMMAND's output, or the kept one
	local f=$CACHE/apt-answers/$1 key out
	key=$(stat -c %Y /var/lib/apt/lists /var/lib/dpkg/status 2>/dev/null | tr '\n' .)
	if [ -f "$f" ] && [ "$(head -n1 "$f")" = "$key" ]; then
		tail -n +2 "$f"
		return
	fi
	out=$("${@:2}")
	if [ -n "$out" ]; then	# not an empty one: the caller fails on it
		mkdir -p "$CACHE/apt-answers"
		printf '%s\n%s\n' "$key" "$out" > "$f"
	fi
	printf '%s\n' "$out"
}
kernel_abi() {
	apt-cache depends linux-image-amd64 | sed -n 's/.*Depends: linux-image-\(.*-amd64\)$/\1/p' | head -n1
}
linux_source_version() {
	apt-cache policy linux-source-6.1 | sed -n 's/.*Candidate: //p'
}
qemu_source_version() {
	apt-cache showsrc qemu | sed -n 's/^Version: //p' | sort -V | tail -n1
}

# apt-get's own progress (downloads, unpacking, setting up), one line each.
apt_progress() {
	sed -un -e 's/^Get:[0-9]* [^ ]* [^ ]* [^ ]* \([^ ]*\) [^ ]* /Downloading \1 /' \
		-e '/^\(Downloading\|Unpacking\|Setting up\)/s/^/deps:   /p'
}

if [ "$(id -u)" -ne 0 ]; then
	exec sudo -E "$0" "$@"
fi
mkdir -p "$CACHE"

# Debian's source index, needed by `apt-get source qemu`.
add_source_index() {
	if grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		return 1
	fi
	log "adding Debian's source index"
	cat > /etc/apt/sources.list.d/tpuemu-deb-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
}

PKGS=(
	# minimal QEMU build
	gcc make pkg-config python3 ninja-build meson libglib2.0-dev libpixman-1-dev
	libfdt-dev zlib1g-dev dpkg-dev patch ccache xz-utils
	# guest image and VM
	busybox-static cpio kmod seabios qemu-system-data
	# userspace libraries of the runtime, samples and selftests
	libdrm-dev liburing-dev libopenblas-dev libsleef-dev
	# driver style and static checks (checkpatch, kernel-doc, sparse); the
	# kselftest runner's output prefixer (in the guest too) and lib.mk's install
	perl sparse rsync
	# fuzzing (make fuzz): libFuzzer, ASan and UBSan runtimes
	clang-14 libclang-rt-14-dev
	# the Python front end (python/tpuemu) and its tests
	python3-cffi python3-numpy python3-pytest
	# plots (make roofline)
	gnuplot-nox
)

need_update=0
add_source_index && need_update=1
# An index older than a day, or a missing package: refresh.
stamp=/var/lib/apt/periodic/tpuemu-update-stamp
if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +1440)" ]; then
	need_update=1
fi
# One dpkg-query for them all (one each took 2 s of every make run). It
# exits 1 when any of them is not installed, the case this is for: that
# must not end the script under pipefail.
missing=()
installed=" $({ dpkg-query -W -f='${Package}:${Status}\n' "${PKGS[@]}" 2>/dev/null || true; } |
	sed -n 's/:install ok installed$//p' | tr '\n' ' ') "
for p in "${PKGS[@]}"; do
	[[ "$installed" == *" $p "* ]] || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] && need_update=1
if [ "$need_update" = 1 ]; then
	log "apt-get update"
	progress_run "updating the package index" "$CACHE/apt-update.log" apt-get update -q
	mkdir -p "$(dirname "$stamp")" && touch "$stamp"
fi
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	apt-get install -y -q --no-install-recommends "${missing[@]}" | apt_progress
fi

# The guest kernel: the ABI that linux-image-amd64 points at.
ABI=$(apt_answer kernel-abi kernel_abi)
[ -n "$ABI" ] || { echo "deps: cannot resolve the kernel ABI from linux-image-amd64" >&2; exit 1; }
echo "$ABI" > "$CACHE/kernel-abi"
if ! dpkg-query -W -f='${Status}' "linux-headers-$ABI" 2>/dev/null | grep -q "ok installed"; then
	log "installing linux-headers-$ABI"
	apt-get install -y -q --no-install-recommends "linux-headers-$ABI" | apt_progress
fi
KDIR=$CACHE/kernel/$ABI
if [ ! -f "$KDIR/.done" ]; then
	log "fetching linux-image-$ABI-unsigned"
	tmp=$(mktemp -d)
	(cd "$tmp" && progress_run "downloading linux-image-$ABI-unsigned" download.log \
		apt-get download -q "linux-image-$ABI-unsigned")
	rm -rf "$KDIR" && mkdir -p "$KDIR"
	dpkg -x "$tmp"/linux-image-*.deb "$KDIR"
	rm -rf "$tmp"
	touch "$KDIR/.done"
fi

# From the linux-source package's tarball (one pass over it: it is large):
# the kernel's own kselftest harness headers, its runner as the kernel's
# `make install` of kselftests lays it out (run_kselftest.sh, kselftest/,
# lib.mk, which selftests/Makefile includes), and checkpatch and kernel-doc.
# The stamp holds this list: a cache extracted with another list is redone.
LS_FILES=(
	tools/testing/selftests/kselftest.h
	tools/testing/selftests/kselftest_harness.h
	tools/testing/selftests/kselftest_module.h
	tools/testing/selftests/lib.mk
	tools/testing/selftests/run_kselftest.sh
	tools/testing/selftests/kselftest/runner.sh
	tools/testing/selftests/kselftest/prefix.pl
	tools/testing/selftests/kselftest/module.sh
	scripts/checkpatch.pl
	scripts/spelling.txt
	scripts/const_structs.checkpatch
	scripts/kernel-doc
)
SRCVER=$(apt_answer linux-source linux_source_version)
LSDIR=$CACHE/linux-source/$SRCVER
if [ "$(cat "$LSDIR/.done" 2>/dev/null)" != "${LS_FILES[*]}" ]; then
	log "extracting the kselftest harness and runner, checkpatch and kernel-doc from linux-source-6.1 $SRCVER"
	linux_source_extract "$LSDIR" "${LS_FILES[@]}"
	echo "${LS_FILES[*]}" > "$LSDIR/.done"
fi
ln -sfn "$LSDIR/tools/testing/selftests" "$CACHE/kselftest"
ln -sfn "$LSDIR/scripts" "$CACHE/kernel-scripts"

# QEMU's source with Debian's patches applied.
QVER=$(apt_answer qemu-source qemu_source_version)
QKEY=${QVER//:/_}
QSRC=$CACHE/qemu/$QKEY/src
if [ ! -f "$QSRC/.done" ]; then
	log "fetching qemu $QVER source"
	rm -rf "$CACHE/qemu/$QKEY/src" "$CACHE/qemu/$QKEY/dl"
	mkdir -p "$CACHE/qemu/$QKEY/dl"
	(cd "$CACHE/qemu/$QKEY/dl" && progress_run "fetching and unpacking the qemu source" \
		../source.log apt-get source -q "qemu=$QVER")
	mv "$CACHE/qemu/$QKEY/dl"/qemu-*/ "$QSRC"
	rm -rf "$CACHE/qemu/$QKEY/dl"
	touch "$QSRC/.done"
fi
echo "$QKEY" > "$CACHE/qemu-version"
log "ok: kernel $ABI, linux-source $SRCVER, qemu $QVER in $CACHE"
