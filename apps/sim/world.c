// SPDX-License-Identifier: MIT
#include "world.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// splitmix64, exactly as the `agents` workload defines it, so that seed 12345
// with the uniform start reproduces that workload's frame 0 bit for bit.
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t next64(uint64_t *state) {
    *state += 0x9E3779B97F4A7C15ull;
    return mix64(*state);
}

static float unit(uint64_t *state) { return (float)(next64(state) >> 40) * 0x1p-24f; }

static bool grow_agents(sim_world *w, int32_t need) {
    if (need <= w->cap) return true;
    int32_t cap = w->cap ? w->cap : 1024;
    while (cap < need) {
        if (cap > INT32_MAX / 2) return false;
        cap *= 2;
    }
    // Each array is realloc'd in turn; a failure part-way leaves the grown
    // ones larger than w->cap, which is harmless.
    float **fields[] = {&w->x, &w->y, &w->vx, &w->vy, &w->h};
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
        float *p = realloc(*fields[k], (size_t)cap * sizeof(float));
        if (!p) return false;
        *fields[k] = p;
    }
    qg_handle *hd = realloc(w->handle, (size_t)cap * sizeof *hd);
    if (!hd) return false;
    w->handle = hd;
    uint32_t *hf = realloc(w->hit_frame, (size_t)cap * sizeof *hf);
    if (!hf) return false;
    w->hit_frame = hf;
    w->cap = cap;
    return true;
}

static bool map_handle(sim_world *w, qg_handle handle, int32_t agent) {
    if (handle >= w->handle_cap) {
        int64_t cap = w->handle_cap ? w->handle_cap : 1024;
        while (cap <= handle) cap *= 2;
        if (cap > INT32_MAX) return false;
        int32_t *p = realloc(w->agent_of, (size_t)cap * sizeof *p);
        if (!p) return false;
        for (int64_t k = w->handle_cap; k < cap; k++) p[k] = -1;
        w->agent_of = p;
        w->handle_cap = (int32_t)cap;
    }
    w->agent_of[handle] = agent;
    return true;
}

static qg_rect box_of(const sim_world *w, int32_t i) {
    float x = w->x[i], y = w->y[i], h = w->h[i];
    return (qg_rect){x - h, y - h, x + h, y + h};
}

// Places agent i anywhere in the world with a workload-like speed.
static void random_agent(sim_world *w, int32_t i, float h) {
    float W = w->size;
    w->h[i] = h;
    w->x[i] = h + (W - 2.0f * h) * unit(&w->rng);
    w->y[i] = h + (W - 2.0f * h) * unit(&w->rng);
    float a = 6.28318530718f * unit(&w->rng);
    float s = 0.5f + 1.5f * unit(&w->rng);
    w->vx[i] = s * cosf(a);
    w->vy[i] = s * sinf(a);
    w->hit_frame[i] = UINT32_MAX;
}

static float dragon_half(sim_world *w, float base) {
    // 20-50x an agent, but never so big it cannot fit between the walls.
    float h = base * (20.0f + 30.0f * unit(&w->rng));
    return fminf(h, w->size / 6.0f);
}

static float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

