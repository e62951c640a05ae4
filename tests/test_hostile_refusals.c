// SPDX-License-Identifier: MIT
/* Refusals that must leave no trace, and parallel calls whose result must not
 * depend on timing, for one kind (argv[1]).
 *
 * - part_order: two indexes given the same calls, the parallel ones
 *   (qg_move_many, qg_pairs_parallel, qg_cleanup_parallel) on two 2-worker
 *   job systems written here that run the parts on this thread, first to
 *   last and last to first; a third on a real 2-thread pool. After every
 *   step all three give the same pairs in the same order (qg_pairs and each
 *   part of qg_pairs_parallel), the same query answers in the same order,
 *   the same stats, and the same handles to inserts.
 * - batch_oom: qg_move_many with its k-th allocation refused, for every k,
 *   without jobs and with both job systems: QG_ERR_NOMEM leaves the bytes
 *   held and memory_bytes exactly as before and the answers unchanged, and
 *   the batch taken again leaves the index the same, pair order included, as
 *   one that never saw the refusal. Scenes of 73 boxes (the quadtree's
 *   block pool grown by the moves before the refused one) and of 600.
 * - insert_many_retry: a refused qg_insert_many (its k-th allocation, for
 *   several k), then the same call again: the index is the same (stats,
 *   learned sizes, re-tunes, pair order) as one that never saw the refusal,
 *   at sizes where learning re-tunes (a few thousand boxes; 200,000 for the
 *   point grid). Also refused qg_move_many, qg_move and qg_insert calls with
 *   a re-tune pending.
 * - insert_many_handles: on every refusal of qg_insert_many (a bad box,
 *   QG_ERR_CAPACITY aside, an allocation refused at each point) every entry
 *   of handles[] is -1.
 * - pending_batch: qg_move_many with a re-tune pending, every allocation
 *   refused in turn: refused, no trace (bytes, re-tunes, answers); through,
 *   the re-tune ran after the batch, from the boxes it left; answers
 *   against brute force.
 *
 * Seeds are fixed (QG_TEST_SEED overrides) and printed. */
#include "test_util.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static qg_kind g_kind = QG_BRUTE_FORCE;

/* ---- job systems that differ only in the order the parts run ----------- */

static void forward_run(qg_task_fn *task, int32_t count, void *context, void *user)
{
    const int32_t workers = *(const int32_t *)user;
    for (int32_t i = 0; i < count; i++)
        task(i, i + 1, i % workers, context);
}

static void reverse_run(qg_task_fn *task, int32_t count, void *context, void *user)
{
    const int32_t workers = *(const int32_t *)user;
    for (int32_t i = count; i-- > 0;)
        task(i, i + 1, i % workers, context);
}

static int32_t g_two = 2;
static const qg_jobs k_forward = {2, forward_run, &g_two};
static const qg_jobs k_reverse = {2, reverse_run, &g_two};

/* ---- what an index answers, in order ----------------------------------- */

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* An answer list: `hash` follows its order, `sum` only its contents. */
typedef struct seq {
    uint64_t hash, sum;
    int64_t n;
} seq;

/* What two fingerprints must share: always the answer sets and the learned
 * stats; with SAME_ORDER every list's order, with SAME_MEMORY memory_bytes. */
enum { SAME_ORDER = 1, SAME_MEMORY = 2, SAME_STATS = 4, SAME_ALL = 7 };

static bool seq_differs(const seq *a, const seq *b, int flags)
{
    return a->n != b->n || a->sum != b->sum || ((flags & SAME_ORDER) && a->hash != b->hash);
}

static bool seq_pair(qg_handle a, qg_handle b, void *user)
{
    seq *s = user;
    const uint64_t v = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    s->hash = mix(s->hash ^ v);
    s->sum += mix(v);
    s->n++;
    return true;
}

static bool seq_query(qg_handle h, void *user)
{
    seq *s = user;
    s->hash = mix(s->hash ^ (uint32_t)h);
    s->sum += mix((uint32_t)h);
    s->n++;
    return true;
}

/* An ordered fingerprint: the pairs in qg_pairs' order, each part's pairs of
 * a 2-part qg_pairs_parallel in order, queries' answers in order, nearest,
 * and every qg_get_stats field. */
typedef struct print {
    seq pairs, parts[2], query[6];
    qg_handle near[8];
    int32_t found;
    qg_stats stats;
} print;

static void take_print(const qg_index *idx, print *p)
{
    memset(p, 0, sizeof *p);
    assert_int_equal(qg_pairs(idx, seq_pair, &p->pairs), QG_OK);
    void *users[2] = {&p->parts[0], &p->parts[1]};
    assert_int_equal(qg_pairs_parallel(idx, &k_forward, seq_pair, users, NULL), QG_OK);
    static const qg_rect areas[6] = {{-1e30f, -1e30f, 1e30f, 1e30f}, {0, 0, 300, 300},     {500, 500, 520, 900},
                                     {-200, 400, 1300, 410},         {700, -50, 1100, 200}, {100, 100, 100, 100}};
    for (int i = 0; i < 6; i++)
        assert_int_equal(qg_query(idx, areas[i], seq_query, &p->query[i]), QG_OK);
    assert_int_equal(qg_nearest(idx, 512, 512, 8, INFINITY, p->near, NULL, &p->found), QG_OK);
    p->stats = qg_get_stats(idx);
}

