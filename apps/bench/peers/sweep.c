// SPDX-License-Identifier: MIT
/* sweep: the classic sort-and-sweep on x, as the baseline every spatial index
 * should beat. The update step re-sorts (radix sort of the min_x bits, so it
 * costs the same every frame whatever the motion); the pairs step sweeps.
 * Rays and nearest neighbours are window queries over the sorted boxes (the
 * ray's bounding box; growing squares) with the exact tests on top. */
#include "peer.h"

#include <stdlib.h>
#include <string.h>

#include "workload.h"

struct bench_impl {
    qgw_sweep sweep;
    const qg_rect *boxes; /* the boxes last given, for the exact ray and distance tests */
    bool nomem;
};

static bool sw_create(bench_impl **out, const bench_setup *setup, const void *arg) {
    (void)setup, (void)arg;
    *out = calloc(1, sizeof **out);
    return *out != NULL;
}

static bool sw_update(bench_impl *s, const qg_rect *boxes, int32_t n) {
    s->nomem = !qgw_sweep_sort(&s->sweep, boxes, n);
    s->boxes = boxes;
    return !s->nomem;
}

static bool sw_build(bench_impl *s, const qg_rect *boxes, int32_t n, bool bulk) {
    (void)bulk;
    return sw_update(s, boxes, n);
}

static bool sw_pairs(bench_impl *s, qg_pair_fn *fn, void *user) {
    qgw_sweep_pairs(&s->sweep, fn, user);
    return true;
}

static bool sw_query(bench_impl *s, qg_rect area, qg_query_fn *fn, void *user) {
    qgw_sweep_query(&s->sweep, area, fn, user);
    return true;
}

static size_t sw_bytes(bench_impl *s) {
    return qgw_sweep_bytes(&s->sweep);
}

static void sw_destroy(bench_impl *s) {
    if (!s) return;
    qgw_sweep_free(&s->sweep);
    free(s);
}

static const char *sw_error(bench_impl *s) {
    return s->nomem ? "out of memory" : NULL;
}

/* ---- rays and knn over the sorted boxes ---------------------------------- */

/* A ray's candidates are the boxes overlapping its segment's bounding box
 * widened by 1 (float rounding of the end point is far below that), each
 * then tested with the workload's formula (qg_ray_box). */
typedef struct ray_ctx {
    const qg_rect *boxes;
    const bench_ray *ray;
    qg_query_fn *fn;
    void *user;
    int32_t best;
    float best_t;
} ray_ctx;

static qg_rect ray_window(const bench_ray *r) {
    float ex = r->ox + r->max_t * r->dx, ey = r->oy + r->max_t * r->dy;
    qg_rect w = {r->ox < ex ? r->ox : ex, r->oy < ey ? r->oy : ey, r->ox > ex ? r->ox : ex,
                 r->oy > ey ? r->oy : ey};
    w.min_x -= 1.0f, w.min_y -= 1.0f, w.max_x += 1.0f, w.max_y += 1.0f;
    return w;
}

static bool ray_all_cand(qg_handle i, void *user) {
    ray_ctx *c = user;
    const bench_ray *r = c->ray;
    if (qg_ray_box(c->boxes[i], r->ox, r->oy, r->dx, r->dy, r->max_t, NULL)) c->fn(i, c->user);
    return true;
}

static bool ray_closest_cand(qg_handle i, void *user) {
    ray_ctx *c = user;
    const bench_ray *r = c->ray;
    float t;
    if (qg_ray_box(c->boxes[i], r->ox, r->oy, r->dx, r->dy, r->max_t, &t) &&
        (c->best < 0 || t < c->best_t || (t == c->best_t && i < c->best)))
        c->best = i, c->best_t = t;
    return true;
}

static bool sw_ray_all(bench_impl *s, const bench_ray *ray, qg_query_fn *fn, void *user) {
    ray_ctx c = {s->boxes, ray, fn, user, -1, 0.0f};
    qgw_sweep_query(&s->sweep, ray_window(ray), ray_all_cand, &c);
    return true;
}

static bool sw_ray_closest(bench_impl *s, const bench_ray *ray, int32_t *hit, float *t) {
    ray_ctx c = {s->boxes, ray, NULL, NULL, -1, 0.0f};
    qgw_sweep_query(&s->sweep, ray_window(ray), ray_closest_cand, &c);
    *hit = c.best;
    *t = c.best_t;
    return true;
}

/* k nearest: window queries of half-size r + margin around the point,
 * r doubling until the k-th best distance2 is at most r*r (every box with
 * distance2 <= r*r lies in the window: the margin covers the rounding) or
 * the window held every box. */
typedef struct near_ctx {
    const qg_rect *boxes;
    float x, y;
    int32_t k, count, seen;
    int32_t id[BENCH_KNN_MAX];
    float d2[BENCH_KNN_MAX];
} near_ctx;

