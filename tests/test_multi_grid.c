// SPDX-License-Identifier: MIT
/* QG_MULTI_GRID's own invariants, through the public header: the coarse
 * occupancy levels stay exact under churn (qg_validate checks every bit), a
 * large query on a sparse world looks at far fewer cells than QG_GRID with
 * the same answers, the stats and visit show every level, and the outside /
 * huge / tiny sequences (queries split where they wrap) match
 * the brute-force kind. */
#include "test_util.h"
#include "kind_queries.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static qg_index *open_kind(qg_kind kind, tu_alloc *a, qg_rect bounds, float cell)
{
    qg_config c = qg_default_config(kind);
    c.bounds = bounds;
    c.cell_size = cell;
    return tu_open(c, a);
}

/* 1024x1024 world of 4x4 cells: 256x256 fine cells, 32x32 + 4x4 + 1x1
 * words. */
static void test_levels(void **state)
{
    (void)state;
    tu_alloc a;
    qg_index *idx = open_kind(QG_MULTI_GRID, &a, tu_rect(0, 0, 1024, 1024), 4);
    qg_stats s = qg_get_stats(idx);
    assert_int_equal(s.leaves, 256 * 256);
    assert_int_equal(s.nodes, 256 * 256 + 32 * 32 + 4 * 4 + 1);
    assert_int_equal(s.max_depth_reached, 3);
    tu_close(idx, &a);
}

static void count_depths(qg_rect cell, int depth, int32_t elements, void *user)
{
    long *n = user;
    (void)cell;
    if (depth >= 0 && depth < 8) {
        n[depth]++;
        n[8 + depth] += elements;
    }
}

/* Random churn against QG_GRID: same answers, and validate (which checks
 * every bit of every level) after every step. */
static void test_churn_exact(void **state)
{
    (void)state;
    tu_alloc am, ag;
    const qg_rect bounds = tu_rect(-100, -50, 900, 450);
    qg_index *m = open_kind(QG_MULTI_GRID, &am, bounds, 3);
    qg_index *g = open_kind(QG_GRID, &ag, bounds, 3);
    tu_rng r;
    tu_rng_seed(&r, 77);
    qg_handle live[300];
    int n = 0;
    for (int step = 0; step < 3000; step++) {
        uint32_t k = tu_rng_below(&r, 10);
        float x = tu_rng_range(&r, -150, 950), y = tu_rng_range(&r, -100, 500);
        float s = tu_rng_chance(&r, 0.05) ? tu_rng_range(&r, 0, 300) : tu_rng_range(&r, 0, 8);
        qg_rect b = tu_rect(x, y, x + s, y + s);
        if ((k < 4 && n < 300) || n == 0) {
            qg_handle h = qg_insert(m, b);
            assert_int_equal(qg_insert(g, b), h);
            live[n++] = h;
        } else if (k < 6) {
            uint32_t i = tu_rng_below(&r, (uint32_t)n);
            assert_int_equal(qg_remove(m, live[i]), QG_OK);
            assert_int_equal(qg_remove(g, live[i]), QG_OK);
            live[i] = live[--n];
        } else if (k < 9) {
            uint32_t i = tu_rng_below(&r, (uint32_t)n);
            assert_int_equal(qg_move(m, live[i], b), QG_OK);
            assert_int_equal(qg_move(g, live[i], b), QG_OK);
        } else if (tu_rng_chance(&r, 0.02)) {
            qg_clear(m);
            qg_clear(g);
            n = 0;
        } else {
            qg_cleanup(m);
            qg_cleanup(g);
        }
        if (step % 10 == 0)
            assert_int_equal(qg_validate(m), QG_OK);
        qg_rect q = tu_rect(x - 50, y - 30, x + tu_rng_range(&r, 0, 400), y + tu_rng_range(&r, 0, 200));
        tu_collect cm, cg;
        memset(&cm, 0, sizeof cm);
        memset(&cg, 0, sizeof cg);
        qg_query(m, q, tu_collect_query, &cm);
        qg_query(g, q, tu_collect_query, &cg);
        tu_vec_sort(&cm.out);
        tu_vec_sort(&cg.out);
        assert_int_equal(cm.out.n, cg.out.n);
        assert_int_equal(tu_vec_first_diff(&cm.out, &cg.out), -1);
        tu_vec_free(&cm.out);
        tu_vec_free(&cg.out);
    }
    long d[16] = {0};
    qg_visit(m, count_depths, d);
    assert_true(n == 0 || (d[0] == 1 && d[qg_get_stats(m).max_depth_reached] > 0));
    tu_close(m, &am);
    tu_close(g, &ag);
}

/* The bench's sparse case in small: 95% of the world empty, a query over
 * its lower-left quarter. multi_grid looks at far fewer cells. */
