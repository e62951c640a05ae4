// SPDX-License-Identifier: MIT
/* Far worlds, for one kind (argv[1]): elements and searches at magnitudes
 * up to +-FLT_MAX, worlds whose extent passes FLT_MAX, tiny boxes in them.
 *
 * Every answer is checked against a brute-force loop over the test's own
 * copy of the boxes, using the header's exact tests only: qg_raycast
 * against qg_ray_box (every hit once, its t bit for bit; closest-hit mode
 * sees every element at the smallest t), qg_nearest against
 * qg_point_box_distance2 in (distance2, handle) order (k = 1, several,
 * count and more; max_distance2 0, random and infinite: distances at these
 * magnitudes overflow to infinity, so ties by handle are common), qg_query
 * and qg_query_point against the closed-box overlap. Each scene is checked
 * after the inserts, after qg_cleanup, after moves without a cleanup and
 * after the cleanup that follows them.
 *
 * - single_box: one box [-4.486e37, 1.2404e37, -4.45e37, 1.2764e37] in
 *   bounds +-FLT_MAX (found by qg_query_point, missed by the ray casts and,
 *   after qg_cleanup, by nearest when a world wider than FLT_MAX mapped
 *   through an overflowing difference).
 * - single_point: the point (-1e30, 1.7e38) in bounds +-FLT_MAX.
 * - float_range: 31 points spread over the float range plus
 *   [-FLT_MAX, 0, FLT_MAX, FLT_MAX], default config and bounds +-FLT_MAX.
 * - random_far: random boxes over the whole float range (random signs and
 *   exponents, widths from 0 to the range), boxes and points near
 *   +-FLT_MAX, tiny boxes in worlds of extent ~FLT_MAX; several configs.
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
static const char *g_scene = "";
static int g_phase;
static const char *const phase_names[] = {"inserted", "cleaned", "moved", "moved+cleaned"};

#define FFAIL(...)                                                                                 \
    do {                                                                                           \
        char m_[768];                                                                              \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                      \
        fail_msg("hostile_far %s (seed %llu) scene %s, %s: %s", qg_kind_name(g_kind),             \
                 (unsigned long long)g_seed, g_scene, phase_names[g_phase], m_);                  \
    } while (0)

/* ---- the model: the test's own copy of every live box ------------------- */

typedef struct model {
    qg_rect *boxes;
    bool *live;
    int32_t n; /* handles [0, n) were given out */
} model;

static void model_init(model *m, int32_t cap)
{
    m->boxes = calloc((size_t)cap, sizeof *m->boxes);
    m->live = calloc((size_t)cap, sizeof *m->live);
    m->n = 0;
    assert_non_null(m->boxes);
    assert_non_null(m->live);
}

static void model_free(model *m)
{
    free(m->boxes);
    free(m->live);
}

static void put(qg_index *idx, model *m, qg_rect b)
{
    const qg_handle h = qg_insert(idx, b);
    if (h != m->n)
        FFAIL("insert [%a %a %a %a] gave %d, want %d", b.min_x, b.min_y, b.max_x, b.max_y, h, m->n);
    m->boxes[h] = b;
    m->live[h] = true;
    m->n++;
}

static void move_to(qg_index *idx, model *m, qg_handle h, qg_rect b)
{
    const qg_status s = qg_move(idx, h, b);
    if (s != QG_OK)
        FFAIL("move %d to [%a %a %a %a]: %s", h, b.min_x, b.min_y, b.max_x, b.max_y, qg_status_name(s));
    m->boxes[h] = b;
}

/* ---- values over the whole float range --------------------------------- */

/* A float of random sign and exponent: from FLT_TRUE_MIN to FLT_MAX, often
 * near the ends, sometimes 0. */
static float far_value(tu_rng *r)
{
    const uint32_t pick = tu_rng_below(r, 16);
    float v;
    if (pick == 0)
        v = 0.0f;
    else if (pick == 1)
        v = FLT_MAX;
    else if (pick <= 3)
        v = nextafterf(FLT_MAX, 0.0f) * (float)(1.0 - tu_rng_unit(r) * 1e-3);
    else if (pick == 4)
        v = FLT_TRUE_MIN * (float)(1 + tu_rng_below(r, 8));
    else
        v = ldexpf((float)(0.5 + 0.5 * tu_rng_unit(r)), (int)tu_rng_below(r, 277) - 148);
    if (!isfinite(v))
        v = FLT_MAX;
    return tu_rng_chance(r, 0.5) ? -v : v;
}

