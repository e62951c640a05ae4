# SPDX-License-Identifier: MIT
# Shared by the sim tests. ctest sets SIM (quadgrid-sim) and PNGCHECK.
set -eu
: "${SIM:?SIM must point at quadgrid-sim}"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/qg-sim-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# scaled N MIN: N times QG_TEST_SCALE (default 1), at least MIN: the
# sanitized CI stage runs the long comparisons shorter, as the C tests.
scaled() { awk -v n="$1" -v m="$2" -v s="${QG_TEST_SCALE:-1}" 'BEGIN { v = int(n * s); print (v < m ? m : v) }'; }
