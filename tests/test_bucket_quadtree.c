/* QG_BUCKET_QUADTREE's own invariants, through the public header: a full
 * bucket splits, straddlers stay up, and removal merges eagerly. */
#include <quadgrid.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static qg_index *make(int depth, int capacity)
{
    qg_config c = qg_default_config(QG_BUCKET_QUADTREE);
    c.max_depth = depth;
    c.leaf_capacity = capacity;
    qg_index *ix = NULL;
    assert_int_equal(qg_create(&c, &ix), QG_OK);
    return ix;
}

static void test_split_and_eager_merge(void **state)
{
    (void)state;
    qg_index *ix = make(0, 0); /* defaults: depth 5, bucket 32 */
    qg_handle h[33];
    for (int i = 0; i < 32; i++)
        h[i] = qg_insert(ix, (qg_rect){(float)i * 10, 10, (float)i * 10 + 4, 14});
    assert_int_equal(qg_get_stats(ix).nodes, 1); /* full, not over */
    h[32] = qg_insert(ix, (qg_rect){700, 700, 704, 704});
    assert_int_equal(qg_get_stats(ix).nodes, 5); /* the 33rd split the root */
    assert_int_equal(qg_validate(ix), QG_OK);
    /* One removal brings the subtree back to one bucket: merged at once. */
    assert_int_equal(qg_remove(ix, h[0]), QG_OK);
    assert_int_equal(qg_get_stats(ix).nodes, 1);
    assert_int_equal(qg_validate(ix), QG_OK);
    qg_destroy(ix);
}

static void test_straddler_stays_in_branch(void **state)
{
    (void)state;
    qg_index *ix = make(3, 1);
    qg_insert(ix, (qg_rect){10, 10, 20, 20});
    qg_insert(ix, (qg_rect){600, 600, 610, 610});
    /* On the centre lines: fits no child, so it stays in the root. */
    qg_handle s = qg_insert(ix, (qg_rect){500, 500, 520, 520});
    assert_true(s >= 0);
    assert_int_equal(qg_validate(ix), QG_OK);
    qg_stats st = qg_get_stats(ix);
    assert_true(st.nodes > 1 && st.max_depth_reached <= 3);
    qg_destroy(ix);
}

static void test_depth_bound(void **state)
{
    (void)state;
    qg_index *ix = make(4, 2);
    for (int i = 0; i < 1000; i++)
        assert_true(qg_insert(ix, (qg_rect){1, 1, 2, 2}) >= 0);
    assert_int_equal(qg_get_stats(ix).max_depth_reached, 4);
    assert_int_equal(qg_validate(ix), QG_OK);
    qg_destroy(ix);
}

/* ---- issue 11: bounds are a hint ---------------------------------------
 * Outside-heavy, huge-bounds and tiny-world sequences against the
 * brute-force kind (same pairs, same query answers, qg_validate after every
 * step), a bound on the pair tests that a pile in one leaf or the root would
 * break, and fault injection on the calls that may allocate after a re-fit.
 */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct scene_spec {
    const char *name;
    qg_rect bounds;
    float scale;       /* coordinates are [-4096, 5120] or [0, 5000] times this */
    float element_size;
    bool outside;      /* spread over [-4096, 5120]^2 around [0,1024]^2 bounds */
} scene_spec;

static const scene_spec SCENES[] = {
    {"outside", {0, 0, 1024, 1024}, 1.0f, 5.0f, true},
    {"huge", {-3e38f, -3e38f, 3e38f, 3e38f}, 0x1p100f, 5.0f * 0x1p100f, false},
    {"tiny", {0, 0, 5000.0f * 0x1p-100f, 5000.0f * 0x1p-100f}, 0x1p-100f, 5.0f * 0x1p-100f, false},
    {"tiny_default_size", {0, 0, 1e-30f, 1e-30f}, 0x1p-113f, 0, false},
};

static qg_rect scene_box(tu_rng *r, const scene_spec *s)
{
    const float lo = s->outside ? -4096.0f : 0.0f, hi = s->outside ? 5120.0f : 5000.0f;
    const float h = tu_rng_range(r, 1.0f, 4.0f);
    const float x = tu_rng_range(r, lo + h, hi - h), y = tu_rng_range(r, lo + h, hi - h);
    return (qg_rect){(x - h) * s->scale, (y - h) * s->scale, (x + h) * s->scale, (y + h) * s->scale};
}

