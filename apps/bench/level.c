// SPDX-License-Identifier: MIT
/* The `level` workload's scene, reference and pair-set differences (see
 * level.h). Float arithmetic as the workload defines it: this file is built
 * with -ffp-contract=off (qg_warnings), as the shared generator is. */
#include "level.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The scene                                                                */

bool bench_level_init(bench_level_scene *s, int32_t n) {
    memset(s, 0, sizeof *s);
    if (n < 0) return false;
    const int32_t G = (int32_t)sqrtf((float)n);
    const float W = BENCH_LEVEL_TILE * (float)G;
    const int32_t A = n / 25;
    s->n = n;
    s->grid = G;
    s->world = W;

    /* Tiles: row-major, 40% of the map. Counted first, so the arrays are
     * allocated once at their size. */
    int64_t S = 0;
    for (int64_t y = 0; y < G; y++)
        for (int64_t x = 0; x < G; x++) S += qgw_mix(((uint64_t)y << 32) | (uint64_t)x) % 100 < 40;
    if (S + A > INT32_MAX) return false;
    s->tiles = (int32_t)S;
    size_t total = (size_t)S + (size_t)A;
    s->tile_boxes = malloc((S > 0 ? (size_t)S : 1) * sizeof *s->tile_boxes);
    s->all = malloc((total > 0 ? total : 1) * sizeof *s->all);
    qgw_agents *a = &s->agents;
    size_t count = A > 0 ? (size_t)A : 1;
    a->n = A;
    a->world = W;
    a->x = malloc(count * sizeof *a->x);
    a->y = malloc(count * sizeof *a->y);
    a->vx = calloc(count, sizeof *a->vx);
    a->vy = calloc(count, sizeof *a->vy);
    a->h = malloc(count * sizeof *a->h);
    a->boxes = malloc(count * sizeof *a->boxes);
    if (!s->tile_boxes || !s->all || !a->x || !a->y || !a->vx || !a->vy || !a->h || !a->boxes) {
        bench_level_free(s);
        return false;
    }
    int32_t t = 0;
    for (int32_t y = 0; y < G; y++)
        for (int32_t x = 0; x < G; x++)
            if (qgw_mix(((uint64_t)(uint32_t)y << 32) | (uint64_t)(uint32_t)x) % 100 < 40) {
                const float x0 = BENCH_LEVEL_TILE * (float)x, y0 = BENCH_LEVEL_TILE * (float)y;
                s->tile_boxes[t++] = (qg_rect){x0, y0, x0 + BENCH_LEVEL_TILE, y0 + BENCH_LEVEL_TILE};
            }

    /* The agents: qgw_agents_init's draws, word for word, with this W (the
     * shared generator takes its W from its own N). Separate statements:
     * the draw order is part of the definition. */
    qgw_rng rng = qgw_rng_new(QGW_SEED);
    for (int32_t i = 0; i < A; i++) {
        float h = 1.0f + 3.0f * qgw_uniform(&rng);
        float x = h + (W - 2.0f * h) * qgw_uniform(&rng);
        float y = h + (W - 2.0f * h) * qgw_uniform(&rng);
        float angle = 6.28318530718f * qgw_uniform(&rng);
        float speed = 0.5f + 1.5f * qgw_uniform(&rng);
        a->h[i] = h;
        a->x[i] = x;
        a->y[i] = y;
        a->vx[i] = speed * cosf(angle);
        a->vy[i] = speed * sinf(angle);
        a->boxes[i] = (qg_rect){x - h, y - h, x + h, y + h};
    }
    a->rng = rng;
    if (S > 0) memcpy(s->all, s->tile_boxes, (size_t)S * sizeof *s->all);
    bench_level_sync(s);
    return true;
}

void bench_level_free(bench_level_scene *s) {
    free(s->tile_boxes);
    free(s->all);
    qgw_agents_free(&s->agents);
    memset(s, 0, sizeof *s);
}

void bench_level_sync(bench_level_scene *s) {
    if (s->agents.n > 0)
        memcpy(s->all + s->tiles, s->agents.boxes, (size_t)s->agents.n * sizeof *s->all);
}

/* ------------------------------------------------------------------------ */
/* Pair sets                                                                */

bool bench_pair_set_add(qg_handle a, qg_handle b, void *user) {
    bench_pair_set *set = user;
    if (set->n == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 4096;
        uint64_t *k = realloc(set->keys, cap * sizeof *k);
        if (k) set->keys = k;
        uint64_t *t = k ? realloc(set->tmp, cap * sizeof *t) : NULL;
        if (t) set->tmp = t;
        if (!k || !t) {
            set->nomem = true;
            return false;
        }
        set->cap = cap;
    }
    set->keys[set->n++] = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    return true;
}

