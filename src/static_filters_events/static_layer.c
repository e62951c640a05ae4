// SPDX-License-Identifier: MIT
// The static layer (see static_layer.h for the layout and why).
#include "static_layer.h"

#if defined(__GNUC__)
#    define SL_INLINE static inline __attribute__((always_inline))
#    define SL_PREFETCH(p) __builtin_prefetch(p)
#else
#    define SL_INLINE static inline
#    define SL_PREFETCH(p) ((void)(p))
#endif

/// Cells across one axis never pass this (keys stay in int64, a row's
/// bucket arithmetic in range): a level over a world too wide for it gets
/// larger cells.
#define SL_MAX_CELLS ((int64_t)1 << 30)

int64_t qg_static_start_bound(int64_t n)
{
    return 4 * n + 64 * QG_STATIC_LEVELS + 1;
}

/// The cell of coordinate v on an axis of n cells from origin o. Monotone in
/// v (floor of a correctly rounded product), which is what makes the search
/// exact: an item that can overlap the area has its min corner between the
/// area's min minus the reach and its max, so its cell lies between theirs.
SL_INLINE int64_t sl_cell(double v, double o, double inv, int64_t n)
{
    const double c = (v - o) * inv;
    if (!(c >= 0.0))
        return 0; // below the grid, -inf or NaN
    if (c >= (double)(n - 1))
        return n - 1;
    return (int64_t)c; // truncation is floor here: c >= 0 (and no libm call)
}

/// A row's offset in a hashed table: rows scattered, a row's cells in
/// consecutive buckets (so a row of a query reads neighbouring buckets).
SL_INLINE uint64_t sl_row_hash(int64_t cy)
{
    return ((uint64_t)cy * 0x9E3779B97F4A7C15ull) >> 17;
}

/// Dense levels file cells by 8x8 block: a bucket is block * 64 + the cell's
/// place in its block (row-major both). The cells of one row inside one block
/// are consecutive buckets.
#define SL_BLOCK_BITS 3
#define SL_BLOCK (1 << SL_BLOCK_BITS)

SL_INLINE int64_t sl_dense_bucket(int64_t bcols, int64_t cx, int64_t cy)
{
    return (((cy >> SL_BLOCK_BITS) * bcols + (cx >> SL_BLOCK_BITS)) << (2 * SL_BLOCK_BITS)) |
           ((cy & (SL_BLOCK - 1)) << SL_BLOCK_BITS) | (cx & (SL_BLOCK - 1));
}

SL_INLINE int64_t sl_bucket(const qg_static_level *lv, int64_t cx, int64_t cy)
{
    if (lv->dense)
        return sl_dense_bucket(lv->bcols, cx, cy);
    return (int64_t)(((uint64_t)cx + sl_row_hash(cy)) & (uint64_t)(lv->table - 1));
}

static int64_t sl_item_bucket(const qg_static_level *lv, qg_rect b)
{
    return sl_bucket(lv, sl_cell(b.min_x, lv->ox, lv->inv, lv->cols), sl_cell(b.min_y, lv->oy, lv->inv, lv->rows));
}

/// The min edge of cell c on an axis (the one expression both the build and
/// the searches use).
SL_INLINE double sl_edge(double o, double cell, int64_t c)
{
    return o + (double)c * cell;
}

/// The first cell from c0 (<= c1) whose items can reach v: a cell whose
/// edge plus the level's span is below v holds only items that end before v.
SL_INLINE int64_t sl_first(int64_t c0, int64_t c1, double o, double cell, double span, double v)
{
    if (!(c0 < c1 && sl_edge(o, cell, c0) + span < v))
        return c0;
    // The test is monotone in c: jump to the cell the division names, then
    // step to the exact one. Stepping from c0 alone walked every cell between
    // (2^60 of them for a ray piece in a far world's layer).
    const double g = floor((v - span - o) / cell);
    int64_t c = g > (double)c0 ? (g < (double)c1 ? (int64_t)g : c1) : c0;
    while (c > c0 && !(sl_edge(o, cell, c - 1) + span < v))
        --c;
    while (c < c1 && sl_edge(o, cell, c) + span < v)
        ++c;
    return c;
}

