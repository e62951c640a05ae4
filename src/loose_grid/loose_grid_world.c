// SPDX-License-Identifier: MIT
// QG_LOOSE_GRID, the maintenance passes: qg_cleanup's in-place re-sort of
// the items by loose cell, the shrink of the loose boxes and the relink of
// the tight cells (never allocating), and the re-fit of the world to the
// elements (planned from a sample, run where an allocation may fail). The
// overview of the kind is in loose_grid.h.
#include "loose_grid.h"

#include <stdlib.h>

/// Rebuilds every tight cell's list from the loose boxes, in place: a
/// counting sort by tight cell into the link pool. Each tight cell's links
/// end up contiguous and in loose-cell order, so the pair loop and queries
/// stream them instead of chasing links that months of frees and takes have
/// scattered over the pool. Needs no more links than the pool holds live,
/// as long as no loose range grew since the links were made.
void qg_lg_relink(loose_grid *g)
{
    const int32_t nl = g->lcols * g->lrows, nt = g->tcols * g->trows;
    int32_t *tight = g->tight; // counts, then segment ends, then starts
    qg_enode *links = g->links.data;
    memset(tight, 0, (size_t)nt * sizeof(int32_t));
    for (int32_t i = 0; i < nl; ++i) {
        const lg_range r = lg_cell_range(g, &g->loose[i]);
        for (int32_t ty = r.y0; ty <= r.y1; ++ty)
            for (int32_t tx = r.x0; tx <= r.x1; ++tx)
                tight[ty * g->tcols + tx]++;
    }
    int32_t total = 0;
    for (int32_t t = 0; t < nt; ++t) {
        total += tight[t];
        tight[t] = total;
    }
    for (int32_t i = nl - 1; i >= 0; --i) {
        const lg_range r = lg_cell_range(g, &g->loose[i]);
        for (int32_t ty = r.y0; ty <= r.y1; ++ty)
            for (int32_t tx = r.x0; tx <= r.x1; ++tx)
                links[--tight[ty * g->tcols + tx]].element = i;
    }
    for (int32_t t = nt - 1, end = total; t >= 0; --t) {
        const int32_t start = tight[t];
        if (start == end) {
            tight[t] = -1;
            continue;
        }
        for (int32_t k = start; k < end - 1; ++k)
            links[k].next = k + 1;
        links[end - 1].next = -1;
        end = start;
    }
    g->links.high = total;
    g->links.live = total;
    g->links.free_head = -1;
}

/// Gives back the spare capacity of an array (shrinking never fails).
static void lg_trim(qg_alloc *alloc, void **data, int32_t *capacity, size_t elem, int32_t keep, int32_t slack)
{
    if (keep < 16)
        keep = 16; // the smallest block qg_txn_reserve makes
    if (*capacity <= keep + slack)
        return;
    *data = qg_mem_resize(alloc, *data, (size_t)*capacity * elem, (size_t)keep * elem);
    *capacity = keep;
}

/// Once no handle was issued since the last cleanup (a steady population),
/// the per-element arrays shrink to what is in use, the base's boxes
/// included: after start-up, memory is what the elements need, not what the
/// last growth step left. Waiting for a steady call keeps a growing
/// population from shrinking and regrowing every frame. The items keep a
/// sixteenth spare for the relinks of far moves between cleanups.
void qg_lg_trim_steady(loose_grid *g)
{
    qg_index *index = &g->base;
    const int32_t high = index->box_high;
    if (high > 0 && high == g->steady_high) {
        lg_trim(&index->alloc, (void **)&index->boxes, &index->box_capacity, sizeof(qg_rect), high, high / 64);
        lg_trim(&index->alloc, (void **)&g->cell, &g->cell_capacity, sizeof(uint32_t), high, high / 64);
        const int32_t n = index->count, keep = n + n / 16;
        lg_trim(&index->alloc, (void **)&g->items, &g->items_capacity, sizeof(lg_item), keep, n / 8);
        lg_trim(&index->alloc, (void **)&g->next, &g->next_capacity, sizeof(int32_t), keep, n / 8);
    }
    g->steady_high = high;
}

