// SPDX-License-Identifier: MIT
/* Hostile scale and hostile configurations, for one kind (argv[1]).
 *
 * - coincident: 1,000,000 boxes at one place (QG_TEST_SCALE scales it) answer
 *   queries exactly (every handle once inside, none outside, a query beside
 *   the pile tests few boxes); 2,000 coincident boxes among 20,000 spread
 *   ones give exactly their pairs with pair tests bounded by 4 x the output
 *   plus a constant a box (output-bound, no blow-up beyond the output).
 * - float_max / tiny: boxes at and near +-FLT_MAX (bounds +-FLT_MAX and the
 *   defaults) and in worlds of subnormal size give the brute-force answers.
 * - config_extremes: every qg_config field at its extremes (max_depth,
 *   leaf_capacity, cell_size, element_size, max_element_size, bounds, and
 *   combinations: leaf capacity 1 with unbounded depth over coincident
 *   boxes, cells of FLT_TRUE_MIN in +-FLT_MAX bounds). Each is a clear
 *   QG_ERR_INVALID, or a working index: brute-force answers on a sequence of
 *   inserts, moves, removes, cleanups and a clear, holding at most 256 MiB
 *   (the allocator refuses more and the test fails), in bounded time.
 * - crowd_memory: 20,000 boxes gather in a strip and spread again, twice:
 *   qg_cleanup gives the memory back (within 5% of the spread state's; the
 *   two quadtrees keep the crowd's size and must not pass it), asks for no
 *   memory, and the answers stay exact.
 * - box_cells (grids only): cells far too small for the boxes (1e-3 under
 *   boxes 20 wide) hold each box in at most 4,096 cells: memory under the
 *   grid's rows plus 48 KiB a box, answers exact.
 * - capacity (point grid only, ctest hostile_capacity): 16,777,215 elements
 *   fit; the next insert answers QG_ERR_CAPACITY and changes nothing.
 *
 * Seeds are fixed (QG_TEST_SEED overrides) and printed with every failure. */
#include "test_util.h"

#include <float.h>
#include <limits.h>
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

#define HFAIL(...)                                                                                 \
    do {                                                                                           \
        char m_[512];                                                                              \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                      \
        fail_msg("hostile %s (seed %llu): %s", qg_kind_name(g_kind), (unsigned long long)g_seed,  \
                 m_);                                                                              \
    } while (0)

/* ---- a capped, counting allocator -------------------------------------- */

/* Counts bytes and the peak; refuses to grow past `cap` (and notes it), so a
 * configuration that wants unbounded memory fails the test instead of the
 * machine. */
typedef struct cap_alloc {
    size_t bytes, peak, cap;
    long refused;
    long grows; /* allocate or grow requests */
} cap_alloc;

static void *cap_realloc(void *ptr, size_t old_size, size_t new_size, void *user)
{
    cap_alloc *a = user;
    if (new_size == 0) {
        free(ptr);
        a->bytes -= old_size;
        return NULL;
    }
    if (new_size > old_size)
        a->grows++;
    if (new_size > old_size && a->bytes - old_size + new_size > a->cap) {
        a->refused++;
        return NULL;
    }
    void *p = realloc(ptr, new_size);
    if (!p)
        return NULL;
    a->bytes = a->bytes - old_size + new_size;
    if (a->bytes > a->peak)
        a->peak = a->bytes;
    return p;
}

static qg_allocator cap_allocator(cap_alloc *a, size_t cap)
{
    memset(a, 0, sizeof *a);
    a->cap = cap;
    return (qg_allocator){cap_realloc, a};
}

/* ---- the brute-force reference, written here ---------------------------- */

typedef struct model {
    qg_rect *box;
    qg_handle *h;
    bool *live;
    int n, cap;
} model;

static void model_free(model *m)
{
    free(m->box);
    free(m->h);
    free(m->live);
    memset(m, 0, sizeof *m);
}

static int model_add(model *m, qg_rect b, qg_handle h)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 256;
        m->box = realloc(m->box, (size_t)m->cap * sizeof *m->box);
        m->h = realloc(m->h, (size_t)m->cap * sizeof *m->h);
        m->live = realloc(m->live, (size_t)m->cap * sizeof *m->live);
        assert_non_null(m->box);
        assert_non_null(m->h);
        assert_non_null(m->live);
    }
    m->box[m->n] = b;
    m->h[m->n] = h;
    m->live[m->n] = true;
    return m->n++;
}

static int64_t pair_key(qg_handle a, qg_handle b)
{
    return a < b ? ((int64_t)a << 32) | b : ((int64_t)b << 32) | a;
}

/* The index answers what the model says: count, qg_get, pairs, and queries
 * (the whole plane, every 7th live box's own box, a point at a box corner). */