/* ---- build -------------------------------------------------------------- */

typedef struct sl_builder {
    const qg_index *index;
    const qg_static_layer *layer;
    const qg_handle *extra;
    int32_t extra_count;
} sl_builder;

/// The i-th item of the build's input: the old layer's items (tombstones
/// come back with NaN min_x and are skipped by the callers), then the extras.
static qg_static_item sl_source(const sl_builder *b, int32_t i)
{
    if (i < b->layer->item_count)
        return b->layer->items[i];
    const qg_handle h = b->extra[i - b->layer->item_count];
    return (qg_static_item){b->index->boxes[h], h};
}

static double sl_extent(qg_rect r)
{
    const double w = (double)r.max_x - (double)r.min_x, h = (double)r.max_y - (double)r.min_y;
    return w > h ? w : h;
}

/// The level of an item of extent e: the first whose cell (cell0 * 4^l)
/// takes it, the top one for anything larger.
static int sl_level_of(double cell0, double e)
{
    int l = 0;
    for (double c = cell0; e > c && l < QG_STATIC_LEVELS - 1; c *= 4.0)
        l++;
    return l;
}

/// Smallest p with e <= 2^p (e > 0).
static int sl_pow2_exponent(double e)
{
    int x;
    const double f = frexp(e, &x);
    return f == 0.5 ? x - 1 : x;
}

