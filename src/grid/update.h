// SPDX-License-Identifier: MIT
// The grid family's element updates: insert, remove and move, each grow-first
// (rows.h reserves, then links).
#ifndef QG_GRID_UPDATE_H
#define QG_GRID_UPDATE_H

#include "rows.h"

/* ---- kind operations shared by both grids -------------------------------- */

/// Takes h off the wide list (order kept deterministic: the last
/// entry takes its place).
static inline void gr_wide_remove(gr_grid *g, qg_handle h)
{
    for (int32_t i = 0; i < g->wide_count; ++i) {
        if (g->wide[i] == h) {
            g->wide[i] = g->wide[--g->wide_count];
            return;
        }
    }
}

static inline qg_status gr_insert(gr_grid *g, gr_bits *bits, qg_index *index, qg_txn *txn, qg_handle h,
                                  qg_rect box)
{
    const gr_ibox b = gr_map_box(g, box);
    if (gr_is_wide(g, b)) {
        if (!qg_txn_reserve(txn, (void **)&g->wide, &g->wide_capacity, sizeof(int32_t), (int64_t)g->wide_count + 1))
            return QG_ERR_NOMEM;
        g->wide[g->wide_count++] = h;
        return QG_OK;
    }
    if (!gr_reserve(g, &index->alloc, b, NULL))
        return QG_ERR_NOMEM;
    gr_link_box(g, bits, b, h);
    gr_reach_add(g, b);
    return QG_OK;
}

static inline void gr_remove(gr_grid *g, gr_bits *bits, const qg_index *index, qg_handle h)
{
    const gr_ibox b = gr_map_box(g, index->boxes[h]);
    if (gr_is_wide(g, b))
        gr_wide_remove(g, h);
    else
        gr_unlink_box(g, bits, b, h);
}

static inline qg_status gr_move(gr_grid *g, gr_bits *bits, qg_index *index, qg_txn *txn, qg_handle h,
                                qg_rect box)
{
#if defined(QV_HAVE)
    // The box kept as one vector: GCC would otherwise spill its two halves
    // and reload them as one (a store-forwarding stall on every move).
    const qv_f32 v = qg_rect_vec(box);
    const gr_ibox nb = gr_map_vec(g, v);
#else
    const gr_ibox nb = gr_map_box(g, box);
#endif
    const gr_ibox ob = gr_map_box(g, index->boxes[h]);
    if (!gr_ibox_equal(ob, nb)) {
        const bool ow = gr_is_wide(g, ob), nw = gr_is_wide(g, nb);
        if (ow && nw) {
            // still on the wide list
        } else if (nw) {
            if (!qg_txn_reserve(txn, (void **)&g->wide, &g->wide_capacity, sizeof(int32_t),
                                (int64_t)g->wide_count + 1))
                return QG_ERR_NOMEM;
            gr_unlink_box(g, bits, ob, h);
            g->wide[g->wide_count++] = h;
        } else if (ow) {
            if (!gr_reserve(g, &index->alloc, nb, NULL))
                return QG_ERR_NOMEM;
            gr_wide_remove(g, h);
            gr_link_box(g, bits, nb, h);
            gr_reach_add(g, nb);
        } else {
            if (!gr_reserve(g, &index->alloc, nb, &ob))
                return QG_ERR_NOMEM;
            gr_relink(g, bits, ob, nb, h);
            gr_reach_add(g, nb);
        }
    }
#if defined(QV_HAVE)
    qv_storef(&index->boxes[h].min_x, v);
#else
    index->boxes[h] = box;
#endif
    return QG_OK;
}

#endif
