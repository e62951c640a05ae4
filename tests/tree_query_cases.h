// SPDX-License-Identifier: MIT
/* Hard cases for the tree kinds' own ray casts and nearest searches (issue
 * 13), shared by their test files: scenes built to sit on the trees' seams
 * (boxes exactly on cell boundaries, rays along them and through corners,
 * elements far outside the world, piles deep enough to reach max_depth,
 * rays from far away, tiny and zero directions, k past the count), each
 * answer checked against a plain loop over qg_ray_box and
 * qg_point_box_distance2 on every live element.
 *
 * Static functions in a header: the three tree test programs include it,
 * and test_util stays as the other kinds' tests know it. */
#ifndef QG_TREE_QUERY_CASES_H
#define QG_TREE_QUERY_CASES_H

#include "test_util.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define TQ_MAX 4096
/// Handles the scenes issue stay below this.
#define TQ_HANDLES 8192

/// What one cast saw: every (handle, t) reported, in order.
typedef struct tq_hits {
    qg_handle h[TQ_MAX];
    float t[TQ_MAX];
    int n;
    int mode; ///< 0 all hits (return max_t), 1 closest (return t)
    float max_t;
} tq_hits;

static float tq_ray_cb(qg_handle h, float t, void *user)
{
    tq_hits *s = user;
    assert_true(s->n < TQ_MAX);
    s->h[s->n] = h;
    s->t[s->n] = t;
    s->n++;
    return s->mode == 1 ? t : s->max_t;
}

/// Checks one cast, both modes, against the plain loop.
static void tq_check_ray(const qg_index *ix, float ox, float oy, float dx, float dy, float max_t)
{
    static tq_hits s;
    const int32_t high = TQ_HANDLES;
    // All hits: exactly the loop's set, each once, with its t.
    s.n = 0;
    s.mode = 0;
    s.max_t = max_t;
    assert_int_equal(qg_raycast(ix, ox, oy, dx, dy, max_t, tq_ray_cb, &s), QG_OK);
    int expected = 0;
    float best = INFINITY;
    for (qg_handle h = 0; h < high; ++h) {
        qg_rect b;
        float t;
        if (qg_get(ix, h, &b) != QG_OK || !qg_ray_box(b, ox, oy, dx, dy, max_t, &t))
            continue;
        expected++;
        best = t < best ? t : best;
        int seen = 0;
        for (int i = 0; i < s.n; ++i) {
            if (s.h[i] == h) {
                seen++;
                assert_true(s.t[i] == t || (isnan(s.t[i]) && isnan(t)));
            }
        }
        if (seen != 1)
            fail_msg("ray (%g,%g)+(%g,%g) max_t %g: element %d (%g,%g,%g,%g) seen %d times", (double)ox, (double)oy,
                     (double)dx, (double)dy, (double)max_t, (int)h, (double)b.min_x, (double)b.min_y,
                     (double)b.max_x, (double)b.max_y, seen);
    }
    assert_int_equal(s.n, expected);
    // Closest hit: every element at the smallest t is seen, nothing twice.
    s.n = 0;
    s.mode = 1;
    assert_int_equal(qg_raycast(ix, ox, oy, dx, dy, max_t, tq_ray_cb, &s), QG_OK);
    for (int i = 0; i < s.n; ++i)
        for (int j = i + 1; j < s.n; ++j)
            assert_true(s.h[i] != s.h[j]);
    for (qg_handle h = 0; h < high; ++h) {
        qg_rect b;
        float t;
        if (qg_get(ix, h, &b) != QG_OK || !qg_ray_box(b, ox, oy, dx, dy, max_t, &t) || !(t == best))
            continue;
        int seen = 0;
        for (int i = 0; i < s.n; ++i)
            seen += s.h[i] == h;
        if (seen != 1)
            fail_msg("closest ray (%g,%g)+(%g,%g): element %d at t %g seen %d times", (double)ox, (double)oy,
                     (double)dx, (double)dy, (int)h, (double)t, seen);
    }
    // A stop after the first report ends the cast.
    if (expected > 0) {
        s.n = 0;
        s.mode = 2; // returns -1
        s.max_t = -1.0f;
        assert_int_equal(qg_raycast(ix, ox, oy, dx, dy, max_t, tq_ray_cb, &s), QG_OK);
        assert_int_equal(s.n, 1);
    }
}

