// What the kinds' own ray casts and nearest searches share: the exact tests
// (inline, so a traversal's inner loop pays no call), the callback protocol
// of qg_raycast, and the bounded "k best so far" of qg_nearest.
//
// Every kind that serves .raycast / .nearest (index_internal.h) builds on
// these, so the answers are the formulas of the public qg_ray_box and
// qg_point_box_distance2 bit for bit, whatever order a kind walks in.
#ifndef QG_QUERY_UTIL_H
#define QG_QUERY_UTIL_H

#include "engine.h"

/// qg_ray_box's formula (the `rays` workload's): the segment origin +
/// t*(dx, dy), t in [0, max_t], against the closed box; *t the entry
/// parameter. Two statements per product: no fused multiply-add.
static inline bool qg_ray_box_fast(qg_rect box, float ox, float oy, float dx, float dy, float max_t, float *t)
{
    float t0 = 0.0f, t1 = max_t;
    if (dx == 0.0f) {
        if (ox < box.min_x || ox > box.max_x)
            return false;
    } else {
        const float inv = 1.0f / dx;
        float ta = (box.min_x - ox) * inv, tb = (box.max_x - ox) * inv;
        if (ta > tb) {
            const float s = ta;
            ta = tb;
            tb = s;
        }
        // Comparisons, not fmaxf: a NaN parameter leaves the range as it is.
        t0 = ta > t0 ? ta : t0;
        t1 = tb < t1 ? tb : t1;
    }
    if (dy == 0.0f) {
        if (oy < box.min_y || oy > box.max_y)
            return false;
    } else {
        const float inv = 1.0f / dy;
        float ta = (box.min_y - oy) * inv, tb = (box.max_y - oy) * inv;
        if (ta > tb) {
            const float s = ta;
            ta = tb;
            tb = s;
        }
        t0 = ta > t0 ? ta : t0;
        t1 = tb < t1 ? tb : t1;
    }
    if (!(t0 <= t1))
        return false;
    *t = t0;
    return true;
}

/// qg_point_box_distance2's formula (the `knn` workload's).
static inline float qg_point_box_d2_fast(qg_rect box, float x, float y)
{
    float ex = box.min_x - x, ey = box.min_y - y;
    const float fx = x - box.max_x, fy = y - box.max_y;
    ex = fx > ex ? fx : ex;
    ey = fy > ey ? fy : ey;
    ex = ex > 0.0f ? ex : 0.0f;
    ey = ey > 0.0f ? ey : 0.0f;
    // Two statements: a product and a sum the compiler may not fuse.
    const float xx = ex * ex, yy = ey * ey;
    return xx + yy;
}

/* ---- ray casts ---------------------------------------------------------- */

/// One qg_raycast in progress. A kind walks its cells or nodes near to far,
/// skips those whose entry parameter is past `max_t` (the callback shrinks
/// it in closest-hit mode), and offers each element once.
typedef struct qg_ray {
    float ox, oy, dx, dy;
    float max_t; ///< current: the callback's smallest answer so far
    bool stop;   ///< the callback returned a negative value
    qg_ray_fn *fn;
    void *user;
} qg_ray;

static inline qg_ray qg_ray_start(float ox, float oy, float dx, float dy, float max_t, qg_ray_fn *fn, void *user)
{
    qg_ray r = {ox, oy, dx, dy, max_t, false, fn, user};
    return r;
}

/// Tests element h (box `box`) at the current max_t and reports a hit.
/// False once the callback has stopped the cast (the caller returns).
static inline bool qg_ray_offer(qg_ray *r, qg_handle h, qg_rect box)
{
    float t;
    if (!qg_ray_box_fast(box, r->ox, r->oy, r->dx, r->dy, r->max_t, &t))
        return true;
    const float m = r->fn(h, t, r->user);
    if (!(m >= 0.0f)) { // negative or NaN: stop
        r->stop = true;
        return false;
    }
    r->max_t = m < r->max_t ? m : r->max_t;
    return true;
}

