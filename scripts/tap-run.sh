#!/bin/sh
# SPDX-License-Identifier: MIT
# Run one test program and turn it into TAP results that count.
#
#   tap-run.sh [--name NAME] PROGRAM [ARGS...]
#   tap-run.sh --single [--name NAME] PROGRAM [ARGS...]
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
# --summary: counts the results in FILEs (or stdin) and prints
# "N passed, N failed, N skipped"; exits 1 if any failed or none passed.
#
# Exits 0 when the program's own result is ok, 1 otherwise. Plain POSIX sh:
# it runs in the guest's busybox sh as well as on the host.

if [ "${1:-}" = --summary ]; then
	shift
	cat "$@" | awk '
		/^ok .*# [Ss][Kk][Ii][Pp]/ { skip++; next }
		/^ok / { pass++; next }
		/^not ok / { fail++ }
		END {
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

# The plan ("1..N", first or last) and the results, counted as the summary
# counts them: lines that start with "ok " or "not ok " (indented nested
# TAP and "#" comments do not count).
counts=$(awk '
	/^1\.\.[0-9]+([ \t]|$)/ { plans++; sub(/^1\.\./, ""); plan = $1 + 0 }
	/^(not )?ok / { results++ }
	END { printf "%d %d %d\n", plans, plan, results }' "$tmp")
read -r plans plan results <<EOF
$counts
EOF

if [ "$plans" = 0 ]; then
	count="no plan, $results results" bad=1
elif [ "$plans" != 1 ]; then
	count="$plans plans, $results results" bad=1
elif [ "$results" -lt "$plan" ]; then
	count="$results/$plan results (fewer than its plan)" bad=1
elif [ "$results" -gt "$plan" ]; then
	count="$results/$plan results (more than its plan)" bad=1
else
	count="$results/$plan results"
fi

if [ -n "$bad" ]; then
	echo "not ok - $name: $status, $count"
	exit 1
fi
case "$rc" in
4) echo "ok - $name: $status, $count # SKIP" ;;
*) echo "ok - $name: $status, $count" ;;
esac
exit 0
