// SPDX-License-Identifier: MIT
/* Concurrent const calls, for one kind (argv[1]): four threads run qg_query,
 * qg_query_point, qg_raycast, qg_nearest and qg_pairs on one index at the same time, and every answer
 * must equal the single-threaded one. An index that keeps scratch state
 * inside itself (a shared traversal stack, "visited" marks, a query counter)
 * gives wrong or duplicated results here. cmocka is not thread-safe, so the
 * threads only record; the main thread asserts. */
/* pthread_barrier_t needs POSIX 2008 under -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static qg_kind g_kind = QG_BRUTE_FORCE;

#define N_THREADS 4

typedef struct shared {
    const qg_index *idx;
    const qg_rect *areas;
    int n_areas;
    const uint64_t *want_query; /* per area: order-sensitive hash of the answer */
    const uint64_t *want_point;
    const uint64_t *want_ray;  /* per area: a ray from its min corner */
    const uint64_t *want_near; /* per area: the 8 nearest to its max corner */
    uint64_t want_pairs;
    int rounds;
    pthread_barrier_t start;
} shared;

typedef struct worker {
    shared *s;
    int id;
    long mismatches;
    long bad_status;
    char first[160];
} worker;

typedef struct hasher {
    uint64_t h, n;
} hasher;

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Order-sensitive: the order of one index's answers is deterministic, so a
 * thread must see the very same sequence the main thread saw. */
static bool hash_query(qg_handle h, void *user)
{
    hasher *x = user;
    x->h = mix(x->h ^ (uint64_t)(uint32_t)h);
    x->n++;
    return true;
}

static bool hash_pair(qg_handle a, qg_handle b, void *user)
{
    hasher *x = user;
    x->h = mix(x->h ^ ((uint64_t)(uint32_t)a << 32 | (uint32_t)b));
    x->n++;
    return true;
}

static uint64_t query_hash(const qg_index *idx, qg_rect area, qg_status *st)
{
    hasher x = {1, 0};
    *st = qg_query(idx, area, hash_query, &x);
    return x.h ^ x.n;
}

static uint64_t point_hash(const qg_index *idx, qg_rect area, qg_status *st)
{
    hasher x = {2, 0};
    *st = qg_query_point(idx, area.min_x, area.min_y, hash_query, &x);
    return x.h ^ x.n;
}

static float hash_ray(qg_handle h, float t, void *user)
{
    hasher *x = user;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    x->h = mix(x->h ^ ((uint64_t)(uint32_t)h << 32 | bits));
    x->n++;
    return INFINITY;
}

/* qg_raycast from the area's min corner towards its max corner, reaching
 * twice as far; every hit, in the kind's order. */
static uint64_t ray_hash(const qg_index *idx, qg_rect area, qg_status *st)
{
    hasher x = {4, 0};
    float dx = area.max_x - area.min_x, dy = area.max_y - area.min_y;
    if (!isfinite(dx) || !isfinite(dy) || !isfinite(area.min_x) || !isfinite(area.min_y)) {
        dx = 1.0f, dy = 0.5f;
        area.min_x = isfinite(area.max_x) ? area.max_x : 0.0f;
        area.min_y = isfinite(area.max_y) ? area.max_y : 0.0f;
    }
    *st = qg_raycast(idx, area.min_x, area.min_y, dx, dy, 2.0f, hash_ray, &x);
    return x.h ^ x.n;
}

/* qg_nearest: the 8 nearest to the area's max corner (its min when that is
 * infinite), handles and distances. */
static uint64_t near_hash(const qg_index *idx, qg_rect area, qg_status *st)
{
    qg_handle h[8];
    float d[8];
    int32_t found = 0;
    const float x = isfinite(area.max_x) ? area.max_x : area.min_x, y = isfinite(area.max_y) ? area.max_y : area.min_y;
    *st = qg_nearest(idx, isfinite(x) ? x : 0.0f, isfinite(y) ? y : 0.0f, 8, INFINITY, h, d, &found);
    hasher z = {5, 0};
    for (int32_t i = 0; i < found; i++) {
        uint32_t bits;
        memcpy(&bits, &d[i], sizeof bits);
        z.h = mix(z.h ^ ((uint64_t)(uint32_t)h[i] << 32 | bits));
    }
    return z.h ^ (uint64_t)found;
}

static uint64_t pairs_hash(const qg_index *idx, qg_status *st)
{
    hasher x = {3, 0};
    *st = qg_pairs(idx, hash_pair, &x);
    return x.h ^ x.n;
}

