// SPDX-License-Identifier: MIT
/* Chipmunk2D 7's spatial indexes (cpBBTree, cpSpaceHash) through its public
 * cpSpatialIndex API, driven the way cpSpace drives them: objects carry their
 * box, and cpSpatialIndexReindexQuery re-indexes and reports candidate pairs in
 * one pass. Chipmunk's candidates are conservative (fattened tree leaves,
 * hashed cells), so every candidate is checked with the workload's exact float
 * test before it is counted; the answers must then equal quadgrid's.
 *
 * Because reindexing and pair finding are one call, this peer's update step
 * only stores the new boxes and its pairs step carries all the index work:
 * compare total_ms, not the split. */
#include "peer.h"

#include <math.h>
#include <stdlib.h>

#include <chipmunk/chipmunk.h>

#include "workload.h"

/* The frame rate the agents' per-frame velocity is converted at: cpSpace hands
 * cpBBTree velocities in units per second. */
#define FRAMES_PER_SECOND 60.0

/* level: the spatial hash's cell side (see the level section). */
#define BENCH_LEVEL_CELL 16.0

typedef struct cp_obj {
    cpBB bb;
    cpVect v;
} cp_obj;

struct bench_impl {
    cpSpatialIndex *index;
    cp_obj *objs;
    const qg_rect *boxes; /* the boxes of the current frame, for the exact test */
    int32_t n;
    bool is_tree;
    cpFloat celldim; /* spacehash: its cell size */
};

typedef struct pair_ctx {
    bench_impl *self;
    qg_pair_fn *fn;
    qg_query_fn *qfn;
    void *user;
    qg_rect area;
    bool stopped;
} pair_ctx;

static cpBB obj_bb(void *obj) {
    return ((const cp_obj *)obj)->bb;
}

static cpVect obj_velocity(void *obj) {
    return ((const cp_obj *)obj)->v;
}

static cpBB to_bb(qg_rect r) {
    /* float -> double is exact, so Chipmunk's closed cpBB tests see the
     * workload's boxes unchanged. */
    return cpBBNew(r.min_x, r.min_y, r.max_x, r.max_y);
}

static bool cp_create_common(bench_impl **out, bool tree, const bench_setup *setup) {
    bench_impl *s = calloc(1, sizeof *s);
    if (!s) return false;
    *out = s;
    size_t count = setup->n > 0 ? (size_t)setup->n : 1;
    s->objs = calloc(count, sizeof *s->objs);
    if (!s->objs) return false;
    s->is_tree = tree;
    if (tree) {
        s->index = cpBBTreeNew(obj_bb, NULL);
        if (s->index) cpBBTreeSetVelocityFunc(s->index, obj_velocity);
    } else {
        /* Chipmunk's advice: cell size about the average object size, about
         * 10x as many cells as objects. */
        int cells = setup->n > 0 && setup->n < INT32_MAX / 10 ? setup->n * 10 : 1000;
        s->celldim = setup->element_size > 0 ? setup->element_size : 1.0;
        s->index = cpSpaceHashNew(s->celldim, cells, obj_bb, NULL);
    }
    return s->index != NULL;
}

static bool cpt_create(bench_impl **out, const bench_setup *setup, const void *arg) {
    (void)arg;
    return cp_create_common(out, true, setup);
}

static bool cph_create(bench_impl **out, const bench_setup *setup, const void *arg) {
    (void)arg;
    return cp_create_common(out, false, setup);
}

static bool cp_build(bench_impl *s, const qg_rect *boxes, int32_t n, bool bulk) {
    s->boxes = boxes;
    s->n = n;
    for (int32_t i = 0; i < n; i++) {
        s->objs[i].bb = to_bb(boxes[i]);
        s->objs[i].v = cpvzero;
        cpSpatialIndexInsert(s->index, &s->objs[i], (cpHashValue)i);
    }
    if (bulk && s->is_tree) cpBBTreeOptimize(s->index);
    return true;
}

static bool cp_update(bench_impl *s, const qg_rect *boxes, int32_t n) {
    s->boxes = boxes;
    for (int32_t i = 0; i < n; i++) {
        cp_obj *o = &s->objs[i];
        cpBB bb = to_bb(boxes[i]);
        o->v = cpv((bb.l - o->bb.l) * FRAMES_PER_SECOND, (bb.b - o->bb.b) * FRAMES_PER_SECOND);
        o->bb = bb;
    }
    return true;
}