void qg_static_build(qg_index *index, qg_static_layer *layer, const qg_handle *extra, int32_t extra_count)
{
    sl_builder b = {index, layer, extra, extra_count};
    const int32_t inputs = layer->item_count + extra_count;

    // Pass 1: bounds and the most common extent.
    enum { HIST_LO = -1100, HIST_N = 2200 };
    static const int hist_size = HIST_N;
    int32_t hist[HIST_N];
    memset(hist, 0, sizeof hist);
    double lo_x = INFINITY, lo_y = INFINITY, hi_x = -INFINITY, hi_y = -INFINITY;
    int32_t n = 0;
    for (int32_t i = 0; i < inputs; ++i) {
        const qg_static_item it = sl_source(&b, i);
        if (isnan(it.box.min_x))
            continue;
        n++;
        lo_x = fmin(lo_x, it.box.min_x);
        lo_y = fmin(lo_y, it.box.min_y);
        hi_x = fmax(hi_x, it.box.max_x);
        hi_y = fmax(hi_y, it.box.max_y);
        const double e = sl_extent(it.box);
        if (e > 0.0) {
            const int p = sl_pow2_exponent(e) - HIST_LO;
            hist[p < 0 ? 0 : p >= hist_size ? hist_size - 1 : p]++;
        }
    }
    if (n == 0) {
        qg_static_clear(layer);
        return;
    }
    int best = -1;
    for (int p = 0; p < hist_size; ++p)
        if (hist[p] > 0 && (best < 0 || hist[p] > hist[best]))
            best = p;
    const double world = fmax(hi_x - lo_x, hi_y - lo_y);
    double cell0;
    if (best >= 0)
        cell0 = ldexp(1.0, best + HIST_LO);
    else // every item a point: about one per cell
        cell0 = world > 0.0 ? world / ceil(sqrt((double)n)) : 1.0;

    // Pass 2: items per level and each level's reach.
    int32_t per_level[QG_STATIC_LEVELS] = {0};
    double reach[QG_STATIC_LEVELS] = {0};
    for (int32_t i = 0; i < inputs; ++i) {
        const qg_static_item it = sl_source(&b, i);
        if (isnan(it.box.min_x))
            continue;
        const double e = sl_extent(it.box);
        const int l = sl_level_of(cell0, e);
        per_level[l]++;
        reach[l] = fmax(reach[l], e);
    }

    // The levels' grids, finest first; empty levels are left out.
    int32_t map[QG_STATIC_LEVELS];
    int32_t levels = 0;
    int64_t buckets = 0;
    double cell = cell0;
    for (int l = 0; l < QG_STATIC_LEVELS; ++l, cell *= 4.0) {
        map[l] = -1;
        if (per_level[l] == 0)
            continue;
        qg_static_level *lv = &layer->level[levels];
        double c = cell;
        if ((hi_x - lo_x) / c > (double)(SL_MAX_CELLS - 2))
            c = (hi_x - lo_x) / (double)(SL_MAX_CELLS - 2);
        if ((hi_y - lo_y) / c > (double)(SL_MAX_CELLS - 2))
            c = (hi_y - lo_y) / (double)(SL_MAX_CELLS - 2);
        lv->cell = c;
        lv->inv = 1.0 / c;
        lv->ox = lo_x;
        lv->oy = lo_y;
        lv->cols = sl_cell(hi_x, lo_x, lv->inv, SL_MAX_CELLS) + 1;
        lv->rows = sl_cell(hi_y, lo_y, lv->inv, SL_MAX_CELLS) + 1;
        // Rounded up, so an item's min corner is never judged out of reach.
        lv->reach = reach[l] * (1.0 + 0x1p-40) + DBL_MIN;
        lv->span_x = 0.0;
        lv->span_y = 0.0;
        lv->bcols = (lv->cols + SL_BLOCK - 1) >> SL_BLOCK_BITS;
        const int64_t brows = (lv->rows + SL_BLOCK - 1) >> SL_BLOCK_BITS;
        const double cells = (double)lv->bcols * (double)brows * (SL_BLOCK * SL_BLOCK);
        lv->dense = cells <= 4.0 * per_level[l] + 64.0;
        if (lv->dense) {
            lv->table = lv->bcols * brows * (SL_BLOCK * SL_BLOCK);
        } else {
            int64_t t = 64;
            while (t < 2 * (int64_t)per_level[l])
                t *= 2;
            lv->table = t;
        }
        lv->base = (int32_t)buckets;
        buckets += lv->table;
        map[l] = levels++;
    }

    // Pass 3: counting sort by (level, bucket) into the next arrays.
    int32_t *start = layer->next_start;
    qg_static_item *items = layer->next_items;
    memset(start, 0, (size_t)(buckets + 1) * sizeof(int32_t));
    for (int32_t i = 0; i < inputs; ++i) {
        const qg_static_item it = sl_source(&b, i);
        if (isnan(it.box.min_x))
            continue;
        const int l = sl_level_of(cell0, sl_extent(it.box));
        qg_static_level *lv = &layer->level[map[l]];
        start[lv->base + sl_item_bucket(lv, it.box) + 1]++;
        const int64_t cx = sl_cell(it.box.min_x, lv->ox, lv->inv, lv->cols);
        const int64_t cy = sl_cell(it.box.min_y, lv->oy, lv->inv, lv->rows);
        lv->span_x = fmax(lv->span_x, (double)it.box.max_x - sl_edge(lv->ox, lv->cell, cx));
        lv->span_y = fmax(lv->span_y, (double)it.box.max_y - sl_edge(lv->oy, lv->cell, cy));
    }
    // Padded far past the rounding of the edges' and the spans' arithmetic
    // (each within 2^-52 of the magnitudes involved), so a skipped cell
    // truly holds nothing that reaches.
    for (int32_t l = 0; l < levels; ++l) {
        qg_static_level *lv = &layer->level[l];
        const double mag_x = fabs(lv->ox) + (double)lv->cols * lv->cell, mag_y = fabs(lv->oy) + (double)lv->rows * lv->cell;
        lv->span_x += (mag_x + lv->span_x) * 0x1p-40 + DBL_MIN;
        lv->span_y += (mag_y + lv->span_y) * 0x1p-40 + DBL_MIN;
    }
    for (int64_t g = 0; g < buckets; ++g)
        start[g + 1] += start[g];
    for (int32_t i = 0; i < inputs; ++i) {
        const qg_static_item it = sl_source(&b, i);
        if (isnan(it.box.min_x))
            continue;
        const int l = sl_level_of(cell0, sl_extent(it.box));
        const qg_static_level *lv = &layer->level[map[l]];
        items[start[lv->base + sl_item_bucket(lv, it.box)]++] = it;
    }
    // The cursors now sit at each bucket's end: shift them back to starts.
    for (int64_t g = buckets; g > 0; --g)
        start[g] = start[g - 1];
    start[0] = 0;

    // Swap the built arrays in; the old ones are the next build's.
    qg_static_item *old_items = layer->items;
    const int32_t old_items_cap = layer->item_cap;
    int32_t *old_start = layer->start;
    const int32_t old_start_cap = layer->start_cap;
    layer->items = layer->next_items;
    layer->item_cap = layer->next_items_cap;
    layer->start = layer->next_start;
    layer->start_cap = layer->next_start_cap;
    layer->next_items = old_items;
    layer->next_items_cap = old_items_cap;
    layer->next_start = old_start;
    layer->next_start_cap = old_start_cap;
    layer->item_count = n;
    layer->live = n;
    if (++layer->gen == 0)
        layer->gen = 1;
    layer->start_count = (int32_t)buckets + 1;
    layer->levels = levels;

    // Every slot learns its item's position (its min_x NaN keeps it out of
    // the kind's sight, its min_y carries the position).
    for (int32_t i = 0; i < n; ++i) {
        qg_rect *slot = &index->boxes[items[i].handle];
        slot->min_x = NAN;
        memcpy(&slot->min_y, &i, sizeof i);
    }
}

