// SPDX-License-Identifier: MIT
/* Ray casts, nearest neighbours and bulk insert, for one kind (argv[1]),
 * against plain loops over the brute-force oracle's boxes: every ray's hit
 * set, its closest hit with ties, every nearest list in (distance2, handle)
 * order; scenes with tiny, zero-size, coincident, huge and out-of-bounds
 * boxes; bad arguments; qg_insert_many against successive qg_insert calls,
 * with allocation failures in both modes. Seeds are printed; QG_TEST_SEED
 * replays one. */
#include "test_util.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static qg_kind g_kind = QG_BRUTE_FORCE;

static qg_config kind_config(void)
{
    qg_config c = qg_default_config(g_kind);
    if (g_kind == QG_POINT_GRID)
        c.max_element_size = 16;
    return c;
}

/* A scene in idx and the oracle: small boxes, a few big ones, zero-size,
 * coincident piles, boxes far outside the bounds; then some removals. */
static void fill(qg_index *idx, qg_index *oracle, tu_rng *r, int n)
{
    for (int i = 0; i < n; i++) {
        float x = tu_rng_range(r, -300, 1324), y = tu_rng_range(r, -300, 1324);
        float w = tu_rng_chance(r, 0.03) ? tu_rng_range(r, 40, 500) : tu_rng_range(r, 0, 10);
        float h = tu_rng_chance(r, 0.5) ? w : tu_rng_range(r, 0, 10);
        if (i % 50 == 0)
            x = y = 256, w = h = 8; /* coincident */
        if (i % 77 == 0)
            w = h = 0;
        if (i % 301 == 0)
            x *= 40; /* far outside */
        qg_rect b = tu_rect(x, y, x + w, y + h);
        qg_handle a = qg_insert(idx, b);
        assert_true(a >= 0);
        assert_int_equal(qg_insert(oracle, b), a);
    }
    for (int i = 0; i < n / 10; i++) {
        qg_handle h = (qg_handle)tu_rng_below(r, (uint32_t)n);
        qg_status s = qg_remove(oracle, h);
        assert_int_equal(qg_remove(idx, h), s);
    }
    qg_cleanup(idx);
}

/* ---- rays --------------------------------------------------------------- */

typedef struct ray_hits {
    tu_vec hits;    /* handle << 32 | float bits of t */
    long calls;
    int mode;       /* 0 all hits, 1 closest, 2 stop after the first */
    float best;
    qg_handle best_h;
} ray_hits;

static float on_hit(qg_handle h, float t, void *user)
{
    ray_hits *r = user;
    r->calls++;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    tu_vec_push(&r->hits, (int64_t)h << 32 | bits);
    if (r->mode == 2)
        return -1.0f;
    if (r->mode == 1) {
        if (t < r->best || (t == r->best && h < r->best_h))
            r->best = t, r->best_h = h;
        return t;
    }
    return INFINITY; /* larger than any max_t: max_t stays */
}

/* All hits the oracle's boxes give, by qg_ray_box. */
static void ray_want(const qg_index *oracle, float ox, float oy, float dx, float dy, float max_t, tu_vec *out,
                     float *best, qg_handle *best_h)
{
    *best = INFINITY;
    *best_h = -1;
    for (qg_handle h = 0; h < 4 * qg_count(oracle) + 64; h++) {
        qg_rect b;
        float t;
        if (qg_get(oracle, h, &b) != QG_OK || !qg_ray_box(b, ox, oy, dx, dy, max_t, &t))
            continue;
        uint32_t bits;
        memcpy(&bits, &t, sizeof bits);
        tu_vec_push(out, (int64_t)h << 32 | bits);
        if (t < *best || (t == *best && h < *best_h))
            *best = t, *best_h = h;
    }
    tu_vec_sort(out);
}

