// SPDX-License-Identifier: MIT
/* Learning and re-tuning, for one kind (argv[1]).
 *
 * Every scene runs the kind from qg_default_config with nothing set beside
 * QG_BRUTE_FORCE on the same boxes: each frame moves every box a little,
 * calls qg_cleanup, and compares the pairs and a few queries (sorted) and
 * qg_validate. Scenes: small (2-8 wide), tiny (0.01-0.04), large (40-160),
 * mixed (1% 16x larger), grow (every width 2 -> 64), gather (into 1% of the
 * world and out again), arrive (100 elements, then 5% more a frame, by
 * qg_insert and by qg_insert_many), halve (half removed). The kinds but
 * brute_force must have re-tuned where the sizes call for it (stats).
 * Fault injection: a re-tune made pending by qg_cleanup, then qg_move,
 * qg_insert, qg_insert_many and qg_move_many with the k-th allocation
 * failing (once, and sticky), for every k the calls reach: the call answers
 * as if no re-tune had been tried (its own allocations may fail it, with
 * nothing changed), memory_bytes equals the allocator's count, answers
 * stay exact. Seed: QG_TEST_SEED (printed). QG_TEST_SCALE scales N. */
#include "test_util.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static qg_kind g_kind = QG_QUADTREE;
static uint64_t g_seed = 32;

typedef struct scene {
    int32_t n, cap;
    float world;
    float *x, *y, *vx, *vy, *w;
    qg_rect *boxes;
    tu_rng rng;
} scene;

static qg_rect box_at(float x, float y, float w)
{
    return tu_rect(x - 0.5f * w, y - 0.5f * w, x + 0.5f * w, y + 0.5f * w);
}

/* n boxes of width lo..hi in [0, world]^2 (every hundredth `big` times
 * wider), moving about a tenth of their width a frame. */
static void scene_init(scene *s, int32_t n, int32_t cap, float world, float lo, float hi, float big)
{
    memset(s, 0, sizeof *s);
    tu_rng_seed(&s->rng, g_seed);
    s->n = n;
    s->cap = cap;
    s->world = world;
    s->x = malloc((size_t)cap * sizeof(float));
    s->y = malloc((size_t)cap * sizeof(float));
    s->vx = malloc((size_t)cap * sizeof(float));
    s->vy = malloc((size_t)cap * sizeof(float));
    s->w = malloc((size_t)cap * sizeof(float));
    s->boxes = malloc((size_t)cap * sizeof(qg_rect));
    assert_non_null(s->boxes);
    for (int32_t i = 0; i < cap; i++) {
        s->w[i] = tu_rng_range(&s->rng, lo, hi) * (i % 100 == 0 ? big : 1.0f);
        s->x[i] = tu_rng_range(&s->rng, 0.0f, world);
        s->y[i] = tu_rng_range(&s->rng, 0.0f, world);
        s->vx[i] = tu_rng_range(&s->rng, -0.1f, 0.1f) * lo;
        s->vy[i] = tu_rng_range(&s->rng, -0.1f, 0.1f) * lo;
        s->boxes[i] = box_at(s->x[i], s->y[i], s->w[i]);
    }
}

static void scene_free(scene *s)
{
    free(s->x), free(s->y), free(s->vx), free(s->vy), free(s->w), free(s->boxes);
}

/* One step: positions drift (towards the centre by `pull`, 0 none), widths
 * times `grow`. */
static void scene_step(scene *s, float pull, float grow)
{
    const float c = 0.5f * s->world;
    for (int32_t i = 0; i < s->cap; i++) {
        s->x[i] += s->vx[i];
        s->y[i] += s->vy[i];
        s->x[i] = c + (s->x[i] - c) * (1.0f - pull);
        s->y[i] = c + (s->y[i] - c) * (1.0f - pull);
        s->w[i] *= grow;
        s->boxes[i] = box_at(s->x[i], s->y[i], s->w[i]);
    }
}

