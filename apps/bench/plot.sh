#!/bin/sh
# SPDX-License-Identifier: MIT
# Sweeps the agents (or mixed) workload over N and plots total_ms per frame
# against N.
#
#   apps/bench/plot.sh [path/to/quadgrid-bench] [out.png]
#
# Environment: NS (default "10000 30000 100000 300000 1000000"), FRAMES
# (measured frames per run, default 10), KINDS (default all: every built
# kind and peer; brute_force drops out above 20000 by itself), WORKLOAD
# (agents or mixed, default agents).
# Needs gnuplot (Debian: gnuplot-nox). Keeps the CSV next to the PNG.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
bench=${1:-./build/apps/bench/quadgrid-bench}
out=${2:-agents_total_ms.png}
ns=${NS:-"10000 30000 100000 300000 1000000"}
frames=${FRAMES:-10}
kinds=${KINDS:-all}
workload=${WORKLOAD:-agents}
case $workload in
    agents|mixed) ;;
    *) echo "plot.sh: WORKLOAD must be agents or mixed, not '$workload'" >&2; exit 2 ;;
esac

command -v gnuplot >/dev/null 2>&1 || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
[ -x "$bench" ] || { echo "plot.sh: no quadgrid-bench at $bench" >&2; exit 1; }

csv=${out%.png}.csv
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT

: > "$csv.tmp"
for n in $ns; do
    echo "plot.sh: $workload n=$n" >&2
    "$bench" "$workload" --kind "$kinds" --n "$n" --frames "$frames" --csv >> "$csv.tmp"
done
# One header line, then the rows (each run prints its own header).
{ grep -m1 '^workload,' "$csv.tmp"; grep -v '^workload,' "$csv.tmp"; } > "$csv"
rm -f "$csv.tmp"

# Column numbers from the header, so the CSV layout may grow.
awk -F, -v dir="$data" '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { print $col["n"], $col["total_ms"] >> (dir "/" $col["kind"] ".dat") }
' "$csv"

names=$(cd "$data" && ls *.dat | sed 's/\.dat$//' | tr '\n' ' ')
gnuplot -e "datadir='$data'; kinds='$names'; out='$out'; workload='$workload'" "$here/plot.gp"
echo "plot.sh: wrote $out and $csv" >&2
