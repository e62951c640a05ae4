// SPDX-License-Identifier: MIT
// QG_LOOSE_GRID, the pair search: right after qg_cleanup, items streamed in
// cell order against the loose cells near each cell (by adjacency or
// through the tight cells); after changes, each element through the tight
// cells its box covers. The overview of the kind is in loose_grid.h.
#include "loose_grid.h"

/// A loose cell's elements, gathered.
typedef struct lg_gathered {
    int n;
    qg_handle h[LG_GATHER];
    qg_rect box[LG_GATHER];
} lg_gathered;

static bool lg_gather(const loose_grid *g, int32_t head, lg_gathered *out)
{
    int n = 0;
    for (int32_t k = head; k >= 0; k = g->next[k]) {
        if (n == LG_GATHER)
            return false;
        out->h[n] = g->items[k].h;
        out->box[n] = g->base.boxes[out->h[n]];
        n++;
    }
    out->n = n;
    return true;
}

/// Pairs of element a (box ab, in loose cell ia) with the elements of the
/// loose cells after ia whose boxes overlap ab, walking the lists (after a
/// change without cleanup): "each element against the
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
                for (int32_t k = cb->head; k >= 0; k = g->next[k]) {
                    stats->elements_tested++;
                    const qg_handle h = g->items[k].h;
                    if (qg_overlaps(ab, g->base.boxes[h]) && !qg_report_pair(fn, user, a, h))
                        return false;
                }
            }
        }
    }
    return true;
}

/// A loose cell near the one being paired: its box and its run of items.
typedef struct lg_near {
    float l, t, r, b;
    int32_t k0, k1;
} lg_near;

/// Loose cells gathered at once in lg_pairs_cell_fresh.
#define LG_NEAR 64

/// A's items [k0, k1) against the gathered cells: each element is tested
/// against a cell's box first, then against its elements.
static bool lg_pairs_near(const lg_item *it, int32_t k0, int32_t k1, const lg_near *near, int nn, qg_pair_fn *fn,
                          void *user, int64_t *tested)
{
    for (int32_t i = k0; i < k1; ++i) {
        const qg_rect ab = it[i].box;
        for (int m = 0; m < nn; ++m) {
            const lg_near *nb = &near[m];
            if (!((nb->l <= ab.max_x) & (ab.min_x <= nb->r) & (nb->t <= ab.max_y) & (ab.min_y <= nb->b)))
                continue;
            *tested += nb->k1 - nb->k0;
            for (int32_t q = nb->k0; q < nb->k1; ++q) {
                if (qg_overlaps(ab, it[q].box) && !qg_report_pair(fn, user, it[i].h, it[q].h))
                    return false;
            }
        }
    }
    return true;
}

/// Whether loose cell (cx, cy)'s box stays within half a cell of the cell:
/// its corners, mapped at twice the loose resolution (monotonic, clamped),
/// fall in [2c - 1, 2c + 2] on both axes. Two such boxes that overlap share
/// a point, whose mapping lies in both ranges, so their cells are
/// neighbours: the pair loop finds them by adjacency, without the tight
/// lists. An empty box is not small.
static inline bool lg_small(const loose_grid *g, const lg_loose *c, int32_t cx, int32_t cy)
{
    if (!(c->l <= c->r))
        return false;
    const int32_t lx = 2 * g->lcols - 1, ly = 2 * g->lrows - 1;
    const float sx = 2.0f * g->lsx, sy = 2.0f * g->lsy;
    return lg_map(c->l, g->ox, sx, lx) >= 2 * cx - 1 && lg_map(c->r, g->ox, sx, lx) <= 2 * cx + 2 &&
           lg_map(c->t, g->oy, sy, ly) >= 2 * cy - 1 && lg_map(c->b, g->oy, sy, ly) <= 2 * cy + 2;
}

/// Adds loose cell ib to the gathered cells when its box overlaps A's.
static inline int lg_near_add(const loose_grid *g, lg_near *near, int nn, const lg_loose *ca, int32_t ib)
{
    const lg_loose *cb = &g->loose[ib];
    near[nn] = (lg_near){cb->l, cb->t, cb->r, cb->b, g->start[ib], g->start[ib + 1]};
    return nn + ((cb->l <= ca->r) & (ca->l <= cb->r) & (cb->t <= ca->b) & (ca->t <= cb->b));
}

