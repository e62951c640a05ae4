#!/bin/sh
# SPDX-License-Identifier: MIT
# Prints the index kinds of QG_KIND_LIST in include/quadgrid.h, one a line
# (the list CI's per-kind stages loop over). With -x, every kind but
# brute_force; with -c, the list comma-separated.
set -eu
cd "$(dirname "$0")/.."
kinds=$(sed -n 's/^ *X([A-Z_]*, \([a-z_]*\),.*/\1/p' include/quadgrid.h)
[ -n "$kinds" ] || { echo "kinds.sh: no QG_KIND_LIST in include/quadgrid.h" >&2; exit 1; }
case "${1:-}" in
    -x) kinds=$(printf '%s\n' $kinds | grep -vx brute_force) ;;
esac
case "${2:-${1:-}}" in
    -c) printf '%s\n' $kinds | paste -sd, - ;;
    *) printf '%s\n' $kinds ;;
esac
