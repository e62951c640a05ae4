/* QG_LOOSE_GRID's own invariants, through the public header: loose boxes
 * grow on insert and move and shrink only in qg_cleanup (which never
 * allocates), visit reports tight cells and loose boxes that hold their
 * elements, answers stay exact before and after cleanup (the pair loop has
 * two paths) and after moves the margin does not cover, memory stays
 * constant over frames and bounded per element, and the stats. */
#include "test_util.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void skip_unavailable(void)
{
    if (!qg_kind_available(QG_LOOSE_GRID))
        skip();
}

static qg_index *make(tu_alloc *a, qg_rect bounds, float cell)
{
    qg_config c = qg_default_config(QG_LOOSE_GRID);
    c.bounds = bounds;
    c.cell_size = cell;
    c.allocator = tu_allocator(a);
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    return idx;
}

static bool count_pair(qg_handle a, qg_handle b, void *user)
{
    (void)a, (void)b;
    (*(long *)user)++;
    return true;
}

static long pair_count(const qg_index *idx)
{
    long n = 0;
    assert_int_equal(qg_pairs(idx, count_pair, &n), QG_OK);
    return n;
}

static bool count_query(qg_handle h, void *user)
{
    (void)h;
    (*(long *)user)++;
    return true;
}

static long query_count(const qg_index *idx, qg_rect area)
{
    long n = 0;
    assert_int_equal(qg_query(idx, area, count_query, &n), QG_OK);
    return n;
}

typedef struct visit_info {
    long tight, loose, elements;
    float widest; /* widest loose box */
} visit_info;

static void info_visit(qg_rect cell, int depth, int32_t elements, void *user)
{
    visit_info *v = user;
    assert_true(depth == 0 || depth == 1);
    assert_true(cell.min_x <= cell.max_x && cell.min_y <= cell.max_y);
    if (depth == 0) {
        v->tight++;
    } else {
        v->loose++;
        v->elements += elements;
        if (cell.max_x - cell.min_x > v->widest)
            v->widest = cell.max_x - cell.min_x;
    }
}

static visit_info info(const qg_index *idx)
{
    visit_info v = {0, 0, 0, 0};
    qg_visit(idx, info_visit, &v);
    return v;
}

/* A big element makes its loose box big; removing it leaves the box until
 * qg_cleanup, which shrinks it without allocating. */