/* ---- search ------------------------------------------------------------- */

/// Calls visit(item, ctx) for every item of level lv whose min corner cell
/// can hold an overlap with `area`, each once; the caller tests the overlap
/// (so the join can inline its own test). Returns false when visit did.
typedef bool sl_visit_fn(const qg_static_item *item, void *ctx);

SL_INLINE bool sl_level_search(const qg_static_layer *layer, const qg_static_level *lv, qg_rect area,
                               sl_visit_fn *visit, void *ctx, qg_query_stats *stats)
{
    const int64_t cx1 = sl_cell(area.max_x, lv->ox, lv->inv, lv->cols);
    const int64_t cy1 = sl_cell(area.max_y, lv->oy, lv->inv, lv->rows);
    const int64_t cx0 = sl_first(sl_cell((double)area.min_x - lv->reach, lv->ox, lv->inv, lv->cols), cx1, lv->ox,
                                 lv->cell, lv->span_x, area.min_x);
    const int64_t cy0 = sl_first(sl_cell((double)area.min_y - lv->reach, lv->oy, lv->inv, lv->rows), cy1, lv->oy,
                                 lv->cell, lv->span_y, area.min_y);
    const int32_t *start = layer->start + lv->base;
    const qg_static_item *items = layer->items;
    if (lv->dense) {
        stats->nodes_visited += (cx1 - cx0 + 1) * (cy1 - cy0 + 1);
        for (int64_t cy = cy0; cy <= cy1; ++cy) {
            // One run per block the row crosses.
            for (int64_t lo = cx0; lo <= cx1;) {
                const int64_t hi = (lo | (SL_BLOCK - 1)) < cx1 ? (lo | (SL_BLOCK - 1)) : cx1;
                const int32_t e = start[sl_dense_bucket(lv->bcols, hi, cy) + 1];
                for (int32_t i = start[sl_dense_bucket(lv->bcols, lo, cy)]; i < e; ++i)
                    if (!visit(&items[i], ctx))
                        return false;
                lo = hi + 1;
            }
        }
        return true;
    }
    if ((double)(cx1 - cx0 + 1) * (double)(cy1 - cy0 + 1) >= (double)lv->table) {
        // More cells than buckets: read the level once.
        stats->nodes_visited += lv->table;
        const int32_t e = start[lv->table];
        for (int32_t i = start[0]; i < e; ++i)
            if (!visit(&items[i], ctx))
                return false;
        return true;
    }
    const uint64_t mask = (uint64_t)(lv->table - 1);
    for (int64_t cy = cy0; cy <= cy1; ++cy) {
        const uint64_t h = sl_row_hash(cy);
        for (int64_t cx = cx0; cx <= cx1; ++cx) {
            const int64_t bk = (int64_t)(((uint64_t)cx + h) & mask);
            stats->nodes_visited++;
            const int32_t e = start[bk + 1];
            for (int32_t i = start[bk]; i < e; ++i) {
                // Another cell may share this bucket: each item is read
                // from its own cell only, so it is seen once.
                const qg_rect r = items[i].box;
                if (sl_cell(r.min_x, lv->ox, lv->inv, lv->cols) != cx ||
                    sl_cell(r.min_y, lv->oy, lv->inv, lv->rows) != cy)
                    continue;
                if (!visit(&items[i], ctx))
                    return false;
            }
        }
    }
    return true;
}

