// SPDX-License-Identifier: MIT
// The static layer: where static elements live once they have settled, out
// of the kind's structure, so a frame's pair search walks only what moves.
//
// Layout (the point grid's idea, for boxes that never move): the items are
// one array sorted by cell, each item filed under the cell of its min corner
// on the level whose cell is at least its extent (levels 4x apart, the finest
// chosen from the most common extent, so a tile map is one level with one
// tile per cell). A level's cells are a dense table when that costs at most
// ~4 entries per item (8x8 blocks of cells, row-major inside a block and
// across blocks: a lookup's 2x2 or 3x3 cells share a block's cache lines),
// else a hashed table (a sparse or huge world):
// either way memory is bounded by the items, not by the world. A box query
// reads, per row of cells it can reach, one contiguous run of items; items
// are 20 bytes ({box, handle}) and read in order.
//
// Changes are cheap and exact: a removed or moved item becomes a tombstone
// (NaN min_x: it overlaps nothing) until the next rebuild, which the engine
// runs in qg_cleanup with memory reserved ahead (see engine.c).
#ifndef QG_STATIC_LAYER_H
#define QG_STATIC_LAYER_H

#include "../kind.h"

/// Levels of cell sizes, 4x apart: 12 levels cover extents 4^11 (4 million)
/// times the finest; larger items go on the top level (its reach grows).
#define QG_STATIC_LEVELS 12

typedef struct qg_static_item {
    qg_rect box;      ///< min_x NaN: a tombstone
    qg_handle handle;
} qg_static_item;

typedef struct qg_static_level {
    double ox, oy;  ///< the grid's origin (the layer's min corner at build)
    double inv;     ///< 1 / cell
    double cell;
    double reach;   ///< largest item extent on this level (rounded up)
    /// How far past its cell's min edge an item of this level reaches, per
    /// axis (the largest, padded up): a search skips a first column or row
    /// whose items all end before the area begins. For a tile map (items
    /// exactly one cell) that is one column and one row fewer per lookup.
    double span_x, span_y;
    int64_t cols, rows;
    int64_t table;  ///< buckets: whole 8x8 blocks of cells when dense, a power of two when hashed
    int64_t bcols;  ///< dense: blocks across
    bool dense;
    int32_t base;   ///< first bucket's entry in start[]
} qg_static_level;

typedef struct qg_static_layer {
    qg_static_item *items; ///< by level, then bucket
    int32_t item_count, item_cap;
    int32_t *start; ///< start[base + b] .. start[base + b + 1]: bucket b's items
    int32_t start_count, start_cap;
    qg_static_level level[QG_STATIC_LEVELS];
    int32_t levels;
    int32_t live;   ///< items that are not tombstones
    /// Changes whenever items move in the arrays (a build, a clear, an undone
    /// removal); never 0, once built. Copies of items (static_cache.h) are
    /// good while it stays the same.
    uint32_t gen;
    uint32_t kills; ///< items made tombstones (counts on; wraps)
    /// The next build's arrays, reserved ahead so qg_cleanup never allocates.
    qg_static_item *next_items;
    int32_t next_items_cap;
    int32_t *next_start;
    int32_t next_start_cap;
} qg_static_layer;

/// Entries start[] may need for a layer of n items (the bound the build
/// keeps: <= 4 per item plus 64 per level, plus one).
int64_t qg_static_start_bound(int64_t n);

/// Reads the items a build takes, in any order: `get(i)` for i < n.
typedef struct qg_static_source {
    const qg_index *index;
    const qg_static_layer *old; ///< its live items come first
    const qg_handle *extra;     ///< then these handles, boxes from index->boxes
    int32_t extra_count;
} qg_static_source;

/// Builds the layer from its live items plus `extra` handles into the next_
/// arrays (which must hold live + extra_count items and the start bound),
/// then swaps them in: the old arrays become the next_ ones. Writes each
/// item's position into the base slot (index->boxes[h].min_y's bits) and
/// marks the slot's min_x NaN. Never allocates.
void qg_static_build(qg_index *index, qg_static_layer *layer, const qg_handle *extra, int32_t extra_count);

/// Calls fn(handle, user) for each live item overlapping `area` (closed);
/// false from fn stops and returns false. Adds cells and items tested to
/// stats.
bool qg_static_query(const qg_static_layer *layer, qg_rect area, qg_query_fn *fn, void *user,
                     qg_query_stats *stats);

/// Pairs each dynamic element dyn[0..n) (box own[i], or boxes[dyn[i]] when
/// own is NULL) with every live item its box overlaps, filtered by
/// `filters` when it is not NULL; fn(a, b, user) with a < b. False from fn
/// stops and returns false.
bool qg_static_join(const qg_static_layer *layer, const qg_rect *boxes, const qg_handle *dyn, const qg_rect *own,
                    int32_t n, const qg_filter *filters, qg_pair_fn *fn, void *user, qg_query_stats *stats);

/// Copies into out[0..max) live items overlapping `area` (closed), each once;
/// returns how many there are, or max + 1 when there are more than max.
int32_t qg_static_collect(const qg_static_layer *layer, qg_rect area, qg_static_item *out, int32_t max);

/// The cells a search reads on a layer of one dense level (a tile map, the
/// common case): rows cy0..cy1, columns cx0..cx1.
typedef struct qg_static_span {
    int64_t cx0, cy0, cx1, cy1;
} qg_static_span;

/// True when the layer is one dense level: the qg_static_span calls apply.
static inline bool qg_static_dense(const qg_static_layer *layer)
{
    return layer->levels == 1 && layer->level[0].dense;
}

/// The cells a search of `area` reads (dense layers only).
qg_static_span qg_static_span_of(const qg_static_layer *layer, qg_rect area);

/// Asks the memory for the bucket starts of the span's first rows, so a
/// search a few elements later finds them in cache.
void qg_static_prefetch_span(const qg_static_layer *layer, qg_static_span span);

/// Asks the memory for the first items of the span's first rows (their
/// bucket starts read: prefetched a few elements before).
void qg_static_prefetch_items(const qg_static_layer *layer, qg_static_span span);

/// qg_static_collect on a dense layer, its cells already found.
int32_t qg_static_collect_span(const qg_static_layer *layer, qg_static_span span, qg_rect area,
                               qg_static_item *out, int32_t max);

/// The item at position pos becomes a tombstone.
void qg_static_kill(qg_static_layer *layer, int32_t pos);

/// The tombstone at position pos is item h with box `box` again (an undone
/// removal).
void qg_static_revive(qg_static_layer *layer, int32_t pos, qg_rect box);

/// Empties the layer, keeping its memory.
void qg_static_clear(qg_static_layer *layer);

/// Frees every array.
void qg_static_free(qg_alloc *alloc, qg_static_layer *layer);

/// Bucket of the level-0 cell holding (x, y), for ordering what is read
/// from the layer (0 when the layer is empty).
uint32_t qg_static_order_key(const qg_static_layer *layer, float x, float y);

/// Checks every item sits in its bucket and counts the live ones; adds the
/// arrays' bytes to *bytes.
bool qg_static_validate(const qg_static_layer *layer, size_t *bytes);

#endif
