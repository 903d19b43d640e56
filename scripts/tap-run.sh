#!/bin/sh
# SPDX-License-Identifier: MIT
# Run one test program and turn it into TAP results that count.
#
#   tap-run.sh [--name NAME] PROGRAM [ARGS...]
#   tap-run.sh --single [--name NAME] PROGRAM [ARGS...]
#   tap-run.sh --kselftest [FILE...]
#   tap-run.sh --summary [FILE...]
#
# A TAP program's output passes through unchanged, so each of its own
# "ok"/"not ok" lines counts as today, and one more result follows for the
# program as a whole: "ok - NAME" when it exited 0 (or 4, the kselftest
# skip) after a plan "1..N" and exactly N results; otherwise
# "not ok - NAME: ..." saying what went wrong (not found or not executable,
# exit status, killed by a signal, no plan, fewer or more results than the
# plan).
#
# --single: the program prints no TAP (a sample): it is one result, ok when
# it exits 0; its output is shown, as "# " comments, only when it fails.
#
# --kselftest: reads the output of the kernel's run_kselftest.sh (FILEs or
# stdin, as it comes; other lines pass through) and holds its tests to the
# same rules. The runner prefixes a test's output with "# " (so none of its
# results would count) and judges it by its exit status alone: its
# "ok N selftests: COLLECTION: TEST" line, "# SKIP" for exit 4, "not ok"
# for any other non-zero exit or a timeout. Here each test's own lines are
# shown without that prefix, so its results count; the runner's line
# follows, turned into "not ok" when the test's TAP does not add up (no
# plan, fewer or more results than its plan); a test the runner started
# but gave no result, and tests of its plan that never started, fail.
# Exits 1 if any line it printed is "not ok".
#
# --summary: counts the results in FILEs (or stdin) and prints
# "N passed, N failed, N skipped", after a "# failed: ..." line for each
# failure; exits 1 if any failed or none passed.
#
# Exits 0 when the program's own result is ok, 1 otherwise. Plain POSIX sh:
# it runs in the guest's busybox sh as well as on the host.

# How a program's TAP adds up, for both modes: count() takes a line, a
# plan ("1..N", first or last) or a result as the summary counts them
# (lines that start with "ok " or "not ok "; indented nested TAP and "#"
# comments do not count); tally() says "N/M results" or what is wrong, and
# sets wrong.
TALLY_AWK='
function count(line) {
	if (line ~ /^1\.\.[0-9]+([ \t]|$)/) {
		plans++
		sub(/^1\.\./, "", line)
		plan = line + 0
	} else if (line ~ /^(not )?ok /) {
		results++
	}
}
function tally() {
	plans += 0
	plan += 0
	results += 0
	wrong = 1
	if (plans == 0)
		return "no plan, " results " results"
	if (plans != 1)
		return plans " plans, " results " results"
	if (results < plan)
		return results "/" plan " results (fewer than its plan)"
	if (results > plan)
		return results "/" plan " results (more than its plan)"
	wrong = 0
	return results "/" plan " results"
}
function tally_reset() {
	plans = plan = results = 0
}'

