// SPDX-License-Identifier: MIT
// The engine's part of the state walk (state.h): the per-slot arrays, the
// dynamic elements with their static caches and fat layer, the static layer,
// and the pairs of the last qg_pair_events.
//
// Not written: the table (code: a read makes this build's own, the kind's
// table under the engine's move_one), the AVX2 flag (the machine's: the
// join's two forms report the same pairs in the same order), and the
// contents of scratch that lives inside one call (the rebuild's next arrays
// and pend, written whole by qg_static_build and qg_engine_cleanup before
// they are read; the refill's sort keys). Their capacities are walked: the
// build relies on them, and they are memory the index holds.
//
// Where a later call may read an element past a count (flags and filters of
// slots not yet issued, the busy bytes past the last position that the pair
// loop reads 16 at a time, bitmap bits past the last position), the whole
// capacity is carried.
//
// A read checks what the engine's and the layers' code would trip on before
// qg_validate runs (index ranges, counts against capacities, the layer's
// level tables); qg_validate then checks the invariants.
#include "../state.h"
#include "engine.h"
#include "../tune.h" // qg_kind_class_of

/// Cells across one axis of a static level at most (static_layer.c's
/// SL_MAX_CELLS).
#define MAX_CELLS ((int64_t)1 << 30)

/// n clamped to [0, cap]: an array's meaningful elements.
static int64_t used_of(int64_t n, int32_t cap)
{
    return n < 0 ? 0 : n > cap ? cap : n;
}

static void level_state(qg_state *s, qg_static_level *d, const qg_static_level *src)
{
    QG_ST(s, d, src, ox);
    QG_ST(s, d, src, oy);
    QG_ST(s, d, src, inv);
    QG_ST(s, d, src, cell);
    QG_ST(s, d, src, reach);
    QG_ST(s, d, src, span_x);
    QG_ST(s, d, src, span_y);
    QG_ST(s, d, src, cols);
    QG_ST(s, d, src, rows);
    QG_ST(s, d, src, table);
    QG_ST(s, d, src, bcols);
    QG_ST_BOOL(s, d, src, dense);
    QG_ST(s, d, src, base);
}

/// A read layer's tables: what its searches index with before qg_validate
/// has looked (levels in range and laid end to end in start[], start[]
/// ascending within the items, each level's buckets what its cells
/// address, live items' handles among the slots).
static bool layer_sane(const qg_static_layer *l, int32_t box_high)
{
    if (l->item_count < 0 || l->item_count > l->item_cap || l->start_count < 0 || l->start_count > l->start_cap ||
        l->live < 0 || l->live > l->item_count || l->levels < 0 || l->levels > QG_STATIC_LEVELS)
        return false;
    if (l->levels == 0)
        return l->item_count == 0 && l->live == 0;
    int64_t next = 0;
    for (int32_t i = 0; i < l->levels; ++i) {
        const qg_static_level *lv = &l->level[i];
        if (lv->base != next || lv->table < 1 || lv->table >= l->start_count - next || lv->cols < 1 ||
            lv->cols > MAX_CELLS || lv->rows < 1 || lv->rows > MAX_CELLS || !(lv->cell > 0.0) || !isfinite(lv->cell) ||
            lv->inv != 1.0 / lv->cell)
            return false;
        if (lv->dense) {
            const int64_t brows = (lv->rows + 7) >> 3;
            if (lv->bcols != (lv->cols + 7) >> 3 || lv->table != lv->bcols * brows * 64)
                return false;
        } else if ((lv->table & (lv->table - 1)) != 0) {
            return false;
        }
        next += lv->table;
    }
    if (next + 1 != l->start_count || l->start[0] != 0 || l->start[next] != l->item_count)
        return false;
    for (int64_t g = 0; g < next; ++g)
        if (l->start[g] > l->start[g + 1])
            return false;
    for (int32_t i = 0; i < l->item_count; ++i) {
        const qg_static_item *it = &l->items[i];
        if (!isnan(it->box.min_x) && (it->handle < 0 || it->handle >= box_high))
            return false;
    }
    return true;
}

