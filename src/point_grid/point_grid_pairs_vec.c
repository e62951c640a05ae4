// SPDX-License-Identifier: MIT
// QG_POINT_GRID, the portable pair kernels: the cell pairs and the cross-level
// row search of point_grid_pairs_avx2.c, written once with vector extensions (vec.h),
// so the same source runs SSE2 on any x86-64, NEON on aarch64 and SIMD128
// on WebAssembly. A chunk is sixteen slots as in the AVX2 form (the same
// PG_PAD slack, the same lane layout in memory), held as two eight-lane
// halves; point_grid_pairs.c calls these on a fresh snapshot when the AVX2 form is not
// chosen.
#include "point_grid.h"

#if defined(QV_HAVE)
/// Chunks of sixteen slots one cell's compare can hold.
#define PG_VEC_CHUNKS 12

/// The lanes of one cell's neighbour ranges, in this cell's coordinates,
/// in pairs: per slot its min corner and its max corner's upper bound
/// negated, (x, -xh) and (y, -yh), so one 32-bit broadcast of an element's
/// (xh, -x) tests both sides of an axis in one compare (lane > broadcast:
/// apart). Half the broadcasts of separate lanes, which cost a 128-bit
/// target more than its compares. In memory, so the candidate test reads
/// single lanes; ex, ey: the cell's own elements' broadcasts.
typedef struct pg_vlanes {
    _Alignas(16) int16_t px[PG_VEC_CHUNKS * 32];
    _Alignas(16) int16_t py[PG_VEC_CHUNKS * 32];
    _Alignas(16) int16_t ex[PG_VEC_CHUNKS * 32];
    _Alignas(16) int16_t ey[PG_VEC_CHUNKS * 32];
    int32_t slot[PG_VEC_CHUNKS]; ///< first slot of each chunk
} pg_vlanes;

/// The lanes of chunk k that passed the compare with element j (slot
/// s0 + j, lane j: the cell's slots lead range 0 unshifted), as in
/// point_grid_pairs_avx2.c's pg_wide_hits: reported at once when the size bytes prove
/// the overlap, queued for the exact test otherwise. Out of line so the
/// compare loop keeps its registers.
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static bool pg_vec_hits(const pg_level *Lv, pg_batch *bt, const pg_vlanes *L, int32_t s0, int32_t j, int32_t k,
                        uint64_t mask, qg_pair_fn *fn, void *user)
{
    const qg_handle a = pg_order(Lv, s0 + j);
    if (a < 0)
        return true;
    const int32_t alx = L->px[2 * j], aly = L->py[2 * j], ahx = -L->px[2 * j + 1], ahy = -L->py[2 * j + 1];
    const int32_t ux1 = Lv->unit_x, uy1 = Lv->unit_y;
    while (mask != 0) {
        const int32_t i = 16 * k + qv_next(&mask);
        const qg_handle b = pg_order(Lv, L->slot[k] + (i & 15));
        if (b < 0)
            continue;
        const int32_t blx = L->px[2 * i], bly = L->py[2 * i], bhx = -L->px[2 * i + 1], bhy = -L->py[2 * i + 1];
        const bool sure = (blx + ux1 <= ahx) & (alx + ux1 <= bhx) & (bly + uy1 <= ahy) & (aly + uy1 <= bhy);
        if (!pg_hit(bt, a, b, sure, fn, user))
            return false;
    }
    return true;
}

/// The size nibbles of slots t..t+7 as lanes.
static inline qv_i16 pg_vec_sizes(const uint32_t *order)
{
    return qv_narrow(qv_load_u32(order) >> 24, qv_load_u32(order + 4) >> 24);
}

/// Lanes a and b of eight slots interleaved into the pairs of p.
static inline void pg_vec_store_pairs(int16_t *p, qv_i16 a, qv_i16 b)
{
    qv_store_i16(p, qv_zip_lo(a, b));
    qv_store_i16(p + 8, qv_zip_hi(a, b));
}

