// SPDX-License-Identifier: MIT
// QG_POINT_GRID: the uniform upper-bound grid of "Dirty Trick: Uniform Sizes"
// (docs/kinds.md), in size levels, over a world that follows its elements.
//
// - Learning (tune.c): max_element_size = the 97th percentile of
//   its elements' larger sides plus a sixteenth (level 0 takes 97% of them;
//   the bench's hand tuning is the largest ordinary box, and a few 16x
//   larger go to coarser levels, which cost little), cells six of it; the
//   world keeps following the elements (point_grid_world.c). A re-tune rebuilds when
//   the percentile passes that bound (a bound under the boxes sends them to
//   level 1, 4x coarser: a cliff) or falls under half of it.
// Sizes: levels, not a limit.
// - config.max_element_size is the bound of level 0, the finest. Level k's
//   bound is 4^k times it, up to PG_LEVELS - 1, whose bound is infinite. A
//   box lives in the lowest level whose bound takes its width and height,
//   each level a point grid of its own (its cells 4^k times level 0's), so
//   a dragon among agents costs what an agent costs instead of widening
//   every agent's search to the dragon's size. 0 means "choose": twice
//   element_size, or with no element_size a 256th of the bounds.
// - The level of an element is a function of its box; `hb[h]` keeps it
//   (bits 4-6) beside the home-cell bits, so a rebuild finds a level's
//   elements by reading one byte per handle, not the boxes.
// - Pairs within a level come from that level's cell walk (below); pairs
//   across levels from each element of the coarser level searching the
//   finer levels with its own box, as a query: each pair once.
//
// Bounds: a hint.
// - Each level maps points into its own world. A rebuild (the counting
//   sort below) also measures the extent of the level's points; when they
//   spill out of the world, or fill only a corner of it, it takes a fixed
//   sample of the points, estimates how many elements would share a cell in
//   the current world and in one fitted to the sample's 1/256..255/256
//   range (widened by an eighth per side), and moves the world when the fit
//   halves that. Outliers past the fitted range clamp into its border cells
//   (a few; the fit ignores them rather than stretch every cell for them).
// - A fitted world may want more cells than the level holds. qg_cleanup
//   never allocates, so the rebuild fits what it has and records the want;
//   the next qg_insert or qg_move reserves it (failing cleanly with
//   QG_ERR_NOMEM), and the next qg_cleanup re-sorts into it. Cells beyond a
//   level's configured ones stay under two per element.
// - Coordinates map to cells through float arithmetic that is monotonic
//   even where it overflows or clamps, so any finite bounds work; extents
//   are computed in double.
//
// One level's layout:
// - An element is stored as one point, in exactly one cell, with no size
//   ("We don't have to store a size with each element"). The point is the
//   box's min corner rather than its centre: the corner is a coordinate the
//   box already has exactly, while a centre (min + max) / 2 rounds, and a
//   rounded point would make the widened search inexact. Widening the search
//   by the whole bound on the min side only is the same area as widening by
//   half the bound on both sides of the centre.
// - Points are fixed-point grid coordinates, PG_Q quanta per cell. The full
//   box stays in the base's cold box array; hot loops read it only for the
//   final exact test of the candidates the points let through.
// - A cell-sorted snapshot, because handles are spatially random and
//   anything read by handle is a cache miss per element when the grid is
//   walked in space order. `order` holds the handles cell by cell, `sq`
//   their points (offsets in the cell, a byte per axis) beside them; cell c
//   owns slots [start[c], start[c+1]). 6 bytes per element, 4 per cell. A
//   removed element leaves a tombstone until the next rebuild. Handles take
//   24 bits of `order` (the kind holds at most 16,777,215 elements,
//   QG_ERR_CAPACITY past that); the other byte is the box's mapped width and
//   height, a nibble each, rounded up: it lets the pair kernel test each min
//   corner against an upper bound of the other's max corner (at 1M agents:
//   232,217 candidates for 206,845 pairs, against 664,431 with points
//   alone), and prove most overlaps without reading a box.
// - A home cell is loose: it lists elements whose point lies within a margin
//   of PG_M quanta around it, so a move keeps the element's slot and writes
//   nothing but the base's box while the point stays there. Searches widen
//   by the margin; one cell is still wider than the pair reach plus both
//   margins, so partners are never two cells apart. `hb[h]` holds the home
//   cell's column and row modulo 4 (enough to tell the home from the point,
//   at most one cell away) and a tail flag.
// - The snapshot's points are exact until a listed element moves (`fresh`);
//   after that searches read each listed element's point from its box until
//   qg_cleanup refreshes or re-sorts.
// - The tail: elements inserted since the last re-sort, or moved past their
//   margin, sit after the snapshot in `order`, in one singly-linked list per
//   row (the row-based lists of part 2) linked through `sq`; the slot's top
//   byte holds the point's column (mod 256).
// - qg_cleanup, once a frame: while the tail and the tombstones are a sliver
//   (under 1/64 of the level) it refreshes the snapshot in place, a walk in
//   slot order with sequential writes and prefetched box reads (about 5.5 ms
//   at 1M agents, against 10-11 ms for the re-sort, whose scatter writes
//   every slot at random). Past the sliver it re-sorts (qg_pg_rebuild: a
//   counting sort of the level's handles by cell, in place, no allocation).
//   `order` keeps tail room (pg_tail_room), so the re-sort happens there and
//   not inside a qg_move that finds no slot.
// - Pairs walk the cells in order; each element is compared with the later
//   slots of its cell, the next cell of its row and the three cells of the
//   row below, sixteen points per AVX2 compare where the processor has it.
//   A pair of one row is found from its element in the earlier slot, a pair
//   across two rows from the upper row: every pair once, no visited set.
//   Candidates the size bytes cannot prove wait in a ring, their boxes
//   prefetched, for the exact test.
// - Memory per element: 16 (the base's box) + 4 (order) + 2 (sq) + 1 (hb),
//   plus 4 per cell and the tail room; qg_cleanup gives other spare capacity
//   back once the population is steady.
//
// Several cores (qg_pairs_parallel, qg_move_many, qg_cleanup_parallel):
// - Pairs: part p of P walks a band of each level's rows, the bands cut
//   where the cells' starts (a running count of listed elements) pass p/P
//   of the level (qg_pg_band_edge), so parts get equal elements, not equal
//   rows; a band may be empty. A pair of the walk is found from one row, so
//   bands find disjoint pairs; tails and the searches of coarser elements
//   in finer levels are split by slot ranges. The coarser levels' searches
//   scheduled into the lowest level's walk go to the part whose band holds
//   the base row after which the serial walk runs them (pg_sched_limit, which
//   rises with the row): consecutive runs of rows, each once. Every part
//   has its own candidate ring and flushes it; nothing is written.
// - Moves: the workers classify the batch (reading the index only): a move
//   that keeps its level and its home cell's margins (or its tail cell)
//   only stores the box. Then, serially, every reservation the other moves
//   can need (room in each level for the moves into it, the cells a re-fit
//   asked for) is made, so QG_ERR_NOMEM changes nothing; the workers store
//   the common moves' boxes (each writes its own handle's box, nothing
//   else); the levels' `fresh` is cleared once, serially; the rest (tail
//   and list changes, level changes) run serially in batch order through
//   the same code as qg_move, without allocating.
// - qg_cleanup_parallel: each level's refresh in bands of rows, one per
//   worker (each rewrites only its band's slots); the re-sorts and trims
//   stay serial (a counting sort across workers would need per-worker
//   counts, memory qg_cleanup may not take).
#ifndef QG_POINT_GRID_H
#define QG_POINT_GRID_H

