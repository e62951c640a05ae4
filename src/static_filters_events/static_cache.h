// SPDX-License-Identifier: MIT
// Each dynamic element's static neighbours, kept from frame to frame, so a
// frame's join of the moving elements against the static layer reads arrays
// in order instead of the layer's cells (Box2D and Chipmunk keep a moving
// proxy's pairs while it stays inside its fattened box; this is that idea
// made exact).
//
// Position i belongs to the engine's dyn[i]: a fat box fat[i] around the
// element's box and an entry holding every live layer item the fat box
// overlaps, as of the layer's generation `gen` (up to QG_CACHE_ITEMS of
// them, boxes and handles copied). While the element's box stays inside its
// fat box, an item the box overlaps is among them, so the join tests the box
// against those alone.
//
// A move checks only the fat box (16 bytes an element, in a compact array):
// one that leaves it marks the position stale in a bitmap, and the join
// searches the layer for a stale element. qg_cleanup refills the stale
// entries in one pass with the layer's lines fetched ahead (a refill per
// move would wait on memory for each). An entry whose fat box holds more
// items than fit is marked full: the join searches the layer for it, as it
// did before this cache. Removing a layer item does not touch the entries:
// it counts a kill, and an entry filled before the last kill checks that an
// item is still in the layer before reporting it. A rebuilt layer (a new
// generation) has every entry refilled at the qg_cleanup that rebuilt it.
// The join does not test the fat box again: a filled entry not marked stale
// is inside it (every call that moves an element marks it when it leaves;
// qg_validate checks it), which saves the join a 16-byte read and a compare
// an element (`level` at 1,000,000: pairs 0.37-0.38 -> 0.34 ms). How big
// the fat boxes are never decides a pair, only the speed.
//
// Memory: 220 bytes a dynamic element (a 188-byte entry, a 16-byte fat box,
// 16 bytes of refill sort keys) plus two bits (stale, full: the join's one
// test an entry, engine.h), allocated only while the index
// has static elements (with the fat layer's arrays, fat_layer.h).
#ifndef QG_STATIC_CACHE_H
#define QG_STATIC_CACHE_H

#include "static_layer.h"

/// Items an entry holds. A fat box over a 40% map of tiles about its size
/// overlaps 2x2 to 3x3 tiles; stretched 24 frames of motion ahead it
/// overlaps up to 2x5, so 8 hold what it reaches and an element refills
/// about half as often as with 4 and a 12-frame stretch (`level` at
/// 1,000,000: update 0.81 -> 0.54 ms, the join's second compare costing
/// little). A multiple of 4: the join tests the slots four at a time.
#define QG_CACHE_ITEMS 8
/// count of an entry whose fat box holds more items than fit.
#define QG_CACHE_FULL (QG_CACHE_ITEMS + 1)

typedef struct qg_static_cache {
    /// The held items' boxes, a coordinate at a time (the join tests every
    /// slot with one compare a coordinate); an unused slot's are NaN, which
    /// overlaps nothing.
    float min_x[QG_CACHE_ITEMS], min_y[QG_CACHE_ITEMS], max_x[QG_CACHE_ITEMS], max_y[QG_CACHE_ITEMS];
    qg_handle item[QG_CACHE_ITEMS]; ///< the held items' handles
    qg_handle handle; ///< dyn[i]
    uint32_t gen;     ///< the layer's generation when filled; 0: never filled
    uint32_t kills;   ///< the layer's kill count when filled
    int32_t count;    ///< items held, or QG_CACHE_FULL
    float at_x, at_y; ///< the box's min corner at the fill
    uint32_t at_frame; ///< the engine's frame (qg_cleanup count) at the fill
} qg_static_cache;

/// A new entry for element h with box `box` that holds nothing yet (the
/// join searches the layer for it).
void qg_cache_blank(qg_static_cache *c, qg_rect *fat, qg_handle h, qg_rect box);

/// True when an element with fat box `fat` now at `box` needs a refill.
static inline bool qg_cache_left(qg_rect fat, qg_rect box)
{
    return !qg_rect_inside(box, fat);
}

/// Refills the entries of positions order[0..m) (each the low 32 bits; the
/// caller sorts them by the layer's cells, so the layer is read in order).
/// Position i's box is dbox[i].
void qg_cache_refill(const qg_static_layer *layer, qg_static_cache *cache, qg_rect *fat, const uint64_t *order,
                     int32_t m, const qg_rect *dbox, uint32_t frame);

/// Pairs the elements of entries [0, n) (boxes dbox[0, n)) with every live layer item their
/// boxes overlap, as qg_static_join does (filters when not NULL; `flags`,
/// the engine's, say which handles are still in the layer). `wide`: the
/// processor runs AVX2 (qg_cpu_avx2), which tests an entry's eight slots in
/// one compare a coordinate. False when fn stopped it.
/// An entry whose bit `base` + i of `stale` or of `full` (`words` words
/// each) is set is searched in the layer; the others are filled for the
/// layer's generation, hold every item their fat boxes overlap, and their
/// boxes are inside their fat boxes.
bool qg_cache_join(const qg_static_layer *layer, const qg_static_cache *cache, const uint64_t *stale,
                   const uint64_t *full, int64_t words, int32_t base, const qg_rect *dbox, int32_t n,
                   const uint8_t *flags, const qg_filter *filters, qg_pair_fn *fn, void *user, qg_query_stats *stats,
                   bool wide);

/// Checks entry c (fat box `fat`) against the layer; false when an item the
/// fat box overlaps is missing or one it holds should not be there.
bool qg_cache_valid(const qg_static_layer *layer, const qg_static_cache *c, qg_rect fat, const uint8_t *flags);

#endif
