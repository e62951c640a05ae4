// SPDX-License-Identifier: MIT
// QG_MULTI_GRID: a fine grid plus coarse occupancy levels kept as a
// hierarchical bitset (docs/kinds.md, "multi_grid").
//
// - Learning (tune.c): as QG_GRID: the fine cell is GR_CELL_PER_ELEMENT
//   learned median sides; the world the elements' box.
// - The finest grid stores the elements exactly as QG_GRID does (grid_rows.inc:
//   4-byte cells, row-based free-listed node arrays, NULL empty rows, rows
//   shrunk by qg_cleanup when they hold far more node slots than nodes, a
//   box covering more than GR_BOX_CELLS cells kept once in the wide list).
//   The cell-size decision is QG_GRID's (src/grid.c): any finite positive
//   cell size works, one far too small for the boxes costs time (the wide
//   list), never unbounded memory; cells are at least GR_MIN_CELL, so a
//   subnormal world is one cell. Wide elements have no bits: queries test
//   the wide list first.
// - Above it, coarse levels store no elements, only which of their cells are
//   occupied, as a hierarchical bitset: a level-1 word covers 8x8 fine cells
//   (one bit each), a level-2 word covers 8x8 level-1 words (one bit per
//   non-zero word), and so on up to one word. "Only the finest grid stores the
//   element"; the coarse levels record occupied cells of the finer ones.
//   The fine grid is the torus of grid_rows.inc (boxes outside the bounds
//   wrap), so a query's range splits into up to four pieces inside it. The
//   bits change only when a fine cell turns empty or occupied, and stop
//   propagating at the first word that does not change between zero and
//   non-zero, so they are exact after every insert, move, remove and clear.
// - A query starts at the coarsest level and descends only into occupied
//   cells: one AND of a word with the query's footprint in its 8x8 block
//   discards every empty child at once, and the set bits are walked with
//   count-trailing-zeros. A large query over a sparse world looks at far fewer
//   cells than QG_GRID.
// - Several cores: as QG_GRID (grid_rows.inc: bands of rows for the pair
//   search, rows relinked by band in a batch move). The bitset's words above
//   level 1 span bands, so a batch move brings the bits of the cells its
//   changed moves touched up to date serially after the parallel relink.
// - Ray casts and nearest searches walk the fine cells exactly as QG_GRID's
//   do (grid_rows.inc, gr_raycast / gr_nearest: a row-by-row walk of the
//   unwrapped cells the segment crosses, each hit reported in the cell of
//   its clamped hit point; rings of cells pruned at qg_near_bound; the
//   wide list in full; one pass over the torus past its cell count), and
//   qg_insert_many is QG_GRID's bulk build, its cells' bits set as they
//   fill. A walk over a few dozen neighbouring cells gains nothing from
//   the bitset: an empty fine cell is one 4-byte head.
#include "grid_family/grid_update.inc"
#include "grid_family/grid_search.inc"
#include "grid_family/grid_batch.inc"
#include "grid_family/grid_check.inc"
#include "grid_family/grid_rays.inc"
#include "grid_family/grid_state.inc"
#include "kind.h"

typedef struct multi_grid {
    qg_index base;
    gr_grid g;
    gr_bits bits;
} multi_grid;

static inline int mg_popcount(uint64_t v)
{
#if defined(__GNUC__)
    return __builtin_popcountll(v);
#else
    int n = 0;
    for (; v; v &= v - 1)
        n++;
    return n;
#endif
}

static size_t mg_level_bytes(const gr_level *lv)
{
    return (size_t)lv->cols * (size_t)lv->rows * sizeof(uint64_t);
}

static qg_status multi_grid_configure(qg_config *config)
{
    return gr_configure(config);
}

static void multi_grid_destroy(qg_index *index)
{
    multi_grid *mg = (multi_grid *)index;
    for (int l = 0; l < mg->bits.count; ++l) {
        qg_mem_free(&index->alloc, mg->bits.level[l].words, mg_level_bytes(&mg->bits.level[l]));
        mg->bits.level[l].words = NULL;
    }
    mg->bits.count = 0;
    gr_destroy(&mg->g, &index->alloc);
}

