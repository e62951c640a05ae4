#!/bin/sh
# SPDX-License-Identifier: MIT
# Line and branch coverage of src/ by the test suite (gcc --coverage, gcovr).
#
# Builds the library and the tests in BUILD_DIR (default build-coverage) at
# -O0 with --coverage, runs ctest, and prints gcovr's per-file branch table
# and the summary (lines, functions, branches) of src/.
#
# What is left out, and why:
# - ctest's sim_*, install and readme_example tests: they test the apps and
#   the packaging, not src/ (the install test rebuilds the library without
#   coverage flags); hostile_capacity (2^24 inserts, minutes at -O0; the
#   Release stage runs it). Every test of the library runs: api, contract, oom,
#   threads, scenes, each kind's own invariants, the hostile and coverage
#   tests.
# - gcovr --exclude-unreachable-branches: drops the branches gcc attaches to
#   lines with no code of their own (a closing brace, a `} else {`), which no
#   input can take. No other branch is excluded: no pattern, no markers.
#
# -fprofile-update=atomic: the thread tests run the library on several threads
# at once; plain counters lose updates there (gcov then reads negative counts).
#
# QG_TEST_TIMEOUT=3600: ctest's limit for the per-kind programs (900 s in the
# other builds); at -O0 with atomic counters contract_point_grid alone took
# 800 s, and timed out at 900 s beside another coverage run.
#
# Environment: BUILD_DIR, JOBS, QG_TEST_SCALE (the random sequences' length:
# default 1, as scripts/test.sh; CI runs 0.1, as its sanitized stage).
set -eu
cd "$(dirname "$0")/.."

scripts/deps.sh build-essential cmake pkg-config libcmocka-dev gcovr \
    libpng-dev libsdl2-dev libchipmunk-dev libbox2d-dev

build=${BUILD_DIR:-build-coverage}
jobs=${JOBS:-$(nproc 2> /dev/null || echo 2)}

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DQG_WERROR=ON -DQG_BUILD_TESTS=ON \
    -DQG_BUILD_APPS=ON -DQG_BENCH_PEERS=OFF -DQG_TEST_TIMEOUT=3600 \
    -DCMAKE_C_FLAGS="--coverage -fprofile-update=atomic -O0" \
    -DCMAKE_CXX_FLAGS="--coverage -fprofile-update=atomic -O0" \
    -DCMAKE_EXE_LINKER_FLAGS=--coverage -DCMAKE_SHARED_LINKER_FLAGS=--coverage > /dev/null
cmake --build "$build" -j "$jobs" > /dev/null
# Counts from an earlier run would add up: start from zero.
find "$build" -name '*.gcda' -delete
# A failing test fails the script, after the coverage is printed.
status=0
ctest --test-dir "$build" --output-on-failure -j "$jobs" -E '^(sim_.*|install|readme_example|hostile_capacity)$' ||
    status=$?

root=$(pwd)
echo "=== coverage of src/ (gcovr $(gcovr --version | head -n 1 | awk '{print $2}'), branches per file)"
gcovr --root "$root" --object-directory "$build" --filter "$root/src/" \
    --exclude-unreachable-branches -j "$jobs" --txt -b -s
exit "$status"