#include "../kind.h"

// AVX2 is chosen at run time (qg_create asks the processor), so the library
// still runs on any x86-64; -DQV_SCALAR leaves it out with the rest.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(QV_SCALAR)
#include <immintrin.h>
#define PG_HAVE_AVX2 1
#endif
// The portable vector kernels (point_grid_pairs_vec.c, the cell mappings, the ray and
// nearest filters) where the platform has a 128-bit unit: the only ones off
// x86, the fallback from AVX2 on it.
#include "../vec.h"

/// Size levels; the last one takes any size.
#define PG_LEVELS 7
/// Quanta per cell on each axis.
#define PG_QBITS 7
#define PG_Q (1 << PG_QBITS)
/// The loose margin of a home cell, in quanta, on every side: a listed
/// element's point lies in [home - PG_M, home + PG_Q + PG_M) on both axes,
/// so its offset from home - PG_M fits a byte.
#define PG_M 32
#define PG_SPAN (PG_Q + 2 * PG_M)
/// Largest pair reach one cell supports: partners with points two cells
/// apart would need more than a cell minus both margins (63 quanta), and the
/// size test of the pair kernel may round a width up by a unit (at most 4
/// at this reach).
#define PG_MAX_REACH 56
/// Per axis at most this many cells (fixed-point coordinates stay below
/// 2^21, where float rounding in the mapping stays under half a quantum).
#define PG_MAX_SIDE 16384
/// At most this many cells in all (16 MiB of starts).
#define PG_MAX_CELLS (1 << 22)
/// At most this many cells when a level is made (qg_pg_level_init).
#define PG_START_CELLS (1 << 12)
/// hb: home column mod 4 in bits 0-1, home row mod 4 in bits 2-3, the level
/// in bits 4-6 (PG_HB_NONE: no level, a free handle), the tail flag.
#define PG_HB_HOME 0x0Fu
#define PG_HB_LEVEL 0x70u
#define PG_HB_NONE 0x70u
#define PG_HB_TAIL 0x80u
/// Tail links are 16-bit tail indices; this one ends a list.
#define PG_TAIL_END 0xFFFFu
/// Slots of slack at the end of order and sq, so the pair kernel can load
/// sixteen slots at a time past the end of a range.
#define PG_PAD 16
/// Candidate pairs queued before their boxes are tested (a power of two),
/// and how many queued candidates pass before the oldest one is tested.
#define PG_BATCH 64
#define PG_DELAY 48
/// Points a re-fit samples to compare worlds.
#define PG_SAMPLE 2048

