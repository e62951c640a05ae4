// QG_BRUTE_FORCE: the oracle. The base's slot array (every box, a free list of
// handles) is the whole structure; queries and pairs are plain loops over it.
// Every test compares the other kinds with this file, so it stays obviously
// right: no tricks, no early outs beyond skipping free slots.
#include "index_internal.h"

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

static qg_status brute_force_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
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

static void brute_force_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    stats->nodes_visited = 1;
    stats->elements_tested = (int64_t)index->count * (index->count - 1) / 2;
    for (qg_handle a = 0; a < index->box_high; ++a) {
        if (!qg_slot_live(index, a))
            continue;
        for (qg_handle b = a + 1; b < index->box_high; ++b) {
            if (qg_slot_live(index, b) && qg_overlaps(index->boxes[a], index->boxes[b]) &&
                !fn(a, b, user))
                return;
        }
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

QG_KIND_CLASS(brute_force, QG_BRUTE_FORCE, qg_index);
