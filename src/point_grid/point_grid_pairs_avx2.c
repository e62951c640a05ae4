// SPDX-License-Identifier: MIT
// QG_POINT_GRID, the AVX2 pair kernels, chosen at run time (qg_create asks
// the processor): the pairs of a cell with its neighbours and one row of a
// cross-level search, sixteen slots per compare. point_grid_pairs.c has the scalar
// versions and calls these on a fresh snapshot.
#include "point_grid.h"

#if defined(PG_HAVE_AVX2)
/// Chunks of sixteen slots one cell's AVX2 compare can hold.
#define PG_WIDE_CHUNKS 12

/// The lanes of one cell's neighbour ranges, in this cell's coordinates:
/// per chunk of sixteen slots the min corners (x, y) and upper bounds of the
/// max corners (xh, yh). In memory rather than registers (there are more
/// than sixteen vectors), which also lets the candidate test read single
/// lanes.
typedef struct pg_lanes {
    _Alignas(32) int16_t lx[PG_WIDE_CHUNKS * 16];
    _Alignas(32) int16_t ly[PG_WIDE_CHUNKS * 16];
    _Alignas(32) int16_t lxh[PG_WIDE_CHUNKS * 16];
    _Alignas(32) int16_t lyh[PG_WIDE_CHUNKS * 16];
    int32_t slot[PG_WIDE_CHUNKS]; ///< first slot of each chunk
} pg_lanes;

/// The lanes of chunk k that passed the compare with element j (slot
/// s0 + j, whose own corners are lane j: the cell's slots lead range 0
/// unshifted): each a candidate, reported at once when the size bytes
/// prove the overlap, queued for the exact test otherwise. Out of line, so
/// the compare loop, which rarely gets here, keeps its registers.
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static bool pg_wide_hits(const pg_level *Lv, pg_batch *bt, const pg_lanes *L, int32_t s0, int32_t j, int32_t k,
                         uint32_t mask, qg_pair_fn *fn, void *user)
{
    const qg_handle a = pg_order(Lv, s0 + j);
    if (a < 0)
        return true;
    const int32_t alx = L->lx[j], aly = L->ly[j], ahx = L->lxh[j], ahy = L->lyh[j];
    const int32_t ux1 = Lv->unit_x, uy1 = Lv->unit_y;
    while (mask != 0) {
        const int32_t i = 16 * k + (__builtin_ctz(mask) >> 1);
        mask &= mask - 1u;
        mask &= mask - 1u; // two bits per 16-bit lane
        const qg_handle b = pg_order(Lv, L->slot[k] + (i & 15));
        if (b < 0)
            continue;
        // The size byte also bounds each max corner from below (pg_size
        // rounds up by less than a unit): when each min corner maps below
        // the other's lowest possible max corner, the boxes overlap without
        // reading them (a mapped value strictly below another comes from a
        // strictly smaller float, the mapping being monotonic). Four
        // candidates in five at the agents workload.
        const bool sure =
            (L->lx[i] + ux1 <= ahx) & (alx + ux1 <= L->lxh[i]) & (L->ly[i] + uy1 <= ahy) & (aly + uy1 <= L->lyh[i]);
        if (!pg_hit(bt, a, b, sure, fn, user))
            return false;
    }
    return true;
}

/// Element j of the cell against the chunk (x, xh, y, yh) of lanes, those
/// in `keep`: two boxes can overlap only if each one's min corner is at or
/// below the other's max corner, on both axes; the size byte bounds the
/// max corners from above, so the test keeps every overlapping pair and
/// lets few others through. False when the callback asked to stop.
__attribute__((target("avx2"))) static inline bool pg_wide_test(const pg_level *Lv, pg_batch *bt, const pg_lanes *L,
                                                                 int32_t s0, int32_t j, int32_t k, __m256i x,
                                                                 __m256i xh, __m256i y, __m256i yh, uint32_t keep,
                                                                 qg_pair_fn *fn, void *user)
{
    const __m256i out =
        _mm256_or_si256(_mm256_or_si256(_mm256_cmpgt_epi16(x, _mm256_set1_epi16(L->lxh[j])),
                                        _mm256_cmpgt_epi16(_mm256_set1_epi16(L->lx[j]), xh)),
                        _mm256_or_si256(_mm256_cmpgt_epi16(y, _mm256_set1_epi16(L->lyh[j])),
                                        _mm256_cmpgt_epi16(_mm256_set1_epi16(L->ly[j]), yh)));
    const uint32_t mask = ~(uint32_t)_mm256_movemask_epi8(out) & keep;
    return mask == 0 || pg_wide_hits(Lv, bt, L, s0, j, k, mask, fn, user);
}