static void check_ray(const qg_index *idx, const qg_index *oracle, uint64_t seed, int i, float ox, float oy, float dx,
                      float dy, float max_t)
{
    tu_vec want = {0};
    float best;
    qg_handle best_h;
    ray_want(oracle, ox, oy, dx, dy, max_t, &want, &best, &best_h);
    ray_hits got = {{0}, 0, 0, INFINITY, -1};
    assert_int_equal(qg_raycast(idx, ox, oy, dx, dy, max_t, on_hit, &got), QG_OK);
    tu_vec_sort(&got.hits);
    int64_t dup;
    if (tu_vec_has_dup(&got.hits, &dup))
        fail_msg("seed %llu ray %d: handle %lld reported twice", (unsigned long long)seed, i, (long long)(dup >> 32));
    long d = tu_vec_first_diff(&got.hits, &want);
    if (d >= 0 || got.hits.n != want.n)
        fail_msg("seed %llu ray %d (%g,%g)+t(%g,%g) t<=%g: %zu hits, qg_ray_box says %zu (first difference at %ld)",
                 (unsigned long long)seed, i, (double)ox, (double)oy, (double)dx, (double)dy, (double)max_t,
                 got.hits.n, want.n, d);
    /* closest hit: the callback shrinks max_t; the tie-broken best is seen */
    ray_hits near = {{0}, 0, 1, INFINITY, -1};
    assert_int_equal(qg_raycast(idx, ox, oy, dx, dy, max_t, on_hit, &near), QG_OK);
    if (near.best_h != best_h || (best_h >= 0 && near.best != best))
        fail_msg("seed %llu ray %d: closest %d at %g, want %d at %g", (unsigned long long)seed, i, near.best_h,
                 (double)near.best, best_h, (double)best);
    assert_true(near.calls <= (long)want.n);
    /* a negative return stops the cast */
    ray_hits stop = {{0}, 0, 2, INFINITY, -1};
    assert_int_equal(qg_raycast(idx, ox, oy, dx, dy, max_t, on_hit, &stop), QG_OK);
    assert_int_equal(stop.calls, want.n > 0 ? 1 : 0);
    tu_vec_free(&want);
    tu_vec_free(&got.hits);
    tu_vec_free(&near.hits);
    tu_vec_free(&stop.hits);
}

static void test_raycast(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    tu_rng r;
    qg_index *idx, *oracle;
    const uint64_t seed = tu_begin_pair(0x4a7, &r, kind_config(), &idx, &oracle);
    ray_hits none = {{0}, 0, 0, INFINITY, -1};
    assert_int_equal(qg_raycast(idx, 1, 1, 1, 0, 100, on_hit, &none), QG_OK); /* empty */
    assert_int_equal(none.calls, 0);
    fill(idx, oracle, &r, (int)tu_scaled(2500));
    for (int i = 0; i < (int)tu_scaled(400); i++) {
        float ox = tu_rng_range(&r, -400, 1424), oy = tu_rng_range(&r, -400, 1424);
        float a = tu_rng_range(&r, 0, 6.2831853f);
        float dx = cosf(a), dy = sinf(a), max_t = tu_rng_range(&r, 0, 600);
        switch (i % 10) {
        case 0: dx = 1, dy = 0; break;                    /* axis-aligned */
        case 1: dx = 0, dy = -1; break;
        case 2: max_t = INFINITY; break;                  /* unbounded */
        case 3: max_t = 0; break;                         /* a point */
        case 4: dx = dy = 0; break;                       /* zero direction */
        case 5: ox = oy = 258, max_t = 50; break;         /* inside the coincident pile */
        case 6: dx *= 1000, dy *= 1000, max_t = 0.5f; break; /* long direction, short t */
        case 7: ox *= 30, dx = -ox / 100, dy = 0, max_t = 200; break; /* from far outside, inwards */
        case 8: dx *= 1e-3f, dy *= 1e-3f, max_t = 1e5f; break;
        default: break;
        }
        check_ray(idx, oracle, seed, i, ox, oy, dx, dy, max_t);
    }
    /* bad arguments change nothing and call nothing */
    ray_hits bad = {{0}, 0, 0, INFINITY, -1};
    assert_int_equal(qg_raycast(idx, NAN, 0, 1, 0, 10, on_hit, &bad), QG_ERR_INVALID);
    assert_int_equal(qg_raycast(idx, 0, INFINITY, 1, 0, 10, on_hit, &bad), QG_ERR_INVALID);
    assert_int_equal(qg_raycast(idx, 0, 0, NAN, 0, 10, on_hit, &bad), QG_ERR_INVALID);
    assert_int_equal(qg_raycast(idx, 0, 0, 1, -INFINITY, 10, on_hit, &bad), QG_ERR_INVALID);
    assert_int_equal(qg_raycast(idx, 0, 0, 1, 0, NAN, on_hit, &bad), QG_ERR_INVALID);
    assert_int_equal(qg_raycast(idx, 0, 0, 1, 0, -1, on_hit, &bad), QG_ERR_INVALID);
    assert_int_equal(qg_raycast(idx, 0, 0, 1, 0, 10, NULL, &bad), QG_ERR_INVALID);
    assert_int_equal(qg_raycast(NULL, 0, 0, 1, 0, 10, on_hit, &bad), QG_ERR_INVALID);
    assert_int_equal(bad.calls, 0);
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
    qg_destroy(oracle);
}

