// The agents of quadgrid-sim and their collision response.
//
// Agents live in flat arrays (one array per field) so the per-frame loops
// stream through memory, and every buffer is kept between frames: after the
// first few frames a step allocates nothing.
#ifndef QG_SIM_WORLD_H
#define QG_SIM_WORLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quadgrid.h"

typedef enum sim_start {
    SIM_START_UNIFORM,  ///< the `agents` workload: uniform over the world
    SIM_START_CLUSTERS, ///< a few dense clumps
    SIM_START_SPOT,     ///< everyone packed into one disc in the middle
} sim_start;

typedef struct sim_world {
    int32_t n, cap;
    float *x, *y, *vx, *vy, *h;
    qg_handle *handle;   // agent -> its handle in the index
    int32_t *agent_of;   // handle -> agent; handles are not promised to be dense
    int32_t handle_cap;
    uint32_t *hit_frame; // last frame the agent collided, for colouring
    float size;          // the world is [0,size]^2
    uint64_t rng;

    qg_index *index;
    qg_kind kind;
    float max_h;         // the size bound the index was given: boxes up to 2*max_h wide
                         // (the typical agent; kinds that take any box take dragons too)

    // Colliding pairs of the current frame as (lo agent << bits | hi agent).
    uint64_t *pairs, *pairs_tmp;
    size_t npairs, pairs_cap;
    bool pairs_oom;
    int pair_bits;         // bits of an agent number in a pair key
    uint32_t frame;
    uint32_t *radix_count; // scratch for the radix sort

    // --threads: the job system the index calls spread over (NULL = one
    // thread), each pair-search part's own pair list, and the boxes of a
    // frame's batch move.
    const qg_jobs *jobs;
    struct sim_part *parts;
    int32_t part_count;
    qg_rect *boxes;
    int32_t boxes_cap;
} sim_world;

/// One part of a parallel pair search: its own list, so its callback needs
/// no lock.
typedef struct sim_part {
    const sim_world *w;
    uint64_t *pairs;
    size_t n, cap;
    bool oom;
} sim_part;

/// Runs the world's index calls on `jobs` from now on (NULL = one thread).
/// Returns false when out of memory.
bool world_set_jobs(sim_world *w, const qg_jobs *jobs);

/// Fills the world with n agents following the `agents` workload (seed 12345
/// gives exactly its frame 0, in its order), then applies the start layout
/// and dragons.
/// Returns false when out of memory.
bool world_init(sim_world *w, int32_t n, uint64_t seed, sim_start start, int32_t dragons);
void world_free(sim_world *w);

/// Renumbers the agents in Z-order of their positions, so that agents near
/// each other in the world are near each other in memory. Call before the
/// index is built. Returns false when out of memory.
bool world_sort_spatial(sim_world *w);

/// The fastest built kind for this scene, or QG_KIND_COUNT if none is built.
qg_kind world_default_kind(bool mixed_sizes);

/// (Re)builds the index of the given kind from the agents' current boxes.
/// On failure the old index (if any) is kept.
qg_status world_build_index(sim_world *w, qg_kind kind);

// One frame, in this order. Each is timed separately by the caller.
void world_move(sim_world *w);
qg_status world_update_index(sim_world *w);
qg_status world_find_pairs(sim_world *w);
void world_respond(sim_world *w);
void world_cleanup(sim_world *w);

/// A hash of every agent's state (bits of position and velocity), to compare runs.
uint64_t world_hash(const sim_world *w);

/// Adds count agents at random places (the world keeps its size).
qg_status world_add_random(sim_world *w, int32_t count);
/// Removes the last count agents.
void world_remove_last(sim_world *w, int32_t count);
/// Adds one dragon (20-50x an average agent) centred at (x, y).
qg_status world_add_dragon(sim_world *w, float x, float y);

#endif
