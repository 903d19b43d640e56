#!/bin/sh
# SPDX-License-Identifier: MIT
# A fake test program for tap-run-test.sh: "fake.sh KIND" behaves as KIND.
case "$1" in
good)		echo "TAP version 13"; echo "1..3"
		echo "ok 1 a"; echo "# a comment"; echo "ok 2 b # SKIP not here"; echo "ok 3 c"
		echo "# Totals: pass:2 fail:0 xfail:0 xpass:0 skip:1 error:0" ;;
crash)		echo "1..3"; echo "ok 1 a"
		# shellcheck disable=SC3045 # no core file; dash and busybox have -c
		ulimit -c 0; kill -SEGV $$; echo "ok 2 b"; echo "ok 3 c" ;;
exit1)		echo "1..2"; echo "ok 1 a"; echo "ok 2 b"; exit 1 ;;
fewer)		echo "1..3"; echo "ok 1 a"; echo "ok 2 b" ;;
more)		echo "1..1"; echo "ok 1 a"; echo "ok 2 b" ;;
noplan)		echo "ok 1 a" ;;
fail)		echo "1..2"; echo "ok 1 a"; echo "not ok 2 b"; exit 1 ;;
skip)		echo "1..0 # SKIP no device"; exit 4 ;;
trailing)	echo "ok 1 a"; echo "ok 2 b"; echo "1..2" ;;
stderr)		echo "1..1"; echo "ok 1 a" >&2 ;;
hang)		echo "1..1"; sleep 30; echo "ok 1 a" ;;
sample-ok)	echo "PASS: ok 1 looks like TAP but is not" ;;
sample-fail)	echo "ok 1 looks like TAP"; echo "FAIL"; exit 3 ;;
*)		echo "fake.sh: unknown kind $1" >&2; exit 2 ;;
esac
