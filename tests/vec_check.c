// SPDX-License-Identifier: MIT
// The point grid's pairs against QG_BRUTE_FORCE, in plain C (no cmocka), so
// it builds wherever the library does: the ARM64 cross build under qemu and
// WebAssembly under Node run the portable vector kernels (point_grid_pairs_vec.c)
// through it, crowds dense enough to fill many chunks per cell, boxes of
// several size levels (the cross-level rows), after moves (stale
// snapshots, the scalar path) and after qg_cleanup (fresh ones, the
// kernels). Usage: vec_check [seed]; prints the seed, exits 1 on a
// difference.
#include <quadgrid.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pairs {
    uint64_t *v;
    size_t n, cap;
} pairs;

static bool collect(qg_handle a, qg_handle b, void *user)
{
    pairs *p = user;
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 1024;
        uint64_t *v = realloc(p->v, p->cap * sizeof *v);
        if (v == NULL) {
            fprintf(stderr, "vec_check: out of memory\n");
            exit(2);
        }
        p->v = v;
    }
    const uint32_t lo = (uint32_t)(a < b ? a : b), hi = (uint32_t)(a < b ? b : a);
    p->v[p->n++] = (uint64_t)lo << 32 | hi;
    return true;
}

static int cmp_u64(const void *x, const void *y)
{
    const uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static uint64_t rng_state;

static float uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)(rng_state >> 40) / 16777216.0f;
}

static qg_rect random_box(float world, float crowd)
{
    // Most small, some at the next levels up, a few large.
    const float r = uniform();
    const float size = r < 0.9f ? 1.0f + 3.0f * uniform() : r < 0.97f ? 8.0f + 16.0f * uniform() : 40.0f + 80.0f * uniform();
    // Half the boxes in a crowded corner (many slots per cell).
    const float span = uniform() < 0.5f ? world * crowd : world;
    const float x = span * uniform(), y = span * uniform();
    return (qg_rect){x, y, x + size * (0.5f + uniform()), y + size * (0.5f + uniform())};
}

static bool same_pairs(qg_index *grid, qg_index *brute, const char *when)
{
    pairs a = {0}, b = {0};
    if (qg_pairs(grid, collect, &a) != QG_OK || qg_pairs(brute, collect, &b) != QG_OK) {
        fprintf(stderr, "vec_check: qg_pairs failed (%s)\n", when);
        return false;
    }
    qsort(a.v, a.n, sizeof *a.v, cmp_u64);
    qsort(b.v, b.n, sizeof *b.v, cmp_u64);
    const bool ok = a.n == b.n && (a.n == 0 || memcmp(a.v, b.v, a.n * sizeof *a.v) == 0);
    printf("%-16s point_grid %zu pairs, brute_force %zu: %s\n", when, a.n, b.n, ok ? "same" : "DIFFERENT");
    free(a.v);
    free(b.v);
    return ok;
}

int main(int argc, char **argv)
{
    const uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 20261128u;
    rng_state = seed;
    printf("vec_check: seed %" PRIu64 "\n", seed);
    const int32_t n = 6000;
    const float world = 1024.0f;
    bool ok = true;
    for (int round = 0; round < 3 && ok; ++round) {
        const float crowd = round == 0 ? 0.05f : round == 1 ? 0.15f : 0.5f;
        qg_config cg = qg_default_config(QG_POINT_GRID), cb = qg_default_config(QG_BRUTE_FORCE);
        cg.bounds = cb.bounds = (qg_rect){0.0f, 0.0f, world, world};
        cg.max_element_size = 4.0f;
        qg_index *grid = NULL, *brute = NULL;
        if (qg_create(&cg, &grid) != QG_OK || qg_create(&cb, &brute) != QG_OK) {
            fprintf(stderr, "vec_check: qg_create failed\n");
            return 2;
        }
        for (int32_t i = 0; i < n; ++i) {
            const qg_rect b = random_box(world, crowd);
            if (qg_insert(grid, b) != i || qg_insert(brute, b) != i) {
                fprintf(stderr, "vec_check: qg_insert failed\n");
                return 2;
            }
        }
        qg_cleanup(grid);
        ok = same_pairs(grid, brute, "inserted") && ok;
        for (int step = 0; step < 4 && ok; ++step) {
            for (int32_t i = 0; i < n; i += 3) {
                qg_rect b;
                qg_get(grid, i, &b);
                const float dx = 6.0f * (uniform() - 0.5f), dy = 6.0f * (uniform() - 0.5f);
                const qg_rect m = {b.min_x + dx, b.min_y + dy, b.max_x + dx, b.max_y + dy};
                if (qg_move(grid, i, m) != QG_OK || qg_move(brute, i, m) != QG_OK) {
                    fprintf(stderr, "vec_check: qg_move failed\n");
                    return 2;
                }
            }
            ok = same_pairs(grid, brute, "moved") && ok;
            qg_cleanup(grid);
            qg_cleanup(brute);
            ok = same_pairs(grid, brute, "cleaned up") && ok;
        }
        qg_destroy(grid);
        qg_destroy(brute);
    }
    printf("vec_check: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
