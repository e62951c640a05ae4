// SPDX-License-Identifier: MIT
/* QG_POINT_GRID's own invariants, through the public header: the size bound
 * and the levels past it, the defaults of max_element_size,
 * exact answers where the widened search meets float rounding (far from the
 * origin, boxes exactly the bound, touching at a corner), memory per element
 * after qg_cleanup gives the spare capacity back, stats and visit. */
#include "test_util.h"

/* test_validate_damage reaches into the layout. */
#include "../src/point_grid/point_grid.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static qg_index *make(tu_alloc *a, qg_rect bounds, float bound, float cell)
{
    qg_config c = qg_default_config(QG_POINT_GRID);
    c.bounds = bounds;
    c.max_element_size = bound;
    c.cell_size = cell;
    c.allocator = tu_allocator(a);
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    return idx;
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

static bool collect_pair(qg_handle a, qg_handle b, void *user)
{
    long *sum = user;
    sum[0]++;
    sum[1] += (long)a * 7919 + b; /* order-free fingerprint of the set */
    return true;
}

/* Sizes past the bound go to coarser levels (no QG_ERR_CAPACITY): a box
 * exactly the bound stays in level 0, a float more goes to level 1, a
 * world-sized one to a coarse level; moves between levels keep every answer
 * exact and the memory accounted; a failed level allocation changes
 * nothing. */
static void test_levels(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_POINT_GRID);
    tu_alloc a;
    tu_alloc_init(&a);
    qg_index *idx = make(&a, tu_rect(0, 0, 1000, 1000), 10, 0);
    qg_handle h = qg_insert(idx, tu_rect(100, 100, 110, 110));
    assert_true(h >= 0);
    assert_int_equal(qg_get_stats(idx).max_depth_reached, 0);
    qg_handle h1 = qg_insert(idx, tu_rect(100, 100, nextafterf(110, 200), 105));
    assert_true(h1 >= 0);
    assert_int_equal(qg_get_stats(idx).max_depth_reached, 1);
    qg_handle h2 = qg_insert(idx, tu_rect(-5000, 104, 5000, 104));
    assert_true(h2 >= 0);
    assert_true(qg_get_stats(idx).max_depth_reached >= 5);
    assert_int_equal(qg_validate(idx), QG_OK);
    assert_int_equal(query_count(idx, tu_rect(105, 104, 105, 104)), 3);
    assert_int_equal(pair_count(idx), 3);
    /* A level 0 element grows into level 2 and back. */
    assert_int_equal(qg_move(idx, h, tu_rect(0, 0, 50, 5)), QG_OK);
    assert_int_equal(qg_validate(idx), QG_OK);
    assert_int_equal(pair_count(idx), 1); /* h1-h2 */
    assert_int_equal(qg_move(idx, h, tu_rect(100, 100, 110, 110)), QG_OK);
    qg_cleanup(idx);
    assert_int_equal(qg_validate(idx), QG_OK);
    assert_int_equal(pair_count(idx), 3);
    assert_int_equal(qg_get_stats(idx).memory_bytes, a.bytes);
    /* A move into a level that has no memory yet fails cleanly. */
    a.mode = TU_FAIL_EACH_CALL;
    a.failing = true;
    qg_status st = qg_move(idx, h, tu_rect(0, 0, 500, 500));
    a.failing = false;
    if (st != QG_OK) {
        assert_int_equal(st, QG_ERR_NOMEM);
        qg_rect r;
        assert_int_equal(qg_get(idx, h, &r), QG_OK);
        assert_true(tu_rect_same(r, tu_rect(100, 100, 110, 110)));
        assert_int_equal(qg_validate(idx), QG_OK);
        assert_int_equal(pair_count(idx), 3);
        assert_int_equal(qg_move(idx, h, tu_rect(0, 0, 500, 500)), QG_OK);
    }
    tu_close(idx, &a);
}

/* Every level at once: sizes from a hundredth of the bound to thousands of
 * times it, moving and changing size, against a plain loop. */