/* The first difference between two fingerprints, or NULL. */
static const char *print_diff(const print *a, const print *b, int flags)
{
    static char msg[200];
    if (seq_differs(&a->pairs, &b->pairs, flags)) {
        snprintf(msg, sizeof msg, "qg_pairs: %lld pairs vs %lld, %s order", (long long)a->pairs.n,
                 (long long)b->pairs.n, a->pairs.n == b->pairs.n ? "another" : "and");
        return msg;
    }
    for (int p = 0; p < 2; p++)
        if (seq_differs(&a->parts[p], &b->parts[p], flags)) {
            snprintf(msg, sizeof msg, "qg_pairs_parallel part %d: %lld pairs vs %lld", p, (long long)a->parts[p].n,
                     (long long)b->parts[p].n);
            return msg;
        }
    for (int q = 0; q < 6; q++)
        if (seq_differs(&a->query[q], &b->query[q], flags)) {
            snprintf(msg, sizeof msg, "query %d: %lld answers vs %lld", q, (long long)a->query[q].n,
                     (long long)b->query[q].n);
            return msg;
        }
    if (a->found != b->found || memcmp(a->near, b->near, sizeof a->near) != 0)
        return "qg_nearest";
    const qg_stats *s = &a->stats, *t = &b->stats;
    if ((flags & SAME_MEMORY) && s->memory_bytes != t->memory_bytes) {
        snprintf(msg, sizeof msg, "memory_bytes %zu vs %zu", s->memory_bytes, t->memory_bytes);
        return msg;
    }
    if (!(flags & SAME_STATS))
        return NULL;
    if (s->elements != t->elements || s->nodes != t->nodes || s->leaves != t->leaves ||
        s->max_depth_reached != t->max_depth_reached) {
        snprintf(msg, sizeof msg, "stats: elements %d/%d nodes %d/%d leaves %d/%d depth %d/%d", s->elements,
                 t->elements, s->nodes, t->nodes, s->leaves, t->leaves, s->max_depth_reached, t->max_depth_reached);
        return msg;
    }
    if (s->element_size != t->element_size || s->size_bound != t->size_bound || s->cell_size != t->cell_size ||
        s->max_depth != t->max_depth || !tu_rect_same(s->world, t->world) || s->retunes != t->retunes) {
        snprintf(msg, sizeof msg,
                 "learned: element_size %g/%g bound %g/%g cell %g/%g depth %d/%d retunes %d/%d world %g..%g/%g..%g",
                 (double)s->element_size, (double)t->element_size, (double)s->size_bound, (double)t->size_bound,
                 (double)s->cell_size, (double)t->cell_size, s->max_depth, t->max_depth, s->retunes, t->retunes,
                 (double)s->world.min_x, (double)s->world.max_x, (double)t->world.min_x, (double)t->world.max_x);
        return msg;
    }
    return NULL;
}

