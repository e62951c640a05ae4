// SPDX-License-Identifier: MIT
/* Hostile nearest-neighbour searches, for one kind (argv[1]).
 *
 * Every qg_nearest answer is compared exactly (found, handles in order, and
 * distances2 bit for bit) with a sort of every live element by
 * (qg_point_box_distance2, handle) written here. Every call is timed
 * (processor time) and the slowest printed; QG_NEAR_GUARD=S fails a call
 * past S seconds (ctest sets 2 in native Release builds only, where brute
 * force takes well under a millisecond; elsewhere ctest's timeout catches a
 * call that never returns).
 * Each scene runs plain, with every few elements static and settled in the
 * engine's layer (qg_set_static + qg_cleanup), and with a few frames of
 * moves and cleanups on top (the dynamic elements then live in the fat
 * layer), for k = 1, small, 16/17 and 64/65 (where the k best change
 * form), the count, past it, and max_distance2 0, small and infinite.
 *
 * - subnormal: worlds on multiples of FLT_TRUE_MIN (every distance2 is 0:
 *   the answer is the k smallest handles) and of 1e-20 ... 1e-36 (the
 *   distances2 partly underflow), default config and a world-sized hint.
 * - long_boxes: 20,000 boxes with 2% spanning [-1e30, 1e30] on one axis
 *   (or both), each listed in many cells or leaves by the kinds that list
 *   a box in every cell it covers: k up to past the count.
 * - skewed: 1,000 subnormal boxes beside 6 points at x = 0.001; a bounds
 *   hint [-FLT_MAX, 1e-30, -1e38, 5] (qg_rect: min_x, min_y, max_x, max_y)
 *   with cell_size 1 over 200 boxes in [0, 1000]^2 and 6 points at
 *   (1e38, -1e38); huge bounds with tiny cells; queries far from the world.
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
#include <time.h>

#include <cmocka.h>

static qg_kind g_kind = QG_BRUTE_FORCE;
static uint64_t g_seed;
static const float INF = (float)INFINITY;
static double g_guard = 0.0; // seconds; 0: no guard
static double g_slowest;
static long g_calls;

#define NFAIL(...)                                                                                  \
    do {                                                                                            \
        char m_[640];                                                                               \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                       \
        fail_msg("hostile_nearest %s (seed %llu): %s", qg_kind_name(g_kind),                       \
                 (unsigned long long)g_seed, m_);                                                   \
    } while (0)

/* Processor time: the guard measures the call's work, not the machine's load. */
static double now_s(void)
{
    return (double)clock() / CLOCKS_PER_SEC;
}

/* ---- an index beside the model of what it holds -------------------------- */

typedef struct world {
    qg_index *idx;
    tu_alloc a;
    qg_rect *box; /* by handle */
    bool *live;
    int32_t high, cap, count;
    const char *name;
    /* the brute-force answer's scratch */
    struct near_ref *ref;
    qg_handle *got;
    float *got_d2;
    int32_t scratch;
    double slowest; /* this world's slowest call */
} world;

typedef struct near_ref {
    float d2;
    qg_handle h;
} near_ref;

static void w_open(world *w, qg_config c, const char *name)
{
    memset(w, 0, sizeof *w);
    c.kind = g_kind;
    w->idx = tu_open(c, &w->a);
    w->name = name;
}

static void w_grow(world *w, int32_t need)
{
    if (need <= w->cap)
        return;
    int32_t cap = w->cap ? w->cap : 256;
    while (cap < need)
        cap *= 2;
    w->box = realloc(w->box, (size_t)cap * sizeof *w->box);
    w->live = realloc(w->live, (size_t)cap * sizeof *w->live);
    assert_non_null(w->box);
    assert_non_null(w->live);
    w->cap = cap;
}

static qg_handle w_insert(world *w, qg_rect b)
{
    const qg_handle h = qg_insert(w->idx, b);
    if (h < 0)
        NFAIL("%s: qg_insert [%g %g %g %g] answered %d", w->name, (double)b.min_x, (double)b.min_y,
              (double)b.max_x, (double)b.max_y, h);
    w_grow(w, h + 1);
    for (; w->high <= h; ++w->high)
        w->live[w->high] = false;
    w->box[h] = b;
    w->live[h] = true;
    w->count++;
    return h;
}

