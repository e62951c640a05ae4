// SPDX-License-Identifier: MIT
// Engine scenes: static elements, collision filters and overlap events, for
// every kind at once (the kinds never see them).
//
// Where elements live. A dynamic element lives in the kind. A static element
// lives in the kind only until the next qg_cleanup after it was made static
// or last moved ("pending"); then it moves to the static layer
// (static_layer.h), out of the kind's sight: its base slot keeps min_x NaN,
// so kinds treat it as a free slot, and index->count counts only what the
// kind holds. A static element that moves goes back into the kind (pending
// again), so a door that moves every frame costs what a dynamic element
// costs, and the layer is rebuilt only when something settles.
//
// While the static layer has items, the dynamic elements leave the kind
// too, at qg_cleanup, for the fat layer (fat_layer.h): in a level the kind
// then holds nothing, and a frame costs what moves.
//
// Pairs: the kind's pair search (what it holds: dynamic and pending static
// elements; pending static pairs dropped), the fat layer's pairs (its
// partner lists and searches; the kind's elements against it), and a join
// of the dynamic elements against the static layer, through each one's
// cache of the layer items around it (static_cache.h), kept by the calls
// that move it. Filters are tested before the callback; with none set and
// no static element the kind's search runs with the caller's callback, as
// before.
//
// Memory: the layer's next arrays are reserved ahead (in qg_set_static and
// qg_move, where an allocation may fail cleanly) so qg_cleanup rebuilds
// without allocating; they are given back when nothing is pending.
#ifndef QG_ENGINE_H
#define QG_ENGINE_H

#include "fat_layer.h"
#include "static_cache.h"

enum {
    QG_F_STATIC = 1, ///< static (in the kind: pending; with QG_F_LAYER: in the layer)
    QG_F_LAYER = 2,  ///< in the static layer; the slot's min_y holds its position
    QG_F_MOVED = 4,  ///< a pending static moved since the last qg_cleanup
    QG_F_REBORN = 8, ///< removed since the last qg_pair_events
    QG_F_FAT = 16,   ///< dynamic, in the fat layer (fat_layer.h), not in the kind
};

typedef struct qg_engine {
    /// The kind's table with the engine's move_one: index->klass points here
    /// while the engine exists, so the kinds' own move_one (kind.h) knows
    /// nothing of it and an index without the engine pays nothing.
    qg_kind_class table;
    const qg_kind_class *real; ///< the kind's own table
    uint8_t *flags; ///< per slot
    int32_t flags_cap;
    int32_t *dyn_pos; ///< per slot: position in dyn[] of a dynamic element
    int32_t dyn_pos_cap;
    qg_filter *filters; ///< per slot; NULL until a non-default filter is set
    int32_t filters_cap;
    int32_t nondefault; ///< live elements whose filter is not the default

    qg_handle *dyn; ///< the dynamic elements
    int32_t dyn_count, dyn_cap;
    /// dyn[i]'s layer items cache[i] and fat box fat[i], and bit i of
    /// stale: it left its fat box since the last qg_cleanup. Made by the
    /// first move after the layer has items (sized for what moves, not for
    /// a level made static one tile at a time), given back when no static
    /// element is left; NULL before (or when there was no memory for them:
    /// the join then searches the layer for every element).
    qg_static_cache *cache;
    int32_t cache_cap;
    qg_rect *fat;
    int32_t fat_cap;
    /// dyn[i]'s box: the kind's copy for an element in the kind (kept equal
    /// by every call that moves one), the only one for an element in the fat
    /// layer. With the caches.
    qg_rect *dbox;
    int32_t dbox_cap;
    qg_fat_layer fl; ///< its arrays with the caches
    /// For an element of the fat layer: its fat box there cut to its
    /// cache's fat box (a box inside both, maybe empty), its max side
    /// negated (qg_rect_inside_negated). The move of a layer element tests
    /// this one box, in a compact array, instead of both. With the caches.
    qg_rect *inner;
    int32_t inner_cap;
    uint64_t *stale;
    int32_t stale_cap; ///< words
    /// Bit i: cache[i] holds more items than fit (the join searches the
    /// layer for dyn[i]); as many words as stale. With stale, the join's
    /// one test an entry: a blank entry (not filled for the layer's
    /// generation) is always stale.
    uint64_t *full;
    int32_t full_cap;
    uint64_t *order;   ///< 2 * 64 * stale_cap: the refill's sort keys and scratch
    int32_t order_cap;
    bool any_stale;    ///< some bit of stale is set
    bool wide;         ///< the join may run its AVX2 form (qg_cpu_avx2)
    uint32_t frame;    ///< qg_cleanup calls (the caches measure motion per frame)
    uint32_t cache_gen; ///< the layer generation every entry was last refilled at

    int32_t pending;   ///< static elements in the kind
    qg_handle *pend;   ///< scratch for the handles a rebuild takes in
    int32_t pend_cap;
    qg_static_layer layer;

    uint64_t *prev; ///< the pairs at the last qg_pair_events, sorted (a << 32 | b)
    int32_t prev_count, prev_cap;
    int32_t reborn; ///< handles marked QG_F_REBORN (the next qg_pair_events clears them)
    bool events;  ///< qg_pair_events was called
    bool cleared; ///< qg_clear since the last qg_pair_events
} qg_engine;

