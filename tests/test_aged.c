// SPDX-License-Identifier: MIT
/* Aged indexes, for one kind (argv[1]; ctest aged_<kind>).
 *
 * The other tests mostly check an index soon after it was built. A running
 * program ages its index: hundreds of frames of moves, removes, reinserts
 * and cleanups, and the tree kinds merge their branches back in
 * qg_cleanup as they go. So every case here first ages an index (agents
 * that drift, bounce, crowd together and spread out, 1% of them removed and
 * reinserted each frame, a qg_cleanup per frame), then:
 *
 * - differential: beside QG_BRUTE_FORCE given the same calls, the same
 *   pairs and query answers every few frames and at the end; qg_validate
 *   after every qg_cleanup (where the merges happen); every live handle
 *   still answers its own box (handles never change); qg_cleanup never asks
 *   the allocator for memory; and memory_bytes aged is bounded by what the
 *   same boxes inserted into a new index take (x3: arrays keep the capacity
 *   the crowd of the gather phase needed; asserted for the quadtree and
 *   the loose quadtree, printed for all).
 * - fault injection: on the aged index, inserts, moves (short and far),
 *   removes and cleanups where every allocation of the call fails: each
 *   either succeeds without allocating or answers QG_ERR_NOMEM and changes
 *   nothing (same answers, valid, exactly the bytes the allocator holds),
 *   then succeeds when retried.
 *
 * Seeds are fixed and printed; QG_TEST_SEED replays another, QG_TEST_SCALE
 * scales the frames. */
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
static const float INF = (float)INFINITY;


/* The kinds that merge their under-full branches back in qg_cleanup
 *: the memory bound is asserted for them, printed for the
 * others (the bucket quadtree, for one, keeps the nodes a crowd made). */
static bool tree_kind(qg_kind k)
{
    return k == QG_QUADTREE || k == QG_LOOSE_QUADTREE;
}

#define N_AGENTS 1000

/* One simulated population: the agent's box, velocity and whether it is in
 * the index, with its handle in the index under test and in the oracle. */
typedef struct world {
    tu_rng rng;
    float size; /* the world is [0, size]^2 */
    float x[N_AGENTS], y[N_AGENTS], vx[N_AGENTS], vy[N_AGENTS], h[N_AGENTS];
    bool live[N_AGENTS];
    qg_handle hk[N_AGENTS], ho[N_AGENTS];
    qg_index *idx, *oracle;
    tu_alloc alloc; /* the index under test's allocator: counts, may fail */
} world;

static qg_rect agent_box(const world *w, int i)
{
    return tu_rect(w->x[i] - w->h[i], w->y[i] - w->h[i], w->x[i] + w->h[i], w->y[i] + w->h[i]);
}

static void check_same_pairs(world *w, int frame)
{
    tu_collect a = {0}, b = {0};
    assert_int_equal(qg_pairs(w->idx, tu_collect_pair, &a), QG_OK);
    assert_int_equal(qg_pairs(w->oracle, tu_collect_pair, &b), QG_OK);
    assert_int_equal(a.bad_order, 0);
    /* The handles are the same in both (same calls, same free lists), but
     * compare through the agents anyway: map the oracle's pairs. */
    tu_vec_sort(&a.out);
    tu_vec_sort(&b.out);
    int64_t dup;
    if (tu_vec_has_dup(&a.out, &dup))
        fail_msg("%s frame %d: pair %lld reported twice", qg_kind_name(g_kind), frame, (long long)dup);
    const long d = tu_vec_first_diff(&a.out, &b.out);
    if (d >= 0)
        fail_msg("%s frame %d: pairs differ from brute_force at %ld (%zu vs %zu pairs)", qg_kind_name(g_kind),
                 frame, d, a.out.n, b.out.n);
    tu_vec_free(&a.out);
    tu_vec_free(&b.out);
}

static void check_same_query(world *w, qg_rect area, int frame)
{
    tu_collect a = {0}, b = {0};
    assert_int_equal(qg_query(w->idx, area, tu_collect_query, &a), QG_OK);
    assert_int_equal(qg_query(w->oracle, area, tu_collect_query, &b), QG_OK);
    tu_vec_sort(&a.out);
    tu_vec_sort(&b.out);
    if (tu_vec_first_diff(&a.out, &b.out) >= 0)
        fail_msg("%s frame %d: query [%g %g %g %g] differs from brute_force (%zu vs %zu)", qg_kind_name(g_kind),
                 frame, (double)area.min_x, (double)area.min_y, (double)area.max_x, (double)area.max_y, a.out.n,
                 b.out.n);
    tu_vec_free(&a.out);
    tu_vec_free(&b.out);
}

