#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run the fuzz targets built in BUILD_DIR (make fuzz, make fuzz-check).
#
#   run.sh fuzz SECONDS BUILD_DIR TARGET...
#	each target SECONDS from fuzz/corpus/TARGET (new inputs go to
#	BUILD_DIR/corpus/TARGET); one line per figure:
#	"fuzz: TARGET execs = N", exec_per_s, cov, crashes, wall_s
#   run.sh check SECONDS BUILD_DIR TARGET...
#	every committed corpus file once, then SECONDS of fuzzing, the
#	targets side by side; TAP,
#	"ok - fuzz TARGET: N execs, 0 crashes"
#
# Crash inputs land in BUILD_DIR/crashes/TARGET/. Fails if any target
# crashed (or did not run).
set -uo pipefail

mode=$1 seconds=$2 dir=$3
shift 3
top=$(cd "$(dirname "$0")" && pwd)
rc=0
mkdir -p "$dir/logs"

# The last value of a libFuzzer statistic (NAME: VALUE) in LOG.
stat() {
	sed -n "s/^stat::$1: *\([0-9]*\).*/\1/p" "$2" | tail -n1
}

# Coverage at the end: the "cov: N" of the last status line.
coverage() {
	sed -n 's/^#[0-9]*[[:space:]]*[A-Z]*[[:space:]]*cov: \([0-9]*\).*/\1/p' "$1" | tail -n1
}

# fuzz_one TARGET SECONDS CORPUS_DIRS...: runs it, leaves its log in $log
fuzz_one() {
	local t=$1 secs=$2
	shift 2
	crashes=$dir/crashes/$t
	log=$dir/logs/$t.log
	mkdir -p "$crashes" "$dir/logs"
	rm -f "$crashes"/*
	"$dir/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$crashes/" "$@" > "$log" 2>&1
}

# check_one TARGET: its committed corpus, then $seconds of fuzzing; TAP
check_one() {
	local t=$1 seeds=$top/corpus/$1 work status n execs
	# the committed corpus, each file once: regressions
	work=$(mktemp -d)
	if ! "$dir/fuzz_$t" -runs=0 "$seeds" > "$dir/logs/$t.regress.log" 2>&1; then
		echo "not ok - fuzz $t: a committed corpus file fails (see $dir/logs/$t.regress.log)"
		grep -m3 -E 'ERROR|fuzz: .*:[0-9]+:|runtime error' "$dir/logs/$t.regress.log" | sed 's/^/# /'
		rm -rf "$work"
		return 1
	fi
	fuzz_one "$t" "$seconds" "$work" "$seeds"
	status=$?
	rm -rf "$work"
	n=$(ls "$crashes" | wc -l)
	execs=$(stat number_of_executed_units "$log")
	if [ "$status" = 0 ] && [ "$n" = 0 ]; then
		echo "ok - fuzz $t: ${execs:-0} execs, 0 crashes"
	else
		echo "not ok - fuzz $t: ${execs:-0} execs, $n crashes (exit $status; $log)"
		grep -m3 -E 'ERROR|fuzz: .*:[0-9]+:|runtime error' "$log" | sed 's/^/# /'
		return 1
	fi
}

if [ "$mode" = check ]; then
	# The targets side by side, as many as the host has CPUs (libFuzzer
	# stops only at a whole second: 2 s a target one after the other);
	# their TAP in the order given.
	par=$(nproc)
	for t in "$@"; do
		while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do
			wait -n
		done
		rm -f "$dir/logs/$t.rc"	# a target that dies writes none: it fails
		{ check_one "$t"; echo $? > "$dir/logs/$t.rc"; } > "$dir/logs/$t.tap" 2>&1 &
	done
	wait
	for t in "$@"; do
		cat "$dir/logs/$t.tap"
		[ "$(cat "$dir/logs/$t.rc" 2>/dev/null)" = 0 ] || rc=1
	done
	exit $rc
fi

for t in "$@"; do
	seeds=$top/corpus/$t
	work=$dir/corpus/$t
	mkdir -p "$work"
	start=$(date +%s.%N)
	fuzz_one "$t" "$seconds" "$work" "$seeds"
	status=$?
	wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
	n=$(ls "$crashes" | wc -l)
	[ "$status" = 0 ] || [ "$n" -gt 0 ] || n=1	# died without an artefact
	echo "fuzz: $t execs = $(stat number_of_executed_units "$log")"
	echo "fuzz: $t exec_per_s = $(stat average_exec_per_sec "$log")"
	echo "fuzz: $t cov = $(coverage "$log")"
	echo "fuzz: $t crashes = $n"
	printf 'fuzz: %s wall_s = %.1f\n' "$t" "$wall"
	if [ "$n" -gt 0 ]; then
		grep -m3 -E 'ERROR|fuzz: .*:[0-9]+:|runtime error' "$log" | sed 's/^/# /'
		ls "$crashes" | sed 's/^/# crash: /'
		rc=1
	fi
done
exit $rc
