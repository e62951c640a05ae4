// SPDX-License-Identifier: MIT
// QG_POINT_GRID, the pair search: within a level, each listed element
// against the later slots of its cell, the next cell and the three cells
// below (one element at a time here; sixteen at a time in point_grid_pairs_avx2.c),
// then the tail; across levels, each element of a coarser level searching
// the finer ones with its box, the finest level's searches scheduled into
// its walk. The overview of the kind is in point_grid.h.
#include "point_grid.h"

// The vector kernels: AVX2 when qg_create chose it (g->wide), otherwise the
// portable form (point_grid_pairs_vec.c) where the platform has one.
// PG_VEC_ON: a kernel runs (on a fresh snapshot).
#if defined(PG_HAVE_AVX2) && defined(QV_HAVE)
#define PG_VEC_ON(wide) true
#define PG_PAIRS_CELL(wide, ...) ((wide) ? qg_pg_pairs_cell_wide(__VA_ARGS__) : qg_pg_pairs_cell_vec(__VA_ARGS__))
#define PG_CROSS_ROW(wide, ...) ((wide) ? qg_pg_cross_row_wide(__VA_ARGS__) : qg_pg_cross_row_vec(__VA_ARGS__))
#elif defined(PG_HAVE_AVX2)
#define PG_VEC_ON(wide) (wide)
#define PG_PAIRS_CELL(wide, ...) qg_pg_pairs_cell_wide(__VA_ARGS__)
#define PG_CROSS_ROW(wide, ...) qg_pg_cross_row_wide(__VA_ARGS__)
#elif defined(QV_HAVE)
#define PG_VEC_ON(wide) true
#define PG_PAIRS_CELL(wide, ...) qg_pg_pairs_cell_vec(__VA_ARGS__)
#define PG_CROSS_ROW(wide, ...) qg_pg_cross_row_vec(__VA_ARGS__)
#endif

/// Candidates of a (point pa) among the slots [s_lo, s_hi) of cell (nx, ny):
/// those whose points are within reach.
static bool pg_scan(const pg_level *L, pg_batch *bt, qg_handle a, pg_point pa, int32_t s_lo, int32_t s_hi, int32_t nx,
                    int32_t ny, qg_pair_fn *fn, void *user)
{
    for (int32_t s = s_lo; s < s_hi; ++s) {
        const qg_handle b = pg_order(L, s);
        if (b < 0)
            continue;
        const pg_point pb = pg_slot_point(L, bt->boxes, s, b, nx, ny);
        const int32_t dx = pb.x - pa.x, dy = pb.y - pa.y;
        if ((dx >= -L->reach_x) & (dx <= L->reach_x) & (dy >= -L->reach_y) & (dy <= L->reach_y) &&
            !pg_candidate(bt, a, b, fn, user))
            return false;
    }
    return true;
}

/// Pairs of the listed elements of cell (cx, cy) with the elements listed
/// after them in the cell, in the next cell of the row and in the three
/// cells below. Partners are never two cells apart, so each pair is found
/// once: within a row from its element in the earlier slot, across rows
/// from its element in the upper row.
static bool pg_pairs_cell(const pg_level *L, pg_batch *bt, int32_t cx, int32_t cy, qg_pair_fn *fn, void *user)
{
    const int32_t c = cy * L->cols + cx;
    const int32_t *start = L->start;
    const bool east = cx + 1 < L->cols;
    const int32_t bx0 = cx > 0 ? cx - 1 : 0, bx1 = east ? cx + 1 : cx;
    for (int32_t sa = start[c]; sa < start[c + 1]; ++sa) {
        const qg_handle a = pg_order(L, sa);
        if (a < 0)
            continue;
        const pg_point pa = pg_slot_point(L, bt->boxes, sa, a, cx, cy);
        if (!pg_scan(L, bt, a, pa, sa + 1, start[c + 1], cx, cy, fn, user))
            return false;
        if (east && !pg_scan(L, bt, a, pa, start[c + 1], start[c + 2], cx + 1, cy, fn, user))
            return false;
        if (cy == 0)
            continue;
        for (int32_t bx = bx0; bx <= bx1; ++bx) {
            const int32_t b = c - L->cols + (bx - cx);
            if (!pg_scan(L, bt, a, pa, start[b], start[b + 1], bx, cy - 1, fn, user))
                return false;
        }
    }
    return true;
}


