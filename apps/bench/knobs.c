// SPDX-License-Identifier: MIT
/* quadgrid-bench knobs: every kind from qg_default_config with
 * nothing set, and with only the bounds set, beside its best hand tuning,
 * on the same boxes in one run, the configurations' frames alternating.
 *
 * Scenes (N elements, `agents` motion: each box moves a little each frame):
 *   small  the agents boxes, 2-8 wide, world 16 sqrt(N)
 *   tiny   the same scene scaled by 1/200 (boxes 0.01-0.04 wide)
 *   large  the same scene scaled by 20 (boxes 40-160 wide)
 *   mixed  the `mixed` workload: 1% of the boxes 16x larger (32-128 wide)
 * and scenes that change while they run, reported once 30 frames have
 * passed since the change ended, against a fresh index of the same boxes
 * built with the best hand tuning for them:
 *   grow    every box's width from 2 to 64 over 200 frames, centres kept
 *   gather  the agents walk into 1% of the world (100 frames), then spread
 *           again (100 frames): reported gathered and spread
 *   arrive  1,000 elements, then 1% more every frame until N
 * A frame: qg_move of every element, qg_cleanup, qg_pairs (timed together).
 * "Best hand tuning": the fastest of three settings from the boxes' real
 * sizes (element_size, max_element_size) = (typical, largest ordinary),
 * (typical, 2 typical), (largest ordinary, largest ordinary), each with the
 * scene's bounds, held with fixed_sizes. Every configuration's pairs (count and checksum) are
 * compared frame by frame; a difference is a failure (exit 2). */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <quadgrid.h>

#include "workload.h"

#define KN_CONFIGS 5 /* default, bounds, three hand tunings */
static const char *const kn_config_names[KN_CONFIGS] = {"default", "bounds", "tuned1", "tuned2", "tuned3"};

static double kn_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int kn_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double kn_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, kn_cmp);
    return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The scene's boxes this frame: the agents' boxes mapped by the scene. */
typedef struct kn_scene {
    const char *name;
    qgw_agents a;
    float scale;   /* small/tiny/large: positions and sizes */
    float width;   /* grow: every box's width (0: the agents' own) */
    float gather;  /* gather: 0 = spread, 1 = in 1% of the world */
    int32_t live;  /* arrive: elements present */
    qg_rect *boxes;
    float typical, largest; /* the hand tuning's sizes */
} kn_scene;

static void kn_boxes(kn_scene *s) {
    const qgw_agents *a = &s->a;
    const float c = a->world * 0.5f, k = 1.0f - 0.9f * s->gather;
    for (int32_t i = 0; i < a->n; i++) {
        qg_rect b = a->boxes[i];
        if (s->width > 0.0f || s->gather > 0.0f) {
            float x = 0.5f * (b.min_x + b.max_x), y = 0.5f * (b.min_y + b.max_y);
            float hw = s->width > 0.0f ? 0.5f * s->width : 0.5f * (b.max_x - b.min_x);
            x = c + (x - c) * k;
            y = c + (y - c) * k;
            b = (qg_rect){x - hw, y - hw, x + hw, y + hw};
        }
        s->boxes[i] = (qg_rect){b.min_x * s->scale, b.min_y * s->scale, b.max_x * s->scale, b.max_y * s->scale};
    }
}

/* The hand tuning's sizes from the boxes' real widths: the median side, and
 * the largest side of the ordinary 99% (the mixed scene's large 1% go to
 * coarser levels, as the bench's tuned runs configure them). */
static void kn_sizes(kn_scene *s, int32_t n) {
    int32_t m = n < 4096 ? n : 4096;
    float *v = malloc((size_t)m * sizeof *v);
    if (!v) return;
    for (int32_t j = 0; j < m; j++) {
        qg_rect b = s->boxes[(int64_t)j * n / m];
        v[j] = fmaxf(b.max_x - b.min_x, b.max_y - b.min_y);
    }
    for (int32_t i = 1; i < m; i++) { /* insertion sort: m is small */
        float x = v[i];
        int32_t j = i;
        while (j > 0 && v[j - 1] > x) v[j] = v[j - 1], j--;
        v[j] = x;
    }
    s->typical = v[m / 2];
    s->largest = v[(int64_t)m * 98 / 100];
    free(v);
}

