// SPDX-License-Identifier: MIT
/* The quadgrid kinds behind the bench interface: exactly the calls the
 * workload definition names (qg_insert plus one qg_cleanup to build, or
 * qg_insert_many plus one qg_cleanup for the bulk build of static, rays and
 * knn; qg_move for every handle plus one qg_cleanup per frame, qg_pairs,
 * qg_query, qg_raycast, qg_nearest), nothing kind-specific. */
#include "peer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bench_impl {
    qg_index *index;
    qg_handle *handle_of;  /* agent -> handle */
    int32_t *agent_of;     /* handle -> agent; NULL while handle == agent */
    int32_t n, agent_of_len;
    const qg_jobs *jobs; /* --threads: NULL = one thread */
    /* nearest with handles that are not agents: qg_nearest's answers,
     * mapped and re-sorted by agent (grown on demand) */
    qg_handle *near_h;
    float *near_d2;
    int32_t near_cap;
    qg_status status;
    const char *what;
    char err[96];
};

static bool fail(bench_impl *s, const char *what, qg_status st) {
    s->what = what;
    s->status = st;
    return false;
}

/* The index of a run: the kind's defaults, with the bench's bounds and
 * tuning as --config says (default: nothing set; every workload, level
 * included, configures it the same way). */
static qg_status bench_index(const bench_setup *setup, const void *arg, qg_index **index) {
    qg_config cfg = qg_default_config(*(const qg_kind *)arg);
    if (setup->config_mode == BENCH_CONFIG_DEFAULT) return qg_create(&cfg, index);
    cfg.bounds = setup->bounds;
    if (setup->config_mode == BENCH_CONFIG_BOUNDS) return qg_create(&cfg, index);
    cfg.element_size = setup->element_size;
    cfg.max_element_size = setup->max_element_size;
    cfg.max_depth = setup->max_depth;
    cfg.leaf_capacity = setup->leaf_capacity;
    cfg.cell_size = setup->cell_size;
    return qg_create(&cfg, index);
}

static bool qgb_create(bench_impl **out, const bench_setup *setup, const void *arg) {
    bench_impl *s = calloc(1, sizeof *s);
    if (!s) return false;
    *out = s;
    s->jobs = setup->jobs;
    qg_status st = bench_index(setup, arg, &s->index);
    if (st != QG_OK) return fail(s, "qg_create", st);
    size_t count = setup->n > 0 ? (size_t)setup->n : 1;
    s->handle_of = malloc(count * sizeof *s->handle_of);
    if (!s->handle_of) return fail(s, "malloc", QG_ERR_NOMEM);
    return true;
}

static bool qgb_build(bench_impl *s, const qg_rect *boxes, int32_t n, bool bulk) {
    qg_handle max_handle = -1;
    bool identity = true;
    if (bulk) {
        /* The static workload's build (and rays', knn's): one
         * qg_insert_many, which kinds may build in bulk. */
        qg_status st = qg_insert_many(s->index, boxes, n, s->handle_of);
        if (st != QG_OK) return fail(s, "qg_insert_many", st);
    }
    for (int32_t i = 0; i < n; i++) {
        qg_handle h = bulk ? s->handle_of[i] : qg_insert(s->index, boxes[i]);
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
    free(s->near_h);
    free(s->near_d2);
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

/* ---- rays and knn: qg_raycast and qg_nearest ---------------------------- */

typedef struct ray_ctx {
    const int32_t *agent_of; /* NULL: handle == agent */
    float max_t;
    qg_query_fn *fn;
    void *user;
    int32_t best;
    float best_t;
} ray_ctx;

/* All hits: every element qg_ray_box accepts, max_t kept. */
static float ray_all_cb(qg_handle h, float t, void *user) {
    ray_ctx *r = user;
    (void)t;
    r->fn(r->agent_of ? r->agent_of[h] : h, r->user);
    return r->max_t;
}

/* Closest hit: max_t shrinks to t; qg_raycast still reports every element at
 * that t, so the tie goes to the smaller agent. */
static float ray_closest_cb(qg_handle h, float t, void *user) {
    ray_ctx *r = user;
    int32_t i = r->agent_of ? r->agent_of[h] : h;
    if (r->best < 0 || t < r->best_t || (t == r->best_t && i < r->best)) {
        r->best = i;
        r->best_t = t;
    }
    return r->best_t;
}

static bool qgb_ray_all(bench_impl *s, const bench_ray *ray, qg_query_fn *fn, void *user) {
    ray_ctx r = {s->agent_of, ray->max_t, fn, user, -1, 0.0f};
    qg_status st = qg_raycast(s->index, ray->ox, ray->oy, ray->dx, ray->dy, ray->max_t, ray_all_cb, &r);
    return st == QG_OK || fail(s, "qg_raycast", st);
}

static bool qgb_ray_closest(bench_impl *s, const bench_ray *ray, int32_t *hit, float *t) {
    ray_ctx r = {s->agent_of, ray->max_t, NULL, NULL, -1, 0.0f};
    qg_status st = qg_raycast(s->index, ray->ox, ray->oy, ray->dx, ray->dy, ray->max_t, ray_closest_cb, &r);
    *hit = r.best;
    *t = r.best_t;
    return st == QG_OK || fail(s, "qg_raycast", st);
}

static int cmp_near(const void *a, const void *b) {
    const int32_t *x = a, *y = b; /* (d2 bits, agent): d2 >= 0, so bits order */
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] > y[1]) - (x[1] < y[1]);
}

