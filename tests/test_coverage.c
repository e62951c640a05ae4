// SPDX-License-Identifier: MIT
/* What users rely on at the edges of the public API, for one kind
 * (argv[1]; ctest coverage_<kind>): the calls the other programs exercise
 * on their good paths, here on their refusals and corner cases, each with
 * the documented answer and "nothing changed" after a refusal.
 *
 * - visit: NULL index or callback; every reported cell a real box; static
 *   elements reported too.
 * - jobs: a qg_jobs with 0 or 257 workers, or several and no run function,
 *   is refused by qg_pairs_parallel and qg_move_many (nothing moves) and
 *   makes qg_cleanup_parallel a plain qg_cleanup; one worker and no run
 *   function is fine; users NULL gives every part NULL.
 * - batches: qg_move_many and qg_insert_many refuse n < 0, NULL arrays, a
 *   dead handle, a handle listed twice, a NaN or inverted box, and change
 *   nothing; n = 0 is a no-op.
 * - names: qg_kind_from_name takes exactly the kinds' names (not "",
 *   "QUADTREE", "quadtree ", "quad"), qg_kind_name and qg_status_name out of
 *   range.
 * - areas: NaN and inverted query areas refused, unbounded ones fine.
 * - rays and nearest: argument errors; rays from far outside the bounds
 *   (more pieces than the generic walk cuts), unbounded rays in every
 *   direction, worlds of subnormal size and element_size 0: the exact set
 *   (and entry parameters) a plain loop over qg_ray_box gives; nearest the
 *   same in those worlds.
 * - early stop: a callback that returns false stops qg_query and qg_pairs
 *   after exactly that call, also in a cell or leaf of 100 coincident
 *   boxes.
 * - qg_validate reports a damaged element array (a live box made NaN or
 *   inverted, a freed slot made live, the free list cut, looped or pointed
 *   past the end or at a live slot) with QG_ERR_INVALID, and passes again
 *   once the bytes are back: the test's allocator knows the blocks.
 * - grids (skipped for the other kinds): cell rects saturate to finite
 *   floats in +-FLT_MAX worlds of huge cells; qg_move_many and
 *   qg_pairs_parallel with boxes moving into and out of the wide list, and
 *   an index whose every box is wide (no row holds a node). */
#include "test_util.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static qg_kind g_kind = QG_BRUTE_FORCE;
static const float INF = (float)INFINITY;

static bool is_grid(void)
{
    return g_kind == QG_GRID || g_kind == QG_MULTI_GRID;
}

/* ---- an allocator that knows its blocks ---------------------------------- */

typedef struct rec_block {
    void *p;
    size_t size;
} rec_block;

typedef struct rec_alloc {
    rec_block *b;
    size_t n, cap, bytes;
} rec_alloc;

static void *rec_realloc(void *ptr, size_t old_size, size_t new_size, void *user)
{
    rec_alloc *a = user;
    size_t i = 0;
    if (ptr != NULL) {
        while (i < a->n && a->b[i].p != ptr)
            i++;
        assert_true(i < a->n);
        assert_int_equal(a->b[i].size, old_size);
    }
    if (new_size == 0) {
        free(ptr);
        a->bytes -= old_size;
        a->b[i] = a->b[--a->n];
        return NULL;
    }
    void *q = realloc(ptr, new_size);
    if (q == NULL)
        return NULL;
    if (ptr == NULL) {
        if (a->n == a->cap) {
            a->cap = a->cap ? 2 * a->cap : 64;
            a->b = realloc(a->b, a->cap * sizeof *a->b);
            assert_non_null(a->b);
        }
        i = a->n++;
    }
    a->b[i].p = q;
    a->b[i].size = new_size;
    a->bytes = a->bytes - old_size + new_size;
    return q;
}

/* The block holding boxes[h0..h0+1] as the index stores them (qg_get's
 * values, 16 bytes each, from the block's start): the element array. */
static unsigned char *find_boxes(const rec_alloc *a, const qg_rect *boxes, qg_handle h0)
{
    unsigned char *found = NULL;
    for (size_t i = 0; i < a->n; i++) {
        const size_t off = (size_t)h0 * sizeof(qg_rect);
        if (a->b[i].size < off + 2 * sizeof(qg_rect))
            continue;
        unsigned char *p = a->b[i].p;
        if (memcmp(p + off, &boxes[h0], sizeof(qg_rect)) == 0 &&
            memcmp(p + off + sizeof(qg_rect), &boxes[h0 + 1], sizeof(qg_rect)) == 0) {
            assert_null(found); /* exactly one */
            found = p;
        }
    }
    return found;
}

/* ---- helpers -------------------------------------------------------------- */

/* n boxes in [0, 1000]^2, sizes 1..9, a few coincident. */
static void fill(qg_index *idx, qg_rect *boxes, int n, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        float x = tu_rng_range(&r, 0, 990), y = tu_rng_range(&r, 0, 990), w = tu_rng_range(&r, 1, 9);
        boxes[i] = i % 17 == 3 ? tu_rect(500, 500, 504, 504) : tu_rect(x, y, x + w, y + w);
        assert_int_equal(qg_insert(idx, boxes[i]), i);
    }
}

