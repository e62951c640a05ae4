// SPDX-License-Identifier: MIT
// QG_POINT_GRID, a level's world: its geometry (cells, scale, reach), the
// re-fit of the world to the level's elements (sample, crowding, the cells
// it wants), and the two passes of qg_cleanup over a level's snapshot: the
// counting-sort re-sort and the in-place refresh. The overview of the kind
// is in point_grid.h.
#include "point_grid.h"

#include <stdlib.h>

/// Fills a size table: min(ceil(d / unit), 15) for each d.
static void pg_size_table(uint8_t *table, int32_t unit)
{
    for (int32_t d = 0; d < 256; ++d) {
        const int32_t w = (d + unit - 1) / unit;
        table[d] = (uint8_t)(w < 15 ? w : 15);
    }
}


/* ---- a level's world ---------------------------------------------------- */

/// Cells along an axis of the given extent: as many as fit at `cell` (cells
/// only get wider than asked), at least 1, at most PG_MAX_SIDE.
static int32_t pg_side(double extent, double cell)
{
    double n = floor(extent / cell);
    if (!(n >= 1.0))
        n = 1.0;
    if (n > PG_MAX_SIDE)
        n = PG_MAX_SIDE;
    return (int32_t)n;
}

/// Quanta per world unit along an axis of `side` cells, kept a finite
/// normal float (a world of extent near 0 or past FLT_MAX still maps).
static float pg_scale(int32_t side, double extent)
{
    double s = (double)side * PG_Q / extent;
    if (s > 0x1p120)
        s = 0x1p120;
    if (s < 0x1p-120)
        s = 0x1p-120;
    return (float)s;
}

/// How many quanta apart the min corners of two overlapping boxes can map:
/// pad * scale in real numbers, plus 1 for the floors and 2 for the rounding
/// of the mapping (each under half a quantum while coordinates stay below
/// 2^22). Capped: any reach past a cell lets every point through anyway.
static int32_t pg_reach(float pad, float scale)
{
    const double r = ceil((double)pad * (double)scale) + 3.0;
    return r < 4 * PG_Q ? (int32_t)r : 4 * PG_Q;
}

/// A world: origin, extent and cells per axis.
typedef struct pg_world {
    double x0, y0, ex, ey;
    int32_t cols, rows;
} pg_world;

/// The cells of a world over [x0, x0 + ex] x [y0, y0 + ey] at the level's
/// cell size, at most `cells` in all and wide enough for the level's reach.
static pg_world pg_world_of(const pg_level *L, double x0, double y0, double ex, double ey, int64_t cells)
{
    pg_world w = {x0, y0, ex, ey, pg_side(ex, L->cell), pg_side(ey, L->cell)};
    if (cells > PG_MAX_CELLS)
        cells = PG_MAX_CELLS;
    while ((int64_t)w.cols * w.rows > cells) {
        // Halve the longer side: cells only get wider, which keeps every
        // requirement on them.
        if (w.cols >= w.rows)
            w.cols = (w.cols + 1) / 2;
        else
            w.rows = (w.rows + 1) / 2;
    }
    // The cell size keeps partners within one cell; this absorbs rounding.
    while (w.cols > 1 && pg_reach(L->pad, pg_scale(w.cols, ex)) > PG_MAX_REACH)
        w.cols--;
    while (w.rows > 1 && pg_reach(L->pad, pg_scale(w.rows, ey)) > PG_MAX_REACH)
        w.rows--;
    return w;
}

/// Makes w the level's world (the snapshot must be rebuilt after).
static void pg_set_world(pg_level *L, pg_world w)
{
    L->cols = w.cols;
    L->rows = w.rows;
    L->ox = (float)w.x0;
    L->oy = (float)w.y0;
    L->sx = pg_scale(L->cols, w.ex);
    L->sy = pg_scale(L->rows, w.ey);
    qg_pg_world_derive(L);
}

