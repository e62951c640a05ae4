// SPDX-License-Identifier: MIT
/* Ray casts in hostile float ranges, for one kind (argv[1]).
 *
 * - slab_exact: qg_ray_box against the segment itself, the slab interval
 *   worked out in long double (no overflow, no inf * 0) on rays and boxes
 *   near +-FLT_MAX, subnormal directions and unbounded max_t: a hit the
 *   segment clearly misses, or a clear hit it refuses, fails (the box 5e37
 *   off the line that an infinite entry parameter used to accept is one).
 * - far_scenes: boxes over +-1e38 and at the float range's ends, with and
 *   without static elements settled into the engine's layer (qg_set_static,
 *   two frames of moves, qg_cleanup): every qg_raycast of rays from near
 *   +-FLT_MAX, with subnormal, huge and zero directions and max_t 0, finite
 *   or infinite, reports exactly the (handle, t) qg_ray_box accepts over
 *   every live element, each once; a closest-hit cast ends at the smallest
 *   t. The static scenes are checked once settled (the generic ray form
 *   over the kind's query and the engine's layers), the plain ones through
 *   each kind's own traversal. Each
 *   cast is bounded: a callback count past the element count fails
 *   at once, and ctest's TIMEOUT catches a cast that never returns.
 *
 * Seeds are fixed (QG_TEST_SEED overrides) and printed with every failure. */
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static qg_kind g_kind = QG_BRUTE_FORCE;
static uint64_t g_seed;
static const float INF = (float)INFINITY;

#define RFAIL(...)                                                                                 \
    do {                                                                                           \
        char m_[640];                                                                              \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                      \
        fail_msg("hostile_rays %s (seed %llu): %s", qg_kind_name(g_kind),                         \
                 (unsigned long long)g_seed, m_);                                                  \
    } while (0)

/* ---- hostile values ------------------------------------------------------ */

/* A coordinate from the float range's hostile corners: near +-FLT_MAX, near
 * 0 and subnormal, powers of two over the whole range, plain values. */
static float hostile_coord(tu_rng *r)
{
    const float s = tu_rng_chance(r, 0.5) ? -1.0f : 1.0f;
    switch (tu_rng_below(r, 7)) {
    case 0:
        return s * FLT_MAX * (1.0f - (float)tu_rng_unit(r) * 0.25f);
    case 1:
        return s * FLT_MAX;
    case 2:
        return s * FLT_TRUE_MIN * (float)tu_rng_below(r, 16);
    case 3:
        return s * ldexpf((float)(1.0 + tu_rng_unit(r)), (int)tu_rng_below(r, 250) - 125);
    case 4:
        return tu_rng_range(r, -1e38f, 1e38f);
    case 5:
        return tu_rng_range(r, -3e38f, 3e38f);
    default:
        return tu_rng_range(r, -100.0f, 100.0f);
    }
}

static float hostile_dir(tu_rng *r)
{
    const float s = tu_rng_chance(r, 0.5) ? -1.0f : 1.0f;
    switch (tu_rng_below(r, 6)) {
    case 0:
        return 0.0f;
    case 1:
        return s * FLT_TRUE_MIN * (float)(1 + tu_rng_below(r, 8));
    case 2:
        return s * ldexpf((float)(1.0 + tu_rng_unit(r)), (int)tu_rng_below(r, 270) - 149);
    case 3:
        return s * FLT_MAX * (float)tu_rng_unit(r);
    default:
        return tu_rng_range(r, -1.0f, 1.0f);
    }
}

static float hostile_max_t(tu_rng *r)
{
    switch (tu_rng_below(r, 5)) {
    case 0:
    case 1:
        return INF;
    case 2:
        return FLT_MAX;
    case 3:
        return 0.0f;
    default:
        return ldexpf((float)(1.0 + tu_rng_unit(r)), (int)tu_rng_below(r, 250) - 125);
    }
}

static qg_rect hostile_box(tu_rng *r)
{
    float x0 = hostile_coord(r), x1 = tu_rng_chance(r, 0.3) ? x0 : hostile_coord(r);
    float y0 = hostile_coord(r), y1 = tu_rng_chance(r, 0.3) ? y0 : hostile_coord(r);
    if (tu_rng_chance(r, 0.5)) {
        /* a small box near a far coordinate */
        const float w = fabsf(x0) * 1e-3f + 1.0f, h = fabsf(y0) * 1e-3f + 1.0f;
        x1 = x0 + w < FLT_MAX ? x0 + w : FLT_MAX;
        y1 = y0 + h < FLT_MAX ? y0 + h : FLT_MAX;
    }
    return tu_rect(x0 < x1 ? x0 : x1, y0 < y1 ? y0 : y1, x0 < x1 ? x1 : x0, y0 < y1 ? y1 : y0);
}

