// SPDX-License-Identifier: MIT
// What the kinds' own ray casts and nearest searches share: the exact tests
// (inline, so a traversal's inner loop pays no call), the callback protocol
// of qg_raycast, and the bounded "k best so far" of qg_nearest.
//
// Every kind that serves .raycast / .nearest (kind.h) builds on
// these, so the answers are the formulas of the public qg_ray_box and
// qg_point_box_distance2 bit for bit, whatever order a kind walks in.
#ifndef QG_QUERIES_H
#define QG_QUERIES_H

#include "kind.h"

/// qg_ray_slabs for a ray where a float slab parameter was infinite or NaN:
/// the coordinates' difference passed FLT_MAX, or 1 / d overflowed (a
/// subnormal direction). The interval is narrowed in double, so the answer
/// is the segment's own and not an artefact of inf - inf or inf * 0; an entry
/// parameter past FLT_MAX (max_t infinite) is reported as inf. Out of line:
/// the hit test's inner loops keep only the branch to it.
bool qg_ray_slabs_wide(qg_rect box, float ox, float oy, float dx, float dy, float ix, float iy, float max_t,
                       float *t0, float *t1);

/// The hit test's core, the formula of qg_ray_box (the `rays` workload's)
/// with the direction's inverses given (ix = 1 / dx, iy = 1 / dy, anything
/// where the component is 0): (lo - o) * inv is the very product the
/// formula rounds, so a kind that computes the inverses once per cast gets
/// the same answers bit for bit. [*t0, *t1] is the parameter interval
/// inside the closed box, starting from [0, max_t]; false when empty.
/// A slab parameter that is not finite (overflow, inf * 0) sends the whole
/// test to qg_ray_slabs_wide; every finite one is the float formula's.
static inline bool qg_ray_slabs(qg_rect box, float ox, float oy, float dx, float dy, float ix, float iy, float max_t,
                                float *t0, float *t1)
{
    float a = 0.0f, b = max_t;
    if (dx == 0.0f) {
        if (ox < box.min_x || ox > box.max_x)
            return false;
    } else {
        float ta = (box.min_x - ox) * ix, tb = (box.max_x - ox) * ix;
        // x - x is 0 only for a finite x: one test for inf and NaN on both.
        if ((ta - ta) + (tb - tb) != 0.0f)
            return qg_ray_slabs_wide(box, ox, oy, dx, dy, ix, iy, max_t, t0, t1);
        if (ta > tb) {
            const float s = ta;
            ta = tb;
            tb = s;
        }
        a = ta > a ? ta : a;
        b = tb < b ? tb : b;
    }
    if (dy == 0.0f) {
        if (oy < box.min_y || oy > box.max_y)
            return false;
    } else {
        float ta = (box.min_y - oy) * iy, tb = (box.max_y - oy) * iy;
        if ((ta - ta) + (tb - tb) != 0.0f)
            return qg_ray_slabs_wide(box, ox, oy, dx, dy, ix, iy, max_t, t0, t1);
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

/// 1 / d, or 0 for a zero component (never used then).
static inline float qg_ray_inverse(float d)
{
    return d != 0.0f ? 1.0f / d : 0.0f;
}

/// qg_ray_box's formula: true when the segment origin + t*(dx, dy), t in
/// [0, max_t], touches the closed box; *t the entry parameter.
static inline bool qg_ray_box_fast(qg_rect box, float ox, float oy, float dx, float dy, float max_t, float *t)
{
    float t1;
    return qg_ray_slabs(box, ox, oy, dx, dy, qg_ray_inverse(dx), qg_ray_inverse(dy), max_t, t, &t1);
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
    float ix, iy; ///< qg_ray_inverse of dx, dy: computed once per cast
    float max_t; ///< current: the callback's smallest answer so far
    bool stop;   ///< the callback returned a negative value
    qg_ray_fn *fn;
    void *user;
} qg_ray;

static inline qg_ray qg_ray_start(float ox, float oy, float dx, float dy, float max_t, qg_ray_fn *fn, void *user)
{
    qg_ray r = {ox, oy, dx, dy, qg_ray_inverse(dx), qg_ray_inverse(dy), max_t, false, fn, user};
    return r;
}

/// Reports element h, hit at t, to the callback and takes its answer as
/// the new max_t. False once the callback has stopped the cast (negative
/// or NaN answer): the caller returns.
static inline bool qg_ray_report(qg_ray *r, qg_handle h, float t)
{
    const float m = r->fn(h, t, r->user);
    if (!(m >= 0.0f)) {
        r->stop = true;
        return false;
    }
    r->max_t = m < r->max_t ? m : r->max_t;
    return true;
}

/// The segment's parameter interval [*t0, *t1] inside the closed box at
/// the current max_t; false when it misses. The hit test's formula, so a
/// cell a hit lies in is never skipped for rounding once the cell is
/// widened by a hair (qg_ray_widen).
static inline bool qg_ray_span(const qg_ray *r, qg_rect box, float *t0, float *t1)
{
    return qg_ray_slabs(box, r->ox, r->oy, r->dx, r->dy, r->ix, r->iy, r->max_t, t0, t1);
}

/// Tests element h (box `box`) at the current max_t and reports a hit.
/// False once the callback has stopped the cast (the caller returns).
static inline bool qg_ray_offer(qg_ray *r, qg_handle h, qg_rect box)
{
    float t, t1;
    return !qg_ray_span(r, box, &t, &t1) || qg_ray_report(r, h, t);
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
/// (distance2, handle) for small k, else, once k are held, a max-heap with
/// the worst on top (before that, in the order offered: a walk offers near
/// elements first, and each would sift up the whole heap).
/// The worst held is kept beside them, so the bound costs a load. Offering
/// the same element twice is harmless (see qg_near_offer), so kinds that
/// list an element in several cells need no visited set.
typedef struct qg_near {
    const qg_index *index;
    /// The box of a held element, for k past QG_NEAR_CACHE: the base's slot
    /// for a kind's own search; the generic form, which also meets the
    /// engine's elements, gives the engine's look-up.
    qg_rect (*box)(const qg_index *index, qg_handle h);
    float x, y;
    float max_d2;    ///< the caller's limit
    qg_handle *heap; ///< the caller's handles array
    int32_t n, k;
    bool once;       ///< the kind offers each element at most once: no look for a second offer
    float worst;     ///< distance2 of the worst held, once k are held (else max_d2)
    qg_handle worst_h; ///< its handle
    float d2[QG_NEAR_CACHE]; ///< heap[i]'s distance2 when k <= QG_NEAR_CACHE
} qg_near;

/// The box of element h of the kind (its slot in the base).
static inline qg_rect qg_near_slot_box(const qg_index *index, qg_handle h)
{
    return index->boxes[h];
}

static inline void qg_near_start(qg_near *c, const qg_index *index, float x, float y, int32_t k, float max_d2,
                                 qg_handle *handles)
{
    c->index = index;
    c->box = qg_near_slot_box;
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
    return c->k <= QG_NEAR_CACHE ? c->d2[i] : qg_point_box_d2_fast(c->box(c->index, c->heap[i]), c->x, c->y);
}

/// The distance2 past which nothing can enter: the worst held once k are
/// held, else the caller's limit. A kind prunes cells and nodes whose
/// distance2 exceeds it (> only: a tie may still win on its handle).
static inline float qg_near_bound(const qg_near *c)
{
    return c->worst;
}

/// A floor, as qg_point_box_d2_fast rounds it, of the distance2 of every
/// box whose gap to the point on one axis is at least `gap` (exactly; a
/// gap computed in double may be taken with its rounding, which the
/// relative hair here covers). The float formula rounds the gap and its
/// square, monotonically, so a float gap g <= the exact gap gives
/// g * g <= the box's distance2. A pruning test compares this with the
/// bound (strictly greater: a tie may still win on its handle); in double
/// a subnormal world's gaps square to tiny positive numbers while the
/// formula gives 0 for every box, and near FLT_MAX a double square past
/// the bound may still round to it in float.
static inline float qg_near_floor2(double gap)
{
    gap -= 1e-15 * gap;
    if (!(gap > 0.0))
        return 0.0f;
    float g = (float)gap;
    if ((double)g > gap)
        g = nextafterf(g, 0.0f);
    const float sq = g * g;
    return sq;
}

/// qg_near_floor2 of a box at gaps (gx, gy) on both axes: the formula
/// sums the two rounded squares, and rounding the sum is monotonic too.
static inline float qg_near_floor2_xy(double gx, double gy)
{
    const float sx = qg_near_floor2(gx), sy = qg_near_floor2(gy);
    return sx + sy;
}

/// The work a search may spend walking cells or nodes (one a cell or node
/// looked at, one an element listed there) before one pass over every box
/// is cheaper: a few times brute force's, whatever the world looks like.
static inline int64_t qg_near_budget(const qg_index *index)
{
    return 2 * (int64_t)index->box_high + 256;
}

/// Every element the index holds is held: nothing can improve (k at or
/// past the count). Only for a kind's own search, which offers each element
/// once and runs only while the engine's layers hold none (so the kind's
/// count is every live element).
static inline bool qg_near_all(const qg_near *c)
{
    return c->n == c->index->count;
}

/// Starts over with one pass over every live box, each offered once: the
/// answer of a walk that spent its budget (qg_near_budget).
void qg_near_scan(qg_near *c);

/// Implementation of qg_near_offer (out of line in ray_nearest_kernels.c).
void qg_near_push(qg_near *c, qg_handle h, float d);

/// Offers element h at distance2 d, which must be qg_point_box_d2_fast of
/// its box (the same element always comes with the same d). An element
/// already held is not taken again, and one refused before is refused again
/// (the bound only falls), so offering an element several times changes
/// nothing.
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
