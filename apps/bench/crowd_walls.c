// SPDX-License-Identifier: MIT
// quadgrid-crowd-walls: a crowd of agents with a few static walls, the scene
// that decides where the engine's fat layer (src/static_filters_events/fat_layer.h) is worth it.
// Agents as in the `agents` workload (docs/workloads.md; their own
// seeded generator here, not its draws), in a world `scale` times as wide
// (scale 4: about the `level` workload's density), plus `walls` static 64x8
// boxes. Every frame: a qg_move per agent, qg_cleanup, qg_pairs. Prints the
// median update and total ms of frames 300-359, the pair count and the
// index's bytes.
//
// usage: quadgrid-crowd-walls N WALLS KIND [SCALE]
#define _POSIX_C_SOURCE 199309L // clock_gettime
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "quadgrid.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static bool count_pair(qg_handle a, qg_handle b, void *user)
{
    (void)a;
    (void)b;
    ++*(long *)user;
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/// xorshift64*: the scene's own draws, in [0, 1).
static float draw(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (float)((*s * 0x2545F4914F6CDD1DULL) >> 40) / 16777216.0f;
}

enum { FRAMES = 360, FROM = 300 };

int main(int argc, char **argv)
{
    qg_kind kind;
    if (argc < 4 || qg_kind_from_name(argv[3], &kind) != QG_OK) {
        fprintf(stderr, "usage: quadgrid-crowd-walls N WALLS KIND [SCALE]\n");
        return 2;
    }
    const int n = atoi(argv[1]), walls = atoi(argv[2]);
    const float scale = argc > 4 ? (float)atof(argv[4]) : 1.0f;
    if (n < 1 || walls < 0 || !(scale > 0.0f)) {
        fprintf(stderr, "quadgrid-crowd-walls: N >= 1, WALLS >= 0, SCALE > 0\n");
        return 2;
    }
    const float w = sqrtf((float)n) * 16.0f * scale;
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    float *vx = malloc((size_t)n * sizeof *vx), *vy = malloc((size_t)n * sizeof *vy);
    float *h = malloc((size_t)n * sizeof *h);
    qg_handle *hd = malloc((size_t)n * sizeof *hd);
    double *total = malloc(FRAMES * sizeof *total), *update = malloc(FRAMES * sizeof *update);
    qg_config c = qg_default_config(kind);
    c.bounds = (qg_rect){0, 0, w, w};
    qg_index *ix = NULL;
    if (!x || !y || !vx || !vy || !h || !hd || !total || !update || qg_create(&c, &ix) != QG_OK) {
        fprintf(stderr, "quadgrid-crowd-walls: out of memory\n");
        return 1;
    }
    for (int i = 0; i < walls; i++) {
        const float wx = w * draw(&s), wy = w * draw(&s);
        const qg_handle k = qg_insert(ix, (qg_rect){wx, wy, wx + 64, wy + 8});
        if (k < 0 || qg_set_static(ix, k, true) != QG_OK)
            return 1;
    }
    for (int i = 0; i < n; i++) {
        h[i] = 1.0f + 3.0f * draw(&s);
        x[i] = h[i] + (w - 2 * h[i]) * draw(&s);
        y[i] = h[i] + (w - 2 * h[i]) * draw(&s);
        const float a = 6.28318530718f * draw(&s), v = 0.5f + 1.5f * draw(&s);
        vx[i] = v * cosf(a);
        vy[i] = v * sinf(a);
        hd[i] = qg_insert(ix, (qg_rect){x[i] - h[i], y[i] - h[i], x[i] + h[i], y[i] + h[i]});
        if (hd[i] < 0)
            return 1;
    }
    long pairs = 0;
    for (int f = 0; f < FRAMES; f++) {
        const double t0 = now_ms();
        for (int i = 0; i < n; i++) {
            x[i] += vx[i];
            y[i] += vy[i];
            if (x[i] < h[i] || x[i] > w - h[i]) {
                vx[i] = -vx[i];
                x[i] = fminf(fmaxf(x[i], h[i]), w - h[i]);
            }
            if (y[i] < h[i] || y[i] > w - h[i]) {
                vy[i] = -vy[i];
                y[i] = fminf(fmaxf(y[i], h[i]), w - h[i]);
            }
            if (qg_move(ix, hd[i], (qg_rect){x[i] - h[i], y[i] - h[i], x[i] + h[i], y[i] + h[i]}) != QG_OK)
                return 1;
        }
        qg_cleanup(ix);
        update[f] = now_ms() - t0;
        pairs = 0;
        qg_pairs(ix, count_pair, &pairs);
        total[f] = now_ms() - t0;
    }
    qsort(total + FROM, FRAMES - FROM, sizeof *total, cmp_double);
    qsort(update + FROM, FRAMES - FROM, sizeof *update, cmp_double);
    printf("%s n %d walls %d scale %g: update %.3f total %.3f ms (medians of frames %d-%d), pairs %ld, "
           "bytes %zu\n",
           argv[3], n, walls, (double)scale, update[(FRAMES + FROM) / 2], total[(FRAMES + FROM) / 2], FROM,
           FRAMES - 1, pairs, (size_t)qg_get_stats(ix).memory_bytes);
    qg_destroy(ix);
    free(x);
    free(y);
    free(vx);
    free(vy);
    free(h);
    free(hd);
    free(total);
    free(update);
    return 0;
}