static bool same_snapshot(const qg_index *idx, const tu_snapshot *before, int32_t probe)
{
    tu_snapshot now;
    memset(&now, 0, sizeof now);
    tu_snapshot_take(idx, probe, &now);
    char msg[256];
    bool same = tu_snapshot_equal(before, &now, msg, sizeof msg);
    if (!same)
        fprintf(stderr, "coverage %s: %s\n", qg_kind_name(g_kind), msg);
    tu_snapshot_free(&now);
    return same;
}

static long count_pairs_of(const qg_index *idx)
{
    tu_collect c;
    memset(&c, 0, sizeof c);
    assert_int_equal(qg_pairs(idx, tu_collect_pair, &c), QG_OK);
    long n = (long)c.out.n;
    tu_vec_free(&c.out);
    return n;
}

/* ---- visit ------------------------------------------------------------------ */

typedef struct visit_sum {
    long calls, bad;
} visit_sum;

static void on_visit(qg_rect r, int32_t depth, int32_t elements, void *user)
{
    visit_sum *v = user;
    v->calls++;
    if (isnan(r.min_x) || isnan(r.min_y) || isnan(r.max_x) || isnan(r.max_y) || r.min_x > r.max_x ||
        r.min_y > r.max_y || depth < 0 || elements < 0)
        v->bad++;
}

static void test_visit(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    visit_sum v = {0, 0};
    qg_visit(NULL, on_visit, &v);
    assert_int_equal(v.calls, 0);
    tu_alloc a;
    qg_index *idx = tu_open(qg_default_config(g_kind), &a);
    qg_rect boxes[200];
    fill(idx, boxes, 200, 5);
    qg_visit(idx, NULL, &v); /* nothing to call: returns */
    assert_int_equal(v.calls, 0);
    qg_visit(idx, on_visit, &v);
    assert_true(v.calls > 0);
    assert_int_equal(v.bad, 0);
    /* Static elements sit in the static layer: still visited, still real. */
    for (qg_handle h = 0; h < 200; h += 3)
        assert_int_equal(qg_set_static(idx, h, true), QG_OK);
    qg_cleanup(idx);
    visit_sum w = {0, 0};
    qg_visit(idx, on_visit, &w);
    assert_true(w.calls > 0);
    assert_int_equal(w.bad, 0);
    tu_close(idx, &a);
}

/* ---- jobs -------------------------------------------------------------------- */

static void run_inline(qg_task_fn *task, int32_t count, void *context, void *user)
{
    (void)user;
    for (int32_t i = 0; i < count; i++)
        task(i, i + 1, i, context);
}

typedef struct null_users {
    long pairs, non_null;
} null_users;

static null_users g_null_users;

static bool count_null_user(qg_handle a, qg_handle b, void *user)
{
    (void)a, (void)b;
    g_null_users.pairs++;
    g_null_users.non_null += user != NULL;
    return true;
}

static void test_bad_jobs(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    tu_alloc a;
    qg_index *idx = tu_open(qg_default_config(g_kind), &a);
    qg_rect boxes[300];
    fill(idx, boxes, 300, 7);
    const long want = count_pairs_of(idx);
    tu_snapshot before;
    memset(&before, 0, sizeof before);
    tu_snapshot_take(idx, 300, &before);
    const qg_jobs bad[] = {
        {0, run_inline, NULL}, {-1, run_inline, NULL}, {257, run_inline, NULL}, {2, NULL, NULL}, {INT32_MAX, NULL, NULL},
    };
    qg_handle hs[2] = {0, 1};
    qg_rect to[2] = {tu_rect(1, 1, 2, 2), tu_rect(3, 3, 4, 4)};
    tu_collect c;
    memset(&c, 0, sizeof c);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(qg_pairs_parallel(idx, &bad[i], tu_collect_pair, NULL, NULL), QG_ERR_INVALID);
        assert_int_equal(qg_move_many(idx, &bad[i], hs, to, 2), QG_ERR_INVALID);
        const long grows = a.grow_requests;
        qg_cleanup_parallel(idx, &bad[i]); /* a plain qg_cleanup */
        assert_int_equal(a.grow_requests, grows);
        assert_true(same_snapshot(idx, &before, 300));
    }
    assert_int_equal(c.calls, 0);
    qg_cleanup_parallel(NULL, NULL);
    assert_int_equal(qg_pairs_parallel(NULL, NULL, tu_collect_pair, NULL, NULL), QG_ERR_INVALID);
    assert_int_equal(qg_pairs_parallel(idx, NULL, NULL, NULL, NULL), QG_ERR_INVALID);
    /* One worker needs no run function; users NULL: every part gets NULL. */
    const qg_jobs one = {1, NULL, NULL};
    memset(&g_null_users, 0, sizeof g_null_users);
    qg_query_stats st = {-1, -1};
    assert_int_equal(qg_pairs_parallel(idx, &one, count_null_user, NULL, &st), QG_OK);
    assert_int_equal(g_null_users.pairs, want);
    assert_int_equal(g_null_users.non_null, 0);
    assert_true(st.elements_tested >= want);
    const qg_jobs three = {3, run_inline, NULL};
    memset(&g_null_users, 0, sizeof g_null_users);
    assert_int_equal(qg_pairs_parallel(idx, &three, count_null_user, NULL, NULL), QG_OK);
    assert_int_equal(g_null_users.pairs, want);
    assert_int_equal(g_null_users.non_null, 0);
    assert_int_equal(qg_move_many(idx, &one, hs, to, 2), QG_OK);
    qg_rect got;
    assert_int_equal(qg_get(idx, 1, &got), QG_OK);
    assert_true(tu_rect_same(got, to[1]));
    qg_cleanup_parallel(idx, &three);
    tu_snapshot_free(&before);
    tu_close(idx, &a);
}