/// Checks qg_nearest at (x, y) against the (distance2, handle) order of all.
static void tq_check_nearest(const qg_index *ix, float x, float y, int32_t k, float max_d2)
{
    static qg_handle got[TQ_MAX], want[TQ_MAX];
    static float gd[TQ_MAX], wd[TQ_MAX];
    assert_true(k <= TQ_MAX);
    int32_t found = -1;
    assert_int_equal(qg_nearest(ix, x, y, k, max_d2, got, gd, &found), QG_OK);
    // The brute answer: insertion into a sorted list of the k best.
    int32_t n = 0;
    const int32_t high = TQ_HANDLES;
    for (qg_handle h = 0; h < high; ++h) {
        qg_rect b;
        if (qg_get(ix, h, &b) != QG_OK)
            continue;
        const float d = qg_point_box_distance2(b, x, y);
        if (!(d <= max_d2))
            continue;
        int32_t i = n < k ? n++ : k;
        while (i > 0 && (wd[i - 1] > d || (wd[i - 1] == d && want[i - 1] > h))) {
            if (i < k) {
                want[i] = want[i - 1];
                wd[i] = wd[i - 1];
            }
            i--;
        }
        if (i < k) {
            want[i] = h;
            wd[i] = d;
        }
    }
    if (found != n)
        fail_msg("nearest (%g,%g) k %d: found %d, expected %d", (double)x, (double)y, (int)k, (int)found, (int)n);
    for (int32_t i = 0; i < n; ++i) {
        if (got[i] != want[i] || gd[i] != wd[i])
            fail_msg("nearest (%g,%g) k %d: [%d] is %d at %g, expected %d at %g", (double)x, (double)y, (int)k,
                     (int)i, (int)got[i], (double)gd[i], (int)want[i], (double)wd[i]);
    }
}

/// Rays along, across and from the seams of a tiling of `cell`-wide cells
/// over [lo, hi]^2, and nearest searches at the seams' points.
static void tq_check_seams(const qg_index *ix, float lo, float hi, float cell)
{
    const float inf = INFINITY;
    const float len = hi - lo;
    for (float a = lo; a <= hi; a += cell) {
        const float mid = lo + 0.5f * len;
        // Along a boundary, both ways, bounded and not.
        tq_check_ray(ix, a, lo - cell, 0.0f, 1.0f, 2.0f * len);
        tq_check_ray(ix, lo - cell, a, 1.0f, 0.0f, inf);
        tq_check_ray(ix, a, hi + cell, 0.0f, -1.0f, inf);
        tq_check_ray(ix, hi + cell, a, -3.0f, 0.0f, len);
        // Through corners, diagonally, from a corner.
        tq_check_ray(ix, a, lo, 1.0f, 1.0f, inf);
        tq_check_ray(ix, a, hi, 1.0f, -1.0f, len);
        tq_check_ray(ix, a, mid, -1.0f, -1.0f, 0.5f * len);
        // A point: every box holding it, at t = 0 (zero direction, zero length).
        tq_check_ray(ix, a, a, 0.0f, 0.0f, 10.0f);
        tq_check_ray(ix, a, mid, 1.0f, 0.5f, 0.0f);
        // Tiny directions: 1 / d overflows.
        tq_check_ray(ix, a, a, 1e-40f, 0.0f, inf);
        tq_check_ray(ix, a, mid, -1e-41f, 1e-39f, inf);
        tq_check_ray(ix, a, a, 1e-40f, 1.0f, 100.0f);
        for (int32_t k = 1; k <= 64; k *= 4) {
            tq_check_nearest(ix, a, a, k, inf);
            tq_check_nearest(ix, a, mid, k, cell * cell);
            tq_check_nearest(ix, a + 0.5f * cell, lo - 3.0f * cell, k, inf);
        }
    }
    // From far away, pointing back; and huge ones.
    tq_check_ray(ix, 1e30f, 1e30f, -1e30f, -1e30f, inf);
    tq_check_ray(ix, -3e38f, lo, 1.0f, 0.0f, inf);
    tq_check_ray(ix, lo + 1.0f, 3e38f, 0.0f, -3e38f, 1.0f);
    tq_check_ray(ix, 1e7f, 1e7f + 3.0f, -1.0f, -1.0f, inf);
    tq_check_nearest(ix, 1e30f, -1e30f, 5, inf);
    tq_check_nearest(ix, -3e38f, 3e38f, 3, inf);
}

