// SPDX-License-Identifier: MIT
/* Fault injection, for one kind (argv[1]).
 *
 * A scripted run (create, ~300 mixed operations with splits, moves, removes,
 * cleanups, a clear and queries, destroy) is repeated once for every k: run k
 * fails the k-th allocate-or-grow request (never a shrink or a free, which the
 * contract says cannot fail). Whenever a call answers QG_ERR_NOMEM, the index
 * must answer exactly as before the call, validate, hold exactly the bytes its
 * allocator gave it, and work again when the call is retried. The runs stop at
 * the first k the script never reaches. */
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

typedef enum op_kind {
    OP_INSERT,
    OP_REMOVE,
    OP_MOVE,
    OP_CLEANUP,
    OP_CLEAR,
    OP_QUERY,
    OP_QUERY_POINT,
    OP_PAIRS,
} op_kind;

static const char *const OP_NAMES[] = {"insert", "remove", "move", "cleanup",
                                       "clear", "query", "query_point", "pairs"};

typedef struct op {
    op_kind kind;
    int slot; /* the script's own name for an element */
    qg_rect box;
} op;

#define MAX_OPS 400
#define MAX_SLOTS 400

typedef struct script {
    op ops[MAX_OPS];
    int n;
    int slots;
} script;

/* The script is made once from a fixed seed, so every run is the same. */
static void make_script(script *s, int scale)
{
    tu_rng r;
    tu_rng_seed(&r, 20240601);
    bool live[MAX_SLOTS] = {false};
    int nslots = 0;
    s->n = 0;
#define PUSH(K, S, B) (s->ops[s->n++] = (op){(K), (S), (B)})
    int target = 300 * scale;
    if (target > MAX_OPS - 20)
        target = MAX_OPS - 20;
    while (s->n < target) {
        int phase = s->n * 6 / target;
        uint32_t k = tu_rng_below(&r, 100);
        int pick = -1;
        for (int t = 0; t < 20 && nslots; t++) {
            int c = (int)tu_rng_below(&r, (uint32_t)nslots);
            if (live[c]) {
                pick = c;
                break;
            }
        }
        /* Clustered boxes force splits down several levels. */
        float cx = phase % 2 ? 700 : 130, cy = phase % 2 ? 300 : 900;
        float spread = tu_rng_chance(&r, 0.7) ? 20 : 500;
        float x = cx + tu_rng_range(&r, -spread, spread), y = cy + tu_rng_range(&r, -spread, spread);
        float w = tu_rng_chance(&r, 0.1) ? 0 : tu_rng_range(&r, 0, 8);
        /* Huge moves, and huge inserts once handles are free for reuse,
         * need many new entries at once: growth in the middle of the call. */
        if (tu_rng_chance(&r, (k >= 45 && k < 75) || phase >= 2 ? 0.15 : 0.04))
            w = 3000; /* wider than the world: in every leaf */
        qg_rect box = tu_rect(x, y, x + w, y + w);

        bool inserting = phase == 0 || phase == 4 ? k < 75 : k < 25;
        if ((inserting || pick < 0) && nslots < MAX_SLOTS) {
            live[nslots] = true;
            PUSH(OP_INSERT, nslots, box);
            nslots++;
        } else if (k < 45 && pick >= 0) {
            live[pick] = false;
            PUSH(OP_REMOVE, pick, box);
        } else if (k < 75 && pick >= 0) {
            PUSH(OP_MOVE, pick, box);
        } else if (k < 82) {
            PUSH(OP_CLEANUP, -1, box);
        } else if (k < 90) {
            PUSH(OP_QUERY, -1, tu_rect(x - 100, y - 100, x + 100, y + 100));
        } else if (k < 95) {
            PUSH(OP_QUERY_POINT, -1, tu_rect(x, y, x, y));
        } else {
            PUSH(OP_PAIRS, -1, box);
        }
        if (s->n == target * 4 / 6) { /* a clear, then the refill of phase 4 */
            PUSH(OP_CLEAR, -1, box);
            for (int i = 0; i < nslots; i++)
                live[i] = false;
        }
    }
    for (int i = 0; i < 3; i++)
        PUSH(OP_CLEANUP, -1, tu_rect(0, 0, 0, 0));
    PUSH(OP_PAIRS, -1, tu_rect(0, 0, 0, 0));
#undef PUSH
    s->slots = nslots;
}

/* What the script expects the index to hold. */
typedef struct model {
    bool live[MAX_SLOTS];
    qg_rect box[MAX_SLOTS];
    qg_handle h[MAX_SLOTS];
    int32_t count;
    qg_handle max_handle;
} model;