static void test_levels_random(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_POINT_GRID);
    tu_alloc a;
    tu_alloc_init(&a);
    qg_index *idx = make(&a, tu_rect(0, 0, 1000, 1000), 2, 0);
    enum { N = 700 };
    qg_rect boxes[N];
    qg_handle hs[N];
    tu_rng r;
    tu_rng_seed(&r, 4242);
    for (int i = 0; i < N; i++) {
        float w = 0.02f * powf(4.0f, tu_rng_range(&r, 0, 7.5f));
        float x = tu_rng_range(&r, -200, 1200), y = tu_rng_range(&r, -200, 1200);
        boxes[i] = tu_rect(x, y, x + w, y + w * tu_rng_range(&r, 0.1f, 1));
        hs[i] = qg_insert(idx, boxes[i]);
        assert_true(hs[i] >= 0);
    }
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < N; i++) {
            if (!tu_rng_chance(&r, 0.5))
                continue;
            float w = 0.02f * powf(4.0f, tu_rng_range(&r, 0, 7.5f));
            float x = boxes[i].min_x + tu_rng_range(&r, -20, 20), y = boxes[i].min_y + tu_rng_range(&r, -20, 20);
            boxes[i] = tu_rect(x, y, x + w, y + w);
            assert_int_equal(qg_move(idx, hs[i], boxes[i]), QG_OK);
        }
        if (round % 2)
            qg_cleanup(idx);
        assert_int_equal(qg_validate(idx), QG_OK);
        long want[2] = {0, 0}, got[2] = {0, 0};
        for (int i = 0; i < N; i++)
            for (int j = i + 1; j < N; j++)
                if (tu_overlap(boxes[i], boxes[j])) {
                    qg_handle x = hs[i] < hs[j] ? hs[i] : hs[j], y = hs[i] < hs[j] ? hs[j] : hs[i];
                    want[0]++;
                    want[1] += (long)x * 7919 + y;
                }
        assert_int_equal(qg_pairs(idx, collect_pair, got), QG_OK);
        assert_int_equal(got[0], want[0]);
        assert_int_equal(got[1], want[1]);
        for (int q = 0; q < 50; q++) {
            qg_rect area = boxes[tu_rng_below(&r, N)];
            long n = 0;
            for (int i = 0; i < N; i++)
                n += tu_overlap(boxes[i], area);
            assert_int_equal(query_count(idx, area), n);
        }
    }
    tu_close(idx, &a);
}

/* A box of a coarse level that spans hundreds of the finest level's
 * columns (the wide search splits such rows), over elements at both ends
 * and in the middle of the span, fresh and after moves. */
static void test_wide_cross(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_POINT_GRID);
    tu_alloc a;
    tu_alloc_init(&a);
    qg_index *idx = make(&a, tu_rect(0, 0, 20000, 200), 2, 0);
    enum { N = 3000 };
    qg_rect boxes[N + 1];
    qg_handle hs[N + 1];
    tu_rng r;
    tu_rng_seed(&r, 777);
    for (int i = 0; i < N; i++) {
        float x = tu_rng_range(&r, 0, 19990), y = tu_rng_range(&r, 0, 190);
        boxes[i] = tu_rect(x, y, x + 1.5f, y + 1.5f);
        hs[i] = qg_insert(idx, boxes[i]);
        assert_true(hs[i] >= 0);
    }
    boxes[N] = tu_rect(-10, 50, 20010, 120);
    hs[N] = qg_insert(idx, boxes[N]);
    assert_true(hs[N] >= 0);
    for (int round = 0; round < 3; round++) {
        qg_cleanup(idx);
        long want = 0;
        for (int i = 0; i < N; i++)
            want += tu_overlap(boxes[i], boxes[N]);
        for (int i = 0; i < N; i++)
            for (int j = i + 1; j < N; j++)
                want += tu_overlap(boxes[i], boxes[j]);
        assert_true(want > 1000);
        assert_int_equal(pair_count(idx), want);
        for (int i = 0; i < N; i += 3) {
            boxes[i].min_y += 3, boxes[i].max_y += 3;
            assert_int_equal(qg_move(idx, hs[i], boxes[i]), QG_OK);
        }
    }
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

/* Bounds far larger than the elements' spread cost no memory up front, and
 * the world follows the elements: bounds [-3e38, 3e38] around 20,000 boxes
 * in [0, 1000]^2 end with cells near the asked size, and exact pairs. */
