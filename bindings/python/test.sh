#!/bin/sh
# SPDX-License-Identifier: MIT
# The Python binding's test: installs the Debian packages it needs, makes a
# venv on Debian's Python (its numpy and cffi, from apt: no other package
# index is used), pip-installs ./bindings/python into it (which compiles the
# library's sources) and runs pytest.
#
# Usage: bindings/python/test.sh [VENV_DIR]   (default: build/python-venv)
# The extra runs of bench.py need python3-scipy, python3-shapely and
# python3-rtree too (BENCH_DEPS=1 installs them).
set -eu
cd "$(dirname "$0")/../.."
root=$(pwd)

# cc and Python.h for the extension; venv (with its pip wheel); wheel for
# setuptools' bdist_wheel; matplotlib for the example's PNG test.
scripts/deps.sh build-essential python3 python3-dev python3-venv python3-wheel \
    python3-setuptools python3-cffi python3-numpy python3-pytest python3-matplotlib
if [ "${BENCH_DEPS:-0}" = 1 ]; then
    scripts/deps.sh python3-scipy python3-shapely python3-rtree
fi

venv=${1:-build/python-venv}
case $venv in /*) ;; *) venv="$root/$venv" ;; esac
# Debian's interpreter, not whichever python3 comes first on PATH (pyenv's
# has no apt packages); --system-site-packages lets the venv see them.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv --system-site-packages "$venv"
fi
"$venv/bin/python" -m pip install --quiet --no-build-isolation --no-index --no-deps "$root/bindings/python"
# From the repository root, so `import quadgrid` finds the installed package
# (bindings/python/quadgrid has no compiled extension).
cd "$root"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider bindings/python/tests