static void w_move(world *w, qg_handle h, qg_rect b)
{
    if (qg_move(w->idx, h, b) != QG_OK)
        NFAIL("%s: qg_move(%d) failed", w->name, h);
    w->box[h] = b;
}

static void w_close(world *w)
{
    if (getenv("QG_NEAR_VERBOSE"))
        printf("  %-48s %6d elements, slowest call %.4f s\n", w->name, w->count, w->slowest);
    tu_close(w->idx, &w->a);
    free(w->box);
    free(w->live);
    free(w->ref);
    free(w->got);
    free(w->got_d2);
    memset(w, 0, sizeof *w);
}

/* Marks every `every`-th live handle static and settles the layer. */
static void w_static(world *w, int every)
{
    for (qg_handle h = 0; h < w->high; h += every)
        if (w->live[h] && qg_set_static(w->idx, h, true) != QG_OK)
            NFAIL("%s: qg_set_static(%d) failed", w->name, h);
    qg_cleanup(w->idx);
    qg_cleanup(w->idx);
}

static int ref_cmp(const void *pa, const void *pb)
{
    const near_ref *a = pa, *b = pb;
    if (a->d2 != b->d2)
        return a->d2 < b->d2 ? -1 : 1;
    return (a->h > b->h) - (a->h < b->h);
}

/* One qg_nearest, timed, against the sort of every live element. */
static void w_check(world *w, float x, float y, int32_t k, float max_d2, const char *what)
{
    const int32_t room = k > w->count + 1 ? k : w->count + 1;
    if (room > w->scratch) {
        w->got = realloc(w->got, (size_t)room * sizeof *w->got);
        w->got_d2 = realloc(w->got_d2, (size_t)room * sizeof *w->got_d2);
        assert_non_null(w->got);
        assert_non_null(w->got_d2);
        w->scratch = room;
    }
    w->ref = realloc(w->ref, (size_t)(w->high + 1) * sizeof *w->ref);
    assert_non_null(w->ref);
    int32_t m = 0;
    for (qg_handle h = 0; h < w->high; ++h) {
        if (!w->live[h])
            continue;
        const float d = qg_point_box_distance2(w->box[h], x, y);
        if (d <= max_d2)
            w->ref[m++] = (near_ref){d, h};
    }
    qsort(w->ref, (size_t)m, sizeof *w->ref, ref_cmp);
    const int32_t want = m < k ? m : k;
    int32_t found = -1;
    const double t0 = now_s();
    const qg_status s = qg_nearest(w->idx, x, y, k, max_d2, w->got, w->got_d2, &found);
    const double dt = now_s() - t0;
    g_calls++;
    g_slowest = dt > g_slowest ? dt : g_slowest;
    w->slowest = dt > w->slowest ? dt : w->slowest;
    const char *fmt = "%s/%s: qg_nearest(%.9g, %.9g, k %d, max_d2 %g) ";
    char head[256];
    snprintf(head, sizeof head, fmt, w->name, what, (double)x, (double)y, k, (double)max_d2);
    if (g_guard > 0.0 && dt > g_guard)
        NFAIL("%stook %.2f s (guard %.1f s) on %d elements", head, dt, g_guard, w->count);
    if (s != QG_OK)
        NFAIL("%sanswered %d", head, s);
    if (found != want)
        NFAIL("%sfound %d, brute force %d", head, found, want);
    for (int32_t i = 0; i < want; ++i) {
        if (w->got[i] != w->ref[i].h || !(w->got_d2[i] == w->ref[i].d2))
            NFAIL("%s#%d is %d at %g, brute force %d at %g (of %d)", head, i, w->got[i], (double)w->got_d2[i],
                  w->ref[i].h, (double)w->ref[i].d2, want);
    }
}

/* Every k and max_distance2 of the header's edges at one point. */
static void w_check_all(world *w, float x, float y, const float *limits, int nlimits, const char *what)
{
    const int32_t n = w->count;
    const int32_t ks[] = {1, 2, 5, 16, 17, 64, 65, n / 2 + 1, n - 1, n, n + 1, n + 37};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; ++i) {
        if (ks[i] < 1)
            continue;
        for (int j = 0; j < nlimits; ++j)
            w_check(w, x, y, ks[i], limits[j], what);
    }
}

