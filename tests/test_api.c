// SPDX-License-Identifier: MIT
/* Unit tests of every public function, for one kind (argv[1]).
 *
 * Every index here uses a counting allocator, and after every call the test
 * checks memory_bytes against what that allocator saw: a library that forgets
 * to count one realloc, or counts a block it freed, fails here first. */
#include "test_util.h"

#include <ctype.h>
#include <float.h>
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

typedef struct fx {
    tu_alloc a;
    qg_config cfg;
    qg_index *idx;
} fx;

/* memory_bytes must be exactly what the allocator holds, and the library must
 * never have passed a wrong old_size or a foreign pointer. */
#define CHECK_MEM(f)                                                                       \
    do {                                                                                   \
        if ((f)->a.errors)                                                                 \
            fail_msg("allocator misuse: %s", (f)->a.last_error);                         \
        assert_int_equal(qg_get_stats((f)->idx).memory_bytes, (f)->a.bytes);              \
        assert_int_equal(qg_validate((f)->idx), QG_OK);                                   \
        assert_int_equal(qg_get_stats((f)->idx).elements, qg_count((f)->idx));            \
    } while (0)

static int fx_setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    tu_alloc_init(&f->a);
    f->cfg = qg_default_config(g_kind);
    f->cfg.allocator = tu_allocator(&f->a);
    if (qg_kind_available(g_kind) && qg_create(&f->cfg, &f->idx) != QG_OK)
        return -1;
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    fx *f = *state;
    qg_destroy(f->idx);
    int bad = f->a.bytes != 0 || f->a.blocks != 0 || f->a.errors != 0;
    if (bad)
        fprintf(stderr, "after qg_destroy: %zu bytes in %zu blocks still held, %ld misuse (%s)\n",
                f->a.bytes, f->a.blocks, f->a.errors, f->a.last_error);
    free(f);
    return bad ? -1 : 0;
}

static fx *need_index(void **state)
{
    fx *f = *state;
    if (!f->idx)
        skip();
    return f;
}

static qg_handle ins(fx *f, float x0, float y0, float x1, float y1)
{
    qg_handle h = qg_insert(f->idx, tu_rect(x0, y0, x1, y1));
    if (h < 0)
        fail_msg("qg_insert(%g,%g,%g,%g) = %s", (double)x0, (double)y0, (double)x1, (double)y1,
                 qg_status_name((qg_status)h));
    CHECK_MEM(f);
    return h;
}

/* Sorted handles a query returns. */
static tu_vec query_sorted(const qg_index *idx, qg_rect area, qg_status *st)
{
    tu_collect c = {0};
    *st = qg_query(idx, area, tu_collect_query, &c);
    tu_vec_sort(&c.out);
    return c.out;
}

static size_t query_count(const qg_index *idx, qg_rect area)
{
    qg_status st;
    tu_vec v = query_sorted(idx, area, &st);
    assert_int_equal(st, QG_OK);
    int64_t dup;
    if (tu_vec_has_dup(&v, &dup))
        fail_msg("query reported handle %lld twice", (long long)dup);
    size_t n = v.n;
    tu_vec_free(&v);
    return n;
}

static bool query_has(const qg_index *idx, qg_rect area, qg_handle h)
{
    qg_status st;
    tu_vec v = query_sorted(idx, area, &st);
    assert_int_equal(st, QG_OK);
    bool found = false;
    for (size_t i = 0; i < v.n; i++)
        found |= v.v[i] == h;
    tu_vec_free(&v);
    return found;
}

/* ---- names and defaults (no index needed) ---------------------------- */

static void test_default_config(void **state)
{
    (void)state;
    for (int k = 0; k < QG_KIND_COUNT; k++) {
        qg_config c = qg_default_config((qg_kind)k);
        assert_int_equal(c.kind, k);
        /* bounds all zero: no hint; nothing to set, sizes learned */
        assert_true(c.bounds.min_x == 0 && c.bounds.min_y == 0);
        assert_true(c.bounds.max_x == 0 && c.bounds.max_y == 0);
        assert_false(c.fixed_sizes);
        assert_true(c.element_size == 0);
        assert_true(c.max_element_size >= 0);
        assert_int_equal(c.max_depth, 0);
        assert_int_equal(c.leaf_capacity, 0);
        assert_true(c.cell_size == 0);
        assert_null(c.allocator.realloc);
        assert_null(c.allocator.user);
    }
}

static void test_kind_names(void **state)
{
    (void)state;
    /* The list's names, and its enum names: each kind's name is its enum
     * name in lower case (QG_KIND_LIST writes both, so a line with the two
     * out of step is caught here). */
#define NAME_(NAME, name, summary) #name,
#define ENUM_(NAME, name, summary) #NAME,
    static const char *const names[QG_KIND_COUNT] = {QG_KIND_LIST(NAME_)};
    static const char *const enums[QG_KIND_COUNT] = {QG_KIND_LIST(ENUM_)};
#undef NAME_
#undef ENUM_
    for (int k = 0; k < QG_KIND_COUNT; k++) {
        const char *n = qg_kind_name((qg_kind)k);
        assert_non_null(n);
        assert_string_equal(n, names[k]);
        assert_int_equal(strlen(n), strlen(enums[k]));
        for (size_t c = 0; n[c] != '\0'; c++)
            assert_int_equal(n[c], tolower((unsigned char)enums[k][c]));
        qg_kind back = QG_KIND_COUNT;
        assert_int_equal(qg_kind_from_name(n, &back), QG_OK);
        assert_int_equal(back, k);
    }
    assert_null(qg_kind_name(QG_KIND_COUNT));
    assert_null(qg_kind_name((qg_kind)-1));
    assert_null(qg_kind_name((qg_kind)1000));

    /* Prefixes, suffixes and near misses must not match (strncmp bugs). */
    static const char *const bad[] = {"", "quad", "quadtreex", "quadtree ", " quadtree",
                                      "grid2", "brute", "brute_forc", "unknown"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        qg_kind out = QG_QUADTREE;
        if (qg_kind_from_name(bad[i], &out) != QG_ERR_INVALID)
            fail_msg("qg_kind_from_name(\"%s\") accepted", bad[i]);
    }
    qg_kind out;
    assert_int_equal(qg_kind_from_name(NULL, &out), QG_ERR_INVALID);
    assert_int_equal(qg_kind_from_name("quadtree", NULL), QG_ERR_INVALID);
}

