#!/bin/sh
# SPDX-License-Identifier: MIT
# The test runner's own test: scripts/tap-run.sh on fake test programs
# (fake.sh), under the host's sh and under busybox sh (the guest's only
# shell). Each case checks the runner's exit status and its own result
# line (the last); the fakes' output stays in a temporary directory, so
# their "ok" lines do not count in check.sh. Prints TAP.

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/runner/lib.sh
. "$HERE/lib.sh"
RUN=$HERE/../../scripts/tap-run.sh
FAKE=$HERE/fake.sh
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tap-run-test.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT

# CASE: NAME|RUNNER ARGS|EXPECTED EXIT|EXPECTED LAST LINE (a sh pattern)
cases() {
	cat <<CASES
good|--name good $FAKE good|0|ok - good: exit 0, 3/3 results
crash after the first result|--name crash $FAKE crash|1|not ok - crash: killed by signal 11 (SIGSEGV), 1/3 results (fewer than its plan)
exit 1 with every result ok|--name exit1 $FAKE exit1|1|not ok - exit1: exit 1, 2/2 results
fewer results than the plan|--name fewer $FAKE fewer|1|not ok - fewer: exit 0, 2/3 results (fewer than its plan)
more results than the plan|--name more $FAKE more|1|not ok - more: exit 0, 2/1 results (more than its plan)
no plan|--name noplan $FAKE noplan|1|not ok - noplan: exit 0, no plan, 1 results
a failing subtest also fails the binary|--name fail $FAKE fail|1|not ok - fail: exit 1, 2/2 results
plan last|--name trailing $FAKE trailing|0|ok - trailing: exit 0, 2/2 results
results on stderr count|--name stderr $FAKE stderr|0|ok - stderr: exit 0, 1/1 results
kselftest skip (exit 4, plan 1..0)|--name skip $FAKE skip|0|ok - skip: exit 4 (kselftest skip), 0/0 results # SKIP
does not exist|$HERE/missing|1|not ok - missing: $HERE/missing not found or not executable
not executable|$HERE/not-executable|1|not ok - not-executable: $HERE/not-executable not found or not executable
not on PATH|tpuemu-no-such-test|1|not ok - tpuemu-no-such-test: tpuemu-no-such-test not found or not executable
sample passes (--single)|--single --name sample-ok $FAKE sample-ok|0|ok - sample-ok
sample fails (--single)|--single --name sample-fail $FAKE sample-fail|1|not ok - sample-fail: exit 3
CASES
}

# The host's sh and tools; then busybox alone, as in the guest: its sh, and
# only its applets on PATH.
find_shells "$WORK/bb"
ncases=$(cases | wc -l)
nshells=$(echo "$shells" | wc -w)
echo "TAP version 13"
echo "1..$((ncases * nshells + 6))"

for shell in $shells; do
	use_shell "$shell" "$WORK/bb"
	cases > "$WORK/cases"
	while IFS='|' read -r desc args want_rc want_line; do
		# shellcheck disable=SC2086
		PATH=$path $sh_cmd "$RUN" $args > "$WORK/out" 2>&1 < /dev/null
		rc=$?
		line=$(tail -n 1 "$WORK/out")
		ok=1
		# shellcheck disable=SC2254
		case "$line" in $want_line) [ "$rc" = "$want_rc" ] && ok=0 ;; esac
		if [ "$ok" != 0 ]; then
			sed 's/^/# | /' "$WORK/out"
			echo "# want exit $want_rc and: $want_line"
			echo "# got exit $rc"
		fi
		check $ok "$shell: $desc"
	done < "$WORK/cases"
done

# A TAP program's own lines pass through unchanged.
sh "$RUN" "$FAKE" good > "$WORK/good.tap" 2>&1
"$FAKE" good > "$WORK/raw"
sed '$d' "$WORK/good.tap" | cmp -s - "$WORK/raw"
check $? "a program's own output passes through unchanged"

# The summary: one crashing binary turns a run red.
sh "$RUN" "$FAKE" crash > "$WORK/crash.tap" 2>&1
out=$(sh "$RUN" --summary "$WORK/good.tap")
check $? "a good binary alone: summary exit 0 ($out)"
[ "$out" = "3 passed, 0 failed, 1 skipped" ]
check $? "a good binary alone: $out"
out=$(sh "$RUN" --summary "$WORK/good.tap" "$WORK/crash.tap")
[ $? = 1 ]
check $? "a good and a crashing binary: summary exit 1 ($out)"
[ "$(echo "$out" | tail -n 1)" = "4 passed, 1 failed, 1 skipped" ]
check $? "a good and a crashing binary: $(echo "$out" | tail -n 1)"
# Above the count, each failure again: a log cut to its tail says which.
[ "$(echo "$out" | sed '$d')" = "# failed: not ok - fake.sh: killed by signal 11 (SIGSEGV), 1/3 results (fewer than its plan)" ]
check $? "a good and a crashing binary: the failure named above the count"

[ "$failed" = 0 ]
