// SPDX-License-Identifier: MIT
// The grid family's searches: a query over the cells an area covers, and the
// pair search, each answer reported only in the cell of its overlap's corner.
#ifndef QG_GRID_SEARCH_H
#define QG_GRID_SEARCH_H

#include "rows.h"

/// The wide list's part of a query. False when fn asked to stop.
static inline bool gr_query_wide(const gr_grid *g, const qg_rect *boxes, qg_rect area, qg_query_fn *fn, void *user,
                                 qg_query_stats *stats)
{
    stats->elements_tested += g->wide_count;
    for (int32_t i = 0; i < g->wide_count; ++i) {
        const qg_handle h = g->wide[i];
        if (qg_overlaps(boxes[h], area) && !fn(h, user))
            return false;
    }
    return true;
}

/// The wide list's pairs: among its elements (when `among`), then
/// each of them with every other live element of handles [h0, h1) (one
/// pass over the boxes; an overlapping one is skipped when it is on the
/// list too, as that pair came first). False when fn asked to stop.
static inline bool gr_pairs_wide(const gr_grid *g, const qg_index *index, qg_pair_fn *fn, void *user,
                                 qg_query_stats *stats, qg_handle h0, qg_handle h1, bool among)
{
    const qg_rect *boxes = index->boxes;
    const int32_t w = g->wide_count;
    stats->elements_tested += (among ? (int64_t)w * (w - 1) / 2 : 0) + (int64_t)w * (h1 - h0);
    if (among) {
        for (int32_t i = 0; i < w; ++i) {
            const qg_rect a = boxes[g->wide[i]];
            for (int32_t j = i + 1; j < w; ++j) {
                if (qg_overlaps(a, boxes[g->wide[j]]) && !qg_report_pair(fn, user, g->wide[i], g->wide[j]))
                    return false;
            }
        }
    }
    for (qg_handle h = h0; h < h1; ++h) {
        const qg_rect b = boxes[h];
        if (isnan(b.min_x))
            continue;
        bool listed = false, known = false;
        for (int32_t i = 0; i < w; ++i) {
            if (!qg_overlaps(boxes[g->wide[i]], b))
                continue;
            if (!known) {
                listed = gr_is_wide(g, gr_map_box(g, b));
                known = true;
            }
            if (!listed && !qg_report_pair(fn, user, g->wide[i], h))
                return false;
        }
    }
    return true;
}

/// Reports the elements of wrapped cell (x, y) that overlap area (whose
/// unwrapped range is qb), each only in the cell of the top-left corner of
/// its overlap with the area. False when fn asked to stop.
static inline bool gr_query_cell(const gr_grid *g, const gr_row *r, int32_t x, int32_t y, gr_ibox qb,
                                 const qg_rect *boxes, qg_rect area, qg_query_fn *fn, void *user,
                                 qg_query_stats *stats)
{
    const int32_t qx = gr_key(qb.x0, x, g->mx), qy = gr_key(qb.y0, y, g->my);
    for (int32_t e = r->cells[x]; e >= 0; e = r->nodes[e].next) {
        const qg_handle h = r->nodes[e].element;
        const qg_rect b = boxes[h];
        stats->elements_tested++;
        if (!qg_overlaps(b, area))
            continue;
        const gr_ibox bb = gr_map_box(g, b);
        const int32_t kx = gr_key(bb.x0, x, g->mx), ky = gr_key(bb.y0, y, g->my);
        if ((kx > qx ? kx : qx) & (ky > qy ? ky : qy) & 1 && !fn(h, user))
            return false;
    }
    return true;
}

/// QG_GRID's query: every wrapped cell of the area's range, row by row.
static inline void gr_query(const gr_grid *g, const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                            qg_query_stats *stats)
{
    if (!gr_query_wide(g, index->boxes, area, fn, user, stats))
        return;
    const gr_ibox qb = gr_map_box(g, area);
    const int32_t nx = gr_span(qb.x0, qb.x1, g->cols), ny = gr_span(qb.y0, qb.y1, g->nrows);
    for (int32_t i = 0; i < ny; ++i) {
        const int32_t y = (qb.y0 + i) & g->my;
        const gr_row *r = &g->rows[y];
        if (r->cells == NULL) {
            stats->nodes_visited++; // one look at the row says all its cells are empty
            continue;
        }
        stats->nodes_visited += nx;
        for (int32_t j = 0; j < nx; ++j) {
            const int32_t x = (qb.x0 + j) & g->mx;
            if (r->cells[x] >= 0 && !gr_query_cell(g, r, x, y, qb, index->boxes, area, fn, user, stats))
                return;
        }
    }
}