if [ "${1:-}" = --kselftest ]; then
	shift
	# mawk reads a pipe in blocks, not as lines come, unless interactive.
	awk=awk
	if awk -W version 2>/dev/null | grep -q mawk; then
		awk="awk -W interactive"
	fi
	cat "$@" | $awk "$TALLY_AWK"'
		function out(s) {
			print s
			fflush()
			if (s ~ /^not ok /)
				failed++
		}
		# The runner result that ends the test: verbatim, unless the
		# test says ok but its own TAP does not add up.
		function finish(line,   c) {
			intest = 0
			c = tally()
			if (index(line, " selftests: " name) == 0)
				c = "a result for another test than " name
			else if (!wrong || line !~ /^ok /)
				c = ""
			if (c != "") {
				sub(/ # .*$/, "", line)
				line = "not " line " # " c
			}
			out(line)
		}
		intest && /^(not )?ok [0-9]+ selftests: / { finish($0); next }
		intest {
			line = $0
			if (sub(/^# ?/, "", line))
				count(line)
			out(line)
			next
		}
		# "TAP version 13", "1..N", then the first test: the runner.
		/^# selftests: [^ ]+: [^ ]+$/ {
			if (pending != "")
				expected += pending
			pending = ""
			started++
			intest = 1
			name = substr($0, 14)
			tally_reset()
			out($0)
			next
		}
		{ pending = "" }
		/^TAP version 13$/ { header = NR }
		/^1\.\.[0-9]+$/ && header == NR - 1 { pending = substr($0, 4) + 0 }
		{ out($0) }
		END {
			if (intest)
				out("not ok - selftests: " name ": no result from the runner (the run stopped in this test)")
			if (started < expected)
				out("not ok - selftests: " expected - started " of " expected " tests never started")
			exit (failed > 0)
		}'
	exit
fi

if [ "${1:-}" = --summary ]; then
	shift
	cat "$@" | awk '
		/^ok .*# [Ss][Kk][Ii][Pp]/ { skip++; next }
		/^ok / { pass++; next }
		/^not ok / { failed[++fail] = $0 }
		END {
			# The failures again, just above the count: a log cut to
			# its last lines still says which.
			for (i = 1; i <= fail; i++)
				print "# failed: " failed[i]
			printf "%d passed, %d failed, %d skipped\n", pass, fail, skip
			exit (fail > 0 || pass == 0)
		}'
	exit
fi

single=0
name=
while [ $# -gt 0 ]; do
	case "$1" in
	--single) single=1 ;;
	--name) name=$2; shift ;;
	--) shift; break ;;
	*) break ;;
	esac
	shift
done
[ $# -gt 0 ] || { echo "usage: tap-run.sh [--single] [--name NAME] PROGRAM [ARGS...]" >&2; exit 2; }
[ -n "$name" ] || name=${1##*/}

# Found and executable: a path as given, a bare name on $PATH.
case "$1" in
*/) found= ;;
*/*) found=$1; [ -f "$1" ] && [ -x "$1" ] || found= ;;
*) found=$(command -v "$1" 2>/dev/null) ;;
esac
if [ -z "$found" ]; then
	echo "not ok - $name: $1 not found or not executable"
	exit 1
fi

tmp=$(mktemp "${TMPDIR:-/tmp}/tap-run.XXXXXX") || exit 2
trap 'rm -f "$tmp" "$tmp.rc"' EXIT
trap 'exit 130' INT TERM

# The program's status comes back through a file: sh has no pipefail.
if [ "$single" = 1 ]; then
	"$@" > "$tmp" 2>&1
	echo $? > "$tmp.rc"
else
	{ "$@" 2>&1; echo $? > "$tmp.rc"; } | tee "$tmp"
fi
rc=$(cat "$tmp.rc" 2>/dev/null)
rc=${rc:-255}

status="exit $rc" bad=
if [ "$rc" -gt 128 ] && sig=$(kill -l $((rc - 128)) 2>/dev/null); then
	status="killed by signal $((rc - 128)) (SIG$sig)" bad=1
elif [ "$rc" = 4 ] && [ "$single" = 0 ]; then
	status="exit 4 (kselftest skip)"
elif [ "$rc" != 0 ]; then
	bad=1
fi

if [ "$single" = 1 ]; then
	if [ -z "$bad" ]; then
		echo "ok - $name"
		exit 0
	fi
	sed 's/^/# /' "$tmp"
	echo "not ok - $name: $status"
	exit 1
fi

counts=$(awk "$TALLY_AWK"'
	{ count($0) }
	END { c = tally(); print wrong, c }' "$tmp")
[ "${counts%% *}" = 0 ] || bad=1
count=${counts#* }

if [ -n "$bad" ]; then
	echo "not ok - $name: $status, $count"
	exit 1
fi
case "$rc" in
4) echo "ok - $name: $status, $count # SKIP" ;;
*) echo "ok - $name: $status, $count" ;;
esac
exit 0