#if defined(__GNUC__)
#define PG_PREFETCH(p) __builtin_prefetch(p)
#else
#define PG_PREFETCH(p) ((void)(p))
#endif

/// One size level: a point grid of its own.
typedef struct pg_level {
    int32_t *start; ///< per cell, plus one: the cell's first slot
    int32_t start_capacity;
    /// Per slot: handle (low 24 bits) in cell order, then the tail; the top
    /// byte is the box's width (low nibble) and height in units, rounded up.
    /// PG_PAD slots of slack at the end.
    uint32_t *order;
    int32_t order_capacity;
    uint16_t *sq; ///< per slot: offsets from home - PG_M (listed), next tail index (tail)
    int32_t sq_capacity;
    uint16_t *tail_head; ///< per row: first tail index, PG_TAIL_END if none
    int32_t tail_head_capacity;
    int32_t count;      ///< live elements of this level
    int32_t listed;     ///< slots of the snapshot: [0, listed)
    int32_t tail;       ///< tail slots used: [listed, listed + tail)
    int32_t tombstones; ///< dead slots in the snapshot and the tail
    bool live;          ///< start and tail_head hold a grid
    bool fresh;         ///< sq holds every listed element's current point
    /// Fresh from a re-sort: every listed point lies in its home cell
    /// proper, none in the margins (a refresh or a move ends it), so a
    /// search may bound a cell without them (nearest: a third of the cells).
    bool snug;
    bool refit;         ///< the next qg_cleanup re-sorts (more cells arrived)
    int32_t want_cells; ///< cells a re-fit asked for beyond start_capacity
    int32_t want_rows;  ///< rows of that world (tail_head's capacity)
    int64_t calm;       ///< border elements a re-fit chose to keep (qg_pg_border_crowded)
    int32_t fit_count;  ///< elements when pg_refit last sampled
    bool on_config;     ///< the world is the configured bounds (no re-fit moved it)
    int32_t config_cells; ///< cells of the configured bounds at this level's cell size
    int32_t cols, rows;
    int32_t gmax_x, gmax_y; ///< largest fixed-point coordinate: cols * PG_Q - 1
    float gmaxf_x, gmaxf_y; ///< the same as floats (exact: below 2^24)
    float ox, oy;           ///< world origin
    float sx, sy;           ///< quanta per world unit
    float hx, hy;           ///< half the origin, and
    float s2x, s2y;         ///< twice the scale: what pg_map computes with
    float cell;             ///< the cell size asked for (4^k times level 0's)
    float bound;            ///< largest width and height of this level
    float pad;              ///< bound, rounded up (see pg_widen)
    float near_x, near_y;   ///< half a cell in world units: a move this short keeps the home's neighbourhood
    int32_t reach_x, reach_y; ///< quanta two points of an overlapping pair can differ by, at most
    int32_t unit_x, unit_y;   ///< quanta per unit of the size byte
    /// Size nibble of a mapped width (x) or height (y) d, for d below
    /// 256 (larger ones count as 255): min(ceil(d / unit), 15), without a
    /// division per box.
    uint8_t size_x[256], size_y[256];
} pg_level;