/* ---- batches ------------------------------------------------------------------ */

/* Batches large enough that qg_move_many checks them in parts (one per
 * worker, each with a bitmap of its own): the first bad move in batch order
 * decides the answer wherever the parts split, a handle listed twice is
 * found within a part and across two, and a good batch moves everything,
 * the same as one worker's. */
static void test_batch_parts(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    enum { N = 20000 }; /* past QG_CHECK_SERIAL (16,384), so the checks split */
    tu_alloc a;
    qg_index *idx = tu_open(qg_default_config(g_kind), &a);
    qg_rect *boxes = malloc(sizeof(qg_rect) * N), *to = malloc(sizeof(qg_rect) * N);
    qg_handle *hs = malloc(sizeof(qg_handle) * N);
    assert_non_null(boxes);
    assert_non_null(to);
    assert_non_null(hs);
    for (int i = 0; i < N; i++) {
        const float x = (float)(i % 200) * 5.0f, y = (float)(i / 200) * 5.0f;
        boxes[i] = tu_rect(x, y, x + 3, y + 3);
        to[i] = tu_rect(x + 1, y + 1, x + 4, y + 4);
        hs[i] = N - 1 - i; /* handles in reverse: parts hold handles from all over */
    }
    assert_int_equal(qg_insert_many(idx, boxes, N, hs), QG_OK);
    assert_int_equal(hs[0], 0);
    for (int i = 0; i < N; i++)
        hs[i] = N - 1 - i;
    tu_snapshot before;
    memset(&before, 0, sizeof before);
    tu_snapshot_take(idx, 100, &before);
    const qg_jobs jobs[] = {{2, run_inline, NULL}, {3, run_inline, NULL}, {8, run_inline, NULL}};
    for (size_t j = 0; j < sizeof jobs / sizeof jobs[0]; j++) {
        const qg_jobs *J = &jobs[j];
        /* Twice within a part, then across the first and last parts. */
        hs[11] = hs[10];
        assert_int_equal(qg_move_many(idx, J, hs, to, N), QG_ERR_INVALID);
        hs[11] = N - 1 - 11;
        hs[N - 2] = hs[1];
        assert_int_equal(qg_move_many(idx, J, hs, to, N), QG_ERR_INVALID);
        hs[N - 2] = N - 1 - (N - 2);
        /* A bad box early and a dead handle late: the box decides; and the
         * other way round. */
        to[100].max_x = NAN;
        hs[N - 5] = N + 7;
        assert_int_equal(qg_move_many(idx, J, hs, to, N), QG_ERR_INVALID);
        to[100] = tu_rect(1, 1, 2, 2);
        to[N - 5].min_y = INF;
        hs[N - 5] = N - 1 - (N - 5);
        hs[200] = -3;
        assert_int_equal(qg_move_many(idx, J, hs, to, N), QG_ERR_HANDLE);
        hs[200] = N - 1 - 200;
        to[N - 5] = tu_rect(2, 2, 3, 3);
        assert_true(same_snapshot(idx, &before, 100));
    }
    /* A good batch on three workers: every box moved. */
    assert_int_equal(qg_move_many(idx, &jobs[1], hs, to, N), QG_OK);
    for (int i = 0; i < N; i++) {
        qg_rect b;
        assert_int_equal(qg_get(idx, hs[i], &b), QG_OK);
        assert_true(b.min_x == to[i].min_x && b.max_y == to[i].max_y);
    }
    tu_snapshot_free(&before);
    tu_close(idx, &a);
    free(boxes);
    free(to);
    free(hs);
}