/// Whether a copy puts src's pair of arrays (capacities A, B) into d's the
/// other way round (d's capacities a, b): when that holds them exactly, or
/// holds them where the straight way does not.
static bool swap_pair(int32_t a, int32_t b, int32_t A, int32_t B)
{
    if (a == A && b == B)
        return false;
    if (b == A && a == B)
        return true;
    return !(a >= A && b >= B) && b >= A && a >= B;
}

/// Swaps d's arrays with the next build's where swap_pair says so. Every
/// rebuild trades them (qg_static_build), so an index and its copy a
/// rebuild apart hold the same arrays the other way round; the next ones'
/// contents are the build's scratch, so which is which is not state, and a
/// rollback across a rebuild then copies without the allocator.
static void swap_next(qg_static_layer *d, bool items, bool start)
{
    if (items) {
        qg_static_item *p = d->items;
        const int32_t c = d->item_cap;
        d->items = d->next_items, d->item_cap = d->next_items_cap;
        d->next_items = p, d->next_items_cap = c;
    }
    if (start) {
        int32_t *p = d->start;
        const int32_t c = d->start_cap;
        d->start = d->next_start, d->start_cap = d->next_start_cap;
        d->next_start = p, d->next_start_cap = c;
    }
}

static void layer_state(qg_state *s, qg_static_layer *d, const qg_static_layer *src, int32_t box_high)
{
    // Decided from d's capacities before the walk touches them, the same in
    // the fits pass (which swaps back: it changes nothing) and the copy.
    const bool copying = s->mode == QG_ST_FITS || s->mode == QG_ST_COPY;
    const bool swap_items = copying && swap_pair(d->item_cap, d->next_items_cap, src->item_cap, src->next_items_cap);
    const bool swap_start =
        copying && swap_pair(d->start_cap, d->next_start_cap, src->start_cap, src->next_start_cap);
    swap_next(d, swap_items, swap_start);
    QG_ST(s, d, src, item_count);
    QG_ST(s, d, src, start_count);
    QG_ST(s, d, src, levels);
    QG_ST(s, d, src, live);
    QG_ST(s, d, src, gen);
    QG_ST(s, d, src, kills);
    if (qg_st_reading(s) && qg_st_ok(s) && (d->levels < 0 || d->levels > QG_STATIC_LEVELS)) {
        qg_st_fail(s, QG_ERR_INVALID);
        return;
    }
    // Levels past `levels` are left from an older build and never read.
    for (int32_t i = 0; i < src->levels && qg_st_ok(s); ++i)
        level_state(s, &d->level[i], &src->level[i]);
    qg_st_array(s, (void **)&d->items, &d->item_cap, src->items, src->item_cap,
                used_of(src->item_count, src->item_cap), sizeof(qg_static_item));
    qg_st_array(s, (void **)&d->start, &d->start_cap, src->start, src->start_cap,
                used_of(src->start_count, src->start_cap), sizeof(int32_t));
    qg_st_array(s, (void **)&d->next_items, &d->next_items_cap, src->next_items, src->next_items_cap, 0,
                sizeof(qg_static_item));
    qg_st_array(s, (void **)&d->next_start, &d->next_start_cap, src->next_start, src->next_start_cap, 0,
                sizeof(int32_t));
    if (s->mode == QG_ST_FITS)
        swap_next(d, swap_items, swap_start);
    if (qg_st_reading(s) && qg_st_ok(s) && !layer_sane(d, box_high))
        qg_st_fail(s, QG_ERR_INVALID);
}

static void fat_state(qg_state *s, qg_fat_layer *d, const qg_fat_layer *src, int32_t dyn_count)
{
    QG_ST(s, d, src, mask);
    QG_ST_BOOL(s, d, src, built);
    QG_ST(s, d, src, cell);
    QG_ST(s, d, src, inv);
    QG_ST(s, d, src, filed);
    QG_ST(s, d, src, top);
    QG_ST(s, d, src, huge);
    QG_ST(s, d, src, huges);
    QG_ST(s, d, src, count);
    QG_ST(s, d, src, crowded);
    QG_ST(s, d, src, age);
    QG_ST_BOOL(s, d, src, off);
    QG_ST(s, d, src, retry);
    QG_ST(s, d, src, backoff);
    QG_ST(s, d, src, watch);
    qg_st_array(s, (void **)&d->entry, &d->entry_cap, src->entry, src->entry_cap,
                used_of(dyn_count, src->entry_cap), sizeof(qg_fat_entry));
    qg_st_array(s, (void **)&d->busy, &d->busy_cap, src->busy, src->busy_cap, src->busy_cap, 1);
    // Buckets past the mask are laid out anew before any is used.
    qg_st_array(s, (void **)&d->heads, &d->heads_cap, src->heads, src->heads_cap,
                src->built ? used_of((int64_t)src->mask + 1, src->heads_cap) : 0, sizeof(int32_t));
}

