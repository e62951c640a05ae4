/* Concurrent const calls, for one kind (argv[1]): four threads run qg_query,
 * qg_query_point and qg_pairs on one index at the same time, and every answer
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
            if ((j + round + w->id) % 64 == 0) {
                if (pairs_hash(s->idx, &st) != s->want_pairs)
                    note(w, "pairs", round);
                w->bad_status += st != QG_OK;
            }
        }
    }
    return NULL;
}

static void run_threads(const qg_config *cfg, int n_elems, float size, int rounds)
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
    qg_cleanup(idx);

    enum { N_AREAS = 256 };
    qg_rect areas[N_AREAS];
    uint64_t wq[N_AREAS], wp[N_AREAS];
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
    }
    qg_status st;
    shared s;
    memset(&s, 0, sizeof s);
    s.idx = idx;
    s.areas = areas;
    s.n_areas = N_AREAS;
    s.want_query = wq;
    s.want_point = wp;
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
    run_threads(&c, (int)tu_scaled(g_kind == QG_BRUTE_FORCE ? 4000 : 20000), 8, (int)tu_scaled(3));
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
    run_threads(&c, (int)tu_scaled(5000), 3, (int)tu_scaled(4));
}

int main(int argc, char **argv)
{
    if (!tu_kind_arg(argc, argv, &g_kind))
        return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_default),
        cmocka_unit_test(test_threads_deep),
    };
    return tu_run_kind_tests("threads", g_kind, tests);
}