/// Elements the engine holds outside the kind (its static and fat layers).
static inline int32_t qg_engine_held(const qg_index *index)
{
    return index->engine != NULL ? index->engine->layer.live + index->engine->fl.count : 0;
}
/// True when dead-looking slot h holds an element of a layer (static or fat).
static inline bool qg_engine_in_layer(const qg_index *index, qg_handle h)
{
    return index->engine != NULL && (index->engine->flags[h] & (QG_F_LAYER | QG_F_FAT)) != 0;
}
/// True when `h` is a live element, in the kind or in the static layer.
static inline bool qg_handle_live(const qg_index *index, qg_handle h)
{
    if (qg_slot_live(index, h))
        return true;
    return index->engine != NULL && h >= 0 && h < index->box_high &&
           (index->engine->flags[h] & (QG_F_LAYER | QG_F_FAT));
}

/// True when the engine holds elements the kind does not (the static and
/// fat layers): queries search them too.
static inline bool qg_engine_holds(const qg_index *index)
{
    return index->engine != NULL && (index->engine->layer.live > 0 || index->engine->fl.count > 0);
}

/// Live elements in all (the kind's and the layer's).
static inline int32_t qg_live_count(const qg_index *index)
{
    return index->count + qg_engine_held(index);
}

/// The box of live element h.
static inline qg_rect qg_element_box(const qg_index *index, qg_handle h)
{
    const qg_rect r = index->boxes[h];
    if (!isnan(r.min_x))
        return r;
    const qg_engine *e = index->engine;
    if (e->flags[h] & QG_F_FAT)
        return e->dbox[e->dyn_pos[h]];
    int32_t pos;
    memcpy(&pos, &r.min_y, sizeof pos);
    return e->layer.items[pos].box;
}

/* Hooks index.c calls when index->engine is not NULL. */

/// qg_move of a slot the kind does not hold (its min_x NaN): an element of
/// the fat or static layer, or a dead handle (QG_ERR_HANDLE; also with no
/// engine). Out of line, so the kind's path in qg_move keeps its shape
/// (`agents` measured it: a check ahead of it cost 2-5% there).
qg_status qg_engine_move(qg_index *index, qg_handle h, qg_rect box);
/// Where slot h sits for an undo: its static layer position (>= 0), -2 in
/// the fat layer, -1 in the kind.
static inline int32_t qg_engine_place(const qg_index *index, qg_handle h)
{
    if (qg_slot_live(index, h))
        return -1;
    if (!(index->engine->flags[h] & QG_F_LAYER))
        return -2;
    int32_t pos;
    memcpy(&pos, &index->boxes[h].min_y, sizeof pos);
    return pos;
}

