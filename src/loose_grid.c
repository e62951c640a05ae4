// QG_LOOSE_GRID: the loose/tight double grid of seed 003, part 5.
//
// - Loose cells are {int32 head; float l, t, r, b}: 20 bytes. An element is
//   inserted once, into the loose cell holding its centre, and the loose
//   cell's box grows to contain it ("each element only needs to be inserted
//   once into the grid based on which cell its center position lands
//   inside"). The elements of a loose cell are a singly-linked index list
//   through a per-handle `next` array: the node of an element is its handle.
// - Tight cells are the coarse grid: each is the head of a singly-linked
//   index list of links {next, loose cell} (the shared element-node pool),
//   naming every loose cell whose box overlaps it. When a loose box grows
//   it is linked into the tight cells it newly covers; boxes only grow
//   between cleanups, so a move or insert never unlinks.
// - qg_cleanup shrinks every loose box to fit its elements (an empty cell's
//   box collapses to the empty box) and rebuilds the tight cells' lists to
//   match, in place and in tight-cell order (lg_relink). Ranges only shrink
//   there, so it needs no more links than it holds: it never allocates.
// - Each element keeps a fattened copy of its box (its box plus a quarter
//   cell on every side), and the loose box holds the fattened boxes. A move
//   that stays inside its fattened box and its loose cell touches only the
//   element's own data; this is what keeps a frame of moves from missing
//   the cache on a loose cell per element.
// - Invariant: loose cell i is linked in tight cell t exactly when t is in
//   the tight range of i's box (both mapped with the same monotonic,
//   clamped function). So a query reports a loose cell only in the first
//   tight cell of the overlap of the two ranges, and pairs of loose cells
//   likewise: no visited set.
// - Query: tight cells overlapping the area -> loose cells whose box
//   overlaps (each once) -> their elements, tested exactly.
// - Pairs: "each element against the loose cells near it": the loose cells
//   after its own whose boxes overlap its box, found through the tight
//   cells its box covers, then their elements. Each pair is found from the
//   lower-indexed of the two loose cells holding it, so once.
// - qg_cleanup also writes the elements out in loose-cell order with their
//   boxes (the snapshot, 20 bytes per element). Until the next change,
//   qg_pairs streams it: a cell's elements and its neighbours' are
//   contiguous, and the later loose cells of the tight cell most of a
//   cell's elements fall in are gathered once per cell. After a change
//   without cleanup, qg_pairs walks the lists instead (same answers).
// - After start-up memory stays put: 20 bytes per loose cell, 4 per tight
//   cell (+4 per loose cell for the snapshot's starts), per element 16 for
//   the base's box, 4 for `next`, 16 for the fattened box and 20 for the
//   snapshot, and 8 per link; the link count changes only when a loose box
//   crosses a tight-cell line. Once the population is steady, qg_cleanup
//   gives back the spare capacity the 1.5x growth of the per-element arrays
//   left (shrinking never fails).
#include "index_internal.h"
#include "pool.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#if defined(__GNUC__)
#define LG_PREFETCH(p) __builtin_prefetch(p)
#else
#define LG_PREFETCH(p) ((void)(p))
#endif
/// Prefetch distance, in loose cells, of each stage of lg_prefetch_ahead.
#define LG_STAGE 32

/// At most this many loose cells (20 MiB of them).
#define LG_MAX_CELLS (1 << 20)
#define LG_MAX_SIDE 4096
/// Tight cells are this many loose cells wide.
#define LG_TIGHT_RATIO 2
/// Elements of a loose cell gathered on the C stack for the pair loop;
/// bigger cells are walked in place.
#define LG_GATHER 64

typedef struct lg_loose {
    int32_t head;       ///< first element (a handle), -1 if none
    float l, t, r, b;   ///< loose box; the empty box is (+inf, +inf, -inf, -inf)
} lg_loose;
_Static_assert(sizeof(lg_loose) == 20, "a loose cell is 20 bytes");

typedef struct lg_range {
    int32_t x0, y0, x1, y1; ///< inclusive tight-cell range; empty when x0 > x1
} lg_range;

typedef struct lg_item {
    qg_handle h;
    qg_rect box;
} lg_item;

