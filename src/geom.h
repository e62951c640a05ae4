// SPDX-License-Identifier: MIT
// The leaf helpers every part of the library shares: the closed-box tests,
// a box as one vector (vec.h), bit tricks, extents. Nothing here knows an
// index: this header includes only the public types and vec.h, so the
// engine, the kinds and the dispatcher all stand on it without including
// each other.
#ifndef QG_GEOM_H
#define QG_GEOM_H

#include "quadgrid.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "vec.h"

#if defined(QV_HAVE)
/// A box as one vector (min_x, min_y, max_x, max_y), built from its four
/// floats rather than loaded from its address (see qv_f4).
static inline qv_f32 qg_rect_vec(qg_rect r)
{
    return qv_f4(r.min_x, r.min_y, r.max_x, r.max_y);
}
#endif

#if defined(QV_HAVE)
/// A box broadcast for qg_overlaps4: each coordinate in all four lanes.
typedef struct qg_box4 {
    qv_f32 x0, y0, x1, y1;
} qg_box4;

static inline qg_box4 qg_box4_of(qg_rect r)
{
    return (qg_box4){qv_splat(r.min_x), qv_splat(r.min_y), qv_splat(r.max_x), qv_splat(r.max_y)};
}

/// Bit l set when box b overlaps the box in lane l of four boxes stored a
/// coordinate at a time (x0[0..4), ...): qg_overlaps' test (<=, false for
/// NaN), four at once. The leaf kernels of the trees and the static
/// caches' slot test share it.
static inline unsigned qg_overlaps4(qg_box4 b, const float *x0, const float *y0, const float *x1, const float *y1)
{
    const qv_i32 ox = qv_le(b.x0, qv_loadf(x1)) & qv_le(qv_loadf(x0), b.x1);
    const qv_i32 oy = qv_le(b.y0, qv_loadf(y1)) & qv_le(qv_loadf(y0), b.y1);
    return (unsigned)qv_bits(ox & oy);
}
#endif

/// *dst = r without the spill and 16-byte reload a struct copy of a box
/// passed by value compiles to (see qg_rect_vec).
static inline void qg_rect_store(qg_rect *dst, qg_rect r)
{
#if defined(QV_HAVE)
    qv_storef(&dst->min_x, qg_rect_vec(r));
#else
    *dst = r;
#endif
}

/// True when `inner` lies inside `outer` (closed; false when a coordinate
/// of either is NaN). Every move runs it (the engine's fat box), as one
/// vector compare each way.
static inline bool qg_rect_inside(qg_rect inner, qg_rect outer)
{
#if defined(QV_HAVE)
    const qv_f32 i = qg_rect_vec(inner), o = qg_rect_vec(outer);
    // lanes 0, 1: outer's min <= inner's; lanes 2, 3: inner's max <= outer's
    return ((qv_bits(qv_le(o, i)) & 3) | (qv_bits(qv_le(i, o)) & 12)) == 15;
#else
    return inner.min_x >= outer.min_x && inner.min_y >= outer.min_y && inner.max_x <= outer.max_x &&
           inner.max_y <= outer.max_y;
#endif
}

/// qg_rect_inside, and `inner` ordered (min <= max on both axes): one
/// test for a move's box against a fat box.
static inline bool qg_rect_inside_ordered(qg_rect inner, qg_rect outer)
{
#if defined(QV_HAVE)
    const qv_f32 i = qg_rect_vec(inner), o = qg_rect_vec(outer);
    const int m = (qv_bits(qv_le(o, i)) & 3) | (qv_bits(qv_le(i, o)) & 12) | (qv_bits(qv_le(i, qv_high2(i))) & 3) << 4;
    return m == 63;
#else
    return qg_rect_inside(inner, outer) && inner.min_x <= inner.max_x && inner.min_y <= inner.max_y;
#endif
}

/// True when `box` is ordered (min <= max) and lies inside the box whose
/// sides are w = (min_x, min_y, -max_x, -max_y) (its max side stored
/// negated, so all four sides test one way in one compare); false when a
/// coordinate is NaN. A fat layer element's every move runs it.
static inline bool qg_rect_inside_negated(qg_rect box, const float *w)
{
#if defined(QV_HAVE)
    const qv_i32 sign = qv_splat_i32(INT32_MIN);
    const qv_f32 v = qv_flip(qg_rect_vec(box), (qv_i32){0, 0, INT32_MIN, INT32_MIN});
    const qv_i32 in = qv_le(qv_loadf(w), v);
    // Lanes 2, 3: -max <= -min.
    const qv_i32 ord = qv_le(v, qv_flip(qv_low2(v), sign));
    return (qv_bits(in) & (qv_bits(ord) | 3)) == 15;
#else
    return w[0] <= box.min_x && w[1] <= box.min_y && w[2] <= -box.max_x && w[3] <= -box.max_y &&
           box.min_x <= box.max_x && box.min_y <= box.max_y;
#endif
}

