// SPDX-License-Identifier: MIT
// quadgrid for JavaScript: the C library built to WebAssembly, behind a
// typed-array API. One call crosses into WebAssembly per batch (a whole
// insert, move, pair search), never one per element or pair.
//
//   import { init, Index } from "quadgrid";
//   await init();
//   const ix = new Index({ kind: "point_grid" });
//   const handles = ix.insert(new Float32Array([0, 0, 10, 10, 5, 5, 20, 20]));
//   ix.cleanup();
//   ix.pairs(); // Int32Array [a0, b0, a1, b1, ...], a copy
//
// Both builds are embedded in the package (-sSINGLE_FILE): nothing is
// fetched at load, in Node or in a browser. init() picks the SIMD128 build
// when the runtime validates a SIMD module, the scalar one otherwise.

// The kind names by enum value, asked of the library at init()
// (QG_KIND_COUNT, qg_kind_name): a kind added to the C list needs no edit here.
let KINDS = [];
const STATUS = { 0: "QG_OK", [-1]: "QG_ERR_INVALID", [-2]: "QG_ERR_HANDLE", [-3]: "QG_ERR_NOMEM", [-4]: "QG_ERR_CAPACITY" };

/**
 * The kind names this build has, in the C enum's order: empty until init()
 * resolves, then the library's own list (a live binding: importers see it).
 */
export let kinds = Object.freeze([]);

// The library's kind list, read from the module just loaded.
function readKinds(m) {
  const all = [];
  for (let k = 0; k < m._qgjs_kind_count(); k++) {
    const p = m._qgjs_kind_name(k);
    let e = p;
    while (m.HEAPU8[e] !== 0) e++;
    all.push(new TextDecoder().decode(m.HEAPU8.slice(p, e)));
  }
  KINDS = all;
  kinds = Object.freeze(all.filter((_, k) => m._qgjs_kind_available(k)));
}

// The smallest module with a SIMD128 instruction (v128.const, i8x16.popcnt's
// predecessor i32x4.splat...): a runtime without SIMD rejects it.
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11,
]);

let M = null; // the Emscripten module once loaded
let loading = null;
let buildName = null;

/** True when this runtime runs WebAssembly SIMD128. */
export function simdSupported() {
  try {
    return typeof WebAssembly === "object" && WebAssembly.validate(SIMD_PROBE);
  } catch {
    return false;
  }
}

/**
 * Loads the WebAssembly once; later calls return the same promise.
 * options.simd: true/false forces a build (false: scalar); by default SIMD
 * where supported. In Node, QUADGRID_SIMD=0 or 1 in the environment does the same.
 */
export function init(options = {}) {
  if (loading) return loading;
  let simd = options.simd;
  if (simd === undefined && typeof process === "object" && process.env && process.env.QUADGRID_SIMD !== undefined)
    simd = process.env.QUADGRID_SIMD !== "0";
  if (simd === undefined) simd = simdSupported();
  if (simd && !simdSupported()) throw new Error("QG_ERR_INVALID: this runtime has no WebAssembly SIMD128");
  buildName = simd ? "simd" : "scalar";
  loading = (simd ? import("./dist/quadgrid-simd.mjs") : import("./dist/quadgrid-scalar.mjs"))
    .then((mod) => mod.default())
    .then((m) => {
      readKinds(m);
      M = m;
      return { build: buildName };
    });
  return loading;
}

/** Which build init() loaded ("simd" or "scalar"), null before init. */
export function build() {
  return M ? buildName : null;
}

/** Bytes held by live indexes and by the binding's own buffers (for leak tests). */
export function memoryUsage() {
  need();
  return {
    indexBytes: M._qgjs_index_bytes(),
    bufferBytes: M._qgjs_glue_bytes(),
    wasmBytes: M.HEAPU8.byteLength,
  };
}

/** Frees the binding's scratch and result buffers (they grow back on use). */
export function releaseBuffers() {
  need();
  M._qgjs_release_buffers();
}

function need() {
  if (!M) throw new Error("QG_ERR_INVALID: call `await init()` before using quadgrid");
}

function fail(status, what) {
  const name = STATUS[status] || "QG_ERR_UNKNOWN";
  const msg = `${name}: ${what}`;
  const e = status === -3 ? new Error(msg) : new RangeError(msg);
  e.code = name;
  throw e;
}

