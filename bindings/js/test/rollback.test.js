// SPDX-License-Identifier: MIT
// Rollback: clone(), copyFrom() and snapshot() / Index.fromSnapshot() give an
// index that continues exactly as the original (every answer equal, pairs in
// the same order), independently of it; bad snapshot bytes throw and hold
// nothing; every byte comes back on free(). (bindings/python/tests/
// test_rollback.py is the same in Python, and checks that a snapshot written
// there reads here.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { init, Index, kinds, build, memoryUsage } from "../index.js";
import { rng } from "./brute.js";

// Every test runs for every kind, and the random sequences include the
// engine's calls (static elements, filters, overlap events): its state is
// carried by every copy too.
await init();

const SEED = Number(process.env.QUADGRID_SEED || 44);
console.log(`# build ${build()}, seed ${SEED}`);

/**
 * A random call sequence run on several indexes in lockstep: the same calls
 * on each, every answer compared across them exactly (pairs in order). The
 * live handles are tracked here, so the sequence depends only on the seed.
 */
class Ops {
  constructor(seed, live = []) {
    this.r = rng(seed);
    this.seed = seed;
    this.live = [...live];
  }
  boxes(n) {
    const r = this.r, out = new Float32Array(4 * n);
    for (let i = 0; i < n; i++) {
      const x = r() * 120 - 10, y = r() * 120 - 10;
      const big = r() < 0.05 ? 40 : 6;
      const w = r() * big, h = r() * big;
      out.set([x - w, y - h, x + w, y + h], 4 * i);
    }
    return out;
  }
  pick(k) {
    const pool = [...this.live], out = [];
    for (let i = 0; i < k && pool.length; i++) out.push(pool.splice(Math.floor(this.r() * pool.length), 1)[0]);
    return out;
  }
  same(what, answers) {
    const norm = (a) => JSON.stringify(a, (k, v) => (ArrayBuffer.isView(v) ? Array.from(v) : v));
    for (const a of answers.slice(1)) assert.equal(norm(a), norm(answers[0]), `${what} (seed ${this.seed})`);
  }
  step(ixs) {
    const r = this.r;
    const ops = ["insert", "move", "remove", "pairs", "query", "nearest", "raycast", "cleanup",
      "static", "filter", "events"];
    let op = ops[Math.floor(r() * ops.length)];
    if (["move", "remove", "static", "filter"].includes(op) && this.live.length === 0) op = "insert";
    switch (op) {
      case "insert": {
        const b = this.boxes(1 + Math.floor(r() * 39));
        const hs = ixs.map((ix) => ix.insert(b));
        this.same(op, hs);
        this.live.push(...hs[0]);
        break;
      }
      case "move": {
        const h = this.pick(1 + Math.floor(r() * this.live.length));
        const b = this.boxes(h.length);
        for (const ix of ixs) ix.move(h, b);
        break;
      }
      case "remove": {
        const h = this.pick(1 + Math.floor(r() * Math.min(this.live.length, 15)));
        for (const ix of ixs) ix.remove(h);
        this.live = this.live.filter((x) => !h.includes(x));
        break;
      }
      case "pairs":
        this.same(op, ixs.map((ix) => ix.pairs()));
        break;
      case "query": {
        const a = Array.from(this.boxes(1));
        this.same(op, ixs.map((ix) => ix.query(a)));
        break;
      }
      case "nearest": {
        const x = r() * 120 - 10, y = r() * 120 - 10;
        this.same(op, ixs.map((ix) => ix.nearest(x, y, 4)));
        break;
      }
      case "raycast": {
        const o = [r() * 120 - 10, r() * 120 - 10, r() * 2 - 1, r() * 2 - 1];
        this.same(op, ixs.map((ix) => ix.raycast(...o, 80)));
        this.same(op, ixs.map((ix) => ix.raycast(...o, 80, { closest: true })));
        break;
      }
      case "cleanup":
        for (const ix of ixs) ix.cleanup();
        break;
      case "static": {
        const h = this.pick(5), flag = r() < 0.7;
        for (const ix of ixs) ix.setStatic(h, flag);
        break;
      }
      case "filter": {
        const h = this.pick(5), cat = 1 + Math.floor(r() * 7), mask = Math.floor(r() * 8);
        for (const ix of ixs) ix.setFilter(h, cat, mask);
        break;
      }
      case "events":
        this.same(op, ixs.map((ix) => ix.pairEvents()));
        break;
    }
    return op;
  }
  run(ixs, steps) {
    for (let i = 0; i < steps; i++) {
      this.step(ixs);
      if (i % 10 === 9) {
        this.same("count", ixs.map((ix) => ix.count));
        this.same("stats", ixs.map((ix) => ix.stats));
        this.same("pairs", ixs.map((ix) => ix.pairs()));
      }
    }
    for (const ix of ixs) assert.ok(ix.validate(), "validate");
  }
}

