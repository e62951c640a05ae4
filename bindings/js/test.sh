#!/bin/sh
# SPDX-License-Identifier: MIT
# The JavaScript package's whole check, from a fresh clone:
#   1. installs what it needs (Debian: emscripten, nodejs/npm, chromium),
#   2. builds the package's WebAssembly (scalar and SIMD128) and the wasm
#      differential driver from the library's sources,
#   3. node --test on both builds (every kind against a JS brute force, bad
#      input, memory given back),
#   4. the differential driver (fuzz/fuzz_ops.c: every kind against
#      brute_force, qg_validate after every step) and the order check
#      (tests/order_check.c: golden order hashes, snapshots written on
#      x86-64) on both builds,
#   5. npm pack, install of the tarball into a temporary project, a smoke test
#      there (ES module import, TypeScript types shipped),
#   6. the benchmark's cross-check at a small size (every library's pairs
#      equal quadgrid's),
#   7. the page in headless chromium (100,000 agents, its brute-force check).
#
# Usage: bindings/js/test.sh [--quick]   (--quick: steps 1-4 only)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
quick=0
[ "${1:-}" = "--quick" ] && quick=1
start=$(date +%s)

pkgs="emscripten"
command -v node > /dev/null 2>&1 || pkgs="$pkgs nodejs"
command -v npm > /dev/null 2>&1 || pkgs="$pkgs npm"
[ "$quick" = 1 ] || pkgs="$pkgs chromium"
# shellcheck disable=SC2086
"$root/scripts/deps.sh" $pkgs

cd "$here"
echo "== build"
sh scripts/build.sh --diff

echo "== node --test (scalar, SIMD128)"
QUADGRID_SIMD=0 node --test test/*.test.js
QUADGRID_SIMD=1 node --test test/*.test.js

echo "== wasm differential driver (fuzz_ops, every kind against brute_force)"
node build/wasm_diff-scalar.js "${QG_WASM_DIFF_RUNS:-300}"
node build/wasm_diff-simd.js "${QG_WASM_DIFF_RUNS:-300}"

echo "== the same order everywhere (tests/order_check.c: golden hashes, x86-64 snapshots)"
node build/order_check-scalar.js check "$root/tests/golden"
node build/order_check-simd.js check "$root/tests/golden"

if [ "$quick" = 1 ]; then
    echo "bindings/js/test.sh --quick: ok ($(($(date +%s) - start)) s)"
    exit 0
fi

echo "== npm pack, install from the tarball, smoke test"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tarball=$(npm pack --silent --pack-destination "$tmp" | tail -n 1)
mkdir "$tmp/app"
cd "$tmp/app"
printf '{ "name": "qg-smoke", "private": true, "type": "module" }\n' > package.json
npm install --silent --no-audit --no-fund "$tmp/$tarball"
test -f node_modules/quadgrid/index.d.ts
test ! -e node_modules/quadgrid/src   # the package ships the built modules only
cat > smoke.js << 'JS'
import { init, Index } from "quadgrid";
const { build } = await init();
const ix = new Index({ kind: "quadtree", bounds: [0, 0, 100, 100] });
const h = ix.insert(new Float32Array([0, 0, 10, 10, 5, 5, 20, 20, 50, 50, 60, 60]));
ix.cleanup();
const p = Array.from(ix.pairs());
if (p.join() !== "0,1" || h.length !== 3 || ix.count !== 3) throw new Error(`smoke: pairs ${p}`);
try { ix.remove([7]); throw new Error("smoke: no error"); } catch (e) { if (e.code !== "QG_ERR_HANDLE") throw e; }
ix.free();
console.log(`smoke: ok (${build} build, from the tarball)`);
JS
node smoke.js
QUADGRID_SIMD=0 node smoke.js
cd "$here"

echo "== benchmark cross-check (every library's pairs equal quadgrid's, 10,000 agents)"
(cd bench && npm ci --silent --no-audit --no-fund && node agents.js --n 10000 --frames 3 --kind point_grid,grid)

echo "== the page in headless chromium"
(cd "$root/web/test" && npm ci --silent --no-audit --no-fund && node browser.js --seconds 5 --screenshot "$tmp/web.png")

echo "bindings/js/test.sh: ok ($(($(date +%s) - start)) s)"
