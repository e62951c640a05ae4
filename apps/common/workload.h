// SPDX-License-Identifier: MIT
/// The standard workloads (agents, mixed, static, the bench's extra sparse
/// layout, and the scenes of docs/scenes.md), shared by quadgrid-bench, quadgrid-sim and the tests so that every
/// program feeds the indexes the same bits and can compare pair counts and
/// checksums with any other implementation of the workload definition.
///
/// Everything here is plain C11 over the public quadgrid header. All workload
/// arithmetic is IEEE single precision without contraction: this library is
/// built with -ffp-contract=off, and the generator refuses to compile where
/// float expressions would be evaluated in a wider type.
#ifndef QG_WORKLOAD_H
#define QG_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <quadgrid.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Random numbers                                                           */

/// The seed every workload starts from.
#define QGW_SEED UINT64_C(12345)

/// splitmix64 state.
typedef struct qgw_rng {
    uint64_t state;
} qgw_rng;

/// A generator seeded with `seed` (QGW_SEED for the standard workloads).
qgw_rng qgw_rng_new(uint64_t seed);

/// The next 64-bit output of splitmix64.
uint64_t qgw_next(qgw_rng *rng);

/// A uniform float in [0,1): the top 24 bits of the next output.
float qgw_uniform(qgw_rng *rng);

/// The splitmix64 output function applied to v, without state.
uint64_t qgw_mix(uint64_t v);

/// The checksum term of the pair (i, j) or of the hit (query i, box j).
static inline uint64_t qgw_pair_term(int32_t i, int32_t j) {
    return qgw_mix(((uint64_t)(uint32_t)i << 32) | (uint64_t)(uint32_t)j);
}

/// The closed-box overlap test of the workload definition.
static inline bool qgw_overlap(const qg_rect *a, const qg_rect *b) {
    return a->min_x <= b->max_x && b->min_x <= a->max_x && a->min_y <= b->max_y &&
           b->min_y <= a->max_y;
}

/* ------------------------------------------------------------------------ */
/* Pair and hit accounting                                                  */

/// Running pair count and checksum (sum of qgw_pair_term modulo 2^64).
typedef struct qgw_sum {
    uint64_t count;
    uint64_t checksum;
} qgw_sum;

/// A qg_pair_fn that adds the pair (a, b), a < b, to the qgw_sum in `user`.
bool qgw_sum_pair(qg_handle a, qg_handle b, void *user);

/* ------------------------------------------------------------------------ */
/* agents                                                                   */

/// N moving squares. Arrays are indexed by agent; boxes[i] is always the box
/// of agent i at the current frame.
typedef struct qgw_agents {
    int32_t n;
    float world;   ///< W: the world is [0,W] x [0,W]
    float *x, *y;  ///< centres
    float *vx, *vy;
    float *h;      ///< half-sizes
    qg_rect *boxes;
    /// The generator after the last agent was drawn; the static workload
    /// draws its queries from here.
    qgw_rng rng;
} qgw_agents;

/// W for N agents: sqrtf((float)N) * 16.0f.
float qgw_agents_world(int32_t n);

/// Draws N agents (frame 0) from QGW_SEED. Returns false when n < 0 or
/// memory runs out (then *a holds nothing to free).
bool qgw_agents_init(qgw_agents *a, int32_t n);

/// The `mixed` workload: exactly qgw_agents_init, except that right after
/// agent i's half-size is drawn, `if (i % 100 == 0) h *= 16.0f` (1% of the
/// agents are 32-128 wide). Moves with qgw_agents_move like `agents`.
bool qgw_agents_init_mixed(qgw_agents *a, int32_t n);

/// Frees the arrays; the struct may be initialised again.
void qgw_agents_free(qgw_agents *a);

/// Step 1 of a frame: moves every agent, bounces it off the walls and
/// recomputes its box.
void qgw_agents_move(qgw_agents *a);

/// qgw_agents_move for agents [begin, end) only: disjoint ranges may run at
/// once on different threads (each agent's step reads and writes only its
/// own state).
void qgw_agents_move_range(qgw_agents *a, int32_t begin, int32_t end);

/// The world as a qg_rect: [0,W] x [0,W].
qg_rect qgw_agents_bounds(const qgw_agents *a);

/* ------------------------------------------------------------------------ */
/* static                                                                   */

/// The next static-workload query window drawn from rng: centre cx = W*u,
/// cy = W*u, box [cx-8, cx+8] x [cy-8, cy+8].
qg_rect qgw_static_query(qgw_rng *rng, float world);

/// Fills out[0..count) with the static workload's queries, drawn after the
/// agents (from a->rng, which goes on).
void qgw_static_queries(qgw_agents *a, int32_t count, qg_rect *out);

/* ------------------------------------------------------------------------ */
/* sparse (a bench extra, not part of the standard workloads)               */

/// Number of square clusters the sparse layout puts its boxes in.
#define QGW_SPARSE_CLUSTERS 16

/// A world 95% empty: N boxes with the agents' sizes, packed at the agents'
/// density into QGW_SPARSE_CLUSTERS squares that together cover 5% of the
/// world, one square at a random place inside each cell of a 4x4 partition
/// (so the squares never overlap). The query is the lower-left quarter of the
/// world, which holds 4 of the 16 squares. Only x, y, h, boxes and world are
/// set (velocities are zero).
bool qgw_sparse_init(qgw_agents *a, int32_t n);

