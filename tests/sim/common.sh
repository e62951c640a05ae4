# Shared by the sim tests. ctest sets SIM (quadgrid-sim) and PNGCHECK.
set -eu
: "${SIM:?SIM must point at quadgrid-sim}"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/qg-sim-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
