// SPDX-License-Identifier: MIT
// QG_LOOSE_GRID: the kind's table and its structure calls: loose cells and
// their links, inserts, removes and moves (with the re-fit they may run),
// qg_cleanup's order of work, queries, stats, visit and validate. The
// overview of the kind is in loose_grid.h; loose_grid_world.c owns the re-sort, the
// relink and the re-fit, loose_grid_pairs.c the pair search.
#include "loose_grid.h"
#include "../kind.h"
#include "../ray_nearest_kernels.h"
#include "../state.h"

/// Links loose cell i into the tight cells of `grown` that are not in `had`
/// (had lies inside grown: a box only grows here). Links were reserved.
static void lg_link_new(loose_grid *g, int32_t i, lg_range had, lg_range grown)
{
    for (int32_t ty = grown.y0; ty <= grown.y1; ++ty) {
        for (int32_t tx = grown.x0; tx <= grown.x1; ++tx) {
            if (lg_range_has(had, tx, ty))
                continue;
            int32_t *head = &g->tight[ty * g->tcols + tx];
            *head = qg_enode_take(&g->links, i, *head);
        }
    }
}

/// What a batch's moves may grow, noted before them so that an undone
/// batch gives every byte back (lg_give_back): the capacities and counters
/// its moves may change, and each loose box as it was before the batch grew
/// it. loose_grid_batch_mark logs a box once per cell (`seen`); the kind's
/// own batch (loose_grid_move_many) logs every growth (`seen` NULL: each of
/// its far moves grows at most one box, so a log per far move holds them
/// all, without a bitmap of every cell to clear for each call), and the
/// give-back puts them back last first, so a box grown twice ends as it was
/// before the first.
typedef struct lg_mark {
    size_t bytes;
    int32_t items_capacity, next_capacity, cell_capacity, links_capacity;
    int32_t item_high, strays;
    bool refit;
    bool lost; ///< more boxes grew than the log holds: they stay grown
    int32_t logged, room;
    uint32_t *seen; ///< a bit per loose cell: its box is logged; NULL: log every growth
    lg_loose *box;  ///< [room]: the logged boxes
    int32_t *which; ///< [room]: their loose cells
} lg_mark;

/// Logs loose cell i's box before it grows in a marked batch.
static void lg_log(lg_mark *m, const lg_loose *loose, int32_t i)
{
    const uint32_t bit = UINT32_C(1) << (i & 31);
    if (m->seen != NULL && (m->seen[i >> 5] & bit))
        return;
    if (m->logged == m->room) {
        m->lost = true;
        return;
    }
    if (m->seen != NULL)
        m->seen[i >> 5] |= bit;
    m->box[m->logged] = loose[i];
    m->which[m->logged++] = i;
}

/// Makes loose cell i's box hold `box`, linking it into newly covered tight
/// cells; reserves the links first. Fails only with QG_ERR_NOMEM, before
/// any change.
static qg_status lg_grow(loose_grid *g, qg_txn *txn, int32_t i, qg_rect box)
{
    lg_loose *c = &g->loose[i];
    if (lg_inside_loose(box, c))
        return QG_OK;
    if (g->mark != NULL)
        lg_log(g->mark, g->loose, i);
    const float l = c->l < box.min_x ? c->l : box.min_x, t = c->t < box.min_y ? c->t : box.min_y;
    const float r = c->r > box.max_x ? c->r : box.max_x, b = c->b > box.max_y ? c->b : box.max_y;
    const lg_range had = lg_cell_range(g, c), grown = lg_range_of(g, l, t, r, b);
    const int64_t more = lg_range_size(grown) - lg_range_size(had);
    if (more > 0) {
        if (!qg_enode_reserve(txn, &g->links, more))
            return QG_ERR_NOMEM;
        lg_link_new(g, i, had, grown);
    }
    c->l = l, c->t = t, c->r = r, c->b = b;
    return QG_OK;
}

/// Makes sure qg_lg_take_item will not allocate.
static bool lg_reserve_item(loose_grid *g, qg_txn *txn)
{
    if (g->free_item >= 0)
        return true;
    const int64_t need = (int64_t)g->item_high + 1;
    return qg_txn_reserve(txn, (void **)&g->items, &g->items_capacity, sizeof(lg_item), need) &&
           qg_txn_reserve(txn, (void **)&g->next, &g->next_capacity, sizeof(int32_t), need);
}

/// A slot for a new node: a freed one after the packed part, or a new one.
int32_t qg_lg_take_item(loose_grid *g)
{
    int32_t k = g->free_item;
    if (k >= 0)
        g->free_item = g->next[k];
    else
        k = g->item_high++;
    return k;
}

/// Puts element h with box `box` at the head of loose cell i's list.
static void lg_push(loose_grid *g, int32_t i, qg_handle h, qg_rect box)
{
    const int32_t k = qg_lg_take_item(g);
    g->items[k] = (lg_item){h, box};
    g->next[k] = g->loose[i].head;
    g->loose[i].head = k;
    g->cell[h] = lg_cell_word(g, i);
}

/// Takes element h's node out of loose cell i's list; returns its slot.
static int32_t lg_detach(loose_grid *g, int32_t i, qg_handle h)
{
    int32_t *link = &g->loose[i].head;
    while (g->items[*link].h != h)
        link = &g->next[*link];
    const int32_t k = *link;
    *link = g->next[k];
    return k;
}

/// Takes element h out of loose cell i's list. A slot of the packed part
/// stays a hole until cleanup (keeping the free list out of the runs); one
/// after it is reused.
static void lg_unlink(loose_grid *g, int32_t i, qg_handle h)
{
    const int32_t k = lg_detach(g, i, h);
    g->items[k].h = -1;
    if (k >= g->packed) {
        g->next[k] = g->free_item;
        g->free_item = k;
    }
}

int32_t qg_lg_side(double extent, double cell)
{
    double n = floor(extent / cell);
    if (!(n >= 1.0))
        n = 1.0;
    if (n > LG_MAX_SIDE)
        n = LG_MAX_SIDE;
    return (int32_t)n;
}

/// Cells per world unit, at most 2^120: lg_map doubles it (and the pair
/// search's half cells double it again) without overflow. A world so small
/// that it asks for more is mapped as if it were wider, which the clamped
/// border cells absorb.
static float lg_scale(int32_t cells, double extent)
{
    const double s = (double)cells / extent;
    return s < 0x1p120 ? (float)s : 0x1p120f;
}

/// Sets the mapping for the world [x0, x1] x [y0, y1] of lcols x lrows
/// loose cells (extents in double: finite for any finite floats).
void qg_lg_layout(loose_grid *g, float x0, float y0, float x1, float y1, int32_t lcols, int32_t lrows)
{
    const double ex = qg_extent(x0, x1), ey = qg_extent(y0, y1);
    g->wx0 = x0, g->wy0 = y0, g->wx1 = x1, g->wy1 = y1;
    g->lcols = lcols;
    g->lrows = lrows;
    g->tcols = (lcols + LG_TIGHT_RATIO - 1) / LG_TIGHT_RATIO;
    g->trows = (lrows + LG_TIGHT_RATIO - 1) / LG_TIGHT_RATIO;
    g->ox = x0;
    g->oy = y0;
    g->lsx = lg_scale(g->lcols, ex);
    g->lsy = lg_scale(g->lrows, ey);
    g->tsx = lg_scale(g->tcols, ex);
    g->tsy = lg_scale(g->trows, ey);
}

/// Typical element width: the configured one, or one the bounds suggest.
static float lg_element_size(const qg_config *config)
{
    return config->element_size > 0.0f ? config->element_size : qg_rect_extent(config->bounds) / 256.0f;
}

static qg_status loose_grid_configure(qg_config *config)
{
    if (config->cell_size == 0.0f) {
        // A loose cell ten typical elements wide: smaller cells cost more
        // memory and cleanup time per element than they save in the pair
        // loop (measured on the agents workload, 1,000,000 elements: the
        // total is flat from 8 to 13 widths, worse at 4 and 16).
        config->cell_size = LG_CELL_WIDTHS * lg_element_size(config);
    }
    if (!isfinite(config->cell_size))
        config->cell_size = qg_rect_extent(config->bounds);
    return QG_OK;
}

