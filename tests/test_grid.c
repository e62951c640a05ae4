// SPDX-License-Identifier: MIT
/* QG_GRID's own invariants, through the public header: row memory given back
 * and taken again, moves inside a cell range that touch nothing, boxes
 * outside the bounds wrapping onto the torus, big boxes and the everywhere
 * list, exact rollback of multi-row growth, cells visited by a query, the
 * stats, the outside / huge / tiny sequences against the
 * brute-force kind, and the parts of the parallel calls (bands of rows). */
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

typedef struct fx {
    tu_alloc a;
    qg_index *idx;
} fx;

/* A 1024x1024 world of 16x16 cells: 64x64 cells fill it, the torus has
 * 128x128 (the least per side), so it wraps every 2048 units. */
static void open_grid(fx *f, float cell)
{
    tu_alloc_init(&f->a);
    qg_config c = qg_default_config(QG_GRID);
    c.cell_size = cell;
    c.allocator = tu_allocator(&f->a);
    assert_int_equal(qg_create(&c, &f->idx), QG_OK);
}

static void close_grid(fx *f)
{
    assert_int_equal(qg_validate(f->idx), QG_OK);
    assert_int_equal(qg_get_stats(f->idx).memory_bytes, f->a.bytes);
    qg_destroy(f->idx);
    assert_int_equal(f->a.bytes, 0);
    assert_int_equal(f->a.errors, 0);
}

static long count_query(const qg_index *idx, qg_rect r)
{
    tu_collect c;
    memset(&c, 0, sizeof c);
    assert_int_equal(qg_query(idx, r, tu_collect_query, &c), QG_OK);
    long n = (long)c.out.n;
    tu_vec_sort(&c.out);
    int64_t dup;
    assert_false(tu_vec_has_dup(&c.out, &dup));
    tu_vec_free(&c.out);
    return n;
}

static long count_pairs(const qg_index *idx)
{
    tu_collect c;
    memset(&c, 0, sizeof c);
    assert_int_equal(qg_pairs(idx, tu_collect_pair, &c), QG_OK);
    long n = (long)c.out.n;
    assert_int_equal(c.bad_order, 0);
    tu_vec_sort(&c.out);
    int64_t dup;
    assert_false(tu_vec_has_dup(&c.out, &dup));
    tu_vec_free(&c.out);
    return n;
}

static void test_stats_cells(void **state)
{
    (void)state;
    fx f;
    open_grid(&f, 16);
    qg_stats s = qg_get_stats(f.idx);
    assert_int_equal(s.nodes, 128 * 128); /* at least 128 per side: the world wraps */
    assert_int_equal(s.leaves, 128 * 128);
    assert_int_equal(s.max_depth_reached, 0);
    close_grid(&f);
}

/* A row with no elements gives its memory back at cleanup, and takes it
 * again on the next insert. */
static void test_row_memory_given_back(void **state)
{
    (void)state;
    fx f;
    open_grid(&f, 16);
    /* The first insert also allocates the handle slots: measure after it. */
    assert_int_equal(qg_insert(f.idx, tu_rect(0, 0, 0, 0)), 0);
    assert_int_equal(qg_remove(f.idx, 0), QG_OK);
    qg_cleanup(f.idx);
    const size_t empty = qg_get_stats(f.idx).memory_bytes;
    qg_handle h = qg_insert(f.idx, tu_rect(100, 100, 104, 104)); /* one cell, row 6 */
    assert_true(h >= 0);
    const size_t one_row = qg_get_stats(f.idx).memory_bytes;
    assert_true(one_row >= empty + 64 * 4); /* the row's 64 cells */
    qg_handle h2 = qg_insert(f.idx, tu_rect(100, 500, 104, 504)); /* another row */
    assert_true(qg_get_stats(f.idx).memory_bytes > one_row);
    assert_int_equal(qg_remove(f.idx, h2), QG_OK);
    qg_cleanup(f.idx);
    assert_int_equal(qg_get_stats(f.idx).memory_bytes, one_row);
    assert_int_equal(qg_remove(f.idx, h), QG_OK);
    assert_int_equal(qg_validate(f.idx), QG_OK);
    qg_cleanup(f.idx);
    assert_int_equal(qg_get_stats(f.idx).memory_bytes, empty);
    assert_int_equal(qg_validate(f.idx), QG_OK);
    h = qg_insert(f.idx, tu_rect(100, 100, 104, 104));
    assert_int_equal(qg_get_stats(f.idx).memory_bytes, one_row);
    assert_int_equal(count_query(f.idx, tu_rect(0, 0, 1024, 1024)), 1);
    close_grid(&f);
}

