#!/bin/sh
# SPDX-License-Identifier: MIT
# quadgrid in Node (WebAssembly) against the native build of the same kind,
# `agents` at N (default 100,000), alternating native and Node runs in one
# loop so both see the same machine; prints each run's frame medians and
# the ratio. The native bench must be built (cmake Release, target
# quadgrid-bench); the Node side is configured as it is (element_size 5,
# max_element_size 8).
#
#   bench/vs-native.sh BUILD_DIR [kinds] [n] [rounds]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
native="$1/apps/bench/quadgrid-bench"
kinds="${2:-quadtree,grid,loose_grid,point_grid}"
n="${3:-100000}"
rounds="${4:-3}"
frames=30
echo "# $(lscpu | grep 'Model name' | sed 's/  */ /g'), node $(node --version), n $n, $frames frames"
echo "round kind native_ms node_scalar_ms node_simd_ms simd/native"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
r=1
while [ "$r" -le "$rounds" ]; do
    for k in $(echo "$kinds" | tr ',' ' '); do
        nat=$("$native" agents --kind "$k" --n "$n" --frames "$frames" --csv | awk -F, 'NR==1{for(i=1;i<=NF;i++)h[$i]=i} NR==2{print $h["total_ms"]}')
        sc=$(node "$here/agents.js" --n "$n" --frames "$frames" --kind "$k" --libs none --simd 0 | awk -F'\t' '$2 ~ /quadgrid/ {print $6}')
        si=$(node "$here/agents.js" --n "$n" --frames "$frames" --kind "$k" --libs none --simd 1 | awk -F'\t' '$2 ~ /quadgrid/ {print $6}')
        echo "$r $k $nat $sc $si $(echo "$si $nat" | awk '{printf "%.2f", $1 / $2}')" | tee -a "$out"
    done
    r=$((r + 1))
done
# Other load only adds time: the fastest round of each side is the best
# estimate of its cost on a quiet machine.
echo "# fastest round of each: kind native_ms node_scalar_ms node_simd_ms simd/native"
awk '{ if (!($2 in n) || $3 < n[$2]) n[$2] = $3; if (!($2 in s) || $4 < s[$2]) s[$2] = $4;
       if (!($2 in v) || $5 < v[$2]) v[$2] = $5 }
     END { for (k in n) printf "min %s %.3f %.3f %.3f %.2f\n", k, n[k], s[k], v[k], v[k] / n[k] }' "$out"
