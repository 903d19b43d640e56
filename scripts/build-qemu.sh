#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build a minimal qemu-system-x86_64 with the tpu-mxu device, in the cache.
#
# The source tree and build directory live in $TPUEMU_CACHE/qemu/<version>/,
# keyed by Debian's QEMU version (scripts/deps.sh fetches the source). This
# checkout's qemu-device/ and uapi/ are linked into the tree as hw/tpu-mxu,
# so editing the device rebuilds a few objects, not QEMU. A first build takes
# minutes: configure says it is still running every 10 s, and ninja's
# progress ("[N/M] ...") shows at least that often.
#
# QEMU_VARIANT=asan builds the same tree with ASan and UBSan
# (--enable-sanitizers) into build-asan/ beside build/, linked as
# qemu-system-x86_64-asan, for `make check-debug`; QEMU_VARIANT=profile
# builds it with TCG plugins (--enable-plugins) into build-profile/, linked
# as qemu-system-x86_64-profile, for scripts/guest-profile.sh. The default
# variant is unchanged.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TPUEMU_CACHE:-/var/cache/tpuemu}
PROGRESS_NAME=build-qemu
. "$TOP/scripts/progress.sh"
QKEY=$(cat "$CACHE/qemu-version" 2>/dev/null) || {
	echo "build-qemu: no QEMU source in $CACHE: run 'make deps' first" >&2
	exit 1
}
SRC=$CACHE/qemu/$QKEY/src
BUILD=$CACHE/qemu/$QKEY/build
BINARY=qemu-system-x86_64
VARIANT_ARGS=()
case "${QEMU_VARIANT:-}" in
"") ;;
asan)
	BUILD=$BUILD-asan BINARY=$BINARY-asan
	# QEMU 7.2's configure probes UBSan with a program that gcc 12
	# rejects under -Werror, and then leaves it out without a word:
	# ask for it directly.
	VARIANT_ARGS=(--enable-sanitizers --extra-cflags=-fsanitize=undefined
		--extra-ldflags=-fsanitize=undefined)
	;;
profile)
	BUILD=$BUILD-profile BINARY=$BINARY-profile
	VARIANT_ARGS=(--enable-plugins)
	;;
*) echo "build-qemu: QEMU_VARIANT must be empty, asan or profile" >&2; exit 2 ;;
esac
export CCACHE_DIR=$CACHE/ccache

# The smallest change to QEMU's own files: a Kconfig source line, a meson
# subdir and a trace-events subdir.
if ! patch -d "$SRC" -p1 -R --dry-run -s -f < "$TOP/qemu-device/qemu-tree.patch" >/dev/null 2>&1; then
	patch -d "$SRC" -p1 -s -f < "$TOP/qemu-device/qemu-tree.patch"
fi

# hw/tpu-mxu: one link per entry (the device, the uAPI and the device's
# rules), so the tree follows whichever checkout builds it.
mkdir -p "$SRC/hw/tpu-mxu"
for f in "$TOP"/qemu-device/* "$TOP/uapi" "$TOP/rules"; do
	case "$(basename "$f")" in
	*.patch) continue ;;
	esac
	ln -sfn "$f" "$SRC/hw/tpu-mxu/$(basename "$f")"
done
for l in "$SRC"/hw/tpu-mxu/*; do
	[ -e "$l" ] || rm -f "$l"	# dangling: removed from qemu-device/
done

# Written only when it changes: it is one of meson's inputs, and a newer
# one makes ninja regenerate the build files (half a minute) every time.
devices_mak=$SRC/configs/devices/x86_64-softmmu/tpuemu.mak
cat > "$devices_mak.new" <<'MAK'
# tpuemu: q35 and microvm with the tpu-mxu device and nothing else on PCI.
CONFIG_PCI_DEVICES=n
CONFIG_Q35=y
CONFIG_MICROVM=y
CONFIG_TPU_MXU=y
MAK
if cmp -s "$devices_mak.new" "$devices_mak"; then
	rm -f "$devices_mak.new"
else
	mv "$devices_mak.new" "$devices_mak"
fi

CONFIGURE_ARGS=(--target-list=x86_64-softmmu --without-default-features
	--without-default-devices --with-devices-x86_64=tpuemu
	--enable-kvm --enable-tcg --enable-trace-backends=log
	--disable-docs --disable-werror --disable-install-blobs
	--audio-drv-list= --disable-user ${VARIANT_ARGS[@]+"${VARIANT_ARGS[@]}"})
key=$(echo "${CONFIGURE_ARGS[*]}" | sha1sum | cut -c1-12)
if [ ! -f "$BUILD/build.ninja" ] || [ "$(cat "$BUILD/.configure-key" 2>/dev/null)" != "$key" ]; then
	rm -rf "$BUILD"
	mkdir -p "$BUILD"
	echo "build-qemu: configuring QEMU $QKEY in $BUILD"
	(cd "$BUILD" && progress_run "configuring" configure.log \
		"$SRC/configure" "${CONFIGURE_ARGS[@]}")
	echo "$key" > "$BUILD/.configure-key"
fi
# Ninja goes by mtimes, and the links above may now point at another
# checkout whose files are older than the objects built from the last one:
# key the device's objects by the content of the files they come from.
dkey=$(find -L "$TOP/qemu-device" "$TOP/uapi" "$TOP/rules" -type f \
	\( -name '*.[ch]' -o -name meson.build -o -name trace-events \) |
	sort | xargs cat | sha1sum | cut -c1-16)
if [ "$(cat "$BUILD/.tpu-mxu-key" 2>/dev/null)" != "$dkey" ]; then
	find "$BUILD" -path '*tpu-mxu*' \( -name '*.o' -o -name '*.a' \) -delete
fi
set +e
ninja -C "$BUILD" qemu-system-x86_64 2>&1 | tee "$BUILD/ninja.log" |
	{ grep --line-buffered '^\[' | progress_lines; }
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
	grep -v '^\[' "$BUILD/ninja.log" | tail -n 40 >&2
	echo "build-qemu: build failed; full log in $BUILD/ninja.log" >&2
	exit 1
fi
echo "$dkey" > "$BUILD/.tpu-mxu-key"
ln -sfn "$BUILD/qemu-system-x86_64" "$CACHE/$BINARY"
echo "build-qemu: $CACHE/$BINARY"
