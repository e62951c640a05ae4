// SPDX-License-Identifier: MIT
// The JavaScript oracle the tests compare every kind with: a list of
// elements and O(n^2) loops, every formula in float32 (Math.fround after each
// operation, which rounds exactly as the C library's float arithmetic).
const f = Math.fround;

export function overlap(a, b) {
  return a[0] <= b[2] && b[0] <= a[2] && a[1] <= b[3] && b[1] <= a[3];
}

/// qg_ray_box (src/ray_nearest_kernels.h): the slab test with the direction's inverses.
export function rayBox(box, ox, oy, dx, dy, maxT) {
  let a = 0, b = maxT;
  const axis = (lo, hi, o, d) => {
    if (d === 0) return o >= lo && o <= hi;
    const inv = f(1 / d);
    let ta = f(f(lo - o) * inv), tb = f(f(hi - o) * inv);
    if (ta > tb) [ta, tb] = [tb, ta];
    a = ta > a ? ta : a;
    b = tb < b ? tb : b;
    return true;
  };
  if (!axis(box[0], box[2], ox, dx) || !axis(box[1], box[3], oy, dy)) return null;
  return a <= b ? a : null;
}

/// qg_point_box_distance2.
export function distance2(box, x, y) {
  let ex = f(box[0] - x), ey = f(box[1] - y);
  const fx = f(x - box[2]), fy = f(y - box[3]);
  ex = fx > ex ? fx : ex;
  ey = fy > ey ? fy : ey;
  ex = ex > 0 ? ex : 0;
  ey = ey > 0 ? ey : 0;
  return f(f(ex * ex) + f(ey * ey));
}

/** The model: handle -> element, with a serial number per insert (events name elements, not handles). */
export class Brute {
  constructor() {
    this.els = new Map();
    this.serial = 0;
    this.prev = new Map(); // pair key (serials) -> [a, b] handles, at the last events call
  }
  insert(handle, box) {
    this.els.set(handle, { box: Float32Array.from(box), isStatic: false, cat: 1, mask: 0xffffffff, id: this.serial++ });
  }
  move(handle, box) {
    this.els.get(handle).box = Float32Array.from(box);
  }
  remove(handle) {
    this.els.delete(handle);
  }
  paired(x, y) {
    if (x.isStatic && y.isStatic) return false;
    if (((x.cat & y.mask) >>> 0) === 0 || ((y.cat & x.mask) >>> 0) === 0) return false;
    return overlap(x.box, y.box);
  }
  /** Pairs as a Map key -> [a, b], a < b; key from the element serials. */
  pairMap() {
    const list = [...this.els.entries()];
    const out = new Map();
    for (let i = 0; i < list.length; i++)
      for (let j = i + 1; j < list.length; j++) {
        const [ha, x] = list[i], [hb, y] = list[j];
        if (!this.paired(x, y)) continue;
        const a = Math.min(ha, hb), b = Math.max(ha, hb);
        out.set(`${Math.min(x.id, y.id)},${Math.max(x.id, y.id)}`, [a, b]);
      }
    return out;
  }
  pairs() {
    return sortPairs([...this.pairMap().values()].flat());
  }
  events() {
    const now = this.pairMap();
    const began = [], ended = [];
    for (const [k, p] of now) if (!this.prev.has(k)) began.push(...p);
    for (const [k, p] of this.prev) if (!now.has(k)) ended.push(...p);
    this.prev = now;
    return { began: sortPairs(began), ended: sortPairs(ended) };
  }
  query(area) {
    const out = [];
    for (const [h, e] of this.els) if (overlap(e.box, area)) out.push(h);
    return out.sort((a, b) => a - b);
  }
  raycast(ox, oy, dx, dy, maxT) {
    const hits = [];
    for (const [h, e] of this.els) {
      const t = rayBox(e.box, ox, oy, dx, dy, maxT);
      if (t !== null) hits.push([h, t]);
    }
    return hits.sort((p, q) => p[0] - q[0]);
  }
  nearest(x, y, k, maxD2) {
    const c = [];
    for (const [h, e] of this.els) {
      const d = distance2(e.box, x, y);
      if (d <= maxD2) c.push([d, h]);
    }
    c.sort((p, q) => p[0] - q[0] || p[1] - q[1]);
    return c.slice(0, k);
  }
}

/** [a0, b0, a1, b1, ...] sorted by (a, b), as a plain array. */
export function sortPairs(flat) {
  const p = [];
  for (let i = 0; i < flat.length; i += 2) p.push([flat[i], flat[i + 1]]);
  p.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  return p.flat();
}

/** splitmix64 on BigInt: a seeded generator the tests print the seed of. */
export function rng(seed) {
  let s = BigInt.asUintN(64, BigInt(seed));
  const M = (1n << 64n) - 1n;
  return () => {
    s = (s + 0x9e3779b97f4a7c15n) & M;
    let z = s;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M;
    z = z ^ (z >> 31n);
    return Number(z >> 11n) / 2 ** 53;
  };
}