static void note(worker *w, const char *what, int i)
{
    if (w->mismatches++ == 0)
        snprintf(w->first, sizeof w->first, "thread %d: %s %d differs from single-threaded", w->id,
                 what, i);
}

static void *work(void *arg)
{
    worker *w = arg;
    shared *s = w->s;
    pthread_barrier_wait(&s->start);
    for (int round = 0; round < s->rounds; round++) {
        /* Each thread walks the areas from a different start, so different
         * queries overlap in time. */
        for (int j = 0; j < s->n_areas; j++) {
            int i = (j + w->id * s->n_areas / N_THREADS) % s->n_areas;
            qg_status st;
            if (query_hash(s->idx, s->areas[i], &st) != s->want_query[i])
                note(w, "query", i);
            w->bad_status += st != QG_OK;
            if (point_hash(s->idx, s->areas[i], &st) != s->want_point[i])
                note(w, "query_point", i);
            w->bad_status += st != QG_OK;
            if (ray_hash(s->idx, s->areas[i], &st) != s->want_ray[i])
                note(w, "raycast", i);
            w->bad_status += st != QG_OK;
            if (near_hash(s->idx, s->areas[i], &st) != s->want_near[i])
                note(w, "nearest", i);
            w->bad_status += st != QG_OK;
            if ((j + round + w->id) % 64 == 0) {
                if (pairs_hash(s->idx, &st) != s->want_pairs)
                    note(w, "pairs", round);
                w->bad_status += st != QG_OK;
            }
        }
    }
    return NULL;
}

/* engine: a third of the elements static (in the static layer after the
 * cleanup), some with filters, so the concurrent calls read the engine's
 * state too. */
static void run_threads(const qg_config *cfg, int n_elems, float size, int rounds, bool engine)
{
    qg_index *idx = NULL;
    assert_int_equal(qg_create(cfg, &idx), QG_OK);
    tu_rng r;
    tu_rng_seed(&r, 777);
    qg_rect b = cfg->bounds;
    float W = b.max_x - b.min_x;
    for (int i = 0; i < n_elems; i++) {
        float x = tu_rng_range(&r, b.min_x - W / 20, b.max_x + W / 20);
        float y = tu_rng_range(&r, b.min_y - W / 20, b.max_y + W / 20);
        float s = tu_rng_range(&r, 0, size);
        assert_true(qg_insert(idx, tu_rect(x, y, x + s, y + s)) >= 0);
    }
    /* Some churn first, so free lists and emptied leaves exist. */
    for (int i = 0; i < n_elems / 4; i++) {
        qg_handle h = (qg_handle)tu_rng_below(&r, (uint32_t)n_elems);
        if (i % 2)
            qg_remove(idx, h);
        else
            qg_move(idx, h, tu_rect(b.min_x + 1, b.min_y + 1, b.min_x + 1 + size, b.min_y + 1 + size));
    }
    if (engine) {
        for (qg_handle h = 0; h < n_elems; h++) {
            if (h % 3 == 0)
                qg_set_static(idx, h, true);
            if (h % 7 == 0) {
                const qg_filter f = {1u << (h % 3), (h % 2) ? 0x3u : 0x5u};
                qg_set_filter(idx, h, f);
            }
        }
    }
    qg_cleanup(idx);

    enum { N_AREAS = 256 };
    qg_rect areas[N_AREAS];
    uint64_t wq[N_AREAS], wp[N_AREAS], wr[N_AREAS], wn[N_AREAS];
    for (int i = 0; i < N_AREAS; i++) {
        float x = tu_rng_range(&r, b.min_x, b.max_x), y = tu_rng_range(&r, b.min_y, b.max_y);
        float s = tu_rng_range(&r, 0, W / 8);
        areas[i] = tu_rect(x, y, x + s, y + s);
        if (i % 16 == 0)
            areas[i] = tu_rect(-(float)INFINITY, y, x, (float)INFINITY);
        qg_status st;
        wq[i] = query_hash(idx, areas[i], &st);
        assert_int_equal(st, QG_OK);
        /* the same call again gives the same order */
        assert_true(query_hash(idx, areas[i], &st) == wq[i]);
        wp[i] = point_hash(idx, areas[i], &st);
        assert_int_equal(st, QG_OK);
        wr[i] = ray_hash(idx, areas[i], &st);
        assert_int_equal(st, QG_OK);
        assert_true(ray_hash(idx, areas[i], &st) == wr[i]);
        wn[i] = near_hash(idx, areas[i], &st);
        assert_int_equal(st, QG_OK);
    }
    qg_status st;
    shared s;
    memset(&s, 0, sizeof s);
    s.idx = idx;
    s.areas = areas;
    s.n_areas = N_AREAS;
    s.want_query = wq;
    s.want_point = wp;
    s.want_ray = wr;
    s.want_near = wn;
    s.want_pairs = pairs_hash(idx, &st);
    s.rounds = rounds;
    assert_int_equal(st, QG_OK);
    assert_int_equal(pthread_barrier_init(&s.start, NULL, N_THREADS), 0);

    pthread_t th[N_THREADS];
    worker ws[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        ws[t] = (worker){&s, t, 0, 0, {0}};
        assert_int_equal(pthread_create(&th[t], NULL, work, &ws[t]), 0);
    }
    for (int t = 0; t < N_THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&s.start);
    for (int t = 0; t < N_THREADS; t++) {
        if (ws[t].mismatches)
            fail_msg("%ld answers differ; first: %s", ws[t].mismatches, ws[t].first);
        assert_int_equal(ws[t].bad_status, 0);
    }
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
}