/// Cleanup, step 1: every live item, in slot order, gets its element's
/// current box and its loose cell (the cell of its centre, kept in `next`
/// as the sort key, counted in `count`); holes close up. Returns the number
/// of items.
int32_t qg_lg_collect(loose_grid *g)
{
    lg_item *items = g->items;
    int32_t *key = g->next, *count = g->count;
    const qg_rect *boxes = g->base.boxes;
    const uint32_t *cell = g->cell;
    const int32_t high = g->item_high;
    int32_t w = 0;
    for (int32_t k = 0; k < high; ++k) {
        if (k + LG_AHEAD < high && items[k + LG_AHEAD].h >= 0)
            LG_PREFETCH(&boxes[items[k + LG_AHEAD].h]);
        const qg_handle h = items[k].h;
        if (h < 0)
            continue;
        const int32_t c = (int32_t)(cell[h] & LG_CELL_MASK);
        items[w] = (lg_item){h, boxes[h]};
        key[w] = c;
        count[c]++;
        w++;
    }
    return w;
}

/// The margin would take loose box `fit` into tight cells its old box `old`
/// was not linked in: it is clipped to the old box instead (which holds
/// every element's box: each is inside its cell's loose box), so the cell
/// needs no new link and cleanup no memory. The elements whose margin no
/// longer fits are marked as moved in this epoch: their next move checks
/// the loose box itself.
static void lg_clip(loose_grid *g, lg_loose *fit, const lg_loose *old, const lg_item *items, int32_t s0, int32_t end)
{
    fit->l = fit->l > old->l ? fit->l : old->l;
    fit->t = fit->t > old->t ? fit->t : old->t;
    fit->r = fit->r < old->r ? fit->r : old->r;
    fit->b = fit->b < old->b ? fit->b : old->b;
    for (int32_t q = s0; q < end; ++q) {
        if (!lg_inside_loose(lg_fatten(g, items[q].box), fit)) {
            const qg_handle h = items[q].h;
            g->cell[h] = (g->cell[h] & LG_CELL_MASK) | g->epoch << LG_CELL_BITS;
        }
    }
}

/// Pieces a parallel cleanup cuts the loose cells into: a few per worker, so
/// the job system can even them out.
#define LG_PAR_PIECES 16

/// Cell c's run [s0, end) is sorted: its list (the run's links, in `next`),
/// its loose box (its elements' boxes plus the margin, clipped by lg_clip
/// where that would need new links).
static inline void lg_finish_cell(loose_grid *g, int32_t c, int32_t s0, int32_t end, float m)
{
    const lg_item *items = g->items;
    int32_t *key = g->next;
    lg_loose *lc = &g->loose[c];
    if (s0 == end) {
        *lc = lg_empty;
        return;
    }
    float l = INFINITY, t = INFINITY, r = -INFINITY, b = -INFINITY;
    for (int32_t q = s0; q < end; ++q) {
        const qg_rect e = items[q].box;
        l = e.min_x < l ? e.min_x : l;
        t = e.min_y < t ? e.min_y : t;
        r = e.max_x > r ? e.max_x : r;
        b = e.max_y > b ? e.max_y : b;
        key[q] = q + 1;
    }
    key[end - 1] = -1;
    // (the same rounding as lg_fatten, so the moves' test agrees)
    lg_loose fit = {s0, l - m, t - m, r + m, b + m};
    const lg_range had = lg_cell_range(g, lc), now = lg_range_of(g, fit.l, fit.t, fit.r, fit.b);
    if (now.x0 < had.x0 || now.y0 < had.y0 || now.x1 > had.x1 || now.y1 > had.y1)
        lg_clip(g, &fit, lc, items, s0, end);
    *lc = fit;
}