/// Pairs of tail element a (tail index t, point p) with the snapshot and
/// with the tail elements after it.
static bool pg_pairs_tail(const pg_level *L, pg_batch *bt, int32_t t, qg_handle a, pg_point p, qg_pair_fn *fn,
                          void *user)
{
    const pg_point lo = {p.x - L->reach_x, p.y - L->reach_y};
    const pg_point hi = {p.x + L->reach_x, p.y + L->reach_y};
    int32_t cx0, cy0, cx1, cy1;
    pg_cell_range(L, lo, hi, &cx0, &cy0, &cx1, &cy1);
    for (int32_t cy = cy0; cy <= cy1; ++cy) {
        for (int32_t cx = cx0; cx <= cx1; ++cx) {
            const int32_t c = cy * L->cols + cx;
            if (!pg_scan(L, bt, a, p, L->start[c], L->start[c + 1], cx, cy, fn, user))
                return false;
        }
    }
    const int32_t r0 = lo.y > 0 ? lo.y >> PG_QBITS : 0;
    const int32_t r1 = (hi.y >> PG_QBITS) < L->rows ? hi.y >> PG_QBITS : L->rows - 1;
    const int32_t tx0 = lo.x > 0 ? lo.x >> PG_QBITS : 0, tx1 = hi.x >> PG_QBITS;
    for (int32_t row = r0; row <= r1; ++row) {
        for (uint32_t u = L->tail_head[row]; u != PG_TAIL_END;) {
            const int32_t s = L->listed + (int32_t)u;
            if ((int32_t)u > t && pg_tail_in_cols(L, s, tx0, tx1) && !pg_candidate(bt, a, pg_order(L, s), fn, user))
                return false;
            u = L->sq[s];
        }
    }
    return true;
}


