// SPDX-License-Identifier: MIT
// The grid family's batch calls: qg_move_many spread over workers by rows,
// and qg_insert_many in one pass.
#ifndef QG_GRID_BATCH_H
#define QG_GRID_BATCH_H

#include "search.h"
#include "update.h"

/* ---- several cores: the batch move --------------------------------------- */

/// The most parts a job system may ask for (index.c's limit).
#define GR_MAX_PARTS 256

/// One move of a batch whose cells change: its handle, its old and new
/// cell ranges and whether each is on the wide list instead.
typedef struct gr_change {
    gr_ibox ob, nb;
    qg_handle h;
    int32_t ow, nw;
} gr_change;

/// A batch move's shared state (gr_move_many).
typedef struct gr_batch {
    gr_grid *g;
    qg_rect *base_boxes;
    const qg_handle *handles;
    const qg_rect *boxes;
    uint8_t *moved; ///< per move: 1 when its cells change (phase 1)
    gr_change *changes;
    int32_t nchanges, n, parts;
    int32_t band[GR_MAX_PARTS + 1]; ///< part p relinks rows [band[p], band[p + 1])
} gr_batch;

/// Phase 1, over ranges of the batch: which moves change cells. Reads only.
static inline void gr_batch_classify(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    gr_batch *b = context;
    const gr_grid *g = b->g;
    for (int32_t i = begin; i < end; ++i) {
        const gr_ibox nb = gr_map_box(g, b->boxes[i]), ob = gr_map_box(g, b->base_boxes[b->handles[i]]);
        // A box that stays on the wide list changes no cell either.
        b->moved[i] = !gr_ibox_equal(ob, nb) && !(gr_is_wide(g, ob) && gr_is_wide(g, nb));
    }
}

/// Phase 2, one part each: the part's share of the batch stores its boxes,
/// then the part unlinks and links the changed moves' cells in its band of
/// rows: every unlink of the band before any link, so a row never holds
/// more nodes than it holds at the end (what was reserved). Rows are the
/// only shared structure touched, and each row has one owner. The bitset
/// of QG_MULTI_GRID is shared across bands: it is brought up to date after.
static inline void gr_batch_relink(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    gr_batch *b = context;
    gr_grid *g = b->g;
    for (int32_t p = begin; p < end; ++p) {
        int64_t i0, i1;
        qg_part_range(b->n, p, b->parts, &i0, &i1);
        for (int64_t i = i0; i < i1; ++i)
            b->base_boxes[b->handles[i]] = b->boxes[i];
        const int32_t y0 = b->band[p], y1 = b->band[p + 1];
        if (y0 == y1)
            continue;
        for (int32_t c = 0; c < b->nchanges; ++c) {
            const gr_change *m = &b->changes[c];
            if (m->ow)
                continue;
            const gr_ibox ob = m->ob, nb = m->nb;
            const int32_t nx = gr_span(ob.x0, ob.x1, g->cols), ny = gr_span(ob.y0, ob.y1, g->nrows);
            for (int32_t k = 0; k < ny; ++k) {
                const int32_t y = (ob.y0 + k) & g->my;
                if (y < y0 || y >= y1)
                    continue;
                gr_row *r = &g->rows[y];
                for (int32_t j = 0; j < nx; ++j) {
                    const int32_t x = (ob.x0 + j) & g->mx;
                    if (m->nw || !gr_in(g, nb, x, y))
                        gr_unlink(r, x, m->h);
                }
            }
        }
        for (int32_t c = 0; c < b->nchanges; ++c) {
            const gr_change *m = &b->changes[c];
            if (m->nw)
                continue;
            const gr_ibox ob = m->ob, nb = m->nb;
            const int32_t nx = gr_span(nb.x0, nb.x1, g->cols), ny = gr_span(nb.y0, nb.y1, g->nrows);
            for (int32_t k = 0; k < ny; ++k) {
                const int32_t y = (nb.y0 + k) & g->my;
                if (y < y0 || y >= y1)
                    continue;
                gr_row *r = &g->rows[y];
                for (int32_t j = 0; j < nx; ++j) {
                    const int32_t x = (nb.x0 + j) & g->mx;
                    if (m->ow || !gr_in(g, ob, x, y))
                        gr_link(r, x, m->h);
                }
            }
        }
    }
}

