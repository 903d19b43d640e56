#!/bin/sh
# SPDX-License-Identifier: MIT
# Draw the device's roofline with the published v5e rows and the model's
# block sweep (tpurt-model --roofline) as SVG and PNG, and check that both
# came out whole: an SVG with a marker for every point, a PNG signature.
#
#   roofline.sh TPURT_MODEL PUBLISHED_TSV OUTDIR
set -eu

model=$1 table=$2 out=$3
svg=$out/roofline.svg png=$out/roofline.png
mkdir -p "$out"
said=$("$model" --roofline "$svg" --table "$table")
echo "$said"
"$model" --roofline "$png" --table "$table"

# every sweep point, published row and model row is one <use> marker
points=$(echo "$said" |
	 sed -n 's/.*: \([0-9]*\) sweep points, \([0-9]*\) published rows/\1 \2/p')
want=$(echo "$points" | awk '{ print $1 + 2 * $2 }')
have=$(grep -c '<use' "$svg" || true)
if ! grep -q '<svg' "$svg" || ! grep -q 'roofline' "$svg" ||
   [ "${want:-0}" -le 0 ] || [ "$have" -lt "$want" ]; then
	echo "roofline: $svg is incomplete: $have point markers, want at least ${want:-?}" >&2
	exit 1
fi
if [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ]; then
	echo "roofline: $png is not a PNG" >&2
	exit 1
fi
echo "roofline: $svg ($have point markers) and $png"
