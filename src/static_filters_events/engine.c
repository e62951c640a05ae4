// SPDX-License-Identifier: MIT
// Static elements, collision filters and overlap events (see engine.h for
// where elements live and why).
#include "engine.h"
#include "../tune.h" // the kind's own table, under a re-tune's copy

static const qg_filter default_filter = {1u, 0xFFFFFFFFu};

qg_filter qg_default_filter(void)
{
    return default_filter;
}


static bool filters_pass(qg_filter a, qg_filter b)
{
    return (a.category & b.mask) != 0 && (b.category & a.mask) != 0;
}

/* ---- arrays ------------------------------------------------------------- */

static bool reserve_flags(qg_engine *e, qg_txn *txn, int64_t high)
{
    const int32_t old = e->flags_cap;
    if (!qg_txn_reserve(txn, (void **)&e->flags, &e->flags_cap, 1, high))
        return false;
    memset(e->flags + old, 0, (size_t)(e->flags_cap - old));
    return true;
}

static bool reserve_filters(qg_engine *e, qg_txn *txn, int64_t high)
{
    const int32_t old = e->filters_cap;
    if (!qg_txn_reserve(txn, (void **)&e->filters, &e->filters_cap, sizeof(qg_filter), high))
        return false;
    for (int32_t i = old; i < e->filters_cap; ++i)
        e->filters[i] = default_filter;
    return true;
}

/// Sets bit p of `full` to `on`.
static inline void mark_full(qg_engine *e, int32_t p, bool on)
{
    const uint64_t bit = (uint64_t)1 << (p & 63);
    e->full[p >> 6] = on ? e->full[p >> 6] | bit : e->full[p >> 6] & ~bit;
}

/// Bit `to` of bitmap w becomes bit `from`, which is cleared.
static inline void move_bit(uint64_t *w, int32_t from, int32_t to)
{
    const uint64_t bit = w[from >> 6] >> (from & 63) & 1;
    w[from >> 6] &= ~((uint64_t)1 << (from & 63));
    w[to >> 6] = (w[to >> 6] & ~((uint64_t)1 << (to & 63))) | bit << (to & 63);
}

static bool reserve_cache(qg_engine *e, qg_txn *txn, int64_t n)
{
    if (n < 1)
        n = 1;
    const int32_t old_words = e->stale_cap, old_full = e->full_cap, old_busy = e->fl.busy_cap;
    if (!(qg_txn_reserve(txn, (void **)&e->cache, &e->cache_cap, sizeof(qg_static_cache), n) &&
          qg_txn_reserve(txn, (void **)&e->fat, &e->fat_cap, sizeof(qg_rect), n) &&
          qg_txn_reserve(txn, (void **)&e->inner, &e->inner_cap, sizeof(qg_rect), n) &&
          qg_txn_reserve(txn, (void **)&e->dbox, &e->dbox_cap, sizeof(qg_rect), n) &&
          qg_txn_reserve(txn, (void **)&e->fl.entry, &e->fl.entry_cap, sizeof(qg_fat_entry), n) &&
          qg_txn_reserve(txn, (void **)&e->fl.busy, &e->fl.busy_cap, 1, n + 16) &&
          qg_txn_reserve(txn, (void **)&e->fl.heads, &e->fl.heads_cap, sizeof(int32_t), QG_FAT_BUCKETS * n) &&
          qg_txn_reserve(txn, (void **)&e->stale, &e->stale_cap, sizeof(uint64_t), (n + 63) / 64) &&
          qg_txn_reserve(txn, (void **)&e->full, &e->full_cap, sizeof(uint64_t), (n + 63) / 64) &&
          qg_txn_reserve(txn, (void **)&e->order, &e->order_cap, sizeof(uint64_t), 128 * ((n + 63) / 64))))
        return false;
    memset(e->stale + old_words, 0, (size_t)(e->stale_cap - old_words) * sizeof(uint64_t));
    memset(e->full + old_full, 0, (size_t)(e->full_cap - old_full) * sizeof(uint64_t));
    memset(e->fl.busy + old_busy, 0, (size_t)(e->fl.busy_cap - old_busy));
    return true;
}

static bool reserve_dyn(qg_engine *e, qg_txn *txn, int64_t n)
{
    return qg_txn_reserve(txn, (void **)&e->dyn, &e->dyn_cap, sizeof(qg_handle), n) &&
           (e->cache == NULL || reserve_cache(e, txn, n));
}

bool qg_engine_reserve_insert(qg_index *index, qg_txn *txn, int32_t high, int32_t add)
{
    qg_engine *e = index->engine;
    return reserve_flags(e, txn, high) &&
           qg_txn_reserve(txn, (void **)&e->dyn_pos, &e->dyn_pos_cap, sizeof(int32_t), high) &&
           (e->filters == NULL || reserve_filters(e, txn, high)) && reserve_dyn(e, txn, (int64_t)e->dyn_count + add);
}

/// Room for a rebuild of `total` items with `pending` handles taken in, in
/// both the current and the next arrays (after a rebuild they swap, and a
/// later one must find room without allocating).
static bool reserve_rebuild(qg_index *index, qg_txn *txn, int64_t total, int64_t pending)
{
    qg_engine *e = index->engine;
    qg_static_layer *l = &e->layer;
    const int64_t starts = qg_static_start_bound(total);
    return qg_txn_reserve(txn, (void **)&l->items, &l->item_cap, sizeof(qg_static_item), total) &&
           qg_txn_reserve(txn, (void **)&l->next_items, &l->next_items_cap, sizeof(qg_static_item), total) &&
           qg_txn_reserve(txn, (void **)&l->start, &l->start_cap, sizeof(int32_t), starts) &&
           qg_txn_reserve(txn, (void **)&l->next_start, &l->next_start_cap, sizeof(int32_t), starts) &&
           qg_txn_reserve(txn, (void **)&e->pend, &e->pend_cap, sizeof(qg_handle), pending);
}