static cpCollisionID pair_cb(void *obj1, void *obj2, cpCollisionID id, void *data) {
    pair_ctx *c = data;
    if (c->stopped) return id;
    const cp_obj *base = c->self->objs;
    int32_t i = (int32_t)((const cp_obj *)obj1 - base), j = (int32_t)((const cp_obj *)obj2 - base);
    const qg_rect *b = c->self->boxes;
    if (qgw_overlap(&b[i], &b[j])) {
        if (!(i < j ? c->fn(i, j, c->user) : c->fn(j, i, c->user))) c->stopped = true;
    }
    return id;
}

static bool cp_pairs(bench_impl *s, qg_pair_fn *fn, void *user) {
    pair_ctx c = {s, fn, NULL, user, {0, 0, 0, 0}, false};
    cpSpatialIndexReindexQuery(s->index, pair_cb, &c);
    return true;
}

static cpCollisionID query_cb(void *obj1, void *obj2, cpCollisionID id, void *data) {
    (void)obj1;
    pair_ctx *c = data;
    if (c->stopped) return id;
    int32_t j = (int32_t)((const cp_obj *)obj2 - c->self->objs);
    if (qgw_overlap(&c->area, &c->self->boxes[j]) && !c->qfn(j, c->user)) c->stopped = true;
    return id;
}

static bool cp_query(bench_impl *s, qg_rect area, qg_query_fn *fn, void *user) {
    pair_ctx c = {s, NULL, fn, user, area, false};
    cpSpatialIndexQuery(s->index, NULL, to_bb(area), query_cb, &c);
    return true;
}

static size_t cp_bytes(bench_impl *s) {
    (void)s;
    return 0; /* Chipmunk cannot say; the bench measures the heap instead */
}

static void cp_destroy(bench_impl *s) {
    if (!s) return;
    if (s->index) cpSpatialIndexFree(s->index);
    free(s->objs);
    free(s);
}

static const char *cp_error(bench_impl *s) {
    return s->index ? NULL : "could not create the Chipmunk index";
}

/* ---- rays: cpSpatialIndexSegmentQuery ------------------------------------
 *
 * The segment a -> b = origin -> origin + max_t*direction (double); Chipmunk
 * measures along it by the fraction t_exit in [0, 1] and calls back for each
 * leaf (bbtree) or hashed object (spacehash) its traversal reaches, in double
 * arithmetic. The callback applies the workload's float test (qg_ray_box).
 * Closest hit: the callback returns the fraction of the best t so far plus a
 * little slack, so Chipmunk prunes (bbtree: subtrees whose box the segment
 * enters at or after t_exit) while elements at the same t, which the
 * tie-break needs, and float-vs-double rounding (far below the slack) still
 * reach the callback. The tree's leaves are its fattened boxes (10% of the
 * size, by the velocity function), so its pruning is conservative.
 *
 * cpSpaceHash's cell walk has a flaw this works around: when the start lies
 * exactly on a cell line (a.x / celldim an integer) and the segment heads to
 * smaller x, it takes the distance to the next line as a whole cell and walks
 * the cell on the wrong side of the line for that long, so the first cell the
 * segment really crosses is never looked at (likewise in y). A cast from such
 * a start begins a little behind the origin instead (the callback's exact
 * test is on the real ray, so the longer segment only adds candidates). */
#define RAY_SLACK 0.01f

typedef struct seg_ctx {
    bench_impl *self;
    const bench_ray *ray;
    qg_query_fn *fn;
    void *user;
    int32_t best;
    float best_t;
    cpFloat t_exit;
    cpFloat t_start; /* the ray's t where Chipmunk's segment starts (<= 0) */
} seg_ctx;

static cpFloat seg_all_cb(void *obj1, void *obj2, void *data) {
    (void)obj1;
    seg_ctx *c = data;
    const bench_ray *r = c->ray;
    int32_t j = (int32_t)((const cp_obj *)obj2 - c->self->objs);
    if (qg_ray_box(c->self->boxes[j], r->ox, r->oy, r->dx, r->dy, r->max_t, NULL)) c->fn(j, c->user);
    return 1.0;
}

static cpFloat seg_closest_cb(void *obj1, void *obj2, void *data) {
    (void)obj1;
    seg_ctx *c = data;
    const bench_ray *r = c->ray;
    int32_t j = (int32_t)((const cp_obj *)obj2 - c->self->objs);
    float t;
    if (qg_ray_box(c->self->boxes[j], r->ox, r->oy, r->dx, r->dy, r->max_t, &t) &&
        (c->best < 0 || t < c->best_t || (t == c->best_t && j < c->best))) {
        c->best = j, c->best_t = t;
        if (r->max_t > 0.0f) {
            cpFloat f = ((cpFloat)t + RAY_SLACK - c->t_start) / (r->max_t - c->t_start);
            c->t_exit = f < 1.0 ? f : 1.0;
        }
    }
    return c->t_exit;
}