static void sorted_pairs(const qg_index *ix, tu_vec *out)
{
    tu_collect c = {0};
    assert_int_equal(qg_pairs(ix, tu_collect_pair, &c), QG_OK);
    assert_int_equal(c.bad_order, 0);
    tu_vec_sort(&c.out);
    *out = c.out;
}

static void sorted_query(const qg_index *ix, qg_rect area, tu_vec *out)
{
    tu_collect c = {0};
    assert_int_equal(qg_query(ix, area, tu_collect_query, &c), QG_OK);
    tu_vec_sort(&c.out);
    *out = c.out;
}

static void same_vec(const tu_vec *a, const tu_vec *b, const char *what, int frame)
{
    long d = tu_vec_first_diff(a, b);
    if (d >= 0)
        fail_msg("%s, frame %d: differs from brute_force at entry %ld (%zu vs %zu entries; seed %llu)", what,
                 frame, d, a->n, b->n, (unsigned long long)g_seed);
}

/* The kind and the oracle answer the same. */
static void compare(const qg_index *ix, const qg_index *bf, const scene *s, int frame)
{
    assert_int_equal(qg_validate(ix), QG_OK);
    assert_int_equal(qg_count(ix), qg_count(bf));
    tu_vec a, b;
    sorted_pairs(ix, &a);
    sorted_pairs(bf, &b);
    same_vec(&a, &b, "pairs", frame);
    tu_vec_free(&a), tu_vec_free(&b);
    const float W = s->world;
    const qg_rect areas[3] = {tu_rect(0.2f * W, 0.3f * W, 0.45f * W, 0.5f * W),
                              tu_rect(0.5f * W, 0.5f * W, 0.5f * W, 0.5f * W),
                              tu_rect(-INFINITY, -INFINITY, 0.1f * W, INFINITY)};
    for (int q = 0; q < 3; q++) {
        sorted_query(ix, areas[q], &a);
        sorted_query(bf, areas[q], &b);
        same_vec(&a, &b, "query", frame);
        tu_vec_free(&a), tu_vec_free(&b);
    }
}

static void make_pair(qg_index **ix, qg_index **bf)
{
    qg_config c = qg_default_config(g_kind);
    assert_int_equal(qg_create(&c, ix), QG_OK);
    qg_config b = qg_default_config(QG_BRUTE_FORCE);
    assert_int_equal(qg_create(&b, bf), QG_OK);
}

static void insert_all(qg_index *ix, qg_index *bf, const scene *s, int32_t from, int32_t to, bool bulk)
{
    if (bulk && to > from) {
        qg_handle *h = malloc((size_t)(to - from) * sizeof *h);
        assert_int_equal(qg_insert_many(ix, s->boxes + from, to - from, h), QG_OK);
        for (int32_t i = from; i < to; i++) {
            assert_int_equal(h[i - from], i);
            assert_int_equal(qg_insert(bf, s->boxes[i]), i);
        }
        free(h);
        return;
    }
    for (int32_t i = from; i < to; i++) {
        assert_int_equal(qg_insert(ix, s->boxes[i]), i);
        assert_int_equal(qg_insert(bf, s->boxes[i]), i);
    }
}

static void frame(qg_index *ix, qg_index *bf, scene *s, int f, float pull, float grow)
{
    scene_step(s, pull, grow);
    if (f % 3 == 2) {
        /* qg_move_many: a pending re-tune runs there too */
        qg_handle *h = malloc((size_t)s->n * sizeof *h);
        for (int32_t i = 0; i < s->n; i++)
            h[i] = i;
        assert_int_equal(qg_move_many(ix, NULL, h, s->boxes, s->n), QG_OK);
        free(h);
    } else {
        for (int32_t i = 0; i < s->n; i++)
            assert_int_equal(qg_move(ix, i, s->boxes[i]), QG_OK);
    }
    for (int32_t i = 0; i < s->n; i++)
        assert_int_equal(qg_move(bf, i, s->boxes[i]), QG_OK);
    qg_cleanup(ix);
    qg_cleanup(bf);
    compare(ix, bf, s, f);
}

