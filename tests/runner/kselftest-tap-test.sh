#!/bin/sh
# SPDX-License-Identifier: MIT
# The kernel's kselftest runner (run_kselftest.sh from linux-source, in
# $TPUEMU_CACHE/kselftest) on fake tests (fake.sh), laid out as its install
# lays them out, and its output through "tap-run.sh --kselftest": each
# test's own results must count again, and a test whose TAP does not add
# up, that the runner left unfinished or never started must fail. Under the
# host's sh and under busybox sh (the guest's). Prints TAP.

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/runner/lib.sh
. "$HERE/lib.sh"
RUN=$HERE/../../scripts/tap-run.sh
KSFT=${TPUEMU_CACHE:-/var/cache/tpuemu}/kselftest
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kselftest-tap-test.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT

echo "TAP version 13"
if [ ! -r "$KSFT/run_kselftest.sh" ] || [ ! -r "$KSFT/kselftest/runner.sh" ]; then
	echo "1..0 # SKIP no kselftest runner in $KSFT (make deps extracts it)"
	exit 4
fi

# The install layout: the runner, its list, and a collection "fake" whose
# tests are fake.sh KIND (a missing one too); a test may take 1 s.
KINDS="good crash exit1 fewer more noplan fail skip trailing hang"
layout() {	# layout DIR KIND...
	local_dir=$1
	shift
	mkdir -p "$local_dir/fake"
	cp "$KSFT/run_kselftest.sh" "$local_dir/"
	cp -r "$KSFT/kselftest" "$local_dir/"
	echo "timeout=1" > "$local_dir/fake/settings"
	for kind in "$@"; do
		echo "fake:$kind"
		[ "$kind" = missing ] && continue
		printf '#!/bin/sh\nexec "%s" %s\n' "$HERE/fake.sh" "$kind" > "$local_dir/fake/$kind"
		chmod +x "$local_dir/fake/$kind"
	done > "$local_dir/kselftest-list.txt"
}
# shellcheck disable=SC2086
layout "$WORK/all" $KINDS missing
layout "$WORK/green" good skip trailing

# What each test's runner line must become (a sh pattern).
expected() {
	cat <<'LINES'
ok 1 selftests: fake: good
not ok 2 selftests: fake: crash # exit=139
not ok 3 selftests: fake: exit1 # exit=1
not ok 4 selftests: fake: fewer # 2/3 results (fewer than its plan)
not ok 5 selftests: fake: more # 2/1 results (more than its plan)
not ok 6 selftests: fake: noplan # no plan, 1 results
not ok 7 selftests: fake: fail # exit=1
ok 8 selftests: fake: skip # SKIP
ok 9 selftests: fake: trailing
not ok 10 selftests: fake: hang # TIMEOUT 1 seconds
not ok 11 selftests: fake: missing
LINES
}

# The runner's prefix.pl runs "env perl": the guest has perl too.
find_shells "$WORK/bb" perl
nlines=$(expected | wc -l)
nshells=$(echo "$shells" | wc -w)
echo "1..$((nshells * (nlines + 8)))"

for shell in $shells; do
	use_shell "$shell" "$WORK/bb"
	# A line from before the runner (a sample's result) passes through.
	# (Into a pipe: the runner appends a test's output to /dev/stdout,
	# which, were it a file, its own lines would overwrite.)
	{ echo "ok - sample tpu-info"; PATH=$path $sh_cmd "$WORK/all/run_kselftest.sh"; } \
		2>&1 < /dev/null | cat > "$WORK/raw"
	PATH=$path $sh_cmd "$RUN" --kselftest "$WORK/raw" > "$WORK/out" 2>&1
	rc=$?
	check "$([ "$rc" = 1 ]; echo $?)" "$shell: exit 1 after failures (got $rc)" "$WORK/out"
	expected > "$WORK/expected"
	# (The description stops before the line's "#": a "# SKIP" there
	# would make this check count as skipped.)
	while IFS= read -r want; do
		grep -qxF "$want" "$WORK/out"
		rc=$?
		[ "$rc" = 0 ] || echo "# want: $want"
		check "$rc" "$shell: ${want%% #*}" "$WORK/out"
	done < "$WORK/expected"
	grep -qx 'ok - sample tpu-info' "$WORK/out"
	check $? "$shell: other lines pass through"
	# good's own results, without the runner's "# " in front.
	grep -qx 'ok 3 c' "$WORK/out" && ! grep -q '^# ok 3 c' "$WORK/out"
	check $? "$shell: a test's own results count" "$WORK/out"
	out=$(PATH=$path $sh_cmd "$RUN" --summary "$WORK/out" | tail -n 1)	# the count: failures are listed above it
	[ "$out" = "16 passed, 9 failed, 2 skipped" ]
	check $? "$shell: summary $out (want 16 passed, 9 failed, 2 skipped)"

	# The run stops in the second test: it and the nine after it fail.
	sed '/^# selftests: fake: crash$/q' "$WORK/raw" > "$WORK/cut"
	PATH=$path $sh_cmd "$RUN" --kselftest "$WORK/cut" > "$WORK/out" 2>&1
	grep -qxF 'not ok - selftests: fake: crash: no result from the runner (the run stopped in this test)' "$WORK/out"
	check $? "$shell: a test the runner did not finish fails" "$WORK/out"
	grep -qxF 'not ok - selftests: 9 of 11 tests never started' "$WORK/out"
	check $? "$shell: tests that never started fail" "$WORK/out"

	# All good: exit 0; skips count as skipped.
	PATH=$path $sh_cmd "$WORK/green/run_kselftest.sh" 2>&1 < /dev/null |
		PATH=$path $sh_cmd "$RUN" --kselftest > "$WORK/out" 2>&1
	check $? "$shell: a green run exits 0" "$WORK/out"
	out=$(PATH=$path $sh_cmd "$RUN" --summary "$WORK/out" | tail -n 1)	# the count: failures are listed above it
	[ "$out" = "6 passed, 0 failed, 2 skipped" ]
	check $? "$shell: green summary $out (want 6 passed, 0 failed, 2 skipped)"
done

[ "$failed" = 0 ]