/* A move that keeps the cell range allocates nothing and visits the same
 * cells; one that changes it keeps the answers exact. */
static void test_move_in_place(void **state)
{
    (void)state;
    fx f;
    open_grid(&f, 16);
    qg_handle h = qg_insert(f.idx, tu_rect(33, 33, 40, 40));
    assert_int_equal(qg_insert(f.idx, tu_rect(200, 200, 210, 210)), 1);
    const size_t bytes = qg_get_stats(f.idx).memory_bytes;
    const long req = f.a.grow_requests;
    for (int i = 0; i < 100; i++) {
        float d = (float)(i % 7);
        assert_int_equal(qg_move(f.idx, h, tu_rect(33 + d, 33 + d, 40 + d, 40 + d)), QG_OK);
    }
    assert_int_equal(f.a.grow_requests, req);
    assert_int_equal(qg_get_stats(f.idx).memory_bytes, bytes);
    assert_int_equal(qg_validate(f.idx), QG_OK);
    /* Across cells: from one cell to four, then far away, then back. */
    assert_int_equal(qg_move(f.idx, h, tu_rect(40, 40, 50, 50)), QG_OK);
    assert_int_equal(count_query(f.idx, tu_rect(49, 49, 49, 49)), 1);
    assert_int_equal(qg_move(f.idx, h, tu_rect(205, 205, 205, 205)), QG_OK);
    assert_int_equal(count_pairs(f.idx), 1);
    assert_int_equal(count_query(f.idx, tu_rect(40, 40, 50, 50)), 0);
    assert_int_equal(qg_validate(f.idx), QG_OK);
    close_grid(&f);
}

/* Boxes outside the bounds wrap onto the torus and are found, once. */
static void test_outside_bounds(void **state)
{
    (void)state;
    fx f;
    open_grid(&f, 16);
    qg_rect out[] = {{-500, -500, -400, -400}, {2000, 10, 2100, 20}, {10, 3000, 20, 3001},
                     {-1e30f, -1e30f, 1e30f, 1e30f}, {5000, 5000, 5000, 5000}};
    for (int i = 0; i < 5; i++)
        assert_int_equal(qg_insert(f.idx, out[i]), i);
    assert_int_equal(count_query(f.idx, tu_rect(-450, -450, -450, -450)), 2);
    assert_int_equal(count_query(f.idx, tu_rect(0, 0, 1024, 1024)), 1);
    assert_int_equal(count_query(f.idx, tu_rect(-INFINITY, -INFINITY, INFINITY, INFINITY)), 5);
    assert_int_equal(count_query(f.idx, tu_rect(4000, 4000, 6000, 6000)), 2);
    assert_int_equal(count_pairs(f.idx), 4);
    /* A box from another wrap of the same cells is not a pair: cell
     * (2, 2) + 128 cells is (2080, 2080), the same wrapped cell as (32, 32). */
    qg_handle a = qg_insert(f.idx, tu_rect(33, 33, 34, 34));
    qg_handle b = qg_insert(f.idx, tu_rect(2081, 2081, 2082, 2082));
    assert_true(a >= 0 && b >= 0);
    assert_int_equal(count_pairs(f.idx), 4 + 2); /* both with the 1e30 box */
    assert_int_equal(count_query(f.idx, tu_rect(30, 30, 40, 40)), 2);
    /* Boxes across the wrap seam (x = y = 512 + 64 cells = 1536) overlap once. */
    assert_int_equal(qg_move(f.idx, a, tu_rect(1520, 1520, 1540, 1540)), QG_OK);
    assert_int_equal(qg_move(f.idx, b, tu_rect(1530, 1530, 1560, 1560)), QG_OK);
    assert_int_equal(count_pairs(f.idx), 4 + 2 + 1);
    assert_int_equal(count_query(f.idx, tu_rect(1535, 1537, 1535, 1537)), 3);
    close_grid(&f);
}