/* Moves every dynamic element a little, twice, with cleanups between: the
 * fat layer then holds the dynamic elements beside the static layer. */
static void w_frames(world *w, tu_rng *r, float step)
{
    for (int f = 0; f < 2; ++f) {
        for (qg_handle h = 0; h < w->high; ++h) {
            if (!w->live[h] || qg_is_static(w->idx, h) || !tu_rng_chance(r, 0.7))
                continue;
            qg_rect b = w->box[h];
            const float dx = step * (float)(tu_rng_below(r, 5) - 2.0), dy = step * (float)(tu_rng_below(r, 5) - 2.0);
            const qg_rect nb = {b.min_x + dx, b.min_y + dy, b.max_x + dx, b.max_y + dy};
            if (isfinite(nb.min_x) && isfinite(nb.max_x) && isfinite(nb.min_y) && isfinite(nb.max_y))
                b = nb;
            w_move(w, h, b);
        }
        qg_cleanup(w->idx);
    }
}

/* The three engine states a scene runs in. */
enum { PLAIN, STATIC, STATIC_MOVED, STATES };
static const char *const state_names[STATES] = {"plain", "static", "static+moves"};

/* ---- subnormal and underflowing worlds ----------------------------------- */

/* 300 boxes on multiples of `unit`: min corners m * unit, m in [0, 2000),
 * sides 0..8 units. */
static void subnormal_fill(world *w, tu_rng *r, float unit, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) {
        const float x = (float)tu_rng_below(r, 2000) * unit, y = (float)tu_rng_below(r, 2000) * unit;
        const float sx = (float)tu_rng_below(r, 9) * unit, sy = (float)tu_rng_below(r, 9) * unit;
        w_insert(w, tu_rect(x, y, x + sx, y + sy));
    }
}

static void test_subnormal(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const float units[] = {FLT_TRUE_MIN, 1e-20f, 1e-22f, 1e-25f, 1e-28f, 1e-36f};
    const float limits[] = {INF, 0.0f, FLT_TRUE_MIN, FLT_MIN, 1.0f};
    for (size_t u = 0; u < sizeof units / sizeof *units; ++u) {
        for (int hint = 0; hint < 2; ++hint) {
            for (int st = 0; st < STATES; ++st) {
                tu_rng r;
                tu_rng_seed(&r, g_seed + 31 * u + 7 * (uint64_t)hint + (uint64_t)st);
                qg_config c = qg_default_config(g_kind);
                if (hint)
                    c.bounds = tu_rect(0.0f, 0.0f, 2000.0f * units[u], 2000.0f * units[u]);
                char name[96];
                snprintf(name, sizeof name, "subnormal unit %g %s %s", (double)units[u], hint ? "hint" : "default",
                         state_names[st]);
                world w;
                w_open(&w, c, name);
                subnormal_fill(&w, &r, units[u], 300);
                qg_cleanup(w.idx);
                if (st >= STATIC)
                    w_static(&w, 5);
                if (st == STATIC_MOVED)
                    w_frames(&w, &r, units[u]);
                // 200 searches at random points of the world and around it.
                for (int q = 0; q < 200; ++q) {
                    const float x = (float)((int)tu_rng_below(&r, 2200) - 100) * units[u];
                    const float y = (float)((int)tu_rng_below(&r, 2200) - 100) * units[u];
                    const int32_t ks[] = {1, 3, 10, 16, 17, 40, 64, 65, 200, 299, 300, 301, 1000};
                    const int32_t k = ks[tu_rng_below(&r, sizeof ks / sizeof *ks)];
                    w_check(&w, x, y, k, limits[tu_rng_below(&r, sizeof limits / sizeof *limits)], "random");
                }
                w_check_all(&w, 0.0f, 0.0f, limits, 5, "origin");
                w_check_all(&w, 1000.0f * units[u], 1000.0f * units[u], limits, 5, "centre");
                w_check_all(&w, 0.001f, 0.0f, limits, 5, "beside");
                w_close(&w);
            }
        }
    }
}

/* ---- long boxes ------------------------------------------------------------- */

