// SPDX-License-Identifier: MIT
// QG_BRUTE_FORCE: the oracle. The base's slot array (every box, a free list of
// handles) is the whole structure; queries and pairs are plain loops over it.
// Every test compares the other kinds with this file, so it stays obviously
// right: no tricks, no early outs beyond skipping free slots.
#include "state.h"

static qg_status brute_force_configure(qg_config *config)
{
    (void)config;
    return QG_OK;
}

static qg_status brute_force_init(qg_index *index)
{
    (void)index;
    return QG_OK;
}

static void brute_force_destroy(qg_index *index)
{
    (void)index;
}

static qg_status brute_force_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    (void)index, (void)txn, (void)h, (void)box;
    return QG_OK; // the base already stored the box
}

static void brute_force_remove(qg_index *index, qg_handle h)
{
    (void)index, (void)h;
}

static QG_NOINLINE qg_status brute_force_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    (void)txn;
    index->boxes[h] = box;
    return QG_OK;
}

static void brute_force_cleanup(qg_index *index)
{
    (void)index;
}

static void brute_force_clear(qg_index *index)
{
    (void)index;
}

static void brute_force_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                              qg_query_stats *stats)
{
    stats->nodes_visited = 1;
    stats->elements_tested = index->count;
    for (qg_handle h = 0; h < index->box_high; ++h) {
        if (qg_slot_live(index, h) && qg_overlaps(index->boxes[h], area) && !fn(h, user))
            return;
    }
}

/// Pairs (a, b), a < b, with a in [from, to).
static void bf_pairs_from(const qg_index *index, qg_handle from, qg_handle to, qg_pair_fn *fn, void *user)
{
    for (qg_handle a = from; a < to; ++a) {
        if (!qg_slot_live(index, a))
            continue;
        for (qg_handle b = a + 1; b < index->box_high; ++b) {
            if (qg_slot_live(index, b) && qg_overlaps(index->boxes[a], index->boxes[b]) &&
                !fn(a, b, user))
                return;
        }
    }
}

static void brute_force_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    stats->nodes_visited = 1;
    stats->elements_tested = (int64_t)index->count * (index->count - 1) / 2;
    bf_pairs_from(index, 0, index->box_high, fn, user);
}

/// Row a tests the n - 1 - a handles after it: part p takes the rows where
/// the triangle's area reaches p/parts of the whole, so the parts test
/// about as many pairs each.
static qg_handle bf_split(int64_t n, int32_t part, int32_t parts)
{
    if (part >= parts)
        return (qg_handle)n;
    const double left = (double)(parts - part) / parts; // share of the area after the split
    const double a = (double)n * (1.0 - sqrt(left));
    return (qg_handle)(a < 0 ? 0 : a > (double)n ? (double)n : a);
}

static void brute_force_pairs_part(const qg_index *index, int32_t part, int32_t parts, qg_pair_fn *fn, void *user,
                                   qg_query_stats *stats)
{
    const qg_handle from = bf_split(index->box_high, part, parts), to = bf_split(index->box_high, part + 1, parts);
    stats->nodes_visited = part == 0;
    for (qg_handle a = from; a < to; ++a)
        stats->elements_tested += index->box_high - 1 - a;
    bf_pairs_from(index, from, to, fn, user);
}

/// Every element against the segment: the oracle stays the plainest loop.
static void brute_force_raycast(const qg_index *index, float ox, float oy, float dx, float dy, float max_t,
                                qg_ray_fn *fn, void *user)
{
    for (qg_handle h = 0; h < index->box_high; ++h) {
        float t;
        if (!qg_slot_live(index, h) || !qg_ray_box(index->boxes[h], ox, oy, dx, dy, max_t, &t))
            continue;
        const float m = fn(h, t, user);
        if (!(m >= 0.0f))
            return;
        max_t = m < max_t ? m : max_t;
    }
}

static void brute_force_stats(const qg_index *index, qg_stats *stats)
{
    (void)index;
    stats->nodes = 1;
    stats->leaves = 1;
    stats->max_depth_reached = 0;
}

static void brute_force_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    fn(index->config.bounds, 0, index->count, user);
}

static qg_status brute_force_validate(const qg_index *index, size_t *bytes)
{
    (void)index, (void)bytes;
    return QG_OK;
}

/// The base is the whole structure, and snapshot.c walks the base.
static void brute_force_state(qg_state *s, qg_index *d, const qg_index *src)
{
    (void)s, (void)d, (void)src;
}

QG_KIND_CLASS_EX(brute_force, QG_BRUTE_FORCE, qg_index, .state = brute_force_state, .pairs_part = brute_force_pairs_part,
                 .raycast = brute_force_raycast);
