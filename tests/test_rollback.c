// SPDX-License-Identifier: MIT
/* Rollback, for one kind (argv[1]): qg_clone, qg_copy and snapshots carry
 * an index's whole state, so the copy answers every later call as the
 * original does, in the same order.
 *
 * The world of rollback_driver.h runs 300 frames on an index; a clone is
 * taken at frame 100, a qg_copy into an index of another state (and another
 * configuration of the kind) at 150, a snapshot written and read back at
 * 200; each then runs the rest of the frames from a copy of the world, and
 * every frame's order-sensitive hash (pairs, events, a query, a ray, the
 * nearest 4) must equal the original's. Worlds: from qg_default_config
 * (learning, re-tunes), with fixed sizes, and with static elements, filters
 * and events. Then: qg_copy between equal capacities asks the allocator
 * nothing; qg_copy refuses other kinds and NULL; a snapshot truncated at
 * every length, with any byte changed, with a byte changed and the checksum
 * made to agree (docs/rollback.md's algorithm, written here again), or
 * asking for a huge capacity is refused or reads into a valid index, and a
 * refusal holds no memory; every allocation failure of qg_clone,
 * qg_snapshot_read and qg_copy leaves nothing behind and dst unchanged.
 * Seed: QG_TEST_SEED (printed). QG_TEST_SCALE scales the hostile loops. */
#include "rollback_driver.h"
#include "test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static qg_kind g_kind = QG_QUADTREE;
static uint64_t g_seed = 44;

#define FRAMES 300

static rb_world *world_new(int32_t n, float size, bool engine)
{
    rb_world *w = malloc(sizeof *w);
    assert_non_null(w);
    rb_init(w, g_seed, n, size, engine);
    return w;
}

static rb_world *world_dup(const rb_world *w)
{
    rb_world *d = malloc(sizeof *d);
    assert_non_null(d);
    memcpy(d, w, sizeof *d);
    return d;
}

static uint64_t frame_ok(rb_world *w, qg_index *ix)
{
    qg_status s;
    const uint64_t h = rb_frame(w, ix, &s);
    if (s != QG_OK)
        fail_msg("frame %d: %s", w->frame - 1, qg_status_name(s));
    return h;
}

static qg_index *make(qg_config c)
{
    qg_index *ix = NULL;
    assert_int_equal(qg_create(&c, &ix), QG_OK);
    return ix;
}

static qg_index *read_back(const qg_index *ix)
{
    const size_t n = qg_snapshot_size(ix);
    assert_true(n > 32);
    unsigned char *buf = malloc(n);
    assert_non_null(buf);
    assert_int_equal(qg_snapshot_write(ix, buf, n - 1), QG_ERR_INVALID); // too short: refused
    assert_int_equal(qg_snapshot_write(ix, buf, n), QG_OK);
    qg_index *out = NULL;
    assert_int_equal(qg_snapshot_read(buf, n, NULL, &out), QG_OK);
    free(buf);
    return out;
}

/* Replays frames [from, FRAMES) of `w` on `ix` and compares each hash. */
static void replay(const char *what, rb_world *w, qg_index *ix, const uint64_t *want)
{
    assert_int_equal(qg_validate(ix), QG_OK);
    for (int32_t f = w->frame; f < FRAMES; ++f) {
        const uint64_t h = frame_ok(w, ix);
        if (h != want[f])
            fail_msg("%s %s: frame %d hashes %016llx, the original %016llx (seed %llu)", qg_kind_name(g_kind), what,
                     f, (unsigned long long)h, (unsigned long long)want[f], (unsigned long long)g_seed);
        if (f % 50 == 0)
            assert_int_equal(qg_validate(ix), QG_OK);
    }
    assert_int_equal(qg_validate(ix), QG_OK);
}

/* A dst for qg_copy with a state of its own: another world, run a while. */
static qg_index *other_index(qg_config c, bool engine)
{
    qg_index *ix = make(c);
    rb_world *w = world_new(700, 900.0f, engine);
    w->rng ^= 0x5555;
    assert_int_equal(rb_fill(w, ix), QG_OK);
    for (int k = 0; k < 30; ++k)
        frame_ok(w, ix);
    free(w);
    return ix;
}