/// pg_pairs_cell on a fresh snapshot with AVX2: the points of the
/// neighbour ranges are loaded sixteen at a time, straight from sq (which
/// has PG_PAD slots of slack, so a load past a range stays in the array;
/// the lanes past it are masked off). The ranges are merged where they are
/// contiguous in the snapshot (the cell's own slots with the next cell's,
/// the three cells below), each lane moved to this cell's origin by the
/// cell its slot falls in, once per cell; then, chunk by chunk, each element
/// of the cell is compared with its sixteen points. Chunk-major order keeps
/// the chunk in registers and costs an element four broadcasts per chunk;
/// element-major order cost a quarter more instructions (callgrind, 1M
/// agents), most of them register shuffling per element. False when the
/// cell needs more chunks than fit (the caller falls back to
/// pg_pairs_cell).
__attribute__((target("avx2"))) bool qg_pg_pairs_cell_wide(const pg_level *Lv, pg_batch *bt, int32_t cx,
                                                                int32_t cy, qg_pair_fn *fn, void *user, bool *stop)
{
    const int32_t c = cy * Lv->cols + cx;
    const int32_t *start = Lv->start;
    const int32_t s0 = start[c], s1 = start[c + 1];
    if (s0 == s1)
        return true;
    // Range 0: this cell and the next one of the row; range 1: the cells
    // below, columns bx0..bx1. b1, b2: where the second and third cell of
    // a range begin (INT32_MAX when there is none).
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
    pg_lanes L;
    uint32_t lanes[PG_WIDE_CHUNKS]; // the live lanes of each chunk, two bits each
    int32_t nc = 0, nc0 = 0; // chunks in all, and of range 0
    const __m256i low_byte = _mm256_set1_epi16(0xFF), q = _mm256_set1_epi16(PG_Q);
    const __m256i lane = _mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m256i nib = _mm256_set1_epi16(0xF);
    const __m256i ux = _mm256_set1_epi16((int16_t)Lv->unit_x), uy = _mm256_set1_epi16((int16_t)Lv->unit_y);
    for (int32_t r = 0; r < nr; ++r) {
        for (int32_t t = lo[r]; t < hi[r]; t += 16) {
            if (nc == PG_WIDE_CHUNKS)
                return false;
            const __m256i v = _mm256_loadu_si256((const __m256i *)(Lv->sq + t));
            // Slots relative to t, against the cell boundaries (clamped so
            // they fit 16 bits; a far boundary is past every lane).
            const int32_t d1 = b1[r] - t < 32 ? b1[r] - t : 32, d2 = b2[r] - t < 32 ? b2[r] - t : 32;
            const __m256i m1 = _mm256_cmpgt_epi16(lane, _mm256_set1_epi16((int16_t)(d1 - 1)));
            const __m256i m2 = _mm256_cmpgt_epi16(lane, _mm256_set1_epi16((int16_t)(d2 - 1)));
            const __m256i sx = _mm256_add_epi16(_mm256_set1_epi16((int16_t)sh0[r]),
                                                _mm256_add_epi16(_mm256_and_si256(m1, q), _mm256_and_si256(m2, q)));
            const __m256i vx = _mm256_add_epi16(_mm256_and_si256(v, low_byte), sx);
            const __m256i vy = _mm256_add_epi16(_mm256_srli_epi16(v, 8), _mm256_set1_epi16((int16_t)shy[r]));
            // The max corners' upper bounds, from the size nibbles.
            // Packing the size bytes of 2 x 8 slots to 16 lanes interleaves
            // the 128-bit halves; the permute puts them back in slot order.
            const __m256i z = _mm256_permute4x64_epi64(
                _mm256_packus_epi32(_mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(Lv->order + t)), 24),
                                    _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(Lv->order + t + 8)), 24)),
                0xD8);
            _mm256_store_si256((__m256i *)(L.lx + 16 * nc), vx);
            _mm256_store_si256((__m256i *)(L.ly + 16 * nc), vy);
            _mm256_store_si256((__m256i *)(L.lxh + 16 * nc),
                               _mm256_add_epi16(vx, _mm256_mullo_epi16(_mm256_and_si256(z, nib), ux)));
            _mm256_store_si256((__m256i *)(L.lyh + 16 * nc),
                               _mm256_add_epi16(vy, _mm256_mullo_epi16(_mm256_srli_epi16(z, 4), uy)));
            L.slot[nc] = t;
            lanes[nc] = hi[r] - t >= 16 ? 0xFFFFFFFFu : (uint32_t)((1ull << (2 * (hi[r] - t))) - 1u);
            nc++;
        }
        if (r == 0)
            nc0 = nc;
    }
    // Chunk by chunk, each element of the cell against its lanes: the
    // chunk's vectors stay in registers and an element costs four
    // broadcasts and a compare. Range 0 pairs an element only with the
    // slots after it (pairs within a row are found from their earlier
    // slot): the elements of earlier chunks see all its lanes, those of
    // this chunk the lanes after their own, those of later chunks none.
    const int32_t n = s1 - s0;
    for (int32_t k = 0; k < nc; ++k) {
        const __m256i x = _mm256_load_si256((const __m256i *)(L.lx + 16 * k));
        const __m256i xh = _mm256_load_si256((const __m256i *)(L.lxh + 16 * k));
        const __m256i y = _mm256_load_si256((const __m256i *)(L.ly + 16 * k));
        const __m256i yh = _mm256_load_si256((const __m256i *)(L.lyh + 16 * k));
        const uint32_t keep = lanes[k];
        int32_t before = n;
        if (k < nc0) {
            before = 16 * k < n ? 16 * k : n;
            const int32_t own = 16 * k + 16 < n ? 16 * k + 16 : n;
            for (int32_t j = before; j < own; ++j) {
                const uint32_t later = (uint32_t)(0xFFFFFFFFull << (2 * ((j & 15) + 1)));
                if (!pg_wide_test(Lv, bt, &L, s0, j, k, x, xh, y, yh, keep & later, fn, user)) {
                    *stop = true;
                    return true;
                }
            }
        }
        for (int32_t j = 0; j < before; ++j) {
            if (!pg_wide_test(Lv, bt, &L, s0, j, k, x, xh, y, yh, keep, fn, user)) {
                *stop = true;
                return true;
            }
        }
    }
    return true;
}
#endif