static void check_same(const qg_index *idx, const model *m, const char *where)
{
    if (qg_validate(idx) != QG_OK)
        HFAIL("%s: qg_validate failed", where);
    int32_t live = 0;
    for (int i = 0; i < m->n; i++)
        live += m->live[i];
    if (qg_count(idx) != live)
        HFAIL("%s: qg_count %d, expected %d", where, qg_count(idx), live);
    tu_collect got = {0};
    tu_vec want = {0};
    for (int i = 0; i < m->n; i++) {
        if (!m->live[i])
            continue;
        qg_rect g;
        if (qg_get(idx, m->h[i], &g) != QG_OK || !tu_rect_same(g, m->box[i]))
            HFAIL("%s: qg_get(%d) differs", where, m->h[i]);
        for (int j = i + 1; j < m->n; j++)
            if (m->live[j] && tu_overlap(m->box[i], m->box[j]))
                tu_vec_push(&want, pair_key(m->h[i], m->h[j]));
    }
    if (qg_pairs(idx, tu_collect_pair, &got) != QG_OK)
        HFAIL("%s: qg_pairs failed", where);
    tu_vec_sort(&got.out);
    tu_vec_sort(&want);
    long d = tu_vec_first_diff(&got.out, &want);
    if (d >= 0 || got.bad_order)
        HFAIL("%s: pairs differ from brute force (%zu vs %zu pairs, first difference at %ld, "
              "%ld out of order)",
              where, got.out.n, want.n, d, got.bad_order);
    for (int q = -2; q < m->n; q += 7) {
        qg_rect area;
        if (q == -2)
            area = tu_rect(-INF, -INF, INF, INF);
        else if (q == -1)
            area = m->n ? tu_rect(m->box[0].max_x, m->box[0].min_y, m->box[0].max_x, m->box[0].min_y)
                        : tu_rect(0, 0, 0, 0);
        else if (m->live[q])
            area = m->box[q];
        else
            continue;
        tu_collect_reset(&got, 0);
        tu_vec_clear(&want);
        if (qg_query(idx, area, tu_collect_query, &got) != QG_OK)
            HFAIL("%s: qg_query failed", where);
        for (int i = 0; i < m->n; i++)
            if (m->live[i] && tu_overlap(area, m->box[i]))
                tu_vec_push(&want, m->h[i]);
        tu_vec_sort(&got.out);
        tu_vec_sort(&want);
        if (tu_vec_first_diff(&got.out, &want) >= 0)
            HFAIL("%s: query [%g %g %g %g] found %zu, brute force %zu", where, (double)area.min_x,
                  (double)area.min_y, (double)area.max_x, (double)area.max_y, got.out.n, want.n);
    }
    tu_vec_free(&got.out);
    tu_vec_free(&want);
}

typedef qg_rect box_gen(tu_rng *r, void *ctx);

/* Inserts n boxes, moves, removes, re-inserts, cleans up and clears, with
 * the brute-force check after each phase. */
static void run_sequence(qg_index *idx, box_gen *gen, void *ctx, int n, const char *name)
{
    tu_rng r;
    tu_rng_seed(&r, g_seed);
    model m = {0};
    char where[160];
    for (int i = 0; i < n; i++) {
        qg_rect b = gen(&r, ctx);
        qg_handle h = qg_insert(idx, b);
        if (h < 0)
            HFAIL("%s: qg_insert [%g %g %g %g] = %s", name, (double)b.min_x, (double)b.min_y,
                  (double)b.max_x, (double)b.max_y, qg_status_name((qg_status)h));
        model_add(&m, b, h);
    }
    snprintf(where, sizeof where, "%s: after %d inserts", name, n);
    check_same(idx, &m, where);
    qg_cleanup(idx);
    snprintf(where, sizeof where, "%s: after cleanup", name);
    check_same(idx, &m, where);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < m.n; i++) {
            if (!m.live[i] || !tu_rng_chance(&r, 0.5))
                continue;
            qg_rect b = gen(&r, ctx);
            qg_status st = qg_move(idx, m.h[i], b);
            if (st != QG_OK)
                HFAIL("%s: qg_move = %s", name, qg_status_name(st));
            m.box[i] = b;
        }
        for (int i = 0; i < m.n; i++)
            if (m.live[i] && tu_rng_chance(&r, 0.1)) {
                assert_int_equal(qg_remove(idx, m.h[i]), QG_OK);
                m.live[i] = false;
            }
        snprintf(where, sizeof where, "%s: round %d moved and removed", name, round);
        check_same(idx, &m, where);
        for (int i = 0; i < n / 20; i++) {
            qg_rect b = gen(&r, ctx);
            qg_handle h = qg_insert(idx, b);
            if (h < 0)
                HFAIL("%s: re-insert = %s", name, qg_status_name((qg_status)h));
            model_add(&m, b, h);
        }
        qg_cleanup(idx);
        snprintf(where, sizeof where, "%s: round %d cleaned up", name, round);
        check_same(idx, &m, where);
    }
    qg_clear(idx);
    for (int i = 0; i < m.n; i++)
        m.live[i] = false;
    snprintf(where, sizeof where, "%s: after clear", name);
    check_same(idx, &m, where);
    model_free(&m);
}