static qg_status loose_grid_init(qg_index *index)
{
    loose_grid *g = (loose_grid *)index;
    const qg_config *c = &index->config;
    const qg_rect w = c->bounds;
    const double ex = qg_extent(w.min_x, w.max_x), ey = qg_extent(w.min_y, w.max_y);
    int32_t lcols = qg_lg_side(ex, c->cell_size), lrows = qg_lg_side(ey, c->cell_size);
    while ((int64_t)lcols * lrows > LG_MAX_CELLS) {
        if (lcols >= lrows)
            lcols = (lcols + 1) / 2;
        else
            lrows = (lrows + 1) / 2;
    }
    qg_lg_layout(g, w.min_x, w.min_y, w.max_x, w.max_y, lcols, lrows);
    g->fit_next = LG_FIT_MIN;
    // Half a typical element: covers a frame's move of anything that moves
    // less than its own size per frame, and barely widens the loose boxes.
    g->margin = 0.5f * (c->element_size > 0.0f ? c->element_size : c->cell_size / LG_CELL_WIDTHS);
    g->steady_high = -1;
    g->free_item = -1;
    if (!isfinite(g->margin))
        g->margin = 0.0f;
    g->cfg_margin = g->margin;
    g->cell_w = c->cell_size;
    g->auto_size = c->element_size == 0.0f && c->cell_size == LG_CELL_WIDTHS * lg_element_size(c);
    qg_enode_pool_reset(&g->links);
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    const int32_t nl = g->lcols * g->lrows, nt = g->tcols * g->trows;
    if (!qg_txn_reserve(&txn, (void **)&g->loose, &g->loose_capacity, sizeof(lg_loose), nl) ||
        !qg_txn_reserve(&txn, (void **)&g->tight, &g->tight_capacity, sizeof(int32_t), nt) ||
        !qg_txn_reserve(&txn, (void **)&g->start, &g->start_capacity, sizeof(int32_t), (int64_t)nl + 1) ||
        !qg_txn_reserve(&txn, (void **)&g->count, &g->count_capacity, sizeof(int32_t), nl)) {
        qg_txn_rollback(&txn);
        return QG_ERR_NOMEM;
    }
    for (int32_t i = 0; i < nl; ++i)
        g->loose[i] = lg_empty;
    memset(g->tight, 0xff, (size_t)nt * sizeof(int32_t));
    memset(g->start, 0, ((size_t)nl + 1) * sizeof(int32_t));
    memset(g->count, 0, (size_t)nl * sizeof(int32_t));
    return QG_OK;
}

static void loose_grid_destroy(qg_index *index)
{
    loose_grid *g = (loose_grid *)index;
    qg_array_free(&index->alloc, (void **)&g->loose, &g->loose_capacity, sizeof(lg_loose));
    qg_array_free(&index->alloc, (void **)&g->tight, &g->tight_capacity, sizeof(int32_t));
    qg_array_free(&index->alloc, (void **)&g->links.data, &g->links.capacity, sizeof(qg_enode));
    qg_array_free(&index->alloc, (void **)&g->start, &g->start_capacity, sizeof(int32_t));
    qg_array_free(&index->alloc, (void **)&g->count, &g->count_capacity, sizeof(int32_t));
    qg_array_free(&index->alloc, (void **)&g->cell, &g->cell_capacity, sizeof(uint32_t));
    qg_array_free(&index->alloc, (void **)&g->items, &g->items_capacity, sizeof(lg_item));
    qg_array_free(&index->alloc, (void **)&g->next, &g->next_capacity, sizeof(int32_t));
}


/// After a look at the world: the next look comes when the population
/// doubled or cleanup sees crowding again. Crowding that a re-fit would not
/// help (the world is already the plan's) is not looked at again for a few
/// cleanups, so it costs a plan now and then, not every frame.
static void lg_looked(loose_grid *g, int32_t n, bool refitted)
{
    if (g->refit && !refitted)
        g->fit_wait = LG_FIT_WAIT;
    g->refit = false;
    g->strays = 0;
    g->fit_next = n > INT32_MAX / 2 ? INT32_MAX : 2 * n;
}

/// Counts an element placed outside the world (clamped onto a border cell)
/// by an insert or a far move; once a 32nd of the population has, the next
/// insert or move looks at the world. A crowd that teleports out is then
/// followed within the frame, not a frame later by cleanup's check.
static inline void lg_stray(loose_grid *g, qg_rect b)
{
    const float cx = b.min_x * 0.5f + b.max_x * 0.5f, cy = b.min_y * 0.5f + b.max_y * 0.5f;
    if ((cx < g->wx0) | (cx > g->wx1) | (cy < g->wy0) | (cy > g->wy1))
        g->refit |= ++g->strays > g->base.count / 32 + LG_FIT_MIN;
}

static qg_status lg_insert_here(loose_grid *g, qg_txn *txn, qg_handle h, qg_rect box)
{
    const int32_t i = lg_loose_of(g, box);
    const qg_status s = lg_grow(g, txn, i, lg_fatten(g, box));
    if (s != QG_OK)
        return s;
    g->fresh = false;
    lg_push(g, i, h, box);
    lg_stray(g, box);
    return QG_OK;
}

static qg_status loose_grid_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    loose_grid *g = (loose_grid *)index;
    if (!qg_txn_reserve(txn, (void **)&g->cell, &g->cell_capacity, sizeof(uint32_t), (int64_t)h + 1) ||
        !lg_reserve_item(g, txn))
        return QG_ERR_NOMEM;
    const int32_t n = index->count + 1;
    // (a marked batch looks at the world after it: loose_grid_batch_mark)
    if ((!g->refit && n < g->fit_next) || g->mark != NULL)
        return lg_insert_here(g, txn, h, box);
    // Time to look at the world (the population doubled, or cleanup saw
    // crowding): a build is fitted before its first cleanup, in O(n) in
    // all over the doublings.
    lg_plan p;
    qg_lg_plan_world(g, n, h, box, &p);
    const bool better = qg_lg_plan_better(g, &p);
    const qg_status s = better ? qg_lg_refit(g, txn, &p, h, box, true) : lg_insert_here(g, txn, h, box);
    if (s == QG_OK)
        lg_looked(g, n, better);
    return s;
}

/// The links the batch's loose boxes will need as lg_grow grows them, one
/// box after the other in this order: each loose box is grown in place
/// as it would be, the old boxes logged in `undo` (n entries) and put back
/// after.
static int64_t lg_links_needed(loose_grid *g, const qg_handle *handles, int32_t n, lg_loose *undo, int32_t *undo_cell)
{
    int64_t need = 0;
    int32_t logged = 0;
    for (int32_t k = 0; k < n; ++k) {
        const qg_rect box = g->base.boxes[handles[k]];
        const int32_t i = lg_loose_of(g, box);
        const qg_rect f = lg_fatten(g, box);
        lg_loose *c = &g->loose[i];
        if (lg_inside_loose(f, c))
            continue;
        const float l = c->l < f.min_x ? c->l : f.min_x, t = c->t < f.min_y ? c->t : f.min_y;
        const float r = c->r > f.max_x ? c->r : f.max_x, b = c->b > f.max_y ? c->b : f.max_y;
        const int64_t more = lg_range_size(lg_range_of(g, l, t, r, b)) - lg_range_size(lg_cell_range(g, c));
        need += more > 0 ? more : 0;
        undo[logged] = *c;
        undo_cell[logged++] = i;
        c->l = l, c->t = t, c->r = r, c->b = b;
    }
    while (logged-- > 0)
        g->loose[undo_cell[logged]] = undo[logged];
    return need;
}

