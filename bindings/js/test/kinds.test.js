// SPDX-License-Identifier: MIT
// The package's kinds are the library's: index.js asks the built module
// (QG_KIND_COUNT, qg_kind_name) and dist/kinds.d.ts is generated from the
// header, so both must equal QG_KIND_LIST as include/quadgrid.h spells it,
// in order. A kind added to the list reaches JavaScript with no edit here.
// The package's version is the header's too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { init, Index, kinds } from "../index.js";

const beforeInit = kinds.length;
const header = readFileSync(new URL("../../../include/quadgrid.h", import.meta.url), "utf8");

function headerKinds() {
  const start = header.indexOf("#define QG_KIND_LIST(X)");
  const block = header.slice(start, header.indexOf("\n\n", start));
  return [...block.matchAll(/^\s*X\([A-Z_0-9]+, ([a-z_0-9]+),/gm)].map((m) => m[1]);
}

test("kinds: empty before init, then the header's QG_KIND_LIST in order", async () => {
  assert.equal(beforeInit, 0);
  await init();
  const want = headerKinds();
  assert.ok(want.length >= 9);
  assert.deepEqual([...kinds], want);
  want.forEach((k, i) => {
    assert.equal(new Index({ kind: k }).kind, k);
    assert.equal(new Index({ kind: i }).kind, k); // the enum value is the position in the list
  });
});

test("kinds: dist/kinds.d.ts is generated from the same list", () => {
  const dts = readFileSync(new URL("../dist/kinds.d.ts", import.meta.url), "utf8");
  assert.deepEqual([...dts.matchAll(/\| "([a-z_0-9]+)"/g)].map((m) => m[1]), headerKinds());
});

test("version: package.json says the header's QG_VERSION_*", () => {
  const v = ["MAJOR", "MINOR", "PATCH"].map((p) => header.match(new RegExp(`^#define QG_VERSION_${p} (\\d+)$`, "m"))[1]).join(".");
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  assert.equal(pkg.version, v);
});

test("kinds: no hand copy of the list in the package's sources", () => {
  // The list lives in QG_KIND_LIST only: index.js and index.d.ts may name the
  // default kind, and no other (a copy is what went stale before).
  for (const file of ["../index.js", "../index.d.ts"]) {
    const text = readFileSync(new URL(file, import.meta.url), "utf8");
    const named = headerKinds().filter((k) => k !== "point_grid" && new RegExp(`["'\`]${k}["'\`]`).test(text));
    assert.deepEqual(named, [], `${file} names kinds itself`);
  }
});