static void test_batch_args(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    tu_alloc a;
    qg_index *idx = tu_open(qg_default_config(g_kind), &a);
    qg_rect boxes[100];
    fill(idx, boxes, 100, 11);
    assert_int_equal(qg_remove(idx, 40), QG_OK);
    tu_snapshot before;
    memset(&before, 0, sizeof before);
    tu_snapshot_take(idx, 100, &before);
    qg_handle hs[3] = {1, 2, 3};
    qg_rect to[3] = {tu_rect(1, 1, 2, 2), tu_rect(3, 3, 4, 4), tu_rect(5, 5, 6, 6)};
    qg_handle out[3] = {-7, -7, -7};

    assert_int_equal(qg_move_many(NULL, NULL, hs, to, 3), QG_ERR_INVALID);
    assert_int_equal(qg_move_many(idx, NULL, hs, to, -1), QG_ERR_INVALID);
    assert_int_equal(qg_move_many(idx, NULL, NULL, to, 3), QG_ERR_INVALID);
    assert_int_equal(qg_move_many(idx, NULL, hs, NULL, 3), QG_ERR_INVALID);
    assert_int_equal(qg_move_many(idx, NULL, NULL, NULL, 0), QG_OK);
    hs[2] = 40; /* removed */
    assert_int_equal(qg_move_many(idx, NULL, hs, to, 3), QG_ERR_HANDLE);
    hs[2] = 1000;
    assert_int_equal(qg_move_many(idx, NULL, hs, to, 3), QG_ERR_HANDLE);
    hs[2] = -1;
    assert_int_equal(qg_move_many(idx, NULL, hs, to, 3), QG_ERR_HANDLE);
    hs[2] = 1; /* twice */
    assert_int_equal(qg_move_many(idx, NULL, hs, to, 3), QG_ERR_INVALID);
    hs[2] = 3;
    to[1].max_y = NAN;
    assert_int_equal(qg_move_many(idx, NULL, hs, to, 3), QG_ERR_INVALID);
    to[1] = tu_rect(3, 3, 2, 4); /* min_x > max_x */
    assert_int_equal(qg_move_many(idx, NULL, hs, to, 3), QG_ERR_INVALID);
    to[1] = tu_rect(3, INF, 4, INF);
    assert_int_equal(qg_move_many(idx, NULL, hs, to, 3), QG_ERR_INVALID);
    assert_true(same_snapshot(idx, &before, 100));

    assert_int_equal(qg_insert_many(NULL, to, 3, out), QG_ERR_INVALID);
    assert_int_equal(qg_insert_many(idx, to, -1, out), QG_ERR_INVALID);
    assert_int_equal(qg_insert_many(idx, NULL, 3, out), QG_ERR_INVALID);
    assert_int_equal(qg_insert_many(idx, to, 3, NULL), QG_ERR_INVALID);
    assert_int_equal(qg_insert_many(idx, NULL, 0, NULL), QG_OK);
    assert_int_equal(qg_insert_many(idx, to, 3, out), QG_ERR_INVALID); /* to[1] is bad */
    assert_true(same_snapshot(idx, &before, 100));
    /* Nothing was taken: the next insert gets the freed handle, as before. */
    to[1] = tu_rect(3, 3, 4, 4);
    assert_int_equal(qg_insert_many(idx, to, 3, out), QG_OK);
    assert_int_equal(out[0], 40);
    assert_int_equal(out[1], 100);
    assert_int_equal(out[2], 101);
    tu_snapshot_free(&before);
    tu_close(idx, &a);
}

/* ---- names --------------------------------------------------------------------- */

static void test_names(void **state)
{
    (void)state;
    const char *const not_kinds[] = {"", "QUADTREE", "quadtree ", " quadtree", "quad", "grid2", "multi_grid\n",
                                     "brute-force", "point_gri", "loose_gridx"};
    for (size_t i = 0; i < sizeof not_kinds / sizeof *not_kinds; i++) {
        qg_kind k = (qg_kind)12345;
        assert_int_equal(qg_kind_from_name(not_kinds[i], &k), QG_ERR_INVALID);
        assert_int_equal((int)k, 12345); /* untouched */
    }
    for (int k = 0; k < QG_KIND_COUNT; k++) {
        qg_kind back = QG_KIND_COUNT;
        assert_int_equal(qg_kind_from_name(qg_kind_name((qg_kind)k), &back), QG_OK);
        assert_int_equal((int)back, k);
    }
    assert_null(qg_kind_name((qg_kind)-1));
    assert_null(qg_kind_name((qg_kind)INT_MAX));
    assert_false(qg_kind_available((qg_kind)INT_MIN));
    assert_string_equal(qg_status_name((qg_status)1), "QG_ERR_UNKNOWN");
    assert_string_equal(qg_status_name((qg_status)-99), "QG_ERR_UNKNOWN");
    assert_string_equal(qg_status_name(QG_ERR_CAPACITY), "QG_ERR_CAPACITY");
}

/* ---- query areas ------------------------------------------------------------------ */

