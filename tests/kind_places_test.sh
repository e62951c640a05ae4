#!/bin/sh
# SPDX-License-Identifier: MIT
# A kind is its list line, its files and its tests: no file of src/ outside
# a kind's own (src/<kind>.c, src/<kind>/, the families' shared
# src/grid_family/ and tree_common.*) names a kind in code, so the
# dispatcher, the learning, the rays and nearest forms and the static
# elements, filters and events serve a new kind without an edit. Also checks
# that every kind of QG_KIND_LIST has its files and its class table.
# Usage: kind_places_test.sh SOURCE_DIR
set -eu
root=$1
header=$root/include/quadgrid.h
kinds=$(sed -n 's/^ *X(\([A-Z_]*\), \([a-z_]*\),.*/\1:\2/p' "$header")
[ "$(printf '%s\n' "$kinds" | wc -l)" -ge 2 ] || { echo "FAIL: cannot read QG_KIND_LIST from $header" >&2; exit 1; }
fail=0
# The files that belong to no kind.
shared=$(cd "$root" && find src -type f \( -name '*.c' -o -name '*.h' -o -name '*.inc' \) | sort | while read -r f; do
    case $f in src/grid_family/* | src/tree_common.*) continue ;; esac
    own=0
    for k in $kinds; do
        name=${k#*:}
        case $f in "src/$name.c" | "src/$name/"*) own=1 ;; esac
    done
    [ "$own" -eq 1 ] || echo "$f"
done)
for k in $kinds; do
    NAME=${k%%:*}
    name=${k#*:}
    # The kind's files and its class table (QG_KIND_CLASS_EX(name, QG_NAME, ...)).
    if [ -f "$root/src/$name.c" ]; then
        files="$root/src/$name.c"
    elif [ -d "$root/src/$name" ]; then
        files=$(find "$root/src/$name" -type f)
    else
        echo "FAIL: kind $name has neither src/$name.c nor src/$name/" >&2
        fail=1
        continue
    fi
    # shellcheck disable=SC2086 # a list of files
    if ! grep -Eq "QG_KIND_CLASS(_EX)?\\($name, QG_$NAME," $files; then
        echo "FAIL: no QG_KIND_CLASS line for $name in its files" >&2
        fail=1
    fi
    # Code (comments taken out) of the shared files that names QG_NAME.
    for f in $shared; do
        if sed -e 's|//.*||' -e 's|/\*.*\*/||' "$root/$f" | grep -Eq "(^|[^A-Za-z0-9_])QG_${NAME}([^A-Za-z0-9_]|\$)"; then
            echo "FAIL: $f names QG_$NAME: what a kind is belongs in its own files (its class table)" >&2
            fail=1
        fi
    done
done
[ "$fail" -eq 0 ] && echo "ok: $(printf '%s\n' "$kinds" | wc -l) kinds, each whole in its own files; $(printf '%s\n' "$shared" | wc -l) shared files name none"
exit "$fail"