function typeFail(what) {
  const e = new TypeError(`QG_ERR_INVALID: ${what}`);
  e.code = "QG_ERR_INVALID";
  throw e;
}

function check(status, what) {
  if (status !== 0) fail(status, what);
}

// A refused batch names its first bad row and why, as the Python package
// does: "QG_ERR_HANDLE: move (row 1: handle 7 is not live)". Found here, after
// the C side refused it (it changed nothing), so a good batch pays nothing.
// ph: the handles' address (or 0), pb: the boxes' (or 0).
function batchCheck(status, what, ix, n, ph, pb) {
  if (status === 0) return;
  if (status === -3 || status === -4) fail(status, what);
  const row = (i, why) => fail(status, `${what} (row ${i}: ${why})`);
  if (status === -2 && ph) {
    const t = M._qgjs_scratch(2, 16);
    for (let i = 0; i < n; i++) {
      const h = M.HEAP32[(ph >> 2) + i];
      if (t === 0 || M._qgjs_get_many(ix, ph + 4 * i, 1, t) !== 0) row(i, `handle ${h} is not live`);
    }
  }
  if (status === -1 && pb) {
    for (let i = 0; i < n; i++) {
      const b = Array.from(M.HEAPF32.subarray((pb >> 2) + 4 * i, (pb >> 2) + 4 * i + 4));
      const text = `box [${b.map((v) => (Number.isInteger(v) ? v.toFixed(1) : String(v))).join(", ")}]`;
      if (!b.every(Number.isFinite)) row(i, `${text} is not finite`);
      if (b[0] > b[2] || b[1] > b[3]) row(i, `${text} has min > max`);
    }
  }
  if (status === -1 && ph) {
    const seen = new Set();
    for (let i = 0; i < n; i++) {
      const h = M.HEAP32[(ph >> 2) + i];
      if (seen.has(h)) row(i, `handle ${h} listed twice`);
      seen.add(h);
    }
  }
  fail(status, what);
}

// A filter's category or mask: an integer in [0, 2^32), never wrapped.
function u32Of(v, what) {
  if (typeof v !== "number") typeFail(`${what} must be a number`);
  if (!Number.isInteger(v)) typeFail(`${what} must be an integer, got ${v}`);
  if (v < 0 || v > 0xffffffff) {
    const e = new RangeError(`QG_ERR_INVALID: ${what} must fit in uint32, got ${v}`);
    e.code = "QG_ERR_INVALID";
    throw e;
  }
  return v;
}

function isArrayLike(a) {
  return a != null && typeof a === "object" && typeof a.length === "number";
}

// Copies handles into scratch slot 0 (int32); returns the wasm address.
// Non-integers are a TypeError; integers that cannot be handles become -1,
// which the C side answers with QG_ERR_HANDLE.
function putHandles(handles, what, slot = 0) {
  if (typeof handles === "number") handles = [handles];
  if (!isArrayLike(handles)) typeFail(`${what}: handles must be an Int32Array or an array of integers`);
  const n = handles.length;
  const p = M._qgjs_scratch(slot, n * 4);
  if (p === 0) fail(-3, what);
  const h = M.HEAP32;
  if (handles instanceof Int32Array) {
    h.set(handles, p >> 2);
  } else {
    for (let i = 0; i < n; i++) {
      const v = handles[i];
      if (typeof v !== "number" || !Number.isInteger(v)) typeFail(`${what}: handle ${i} is not an integer`);
      h[(p >> 2) + i] = v >= 0 && v <= 0x7fffffff ? v : -1;
    }
  }
  return p;
}

// Boxes (4 floats each) into wasm memory: a Float32Array that is already a
// view of wasm memory is used in place (no copy), anything else is copied
// into scratch slot 1.
function putBoxes(boxes, what, count) {
  if (!isArrayLike(boxes)) typeFail(`${what}: boxes must be a Float32Array or an array of numbers`);
  if (boxes.length % 4 !== 0) typeFail(`${what}: boxes length ${boxes.length} is not a multiple of 4`);
  if (count !== undefined && boxes.length !== count * 4)
    typeFail(`${what}: ${count} handles need ${count * 4} box values, got ${boxes.length}`);
  if (boxes instanceof Float32Array && boxes.buffer === M.HEAPU8.buffer) return boxes.byteOffset;
  const p = M._qgjs_scratch(1, boxes.length * 4);
  if (p === 0) fail(-3, what);
  if (!(boxes instanceof Float32Array)) {
    for (let i = 0; i < boxes.length; i++)
      if (typeof boxes[i] !== "number") typeFail(`${what}: box value ${i} is not a number`);
  }
  M.HEAPF32.set(boxes, p >> 2);
  return p;
}

