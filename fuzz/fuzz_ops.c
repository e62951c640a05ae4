// SPDX-License-Identifier: MIT
// libFuzzer target: a byte string becomes a sequence of operations run on one
// kind and on the brute-force oracle side by side; any difference in answers,
// statuses or invariants aborts. The first byte picks the kind, so one target
// covers every built kind (QG_FUZZ_KIND=name in the environment fixes the
// kind instead, so CI can give each kind its own time). The next bytes pick
// the bounds (default, +-3e38, 1e-30 wide, small and off-centre: boxes land
// outside them and the kinds re-fit) and the point grid's size bound (its
// levels). An operation can make the kind's next allocation fail: the call
// must answer QG_ERR_NOMEM and change nothing, which every later comparison
// with the oracle (which skips the call) checks. The batch calls
// (qg_move_many, qg_insert_many), ray casts, nearest neighbours and the
// parallel calls (through a job system that runs the parts in reverse on
// this thread) are operations too, and so are static flags, filters and
// overlap events (the oracle's static elements stay in its structure, the
// kind's settle in the static layer at its cleanups: two paths, one answer).
// Coordinates include the float range's hostile corners (+-FLT_MAX and just
// under it, 1e38, 3e38, multiples of FLT_TRUE_MIN), and rays unbounded ones
// (max_t inf) with subnormal, huge or axis-aligned directions.
//
//   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DQG_FUZZ=ON
//   cmake --build build-fuzz --target fuzz_ops
//   build-fuzz/fuzz/fuzz_ops -max_total_time=60 fuzz/corpus
#include <quadgrid.h>

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint32_t take(reader *r, int bytes)
{
    uint32_t v = 0;
    for (int i = 0; i < bytes; ++i) {
        v = v << 8 | (r->n ? *r->p : 0);
        if (r->n) {
            r->p++;
            r->n--;
        }
    }
    return v;
}

/// Coordinates from a few bytes: mostly small integers on [-64, 1088] so
/// boxes touch, coincide and straddle cell borders; sometimes raw floats
/// (NaN, infinities, huge) so bad input is fuzzed too.
/// The float range's hostile corners, picked by a byte: +-FLT_MAX and a few
/// ulps under it, 1e38 and 3e38 (sums and differences overflow), multiples of
/// FLT_TRUE_MIN (products underflow, 1 / d overflows), 1e-30.
static float hostile(uint32_t v)
{
    const float s = (v & 1) ? -1.0f : 1.0f;
    const uint32_t k = v >> 1 & 7;
    switch (v >> 4 & 7) {
    case 0: return s * FLT_MAX;
    case 1: return s * (FLT_MAX - (float)(k + 1) * 2.028240960e31f); // k+1 ulps under
    case 2: return s * 1e38f * (float)(k + 1) * 0.25f;
    case 3: return s * 3e38f;
    case 4: return s * FLT_TRUE_MIN * (float)(k + 1);
    case 5: return s * 1e-30f * (float)(k + 1);
    case 6: return s * FLT_MAX * 0.5f;
    default: return s * 3e-39f;
    }
}

