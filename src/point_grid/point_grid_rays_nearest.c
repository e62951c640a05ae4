// SPDX-License-Identifier: MIT
// The point grid's own ray cast and nearest search (qg_raycast, qg_nearest).
//
// Every element is listed once: in one level, as one point (its box's min
// corner) in one cell's slots or in its row's tail. So neither search needs
// to tell a second sighting from a first: each element is offered at most
// once by construction, and the exact test (ray_nearest_kernels.h) decides.
//
// Ray cast, per level, row by row in the direction of dy:
// - A box of the level reaches at most `pad` past its min corner, so the
//   segment can touch it only where the segment's y lies in
//   [min_y, min_y + pad]. A row lists points whose y lies in the row's
//   quanta widened by the margins; the segment's parameter interval inside
//   that band (widened by pad above, a hair for rounding both ways) gives
//   the x the segment has there, and so the columns whose points can reach
//   it. Border rows and columns take clamped points from outside the world,
//   so their bands reach to infinity on the outer side.
// - Rows are planned 32 at a time, their starts prefetched, and each row's
//   slots prefetched while the row before it is read: the walk's cache
//   misses overlap instead of following one another.
// - Cells are walked in the direction of dx. A row whose entry parameter is
//   past the current max_t (the callback shrinks it) is skipped, and so is
//   the rest of a row once a cell's boxes start past it.
// - Before a candidate's box is read (a cache miss: handles are spatially
//   random), its point and size byte, already in the slot, bound the box
//   to a few quanta, and a slab test in the level's fixed-point coordinates
//   (the mapping is affine, so t is the same there) with a tolerance of a
//   few quanta drops most candidates, four slots at a time with vectors. Only
//   interior cells use it (border cells hold clamped points), and only
//   while the mapped ray stays small enough for float rounding to stay
//   under that tolerance.
// - The survivors' boxes are prefetched and tested together at the end of
//   the row (all hits: the misses overlap); once the callback has shrunk
//   max_t (closest hit) they are tested cell by cell, so a hit ends the
//   walk early.
//
// Nearest, per level, rings of cells around the point's cell:
// - Each cell has an exact lower bound of the distance to anything it lists
//   (its points' range widened by the margins, its boxes' by the pad), a
//   ring the least of its cells'; a cell or ring past the k-th best
//   distance is skipped, and the rings stop there. While the level is snug
//   (fresh from a re-sort: every point in its cell proper) the margins are
//   left out, and ring 1 skips about half its cells on `knn`.
// - Slots are bounded eight at a time (AVX2, chosen at run time; else four)
//   from point and size byte, from below (the quantized hull) and from
//   above (the part of the box its size byte proves). The k smallest upper
//   bounds queued make a limit no farther candidate can pass, so of the
//   candidates only those a lower bound puts within it are queued and their
//   boxes read, prefetched when queued, tested at the end of the ring. For
//   k <= 8 those bounds live in one AVX2 register (a branchless insertion:
//   the loop it replaced mispredicted). Ring 1 goes nearest cell first.
// - Tail elements are read per row, for the rows the final bound reaches.
//   The finest level goes first: its hits bound the coarser levels' rings.
#include "point_grid.h"

#include "../ray_nearest_kernels.h"

/// World coordinate of fixed-point coordinate q on an axis of origin o and
/// scale s, moved out by a hair for the rounding of the mapping (`dir` -1:
/// a lower limit, +1: an upper one). In double: q / s may pass FLT_MAX.
static float pg_world_at(float o, float s, int64_t q, int dir)
{
    const double w = (double)o + (double)q / (double)s;
    const double hair = 1e-5 * (fabs((double)o) + fabs(w)) + 2.0 / (double)s;
    const double v = w + dir * hair;
    if (v >= (double)FLT_MAX)
        return dir > 0 ? INFINITY : FLT_MAX;
    if (v <= -(double)FLT_MAX)
        return dir < 0 ? -INFINITY : -FLT_MAX;
    return (float)v;
}

/// The band of world y (or x) whose points row (column) c of n lists,
/// margins included; border ones reach to infinity outwards.
static void pg_band(float o, float s, int32_t c, int32_t n, float *lo, float *hi)
{
    *lo = c == 0 ? -INFINITY : pg_world_at(o, s, (int64_t)c * PG_Q - PG_M, -1);
    *hi = c == n - 1 ? INFINITY : pg_world_at(o, s, (int64_t)c * PG_Q + PG_Q + PG_M, +1);
}

static inline float pg_hair(float a, float b)
{
    return 1e-5f * (fabsf(a) + fabsf(b)) + 1e-30f;
}

/// Upper bound, in quanta, of how far a listed box reaches past its point
/// on each axis: the size byte's units, or the whole pad when the nibble is
/// saturated; plus one for the floor of the mapping.
static inline void pg_slot_extent(const pg_level *L, uint32_t size, float padq_x, float padq_y, float *wx, float *wy)
{
    const uint32_t nx = size & 15u, ny = size >> 4;
    *wx = (nx < 15u ? (float)(nx * (uint32_t)L->unit_x) : padq_x) + 1.0f;
    *wy = (ny < 15u ? (float)(ny * (uint32_t)L->unit_y) : padq_y) + 1.0f;
}

/* ---- ray cast ----------------------------------------------------------- */

/// The ray in a level's fixed-point coordinates, for the slot prefilter.
typedef struct pg_qray {
    bool on;          ///< the prefilter may be used
    float ox, oy;     ///< origin in quanta
    float dx, dy;     ///< direction in quanta per unit of t
    float ix, iy;     ///< 1 / dx, 1 / dy (unused when 0)
    float tol;        ///< quanta of rounding allowed
    float max_t0;     ///< max_t when the level's walk began
    float padq_x, padq_y;
} pg_qray;

static pg_qray pg_qray_of(const pg_level *L, const qg_ray *r)
{
    pg_qray q = {0};
    q.max_t0 = r->max_t;
    q.padq_x = L->pad * L->sx;
    q.padq_y = L->pad * L->sy;
    if (!isfinite(r->max_t) || !(q.padq_x < 4096.0f) || !(q.padq_y < 4096.0f))
        return q;
    q.ox = (r->ox - L->ox) * L->sx;
    q.oy = (r->oy - L->oy) * L->sy;
    q.dx = r->dx * L->sx;
    q.dy = r->dy * L->sy;
    const float ex = fabsf(q.dx * r->max_t), ey = fabsf(q.dy * r->max_t);
    const float big = 0x1p23f;
    // Far origins, long segments and directions whose inverse would
    // overflow keep the exact test alone.
    if (!(fabsf(q.ox) < big && fabsf(q.oy) < big && ex < big && ey < big) ||
        (q.dx != 0.0f && fabsf(q.dx) < 1e-20f) || (q.dy != 0.0f && fabsf(q.dy) < 1e-20f))
        return q;
    q.ix = q.dx != 0.0f ? 1.0f / q.dx : 0.0f;
    q.iy = q.dy != 0.0f ? 1.0f / q.dy : 0.0f;
    // The mapping rounds each coordinate by under a quantum; the products
    // and sums here by a few ulps of the magnitudes involved.
    q.tol = 3.0f + 1e-6f * (fabsf(q.ox) + fabsf(q.oy) + ex + ey);
    q.on = true;
    return q;
}