static void test_grow_then_shrink(void **state)
{
    (void)state;
    skip_unavailable();
    tu_alloc a;
    tu_alloc_init(&a);
    qg_index *idx = make(&a, tu_rect(0, 0, 1000, 1000), 20);
    qg_handle small = qg_insert(idx, tu_rect(500, 500, 502, 502));
    qg_handle big = qg_insert(idx, tu_rect(400, 400, 620, 620));
    assert_true(small >= 0 && big >= 0);
    assert_true(info(idx).widest >= 220);
    assert_int_equal(query_count(idx, tu_rect(410, 410, 411, 411)), 1);
    assert_int_equal(qg_remove(idx, big), QG_OK);
    assert_true(info(idx).widest >= 220); /* boxes only shrink in cleanup */
    assert_int_equal(query_count(idx, tu_rect(410, 410, 411, 411)), 0);
    long grows = a.grow_requests;
    size_t bytes = a.bytes;
    qg_cleanup(idx);
    assert_int_equal(a.grow_requests, grows);
    assert_true(a.bytes <= bytes);
    assert_true(info(idx).widest < 40);
    assert_int_equal(qg_validate(idx), QG_OK);
    assert_int_equal(query_count(idx, tu_rect(501, 501, 501, 501)), 1);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

/* Frames of moves, with and without cleanup between them; pairs compared
 * with a plain loop on both paths, memory constant once warmed up. */
static void test_frames(void **state)
{
    (void)state;
    skip_unavailable();
    tu_alloc a;
    tu_alloc_init(&a);
    enum { N = 400 };
    qg_index *idx = make(&a, tu_rect(0, 0, 600, 600), 0);
    qg_rect boxes[N];
    qg_handle hs[N];
    float vx[N], vy[N];
    tu_rng r;
    tu_rng_seed(&r, 3);
    for (int i = 0; i < N; i++) {
        float x = tu_rng_range(&r, 0, 600), y = tu_rng_range(&r, 0, 600), h = tu_rng_range(&r, 1, 6);
        if (i % 50 == 0)
            h = 60; /* a few big ones */
        boxes[i] = tu_rect(x - h, y - h, x + h, y + h);
        vx[i] = tu_rng_range(&r, -3, 3);
        vy[i] = tu_rng_range(&r, -3, 3);
        hs[i] = qg_insert(idx, boxes[i]);
        assert_true(hs[i] >= 0);
    }
    size_t warm = 0;
    for (int frame = 0; frame < 60; frame++) {
        for (int i = 0; i < N; i++) {
            boxes[i].min_x += vx[i], boxes[i].max_x += vx[i];
            boxes[i].min_y += vy[i], boxes[i].max_y += vy[i];
            assert_int_equal(qg_move(idx, hs[i], boxes[i]), QG_OK);
        }
        long want = 0;
        for (int p = 0; p < N; p++)
            for (int q = p + 1; q < N; q++)
                want += tu_overlap(boxes[p], boxes[q]);
        if (frame % 2 == 0) {
            assert_int_equal(pair_count(idx), want); /* before cleanup: the lists */
            qg_cleanup(idx);
        }
        assert_int_equal(pair_count(idx), want);
        qg_rect area = tu_rect(100, 100, 180 + (float)frame, 170);
        long wq = 0;
        for (int i = 0; i < N; i++)
            wq += tu_overlap(boxes[i], area);
        assert_int_equal(query_count(idx, area), wq);
        if (frame % 10 == 0)
            assert_int_equal(qg_validate(idx), QG_OK);
        if (frame == 20)
            warm = a.bytes;
    }
    /* Links are the only thing that can grow after start-up, and only by
     * what the loose boxes newly cover. */
    assert_true(a.bytes <= warm + warm / 4);
    qg_stats s = qg_get_stats(idx);
    visit_info v = info(idx);
    assert_true(v.loose <= s.leaves); /* visit shows the non-empty loose boxes */
    assert_int_equal(s.nodes - s.leaves, v.tight);
    assert_int_equal(v.elements, N);
    print_message("loose_grid: %d loose + %d tight cells, %.1f bytes per element\n", s.leaves,
                  s.nodes - s.leaves, (double)s.memory_bytes / N);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

/* Moves that leave the margin, cross cells, jump across the world or come
 * twice between cleanups (the slow paths), with a few huge boxes (cells
 * that are not small): answers exact before and after cleanup, cleanup never
 * allocates, and once steady the index holds a bounded number of bytes per
 * element (per element: 16 base box, 4 cell word, 20 item, 4 next, plus the
 * cells and links). */
static void test_far_moves(void **state)
{
    (void)state;
    skip_unavailable();
    tu_alloc a;
    tu_alloc_init(&a);
    enum { N = 3000 };
    qg_config c = qg_default_config(QG_LOOSE_GRID);
    c.bounds = tu_rect(0, 0, 900, 900);
    c.element_size = 5; /* about one element per 16 x 16, like the agents */
    c.allocator = tu_allocator(&a);
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    static qg_rect boxes[N];
    static qg_handle hs[N];
    tu_rng r;
    tu_rng_seed(&r, 11);
    for (int i = 0; i < N; i++) {
        float x = tu_rng_range(&r, 0, 900), y = tu_rng_range(&r, 0, 900), h = tu_rng_range(&r, 1, 4);
        if (i % 500 == 0)
            h = 120;
        boxes[i] = tu_rect(x - h, y - h, x + h, y + h);
        hs[i] = qg_insert(idx, boxes[i]);
        assert_true(hs[i] >= 0);
    }
    qg_cleanup(idx);
    for (int frame = 0; frame < 30; frame++) {
        for (int i = 0; i < N; i++) {
            int moves = tu_rng_chance(&r, 0.1) ? 2 : 1;
            for (int m = 0; m < moves; m++) {
                float d = tu_rng_chance(&r, 0.02) ? 400.0f : 3.0f; /* rare jumps */
                float dx = tu_rng_range(&r, -d, d), dy = tu_rng_range(&r, -d, d);
                boxes[i].min_x += dx, boxes[i].max_x += dx;
                boxes[i].min_y += dy, boxes[i].max_y += dy;
                assert_int_equal(qg_move(idx, hs[i], boxes[i]), QG_OK);
            }
        }
        long want = 0;
        for (int p = 0; p < N; p++)
            for (int q = p + 1; q < N; q++)
                want += tu_overlap(boxes[p], boxes[q]);
        assert_int_equal(pair_count(idx), want); /* lists, base boxes */
        if (frame % 10 == 0)
            assert_int_equal(qg_validate(idx), QG_OK);
        long grows = a.grow_requests;
        qg_cleanup(idx);
        assert_int_equal(a.grow_requests, grows);
        assert_int_equal(pair_count(idx), want); /* items in cell order */
        if (frame % 10 == 0)
            assert_int_equal(qg_validate(idx), QG_OK);
    }
    qg_cleanup(idx); /* steady: spare capacity given back */
    qg_stats s = qg_get_stats(idx);
    print_message("loose_grid: %.1f bytes per element after far moves\n", (double)s.memory_bytes / N);
    assert_true(s.memory_bytes <= (size_t)N * 64);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

/* Elements outside the bounds go to the border cells and are still found. */
static void test_outside(void **state)
{
    (void)state;
    skip_unavailable();
    tu_alloc a;
    tu_alloc_init(&a);
    qg_index *idx = make(&a, tu_rect(0, 0, 100, 100), 10);
    qg_handle h1 = qg_insert(idx, tu_rect(-1e6f, -1e6f, -1e6f + 5, -1e6f + 5));
    qg_handle h2 = qg_insert(idx, tu_rect(-1e6f + 3, -1e6f + 3, -1e6f + 8, -1e6f + 8));
    qg_handle h3 = qg_insert(idx, tu_rect(1e7f, 50, 1e7f, 50));
    assert_true(h1 >= 0 && h2 >= 0 && h3 >= 0);
    assert_int_equal(query_count(idx, tu_rect(-INFINITY, -INFINITY, 0, 0)), 2);
    assert_int_equal(query_count(idx, tu_rect(1e7f, 50, 1e7f, 50)), 1);
    assert_int_equal(pair_count(idx), 1);
    qg_cleanup(idx);
    assert_int_equal(pair_count(idx), 1);
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grow_then_shrink),
        cmocka_unit_test(test_frames),
        cmocka_unit_test(test_far_moves),
        cmocka_unit_test(test_outside),
    };
    if (!qg_kind_available(QG_LOOSE_GRID))
        return 77;
    return cmocka_run_group_tests_name("loose_grid_invariants", tests, NULL, NULL) ? 1 : 0;
}