/// qg_insert_many: one look at the world for the whole batch (as an insert
/// looks when the population doubled), and all the memory the batch needs
/// reserved before any change: the per-handle cells, a node per element,
/// and the links its loose boxes grow into (or the re-fit's new world, which
/// allocates everything before it changes anything). So a batch that lacks
/// memory fails with the index and the bytes it holds as they were (one by
/// one, a late failure kept what the earlier inserts grew).
static qg_status loose_grid_insert_many(qg_index *index, qg_txn *txn, const qg_handle *handles, int32_t n)
{
    loose_grid *g = (loose_grid *)index;
    qg_handle top = 0;
    for (int32_t k = 0; k < n; ++k)
        top = handles[k] > top ? handles[k] : top;
    int32_t reuse = 0;
    for (int32_t k = g->free_item; k >= 0 && reuse < n; k = g->next[k])
        reuse++;
    const int64_t items = (int64_t)g->item_high + (n - reuse);
    if (!qg_txn_reserve(txn, (void **)&g->cell, &g->cell_capacity, sizeof(uint32_t), (int64_t)top + 1) ||
        !qg_txn_reserve(txn, (void **)&g->items, &g->items_capacity, sizeof(lg_item), items) ||
        !qg_txn_reserve(txn, (void **)&g->next, &g->next_capacity, sizeof(int32_t), items))
        return QG_ERR_NOMEM;
    const int32_t total = (int32_t)((int64_t)index->count + n);
    const bool look = g->refit || total >= g->fit_next;
    if (look) {
        // The slots are taken, so the plan and the re-fit see the batch's
        // boxes; each element gets its node first, so the re-fit files it.
        const qg_rect any = index->boxes[handles[0]]; // (no element of its own: oh = -1)
        lg_plan p;
        qg_lg_plan_world(g, total, -1, any, &p);
        if (qg_lg_plan_better(g, &p)) {
            const int32_t free_item = g->free_item, item_high = g->item_high;
            for (int32_t k = 0; k < n; ++k)
                g->items[qg_lg_take_item(g)].h = handles[k];
            if (qg_lg_refit(g, txn, &p, -1, any, false) != QG_OK) {
                // The nodes go back: the free ones blank again (their links
                // are untouched; only the head moved), the rest above
                // item_high.
                int32_t k = free_item;
                for (int32_t j = 0; j < reuse; ++j, k = g->next[k])
                    g->items[k].h = -1;
                g->free_item = free_item;
                g->item_high = item_high;
                return QG_ERR_NOMEM;
            }
            lg_looked(g, total, true);
            return QG_OK;
        }
    }
    const size_t undo_bytes = (size_t)n * (sizeof(lg_loose) + sizeof(int32_t));
    lg_loose *const undo = qg_mem_alloc(&index->alloc, undo_bytes);
    if (undo == NULL)
        return QG_ERR_NOMEM;
    const int64_t links = lg_links_needed(g, handles, n, undo, (int32_t *)(undo + n));
    qg_mem_free(&index->alloc, undo, undo_bytes);
    if (!qg_enode_reserve(txn, &g->links, links))
        return QG_ERR_NOMEM;
    if (look)
        lg_looked(g, total, false);
    for (int32_t k = 0; k < n; ++k)
        (void)lg_insert_here(g, txn, handles[k], index->boxes[handles[k]]); // reserved: cannot fail
    return QG_OK;
}

static void loose_grid_remove(qg_index *index, qg_handle h)
{
    loose_grid *g = (loose_grid *)index;
    g->fresh = false;
    lg_unlink(g, (int32_t)(g->cell[h] & LG_CELL_MASK), h);
}

/// A move the margin does not cover, or one to another cell: the loose
/// cell of the new centre grows to hold the new box plus the margin (if it
/// does not already hold the box), and the element moves to its list.
static qg_status lg_move_far(loose_grid *g, qg_txn *txn, qg_handle h, qg_rect box, int32_t ni)
{
    const int32_t ci = (int32_t)(g->cell[h] & LG_CELL_MASK);
    if (!lg_inside_loose(box, &g->loose[ni])) {
        const qg_status s = lg_grow(g, txn, ni, lg_fatten(g, box));
        if (s != QG_OK)
            return s;
    }
    if (ni != ci) {
        // The node keeps its slot: cleanup's sort then moves it only as far
        // as the cells are apart.
        const int32_t k = lg_detach(g, ci, h);
        g->items[k].box = box;
        g->next[k] = g->loose[ni].head;
        g->loose[ni].head = k;
    }
    g->cell[h] = lg_cell_word(g, ni);
    g->base.boxes[h] = box;
    lg_stray(g, box);
    return QG_OK;
}

static inline qg_status lg_move_plain(loose_grid *g, qg_txn *txn, qg_handle h, qg_rect box)
{
    qg_index *index = &g->base;
    g->fresh = false;
    const uint32_t w = g->cell[h];
    const int32_t ni = lg_loose_of(g, box);
    if ((w >> LG_CELL_BITS) != g->epoch && (w & LG_CELL_MASK) == (uint32_t)ni &&
        lg_inside(box, lg_fatten(g, index->boxes[h]))) {
        // The first move since cleanup, within the margin of the box the
        // cleanup saw and in the same cell: the loose box already holds it.
        // Nothing but the element's own (sequential) data is touched.
        index->boxes[h] = box;
        g->cell[h] = (w & LG_CELL_MASK) | g->epoch << LG_CELL_BITS;
        return QG_OK;
    }
    return lg_move_far(g, txn, h, box, ni);
}

static QG_NOINLINE qg_status loose_grid_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    loose_grid *g = (loose_grid *)index;
    if (g->refit && g->mark == NULL) {
        // Cleanup saw crowding and could not allocate: this move looks at
        // the world and re-fits it if that helps.
        lg_plan p;
        qg_lg_plan_world(g, index->count, h, box, &p);
        const bool better = qg_lg_plan_better(g, &p);
        const qg_status s = better ? qg_lg_refit(g, txn, &p, h, box, false) : lg_move_plain(g, txn, h, box);
        if (s == QG_OK)
            lg_looked(g, index->count, better);
        return s;
    }
    return lg_move_plain(g, txn, h, box);
}


/* ---- several cores -------------------------------------------------------- */

/// A batch move's shared state (loose_grid_move_many).
typedef struct lg_batch {
    loose_grid *g;
    const qg_handle *handles;
    const qg_rect *boxes;
    uint8_t *far; ///< per move: 1 when it is not lg_move_plain's first, local case
    int32_t n;
} lg_batch;

/// Phase 1, over ranges of the batch: which moves are near (the first move
/// since cleanup, within the margin and in the same cell: only the
/// element's own box and `cell` word change). Reads only.
static void lg_batch_classify(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    const lg_batch *b = context;
    const loose_grid *g = b->g;
    for (int32_t i = begin; i < end; ++i) {
        const qg_handle h = b->handles[i];
        const qg_rect box = b->boxes[i];
        const uint32_t w = g->cell[h];
        b->far[i] = !((w >> LG_CELL_BITS) != g->epoch && (w & LG_CELL_MASK) == (uint32_t)lg_loose_of(g, box) &&
                      lg_inside(box, lg_fatten(g, g->base.boxes[h])));
    }
}

/// Phase 3, over ranges of the batch: the near moves, each writing only its
/// own element's box and `cell` word (as lg_move_plain's first case).
static void lg_batch_near(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    const lg_batch *b = context;
    loose_grid *g = b->g;
    const uint32_t epoch = g->epoch << LG_CELL_BITS;
    for (int32_t i = begin; i < end; ++i) {
        if (b->far[i])
            continue;
        const qg_handle h = b->handles[i];
        g->base.boxes[h] = b->boxes[i];
        g->cell[h] = (g->cell[h] & LG_CELL_MASK) | epoch;
    }
}

/// A far move's undo record: the element's box and `cell` word before it
/// (the word's epoch too, so a move that was near before the batch is near
/// again after an undo, as it would have been).
typedef struct lg_undo {
    qg_rect box;
    uint32_t cell;
} lg_undo;