void qg_pg_world_derive(pg_level *L)
{
    L->gmax_x = L->cols * PG_Q - 1;
    L->gmax_y = L->rows * PG_Q - 1;
    L->gmaxf_x = (float)L->gmax_x;
    L->gmaxf_y = (float)L->gmax_y;
    // pg_map's form: the halving is exact but for a subnormal origin, whose
    // rounding (2^-150) the queries' hairs (two quanta) cover; the scale is
    // at most 2^120, so its double is exact.
    L->hx = 0.5f * L->ox;
    L->hy = 0.5f * L->oy;
    L->s2x = 2.0f * L->sx;
    L->s2y = 2.0f * L->sy;
    // Half a cell (64 quanta) leaves 32 quanta for the margin and over 30
    // for rounding before a point could pass a neighbour of its home.
    L->near_x = (float)(PG_Q / 2) / L->sx;
    L->near_y = (float)(PG_Q / 2) / L->sy;
    L->reach_x = pg_reach(L->pad, L->sx);
    L->reach_y = pg_reach(L->pad, L->sy);
    // A mapped width is below the reach: fifteen units cover it.
    L->unit_x = L->reach_x > 15 ? (L->reach_x + 14) / 15 : 1;
    L->unit_y = L->reach_y > 15 ? (L->reach_y + 14) / 15 : 1;
    pg_size_table(L->size_x, L->unit_x);
    pg_size_table(L->size_y, L->unit_y);
}

static int pg_cmp_int(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int pg_cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/// Pairs of sampled points that share a cell of world w: an estimate of the
/// pair work the world leaves to its cells (a pile of clamped points, or
/// cells far wider than asked, shows as many).
static int64_t pg_crowding(const float *xs, const float *ys, int32_t n, pg_world w, int32_t *scratch)
{
    const double fx = (double)w.cols / w.ex, fy = (double)w.rows / w.ey;
    for (int32_t i = 0; i < n; ++i) {
        double cx = floor(((double)xs[i] - w.x0) * fx), cy = floor(((double)ys[i] - w.y0) * fy);
        // !(v >= 0) also takes NaN (0 times infinity) to cell 0.
        cx = !(cx >= 0) ? 0 : cx >= w.cols ? w.cols - 1 : cx;
        cy = !(cy >= 0) ? 0 : cy >= w.rows ? w.rows - 1 : cy;
        scratch[i] = (int32_t)cy * w.cols + (int32_t)cx;
    }
    qsort(scratch, (size_t)n, sizeof *scratch, pg_cmp_int);
    int64_t same = 0;
    int32_t run = 1;
    for (int32_t i = 1; i <= n; ++i) {
        if (i < n && scratch[i] == scratch[i - 1]) {
            run++;
            continue;
        }
        same += (int64_t)run * (run - 1) / 2;
        run = 1;
    }
    return same;
}

/// Listed elements in the level's border cells, where points outside the
/// world clamp to.
static int64_t pg_border_count(const pg_level *L)
{
    const int32_t *start = L->start;
    const int32_t cols = L->cols, rows = L->rows;
    int64_t n = (int64_t)start[cols] - start[0] + (start[rows * cols] - start[(rows - 1) * cols]);
    for (int32_t r = 1; r + 1 < rows; ++r)
        n += (start[r * cols + 1] - start[r * cols]) + (start[(r + 1) * cols] - start[(r + 1) * cols - 1]);
    return n;
}

/// True when the border cells are crowded far past the inside ones: points
/// outside the world piling up there. Cheap (the cells' starts only), so
/// every qg_cleanup asks; pg_refit keeps it from asking again about a pile
/// it chose to keep.
bool qg_pg_border_crowded(const pg_level *L)
{
    if (L->cols < 3 || L->rows < 3 || L->count < 64)
        return false;
    const int64_t border_cells = 2 * ((int64_t)L->cols + L->rows) - 4;
    const int64_t inner_cells = (int64_t)L->cols * L->rows - border_cells;
    const int64_t border = pg_border_count(L), inner = L->listed - border;
    return border > L->calm && border * inner_cells > 4 * (inner + inner_cells) * border_cells;
}

/// Min corners of up to PG_SAMPLE of level k's elements, evenly spread over
/// its handles (the same sample for the same index).
static int32_t pg_sample(const point_grid *g, int32_t k, float *xs, float *ys)
{
    const pg_level *L = &g->level[k];
    const uint32_t key = (uint32_t)k << 4;
    const int32_t stride = L->count > PG_SAMPLE ? L->count / PG_SAMPLE : 1;
    int32_t n = 0, seen = 0;
    for (int32_t h = 0; h < g->base.box_high && n < PG_SAMPLE; ++h) {
        if ((g->hb[h] & PG_HB_LEVEL) != key || seen++ % stride != 0)
            continue;
        xs[n] = g->base.boxes[h].min_x;
        ys[n] = g->base.boxes[h].min_y;
        n++;
    }
    return n;
}

/// The range [lo, hi] of the sorted values v[0..n) without the outer
/// 256ths, widened by an eighth on each side and kept within the values,
/// at least `least` wide.
static void pg_fit_range(float *v, int32_t n, double least, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof *v, pg_cmp_float);
    const int32_t cut = n / 256;
    const double a = v[cut], b = v[n - 1 - cut], w = b - a;
    *lo = a - w / 8 > (double)v[0] ? a - w / 8 : (double)v[0];
    *hi = b + w / 8 < (double)v[n - 1] ? b + w / 8 : (double)v[n - 1];
    // At least a cell, and at least what double resolves this far out (a
    // world of cells 1e-32 wide around points at 1e38 would be empty).
    const double far = fabs(*lo) > fabs(*hi) ? fabs(*lo) : fabs(*hi);
    least = least > far * 0x1p-40 ? least : far * 0x1p-40;
    if (*hi - *lo < least) {
        const double mid = (*lo + *hi) / 2;
        *lo = mid - least / 2;
        *hi = mid + least / 2;
    }
    // A point exactly at hi maps past the last cell; a hair more keeps it in.
    *hi += (*hi - *lo) * 0x1p-20;
}