/* A big box takes a node in every cell it covers, and is reported once. */
static void test_big_box(void **state)
{
    (void)state;
    fx f;
    open_grid(&f, 16);
    const size_t before = qg_get_stats(f.idx).memory_bytes;
    /* 15x15 cells, under the wide list's 32x32. */
    qg_handle big = qg_insert(f.idx, tu_rect(0, 0, 239, 239));
    assert_true(big >= 0);
    /* That many nodes of 8 bytes and 15 rows of 64 cells, at least. */
    assert_true(qg_get_stats(f.idx).memory_bytes >= before + 15 * 15 * 8 + 15 * 64 * 4);
    for (int i = 0; i < 50; i++)
        qg_insert(f.idx, tu_rect((float)i * 20, (float)i * 20, (float)i * 20 + 3, (float)i * 20 + 3));
    assert_int_equal(count_pairs(f.idx), 12);
    assert_int_equal(count_query(f.idx, tu_rect(10, 10, 600, 600)), 1 + 30);
    assert_int_equal(qg_remove(f.idx, big), QG_OK);
    assert_int_equal(count_pairs(f.idx), 0);
    close_grid(&f);
}

/* A box covering every cell of the torus goes to the everywhere list: no
 * nodes, found once by queries and pairs; moves in and out of the list keep
 * the answers exact and fail cleanly. */
static void test_everywhere(void **state)
{
    (void)state;
    fx f;
    open_grid(&f, 16);
    for (int i = 0; i < 40; i++)
        assert_int_equal(qg_insert(f.idx, tu_rect((float)i * 25, 7, (float)i * 25 + 3, 10)), i);
    qg_cleanup(f.idx);
    const size_t before = qg_get_stats(f.idx).memory_bytes;
    qg_handle w = qg_insert(f.idx, tu_rect(-1e30f, -5, 1e30f, 3000)); /* every wrapped cell */
    assert_true(w >= 0);
    assert_true(qg_get_stats(f.idx).memory_bytes <= before + 64); /* the list's first block */
    qg_handle w2 = qg_insert(f.idx, tu_rect(-2000, -2000, 2000, 2000));
    assert_true(w2 >= 0);
    assert_int_equal(count_pairs(f.idx), 40 + 40 + 1);
    assert_int_equal(count_query(f.idx, tu_rect(1, 8, 1, 8)), 3);
    assert_int_equal(count_query(f.idx, tu_rect(-INFINITY, 100, INFINITY, 200)), 2);
    assert_int_equal(qg_validate(f.idx), QG_OK);
    /* Out of the list into cells, with every allocation failing first. */
    f.a.mode = TU_FAIL_EACH_CALL;
    f.a.failing = true;
    const size_t full = qg_get_stats(f.idx).memory_bytes;
    assert_int_equal(qg_move(f.idx, w, tu_rect(0, 500, 200, 600)), QG_ERR_NOMEM);
    assert_int_equal(qg_get_stats(f.idx).memory_bytes, full);
    f.a.failing = false;
    assert_int_equal(qg_validate(f.idx), QG_OK);
    assert_int_equal(count_pairs(f.idx), 40 + 40 + 1);
    assert_int_equal(qg_move(f.idx, w, tu_rect(0, 5, 1000, 600)), QG_OK);
    assert_int_equal(count_pairs(f.idx), 40 + 40 + 1);
    /* Into the list from cells, failing first (the list is full). */
    assert_int_equal(qg_remove(f.idx, w2), QG_OK);
    assert_int_equal(qg_move(f.idx, w, tu_rect(-1e30f, -1e30f, 1e30f, 1e30f)), QG_OK);
    w2 = qg_insert(f.idx, tu_rect(-2000, -2000, 2000, 2000));
    qg_handle w3 = qg_insert(f.idx, tu_rect(1, 1, 1, 1));
    f.a.failing = true;
    qg_status st = qg_move(f.idx, w3, tu_rect(-3000, -3000, 3000, 3000));
    f.a.failing = false;
    assert_true(st == QG_OK || st == QG_ERR_NOMEM);
    assert_int_equal(qg_validate(f.idx), QG_OK);
    assert_int_equal(qg_move(f.idx, w3, tu_rect(-3000, -3000, 3000, 3000)), QG_OK);
    assert_int_equal(count_pairs(f.idx), 3 * 40 + 3);
    assert_int_equal(qg_remove(f.idx, w), QG_OK);
    assert_int_equal(count_pairs(f.idx), 2 * 40 + 1);
    qg_clear(f.idx);
    assert_int_equal(count_pairs(f.idx), 0);
    assert_int_equal(count_query(f.idx, tu_rect(-INFINITY, -INFINITY, INFINITY, INFINITY)), 0);
    close_grid(&f);
}