/* ---- the segment itself -------------------------------------------------- */

/* The slab interval of the segment in long double, or false when empty.
 * x87's 80-bit format (or binary128) holds every difference of floats over a
 * subnormal direction without overflow; where long double is double, the
 * range still holds and only the tolerance below matters. */
static bool segment_interval(qg_rect b, float ox, float oy, float dx, float dy, float max_t, long double *t0,
                             long double *t1)
{
    long double a = 0.0L, e = max_t;
    const float o[2] = {ox, oy}, d[2] = {dx, dy}, lo[2] = {b.min_x, b.min_y}, hi[2] = {b.max_x, b.max_y};
    for (int k = 0; k < 2; ++k) {
        if (d[k] == 0.0f) {
            if (o[k] < lo[k] || o[k] > hi[k])
                return false;
            continue;
        }
        long double p = ((long double)lo[k] - o[k]) / d[k], q = ((long double)hi[k] - o[k]) / d[k];
        if (p > q) {
            const long double s = p;
            p = q;
            q = s;
        }
        a = p > a ? p : a;
        e = q < e ? q : e;
    }
    *t0 = a;
    *t1 = e;
    return a <= e;
}

/* qg_ray_box against the segment: a hit needs an interval that is not
 * clearly empty and an entry parameter that is its start (to float
 * rounding, inf for a start past FLT_MAX); a miss needs one that is not
 * clearly wide. "Clearly": by more than 1e-5 of the parameters' size. */
static void check_exact(qg_rect b, float ox, float oy, float dx, float dy, float max_t, const char *what)
{
    long double a = 0.0L, e = 0.0L;
    const bool seg = segment_interval(b, ox, oy, dx, dy, max_t, &a, &e);
    float t = -1.0f;
    const bool hit = qg_ray_box(b, ox, oy, dx, dy, max_t, &t);
    const long double size = (isinf((double)a) ? 0.0L : fabsl(a)) + (isinf((double)e) ? 0.0L : fabsl(e));
    const long double tol = 1e-5L * size + 1e-30L;
    if (hit && !seg && a - e > tol)
        RFAIL("%s: qg_ray_box hits box [%g %g %g %g] at t %g from (%g, %g) along (%g, %g) max_t %g; the segment "
              "misses it ([%Lg, %Lg])",
              what, (double)b.min_x, (double)b.min_y, (double)b.max_x, (double)b.max_y, (double)t, (double)ox,
              (double)oy, (double)dx, (double)dy, (double)max_t, a, e);
    if (!hit && seg && e - a > tol)
        RFAIL("%s: qg_ray_box misses box [%g %g %g %g] from (%g, %g) along (%g, %g) max_t %g; the segment is "
              "inside it over [%Lg, %Lg]",
              what, (double)b.min_x, (double)b.min_y, (double)b.max_x, (double)b.max_y, (double)ox, (double)oy,
              (double)dx, (double)dy, (double)max_t, a, e);
    if (hit) {
        const long double want = a > (long double)FLT_MAX * (1.0L + 1e-6L) ? (long double)INFINITY : a;
        if (!(t >= 0.0f) || (isinf((double)want) ? !isinf(t) : fabsl((long double)t - want) > tol))
            RFAIL("%s: qg_ray_box's t %g, the segment enters at %Lg (box [%g %g %g %g] from (%g, %g) along "
                  "(%g, %g) max_t %g)",
                  what, (double)t, a, (double)b.min_x, (double)b.min_y, (double)b.max_x, (double)b.max_y,
                  (double)ox, (double)oy, (double)dx, (double)dy, (double)max_t);
    }
}