/// Whether the engine holds the static cache (qg_engine_moved makes it at a
/// dynamic element's first move beside static ones).
static inline bool qg_engine_has_cache(const qg_index *index)
{
    return index->engine != NULL && index->engine->cache != NULL;
}
/// After an undone batch whose moves made the cache: gives it back, as the
/// engine was before (no fat layer element can exist without it).
void qg_engine_drop_cache(qg_index *index);
/// Reserves the per-slot arrays for `high` slots and the dynamic list for
/// `add` more elements, through `txn` (its own: the kind's txn may be full).
bool qg_engine_reserve_insert(qg_index *index, qg_txn *txn, int32_t high, int32_t add);
/// A new element on slot h went into the kind.
void qg_engine_inserted(qg_index *index, qg_handle h);
/// qg_remove of live h (the whole call: kind, layer, slot).
void qg_engine_remove(qg_index *index, qg_handle h);
/// qg_move of live h in the static layer (a fat layer element goes to
/// qg_engine_move_fat_slow).
qg_status qg_engine_move_layer(qg_index *index, qg_handle h, qg_rect box);
/// Undoes qg_engine_move_layer of h (its batch failed): h leaves the kind
/// and re-enters the layer at position pos (its tombstone) with box old.
void qg_engine_unmove(qg_index *index, qg_handle h, int32_t pos, qg_rect old);

/// Room, in txn, for k more static elements to leave the layer before the
/// next qg_cleanup (what qg_engine_move_layer reserves one at a time): a
/// batch reserves it first, so the moves take none, and a failed batch
/// rolls it back once its moves are undone (the room is only written at
/// qg_cleanup).
bool qg_engine_reserve_layer_moves(qg_index *index, qg_txn *txn, int32_t k);
/// Undoes a qg_move of h, which was in the fat layer with box `old` (its
/// batch failed): h is in the fat layer again, at `old`, whether its move
/// kept it there or took it to the kind. No allocation.
void qg_engine_unmove_fat(qg_index *index, qg_handle h, qg_rect old);
/// Makes the dynamic elements' caches of static items (static_cache.h);
/// without memory for them, nothing changes.
void qg_engine_make_cache(qg_index *index);
/// The inner box position p's fat boxes give (the layer's cut to its
/// cache's, the max side negated).
static inline qg_rect qg_engine_inner_of(const qg_engine *e, int32_t p)
{
    const qg_rect a = e->fl.entry[p].fat, b = e->fat[p];
    return (qg_rect){a.min_x > b.min_x ? a.min_x : b.min_x, a.min_y > b.min_y ? a.min_y : b.min_y,
                     -(a.max_x < b.max_x ? a.max_x : b.max_x), -(a.max_y < b.max_y ? a.max_y : b.max_y)};
}
/// Makes position p's inner box again (after its fat box in the layer or
/// its cache's changed).
static inline void qg_engine_inner(qg_engine *e, int32_t p)
{
    e->inner[p] = qg_engine_inner_of(e, p);
}
/// Position p's cache is to be refilled at the next qg_cleanup.
static inline void qg_engine_mark_stale(qg_engine *e, int32_t p)
{
    e->stale[p >> 6] |= (uint64_t)1 << (p & 63);
    e->any_stale = true;
}
/// qg_move of h in the fat layer, other than its fast case (qg_move: a box
/// inside its fat box, with static elements left): one that leaves its fat
/// box is filed anew (qg_fat_refit); with no static element left, it goes
/// back to the kind (staying here, as exact, when there is no memory).
qg_status qg_engine_move_fat_slow(qg_index *index, qg_handle h, qg_rect box);
/// After the kind moved h to `box` (now index->boxes[h]; passed rather than
/// read back: the kind has just stored it, often as two 8-byte halves, and
/// a 16-byte load of them stalls until both stores are done).
static inline void qg_engine_moved(qg_index *index, qg_handle h, qg_rect box)
{
    qg_engine *e = index->engine;
    if (e->flags[h] & QG_F_STATIC)
        e->flags[h] |= QG_F_MOVED;
    else if (e->cache != NULL) {
        const int32_t p = e->dyn_pos[h];
        qg_rect_store(&e->dbox[p], box);
        if (qg_cache_left(e->fat[p], box))
            qg_engine_mark_stale(e, p);
    } else if (e->layer.live > 0) {
        qg_engine_make_cache(index);
    }
}
/// After the kind's qg_move_many moved these dynamic elements.
void qg_engine_moved_many(qg_index *index, const qg_jobs *jobs, const qg_handle *handles, int32_t n);
/// True when some handle of the batch is static or in the fat layer (the
/// batch then runs one move at a time through qg_move's path).
bool qg_engine_any_static(const qg_index *index, const qg_handle *handles, int32_t n);
/// True when every handle of the batch is in the fat layer (and the index
/// has static elements): qg_engine_move_many_fat runs it.
bool qg_engine_all_fat(const qg_index *index, const qg_handle *handles, int32_t n);
/// qg_move_many of checked moves of fat layer elements: the moves that stay
/// inside their fat boxes on the workers, the others after, on this thread.
/// QG_ERR_NOMEM (its scratch) changes nothing.
qg_status qg_engine_move_many_fat(qg_index *index, const qg_jobs *jobs, const qg_handle *handles,
                                  const qg_rect *boxes, int32_t n);
