#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the build into a temporary prefix and builds a small program
# against it twice: with pkg-config, and with CMake's find_package. Both
# programs must run and report correct results.
# Usage: install_test.sh BUILD_DIR CONSUMER_DIR CMAKE CC [SANITIZE] [BUILD_TYPE]
set -eu

build=$1 consumer=$2 cmake=$3 cc=$4 sanitize=${5:-} build_type=${6:-Release}

# A sanitized library needs the sanitizer runtime in every program it links.
san=""
[ -z "$sanitize" ] || san="-fsanitize=$sanitize"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/qg-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() {
    echo "install test FAILED: $*" >&2
    exit 1
}

echo "--- cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" --config "$build_type" > "$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; fail "cmake --install"; }
[ -f "$prefix/include/quadgrid.h" ] || fail "no include/quadgrid.h in the prefix"
lib=$(find "$prefix" -name 'libquadgrid.*' | head -n 1)
[ -n "$lib" ] || fail "no libquadgrid in the prefix"
libdir=$(dirname "$lib")

# ---- pkg-config
pc=$(find "$prefix" -name quadgrid.pc | head -n 1)
[ -n "$pc" ] || fail "no quadgrid.pc installed"
command -v pkg-config > /dev/null || fail "pkg-config is not installed (scripts/deps.sh pkg-config)"
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs quadgrid) || fail "pkg-config --cflags --libs quadgrid"
echo "--- pkg-config --cflags --libs quadgrid: $flags"
# An installed package must describe where it was installed: a .pc that
# still names the configure-time prefix would build against some other copy.
case "$flags" in
*"$prefix"*) ;;
*) fail "quadgrid.pc does not point into the install prefix $prefix (is its prefix fixed at configure time? use prefix=\${pcfiledir}/../.. or similar)" ;;
esac
# shellcheck disable=SC2086 # flags are a list
"$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror $san "$consumer/main.c" $flags -o "$tmp/consumer_pc" ||
    fail "building with pkg-config flags"
LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/consumer_pc" ||
    fail "the pkg-config consumer reported wrong results"

# ---- find_package
echo "--- find_package(quadgrid)"
"$cmake" -S "$consumer" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_BUILD_TYPE="$build_type" -DCMAKE_C_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san" \
    > "$tmp/cm.log" 2>&1 || { cat "$tmp/cm.log"; fail "configuring the find_package consumer"; }
found=$(sed -n 's/^quadgrid_DIR:[A-Z]*=//p' "$tmp/cm/CMakeCache.txt")
case "$found" in
"$prefix"/*) ;;
*) fail "find_package found quadgrid in '$found', not in $prefix" ;;
esac
"$cmake" --build "$tmp/cm" > "$tmp/cmb.log" 2>&1 || { cat "$tmp/cmb.log"; fail "building the find_package consumer"; }
LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/cm/consumer" ||
    fail "the find_package consumer reported wrong results"
echo "install test passed"