static void test_huge_bounds(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_POINT_GRID);
    tu_alloc a;
    tu_alloc_init(&a);
    qg_index *idx = make(&a, tu_rect(-3e38f, -3e38f, 3e38f, 3e38f), 4, 0);
    assert_true(qg_get_stats(idx).memory_bytes < 512 * 1024);
    enum { N = 20000 };
    static qg_rect boxes[N];
    tu_rng r;
    tu_rng_seed(&r, 31337);
    for (int i = 0; i < N; i++) {
        float x = tu_rng_range(&r, 0, 996), y = tu_rng_range(&r, 0, 996);
        boxes[i] = tu_rect(x, y, x + 3, y + 3);
        assert_int_equal(qg_insert(idx, boxes[i]), i);
    }
    qg_cleanup(idx);
    qg_cleanup(idx);
    /* The elements' world at cells of 24 (six bounds): about 42 x 42 cells
     * (the fit adds an eighth a side), not one cell of 1e35. */
    const qg_stats st = qg_get_stats(idx);
    assert_true(st.nodes >= 30 * 30 && st.nodes <= 80 * 80);
    assert_true(st.memory_bytes < (size_t)N * 40);
    long want = 0;
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            want += tu_overlap(boxes[i], boxes[j]);
    assert_int_equal(pair_count(idx), want);
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

/* Found by the fuzzer: a world 1e-30 wide (cells about 2e-32) whose
 * elements sit near 1e38, where double cannot tell the fitted world's ends
 * apart; the re-fit's crowding estimate divided by a zero extent (NaN cells,
 * undefined behaviour). Coincident and near boxes out there, exact answers,
 * qg_validate after each cleanup (run under UBSan in CI). */
static void test_refit_far_from_tiny_world(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_POINT_GRID);
    tu_alloc a;
    tu_alloc_init(&a);
    qg_index *idx = make(&a, tu_rect(0, 0, 1e-30f, 1e-30f), 0, 0);
    enum { N = 300 };
    qg_rect boxes[N];
    for (int i = 0; i < N; i++) {
        /* Coincident first (the fitted world has no width in double), then
         * a second spot a float step away. */
        const float x = i < N / 2 ? 1e38f : nextafterf(1e38f, 0.0f), y = 1e38f;
        boxes[i] = tu_rect(x, y, x, y);
        assert_int_equal(qg_insert(idx, boxes[i]), i);
        if (i % 50 == 49) {
            qg_cleanup(idx);
            assert_int_equal(qg_validate(idx), QG_OK);
        }
    }
    qg_cleanup(idx);
    assert_int_equal(qg_validate(idx), QG_OK);
    long want = 0;
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            want += tu_overlap(boxes[i], boxes[j]);
    assert_int_equal(pair_count(idx), want);
    const qg_rect area = tu_rect(1e38f, 1e38f, 1e38f, 1e38f);
    long hits = 0;
    for (int i = 0; i < N; i++)
        hits += tu_overlap(boxes[i], area);
    assert_true(hits > 0);
    assert_int_equal(query_count(idx, area), hits);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

static void test_default_bound(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_POINT_GRID);
    /* From element_size: twice the typical width; past it, level 1. */
    qg_config c = qg_default_config(QG_POINT_GRID);
    c.element_size = 4;
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    assert_true(qg_insert(idx, tu_rect(0, 0, 8, 8)) >= 0);
    assert_int_equal(qg_get_stats(idx).max_depth_reached, 0);
    assert_true(qg_insert(idx, tu_rect(0, 0, 9, 1)) >= 0);
    assert_int_equal(qg_get_stats(idx).max_depth_reached, 1);
    qg_destroy(idx);
    /* Neither: a 256th of the bounds; everything fits somewhere and answers
     * stay exact. */
    c = qg_default_config(QG_POINT_GRID);
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    assert_true(qg_insert(idx, tu_rect(-1e30f, -1e30f, 1e30f, 1e30f)) >= 0);
    assert_true(qg_insert(idx, tu_rect(5, 5, 6, 6)) >= 0);
    assert_int_equal(query_count(idx, tu_rect(5.5f, 5.5f, 5.5f, 5.5f)), 2);
    assert_int_equal(pair_count(idx), 1);
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
}

/* Boxes exactly the bound wide, touching a query or each other at one
 * coordinate, in a world far from the origin where the rounding of the
 * widened search is coarse. Every answer is compared with a plain loop. */