static void test_areas(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    tu_alloc a;
    qg_index *idx = tu_open(qg_default_config(g_kind), &a);
    qg_rect boxes[100];
    fill(idx, boxes, 100, 13);
    tu_collect c;
    memset(&c, 0, sizeof c);
    const qg_rect bad[] = {{0, 0, 10, NAN}, {0, NAN, 10, 10}, {NAN, 0, 10, 10}, {0, 0, NAN, 10},
                           {0, 10, 10, 9},  {10, 0, 9, 10},   {INF, 0, -INF, 10}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(qg_query(idx, bad[i], tu_collect_query, &c), QG_ERR_INVALID);
        assert_int_equal(qg_query_with_stats(idx, bad[i], tu_collect_query, &c, NULL), QG_ERR_INVALID);
    }
    assert_int_equal(qg_query_point(idx, NAN, 1, tu_collect_query, &c), QG_ERR_INVALID);
    assert_int_equal(qg_query_point(idx, 1, NAN, tu_collect_query, &c), QG_ERR_INVALID);
    assert_int_equal(c.calls, 0);
    /* Unbounded on one side: everything to the right of x = 500. */
    assert_int_equal(qg_query(idx, tu_rect(500, -INF, INF, INF), tu_collect_query, &c), QG_OK);
    long want = 0;
    for (int i = 0; i < 100; i++)
        want += boxes[i].max_x >= 500;
    assert_int_equal((long)c.out.n, want);
    tu_vec_free(&c.out);
    tu_close(idx, &a);
}

/* ---- rays and nearest --------------------------------------------------------------- */

typedef struct ray_hits {
    tu_vec h;
    float t[4096];
    long n;
} ray_hits;

static float on_ray(qg_handle h, float t, void *user)
{
    ray_hits *r = user;
    tu_vec_push(&r->h, h);
    if (r->n < 4096)
        r->t[r->n] = t;
    r->n++;
    return INFINITY; /* see every hit */
}

static float never_called(qg_handle h, float t, void *user)
{
    (void)h, (void)t;
    ++*(long *)user;
    return -1;
}

/* The index's hits for a ray against a plain loop over qg_ray_box. */
static void check_ray(const qg_index *idx, const qg_rect *boxes, int n, float ox, float oy, float dx, float dy,
                      float max_t)
{
    ray_hits *r = calloc(1, sizeof *r);
    assert_non_null(r);
    assert_int_equal(qg_raycast(idx, ox, oy, dx, dy, max_t, on_ray, r), QG_OK);
    /* Each hit at the entry parameter qg_ray_box gives it. */
    for (long i = 0; i < r->n && i < 4096; i++) {
        float t = -1;
        if (!qg_ray_box(boxes[r->h.v[i]], ox, oy, dx, dy, max_t, &t) || t != r->t[i])
            fail_msg("coverage %s: ray (%g, %g) + t (%g, %g): handle %lld at t %g, qg_ray_box says %g",
                     qg_kind_name(g_kind), (double)ox, (double)oy, (double)dx, (double)dy, (long long)r->h.v[i],
                     (double)r->t[i], (double)t);
    }
    tu_vec want = {0};
    for (int i = 0; i < n; i++) {
        float t;
        if (qg_ray_box(boxes[i], ox, oy, dx, dy, max_t, &t))
            tu_vec_push(&want, i);
    }
    tu_vec_sort(&r->h);
    int64_t dup;
    if (tu_vec_has_dup(&r->h, &dup) || tu_vec_first_diff(&r->h, &want) >= 0)
        fail_msg("coverage %s: ray (%g, %g) + t (%g, %g), t <= %g: %zu hits, a plain loop %zu",
                 qg_kind_name(g_kind), (double)ox, (double)oy, (double)dx, (double)dy, (double)max_t, r->h.n,
                 want.n);
    tu_vec_free(&want);
    tu_vec_free(&r->h);
    free(r);
}