static void test_status_names(void **state)
{
    (void)state;
    assert_string_equal(qg_status_name(QG_OK), "QG_OK");
    assert_string_equal(qg_status_name(QG_ERR_INVALID), "QG_ERR_INVALID");
    assert_string_equal(qg_status_name(QG_ERR_HANDLE), "QG_ERR_HANDLE");
    assert_string_equal(qg_status_name(QG_ERR_NOMEM), "QG_ERR_NOMEM");
    assert_string_equal(qg_status_name(QG_ERR_CAPACITY), "QG_ERR_CAPACITY");
    int other[] = {1, 2, -5, 100, -100, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof other / sizeof *other; i++)
        assert_string_equal(qg_status_name((qg_status)other[i]), "QG_ERR_UNKNOWN");
}

static void test_null_index(void **state)
{
    (void)state;
    qg_destroy(NULL);
    assert_int_equal(qg_count(NULL), 0);
    qg_stats s = qg_get_stats(NULL);
    assert_int_equal(s.memory_bytes, 0);
    assert_int_equal(s.elements, 0);
    assert_int_equal(s.nodes, 0);
    assert_int_equal(s.leaves, 0);
    assert_int_equal(s.max_depth_reached, 0);
    qg_rect r;
    tu_collect c = {0};
    assert_true(qg_insert(NULL, tu_rect(0, 0, 1, 1)) == QG_ERR_INVALID);
    assert_int_equal(qg_remove(NULL, 0), QG_ERR_INVALID);
    assert_int_equal(qg_move(NULL, 0, tu_rect(0, 0, 1, 1)), QG_ERR_INVALID);
    assert_int_equal(qg_get(NULL, 0, &r), QG_ERR_INVALID);
    assert_int_equal(qg_query(NULL, tu_rect(0, 0, 1, 1), tu_collect_query, &c), QG_ERR_INVALID);
    assert_int_equal(qg_query_point(NULL, 0, 0, tu_collect_query, &c), QG_ERR_INVALID);
    assert_int_equal(qg_pairs(NULL, tu_collect_pair, &c), QG_ERR_INVALID);
    assert_int_equal(c.calls, 0);
    qg_cleanup(NULL);
    qg_clear(NULL);
    assert_int_equal(qg_validate(NULL), QG_ERR_INVALID);
    tu_vec_free(&c.out);
}

/* ---- qg_create --------------------------------------------------------- */

static void expect_create_invalid(const qg_config *cfg, const char *what)
{
    tu_alloc a;
    tu_alloc_init(&a);
    qg_config c = *cfg;
    c.allocator = tu_allocator(&a);
    qg_index *out = (qg_index *)&a; /* any non-NULL: must be overwritten */
    qg_status st = qg_create(&c, &out);
    if (st != QG_ERR_INVALID)
        fail_msg("qg_create with %s: %s, want QG_ERR_INVALID", what, qg_status_name(st));
    if (out != NULL)
        fail_msg("qg_create with %s: *out not set to NULL", what);
    if (a.bytes != 0)
        fail_msg("qg_create with %s: leaked %zu bytes", what, a.bytes);
}

static void test_create_bad_config(void **state)
{
    (void)state;
    const float NaN = (float)NAN;
    const qg_config base = qg_default_config(g_kind);
    qg_config c;
    char what[96];

    /* Every bounds field, each bad value. */
    const float bad_vals[] = {NaN, INF, -INF};
    for (int field = 0; field < 4; field++)
        for (size_t v = 0; v < 3; v++) {
            c = base;
            float *p = field == 0 ? &c.bounds.min_x
                       : field == 1 ? &c.bounds.min_y
                       : field == 2 ? &c.bounds.max_x
                                    : &c.bounds.max_y;
            *p = bad_vals[v];
            snprintf(what, sizeof what, "bounds field %d = %g", field, (double)bad_vals[v]);
            expect_create_invalid(&c, what);
        }

    c = base;
    c.bounds = tu_rect(5, 0, 5, 10);
    expect_create_invalid(&c, "empty bounds in x");
    c.bounds = tu_rect(0, 5, 10, 5);
    expect_create_invalid(&c, "empty bounds in y");
    c.bounds = tu_rect(5, 5, 5, 5);
    expect_create_invalid(&c, "point bounds");
    c.bounds = tu_rect(10, 0, 0, 10);
    expect_create_invalid(&c, "inverted bounds in x");
    c.bounds = tu_rect(0, 10, 10, 0);
    expect_create_invalid(&c, "inverted bounds in y");

    const float bad_sizes[] = {-1.0f, -FLT_MIN, -INF, NaN, INF};
    for (size_t v = 0; v < sizeof bad_sizes / sizeof *bad_sizes; v++) {
        c = base;
        c.element_size = bad_sizes[v];
        snprintf(what, sizeof what, "element_size %g", (double)bad_sizes[v]);
        expect_create_invalid(&c, what);
        c = base;
        c.cell_size = bad_sizes[v];
        snprintf(what, sizeof what, "cell_size %g", (double)bad_sizes[v]);
        expect_create_invalid(&c, what);
        c = base;
        c.max_element_size = bad_sizes[v];
        snprintf(what, sizeof what, "max_element_size %g", (double)bad_sizes[v]);
        expect_create_invalid(&c, what);
    }

    c = base;
    c.max_depth = -1;
    expect_create_invalid(&c, "max_depth -1");
    c.max_depth = INT32_MIN;
    expect_create_invalid(&c, "max_depth INT_MIN");
    c = base;
    c.leaf_capacity = -1;
    expect_create_invalid(&c, "leaf_capacity -1");
    c.leaf_capacity = INT32_MIN;
    expect_create_invalid(&c, "leaf_capacity INT_MIN");

    const int bad_kinds[] = {QG_KIND_COUNT, -1, 1000, INT32_MIN};
    for (size_t i = 0; i < sizeof bad_kinds / sizeof *bad_kinds; i++) {
        c = base;
        c.kind = (qg_kind)bad_kinds[i];
        snprintf(what, sizeof what, "kind %d", bad_kinds[i]);
        expect_create_invalid(&c, what);
    }

    /* Half an allocator is a bad argument, not a NULL dereference later. */
    tu_alloc a;
    tu_alloc_init(&a);
    c = base;
    c.allocator.realloc = NULL;
    c.allocator.user = &a;
    qg_index *out = (qg_index *)&a;
    qg_status st = qg_create(&c, &out);
    if (st == QG_OK)
        qg_destroy(out);
    else
        assert_null(out);

    out = (qg_index *)&a;
    assert_int_equal(qg_create(NULL, &out), QG_ERR_INVALID);
    assert_null(out);
    c = base;
    assert_int_equal(qg_create(&c, NULL), QG_ERR_INVALID);
}