static void run_rollback(qg_config c, qg_config other, int32_t n, float size, bool engine)
{
    tu_skip_unless_built(g_kind);
    if (g_kind == QG_BRUTE_FORCE)
        n /= 3; // every pair tested every frame: a third of the world says as much
    printf("rollback %s: seed %llu, %d agents, engine %d\n", qg_kind_name(g_kind), (unsigned long long)g_seed, n,
           engine);
    uint64_t *want = calloc(FRAMES, sizeof *want);
    assert_non_null(want);
    qg_index *a = make(c);
    rb_world *w = world_new(n, size, engine);
    assert_int_equal(rb_fill(w, a), QG_OK);
    qg_index *b = NULL, *cpy = other_index(other, !engine), *snap = NULL;
    rb_world *wb = NULL, *wc = NULL, *ws = NULL;
    for (int32_t f = 0; f < FRAMES; ++f) {
        if (f == 100) {
            assert_int_equal(qg_clone(a, &b), QG_OK);
            assert_int_equal(qg_get_stats(b).memory_bytes, qg_get_stats(a).memory_bytes);
            wb = world_dup(w);
        }
        if (f == 150) {
            assert_int_equal(qg_copy(cpy, a), QG_OK);
            assert_int_equal(qg_validate(cpy), QG_OK);
            wc = world_dup(w);
        }
        if (f == 200) {
            snap = read_back(a);
            assert_int_equal(qg_get_stats(snap).memory_bytes, qg_get_stats(a).memory_bytes);
            ws = world_dup(w);
        }
        want[f] = frame_ok(w, a);
    }
    assert_int_equal(qg_validate(a), QG_OK);
    replay("clone at 100", wb, b, want);
    replay("copy at 150", wc, cpy, want);
    replay("snapshot at 200", ws, snap, want);
    /* The same state makes the same snapshot: its size, and a copy of it
     * continues as the original (the last frames once more, from both). */
    assert_int_equal(qg_snapshot_size(b), qg_snapshot_size(a));
    assert_int_equal(qg_get_stats(b).memory_bytes, qg_get_stats(a).memory_bytes);
    for (int k = 0; k < 5; ++k)
        assert_true(frame_ok(w, a) == frame_ok(wb, b));
    qg_destroy(a), qg_destroy(b), qg_destroy(cpy), qg_destroy(snap);
    free(w), free(wb), free(wc), free(ws), free(want);
}

static qg_config fixed_config(void)
{
    qg_config c = qg_default_config(g_kind);
    c.bounds = tu_rect(0, 0, 400, 400);
    c.element_size = 4.0f;
    c.max_element_size = 8.0f;
    c.fixed_sizes = true;
    return c;
}

static void test_rollback_learning(void **state)
{
    (void)state;
    qg_config other = qg_default_config(g_kind);
    other.bounds = tu_rect(-5000, -5000, 5000, 5000);
    run_rollback(qg_default_config(g_kind), other, 2500, 400.0f, false);
}

static void test_rollback_fixed(void **state)
{
    (void)state;
    run_rollback(fixed_config(), qg_default_config(g_kind), 2000, 400.0f, false);
}

static void test_rollback_engine(void **state)
{
    (void)state;
    run_rollback(qg_default_config(g_kind), fixed_config(), 1500, 300.0f, true);
}

/* An empty index, and one emptied: clone, copy and snapshot as well. */
static void test_rollback_empty(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    qg_config c = qg_default_config(g_kind);
    qg_index *a = make(c), *b = NULL;
    assert_int_equal(qg_clone(a, &b), QG_OK);
    qg_index *s = read_back(a);
    assert_int_equal(qg_count(b), 0);
    assert_int_equal(qg_count(s), 0);
    rb_world *w = world_new(300, 100.0f, false), *w2 = world_dup(w);
    assert_int_equal(rb_fill(w, a), QG_OK);
    assert_int_equal(rb_fill(w2, s), QG_OK);
    for (int f = 0; f < 20; ++f)
        assert_true(frame_ok(w, a) == frame_ok(w2, s));
    qg_clear(a);
    qg_destroy(b);
    assert_int_equal(qg_clone(a, &b), QG_OK);
    assert_int_equal(qg_validate(b), QG_OK);
    assert_int_equal(qg_copy(s, a), QG_OK);
    assert_int_equal(qg_count(s), 0);
    qg_destroy(a), qg_destroy(b), qg_destroy(s);
    free(w), free(w2);
}

/* qg_copy between indexes that hold the same capacities asks the
 * allocator nothing: a rollback loop (save, run, restore, run again) that
 * reproduces the same frames runs without it once warm. */