/* The formula of the workload, on hand-made cases. */
static void test_ray_box(void **state)
{
    (void)state;
    float t = -1;
    qg_rect b = tu_rect(2, 2, 4, 4);
    assert_true(qg_ray_box(b, 0, 3, 1, 0, 10, &t));
    assert_true(t == 2.0f);
    assert_false(qg_ray_box(b, 0, 3, 1, 0, 1.99f, &t));
    assert_true(qg_ray_box(b, 0, 3, 1, 0, 2.0f, &t)); /* touching at max_t */
    assert_true(qg_ray_box(b, 3, 3, 0, 0, 0, &t));    /* inside, no direction */
    assert_true(t == 0.0f);
    assert_false(qg_ray_box(b, 5, 3, 0, 0, 10, &t));
    assert_true(qg_ray_box(b, 0, 4, 1, 0, 10, &t)); /* along an edge: closed */
    assert_false(qg_ray_box(b, 0, 4.001f, 1, 0, 10, &t));
    assert_true(qg_ray_box(b, 6, 6, -1, -1, INFINITY, &t));
    assert_true(t == 2.0f);
    assert_false(qg_ray_box(b, 6, 6, 1, 1, INFINITY, &t));
    assert_true(qg_ray_box(tu_rect(1, 1, 1, 1), 0, 0, 1, 1, 1, NULL)); /* a point box, at the end */
    assert_true(qg_point_box_distance2(b, 3, 3) == 0.0f);
    assert_true(qg_point_box_distance2(b, 0, 0) == 8.0f);
    assert_true(qg_point_box_distance2(b, 3, 7) == 9.0f);
}

/* ---- nearest ------------------------------------------------------------ */

typedef struct near_ref {
    float d;
    qg_handle h;
} near_ref;

static int cmp_near(const void *a, const void *b)
{
    const near_ref *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    return (x->h > y->h) - (x->h < y->h);
}

static void check_nearest(const qg_index *idx, const qg_index *oracle, uint64_t seed, int i, float x, float y, int32_t k,
                          float max_d2)
{
    const int32_t cap = 4 * qg_count(oracle) + 64;
    near_ref *all = malloc((size_t)cap * sizeof *all);
    assert_non_null(all);
    int32_t n = 0;
    for (qg_handle h = 0; h < cap; h++) {
        qg_rect b;
        if (qg_get(oracle, h, &b) != QG_OK)
            continue;
        float d = qg_point_box_distance2(b, x, y);
        if (d <= max_d2)
            all[n++] = (near_ref){d, h};
    }
    qsort(all, (size_t)n, sizeof *all, cmp_near);
    const int32_t want = n < k ? n : k;
    qg_handle *hs = malloc(((size_t)k + 1) * sizeof *hs);
    float *ds = malloc(((size_t)k + 1) * sizeof *ds);
    assert_non_null(hs);
    assert_non_null(ds);
    int32_t found = -1;
    assert_int_equal(qg_nearest(idx, x, y, k, max_d2, hs, i % 3 ? ds : NULL, &found), QG_OK);
    if (found != want)
        fail_msg("seed %llu query %d (%g,%g) k=%d: found %d, want %d", (unsigned long long)seed, i, (double)x,
                 (double)y, k, found, want);
    for (int32_t j = 0; j < want; j++) {
        if (hs[j] != all[j].h || (i % 3 && ds[j] != all[j].d))
            fail_msg("seed %llu query %d (%g,%g) k=%d: #%d is %d, want %d at %g", (unsigned long long)seed, i,
                     (double)x, (double)y, k, j, hs[j], all[j].h, (double)all[j].d);
    }
    free(all);
    free(hs);
    free(ds);
}