static void test_slab_exact(void **state)
{
    (void)state;
    /* The box 5e37 off the line of a ray from (-3e38, -3e38) along (1, 1):
     * both slabs' parameters overflowed to inf and the test accepted it. */
    const qg_rect off = {4.0433e37f, 9.41384e37f, 4.13099e37f, 9.50153e37f};
    if (qg_ray_box(off, -3e38f, -3e38f, 1.0f, 1.0f, INF, NULL))
        RFAIL("qg_ray_box accepts [4.0433e37 9.41384e37 4.13099e37 9.50153e37] from (-3e38, -3e38) along (1, 1)");
    check_exact(off, -3e38f, -3e38f, 1.0f, 1.0f, INF, "off the line");
    /* A subnormal direction: 1 / d overflows; origin on the box's side. */
    check_exact(tu_rect(0.0f, 0.0f, 1.0f, 1.0f), 1.0f, 0.5f, -FLT_TRUE_MIN, 0.0f, INF, "subnormal on a side");
    check_exact(tu_rect(0.0f, 0.0f, 1.0f, 1.0f), 1.0f, 0.5f, -FLT_TRUE_MIN, 0.0f, 1.0f, "subnormal, finite");
    check_exact(tu_rect(-FLT_MAX, -2.0f, -1e38f, -1.0f), -FLT_MAX, -1.5f, 1.0f, 0.0f, INF, "from -FLT_MAX");
    check_exact(tu_rect(FLT_MAX * 0.5f, -2.0f, FLT_MAX, -1.0f), -FLT_MAX, -1.5f, 1.0f, 0.0f, INF, "-FLT_MAX to +");
    check_exact(tu_rect(0.0f, -1.0f, 1e-30f, 0.0f), 0.0f, 0.0f, 1e-30f, -3e-39f, INF, "issue direction");
    tu_rng r;
    tu_rng_seed(&r, g_seed);
    const long n = tu_scaled(400000);
    for (long i = 0; i < n; ++i) {
        const qg_rect b = hostile_box(&r);
        float ox = hostile_coord(&r), oy = hostile_coord(&r);
        if (tu_rng_chance(&r, 0.2)) {
            /* start on a side or corner of the box */
            ox = tu_rng_chance(&r, 0.5) ? b.min_x : b.max_x;
            oy = tu_rng_chance(&r, 0.5) ? b.min_y : b.max_y;
        }
        check_exact(b, ox, oy, hostile_dir(&r), hostile_dir(&r), hostile_max_t(&r), "random");
    }
}

/* ---- every kind against qg_ray_box ------------------------------------- */

typedef struct hit {
    qg_handle h;
    float t;
} hit;

typedef struct cast {
    hit *v;
    int n, cap;
    int limit;     /* more calls than this: the cast is looping */
    bool closest;  /* return t (closest-hit) instead of the max_t */
    float max_t;
    float best;
} cast;

static float cast_fn(qg_handle h, float t, void *user)
{
    cast *c = user;
    if (c->n >= c->limit)
        return -1.0f; /* stop: reported below */
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->v = realloc(c->v, (size_t)c->cap * sizeof *c->v);
        assert_non_null(c->v);
    }
    c->v[c->n++] = (hit){h, t};
    if (c->closest) {
        c->best = t < c->best ? t : c->best;
        return c->best;
    }
    return c->max_t;
}

static int hit_cmp(const void *a, const void *b)
{
    const hit *x = a, *y = b;
    return x->h < y->h ? -1 : x->h > y->h;
}

typedef struct scene {
    qg_index *idx;
    qg_rect *box; /* by handle; NaN min_x for a removed one */
    int n;
} scene;

static void check_ray(const scene *s, float ox, float oy, float dx, float dy, float max_t, const char *what)
{
    /* what qg_ray_box accepts over every live element */
    hit *want = malloc((size_t)(s->n + 1) * sizeof *want);
    assert_non_null(want);
    int nw = 0;
    float best = INF;
    for (int h = 0; h < s->n; ++h) {
        float t;
        if (!isnan(s->box[h].min_x) && qg_ray_box(s->box[h], ox, oy, dx, dy, max_t, &t)) {
            want[nw++] = (hit){h, t};
            best = t < best ? t : best;
        }
    }
    cast c = {NULL, 0, 0, s->n + 1, false, max_t, INF};
    if (qg_raycast(s->idx, ox, oy, dx, dy, max_t, cast_fn, &c) != QG_OK)
        RFAIL("%s: qg_raycast refused (%g, %g) along (%g, %g) max_t %g", what, (double)ox, (double)oy, (double)dx,
              (double)dy, (double)max_t);
    if (c.n > s->n)
        RFAIL("%s: more than %d calls from (%g, %g) along (%g, %g) max_t %g", what, s->n, (double)ox, (double)oy,
              (double)dx, (double)dy, (double)max_t);
    if (c.n > 1)
        qsort(c.v, (size_t)c.n, sizeof *c.v, hit_cmp);
    int i = 0;
    for (; i < c.n && i < nw; ++i)
        if (c.v[i].h != want[i].h || memcmp(&c.v[i].t, &want[i].t, sizeof(float)) != 0)
            break;
    if (i < c.n || i < nw)
        RFAIL("%s: ray (%g, %g) along (%g, %g) max_t %g: %d hits, qg_ray_box accepts %d; first difference: got "
              "%d at %g, want %d at %g",
              what, (double)ox, (double)oy, (double)dx, (double)dy, (double)max_t, c.n, nw,
              i < c.n ? c.v[i].h : -1, i < c.n ? (double)c.v[i].t : 0.0, i < nw ? want[i].h : -1,
              i < nw ? (double)want[i].t : 0.0);
    /* closest hit: the smallest t, every element at it offered */
    c.n = 0;
    c.closest = true;
    c.best = INF;
    if (qg_raycast(s->idx, ox, oy, dx, dy, max_t, cast_fn, &c) != QG_OK)
        RFAIL("%s: closest qg_raycast refused", what);
    float got = INF;
    for (int k = 0; k < c.n; ++k)
        got = c.v[k].t < got ? c.v[k].t : got;
    if ((nw > 0) != (c.n > 0) || memcmp(&got, &best, sizeof got) != 0)
        RFAIL("%s: closest hit of (%g, %g) along (%g, %g) max_t %g at %g (%d calls), qg_ray_box's smallest %g of %d",
              what, (double)ox, (double)oy, (double)dx, (double)dy, (double)max_t, (double)got, c.n, (double)best,
              nw);
    for (int k = 0; k < nw; ++k) {
        if (want[k].t != best)
            continue;
        int j = 0;
        while (j < c.n && c.v[j].h != want[k].h)
            ++j;
        if (j == c.n)
            RFAIL("%s: closest cast of (%a, %a) along (%a, %a) max_t %a left out %d [%a %a %a %a], tied at t %g",
                  what, ox, oy, dx, dy, max_t, want[k].h, s->box[want[k].h].min_x, s->box[want[k].h].min_y,
                  s->box[want[k].h].max_x, s->box[want[k].h].max_y, (double)best);
    }
    free(c.v);
    free(want);
}