typedef struct sl_query_ctx {
    qg_rect area;
    qg_query_fn *fn;
    void *user;
    qg_query_stats *stats;
} sl_query_ctx;

static bool sl_query_visit(const qg_static_item *item, void *ctx)
{
    sl_query_ctx *q = ctx;
    q->stats->elements_tested++;
    if (!qg_overlaps(item->box, q->area))
        return true;
    return q->fn(item->handle, q->user);
}

bool qg_static_query(const qg_static_layer *layer, qg_rect area, qg_query_fn *fn, void *user,
                     qg_query_stats *stats)
{
    sl_query_ctx q = {area, fn, user, stats};
    for (int32_t l = 0; l < layer->levels; ++l)
        if (!sl_level_search(layer, &layer->level[l], area, sl_query_visit, &q, stats))
            return false;
    return true;
}

typedef struct sl_join_ctx {
    qg_rect box;
    qg_handle h;
    qg_filter filter;
    const qg_filter *filters;
    qg_pair_fn *fn;
    void *user;
    int64_t tested;
} sl_join_ctx;

SL_INLINE bool sl_join_visit(const qg_static_item *item, void *ctx)
{
    sl_join_ctx *j = ctx;
    j->tested++;
    if (!qg_overlaps(item->box, j->box))
        return true;
    if (j->filters != NULL) {
        const qg_filter f = j->filters[item->handle];
        if ((f.category & j->filter.mask) == 0 || (j->filter.category & f.mask) == 0)
            return true;
    }
    return qg_report_pair(j->fn, j->user, j->h, item->handle);
}

static bool sl_join_visit_fn(const qg_static_item *item, void *ctx)
{
    return sl_join_visit(item, ctx);
}



/// How far ahead the dense join reads: the box of the element 3 * SL_AHEAD
/// on, the cells and bucket starts of the one 2 * SL_AHEAD on, the items of
/// the one SL_AHEAD on. A lookup is three dependent loads (the moving
/// element's box, by handle; its cells' bucket starts; their items);
/// elements sorted by cell are still far apart in memory, so each load
/// would wait on the cache.
#define SL_AHEAD 8
/// The cell ranges computed at the second stage wait in a ring for the
/// other two (a power of two above 2 * SL_AHEAD).
#define SL_RING 32

/// An element's cell range on a dense level (rows cy0..cy1, columns
/// cx0..cx1), computed once per join.
typedef qg_static_span sl_span;

/// The cells a dense level's search for box b reads.
SL_INLINE sl_span sl_dense_span(const qg_static_level *lv, qg_rect b)
{
    sl_span r;
    r.cx1 = sl_cell(b.max_x, lv->ox, lv->inv, lv->cols);
    r.cy1 = sl_cell(b.max_y, lv->oy, lv->inv, lv->rows);
    r.cx0 = sl_first(sl_cell((double)b.min_x - lv->reach, lv->ox, lv->inv, lv->cols), r.cx1, lv->ox, lv->cell,
                     lv->span_x, b.min_x);
    r.cy0 = sl_first(sl_cell((double)b.min_y - lv->reach, lv->oy, lv->inv, lv->rows), r.cy1, lv->oy, lv->cell,
                     lv->span_y, b.min_y);
    return r;
}

