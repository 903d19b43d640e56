#!/bin/sh
# SPDX-License-Identifier: MIT
# make check-debug's judge, scripts/debug-reports.sh, on made-up consoles:
# a clean run passes, and each kind of report (a warning, KASAN, lockdep,
# sleeping in atomic context, DMA-API, a tpu leak, an unresolved module
# address, ASan, UBSan) fails it, as do a run that did not finish, a kernel
# without the checkers and a log that lost its start. Its output stays in
# a temporary directory, so its "not ok" lines do not count in check.sh.
# Prints TAP.

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/runner/lib.sh
. "$HERE/lib.sh"
JUDGE=$HERE/../../scripts/debug-reports.sh
WORK=$(mktemp -d "${TMPDIR:-/tmp}/debug-reports-test.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT

BOOT='[    0.000000] Linux version 6.1.0
[    0.100000] KernelAddressSanitizer initialized
[    0.200000] Lock dependency validator: Copyright (c) 2006 Red Hat, Inc., Ingo Molnar
[    0.300000] DMA-API: preallocated 65536 debug entries
[    0.400000] ODEBUG: selftest passed'
LEAK_BOOT='unreferenced object 0xffff888100a0b000 (size 64):
  comm "swapper/0", pid 1, jiffies 4294667296 (age 20.000s)
  backtrace:
    [<ffffffff81234567>] kmalloc_trace+0x2a/0x60
    [<ffffffff81234568>] acpi_os_allocate+0x20/0x40'

# console FILE [DMESG_LINES [KMEMLEAK_LINES [OTHER_LINES]]]: a pass's
# console with BOOT and the lines given in the guest's end-of-run dumps.
console() {
	{
		echo "ok 1 selftests: tpu: tpu_params_test"
		printf '%s\n' "${4:-}"
		printf '%s\n%s\n' "$LEAK_BOOT" "${3:-}" | sed '/^$/d; s/^/# kmemleak: /'
		echo '# kmemleak: done'
		printf '%s\n%s\n' "$BOOT" "${2:-}" | sed '/^$/d; s/^/# dmesg: /'
		echo '# dmesg: done'
	} > "$1"
}

# judged DESCRIPTION FILE WANT: WANT (a grep -E pattern) is among the
# judge's result lines, and every other result is ok.
judged() {
	"$JUDGE" t "$2" > "$WORK/out" 2>&1
	if grep -qE "^$3" "$WORK/out" &&
		[ "$(grep -c '^not ok' "$WORK/out")" = "$(echo "$3" | grep -c '^not ok')" ]; then
		check 0 "$1"
	else
		echo "# want: $3"
		check 1 "$1" "$WORK/out"
	fi
}

echo "TAP version 13"
echo "1..15"

console "$WORK/clean"
"$JUDGE" t "$WORK/clean" > "$WORK/out" 2>&1
[ "$(grep -c '^ok ' "$WORK/out")" = 4 ] && ! grep -q '^not ok' "$WORK/out"
check $? "a clean run: four results, all ok" "$WORK/out"
judged "a boot leak outside tpu and DRM is listed, not failed" "$WORK/clean" \
	'ok - vm t: kmemleak: no object of tpu or DRM leaked \(1 others\)'

for report in \
	'WARNING: CPU: 1 PID: 33 at drivers/gpu/drm/drm_mm.c:999 drm_mm_takedown+0x4e/0x60' \
	'BUG: KASAN: slab-use-after-free in tpu_job_free+0x1a/0x90 [tpu]' \
	'WARNING: possible circular locking dependency detected' \
	'BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580' \
	'DMA-API: pci 0000:00:02.0: device driver frees DMA memory with wrong function' \
	'ODEBUG: free active (active state 0) object: 00000000 object type: timer_list'; do
	console "$WORK/report" "[   12.000000] $report"
	judged "kernel report: $report" "$WORK/report" \
		'not ok - vm t: kernel log: 1 report lines'
done

console "$WORK/leak" "" 'unreferenced object 0xffff888100a0c000 (size 128):
  backtrace:
    [<ffffffff81234567>] kmalloc_trace+0x2a/0x60
    [<ffffffffc0012345>] tpu_job_submit+0x1a0/0x400 [tpu]'
judged "a leak of tpu fails" "$WORK/leak" \
	'not ok - vm t: kmemleak: 1 objects of tpu or DRM leaked \(1 others\)'
console "$WORK/unloaded" "" 'unreferenced object 0xffff888100a0c000 (size 128):
  backtrace:
    [<ffffffffc0012345>] 0xffffffffc0012345'
judged "a leak from an unloaded module fails" "$WORK/unloaded" \
	'not ok - vm t: kmemleak: 1 objects of tpu or DRM leaked'

console "$WORK/asan" "" "" '==4242==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000010'
judged "an ASan report from QEMU fails" "$WORK/asan" "not ok - vm t: QEMU's ASan and UBSan"
console "$WORK/ubsan" "" "" '../hw/tpu-mxu/tpu-mxu.c:100:5: runtime error: shift exponent 64 is too large'
judged "a UBSan report from QEMU fails" "$WORK/ubsan" "not ok - vm t: QEMU's ASan and UBSan"

grep -v -e '^# dmesg' -e '^# kmemleak' "$WORK/clean" > "$WORK/unfinished"
"$JUDGE" t "$WORK/unfinished" > "$WORK/out" 2>&1
grep -q '^not ok - vm t: the guest did not dump its kernel log' "$WORK/out" &&
	grep -q '^not ok - vm t: kmemleak: no report' "$WORK/out"
check $? "a guest that did not finish fails" "$WORK/out"

BOOT='[    0.000000] Linux version 6.1.0-57-amd64' console "$WORK/debian"
judged "a kernel without the checkers fails" "$WORK/debian" \
	"not ok - vm t: not the debug kernel: its log lacks 'KernelAddressSanitizer"
BOOT=$(echo "$BOOT" | sed 1d) console "$WORK/overflow"
judged "a kernel log that lost its start fails" "$WORK/overflow" \
	'not ok - vm t: the kernel log lost its start'

[ "$failed" = 0 ]