static void test_exact_at_rounding(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_POINT_GRID);
    const float ox = 3.0e6f, oy = -7.5e5f, bound = 0.75f;
    tu_alloc a;
    tu_alloc_init(&a);
    qg_index *idx = make(&a, tu_rect(ox, oy, ox + 200, oy + 200), bound, 0);
    enum { N = 600 };
    qg_rect boxes[N];
    qg_handle hs[N];
    tu_rng r;
    tu_rng_seed(&r, 99);
    for (int i = 0; i < N; i++) {
        /* Snap to a coarse lattice so many boxes touch exactly. */
        float x = ox + (float)tu_rng_below(&r, 800) * 0.25f - 50;
        float y = oy + (float)tu_rng_below(&r, 800) * 0.25f - 50;
        float w = tu_rng_chance(&r, 0.5) ? bound : 0.25f * (float)tu_rng_below(&r, 4);
        boxes[i] = tu_rect(x, y, x + w, y + w);
        if (boxes[i].max_x - boxes[i].min_x > bound || boxes[i].max_y - boxes[i].min_y > bound)
            boxes[i] = tu_rect(x, y, x, y);
        hs[i] = qg_insert(idx, boxes[i]);
        assert_true(hs[i] >= 0);
    }
    assert_int_equal(qg_validate(idx), QG_OK);
    for (int q = 0; q < 300; q++) {
        qg_rect area = boxes[tu_rng_below(&r, N)];
        if (q % 3 == 1)
            area = tu_rect(area.max_x, area.max_y, area.max_x, area.max_y);
        long want = 0;
        for (int i = 0; i < N; i++)
            want += tu_overlap(boxes[i], area);
        assert_int_equal(query_count(idx, area), want);
    }
    long want = 0;
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            want += tu_overlap(boxes[i], boxes[j]);
    assert_int_equal(pair_count(idx), want);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

/* After the population is steady, qg_cleanup gives the spare capacity of
 * the arrays back: 16 bytes of box, 4 of handle and size and 2 of point in the
 * cell-sorted snapshot and 1 of home-cell bits per element, plus 4 per
 * cell, plus the tail room the snapshot keeps (a 64th of the population, 6
 * bytes a slot) so that moves past the margins never re-sort; at the agents
 * workload's density that is under 24 in all. */
static void test_memory_per_element(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_POINT_GRID);
    tu_alloc a;
    tu_alloc_init(&a);
    const int n = 100000;
    const float world = sqrtf((float)n) * 16;
    qg_index *idx = make(&a, tu_rect(0, 0, world, world), 8, 0);
    tu_rng r;
    tu_rng_seed(&r, 5);
    for (int i = 0; i < n; i++) {
        float x = tu_rng_range(&r, 0, world - 8), y = tu_rng_range(&r, 0, world - 8);
        assert_true(qg_insert(idx, tu_rect(x, y, x + 5, y + 5)) >= 0);
    }
    long before_allocs = a.grow_requests;
    qg_cleanup(idx);
    qg_cleanup(idx);
    assert_int_equal(a.grow_requests, before_allocs); /* cleanup never allocates */
    qg_stats s = qg_get_stats(idx);
    assert_int_equal(s.memory_bytes, a.bytes);
    assert_int_equal(s.nodes, s.leaves);
    assert_int_equal(s.max_depth_reached, 0);
    const double per = (double)s.memory_bytes / n;
    const double cells = (double)s.nodes * 4 / n;
    print_message("point_grid: %d elements, %d cells, %.2f bytes per element (%.2f of them cells)\n", n,
                  s.nodes, per, cells);
    /* The index's own struct (the levels' fixed fields) is a few KiB. */
    assert_true(per <= 23.0 + cells + 6.0 / 64 + 0.05 + 8192.0 / n);
    assert_true(per <= 24.0);
    assert_int_equal(qg_validate(idx), QG_OK);
    /* Growing again after the shrink works. */
    assert_true(qg_insert(idx, tu_rect(1, 1, 2, 2)) >= 0);
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

typedef struct visit_sum {
    long cells, elements;
} visit_sum;

static void sum_visit(qg_rect cell, int depth, int32_t elements, void *user)
{
    visit_sum *v = user;
    assert_int_equal(depth, 0);
    assert_true(cell.min_x <= cell.max_x && cell.min_y <= cell.max_y);
    v->cells++;
    v->elements += elements;
}