/* Everything the two indexes answer, compared; and every agent's handle
 * still holds its box. */
static void check_all(world *w, int frame)
{
    check_same_pairs(w, frame);
    const float s = w->size;
    for (int q = 0; q < 12; ++q) {
        const float cx = tu_rng_range(&w->rng, -0.1f * s, 1.1f * s), cy = tu_rng_range(&w->rng, -0.1f * s, 1.1f * s);
        const float r = q % 4 == 0 ? 0.0f : tu_rng_range(&w->rng, 1.0f, 0.3f * s);
        check_same_query(w, tu_rect(cx - r, cy - r, cx + r, cy + r), frame);
    }
    check_same_query(w, tu_rect(-INF, -INF, INF, INF), frame);
    assert_int_equal(qg_count(w->idx), qg_count(w->oracle));
    for (int i = 0; i < N_AGENTS; ++i) {
        if (!w->live[i])
            continue;
        qg_rect got;
        assert_int_equal(qg_get(w->idx, w->hk[i], &got), QG_OK);
        if (!tu_rect_same(got, agent_box(w, i)))
            fail_msg("%s frame %d: handle %d of agent %d lost its box", qg_kind_name(g_kind), frame, w->hk[i], i);
    }
}

static void world_init(world *w, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    tu_rng_seed(&w->rng, seed);
    w->size = sqrtf((float)N_AGENTS) * 16.0f;
    tu_alloc_init(&w->alloc);
    qg_config c = qg_default_config(g_kind);
    c.bounds = tu_rect(0, 0, w->size, w->size);
    c.allocator = tu_allocator(&w->alloc);
    assert_int_equal(qg_create(&c, &w->idx), QG_OK);
    qg_config co = qg_default_config(QG_BRUTE_FORCE);
    co.bounds = c.bounds;
    assert_int_equal(qg_create(&co, &w->oracle), QG_OK);
    for (int i = 0; i < N_AGENTS; ++i) {
        w->x[i] = tu_rng_range(&w->rng, 0, w->size);
        w->y[i] = tu_rng_range(&w->rng, 0, w->size);
        w->vx[i] = tu_rng_range(&w->rng, -2, 2);
        w->vy[i] = tu_rng_range(&w->rng, -2, 2);
        /* Mostly agent-sized, a few large ones that span many leaves. */
        w->h[i] = i % 97 == 0 ? tu_rng_range(&w->rng, 20, 60) : tu_rng_range(&w->rng, 1, 4);
        const qg_rect b = agent_box(w, i);
        w->hk[i] = qg_insert(w->idx, b);
        w->ho[i] = qg_insert(w->oracle, b);
        assert_true(w->hk[i] >= 0 && w->ho[i] >= 0);
        w->live[i] = true;
    }
}

static void world_free(world *w)
{
    qg_destroy(w->idx);
    qg_destroy(w->oracle);
    assert_int_equal(w->alloc.bytes, 0);
}

/* A cleanup on both; the one under test must not ask for memory and must
 * validate afterwards. */
static void cleanup_both(world *w, int frame)
{
    const long grows = w->alloc.grow_requests;
    qg_cleanup(w->idx);
    qg_cleanup(w->oracle);
    if (w->alloc.grow_requests != grows)
        fail_msg("%s frame %d: qg_cleanup asked the allocator for memory", qg_kind_name(g_kind), frame);
    if (qg_validate(w->idx) != QG_OK)
        fail_msg("%s frame %d: qg_validate failed after qg_cleanup", qg_kind_name(g_kind), frame);
    if (qg_get_stats(w->idx).memory_bytes != w->alloc.bytes)
        fail_msg("%s frame %d: memory_bytes differs from the allocator's count", qg_kind_name(g_kind), frame);
}

/* One frame: every live agent moves; in phase "gather" the agents steer to
 * a point (leaves fill and split), in "spread" away from it (leaves empty
 * and merge); 1% are removed and 1% of the removed come back (new handles
 * may be old ones reused); then a cleanup. */
