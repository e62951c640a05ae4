#!/bin/sh
# SPDX-License-Identifier: MIT
# The first command on a fresh Debian machine: install what is missing, build
# quadgrid-sim (Release, in build/), and run it for a few seconds on 100,000
# agents, printing the summary and writing quadgrid-sim.png.
# Extra arguments go to quadgrid-sim, e.g. scripts/run.sh --kind quadtree
set -eu
cd "$(dirname "$0")/.."

# Only what this run needs: a C/C++ toolchain (the project enables both
# languages), CMake, pkg-config and libpng. The window (libsdl2-dev) and the
# video (ffmpeg) are optional; the hints at the end say how to add them.
PKGS="cmake make gcc g++ libc6-dev pkg-config libpng-dev"
if [ -x scripts/deps.sh ]; then
    scripts/deps.sh $PKGS
elif command -v dpkg > /dev/null 2>&1; then
    missing=""
    for p in $PKGS; do
        dpkg -s "$p" > /dev/null 2>&1 || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        echo "run.sh: installing$missing"
        sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
    fi
else
    echo "run.sh: not a Debian system; make sure CMake, a C compiler and libpng are installed"
fi

jobs=$(nproc 2> /dev/null || echo 2)
if [ -f build/CMakeCache.txt ]; then
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
else
    # A first build needs neither the tests nor their dependencies.
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DQG_BUILD_TESTS=OFF > /dev/null
fi
cmake --build build --target quadgrid-sim -j "$jobs" > build/run-build.log 2>&1 || {
    cat build/run-build.log
    exit 1
}
sim=build/apps/sim/quadgrid-sim
[ -x "$sim" ] || sim=$(find build -name quadgrid-sim -type f -perm -u+x | head -n 1)

"$sim" --agents 100000 --frames 300 --seconds 5 --cells --png quadgrid-sim.png "$@"

cat << HINTS

Next:
  $sim --help                                  all options
  $sim --video out.mp4 --frames 300 --cells    a video (needs ffmpeg: apt-get install ffmpeg)
  $sim --view --agents 20000                   a window (needs libsdl2-dev; rerun scripts/run.sh)
HINTS