static void expect_same_print(const qg_index *a, const qg_index *b, int flags, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static void expect_same_print(const qg_index *a, const qg_index *b, int flags, const char *fmt, ...)
{
    print pa, pb;
    take_print(a, &pa);
    take_print(b, &pb);
    const char *d = print_diff(&pa, &pb, flags);
    if (d != NULL) {
        char what[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        fail_msg("%s: %s", what, d);
    }
}

/* ---- scenes ------------------------------------------------------------ */

/* Boxes of every size over and beside [0, 1024]^2: points, a pile, long and
 * large ones. */
static qg_rect scene_box(tu_rng *r, int i)
{
    float x = tu_rng_range(r, -100, 1124), y = tu_rng_range(r, -100, 1124);
    float w = tu_rng_range(r, 0, 10), h = tu_rng_range(r, 0, 10);
    if (i % 37 == 0)
        w = tu_rng_range(r, 50, 300), h = tu_rng_range(r, 50, 300);
    if (i % 97 == 0)
        x = y = 400, w = h = 3;
    if (i % 131 == 0)
        w = h = 0;
    if (i % 211 == 0)
        w = 1500, x = -200;
    return tu_rect(x, y, x + w, y + h);
}

/* A batch over live handles (no handle twice): small steps, some jumps,
 * some growing and some far off. */
static int32_t scene_batch(const qg_index *idx, tu_rng *r, qg_handle *hs, qg_rect *bs, int32_t max)
{
    int32_t n = 0;
    const int32_t high = 2 * qg_count(idx) + 8;
    for (qg_handle h = (qg_handle)tu_rng_below(r, 3); h < high && n < max; h += 1 + (int32_t)tu_rng_below(r, 2)) {
        qg_rect b;
        if (qg_get(idx, h, &b) != QG_OK)
            continue;
        float dx = tu_rng_range(r, -12, 12), dy = tu_rng_range(r, -12, 12), grow = 0;
        if (tu_rng_chance(r, 0.05))
            dx = tu_rng_range(r, -600, 600), dy = tu_rng_range(r, -600, 600);
        if (tu_rng_chance(r, 0.05))
            grow = tu_rng_range(r, 20, 200);
        if (tu_rng_chance(r, 0.01))
            dx = tu_rng_range(r, -4000, 4000);
        hs[n] = h;
        bs[n++] = tu_rect(b.min_x + dx, b.min_y + dy, b.max_x + dx + grow, b.max_y + dy + grow);
    }
    return n;
}

/* ---- part_order -------------------------------------------------------- */

static void part_order_run(int32_t n0, int frames, uint64_t seed, bool statics)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    qg_config c = qg_default_config(g_kind);
    qg_index *a = NULL, *b = NULL, *t = NULL;
    assert_int_equal(qg_create(&c, &a), QG_OK);
    assert_int_equal(qg_create(&c, &b), QG_OK);
    assert_int_equal(qg_create(&c, &t), QG_OK);
    qg_thread_pool *pool = NULL;
    assert_int_equal(qg_thread_pool_create(2, &pool), QG_OK);
    const qg_jobs real = qg_thread_pool_jobs(pool);
    qg_rect *boxes = malloc((size_t)n0 * sizeof *boxes);
    qg_handle *hs = malloc((size_t)n0 * 3 * sizeof *hs);
    qg_rect *bs = malloc((size_t)n0 * 3 * sizeof *bs);
    assert_non_null(boxes);
    assert_non_null(hs);
    assert_non_null(bs);
    for (int32_t i = 0; i < n0; i++)
        boxes[i] = scene_box(&r, i);
    qg_index *all[3] = {a, b, t};
    for (int k = 0; k < 3; k++)
        assert_int_equal(qg_insert_many(all[k], boxes, n0, hs), QG_OK);
    if (statics)
        for (qg_handle h = 0; h < n0; h += 9)
            for (int k = 0; k < 3; k++)
                assert_int_equal(qg_set_static(all[k], h, true), QG_OK);
    const qg_jobs *jobs[3] = {&k_forward, &k_reverse, &real};
    for (int frame = 0; frame < frames; frame++) {
        const int32_t n = scene_batch(a, &r, hs, bs, 3 * n0);
        for (int k = 0; k < 3; k++)
            assert_int_equal(qg_move_many(all[k], jobs[k], hs, bs, n), QG_OK);
        expect_same_print(a, b, SAME_ALL, "seed %llu, frame %d: qg_move_many forward vs reverse", (unsigned long long)seed,
                          frame);
        expect_same_print(a, t, SAME_ALL, "seed %llu, frame %d: qg_move_many forward vs threads", (unsigned long long)seed,
                          frame);
        if (frame % 4 != 3) {
            for (int k = 0; k < 3; k++)
                qg_cleanup_parallel(all[k], jobs[k]);
            expect_same_print(a, b, SAME_ALL, "seed %llu, frame %d: qg_cleanup_parallel forward vs reverse",
                              (unsigned long long)seed, frame);
            expect_same_print(a, t, SAME_ALL, "seed %llu, frame %d: qg_cleanup_parallel forward vs threads",
                              (unsigned long long)seed, frame);
        }
        /* Churn: the handles freed and reused must be the same. */
        for (int i = 0; i < 30; i++) {
            const qg_handle h = (qg_handle)tu_rng_below(&r, (uint32_t)(qg_count(a) + 8));
            const qg_status s = qg_remove(a, h);
            assert_int_equal(qg_remove(b, h), s);
            assert_int_equal(qg_remove(t, h), s);
            const qg_rect box = scene_box(&r, i);
            const qg_handle g = qg_insert(a, box);
            assert_true(g >= 0);
            assert_int_equal(qg_insert(b, box), g);
            assert_int_equal(qg_insert(t, box), g);
        }
        /* Parallel pairs on the three job systems: each part in the same order. */
        seq ps[3][2];
        memset(ps, 0, sizeof ps);
        for (int k = 0; k < 3; k++) {
            void *users[2] = {&ps[k][0], &ps[k][1]};
            assert_int_equal(qg_pairs_parallel(all[k], jobs[k], seq_pair, users, NULL), QG_OK);
        }
        for (int k = 1; k < 3; k++)
            for (int p = 0; p < 2; p++)
                if (ps[k][p].n != ps[0][p].n || ps[k][p].hash != ps[0][p].hash)
                    fail_msg("seed %llu, frame %d: qg_pairs_parallel part %d on job system %d: another order",
                             (unsigned long long)seed, frame, p, k);
    }
    for (int k = 0; k < 3; k++) {
        assert_int_equal(qg_validate(all[k]), QG_OK);
        qg_destroy(all[k]);
    }
    qg_thread_pool_destroy(pool);
    free(boxes);
    free(hs);
    free(bs);
}

static void test_part_order(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const uint64_t seed = tu_env_seed(0x0de4);
    printf("seed %llu\n", (unsigned long long)seed);
    /* Small scenes keep the quadtree's block pool short during a batch. */
    part_order_run(73, 12, seed, false);
    part_order_run(400, 12, seed + 1, false);
    part_order_run((int32_t)tu_scaled(5000), 8, seed + 2, false);
    part_order_run((int32_t)tu_scaled(3000), 6, seed + 3, true);
}

/* ---- batch_oom --------------------------------------------------------- */

typedef struct batch_case {
    uint64_t seed;
    int32_t n0, moves;
    /* > 0: boxes up to span/20 over [-span, span]^2, moves anywhere in twice
     * that, up to span/5 wide (the first moves grow the quadtree's block
     * pool, a later one is refused); `hint`: bounds +-1e6. */
    float span;
    bool hint;
} batch_case;

/* Builds the scene of case `bc` on allocator `ta` (NULL: the default). */
static qg_index *batch_scene(const batch_case *bc, tu_alloc *ta, tu_rng *r)
{
    tu_rng_seed(r, bc->seed);
    qg_config c = qg_default_config(g_kind);
    if (ta != NULL)
        c.allocator = tu_allocator(ta);
    if (bc->hint)
        c.bounds = tu_rect(-1e6f, -1e6f, 1e6f, 1e6f);
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    const float sp = bc->span;
    for (int32_t i = 0; i < bc->n0; i++) {
        qg_rect b = scene_box(r, i);
        if (sp > 0) {
            const float x = tu_rng_range(r, -sp, sp), y = tu_rng_range(r, -sp, sp), w = tu_rng_range(r, 0, sp / 20);
            b = tu_rect(x, y, x + w, y + w);
        }
        assert_true(qg_insert(idx, b) >= 0);
    }
    if (sp == 0 || bc->seed % 2)
        qg_cleanup(idx);
    return idx;
}

static int32_t batch_moves(const batch_case *bc, const qg_index *idx, tu_rng *r, qg_handle *hs, qg_rect *bs)
{
    if (bc->span > 0) {
        const float sp = bc->span;
        for (int32_t i = 0; i < bc->moves; i++) {
            hs[i] = i * bc->n0 / bc->moves;
            const float x = tu_rng_range(r, -2 * sp, 2 * sp), y = tu_rng_range(r, -2 * sp, 2 * sp),
                        w = tu_rng_range(r, 0, sp / 5);
            bs[i] = tu_rect(x, y, x + w, y + w);
        }
        return bc->moves;
    }
    int32_t n = scene_batch(idx, r, hs, bs, bc->moves);
    for (int32_t i = 0; i < n; i += 3) /* big steps: new leaves and cells */
        bs[i] = tu_rect(bs[i].min_x * 0.5f + 300, bs[i].min_y, bs[i].min_x * 0.5f + 340, bs[i].min_y + 40);
    for (int32_t i = 1; i < n; i += 4) /* larger: many leaves, blocks the pool must grow for */
        bs[i] = tu_rect(bs[i].min_x, bs[i].min_y, bs[i].min_x + 250, bs[i].min_y + 250);
    return n;
}

static qg_status batch_oom_run(tu_alloc *ta, long k, void *user)
{
    const batch_case *bc = user;
    tu_rng r;
    qg_index *idx = batch_scene(bc, ta, &r);
    qg_index *clean = batch_scene(bc, NULL, &r); /* never refused */
    qg_handle hs[1024];
    qg_rect bs[1024];
    if (bc->span == 0)
        tu_rng_seed(&r, bc->seed ^ 0xabcdef);
    const int32_t n = batch_moves(bc, idx, &r, hs, bs);
    const qg_jobs *jobs = k % 3 == 0 ? NULL : k % 3 == 1 ? &k_forward : &k_reverse;
    const char *how = k % 3 == 0 ? "no jobs" : k % 3 == 1 ? "forward" : "reverse";
    print before, after;
    take_print(idx, &before);
    tu_snapshot snap;
    memset(&snap, 0, sizeof snap);
    tu_snapshot_take(idx, bc->n0 + 8, &snap);
    const size_t bytes = ta->bytes;
    tu_alloc_fail_in(ta, k);
    const qg_status st = qg_move_many(idx, jobs, hs, bs, n);
    tu_alloc_disarm(ta);
    if (st != QG_OK && st != QG_ERR_NOMEM)
        fail_msg("seed %llu, allocation %ld (%s): %s", (unsigned long long)bc->seed, k, how, qg_status_name(st));
    if (st == QG_ERR_NOMEM) {
        assert_int_equal(qg_validate(idx), QG_OK);
        tu_expect_unchanged(idx, &snap, "seed %llu, allocation %ld (%s): a refused batch", (unsigned long long)bc->seed,
                            k, how);
        take_print(idx, &after);
        const char *d = print_diff(&before, &after, 0);
        if (d != NULL)
            fail_msg("seed %llu, allocation %ld (%s): a refused batch changed the index: %s",
                     (unsigned long long)bc->seed, k, how, d);
        if (ta->bytes != bytes)
            fail_msg("seed %llu, %d boxes, %d moves, allocation %ld (%s): QG_ERR_NOMEM, but %zu bytes became %zu",
                     (unsigned long long)bc->seed, bc->n0, n, k, how, bytes, ta->bytes);
        d = print_diff(&before, &after, SAME_MEMORY);
        if (d != NULL)
            fail_msg("seed %llu, allocation %ld (%s): a refused batch changed the index: %s",
                     (unsigned long long)bc->seed, k, how, d);
        assert_int_equal(qg_validate(idx), QG_OK);
        /* Taken again, it gives what one that never saw the refusal gives. */
        assert_int_equal(qg_move_many(idx, jobs, hs, bs, n), QG_OK);
    }
    else
        tu_snapshot_free(&snap);
    assert_int_equal(qg_get_stats(idx).memory_bytes, ta->bytes);
    assert_int_equal(qg_move_many(clean, jobs, hs, bs, n), QG_OK);
    expect_same_print(idx, clean, 0, "seed %llu, allocation %ld (%s): after the batch", (unsigned long long)bc->seed, k,
                      how);
    qg_cleanup(idx);
    qg_cleanup(clean);
    expect_same_print(idx, clean, 0, "seed %llu, allocation %ld (%s): after qg_cleanup", (unsigned long long)bc->seed, k,
                      how);
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
    qg_destroy(clean);
    return st;
}

static void test_batch_oom(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const uint64_t seed = tu_env_seed(0x73);
    printf("seed %llu\n", (unsigned long long)seed);
    for (uint64_t s = 0; s < 6; s++) {
        batch_case bc = {seed + s, 73, 38, 0, false};
        tu_each_failure_point("qg_move_many, 73 boxes, 38 moves", 10000, batch_oom_run, &bc);
    }
    /* Scenes where the quadtree's 5th allocation is refused after the moves
     * before it grew the block pool (2601 bytes became 2857). */
    static const batch_case spread[] = {
        {9, 73, 38, 1024, true}, {27, 73, 38, 50, false}, {34, 73, 38, 1e5f, false}, {42, 73, 38, 1e5f, false},
        {55, 73, 38, 50, false}, {8, 73, 38, 1024, false}, {101, 300, 200, 1024, false},
    };
    for (size_t i = 0; i < sizeof spread / sizeof *spread; i++)
        tu_each_failure_point("qg_move_many, boxes spread and moved far", 10000, batch_oom_run, (void *)&spread[i]);
    batch_case big = {seed + 100, 600, 700, 0, false};
    tu_each_failure_point("qg_move_many, 600 boxes", 10000, batch_oom_run, &big);
}

/* ---- insert_many_retry ------------------------------------------------- */

/* Learning kinds: all but brute force (which learns nothing). */
static bool learns(void)
{
    return g_kind != QG_BRUTE_FORCE;
}

/* A box `size` wide at most, over a world `spread` times that across. */
static qg_rect learn_box(tu_rng *r, float size, float spread)
{
    const float x = tu_rng_range(r, 0, spread * size), y = tu_rng_range(r, 0, spread * size);
    const float w = tu_rng_range(r, 0.5f * size, size), h = tu_rng_range(r, 0.5f * size, size);
    return tu_rect(x, y, x + w, y + h);
}

/* A refused qg_insert_many of `n` boxes (allocation k), then the same call:
 * the same index as one that took it at once. `pre` boxes are inserted first
 * (a different size: the batch must re-tune). */
static void retry_case(int32_t pre, int32_t n, long k, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    qg_rect *boxes = malloc((size_t)(pre + n) * sizeof *boxes);
    qg_handle *hs = malloc((size_t)(pre + n) * sizeof *hs);
    assert_non_null(boxes);
    assert_non_null(hs);
    const float spread = 2.0f * sqrtf((float)(pre + n));
    for (int32_t i = 0; i < pre; i++)
        boxes[i] = learn_box(&r, 2.0f, spread);
    for (int32_t i = pre; i < pre + n; i++)
        boxes[i] = learn_box(&r, 40.0f, spread);
    tu_alloc ta;
    qg_config c = qg_default_config(g_kind);
    qg_index *idx = tu_open(c, &ta), *clean = NULL;
    assert_int_equal(qg_create(&c, &clean), QG_OK);
    if (pre > 0) {
        assert_int_equal(qg_insert_many(idx, boxes, pre, hs), QG_OK);
        assert_int_equal(qg_insert_many(clean, boxes, pre, hs), QG_OK);
        qg_cleanup(idx);
        qg_cleanup(clean);
    }
    const size_t bytes = ta.bytes;
    tu_alloc_fail_in(&ta, k);
    const qg_status st = qg_insert_many(idx, boxes + pre, n, hs);
    tu_alloc_disarm(&ta);
    if (st == QG_OK) {
        tu_close(idx, &ta);
        qg_destroy(clean);
        free(boxes);
        free(hs);
        return;
    }
    assert_int_equal(st, QG_ERR_NOMEM);
    if (ta.bytes != bytes)
        fail_msg("seed %llu, %d + %d boxes, allocation %ld: QG_ERR_NOMEM, %zu bytes became %zu",
                 (unsigned long long)seed, pre, n, k, bytes, ta.bytes);
    for (int32_t i = 0; i < n; i++)
        if (hs[i] != -1)
            fail_msg("seed %llu, allocation %ld: handles[%d] = %d after a refusal", (unsigned long long)seed, k, i,
                     hs[i]);
    assert_int_equal(qg_insert_many(idx, boxes + pre, n, hs), QG_OK);
    assert_int_equal(qg_insert_many(clean, boxes + pre, n, hs), QG_OK);
    expect_same_print(idx, clean, SAME_ALL, "seed %llu, %d + %d boxes, allocation %ld refused, then the retry",
                      (unsigned long long)seed, pre, n, k);
    /* And on: a few frames of moves and cleanups. */
    for (int frame = 0; frame < (pre + n > 20000 ? 1 : 3); frame++) {
        const int32_t m = scene_batch(clean, &r, hs, boxes, pre + n);
        assert_int_equal(qg_move_many(idx, NULL, hs, boxes, m), QG_OK);
        assert_int_equal(qg_move_many(clean, NULL, hs, boxes, m), QG_OK);
        qg_cleanup(idx);
        qg_cleanup(clean);
        expect_same_print(idx, clean, SAME_ALL, "seed %llu, allocation %ld refused, frame %d", (unsigned long long)seed, k,
                          frame);
    }
    tu_close(idx, &ta);
    qg_destroy(clean);
    free(boxes);
    free(hs);
}

/* How many allocations a qg_insert_many makes, without refusing any. */
static long insert_many_allocations(int32_t pre, int32_t n, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    qg_rect *boxes = malloc((size_t)(pre + n) * sizeof *boxes);
    qg_handle *hs = malloc((size_t)(pre + n) * sizeof *hs);
    const float spread = 2.0f * sqrtf((float)(pre + n));
    for (int32_t i = 0; i < pre; i++)
        boxes[i] = learn_box(&r, 2.0f, spread);
    for (int32_t i = pre; i < pre + n; i++)
        boxes[i] = learn_box(&r, 40.0f, spread);
    tu_alloc ta;
    qg_index *idx = tu_open(qg_default_config(g_kind), &ta);
    if (pre > 0) {
        assert_int_equal(qg_insert_many(idx, boxes, pre, hs), QG_OK);
        qg_cleanup(idx);
    }
    const long before = ta.grow_requests;
    assert_int_equal(qg_insert_many(idx, boxes + pre, n, hs), QG_OK);
    const long made = ta.grow_requests - before;
    tu_close(idx, &ta);
    free(boxes);
    free(hs);
    return made;
}

static void test_insert_many_retry(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    if (!learns())
        skip();
    const uint64_t seed = tu_env_seed(0x1ea2);
    printf("seed %llu\n", (unsigned long long)seed);
    static const int32_t sizes[][2] = {{0, 3000}, {1000, 3000}, {300, 200}};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const long made = insert_many_allocations(sizes[s][0], sizes[s][1], seed + s);
        for (long k = 1; k <= made; k++)
            retry_case(sizes[s][0], sizes[s][1], k, seed + s);
    }
    if (g_kind == QG_POINT_GRID) {
        const int32_t big = (int32_t)tu_scaled(200000);
        retry_case(0, big, 1, seed + 10);
        retry_case(0, big, 2, seed + 10);
    }
}