static void test_threads_default(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    qg_config c = qg_default_config(g_kind);
    if (g_kind == QG_POINT_GRID)
        c.max_element_size = 64;
    /* brute_force's pairs are quadratic: keep its index smaller. */
    run_threads(&c, (int)tu_scaled(g_kind == QG_BRUTE_FORCE ? 4000 : 20000), 8, (int)tu_scaled(3), false);
}

/* The same with static elements and filters: the const calls
 * read the static layer and the filters from every thread. */
static void test_threads_engine(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    qg_config c = qg_default_config(g_kind);
    if (g_kind == QG_POINT_GRID)
        c.max_element_size = 64;
    run_threads(&c, (int)tu_scaled(g_kind == QG_BRUTE_FORCE ? 4000 : 20000), 8, (int)tu_scaled(3), true);
}

static void test_threads_deep(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    qg_config c = qg_default_config(g_kind);
    c.bounds = tu_rect(-500, 100, 1500, 600);
    c.leaf_capacity = 2;
    c.max_depth = 12;
    if (g_kind == QG_POINT_GRID)
        c.max_element_size = 64;
    run_threads(&c, (int)tu_scaled(5000), 3, (int)tu_scaled(4), false);
}

/* ---- several cores: qg_pairs_parallel, qg_move_many, qg_cleanup_parallel */

static const int32_t k_workers[] = {1, 2, 3, 8}; /* 8: more workers than cores */

/* A job system that runs the ranges last to first, one item at a time, on
 * this thread, with made-up worker ids: the parts must not depend on which
 * worker runs them or in what order. */
static void reverse_run(qg_task_fn *task, int32_t count, void *context, void *user)
{
    const int32_t workers = *(const int32_t *)user;
    for (int32_t i = count; i-- > 0;)
        task(i, i + 1, i % workers, context);
}

/* A scene with every hard case: tiny, zero-size, coincident, huge boxes and
 * boxes outside the bounds; then churn, and moves left without cleanup. */
static void fill_scene(qg_index *idx, qg_index *oracle, tu_rng *r, int n)
{
    for (int i = 0; i < n; i++) {
        float x = tu_rng_range(r, -200, 1224), y = tu_rng_range(r, -200, 1224);
        float s = tu_rng_chance(r, 0.02) ? tu_rng_range(r, 50, 400) : tu_rng_range(r, 0, 12);
        if (i % 97 == 0)
            x = y = 500, s = 4; /* a coincident pile */
        if (i % 131 == 0)
            s = 0;
        qg_rect b = tu_rect(x, y, x + s, y + s);
        qg_handle h = qg_insert(idx, b);
        assert_true(h >= 0);
        assert_int_equal(qg_insert(oracle, b), h);
    }
    for (int i = 0; i < n / 5; i++) {
        qg_handle h = (qg_handle)tu_rng_below(r, (uint32_t)n);
        if (i % 3 == 0) {
            qg_status a = qg_remove(idx, h);
            assert_int_equal(qg_remove(oracle, h), a);
        }
    }
    qg_cleanup(idx);
}

/* Collects pairs of the parts into one list each. */
static void collect_parts(const qg_index *idx, const qg_jobs *jobs, int32_t parts, tu_collect *c)
{
    void *users[8] = {0};
    for (int32_t p = 0; p < parts; p++) {
        tu_collect_reset(&c[p], 0);
        users[p] = &c[p];
    }
    qg_query_stats st;
    assert_int_equal(qg_pairs_parallel(idx, jobs, tu_collect_pair, users, &st), QG_OK);
    for (int32_t p = 0; p < parts; p++)
        assert_int_equal(c[p].bad_order, 0);
}

