#!/bin/sh
# SPDX-License-Identifier: MIT
# The portable vector kernels (src/vec.h and its users: every kind's box
# tests and cell mappings, the trees' leaf pairs, the static caches, the
# point grid's pair, ray and k-nearest kernels) on every platform they
# compile for. Two programs, built from the library's sources:
# tests/vec_check.c (the point grid's pairs against brute force, crowded
# cells) and the differential driver (fuzz/fuzz_ops.c under
# bindings/js/test/wasm_diff_main.c: every kind against brute_force, pairs,
# queries, rays and nearest, qg_validate after every step). They run
#   - natively with QG_NO_AVX2=1 (SSE2), built with -DQV_GENERIC (the
#     vector extensions' generic fallbacks) and with -DQV_SCALAR (no vector
#     form at all: what a processor without a vector unit runs),
#   - for aarch64 (gcc-aarch64-linux-gnu, NEON) under qemu-user,
#   - for WebAssembly (emscripten, -msimd128) under Node.
# Also compiles every source with clang -Werror for x86-64 (with vectors and
# with -DQV_SCALAR), aarch64 and wasm32. Usage: scripts/vec_check.sh [seed]. About three minutes on a loaded 2-core machine.
set -eu
cd "$(dirname "$0")/.."
seed="${1:-20261128}"
runs="${QG_VEC_DIFF_RUNS:-300}" # differential runs per kind and form
scripts/deps.sh gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user emscripten nodejs clang
out="${TMPDIR:-/tmp}/qg-vec-check.$$"
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
srcs=$(find src -name '*.c' | sort)
diff_srcs="fuzz/fuzz_ops.c bindings/js/test/wasm_diff_main.c"
warn="-std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -ffp-contract=off -Iinclude -Isrc -DQUADGRID_BUILDING"

echo "== clang -Werror: x86-64, aarch64, wasm32 (-msimd128)"
for f in $srcs tests/vec_check.c; do
    clang $warn -fsyntax-only "$f"
    clang $warn --target=aarch64-linux-gnu -fsyntax-only "$f"
    emcc $warn -msimd128 -fsyntax-only "$f"
    clang $warn -DQV_SCALAR -fsyntax-only "$f"
done

echo "== native, SSE2 (QG_NO_AVX2=1) and AVX2 where the processor has it"
# shellcheck disable=SC2086
cc $warn -o "$out/vec_check" $srcs tests/vec_check.c -lm -lpthread
QG_NO_AVX2=1 "$out/vec_check" "$seed"
"$out/vec_check" "$seed"
# shellcheck disable=SC2086
cc $warn -o "$out/diff" $srcs $diff_srcs -lm -lpthread
QG_NO_AVX2=1 "$out/diff" "$runs" "$seed"

echo "== native, generic fallbacks (-DQV_GENERIC)"
# shellcheck disable=SC2086
cc $warn -DQV_GENERIC -o "$out/vec_check_generic" $srcs tests/vec_check.c -lm -lpthread
QG_NO_AVX2=1 "$out/vec_check_generic" "$seed"
# shellcheck disable=SC2086
cc $warn -DQV_GENERIC -o "$out/diff_generic" $srcs $diff_srcs -lm -lpthread
"$out/diff_generic" "$runs" "$seed"

echo "== native, no vector form (-DQV_SCALAR)"
# shellcheck disable=SC2086
cc $warn -DQV_SCALAR -o "$out/vec_check_scalar" $srcs tests/vec_check.c -lm -lpthread
"$out/vec_check_scalar" "$seed"
# shellcheck disable=SC2086
cc $warn -DQV_SCALAR -o "$out/diff_scalar" $srcs $diff_srcs -lm -lpthread
"$out/diff_scalar" "$runs" "$seed"

echo "== aarch64 (NEON) under qemu"
# shellcheck disable=SC2086
aarch64-linux-gnu-gcc $warn -static -o "$out/vec_check_a64" $srcs tests/vec_check.c -lm -lpthread
qemu-aarch64 "$out/vec_check_a64" "$seed"
# shellcheck disable=SC2086
aarch64-linux-gnu-gcc $warn -static -o "$out/diff_a64" $srcs $diff_srcs -lm -lpthread
qemu-aarch64 "$out/diff_a64" "$runs" "$seed"

echo "== WebAssembly (SIMD128) under Node"
export NODE_PATH="${NODE_PATH:-/usr/share/nodejs}"
# shellcheck disable=SC2086
emcc $warn -msimd128 -sALLOW_MEMORY_GROWTH=1 -sENVIRONMENT=node -sSINGLE_FILE=1 -o "$out/vec_check.js" $srcs tests/vec_check.c
node "$out/vec_check.js" "$seed"
echo "vec_check.sh: ok"