typedef struct loose_grid {
    qg_index base;
    lg_loose *loose;
    int32_t loose_capacity;
    int32_t *tight; ///< per tight cell: first link, -1 if none
    int32_t tight_capacity;
    qg_enode_pool links; ///< element = loose cell index
    int32_t *next;       ///< per handle: next element of its loose cell
    int32_t next_capacity;
    qg_rect *fat;        ///< per handle: its box plus margin, inside its loose box
    int32_t fat_capacity;
    float margin;
    /// The elements in loose-cell order with their boxes, written by
    /// qg_cleanup; valid while snap_fresh (no change since).
    lg_item *snap;
    int32_t snap_capacity;
    int32_t *snap_start; ///< per loose cell: first item; [nl] ends the last
    int32_t snap_start_capacity;
    bool snap_fresh;
    int32_t steady_high; ///< box_high seen by the last qg_cleanup
    int32_t lcols, lrows, tcols, trows;
    float ox, oy;
    float lsx, lsy; ///< loose cells per world unit
    float tsx, tsy; ///< tight cells per world unit
} loose_grid;

static const lg_loose lg_empty = {-1, INFINITY, INFINITY, -INFINITY, -INFINITY};

/// Cell of v along an axis, clamped into [0, last]. Monotonic in v.
static inline int32_t lg_map(float v, float origin, float scale, int32_t last)
{
    const float f = (v - origin) * scale;
    if (!(f > 0.0f))
        return 0;
    if (f >= (float)last)
        return last;
    return (int32_t)f;
}

/// The loose cell of a box: the cell of its centre. The centre is only a
/// choice of cell (the loose box then holds the whole box), so its rounding
/// does not matter, as long as it is the same every time for the same box.
static inline int32_t lg_loose_of(const loose_grid *g, qg_rect b)
{
    const float cx = b.min_x * 0.5f + b.max_x * 0.5f, cy = b.min_y * 0.5f + b.max_y * 0.5f;
    return lg_map(cy, g->oy, g->lsy, g->lrows - 1) * g->lcols + lg_map(cx, g->ox, g->lsx, g->lcols - 1);
}

/// The tight-cell range of the box (l, t, r, b): lg_map on its four
/// coordinates, at once with SSE (this runs for every element in the pair
/// loop and for every loose cell in qg_cleanup).
static inline lg_range lg_range_of(const loose_grid *g, float l, float t, float r, float b)
{
    if (!(l <= r))
        return (lg_range){0, 0, -1, -1};
#if defined(__SSE2__)
    __m128 f = _mm_mul_ps(_mm_sub_ps(_mm_setr_ps(l, t, r, b), _mm_setr_ps(g->ox, g->oy, g->ox, g->oy)),
                          _mm_setr_ps(g->tsx, g->tsy, g->tsx, g->tsy));
    const float lx = (float)(g->tcols - 1), ly = (float)(g->trows - 1);
    f = _mm_min_ps(_mm_max_ps(f, _mm_setzero_ps()), _mm_setr_ps(lx, ly, lx, ly));
    int32_t out[4];
    _mm_storeu_si128((__m128i *)out, _mm_cvttps_epi32(f));
    return (lg_range){out[0], out[1], out[2], out[3]};
#else
    return (lg_range){lg_map(l, g->ox, g->tsx, g->tcols - 1), lg_map(t, g->oy, g->tsy, g->trows - 1),
                      lg_map(r, g->ox, g->tsx, g->tcols - 1), lg_map(b, g->oy, g->tsy, g->trows - 1)};
#endif
}

/// The loose cells of two boxes at once (a move maps its old and new box):
/// lg_loose_of on both with one SSE mapping.
static inline void lg_loose_pair(const loose_grid *g, qg_rect a, qg_rect b, int32_t *ia, int32_t *ib)
{
#if defined(__SSE2__)
    const __m128 half = _mm_set1_ps(0.5f);
    const __m128 c = _mm_add_ps(_mm_mul_ps(_mm_setr_ps(a.min_x, a.min_y, b.min_x, b.min_y), half),
                                _mm_mul_ps(_mm_setr_ps(a.max_x, a.max_y, b.max_x, b.max_y), half));
    __m128 f = _mm_mul_ps(_mm_sub_ps(c, _mm_setr_ps(g->ox, g->oy, g->ox, g->oy)),
                          _mm_setr_ps(g->lsx, g->lsy, g->lsx, g->lsy));
    const float lx = (float)(g->lcols - 1), ly = (float)(g->lrows - 1);
    f = _mm_min_ps(_mm_max_ps(f, _mm_setzero_ps()), _mm_setr_ps(lx, ly, lx, ly));
    int32_t out[4];
    _mm_storeu_si128((__m128i *)out, _mm_cvttps_epi32(f));
    *ia = out[1] * g->lcols + out[0];
    *ib = out[3] * g->lcols + out[2];
#else
    *ia = lg_loose_of(g, a);
    *ib = lg_loose_of(g, b);
#endif
}

