// SPDX-License-Identifier: MIT
// The `agents` workload (quadgrid-bench's: N moving squares, every
// overlapping pair every frame) in Node: quadgrid's WebAssembly build
// against the JavaScript broad-phase libraries, every answer checked against
// the others on the first and last measured frame.
//
//   node agents.js [--n 10000,100000,1000000] [--frames 20] [--kind point_grid,quadtree]
//                  [--libs rbush,rbush-bulk,flatbush,box-intersect,detect-collisions] [--budget 20]
//
// A frame is timed as quadgrid-bench times it: update (the agents' motion,
// computed once in WebAssembly for everyone, plus the library's upkeep) and
// pairs (the full list of pairs, as an array). quadgrid is configured as
// quadgrid-bench configures it (apps/bench: element_size 5, max_element_size
// 8, bounds the world). Medians over the measured frames after 2 warm-up
// frames (frame_ms: the median of the frames' totals, as quadgrid-bench's
// total_ms); a library whose frames pass --budget seconds in all gets fewer.
import { init, Index, Agents, build } from "../index.js";
import RBush from "rbush";
import Flatbush from "flatbush";
import boxIntersect from "box-intersect";
import { System } from "detect-collisions";
import os from "node:os";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const sizes = (args.n || "10000,100000,1000000").split(",").map(Number);
const frames = Number(args.frames || 20);
const budget = Number(args.budget || 20) * 1000;
const qkinds = (args.kind || "point_grid,quadtree,grid,loose_grid").split(",");
const libs = (args.libs || "rbush,rbush-bulk,flatbush,box-intersect,detect-collisions").split(",");

await init(args.simd === undefined ? {} : { simd: args.simd !== "0" });

// ---- the implementations: setup(boxes) once, update(boxes), pairs() -> flat [i, j, ...]
const impls = {};
for (const kind of qkinds) {
  impls[`quadgrid ${kind}`] = (n, world) => {
    const ix = new Index({ kind, bounds: [0, 0, world, world], elementSize: 5, maxElementSize: 8 });
    let h;
    return {
      setup(boxes) {
        h = ix.insert(boxes);
        ix.cleanup();
      },
      update(boxes) {
        ix.move(h, boxes);
        ix.cleanup();
      },
      pairs: () => ix.pairs(), // handles are the agents' numbers (a fresh index gives 0..n-1)
      free: () => ix.free(),
    };
  };
}
impls["rbush"] = (n) => {
  const tree = new RBush();
  const items = [];
  return {
    setup(b) {
      for (let i = 0; i < n; i++) items.push({ minX: b[4 * i], minY: b[4 * i + 1], maxX: b[4 * i + 2], maxY: b[4 * i + 3], i });
      tree.load(items);
    },
    update(b) {
      for (let i = 0; i < n; i++) {
        const it = items[i];
        tree.remove(it);
        it.minX = b[4 * i];
        it.minY = b[4 * i + 1];
        it.maxX = b[4 * i + 2];
        it.maxY = b[4 * i + 3];
        tree.insert(it);
      }
    },
    pairs() {
      const out = [];
      for (let i = 0; i < n; i++) for (const o of tree.search(items[i])) if (o.i > i) out.push(i, o.i);
      return out;
    },
    free() {},
  };
};
impls["rbush-bulk"] = (n) => {
  const tree = new RBush();
  const items = [];
  return {
    setup(b) {
      for (let i = 0; i < n; i++) items.push({ minX: 0, minY: 0, maxX: 0, maxY: 0, i });
      this.update(b);
    },
    update(b) {
      for (let i = 0; i < n; i++) {
        const it = items[i];
        it.minX = b[4 * i];
        it.minY = b[4 * i + 1];
        it.maxX = b[4 * i + 2];
        it.maxY = b[4 * i + 3];
      }
      tree.clear();
      tree.load(items);
    },
    pairs() {
      const out = [];
      for (let i = 0; i < n; i++) for (const o of tree.search(items[i])) if (o.i > i) out.push(i, o.i);
      return out;
    },
    free() {},
  };
};
impls["flatbush"] = (n) => {
  let fb, b;
  return {
    setup(boxes) {
      this.update(boxes);
    },
    update(boxes) {
      b = boxes;
      fb = new Flatbush(n);
      for (let i = 0; i < n; i++) fb.add(b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]);
      fb.finish();
    },
    pairs() {
      const out = [];
      for (let i = 0; i < n; i++) for (const j of fb.search(b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3])) if (j > i) out.push(i, j);
      return out;
    },
    free() {},
  };
};
impls["box-intersect"] = (n) => {
  const arr = [];
  return {
    setup(b) {
      for (let i = 0; i < n; i++) arr.push([0, 0, 0, 0]);
      this.update(b);
    },
    update(b) {
      for (let i = 0; i < n; i++) {
        const a = arr[i];
        a[0] = b[4 * i];
        a[1] = b[4 * i + 1];
        a[2] = b[4 * i + 2];
        a[3] = b[4 * i + 3];
      }
    },
    pairs() {
      const out = [];
      boxIntersect(arr, (i, j) => {
        if (i < j) out.push(i, j);
        else out.push(j, i);
      });
      return out;
    },
    free() {},
  };
};
impls["detect-collisions"] = (n) => {
  const sys = new System();
  const bodies = [];
  return {
    setup(b) {
      for (let i = 0; i < n; i++) {
        const body = sys.createBox({ x: b[4 * i], y: b[4 * i + 1] }, b[4 * i + 2] - b[4 * i], b[4 * i + 3] - b[4 * i + 1]);
        body.qi = i;
        bodies.push(body);
      }
    },
    update(b) {
      for (let i = 0; i < n; i++) bodies[i].setPosition(b[4 * i], b[4 * i + 1]);
    },
    pairs() {
      // checkAll reports each pair from both sides; keep one.
      const out = [];
      sys.checkAll((r) => {
        const i = r.a.qi, j = r.b.qi;
        if (i < j) out.push(i, j);
      });
      return out;
    },
    free() {},
  };
};