/* Growth of many rows' arrays in one call, failing at each step, leaves the
 * index exactly as it was. */
static void test_multi_row_rollback(void **state)
{
    (void)state;
    for (long k = 1; k < 200; k++) {
        fx f;
        open_grid(&f, 16);
        for (int i = 0; i < 30; i++)
            assert_true(qg_insert(f.idx, tu_rect((float)i * 33, (float)i * 31, (float)i * 33 + 2,
                                                 (float)i * 31 + 2)) >= 0);
        const size_t bytes = qg_get_stats(f.idx).memory_bytes;
        f.a.fail_at = f.a.grow_requests + k;
        f.a.mode = TU_FAIL_ONCE;
        qg_handle h = qg_insert(f.idx, tu_rect(100, 0, 700, 1023));
        bool failed = h == QG_ERR_NOMEM;
        if (failed) {
            assert_int_equal(qg_get_stats(f.idx).memory_bytes, bytes);
            assert_int_equal(f.a.bytes, bytes);
            assert_int_equal(qg_validate(f.idx), QG_OK);
            assert_int_equal(count_pairs(f.idx), 0);
            /* And a move that must grow many rows, too. */
            f.a.fail_at = f.a.grow_requests + k;
            qg_status st = qg_move(f.idx, 3, tu_rect(0, 0, 1023, 1023));
            if (st == QG_ERR_NOMEM)
                assert_int_equal(qg_get_stats(f.idx).memory_bytes, bytes);
            else
                assert_int_equal(st, QG_OK);
            assert_int_equal(qg_validate(f.idx), QG_OK);
            f.a.fail_at = 0;
            assert_true(qg_insert(f.idx, tu_rect(100, 0, 700, 1023)) >= 0);
        }
        f.a.fail_at = 0;
        assert_true(count_pairs(f.idx) > 0);
        close_grid(&f);
        if (!failed)
            break;
    }
}

/* A query looks at every cell of its range (or one look per empty row),
 * unless its range holds more cells than there are elements: then it tests
 * every box once. */