/// Pairs of a cell with more than GR_GATHER elements, walked in place.
static inline bool gr_pairs_long(const gr_grid *g, const gr_row *r, int32_t x, int32_t y, const qg_rect *boxes,
                                 qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    for (int32_t e = r->cells[x]; e >= 0; e = r->nodes[e].next) {
        const qg_handle ha = r->nodes[e].element;
        const qg_rect a = boxes[ha];
        const gr_ibox ab = gr_map_box(g, a);
        const int32_t ax = gr_key(ab.x0, x, g->mx), ay = gr_key(ab.y0, y, g->my);
        for (int32_t f = r->nodes[e].next; f >= 0; f = r->nodes[f].next) {
            const qg_handle hb = r->nodes[f].element;
            const qg_rect b = boxes[hb];
            stats->elements_tested++;
            if (!qg_overlaps(a, b))
                continue;
            const gr_ibox bb = gr_map_box(g, b);
            const int32_t bx = gr_key(bb.x0, x, g->mx), by = gr_key(bb.y0, y, g->my);
            if ((ax > bx ? ax : bx) & (ay > by ? ay : by) & 1 && !qg_report_pair(fn, user, ha, hb))
                return false;
        }
    }
    return true;
}

/// The pair loop is written once for the serial search and the parts; forced
/// inline so each caller gets its own copy, compiled as the one loop was
/// (out of line, the serial search ran 2.5% more instructions).
#if defined(__GNUC__)
#define GR_FORCE_INLINE static inline __attribute__((always_inline))
#else
#define GR_FORCE_INLINE static inline
#endif

/// Element nodes gathered per batch in gr_pairs.
#define GR_BATCH 512

/// Pairs among the k elements of wrapped cell (x, y), gathered in ids.
static inline bool gr_pairs_among(const gr_grid *g, int32_t x, int32_t y, const qg_handle *ids, int k,
                                  const qg_rect *boxes, qg_pair_fn *fn, void *user)
{
    qg_rect rb[GR_GATHER];
    int32_t kx[GR_GATHER], ky[GR_GATHER];
    for (int i = 0; i < k; ++i) {
        const qg_rect b = boxes[ids[i]];
        const gr_ibox bb = gr_map_box(g, b);
        rb[i] = b;
        kx[i] = gr_key(bb.x0, x, g->mx);
        ky[i] = gr_key(bb.y0, y, g->my);
    }
    for (int i = 0; i < k; ++i) {
        const qg_rect a = rb[i];
        const int32_t ax = kx[i], ay = ky[i];
        for (int j = i + 1; j < k; ++j) {
            const int32_t mx = ax > kx[j] ? ax : kx[j], my = ay > ky[j] ? ay : ky[j];
            if ((mx & my & 1) & qg_overlaps(a, rb[j]) && !qg_report_pair(fn, user, ids[i], ids[j]))
                return false;
        }
    }
    return true;
}