/** An index of `kind` after a random history, and the sequence going on from there. */
function built(kind, seed = SEED, steps = 120) {
  const ix = new Index({ kind, bounds: [0, 0, 100, 100] });
  const ops = new Ops(seed);
  ops.live.push(...ix.insert(ops.boxes(150)));
  ops.run([ix], steps);
  return { ix, ops };
}

function copyInto(ix) {
  const dst = new Index({ kind: ix.kind, bounds: [0, 0, 10, 10], elementSize: 3 });
  dst.insert([0, 0, 1, 1, 2, 2, 5, 5, 3, 3, 4, 4]);
  dst.copyFrom(ix);
  return dst;
}

const COPIES = {
  clone: (ix) => ix.clone(),
  snapshot: (ix) => Index.fromSnapshot(ix.snapshot()),
  "snapshot ArrayBuffer": (ix) => Index.fromSnapshot(ix.snapshot().buffer),
  "snapshot Buffer": (ix) => Index.fromSnapshot(Buffer.from(ix.snapshot())),
  "snapshot DataView": (ix) => {
    const s = ix.snapshot();
    const big = new Uint8Array(s.length + 7);
    big.set(s, 3);
    return Index.fromSnapshot(new DataView(big.buffer, 3, s.length));
  },
  "snapshot SharedArrayBuffer": (ix) => {
    const s = ix.snapshot();
    const shared = new Uint8Array(new SharedArrayBuffer(s.length));
    shared.set(s);
    return Index.fromSnapshot(shared.buffer);
  },
  copyFrom: copyInto,
};

const equalBytes = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);