static void test_cells_visited(void **state)
{
    (void)state;
    fx f;
    open_grid(&f, 16);
    for (int y = 0; y < 64; y++)
        qg_insert(f.idx, tu_rect(1, (float)y * 16 + 1, 2, (float)y * 16 + 2));
    /* Outside the query's range (cells 32 to 63 of x): enough boxes that
     * its 32 x 32 cells are fewer than the elements, 2.5 wide so that the
     * learned cell stays 16. */
    for (int i = 0; i < 1024; i++)
        qg_insert(f.idx, tu_rect(600.0f + (float)(i % 16) * 20, (float)(i / 16) * 16 + 1,
                                 602.5f + (float)(i % 16) * 20, (float)(i / 16) * 16 + 3.5f));
    assert_true(qg_get_stats(f.idx).cell_size == 16.0f);
    qg_query_stats st;
    tu_collect c;
    memset(&c, 0, sizeof c);
    assert_int_equal(qg_query_with_stats(f.idx, tu_rect(0, 0, 511.5f, 511.5f), tu_collect_query, &c, &st),
                     QG_OK);
    assert_int_equal(c.out.n, 32);
    assert_int_equal(st.nodes_visited, 32 * 32);
    assert_int_equal(st.elements_tested, 32);
    tu_vec_free(&c.out);
    /* The bounds: 64 x 64 cells, more than the 1,088 elements, each tested once. */
    memset(&c, 0, sizeof c);
    assert_int_equal(qg_query_with_stats(f.idx, tu_rect(0, 0, 1023, 1023), tu_collect_query, &c, &st), QG_OK);
    assert_int_equal(c.out.n, 64 + 1024);
    assert_int_equal(st.nodes_visited, 0);
    assert_int_equal(st.elements_tested, 64 + 1024);
    tu_vec_free(&c.out);
    close_grid(&f);
}

/* Clear keeps memory, through cleanup too; removals then give rows back. */
static void test_clear(void **state)
{
    (void)state;
    fx f;
    open_grid(&f, 16);
    for (int i = 0; i < 300; i++)
        qg_insert(f.idx, tu_rect((float)(i % 17) * 60, (float)(i / 17) * 55, (float)(i % 17) * 60 + 5,
                                 (float)(i / 17) * 55 + 5));
    const size_t full = qg_get_stats(f.idx).memory_bytes;
    qg_clear(f.idx);
    assert_int_equal(qg_get_stats(f.idx).memory_bytes, full);
    assert_int_equal(qg_validate(f.idx), QG_OK);
    assert_int_equal(count_query(f.idx, tu_rect(0, 0, 1024, 1024)), 0);
    qg_cleanup(f.idx);
    assert_int_equal(qg_get_stats(f.idx).memory_bytes, full);
    const long req = f.a.grow_requests;
    for (int i = 0; i < 300; i++)
        qg_insert(f.idx, tu_rect((float)(i % 17) * 60, (float)(i / 17) * 55, (float)(i % 17) * 60 + 5,
                                 (float)(i / 17) * 55 + 5));
    assert_int_equal(f.a.grow_requests, req);
    for (qg_handle h = 0; h < 300; h++)
        assert_int_equal(qg_remove(f.idx, h), QG_OK);
    qg_cleanup(f.idx);
    /* 300 boxes in at least 18 rows of cells: each row's 64 cells and nodes go back. */
    assert_true(qg_get_stats(f.idx).memory_bytes + 18 * 64 * 4 <= full);
    assert_int_equal(qg_validate(f.idx), QG_OK);
    close_grid(&f);
}

/* Defaults: cell_size from element_size, else bounds / 128. */
static void test_defaults(void **state)
{
    (void)state;
    qg_config c = qg_default_config(QG_GRID);
    qg_index *idx;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    assert_int_equal(qg_get_stats(idx).nodes, 128 * 128);
    qg_destroy(idx);
    c.element_size = 16.0f / 6.0f; /* cells of about 16: 64 fill the bounds, 128 are the least */
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    assert_int_equal(qg_get_stats(idx).nodes, 128 * 128);
    qg_destroy(idx);
    c.element_size = 2.0f / 6.0f; /* cells of 2: 512 per side */
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    assert_int_equal(qg_get_stats(idx).nodes, 512 * 512);
    qg_destroy(idx);
    c.element_size = 1e-4f; /* far too fine: the resolution is capped */
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    assert_true(qg_get_stats(idx).nodes <= (1 << 24));
    assert_true(qg_insert(idx, tu_rect(0, 0, 1024, 0)) >= 0);
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
    c.bounds = tu_rect(-1e38f, -1e38f, 1e38f, 1e38f); /* the widest finite world */
    c.element_size = 1e-3f;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    assert_true(qg_get_stats(idx).nodes <= (1 << 24));
    assert_true(qg_insert(idx, tu_rect(-3e38f, 0, 3e38f, 0)) >= 0);
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
}