/// Moves handles[i] to boxes[i] for the far moves one at a time, as qg_move
/// does, noting each one's undo record in old[] first. *done: the batch
/// position it stopped at (on QG_ERR_NOMEM the move there did not move).
static qg_status lg_batch_far(loose_grid *g, const lg_batch *b, lg_undo *old, int32_t *done)
{
    qg_index *index = &g->base;
    int32_t j = 0;
    for (int32_t i = 0; i < b->n; ++i) {
        if (!b->far[i])
            continue;
        const qg_handle h = b->handles[i];
        old[j] = (lg_undo){index->boxes[h], g->cell[h]};
        qg_txn txn;
        qg_txn_begin(&txn, &index->alloc);
        const qg_status s = lg_move_plain(g, &txn, h, b->boxes[i]);
        if (s != QG_OK) {
            qg_txn_rollback(&txn);
            *done = i;
            return s;
        }
        j++;
    }
    *done = b->n;
    return QG_OK;
}

/// Moves the far moves before batch position `done` back, last first. A
/// move back needs no memory: the old box is inside its cell's loose box,
/// which only grows between cleanups, and a relink keeps the node's slot.
static void lg_batch_unfar(loose_grid *g, const lg_batch *b, const lg_undo *old, int32_t done)
{
    int32_t j = 0;
    for (int32_t i = 0; i < done; ++i)
        j += b->far[i];
    for (int32_t i = done; i-- > 0;) {
        if (!b->far[i])
            continue;
        const qg_handle h = b->handles[i];
        qg_txn txn;
        qg_txn_begin(&txn, &g->base.alloc);
        if (lg_move_plain(g, &txn, h, old[--j].box) != QG_OK)
            qg_txn_rollback(&txn); // cannot happen (see above)
        g->cell[h] = old[j].cell;
    }
}

/// The look at the world a pending re-fit asks for (g->refit), after the
/// batch moved every element one by one: planned from the elements where
/// the batch put them, re-fitted when that helps. QG_ERR_NOMEM before any
/// change (qg_lg_refit allocates everything first), and the batch is then
/// undone in the old world.
static qg_status lg_batch_look(loose_grid *g)
{
    lg_plan p;
    qg_lg_plan_world(g, g->base.count, -1, (qg_rect){0, 0, 0, 0}, &p);
    const bool better = qg_lg_plan_better(g, &p);
    if (better) {
        qg_txn txn;
        qg_txn_begin(&txn, &g->base.alloc);
        if (qg_lg_refit(g, &txn, &p, -1, (qg_rect){0, 0, 0, 0}, false) != QG_OK) {
            qg_txn_rollback(&txn);
            return QG_ERR_NOMEM;
        }
    }
    lg_looked(g, g->base.count, better);
    return QG_OK;
}

static void lg_give_back(loose_grid *g, const lg_mark *m);

/// qg_move_many. Most moves of a frame are near ones (on `agents`, every
/// element moves a little each frame and cleanup runs in between), which
/// touch only their own element: they are found in parallel (phase 1),
/// the far ones, which grow loose boxes and relink lists, run serially with
/// their own undo (phase 2), and only when those all succeeded do the near
/// ones store their boxes, in parallel (phase 3). QG_ERR_NOMEM leaves no
/// element moved and no byte held: the far moves' growth is logged as a
/// marked batch's is and given back (lg_give_back). A pending re-fit makes
/// every move a far one and looks at the world after them (lg_batch_look):
/// a re-fit before them could not be taken back when a move is then
/// refused.
static qg_status loose_grid_move_many(qg_index *index, const qg_jobs *jobs, const qg_handle *handles,
                                      const qg_rect *boxes, int32_t n)
{
    loose_grid *g = (loose_grid *)index;
    qg_alloc *alloc = &index->alloc;
    lg_batch b = {g, handles, boxes, NULL, n};
    b.far = qg_mem_alloc(alloc, (size_t)n);
    if (b.far == NULL)
        return QG_ERR_NOMEM;
    const bool look = g->refit;
    if (look)
        memset(b.far, 1, (size_t)n);
    else
        qg_jobs_run(jobs, lg_batch_classify, n, &b);
    int32_t nfar = 0;
    for (int32_t i = 0; i < n; ++i)
        nfar += b.far[i];
    // Per far move: its undo record and a log entry (the box it may grow).
    const size_t old_bytes = (size_t)nfar * (sizeof(lg_undo) + sizeof(lg_loose) + sizeof(int32_t));
    lg_undo *old = nfar > 0 ? qg_mem_alloc(alloc, old_bytes) : NULL;
    qg_status s = QG_ERR_NOMEM;
    if (nfar == 0 || old != NULL) {
        lg_mark m = {0,         g->items_capacity, g->next_capacity, g->cell_capacity, g->links.capacity,
                     g->item_high, g->strays,      g->refit,         false,            0,
                     nfar,      NULL,              old != NULL ? (lg_loose *)(old + nfar) : NULL, NULL};
        // No far move: no block, and no pointer arithmetic on NULL.
        m.which = m.box != NULL ? (int32_t *)(m.box + nfar) : NULL;
        g->mark = &m;
        g->fresh = false;
        int32_t done = 0;
        s = lg_batch_far(g, &b, old, &done);
        g->mark = NULL;
        if (s == QG_OK && look && (s = lg_batch_look(g)) != QG_OK)
            done = n;
        if (s != QG_OK) {
            lg_batch_unfar(g, &b, old, done);
            lg_give_back(g, &m);
        } else {
            qg_jobs_run(jobs, lg_batch_near, n, &b);
        }
    }
    qg_mem_free(alloc, old, old_bytes);
    qg_mem_free(alloc, b.far, (size_t)n);
    return s;
}

/* ---- a batch with static elements, given back -------------------------- */

static size_t lg_mark_bytes(int32_t cells, int32_t room)
{
    return sizeof(lg_mark) + ((size_t)cells + 31) / 32 * sizeof(uint32_t) +
           (size_t)room * (sizeof(lg_loose) + sizeof(int32_t));
}

/// Before qg_move_many's one-by-one path (index.c, move_many_serial): notes
/// what its n moves may grow. A static element's move inserts it into the
/// kind, which grows its loose box, links and node; a dynamic element's far
/// move grows the loose box of its new cell. The undo takes them out again
/// but keeps that growth. While the mark stands no insert or move re-fits
/// the world (they look at it after the batch): a re-fit would re-file every
/// element, and the undo's moves back would then need new growth, which may
/// fail. So the undo never allocates, and the loose boxes it must put back
/// are the ones logged: each move grows at most one, so min(n, cells)
/// entries hold them.
static void *loose_grid_batch_mark(qg_index *index, int32_t n)
{
    loose_grid *g = (loose_grid *)index;
    const int32_t cells = g->lcols * g->lrows, room = n < cells ? n : cells;
    const size_t bytes = lg_mark_bytes(cells, room);
    lg_mark *m = qg_mem_alloc(&index->alloc, bytes);
    if (m == NULL)
        return NULL;
    const size_t words = ((size_t)cells + 31) / 32;
    *m = (lg_mark){bytes, g->items_capacity, g->next_capacity, g->cell_capacity, g->links.capacity,
                   g->item_high, g->strays, g->refit, false, 0, room, (uint32_t *)(m + 1), NULL, NULL};
    memset(m->seen, 0, words * sizeof(uint32_t));
    m->box = (lg_loose *)(m->seen + words);
    m->which = (int32_t *)(m->box + room);
    g->mark = m;
    return m;
}

