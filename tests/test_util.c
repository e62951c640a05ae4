// SPDX-License-Identifier: MIT
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- allocator ------------------------------------------------------- */

/* Every block carries a header with its size, so the allocator can tell when
 * the library passes a wrong old_size (which would make memory_bytes lie) or
 * a pointer it never got. */
#define TU_MAGIC 0x71676164u /* "qgad" */
#define TU_DEAD 0xdeadbeefu

typedef union tu_hdr {
    struct {
        size_t size;
        uint32_t magic;
    } h;
    max_align_t align;
} tu_hdr;

void tu_alloc_init(tu_alloc *a)
{
    memset(a, 0, sizeof *a);
}

void tu_alloc_end_call(tu_alloc *a)
{
    a->failing = false;
}

static void tu_alloc_error(tu_alloc *a, const char *msg, size_t x, size_t y)
{
    a->errors++;
    snprintf(a->last_error, sizeof a->last_error, "%s (%zu vs %zu)", msg, x, y);
}

static void *tu_realloc(void *ptr, size_t old_size, size_t new_size, void *user)
{
    tu_alloc *a = user;
    tu_hdr *h = NULL;
    if (ptr) {
        h = (tu_hdr *)ptr - 1;
        if (h->h.magic != TU_MAGIC) {
            tu_alloc_error(a, "pointer not from this allocator or already freed", 0, 0);
            return NULL;
        }
        if (h->h.size != old_size) {
            tu_alloc_error(a, "old_size differs from the block's size", old_size, h->h.size);
            old_size = h->h.size;
        }
    } else if (old_size != 0) {
        tu_alloc_error(a, "old_size must be 0 with a NULL pointer", old_size, 0);
        old_size = 0;
    }

    if (new_size == 0) {
        if (h) {
            h->h.magic = TU_DEAD;
            a->bytes -= old_size;
            a->blocks--;
            free(h);
        }
        return NULL;
    }

    bool grow = !ptr || new_size > old_size;
    if (grow) {
        a->grow_requests++;
        if (a->fail_at > 0 && a->grow_requests == a->fail_at) {
            a->injected++;
            if (a->mode == TU_FAIL_STICKY)
                a->failing = true;
            return NULL;
        }
        if (a->failing) {
            a->injected++;
            return NULL;
        }
    } else if (new_size == old_size) {
        return ptr;
    }

    if (new_size > (size_t)-1 - sizeof(tu_hdr))
        return NULL;
    tu_hdr *n = realloc(h, sizeof(tu_hdr) + new_size);
    if (!n)
        return NULL;
    n->h.size = new_size;
    n->h.magic = TU_MAGIC;
    a->bytes = a->bytes - old_size + new_size;
    if (!ptr)
        a->blocks++;
    return n + 1;
}

qg_allocator tu_allocator(tu_alloc *a)
{
    qg_allocator al = {tu_realloc, a};
    return al;
}

void tu_alloc_fail_in(tu_alloc *a, long k)
{
    a->fail_at = a->grow_requests + k;
}

void tu_alloc_disarm(tu_alloc *a)
{
    tu_alloc_end_call(a);
    a->fail_at = 0;
}

void tu_each_failure_point(const char *what, long max_k, tu_fail_run run, void *user)
{
    long points[2] = {0, 0};
    for (int mode = 0; mode < 2; mode++) {
        for (long k = 1;; k++) {
            tu_alloc a;
            tu_alloc_init(&a);
            a.mode = mode ? TU_FAIL_STICKY : TU_FAIL_ONCE;
            const qg_status s = run(&a, k, user);
            assert_int_equal(a.errors, 0);
            assert_int_equal(a.bytes, 0);
            if (s == QG_OK && a.injected == 0)
                break;
            points[mode]++;
            assert_true(k < max_k);
        }
    }
    printf("%s: %ld failure points fail-once, %ld fail-from-then-on\n", what, points[0], points[1]);
}

/* ---- RNG: splitmix64, small and good enough ---------------------------- */

void tu_rng_seed(tu_rng *r, uint64_t seed)
{
    r->s = seed;
}

