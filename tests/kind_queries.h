// SPDX-License-Identifier: MIT
/* Hard cases for a kind's own qg_raycast and qg_nearest, shared by
 * test_grid.c, test_multi_grid.c and test_loose_grid.c: every answer is
 * checked against a plain loop over qg_ray_box / qg_point_box_distance2 on
 * the live handles below `high`. Static functions only: each test program
 * includes it once. */
#ifndef QG_TEST_KIND_QUERIES_H
#define QG_TEST_KIND_QUERIES_H

#include "test_util.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define KQ_MAX 8192

typedef struct kq_rec {
    int32_t n;
    bool closest;
    float max_t;
    qg_handle h[KQ_MAX];
    float t[KQ_MAX];
} kq_rec;

static float kq_on_hit(qg_handle h, float t, void *user)
{
    kq_rec *r = user;
    assert_true(r->n < KQ_MAX);
    r->h[r->n] = h;
    r->t[r->n] = t;
    r->n++;
    return r->closest ? t : r->max_t;
}

static int kq_cmp_handle(const void *a, const void *b)
{
    const qg_handle x = *(const qg_handle *)a, y = *(const qg_handle *)b;
    return (x > y) - (x < y);
}

/* One ray in both modes against the plain loop. */
static void kq_check_ray(const qg_index *idx, qg_handle high, float ox, float oy, float dx, float dy, float max_t)
{
    static kq_rec got;
    static qg_handle want[KQ_MAX];
    static float want_t[KQ_MAX];
    int32_t nw = 0;
    float best = INFINITY;
    for (qg_handle h = 0; h < high; h++) {
        qg_rect b;
        float t;
        if (qg_get(idx, h, &b) != QG_OK || !qg_ray_box(b, ox, oy, dx, dy, max_t, &t))
            continue;
        assert_true(nw < KQ_MAX);
        want[nw] = h;
        want_t[nw++] = t;
        best = t < best ? t : best;
    }
    /* All hits: each once, at its own t. */
    got.n = 0;
    got.closest = false;
    got.max_t = max_t;
    assert_int_equal(qg_raycast(idx, ox, oy, dx, dy, max_t, kq_on_hit, &got), QG_OK);
    if (got.n != nw)
        print_error("ray (%.9g %.9g) + t (%.9g %.9g), max_t %.9g: %d hits, want %d\n", (double)ox, (double)oy,
                    (double)dx, (double)dy, (double)max_t, got.n, nw);
    assert_int_equal(got.n, nw);
    for (int32_t i = 0; i < got.n; i++) {
        qg_rect b;
        float t;
        assert_int_equal(qg_get(idx, got.h[i], &b), QG_OK);
        assert_true(qg_ray_box(b, ox, oy, dx, dy, max_t, &t));
        assert_true(t == got.t[i]);
    }
    qsort(got.h, (size_t)got.n, sizeof(qg_handle), kq_cmp_handle);
    for (int32_t i = 0; i < got.n; i++)
        assert_int_equal(got.h[i], want[i]);
    /* Closest hit: every element at the smallest t is seen. */
    got.n = 0;
    got.closest = true;
    assert_int_equal(qg_raycast(idx, ox, oy, dx, dy, max_t, kq_on_hit, &got), QG_OK);
    if (nw == 0) {
        assert_int_equal(got.n, 0);
        return;
    }
    float low = INFINITY;
    for (int32_t i = 0; i < got.n; i++)
        low = got.t[i] < low ? got.t[i] : low;
    assert_true(low == best);
    int32_t ties_got = 0, ties_want = 0;
    for (int32_t i = 0; i < got.n; i++)
        ties_got += got.t[i] == best;
    for (int32_t i = 0; i < nw; i++) {
        if (want_t[i] != best)
            continue;
        ties_want++;
        bool seen = false;
        for (int32_t j = 0; j < got.n && !seen; j++)
            seen = got.h[j] == want[i] && got.t[j] == best;
        assert_true(seen);
    }
    assert_int_equal(ties_got, ties_want);
}

typedef struct kq_near {
    float d2;
    qg_handle h;
} kq_near;

static int kq_cmp_near(const void *a, const void *b)
{
    const kq_near *x = a, *y = b;
    if (x->d2 != y->d2)
        return x->d2 < y->d2 ? -1 : 1;
    return (x->h > y->h) - (x->h < y->h);
}

/* One nearest search against the sorted plain loop. */
static void kq_check_nearest(const qg_index *idx, qg_handle high, float x, float y, int32_t k, float max_d2)
{
    static kq_near all[KQ_MAX];
    static qg_handle got[KQ_MAX];
    static float got_d2[KQ_MAX];
    int32_t n = 0;
    for (qg_handle h = 0; h < high; h++) {
        qg_rect b;
        if (qg_get(idx, h, &b) != QG_OK)
            continue;
        const float d2 = qg_point_box_distance2(b, x, y);
        if (!(d2 <= max_d2))
            continue;
        assert_true(n < KQ_MAX);
        all[n++] = (kq_near){d2, h};
    }
    qsort(all, (size_t)n, sizeof(kq_near), kq_cmp_near);
    assert_true(k <= KQ_MAX);
    int32_t found = -1;
    assert_int_equal(qg_nearest(idx, x, y, k, max_d2, got, got_d2, &found), QG_OK);
    const int32_t want = n < k ? n : k;
    if (found != want)
        print_error("nearest (%.9g %.9g) k %d max %.9g: %d found, want %d\n", (double)x, (double)y, k,
                    (double)max_d2, found, want);
    assert_int_equal(found, want);
    for (int32_t i = 0; i < found; i++) {
        assert_int_equal(got[i], all[i].h);
        assert_true(got_d2[i] == all[i].d2);
    }
}

