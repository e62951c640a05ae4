// SPDX-License-Identifier: MIT
/* The differential test: one kind (argv[1]) against QG_BRUTE_FORCE and
 * against an independent brute force over a plain array, over long random
 * operation sequences, every answer compared as a set.
 *
 * Handles are per index (two indexes may hand out different values), so the
 * test names each inserted element by an id of its own and maps each index's
 * handles to ids before comparing.
 *
 * To reproduce a failure: QG_TEST_SEED=<seed printed> test_contract KIND.
 * QG_TEST_SCALE=10 makes every sequence ten times longer. */
#include "test_util.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

static qg_kind g_kind = QG_BRUTE_FORCE;
static uint64_t g_seed_base = 0x5eed0f9a11d00dull;

static const float INF = (float)INFINITY;

/* Pair lists longer than this are compared by count and a commutative hash
 * only (10,000 coincident boxes make 50 million pairs). */
#define PAIR_LIST_CAP 2000000u

/* ---- configs and distributions ----------------------------------------- */

typedef struct cfg_spec {
    const char *name;
    qg_rect bounds;
    float element_size;
    int max_depth;
    int leaf_capacity;
    float cell_size;
} cfg_spec;

static const cfg_spec CONFIGS[] = {
    {"default", {0, 0, 1024, 1024}, 0, 0, 0, 0},
    {"leaf1_depth3", {0, 0, 1024, 1024}, 0, 3, 1, 0},
    {"leaf2_depth14", {0, 0, 1024, 1024}, 0, 14, 2, 0},
    {"wide_offset", {-3000, 250, 5192, 762}, 8, 0, 0, 0},
    {"tall_negative", {-100.5f, -7000, -60.25f, -1000}, 0, 0, 4, 0},
    {"unit_world", {0, 0, 1, 1}, 0.01f, 0, 0, 0.008f},
    {"big_cells", {0, 0, 1024, 1024}, 32, 6, 16, 100},
};
#define N_CONFIGS ((int)(sizeof CONFIGS / sizeof *CONFIGS))

typedef enum dist {
    D_UNIFORM,
    D_TINY,
    D_HUGE,
    D_POINTS,
    D_COINCIDENT,
    D_OUT_OF_BOUNDS,
    D_MIXED,
    D_COUNT
} dist;

static const char *const DIST_NAMES[D_COUNT] = {
    "uniform", "tiny", "huge", "points", "coincident", "out_of_bounds", "mixed"};

/* ---- the world: index under test, reference index, plain-array oracle -- */

typedef struct elem {
    qg_rect box;
    qg_handle hk, hr; /* handle in the kind under test, in the reference */
    bool live;
} elem;

typedef struct world {
    /* what is running, for failure messages */
    const char *cfg_name;
    const char *dist_name;
    uint64_t seed;
    long step;
    const char *op;

    qg_config cfg;
    dist d;
    qg_index *k, *r;
    tu_alloc ak, ar;
    tu_rng rng;

    elem *e; /* by id */
    int32_t ne, cap_e;
    int32_t *k2id, *r2id; /* by handle; -1 when not live */
    int32_t cap_k2id, cap_r2id;
    int32_t *live; /* live ids, unordered */
    int32_t *pos;  /* id -> index in live, or -1 */
    int32_t nlive;

    qg_rect coincident; /* the box of D_COINCIDENT */
    float cx[4], cy[4]; /* cluster centres of D_TINY */
    int validate_every;

    tu_collect ck, cr; /* scratch result lists */
    tu_vec ik, ir, io; /* ids, sorted */
} world;

static void wfail(world *w, const char *fmt, ...)
{
    char context[256], hint[128];
    snprintf(context, sizeof context, "kind=%s config=%s dist=%s seed=%" PRIu64 " step=%ld op=%s live=%d",
             qg_kind_name(g_kind), w->cfg_name, w->dist_name, w->seed, w->step, w->op, w->nlive);
    snprintf(hint, sizeof hint, "  reproduce: QG_TEST_SEED=%" PRIu64 " (base seed) test_contract %s\n", g_seed_base,
             qg_kind_name(g_kind));
    va_list ap;
    va_start(ap, fmt);
    tu_vfail(context, hint, fmt, ap);
    va_end(ap);
}

static void grow_map(int32_t **m, int32_t *cap, int32_t need)
{
    if (need < *cap)
        return;
    int32_t n = *cap ? *cap : 256;
    while (n <= need)
        n *= 2;
    int32_t *p = realloc(*m, (size_t)n * sizeof *p);
    assert_non_null(p);
    for (int32_t i = *cap; i < n; i++)
        p[i] = -1;
    *m = p;
    *cap = n;
}

static int32_t map_get(const int32_t *m, int32_t cap, qg_handle h)
{
    return h >= 0 && h < cap ? m[h] : -1;
}

static void world_open(world *w, const cfg_spec *cs, dist d, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    w->cfg_name = cs->name;
    w->dist_name = DIST_NAMES[d];
    w->seed = seed;
    w->op = "create";
    w->d = d;
    tu_rng_seed(&w->rng, seed);
    tu_alloc_init(&w->ak);
    tu_alloc_init(&w->ar);

    w->cfg = qg_default_config(g_kind);
    w->cfg.bounds = cs->bounds;
    w->cfg.element_size = cs->element_size;
    w->cfg.max_depth = cs->max_depth;
    w->cfg.leaf_capacity = cs->leaf_capacity;
    w->cfg.cell_size = cs->cell_size;
    w->cfg.allocator = tu_allocator(&w->ak);
    if (g_kind == QG_POINT_GRID && w->cfg.max_element_size == 0)
        w->cfg.max_element_size = (cs->bounds.max_x - cs->bounds.min_x) / 16;
    qg_status st = qg_create(&w->cfg, &w->k);
    if (st != QG_OK)
        wfail(w, "qg_create = %s", qg_status_name(st));

    qg_config rc = w->cfg;
    rc.kind = QG_BRUTE_FORCE;
    rc.allocator = tu_allocator(&w->ar);
    st = qg_create(&rc, &w->r);
    if (st != QG_OK)
        wfail(w, "qg_create(brute_force) = %s", qg_status_name(st));

    qg_rect b = cs->bounds;
    float W = b.max_x - b.min_x, H = b.max_y - b.min_y;
    /* Cluster centres on the lines a tree or grid splits at, where a
     * conservative integer mapping is most likely to be off by one. */
    w->cx[0] = b.min_x + W / 2, w->cy[0] = b.min_y + H / 2;
    w->cx[1] = b.min_x + W / 4, w->cy[1] = b.min_y + 3 * H / 4;
    w->cx[2] = b.min_x, w->cy[2] = b.min_y;
    w->cx[3] = tu_rng_range(&w->rng, b.min_x, b.max_x), w->cy[3] = tu_rng_range(&w->rng, b.min_y, b.max_y);
    /* Small and across the centre lines: a few leaves hold all of them, so
     * pairs must not report a pair once per shared leaf. */
    float cw = W / 2048;
    w->coincident = tu_rect(w->cx[0] - cw, w->cy[0] - cw / 3, w->cx[0] + cw / 2, w->cy[0] + cw);
    w->validate_every = 1;
}

