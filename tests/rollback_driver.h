// SPDX-License-Identifier: MIT
/* A deterministic world that drives an index frame by frame and hashes, in
 * order, everything the index answers: the rollback test (test_rollback.c)
 * runs it on an index and on its clones, copies and snapshots and compares
 * the hashes frame by frame; the order check (order_check.c) compares them
 * with golden values on every platform.
 *
 * A frame: every agent moves (a third of them through one qg_move_many, the
 * rest through qg_move; one in 200 jumps across the world), some leave
 * (qg_remove) and arrive (qg_insert, and every tenth frame a qg_insert_many),
 * with `engine` some turn static or back and get filters; then qg_cleanup,
 * qg_pairs, qg_pair_events (with `engine`), a query, a ray cast and the
 * nearest 4 of a point. Frame 50 clears the index and puts every agent back
 * with one qg_insert_many. The hash takes every handle and every float of
 * every answer in the order the index gave it, so a pair reported in
 * another order changes it.
 *
 * Public header only, no cmocka, plain C arithmetic with no contraction
 * (the build passes -ffp-contract=off), so it compiles and hashes the same
 * natively, under qemu and as WebAssembly. Header-only: both programs
 * include it. */
#ifndef QG_ROLLBACK_DRIVER_H
#define QG_ROLLBACK_DRIVER_H

#include <quadgrid.h>

#include <float.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RB_CAP 6000

typedef struct rb_world {
    uint64_t rng;
    int32_t n;      /* agents */
    int32_t frame;  /* frames run */
    float size;     /* the world is [0, size]^2 */
    bool engine;    /* static elements, filters and events too */
    qg_handle h[RB_CAP];
    float x[RB_CAP], y[RB_CAP], vx[RB_CAP], vy[RB_CAP], w[RB_CAP];
    uint8_t fixed[RB_CAP]; /* made static: does not move */
} rb_world;