/// The parameter interval [*t0, *t1] in which the segment (at the current
/// max_t) is inside the closed box `cell`; false when it misses it. The
/// same formula as the hit test, so a cell a hit lies in is never skipped
/// for rounding when the cell is widened by a hair (qg_ray_hair).
static inline bool qg_ray_span(const qg_ray *r, qg_rect cell, float *t0, float *t1)
{
    float a = 0.0f, b = r->max_t;
    if (r->dx == 0.0f) {
        if (r->ox < cell.min_x || r->ox > cell.max_x)
            return false;
    } else {
        const float inv = 1.0f / r->dx;
        float ta = (cell.min_x - r->ox) * inv, tb = (cell.max_x - r->ox) * inv;
        if (ta > tb) {
            const float s = ta;
            ta = tb;
            tb = s;
        }
        a = ta > a ? ta : a;
        b = tb < b ? tb : b;
    }
    if (r->dy == 0.0f) {
        if (r->oy < cell.min_y || r->oy > cell.max_y)
            return false;
    } else {
        const float inv = 1.0f / r->dy;
        float ta = (cell.min_y - r->oy) * inv, tb = (cell.max_y - r->oy) * inv;
        if (ta > tb) {
            const float s = ta;
            ta = tb;
            tb = s;
        }
        a = ta > a ? ta : a;
        b = tb < b ? tb : b;
    }
    if (!(a <= b))
        return false;
    *t0 = a;
    *t1 = b;
    return true;
}

/// `cell` widened on every side by a hair for the rounding of points on
/// the segment (a few ulps of the largest coordinate involved) plus
/// `margin` (how far a kind's elements may reach out of the cell that
/// lists them).
static inline qg_rect qg_ray_widen(qg_rect cell, float margin)
{
    const float ex = 1e-5f * (fabsf(cell.min_x) + fabsf(cell.max_x)) + 1e-30f + margin;
    const float ey = 1e-5f * (fabsf(cell.min_y) + fabsf(cell.max_y)) + 1e-30f + margin;
    qg_rect q = {cell.min_x - ex, cell.min_y - ey, cell.max_x + ex, cell.max_y + ey};
    return q;
}

/* ---- nearest ------------------------------------------------------------ */

/// Distances the heap keeps beside its handles on the stack; past this k
/// the heap recomputes them from the boxes (nearest never allocates).
#define QG_NEAR_CACHE 64

/// Up to this k the k best are kept sorted (an insertion moves a few
/// entries, and the answer needs no final sort); past it, in a heap.
#define QG_NEAR_SORTED 16

/// The k best so far, in the caller's handles array: sorted ascending by
/// (distance2, handle) for small k, else a max-heap with the worst on top.
/// The worst held is kept beside them, so the bound costs a load. Offering
/// the same element twice is harmless (see qg_near_offer), so kinds that
/// list an element in several cells need no visited set.
typedef struct qg_near {
    const qg_index *index;
    float x, y;
    float max_d2;    ///< the caller's limit
    qg_handle *heap; ///< the caller's handles array
    int32_t n, k;
    bool once;       ///< the kind offers each element at most once: no look for a second offer
    float worst;     ///< distance2 of the worst held, once k are held (else max_d2)
    qg_handle worst_h; ///< its handle
    float d2[QG_NEAR_CACHE]; ///< heap[i]'s distance2 when k <= QG_NEAR_CACHE
} qg_near;

static inline void qg_near_start(qg_near *c, const qg_index *index, float x, float y, int32_t k, float max_d2,
                                 qg_handle *handles)
{
    c->index = index;
    c->x = x;
    c->y = y;
    c->max_d2 = max_d2;
    c->heap = handles;
    c->n = 0;
    c->k = k;
    c->once = false;
    c->worst = max_d2;
    c->worst_h = -1;
}

static inline bool qg_near_before(float da, qg_handle a, float db, qg_handle b)
{
    return da < db || (da == db && a < b);
}

static inline float qg_near_dist(const qg_near *c, int32_t i)
{
    return c->k <= QG_NEAR_CACHE ? c->d2[i] : qg_point_box_d2_fast(qg_element_box(c->index, c->heap[i]), c->x, c->y);
}

/// The distance2 past which nothing can enter: the worst held once k are
/// held, else the caller's limit. A kind prunes cells and nodes whose
/// distance2 exceeds it (> only: a tie may still win on its handle).
static inline float qg_near_bound(const qg_near *c)
{
    return c->worst;
}

/// Implementation of qg_near_offer (out of line in queries.c).
void qg_near_push(qg_near *c, qg_handle h, float d);

/// Offers element h at distance2 d. An element already held is not taken
/// again, and one refused before is refused again (the bound only falls),
/// so offering an element several times changes nothing.
static inline void qg_near_offer(qg_near *c, qg_handle h, float d)
{
    if (!(d <= c->max_d2))
        return;
    if (c->n == c->k && !qg_near_before(d, h, c->worst, c->worst_h))
        return;
    qg_near_push(c, h, d);
}

/// Leaves the k best in ascending (distance2, handle) order in the handles
/// array and returns how many are held.
int32_t qg_near_finish(qg_near *c);

#endif