/// Element i's box in a join.
#define SL_BOX(i) (own != NULL ? own[i] : boxes[dyn[i]])

/// The join against one dense level, the common case (a tile map): per
/// element, per row it reaches, per block, one run of items. Written out
/// flat (no visitor): it runs once per moving element per frame.
static bool sl_join_dense(const qg_static_layer *layer, const qg_static_level *lv, const qg_rect *boxes,
                          const qg_handle *dyn, const qg_rect *own, int32_t n, const qg_filter *filters, qg_pair_fn *fn, void *user,
                          qg_query_stats *stats)
{
    const int32_t *start = layer->start + lv->base;
    const qg_static_item *items = layer->items;
    const int64_t bcols = lv->bcols;
    int64_t cells = 0, tested = 0;
    sl_span ring[SL_RING];
    // The ring's first entries: the elements the loop's second stage would
    // have reached before the loop begins.
    for (int32_t i = 0; i < n && i < 2 * SL_AHEAD; ++i)
        ring[i & (SL_RING - 1)] = sl_dense_span(lv, SL_BOX(i));
    for (int32_t i = 0; i < n; ++i) {
        if (i + 3 * SL_AHEAD < n)
            SL_PREFETCH(own != NULL ? &own[i + 3 * SL_AHEAD] : &boxes[dyn[i + 3 * SL_AHEAD]]);
        if (i + 2 * SL_AHEAD < n) {
            const sl_span p = sl_dense_span(lv, SL_BOX(i + 2 * SL_AHEAD));
            ring[(i + 2 * SL_AHEAD) & (SL_RING - 1)] = p;
            SL_PREFETCH(&start[sl_dense_bucket(bcols, p.cx0, p.cy0)]);
            if (p.cy1 > p.cy0)
                SL_PREFETCH(&start[sl_dense_bucket(bcols, p.cx0, p.cy1)]);
        }
        if (i + SL_AHEAD < n) {
            const sl_span p = ring[(i + SL_AHEAD) & (SL_RING - 1)];
            SL_PREFETCH(&items[start[sl_dense_bucket(bcols, p.cx0, p.cy0)]]);
            if (p.cy1 > p.cy0)
                SL_PREFETCH(&items[start[sl_dense_bucket(bcols, p.cx0, p.cy1)]]);
        }
        const qg_handle h = dyn[i];
        const qg_rect b = SL_BOX(i);
        const sl_span sp = ring[i & (SL_RING - 1)];
        cells += (sp.cx1 - sp.cx0 + 1) * (sp.cy1 - sp.cy0 + 1);
        for (int64_t cy = sp.cy0; cy <= sp.cy1; ++cy) {
            for (int64_t lo = sp.cx0; lo <= sp.cx1;) {
                // One run per block the row crosses.
                const int64_t hi = (lo | (SL_BLOCK - 1)) < sp.cx1 ? (lo | (SL_BLOCK - 1)) : sp.cx1;
                const int32_t end = start[sl_dense_bucket(bcols, hi, cy) + 1];
                for (int32_t k = start[sl_dense_bucket(bcols, lo, cy)]; k < end; ++k) {
                    const qg_static_item *it = &items[k];
                    tested++;
                    if (!qg_overlaps(it->box, b))
                        continue;
                    if (filters != NULL) {
                        const qg_filter fa = filters[h], fb = filters[it->handle];
                        if ((fa.category & fb.mask) == 0 || (fb.category & fa.mask) == 0)
                            continue;
                    }
                    if (!qg_report_pair(fn, user, h, it->handle)) {
                        stats->nodes_visited += cells;
                        stats->elements_tested += tested;
                        return false;
                    }
                }
                lo = hi + 1;
            }
        }
    }
    stats->nodes_visited += cells;
    stats->elements_tested += tested;
    return true;
}

