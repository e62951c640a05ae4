// SPDX-License-Identifier: MIT
/* quadgrid-bench: `check`: the sort-and-sweep reference and the sap peer
 * against plain loops. */
#include "bench.h"

#include <math.h>

/* check: the reference against plain loops, independent of the library     */

/* The level reference (sort-and-sweep, tile-tile pairs dropped) against
 * plain loops over every agent and every element, each frame. */
static int run_check_level(const options *o) {
    bench_level_scene sc;
    if (!bench_level_init(&sc, o->n)) return note("out of memory"), 1;
    qgw_sweep ref = {0};
    int rc = 0;
    const int32_t S = sc.tiles, A = sc.agents.n;
    if (o->format == OUT_TABLE) printf("level n=%d: %d tiles, %d agents\n", o->n, S, A);
    for (int32_t frame = 0; frame <= o->frames + WARMUP_FRAMES && rc == 0; frame++) {
        if (frame > 0) {
            qgw_agents_move(&sc.agents);
            bench_level_sync(&sc);
        }
        qgw_sum fast, slow = {0, 0};
        if (!bench_level_reference(&sc, &ref, &fast, NULL)) {
            rc = 1;
            break;
        }
        for (int32_t i = 0; i < S + A; i++)
            for (int32_t j = (i < S ? S : i + 1); j < S + A; j++)
                if (qgw_overlap(&sc.all[i], &sc.all[j])) qgw_sum_pair(i, j, &slow);
        if (fast.count != slow.count || fast.checksum != slow.checksum) {
            note("MISMATCH: level reference at frame %d: %" PRIu64 " pairs vs %" PRIu64, frame, fast.count,
                 slow.count);
            rc = 2;
        } else if (o->format == OUT_TABLE) {
            printf("level frame %3d: pairs %8" PRIu64 "  checksum %016" PRIx64 "\n", frame, fast.count,
                   fast.checksum);
        }
    }
    if (rc == 0) note("check: level reference equals plain loops (n=%d)", o->n);
    qgw_sweep_free(&ref);
    bench_level_free(&sc);
    return rc;
}

/* ---- sap against plain loops on hostile sets ------------------------------
 *
 * The sap peer (peers/sap.c) partitions, sorts integer keys and sweeps with
 * SIMD masks: each of those is a place to lose or double a pair. Here it is
 * held to plain loops (qgw_overlap) on sets built to break it: tiny, huge,
 * zero-size, coincident, touching, out of any nominal bounds, negative,
 * n = 0, 1, 2, all overlapping, long stacks along x and y, tall walls among
 * small boxes, a far outlier; through fresh builds and coherent updates
 * (jitter, teleports, a shuffle that leaves last frame's order far off),
 * with each of its forms (SAP_SIMD=0 scalar, 1 SSE2, 2 AVX2). */

typedef struct sap_pair_check {
    qgw_sum sum;
    int32_t n;
    bool bad; /* a pair out of order or out of range */
} sap_pair_check;

static bool sap_check_pair(qg_handle a, qg_handle b, void *user) {
    sap_pair_check *c = user;
    if (!(0 <= a && a < b && b < c->n)) c->bad = true;
    return qgw_sum_pair(a, b, &c->sum);
}

static float sap_u(qgw_rng *r, float lo, float hi) {
    return lo + (hi - lo) * qgw_uniform(r);
}

static qg_rect sap_box(float x, float y, float w, float h) {
    qg_rect b = {x, y, x + w, y + h};
    return b;
}

enum { SAP_SETS = 16 };
static const char *const sap_set_names[SAP_SETS] = {
    "uniform", "tiny",      "huge",       "points",        "coincident",  "touching", "negative", "outlier",
    "all",     "x-stack",   "y-stack",    "walls",         "signed-zero", "wide-range", "n0-2",   "mixed-sizes"};