for (const kind of kinds) {
  for (const [how, make] of Object.entries(COPIES)) {
    test(`${kind}: ${how} continues identically`, () => {
      const { ix, ops } = built(kind);
      const c = make(ix);
      assert.ok(c instanceof Index && c !== ix);
      assert.equal(c.kind, kind);
      assert.equal(c.count, ix.count);
      assert.deepEqual(c.stats, ix.stats);
      assert.ok(c.validate());
      assert.deepEqual(Array.from(c.pairs()), Array.from(ix.pairs()));
      assert.ok(equalBytes(c.snapshot(), ix.snapshot()));
      ops.run([ix, c], 200);
      assert.ok(equalBytes(c.snapshot(), ix.snapshot()));
      c.free();
      ix.free();
    });
  }

  test(`${kind}: copies are independent`, () => {
    const { ix, ops } = built(kind);
    const before = ix.snapshot();
    const copies = Object.values(COPIES).map((f) => f(ix));
    copies.forEach((c, i) => new Ops(SEED + 100 + i, ops.live).run([c], 60));
    assert.ok(equalBytes(ix.snapshot(), before), "the original changed");
    const snaps = copies.map((c) => c.snapshot());
    ops.run([ix], 60);
    copies.forEach((c, i) => assert.ok(equalBytes(c.snapshot(), snaps[i]), "a copy changed"));
    for (const c of copies) c.free();
    ix.free();
  });

  test(`${kind}: rollback loop (copyFrom a saved index, the same frames again)`, () => {
    const { ix, ops } = built(kind);
    const save = ix.clone();
    const logs = [];
    for (let attempt = 0; attempt < 3; attempt++) {
      const log = [];
      const rec = new Proxy(ix, {
        get(t, name) {
          const v = Reflect.get(t, name);
          if (typeof v !== "function") {
            log.push([name, v]);
            return v;
          }
          return (...a) => {
            const out = v.apply(t, a);
            log.push([name, out]);
            return out;
          };
        },
      });
      new Ops(SEED + 7, ops.live).run([rec], 80);
      logs.push(log);
      ix.copyFrom(save);
      assert.ok(equalBytes(ix.snapshot(), save.snapshot()));
    }
    new Ops(0).same("rollback logs", logs);
    ix.copyFrom(ix); // onto itself: nothing
    assert.ok(equalBytes(ix.snapshot(), save.snapshot()));
    save.free();
    ix.free();
  });

  test(`${kind}: empty and fresh indexes round-trip`, () => {
    for (const cfg of [{ kind }, { kind, bounds: [0, 0, 100, 100], elementSize: 2 }]) {
      const ix = new Index(cfg);
      for (const c of [ix.clone(), Index.fromSnapshot(ix.snapshot())]) {
        assert.equal(c.count, 0);
        assert.ok(equalBytes(c.snapshot(), ix.snapshot()));
        const twin = ix.clone();
        new Ops(SEED + 3).run([twin, c], 50);
        twin.free();
        c.free();
      }
      ix.free();
    }
  });

  test(`${kind}: bad bytes throw RangeError QG_ERR_INVALID and hold nothing`, () => {
    const { ix } = built(kind, SEED, 40);
    const good = ix.snapshot();
    const n = good.length;
    const flip = (i, bit = 0) => {
      const b = good.slice();
      b[i] ^= 1 << bit;
      return b;
    };
    const withKind = (k) => {
      const b = good.slice();
      new DataView(b.buffer).setUint32(12, k, true);
      return b;
    };
    const cat = (a, b) => {
      const out = new Uint8Array(a.length + b.length);
      out.set(a);
      out.set(b, a.length);
      return out;
    };
    const cases = [
      ["empty", new Uint8Array(0), "shorter than the 32-byte header"],
      ["one byte", new Uint8Array([113]), "shorter than"],
      ["header only", good.slice(0, 32), "the header says"],
      ["truncated by one", good.slice(0, n - 1), `the header says ${n} bytes, got ${n - 1}`],
      ["truncated half", good.slice(0, n >> 1), "truncated"],
      ["one byte more", cat(good, new Uint8Array(1)), `got ${n + 1}`],
      ["magic", flip(0), 'no "quadgrid" magic'],
      ["version", flip(8), "version"],
      ["kind past the list", withKind(1000), "kind 1000"],
      ["length", flip(16), "the header says"],
      ["checksum", flip(24), "corrupted"],
      ["last byte", flip(n - 1, 7), "corrupted"],
      ["zeros", new Uint8Array(n), "magic"],
    ];
    const r = rng(SEED);
    for (let q = 0; q < 40; q++) {
      const i = 32 + Math.floor(r() * (n - 32));
      cases.push([`body byte ${i}`, flip(i, Math.floor(r() * 8)), "corrupted"]);
    }
    for (let i = 0; i < 32; i++) cases.push([`header byte ${i}`, flip(i, Math.floor(r() * 8)), ""]);
    for (const k of kinds) if (k !== kind) cases.push([`kind ${k}`, withKind(kinds.indexOf(k)), ""]);
    const held = memoryUsage().indexBytes;
    for (const [what, bytes, reason] of cases) {
      assert.throws(() => Index.fromSnapshot(bytes), (e) =>
        e instanceof RangeError && e.code === "QG_ERR_INVALID" &&
        e.message.startsWith("QG_ERR_INVALID: fromSnapshot (") && e.message.includes(reason), what);
    }
    assert.equal(memoryUsage().indexBytes, held, "a refused read held memory");
    for (const bad of [null, undefined, 5, "quadgrid", [113, 117, 97], { length: 3 }, ix]) {
      assert.throws(() => Index.fromSnapshot(bad), (e) =>
        e instanceof TypeError && e.code === "QG_ERR_INVALID" && /fromSnapshot: expected bytes/.test(e.message), String(bad));
    }
    // The good bytes still read, and the original is untouched.
    const c = Index.fromSnapshot(good);
    assert.ok(equalBytes(c.snapshot(), good) && equalBytes(ix.snapshot(), good));
    c.free();
    ix.free();
  });

  test(`${kind}: every byte comes back`, () => {
    const start = memoryUsage().indexBytes;
    const { ix } = built(kind);
    const bytes = memoryUsage().indexBytes - start;
    const copies = Object.values(COPIES).map((f) => f(ix));
    for (const c of copies) assert.equal(c.stats.memoryBytes, ix.stats.memoryBytes);
    assert.equal(memoryUsage().indexBytes - start, bytes * (copies.length + 1));
    for (const c of copies) c.free();
    ix.free();
    assert.equal(memoryUsage().indexBytes, start);
  });
}