/// False when the segment at parameters [0, max_t] surely misses the box
/// [px, px + wx] x [py, py + wy] (quanta), widened by the tolerance.
static inline bool pg_qray_may_hit(const pg_qray *q, float max_t, float px, float py, float wx, float wy)
{
    float t0 = 0.0f, t1 = max_t;
    const float x0 = px - q->tol, x1 = px + wx + q->tol, y0 = py - q->tol, y1 = py + wy + q->tol;
    if (q->dx == 0.0f) {
        if (q->ox < x0 || q->ox > x1)
            return false;
    } else {
        float ta = (x0 - q->ox) * q->ix, tb = (x1 - q->ox) * q->ix;
        if (ta > tb) {
            const float s = ta;
            ta = tb;
            tb = s;
        }
        t0 = ta > t0 ? ta : t0;
        t1 = tb < t1 ? tb : t1;
    }
    if (q->dy == 0.0f) {
        if (q->oy < y0 || q->oy > y1)
            return false;
    } else {
        float ta = (y0 - q->oy) * q->iy, tb = (y1 - q->oy) * q->iy;
        if (ta > tb) {
            const float s = ta;
            ta = tb;
            tb = s;
        }
        t0 = ta > t0 ? ta : t0;
        t1 = tb < t1 ? tb : t1;
    }
    // A relative slack on t too: max_t came from the callback in world
    // terms, and the two parametrisations round differently.
    return t0 <= t1 + 1e-6f * (fabsf(t1) + 1.0f);
}

/// Candidates of one row whose boxes are being fetched: the exact tests
/// run after the row's slots were read, so the boxes' cache misses overlap
/// instead of following one another.
#define PG_RAY_BATCH 64

typedef struct pg_ray_batch {
    qg_handle h[PG_RAY_BATCH];
    int32_t n;
} pg_ray_batch;

/// Tests the queued candidates in order; false when the callback stopped.
static bool pg_ray_flush(const qg_rect *boxes, qg_ray *r, pg_ray_batch *b)
{
    for (int32_t i = 0; i < b->n; ++i)
        if (!qg_ray_offer(r, b->h[i], boxes[b->h[i]]))
            return false;
    b->n = 0;
    return true;
}

static inline bool pg_ray_queue(const qg_rect *boxes, qg_ray *r, pg_ray_batch *b, qg_handle h)
{
    PG_PREFETCH(&boxes[h]);
    b->h[b->n++] = h;
    return b->n < PG_RAY_BATCH || pg_ray_flush(boxes, r, b);
}

#if defined(QV_HAVE)
/// The width nibbles of four order words, (v >> 24) & 15 (nib: 15 in
/// each lane), the and in 64-bit lanes as GCC's SSE2 header declares pand:
/// in 32-bit lanes GCC shares the 15 with the nibble compares and holds it
/// in a register, which costs pg_near_cell's loop a spill.
static inline qv_i32 pg_nib_x(qv_i32 v, qv_i32 nib)
{
    typedef uint64_t pg_u64x2 __attribute__((vector_size(16)));
    return (qv_i32)((pg_u64x2)((qv_u32)v >> 24) & (pg_u64x2)nib);
}

/// Four slots [s, s + 4) of a cell, as the ray and the nearest kernels
/// test them: the order words (v), and each slot's quantized hull, its min
/// corner (px, py: quanta from the cell's base vbx, vby), width nibbles
/// (nx, ny) and widths (wx, wy: nibble * unit + 1, or pad where the nibble is
/// full). The constants come from the caller, so both loops keep them in
/// registers as before.
typedef struct pg_hull4 {
    qv_i32 v, nx, ny;
    qv_f32 px, py, wx, wy;
} pg_hull4;

static inline pg_hull4 pg_hull4_load(const pg_level *L, int32_t s, qv_i32 vbx, qv_i32 vby, qv_i32 byte, qv_i32 nib,
                                     qv_f32 unit_x, qv_f32 unit_y, qv_f32 pad_x, qv_f32 pad_y, qv_f32 one)
{
    pg_hull4 h;
    h.v = qv_load_i32(&L->order[s]);
    const qv_i32 q = qv_load_u16x4(&L->sq[s]);
    h.px = qv_float(vbx + (q & byte));
    h.py = qv_float(vby + (qv_i32)((qv_u32)q >> 8));
    h.nx = pg_nib_x(h.v, nib);
    h.ny = (qv_i32)((qv_u32)h.v >> 28);
    h.wx = qv_select(h.nx == nib, pad_x, qv_float(h.nx) * unit_x + one);
    h.wy = qv_select(h.ny == nib, pad_y, qv_float(h.ny) * unit_y + one);
    return h;
}

/// The slots [s0, s1) of interior cell (cx, cy) of a fresh level, four at a
/// time: pg_qray_may_hit on the quantized hull of each (a slab test in
/// fixed point), the survivors queued. False when the callback stopped.
static bool pg_ray_cell_vec(const pg_level *L, const qg_rect *boxes, qg_ray *r, const pg_qray *q, pg_ray_batch *b,
                            int32_t cx, int32_t cy, int32_t s0, int32_t s1)
{
    const qv_i32 vbx = qv_splat_i32((cx << PG_QBITS) - PG_M), vby = qv_splat_i32((cy << PG_QBITS) - PG_M);
    const qv_i32 byte = qv_splat_i32(0xFF), nib = qv_splat_i32(15), dead = qv_splat_i32(PG_MAX_HANDLES);
    const qv_i32 lane = {0, 1, 2, 3};
    const qv_f32 unit_x = qv_splat((float)L->unit_x), unit_y = qv_splat((float)L->unit_y);
    const qv_f32 vpadx = qv_splat(q->padq_x + 1.0f), vpady = qv_splat(q->padq_y + 1.0f);
    const qv_f32 one = qv_splat(1.0f), tol = qv_splat(q->tol), inf = qv_splat(INFINITY);
    const qv_f32 ox = qv_splat(q->ox), oy = qv_splat(q->oy), ix = qv_splat(q->ix), iy = qv_splat(q->iy);
    // A zero direction on an axis: the origin must lie in the slab.
    const qv_i32 flat_x = qv_splat_i32(q->dx == 0.0f ? -1 : 0);
    const qv_i32 flat_y = qv_splat_i32(q->dy == 0.0f ? -1 : 0);
    for (int32_t s = s0; s < s1; s += 4) {
        // Slots past the cell's end are read (order and sq keep PG_PAD
        // slots of slack) and masked off.
        const pg_hull4 h = pg_hull4_load(L, s, vbx, vby, byte, nib, unit_x, unit_y, vpadx, vpady, one);
        const qv_i32 v = h.v;
        const qv_f32 px = h.px, py = h.py, wx = h.wx, wy = h.wy;
        const qv_f32 x0 = px - tol, x1 = px + wx + tol;
        const qv_f32 y0 = py - tol, y1 = py + wy + tol;
        // Slab parameters; on a flat axis, all or nothing by the origin.
        const qv_f32 ax = (x0 - ox) * ix, bx = (x1 - ox) * ix;
        const qv_f32 ay = (y0 - oy) * iy, by = (y1 - oy) * iy;
        const qv_i32 in_x = qv_le(x0, ox) & qv_le(ox, x1);
        const qv_i32 in_y = qv_le(y0, oy) & qv_le(oy, y1);
        const qv_f32 lo_x = qv_select(flat_x, (qv_f32)qv_andnot(in_x, (qv_i32)inf), qv_min(ax, bx));
        const qv_f32 hi_x = qv_select(flat_x, inf, qv_max(ax, bx));
        const qv_f32 lo_y = qv_select(flat_y, (qv_f32)qv_andnot(in_y, (qv_i32)inf), qv_min(ay, by));
        const qv_f32 hi_y = qv_select(flat_y, inf, qv_max(ay, by));
        const qv_f32 t0 = qv_max(qv_max(lo_x, lo_y), qv_splat(0.0f));
        const qv_f32 t1 = qv_min(qv_min(hi_x, hi_y), qv_splat(r->max_t));
        // The relative slack of pg_qray_may_hit: the two parametrisations
        // round differently.
        const qv_f32 slack = qv_splat(1e-6f) * (qv_max(t1, qv_splat(0.0f) - t1) + one);
        const qv_i32 live = qv_andnot((v & dead) == dead, lane < qv_splat_i32(s1 - s));
        int mask = qv_bits(qv_le(t0, t1 + slack) & live);
        if (mask == 0)
            continue;
        uint32_t hv[4];
        qv_store_i32(hv, v);
        while (mask != 0) {
            const int i = __builtin_ctz((unsigned)mask);
            mask &= mask - 1;
            if (!pg_ray_queue(boxes, r, b, (qg_handle)(hv[i] & PG_MAX_HANDLES)))
                return false;
        }
    }
    return true;
}
#endif