bool qg_engine_reserve_layer_moves(qg_index *index, qg_txn *txn, int32_t k)
{
    const qg_engine *e = index->engine;
    return reserve_rebuild(index, txn, (int64_t)e->layer.live + e->pending, (int64_t)e->pending + k);
}

void qg_engine_make_cache(qg_index *index)
{
    qg_engine *e = index->engine;
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    if (!reserve_cache(e, &txn, e->dyn_count)) {
        qg_txn_rollback(&txn);
        return;
    }
    // Blank entries; the next qg_cleanup fills them all (a new generation),
    // in cell order with the layer fetched ahead.
    qg_fat_reset(&e->fl);
    for (int32_t i = 0; i < e->dyn_count; ++i) {
        qg_cache_blank(&e->cache[i], &e->fat[i], e->dyn[i], index->boxes[e->dyn[i]]);
        e->dbox[i] = index->boxes[e->dyn[i]];
        qg_fat_out(&e->fl, i);
        qg_engine_mark_stale(e, i); // blank: the join searches the layer
        mark_full(e, i, true);
    }
    memset(e->fl.busy + e->dyn_count, 0, (size_t)(e->fl.busy_cap - e->dyn_count));
    e->cache_gen = 0;
}

/// Nothing pending: the rebuild's spare arrays go back to the allocator.
static void release_rebuild(qg_index *index)
{
    qg_engine *e = index->engine;
    qg_static_layer *l = &e->layer;
    qg_array_free(&index->alloc, (void **)&l->next_items, &l->next_items_cap, sizeof(qg_static_item));
    qg_array_free(&index->alloc, (void **)&l->next_start, &l->next_start_cap, sizeof(int32_t));
    qg_array_free(&index->alloc, (void **)&e->pend, &e->pend_cap, sizeof(qg_handle));
}

/// h (its box in index->boxes) joins the dynamic elements; its cache is
/// blank and stale (filled by the next qg_cleanup's refill, with the others).
static void dyn_put(qg_index *index, qg_handle h)
{
    qg_engine *e = index->engine;
    const int32_t p = e->dyn_count++;
    e->dyn_pos[h] = p;
    e->dyn[p] = h;
    if (e->cache != NULL) {
        qg_cache_blank(&e->cache[p], &e->fat[p], h, index->boxes[h]);
        e->dbox[p] = index->boxes[h];
        qg_fat_out(&e->fl, p); // enters the fat layer at the next qg_cleanup
        qg_engine_mark_stale(e, p);
        mark_full(e, p, true);
    }
}

static void dyn_take(qg_engine *e, qg_handle h)
{
    const int32_t pos = e->dyn_pos[h];
    const qg_handle last = e->dyn[--e->dyn_count];
    e->dyn[pos] = last;
    e->dyn_pos[last] = pos;
    if (e->cache != NULL) {
        const int32_t last_pos = e->dyn_count;
        e->cache[pos] = e->cache[last_pos];
        e->fat[pos] = e->fat[last_pos];
        e->inner[pos] = e->inner[last_pos];
        e->dbox[pos] = e->dbox[last_pos];
        qg_fat_moved_pos(e, last_pos, pos);
        e->fl.busy[last_pos] = 0;
        move_bit(e->stale, last_pos, pos);
        move_bit(e->full, last_pos, pos);
    }
}

/// Gives back what an array holds beyond `target` elements, when the
/// allocator can (keeping it as it is otherwise: nothing depends on it).
static void shrink_array(qg_alloc *a, void **data, int32_t *cap, size_t elem, int64_t target)
{
    if (*cap <= target)
        return;
    void *p = qg_mem_resize(a, *data, (size_t)*cap * elem, (size_t)target * elem);
    if (p != NULL) {
        *data = p;
        *cap = (int32_t)target;
    }
}

/// The caches are sized for the dynamic elements there are when they are
/// made; when many of those become static later, past four times what the
/// dynamic elements need they shrink to twice (so a run of qg_set_static
/// calls copies them a few times in all, not once a call).
static void shrink_cache(qg_engine *e, qg_alloc *a)
{
    const int64_t need = (int64_t)e->dyn_count + 64;
    if (e->cache == NULL || e->cache_cap <= 4 * need)
        return;
    const int64_t target = 2 * need, words = (target + 63) / 64;
    shrink_array(a, (void **)&e->cache, &e->cache_cap, sizeof(qg_static_cache), target);
    shrink_array(a, (void **)&e->fat, &e->fat_cap, sizeof(qg_rect), target);
    shrink_array(a, (void **)&e->inner, &e->inner_cap, sizeof(qg_rect), target);
    shrink_array(a, (void **)&e->dbox, &e->dbox_cap, sizeof(qg_rect), target);
    shrink_array(a, (void **)&e->fl.entry, &e->fl.entry_cap, sizeof(qg_fat_entry), target);
    shrink_array(a, (void **)&e->fl.busy, &e->fl.busy_cap, 1, target + 16);
    shrink_array(a, (void **)&e->fl.heads, &e->fl.heads_cap, sizeof(int32_t), QG_FAT_BUCKETS * target);
    if (e->fl.built && (int64_t)e->fl.mask + 1 > e->fl.heads_cap)
        qg_fat_layout(e); // fewer buckets: filed again
    shrink_array(a, (void **)&e->stale, &e->stale_cap, sizeof(uint64_t), words);
    shrink_array(a, (void **)&e->full, &e->full_cap, sizeof(uint64_t), words);
    shrink_array(a, (void **)&e->order, &e->order_cap, sizeof(uint64_t), 128 * words);
}