static qg_status multi_grid_init(qg_index *index)
{
    multi_grid *mg = (multi_grid *)index;
    qg_status s = gr_init(&mg->g, &index->alloc, &index->config);
    if (s != QG_OK)
        return s;
    // Levels of 8x8 blocks until one word covers the grid.
    int32_t c = mg->g.cols, r = mg->g.nrows;
    do {
        c = (c + 7) / 8;
        r = (r + 7) / 8;
        gr_level *lv = &mg->bits.level[mg->bits.count];
        lv->cols = c;
        lv->rows = r;
        lv->words = qg_mem_alloc(&index->alloc, mg_level_bytes(lv));
        if (lv->words == NULL) {
            multi_grid_destroy(index);
            return QG_ERR_NOMEM;
        }
        memset(lv->words, 0, mg_level_bytes(lv));
        mg->bits.count++;
    } while ((c > 1 || r > 1) && mg->bits.count < GR_MAX_LEVELS);
    return QG_OK;
}

static qg_status multi_grid_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    multi_grid *mg = (multi_grid *)index;
    return gr_insert(&mg->g, &mg->bits, index, txn, h, box);
}

static void multi_grid_remove(qg_index *index, qg_handle h)
{
    multi_grid *mg = (multi_grid *)index;
    gr_remove(&mg->g, &mg->bits, index, h);
}

static QG_NOINLINE qg_status multi_grid_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    multi_grid *mg = (multi_grid *)index;
    return gr_move(&mg->g, &mg->bits, index, txn, h, box);
}

static void multi_grid_cleanup(qg_index *index)
{
    gr_cleanup(&((multi_grid *)index)->g, &index->alloc);
}

static void multi_grid_clear(qg_index *index)
{
    multi_grid *mg = (multi_grid *)index;
    gr_clear(&mg->g);
    for (int l = 0; l < mg->bits.count; ++l)
        memset(mg->bits.level[l].words, 0, mg_level_bytes(&mg->bits.level[l]));
}

/// What a query carries down the levels.
typedef struct mg_query {
    const multi_grid *mg;
    const qg_rect *boxes;
    qg_rect area;
    gr_ibox qu; ///< the area's unwrapped fine-cell range (for the report rule)
    gr_ibox qb; ///< one wrapped piece of it, inside the grid
    qg_query_fn *fn;
    void *user;
    qg_query_stats *stats;
} mg_query;

/// The bits of an 8x8 block whose cells lie in [x0, x1] x [y0, y1] (block
/// coordinates 0..7).
static inline uint64_t mg_footprint(int32_t x0, int32_t y0, int32_t x1, int32_t y1)
{
    const uint64_t cols = ((1u << (x1 - x0 + 1)) - 1u) << x0;
    const uint64_t rows = (~(uint64_t)0 >> (64 - 8 * (y1 - y0 + 1))) << (8 * y0);
    return (cols * 0x0101010101010101ull) & rows;
}

/// Looks at word (wx, wy) of level l (1 = the level over the fine cells) and
/// descends into its occupied children inside the area. False when the
/// callback asked to stop.
static bool mg_descend(const mg_query *q, int l, int32_t wx, int32_t wy)
{
    const gr_level *lv = &q->mg->bits.level[l - 1];
    q->stats->nodes_visited++;
    const uint64_t word = lv->words[(size_t)wy * (size_t)lv->cols + (size_t)wx];
    if (word == 0)
        return true;
    // The area's range in the children's coordinates, clipped to this block.
    const int shift = 3 * (l - 1);
    const int32_t bx = wx * 8, by = wy * 8;
    int32_t x0 = (q->qb.x0 >> shift) - bx, x1 = (q->qb.x1 >> shift) - bx;
    int32_t y0 = (q->qb.y0 >> shift) - by, y1 = (q->qb.y1 >> shift) - by;
    x0 = x0 < 0 ? 0 : x0;
    y0 = y0 < 0 ? 0 : y0;
    x1 = x1 > 7 ? 7 : x1;
    y1 = y1 > 7 ? 7 : y1;
    for (uint64_t m = word & mg_footprint(x0, y0, x1, y1); m != 0; m &= m - 1) {
        const int b = qg_ctz64(m);
        const int32_t cx = bx + (b & 7), cy = by + (b >> 3);
        if (l == 1) {
            q->stats->nodes_visited++;
            const gr_row *r = &q->mg->g.rows[cy];
            if (!gr_query_cell(&q->mg->g, r, cx, cy, q->qu, q->boxes, q->area, q->fn, q->user, q->stats))
                return false;
        } else if (!mg_descend(q, l - 1, cx, cy)) {
            return false;
        }
    }
    return true;
}