/// The cells of row cy in [cx0, cx1], walked in the direction `step`;
/// false when the callback stopped the cast.
static bool pg_ray_row(const pg_level *L, const qg_rect *boxes, qg_ray *r, const pg_qray *q, pg_ray_batch *b,
                       int32_t cy, int32_t cx0, int32_t cx1, int32_t step)
{
    const bool inner_row = cy > 0 && cy < L->rows - 1;
    const float inv = r->dx != 0.0f && fabsf(r->dx) > 1e-30f ? 1.0f / r->dx : 0.0f;
    for (int32_t cx = step > 0 ? cx0 : cx1; step > 0 ? cx <= cx1 : cx >= cx0; cx += step) {
        const int32_t c = cy * L->cols + cx;
        const int32_t s0 = L->start[c], s1 = L->start[c + 1];
        const bool inner = inner_row && cx > 0 && cx < L->cols - 1;
        if (inv != 0.0f && inner) {
            // Where the segment reaches the x this cell's boxes start at
            // (going right: their min corners' least x; going left: the
            // most their max corners reach): past the current max_t, this
            // cell and the rest of the row are out of reach. Once the
            // callback has shrunk max_t (a closest-hit cast) what was queued
            // is tested first, so a hit can end the row; before that the
            // row's candidates are tested together, their misses overlapped.
            if (b->n >= (r->max_t < q->max_t0 ? 1 : 8) && !pg_ray_flush(boxes, r, b))
                return false;
            const float edge = step > 0 ? pg_world_at(L->ox, L->sx, (int64_t)cx * PG_Q - PG_M, -1)
                                        : pg_world_at(L->ox, L->sx, (int64_t)cx * PG_Q + PG_Q + PG_M, +1) + L->pad;
            if ((edge - r->ox) * inv > r->max_t * (1.0f + 1e-6f) + 1e-30f)
                break;
        }
        const bool filter = q->on && L->fresh && inner;
#if defined(QV_HAVE)
        if (filter) {
            if (!pg_ray_cell_vec(L, boxes, r, q, b, cx, cy, s0, s1))
                return false;
            continue;
        }
#endif
        for (int32_t s = s0; s < s1; ++s) {
            const uint32_t v = L->order[s];
            if ((v & PG_MAX_HANDLES) == PG_MAX_HANDLES)
                continue; // tombstone
            const qg_handle h = (qg_handle)(v & PG_MAX_HANDLES);
            if (filter) {
                const pg_point p = pg_listed_point(L->sq[s], cx, cy);
                float wx, wy;
                pg_slot_extent(L, v >> 24, q->padq_x, q->padq_y, &wx, &wy);
                if (!pg_qray_may_hit(q, r->max_t, (float)p.x, (float)p.y, wx, wy))
                    continue;
            }
            if (!pg_ray_queue(boxes, r, b, h))
                return false;
        }
    }
    return true;
}

/// The ray over one level; false when the callback stopped the cast.
/// One row of a ray's walk: its columns (with and without the margins) and
/// the parameter at which the segment enters its band.
typedef struct pg_ray_span_row {
    int32_t cy, cx0, cx1, tx0, tx1;
    float ta;
} pg_ray_span_row;

/// Rows a ray's walk plans (and prefetches) at a time.
#define PG_RAY_ROWS 32

/// The columns of row cy the segment's band reaches; false when the segment
/// misses the band.
static bool pg_ray_plan_row(const pg_level *L, const qg_ray *r, int32_t cy, pg_ray_span_row *out)
{
    // The segment's parameters where its y can touch a box whose min corner
    // this row lists.
    float blo, bhi;
    pg_band(L->oy, L->sy, cy, L->rows, &blo, &bhi);
    float ta, tb;
    if (!qg_ray_span(r, (qg_rect){-INFINITY, blo, INFINITY, bhi + L->pad}, &ta, &tb))
        return false;
    float xa = r->ox, xb = r->ox;
    if (r->dx != 0.0f) {
        xa = r->ox + ta * r->dx;
        xb = r->ox + tb * r->dx;
    }
    const float xlo = xa < xb ? xa : xb, xhi = xa < xb ? xb : xa;
    const float xh = pg_hair(xlo, xhi) + pg_hair(r->ox, 0.0f);
    const int32_t qx0 = pg_map(pg_widen(L, xlo) - xh, L->hx, L->s2x, L->gmaxf_x);
    const int32_t qx1 = pg_map(xhi + xh, L->hx, L->s2x, L->gmaxf_x);
    out->cy = cy;
    out->cx0 = qx0 > PG_M ? (qx0 - PG_M) >> PG_QBITS : 0;
    out->cx1 = (qx1 + PG_M) >> PG_QBITS;
    if (out->cx1 >= L->cols)
        out->cx1 = L->cols - 1;
    out->tx0 = qx0 >> PG_QBITS;
    out->tx1 = qx1 >> PG_QBITS;
    out->ta = ta;
    return true;
}

/// Fetches a planned row's slots (its starts were fetched when planned).
static inline void pg_ray_prefetch_slots(const pg_level *L, const pg_ray_span_row *w)
{
    const int32_t s0 = L->start[w->cy * L->cols + w->cx0], s1 = L->start[w->cy * L->cols + w->cx1 + 1];
    for (int32_t s = s0; s < s1 && s < s0 + 64; s += 16) {
        PG_PREFETCH(&L->order[s]);
        PG_PREFETCH(&L->sq[s]);
    }
}