typedef struct run {
    const char *mode;
    int config;
    long k;
    int step;
    const char *op;
} run;

static void rfail(const run *r, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    print_error("FAILED kind=%s mode=%s config=%d fail_at=%ld step=%d op=%s: %s\n",
                qg_kind_name(g_kind), r->mode, r->config, r->k, r->step, r->op, msg);
    fail();
}

static void check_mem(const run *r, const qg_index *idx, const tu_alloc *a)
{
    if (a->errors)
        rfail(r, "allocator misuse: %s", a->last_error);
    size_t mb = qg_get_stats(idx).memory_bytes;
    if (mb != a->bytes)
        rfail(r, "memory_bytes %zu, but the allocator holds %zu", mb, a->bytes);
}

/* The index answers what the model says: count, every slot's box, and a
 * query of the whole plane. */
static void check_model(const run *r, const qg_index *idx, const model *m)
{
    if (qg_count(idx) != m->count)
        rfail(r, "qg_count %d, expected %d", qg_count(idx), m->count);
    for (int i = 0; i < MAX_SLOTS; i++) {
        if (!m->live[i])
            continue;
        qg_rect g;
        qg_status st = qg_get(idx, m->h[i], &g);
        if (st != QG_OK || !tu_rect_same(g, m->box[i]))
            rfail(r, "slot %d (handle %d): qg_get = %s or a different box", i, m->h[i],
                  qg_status_name(st));
    }
    tu_collect c = {0};
    if (qg_query(idx, tu_rect(-INF, -INF, INF, INF), tu_collect_query, &c) != QG_OK)
        rfail(r, "whole-plane query failed");
    if (c.calls != m->count)
        rfail(r, "whole-plane query found %ld, expected %d", c.calls, m->count);
    tu_vec_free(&c.out);
}

static qg_status call_op(qg_index *idx, const op *o, const model *m, qg_handle *inserted)
{
    tu_collect c = {0};
    qg_status st = QG_OK;
    switch (o->kind) {
    case OP_INSERT: {
        qg_handle h = qg_insert(idx, o->box);
        *inserted = h;
        st = h < 0 ? (qg_status)h : QG_OK;
        break;
    }
    case OP_REMOVE: st = qg_remove(idx, m->h[o->slot]); break;
    case OP_MOVE: st = qg_move(idx, m->h[o->slot], o->box); break;
    case OP_CLEANUP: qg_cleanup(idx); break;
    case OP_CLEAR: qg_clear(idx); break;
    case OP_QUERY: st = qg_query(idx, o->box, tu_collect_query, &c); break;
    case OP_QUERY_POINT:
        st = qg_query_point(idx, o->box.min_x, o->box.min_y, tu_collect_query, &c);
        break;
    case OP_PAIRS: st = qg_pairs(idx, tu_collect_pair, &c); break;
    }
    tu_vec_free(&c.out);
    return st;
}

static void apply_model(model *m, const op *o, qg_handle inserted)
{
    switch (o->kind) {
    case OP_INSERT:
        m->live[o->slot] = true;
        m->box[o->slot] = o->box;
        m->h[o->slot] = inserted;
        m->count++;
        if (inserted > m->max_handle)
            m->max_handle = inserted;
        break;
    case OP_REMOVE:
        m->live[o->slot] = false;
        m->count--;
        break;
    case OP_MOVE: m->box[o->slot] = o->box; break;
    case OP_CLEAR:
        for (int i = 0; i < MAX_SLOTS; i++)
            m->live[i] = false;
        m->count = 0;
        break;
    default: break;
    }
}

/* Config 0: the defaults. Config 1: tiny leaves, a deep tree, small grid
 * cells and bounds off the origin, so far more nodes and cells get made. */
#define N_OOM_CONFIGS 2

static qg_config oom_config(tu_alloc *a, int which)
{
    qg_config c = qg_default_config(g_kind);
    c.allocator = tu_allocator(a);
    if (which == 1) {
        c.bounds = tu_rect(-24, 40, 1000, 1064);
        c.leaf_capacity = 1;
        c.max_depth = 10;
        c.element_size = 4;
        c.cell_size = 6;
    }
    /* The point grid's levels: boxes up to 8 wide span levels 0-1 with the
     * default bound (a 256th of the bounds) and 0-2 with a bound of 2, so
     * moves between levels meet every failure too. */
    if (g_kind == QG_POINT_GRID && which == 1)
        c.max_element_size = 2;
    return c;
}

