# SPDX-License-Identifier: MIT
# shellcheck shell=sh disable=SC2034
# Sourced by the runner's tests (POSIX sh): TAP checks, and the shells to
# run under, the host's sh and busybox's as in the guest.

n=0 failed=0
check() {	# check OK DESCRIPTION [FILE to show when not OK]
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n $2"
	else
		[ -z "${3:-}" ] || sed 's/^/# | /' "$3"
		echo "not ok $n $2"
		failed=$((failed + 1))
	fi
}

# find_shells DIR [TOOL...]: $shells is "sh", and "busybox" too when there
# is one: then DIR holds its applets alone (tee, awk, sed, mktemp... as
# tap-run uses them), with the host's TOOLs beside them.
find_shells() {
	shells="sh"
	bb_dir=$1
	shift
	bb=$(command -v busybox) || return 0
	mkdir "$bb_dir"
	for applet in $(busybox --list); do
		ln -s "$bb" "$bb_dir/$applet"
	done
	for tool in "$@"; do
		ln -s "$(command -v "$tool")" "$bb_dir/$tool"
	done
	shells="$shells busybox"
}

# use_shell SHELL DIR: $path and $sh_cmd to run under SHELL (find_shells' DIR).
use_shell() {
	if [ "$1" = busybox ]; then
		path=$2 sh_cmd=$2/sh
	else
		path=$PATH sh_cmd=sh
	fi
}