static void test_rays(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    long calls = 0;
    tu_alloc a;
    qg_config c = qg_default_config(g_kind);
    c.element_size = 1;
    qg_index *idx = tu_open(c, &a);
    enum { N = 400 };
    qg_rect boxes[N];
    fill(idx, boxes, N - 8, 17);
    /* A few far outside the bounds, on the rays' way. */
    const qg_rect far[8] = {{-1e6f, 499, -1e6f + 5, 503}, {-5e6f, 500, -5e6f + 1, 501}, {2e6f, 500, 2e6f + 9, 501},
                            {500, -3e6f, 501, -3e6f + 2}, {500, 4e6f, 502, 4e6f + 1},  {-1e7f, -1e7f, -1e7f + 1, -1e7f + 1},
                            {-2e5f, -2e5f, -2e5f, -2e5f}, {1e7f, 1e7f, 1e7f + 4, 1e7f + 4}};
    for (int i = 0; i < 8; i++) {
        boxes[N - 8 + i] = far[i];
        assert_int_equal(qg_insert(idx, far[i]), N - 8 + i);
    }
    qg_cleanup(idx);
    /* Argument errors. */
    assert_int_equal(qg_raycast(idx, NAN, 0, 1, 0, 10, never_called, &calls), QG_ERR_INVALID);
    assert_int_equal(qg_raycast(idx, 0, INF, 1, 0, 10, never_called, &calls), QG_ERR_INVALID);
    assert_int_equal(qg_raycast(idx, 0, 0, INF, 0, 10, never_called, &calls), QG_ERR_INVALID);
    assert_int_equal(qg_raycast(idx, 0, 0, 1, NAN, 10, never_called, &calls), QG_ERR_INVALID);
    assert_int_equal(qg_raycast(idx, 0, 0, 1, 0, NAN, never_called, &calls), QG_ERR_INVALID);
    assert_int_equal(qg_raycast(idx, 0, 0, 1, 0, -1, never_called, &calls), QG_ERR_INVALID);
    assert_int_equal(qg_raycast(idx, 0, 0, 1, 0, 10, NULL, NULL), QG_ERR_INVALID);
    assert_int_equal(calls, 0);
    /* From far outside (the generic walk's pieces capped), unbounded, in
     * every direction, and rays of length zero. */
    const float rays[][5] = {
        {-2e7f, 501, 1, 0, INF},    {-2e7f, 501, 1, 0, 3e7f},  {2e7f, 500.5f, -1, 0, INF}, {500.5f, -2e7f, 0, 1, INF},
        {501, 2e7f, 0, -1, INF},    {700, 700, -1, -1, INF},   {300, 600, 1, -1, INF},     {600, 300, -1, 1, INF},
        {500, 500, 0.3f, 0.7f, 50}, {502, 502, 0, 0, 10},      {502, 502, 1, 0, 0},        {-3e7f, -3e7f, 1, 1, INF},
        {0, 0, -1, -1, 1e8f},       {1e7f + 2, 1e7f + 2, 0, 0, INF},
    };
    for (size_t i = 0; i < sizeof rays / sizeof *rays; i++)
        check_ray(idx, boxes, N, rays[i][0], rays[i][1], rays[i][2], rays[i][3], rays[i][4]);
    tu_close(idx, &a);

    /* A world of subnormal size with element_size 0: the generic walk's
     * typical size (a 64th of the bounds) underflows to 0. */
    const float t = FLT_TRUE_MIN;
    c = qg_default_config(g_kind);
    c.bounds = tu_rect(0, 0, 32 * t, 32 * t);
    idx = tu_open(c, &a);
    qg_rect tiny[60];
    for (int i = 0; i < 60; i++) {
        float x = (float)(i % 8) * 8 * t, y = (float)(i / 8) * 8 * t;
        tiny[i] = tu_rect(x, y, x + 3 * t, y + 3 * t);
        assert_int_equal(qg_insert(idx, tiny[i]), i);
    }
    check_ray(idx, tiny, 60, 0, t, 1, 0, INF);
    check_ray(idx, tiny, 60, 64 * t, 64 * t, -1, -1, INF);
    check_ray(idx, tiny, 60, -1, 9 * t, 1, 0, 2);
    /* Nearest there too, against a plain loop of distances. */
    qg_handle hs[5];
    float d2[5];
    int32_t found = -1;
    assert_int_equal(qg_nearest(idx, 20 * t, 20 * t, 5, INF, hs, d2, &found), QG_OK);
    assert_int_equal(found, 5);
    for (int k = 0; k < 5; k++) {
        int closer = 0;
        for (int i = 0; i < 60; i++)
            closer += qg_point_box_distance2(tiny[i], 20 * t, 20 * t) < d2[k];
        assert_true(closer <= k);
        assert_true(d2[k] == qg_point_box_distance2(tiny[hs[k]], 20 * t, 20 * t));
    }
    tu_close(idx, &a);
}

static void test_nearest_args(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    tu_alloc a;
    qg_index *idx = tu_open(qg_default_config(g_kind), &a);
    qg_rect boxes[50];
    fill(idx, boxes, 50, 19);
    qg_handle hs[60];
    float d2[60];
    int32_t found = -1;
    assert_int_equal(qg_nearest(idx, NAN, 0, 1, INF, hs, d2, &found), QG_ERR_INVALID);
    assert_int_equal(found, 0);
    found = -1;
    assert_int_equal(qg_nearest(idx, 0, -INF, 1, INF, hs, d2, &found), QG_ERR_INVALID);
    assert_int_equal(found, 0);
    assert_int_equal(qg_nearest(idx, 0, 0, -1, INF, hs, d2, &found), QG_ERR_INVALID);
    assert_int_equal(qg_nearest(idx, 0, 0, 1, NAN, hs, d2, &found), QG_ERR_INVALID);
    assert_int_equal(qg_nearest(idx, 0, 0, 1, -1, hs, d2, &found), QG_ERR_INVALID);
    assert_int_equal(qg_nearest(idx, 0, 0, 1, INF, NULL, d2, &found), QG_ERR_INVALID);
    assert_int_equal(qg_nearest(idx, 0, 0, 1, INF, hs, d2, NULL), QG_ERR_INVALID);
    assert_int_equal(qg_nearest(idx, 0, 0, 0, INF, NULL, NULL, &found), QG_OK);
    assert_int_equal(found, 0);
    /* More asked than held: all of them, in (distance2, handle) order. */
    assert_int_equal(qg_nearest(idx, 250, 750, 60, INF, hs, NULL, &found), QG_OK);
    assert_int_equal(found, 50);
    for (int k = 1; k < 50; k++) {
        float p = qg_point_box_distance2(boxes[hs[k - 1]], 250, 750), q = qg_point_box_distance2(boxes[hs[k]], 250, 750);
        assert_true(p < q || (p == q && hs[k - 1] < hs[k]));
    }
    /* Nothing within a distance of 0 of a point in empty space. */
    assert_int_equal(qg_nearest(idx, -500, -500, 3, 0, hs, d2, &found), QG_OK);
    assert_int_equal(found, 0);
    tu_close(idx, &a);
}

