// SPDX-License-Identifier: MIT
// The C side of bench.py's Python-versus-C check: the `agents` frame that
// the Python binding times (Index.move of every handle, cleanup, pairs into
// an array), made with the same C calls straight through the C API:
// qg_move_many on this thread, qg_cleanup, qg_pairs into a buffer kept from
// frame to frame. The agents' own step (qgw_agents_move) is not timed, as
// bench.py does not time the NumPy step.
//
// Usage: c_frame KIND N FRAMES [tuned 0|1]; prints one line of JSON.
#define _POSIX_C_SOURCE 200809L
#include "quadgrid.h"
#include "workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct buf {
    int32_t *v;
    size_t len, cap;
} buf;

static bool push(qg_handle a, qg_handle b, void *user)
{
    buf *p = user;
    if (p->len + 2 > p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 4096;
        int32_t *v = realloc(p->v, cap * sizeof *v);
        if (v == NULL) return false;
        p->v = v;
        p->cap = cap;
    }
    p->v[p->len] = a;
    p->v[p->len + 1] = b;
    p->len += 2;
    return true;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: c_frame KIND N FRAMES [tuned 0|1]\n");
        return 2;
    }
    qg_kind kind;
    if (qg_kind_from_name(argv[1], &kind) != QG_OK) {
        fprintf(stderr, "c_frame: unknown kind %s\n", argv[1]);
        return 2;
    }
    int32_t n = atoi(argv[2]), frames = atoi(argv[3]);
    bool tuned = argc < 5 || atoi(argv[4]) != 0;
    qgw_agents a;
    if (n < 1 || frames < 1 || !qgw_agents_init(&a, n)) return 2;
    qg_config cfg = qg_default_config(kind);
    cfg.bounds = qgw_agents_bounds(&a);
    if (tuned) { // quadgrid-bench's agents tuning
        cfg.element_size = 5.0f;
        cfg.max_element_size = 8.0f;
    }
    qg_index *ix;
    qg_handle *h = malloc((size_t)n * sizeof *h);
    double *t = malloc((size_t)frames * sizeof *t);
    if (h == NULL || t == NULL || qg_create(&cfg, &ix) != QG_OK) return 1;
    if (qg_insert_many(ix, a.boxes, n, h) != QG_OK) return 1;
    qg_cleanup(ix);
    buf pairs = {0};
    for (int32_t f = 0; f < frames; f++) {
        qgw_agents_move(&a);
        double t0 = now();
        if (qg_move_many(ix, NULL, h, a.boxes, n) != QG_OK) return 1;
        qg_cleanup(ix);
        pairs.len = 0;
        if (qg_pairs(ix, push, &pairs) != QG_OK) return 1;
        t[f] = now() - t0;
    }
    qsort(t, (size_t)frames, sizeof *t, cmp_d);
    printf("{\"kind\": \"%s\", \"n\": %d, \"frames\": %d, \"pairs\": %zu, \"median_ms\": %.4f}\n", argv[1], n,
           frames, pairs.len / 2, 1e3 * t[frames / 2]);
    qg_destroy(ix);
    qgw_agents_free(&a);
    free(h);
    free(t);
    free(pairs.v);
    return 0;
}
