// SPDX-License-Identifier: MIT
/* QG_LOOSE_GRID's own invariants, through the public header: loose boxes
 * grow on insert and move and shrink only in qg_cleanup (which never
 * allocates), visit reports tight cells and loose boxes that hold their
 * elements, answers stay exact before and after cleanup (the pair loop has
 * two paths) and after moves the margin does not cover, memory stays
 * constant over frames and bounded per element, and the stats. */
#include "test_util.h"
#include "kind_queries.h"

/* test_validate_damage reaches into the layout. */
#include "../src/loose_grid/loose_grid.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

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
    tu_skip_unless_built(QG_LOOSE_GRID);
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
    tu_skip_unless_built(QG_LOOSE_GRID);
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
    tu_skip_unless_built(QG_LOOSE_GRID);
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
    print_message("loose_grid: %.1f bytes per element after far moves (%d loose cells)\n", (double)s.memory_bytes / N, s.leaves);
    /* (the jumps spread the elements well past the bounds: the world
     * re-fits to them, about 1,900 cells of 50 instead of 18 x 18) */
    assert_true(s.memory_bytes <= (size_t)N * 80);
    qg_destroy(idx);
    assert_int_equal(a.bytes, 0);
}

/* Elements outside the bounds go to the border cells and are still found. */
static void test_outside(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_LOOSE_GRID);
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

/* ---- bounds are a hint: the world re-fits to the elements ------------- */

static const tu_scene SCENES[] = {
    {"outside", {0, 0, 1024, 1024}, 1.0f, 5.0f, true},
    {"huge", {-3e38f, -3e38f, 3e38f, 3e38f}, 0x1p100f, 5.0f * 0x1p100f, false},
    {"max_bounds", {-FLT_MAX, -FLT_MAX, FLT_MAX, FLT_MAX}, 0x1p100f, 0, false},
    {"tiny", {0, 0, 5000.0f * 0x1p-100f, 5000.0f * 0x1p-100f}, 0x1p-100f, 5.0f * 0x1p-100f, false},
    {"tiny_default_size", {0, 0, 1e-30f, 1e-30f}, 0x1p-113f, 0, false},
};

static qg_rect shifted(qg_rect b, float dx, float dy)
{
    return (qg_rect){b.min_x + dx, b.min_y + dy, b.max_x + dx, b.max_y + dy};
}

/* Outside-heavy, huge-bounds and tiny-world sequences beside brute_force:
 * build, frames of small moves with teleports and churn, and a walk-off of
 * the whole population far outside the world (cleanup sees the crowding, the
 * next move re-fits); qg_validate after every step of a frame, and the
 * memory per element bounded once fitted. */