static void long_fill(world *w, tu_rng *r, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) {
        const float x = tu_rng_range(r, 0.0f, 1000.0f), y = tu_rng_range(r, 0.0f, 1000.0f);
        qg_rect b = tu_rect(x, y, x + tu_rng_range(r, 0.5f, 5.0f), y + tu_rng_range(r, 0.5f, 5.0f));
        const uint32_t roll = tu_rng_below(r, 1000);
        if (roll < 12)
            b = tu_rect(-1e30f, y, 1e30f, y + 1.0f); // across every column
        else if (roll < 18)
            b = tu_rect(x, -1e30f, x + 1.0f, 1e30f); // across every row
        else if (roll < 20)
            b = tu_rect(-1e30f, -1e30f, 1e30f, 1e30f); // over everything
        w_insert(w, b);
    }
}

static void test_long_boxes(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const float limits[] = {INF, 0.0f, 25.0f};
    const int32_t n = 20000;
    for (int st = 0; st < STATES; ++st) {
        tu_rng r;
        tu_rng_seed(&r, g_seed + 101 + (uint64_t)st);
        char name[64];
        snprintf(name, sizeof name, "long boxes %s", state_names[st]);
        world w;
        w_open(&w, qg_default_config(g_kind), name);
        long_fill(&w, &r, n);
        qg_cleanup(w.idx);
        if (st >= STATIC)
            w_static(&w, 10);
        if (st == STATIC_MOVED)
            w_frames(&w, &r, 1.0f);
        const float pts[][2] = {{500.0f, 500.0f}, {0.0f, 0.0f},     {1000.0f, 3.0f}, {-2e4f, 500.0f},
                                {5e29f, 5e29f},   {-1e35f, 1e35f},  {3e38f, -3e38f}, {250.5f, 999.0f}};
        for (size_t p = 0; p < sizeof pts / sizeof *pts; ++p) {
            const int32_t ks[] = {1, 16, 100, n, n + 3};
            for (size_t i = 0; i < sizeof ks / sizeof *ks; ++i)
                for (size_t j = 0; j < sizeof limits / sizeof *limits; ++j)
                    w_check(&w, pts[p][0], pts[p][1], ks[i], limits[j], "point");
        }
        w_close(&w);
    }
}

/* ---- skewed worlds ------------------------------------------------------------ */

static void skewed_run(world *w, tu_rng *r, int st, int every, const float (*pts)[2], size_t npts,
                       const float *limits, int nlimits)
{
    qg_cleanup(w->idx);
    if (st >= STATIC)
        w_static(w, every);
    if (st == STATIC_MOVED)
        w_frames(w, r, FLT_TRUE_MIN);
    for (size_t p = 0; p < npts; ++p)
        w_check_all(w, pts[p][0], pts[p][1], limits, nlimits, "point");
}