static void test_nearest(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    tu_rng r;
    qg_index *idx, *oracle;
    const uint64_t seed = tu_begin_pair(0x4ea4, &r, kind_config(), &idx, &oracle);
    qg_handle h1[4];
    int32_t found = -1;
    assert_int_equal(qg_nearest(idx, 0, 0, 4, INFINITY, h1, NULL, &found), QG_OK); /* empty */
    assert_int_equal(found, 0);
    fill(idx, oracle, &r, (int)tu_scaled(2000));
    for (int i = 0; i < (int)tu_scaled(300); i++) {
        float x = tu_rng_range(&r, -500, 1524), y = tu_rng_range(&r, -500, 1524);
        int32_t k = (int32_t)tu_rng_below(&r, 12);
        float max_d2 = INFINITY;
        switch (i % 8) {
        case 0: x = y = 260; break;                         /* on the coincident pile: ties */
        case 1: max_d2 = tu_rng_range(&r, 0, 400); break;
        case 2: k = qg_count(oracle) + 5; break;            /* more than there are */
        case 3: max_d2 = 0; break;                          /* inside only */
        case 4: x *= 60, y *= -60; break;                   /* far away */
        default: break;
        }
        if (i % 8 == 2 && i > 40)
            continue; /* the whole population once is enough */
        check_nearest(idx, oracle, seed, i, x, y, k, max_d2);
    }
    /* bad arguments */
    assert_int_equal(qg_nearest(idx, NAN, 0, 2, 1, h1, NULL, &found), QG_ERR_INVALID);
    assert_int_equal(found, 0);
    assert_int_equal(qg_nearest(idx, 0, INFINITY, 2, 1, h1, NULL, &found), QG_ERR_INVALID);
    assert_int_equal(qg_nearest(idx, 0, 0, -1, 1, h1, NULL, &found), QG_ERR_INVALID);
    assert_int_equal(qg_nearest(idx, 0, 0, 2, NAN, h1, NULL, &found), QG_ERR_INVALID);
    assert_int_equal(qg_nearest(idx, 0, 0, 2, -1, h1, NULL, &found), QG_ERR_INVALID);
    assert_int_equal(qg_nearest(idx, 0, 0, 2, 1, NULL, NULL, &found), QG_ERR_INVALID);
    assert_int_equal(qg_nearest(idx, 0, 0, 2, 1, h1, NULL, NULL), QG_ERR_INVALID);
    assert_int_equal(qg_nearest(NULL, 0, 0, 2, 1, h1, NULL, &found), QG_ERR_INVALID);
    assert_int_equal(qg_nearest(idx, 0, 0, 0, 1, NULL, NULL, &found), QG_OK);
    assert_int_equal(found, 0);
    qg_destroy(idx);
    qg_destroy(oracle);
}

/* ---- lattice scenes and unsettled layouts -------------------------------- */

/* Rays and nearest searches where rounding decides: boxes on a lattice of
 * 16 (the cell and node edges of many kinds' layouts), touching one another,
 * zero-size boxes on lattice points, rays along lattice lines and through
 * lattice corners, nearest points on lattice points (ties everywhere). Then
 * the same after moves and removes with no qg_cleanup (kinds whose layout
 * settles in qg_cleanup answer from their unsettled state: tails,
 * tombstones, stale snapshots), and once more after the cleanup. */