static void test_create_each_kind(void **state)
{
    (void)state;
    for (int k = 0; k < QG_KIND_COUNT; k++) {
        tu_alloc a;
        tu_alloc_init(&a);
        qg_config c = qg_default_config((qg_kind)k);
        c.allocator = tu_allocator(&a);
        qg_index *out = (qg_index *)&a;
        qg_status st = qg_create(&c, &out);
        if (qg_kind_available((qg_kind)k)) {
            if (st != QG_OK)
                fail_msg("qg_create(%s) = %s", qg_kind_name((qg_kind)k), qg_status_name(st));
            assert_non_null(out);
            assert_true(a.bytes > 0); /* the struct itself comes from the allocator */
            assert_int_equal(qg_get_stats(out).memory_bytes, a.bytes);
            assert_int_equal(qg_count(out), 0);
            assert_int_equal(qg_validate(out), QG_OK);
            qg_destroy(out);
            assert_int_equal(a.bytes, 0);
            assert_int_equal(a.blocks, 0);
        } else {
            assert_int_equal(st, QG_ERR_INVALID);
            assert_null(out);
            assert_int_equal(a.bytes, 0);
        }
    }
    assert_true(qg_kind_available(QG_BRUTE_FORCE));
    assert_false(qg_kind_available(QG_KIND_COUNT));
    assert_false(qg_kind_available((qg_kind)-1));

    /* The C library allocator (all-zero allocator) works too. */
    if (qg_kind_available(g_kind)) {
        qg_config c = qg_default_config(g_kind);
        qg_index *idx = NULL;
        assert_int_equal(qg_create(&c, &idx), QG_OK);
        for (int i = 0; i < 100; i++)
            assert_true(qg_insert(idx, tu_rect((float)i, 0, (float)i + 2, 2)) >= 0);
        assert_int_equal(qg_count(idx), 100);
        assert_true(qg_get_stats(idx).memory_bytes > 0);
        assert_int_equal(qg_validate(idx), QG_OK);
        qg_destroy(idx);
    }
}

/* Unusual but valid configs must be accepted. */
static void test_create_odd_configs(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    qg_config base = qg_default_config(g_kind);
    qg_config cs[8];
    int n = 0;
    cs[n] = base, cs[n].bounds = tu_rect(-1e6f, -1e6f, 1e6f, 1e6f), n++;
    cs[n] = base, cs[n].bounds = tu_rect(-3.5f, 100.f, -3.25f, 100.125f), n++;
    cs[n] = base, cs[n].bounds = tu_rect(0, 0, 100000.f, 1.f), n++;
    cs[n] = base, cs[n].element_size = 1000000.f, n++;
    cs[n] = base, cs[n].element_size = 1e-3f, n++;
    cs[n] = base, cs[n].leaf_capacity = 1, cs[n].max_depth = 1, n++;
    cs[n] = base, cs[n].cell_size = 0.5f, cs[n].max_element_size = 0.5f, n++;
    cs[n] = base, cs[n].cell_size = 5000.f, cs[n].max_element_size = 5000.f, n++;
    for (int i = 0; i < n; i++) {
        tu_alloc a;
        tu_alloc_init(&a);
        cs[i].allocator = tu_allocator(&a);
        qg_index *idx = NULL;
        qg_status st = qg_create(&cs[i], &idx);
        if (st != QG_OK)
            fail_msg("valid config %d rejected: %s", i, qg_status_name(st));
        qg_rect b = cs[i].bounds;
        float cx = b.min_x + (b.max_x - b.min_x) / 2, cy = b.min_y + (b.max_y - b.min_y) / 2;
        qg_handle h = qg_insert(idx, tu_rect(cx, cy, cx, cy));
        assert_true(h >= 0);
        assert_int_equal(query_count(idx, b), 1);
        assert_int_equal(qg_get_stats(idx).memory_bytes, a.bytes);
        assert_int_equal(qg_validate(idx), QG_OK);
        qg_destroy(idx);
        assert_int_equal(a.bytes, 0);
    }
}