bool qg_static_join(const qg_static_layer *layer, const qg_rect *boxes, const qg_handle *dyn, const qg_rect *own,
                    int32_t n, const qg_filter *filters, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    if (layer->levels == 1 && layer->level[0].dense)
        return sl_join_dense(layer, &layer->level[0], boxes, dyn, own, n, filters, fn, user, stats);
    sl_join_ctx j = {{0, 0, 0, 0}, 0, {0, 0}, filters, fn, user, 0};
    qg_query_stats local = {0, 0};
    bool go = true;
    for (int32_t i = 0; i < n && go; ++i) {
        j.h = dyn[i];
        j.box = SL_BOX(i);
        if (filters != NULL)
            j.filter = filters[j.h];
        for (int32_t l = 0; l < layer->levels && go; ++l)
            go = sl_level_search(layer, &layer->level[l], j.box, sl_join_visit_fn, &j, &local);
    }
    stats->nodes_visited += local.nodes_visited;
    stats->elements_tested += local.elements_tested + j.tested;
    return go;
}

typedef struct sl_collect_ctx {
    qg_rect area;
    qg_static_item *out;
    int32_t n, max;
} sl_collect_ctx;

static bool sl_collect_visit(const qg_static_item *item, void *ctx)
{
    sl_collect_ctx *c = ctx;
    if (!qg_overlaps(item->box, c->area))
        return true;
    if (c->n == c->max) {
        c->n++;
        return false;
    }
    c->out[c->n++] = *item;
    return true;
}

int32_t qg_static_collect(const qg_static_layer *layer, qg_rect area, qg_static_item *out, int32_t max)
{
    sl_collect_ctx c = {area, out, 0, max};
    qg_query_stats stats = {0, 0};
    for (int32_t l = 0; l < layer->levels; ++l)
        if (!sl_level_search(layer, &layer->level[l], area, sl_collect_visit, &c, &stats))
            break;
    return c.n;
}

qg_static_span qg_static_span_of(const qg_static_layer *layer, qg_rect area)
{
    return sl_dense_span(&layer->level[0], area);
}

void qg_static_prefetch_span(const qg_static_layer *layer, qg_static_span span)
{
    const qg_static_level *lv = &layer->level[0];
    const int32_t *start = layer->start + lv->base;
    SL_PREFETCH(&start[sl_dense_bucket(lv->bcols, span.cx0, span.cy0)]);
    if (span.cy1 > span.cy0)
        SL_PREFETCH(&start[sl_dense_bucket(lv->bcols, span.cx0, span.cy0 + 1)]);
    if (span.cy1 > span.cy0 + 1)
        SL_PREFETCH(&start[sl_dense_bucket(lv->bcols, span.cx0, span.cy1)]);
}

void qg_static_prefetch_items(const qg_static_layer *layer, qg_static_span span)
{
    const qg_static_level *lv = &layer->level[0];
    const int32_t *start = layer->start + lv->base;
    for (int64_t cy = span.cy0; cy <= span.cy1 && cy <= span.cy0 + 2; ++cy) {
        const char *p = (const char *)&layer->items[start[sl_dense_bucket(lv->bcols, span.cx0, cy)]];
        SL_PREFETCH(p);
        SL_PREFETCH(p + 64);
    }
}

int32_t qg_static_collect_span(const qg_static_layer *layer, qg_static_span span, qg_rect area,
                               qg_static_item *out, int32_t max)
{
    const qg_static_level *lv = &layer->level[0];
    const int32_t *start = layer->start + lv->base;
    const qg_static_item *items = layer->items;
    int32_t n = 0;
    for (int64_t cy = span.cy0; cy <= span.cy1; ++cy) {
        for (int64_t lo = span.cx0; lo <= span.cx1;) {
            // One run per block the row crosses.
            const int64_t hi = (lo | (SL_BLOCK - 1)) < span.cx1 ? (lo | (SL_BLOCK - 1)) : span.cx1;
            const int32_t end = start[sl_dense_bucket(lv->bcols, hi, cy) + 1];
            for (int32_t k = start[sl_dense_bucket(lv->bcols, lo, cy)]; k < end; ++k) {
                if (!qg_overlaps(items[k].box, area))
                    continue;
                if (n == max)
                    return max + 1;
                out[n++] = items[k];
            }
            lo = hi + 1;
        }
    }
    return n;
}