/* Scaled, but never below 1,000: an index learns from 256 elements on,
 * and the sample must see the scene (the ARM64 run uses scale 0.01). */
static int32_t scene_n(void)
{
    const int64_t n = tu_scaled(3000);
    return (int32_t)(n < 1000 ? 1000 : n);
}

/* A fixed-size scene: the index learns, then stays exact. */
static void run_fixed(float lo, float hi, float big, float world_per_sqrt_n)
{
    const int32_t n = scene_n();
    scene s;
    scene_init(&s, n, n, world_per_sqrt_n * sqrtf((float)n), lo, hi, big);
    qg_index *ix, *bf;
    make_pair(&ix, &bf);
    insert_all(ix, bf, &s, 0, n, false);
    qg_cleanup(ix);
    compare(ix, bf, &s, 0);
    for (int f = 1; f <= 12; f++)
        frame(ix, bf, &s, f, 0.0f, 1.0f);
    const qg_stats st = qg_get_stats(ix);
    if (g_kind != QG_BRUTE_FORCE) {
        /* The learned typical size is the boxes' (within the 2x the
         * hysteresis allows around the median of the widths). */
        const float median = 0.5f * (lo + hi);
        if (!(st.element_size > 0.5f * median && st.element_size < 2.0f * median))
            fail_msg("learned element_size %g for boxes %g-%g wide", (double)st.element_size, (double)lo,
                     (double)hi);
        assert_true(st.world.max_x > st.world.min_x);
    } else {
        assert_int_equal(st.retunes, 0);
    }
    qg_destroy(ix);
    qg_destroy(bf);
    scene_free(&s);
}

static void test_small(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    run_fixed(2.0f, 8.0f, 1.0f, 16.0f);
}

static void test_tiny(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    run_fixed(0.01f, 0.04f, 1.0f, 0.08f);
}

static void test_large(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    run_fixed(40.0f, 160.0f, 1.0f, 320.0f);
}

static void test_mixed(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    run_fixed(2.0f, 8.0f, 16.0f, 16.0f);
}

static void test_grow(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const int32_t n = scene_n();
    scene s;
    scene_init(&s, n, n, 16.0f * sqrtf((float)n), 2.0f, 2.0f, 1.0f);
    qg_index *ix, *bf;
    make_pair(&ix, &bf);
    insert_all(ix, bf, &s, 0, n, false);
    /* 2 -> 64 over 40 frames (32x: several re-tunes) */
    const float g = powf(32.0f, 1.0f / 40.0f);
    for (int f = 1; f <= 50; f++)
        frame(ix, bf, &s, f, 0.0f, f <= 40 ? g : 1.0f);
    if (g_kind != QG_BRUTE_FORCE)
        assert_true(qg_get_stats(ix).retunes >= 2);
    qg_destroy(ix);
    qg_destroy(bf);
    scene_free(&s);
}

static void test_gather(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const int32_t n = scene_n();
    scene s;
    scene_init(&s, n, n, 16.0f * sqrtf((float)n), 2.0f, 8.0f, 1.0f);
    qg_index *ix, *bf;
    make_pair(&ix, &bf);
    insert_all(ix, bf, &s, 0, n, true);
    /* into a tenth of the side (1% of the world), then out again */
    const float in = 1.0f - powf(0.1f, 1.0f / 20.0f), out = 1.0f - powf(10.0f, 1.0f / 20.0f);
    for (int f = 1; f <= 50; f++)
        frame(ix, bf, &s, f, f <= 20 ? in : f <= 25 ? 0.0f : f <= 45 ? out : 0.0f, 1.0f);
    qg_destroy(ix);
    qg_destroy(bf);
    scene_free(&s);
}