/// The ray over one level; false when the callback stopped the cast. Rows
/// are planned PG_RAY_ROWS at a time with their starts prefetched, and
/// each row's slots are prefetched while the row before it is read.
static bool pg_ray_level(const pg_level *L, const qg_rect *boxes, qg_ray *r)
{
    const pg_qray q = pg_qray_of(L, r);
    // Rows whose points can reach the segment's y range.
    const float ya = r->oy, yb = r->dy == 0.0f ? r->oy : r->oy + r->max_t * r->dy;
    const float ylo = (ya < yb ? ya : yb), yhi = (ya < yb ? yb : ya);
    const float yh = pg_hair(ylo, yhi);
    const int32_t qy0 = pg_map(pg_widen(L, ylo) - yh, L->hy, L->s2y, L->gmaxf_y);
    const int32_t qy1 = pg_map(yhi + yh, L->hy, L->s2y, L->gmaxf_y);
    int32_t ry0 = qy0 > PG_M ? (qy0 - PG_M) >> PG_QBITS : 0, ry1 = (qy1 + PG_M) >> PG_QBITS;
    if (ry1 >= L->rows)
        ry1 = L->rows - 1;
    const int32_t ystep = r->dy < 0.0f ? -1 : 1, xstep = r->dx < 0.0f ? -1 : 1;
    int32_t cy = ystep > 0 ? ry0 : ry1;
    const int32_t last = ystep > 0 ? ry1 : ry0;
    pg_ray_span_row plan[PG_RAY_ROWS];
    for (;;) {
        int32_t n = 0;
        for (; n < PG_RAY_ROWS && (ystep > 0 ? cy <= last : cy >= last); cy += ystep) {
            if (!pg_ray_plan_row(L, r, cy, &plan[n]))
                continue;
            PG_PREFETCH(&L->start[plan[n].cy * L->cols + plan[n].cx0]);
            PG_PREFETCH(&L->start[plan[n].cy * L->cols + plan[n].cx1 + 1]);
            n++;
        }
        if (n == 0)
            return true;
        pg_ray_prefetch_slots(L, &plan[0]);
        for (int32_t i = 0; i < n; ++i) {
            const pg_ray_span_row *w = &plan[i];
            if (i + 1 < n)
                pg_ray_prefetch_slots(L, &plan[i + 1]);
            if (w->ta > r->max_t)
                continue; // a closer hit since the plan
            pg_ray_batch b;
            b.n = 0;
            if (!pg_ray_row(L, boxes, r, &q, &b, w->cy, w->cx0, w->cx1, xstep))
                return false;
            // The row's tail: points of this row (no margins) in those columns.
            for (uint32_t t = L->tail == 0 ? PG_TAIL_END : L->tail_head[w->cy]; t != PG_TAIL_END;) {
                const int32_t s = L->listed + (int32_t)t;
                const qg_handle h = pg_order(L, s);
                t = L->sq[s];
                if (h >= 0 && pg_tail_in_cols(L, s, w->tx0, w->tx1) && !pg_ray_queue(boxes, r, &b, h))
                    return false;
            }
            if (!pg_ray_flush(boxes, r, &b))
                return false;
        }
    }
}

void qg_pg_raycast(const qg_index *index, float ox, float oy, float dx, float dy, float max_t, qg_ray_fn *fn,
                   void *user)
{
    const point_grid *g = (const point_grid *)index;
    qg_ray r = qg_ray_start(ox, oy, dx, dy, max_t, fn, user);
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        const pg_level *L = &g->level[k];
        if (L->count > 0 && !pg_ray_level(L, index->boxes, &r))
            return;
    }
}

/* ---- nearest ------------------------------------------------------------ */

/// Candidates of the rings being searched: handle and a lower bound of its
/// distance2 from the slot alone, and the k smallest upper bounds seen. A
/// box holds its min corner, so the distance to the corner's quantum bounds
/// the box's from above, and k candidates within their upper bounds make
/// the k-th of those a limit no farther candidate can pass: only the boxes
/// a lower bound puts within it are ever read (on the `knn` workload about
/// one candidate in four). Those are prefetched when queued and tested
/// once the rings are read, so their cache misses overlap.
#define PG_NEAR_BATCH 256

typedef struct pg_near_batch {
    qg_handle h[PG_NEAR_BATCH];
    float lb[PG_NEAR_BATCH];
    int32_t n;
    int32_t ntop;             ///< how many upper bounds are kept (at most k; 0 when k > QG_NEAR_CACHE)
    float limit;              ///< top[k - 1] once k are kept, else infinity
    /// The smallest upper bounds queued, ascending: top[0..ntop).
    _Alignas(32) float top[QG_NEAR_CACHE];
} pg_near_batch;

/// What a level's slot and cell bounds share, computed once a query.
typedef struct pg_near_k {
    float qx, qy;         ///< the point in quanta
    float padq_x, padq_y; ///< the pad in quanta
    float ux, uy;         ///< world units per quantum
    float unitf_x, unitf_y; ///< quanta per unit of the size byte
    bool wide;            ///< the processor runs AVX2 (pg_near_cell_wide)
#if defined(QV_HAVE)
    qv_f32 vqx, vqy, unit_x, unit_y, vpadx, vpady, vux, vuy;
#endif
} pg_near_k;

/// Notes a candidate's upper bound among the k smallest.
static inline void pg_near_upper(const qg_near *c, pg_near_batch *b, float ub)
{
    if (c->k > QG_NEAR_CACHE || !(ub < b->limit))
        return;
    int32_t i = b->ntop < c->k ? b->ntop++ : c->k - 1;
    for (; i > 0 && b->top[i - 1] > ub; --i)
        b->top[i] = b->top[i - 1];
    b->top[i] = ub;
    if (b->ntop == c->k)
        b->limit = b->top[c->k - 1];
}

static void pg_near_flush(const qg_rect *boxes, qg_near *c, pg_near_batch *b)
{
    // In queue order (sorting by bound cost more than the boxes it saved),
    // the heap's bound checked again as it tightens.
    const float limit = b->limit;
    for (int32_t i = 0; i < b->n; ++i)
        if (!(b->lb[i] > limit) && !(b->lb[i] > qg_near_bound(c)))
            qg_near_offer(c, b->h[i], qg_point_box_d2_fast(boxes[b->h[i]], c->x, c->y));
    b->n = 0;
    b->ntop = 0;
    b->limit = INFINITY;
}

/// Queues candidate h; nothing when its lower bound already rules it out.
static inline void pg_near_queue(const qg_rect *boxes, qg_near *c, pg_near_batch *b, qg_handle h, float lb, float ub)
{
    if (lb > qg_near_bound(c) || lb > b->limit)
        return;
    // Full before this one, not after: the vector kernels fill the batch
    // in steps of their width, up to the last slot.
    if (b->n == PG_NEAR_BATCH)
        pg_near_flush(boxes, c, b);
    PG_PREFETCH(&boxes[h]);
    pg_near_upper(c, b, ub);
    b->h[b->n] = h;
    b->lb[b->n] = lb;
    ++b->n;
}

#if defined(PG_HAVE_AVX2) || defined(QV_HAVE)
/// Queues the slots of a step whose lanes `mask` keeps (their boxes
/// prefetched): the vector kernels' common tail. The caller made room.
static inline void pg_near_keep(const qg_rect *boxes, pg_near_batch *b, int mask, const uint32_t *hv,
                                const float *lbv)
{
    int32_t n = b->n;
    while (mask != 0) {
        const int i = __builtin_ctz((unsigned)mask);
        mask &= mask - 1;
        const qg_handle h = (qg_handle)(hv[i] & PG_MAX_HANDLES);
        PG_PREFETCH(&boxes[h]);
        b->h[n] = h;
        b->lb[n] = lbv[i];
        ++n;
    }
    b->n = n;
}
#endif