/// A level still on its configured world runs on fewer cells than the
/// bounds ask for while its population is small; as it grows (the budget:
/// two cells per element and 4,096), it takes more of them, up to the
/// configured ones: at once when the level holds the cells, otherwise after
/// the next insert or move reserved them. True when the world changed.
static bool pg_grow_config(point_grid *g, int32_t k, int64_t room)
{
    pg_level *L = &g->level[k];
    const int64_t budget = 2 * (int64_t)L->count + 4096;
    const int64_t grow = budget < L->config_cells ? budget : L->config_cells;
    if (grow <= (int64_t)L->cols * L->rows)
        return false;
    const qg_rect b = g->base.config.bounds;
    const pg_world w =
        pg_world_of(L, b.min_x, b.min_y, qg_extent(b.min_x, b.max_x), qg_extent(b.min_y, b.max_y), grow);
    if ((int64_t)w.cols * w.rows <= (int64_t)L->cols * L->rows)
        return false;
    if ((int64_t)w.cols * w.rows <= room && w.rows <= L->tail_head_capacity) {
        pg_set_world(L, w);
        return true;
    }
    L->want_cells = w.cols * w.rows;
    L->want_rows = w.rows;
    g->want = true;
    return false;
}

/// Considers moving level k's world to its elements, given the extent of
/// their points. Called by qg_pg_rebuild, which re-sorts after a move. True
/// when the world moved. Never allocates: a fit wider than the level's
/// cells records the want for the next insert or move.
static bool pg_refit(point_grid *g, int32_t k, float x0, float y0, float x1, float y1)
{
    if (g->hold)
        return false; // asked again after the batch (point_grid_batch_mark)
    pg_level *L = &g->level[k];
    const bool asked = L->refit;
    L->refit = false;
    if (L->count < 2 || !(x0 <= x1) || !isfinite(L->cell))
        return false;
    const int64_t room = L->start_capacity - 1;
    if (L->on_config && pg_grow_config(g, k, room))
        return true;
    const double gx0 = L->ox, gy0 = L->oy;
    const double gx1 = gx0 + (double)(L->gmax_x + 1) / L->sx, gy1 = gy0 + (double)(L->gmax_y + 1) / L->sy;
    const int64_t cells = (int64_t)L->cols * L->rows;
    // The cells the points span; a world that the points spill out of, or
    // fill only a corner of, is worth a look.
    const double span = ((double)x1 - x0) * L->sx / PG_Q * (((double)y1 - y0) * L->sy / PG_Q);
    const bool spill = x0 < gx0 || y0 < gy0 || x1 >= gx1 || y1 >= gy1;
    if (!spill && !asked && !(span * 4 < (double)cells && cells > 16))
        return false;
    // A level that keeps a few elements outside its world (or in a corner
    // of it) by choice is looked at again when it was asked to, or once its
    // population doubled or halved: a bulk insert re-sorts every eighth of
    // its growth and need not sample each time.
    if (!asked && L->fit_count > 0 && L->count < 2 * L->fit_count && 2 * L->count > L->fit_count)
        return false;
    L->fit_count = L->count;
    float xs[PG_SAMPLE], ys[PG_SAMPLE];
    union {
        float f[PG_SAMPLE];
        int32_t i[PG_SAMPLE];
    } buf;
    const int32_t n = pg_sample(g, k, xs, ys);
    double tx0, tx1, ty0, ty1;
    memcpy(buf.f, xs, (size_t)n * sizeof(float));
    pg_fit_range(buf.f, n, L->cell, &tx0, &tx1);
    memcpy(buf.f, ys, (size_t)n * sizeof(float));
    pg_fit_range(buf.f, n, L->cell, &ty0, &ty1);
    const pg_world cur = {gx0, gy0, gx1 - gx0, gy1 - gy0, L->cols, L->rows};
    pg_world now = pg_world_of(L, tx0, ty0, tx1 - tx0, ty1 - ty0, room);
    if (now.rows > L->tail_head_capacity)
        now.rows = L->tail_head_capacity;
    // A fitted world holds at most two cells per element (and 4,096).
    const int64_t budget = (int64_t)L->count * 2 + 4096;
    const pg_world full = pg_world_of(L, tx0, ty0, tx1 - tx0, ty1 - ty0, budget);
    const int64_t c_cur = pg_crowding(xs, ys, n, cur, buf.i);
    const int64_t c_now = pg_crowding(xs, ys, n, now, buf.i);
    bool moved = false;
    int64_t base = c_cur;
    if (2 * c_now < c_cur || (cells > 8 * (int64_t)now.cols * now.rows && c_now <= c_cur)) {
        pg_set_world(L, now);
        moved = true;
        base = c_now;
        L->calm = 0;
        L->on_config = false;
    } else {
        // Keeping this world: its border pile (counted before the re-sort,
        // a fair estimate) is not worth asking about again until it doubles.
        L->calm = 2 * pg_border_count(L);
    }
    const int64_t full_cells = (int64_t)full.cols * full.rows;
    if (full_cells > room && 2 * pg_crowding(xs, ys, n, full, buf.i) < base) {
        L->want_cells = (int32_t)full_cells;
        L->want_rows = full.rows;
        g->want = true;
    }
    return moved;
}