static qg_rect kn_bounds(const kn_scene *s) {
    float W = s->a.world * s->scale;
    return (qg_rect){0.0f, 0.0f, W, W};
}

static qg_config kn_config(qg_kind kind, int c, const kn_scene *s) {
    qg_config cfg = qg_default_config(kind);
    if (c == 0) return cfg;
    cfg.bounds = kn_bounds(s);
    if (c == 1) return cfg;
    /* A hand tuning is held as given (fixed_sizes): the reference is the
     * setting, not what the index would make of it as a hint. */
    cfg.fixed_sizes = true;
    cfg.element_size = c == 4 ? s->largest : s->typical;
    cfg.max_element_size = c == 3 ? 2.0f * s->typical : s->largest;
    return cfg;
}

typedef struct kn_run {
    qg_index *ix;
    double *ms;
    int frames;
    bool dead; /* over the time budget: dropped */
    qgw_sum sum;
} kn_run;

static bool kn_frame(kn_run *r, const qg_rect *boxes, int32_t n, bool time_it) {
    double t0 = kn_now();
    for (int32_t i = 0; i < n; i++)
        if (qg_move(r->ix, i, boxes[i]) != QG_OK) return false;
    qg_cleanup(r->ix);
    r->sum = (qgw_sum){0, 0};
    if (qg_pairs(r->ix, qgw_sum_pair, &r->sum) != QG_OK) return false;
    double ms = 1e3 * (kn_now() - t0);
    if (time_it) r->ms[r->frames++] = ms;
    if (ms > 3000.0) r->dead = true;
    return true;
}

static bool kn_build(kn_run *r, const qg_config *cfg, const qg_rect *boxes, int32_t n) {
    if (qg_create(cfg, &r->ix) != QG_OK) return false;
    for (int32_t i = 0; i < n; i++)
        if (qg_insert(r->ix, boxes[i]) != i) return false;
    qg_cleanup(r->ix);
    return true;
}

/* Runs the configurations `which` (bit c) alternately on the same boxes for
 * `frames` measured frames after two warm-up frames; the scene moves between
 * frames. 0 ok, 2 a mismatch, 1 a failure. */
static int kn_measure(kn_scene *s, kn_run *runs, unsigned which, int frames, int32_t n) {
    for (int f = 0; f < frames + 2; f++) {
        qgw_agents_move(&s->a);
        kn_boxes(s);
        qgw_sum want = {0, 0};
        bool have = false;
        for (int c = 0; c < KN_CONFIGS; c++) {
            kn_run *r = &runs[c];
            if (!(which & (1u << c)) || r->dead || !r->ix) continue;
            if (!kn_frame(r, s->boxes, n, f >= 2)) return 1;
            if (!have) want = r->sum, have = true;
            else if (r->sum.count != want.count || r->sum.checksum != want.checksum) {
                fprintf(stderr, "MISMATCH: scene %s, config %s: %" PRIu64 " pairs, want %" PRIu64 "\n", s->name,
                        kn_config_names[c], r->sum.count, want.count);
                return 2;
            }
        }
    }
    return 0;
}

static void kn_free(kn_run *runs) {
    for (int c = 0; c < KN_CONFIGS; c++) {
        qg_destroy(runs[c].ix);
        free(runs[c].ms);
        memset(&runs[c], 0, sizeof runs[c]);
    }
}

static void kn_report(const char *scene, qg_kind kind, int32_t n, kn_run *runs, unsigned which, bool json) {
    double med[KN_CONFIGS] = {0}, best = 0.0;
    for (int c = 0; c < KN_CONFIGS; c++) {
        if (!(which & (1u << c))) continue;
        med[c] = runs[c].dead || runs[c].frames == 0 ? INFINITY : kn_median(runs[c].ms, runs[c].frames);
        if (c >= 2 && (best == 0.0 || med[c] < best)) best = med[c];
    }
    qg_stats st = qg_get_stats(runs[0].ix);
    if (json) {
        printf("{\"workload\":\"knobs\",\"scene\":\"%s\",\"kind\":\"%s\",\"n\":%d", scene, qg_kind_name(kind), n);
        for (int c = 0; c < KN_CONFIGS; c++)
            if (which & (1u << c)) printf(",\"%s_ms\":%.3f", kn_config_names[c], med[c]);
        printf(",\"best_tuned_ms\":%.3f,\"default_ratio\":%.3f", best, med[0] / best);
        if (which & 2u) printf(",\"bounds_ratio\":%.3f", med[1] / best);
        printf(",\"retunes\":%d,\"element_size\":%g,\"size_bound\":%g,\"cell_size\":%g,\"max_depth\":%d}\n",
               st.retunes, (double)st.element_size, (double)st.size_bound, (double)st.cell_size, st.max_depth);
    } else {
        printf("%-8s %-16s %8d  default %9.2f ms", scene, qg_kind_name(kind), n, med[0]);
        if (which & 2u) printf("  bounds %9.2f ms", med[1]);
        printf("  best tuned %9.2f ms  default/tuned %5.2fx", best, med[0] / best);
        if (which & 2u) printf("  bounds/tuned %5.2fx", med[1] / best);
        printf("  (retunes %d, element %.3g, bound %.3g, cell %.3g, depth %d)\n", st.retunes,
               (double)st.element_size, (double)st.size_bound, (double)st.cell_size, st.max_depth);
    }
    fflush(stdout);
}