typedef struct point_grid {
    qg_index base;
    uint8_t *hb; ///< per handle: home cell bits, level, PG_HB_TAIL
    int32_t hb_capacity;
    bool wide;   ///< the processor runs AVX2 (qg_pg_pairs_cell_wide)
    bool want;   ///< some level's want_cells waits for an insert or move
    /// A batch with static elements is running (point_grid_batch_mark): no
    /// re-sort re-fits a world until it ends. (In the padding after `want`:
    /// the levels keep their offsets.)
    bool hold;
    int32_t steady_high; ///< box_high seen by the last qg_cleanup
    pg_level level[PG_LEVELS];
} point_grid;

/// Handles are stored in 24 bits: the kind holds at most this many
/// (QG_ERR_CAPACITY past it); the largest value marks a tombstone.
#define PG_MAX_HANDLES 0xFFFFFF

static inline qg_handle pg_order(const pg_level *L, int32_t s)
{
    const uint32_t v = L->order[s] & PG_MAX_HANDLES;
    return v == PG_MAX_HANDLES ? -1 : (qg_handle)v;
}

/// Sets the handle of slot s (-1: a tombstone) and its size byte.
static inline void pg_set_order(pg_level *L, int32_t s, qg_handle h, uint32_t size)
{
    L->order[s] = (h < 0 ? PG_MAX_HANDLES : (uint32_t)h) | size << 24;
}

static inline int32_t pg_level_bits(uint32_t hb)
{
    return (int32_t)((hb & PG_HB_LEVEL) >> 4);
}

typedef struct pg_point {
    int32_t x, y; ///< fixed-point grid coordinates
} pg_point;

/// Fixed-point coordinate of v, clamped into [0, gmax]: (v - origin) *
/// scale, given as half the origin and twice the scale (the level's hx, s2x
/// or hy, s2y). Monotonic in v (the subtraction and product round
/// monotonically, overflow to infinity included), so a point inside a range
/// maps inside the mapped range.
///
/// The difference is taken of the halves: v - origin passes FLT_MAX in a
/// world wider than FLT_MAX (bounds of +-FLT_MAX), and its infinity would
/// clamp half the world onto the last row or column, where the ray casts
/// and nearest searches (world lines in double) do not look for it. Halving
/// is exact and commutes with rounding, so outside the subnormals this is
/// (v - origin) * scale bit for bit.
static inline int32_t pg_map(float v, float half_origin, float twice_scale, float gmax)
{
    float f = (0.5f * v - half_origin) * twice_scale;
    f = f > 0.0f ? f : 0.0f; // NaN (0 times infinity) maps to 0
    f = f < gmax ? f : gmax;
    return (int32_t)f;
}