/// Reserves the cells level k's world may take once it holds `more`
/// elements beyond its count (the budget pg_grow_config and pg_refit allow,
/// two cells per element and 4,096), so the re-sort of a bulk insert fits
/// its world at once instead of asking for cells after it. Grow first:
/// capacities only.
bool qg_pg_reserve_cells(point_grid *g, qg_txn *txn, int32_t k, int64_t more)
{
    pg_level *L = &g->level[k];
    int64_t cells = 2 * ((int64_t)L->count + more) + 4096;
    if (cells > PG_MAX_CELLS)
        cells = PG_MAX_CELLS;
    if (cells > (int64_t)L->config_cells && L->on_config)
        cells = L->config_cells > L->cols * L->rows ? L->config_cells : L->cols * L->rows;
    const int64_t rows = cells < PG_MAX_SIDE ? cells : PG_MAX_SIDE;
    return qg_txn_reserve(txn, (void **)&L->start, &L->start_capacity, sizeof(int32_t), cells + 1) &&
           qg_txn_reserve(txn, (void **)&L->tail_head, &L->tail_head_capacity, sizeof(uint16_t), rows);
}

/// Reserves the cells re-fits asked for (see pg_refit); the next qg_cleanup
/// re-sorts into them. False when an allocation fails (nothing to undo
/// beyond the txn).
bool qg_pg_grow(point_grid *g, qg_txn *txn)
{
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        pg_level *L = &g->level[k];
        if (L->want_cells == 0 || L->want_cells <= L->start_capacity - 1)
            continue;
        const int32_t rows = L->want_rows;
        if (!qg_txn_reserve(txn, (void **)&L->start, &L->start_capacity, sizeof(int32_t), (int64_t)L->want_cells + 1) ||
            !qg_txn_reserve(txn, (void **)&L->tail_head, &L->tail_head_capacity, sizeof(uint16_t), rows))
            return false;
    }
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        if (g->level[k].want_cells > 0) {
            g->level[k].want_cells = 0;
            g->level[k].refit = true;
        }
    }
    g->want = false;
    return true;
}