static void scene_pairs(const qg_index *ix, tu_vec *out, qg_query_stats *st)
{
    tu_collect c;
    memset(&c, 0, sizeof c);
    assert_int_equal(qg_pairs_with_stats(ix, tu_collect_pair, &c, st), QG_OK);
    assert_int_equal(c.bad_order, 0);
    tu_vec_sort(&c.out);
    *out = c.out;
}

static void scene_compare(const qg_index *k, const qg_index *b, tu_rng *r, const scene_spec *s)
{
    assert_int_equal(qg_validate(k), QG_OK);
    tu_vec pk, pb;
    qg_query_stats st;
    scene_pairs(k, &pk, &st);
    scene_pairs(b, &pb, NULL);
    assert_int_equal(pk.n, pb.n);
    assert_int_equal(tu_vec_first_diff(&pk, &pb), -1);
    /* No pile: a leaf or root holding most elements would test ~n^2/2. */
    const int32_t n = qg_count(k);
    assert_true(st.elements_tested <= 200 * (int64_t)n + 1000);
    tu_vec_free(&pk);
    tu_vec_free(&pb);
    for (int q = 0; q < 20; q++) {
        qg_rect a = scene_box(r, s);
        const float grow = (float)q * 10.0f * s->scale;
        a.min_x -= grow;
        a.min_y -= grow;
        a.max_x += grow;
        a.max_y += grow;
        tu_collect ck, cb;
        memset(&ck, 0, sizeof ck);
        memset(&cb, 0, sizeof cb);
        assert_int_equal(qg_query(k, a, tu_collect_query, &ck), QG_OK);
        assert_int_equal(qg_query(b, a, tu_collect_query, &cb), QG_OK);
        tu_vec_sort(&ck.out);
        tu_vec_sort(&cb.out);
        assert_int_equal(tu_vec_first_diff(&ck.out, &cb.out), -1);
        tu_vec_free(&ck.out);
        tu_vec_free(&cb.out);
    }
}

static void scene_sequence(qg_kind kind)
{
    for (size_t si = 0; si < sizeof SCENES / sizeof *SCENES; si++) {
        const scene_spec *s = &SCENES[si];
        qg_config ck = qg_default_config(kind), cb = qg_default_config(QG_BRUTE_FORCE);
        ck.bounds = cb.bounds = s->bounds;
        ck.element_size = s->element_size;
        qg_index *k = NULL, *b = NULL;
        assert_int_equal(qg_create(&ck, &k), QG_OK);
        assert_int_equal(qg_create(&cb, &b), QG_OK);
        tu_rng r;
        tu_rng_seed(&r, 1100 + si);
        enum { N = 3000 };
        for (int i = 0; i < N; i++) {
            const qg_rect box = scene_box(&r, s);
            assert_int_equal(qg_insert(k, box), i);
            assert_int_equal(qg_insert(b, box), i);
        }
        qg_cleanup(k);
        qg_cleanup(b);
        scene_compare(k, b, &r, s);
        for (int frame = 0; frame < 12; frame++) {
            for (int i = 0; i < N; i++) {
                qg_rect box;
                if (qg_get(k, i, &box) != QG_OK)
                    continue;
                if (tu_rng_chance(&r, 0.02)) {
                    box = scene_box(&r, s); /* teleport */
                } else {
                    const float dx = tu_rng_range(&r, -2, 2) * s->scale, dy = tu_rng_range(&r, -2, 2) * s->scale;
                    box = (qg_rect){box.min_x + dx, box.min_y + dy, box.max_x + dx, box.max_y + dy};
                }
                assert_int_equal(qg_move(k, i, box), QG_OK);
                assert_int_equal(qg_move(b, i, box), QG_OK);
            }
            /* Churn: some leave, as many come back (in slots freed). */
            for (int j = 0; j < 100; j++) {
                const qg_handle h = (qg_handle)tu_rng_below(&r, N);
                if (qg_remove(k, h) == QG_OK)
                    assert_int_equal(qg_remove(b, h), QG_OK);
            }
            while (qg_count(k) < N) {
                const qg_rect box = scene_box(&r, s);
                const qg_handle h = qg_insert(k, box);
                assert_true(h >= 0);
                assert_int_equal(qg_insert(b, box), h);
            }
            if (frame == 6) {
                /* The population walks off: a re-fit that grows the world. */
                for (int i = 0; i < N; i++) {
                    qg_rect box;
                    assert_int_equal(qg_get(k, i, &box), QG_OK);
                    const float d = 20000.0f * s->scale;
                    box = (qg_rect){box.min_x + d, box.min_y - d, box.max_x + d, box.max_y - d};
                    assert_int_equal(qg_move(k, i, box), QG_OK);
                    assert_int_equal(qg_move(b, i, box), QG_OK);
                }
            }
            assert_int_equal(qg_validate(k), QG_OK);
            qg_cleanup(k);
            qg_cleanup(b);
            scene_compare(k, b, &r, s);
        }
        qg_destroy(k);
        qg_destroy(b);
    }
}