static void test_scenes(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_LOOSE_GRID);
    for (size_t si = 0; si < sizeof SCENES / sizeof *SCENES; si++) {
        const tu_scene *s = &SCENES[si];
        enum { N = 3000 };
        tu_alloc a;
        tu_rng r;
        qg_index *k, *b;
        tu_scene_fill(QG_LOOSE_GRID, s, &a, 1100 + si, N, &r, &k, &b);
        tu_scene_compare(k, b, &r, s, 0, 0, 100); /* fitted by the inserts, before any cleanup */
        qg_cleanup(k);
        qg_cleanup(b);
        tu_scene_compare(k, b, &r, s, 0, 0, 100);
        float dx = 0, dy = 0; /* where the population walked off to */
        for (int frame = 0; frame < 14; frame++) {
            for (int i = 0; i < N; i++) {
                qg_rect box;
                if (qg_get(k, i, &box) != QG_OK)
                    continue;
                if (tu_rng_chance(&r, 0.02)) {
                    box = shifted(tu_scene_box(&r, s), dx, dy); /* teleport */
                } else {
                    box = shifted(box, tu_rng_range(&r, -2, 2) * s->scale, tu_rng_range(&r, -2, 2) * s->scale);
                }
                assert_int_equal(qg_move(k, i, box), QG_OK);
                assert_int_equal(qg_move(b, i, box), QG_OK);
            }
            assert_int_equal(qg_validate(k), QG_OK);
            /* Churn: some leave, as many come back (in slots freed). */
            for (int j = 0; j < 100; j++) {
                const qg_handle h = (qg_handle)tu_rng_below(&r, N);
                if (qg_remove(k, h) == QG_OK)
                    assert_int_equal(qg_remove(b, h), QG_OK);
            }
            assert_int_equal(qg_validate(k), QG_OK);
            while (qg_count(k) < N) {
                const qg_rect box = shifted(tu_scene_box(&r, s), dx, dy);
                const qg_handle h = qg_insert(k, box);
                assert_true(h >= 0);
                assert_int_equal(qg_insert(b, box), h);
            }
            assert_int_equal(qg_validate(k), QG_OK);
            if (frame == 5) {
                /* The population walks off, far outside the world it fitted. */
                const float d = (s->outside ? 30000.0f : 20000.0f) * s->scale;
                dx += d;
                dy -= d;
                for (int i = 0; i < N; i++) {
                    qg_rect box;
                    assert_int_equal(qg_get(k, i, &box), QG_OK);
                    box = shifted(box, d, -d);
                    assert_int_equal(qg_move(k, i, box), QG_OK);
                    assert_int_equal(qg_move(b, i, box), QG_OK);
                }
                /* Exact before the re-fit too (piled on the border cells). */
                tu_vec pk, pb;
                tu_scene_pairs(k, &pk, NULL);
                tu_scene_pairs(b, &pb, NULL);
                assert_int_equal(tu_vec_first_diff(&pk, &pb), -1);
                tu_vec_free(&pk);
                tu_vec_free(&pb);
                assert_int_equal(qg_validate(k), QG_OK);
            }
            const long grows = a.grow_requests;
            qg_cleanup(k);
            qg_cleanup(b);
            assert_int_equal(a.grow_requests, grows); /* cleanup never allocates */
            tu_scene_compare(k, b, &r, s, dx, dy, 100);
        }
        qg_stats st = qg_get_stats(k);
        print_message("loose_grid %s: %d loose cells, %.1f bytes per element\n", s->name, st.leaves,
                      (double)st.memory_bytes / N);
        assert_true(st.leaves <= 4 * N);
        assert_true(st.memory_bytes <= (size_t)N * 256);
        assert_int_equal(st.memory_bytes, a.bytes);
        qg_destroy(k);
        qg_destroy(b);
        assert_int_equal(a.bytes, 0);
        assert_int_equal(a.errors, 0);
    }
}

/* Calls that may re-fit the world (inserts as the population doubles, the
 * moves after a cleanup that saw crowding) under fault injection: every
 * insert and move is first made with every allocation failing; it either
 * succeeds or answers QG_ERR_NOMEM with the index answering exactly as
 * before, valid and holding the same bytes. Then it is made for real. */
static void test_refit_oom(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_LOOSE_GRID);
    for (size_t si = 0; si < 2; si++) {
        const tu_scene *s = &SCENES[si]; /* outside, huge */
        tu_alloc a;
        tu_alloc_init(&a);
        a.mode = TU_FAIL_EACH_CALL;
        qg_config c = qg_default_config(QG_LOOSE_GRID);
        c.bounds = s->bounds;
        c.element_size = s->element_size;
        c.allocator = tu_allocator(&a);
        qg_index *ix = NULL;
        assert_int_equal(qg_create(&c, &ix), QG_OK);
        tu_rng r;
        tu_rng_seed(&r, 77 + si);
        enum { N = 600 };
        int32_t live = 0;
        long refused = 0, refit_refused = 0;
        float d = 0;
        for (int step = 0; step < 3 * N; step++) {
            const bool insert = step < N;
            if (step == 2 * N) {
                /* Walk off, then a cleanup sees the crowding: the next move
                 * re-fits, so it needs memory. */
                d = 40000.0f * s->scale;
                for (qg_handle i = 0; i < N; i++) {
                    qg_rect b;
                    assert_int_equal(qg_get(ix, i, &b), QG_OK);
                    assert_int_equal(qg_move(ix, i, shifted(b, d, -d)), QG_OK);
                }
                qg_cleanup(ix);
            }
            const qg_handle h = insert ? step : (qg_handle)(step % N);
            const qg_rect box = shifted(tu_scene_box(&r, s), d, -d);
            tu_snapshot before, after;
            memset(&before, 0, sizeof before);
            memset(&after, 0, sizeof after);
            tu_snapshot_take(ix, live, &before);
            const size_t bytes = a.bytes;
            a.failing = true;
            qg_status st;
            if (insert) {
                const qg_handle got = qg_insert(ix, box);
                st = got < 0 ? (qg_status)got : QG_OK;
                if (got >= 0) {
                    assert_int_equal(got, h);
                    live = h + 1;
                }
            } else {
                st = qg_move(ix, h, box);
            }
            a.failing = false;
            if (st != QG_OK) {
                assert_int_equal(st, QG_ERR_NOMEM);
                refused++;
                refit_refused += step == 2 * N;
                tu_snapshot_take(ix, live, &after);
                char msg[256];
                if (!tu_snapshot_equal(&before, &after, msg, sizeof msg))
                    fail_msg("%s step %d: %s", s->name, step, msg);
                tu_snapshot_free(&after);
                assert_int_equal(a.bytes, bytes);
                assert_int_equal(qg_validate(ix), QG_OK);
                if (insert) {
                    assert_int_equal(qg_insert(ix, box), h);
                    live = h + 1;
                } else {
                    assert_int_equal(qg_move(ix, h, box), QG_OK);
                }
            }
            tu_snapshot_free(&before);
            assert_int_equal(qg_validate(ix), QG_OK);
            assert_int_equal(qg_get_stats(ix).memory_bytes, a.bytes);
            if (step % 50 == 49)
                qg_cleanup(ix); /* never allocates, may ask for a re-fit */
        }
        /* The walk-off's first move needed a re-fit, refused while failing. */
        assert_int_equal(refit_refused, 1);
        assert_true(refused > 1);
        /* ... and after it nothing piles up. */
        qg_query_stats qs;
        long n = 0;
        assert_int_equal(qg_pairs_with_stats(ix, count_pair, &n, &qs), QG_OK);
        assert_true(qs.elements_tested < 100 * N);
        qg_destroy(ix);
        assert_int_equal(a.bytes, 0);
        assert_int_equal(a.errors, 0);
    }
}

