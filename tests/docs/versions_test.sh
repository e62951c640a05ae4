#!/bin/sh
# SPDX-License-Identifier: MIT
# One version: include/quadgrid.h's QG_VERSION_* is what CMake's project(),
# the built pkg-config file, the Python package (setup.py reads the header;
# pyproject.toml declares it dynamic), the npm package.json, the changelog's
# newest entry and both tools' --version say.
# Usage: versions_test.sh SOURCE_DIR CMAKE_PROJECT_VERSION QUADGRID_PC [BENCH] [SIM]
set -eu
src=$1 cmake_version=$2 pc=$3 bench=${4:-} sim=${5:-}
fail=0
v=$(for p in MAJOR MINOR PATCH; do sed -n "s/^#define QG_VERSION_$p \([0-9][0-9]*\)$/\1/p" "$src/include/quadgrid.h"; done | paste -sd. -)
echo "include/quadgrid.h: $v"
case $v in *.*.*) ;; *) echo "no QG_VERSION_MAJOR/MINOR/PATCH in include/quadgrid.h" >&2; exit 1 ;; esac
same() { # what value
    if [ "$2" = "$v" ]; then echo "$1: $2"; else echo "$1 says '$2', the header $v" >&2; fail=1; fi
}
same "CMake project()" "$cmake_version"
same "quadgrid.pc" "$(sed -n 's/^Version: //p' "$pc")"
same "bindings/js/package.json" "$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$src/bindings/js/package.json" | head -n 1)"
same "CHANGELOG.md" "$(sed -n 's/^## \([0-9][0-9.]*\).*/\1/p' "$src/CHANGELOG.md" | head -n 1)"
# The Python package has no version of its own: pyproject.toml leaves it to
# setup.py, which reads the header (quadgrid/_build.py's header_version).
if grep -q '^version *=' "$src/bindings/python/pyproject.toml"; then
    echo "bindings/python/pyproject.toml sets a version of its own" >&2; fail=1
fi
grep -q '^dynamic = \["version"\]' "$src/bindings/python/pyproject.toml" ||
    { echo "bindings/python/pyproject.toml: no dynamic = [\"version\"]" >&2; fail=1; }
grep -q 'version=header_version()' "$src/bindings/python/setup.py" ||
    { echo "bindings/python/setup.py does not take the header's version" >&2; fail=1; }
py=$(sed -n '/^def header_version/,/^$/p' "$src/bindings/python/quadgrid/_build.py")
[ -n "$py" ] || { echo "bindings/python/quadgrid/_build.py: no header_version()" >&2; fail=1; }
if command -v python3 > /dev/null && [ -n "$py" ]; then
    got=$(python3 -c "import os, re, sys
ROOT = sys.argv[1]
$py
print(header_version())" "$src")
    same "Python package (setup.py)" "$got"
fi
[ -z "$bench" ] || same "quadgrid-bench --version" "$("$bench" --version | sed 's/^quadgrid-bench //')"
[ -z "$sim" ] || same "quadgrid-sim --version" "$("$sim" --version | sed 's/^quadgrid-sim //')"
exit $fail