static inline lg_range lg_cell_range(const loose_grid *g, const lg_loose *c)
{
    return lg_range_of(g, c->l, c->t, c->r, c->b);
}

static inline int64_t lg_range_size(lg_range r)
{
    return r.x0 > r.x1 ? 0 : (int64_t)(r.x1 - r.x0 + 1) * (r.y1 - r.y0 + 1);
}

static inline bool lg_range_has(lg_range r, int32_t x, int32_t y)
{
    return x >= r.x0 && x <= r.x1 && y >= r.y0 && y <= r.y1;
}

static inline bool lg_box_overlaps(const lg_loose *c, qg_rect a)
{
    return (c->l <= a.max_x) & (a.min_x <= c->r) & (c->t <= a.max_y) & (a.min_y <= c->b);
}

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

/// Makes loose cell i's box hold `box`, linking it into newly covered tight
/// cells; reserves the links first. Fails only with QG_ERR_NOMEM, before
/// any change.
static qg_status lg_grow(loose_grid *g, qg_txn *txn, int32_t i, qg_rect box)
{
    lg_loose *c = &g->loose[i];
    if (c->l <= box.min_x && c->t <= box.min_y && c->r >= box.max_x && c->b >= box.max_y)
        return QG_OK;
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

static void lg_unlink_element(loose_grid *g, int32_t i, qg_handle h)
{
    int32_t *link = &g->loose[i].head;
    while (*link >= 0) {
        if (*link == h) {
            *link = g->next[h];
            return;
        }
        link = &g->next[*link];
    }
}

/// The box plus the margin on every side. Rounding only widens it.
static inline qg_rect lg_fatten(const loose_grid *g, qg_rect b)
{
    const float m = g->margin;
    return (qg_rect){b.min_x - m, b.min_y - m, b.max_x + m, b.max_y + m};
}

static inline bool lg_inside(qg_rect in, qg_rect out)
{
    return (out.min_x <= in.min_x) & (out.min_y <= in.min_y) & (in.max_x <= out.max_x) & (in.max_y <= out.max_y);
}

static int32_t lg_side(float extent, float cell)
{
    double n = floor((double)extent / (double)cell);
    if (!(n >= 1.0))
        n = 1.0;
    if (n > LG_MAX_SIDE)
        n = LG_MAX_SIDE;
    return (int32_t)n;
}

static qg_status loose_grid_configure(qg_config *config)
{
    if (config->cell_size == 0.0f) {
        // A loose cell a few typical elements wide: with one element per
        // cell the cells cost more than the elements, with many the pair
        // loop compares too many.
        const float e = config->element_size > 0.0f ? config->element_size : qg_rect_extent(config->bounds) / 256.0f;
        config->cell_size = 4.0f * e;
    }
    if (!isfinite(config->cell_size))
        config->cell_size = qg_rect_extent(config->bounds);
    return QG_OK;
}

static qg_status loose_grid_init(qg_index *index)
{
    loose_grid *g = (loose_grid *)index;
    const qg_config *c = &index->config;
    const float ex = c->bounds.max_x - c->bounds.min_x, ey = c->bounds.max_y - c->bounds.min_y;
    g->lcols = lg_side(ex, c->cell_size);
    g->lrows = lg_side(ey, c->cell_size);
    while ((int64_t)g->lcols * g->lrows > LG_MAX_CELLS) {
        if (g->lcols >= g->lrows)
            g->lcols = (g->lcols + 1) / 2;
        else
            g->lrows = (g->lrows + 1) / 2;
    }
    g->tcols = (g->lcols + LG_TIGHT_RATIO - 1) / LG_TIGHT_RATIO;
    g->trows = (g->lrows + LG_TIGHT_RATIO - 1) / LG_TIGHT_RATIO;
    g->ox = c->bounds.min_x;
    g->oy = c->bounds.min_y;
    g->lsx = (float)((double)g->lcols / ex);
    g->lsy = (float)((double)g->lrows / ey);
    g->tsx = (float)((double)g->tcols / ex);
    g->tsy = (float)((double)g->trows / ey);
    g->margin = c->cell_size * 0.25f;
    g->steady_high = -1;
    if (!isfinite(g->margin))
        g->margin = 0.0f;
    qg_enode_pool_reset(&g->links);
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    const int32_t nl = g->lcols * g->lrows, nt = g->tcols * g->trows;
    if (!qg_txn_reserve(&txn, (void **)&g->loose, &g->loose_capacity, sizeof(lg_loose), nl) ||
        !qg_txn_reserve(&txn, (void **)&g->tight, &g->tight_capacity, sizeof(int32_t), nt) ||
        !qg_txn_reserve(&txn, (void **)&g->snap_start, &g->snap_start_capacity, sizeof(int32_t), (int64_t)nl + 1)) {
        qg_txn_rollback(&txn);
        return QG_ERR_NOMEM;
    }
    for (int32_t i = 0; i < nl; ++i)
        g->loose[i] = lg_empty;
    memset(g->tight, 0xff, (size_t)nt * sizeof(int32_t));
    return QG_OK;
}

static void loose_grid_destroy(qg_index *index)
{
    loose_grid *g = (loose_grid *)index;
    qg_array_free(&index->alloc, (void **)&g->loose, &g->loose_capacity, sizeof(lg_loose));
    qg_array_free(&index->alloc, (void **)&g->tight, &g->tight_capacity, sizeof(int32_t));
    qg_array_free(&index->alloc, (void **)&g->links.data, &g->links.capacity, sizeof(qg_enode));
    qg_array_free(&index->alloc, (void **)&g->next, &g->next_capacity, sizeof(int32_t));
    qg_array_free(&index->alloc, (void **)&g->fat, &g->fat_capacity, sizeof(qg_rect));
    qg_array_free(&index->alloc, (void **)&g->snap, &g->snap_capacity, sizeof(lg_item));
    qg_array_free(&index->alloc, (void **)&g->snap_start, &g->snap_start_capacity, sizeof(int32_t));
}

static qg_status loose_grid_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    loose_grid *g = (loose_grid *)index;
    if (!qg_txn_reserve(txn, (void **)&g->next, &g->next_capacity, sizeof(int32_t), (int64_t)h + 1) ||
        !qg_txn_reserve(txn, (void **)&g->fat, &g->fat_capacity, sizeof(qg_rect), (int64_t)h + 1) ||
        !qg_txn_reserve(txn, (void **)&g->snap, &g->snap_capacity, sizeof(lg_item), (int64_t)index->count + 1))
        return QG_ERR_NOMEM;
    const int32_t i = lg_loose_of(g, box);
    const qg_rect fat = lg_fatten(g, box);
    const qg_status s = lg_grow(g, txn, i, fat);
    if (s != QG_OK)
        return s;
    g->fat[h] = fat;
    g->snap_fresh = false;
    g->next[h] = g->loose[i].head;
    g->loose[i].head = h;
    return QG_OK;
}