static void frame_step(world *w, int frame, int frames)
{
    const int phase = frame * 4 / frames; /* 0 drift, 1 gather, 2 spread, 3 drift */
    const float cx = w->size * 0.3f, cy = w->size * 0.6f;
    for (int i = 0; i < N_AGENTS; ++i) {
        if (!w->live[i])
            continue;
        if (phase == 1 || phase == 2) {
            const float dx = cx - w->x[i], dy = cy - w->y[i];
            const float d = sqrtf(dx * dx + dy * dy) + 1.0f;
            const float sgn = phase == 1 ? 1.0f : -1.0f;
            w->vx[i] = 0.8f * w->vx[i] + sgn * 1.5f * dx / d;
            w->vy[i] = 0.8f * w->vy[i] + sgn * 1.5f * dy / d;
        }
        w->x[i] += w->vx[i];
        w->y[i] += w->vy[i];
        if (w->x[i] < 0 || w->x[i] > w->size) {
            w->vx[i] = -w->vx[i];
            w->x[i] = w->x[i] < 0 ? 0 : w->size;
        }
        if (w->y[i] < 0 || w->y[i] > w->size) {
            w->vy[i] = -w->vy[i];
            w->y[i] = w->y[i] < 0 ? 0 : w->size;
        }
        const qg_rect b = agent_box(w, i);
        assert_int_equal(qg_move(w->idx, w->hk[i], b), QG_OK);
        assert_int_equal(qg_move(w->oracle, w->ho[i], b), QG_OK);
    }
    for (int k = 0; k < N_AGENTS / 100; ++k) {
        const int i = (int)tu_rng_below(&w->rng, N_AGENTS);
        if (w->live[i]) {
            assert_int_equal(qg_remove(w->idx, w->hk[i]), QG_OK);
            assert_int_equal(qg_remove(w->oracle, w->ho[i]), QG_OK);
            w->live[i] = false;
        } else {
            w->x[i] = tu_rng_range(&w->rng, 0, w->size);
            w->y[i] = tu_rng_range(&w->rng, 0, w->size);
            const qg_rect b = agent_box(w, i);
            w->hk[i] = qg_insert(w->idx, b);
            w->ho[i] = qg_insert(w->oracle, b);
            assert_true(w->hk[i] >= 0 && w->ho[i] >= 0);
            w->live[i] = true;
        }
    }
    cleanup_both(w, frame);
}

/* Ages w for `frames` frames, checking against the oracle every `every`. */
static void age(world *w, int frames, int every)
{
    for (int f = 0; f < frames; ++f) {
        frame_step(w, f, frames);
        if (every > 0 && (f % every == every - 1 || f == frames - 1))
            check_all(w, f);
    }
}

static int aged_frames(void)
{
    return (int)tu_scaled(300);
}

static void test_aged_differential(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const uint64_t seed = tu_env_seed(1717);
    fprintf(stderr, "aged %s differential: seed %llu, %d agents, %d frames\n", qg_kind_name(g_kind),
            (unsigned long long)seed, N_AGENTS, aged_frames());
    world *w = malloc(sizeof *w);
    assert_non_null(w);
    world_init(w, seed);
    cleanup_both(w, -1);
    check_all(w, -1);
    age(w, aged_frames(), 15);

    /* Memory returns: the same boxes in a new index hold about as much. */
    tu_alloc fa;
    tu_alloc_init(&fa);
    qg_config c = qg_default_config(g_kind);
    c.bounds = tu_rect(0, 0, w->size, w->size);
    c.allocator = tu_allocator(&fa);
    qg_index *fresh = NULL;
    assert_int_equal(qg_create(&c, &fresh), QG_OK);
    for (int i = 0; i < N_AGENTS; ++i)
        if (w->live[i])
            assert_true(qg_insert(fresh, agent_box(w, i)) >= 0);
    qg_cleanup(fresh);
    const size_t aged = qg_get_stats(w->idx).memory_bytes, rebuilt = qg_get_stats(fresh).memory_bytes;
    const qg_stats sa = qg_get_stats(w->idx), sf = qg_get_stats(fresh);
    fprintf(stderr, "aged %s: %zu bytes, %d nodes aged; %zu bytes, %d nodes rebuilt\n", qg_kind_name(g_kind), aged,
            sa.nodes, rebuilt, sf.nodes);
    /* The crowd of the gather phase needed more element nodes and nodes
     * than the spread scene does; arrays keep their peak capacity (only a
     * call that may allocate grows them, nothing shrinks them), so the
     * bound is the peak's: x3 with the 1.5x growth steps. What it catches
     * is growth without end, a leak of the layout. */
    if (tree_kind(g_kind) && aged > 3 * rebuilt + 4096)
        fail_msg("%s: aged index holds %zu bytes, the same boxes rebuilt %zu", qg_kind_name(g_kind), aged, rebuilt);
    qg_destroy(fresh);
    assert_int_equal(fa.bytes, 0);
    world_free(w);
    free(w);
}