bool world_init(sim_world *w, int32_t n, uint64_t seed, sim_start start, int32_t dragons) {
    memset(w, 0, sizeof *w);
    w->kind = QG_KIND_COUNT;
    w->rng = seed;
    // A world for fewer than a handful of agents would be smaller than a dragon.
    w->size = fmaxf(sqrtf((float)n) * 16.0f, 256.0f);
    w->radix_count = calloc(6 * 4096, sizeof *w->radix_count);
    if (!w->radix_count || !grow_agents(w, n > 0 ? n : 1)) return false;
    float W = w->size;
    // Draw order per agent is the workload's: h, x, y, angle, speed.
    for (int32_t i = 0; i < n; i++) {
        float h = 1.0f + 3.0f * unit(&w->rng);
        w->h[i] = h;
        w->x[i] = h + (W - 2.0f * h) * unit(&w->rng);
        w->y[i] = h + (W - 2.0f * h) * unit(&w->rng);
        float a = 6.28318530718f * unit(&w->rng);
        float s = 0.5f + 1.5f * unit(&w->rng);
        w->vx[i] = s * cosf(a);
        w->vy[i] = s * sinf(a);
        w->hit_frame[i] = UINT32_MAX;
    }
    w->n = n;
    // Layouts and dragons draw after the workload's numbers, so frame 0 of
    // the uniform start stays the workload's.
    if (start == SIM_START_CLUSTERS) {
        enum { K = 12 };
        float cx[K], cy[K];
        for (int k = 0; k < K; k++) {
            cx[k] = W * (0.1f + 0.8f * unit(&w->rng));
            cy[k] = W * (0.1f + 0.8f * unit(&w->rng));
        }
        float spread = W / 14.0f;
        for (int32_t i = 0; i < n; i++) {
            int k = (int)(next64(&w->rng) % K);
            // Sum of three uniforms: a cheap bell shape.
            float ox = (unit(&w->rng) + unit(&w->rng) + unit(&w->rng) - 1.5f) * spread;
            float oy = (unit(&w->rng) + unit(&w->rng) + unit(&w->rng) - 1.5f) * spread;
            float h = w->h[i];
            w->x[i] = clampf(cx[k] + ox, h, W - h);
            w->y[i] = clampf(cy[k] + oy, h, W - h);
        }
    } else if (start == SIM_START_SPOT) {
        // A disc of 1/16 of the world's area: crowded enough to explode
        // outwards, not so crowded that the first frame has N^2 pairs.
        float r_max = W / (4.0f * sqrtf(3.14159265f));
        for (int32_t i = 0; i < n; i++) {
            float r = r_max * sqrtf(unit(&w->rng));
            float a = 6.28318530718f * unit(&w->rng);
            w->x[i] = 0.5f * W + r * cosf(a);
            w->y[i] = 0.5f * W + r * sinf(a);
        }
    }
    if (dragons > n) dragons = n;
    for (int32_t k = 0; k < dragons; k++) {
        int32_t i = (int32_t)((int64_t)k * n / dragons);
        float h = dragon_half(w, 2.5f);
        w->h[i] = h;
        w->x[i] = h + (W - 2.0f * h) * unit(&w->rng);
        w->y[i] = h + (W - 2.0f * h) * unit(&w->rng);
        // Giants walk slowly; their mass makes them plough through the crowd.
        w->vx[i] *= 0.3f;
        w->vy[i] *= 0.3f;
    }
    return true;
}

void world_free(sim_world *w) {
    qg_destroy(w->index);
    free(w->x);
    free(w->y);
    free(w->vx);
    free(w->vy);
    free(w->h);
    free(w->handle);
    free(w->agent_of);
    free(w->hit_frame);
    free(w->pairs);
    free(w->pairs_tmp);
    free(w->radix_count);
    for (int32_t p = 0; p < w->part_count; p++) free(w->parts[p].pairs);
    free(w->parts);
    free(w->boxes);
    free(w->walls);
    free(w->wall_handle);
    free(w->wall_handle_tmp);
    free(w->wall_map);
    free(w->contacts);
    free(w->contacts_tmp);
    free(w->began);
    free(w->ended);
    free(w->wall_pairs);
    memset(w, 0, sizeof *w);
}

// --level ------------------------------------------------------------------

// Whether the closed box of half-size h around (x, y) touches a wall tile.
static bool touches_wall(const sim_world *w, float x, float y, float h) {
    const int32_t G = w->wall_grid;
    int32_t x0 = (int32_t)floorf((x - h) / WORLD_TILE) - 1, x1 = (int32_t)floorf((x + h) / WORLD_TILE);
    int32_t y0 = (int32_t)floorf((y - h) / WORLD_TILE) - 1, y1 = (int32_t)floorf((y + h) / WORLD_TILE);
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 > G - 1) x1 = G - 1;
    if (y1 > G - 1) y1 = G - 1;
    for (int32_t ty = y0; ty <= y1; ty++)
        for (int32_t tx = x0; tx <= x1; tx++) {
            if (!w->wall_map[(size_t)ty * (size_t)G + (size_t)tx]) continue;
            float bx = WORLD_TILE * (float)tx, by = WORLD_TILE * (float)ty;
            if (x - h <= bx + WORLD_TILE && bx <= x + h && y - h <= by + WORLD_TILE && by <= y + h) return true;
        }
    return false;
}

// Agent i, if it touches a wall, at the first of up to 100 random spots that
// does not (else where it is: the response pushes it out).
static void place_free(sim_world *w, int32_t i) {
    float h = w->h[i], W = w->size;
    for (int t = 0; t < 100 && touches_wall(w, w->x[i], w->y[i], h); t++) {
        w->x[i] = h + (W - 2.0f * h) * unit(&w->rng);
        w->y[i] = h + (W - 2.0f * h) * unit(&w->rng);
    }
}

