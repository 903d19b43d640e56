# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Sourced by the host script tests: TAP results, counted.
#   result ok|fail DESCRIPTION   one numbered "ok"/"not ok" line
#   tap_end                      the plan; fails if any result failed
n=0 failed=0
result() {	# result ok|fail DESCRIPTION
	n=$((n + 1))
	if [ "$1" = ok ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
	fi
}
tap_end() {
	echo "1..$n"
	[ "$failed" = 0 ]
}