/* max(lo + w, ...) clamped to FLT_MAX: the far end of a box starting at lo. */
static float far_end(float lo, float w)
{
    const float e = lo + w;
    return e <= FLT_MAX ? (e >= lo ? e : lo) : FLT_MAX;
}

/* A box over the whole range: a random corner, a width 0, tiny, relative
 * to the corner's magnitude, or of the range's own size. */
static qg_rect far_box(tu_rng *r)
{
    const float x = far_value(r), y = far_value(r);
    float w[2];
    for (int i = 0; i < 2; i++) {
        const float c = i == 0 ? x : y;
        switch (tu_rng_below(r, 5)) {
        case 0: w[i] = 0.0f; break;
        case 1: w[i] = fabsf(c) * (float)(tu_rng_unit(r) * 1e-3); break;
        case 2: w[i] = fabsf(far_value(r)); break;
        case 3: w[i] = fabsf(c) * (float)(tu_rng_unit(r) * 4.0); break;
        default: w[i] = FLT_TRUE_MIN * (float)tu_rng_below(r, 4); break;
        }
    }
    return tu_rect(x, y, far_end(x, w[0]), far_end(y, w[1]));
}

/* A tiny box (a few ulps of its corner, or a point) near +-FLT_MAX or
 * anywhere in a world of extent ~FLT_MAX. */
static qg_rect tiny_box(tu_rng *r, bool near_max)
{
    float x, y;
    if (near_max) {
        x = FLT_MAX * (float)(1.0 - tu_rng_unit(r) * 1e-2);
        y = FLT_MAX * (float)(1.0 - tu_rng_unit(r) * 1e-2);
        x = tu_rng_chance(r, 0.5) ? -x : x;
        y = tu_rng_chance(r, 0.5) ? -y : y;
    } else {
        x = tu_rng_range(r, -FLT_MAX, FLT_MAX);
        y = tu_rng_range(r, -FLT_MAX, FLT_MAX);
    }
    float x1 = x, y1 = y;
    for (uint32_t k = tu_rng_below(r, 4); k > 0; k--)
        x1 = nextafterf(x1, INFINITY);
    for (uint32_t k = tu_rng_below(r, 4); k > 0; k--)
        y1 = nextafterf(y1, INFINITY);
    if (!isfinite(x1))
        x1 = x;
    if (!isfinite(y1))
        y1 = y;
    return tu_rect(x, y, x1, y1);
}

/* ---- brute-force answers from the header's exact tests ----------------- */

/* Whether the segment really touches the box, in double, where nothing
 * overflows: qg_ray_box's float slabs can overflow ((max - o) past FLT_MAX,
 * or an inverse past it) and accept a box the segment passes far from, or
 * only at t = inf. A kind's walk, which follows the segment, need not find
 * such a box; a box the segment touches, or misses by rounding only (a
 * millionth of t), it must find when qg_ray_box accepts it. */
static bool ray_real(qg_rect b, float ox, float oy, float dx, float dy, float max_t)
{
    double a = 0.0, e = max_t;
    const double o[2] = {ox, oy}, d[2] = {dx, dy}, lo[2] = {b.min_x, b.min_y}, hi[2] = {b.max_x, b.max_y};
    for (int i = 0; i < 2; i++) {
        if (d[i] == 0.0) {
            if (o[i] < lo[i] || o[i] > hi[i])
                return false;
            continue;
        }
        double t0 = (lo[i] - o[i]) / d[i], t1 = (hi[i] - o[i]) / d[i];
        if (t0 > t1) {
            const double s = t0;
            t0 = t1;
            t1 = s;
        }
        a = t0 > a ? t0 : a;
        e = t1 < e ? t1 : e;
    }
    return a <= (double)FLT_MAX && a - e <= 1e-6 * fabs(a) + 1e-30;
}

typedef struct ray_seen {
    const model *m;
    int32_t *count; /* per handle: times reported */
    float *t;       /* per handle: the t reported */
    bool closest;
    long calls;
    qg_handle bad; /* a handle not live, or -1 */
} ray_seen;

static float ray_cb(qg_handle h, float t, void *user)
{
    ray_seen *s = user;
    s->calls++;
    if (h < 0 || h >= s->m->n || !s->m->live[h]) {
        s->bad = h;
        return -1.0f;
    }
    s->count[h]++;
    s->t[h] = t;
    return s->closest ? t : INFINITY;
}