bool world_make_level(sim_world *w, int percent) {
    const int32_t G = (int32_t)(w->size / WORLD_TILE);
    w->level = true;
    w->wall_grid = G;
    w->wall_map = calloc((size_t)G * (size_t)G + 1, 1);
    if (!w->wall_map) return false;
    int32_t count = 0;
    for (int32_t y = 0; y < G; y++)
        for (int32_t x = 0; x < G; x++)
            if (mix64(((uint64_t)(uint32_t)y << 32) | (uint32_t)x) % 100 < (uint64_t)percent) {
                w->wall_map[(size_t)y * (size_t)G + (size_t)x] = 1;
                count++;
            }
    w->walls = malloc(((size_t)count + 1) * sizeof *w->walls);
    w->wall_handle = malloc(((size_t)count + 1) * sizeof *w->wall_handle);
    w->wall_handle_tmp = malloc(((size_t)count + 1) * sizeof *w->wall_handle_tmp);
    if (!w->walls || !w->wall_handle || !w->wall_handle_tmp) return false;
    int32_t k = 0;
    for (int32_t y = 0; y < G; y++)
        for (int32_t x = 0; x < G; x++)
            if (w->wall_map[(size_t)y * (size_t)G + (size_t)x]) {
                float bx = WORLD_TILE * (float)x, by = WORLD_TILE * (float)y;
                w->wall_handle[k] = -1;
                w->walls[k++] = (qg_rect){bx, by, bx + WORLD_TILE, by + WORLD_TILE};
            }
    w->nwalls = count;
    for (int32_t i = 0; i < w->n; i++) place_free(w, i);
    return true;
}

qg_kind world_default_kind(bool mixed_sizes) {
    // The point grid is the fastest kind measured with uniform sizes and,
    // since larger boxes go to its coarser size levels, with dragons too
    // (README: the scene table); the rest in the order measured there.
    (void)mixed_sizes;
    static const qg_kind order[] = {QG_POINT_GRID, QG_GRID, QG_LOOSE_GRID, QG_QUADTREE,
                                    QG_LOOSE_QUADTREE, QG_BRUTE_FORCE};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
        if (qg_kind_available(order[k])) return order[k];
    return QG_KIND_COUNT;
}

// Builds an index over every agent; on failure nothing changes. It is told
// the world and no sizes: every kind learns them from the agents.
static qg_status build_index(sim_world *w, qg_kind kind) {
    qg_config cfg = qg_default_config(kind);
    cfg.bounds = (qg_rect){0.0f, 0.0f, w->size, w->size};
    qg_index *ix = NULL;
    qg_status st = qg_create(&cfg, &ix);
    if (st != QG_OK) return st;
    for (int32_t i = 0; i < w->n; i++) {
        qg_handle hd = qg_insert(ix, box_of(w, i));
        if (hd < 0 || !map_handle(w, hd, i)) {
            qg_destroy(ix);
            // The old index's handles may have been overwritten in agent_of.
            if (w->index) {
                for (int32_t k = 0; k < w->n; k++)
                    if (w->handle[k] >= 0) w->agent_of[w->handle[k]] = k;
                for (int32_t k = 0; k < w->nwalls; k++) w->agent_of[w->wall_handle[k]] = -2 - k;
            }
            return hd < 0 ? (qg_status)hd : QG_ERR_NOMEM;
        }
        w->handle[i] = hd;
    }
    if (w->nwalls > 0) {
        // The walls: one batch, each made static, so the index never pairs
        // two of them and keeps them where they cost nothing per frame.
        qg_status ws = qg_insert_many(ix, w->walls, w->nwalls, w->wall_handle_tmp);
        for (int32_t k = 0; k < w->nwalls && ws == QG_OK; k++) {
            ws = qg_set_static(ix, w->wall_handle_tmp[k], true);
            if (ws == QG_OK && !map_handle(w, w->wall_handle_tmp[k], -2 - k)) ws = QG_ERR_NOMEM;
        }
        if (ws != QG_OK) {
            qg_destroy(ix);
            if (w->index) {
                for (int32_t k = 0; k < w->n; k++)
                    if (w->handle[k] >= 0) w->agent_of[w->handle[k]] = k;
                for (int32_t k = 0; k < w->nwalls; k++) w->agent_of[w->wall_handle[k]] = -2 - k;
            }
            return ws;
        }
        memcpy(w->wall_handle, w->wall_handle_tmp, (size_t)w->nwalls * sizeof *w->wall_handle);
    }
    qg_destroy(w->index);
    w->index = ix;
    w->kind = kind;
    // A new index: its first events report every pair as began.
    w->ncontacts = 0;
    return QG_OK;
}