/// After an undo: gives back what the batch grew. The undo left every
/// element where it was, in its old node, so each logged loose box can
/// shrink back to its old box (which held its elements then, and holds them
/// again); the tight cells' lists are rebuilt from the boxes in the links
/// they hold (qg_lg_relink, cleanup's relink: as many links as before the
/// batch, which fit the old capacity); the nodes above the old high-water
/// mark are all free again. Shrinks only: never allocates, cannot fail.
static void lg_give_back(loose_grid *g, const lg_mark *m)
{
    qg_alloc *alloc = &g->base.alloc;
    if (m->logged > 0 && !m->lost) {
        for (int32_t j = m->logged; j-- > 0;) {
            lg_loose *c = &g->loose[m->which[j]];
            const lg_loose was = m->box[j];
            c->l = was.l, c->t = was.t, c->r = was.r, c->b = was.b; // (its list head is today's)
        }
        qg_lg_relink(g);
        const int32_t keep = lg_max32(m->links_capacity, g->links.high);
        qg_array_shrink(alloc, (void **)&g->links.data, &g->links.capacity, sizeof(qg_enode), keep);
    }
    bool above = false; // a live node above the old mark (none is expected)
    for (int32_t k = m->item_high; k < g->item_high; ++k)
        above |= g->items[k].h >= 0;
    if (g->item_high > m->item_high && !above) {
        // The free list is made again from the holes below the old
        // mark (the ones after the packed part, as lg_unlink keeps it).
        g->free_item = -1;
        for (int32_t k = m->item_high; k-- > g->packed;) {
            if (g->items[k].h < 0) {
                g->next[k] = g->free_item;
                g->free_item = k;
            }
        }
        g->item_high = m->item_high;
    }
    if (g->item_high <= m->item_high) {
        qg_array_shrink(alloc, (void **)&g->items, &g->items_capacity, sizeof(lg_item), m->items_capacity);
        qg_array_shrink(alloc, (void **)&g->next, &g->next_capacity, sizeof(int32_t), m->next_capacity);
    }
    // The handles in the kind are the ones before the batch, all below
    // the old capacity.
    qg_array_shrink(alloc, (void **)&g->cell, &g->cell_capacity, sizeof(uint32_t), m->cell_capacity);
    g->refit = m->refit;
    g->strays = m->strays;
}

/// After the batch: ends the mark, and after an undo (`undone`) first gives
/// back what the batch grew (lg_give_back).
static void loose_grid_batch_trim(qg_index *index, void *mark, bool undone)
{
    loose_grid *g = (loose_grid *)index;
    lg_mark *m = mark;
    g->mark = NULL;
    if (undone)
        lg_give_back(g, m);
    qg_mem_free(&index->alloc, m, m->bytes);
}

static void loose_grid_cleanup(qg_index *index)
{
    loose_grid *g = (loose_grid *)index;
    g->epoch = (g->epoch + 1) % LG_EPOCHS;
    const int32_t n = qg_lg_collect(g);
    qg_lg_refile(g, n);
    qg_lg_trim_steady(g);
    // A re-fit allocates, so cleanup only looks for crowding (a sample of
    // LG_CROWD_SAMPLE items) and leaves the re-fit to the next insert or
    // move.
    g->strays = 0;
    if (g->fit_wait > 0)
        g->fit_wait--;
    else if (n >= LG_FIT_MIN && !g->refit)
        g->refit = qg_lg_crowded(g, n);
}

/// qg_cleanup_parallel: loose_grid_cleanup with the gather of the boxes and
/// the shrink of the loose boxes on `jobs` (qg_lg_collect_refile_parallel);
/// the permutation, the relink, the trim and the crowding check as there.
/// Never allocates.
static void loose_grid_cleanup_parallel(qg_index *index, const qg_jobs *jobs)
{
    loose_grid *g = (loose_grid *)index;
    g->epoch = (g->epoch + 1) % LG_EPOCHS;
    const int32_t n = qg_lg_collect_refile_parallel(g, jobs);
    qg_lg_trim_steady(g);
    g->strays = 0;
    if (g->fit_wait > 0)
        g->fit_wait--;
    else if (n >= LG_FIT_MIN && !g->refit)
        g->refit = qg_lg_crowded(g, n);
}

static void loose_grid_clear(qg_index *index)
{
    loose_grid *g = (loose_grid *)index;
    const int32_t nl = g->lcols * g->lrows, nt = g->tcols * g->trows;
    g->fresh = false;
    for (int32_t i = 0; i < nl; ++i)
        g->loose[i] = lg_empty;
    memset(g->tight, 0xff, (size_t)nt * sizeof(int32_t));
    memset(g->start, 0, ((size_t)nl + 1) * sizeof(int32_t));
    qg_enode_pool_reset(&g->links);
    g->item_high = 0;
    g->packed = 0;
    g->free_item = -1;
    g->refit = false;
    g->strays = 0;
    g->fit_wait = 0;
    g->fit_next = LG_FIT_MIN; // the world stays; the next build looks again
}

/// The box of item k: its copy while fresh, else the base's.
static inline qg_rect lg_item_box(const loose_grid *g, int32_t k)
{
    return g->fresh ? g->items[k].box : g->base.boxes[g->items[k].h];
}

static void loose_grid_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                             qg_query_stats *stats)
{
    const loose_grid *g = (const loose_grid *)index;
    const lg_range q = lg_range_of(g, area.min_x, area.min_y, area.max_x, area.max_y);
    for (int32_t ty = q.y0; ty <= q.y1; ++ty) {
        for (int32_t tx = q.x0; tx <= q.x1; ++tx) {
            stats->nodes_visited++;
            for (int32_t e = g->tight[ty * g->tcols + tx]; e >= 0; e = g->links.data[e].next) {
                const int32_t i = g->links.data[e].element;
                const lg_loose *c = &g->loose[i];
                if (!lg_box_overlaps(c, area))
                    continue;
                // Once: in the first tight cell both ranges share.
                const lg_range cr = lg_cell_range(g, c);
                if (lg_max32(cr.x0, q.x0) != tx || lg_max32(cr.y0, q.y0) != ty)
                    continue;
                stats->nodes_visited++;
                for (int32_t k = c->head; k >= 0; k = g->next[k]) {
                    stats->elements_tested++;
                    if (qg_overlaps(lg_item_box(g, k), area) && !fn(g->items[k].h, user))
                        return;
                }
            }
        }
    }
}


static void loose_grid_stats(const qg_index *index, qg_stats *stats)
{
    const loose_grid *g = (const loose_grid *)index;
    stats->leaves = g->lcols * g->lrows;
    stats->nodes = stats->leaves + g->tcols * g->trows;
    stats->max_depth_reached = 1;
}

/// Tight cells at depth 0 (with the loose cells linked in them as the
/// count), then every non-empty loose box at depth 1 (with its elements).
static void loose_grid_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    const loose_grid *g = (const loose_grid *)index;
    const double w = qg_extent(g->wx0, g->wx1) / g->tcols, hgt = qg_extent(g->wy0, g->wy1) / g->trows;
    for (int32_t ty = 0; ty < g->trows; ++ty) {
        for (int32_t tx = 0; tx < g->tcols; ++tx) {
            int32_t count = 0;
            for (int32_t e = g->tight[ty * g->tcols + tx]; e >= 0; e = g->links.data[e].next)
                count++;
            const qg_rect r = {(float)(g->wx0 + tx * w), (float)(g->wy0 + ty * hgt),
                               tx + 1 == g->tcols ? g->wx1 : (float)(g->wx0 + (tx + 1) * w),
                               ty + 1 == g->trows ? g->wy1 : (float)(g->wy0 + (ty + 1) * hgt)};
            fn(r, 0, count, user);
        }
    }
    const int32_t nl = g->lcols * g->lrows;
    for (int32_t i = 0; i < nl; ++i) {
        const lg_loose *c = &g->loose[i];
        if (!(c->l <= c->r))
            continue;
        int32_t count = 0;
        for (int32_t k = c->head; k >= 0; k = g->next[k])
            count++;
        fn((qg_rect){c->l, c->t, c->r, c->b}, 1, count, user);
    }
}

/// qg_pairs: the search lives in loose_grid_pairs.c.
static void loose_grid_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    qg_lg_pairs(index, fn, user, stats);
}