/* ---- elements ---------------------------------------------------------- */

static void test_insert_get(void **state)
{
    fx *f = need_index(state);
    CHECK_MEM(f);
    assert_int_equal(qg_count(f->idx), 0);
    qg_rect boxes[] = {
        {1, 2, 3, 4},
        {0, 0, 0, 0},           /* a point */
        {-50, -60, -40, -30},   /* wholly outside the bounds */
        {-10, 500, 2000, 501},  /* wider than the world */
        {1023.5f, 1023.5f, 1024, 1024},
        {0.1f, 0.2f, 0.1f, 0.2f},
        {-FLT_MAX, -FLT_MAX, FLT_MAX, FLT_MAX}, /* finite, so valid */
        {1e30f, 1e30f, 1e30f, 1e30f},
    };
    const int n = (int)(sizeof boxes / sizeof *boxes);
    qg_handle h[8];
    for (int i = 0; i < n; i++) {
        h[i] = ins(f, boxes[i].min_x, boxes[i].min_y, boxes[i].max_x, boxes[i].max_y);
        for (int j = 0; j < i; j++)
            assert_true(h[i] != h[j]);
        assert_int_equal(qg_count(f->idx), i + 1);
    }
    for (int i = 0; i < n; i++) {
        qg_rect r;
        assert_int_equal(qg_get(f->idx, h[i], &r), QG_OK);
        if (!tu_rect_same(r, boxes[i]))
            fail_msg("qg_get(%d) did not return the stored box bit for bit", h[i]);
    }
    /* Every stored box is found by a query of its own box and of the plane. */
    for (int i = 0; i < n; i++)
        assert_true(query_has(f->idx, boxes[i], h[i]));
    assert_int_equal(query_count(f->idx, tu_rect(-INF, -INF, INF, INF)), (size_t)n);
    qg_rect r;
    assert_int_equal(qg_get(f->idx, h[0], NULL), QG_ERR_INVALID);
    assert_int_equal(qg_get(f->idx, h[0], &r), QG_OK);
}

static void test_move(void **state)
{
    fx *f = need_index(state);
    qg_handle a = ins(f, 10, 10, 20, 20);
    qg_handle b = ins(f, 100, 100, 110, 110);
    qg_rect nb = {500, 600, 505, 601};
    assert_int_equal(qg_move(f->idx, a, nb), QG_OK);
    CHECK_MEM(f);
    qg_rect r;
    assert_int_equal(qg_get(f->idx, a, &r), QG_OK);
    assert_true(tu_rect_same(r, nb));
    assert_int_equal(qg_count(f->idx), 2);
    assert_false(query_has(f->idx, tu_rect(10, 10, 20, 20), a));
    assert_true(query_has(f->idx, tu_rect(502, 600.5f, 502, 600.5f), a));
    assert_true(query_has(f->idx, tu_rect(100, 100, 100, 100), b));

    /* Small moves (same leaf), to the same box, far away and back, to huge. */
    for (int i = 0; i < 50; i++) {
        float d = (float)i * 0.01f;
        assert_int_equal(qg_move(f->idx, a, tu_rect(500 + d, 600, 505 + d, 601)), QG_OK);
        CHECK_MEM(f);
    }
    assert_int_equal(qg_move(f->idx, a, tu_rect(500, 600, 505, 601)), QG_OK);
    assert_int_equal(qg_move(f->idx, a, tu_rect(500, 600, 505, 601)), QG_OK);
    assert_int_equal(qg_move(f->idx, a, tu_rect(-1e7f, 3e7f, -1e7f, 3e7f)), QG_OK);
    CHECK_MEM(f);
    assert_true(query_has(f->idx, tu_rect(-INF, 0, 0, INF), a));
    assert_int_equal(qg_move(f->idx, a, tu_rect(-5000, -5000, 5000, 5000)), QG_OK);
    CHECK_MEM(f);
    assert_true(query_has(f->idx, tu_rect(1, 1, 1, 1), a));
    assert_true(query_has(f->idx, tu_rect(1000, 1000, 1000, 1000), a));
    assert_int_equal(qg_move(f->idx, a, tu_rect(7, 7, 7, 7)), QG_OK);
    CHECK_MEM(f);
    assert_false(query_has(f->idx, tu_rect(1000, 1000, 1000, 1000), a));
    assert_true(query_has(f->idx, tu_rect(7, 7, 7, 7), a));
    assert_int_equal(qg_get(f->idx, b, &r), QG_OK);
    assert_true(tu_rect_same(r, tu_rect(100, 100, 110, 110)));
}

static void test_remove(void **state)
{
    fx *f = need_index(state);
    qg_handle a = ins(f, 10, 10, 20, 20);
    qg_handle b = ins(f, 15, 15, 25, 25);
    assert_int_equal(qg_remove(f->idx, a), QG_OK);
    CHECK_MEM(f);
    assert_int_equal(qg_count(f->idx), 1);
    qg_rect r;
    assert_int_equal(qg_get(f->idx, a, &r), QG_ERR_HANDLE);
    assert_false(query_has(f->idx, tu_rect(-INF, -INF, INF, INF), a));
    assert_true(query_has(f->idx, tu_rect(-INF, -INF, INF, INF), b));
    assert_int_equal(qg_remove(f->idx, a), QG_ERR_HANDLE);
    assert_int_equal(qg_remove(f->idx, b), QG_OK);
    CHECK_MEM(f);
    assert_int_equal(qg_count(f->idx), 0);
    assert_int_equal(query_count(f->idx, tu_rect(-INF, -INF, INF, INF)), 0);
}