static void test_visit_and_moves(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_POINT_GRID);
    tu_alloc a;
    tu_alloc_init(&a);
    qg_index *idx = make(&a, tu_rect(-500, -500, 500, 500), 16, 40);
    qg_handle hs[200];
    qg_rect boxes[200];
    tu_rng r;
    tu_rng_seed(&r, 11);
    for (int i = 0; i < 200; i++) {
        float x = tu_rng_range(&r, -600, 600), y = tu_rng_range(&r, -600, 600);
        boxes[i] = tu_rect(x, y, x + tu_rng_range(&r, 0, 16), y + tu_rng_range(&r, 0, 16));
        hs[i] = qg_insert(idx, boxes[i]);
    }
    for (int step = 0; step < 2000; step++) {
        int i = (int)tu_rng_below(&r, 200);
        float dx = tu_rng_range(&r, -30, 30), dy = tu_rng_range(&r, -30, 30);
        qg_rect b = tu_rect(boxes[i].min_x + dx, boxes[i].min_y + dy, boxes[i].max_x + dx, boxes[i].max_y + dy);
        assert_int_equal(qg_move(idx, hs[i], b), QG_OK);
        boxes[i] = b;
        if (step % 97 == 0) {
            assert_int_equal(qg_validate(idx), QG_OK);
            long want = 0;
            for (int p = 0; p < 200; p++)
                for (int q = p + 1; q < 200; q++)
                    want += tu_overlap(boxes[p], boxes[q]);
            assert_int_equal(pair_count(idx), want);
        }
    }
    visit_sum v = {0, 0};
    qg_visit(idx, sum_visit, &v);
    assert_int_equal(v.cells, qg_get_stats(idx).nodes);
    assert_int_equal(v.elements, 200);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

/* Sorted pair list (a << 32 | b) of an index, and of plain loops over the
 * live boxes, for comparing the two. */
static bool push_pair(qg_handle a, qg_handle b, void *user)
{
    tu_vec_push(user, (int64_t)a << 32 | b);
    return true;
}

static void want_pairs(const qg_rect *boxes, const bool *live, int n, tu_vec *out)
{
    for (int p = 0; p < n; p++)
        for (int q = p + 1; q < n; q++)
            if (live[p] && live[q] && tu_overlap(boxes[p], boxes[q]))
                tu_vec_push(out, (int64_t)p << 32 | q);
}

/* The snapshot's states against plain loops: inserts past the tail limit
 * (rebuilds inside qg_insert), small moves that stay in their margins,
 * teleports that leave them (the tail, tombstones), removals from the
 * snapshot and the tail, a dense spot whose cells outgrow the pair kernel's
 * chunks, pairs and queries both before qg_cleanup (points read from the
 * boxes) and after it (points from the snapshot). With many teleports and
 * removals each qg_cleanup re-sorts; with few it refreshes the points in
 * place and the tail stays, growing over the rounds until a re-sort.
 * Handles equal indices: nothing is removed before the last insert. Seed
 * printed on failure. */