/* Rays and points made from the index's own boxes: along their edges
 * (which, with boxes on cell lines, run along cell boundaries), through
 * their corners, from inside them, from far away, with every kind of
 * direction and max_t. */
static void kq_check_scene(const qg_index *idx, qg_handle high, tu_rng *rng, int rounds)
{
    static const float lens[] = {0.0f, 1e-3f, 1.0f, 37.0f, 500.0f, 1e5f, INFINITY};
    for (int i = 0; i < rounds; i++) {
        qg_handle h = (qg_handle)tu_rng_below(rng, (uint32_t)high);
        qg_rect b;
        if (qg_get(idx, h, &b) != QG_OK)
            b = tu_rect(0, 0, 0, 0);
        const float max_t = lens[tu_rng_below(rng, 7)];
        const float far = tu_rng_chance(rng, 0.5) ? 3000.0f : 1e7f;
        float ox, oy, dx, dy;
        switch (tu_rng_below(rng, 8)) {
        case 0: /* along an edge, axis-aligned */
            ox = b.min_x, oy = b.min_y - 100.0f, dx = 0.0f, dy = 1.0f;
            break;
        case 1:
            ox = b.max_x + 100.0f, oy = b.max_y, dx = -1.0f, dy = 0.0f;
            break;
        case 2: /* through the min corner, diagonal */
            ox = b.min_x - 50.0f, oy = b.min_y - 50.0f, dx = 1.0f, dy = 1.0f;
            break;
        case 3: /* from inside */
            ox = (b.min_x + b.max_x) * 0.5f, oy = (b.min_y + b.max_y) * 0.5f;
            dx = tu_rng_range(rng, -1, 1), dy = tu_rng_range(rng, -1, 1);
            break;
        case 4: /* zero direction: the origin point */
            ox = b.max_x, oy = b.min_y, dx = 0.0f, dy = 0.0f;
            break;
        case 5: /* tiny components (1 / d overflows) */
            ox = b.min_x, oy = tu_rng_range(rng, -far, far);
            dx = tu_rng_chance(rng, 0.5) ? 1e-45f : -1e-38f, dy = tu_rng_chance(rng, 0.5) ? 1.0f : -1.0f;
            break;
        case 6: /* from far outside toward a box */
            ox = tu_rng_range(rng, -far, far), oy = tu_rng_chance(rng, 0.5) ? -far : far;
            dx = (b.min_x - ox) / far, dy = (b.min_y - oy) / far;
            break;
        default: /* random */
            ox = tu_rng_range(rng, -far, far), oy = tu_rng_range(rng, -far, far);
            dx = tu_rng_range(rng, -3, 3), dy = tu_rng_range(rng, -3, 3);
            break;
        }
        kq_check_ray(idx, high, ox, oy, dx, dy, max_t);
        /* Nearest: at a corner, inside, far away; k 1, 8, more than all. */
        static const int32_t ks[] = {1, 2, 8, 100, KQ_MAX};
        const float px = tu_rng_chance(rng, 0.3) ? b.min_x : tu_rng_range(rng, -far, far);
        const float py = tu_rng_chance(rng, 0.3) ? b.max_y : tu_rng_range(rng, -far, far);
        const float lim = tu_rng_chance(rng, 0.5) ? INFINITY : tu_rng_range(rng, 0, 1e6f);
        kq_check_nearest(idx, high, px, py, ks[tu_rng_below(rng, 5)], lim);
    }
}

/* A scene in layers, checked after each: boxes on cell lines (cell `cell`,
 * sides a multiple of it, touching one another), points on cell corners,
 * boxes outside the bounds `world` (far, in other wraps of a torus, and at
 * 1e7), a few boxes far bigger than the cells (a grid's wide list), then
 * moves and removes without and with a qg_cleanup. */