/* Every kind of bad handle gets QG_ERR_HANDLE and changes nothing. */
static void test_bad_handles(void **state)
{
    fx *f = need_index(state);
    qg_handle live[20];
    for (int i = 0; i < 20; i++)
        live[i] = ins(f, (float)i * 10, 0, (float)i * 10 + 15, 15);
    qg_handle dead = live[7];
    assert_int_equal(qg_remove(f->idx, dead), QG_OK);
    qg_cleanup(f->idx);
    CHECK_MEM(f);

    tu_snapshot before = {0}, after = {0};
    tu_snapshot_take(f->idx, 64, &before);
    size_t bytes = f->a.bytes;
    long requests = f->a.grow_requests;

    qg_handle top = 0;
    for (int i = 0; i < 20; i++)
        top = live[i] > top ? live[i] : top;
    const qg_handle bad[] = {-1, -2, INT32_MIN, dead, top + 1, top + 2, top + 40, top + 1000,
                             INT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        qg_rect r = {0};
        qg_status st;
        if ((st = qg_remove(f->idx, bad[i])) != QG_ERR_HANDLE)
            fail_msg("qg_remove(%d) = %s", bad[i], qg_status_name(st));
        if ((st = qg_move(f->idx, bad[i], tu_rect(1, 1, 2, 2))) != QG_ERR_HANDLE)
            fail_msg("qg_move(%d) = %s", bad[i], qg_status_name(st));
        if ((st = qg_get(f->idx, bad[i], &r)) != QG_ERR_HANDLE)
            fail_msg("qg_get(%d) = %s", bad[i], qg_status_name(st));
        CHECK_MEM(f);
    }
    tu_snapshot_take(f->idx, 64, &after);
    char msg[256];
    if (!tu_snapshot_equal(&before, &after, msg, sizeof msg))
        fail_msg("a bad handle changed the index: %s", msg);
    assert_int_equal(f->a.bytes, bytes);
    assert_int_equal(f->a.grow_requests, requests);
    tu_snapshot_free(&before);
    tu_snapshot_free(&after);

    /* The only free handle is the one the next insert gets. */
    qg_handle h = ins(f, 1, 1, 2, 2);
    assert_int_equal(h, dead);
    qg_rect r;
    assert_int_equal(qg_get(f->idx, dead, &r), QG_OK);
    assert_true(tu_rect_same(r, tu_rect(1, 1, 2, 2)));
}

/* NaN, infinite and inverted boxes get QG_ERR_INVALID and change nothing. */
static void test_bad_boxes(void **state)
{
    fx *f = need_index(state);
    qg_handle h[10];
    for (int i = 0; i < 10; i++)
        h[i] = ins(f, (float)i * 50, (float)i * 30, (float)i * 50 + 60, (float)i * 30 + 40);
    tu_snapshot before = {0}, after = {0};
    tu_snapshot_take(f->idx, 16, &before);
    size_t bytes = f->a.bytes;

    const float NaN = (float)NAN;
    qg_rect bad[32];
    int n = 0;
    const float vals[] = {NaN, INF, -INF};
    for (int field = 0; field < 4; field++)
        for (int v = 0; v < 3; v++) {
            qg_rect r = {1, 1, 2, 2};
            float *p = field == 0 ? &r.min_x : field == 1 ? &r.min_y : field == 2 ? &r.max_x : &r.max_y;
            *p = vals[v];
            bad[n++] = r;
        }
    bad[n++] = tu_rect(2, 1, 1, 2);                    /* min_x > max_x */
    bad[n++] = tu_rect(1, 2, 2, 1);                    /* min_y > max_y */
    bad[n++] = tu_rect(2, 2, 1, 1);                    /* both */
    bad[n++] = tu_rect(1, 1, nextafterf(1, 0), 2);     /* by one ulp */
    bad[n++] = tu_rect(-INF, -INF, INF, INF);
    bad[n++] = tu_rect(NaN, NaN, NaN, NaN);

    for (int i = 0; i < n; i++) {
        qg_handle r = qg_insert(f->idx, bad[i]);
        if (r != QG_ERR_INVALID)
            fail_msg("qg_insert(bad box %d: %g,%g,%g,%g) = %d, want QG_ERR_INVALID", i,
                     (double)bad[i].min_x, (double)bad[i].min_y, (double)bad[i].max_x,
                     (double)bad[i].max_y, r);
        qg_status st = qg_move(f->idx, h[i % 10], bad[i]);
        if (st != QG_ERR_INVALID)
            fail_msg("qg_move(bad box %d) = %s, want QG_ERR_INVALID", i, qg_status_name(st));
        CHECK_MEM(f);
    }
    tu_snapshot_take(f->idx, 16, &after);
    char msg[256];
    if (!tu_snapshot_equal(&before, &after, msg, sizeof msg))
        fail_msg("a bad box changed the index: %s", msg);
    assert_int_equal(f->a.bytes, bytes);
    tu_snapshot_free(&before);
    tu_snapshot_free(&after);
}