/// No static element left: the caches go back to the allocator.
static void release_cache(qg_engine *e, qg_alloc *a)
{
    qg_array_free(a, (void **)&e->cache, &e->cache_cap, sizeof(qg_static_cache));
    qg_array_free(a, (void **)&e->fat, &e->fat_cap, sizeof(qg_rect));
    qg_array_free(a, (void **)&e->inner, &e->inner_cap, sizeof(qg_rect));
    qg_array_free(a, (void **)&e->dbox, &e->dbox_cap, sizeof(qg_rect));
    qg_array_free(a, (void **)&e->fl.entry, &e->fl.entry_cap, sizeof(qg_fat_entry));
    qg_array_free(a, (void **)&e->fl.busy, &e->fl.busy_cap, 1);
    qg_array_free(a, (void **)&e->fl.heads, &e->fl.heads_cap, sizeof(int32_t));
    qg_fat_reset(&e->fl);
    qg_array_free(a, (void **)&e->stale, &e->stale_cap, sizeof(uint64_t));
    qg_array_free(a, (void **)&e->full, &e->full_cap, sizeof(uint64_t));
    qg_array_free(a, (void **)&e->order, &e->order_cap, sizeof(uint64_t));
    e->any_stale = false;
    e->cache_gen = 0;
}

void qg_engine_drop_cache(qg_index *index)
{
    release_cache(index->engine, &index->alloc);
}


/* ---- life --------------------------------------------------------------- */

void qg_engine_destroy(qg_index *index)
{
    qg_engine *e = index->engine;
    if (e == NULL)
        return;
    qg_alloc *a = &index->alloc;
    qg_array_free(a, (void **)&e->flags, &e->flags_cap, 1);
    qg_array_free(a, (void **)&e->dyn_pos, &e->dyn_pos_cap, sizeof(int32_t));
    qg_array_free(a, (void **)&e->filters, &e->filters_cap, sizeof(qg_filter));
    qg_array_free(a, (void **)&e->dyn, &e->dyn_cap, sizeof(qg_handle));
    release_cache(e, a);
    qg_array_free(a, (void **)&e->pend, &e->pend_cap, sizeof(qg_handle));
    qg_array_free(a, (void **)&e->prev, &e->prev_cap, sizeof(uint64_t));
    qg_static_free(a, &e->layer);
    index->klass = e->real;
    qg_mem_free(a, e, sizeof *e);
    index->engine = NULL;
}

/// qg_move of an element the kind holds, while the engine exists: the
/// kind's move_one and then the engine's hook. The one indirect call on
/// this path (the kind's move through its table) is the price of keeping
/// the engine out of the kinds.
static qg_status engine_move_one(qg_index *index, qg_handle h, qg_rect box)
{
    const qg_status s = index->engine->real->move_one(index, h, box);
    if (s == QG_OK)
        qg_engine_moved(index, h, box);
    return s;
}

void qg_engine_set_table(qg_engine *e, const qg_kind_class *real)
{
    e->real = real;
    e->table = *real;
    e->table.move_one = engine_move_one;
}

/// (engine.h) The engine, made on first use: every live element (all in the kind,
/// all dynamic) goes on the dynamic list. NULL on a failed allocation, with
/// nothing changed.
qg_engine *qg_engine_get(qg_index *index)
{
    if (index->engine != NULL)
        return index->engine;
    qg_engine *e = qg_mem_alloc(&index->alloc, sizeof *e);
    if (e == NULL)
        return NULL;
    memset(e, 0, sizeof *e);
    e->wide = qg_cpu_avx2();
    // The kind's own table, not a re-tune pending: none runs beside the
    // engine's layers (tune.h).
    qg_engine_set_table(e, qg_tune_real(index));
    index->engine = e;
    index->klass = &e->table;
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    if (!qg_engine_reserve_insert(index, &txn, index->box_high > 0 ? index->box_high : 1,
                                  index->count > 0 ? index->count : 1)) {
        qg_txn_rollback(&txn);
        qg_engine_destroy(index);
        return NULL;
    }
    for (qg_handle h = 0; h < index->box_high; ++h)
        if (qg_slot_live(index, h))
            dyn_put(index, h);
    return e;
}

/// Undoes engine_get when the call that made the engine fails after it.
void qg_engine_drop_if_new(qg_index *index, bool created)
{
    if (created)
        qg_engine_destroy(index);
}

void qg_engine_inserted(qg_index *index, qg_handle h)
{
    qg_engine *e = index->engine;
    e->flags[h] &= QG_F_REBORN;
    dyn_put(index, h);
}

void qg_engine_remove(qg_index *index, qg_handle h)
{
    qg_engine *e = index->engine;
    const uint8_t f = e->flags[h];
    if (f & QG_F_LAYER) {
        qg_static_kill(&e->layer, qg_engine_layer_pos(index, h));
    } else if (f & QG_F_FAT) {
        qg_fat_leave(e, e->dyn_pos[h]);
        dyn_take(e, h);
    } else {
        index->klass->remove(index, h);
        index->count--;
        if (f & QG_F_STATIC)
            e->pending--;
        else
            dyn_take(e, h);
    }
    if (e->filters != NULL && !qg_filter_is_default(e->filters[h])) {
        e->filters[h] = default_filter;
        e->nondefault--;
    }
    e->reborn += e->events && !(e->flags[h] & QG_F_REBORN);
    e->flags[h] = e->events ? QG_F_REBORN : 0;
}

/// Inserts into the kind element h, which one of the engine's layers holds,
/// with box `box`; on a failure (QG_ERR_NOMEM) nothing has changed.
static qg_status kind_take(qg_index *index, qg_handle h, qg_rect box)
{
    const qg_rect saved = index->boxes[h];
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    index->boxes[h] = box;
    const qg_status s = index->klass->insert(index, &txn, h, box);
    if (s != QG_OK) {
        index->boxes[h] = saved;
        qg_txn_rollback(&txn);
    }
    return s;
}