/// The pairs of loose cell ia = (cx, cy) right after cleanup: within the
/// cell, then against the other loose cells whose boxes overlap its box (a
/// pair of overlapping elements lies in two overlapping loose boxes). Each
/// pair of cells is taken once:
/// - both small (lg_small, the common case): from the lower cell, which
///   looks at its four later neighbours;
/// - one small, one big: from the big one;
/// - both big: from the lower one.
/// A big cell finds the others through the tight cells of its box, each in
/// the first tight cell the two ranges share. The cells found are gathered
/// with their boxes and runs on the C stack (in batches), then each element
/// is tested against a cell's box before its elements.
static bool lg_pairs_cell_fresh(const loose_grid *g, int32_t ia, int32_t cx, int32_t cy, qg_pair_fn *fn, void *user,
                                qg_query_stats *stats)
{
    const lg_item *it = g->items;
    const int32_t k0 = g->start[ia], k1 = g->start[ia + 1];
    int64_t tested = 0, visited = 1;
    for (int32_t i = k0; i < k1; ++i) {
        const qg_rect ab = it[i].box;
        tested += k1 - i - 1;
        for (int32_t j = i + 1; j < k1; ++j) {
            if (qg_overlaps(ab, it[j].box) && !qg_report_pair(fn, user, it[i].h, it[j].h))
                return false;
        }
    }
    const lg_loose *ca = &g->loose[ia];
    lg_near near[LG_NEAR];
    int nn = 0;
    bool go = true;
    if (lg_small(g, ca, cx, cy)) {
        const int32_t w = g->lcols;
        if (cx + 1 < w && lg_small(g, &g->loose[ia + 1], cx + 1, cy))
            nn = lg_near_add(g, near, nn, ca, ia + 1);
        if (cy + 1 < g->lrows) {
            for (int32_t dx = cx > 0 ? -1 : 0; dx <= 1 && cx + dx < w; ++dx) {
                if (lg_small(g, &g->loose[ia + w + dx], cx + dx, cy + 1))
                    nn = lg_near_add(g, near, nn, ca, ia + w + dx);
            }
        }
    } else {
        const lg_range ra = lg_cell_range(g, ca);
        const qg_enode *links = g->links.data;
        for (int32_t ty = ra.y0; ty <= ra.y1 && go; ++ty) {
            for (int32_t tx = ra.x0; tx <= ra.x1 && go; ++tx) {
                for (int32_t e = g->tight[ty * g->tcols + tx]; e >= 0; e = links[e].next) {
                    const int32_t ib = links[e].element;
                    const lg_loose *cb = &g->loose[ib];
                    if (ib == ia || !(ib > ia || lg_small(g, cb, ib % g->lcols, ib / g->lcols)))
                        continue;
                    const lg_range rb = lg_cell_range(g, cb);
                    if (lg_max32(ra.x0, rb.x0) != tx || lg_max32(ra.y0, rb.y0) != ty)
                        continue;
                    nn = lg_near_add(g, near, nn, ca, ib);
                    if (nn == LG_NEAR) {
                        visited += nn;
                        if (!(go = lg_pairs_near(it, k0, k1, near, nn, fn, user, &tested)))
                            break;
                        nn = 0;
                    }
                }
            }
        }
    }
    visited += nn;
    if (go && nn > 0)
        go = lg_pairs_near(it, k0, k1, near, nn, fn, user, &tested);
    stats->nodes_visited += visited;
    stats->elements_tested += tested;
    return go;
}

/// The pairs reported from loose cells [c0, c1): each pair is reported from
/// one loose cell only (lg_pairs_cell_fresh, lg_pairs_of), so disjoint
/// ranges of cells give disjoint sets of pairs. False when fn asked to stop.
static bool lg_pairs_cells(const loose_grid *g, int32_t c0, int32_t c1, qg_pair_fn *fn, void *user,
                           qg_query_stats *stats)
{
    const qg_rect *boxes = g->base.boxes;
    if (g->fresh) {
        // Right after qg_cleanup: everything streams from the items.
        // Row by row, as the cells' coordinates are wanted too.
        for (int32_t ia = c0; ia < c1;) {
            const int32_t cy = ia / g->lcols, row_end = (cy + 1) * g->lcols < c1 ? (cy + 1) * g->lcols : c1;
            for (int32_t cx = ia - cy * g->lcols; ia < row_end; ++cx, ++ia) {
                if (g->start[ia] != g->start[ia + 1] && !lg_pairs_cell_fresh(g, ia, cx, cy, fn, user, stats))
                    return false;
            }
        }
        return true;
    }
    lg_gathered A;
    for (int32_t ia = c0; ia < c1; ++ia) {
        const lg_loose *ca = &g->loose[ia];
        if (ca->head < 0)
            continue;
        stats->nodes_visited++;
        if (lg_gather(g, ca->head, &A)) {
            for (int i = 0; i < A.n; ++i) {
                for (int j = i + 1; j < A.n; ++j) {
                    stats->elements_tested++;
                    if (qg_overlaps(A.box[i], A.box[j]) && !qg_report_pair(fn, user, A.h[i], A.h[j]))
                        return false;
                }
                if (!lg_pairs_of(g, ia, A.h[i], A.box[i], fn, user, stats))
                    return false;
            }
        } else {
            for (int32_t ka = ca->head; ka >= 0; ka = g->next[ka]) {
                const qg_handle a = g->items[ka].h;
                for (int32_t kb = g->next[ka]; kb >= 0; kb = g->next[kb]) {
                    const qg_handle b = g->items[kb].h;
                    stats->elements_tested++;
                    if (qg_overlaps(boxes[a], boxes[b]) && !qg_report_pair(fn, user, a, b))
                        return false;
                }
                if (!lg_pairs_of(g, ia, a, boxes[a], fn, user, stats))
                    return false;
            }
        }
    }
    return true;
}

void qg_lg_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    const loose_grid *g = (const loose_grid *)index;
    lg_pairs_cells(g, 0, g->lcols * g->lrows, fn, user, stats);
}

/// Part `part` of `parts` of the pair search: a range of loose cells, cut
/// where the runs of the last cleanup (start[]) split the items evenly, so
/// the parts hold about as many elements each (an even split of the cells
/// when nothing was packed yet). Pairs are reported from one cell each, so
/// the parts are disjoint and their union is qg_lg_pairs' set.
void qg_lg_pairs_part(const qg_index *index, int32_t part, int32_t parts, qg_pair_fn *fn, void *user,
                      qg_query_stats *stats)
{
    const loose_grid *g = (const loose_grid *)index;
    const int32_t nl = g->lcols * g->lrows, packed = g->start[nl];
    int64_t c0, c1;
    if (packed == 0) {
        qg_part_range(nl, part, parts, &c0, &c1);
    } else {
        int64_t i0, i1;
        qg_part_range(packed, part, parts, &i0, &i1);
        c0 = part == 0 ? 0 : qg_lg_cell_at(g, i0);
        c1 = part == parts - 1 ? nl : qg_lg_cell_at(g, i1);
    }
    lg_pairs_cells(g, (int32_t)c0, (int32_t)c1, fn, user, stats);
}
