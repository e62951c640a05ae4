#!/bin/sh
# SPDX-License-Identifier: MIT
# Every kind's move is out of line in the built library: the move_one that
# QG_KIND_CLASS_EX makes around <kind>_move must call (or jump to) it, not
# hold an inlined copy. Each kind defines its move `static QG_NOINLINE`;
# inlined, the quadtree's and the point grid's `agents` updates ran 40% and
# 65% slower. (A symbol alone proves nothing: the class table takes the
# move's address, so an out-of-line copy exists even when move_one inlined
# it, as clang did while the attribute came after the definition.)
# Usage: noinline_test.sh OBJDUMP LIBRARY KIND...
set -eu
[ "$#" -ge 3 ] || { echo "usage: $0 OBJDUMP LIBRARY KIND..." >&2; exit 2; }
objdump_tool=$1
lib=$2
shift 2
# "<function>: <instruction>" for every instruction of every *_move_one.
asm=$("$objdump_tool" -dr --no-show-raw-insn "$lib" |
    awk '/^[0-9a-f]+ <[A-Za-z0-9_]+>:$/ { f = $2; next } /^$/ { f = ""; next } f ~ /_move_one>:$/ { print f, $0 }') ||
    { echo "noinline_test: $objdump_tool $lib failed" >&2; exit 1; }
fail=0
for kind in "$@"; do
    body=$(printf '%s\n' "$asm" | grep -F "<${kind}_move_one>:" || true)
    if [ -z "$body" ]; then
        echo "FAIL: no ${kind}_move_one in $lib" >&2
        fail=1
    elif printf '%s\n' "$body" | grep -Eq "[<[:space:]]${kind}_move([>+-]|\$)"; then
        echo "ok: ${kind}_move_one calls ${kind}_move"
    else
        echo "FAIL: ${kind}_move_one does not call ${kind}_move: the move was inlined (QG_NOINLINE dropped?)" >&2
        fail=1
    fi
done
exit "$fail"
