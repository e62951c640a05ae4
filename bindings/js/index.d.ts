// SPDX-License-Identifier: MIT
// Types of the quadgrid package (index.js).

/** The index kinds (include/quadgrid.h's qg_kind), by name: generated from QG_KIND_LIST by scripts/build.sh. */
import type { Kind } from "./dist/kinds.js";
export type { Kind };

/** The kind names in the C enum's order, as the library gives them: empty until init() resolves. */
export let kinds: readonly Kind[];

/** Handles: an Int32Array, an array of integers, or one integer. */
export type Handles = Int32Array | ArrayLike<number> | number;
/** Boxes, 4 values each: minX, minY, maxX, maxY (closed; a point has min == max). */
export type Boxes = Float32Array | ArrayLike<number>;

export interface InitOptions {
  /** true: the SIMD128 build (throws without SIMD support); false: the scalar one; default: SIMD where supported. */
  simd?: boolean;
}

/** Loads the WebAssembly once; later calls return the same promise. Everything else is synchronous. */
export function init(options?: InitOptions): Promise<{ build: "simd" | "scalar" }>;
/** The build init() loaded, or null before init. */
export function build(): "simd" | "scalar" | null;
/** True when this runtime validates a WebAssembly SIMD128 module. */
export function simdSupported(): boolean;
/** Bytes live indexes hold, bytes of the binding's own buffers, and the WebAssembly memory's size. */
export function memoryUsage(): { indexBytes: number; bufferBytes: number; wasmBytes: number };
/** Frees the binding's scratch and result buffers (they grow again on use). */
export function releaseBuffers(): void;

export interface IndexConfig {
  /** Default "point_grid". */
  kind?: Kind | number;
  /** The world as a hint [minX, minY, maxX, maxY]; boxes outside it work too. Default [0, 0, 0, 0]: no hint, learned from the elements. */
  bounds?: ArrayLike<number>;
  /** Typical element width; 0 = choose from bounds. */
  elementSize?: number;
  /** point_grid: the largest size of its finest level; 0 = twice elementSize. */
  maxElementSize?: number;
  /** Grids: cell size; 0 = choose. */
  cellSize?: number;
  /** Trees: maximum depth; 0 = choose. */
  maxDepth?: number;
  /** Trees: elements a leaf holds before it splits; 0 = the kind's default. */
  leafCapacity?: number;
}

export interface IndexStats {
  memoryBytes: number;
  elements: number;
  nodes: number;
  leaves: number;
  maxDepthReached: number;
}

/**
 * A spatial index. Errors throw TypeError (wrong JavaScript types),
 * RangeError (bad values, dead handles: .code "QG_ERR_INVALID",
 * "QG_ERR_HANDLE", "QG_ERR_CAPACITY") or Error ("QG_ERR_NOMEM"); the index
 * is unchanged after any of them. Every returned array is a copy.
 */
export class Index {
  constructor(config?: IndexConfig);
  readonly kind: Kind;
  /** Live elements. */
  readonly count: number;
  readonly stats: IndexStats;
  readonly freed: boolean;
  /** Inserts boxes; returns their handles (all or nothing). */
  insert(boxes: Boxes): Int32Array;
  /** handles[i] gets box i; all checked first (live, listed once, valid boxes). */
  move(handles: Handles, boxes: Boxes): void;
  /** Removes the handles (all live and distinct, else none is removed). */
  remove(handles: Handles): void;
  /** The boxes of the handles, 4 floats each. */
  get(handles: Handles): Float32Array;
  /** Once a frame after the moves, before pairs and queries. */
  cleanup(): void;
  /** Removes every element; keeps the memory. */
  clear(): void;
  /** Every overlapping pair [a0, b0, a1, b1, ...], a < b, except static-static and filtered pairs. */
  pairs(): Int32Array;
  /** How many pairs pairs() would return. */
  pairCount(): number;
  /** Handles whose boxes overlap the closed area [minX, minY, maxX, maxY]. */
  query(area: ArrayLike<number>): Int32Array;
  /** Elements the segment origin + t*direction, t in [0, maxT], touches (closest: only the nearest). */
  raycast(ox: number, oy: number, dx: number, dy: number, maxT?: number, options?: { closest?: boolean }): {
    handles: Int32Array;
    t: Float32Array;
  };
  /** The k nearest within maxDistance2, in (distance2, handle) order. */
  nearest(x: number, y: number, k?: number, maxDistance2?: number): { handles: Int32Array; distances2: Float32Array };
  /** Static (true) or dynamic (false): one flag for all or one per handle. Two static elements never pair. */
  setStatic(handles: Handles, isStatic?: boolean | ArrayLike<boolean | number>): void;
  isStatic(handles: Handles): Uint8Array;
  /** Category and mask bits: one value for all or one per handle. */
  setFilter(handles: Handles, category?: number | ArrayLike<number>, mask?: number | ArrayLike<number>): void;
  /** [category0, mask0, category1, mask1, ...]. */
  getFilter(handles: Handles): Uint32Array;
  /** Pairs that began and ended since the last call (the first call: every pair began). */
  pairEvents(): { began: Int32Array; ended: Int32Array };
  /** Every node or cell, six values each: minX, minY, maxX, maxY, depth, elements (for drawing). */
  cells(): Float32Array;
  /** Checks internal invariants (slow; for tests). */
  validate(): boolean;
  /**
   * An independent copy (qg_clone) that answers every later call exactly as
   * this index would, in the same order. Free it as any Index.
   */
  clone(): Index;
  /**
   * Makes this index a copy of `other` (qg_copy) in this one's memory: no
   * allocation when it holds enough. Same kind only (RangeError
   * "QG_ERR_INVALID" otherwise; TypeError for a non-Index); unchanged on any error.
   */
  copyFrom(other: Index): void;
  /** The whole state (qg_snapshot_write): a new Uint8Array in the C library's portable format (docs/rollback.md). */
  snapshot(): Uint8Array;
  /**
   * A new Index from snapshot() bytes (this package's, the Python package's
   * or the C library's). RangeError "QG_ERR_INVALID" for bytes that are not
   * a whole, unchanged snapshot of this version (the message says why),
   * TypeError for a value that is not bytes, Error "QG_ERR_NOMEM".
   */
  static fromSnapshot(bytes: ArrayBufferView | ArrayBufferLike): Index;
  /** Frees the index; later calls throw, a second free() does nothing. */
  free(): void;
}

/**
 * The `agents` workload of quadgrid-bench, computed in WebAssembly (for demos
 * and benchmarks). boxes and field() are views into WebAssembly memory, valid
 * until the next call that may grow it: take them again after other calls.
 */
export class Agents {
  constructor(n: number, options?: { mixed?: boolean });
  readonly n: number;
  /** The world is [0, world]^2. */
  readonly world: number;
  move(): void;
  readonly boxes: Float32Array;
  field(name: "x" | "y" | "vx" | "vy" | "h"): Float32Array;
  free(): void;
}
