// SPDX-License-Identifier: MIT
/* QG_LOOSE_QUADTREE's own invariants, through the public header: one leaf
 * per element whatever its size, boxes shrink and branches collapse in
 * qg_cleanup. */
#include "test_util.h"
#include "tree_query_cases.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static qg_index *make(void)
{
    qg_config c = qg_default_config(QG_LOOSE_QUADTREE);
    qg_index *ix = NULL;
    assert_int_equal(qg_create(&c, &ix), QG_OK);
    return ix;
}

static bool count_cb(qg_handle h, void *user)
{
    (void)h;
    ++*(int *)user;
    return true;
}

/* A world-sized element costs what a point costs. */
static void test_size_costs_nothing(void **state)
{
    (void)state;
    qg_index *a = make(), *b = make();
    for (int i = 0; i < 500; i++) {
        float x = (float)(i * 37 % 1000), y = (float)(i * 91 % 1000);
        qg_insert(a, (qg_rect){x, y, x, y});
        qg_insert(b, (qg_rect){x - 900, y - 900, x + 900, y + 900});
    }
    /* The boxes reach outside the bounds, so both worlds re-fit, and the
     * big boxes' tree is the shallower (its depth follows their size). */
    assert_true(qg_get_stats(b).memory_bytes <= qg_get_stats(a).memory_bytes);
    assert_true(qg_get_stats(b).nodes <= qg_get_stats(a).nodes);
    int n = 0;
    assert_int_equal(qg_query_point(b, 512, 512, count_cb, &n), QG_OK);
    assert_int_equal(n, 500);
    assert_int_equal(qg_validate(a), QG_OK);
    assert_int_equal(qg_validate(b), QG_OK);
    qg_destroy(a);
    qg_destroy(b);
}

static void test_cleanup_shrinks_and_collapses(void **state)
{
    (void)state;
    qg_index *ix = make();
    qg_handle h[200];
    for (int i = 0; i < 200; i++)
        h[i] = qg_insert(ix, (qg_rect){(float)(i % 20) * 50, (float)(i / 20) * 100, (float)(i % 20) * 50 + 4,
                                       (float)(i / 20) * 100 + 4});
    assert_true(qg_get_stats(ix).nodes > 1);
    /* Move one element far and back: its old leaf's box grew, cleanup shrinks it. */
    assert_int_equal(qg_move(ix, h[0], (qg_rect){0, 0, 1000, 1000}), QG_OK);
    assert_int_equal(qg_move(ix, h[0], (qg_rect){0, 0, 4, 4}), QG_OK);
    qg_query_stats before, after;
    int n = 0;
    qg_query_with_stats(ix, (qg_rect){600, 600, 601, 601}, count_cb, &n, &before);
    qg_cleanup(ix);
    assert_int_equal(qg_validate(ix), QG_OK);
    qg_query_with_stats(ix, (qg_rect){600, 600, 601, 601}, count_cb, &n, &after);
    assert_true(after.nodes_visited < before.nodes_visited);
    for (int i = 0; i < 200; i++)
        assert_int_equal(qg_remove(ix, h[i]), QG_OK);
    qg_cleanup(ix); /* one pass collapses every level */
    assert_int_equal(qg_get_stats(ix).nodes, 1);
    assert_int_equal(qg_validate(ix), QG_OK);
    qg_destroy(ix);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_costs_nothing),
        cmocka_unit_test(test_cleanup_shrinks_and_collapses),
        /* QG_QUADTREE has no test file of its own: its cases run here. */
        TQ_TREE_CASES(QG_QUADTREE, quadtree),
        TQ_TREE_CASES(QG_LOOSE_QUADTREE, loose_quadtree),
    };
    return tu_run_own_tests("loose_quadtree", QG_LOOSE_QUADTREE, tests);
}