/* ---- early stop ------------------------------------------------------------------------ */

static void test_early_stop(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    tu_alloc a;
    qg_index *idx = tu_open(qg_default_config(g_kind), &a);
    /* 100 coincident boxes (one cell, one leaf) and 100 spread ones. */
    for (int i = 0; i < 200; i++) {
        float x = (float)(i % 10) * 90, y = (float)(i / 10) * 45;
        qg_rect b = i % 2 ? tu_rect(300, 300, 303, 303) : tu_rect(x, y, x + 50, y + 30);
        assert_int_equal(qg_insert(idx, b), i);
    }
    qg_cleanup(idx);
    const long total = count_pairs_of(idx);
    assert_int_equal(total, 100 * 99 / 2); /* the pile's; the spread boxes touch nothing */
    const long stops[] = {1, 2, 63, 64, 65, 500, 4949, 4950, 4951};
    for (size_t i = 0; i < sizeof stops / sizeof *stops; i++) {
        tu_collect c;
        memset(&c, 0, sizeof c);
        tu_collect_reset(&c, stops[i]);
        assert_int_equal(qg_pairs(idx, tu_collect_pair, &c), QG_OK);
        assert_int_equal(c.calls, stops[i] < total ? stops[i] : total);
        tu_collect_reset(&c, stops[i] < 60 ? stops[i] : 60);
        assert_int_equal(qg_query(idx, tu_rect(299, 299, 304, 304), tu_collect_query, &c), QG_OK);
        assert_int_equal(c.calls, stops[i] < 60 ? stops[i] : 60);
        tu_vec_free(&c.out);
    }
    tu_close(idx, &a);
}

/* ---- qg_validate on damaged memory --------------------------------------------------------- */

static void damage_and_check(qg_index *idx, unsigned char *p, size_t off, const void *bytes, size_t n,
                             const char *what)
{
    unsigned char saved[16];
    assert_true(n <= sizeof saved);
    memcpy(saved, p + off, n);
    memcpy(p + off, bytes, n);
    if (qg_validate(idx) != QG_ERR_INVALID)
        fail_msg("coverage %s: qg_validate missed %s", qg_kind_name(g_kind), what);
    memcpy(p + off, saved, n);
    assert_int_equal(qg_validate(idx), QG_OK);
}

static void test_validate_damage(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    rec_alloc ra = {0};
    qg_config c = qg_default_config(g_kind);
    c.allocator = (qg_allocator){rec_realloc, &ra};
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    enum { N = 64 };
    qg_rect boxes[N];
    for (int i = 0; i < N; i++) {
        boxes[i] = tu_rect(10.25f + (float)i * 13, 20.5f + (float)i * 7, 14.75f + (float)i * 13, 23.5f + (float)i * 7);
        assert_int_equal(qg_insert(idx, boxes[i]), i);
    }
    /* Handles 50, 20 and 30 freed: the free list is 30 -> 20 -> 50. */
    assert_int_equal(qg_remove(idx, 50), QG_OK);
    assert_int_equal(qg_remove(idx, 20), QG_OK);
    assert_int_equal(qg_remove(idx, 30), QG_OK);
    qg_cleanup(idx);
    assert_int_equal(qg_validate(idx), QG_OK);
    unsigned char *arr = find_boxes(&ra, boxes, 7);
    assert_non_null(arr);
    const size_t R = sizeof(qg_rect);
    const float nan = NAN, big = 1e9f, zero = 0;
    damage_and_check(idx, arr, 7 * R + offsetof(qg_rect, min_x), &nan, sizeof nan, "a live box made NaN");
    damage_and_check(idx, arr, 9 * R + offsetof(qg_rect, min_y), &big, sizeof big, "a live box inverted");
    damage_and_check(idx, arr, 30 * R + offsetof(qg_rect, min_x), &zero, sizeof zero, "a freed slot made live");
    /* The free list: a freed slot's next handle rides in its min_y. */
    const int32_t past = N + 5, live = 3, self = 20, end = -1;
    damage_and_check(idx, arr, 30 * R + offsetof(qg_rect, min_y), &past, sizeof past, "a free link past the end");
    damage_and_check(idx, arr, 30 * R + offsetof(qg_rect, min_y), &live, sizeof live, "a free link to a live slot");
    damage_and_check(idx, arr, 20 * R + offsetof(qg_rect, min_y), &self, sizeof self, "a free list in a loop");
    damage_and_check(idx, arr, 30 * R + offsetof(qg_rect, min_y), &end, sizeof end, "a free list cut short");
    /* Still the same index. */
    qg_rect got;
    assert_int_equal(qg_get(idx, 7, &got), QG_OK);
    assert_true(tu_rect_same(got, boxes[7]));
    assert_int_equal(qg_insert(idx, tu_rect(0, 0, 1, 1)), 30);
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
    assert_int_equal(ra.bytes, 0);
    assert_int_equal(ra.n, 0);
    free(ra.b);
}