/* Refused qg_move_many, qg_move and qg_insert with a re-tune pending: the
 * retry leaves the index as one that never saw the refusal. */
static void pending_case(int which, long k, uint64_t seed, bool *refused)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    enum { N = 1200 };
    qg_rect boxes[N];
    qg_handle hs[N];
    for (int32_t i = 0; i < N; i++)
        boxes[i] = learn_box(&r, 2.0f, 100);
    tu_alloc ta;
    qg_config c = qg_default_config(g_kind);
    qg_index *idx = tu_open(c, &ta), *clean = NULL;
    assert_int_equal(qg_create(&c, &clean), QG_OK);
    assert_int_equal(qg_insert_many(idx, boxes, N, hs), QG_OK);
    assert_int_equal(qg_insert_many(clean, boxes, N, hs), QG_OK);
    /* Every box grows 20x: the next cleanups' samples ask for a re-tune. */
    for (int32_t i = 0; i < N; i++) {
        const float x = boxes[i].min_x * 20, y = boxes[i].min_y * 20;
        boxes[i] = tu_rect(x, y, x + 40, y + 40);
    }
    assert_int_equal(qg_move_many(idx, NULL, hs, boxes, N), QG_OK);
    assert_int_equal(qg_move_many(clean, NULL, hs, boxes, N), QG_OK);
    for (int i = 0; i < 17; i++) {
        qg_cleanup(idx);
        qg_cleanup(clean);
    }
    const int32_t m = scene_batch(clean, &r, hs, boxes, N);
    const qg_rect one = tu_rect(5, 5, 4000, 4000);
    const size_t bytes = ta.bytes;
    tu_alloc_fail_in(&ta, k);
    qg_status st = which == 0   ? qg_move_many(idx, NULL, hs, boxes, m)
                   : which == 1 ? qg_move_many(idx, &k_forward, hs, boxes, m)
                   : which == 2 ? qg_move(idx, hs[0], one)
                                : (qg_status)qg_insert(idx, one);
    tu_alloc_disarm(&ta);
    if (st >= 0 && which == 3)
        st = QG_OK;
    *refused = st == QG_ERR_NOMEM;
    if (st == QG_ERR_NOMEM) {
        if (ta.bytes != bytes)
            fail_msg("seed %llu, call %d, allocation %ld: QG_ERR_NOMEM, %zu bytes became %zu", (unsigned long long)seed,
                     which, k, bytes, ta.bytes);
        st = which < 2 ? qg_move_many(idx, NULL, hs, boxes, m)
             : which == 2 ? qg_move(idx, hs[0], one)
                          : (qg_insert(idx, one) >= 0 ? QG_OK : QG_ERR_NOMEM);
    }
    assert_int_equal(st, QG_OK);
    if (!*refused && ta.injected > 0) {
        /* The call went through and its re-tune was refused: by design it
         * goes on untuned and tries again later. */
        tu_close(idx, &ta);
        qg_destroy(clean);
        *refused = true;
        return;
    }
    st = which < 2 ? qg_move_many(clean, NULL, hs, boxes, m)
         : which == 2 ? qg_move(clean, hs[0], one)
                      : (qg_insert(clean, one) >= 0 ? QG_OK : QG_ERR_NOMEM);
    assert_int_equal(st, QG_OK);
    expect_same_print(idx, clean, which < 2 ? SAME_STATS : SAME_ALL, "seed %llu, call %d, allocation %ld refused with a re-tune pending, then again",
                      (unsigned long long)seed, which, k);
    tu_close(idx, &ta);
    qg_destroy(clean);
}