static inline pg_point pg_point_of(const pg_level *L, float x, float y)
{
    return (pg_point){pg_map(x, L->hx, L->s2x, L->gmaxf_x), pg_map(y, L->hy, L->s2y, L->gmaxf_y)};
}

static inline pg_point pg_box_point(const pg_level *L, qg_rect b)
{
    return pg_point_of(L, b.min_x, b.min_y);
}

/// The points of two boxes' min corners at once (one move maps both). Same
/// clamps as pg_map, without branches.
static inline void pg_point_pair(const pg_level *L, qg_rect a, qg_rect b, pg_point *pa, pg_point *pb)
{
#if defined(QV_HAVE)
    qv_f32 f = ((qv_f32){a.min_x, a.min_y, b.min_x, b.min_y} * qv_splat(0.5f) - (qv_f32){L->hx, L->hy, L->hx, L->hy}) *
               (qv_f32){L->s2x, L->s2y, L->s2x, L->s2y};
    f = qv_min(qv_max(f, qv_splat(0.0f)), (qv_f32){L->gmaxf_x, L->gmaxf_y, L->gmaxf_x, L->gmaxf_y});
    int32_t out[4];
    qv_store_i32(out, qv_trunc(f));
    *pa = (pg_point){out[0], out[1]};
    *pb = (pg_point){out[2], out[3]};
#else
    *pa = pg_box_point(L, a);
    *pb = pg_box_point(L, b);
#endif
}

static inline int32_t pg_cell_of(const pg_level *L, pg_point p)
{
    return (p.y >> PG_QBITS) * L->cols + (p.x >> PG_QBITS);
}

/// The offsets (sq) of point p listed in cell (cx, cy); both below PG_SPAN
/// when p lies in the cell's margins.
static inline uint32_t pg_offsets(pg_point p, int32_t cx, int32_t cy)
{
    return (uint32_t)(p.x - (cx << PG_QBITS) + PG_M) | (uint32_t)(p.y - (cy << PG_QBITS) + PG_M) << 8;
}

/// The point of offsets `off` listed in cell (cx, cy).
static inline pg_point pg_listed_point(uint32_t off, int32_t cx, int32_t cy)
{
    return (pg_point){(cx << PG_QBITS) - PG_M + (int32_t)(off & 0xFF), (cy << PG_QBITS) - PG_M + (int32_t)(off >> 8)};
}

/// The one coordinate within a cell of c whose value mod 4 is `bits`: the
/// home cell, found from the cell c the point is in.
static inline int32_t pg_home(int32_t c, uint32_t bits)
{
    return c + (int32_t)(((bits - (uint32_t)c + 1u) & 3u)) - 1;
}

/// True when point p lies within the margins of cell (cx, cy).
static inline bool pg_in_margins(pg_point p, int32_t cx, int32_t cy)
{
    return ((uint32_t)(p.x - (cx << PG_QBITS) + PG_M) < PG_SPAN) & ((uint32_t)(p.y - (cy << PG_QBITS) + PG_M) < PG_SPAN);
}

/// True when the box is within the level's bound. Same float subtraction as
/// the contract's definition of "width".
static inline bool pg_fits(const pg_level *L, qg_rect b)
{
    return (b.max_x - b.min_x <= L->bound) & (b.max_y - b.min_y <= L->bound);
}

