// SPDX-License-Identifier: MIT
/* Cost cliffs with valid, finite boxes of mixed scales, one kind per run
 * (hostile_scales_<kind>): boxes at u * 2^e (e over 200 or 250 binades),
 * some 2^100 (2^120) wide and the rest 2^-100 (2^-120) wide, and crowds of
 * small boxes crossed by boxes 2e30 long. For every kind the pairs must be
 * the exact set (a sort-and-sweep in this file is the oracle); for the kinds
 * the header promises a cost bound on these scenes, memory_bytes and the
 * pair tests qg_pairs_with_stats reports must stay within it, in every
 * build. Each scene's seconds are printed; QG_SCENE_GUARD=S fails a scene
 * past S seconds (ctest sets it in native Release builds only, where the
 * scenes take about a second: sanitized and emulated code is 10-40x slower).
 * Seeds are fixed and printed (QG_TEST_SEED changes them). */
#include "test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static qg_kind g_kind;
static uint64_t g_seed;

#define SFAIL(...)                                                                                 \
    do {                                                                                           \
        char m_[512];                                                                              \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                      \
        fail_msg("hostile_scales_%s (seed %llu): %s", qg_kind_name(g_kind),                        \
                 (unsigned long long)g_seed, m_);                                                  \
    } while (0)

/* The cost bound the header states (quadgrid.h, "Cost"): memory within
 * MEM_PER_ELEMENT bytes per element plus MEM_CONSTANT, pair tests within
 * TESTS_PER_BRUTE times brute force's n(n-1)/2. */
#define MEM_PER_ELEMENT 512.0
#define MEM_CONSTANT (16.0 * 1024 * 1024)
#define TESTS_PER_BRUTE 16.0
/* Seconds a scene (build, cleanup, pairs) may take when QG_SCENE_GUARD
 * asks; 0: no guard. */
static double g_scene_guard = 0.0;

/* The kinds whose cost these scenes bound: all of them. */
static bool cost_bounded(qg_kind k)
{
    (void)k;
    return true;
}