/// The pairs of rows [y0, y1): rows in order, cells in order; a pair is
/// reported only in the wrapped cell of the top-left corner of the two
/// boxes' overlap (gr_key). The lists of a run of cells are gathered first,
/// prefetching every element's box, so the boxes' cache misses overlap
/// instead of queueing one behind the other. False when fn asked to stop.
GR_FORCE_INLINE bool gr_pairs_rows(const gr_grid *g, const qg_index *index, int32_t y0, int32_t y1, qg_pair_fn *fn,
                                 void *user, qg_query_stats *stats)
{
    const qg_rect *boxes = index->boxes;
    qg_handle ids[GR_BATCH];
    int32_t cell_x[GR_BATCH / 2];
    int start[GR_BATCH / 2 + 1];
    for (int32_t y = y0; y < y1; ++y) {
        const gr_row *r = &g->rows[y];
        if (r->cells == NULL || r->live < 2) {
            stats->nodes_visited++; // one look at the row says no cell holds two
            continue;
        }
        stats->nodes_visited += g->cols;
        const int32_t *cells = r->cells;
        const qg_enode *nodes = r->nodes;
        int32_t x = 0;
        while (x < g->cols) {
            int n = 0, fill = 0;
            start[0] = 0;
            for (; x < g->cols && fill + GR_GATHER <= GR_BATCH && n < GR_BATCH / 2; ++x) {
                const int32_t head = cells[x];
                if (head < 0 || nodes[head].next < 0)
                    continue;
                int k = 0;
                int32_t e = head;
                for (; e >= 0 && k < GR_GATHER; e = nodes[e].next, ++k) {
                    const qg_handle h = nodes[e].element;
                    GR_PREFETCH(&boxes[h]);
                    ids[fill + k] = h;
                }
                if (e >= 0) {
                    if (!gr_pairs_long(g, r, x, y, boxes, fn, user, stats))
                        return false;
                    continue;
                }
                stats->elements_tested += (int64_t)k * (k - 1) / 2;
                cell_x[n++] = x;
                fill += k;
                start[n] = fill;
            }
            for (int i = 0; i < n; ++i) {
                if (!gr_pairs_among(g, cell_x[i], y, ids + start[i], start[i + 1] - start[i], boxes, fn, user))
                    return false;
            }
        }
    }
    return true;
}

/// Every overlapping pair once: the wide list's, then every row's.
static inline void gr_pairs(const gr_grid *g, const qg_index *index, qg_pair_fn *fn, void *user,
                            qg_query_stats *stats)
{
    if (g->wide_count > 0 && !gr_pairs_wide(g, index, fn, user, stats, 0, index->box_high, true))
        return;
    gr_pairs_rows(g, index, 0, g->nrows, fn, user, stats);
}

/// The band of rows [*y0, *y1) that part `part` of `parts` takes: bands
/// are contiguous and balanced by the rows' element nodes (a row goes to
/// the part its middle node falls in), so uneven scenes still split evenly.
/// Every part computes all the bands the same way from the same state.
static inline void gr_band(const gr_grid *g, int32_t part, int32_t parts, int32_t *y0, int32_t *y1)
{
    int64_t total = 0;
    for (int32_t y = 0; y < g->nrows; ++y)
        total += g->rows[y].live;
    if (total == 0) {
        int64_t b, e;
        qg_part_range(g->nrows, part, parts, &b, &e);
        *y0 = (int32_t)b;
        *y1 = (int32_t)e;
        return;
    }
    int64_t before = 0;
    int32_t y = 0;
    *y0 = -1;
    for (; y < g->nrows; ++y) {
        const int64_t live = g->rows[y].live;
        const int64_t owner = (2 * before + live) * parts / (2 * total);
        if (owner >= part && *y0 < 0)
            *y0 = y;
        if (owner > part)
            break;
        before += live;
    }
    if (*y0 < 0)
        *y0 = y;
    // Rows past the last live one belong to the last band: a batch move
    // links into rows that are empty before it (they once fell in no band,
    // and a box moved into them was stored but never linked).
    *y1 = part == parts - 1 ? g->nrows : y;
}

/// Part `part` of `parts` of gr_pairs: the wide list's pairs split by
/// handle range (those among the list in part 0), then a band of rows
/// (gr_band). A pair is reported in one cell only, and a cell lies in one
/// band, so the parts are disjoint and their union is gr_pairs' set: the
/// torus wrap changes nothing, as the reporting cell is a wrapped cell.
static inline void gr_pairs_part(const gr_grid *g, const qg_index *index, int32_t part, int32_t parts,
                                 qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    if (g->wide_count > 0) {
        int64_t b, e;
        qg_part_range(index->box_high, part, parts, &b, &e);
        if (!gr_pairs_wide(g, index, fn, user, stats, (qg_handle)b, (qg_handle)e, part == 0))
            return;
    }
    int32_t y0, y1;
    gr_band(g, part, parts, &y0, &y1);
    gr_pairs_rows(g, index, y0, y1, fn, user, stats);
}

#endif