/* The query area may be unbounded, never NaN. */
static void test_query_area(void **state)
{
    fx *f = need_index(state);
    qg_handle a = ins(f, 10, 10, 20, 20);
    qg_handle b = ins(f, -100, -100, -90, -90);
    qg_handle c = ins(f, 2000, 5, 2001, 6);
    (void)c;

    assert_int_equal(query_count(f->idx, tu_rect(-INF, -INF, INF, INF)), 3);
    assert_int_equal(query_count(f->idx, tu_rect(-INF, -INF, 0, 0)), 1);
    assert_true(query_has(f->idx, tu_rect(-INF, -INF, 0, 0), b));
    assert_int_equal(query_count(f->idx, tu_rect(15, -INF, 15, INF)), 1);
    assert_int_equal(query_count(f->idx, tu_rect(-INF, 5.5f, INF, 5.5f)), 1);
    assert_int_equal(query_count(f->idx, tu_rect(1500, -INF, INF, INF)), 1);
    assert_int_equal(query_count(f->idx, tu_rect(INF, INF, INF, INF)), 0);
    assert_int_equal(query_count(f->idx, tu_rect(-INF, -INF, -INF, -INF)), 0);
    assert_int_equal(query_count(f->idx, tu_rect(-INF, 0, -1e30f, 1e30f)), 0);

    /* Closed boxes: touching edges and corners overlap. */
    assert_true(query_has(f->idx, tu_rect(20, 20, 30, 30), a));
    assert_true(query_has(f->idx, tu_rect(0, 0, 10, 10), a));
    assert_true(query_has(f->idx, tu_rect(20, 15, 20, 15), a));
    assert_false(query_has(f->idx, tu_rect(nextafterf(20, 30), 0, 30, 30), a));
    assert_false(query_has(f->idx, tu_rect(0, 0, nextafterf(10, 0), 100), a));

    const float NaN = (float)NAN;
    tu_collect col = {0};
    qg_rect nan_areas[] = {{NaN, 0, 1, 1}, {0, NaN, 1, 1}, {0, 0, NaN, 1}, {0, 0, 1, NaN}};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(qg_query(f->idx, nan_areas[i], tu_collect_query, &col), QG_ERR_INVALID);
        assert_int_equal(col.calls, 0);
    }
    assert_int_equal(qg_query_point(f->idx, NaN, 0, tu_collect_query, &col), QG_ERR_INVALID);
    assert_int_equal(qg_query_point(f->idx, 0, NaN, tu_collect_query, &col), QG_ERR_INVALID);
    assert_int_equal(col.calls, 0);
    assert_int_equal(qg_query(f->idx, tu_rect(0, 0, 1, 1), NULL, NULL), QG_ERR_INVALID);
    assert_int_equal(qg_query_point(f->idx, 0, 0, NULL, NULL), QG_ERR_INVALID);
    assert_int_equal(qg_pairs(f->idx, NULL, NULL), QG_ERR_INVALID);

    /* An inverted area is either rejected or simply answered; never a crash. */
    qg_status st = qg_query(f->idx, tu_rect(30, 30, 0, 0), tu_collect_query, &col);
    assert_true(st == QG_OK || st == QG_ERR_INVALID);

    /* query_point is the query of a zero-size area. */
    tu_collect_reset(&col, 0);
    assert_int_equal(qg_query_point(f->idx, 20, 10, tu_collect_query, &col), QG_OK);
    assert_int_equal(col.calls, 1);
    assert_int_equal(col.out.v[0], a);
    tu_collect_reset(&col, 0);
    assert_int_equal(qg_query_point(f->idx, INF, 10, tu_collect_query, &col), QG_OK);
    assert_int_equal(qg_query_point(f->idx, -INF, -INF, tu_collect_query, &col), QG_OK);
    assert_int_equal(qg_query_point(f->idx, 2000.5f, 6, tu_collect_query, &col), QG_OK);
    assert_int_equal(col.calls, 1);
    assert_int_equal(col.out.v[0], c);
    tu_vec_free(&col.out);
    CHECK_MEM(f);
}

/* Returning false from a callback stops the walk at once. */
static void test_early_stop(void **state)
{
    fx *f = need_index(state);
    /* Spread over the world and stacked, so a tree has split into many leaves. */
    for (int i = 0; i < 100; i++)
        ins(f, (float)(i % 10) * 100, (float)(i / 10) * 100, (float)(i % 10) * 100 + 150,
            (float)(i / 10) * 100 + 150);
    for (int i = 0; i < 40; i++)
        ins(f, 500, 500, 510, 510);
    qg_rect all = tu_rect(-INF, -INF, INF, INF);
    tu_collect c = {0};
    const long stops[] = {1, 2, 7, 139};
    for (size_t i = 0; i < sizeof stops / sizeof *stops; i++) {
        tu_collect_reset(&c, stops[i]);
        assert_int_equal(qg_query(f->idx, all, tu_collect_query, &c), QG_OK);
        assert_int_equal(c.calls, stops[i]);
        tu_collect_reset(&c, stops[i]);
        assert_int_equal(qg_pairs(f->idx, tu_collect_pair, &c), QG_OK);
        assert_int_equal(c.calls, stops[i]);
    }
    tu_collect_reset(&c, 0);
    assert_int_equal(qg_query(f->idx, all, tu_collect_query, &c), QG_OK);
    assert_int_equal(c.calls, 140);
    tu_collect_reset(&c, 3);
    assert_int_equal(qg_query_point(f->idx, 505, 505, tu_collect_query, &c), QG_OK);
    assert_int_equal(c.calls, 3);
    tu_collect_reset(&c, 0);
    assert_int_equal(qg_query_point(f->idx, 505, 505, tu_collect_query, &c), QG_OK);
    assert_true(c.calls > 40);
    tu_vec_free(&c.out);
    CHECK_MEM(f);
}

static void test_pairs_basic(void **state)
{
    fx *f = need_index(state);
    qg_handle a = ins(f, 0, 0, 10, 10);
    qg_handle b = ins(f, 10, 10, 20, 20); /* touches a at a corner */
    qg_handle c = ins(f, 30, 30, 40, 40);
    qg_handle d = ins(f, -1000, 5, 5000, 5); /* a line through a, wider than the world */
    qg_handle e = ins(f, 35, 35, 35, 35);    /* a point inside c */
    tu_collect col = {0};
    assert_int_equal(qg_pairs(f->idx, tu_collect_pair, &col), QG_OK);
    assert_int_equal(col.bad_order, 0);
    tu_vec_sort(&col.out);
    int64_t want[3];
#define PAIR(x, y) ((x) < (y) ? (int64_t)(x) * 4294967296ll + (y) : (int64_t)(y) * 4294967296ll + (x))
    want[0] = PAIR(a, b);
    want[1] = PAIR(a, d);
    want[2] = PAIR(c, e);
    assert_int_equal(col.out.n, 3);
    for (int i = 0; i < 3; i++) {
        bool found = false;
        for (int j = 0; j < 3; j++)
            found |= col.out.v[j] == want[i];
        assert_true(found);
    }
    tu_vec_free(&col.out);
}