/* Fault injection on the calls that may allocate after a re-fit (the next
 * insert or move splits what the re-fit could not): fail the k-th
 * allocation; a call that answers QG_ERR_NOMEM leaves the index answering
 * exactly as before, valid, and holding exactly what its allocator gave. */
static void scene_oom(qg_kind kind)
{
    for (long fail_at = 1;; fail_at++) {
        tu_alloc a;
        tu_alloc_init(&a);
        a.mode = TU_FAIL_ONCE;
        a.fail_at = fail_at;
        qg_config c = qg_default_config(kind);
        c.element_size = 5;
        c.allocator = tu_allocator(&a);
        qg_index *ix = NULL;
        if (qg_create(&c, &ix) != QG_OK) {
            assert_int_equal(a.bytes, 0);
            continue;
        }
        tu_rng r;
        tu_rng_seed(&r, 77);
        const scene_spec *s = &SCENES[0];
        int32_t live = 0;
        for (int step = 0; step < 700; step++) {
            tu_snapshot before, after;
            memset(&before, 0, sizeof before);
            memset(&after, 0, sizeof after);
            tu_snapshot_take(ix, live, &before);
            qg_status st;
            if (step < 600 || tu_rng_chance(&r, 0.3)) {
                const qg_handle h = qg_insert(ix, scene_box(&r, s));
                st = h < 0 ? (qg_status)h : QG_OK;
                if (h >= live)
                    live = h + 1;
            } else {
                st = qg_move(ix, (qg_handle)tu_rng_below(&r, (uint32_t)live), scene_box(&r, s));
            }
            if (step % 100 == 99)
                qg_cleanup(ix); /* re-fits, never allocates */
            if (st != QG_OK) {
                assert_int_equal(st, QG_ERR_NOMEM);
                tu_snapshot_take(ix, live, &after);
                char msg[256];
                if (!tu_snapshot_equal(&before, &after, msg, sizeof msg))
                    fail_msg("fail_at %ld step %d: %s", fail_at, step, msg);
                tu_snapshot_free(&after);
            }
            tu_snapshot_free(&before);
            assert_int_equal(qg_validate(ix), QG_OK);
            assert_int_equal(qg_get_stats(ix).memory_bytes, a.bytes);
        }
        qg_destroy(ix);
        assert_int_equal(a.bytes, 0);
        assert_int_equal(a.errors, 0);
        if (a.injected == 0)
            break; /* the script never reached the k-th allocation */
    }
}

static void test_scenes(void **state)
{
    (void)state;
    scene_sequence(QG_BUCKET_QUADTREE);
}

static void test_refit_oom(void **state)
{
    (void)state;
    scene_oom(QG_BUCKET_QUADTREE);
}

int main(void)
{
    if (!qg_kind_available(QG_BUCKET_QUADTREE))
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_and_eager_merge),
        cmocka_unit_test(test_straddler_stays_in_branch),
        cmocka_unit_test(test_depth_bound),
        cmocka_unit_test(test_scenes),
        cmocka_unit_test(test_refit_oom),
    };
    return cmocka_run_group_tests_name("bucket_quadtree", tests, NULL, NULL);
}