static void loose_grid_remove(qg_index *index, qg_handle h)
{
    loose_grid *g = (loose_grid *)index;
    g->snap_fresh = false;
    lg_unlink_element(g, lg_loose_of(g, index->boxes[h]), h);
}

static qg_status loose_grid_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    loose_grid *g = (loose_grid *)index;
    int32_t oi, ni;
    lg_loose_pair(g, index->boxes[h], box, &oi, &ni);
    g->snap_fresh = false;
    if (oi == ni && lg_inside(box, g->fat[h])) {
        // Still inside its margin: the loose box already holds it, and
        // nothing but the element's own (sequential) data is touched.
        index->boxes[h] = box;
        return QG_OK;
    }
    const qg_rect fat = lg_fatten(g, box);
    const qg_status s = lg_grow(g, txn, ni, fat);
    if (s != QG_OK)
        return s;
    if (oi != ni) {
        lg_unlink_element(g, oi, h);
        g->next[h] = g->loose[ni].head;
        g->loose[ni].head = h;
    }
    g->fat[h] = fat;
    index->boxes[h] = box;
    return QG_OK;
}

/// The loops over all loose cells walk each cell's list: a chain of
/// dependent loads into arrays indexed by handle, scattered in memory. They
/// prefetch the chains of the cells `ahead` of them in stages: the first
/// element 3 * LG_STAGE cells early, the second (whose link the first stage
/// brought in) 2 * LG_STAGE early, the third LG_STAGE early, so the misses
/// of many cells overlap instead of queueing one behind the other.
static inline void lg_prefetch_ahead(const loose_grid *g, int32_t i, int32_t nl, const qg_rect *data)
{
    for (int k = 0; k < 3; ++k) {
        // (the base's boxes are prefetched alongside: qg_cleanup reads both)
        const int32_t c = i + (3 - k) * LG_STAGE;
        if (c >= nl)
            continue;
        int32_t h = g->loose[c].head;
        for (int j = 0; j < k && h >= 0; ++j)
            h = g->next[h];
        if (h >= 0) {
            LG_PREFETCH(&data[h]);
            LG_PREFETCH(&g->base.boxes[h]);
            LG_PREFETCH(&g->next[h]);
        }
    }
}