static void test_clear(void **state)
{
    fx *f = need_index(state);
    qg_rect boxes[300];
    tu_rng r;
    tu_rng_seed(&r, 42);
    for (int i = 0; i < 300; i++) {
        float x = tu_rng_range(&r, -50, 1050), y = tu_rng_range(&r, -50, 1050);
        boxes[i] = tu_rect(x, y, x + tu_rng_range(&r, 0, 20), y + tu_rng_range(&r, 0, 20));
    }
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 300; i++)
            ins(f, boxes[i].min_x, boxes[i].min_y, boxes[i].max_x, boxes[i].max_y);
        assert_int_equal(qg_count(f->idx), 300);
        size_t bytes = f->a.bytes;
        long requests = f->a.grow_requests;
        qg_clear(f->idx);
        CHECK_MEM(f);
        /* qg_clear keeps the memory for reuse: it frees nothing, allocates nothing. */
        assert_int_equal(f->a.bytes, bytes);
        assert_int_equal(f->a.grow_requests, requests);
        assert_int_equal(qg_count(f->idx), 0);
        assert_int_equal(query_count(f->idx, tu_rect(-INF, -INF, INF, INF)), 0);
        qg_rect g;
        for (qg_handle h = 0; h < 300; h++)
            assert_int_equal(qg_get(f->idx, h, &g), QG_ERR_HANDLE);
        tu_collect c = {0};
        assert_int_equal(qg_pairs(f->idx, tu_collect_pair, &c), QG_OK);
        assert_int_equal(c.calls, 0);
        qg_cleanup(f->idx);
        CHECK_MEM(f);
        if (round > 0) {
            /* The same boxes again fit in the memory the index kept. */
            for (int i = 0; i < 300; i++)
                ins(f, boxes[i].min_x, boxes[i].min_y, boxes[i].max_x, boxes[i].max_y);
            if (f->a.grow_requests != requests)
                fail_msg("refilling after qg_clear allocated %ld times",
                         f->a.grow_requests - requests);
            qg_clear(f->idx);
        }
    }
    /* 300 coincident boxes after a clear fit in the memory kept, too. */
    for (int i = 0; i < 300; i++)
        ins(f, 1, 1, 2, 2);
    long requests = f->a.grow_requests;
    qg_clear(f->idx);
    for (int i = 0; i < 300; i++)
        ins(f, 1, 1, 2, 2);
    assert_int_equal(f->a.grow_requests, requests);
}

static void test_cleanup(void **state)
{
    fx *f = need_index(state);
    qg_handle h[400];
    for (int i = 0; i < 400; i++) {
        float x = (float)(i % 20) * 50, y = (float)(i / 20) * 50;
        h[i] = ins(f, x, y, x + 3, y + 3);
    }
    for (int i = 0; i < 400; i += 1 + (i % 3 == 0))
        assert_int_equal(qg_remove(f->idx, h[i]), QG_OK);
    int32_t left = qg_count(f->idx);
    tu_snapshot before = {0}, after = {0};
    tu_snapshot_take(f->idx, 400, &before);
    /* Cleanup never allocates; repeated calls converge. */
    for (int i = 0; i < 12; i++) {
        long requests = f->a.grow_requests;
        qg_cleanup(f->idx);
        assert_int_equal(f->a.grow_requests, requests);
        CHECK_MEM(f);
    }
    tu_snapshot_take(f->idx, 400, &after);
    char msg[256];
    if (!tu_snapshot_equal(&before, &after, msg, sizeof msg))
        fail_msg("qg_cleanup changed the answers: %s", msg);
    assert_int_equal(qg_count(f->idx), left);
    for (int i = 0; i < 400; i++)
        if (qg_get(f->idx, h[i], &(qg_rect){0}) == QG_ERR_HANDLE)
            assert_int_equal(qg_remove(f->idx, h[i]), QG_ERR_HANDLE);
        else
            assert_int_equal(qg_remove(f->idx, h[i]), QG_OK);
    for (int i = 0; i < 12; i++)
        qg_cleanup(f->idx);
    CHECK_MEM(f);
    assert_int_equal(qg_count(f->idx), 0);
    tu_snapshot_free(&before);
    tu_snapshot_free(&after);
}