/* Huge bounds keep cells of the element size (the world wraps), tiny worlds
 * keep working. */
static void test_huge_tiny_cells(void **state)
{
    (void)state;
    qg_config c = qg_default_config(QG_GRID);
    c.bounds = tu_rect(-3e38f, -3e38f, 3e38f, 3e38f);
    c.element_size = 5 * 0x1p100f;
    qg_index *idx;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    /* 100 boxes in a row, each in its own cells: no cell holds two. */
    for (int i = 0; i < 100; i++)
        assert_true(qg_insert(idx, tu_rect((float)i * 0x1p106f, 0, (float)i * 0x1p106f + 0x1p100f, 0x1p100f)) >= 0);
    qg_query_stats st;
    tu_collect col;
    memset(&col, 0, sizeof col);
    assert_int_equal(qg_pairs_with_stats(idx, tu_collect_pair, &col, &st), QG_OK);
    assert_int_equal(col.out.n, 0);
    assert_int_equal(st.elements_tested, 0);
    tu_vec_free(&col.out);
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
    c.bounds = tu_rect(0, 0, 1e-30f, 1e-30f);
    c.element_size = 0;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    assert_int_equal(qg_get_stats(idx).nodes, 128 * 128);
    assert_true(qg_insert(idx, tu_rect(0, 0, 1e-33f, 1e-33f)) >= 0);
    assert_true(qg_insert(idx, tu_rect(5e-31f, 5e-31f, 6e-31f, 6e-31f)) >= 0);
    assert_int_equal(count_pairs(idx), 0);
    assert_int_equal(count_query(idx, tu_rect(5.5e-31f, 5.5e-31f, 5.5e-31f, 5.5e-31f)), 1);
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
}

/* ---- several cores ------------------------------------------------------ */

static void test_parts(void **state)
{
    (void)state;
    fx f;
    open_grid(&f, 16);
    tu_parts_scenes(f.idx);
    close_grid(&f);
}

/* Own ray casts and nearest searches against plain loops: boxes
 * and rays on cell lines, boxes in other wraps of the torus and far
 * outside, the wide list, cells far smaller than the boxes (most boxes on
 * the wide list), cells not aligned with the boxes, k past the count. */
static void test_rays_nearest(void **state)
{
    (void)state;
    static const float cells[] = {16.0f, 7.0f, 0.05f, 300.0f};
    for (int i = 0; i < 4; i++) {
        fx f;
        open_grid(&f, cells[i]);
        kq_layers(f.idx, 1024.0f, 16.0f, tu_env_seed(1300 + (uint64_t)i));
        close_grid(&f);
    }
    fx f;
    open_grid(&f, 16);
    kq_small(f.idx);
    close_grid(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_cells),   cmocka_unit_test(test_row_memory_given_back),
        cmocka_unit_test(test_move_in_place), cmocka_unit_test(test_outside_bounds),
        cmocka_unit_test(test_big_box),       cmocka_unit_test(test_multi_row_rollback),
        cmocka_unit_test(test_cells_visited), cmocka_unit_test(test_clear),
        cmocka_unit_test(test_defaults),      cmocka_unit_test(test_everywhere),
        cmocka_unit_test(test_huge_tiny_cells), cmocka_unit_test(test_parts),
        cmocka_unit_test(test_rays_nearest),
        /* Bounds are a hint: outside, huge and tiny worlds, with
         * failing allocations, exact beside the brute-force kind. */
        TU_KIND_CASE("test_scenes", tu_case_failing_worlds, QG_GRID),
    };
    return tu_run_own_tests("grid", QG_GRID, tests);
}