static void all_pairs(const qg_index *idx, tu_collect *c)
{
    tu_collect_reset(c, 0);
    assert_int_equal(qg_pairs(idx, tu_collect_pair, c), QG_OK);
    tu_vec_sort(&c->out);
}

/* Every part's pairs together are the oracle's, each once; and the same
 * parts again (a second run, another job system) give the same lists. */
static void check_parallel(const qg_index *idx, const qg_index *oracle, uint64_t seed)
{
    tu_collect want;
    memset(&want, 0, sizeof want);
    all_pairs(oracle, &want);
    for (size_t w = 0; w < sizeof k_workers / sizeof *k_workers; w++) {
        const int32_t parts = k_workers[w];
        qg_thread_pool *pool = NULL;
        assert_int_equal(qg_thread_pool_create(parts, &pool), QG_OK);
        const qg_jobs jobs = qg_thread_pool_jobs(pool);
        tu_collect got[8], again[8];
        memset(got, 0, sizeof got);
        memset(again, 0, sizeof again);
        collect_parts(idx, &jobs, parts, got);
        int32_t rw = parts;
        const qg_jobs rev = {parts, reverse_run, &rw};
        collect_parts(idx, &rev, parts, again);
        tu_vec merged;
        memset(&merged, 0, sizeof merged);
        for (int32_t p = 0; p < parts; p++) {
            if (tu_vec_first_diff(&got[p].out, &again[p].out) >= 0 || got[p].out.n != again[p].out.n)
                fail_msg("seed %llu, %d workers: part %d differs between two runs", (unsigned long long)seed,
                         parts, p);
            for (size_t i = 0; i < got[p].out.n; i++)
                tu_vec_push(&merged, got[p].out.v[i]);
        }
        tu_vec_sort(&merged);
        int64_t dup;
        if (tu_vec_has_dup(&merged, &dup))
            fail_msg("seed %llu, %d workers: pair %lld reported twice", (unsigned long long)seed, parts,
                     (long long)dup);
        long d = tu_vec_first_diff(&merged, &want.out);
        if (d >= 0 || merged.n != want.out.n)
            fail_msg("seed %llu, %d workers: %zu pairs, brute force %zu (first difference at %ld)",
                     (unsigned long long)seed, parts, merged.n, want.out.n, d);
        tu_vec_free(&merged);
        for (int32_t p = 0; p < parts; p++) {
            tu_vec_free(&got[p].out);
            tu_vec_free(&again[p].out);
        }
        qg_thread_pool_destroy(pool);
    }
    tu_vec_free(&want.out);
}

static qg_config scene_config(void)
{
    qg_config c = qg_default_config(g_kind);
    if (g_kind == QG_POINT_GRID)
        c.max_element_size = 16;
    /* Small leaves: trees a few thousand elements make deep, so the
     * quadtree's batch moves run by subtree on the workers (its buckets
     * are the nodes of depth 4). */
    if (g_kind == QG_QUADTREE || g_kind == QG_LOOSE_QUADTREE)
        c.leaf_capacity = 3;
    return c;
}