static void snapshot_run(uint64_t seed, double teleports, double removals)
{
    tu_alloc a;
    tu_alloc_init(&a);
    enum { N = 1500 };
    qg_index *idx = make(&a, tu_rect(0, 0, 600, 600), 8, 0);
    static qg_rect boxes[N];
    static bool live[N];
    tu_rng r;
    tu_rng_seed(&r, seed);
    tu_vec got = {0}, want = {0};
    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < N; i++) {
            if (round == 0) {
                /* A fifth of them in one 10x10 spot. */
                const float span = i % 5 == 0 ? 10.0f : 640.0f;
                const float x = tu_rng_range(&r, -20, span), y = tu_rng_range(&r, -20, span);
                boxes[i] = tu_rect(x, y, x + tu_rng_range(&r, 0, 8), y + tu_rng_range(&r, 0, 8));
                live[i] = true;
                assert_int_equal(qg_insert(idx, boxes[i]), i);
                continue;
            }
            if (!live[i])
                continue;
            if (tu_rng_chance(&r, removals)) {
                assert_int_equal(qg_remove(idx, i), QG_OK);
                live[i] = false;
                continue;
            }
            const bool teleport = tu_rng_chance(&r, teleports);
            const float dx = teleport ? tu_rng_range(&r, -300, 300) : tu_rng_range(&r, -2, 2);
            const float dy = teleport ? tu_rng_range(&r, -300, 300) : tu_rng_range(&r, -2, 2);
            const qg_rect b = tu_rect(boxes[i].min_x + dx, boxes[i].min_y + dy, boxes[i].max_x + dx,
                                      boxes[i].max_y + dy);
            assert_int_equal(qg_move(idx, i, b), QG_OK);
            boxes[i] = b;
        }
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1)
                qg_cleanup(idx);
            if (qg_validate(idx) != QG_OK)
                fail_msg("seed %llu round %d pass %d: qg_validate", (unsigned long long)seed, round, pass);
            tu_vec_clear(&got);
            tu_vec_clear(&want);
            assert_int_equal(qg_pairs(idx, push_pair, &got), QG_OK);
            want_pairs(boxes, live, N, &want);
            tu_vec_sort(&got);
            if (got.n != want.n || tu_vec_first_diff(&got, &want) >= 0)
                fail_msg("seed %llu round %d pass %d: %ld pairs, want %ld", (unsigned long long)seed, round, pass,
                         (long)got.n, (long)want.n);
            const float x = tu_rng_range(&r, -30, 600), y = tu_rng_range(&r, -30, 600);
            const qg_rect area = tu_rect(x, y, x + tu_rng_range(&r, 0, 60), y + tu_rng_range(&r, 0, 60));
            long n = 0;
            for (int i = 0; i < N; i++)
                n += live[i] && tu_overlap(boxes[i], area);
            if (query_count(idx, area) != n)
                fail_msg("seed %llu round %d pass %d: query", (unsigned long long)seed, round, pass);
        }
    }
    tu_vec_free(&got);
    tu_vec_free(&want);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

static void test_snapshot_states(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_POINT_GRID);
    snapshot_run(23, 0.03, 0.01); /* every cleanup re-sorts */
    snapshot_run(29, 0.002, 0.0); /* most cleanups refresh in place */
    snapshot_run(31, 0.0, 0.0);   /* moves within the margins only */
}

/* ---- several cores -------------------------------------------------- */

/* A job system without threads (test_threads runs real ones): the ranges
 * of a call run one after another, last first, each as a different worker.
 * What is checked here is how the point grid splits its work. */
static void reversed_run(qg_task_fn *task, int32_t count, void *context, void *user)
{
    const int32_t workers = *(const int32_t *)user;
    for (int32_t w = workers - 1; w >= 0; w--) {
        const int32_t b = (int32_t)((int64_t)count * w / workers), e = (int32_t)((int64_t)count * (w + 1) / workers);
        if (b < e)
            task(b, e, w, context);
    }
}

typedef struct part_sum {
    long n, print;
    int bad_order;
} part_sum;

static bool part_pair(qg_handle a, qg_handle b, void *user)
{
    part_sum *p = user;
    p->n++;
    p->print += (long)a * 7919 + b;
    p->bad_order += a >= b;
    return true;
}

/* qg_pairs_parallel with 1, 2, 3 and 8 parts finds qg_pairs' set, each pair
 * in one part (counts and fingerprints add up), the same parts twice, and
 * the same candidates and cells in all (the stats add up to qg_pairs'). */
static void check_parts(const qg_index *idx, const char *what)
{
    long want[2] = {0, 0};
    qg_query_stats serial;
    assert_int_equal(qg_pairs_with_stats(idx, collect_pair, want, &serial), QG_OK);
    static const int32_t counts[] = {1, 2, 3, 8};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        int32_t workers = counts[c];
        const qg_jobs jobs = {workers, reversed_run, &workers};
        part_sum sums[2][8];
        for (int round = 0; round < 2; round++) {
            void *users[8];
            for (int32_t p = 0; p < workers; p++) {
                sums[round][p] = (part_sum){0, 0, 0};
                users[p] = &sums[round][p];
            }
            qg_query_stats st;
            assert_int_equal(qg_pairs_parallel(idx, &jobs, part_pair, users, &st), QG_OK);
            long n = 0, print = 0;
            for (int32_t p = 0; p < workers; p++) {
                n += sums[round][p].n;
                print += sums[round][p].print;
                assert_int_equal(sums[round][p].bad_order, 0);
                if (round == 1 && (sums[1][p].n != sums[0][p].n || sums[1][p].print != sums[0][p].print))
                    fail_msg("%s, %d parts: part %d differs between two calls", what, workers, p);
            }
            if (n != want[0] || print != want[1])
                fail_msg("%s, %d parts: %ld pairs, want %ld", what, workers, n, want[0]);
            if (st.nodes_visited != serial.nodes_visited || st.elements_tested != serial.elements_tested)
                fail_msg("%s, %d parts: stats %lld/%lld, want %lld/%lld", what, workers, (long long)st.nodes_visited,
                         (long long)st.elements_tested, (long long)serial.nodes_visited,
                         (long long)serial.elements_tested);
        }
    }
}