static bool kn_scene_init(kn_scene *s, const char *name, int32_t n) {
    memset(s, 0, sizeof *s);
    s->name = name;
    s->scale = 1.0f;
    bool ok = strcmp(name, "mixed") == 0 ? qgw_agents_init_mixed(&s->a, n) : qgw_agents_init(&s->a, n);
    if (!ok) return false;
    if (strcmp(name, "tiny") == 0) s->scale = 0.005f;
    if (strcmp(name, "large") == 0) s->scale = 20.0f;
    if (strcmp(name, "grow") == 0) s->width = 2.0f;
    s->live = n;
    s->boxes = malloc((size_t)n * sizeof *s->boxes);
    if (!s->boxes) return false;
    kn_boxes(s);
    kn_sizes(s, n);
    return true;
}

static void kn_scene_free(kn_scene *s) {
    qgw_agents_free(&s->a);
    free(s->boxes);
}

static bool kn_alloc_runs(kn_run *runs, int frames) {
    for (int c = 0; c < KN_CONFIGS; c++)
        if (!(runs[c].ms = malloc((size_t)(frames + 2) * sizeof(double)))) return false;
    return true;
}

/* A fixed scene: the five configurations from the same build. */
static int kn_fixed(const char *name, qg_kind kind, int32_t n, int frames, bool json) {
    kn_scene s;
    if (!kn_scene_init(&s, name, n)) return 1;
    kn_run runs[KN_CONFIGS];
    memset(runs, 0, sizeof runs);
    int rc = kn_alloc_runs(runs, frames) ? 0 : 1;
    for (int c = 0; c < KN_CONFIGS && rc == 0; c++) {
        qg_config cfg = kn_config(kind, c, &s);
        if (!kn_build(&runs[c], &cfg, s.boxes, n)) rc = 1;
    }
    if (rc == 0) rc = kn_measure(&s, runs, 0x1Fu, frames, n);
    if (rc == 0) kn_report(name, kind, n, runs, 0x1Fu, json);
    kn_free(runs);
    kn_scene_free(&s);
    return rc;
}

/* A changing scene: the default index lives through the change; then, 30
 * frames after it ended, fresh hand-tuned indexes of the same boxes join it
 * for the measured frames. `phase` names the report. */
static int kn_after(kn_scene *s, kn_run *runs, qg_kind kind, const char *phase, int frames, bool json) {
    for (int f = 0; f < 30; f++) {
        qgw_agents_move(&s->a);
        kn_boxes(s);
        if (!kn_frame(&runs[0], s->boxes, s->live, false)) return 1;
    }
    kn_sizes(s, s->live);
    for (int c = 2; c < KN_CONFIGS; c++) {
        qg_destroy(runs[c].ix);
        runs[c].ix = NULL;
        runs[c].frames = 0;
        runs[c].dead = false;
        qg_config cfg = kn_config(kind, c, s);
        if (!kn_build(&runs[c], &cfg, s->boxes, s->live)) return 1;
    }
    runs[0].frames = 0;
    int rc = kn_measure(s, runs, 0x1Du, frames, s->live);
    if (rc == 0) kn_report(phase, kind, s->live, runs, 0x1Du, json);
    return rc;
}