#if defined(PG_HAVE_AVX2)
/// pg_near_cell's filtered form with AVX2: eight slots at a time, the same
/// bounds in the same arithmetic (so the same candidates), the ones kept
/// queued in slot order.
__attribute__((target("avx2"))) static void pg_near_cell_wide(const pg_level *L, const qg_rect *boxes, qg_near *c,
                                                              pg_near_batch *b, const pg_near_k *K, int32_t bx,
                                                              int32_t by, int32_t s, int32_t s1)
{
    const __m256 vqx = _mm256_set1_ps(K->qx), vqy = _mm256_set1_ps(K->qy);
    const __m256 unit_x = _mm256_set1_ps(K->unitf_x), unit_y = _mm256_set1_ps(K->unitf_y);
    const __m256 vpadx = _mm256_set1_ps(K->padq_x + 1.0f), vpady = _mm256_set1_ps(K->padq_y + 1.0f);
    const __m256 vux = _mm256_set1_ps(K->ux), vuy = _mm256_set1_ps(K->uy);
    const __m256 one = _mm256_set1_ps(1.0f), three = _mm256_set1_ps(3.0f), four = _mm256_set1_ps(4.0f);
    const __m256 zero = _mm256_setzero_ps(), shrink = _mm256_set1_ps(0.999f), grow = _mm256_set1_ps(1.001f);
    const __m256i vbx = _mm256_set1_epi32(bx), vby = _mm256_set1_epi32(by), byte = _mm256_set1_epi32(0xFF);
    const __m256i nib = _mm256_set1_epi32(15), dead = _mm256_set1_epi32(PG_MAX_HANDLES);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    // For k <= 8 the k smallest upper bounds live in one register, sorted,
    // infinity past those held: an insertion is a compare and two blends
    // (no loop, no branch), and the limit is lane k - 1.
    const bool vtop = c->k <= 8;
    const __m256 inf = _mm256_set1_ps(INFINITY);
    const __m256i shift = _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6), kth = _mm256_set1_epi32(c->k - 1);
    const __m256 not0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(lane, _mm256_setzero_si256()));
    __m256 top = _mm256_blendv_ps(_mm256_load_ps(b->top), inf,
                                  _mm256_castsi256_ps(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(b->ntop - 1))));
    for (; s < s1; s += 8) {
        // Slots past the cell's end are read (order and sq keep PG_PAD
        // slots of slack) and masked off.
        const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)&L->order[s]);
        const __m256i q = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)&L->sq[s]));
        const __m256 px = _mm256_cvtepi32_ps(_mm256_add_epi32(vbx, _mm256_and_si256(q, byte)));
        const __m256 py = _mm256_cvtepi32_ps(_mm256_add_epi32(vby, _mm256_srli_epi32(q, 8)));
        const __m256i nx = _mm256_and_si256(_mm256_srli_epi32(v, 24), nib), ny = _mm256_srli_epi32(v, 28);
        const __m256 fx = _mm256_castsi256_ps(_mm256_cmpeq_epi32(nx, nib));
        const __m256 fy = _mm256_castsi256_ps(_mm256_cmpeq_epi32(ny, nib));
        const __m256 sx = _mm256_mul_ps(_mm256_cvtepi32_ps(nx), unit_x), sy = _mm256_mul_ps(_mm256_cvtepi32_ps(ny), unit_y);
        const __m256 wx = _mm256_blendv_ps(_mm256_add_ps(sx, one), vpadx, fx);
        const __m256 wy = _mm256_blendv_ps(_mm256_add_ps(sy, one), vpady, fy);
        const __m256 dx = _mm256_sub_ps(px, vqx), dy = _mm256_sub_ps(py, vqy);
        __m256 ex = _mm256_max_ps(dx, _mm256_sub_ps(vqx, _mm256_add_ps(px, wx)));
        __m256 ey = _mm256_max_ps(dy, _mm256_sub_ps(vqy, _mm256_add_ps(py, wy)));
        ex = _mm256_mul_ps(_mm256_max_ps(_mm256_sub_ps(ex, three), zero), vux);
        ey = _mm256_mul_ps(_mm256_max_ps(_mm256_sub_ps(ey, three), zero), vuy);
        const __m256 lb = _mm256_mul_ps(shrink, _mm256_add_ps(_mm256_mul_ps(ex, ex), _mm256_mul_ps(ey, ey)));
        const __m256i live = _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_and_si256(v, dead), dead),
                                                 _mm256_cmpgt_epi32(_mm256_set1_epi32(s1 - s), lane));
        const float bound = qg_near_bound(c), limit = b->limit;
        const __m256 keep = _mm256_and_ps(_mm256_cmp_ps(lb, _mm256_set1_ps(bound < limit ? bound : limit), _CMP_LE_OQ),
                                          _mm256_castsi256_ps(live));
        int mask = _mm256_movemask_ps(keep);
        if (mask == 0)
            continue;
        const __m256 rx = _mm256_max_ps(_mm256_sub_ps(sx, unit_x), zero);
        const __m256 ry = _mm256_max_ps(_mm256_sub_ps(sy, unit_y), zero);
        const __m256 ox_ = _mm256_max_ps(_mm256_max_ps(dx, _mm256_sub_ps(vqx, _mm256_add_ps(px, rx))), zero);
        const __m256 oy_ = _mm256_max_ps(_mm256_max_ps(dy, _mm256_sub_ps(vqy, _mm256_add_ps(py, ry))), zero);
        const __m256 gx = _mm256_mul_ps(_mm256_add_ps(ox_, four), vux);
        const __m256 gy = _mm256_mul_ps(_mm256_add_ps(oy_, four), vuy);
        const __m256 ub = _mm256_mul_ps(grow, _mm256_add_ps(_mm256_mul_ps(gx, gx), _mm256_mul_ps(gy, gy)));
        int upper =
            c->k <= QG_NEAR_CACHE ? mask & _mm256_movemask_ps(_mm256_cmp_ps(ub, _mm256_set1_ps(limit), _CMP_LT_OQ)) : 0;
        uint32_t hv[8];
        float lbv[8], ubv[8];
        _mm256_storeu_si256((__m256i *)(void *)hv, v);
        _mm256_storeu_ps(lbv, lb);
        _mm256_storeu_ps(ubv, ub);
        if (b->n > PG_NEAR_BATCH - 8) {
            pg_near_flush(boxes, c, b);
            top = inf;
        }
        pg_near_keep(boxes, b, mask, hv, lbv);
        if (vtop) {
            while (upper != 0) {
                const int i = __builtin_ctz((unsigned)upper);
                upper &= upper - 1;
                // Lanes past the place of x take their left neighbour, the
                // place itself x; one no smaller than lane 7 changes nothing.
                const __m256 x = _mm256_set1_ps(ubv[i]);
                const __m256 left = _mm256_permutevar8x32_ps(top, shift);
                const __m256 gt = _mm256_cmp_ps(top, x, _CMP_GT_OQ);
                const __m256 gtl = _mm256_and_ps(_mm256_cmp_ps(left, x, _CMP_GT_OQ), not0);
                top = _mm256_blendv_ps(top, _mm256_blendv_ps(x, left, gtl), gt);
            }
            b->limit = _mm256_cvtss_f32(_mm256_permutevar8x32_ps(top, kth));
            continue;
        }
        while (upper != 0) {
            const int i = __builtin_ctz((unsigned)upper);
            upper &= upper - 1;
            pg_near_upper(c, b, ubv[i]);
        }
    }
    if (vtop) {
        _mm256_store_ps(b->top, top);
        const int held = __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(top, inf, _CMP_LT_OQ)));
        b->ntop = held < c->k ? held : c->k;
    }
}
#endif

