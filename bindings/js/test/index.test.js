// SPDX-License-Identifier: MIT
// Every kind against the JavaScript brute force: pairs (with static elements
// and filters), queries, rays (all hits and closest), nearest, overlap
// events, through random inserts, moves and removes. Runs on the build that
// init() picks; QUADGRID_SIMD=0 or 1 forces the scalar or SIMD128 one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { init, Index, kinds, build } from "../index.js";
import { Brute, sortPairs, rng } from "./brute.js";

const SEED = Number(process.env.QUADGRID_SEED || 20261128);
await init();
console.log(`# build ${build()}, seed ${SEED}`);

function randomBox(r, world) {
  const shape = r();
  const x = Math.floor(r() * (world + 40)) - 20 + (r() < 0.3 ? 0.5 : 0);
  const y = Math.floor(r() * (world + 40)) - 20;
  if (shape < 0.1) return [x, y, x, y]; // a point
  if (shape < 0.15) return [x, y, x + 40 + r() * 80, y + 30 + r() * 60]; // large
  return [x, y, x + Math.floor(r() * 12), y + Math.floor(r() * 12)];
}

function compareAll(ix, bf, r, world, what) {
  assert.equal(ix.count, bf.els.size, `${what}: count`);
  assert.ok(ix.validate(), `${what}: validate`);
  assert.deepEqual(sortPairs(Array.from(ix.pairs())), bf.pairs(), `${what}: pairs`);
  assert.equal(ix.pairCount() * 2, bf.pairs().length, `${what}: pairCount`);
  for (let q = 0; q < 8; q++) {
    const b = randomBox(r, world);
    b[2] += 20;
    b[3] += 20;
    assert.deepEqual(Array.from(ix.query(b)).sort((a, c) => a - c), bf.query(b), `${what}: query ${b}`);
  }
  assert.deepEqual(Array.from(ix.query([-Infinity, -Infinity, Infinity, Infinity])).sort((a, c) => a - c),
    [...bf.els.keys()].sort((a, c) => a - c), `${what}: infinite query`);
  for (let q = 0; q < 6; q++) {
    const ox = Math.fround(r() * world), oy = Math.fround(r() * world);
    const dx = q === 0 ? 0 : Math.fround(r() * 2 - 1), dy = Math.fround(r() * 2 - 1);
    const maxT = q === 1 ? Infinity : Math.fround(r() * 300);
    const all = ix.raycast(ox, oy, dx, dy, maxT);
    const got = Array.from(all.handles, (h, i) => [h, all.t[i]]).sort((p, c) => p[0] - c[0]);
    const want = bf.raycast(ox, oy, dx, dy, maxT);
    assert.deepEqual(got, want, `${what}: ray ${[ox, oy, dx, dy, maxT]}`);
    const close = ix.raycast(ox, oy, dx, dy, maxT, { closest: true });
    const best = want.slice().sort((p, c) => p[1] - c[1] || p[0] - c[0])[0];
    assert.deepEqual(Array.from(close.handles), best ? [best[0]] : [], `${what}: closest ray`);
    if (best) assert.equal(close.t[0], best[1]);
  }
  for (let q = 0; q < 6; q++) {
    const x = Math.fround(r() * world), y = Math.fround(r() * world);
    const k = 1 + Math.floor(r() * 8), maxD2 = q === 0 ? 100 : Infinity;
    const got = ix.nearest(x, y, k, maxD2);
    const want = bf.nearest(x, y, k, maxD2);
    assert.deepEqual(Array.from(got.handles), want.map((p) => p[1]), `${what}: nearest handles`);
    assert.deepEqual(Array.from(got.distances2), want.map((p) => p[0]), `${what}: nearest distances`);
  }
}