/// Adds to delta[y] the nodes row y gains (+) and loses (-) when h goes from
/// range `from` to range `to` (cells of `from` not in `to`: -1 each; a
/// wide range has no cells), and marks in adds[y] that the row gains one.
static inline void gr_batch_count(const gr_grid *g, const gr_change *m, int32_t *delta, uint8_t *adds)
{
    if (!m->ow) {
        const int32_t nx = gr_span(m->ob.x0, m->ob.x1, g->cols), ny = gr_span(m->ob.y0, m->ob.y1, g->nrows);
        for (int32_t k = 0; k < ny; ++k) {
            const int32_t y = (m->ob.y0 + k) & g->my;
            for (int32_t j = 0; j < nx; ++j)
                delta[y] -= m->nw || !gr_in(g, m->nb, (m->ob.x0 + j) & g->mx, y);
        }
    }
    if (!m->nw) {
        const int32_t nx = gr_span(m->nb.x0, m->nb.x1, g->cols), ny = gr_span(m->nb.y0, m->nb.y1, g->nrows);
        for (int32_t k = 0; k < ny; ++k) {
            const int32_t y = (m->nb.y0 + k) & g->my;
            int32_t gain = 0;
            for (int32_t j = 0; j < nx; ++j)
                gain += m->ow || !gr_in(g, m->ob, (m->nb.x0 + j) & g->mx, y);
            delta[y] += gain;
            adds[y] |= gain > 0;
        }
    }
}

/// Gives every row what the batch's relinks need (cells where it gains
/// nodes and has none, nodes for its live count at the end); on failure
/// gives back what it grew and returns false (the rows' undo records).
static inline bool gr_batch_reserve(gr_grid *g, qg_alloc *alloc, const int32_t *delta, const uint8_t *adds)
{
    bool ok = true;
    for (int32_t y = 0; y < g->nrows && ok; ++y) {
        gr_row *r = &g->rows[y];
        if (!adds[y])
            continue;
        if (r->cells == NULL) {
            r->cells = qg_mem_alloc(alloc, (size_t)g->cols * sizeof(int32_t));
            if (r->cells == NULL) {
                ok = false;
                break;
            }
            memset(r->cells, 0xff, (size_t)g->cols * sizeof(int32_t));
            r->undo_cells = 1;
        }
        const int64_t needed = (int64_t)r->live + delta[y];
        if (needed > r->capacity) {
            const int64_t cap = gr_grown_capacity(r, needed);
            void *q = cap > INT32_MAX ? NULL
                                      : qg_mem_resize(alloc, r->nodes, (size_t)r->capacity * sizeof(qg_enode),
                                                      (size_t)cap * sizeof(qg_enode));
            if (q == NULL) {
                ok = false;
                break;
            }
            r->undo_capacity = r->capacity;
            r->grown = 1;
            r->nodes = q;
            r->capacity = (int32_t)cap;
        }
    }
    for (int32_t y = 0; y < g->nrows; ++y) {
        gr_row *r = &g->rows[y];
        if (!ok && r->undo_capacity >= 0) {
            r->nodes = qg_mem_resize(alloc, r->nodes, (size_t)r->capacity * sizeof(qg_enode),
                                     (size_t)r->undo_capacity * sizeof(qg_enode));
            r->capacity = r->undo_capacity;
        }
        if (!ok && r->undo_cells) {
            qg_mem_free(alloc, r->cells, (size_t)g->cols * sizeof(int32_t));
            r->cells = NULL;
        }
        gr_row_reset_undo(r);
    }
    return ok;
}