/// True when one of hb[h .. h + 8) names level `key` (k << 4): a re-sort of
/// a small level (the mixed workload's 1% of large agents) passes over the
/// other levels' handles eight at a time instead of one (the level's
/// handles are found by their hb byte; a byte-wise scan of a million
/// handles cost 1-2 ms a re-sort).
static inline bool pg_hb8_has(const uint8_t *hb, int32_t h, uint32_t key)
{
    uint64_t w;
    memcpy(&w, hb + h, sizeof w);
    const uint64_t ones = 0x0101010101010101ull;
    const uint64_t v = (w & 0x7070707070707070ull) ^ (uint64_t)key * ones; // a zero byte: level key
    return ((v - ones) & ~v & 0x8080808080808080ull) != 0;
}

/// Lists every element of level k in the cell of its point: a counting sort
/// by cell, straight from the base's boxes (the level's handles found by
/// their hb byte). Handles ascend within a cell. Needs room for the level's
/// count slots; never allocates. Re-fits the world first when pg_refit says
/// so.
#if defined(__GNUC__)
#define PG_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define PG_ALWAYS_INLINE inline
#endif

/// The counting pass of a re-sort: level k's elements (hb byte `key`) per
/// cell, and the extent of their points. `sparse` (a constant at each call,
/// so each loop is compiled without the other's test) passes over eight
/// handles of other levels at a time.
static PG_ALWAYS_INLINE void pg_count_pass(const pg_level *L, const qg_rect *boxes, const uint8_t *hb, int32_t high,
                                           uint32_t key, bool sparse, int32_t *start, float ext[4])
{
    float x0 = INFINITY, y0 = INFINITY, x1 = -INFINITY, y1 = -INFINITY;
    for (int32_t h = 0; h < high; ++h) {
        if (sparse && (h & 7) == 0 && h + 8 <= high && !pg_hb8_has(hb, h, key)) {
            h += 7;
            continue;
        }
        if ((hb[h] & PG_HB_LEVEL) != key)
            continue;
        const qg_rect b = boxes[h];
        x0 = b.min_x < x0 ? b.min_x : x0;
        y0 = b.min_y < y0 ? b.min_y : y0;
        x1 = b.min_x > x1 ? b.min_x : x1;
        y1 = b.min_y > y1 ? b.min_y : y1;
        start[pg_cell_of(L, pg_box_point(L, b))]++;
    }
    ext[0] = x0, ext[1] = y0, ext[2] = x1, ext[3] = y1;
}

/// The scatter pass of a re-sort: each element of the level to its slot,
/// handles descending so that they ascend within a cell.
static PG_ALWAYS_INLINE void pg_scatter_pass(pg_level *L, const qg_rect *boxes, uint8_t *hb, int32_t high, uint32_t key,
                                             bool sparse)
{
    int32_t *start = L->start;
    for (int32_t h = high - 1; h >= 0; --h) {
        if (sparse && (h & 7) == 7 && !pg_hb8_has(hb, h - 7, key)) {
            h -= 7;
            continue;
        }
        if ((hb[h] & PG_HB_LEVEL) != key)
            continue;
        pg_point p, m;
        pg_corners(L, boxes[h], &p, &m);
        const int32_t cx = p.x >> PG_QBITS, cy = p.y >> PG_QBITS;
        pg_write_slot(L, --start[cy * L->cols + cx], (uint32_t)h, p, m, cx, cy);
        hb[h] = (uint8_t)(key | (uint32_t)(cx & 3) | (uint32_t)(cy & 3) << 2);
    }
}

void qg_pg_rebuild(point_grid *g, int32_t k)
{
    pg_level *L = &g->level[k];
    const qg_rect *boxes = g->base.boxes;
    uint8_t *hb = g->hb;
    const int32_t high = g->base.box_high;
    const uint32_t key = (uint32_t)k << 4;
    int32_t *start = L->start;
    // A level of under a sixteenth of the handles skips the others' bytes
    // eight at a time; a dense one (agents: every handle) pays no test.
    const bool sparse = (int64_t)L->count * 16 < high;
    for (int pass = 0;; ++pass) {
        memset(start, 0, ((size_t)L->cols * L->rows + 1) * sizeof(int32_t));
        float ext[4];
        if (sparse)
            pg_count_pass(L, boxes, hb, high, key, true, start, ext);
        else
            pg_count_pass(L, boxes, hb, high, key, false, start, ext);
        if (pass > 0 || !pg_refit(g, k, ext[0], ext[1], ext[2], ext[3]))
            break;
    }
    // Ends of the cells; the scatter below counts each back to its start.
    const int32_t cells = L->cols * L->rows;
    int32_t sum = 0;
    for (int32_t c = 0; c < cells; ++c) {
        sum += start[c];
        start[c] = sum;
    }
    start[cells] = sum;
    if (sparse)
        pg_scatter_pass(L, boxes, hb, high, key, true);
    else
        pg_scatter_pass(L, boxes, hb, high, key, false);
    for (int32_t r = 0; r < L->rows; ++r)
        L->tail_head[r] = PG_TAIL_END;
    L->listed = sum;
    L->tail = 0;
    L->tombstones = 0;
    L->fresh = true;
    L->snug = true; // each point went to the cell that holds it
}