/* True when Chipmunk's walk from a toward b would start on a cell line it
 * mishandles (the same double arithmetic as cpSpaceHashSegmentQuery). */
static bool on_bad_line(const bench_impl *s, cpVect a, cpVect b) {
    cpFloat ax = a.x * (1.0 / s->celldim), ay = a.y * (1.0 / s->celldim);
    cpFloat bx = b.x * (1.0 / s->celldim), by = b.y * (1.0 / s->celldim);
    return (bx < ax && ax == floor(ax)) || (by < ay && ay == floor(ay));
}

static void seg_query(bench_impl *s, const bench_ray *r, cpSpatialIndexSegmentQueryFunc cb, seg_ctx *c) {
    cpVect a = cpv(r->ox, r->oy);
    c->t_start = 0.0;
    for (cpFloat back = 1e-3; !s->is_tree && on_bad_line(s, a, cpv(a.x + r->dx, a.y + r->dy)) && back < 1.0;
         back *= 2.0) {
        c->t_start = -back;
        a = cpv((cpFloat)r->ox - back * r->dx, (cpFloat)r->oy - back * r->dy);
    }
    cpVect b = cpv((cpFloat)r->ox + (cpFloat)r->max_t * r->dx, (cpFloat)r->oy + (cpFloat)r->max_t * r->dy);
    cpSpatialIndexSegmentQuery(s->index, NULL, a, b, 1.0, cb, c);
}

static bool cp_ray_all(bench_impl *s, const bench_ray *ray, qg_query_fn *fn, void *user) {
    seg_ctx c = {s, ray, fn, user, -1, 0.0f, 1.0, 0.0};
    seg_query(s, ray, seg_all_cb, &c);
    return true;
}

static bool cp_ray_closest(bench_impl *s, const bench_ray *ray, int32_t *hit, float *t) {
    seg_ctx c = {s, ray, NULL, NULL, -1, 0.0f, 1.0, 0.0};
    seg_query(s, ray, seg_closest_cb, &c);
    *hit = c.best;
    *t = c.best_t;
    return true;
}

const bench_vtable bench_chipmunk_bbtree_vtable = {
    cpt_create, cp_build, cp_update, cp_pairs, cp_query, cp_bytes, cp_destroy, cp_error, NULL, NULL,
    cp_ray_all, cp_ray_closest, NULL,
};

const bench_vtable bench_chipmunk_spacehash_vtable = {
    cph_create, cp_build, cp_update, cp_pairs, cp_query, cp_bytes, cp_destroy, cp_error, NULL, NULL,
    cp_ray_all, cp_ray_closest, NULL,
};

/* ---- level: a static index collided with a dynamic one --------------------
 *
 * As cpSpace keeps a level: the tiles in a static index (cpBBTree or
 * cpSpaceHash), built once and never reindexed (the tree optimised once,
 * cpBBTreeOptimize, as Chipmunk offers for static geometry); the agents in
 * a dynamic index of the same type created with the static one as its
 * staticIndex. Each frame cpSpatialIndexReindexQuery on the dynamic index
 * reindexes the agents and reports, in the one call, the agents' pairs
 * among themselves and (cpSpatialIndexCollideStatic, which both index
 * types run inside it) each agent's pairs with the static index. Static
 * pairs are never looked for. Candidates get the exact test.
 *
 * The spatial hash takes cells of 16 (the tiles' side; Chipmunk's advice is
 * the average shape, about 15 here) and 10 cells per object in each index. */

struct bench_level {
    cpSpatialIndex *statics, *dynamics;
    cp_obj *objs; /* tiles, then agents: element = object - objs */
    const qg_rect *tiles, *agents;
    int32_t s, a;
    bool is_tree;
};

static bool cpl_create_common(bench_level **out, bool tree) {
    bench_level *l = calloc(1, sizeof *l);
    if (!l) return false;
    *out = l;
    l->is_tree = tree;
    return true;
}

static bool cplt_create(bench_level **out, const bench_setup *setup, const void *arg) {
    (void)setup, (void)arg;
    return cpl_create_common(out, true);
}