static void run_arrive(bool bulk)
{
    const int32_t n = scene_n();
    scene s;
    scene_init(&s, 100, n, 16.0f * sqrtf((float)n), 2.0f, 8.0f, 1.0f);
    /* the arrivals are tiny boxes in a corner at first: the world and sizes
     * change as they come */
    qg_index *ix, *bf;
    make_pair(&ix, &bf);
    insert_all(ix, bf, &s, 0, 100, bulk);
    int f = 0;
    while (s.n < n) {
        int32_t more = s.n / 20 > 0 ? s.n / 20 : 1;
        if (more > n - s.n)
            more = n - s.n;
        insert_all(ix, bf, &s, s.n, s.n + more, bulk);
        s.n += more;
        frame(ix, bf, &s, ++f, 0.0f, 1.0f);
    }
    qg_destroy(ix);
    qg_destroy(bf);
    scene_free(&s);
}

static void test_arrive(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    run_arrive(false);
}

static void test_arrive_bulk(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    run_arrive(true);
}

/* Half the elements removed (a re-measure), then the sizes of the rest
 * change 8x: a re-tune over a free list with holes. */
static void test_halve(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const int32_t n = scene_n();
    scene s;
    scene_init(&s, n, n, 16.0f * sqrtf((float)n), 2.0f, 8.0f, 1.0f);
    qg_index *ix, *bf;
    make_pair(&ix, &bf);
    insert_all(ix, bf, &s, 0, n, false);
    qg_cleanup(ix);
    for (int32_t i = 0; i < n; i += 2) {
        assert_int_equal(qg_remove(ix, i), QG_OK);
        assert_int_equal(qg_remove(bf, i), QG_OK);
        s.w[i] = 0.0f;
        s.x[i] = -1e6f; /* removed: moved nowhere below */
    }
    qg_cleanup(ix);
    int32_t before = qg_get_stats(ix).retunes;
    for (int f = 1; f <= 20; f++) {
        scene_step(&s, 0.0f, f <= 3 ? 2.0f : 1.0f);
        for (int32_t i = 1; i < n; i += 2) {
            assert_int_equal(qg_move(ix, i, s.boxes[i]), QG_OK);
            assert_int_equal(qg_move(bf, i, s.boxes[i]), QG_OK);
        }
        qg_cleanup(ix);
        qg_cleanup(bf);
        compare(ix, bf, &s, f);
    }
    if (g_kind != QG_BRUTE_FORCE && n / 2 >= 256)
        assert_true(qg_get_stats(ix).retunes > before);
    qg_destroy(ix);
    qg_destroy(bf);
    scene_free(&s);
}

/* fixed_sizes holds the given values: no re-tune, exact answers. */
static void test_fixed_sizes(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const int32_t n = scene_n();
    scene s;
    scene_init(&s, n, n, 0.08f * sqrtf((float)n), 0.01f, 0.04f, 1.0f);
    qg_config c = qg_default_config(g_kind);
    c.fixed_sizes = true;
    c.bounds = tu_rect(0, 0, s.world, s.world);
    c.element_size = 0.025f;
    qg_index *ix, *bf;
    assert_int_equal(qg_create(&c, &ix), QG_OK);
    qg_config b = qg_default_config(QG_BRUTE_FORCE);
    assert_int_equal(qg_create(&b, &bf), QG_OK);
    insert_all(ix, bf, &s, 0, n, false);
    for (int f = 1; f <= 5; f++)
        frame(ix, bf, &s, f, 0.0f, 1.5f);
    assert_int_equal(qg_get_stats(ix).retunes, 0);
    assert_true(qg_get_stats(ix).element_size == 0.025f);
    qg_destroy(ix);
    qg_destroy(bf);
    scene_free(&s);
}

/* ---- fault injection across a re-tune --------------------------------- */

static void snapshot_equal_or_fail(const tu_snapshot *a, const tu_snapshot *b, const char *what, long k)
{
    char msg[256];
    if (!tu_snapshot_equal(a, b, msg, sizeof msg))
        fail_msg("%s, fail_at %ld: %s", what, k, msg);
}