/// The level of a box: the lowest whose bound takes it (the last takes any).
static inline int32_t pg_level_of(const point_grid *g, qg_rect b)
{
    int32_t k = 0;
    while (k < PG_LEVELS - 1 && !pg_fits(&g->level[k], b))
        k++;
    return k;
}

/// The lower search limit for an area starting at v: every box that fits the
/// bound and reaches v has its min corner at or above the result.
///
/// Such a box has min >= v - bound * (1 + 2^-24) in real numbers (its width
/// passed pg_fits after one rounding). pad is above bound * (1 + 2^-24), so
/// v - pad is below that; v - pad is then rounded to the nearest float, and
/// no float lies between a real number and its nearest float, so a float
/// min at or above v - pad is at or above the rounded result too.
static inline float pg_widen(const pg_level *L, float v)
{
    return v - L->pad;
}

/// The cells whose listed elements may have points in [lo, hi] (margins
/// included), as inclusive column and row ranges.
static inline void pg_cell_range(const pg_level *L, pg_point lo, pg_point hi, int32_t *cx0, int32_t *cy0,
                                 int32_t *cx1, int32_t *cy1)
{
    *cx0 = lo.x > PG_M ? (lo.x - PG_M) >> PG_QBITS : 0;
    *cy0 = lo.y > PG_M ? (lo.y - PG_M) >> PG_QBITS : 0;
    *cx1 = (hi.x + PG_M) >> PG_QBITS;
    *cy1 = (hi.y + PG_M) >> PG_QBITS;
    if (*cx1 >= L->cols)
        *cx1 = L->cols - 1;
    if (*cy1 >= L->rows)
        *cy1 = L->rows - 1;
}

/// The point of the element at slot s, listed in cell (cx, cy).
static inline pg_point pg_slot_point(const pg_level *L, const qg_rect *boxes, int32_t s, qg_handle h, int32_t cx,
                                     int32_t cy)
{
    return L->fresh ? pg_listed_point(L->sq[s], cx, cy) : pg_box_point(L, boxes[h]);
}

/// Most tail slots before a rebuild: a fraction of the level, so bulk
/// inserts rebuild geometrically rarely, capped by the 16-bit links.
static inline int32_t pg_tail_limit(const pg_level *L)
{
    int32_t limit = L->count / 8;
    if (limit < 64)
        limit = 64;
    return limit < (int32_t)PG_TAIL_END ? limit : (int32_t)PG_TAIL_END;
}

/// Tail slots a trimmed `order` keeps past the population: the elements
/// that leave their home's margins between re-sorts go there. Without them
/// the first such move of a steady population would find no slot and
/// re-sort inside qg_move (about 10 ms at 1M agents).
/// qg_cleanup re-sorts before the tail and tombstones reach count / 64, so
/// this is room for a frame's strays; 6 bytes a slot, 0.1 per element.
static inline int32_t pg_tail_room(int32_t count)
{
    return count / 64 + 64;
}

/// The size byte of a box whose min and max corners map to p and m: its
/// mapped width and height in units, rounded up. m - p bounds the mapped
/// distance from the min corner to the max one exactly (the same monotonic
/// mapping), so the pair kernel's test on it keeps every overlapping pair.
static inline uint32_t pg_size(const pg_level *L, pg_point p, pg_point m)
{
    const uint32_t w = (uint32_t)(m.x - p.x), h = (uint32_t)(m.y - p.y);
    return (uint32_t)L->size_x[w < 255 ? w : 255] | (uint32_t)L->size_y[h < 255 ? h : 255] << 4;
}

/// The mapped min corner p and max corner m of box b.
static inline void pg_corners(const pg_level *L, qg_rect b, pg_point *p, pg_point *m)
{
    pg_point_pair(L, b, (qg_rect){b.max_x, b.max_y, 0, 0}, p, m);
}