/* ---- grids ------------------------------------------------------------------------------------ */

/* Huge cells in a +-FLT_MAX world: the cells' rects past +-FLT_MAX are
 * drawn saturated, finite. */
static void test_grid_saturated_cells(void **state)
{
    (void)state;
    if (!is_grid()) {
        skip();
        return;
    }
    tu_alloc a;
    qg_config c = qg_default_config(g_kind);
    c.bounds = tu_rect(-FLT_MAX, -FLT_MAX, FLT_MAX, FLT_MAX);
    c.cell_size = 1e38f;
    qg_index *idx = tu_open(c, &a);
    const qg_rect b[] = {{-FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX}, {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX},
                         {-3e38f, 3e38f, -2.9e38f, 3.1e38f}, {0, 0, 1, 1}};
    for (int i = 0; i < 4; i++)
        assert_int_equal(qg_insert(idx, b[i]), i);
    visit_sum v = {0, 0};
    qg_visit(idx, on_visit, &v);
    assert_true(v.calls >= 4);
    assert_int_equal(v.bad, 0);
    assert_int_equal(count_pairs_of(idx), 0);
    tu_close(idx, &a);
}

/* Batch moves into and out of the wide list (a box over more than 64 x 64
 * cells), the parallel pair search with wide boxes, and an index whose
 * every box is wide (no row holds a node): the same answers as the serial
 * calls and the brute-force kind. */
static void test_grid_wide_batches(void **state)
{
    (void)state;
    if (!is_grid()) {
        skip();
        return;
    }
    tu_alloc a, ab;
    qg_config c = qg_default_config(g_kind);
    c.cell_size = 4; /* 256 x 256 cells of 4 in [0, 1024]^2 */
    qg_index *idx = tu_open(c, &a);
    qg_config cb = qg_default_config(QG_BRUTE_FORCE);
    qg_index *ref = tu_open(cb, &ab);
    enum { N = 120 };
    qg_rect boxes[N];
    qg_handle hs[N];
    tu_rng r;
    tu_rng_seed(&r, 23);
    for (int i = 0; i < N; i++) {
        float x = tu_rng_range(&r, 0, 1000), y = tu_rng_range(&r, 0, 1000);
        float w = i % 4 == 0 ? 400 : 6; /* a quarter wide (100 x 100 cells) */
        boxes[i] = tu_rect(x, y, x + w, y + w);
        hs[i] = i;
        assert_int_equal(qg_insert(idx, boxes[i]), i);
        assert_int_equal(qg_insert(ref, boxes[i]), i);
    }
    const qg_jobs three = {3, run_inline, NULL};
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < N; i++) {
            float x = tu_rng_range(&r, -200, 1100), y = tu_rng_range(&r, -200, 1100);
            /* Wide ones turn small, small ones wide, some stay. */
            float w = tu_rng_chance(&r, 0.3) ? tu_rng_range(&r, 300, 3000) : tu_rng_range(&r, 0, 8);
            if (round == 5)
                w = 5000; /* every box wide at the end */
            boxes[i] = tu_rect(x, y, x + w, y + w * 0.5f + (round == 5 ? 5000 : 0));
        }
        assert_int_equal(qg_move_many(idx, &three, hs, boxes, N), QG_OK);
        assert_int_equal(qg_move_many(ref, NULL, hs, boxes, N), QG_OK);
        qg_cleanup_parallel(idx, &three);
        assert_int_equal(qg_validate(idx), QG_OK);
        tu_snapshot want;
        memset(&want, 0, sizeof want);
        tu_snapshot_take(ref, N, &want);
        assert_true(same_snapshot(idx, &want, N));
        tu_snapshot_free(&want);
        void *users[3] = {NULL, NULL, NULL};
        memset(&g_null_users, 0, sizeof g_null_users);
        assert_int_equal(qg_pairs_parallel(idx, &three, count_null_user, users, NULL), QG_OK);
        assert_int_equal(g_null_users.pairs, count_pairs_of(ref));
    }
    tu_close(ref, &ab);
    tu_close(idx, &a);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_visit),                cmocka_unit_test(test_bad_jobs),
        cmocka_unit_test(test_batch_args),           cmocka_unit_test(test_batch_parts),
        cmocka_unit_test(test_names),                cmocka_unit_test(test_areas),
        cmocka_unit_test(test_rays),                 cmocka_unit_test(test_nearest_args),
        cmocka_unit_test(test_early_stop),           cmocka_unit_test(test_validate_damage),
        cmocka_unit_test(test_grid_saturated_cells), cmocka_unit_test(test_grid_wide_batches),
    };
    return tu_kind_main_tests(argc, argv, "coverage", &g_kind, tests);
}