qg_status world_build_index(sim_world *w, qg_kind kind) {
    return build_index(w, kind);
}

// Clamps agent i into the world and turns its velocity back inwards.
static inline void wall(sim_world *w, int32_t i) {
    float h = w->h[i], hi = w->size - h;
    if (w->x[i] < h) {
        w->x[i] = h;
        if (w->vx[i] < 0.0f) w->vx[i] = -w->vx[i];
    } else if (w->x[i] > hi) {
        w->x[i] = hi;
        if (w->vx[i] > 0.0f) w->vx[i] = -w->vx[i];
    }
    if (w->y[i] < h) {
        w->y[i] = h;
        if (w->vy[i] < 0.0f) w->vy[i] = -w->vy[i];
    } else if (w->y[i] > hi) {
        w->y[i] = hi;
        if (w->vy[i] > 0.0f) w->vy[i] = -w->vy[i];
    }
}

bool world_set_jobs(sim_world *w, const qg_jobs *jobs) {
    for (int32_t p = 0; p < w->part_count; p++) free(w->parts[p].pairs);
    free(w->parts);
    w->parts = NULL;
    w->part_count = 0;
    w->jobs = NULL;
    if (jobs == NULL || jobs->worker_count <= 1) return true;
    w->parts = calloc((size_t)jobs->worker_count, sizeof *w->parts);
    if (!w->parts) return false;
    w->part_count = jobs->worker_count;
    for (int32_t p = 0; p < w->part_count; p++) w->parts[p].w = w;
    w->jobs = jobs;
    return true;
}

static void move_range(sim_world *w, int32_t begin, int32_t end) {
    float *x = w->x, *y = w->y;
    const float *vx = w->vx, *vy = w->vy;
    for (int32_t i = begin; i < end; i++) {
        x[i] += vx[i];
        y[i] += vy[i];
        wall(w, i);
    }
}

static void move_task(int32_t begin, int32_t end, int32_t worker, void *context) {
    (void)worker;
    move_range(context, begin, end);
}

void world_move(sim_world *w) {
    w->frame++;
    // Each agent's step reads and writes only its own state: ranges of
    // agents run at once.
    if (w->jobs)
        w->jobs->run(move_task, w->n, w, w->jobs->user);
    else
        move_range(w, 0, w->n);
}

qg_status world_update_index(sim_world *w) {
    if (w->jobs) {
        // One batch: the index spreads the moves over the workers it can.
        if (w->boxes_cap < w->n) {
            qg_rect *b = realloc(w->boxes, (size_t)w->n * sizeof *b);
            if (!b) return QG_ERR_NOMEM;
            w->boxes = b;
            w->boxes_cap = w->n;
        }
        for (int32_t i = 0; i < w->n; i++) w->boxes[i] = box_of(w, i);
        return qg_move_many(w->index, w->jobs, w->handle, w->boxes, w->n);
    }
    for (int32_t i = 0; i < w->n; i++) {
        qg_status st = qg_move(w->index, w->handle[i], box_of(w, i));
        if (st != QG_OK) return st;
    }
    return QG_OK;
}

static int bits_for(int32_t n) {
    int b = 1;
    while (b < 31 && ((int64_t)1 << b) < n) b++;
    return b;
}

static bool collect_pair(qg_handle a, qg_handle b, void *user) {
    sim_world *w = user;
    int32_t i = w->agent_of[a], j = w->agent_of[b];
    if (i > j) {
        int32_t t = i;
        i = j;
        j = t;
    }
    if (w->npairs == w->pairs_cap) {
        size_t cap = w->pairs_cap ? w->pairs_cap * 2 : 4096;
        uint64_t *p = realloc(w->pairs, cap * sizeof *p);
        if (!p) {
            w->pairs_oom = true;
            return false;
        }
        w->pairs = p;
        uint64_t *t = realloc(w->pairs_tmp, cap * sizeof *t);
        if (!t) {
            w->pairs_oom = true;
            return false;
        }
        w->pairs_tmp = t;
        w->pairs_cap = cap;
    }
    w->pairs[w->npairs++] = ((uint64_t)i << w->pair_bits) | (uint64_t)j;
    return true;
}