static void test_pending_retry(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    if (!learns())
        skip();
    const uint64_t seed = tu_env_seed(0x9e4d);
    printf("seed %llu\n", (unsigned long long)seed);
    for (int which = 0; which < 4; which++) {
        long points = 0;
        for (long k = 1; k < 400; k++) {
            bool refused = false;
            pending_case(which, k, seed, &refused);
            if (!refused)
                break;
            points++;
        }
        printf("call %d: %ld failure points\n", which, points);
    }
}

/* ---- pending_batch ----------------------------------------------------- */

/* qg_move_many with a re-tune pending (qg_cleanup found the sizes off and
 * left the rebuild to the next call that may allocate): the batch runs in
 * the structure in force and the re-tune after it, from the boxes the batch
 * left, only when the batch succeeded. Two batches, every learning kind:
 * - `far`: a third of the boxes piled into a corner, a third thrown far
 *   out, so moves after the first allocate (splits, cells, links, a
 *   re-fit). Refused, the bytes, the re-tune count and the answers are as
 *   before (a re-tune run inside the batch would stay); succeeded, the
 *   index re-tuned (unless the re-tune itself was refused its memory: it
 *   then waits, by design), where a re-tune left pending would wait for a
 *   qg_move or qg_insert that a frame of batches and cleanups never makes.
 * - `back`: every box back to the box it was learned from. The re-tune
 *   then finds the sizes in force right and rebuilds nothing; one run
 *   before the batch's moves (the one-by-one path's qg_move re-tunes first
 *   when one is pending) would tune the index for boxes the batch is about
 *   to take away.
 * Either way the answers are brute force's. */