void qg_engine_cleanup(qg_index *index, const qg_jobs *jobs);
void qg_engine_clear(qg_index *index);
void qg_engine_destroy(qg_index *index);
/// Pair search part `part` of `parts` (serial: 0 of 1).
void qg_engine_pairs_part(const qg_index *index, int32_t part, int32_t parts, qg_pair_fn *fn, void *user,
                          qg_query_stats *stats);
/// The layer's share of a query; false when fn stopped it.
bool qg_engine_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user, qg_query_stats *stats);
/// Adds the engine's bytes and checks its invariants.
qg_status qg_engine_validate(const qg_index *index, size_t *bytes);
struct qg_state;
/// The engine's part of the state walk (state.h): present or not, and every
/// field, array and layer it holds.
void qg_engine_state(struct qg_state *s, qg_index *d, const qg_index *src);
void qg_engine_stats(const qg_index *index, qg_stats *stats);
void qg_engine_visit(const qg_index *index, qg_visit_fn *fn, void *user);

/* Shared by the engine's files (engine.c, events.c, inspect.c). */

/// The default filter: category 1, every mask bit.
static inline bool qg_filter_is_default(qg_filter f)
{
    return f.category == 1u && f.mask == 0xFFFFFFFFu;
}

/// A static layer element's position in the layer (kept in its slot's min_y).
static inline int32_t qg_engine_layer_pos(const qg_index *index, qg_handle h)
{
    int32_t pos;
    memcpy(&pos, &index->boxes[h].min_y, sizeof pos);
    return pos;
}

/// The engine, made on first use (and the kind's table swapped for its
/// own); NULL on a failed allocation, with nothing changed.
qg_engine *qg_engine_get(qg_index *index);
/// Points the engine at `real`, the kind's own table, and makes its table
/// (index->klass while the engine exists): `real` with the engine's move_one.
void qg_engine_set_table(qg_engine *e, const qg_kind_class *real);
/// Undoes qg_engine_get when the call that made the engine (`created`)
/// fails after it.
void qg_engine_drop_if_new(qg_index *index, bool created);
/// LSD radix sort of keys[0..n) by bits [lo_bit, 64), 8 bits a pass;
/// sorted keys end in keys (scratch: n more).
void qg_engine_radix_sort(uint64_t *keys, uint64_t *scratch, int32_t n, int lo_bit);

#endif
