// SPDX-License-Identifier: MIT
// QG_LOOSE_GRID's invariants and bytes (qg_validate): every loose and tight
// cell, item, link and free list checked against the layout of loose_grid.h.
#include "loose_grid.h"

qg_status qg_lg_validate(const qg_index *index, size_t *bytes)
{
    const loose_grid *g = (const loose_grid *)index;
    const int32_t nl = g->lcols * g->lrows, nt = g->tcols * g->trows;
    if (nl < 1 || nl > g->loose_capacity || nt < 1 || nt > g->tight_capacity || g->start_capacity < nl + 1 ||
        g->count_capacity < nl || !(g->wx0 < g->wx1) || !(g->wy0 < g->wy1) ||
        g->tcols != (g->lcols + LG_TIGHT_RATIO - 1) / LG_TIGHT_RATIO ||
        g->trows != (g->lrows + LG_TIGHT_RATIO - 1) / LG_TIGHT_RATIO)
        return QG_ERR_INVALID;
    if (index->box_high > 0 && g->cell_capacity < index->box_high)
        return QG_ERR_INVALID;
    if (g->item_high < 0 || g->item_high > g->items_capacity || g->item_high > g->next_capacity ||
        g->packed < 0 || g->packed > g->item_high || g->start[0] != 0 || g->start[nl] != g->packed)
        return QG_ERR_INVALID;
    for (int32_t i = 0; i < nl; ++i) {
        if (g->start[i] > g->start[i + 1] || g->count[i] != 0)
            return QG_ERR_INVALID;
    }
    // Items: every live one names a live element, each element once (the
    // items' handle terms sum to the live elements'; a handle twice and
    // another missing would need two 64-bit mixes to cancel). That each is
    // in the list its `cell` names is the list walk's check below: the
    // lists hold live items only, none twice (a cycle or two joined lists
    // fail the length or the cell test), as many as there are live items.
    int64_t live = 0, holes_after = 0;
    uint64_t sum = 0, want = 0;
    for (int32_t k = 0; k < g->item_high; ++k) {
        const qg_handle h = g->items[k].h;
        if (h < 0) {
            holes_after += k >= g->packed;
            continue;
        }
        if (!qg_slot_live(index, h) || (int32_t)(g->cell[h] & LG_CELL_MASK) >= nl)
            return QG_ERR_INVALID;
        sum += qg_handle_term(h);
        live++;
    }
    for (qg_handle h = 0; h < index->box_high; ++h)
        want += qg_slot_live(index, h) ? qg_handle_term(h) : 0;
    if (live != index->count || sum != want)
        return QG_ERR_INVALID;
    int64_t free_items = 0;
    for (int32_t k = g->free_item; k >= 0; k = g->next[k]) {
        if (k < g->packed || k >= g->item_high || g->items[k].h >= 0 || ++free_items > holes_after)
            return QG_ERR_INVALID;
    }
    if (free_items != holes_after)
        return QG_ERR_INVALID;
    // Lists: each holds count items at most, each inside its loose box, and
    // with the margin unless it moved since the last cleanup.
    int64_t listed = 0, expected_links = 0;
    for (int32_t i = 0; i < nl; ++i) {
        const lg_loose *c = &g->loose[i];
        int64_t len = 0;
        for (int32_t k = c->head; k >= 0; k = g->next[k]) {
            if (++len > index->count || k >= g->item_high || g->items[k].h < 0)
                return QG_ERR_INVALID;
            const qg_handle h = g->items[k].h;
            const qg_rect b = index->boxes[h];
            if ((g->cell[h] & LG_CELL_MASK) != (uint32_t)i || lg_loose_of(g, b) != i || !lg_inside_loose(b, c) ||
                ((g->cell[h] >> LG_CELL_BITS) != g->epoch && !lg_inside_loose(lg_fatten(g, b), c)))
                return QG_ERR_INVALID;
            if (g->fresh && (k != g->start[i] + len - 1 ||
                             memcmp(&g->items[k].box, &b, sizeof b) != 0))
                return QG_ERR_INVALID;
        }
        if (g->fresh && len != g->start[i + 1] - g->start[i])
            return QG_ERR_INVALID;
        listed += len;
        if ((c->l <= c->r) != (c->t <= c->b) || isnan(c->l) || isnan(c->t) || isnan(c->r) || isnan(c->b))
            return QG_ERR_INVALID;
        expected_links += lg_range_size(lg_cell_range(g, c));
    }
    if (listed != index->count || (g->fresh && (g->packed != index->count || g->item_high != g->packed)))
        return QG_ERR_INVALID;
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
            // (bounded as the walk itself: hostile snapshot bytes may send
            // the rest of the list out of the pool or round a cycle)
            int64_t after = links;
            for (int32_t f = g->links.data[e].next; f >= 0; f = g->links.data[f].next) {
                if (f >= g->links.high || ++after > g->links.live || g->links.data[f].element == i)
                    return QG_ERR_INVALID;
            }
        }
    }
    if (links != g->links.live || links != expected_links ||
        qg_enode_free_count(&g->links) != g->links.high - g->links.live)
        return QG_ERR_INVALID;
    *bytes += (size_t)g->loose_capacity * sizeof(lg_loose) + (size_t)g->tight_capacity * sizeof(int32_t) +
              (size_t)g->links.capacity * sizeof(qg_enode) + (size_t)g->start_capacity * sizeof(int32_t) +
              (size_t)g->count_capacity * sizeof(int32_t) + (size_t)g->cell_capacity * sizeof(uint32_t) +
              (size_t)g->items_capacity * sizeof(lg_item) + (size_t)g->next_capacity * sizeof(int32_t);
    return QG_OK;
}