/* memory_bytes is exact after every kind of call, through growth and reuse. */
static void test_stats_memory(void **state)
{
    fx *f = need_index(state);
    tu_rng r;
    tu_rng_seed(&r, 7);
    qg_handle h[3000];
    int n = 0;
    for (int step = 0; step < 6000; step++) {
        uint32_t op = tu_rng_below(&r, 10);
        if (op < 5 || n == 0) {
            if (n == 3000)
                continue;
            float x = tu_rng_range(&r, -100, 1100), y = tu_rng_range(&r, -100, 1100);
            float w = tu_rng_chance(&r, 0.05) ? 2000 : tu_rng_range(&r, 0, 10);
            qg_handle k = qg_insert(f->idx, tu_rect(x, y, x + w, y + w));
            assert_true(k >= 0);
            h[n++] = k;
        } else if (op < 7) {
            uint32_t i = tu_rng_below(&r, (uint32_t)n);
            assert_int_equal(qg_remove(f->idx, h[i]), QG_OK);
            h[i] = h[--n];
        } else if (op < 9) {
            uint32_t i = tu_rng_below(&r, (uint32_t)n);
            float x = tu_rng_range(&r, -100, 1100), y = tu_rng_range(&r, -100, 1100);
            assert_int_equal(qg_move(f->idx, h[i], tu_rect(x, y, x + 1, y + 1)), QG_OK);
        } else {
            qg_cleanup(f->idx);
        }
        if (f->a.errors)
            fail_msg("allocator misuse at step %d: %s", step, f->a.last_error);
        qg_stats s = qg_get_stats(f->idx);
        if (s.memory_bytes != f->a.bytes)
            fail_msg("step %d: memory_bytes %zu, allocator holds %zu", step, s.memory_bytes,
                     f->a.bytes);
        assert_int_equal(s.elements, n);
        assert_int_equal(qg_count(f->idx), n);
        assert_true(s.nodes >= 0 && s.leaves >= 0 && s.max_depth_reached >= 0);
        if (step % 97 == 0)
            assert_int_equal(qg_validate(f->idx), QG_OK);
    }
    CHECK_MEM(f);
}

/* Const calls never allocate and never change what memory_bytes says. */
static void test_const_calls_do_not_allocate(void **state)
{
    fx *f = need_index(state);
    for (int i = 0; i < 500; i++)
        ins(f, (float)(i % 25) * 40, (float)(i / 25) * 50, (float)(i % 25) * 40 + 45,
            (float)(i / 25) * 50 + 10);
    long requests = f->a.grow_requests;
    size_t bytes = f->a.bytes;
    tu_collect c = {0};
    tu_vec_push(&c.out, 0); /* allocate the test's own vector first */
    for (int i = 0; i < 20; i++) {
        tu_collect_reset(&c, 0);
        qg_query(f->idx, tu_rect((float)i * 30, 0, (float)i * 30 + 100, 1000), tu_collect_query,
                 &c);
        qg_query_point(f->idx, (float)i * 33, (float)i * 41, tu_collect_query, &c);
        qg_rect g;
        qg_get(f->idx, i, &g);
        qg_count(f->idx);
        qg_get_stats(f->idx);
        qg_validate(f->idx);
    }
    tu_vec_free(&c.out);
    tu_collect pc = {0};
    qg_pairs(f->idx, tu_collect_pair, &pc);
    tu_vec_free(&pc.out);
    assert_int_equal(f->a.grow_requests, requests);
    assert_int_equal(f->a.bytes, bytes);
}

/* Freed handles are reused: after freeing k handles, the next k inserts give
 * back exactly those k (in any order), never a fresh value. */
static void test_handle_reuse(void **state)
{
    fx *f = need_index(state);
    enum { N = 200 };
    qg_handle h[N];
    bool live[N];
    for (int i = 0; i < N; i++) {
        h[i] = ins(f, (float)i, (float)i, (float)i + 1, (float)i + 1);
        live[i] = true;
        for (int j = 0; j < i; j++)
            assert_true(h[i] != h[j]);
    }
    tu_rng r;
    tu_rng_seed(&r, 99);
    for (int round = 0; round < 20; round++) {
        int k = 1 + (int)tu_rng_below(&r, 60);
        for (int j = 0; j < k; j++) {
            int i;
            do
                i = (int)tu_rng_below(&r, N);
            while (!live[i]);
            live[i] = false;
            assert_int_equal(qg_remove(f->idx, h[i]), QG_OK);
        }
        if (round % 2)
            qg_cleanup(f->idx);
        for (int j = 0; j < k; j++) {
            qg_handle nh = ins(f, 5, 5, 6, 6);
            int slot = -1;
            for (int i = 0; i < N; i++)
                if (!live[i] && h[i] == nh)
                    slot = i;
            if (slot < 0)
                fail_msg("round %d: %d handles were free, but insert gave %d, not one of them",
                         round, k - j, nh);
            live[slot] = true;
        }
        assert_int_equal(qg_count(f->idx), N);
    }
    CHECK_MEM(f);
}

static void count_visit(qg_rect cell, int depth, int32_t elements, void *user)
{
    long *n = user;
    if (isnan(cell.min_x) || isnan(cell.min_y) || isnan(cell.max_x) || isnan(cell.max_y) ||
        cell.min_x > cell.max_x || cell.min_y > cell.max_y || depth < 0 || elements < 0)
        n[1]++;
    n[0]++;
}

static void test_visit(void **state)
{
    fx *f = need_index(state);
    long n[2] = {0, 0};
    qg_visit(f->idx, count_visit, n);
    assert_int_equal(n[1], 0);
    for (int i = 0; i < 300; i++)
        ins(f, (float)(i % 17) * 60, (float)(i / 17) * 55, (float)(i % 17) * 60 + 5,
            (float)(i / 17) * 55 + 5);
    n[0] = n[1] = 0;
    long requests = f->a.grow_requests;
    qg_visit(f->idx, count_visit, n);
    assert_int_equal(f->a.grow_requests, requests);
    assert_true(n[0] >= 1);
    assert_int_equal(n[1], 0);
    CHECK_MEM(f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_config),
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_null_index),
        cmocka_unit_test(test_create_bad_config),
        cmocka_unit_test(test_create_each_kind),
        cmocka_unit_test(test_create_odd_configs),
        cmocka_unit_test_setup_teardown(test_insert_get, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_move, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_remove, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_bad_handles, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_bad_boxes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_query_area, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_early_stop, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_pairs_basic, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_clear, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_cleanup, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_stats_memory, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_const_calls_do_not_allocate, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_handle_reuse, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_visit, fx_setup, fx_teardown),
    };
    return tu_kind_main_tests(argc, argv, "api", &g_kind, tests);
}
