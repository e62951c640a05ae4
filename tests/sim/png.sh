#!/bin/sh
# SPDX-License-Identifier: MIT
# --png writes a picture that shows agents and cells: not blank, several colours.
. "$(dirname "$0")/common.sh"
"$SIM" --agents 20000 --frames 30 --cells --png "$TMP/out.png" --quiet
"$PNGCHECK" "$TMP/out.png" 6 5
# The picture of a --json run goes with a JSON line holding the agreed fields.
"$SIM" --agents 5000 --frames 10 --png "$TMP/j.png" --json > "$TMP/j.json" 2>/dev/null
for key in agents kind frames sim_ms_median sim_ms_max draw_ms_median index_bytes peak_rss_bytes; do
    grep -q "\"$key\":" "$TMP/j.json" || fail "--json lacks $key: $(cat "$TMP/j.json")"
done
[ "$(wc -l < "$TMP/j.json")" -eq 1 ] || fail "--json printed more than one line"
echo "png ok"