/* An index with a re-tune pending (boxes 0.01-0.04 wide where it was made
 * for bounds [0,1024]), through allocator `a`. */
static qg_index *pending_index(tu_alloc *a, scene *s, int32_t n)
{
    qg_config c = qg_default_config(g_kind);
    c.allocator = tu_allocator(a);
    qg_index *ix;
    assert_int_equal(qg_create(&c, &ix), QG_OK);
    scene_init(s, n, n + 64, 0.08f * sqrtf((float)n), 0.01f, 0.04f, 1.0f);
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(qg_insert(ix, s->boxes[i]), i);
    /* the boxes grow 8x: the 16th cleanup (a sample) finds the sizes off */
    for (int32_t i = 0; i < n; i++) {
        s->w[i] *= 8.0f;
        s->boxes[i] = box_at(s->x[i], s->y[i], s->w[i]);
        assert_int_equal(qg_move(ix, i, s->boxes[i]), QG_OK);
    }
    for (int c2 = 0; c2 < 16; c2++)
        qg_cleanup(ix);
    return ix;
}

/* op 0: qg_move, 1: qg_insert, 2: qg_insert_many, 3: qg_move_many */
static void run_oom(tu_fail_mode mode, int op)
{
    const int32_t n = 600;
    for (long k = 1;; k++) {
        tu_alloc a;
        tu_alloc_init(&a);
        scene s;
        qg_index *ix = pending_index(&a, &s, n);
        const int32_t retunes = qg_get_stats(ix).retunes;
        const size_t bytes = a.bytes;
        tu_snapshot before = {0};
        tu_snapshot_take(ix, n + 8, &before);
        a.mode = mode;
        a.fail_at = a.grow_requests + k;
        qg_status st;
        qg_rect nb = box_at(s.x[5] + 0.5f, s.y[5], s.w[5]);
        qg_handle hs[8];
        qg_rect bs[8];
        for (int i = 0; i < 8; i++) {
            hs[i] = i * 7;
            bs[i] = box_at(s.x[i * 7] + 0.25f, s.y[i * 7], s.w[i * 7]);
        }
        switch (op) {
        case 0: st = qg_move(ix, 5, nb); break;
        case 1: {
            qg_handle h = qg_insert(ix, nb);
            st = h >= 0 ? QG_OK : (qg_status)h;
            break;
        }
        case 2: st = qg_insert_many(ix, bs, 8, hs); break;
        default: st = qg_move_many(ix, NULL, hs, bs, 8); break;
        }
        tu_alloc_end_call(&a);
        a.fail_at = 0;
        const bool injected = a.injected > 0;
        assert_int_equal(qg_validate(ix), QG_OK);
        assert_int_equal(qg_get_stats(ix).memory_bytes, a.bytes);
        const int32_t after = qg_get_stats(ix).retunes;
        if (st == QG_ERR_NOMEM) {
            /* the call's own allocation failed: nothing changed, its bytes
             * included (no re-tune ran ahead of the refused call) */
            if (a.bytes != bytes || after != retunes)
                fail_msg("%s op %d allocation %ld: QG_ERR_NOMEM, but %zu bytes became %zu, %d re-tunes %d",
                         qg_kind_name(g_kind), op, k, bytes, a.bytes, retunes, after);
            tu_snapshot now = {0};
            tu_snapshot_take(ix, n + 8, &now);
            snapshot_equal_or_fail(&before, &now, "NOMEM", k);
            tu_snapshot_free(&now);
        } else {
            assert_int_equal(st, QG_OK);
        }
        if (!injected)
            assert_true(g_kind == QG_BRUTE_FORCE || after > retunes); /* the re-tune ran */
        /* exact afterwards, re-tuned or not: against brute force */
        qg_config b = qg_default_config(QG_BRUTE_FORCE);
        qg_index *bf;
        assert_int_equal(qg_create(&b, &bf), QG_OK);
        for (qg_handle h = 0; h < n + 8; h++) {
            qg_rect r;
            if (qg_get(ix, h, &r) == QG_OK) {
                while (qg_count(bf) < h) /* keep handles equal */
                    assert_true(qg_insert(bf, tu_rect(-1e9f, -1e9f, -1e9f, -1e9f)) >= 0);
                assert_int_equal(qg_insert(bf, r), h);
            }
        }
        /* the padding boxes overlap each other only */
        tu_vec p1, p2;
        sorted_pairs(ix, &p1);
        sorted_pairs(bf, &p2);
        tu_vec kept = {0};
        for (size_t i = 0; i < p2.n; i++) {
            qg_rect r;
            qg_handle x = (qg_handle)(p2.v[i] >> 32), y = (qg_handle)(p2.v[i] & 0xFFFFFFFF);
            if (qg_get(ix, x, &r) == QG_OK && qg_get(ix, y, &r) == QG_OK)
                tu_vec_push(&kept, p2.v[i]);
        }
        same_vec(&p1, &kept, "pairs after a fault", (int)k);
        tu_vec_free(&p1), tu_vec_free(&p2), tu_vec_free(&kept);
        qg_destroy(bf);
        /* and it keeps working: the next frame re-tunes when asked */
        for (int f = 0; f < 40; f++)
            qg_cleanup(ix);
        assert_int_equal(qg_move(ix, 6, box_at(s.x[6], s.y[6], s.w[6])), QG_OK);
        assert_int_equal(qg_validate(ix), QG_OK);
        assert_int_equal(qg_get_stats(ix).memory_bytes, a.bytes);
        if (g_kind != QG_BRUTE_FORCE)
            assert_true(qg_get_stats(ix).retunes > retunes);
        tu_snapshot_free(&before);
        qg_destroy(ix);
        assert_int_equal(a.bytes, 0);
        assert_int_equal(a.errors, 0);
        scene_free(&s);
        if (!injected)
            break;
    }
}