static bool qgb_nearest(bench_impl *s, float x, float y, int32_t k, int32_t *out, float *d2, int32_t *found) {
    if (!s->agent_of) {
        qg_status st = qg_nearest(s->index, x, y, k, INFINITY, out, d2, found);
        return st == QG_OK || fail(s, "qg_nearest", st);
    }
    /* Handles are not agents: qg_nearest breaks ties by handle, the workload
     * by agent. Ask for more until the k-th distance is passed (or every
     * element is in), then re-sort by (d2, agent). */
    for (int32_t m = k;; m *= 2) {
        if (m > s->near_cap) {
            qg_handle *h = realloc(s->near_h, (size_t)m * 2 * sizeof *h);
            if (h) s->near_h = h;
            float *dd = realloc(s->near_d2, (size_t)m * sizeof *dd);
            if (dd) s->near_d2 = dd;
            if (!h || !dd) return fail(s, "malloc", QG_ERR_NOMEM);
            s->near_cap = m;
        }
        int32_t got = 0;
        qg_status st = qg_nearest(s->index, x, y, m, INFINITY, s->near_h, s->near_d2, &got);
        if (st != QG_OK) return fail(s, "qg_nearest", st);
        if (got < m || k == 0 || s->near_d2[got - 1] > s->near_d2[k - 1]) {
            int32_t *pairs = (int32_t *)s->near_h; /* room for 2m: rewrite back to front */
            for (int32_t i = got - 1; i >= 0; i--) {
                float dv = s->near_d2[i];
                int32_t bits;
                memcpy(&bits, &dv, sizeof bits);
                int32_t agent = s->agent_of[s->near_h[i]];
                pairs[2 * i] = bits;
                pairs[2 * i + 1] = agent;
            }
            qsort(pairs, (size_t)got, 2 * sizeof *pairs, cmp_near);
            *found = got < k ? got : k;
            for (int32_t i = 0; i < *found; i++) {
                out[i] = pairs[2 * i + 1];
                if (d2) memcpy(&d2[i], &pairs[2 * i], sizeof *d2);
            }
            return true;
        }
    }
}

const bench_vtable bench_quadgrid_vtable = {
    qgb_create, qgb_build, qgb_update, qgb_pairs, qgb_query, qgb_bytes, qgb_destroy, qgb_error, qgb_query_stats,
    qgb_pairs_parts, qgb_ray_all, qgb_ray_closest, qgb_nearest,
};

/* ---- level: tiles static, agents dynamic ---------------------------------
 *
 * One index: the tiles inserted with qg_insert_many and each marked with
 * qg_set_static, then the agents inserted; every frame qg_move for each
 * agent (qg_move_many on --threads' workers) and one qg_cleanup, then
 * qg_pairs (qg_pairs_parallel), or qg_pair_events for --events. The index
 * pairs no two static elements: the bench asks for nothing to be dropped. */

struct bench_level {
    qg_index *index;
    qg_handle *handle_of; /* element -> handle */
    int32_t *elem_of;     /* handle -> element; NULL while handle == element */
    int32_t s, a;
    const qg_jobs *jobs;
    qg_status status;
    const char *what;
    char err[96];
};

static bool lfail(bench_level *l, const char *what, qg_status st) {
    l->what = what;
    l->status = st;
    return false;
}

static bool qgl_create(bench_level **out, const bench_setup *setup, const void *arg) {
    bench_level *l = calloc(1, sizeof *l);
    if (!l) return false;
    *out = l;
    l->jobs = setup->jobs;
    qg_status st = bench_index(setup, arg, &l->index);
    return st == QG_OK || lfail(l, "qg_create", st);
}