static void lattice_checks(const qg_index *idx, const qg_index *oracle, uint64_t seed, tu_rng *r, int rounds)
{
    for (int i = 0; i < rounds; i++) {
        const float ox = 16.0f * (float)tu_rng_below(r, 70) - 64.0f, oy = 16.0f * (float)tu_rng_below(r, 70) - 64.0f;
        float dx = 0, dy = 0, max_t = 16.0f * (float)tu_rng_below(r, 40);
        switch (i % 6) {
        case 0: dx = 1; break;
        case 1: dy = -1; break;
        case 2: dx = -1, dy = 1; break;           /* through lattice corners */
        case 3: dx = 2, dy = 1; max_t = INFINITY; break;
        case 4: dx = 0, dy = 0; break;            /* a lattice point */
        default: dx = 1e-7f, dy = 1; break;       /* nearly along a line */
        }
        check_ray(idx, oracle, seed, i, ox, oy, dx, dy, max_t);
        const float nx = 16.0f * (float)tu_rng_below(r, 70) - 64.0f, ny = 8.0f * (float)tu_rng_below(r, 140) - 64.0f;
        check_nearest(idx, oracle, seed, i, nx, ny, 1 + (int32_t)tu_rng_below(r, 20), i % 4 ? INFINITY : 256.0f);
    }
}

static void test_lattice_unsettled(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    tu_rng r;
    qg_index *idx, *oracle;
    const uint64_t seed = tu_begin_pair(0x1a77, &r, kind_config(), &idx, &oracle);
    const int n = (int)tu_scaled(1500);
    for (int i = 0; i < n; i++) {
        const float x = 16.0f * (float)tu_rng_below(&r, 66) - 32.0f, y = 16.0f * (float)tu_rng_below(&r, 66) - 32.0f;
        const float w = i % 7 == 0 ? 0.0f : 16.0f * (float)(1 + tu_rng_below(&r, 2)), h = i % 5 == 0 ? 16.0f : w;
        const qg_rect b = tu_rect(x, y, x + w, y + h);
        const qg_handle a = qg_insert(idx, b);
        assert_true(a >= 0);
        assert_int_equal(qg_insert(oracle, b), a);
    }
    qg_cleanup(idx);
    lattice_checks(idx, oracle, seed, &r, (int)tu_scaled(120));
    /* unsettled: small moves, far moves, removes, no cleanup */
    for (int i = 0; i < n; i++) {
        qg_rect b;
        if (qg_get(oracle, i, &b) != QG_OK || !tu_rng_chance(&r, 0.4))
            continue;
        if (tu_rng_chance(&r, 0.1)) {
            assert_int_equal(qg_remove(idx, i), QG_OK);
            assert_int_equal(qg_remove(oracle, i), QG_OK);
            continue;
        }
        const float step = tu_rng_chance(&r, 0.3) ? 16.0f * (float)((int)tu_rng_below(&r, 21) - 10) : (float)((int)tu_rng_below(&r, 3) - 1);
        const float sx = step, sy = tu_rng_chance(&r, 0.5) ? step : -step;
        b = tu_rect(b.min_x + sx, b.min_y + sy, b.max_x + sx, b.max_y + sy);
        assert_int_equal(qg_move(idx, i, b), QG_OK);
        assert_int_equal(qg_move(oracle, i, b), QG_OK);
    }
    lattice_checks(idx, oracle, seed, &r, (int)tu_scaled(120));
    qg_cleanup(idx);
    assert_int_equal(qg_validate(idx), QG_OK);
    lattice_checks(idx, oracle, seed, &r, (int)tu_scaled(120));
    qg_destroy(idx);
    qg_destroy(oracle);
}

/* ---- bulk insert -------------------------------------------------------- */

static void random_boxes(tu_rng *r, qg_rect *b, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        float x = tu_rng_range(r, -200, 1224), y = tu_rng_range(r, -200, 1224);
        float s = tu_rng_chance(r, 0.05) ? tu_rng_range(r, 20, 300) : tu_rng_range(r, 0, 9);
        b[i] = tu_rect(x, y, x + s, y + s);
    }
}