static void world_close(world *w)
{
    qg_destroy(w->k);
    qg_destroy(w->r);
    if (w->ak.bytes != 0 || w->ak.blocks != 0)
        wfail(w, "after qg_destroy the allocator still holds %zu bytes in %zu blocks", w->ak.bytes,
              w->ak.blocks);
    if (w->ak.errors)
        wfail(w, "allocator misuse: %s", w->ak.last_error);
    free(w->e);
    free(w->k2id);
    free(w->r2id);
    free(w->live);
    free(w->pos);
    tu_vec_free(&w->ck.out);
    tu_vec_free(&w->cr.out);
    tu_vec_free(&w->ik);
    tu_vec_free(&w->ir);
    tu_vec_free(&w->io);
}

/* ---- box generators ---------------------------------------------------- */

static float snap(world *w, float v, float lo, float size)
{
    /* A multiple of size / 2^k: exactly on the split lines of a tree or grid. */
    float step = size / (float)(1u << tu_rng_below(&w->rng, 11));
    return lo + floorf((v - lo) / step) * step;
}

static qg_rect box_uniform(world *w)
{
    qg_rect b = w->cfg.bounds;
    float W = b.max_x - b.min_x, H = b.max_y - b.min_y;
    float x = tu_rng_range(&w->rng, b.min_x, b.max_x), y = tu_rng_range(&w->rng, b.min_y, b.max_y);
    float s = W < H ? W : H;
    float bw = tu_rng_chance(&w->rng, 0.1) ? 0 : tu_rng_range(&w->rng, 0, s / 50);
    float bh = tu_rng_chance(&w->rng, 0.5) ? bw : tu_rng_range(&w->rng, 0, s / 50);
    return tu_rect(x, y, x + bw, y + bh);
}

static qg_rect box_tiny(world *w)
{
    qg_rect b = w->cfg.bounds;
    float W = b.max_x - b.min_x;
    int c = (int)tu_rng_below(&w->rng, 4);
    float spread = W * 1e-4f;
    float x = w->cx[c] + tu_rng_range(&w->rng, -spread, spread);
    float y = w->cy[c] + tu_rng_range(&w->rng, -spread, spread);
    if (tu_rng_chance(&w->rng, 0.2))
        x = w->cx[c], y = w->cy[c]; /* exactly on the split lines */
    float t = 1e-6f;
    return tu_rect(x, y, x + t, y + t);
}

static qg_rect box_huge(world *w)
{
    qg_rect b = w->cfg.bounds;
    float W = b.max_x - b.min_x, H = b.max_y - b.min_y;
    uint32_t k = tu_rng_below(&w->rng, 20);
    if (k < 8) /* wider than the world, both ways */
        return tu_rect(b.min_x - tu_rng_range(&w->rng, 0, 2 * W), b.min_y - tu_rng_range(&w->rng, 0, 2 * H),
                       b.max_x + tu_rng_range(&w->rng, 0, 2 * W), b.max_y + tu_rng_range(&w->rng, 0, 2 * H));
    if (k < 12) { /* a band across the world */
        float y = tu_rng_range(&w->rng, b.min_y, b.max_y);
        return tu_rect(b.min_x - W, y, b.max_x + W, y + H / 100);
    }
    if (k < 14) {
        float x = tu_rng_range(&w->rng, b.min_x, b.max_x);
        return tu_rect(x, -1e30f, x, 1e30f);
    }
    if (k == 14) /* the largest finite box */
        return tu_rect(-FLT_MAX, -FLT_MAX, FLT_MAX, FLT_MAX);
    if (k == 15)
        return tu_rect(-FLT_MAX, b.min_y, b.min_x + W / 3, b.max_y);
    return box_uniform(w);
}

static qg_rect box_point(world *w)
{
    qg_rect b = w->cfg.bounds;
    float W = b.max_x - b.min_x, H = b.max_y - b.min_y;
    float x = tu_rng_range(&w->rng, b.min_x, b.max_x), y = tu_rng_range(&w->rng, b.min_y, b.max_y);
    if (tu_rng_chance(&w->rng, 0.4)) {
        x = snap(w, x, b.min_x, W);
        y = snap(w, y, b.min_y, H);
    }
    if (tu_rng_chance(&w->rng, 0.05))
        x = b.max_x, y = b.max_y; /* the far corner, on the world's edge */
    return tu_rect(x, y, x, y);
}

static qg_rect box_out_of_bounds(world *w)
{
    qg_rect b = w->cfg.bounds;
    float W = b.max_x - b.min_x, H = b.max_y - b.min_y;
    uint32_t k = tu_rng_below(&w->rng, 10);
    float s = (W < H ? W : H) / 20;
    float x, y;
    switch (k) {
    case 0: case 1: case 2: /* straddling an edge */
        x = tu_rng_chance(&w->rng, 0.5) ? b.min_x : b.max_x;
        y = tu_rng_range(&w->rng, b.min_y - s, b.max_y + s);
        return tu_rect(x - s / 2, y, x + s / 2, y + s);
    case 3: case 4: /* wholly outside, near */
        x = tu_rng_range(&w->rng, b.min_x - W, b.min_x - s);
        y = tu_rng_range(&w->rng, b.max_y + s, b.max_y + H);
        return tu_rect(x, y, x + s, y + s);
    case 5: /* far away */
        x = tu_rng_range(&w->rng, -1e6f, 1e6f) * W;
        y = tu_rng_range(&w->rng, -1e6f, 1e6f) * H;
        return tu_rect(x, y, x + s, y + s);
    case 6: /* negative coordinates */
        x = -tu_rng_range(&w->rng, 0, 4 * W);
        y = -tu_rng_range(&w->rng, 0, 4 * H);
        return tu_rect(x, y, x + s, y + s);
    case 7: { /* enormous coordinates, as points */
        float v = tu_rng_chance(&w->rng, 0.5) ? 1e30f : FLT_MAX;
        x = tu_rng_chance(&w->rng, 0.5) ? v : -v;
        y = tu_rng_chance(&w->rng, 0.5) ? v : -v;
        return tu_rect(x, y, x, y);
    }
    case 8: /* a corner outside */
        return tu_rect(b.max_x - s, b.max_y - s, b.max_x + s, b.max_y + s);
    default:
        return box_uniform(w);
    }
}