/// Cleanup, step 2: the items into cell order, in place (American flag
/// sort: each bucket's next unsorted slot is `count`), and then, cell by
/// cell while its run is in cache, the run's list, the loose box of its
/// fattened boxes, and the run's start. Leaves `count` zeroed.
static void lg_sort(loose_grid *g, int32_t n, bool permute_only)
{
    const int32_t nl = g->lcols * g->lrows;
    lg_item *items = g->items;
    int32_t *key = g->next, *count = g->count, *start = g->start;
    int32_t sum = 0;
    for (int32_t c = 0; c < nl; ++c) {
        const int32_t m = count[c];
        start[c] = sum;
        count[c] = sum;
        sum += m;
    }
    start[nl] = n;
    const float m = g->margin;
    for (int32_t c = 0; c < nl; ++c) {
        const int32_t s0 = start[c], end = start[c + 1];
        for (int32_t p = count[c]; p < end; p = count[c]) {
            lg_item it = items[p];
            int32_t k = key[p];
            while (k != c) {
                // Place `it` at the first unsorted slot of its bucket,
                // skipping the ones already holding their own.
                int32_t q = count[k];
                while (key[q] == k)
                    ++q;
                count[k] = q + 1;
                const lg_item t = items[q];
                const int32_t tk = key[q];
                items[q] = it;
                key[q] = k;
                it = t;
                k = tk;
            }
            items[p] = it;
            count[c] = p + 1;
        }
        count[c] = 0;
        if (!permute_only)
            lg_finish_cell(g, c, s0, end, m);
    }
}

/// Loose cells [c0, c1) of a parallel cleanup, after lg_sort's permutation:
/// each cell writes only its own loose box, its run's links and its
/// elements' `cell` words, so ranges of cells run at once.
static void lg_finish_task(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    loose_grid *g = context;
    const int32_t nl = g->lcols * g->lrows;
    int64_t c0, c1, i0, i1;
    for (int32_t p = begin; p < end; ++p) {
        // LG_PAR_PIECES pieces of about equal items (start[] splits them).
        qg_part_range(g->start[nl], p, LG_PAR_PIECES, &i0, &i1);
        c0 = p == 0 ? 0 : qg_lg_cell_at(g, i0);
        c1 = p == LG_PAR_PIECES - 1 ? nl : qg_lg_cell_at(g, i1);
        for (int32_t c = (int32_t)c0; c < (int32_t)c1; ++c)
            lg_finish_cell(g, c, g->start[c], g->start[c + 1], g->margin);
    }
}

/// Cleanup's collect, in parallel over slices of the items: each live item
/// gets its element's box and its sort key (-1 for a hole). The boxes are
/// gathered by handle, the random reads that make collect slow; counting
/// and closing the holes stay serial (lg_collect_close).
static void lg_collect_task(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    loose_grid *g = context;
    lg_item *items = g->items;
    int32_t *key = g->next;
    const qg_rect *boxes = g->base.boxes;
    const uint32_t *cell = g->cell;
    for (int32_t k = begin; k < end; ++k) {
        if (k + LG_AHEAD < end && items[k + LG_AHEAD].h >= 0)
            LG_PREFETCH(&boxes[items[k + LG_AHEAD].h]);
        const qg_handle h = items[k].h;
        if (h < 0) {
            key[k] = -1;
            continue;
        }
        items[k].box = boxes[h];
        key[k] = (int32_t)(cell[h] & LG_CELL_MASK);
    }
}