static void test_oom_move_once(void **state) { (void)state; tu_skip_unless_built(g_kind); run_oom(TU_FAIL_ONCE, 0); }
static void test_oom_move_sticky(void **state) { (void)state; tu_skip_unless_built(g_kind); run_oom(TU_FAIL_STICKY, 0); }
static void test_oom_insert_once(void **state) { (void)state; tu_skip_unless_built(g_kind); run_oom(TU_FAIL_ONCE, 1); }
static void test_oom_insert_sticky(void **state) { (void)state; tu_skip_unless_built(g_kind); run_oom(TU_FAIL_STICKY, 1); }
static void test_oom_insert_many(void **state) { (void)state; tu_skip_unless_built(g_kind); run_oom(TU_FAIL_STICKY, 2); }
static void test_oom_move_many(void **state) { (void)state; tu_skip_unless_built(g_kind); run_oom(TU_FAIL_ONCE, 3); }

int main(int argc, char **argv)
{
    if (!tu_kind_arg(argc, argv, &g_kind))
        return 2;
    g_seed = tu_env_seed(32);
    printf("test_tune: seed %llu\n", (unsigned long long)g_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small),          cmocka_unit_test(test_tiny),
        cmocka_unit_test(test_large),          cmocka_unit_test(test_mixed),
        cmocka_unit_test(test_grow),           cmocka_unit_test(test_gather),
        cmocka_unit_test(test_arrive),         cmocka_unit_test(test_arrive_bulk),
        cmocka_unit_test(test_halve),          cmocka_unit_test(test_fixed_sizes),
        cmocka_unit_test(test_oom_move_once),  cmocka_unit_test(test_oom_move_sticky),
        cmocka_unit_test(test_oom_insert_once), cmocka_unit_test(test_oom_insert_sticky),
        cmocka_unit_test(test_oom_insert_many), cmocka_unit_test(test_oom_move_many),
    };
    return tu_run_kind_tests("tune", g_kind, tests);
}