/// The sparse workload's query: [0, W/2] x [0, W/2].
qg_rect qgw_sparse_query(const qgw_agents *a);

/* ------------------------------------------------------------------------ */
/* The scene table (docs/scenes.md)                                         */

/// The scenes of docs/scenes.md, in the order the table prints them.
typedef enum qgw_scene_id {
    QGW_SCENE_AGENTS,   ///< the `agents` workload
    QGW_SCENE_MIXED,    ///< the `mixed` workload
    QGW_SCENE_DRAGONS,  ///< agents with N/200 dragons (quadgrid-sim --dragons)
    QGW_SCENE_OUTSIDE,  ///< boxes over 81x the default bounds, default bounds kept
    QGW_SCENE_HUGE,     ///< agents scaled by 2^100, bounds [-3e38, 3e38]^2
    QGW_SCENE_TINY,     ///< agents scaled by 2^-100
    QGW_SCENE_COUNT
} qgw_scene_id;

/// "agents", "mixed", "dragons", "outside", "huge", "tiny"; NULL if unknown.
const char *qgw_scene_name(qgw_scene_id id);

/// The scene of a name given by qgw_scene_name; false if unknown.
bool qgw_scene_from_name(const char *name, qgw_scene_id *out);

/// Number of dragons the dragons scene has for n agents: n / 200.
int32_t qgw_scene_dragons(int32_t n);

/// One scene: agents that move exactly as `agents` does (in their own world
/// [0, agents.world]^2), and the boxes the index sees, which are the agents'
/// boxes with every coordinate c mapped to c * scale + offset (float, one
/// rounding at most; exact for the huge and tiny scenes' powers of two).
typedef struct qgw_scene {
    qgw_scene_id id;
    qgw_agents agents;
    /// The boxes the index sees: agents.boxes itself when scale is 1 and
    /// offset 0, else an array of its own recomputed by every move.
    qg_rect *boxes;
    float scale, offset;
    /// The configuration a user who knows the typical size but not the scene
    /// would give (docs/scenes.md).
    qg_rect bounds;
    float element_size, max_element_size;
} qgw_scene;

/// Draws frame 0 of scene `id` with n agents. Returns false when n < 0, the
/// id is unknown or memory runs out (then *s holds nothing to free).
bool qgw_scene_init(qgw_scene *s, qgw_scene_id id, int32_t n);

/// One frame's step 1: moves the agents (qgw_agents_move) and recomputes the
/// boxes.
void qgw_scene_move(qgw_scene *s);

/// Maps an area of the agents' world to the scene's coordinates, as the
/// boxes are mapped (for queries).
qg_rect qgw_scene_map(const qgw_scene *s, qg_rect r);

/// qg_default_config(kind) with the scene's bounds, element_size and
/// max_element_size.
qg_config qgw_scene_config(const qgw_scene *s, qg_kind kind);

void qgw_scene_free(qgw_scene *s);

/* ------------------------------------------------------------------------ */
/* Reference pairs: sort and sweep on x                                     */

/// Scratch for qgw_sweep_*; zero-initialise it, free with qgw_sweep_free.
typedef struct qgw_sweep {
    int32_t n, capacity;
    uint32_t *keys, *keys_tmp;
    int32_t *order, *order_tmp;
    /// The boxes in sweep order, structure of arrays for a tight inner loop.
    float *min_x, *max_x, *min_y, *max_y;
    int32_t *id;
    float max_width;  ///< widest box, for window queries
} qgw_sweep;

/// Sorts the boxes by min_x (LSD radix sort of the float bits). Returns false
/// when memory runs out (the sweep then holds no boxes).
bool qgw_sweep_sort(qgw_sweep *s, const qg_rect *boxes, int32_t n);

/// Calls fn(i, j), i < j, once for every overlapping pair of the boxes last
/// given to qgw_sweep_sort. Exact: the same float test as qgw_overlap.
void qgw_sweep_pairs(const qgw_sweep *s, qg_pair_fn *fn, void *user);

/// Calls fn(i) for every box last sorted that overlaps the closed area.
void qgw_sweep_query(const qgw_sweep *s, qg_rect area, qg_query_fn *fn, void *user);

/// Bytes the sweep holds.
size_t qgw_sweep_bytes(const qgw_sweep *s);

void qgw_sweep_free(qgw_sweep *s);

/// Reference pair count and checksum of the boxes (a one-shot sort + sweep).
bool qgw_reference_sum(qgw_sweep *scratch, const qg_rect *boxes, int32_t n, qgw_sum *out);

/* ------------------------------------------------------------------------ */
/* Process measurements                                                     */

/// Monotonic clock in nanoseconds.
uint64_t qgw_now_ns(void);

/// Peak resident set size of the process in bytes (getrusage ru_maxrss);
/// 0 when unknown.
size_t qgw_peak_rss_bytes(void);

/// Tries to reset the peak RSS to the current RSS (Linux: clear_refs 5), so
/// the next reading covers only what follows. Returns false when the system
/// does not allow it (readings are then the high-water mark of the process).
bool qgw_peak_rss_reset(void);

/// Bytes of heap the C library has handed out and not taken back, when the
/// C library can say (glibc mallinfo2); *known is set accordingly.
size_t qgw_heap_in_use(bool *known);

/// Gives freed heap back to the system when the C library can (glibc
/// malloc_trim), so a later peak RSS reading is not inflated by garbage.
void qgw_heap_trim(void);

#ifdef __cplusplus
}
#endif

#endif /* QG_WORKLOAD_H */
