#!/bin/sh
# SPDX-License-Identifier: MIT
# Run shell commands N at a time, each one's output shown whole and in the
# order given, as soon as it and those before it have finished.
#
#   run-lanes.sh N COMMAND...
#
# For the guest (busybox sh): under TCG each vCPU is a host thread, and the
# samples' own work (their reference results, their checks) runs on the
# guest's CPU while the device's threads idle; two lanes use both of the
# guest's CPUs. Each lane takes the next command not yet taken (mkdir is
# the atomic claim), so a long command does not hold up a lane's share.
# Exits 1 if any command exited non-zero, else 0.
set -u
lanes=$1
shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/run-lanes.XXXXXX") || exit 2
count=$#
i=0
for cmd in "$@"; do
	i=$((i + 1))
	printf '%s\n' "$cmd" > "$dir/$i.cmd"
done

lane() {
	j=1
	while [ "$j" -le "$count" ]; do
		if mkdir "$dir/$j.claim" 2>/dev/null; then
			sh "$dir/$j.cmd" > "$dir/$j.out" 2>&1
			echo $? > "$dir/$j.tmp" && mv "$dir/$j.tmp" "$dir/$j.rc"
		fi
		j=$((j + 1))
	done
}

l=0
while [ "$l" -lt "$lanes" ]; do
	lane &
	l=$((l + 1))
done

# In order: each command's output once its exit status is there.
rc=0
j=1
while [ "$j" -le "$count" ]; do
	while [ ! -e "$dir/$j.rc" ]; do
		sleep 0.1
	done
	cat "$dir/$j.out"
	[ "$(cat "$dir/$j.rc")" = 0 ] || rc=1
	j=$((j + 1))
done
wait
rm -rf "$dir"
exit $rc