/* ---- generators ---------------------------------------------------------- */

static float pick(tu_rng *r, const float *v, size_t n)
{
    return v[tu_rng_below(r, (uint32_t)n)];
}

/* A float in [lo, hi], computed in double (hi - lo overflows float). */
static float span(tu_rng *r, double lo, double hi)
{
    double v = lo + (hi - lo) * tu_rng_unit(r);
    return (float)(v > hi ? hi : v);
}

/* Boxes at and near +-FLT_MAX, boxes spanning everything, points. */
static qg_rect gen_float_max(tu_rng *r, void *ctx)
{
    (void)ctx;
    static const float edge[] = {-FLT_MAX, -FLT_MAX / 2, -3e38f, -1e30f, -1.0f, 0.0f,
                                 1.0f,     1e30f,        3e38f,  FLT_MAX / 2, FLT_MAX};
    float x0, y0, x1, y1;
    switch (tu_rng_below(r, 4)) {
    case 0: /* from the value set, with a width from the set too */
        x0 = pick(r, edge, sizeof edge / sizeof *edge);
        y0 = pick(r, edge, sizeof edge / sizeof *edge);
        x1 = span(r, x0, FLT_MAX);
        y1 = span(r, y0, FLT_MAX);
        break;
    case 1: /* anywhere, small */
        x0 = span(r, -FLT_MAX, FLT_MAX);
        y0 = span(r, -FLT_MAX, FLT_MAX);
        x1 = x0 + fabsf(x0) * 1e-3f;
        y1 = y0 + fabsf(y0) * 1e-3f;
        if (isinf(x1))
            x1 = FLT_MAX;
        if (isinf(y1))
            y1 = FLT_MAX;
        break;
    case 2: /* a point near an edge */
        x0 = x1 = pick(r, edge, sizeof edge / sizeof *edge);
        y0 = y1 = pick(r, edge, sizeof edge / sizeof *edge);
        break;
    default: /* wide */
        x0 = span(r, -FLT_MAX, 0);
        y0 = span(r, -FLT_MAX, 0);
        x1 = span(r, 0, FLT_MAX);
        y1 = span(r, 0, FLT_MAX);
        break;
    }
    if (x1 < x0)
        x1 = x0;
    if (y1 < y0)
        y1 = y0;
    return tu_rect(x0, y0, x1, y1);
}

/* A world of subnormal size: coordinates multiples of FLT_TRUE_MIN, and a
 * few at FLT_MIN and 1e-30. */
static qg_rect gen_tiny(tu_rng *r, void *ctx)
{
    (void)ctx;
    const float t = FLT_TRUE_MIN;
    if (tu_rng_chance(r, 0.1)) {
        static const float v[] = {0.0f, 1e-30f, -1e-30f, FLT_MIN, -FLT_MIN, 1e-38f};
        float x = pick(r, v, 6), y = pick(r, v, 6);
        return tu_rect(x, y, x + (tu_rng_chance(r, 0.5) ? 0 : 1e-30f), y);
    }
    float x = (float)((int)tu_rng_below(r, 200) - 100) * t;
    float y = (float)((int)tu_rng_below(r, 200) - 100) * t;
    float w = (float)tu_rng_below(r, 6) * t, h = (float)tu_rng_below(r, 6) * t;
    return tu_rect(x, y, x + w, y + h);
}

/* An ordinary world [0,1024]^2: sizes 0..20, a few wider than the world, a
 * few coincident boxes. */
static qg_rect gen_normal(tu_rng *r, void *ctx)
{
    (void)ctx;
    if (tu_rng_chance(r, 0.1))
        return tu_rect(500, 500, 503, 503);
    float x = tu_rng_range(r, -50, 1050), y = tu_rng_range(r, -50, 1050);
    float w = tu_rng_chance(r, 0.03) ? 3000 : tu_rng_range(r, 0, 20);
    return tu_rect(x, y, x + w, y + w * 0.7f);
}

/* ---- tests ---------------------------------------------------------------- */

static qg_index *make(qg_config c, cap_alloc *a, const char *name)
{
    c.allocator = cap_allocator(a, (size_t)256 << 20);
    qg_index *idx = NULL;
    qg_status st = qg_create(&c, &idx);
    if (st != QG_OK)
        HFAIL("%s: qg_create with bounds [%g %g %g %g] = %s", name, (double)c.bounds.min_x,
              (double)c.bounds.min_y, (double)c.bounds.max_x, (double)c.bounds.max_y,
              qg_status_name(st));
    return idx;
}

/* The sequence of `gen` in a world of each of the bounds. */
static void run_worlds(const qg_rect *bounds, size_t n, box_gen *gen, const char *what)
{
    for (size_t b = 0; b < n; b++) {
        qg_config c = qg_default_config(g_kind);
        c.bounds = bounds[b];
        cap_alloc a;
        char name[64];
        snprintf(name, sizeof name, "%s bounds %zu", what, b);
        qg_index *idx = make(c, &a, name);
        run_sequence(idx, gen, NULL, 400, name);
        qg_destroy(idx);
        assert_int_equal(a.bytes, 0);
    }
}