static qg_rect box_mixed(world *w)
{
    switch (tu_rng_below(&w->rng, 8)) {
    case 0: return box_tiny(w);
    case 1: return box_huge(w);
    case 2: return box_point(w);
    case 3: return box_out_of_bounds(w);
    case 4: return w->coincident;
    case 5: { /* snapped boxes that touch edge to edge */
        qg_rect b = w->cfg.bounds, r = box_uniform(w);
        float W = b.max_x - b.min_x, H = b.max_y - b.min_y;
        float step = W / 32, hstep = H / 32;
        r.min_x = snap(w, r.min_x, b.min_x, W);
        r.min_y = snap(w, r.min_y, b.min_y, H);
        r.max_x = r.min_x + step * (float)tu_rng_below(&w->rng, 3);
        r.max_y = r.min_y + hstep * (float)tu_rng_below(&w->rng, 3);
        return r;
    }
    default: return box_uniform(w);
    }
}

static qg_rect gen_box(world *w)
{
    switch (w->d) {
    case D_UNIFORM: return box_uniform(w);
    case D_TINY: return tu_rng_chance(&w->rng, 0.9) ? box_tiny(w) : box_uniform(w);
    case D_HUGE: return box_huge(w);
    case D_POINTS: return box_point(w);
    case D_COINCIDENT: return w->coincident;
    case D_OUT_OF_BOUNDS: return box_out_of_bounds(w);
    default: return box_mixed(w);
    }
}

static int32_t random_live(world *w)
{
    return w->nlive ? w->live[tu_rng_below(&w->rng, (uint32_t)w->nlive)] : -1;
}

/* Query areas: the distribution's own boxes, exact element boxes, areas that
 * touch an element's edge, unbounded areas, the whole plane. */
static qg_rect gen_area(world *w)
{
    qg_rect b = w->cfg.bounds;
    float W = b.max_x - b.min_x, H = b.max_y - b.min_y;
    uint32_t k = tu_rng_below(&w->rng, 20);
    int32_t id = random_live(w);
    if (k < 6)
        return gen_box(w);
    if (k < 10) {
        float x0 = tu_rng_range(&w->rng, b.min_x - W / 2, b.max_x + W / 2);
        float y0 = tu_rng_range(&w->rng, b.min_y - H / 2, b.max_y + H / 2);
        float s = tu_rng_chance(&w->rng, 0.5) ? W / 10 : W / 2;
        return tu_rect(x0, y0, x0 + tu_rng_range(&w->rng, 0, s), y0 + tu_rng_range(&w->rng, 0, s));
    }
    if (k < 12 && id >= 0)
        return w->e[id].box;
    if (k < 14 && id >= 0) { /* shares exactly one edge or corner with it */
        qg_rect e = w->e[id].box;
        float d = tu_rng_range(&w->rng, 0, W / 20);
        switch (tu_rng_below(&w->rng, 4)) {
        case 0: return tu_rect(e.max_x, e.min_y - d, e.max_x + d, e.min_y);
        case 1: return tu_rect(e.min_x - d, e.min_y, e.min_x, e.max_y);
        case 2: return tu_rect(e.min_x, e.max_y, e.max_x, e.max_y + d);
        default: return tu_rect(e.min_x - d, e.min_y - d, e.min_x, e.min_y);
        }
    }
    if (k < 17) { /* some sides unbounded */
        qg_rect a = gen_box(w);
        if (tu_rng_chance(&w->rng, 0.5)) a.min_x = -INF;
        if (tu_rng_chance(&w->rng, 0.5)) a.min_y = -INF;
        if (tu_rng_chance(&w->rng, 0.5)) a.max_x = INF;
        if (tu_rng_chance(&w->rng, 0.5)) a.max_y = INF;
        return a;
    }
    if (k == 17)
        return tu_rect(-INF, -INF, INF, INF);
    if (k == 18)
        return b;
    return box_out_of_bounds(w);
}

static qg_rect gen_move(world *w, qg_rect old)
{
    qg_rect b = w->cfg.bounds;
    float W = b.max_x - b.min_x;
    uint32_t k = tu_rng_below(&w->rng, 10);
    if (k < 5 && w->d != D_COINCIDENT) { /* a small step: often stays in its leaves */
        float s = tu_rng_chance(&w->rng, 0.5) ? W / 2000 : W / 100;
        float dx = tu_rng_range(&w->rng, -s, s), dy = tu_rng_range(&w->rng, -s, s);
        qg_rect n = tu_rect(old.min_x + dx, old.min_y + dy, old.max_x + dx, old.max_y + dy);
        /* Far-away boxes can round to min > max or overflow; fall back. */
        if (!(n.min_x <= n.max_x && n.min_y <= n.max_y) || isinf(n.min_x) || isinf(n.max_x) ||
            isinf(n.min_y) || isinf(n.max_y))
            return old;
        return n;
    }
    if (k < 6)
        return old;
    if (w->d == D_COINCIDENT && k < 9)
        return w->coincident;
    return gen_box(w);
}

/* ---- bookkeeping ------------------------------------------------------- */

static void check_mem(world *w)
{
    if (w->ak.errors)
        wfail(w, "allocator misuse: %s", w->ak.last_error);
    size_t mb = qg_get_stats(w->k).memory_bytes;
    if (mb != w->ak.bytes)
        wfail(w, "memory_bytes %zu, but the allocator holds %zu", mb, w->ak.bytes);
    if (qg_get_stats(w->r).memory_bytes != w->ar.bytes)
        wfail(w, "brute_force memory_bytes %zu, but the allocator holds %zu",
              qg_get_stats(w->r).memory_bytes, w->ar.bytes);
}