static void kq_layers(qg_index *idx, float world, float cell, uint64_t seed)
{
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    qg_handle high = 0;
    const int rounds = (int)tu_scaled(150);
#define KQ_ADD(r)                                                                                                 \
    do {                                                                                                           \
        const qg_handle h_ = qg_insert(idx, (r));                                                                  \
        assert_true(h_ >= 0);                                                                                      \
        high = h_ + 1 > high ? h_ + 1 : high;                                                                      \
    } while (0)
    /* 1. Boxes on cell lines and points on cell corners. */
    for (int i = 0; i < 60; i++) {
        const float x = cell * (float)tu_rng_below(&rng, 16), y = cell * (float)tu_rng_below(&rng, 16);
        const float w = cell * (float)(1 + tu_rng_below(&rng, 2));
        KQ_ADD(tu_rect(x, y, x + w, y + (i % 3 == 0 ? 0.0f : w)));
        KQ_ADD(tu_rect(x, y, x, y));
    }
    qg_cleanup(idx);
    kq_check_scene(idx, high, &rng, rounds);
    for (int i = 0; i < 8; i++) /* exact rays along cell lines */
        kq_check_ray(idx, high, cell * (float)i, -5.0f * cell, 0.0f, 1.0f, INFINITY);
    kq_check_ray(idx, high, -cell, -cell, 1.0f, 1.0f, 40.0f * cell);
    kq_check_ray(idx, high, 20.0f * cell, 3.0f * cell, -1.0f, 0.0f, INFINITY);
    kq_check_nearest(idx, high, 2.0f * cell, 2.0f * cell, 5, INFINITY);
    /* 2. Outside the bounds: other wraps, far, very far; a bulk insert. */
    qg_rect more[40];
    for (int i = 0; i < 40; i++) {
        const float sx = (float)(i % 5) - 2.0f, sy = (float)(i / 5 % 4) - 1.5f;
        const float x = sx * 2.0f * world + tu_rng_range(&rng, 0, world), y = sy * 3.0f * world;
        more[i] = i < 36 ? tu_rect(x, y, x + cell * 0.5f, y + cell * 0.5f)
                         : tu_rect(1e7f + (float)i, -1e7f, 1e7f + (float)i + 1.0f, -1e7f + 1.0f);
    }
    qg_handle hs[40];
    assert_int_equal(qg_insert_many(idx, more, 40, hs), QG_OK);
    for (int i = 0; i < 40; i++)
        high = hs[i] + 1 > high ? hs[i] + 1 : high;
    kq_check_scene(idx, high, &rng, rounds);
    kq_check_ray(idx, high, -1e8f, -1e7f + 0.5f, 1.0f, 0.0f, INFINITY);
    kq_check_ray(idx, high, 0.0f, 0.0f, 1.0f, -1.0f, INFINITY);
    kq_check_nearest(idx, high, 1e7f, -1e7f, 3, INFINITY);
    kq_check_nearest(idx, high, -5e7f, 5e7f, KQ_MAX, INFINITY);
    /* 3. Boxes far bigger than the cells, and one over everything. */
    KQ_ADD(tu_rect(-2.0f * world, 0.25f * world, 2.0f * world, 0.5f * world));
    KQ_ADD(tu_rect(0.1f * world, -3.0f * world, 0.2f * world, 3.0f * world));
    KQ_ADD(tu_rect(-1e30f, -1e30f, 1e30f, 1e30f));
    kq_check_scene(idx, high, &rng, rounds);
    kq_check_ray(idx, high, -1e35f, 0.3f * world, 1.0f, 0.0f, INFINITY);
    kq_check_nearest(idx, high, 1e32f, 1e32f, 2, INFINITY);
    /* 4. Moves (some far) and removes, checked before and after cleanup. */
    for (qg_handle h = 0; h < high; h++) {
        qg_rect b;
        if (qg_get(idx, h, &b) != QG_OK)
            continue;
        if (tu_rng_chance(&rng, 0.15)) {
            assert_int_equal(qg_remove(idx, h), QG_OK);
        } else if (tu_rng_chance(&rng, 0.3)) {
            const float mx = tu_rng_chance(&rng, 0.2) ? tu_rng_range(&rng, -4 * world, 4 * world) : cell * 0.3f;
            const float my = tu_rng_range(&rng, -cell, cell);
            assert_int_equal(qg_move(idx, h, tu_rect(b.min_x + mx, b.min_y + my, b.max_x + mx, b.max_y + my)), QG_OK);
        }
    }
    kq_check_scene(idx, high, &rng, rounds);
    qg_cleanup(idx);
    kq_check_scene(idx, high, &rng, rounds);
    assert_int_equal(qg_validate(idx), QG_OK);
#undef KQ_ADD
}

/* Few elements, k far past the count, and an emptied index. */
static void kq_small(qg_index *idx)
{
    const qg_handle a = qg_insert(idx, tu_rect(1, 1, 2, 2)), b = qg_insert(idx, tu_rect(1, 1, 2, 2));
    assert_true(a >= 0 && b >= 0);
    kq_check_nearest(idx, b + 1, 0, 0, 50, INFINITY);
    kq_check_nearest(idx, b + 1, 1.5f, 1.5f, 1, 0.0f);
    kq_check_ray(idx, b + 1, 0, 0, 1, 1, INFINITY); /* a tie: both at t = 1 */
    kq_check_ray(idx, b + 1, 2, 2, 0, 0, 0);        /* the shared corner */
    assert_int_equal(qg_remove(idx, a), QG_OK);
    assert_int_equal(qg_remove(idx, b), QG_OK);
    kq_check_nearest(idx, b + 1, 0, 0, 3, INFINITY);
    kq_check_ray(idx, b + 1, 0, 0, 1, 1, INFINITY);
}

#endif
