#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CI stages for the other platforms, as functions .ci/run calls:
#   stage_clang  - clang Release build, warnings as errors, and its tests
#   stage_arm64  - aarch64 cross build (Debian's gcc-aarch64-linux-gnu) of the
#                  library and the test programs, every test run under qemu-user
# Source it from .ci/run (which sets $jobs and $sudo) and add the stage names
# to STAGES; or run one stage alone: .ci/platforms.sh stage_arm64
# Environment: QG_ARM64_TEST_SCALE (default 0.01: qemu runs the tests ~10x
# slower, and the short sequences still reach every kind's paths),
# QG_ARM64_TESTS / QG_CLANG_TESTS (a ctest -R regex, default all).

: "${jobs:=$(nproc 2> /dev/null || echo 2)}"
if [ -z "${sudo+x}" ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
fi

# The README's test command with clang: Release, -Werror, every test (the
# kinds' moves out of line: ctest noinline). The sanitizer stages stay on gcc.
stage_clang() {
    scripts/deps.sh clang
    local dir=${QG_CLANG_BUILD_DIR:-build-clang}
    if [ -n "${QG_CLANG_TESTS:-}" ]; then
        cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DQG_WERROR=ON -DQG_BUILD_TESTS=ON \
            -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
        cmake --build "$dir" -j "$jobs"
        ctest --test-dir "$dir" --output-on-failure -j "$jobs" -R "$QG_CLANG_TESTS"
    else
        BUILD_DIR=$dir CMAKE_ARGS="-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++" scripts/test.sh
    fi
}

# ARM64: the NEON form of the portable kernels (src/vec.h) and the scalar
# (#else) forms of the other hand-vectorised kernels, which no x86 build
# compiles. cmocka for arm64 comes from Debian multiarch. Skipped here:
# hostile_capacity (16.7 M elements, 380 MB: minutes natively, far more
# under qemu), the _sse2 runs (QG_NO_AVX2 changes nothing on ARM64), and the
# install, README and workloads page tests (they build and run a consumer with
# the host's tools, or check a page the x86 run checks).
stage_arm64() {
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        $sudo dpkg --add-architecture arm64
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    fi
    scripts/deps.sh cmake pkg-config gcc-aarch64-linux-gnu g++-aarch64-linux-gnu \
        libc6-dev-arm64-cross qemu-user libcmocka-dev:arm64
    local dir=${QG_ARM64_BUILD_DIR:-build-arm64}
    cmake -S . -B "$dir" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
        -DCMAKE_BUILD_TYPE=Release -DQG_WERROR=ON -DQG_BUILD_TESTS=ON -DQG_BUILD_APPS=OFF
    cmake --build "$dir" -j "$jobs"
    QG_TEST_SCALE=${QG_ARM64_TEST_SCALE:-0.01} ctest --test-dir "$dir" --output-on-failure -j "$jobs" \
        -E '^(hostile_capacity|install|readme_example|workloads_doc|docs_constants)$|_sse2$|^hostile_refusals_' ${QG_ARM64_TESTS:+-R "$QG_ARM64_TESTS"}
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    cd "$(dirname "$0")/.."
    [ "$#" -gt 0 ] || { echo "usage: $0 stage_clang|stage_arm64..." >&2; exit 2; }
    for stage in "$@"; do
        start=$SECONDS
        "$stage"
        echo "=== $stage passed in $((SECONDS - start)) s"
    done
fi
