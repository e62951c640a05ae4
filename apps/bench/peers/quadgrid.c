/* The quadgrid kinds behind the bench interface: exactly the calls the
 * workload definition names (qg_insert plus one qg_cleanup to build, qg_move
 * for every handle plus one qg_cleanup per frame, qg_pairs, qg_query),
 * nothing kind-specific. */
#include "peer.h"

#include <stdio.h>
#include <stdlib.h>

struct bench_impl {
    qg_index *index;
    qg_handle *handle_of;  /* agent -> handle */
    int32_t *agent_of;     /* handle -> agent; NULL while handle == agent */
    int32_t n, agent_of_len;
    const qg_jobs *jobs; /* --threads: NULL = one thread */
    qg_status status;
    const char *what;
    char err[96];
};

static bool fail(bench_impl *s, const char *what, qg_status st) {
    s->what = what;
    s->status = st;
    return false;
}

static bool qgb_create(bench_impl **out, const bench_setup *setup, const void *arg) {
    qg_kind kind = *(const qg_kind *)arg;
    bench_impl *s = calloc(1, sizeof *s);
    if (!s) return false;
    *out = s;
    qg_config cfg = qg_default_config(kind);
    cfg.bounds = setup->bounds;
    cfg.element_size = setup->element_size;
    cfg.max_element_size = setup->max_element_size;
    cfg.max_depth = setup->max_depth;
    cfg.leaf_capacity = setup->leaf_capacity;
    cfg.cell_size = setup->cell_size;
    s->jobs = setup->jobs;
    qg_status st = qg_create(&cfg, &s->index);
    if (st != QG_OK) return fail(s, "qg_create", st);
    size_t count = setup->n > 0 ? (size_t)setup->n : 1;
    s->handle_of = malloc(count * sizeof *s->handle_of);
    if (!s->handle_of) return fail(s, "malloc", QG_ERR_NOMEM);
    return true;
}

static bool qgb_build(bench_impl *s, const qg_rect *boxes, int32_t n, bool bulk) {
    (void)bulk; /* quadgrid has no bulk load: inserts are the build */
    qg_handle max_handle = -1;
    bool identity = true;
    for (int32_t i = 0; i < n; i++) {
        qg_handle h = qg_insert(s->index, boxes[i]);
        if (h < 0) return fail(s, "qg_insert", (qg_status)h);
        s->handle_of[i] = h;
        identity = identity && h == i;
        if (h > max_handle) max_handle = h;
    }
    /* The build ends with the once-a-frame upkeep, as an application's
     * first frame would: kinds that defer work (the point grid's sort of
     * its newest inserts) start the queries in their settled state. */
    qg_cleanup(s->index);
    s->n = n;
    if (!identity) {
        /* The contract does not promise handles 0..n-1 from a fresh index;
         * map them back so pairs are named by agent as the workload says. */
        s->agent_of_len = max_handle + 1;
        s->agent_of = malloc((size_t)s->agent_of_len * sizeof *s->agent_of);
        if (!s->agent_of) return fail(s, "malloc", QG_ERR_NOMEM);
        for (int32_t i = 0; i < n; i++) s->agent_of[s->handle_of[i]] = i;
    }
    return true;
}

static bool qgb_update(bench_impl *s, const qg_rect *boxes, int32_t n) {
    qg_index *index = s->index;
    const qg_handle *handle_of = s->handle_of;
    if (s->jobs != NULL) {
        /* Several cores: the batch form of the same moves and cleanup. */
        qg_status st = qg_move_many(index, s->jobs, handle_of, boxes, n);
        if (st != QG_OK) return fail(s, "qg_move_many", st);
        qg_cleanup_parallel(index, s->jobs);
        return true;
    }
    for (int32_t i = 0; i < n; i++) {
        qg_status st = qg_move(index, handle_of[i], boxes[i]);
        if (st != QG_OK) return fail(s, "qg_move", st);
    }
    qg_cleanup(index);
    return true;
}

typedef struct map_ctx {
    const int32_t *agent_of;
    qg_pair_fn *fn;
    qg_query_fn *qfn;
    void *user;
} map_ctx;

static bool map_pair(qg_handle a, qg_handle b, void *user) {
    map_ctx *m = user;
    int32_t i = m->agent_of[a], j = m->agent_of[b];
    return i < j ? m->fn(i, j, m->user) : m->fn(j, i, m->user);
}

static bool map_query(qg_handle h, void *user) {
    map_ctx *m = user;
    return m->qfn(m->agent_of[h], m->user);
}

static bool qgb_pairs(bench_impl *s, qg_pair_fn *fn, void *user) {
    qg_status st;
    if (!s->agent_of) {
        st = qg_pairs(s->index, fn, user);
    } else {
        map_ctx m = {s->agent_of, fn, NULL, user};
        st = qg_pairs(s->index, map_pair, &m);
    }
    return st == QG_OK || fail(s, "qg_pairs", st);
}

/* Each part maps its own pairs back to agents: one map_ctx a part. */
enum { QGB_MAX_PARTS = 256 };

static bool qgb_pairs_parts(bench_impl *s, qg_pair_fn *fn, void *const *users) {
    qg_status st;
    if (!s->agent_of) {
        st = qg_pairs_parallel(s->index, s->jobs, fn, users, NULL);
    } else {
        const int32_t parts = s->jobs ? s->jobs->worker_count : 1;
        if (parts > QGB_MAX_PARTS) return fail(s, "qg_pairs_parallel", QG_ERR_INVALID);
        map_ctx m[QGB_MAX_PARTS];
        void *mu[QGB_MAX_PARTS];
        for (int32_t p = 0; p < parts; p++) {
            m[p] = (map_ctx){s->agent_of, fn, NULL, users[p]};
            mu[p] = &m[p];
        }
        st = qg_pairs_parallel(s->index, s->jobs, map_pair, mu, NULL);
    }
    return st == QG_OK || fail(s, "qg_pairs_parallel", st);
}

static bool qgb_query(bench_impl *s, qg_rect area, qg_query_fn *fn, void *user) {
    qg_status st;
    if (!s->agent_of) {
        st = qg_query(s->index, area, fn, user);
    } else {
        map_ctx m = {s->agent_of, NULL, fn, user};
        st = qg_query(s->index, area, map_query, &m);
    }
    return st == QG_OK || fail(s, "qg_query", st);
}

static size_t qgb_bytes(bench_impl *s) {
    return qg_get_stats(s->index).memory_bytes;
}

static void qgb_destroy(bench_impl *s) {
    if (!s) return;
    qg_destroy(s->index);
    free(s->handle_of);
    free(s->agent_of);
    free(s);
}

static const char *qgb_error(bench_impl *s) {
    if (!s->what) return NULL;
    snprintf(s->err, sizeof s->err, "%s: %s", s->what, qg_status_name(s->status));
    return s->err;
}

static bool qgb_query_stats(bench_impl *s, qg_rect area, qg_query_fn *fn, void *user, qg_query_stats *stats) {
    qg_status st;
    if (!s->agent_of) {
        st = qg_query_with_stats(s->index, area, fn, user, stats);
    } else {
        map_ctx m = {s->agent_of, NULL, fn, user};
        st = qg_query_with_stats(s->index, area, map_query, &m, stats);
    }
    return st == QG_OK || fail(s, "qg_query", st);
}

const bench_vtable bench_quadgrid_vtable = {
    qgb_create, qgb_build, qgb_update, qgb_pairs, qgb_query, qgb_bytes, qgb_destroy, qgb_error, qgb_query_stats,
    qgb_pairs_parts,
};
