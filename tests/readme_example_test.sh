#!/bin/sh
# SPDX-License-Identifier: MIT
# Compiles and runs every ```c block of README.md and of the docs pages named
# after it (docs/guide.md) against the built library, so the examples users
# copy are known to work.
# Usage: readme_example_test.sh README CC INCLUDE_DIR LIBRARY [SANITIZE] [WORKDIR] [DOC.md ...]
# Exit 77 (ctest: skipped) when README.md has no ```c block yet. A DOC.md
# named on the command line must exist and hold at least one ```c block.
set -eu

readme=$1 cc=$2 include=$3 library=$4 sanitize=${5:-} work=${6:-}
shift 4
[ $# -eq 0 ] || shift
[ $# -eq 0 ] || shift

if [ ! -f "$readme" ]; then
    echo "SKIP: $readme does not exist yet"
    exit 77
fi
[ -n "$work" ] || work=$(mktemp -d "${TMPDIR:-/tmp}/qg-readme.XXXXXX")
mkdir -p "$work"

san=""
[ -z "$sanitize" ] || san="-fsanitize=$sanitize"
libdir=$(dirname "$library")

# Every ```c block of a page, each a whole program: block k of README.md
# goes to readme_example_k.c, block k of docs/guide.md to guide_example_k.c.
extract() { # page prefix
    rm -f "$work/$2"_example_*.c
    awk -v dir="$work" -v prefix="$2" '
        /^```c[ \t]*$/ { k++; inside = 1; next }
        inside && /^```/ { inside = 0; next }
        inside { print > (dir "/" prefix "_example_" k ".c") }
    ' "$1"
}

run_blocks() { # page prefix
    page=$1 prefix=$2 name=$(basename "$1")
    k=1
    while [ -f "$work/${prefix}_example_$k.c" ]; do
        src=$work/${prefix}_example_$k.c
        if ! grep -q 'main[ \t]*(' "$src"; then
            echo "$name's \`\`\`c block $k has no main(); it must be a whole program:" >&2
            cat "$src" >&2
            exit 1
        fi
        # shellcheck disable=SC2086 # san is a list
        "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror $san -I"$include" "$src" "$library" -lm -pthread \
            -Wl,-rpath,"$libdir" -o "$work/${prefix}_example_$k" || {
            echo "$name's example $k does not compile:" >&2
            cat -n "$src" >&2
            exit 1
        }
        echo "--- running $name example $k"
        "$work/${prefix}_example_$k" || {
            echo "$name's example $k failed (exit status $?) ($page)" >&2
            exit 1
        }
        k=$((k + 1))
    done
    echo "--- $name: $((k - 1)) example(s) compiled and ran"
}

extract "$readme" readme
if [ ! -s "$work/readme_example_1.c" ]; then
    echo "SKIP: $readme has no \`\`\`c block yet (the usage example)"
    exit 77
fi
run_blocks "$readme" readme

for doc in "$@"; do
    if [ ! -f "$doc" ]; then
        echo "$doc does not exist" >&2
        exit 1
    fi
    prefix=$(basename "$doc" .md)
    extract "$doc" "$prefix"
    if [ ! -s "$work/${prefix}_example_1.c" ]; then
        echo "$doc has no \`\`\`c block: nothing of it is tested" >&2
        exit 1
    fi
    run_blocks "$doc" "$prefix"
done
