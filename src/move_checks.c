// SPDX-License-Identifier: MIT
// qg_move_many's checks: a map of the handles a batch names, per worker,
// merged at the end, so a handle listed twice is found without sorting. The
// dispatcher (index.c) runs them before a kind's batch move; a kind that
// checks in its own first pass (move_many_checked) uses them directly.
#include "kind.h"

/// The merge of the parts' maps: part p takes its share of the words and
/// notes whether two maps share a bit there (a handle two parts list).
typedef struct move_merge_task {
    const uint64_t *seen; ///< `maps` maps of `words` words
    size_t words;
    int32_t maps, parts;
    bool twice[QG_CHECK_PARTS];
} move_merge_task;

static void move_merge_part(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    move_merge_task *m = context;
    for (int32_t p = begin; p < end; ++p) {
        int64_t w0, w1;
        qg_part_range((int64_t)m->words, p, m->parts, &w0, &w1);
        bool twice = false;
        for (int64_t w = w0; w < w1; ++w) {
            uint64_t acc = 0;
            for (int32_t q = 0; q < m->maps; ++q) {
                const uint64_t v = m->seen[(size_t)q * m->words + (size_t)w];
                twice |= (acc & v) != 0;
                acc |= v;
            }
        }
        m->twice[p] = twice;
    }
}

/// True when two of the maps share a bit: a handle two parts listed.
static bool move_maps_share(const qg_jobs *jobs, const uint64_t *seen, size_t words, int32_t maps)
{
    move_merge_task m;
    m.seen = seen;
    m.words = words;
    m.maps = maps;
    m.parts = jobs == NULL ? 1 : jobs->worker_count < QG_CHECK_PARTS ? jobs->worker_count : QG_CHECK_PARTS;
    qg_jobs_run(m.parts > 1 ? jobs : NULL, move_merge_part, m.parts, &m);
    bool twice = false;
    for (int32_t p = 0; p < m.parts; ++p)
        twice |= m.twice[p];
    return twice;
}

qg_status qg_move_checks_begin(qg_move_checks *c, qg_index *index, int32_t workers, int32_t n)
{
    c->index = index;
    c->n = n;
    c->workers = workers;
    c->words = ((size_t)index->box_high + 63) / 64;
    const size_t bytes = (size_t)c->workers * c->words * sizeof(uint64_t);
    c->seen = qg_mem_alloc(&index->alloc, bytes);
    if (c->seen == NULL)
        return QG_ERR_NOMEM;
    memset(c->seen, 0, bytes);
    for (int32_t w = 0; w < c->workers; ++w) {
        c->w[w].bad = n;
        c->w[w].status = QG_OK;
        c->w[w].twice = false;
    }
    return QG_OK;
}

qg_status qg_move_checks_end(qg_move_checks *c, const qg_jobs *jobs)
{
    int32_t bad = c->n;
    qg_status status = QG_OK;
    bool twice = false;
    for (int32_t w = 0; w < c->workers; ++w) {
        if (c->w[w].bad < bad) {
            bad = c->w[w].bad;
            status = c->w[w].status;
        }
        twice |= c->w[w].twice;
    }
    if (status == QG_OK && !twice && c->workers > 1)
        twice = move_maps_share(jobs, c->seen, c->words, c->workers);
    qg_mem_free(&c->index->alloc, c->seen, (size_t)c->workers * c->words * sizeof(uint64_t));
    return status != QG_OK ? status : twice ? QG_ERR_INVALID : QG_OK;
}