/// Distance, in slots, at which qg_pg_refresh fetches a box ahead of its use:
/// far enough for the random reads of the base's box array to overlap.
#define PG_AHEAD 64

/// Makes the snapshot fresh again without moving anything: every listed
/// element is still within the margins of its home (a move past them went
/// to the tail), so its slot stays and only its offsets and size byte are
/// rewritten from its box. One walk of the snapshot in slot order: the
/// writes are sequential, and the box reads, random by handle, are
/// prefetched PG_AHEAD slots early so they overlap. About a third of the
/// counting sort's cost, whose scatter writes every slot at random.
void qg_pg_refresh(pg_level *L, const qg_rect *boxes)
{
    qg_pg_refresh_rows(L, boxes, 0, L->rows);
    L->fresh = true;
    L->snug = false; // points moved within their margins
}

/// The refresh of the slots of rows [r0, r1): a band of its own, read and
/// written only here (the fetch ahead stops at the band's end, which
/// another thread may be rewriting).
void qg_pg_refresh_rows(pg_level *L, const qg_rect *boxes, int32_t r0, int32_t r1)
{
    const uint32_t *order = L->order;
    const int32_t *start = L->start;
    int32_t s = start[(int64_t)r0 * L->cols];
    const int32_t last = start[(int64_t)r1 * L->cols] - 1;
    for (int32_t cy = r0; cy < r1; ++cy) {
        for (int32_t cx = 0; cx < L->cols; ++cx) {
            const int32_t end = start[cy * L->cols + cx + 1];
            for (; s < end; ++s) {
                const int32_t ahead = s + PG_AHEAD < last ? s + PG_AHEAD : last;
                const uint32_t va = order[ahead] & PG_MAX_HANDLES;
                if (va != PG_MAX_HANDLES)
                    PG_PREFETCH(&boxes[va]);
                const uint32_t v = order[s] & PG_MAX_HANDLES;
                if (v == PG_MAX_HANDLES)
                    continue;
                pg_point p, m;
                pg_corners(L, boxes[v], &p, &m);
                pg_write_slot(L, s, v, p, m, cx, cy);
            }
        }
    }
}


/// Level k's bound, cell size and world over the configured bounds (no
/// memory yet: a level gets its arrays with its first element).
void qg_pg_level_init(pg_level *L, const qg_config *c, int32_t k)
{
    float scale = 1.0f;
    for (int32_t i = 0; i < k; ++i)
        scale *= 4.0f;
    L->bound = k == PG_LEVELS - 1 ? INFINITY : c->max_element_size * scale;
    L->cell = k == PG_LEVELS - 1 ? INFINITY : c->cell_size * scale;
    L->pad = nextafterf(L->bound + L->bound * 0x1p-20f, INFINITY);
    const qg_rect b = c->bounds;
    const double ex = qg_extent(b.min_x, b.max_x), ey = qg_extent(b.min_y, b.max_y);
    const pg_world full = pg_world_of(L, b.min_x, b.min_y, ex, ey, PG_MAX_CELLS);
    L->config_cells = full.cols * full.rows;
    // A level starts with at most PG_START_CELLS of them: bounds far larger
    // than the elements' spread then cost no memory up front (a level with
    // bounds [-3e38, 3e38] would take 16 MiB of starts), and pg_grow_config
    // gives a growing population the rest.
    pg_set_world(L, pg_world_of(L, b.min_x, b.min_y, ex, ey, PG_START_CELLS));
    L->on_config = true;
    L->fresh = true;
}