/* Set `set` with n boxes from rng into b. */
static void sap_make_set(int set, int32_t n, qgw_rng *r, qg_rect *b) {
    for (int32_t i = 0; i < n; i++) {
        float x = sap_u(r, 0, 1000), y = sap_u(r, 0, 1000), w = sap_u(r, 0, 30), h = sap_u(r, 0, 30);
        switch (set) {
        case 0: b[i] = sap_box(x, y, w, h); break;
        case 1: b[i] = sap_box(x * 0x1p-100f, y * 0x1p-100f, w * 0x1p-100f, h * 0x1p-100f); break;
        case 2: {
            float c = sap_u(r, -3e38f, 3e38f), d = sap_u(r, -3e38f, 3e38f);
            float e = sap_u(r, 0, 1) * 3e38f, f = sap_u(r, 0, 1) * 3e38f;
            qg_rect q = {c < 0 ? c : c - e, d < 0 ? d : d - f, c < 0 ? c + e : c, d < 0 ? d + f : d};
            b[i] = q;
            break;
        }
        case 3: b[i] = sap_box(floorf(x / 50) * 50, floorf(y / 50) * 50, 0, 0); break;
        case 4: b[i] = sap_box(100, 200, 5, 5); break;
        case 5: b[i] = sap_box(floorf(x / 10) * 10, floorf(y / 10) * 10, 10, 10); break;
        case 6: b[i] = sap_box(-x - 1e5f, -y, w, h); break;
        case 7: b[i] = i == 0 ? sap_box(1e30f, -1e30f, 1e29f, 1e29f) : sap_box(x, y, w, h); break;
        case 8: b[i] = sap_box(-x, -y, 2000 + w, 2000 + h); break;
        case 9: b[i] = sap_box(500, y * 20, 3, h); break;
        case 10: b[i] = sap_box(x * 20, 500, w, 3); break;
        case 11: b[i] = i % 10 == 0 ? sap_box(x, -5000, 1, 10000 + y) : sap_box(x, y, w / 4, h / 4); break;
        case 12: {
            float z = (i & 1) ? -0.0f : 0.0f;
            b[i] = i % 3 == 0 ? sap_box(z, y, 0, h) : i % 3 == 1 ? sap_box(-w, y, w, h) : sap_box(x, z, w, 0);
            if (i % 3 == 1) b[i].max_x = z;
            break;
        }
        case 13: {
            float sc = ldexpf(1.0f, (int)sap_u(r, -60, 60));
            b[i] = sap_box(x * sc - 500 * sc, y * sc - 500 * sc, w * sc, h * sc);
            break;
        }
        case 14: b[i] = sap_box(x / 100, y / 100, w, h); break;
        default: {
            float k = i % 50 == 0 ? 40.0f : i % 7 == 0 ? 0.0f : 1.0f;
            b[i] = sap_box(x, y, w * k, h * k);
            break;
        }
        }
    }
}

/* Frame motions: 0 jitter, 1 teleport 10%, 2 shuffle (order far off),
 * 3 everything moves far (escapes the learned slabs). */
static void sap_move(int kind, int32_t n, qgw_rng *r, qg_rect *b) {
    for (int32_t i = 0; i < n; i++) {
        float dx = sap_u(r, -2, 2), dy = sap_u(r, -2, 2);
        if (kind == 1 && qgw_uniform(r) < 0.1f) dx = sap_u(r, -500, 500), dy = sap_u(r, -500, 500);
        if (kind == 3) dx += 3000.0f, dy = dy * 3.0f - 2000.0f;
        float w = b[i].max_x - b[i].min_x, h = b[i].max_y - b[i].min_y;
        float nx = b[i].min_x + dx, ny = b[i].min_y + dy;
        if (!(isfinite(nx) && isfinite(ny) && isfinite(nx + w) && isfinite(ny + h))) continue;
        if (fabsf(b[i].min_x) > 1e20f || fabsf(b[i].min_y) > 1e20f || w < 1e-10f) continue; /* keep their bits */
        b[i] = sap_box(nx, ny, w, h);
    }
    if (kind == 2)
        for (int32_t i = n - 1; i > 0; i--) {
            int32_t j = (int32_t)(qgw_next(r) % (uint64_t)(i + 1));
            qg_rect t = b[i];
            b[i] = b[j], b[j] = t;
        }
}

