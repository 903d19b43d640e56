#!/bin/sh
# SPDX-License-Identifier: MIT
# Run a benchmark and gather its "bench: NAME = VALUE UNIT" lines into one
# JSON file for the run, beside the output it passes through unchanged.
#
#   bench-json.sh RUN -- COMMAND [ARGS...]
#
# Writes $BENCH_JSON_DIR (default $BUILD/bench, BUILD default build)
# /results-<UTC date and time>-RUN.json:
#   {"run": RUN, "date": ..., "host": ..., "cpu": ..., "command": ...,
#    "exit_status": N, "figures": [{"name": ..., "value": ..., "unit": ...}]}
# VALUE is a JSON number when it reads as one, else a string. Exits with
# COMMAND's status. Plain POSIX sh and awk.
set -u

if [ $# -lt 3 ] || [ "$2" != -- ]; then
	echo "usage: bench-json.sh RUN -- COMMAND [ARGS...]" >&2
	exit 2
fi
run=$1
shift 2
case "$run" in
*[!A-Za-z0-9_.-]*) echo "bench-json.sh: RUN '$run': letters, digits, . _ - only" >&2; exit 2 ;;
esac

dir=${BENCH_JSON_DIR:-${BUILD:-build}/bench}
mkdir -p "$dir" || exit 1
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=$dir/results-$stamp-$run.json
log=$(mktemp) || exit 1
status=$(mktemp) || exit 1
trap 'rm -f "$log" "$status"' EXIT

{ "$@"; echo $? > "$status"; } 2>&1 | tee "$log"
rc=$(cat "$status")
rc=${rc:-1}

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
# through the environment: awk -v would interpret backslashes
tr -d '\r' < "$log" |
BJ_RUN=$run BJ_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ) BJ_HOST=$(uname -n) \
BJ_CPU=$cpu BJ_CMD=$* BJ_RC=$rc awk '
	function str(s) {
		gsub(/\\/, "&&", s)	# "&&": mawk and gawk read "\\\\" differently
		gsub(/"/, "\\\"", s); gsub(/\t/, "\\t", s)
		gsub(/\r/, "\\r", s); gsub(/\n/, "\\n", s)
		gsub(/[\001-\010\013\014\016-\037]/, "", s)	# other controls
		return "\"" s "\""
	}
	function num(v) {	# JSON numbers only: no "1.", ".5", "007", "+1"
		return v ~ /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/
	}
	match($0, /bench: [^ =]+ = [^ ]+/) {
		rest = substr($0, RSTART + 7)
		name = rest; sub(/ = .*/, "", name)
		value = rest; sub(/^[^=]*= /, "", value)
		unit = value; sub(/^[^ ]+ ?/, "", unit); sub(/ +$/, "", unit)
		sub(/ .*/, "", value)
		fig[n++] = sprintf("  {\"name\": %s, \"value\": %s, \"unit\": %s}",
				   str(name), num(value) ? value : str(value), str(unit))
	}
	END {
		printf "{\"run\": %s, \"date\": %s, \"host\": %s, \"cpu\": %s,\n", \
		       str(ENVIRON["BJ_RUN"]), str(ENVIRON["BJ_DATE"]),
		       str(ENVIRON["BJ_HOST"]), str(ENVIRON["BJ_CPU"])
		printf " \"command\": %s, \"exit_status\": %d,\n \"figures\": [\n", \
		       str(ENVIRON["BJ_CMD"]), ENVIRON["BJ_RC"]
		for (i = 0; i < n; i++)
			printf "%s%s\n", fig[i], i + 1 < n ? "," : ""
		printf "]}\n"
	}' > "$out"
echo "bench-json: $(grep -c '"name"' "$out") figures in $out"
exit "$rc"