/// Puts layer element h back into the kind with box `box`; the caller has
/// reserved what it needs besides the kind's own growth.
static qg_status layer_to_kind(qg_index *index, qg_handle h, qg_rect box)
{
    qg_engine *e = index->engine;
    const int32_t pos = qg_engine_layer_pos(index, h);
    const qg_status s = kind_take(index, h, box);
    if (s != QG_OK)
        return s;
    qg_static_kill(&e->layer, pos);
    e->flags[h] &= (uint8_t)~QG_F_LAYER;
    index->count++;
    return QG_OK;
}

/// Puts fat layer element h back into the kind with box `box`.
static qg_status fat_to_kind(qg_index *index, qg_handle h, qg_rect box)
{
    qg_engine *e = index->engine;
    const int32_t p = e->dyn_pos[h];
    const qg_status s = kind_take(index, h, box);
    if (s != QG_OK)
        return s;
    qg_fat_leave(e, p);
    e->flags[h] &= (uint8_t)~QG_F_FAT;
    qg_rect_store(&e->dbox[p], box);
    if (qg_cache_left(e->fat[p], box))
        qg_engine_mark_stale(e, p);
    index->count++;
    return QG_OK;
}

// Out of line: inlined into qg_engine_move (clang does), its calls make the
// fast path there save four registers and set up a frame on every move.
QG_NOINLINE qg_status qg_engine_move_fat_slow(qg_index *index, qg_handle h, qg_rect box)
{
    qg_engine *e = index->engine;
    if (((e->layer.live == 0 && e->pending == 0) || e->fl.off) && fat_to_kind(index, h, box) == QG_OK)
        return QG_OK;
    const int32_t p = e->dyn_pos[h];
    const qg_rect old = e->dbox[p];
    qg_rect_store(&e->dbox[p], box);
    if (!qg_rect_inside(box, e->fl.entry[p].fat))
        qg_fat_refit(e, p, old);
    if (qg_cache_left(e->fat[p], box))
        qg_engine_mark_stale(e, p);
    return QG_OK;
}

qg_status qg_engine_move_layer(qg_index *index, qg_handle h, qg_rect box)
{
    qg_engine *e = index->engine;
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    // It comes back to the layer at a later qg_cleanup: room for that now.
    if (!reserve_rebuild(index, &txn, (int64_t)e->layer.live + e->pending, (int64_t)e->pending + 1))
        return qg_txn_rollback(&txn), QG_ERR_NOMEM;
    const qg_status s = layer_to_kind(index, h, box);
    if (s != QG_OK) {
        qg_txn_rollback(&txn);
        return s;
    }
    e->flags[h] |= QG_F_STATIC | QG_F_MOVED;
    e->pending++;
    return QG_OK;
}

void qg_engine_unmove(qg_index *index, qg_handle h, int32_t pos, qg_rect old)
{
    qg_engine *e = index->engine;
    qg_static_layer *l = &e->layer;
    index->klass->remove(index, h);
    index->count--;
    qg_static_revive(l, pos, old);
    qg_rect *slot = &index->boxes[h];
    slot->min_x = NAN;
    memcpy(&slot->min_y, &pos, sizeof pos);
    e->flags[h] = (uint8_t)((e->flags[h] & QG_F_REBORN) | QG_F_STATIC | QG_F_LAYER);
    e->pending--;
}

void qg_engine_unmove_fat(qg_index *index, qg_handle h, qg_rect old)
{
    qg_engine *e = index->engine;
    const int32_t p = e->dyn_pos[h];
    if (e->flags[h] & QG_F_FAT) {
        (void)qg_engine_move_fat_slow(index, h, old); // stays in the layer: no allocation
        if (!(e->flags[h] & QG_F_FAT))
            qg_engine_unmove_fat(index, h, old); // it went to the kind just now
        return;
    }
    index->klass->remove(index, h);
    index->count--;
    index->boxes[h].min_x = NAN;
    e->flags[h] |= QG_F_FAT;
    qg_rect_store(&e->dbox[p], old);
    if (qg_cache_left(e->fat[p], old))
        qg_engine_mark_stale(e, p);
    qg_fat_admit(e, p);
}

bool qg_engine_any_static(const qg_index *index, const qg_handle *handles, int32_t n)
{
    const uint8_t *flags = index->engine->flags;
    for (int32_t i = 0; i < n; ++i)
        if (flags[handles[i]] & (QG_F_STATIC | QG_F_FAT))
            return true;
    return false;
}

/* ---- public calls ------------------------------------------------------- */

qg_status qg_set_static(qg_index *index, qg_handle handle, bool is_static)
{
    if (index == NULL)
        return QG_ERR_INVALID;
    if (!qg_handle_live(index, handle))
        return QG_ERR_HANDLE;
    const bool created = index->engine == NULL;
    if (created && !is_static)
        return QG_OK;
    qg_engine *e = qg_engine_get(index);
    if (e == NULL)
        return QG_ERR_NOMEM;
    const uint8_t f = e->flags[handle];
    if (is_static == ((f & QG_F_STATIC) != 0))
        return QG_OK;
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    if (is_static) {
        if (!reserve_rebuild(index, &txn, (int64_t)e->layer.live + e->pending + 1, (int64_t)e->pending + 1)) {
            qg_txn_rollback(&txn);
            qg_engine_drop_if_new(index, created);
            return QG_ERR_NOMEM;
        }
        if (f & QG_F_FAT) {
            // A pending static waits in the kind.
            const qg_status s = fat_to_kind(index, handle, qg_element_box(index, handle));
            if (s != QG_OK) {
                qg_txn_rollback(&txn);
                return s;
            }
        }
        dyn_take(e, handle);
        e->flags[handle] = (uint8_t)((f & ~QG_F_FAT) | QG_F_STATIC);
        e->pending++;
        shrink_cache(e, &index->alloc);
        return QG_OK;
    }
    if (!reserve_dyn(e, &txn, (int64_t)e->dyn_count + 1))
        return qg_txn_rollback(&txn), QG_ERR_NOMEM;
    if (f & QG_F_LAYER) {
        const qg_status s = layer_to_kind(index, handle, qg_element_box(index, handle));
        if (s != QG_OK) {
            qg_txn_rollback(&txn);
            return s;
        }
    } else {
        e->pending--;
    }
    e->flags[handle] &= QG_F_REBORN;
    dyn_put(index, handle);
    return QG_OK;
}

