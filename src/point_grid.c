// QG_POINT_GRID: the uniform upper-bound grid of "Dirty Trick: Uniform Sizes"
// (seed 003, part 6).
//
// - config.max_element_size is the upper bound on every box's width and
//   height; a larger box is refused with QG_ERR_CAPACITY and nothing changes.
//   0 means "choose": twice element_size; with no element_size either, no
//   bound (every box fits, the grid is one cell: correct, not fast).
// - An element is stored as one point, in exactly one cell, with no size
//   ("We don't have to store a size with each element"). The point is the
//   box's min corner rather than its centre: the corner is a coordinate the
//   box already has exactly, while a centre (min + max) / 2 rounds, and a
//   rounded point would make the widened search inexact. Widening the search
//   by the whole bound on the min side only is the same area as widening by
//   half the bound on both sides of the centre.
// - The point is kept as fixed-point grid coordinates: 8 bits of position
//   inside its cell (the cell gives the high bits). An element node is 6
//   bytes, indexed by handle: the next node of its cell's singly-linked index
//   list and the two 8-bit offsets. Cells are 4-byte list heads. The full box
//   stays in the base's cold box array; hot loops read it only for the final
//   exact test of the few candidates the points let through.
// - Queries widen the area by the bound (see pg_widen for why the float
//   rounding cannot lose an element), walk the cells it covers and filter
//   by point before the exact test.
// - Pairs walk the grid in strips of PG_STRIP columns, row by row. Each row
//   of a strip is gathered once into a small array on the C stack, sorted by
//   cell, with the previous row kept from the last step, so the pair loop
//   streams two short contiguous ranges per element (its own cell and the
//   east cell, then the three cells above) instead of chasing lists. A cell
//   is at least as wide as the bound, so partners are never further than the
//   next cell; each unordered pair of cells is visited from one side only and
//   every element is in one cell, so every pair is reported once.
// - qg_cleanup gives back spare capacity of the per-handle arrays (the
//   base's boxes and the nodes) once the population is steady, so memory is
//   exactly n * (16 + 6) bytes plus the cells. Shrinking never fails.
#include "index_internal.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/// Quanta per cell on each axis: positions inside a cell are 8 bits.
#define PG_Q 256
#define PG_QBITS 8
/// Per axis at most this many cells (fixed-point coordinates stay below
/// 2^22, where float rounding in the mapping stays under half a quantum).
#define PG_MAX_SIDE 16384
/// At most this many cells in all (16 MiB of heads).
#define PG_MAX_CELLS (1 << 22)
/// Columns per strip in qg_pairs, and elements a gathered row of a strip may
/// hold; a denser row is walked in place.
#define PG_STRIP 32
#define PG_ROW_CAP 1024
/// Candidate pairs collected before their boxes are tested.
#define PG_BATCH 128
/// Bytes per element node: next (int32) and the x, y offsets in the cell.
#define PG_NODE 6

typedef struct point_grid {
    qg_index base;
    int32_t *heads; ///< per cell: first element (a handle), -1 if empty
    int32_t head_capacity;
    uint8_t *nodes; ///< per handle: PG_NODE bytes
    int32_t node_capacity;
    int32_t cols, rows;
    int32_t gmax_x, gmax_y; ///< largest fixed-point coordinate: cols * PG_Q - 1
    float ox, oy;           ///< world origin
    float sx, sy;           ///< quanta per world unit
    float bound;            ///< max_element_size
    float pad;              ///< bound, rounded up (see pg_widen)
    int32_t reach_x, reach_y; ///< quanta two points of an overlapping pair can differ by, at most
    int32_t steady_high;    ///< box_high seen by the last qg_cleanup
} point_grid;

typedef struct pg_point {
    int32_t x, y; ///< fixed-point grid coordinates
} pg_point;

static inline int32_t pg_next(const point_grid *g, int32_t h)
{
    int32_t n;
    memcpy(&n, g->nodes + (size_t)h * PG_NODE, sizeof n);
    return n;
}

static inline void pg_set_next(point_grid *g, int32_t h, int32_t n)
{
    memcpy(g->nodes + (size_t)h * PG_NODE, &n, sizeof n);
}

