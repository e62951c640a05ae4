// SPDX-License-Identifier: MIT
// Bad input throws (TypeError for the wrong JavaScript types, RangeError
// for bad values and dead handles, each carrying the status name in .code)
// and leaves the index exactly as it was: same elements, boxes, pairs,
// flags, filters and memory_bytes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { init, Index, kinds } from "../index.js";

await init();

function snapshot(ix, handles) {
  return {
    count: ix.count,
    boxes: Array.from(ix.get(handles)),
    pairs: Array.from(ix.pairs()),
    statics: Array.from(ix.isStatic(handles)),
    filters: Array.from(ix.getFilter(handles)),
    bytes: ix.stats.memoryBytes,
  };
}

for (const kind of kinds) {
  test(`${kind}: bad input throws and changes nothing`, () => {
    const ix = new Index({ kind, bounds: [0, 0, 100, 100], elementSize: 4 });
    const boxes = new Float32Array(200 * 4);
    for (let i = 0; i < 200; i++) boxes.set([(i * 7) % 97, (i * 13) % 89, ((i * 7) % 97) + 3, ((i * 13) % 89) + 3], 4 * i);
    const h = ix.insert(boxes);
    ix.setStatic([0, 1, 2]);
    ix.setFilter([5], 2, 2);
    ix.remove([10, 11]);
    ix.cleanup();
    const live = Array.from(h).filter((x) => x !== 10 && x !== 11);
    const before = snapshot(ix, live);
    const cases = [
      ["insert NaN", () => ix.insert([0, 0, 1, 1, 0, NaN, 1, 1]), RangeError, "QG_ERR_INVALID"],
      ["insert min > max", () => ix.insert([5, 5, 1, 1]), RangeError, "QG_ERR_INVALID"],
      ["insert infinite", () => ix.insert([0, 0, Infinity, 1]), RangeError, "QG_ERR_INVALID"],
      ["insert length 3", () => ix.insert([0, 0, 1]), TypeError, "QG_ERR_INVALID"],
      ["insert strings", () => ix.insert(["0", 0, 1, 1]), TypeError, "QG_ERR_INVALID"],
      ["insert not an array", () => ix.insert(7), TypeError, "QG_ERR_INVALID"],
      ["move dead handle", () => ix.move([0, 10], [1, 1, 2, 2, 1, 1, 2, 2]), RangeError, "QG_ERR_HANDLE"],
      ["move handle out of range", () => ix.move([0, 1e6], [1, 1, 2, 2, 1, 1, 2, 2]), RangeError, "QG_ERR_HANDLE"],
      ["move negative handle", () => ix.move([-1], [1, 1, 2, 2]), RangeError, "QG_ERR_HANDLE"],
      ["move handle twice", () => ix.move([3, 3], [1, 1, 2, 2, 1, 1, 2, 2]), RangeError, "QG_ERR_INVALID"],
      ["move NaN box last", () => ix.move([3, 4], [1, 1, 2, 2, 1, 1, 2, NaN]), RangeError, "QG_ERR_INVALID"],
      ["move count mismatch", () => ix.move([3, 4], [1, 1, 2, 2]), TypeError, "QG_ERR_INVALID"],
      ["move fractional handle", () => ix.move([3.5], [1, 1, 2, 2]), TypeError, "QG_ERR_INVALID"],
      ["remove dead handle", () => ix.remove([3, 10]), RangeError, "QG_ERR_HANDLE"],
      ["remove handle twice", () => ix.remove([3, 4, 3]), RangeError, "QG_ERR_INVALID"],
      ["setStatic dead", () => ix.setStatic([3, 11]), RangeError, "QG_ERR_HANDLE"],
      ["setStatic twice", () => ix.setStatic([3, 3], [true, false]), RangeError, "QG_ERR_INVALID"],
      ["setStatic flag count", () => ix.setStatic([3, 4], [true]), TypeError, "QG_ERR_INVALID"],
      ["setFilter dead", () => ix.setFilter([3, 11], 4, 4), RangeError, "QG_ERR_HANDLE"],
      ["setFilter mask count", () => ix.setFilter([3, 4], 4, [1]), TypeError, "QG_ERR_INVALID"],
      ["query NaN", () => ix.query([0, 0, NaN, 1]), RangeError, "QG_ERR_INVALID"],
      ["query short", () => ix.query([0, 0, 1]), TypeError, "QG_ERR_INVALID"],
      ["raycast NaN", () => ix.raycast(NaN, 0, 1, 0), RangeError, "QG_ERR_INVALID"],
      ["raycast negative maxT", () => ix.raycast(0, 0, 1, 0, -1), RangeError, "QG_ERR_INVALID"],
      ["nearest k < 0", () => ix.nearest(0, 0, -1), RangeError, "QG_ERR_INVALID"],
      ["nearest infinite point", () => ix.nearest(Infinity, 0, 1), RangeError, "QG_ERR_INVALID"],
      ["get dead", () => ix.get([10]), RangeError, "QG_ERR_HANDLE"],
      // The same refusals, and the same row and reason, as the Python package
      // (bindings/python/tests/test_errors.py).
      ["insert row and reason", () => ix.insert([0, 0, 1, 1, 0, 0, 1, 1, 3, 0, 1, 1]), RangeError, "QG_ERR_INVALID",
        /^QG_ERR_INVALID: insert \(row 2: box \[3\.0, 0\.0, 1\.0, 1\.0\] has min > max\)$/],
      ["insert NaN row", () => ix.insert([0, 0, 1, 1, 0, 0, NaN, 1]), RangeError, "QG_ERR_INVALID", /\(row 1: box .* is not finite\)$/],
      ["move dead row", () => ix.move([3, 10], [1, 1, 2, 2, 1, 1, 2, 2]), RangeError, "QG_ERR_HANDLE",
        /^QG_ERR_HANDLE: move \(row 1: handle 10 is not live\)$/],
      ["move twice row", () => ix.move([3, 4, 3], [1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2]), RangeError, "QG_ERR_INVALID",
        /\(row 2: handle 3 listed twice\)$/],
      ["move bad box row", () => ix.move([3, 4], [1, 1, 2, 2, 1, 1, 2, NaN]), RangeError, "QG_ERR_INVALID", /\(row 1: box .* is not finite\)$/],
      ["remove dead row", () => ix.remove([3, 4, 11]), RangeError, "QG_ERR_HANDLE", /\(row 2: handle 11 is not live\)$/],
      ["setFilter mask past 32 bits", () => ix.setFilter([3, 4], 1, 2 ** 32), RangeError, "QG_ERR_INVALID", /mask .*uint32/],
      ["setFilter category past 32 bits", () => ix.setFilter([3], 2 ** 32 + 1, 1), RangeError, "QG_ERR_INVALID", /category .*uint32/],
      ["setFilter negative mask", () => ix.setFilter([3], 1, -1), RangeError, "QG_ERR_INVALID", /mask .*uint32/],
      ["setFilter fractional mask", () => ix.setFilter([3], 1, 1.5), TypeError, "QG_ERR_INVALID", /mask .*integer/],
      ["setFilter mask row", () => ix.setFilter([3, 4], 1, [1, 2 ** 33]), RangeError, "QG_ERR_INVALID", /mask \(row 1\)/],
      ["nearest fractional k", () => ix.nearest(0, 0, 2.5), TypeError, "QG_ERR_INVALID", /k must be an integer/],
    ];
    for (const [what, fn, cls, code, message] of cases) {
      assert.throws(fn, (e) => e instanceof cls && e.code === code && e.message.startsWith(code) && (!message || message.test(e.message)), what);
      assert.deepEqual(snapshot(ix, live), before, `${what}: index changed`);
      assert.ok(ix.validate(), `${what}: validate`);
    }
    ix.free();
    assert.throws(() => ix.pairs(), (e) => e instanceof Error && e.code === "QG_ERR_INVALID");
    ix.free(); // a second free does nothing
  });
}

test("bad configs throw", () => {
  assert.throws(() => new Index({ kind: "octree" }), (e) => e instanceof RangeError && e.code === "QG_ERR_INVALID");
  assert.throws(() => new Index({ bounds: [0, 0, -1, 1] }), (e) => e instanceof RangeError && e.code === "QG_ERR_INVALID");
  assert.throws(() => new Index({ bounds: [0, 0, 1] }), (e) => e instanceof TypeError && e.code === "QG_ERR_INVALID");
  assert.throws(() => new Index({ elementSize: NaN }), (e) => e instanceof RangeError && e.code === "QG_ERR_INVALID");
  assert.throws(() => new Index({ maxDepth: 1.5 }), (e) => e instanceof TypeError);
  assert.throws(() => new Index(null), (e) => e instanceof TypeError);
});