static void test_insert_many(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const uint64_t seed = tu_env_seed(0xb01c);
    printf("seed %llu\n", (unsigned long long)seed);
    tu_rng r;
    tu_rng_seed(&r, seed);
    qg_config c = kind_config();
    qg_index *idx = NULL, *twin = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    assert_int_equal(qg_create(&c, &twin), QG_OK);
    enum { N = 3000 };
    qg_rect *b = malloc(N * sizeof *b);
    qg_handle *h = malloc(N * sizeof *h);
    assert_non_null(b);
    assert_non_null(h);
    for (int round = 0; round < 6; round++) {
        const int32_t n = (int32_t)tu_rng_below(&r, N) + (round == 0 ? 0 : 1);
        random_boxes(&r, b, n);
        assert_int_equal(qg_insert_many(idx, b, n, h), QG_OK);
        for (int32_t i = 0; i < n; i++)
            assert_int_equal(qg_insert(twin, b[i]), h[i]); /* the same handles */
        tu_expect_same(idx, twin, 2 * N * 6, "seed %llu round %d", (unsigned long long)seed, round);
        /* churn: free handles are reused in order */
        for (int i = 0; i < 300; i++) {
            qg_handle x = (qg_handle)tu_rng_below(&r, (uint32_t)(qg_count(twin) + 1));
            qg_status s = qg_remove(twin, x);
            assert_int_equal(qg_remove(idx, x), s);
        }
        qg_cleanup(idx);
    }
    /* a bad box anywhere: nothing inserted */
    random_boxes(&r, b, 100);
    tu_snapshot before = {0};
    tu_snapshot_take(idx, 2 * N * 6, &before);
    b[73].max_y = NAN;
    assert_int_equal(qg_insert_many(idx, b, 100, h), QG_ERR_INVALID);
    b[73] = tu_rect(5, 5, 4, 6);
    assert_int_equal(qg_insert_many(idx, b, 100, h), QG_ERR_INVALID);
    b[73] = tu_rect(0, 0, 1, INFINITY);
    assert_int_equal(qg_insert_many(idx, b, 100, h), QG_ERR_INVALID);
    assert_int_equal(qg_insert_many(idx, b, -1, h), QG_ERR_INVALID);
    assert_int_equal(qg_insert_many(idx, NULL, 3, h), QG_ERR_INVALID);
    assert_int_equal(qg_insert_many(idx, b, 3, NULL), QG_ERR_INVALID);
    assert_int_equal(qg_insert_many(NULL, b, 3, h), QG_ERR_INVALID);
    assert_int_equal(qg_insert_many(idx, NULL, 0, NULL), QG_OK);
    tu_expect_unchanged(idx, &before, "seed %llu: a rejected qg_insert_many changed the index",
                        (unsigned long long)seed);
    free(b);
    free(h);
    qg_destroy(idx);
    qg_destroy(twin);
}

/* The pairs of boxes b[0..n) (handle i = box i), sorted as tu_collect_pair
 * stores them: a sweep over min_x, independent of the library. */
static const qg_rect *g_sweep_boxes;
static int sweep_cmp(const void *a, const void *b)
{
    const float x = g_sweep_boxes[*(const int32_t *)a].min_x, y = g_sweep_boxes[*(const int32_t *)b].min_x;
    return (x > y) - (x < y);
}

static void sweep_pairs(const qg_rect *b, int32_t n, tu_vec *out)
{
    int32_t *o = malloc((size_t)n * sizeof *o);
    assert_non_null(o);
    for (int32_t i = 0; i < n; i++)
        o[i] = i;
    g_sweep_boxes = b;
    qsort(o, (size_t)n, sizeof *o, sweep_cmp);
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = i + 1; j < n && b[o[j]].min_x <= b[o[i]].max_x; j++)
            if (tu_overlap(b[o[i]], b[o[j]])) {
                const int64_t lo = o[i] < o[j] ? o[i] : o[j], hi = o[i] < o[j] ? o[j] : o[i];
                tu_vec_push(out, lo * ((int64_t)1 << 32) + hi);
            }
    tu_vec_sort(out);
    free(o);
}