function outI32(which) {
  const p = M._qgjs_out_ptr(which) >> 2;
  return M.HEAP32.slice(p, p + M._qgjs_out_len(which));
}

function outF32(which) {
  const p = M._qgjs_out_ptr(2) >> 2;
  return M.HEAPF32.slice(p, p + M._qgjs_out_len(which));
}

function num(v, what) {
  if (typeof v !== "number") typeFail(`${what} must be a number`);
  return v;
}

function kindOf(kind) {
  if (typeof kind === "number" && Number.isInteger(kind) && kind >= 0 && kind < KINDS.length && kinds.includes(KINDS[kind]))
    return kind;
  const k = kinds.includes(kind) ? KINDS.indexOf(kind) : -1;
  if (k < 0) {
    const e = new RangeError(`QG_ERR_INVALID: unknown kind ${JSON.stringify(kind)} (one of ${kinds.join(", ")})`);
    e.code = "QG_ERR_INVALID";
    throw e;
  }
  return k;
}

// The snapshot's header (docs/rollback.md): magic, version (uint32), kind
// (uint32), length (uint64), checksum (uint64), little-endian. Read here only
// to say why the library refused some bytes, in the Python package's words.
const SNAP_HEADER = 32;
const SNAP_VERSION = 1; // the version this build writes (src/snapshot.c)

function snapshotReason(u8) {
  const n = u8.length;
  if (n < SNAP_HEADER) return `${n} bytes, shorter than the ${SNAP_HEADER}-byte header`;
  if (!Array.from("quadgrid", (c) => c.charCodeAt(0)).every((c, i) => u8[i] === c)) return 'not a quadgrid snapshot (no "quadgrid" magic)';
  const v = new DataView(u8.buffer, u8.byteOffset, SNAP_HEADER);
  const version = v.getUint32(8, true), kind = v.getUint32(12, true), length = v.getBigUint64(16, true);
  if (length !== BigInt(n)) return `truncated or extended: the header says ${length} bytes, got ${n}`;
  if (kind >= KINDS.length || !kinds.includes(KINDS[kind])) return `kind ${kind}, which this build lacks`;
  if (version !== SNAP_VERSION) return `version ${version}, this build reads version ${SNAP_VERSION}`;
  return "corrupted: its checksum or structure does not agree";
}

// Bytes as a Uint8Array view (no copy): any ArrayBufferView (Uint8Array,
// Buffer, DataView, other typed arrays as their bytes) or an ArrayBuffer.
function bytesOf(data, what) {
  if (data instanceof Uint8Array) return data;
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof ArrayBuffer || (typeof SharedArrayBuffer === "function" && data instanceof SharedArrayBuffer))
    return new Uint8Array(data);
  typeFail(`${what}: expected bytes (a Uint8Array or ArrayBuffer of a snapshot), got ${data === null ? "null" : typeof data}`);
}

// The constructor's argument that makes an empty shell for a C index that
// already exists (clone, fromSnapshot): not exported, so no caller can pass it.
const ADOPT = Symbol("adopt");

// Indexes dropped without free() are destroyed when collected.
const registry = typeof FinalizationRegistry === "function" ? new FinalizationRegistry((ptr) => M && M._qgjs_destroy(ptr)) : null;

/** A spatial index of one kind (the C library's qg_index). */
export class Index {
  #ptr = 0;
  #kind = 0;
  #eventPairs = 0; // pairs at the last pairEvents(), to size its lists