/// Pairs of element b (box `area`, of a coarser level) with the elements of
/// level L: the query of its box. On a fresh snapshot each listed point
/// comes with its size byte, which bounds its max corner from both sides:
/// with b's corners mapped exactly, most elements are proven apart or
/// overlapping without reading their boxes (the reasoning of
/// pg_wide_hits); the rest are candidates.
static bool pg_cross(const pg_level *L, bool wide, pg_batch *bt, qg_handle b, qg_rect area, qg_pair_fn *fn,
                     void *user)
{
    const pg_point lo = pg_point_of(L, pg_widen(L, area.min_x), pg_widen(L, area.min_y));
    pg_point bl, bh;
    pg_corners(L, area, &bl, &bh);
    const int32_t ux = L->unit_x, uy = L->unit_y;
    int32_t cx0, cy0, cx1, cy1;
    pg_cell_range(L, lo, bh, &cx0, &cy0, &cx1, &cy1);
    for (int32_t cy = cy0; cy <= cy1; ++cy) {
#if defined(PG_HAVE_AVX2) || defined(QV_HAVE)
        if (L->fresh && PG_VEC_ON(wide)) {
            // Runs of at most 64 cells keep every lane within 16 bits.
            for (int32_t sx = cx0; sx <= cx1; sx += 64) {
                const int32_t ex = sx + 63 < cx1 ? sx + 63 : cx1;
                if (!PG_CROSS_ROW(wide, L, bt, b, sx, ex, cy, bl, bh, fn, user))
                    return false;
            }
            continue;
        }
#endif
        (void)wide;
        for (int32_t cx = cx0; cx <= cx1; ++cx) {
            const int32_t c = cy * L->cols + cx;
            for (int32_t s = L->start[c]; s < L->start[c + 1]; ++s) {
                const qg_handle a = pg_order(L, s);
                if (a < 0)
                    continue;
                if (!L->fresh) {
                    const pg_point p = pg_box_point(L, bt->boxes[a]);
                    if ((p.x >= lo.x) & (p.x <= bh.x) & (p.y >= lo.y) & (p.y <= bh.y) &&
                        !pg_candidate(bt, a, b, fn, user))
                        return false;
                    continue;
                }
                const pg_point p = pg_listed_point(L->sq[s], cx, cy);
                const uint32_t z = L->order[s] >> 24;
                const int32_t ahx = p.x + (int32_t)(z & 15) * ux, ahy = p.y + (int32_t)(z >> 4) * uy;
                if ((p.x > bh.x) | (p.y > bh.y) | (ahx < bl.x) | (ahy < bl.y))
                    continue;
                if (!pg_hit(bt, a, b, (p.x < bh.x) & (p.y < bh.y) & (bl.x + ux <= ahx) & (bl.y + uy <= ahy), fn, user))
                    return false;
            }
        }
    }
    if (L->tail == 0)
        return true;
    const int32_t tx0 = lo.x >> PG_QBITS, tx1 = bh.x >> PG_QBITS;
    for (int32_t row = lo.y >> PG_QBITS; row <= bh.y >> PG_QBITS; ++row) {
        for (uint32_t t = L->tail_head[row]; t != PG_TAIL_END;) {
            const int32_t s = L->listed + (int32_t)t;
            t = L->sq[s];
            if (pg_tail_in_cols(L, s, tx0, tx1) && !pg_candidate(bt, pg_order(L, s), b, fn, user))
                return false;
        }
    }
    return true;
}

/// Starts fetching what pg_cross will read for a search of `area` in level
/// L: stage 0 the cell starts of its rows, stage 1 (once those arrived) the
/// first slots of each row's run. The runs of different rows lie far apart
/// in the snapshot, so without this each row of each search waits for
/// memory in turn.
static void pg_cross_prefetch(const pg_level *L, qg_rect area, int stage)
{
    const pg_point lo = pg_point_of(L, pg_widen(L, area.min_x), pg_widen(L, area.min_y));
    const pg_point hi = pg_point_of(L, area.max_x, area.max_y);
    int32_t cx0, cy0, cx1, cy1;
    pg_cell_range(L, lo, hi, &cx0, &cy0, &cx1, &cy1);
    for (int32_t cy = cy0; cy <= cy1; ++cy) {
        const int32_t c = cy * L->cols + cx0;
        if (stage == 0) {
            PG_PREFETCH(&L->start[c]);
            continue;
        }
        const int32_t t = L->start[c];
        PG_PREFETCH(&L->sq[t]);
        PG_PREFETCH(&L->order[t]);
        PG_PREFETCH(&L->order[t] + 16);
    }
}

/// Searches of level k's slots [s0, s1) in the levels from..to-1 that hold
/// elements, each with its element's box. The searches of the next
/// elements are fetched ahead (boxes eight ahead, cell starts two, slots
/// one).
static bool pg_search_slots(const point_grid *g, int32_t k, int32_t s0, int32_t s1, int32_t from, int32_t to,
                            pg_batch *bt, qg_pair_fn *fn, void *user)
{
    const pg_level *L = &g->level[k];
    for (int32_t s = s0; s < s1; ++s) {
        if (s + 8 < s1 && pg_order(L, s + 8) >= 0)
            PG_PREFETCH(&bt->boxes[pg_order(L, s + 8)]);
        for (int32_t ahead = 2; ahead >= 1; --ahead) {
            const qg_handle n = s + ahead < s1 ? pg_order(L, s + ahead) : -1;
            for (int32_t j = from; n >= 0 && j < to; ++j) {
                if (g->level[j].count > 0)
                    pg_cross_prefetch(&g->level[j], bt->boxes[n], ahead == 2 ? 0 : 1);
            }
        }
        const qg_handle b = pg_order(L, s);
        if (b < 0)
            continue;
        const qg_rect area = bt->boxes[b];
        for (int32_t j = from; j < to; ++j) {
            if (g->level[j].count > 0 && !pg_cross(&g->level[j], g->wide, bt, b, area, fn, user))
                return false;
        }
    }
    return true;
}

