/* QG_MULTI_GRID's own invariants, through the public header: the coarse
 * occupancy levels stay exact under churn (qg_validate checks every bit), a
 * large query on a sparse world looks at far fewer cells than QG_GRID with
 * the same answers, the stats and visit show every level, and the outside /
 * huge / tiny sequences of issue 11 (queries split where they wrap) match
 * the brute-force kind. */
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

static qg_index *open_kind(qg_kind kind, tu_alloc *a, qg_rect bounds, float cell)
{
    tu_alloc_init(a);
    qg_config c = qg_default_config(kind);
    c.bounds = bounds;
    c.cell_size = cell;
    c.allocator = tu_allocator(a);
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    return idx;
}

static void close_kind(qg_index *idx, tu_alloc *a)
{
    assert_int_equal(qg_validate(idx), QG_OK);
    assert_int_equal(qg_get_stats(idx).memory_bytes, a->bytes);
    qg_destroy(idx);
    assert_int_equal(a->bytes, 0);
    assert_int_equal(a->errors, 0);
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
    close_kind(idx, &a);
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
    close_kind(m, &am);
    close_kind(g, &ag);
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
    close_kind(m, &am);
    close_kind(g, &ag);
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
    close_kind(idx, &a);
}


/* ---- issue 11: bounds are a hint ----------------------------------------
 * Outside-heavy, huge-bounds and tiny-world sequences run side by side with
 * the brute-force kind: same pairs and query answers, qg_validate after
 * every step; every insert and move also runs once with its allocations
 * failing, which must answer QG_ERR_NOMEM (or succeed without allocating)
 * and change nothing. */

typedef struct sc_world {
    qg_rect bounds;
    float element_size;
    float lo, hi; /* where the boxes go, per axis */
    float size;   /* typical width */
    float scale;  /* every coordinate is multiplied by this (exact: a power of two) */
} sc_world;

/* A double to the nearest finite float (boxes must stay finite). */
static float sc_fl(double v)
{
    return v > FLT_MAX ? FLT_MAX : v < -FLT_MAX ? -FLT_MAX : (float)v;
}

static qg_rect sc_box(tu_rng *r, const sc_world *w)
{
    const double u = tu_rng_unit(r);
    float side = w->size * (0.2f + 1.6f * (float)tu_rng_unit(r));
    if (u < 0.03)
        side = 0.0f; /* points */
    else if (u < 0.06)
        side = w->size * 40.0f; /* big */
    else if (u < 0.075)
        side = (w->hi - w->lo) * 1.5f; /* wider than the whole scene */
    const float x = w->lo + (w->hi - w->lo) * (float)tu_rng_unit(r);
    const float y = w->lo + (w->hi - w->lo) * (float)tu_rng_unit(r);
    return tu_rect(sc_fl((double)x * w->scale), sc_fl((double)y * w->scale), sc_fl(((double)x + side) * w->scale),
                   sc_fl(((double)y + side) * w->scale));
}

static void sc_sorted_query(const qg_index *idx, qg_rect area, tu_vec *out)
{
    tu_collect c;
    memset(&c, 0, sizeof c);
    assert_int_equal(qg_query(idx, area, tu_collect_query, &c), QG_OK);
    tu_vec_sort(&c.out);
    int64_t dup;
    assert_false(tu_vec_has_dup(&c.out, &dup));
    *out = c.out;
}

static void sc_sorted_pairs(const qg_index *idx, tu_vec *out)
{
    tu_collect c;
    memset(&c, 0, sizeof c);
    assert_int_equal(qg_pairs(idx, tu_collect_pair, &c), QG_OK);
    assert_int_equal(c.bad_order, 0);
    tu_vec_sort(&c.out);
    int64_t dup;
    assert_false(tu_vec_has_dup(&c.out, &dup));
    *out = c.out;
}

static void sc_same(const qg_index *idx, const qg_index *ref, tu_rng *r, const sc_world *w)
{
    assert_int_equal(qg_validate(idx), QG_OK);
    tu_vec a, b;
    sc_sorted_pairs(idx, &a);
    sc_sorted_pairs(ref, &b);
    assert_int_equal(a.n, b.n);
    assert_int_equal(tu_vec_first_diff(&a, &b), -1);
    tu_vec_free(&a);
    tu_vec_free(&b);
    for (int q = 0; q < 6; q++) {
        qg_rect area = sc_box(r, w);
        if (q == 0)
            area = tu_rect(-INFINITY, -INFINITY, INFINITY, INFINITY);
        else if (q == 1)
            area = tu_rect(area.min_x, -INFINITY, area.max_x, area.max_y);
        else if (q == 2)
            area.max_x = area.min_x, area.max_y = area.min_y;
        sc_sorted_query(idx, area, &a);
        sc_sorted_query(ref, area, &b);
        assert_int_equal(a.n, b.n);
        assert_int_equal(tu_vec_first_diff(&a, &b), -1);
        tu_vec_free(&a);
        tu_vec_free(&b);
    }
}

/* One call with every allocation failing: QG_ERR_NOMEM and nothing changed,
 * or success. Returns the call's status. */