/// Writes slot s of cell (cx, cy): handle h, the size byte of corners p and
/// m, and p's offsets.
static inline void pg_write_slot(pg_level *L, int32_t s, uint32_t h, pg_point p, pg_point m, int32_t cx, int32_t cy)
{
    L->order[s] = h | pg_size(L, p, m) << 24;
    L->sq[s] = (uint16_t)pg_offsets(p, cx, cy);
}

/// A tail slot's top byte: the column of the element's point, modulo 256,
/// so searches pass over tail elements of the row in far columns without
/// reading their boxes.
static inline uint32_t pg_tail_col(pg_point p)
{
    return (uint32_t)(p.x >> PG_QBITS) & 0xFFu;
}

/// True when tail slot s may hold a point of a column in [cx0, cx1].
static inline bool pg_tail_in_cols(const pg_level *L, int32_t s, int32_t cx0, int32_t cx1)
{
    return cx1 - cx0 >= 255 || (((L->order[s] >> 24) - (uint32_t)cx0) & 0xFFu) <= (uint32_t)(cx1 - cx0);
}


/// Candidate pairs waiting for their exact test, in a ring: each is tested
/// PG_DELAY candidates after it was queued, when the boxes prefetched for
/// it have had time to arrive.
typedef struct pg_batch {
    const qg_rect *boxes;
    qg_handle a[PG_BATCH], b[PG_BATCH];
    uint32_t head, tail; ///< queued and tested so far (the ring wraps)
    int64_t tested;
} pg_batch;

/// Tests the oldest queued candidate; false when the callback asked to stop.
static inline bool pg_test_oldest(pg_batch *bt, qg_pair_fn *fn, void *user)
{
    const uint32_t i = bt->tail++ % PG_BATCH;
    return !qg_overlaps(bt->boxes[bt->a[i]], bt->boxes[bt->b[i]]) || qg_report_pair(fn, user, bt->a[i], bt->b[i]);
}

/// Tests every queued candidate; false when the callback asked to stop.
static inline bool pg_flush(pg_batch *bt, qg_pair_fn *fn, void *user)
{
    while (bt->tail != bt->head) {
        if (!pg_test_oldest(bt, fn, user))
            return false;
    }
    return true;
}

/// Queues a candidate, fetching its boxes, and tests the one queued
/// PG_DELAY candidates earlier.
static inline bool pg_candidate(pg_batch *bt, qg_handle a, qg_handle b, qg_pair_fn *fn, void *user)
{
    PG_PREFETCH(&bt->boxes[a]);
    PG_PREFETCH(&bt->boxes[b]);
    const uint32_t i = bt->head++ % PG_BATCH;
    bt->a[i] = a;
    bt->b[i] = b;
    bt->tested++;
    return bt->head - bt->tail < PG_DELAY || pg_test_oldest(bt, fn, user);
}

/// A pair the pair kernels found: reported at once when `sure` (the size
/// bytes proved the overlap without reading a box), otherwise queued for the
/// exact test. False when the callback asked to stop.
static inline bool pg_hit(pg_batch *bt, qg_handle a, qg_handle b, bool sure, qg_pair_fn *fn, void *user)
{
    if (!sure)
        return pg_candidate(bt, a, b, fn, user);
    bt->tested++;
    return qg_report_pair(fn, user, a, b);
}