static inline void pg_set_q(point_grid *g, int32_t h, pg_point p)
{
    uint8_t *q = g->nodes + (size_t)h * PG_NODE + 4;
    q[0] = (uint8_t)p.x;
    q[1] = (uint8_t)p.y;
}

/// The point of element h stored in cell (cx, cy).
static inline pg_point pg_node_point(const point_grid *g, int32_t h, int32_t cx, int32_t cy)
{
    const uint8_t *q = g->nodes + (size_t)h * PG_NODE + 4;
    return (pg_point){cx << PG_QBITS | q[0], cy << PG_QBITS | q[1]};
}

/// Fixed-point coordinate of v, clamped into [0, gmax]. Monotonic in v, so
/// a point inside a range maps inside the mapped range.
static inline int32_t pg_map(float v, float origin, float scale, int32_t gmax)
{
    const float f = (v - origin) * scale;
    if (!(f > 0.0f))
        return 0;
    if (f >= (float)gmax)
        return gmax;
    return (int32_t)f;
}

static inline pg_point pg_point_of(const point_grid *g, float x, float y)
{
    return (pg_point){pg_map(x, g->ox, g->sx, g->gmax_x), pg_map(y, g->oy, g->sy, g->gmax_y)};
}

/// The points of two boxes' min corners at once (one move maps both). Same
/// clamps as pg_map, without branches.
static inline void pg_point_pair(const point_grid *g, qg_rect a, qg_rect b, pg_point *pa, pg_point *pb)
{
#if defined(__SSE2__)
    __m128 f = _mm_mul_ps(_mm_sub_ps(_mm_setr_ps(a.min_x, a.min_y, b.min_x, b.min_y),
                                     _mm_setr_ps(g->ox, g->oy, g->ox, g->oy)),
                          _mm_setr_ps(g->sx, g->sy, g->sx, g->sy));
    f = _mm_min_ps(_mm_max_ps(f, _mm_setzero_ps()),
                   _mm_setr_ps((float)g->gmax_x, (float)g->gmax_y, (float)g->gmax_x, (float)g->gmax_y));
    int32_t out[4];
    _mm_storeu_si128((__m128i *)out, _mm_cvttps_epi32(f));
    *pa = (pg_point){out[0], out[1]};
    *pb = (pg_point){out[2], out[3]};
#else
    *pa = pg_point_of(g, a.min_x, a.min_y);
    *pb = pg_point_of(g, b.min_x, b.min_y);
#endif
}

static inline int32_t pg_cell_of(const point_grid *g, pg_point p)
{
    return (p.y >> PG_QBITS) * g->cols + (p.x >> PG_QBITS);
}

/// True when the box is within the bound. Same float subtraction as the
/// contract's definition of "width".
static inline bool pg_fits(const point_grid *g, qg_rect b)
{
    return (b.max_x - b.min_x <= g->bound) & (b.max_y - b.min_y <= g->bound);
}

/// The lower search limit for an area starting at v: every box that fits the
/// bound and reaches v has its min corner at or above the result.
///
/// Such a box has min >= v - bound * (1 + 2^-24) in real numbers (its width
/// passed pg_fits after one rounding). pad is above bound * (1 + 2^-24), so
/// v - pad is below that; v - pad is then rounded to the nearest float, and
/// no float lies between a real number and its nearest float, so a float
/// min at or above v - pad is at or above the rounded result too.
static inline float pg_widen(const point_grid *g, float v)
{
    return v - g->pad;
}

static void pg_link(point_grid *g, int32_t cell, qg_handle h, pg_point p)
{
    pg_set_next(g, h, g->heads[cell]);
    pg_set_q(g, h, p);
    g->heads[cell] = h;
}

static void pg_unlink(point_grid *g, int32_t cell, qg_handle h)
{
    int32_t e = g->heads[cell];
    if (e == h) {
        g->heads[cell] = pg_next(g, h);
        return;
    }
    while (e >= 0) {
        const int32_t n = pg_next(g, e);
        if (n == h) {
            pg_set_next(g, e, pg_next(g, h));
            return;
        }
        e = n;
    }
}