/// Rebuilds every tight cell's list from the loose boxes, in place: a
/// counting sort by tight cell into the link pool. Each tight cell's links
/// end up contiguous and in loose-cell order, so the pair loop and queries
/// stream them instead of chasing links that months of frees and takes have
/// scattered over the pool. Needs no more links than the pool holds live,
/// as long as no loose range grew since the links were made.
static void lg_relink(loose_grid *g)
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
static void lg_trim(qg_alloc *alloc, void **data, int32_t *capacity, size_t elem, int32_t keep)
{
    if (keep < 16)
        keep = 16; // the smallest block qg_txn_reserve makes
    if (*capacity <= keep + keep / 64)
        return;
    *data = qg_mem_resize(alloc, *data, (size_t)*capacity * elem, (size_t)keep * elem);
    *capacity = keep;
}

/// Once no handle was issued since the last cleanup (a steady population),
/// the arrays indexed by handle shrink to the handles in use, the base's
/// boxes included: after start-up, memory is what the elements need, not
/// what the last growth step left. Waiting for a steady call keeps a
/// growing population from shrinking and regrowing every frame.
static void lg_trim_steady(loose_grid *g)
{
    qg_index *index = &g->base;
    const int32_t high = index->box_high;
    if (high > 0 && high == g->steady_high) {
        lg_trim(&index->alloc, (void **)&index->boxes, &index->box_capacity, sizeof(qg_rect), high);
        lg_trim(&index->alloc, (void **)&g->next, &g->next_capacity, sizeof(int32_t), high);
        lg_trim(&index->alloc, (void **)&g->fat, &g->fat_capacity, sizeof(qg_rect), high);
        lg_trim(&index->alloc, (void **)&g->snap, &g->snap_capacity, sizeof(lg_item), index->count);
    }
    g->steady_high = high;
}

static void loose_grid_cleanup(qg_index *index)
{
    loose_grid *g = (loose_grid *)index;
    const qg_rect *fat = g->fat;
    const int32_t nl = g->lcols * g->lrows;
    // Shrink every loose box to its elements' (fattened) boxes. Ranges only
    // shrink here, so the relink below fits in the links already held. The
    // same walk writes the elements out in cell order: the pair loop then
    // streams them instead of chasing every list again. (The snapshot's
    // capacity was reserved by the inserts: count never passes it.)
    int32_t k = 0;
    for (int32_t i = 0; i < nl; ++i) {
        lg_prefetch_ahead(g, i, nl, fat);
        lg_loose *c = &g->loose[i];
        float l = INFINITY, t = INFINITY, r = -INFINITY, b = -INFINITY;
        g->snap_start[i] = k;
        for (int32_t h = c->head; h >= 0; h = g->next[h]) {
            g->snap[k++] = (lg_item){h, index->boxes[h]};
            const qg_rect e = fat[h];
            l = e.min_x < l ? e.min_x : l;
            t = e.min_y < t ? e.min_y : t;
            r = e.max_x > r ? e.max_x : r;
            b = e.max_y > b ? e.max_y : b;
        }
        c->l = l, c->t = t, c->r = r, c->b = b;
    }
    g->snap_start[nl] = k;
    g->snap_fresh = true;
    lg_relink(g);
    lg_trim_steady(g);
}

static void loose_grid_clear(qg_index *index)
{
    loose_grid *g = (loose_grid *)index;
    const int32_t nl = g->lcols * g->lrows, nt = g->tcols * g->trows;
    g->snap_fresh = false;
    for (int32_t i = 0; i < nl; ++i)
        g->loose[i] = lg_empty;
    memset(g->tight, 0xff, (size_t)nt * sizeof(int32_t));
    qg_enode_pool_reset(&g->links);
}

static inline int32_t lg_max32(int32_t a, int32_t b)
{
    return a > b ? a : b;
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
                for (int32_t h = c->head; h >= 0; h = g->next[h]) {
                    stats->elements_tested++;
                    if (qg_overlaps(index->boxes[h], area) && !fn(h, user))
                        return;
                }
            }
        }
    }
}

/// A loose cell's elements, gathered.
typedef struct lg_gathered {
    int n;
    qg_handle h[LG_GATHER];
    qg_rect box[LG_GATHER];
} lg_gathered;

