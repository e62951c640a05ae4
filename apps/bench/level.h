// SPDX-License-Identifier: MIT
/* quadgrid-bench level: a static tile map and the agents that cross it
 * (docs/workloads.md, section `level`). The scene, its reference, and
 * the pair-set difference that turns two frames' pairs into overlap events
 * for implementations without events of their own. The frames, medians and
 * output are main.c's, as for every other workload. */
#ifndef QG_BENCH_LEVEL_H
#define QG_BENCH_LEVEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <quadgrid.h>

#include "workload.h"

/// Tile side: the map's pitch, and every tile's width and height.
#define BENCH_LEVEL_TILE 16.0f

/// The level of N: G = (int)sqrtf(N) tiles a side, W = 16 G; tiles first,
/// row-major, where mix((y << 32) | x) % 100 < 40; then A = N / 25 agents
/// drawn exactly as `agents` draws them (seed 12345, the same draws in the
/// same order) with this W.
typedef struct bench_level_scene {
    int32_t n;          ///< N
    int32_t grid;       ///< G
    float world;        ///< W
    int32_t tiles;      ///< S: elements 0..S-1
    qg_rect *tile_boxes;
    /// A agents: elements S..S+A-1. agents.world is W, so qgw_agents_move
    /// bounces them off this level's walls [h, W-h].
    qgw_agents agents;
    /// Every element's box (tiles, then agents), for the reference;
    /// bench_level_sync copies the agents' boxes in.
    qg_rect *all;
} bench_level_scene;

/// Draws frame 0 of the level of N. False when n < 0 or memory runs out
/// (then *s holds nothing to free).
bool bench_level_init(bench_level_scene *s, int32_t n);
void bench_level_free(bench_level_scene *s);

/// Copies the agents' current boxes into s->all (after qgw_agents_move).
void bench_level_sync(bench_level_scene *s);

/// Whether the pair (i, j) counts: not two tiles.
static inline bool bench_level_counts(const bench_level_scene *s, int32_t i, int32_t j) {
    return i >= s->tiles || j >= s->tiles;
}

/* ---- Pair sets: sorted keys (i << 32 | j), i < j ------------------------- */

typedef struct bench_pair_set {
    uint64_t *keys, *tmp;
    size_t n, cap;
    bool nomem;
} bench_pair_set;

/// A qg_pair_fn that appends (a, b) (a < b) to the bench_pair_set in user.
bool bench_pair_set_add(qg_handle a, qg_handle b, void *user);

/// Sorts the keys (LSD radix sort); false when memory ran out while adding.
bool bench_pair_set_sort(bench_pair_set *set);

/// Calls began(i, j) for each key of cur not in prev and ended(i, j) for
/// each key of prev not in cur (both sorted), in key order; either may be
/// NULL.
void bench_pair_set_diff(const bench_pair_set *prev, const bench_pair_set *cur, qg_pair_fn *began,
                         qg_pair_fn *ended, void *user);

/// Exchanges the contents of a and b.
void bench_pair_set_swap(bench_pair_set *a, bench_pair_set *b);

void bench_pair_set_free(bench_pair_set *set);

/* ---- The reference: sort-and-sweep over every element, tile-tile dropped -- */

/// The reference pairs of the current frame (s->all, synced): every pair
/// into *sum, and, when keys is not NULL, into keys (cleared, then sorted).
/// False when memory runs out.
bool bench_level_reference(const bench_level_scene *s, qgw_sweep *scratch, qgw_sum *sum,
                           bench_pair_set *keys);

#endif /* QG_BENCH_LEVEL_H */