  /**
   * config: { kind = "point_grid", bounds = [0, 0, 0, 0], elementSize,
   * maxElementSize, cellSize, maxDepth, leafCapacity } (0 or absent: the
   * kind learns it from its elements, as qg_default_config; see
   * include/quadgrid.h's qg_config and docs/tuning.md).
   */
  constructor(config = {}) {
    need();
    if (config === ADOPT) return;
    if (config === null || typeof config !== "object") typeFail("new Index: config must be an object");
    const kind = kindOf(config.kind === undefined ? "point_grid" : config.kind);
    const b = config.bounds === undefined ? [0, 0, 0, 0] : config.bounds;
    if (!isArrayLike(b) || b.length !== 4) typeFail("new Index: bounds must be [minX, minY, maxX, maxY]");
    const f = [b[0], b[1], b[2], b[3], config.elementSize ?? 0, config.maxElementSize ?? 0, config.cellSize ?? 0];
    f.forEach((v, i) => num(v, `new Index: config value ${i}`));
    const md = config.maxDepth ?? 0, lc = config.leafCapacity ?? 0;
    if (!Number.isInteger(md) || !Number.isInteger(lc)) typeFail("new Index: maxDepth and leafCapacity must be integers");
    const p = M._qgjs_scratch(2, 64);
    if (p === 0) fail(-3, "new Index");
    M.HEAPF32.set(f, p >> 2);
    const out = p + 32;
    const s = M._qgjs_create(kind, p, md | 0, lc | 0, out);
    check(s, "new Index");
    this.#ptr = M.HEAP32[out >> 2];
    this.#kind = kind;
    if (registry) registry.register(this, this.#ptr, this);
  }

  #live(what) {
    if (this.#ptr === 0) {
      const e = new Error(`QG_ERR_INVALID: ${what} on a freed Index`);
      e.code = "QG_ERR_INVALID";
      throw e;
    }
    return this.#ptr;
  }