static void test_skewed(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const float limits[] = {INF, 0.0f, 1e-6f, 1e30f};
    for (int st = 0; st < STATES; ++st) {
        // 1,000 subnormal boxes and 6 points at x = 0.001.
        for (int hint = 0; hint < 2; ++hint) {
            tu_rng r;
            tu_rng_seed(&r, g_seed + 211 + (uint64_t)st * 2 + (uint64_t)hint);
            char name[96];
            snprintf(name, sizeof name, "subnormal + points at 0.001 %s %s", hint ? "hint" : "default",
                     state_names[st]);
            qg_config c = qg_default_config(g_kind);
            if (hint)
                c.bounds = tu_rect(0.0f, 0.0f, 4000.0f * FLT_TRUE_MIN, 4000.0f * FLT_TRUE_MIN);
            world w;
            w_open(&w, c, name);
            for (int32_t i = 0; i < 1000; ++i) {
                const float x = (float)tu_rng_below(&r, 4000) * FLT_TRUE_MIN;
                const float y = (float)tu_rng_below(&r, 4000) * FLT_TRUE_MIN;
                w_insert(&w, tu_rect(x, y, x + (float)tu_rng_below(&r, 4) * FLT_TRUE_MIN, y));
            }
            const float ys[6] = {0.0f, 1.0f, -1.0f, 0.001f, 1e-30f, 5.0f};
            for (int i = 0; i < 6; ++i)
                w_insert(&w, tu_rect(0.001f, ys[i], 0.001f, ys[i]));
            const float pts[][2] = {{0.001f, 0.0f},   {0.001f, 1.0f}, {0.001f, -1.0f},      {0.001f, 5.0f},
                                    {0.0005f, 0.0f},  {0.0f, 0.0f},   {2000 * FLT_TRUE_MIN, 0.0f},
                                    {-0.001f, 1e-30f}, {1e30f, 0.0f}, {-1e38f, 1e38f}};
            skewed_run(&w, &r, st, 7, pts, sizeof pts / sizeof *pts, limits, 4);
            w_close(&w);
        }
        // The hint [-FLT_MAX, 1e-30, -1e38, 5] with cell size 1, 200 boxes in
        // [0, 1000]^2 and 6 points at (1e38, -1e38).
        for (int fixed = 0; fixed < 2; ++fixed) {
            tu_rng r;
            tu_rng_seed(&r, g_seed + 307 + (uint64_t)st * 2 + (uint64_t)fixed);
            char name[96];
            snprintf(name, sizeof name, "skewed hint, cell 1%s %s", fixed ? " fixed" : "", state_names[st]);
            qg_config c = qg_default_config(g_kind);
            c.bounds = tu_rect(-FLT_MAX, 1e-30f, -1e38f, 5.0f);
            c.cell_size = 1.0f;
            c.fixed_sizes = fixed != 0;
            world w;
            w_open(&w, c, name);
            for (int32_t i = 0; i < 200; ++i) {
                const float x = tu_rng_range(&r, 0.0f, 995.0f), y = tu_rng_range(&r, 0.0f, 995.0f);
                w_insert(&w, tu_rect(x, y, x + tu_rng_range(&r, 0.0f, 5.0f), y + tu_rng_range(&r, 0.0f, 5.0f)));
            }
            for (int i = 0; i < 6; ++i)
                w_insert(&w, tu_rect(1e38f, -1e38f, 1e38f, -1e38f));
            const float pts[][2] = {{1e38f, -1e38f}, {500.0f, 500.0f}, {0.0f, 0.0f},         {-FLT_MAX, 3.0f},
                                    {-1e38f, 1e-30f}, {1e20f, -1e20f}, {1000.0f, -1e38f}, {-5e37f, 2.5f}};
            skewed_run(&w, &r, st, 5, pts, sizeof pts / sizeof *pts, limits, 4);
            w_close(&w);
        }
        // Huge bounds with tiny cells, boxes in a corner of them.
        {
            tu_rng r;
            tu_rng_seed(&r, g_seed + 401 + (uint64_t)st);
            char name[96];
            snprintf(name, sizeof name, "huge bounds, cells 1e-3 %s", state_names[st]);
            qg_config c = qg_default_config(g_kind);
            c.bounds = tu_rect(-1e37f, -1e37f, 1e37f, 1e37f);
            c.cell_size = 1e-3f;
            c.element_size = 1e-3f;
            c.fixed_sizes = true;
            world w;
            w_open(&w, c, name);
            for (int32_t i = 0; i < 300; ++i) {
                const float x = tu_rng_range(&r, 0.0f, 100.0f), y = tu_rng_range(&r, 0.0f, 100.0f);
                w_insert(&w, tu_rect(x, y, x + tu_rng_range(&r, 0.0f, 2.0f), y + tu_rng_range(&r, 0.0f, 2.0f)));
            }
            const float pts[][2] = {{50.0f, 50.0f}, {-1e36f, 1e36f}, {1e30f, 0.0f}, {0.0f, -2e3f}, {1e5f, 1e5f}};
            skewed_run(&w, &r, st, 5, pts, sizeof pts / sizeof *pts, limits, 4);
            w_close(&w);
        }
    }
}

int main(int argc, char **argv)
{
    if (!tu_kind_arg(argc, argv, &g_kind))
        return 2;
    g_seed = tu_env_seed(4646);
    const char *guard = getenv("QG_NEAR_GUARD");
    if (guard && *guard)
        g_guard = strtod(guard, NULL);
    if (g_guard > 0.0)
        printf("seed %llu, guard %.1f s a call\n", (unsigned long long)g_seed, g_guard);
    else
        printf("seed %llu, no time guard (QG_NEAR_GUARD=S sets one)\n", (unsigned long long)g_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_subnormal),
        cmocka_unit_test(test_long_boxes),
        cmocka_unit_test(test_skewed),
    };
    const int rc = tu_run_kind_tests("hostile_nearest", g_kind, tests);
    printf("%ld calls, slowest %.4f s\n", g_calls, g_slowest);
    return rc;
}