static void check_ray(const qg_index *idx, const model *m, float ox, float oy, float dx, float dy, float max_t)
{
    ray_seen s = {m, calloc((size_t)m->n + 1, sizeof(int32_t)), calloc((size_t)m->n + 1, sizeof(float)), false,
                  0, -1};
    assert_non_null(s.count);
    assert_non_null(s.t);
    for (int mode = 0; mode < 2; mode++) {
        s.closest = mode == 1;
        memset(s.count, 0, ((size_t)m->n + 1) * sizeof(int32_t));
        s.calls = 0;
        const qg_status st = qg_raycast(idx, ox, oy, dx, dy, max_t, ray_cb, &s);
        if (st != QG_OK)
            FFAIL("raycast (%a, %a) along (%a, %a) max_t %a: %s", ox, oy, dx, dy, max_t, qg_status_name(st));
        if (s.bad >= 0)
            FFAIL("raycast (%a, %a) along (%a, %a) reported handle %d, not live", ox, oy, dx, dy, s.bad);
        float tmin = INFINITY;
        bool any = false;
        for (qg_handle h = 0; h < m->n; h++) {
            float t = 0.0f;
            const bool hit = m->live[h] && qg_ray_box(m->boxes[h], ox, oy, dx, dy, max_t, &t);
            if (hit && (!any || t < tmin))
                tmin = t;
            any |= hit;
            if (s.count[h] > 1)
                FFAIL("raycast (%a, %a) along (%a, %a) max_t %a reported %d %d times", ox, oy, dx, dy, max_t, h,
                      s.count[h]);
            if (s.count[h] && !hit)
                FFAIL("raycast (%a, %a) along (%a, %a) max_t %a reported %d [%a %a %a %a], which qg_ray_box "
                      "rejects",
                      ox, oy, dx, dy, max_t, h, m->boxes[h].min_x, m->boxes[h].min_y, m->boxes[h].max_x,
                      m->boxes[h].max_y);
            if (s.count[h] && hit && memcmp(&s.t[h], &t, sizeof t) != 0)
                FFAIL("raycast (%a, %a) along (%a, %a) reported %d at t %a, qg_ray_box says %a", ox, oy, dx, dy, h,
                      s.t[h], t);
            if (!s.closest && hit && !s.count[h] && t < INFINITY &&
                ray_real(m->boxes[h], ox, oy, dx, dy, max_t))
                FFAIL("raycast (%a, %a) along (%a, %a) max_t %a missed %d [%a %a %a %a] (qg_ray_box: t %a)", ox, oy,
                      dx, dy, max_t, h, m->boxes[h].min_x, m->boxes[h].min_y, m->boxes[h].max_x,
                      m->boxes[h].max_y, t);
        }
        if (s.closest && any) {
            for (qg_handle h = 0; h < m->n; h++) {
                float t = 0.0f;
                if (m->live[h] && qg_ray_box(m->boxes[h], ox, oy, dx, dy, max_t, &t) && t == tmin && t < INFINITY &&
                    ray_real(m->boxes[h], ox, oy, dx, dy, max_t) && !s.count[h])
                    FFAIL("closest-hit raycast (%a, %a) along (%a, %a) max_t %a missed %d [%a %a %a %a] at the "
                          "smallest t %a",
                          ox, oy, dx, dy, max_t, h, m->boxes[h].min_x, m->boxes[h].min_y, m->boxes[h].max_x,
                          m->boxes[h].max_y, tmin);
            }
        }
    }
    free(s.count);
    free(s.t);
}

typedef struct near_ref {
    float d2;
    qg_handle h;
} near_ref;

static int near_ref_cmp(const void *a, const void *b)
{
    const near_ref *x = a, *y = b;
    if (x->d2 != y->d2)
        return x->d2 < y->d2 ? -1 : 1;
    return (x->h > y->h) - (x->h < y->h);
}