/// qg_lg_collect, qg_lg_refile's sort and its relink with the parallel-
/// friendly work on `jobs`: the gather of the boxes (lg_collect_task) and
/// the loose boxes of the sorted runs (lg_finish_task). The in-place
/// permutation, the counts and the tight cells' relink stay serial. The
/// same result as qg_lg_collect then qg_lg_refile. Returns the items.
int32_t qg_lg_collect_refile_parallel(loose_grid *g, const qg_jobs *jobs)
{
    qg_jobs_run(jobs, lg_collect_task, g->item_high, g);
    lg_item *items = g->items;
    int32_t *key = g->next, *count = g->count;
    int32_t w = 0;
    for (int32_t k = 0; k < g->item_high; ++k) {
        const int32_t c = key[k];
        if (c < 0)
            continue;
        items[w] = items[k];
        key[w] = c;
        count[c]++;
        w++;
    }
    lg_sort(g, w, true);
    qg_jobs_run(jobs, lg_finish_task, LG_PAR_PIECES, g);
    g->packed = w;
    g->item_high = w;
    g->free_item = -1;
    g->fresh = true;
    qg_lg_relink(g);
    return w;
}

/// Lays the n collected items out in loose-cell order and rebuilds the
/// tight cells' lists: the end of qg_cleanup's pass and of a re-fit.
void qg_lg_refile(loose_grid *g, int32_t n)
{
    lg_sort(g, n, false);
    g->packed = n;
    g->item_high = n;
    g->free_item = -1;
    g->fresh = true;
    qg_lg_relink(g);
}