/// The wrapped pieces of the unwrapped range [a0, a1] on an axis of n
/// cells: one, or two where it crosses the grid's edge. Returns the count.
static int mg_pieces(int32_t a0, int32_t a1, int32_t n, int32_t lo[2], int32_t hi[2])
{
    const int32_t w = gr_span(a0, a1, n), s = a0 & (n - 1);
    lo[0] = s;
    if (s + w <= n) {
        hi[0] = s + w - 1;
        return 1;
    }
    hi[0] = n - 1;
    lo[1] = 0;
    hi[1] = s + w - 1 - n;
    return 2;
}

static void multi_grid_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                             qg_query_stats *stats)
{
    const multi_grid *mg = (const multi_grid *)index;
    const gr_ibox qu = gr_map_box(&mg->g, area);
    if ((int64_t)gr_span(qu.x0, qu.x1, mg->g.cols) * gr_span(qu.y0, qu.y1, mg->g.nrows) > index->box_high) {
        gr_query_scan(index, area, fn, user, stats); // cheaper than the cells (grid_search.inc)
        return;
    }
    if (!gr_query_wide(&mg->g, index->boxes, area, fn, user, stats))
        return;
    mg_query q = {mg, index->boxes, area, qu, qu, fn, user, stats};
    int32_t xl[2], xh[2], yl[2], yh[2];
    const int nx = mg_pieces(qu.x0, qu.x1, mg->g.cols, xl, xh), ny = mg_pieces(qu.y0, qu.y1, mg->g.nrows, yl, yh);
    const int top = mg->bits.count;
    const int shift = 3 * top;
    for (int py = 0; py < ny; ++py) {
        for (int px = 0; px < nx; ++px) {
            q.qb = (gr_ibox){xl[px], yl[py], xh[px], yh[py]};
            for (int32_t wy = q.qb.y0 >> shift; wy <= q.qb.y1 >> shift; ++wy) {
                for (int32_t wx = q.qb.x0 >> shift; wx <= q.qb.x1 >> shift; ++wx) {
                    if (!mg_descend(&q, top, wx, wy))
                        return;
                }
            }
        }
    }
}

static void multi_grid_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    gr_pairs(&((const multi_grid *)index)->g, index, fn, user, stats);
}

static void multi_grid_stats(const qg_index *index, qg_stats *stats)
{
    const multi_grid *mg = (const multi_grid *)index;
    int64_t cells = (int64_t)mg->g.cols * mg->g.nrows;
    stats->leaves = (int32_t)cells;
    for (int l = 0; l < mg->bits.count; ++l)
        cells += (int64_t)mg->bits.level[l].cols * mg->bits.level[l].rows;
    stats->nodes = (int32_t)cells;
    stats->max_depth_reached = mg->bits.count;
}