static void test_copy_reuse(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    tu_alloc aa, sa;
    qg_index *a = tu_open(qg_default_config(g_kind), &aa);
    rb_world *w = world_new(3000, 500.0f, false);
    assert_int_equal(rb_fill(w, a), QG_OK);
    for (int f = 0; f < 40; ++f)
        frame_ok(w, a);
    /* The saved state, on an allocator of its own. */
    qg_index *saved = tu_open(qg_default_config(g_kind), &sa);
    assert_int_equal(qg_copy(saved, a), QG_OK);
    assert_int_equal(qg_get_stats(saved).memory_bytes, sa.bytes);
    long before = sa.grow_requests;
    assert_int_equal(qg_copy(saved, a), QG_OK); // the same capacities now
    assert_int_equal(sa.grow_requests, before);
    assert_int_equal(qg_get_stats(saved).memory_bytes, qg_get_stats(a).memory_bytes);
    rb_world *w0 = world_dup(w);
    uint64_t first[5];
    for (int f = 0; f < 5; ++f)
        first[f] = frame_ok(w, a);
    for (int round = 0; round < 4; ++round) {
        const long grows = aa.grow_requests;
        const size_t had = aa.bytes;
        assert_int_equal(qg_copy(a, saved), QG_OK); // restore
        if (had == sa.bytes)
            assert_int_equal(aa.grow_requests, grows); // nothing grew: nothing asked
        assert_int_equal(qg_get_stats(a).memory_bytes, aa.bytes);
        memcpy(w, w0, sizeof *w);
        for (int f = 0; f < 5; ++f)
            assert_true(frame_ok(w, a) == first[f]);
    }
    tu_close(saved, &sa);
    tu_close(a, &aa);
    free(w), free(w0);
}

static void test_copy_refusals(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    const qg_kind other = g_kind == QG_BRUTE_FORCE ? QG_QUADTREE : QG_BRUTE_FORCE;
    qg_index *a = make(qg_default_config(g_kind)), *o = make(qg_default_config(other));
    rb_world *w = world_new(200, 100.0f, false);
    assert_int_equal(rb_fill(w, a), QG_OK);
    tu_snapshot before;
    memset(&before, 0, sizeof before);
    tu_snapshot_take(a, 220, &before);
    if (qg_kind_available(other)) {
        assert_int_equal(qg_copy(a, o), QG_ERR_INVALID);
        assert_int_equal(qg_copy(o, a), QG_ERR_INVALID);
    }
    assert_int_equal(qg_copy(a, NULL), QG_ERR_INVALID);
    assert_int_equal(qg_copy(NULL, a), QG_ERR_INVALID);
    assert_int_equal(qg_copy(a, a), QG_OK);
    qg_index *out = (qg_index *)1;
    assert_int_equal(qg_clone(NULL, &out), QG_ERR_INVALID);
    assert_null(out);
    assert_int_equal(qg_clone(a, NULL), QG_ERR_INVALID);
    assert_int_equal(qg_snapshot_size(NULL), 0);
    unsigned char small[8];
    assert_int_equal(qg_snapshot_write(NULL, small, sizeof small), QG_ERR_INVALID);
    assert_int_equal(qg_snapshot_write(a, NULL, 1u << 20), QG_ERR_INVALID);
    assert_int_equal(qg_snapshot_write(a, small, sizeof small), QG_ERR_INVALID);
    tu_expect_unchanged(a, &before, "%s after refused copies", qg_kind_name(g_kind));
    qg_destroy(a), qg_destroy(o);
    free(w);
}

/* docs/rollback.md's checksum, written again from the page. */
static uint64_t doc_checksum(const unsigned char *p, size_t n)
{
    const uint64_t m = 0x9E3779B97F4A7C15ull;
    uint64_t h[4] = {0x243F6A8885A308D3ull, 0x13198A2E03707344ull, 0xA4093822299F31D0ull, 0x082EFA98EC4E6C89ull};
    for (size_t i = 0; i < n; i += 32) {
        unsigned char q[32] = {0};
        memcpy(q, p + i, n - i < 32 ? n - i : 32);
        for (int k = 0; k < 4; ++k) {
            uint64_t v = 0;
            for (int b = 7; b >= 0; --b)
                v = v << 8 | q[8 * k + b];
            h[k] = (h[k] ^ v) * m;
            h[k] ^= h[k] >> 29;
        }
    }
    uint64_t r = (uint64_t)n * m;
    for (int k = 0; k < 4; ++k) {
        r = (r ^ h[k]) * m;
        r ^= r >> 31;
    }
    return r;
}

