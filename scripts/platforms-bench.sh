#!/bin/sh
# SPDX-License-Identifier: MIT
# Each kind's frame in each vector form of the library, one machine, one run:
# x86-64 with AVX2, with SSE2 only (QG_NO_AVX2=1: the portable form of
# src/vec.h compiled to SSE2) and with no vectors at all (a build with
# -DQV_SCALAR: what a processor without a vector unit runs), on `agents`,
# `mixed` and `level`; and, for `agents`, the WebAssembly package under Node,
# scalar and SIMD128, beside the native AVX2 build. The forms of one kind and
# workload run one after the other, so each ratio comes from one stretch of
# the machine's time (QG_PB_ROUNDS such rounds, medians kept). Every form's
# checksum must equal the AVX2 form's (the script stops otherwise).
#
#   scripts/platforms-bench.sh [OUT.csv] [N,N...] [FRAMES_100K]
#
# Writes OUT.csv (default bench/results/<machine>/platforms.csv): workload,
# kind, n, form, frame_ms, ratio to AVX2, checksum. QG_PB_WASM=0 leaves the
# Node runs out; QG_PB_WORKLOADS="agents mixed level" chooses the workloads. The
# Node runs need
# emscripten, Node and the JS bench's packages (bindings/js/test.sh installs
# them); the package is rebuilt from the current sources first.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
machine=${QG_MACHINE:-amd-epyc-2c}
out=${1:-bench/results/$machine/platforms.csv}
sizes=${2:-100000,1000000}
frames100k=${3:-30}
# Rounds of the three forms, one after the other; the medians are kept (a
# million-element level differs by 20% from one process to the next).
rounds=${QG_PB_ROUNDS:-1}
kinds=$(sh scripts/kinds.sh | tr ' ' '\n' | grep -v '^brute_force$' | tr '\n' ' ')

log=$(mktemp)
trap 'rm -f "$log"' EXIT
quiet() { "$@" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }; }
quiet cmake -S . -B build-forms/vec -DCMAKE_BUILD_TYPE=Release
quiet cmake --build build-forms/vec -j2 --target quadgrid-bench
quiet cmake -S . -B build-forms/scalar -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-DQV_SCALAR
quiet cmake --build build-forms/scalar -j2 --target quadgrid-bench
vec=build-forms/vec/apps/bench/quadgrid-bench
scalar=build-forms/scalar/apps/bench/quadgrid-bench

# The median of the arguments.
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# field NAME from a --csv result (header line, value line)
field() { awk -F, -v f="$1" 'NR==1{for(i=1;i<=NF;i++)h[$i]=i} NR==2{print $h[f]}'; }

mkdir -p "$(dirname "$out")"
echo "workload,kind,n,frames,form,frame_ms,ratio_to_avx2,checksum" >"$out"
echo "# $(lscpu | grep 'Model name' | sed 's/  */ /g'); $(gcc --version | head -1)" >&2
for n in $(echo "$sizes" | tr ',' ' '); do
    for w in ${QG_PB_WORKLOADS:-agents mixed level}; do
        # A million agents' frames take 40-550 ms: five of them. A level's
        # frame (its agents) takes a few ms at any size: as many as at 100,000.
        frames=$frames100k
        [ "$n" -ge 1000000 ] && [ "$w" != level ] && frames=5
        for k in $kinds; do
            ta="" ts="" tc=""
            r=0
            while [ "$r" -lt "$rounds" ]; do
                a=$("$vec" "$w" --kind "$k" --n "$n" --frames "$frames" --csv)
                s=$(QG_NO_AVX2=1 "$vec" "$w" --kind "$k" --n "$n" --frames "$frames" --csv)
                c=$("$scalar" "$w" --kind "$k" --n "$n" --frames "$frames" --csv)
                sum=$(echo "$a" | field checksum)
                for r2 in "$s" "$c"; do
                    cs=$(echo "$r2" | field checksum)
                    if [ "$cs" != "$sum" ]; then
                        echo "checksum differs: $w $k $n: $cs against $sum" >&2
                        exit 1
                    fi
                done
                ta="$ta $(echo "$a" | field total_ms)"
                ts="$ts $(echo "$s" | field total_ms)"
                tc="$tc $(echo "$c" | field total_ms)"
                r=$((r + 1))
            done
            base=$(median $ta)
            for form in avx2 sse2 scalar; do
                case $form in avx2) t=$base ;; sse2) t=$(median $ts) ;; scalar) t=$(median $tc) ;; esac
                line="$w,$k,$n,$frames,$form,$t,$(echo "$t $base" | awk '{printf "%.2f", $1 / $2}'),$sum"
                echo "$line" >>"$out"
                echo "$line" >&2
            done
        done
    done
done

# WebAssembly under Node, agents at 100,000, each form's quadgrid configured
# as the Node bench configures it (element_size 5, max_element_size 8, the
# world as bounds: bench's --config tuned sets the same).
js=bindings/js/bench
if [ "${QG_PB_WASM:-1}" = 1 ] && command -v emcc >/dev/null 2>&1 && command -v node >/dev/null 2>&1 &&
    [ -d "$js/node_modules" ]; then
    (cd bindings/js && quiet sh scripts/build.sh)
    for k in $kinds; do
        a=$("$vec" agents --kind "$k" --n 100000 --frames 30 --config tuned --csv)
        base=$(echo "$a" | field total_ms)
        line="agents,$k,100000,30,avx2_tuned,$base,1.00,$(echo "$a" | field checksum)"
        echo "$line" >>"$out"
        echo "$line" >&2
        for simd in 0 1; do
            t=$(node "$js/agents.js" --n 100000 --frames 30 --kind "$k" --libs none --simd "$simd" |
                awk -F'\t' '$2 ~ /quadgrid/ {print $6}')
            form=wasm_scalar
            [ "$simd" = 1 ] && form=wasm_simd128
            line="agents,$k,100000,30,$form,$t,$(echo "$t $base" | awk '{printf "%.2f", $1 / $2}'),"
            echo "$line" >>"$out"
            echo "$line" >&2
        done
    done
fi
echo "wrote $out" >&2
