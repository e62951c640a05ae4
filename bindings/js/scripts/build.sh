#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds the package's WebAssembly with Debian's emscripten from the library's
# own sources (every src/**/*.c, so files moving inside src/ need no edit
# here): dist/quadgrid-scalar.mjs and dist/quadgrid-simd.mjs, each one ES
# module with its wasm embedded (-sSINGLE_FILE: no fetch at load, so Node
# loads it from a file path too). Also the differential driver
# (build/wasm_diff-{scalar,simd}.js) when called with --diff.
#
# Usage: scripts/build.sh [--diff]     (from bindings/js/)
set -eu
cd "$(dirname "$0")/.."
root=$(cd ../.. && pwd)
# emcc runs its JavaScript tools with the node first on PATH; Debian's
# emscripten finds its modules (acorn, ...) only through NODE_PATH.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}
command -v emcc > /dev/null || { echo "build.sh: emcc not found (apt install emscripten)" >&2; exit 1; }

srcs=$(find "$root/src" -name '*.c' | sort)
mkdir -p dist build
# The library's flags (CMakeLists.txt): C11, no contraction, warnings as errors.
cflags="-std=c11 -O3 -ffp-contract=off -Wall -Wextra -Wpedantic -Werror -DQUADGRID_BUILDING -I$root/include -I$root/src"
link="-sMODULARIZE=1 -sEXPORT_ES6=1 -sSINGLE_FILE=1 -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB
 -sENVIRONMENT=web,worker -sFILESYSTEM=0 -sEXIT_RUNTIME=0 -sTOTAL_STACK=1MB
 -sEXPORTED_FUNCTIONS=_malloc,_free -sEXPORTED_RUNTIME_METHODS=[] -sINCOMING_MODULE_JS_API=[]"

build() { # name extra-flags
    echo "build.sh: dist/quadgrid-$1.mjs"
    # shellcheck disable=SC2086
    emcc $cflags $2 $srcs src/qg_js.c "$root/apps/common/workload.c" -I"$root/apps/common" \
        $link -sEXPORT_NAME=createQuadgrid$1 -o "dist/quadgrid-$1.mjs"
}
build scalar ""
# SIMD128: the library's portable kernels (src/vec.h) in SIMD128, and the
# compiler's own vectoriser. Not -msse2: emscripten's SSE2 headers map some
# intrinsics to several SIMD128 instructions, and such a build of the old
# SSE2 kernels measured slower (agents, 100,000, one process, alternating:
# quadtree update 7.7 ms against 5.1, grid pairs 6.6 against 3.3).
build simd "-msimd128"

if [ "${1:-}" = "--diff" ]; then
    # CommonJS output beside the package's "type": "module".
    echo '{"type": "commonjs"}' > build/package.json
    for v in scalar simd; do
        extra=""
        [ "$v" = simd ] && extra="-msimd128"
        echo "build.sh: build/wasm_diff-$v.js"
        # shellcheck disable=SC2086
        emcc $cflags $extra $srcs "$root/fuzz/fuzz_ops.c" test/wasm_diff_main.c \
            -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sENVIRONMENT=node -sEXIT_RUNTIME=1 -sSINGLE_FILE=1 \
            -sTOTAL_STACK=1MB -o "build/wasm_diff-$v.js"
    done
fi