bool qg_is_static(const qg_index *index, qg_handle handle)
{
    return index != NULL && index->engine != NULL && qg_handle_live(index, handle) &&
           (index->engine->flags[handle] & QG_F_STATIC) != 0;
}

qg_status qg_set_filter(qg_index *index, qg_handle handle, qg_filter filter)
{
    if (index == NULL)
        return QG_ERR_INVALID;
    if (!qg_handle_live(index, handle))
        return QG_ERR_HANDLE;
    const bool is_default = qg_filter_is_default(filter);
    if ((index->engine == NULL || index->engine->filters == NULL) && is_default)
        return QG_OK;
    const bool created = index->engine == NULL;
    qg_engine *e = qg_engine_get(index);
    if (e == NULL)
        return QG_ERR_NOMEM;
    if (e->filters == NULL) {
        qg_txn txn;
        qg_txn_begin(&txn, &index->alloc);
        if (!reserve_filters(e, &txn, e->flags_cap)) {
            qg_txn_rollback(&txn);
            qg_engine_drop_if_new(index, created);
            return QG_ERR_NOMEM;
        }
    }
    e->nondefault += (int32_t)!is_default - (int32_t)!qg_filter_is_default(e->filters[handle]);
    e->filters[handle] = filter;
    return QG_OK;
}

qg_status qg_get_filter(const qg_index *index, qg_handle handle, qg_filter *filter)
{
    if (index == NULL || filter == NULL)
        return QG_ERR_INVALID;
    if (!qg_handle_live(index, handle))
        return QG_ERR_HANDLE;
    *filter = index->engine != NULL && index->engine->filters != NULL ? index->engine->filters[handle]
                                                                       : default_filter;
    return QG_OK;
}

/* ---- upkeep ------------------------------------------------------------- */

/// LSD radix sort of keys[0..n) by bits [lo_bit, 64), 8 bits a pass, a
/// pass skipped when every key has the same digit. Sorted keys end in keys.
void qg_engine_radix_sort(uint64_t *keys, uint64_t *scratch, int32_t n, int lo_bit)
{
    uint64_t *from = keys, *to = scratch;
    for (int shift = lo_bit; shift < 64; shift += 8) {
        int32_t count[257];
        memset(count, 0, sizeof count);
        for (int32_t i = 0; i < n; ++i)
            count[((from[i] >> shift) & 0xFF) + 1]++;
        if (count[((from[0] >> shift) & 0xFF) + 1] == n)
            continue;
        for (int d = 0; d < 256; ++d)
            count[d + 1] += count[d];
        for (int32_t i = 0; i < n; ++i)
            to[count[(from[i] >> shift) & 0xFF]++] = from[i];
        uint64_t *t = from;
        from = to;
        to = t;
    }
    if (from != keys)
        memcpy(keys, from, (size_t)n * sizeof(uint64_t));
}

typedef struct refill_task {
    qg_index *index;
    int64_t words;
    int32_t parts;
} refill_task;

static void refill_part(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    const refill_task *t = context;
    qg_engine *e = t->index->engine;
    for (int32_t p = begin; p < end; ++p) {
        int64_t w0, w1;
        qg_part_range(t->words, p, t->parts, &w0, &w1);
        // The part's stale positions, sorted by the layer cell of their
        // boxes' min corners, so the refill reads the layer in order.
        // order holds twice 64 keys a word of the bitmap in use: keys in the
        // first half, the sort's scratch in the second.
        uint64_t *keys = e->order + 64 * w0, *scratch = e->order + e->order_cap / 2 + 64 * w0;
        int32_t m = 0;
        for (int64_t w = w0; w < w1; ++w) {
            uint64_t bits = e->stale[w];
            e->stale[w] = 0;
            while (bits != 0) {
                const int32_t q = (int32_t)(w * 64) + qg_ctz64(bits);
                bits &= bits - 1;
                if (q >= e->dyn_count)
                    continue;
                const qg_rect b = e->dbox[q];
                keys[m++] = (uint64_t)qg_static_order_key(&e->layer, b.min_x, b.min_y) << 32 | (uint32_t)q;
            }
        }
        if (m > 1)
            qg_engine_radix_sort(keys, scratch, m, 32);
        qg_cache_refill(&e->layer, e->cache, e->fat, keys, m, e->dbox, e->frame);
        for (int32_t i = 0; i < m; ++i) {
            const int32_t q = (int32_t)(uint32_t)keys[i];
            mark_full(e, q, e->cache[q].count > QG_CACHE_ITEMS);
            if (e->fl.entry[q].in)
                qg_engine_inner(e, q);
        }
    }
}

/// Refills the stale entries, every entry when the layer was rebuilt since
/// the last refill of all; parts split the bitmap's words.
static void refill_caches(qg_index *index, const qg_jobs *jobs)
{
    qg_engine *e = index->engine;
    const int64_t words = ((int64_t)e->dyn_count + 63) / 64;
    if (e->cache_gen != e->layer.gen) {
        for (int64_t w = 0; w < words; ++w)
            e->stale[w] = ~(uint64_t)0;
        e->cache_gen = e->layer.gen;
        e->any_stale = true;
    }
    if (!e->any_stale)
        return;
    refill_task t = {index, words, 1};
    if (jobs != NULL && e->dyn_count >= 4096)
        t.parts = jobs->worker_count;
    qg_jobs_run(t.parts > 1 ? jobs : NULL, refill_part, t.parts, &t);
    e->any_stale = false;
}

