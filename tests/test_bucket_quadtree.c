// SPDX-License-Identifier: MIT
/* QG_BUCKET_QUADTREE's own invariants, through the public header: a full
 * bucket splits, straddlers stay up, and removal merges eagerly. */
#include "test_util.h"
#include "tree_query_cases.h"

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
    /* The structure as configured, world [0,1024]^2 included: these cases
     * test the kind's splits and bounds, not learning (test_tune.c). */
    c.fixed_sizes = true;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_and_eager_merge),
        cmocka_unit_test(test_straddler_stays_in_branch),
        cmocka_unit_test(test_depth_bound),
        TQ_TREE_CASES(QG_BUCKET_QUADTREE, bucket_quadtree),
    };
    return tu_run_own_tests("bucket_quadtree", QG_BUCKET_QUADTREE, tests);
}