/* The handle each insert of the script got in a run with no failures. A
 * failed call leaves the index exactly as it was, free list included, so
 * every later insert must get the same handle as in that run. */
static qg_handle g_ref_handle[MAX_OPS];
static bool g_have_ref;

/* Grow requests the last run_script saw. */
static long g_last_requests;

/* How many calls answered QG_ERR_NOMEM, by operation: printed, so a script
 * that never makes a move or a clear fail shows it. */
static long g_nomem_by_op[8];

/* One run of the script with the k-th grow request failing. Returns the
 * number of failures injected (0: the script never reached request k). */
static long run_script(const script *s, int config, long k, tu_fail_mode mode, const char *mode_name)
{
    run r = {mode_name, config, k, -1, "create"};
    tu_alloc a;
    tu_alloc_init(&a);
    a.fail_at = k;
    a.mode = mode;
    qg_config cfg = oom_config(&a, config);

    qg_index *idx = (qg_index *)&a;
    a.failing = mode == TU_FAIL_EACH_CALL;
    qg_status st = qg_create(&cfg, &idx);
    tu_alloc_end_call(&a);
    if (st == QG_ERR_NOMEM) {
        if (idx != NULL)
            rfail(&r, "qg_create failed but *out is not NULL");
        if (a.bytes != 0 || a.blocks != 0)
            rfail(&r, "qg_create failed and leaked %zu bytes", a.bytes);
        if (a.injected == 0)
            rfail(&r, "qg_create answered QG_ERR_NOMEM with no failure injected");
        st = qg_create(&cfg, &idx);
    }
    if (st != QG_OK)
        rfail(&r, "qg_create = %s", qg_status_name(st));
    check_mem(&r, idx, &a);

    model *m = calloc(1, sizeof *m);
    assert_non_null(m);
    tu_snapshot before = {0}, after = {0};
    char msg[256];
    for (int i = 0; i < s->n; i++) {
        const op *o = &s->ops[i];
        r.step = i;
        r.op = OP_NAMES[o->kind];
        int32_t probe = m->max_handle + 4;
        bool mutating = o->kind <= OP_CLEAR;
        if (mutating)
            tu_snapshot_take(idx, probe, &before);
        long injected = a.injected;
        qg_handle inserted = -1;
        a.failing = mode == TU_FAIL_EACH_CALL && o->kind != OP_CLEANUP && o->kind != OP_CLEAR;
        st = call_op(idx, o, m, &inserted);
        tu_alloc_end_call(&a);
        bool failed_here = a.injected != injected;
        check_mem(&r, idx, &a);

        if (st == QG_ERR_NOMEM) {
            g_nomem_by_op[o->kind]++;
            if (!failed_here)
                rfail(&r, "QG_ERR_NOMEM with no failure injected in this call");
            if (qg_validate(idx) != QG_OK)
                rfail(&r, "qg_validate failed after QG_ERR_NOMEM");
            if (mutating) {
                tu_snapshot_take(idx, probe, &after);
                if (!tu_snapshot_equal(&before, &after, msg, sizeof msg))
                    rfail(&r, "QG_ERR_NOMEM, but the index changed: %s", msg);
            }
            /* Retry with the failure behind us: the script stays in step. */
            long inj = a.injected;
            st = call_op(idx, o, m, &inserted);
            tu_alloc_end_call(&a);
            if (a.injected != inj)
                rfail(&r, "the retry saw an injected failure (test bug)");
            check_mem(&r, idx, &a);
        } else if (failed_here && (o->kind == OP_CLEANUP || o->kind == OP_CLEAR)) {
            rfail(&r, "asked to grow memory, which this void call cannot report");
        }
        if (st != QG_OK)
            rfail(&r, "status %s", qg_status_name(st));
        if (o->kind == OP_INSERT) {
            if (!g_have_ref)
                g_ref_handle[i] = inserted;
            else if (inserted != g_ref_handle[i])
                rfail(&r, "insert gave handle %d, but %d in the run without failures: an "
                          "earlier failed call changed the free list",
                      inserted, g_ref_handle[i]);
        }
        apply_model(m, o, inserted);
        if (qg_validate(idx) != QG_OK)
            rfail(&r, "qg_validate failed");
        check_model(&r, idx, m);
        check_mem(&r, idx, &a);
    }
    tu_snapshot_free(&before);
    tu_snapshot_free(&after);
    free(m);
    r.op = "destroy";
    qg_destroy(idx);
    if (a.bytes != 0 || a.blocks != 0)
        rfail(&r, "after qg_destroy the allocator still holds %zu bytes in %zu blocks", a.bytes,
              a.blocks);
    if (a.errors)
        rfail(&r, "allocator misuse: %s", a.last_error);
    g_last_requests = a.grow_requests;
    return a.injected;
}

