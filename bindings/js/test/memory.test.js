// SPDX-License-Identifier: MIT
// Memory is given back: every index's bytes go back when it is freed (the
// binding counts them through the library's allocator hook), and many
// create/use/free cycles do not grow WebAssembly memory.
import { test } from "node:test";
import assert from "node:assert/strict";
import { init, Index, Agents, kinds, memoryUsage, releaseBuffers } from "../index.js";

await init();

function cycle(kind, n) {
  const ix = new Index({ kind, bounds: [0, 0, 400, 400], elementSize: 5 });
  const boxes = new Float32Array(n * 4);
  for (let i = 0; i < n; i++) {
    const x = (i * 37) % 397, y = (i * 91) % 389;
    boxes.set([x, y, x + 4, y + 4], 4 * i);
  }
  const h = ix.insert(boxes);
  ix.setStatic(h.subarray(0, 10));
  ix.setFilter(h.subarray(10, 20), 2, 3);
  for (let i = 0; i < boxes.length; i += 4) boxes[i] += 1, boxes[i + 2] += 1;
  ix.move(h, boxes);
  ix.cleanup();
  ix.pairs();
  ix.pairEvents();
  ix.remove(h.subarray(0, n >> 1));
  assert.ok(ix.stats.memoryBytes > 0);
  ix.free();
}

test("freeing every index gives every byte back", () => {
  const start = memoryUsage().indexBytes;
  for (const kind of kinds) {
    cycle(kind, 3000);
    assert.equal(memoryUsage().indexBytes, start, `${kind}: bytes left after free`);
  }
});

test("create/free cycles do not grow WebAssembly memory", () => {
  for (const kind of kinds) cycle(kind, 3000); // warm-up: buffers reach their size
  const before = memoryUsage();
  for (let round = 0; round < 30; round++) for (const kind of kinds) cycle(kind, 3000);
  const after = memoryUsage();
  assert.equal(after.indexBytes, before.indexBytes);
  assert.equal(after.bufferBytes, before.bufferBytes);
  assert.equal(after.wasmBytes, before.wasmBytes, "WebAssembly memory grew");
});

test("agents and the binding's buffers give their bytes back", () => {
  const a = new Agents(20000);
  const ix = new Index({ kind: "point_grid", bounds: [0, 0, a.world, a.world], elementSize: 5, maxElementSize: 8 });
  const h = ix.insert(a.boxes);
  a.move();
  ix.move(h, a.boxes);
  ix.pairs();
  ix.free();
  a.free();
  releaseBuffers();
  assert.equal(memoryUsage().bufferBytes, 0);
  assert.equal(memoryUsage().indexBytes, 0);
});

test("an Index dropped without free() is destroyed when collected (FinalizationRegistry)", async () => {
  const { spawnSync } = await import("node:child_process");
  const url = new URL("../index.js", import.meta.url).href;
  const script = `
    import { init, Index, memoryUsage } from ${JSON.stringify(url)};
    await init();
    (() => { for (let i = 0; i < 50; i++) new Index({ kind: "grid" }).insert([0, 0, 1, 1]); })();
    const held = memoryUsage().indexBytes;
    for (let i = 0; i < 50 && memoryUsage().indexBytes > 0; i++) { gc(); await new Promise((r) => setTimeout(r, 10)); }
    console.log(JSON.stringify({ held, after: memoryUsage().indexBytes }));`;
  const r = spawnSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  const { held, after } = JSON.parse(r.stdout);
  assert.ok(held > 0);
  assert.equal(after, 0);
});