/* The rays of a scene: the issue's, then origins and directions from the
 * hostile sets, and rays from the boxes' own corners. */
static void check_rays(const scene *s, tu_rng *r, const char *what)
{
    check_ray(s, -1e38f, 0.0f, 1.0f, 0.5f, INF, what);
    check_ray(s, -FLT_MAX, -1.5f, 1.0f, 0.0f, INF, what);
    check_ray(s, -FLT_MAX, -1.5f, 1.0f, 0.0f, FLT_MAX, what);
    check_ray(s, -3e38f, -3e38f, 1.0f, 1.0f, INF, what);
    check_ray(s, FLT_MAX, FLT_MAX, -1.0f, -1.0f, INF, what);
    check_ray(s, -FLT_MAX, -FLT_MAX, FLT_MAX, FLT_MAX, INF, what);
    check_ray(s, 0.0f, 0.0f, 1e-30f, -3e-39f, INF, what);
    check_ray(s, -1e38f, 1.0f, FLT_TRUE_MIN, 0.0f, INF, what);
    check_ray(s, 0.0f, 0.0f, FLT_TRUE_MIN, FLT_TRUE_MIN, INF, what);
    check_ray(s, 0.0f, 0.0f, 0.0f, 0.0f, INF, what);
    check_ray(s, 5.0f, 5.0f, 0.0f, 0.0f, 0.0f, what);
    const float dirs[][2] = {{1.0f, 0.5f}, {1.0f, 0.0f}, {0.0f, -1.0f}, {-1.0f, 1e-40f},
                             {1e-30f, -3e-39f}, {FLT_MAX, -FLT_MAX}, {-FLT_TRUE_MIN, 3.0f}};
    const long rays = tu_scaled(300);
    for (long i = 0; i < rays; ++i) {
        float ox = hostile_coord(r), oy = hostile_coord(r), dx, dy;
        if (tu_rng_chance(r, 0.3)) {
            const int h = (int)tu_rng_below(r, (uint32_t)s->n);
            if (!isnan(s->box[h].min_x)) {
                ox = tu_rng_chance(r, 0.5) ? s->box[h].min_x : s->box[h].max_x;
                oy = tu_rng_chance(r, 0.5) ? s->box[h].min_y : s->box[h].max_y;
            }
        }
        if (tu_rng_chance(r, 0.4)) {
            const int k = (int)tu_rng_below(r, sizeof dirs / sizeof *dirs);
            dx = dirs[k][0];
            dy = dirs[k][1];
        } else {
            dx = hostile_dir(r);
            dy = hostile_dir(r);
        }
        check_ray(s, ox, oy, dx, dy, hostile_max_t(r), what);
    }
}

/* The kind over default config with `n` boxes from `make`; every 10th static
 * and settled (two frames of moves and a qg_cleanup) when `statics`. */
