#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The reports of a `make check-debug` VM pass (scripts/check.sh --debug).
#
#   debug-reports.sh --guest-script
#   debug-reports.sh NAME CONSOLE
#
# --guest-script prints what the guest runs after its tests: kmemleak's
# scans (its automatic scan is off in the debug kernel; three scans, so an
# object a stale pointer hid once is not missed and one a scan caught in
# flight is dropped again), its report, then the whole kernel log, each
# line prefixed ("# kmemleak: ", "# dmesg: ") so that TAP ignores it.
#
# NAME CONSOLE reads a pass's console (scripts/vm-run.sh --log: the guest's
# serial console and QEMU's stderr) and prints TAP results named "vm NAME":
# the debug kernel really ran its checkers and its log is complete; no
# kernel report (KASAN, lockdep, BUG, WARNING, sleeping in atomic context,
# DMA-API, debug objects, list corruption); no object leaked by tpu or DRM
# (kmemleak; other leaks, such as the boot's own, are listed, not failed);
# no ASan or UBSan report from QEMU. Each failure lists the lines.
set -euo pipefail

if [ "${1:-}" = --guest-script ]; then
	cat <<'GUEST'
kl=/sys/kernel/debug/kmemleak
if [ -w $kl ]; then
	sleep 6
	for i in 1 2 3; do echo scan > $kl; sleep 1; done
	sed 's/^/# kmemleak: /' $kl
	echo '# kmemleak: done'
else
	echo '# kmemleak: missing'
fi
dmesg | sed 's/^/# dmesg: /'
echo '# dmesg: done'
GUEST
	exit 0
fi

[ $# = 2 ] || { echo "usage: debug-reports.sh NAME CONSOLE | --guest-script" >&2; exit 2; }
NAME=$1 CONSOLE=$2
[ -r "$CONSOLE" ] || { echo "not ok - vm $NAME: no console log $CONSOLE"; exit 1; }

ok() { echo "ok - vm $NAME: $*"; }
fail() { echo "not ok - vm $NAME: $*"; }
# The first 40 of stdin's lines as TAP comments.
listed() { head -n 40 | sed 's/^/#   /'; }

# The kernel's log: the dump at the end, or, when the guest did not get
# there, what the console showed as it went (loglevel 5: warnings and up).
if grep -qx '# dmesg: done' "$CONSOLE"; then
	klog=$(sed -n 's/^# dmesg: \(\[.*\)$/\1/p' "$CONSOLE")
	complete=1
else
	klog=$(grep -E '^\[ *[0-9]+\.[0-9]+\]' "$CONSOLE" || true)
	complete=0
fi

# The debug kernel, with its checkers: each announces itself at boot.
missing=
for banner in 'KernelAddressSanitizer initialized' 'Lock dependency validator' \
	'DMA-API: preallocated'; do
	grep -qF "$banner" <<<"$klog" || missing="$missing '$banner'"
done
if [ "$complete" = 0 ]; then
	fail "the guest did not dump its kernel log (it did not finish)"
elif ! grep -qE '^\[ *0\.000000\]' <<<"$klog"; then
	fail "the kernel log lost its start (its buffer overflowed): reports may be lost"
elif [ -n "$missing" ]; then
	fail "not the debug kernel: its log lacks$missing"
else
	ok "debug kernel with KASAN, lockdep and DMA-API debugging; log complete"
fi

REPORT='\] (BUG|WARNING): |kernel BUG at|Oops|general protection fault|Kernel panic|sleeping function called from invalid context|possible .*deadlock|suspicious RCU usage|DMA-API: .*(device driver|exceeded|out of memory|disabl|leak)|ODEBUG: .*object|list_(add|del) corruption|UBSAN: |Memory manager not clean|kmemleak: .*(Cannot|error|Memory pool empty)|memory leak detector disabled'
reports=$(grep -E "$REPORT" <<<"$klog" || true)
if [ -z "$reports" ]; then
	ok "kernel log: no reports"
else
	fail "kernel log: $(wc -l <<<"$reports") report lines"
	listed <<<"$reports"
fi

# kmemleak's objects, one line each, then those of tpu or DRM (or of a
# module since unloaded, whose addresses no longer resolve).
if grep -qx '# kmemleak: done' "$CONSOLE"; then
	objects=$(sed -n 's/^# kmemleak: //p' "$CONSOLE" | sed '$d' | awk '
		/^unreferenced object/ { if (obj != "") print obj; obj = $0; next }
		{ gsub(/^ +/, " "); obj = obj $0 }
		END { if (obj != "") print obj }')
	ours=$(grep -E 'tpu|drm|dma_fence|\] 0x[0-9a-f]+( |$)' <<<"$objects" || true)
	others=$(grep -vE 'tpu|drm|dma_fence|\] 0x[0-9a-f]+( |$)' <<<"$objects" || true)
	n_ours=$(grep -c . <<<"$ours" || true)
	n_others=$(grep -c . <<<"$others" || true)
	if [ "$n_ours" = 0 ]; then
		ok "kmemleak: no object of tpu or DRM leaked ($n_others others)"
	else
		fail "kmemleak: $n_ours objects of tpu or DRM leaked ($n_others others)"
		listed <<<"$ours"
	fi
	[ "$n_others" = 0 ] || { echo "# kmemleak, not tpu or DRM:"; listed <<<"$others"; }
else
	fail "kmemleak: no report from the guest (no kmemleak, or the guest did not finish)"
fi

# QEMU's sanitizers write to its stderr, which the console log holds.
sanitizer=$(grep -E 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|SUMMARY: (Address|UndefinedBehavior)Sanitizer' "$CONSOLE" || true)
if [ -z "$sanitizer" ]; then
	ok "QEMU's ASan and UBSan: no reports"
else
	fail "QEMU's ASan and UBSan: $(wc -l <<<"$sanitizer") report lines"
	grep -E -A 12 'ERROR: AddressSanitizer|runtime error:' "$CONSOLE" | listed
fi