static inline uint64_t rb_next(rb_world *w)
{
    /* splitmix64: the same sequence on every platform */
    uint64_t z = (w->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1), from 24 bits: exact in float. */
static inline float rb_unit(rb_world *w)
{
    return (float)(rb_next(w) >> 40) * (1.0f / 16777216.0f);
}

static inline uint32_t rb_below(rb_world *w, uint32_t n)
{
    return (uint32_t)(rb_next(w) % n);
}

static inline uint64_t rb_mix(uint64_t h, uint64_t v)
{
    h ^= v;
    h *= 0x100000001B3ull;
    h ^= h >> 32;
    return h;
}

static inline uint64_t rb_mixf(uint64_t h, float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return rb_mix(h, b);
}

static inline qg_rect rb_box(const rb_world *w, int32_t i)
{
    const float r = 0.5f * w->w[i];
    return (qg_rect){w->x[i] - r, w->y[i] - r, w->x[i] + r, w->y[i] + r};
}

static inline void rb_spawn(rb_world *w, int32_t i)
{
    w->x[i] = rb_unit(w) * w->size;
    w->y[i] = rb_unit(w) * w->size;
    w->vx[i] = (rb_unit(w) - 0.5f) * 2.0f;
    w->vy[i] = (rb_unit(w) - 0.5f) * 2.0f;
    /* mostly 2-6 wide, one in 50 ten times larger, one in 100 a point */
    const uint32_t k = rb_below(w, 100);
    w->w[i] = k == 0 ? 0.0f : k < 3 ? 20.0f + 40.0f * rb_unit(w) : 2.0f + 4.0f * rb_unit(w);
    w->fixed[i] = 0;
}

/* A world of n agents in [0, size]^2 (n < RB_CAP / 2), none inserted yet. */
static inline void rb_init(rb_world *w, uint64_t seed, int32_t n, float size, bool engine)
{
    memset(w, 0, sizeof *w);
    w->rng = seed;
    w->size = size;
    w->engine = engine;
    w->n = n;
    for (int32_t i = 0; i < n; ++i)
        rb_spawn(w, i);
}

/* Inserts every agent with one qg_insert_many; QG_OK or its status. */
static inline qg_status rb_fill(rb_world *w, qg_index *ix)
{
    qg_rect *boxes = malloc(sizeof(qg_rect) * (size_t)(w->n > 0 ? w->n : 1));
    if (boxes == NULL)
        return QG_ERR_NOMEM;
    for (int32_t i = 0; i < w->n; ++i)
        boxes[i] = rb_box(w, i);
    const qg_status s = qg_insert_many(ix, boxes, w->n, w->h);
    free(boxes);
    return s;
}

typedef struct rb_hash {
    uint64_t h;
    float max_t;
} rb_hash;

static inline bool rb_pair(qg_handle a, qg_handle b, void *user)
{
    rb_hash *c = user;
    c->h = rb_mix(rb_mix(c->h, (uint32_t)a), (uint32_t)b);
    return true;
}

static inline bool rb_began(qg_handle a, qg_handle b, void *user)
{
    rb_hash *c = user;
    c->h = rb_mix(c->h, 0xB0000000ull ^ ((uint64_t)(uint32_t)a << 32 | (uint32_t)b));
    return true;
}

static inline bool rb_ended(qg_handle a, qg_handle b, void *user)
{
    rb_hash *c = user;
    c->h = rb_mix(c->h, 0xE0000000ull ^ ((uint64_t)(uint32_t)a << 32 | (uint32_t)b));
    return true;
}

static inline bool rb_query(qg_handle a, void *user)
{
    rb_hash *c = user;
    c->h = rb_mix(c->h, (uint32_t)a);
    return true;
}

static inline float rb_ray(qg_handle a, float t, void *user)
{
    rb_hash *c = user;
    c->h = rb_mixf(rb_mix(c->h, (uint32_t)a), t);
    return c->max_t;
}

/* Removes agent i (the last one takes its place). */
static inline void rb_drop(rb_world *w, int32_t i)
{
    const int32_t j = --w->n;
    w->h[i] = w->h[j];
    w->x[i] = w->x[j];
    w->y[i] = w->y[j];
    w->vx[i] = w->vx[j];
    w->vy[i] = w->vy[j];
    w->w[i] = w->w[j];
    w->fixed[i] = w->fixed[j];
}

/* One frame on ix. Returns its hash, or 0 with *err set when a call failed
 * (*err is QG_OK otherwise). */
static inline uint64_t rb_frame(rb_world *w, qg_index *ix, qg_status *err)
{
    qg_status s = QG_OK;
    rb_hash c = {0xCBF29CE484222325ull ^ (uint64_t)w->frame, 0.0f};
    static qg_handle bh[RB_CAP];
    static qg_rect bb[RB_CAP];
    int32_t nb = 0;
    for (int32_t i = 0; i < w->n && s == QG_OK; ++i) {
        if (w->fixed[i])
            continue;
        if (rb_below(w, 200) == 0) {
            w->x[i] = rb_unit(w) * w->size;
            w->y[i] = rb_unit(w) * w->size;
        } else {
            w->x[i] += w->vx[i];
            w->y[i] += w->vy[i];
            if (w->x[i] < 0.0f || w->x[i] > w->size)
                w->vx[i] = -w->vx[i];
            if (w->y[i] < 0.0f || w->y[i] > w->size)
                w->vy[i] = -w->vy[i];
        }
        if (i % 3 == 0) {
            bh[nb] = w->h[i];
            bb[nb++] = rb_box(w, i);
        } else {
            s = qg_move(ix, w->h[i], rb_box(w, i));
        }
    }
    if (s == QG_OK)
        s = qg_move_many(ix, NULL, bh, bb, nb);
    /* Churn: removals and arrivals (a reused handle comes from the free list). */
    for (int k = 0; k < 3 && s == QG_OK && w->n > 1; ++k)
        if (rb_below(w, 2) == 0) {
            const int32_t i = (int32_t)rb_below(w, (uint32_t)w->n);
            s = qg_remove(ix, w->h[i]);
            rb_drop(w, i);
        }
    for (int k = 0; k < 3 && s == QG_OK && w->n < RB_CAP - 16; ++k)
        if (rb_below(w, 2) == 0) {
            const int32_t i = w->n++;
            rb_spawn(w, i);
            const qg_handle h = qg_insert(ix, rb_box(w, i));
            s = h < 0 ? (qg_status)h : QG_OK;
            w->h[i] = h;
        }
    if (s == QG_OK && w->frame % 10 == 9 && w->n < RB_CAP - 16) {
        const int32_t first = w->n;
        for (int32_t k = 0; k < 8; ++k)
            rb_spawn(w, first + k), bb[k] = rb_box(w, first + k);
        w->n += 8;
        s = qg_insert_many(ix, bb, 8, w->h + first);
    }
    if (s == QG_OK && w->engine && w->n > 0) {
        if (w->frame % 3 == 0) {
            const int32_t i = (int32_t)rb_below(w, (uint32_t)w->n);
            w->fixed[i] = !w->fixed[i];
            s = qg_set_static(ix, w->h[i], w->fixed[i] != 0);
        }
        if (s == QG_OK && w->frame % 4 == 1) {
            const int32_t i = (int32_t)rb_below(w, (uint32_t)w->n);
            /* One draw a statement: the order of a call's arguments or an
             * initializer's values is the compiler's (gcc and clang differ). */
            const uint32_t category = 1u << rb_below(w, 4);
            const qg_filter f = {category, (uint32_t)rb_next(w) | 1u};
            s = qg_set_filter(ix, w->h[i], f);
        }
    }
    if (s == QG_OK && w->frame == 50) {
        qg_clear(ix);
        for (int32_t i = 0; i < w->n; ++i)
            w->fixed[i] = 0;
        s = rb_fill(w, ix);
    }
    if (s != QG_OK) {
        *err = s;
        return 0;
    }
    qg_cleanup(ix);
    s = qg_pairs(ix, rb_pair, &c);
    if (s == QG_OK && w->engine)
        s = qg_pair_events(ix, rb_began, rb_ended, &c);
    const float qx = rb_unit(w) * w->size, qy = rb_unit(w) * w->size, qr = 5.0f + 30.0f * rb_unit(w);
    if (s == QG_OK)
        s = qg_query(ix, (qg_rect){qx - qr, qy - qr, qx + qr, qy + qr}, rb_query, &c);
    c.max_t = w->size;
    const float dx = rb_unit(w) - 0.5f, dy = rb_unit(w) - 0.5f;
    if (s == QG_OK)
        s = qg_raycast(ix, qx, qy, dx, dy, c.max_t, rb_ray, &c);
    qg_handle nh[4];
    float nd[4];
    int32_t found = 0;
    if (s == QG_OK)
        s = qg_nearest(ix, qy, qx, 4, FLT_MAX, nh, nd, &found);
    for (int32_t k = 0; k < found; ++k)
        c.h = rb_mixf(rb_mix(c.h, (uint32_t)nh[k]), nd[k]);
    c.h = rb_mix(c.h, (uint32_t)qg_count(ix));
    w->frame++;
    *err = s;
    return s == QG_OK ? (c.h | 1u) : 0;
}

#endif