static int kn_changing(const char *name, qg_kind kind, int32_t n, int frames, bool json) {
    kn_scene s;
    if (!kn_scene_init(&s, name, n)) return 1;
    kn_run runs[KN_CONFIGS];
    memset(runs, 0, sizeof runs);
    int rc = kn_alloc_runs(runs, frames) ? 0 : 1;
    qg_config cfg = qg_default_config(kind);
    if (rc == 0 && strcmp(name, "arrive") == 0) {
        /* 1,000, then 1% more a frame (at least one) until n. */
        int32_t live = n < 1000 ? n : 1000;
        if (qg_create(&cfg, &runs[0].ix) != QG_OK) rc = 1;
        for (int32_t i = 0; i < live && rc == 0; i++)
            if (qg_insert(runs[0].ix, s.boxes[i]) != i) rc = 1;
        while (rc == 0 && live < n) {
            qgw_agents_move(&s.a);
            kn_boxes(&s);
            if (!kn_frame(&runs[0], s.boxes, live, false)) rc = 1;
            int32_t more = live / 100 > 0 ? live / 100 : 1;
            if (more > n - live) more = n - live;
            for (int32_t i = live; i < live + more && rc == 0; i++)
                if (qg_insert(runs[0].ix, s.boxes[i]) != i) rc = 1;
            live += more;
        }
        s.live = n;
        if (rc == 0) rc = kn_after(&s, runs, kind, "arrive", frames, json);
    } else if (rc == 0) {
        if (!kn_build(&runs[0], &cfg, s.boxes, n)) rc = 1;
        const bool grow = strcmp(name, "grow") == 0;
        for (int f = 1; f <= (grow ? 200 : 100) && rc == 0; f++) {
            if (grow) s.width = 2.0f + 62.0f * (float)f / 200.0f;
            else s.gather = (float)f / 100.0f;
            qgw_agents_move(&s.a);
            kn_boxes(&s);
            if (!kn_frame(&runs[0], s.boxes, n, false)) rc = 1;
        }
        if (rc == 0) rc = kn_after(&s, runs, kind, grow ? "grow" : "gathered", frames, json);
        for (int f = 1; f <= 100 && rc == 0 && !grow; f++) {
            s.gather = 1.0f - (float)f / 100.0f;
            qgw_agents_move(&s.a);
            kn_boxes(&s);
            if (!kn_frame(&runs[0], s.boxes, n, false)) rc = 1;
        }
        if (rc == 0 && !grow) rc = kn_after(&s, runs, kind, "spread", frames, json);
    }
    kn_free(runs);
    kn_scene_free(&s);
    return rc;
}

/* Entry from main.c: `kinds` a comma list or "all", `scenes` a comma list. */
int bench_knobs(const char *kinds, const char *scenes, int32_t n, int frames, bool json) {
    char buf[256];
    int rc = 0;
    snprintf(buf, sizeof buf, "%s", scenes);
    for (char *save = NULL, *sc = strtok_r(buf, ",", &save); sc; sc = strtok_r(NULL, ",", &save)) {
        const bool fixed = !strcmp(sc, "small") || !strcmp(sc, "tiny") || !strcmp(sc, "large") || !strcmp(sc, "mixed");
        const bool changing = !strcmp(sc, "grow") || !strcmp(sc, "gather") || !strcmp(sc, "arrive");
        if (!fixed && !changing) {
            fprintf(stderr, "quadgrid-bench: knobs: unknown scene '%s' (small,tiny,large,mixed,grow,gather,arrive)\n", sc);
            return 2;
        }
        for (int k = 0; k < QG_KIND_COUNT; k++) {
            if (k == QG_BRUTE_FORCE || !qg_kind_available((qg_kind)k)) continue;
            if (strcmp(kinds, "all") != 0) {
                const char *name = qg_kind_name((qg_kind)k), *p = strstr(kinds, name);
                size_t len = strlen(name);
                bool hit = false;
                while (p && !hit) {
                    hit = (p == kinds || p[-1] == ',') && (p[len] == '\0' || p[len] == ',');
                    p = strstr(p + 1, name);
                }
                if (!hit) continue;
            }
            int r = fixed ? kn_fixed(sc, (qg_kind)k, n, frames, json) : kn_changing(sc, (qg_kind)k, n, frames, json);
            if (r == 1) fprintf(stderr, "quadgrid-bench: knobs: %s failed in scene %s\n", qg_kind_name((qg_kind)k), sc);
            if (r > rc) rc = r;
        }
    }
    return rc;
}