static qg_status point_grid_configure(qg_config *config)
{
    const float extent = qg_rect_extent(config->bounds);
    if (config->max_element_size == 0.0f) {
        // Twice the typical width; with no typical width either, no bound
        // at all: one cell, every box accepted, correct but no faster than
        // brute force. Set max_element_size to get the speed.
        config->max_element_size = config->element_size > 0.0f ? 2.0f * config->element_size : INFINITY;
        if (!(config->max_element_size > 0.0f))
            return QG_ERR_INVALID;
    }
    // Cells narrower than the bound would put partners more than one cell
    // apart; a cell is raised to the bound plus the rounding slack.
    const float least = config->max_element_size * 1.03125f;
    if (config->cell_size == 0.0f)
        config->cell_size = 4.0f * config->max_element_size;
    if (config->cell_size < least || !isfinite(config->cell_size))
        config->cell_size = isfinite(least) ? least : extent;
    return QG_OK;
}

/// Cells along an axis of the given extent: as many as fit at cell_size
/// (cells only get wider than asked), at least 1, at most PG_MAX_SIDE.
static int32_t pg_side(float extent, float cell)
{
    double n = floor((double)extent / (double)cell);
    if (!(n >= 1.0))
        n = 1.0;
    if (n > PG_MAX_SIDE)
        n = PG_MAX_SIDE;
    return (int32_t)n;
}

/// Quanta per world unit along an axis of `side` cells.
static float pg_scale(int32_t side, float extent)
{
    return (float)((double)side * PG_Q / (double)extent);
}

/// How many quanta apart the min corners of two overlapping boxes can map:
/// pad * scale in real numbers, plus 1 for the floors and 2 for the rounding
/// of the mapping (each under half a quantum while coordinates stay below
/// 2^22). Capped: any reach past two cells lets every point through anyway.
static int32_t pg_reach(float pad, float scale)
{
    const double r = ceil((double)pad * (double)scale) + 3.0;
    return r < 4 * PG_Q ? (int32_t)r : 4 * PG_Q;
}

static qg_status point_grid_init(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    const qg_config *c = &index->config;
    const float ex = c->bounds.max_x - c->bounds.min_x, ey = c->bounds.max_y - c->bounds.min_y;
    g->bound = c->max_element_size;
    g->pad = nextafterf(g->bound + g->bound * 0x1p-20f, INFINITY);
    g->cols = pg_side(ex, c->cell_size);
    g->rows = pg_side(ey, c->cell_size);
    while ((int64_t)g->cols * g->rows > PG_MAX_CELLS) {
        // Halve the longer side: cells only get wider, which keeps every
        // requirement on them.
        if (g->cols >= g->rows)
            g->cols = (g->cols + 1) / 2;
        else
            g->rows = (g->rows + 1) / 2;
    }
    // Partners must be at most one cell apart: a cell spans at least the
    // reach (configure made it wider than the bound; this absorbs rounding).
    while (g->cols > 1 && pg_reach(g->pad, pg_scale(g->cols, ex)) > PG_Q)
        g->cols--;
    while (g->rows > 1 && pg_reach(g->pad, pg_scale(g->rows, ey)) > PG_Q)
        g->rows--;
    g->gmax_x = g->cols * PG_Q - 1;
    g->gmax_y = g->rows * PG_Q - 1;
    g->ox = c->bounds.min_x;
    g->oy = c->bounds.min_y;
    g->sx = pg_scale(g->cols, ex);
    g->sy = pg_scale(g->rows, ey);
    g->reach_x = pg_reach(g->pad, g->sx);
    g->reach_y = pg_reach(g->pad, g->sy);
    g->steady_high = -1;
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    const int32_t cells = g->cols * g->rows;
    if (!qg_txn_reserve(&txn, (void **)&g->heads, &g->head_capacity, sizeof(int32_t), cells))
        return QG_ERR_NOMEM;
    memset(g->heads, 0xff, (size_t)g->head_capacity * sizeof(int32_t));
    return QG_OK;
}

static void point_grid_destroy(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    qg_array_free(&index->alloc, (void **)&g->heads, &g->head_capacity, sizeof(int32_t));
    qg_array_free(&index->alloc, (void **)&g->nodes, &g->node_capacity, PG_NODE);
}