/// qg_move_many for both grids (bits: QG_MULTI_GRID's bitset, else NULL).
/// 1. In parallel over the batch: which moves change cells (reads only).
/// 2. Serially over the changed ones (a few percent of a frame's moves on
///    `agents`): their ranges, each row's node balance, and every
///    allocation (the wide list through a txn, the rows with their
///    undo records); QG_ERR_NOMEM here leaves the index as it was.
/// 3. In parallel, one part each: a share of the box stores, and the
///    relinks of a band of rows (gr_batch_relink).
/// 4. Serially: the wide list and the bitset of the changed moves.
/// The lists end up holding what n qg_move calls give (node order within a
/// cell may differ, which no answer depends on).
static inline qg_status gr_move_many(gr_grid *g, gr_bits *bits, qg_index *index, const qg_jobs *jobs,
                                     const qg_handle *handles, const qg_rect *boxes, int32_t n)
{
    qg_alloc *alloc = &index->alloc;
    gr_batch *b = qg_mem_alloc(alloc, sizeof(gr_batch));
    uint8_t *moved = qg_mem_alloc(alloc, (size_t)n);
    int32_t *delta = qg_mem_alloc(alloc, (size_t)g->nrows * sizeof(int32_t));
    uint8_t *adds = qg_mem_alloc(alloc, (size_t)g->nrows);
    gr_change *changes = NULL;
    size_t changes_bytes = 0;
    qg_status s = QG_ERR_NOMEM;
    if (b == NULL || moved == NULL || delta == NULL || adds == NULL)
        goto out;
    b->g = g;
    b->base_boxes = index->boxes;
    b->handles = handles;
    b->boxes = boxes;
    b->moved = moved;
    b->n = n;
    b->parts = jobs != NULL && jobs->worker_count > 1 ? jobs->worker_count : 1;
    qg_jobs_run(jobs, gr_batch_classify, n, b);
    int32_t nchanges = 0;
    for (int32_t i = 0; i < n; ++i)
        nchanges += moved[i];
    changes_bytes = (size_t)nchanges * sizeof(gr_change);
    if (nchanges > 0 && (changes = qg_mem_alloc(alloc, changes_bytes)) == NULL)
        goto out;
    memset(delta, 0, (size_t)g->nrows * sizeof(int32_t));
    memset(adds, 0, (size_t)g->nrows);
    int64_t wide_net = 0;
    for (int32_t i = 0, c = 0; i < n; ++i) {
        if (!moved[i])
            continue;
        gr_change *m = &changes[c++];
        m->h = handles[i];
        m->ob = gr_map_box(g, index->boxes[m->h]);
        m->nb = gr_map_box(g, boxes[i]);
        m->ow = gr_is_wide(g, m->ob);
        m->nw = gr_is_wide(g, m->nb);
        wide_net += m->nw - m->ow;
        gr_batch_count(g, m, delta, adds);
        if (!m->nw)
            gr_reach_add(g, m->nb); // grow-only: harmless if the batch fails
    }
    qg_txn txn;
    qg_txn_begin(&txn, alloc);
    if (wide_net > 0 && !qg_txn_reserve(&txn, (void **)&g->wide, &g->wide_capacity, sizeof(int32_t),
                                        (int64_t)g->wide_count + wide_net))
        goto out;
    if (!gr_batch_reserve(g, alloc, delta, adds)) {
        qg_txn_rollback(&txn);
        goto out;
    }
    // Nothing can fail from here on. The bands are fixed before any row
    // changes (gr_band reads the rows' counts).
    s = QG_OK;
    b->changes = changes;
    b->nchanges = nchanges;
    for (int32_t p = 0; p < b->parts; ++p)
        gr_band(g, p, b->parts, &b->band[p], &b->band[p + 1]);
    qg_jobs_run(jobs, gr_batch_relink, b->parts, b);
    for (int32_t c = 0; c < nchanges; ++c) {
        const gr_change *m = &changes[c];
        if (m->ow && !m->nw)
            gr_wide_remove(g, m->h);
    }
    for (int32_t c = 0; c < nchanges; ++c) {
        const gr_change *m = &changes[c];
        if (m->nw && !m->ow)
            g->wide[g->wide_count++] = m->h;
    }
    if (bits != NULL) {
        // Each changed cell's bit from its list, in any order: a set or a
        // clear keeps the levels above consistent with level 1.
        for (int32_t c = 0; c < nchanges; ++c) {
            const gr_change *m = &changes[c];
            for (int w = 0; w < 2; ++w) {
                const gr_ibox r = w ? m->nb : m->ob;
                if (w ? m->nw : m->ow)
                    continue;
                const int32_t nx = gr_span(r.x0, r.x1, g->cols), ny = gr_span(r.y0, r.y1, g->nrows);
                for (int32_t k = 0; k < ny; ++k) {
                    const int32_t y = (r.y0 + k) & g->my;
                    const gr_row *row = &g->rows[y];
                    for (int32_t j = 0; j < nx; ++j) {
                        const int32_t x = (r.x0 + j) & g->mx;
                        if (row->cells != NULL && row->cells[x] >= 0)
                            gr_bits_set(bits, x, y);
                        else
                            gr_bits_clear(bits, x, y);
                    }
                }
            }
        }
    }
out:
    qg_mem_free(alloc, changes, changes_bytes);
    qg_mem_free(alloc, adds, (size_t)g->nrows);
    qg_mem_free(alloc, delta, (size_t)g->nrows * sizeof(int32_t));
    qg_mem_free(alloc, moved, (size_t)n);
    qg_mem_free(alloc, b, sizeof(gr_batch));
    return s;
}

