// SPDX-License-Identifier: MIT
/// One interface for everything quadgrid-bench measures: the quadgrid kinds
/// and the peer libraries run behind the same few calls, on the same boxes,
/// in the same process, so their timings and answers compare directly.
///
/// Elements are named by agent index 0..n-1 everywhere in this interface;
/// an implementation that stores other ids maps them back before calling out.
#ifndef QG_BENCH_PEER_H
#define QG_BENCH_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <quadgrid.h>

#ifdef __cplusplus
extern "C" {
#endif

/// How an implementation should size itself; the same for every one.
typedef struct bench_setup {
    qg_rect bounds;        ///< the world
    int32_t n;             ///< elements that will be built
    float element_size;    ///< typical box width
    float max_element_size;///< widest box
    /// Optional quadgrid tuning, 0 = the kind's default.
    int max_depth, leaf_capacity;
    float cell_size;
    /// `--threads`: the job system the implementation may spread its work
    /// over (NULL = one thread). Only quadgrid uses it; peers run on one.
    const qg_jobs *jobs;
    /// `--config`: what quadgrid's config is given: BENCH_CONFIG_DEFAULT
    /// (qg_default_config alone: the kind learns everything), _BOUNDS (the
    /// bounds only), _TUNED (bounds and the sizes above). Peers ignore it.
    int config_mode;
} bench_setup;

enum { BENCH_CONFIG_DEFAULT = 0, BENCH_CONFIG_BOUNDS = 1, BENCH_CONFIG_TUNED = 2 };

/// How index_bytes was obtained.
typedef enum bench_bytes_how {
    BENCH_BYTES_EXACT,      ///< the implementation counts its own bytes
    BENCH_BYTES_HEAP_DELTA, ///< heap in use after minus before (mallinfo2)
} bench_bytes_how;

typedef struct bench_impl bench_impl;

/// A segment for ray_all / ray_closest: origin + t*direction, t in [0, max_t].
typedef struct bench_ray {
    float ox, oy, dx, dy, max_t;
} bench_ray;

/// Largest k the nearest call is asked for.
enum { BENCH_KNN_MAX = 64 };

/// The calls. Every call returns true on success; on false the run stops and
/// reports the implementation's error.
typedef struct bench_vtable {
    bool (*create)(bench_impl **out, const bench_setup *setup, const void *arg);
    /// Inserts boxes[0..n) as elements 0..n-1 into the empty index. `bulk`:
    /// the static workload lets an index finish with its bulk step
    /// (rebalancing, optimising) when it has one.
    bool (*build)(bench_impl *self, const qg_rect *boxes, int32_t n, bool bulk);
    /// Step 2 of a frame: every element i now has box boxes[i].
    bool (*update)(bench_impl *self, const qg_rect *boxes, int32_t n);
    /// Calls fn(a, b), a < b, exactly once for each overlapping pair.
    bool (*pairs)(bench_impl *self, qg_pair_fn *fn, void *user);
    /// Calls fn(i) once for each element overlapping the closed area.
    bool (*query)(bench_impl *self, qg_rect area, qg_query_fn *fn, void *user);
    /// Bytes the index holds (BENCH_BYTES_EXACT implementations only).
    size_t (*bytes)(bench_impl *self);
    void (*destroy)(bench_impl *self);
    /// A short description of the last failure, or NULL.
    const char *(*error)(bench_impl *self);
    /// Optional (NULL for peers): query plus what the search did
    /// (qg_query_with_stats), so `sparse` can report cells visited.
    bool (*query_stats)(bench_impl *self, qg_rect area, qg_query_fn *fn, void *user, qg_query_stats *stats);
    /// Optional (NULL for peers): pairs on setup->jobs' workers, part p
    /// calling fn with users[p] (qg_pairs_parallel); jobs->worker_count parts.
    bool (*pairs_parts)(bench_impl *self, qg_pair_fn *fn, void *const *users);

    /* The `rays` and `knn` workloads (docs/benchmarks.md). Optional: NULL
     * where the implementation has no such search (the workload then skips
     * it). The implementation's own traversal finds the candidates; the
     * answers are those of the workload's exact float formulas (qg_ray_box,
     * qg_point_box_distance2), which the adapter applies to the candidates. */

    /// All hits: calls fn(i) once for each element i that qg_ray_box accepts
    /// for the segment (ox, oy) + t*(dx, dy), t in [0, max_t].
    bool (*ray_all)(bench_impl *self, const bench_ray *ray, qg_query_fn *fn, void *user);
    /// Closest hit: *hit = the element with the smallest qg_ray_box t (ties:
    /// the smaller element), *t its t; *hit = -1 when nothing is hit.
    bool (*ray_closest)(bench_impl *self, const bench_ray *ray, int32_t *hit, float *t);
    /// The k elements nearest to (x, y) in (qg_point_box_distance2, element)
    /// ascending order: out[0..*found), *found = min(k, n); d2 (may be NULL)
    /// gets their squared distances. k <= BENCH_KNN_MAX.
    bool (*nearest)(bench_impl *self, float x, float y, int32_t k, int32_t *out, float *d2,
                    int32_t *found);
} bench_vtable;

/* ---- The `level` workload (docs/workloads.md): a static tile map and
 * the agents that cross it. Elements are numbered as the workload numbers
 * them: tiles 0..s-1, then agents s..s+a-1. */

/// One implementation's level state (each peer defines its own).
typedef struct bench_level bench_level;

/// The calls of the level workload. Every call returns true on success.
typedef struct bench_level_vtable {
    bool (*create)(bench_level **out, const bench_setup *setup, const void *arg);
    /// Builds the level: tiles[0..s) are elements 0..s-1, static, never
    /// moved; agents[0..a) elements s..s+a-1. Both arrays stay valid (and
    /// tiles unchanged) until destroy; `agents` is the array update gives.
    bool (*build)(bench_level *self, const qg_rect *tiles, int32_t s, const qg_rect *agents, int32_t a);
    /// Step 2 of a frame: agent k (element s+k) now has box agents[k].
    bool (*update)(bench_level *self, const qg_rect *agents, int32_t a);
    /// Calls fn(i, j), i < j, exactly once for each overlapping pair that is
    /// not two tiles.
    bool (*pairs)(bench_level *self, qg_pair_fn *fn, void *user);
    /// Optional (NULL: the bench diffs the pair sets of successive calls):
    /// began(i, j) for each pair of `pairs`' set that was not in it at the
    /// previous call, ended(i, j) for each that was and is not now; the
    /// first call reports every pair as began. i < j.
    bool (*events)(bench_level *self, qg_pair_fn *began, qg_pair_fn *ended, void *user);
    /// Optional (NULL for peers): pairs on setup->jobs' workers, part p
    /// calling fn with users[p].
    bool (*pairs_parts)(bench_level *self, qg_pair_fn *fn, void *const *users);
    /// Bytes the implementation holds (BENCH_BYTES_EXACT implementations only).
    size_t (*bytes)(bench_level *self);
    void (*destroy)(bench_level *self);
    /// A short description of the last failure, or NULL.
    const char *(*error)(bench_level *self);
} bench_level_vtable;

/// One entry of the list `--kind all` runs.
typedef struct bench_peer {
    const char *name;
    const bench_vtable *vt;
    const void *arg;  ///< passed to create (the qg_kind for quadgrid kinds)
    bench_bytes_how bytes_how;
    /// Per-frame cost is quadratic: `--kind all` skips it above a size.
    bool quadratic;
    /// The level workload's calls; NULL where the implementation has none.
    const bench_level_vtable *level;
} bench_peer;

extern const bench_vtable bench_quadgrid_vtable;
extern const bench_vtable bench_sweep_vtable;
extern const bench_vtable bench_sap_vtable;
extern const bench_level_vtable bench_quadgrid_level_vtable;
extern const bench_level_vtable bench_sweep_level_vtable;
extern const bench_level_vtable bench_sap_level_vtable;
#ifdef QG_BENCH_HAVE_CHIPMUNK
extern const bench_vtable bench_chipmunk_bbtree_vtable;
extern const bench_vtable bench_chipmunk_spacehash_vtable;
extern const bench_level_vtable bench_chipmunk_bbtree_level_vtable;
extern const bench_level_vtable bench_chipmunk_spacehash_level_vtable;
#endif
#ifdef QG_BENCH_HAVE_BOX2D
extern const bench_vtable bench_box2d_vtable;
extern const bench_level_vtable bench_box2d_level_vtable;
#endif
#ifdef QG_BENCH_HAVE_BOOST
extern const bench_vtable bench_boost_rtree_vtable;
extern const bench_level_vtable bench_boost_rtree_level_vtable;
#endif

#ifdef __cplusplus
}
#endif

#endif /* QG_BENCH_PEER_H */