function pairKeys(flat, n) {
  const k = new Float64Array(flat.length / 2);
  for (let p = 0; p < k.length; p++) {
    const a = flat[2 * p], b = flat[2 * p + 1];
    k[p] = Math.min(a, b) * n + Math.max(a, b);
  }
  return k.sort();
}

function sameKeys(x, y) {
  if (x.length !== y.length) return false;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

const median = (x) => {
  const s = [...x].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const cpu = os.cpus()[0]?.model ?? "unknown";
console.log(`# node ${process.version}, quadgrid build ${build()}, CPU ${cpu}, ${frames} frames (+2 warm-up)`);
console.log("n\timplementation\tframes\tupdate_ms\tpairs_ms\tframe_ms\tpairs\tagrees");
let failed = false;
for (const n of sizes) {
  const results = [];
  let reference = null; // the first implementation's name
  const refKeys = [];
  for (const [name, make] of Object.entries(impls)) {
    if (!name.startsWith("quadgrid") && !libs.includes(name)) continue;
    const agents = new Agents(n); // same seed: every implementation sees the same frames
    const view = () => (name.startsWith("quadgrid") ? agents.boxes : agents.boxes.slice());
    const impl = make(n, agents.world);
    impl.setup(view());
    const upd = [], prs = [], tot = [];
    let spent = 0, agree = true, count = 0;
    const first = reference === null;
    const total = frames + 2;
    for (let f = 0; f < total; f++) {
      const t0 = performance.now();
      agents.move();
      impl.update(view());
      const t1 = performance.now();
      const p = impl.pairs();
      const t2 = performance.now();
      spent += t2 - t0;
      if (f >= 2) upd.push(t1 - t0), prs.push(t2 - t1), tot.push(t2 - t0);
      const last = f === total - 1 || (!first && spent > budget && f >= 2);
      if (reference === null || f === 2 || last) {
        // The first implementation keeps every frame's pairs; the others are
        // compared on their first measured frame and their last one.
        const keys = pairKeys(p, n);
        if (first) refKeys[f] = keys;
        else if (!sameKeys(refKeys[f], keys)) agree = false;
        if (last) count = keys.length;
      }
      if (last) break;
    }
    impl.free();
    agents.free();
    reference ??= name;
    const row = [n, name, upd.length, median(upd).toFixed(3), median(prs).toFixed(3), median(tot).toFixed(3), count, agree ? "yes" : "NO"];
    console.log(row.join("\t"));
    results.push(row);
    if (!agree) failed = true;
  }
}
if (failed) {
  console.log("MISMATCH: an implementation's pairs differ from the first one's");
  process.exit(2);
}