/// A read fat layer: what its grid and partner walks index with before
/// qg_validate has looked (the engine's arrays checked to hold dyn_count
/// positions when the caches exist).
static bool fat_sane(const qg_engine *e)
{
    const qg_fat_layer *fl = &e->fl;
    if (fl->count < 0 || fl->count > e->dyn_count || (e->cache == NULL && fl->count != 0))
        return false;
    if (fl->built && ((int64_t)fl->mask + 1 > fl->heads_cap || (((int64_t)fl->mask + 1) & fl->mask) != 0))
        return false;
    int32_t top = 0;
    for (int32_t l = 0; l < QG_FAT_LEVELS; ++l) {
        if (fl->filed[l] < 0)
            return false;
        if (fl->filed[l] > 0)
            top = l + 1;
    }
    if (fl->top != top)
        return false;
    for (int32_t p = 0; e->cache != NULL && p < e->dyn_count; ++p) {
        const qg_fat_entry *t = &fl->entry[p];
        if (!t->in)
            continue;
        if (t->in > QG_FAT_HUGE || (t->npart > QG_FAT_PARTS && t->npart != QG_FAT_CROWDED))
            return false;
        // A list may name positions that are gone, but never one past the
        // busy bytes the pair loop reads for it.
        const int32_t n = t->npart == QG_FAT_CROWDED ? QG_FAT_PARTS : t->npart;
        for (int32_t k = 0; k < n; ++k)
            if (t->part[k] < 0 || t->part[k] >= fl->busy_cap)
                return false;
    }
    return true;
}

/// A read engine: counts within capacities and handles among the slots
/// wherever a later call (or qg_validate, or index.c's checks ahead of it)
/// indexes by them.
static bool engine_sane(const qg_engine *e, const qg_index *index)
{
    const int32_t high = index->box_high;
    if (e->flags_cap < high || e->dyn_pos_cap < high || (e->filters != NULL && e->filters_cap < high) ||
        e->dyn_count < 0 || e->dyn_count > e->dyn_cap || e->dyn_count > high || e->pending < 0 ||
        e->pending > high || e->nondefault < 0 || e->nondefault > high || e->reborn < 0 ||
        e->reborn > e->flags_cap || e->prev_count < 0 || e->prev_count > e->prev_cap)
        return false;
    for (int32_t h = 0; h < e->flags_cap; ++h)
        if (e->flags[h] >= 2 * QG_F_FAT)
            return false;
    for (int32_t i = 0; i < e->dyn_count; ++i)
        if (e->dyn[i] < 0 || e->dyn[i] >= high)
            return false;
    // What the next qg_cleanup's rebuild writes without allocating.
    const qg_static_layer *l = &e->layer;
    const int64_t total = (int64_t)l->live + e->pending;
    if (e->pending > 0 && (e->pend_cap < e->pending || l->next_items_cap < total ||
                           l->next_start_cap < qg_static_start_bound(total)))
        return false;
    if (e->cache != NULL) {
        const int64_t n = e->dyn_count, words = (n + 63) / 64;
        if (e->cache_cap < n || e->fat_cap < n || e->inner_cap < n || e->dbox_cap < n || e->fl.entry_cap < n ||
            e->fl.busy_cap < n + 16 || e->fl.heads_cap < QG_FAT_BUCKETS * n || e->stale_cap < words ||
            e->full_cap < words || e->order_cap < 128 * words)
            return false;
        // The join reads every slot of an entry that is not full: those
        // past its count must overlap nothing, those before it name slots.
        for (int32_t i = 0; i < e->dyn_count; ++i) {
            const qg_static_cache *c = &e->cache[i];
            if (c->count < 0 || c->count > QG_CACHE_FULL)
                return false;
            for (int32_t k = 0; c->count <= QG_CACHE_ITEMS && k < QG_CACHE_ITEMS; ++k)
                if (k < c->count ? c->item[k] < 0 || c->item[k] >= high : !isnan(c->min_x[k]))
                    return false;
        }
    }
    for (int32_t i = 0; i < e->prev_count; ++i)
        if ((e->prev[i] >> 32) >= (uint64_t)e->flags_cap || (uint32_t)e->prev[i] >= (uint32_t)e->flags_cap)
            return false;
    return fat_sane(e);
}