static qg_status point_grid_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    point_grid *g = (point_grid *)index;
    if (!pg_fits(g, box))
        return QG_ERR_CAPACITY;
    if (!qg_txn_reserve(txn, (void **)&g->nodes, &g->node_capacity, PG_NODE, (int64_t)h + 1))
        return QG_ERR_NOMEM;
    const pg_point p = pg_point_of(g, box.min_x, box.min_y);
    pg_link(g, pg_cell_of(g, p), h, p);
    return QG_OK;
}

static void point_grid_remove(qg_index *index, qg_handle h)
{
    point_grid *g = (point_grid *)index;
    const qg_rect b = index->boxes[h];
    pg_unlink(g, pg_cell_of(g, pg_point_of(g, b.min_x, b.min_y)), h);
}

static qg_status point_grid_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    (void)txn; // a move never allocates: the element keeps its node
    point_grid *g = (point_grid *)index;
    if (!pg_fits(g, box))
        return QG_ERR_CAPACITY;
    const qg_rect old = index->boxes[h];
    index->boxes[h] = box;
    pg_point op, np;
    pg_point_pair(g, old, box, &op, &np);
    if (((op.x ^ np.x) | (op.y ^ np.y)) >> PG_QBITS == 0) {
        pg_set_q(g, h, np); // same cell: only the offsets change
        return QG_OK;
    }
    pg_unlink(g, pg_cell_of(g, op), h);
    pg_link(g, pg_cell_of(g, np), h, np);
    return QG_OK;
}

/// Gives back the spare capacity of an array indexed by handle.
static void pg_trim(qg_alloc *alloc, void **data, int32_t *capacity, size_t elem, int32_t keep)
{
    if (keep < 16)
        keep = 16; // the smallest block qg_txn_reserve makes
    if (*capacity <= keep + keep / 64)
        return;
    *data = qg_mem_resize(alloc, *data, (size_t)*capacity * elem, (size_t)keep * elem);
    *capacity = keep;
}

static void point_grid_cleanup(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    // The grid has no upkeep; memory does. Once no handle was issued since
    // the last cleanup (a steady population), the per-handle arrays shrink
    // to the handles in use. Waiting for a steady call keeps a growing
    // population from paying a shrink and a regrow every frame.
    const int32_t high = index->box_high;
    if (high > 0 && high == g->steady_high) {
        pg_trim(&index->alloc, (void **)&index->boxes, &index->box_capacity, sizeof(qg_rect), high);
        pg_trim(&index->alloc, (void **)&g->nodes, &g->node_capacity, PG_NODE, high);
    }
    g->steady_high = high;
}

static void point_grid_clear(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    memset(g->heads, 0xff, (size_t)g->cols * g->rows * sizeof(int32_t));
}

static void point_grid_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                             qg_query_stats *stats)
{
    const point_grid *g = (const point_grid *)index;
    const pg_point lo = pg_point_of(g, pg_widen(g, area.min_x), pg_widen(g, area.min_y));
    const pg_point hi = pg_point_of(g, area.max_x, area.max_y);
    const int32_t cx0 = lo.x >> PG_QBITS, cx1 = hi.x >> PG_QBITS;
    const int32_t cy0 = lo.y >> PG_QBITS, cy1 = hi.y >> PG_QBITS;
    for (int32_t cy = cy0; cy <= cy1; ++cy) {
        for (int32_t cx = cx0; cx <= cx1; ++cx) {
            stats->nodes_visited++;
            for (int32_t h = g->heads[cy * g->cols + cx]; h >= 0; h = pg_next(g, h)) {
                const pg_point p = pg_node_point(g, h, cx, cy);
                if ((p.x < lo.x) | (p.x > hi.x) | (p.y < lo.y) | (p.y > hi.y))
                    continue;
                stats->elements_tested++;
                if (qg_overlaps(index->boxes[h], area) && !fn(h, user))
                    return;
            }
        }
    }
}

/// One row of a strip, gathered and sorted by x: handles and points, x from
/// the strip's first gathered column, y inside the row.
typedef struct pg_row {
    int32_t n;      ///< elements gathered
    int32_t m0, m1; ///< the strip's own columns: elements [m0, m1)
    int32_t handle[PG_ROW_CAP];
    int16_t x[PG_ROW_CAP], y[PG_ROW_CAP];
} pg_row;