enum { PB_N = 1200, PB_FAR = 360 };

typedef struct pending_batch {
    uint64_t seed;
    const qg_jobs *jobs;
    bool back;
    int32_t n;
    qg_rect boxes[PB_N]; /* the boxes before the batch */
    qg_handle hs[PB_N];
    qg_rect bs[PB_N];
} pending_batch;

/* The index of case `pb` on allocator `ta` (NULL: the default), with a
 * re-tune pending, and the case's batch. */
static qg_index *pb_index(pending_batch *pb, tu_alloc *ta)
{
    tu_rng r;
    tu_rng_seed(&r, pb->seed);
    qg_config c = qg_default_config(g_kind);
    if (ta != NULL)
        c.allocator = tu_allocator(ta);
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    qg_rect learned[PB_N];
    qg_handle hs[PB_N];
    for (int32_t i = 0; i < PB_N; i++)
        learned[i] = learn_box(&r, 2.0f, 100);
    assert_int_equal(qg_insert_many(idx, learned, PB_N, hs), QG_OK);
    qg_cleanup(idx);
    /* Every box grows 20x: the next cleanups' samples ask for a re-tune. */
    for (int32_t i = 0; i < PB_N; i++) {
        const float x = learned[i].min_x * 20, y = learned[i].min_y * 20;
        pb->boxes[i] = tu_rect(x, y, x + 40, y + 40);
    }
    assert_int_equal(qg_move_many(idx, NULL, hs, pb->boxes, PB_N), QG_OK);
    for (int i = 0; i < 17; i++)
        qg_cleanup(idx);
    pb->n = pb->back ? PB_N : PB_FAR;
    for (int32_t i = 0; i < pb->n; i++) {
        const qg_handle h = pb->back ? i : (qg_handle)(i * (PB_N / PB_FAR));
        const qg_rect b = pb->boxes[h];
        const float t = (float)i;
        pb->hs[i] = h;
        pb->bs[i] = pb->back    ? learned[h]
                    : i % 3 == 0 ? tu_rect(t * 0.01f, t * 0.005f, t * 0.01f + 0.5f, t * 0.005f + 0.5f)
                    : i % 3 == 1 ? tu_rect(1e5f + t * 60, -3e4f, 1e5f + t * 60 + 40, -3e4f + 40)
                                 : tu_rect(b.min_x + 3, b.min_y - 2, b.max_x + 3, b.max_y - 2);
    }
    return idx;
}