static void expect_pairs(const qg_index *idx, const qg_rect *b, int32_t n, const char *what)
{
    tu_vec want = {0};
    tu_collect got;
    memset(&got, 0, sizeof got);
    sweep_pairs(b, n, &want);
    assert_int_equal(qg_pairs(idx, tu_collect_pair, &got), QG_OK);
    tu_vec_sort(&got.out);
    if (got.out.n != want.n || (want.n > 0 && memcmp(got.out.v, want.v, want.n * sizeof *want.v) != 0))
        fail_msg("%s: %zu pairs, the sweep finds %zu", what, got.out.n, want.n);
    tu_vec_free(&want);
    tu_vec_free(&got.out);
}

/* qg_insert_many builds a split tree: into an empty tree (it used to leave
 * every element in the root leaf, so qg_pairs tested n^2/2 pairs, and
 * neither qg_cleanup nor later moves split it), and a clustered batch into
 * a built one (leaves it took past twice leaf_capacity stayed whole) splits
 * as the same boxes inserted one at a time do. Structure, not time. */
static void test_insert_many_splits(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    if (g_kind != QG_QUADTREE && g_kind != QG_LOOSE_QUADTREE && g_kind != QG_LEVEL_QUADTREE &&
        g_kind != QG_BUCKET_QUADTREE)
        skip();
    const uint64_t seed = tu_env_seed(0x5b1c);
    printf("seed %llu\n", (unsigned long long)seed);
    tu_rng r;
    tu_rng_seed(&r, seed);
    static const int32_t sizes[] = {3000, 30000};
    for (int k = 0; k < 2; k++) {
        const int32_t n = sizes[k], m = n / 10;
        const float side = 16.0f * sqrtf((float)n);
        qg_rect *b = malloc((size_t)(n + m) * sizeof *b);
        qg_handle *h = malloc((size_t)(n + m) * sizeof *h);
        assert_non_null(b);
        assert_non_null(h);
        for (int32_t i = 0; i < n; i++) {
            const float x = tu_rng_range(&r, 0, side), y = tu_rng_range(&r, 0, side);
            b[i] = tu_rect(x, y, x + 4, y + 4);
        }
        for (int32_t i = n; i < n + m; i++) { /* a cluster, 1/16 of the side wide */
            const float x = side / 3 + tu_rng_range(&r, 0, side / 16), y = side / 3 + tu_rng_range(&r, 0, side / 16);
            b[i] = tu_rect(x, y, x + 4, y + 4);
        }
        qg_config c = qg_default_config(g_kind);
        qg_index *idx = NULL, *twin = NULL;
        assert_int_equal(qg_create(&c, &idx), QG_OK);
        assert_int_equal(qg_create(&c, &twin), QG_OK);
        assert_int_equal(qg_insert_many(idx, b, n, h), QG_OK);
        for (int32_t i = 0; i < n; i++)
            assert_int_equal(h[i], i);
        qg_stats st = qg_get_stats(idx);
        if (st.leaves <= n / 64)
            fail_msg("seed %llu: %d boxes inserted at once into an empty tree lie in %d leaves",
                     (unsigned long long)seed, n, st.leaves);
        qg_cleanup(idx);
        st = qg_get_stats(idx);
        if (st.leaves <= n / 64)
            fail_msg("seed %llu: %d boxes, %d leaves after qg_cleanup", (unsigned long long)seed, n, st.leaves);
        expect_pairs(idx, b, n, "an empty tree's batch");
        if (n <= 3000) {
            qg_index *oracle = NULL;
            qg_config co = qg_default_config(QG_BRUTE_FORCE);
            assert_int_equal(qg_create(&co, &oracle), QG_OK);
            assert_int_equal(qg_insert_many(oracle, b, n, h), QG_OK);
            tu_expect_same(idx, oracle, n, "seed %llu: %d boxes at once", (unsigned long long)seed, n);
            qg_destroy(oracle);
        }
        /* the clustered batch into the built tree, and the same boxes one
         * at a time into a twin built the same way */
        assert_int_equal(qg_insert_many(twin, b, n, h), QG_OK);
        qg_cleanup(twin);
        assert_int_equal(qg_insert_many(idx, b + n, m, h + n), QG_OK);
        for (int32_t i = n; i < n + m; i++)
            assert_int_equal(qg_insert(twin, b[i]), h[i]);
        const qg_stats sa = qg_get_stats(idx), sb = qg_get_stats(twin);
        if ((int64_t)sa.leaves * 10 < (int64_t)sb.leaves * 9 || sa.max_depth_reached < sb.max_depth_reached)
            fail_msg("seed %llu: a clustered batch of %d: %d leaves, depth %d; one at a time: %d leaves, depth %d",
                     (unsigned long long)seed, m, sa.leaves, sa.max_depth_reached, sb.leaves, sb.max_depth_reached);
        expect_pairs(idx, b, n + m, "a clustered batch");
        qg_destroy(idx);
        qg_destroy(twin);
        free(b);
        free(h);
    }
}