/// The seams scene for a kind: a tiling of touching 64-wide boxes over the
/// configured world [0, 1024]^2, zero-size boxes on every corner of the
/// finer cells, a pile of coincident boxes deep enough to reach max_depth,
/// boxes far outside the world (before and after the world re-fits), and
/// removals leaving holes; checked after each stage.
static void tq_seams_scene(qg_kind kind)
{
    tu_skip_unless_built(kind);
    qg_config c = qg_default_config(kind);
    c.bounds = (qg_rect){0, 0, 1024, 1024};
    qg_index *ix = NULL;
    assert_int_equal(qg_create(&c, &ix), QG_OK);
    for (float y = 0; y < 1024; y += 64)
        for (float x = 0; x < 1024; x += 64)
            qg_insert(ix, (qg_rect){x, y, x + 64, y + 64});
    for (float y = 0; y <= 1024; y += 32)
        for (float x = 0; x <= 1024; x += 32)
            qg_insert(ix, (qg_rect){x, y, x, y});
    tq_check_seams(ix, 0, 1024, 128);
    // A pile: 300 coincident boxes and 300 points at one corner.
    for (int i = 0; i < 300; ++i) {
        qg_insert(ix, (qg_rect){512, 512, 513, 513});
        qg_insert(ix, (qg_rect){256, 256, 256, 256});
    }
    tq_check_seams(ix, 0, 1024, 256);
    tq_check_nearest(ix, 256, 256, 700, INFINITY);
    tq_check_nearest(ix, 512.5f, 512.5f, TQ_MAX, INFINITY); // k past the count
    // Far outside: clamped into the border cells, then the world re-fits.
    qg_handle far[8];
    far[0] = qg_insert(ix, (qg_rect){-1e6f, 500, -1e6f + 5, 505});
    far[1] = qg_insert(ix, (qg_rect){2000, 2000, 3000, 3000});
    far[2] = qg_insert(ix, (qg_rect){1e30f, -1e30f, 1e30f, 1e30f});
    far[3] = qg_insert(ix, (qg_rect){-3e38f, -3e38f, 3e38f, -2e38f});
    far[4] = qg_insert(ix, (qg_rect){1024, 1024, 5000, 1024});
    far[5] = qg_insert(ix, (qg_rect){-FLT_MAX, 0, -FLT_MAX, 0});
    far[6] = qg_insert(ix, (qg_rect){0, 1e9f, 0, 1e9f});
    far[7] = qg_insert(ix, (qg_rect){-1, -1, 1025, 1025});
    tq_check_seams(ix, 0, 1024, 256);
    tq_check_ray(ix, -2e6f, 502, 1.0f, 0.0f, INFINITY);
    tq_check_ray(ix, 0, 0, 0.0f, 1.0f, INFINITY);
    tq_check_ray(ix, 1e30f, 0, 0.0f, 1.0f, 1e30f);
    tq_check_nearest(ix, -2e6f, 502, 3, INFINITY);
    qg_cleanup(ix);
    assert_int_equal(qg_validate(ix), QG_OK);
    tq_check_seams(ix, 0, 1024, 256);
    tq_check_seams(ix, -2e6f, 2e6f, 1e6f);
    // Holes: every third element gone, the far ones too, then cleanup.
    for (qg_handle h = 0; h < TQ_HANDLES; h += 3)
        qg_remove(ix, h);
    for (int i = 0; i < 8; ++i)
        qg_remove(ix, far[i]);
    tq_check_seams(ix, 0, 1024, 256);
    qg_cleanup(ix);
    assert_int_equal(qg_validate(ix), QG_OK);
    tq_check_seams(ix, 0, 1024, 128);
    qg_destroy(ix);
}

/// A tiny world far from the origin (cells narrower than the rounding of
/// their coordinates' magnitude): boxes of 1e-3 around 1e5, rays and
/// points on their edges.
static void tq_offset_scene(qg_kind kind)
{
    tu_skip_unless_built(kind);
    qg_config c = qg_default_config(kind);
    c.bounds = (qg_rect){100000, 100000, 100001, 100001};
    qg_index *ix = NULL;
    assert_int_equal(qg_create(&c, &ix), QG_OK);
    tu_rng r;
    tu_rng_seed(&r, tu_env_seed(77));
    for (int i = 0; i < 2000; ++i) {
        const float x = 100000.0f + (float)tu_rng_below(&r, 128) / 128.0f;
        const float y = 100000.0f + (float)tu_rng_below(&r, 128) / 128.0f;
        const float w = (float)tu_rng_below(&r, 3) / 128.0f;
        qg_insert(ix, (qg_rect){x, y, x + w, y + w});
    }
    for (int pass = 0; pass < 2; ++pass) {
        for (int i = 0; i < 200; ++i) {
            const float x = 100000.0f + (float)tu_rng_below(&r, 130) / 128.0f;
            const float y = 100000.0f + (float)tu_rng_below(&r, 130) / 128.0f;
            const float a = (float)tu_rng_unit(&r) * 6.2831853f;
            tq_check_ray(ix, x, y, cosf(a), sinf(a), 0.25f);
            tq_check_ray(ix, x, y, (float)(int)tu_rng_below(&r, 3) - 1.0f, (float)(int)tu_rng_below(&r, 3) - 1.0f,
                         INFINITY);
            tq_check_nearest(ix, x, y, 1 + (int32_t)tu_rng_below(&r, 20), INFINITY);
        }
        qg_cleanup(ix);
    }
    qg_destroy(ix);
}

/// Both scenes as cmocka cases of a TU_KIND_CASE entry (test_util.h), so
/// each tree kind's own program lists them rather than wrapping them again.
static void tq_case_seams(void **state)
{
    tq_seams_scene(tu_case_kind(state));
}

static void tq_case_offset(void **state)
{
    tq_offset_scene(tu_case_kind(state));
}

/// The shared cases every tree kind's own program runs, as table entries
/// named test_<case>_<name>: bounds are a hint (outside, huge and
/// tiny worlds beside the brute-force kind, the re-fit's allocations
/// failing) and own ray casts and nearest searches.
#define TQ_TREE_CASES(kind, name)                                              \
    TU_KIND_CASE("test_scenes_" #name, tu_case_refit_scenes, (kind)),          \
        TU_KIND_CASE("test_refit_oom_" #name, tu_case_refit_oom, (kind)),      \
        TU_KIND_CASE("test_seams_" #name, tq_case_seams, (kind)),              \
        TU_KIND_CASE("test_offset_world_" #name, tq_case_offset, (kind))

#endif