/// The searches of the coarser levels in the lowest populated one (`base`),
/// run during its cell walk: a coarser level's row of searches runs once the
/// walk has passed the last row of `base` they read, while those rows are
/// still in cache (run all at the end, the searches waited on memory for
/// each row they read: a third of qg_pairs at the mixed workload). The
/// order only decides what is in cache; every search reads a finished
/// snapshot.
///
/// A part of qg_pairs_parallel walks a band of base's rows and runs the
/// coarser rows whose limit (pg_sched_limit) falls in its band: the limit
/// grows with the row, so the parts' shares are consecutive runs of rows,
/// disjoint, and together every row (the last part takes those past the
/// last base row). Each coarser level's tail is split by slot ranges.
typedef struct pg_sched {
    int32_t base;
    int32_t part, parts;
    int32_t row[PG_LEVELS]; ///< next row of each coarser level to search from
} pg_sched;

/// The last row of level B that a search from row R of level K can read
/// (the point of an element listed in R lies within R's margins; its box
/// ends at most a bound above it). Only cache locality and the parts'
/// shares depend on it; it never decreases as R grows.
static int32_t pg_sched_limit(const pg_level *B, const pg_level *K, int32_t R)
{
    const double y = (double)K->oy + ((double)(R + 1) * PG_Q + PG_M + 1) / K->sy + (double)K->pad;
    if (!(y < (double)FLT_MAX))
        return INT32_MAX;
    const float yf = y > -(double)FLT_MAX ? (float)y : -FLT_MAX;
    return ((pg_map(yf, B->hy, B->s2y, B->gmaxf_y) + PG_M) >> PG_QBITS) + 1;
}