static void after_mutation(world *w)
{
    check_mem(w);
    int32_t nk = qg_count(w->k), nr = qg_count(w->r);
    if (nk != w->nlive || nr != w->nlive)
        wfail(w, "qg_count: kind %d, brute_force %d, oracle %d", nk, nr, w->nlive);
    if (w->validate_every > 0 && w->step % w->validate_every == 0) {
        if (qg_validate(w->k) != QG_OK)
            wfail(w, "qg_validate(kind) failed");
        if (qg_validate(w->r) != QG_OK)
            wfail(w, "qg_validate(brute_force) failed");
    }
}

static void fmt_box(char *buf, size_t n, qg_rect r)
{
    snprintf(buf, n, "(%.9g, %.9g, %.9g, %.9g)", (double)r.min_x, (double)r.min_y, (double)r.max_x,
             (double)r.max_y);
}

static void do_insert(world *w, qg_rect box)
{
    w->op = "insert";
    qg_handle hk = qg_insert(w->k, box);
    qg_handle hr = qg_insert(w->r, box);
    char bs[96];
    fmt_box(bs, sizeof bs, box);
    if (hk < 0 || hr < 0)
        wfail(w, "insert %s: kind gave %d, brute_force gave %d", bs, hk, hr);
    if (map_get(w->k2id, w->cap_k2id, hk) >= 0)
        wfail(w, "insert %s returned handle %d, which is already live", bs, hk);
    if (map_get(w->r2id, w->cap_r2id, hr) >= 0)
        wfail(w, "brute_force insert returned live handle %d", hr);
    if (w->ne == w->cap_e) {
        w->cap_e = w->cap_e ? w->cap_e * 2 : 1024;
        w->e = realloc(w->e, (size_t)w->cap_e * sizeof *w->e);
        w->live = realloc(w->live, (size_t)w->cap_e * sizeof *w->live);
        w->pos = realloc(w->pos, (size_t)w->cap_e * sizeof *w->pos);
        assert_true(w->e && w->live && w->pos);
    }
    int32_t id = w->ne++;
    w->e[id] = (elem){box, hk, hr, true};
    grow_map(&w->k2id, &w->cap_k2id, hk);
    grow_map(&w->r2id, &w->cap_r2id, hr);
    w->k2id[hk] = id;
    w->r2id[hr] = id;
    w->pos[id] = w->nlive;
    w->live[w->nlive++] = id;
    after_mutation(w);
}

static void do_remove(world *w, int32_t id)
{
    w->op = "remove";
    elem *e = &w->e[id];
    qg_status sk = qg_remove(w->k, e->hk), sr = qg_remove(w->r, e->hr);
    if (sk != QG_OK || sr != QG_OK)
        wfail(w, "remove of live handle %d: kind %s, brute_force %s", e->hk, qg_status_name(sk),
              qg_status_name(sr));
    w->k2id[e->hk] = -1;
    w->r2id[e->hr] = -1;
    e->live = false;
    int32_t p = w->pos[id], last = w->live[--w->nlive];
    w->live[p] = last;
    w->pos[last] = p;
    w->pos[id] = -1;
    after_mutation(w);
}

static void do_move(world *w, int32_t id, qg_rect box)
{
    w->op = "move";
    elem *e = &w->e[id];
    qg_status sk = qg_move(w->k, e->hk, box);
    qg_status sr = qg_move(w->r, e->hr, box);
    if (sk != QG_OK || sr != QG_OK) {
        char bs[96];
        fmt_box(bs, sizeof bs, box);
        wfail(w, "move handle %d to %s: kind %s, brute_force %s", e->hk, bs, qg_status_name(sk),
              qg_status_name(sr));
    }
    e->box = box;
    after_mutation(w);
}

static void do_clear(world *w)
{
    w->op = "clear";
    qg_clear(w->k);
    qg_clear(w->r);
    for (int32_t i = 0; i < w->nlive; i++) {
        elem *e = &w->e[w->live[i]];
        e->live = false;
        w->k2id[e->hk] = -1;
        w->r2id[e->hr] = -1;
        w->pos[w->live[i]] = -1;
    }
    w->nlive = 0;
    after_mutation(w);
}

static void do_cleanup(world *w)
{
    w->op = "cleanup";
    long req = w->ak.grow_requests;
    qg_cleanup(w->k);
    qg_cleanup(w->r);
    if (w->ak.grow_requests != req)
        wfail(w, "qg_cleanup allocated");
    after_mutation(w);
}

/* Bad calls get their status from both indexes, and change nothing. */
static void do_bad_call(world *w)
{
    w->op = "bad_call";
    qg_handle dead = -1;
    for (int tries = 0; tries < 8 && dead < 0; tries++) {
        qg_handle h = (qg_handle)tu_rng_below(&w->rng, (uint32_t)w->cap_k2id + 8);
        if (map_get(w->k2id, w->cap_k2id, h) < 0)
            dead = h;
    }
    size_t bytes = w->ak.bytes;
    const float NaN = (float)NAN;
    qg_rect bad[] = {{NaN, 0, 1, 1}, {0, 0, INF, 1}, {2, 0, 1, 1}, {0, -INF, 1, 1}};
    qg_rect bb = bad[tu_rng_below(&w->rng, 4)];
    qg_status s;
    if ((s = qg_remove(w->k, dead)) != QG_ERR_HANDLE)
        wfail(w, "qg_remove of dead handle %d = %s", dead, qg_status_name(s));
    if ((s = qg_move(w->k, dead, box_uniform(w))) != QG_ERR_HANDLE)
        wfail(w, "qg_move of dead handle %d = %s", dead, qg_status_name(s));
    qg_rect g;
    if ((s = qg_get(w->k, dead, &g)) != QG_ERR_HANDLE)
        wfail(w, "qg_get of dead handle %d = %s", dead, qg_status_name(s));
    qg_handle h = qg_insert(w->k, bb);
    if (h != QG_ERR_INVALID)
        wfail(w, "qg_insert of a bad box = %d", h);
    int32_t id = random_live(w);
    if (id >= 0 && (s = qg_move(w->k, w->e[id].hk, bb)) != QG_ERR_INVALID)
        wfail(w, "qg_move to a bad box = %s", qg_status_name(s));
    if (w->ak.bytes != bytes)
        wfail(w, "a bad call changed the memory held");
    after_mutation(w);
    if (id >= 0) {
        if (qg_get(w->k, w->e[id].hk, &g) != QG_OK || !tu_rect_same(g, w->e[id].box))
            wfail(w, "a move to a bad box changed the element's box");
    }
}