test("copyFrom refuses other kinds, non-indexes and freed indexes", () => {
  const a = new Index({ kind: "brute_force" });
  a.insert([0, 0, 1, 1]);
  const b = new Index({ kind: kinds.find((k) => k !== "brute_force") });
  assert.throws(() => a.copyFrom(b), (e) => e instanceof RangeError && e.code === "QG_ERR_INVALID" && /kinds differ/.test(e.message));
  for (const bad of [null, 3, "brute_force", {}, new Uint8Array(40)])
    assert.throws(() => a.copyFrom(bad), (e) => e instanceof TypeError && e.code === "QG_ERR_INVALID" && /copyFrom: expected an Index/.test(e.message));
  const c = new Index({ kind: "brute_force" });
  c.free();
  assert.throws(() => a.copyFrom(c), (e) => e.code === "QG_ERR_INVALID" && /freed/.test(e.message));
  assert.throws(() => c.copyFrom(a), (e) => e.code === "QG_ERR_INVALID" && /freed/.test(e.message));
  assert.throws(() => c.clone(), (e) => e.code === "QG_ERR_INVALID" && /freed/.test(e.message));
  assert.throws(() => c.snapshot(), (e) => e.code === "QG_ERR_INVALID" && /freed/.test(e.message));
  assert.equal(a.count, 1);
  a.free();
  b.free();
});

for (const kind of kinds) {
  test(`${kind}: overlap events continue after a copy`, () => {
    const { ix, ops } = built(kind);
    ix.setStatic(ops.live.slice(0, 10));
    ix.setFilter(ops.live.slice(10, 20), 2, 2);
    ix.pairEvents();
    const later = new Ops(SEED + 9, ops.live); // its live handles go on from here
    later.run([ix], 30);
    for (const c of [ix.clone(), Index.fromSnapshot(ix.snapshot()), copyInto(ix)]) {
      const twin = ix.clone();
      new Ops(SEED + 10).same("events", [twin.pairEvents(), c.pairEvents()]);
      new Ops(SEED + 11, later.live).run([twin, c], 40);
      twin.free();
      c.free();
    }
    ix.free();
  });
}

test("a read index's first pairEvents() reports every pair as began (no events before)", () => {
  const ix = new Index({ kind: "brute_force" });
  ix.insert([0, 0, 2, 2, 1, 1, 3, 3, 10, 10, 11, 11]);
  const c = Index.fromSnapshot(ix.snapshot());
  const e = c.pairEvents();
  assert.deepEqual([Array.from(e.began), Array.from(e.ended)], [[0, 1], []]);
  c.free();
  ix.free();
});