static bool part_pair(qg_handle a, qg_handle b, void *user) {
    sim_part *p = user;
    int32_t i = p->w->agent_of[a], j = p->w->agent_of[b];
    if (i > j) {
        int32_t t = i;
        i = j;
        j = t;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 4096;
        uint64_t *v = realloc(p->pairs, cap * sizeof *v);
        if (!v) {
            p->oom = true;
            return false;
        }
        p->pairs = v;
        p->cap = cap;
    }
    p->pairs[p->n++] = ((uint64_t)i << p->w->pair_bits) | (uint64_t)j;
    return true;
}

// The parts' lists, one after another, into the frame's list: the sort
// that follows makes the order the one-thread order.
static qg_status find_pairs_parallel(sim_world *w) {
    void *users[256];
    size_t total = 0;
    for (int32_t p = 0; p < w->part_count; p++) {
        w->parts[p].n = 0;
        w->parts[p].oom = false;
        users[p] = &w->parts[p];
    }
    qg_status st = qg_pairs_parallel(w->index, w->jobs, part_pair, users, NULL);
    for (int32_t p = 0; p < w->part_count; p++) {
        if (w->parts[p].oom) st = QG_ERR_NOMEM;
        total += w->parts[p].n;
    }
    if (st != QG_OK) return st;
    if (total > w->pairs_cap) {
        uint64_t *a = realloc(w->pairs, total * sizeof *a);
        if (!a) return QG_ERR_NOMEM;
        w->pairs = a;
        uint64_t *t = realloc(w->pairs_tmp, total * sizeof *t);
        if (!t) return QG_ERR_NOMEM;
        w->pairs_tmp = t;
        w->pairs_cap = total;
    }
    for (int32_t p = 0; p < w->part_count; p++) {
        if (w->parts[p].n)
            memcpy(w->pairs + w->npairs, w->parts[p].pairs, w->parts[p].n * sizeof *w->pairs);
        w->npairs += w->parts[p].n;
    }
    return QG_OK;
}

static int cmp_u64(const void *a, const void *b);

// Appends key to a growing array; false when out of memory.
static bool push_key(uint64_t **v, size_t *n, size_t *cap, uint64_t key) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 1024;
        uint64_t *p = realloc(*v, c * sizeof *p);
        if (!p) return false;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = key;
    return true;
}

static uint64_t handle_key(qg_handle a, qg_handle b) {
    return a < b ? ((uint64_t)(uint32_t)a << 32) | (uint32_t)b : ((uint64_t)(uint32_t)b << 32) | (uint32_t)a;
}

static bool on_began(qg_handle a, qg_handle b, void *user) {
    sim_world *w = user;
    if (!push_key(&w->began, &w->nbegan, &w->began_cap, handle_key(a, b))) w->events_oom = true;
    return true;
}

static bool on_ended(qg_handle a, qg_handle b, void *user) {
    sim_world *w = user;
    if (!push_key(&w->ended, &w->nended, &w->ended_cap, handle_key(a, b))) w->events_oom = true;
    return true;
}