/// Occupied coarse cells first, coarsest at depth 0, with the number of
/// occupied children as `elements`; then the non-empty fine cells at depth
/// `levels` with their element counts.
static void multi_grid_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    const multi_grid *mg = (const multi_grid *)index;
    for (int l = mg->bits.count; l >= 1; --l) {
        const gr_level *lv = &mg->bits.level[l - 1];
        const int32_t span = (int32_t)1 << (3 * l);
        for (int32_t y = 0; y < lv->rows; ++y) {
            for (int32_t x = 0; x < lv->cols; ++x) {
                const uint64_t w = lv->words[(size_t)y * (size_t)lv->cols + (size_t)x];
                if (w != 0)
                    fn(gr_cell_rect(&mg->g, gr_unwrap(x * span, mg->g.home_x, mg->g.mx),
                                    gr_unwrap(y * span, mg->g.home_y, mg->g.my), span),
                       mg->bits.count - l, mg_popcount(w), user);
            }
        }
    }
    gr_visit_cells(&mg->g, mg->bits.count, fn, user);
}

/// True when cell (x, y) of level l (0 = fine cells) is occupied.
static bool mg_occupied(const multi_grid *mg, int l, int32_t x, int32_t y)
{
    if (l == 0) {
        const gr_row *r = &mg->g.rows[y];
        return r->cells != NULL && r->cells[x] >= 0;
    }
    const gr_level *lv = &mg->bits.level[l - 1];
    return lv->words[(size_t)y * (size_t)lv->cols + (size_t)x] != 0;
}

static qg_status multi_grid_validate(const qg_index *index, size_t *bytes)
{
    const multi_grid *mg = (const multi_grid *)index;
    if (!gr_validate(&mg->g, index, bytes) || mg->bits.count < 1 || mg->bits.count > GR_MAX_LEVELS)
        return QG_ERR_INVALID;
    // Every bit of every level says exactly whether its cell below is
    // occupied; bits past the edge of the level below are zero.
    int32_t below_cols = mg->g.cols, below_rows = mg->g.nrows;
    for (int l = 1; l <= mg->bits.count; ++l) {
        const gr_level *lv = &mg->bits.level[l - 1];
        if (lv->words == NULL || lv->cols != (below_cols + 7) / 8 || lv->rows != (below_rows + 7) / 8)
            return QG_ERR_INVALID;
        for (int32_t wy = 0; wy < lv->rows; ++wy) {
            for (int32_t wx = 0; wx < lv->cols; ++wx) {
                const uint64_t w = lv->words[(size_t)wy * (size_t)lv->cols + (size_t)wx];
                for (int b = 0; b < 64; ++b) {
                    const int32_t x = wx * 8 + (b & 7), y = wy * 8 + (b >> 3);
                    const bool want = x < below_cols && y < below_rows && mg_occupied(mg, l - 1, x, y);
                    if (((w >> b) & 1) != (uint64_t)want)
                        return QG_ERR_INVALID;
                }
            }
        }
        *bytes += mg_level_bytes(lv);
        below_cols = lv->cols;
        below_rows = lv->rows;
    }
    if ((below_cols != 1 || below_rows != 1) && mg->bits.count < GR_MAX_LEVELS)
        return QG_ERR_INVALID;
    return QG_OK;
}

static void multi_grid_pairs_part(const qg_index *index, int32_t part, int32_t parts, qg_pair_fn *fn, void *user,
                                  qg_query_stats *stats)
{
    gr_pairs_part(&((const multi_grid *)index)->g, index, part, parts, fn, user, stats);
}

static qg_status multi_grid_move_many(qg_index *index, const qg_jobs *jobs, const qg_handle *handles,
                                      const qg_rect *boxes, int32_t n)
{
    multi_grid *mg = (multi_grid *)index;
    return gr_move_many(&mg->g, &mg->bits, index, jobs, handles, boxes, n);
}

static void multi_grid_raycast(const qg_index *index, float ox, float oy, float dx, float dy, float max_t,
                               qg_ray_fn *fn, void *user)
{
    qg_ray r = qg_ray_start(ox, oy, dx, dy, max_t, fn, user);
    gr_raycast(&((const multi_grid *)index)->g, index, &r);
}

static int32_t multi_grid_nearest(const qg_index *index, float x, float y, int32_t k, float max_distance2,
                                  qg_handle *handles, float *distances2)
{
    (void)distances2; // qg_nearest fills them from the boxes
    return gr_nearest(&((const multi_grid *)index)->g, index, x, y, k, max_distance2, handles);
}

