#!/bin/sh
# SPDX-License-Identifier: MIT
# scripts/run-lanes.sh's own test, under the host's sh and busybox sh (the
# guest's only shell): output whole and in the order given, the exit status
# of the whole, and two lanes running two commands at once. Prints TAP.

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/runner/lib.sh
. "$HERE/lib.sh"
LANES=$HERE/../../scripts/run-lanes.sh
WORK=$(mktemp -d "${TMPDIR:-/tmp}/run-lanes-test.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT

find_shells "$WORK/bb"
echo "1..$((4 * $(echo $shells | wc -w)))"
for shell in $shells; do
	use_shell "$shell" "$WORK/bb"
	run() { PATH=$path TMPDIR=$WORK "$sh_cmd" "$LANES" "$@"; }

	# the first command ends last; its lines still come first, whole
	run 2 'echo 1a; sleep 0.3; echo 1b' 'echo 2a; echo 2b' 'echo 3' \
		> "$WORK/out" 2>&1
	rc=$?
	printf '1a\n1b\n2a\n2b\n3\n' | cmp -s - "$WORK/out"
	check $? "$shell: output in the order given, each command's whole" "$WORK/out"
	check $rc "$shell: exit 0 when every command does"

	run 2 'true' 'exit 3' 'true' > "$WORK/out" 2>&1
	[ $? = 1 ]
	check $? "$shell: exit 1 when a command fails"

	# Each waits (at most 10 s) for the other's file: only two at once
	# can both see it.
	rm -f "$WORK/a" "$WORK/b"
	wait_for='i=0; while [ ! -e $1 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; [ -e $1 ]'
	run 2 "touch $WORK/a; set -- $WORK/b; $wait_for" \
		"touch $WORK/b; set -- $WORK/a; $wait_for" > "$WORK/out" 2>&1
	check $? "$shell: two lanes run two commands at once" "$WORK/out"
done
[ "$failed" = 0 ]