/* One set through a build and frames, pairs and queries each time. */
static int sap_check_one(int set, int32_t n, uint64_t seed, int simd) {
    qgw_rng r = qgw_rng_new(seed);
    qg_rect *b = malloc(((size_t)n + 1) * sizeof *b);
    if (!b) return note("out of memory"), 1;
    sap_make_set(set, n, &r, b);
    char form[2] = {(char)('0' + simd), 0};
    setenv("SAP_SIMD", form, 1);
    bench_impl *impl = NULL;
    bench_setup setup = {{0, 0, 1000, 1000}, n, 5, 30, 0, 0, 0, NULL, 0};
    int rc = 0;
    if (!bench_sap_vtable.create(&impl, &setup, NULL) || !bench_sap_vtable.build(impl, b, n, false)) rc = 1;
    for (int frame = 0; frame < 9 && rc == 0; frame++) {
        if (frame > 0) {
            sap_move(frame % 4, n, &r, b);
            if (!bench_sap_vtable.update(impl, b, n)) {
                rc = 1;
                break;
            }
        }
        sap_pair_check got = {{0, 0}, n, false};
        qgw_sum want = {0, 0};
        bench_sap_vtable.pairs(impl, sap_check_pair, &got);
        for (int32_t i = 0; i < n; i++)
            for (int32_t j = i + 1; j < n; j++)
                if (qgw_overlap(&b[i], &b[j])) qgw_sum_pair(i, j, &want);
        if (got.bad || got.sum.count != want.count || got.sum.checksum != want.checksum) {
            note("MISMATCH: sap set %s n=%d seed %" PRIu64 " SAP_SIMD=%d frame %d: pairs %" PRIu64
                 " vs plain loops %" PRIu64 "%s",
                 sap_set_names[set], n, seed, simd, frame, got.sum.count, want.count,
                 got.bad ? " (a pair out of order or range)" : "");
            rc = 2;
            break;
        }
        for (int q = 0; q < 8 && rc == 0 && n > 0; q++) {
            const qg_rect *c = &b[qgw_next(&r) % (uint64_t)n];
            float gx = sap_u(&r, 0, 40) * (q & 1 ? 1.0f : 0.0f);
            qg_rect area = {c->min_x - gx, c->min_y - gx, c->max_x + gx, c->max_y + gx};
            if (q == 7) area = (qg_rect){-3e38f, -3e38f, 3e38f, 3e38f};
            hit_sum fast = {q, 0, 0}, slow = {q, 0, 0};
            bench_sap_vtable.query(impl, area, sum_hit, &fast);
            for (int32_t i = 0; i < n; i++)
                if (qgw_overlap(&area, &b[i])) sum_hit(i, &slow);
            if (fast.hits != slow.hits || fast.checksum != slow.checksum) {
                note("MISMATCH: sap set %s n=%d seed %" PRIu64 " SAP_SIMD=%d frame %d query %d: %" PRIu64
                     " hits vs %" PRIu64,
                     sap_set_names[set], n, seed, simd, frame, q, fast.hits, slow.hits);
                rc = 2;
            }
        }
    }
    if (rc == 1) note("sap failed on set %s n=%d: %s", sap_set_names[set], n,
                      impl ? (bench_sap_vtable.error(impl) ? bench_sap_vtable.error(impl) : "?") : "create");
    bench_sap_vtable.destroy(impl);
    free(b);
    unsetenv("SAP_SIMD");
    return rc;
}

/* The level tables: tiles of one hostile set (static), agents of another
 * (moving), every pair but tile-tile, against plain loops. */
static int sap_check_level(int tset, int aset, int32_t s, int32_t a, uint64_t seed, int simd) {
    qgw_rng r = qgw_rng_new(seed);
    qg_rect *all = malloc(((size_t)s + (size_t)a + 1) * sizeof *all);
    if (!all) return note("out of memory"), 1;
    sap_make_set(tset, s, &r, all);
    sap_make_set(aset, a, &r, all + s);
    char form[2] = {(char)('0' + simd), 0};
    setenv("SAP_SIMD", form, 1);
    bench_level *impl = NULL;
    bench_setup setup = {{0, 0, 1000, 1000}, s + a, 5, 30, 0, 0, 0, NULL, 0};
    int rc = 0;
    if (!bench_sap_level_vtable.create(&impl, &setup, NULL) ||
        !bench_sap_level_vtable.build(impl, all, s, all + s, a))
        rc = 1;
    for (int frame = 0; frame < 7 && rc == 0; frame++) {
        if (frame > 0) {
            sap_move(frame % 4, a, &r, all + s);
            if (!bench_sap_level_vtable.update(impl, all + s, a)) {
                rc = 1;
                break;
            }
        }
        sap_pair_check got = {{0, 0}, s + a, false};
        qgw_sum want = {0, 0};
        bench_sap_level_vtable.pairs(impl, sap_check_pair, &got);
        for (int32_t i = 0; i < s + a; i++)
            for (int32_t j = (i < s ? s : i + 1); j < s + a; j++)
                if (qgw_overlap(&all[i], &all[j])) qgw_sum_pair(i, j, &want);
        if (got.bad || got.sum.count != want.count || got.sum.checksum != want.checksum) {
            note("MISMATCH: sap level tiles %s x%d, agents %s x%d, seed %" PRIu64 " SAP_SIMD=%d frame %d: pairs %" PRIu64
                 " vs plain loops %" PRIu64 "%s",
                 sap_set_names[tset], s, sap_set_names[aset], a, seed, simd, frame, got.sum.count, want.count,
                 got.bad ? " (a pair out of order or range)" : "");
            rc = 2;
        }
    }
    if (rc == 1) note("sap level failed (tiles %s, agents %s)", sap_set_names[tset], sap_set_names[aset]);
    bench_sap_level_vtable.destroy(impl);
    free(all);
    unsetenv("SAP_SIMD");
    return rc;
}

