// SPDX-License-Identifier: MIT
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

    // --level (world_make_level): walls, static elements of the index
    // (qg_set_static), and the pairs of the frame from overlap events
    // (qg_pair_events) instead of qg_pairs.
    bool level;
    int32_t nwalls;
    qg_rect *walls;
    qg_handle *wall_handle, *wall_handle_tmp; // wall -> its handle; scratch for a rebuild
    int32_t wall_grid;   // G: the tile map is G x G tiles of WORLD_TILE
    uint8_t *wall_map;   // G*G, 1 where a wall tile is
    // The current pairs, kept from the events: handle pairs (lo << 32 | hi),
    // sorted; and this call's began and ended events.
    uint64_t *contacts, *contacts_tmp;
    size_t ncontacts, contacts_cap;
    uint64_t *began, *ended;
    size_t nbegan, began_cap, nended, ended_cap;
    bool events_oom;
    // This frame's agent-wall pairs as (agent << 32 | wall << 1 | began),
    // sorted: the response bounces an agent off a wall on the began event
    // and only pushes it out while the pair lasts.
    uint64_t *wall_pairs;
    size_t nwall_pairs, wall_pairs_cap;
    uint64_t wall_bounces; // began agent-wall events answered, every frame so far
} sim_world;

/// Side of a wall tile in --level.
#define WORLD_TILE 16.0f

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

/// --level: a tile map over the world, G = size / 16 tiles a side, a tile at
/// (x, y) where the `level` workload's rule mix((y << 32) | x) % 100 < percent
/// puts one (40: the workload's map). Agents that touch a wall are placed
/// again at random free spots (draws after every other). Call after
/// world_init and before the index is built. False when out of memory.
bool world_make_level(sim_world *w, int percent);

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