void qg_engine_state(qg_state *s, qg_index *d, const qg_index *src)
{
    bool drop;
    if (!qg_st_struct(s, (void **)&d->engine, src->engine, sizeof(qg_engine), &drop)) {
        if (drop)
            qg_engine_destroy(d);
        return;
    }
    qg_engine *e = d->engine;
    const qg_engine *f = src->engine;
    if (qg_st_reading(s)) {
        // Code and the machine, not state: this build's own. The kind's
        // table, never a re-tune's (none runs beside the engine's layers).
        qg_engine_set_table(e, qg_kind_class_of(d->config.kind));
        e->wide = qg_cpu_avx2();
    }
    QG_ST(s, e, f, nondefault);
    QG_ST(s, e, f, dyn_count);
    QG_ST_BOOL(s, e, f, any_stale);
    QG_ST(s, e, f, frame);
    QG_ST(s, e, f, cache_gen);
    QG_ST(s, e, f, pending);
    QG_ST(s, e, f, prev_count);
    QG_ST(s, e, f, reborn);
    QG_ST_BOOL(s, e, f, events);
    QG_ST_BOOL(s, e, f, cleared);
    const int64_t dyn = used_of(f->dyn_count, f->dyn_cap);
    qg_st_array(s, (void **)&e->flags, &e->flags_cap, f->flags, f->flags_cap, f->flags_cap, 1);
    qg_st_array(s, (void **)&e->dyn_pos, &e->dyn_pos_cap, f->dyn_pos, f->dyn_pos_cap,
                used_of(src->box_high, f->dyn_pos_cap), sizeof(int32_t));
    qg_st_array(s, (void **)&e->filters, &e->filters_cap, f->filters, f->filters_cap, f->filters_cap,
                sizeof(qg_filter));
    qg_st_array(s, (void **)&e->dyn, &e->dyn_cap, f->dyn, f->dyn_cap, dyn, sizeof(qg_handle));
    qg_st_array(s, (void **)&e->cache, &e->cache_cap, f->cache, f->cache_cap, used_of(dyn, f->cache_cap),
                sizeof(qg_static_cache));
    qg_st_array(s, (void **)&e->fat, &e->fat_cap, f->fat, f->fat_cap, used_of(dyn, f->fat_cap), sizeof(qg_rect));
    qg_st_array(s, (void **)&e->dbox, &e->dbox_cap, f->dbox, f->dbox_cap, used_of(dyn, f->dbox_cap),
                sizeof(qg_rect));
    qg_st_array(s, (void **)&e->inner, &e->inner_cap, f->inner, f->inner_cap, used_of(dyn, f->inner_cap),
                sizeof(qg_rect));
    qg_st_array(s, (void **)&e->stale, &e->stale_cap, f->stale, f->stale_cap, f->stale_cap, sizeof(uint64_t));
    qg_st_array(s, (void **)&e->full, &e->full_cap, f->full, f->full_cap, f->full_cap, sizeof(uint64_t));
    qg_st_array(s, (void **)&e->order, &e->order_cap, f->order, f->order_cap, 0, sizeof(uint64_t));
    qg_st_array(s, (void **)&e->pend, &e->pend_cap, f->pend, f->pend_cap, 0, sizeof(qg_handle));
    qg_st_array(s, (void **)&e->prev, &e->prev_cap, f->prev, f->prev_cap, used_of(f->prev_count, f->prev_cap),
                sizeof(uint64_t));
    fat_state(s, &e->fl, &f->fl, (int32_t)dyn);
    layer_state(s, &e->layer, &f->layer, src->box_high);
    if (qg_st_reading(s) && qg_st_ok(s) && !engine_sane(e, d))
        qg_st_fail(s, QG_ERR_INVALID);
}
