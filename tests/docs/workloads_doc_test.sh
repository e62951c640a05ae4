#!/bin/sh
# SPDX-License-Identifier: MIT
# Every check value workloads_doc prints (recomputed from docs/workloads.md
# alone) stands in the page's table, and the table has no row it did not
# print. Usage: workloads_doc_test.sh <workloads_doc> <docs/workloads.md>
set -eu
prog=$1
page=$2
out=$("$prog")
printf '%s\n' "$out"
missing=0
printf '%s\n' "$out" | while IFS= read -r row; do
    grep -qF -- "$row" "$page" || { echo "not in $page: $row" >&2; exit 1; }
done || missing=1
# Rows of the check-value table: a first cell in backticks and a checksum cell.
want=$(grep -cE '^\| `[a-z]+`[^|]* \| [0-9,]+.* \| `[0-9a-f]{16}` \|' "$page")
got=$(printf '%s\n' "$out" | grep -c .)
if [ "$want" -ne "$got" ]; then
    echo "the page's table has $want check values, the program printed $got" >&2
    missing=1
fi
exit $missing