// --level: the frame's pairs from qg_pair_events. The events since the last
// call update the set of current pairs (a pair ended and began in one call,
// a handle reused, is current); the set gives the agent pairs for the
// response, as qg_pairs would, and the agent-wall pairs, those that began
// now flagged for the bounce.
static qg_status find_pairs_events(sim_world *w) {
    w->nbegan = w->nended = 0;
    w->events_oom = false;
    qg_status st = qg_pair_events(w->index, on_began, on_ended, w);
    if (st == QG_OK && w->events_oom) st = QG_ERR_NOMEM;
    if (st != QG_OK) return st;
    // (qsort wants a valid array even for 0 keys: these may not exist yet.)
    if (w->nbegan > 1) qsort(w->began, w->nbegan, sizeof *w->began, cmp_u64);
    if (w->nended > 1) qsort(w->ended, w->nended, sizeof *w->ended, cmp_u64);
    size_t need = w->ncontacts + w->nbegan;
    if (need > w->contacts_cap) {
        uint64_t *c = realloc(w->contacts, need * sizeof *c);
        if (!c) return QG_ERR_NOMEM;
        w->contacts = c;
        uint64_t *t = realloc(w->contacts_tmp, need * sizeof *t);
        if (!t) return QG_ERR_NOMEM;
        w->contacts_tmp = t;
        w->contacts_cap = need;
    }
    // (contacts minus ended) merged with began, all sorted.
    size_t n = 0, i = 0, e = 0, b = 0;
    const uint64_t *old = w->contacts;
    uint64_t *out = w->contacts_tmp;
    while (i < w->ncontacts || b < w->nbegan) {
        uint64_t k;
        if (b == w->nbegan || (i < w->ncontacts && old[i] < w->began[b])) {
            k = old[i++];
            while (e < w->nended && w->ended[e] < k) e++;
            if (e < w->nended && w->ended[e] == k) continue;
        } else {
            k = w->began[b++];
            if (i < w->ncontacts && old[i] == k) i++; // began again: present once
        }
        if (n == 0 || out[n - 1] != k) out[n++] = k;
    }
    w->contacts_tmp = w->contacts;
    w->contacts = out;
    w->ncontacts = n;

    // Agent pairs (agent numbers, for the sorted response) and wall pairs.
    if (n > w->pairs_cap) {
        uint64_t *a = realloc(w->pairs, n * sizeof *a);
        if (!a) return QG_ERR_NOMEM;
        w->pairs = a;
        uint64_t *t = realloc(w->pairs_tmp, n * sizeof *t);
        if (!t) return QG_ERR_NOMEM;
        w->pairs_tmp = t;
        w->pairs_cap = n;
    }
    w->nwall_pairs = 0;
    b = 0;
    for (size_t k = 0; k < n; k++) {
        const uint64_t key = out[k];
        bool began = false;
        while (b < w->nbegan && w->began[b] < key) b++;
        if (b < w->nbegan && w->began[b] == key) began = true;
        int32_t p = w->agent_of[key >> 32], q = w->agent_of[(uint32_t)key];
        if (p >= 0 && q >= 0) {
            if (p > q) {
                int32_t t = p;
                p = q;
                q = t;
            }
            w->pairs[w->npairs++] = ((uint64_t)p << w->pair_bits) | (uint64_t)q;
        } else if (p >= 0 || q >= 0) {
            int32_t agent = p >= 0 ? p : q, wall = -2 - (p >= 0 ? q : p);
            uint64_t wk = ((uint64_t)agent << 32) | ((uint64_t)wall << 1) | (began ? 1u : 0u);
            if (!push_key(&w->wall_pairs, &w->nwall_pairs, &w->wall_pairs_cap, wk)) return QG_ERR_NOMEM;
        }
    }
    if (w->nwall_pairs > 1) qsort(w->wall_pairs, w->nwall_pairs, sizeof *w->wall_pairs, cmp_u64);
    return QG_OK;
}

qg_status world_find_pairs(sim_world *w) {
    w->npairs = 0;
    w->pairs_oom = false;
    w->pair_bits = bits_for(w->n);
    if (w->level) return find_pairs_events(w);
    if (w->jobs) return find_pairs_parallel(w);
    qg_status st = qg_pairs(w->index, collect_pair, w);
    if (st == QG_OK && w->pairs_oom) st = QG_ERR_NOMEM;
    return st;
}

// LSD radix sort of the pair keys. The order pairs come out of qg_pairs
// differs between kinds; sorting makes the response, and so the whole run,
// the same for every kind. Keys have 2*bits significant bits, sorted in
// passes of up to 12 bits (3 passes for 100,000 agents, 4 for a million).
static void sort_pairs(sim_world *w) {
    size_t n = w->npairs;
    if (n < 2) return;
    int total = 2 * w->pair_bits;
    int passes = (total + 11) / 12; // at most 6: agent numbers have at most 31 bits
    int width = (total + passes - 1) / passes;
    uint64_t mask = ((uint64_t)1 << width) - 1;
    uint32_t *count = w->radix_count;
    memset(count, 0, (size_t)passes * 4096 * sizeof *count);
    const uint64_t *src = w->pairs;
    for (size_t k = 0; k < n; k++)
        for (int p = 0; p < passes; p++) count[p * 4096 + ((src[k] >> (p * width)) & mask)]++;
    uint64_t *a = w->pairs, *b = w->pairs_tmp;
    for (int p = 0; p < passes; p++) {
        uint32_t *c = count + p * 4096;
        // All keys share this digit: the pass would copy them unchanged.
        if (c[(a[0] >> (p * width)) & mask] == n) continue;
        uint32_t sum = 0;
        for (uint64_t d = 0; d <= mask; d++) {
            uint32_t t = c[d];
            c[d] = sum;
            sum += t;
        }
        for (size_t k = 0; k < n; k++) b[c[(a[k] >> (p * width)) & mask]++] = a[k];
        uint64_t *t = a;
        a = b;
        b = t;
    }
    w->pairs = a;
    w->pairs_tmp = b;
}