static void print_tally(const char *what)
{
    fprintf(stderr, "oom %s %s: QG_ERR_NOMEM answers:", qg_kind_name(g_kind), what);
    for (int i = 0; i < 8; i++)
        if (g_nomem_by_op[i])
            fprintf(stderr, " %s %ld", OP_NAMES[i], g_nomem_by_op[i]);
    fprintf(stderr, "\n");
    memset(g_nomem_by_op, 0, sizeof g_nomem_by_op);
}

/* Which k to fail. Every k when the script makes few requests; a kind with
 * hundreds (grids grow per-row arrays) gets the first half of the budget
 * consecutively and the rest spread evenly to the last request, so a run
 * stays within the time budget (QG_TEST_SCALE raises it). */
static long next_k(long k, long total, long budget)
{
    if (total <= budget || k < budget / 2)
        return k + 1;
    long first = budget / 2, rest = budget - first;
    long stride = (total - first + rest - 1) / rest;
    long n = k + (stride > 1 ? stride : 1);
    return n > total && k < total ? total : n;
}

static void every_k(tu_fail_mode mode, const char *name)
{
    tu_skip_unless_built(g_kind);
    script *s = malloc(sizeof *s);
    assert_non_null(s);
    make_script(s, (int)(tu_scale() >= 2 ? 2 : 1));
    long budget = (long)(60 * tu_scale());
    if (budget < 12) /* sanitized builds run with a small scale */
        budget = 12;
    for (int c = 0; c < N_OOM_CONFIGS; c++) {
        g_have_ref = false;
        assert_int_equal(run_script(s, c, 0, mode, "reference"), 0);
        g_have_ref = true;
        long total = g_last_requests, runs = 0;
        for (long k = 1; k <= total; k = next_k(k, total, budget)) {
            if (run_script(s, c, k, mode, name) == 0)
                fail_msg("%s config %d: request %ld of %ld never came (the runs are not "
                         "deterministic)",
                         name, c, k, total);
            runs++;
        }
        /* One past the last request: the script runs with no failure. */
        assert_int_equal(run_script(s, c, total + 1, mode, name), 0);
        fprintf(stderr, "oom %s %s config %d: %d ops, %ld grow requests, %s (%ld runs)\n",
                qg_kind_name(g_kind), name, c, s->n, total,
                runs == total ? "each failed in turn" : "a sample failed in turn", runs);
        /* A script that never allocates proves nothing. */
        assert_true(total > 2);
    }
    print_tally(name);
    free(s);
}

static void test_fail_once(void **state)
{
    (void)state;
    every_k(TU_FAIL_ONCE, "once");
}

/* Every request from the k-th on fails until the call returns, so code
 * that tries to recover by allocating fails too. */
static void test_fail_sticky(void **state)
{
    (void)state;
    every_k(TU_FAIL_STICKY, "sticky");
}

/* One run in which every call first runs with all its grow requests
 * failing, then again without: each call that allocates at all is checked,
 * wherever the script's growth points fall. */
static void test_fail_each_call(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    script *s = malloc(sizeof *s);
    assert_non_null(s);
    make_script(s, (int)(tu_scale() >= 2 ? 2 : 1));
    for (int c = 0; c < N_OOM_CONFIGS; c++) {
        g_have_ref = false;
        assert_int_equal(run_script(s, c, 0, TU_FAIL_ONCE, "reference"), 0);
        g_have_ref = true;
        assert_true(run_script(s, c, 0, TU_FAIL_EACH_CALL, "each_call") > 0);
    }
    print_tally("each_call");
    free(s);
}

/* Inserts and moves that need many new entries at once (boxes wider than
 * the world) while freed handles wait for reuse, each first with all its
 * grow requests failing. After the failure the free list must be intact:
 * the retried insert gets one of the freed handles. */