/* The k-th allocation fails, once or from then on: QG_ERR_NOMEM, and the
 * index answers as before and gives the same handles to the next inserts. */
static qg_status insert_many_run(tu_alloc *ta, long k, void *user)
{
    const uint64_t seed = *(const uint64_t *)user;
    enum { N0 = 500, N = 700 };
    static qg_rect b0[N0], b[N];
    static qg_handle h0[N0], h[N], ht[N];
    tu_rng r;
    tu_rng_seed(&r, seed);
    random_boxes(&r, b0, N0);
    random_boxes(&r, b, N);
    qg_config c = kind_config();
    c.allocator = tu_allocator(ta);
    qg_index *idx = NULL, *twin = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    qg_config ct = kind_config();
    assert_int_equal(qg_create(&ct, &twin), QG_OK);
    assert_int_equal(qg_insert_many(idx, b0, N0, h0), QG_OK);
    for (int32_t i = 0; i < N0; i++)
        assert_int_equal(qg_insert(twin, b0[i]), h0[i]);
    for (int32_t i = 0; i < N0; i += 3) { /* free handles to reuse */
        assert_int_equal(qg_remove(idx, h0[i]), QG_OK);
        assert_int_equal(qg_remove(twin, h0[i]), QG_OK);
    }
    const size_t bytes = ta->bytes;
    tu_alloc_fail_in(ta, k);
    const qg_status s = qg_insert_many(idx, b, N, h);
    tu_alloc_disarm(ta);
    /* A failed batch gives back all it grew: the bytes held are those before
     * the call, and memory_bytes says so. */
    if (s == QG_ERR_NOMEM && ta->bytes != bytes)
        fail_msg("seed %llu allocation %ld: QG_ERR_NOMEM, but %zu bytes became %zu", (unsigned long long)seed, k,
                 bytes, ta->bytes);
    assert_int_equal(qg_get_stats(idx).memory_bytes, ta->bytes);
    if (s == QG_OK) {
        for (int32_t i = 0; i < N; i++)
            assert_int_equal(qg_insert(twin, b[i]), h[i]);
    } else if (s != QG_ERR_NOMEM) {
        fail_msg("seed %llu allocation %ld: %s", (unsigned long long)seed, k, qg_status_name(s));
    }
    tu_expect_same(idx, twin, 2 * (N0 + N), "seed %llu allocation %ld (%s)", (unsigned long long)seed, k,
                   qg_status_name(s));
    if (s != QG_OK) {
        /* the next inserts get the handles the failed call would have */
        assert_int_equal(qg_insert_many(idx, b, 5, h), QG_OK);
        for (int32_t i = 0; i < 5; i++)
            assert_int_equal(qg_insert(twin, b[i]), (ht[i] = h[i]));
    }
    qg_destroy(idx);
    qg_destroy(twin);
    return s;
}

static void test_insert_many_oom(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    uint64_t seed = tu_env_seed(0x0b1c);
    printf("seed %llu\n", (unsigned long long)seed);
    tu_each_failure_point("qg_insert_many", 20000, insert_many_run, &seed);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ray_box),     cmocka_unit_test(test_raycast),
        cmocka_unit_test(test_nearest),     cmocka_unit_test(test_lattice_unsettled),
        cmocka_unit_test(test_insert_many), cmocka_unit_test(test_insert_many_oom),
        cmocka_unit_test(test_insert_many_splits),
    };
    return tu_kind_main_tests(argc, argv, "queries", &g_kind, tests);
}