static qg_status multi_grid_insert_many(qg_index *index, qg_txn *txn, const qg_handle *handles, int32_t n)
{
    multi_grid *mg = (multi_grid *)index;
    return gr_insert_many(&mg->g, &mg->bits, index, txn, handles, n);
}

static void *multi_grid_batch_mark(qg_index *index, int32_t n)
{
    (void)n;
    return gr_mark_take(&((multi_grid *)index)->g, &index->alloc);
}

static void multi_grid_batch_trim(qg_index *index, void *mark, bool undone)
{
    gr_trim(&((multi_grid *)index)->g, &index->alloc, mark, undone);
}

/// The bitset after the grid (grid_state.inc): its level count, then each
/// level's size and words. A level's size follows from the grid's
/// (multi_grid_init), so a read checks the sizes against that before it
/// allocates a block of them; a copy frees the levels src has fewer of
/// (the fits pass refused one it has more of: its block does not fit).
static void mg_bits_state(qg_state *s, gr_bits *d, const gr_bits *src, const gr_grid *g)
{
    const int dcount = d->count; // d's levels before a copy changes count
    int32_t n = src->count;
    qg_st_val(s, &n, &n, sizeof n);
    if (qg_st_reading(s) && qg_st_ok(s) && (n < 1 || n > GR_MAX_LEVELS))
        qg_st_fail(s, QG_ERR_INVALID);
    if (!qg_st_ok(s))
        return;
    int32_t c = g->cols, r = g->nrows;
    for (int32_t l = 0; l < n && qg_st_ok(s); ++l) {
        gr_level *dl = &d->level[l];
        const gr_level *sl = &src->level[l];
        const size_t dbytes = mg_level_bytes(dl); // 0 for a level d lacks (zeroed at init)
        QG_ST(s, dl, sl, cols);
        QG_ST(s, dl, sl, rows);
        if (qg_st_reading(s) && qg_st_ok(s)) {
            // multi_grid_init's levels, and only as many as it makes.
            const bool more = c > 1 || r > 1;
            c = (c + 7) / 8;
            r = (r + 7) / 8;
            if ((l > 0 && !more) || dl->cols != c || dl->rows != r) {
                dl->cols = dl->rows = 0;
                qg_st_fail(s, QG_ERR_INVALID);
                return;
            }
        }
        if (!qg_st_block(s, (void **)&dl->words, dbytes, sl->words, mg_level_bytes(sl))) {
            if (qg_st_reading(s))
                dl->cols = dl->rows = 0;
            return;
        }
        if (qg_st_reading(s))
            d->count = l + 1; // destroy frees this level now
    }
    if (!qg_st_ok(s))
        return;
    if (qg_st_reading(s) && (c > 1 || r > 1) && n < GR_MAX_LEVELS) {
        qg_st_fail(s, QG_ERR_INVALID); // stopped before one word covers the grid
        return;
    }
    if (s->mode == QG_ST_COPY) {
        for (int l = n; l < dcount; ++l) {
            qg_mem_free(s->alloc, d->level[l].words, mg_level_bytes(&d->level[l]));
            d->level[l] = (gr_level){0};
        }
        d->count = n;
    }
}

static void multi_grid_state(qg_state *s, qg_index *d, const qg_index *src)
{
    multi_grid *dm = (multi_grid *)d;
    const multi_grid *sm = (const multi_grid *)src;
    gr_state(s, &dm->g, &sm->g, &d->config, d->box_high);
    mg_bits_state(s, &dm->bits, &sm->bits, &dm->g);
}

QG_KIND_CLASS_EX(multi_grid, QG_MULTI_GRID, multi_grid, .state = multi_grid_state, .tune = &qg_grid_tune_rule, .pairs_part = multi_grid_pairs_part,
                 .move_many = multi_grid_move_many, .raycast = multi_grid_raycast, .nearest = multi_grid_nearest,
                 .insert_many = multi_grid_insert_many, .batch_mark = multi_grid_batch_mark,
                 .batch_trim = multi_grid_batch_trim);