static bool lg_gather(const loose_grid *g, int32_t head, lg_gathered *out)
{
    int n = 0;
    for (int32_t h = head; h >= 0; h = g->next[h]) {
        if (n == LG_GATHER)
            return false;
        out->h[n] = h;
        out->box[n] = g->base.boxes[h];
        n++;
    }
    out->n = n;
    return true;
}

/// Pairs of element a (box ab, in loose cell ia) with the elements of the
/// loose cells after ia whose boxes overlap ab: "each element against the
/// loose cells near it". A loose cell linked in several of the tight cells
/// ab covers is taken in the first of them only.
static bool lg_pairs_of(const loose_grid *g, int32_t ia, qg_handle a, qg_rect ab, qg_pair_fn *fn, void *user,
                        qg_query_stats *stats)
{
    const lg_range ra = lg_range_of(g, ab.min_x, ab.min_y, ab.max_x, ab.max_y);
    const bool one = ra.x0 == ra.x1 && ra.y0 == ra.y1;
    const qg_enode *links = g->links.data;
    for (int32_t ty = ra.y0; ty <= ra.y1; ++ty) {
        for (int32_t tx = ra.x0; tx <= ra.x1; ++tx) {
            for (int32_t e = g->tight[ty * g->tcols + tx]; e >= 0; e = links[e].next) {
                const int32_t ib = links[e].element;
                if (ib <= ia)
                    continue;
                const lg_loose *cb = &g->loose[ib];
                if (cb->head < 0 || !lg_box_overlaps(cb, ab))
                    continue;
                if (!one) {
                    const lg_range rb = lg_cell_range(g, cb);
                    if (lg_max32(ra.x0, rb.x0) != tx || lg_max32(ra.y0, rb.y0) != ty)
                        continue;
                }
                stats->nodes_visited++;
                if (g->snap_fresh) {
                    const lg_item *it = g->snap;
                    const int32_t k1 = g->snap_start[ib + 1];
                    stats->elements_tested += k1 - g->snap_start[ib];
                    for (int32_t k = g->snap_start[ib]; k < k1; ++k) {
                        if (qg_overlaps(ab, it[k].box) && !qg_report_pair(fn, user, a, it[k].h))
                            return false;
                    }
                    continue;
                }
                for (int32_t h = cb->head; h >= 0; h = g->next[h]) {
                    stats->elements_tested++;
                    if (qg_overlaps(ab, g->base.boxes[h]) && !qg_report_pair(fn, user, a, h))
                        return false;
                }
            }
        }
    }
    return true;
}

/// A loose cell near the one being paired: its index and box.
typedef struct lg_near {
    int32_t ib;
    float l, t, r, b;
} lg_near;

/// Loose cells gathered per tight cell in lg_pairs_cell_fresh.
#define LG_NEAR 64

/// The pairs of loose cell ia from the snapshot: within the cell, then each
/// element against the later loose cells near it. Most elements of a cell
/// cover one and the same tight cell: its later, non-empty loose cells are
/// gathered once with their boxes into a short array on the C stack, and
/// those elements scan it instead of the tight list. Elements covering
/// several tight cells (their loose cells need the first-common-cell rule)
/// take lg_pairs_of.
static bool lg_pairs_cell_fresh(const loose_grid *g, int32_t ia, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    const lg_item *it = g->snap;
    const int32_t k0 = g->snap_start[ia], k1 = g->snap_start[ia + 1];
    lg_near near[LG_NEAR];
    int32_t nn = -1, t0 = -1; // t0 < 0: not gathered yet; nn < 0: too many
    int64_t tested = 0, visited = 1;
    bool go = true;
    for (int32_t i = k0; i < k1 && go; ++i) {
        const qg_rect ab = it[i].box;
        const qg_handle a = it[i].h;
        for (int32_t j = i + 1; j < k1; ++j) {
            tested++;
            if (qg_overlaps(ab, it[j].box) && !qg_report_pair(fn, user, a, it[j].h)) {
                go = false;
                break;
            }
        }
        if (!go)
            break;
        const lg_range ra = lg_range_of(g, ab.min_x, ab.min_y, ab.max_x, ab.max_y);
        const int32_t t = ra.y0 * g->tcols + ra.x0;
        if (ra.x0 != ra.x1 || ra.y0 != ra.y1 || (t0 >= 0 && (t != t0 || nn < 0))) {
            go = lg_pairs_of(g, ia, a, ab, fn, user, stats);
            continue;
        }
        if (t0 < 0) {
            t0 = t;
            nn = 0;
            for (int32_t e = g->tight[t]; e >= 0; e = g->links.data[e].next) {
                const int32_t ib = g->links.data[e].element;
                if (ib <= ia || g->snap_start[ib] == g->snap_start[ib + 1])
                    continue;
                if (nn == LG_NEAR) {
                    nn = -1;
                    break;
                }
                const lg_loose *cb = &g->loose[ib];
                near[nn++] = (lg_near){ib, cb->l, cb->t, cb->r, cb->b};
            }
            if (nn < 0) {
                go = lg_pairs_of(g, ia, a, ab, fn, user, stats);
                continue;
            }
        }
        for (int32_t m = 0; m < nn && go; ++m) {
            const lg_near *nb = &near[m];
            if (!((nb->l <= ab.max_x) & (ab.min_x <= nb->r) & (nb->t <= ab.max_y) & (ab.min_y <= nb->b)))
                continue;
            visited++;
            const int32_t q1 = g->snap_start[nb->ib + 1];
            tested += q1 - g->snap_start[nb->ib];
            for (int32_t q = g->snap_start[nb->ib]; q < q1; ++q) {
                if (qg_overlaps(ab, it[q].box) && !qg_report_pair(fn, user, a, it[q].h)) {
                    go = false;
                    break;
                }
            }
        }
    }
    stats->nodes_visited += visited;
    stats->elements_tested += tested;
    return go;
}