static void check_nearest(const qg_index *idx, const model *m, float x, float y, int32_t k, float max_d2)
{
    near_ref *ref = malloc(((size_t)m->n + 1) * sizeof *ref);
    qg_handle *hs = malloc(((size_t)k + 1) * sizeof *hs);
    float *ds = malloc(((size_t)k + 1) * sizeof *ds);
    assert_non_null(ref);
    assert_non_null(hs);
    assert_non_null(ds);
    int32_t want = 0;
    for (qg_handle h = 0; h < m->n; h++) {
        if (!m->live[h])
            continue;
        const float d2 = qg_point_box_distance2(m->boxes[h], x, y);
        if (d2 <= max_d2)
            ref[want++] = (near_ref){d2, h};
    }
    qsort(ref, (size_t)want, sizeof *ref, near_ref_cmp);
    if (want > k)
        want = k;
    int32_t found = -1;
    const qg_status st = qg_nearest(idx, x, y, k, max_d2, hs, ds, &found);
    if (st != QG_OK)
        FFAIL("nearest (%a, %a) k %d max_d2 %a: %s", x, y, k, max_d2, qg_status_name(st));
    if (found != want)
        FFAIL("nearest (%a, %a) k %d max_d2 %a found %d, want %d (first wanted: %d at %a)", x, y, k, max_d2, found,
              want, want > 0 ? ref[0].h : -1, want > 0 ? ref[0].d2 : 0.0f);
    for (int32_t i = 0; i < want; i++) {
        if (hs[i] != ref[i].h || memcmp(&ds[i], &ref[i].d2, sizeof ds[i]) != 0)
            FFAIL("nearest (%a, %a) k %d max_d2 %a: #%d is %d at %a, want %d at %a", x, y, k, max_d2, i, hs[i],
                  ds[i], ref[i].h, ref[i].d2);
    }
    free(ref);
    free(hs);
    free(ds);
}

static void check_query(const qg_index *idx, const model *m, qg_rect area, bool point)
{
    tu_collect c;
    memset(&c, 0, sizeof c);
    tu_collect_reset(&c, 0);
    const qg_status st = point ? qg_query_point(idx, area.min_x, area.min_y, tu_collect_query, &c)
                               : qg_query(idx, area, tu_collect_query, &c);
    if (st != QG_OK)
        FFAIL("query [%a %a %a %a]: %s", area.min_x, area.min_y, area.max_x, area.max_y, qg_status_name(st));
    tu_vec want;
    memset(&want, 0, sizeof want);
    for (qg_handle h = 0; h < m->n; h++)
        if (m->live[h] && tu_overlap(m->boxes[h], area))
            tu_vec_push(&want, h);
    tu_vec_sort(&c.out);
    const long d = tu_vec_first_diff(&c.out, &want);
    if (d >= 0)
        FFAIL("%s [%a %a %a %a]: %zu hits, want %zu; first difference at #%ld (%lld vs %lld)",
              point ? "query_point" : "query", area.min_x, area.min_y, area.max_x, area.max_y, c.out.n, want.n, d,
              d < (long)c.out.n ? (long long)c.out.v[d] : -1LL, d < (long)want.n ? (long long)want.v[d] : -1LL);
    tu_vec_free(&c.out);
    tu_vec_free(&want);
}

/* ---- the searches of one phase ------------------------------------------ */

static float pick_coord(tu_rng *r, const model *m, bool xaxis)
{
    const uint32_t pick = tu_rng_below(r, 6);
    if (m->n > 0 && pick < 4) {
        const qg_rect b = m->boxes[tu_rng_below(r, (uint32_t)m->n)];
        const float lo = xaxis ? b.min_x : b.min_y, hi = xaxis ? b.max_x : b.max_y;
        switch (pick) {
        case 0: return lo;
        case 1: return hi;
        case 2: return lo * 0.5f + hi * 0.5f;
        default: return nextafterf(lo, -INFINITY) > -FLT_MAX ? nextafterf(lo, -INFINITY) : lo;
        }
    }
    return pick == 4 ? far_value(r) : tu_rng_range(r, -FLT_MAX, FLT_MAX);
}

static float pick_dir(tu_rng *r)
{
    switch (tu_rng_below(r, 6)) {
    case 0: return 0.0f;
    case 1: return 1.0f;
    case 2: return -1.0f;
    case 3: return far_value(r);
    default: return tu_rng_range(r, -1.0f, 1.0f);
    }
}

static float pick_max_t(tu_rng *r)
{
    switch (tu_rng_below(r, 4)) {
    case 0:
    case 1: return INFINITY;
    case 2: return 0.0f;
    default: return fabsf(far_value(r));
    }
}

static float pick_max_d2(tu_rng *r)
{
    switch (tu_rng_below(r, 4)) {
    case 0: return 0.0f;
    case 1: return INFINITY;
    case 2: return FLT_MAX;
    default: return fabsf(far_value(r));
    }
}