for (const kind of kinds) {
  test(`${kind} agrees with brute force`, () => {
    const r = rng(SEED + kinds.indexOf(kind));
    const world = 256;
    const ix = new Index({ kind, bounds: [0, 0, world, world], elementSize: 6 });
    const bf = new Brute();
    const n0 = 300;
    const boxes = new Float32Array(n0 * 4);
    for (let i = 0; i < n0; i++) boxes.set(randomBox(r, world), 4 * i);
    const h = ix.insert(boxes);
    assert.equal(h.length, n0);
    h.forEach((hh, i) => bf.insert(hh, boxes.subarray(4 * i, 4 * i + 4)));
    ix.cleanup();
    compareAll(ix, bf, r, world, `${kind} built`);
    let ev = ix.pairEvents(), bev = bf.events();
    assert.deepEqual(sortPairs(Array.from(ev.began)), bev.began, "first events");
    assert.deepEqual(Array.from(ev.ended), [], "first events end nothing");
    for (let round = 0; round < 12; round++) {
      const live = [...bf.els.keys()];
      // Moves: a random subset, each listed once.
      const moving = live.filter(() => r() < 0.5);
      const mb = new Float32Array(moving.length * 4);
      moving.forEach((hh, i) => {
        const ddx = Math.floor(r() * 7) - 3, ddy = Math.floor(r() * 7) - 3;
        const b = r() < 0.8 ? bf.els.get(hh).box.map((v, i) => v + (i % 2 ? ddy : ddx)) : randomBox(r, world);
        mb.set(b, 4 * i);
      });
      ix.move(Int32Array.from(moving), mb);
      moving.forEach((hh, i) => bf.move(hh, mb.subarray(4 * i, 4 * i + 4)));
      // Removes and inserts (handles are reused).
      const gone = live.filter(() => r() < 0.08);
      ix.remove(gone);
      gone.forEach((hh) => bf.remove(hh));
      const nb = new Float32Array(4 * Math.floor(r() * 30));
      for (let i = 0; i < nb.length; i += 4) nb.set(randomBox(r, world), i);
      const nh = ix.insert(nb);
      nh.forEach((hh, i) => bf.insert(hh, nb.subarray(4 * i, 4 * i + 4)));
      // Static flags and filters on a few.
      const now = [...bf.els.keys()];
      const st = now.filter(() => r() < 0.1);
      const flags = st.map(() => r() < 0.7);
      ix.setStatic(st, flags);
      st.forEach((hh, i) => (bf.els.get(hh).isStatic = flags[i]));
      const fl = now.filter(() => r() < 0.05);
      const cats = fl.map(() => 1 << Math.floor(r() * 3));
      const masks = fl.map(() => (r() < 0.5 ? 0xffffffff : 1 + Math.floor(r() * 7)));
      ix.setFilter(fl, cats, masks);
      fl.forEach((hh, i) => Object.assign(bf.els.get(hh), { cat: cats[i], mask: masks[i] }));
      assert.deepEqual(Array.from(ix.isStatic(st)), st.map((hh) => (bf.els.get(hh).isStatic ? 1 : 0)));
      assert.deepEqual(Array.from(ix.getFilter(fl)), fl.flatMap((hh) => [bf.els.get(hh).cat, bf.els.get(hh).mask >>> 0]));
      if (round % 3 !== 2) ix.cleanup(); // answers are exact without it too
      compareAll(ix, bf, r, world, `${kind} round ${round}`);
      ev = ix.pairEvents();
      bev = bf.events();
      assert.deepEqual(sortPairs(Array.from(ev.began)), bev.began, `${kind} round ${round}: began`);
      assert.deepEqual(sortPairs(Array.from(ev.ended)), bev.ended, `${kind} round ${round}: ended`);
    }
    const all = [...bf.els.keys()];
    assert.deepEqual(Array.from(ix.get(all)), all.flatMap((hh) => Array.from(bf.els.get(hh).box)));
    ix.clear();
    assert.equal(ix.count, 0);
    assert.equal(ix.pairs().length, 0);
    ix.free();
    assert.ok(ix.freed);
  });
}

test("plain arrays work like typed arrays", () => {
  const ix = new Index({ kind: "quadtree" });
  const h = ix.insert([0, 0, 10, 10, 5, 5, 15, 15]);
  assert.deepEqual(Array.from(h), [0, 1]);
  ix.move([1], [20, 20, 30, 30]);
  assert.equal(ix.pairs().length, 0);
  ix.move(1, [8, 8, 9, 9]);
  assert.deepEqual(Array.from(ix.pairs()), [0, 1]);
  ix.free();
});

test("pairs() returns a copy that outlives later calls", () => {
  const ix = new Index({ kind: "grid" });
  ix.insert([0, 0, 10, 10, 5, 5, 15, 15]);
  const p = ix.pairs();
  ix.move([0], [100, 100, 110, 110]);
  ix.insert(new Float32Array(4000).map((_, i) => (i % 4 < 2 ? 500 : 510)));
  assert.ok(ix.pairs().length > 2);
  assert.deepEqual(Array.from(p), [0, 1]);
  ix.free();
});