/* LSD radix sort of the keys packed to (i << bits | j), j < 2^bits (the
 * same order), in passes of at most 11 bits: a frame's few thousand pairs
 * sort in a few passes over a small count table. */
bool bench_pair_set_sort(bench_pair_set *set) {
    if (set->nomem) return false;
    const size_t n = set->n;
    if (n < 2) return true;
    uint64_t *a = set->keys, *b = set->tmp;
    uint32_t max_j = 0;
    for (size_t k = 0; k < n; k++)
        if ((uint32_t)a[k] > max_j) max_j = (uint32_t)a[k];
    int bits = 1;
    while (bits < 32 && (UINT64_C(1) << bits) <= max_j) bits++;
    for (size_t k = 0; k < n; k++) a[k] = ((a[k] >> 32) << bits) | (uint32_t)a[k];
    const int total = 2 * bits, passes = (total + 10) / 11, width = (total + passes - 1) / passes;
    const uint64_t mask = (UINT64_C(1) << width) - 1;
    uint32_t count[6][1 << 11];
    memset(count, 0, sizeof count);
    for (size_t k = 0; k < n; k++)
        for (int p = 0; p < passes; p++) count[p][(a[k] >> (p * width)) & mask]++;
    for (int p = 0; p < passes; p++) {
        uint32_t *c = count[p];
        if (c[(a[0] >> (p * width)) & mask] == n) continue; /* every key has this digit */
        uint32_t sum = 0;
        for (uint64_t d = 0; d <= mask; d++) {
            const uint32_t t = c[d];
            c[d] = sum;
            sum += t;
        }
        for (size_t k = 0; k < n; k++) b[c[(a[k] >> (p * width)) & mask]++] = a[k];
        uint64_t *t = a;
        a = b;
        b = t;
    }
    const uint64_t low = (UINT64_C(1) << bits) - 1;
    for (size_t k = 0; k < n; k++) a[k] = ((a[k] >> bits) << 32) | (a[k] & low);
    set->keys = a;
    set->tmp = b;
    return true;
}

static void call_key(qg_pair_fn *fn, uint64_t key, void *user) {
    if (fn) fn((qg_handle)(key >> 32), (qg_handle)(uint32_t)key, user);
}

void bench_pair_set_diff(const bench_pair_set *prev, const bench_pair_set *cur, qg_pair_fn *began,
                         qg_pair_fn *ended, void *user) {
    size_t i = 0, j = 0;
    while (i < prev->n || j < cur->n) {
        if (j == cur->n || (i < prev->n && prev->keys[i] < cur->keys[j])) {
            call_key(ended, prev->keys[i++], user);
        } else if (i == prev->n || cur->keys[j] < prev->keys[i]) {
            call_key(began, cur->keys[j++], user);
        } else {
            i++, j++;
        }
    }
}

void bench_pair_set_swap(bench_pair_set *a, bench_pair_set *b) {
    bench_pair_set t = *a;
    *a = *b;
    *b = t;
}

void bench_pair_set_free(bench_pair_set *set) {
    free(set->keys);
    free(set->tmp);
    memset(set, 0, sizeof *set);
}

/* ------------------------------------------------------------------------ */
/* The reference                                                            */

typedef struct ref_ctx {
    int32_t tiles;
    qgw_sum *sum;
    bench_pair_set *keys;
} ref_ctx;

static bool ref_pair(qg_handle a, qg_handle b, void *user) {
    ref_ctx *c = user;
    if (a < c->tiles && b < c->tiles) return true; /* two tiles: not a pair of the workload */
    qgw_sum_pair(a, b, c->sum);
    if (c->keys) bench_pair_set_add(a, b, c->keys);
    return true;
}

bool bench_level_reference(const bench_level_scene *s, qgw_sweep *scratch, qgw_sum *sum,
                           bench_pair_set *keys) {
    *sum = (qgw_sum){0, 0};
    if (keys) keys->n = 0, keys->nomem = false;
    if (!qgw_sweep_sort(scratch, s->all, s->tiles + s->agents.n)) return false;
    ref_ctx c = {s->tiles, sum, keys};
    qgw_sweep_pairs(scratch, ref_pair, &c);
    return !keys || bench_pair_set_sort(keys);
}