static void reseal(unsigned char *buf, size_t n)
{
    const uint64_t sum = doc_checksum(buf + 32, n - 32);
    for (int b = 0; b < 8; ++b)
        buf[24 + b] = (unsigned char)(sum >> (8 * b));
}

/* The byte the hostile loop changed last (for the message). */
static size_t g_where;

/* One read of hostile bytes: refused with nothing held, or a valid index. */
static bool try_read(const unsigned char *buf, size_t n)
{
    tu_alloc a;
    tu_alloc_init(&a);
    const qg_allocator al = tu_allocator(&a);
    qg_index *out = (qg_index *)1;
    const qg_status s = qg_snapshot_read(buf, n, &al, &out);
    if (s != QG_OK) {
        assert_true(s == QG_ERR_INVALID || s == QG_ERR_NOMEM);
        assert_null(out);
        assert_int_equal(a.bytes, 0);
        return false;
    }
    assert_int_equal(qg_validate(out), QG_OK);
    /* A read that passed must be usable: a frame of calls on it. */
    rb_world *w = world_new(50, 100.0f, false);
    assert_int_equal(rb_fill(w, out), QG_OK);
    frame_ok(w, out);
    free(w);
    if (qg_validate(out) != QG_OK)
        fail_msg("%s: a snapshot changed at byte %zu read into an index that validated, and failed "
                 "qg_validate after a frame (seed %llu)",
                 qg_kind_name(g_kind), g_where, (unsigned long long)g_seed);
    qg_destroy(out);
    assert_int_equal(a.bytes, 0);
    assert_int_equal(a.errors, 0);
    return true;
}

static void test_snapshot_hostile(void **state)
{
    (void)state;
    tu_skip_unless_built(g_kind);
    tu_rng r;
    tu_rng_seed(&r, g_seed);
    qg_index *a = make(qg_default_config(g_kind));
    rb_world *w = world_new(400, 150.0f, true);
    assert_int_equal(rb_fill(w, a), QG_OK);
    for (int f = 0; f < 12; ++f)
        frame_ok(w, a);
    const size_t n = qg_snapshot_size(a);
    unsigned char *good = malloc(n), *bad = malloc(n + 64);
    assert_non_null(good);
    assert_non_null(bad);
    assert_int_equal(qg_snapshot_write(a, good, n), QG_OK);
    assert_true(try_read(good, n));
    qg_index *out = (qg_index *)1;
    assert_int_equal(qg_snapshot_read(NULL, n, NULL, &out), QG_ERR_INVALID);
    assert_null(out);
    assert_int_equal(qg_snapshot_read(good, n, NULL, NULL), QG_ERR_INVALID);
    /* Truncated at every length (and one byte too long). */
    const size_t step = n / (size_t)tu_scaled(2000) + 1;
    for (size_t len = 0; len < n; len += (len < 256 ? 1 : step))
        assert_false(try_read(good, len));
    memcpy(bad, good, n);
    bad[n] = 0;
    assert_false(try_read(bad, n + 1));
    /* The header: magic, version, kind, length. */
    for (size_t at = 0; at < 24; ++at) {
        memcpy(bad, good, n);
        bad[at] ^= 0x01;
        assert_false(try_read(bad, n));
        reseal(bad, n);
        assert_false(try_read(bad, n));
    }
    /* A byte changed: the checksum refuses it; with the checksum made to
     * agree, the structure's checks or qg_validate must. */
    const long flips = tu_scaled(3000);
    long accepted = 0;
    for (long k = 0; k < flips; ++k) {
        memcpy(bad, good, n);
        const size_t at = 32 + tu_rng_below(&r, (uint32_t)(n - 32));
        const int kind = (int)tu_rng_below(&r, 4);
        bad[at] = kind == 0 ? (unsigned char)(bad[at] ^ (1u << tu_rng_below(&r, 8)))
                : kind == 1 ? 0xFF
                : kind == 2 ? 0x00
                            : (unsigned char)tu_rng_next(&r);
        if (bad[at] == good[at])
            continue;
        assert_false(try_read(bad, n));
        reseal(bad, n);
        g_where = at;
        accepted += try_read(bad, n);
    }
    /* A huge capacity (the base's boxes, the walk's first array, at byte 85:
     * docs/rollback.md) with the checksum agreeing: refused, not allocated. */
    memcpy(bad, good, n);
    const int32_t huge = INT32_MAX;
    memcpy(bad + 85, &huge, 4);
    reseal(bad, n);
    assert_false(try_read(bad, n));
    printf("hostile %s: %zu bytes, %ld changed snapshots, %ld read into a valid index\n", qg_kind_name(g_kind), n,
           flips, accepted);
    qg_destroy(a);
    free(good), free(bad), free(w);
}