static void test_pairs_parallel(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    tu_rng r;
    qg_index *idx, *oracle;
    const uint64_t seed = tu_begin_pair(0x9a11e1, &r, scene_config(), &idx, &oracle);
    /* empty, one element, then a scene */
    check_parallel(idx, oracle, seed);
    assert_true(qg_insert(idx, tu_rect(1, 1, 2, 2)) >= 0);
    assert_true(qg_insert(oracle, tu_rect(1, 1, 2, 2)) >= 0);
    check_parallel(idx, oracle, seed);
    qg_clear(idx);
    qg_clear(oracle);
    fill_scene(idx, oracle, &r, (int)tu_scaled(g_kind == QG_BRUTE_FORCE ? 1500 : 6000));
    check_parallel(idx, oracle, seed);
    /* moves without a cleanup: answers are exact either way */
    for (int f = 0; f < 3; f++) {
        for (qg_handle h = 0; h < 2000; h++) {
            qg_rect b;
            if (qg_get(idx, h, &b) != QG_OK)
                continue;
            float dx = tu_rng_range(&r, -6, 6), dy = tu_rng_range(&r, -6, 6);
            if (h % 211 == 0)
                dx = 3000; /* far outside the bounds */
            b = tu_rect(b.min_x + dx, b.min_y + dy, b.max_x + dx, b.max_y + dy);
            assert_int_equal(qg_move(idx, h, b), QG_OK);
            assert_int_equal(qg_move(oracle, h, b), QG_OK);
        }
        check_parallel(idx, oracle, seed);
        qg_cleanup(idx);
        check_parallel(idx, oracle, seed);
    }
    /* bad arguments */
    const qg_jobs none = {0, reverse_run, NULL}, norun = {2, NULL, NULL};
    assert_int_equal(qg_pairs_parallel(NULL, NULL, tu_collect_pair, NULL, NULL), QG_ERR_INVALID);
    assert_int_equal(qg_pairs_parallel(idx, NULL, NULL, NULL, NULL), QG_ERR_INVALID);
    assert_int_equal(qg_pairs_parallel(idx, &none, tu_collect_pair, NULL, NULL), QG_ERR_INVALID);
    assert_int_equal(qg_pairs_parallel(idx, &norun, tu_collect_pair, NULL, NULL), QG_ERR_INVALID);
    /* a part that stops early stops only itself */
    tu_collect one;
    memset(&one, 0, sizeof one);
    tu_collect_reset(&one, 1);
    void *u[1] = {&one};
    assert_int_equal(qg_pairs_parallel(idx, NULL, tu_collect_pair, u, NULL), QG_OK);
    assert_int_equal(one.calls, 1);
    tu_vec_free(&one.out);
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
    qg_destroy(oracle);
}

/* A random batch over live handles, no handle twice. */
static int32_t make_batch(const qg_index *idx, tu_rng *r, qg_handle *hs, qg_rect *bs, int32_t max)
{
    int32_t n = 0;
    const int32_t high = 2 * qg_count(idx) + 8;
    const int32_t start = (int32_t)tu_rng_below(r, 7);
    for (qg_handle h = start; h < high && n < max; h += 1 + (int32_t)tu_rng_below(r, 3)) {
        qg_rect b;
        if (qg_get(idx, h, &b) != QG_OK)
            continue;
        float dx = tu_rng_range(r, -8, 8), dy = tu_rng_range(r, -8, 8);
        if (tu_rng_chance(r, 0.01))
            dx = tu_rng_range(r, -5000, 5000); /* teleport, maybe far outside */
        float grow = tu_rng_chance(r, 0.02) ? tu_rng_range(r, 0, 300) : 0;
        hs[n] = h;
        bs[n] = tu_rect(b.min_x + dx, b.min_y + dy, b.max_x + dx + grow, b.max_y + dy + grow);
        n++;
    }
    return n;
}

static void same_answers(const qg_index *idx, const qg_index *oracle, uint64_t seed, const char *what)
{
    tu_expect_same(idx, oracle, 2 * qg_count(oracle) + 8, "seed %llu, %s", (unsigned long long)seed, what);
}