/// Queues the listed elements of cell (cx, cy) whose point and size byte
/// allow a distance2 within the bound. `filter`: the cell is interior and
/// the level fresh (else the bound is 0).
///
/// The lower bound of a slot: the distance from the box's quantized hull
/// (the point, and the size nibbles' units past it, the pad when saturated,
/// one more for the floor), three quanta short on each axis for the
/// mapping's rounding and a thousandth short overall for the float
/// arithmetic. The upper bound: the distance to the part of the box the
/// size byte proves, four quanta and a thousandth long. A nibble n < 15 is
/// ceil(w / unit) of the mapped width w, and 15 means more, so w >= (n - 1)
/// * unit: the box holds [p, p + (n - 1) * unit] to within the mapping's
/// rounding (the min corner alone bounded it before: boxes a query lies
/// right of or above were counted their width too far). With vectors,
/// four slots at a time: most slots of a cell are far from the point, and
/// this test is the search's main work.
static void pg_near_cell(const pg_level *L, const qg_rect *boxes, qg_near *c, pg_near_batch *b, const pg_near_k *K,
                         int32_t cx, int32_t cy, bool filter)
{
    const int32_t cell = cy * L->cols + cx;
    const int32_t s0 = L->start[cell], s1 = L->start[cell + 1];
    if (!filter) {
        for (int32_t s = s0; s < s1; ++s) {
            const uint32_t v = L->order[s];
            if ((v & PG_MAX_HANDLES) != PG_MAX_HANDLES)
                pg_near_queue(boxes, c, b, (qg_handle)(v & PG_MAX_HANDLES), 0.0f, INFINITY);
        }
        return;
    }
    const int32_t bx = (cx << PG_QBITS) - PG_M, by = (cy << PG_QBITS) - PG_M;
    int32_t s = s0;
#if defined(PG_HAVE_AVX2)
    if (K->wide) {
        pg_near_cell_wide(L, boxes, c, b, K, bx, by, s0, s1);
        return;
    }
#endif
#if defined(QV_HAVE)
    {
        const qv_f32 one = qv_splat(1.0f), three = qv_splat(3.0f), zero = qv_splat(0.0f);
        const qv_f32 shrink = qv_splat(0.999f);
        const qv_i32 vbx = qv_splat_i32(bx), vby = qv_splat_i32(by), byte = qv_splat_i32(0xFF);
        const qv_i32 nib = qv_splat_i32(15), dead = qv_splat_i32(PG_MAX_HANDLES);
        const qv_i32 lane = {0, 1, 2, 3};
        for (; s < s1; s += 4) {
            // Slots past the cell's end are read (order and sq keep PG_PAD
            // slots of slack) and masked off.
            const pg_hull4 h =
                pg_hull4_load(L, s, vbx, vby, byte, nib, K->unit_x, K->unit_y, K->vpadx, K->vpady, one);
            const qv_i32 v = h.v;
            const qv_f32 px = h.px, py = h.py, wx = h.wx, wy = h.wy;
            qv_f32 ex = qv_max(px - K->vqx, K->vqx - (px + wx));
            qv_f32 ey = qv_max(py - K->vqy, K->vqy - (py + wy));
            ex = qv_max(ex - three, zero) * K->vux;
            ey = qv_max(ey - three, zero) * K->vuy;
            const qv_f32 ex2 = ex * ex, ey2 = ey * ey;
            const qv_f32 lb = shrink * (ex2 + ey2);
            const qv_i32 live = qv_andnot((v & dead) == dead, lane < qv_splat_i32(s1 - s));
            const float bound = qg_near_bound(c), limit = b->limit;
            const qv_i32 keep = qv_le(lb, qv_splat(bound < limit ? bound : limit)) & live;
            int mask = qv_bits(keep);
            if (mask == 0)
                continue;
            // Upper bounds (see pg_near_cell's comment), four quanta long,
            // a thousandth long overall. Only the lanes below the current
            // limit move it.
            const qv_f32 four = qv_splat(4.0f);
            const qv_f32 rx = qv_max(qv_float(h.nx) * K->unit_x - K->unit_x, zero);
            const qv_f32 ry = qv_max(qv_float(h.ny) * K->unit_y - K->unit_y, zero);
            const qv_f32 ox_ = qv_max(qv_max(px - K->vqx, K->vqx - (px + rx)), zero);
            const qv_f32 oy_ = qv_max(qv_max(py - K->vqy, K->vqy - (py + ry)), zero);
            const qv_f32 gx = (ox_ + four) * K->vux;
            const qv_f32 gy = (oy_ + four) * K->vuy;
            const qv_f32 ub = qv_splat(1.001f) * (gx * gx + gy * gy);
            int upper = c->k <= QG_NEAR_CACHE ? mask & qv_bits(qv_lt(ub, qv_splat(limit))) : 0;
            uint32_t hv[4];
            float lbv[4], ubv[4];
            qv_store_i32(hv, v);
            qv_storef(lbv, lb);
            qv_storef(ubv, ub);
            if (b->n > PG_NEAR_BATCH - 4)
                pg_near_flush(boxes, c, b);
            pg_near_keep(boxes, b, mask, hv, lbv);
            while (upper != 0) {
                const int i = __builtin_ctz((unsigned)upper);
                upper &= upper - 1;
                pg_near_upper(c, b, ubv[i]);
            }
        }
        return;
    }
#endif
    for (; s < s1; ++s) {
        const uint32_t v = L->order[s];
        if ((v & PG_MAX_HANDLES) == PG_MAX_HANDLES)
            continue;
        const uint32_t off = L->sq[s];
        const float px = (float)(bx + (int32_t)(off & 0xFF)), py = (float)(by + (int32_t)(off >> 8));
        float wx, wy;
        pg_slot_extent(L, v >> 24, K->padq_x, K->padq_y, &wx, &wy);
        const float qx = K->qx, qy = K->qy;
        float ex = px - qx, ey = py - qy;
        const float fx = qx - (px + wx), fy = qy - (py + wy);
        ex = (fx > ex ? fx : ex) - 3.0f;
        ey = (fy > ey ? fy : ey) - 3.0f;
        ex = ex > 0.0f ? ex * K->ux : 0.0f;
        ey = ey > 0.0f ? ey * K->uy : 0.0f;
        const float ex2 = ex * ex, ey2 = ey * ey;
        const uint32_t nx = (v >> 24) & 15u, ny = v >> 28;
        const float rx = nx > 0u ? (float)((nx - 1u) * (uint32_t)L->unit_x) : 0.0f;
        const float ry = ny > 0u ? (float)((ny - 1u) * (uint32_t)L->unit_y) : 0.0f;
        float ox_ = px - qx, oy_ = py - qy;
        ox_ = qx - (px + rx) > ox_ ? qx - (px + rx) : ox_;
        oy_ = qy - (py + ry) > oy_ ? qy - (py + ry) : oy_;
        const float gx = ((ox_ > 0.0f ? ox_ : 0.0f) + 4.0f) * K->ux;
        const float gy = ((oy_ > 0.0f ? oy_ : 0.0f) + 4.0f) * K->uy;
        const float gx2 = gx * gx, gy2 = gy * gy;
        pg_near_queue(boxes, c, b, (qg_handle)(v & PG_MAX_HANDLES), 0.999f * (ex2 + ey2), 1.001f * (gx2 + gy2));
    }
}

/// The point's fixed-point coordinates in double (no clamp, no overflow),
/// for the cell bounds.
typedef struct pg_near_at {
    double qx, qy;
    double padq_x, padq_y;
    bool flat;            ///< the float copies below hold (qx, qy small, pad finite)
    float fx, fy;         ///< qx, qy in float
    int32_t m;            ///< the margins a cell's points may use: PG_M, or 0 while the level is snug
    float span_x, span_y; ///< a cell's points and boxes reach past its min: PG_Q + 2 m + pad + 2 quanta
    float ux, uy;         ///< world units per quantum
} pg_near_at;