static float coord(reader *r)
{
    uint32_t v = take(r, 2);
    if ((v & 0xFF00) == 0xEF00)
        return hostile(v);
    if ((v & 0xF000) == 0xF000) {
        uint32_t bits = take(r, 4);
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    return (float)(v % 1152) - 64.0f + (float)(v >> 12 & 3) * 0.25f;
}

static qg_rect box(reader *r)
{
    qg_rect b;
    b.min_x = coord(r);
    b.min_y = coord(r);
    uint32_t shape = take(r, 1);
    b.max_x = (shape & 1) ? coord(r) : b.min_x + (float)(shape >> 1 & 15);
    b.max_y = (shape & 32) ? coord(r) : b.min_y + (float)(shape >> 1 & 15);
    return b;
}

/// The kind's allocator: realloc that fails the next allocate-or-grow request
/// when asked (shrinks and frees never fail, as the contract says).
typedef struct failing {
    bool fail_next;
} failing;

static void *fuzz_realloc(void *ptr, size_t old_size, size_t new_size, void *user)
{
    failing *f = user;
    if (new_size == 0) {
        free(ptr);
        return NULL;
    }
    if (new_size > old_size && f->fail_next) {
        f->fail_next = false;
        return NULL;
    }
    return realloc(ptr, new_size);
}

static qg_rect fuzz_bounds(reader *r)
{
    switch (take(r, 1) % 4) {
    case 0: return (qg_rect){0.0f, 0.0f, 1024.0f, 1024.0f};
    case 1: return (qg_rect){-3e38f, -3e38f, 3e38f, 3e38f};
    case 2: return (qg_rect){0.0f, 0.0f, 1e-30f, 1e-30f};
    default: return (qg_rect){400.0f, 400.0f, 500.0f, 450.0f};
    }
}

typedef struct hits {
    uint64_t sum, count;
} hits;

static bool on_hit(qg_handle h, void *user)
{
    hits *s = user;
    s->sum += (uint64_t)h * 0x9E3779B97F4A7C15ull;
    s->count++;
    return true;
}

static bool on_pair(qg_handle a, qg_handle b, void *user)
{
    if (a >= b)
        abort();
    hits *s = user;
    s->sum += ((uint64_t)a << 32 | (uint32_t)b) * 0xBF58476D1CE4E5B9ull;
    s->count++;
    return true;
}

/// Overlap events: user is two hits, began's then ended's.
static bool on_began(qg_handle a, qg_handle b, void *user)
{
    return on_pair(a, b, ((hits **)user)[0]);
}

static bool on_ended(qg_handle a, qg_handle b, void *user)
{
    return on_pair(a, b, ((hits **)user)[1]);
}

/// A job system on this thread that runs the items last to first.
static void reverse_run(qg_task_fn *task, int32_t count, void *context, void *user)
{
    (void)user;
    for (int32_t i = count; i-- > 0;)
        task(i, i + 1, i % 3, context);
}

typedef struct ray_sum {
    uint64_t sum, count;
    float best;
    qg_handle best_h;
    bool closest;
} ray_sum;

static float on_ray(qg_handle h, float t, void *user)
{
    ray_sum *s = user;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    s->sum += ((uint64_t)(uint32_t)h << 32 | bits) * 0x94D049BB133111EBull;
    s->count++;
    if (t < s->best || (t == s->best && h < s->best_h))
        s->best = t, s->best_h = h;
    return s->closest ? t : INFINITY;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size};
    qg_kind kind = (qg_kind)(take(&r, 1) % QG_KIND_COUNT);
    const char *fixed = getenv("QG_FUZZ_KIND");
    if (fixed != NULL && qg_kind_from_name(fixed, &kind) != QG_OK)
        abort();
    if (!qg_kind_available(kind))
        return 0;
    qg_config config = qg_default_config(kind);
    config.leaf_capacity = (int)(take(&r, 1) % 6);
    config.bounds = fuzz_bounds(&r);
    const uint32_t bound = take(&r, 1) % 9;
    config.max_element_size = bound == 8 ? 0.0f : (float)(1u << bound);
    failing fail = {false};
    config.allocator = (qg_allocator){fuzz_realloc, &fail};
    qg_config oracle_config = qg_default_config(QG_BRUTE_FORCE);
    qg_index *index = NULL, *oracle = NULL;
    if (qg_create(&config, &index) != QG_OK || qg_create(&oracle_config, &oracle) != QG_OK)
        abort();
    bool arm_next = false;
    while (r.n > 0) {
        // A failure armed by the previous operation applies to this one only.
        const bool armed = arm_next;
        fail.fail_next = arm_next;
        arm_next = false;
        uint32_t op = take(&r, 1) % 16;
        switch (op) {
        case 0:
        case 1: {
            qg_rect b = box(&r);
            qg_handle a = qg_insert(index, b);
            if (a == QG_ERR_NOMEM && armed)
                break; // the failure asked for: the oracle skips the call
            if (a != qg_insert(oracle, b))
                abort();
            break;
        }
        case 2: {
            qg_handle h = (qg_handle)(take(&r, 2) % 512) - 4;
            qg_rect b = box(&r);
            qg_status s = qg_move(index, h, b);
            if (s == QG_ERR_NOMEM && armed)
                break;
            if (s != qg_move(oracle, h, b))
                abort();
            break;
        }
        case 3: {
            qg_handle h = (qg_handle)(take(&r, 2) % 512) - 4;
            if (qg_remove(index, h) != qg_remove(oracle, h))
                abort();
            break;
        }
        case 4:
            qg_cleanup(index);
            break;
        case 5: {
            qg_rect area = box(&r);
            hits a = {0, 0}, b = {0, 0};
            if (qg_query(index, area, on_hit, &a) != qg_query(oracle, area, on_hit, &b) || a.sum != b.sum ||
                a.count != b.count)
                abort();
            break;
        }
        case 6: {
            hits a = {0, 0}, b = {0, 0};
            if (qg_pairs(index, on_pair, &a) != QG_OK || qg_pairs(oracle, on_pair, &b) != QG_OK ||
                a.sum != b.sum || a.count != b.count)
                abort();
            break;
        }
        case 8: { // a batch of moves: the same status, the same result
            enum { MAX = 16 };
            qg_handle hs[MAX];
            qg_rect bs[MAX];
            const int32_t n = (int32_t)(take(&r, 1) % (MAX + 1));
            for (int32_t i = 0; i < n; ++i) {
                hs[i] = (qg_handle)(take(&r, 2) % 512) - 4;
                bs[i] = box(&r);
            }
            const qg_jobs jobs = {(int32_t)(take(&r, 1) % 4) + 1, reverse_run, NULL};
            qg_status s = qg_move_many(index, &jobs, hs, bs, n);
            if (s == QG_ERR_NOMEM && armed)
                break;
            if (s != qg_move_many(oracle, NULL, hs, bs, n))
                abort();
            break;
        }
        case 9: { // a bulk insert: the same handles
            enum { MAX = 12 };
            qg_rect bs[MAX];
            qg_handle ha[MAX], hb[MAX];
            const int32_t n = (int32_t)(take(&r, 1) % (MAX + 1));
            for (int32_t i = 0; i < n; ++i)
                bs[i] = box(&r);
            qg_status s = qg_insert_many(index, bs, n, ha);
            if (s == QG_ERR_NOMEM && armed)
                break;
            if (s != qg_insert_many(oracle, bs, n, hb) || (s == QG_OK && memcmp(ha, hb, sizeof(qg_handle) * (size_t)n)))
                abort();
            break;
        }
        case 10: { // a ray: every hit, then the closest
            const float ox = coord(&r), oy = coord(&r);
            float dx = (float)((int)(take(&r, 1) % 9) - 4) * 0.5f, dy = coord(&r) / 256.0f;
            const uint32_t m = take(&r, 1);
            float max_t = m == 255 ? INFINITY : (float)m * 4.0f;
            if (m >= 250 && m <= 253) {
                // Unbounded, with a hostile direction: subnormal, huge, or
                // one axis zero (the other from the table).
                const uint32_t h = take(&r, 2);
                dx = m & 1 ? hostile(h & 0xFF) : 0.0f;
                dy = m & 2 ? hostile(h >> 8) : m == 250 ? 0.0f : dy;
                max_t = m == 250 ? FLT_MAX : INFINITY;
            }
            for (int closest = 0; closest < 2; ++closest) {
                ray_sum a = {0, 0, INFINITY, -1, closest}, b = {0, 0, INFINITY, -1, closest};
                qg_status sa = qg_raycast(index, ox, oy, dx, dy, max_t, on_ray, &a);
                if (sa != qg_raycast(oracle, ox, oy, dx, dy, max_t, on_ray, &b) || a.best_h != b.best_h ||
                    (!closest && (a.sum != b.sum || a.count != b.count)))
                    abort();
            }
            break;
        }
        case 11: { // the k nearest, in (distance2, handle) order
            enum { K = 10 };
            const float x = coord(&r), y = coord(&r);
            const int32_t k = (int32_t)(take(&r, 1) % (K + 1));
            const uint32_t m = take(&r, 1);
            const float max_d2 = m == 255 ? INFINITY : (float)(m * m);
            qg_handle ha[K], hb[K];
            float da[K], db[K];
            int32_t fa = -1, fb = -2;
            qg_status sa = qg_nearest(index, x, y, k, max_d2, ha, da, &fa);
            if (sa != qg_nearest(oracle, x, y, k, max_d2, hb, db, &fb) || fa != fb ||
                memcmp(ha, hb, sizeof(qg_handle) * (size_t)fa) || memcmp(da, db, sizeof(float) * (size_t)fa))
                abort();
            break;
        }
        case 12: { // pairs in parts (their sums add up), or a parallel cleanup
            const int32_t parts = (int32_t)(take(&r, 1) % 5) + 1;
            const qg_jobs jobs = {parts, reverse_run, NULL};
            if (parts == 5) {
                qg_cleanup_parallel(index, &jobs);
                break;
            }
            hits a[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}}, b = {0, 0};
            void *users[4] = {&a[0], &a[1], &a[2], &a[3]};
            if (qg_pairs_parallel(index, &jobs, on_pair, users, NULL) != QG_OK ||
                qg_pairs(oracle, on_pair, &b) != QG_OK)
                abort();
            for (int32_t p = 1; p < parts; ++p)
                a[0].sum += a[p].sum, a[0].count += a[p].count;
            if (a[0].sum != b.sum || a[0].count != b.count)
                abort();
            break;
        }
        case 13: { // a static flag, set or cleared
            qg_handle h = (qg_handle)(take(&r, 2) % 512) - 4;
            const bool on = take(&r, 1) & 1;
            qg_status s = qg_set_static(index, h, on);
            if (s == QG_ERR_NOMEM && armed)
                break;
            if (s != qg_set_static(oracle, h, on) || qg_is_static(index, h) != qg_is_static(oracle, h))
                abort();
            break;
        }
        case 14: { // a filter: one category bit of four, a mask of them or all
            qg_handle h = (qg_handle)(take(&r, 2) % 512) - 4;
            const uint32_t v = take(&r, 1);
            const qg_filter f = {1u << (v & 3), (v >> 2 & 15) == 15 ? 0xFFFFFFFFu : (v >> 2 & 15)};
            qg_status s = qg_set_filter(index, h, f);
            if (s == QG_ERR_NOMEM && armed)
                break;
            if (s != qg_set_filter(oracle, h, f))
                abort();
            break;
        }
        case 15: { // overlap events: the same began and ended sets
            hits ab = {0, 0}, ae = {0, 0}, bb = {0, 0}, be = {0, 0};
            hits *ia[2] = {&ab, &ae}, *oa[2] = {&bb, &be};
            qg_status s = qg_pair_events(index, on_began, on_ended, ia);
            if (s == QG_ERR_NOMEM && armed) {
                if (ab.count != 0 || ae.count != 0)
                    abort(); // nothing reported on failure
                break;
            }
            if (s != qg_pair_events(oracle, on_began, on_ended, oa) || ab.sum != bb.sum ||
                ab.count != bb.count || ae.sum != be.sum || ae.count != be.count)
                abort();
            break;
        }
        default: {
            const uint32_t what = take(&r, 1);
            if (what == 0) {
                qg_clear(index);
                qg_clear(oracle);
            } else if (what < 64) {
                arm_next = true;
            }
            break;
        }
        }
        if (qg_count(index) != qg_count(oracle) || qg_validate(index) != QG_OK)
            abort();
    }
    qg_destroy(index);
    qg_destroy(oracle);
    return 0;
}