static void test_move_many(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    tu_rng r;
    qg_index *idx, *oracle;
    const uint64_t seed = tu_begin_pair(0xba7c4, &r, scene_config(), &idx, &oracle);
    fill_scene(idx, oracle, &r, (int)tu_scaled(3000));
    enum { MAX = 4000 };
    qg_handle *hs = malloc(MAX * sizeof *hs);
    qg_rect *bs = malloc(MAX * sizeof *bs);
    assert_non_null(hs);
    assert_non_null(bs);
    for (int frame = 0; frame < 24; frame++) {
        const int32_t parts = k_workers[frame % 4];
        qg_thread_pool *pool = NULL;
        assert_int_equal(qg_thread_pool_create(parts, &pool), QG_OK);
        const qg_jobs jobs = qg_thread_pool_jobs(pool);
        const int32_t n = make_batch(idx, &r, hs, bs, MAX);
        assert_int_equal(qg_move_many(idx, frame % 5 == 4 ? NULL : &jobs, hs, bs, n), QG_OK);
        for (int32_t i = 0; i < n; i++)
            assert_int_equal(qg_move(oracle, hs[i], bs[i]), QG_OK);
        same_answers(idx, oracle, seed, "after qg_move_many");
        check_parallel(idx, oracle, seed);
        if (frame % 3 != 2) {
            qg_cleanup_parallel(idx, frame % 2 ? &jobs : NULL);
            same_answers(idx, oracle, seed, "after qg_cleanup_parallel");
        }
        /* churn between batches: removes and inserts reuse handles */
        for (int i = 0; i < 40; i++) {
            qg_handle h = (qg_handle)tu_rng_below(&r, (uint32_t)(2 * qg_count(oracle) + 1));
            qg_status st = qg_remove(oracle, h);
            assert_int_equal(qg_remove(idx, h), st);
            float x = tu_rng_range(&r, 0, 1024), y = tu_rng_range(&r, 0, 1024);
            qg_handle a = qg_insert(idx, tu_rect(x, y, x + 5, y + 5));
            assert_int_equal(qg_insert(oracle, tu_rect(x, y, x + 5, y + 5)), a);
        }
        qg_thread_pool_destroy(pool);
    }
    /* bad input: the right error, nothing changed */
    int32_t n = make_batch(idx, &r, hs, bs, 64);
    assert_true(n > 4);
    tu_snapshot before;
    memset(&before, 0, sizeof before);
    tu_snapshot_take(idx, 2 * qg_count(idx) + 8, &before);
    qg_handle keep_h = hs[n / 2];
    qg_rect keep_b = bs[n - 1];
    hs[n / 2] = 2 * qg_count(idx) + 100; /* never issued */
    assert_int_equal(qg_move_many(idx, NULL, hs, bs, n), QG_ERR_HANDLE);
    hs[n / 2] = -1;
    assert_int_equal(qg_move_many(idx, NULL, hs, bs, n), QG_ERR_HANDLE);
    hs[n / 2] = hs[0]; /* listed twice */
    assert_int_equal(qg_move_many(idx, NULL, hs, bs, n), QG_ERR_INVALID);
    hs[n / 2] = keep_h;
    bs[n - 1].min_x = NAN;
    assert_int_equal(qg_move_many(idx, NULL, hs, bs, n), QG_ERR_INVALID);
    bs[n - 1] = tu_rect(5, 5, 4, 6); /* min > max */
    assert_int_equal(qg_move_many(idx, NULL, hs, bs, n), QG_ERR_INVALID);
    bs[n - 1] = tu_rect(0, 0, (float)INFINITY, 1);
    assert_int_equal(qg_move_many(idx, NULL, hs, bs, n), QG_ERR_INVALID);
    bs[n - 1] = keep_b;
    assert_int_equal(qg_move_many(idx, NULL, hs, bs, -1), QG_ERR_INVALID);
    assert_int_equal(qg_move_many(idx, NULL, NULL, bs, n), QG_ERR_INVALID);
    assert_int_equal(qg_move_many(idx, NULL, hs, NULL, n), QG_ERR_INVALID);
    assert_int_equal(qg_move_many(NULL, NULL, hs, bs, n), QG_ERR_INVALID);
    assert_int_equal(qg_move_many(idx, NULL, NULL, NULL, 0), QG_OK);
    tu_expect_unchanged(idx, &before, "seed %llu: a rejected batch changed the index", (unsigned long long)seed);
    assert_int_equal(qg_validate(idx), QG_OK);
    free(hs);
    free(bs);
    qg_destroy(idx);
    qg_destroy(oracle);
}

/* qg_move_many and qg_cleanup_parallel over a static tile map:
 * enough moving elements that the engine's moved-element pass and the
 * refill of its caches of static neighbours run on the workers; a door
 * (a static element) moves now and then, so batches also take the serial
 * path. The oracle holds the same elements and flags. */
