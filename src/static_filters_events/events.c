// SPDX-License-Identifier: MIT
// Overlap events: qg_pair_events compares this call's pairs with the last
// call's (both sorted keys a << 32 | b) and reports what began and ended.
#include "engine.h"

typedef struct collect_ctx {
    qg_alloc *alloc;
    uint64_t *keys;
    int32_t n, cap;
    bool failed;
} collect_ctx;

static bool collect_pair(qg_handle a, qg_handle b, void *user)
{
    collect_ctx *c = user;
    if (c->n == c->cap) {
        const int64_t cap = c->cap < 512 ? 1024 : 2 * (int64_t)c->cap;
        uint64_t *k = cap <= INT32_MAX ? qg_mem_resize(c->alloc, c->keys, (size_t)c->cap * sizeof(uint64_t),
                                                       (size_t)cap * sizeof(uint64_t))
                                       : NULL;
        if (k == NULL) {
            c->failed = true;
            return false;
        }
        c->keys = k;
        c->cap = (int32_t)cap;
    }
    c->keys[c->n++] = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    return true;
}

static bool event_dead(const qg_engine *e, uint64_t key)
{
    return e->cleared || ((e->flags[key >> 32] | e->flags[(uint32_t)key]) & QG_F_REBORN);
}

qg_status qg_pair_events(qg_index *index, qg_pair_fn *began, qg_pair_fn *ended, void *user)
{
    if (index == NULL)
        return QG_ERR_INVALID;
    const bool created = index->engine == NULL;
    qg_engine *e = qg_engine_get(index);
    if (e == NULL)
        return QG_ERR_NOMEM;
    collect_ctx c = {&index->alloc, NULL, 0, 0, false};
    qg_query_stats stats = {0, 0};
    if (qg_live_count(index) > 1) {
        // Room for about the last call's pairs up front: frame to frame the
        // set changes little, so the collection rarely grows.
        const int64_t cap = (int64_t)e->prev_count + e->prev_count / 8 + 1024;
        c.keys = cap <= INT32_MAX ? qg_mem_alloc(&index->alloc, (size_t)cap * sizeof(uint64_t)) : NULL;
        c.cap = c.keys != NULL ? (int32_t)cap : 0;
        c.failed = c.keys == NULL;
        if (!c.failed)
            qg_engine_pairs_part(index, 0, 1, collect_pair, &c, &stats);
    }
    uint64_t *scratch = NULL;
    if (!c.failed && c.n > 1) {
        scratch = qg_mem_alloc(&index->alloc, (size_t)c.n * sizeof(uint64_t));
        c.failed = scratch == NULL;
    }
    if (c.failed) {
        qg_mem_free(&index->alloc, c.keys, (size_t)c.cap * sizeof(uint64_t));
        qg_engine_drop_if_new(index, created);
        return QG_ERR_NOMEM;
    }
    if (c.n > 1) {
        qg_engine_radix_sort(c.keys, scratch, c.n, 0);
        qg_mem_free(&index->alloc, scratch, (size_t)c.n * sizeof(uint64_t));
    }
    // Both lists sorted: one merge walk. A pair in both lists whose element
    // was removed since (its handle reused) ended and began again.
    int32_t i = 0, j = 0;
    while (i < e->prev_count || j < c.n) {
        const uint64_t p = i < e->prev_count ? e->prev[i] : UINT64_MAX;
        const uint64_t q = j < c.n ? c.keys[j] : UINT64_MAX;
        if (p < q || (p == q && event_dead(e, p))) {
            if (ended != NULL)
                ended((qg_handle)(p >> 32), (qg_handle)(uint32_t)p, user);
            i++;
        } else if (q < p) {
            if (began != NULL)
                began((qg_handle)(q >> 32), (qg_handle)(uint32_t)q, user);
            j++;
        } else {
            i++;
            j++;
        }
    }
    qg_mem_free(&index->alloc, e->prev, (size_t)e->prev_cap * sizeof(uint64_t));
    e->prev = c.keys;
    e->prev_cap = c.cap;
    e->prev_count = c.n;
    for (int32_t h = 0; e->reborn > 0 && h < e->flags_cap; ++h)
        e->flags[h] &= (uint8_t)~QG_F_REBORN;
    e->reborn = 0;
    e->cleared = false;
    e->events = true;
    return QG_OK;
}