/// Candidate pairs waiting for their exact test.
typedef struct pg_batch {
    qg_handle a[PG_BATCH], b[PG_BATCH];
    int n;
    int64_t tested;
} pg_batch;

#if defined(__GNUC__)
#define PG_PREFETCH(p) __builtin_prefetch(p)
#else
#define PG_PREFETCH(p) ((void)(p))
#endif

/// Tests the batched candidates against their boxes and reports the pairs;
/// false when the callback asked to stop.
static bool pg_flush(const point_grid *g, pg_batch *bt, qg_pair_fn *fn, void *user)
{
    const qg_rect *boxes = g->base.boxes;
    const int n = bt->n;
    bt->n = 0;
    bt->tested += n;
    for (int i = 0; i < n; ++i) {
        if (qg_overlaps(boxes[bt->a[i]], boxes[bt->b[i]]) && !qg_report_pair(fn, user, bt->a[i], bt->b[i]))
            return false;
    }
    return true;
}

/// Queues a candidate; its boxes are fetched while more are found.
static inline bool pg_candidate(const point_grid *g, pg_batch *bt, qg_handle a, qg_handle b, qg_pair_fn *fn,
                                void *user)
{
    PG_PREFETCH(&g->base.boxes[a]);
    PG_PREFETCH(&g->base.boxes[b]);
    bt->a[bt->n] = a;
    bt->b[bt->n] = b;
    return ++bt->n < PG_BATCH || pg_flush(g, bt, fn, user);
}

/// Gathers row cy, columns [g0, g1), into r sorted by x; the strip's own
/// columns are [c0, c1). False when the row does not fit.
///
/// Each cell's list is a chain of dependent loads scattered over the node
/// array. The chains of the row are first walked side by side, one link of
/// each per round, so their cache misses overlap instead of queueing; the
/// second walk, which fills r, then finds every node in cache.
static bool pg_gather(const point_grid *g, int32_t cy, int32_t g0, int32_t g1, int32_t c0, int32_t c1, pg_row *r)
{
    const int32_t *heads = g->heads + (size_t)cy * g->cols;
    const uint8_t *nodes = g->nodes;
    const int32_t w = g1 - g0;
    int32_t cursor[PG_STRIP + 2];
    int32_t total = 0;
    for (int32_t i = 0; i < w; ++i) {
        cursor[i] = heads[g0 + i];
        if (cursor[i] >= 0)
            PG_PREFETCH(nodes + (size_t)cursor[i] * PG_NODE);
    }
    for (bool active = true; active && total <= PG_ROW_CAP;) {
        active = false;
        for (int32_t i = 0; i < w; ++i) {
            const int32_t h = cursor[i];
            if (h < 0)
                continue;
            int32_t n;
            memcpy(&n, nodes + (size_t)h * PG_NODE, sizeof n);
            cursor[i] = n;
            if (n >= 0)
                PG_PREFETCH(nodes + (size_t)n * PG_NODE);
            total++;
            active = true;
        }
    }
    if (total > PG_ROW_CAP)
        return false;
    int32_t k = 0;
    for (int32_t cx = g0; cx < g1; ++cx) {
        if (cx == c0)
            r->m0 = k;
        if (cx == c1)
            r->m1 = k;
        const int32_t first = k;
        const int16_t base = (int16_t)((cx - g0) << PG_QBITS);
        for (int32_t h = heads[cx]; h >= 0;) {
            const int32_t self = h;
            const uint8_t *nd = nodes + (size_t)h * PG_NODE;
            const int16_t x = (int16_t)(base + nd[4]);
            const int16_t y = nd[5];
            memcpy(&h, nd, sizeof h);
            // Insertion sort: the cells come in column order, so an element
            // only moves past the ones gathered before it from its own cell.
            int32_t j = k;
            while (j > first && r->x[j - 1] > x) {
                r->x[j] = r->x[j - 1];
                r->y[j] = r->y[j - 1];
                r->handle[j] = r->handle[j - 1];
                j--;
            }
            r->x[j] = x;
            r->y[j] = y;
            r->handle[j] = self;
            k++;
        }
    }
    if (g1 == c1)
        r->m1 = k;
    r->n = k;
    return true;
}

