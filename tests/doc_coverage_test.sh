#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Host test: every function libtpurt exports has its reference section.
# The exports are libtpurt/libtpurt.map's global names (each one checked
# to be a function libtpurt.so.0 really exports); each needs a "## NAME"
# heading in doc/libtpurt.md, and each "## tpurt_..." heading there must
# name an export (no section outlives its function). TAP.
set -u

TOP='@TOP@'
BUILD='@BUILD@'
case "$TOP" in @*) TOP=$(cd "$(dirname "$0")/.." && pwd) ;; esac
case "$BUILD" in @*) BUILD=$TOP/build ;; esac
MAP=$TOP/libtpurt/libtpurt.map
DOC=$TOP/doc/libtpurt.md
LIB=$BUILD/lib/libtpurt.so.0

# shellcheck source=tests/tap.sh
. "$TOP/tests/tap.sh"

# The names of every version node's "global:" part.
exported=$(awk '
	/global:/ { on = 1; sub(/.*global:/, "") }
	/local:/ { on = 0 }
	on { gsub(/[;{} \t]/, " "); for (i = 1; i <= NF; i++) print $i }' "$MAP" | sort -u)
# The functions the built library exports (nm: T, in its versions).
in_lib=$(nm -D --defined-only "$LIB" 2>/dev/null | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort -u)
sections=$(sed -n 's/^## \(tpurt_[A-Za-z0-9_]*\)[[:space:]]*$/\1/p' "$DOC" | sort)

if [ -n "$exported" ]; then
	result ok "libtpurt.map exports $(wc -w <<<"$exported") names"
else
	result fail "no global names in $MAP"
fi
if [ -n "$in_lib" ]; then
	result ok "$LIB exports $(wc -w <<<"$in_lib") functions"
else
	result fail "$LIB: no exported functions (is it built?)"
fi

for f in $exported; do
	if ! grep -qx "$f" <<<"$in_lib"; then
		result fail "$f: in libtpurt.map but not a function libtpurt.so.0 exports"
	elif grep -qx "$f" <<<"$sections"; then
		result ok "$f has a section in doc/libtpurt.md"
	else
		result fail "$f: no '## $f' section in doc/libtpurt.md"
	fi
done
for s in $(uniq -d <<<"$sections"); do
	result fail "doc/libtpurt.md: '## $s' appears more than once"
done
for s in $(uniq <<<"$sections"); do
	grep -qx "$s" <<<"$exported" ||
		result fail "doc/libtpurt.md: '## $s' documents no function of libtpurt.map"
done

tap_end