static bool near_cand(qg_handle i, void *user) {
    near_ctx *c = user;
    c->seen++;
    float d = qg_point_box_distance2(c->boxes[i], c->x, c->y);
    int32_t j = c->count;
    if (j == c->k) {
        if (d > c->d2[j - 1] || (d == c->d2[j - 1] && i > c->id[j - 1])) return true;
        j--;
    } else {
        c->count++;
    }
    for (; j > 0 && (c->d2[j - 1] > d || (c->d2[j - 1] == d && c->id[j - 1] > i)); j--) {
        c->d2[j] = c->d2[j - 1];
        c->id[j] = c->id[j - 1];
    }
    c->d2[j] = d;
    c->id[j] = i;
    return true;
}

static bool sw_nearest(bench_impl *s, float x, float y, int32_t k, int32_t *out, float *d2, int32_t *found) {
    near_ctx c;
    c.boxes = s->boxes, c.x = x, c.y = y, c.k = k;
    *found = 0;
    if (k <= 0 || k > BENCH_KNN_MAX || s->sweep.n == 0) return k >= 0 && k <= BENCH_KNN_MAX;
    for (float r = 2.0f * s->sweep.max_width + 1.0f;; r *= 2.0f) {
        c.count = 0, c.seen = 0;
        float m = r + 1.0f + r * 1e-5f;
        qg_rect w = {x - m, y - m, x + m, y + m};
        qgw_sweep_query(&s->sweep, w, near_cand, &c);
        if (c.seen == s->sweep.n || (c.count == k && c.d2[k - 1] <= r * r) || !(r < 3e38f)) break;
    }
    for (int32_t i = 0; i < c.count; i++) {
        out[i] = c.id[i];
        if (d2) d2[i] = c.d2[i];
    }
    *found = c.count;
    return true;
}

const bench_vtable bench_sweep_vtable = {
    sw_create, sw_build, sw_update, sw_pairs, sw_query, sw_bytes, sw_destroy, sw_error, NULL, NULL,
    sw_ray_all, sw_ray_closest, sw_nearest,
};

/* ---- level: the reference, every box sorted every frame ------------------
 *
 * Tiles and agents in one array, re-sorted and swept every frame; pairs of
 * two tiles are dropped in the callback. The plain reference the other
 * implementations are checked against, not a tuned static/dynamic sweep. */

struct bench_level {
    qgw_sweep sweep;
    qg_rect *all; /* tiles, then agents */
    int32_t s, a;
    bool nomem;
};

static bool swl_create(bench_level **out, const bench_setup *setup, const void *arg) {
    (void)setup, (void)arg;
    *out = calloc(1, sizeof **out);
    return *out != NULL;
}

static bool swl_build(bench_level *l, const qg_rect *tiles, int32_t s, const qg_rect *agents, int32_t a) {
    l->all = malloc(((size_t)s + (size_t)a + 1) * sizeof *l->all);
    if (!l->all) return !(l->nomem = true);
    memcpy(l->all, tiles, (size_t)s * sizeof *l->all);
    l->s = s, l->a = a;
    memcpy(l->all + s, agents, (size_t)a * sizeof *l->all);
    l->nomem = !qgw_sweep_sort(&l->sweep, l->all, s + a);
    return !l->nomem;
}

static bool swl_update(bench_level *l, const qg_rect *agents, int32_t a) {
    memcpy(l->all + l->s, agents, (size_t)a * sizeof *l->all);
    l->nomem = !qgw_sweep_sort(&l->sweep, l->all, l->s + a);
    return !l->nomem;
}

typedef struct swl_ctx {
    int32_t s;
    qg_pair_fn *fn;
    void *user;
} swl_ctx;

static bool swl_pair(qg_handle a, qg_handle b, void *user) {
    const swl_ctx *c = user;
    return (a < c->s && b < c->s) || c->fn(a, b, c->user);
}

static bool swl_pairs(bench_level *l, qg_pair_fn *fn, void *user) {
    swl_ctx c = {l->s, fn, user};
    qgw_sweep_pairs(&l->sweep, swl_pair, &c);
    return true;
}

static size_t swl_bytes(bench_level *l) {
    return qgw_sweep_bytes(&l->sweep) + ((size_t)l->s + (size_t)l->a) * sizeof *l->all;
}

static void swl_destroy(bench_level *l) {
    if (!l) return;
    qgw_sweep_free(&l->sweep);
    free(l->all);
    free(l);
}

static const char *swl_error(bench_level *l) {
    return l->nomem ? "out of memory" : NULL;
}

const bench_level_vtable bench_sweep_level_vtable = {
    swl_create, swl_build, swl_update, swl_pairs, NULL, NULL, swl_bytes, swl_destroy, swl_error,
};
