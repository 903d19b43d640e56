# SPDX-License-Identifier: MIT
# Progress on long work, for the set-up scripts (sourced by deps.sh and
# build-qemu.sh): a step that takes minutes says what it is doing at least
# every PROGRESS_EVERY seconds (default 10) instead of staying silent.
# Messages start with "$PROGRESS_NAME: ".

PROGRESS_EVERY=${PROGRESS_EVERY:-10}

# progress_run WHAT LOG CMD...: run CMD with its output in LOG (a file, or
# /dev/null); while it runs, say every PROGRESS_EVERY seconds that WHAT is
# still going and for how long. Returns CMD's status; when it failed, the
# end of LOG goes to stderr.
progress_run() {
	local what=$1 log=$2 pid rc=0 start=$SECONDS next
	shift 2
	"$@" > "$log" 2>&1 &
	pid=$!
	next=$((SECONDS + PROGRESS_EVERY))
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		if [ "$SECONDS" -ge "$next" ] && kill -0 "$pid" 2>/dev/null; then
			echo "$PROGRESS_NAME: still $what ($((SECONDS - start)) s)"
			next=$((SECONDS + PROGRESS_EVERY))
		fi
	done
	wait "$pid" || rc=$?
	if [ "$rc" != 0 ]; then
		echo "$PROGRESS_NAME: $what failed (exit $rc)" >&2
		[ ! -f "$log" ] || tail -n 20 "$log" >&2
	fi
	return "$rc"
}

# progress_lines: pass stdin's lines on with "$PROGRESS_NAME: " in front,
# at most one every PROGRESS_EVERY seconds (the newest then: a tool like
# ninja prints thousands) and the last one; when no line comes for that
# long, say so with the newest line again.
progress_lines() {
	local line part= shown=1 next=0 rc newest=
	while :; do
		rc=0
		IFS= read -r -t "$PROGRESS_EVERY" line || rc=$?
		if [ "$rc" -gt 128 ]; then	# timed out, maybe within a line
			part=$part$line
			echo "$PROGRESS_NAME: ${newest:-(no output yet)} (still busy)"
			next=$((SECONDS + PROGRESS_EVERY))
			continue
		fi
		line=$part$line part=
		[ "$rc" = 0 ] || [ -n "$line" ] || break
		newest=$line shown=
		if [ "$SECONDS" -ge "$next" ]; then
			echo "$PROGRESS_NAME: $line"
			shown=1 next=$((SECONDS + PROGRESS_EVERY))
		fi
		[ "$rc" = 0 ] || break
	done
	[ -n "$shown" ] || echo "$PROGRESS_NAME: $newest"
}