static double now_s(void)
{
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef enum scene_shape {
    MIXED,    /* u * 2^e, 2^+-100 wide */
    MIXED_WORSE, /* u * 2^e over 250 binades, 2^+-120 wide */
    LONG_ROWS,   /* small boxes in [0, 1000]^2, every 50th [-1e30, y, 1e30, y + 1] */
    LONG_CROSS,  /* every 10th long, horizontal and vertical alternately */
} scene_shape;

typedef struct scene {
    const char *name;
    scene_shape shape;
    int32_t n;
    double tiny; /* MIXED*: share of the tiny boxes */
    bool everywhere; /* run for the kinds without a cost bound too */
} scene;

static void make_boxes(const scene *s, tu_rng *r, qg_rect *b)
{
    for (int32_t i = 0; i < s->n; i++) {
        if (s->shape == MIXED || s->shape == MIXED_WORSE) {
            const int span = s->shape == MIXED ? 200 : 250, w = s->shape == MIXED ? 100 : 120;
            const double ex = ldexp(1.0, (int)tu_rng_below(r, (uint32_t)span) - span / 2);
            const double ey = ldexp(1.0, (int)tu_rng_below(r, (uint32_t)span) - span / 2);
            const double x = (tu_rng_unit(r) * 2 - 1) * ex, y = (tu_rng_unit(r) * 2 - 1) * ey;
            const double side = tu_rng_unit(r) < s->tiny ? ldexp(1.0, -w) : ldexp(1.0, w);
            b[i] = tu_rect((float)x, (float)y, (float)(x + side), (float)(y + side));
            if (!(b[i].min_x <= b[i].max_x)) /* never: x + side rounds up or stays */
                b[i].max_x = b[i].min_x;
        } else {
            const float x = (float)(tu_rng_unit(r) * 1000), y = (float)(tu_rng_unit(r) * 1000);
            const int32_t every = s->shape == LONG_ROWS ? 50 : 10;
            if (i % every == 0 && (s->shape == LONG_ROWS || (i / every) % 2 == 0))
                b[i] = tu_rect(-1e30f, y, 1e30f, y + 1);
            else if (i % every == 0)
                b[i] = tu_rect(x, -1e30f, x + 1, 1e30f);
            else
                b[i] = tu_rect(x, y, x + 2, y + 2);
        }
    }
}

/* The exact pairs, a * 2^32 + b with a < b, sorted: a sweep over min_x. */
static int cmp_min_x(const void *pa, const void *pb, const qg_rect *b)
{
    const float x = b[*(const int32_t *)pa].min_x, y = b[*(const int32_t *)pb].min_x;
    return x < y ? -1 : x > y;
}

static const qg_rect *g_sort_boxes;
static int cmp_order(const void *a, const void *b)
{
    return cmp_min_x(a, b, g_sort_boxes);
}

static void oracle_pairs(const qg_rect *b, int32_t n, tu_vec *out)
{
    int32_t *order = malloc(sizeof *order * (size_t)n);
    assert_non_null(order);
    for (int32_t i = 0; i < n; i++)
        order[i] = i;
    g_sort_boxes = b;
    qsort(order, (size_t)n, sizeof *order, cmp_order);
    for (int32_t i = 0; i < n; i++) {
        const qg_rect a = b[order[i]];
        for (int32_t j = i + 1; j < n && b[order[j]].min_x <= a.max_x; j++) {
            if (tu_overlap(a, b[order[j]])) {
                int64_t lo = order[i] < order[j] ? order[i] : order[j];
                int64_t hi = order[i] < order[j] ? order[j] : order[i];
                tu_vec_push(out, lo << 32 | hi);
            }
        }
    }
    free(order);
    tu_vec_sort(out);
}

static bool push_pair(qg_handle a, qg_handle b, void *user)
{
    tu_vec_push(user, (int64_t)a << 32 | b);
    return true;
}

static bool sanitized(void)
{
    const char *d = getenv("QG_TEST_SCALE_DEFAULT");
    return d != NULL && *d != '\0';
}

static void run_scene(const scene *s, int round)
{
    if (!s->everywhere && !cost_bounded(g_kind))
        return;
    /* Sanitized -O0 builds run the quadratic scenes 20-40x slower: there
     * the scenes keep their shapes at 0.3 times the elements. */
    scene scaled = *s;
    if (sanitized() && scaled.n > 390)
        scaled.n = (int32_t)(scaled.n * 0.3);
    s = &scaled;
    tu_rng r;
    const uint64_t seed = g_seed + (uint64_t)round * 7919;
    tu_rng_seed(&r, seed);
    qg_rect *b = malloc(sizeof *b * (size_t)s->n);
    assert_non_null(b);
    make_boxes(s, &r, b);
    tu_vec want = {0}, got = {0};
    oracle_pairs(b, s->n, &want);

    const double t0 = now_s();
    qg_config c = qg_default_config(g_kind);
    qg_index *ix = NULL;
    assert_int_equal(qg_create(&c, &ix), QG_OK);
    /* Half one at a time (each insert may split, re-fit, re-tune), half in
     * one batch. */
    const int32_t half = s->n / 2;
    for (int32_t i = 0; i < half; i++) {
        if (qg_insert(ix, b[i]) != i)
            SFAIL("%s: insert %d refused", s->name, i);
    }
    qg_handle *hs = malloc(sizeof *hs * (size_t)(s->n - half));
    assert_non_null(hs);
    assert_int_equal(qg_insert_many(ix, b + half, s->n - half, hs), QG_OK);
    for (int32_t i = half; i < s->n; i++) {
        if (hs[i - half] != i)
            SFAIL("%s: insert_many gave handle %d for box %d", s->name, hs[i - half], i);
    }
    free(hs);
    qg_cleanup(ix);
    qg_query_stats st = {0};
    assert_int_equal(qg_pairs_with_stats(ix, push_pair, &got, &st), QG_OK);
    const double seconds = now_s() - t0;
    const qg_stats gs = qg_get_stats(ix);
    const double brute = (double)s->n * (double)(s->n - 1) / 2;
    fprintf(stderr,
            "hostile_scales %s %s (seed %llu): n %d, %zu pairs, %zu bytes (%.0f per element), "
            "%lld pair tests (%.2fx brute force), %d nodes, depth %d, %.3f s\n",
            qg_kind_name(g_kind), s->name, (unsigned long long)seed, s->n, want.n, gs.memory_bytes,
            (double)gs.memory_bytes / s->n, (long long)st.elements_tested,
            (double)st.elements_tested / brute, gs.nodes, gs.max_depth_reached, seconds);

    tu_vec_sort(&got);
    const long diff = tu_vec_first_diff(&got, &want);
    if (diff >= 0)
        SFAIL("%s: %zu pairs, the oracle %zu; first difference at %ld", s->name, got.n, want.n, diff);
    if (g_scene_guard > 0.0 && seconds > g_scene_guard)
        SFAIL("%s: %.2f s, past the %.1f s guard (QG_SCENE_GUARD)", s->name, seconds, g_scene_guard);
    if (cost_bounded(g_kind)) {
        const double mem_bound = MEM_PER_ELEMENT * s->n + MEM_CONSTANT;
        if ((double)gs.memory_bytes > mem_bound)
            SFAIL("%s: %zu bytes, past the bound %.0f", s->name, gs.memory_bytes, mem_bound);
        if ((double)st.elements_tested > TESTS_PER_BRUTE * brute + 64.0 * s->n)
            SFAIL("%s: %lld pair tests, %.1fx brute force's %.0f", s->name, (long long)st.elements_tested,
                  (double)st.elements_tested / brute, brute);
    }
    assert_int_equal(qg_validate(ix), QG_OK);
    qg_destroy(ix);
    tu_vec_free(&want);
    tu_vec_free(&got);
    free(b);
}

static void run_scenes(const scene *list, size_t count)
{
    tu_skip_unless_built(g_kind);
    for (size_t i = 0; i < count; i++)
        run_scene(&list[i], (int)i);
}

/* 390 and 3,000 boxes, half (or 40-60%) 2^100 wide and the rest 2^-100
 * wide, over 200 binades. */
static void test_mixed_scales(void **state)
{
    (void)state;
    static const scene list[] = {
        {"mixed 390 half", MIXED, 390, 0.5, true},   {"mixed 390 60% tiny", MIXED, 390, 0.6, true},
        {"mixed 390 40% tiny", MIXED, 390, 0.4, true}, {"mixed 3000 half", MIXED, 3000, 0.5, true},
        {"mixed 3000 60% tiny", MIXED, 3000, 0.6, true},
    };
    run_scenes(list, sizeof list / sizeof list[0]);
}

/* Worse: 250 binades, 2^+-120 wide. */
static void test_mixed_scales_worse(void **state)
{
    (void)state;
    static const scene list[] = {
        {"worse 3000 60% tiny", MIXED_WORSE, 3000, 0.6, false},
        {"worse 3000 half", MIXED_WORSE, 3000, 0.5, false},
    };
    run_scenes(list, sizeof list / sizeof list[0]);
}

/* 20,000 boxes, 2% of them [-1e30, y, 1e30, y + 1]; worse: 10,000 with 10%
 * long ones, rows and columns. */
static void test_long_boxes(void **state)
{
    (void)state;
    static const scene list[] = {
        {"long rows 20000", LONG_ROWS, 20000, 0, true},
        {"long cross 10000", LONG_CROSS, 10000, 0, true},
    };
    run_scenes(list, sizeof list / sizeof list[0]);
}

int main(int argc, char **argv)
{
    if (!tu_kind_arg(argc, argv, &g_kind))
        return 2;
    g_seed = tu_env_seed(4646);
    const char *guard = getenv("QG_SCENE_GUARD");
    if (guard && *guard)
        g_scene_guard = strtod(guard, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_scales),
        cmocka_unit_test(test_mixed_scales_worse),
        cmocka_unit_test(test_long_boxes),
    };
    return tu_run_kind_tests("hostile_scales", g_kind, tests);
}