/// Squared lower bound of the distance from the point to any box cell
/// (cx, cy) lists: its points lie in the cell widened by the margins (and
/// past the world's edge for border cells, which take clamped points), its
/// boxes reach pad further up; three quanta and a thousandth short for
/// rounding.
static float pg_cell_bound(const pg_level *L, const pg_near_at *a, int32_t cx, int32_t cy)
{
    if (a->flat && cx > 0 && cy > 0 && cx < L->cols - 1 && cy < L->rows - 1) {
        // An interior cell near a point float keeps in quanta: in float.
        const float lo_x = (float)((cx << PG_QBITS) - a->m - 1), lo_y = (float)((cy << PG_QBITS) - a->m - 1);
        float gx = lo_x - a->fx, gy = lo_y - a->fy;
        const float hx = a->fx - (lo_x + a->span_x), hy = a->fy - (lo_y + a->span_y);
        gx = (hx > gx ? hx : gx) - 3.0f;
        gy = (hy > gy ? hy : gy) - 3.0f;
        gx = gx > 0.0f ? gx * a->ux : 0.0f;
        gy = gy > 0.0f ? gy * a->uy : 0.0f;
        const float gx2 = gx * gx, gy2 = gy * gy;
        return 0.999f * (gx2 + gy2);
    }
    const double lo_x = cx == 0 ? -INFINITY : (double)cx * PG_Q - a->m - 1.0;
    const double hi_x = cx == L->cols - 1 ? INFINITY : (double)cx * PG_Q + PG_Q + a->m + a->padq_x + 1.0;
    const double lo_y = cy == 0 ? -INFINITY : (double)cy * PG_Q - a->m - 1.0;
    const double hi_y = cy == L->rows - 1 ? INFINITY : (double)cy * PG_Q + PG_Q + a->m + a->padq_y + 1.0;
    double gx = lo_x - a->qx, gy = lo_y - a->qy;
    const double fx = a->qx - hi_x, fy = a->qy - hi_y;
    gx = (fx > gx ? fx : gx) - 3.0;
    gy = (fy > gy ? fy : gy) - 3.0;
    gx = gx > 0.0 ? gx / L->sx : 0.0;
    gy = gy > 0.0 ? gy / L->sy : 0.0;
    // The formula rounds each square and their sum, to float: a thousandth
    // covers that where they are normal, but a subnormal rounds by up to
    // half of 2^-149 whatever its size (two squares that round to 0 alone
    // sum past 0 in double), so the bound is also 2^-147 short: three such
    // roundings and the one to float here. It may then be negative, which
    // prunes nothing, as 0 does.
    const double d2 = 0.999 * (gx * gx + gy * gy) - 0x1p-147;
    return d2 < (double)FLT_MAX ? (float)d2 : FLT_MAX;
}

/// The smallest pg_cell_bound over ring r around (pcx, pcy): each side's
/// cell nearest the point's row or column.
static float pg_ring_bound(const pg_level *L, const pg_near_at *a, int32_t pcx, int32_t pcy, int32_t r)
{
    float m = INFINITY, d;
    if (r == 0)
        return 0.0f;
    if (pcx + r < L->cols && (d = pg_cell_bound(L, a, pcx + r, pcy)) < m)
        m = d;
    if (pcx - r >= 0 && (d = pg_cell_bound(L, a, pcx - r, pcy)) < m)
        m = d;
    if (pcy + r < L->rows && (d = pg_cell_bound(L, a, pcx, pcy + r)) < m)
        m = d;
    if (pcy - r >= 0 && (d = pg_cell_bound(L, a, pcx, pcy - r)) < m)
        m = d;
    return m;
}

/// One cell of a ring: skipped whole when its bound is past the heap's.
static inline void pg_near_visit(const pg_level *L, const qg_rect *boxes, qg_near *c, pg_near_batch *b,
                                 const pg_near_at *a, const pg_near_k *K, int32_t cx, int32_t cy, bool near_world)
{
    const float bound = qg_near_bound(c), limit = b->limit;
    if (pg_cell_bound(L, a, cx, cy) > (bound < limit ? bound : limit))
        return;
    pg_near_cell(L, boxes, c, b, K, cx, cy, near_world && cx > 0 && cx < L->cols - 1 && cy > 0 && cy < L->rows - 1);
}

/// Squared gap, in world units, from the point's quantum coordinate q to
/// the cell side [lo, lo + span] on one axis, three quanta short (the flat
/// form of pg_cell_bound, one axis at a time).
static inline float pg_near_gap2(float lo, float q, float span, float u)
{
    float g = lo - q;
    const float h = q - (lo + span);
    g = (h > g ? h : g) - 3.0f;
    g = g > 0.0f ? g * u : 0.0f;
    return g * g;
}

/// Prefetches rings 0..r0 around (pcx, pcy): every row's starts, then
/// every row's slots, so their cache misses overlap.
static void pg_near_prefetch(const pg_level *L, int32_t pcx, int32_t pcy, int32_t r0)
{
    const int32_t y0 = pcy - r0 < 0 ? 0 : pcy - r0, y1 = pcy + r0 < L->rows ? pcy + r0 : L->rows - 1;
    const int32_t x0 = pcx - r0 < 0 ? 0 : pcx - r0, x1 = pcx + r0 < L->cols ? pcx + r0 : L->cols - 1;
    for (int32_t cy = y0; cy <= y1; ++cy) {
        PG_PREFETCH(&L->start[cy * L->cols + x0]);
        PG_PREFETCH(&L->start[cy * L->cols + x1 + 1]);
    }
    for (int32_t cy = y0; cy <= y1; ++cy) {
        const int32_t s0 = L->start[cy * L->cols + x0], s1 = L->start[cy * L->cols + x1 + 1];
        for (int32_t s = s0; s < s1; s += 16) {
            PG_PREFETCH(&L->order[s]);
            PG_PREFETCH(&L->sq[s]);
        }
    }
}