  /** The kind's name. */
  get kind() {
    return KINDS[this.#kind];
  }

  /** Live elements. */
  get count() {
    return M._qgjs_count(this.#live("count"));
  }

  /** { memoryBytes, elements, nodes, leaves, maxDepthReached } (qg_get_stats). */
  get stats() {
    const ix = this.#live("stats");
    const p = M._qgjs_scratch(2, 40);
    if (p === 0) fail(-3, "stats");
    M._qgjs_stats(ix, p);
    const d = M.HEAPF64.subarray(p >> 3, (p >> 3) + 5);
    return { memoryBytes: d[0], elements: d[1], nodes: d[2], leaves: d[3], maxDepthReached: d[4] };
  }

  /** True once free() ran. */
  get freed() {
    return this.#ptr === 0;
  }

  /** Inserts boxes (4 floats each: minX, minY, maxX, maxY); returns their handles. All or nothing. */
  insert(boxes) {
    const ix = this.#live("insert");
    const pb = putBoxes(boxes, "insert");
    const n = boxes.length / 4;
    const ph = M._qgjs_scratch(0, n * 4);
    if (ph === 0) fail(-3, "insert");
    batchCheck(M._qgjs_insert_many(ix, pb, n, ph), "insert", ix, n, 0, pb);
    return M.HEAP32.slice(ph >> 2, (ph >> 2) + n);
  }

  /** Gives handles[i] the box boxes[4i..4i+4). All checked first: every handle live, listed once, every box valid. */
  move(handles, boxes) {
    const ix = this.#live("move");
    const n = isArrayLike(handles) ? handles.length : 1;
    const pb = putBoxes(boxes, "move", n);
    const ph = putHandles(handles, "move");
    batchCheck(M._qgjs_move_many(ix, ph, pb, n), "move", ix, n, ph, pb);
  }

  /** Removes the handles (every one live and listed once, else nothing is removed). */
  remove(handles) {
    const ix = this.#live("remove");
    const n = handlesLength(handles);
    const ph = putHandles(handles, "remove");
    batchCheck(M._qgjs_remove_many(ix, ph, n), "remove", ix, n, ph, 0);
  }

  /** The boxes of the handles, 4 floats each. */
  get(handles) {
    const ix = this.#live("get");
    const n = handlesLength(handles);
    const ph = putHandles(handles, "get");
    const pb = M._qgjs_scratch(1, n * 16);
    if (pb === 0) fail(-3, "get");
    batchCheck(M._qgjs_get_many(ix, ph, n, pb), "get", ix, n, ph, 0);
    return M.HEAPF32.slice(pb >> 2, (pb >> 2) + 4 * n);
  }

  /** Deferred upkeep: call once a frame after the moves, before pairs and queries. */
  cleanup() {
    M._qgjs_cleanup(this.#live("cleanup"));
  }

  /** Removes every element (handles start again from 0), keeps the memory. */
  clear() {
    M._qgjs_clear(this.#live("clear"));
    this.#eventPairs = 0;
  }

  /** Every overlapping pair as [a0, b0, a1, b1, ...] with a < b: a new Int32Array (a copy, yours to keep). */
  pairs() {
    check(M._qgjs_pairs(this.#live("pairs")), "pairs");
    return outI32(0);
  }

  /** The number of pairs pairs() would return, without building the list. */
  pairCount() {
    const n = M._qgjs_pair_count(this.#live("pairCount"));
    if (n < 0) fail(n, "pairCount");
    return n;
  }

  /** Handles whose boxes overlap the closed area [minX, minY, maxX, maxY] (may be infinite, not NaN). */
  query(area) {
    const ix = this.#live("query");
    if (!isArrayLike(area) || area.length !== 4) typeFail("query: area must be [minX, minY, maxX, maxY]");
    for (let i = 0; i < 4; i++) num(area[i], "query: area value");
    check(M._qgjs_query(ix, area[0], area[1], area[2], area[3]), "query");
    return outI32(0);
  }

  /**
   * Elements the segment origin + t*direction, t in [0, maxT], touches:
   * { handles, t } (any order), or with { closest: true } only the nearest
   * hit (ties to the smaller handle), or empty arrays.
   */
  raycast(ox, oy, dx, dy, maxT = Infinity, options = {}) {
    const ix = this.#live("raycast");
    [ox, oy, dx, dy, maxT].forEach((v) => num(v, "raycast: origin, direction and maxT"));
    check(M._qgjs_raycast(ix, ox, oy, dx, dy, maxT, options.closest ? 1 : 0), "raycast");
    return { handles: outI32(0), t: outF32(2) };
  }

  /** The k nearest elements to (x, y) within maxDistance2: { handles, distances2 } in (distance2, handle) order. */
  nearest(x, y, k = 1, maxDistance2 = Infinity) {
    const ix = this.#live("nearest");
    [x, y, k, maxDistance2].forEach((v) => num(v, "nearest: x, y, k and maxDistance2"));
    if (!Number.isInteger(k)) typeFail("nearest: k must be an integer");
    if (k > 0x7ffffff) fail(-1, "nearest: k too large");
    check(M._qgjs_nearest(ix, x, y, k, maxDistance2), "nearest");
    return { handles: outI32(0), distances2: outF32(2) };
  }

  /** Marks the handles static (true) or dynamic (false); isStatic is one boolean or one per handle. */
  setStatic(handles, isStatic = true) {
    const ix = this.#live("setStatic");
    const n = handlesLength(handles);
    if (isArrayLike(isStatic) && isStatic.length !== n) typeFail(`setStatic: ${n} handles, ${isStatic.length} flags`);
    const ph = putHandles(handles, "setStatic");
    const pf = M._qgjs_scratch(1, n);
    if (pf === 0) fail(-3, "setStatic");
    const u8 = M.HEAPU8;
    for (let i = 0; i < n; i++) u8[pf + i] = (isArrayLike(isStatic) ? isStatic[i] : isStatic) ? 1 : 0;
    batchCheck(M._qgjs_set_static_many(ix, ph, pf, n), "setStatic", ix, n, ph, 0);
  }

  /** 1 where the handle is static, 0 otherwise (also for a handle not live). */
  isStatic(handles) {
    const ix = this.#live("isStatic");
    const n = handlesLength(handles);
    const ph = putHandles(handles, "isStatic");
    const po = M._qgjs_scratch(1, n);
    if (po === 0) fail(-3, "isStatic");
    M._qgjs_is_static_many(ix, ph, n, po);
    return M.HEAPU8.slice(po, po + n);
  }

  /**
   * Collision filters (Box2D's category and mask bits): a pair is reported
   * only when (a.category & b.mask) && (b.category & a.mask). category and
   * mask are one uint32 each for every handle, or one per handle.
   */
  setFilter(handles, category = 1, mask = 0xffffffff) {
    const ix = this.#live("setFilter");
    const n = handlesLength(handles);
    for (const [v, what] of [[category, "category"], [mask, "mask"]]) {
      if (isArrayLike(v) ? v.length !== n : typeof v !== "number") typeFail(`setFilter: ${what} must be a number or one per handle`);
    }
    const ph = putHandles(handles, "setFilter");
    const pf = M._qgjs_scratch(1, 8 * n);
    if (pf === 0) fail(-3, "setFilter");
    const u32 = M.HEAPU32;
    for (let i = 0; i < n; i++) {
      u32[(pf >> 2) + 2 * i] = u32Of(isArrayLike(category) ? category[i] : category, `setFilter: category (row ${i})`);
      u32[(pf >> 2) + 2 * i + 1] = u32Of(isArrayLike(mask) ? mask[i] : mask, `setFilter: mask (row ${i})`);
    }
    batchCheck(M._qgjs_set_filter_many(ix, ph, pf, n), "setFilter", ix, n, ph, 0);
  }

  /** The filters of the handles: Uint32Array [category0, mask0, ...]. */
  getFilter(handles) {
    const ix = this.#live("getFilter");
    const n = handlesLength(handles);
    const ph = putHandles(handles, "getFilter");
    const po = M._qgjs_scratch(1, 8 * n);
    if (po === 0) fail(-3, "getFilter");
    check(M._qgjs_get_filter_many(ix, ph, n, po), "getFilter");
    return M.HEAPU32.slice(po >> 2, (po >> 2) + 2 * n);
  }

  /**
   * Overlap events since the last call: { began, ended }, each [a0, b0, ...]
   * with a < b (qg_pair_events; the first call reports every pair as began).
   */
  pairEvents() {
    const ix = this.#live("pairEvents");
    if (this.#eventPairs < 0) {
      const n = M._qgjs_event_pairs(ix); // read from a snapshot: ask once
      if (n < 0) fail(n, "pairEvents");
      this.#eventPairs = n;
    }
    check(M._qgjs_pair_events(ix, this.#eventPairs), "pairEvents");
    const began = outI32(0), ended = outI32(1);
    this.#eventPairs += (began.length - ended.length) / 2;
    return { began, ended };
  }

  /**
   * Every node or cell (for drawing): Float32Array of six values each,
   * minX, minY, maxX, maxY, depth, elements.
   */
  cells() {
    check(M._qgjs_visit(this.#live("cells")), "cells");
    return outF32(2);
  }

  /** Checks the index's internal invariants (slow; for tests). */
  validate() {
    return M._qgjs_validate(this.#live("validate")) === 0;
  }

  // A new Index around the C index at ptr (which it then owns).
  static #adopt(ptr, kind, eventPairs) {
    const ix = new Index(ADOPT);
    ix.#ptr = ptr;
    ix.#kind = kind;
    ix.#eventPairs = eventPairs;
    if (registry) registry.register(ix, ptr, ix);
    return ix;
  }

  /**
   * An independent copy (qg_clone): it answers every later call exactly as
   * this index would, in the same order (pairs included), and the two
   * change separately. Free it as any Index.
   */
  clone() {
    const ix = this.#live("clone");
    const out = M._qgjs_scratch(2, 8);
    if (out === 0) fail(-3, "clone");
    const s = M._qgjs_clone(ix, out);
    check(s, "clone");
    return Index.#adopt(M.HEAP32[out >> 2], this.#kind, this.#eventPairs);
  }

  /**
   * Makes this index a copy of `other` (qg_copy), reusing this one's memory:
   * no allocation when it already holds enough (a rollback every frame).
   * Both of the same kind (RangeError otherwise); unchanged on any error.
   */
  copyFrom(other) {
    const dst = this.#live("copyFrom");
    if (!(other instanceof Index)) typeFail("copyFrom: expected an Index");
    const src = other.#live("copyFrom (the other index)");
    if (other.#kind !== this.#kind) fail(-1, `copyFrom (kinds differ: this index is ${this.kind}, the other ${other.kind})`);
    if (other === this) return;
    const s = M._qgjs_copy(dst, src);
    check(s, "copyFrom");
    this.#eventPairs = other.#eventPairs;
  }

  /**
   * The whole state as bytes (qg_snapshot_write): a new Uint8Array,
   * versioned, little-endian, checksummed (docs/rollback.md), the same bytes
   * the native library and the Python package write for the same state.
   * Index.fromSnapshot reads it back.
   */
  snapshot() {
    const ix = this.#live("snapshot");
    const n = M._qgjs_snapshot_size(ix);
    const p = n > 0 ? M._malloc(n) : 0;
    if (p === 0) fail(-3, "snapshot");
    try {
      const s = M._qgjs_snapshot_write(ix, p, n);
      check(s, "snapshot");
      return M.HEAPU8.slice(p, p + n);
    } finally {
      M._free(p);
    }
  }

  /**
   * A new Index from snapshot() bytes (a Uint8Array, Buffer, other
   * ArrayBufferView or ArrayBuffer; from this package, the Python one or the
   * C library), continuing exactly as the index they were written from.
   * RangeError (.code "QG_ERR_INVALID") for bytes that are not a whole,
   * unchanged snapshot of this version, TypeError for something that is not
   * bytes, Error ("QG_ERR_NOMEM") when memory runs out.
   */
  static fromSnapshot(bytes) {
    need();
    let u8 = bytesOf(bytes, "fromSnapshot");
    if (u8.buffer === M.HEAPU8.buffer) u8 = u8.slice(); // a view of wasm memory, which _malloc may move
    const n = u8.length;
    const out = M._qgjs_scratch(2, 8);
    const p = M._malloc(n > 0 ? n : 1);
    if (out === 0 || p === 0) {
      if (p !== 0) M._free(p);
      fail(-3, "fromSnapshot");
    }
    let s;
    try {
      M.HEAPU8.set(u8, p);
      s = M._qgjs_snapshot_read(p, n, out, out + 4);
    } finally {
      M._free(p);
    }
    if (s === -1) fail(s, `fromSnapshot (${snapshotReason(u8)})`);
    check(s, "fromSnapshot");
    // The pairs the next pairEvents() compares with are not known here: -1
    // has pairEvents() ask the library first (qgjs_event_pairs).
    return Index.#adopt(M.HEAP32[out >> 2], M.HEAP32[(out >> 2) + 1], -1);
  }

  /** Frees the index's memory. Later calls on it throw; a second free() does nothing. */
  free() {
    if (this.#ptr === 0) return;
    if (registry) registry.unregister(this);
    M._qgjs_destroy(this.#ptr);
    this.#ptr = 0;
  }
}

function handlesLength(handles) {
  if (typeof handles === "number") return 1;
  if (!isArrayLike(handles)) typeFail("handles must be an Int32Array or an array of integers");
  return handles.length;
}

/**
 * The `agents` workload of quadgrid-bench (apps/common/workload.c), computed
 * in WebAssembly: n moving squares in [0, world]^2, the same bits as the
 * native bench. For demos and benchmarks. `boxes` is a view into
 * WebAssembly memory (valid until the next call into quadgrid that may grow
 * memory; Index.move takes it without a copy).
 */
export class Agents {
  #ptr = 0;
  constructor(n, options = {}) {
    need();
    if (!Number.isInteger(n) || n < 0) typeFail("new Agents: n must be an integer >= 0");
    this.#ptr = M._qgjs_agents_new(n, options.mixed ? 1 : 0);
    if (this.#ptr === 0) fail(-3, "new Agents");
    this.n = n;
    this.world = M._qgjs_agents_world(this.#ptr);
  }
  /** One frame's motion (bounces off the walls). */
  move() {
    M._qgjs_agents_move(this.#ptr);
  }
  #view(p, len) {
    return new Float32Array(M.HEAPU8.buffer, p, len);
  }
  /** The boxes, 4 floats an agent (a view: see the class comment). */
  get boxes() {
    return this.#view(M._qgjs_agents_boxes(this.#ptr), this.n * 4);
  }
  /** x, y, vx, vy or h (half-size), as a view. */
  field(name) {
    const i = ["x", "y", "vx", "vy", "h"].indexOf(name);
    if (i < 0) typeFail(`Agents.field: unknown field ${name}`);
    return this.#view(M._qgjs_agents_field(this.#ptr, i), this.n);
  }
  free() {
    if (this.#ptr === 0) return;
    M._qgjs_agents_free(this.#ptr);
    this.#ptr = 0;
  }
}