static bool qgl_build(bench_level *l, const qg_rect *tiles, int32_t s, const qg_rect *agents, int32_t a) {
    const int32_t n = s + a;
    l->handle_of = malloc(((size_t)n + 1) * sizeof *l->handle_of);
    if (!l->handle_of) return lfail(l, "malloc", QG_ERR_NOMEM);
    qg_status st = qg_insert_many(l->index, tiles, s, l->handle_of);
    if (st != QG_OK) return lfail(l, "qg_insert_many", st);
    for (int32_t i = 0; i < s; i++) {
        st = qg_set_static(l->index, l->handle_of[i], true);
        if (st != QG_OK) return lfail(l, "qg_set_static", st);
    }
    st = qg_insert_many(l->index, agents, a, l->handle_of + s);
    if (st != QG_OK) return lfail(l, "qg_insert_many", st);
    qg_cleanup(l->index);
    l->s = s, l->a = a;
    qg_handle max_handle = -1;
    bool identity = true;
    for (int32_t i = 0; i < n; i++) {
        identity = identity && l->handle_of[i] == i;
        if (l->handle_of[i] > max_handle) max_handle = l->handle_of[i];
    }
    if (!identity) {
        l->elem_of = malloc(((size_t)max_handle + 1) * sizeof *l->elem_of);
        if (!l->elem_of) return lfail(l, "malloc", QG_ERR_NOMEM);
        for (int32_t i = 0; i < n; i++) l->elem_of[l->handle_of[i]] = i;
    }
    return true;
}

static bool qgl_update(bench_level *l, const qg_rect *agents, int32_t a) {
    const qg_handle *handle_of = l->handle_of + l->s;
    if (l->jobs != NULL) {
        qg_status st = qg_move_many(l->index, l->jobs, handle_of, agents, a);
        if (st != QG_OK) return lfail(l, "qg_move_many", st);
        qg_cleanup_parallel(l->index, l->jobs);
        return true;
    }
    for (int32_t k = 0; k < a; k++) {
        qg_status st = qg_move(l->index, handle_of[k], agents[k]);
        if (st != QG_OK) return lfail(l, "qg_move", st);
    }
    qg_cleanup(l->index);
    return true;
}

/* Handles back to elements, smaller first. */
typedef struct lmap_ctx {
    const int32_t *elem_of;
    qg_pair_fn *fn, *fn2;
    void *user;
} lmap_ctx;

static bool lmap_pair(qg_handle a, qg_handle b, void *user) {
    const lmap_ctx *m = user;
    int32_t i = m->elem_of[a], j = m->elem_of[b];
    return i < j ? m->fn(i, j, m->user) : m->fn(j, i, m->user);
}

static bool lmap_ended(qg_handle a, qg_handle b, void *user) {
    const lmap_ctx *m = user;
    int32_t i = m->elem_of[a], j = m->elem_of[b];
    return i < j ? m->fn2(i, j, m->user) : m->fn2(j, i, m->user);
}

static bool qgl_pairs(bench_level *l, qg_pair_fn *fn, void *user) {
    qg_status st;
    if (!l->elem_of) {
        st = qg_pairs(l->index, fn, user);
    } else {
        lmap_ctx m = {l->elem_of, fn, NULL, user};
        st = qg_pairs(l->index, lmap_pair, &m);
    }
    return st == QG_OK || lfail(l, "qg_pairs", st);
}

static bool qgl_events(bench_level *l, qg_pair_fn *began, qg_pair_fn *ended, void *user) {
    qg_status st;
    if (!l->elem_of) {
        st = qg_pair_events(l->index, began, ended, user);
    } else {
        /* The bench never removes an element, so every handle an event
         * names is still mapped. */
        lmap_ctx m = {l->elem_of, began, ended, user};
        st = qg_pair_events(l->index, began ? lmap_pair : NULL, ended ? lmap_ended : NULL, &m);
    }
    return st == QG_OK || lfail(l, "qg_pair_events", st);
}

static bool qgl_pairs_parts(bench_level *l, qg_pair_fn *fn, void *const *users) {
    qg_status st;
    if (!l->elem_of) {
        st = qg_pairs_parallel(l->index, l->jobs, fn, users, NULL);
    } else {
        const int32_t parts = l->jobs ? l->jobs->worker_count : 1;
        if (parts > QGB_MAX_PARTS) return lfail(l, "qg_pairs_parallel", QG_ERR_INVALID);
        lmap_ctx m[QGB_MAX_PARTS];
        void *mu[QGB_MAX_PARTS];
        for (int32_t p = 0; p < parts; p++) {
            m[p] = (lmap_ctx){l->elem_of, fn, NULL, users[p]};
            mu[p] = &m[p];
        }
        st = qg_pairs_parallel(l->index, l->jobs, lmap_pair, mu, NULL);
    }
    return st == QG_OK || lfail(l, "qg_pairs_parallel", st);
}

static size_t qgl_bytes(bench_level *l) {
    return qg_get_stats(l->index).memory_bytes;
}

static void qgl_destroy(bench_level *l) {
    if (!l) return;
    qg_destroy(l->index);
    free(l->handle_of);
    free(l->elem_of);
    free(l);
}

static const char *qgl_error(bench_level *l) {
    if (!l->what) return NULL;
    snprintf(l->err, sizeof l->err, "%s: %s", l->what, qg_status_name(l->status));
    return l->err;
}

const bench_level_vtable bench_quadgrid_level_vtable = {
    qgl_create, qgl_build, qgl_update, qgl_pairs, qgl_events, qgl_pairs_parts, qgl_bytes, qgl_destroy, qgl_error,
};