/// The k-th smallest of a[0, n) (quickselect; the values are finite).
static float lg_select(float *a, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const float pivot = a[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot)
                ++i;
            while (a[j] > pivot)
                --j;
            if (i <= j) {
                const float t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
    return a[k];
}

/// Centres of up to LG_SAMPLE live elements, evenly spread over the
/// handles (element oh taken with box obox). Returns how many.
static int lg_sample(const loose_grid *g, qg_handle oh, qg_rect obox, float *xs, float *ys, float *ws)
{
    const qg_index *index = &g->base;
    const int32_t high = index->box_high, stride = high / LG_SAMPLE + 1;
    int m = 0;
    for (int32_t h = 0; h < high && m < LG_SAMPLE; h += stride) {
        if (!qg_slot_live(index, h))
            continue;
        const qg_rect b = h == oh ? obox : index->boxes[h];
        xs[m] = b.min_x * 0.5f + b.max_x * 0.5f;
        ys[m] = b.min_y * 0.5f + b.max_y * 0.5f;
        const float w = b.max_x - b.min_x, hgt = b.max_y - b.min_y; // (may overflow to +inf: still ordered)
        ws[m] = w > hgt ? w : hgt;
        m++;
    }
    return m;
}

static float lg_to_float(double v)
{
    return v < -(double)FLT_MAX ? -FLT_MAX : v > (double)FLT_MAX ? FLT_MAX : (float)v;
}

/// [lo - pad, hi + pad] in float, never empty.
static void lg_widen(float lo, float hi, double pad, float *a, float *b)
{
    *a = lg_to_float((double)lo - pad);
    *b = lg_to_float((double)hi + pad);
    if (!(*a < *b)) {
        *a = nextafterf(*a, -FLT_MAX);
        *b = nextafterf(*b, FLT_MAX);
    }
}

/// Cells of the configured size, but not many more than the elements (an
/// empty cell still costs its 32 bytes; bounds far too large configure a
/// million): at most max(LG_FIT_CELLS, 2 per element).
static void lg_cap_cells(int32_t *cols, int32_t *rows, int32_t n)
{
    int64_t cap = 2 * (int64_t)n > LG_FIT_CELLS ? 2 * (int64_t)n : LG_FIT_CELLS;
    cap = cap < LG_MAX_CELLS ? cap : LG_MAX_CELLS;
    if ((int64_t)*cols * *rows > cap) {
        const double f = sqrt((double)cap / ((double)*cols * (double)*rows));
        *cols = (int32_t)((double)*cols * f);
        *rows = (int32_t)((double)*rows * f);
        *cols = *cols < 1 ? 1 : *cols;
        *rows = *rows < 1 ? 1 : *rows;
    }
}

/// The world for n elements (element oh with box obox): the configured one
/// when a sample of their centres fills the bounds, else fitted to the
/// sample (see the file's header).
void qg_lg_plan_world(const loose_grid *g, int32_t n, qg_handle oh, qg_rect obox, lg_plan *p)
{
    const qg_config *c = &g->base.config;
    const qg_rect bd = c->bounds;
    float xs[LG_SAMPLE], ys[LG_SAMPLE], ws[LG_SAMPLE];
    const int m = n >= LG_FIT_MIN ? lg_sample(g, oh, obox, xs, ys, ws) : 0;
    const double bx = qg_extent(bd.min_x, bd.max_x), by = qg_extent(bd.min_y, bd.max_y);
    *p = (lg_plan){bd.min_x, bd.min_y, bd.max_x, bd.max_y, 0, 0, c->cell_size, g->cfg_margin,
                   bd.min_x, bd.min_y, bd.max_x, bd.max_y};
    bool configured = true;
    if (m >= LG_FIT_MIN) {
        const int k = m / 256;
        p->qx0 = lg_select(xs, m, k);
        p->qx1 = lg_select(xs, m, m - 1 - k);
        p->qy0 = lg_select(ys, m, k);
        p->qy1 = lg_select(ys, m, m - 1 - k);
        const double ex = qg_extent(p->qx0, p->qx1), ey = qg_extent(p->qy0, p->qy1);
        configured = p->qx0 >= bd.min_x && p->qx1 <= bd.max_x && p->qy0 >= bd.min_y && p->qy1 <= bd.max_y &&
                     2.0 * ex >= bx && 2.0 * ey >= by;
        if (!configured) {
            // An eighth more than the quantiles (and a cell, for a pile in
            // one spot): a crowd that wanders stays inside for a while.
            if (g->auto_size) {
                // Cells chosen from bounds far too large for the elements
                // would hold them all: size cells and margin by the
                // elements' median width instead.
                const float w = lg_select(ws, m, m / 2);
                if (w > 0.0f && w < FLT_MAX / (2.0f * LG_CELL_WIDTHS)) {
                    p->cell = LG_CELL_WIDTHS * w;
                    p->margin = 0.5f * w;
                }
            }
            const double cell = p->cell;
            lg_widen(p->qx0, p->qx1, ex / 8.0 + cell, &p->x0, &p->x1);
            lg_widen(p->qy0, p->qy1, ey / 8.0 + cell, &p->y0, &p->y1);
            int32_t cols = qg_lg_side(qg_extent(p->x0, p->x1), cell), rows = qg_lg_side(qg_extent(p->y0, p->y1), cell);
            lg_cap_cells(&cols, &rows, n);
            p->lcols = cols;
            p->lrows = rows;
        }
    }
    if (configured) {
        int32_t cols = qg_lg_side(bx, c->cell_size), rows = qg_lg_side(by, c->cell_size);
        while ((int64_t)cols * rows > LG_MAX_CELLS) {
            if (cols >= rows)
                cols = (cols + 1) / 2;
            else
                rows = (rows + 1) / 2;
        }
        // The configured world with cells of a median taken from a mixed
        // population (half 2^-100 wide, half 2^100) is a million cells for
        // 390 elements: once there are elements, the same cap as a fitted
        // world.
        if (m >= LG_FIT_MIN)
            lg_cap_cells(&cols, &rows, n);
        p->lcols = cols;
        p->lrows = rows;
    }
}

/// Whether re-fitting to plan p is worth a rebuild: the elements' quantile
/// box leaves the world (they pile on its border cells), the world is far
/// larger than the plan's (they crowd a few cells), or the population has
/// grown to allow twice the cells. Otherwise the world is good enough: the
/// margins keep a re-fit from following every small drift.
bool qg_lg_plan_better(const loose_grid *g, const lg_plan *p)
{
    if (p->x0 == g->wx0 && p->y0 == g->wy0 && p->x1 == g->wx1 && p->y1 == g->wy1 && p->lcols == g->lcols &&
        p->lrows == g->lrows && p->margin == g->margin)
        return false;
    if (p->cell > 4.0f * g->cell_w || g->cell_w > 4.0f * p->cell)
        return true;
    if (p->qx0 < g->wx0 || p->qx1 > g->wx1 || p->qy0 < g->wy0 || p->qy1 > g->wy1)
        return true;
    const double have = qg_extent(g->wx0, g->wx1) * qg_extent(g->wy0, g->wy1);
    const double want = qg_extent(p->x0, p->x1) * qg_extent(p->y0, p->y1);
    if (have > 4.0 * want)
        return true;
    // Far more cells than the plan's: a grid laid out before there were
    // elements to count (a re-tune's fresh structure).
    if ((int64_t)g->lcols * g->lrows > 4 * (int64_t)p->lcols * p->lrows)
        return true;
    return (int64_t)p->lcols * p->lrows >= 2 * (int64_t)g->lcols * g->lrows;
}

/// Whether cleanup should ask the next insert or move to look at the world:
/// a sample of the items (in cell order, boxes current) has a 32nd of its
/// centres outside the world, or lies in under an eighth of it.
bool qg_lg_crowded(const loose_grid *g, int32_t n)
{
    const int32_t stride = n / LG_CROWD_SAMPLE + 1;
    int32_t m = 0, out = 0;
    float l = INFINITY, t = INFINITY, r = -INFINITY, b = -INFINITY;
    for (int32_t k = 0; k < n; k += stride, ++m) {
        const qg_rect e = g->items[k].box;
        const float cx = e.min_x * 0.5f + e.max_x * 0.5f, cy = e.min_y * 0.5f + e.max_y * 0.5f;
        out += (cx < g->wx0) | (cx > g->wx1) | (cy < g->wy0) | (cy > g->wy1);
        l = cx < l ? cx : l;
        t = cy < t ? cy : t;
        r = cx > r ? cx : r;
        b = cy > b ? cy : b;
    }
    if (32 * out > m)
        return true;
    const double cell = g->cell_w;
    const double need = (qg_extent(l, r) + 2.0 * cell) * (qg_extent(t, b) + 2.0 * cell);
    return 8.0 * need < qg_extent(g->wx0, g->wx1) * qg_extent(g->wy0, g->wy1);
}

/// qg_lg_collect for a new world: each element's loose cell is computed from
/// its box (and written to its `cell` word, with an epoch other than the
/// current one: the rebuilt loose box holds its box plus the margin).
static int32_t lg_collect_refit(loose_grid *g)
{
    lg_item *items = g->items;
    int32_t *key = g->next, *count = g->count;
    const qg_rect *boxes = g->base.boxes;
    const int32_t high = g->item_high;
    const uint32_t seen = (g->epoch + LG_EPOCHS - 1) % LG_EPOCHS;
    int32_t w = 0;
    for (int32_t k = 0; k < high; ++k) {
        const qg_handle h = items[k].h;
        if (h < 0)
            continue;
        const int32_t c = lg_loose_of(g, boxes[h]);
        g->cell[h] = (uint32_t)c | seen << LG_CELL_BITS;
        items[w] = (lg_item){h, boxes[h]};
        key[w] = c;
        count[c]++;
        w++;
    }
    return w;
}

/// Moves the index into plan p's world (element oh given box obox: the box
/// of a move, or of an insert whose slot is taken and whose item is
/// reserved; oh = -1 for none, as a batch move re-fits after its moves). Everything is allocated first: the new cell arrays, and the
/// links their loose boxes need (computed from the elements, before any
/// change); QG_ERR_NOMEM then leaves the index as it was (the caller's txn
/// shrinks the links back). Then the old arrays go, and every element is
/// re-filed as qg_cleanup does (the loose boxes come out as computed, so
/// nothing is clipped and the links suffice).
qg_status qg_lg_refit(loose_grid *g, qg_txn *txn, const lg_plan *p, qg_handle oh, qg_rect obox, bool insert)
{
    qg_index *index = &g->base;
    qg_alloc *alloc = &index->alloc;
    loose_grid next = *g; // the new mapping, computed with before any change
    qg_lg_layout(&next, p->x0, p->y0, p->x1, p->y1, p->lcols, p->lrows);
    next.margin = p->margin;
    const int32_t nl = next.lcols * next.lrows, nt = next.tcols * next.trows;
    const size_t loose_bytes = (size_t)nl * sizeof(lg_loose), tight_bytes = (size_t)nt * sizeof(int32_t),
                 start_bytes = ((size_t)nl + 1) * sizeof(int32_t), count_bytes = (size_t)nl * sizeof(int32_t);
    lg_loose *loose = qg_mem_alloc(alloc, loose_bytes);
    int32_t *tight = loose ? qg_mem_alloc(alloc, tight_bytes) : NULL;
    int32_t *start = tight ? qg_mem_alloc(alloc, start_bytes) : NULL;
    int32_t *count = start ? qg_mem_alloc(alloc, count_bytes) : NULL;
    bool ok = count != NULL;
    if (ok) {
        for (int32_t i = 0; i < nl; ++i)
            loose[i] = lg_empty;
        for (qg_handle h = 0; h < index->box_high; ++h) {
            if (!qg_slot_live(index, h))
                continue;
            // (the cell from the box itself, as lg_collect_refit files it)
            const qg_rect e = h == oh ? obox : index->boxes[h], b = lg_fatten(&next, e);
            lg_loose *c = &loose[lg_loose_of(&next, e)];
            c->l = b.min_x < c->l ? b.min_x : c->l;
            c->t = b.min_y < c->t ? b.min_y : c->t;
            c->r = b.max_x > c->r ? b.max_x : c->r;
            c->b = b.max_y > c->b ? b.max_y : c->b;
        }
        int64_t links = 0;
        for (int32_t i = 0; i < nl; ++i)
            links += lg_range_size(lg_cell_range(&next, &loose[i]));
        ok = qg_txn_reserve(txn, (void **)&g->links.data, &g->links.capacity, sizeof(qg_enode), links);
    }
    if (!ok) {
        qg_mem_free(alloc, count, count_bytes);
        qg_mem_free(alloc, start, start_bytes);
        qg_mem_free(alloc, tight, tight_bytes);
        qg_mem_free(alloc, loose, loose_bytes);
        return QG_ERR_NOMEM;
    }
    qg_array_free(alloc, (void **)&g->loose, &g->loose_capacity, sizeof(lg_loose));
    qg_array_free(alloc, (void **)&g->tight, &g->tight_capacity, sizeof(int32_t));
    qg_array_free(alloc, (void **)&g->start, &g->start_capacity, sizeof(int32_t));
    qg_array_free(alloc, (void **)&g->count, &g->count_capacity, sizeof(int32_t));
    g->loose = loose, g->loose_capacity = nl;
    g->tight = tight, g->tight_capacity = nt;
    g->start = start, g->start_capacity = nl + 1;
    g->count = count, g->count_capacity = nl;
    memset(count, 0, count_bytes);
    qg_lg_layout(g, p->x0, p->y0, p->x1, p->y1, p->lcols, p->lrows);
    g->margin = p->margin;
    g->cell_w = p->cell;
    if (insert)
        g->items[qg_lg_take_item(g)].h = oh;
    else if (oh >= 0)
        index->boxes[oh] = obox;
    g->epoch = (g->epoch + 1) % LG_EPOCHS;
    qg_lg_refile(g, lg_collect_refit(g));
    return QG_OK;
}