/// The first row of level K whose limit in B is at least r: where the part
/// whose band starts at base row r starts K's rows (the earlier rows were
/// run by the parts before, after their own last row).
static int32_t pg_sched_first(const pg_level *B, const pg_level *K, int32_t r)
{
    int32_t lo = 0, hi = K->rows;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (pg_sched_limit(B, K, mid) < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/// Runs the searches whose rows of `base` are all walked once row r is
/// (r = INT32_MAX: the end of this part's walk; the last part runs every
/// row left, and each part its share of the tails).
static bool pg_sched_run(const point_grid *g, pg_sched *sc, int32_t r, pg_batch *bt, qg_pair_fn *fn, void *user)
{
    const pg_level *B = &g->level[sc->base];
    const bool last = sc->part == sc->parts - 1;
    for (int32_t k = sc->base + 1; k < PG_LEVELS; ++k) {
        const pg_level *K = &g->level[k];
        if (K->count == 0)
            continue;
        while (sc->row[k] < K->rows &&
               (r == INT32_MAX ? last : pg_sched_limit(B, K, sc->row[k]) <= r)) {
            const int32_t R = sc->row[k]++;
            if (!pg_search_slots(g, k, K->start[R * K->cols], K->start[(R + 1) * K->cols], sc->base, sc->base + 1, bt,
                                 fn, user))
                return false;
        }
        if (r == INT32_MAX) {
            int64_t t0, t1;
            qg_part_range(K->tail, sc->part, sc->parts, &t0, &t1);
            if (!pg_search_slots(g, k, K->listed + (int32_t)t0, K->listed + (int32_t)t1, sc->base, sc->base + 1, bt,
                                 fn, user))
                return false;
        }
    }
    return true;
}

/// The pairs within one level that part `part` of `parts` finds: those of
/// its band of rows [r0, r1) and its share of the tail; with a scheduler,
/// the coarser levels' searches in this one too, row by row.
static bool pg_pairs_level(const point_grid *g, const pg_level *L, pg_sched *sc, int32_t part, int32_t parts,
                           int32_t r0, int32_t r1, pg_batch *bt, qg_pair_fn *fn, void *user)
{
    for (int32_t cy = r0; cy < r1; ++cy) {
        for (int32_t cx = 0; cx < L->cols; ++cx) {
#if defined(PG_HAVE_AVX2) || defined(QV_HAVE)
            bool stop = false;
            if (L->fresh && PG_VEC_ON(g->wide) && PG_PAIRS_CELL(g->wide, L, bt, cx, cy, fn, user, &stop)) {
                if (stop)
                    return false;
                continue;
            }
#endif
            if (!pg_pairs_cell(L, bt, cx, cy, fn, user))
                return false;
        }
        if (sc != NULL && !pg_sched_run(g, sc, cy, bt, fn, user))
            return false;
    }
    int64_t t0, t1;
    qg_part_range(L->tail, part, parts, &t0, &t1);
    for (int32_t t = (int32_t)t0; t < (int32_t)t1; ++t) {
        const qg_handle a = pg_order(L, L->listed + t);
        if (a >= 0 && !pg_pairs_tail(L, bt, t, a, pg_box_point(L, bt->boxes[a]), fn, user))
            return false;
    }
    return sc == NULL || pg_sched_run(g, sc, INT32_MAX, bt, fn, user);
}

/// Part `part` of `parts` of the pair search (qg_pairs is part 0 of 1).
/// Every level's cell walk is split into bands of rows balanced by
/// elements, its tail and its searches of the finer levels by slot ranges,
/// and the coarser levels' searches in the lowest level follow its bands
/// (pg_sched). Every pair is found from one slot, row or tail index, which
/// exactly one part owns: each pair once, in one part, the same part for
/// the same state.
void qg_pg_pairs_part(const qg_index *index, int32_t part, int32_t parts, qg_pair_fn *fn, void *user,
                      qg_query_stats *stats)
{
    const point_grid *g = (const point_grid *)index;
    pg_batch bt;
    bt.boxes = index->boxes;
    bt.head = bt.tail = 0;
    bt.tested = 0;
    // Pairs within each level, and across: each element of a coarser level
    // searches the finer ones with its box (the lowest during its walk).
    pg_sched sc = {-1, part, parts, {0}};
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        const pg_level *L = &g->level[k];
        if (L->count == 0)
            continue;
        const int32_t r0 = qg_pg_band_edge(L, part, parts), r1 = qg_pg_band_edge(L, part + 1, parts);
        stats->nodes_visited += (int64_t)L->cols * (r1 - r0);
        if (sc.base < 0) {
            sc.base = k;
            for (int32_t j = k + 1; j < PG_LEVELS && r0 > 0; ++j) {
                if (g->level[j].count > 0)
                    sc.row[j] = pg_sched_first(L, &g->level[j], r0);
            }
            if (!pg_pairs_level(g, L, &sc, part, parts, r0, r1, &bt, fn, user))
                goto stop;
            continue;
        }
        int64_t s0, s1;
        qg_part_range((int64_t)L->listed + L->tail, part, parts, &s0, &s1);
        if (!pg_pairs_level(g, L, NULL, part, parts, r0, r1, &bt, fn, user) ||
            !pg_search_slots(g, k, (int32_t)s0, (int32_t)s1, sc.base + 1, k, &bt, fn, user))
            goto stop;
    }
    pg_flush(&bt, fn, user);
stop:
    stats->elements_tested = bt.tested;
}

void qg_pg_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    qg_pg_pairs_part(index, 0, 1, fn, user, stats);
}