static void test_float_max(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const qg_rect bounds[] = {{-FLT_MAX, -FLT_MAX, FLT_MAX, FLT_MAX},
                              {0, 0, 1024, 1024},
                              {FLT_MAX / 2, FLT_MAX / 2, FLT_MAX, FLT_MAX}};
    run_worlds(bounds, sizeof bounds / sizeof *bounds, gen_float_max, "float_max");
}

static void test_tiny(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const float t = FLT_TRUE_MIN;
    const qg_rect bounds[] = {{-100 * t, -100 * t, 100 * t, 100 * t}, {0, 0, t, t}, {0, 0, 1e-30f, 1e-30f}};
    run_worlds(bounds, sizeof bounds / sizeof *bounds, gen_tiny, "tiny");
}

typedef struct query_count {
    long hits;
    qg_handle max;
} query_count;

static bool count_hit(qg_handle h, void *user)
{
    query_count *q = user;
    q->hits++;
    if (h > q->max)
        q->max = h;
    return true;
}

/* 1,000,000 boxes at one place: queries answer every one once, or none;
 * memory stays linear. */
static void test_coincident_queries(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const long n = tu_scaled(1000000) > 1000000 ? 1000000 : tu_scaled(1000000);
    qg_config c = qg_default_config(g_kind);
    c.element_size = 2;
    cap_alloc a;
    c.allocator = cap_allocator(&a, (size_t)1 << 30);
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    /* What the empty index holds (level_quadtree's ~3 MB of nodes) is not
     * per element: at a small QG_TEST_SCALE it would pass the bound alone. */
    const size_t empty = qg_get_stats(idx).memory_bytes;
    const qg_rect pile = tu_rect(100, 100, 102, 102);
    for (long i = 0; i < n; i++) {
        qg_handle h = qg_insert(idx, pile);
        if (h != (qg_handle)i)
            HFAIL("coincident insert %ld = %d", i, h);
    }
    qg_cleanup(idx);
    /* Memory linear in n: at most 256 bytes an element over the empty index. */
    size_t bytes = qg_get_stats(idx).memory_bytes;
    if (bytes > empty + (size_t)n * 256)
        HFAIL("%ld coincident boxes hold %zu bytes (%zu empty)", n, bytes, empty);
    const qg_rect inside[] = {{101, 101, 101, 101}, {0, 0, 1000, 1000}, {102, 102, 200, 200},
                              {-INF, -INF, INF, INF}};
    for (size_t q = 0; q < sizeof inside / sizeof *inside; q++) {
        query_count qc = {0, -1};
        assert_int_equal(qg_query(idx, inside[q], count_hit, &qc), QG_OK);
        if (qc.hits != n || qc.max != (qg_handle)(n - 1))
            HFAIL("query %zu over %ld coincident boxes found %ld", q, n, qc.hits);
    }
    /* Beside the pile: nothing found, and (every kind but brute force) few
     * boxes tested. */
    const qg_rect beside[] = {{500, 500, 600, 600}, {102.5f, 0, 1000, 1000}, {0, 0, 99.9f, 99.9f}};
    for (size_t q = 0; q < sizeof beside / sizeof *beside; q++) {
        query_count qc = {0, -1};
        qg_query_stats st = {0};
        assert_int_equal(qg_query_with_stats(idx, beside[q], count_hit, &qc, &st), QG_OK);
        if (qc.hits != 0)
            HFAIL("query beside the pile found %ld", qc.hits);
        fprintf(stderr, "hostile %s coincident: query beside %zu tested %lld of %ld boxes\n",
                qg_kind_name(g_kind), q, (long long)st.elements_tested, n);
    }
    /* Move every 1000th away and query both places. */
    long moved = 0;
    for (long i = 0; i < n; i += 1000, moved++)
        assert_int_equal(qg_move(idx, (qg_handle)i, tu_rect(800, 800, 801, 801)), QG_OK);
    qg_cleanup(idx);
    query_count qa = {0, -1}, qb = {0, -1};
    assert_int_equal(qg_query(idx, tu_rect(101, 101, 101, 101), count_hit, &qa), QG_OK);
    assert_int_equal(qg_query(idx, tu_rect(800, 800, 800, 800), count_hit, &qb), QG_OK);
    if (qa.hits != n - moved || qb.hits != moved)
        HFAIL("after moving %ld: %ld at the pile, %ld at the new place", moved, qa.hits, qb.hits);
    /* qg_validate is quadratic in a cell's or leaf's occupancy for some
     * kinds (loose_grid: 15 s at 100,000 coincident boxes): checked at
     * 100,000 and below only. */
    if (n <= 100000)
        assert_int_equal(qg_validate(idx), QG_OK);
    fprintf(stderr, "hostile %s coincident: %ld boxes, %zu bytes, peak %zu\n", qg_kind_name(g_kind),
            n, bytes, a.peak);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

typedef struct pair_count {
    long pairs;
} pair_count;

static bool count_pair(qg_handle x, qg_handle y, void *user)
{
    (void)x;
    (void)y;
    ((pair_count *)user)->pairs++;
    return true;
}

static int cmp_min_x(const void *x, const void *y)
{
    float a = ((const qg_rect *)x)->min_x, b = ((const qg_rect *)y)->min_x;
    return (a > b) - (a < b);
}

/* 2,000 coincident boxes among 20,000 spread ones: exactly the coincident
 * pairs plus the spread ones' (brute force on the spread part), and pair
 * tests bounded by 4 x output + 64 a box. */
static void test_coincident_pairs(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    enum { PILE = 2000, SPREAD = 20000 };
    qg_config c = qg_default_config(g_kind);
    c.bounds = tu_rect(0, 0, 4096, 4096);
    c.element_size = 4;
    cap_alloc a;
    c.allocator = cap_allocator(&a, (size_t)256 << 20);
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    tu_rng r;
    tu_rng_seed(&r, g_seed);
    qg_rect *spread = malloc(SPREAD * sizeof *spread);
    assert_non_null(spread);
    /* The spread boxes avoid the pile's square [2000, 2004]^2 by a margin. */
    for (int i = 0; i < SPREAD; i++) {
        float x, y;
        do {
            x = tu_rng_range(&r, 0, 4090);
            y = tu_rng_range(&r, 0, 4090);
        } while (x > 1990 && x < 2010 && y > 1990 && y < 2010);
        spread[i] = tu_rect(x, y, x + 4, y + 4);
    }
    /* Interleave the pile with the spread boxes. */
    int pile_left = PILE, spread_next = 0;
    for (int i = 0; i < SPREAD + PILE; i++) {
        bool take_pile = pile_left > 0 && (i % 11 == 0 || spread_next == SPREAD);
        qg_rect b = take_pile ? tu_rect(2000, 2000, 2004, 2004) : spread[spread_next++];
        pile_left -= take_pile;
        assert_true(qg_insert(idx, b) >= 0);
    }
    qg_cleanup(idx);
    long want = (long)PILE * (PILE - 1) / 2;
    /* The spread part's pairs, by sort and sweep on x (all 4 wide). */
    qsort(spread, SPREAD, sizeof *spread, cmp_min_x);
    for (int i = 0; i < SPREAD; i++)
        for (int j = i + 1; j < SPREAD && spread[j].min_x <= spread[i].max_x; j++)
            if (tu_overlap(spread[i], spread[j]))
                want++;
    pair_count pc = {0};
    qg_query_stats st = {0};
    assert_int_equal(qg_pairs_with_stats(idx, count_pair, &pc, &st), QG_OK);
    if (pc.pairs != want)
        HFAIL("coincident pairs: %ld, expected %ld", pc.pairs, want);
    /* A kind that keeps a box in every cell or leaf it overlaps tests a pair
     * once in each one both share: up to 4 for boxes no wider than a cell. */
    long bound = 4 * want + 64L * (SPREAD + PILE);
    fprintf(stderr, "hostile %s coincident pairs: %ld pairs, %lld pair tests (bound %ld)\n",
            qg_kind_name(g_kind), pc.pairs, (long long)st.elements_tested, bound);
    if (g_kind != QG_BRUTE_FORCE && st.elements_tested > bound)
        HFAIL("%lld pair tests for %ld pairs: beyond 4 x output + 64 a box", (long long)st.elements_tested,
              want);
    free(spread);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

/* ---- every config field at its extremes ---------------------------------- */

typedef struct cfg_case {
    const char *name;
    void (*set)(qg_config *c, double v);
    double v;
} cfg_case;

static void set_depth(qg_config *c, double v) { c->max_depth = (int)v; }
static void set_leaf(qg_config *c, double v) { c->leaf_capacity = (int)v; }
static void set_cell(qg_config *c, double v) { c->cell_size = (float)v; }
static void set_elem(qg_config *c, double v) { c->element_size = (float)v; }
static void set_maxe(qg_config *c, double v) { c->max_element_size = (float)v; }
static void set_bounds_w(qg_config *c, double v) { c->bounds.max_x = c->bounds.min_x + (float)v; }
static void set_bounds_max(qg_config *c, double v)
{
    c->bounds = tu_rect(-(float)v, -(float)v, (float)v, (float)v);
}
static void set_bounds_nan(qg_config *c, double v)
{
    (void)v;
    c->bounds.min_y = NAN;
}
static void set_bounds_inf(qg_config *c, double v)
{
    c->bounds.max_x = (float)v;
}
/* Leaf capacity 1, depth as given, element size tiny: coincident boxes can
 * never be split apart. */
static void set_deep_pile(qg_config *c, double v)
{
    c->leaf_capacity = 1;
    c->max_depth = (int)v;
    c->element_size = FLT_TRUE_MIN;
}
/* Cells of the given size in +-FLT_MAX bounds: a naive grid would want
 * 1e76 cells. */
static void set_tiny_cells_huge_world(qg_config *c, double v)
{
    c->bounds = tu_rect(-FLT_MAX, -FLT_MAX, FLT_MAX, FLT_MAX);
    c->cell_size = (float)v;
    c->element_size = (float)v;
    c->max_element_size = (float)v;
}

static void test_config_extremes(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const double tm = FLT_TRUE_MIN, fm = FLT_MAX;
    const cfg_case cases[] = {
        {"max_depth", set_depth, -1},
        {"max_depth", set_depth, 1},
        {"max_depth", set_depth, 2},
        {"max_depth", set_depth, 24},
        {"max_depth", set_depth, 31},
        {"max_depth", set_depth, 32},
        {"max_depth", set_depth, 64},
        {"max_depth", set_depth, 1000},
        {"max_depth", set_depth, INT_MAX},
        {"max_depth", set_depth, INT_MIN},
        {"leaf_capacity", set_leaf, -1},
        {"leaf_capacity", set_leaf, 1},
        {"leaf_capacity", set_leaf, 2},
        {"leaf_capacity", set_leaf, 1000000},
        {"leaf_capacity", set_leaf, INT_MAX},
        {"cell_size", set_cell, -1},
        {"cell_size", set_cell, NAN},
        {"cell_size", set_cell, INFINITY},
        {"cell_size", set_cell, tm},
        {"cell_size", set_cell, 1e-30},
        {"cell_size", set_cell, 1e-3},
        {"cell_size", set_cell, 1e6},
        {"cell_size", set_cell, 1e30},
        {"cell_size", set_cell, fm},
        {"element_size", set_elem, -1},
        {"element_size", set_elem, NAN},
        {"element_size", set_elem, INFINITY},
        {"element_size", set_elem, tm},
        {"element_size", set_elem, 1e-30},
        {"element_size", set_elem, 1e-3},
        {"element_size", set_elem, 1e6},
        {"element_size", set_elem, 1e30},
        {"element_size", set_elem, fm},
        {"max_element_size", set_maxe, -1},
        {"max_element_size", set_maxe, NAN},
        {"max_element_size", set_maxe, INFINITY},
        {"max_element_size", set_maxe, tm},
        {"max_element_size", set_maxe, 1e-30},
        {"max_element_size", set_maxe, 1e6},
        {"max_element_size", set_maxe, fm},
        {"bounds width", set_bounds_w, 0},
        {"bounds width", set_bounds_w, -1},
        {"bounds width", set_bounds_w, tm},
        {"bounds +-", set_bounds_max, fm},
        {"bounds +-", set_bounds_max, tm},
        {"bounds NaN", set_bounds_nan, 0},
        {"bounds max_x", set_bounds_inf, INFINITY},
        {"leaf 1, tiny elements, max_depth", set_deep_pile, 64},
        {"leaf 1, tiny elements, max_depth", set_deep_pile, INT_MAX},
        {"+-FLT_MAX bounds, cells", set_tiny_cells_huge_world, tm},
        {"+-FLT_MAX bounds, cells", set_tiny_cells_huge_world, 1e-3},
        {"+-FLT_MAX bounds, cells", set_tiny_cells_huge_world, fm},
    };
    int invalid = 0, working = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        qg_config c = qg_default_config(g_kind);
        cases[i].set(&c, cases[i].v);
        cap_alloc a;
        c.allocator = cap_allocator(&a, (size_t)256 << 20);
        qg_index *idx = (qg_index *)&a;
        clock_t t0 = clock();
        qg_status st = qg_create(&c, &idx);
        char name[128];
        snprintf(name, sizeof name, "config %s = %g", cases[i].name, cases[i].v);
        if (st == QG_ERR_INVALID) {
            if (idx != NULL || a.bytes != 0)
                HFAIL("%s: QG_ERR_INVALID but *out set or %zu bytes held", name, a.bytes);
            invalid++;
            fprintf(stderr, "hostile %s %s: QG_ERR_INVALID\n", qg_kind_name(g_kind), name);
            continue;
        }
        if (st != QG_OK)
            HFAIL("%s: qg_create = %s (refused %ld allocations over 256 MiB)", name,
                  qg_status_name(st), a.refused);
        size_t created = a.bytes;
        run_sequence(idx, gen_normal, NULL, 600, name);
        if (a.refused)
            HFAIL("%s: wanted more than 256 MiB", name);
        double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
        fprintf(stderr, "hostile %s %s: works, %zu bytes at create, peak %zu, %.2f s\n",
                qg_kind_name(g_kind), name, created, a.peak, secs);
        qg_destroy(idx);
        if (a.bytes != 0)
            HFAIL("%s: %zu bytes left after qg_destroy", name, a.bytes);
        working++;
    }
    fprintf(stderr, "hostile %s config extremes: %d working, %d QG_ERR_INVALID\n",
            qg_kind_name(g_kind), working, invalid);
}

/* A crowd gathers and disperses: after the 20,000 boxes spread over the
 * world are moved into a strip a sixteenth of it tall (its rows, leaves or
 * cells fill up) and back, twice, qg_cleanup brings memory_bytes back
 * within 5% (plus 64 KiB) of what the spread boxes held before, asking for
 * no memory itself; answers stay exact. The grids give back the node slots
 * of rows the crowd left (their rows kept their high-water
 * size). quadtree and loose_quadtree keep their node pools' size of the
 * crowd (1.6x and 1.24x the spread boxes' here): for them, memory must not
 * pass the crowd's. */
static void test_crowd_memory(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const int n = (int)(tu_scaled(20000) < 2000 ? 2000 : tu_scaled(20000));
    qg_config c = qg_default_config(g_kind);
    c.element_size = 4;
    cap_alloc a;
    c.allocator = cap_allocator(&a, (size_t)256 << 20);
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    tu_rng r;
    tu_rng_seed(&r, g_seed);
    qg_rect *spread = malloc((size_t)n * sizeof *spread);
    assert_non_null(spread);
    for (int i = 0; i < n; i++) {
        float x = tu_rng_range(&r, 0, 1020), y = tu_rng_range(&r, 0, 1020);
        spread[i] = tu_rect(x, y, x + 4, y + 4);
        assert_int_equal(qg_insert(idx, spread[i]), i);
    }
    qg_cleanup(idx);
    const size_t before = qg_get_stats(idx).memory_bytes;
    size_t crowd = 0, crowd_max = 0;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < n; i++) {
            float x = tu_rng_range(&r, 0, 1020), y = tu_rng_range(&r, 0, 60);
            assert_int_equal(qg_move(idx, i, tu_rect(x, y, x + 4, y + 4)), QG_OK);
        }
        long grows = a.grows;
        qg_cleanup(idx);
        if (a.grows != grows)
            HFAIL("crowd: qg_cleanup asked for memory");
        crowd = qg_get_stats(idx).memory_bytes;
        crowd_max = crowd > crowd_max ? crowd : crowd_max;
        for (int i = 0; i < n; i++)
            assert_int_equal(qg_move(idx, i, spread[i]), QG_OK);
        grows = a.grows;
        qg_cleanup(idx);
        if (a.grows != grows)
            HFAIL("crowd: qg_cleanup asked for memory");
    }
    assert_int_equal(qg_validate(idx), QG_OK);
    const size_t after = qg_get_stats(idx).memory_bytes;
    fprintf(stderr, "hostile %s crowd: %d boxes spread %zu bytes, crowded %zu, spread again %zu\n",
            qg_kind_name(g_kind), n, before, crowd, after);
    const bool keeps_peak = g_kind == QG_QUADTREE || g_kind == QG_LOOSE_QUADTREE;
    const size_t limit = keeps_peak && crowd_max > before ? crowd_max : before;
    if ((double)after > (double)limit * 1.05 + 65536)
        HFAIL("crowd: %zu bytes after the crowd dispersed, %zu before it gathered, %zu crowded", after,
              before, crowd_max);
    /* Exact after the compaction: count, boxes, pairs and queries against
     * the model. */
    model m = {0};
    for (int i = 0; i < n; i++)
        model_add(&m, spread[i], i);
    check_same(idx, &m, "crowd dispersed");
    model_free(&m);
    free(spread);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