/* ---- comparing answers ------------------------------------------------- */

static void ids_from_handles(world *w, const tu_collect *c, const int32_t *map, int32_t cap,
                             tu_vec *ids, const char *who)
{
    tu_vec_clear(ids);
    for (size_t i = 0; i < c->out.n; i++) {
        qg_handle h = (qg_handle)c->out.v[i];
        int32_t id = map_get(map, cap, h);
        if (id < 0)
            wfail(w, "%s reported handle %d, which is not live", who, h);
        tu_vec_push(ids, id);
    }
    tu_vec_sort(ids);
    int64_t dup;
    if (tu_vec_has_dup(ids, &dup))
        wfail(w, "%s reported element %d (handle %d) twice", who, (int)dup,
              who[0] == 'k' ? w->e[dup].hk : w->e[dup].hr);
}

static void explain_diff(world *w, const tu_vec *got, const tu_vec *want, const char *who,
                         qg_rect area)
{
    char as[96], bs[96];
    fmt_box(as, sizeof as, area);
    size_t i = 0, j = 0;
    while (i < got->n || j < want->n) {
        if (j == want->n || (i < got->n && got->v[i] < want->v[j])) {
            fmt_box(bs, sizeof bs, w->e[got->v[i]].box);
            wfail(w, "%s, area %s: reported element with box %s (handle %d) that does not overlap "
                     "(%zu results, oracle %zu)",
                  who, as, bs, w->e[got->v[i]].hk, got->n, want->n);
        }
        if (i == got->n || want->v[j] < got->v[i]) {
            fmt_box(bs, sizeof bs, w->e[want->v[j]].box);
            wfail(w, "%s, area %s: missed element with box %s (handle %d) (%zu results, oracle %zu)",
                  who, as, bs, w->e[want->v[j]].hk, got->n, want->n);
        }
        i++, j++;
    }
}

static void oracle_query(world *w, qg_rect area, tu_vec *out)
{
    tu_vec_clear(out);
    for (int32_t i = 0; i < w->nlive; i++)
        if (tu_overlap(w->e[w->live[i]].box, area))
            tu_vec_push(out, w->live[i]);
    tu_vec_sort(out);
}

static void check_query(world *w, qg_rect area, bool as_point)
{
    w->op = as_point ? "query_point" : "query";
    if (as_point)
        area.max_x = area.min_x, area.max_y = area.min_y;
    tu_collect_reset(&w->ck, 0);
    tu_collect_reset(&w->cr, 0);
    long req = w->ak.grow_requests;
    qg_status sk, sr;
    if (as_point) {
        sk = qg_query_point(w->k, area.min_x, area.min_y, tu_collect_query, &w->ck);
        sr = qg_query_point(w->r, area.min_x, area.min_y, tu_collect_query, &w->cr);
    } else {
        sk = qg_query(w->k, area, tu_collect_query, &w->ck);
        sr = qg_query(w->r, area, tu_collect_query, &w->cr);
    }
    if (sk != QG_OK || sr != QG_OK)
        wfail(w, "status: kind %s, brute_force %s", qg_status_name(sk), qg_status_name(sr));
    if (w->ak.grow_requests != req)
        wfail(w, "a query allocated");
    ids_from_handles(w, &w->ck, w->k2id, w->cap_k2id, &w->ik, "kind");
    ids_from_handles(w, &w->cr, w->r2id, w->cap_r2id, &w->ir, "brute_force");
    oracle_query(w, area, &w->io);
    if (tu_vec_first_diff(&w->ir, &w->io) >= 0)
        explain_diff(w, &w->ir, &w->io, "brute_force", area);
    if (tu_vec_first_diff(&w->ik, &w->io) >= 0)
        explain_diff(w, &w->ik, &w->io, qg_kind_name(g_kind), area);
}

/* A query that stops after `stop` results: exactly min(stop, total) calls,
 * each a real hit. */
static void check_query_stop(world *w, qg_rect area)
{
    w->op = "query_early_stop";
    long stop = 1 + (long)tu_rng_below(&w->rng, 5);
    tu_collect_reset(&w->ck, stop);
    if (qg_query(w->k, area, tu_collect_query, &w->ck) != QG_OK)
        wfail(w, "status not QG_OK");
    oracle_query(w, area, &w->io);
    long want = (long)w->io.n < stop ? (long)w->io.n : stop;
    if (w->ck.calls != want)
        wfail(w, "callback returned false after %ld results, but it was called %ld times (%zu hits)",
              stop, w->ck.calls, w->io.n);
    ids_from_handles(w, &w->ck, w->k2id, w->cap_k2id, &w->ik, "kind");
    for (size_t i = 0; i < w->ik.n; i++)
        if (!tu_overlap(w->e[w->ik.v[i]].box, area))
            wfail(w, "early-stopped query reported a box that does not overlap");
}

typedef struct pair_acc {
    world *w;
    const int32_t *map;
    int32_t cap;
    const char *who;
    tu_vec list;
    uint64_t n, hash;
    bool overflow;
    long stop_after;
} pair_acc;

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void pair_add(pair_acc *p, int32_t i, int32_t j)
{
    if (i > j) {
        int32_t t = i;
        i = j;
        j = t;
    }
    uint64_t key = (uint64_t)i << 32 | (uint32_t)j;
    p->n++;
    p->hash += mix64(key + 0x9e3779b97f4a7c15ull);
    if (p->list.n < PAIR_LIST_CAP)
        tu_vec_push(&p->list, (int64_t)key);
    else
        p->overflow = true;
}

static bool pair_cb(qg_handle a, qg_handle b, void *user)
{
    pair_acc *p = user;
    world *w = p->w;
    if (a >= b)
        wfail(w, "%s pairs: called with a=%d >= b=%d", p->who, a, b);
    int32_t i = map_get(p->map, p->cap, a), j = map_get(p->map, p->cap, b);
    if (i < 0 || j < 0)
        wfail(w, "%s pairs: handle %d or %d is not live", p->who, a, b);
    pair_add(p, i, j);
    return !(p->stop_after > 0 && (long)p->n >= p->stop_after);
}