static void test_move_many_engine(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const uint64_t seed = tu_env_seed(0x7113);
    printf("seed %llu\n", (unsigned long long)seed);
    tu_rng r;
    tu_rng_seed(&r, seed);
    qg_config c = qg_default_config(g_kind), o = qg_default_config(QG_BRUTE_FORCE);
    c.bounds = o.bounds = tu_rect(0, 0, 1024, 1024);
    qg_index *idx = NULL, *oracle = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    assert_int_equal(qg_create(&o, &oracle), QG_OK);
    qg_handle door = -1;
    for (int y = 0; y < 64; y++)
        for (int x = 0; x < 64; x++) {
            if (tu_rng_below(&r, 100) >= 40)
                continue;
            const qg_rect b = tu_rect(16.0f * x, 16.0f * y, 16.0f * x + 16, 16.0f * y + 16);
            const qg_handle h = qg_insert(idx, b);
            assert_int_equal(qg_insert(oracle, b), h);
            assert_int_equal(qg_set_static(idx, h, true), QG_OK);
            assert_int_equal(qg_set_static(oracle, h, true), QG_OK);
            door = h;
        }
    enum { AGENTS = 6000 };
    qg_handle *hs = malloc((AGENTS + 1) * sizeof *hs); /* the agents and the door */
    qg_rect *bs = malloc((AGENTS + 1) * sizeof *bs);
    float *vx = malloc(2 * AGENTS * sizeof *vx);
    assert_non_null(hs);
    assert_non_null(bs);
    assert_non_null(vx);
    float *vy = vx + AGENTS;
    const int agents = g_kind == QG_BRUTE_FORCE ? 1500 : (int)tu_scaled(AGENTS);
    for (int i = 0; i < agents; i++) {
        const float x = tu_rng_range(&r, 0, 1020), y = tu_rng_range(&r, 0, 1020), s = tu_rng_range(&r, 0, 8);
        bs[i] = tu_rect(x, y, x + s, y + s);
        hs[i] = qg_insert(idx, bs[i]);
        assert_int_equal(qg_insert(oracle, bs[i]), hs[i]);
        vx[i] = tu_rng_range(&r, -2, 2);
        vy[i] = tu_rng_range(&r, -2, 2);
    }
    qg_cleanup(idx);
    for (int frame = 0; frame < 16; frame++) {
        const int32_t parts = k_workers[frame % 4];
        qg_thread_pool *pool = NULL;
        assert_int_equal(qg_thread_pool_create(parts, &pool), QG_OK);
        const qg_jobs jobs = qg_thread_pool_jobs(pool);
        for (int i = 0; i < agents; i++) {
            if (tu_rng_chance(&r, 0.02)) { /* a turn or a jump */
                vx[i] = tu_rng_range(&r, -40, 40);
                vy[i] = tu_rng_range(&r, -40, 40);
            }
            bs[i] = tu_rect(bs[i].min_x + vx[i], bs[i].min_y + vy[i], bs[i].max_x + vx[i], bs[i].max_y + vy[i]);
        }
        int32_t n = agents;
        if (frame % 5 == 3 && door >= 0) { /* the door moves with them: the serial path */
            hs[n] = door;
            bs[n] = tu_rect(16.0f * (float)frame, 1030, 16.0f * (float)frame + 16, 1046);
            n++;
        }
        assert_int_equal(qg_move_many(idx, frame % 7 == 6 ? NULL : &jobs, hs, bs, n), QG_OK);
        for (int32_t i = 0; i < n; i++)
            assert_int_equal(qg_move(oracle, hs[i], bs[i]), QG_OK);
        same_answers(idx, oracle, seed, "after qg_move_many over a level");
        if (frame % 4 != 3) {
            qg_cleanup_parallel(idx, frame % 3 ? &jobs : NULL);
            same_answers(idx, oracle, seed, "after qg_cleanup_parallel over a level");
        }
        qg_thread_pool_destroy(pool);
    }
    free(hs);
    free(bs);
    free(vx);
    qg_destroy(idx);
    qg_destroy(oracle);
}

/* Fault injection: the k-th allocation of qg_move_many fails (once, and
 * from then on); the batch then answers QG_ERR_NOMEM and no element moved.
 * With `statics`, a third of the scene is static (in the engine's layer
 * after the cleanup), and the batch moves some of them (each enters the
 * kind: cells, slots, loose boxes, links, levels made live by the far and
 * large ones) beside dynamic moves, one move at a time (index.c,
 * move_many_serial); after a refusal the index must take the batch again. */