// --level: an agent whose pair with a wall began this frame bounces off it
// (pushed out along the axis of least overlap, its velocity along that axis
// turned back if it points into the wall); while the pair lasts, the agent
// is only pushed out (a crowd may press it in). In agent, then wall order.
static void respond_walls(sim_world *w) {
    float *x = w->x, *y = w->y, *vx = w->vx, *vy = w->vy;
    const float *h = w->h;
    for (size_t k = 0; k < w->nwall_pairs; k++) {
        const uint64_t key = w->wall_pairs[k];
        const int32_t i = (int32_t)(key >> 32), wk = (int32_t)((uint32_t)key >> 1);
        const bool began = key & 1u;
        const qg_rect b = w->walls[wk];
        const float hw = 0.5f * (b.max_x - b.min_x), hh = 0.5f * (b.max_y - b.min_y);
        const float dx = x[i] - (b.min_x + hw), dy = y[i] - (b.min_y + hh);
        const float ox = h[i] + hw - fabsf(dx), oy = h[i] + hh - fabsf(dy);
        if (ox < 0.0f || oy < 0.0f) continue; // pushed clear already
        if (began) {
            w->wall_bounces++;
            w->hit_frame[i] = w->frame;
        } else if (ox == 0.0f || oy == 0.0f) {
            continue; // touching, not inside
        }
        if (ox <= oy) {
            const float s = dx < 0.0f ? -1.0f : 1.0f;
            x[i] += s * ox;
            if (began && vx[i] * s < 0.0f) vx[i] = -vx[i];
        } else {
            const float s = dy < 0.0f ? -1.0f : 1.0f;
            y[i] += s * oy;
            if (began && vy[i] * s < 0.0f) vy[i] = -vy[i];
        }
        wall(w, i);
    }
}

void world_respond(sim_world *w) {
    sort_pairs(w);
    int bits = w->pair_bits;
    uint64_t low = ((uint64_t)1 << bits) - 1;
    float *x = w->x, *y = w->y, *vx = w->vx, *vy = w->vy;
    const float *h = w->h;
    uint32_t frame = w->frame;
    for (size_t k = 0; k < w->npairs; k++) {
        int32_t i = (int32_t)(w->pairs[k] >> bits), j = (int32_t)(w->pairs[k] & low);
        float dx = x[j] - x[i], dy = y[j] - y[i];
        float r = h[i] + h[j];
        float ox = r - fabsf(dx), oy = r - fabsf(dy);
        // An earlier pair of this frame may already have pushed them apart.
        if (ox < 0.0f || oy < 0.0f) continue;
        w->hit_frame[i] = frame;
        w->hit_frame[j] = frame;
        // Mass grows with area, so a dragon shoves agents and barely slows.
        float mi = h[i] * h[i], mj = h[j] * h[j];
        float wi = mj / (mi + mj), wj = mi / (mi + mj);
        // Push apart along the axis of least overlap, then swap the velocity
        // components along it (an elastic bounce) if they are still closing.
        if (ox <= oy) {
            float s = dx < 0.0f ? -1.0f : 1.0f;
            x[i] -= s * ox * wi;
            x[j] += s * ox * wj;
            float dv = vx[j] - vx[i];
            if (dv * s < 0.0f) {
                vx[i] += 2.0f * wi * dv;
                vx[j] -= 2.0f * wj * dv;
            }
        } else {
            float s = dy < 0.0f ? -1.0f : 1.0f;
            y[i] -= s * oy * wi;
            y[j] += s * oy * wj;
            float dv = vy[j] - vy[i];
            if (dv * s < 0.0f) {
                vy[i] += 2.0f * wi * dv;
                vy[j] -= 2.0f * wj * dv;
            }
        }
        // A push can shove an agent through a wall; only pushed agents can.
        wall(w, i);
        wall(w, j);
    }
    if (w->level) respond_walls(w);
}