uint64_t tu_rng_next(tu_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint32_t tu_rng_below(tu_rng *r, uint32_t n)
{
    return n ? (uint32_t)((tu_rng_next(r) >> 32) * (uint64_t)n >> 32) : 0;
}

double tu_rng_unit(tu_rng *r)
{
    return (double)(tu_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

float tu_rng_range(tu_rng *r, float lo, float hi)
{
    float v = (float)(lo + (hi - (double)lo) * tu_rng_unit(r));
    return v < lo ? lo : v > hi ? hi : v;
}

bool tu_rng_chance(tu_rng *r, double p)
{
    return tu_rng_unit(r) < p;
}

/* ---- vectors --------------------------------------------------------- */

void tu_vec_push(tu_vec *a, int64_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int64_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) {
            fprintf(stderr, "test: out of memory\n");
            abort();
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
}

void tu_vec_clear(tu_vec *a)
{
    a->n = 0;
}

void tu_vec_free(tu_vec *a)
{
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

static int tu_cmp64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

void tu_vec_sort(tu_vec *a)
{
    if (a->n > 1)
        qsort(a->v, a->n, sizeof *a->v, tu_cmp64);
}

long tu_vec_first_diff(const tu_vec *a, const tu_vec *b)
{
    size_t n = a->n < b->n ? a->n : b->n;
    for (size_t i = 0; i < n; i++)
        if (a->v[i] != b->v[i])
            return (long)i;
    return a->n == b->n ? -1 : (long)n;
}

bool tu_vec_has_dup(const tu_vec *a, int64_t *dup)
{
    for (size_t i = 1; i < a->n; i++)
        if (a->v[i] == a->v[i - 1]) {
            if (dup)
                *dup = a->v[i];
            return true;
        }
    return false;
}

bool tu_collect_query(qg_handle h, void *user)
{
    tu_collect *c = user;
    tu_vec_push(&c->out, h);
    c->calls++;
    return !(c->stop_after > 0 && c->calls >= c->stop_after);
}

bool tu_collect_pair(qg_handle a, qg_handle b, void *user)
{
    tu_collect *c = user;
    if (a >= b)
        c->bad_order++;
    tu_vec_push(&c->out, (int64_t)a * 4294967296ll + b);
    c->calls++;
    return !(c->stop_after > 0 && c->calls >= c->stop_after);
}

void tu_collect_reset(tu_collect *c, long stop_after)
{
    tu_vec_clear(&c->out);
    c->calls = 0;
    c->bad_order = 0;
    c->stop_after = stop_after;
}

/* ---- snapshots ------------------------------------------------------ */

void tu_snapshot_take(const qg_index *idx, int32_t probe, tu_snapshot *s)
{
    tu_snapshot_free(s);
    s->count = qg_count(idx);
    s->stat_elements = qg_get_stats(idx).elements;
    s->probe = probe;
    s->status = calloc((size_t)probe + 1, sizeof *s->status);
    s->box = calloc((size_t)probe + 1, sizeof *s->box);
    if (!s->status || !s->box) {
        fprintf(stderr, "test: out of memory\n");
        abort();
    }
    for (int32_t h = 0; h < probe; h++)
        s->status[h] = qg_get(idx, h, &s->box[h]);

    tu_collect c = {0};
    const float inf = (float)INFINITY;
    s->query_status = qg_query(idx, tu_rect(-inf, -inf, inf, inf), tu_collect_query, &c);
    tu_vec_sort(&c.out);
    s->all = c.out;

    tu_collect p = {0};
    s->pairs_status = qg_pairs(idx, tu_collect_pair, &p);
    tu_vec_sort(&p.out);
    s->pairs = p.out;
}

bool tu_snapshot_equal(const tu_snapshot *a, const tu_snapshot *b, char *msg, size_t msg_size)
{
    if (a->count != b->count) {
        snprintf(msg, msg_size, "qg_count %d became %d", a->count, b->count);
        return false;
    }
    if (a->stat_elements != b->stat_elements) {
        snprintf(msg, msg_size, "stats.elements %d became %d", a->stat_elements,
                 b->stat_elements);
        return false;
    }
    int32_t probe = a->probe < b->probe ? a->probe : b->probe;
    for (int32_t h = 0; h < probe; h++) {
        if (a->status[h] != b->status[h]) {
            snprintf(msg, msg_size, "qg_get(%d) status %s became %s", h,
                     qg_status_name(a->status[h]), qg_status_name(b->status[h]));
            return false;
        }
        if (a->status[h] == QG_OK && !tu_rect_same(a->box[h], b->box[h])) {
            snprintf(msg, msg_size, "qg_get(%d) box (%g,%g,%g,%g) became (%g,%g,%g,%g)", h,
                     (double)a->box[h].min_x, (double)a->box[h].min_y, (double)a->box[h].max_x,
                     (double)a->box[h].max_y, (double)b->box[h].min_x, (double)b->box[h].min_y,
                     (double)b->box[h].max_x, (double)b->box[h].max_y);
            return false;
        }
    }
    if (a->query_status != b->query_status || a->pairs_status != b->pairs_status) {
        snprintf(msg, msg_size, "query/pairs status changed");
        return false;
    }
    long d = tu_vec_first_diff(&a->all, &b->all);
    if (d >= 0) {
        snprintf(msg, msg_size, "whole-plane query: %zu results became %zu (first difference at %ld)",
                 a->all.n, b->all.n, d);
        return false;
    }
    d = tu_vec_first_diff(&a->pairs, &b->pairs);
    if (d >= 0) {
        snprintf(msg, msg_size, "qg_pairs: %zu pairs became %zu (first difference at %ld)",
                 a->pairs.n, b->pairs.n, d);
        return false;
    }
    return true;
}

void tu_snapshot_free(tu_snapshot *s)
{
    free(s->status);
    free(s->box);
    tu_vec_free(&s->all);
    tu_vec_free(&s->pairs);
    memset(s, 0, sizeof *s);
}

void tu_expect_same(const qg_index *idx, const qg_index *want, int32_t probe, const char *fmt, ...)
{
    tu_snapshot a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    tu_snapshot_take(idx, probe, &a);
    tu_snapshot_take(want, probe, &b);
    char diff[200];
    const bool same = tu_snapshot_equal(&a, &b, diff, sizeof diff);
    tu_snapshot_free(&a);
    tu_snapshot_free(&b);
    const bool valid = qg_validate(idx) == QG_OK;
    if (same && valid)
        return;
    char where[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(where, sizeof where, fmt, ap);
    va_end(ap);
    fail_msg("%s: %s", where, same ? "qg_validate fails" : diff);
}

/* ---- misc ------------------------------------------------------------ */

double tu_scale(void)
{
    /* QG_TEST_SCALE is the user's; QG_TEST_SCALE_DEFAULT is set by ctest for
     * slow (sanitized) builds. */
    const char *s = getenv("QG_TEST_SCALE");
    if (!s || !*s)
        s = getenv("QG_TEST_SCALE_DEFAULT");
    double v = s && *s ? strtod(s, NULL) : 1.0;
    if (!(v >= 0.01))
        v = v > 0 ? 0.01 : 1.0;
    if (v > 1000)
        v = 1000;
    return v;
}

long tu_scaled(long n)
{
    double v = (double)n * tu_scale();
    return v < 1 ? 1 : (long)v;
}

void tu_vfail(const char *context, const char *hint, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    print_error("FAILED %s: %s\n%s", context, msg, hint);
    fail();
}

void tu_expect_unchanged(const qg_index *idx, tu_snapshot *before, const char *fmt, ...)
{
    tu_snapshot now;
    memset(&now, 0, sizeof now);
    tu_snapshot_take(idx, before->probe, &now);
    char diff[200];
    const bool same = tu_snapshot_equal(before, &now, diff, sizeof diff);
    tu_snapshot_free(&now);
    tu_snapshot_free(before);
    if (same)
        return;
    char where[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(where, sizeof where, fmt, ap);
    va_end(ap);
    fail_msg("%s: %s", where, diff);
}

/* ---- runner ----------------------------------------------------------- */

bool tu_kind_arg(int argc, char **argv, qg_kind *kind)
{
    if (argc < 2 || qg_kind_from_name(argv[1], kind) != QG_OK) {
        fprintf(stderr, "usage: %s KIND   (KIND is a name from qg_kind_name, e.g. quadtree)\n",
                argc > 0 ? argv[0] : "test");
        return false;
    }
    return true;
}

uint64_t tu_env_seed(uint64_t fallback)
{
    const char *seed = getenv("QG_TEST_SEED");
    return seed && *seed ? strtoull(seed, NULL, 0) : fallback;
}

static int tu_run_group(const char *group, const struct CMUnitTest *tests, size_t n)
{
    /* QG_TEST_FILTER=test_tiny runs one case (cmocka's glob filter). */
    const char *filter = getenv("QG_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    /* The function behind cmocka_run_group_tests_name, which wants an array
     * it can take the size of. Its count of failures becomes 1: a count of
     * 77 would read as "skipped". */
    return _cmocka_run_group_tests(group, tests, n, NULL, NULL) ? 1 : 0;
}

int tu_run_kind_group(const char *prefix, qg_kind kind, const struct CMUnitTest *tests, size_t n)
{
    char group[64];
    snprintf(group, sizeof group, "%s_%s", prefix, qg_kind_name(kind));
    if (tu_run_group(group, tests, n))
        return 1;
    return qg_kind_available(kind) ? 0 : 77;
}

int tu_run_own_group(const char *group, qg_kind kind, const struct CMUnitTest *tests, size_t n)
{
    if (!qg_kind_available(kind))
        return 77;
    return tu_run_group(group, tests, n);
}

void tu_skip_unless_built(qg_kind kind)
{
    if (!qg_kind_available(kind))
        skip();
}

int tu_kind_main(int argc, char **argv, const char *prefix, qg_kind *kind, const struct CMUnitTest *tests,
                 size_t n)
{
    if (!tu_kind_arg(argc, argv, kind))
        return 2;
    return tu_run_kind_group(prefix, *kind, tests, n);
}

#define TU_KIND_ID_(NAME, name, summary) QG_##NAME,
const qg_kind tu_kind_ids[QG_KIND_COUNT] = {QG_KIND_LIST(TU_KIND_ID_)};
#undef TU_KIND_ID_

qg_kind tu_case_kind(void **state)
{
    /* A table entry without TU_KIND_CASE would run on no kind: fail it. */
    assert_non_null(*state);
    return *(const qg_kind *)*state;
}

void tu_case_refit_scenes(void **state)
{
    tu_hint_refit_scenes(tu_case_kind(state));
}

void tu_case_refit_oom(void **state)
{
    tu_hint_refit_oom(tu_case_kind(state));
}

void tu_case_failing_worlds(void **state)
{
    tu_hint_failing_worlds(tu_case_kind(state));
}

/* ---- indexes with a checking allocator --------------------------------- */

qg_index *tu_open(qg_config c, tu_alloc *a)
{
    tu_alloc_init(a);
    c.allocator = tu_allocator(a);
    qg_index *idx = NULL;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    return idx;
}

void tu_close(qg_index *idx, tu_alloc *a)
{
    assert_int_equal(qg_validate(idx), QG_OK);
    assert_int_equal(qg_get_stats(idx).memory_bytes, a->bytes);
    qg_destroy(idx);
    assert_int_equal(a->bytes, 0);
    assert_int_equal(a->errors, 0);
}

uint64_t tu_begin_pair(uint64_t fallback, tu_rng *r, qg_config c, qg_index **idx, qg_index **oracle)
{
    const uint64_t seed = tu_env_seed(fallback);
    printf("seed %llu\n", (unsigned long long)seed);
    tu_rng_seed(r, seed);
    qg_config o = qg_default_config(QG_BRUTE_FORCE);
    *idx = *oracle = NULL;
    assert_int_equal(qg_create(&c, idx), QG_OK);
    assert_int_equal(qg_create(&o, oracle), QG_OK);
    return seed;
}

/* ---- bounds are a hint: re-fit scenes ---------------------------------- */


static const tu_scene SCENES[] = {
    {"outside", {0, 0, 1024, 1024}, 1.0f, 5.0f, true},
    {"huge", {-3e38f, -3e38f, 3e38f, 3e38f}, 0x1p100f, 5.0f * 0x1p100f, false},
    {"tiny", {0, 0, 5000.0f * 0x1p-100f, 5000.0f * 0x1p-100f}, 0x1p-100f, 5.0f * 0x1p-100f, false},
    {"tiny_default_size", {0, 0, 1e-30f, 1e-30f}, 0x1p-113f, 0, false},
};

qg_rect tu_scene_box(tu_rng *r, const tu_scene *s)
{
    const float lo = s->outside ? -4096.0f : 0.0f, hi = s->outside ? 5120.0f : 5000.0f;
    const float h = tu_rng_range(r, 1.0f, 4.0f);
    const float x = tu_rng_range(r, lo + h, hi - h), y = tu_rng_range(r, lo + h, hi - h);
    return (qg_rect){(x - h) * s->scale, (y - h) * s->scale, (x + h) * s->scale, (y + h) * s->scale};
}

void tu_scene_pairs(const qg_index *ix, tu_vec *out, qg_query_stats *st)
{
    tu_collect c;
    memset(&c, 0, sizeof c);
    assert_int_equal(qg_pairs_with_stats(ix, tu_collect_pair, &c, st), QG_OK);
    assert_int_equal(c.bad_order, 0);
    tu_vec_sort(&c.out);
    *out = c.out;
}

void tu_scene_fill(qg_kind kind, const tu_scene *s, tu_alloc *a, uint64_t seed, int32_t n, tu_rng *r,
                   qg_index **k, qg_index **b)
{
    qg_config ck = qg_default_config(kind), cb = qg_default_config(QG_BRUTE_FORCE);
    ck.bounds = cb.bounds = s->bounds;
    ck.element_size = s->element_size;
    if (a) {
        tu_alloc_init(a);
        ck.allocator = tu_allocator(a);
    }
    *k = *b = NULL;
    assert_int_equal(qg_create(&ck, k), QG_OK);
    assert_int_equal(qg_create(&cb, b), QG_OK);
    tu_rng_seed(r, seed);
    for (int32_t i = 0; i < n; i++) {
        const qg_rect box = tu_scene_box(r, s);
        assert_int_equal(qg_insert(*k, box), i);
        assert_int_equal(qg_insert(*b, box), i);
    }
}

void tu_scene_compare(const qg_index *k, const qg_index *b, tu_rng *r, const tu_scene *s, float dx, float dy,
                      int64_t max_tests)
{
    assert_int_equal(qg_validate(k), QG_OK);
    tu_vec pk, pb;
    qg_query_stats st;
    tu_scene_pairs(k, &pk, &st);
    tu_scene_pairs(b, &pb, NULL);
    assert_int_equal(pk.n, pb.n);
    assert_int_equal(tu_vec_first_diff(&pk, &pb), -1);
    const int32_t n = qg_count(k);
    if (st.elements_tested > max_tests * (int64_t)n + 1000)
        fail_msg("%s: %lld pair tests for %d elements", s->name, (long long)st.elements_tested, (int)n);
    tu_vec_free(&pk);
    tu_vec_free(&pb);
    /* 20 boxes of the scene, grown, then the whole plane. */
    for (int q = 0; q <= 20; q++) {
        qg_rect a = tu_rect(-INFINITY, -INFINITY, INFINITY, INFINITY);
        if (q < 20) {
            const qg_rect box = tu_scene_box(r, s);
            const float grow = (float)q * 10.0f * s->scale;
            a = tu_rect(box.min_x + dx - grow, box.min_y + dy - grow, box.max_x + dx + grow, box.max_y + dy + grow);
        }
        tu_collect ck, cb;
        memset(&ck, 0, sizeof ck);
        memset(&cb, 0, sizeof cb);
        assert_int_equal(qg_query(k, a, tu_collect_query, &ck), QG_OK);
        assert_int_equal(qg_query(b, a, tu_collect_query, &cb), QG_OK);
        tu_vec_sort(&ck.out);
        tu_vec_sort(&cb.out);
        assert_int_equal(ck.out.n, cb.out.n);
        assert_int_equal(tu_vec_first_diff(&ck.out, &cb.out), -1);
        tu_vec_free(&ck.out);
        tu_vec_free(&cb.out);
    }
}

void tu_hint_refit_scenes(qg_kind kind)
{
    for (size_t si = 0; si < sizeof SCENES / sizeof *SCENES; si++) {
        const tu_scene *s = &SCENES[si];
        enum { N = 3000 };
        tu_rng r;
        qg_index *k, *b;
        tu_scene_fill(kind, s, NULL, 1100 + si, N, &r, &k, &b);
        qg_cleanup(k);
        qg_cleanup(b);
        tu_scene_compare(k, b, &r, s, 0, 0, 200);
        for (int frame = 0; frame < 12; frame++) {
            for (int i = 0; i < N; i++) {
                qg_rect box;
                if (qg_get(k, i, &box) != QG_OK)
                    continue;
                if (tu_rng_chance(&r, 0.02)) {
                    box = tu_scene_box(&r, s); /* teleport */
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
                const qg_rect box = tu_scene_box(&r, s);
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
            tu_scene_compare(k, b, &r, s, 0, 0, 200);
        }
        qg_destroy(k);
        qg_destroy(b);
    }
}

/* Fault injection on the calls that may allocate after a re-fit (the next
 * insert or move splits what the re-fit could not): fail the k-th
 * allocation; a call that answers QG_ERR_NOMEM leaves the index answering
 * exactly as before, valid, and holding exactly what its allocator gave. */
void tu_hint_refit_oom(qg_kind kind)
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
        const tu_scene *s = &SCENES[0];
        int32_t live = 0;
        for (int step = 0; step < 700; step++) {
            tu_snapshot before, after;
            memset(&before, 0, sizeof before);
            memset(&after, 0, sizeof after);
            tu_snapshot_take(ix, live, &before);
            const size_t bytes_before = qg_get_stats(ix).memory_bytes;
            qg_status st;
            if (step < 600 || tu_rng_chance(&r, 0.3)) {
                const qg_handle h = qg_insert(ix, tu_scene_box(&r, s));
                st = h < 0 ? (qg_status)h : QG_OK;
                if (h >= live)
                    live = h + 1;
            } else {
                st = qg_move(ix, (qg_handle)tu_rng_below(&r, (uint32_t)live), tu_scene_box(&r, s));
            }
            if (st != QG_OK) {
                /* Exactly as it was: the same answers and the same bytes
                 * (no split or re-fit kept from before the failure). */
                assert_int_equal(st, QG_ERR_NOMEM);
                if (qg_get_stats(ix).memory_bytes != bytes_before)
                    fail_msg("fail_at %ld step %d: %zu bytes after a failed call, %zu before", fail_at, step,
                             qg_get_stats(ix).memory_bytes, bytes_before);
                tu_snapshot_take(ix, live, &after);
                char msg[256];
                if (!tu_snapshot_equal(&before, &after, msg, sizeof msg))
                    fail_msg("fail_at %ld step %d: %s", fail_at, step, msg);
                tu_snapshot_free(&after);
            }
            if (step % 100 == 99)
                qg_cleanup(ix); /* re-fits, never allocates */
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

/* ---- bounds are a hint: worlds with failing allocations ----------------- */

typedef struct sc_world {
    qg_rect bounds;
    float element_size;
    float lo, hi; /* where the boxes go, per axis */
    float size;   /* typical width */
    float scale;  /* every coordinate is multiplied by this (exact: a power of two) */
} sc_world;

/* A double to the nearest finite float (boxes must stay finite). */
static float sc_fl(double v)
{
    return v > FLT_MAX ? FLT_MAX : v < -FLT_MAX ? -FLT_MAX : (float)v;
}

static qg_rect sc_box(tu_rng *r, const sc_world *w)
{
    const double u = tu_rng_unit(r);
    float side = w->size * (0.2f + 1.6f * (float)tu_rng_unit(r));
    if (u < 0.03)
        side = 0.0f; /* points */
    else if (u < 0.06)
        side = w->size * 40.0f; /* big */
    else if (u < 0.075)
        side = (w->hi - w->lo) * 1.5f; /* wider than the whole scene */
    const float x = w->lo + (w->hi - w->lo) * (float)tu_rng_unit(r);
    const float y = w->lo + (w->hi - w->lo) * (float)tu_rng_unit(r);
    return tu_rect(sc_fl((double)x * w->scale), sc_fl((double)y * w->scale), sc_fl(((double)x + side) * w->scale),
                   sc_fl(((double)y + side) * w->scale));
}

static void sc_sorted_query(const qg_index *idx, qg_rect area, tu_vec *out)
{
    tu_collect c;
    memset(&c, 0, sizeof c);
    assert_int_equal(qg_query(idx, area, tu_collect_query, &c), QG_OK);
    tu_vec_sort(&c.out);
    int64_t dup;
    assert_false(tu_vec_has_dup(&c.out, &dup));
    *out = c.out;
}

static void sc_sorted_pairs(const qg_index *idx, tu_vec *out)
{
    tu_collect c;
    memset(&c, 0, sizeof c);
    assert_int_equal(qg_pairs(idx, tu_collect_pair, &c), QG_OK);
    assert_int_equal(c.bad_order, 0);
    tu_vec_sort(&c.out);
    int64_t dup;
    assert_false(tu_vec_has_dup(&c.out, &dup));
    *out = c.out;
}

static void sc_same(const qg_index *idx, const qg_index *ref, tu_rng *r, const sc_world *w)
{
    assert_int_equal(qg_validate(idx), QG_OK);
    tu_vec a, b;
    sc_sorted_pairs(idx, &a);
    sc_sorted_pairs(ref, &b);
    assert_int_equal(a.n, b.n);
    assert_int_equal(tu_vec_first_diff(&a, &b), -1);
    tu_vec_free(&a);
    tu_vec_free(&b);
    for (int q = 0; q < 6; q++) {
        qg_rect area = sc_box(r, w);
        if (q == 0)
            area = tu_rect(-INFINITY, -INFINITY, INFINITY, INFINITY);
        else if (q == 1)
            area = tu_rect(area.min_x, -INFINITY, area.max_x, area.max_y);
        else if (q == 2)
            area.max_x = area.min_x, area.max_y = area.min_y;
        sc_sorted_query(idx, area, &a);
        sc_sorted_query(ref, area, &b);
        assert_int_equal(a.n, b.n);
        assert_int_equal(tu_vec_first_diff(&a, &b), -1);
        tu_vec_free(&a);
        tu_vec_free(&b);
    }
}

/* One call with every allocation failing: QG_ERR_NOMEM and nothing changed,
 * or success. Returns the call's status. */
static qg_status sc_failing(qg_index *idx, tu_alloc *a, bool insert, qg_handle h, qg_rect box)
{
    tu_snapshot before, after;
    memset(&before, 0, sizeof before);
    memset(&after, 0, sizeof after);
    tu_snapshot_take(idx, 64, &before);
    const size_t bytes = qg_get_stats(idx).memory_bytes;
    a->failing = true;
    qg_status s = insert ? (qg_status)qg_insert(idx, box) : qg_move(idx, h, box);
    a->failing = false;
    if (s == QG_ERR_NOMEM) {
        tu_snapshot_take(idx, 64, &after);
        char msg[200];
        if (!tu_snapshot_equal(&before, &after, msg, sizeof msg))
            fail_msg("failed %s changed the index: %s", insert ? "insert" : "move", msg);
        tu_snapshot_free(&after);
        assert_int_equal(qg_get_stats(idx).memory_bytes, bytes);
        assert_int_equal(a->bytes, bytes);
        assert_int_equal(qg_validate(idx), QG_OK);
    } else {
        assert_true(s >= 0);
    }
    tu_snapshot_free(&before);
    return s;
}

static void sc_run(qg_kind kind, const sc_world *w, uint64_t seed)
{
    tu_alloc a;
    tu_alloc_init(&a);
    a.mode = TU_FAIL_EACH_CALL;
    qg_config c = qg_default_config(kind);
    c.bounds = w->bounds;
    c.element_size = w->element_size;
    c.allocator = tu_allocator(&a);
    qg_index *idx, *ref;
    assert_int_equal(qg_create(&c, &idx), QG_OK);
    qg_config rc = qg_default_config(QG_BRUTE_FORCE);
    rc.bounds = w->bounds;
    assert_int_equal(qg_create(&rc, &ref), QG_OK);
    tu_rng r;
    tu_rng_seed(&r, seed);
    enum { N = 240 };
    qg_handle hs[N];
    bool live[N];
    long nomem = 0;
    for (int i = 0; i < N; i++) {
        const qg_rect b = sc_box(&r, w);
        if (i % 8 == 0) {
            const qg_status s = sc_failing(idx, &a, true, 0, b);
            if (s >= 0) { /* went through without allocating */
                hs[i] = (qg_handle)s;
                assert_int_equal(qg_insert(ref, b), hs[i]);
                live[i] = true;
                continue;
            }
            nomem++;
        }
        hs[i] = qg_insert(idx, b);
        assert_true(hs[i] >= 0);
        assert_int_equal(qg_insert(ref, b), hs[i]);
        live[i] = true;
    }
    qg_cleanup(idx);
    sc_same(idx, ref, &r, w);
    for (int step = 0; step < 24; step++) {
        for (int i = 0; i < N; i++) {
            if (!tu_rng_chance(&r, 0.3))
                continue;
            if (!live[i]) {
                hs[i] = qg_insert(idx, sc_box(&r, w));
                assert_true(hs[i] >= 0);
                qg_rect b;
                assert_int_equal(qg_get(idx, hs[i], &b), QG_OK);
                assert_int_equal(qg_insert(ref, b), hs[i]);
                live[i] = true;
            } else if (tu_rng_chance(&r, 0.1)) {
                assert_int_equal(qg_remove(idx, hs[i]), QG_OK);
                assert_int_equal(qg_remove(ref, hs[i]), QG_OK);
                live[i] = false;
            } else {
                const qg_rect b = sc_box(&r, w);
                if (tu_rng_chance(&r, 0.2)) {
                    const qg_status s = sc_failing(idx, &a, false, hs[i], b);
                    if (s == QG_OK) {
                        assert_int_equal(qg_move(ref, hs[i], b), QG_OK);
                        continue;
                    }
                    nomem++;
                }
                assert_int_equal(qg_move(idx, hs[i], b), QG_OK);
                assert_int_equal(qg_move(ref, hs[i], b), QG_OK);
            }
        }
        if (step % 3 != 2)
            qg_cleanup(idx);
        sc_same(idx, ref, &r, w);
    }
    assert_true(nomem > 0); /* the sequence did allocate */
    assert_int_equal(qg_validate(idx), QG_OK);
    assert_int_equal(qg_get_stats(idx).memory_bytes, a.bytes);
    qg_destroy(idx);
    qg_destroy(ref);
    assert_int_equal(a.bytes, 0);
    assert_int_equal(a.errors, 0);
}

static const sc_world sc_worlds[] = {
    /* outside: the default bounds in the middle of a world 9x as wide */
    {{0, 0, 1024, 1024}, 5, -4096, 5120, 5, 1},
    /* outside, and the bounds far from the origin and the boxes */
    {{1e6f, 1e6f, 1e6f + 512, 1e6f + 512}, 5, -3000, 3000, 5, 1},
    /* huge: bounds near FLT_MAX, boxes in a small corner of them */
    {{-3e38f, -3e38f, 3e38f, 3e38f}, 0x1p100f * 5, 0, 2000, 5, 0x1p100f},
    /* huge bounds with boxes spread over them */
    {{-3e38f, -3e38f, 3e38f, 3e38f}, 0x1p100f * 5, -1.5e8f, 1.5e8f, 1e6f, 0x1p100f},
    /* tiny: all normal floats, extent ~1e-27 */
    {{0, 0, 2000 * 0x1p-100f, 2000 * 0x1p-100f}, 5 * 0x1p-100f, 0, 2000, 5, 0x1p-100f},
    /* tiny bounds, and boxes outside them */
    {{0, 0, 1e-30f, 1e-30f}, 0, -1e-29f, 1e-29f, 1e-32f, 1},
};

void tu_hint_failing_worlds(qg_kind kind)
{
    for (size_t i = 0; i < sizeof sc_worlds / sizeof *sc_worlds; i++)
        sc_run(kind, &sc_worlds[i], 1000 + i);
}

/* ---- qg_pairs_parallel's parts (the grids' own tests) ------------------- */

/* A job system that runs the ranges one by one, last first: the parts must
 * not depend on the order they run in. */
static void pt_backwards_run(qg_task_fn *task, int32_t count, void *context, void *user)
{
    (void)user;
    for (int32_t i = count; i-- > 0;)
        task(i, i + 1, 0, context);
}

/* The kind's pairs are the oracle's, and for 2, 3, 7 and 64 parts the
 * parts' pairs together are the same set, each pair in one part only. */
static void pt_check_parts(const qg_index *idx, const qg_index *oracle)
{
    tu_vec all, want;
    sc_sorted_pairs(idx, &all);
    sc_sorted_pairs(oracle, &want);
    assert_int_equal(tu_vec_first_diff(&all, &want), -1);
    static const int32_t counts[] = {2, 3, 7, 64};
    for (size_t w = 0; w < sizeof counts / sizeof *counts; w++) {
        const int32_t parts = counts[w];
        tu_collect c[64];
        void *users[64];
        memset(c, 0, sizeof c);
        for (int32_t p = 0; p < parts; p++)
            users[p] = &c[p];
        const qg_jobs jobs = {parts, pt_backwards_run, NULL};
        assert_int_equal(qg_pairs_parallel(idx, &jobs, tu_collect_pair, users, NULL), QG_OK);
        tu_vec u;
        memset(&u, 0, sizeof u);
        for (int32_t p = 0; p < parts; p++) {
            assert_int_equal(c[p].bad_order, 0);
            for (size_t i = 0; i < c[p].out.n; i++)
                tu_vec_push(&u, c[p].out.v[i]);
            tu_vec_free(&c[p].out);
        }
        tu_vec_sort(&u);
        assert_int_equal(tu_vec_first_diff(&u, &all), -1);
        tu_vec_free(&u);
    }
    tu_vec_free(&all);
    tu_vec_free(&want);
}

static void pt_insert_both(qg_index *idx, qg_index *oracle, qg_rect r)
{
    const qg_handle h = qg_insert(idx, r);
    assert_true(h >= 0);
    assert_int_equal(qg_insert(oracle, r), h);
}

/* Band and range splits on scenes that stress them: every element in one
 * thin row (the other parts' bands empty), tall boxes over every band,
 * crowds outside the bounds on both sides (on the grids' torus they wrap
 * into the bands of the bounds' cells), a box over everything; then a
 * batch move that takes elements across bands, out of and into the huge
 * box's place, and a parallel cleanup, checked after each step. */
void tu_parts_scenes(qg_index *idx)
{
    qg_index *oracle = NULL;
    qg_config oc = qg_default_config(QG_BRUTE_FORCE);
    assert_int_equal(qg_create(&oc, &oracle), QG_OK);
    for (int i = 0; i < 50; i++)
        pt_insert_both(idx, oracle, tu_rect((float)i * 10, 100, (float)i * 10 + 12, 108));
    qg_cleanup(idx);
    pt_check_parts(idx, oracle);
    for (int i = 0; i < 30; i++)
        pt_insert_both(idx, oracle, tu_rect((float)i * 7, -500, (float)i * 7 + 5, 1500));
    for (int i = 0; i < 30; i++)
        pt_insert_both(idx, oracle, tu_rect(3000 + (float)i * 3, 2040 + (float)i, 3010 + (float)i * 3, 2060 + (float)i));
    for (int i = 0; i < 30; i++)
        pt_insert_both(idx, oracle, tu_rect(-1100 + (float)i * 3, -20 - (float)i, -1090 + (float)i * 3, 10));
    pt_check_parts(idx, oracle);
    qg_cleanup(idx);
    pt_check_parts(idx, oracle);
    pt_insert_both(idx, oracle, tu_rect(-1e30f, -1e30f, 1e30f, 1e30f));
    pt_check_parts(idx, oracle);
    const int32_t n = qg_count(idx);
    qg_handle hs[200];
    qg_rect bs[200];
    assert_true(n <= 200);
    for (int32_t i = 0; i < n; i++) {
        qg_rect b;
        assert_int_equal(qg_get(idx, i, &b), QG_OK);
        if (i == n - 1) {
            b = tu_rect(500, 500, 520, 520); /* the huge box comes down */
        } else if (i == 0) {
            b = tu_rect(-1e30f, -1e30f, 1e30f, 1e30f); /* and another goes up */
        } else {
            const float dx = (float)(i % 3) * 50, dy = (float)(i % 7 - 3) * 37;
            b = tu_rect(b.min_x + dx, b.min_y + dy, b.max_x + dx, b.max_y + dy);
        }
        hs[i] = i;
        bs[i] = b;
    }
    const qg_jobs jobs = {3, pt_backwards_run, NULL};
    assert_int_equal(qg_move_many(idx, &jobs, hs, bs, n), QG_OK);
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(qg_move(oracle, hs[i], bs[i]), QG_OK);
    assert_int_equal(qg_validate(idx), QG_OK);
    pt_check_parts(idx, oracle);
    qg_cleanup_parallel(idx, &jobs);
    assert_int_equal(qg_validate(idx), QG_OK);
    pt_check_parts(idx, oracle);
    /* Everything back, in one batch again, then a cleanup on one thread. */
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(qg_get(oracle, i, &bs[i]), QG_OK);
    for (int32_t i = 0; i < n; i++) {
        const float d = (float)(i % 5) * 300;
        bs[i] = tu_rect(bs[i].min_x, bs[i].min_y + d, bs[i].max_x, bs[i].max_y + d);
        assert_int_equal(qg_move(oracle, i, bs[i]), QG_OK);
    }
    assert_int_equal(qg_move_many(idx, &jobs, hs, bs, n), QG_OK);
    assert_int_equal(qg_validate(idx), QG_OK);
    pt_check_parts(idx, oracle);
    qg_cleanup(idx);
    pt_check_parts(idx, oracle);
    qg_destroy(oracle);
}