/* ---- ray casts and nearest searches --------------------------- */
// Both walk the tight cells (the clamped grid: its border cells reach to
// infinity, so nothing lies outside it) and, through their links, the loose
// cells, whose boxes hold their elements' boxes. A loose cell is linked in
// every tight cell its box maps to, so it is handled in one of them only:
// the tight cell of a point of its box fixed by the query alone (the ray's
// entry point into the box, or the box's point nearest to the query point,
// either clamped into the box). That point is in the box, so (lg_map being
// monotonic) its tight cell is one of the box's and lists the loose cell;
// the walk reaches that tight cell whenever the loose box can still
// matter. Each element lives in one loose cell, so it is offered once.
//
// Rounding: lg_map computes (v - origin) * scale in float (of the halves,
// so it never overflows inside the world); the tight lines
// are computed in double as origin + i / scale. They disagree by a few ulps
// of |v| and |origin|, so bands and distance bounds are widened by
// lg_hair, 1e-5 of those magnitudes.

/// The widening that covers lg_map's rounding near coordinates of
/// magnitude `a` on an axis whose origin is `o`.
static inline double lg_hair(double a, float o)
{
    return 1e-5 * (a + fabs((double)o)) + 1e-30;
}

/// |v| when finite, else 0.
static inline double lg_fin(double v)
{
    return isfinite(v) ? fabs(v) : 0.0;
}

/// World coordinate of tight line i on an axis of origin o, scale s (tight
/// cells per unit), n cells: the border cells reach to infinity.
static inline double lg_line(int32_t i, float o, float s, int32_t n)
{
    if (i <= 0)
        return -INFINITY;
    if (i >= n)
        return INFINITY;
    return (double)o + (double)i / (double)s;
}

/// The hit test at the current max_t with the direction's inverses given
/// (qg_ray_slabs: the same answers as qg_ray_box bit for bit).
static inline bool lg_ray_hit(qg_rect b, const qg_ray *r, float ix, float iy, float *t)
{
    float t1;
    return qg_ray_slabs(b, r->ox, r->oy, r->dx, r->dy, ix, iy, r->max_t, t, &t1);
}

/// lg_ray_hit for a loose box: true for every loose box holding an element
/// box lg_ray_hit accepts at a finite t. With finite inverses the hit test
/// is monotonic in the box. An inverse that overflowed (a direction under
/// 1 / FLT_MAX) makes that axis's parameters infinities or NaN (0 times
/// infinity), and there a box can fail where a box inside it passes (an
/// edge at the origin gives NaN, which narrows nothing; a wider box's edge
/// gives an infinity that does): such an axis keeps only the boxes not
/// wholly behind the origin, which every element box hit at a finite t
/// (it holds the origin's coordinate on that axis) is inside.
static inline bool lg_ray_loose(qg_rect lb, const qg_ray *r, float ix, float iy, float *t)
{
    if (r->dx != 0.0f && !isfinite(ix)) {
        if (r->dx > 0.0f ? lb.max_x < r->ox : lb.min_x > r->ox)
            return false;
        lb.min_x = -INFINITY;
        lb.max_x = INFINITY;
    }
    if (r->dy != 0.0f && !isfinite(iy)) {
        if (r->dy > 0.0f ? lb.max_y < r->oy : lb.min_y > r->oy)
            return false;
        lb.min_y = -INFINITY;
        lb.max_y = INFINITY;
    }
    return lg_ray_hit(lb, r, ix, iy, t);
}

/// The loose cells linked in tight cell (tx, ty) that it owns for the ray:
/// the ray's entry point into the loose box, clamped into it, maps to
/// (tx, ty). Their elements are offered. False when the cast stopped.
static bool lg_ray_tight(const loose_grid *g, int32_t tx, int32_t ty, qg_ray *r)
{
    const float ix = r->dx == 0.0f ? 0.0f : 1.0f / r->dx, iy = r->dy == 0.0f ? 0.0f : 1.0f / r->dy;
    for (int32_t e = g->tight[ty * g->tcols + tx]; e >= 0; e = g->links.data[e].next) {
        const lg_loose *c = &g->loose[g->links.data[e].element];
        const qg_rect lb = {c->l, c->t, c->r, c->b};
        float a;
        // An element hit inside the loose box is never missed for the box.
        if (!lg_ray_loose(lb, r, ix, iy, &a))
            continue;
        const float mx = a * r->dx, my = a * r->dy;
        float px = r->dx == 0.0f ? r->ox : r->ox + mx, py = r->dy == 0.0f ? r->oy : r->oy + my;
        px = px < lb.min_x ? lb.min_x : (px > lb.max_x ? lb.max_x : px);
        py = py < lb.min_y ? lb.min_y : (py > lb.max_y ? lb.max_y : py);
        const lg_range p = lg_range_of(g, px, py, px, py);
        if (p.x0 != tx || p.y0 != ty)
            continue;
        for (int32_t k = c->head; k >= 0; k = g->next[k]) {
            float t;
            if (!lg_ray_hit(lg_item_box(g, k), r, ix, iy, &t))
                continue;
            const float m = r->fn(g->items[k].h, t, r->user);
            if (!(m >= 0.0f)) { // negative or NaN: stop
                r->stop = true;
                return false;
            }
            r->max_t = m < r->max_t ? m : r->max_t;
        }
    }
    return true;
}

/// qg_raycast: the tight rows the segment crosses in the direction of dy,
/// each row's cells in the direction of dx, widened by the hair (loose
/// boxes are tested exactly, so the tight walk needs no margin). A row or
/// cell entered past max_t ends its walk (strictly: ties are seen).
static void loose_grid_raycast(const qg_index *index, float ox, float oy, float dx, float dy, float max_t,
                               qg_ray_fn *fn, void *user)
{
    const loose_grid *g = (const loose_grid *)index;
    qg_ray r = qg_ray_start(ox, oy, dx, dy, max_t, fn, user);
    const double ye = dy == 0.0f ? oy : oy + (double)max_t * dy;
    const double yl = fmin(oy, ye), yh = fmax(oy, ye);
    const double hy = lg_hair(fabs(oy) + lg_fin(yl) + lg_fin(yh), g->oy);
    const int32_t lastx = g->tcols - 1, lasty = g->trows - 1;
    const int32_t y0 = lg_map((float)(yl - hy), g->oy, g->tsy, lasty), y1 = lg_map((float)(yh + hy), g->oy, g->tsy, lasty);
    qg_ray unbounded = r; // band entries unclipped by max_t, to end the walk
    unbounded.max_t = INFINITY;
    const int32_t sy = dy < 0.0f ? -1 : 1, sx = dx < 0.0f ? -1 : 1;
    for (int32_t i = 0, ty = sy > 0 ? y0 : y1; i <= y1 - y0; ++i, ty += sy) {
        const double bl = lg_line(ty, g->oy, g->tsy, g->trows), bh = lg_line(ty + 1, g->oy, g->tsy, g->trows);
        const double hb = lg_hair(lg_fin(bl) + lg_fin(bh) + fabs(oy), g->oy);
        const qg_rect band = {-INFINITY, (float)(bl - hb), INFINITY, (float)(bh + hb)};
        float ta, tb;
        if (!qg_ray_span(&unbounded, band, &ta, &tb))
            continue;
        if (ta > r.max_t)
            break; // the next rows' bands are entered later still
        tb = tb < r.max_t ? tb : r.max_t;
        // An entry at infinity (an overflowed inverse) says nothing of x:
        // the row is walked from the origin's column on.
        const double xa = dx == 0.0f || !isfinite(ta) ? ox : ox + (double)ta * dx;
        const double xb = dx == 0.0f ? ox : ox + (double)tb * dx;
        const double cl = fmin(xa, xb), ch = fmax(xa, xb);
        const double hc = lg_hair(fabs(ox) + lg_fin(cl) + lg_fin(ch), g->ox);
        const int32_t c0 = lg_map((float)(cl - hc), g->ox, g->tsx, lastx), c1 = lg_map((float)(ch + hc), g->ox, g->tsx, lastx);
        for (int32_t j = 0, tx = sx > 0 ? c0 : c1; j <= c1 - c0; ++j, tx += sx) {
            if (g->tight[ty * g->tcols + tx] < 0)
                continue;
            if (dx != 0.0f) {
                // Where the segment enters this (widened) column: past
                // max_t, so are the columns after it.
                const double edge = sx > 0 ? lg_line(tx, g->ox, g->tsx, g->tcols) - hc
                                           : lg_line(tx + 1, g->ox, g->tsx, g->tcols) + hc;
                if ((edge - ox) / dx > (double)r.max_t)
                    break;
            }
            if (!lg_ray_tight(g, tx, ty, &r))
                return;
        }
    }
}

