// SPDX-License-Identifier: MIT
/* QG_LEVEL_QUADTREE's own invariants, through the public header: every
 * level allocated up front, inserts allocate nothing but the per-element
 * link, boxes outside the world clamp onto its border cells (not the root),
 * deep requests clamp, and the world re-fits to the elements in cleanup. */
#include "test_util.h"
#include "tree_query_cases.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static qg_index *make(int depth)
{
    qg_config c = qg_default_config(QG_LEVEL_QUADTREE);
    c.max_depth = depth;
    qg_index *ix = NULL;
    assert_int_equal(qg_create(&c, &ix), QG_OK);
    return ix;
}

static void test_complete_tree(void **state)
{
    (void)state;
    qg_index *ix = make(0); /* the text's 8 levels */
    qg_stats st = qg_get_stats(ix);
    assert_int_equal(st.nodes, 21845);
    assert_int_equal(st.leaves, 128 * 128);
    assert_true(st.memory_bytes >= 21845 * 8);
    qg_destroy(ix);
    ix = make(10);
    assert_int_equal(qg_get_stats(ix).nodes, 1398101);
    qg_destroy(ix);
}

static void test_levels_from_bits(void **state)
{
    (void)state;
    qg_index *ix = make(7); /* 1024 world, 128 finest cells of 8 */
    /* Inside one finest cell: deepest level. */
    qg_insert(ix, (qg_rect){17, 17, 18, 18});
    assert_int_equal(qg_get_stats(ix).max_depth_reached, 7);
    qg_clear(ix);
    /* Across the world's centre: the root. */
    qg_insert(ix, (qg_rect){510, 100, 514, 104});
    assert_int_equal(qg_get_stats(ix).max_depth_reached, 0);
    qg_clear(ix);
    /* Partly outside the bounds: clamped onto the border, a small box stays
     * deep (the text put it in the root, where every search tests it). */
    qg_insert(ix, (qg_rect){-1, 5, 1, 6});
    assert_int_equal(qg_get_stats(ix).max_depth_reached, 7);
    assert_int_equal(qg_validate(ix), QG_OK);
    qg_destroy(ix);
}

static void test_moves_do_not_allocate(void **state)
{
    (void)state;
    qg_index *ix = make(7);
    qg_handle h[100];
    for (int i = 0; i < 100; i++)
        h[i] = qg_insert(ix, (qg_rect){(float)i * 10, 5, (float)i * 10 + 3, 8});
    size_t before = qg_get_stats(ix).memory_bytes;
    for (int f = 0; f < 50; f++)
        for (int i = 0; i < 100; i++)
            assert_int_equal(qg_move(ix, h[i], (qg_rect){(float)(i * 10 + f), (float)f * 20,
                                                         (float)(i * 10 + f) + 3 + (float)f,
                                                         (float)f * 20 + 3}),
                             QG_OK);
    assert_int_equal(qg_get_stats(ix).memory_bytes, before);
    assert_int_equal(qg_validate(ix), QG_OK);
    qg_destroy(ix);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_complete_tree),
        cmocka_unit_test(test_levels_from_bits),
        cmocka_unit_test(test_moves_do_not_allocate),
        TQ_TREE_CASES(QG_LEVEL_QUADTREE, level_quadtree),
    };
    return tu_run_own_tests("level_quadtree", QG_LEVEL_QUADTREE, tests);
}