/// True when AVX2 kernels may run (the point grid's cell pairs, the static
/// caches' join): the processor has AVX2 and the
/// environment does not set QG_NO_AVX2. Asked once per index. The
/// switch lets the tests run the portable (SSE2) kernels on a processor with
/// AVX2 (each form is compared with brute force) and a user rule out the
/// wide form when chasing a difference. Never under QV_SCALAR.
static inline bool qg_cpu_avx2(void)
{
#if defined(__GNUC__) && defined(__x86_64__) && !defined(QV_SCALAR)
    return __builtin_cpu_supports("avx2") && getenv("QG_NO_AVX2") == NULL;
#else
    return false;
#endif
}

/// A storable box: finite, min <= max on both axes. x - x is 0 for every
/// finite x and NaN for NaN and both infinities, so one comparison checks all
/// four coordinates (this runs on every move; it relies on strict IEEE
/// arithmetic, which the build keeps).
static inline bool qg_box_valid(qg_rect b)
{
#if defined(QV_HAVE)
    // The same tests on one vector: x - x == 0 in all four lanes, and
    // (min_x, min_y) <= (max_x, max_y) in the low two.
    const qv_f32 v = qg_rect_vec(b);
    const int finite = qv_bits(qv_eq(v - v, qv_splat(0.0f)));
    const int ordered = qv_bits(qv_le(v, qv_high2(v)));
    return (finite & (ordered | 12)) == 15;
#else
    const float z = (b.min_x - b.min_x) + (b.min_y - b.min_y) + (b.max_x - b.max_x) + (b.max_y - b.max_y);
    return (z == 0.0f) & (b.min_x <= b.max_x) & (b.min_y <= b.max_y);
#endif
}

#if defined(__GNUC__)
#    define QG_NOINLINE __attribute__((noinline))
#else
#    define QG_NOINLINE
#endif

/// A handle's term in the sums a kind's qg_validate compares to prove each
/// element listed once without memory (splitmix64's finaliser): the listed
/// entries' terms sum to the live handles', and a handle twice with another
/// missing would need two 64-bit mixes to cancel.
static inline uint64_t qg_handle_term(qg_handle h)
{
    uint64_t z = (uint64_t)h + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/// The closed-box overlap test every kind and the oracle share.
/// Bitwise & rather than &&: one well-predicted branch instead of four
/// unpredictable ones in the pair loops.
static inline bool qg_overlaps(qg_rect a, qg_rect b)
{
    return (a.min_x <= b.max_x) & (b.min_x <= a.max_x) & (a.min_y <= b.max_y) &
           (b.min_y <= a.max_y);
}


/// Reports an unordered pair with the smaller handle first.
static inline bool qg_report_pair(qg_pair_fn *fn, void *user, qg_handle a, qg_handle b)
{
    return a < b ? fn(a, b, user) : fn(b, a, user);
}

/// Index of the lowest set bit of v (v != 0).
static inline int qg_ctz64(uint64_t v)
{
#if defined(__GNUC__)
    return __builtin_ctzll(v);
#else
    int n = 0;
    while (!(v & 1)) {
        v >>= 1;
        ++n;
    }
    return n;
#endif
}

/// Extent of [lo, hi] in double: finite for any finite floats (hi - lo in
/// float overflows to infinity past FLT_MAX, as with bounds [-3e38, 3e38]).
static inline double qg_extent(float lo, float hi)
{
    return (double)hi - (double)lo;
}

/// Largest of the two axes' extents of `r` (for choosing defaults), as a
/// float: FLT_MAX when it would overflow.
static inline float qg_rect_extent(qg_rect r)
{
    const double w = qg_extent(r.min_x, r.max_x), h = qg_extent(r.min_y, r.max_y);
    const double e = w > h ? w : h;
    return e < (double)FLT_MAX ? (float)e : FLT_MAX;
}

#endif