typedef struct crowd_count {
    int32_t n;
} crowd_count;

/// Elements in the kind that a sample's fat box overlaps (itself among
/// them) past which it counts as crowded: the others' boxes stand for
/// their fat boxes, so fewer than the partners a list holds.
#define CROWD_SEEN 4

static bool crowd_visit(qg_handle h, void *user)
{
    (void)h;
    return ++((crowd_count *)user)->n < CROWD_SEEN;
}

/// True when the fat layer costs more than the kind would: more than 2 in 5
/// of its elements have partners, or more than 1 in 100 is crowded.
/// Measured against the quadtree (ms a frame, one thread): `level` at
/// 100,000 and 1,000,000 (about 0.37 partners an element) gains a third and
/// a sixth; 4,000 to 40,000 agents with 100 walls at 1.5x that density
/// (0.6) cost the same to 10% more, at 6x (1.9, 5% crowded) up to twice.
static bool fat_unsuited(const qg_engine *e)
{
    int64_t listed = 0;
    for (int32_t p = 0; p < e->dyn_count; ++p)
        listed += e->fl.busy[p] == QG_FAT_LISTED;
    return listed * 5 > (int64_t)e->fl.count * 2 || (int64_t)e->fl.crowded * 100 > (int64_t)e->fl.count + 100;
}

/// True when the dynamic elements in the kind are too close for the fat
/// layer: of up to 64 of them, evenly spread over the positions, the fat
/// boxes the layer would give them (their motion measured by their static
/// caches) overlap more than 1 other element of the kind in 10, or more
/// than 1 in 8 overlaps CROWD_SEEN (`level`: 0.02; 4,000 to 40,000 agents
/// with walls at 1.5x its density: 0.03 to 0.08, then fat_unsuited turns
/// the layer off; at 6x: 0.16-0.19). No allocation.
static bool fat_crowded(qg_index *index)
{
    qg_engine *e = index->engine;
    if (index->count == 0)
        return false;
    const int32_t samples = e->dyn_count < 64 ? e->dyn_count : 64;
    int32_t crowded = 0, seen = 0;
    qg_query_stats stats = {0, 0};
    for (int32_t s = 0; s < samples; ++s) {
        const int32_t p = (int32_t)((int64_t)s * e->dyn_count / samples);
        if (e->fl.entry[p].in)
            continue;
        crowd_count c = {0};
        const qg_static_cache *sc = &e->cache[p];
        const qg_rect b = e->dbox[p];
        const uint32_t dt = e->frame - sc->at_frame;
        float vx = 0.0f, vy = 0.0f;
        if (sc->gen != 0 && dt > 0 && dt <= 64) {
            vx = (b.min_x - sc->at_x) / (float)dt;
            vy = (b.min_y - sc->at_y) / (float)dt;
        }
        index->klass->query(index, qg_fat_box(b, vx, vy, e->fl.built ? 2.0f * e->fl.cell : INFINITY), crowd_visit,
                            &c, &stats);
        crowded += c.n >= CROWD_SEEN;
        seen += c.n - 1;
    }
    return crowded * 8 > samples || seen * 10 > samples;
}

/// The dynamic elements in the kind leave it for the fat layer (no
/// allocation: the layer's arrays come with the caches).
static void fat_admit_all(qg_index *index)
{
    qg_engine *e = index->engine;
    qg_fat_layout(e);
    for (int32_t p = 0; p < e->dyn_count; ++p) {
        if (e->fl.entry[p].in)
            continue;
        const qg_handle h = e->dyn[p];
        index->klass->remove(index, h);
        index->count--;
        index->boxes[h].min_x = NAN;
        e->flags[h] |= QG_F_FAT;
        qg_fat_admit(e, p);
    }
}

void qg_engine_cleanup(qg_index *index, const qg_jobs *jobs)
{
    qg_engine *e = index->engine;
    e->frame++;
    if (e->pending > 0) {
        // Settled statics (not moved since the last cleanup) go to the
        // layer; moved ones wait in the kind for the next cleanup.
        int32_t m = 0;
        for (qg_handle h = 0; h < index->box_high; ++h) {
            const uint8_t f = e->flags[h];
            if ((f & (QG_F_STATIC | QG_F_LAYER)) != QG_F_STATIC)
                continue;
            if (f & QG_F_MOVED)
                e->flags[h] = f & (uint8_t)~QG_F_MOVED;
            else
                e->pend[m++] = h;
        }
        if (m > 0) {
            for (int32_t i = 0; i < m; ++i)
                index->klass->remove(index, e->pend[i]);
            index->count -= m;
            qg_static_build(index, &e->layer, e->pend, m);
            for (int32_t i = 0; i < m; ++i)
                e->flags[e->pend[i]] |= QG_F_LAYER;
            e->pending -= m;
        }
    }
    if (e->cache != NULL && e->layer.live > 0) {
        refill_caches(index, jobs);
        if (e->fl.count < e->dyn_count && (e->fl.retry == 0 || --e->fl.retry == 0)) {
            e->fl.off = fat_crowded(index);
            e->fl.retry = e->fl.backoff;
        }
        if (e->fl.count < e->dyn_count && !e->fl.off)
            fat_admit_all(index);
    }
    if (e->fl.count > 0) {
        qg_fat_layout(e);
        if (++e->fl.watch == 16) {
            e->fl.watch = 0;
            if (fat_unsuited(e)) {
                e->fl.off = true; // they go back to the kind as they move
                e->fl.retry = e->fl.backoff;
                if (e->fl.backoff < (1u << 16))
                    e->fl.backoff *= 2;
            }
        }
    }
    if (e->pending == 0 && e->layer.next_items != NULL)
        release_rebuild(index);
    if (e->pending == 0 && e->layer.live == 0 && e->cache != NULL && e->fl.count == 0)
        release_cache(e, &index->alloc);
}