/// Loose cells a nearest search gathered, with their boxes' distance2.
#define LG_NEAR_BATCH 128

typedef struct lg_near_cell {
    float d2;
    int32_t i;
} lg_near_cell;

/// Offers the gathered loose cells' elements, nearest cell first: the bound
/// falls fastest that way, and a cell farther than it ends the batch (its
/// elements lie in its box: none is nearer). Returns 0, the batch's new size.
static int lg_near_flush(const loose_grid *g, lg_near_cell *cells, int n, qg_near *q)
{
    // The nearest remaining cell each time, not a sort: the bound mostly
    // rules out the rest after a few cells.
    while (n > 0) {
        int best = 0;
        for (int a = 1; a < n; ++a)
            best = cells[a].d2 < cells[best].d2 ? a : best;
        if (cells[best].d2 > qg_near_bound(q))
            break;
        const int32_t i = cells[best].i;
        cells[best] = cells[--n];
        for (int32_t k = g->loose[i].head; k >= 0; k = g->next[k])
            qg_near_offer(q, g->items[k].h, qg_point_box_d2_fast(lg_item_box(g, k), q->x, q->y));
    }
    return 0;
}

/// Gathers the loose cells that tight cell (tx, ty) owns for the point (the
/// box's point nearest to it maps to (tx, ty)) and that are not farther
/// than the bound, unless the tight cell's own widened box is.
static void lg_near_tight(const loose_grid *g, int32_t tx, int32_t ty, qg_near *q, lg_near_cell *cells, int *n)
{
    int32_t e = g->tight[ty * g->tcols + tx];
    if (e < 0)
        return;
    const double l = lg_line(tx, g->ox, g->tsx, g->tcols), rr = lg_line(tx + 1, g->ox, g->tsx, g->tcols);
    const double b = lg_line(ty, g->oy, g->tsy, g->trows), t = lg_line(ty + 1, g->oy, g->tsy, g->trows);
    double ex = fmax(l - q->x, q->x - rr) - lg_hair(lg_fin(l) + lg_fin(rr) + fabs(q->x), g->ox);
    double ey = fmax(b - q->y, q->y - t) - lg_hair(lg_fin(b) + lg_fin(t) + fabs(q->y), g->oy);
    ex = ex > 0.0 ? ex : 0.0;
    ey = ey > 0.0 ? ey : 0.0;
    if (qg_near_floor2_xy(ex, ey) > qg_near_bound(q)) // the formula's rounding: subnormal ties at 0
        return;
    for (; e >= 0; e = g->links.data[e].next) {
        const int32_t i = g->links.data[e].element;
        const lg_loose *c = &g->loose[i];
        const qg_rect lb = {c->l, c->t, c->r, c->b};
        const float d2 = qg_point_box_d2_fast(lb, q->x, q->y);
        if (d2 > qg_near_bound(q))
            continue;
        const float px = q->x < lb.min_x ? lb.min_x : (q->x > lb.max_x ? lb.max_x : q->x);
        const float py = q->y < lb.min_y ? lb.min_y : (q->y > lb.max_y ? lb.max_y : q->y);
        const lg_range p = lg_range_of(g, px, py, px, py);
        if (p.x0 != tx || p.y0 != ty)
            continue;
        cells[(*n)++] = (lg_near_cell){d2, i};
        if (*n == LG_NEAR_BATCH)
            *n = lg_near_flush(g, cells, *n, q);
    }
}

/// qg_nearest: rings of tight cells around the point's cell until the next
/// ring is farther than qg_near_bound (strictly: a tie may win on its
/// handle) or the rings hold the whole tight grid. A loose cell's nearest
/// point lies in its owning tight cell, at least as far as that cell's
/// ring, and no element of it is nearer than that point.
static int32_t loose_grid_nearest(const qg_index *index, float x, float y, int32_t k, float max_distance2,
                                  qg_handle *handles, float *distances2)
{
    (void)distances2; // qg_nearest fills them from the boxes
    const loose_grid *g = (const loose_grid *)index;
    qg_near q;
    qg_near_start(&q, index, x, y, k, max_distance2, handles);
    q.once = true; // each element is listed in one node or cell
    const int32_t lastx = g->tcols - 1, lasty = g->trows - 1;
    const int32_t qx = lg_map(x, g->ox, g->tsx, lastx), qy = lg_map(y, g->oy, g->tsy, lasty);
    lg_near_cell cells[LG_NEAR_BATCH];
    int n = 0;
    for (int32_t r = 0;; ++r) {
        if (r > 0) {
            // Cells of this ring and beyond lie outside the square of the
            // rings before it: at least as far as its nearest side that has
            // cells beyond it.
            double lo = INFINITY;
            bool more = false;
            if (qx - r + 1 > 0) {
                const double e = lg_line(qx - r + 1, g->ox, g->tsx, g->tcols);
                lo = fmin(lo, x - e - lg_hair(fabs(e) + fabs(x), g->ox));
                more = true;
            }
            if (qx + r - 1 < lastx) {
                const double e = lg_line(qx + r, g->ox, g->tsx, g->tcols);
                lo = fmin(lo, e - x - lg_hair(fabs(e) + fabs(x), g->ox));
                more = true;
            }
            if (qy - r + 1 > 0) {
                const double e = lg_line(qy - r + 1, g->oy, g->tsy, g->trows);
                lo = fmin(lo, y - e - lg_hair(fabs(e) + fabs(y), g->oy));
                more = true;
            }
            if (qy + r - 1 < lasty) {
                const double e = lg_line(qy + r, g->oy, g->tsy, g->trows);
                lo = fmin(lo, e - y - lg_hair(fabs(e) + fabs(y), g->oy));
                more = true;
            }
            if (!more || qg_near_floor2(lo) > qg_near_bound(&q))
                break;
        }
        const int32_t ax = qx - r > 0 ? qx - r : 0, bx = qx + r < lastx ? qx + r : lastx;
        const int32_t ay = qy - r + 1 > 0 ? qy - r + 1 : 0, by = qy + r - 1 < lasty ? qy + r - 1 : lasty;
        const bool bottom = qy - r >= 0, top = r > 0 && qy + r <= lasty;
        const bool left = qx - r >= 0, right = r > 0 && qx + r <= lastx;
        for (int32_t ux = ax; ux <= bx; ++ux) {
            if (bottom)
                lg_near_tight(g, ux, qy - r, &q, cells, &n);
            if (top)
                lg_near_tight(g, ux, qy + r, &q, cells, &n);
        }
        for (int32_t uy = ay; uy <= by; ++uy) {
            if (left)
                lg_near_tight(g, qx - r, uy, &q, cells, &n);
            if (right)
                lg_near_tight(g, qx + r, uy, &q, cells, &n);
        }
        // The next ring's bound needs this ring's offers (a tight cell is
        // big: the point's own mostly fills the heap).
        n = lg_near_flush(g, cells, n, &q);
    }
    (void)lg_near_flush(g, cells, n, &q);
    return qg_near_finish(&q);
}

static qg_in_force loose_grid_tune_hint(const qg_config *c, const qg_config *user)
{
    (void)c;
    const float elem = user->element_size > 0.0f ? user->element_size
                       : user->cell_size > 0.0f  ? user->cell_size / 10.0f
                                                 : 0.0f;
    return (qg_in_force){elem, 0.0f};
}

