#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Host test: `make install` as a packager and a user meet it. Stage an
# install with DESTDIR, check what lands where (libraries with their
# SONAMEs and symlinks, headers, .pc files, tools; the guest's libtpurt.so
# free of OpenBLAS), then build tests/install/first_kernel.c out of tree
# with nothing but `pkg-config --cflags --libs libtpurt-sim` and run it on
# the in-process device (TPURT_DEVICE=sim:cores=2), which checks its matmul
# against the host. Then PREFIX, the installed tools, and `make uninstall`.
# TAP; the build (make -C) reuses the tree's build folder.
set -u

TOP='@TOP@'
BUILD='@BUILD@'
case "$TOP" in @*) TOP=$(cd "$(dirname "$0")/.." && pwd) ;; esac
case "$BUILD" in @*) BUILD=$TOP/build ;; esac
VERSION=0.1.0

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tpurt-install.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/stage
usr=$stage/usr/local

# shellcheck source=tests/tap.sh
. "$TOP/tests/tap.sh"
# check DESCRIPTION COMMAND...: ok when COMMAND succeeds; its output shown
# as comments when it does not.
check() {
	local what=$1
	shift
	if "$@" > "$tmp/out" 2>&1; then
		result ok "$what"
	else
		sed 's/^/# /' "$tmp/out"
		result fail "$what"
	fi
}
# The tree's make, not the make (or jobserver) that may be running us.
tree_make() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
		make -C "$TOP" -s --no-print-directory BUILD="$BUILD" "$@"
}
pc() {
	PKG_CONFIG_PATH=$usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage \
		pkg-config "$@"
}

check "make install DESTDIR=... PREFIX=/usr/local" \
	tree_make install DESTDIR="$stage" PREFIX=/usr/local

# Every file where it belongs, and nothing outside DESTDIR/usr/local.
expect_files() {
	local f missing=0
	for f in lib/libtpurt.so.$VERSION lib/libtpurt-sim.so.$VERSION \
		lib/pkgconfig/libtpurt.pc lib/pkgconfig/libtpurt-sim.pc \
		include/tpurt.h include/tpuemu/tpu_job.h include/tpuemu/tpu_params.h \
		include/tpuemu/tpu_drm.h include/tpuemu/tpu_hw.h \
		include/tpuemu/tpu_trace.h include/tpuemu/tpu_print.h \
		bin/tpurt-model bin/tpurt-params bin/tpu-info \
		share/tpuemu/v5e-published.tsv; do
		[ -f "$usr/$f" ] || { echo "missing $f"; missing=1; }
	done
	[ -x "$usr/bin/tpu-info" ] || { echo "bin/tpu-info not executable"; missing=1; }
	return $missing
}
check "the libraries, headers, .pc files and tools are installed" expect_files

links_right() {
	local l bad=0
	for l in libtpurt libtpurt-sim; do
		[ "$(readlink "$usr/lib/$l.so.0")" = "$l.so.$VERSION" ] ||
			{ echo "$l.so.0 -> $(readlink "$usr/lib/$l.so.0")"; bad=1; }
		[ "$(readlink "$usr/lib/$l.so")" = "$l.so.0" ] ||
			{ echo "$l.so -> $(readlink "$usr/lib/$l.so")"; bad=1; }
	done
	return $bad
}
check "libtpurt.so and libtpurt-sim.so: symlinks .so -> .so.0 -> .so.$VERSION" links_right

soname_is() {	# soname_is FILE SONAME
	readelf -d "$1" | grep -q "(SONAME).*\[$2\]" ||
		{ readelf -d "$1" | grep SONAME; return 1; }
}
check "libtpurt.so.$VERSION has SONAME libtpurt.so.0" \
	soname_is "$usr/lib/libtpurt.so.$VERSION" libtpurt.so.0
check "libtpurt-sim.so.$VERSION has SONAME libtpurt-sim.so.0" \
	soname_is "$usr/lib/libtpurt-sim.so.$VERSION" libtpurt-sim.so.0

no_blas() {
	readelf -d "$usr/lib/libtpurt.so.$VERSION" | grep NEEDED
	! readelf -d "$usr/lib/libtpurt.so.$VERSION" | grep NEEDED |
		grep -q -e openblas -e sleef -e tpurt-sim
}
check "libtpurt.so.0 (the guest's) needs neither OpenBLAS nor the engine" no_blas

only_under_prefix() {
	local stray
	stray=$(find "$stage" -mindepth 1 -not -path "$stage/usr" \
		-not -path "$stage/usr/local" -not -path "$stage/usr/local/*")
	[ -z "$stray" ] || { echo "outside the prefix: $stray"; return 1; }
}
check "nothing is installed outside DESTDIR/usr/local" only_under_prefix

pc_says_prefix() {
	grep -x 'prefix=/usr/local' "$usr/lib/pkgconfig/libtpurt.pc" &&
		[ "$(pc --modversion libtpurt-sim)" = "$VERSION" ] &&
		! grep -r "$stage" "$usr/lib/pkgconfig"
}
check "the .pc files say prefix=/usr/local (not DESTDIR), version $VERSION" pc_says_prefix

# The user's side: a program of their own, out of tree, with pkg-config.
mkdir -p "$tmp/user"
cp "$TOP/tests/install/first_kernel.c" "$tmp/user/"
build_out_of_tree() {
	cd "$tmp/user" &&
		cc -std=c11 -Wall -Wextra -Werror -O2 -o first_kernel first_kernel.c \
			$(pc --cflags --libs libtpurt-sim)
}
check "first_kernel.c builds with only pkg-config --cflags --libs libtpurt-sim" \
	build_out_of_tree