/* The grids with cells far too small for their boxes (cell_size 1e-3,
 * boxes up to 20 wide, a few 3,000 wide): a box is linked into at most
 * 1,024 cells (src/grid_family/grid_rows.inc, GR_BOX_CELLS), so memory stays under the
 * grid's rows (2048 x 2048 cells of 4 bytes) plus 48 KiB a box, and the
 * answers are exact. */
static void test_box_cells(void **state)
{
    (void)state;
    if (g_kind != QG_GRID && g_kind != QG_MULTI_GRID) {
        skip();
        return;
    }
    tu_skip_unless_built(g_kind);
    const float cells[] = {1e-3f, 1e-2f, 0.1f};
    for (size_t k = 0; k < sizeof cells / sizeof *cells; k++) {
        qg_config c = qg_default_config(g_kind);
        c.cell_size = cells[k];
        cap_alloc a;
        char name[64];
        snprintf(name, sizeof name, "box cells, cell_size %g", (double)cells[k]);
        qg_index *idx = make(c, &a, name);
        tu_rng r;
        tu_rng_seed(&r, g_seed);
        model m = {0};
        const int n = 1000;
        for (int i = 0; i < n; i++) {
            qg_rect b = gen_normal(&r, NULL);
            qg_handle h = qg_insert(idx, b);
            if (h < 0)
                HFAIL("%s: insert %d = %s", name, i, qg_status_name((qg_status)h));
            model_add(&m, b, h);
        }
        const size_t bound = ((size_t)16 << 20) + (size_t)n * (48 << 10) + (1 << 20);
        fprintf(stderr, "hostile %s %s: %d boxes, %zu bytes, peak %zu (bound %zu)\n", qg_kind_name(g_kind),
                name, n, qg_get_stats(idx).memory_bytes, a.peak, bound);
        if (a.peak > bound)
            HFAIL("%s: peak %zu bytes for %d boxes, over %zu", name, a.peak, n, bound);
        check_same(idx, &m, name);
        model_free(&m);
        qg_destroy(idx);
        assert_int_equal(a.bytes, 0);
    }
}