static qg_status sc_failing(qg_index *idx, tu_alloc *a, bool insert, qg_handle h, qg_rect box)
{
    tu_snapshot before, after;
    memset(&before, 0, sizeof before);
    memset(&after, 0, sizeof after);
    tu_snapshot_take(idx, 64, &before);
    const size_t bytes = qg_get_stats(idx).memory_bytes;
    a->failing = true;
    qg_status s = insert ? (qg_status)qg_insert(idx, box) : qg_move(idx, h, box);
    a->failing = false;
    if (s == QG_ERR_NOMEM) {
        tu_snapshot_take(idx, 64, &after);
        char msg[200];
        if (!tu_snapshot_equal(&before, &after, msg, sizeof msg))
            fail_msg("failed %s changed the index: %s", insert ? "insert" : "move", msg);
        tu_snapshot_free(&after);
        assert_int_equal(qg_get_stats(idx).memory_bytes, bytes);
        assert_int_equal(a->bytes, bytes);
        assert_int_equal(qg_validate(idx), QG_OK);
    } else {
        assert_true(s >= 0);
    }
    tu_snapshot_free(&before);
    return s;
}

static void sc_run(qg_kind kind, const sc_world *w, uint64_t seed)
{
    tu_alloc a;
    tu_alloc_init(&a);
    a.mode = TU_FAIL_EACH_CALL;
    qg_config c = qg_default_config(kind);
    c.bounds = w->bounds;
    c.element_size = w->element_size;
    c.allocator = tu_allocator(&a);
    qg_index *idx, *ref;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    qg_config rc = qg_default_config(QG_BRUTE_FORCE);
    rc.bounds = w->bounds;
    assert_int_equal(qg_create(&rc, &ref), QG_OK);
    tu_rng r;
    tu_rng_seed(&r, seed);
    enum { N = 240 };
    qg_handle hs[N];
    bool live[N];
    long nomem = 0;
    for (int i = 0; i < N; i++) {
        const qg_rect b = sc_box(&r, w);
        if (i % 8 == 0) {
            const qg_status s = sc_failing(idx, &a, true, 0, b);
            if (s >= 0) { /* went through without allocating */
                hs[i] = (qg_handle)s;
                assert_int_equal(qg_insert(ref, b), hs[i]);
                live[i] = true;
                continue;
            }
            nomem++;
        }
        hs[i] = qg_insert(idx, b);
        assert_true(hs[i] >= 0);
        assert_int_equal(qg_insert(ref, b), hs[i]);
        live[i] = true;
    }
    qg_cleanup(idx);
    sc_same(idx, ref, &r, w);
    for (int step = 0; step < 24; step++) {
        for (int i = 0; i < N; i++) {
            if (!tu_rng_chance(&r, 0.3))
                continue;
            if (!live[i]) {
                hs[i] = qg_insert(idx, sc_box(&r, w));
                assert_true(hs[i] >= 0);
                qg_rect b;
                assert_int_equal(qg_get(idx, hs[i], &b), QG_OK);
                assert_int_equal(qg_insert(ref, b), hs[i]);
                live[i] = true;
            } else if (tu_rng_chance(&r, 0.1)) {
                assert_int_equal(qg_remove(idx, hs[i]), QG_OK);
                assert_int_equal(qg_remove(ref, hs[i]), QG_OK);
                live[i] = false;
            } else {
                const qg_rect b = sc_box(&r, w);
                if (tu_rng_chance(&r, 0.2)) {
                    const qg_status s = sc_failing(idx, &a, false, hs[i], b);
                    if (s == QG_OK) {
                        assert_int_equal(qg_move(ref, hs[i], b), QG_OK);
                        continue;
                    }
                    nomem++;
                }
                assert_int_equal(qg_move(idx, hs[i], b), QG_OK);
                assert_int_equal(qg_move(ref, hs[i], b), QG_OK);
            }
        }
        if (step % 3 != 2)
            qg_cleanup(idx);
        sc_same(idx, ref, &r, w);
    }
    assert_true(nomem > 0); /* the sequence did allocate */
    assert_int_equal(qg_validate(idx), QG_OK);
    assert_int_equal(qg_get_stats(idx).memory_bytes, a.bytes);
    qg_destroy(idx);
    qg_destroy(ref);
    assert_int_equal(a.bytes, 0);
    assert_int_equal(a.errors, 0);
}

static const sc_world sc_worlds[] = {
    /* outside: the default bounds in the middle of a world 9x as wide */
    {{0, 0, 1024, 1024}, 5, -4096, 5120, 5, 1},
    /* outside, and the bounds far from the origin and the boxes */
    {{1e6f, 1e6f, 1e6f + 512, 1e6f + 512}, 5, -3000, 3000, 5, 1},
    /* huge: bounds near FLT_MAX, boxes in a small corner of them */
    {{-3e38f, -3e38f, 3e38f, 3e38f}, 0x1p100f * 5, 0, 2000, 5, 0x1p100f},
    /* huge bounds with boxes spread over them */
    {{-3e38f, -3e38f, 3e38f, 3e38f}, 0x1p100f * 5, -1.5e8f, 1.5e8f, 1e6f, 0x1p100f},
    /* tiny: all normal floats, extent ~1e-27 */
    {{0, 0, 2000 * 0x1p-100f, 2000 * 0x1p-100f}, 5 * 0x1p-100f, 0, 2000, 5, 0x1p-100f},
    /* tiny bounds, and boxes outside them */
    {{0, 0, 1e-30f, 1e-30f}, 0, -1e-29f, 1e-29f, 1e-32f, 1},
};

static void sc_all(qg_kind kind)
{
    for (size_t i = 0; i < sizeof sc_worlds / sizeof *sc_worlds; i++)
        sc_run(kind, &sc_worlds[i], 1000 + i);
}

static void test_scenes(void **state)
{
    (void)state;
    sc_all(QG_MULTI_GRID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_churn_exact),
        cmocka_unit_test(test_sparse_quarter),
        cmocka_unit_test(test_empty_query),
        cmocka_unit_test(test_scenes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