/* Every set at a few sizes (n = 0, 1, 2 among them), each form, fixed seeds
 * (printed with any mismatch). */
static int run_check_sap(const options *o) {
    static const int32_t sizes[] = {0, 1, 2, 3, 17, 200, 1500};
    int rc = 0, runs = 0;
    for (int set = 0; set < SAP_SETS && rc == 0; set++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0] && rc == 0; k++)
            for (int simd = 0; simd <= 2 && rc == 0; simd++) {
                uint64_t seed = QGW_SEED + (uint64_t)set * 1000u + (uint64_t)k;
                rc = sap_check_one(set, sizes[k], seed, simd);
                runs++;
            }
    static const int32_t lsizes[][2] = {{0, 0}, {0, 5}, {5, 0}, {1, 1}, {300, 40}, {1200, 300}};
    int lruns = 0;
    for (int tset = 0; tset < SAP_SETS && rc == 0; tset += 3)
        for (int aset = 0; aset < SAP_SETS && rc == 0; aset += 2)
            for (size_t k = 0; k < sizeof lsizes / sizeof lsizes[0] && rc == 0; k++)
                for (int simd = 0; simd <= 2 && rc == 0; simd += 2) {
                    uint64_t seed = QGW_SEED + 500000u + (uint64_t)tset * 1000u + (uint64_t)aset * 10u + (uint64_t)k;
                    rc = sap_check_level(tset, aset, lsizes[k][0], lsizes[k][1], seed, simd);
                    lruns++;
                }
    if (rc == 0) note("check: sap level equals plain loops on %d hostile runs (seeds %" PRIu64 "+500000+1000*tiles+10*agents+size)", lruns, QGW_SEED);
    if (rc == 0)
        note("check: sap equals plain loops on %d hostile runs (%d sets, n up to 1500, seeds %" PRIu64
             "+1000*set+size, SAP_SIMD 0/1/2)", runs, SAP_SETS, QGW_SEED);
    (void)o;
    return rc;
}

int run_check(const options *o) {
    qgw_agents a;
    if (!qgw_agents_init(&a, o->n)) return note("out of memory"), 1;
    qgw_sweep ref = {0};
    int rc = 0;
    for (int32_t frame = 0; frame <= o->frames + WARMUP_FRAMES && rc == 0; frame++) {
        if (frame > 0) qgw_agents_move(&a);
        qgw_sum fast, slow = {0, 0};
        if (!qgw_reference_sum(&ref, a.boxes, a.n, &fast)) {
            rc = 1;
            break;
        }
        for (int32_t i = 0; i < a.n; i++)
            for (int32_t j = i + 1; j < a.n; j++)
                if (qgw_overlap(&a.boxes[i], &a.boxes[j])) qgw_sum_pair(i, j, &slow);
        if (fast.count != slow.count || fast.checksum != slow.checksum) {
            note("MISMATCH: sweep reference at frame %d: %" PRIu64 " pairs vs %" PRIu64, frame,
                 fast.count, slow.count);
            rc = 2;
        } else if (o->format == OUT_TABLE) {
            printf("frame %3d: pairs %8" PRIu64 "  checksum %016" PRIx64 "\n", frame, fast.count,
                   fast.checksum);
        }
    }
    /* Window queries of the static workload against plain loops. */
    for (int32_t q = 0; q < o->queries && rc == 0; q++) {
        qg_rect area = qgw_static_query(&a.rng, a.world);
        hit_sum fast = {q, 0, 0}, slow = {q, 0, 0};
        qgw_sweep_query(&ref, area, sum_hit, &fast);
        for (int32_t i = 0; i < a.n; i++)
            if (qgw_overlap(&area, &a.boxes[i])) sum_hit(i, &slow);
        if (fast.hits != slow.hits || fast.checksum != slow.checksum) {
            note("MISMATCH: sweep query %d: %" PRIu64 " hits vs %" PRIu64, q, fast.hits, slow.hits);
            rc = 2;
        }
    }
    if (rc == 0) note("check: sort-and-sweep reference equals plain loops (n=%d)", a.n);
    qgw_sweep_free(&ref);
    qgw_agents_free(&a);
    if (rc == 0) rc = run_check_level(o);
    if (rc == 0) rc = run_check_sap(o);
    return rc;
}
