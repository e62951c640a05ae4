#!/bin/sh
# SPDX-License-Identifier: MIT
# The test command: installs what the build and the tests need, configures
# build/ (Release, warnings are errors), builds everything and runs ctest.
# Exits nonzero when anything fails.
#
# Environment: BUILD_DIR (default build), CMAKE_ARGS (extra configure
# arguments), QG_TEST_SCALE (the random test sequences' length: 0.2 by
# default, a few minutes on two cores; CI runs 0.5: .ci/run's stage_tests_release).
set -eu
cd "$(dirname "$0")/.."

# The tests (cmocka, pkg-config for the install test) and the apps, which
# build as part of the default configuration.
# xvfb, xdotool and imagemagick let the window test (sim_view) run headless
# instead of skipping.
scripts/deps.sh build-essential cmake pkg-config libcmocka-dev \
    libpng-dev libsdl2-dev libchipmunk-dev libbox2d-dev libboost-dev ffmpeg \
    xvfb xdotool imagemagick

build=${BUILD_DIR:-build}
jobs=$(nproc 2> /dev/null || echo 2)

# shellcheck disable=SC2086 # CMAKE_ARGS is a list
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DQG_WERROR=ON -DQG_BUILD_TESTS=ON ${CMAKE_ARGS:-}
cmake --build "$build" -j "$jobs"
QG_TEST_SCALE=${QG_TEST_SCALE:-0.2} ctest --test-dir "$build" --output-on-failure -j "$jobs"

# The Python package (bindings/python): built into a venv from Debian's
# Python and its packages, then its pytest suite.
bindings/python/test.sh "$build/python-venv"