/* idx answers as brute force does for `boxes`: pairs, queries, nearest. */
static void pb_expect_brute(const qg_index *idx, const qg_rect *boxes, const char *what, long k)
{
    qg_config c = qg_default_config(QG_BRUTE_FORCE);
    qg_index *bf = NULL;
    assert_int_equal(qg_create(&c, &bf), QG_OK);
    for (int32_t i = 0; i < PB_N; i++)
        assert_int_equal(qg_insert(bf, boxes[i]), i);
    seq a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    assert_int_equal(qg_pairs(idx, seq_pair, &a), QG_OK);
    assert_int_equal(qg_pairs(bf, seq_pair, &b), QG_OK);
    if (seq_differs(&a, &b, 0))
        fail_msg("%s, allocation %ld: qg_pairs %lld pairs, brute force %lld", what, k, (long long)a.n, (long long)b.n);
    static const qg_rect areas[4] = {
        {-1e30f, -1e30f, 1e30f, 1e30f}, {0, 0, 5, 5}, {1e5f, -4e4f, 2e5f, 0}, {0, 0, 2000, 2000}};
    for (int q = 0; q < 4; q++) {
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        assert_int_equal(qg_query(idx, areas[q], seq_query, &a), QG_OK);
        assert_int_equal(qg_query(bf, areas[q], seq_query, &b), QG_OK);
        if (seq_differs(&a, &b, 0))
            fail_msg("%s, allocation %ld: query %d: %lld answers, brute force %lld", what, k, q, (long long)a.n,
                     (long long)b.n);
    }
    qg_handle na[8], nb[8];
    int32_t fa = 0, fb = 0;
    assert_int_equal(qg_nearest(idx, 1.0f, 1.0f, 8, INFINITY, na, NULL, &fa), QG_OK);
    assert_int_equal(qg_nearest(bf, 1.0f, 1.0f, 8, INFINITY, nb, NULL, &fb), QG_OK);
    if (fa != fb || memcmp(na, nb, (size_t)fa * sizeof *na) != 0)
        fail_msg("%s, allocation %ld: qg_nearest differs from brute force", what, k);
    qg_destroy(bf);
}

/* The re-tunes a batch that went through leaves: one for `far` (none when
 * the re-tune was refused its memory), none for `back`. */
static void pb_expect_retunes(const pending_batch *pb, const qg_index *idx, int32_t before, const qg_stats *was,
                              bool refused_some, long k)
{
    const qg_stats now = qg_get_stats(idx);
    if (pb->back ? now.retunes != before : !refused_some && now.retunes != before + 1)
        fail_msg("seed %llu, %s batch, allocation %ld: went through with a re-tune pending, %d re-tunes became %d",
                 (unsigned long long)pb->seed, pb->back ? "back" : "far", k, before, now.retunes);
    if (pb->back && (now.element_size != was->element_size || now.cell_size != was->cell_size))
        fail_msg("seed %llu, back batch, allocation %ld: tuned for the boxes it moved away: element_size %g, was %g",
                 (unsigned long long)pb->seed, k, (double)now.element_size, (double)was->element_size);
}

static qg_status pending_batch_run(tu_alloc *ta, long k, void *user)
{
    pending_batch *pb = user;
    qg_index *idx = pb_index(pb, ta);
    const qg_stats was = qg_get_stats(idx);
    const size_t bytes = ta->bytes;
    tu_snapshot snap;
    memset(&snap, 0, sizeof snap);
    tu_snapshot_take(idx, PB_N + 8, &snap);
    const long injected = ta->injected;
    tu_alloc_fail_in(ta, k);
    const qg_status st = qg_move_many(idx, pb->jobs, pb->hs, pb->bs, pb->n);
    tu_alloc_disarm(ta);
    const bool refused_some = ta->injected > injected;
    assert_int_equal(qg_validate(idx), QG_OK);
    assert_int_equal(qg_get_stats(idx).memory_bytes, ta->bytes);
    qg_rect after[PB_N];
    memcpy(after, pb->boxes, sizeof after);
    for (int32_t i = 0; i < pb->n; i++)
        after[pb->hs[i]] = pb->bs[i];
    if (st == QG_ERR_NOMEM) {
        if (ta->bytes != bytes || qg_get_stats(idx).retunes != was.retunes)
            fail_msg("seed %llu, allocation %ld: a refused batch with a re-tune pending: %zu bytes became %zu, "
                     "%d re-tunes %d",
                     (unsigned long long)pb->seed, k, bytes, ta->bytes, was.retunes, qg_get_stats(idx).retunes);
        tu_expect_unchanged(idx, &snap, "seed %llu, allocation %ld: a refused batch with a re-tune pending",
                            (unsigned long long)pb->seed, k);
        pb_expect_brute(idx, pb->boxes, "refused", k);
        /* Taken again it goes through, and the re-tune after it. */
        assert_int_equal(qg_move_many(idx, pb->jobs, pb->hs, pb->bs, pb->n), QG_OK);
        pb_expect_retunes(pb, idx, was.retunes, &was, false, k);
    } else {
        assert_int_equal(st, QG_OK);
        tu_snapshot_free(&snap);
        pb_expect_retunes(pb, idx, was.retunes, &was, refused_some, k);
    }
    pb_expect_brute(idx, after, "after the batch", k);
    tu_close(idx, ta);
    return st;
}