/* Runs `what` on the aged index once with every allocation of the call
 * failing: success, or QG_ERR_NOMEM with nothing changed; then for real. */
typedef enum fop { F_MOVE_NEAR, F_MOVE_FAR, F_MOVE_HUGE, F_INSERT, F_INSERT_HUGE, F_REMOVE, F_CLEANUP } fop;
/* F_INSERT_HUGE: many extra inserts until one fails (see below). */

static qg_status apply(world *w, fop o, int i, qg_rect b, qg_handle *out)
{
    switch (o) {
    case F_MOVE_NEAR:
    case F_MOVE_FAR:
    case F_MOVE_HUGE: return qg_move(w->idx, w->hk[i], b);
    case F_INSERT:
    case F_INSERT_HUGE: {
        const qg_handle h = qg_insert(w->idx, b);
        *out = h;
        return h < 0 ? (qg_status)h : QG_OK;
    }
    case F_REMOVE: return qg_remove(w->idx, w->hk[i]);
    case F_CLEANUP: qg_cleanup(w->idx); return QG_OK;
    }
    return QG_ERR_INVALID;
}

static void test_aged_oom(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const uint64_t seed = tu_env_seed(4242);
    const int frames = aged_frames() * 2 / 3;
    fprintf(stderr, "aged %s oom: seed %llu, %d agents, %d frames\n", qg_kind_name(g_kind),
            (unsigned long long)seed, N_AGENTS, frames);
    world *w = malloc(sizeof *w);
    assert_non_null(w);
    world_init(w, seed);
    age(w, frames, 0);
    check_all(w, frames);

    tu_snapshot before = {0}, after = {0};
    char msg[256];
    long nomem = 0;
    const int ops = (int)tu_scaled(70);
    for (int k = 0; k < ops; ++k) {
        const fop o = (fop)(k % 7);
        int i = (int)tu_rng_below(&w->rng, N_AGENTS);
        for (int t = 0; t < N_AGENTS && (o == F_INSERT || o == F_INSERT_HUGE) == w->live[i]; ++t)
            i = (i + 1) % N_AGENTS;
        if ((o == F_INSERT || o == F_INSERT_HUGE) == w->live[i] && o != F_INSERT_HUGE)
            continue;
        float nx = w->x[i], ny = w->y[i], nh = w->h[i];
        if (o == F_MOVE_NEAR) {
            nx += tu_rng_range(&w->rng, -30, 30);
            ny += tu_rng_range(&w->rng, -30, 30);
        } else if (o == F_MOVE_FAR || o == F_INSERT) {
            /* Anywhere, sometimes outside the world (the trees re-fit). */
            nx = tu_rng_range(&w->rng, -0.5f * w->size, 1.5f * w->size);
            ny = tu_rng_range(&w->rng, -0.5f * w->size, 1.5f * w->size);
        } else if (o == F_MOVE_HUGE) {
            nh = w->size * 0.4f; /* in many leaves at once */
        }
        const qg_rect b = tu_rect(nx - nh, ny - nh, nx + nh, ny + nh);
        const int32_t probe = qg_count(w->idx) + N_AGENTS;
        tu_snapshot_take(w->idx, probe, &before);
        const size_t bytes = w->alloc.bytes;
        qg_handle got = -1;
        if (o == F_INSERT_HUGE) {
            /* Extra small elements, kept, each inserted with every
             * allocation failing until one call fails: the spare capacity
             * an aged index holds runs out and the failure bites. A call
             * that fails must leave the index answering as the oracle
             * (which has not had the insert), valid, holding its bytes. */
            (void)bytes;
            for (int t = 0; t < 1500; ++t) {
                const float ex = tu_rng_range(&w->rng, 0, w->size), ey = tu_rng_range(&w->rng, 0, w->size);
                const qg_rect e = tu_rect(ex, ey, ex + 3, ey + 3);
                const size_t held = w->alloc.bytes;
                w->alloc.mode = TU_FAIL_EACH_CALL;
                w->alloc.failing = true;
                qg_handle hk = qg_insert(w->idx, e);
                w->alloc.failing = false;
                tu_alloc_end_call(&w->alloc);
                const bool failed = hk == QG_ERR_NOMEM;
                if (failed) {
                    nomem++;
                    if (w->alloc.bytes != held || qg_get_stats(w->idx).memory_bytes != held ||
                        qg_validate(w->idx) != QG_OK)
                        fail_msg("%s op %d: QG_ERR_NOMEM on an insert, but the bytes changed or it is invalid",
                                 qg_kind_name(g_kind), k);
                    check_all(w, frames + k);
                    hk = qg_insert(w->idx, e);
                }
                assert_true(hk >= 0);
                assert_true(qg_insert(w->oracle, e) >= 0);
                if (failed)
                    break;
            }
            continue;
        }
        w->alloc.mode = TU_FAIL_EACH_CALL;
        w->alloc.failing = true;
        qg_status st = apply(w, o, i, b, &got);
        w->alloc.failing = false;
        tu_alloc_end_call(&w->alloc);
        assert_int_equal(w->alloc.errors, 0);
        if (qg_get_stats(w->idx).memory_bytes != w->alloc.bytes)
            fail_msg("%s op %d: memory_bytes differs from the allocator's count", qg_kind_name(g_kind), k);
        if (qg_validate(w->idx) != QG_OK)
            fail_msg("%s op %d (%d): qg_validate failed after a failing call", qg_kind_name(g_kind), k, (int)o);
        if (st == QG_ERR_NOMEM) {
            nomem++;
            tu_snapshot_take(w->idx, probe, &after);
            if (!tu_snapshot_equal(&before, &after, msg, sizeof msg))
                fail_msg("%s op %d (%d): QG_ERR_NOMEM, but the index changed: %s", qg_kind_name(g_kind), k, (int)o,
                         msg);
            if (w->alloc.bytes != bytes)
                fail_msg("%s op %d: QG_ERR_NOMEM, but the bytes held changed", qg_kind_name(g_kind), k);
            st = apply(w, o, i, b, &got);
        }
        assert_int_equal(st, QG_OK);
        /* The oracle follows the call that succeeded. */
        switch (o) {
        case F_MOVE_NEAR:
        case F_MOVE_FAR:
        case F_MOVE_HUGE: assert_int_equal(qg_move(w->oracle, w->ho[i], b), QG_OK); break;
        case F_INSERT:
        case F_INSERT_HUGE:
            w->hk[i] = got;
            w->ho[i] = qg_insert(w->oracle, b);
            assert_true(w->ho[i] >= 0);
            w->live[i] = true;
            break;
        case F_REMOVE:
            assert_int_equal(qg_remove(w->oracle, w->ho[i]), QG_OK);
            w->live[i] = false;
            break;
        case F_CLEANUP: qg_cleanup(w->oracle); break;
        }
        if (o != F_CLEANUP && o != F_REMOVE) {
            w->x[i] = nx;
            w->y[i] = ny;
            w->h[i] = nh;
        }
        if (qg_validate(w->idx) != QG_OK)
            fail_msg("%s op %d (%d): qg_validate failed", qg_kind_name(g_kind), k, (int)o);
        if (k % 15 == 14)
            check_all(w, frames + k);
    }
    fprintf(stderr, "aged %s oom: %ld of %d calls answered QG_ERR_NOMEM\n", qg_kind_name(g_kind), nomem, ops);
    /* And it ages on from there, still exact. */
    age(w, 30, 10);
    tu_snapshot_free(&before);
    tu_snapshot_free(&after);
    world_free(w);
    free(w);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aged_differential), cmocka_unit_test(test_aged_oom),
    };
    return tu_kind_main_tests(argc, argv, "aged", &g_kind, tests);
}