/// qg_insert_many for both grids (bits: QG_MULTI_GRID's bitset, else NULL).
/// The boxes are bucketed by row, then each row's new nodes are written
/// cell by cell, so a cell's new nodes are contiguous (in handle order):
/// the walks of a ray cast or a nearest search, which follow a cell's list,
/// then read one or two cache lines per cell instead of a scattered node
/// per element (one-at-a-time inserts leave a row's nodes in insertion
/// order). A row holding free slots takes its nodes through its free list
/// as gr_link does. Every allocation comes first (the wide list through
/// txn, the rows with their undo records, the scratch arrays): QG_ERR_NOMEM
/// leaves the index unchanged.
static inline qg_status gr_insert_many(gr_grid *g, gr_bits *bits, qg_index *index, qg_txn *txn,
                                       const qg_handle *handles, int32_t n)
{
    qg_alloc *alloc = &index->alloc;
    const size_t nr = (size_t)g->nrows;
    int32_t *delta = qg_mem_alloc(alloc, nr * sizeof(int32_t));
    uint8_t *adds = qg_mem_alloc(alloc, nr);
    int32_t *start = qg_mem_alloc(alloc, (nr + 1) * sizeof(int32_t));
    int32_t *count = qg_mem_alloc(alloc, (size_t)g->cols * sizeof(int32_t));
    int32_t *items = NULL;
    size_t items_bytes = 0;
    qg_status s = QG_ERR_NOMEM;
    if (delta == NULL || adds == NULL || start == NULL || count == NULL)
        goto out;
    memset(delta, 0, nr * sizeof(int32_t));
    memset(adds, 0, nr);
    int64_t wide = 0, entries = 0;
    for (int32_t i = 0; i < n; ++i) {
        const gr_ibox b = gr_map_box(g, index->boxes[handles[i]]);
        if (gr_is_wide(g, b)) {
            wide++;
            continue;
        }
        const int32_t nx = gr_span(b.x0, b.x1, g->cols), ny = gr_span(b.y0, b.y1, g->nrows);
        for (int32_t k = 0; k < ny; ++k) {
            const int32_t y = (b.y0 + k) & g->my;
            delta[y] += nx;
            adds[y] = 1;
        }
        entries += ny;
    }
    // The (row, element) entries, bucketed by row.
    items_bytes = (size_t)entries * sizeof(int32_t);
    if (entries > INT32_MAX || (entries > 0 && (items = qg_mem_alloc(alloc, items_bytes)) == NULL))
        goto out;
    if (wide > 0 && !qg_txn_reserve(txn, (void **)&g->wide, &g->wide_capacity, sizeof(int32_t),
                                    (int64_t)g->wide_count + wide))
        goto out;
    if (!gr_batch_reserve(g, alloc, delta, adds))
        goto out; // the caller rolls txn back
    // Nothing can fail from here on.
    s = QG_OK;
    // Row bucket sizes: the boxes touching each row (delta counted nodes).
    memset(start, 0, (nr + 1) * sizeof(int32_t));
    for (int32_t i = 0; i < n; ++i) {
        const qg_handle h = handles[i];
        const gr_ibox b = gr_map_box(g, index->boxes[h]);
        if (gr_is_wide(g, b)) {
            g->wide[g->wide_count++] = h;
            continue;
        }
        gr_reach_add(g, b);
        for (int32_t k = 0, ny = gr_span(b.y0, b.y1, g->nrows); k < ny; ++k)
            start[((b.y0 + k) & g->my) + 1]++;
    }
    for (size_t y = 0; y < nr; ++y)
        start[y + 1] += start[y];
    for (int32_t i = 0; i < n; ++i) {
        const qg_handle h = handles[i];
        const gr_ibox b = gr_map_box(g, index->boxes[h]);
        if (gr_is_wide(g, b))
            continue;
        for (int32_t k = 0, ny = gr_span(b.y0, b.y1, g->nrows); k < ny; ++k)
            items[start[(b.y0 + k) & g->my]++] = h;
    }
    // start[y] is now where row y's bucket ends: row y's is [start[y - 1], start[y]).
    for (int32_t y = 0; y < g->nrows; ++y) {
        const int32_t i0 = y > 0 ? start[y - 1] : 0, i1 = start[y];
        if (i0 == i1)
            continue;
        gr_row *r = &g->rows[y];
        if (r->free_head >= 0) {
            for (int32_t i = i0; i < i1; ++i) {
                const qg_handle h = items[i];
                const gr_ibox b = gr_map_box(g, index->boxes[h]);
                for (int32_t j = 0, nx = gr_span(b.x0, b.x1, g->cols); j < nx; ++j) {
                    const int32_t x = (b.x0 + j) & g->mx;
                    if (gr_link(r, x, h) && bits != NULL)
                        gr_bits_set(bits, x, y);
                }
            }
            continue;
        }
        // Counting sort by cell: count[x] new nodes, then slots from high.
        memset(count, 0, (size_t)g->cols * sizeof(int32_t));
        for (int32_t i = i0; i < i1; ++i) {
            const gr_ibox b = gr_map_box(g, index->boxes[items[i]]);
            for (int32_t j = 0, nx = gr_span(b.x0, b.x1, g->cols); j < nx; ++j)
                count[(b.x0 + j) & g->mx]++;
        }
        const int32_t old_high = r->high; // == live: no free slot
        int32_t at = old_high;
        for (int32_t x = 0; x < g->cols; ++x) {
            const int32_t c = count[x];
            if (c == 0)
                continue;
            // Slots [at, at + c) chain in order onto the old list.
            for (int32_t j = 0; j < c; ++j)
                r->nodes[at + j].next = j + 1 < c ? at + j + 1 : r->cells[x];
            if (r->cells[x] < 0 && bits != NULL)
                gr_bits_set(bits, x, y);
            r->cells[x] = at;
            count[x] = at; // next slot to fill
            at += c;
        }
        r->high = at;
        r->live += at - old_high;
        for (int32_t i = i0; i < i1; ++i) {
            const qg_handle h = items[i];
            const gr_ibox b = gr_map_box(g, index->boxes[h]);
            for (int32_t j = 0, nx = gr_span(b.x0, b.x1, g->cols); j < nx; ++j)
                r->nodes[count[(b.x0 + j) & g->mx]++].element = h;
        }
    }
out:
    qg_mem_free(alloc, items, items_bytes);
    qg_mem_free(alloc, count, (size_t)g->cols * sizeof(int32_t));
    qg_mem_free(alloc, start, (nr + 1) * sizeof(int32_t));
    qg_mem_free(alloc, adds, nr);
    qg_mem_free(alloc, delta, nr * sizeof(int32_t));
    return s;
}

#endif