run_first_kernel() {
	LD_LIBRARY_PATH=$usr/lib TPURT_DEVICE=sim:cores=2 "$tmp/user/first_kernel" \
		> "$tmp/run.out" 2>&1
	local rc=$?
	cat "$tmp/run.out"
	[ "$rc" = 0 ] && grep -q ': PASS$' "$tmp/run.out"
}
check "it runs its pallas_call on TPURT_DEVICE=sim and the result is right" \
	run_first_kernel
check "TPURT_DEVICE=sim:cores=2 gave it a two-core in-process device" \
	grep -qx 'device sim (tpu-sim), 2 core(s)' "$tmp/run.out"
check "libtpurt-sim's link line makes libtpurt-sim.so.0 a dependency of the program" \
	eval "readelf -d $tmp/user/first_kernel | grep -q 'NEEDED.*\[libtpurt-sim.so.0\]'"
check "it ran on the staged libtpurt.so.0" \
	eval "LD_LIBRARY_PATH=$usr/lib ldd $tmp/user/first_kernel | grep -q 'libtpurt.so.0 => $usr/lib/libtpurt.so.0'"

# Linked with libtpurt alone, a program still gets the in-process device:
# libtpurt.so.0 loads libtpurt-sim.so.0 from beside itself, and where that
# is missing it says so.
build_plain() {
	cd "$tmp/user" &&
		cc -std=c11 -Wall -Wextra -Werror -O2 -o plain first_kernel.c \
			$(pc --cflags --libs libtpurt)
}
check "first_kernel.c builds with only pkg-config --cflags --libs libtpurt" build_plain
check "linked with libtpurt alone, it runs on TPURT_DEVICE=sim (libtpurt-sim.so.0 loaded from beside libtpurt.so.0)" \
	env LD_LIBRARY_PATH="$usr/lib" TPURT_DEVICE=sim "$tmp/user/plain"
no_sim_says_why() {
	mkdir -p "$tmp/nosim"
	cp -P "$usr/lib/libtpurt.so.0" "$usr/lib/libtpurt.so.$VERSION" "$tmp/nosim/"
	! LD_LIBRARY_PATH=$tmp/nosim TPURT_DEVICE=sim "$tmp/user/plain" > "$tmp/nosim.out" 2>&1
	local rc=$?
	cat "$tmp/nosim.out"
	[ "$rc" = 0 ] && grep -q 'open: the in-process device is libtpurt-sim.so.0 .*cannot be loaded' "$tmp/nosim.out"
}
if ldconfig -p 2>/dev/null | grep -q 'libtpurt-sim\.so\.0 '; then
	result ok "without libtpurt-sim.so.0, TPURT_DEVICE=sim fails and says what is missing # SKIP one is installed system-wide"
else
	check "without libtpurt-sim.so.0, TPURT_DEVICE=sim fails and says what is missing" no_sim_says_why
fi

# Each uAPI header stands on its own with the .pc's cflags (tpu_drm.h
# needs libdrm's drm.h, from the system rather than the staging root).
headers_compile() {
	local h bad=0
	for h in tpurt.h tpu_params.h tpu_job.h tpu_hw.h tpu_drm.h tpu_trace.h tpu_print.h; do
		printf '#include <%s>\nint main(void) { return 0; }\n' "$h" > "$tmp/h.c"
		cc -std=c11 -Wall -Werror -c -o "$tmp/h.o" "$tmp/h.c" \
			$(pc --cflags libtpurt) $(pkg-config --cflags libdrm) ||
			{ echo "#include <$h> does not compile"; bad=1; }
	done
	return $bad
}
check "tpurt.h and the installed uAPI headers compile on their own" headers_compile

# The installed tools find the installed library by their RUNPATH.
tools_run() {
	"$usr/bin/tpurt-params" --names | grep -qw cores &&
		env -u LD_LIBRARY_PATH TPURT_DEVICE=sim:hbm-size=2G "$usr/bin/tpu-info" |
			grep -q 'hbm-size *2 GiB'
}
check "the installed tpurt-params and tpu-info run (tpu-info on TPURT_DEVICE=sim)" tools_run

check "make install PREFIX=/opt/tpuemu" \
	tree_make install DESTDIR="$tmp/opt" PREFIX=/opt/tpuemu
opt_layout() {
	[ -f "$tmp/opt/opt/tpuemu/lib/libtpurt.so.$VERSION" ] &&
		[ -f "$tmp/opt/opt/tpuemu/include/tpurt.h" ] &&
		grep -qx 'prefix=/opt/tpuemu' "$tmp/opt/opt/tpuemu/lib/pkgconfig/libtpurt-sim.pc" &&
		[ -z "$(find "$tmp/opt" -path "$tmp/opt/usr*")" ]
}
check "PREFIX=/opt/tpuemu puts everything under /opt/tpuemu" opt_layout

uninstalled() {
	tree_make uninstall DESTDIR="$stage" PREFIX=/usr/local || return 1
	local left
	left=$(find "$stage" -not -type d)
	[ -z "$left" ] || { echo "left behind: $left"; return 1; }
}
check "make uninstall removes every installed file" uninstalled

tap_end