/* ---- every allocation failure --------------------------------------- */

typedef struct oom_case {
    int what; /* 0 clone, 1 snapshot read, 2 copy into a smaller dst, 3 copy with room */
    bool engine;
} oom_case;

static qg_status oom_run(tu_alloc *al, long k, void *user)
{
    const oom_case *oc = user;
    qg_config c = qg_default_config(g_kind);
    c.allocator = tu_allocator(al);
    qg_index *a = make(c);
    rb_world *w = world_new(600, 200.0f, oc->engine);
    assert_int_equal(rb_fill(w, a), QG_OK);
    for (int f = 0; f < 6; ++f)
        frame_ok(w, a);
    qg_index *dst = make(c);
    if (oc->what == 3)
        assert_int_equal(qg_copy(dst, a), QG_OK);
    else {
        rb_world *w2 = world_new(40, 50.0f, false);
        assert_int_equal(rb_fill(w2, dst), QG_OK);
        free(w2);
    }
    tu_snapshot before;
    memset(&before, 0, sizeof before);
    tu_snapshot_take(dst, 700, &before);
    const size_t dst_bytes = qg_get_stats(dst).memory_bytes;
    size_t n = qg_snapshot_size(a);
    unsigned char *buf = malloc(n);
    assert_non_null(buf);
    assert_int_equal(qg_snapshot_write(a, buf, n), QG_OK);
    qg_index *out = NULL;
    tu_alloc_fail_in(al, k);
    qg_status s;
    if (oc->what == 0)
        s = qg_clone(a, &out);
    else if (oc->what == 1)
        s = qg_snapshot_read(buf, n, &c.allocator, &out);
    else
        s = qg_copy(dst, a);
    tu_alloc_disarm(al);
    if (s == QG_OK) {
        qg_index *got = oc->what >= 2 ? dst : out;
        assert_int_equal(qg_validate(got), QG_OK);
        rb_world *w2 = world_dup(w);
        for (int f = 0; f < 3; ++f)
            assert_true(frame_ok(w, a) == frame_ok(w2, got));
        free(w2);
        tu_snapshot_free(&before);
    } else {
        assert_int_equal(s, QG_ERR_NOMEM);
        assert_null(out);
        assert_int_equal(qg_get_stats(dst).memory_bytes, dst_bytes);
        tu_expect_unchanged(dst, &before, "%s: dst after a refused copy (k %ld)", qg_kind_name(g_kind), k);
    }
    qg_destroy(out);
    qg_destroy(dst);
    qg_destroy(a);
    free(buf), free(w);
    return s;
}

static void run_oom(int what, bool engine, const char *name)
{
    tu_skip_unless_built(g_kind);
    oom_case oc = {what, engine};
    tu_each_failure_point(name, 100000, oom_run, &oc);
}

static void test_oom_clone(void **state) { (void)state; run_oom(0, false, "qg_clone"); }
static void test_oom_clone_engine(void **state) { (void)state; run_oom(0, true, "qg_clone with the engine"); }
static void test_oom_read(void **state) { (void)state; run_oom(1, true, "qg_snapshot_read"); }
static void test_oom_copy(void **state) { (void)state; run_oom(2, true, "qg_copy into a smaller index"); }
static void test_oom_copy_room(void **state) { (void)state; run_oom(3, true, "qg_copy with room"); }

int main(int argc, char **argv)
{
    if (!tu_kind_arg(argc, argv, &g_kind))
        return 2;
    g_seed = tu_env_seed(44);
    printf("test_rollback: seed %llu\n", (unsigned long long)g_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rollback_learning), cmocka_unit_test(test_rollback_fixed),
        cmocka_unit_test(test_rollback_engine),   cmocka_unit_test(test_rollback_empty),
        cmocka_unit_test(test_copy_reuse),        cmocka_unit_test(test_copy_refusals),
        cmocka_unit_test(test_snapshot_hostile),  cmocka_unit_test(test_oom_clone),
        cmocka_unit_test(test_oom_clone_engine),  cmocka_unit_test(test_oom_read),
        cmocka_unit_test(test_oom_copy),          cmocka_unit_test(test_oom_copy_room),
    };
    return tu_run_kind_tests("rollback", g_kind, tests);
}