/// Cells of 10 median elements; the world it re-fits itself.
static bool loose_grid_tune_differs(const qg_config *c, qg_in_force now, const qg_learned *learned)
{
    (void)c;
    return qg_tune_off_by(now.elem, learned->elem, QG_TUNE_RATIO);
}

static void loose_grid_tune_stats(const qg_config *c, qg_stats *s)
{
    s->cell_size = c->cell_size;
}

static const qg_tune_rule loose_grid_tune = {
    .hint = loose_grid_tune_hint,
    .differs = loose_grid_tune_differs,
    .stats = loose_grid_tune_stats,
};

static qg_status loose_grid_validate(const qg_index *index, size_t *bytes)
{
    return qg_lg_validate(index, bytes);
}

static int32_t lg_min32(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

/// A read's scalars, before any array is sized from them: what qg_validate
/// takes on trust (the cell count, whose product would overflow; a finite
/// world, as an infinite one maps to NaN; the margins; the counters, which
/// only count up from small values), and the configured bounds and sizes a
/// later re-fit lays a world out from, which qg_create checked.
static bool lg_read_sane(const loose_grid *g)
{
    const qg_config *c = &g->base.config;
    const bool config = qg_box_valid(c->bounds) && c->bounds.min_x < c->bounds.max_x &&
                        c->bounds.min_y < c->bounds.max_y && isfinite(c->cell_size) && c->cell_size >= 0.0f &&
                        isfinite(c->element_size) && c->element_size >= 0.0f;
    const bool world = g->lcols >= 1 && g->lcols <= LG_MAX_SIDE && g->lrows >= 1 && g->lrows <= LG_MAX_SIDE &&
                       (int64_t)g->lcols * g->lrows <= LG_MAX_CELLS && isfinite(g->wx0) && isfinite(g->wy0) &&
                       isfinite(g->wx1) && isfinite(g->wy1) && g->wx0 < g->wx1 && g->wy0 < g->wy1 &&
                       isfinite(g->margin) && g->margin >= 0.0f && isfinite(g->cfg_margin) && g->cfg_margin >= 0.0f;
    const bool counters = g->fit_wait >= 0 && g->fit_wait <= LG_FIT_WAIT && g->strays >= 0 &&
                          g->strays <= INT32_MAX / 2 && g->epoch < LG_EPOCHS && g->item_high >= 0;
    const bool links = g->links.high >= 0 && g->links.live >= 0 && g->links.live <= g->links.high &&
                       g->links.free_head >= -1 && g->links.free_head < g->links.high;
    return config && world && counters && links;
}

/// The kind's part of the state walk (state.h). Every array goes whole up to
/// what a later call can read (the item and link pools to their high-water
/// marks, holes included), with its capacity, and nothing is rebuilt: the
/// order of the lists (loose cells' items, tight cells' links) is what the
/// last cleanup, relink, batch undo and moves left, which a rebuild would
/// not reproduce. The mapping (origin, scales, tight sides) is a function of
/// the world and the loose sides, so it is derived (qg_lg_layout), not
/// written. `mark` lives inside one batch call: never between calls.
static void loose_grid_state(qg_state *s, qg_index *d, const qg_index *src)
{
    loose_grid *dg = (loose_grid *)d;
    const loose_grid *sg = (const loose_grid *)src;
    const bool reading = qg_st_reading(s);
    QG_ST(s, dg, sg, lcols);
    QG_ST(s, dg, sg, lrows);
    QG_ST(s, dg, sg, wx0);
    QG_ST(s, dg, sg, wy0);
    QG_ST(s, dg, sg, wx1);
    QG_ST(s, dg, sg, wy1);
    QG_ST(s, dg, sg, margin);
    QG_ST(s, dg, sg, cell_w);
    QG_ST(s, dg, sg, cfg_margin);
    QG_ST_BOOL(s, dg, sg, auto_size);
    QG_ST(s, dg, sg, fit_next);
    QG_ST(s, dg, sg, fit_wait);
    QG_ST_BOOL(s, dg, sg, refit);
    QG_ST(s, dg, sg, strays);
    QG_ST(s, dg, sg, epoch);
    QG_ST_BOOL(s, dg, sg, fresh);
    QG_ST(s, dg, sg, steady_high);
    QG_ST(s, dg, sg, item_high);
    QG_ST(s, dg, sg, packed);
    QG_ST(s, dg, sg, free_item);
    QG_ST(s, dg, sg, links.high);
    QG_ST(s, dg, sg, links.free_head);
    QG_ST(s, dg, sg, links.live);
    if (!qg_st_ok(s))
        return;
    if (reading && !lg_read_sane(dg)) {
        qg_st_fail(s, QG_ERR_INVALID);
        return;
    }
    if (reading || s->mode == QG_ST_COPY)
        qg_lg_layout(dg, dg->wx0, dg->wy0, dg->wx1, dg->wy1, dg->lcols, dg->lrows);
    const int32_t nl = sg->lcols * sg->lrows, nt = sg->tcols * sg->trows;
    // (the min: qg_st_array wants used <= capacity; a state that breaks it
    // fails qg_validate, here and in the original alike)
    qg_st_array(s, (void **)&dg->loose, &dg->loose_capacity, sg->loose, sg->loose_capacity,
                lg_min32(nl, sg->loose_capacity), sizeof(lg_loose));
    qg_st_array(s, (void **)&dg->tight, &dg->tight_capacity, sg->tight, sg->tight_capacity,
                lg_min32(nt, sg->tight_capacity), sizeof(int32_t));
    qg_st_array(s, (void **)&dg->links.data, &dg->links.capacity, sg->links.data, sg->links.capacity,
                lg_min32(sg->links.high, sg->links.capacity), sizeof(qg_enode));
    qg_st_array(s, (void **)&dg->start, &dg->start_capacity, sg->start, sg->start_capacity,
                lg_min32(nl + 1, sg->start_capacity), sizeof(int32_t));
    // (all zero between calls, but written: past dst's old cells a copy's
    // array holds whatever was there)
    qg_st_array(s, (void **)&dg->count, &dg->count_capacity, sg->count, sg->count_capacity,
                lg_min32(nl, sg->count_capacity), sizeof(int32_t));
    qg_st_array(s, (void **)&dg->cell, &dg->cell_capacity, sg->cell, sg->cell_capacity,
                lg_min32(src->box_high, sg->cell_capacity), sizeof(uint32_t));
    qg_st_array(s, (void **)&dg->items, &dg->items_capacity, sg->items, sg->items_capacity,
                lg_min32(sg->item_high, sg->items_capacity), sizeof(lg_item));
    qg_st_array(s, (void **)&dg->next, &dg->next_capacity, sg->next, sg->next_capacity,
                lg_min32(sg->item_high, sg->next_capacity), sizeof(int32_t));
    if (reading && qg_st_ok(s)) {
        // qg_validate counts the links' free list without bounds on its
        // slots: they are checked here.
        if (dg->links.high > dg->links.capacity) {
            qg_st_fail(s, QG_ERR_INVALID);
            return;
        }
        int32_t steps = 0;
        for (int32_t e = dg->links.free_head; e >= 0; e = dg->links.data[e].next) {
            if (e >= dg->links.high || ++steps > dg->links.high) {
                qg_st_fail(s, QG_ERR_INVALID);
                return;
            }
        }
    }
}

QG_KIND_CLASS_EX(loose_grid, QG_LOOSE_GRID, loose_grid, .state = loose_grid_state, .tune = &loose_grid_tune,
                 .pairs_part = qg_lg_pairs_part, .move_many = loose_grid_move_many,
                 .cleanup_parallel = loose_grid_cleanup_parallel,
                 .raycast = loose_grid_raycast, .nearest = loose_grid_nearest,
                 .insert_many = loose_grid_insert_many, .batch_mark = loose_grid_batch_mark,
                 .batch_trim = loose_grid_batch_trim);

