#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the debug guest kernel of `make check-debug`, once, in the cache.
#
#   scripts/build-debug-kernel.sh [--print-dir]
#
# From Debian's linux-source-6.1 (the whole tree, extracted once into
# $TPUEMU_CACHE/debug-kernel/src-<version>/): `make tinyconfig`, then
# scripts/debug-kernel.config merged onto it; every line of the fragment
# must hold in the final .config. The result lives in
# $TPUEMU_CACHE/debug-kernel/<version>-<sha of the fragment>/: bzImage, and
# build/, the object tree trimmed to what `make -C build M=... modules`
# needs to build tpu.ko against it. A finished directory is never rebuilt;
# editing the fragment makes a new one. A cold build takes about half an
# hour on 2 cores (KASAN and lockdep on every object); it runs under
# `nice -n 10` with -j2 (DEBUG_KERNEL_JOBS), its log in the directory.
# --print-dir prints the directory (built or not) and does nothing else.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TPUEMU_CACHE:-/var/cache/tpuemu}
FRAG=$TOP/scripts/debug-kernel.config
JOBS=${DEBUG_KERNEL_JOBS:-2}
PROGRESS_NAME=build-debug-kernel
. "$TOP/scripts/progress.sh"
. "$TOP/scripts/linux-source.sh"

log() { echo "build-debug-kernel: $*"; }
die() { echo "build-debug-kernel: $*" >&2; exit 1; }

SRCVER=$(apt-cache policy linux-source-6.1 | sed -n 's/.*Candidate: //p')
[ -n "$SRCVER" ] && [ "$SRCVER" != "(none)" ] ||
	die "no linux-source-6.1 in the package index: run 'make deps' first"
KEY=$SRCVER-$(sha1sum < "$FRAG" | cut -c1-12)
OUT=$CACHE/debug-kernel/$KEY
SRC=$CACHE/debug-kernel/src-$SRCVER
B=$OUT/build

if [ "${1:-}" = --print-dir ]; then
	echo "$OUT"
	exit 0
fi
if [ -f "$OUT/.done" ]; then
	log "$OUT (already built)"
	exit 0
fi

# What building a kernel needs beyond `make deps`.
need=()
for p in flex bison bc libelf-dev libssl-dev; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || die "missing ${need[*]}: install them (as root) first"
	log "installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi

# The whole source tree: `make M=` against the build needs it too.
if [ ! -f "$SRC/.done" ]; then
	log "fetching linux-source-6.1 $SRCVER"
	linux_source_extract "$SRC"
	touch "$SRC/.done"
fi

rm -rf "$OUT" && mkdir -p "$B"
kmake() { nice -n 10 make -C "$SRC" O="$B" ARCH=x86_64 "$@"; }

log "configuring in $B"
kmake tinyconfig > "$OUT/config.log" 2>&1 || { tail -n 20 "$OUT/config.log" >&2; die "tinyconfig failed"; }
"$SRC/scripts/kconfig/merge_config.sh" -m -O "$B" "$B/.config" "$FRAG" >> "$OUT/config.log" 2>&1
kmake olddefconfig >> "$OUT/config.log" 2>&1 || { tail -n 20 "$OUT/config.log" >&2; die "olddefconfig failed"; }

# Every line of the fragment as written, or Kconfig dropped it (a missing
# dependency) and the kernel would not check what we think it checks.
lost=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=*) want=$line ;;
	"# CONFIG_"*" is not set") want=$line ;;
	*) continue ;;
	esac
	name=${want#\# }; name=${name%%[= ]*}
	got=$(grep -E "^(# )?$name[= ]" "$B/.config" || echo "$name absent")
	if [ "$got" != "$want" ]; then
		# An unset option may also be absent: its menu is off.
		case "$want" in "# "*) [ "$got" = "$name absent" ] && continue ;; esac
		echo "build-debug-kernel: wanted '$want', .config has '$got'" >&2
		lost=1
	fi
done < "$FRAG"
[ "$lost" = 0 ] || die "the debug config did not come out as written (see above); fix $FRAG"

log "building (nice -n 10, -j$JOBS; log in $OUT/build.log)"
set +e
kmake -j"$JOBS" all 2>&1 | tee "$OUT/build.log" | { grep --line-buffered -E '^  [A-Z]' | progress_lines; }
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
	grep -v '^  [A-Z]' "$OUT/build.log" | tail -n 40 >&2
	die "kernel build failed; full log in $OUT/build.log"
fi

# Keep what an out-of-tree module build reads (.config, generated headers,
# Module.symvers, scripts/ and objtool, Makefile); drop the objects.
cp "$B/arch/x86/boot/bzImage" "$OUT/bzImage"
find "$B" \( -path "$B/scripts" -o -path "$B/tools" \) -prune -o \
	\( -name '*.o' -o -name '*.a' -o -name '*.o.cmd' \) -type f -print0 | xargs -0 rm -f
rm -f "$B/vmlinux" "$B/vmlinux.o" "$B"/.tmp_vmlinux* "$B/arch/x86/boot/compressed/vmlinux"*
echo "$KEY" > "$OUT/.done"
log "$OUT ($(du -sh "$OUT" | cut -f1))"