static void pair_finish(world *w, pair_acc *p)
{
    tu_vec_sort(&p->list);
    int64_t dup;
    if (!p->overflow && tu_vec_has_dup(&p->list, &dup))
        wfail(w, "%s pairs: pair (%d,%d) reported twice", p->who,
              w->e[(uint64_t)dup >> 32].hk, w->e[(uint32_t)dup].hk);
}

static void compare_pairs(world *w, pair_acc *got, pair_acc *want)
{
    if (got->n == want->n && got->hash == want->hash &&
        (got->overflow || tu_vec_first_diff(&got->list, &want->list) < 0))
        return;
    if (!got->overflow && !want->overflow) {
        size_t i = 0, j = 0;
        while (i < got->list.n && j < want->list.n && got->list.v[i] == want->list.v[j])
            i++, j++;
        bool extra = j == want->list.n || (i < got->list.n && got->list.v[i] < want->list.v[j]);
        int64_t key = extra ? got->list.v[i] : want->list.v[j];
        int32_t a = (int32_t)((uint64_t)key >> 32), b = (int32_t)(uint32_t)key;
        char as[96], bs[96];
        fmt_box(as, sizeof as, w->e[a].box);
        fmt_box(bs, sizeof bs, w->e[b].box);
        wfail(w, "%s pairs: %s pair %s / %s (handles %d, %d); %" PRIu64 " pairs, oracle %" PRIu64,
              got->who, extra ? "reported a wrong" : "missed the", as, bs, w->e[a].hk, w->e[b].hk,
              got->n, want->n);
    }
    wfail(w, "%s pairs: %" PRIu64 " pairs (hash %016" PRIx64 "), oracle %" PRIu64 " (hash %016" PRIx64 ")",
          got->who, got->n, got->hash, want->n, want->hash);
}

static void check_pairs(world *w)
{
    w->op = "pairs";
    pair_acc pk = {w, w->k2id, w->cap_k2id, qg_kind_name(g_kind), {0}, 0, 0, false, 0};
    pair_acc pr = {w, w->r2id, w->cap_r2id, "brute_force", {0}, 0, 0, false, 0};
    pair_acc po = {w, NULL, 0, "oracle", {0}, 0, 0, false, 0};
    long req = w->ak.grow_requests;
    qg_status sk = qg_pairs(w->k, pair_cb, &pk);
    qg_status sr = qg_pairs(w->r, pair_cb, &pr);
    if (sk != QG_OK || sr != QG_OK)
        wfail(w, "status: kind %s, brute_force %s", qg_status_name(sk), qg_status_name(sr));
    if (w->ak.grow_requests != req)
        wfail(w, "qg_pairs allocated");
    for (int32_t i = 0; i < w->nlive; i++) {
        int32_t a = w->live[i];
        for (int32_t j = i + 1; j < w->nlive; j++)
            if (tu_overlap(w->e[a].box, w->e[w->live[j]].box))
                pair_add(&po, a, w->live[j]);
    }
    pair_finish(w, &pk);
    pair_finish(w, &pr);
    pair_finish(w, &po);
    compare_pairs(w, &pr, &po);
    compare_pairs(w, &pk, &po);
    tu_vec_free(&pk.list);
    tu_vec_free(&pr.list);
    tu_vec_free(&po.list);
}

static void check_pairs_stop(world *w)
{
    w->op = "pairs_early_stop";
    long stop = 1 + (long)tu_rng_below(&w->rng, 4);
    pair_acc pk = {w, w->k2id, w->cap_k2id, qg_kind_name(g_kind), {0}, 0, 0, false, stop};
    if (qg_pairs(w->k, pair_cb, &pk) != QG_OK)
        wfail(w, "status not QG_OK");
    uint64_t total = 0;
    for (int32_t i = 0; i < w->nlive && total < (uint64_t)stop; i++)
        for (int32_t j = i + 1; j < w->nlive; j++)
            total += tu_overlap(w->e[w->live[i]].box, w->e[w->live[j]].box);
    uint64_t want = total < (uint64_t)stop ? total : (uint64_t)stop;
    if (pk.n != want)
        wfail(w, "callback returned false after %ld pairs, but was called %" PRIu64 " times", stop,
              pk.n);
    for (size_t i = 0; i < pk.list.n; i++) {
        int64_t key = pk.list.v[i];
        if (!tu_overlap(w->e[(uint64_t)key >> 32].box, w->e[(uint32_t)key].box))
            wfail(w, "early-stopped pairs reported boxes that do not overlap");
    }
    tu_vec_free(&pk.list);
}

/* qg_get on live and dead handle values of both indexes. */
static void check_get(world *w)
{
    w->op = "get";
    qg_handle h = (qg_handle)tu_rng_below(&w->rng, (uint32_t)w->cap_k2id + 4) - 2;
    qg_rect g;
    qg_status s = qg_get(w->k, h, &g);
    int32_t id = map_get(w->k2id, w->cap_k2id, h);
    if (id < 0 && s != QG_ERR_HANDLE)
        wfail(w, "qg_get(%d) of a dead handle = %s", h, qg_status_name(s));
    if (id >= 0 && (s != QG_OK || !tu_rect_same(g, w->e[id].box)))
        wfail(w, "qg_get(%d) = %s, or a box other than the stored one", h, qg_status_name(s));
}

static void check_all_gets(world *w)
{
    w->op = "get_all";
    for (int32_t i = 0; i < w->nlive; i++) {
        elem *e = &w->e[w->live[i]];
        qg_rect g;
        if (qg_get(w->k, e->hk, &g) != QG_OK || !tu_rect_same(g, e->box))
            wfail(w, "qg_get(%d) lost the element's box", e->hk);
        if (qg_get(w->r, e->hr, &g) != QG_OK || !tu_rect_same(g, e->box))
            wfail(w, "brute_force qg_get(%d) lost the element's box", e->hr);
    }
    qg_stats s = qg_get_stats(w->k);
    if (s.elements != w->nlive)
        wfail(w, "stats.elements %d, live %d", s.elements, w->nlive);
}

/* ---- the random sequence ----------------------------------------------- */