static void test_reuse_after_failure(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    for (int c = 0; c < N_OOM_CONFIGS; c++) {
        run r = {"reuse_after_failure", c, 0, -1, "setup"};
        tu_alloc a;
        tu_alloc_init(&a);
        a.mode = TU_FAIL_EACH_CALL;
        qg_config cfg = oom_config(&a, c);
        qg_index *idx = NULL;
        assert_int_equal(qg_create(&cfg, &idx), QG_OK);
        enum { N = 300 };
        qg_handle h[N];
        bool live[N];
        tu_rng rng;
        tu_rng_seed(&rng, 31337);
        for (int i = 0; i < N; i++) {
            float x = tu_rng_range(&rng, 0, 1000), y = tu_rng_range(&rng, 40, 1040);
            h[i] = qg_insert(idx, tu_rect(x, y, x + 2, y + 2));
            assert_true(h[i] >= 0);
            live[i] = true;
        }
        long nomem = 0;
        tu_snapshot before = {0}, after = {0};
        char msg[256];
        for (int step = 0; step < 60; step++) {
            r.step = step;
            /* Keep a few handles free. */
            for (int j = 0; j < 3; j++) {
                int i = (int)tu_rng_below(&rng, N);
                if (live[i]) {
                    assert_int_equal(qg_remove(idx, h[i]), QG_OK);
                    live[i] = false;
                }
            }
            float x = tu_rng_range(&rng, -100, 100);
            qg_rect huge = tu_rect(x - 1500, -1500, x + 2500, 2500); /* wider than the world */
            bool do_move = step % 3 == 2;
            int target = -1;
            for (int i = 0; i < N && do_move; i++)
                if (live[i])
                    target = i;
            do_move = target >= 0;
            r.op = do_move ? "move" : "insert";
            tu_snapshot_take(idx, N + 8, &before);
            a.failing = true;
            qg_handle got = do_move ? (qg_handle)qg_move(idx, h[target], huge) : qg_insert(idx, huge);
            a.failing = false;
            check_mem(&r, idx, &a);
            if (got == QG_ERR_NOMEM) {
                nomem++;
                if (qg_validate(idx) != QG_OK)
                    rfail(&r, "qg_validate failed after QG_ERR_NOMEM");
                tu_snapshot_take(idx, N + 8, &after);
                if (!tu_snapshot_equal(&before, &after, msg, sizeof msg))
                    rfail(&r, "QG_ERR_NOMEM, but the index changed: %s", msg);
                got = do_move ? (qg_handle)qg_move(idx, h[target], huge) : qg_insert(idx, huge);
            }
            if (got < 0)
                rfail(&r, "status %s", qg_status_name((qg_status)got));
            if (!do_move) {
                int slot = -1;
                for (int i = 0; i < N; i++)
                    if (!live[i] && h[i] == got)
                        slot = i;
                if (slot < 0)
                    rfail(&r, "insert gave handle %d, not one of the freed handles", got);
                live[slot] = true;
            }
            if (qg_validate(idx) != QG_OK)
                rfail(&r, "qg_validate failed");
            check_mem(&r, idx, &a);
        }
        fprintf(stderr, "oom %s reuse_after_failure config %d: %ld calls answered QG_ERR_NOMEM\n",
                qg_kind_name(g_kind), c, nomem);
        tu_snapshot_free(&before);
        tu_snapshot_free(&after);
        qg_destroy(idx);
        assert_int_equal(a.bytes, 0);
    }
}

/* A create that fails at any point returns QG_ERR_NOMEM, sets *out to NULL
 * and holds nothing, for a few configs (tiny and large initial sizes). */
static void test_create_fails(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const qg_rect bounds[] = {{0, 0, 1024, 1024}, {-5, -5, 5, 5}, {0, 0, 100000, 100}};
    for (size_t b = 0; b < sizeof bounds / sizeof *bounds; b++)
        for (long k = 1; k < 1000; k++) {
            tu_alloc a;
            tu_alloc_init(&a);
            a.fail_at = k;
            qg_config c = oom_config(&a, 0);
            c.bounds = bounds[b];
            qg_index *idx = (qg_index *)&a;
            qg_status st = qg_create(&c, &idx);
            if (a.injected == 0) {
                assert_int_equal(st, QG_OK);
                qg_destroy(idx);
                assert_int_equal(a.bytes, 0);
                break;
            }
            if (st != QG_ERR_NOMEM)
                fail_msg("bounds %zu, fail_at %ld: qg_create = %s", b, k, qg_status_name(st));
            assert_null(idx);
            assert_int_equal(a.bytes, 0);
            assert_int_equal(a.blocks, 0);
        }
}

int main(int argc, char **argv)
{
    if (!tu_kind_arg(argc, argv, &g_kind))
        return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_fails),
        cmocka_unit_test(test_fail_once),
        cmocka_unit_test(test_fail_sticky),
        cmocka_unit_test(test_fail_each_call),
        cmocka_unit_test(test_reuse_after_failure),
    };
    return tu_run_kind_tests("oom", g_kind, tests);
}