static qg_status oom_batch_run(tu_alloc *ta, long k, uint64_t seed, bool statics)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    qg_config c = scene_config(), o = qg_default_config(QG_BRUTE_FORCE);
    c.allocator = tu_allocator(ta);
    qg_index *idx = NULL, *oracle = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    assert_int_equal(qg_create(&o, &oracle), QG_OK);
    fill_scene(idx, oracle, &r, (int)tu_scaled(600));
    const int32_t high = 2 * qg_count(idx) + 8;
    for (qg_handle h = 0; statics && h < high; h += 3)
        if (qg_get(idx, h, &(qg_rect){0}) == QG_OK) { /* (static pairs are not reported) */
            assert_int_equal(qg_set_static(idx, h, true), QG_OK);
            assert_int_equal(qg_set_static(oracle, h, true), QG_OK);
        }
    if (statics)
        qg_cleanup(idx); /* the static ones go to the layer */
    enum { MAX = 800 };
    qg_handle hs[MAX];
    qg_rect bs[MAX];
    const int32_t n = make_batch(idx, &r, hs, bs, MAX);
    for (int32_t i = 0; i < n; i += 7) /* big moves: new cells, nodes, levels */
        bs[i] = tu_rect(bs[i].min_x * 0.5f, bs[i].min_y, bs[i].min_x * 0.5f + 90, bs[i].min_y + 90);
    for (int32_t i = 5; statics && i < n; i += 53) /* larger still: a level of its own */
        bs[i] = tu_rect(bs[i].min_x, bs[i].min_y, bs[i].min_x + 2000, bs[i].min_y + 1500);
    for (int32_t i = 0, big = 0; statics && i < n && big < 24; i++) { /* static ones over many cells and leaves */
        if (hs[i] % 3 == 0 && i % 4 == 1) {
            bs[i] = tu_rect(-300 + (float)big, -300, 1400, 1400 - (float)big);
            big++;
        }
    }
    /* The parts in reverse on this thread: every failure point of the
     * parallel code, without starting threads a thousand times
     * (test_move_many runs the batches on real threads). */
    int32_t two = 2;
    const qg_jobs jobs = {2, reverse_run, &two};
    const size_t bytes = ta->bytes;
    tu_alloc_fail_in(ta, k);
    /* Every other failure point on one thread: kinds batch differently
     * without workers. */
    const qg_status st = qg_move_many(idx, k % 2 ? &jobs : NULL, hs, bs, n);
    tu_alloc_disarm(ta);
    /* A failed batch gives back all it grew: the bytes held are those before
     * the call, and memory_bytes says so. */
    if (st == QG_ERR_NOMEM && ta->bytes != bytes)
        fail_msg("seed %llu, allocation %ld (%s): QG_ERR_NOMEM, but %zu bytes became %zu", (unsigned long long)seed,
                 k, k % 2 ? "jobs" : "no jobs", bytes, ta->bytes);
    assert_int_equal(qg_get_stats(idx).memory_bytes, ta->bytes);
    assert_int_equal(qg_validate(idx), QG_OK);
    if (st == QG_OK) {
        for (int32_t i = 0; i < n; i++)
            assert_int_equal(qg_move(oracle, hs[i], bs[i]), QG_OK);
    } else if (st != QG_ERR_NOMEM) {
        fail_msg("seed %llu, allocation %ld: %s", (unsigned long long)seed, k, qg_status_name(st));
    }
    same_answers(idx, oracle, seed, st == QG_OK ? "batch done" : "batch failed");
    if (statics) {
        /* The index goes on: a frame's cleanup and the batch again. */
        qg_cleanup(idx);
        assert_int_equal(qg_move_many(idx, NULL, hs, bs, n), QG_OK);
        if (st != QG_OK)
            for (int32_t i = 0; i < n; i++)
                assert_int_equal(qg_move(oracle, hs[i], bs[i]), QG_OK);
        same_answers(idx, oracle, seed, "static batch again");
    }
    qg_destroy(idx);
    qg_destroy(oracle);
    return st;
}

static qg_status move_many_run(tu_alloc *ta, long k, void *user)
{
    return oom_batch_run(ta, k, *(const uint64_t *)user, false);
}

static qg_status static_batch_run(tu_alloc *ta, long k, void *user)
{
    return oom_batch_run(ta, k, *(const uint64_t *)user, true);
}

static void test_move_many_oom(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    uint64_t seed = tu_env_seed(0x00bad);
    printf("seed %llu\n", (unsigned long long)seed);
    tu_each_failure_point("qg_move_many", 10000, move_many_run, &seed);
}

static void test_static_batch_oom(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    uint64_t seed = tu_env_seed(0x57a71c);
    printf("seed %llu\n", (unsigned long long)seed);
    tu_each_failure_point("qg_move_many with static elements", 10000, static_batch_run, &seed);
}

static void test_thread_pool(void **state)
{
    (void)state;
    qg_thread_pool *pool = (qg_thread_pool *)&pool;
    assert_int_equal(qg_thread_pool_create(0, &pool), QG_ERR_INVALID);
    assert_null(pool);
    assert_int_equal(qg_thread_pool_create(257, &pool), QG_ERR_INVALID);
    assert_int_equal(qg_thread_pool_create(2, NULL), QG_ERR_INVALID);
    assert_true(qg_cpu_count() >= 1);
    qg_jobs j = qg_thread_pool_jobs(NULL);
    assert_int_equal(j.worker_count, 1);
    qg_thread_pool_destroy(NULL);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_default), cmocka_unit_test(test_threads_deep),
        cmocka_unit_test(test_threads_engine),  cmocka_unit_test(test_pairs_parallel),
        cmocka_unit_test(test_move_many),       cmocka_unit_test(test_move_many_engine),
        cmocka_unit_test(test_move_many_oom),   cmocka_unit_test(test_static_batch_oom),
        cmocka_unit_test(test_thread_pool),
    };
    return tu_kind_main_tests(argc, argv, "threads", &g_kind, tests);
}