typedef struct moved_many_task {
    qg_index *index;
    const qg_handle *handles;
    int32_t n, parts;
    bool stale[QG_CHECK_PARTS];
} moved_many_task;

static void moved_many_part(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    moved_many_task *t = context;
    qg_engine *e = t->index->engine;
    const qg_rect *boxes = t->index->boxes;
    for (int32_t p = begin; p < end; ++p) {
        int64_t i0, i1;
        qg_part_range(t->n, p, t->parts, &i0, &i1);
        bool stale = false;
        for (int64_t i = i0; i < i1; ++i) {
            const qg_handle h = t->handles[i];
            const int32_t q = e->dyn_pos[h];
            e->dbox[q] = boxes[h];
            if (qg_cache_left(e->fat[q], boxes[h])) {
                // Parts share the bitmap's words.
                __atomic_fetch_or(&e->stale[q >> 6], (uint64_t)1 << (q & 63), __ATOMIC_RELAXED);
                stale = true;
            }
        }
        t->stale[p] = stale;
    }
}

void qg_engine_moved_many(qg_index *index, const qg_jobs *jobs, const qg_handle *handles, int32_t n)
{
    qg_engine *e = index->engine;
    if (e->cache == NULL) {
        if (e->layer.live > 0)
            qg_engine_make_cache(index);
        return;
    }
    // The handles are distinct (qg_move_many checked them); only the stale
    // bits are shared.
    moved_many_task t;
    t.index = index;
    t.handles = handles;
    t.n = n;
    t.parts = 1;
    if (jobs != NULL && n >= 4096)
        t.parts = jobs->worker_count < QG_CHECK_PARTS ? jobs->worker_count : QG_CHECK_PARTS;
    qg_jobs_run(t.parts > 1 ? jobs : NULL, moved_many_part, t.parts, &t);
    for (int32_t p = 0; p < t.parts; ++p)
        e->any_stale |= t.stale[p];
}

bool qg_engine_all_fat(const qg_index *index, const qg_handle *handles, int32_t n)
{
    const qg_engine *e = index->engine;
    if (e->fl.count < n || e->layer.live == 0 || e->fl.off)
        return false;
    for (int32_t i = 0; i < n; ++i)
        if (!(e->flags[handles[i]] & QG_F_FAT))
            return false;
    return true;
}

typedef struct fat_many_task {
    qg_index *index;
    const qg_handle *handles;
    const qg_rect *boxes;
    int32_t *out; ///< per part, from its first move on: the moves that leave their fat boxes
    int32_t n, parts;
    struct {
        int32_t out;
        bool stale;
        uint8_t pad[64 - sizeof(int32_t) - sizeof(bool)];
    } part[QG_CHECK_PARTS];
} fat_many_task;

/// The moves that stay inside their fat boxes, stored (distinct handles:
/// only the stale bitmap's words are shared); the others noted.
static void fat_many_part(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    fat_many_task *t = context;
    qg_engine *e = t->index->engine;
    for (int32_t part = begin; part < end; ++part) {
        int64_t i0, i1;
        qg_part_range(t->n, part, t->parts, &i0, &i1);
        int32_t out = 0;
        bool stale = false;
        for (int64_t i = i0; i < i1; ++i) {
            const qg_rect box = t->boxes[i];
            const int32_t p = e->dyn_pos[t->handles[i]];
            if (!qg_rect_inside(box, e->fl.entry[p].fat)) {
                t->out[i0 + out++] = (int32_t)i;
                continue;
            }
            qg_rect_store(&e->dbox[p], box);
            if (qg_cache_left(e->fat[p], box)) {
                __atomic_fetch_or(&e->stale[p >> 6], (uint64_t)1 << (p & 63), __ATOMIC_RELAXED);
                stale = true;
            }
        }
        t->part[part].out = out;
        t->part[part].stale = stale;
    }
}

qg_status qg_engine_move_many_fat(qg_index *index, const qg_jobs *jobs, const qg_handle *handles,
                                  const qg_rect *boxes, int32_t n)
{
    qg_engine *e = index->engine;
    const size_t bytes = sizeof(fat_many_task) + (size_t)n * sizeof(int32_t);
    fat_many_task *t = qg_mem_alloc(&index->alloc, bytes);
    if (t == NULL)
        return QG_ERR_NOMEM;
    t->index = index;
    t->handles = handles;
    t->boxes = boxes;
    t->out = (int32_t *)(t + 1);
    t->n = n;
    t->parts = 1;
    if (jobs != NULL && n >= 4096)
        t->parts = jobs->worker_count < QG_CHECK_PARTS ? jobs->worker_count : QG_CHECK_PARTS;
    qg_jobs_run(t->parts > 1 ? jobs : NULL, fat_many_part, t->parts, t);
    // The moves out of their fat boxes file them anew, on this thread (they
    // share the grid and the partner lists), in batch order.
    for (int32_t part = 0; part < t->parts; ++part) {
        int64_t i0, i1;
        qg_part_range(n, part, t->parts, &i0, &i1);
        e->any_stale |= t->part[part].stale;
        for (int32_t k = 0; k < t->part[part].out; ++k) {
            const int32_t i = t->out[i0 + k];
            (void)qg_engine_move_fat_slow(index, handles[i], boxes[i]); // no allocation: cannot fail here
        }
    }
    qg_mem_free(&index->alloc, t, bytes);
    return QG_OK;
}

