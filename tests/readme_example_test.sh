#!/bin/sh
# Compiles and runs the first ```c block of README.md against the built
# library, so the usage example users copy is known to work.
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
src=$work/readme_example.c

# The lines between the first line that is exactly ```c and the next ```.
awk '
    !found && /^```c[ \t]*$/ { found = 1; inside = 1; next }
    inside && /^```/ { exit }
    inside { print }
' "$readme" > "$src"

if [ ! -s "$src" ]; then
    echo "SKIP: $readme has no \`\`\`c block yet (the usage example)"
    exit 77
fi
if ! grep -q 'main[ \t]*(' "$src"; then
    echo "README.md's first \`\`\`c block has no main(); it must be a whole program:" >&2
    cat "$src" >&2
    exit 1
fi

san=""
[ -z "$sanitize" ] || san="-fsanitize=$sanitize"
libdir=$(dirname "$library")
# shellcheck disable=SC2086 # san is a list
"$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror $san -I"$include" "$src" "$library" -lm \
    -Wl,-rpath,"$libdir" -o "$work/readme_example" || {
    echo "README.md's usage example does not compile:" >&2
    cat -n "$src" >&2
    exit 1
}
echo "--- running the README example"
"$work/readme_example"