static void check_all(const qg_index *idx, const model *m, tu_rng *r, int searches)
{
    if (qg_validate(idx) != QG_OK)
        FFAIL("qg_validate failed");
    int32_t live = 0;
    for (qg_handle h = 0; h < m->n; h++)
        live += m->live[h];
    /* Every box's own corners and centre, along the axes and as points. */
    for (qg_handle h = 0; h < m->n; h++) {
        if (!m->live[h])
            continue;
        const qg_rect b = m->boxes[h];
        const float cx = b.min_x * 0.5f + b.max_x * 0.5f, cy = b.min_y * 0.5f + b.max_y * 0.5f;
        check_ray(idx, m, b.min_x, b.min_y, 1.0f, 0.0f, INFINITY);
        check_ray(idx, m, b.max_x, b.max_y, 0.0f, -1.0f, INFINITY);
        check_ray(idx, m, cx, cy, 0.0f, 0.0f, INFINITY);
        check_nearest(idx, m, cx, cy, 1, 0.0f);
        check_query(idx, m, tu_rect(cx, cy, cx, cy), true);
    }
    const int32_t ks[] = {1, 3, 8, live, live + 5};
    for (int i = 0; i < searches; i++) {
        const float x = pick_coord(r, m, true), y = pick_coord(r, m, false);
        check_ray(idx, m, x, y, pick_dir(r), pick_dir(r), pick_max_t(r));
        check_nearest(idx, m, x, y, ks[tu_rng_below(r, 5)], pick_max_d2(r));
        check_query(idx, m, tu_rect(x, y, x, y), true);
        float x1 = pick_coord(r, m, true), y1 = pick_coord(r, m, false);
        qg_rect area = tu_rect(fminf(x, x1), fminf(y, y1), fmaxf(x, x1), fmaxf(y, y1));
        if (tu_rng_chance(r, 0.2))
            area.min_x = -INFINITY;
        if (tu_rng_chance(r, 0.2))
            area.max_y = INFINITY;
        check_query(idx, m, area, false);
    }
    /* The corners of the float plane: every distance2 is infinite. */
    const float corners[][2] = {{FLT_MAX, FLT_MAX}, {-FLT_MAX, FLT_MAX}, {3e38f, -3.4e38f}, {-FLT_MAX, -FLT_MAX}};
    for (size_t i = 0; i < sizeof corners / sizeof *corners; i++)
        for (size_t j = 0; j < sizeof ks / sizeof *ks; j++) {
            check_nearest(idx, m, corners[i][0], corners[i][1], ks[j], INFINITY);
            check_nearest(idx, m, corners[i][0], corners[i][1], ks[j], FLT_MAX);
        }
}

/* A scene: the boxes given, checked after the inserts and qg_cleanup, then
 * after moving some of them (moves(...) picks the new boxes, NULL for none)
 * and after the qg_cleanup that follows. */
typedef qg_rect (*box_gen)(tu_rng *r, int32_t i);

static void run_scene(const char *name, qg_config c, const qg_rect *fixed, int32_t nfixed, box_gen gen,
                      int32_t ngen, box_gen moves, int searches)
{
    g_scene = name;
    tu_rng r;
    tu_rng_seed(&r, g_seed ^ (uint64_t)strlen(name) * 0x9E3779B97F4A7C15ull);
    tu_alloc a;
    qg_index *idx = tu_open(c, &a);
    model m;
    model_init(&m, nfixed + ngen + 1);
    g_phase = 0;
    for (int32_t i = 0; i < nfixed; i++)
        put(idx, &m, fixed[i]);
    for (int32_t i = 0; i < ngen; i++)
        put(idx, &m, gen(&r, i));
    check_all(idx, &m, &r, searches);
    qg_cleanup(idx);
    g_phase = 1;
    check_all(idx, &m, &r, searches);
    if (moves != NULL && m.n > 0) {
        g_phase = 2;
        for (qg_handle h = 0; h < m.n; h += 3)
            move_to(idx, &m, h, moves(&r, h));
        if (m.n > 4) {
            assert_int_equal(qg_remove(idx, 1), QG_OK);
            m.live[1] = false;
        }
        check_all(idx, &m, &r, searches);
        qg_cleanup(idx);
        g_phase = 3;
        check_all(idx, &m, &r, searches);
    }
    model_free(&m);
    tu_close(idx, &a);
}

static qg_config config_of(int which)
{
    qg_config c = qg_default_config(g_kind);
    switch (which) {
    case 0: break;
    case 1: c.bounds = tu_rect(-FLT_MAX, -FLT_MAX, FLT_MAX, FLT_MAX); break;
    case 2:
        c.bounds = tu_rect(-FLT_MAX, -FLT_MAX, FLT_MAX, FLT_MAX);
        c.fixed_sizes = true;
        break;
    case 3:
        c.bounds = tu_rect(-FLT_MAX, -FLT_MAX, FLT_MAX, FLT_MAX);
        c.element_size = 1.0f;
        break;
    default:
        c.bounds = tu_rect(-1e38f, -FLT_MAX, FLT_MAX, 1e38f);
        c.element_size = 1e30f;
        break;
    }
    return c;
}