static void run_sequence(world *w, long steps, int32_t target)
{
    for (long s = 0; s < steps; s++) {
        w->step++;
        uint32_t k = tu_rng_below(&w->rng, 1000);
        int32_t id = random_live(w);
        /* Population drifts around `target`: inserts win below it. */
        int insert_weight = w->nlive < target ? 320 : 180;
        if (k < (uint32_t)insert_weight || id < 0) {
            do_insert(w, gen_box(w));
        } else if (k < 430) {
            do_remove(w, id);
        } else if (k < 650) {
            do_move(w, id, gen_move(w, w->e[id].box));
        } else if (k < 680) {
            do_cleanup(w);
        } else if (k < 681 && tu_rng_chance(&w->rng, 0.5)) {
            do_clear(w);
        } else if (k < 820) {
            check_query(w, gen_area(w), false);
        } else if (k < 900) {
            qg_rect a = gen_area(w);
            if (tu_rng_chance(&w->rng, 0.5)) /* a corner of the area: often an element's */
                a.min_x = a.max_x, a.min_y = a.max_y;
            if (isinf(a.min_x) || isinf(a.min_y))
                a.min_x = a.min_y = 0;
            check_query(w, a, true);
        } else if (k < 915) {
            check_query_stop(w, gen_area(w));
        } else if (k < 925) {
            if (w->nlive <= 3000) /* the oracle's pairs are quadratic */
                check_pairs(w);
        } else if (k < 930) {
            check_pairs_stop(w);
        } else if (k < 975) {
            check_get(w);
        } else if (k < 985) {
            w->op = "count";
            if (qg_count(w->k) != w->nlive)
                wfail(w, "qg_count %d, live %d", qg_count(w->k), w->nlive);
        } else {
            do_bad_call(w);
        }
        if (w->step % 512 == 0)
            check_all_gets(w);
    }
    if (w->nlive <= 3000)
        check_pairs(w);
    check_all_gets(w);
}

static uint64_t seed_for(dist d, int cfg, int run)
{
    return g_seed_base ^ mix64((uint64_t)d * 1000003u + (uint64_t)cfg * 1009u + (uint64_t)run + 1);
}

static bool g_verbose;

/* QG_TEST_VERBOSE=1: the time and size of each run, to find slow cases. */
static void report_run(const world *w, clock_t start)
{
    if (!g_verbose)
        return;
    qg_stats s = qg_get_stats(w->k);
    fprintf(stderr, "  %-14s %-14s %7.2f s  steps %ld  live %d  nodes %d  leaves %d  depth %d  bytes %zu\n",
            w->dist_name, w->cfg_name, (double)(clock() - start) / CLOCKS_PER_SEC, w->step,
            w->nlive, s.nodes, s.leaves, s.max_depth_reached, s.memory_bytes);
}

/* A tight quadtree splits a leaf full of boxes that all cover it down to
 * max_depth, so huge and out-of-bounds boxes with a deep max_depth cost
 * 4^depth leaves: correct, but minutes per run. Those distributions cap the
 * depth; the deep configs still run with tiny and clustered boxes. */
static cfg_spec capped(int c, int depth_cap)
{
    cfg_spec cs = CONFIGS[c];
    if (depth_cap > 0 && cs.max_depth > depth_cap)
        cs.max_depth = depth_cap;
    return cs;
}

static void run_dist(dist d, long steps, int32_t target, int depth_cap)
{
    tu_skip_unless_built(g_kind);
    for (int c = 0; c < N_CONFIGS; c++) {
        world w;
        clock_t start = clock();
        cfg_spec cs = capped(c, depth_cap);
        world_open(&w, &cs, d, seed_for(d, c, 0));
        run_sequence(&w, tu_scaled(steps), target);
        report_run(&w, start);
        world_close(&w);
    }
}

static void test_uniform(void **state)
{
    (void)state;
    run_dist(D_UNIFORM, 3000, 400, 0);
}

static void test_tiny(void **state)
{
    (void)state;
    run_dist(D_TINY, 3000, 300, 0);
}

static void test_huge(void **state)
{
    (void)state;
    run_dist(D_HUGE, 1000, 40, 6);
}

static void test_points(void **state)
{
    (void)state;
    run_dist(D_POINTS, 3000, 400, 0);
}

static void test_out_of_bounds(void **state)
{
    (void)state;
    run_dist(D_OUT_OF_BOUNDS, 3000, 300, 8);
}

static void test_mixed(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    for (int c = 0; c < N_CONFIGS; c++)
        for (int run = 0; run < 2; run++) {
            world w;
            clock_t start = clock();
            cfg_spec cs = capped(c, 7);
            world_open(&w, &cs, D_MIXED, seed_for(D_MIXED, c, run));
            /* Larger populations, so validate every few steps only. */
            w.validate_every = run ? 7 : 1;
            run_sequence(&w, tu_scaled(run ? 4000 : 3000), run ? 500 : 300);
            report_run(&w, start);
            world_close(&w);
        }
}

/* 10,000 boxes on exactly the same spot: a tree must stop splitting at its
 * maximum depth instead of recursing forever. */
static void test_coincident(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    /* Boxes (each covers many leaves) and points (on the centre, where the
     * splits are). The deep config gets points only: coincident boxes in a
     * depth-14 tree make one entry per covered leaf, 4^depth of them. */
    static const struct {
        int cfg;
        bool points;
    } runs[] = {{0, false}, {1, true}, {2, true}, {6, false}};
    for (size_t ci = 0; ci < sizeof runs / sizeof *runs; ci++) {
        int c = runs[ci].cfg;
        world w;
        clock_t start = clock();
        world_open(&w, &CONFIGS[c], D_COINCIDENT, seed_for(D_COINCIDENT, c, 0));
        if (runs[ci].points) {
            float x = w.cx[0], y = w.cy[0];
            w.coincident = tu_rect(x, y, x, y);
        }
        w.validate_every = 500;
        /* Always at least the 10,000 the issue names, whatever the scale. */
        int32_t n = (int32_t)(tu_scaled(10000) > 10000 ? tu_scaled(10000) : 10000);
        for (int32_t i = 0; i < n; i++) {
            w.step++;
            do_insert(&w, w.coincident);
        }
        w.op = "stats";
        qg_stats st = qg_get_stats(w.k);
        if (w.cfg.max_depth > 0 && st.max_depth_reached > w.cfg.max_depth)
            wfail(&w, "max_depth_reached %d passes max_depth %d", st.max_depth_reached,
                  w.cfg.max_depth);
        check_query(&w, w.coincident, false);
        check_query(&w, tu_rect(w.coincident.min_x, w.coincident.min_y, w.coincident.min_x,
                                w.coincident.min_y), true);
        if (ci == 0)
            check_pairs(&w); /* 50 million pairs: count and hash */
        w.validate_every = 50;
        /* Churn among the stack: moves out and back, removes, queries. */
        run_sequence(&w, tu_scaled(600), n);
        /* Now empty it and let cleanup collapse everything. */
        while (w.nlive > 0) {
            w.step++;
            do_remove(&w, w.live[w.nlive - 1]);
        }
        for (int i = 0; i < 40; i++)
            do_cleanup(&w);
        w.validate_every = 1;
        after_mutation(&w);
        run_sequence(&w, tu_scaled(300), 50);
        report_run(&w, start);
        world_close(&w);
    }
}