#if defined(PG_HAVE_AVX2)
/// Cells cx0..cx1 of row cy for pg_cross on a fresh snapshot, sixteen
/// slots per compare. The cells of a row are one run of the snapshot, so the
/// run is loaded straight through; each lane is moved to cell cx0's origin
/// by the cells that begin before its slot. The lanes hold points relative
/// to that origin and the max corners' bounds from the size nibbles; b's
/// mapped corners, moved there and clamped to what 16 bits hold, decide each
/// lane as in pg_cross. False when the callback asked to stop.
__attribute__((target("avx2"))) bool qg_pg_cross_row_wide(const pg_level *L, pg_batch *bt, qg_handle b,
                                                               int32_t cx0, int32_t cx1, int32_t cy, pg_point bl,
                                                               pg_point bh, qg_pair_fn *fn, void *user)
{
    const int32_t *start = L->start + (int64_t)cy * L->cols;
    const int32_t s0 = start[cx0], s1 = start[cx1 + 1];
    const int32_t ox = (cx0 << PG_QBITS) - PG_M, oy = (cy << PG_QBITS) - PG_M;
    const __m256i lim = _mm256_set1_epi32(0x3FFF), nlim = _mm256_set1_epi32(-0x3FFF);
    // b's corners relative to the origin, clamped to +-0x3FFF (lanes stay
    // far inside that range: a row run is at most a few cells).
    const __m256i rel = _mm256_min_epi32(
        _mm256_max_epi32(_mm256_setr_epi32(bl.x - ox, bl.y - oy, bh.x - ox, bh.y - oy, bl.x - ox + L->unit_x,
                                           bl.y - oy + L->unit_y, 0, 0),
                         nlim),
        lim);
    int32_t r[8];
    _mm256_storeu_si256((__m256i *)r, rel);
    const __m256i blx = _mm256_set1_epi16((int16_t)r[0]), bly = _mm256_set1_epi16((int16_t)r[1]);
    const __m256i bhx = _mm256_set1_epi16((int16_t)r[2]), bhy = _mm256_set1_epi16((int16_t)r[3]);
    const __m256i blxu = _mm256_set1_epi16((int16_t)r[4]), blyu = _mm256_set1_epi16((int16_t)r[5]);
    const __m256i low_byte = _mm256_set1_epi16(0xFF), nib = _mm256_set1_epi16(0xF), q = _mm256_set1_epi16(PG_Q);
    const __m256i lane = _mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m256i ux = _mm256_set1_epi16((int16_t)L->unit_x), uy = _mm256_set1_epi16((int16_t)L->unit_y);
    int32_t cell = cx0; // the cell of slot t
    for (int32_t t = s0; t < s1; t += 16) {
        while (start[cell + 1] <= t)
            cell++;
        // Lanes past each later boundary within reach move one cell east.
        __m256i shift = _mm256_set1_epi16((int16_t)((cell - cx0) << PG_QBITS));
        for (int32_t c = cell + 1; c <= cx1 && start[c] - t < 16; ++c)
            shift = _mm256_add_epi16(
                shift, _mm256_and_si256(_mm256_cmpgt_epi16(lane, _mm256_set1_epi16((int16_t)(start[c] - t - 1))), q));
        const __m256i v = _mm256_loadu_si256((const __m256i *)(L->sq + t));
        const __m256i x = _mm256_add_epi16(_mm256_and_si256(v, low_byte), shift), y = _mm256_srli_epi16(v, 8);
        const __m256i z = _mm256_permute4x64_epi64(
            _mm256_packus_epi32(_mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(L->order + t)), 24),
                                _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(L->order + t + 8)), 24)),
            0xD8);
        const __m256i xh = _mm256_add_epi16(x, _mm256_mullo_epi16(_mm256_and_si256(z, nib), ux));
        const __m256i yh = _mm256_add_epi16(y, _mm256_mullo_epi16(_mm256_srli_epi16(z, 4), uy));
        const __m256i apart = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpgt_epi16(x, bhx), _mm256_cmpgt_epi16(y, bhy)),
            _mm256_or_si256(_mm256_cmpgt_epi16(blx, xh), _mm256_cmpgt_epi16(bly, yh)));
        const __m256i unsure = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpgt_epi16(x, _mm256_sub_epi16(bhx, _mm256_set1_epi16(1))),
                            _mm256_cmpgt_epi16(y, _mm256_sub_epi16(bhy, _mm256_set1_epi16(1)))),
            _mm256_or_si256(_mm256_cmpgt_epi16(blxu, xh), _mm256_cmpgt_epi16(blyu, yh)));
        const uint32_t live = s1 - t >= 16 ? 0xFFFFFFFFu : (uint32_t)((1ull << (2 * (s1 - t))) - 1u);
        uint32_t maybe = ~(uint32_t)_mm256_movemask_epi8(apart) & live;
        const uint32_t doubt = (uint32_t)_mm256_movemask_epi8(unsure);
        while (maybe != 0) {
            const int32_t i = __builtin_ctz(maybe) >> 1;
            maybe &= maybe - 1u;
            maybe &= maybe - 1u; // two bits per 16-bit lane
            const qg_handle a = pg_order(L, t + i);
            if (a < 0)
                continue;
            if (!pg_hit(bt, a, b, !(doubt >> (2 * i) & 1u), fn, user))
                return false;
        }
    }
    return true;
}
#endif


#if !defined(PG_HAVE_AVX2)
typedef int qg_pg_no_avx2; // ISO C wants a translation unit to declare something
#endif