/* The point grid's largest element count: 16,777,215 fit, the next insert
 * answers QG_ERR_CAPACITY and changes nothing; a remove makes room again. */
static void test_capacity(void **state)
{
    (void)state;
    /* ~1 GiB and a few seconds: its own ctest (hostile_capacity) sets
     * QG_HOSTILE_CAPACITY=1. */
    const char *on = getenv("QG_HOSTILE_CAPACITY");
    if (g_kind != QG_POINT_GRID || !on || strcmp(on, "1") != 0) {
        skip();
        return;
    }
    tu_skip_unless_built(g_kind);
    const int32_t max = 16777215;
    qg_config c = qg_default_config(g_kind);
    c.bounds = tu_rect(0, 0, 4096, 4096);
    c.element_size = 1;
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    /* In batches (one sort each), a newcomer's quick test run waits for
     * this one: one qg_insert at a time took most of a minute. */
    enum { BATCH = 1 << 20 };
    qg_rect *boxes = malloc(sizeof *boxes * BATCH);
    qg_handle *handles = malloc(sizeof *handles * BATCH);
    assert_non_null(boxes);
    assert_non_null(handles);
    for (int32_t first = 0; first < max; first += BATCH) {
        const int32_t n = max - first < BATCH ? max - first : BATCH;
        for (int32_t k = 0; k < n; k++) {
            const int32_t i = first + k;
            float x = (float)(i & 4095), y = (float)((i >> 12) & 4095);
            boxes[k] = tu_rect(x, y, x + 0.5f, y + 0.5f);
        }
        assert_int_equal(qg_insert_many(idx, boxes, n, handles), QG_OK);
        for (int32_t k = 0; k < n; k++)
            if (handles[k] != first + k)
                HFAIL("capacity: insert %d = %d", first + k, handles[k]);
    }
    free(handles);
    free(boxes);
    qg_cleanup(idx);
    qg_stats before = qg_get_stats(idx);
    assert_int_equal(qg_count(idx), max);
    qg_handle h = qg_insert(idx, tu_rect(1, 1, 2, 2));
    if (h != QG_ERR_CAPACITY)
        HFAIL("capacity: insert %d answered %d, not QG_ERR_CAPACITY", max + 1, h);
    qg_stats after = qg_get_stats(idx);
    assert_int_equal(qg_count(idx), max);
    assert_int_equal(after.memory_bytes, before.memory_bytes);
    assert_int_equal(after.elements, before.elements);
    query_count qc = {0, -1};
    assert_int_equal(qg_query(idx, tu_rect(1, 1, 2, 2), count_hit, &qc), QG_OK);
    /* The boxes the grid pattern puts in [1,2]^2 (it repeats every 2^24). */
    long expect = 0;
    for (int32_t i = 0; i < max; i++) {
        float x = (float)(i & 4095), y = (float)((i >> 12) & 4095);
        if (tu_overlap(tu_rect(x, y, x + 0.5f, y + 0.5f), tu_rect(1, 1, 2, 2)))
            expect++;
    }
    if (qc.hits != expect)
        HFAIL("capacity: query after the refused insert found %ld, expected %ld", qc.hits, expect);
    /* No qg_validate here: the point grid's takes minutes at 2^24. */
    assert_int_equal(qg_remove(idx, 12345), QG_OK);
    h = qg_insert(idx, tu_rect(7, 7, 8, 8));
    if (h != 12345)
        HFAIL("capacity: after a remove the insert answered %d", h);
    h = qg_insert(idx, tu_rect(7, 7, 8, 8));
    if (h != QG_ERR_CAPACITY)
        HFAIL("capacity: full again, the insert answered %d", h);
    fprintf(stderr, "hostile point_grid capacity: %d elements, %zu bytes, insert %d: "
                    "QG_ERR_CAPACITY\n",
            max, after.memory_bytes, max + 1);
    qg_destroy(idx);
}

int main(int argc, char **argv)
{
    if (!tu_kind_arg(argc, argv, &g_kind))
        return 2;
    g_seed = tu_env_seed(1414);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_max),          cmocka_unit_test(test_tiny),
        cmocka_unit_test(test_config_extremes),    cmocka_unit_test(test_coincident_pairs),
        cmocka_unit_test(test_coincident_queries), cmocka_unit_test(test_crowd_memory),
        cmocka_unit_test(test_box_cells),          cmocka_unit_test(test_capacity),
    };
    return tu_run_kind_tests("hostile", g_kind, tests);
}