/* Fill, empty to nothing with cleanups between, refill: the deferred
 * cleanup collapses branches level by level and the freed nodes come back. */
static void test_fill_drain(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    for (int c = 0; c < N_CONFIGS; c++) {
        world w;
        world_open(&w, &CONFIGS[c], D_MIXED, seed_for(D_MIXED, c, 7));
        w.validate_every = 1;
        for (int round = 0; round < 3; round++) {
            int32_t n = (int32_t)tu_scaled(500);
            for (int32_t i = 0; i < n; i++) {
                w.step++;
                do_insert(&w, round == 1 ? box_tiny(&w) : box_uniform(&w));
            }
            check_pairs(&w);
            while (w.nlive > 0) {
                w.step++;
                do_remove(&w, random_live(&w));
                if (w.step % 50 == 0) {
                    do_cleanup(&w);
                    check_query(&w, gen_area(&w), false);
                }
            }
            for (int i = 0; i < 3; i++)
                do_cleanup(&w);
            check_query(&w, tu_rect(-INF, -INF, INF, INF), false);
        }
        world_close(&w);
    }
}

/* The same sequence of calls gives the same order of results. */
static void record_order(qg_handle h, tu_vec *v)
{
    tu_vec_push(v, h);
}

static bool order_query_cb(qg_handle h, void *user)
{
    record_order(h, user);
    return true;
}

static bool order_pair_cb(qg_handle a, qg_handle b, void *user)
{
    record_order(a, user);
    record_order(b, user);
    return true;
}

static void test_deterministic_order(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const cfg_spec *cs = &CONFIGS[2];
    qg_index *ix[2];
    for (int i = 0; i < 2; i++) {
        qg_config c = qg_default_config(g_kind);
        c.bounds = cs->bounds;
        c.leaf_capacity = cs->leaf_capacity;
        c.max_depth = cs->max_depth;
        if (g_kind == QG_POINT_GRID)
            c.max_element_size = 64;
        assert_int_equal(qg_create(&c, &ix[i]), QG_OK);
    }
    tu_rng r;
    tu_rng_seed(&r, 1234);
    qg_handle hs[400];
    int n = 0;
    tu_vec va = {0}, vb = {0};
    for (int step = 0; step < (int)tu_scaled(3000); step++) {
        uint32_t k = tu_rng_below(&r, 10);
        float x = tu_rng_range(&r, -50, 1074), y = tu_rng_range(&r, -50, 1074);
        float s = tu_rng_range(&r, 0, 40);
        qg_rect b = tu_rect(x, y, x + s, y + s);
        if (k < 4 && n < 400) {
            qg_handle h0 = qg_insert(ix[0], b), h1 = qg_insert(ix[1], b);
            assert_int_equal(h0, h1);
            assert_true(h0 >= 0);
            hs[n++] = h0;
        } else if (k < 6 && n > 0) {
            uint32_t i = tu_rng_below(&r, (uint32_t)n);
            assert_int_equal(qg_remove(ix[0], hs[i]), QG_OK);
            assert_int_equal(qg_remove(ix[1], hs[i]), QG_OK);
            hs[i] = hs[--n];
        } else if (k < 8 && n > 0) {
            uint32_t i = tu_rng_below(&r, (uint32_t)n);
            assert_int_equal(qg_move(ix[0], hs[i], b), QG_OK);
            assert_int_equal(qg_move(ix[1], hs[i], b), QG_OK);
        } else if (k < 9) {
            qg_cleanup(ix[0]);
            qg_cleanup(ix[1]);
        } else {
            tu_vec_clear(&va);
            tu_vec_clear(&vb);
            qg_rect area = tu_rect(x - 200, y - 200, x + 200, y + 200);
            assert_int_equal(qg_query(ix[0], area, order_query_cb, &va), QG_OK);
            assert_int_equal(qg_query(ix[1], area, order_query_cb, &vb), QG_OK);
            /* and the same index asked twice */
            assert_int_equal(qg_query(ix[1], area, order_query_cb, &vb), QG_OK);
            assert_int_equal(qg_query(ix[0], area, order_query_cb, &va), QG_OK);
            assert_int_equal(qg_pairs(ix[0], order_pair_cb, &va), QG_OK);
            assert_int_equal(qg_pairs(ix[1], order_pair_cb, &vb), QG_OK);
            if (tu_vec_first_diff(&va, &vb) >= 0)
                fail_msg("step %d: two indexes built by the same calls report results in a "
                         "different order",
                         step);
        }
    }
    tu_vec_free(&va);
    tu_vec_free(&vb);
    qg_destroy(ix[0]);
    qg_destroy(ix[1]);
}

int main(int argc, char **argv)
{
    if (!tu_kind_arg(argc, argv, &g_kind))
        return 2;
    g_verbose = getenv("QG_TEST_VERBOSE") && *getenv("QG_TEST_VERBOSE") == '1';
    g_seed_base = tu_env_seed(g_seed_base);
    fprintf(stderr, "contract %s: base seed %" PRIu64 ", scale %g\n", argv[1], g_seed_base,
            tu_scale());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform),             cmocka_unit_test(test_tiny),
        cmocka_unit_test(test_huge),                cmocka_unit_test(test_points),
        cmocka_unit_test(test_coincident),          cmocka_unit_test(test_out_of_bounds),
        cmocka_unit_test(test_mixed),               cmocka_unit_test(test_fill_drain),
        cmocka_unit_test(test_deterministic_order),
    };
    return tu_run_kind_tests("contract", g_kind, tests);
}