/* The split's edge cases: a row holding nearly every element (bands of
 * other parts empty), a world of one row, more parts than rows, three
 * populated levels whose coarse searches run in the finest level's walk,
 * tails and stale snapshots, and every state after qg_move_many and
 * qg_cleanup_parallel, which must match qg_move and qg_cleanup. */
static void test_parallel_split(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_POINT_GRID);
    tu_rng r;
    tu_rng_seed(&r, tu_env_seed(41));
    for (int scene = 0; scene < 4; scene++) {
        tu_alloc a, b;
        tu_alloc_init(&a);
        tu_alloc_init(&b);
        /* scene 1: a world one row high; the others 800 x 800 */
        const qg_rect bounds = scene == 1 ? tu_rect(0, 0, 800, 40) : tu_rect(0, 0, 800, 800);
        qg_index *idx = make(&a, bounds, 4, 0), *twin = make(&b, bounds, 4, 0);
        enum { N = 3000 };
        qg_handle h[N], h2[N];
        qg_rect boxes[N];
        for (int i = 0; i < N; i++) {
            float x = tu_rng_range(&r, 0, 790), y = tu_rng_range(&r, 0, scene == 1 ? 36 : 790);
            if (scene == 0 && i % 10 != 0)
                y = 400 + tu_rng_range(&r, 0, 2); /* one crowded row */
            /* scene 2 and 3: sizes of levels 0, 1 and 2 */
            const float w = scene >= 2 && i % 7 == 0 ? tu_rng_range(&r, 4, 60) : tu_rng_range(&r, 0, 4);
            boxes[i] = tu_rect(x, y, x + w, y + w);
            h[i] = qg_insert(idx, boxes[i]);
            h2[i] = qg_insert(twin, boxes[i]);
            assert_int_equal(h[i], h2[i]);
        }
        check_parts(idx, "inserted (all in the tail)");
        qg_cleanup(idx);
        qg_cleanup(twin);
        check_parts(idx, "sorted");
        for (int frame = 0; frame < 6; frame++) {
            /* Mostly small steps (stores), some long ones and, in scenes 2
             * and 3, size changes across levels. */
            for (int i = 0; i < N; i++) {
                const float step = tu_rng_chance(&r, 0.05) ? 60.0f : 1.0f;
                const float x = fminf(fmaxf(boxes[i].min_x + tu_rng_range(&r, -step, step), -20), 820);
                const float y = fminf(fmaxf(boxes[i].min_y + tu_rng_range(&r, -step, step), -20), 820);
                float w = boxes[i].max_x - boxes[i].min_x;
                if (scene >= 2 && tu_rng_chance(&r, 0.02))
                    w = tu_rng_chance(&r, 0.5) ? tu_rng_range(&r, 0, 4) : tu_rng_range(&r, 4, 200);
                boxes[i] = tu_rect(x, y, x + w, y + w);
                assert_int_equal(qg_move(twin, h2[i], boxes[i]), QG_OK);
            }
            int32_t workers = 1 + frame % 4 * 2 + (frame == 5); /* 1, 3, 5, 7, 1, 4 */
            const qg_jobs jobs = {workers, reversed_run, &workers};
            assert_int_equal(qg_move_many(idx, &jobs, h, boxes, N), QG_OK);
            assert_int_equal(qg_validate(idx), QG_OK);
            check_parts(idx, "moved (stale points, tails)");
            if (pair_count(idx) != pair_count(twin))
                fail_msg("scene %d frame %d: qg_move_many and qg_move disagree", scene, frame);
            if (scene == 3 && frame % 2 == 1)
                qg_cleanup(idx); /* some frames the serial form */
            else
                qg_cleanup_parallel(idx, &jobs);
            qg_cleanup(twin);
            assert_int_equal(qg_validate(idx), QG_OK);
            check_parts(idx, "cleaned up");
            long x[2] = {0, 0}, y[2] = {0, 0};
            assert_int_equal(qg_pairs(idx, collect_pair, x), QG_OK);
            assert_int_equal(qg_pairs(twin, collect_pair, y), QG_OK);
            if (x[0] != y[0] || x[1] != y[1])
                fail_msg("scene %d frame %d: qg_cleanup_parallel and qg_cleanup disagree", scene, frame);
        }
        qg_destroy(idx);
        qg_destroy(twin);
        assert_int_equal(a.bytes, 0);
        assert_int_equal(b.bytes, 0);
    }
}

