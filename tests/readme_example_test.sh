#!/bin/sh
# Compiles and runs every ```c block of README.md against the built
# library, so the examples users copy are known to work.
# Usage: readme_example_test.sh README CC INCLUDE_DIR LIBRARY [SANITIZE] [WORKDIR]
# Exit 77 (ctest: skipped) when README.md has no ```c block yet.
set -eu

readme=$1 cc=$2 include=$3 library=$4 sanitize=${5:-} work=${6:-}

if [ ! -f "$readme" ]; then
    echo "SKIP: $readme does not exist yet"
    exit 77
fi
[ -n "$work" ] || work=$(mktemp -d "${TMPDIR:-/tmp}/qg-readme.XXXXXX")
mkdir -p "$work"


# Every ```c block of README.md, each a whole program: block k goes to
# readme_example_k.c.
awk -v dir="$work" '
    /^```c[ \t]*$/ { k++; inside = 1; next }
    inside && /^```/ { inside = 0; next }
    inside { print > (dir "/readme_example_" k ".c") }
' "$readme"

if [ ! -s "$work/readme_example_1.c" ]; then
    echo "SKIP: $readme has no \`\`\`c block yet (the usage example)"
    exit 77
fi

san=""
[ -z "$sanitize" ] || san="-fsanitize=$sanitize"
libdir=$(dirname "$library")
k=1
while [ -f "$work/readme_example_$k.c" ]; do
    src=$work/readme_example_$k.c
    if ! grep -q 'main[ \t]*(' "$src"; then
        echo "README.md's \`\`\`c block $k has no main(); it must be a whole program:" >&2
        cat "$src" >&2
        exit 1
    fi
    # shellcheck disable=SC2086 # san is a list
    "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror $san -I"$include" "$src" "$library" -lm -pthread \
        -Wl,-rpath,"$libdir" -o "$work/readme_example_$k" || {
        echo "README.md's example $k does not compile:" >&2
        cat -n "$src" >&2
        exit 1
    }
    echo "--- running README example $k"
    "$work/readme_example_$k"
    k=$((k + 1))
done
