#!/bin/sh
# SPDX-License-Identifier: MIT
# quadgrid-bench --help is complete and true: it names every workload the
# tool accepts (the names apps/bench/main.c compares argv[1] with), says
# --element-size is quadgrid's only with --config tuned, cites no tracker,
# and every accepted workload really runs its own --help or a tiny run.
# Usage: bench_help_test.sh QUADGRID_BENCH apps/bench/main.c
set -eu
bench=$1 main=$2
help=$("$bench" --help)
fail=0
workloads=$(grep -o 'strcmp(wl, "[a-z_0-9]*") == 0' "$main" | sed 's/.*"\(.*\)".*/\1/' | sort -u)
[ -n "$workloads" ] || { echo "no workloads found in $main" >&2; exit 1; }
for w in $workloads; do
    if printf '%s\n' "$help" | grep -qE "^  $w( |$)"; then
        echo "--help names $w"
    else
        echo "--help does not name the workload $w" >&2
        fail=1
    fi
done
# Every workload --help lists is one the tool takes.
for w in $(printf '%s\n' "$help" | sed -n '/^workloads/,/^options/s/^  \([a-z_0-9]*\) .*/\1/p'); do
    printf '%s\n' "$workloads" | grep -qx "$w" || { echo "--help lists $w, which the tool refuses" >&2; fail=1; }
done
printf '%s\n' "$help" | grep -qi 'issue' && { echo "--help cites a tracker issue" >&2; fail=1; }
printf '%s\n' "$help" | grep -A1 -- '--element-size' | grep -q 'config tuned' ||
    { echo "--help does not say --element-size applies with --config tuned only" >&2; fail=1; }
printf '%s\n' "$help" | grep -q -- '--version' || { echo "--help does not list --version" >&2; fail=1; }
"$bench" --version | grep -qE '^quadgrid-bench [0-9]+\.[0-9]+\.[0-9]+$' || { echo "bad --version" >&2; fail=1; }
"$bench" soak --help | grep -q 'usage: quadgrid-bench soak' || { echo "soak --help" >&2; fail=1; }
exit $fail