static void test_sparse_quarter(void **state)
{
    (void)state;
    const float W = 2048;
    tu_alloc am, ag;
    qg_index *m = open_kind(QG_MULTI_GRID, &am, tu_rect(0, 0, W, W), 8);
    qg_index *g = open_kind(QG_GRID, &ag, tu_rect(0, 0, W, W), 8);
    tu_rng r;
    tu_rng_seed(&r, 5);
    /* 16 squares, one per cell of a 4x4 partition, covering 5% in all. */
    const float side = W * sqrtf(0.05f / 16.0f);
    for (int c = 0; c < 16; c++) {
        float ox = (float)(c % 4) * (W / 4) + tu_rng_range(&r, 0, W / 4 - side);
        float oy = (float)(c / 4) * (W / 4) + tu_rng_range(&r, 0, W / 4 - side);
        for (int i = 0; i < 300; i++) {
            float x = ox + tu_rng_range(&r, 0, side - 5), y = oy + tu_rng_range(&r, 0, side - 5);
            qg_rect b = tu_rect(x, y, x + 4, y + 4);
            assert_int_equal(qg_insert(m, b), qg_insert(g, b));
        }
    }
    qg_query_stats sm, sg;
    tu_collect cm, cg;
    memset(&cm, 0, sizeof cm);
    memset(&cg, 0, sizeof cg);
    const qg_rect q = tu_rect(0, 0, W / 2, W / 2);
    assert_int_equal(qg_query_with_stats(m, q, tu_collect_query, &cm, &sm), QG_OK);
    assert_int_equal(qg_query_with_stats(g, q, tu_collect_query, &cg, &sg), QG_OK);
    assert_int_equal(cm.out.n, cg.out.n);
    assert_true(cm.out.n >= 4 * 300);
    assert_int_equal(sm.elements_tested, sg.elements_tested);
    print_message("sparse quarter: %ld found; cells visited grid %lld, multi_grid %lld\n", (long)cm.out.n,
                  (long long)sg.nodes_visited, (long long)sm.nodes_visited);
    assert_true(sm.nodes_visited * 4 < sg.nodes_visited);
    tu_vec_free(&cm.out);
    tu_vec_free(&cg.out);
    tu_close(m, &am);
    tu_close(g, &ag);
}

/* An empty multi_grid query looks at the top word only. */
static void test_empty_query(void **state)
{
    (void)state;
    tu_alloc a;
    qg_index *idx = open_kind(QG_MULTI_GRID, &a, tu_rect(0, 0, 1024, 1024), 4);
    qg_handle h = qg_insert(idx, tu_rect(1000, 1000, 1001, 1001));
    qg_query_stats st;
    tu_collect c;
    memset(&c, 0, sizeof c);
    assert_int_equal(qg_query_with_stats(idx, tu_rect(0, 0, 500, 500), tu_collect_query, &c, &st), QG_OK);
    assert_int_equal(c.out.n, 0);
    assert_true(st.nodes_visited <= 3);
    assert_int_equal(qg_remove(idx, h), QG_OK);
    qg_cleanup(idx);
    tu_vec_free(&c.out);
    tu_close(idx, &a);
}

/* ---- several cores ------------------------------------------------------ */

static void test_parts(void **state)
{
    (void)state;
    tu_alloc a;
    qg_index *idx = open_kind(QG_MULTI_GRID, &a, tu_rect(0, 0, 1024, 1024), 4);
    tu_parts_scenes(idx);
    tu_close(idx, &a);
}

/* Own ray casts and nearest searches against plain loops (the
 * walk QG_GRID shares): cell lines, other wraps, far outside, the wide
 * list, tiny and unaligned cells, k past the count. */
static void test_rays_nearest(void **state)
{
    (void)state;
    static const float cells[] = {16.0f, 7.0f, 0.05f};
    const qg_rect bounds = {0, 0, 1024, 1024};
    for (int i = 0; i < 3; i++) {
        tu_alloc a;
        qg_index *idx = open_kind(QG_MULTI_GRID, &a, bounds, cells[i]);
        kq_layers(idx, 1024.0f, 16.0f, tu_env_seed(1400 + (uint64_t)i));
        tu_close(idx, &a);
    }
    tu_alloc a;
    qg_index *idx = open_kind(QG_MULTI_GRID, &a, bounds, 16);
    kq_small(idx);
    tu_close(idx, &a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels),         cmocka_unit_test(test_churn_exact),
        cmocka_unit_test(test_sparse_quarter), cmocka_unit_test(test_empty_query),
        cmocka_unit_test(test_parts),          cmocka_unit_test(test_rays_nearest),
        /* Bounds are a hint: outside, huge and tiny worlds, with
         * failing allocations, exact beside the brute-force kind. */
        TU_KIND_CASE("test_scenes", tu_case_failing_worlds, QG_MULTI_GRID),
    };
    return tu_run_own_tests("multi_grid", QG_MULTI_GRID, tests);
}