/// The first row of part `part`'s band of level L, for the parts of
/// qg_pairs_parallel and the parallel refresh: balanced by listed elements
/// (the cells' starts are their running count), the first row whose
/// elements start at or past part/parts of the level's. It rises with
/// part, so the bands [edge(p), edge(p + 1)) are disjoint and cover every
/// row; a band may be empty (a row holding most of the level).
static inline int32_t qg_pg_band_edge(const pg_level *L, int32_t part, int32_t parts)
{
    if (part <= 0)
        return 0;
    if (part >= parts)
        return L->rows;
    const int64_t want = (int64_t)L->listed * part / parts;
    int32_t lo = 0, hi = L->rows;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (L->start[(int64_t)mid * L->cols] < want)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- what the files of the kind share ----------------------------------- */

/// point_grid_world.c: level k's bound, cell size and world over the configured bounds.
void qg_pg_level_init(pg_level *L, const qg_config *c, int32_t k);
/// point_grid_world.c: the fields of a level's world that follow from its
/// cells (cols, rows), origin (ox, oy), scale (sx, sy) and pad: the mapping's
/// limits and forms, the move and pair reaches, the size tables. A snapshot
/// carries only what they follow from, so a read cannot hold a world whose
/// mapping points outside its cells.
void qg_pg_world_derive(pg_level *L);
/// point_grid_world.c: re-sorts level k (a counting sort by cell), re-fitting its world
/// first when its elements ask for it. Never allocates.
void qg_pg_rebuild(point_grid *g, int32_t k);
/// point_grid_world.c: rewrites every listed element's point and size byte in place.
void qg_pg_refresh(pg_level *L, const qg_rect *boxes);
/// point_grid_world.c: the same for the slots of rows [r0, r1) only, leaving `fresh`
/// alone: bands of rows run on different threads, and the caller marks the
/// level fresh once all are done.
void qg_pg_refresh_rows(pg_level *L, const qg_rect *boxes, int32_t r0, int32_t r1);
/// point_grid_world.c: reserves the cells re-fits asked for; false when that fails.
bool qg_pg_grow(point_grid *g, qg_txn *txn);
/// point_grid_world.c: room for the cells a bulk insert of `more` into level k may fit.
bool qg_pg_reserve_cells(point_grid *g, qg_txn *txn, int32_t k, int64_t more);
/// point_grid_world.c: true when the border cells hold a pile of clamped points.
bool qg_pg_border_crowded(const pg_level *L);
/// point_grid_pairs.c: the kind's qg_pairs.
void qg_pg_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats);
/// qg_raycast and qg_nearest on the levels' own cells (point_grid_rays_nearest.c).
void qg_pg_raycast(const qg_index *index, float ox, float oy, float dx, float dy, float max_t, qg_ray_fn *fn,
                   void *user);
int32_t qg_pg_nearest(const qg_index *index, float x, float y, int32_t k, float max_distance2, qg_handle *handles,
                      float *distances2);
/// point_grid_pairs.c: part `part` of `parts` of qg_pairs (qg_pairs_parallel).
void qg_pg_pairs_part(const qg_index *index, int32_t part, int32_t parts, qg_pair_fn *fn, void *user,
                      qg_query_stats *stats);
#if defined(PG_HAVE_AVX2)
/// point_grid_pairs_avx2.c: the pairs of one cell with its neighbours, sixteen slots
/// per compare; false when the cell needs more chunks than fit.
bool qg_pg_pairs_cell_wide(const pg_level *Lv, pg_batch *bt, int32_t cx, int32_t cy, qg_pair_fn *fn, void *user,
                           bool *stop);
/// point_grid_pairs_avx2.c: one row of a cross-level search, sixteen slots per compare.
bool qg_pg_cross_row_wide(const pg_level *L, pg_batch *bt, qg_handle b, int32_t cx0, int32_t cx1, int32_t cy,
                          pg_point bl, pg_point bh, qg_pair_fn *fn, void *user);
#endif
#if defined(QV_HAVE)
/// point_grid_pairs_vec.c: the same two kernels in portable vectors (SSE2, NEON,
/// SIMD128), for a fresh snapshot when the AVX2 form is not chosen.
bool qg_pg_pairs_cell_vec(const pg_level *Lv, pg_batch *bt, int32_t cx, int32_t cy, qg_pair_fn *fn, void *user,
                          bool *stop);
bool qg_pg_cross_row_vec(const pg_level *L, pg_batch *bt, qg_handle b, int32_t cx0, int32_t cx1, int32_t cy,
                         pg_point bl, pg_point bh, qg_pair_fn *fn, void *user);
#endif

#endif