/* ---- several cores ------------------------------------------------------ */

static void test_parts(void **state)
{
    (void)state;
    tu_skip_unless_built(QG_LOOSE_GRID);
    tu_alloc a;
    tu_alloc_init(&a);
    qg_index *idx = make(&a, tu_rect(0, 0, 1024, 1024), 32);
    tu_parts_scenes(idx);
    tu_close(idx, &a);
}

/* qg_validate catches an element listed twice (and so another missing)
 * inside one crowded loose cell, in one pass: 3,000 coincident boxes. The
 * damage is undone and the index validates again. */
static void test_validate_damage(void **state)
{
    (void)state;
    qg_config cfg = qg_default_config(QG_LOOSE_GRID);
    cfg.bounds = tu_rect(0, 0, 1024, 1024);
    cfg.element_size = 4;
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&cfg, &idx), QG_OK);
    for (int i = 0; i < 3000; i++)
        assert_true(qg_insert(idx, tu_rect(100, 100, 101, 101)) >= 0);
    qg_cleanup(idx);
    assert_int_equal(qg_validate(idx), QG_OK);
    loose_grid *g = (loose_grid *)idx;
    const int32_t a = g->loose[g->cell[0] & LG_CELL_MASK].head;
    assert_true(a >= 0 && g->next[a] >= 0);
    const int32_t b = g->next[a];
    const qg_handle keep = g->items[b].h;
    g->items[b].h = g->items[a].h;
    assert_int_equal(qg_validate(idx), QG_ERR_INVALID);
    g->items[b].h = keep;
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
}

/* Own ray casts and nearest searches against plain loops: boxes
 * on cell lines, elements far outside the world (clamped onto its border
 * cells, or re-fitted around), boxes far bigger than the cells (loose
 * boxes over many tight cells), before and after cleanup (item boxes or
 * the base's), k past the count. */
static void test_rays_nearest(void **state)
{
    (void)state;
    static const float cells[] = {16.0f, 7.0f, 0.5f, 300.0f};
    const qg_rect bounds = {0, 0, 1024, 1024};
    for (int i = 0; i < 4; i++) {
        tu_alloc a;
        tu_alloc_init(&a);
        qg_index *idx = make(&a, bounds, cells[i]);
        kq_layers(idx, 1024.0f, 16.0f, tu_env_seed(1500 + (uint64_t)i));
        assert_int_equal(qg_validate(idx), QG_OK);
        qg_destroy(idx);
        assert_int_equal(a.bytes, 0);
    }
    tu_alloc a;
    tu_alloc_init(&a);
    qg_index *idx = make(&a, bounds, 16);
    kq_small(idx);
    qg_destroy(idx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grow_then_shrink), cmocka_unit_test(test_frames),
        cmocka_unit_test(test_far_moves),        cmocka_unit_test(test_outside),
        cmocka_unit_test(test_scenes),           cmocka_unit_test(test_refit_oom),
        cmocka_unit_test(test_parts),            cmocka_unit_test(test_validate_damage),
        cmocka_unit_test(test_rays_nearest),
    };
    return tu_run_own_tests("loose_grid_invariants", QG_LOOSE_GRID, tests);
}