static const char *const config_names[] = {"default", "+-FLT_MAX", "+-FLT_MAX fixed", "+-FLT_MAX size 1",
                                           "skewed size 1e30"};
#define CONFIGS 5

/* ---- the cases ---------------------------------------------------------- */

static void test_single_box(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const qg_rect box[] = {{-4.486e37f, 1.2404e37f, -4.45e37f, 1.2764e37f}};
    const qg_rect point[] = {{-1e30f, 1.7e38f, -1e30f, 1.7e38f}};
    char name[96];
    for (int w = 0; w < CONFIGS; w++) {
        snprintf(name, sizeof name, "single_box %s", config_names[w]);
        run_scene(name, config_of(w), box, 1, NULL, 0, NULL, 40);
        snprintf(name, sizeof name, "single_point %s", config_names[w]);
        run_scene(name, config_of(w), point, 1, NULL, 0, NULL, 40);
    }
}

static qg_rect gen_range_point(tu_rng *r, int32_t i)
{
    /* Points at exponents spread evenly over the float range. */
    const float v = ldexpf(1.5f, -148 + (int)(i * 275 / 30));
    const float x = isfinite(v) ? v : FLT_MAX;
    const float y = tu_rng_range(r, -FLT_MAX, FLT_MAX);
    const float sx = (i & 1) ? -x : x;
    return tu_rect(sx, y, sx, y);
}

static void test_float_range(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const qg_rect wide[] = {{-FLT_MAX, 0.0f, FLT_MAX, FLT_MAX}};
    char name[96];
    for (int w = 0; w < CONFIGS; w++) {
        snprintf(name, sizeof name, "float_range %s", config_names[w]);
        run_scene(name, config_of(w), wide, 1, gen_range_point, 31, gen_range_point, 60);
    }
}

static qg_rect gen_far(tu_rng *r, int32_t i)
{
    (void)i;
    return far_box(r);
}

static qg_rect gen_tiny_near_max(tu_rng *r, int32_t i)
{
    (void)i;
    return tiny_box(r, true);
}

static qg_rect gen_tiny_anywhere(tu_rng *r, int32_t i)
{
    (void)i;
    return tiny_box(r, tu_rng_chance(r, 0.3));
}

static void test_random_far(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const int32_t n = (int32_t)(tu_scaled(150) < 600 ? tu_scaled(150) : 600);
    char name[96];
    for (int w = 0; w < CONFIGS; w++) {
        snprintf(name, sizeof name, "random_far %s", config_names[w]);
        run_scene(name, config_of(w), NULL, 0, gen_far, n, gen_far, 150);
        snprintf(name, sizeof name, "tiny_near_max %s", config_names[w]);
        run_scene(name, config_of(w), NULL, 0, gen_tiny_near_max, n, gen_tiny_anywhere, 150);
        snprintf(name, sizeof name, "tiny_anywhere %s", config_names[w]);
        run_scene(name, config_of(w), NULL, 0, gen_tiny_anywhere, n, gen_far, 150);
    }
}

/* Enough elements (300) for the learning kinds to measure and re-fit at
 * qg_cleanup: the world follows boxes over the whole range. */
static void test_random_far_learned(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const int32_t n = (int32_t)(tu_scaled(300) < 1200 ? tu_scaled(300) : 1200);
    char name[96];
    for (int w = 0; w < 2; w++) {
        snprintf(name, sizeof name, "random_far_learned %s", config_names[w]);
        run_scene(name, config_of(w), NULL, 0, gen_far, n, gen_tiny_anywhere, 60);
        snprintf(name, sizeof name, "tiny_learned %s", config_names[w]);
        run_scene(name, config_of(w), NULL, 0, gen_tiny_anywhere, n, gen_tiny_near_max, 60);
    }
}

int main(int argc, char **argv)
{
    if (!tu_kind_arg(argc, argv, &g_kind))
        return 2;
    g_seed = tu_env_seed(4646);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_box),
        cmocka_unit_test(test_float_range),
        cmocka_unit_test(test_random_far),
        cmocka_unit_test(test_random_far_learned),
    };
    return tu_run_kind_tests("hostile_far", g_kind, tests);
}
