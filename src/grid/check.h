// SPDX-License-Identifier: MIT
// The grid family's stats, visit and validate.
#ifndef QG_GRID_CHECK_H
#define QG_GRID_CHECK_H

#include "rows.h"

/* ---- stats, visit, validate ---------------------------------------------- */

static inline int64_t gr_cell_length(const gr_row *r, int32_t x)
{
    int64_t n = 0;
    for (int32_t e = r->cells[x]; e >= 0 && n <= r->high; e = r->nodes[e].next)
        n++;
    return n;
}

/// Calls fn for every non-empty fine cell, depth `depth`, drawn where it
/// falls in the bounds' window.
static inline void gr_visit_cells(const gr_grid *g, int depth, qg_visit_fn *fn, void *user)
{
    for (int32_t y = 0; y < g->nrows; ++y) {
        const gr_row *r = &g->rows[y];
        if (r->cells == NULL || r->live == 0)
            continue;
        for (int32_t x = 0; x < g->cols; ++x) {
            if (r->cells[x] >= 0)
                fn(gr_cell_rect(g, gr_unwrap(x, g->home_x, g->mx), gr_unwrap(y, g->home_y, g->my), 1), depth,
                   (int32_t)gr_cell_length(r, x), user);
        }
    }
}

/// A well-mixed 64-bit value of v and a salt (splitmix64's finaliser).
static inline uint64_t gr_mix(uint64_t v, uint64_t salt)
{
    v += salt * 0x9e3779b97f4a7c15ull;
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
    return (v ^ (v >> 31)) | 1;
}

/// The element's factor in the fingerprint: one multiply, as it runs for
/// every node (the cell factors are mixed well, once per cell).
static inline uint64_t gr_elem_print(qg_handle h)
{
    return ((uint64_t)(uint32_t)h * 2 + 1) * 0xd6e8feb86659fd93ull;
}

/// Checks every row, free list and list, and that the element nodes are
/// exactly "h in every cell of its box, once". The last part compares two
/// fingerprints of the set of (element, x, y) triples, one summed over the
/// nodes and one over the cells every element's box maps to, with the term
/// a(h) * b(x) * c(y): separable, so an element's whole cell range sums in
/// O(columns + rows), and a node in a wrong cell, a duplicate or a missing
/// node changes the sum (except with probability ~2^-60). Plain
/// comparisons could not do it in linear time without allocating. Adds the
/// rows' bytes. `bits` are checked by the caller.
static inline bool gr_validate(const gr_grid *g, const qg_index *index, size_t *bytes)
{
    if (g->rows == NULL || g->cols < 1 || g->nrows < 1 || (g->cols & g->mx) != 0 || (g->nrows & g->my) != 0 ||
        g->mx != g->cols - 1 || g->my != g->nrows - 1)
        return false;
    int64_t nodes_seen = 0;
    uint64_t print_nodes = 0;
    size_t b = (size_t)g->nrows * sizeof(gr_row);
    for (int32_t y = 0; y < g->nrows; ++y) {
        const gr_row *r = &g->rows[y];
        if (r->undo_capacity != -1 || r->undo_cells != 0 || (r->emptied & ~1) != 0 || (r->grown & ~1) != 0)
            return false;
        if (r->high < 0 || r->high > r->capacity || r->live < 0 || r->live > r->high ||
            (r->capacity > 0) != (r->nodes != NULL))
            return false;
        if (r->cells == NULL) {
            if (r->live != 0)
                return false;
        } else {
            b += (size_t)g->cols * sizeof(int32_t);
        }
        b += (size_t)r->capacity * sizeof(qg_enode);
        // Free list: exactly the dead slots below high.
        int64_t free_count = 0;
        for (int32_t e = r->free_head; e >= 0; e = r->nodes[e].next) {
            if (e >= r->high || r->nodes[e].element != -1 || ++free_count > r->high - r->live)
                return false;
        }
        if (free_count != r->high - r->live)
            return false;
        if (r->cells == NULL || r->live == 0)
            continue;
        const uint64_t cy = gr_mix((uint64_t)y, 3);
        int64_t in_row = 0;
        for (int32_t x = 0; x < g->cols; ++x) {
            const uint64_t cxy = gr_mix((uint64_t)x, 2) * cy;
            for (int32_t e = r->cells[x]; e >= 0; e = r->nodes[e].next) {
                if (e >= r->high || ++in_row > r->live)
                    return false;
                const qg_handle h = r->nodes[e].element;
                if (!qg_slot_live(index, h))
                    return false;
                print_nodes += gr_elem_print(h) * cxy;
            }
        }
        if (in_row != r->live)
            return false;
        nodes_seen += in_row;
    }
    // The wide list: exactly the live wide elements, once each (a
    // fingerprint again, as the list may be long).
    if (g->wide_count < 0 || g->wide_count > g->wide_capacity || (g->wide_capacity > 0) != (g->wide != NULL))
        return false;
    uint64_t print_wide = 0, print_wide_live = 0;
    for (int32_t i = 0; i < g->wide_count; ++i) {
        const qg_handle h = g->wide[i];
        if (!qg_slot_live(index, h) || !gr_is_wide(g, gr_map_box(g, index->boxes[h])))
            return false;
        print_wide += gr_elem_print(h);
    }
    int64_t expected = 0, wide_live = 0;
    uint64_t print_boxes = 0;
    for (qg_handle h = 0; h < index->box_high; ++h) {
        if (!qg_slot_live(index, h))
            continue;
        const gr_ibox ib = gr_map_box(g, index->boxes[h]);
        if (gr_is_wide(g, ib)) {
            wide_live++;
            print_wide_live += gr_elem_print(h);
            continue;
        }
        // The ray and nearest walks stop at the reach's edge.
        if (ib.x0 < g->reach.x0 || ib.y0 < g->reach.y0 || ib.x1 > g->reach.x1 || ib.y1 > g->reach.y1)
            return false;
        expected += gr_ibox_cells(g, ib);
        uint64_t sx = 0, sy = 0;
        for (int32_t j = 0, nx = gr_span(ib.x0, ib.x1, g->cols); j < nx; ++j)
            sx += gr_mix((uint64_t)((ib.x0 + j) & g->mx), 2);
        for (int32_t i = 0, ny = gr_span(ib.y0, ib.y1, g->nrows); i < ny; ++i)
            sy += gr_mix((uint64_t)((ib.y0 + i) & g->my), 3);
        print_boxes += gr_elem_print(h) * sx * sy;
    }
    if (expected != nodes_seen || print_nodes != print_boxes || wide_live != g->wide_count ||
        print_wide != print_wide_live)
        return false;
    *bytes += b + (size_t)g->wide_capacity * sizeof(int32_t);
    return true;
}

#endif
