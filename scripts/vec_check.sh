#!/bin/sh
# SPDX-License-Identifier: MIT
# The portable vector kernels (src/vec.h, src/point_grid/pairs_vec.c) on
# every platform they compile for: tests/vec_check.c (the point grid's
# pairs against brute force) built from the library's sources and run
#   - natively with QG_NO_AVX2=1 (SSE2) and built with -DQV_GENERIC (the
#     vector extensions' generic fallbacks),
#   - for aarch64 (gcc-aarch64-linux-gnu, NEON) under qemu-user,
#   - for WebAssembly (emscripten, -msimd128) under Node.
# Also compiles vec.h's users with clang -Werror for x86-64, aarch64 and
# wasm32. Usage: scripts/vec_check.sh [seed]. About three minutes on a loaded 2-core machine.
set -eu
cd "$(dirname "$0")/.."
seed="${1:-20261128}"
scripts/deps.sh gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user emscripten nodejs clang
out="${TMPDIR:-/tmp}/qg-vec-check.$$"
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
srcs=$(find src -name '*.c' | sort)
warn="-std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -ffp-contract=off -Iinclude -Isrc -DQUADGRID_BUILDING"

echo "== clang -Werror: x86-64, aarch64, wasm32 (-msimd128)"
for f in src/point_grid/pairs_vec.c src/point_grid/pairs.c tests/vec_check.c; do
    clang $warn -fsyntax-only "$f"
    clang $warn --target=aarch64-linux-gnu -fsyntax-only "$f"
    emcc $warn -msimd128 -fsyntax-only "$f"
done

echo "== native, SSE2 (QG_NO_AVX2=1) and AVX2 where the processor has it"
# shellcheck disable=SC2086
cc $warn -o "$out/vec_check" $srcs tests/vec_check.c -lm -lpthread
QG_NO_AVX2=1 "$out/vec_check" "$seed"
"$out/vec_check" "$seed"

echo "== native, generic fallbacks (-DQV_GENERIC)"
# shellcheck disable=SC2086
cc $warn -DQV_GENERIC -o "$out/vec_check_generic" $srcs tests/vec_check.c -lm -lpthread
QG_NO_AVX2=1 "$out/vec_check_generic" "$seed"

echo "== aarch64 (NEON) under qemu"
# shellcheck disable=SC2086
aarch64-linux-gnu-gcc $warn -static -o "$out/vec_check_a64" $srcs tests/vec_check.c -lm -lpthread
qemu-aarch64 "$out/vec_check_a64" "$seed"

echo "== WebAssembly (SIMD128) under Node"
export NODE_PATH="${NODE_PATH:-/usr/share/nodejs}"
# shellcheck disable=SC2086
emcc $warn -msimd128 -sALLOW_MEMORY_GROWTH=1 -sENVIRONMENT=node -sSINGLE_FILE=1 -o "$out/vec_check.js" $srcs tests/vec_check.c
node "$out/vec_check.js" "$seed"
echo "vec_check.sh: ok"
