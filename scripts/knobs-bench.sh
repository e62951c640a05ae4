#!/bin/sh
# SPDX-License-Identifier: MIT
# The figures of docs/tuning.md: every kind from qg_default_config
# and from bounds only beside its best hand tuning (quadgrid-bench knobs), and
# today's tuned workloads before (BASE: a quadgrid-bench built from the commit
# before the change) and after, alternately. Usage:
#   scripts/knobs-bench.sh BUILD_DIR [BASE_BENCH] [OUT_DIR]
# Runs under flock /tmp/qg-bench.lock (one benchmark at a time).
set -eu
build=${1:?usage: knobs-bench.sh BUILD_DIR [BASE_BENCH] [OUT_DIR]}
base=${2:-}
out=${3:-/tmp/knobs}
n=${KNOBS_N:-200000}
nchange=${KNOBS_N_CHANGING:-20000}
kinds=quadtree,loose_quadtree,level_quadtree,bucket_quadtree,grid,multi_grid,loose_grid,point_grid
bench="$build/apps/bench/quadgrid-bench"
mkdir -p "$out"
lscpu | grep 'Model name' > "$out/cpu.txt" || true
run() { flock /tmp/qg-bench.lock "$@"; }
run "$bench" knobs --n "$n" --scene small,tiny,large,mixed --frames 10 > "$out/fixed.txt"
run "$bench" knobs --n "$nchange" --scene grow,gather,arrive --frames 10 > "$out/changing.txt"
if [ -n "$base" ]; then
    for rep in 1 2; do
        for wl in agents mixed level; do
            run "$base" "$wl" --kind "$kinds" --frames 20 > "$out/$wl.base.$rep.txt" 2>&1
            run "$bench" "$wl" --kind "$kinds" --frames 20 --config tuned > "$out/$wl.tuned.$rep.txt" 2>&1
            run "$bench" "$wl" --kind "$kinds" --frames 20 --config default > "$out/$wl.default.$rep.txt" 2>&1
        done
    done
fi