/* ---- upkeep ------------------------------------------------------------- */

void qg_static_kill(qg_static_layer *layer, int32_t pos)
{
    layer->items[pos].box.min_x = NAN;
    layer->live--;
    layer->kills++;
}

void qg_static_revive(qg_static_layer *layer, int32_t pos, qg_rect box)
{
    layer->items[pos].box = box;
    layer->live++;
    // Copies made while it was a tombstone lack it.
    if (++layer->gen == 0)
        layer->gen = 1;
}

void qg_static_clear(qg_static_layer *layer)
{
    layer->item_count = 0;
    layer->start_count = 0;
    layer->levels = 0;
    layer->live = 0;
    if (++layer->gen == 0)
        layer->gen = 1;
}

void qg_static_free(qg_alloc *alloc, qg_static_layer *layer)
{
    qg_array_free(alloc, (void **)&layer->items, &layer->item_cap, sizeof(qg_static_item));
    qg_array_free(alloc, (void **)&layer->start, &layer->start_cap, sizeof(int32_t));
    qg_array_free(alloc, (void **)&layer->next_items, &layer->next_items_cap, sizeof(qg_static_item));
    qg_array_free(alloc, (void **)&layer->next_start, &layer->next_start_cap, sizeof(int32_t));
    qg_static_clear(layer);
}

uint32_t qg_static_order_key(const qg_static_layer *layer, float x, float y)
{
    if (layer->levels == 0)
        return 0;
    const qg_static_level *lv = &layer->level[0];
    return (uint32_t)sl_bucket(lv, sl_cell(x, lv->ox, lv->inv, lv->cols), sl_cell(y, lv->oy, lv->inv, lv->rows));
}

bool qg_static_validate(const qg_static_layer *layer, size_t *bytes)
{
    *bytes += (size_t)layer->item_cap * sizeof(qg_static_item) + (size_t)layer->start_cap * sizeof(int32_t) +
              (size_t)layer->next_items_cap * sizeof(qg_static_item) +
              (size_t)layer->next_start_cap * sizeof(int32_t);
    if (layer->levels == 0)
        return layer->item_count == 0 && layer->live == 0;
    if (layer->item_count > layer->item_cap || layer->start_count > layer->start_cap)
        return false;
    if (layer->start[0] != 0 || layer->start[layer->start_count - 1] != layer->item_count)
        return false;
    int32_t live = 0;
    for (int32_t l = 0; l < layer->levels; ++l) {
        const qg_static_level *lv = &layer->level[l];
        if (lv->base + lv->table >= layer->start_count)
            return false;
        for (int64_t bk = 0; bk < lv->table; ++bk) {
            const int32_t b0 = layer->start[lv->base + bk], b1 = layer->start[lv->base + bk + 1];
            if (b0 > b1)
                return false;
            for (int32_t i = b0; i < b1; ++i) {
                const qg_rect r = layer->items[i].box;
                if (isnan(r.min_x))
                    continue;
                if (!qg_box_valid(r) || sl_item_bucket(lv, r) != bk || sl_extent(r) > lv->reach)
                    return false;
                const int64_t cx = sl_cell(r.min_x, lv->ox, lv->inv, lv->cols);
                const int64_t cy = sl_cell(r.min_y, lv->oy, lv->inv, lv->rows);
                if ((double)r.max_x - sl_edge(lv->ox, lv->cell, cx) > lv->span_x ||
                    (double)r.max_y - sl_edge(lv->oy, lv->cell, cy) > lv->span_y)
                    return false;
                live++;
            }
        }
    }
    return live == layer->live;
}