static void loose_grid_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    const loose_grid *g = (const loose_grid *)index;
    const qg_rect *boxes = index->boxes;
    const int32_t nl = g->lcols * g->lrows;
    if (g->snap_fresh) {
        // Right after qg_cleanup: everything streams from the snapshot.
        for (int32_t ia = 0; ia < nl; ++ia) {
            if (g->snap_start[ia] != g->snap_start[ia + 1] && !lg_pairs_cell_fresh(g, ia, fn, user, stats))
                return;
        }
        return;
    }
    lg_gathered A;
    for (int32_t ia = 0; ia < nl; ++ia) {
        // This cell's chain, and the chains of the row below, which the
        // pairs of this cell reach first.
        lg_prefetch_ahead(g, ia, nl, boxes);
        lg_prefetch_ahead(g, ia + g->lcols, nl, boxes);
        const lg_loose *ca = &g->loose[ia];
        if (ca->head < 0)
            continue;
        stats->nodes_visited++;
        if (lg_gather(g, ca->head, &A)) {
            for (int i = 0; i < A.n; ++i) {
                for (int j = i + 1; j < A.n; ++j) {
                    stats->elements_tested++;
                    if (qg_overlaps(A.box[i], A.box[j]) && !qg_report_pair(fn, user, A.h[i], A.h[j]))
                        return;
                }
                if (!lg_pairs_of(g, ia, A.h[i], A.box[i], fn, user, stats))
                    return;
            }
        } else {
            for (int32_t a = ca->head; a >= 0; a = g->next[a]) {
                for (int32_t b = g->next[a]; b >= 0; b = g->next[b]) {
                    stats->elements_tested++;
                    if (qg_overlaps(boxes[a], boxes[b]) && !qg_report_pair(fn, user, a, b))
                        return;
                }
                if (!lg_pairs_of(g, ia, a, boxes[a], fn, user, stats))
                    return;
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
    const qg_rect b = index->config.bounds;
    const float w = (b.max_x - b.min_x) / (float)g->tcols, hgt = (b.max_y - b.min_y) / (float)g->trows;
    for (int32_t ty = 0; ty < g->trows; ++ty) {
        for (int32_t tx = 0; tx < g->tcols; ++tx) {
            int32_t count = 0;
            for (int32_t e = g->tight[ty * g->tcols + tx]; e >= 0; e = g->links.data[e].next)
                count++;
            const qg_rect r = {b.min_x + (float)tx * w, b.min_y + (float)ty * hgt,
                               tx + 1 == g->tcols ? b.max_x : b.min_x + (float)(tx + 1) * w,
                               ty + 1 == g->trows ? b.max_y : b.min_y + (float)(ty + 1) * hgt};
            fn(r, 0, count, user);
        }
    }
    const int32_t nl = g->lcols * g->lrows;
    for (int32_t i = 0; i < nl; ++i) {
        const lg_loose *c = &g->loose[i];
        if (!(c->l <= c->r))
            continue;
        int32_t count = 0;
        for (int32_t h = c->head; h >= 0; h = g->next[h])
            count++;
        fn((qg_rect){c->l, c->t, c->r, c->b}, 1, count, user);
    }
}

static qg_status loose_grid_validate(const qg_index *index, size_t *bytes)
{
    const loose_grid *g = (const loose_grid *)index;
    const int32_t nl = g->lcols * g->lrows, nt = g->tcols * g->trows;
    if (nl < 1 || nl > g->loose_capacity || nt < 1 || nt > g->tight_capacity)
        return QG_ERR_INVALID;
    if (index->box_high > 0 && (g->next_capacity < index->box_high || g->fat_capacity < index->box_high))
        return QG_ERR_INVALID;
    // Elements: each live element in the loose cell of its centre, inside
    // that cell's box; the lists hold count elements.
    int64_t listed = 0, expected_links = 0;
    for (int32_t i = 0; i < nl; ++i) {
        const lg_loose *c = &g->loose[i];
        int64_t len = 0;
        for (int32_t h = c->head; h >= 0; h = g->next[h]) {
            if (++len > index->count || !qg_slot_live(index, h) || lg_loose_of(g, index->boxes[h]) != i)
                return QG_ERR_INVALID;
            const qg_rect f = g->fat[h];
            if (!lg_inside(index->boxes[h], f) || !(c->l <= f.min_x && c->t <= f.min_y && c->r >= f.max_x && c->b >= f.max_y))
                return QG_ERR_INVALID;
        }
        listed += len;
        if ((c->l <= c->r) != (c->t <= c->b) || isnan(c->l) || isnan(c->t) || isnan(c->r) || isnan(c->b))
            return QG_ERR_INVALID;
        expected_links += lg_range_size(lg_cell_range(g, c));
    }
    if (listed != index->count || g->snap_capacity < index->count)
        return QG_ERR_INVALID;
    if (g->snap_fresh) {
        // The snapshot is the lists, in cell order, with the current boxes.
        if (g->snap_start[nl] != index->count)
            return QG_ERR_INVALID;
        for (int32_t i = 0; i < nl; ++i) {
            int32_t k = g->snap_start[i];
            for (int32_t h = g->loose[i].head; h >= 0; h = g->next[h], ++k) {
                if (k >= g->snap_start[i + 1] || g->snap[k].h != h ||
                    memcmp(&g->snap[k].box, &index->boxes[h], sizeof(qg_rect)) != 0)
                    return QG_ERR_INVALID;
            }
            if (k != g->snap_start[i + 1])
                return QG_ERR_INVALID;
        }
    }
    // Links: every link in a tight cell names a loose cell whose range holds
    // that tight cell, at most once per tight cell; with the count matching
    // the sum of the ranges, every range is fully linked.
    int64_t links = 0;
    for (int32_t t = 0; t < nt; ++t) {
        const int32_t tx = t % g->tcols, ty = t / g->tcols;
        for (int32_t e = g->tight[t]; e >= 0; e = g->links.data[e].next) {
            if (e >= g->links.high || ++links > g->links.live)
                return QG_ERR_INVALID;
            const int32_t i = g->links.data[e].element;
            if (i < 0 || i >= nl || !lg_range_has(lg_cell_range(g, &g->loose[i]), tx, ty))
                return QG_ERR_INVALID;
            for (int32_t f = g->links.data[e].next; f >= 0; f = g->links.data[f].next) {
                if (g->links.data[f].element == i)
                    return QG_ERR_INVALID;
            }
        }
    }
    if (links != g->links.live || links != expected_links ||
        qg_enode_free_count(&g->links) != g->links.high - g->links.live)
        return QG_ERR_INVALID;
    *bytes += (size_t)g->loose_capacity * sizeof(lg_loose) + (size_t)g->tight_capacity * sizeof(int32_t) +
              (size_t)g->links.capacity * sizeof(qg_enode) + (size_t)g->next_capacity * sizeof(int32_t) +
              (size_t)g->fat_capacity * sizeof(qg_rect) + (size_t)g->snap_capacity * sizeof(lg_item) +
              (size_t)g->snap_start_capacity * sizeof(int32_t);
    return QG_OK;
}

const qg_kind_class qg_loose_grid_class = {
    .kind = QG_LOOSE_GRID,
    .size = sizeof(loose_grid),
    .configure = loose_grid_configure,
    .init = loose_grid_init,
    .destroy = loose_grid_destroy,
    .insert = loose_grid_insert,
    .remove = loose_grid_remove,
    .move = loose_grid_move,
    .cleanup = loose_grid_cleanup,
    .clear = loose_grid_clear,
    .query = loose_grid_query,
    .pairs = loose_grid_pairs,
    .stats = loose_grid_stats,
    .visit = loose_grid_visit,
    .validate = loose_grid_validate,
};