/* qg_validate catches a handle listed twice (and so another missing) in one
 * crowded cell and in a tail row, with no cost quadratic in a cell's
 * population: 3,000 boxes in one cell validate in one pass. Each damage is
 * undone and the index validates again. */
static void test_validate_damage(void **state)
{
    (void)state;
    qg_config cfg = qg_default_config(QG_POINT_GRID);
    cfg.bounds = tu_rect(0, 0, 1024, 1024);
    cfg.element_size = 4;
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&cfg, &idx), QG_OK);
    for (int i = 0; i < 3000; i++)
        assert_true(qg_insert(idx, tu_rect(100.0f + (float)(i % 7) * 0.01f, 100, 101, 101)) >= 0);
    qg_cleanup(idx);
    assert_int_equal(qg_validate(idx), QG_OK);
    point_grid *g = (point_grid *)idx;
    pg_level *L = &g->level[0];
    assert_true(L->listed >= 2900 && L->listed + L->tail == 3000);
    /* The snapshot: slot 1's entry overwritten with slot 0's handle. */
    int32_t a = -1, b = -1;
    for (int32_t s = 0; s < L->listed && b < 0; ++s) {
        if ((L->order[s] & PG_MAX_HANDLES) == PG_MAX_HANDLES)
            continue;
        if (a < 0)
            a = s;
        else if (L->sq[s] == L->sq[a] && (L->order[s] >> 24) == (L->order[a] >> 24))
            b = s;
    }
    assert_true(a >= 0 && b >= 0);
    const uint32_t keep = L->order[b];
    L->order[b] = (L->order[b] & ~(uint32_t)PG_MAX_HANDLES) | (L->order[a] & PG_MAX_HANDLES);
    assert_int_equal(qg_validate(idx), QG_ERR_INVALID);
    L->order[b] = keep;
    assert_int_equal(qg_validate(idx), QG_OK);
    /* The tail: new boxes in one row, one entry made a copy of another. */
    for (int i = 0; i < 50; i++)
        assert_true(qg_insert(idx, tu_rect(500.0f + (float)i, 500, 501.0f + (float)i, 501)) >= 0);
    assert_int_equal(qg_validate(idx), QG_OK);
    if (L->tail >= 2) {
        const int32_t t0 = L->listed, t1 = L->listed + 1;
        const uint32_t keep_t = L->order[t1];
        L->order[t1] = (L->order[t1] & ~(uint32_t)PG_MAX_HANDLES) | (L->order[t0] & PG_MAX_HANDLES);
        assert_int_equal(qg_validate(idx), QG_ERR_INVALID);
        L->order[t1] = keep_t;
        assert_int_equal(qg_validate(idx), QG_OK);
    }
    qg_destroy(idx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels),                    cmocka_unit_test(test_levels_random),
        cmocka_unit_test(test_wide_cross),                cmocka_unit_test(test_huge_bounds),
        cmocka_unit_test(test_refit_far_from_tiny_world), cmocka_unit_test(test_default_bound),
        cmocka_unit_test(test_exact_at_rounding),         cmocka_unit_test(test_memory_per_element),
        cmocka_unit_test(test_visit_and_moves),           cmocka_unit_test(test_snapshot_states),
        cmocka_unit_test(test_parallel_split),            cmocka_unit_test(test_validate_damage),
    };
    return tu_run_own_tests("point_grid_invariants", QG_POINT_GRID, tests);
}