void world_cleanup(sim_world *w) { qg_cleanup_parallel(w->index, w->jobs); }

uint64_t world_hash(const sim_world *w) {
    uint64_t acc = mix64((uint64_t)w->n);
    for (int32_t i = 0; i < w->n; i++) {
        uint32_t b[4];
        memcpy(&b[0], &w->x[i], 4);
        memcpy(&b[1], &w->y[i], 4);
        memcpy(&b[2], &w->vx[i], 4);
        memcpy(&b[3], &w->vy[i], 4);
        acc = mix64(acc ^ (((uint64_t)b[0] << 32) | b[1]));
        acc = mix64(acc ^ (((uint64_t)b[2] << 32) | b[3]));
    }
    return acc;
}

static qg_status append_agent(sim_world *w) {
    if (!grow_agents(w, w->n + 1)) return QG_ERR_NOMEM;
    int32_t i = w->n;
    qg_handle hd = qg_insert(w->index, box_of(w, i));
    if (hd < 0) return (qg_status)hd;
    if (!map_handle(w, hd, i)) {
        qg_remove(w->index, hd);
        return QG_ERR_NOMEM;
    }
    w->handle[i] = hd;
    w->n++;
    return QG_OK;
}

qg_status world_add_random(sim_world *w, int32_t count) {
    if (!grow_agents(w, w->n + count)) return QG_ERR_NOMEM;
    for (int32_t k = 0; k < count; k++) {
        random_agent(w, w->n, 1.0f + 3.0f * unit(&w->rng));
        if (w->level) place_free(w, w->n);
        qg_status st = append_agent(w);
        if (st != QG_OK) return st;
    }
    return QG_OK;
}

void world_remove_last(sim_world *w, int32_t count) {
    if (count > w->n) count = w->n;
    for (int32_t k = 0; k < count; k++) {
        int32_t i = --w->n;
        qg_remove(w->index, w->handle[i]);
        w->agent_of[w->handle[i]] = -1;
    }
}

qg_status world_add_dragon(sim_world *w, float x, float y) {
    if (!grow_agents(w, w->n + 1)) return QG_ERR_NOMEM;
    int32_t i = w->n;
    random_agent(w, i, dragon_half(w, 2.5f));
    w->handle[i] = -1;
    float h = w->h[i];
    w->x[i] = clampf(x, h, w->size - h);
    w->y[i] = clampf(y, h, w->size - h);
    w->vx[i] *= 0.3f;
    w->vy[i] *= 0.3f;
    qg_status st = append_agent(w);
    if (st == QG_ERR_CAPACITY) {
        // The kind refuses boxes past its size bound: rebuild for this one.
        w->n++;
        st = world_build_index(w, w->kind);
        if (st != QG_OK) w->n--;
    }
    return st;
}

// Spreads the low 16 bits of v to the even bits.
static uint32_t spread_bits(uint32_t v) {
    v &= 0xffffu;
    v = (v | (v << 8)) & 0x00ff00ffu;
    v = (v | (v << 4)) & 0x0f0f0f0fu;
    v = (v | (v << 2)) & 0x33333333u;
    v = (v | (v << 1)) & 0x55555555u;
    return v;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

bool world_sort_spatial(sim_world *w) {
    int32_t n = w->n;
    uint64_t *key = malloc((size_t)n * sizeof *key);
    float *tmp = malloc((size_t)n * sizeof *tmp);
    if (!key || !tmp) {
        free(key);
        free(tmp);
        return false;
    }
    // Z-order of 32-unit cells, agent number in the low bits to break ties.
    float cell = w->size / 65535.0f > 32.0f ? w->size / 65535.0f : 32.0f;
    for (int32_t i = 0; i < n; i++) {
        uint32_t cx = (uint32_t)(w->x[i] / cell), cy = (uint32_t)(w->y[i] / cell);
        key[i] = ((uint64_t)(spread_bits(cx) | spread_bits(cy) << 1) << 32) | (uint32_t)i;
    }
    qsort(key, (size_t)n, sizeof *key, cmp_u64);
    float *fields[] = {w->x, w->y, w->vx, w->vy, w->h};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        for (int32_t k = 0; k < n; k++) tmp[k] = fields[f][(uint32_t)key[k]];
        memcpy(fields[f], tmp, (size_t)n * sizeof *tmp);
    }
    free(key);
    free(tmp);
    return true;
}