static void pg_near_level(const pg_level *L, const qg_rect *boxes, qg_near *c, bool wide)
{
    const pg_point p = pg_point_of(L, c->x, c->y);
    const int32_t pcx = p.x >> PG_QBITS, pcy = p.y >> PG_QBITS;
    pg_near_at a = {((double)c->x - L->ox) * L->sx, ((double)c->y - L->oy) * L->sy,
                    (double)L->pad * L->sx, (double)L->pad * L->sy, false, 0, 0, 0, 0, 0, 1.0f / L->sx, 1.0f / L->sy};
    // The per-element prefilter works in float quanta: only where float
    // keeps them (and the pad is finite).
    const float qx = (float)a.qx, qy = (float)a.qy;
    const bool near_world = fabs(a.qx) < 0x1p23 && fabs(a.qy) < 0x1p23 && L->fresh && a.padq_x < 4096.0 &&
                            a.padq_y < 4096.0;
    a.flat = fabs(a.qx) < 0x1p23 && fabs(a.qy) < 0x1p23 && a.padq_x < 4096.0 && a.padq_y < 4096.0;
    a.fx = qx;
    a.fy = qy;
    // A snug level's points lie in their cells proper: the cells' bounds
    // leave the margins out (on `knn`, ring 1 then skips about half its
    // cells).
    a.m = L->fresh && L->snug ? 0 : PG_M;
    a.span_x = (float)(PG_Q + 2 * a.m + 2 + a.padq_x);
    a.span_y = (float)(PG_Q + 2 * a.m + 2 + a.padq_y);
    int32_t far = pcx;
    if (L->cols - 1 - pcx > far)
        far = L->cols - 1 - pcx;
    if (pcy > far)
        far = pcy;
    if (L->rows - 1 - pcy > far)
        far = L->rows - 1 - pcy;
    pg_near_k K;
    K.qx = qx;
    K.qy = qy;
    K.padq_x = L->pad * L->sx;
    K.padq_y = L->pad * L->sy;
    K.ux = 1.0f / L->sx;
    K.uy = 1.0f / L->sy;
    K.unitf_x = (float)L->unit_x;
    K.unitf_y = (float)L->unit_y;
    K.wide = wide;
#if defined(QV_HAVE)
    K.vqx = qv_splat(qx);
    K.vqy = qv_splat(qy);
    K.unit_x = qv_splat((float)L->unit_x);
    K.unit_y = qv_splat((float)L->unit_y);
    K.vpadx = qv_splat(K.padq_x + 1.0f);
    K.vpady = qv_splat(K.padq_y + 1.0f);
    K.vux = qv_splat(K.ux);
    K.vuy = qv_splat(K.uy);
#endif
    pg_near_batch b;
    b.n = 0;
    b.ntop = 0;
    b.limit = INFINITY;
    // Rings out from the point's cell while a ring's bound is within the
    // heap's; the rings expected to hold about 2k elements at the level's
    // mean density are prefetched first.
    const double per_cell = (double)L->count / ((double)L->cols * L->rows);
    const double side = sqrt(2.0 * c->k / (per_cell > 1e-9 ? per_cell : 1e-9));
    int32_t r0 = (int32_t)((side - 1.0) / 2.0 + 0.5);
    r0 = r0 < 1 ? 1 : r0 > 6 ? 6 : r0;
    r0 = r0 > far ? far : r0;
    pg_near_prefetch(L, pcx, pcy, r0);
    int32_t reach = far; // rings the search went out to
    for (int32_t r = 0; r <= far; ++r) {
        if (r != 1) // rings 0 and 1 are read as one
            pg_near_flush(boxes, c, &b);
        // The queued candidates' limit prunes as the heap's bound does (the
        // queue is tested before the search ends).
        const float bound = qg_near_bound(c), limit = b.limit;
        if (pg_ring_bound(L, &a, pcx, pcy, r) > (bound < limit ? bound : limit)) {
            reach = r - 1;
            break;
        }
        if (r == 1) {
            // Ring 1 nearest cell first: once a cell's bound passes the
            // limit the queued candidates set, so do the rest.
            float cb[8];
            int32_t cc[8], m = 0;
            // Inside the interior, a cell's bound is the sum of one gap per
            // axis: three per axis instead of two per cell.
            const bool inner = a.flat && pcx > 1 && pcy > 1 && pcx < L->cols - 2 && pcy < L->rows - 2;
            float gx2[3] = {0, 0, 0}, gy2[3] = {0, 0, 0};
            if (inner)
                for (int32_t i = 0; i < 3; ++i) {
                    gx2[i] = pg_near_gap2((float)(((pcx + i - 1) << PG_QBITS) - a.m - 1), a.fx, a.span_x, a.ux);
                    gy2[i] = pg_near_gap2((float)(((pcy + i - 1) << PG_QBITS) - a.m - 1), a.fy, a.span_y, a.uy);
                }
            for (int32_t dy = -1; dy <= 1; ++dy)
                for (int32_t dx = -1; dx <= 1; ++dx) {
                    const int32_t cx = pcx + dx, cy = pcy + dy;
                    if ((dx | dy) == 0 || cx < 0 || cy < 0 || cx >= L->cols || cy >= L->rows)
                        continue;
                    const float d = inner ? 0.999f * (gx2[dx + 1] + gy2[dy + 1]) : pg_cell_bound(L, &a, cx, cy);
                    int32_t j = m++;
                    for (; j > 0 && cb[j - 1] > d; --j) {
                        cb[j] = cb[j - 1];
                        cc[j] = cc[j - 1];
                    }
                    cb[j] = d;
                    cc[j] = (dy + 1) * 3 + dx + 1;
                }
            for (int32_t i = 0; i < m; ++i) {
                const float hb = qg_near_bound(c), lim = b.limit;
                if (cb[i] > (hb < lim ? hb : lim))
                    break;
                const int32_t cx = pcx + cc[i] % 3 - 1, cy = pcy + cc[i] / 3 - 1;
                pg_near_cell(L, boxes, c, &b, &K, cx, cy,
                             near_world && cx > 0 && cx < L->cols - 1 && cy > 0 && cy < L->rows - 1);
            }
            continue;
        }
        const int32_t y0 = pcy - r, y1 = pcy + r, x0 = pcx - r, x1 = pcx + r;
        const int32_t cy_lo = y0 < 0 ? 0 : y0, cy_hi = y1 < L->rows ? y1 : L->rows - 1;
        const int32_t cx_lo = x0 < 0 ? 0 : x0, cx_hi = x1 < L->cols ? x1 : L->cols - 1;
        for (int32_t cy = cy_lo; cy <= cy_hi; ++cy) {
            if (cy == y0 || cy == y1) { // the ring's top or bottom: every cell
                for (int32_t cx = cx_lo; cx <= cx_hi; ++cx)
                    pg_near_visit(L, boxes, c, &b, &a, &K, cx, cy, near_world);
                continue;
            }
            if (x0 >= 0) // its sides: two cells
                pg_near_visit(L, boxes, c, &b, &a, &K, x0, cy, near_world);
            if (x1 < L->cols && x1 != x0)
                pg_near_visit(L, boxes, c, &b, &a, &K, x1, cy, near_world);
        }
    }
    pg_near_flush(boxes, c, &b);
    if (L->tail == 0)
        return;
    // Tail elements: rows within the rings searched (the bound only fell
    // since; a tail point lies in its own cell, inside any ring bound),
    // plus one each way for safety.
    const int32_t ty0 = pcy - reach - 1 < 0 ? 0 : pcy - reach - 1;
    const int32_t ty1 = pcy + reach + 1 >= L->rows ? L->rows - 1 : pcy + reach + 1;
    const int32_t tx0 = pcx - reach - 1 < 0 ? 0 : pcx - reach - 1;
    const int32_t tx1 = pcx + reach + 1 >= L->cols ? L->cols - 1 : pcx + reach + 1;
    for (int32_t row = ty0; row <= ty1; ++row)
        for (uint32_t t = L->tail_head[row]; t != PG_TAIL_END;) {
            const int32_t s = L->listed + (int32_t)t;
            const qg_handle h = pg_order(L, s);
            t = L->sq[s];
            if (h >= 0 && pg_tail_in_cols(L, s, tx0, tx1))
                qg_near_offer(c, h, qg_point_box_d2_fast(boxes[h], c->x, c->y));
        }
}

int32_t qg_pg_nearest(const qg_index *index, float x, float y, int32_t k, float max_distance2, qg_handle *handles,
                      float *distances2)
{
    (void)distances2; // qg_nearest fills them from the boxes
    const point_grid *g = (const point_grid *)index;
    qg_near c;
    qg_near_start(&c, index, x, y, k, max_distance2, handles);
    c.once = true; // every element is listed once
    for (int32_t l = 0; l < PG_LEVELS; ++l)
        if (g->level[l].count > 0)
            pg_near_level(&g->level[l], index->boxes, &c, g->wide);
    return qg_near_finish(&c);
}