/// Pairs of a gathered row (cur) with itself and with the row above (prev,
/// NULL on the first row), both gathered over the same columns: a sweep
/// along x over the strip's own elements. Each own element pairs with the
/// elements after it in its row and with those of the row above within
/// reach, so a pair in one row is found from its left element, and a pair
/// across two rows from the lower element, once.
static bool pg_pairs_rows(const point_grid *g, pg_batch *bt, const pg_row *cur, const pg_row *prev, qg_pair_fn *fn,
                          void *user)
{
    const int32_t rx = g->reach_x, ry = g->reach_y;
    const int32_t n = cur->n, pn = prev ? prev->n : 0;
    int32_t lo = 0;
    for (int32_t i = cur->m0; i < cur->m1; ++i) {
        const qg_handle a = cur->handle[i];
        const int32_t x = cur->x[i], y = cur->y[i];
        for (int32_t j = i + 1; j < n && cur->x[j] <= x + rx; ++j) {
            const int32_t dy = cur->y[j] - y;
            if ((dy >= -ry) & (dy <= ry) && !pg_candidate(g, bt, a, cur->handle[j], fn, user))
                return false;
        }
        while (lo < pn && prev->x[lo] < x - rx)
            lo++;
        // The row above lies PG_Q quanta higher: dy is positive.
        const int32_t yb = y + PG_Q - ry;
        for (int32_t j = lo; j < pn && prev->x[j] <= x + rx; ++j) {
            if (prev->y[j] >= yb && !pg_candidate(g, bt, a, prev->handle[j], fn, user))
                return false;
        }
    }
    return true;
}

/// Candidates of a against the list of cell (cx, cy), starting at h.
static bool pg_scan_list(const point_grid *g, pg_batch *bt, int32_t h, int32_t cx, int32_t cy, pg_point p,
                         qg_handle a, qg_pair_fn *fn, void *user)
{
    for (; h >= 0; h = pg_next(g, h)) {
        const pg_point q = pg_node_point(g, h, cx, cy);
        const int32_t dx = q.x - p.x, dy = q.y - p.y;
        if ((dx >= -g->reach_x) & (dx <= g->reach_x) & (dy >= -g->reach_y) & (dy <= g->reach_y) &&
            !pg_candidate(g, bt, a, h, fn, user))
            return false;
    }
    return true;
}

/// Pairs of row cy in columns [c0, c1), walking the lists in place: for rows
/// too dense to gather. Same neighbours as pg_pairs_rows.
static bool pg_pairs_in_place(const point_grid *g, pg_batch *bt, int32_t cy, int32_t c0, int32_t c1,
                              qg_pair_fn *fn, void *user)
{
    for (int32_t cx = c0; cx < c1; ++cx) {
        for (int32_t a = g->heads[cy * g->cols + cx]; a >= 0; a = pg_next(g, a)) {
            const pg_point p = pg_node_point(g, a, cx, cy);
            if (!pg_scan_list(g, bt, pg_next(g, a), cx, cy, p, a, fn, user))
                return false;
            if (cx + 1 < g->cols &&
                !pg_scan_list(g, bt, g->heads[cy * g->cols + cx + 1], cx + 1, cy, p, a, fn, user))
                return false;
            if (cy == 0)
                continue;
            for (int32_t nx = cx > 0 ? cx - 1 : 0; nx <= cx + 1 && nx < g->cols; ++nx) {
                if (!pg_scan_list(g, bt, g->heads[(cy - 1) * g->cols + nx], nx, cy - 1, p, a, fn, user))
                    return false;
            }
        }
    }
    return true;
}