void qg_engine_clear(qg_index *index)
{
    qg_engine *e = index->engine;
    memset(e->flags, 0, (size_t)e->flags_cap);
    e->reborn = 0;
    for (int32_t i = 0; i < e->filters_cap; ++i)
        e->filters[i] = default_filter;
    e->nondefault = 0;
    e->dyn_count = 0;
    e->pending = 0;
    qg_static_clear(&e->layer);
    release_rebuild(index);
    release_cache(e, &index->alloc);
    e->cleared = e->events;
}

/* ---- pairs -------------------------------------------------------------- */

/// The kind's pairs as the engine sees them: two (pending) static elements
/// are not a pair, filters apply, and a stop is remembered so the join
/// does not run after it.
typedef struct kind_pairs_ctx {
    const uint8_t *flags;
    const qg_filter *filters;
    qg_pair_fn *fn;
    void *user;
    bool stopped;
} kind_pairs_ctx;

static bool kind_pair(qg_handle a, qg_handle b, void *user)
{
    kind_pairs_ctx *c = user;
    if (c->flags[a] & c->flags[b] & QG_F_STATIC)
        return true;
    if (c->filters != NULL && !filters_pass(c->filters[a], c->filters[b]))
        return true;
    if (c->fn(a, b, c->user))
        return true;
    c->stopped = true;
    return false;
}

void qg_engine_pairs_part(const qg_index *index, int32_t part, int32_t parts, qg_pair_fn *fn, void *user,
                          qg_query_stats *stats)
{
    const qg_engine *e = index->engine;
    const qg_filter *filters = e->nondefault > 0 ? e->filters : NULL;
    kind_pairs_ctx c = {e->flags, filters, fn, user, false};
    if (index->count > 1) {
        const bool wrap = filters != NULL || e->pending > 1 || e->layer.live > 0 || e->fl.count > 0;
        qg_pair_fn *f = wrap ? kind_pair : fn;
        void *u = wrap ? (void *)&c : user;
        if (parts == 1)
            index->klass->pairs(index, f, u, stats);
        else if (index->klass->pairs_part != NULL)
            index->klass->pairs_part(index, part, parts, f, u, stats);
        else if (part == 0)
            index->klass->pairs(index, f, u, stats);
    }
    int64_t b, end;
    qg_part_range(e->dyn_count, part, parts, &b, &end);
    if (!c.stopped && e->fl.count > 0)
        c.stopped = !qg_fat_pairs(index, (int32_t)b, (int32_t)end, part == 0 && e->pending > 0, filters, fn, user,
                                  stats);
    if (!c.stopped && e->layer.live > 0 && e->dyn_count > 0) {
        if (e->cache != NULL && e->cache_gen == e->layer.gen)
            qg_cache_join(&e->layer, e->cache + b, e->stale, e->full, ((int64_t)e->dyn_count + 63) / 64, (int32_t)b,
                          e->dbox + b, (int32_t)(end - b), e->flags, filters, fn, user, stats, e->wide);
        else if (e->cache != NULL)
            // The layer was rebuilt with no item left, and a failed batch
            // brought items back before a qg_cleanup refilled the entries
            // for it: none is trusted.
            qg_static_join(&e->layer, NULL, e->dyn + b, e->dbox + b, (int32_t)(end - b), filters, fn, user, stats);
        else
            qg_static_join(&e->layer, index->boxes, e->dyn + b, NULL, (int32_t)(end - b), filters, fn, user, stats);
    }
}

bool qg_engine_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user, qg_query_stats *stats)
{
    const qg_engine *e = index->engine;
    if (e == NULL)
        return true;
    if (e->fl.count > 0 && !qg_fat_query(e, area, fn, user, stats))
        return false;
    return e->layer.live == 0 || qg_static_query(&e->layer, area, fn, user, stats);
}

void qg_engine_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    qg_fat_visit(index->engine, fn, user);
    const qg_static_layer *l = &index->engine->layer;
    for (int32_t i = 0; i < l->levels; ++i) {
        const qg_static_level *lv = &l->level[i];
        const qg_rect r = {(float)lv->ox, (float)lv->oy, (float)(lv->ox + (double)lv->cols * lv->cell),
                           (float)(lv->oy + (double)lv->rows * lv->cell)};
        fn(r, 0, l->start[lv->base + lv->table] - l->start[lv->base], user);
    }
}

qg_status qg_engine_move(qg_index *index, qg_handle handle, qg_rect box)
{
    // qg_move found the slot (in range) dead in the kind: live here only
    // in a layer.
    qg_engine *e = index->engine;
    if (e == NULL)
        return QG_ERR_HANDLE;
    const uint8_t f = e->flags[handle];
    if (f & QG_F_FAT) {
        // The common case: an element of the fat layer (a level's agent)
        // that stays inside its fat box. Inside a finite box, the new box is
        // finite and not NaN; its order is checked with it, in one test.
        const int32_t p = e->dyn_pos[handle];
        if (e->layer.live > 0 && !e->fl.off) {
            if (qg_rect_inside_negated(box, &e->inner[p].min_x)) {
                qg_rect_store(&e->dbox[p], box); // inside both fat boxes
                return QG_OK;
            }
            if (qg_rect_inside_ordered(box, e->fl.entry[p].fat)) {
                qg_rect_store(&e->dbox[p], box);
                if (qg_cache_left(e->fat[p], box))
                    qg_engine_mark_stale(e, p);
                return QG_OK;
            }
        }
        return qg_box_valid(box) ? qg_engine_move_fat_slow(index, handle, box) : QG_ERR_INVALID;
    }
    if (!(f & QG_F_LAYER))
        return QG_ERR_HANDLE;
    return qg_box_valid(box) ? qg_engine_move_layer(index, handle, box) : QG_ERR_INVALID;
}