static void run_scene(const char *name, int n, qg_rect (*make)(tu_rng *, int), bool statics, uint64_t seed)
{
    tu_skip_unless_built(g_kind);
    tu_rng r;
    tu_rng_seed(&r, seed);
    qg_config cfg = qg_default_config(g_kind);
    scene s = {NULL, calloc((size_t)n, sizeof(qg_rect)), n};
    assert_non_null(s.box);
    assert_int_equal(qg_create(&cfg, &s.idx), QG_OK);
    for (int i = 0; i < n; ++i) {
        s.box[i] = make(&r, i);
        assert_int_equal(qg_insert(s.idx, s.box[i]), i);
    }
    char what[128];
    snprintf(what, sizeof what, "%s%s", name, statics ? ", static settled" : "");
    if (statics)
        for (int i = 0; i < n; i += 10)
            assert_int_equal(qg_set_static(s.idx, i, true), QG_OK);
    if (!statics)
        check_rays(&s, &r, what);
    for (int frame = 0; frame < 2; ++frame) {
        for (int i = 0; i < n; ++i) {
            if (statics && i % 10 == 0)
                continue;
            if (tu_rng_chance(&r, 0.5)) {
                s.box[i] = make(&r, i);
                assert_int_equal(qg_move(s.idx, i, s.box[i]), QG_OK);
            }
        }
        qg_cleanup(s.idx);
    }
    /* a few removed */
    for (int i = 3; i < n; i += 37) {
        assert_int_equal(qg_remove(s.idx, i), QG_OK);
        s.box[i].min_x = NAN;
    }
    qg_cleanup(s.idx);
    if (qg_validate(s.idx) != QG_OK)
        RFAIL("%s: qg_validate", what);
    check_rays(&s, &r, what);
    qg_destroy(s.idx);
    free(s.box);
}

/* The world: boxes over +-1e38. */
static qg_rect far_box(tu_rng *r, int i)
{
    (void)i;
    const float x = tu_rng_range(r, -1e38f, 1e38f), y = tu_rng_range(r, -1e38f, 1e38f);
    const float w = tu_rng_range(r, 0.0f, 1e36f), h = tu_rng_range(r, 0.0f, 1e36f);
    return tu_rect(x, y, x + w, y + h);
}

/* Boxes at the float range's ends and its hostile corners, among a few
 * plain ones and the off-the-line box. */
static qg_rect edge_box(tu_rng *r, int i)
{
    switch (i % 8) {
    case 0:
        return tu_rect(4.0433e37f, 9.41384e37f, 4.13099e37f, 9.50153e37f);
    case 1:
        return tu_rect(-FLT_MAX, -2.0f, tu_rng_range(r, -FLT_MAX, 0.0f), -1.0f);
    case 2:
        return tu_rect(tu_rng_range(r, 0.0f, FLT_MAX), -2.0f, FLT_MAX, -1.0f);
    case 3: {
        const float v = tu_rng_range(r, -100.0f, 100.0f);
        return tu_rect(v, v, v + 1.0f, v + 1.0f);
    }
    default:
        return hostile_box(r);
    }
}

/* The kinds' own traversals (no static elements) are checked for every
 * kind; QG_HOSTILE_RAYS_OWN=0 leaves them out (the static scenes, through
 * the generic form, still run), for bisecting a failure. */
static bool own_enabled(void)
{
    const char *e = getenv("QG_HOSTILE_RAYS_OWN");
    if (g_kind == QG_BRUTE_FORCE || e == NULL || e[0] != '0')
        return true;
    printf("own traversal of %s not checked (QG_HOSTILE_RAYS_OWN=0)\n", qg_kind_name(g_kind));
    return false;
}

static void test_far_plain(void **state)
{
    (void)state;
    if (!own_enabled())
        skip();
    run_scene("far +-1e38", 400, far_box, false, g_seed + 1);
}

static void test_far_static(void **state)
{
    (void)state;
    run_scene("far +-1e38", 400, far_box, true, g_seed + 1);
}

static void test_edge_plain(void **state)
{
    (void)state;
    if (!own_enabled())
        skip();
    run_scene("float edges", 300, edge_box, false, g_seed + 2);
}

static void test_edge_static(void **state)
{
    (void)state;
    run_scene("float edges", 300, edge_box, true, g_seed + 2);
}

int main(int argc, char **argv)
{
    if (!tu_kind_arg(argc, argv, &g_kind))
        return 2;
    g_seed = tu_env_seed(4646);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slab_exact),  cmocka_unit_test(test_far_plain),   cmocka_unit_test(test_far_static),
        cmocka_unit_test(test_edge_plain),  cmocka_unit_test(test_edge_static),
    };
    return tu_run_kind_tests("hostile_rays", g_kind, tests);
}