static bool cplh_create(bench_level **out, const bench_setup *setup, const void *arg) {
    (void)setup, (void)arg;
    return cpl_create_common(out, false);
}

static int cpl_cells(int32_t objects) {
    return objects > 0 && objects < INT32_MAX / 10 ? objects * 10 : 1000;
}

static bool cpl_build(bench_level *l, const qg_rect *tiles, int32_t s, const qg_rect *agents, int32_t a) {
    l->objs = calloc((size_t)s + (size_t)a + 1, sizeof *l->objs);
    if (!l->objs) return false;
    l->tiles = tiles, l->agents = agents, l->s = s, l->a = a;
    if (l->is_tree) {
        l->statics = cpBBTreeNew(obj_bb, NULL);
        l->dynamics = l->statics ? cpBBTreeNew(obj_bb, l->statics) : NULL;
        if (l->dynamics) cpBBTreeSetVelocityFunc(l->dynamics, obj_velocity);
    } else {
        l->statics = cpSpaceHashNew(BENCH_LEVEL_CELL, cpl_cells(s), obj_bb, NULL);
        l->dynamics = l->statics ? cpSpaceHashNew(BENCH_LEVEL_CELL, cpl_cells(a), obj_bb, l->statics) : NULL;
    }
    if (!l->statics || !l->dynamics) return false;
    for (int32_t i = 0; i < s; i++) {
        l->objs[i].bb = to_bb(tiles[i]);
        l->objs[i].v = cpvzero;
        cpSpatialIndexInsert(l->statics, &l->objs[i], (cpHashValue)i);
    }
    if (l->is_tree) cpBBTreeOptimize(l->statics);
    for (int32_t k = 0; k < a; k++) {
        cp_obj *o = &l->objs[s + k];
        o->bb = to_bb(agents[k]);
        o->v = cpvzero;
        cpSpatialIndexInsert(l->dynamics, o, (cpHashValue)(s + k));
    }
    return true;
}

static bool cpl_update(bench_level *l, const qg_rect *agents, int32_t a) {
    l->agents = agents;
    cp_obj *objs = l->objs + l->s;
    for (int32_t k = 0; k < a; k++) {
        cp_obj *o = &objs[k];
        cpBB bb = to_bb(agents[k]);
        o->v = cpv((bb.l - o->bb.l) * FRAMES_PER_SECOND, (bb.b - o->bb.b) * FRAMES_PER_SECOND);
        o->bb = bb;
    }
    return true;
}

typedef struct cpl_ctx {
    const bench_level *l;
    qg_pair_fn *fn;
    void *user;
    bool stopped;
} cpl_ctx;

static inline const qg_rect *cpl_box(const bench_level *l, int32_t i) {
    return i < l->s ? &l->tiles[i] : &l->agents[i - l->s];
}

static cpCollisionID cpl_pair(void *obj1, void *obj2, cpCollisionID id, void *data) {
    cpl_ctx *c = data;
    if (c->stopped) return id;
    const bench_level *l = c->l;
    int32_t i = (int32_t)((const cp_obj *)obj1 - l->objs), j = (int32_t)((const cp_obj *)obj2 - l->objs);
    if (qgw_overlap(cpl_box(l, i), cpl_box(l, j)) && !(i < j ? c->fn(i, j, c->user) : c->fn(j, i, c->user)))
        c->stopped = true;
    return id;
}

static bool cpl_pairs(bench_level *l, qg_pair_fn *fn, void *user) {
    cpl_ctx c = {l, fn, user, false};
    cpSpatialIndexReindexQuery(l->dynamics, cpl_pair, &c);
    return true;
}

static size_t cpl_bytes(bench_level *l) {
    (void)l;
    return 0; /* the bench measures the heap */
}

static void cpl_destroy(bench_level *l) {
    if (!l) return;
    if (l->dynamics) cpSpatialIndexFree(l->dynamics);
    if (l->statics) cpSpatialIndexFree(l->statics);
    free(l->objs);
    free(l);
}

static const char *cpl_error(bench_level *l) {
    return l->statics && l->dynamics ? NULL : "could not create the Chipmunk indexes";
}

const bench_level_vtable bench_chipmunk_bbtree_level_vtable = {
    cplt_create, cpl_build, cpl_update, cpl_pairs, NULL, NULL, cpl_bytes, cpl_destroy, cpl_error,
};

const bench_level_vtable bench_chipmunk_spacehash_level_vtable = {
    cplh_create, cpl_build, cpl_update, cpl_pairs, NULL, NULL, cpl_bytes, cpl_destroy, cpl_error,
};