static void point_grid_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    const point_grid *g = (const point_grid *)index;
    pg_row rows[2];
    pg_batch bt;
    bt.n = 0;
    bt.tested = 0;
    stats->nodes_visited = (int64_t)g->cols * g->rows;
    for (int32_t c0 = 0; c0 < g->cols; c0 += PG_STRIP) {
        const int32_t c1 = c0 + PG_STRIP < g->cols ? c0 + PG_STRIP : g->cols;
        const int32_t g0 = c0 > 0 ? c0 - 1 : 0, g1 = c1 < g->cols ? c1 + 1 : c1;
        pg_row *cur = &rows[0], *prev = NULL;
        for (int32_t cy = 0; cy < g->rows; ++cy) {
            const bool fit = pg_gather(g, cy, g0, g1, c0, c1, cur);
            bool go;
            if (fit && (prev != NULL || cy == 0))
                go = pg_pairs_rows(g, &bt, cur, prev, fn, user);
            else
                go = pg_pairs_in_place(g, &bt, cy, c0, c1, fn, user);
            if (!go)
                goto stop;
            if (fit) {
                prev = cur;
                cur = cur == &rows[0] ? &rows[1] : &rows[0];
            } else {
                prev = NULL;
            }
        }
    }
    pg_flush(g, &bt, fn, user);
stop:
    stats->elements_tested = bt.tested;
}

static void point_grid_stats(const qg_index *index, qg_stats *stats)
{
    const point_grid *g = (const point_grid *)index;
    stats->nodes = g->cols * g->rows;
    stats->leaves = g->cols * g->rows;
    stats->max_depth_reached = 0;
}

static void point_grid_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    const point_grid *g = (const point_grid *)index;
    const qg_rect b = index->config.bounds;
    const float w = (b.max_x - b.min_x) / (float)g->cols, hgt = (b.max_y - b.min_y) / (float)g->rows;
    for (int32_t cy = 0; cy < g->rows; ++cy) {
        for (int32_t cx = 0; cx < g->cols; ++cx) {
            int32_t count = 0;
            for (int32_t h = g->heads[cy * g->cols + cx]; h >= 0; h = pg_next(g, h))
                count++;
            const qg_rect r = {b.min_x + (float)cx * w, b.min_y + (float)cy * hgt,
                               cx + 1 == g->cols ? b.max_x : b.min_x + (float)(cx + 1) * w,
                               cy + 1 == g->rows ? b.max_y : b.min_y + (float)(cy + 1) * hgt};
            fn(r, 0, count, user);
        }
    }
}

static qg_status point_grid_validate(const qg_index *index, size_t *bytes)
{
    const point_grid *g = (const point_grid *)index;
    const int64_t cells = (int64_t)g->cols * g->rows;
    if (cells < 1 || cells > g->head_capacity || (g->reach_x > PG_Q && g->cols > 1) ||
        (g->reach_y > PG_Q && g->rows > 1))
        return QG_ERR_INVALID;
    if (index->box_high > 0 && g->node_capacity < index->box_high)
        return QG_ERR_INVALID;
    // Every list is acyclic and holds live handles in the cell of their
    // point, with the offsets of that point; the lists hold count elements.
    int64_t listed = 0;
    for (int32_t cy = 0; cy < g->rows; ++cy) {
        for (int32_t cx = 0; cx < g->cols; ++cx) {
            int64_t len = 0;
            for (int32_t h = g->heads[cy * g->cols + cx]; h >= 0; h = pg_next(g, h)) {
                if (++len > index->count || !qg_slot_live(index, h))
                    return QG_ERR_INVALID;
                const qg_rect b = index->boxes[h];
                const pg_point p = pg_point_of(g, b.min_x, b.min_y);
                const pg_point q = pg_node_point(g, h, cx, cy);
                if (!pg_fits(g, b) || p.x != q.x || p.y != q.y)
                    return QG_ERR_INVALID;
            }
            listed += len;
        }
    }
    if (listed != index->count)
        return QG_ERR_INVALID;
    *bytes += (size_t)g->head_capacity * sizeof(int32_t) + (size_t)g->node_capacity * PG_NODE;
    return QG_OK;
}

const qg_kind_class qg_point_grid_class = {
    .kind = QG_POINT_GRID,
    .size = sizeof(point_grid),
    .configure = point_grid_configure,
    .init = point_grid_init,
    .destroy = point_grid_destroy,
    .insert = point_grid_insert,
    .remove = point_grid_remove,
    .move = point_grid_move,
    .cleanup = point_grid_cleanup,
    .clear = point_grid_clear,
    .query = point_grid_query,
    .pairs = point_grid_pairs,
    .stats = point_grid_stats,
    .visit = point_grid_visit,
    .validate = point_grid_validate,
};