static inline uint32_t pg_vec_pair(const int16_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/// The lanes of a chunk (pairs x0..x3, y0..y3) that element j of the cell
/// may overlap: one compare per axis and four slots.
static inline uint64_t pg_vec_test(const pg_vlanes *L, int32_t j, qv_i16 x0, qv_i16 x1, qv_i16 x2, qv_i16 x3,
                                   qv_i16 y0, qv_i16 y1, qv_i16 y2, qv_i16 y3)
{
    const qv_i16 ax = (qv_i16)qv_set1_u32(pg_vec_pair(L->ex + 2 * j));
    const qv_i16 ay = (qv_i16)qv_set1_u32(pg_vec_pair(L->ey + 2 * j));
    return qv_zero32_mask4((qv_u32)((x0 > ax) | (y0 > ay)), (qv_u32)((x1 > ax) | (y1 > ay)),
                           (qv_u32)((x2 > ax) | (y2 > ay)), (qv_u32)((x3 > ax) | (y3 > ay)));
}

/// pg_pairs_cell on a fresh snapshot, sixteen slots per compare: the
/// method of point_grid_pairs_avx2.c's qg_pg_pairs_cell_wide (ranges merged where the
/// snapshot is contiguous, lanes moved to this cell's origin once per cell,
/// then chunk by chunk each element of the cell against the chunk's
/// lanes). False when the cell needs more chunks than fit.
bool qg_pg_pairs_cell_vec(const pg_level *Lv, pg_batch *bt, int32_t cx, int32_t cy, qg_pair_fn *fn, void *user,
                          bool *stop)
{
    const int32_t c = cy * Lv->cols + cx;
    const int32_t *start = Lv->start;
    const int32_t s0 = start[c], s1 = start[c + 1];
    if (s0 == s1)
        return true;
    const int32_t bx0 = cx > 0 ? cx - 1 : 0, bx1 = cx + 1 < Lv->cols ? cx + 1 : cx;
    int32_t lo[2], hi[2], b1[2], b2[2], sh0[2], shy[2], nr = 0;
    lo[nr] = s0, hi[nr] = bx1 > cx ? start[c + 2] : s1, b1[nr] = s1, b2[nr] = INT32_MAX, sh0[nr] = 0, shy[nr++] = 0;
    if (cy > 0) {
        const int32_t b = c - Lv->cols + (bx0 - cx);
        lo[nr] = start[b], hi[nr] = start[b + (bx1 - bx0) + 1];
        b1[nr] = bx0 + 1 <= bx1 ? start[b + 1] : INT32_MAX;
        b2[nr] = bx0 + 2 <= bx1 ? start[b + 2] : INT32_MAX;
        sh0[nr] = (bx0 - cx) * PG_Q, shy[nr++] = -PG_Q;
    }
    pg_vlanes L;
    uint64_t lanes[PG_VEC_CHUNKS]; // the live lanes of each chunk
    int32_t nc = 0, nc0 = 0;
    const int32_t n = s1 - s0;
    const qv_i16 low_byte = qv_set1(0xFF), q = qv_set1(PG_Q), nib = qv_set1(0xF);
    const qv_i16 lane[2] = {{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}};
    const qv_i16 ux = qv_set1(Lv->unit_x), uy = qv_set1(Lv->unit_y);
    for (int32_t r = 0; r < nr; ++r) {
        for (int32_t t = lo[r]; t < hi[r]; t += 16) {
            if (nc == PG_VEC_CHUNKS)
                return false;
            const int32_t d1 = b1[r] - t < 32 ? b1[r] - t : 32, d2 = b2[r] - t < 32 ? b2[r] - t : 32;
            const qv_i16 m1 = qv_set1(d1 - 1), m2 = qv_set1(d2 - 1), sh = qv_set1(sh0[r]), sy = qv_set1(shy[r]);
            for (int h = 0; h < 2; ++h) {
                const qv_i16 v = qv_load_i16(Lv->sq + t + 8 * h);
                const qv_i16 sx = sh + (((qv_i16)(lane[h] > m1)) & q) + (((qv_i16)(lane[h] > m2)) & q);
                const qv_i16 vx = (v & low_byte) + sx;
                const qv_i16 vy = (qv_i16)((qv_u16)v >> 8) + sy;
                const qv_i16 z = pg_vec_sizes(Lv->order + t + 8 * h);
                const qv_i16 vxh = vx + (z & nib) * ux, vyh = vy + (z >> 4) * uy;
                const int32_t at = 32 * nc + 16 * h;
                pg_vec_store_pairs(L.px + at, vx, -vxh);
                pg_vec_store_pairs(L.py + at, vy, -vyh);
                if (r == 0 && t - s0 + 8 * h < n) {
                    pg_vec_store_pairs(L.ex + at, vxh, -vx);
                    pg_vec_store_pairs(L.ey + at, vyh, -vy);
                }
            }
            L.slot[nc] = t;
            lanes[nc] = qv_first(hi[r] - t);
            nc++;
        }
        if (r == 0)
            nc0 = nc;
    }
    // Chunk by chunk, each element of the cell against its lanes (see
    // point_grid_pairs_avx2.c): range 0 pairs an element only with the slots after it.
    for (int32_t k = 0; k < nc; ++k) {
        const int16_t *px = L.px + 32 * k, *py = L.py + 32 * k;
        const qv_i16 x0 = qv_load_i16(px), x1 = qv_load_i16(px + 8), x2 = qv_load_i16(px + 16),
                     x3 = qv_load_i16(px + 24);
        const qv_i16 y0 = qv_load_i16(py), y1 = qv_load_i16(py + 8), y2 = qv_load_i16(py + 16),
                     y3 = qv_load_i16(py + 24);
        const uint64_t keep = lanes[k];
        int32_t before = n, own = n;
        if (k < nc0) {
            before = 16 * k < n ? 16 * k : n;
            own = 16 * k + 16 < n ? 16 * k + 16 : n;
        }
        // This chunk's own elements against the lanes after theirs (the
        // mask of those shifts one lane per element), then the earlier
        // elements against all.
        uint64_t later = QV_ALL16 & ~qv_first(1);
        for (int32_t j = before; j < own; ++j, later <<= QV_LANE_BITS) {
            const uint64_t mask = pg_vec_test(&L, j, x0, x1, x2, x3, y0, y1, y2, y3) & keep & later;
            if (mask != 0 && !pg_vec_hits(Lv, bt, &L, s0, j, k, mask, fn, user)) {
                *stop = true;
                return true;
            }
        }
        for (int32_t j = 0; j < before; ++j) {
            const uint64_t mask = pg_vec_test(&L, j, x0, x1, x2, x3, y0, y1, y2, y3) & keep;
            if (mask != 0 && !pg_vec_hits(Lv, bt, &L, s0, j, k, mask, fn, user)) {
                *stop = true;
                return true;
            }
        }
    }
    return true;
}

/// Cells cx0..cx1 of row cy for pg_cross on a fresh snapshot, sixteen slots
/// per compare: point_grid_pairs_avx2.c's qg_pg_cross_row_wide in two halves. False
/// when the callback asked to stop.
bool qg_pg_cross_row_vec(const pg_level *L, pg_batch *bt, qg_handle b, int32_t cx0, int32_t cx1, int32_t cy,
                         pg_point bl, pg_point bh, qg_pair_fn *fn, void *user)
{
    const int32_t *start = L->start + (int64_t)cy * L->cols;
    const int32_t s0 = start[cx0], s1 = start[cx1 + 1];
    const int32_t ox = (cx0 << PG_QBITS) - PG_M, oy = (cy << PG_QBITS) - PG_M;
    // b's corners relative to the origin, clamped to +-0x3FFF (lanes stay
    // far inside that range: a row run is at most a few cells).
#define PG_CLAMP14(v) ((v) < -0x3FFF ? -0x3FFF : (v) > 0x3FFF ? 0x3FFF : (v))
    const qv_i16 blx = qv_set1(PG_CLAMP14(bl.x - ox)), bly = qv_set1(PG_CLAMP14(bl.y - oy));
    const qv_i16 bhx = qv_set1(PG_CLAMP14(bh.x - ox)), bhy = qv_set1(PG_CLAMP14(bh.y - oy));
    const qv_i16 blxu = qv_set1(PG_CLAMP14(bl.x - ox + L->unit_x)), blyu = qv_set1(PG_CLAMP14(bl.y - oy + L->unit_y));
#undef PG_CLAMP14
    const qv_i16 bhx1 = bhx - qv_set1(1), bhy1 = bhy - qv_set1(1);
    const qv_i16 low_byte = qv_set1(0xFF), nib = qv_set1(0xF), q = qv_set1(PG_Q);
    const qv_i16 lane[2] = {{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}};
    const qv_i16 ux = qv_set1(L->unit_x), uy = qv_set1(L->unit_y);
    int32_t cell = cx0; // the cell of slot t
    for (int32_t t = s0; t < s1; t += 16) {
        while (start[cell + 1] <= t)
            cell++;
        // Lanes past each later boundary within reach move one cell east.
        qv_i16 shift[2];
        shift[0] = shift[1] = qv_set1((cell - cx0) << PG_QBITS);
        for (int32_t c = cell + 1; c <= cx1 && start[c] - t < 16; ++c) {
            const qv_i16 d = qv_set1(start[c] - t - 1);
            shift[0] += (qv_i16)(lane[0] > d) & q;
            shift[1] += (qv_i16)(lane[1] > d) & q;
        }
        qv_i16 apart[2], unsure[2];
        for (int h = 0; h < 2; ++h) {
            const qv_i16 v = qv_load_i16(L->sq + t + 8 * h);
            const qv_i16 x = (v & low_byte) + shift[h], y = (qv_i16)((qv_u16)v >> 8);
            const qv_i16 z = pg_vec_sizes(L->order + t + 8 * h);
            const qv_i16 xh = x + (z & nib) * ux, yh = y + (z >> 4) * uy;
            apart[h] = (qv_i16)((x > bhx) | (y > bhy)) | (qv_i16)((blx > xh) | (bly > yh));
            unsure[h] = (qv_i16)((x > bhx1) | (y > bhy1)) | (qv_i16)((blxu > xh) | (blyu > yh));
        }
        uint64_t maybe = ~qv_mask2(apart[0], apart[1]) & qv_first(s1 - t);
        if (maybe == 0)
            continue;
        const uint64_t doubt = qv_mask2(unsure[0], unsure[1]);
        while (maybe != 0) {
            const int32_t i = qv_next(&maybe);
            const qg_handle a = pg_order(L, t + i);
            if (a < 0)
                continue;
            if (!pg_hit(bt, a, b, !(doubt >> (QV_LANE_BITS * i) & 1u), fn, user))
                return false;
        }
    }
    return true;
}
#else
typedef int qg_pg_no_vec; // ISO C wants a translation unit to declare something
#endif
