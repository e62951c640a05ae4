// SPDX-License-Identifier: MIT
// The engine's invariants and bytes, and its stats (qg_validate,
// qg_get_stats).
#include "engine.h"

qg_status qg_engine_validate(const qg_index *index, size_t *bytes)
{
    const qg_engine *e = index->engine;
    *bytes += sizeof *e + (size_t)e->flags_cap + (size_t)e->dyn_pos_cap * sizeof(int32_t) +
              (size_t)e->filters_cap * sizeof(qg_filter) + (size_t)e->dyn_cap * sizeof(qg_handle) +
              (size_t)e->cache_cap * sizeof(qg_static_cache) + (size_t)e->fat_cap * sizeof(qg_rect) +
              (size_t)e->inner_cap * sizeof(qg_rect) +
              (size_t)e->dbox_cap * sizeof(qg_rect) + (size_t)e->fl.entry_cap * sizeof(qg_fat_entry) +
              (size_t)e->fl.busy_cap +
              (size_t)e->fl.heads_cap * sizeof(int32_t) +
              (size_t)e->stale_cap * sizeof(uint64_t) + (size_t)e->full_cap * sizeof(uint64_t) +
              (size_t)e->order_cap * sizeof(uint64_t) +
              (size_t)e->pend_cap * sizeof(qg_handle) +
              (size_t)e->prev_cap * sizeof(uint64_t);
    if (!qg_static_validate(&e->layer, bytes))
        return QG_ERR_INVALID;
    if (e->flags_cap < index->box_high || e->dyn_pos_cap < index->box_high ||
        (e->filters != NULL && e->filters_cap < index->box_high) || e->dyn_count > e->dyn_cap ||
        (e->cache != NULL && (e->cache_cap < e->dyn_count || e->fat_cap < e->dyn_count ||
                              e->inner_cap < e->dyn_count ||
                              e->dbox_cap < e->dyn_count || e->fl.entry_cap < e->dyn_count ||
                              e->fl.busy_cap < e->dyn_count + 16 ||
                              e->fl.heads_cap < (int64_t)QG_FAT_BUCKETS * e->dyn_count ||
                              (int64_t)e->stale_cap * 64 < e->dyn_count ||
                              (int64_t)e->full_cap * 64 < e->dyn_count ||
                              e->order_cap < 128 * (((int64_t)e->dyn_count + 63) / 64))))
        return QG_ERR_INVALID;
    for (int32_t i = 0; e->cache != NULL && i < e->dyn_count; ++i) {
        const qg_static_cache *c = &e->cache[i];
        if (c->handle != e->dyn[i] || !qg_cache_valid(&e->layer, c, e->fat[i], e->flags))
            return QG_ERR_INVALID;
        // A layer element's move tests its inner box alone.
        if (e->fl.entry[i].in) {
            const qg_rect want = qg_engine_inner_of(e, i);
            if (memcmp(&want, &e->inner[i], sizeof want) != 0)
                return QG_ERR_INVALID;
        }
        // The join tests the bits, not the entry: full is the entry's count,
        // and once every entry was filled for the layer's generation, one
        // filled for another (a blank one) is stale.
        // The join trusts a filled entry that is not stale to be inside its
        // fat box.
        const bool stale = e->stale[i >> 6] >> (i & 63) & 1;
        if ((bool)(e->full[i >> 6] >> (i & 63) & 1) != (c->count > QG_CACHE_ITEMS) ||
            (e->cache_gen == e->layer.gen && c->gen != e->layer.gen && !stale) ||
            (c->gen == e->layer.gen && !stale && qg_cache_left(e->fat[i], e->dbox[i])))
            return QG_ERR_INVALID;
        // An element in the kind: its box here is the kind's.
        if (!(e->flags[e->dyn[i]] & QG_F_FAT) && memcmp(&e->dbox[i], &index->boxes[e->dyn[i]], sizeof(qg_rect)) != 0)
            return QG_ERR_INVALID;
    }
    if (e->cache == NULL ? e->fl.count != 0 : !qg_fat_validate(e))
        return QG_ERR_INVALID;
    if (e->pending > 0 && (e->pend_cap < e->pending || e->layer.next_items_cap < e->layer.live + e->pending))
        return QG_ERR_INVALID;
    int32_t pending = 0, layer = 0, dyn = 0, nondefault = 0;
    for (qg_handle h = 0; h < index->box_high; ++h) {
        const uint8_t f = e->flags[h];
        const bool in_kind = qg_slot_live(index, h);
        if (f & QG_F_FAT) {
            const int32_t p = e->dyn_pos[h];
            if (in_kind || (f & (QG_F_STATIC | QG_F_LAYER | QG_F_MOVED)) || p < 0 || p >= e->dyn_count ||
                e->dyn[p] != h)
                return QG_ERR_INVALID;
            dyn++;
        } else if (in_kind) {
            if (f & QG_F_LAYER)
                return QG_ERR_INVALID;
            if (f & QG_F_STATIC) {
                pending++;
            } else {
                const int32_t p = e->dyn_pos[h];
                if (p < 0 || p >= e->dyn_count || e->dyn[p] != h)
                    return QG_ERR_INVALID;
                dyn++;
            }
        } else if (f & QG_F_LAYER) {
            const int32_t p = qg_engine_layer_pos(index, h);
            if (!(f & QG_F_STATIC) || p < 0 || p >= e->layer.item_count || e->layer.items[p].handle != h ||
                isnan(e->layer.items[p].box.min_x))
                return QG_ERR_INVALID;
            layer++;
        } else if (f & (QG_F_STATIC | QG_F_MOVED)) {
            return QG_ERR_INVALID;
        }
        if (e->filters != NULL && !qg_filter_is_default(e->filters[h])) {
            if (!in_kind && !(f & (QG_F_LAYER | QG_F_FAT)))
                return QG_ERR_INVALID; // a free slot keeps no filter
            nondefault++;
        }
    }
    if (pending != e->pending || layer != e->layer.live || dyn != e->dyn_count || nondefault != e->nondefault)
        return QG_ERR_INVALID;
    // Slots past the high-water mark are what the next inserts take as
    // they are: no flag, the default filter (a snapshot carries them).
    for (qg_handle h = index->box_high; h < e->flags_cap; ++h)
        if (e->flags[h] != 0)
            return QG_ERR_INVALID;
    for (qg_handle h = index->box_high; e->filters != NULL && h < e->filters_cap; ++h)
        if (!qg_filter_is_default(e->filters[h]))
            return QG_ERR_INVALID;
    for (int32_t i = 1; i < e->prev_count; ++i)
        if (e->prev[i - 1] >= e->prev[i])
            return QG_ERR_INVALID;
    return QG_OK;
}

void qg_engine_stats(const qg_index *index, qg_stats *stats)
{
    const qg_engine *e = index->engine;
    stats->elements += e->layer.live + e->fl.count;
    stats->nodes += e->layer.levels;
    stats->leaves += e->layer.levels;
}

