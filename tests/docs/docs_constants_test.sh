#!/bin/sh
# SPDX-License-Identifier: MIT
# Every constant the pages quote (struct sizes, limits, counts) is the code's:
# docs_constants prints them, and each page's sentence must carry that value.
# Usage: docs_constants_test.sh DOCS_CONSTANTS SOURCE_DIR
set -eu
prog=$1 src=$2
out=$("$prog")
printf '%s\n' "$out"
val() { printf '%s\n' "$out" | sed -n "s/^$1 //p"; }
fail=0
need() { # page fixed-string what
    if grep -qF -- "$2" "$src/$1"; then echo "$1: $3 ok"; else echo "$1 does not say \"$2\" ($3)" >&2; fail=1; fi
}
# No figure but the code's: every "tune state, N bytes" says sizeof(qg_tune).
bad=$(grep -ho 'tune state, [0-9]* bytes' "$src"/docs/*.md "$src/README.md" | grep -vF "tune state, $(val tune_state_bytes) bytes" || true)
[ -z "$bad" ] || { echo "stale tune state size: $bad (sizeof(qg_tune) is $(val tune_state_bytes))" >&2; fail=1; }
need docs/tuning.md "tune state, $(val tune_state_bytes) bytes" "sizeof(qg_tune)"
pg=$(val point_grid_max_elements)
need README.md "at most $pg elements" "the point grid's limit"
need docs/kinds.md "At most $pg" "the point grid's limit"
need docs/guide.md "$pg elements" "the point grid's limit"
need docs/guide.md "$(val handle_max) handles" "every kind's handle limit"
# Any other 8-digit grouped count near "elements" that is not the limit is stale.
bad=$(grep -ho '[0-9]\{2\},[0-9]\{3\},[0-9]\{3\} elements' "$src/README.md" "$src"/docs/kinds.md "$src"/docs/guide.md | grep -vF "$pg elements" || true)
[ -z "$bad" ] || { echo "a limit the code does not have: $bad" >&2; fail=1; }
kinds=$(val kind_count)
words="zero one two three four five six seven eight nine ten eleven twelve"
word=$(printf '%s\n' $words | sed -n "$((kinds + 1))p")
need README.md "One interface, $word kinds" "QG_KIND_COUNT"
# The README's table of CMake options holds every option() of the build, with
# its default, and every QG_* cache setting.
for f in $(find "$src" -name CMakeLists.txt -not -path '*/build*' -not -path '*/node_modules/*'); do
    sed -n 's/^ *option(\([A-Z_0-9]*\) "[^"]*" \([A-Z]*\)).*/\1 \2/p' "$f"
done | sort -u > "${TMPDIR:-/tmp}/qg-options.$$"
while read -r name default; do
    need README.md "| \`$name\` | \`$default\` |" "CMake option $name"
done < "${TMPDIR:-/tmp}/qg-options.$$"
rm -f "${TMPDIR:-/tmp}/qg-options.$$"
for name in $(grep -rhoE 'set\((QG_[A-Z_0-9]+) [^)]* CACHE (STRING|PATH)' "$src/CMakeLists.txt" "$src/tests/CMakeLists.txt" "$src/apps" | sed 's/set(\([A-Z_0-9]*\).*/\1/' | sort -u); do
    need README.md "| \`$name\` |" "CMake setting $name"
done
exit $fail