static void test_pending_batch(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    if (!learns())
        skip();
    pending_batch *pb = malloc(sizeof *pb);
    assert_non_null(pb);
    pb->seed = tu_env_seed(0x7e4b);
    printf("seed %llu\n", (unsigned long long)pb->seed);
    /* The case holds what it says: a re-tune pending, run by a qg_move. */
    pb->jobs = NULL;
    pb->back = false;
    qg_index *probe = pb_index(pb, NULL);
    const int32_t retunes = qg_get_stats(probe).retunes;
    assert_int_equal(qg_move(probe, 0, pb->boxes[0]), QG_OK);
    assert_int_equal(qg_get_stats(probe).retunes, retunes + 1);
    qg_destroy(probe);
    const qg_jobs *const jobs[] = {NULL, &k_forward};
    for (int back = 0; back < 2; back++)
        for (size_t j = 0; j < sizeof jobs / sizeof *jobs; j++) {
            pb->back = back != 0;
            pb->jobs = jobs[j];
            char what[96];
            snprintf(what, sizeof what, "qg_move_many (%s, %s) with a re-tune pending", back ? "back" : "far",
                     j == 0 ? "no jobs" : "two workers");
            tu_each_failure_point(what, 10000, pending_batch_run, pb);
        }
    free(pb);
}

/* ---- insert_many_handles ----------------------------------------------- */

static void expect_all_minus_one(const qg_handle *hs, int32_t n, const char *what)
{
    for (int32_t i = 0; i < n; i++)
        if (hs[i] != -1)
            fail_msg("%s: handles[%d] = %d, want -1", what, i, hs[i]);
}

static qg_status handles_run(tu_alloc *ta, long k, void *user)
{
    (void)user;
    qg_config c = qg_default_config(g_kind);
    c.allocator = tu_allocator(ta);
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    tu_rng r;
    tu_rng_seed(&r, 0x4a4d);
    enum { N = 600 };
    qg_rect boxes[N];
    qg_handle hs[N];
    for (int32_t i = 0; i < N; i++)
        boxes[i] = scene_box(&r, i);
    assert_int_equal(qg_insert_many(idx, boxes, N / 2, hs), QG_OK);
    for (qg_handle h = 0; h < 40; h += 3) /* free slots to reuse */
        assert_int_equal(qg_remove(idx, h), QG_OK);
    for (int32_t i = 0; i < N; i++)
        hs[i] = 1000 + i;
    tu_snapshot before;
    memset(&before, 0, sizeof before);
    tu_snapshot_take(idx, N + 8, &before);
    tu_alloc_fail_in(ta, k);
    const qg_status st = qg_insert_many(idx, boxes + N / 2, N / 2, hs);
    tu_alloc_disarm(ta);
    if (st == QG_ERR_NOMEM) {
        expect_all_minus_one(hs, N / 2, "QG_ERR_NOMEM");
        tu_expect_unchanged(idx, &before, "allocation %ld: a refused qg_insert_many changed the index", k);
    } else {
        assert_int_equal(st, QG_OK);
        tu_snapshot_free(&before);
    }
    qg_destroy(idx);
    return st;
}

static void test_insert_many_handles(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    qg_config c = qg_default_config(g_kind);
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    qg_rect boxes[8];
    qg_handle hs[8];
    for (int i = 0; i < 8; i++)
        boxes[i] = tu_rect((float)i, 0, (float)i + 1, 1);
    assert_int_equal(qg_insert_many(idx, boxes, 4, hs), QG_OK);
    /* A bad box anywhere: QG_ERR_INVALID, every handle -1, nothing inserted. */
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int where = 0; where < 8; where++)
        for (int v = 0; v < 4; v++) {
            qg_rect bx[8];
            memcpy(bx, boxes, sizeof bx);
            if (v < 3)
                bx[where].max_y = bad[v];
            else
                bx[where].min_x = bx[where].max_x + 1; /* min > max */
            for (int i = 0; i < 8; i++)
                hs[i] = 77;
            assert_int_equal(qg_insert_many(idx, bx, 8, hs), QG_ERR_INVALID);
            expect_all_minus_one(hs, 8, "QG_ERR_INVALID");
            assert_int_equal(qg_count(idx), 4);
        }
    /* No index: still every handle -1. */
    for (int i = 0; i < 8; i++)
        hs[i] = 77;
    assert_int_equal(qg_insert_many(NULL, boxes, 8, hs), QG_ERR_INVALID);
    expect_all_minus_one(hs, 8, "no index");
    /* n < 0 and n == 0 touch nothing. */
    for (int i = 0; i < 8; i++)
        hs[i] = 77;
    assert_int_equal(qg_insert_many(idx, boxes, -1, hs), QG_ERR_INVALID);
    assert_int_equal(qg_insert_many(idx, boxes, 0, hs), QG_OK);
    for (int i = 0; i < 8; i++)
        assert_int_equal(hs[i], 77);
    assert_int_equal(qg_insert_many(idx, NULL, 8, hs), QG_ERR_INVALID);
    expect_all_minus_one(hs, 8, "no boxes");
    assert_int_equal(qg_validate(idx), QG_OK);
    qg_destroy(idx);
    /* Every allocation refused in turn. */
    tu_each_failure_point("qg_insert_many", 10000, handles_run, NULL);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_part_order),        cmocka_unit_test(test_batch_oom),
        cmocka_unit_test(test_insert_many_retry), cmocka_unit_test(test_pending_retry),
        cmocka_unit_test(test_insert_many_handles), cmocka_unit_test(test_pending_batch),
    };
    return tu_kind_main_tests(argc, argv, "hostile_refusals", &g_kind, tests);
}
