// QG_POINT_GRID: the uniform upper-bound grid of "Dirty Trick: Uniform Sizes"
// (seed 003, part 6), in size levels, over a world that follows its elements.
//
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
// One level's layout (seed 003 part 6 and part 2):
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
//   every slot at random). Past the sliver it re-sorts (pg_rebuild: a
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
#include "index_internal.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
// AVX2 is chosen at run time (qg_create asks the processor), so the library
// still runs on any x86-64.
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define PG_HAVE_AVX2 1
#endif

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
    bool refit;         ///< the next qg_cleanup re-sorts (more cells arrived)
    int32_t want_cells; ///< cells a re-fit asked for beyond start_capacity
    int64_t calm;       ///< border elements a re-fit chose to keep (pg_border_crowded)
    int32_t fit_count;  ///< elements when pg_refit last sampled
    int32_t config_cells; ///< cells of the configured bounds at this level's cell size
    int32_t cols, rows;
    int32_t gmax_x, gmax_y; ///< largest fixed-point coordinate: cols * PG_Q - 1
    float gmaxf_x, gmaxf_y; ///< the same as floats (exact: below 2^24)
    float ox, oy;           ///< world origin
    float sx, sy;           ///< quanta per world unit
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
    bool wide;   ///< the processor runs AVX2 (pg_pairs_cell_wide)
    bool want;   ///< some level's want_cells waits for an insert or move
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

/// Fixed-point coordinate of v, clamped into [0, gmax]. Monotonic in v (the
/// subtraction and product round monotonically, overflow to infinity
/// included), so a point inside a range maps inside the mapped range.
static inline int32_t pg_map(float v, float origin, float scale, float gmax)
{
    float f = (v - origin) * scale;
    f = f > 0.0f ? f : 0.0f; // NaN (0 times infinity) maps to 0
    f = f < gmax ? f : gmax;
    return (int32_t)f;
}

static inline pg_point pg_point_of(const pg_level *L, float x, float y)
{
    return (pg_point){pg_map(x, L->ox, L->sx, L->gmaxf_x), pg_map(y, L->oy, L->sy, L->gmaxf_y)};
}

static inline pg_point pg_box_point(const pg_level *L, qg_rect b)
{
    return pg_point_of(L, b.min_x, b.min_y);
}

/// The points of two boxes' min corners at once (one move maps both). Same
/// clamps as pg_map, without branches.
static inline void pg_point_pair(const pg_level *L, qg_rect a, qg_rect b, pg_point *pa, pg_point *pb)
{
#if defined(__SSE2__)
    __m128 f = _mm_mul_ps(_mm_sub_ps(_mm_setr_ps(a.min_x, a.min_y, b.min_x, b.min_y),
                                     _mm_setr_ps(L->ox, L->oy, L->ox, L->oy)),
                          _mm_setr_ps(L->sx, L->sy, L->sx, L->sy));
    f = _mm_min_ps(_mm_max_ps(f, _mm_setzero_ps()),
                   _mm_setr_ps(L->gmaxf_x, L->gmaxf_y, L->gmaxf_x, L->gmaxf_y));
    int32_t out[4];
    _mm_storeu_si128((__m128i *)out, _mm_cvttps_epi32(f));
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
static int32_t pg_tail_limit(const pg_level *L)
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
static int32_t pg_tail_room(int32_t count)
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

/// Fills a size table: min(ceil(d / unit), 15) for each d.
static void pg_size_table(uint8_t *table, int32_t unit)
{
    for (int32_t d = 0; d < 256; ++d) {
        const int32_t w = (d + unit - 1) / unit;
        table[d] = (uint8_t)(w < 15 ? w : 15);
    }
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

/* ---- a level's world ---------------------------------------------------- */

/// Cells along an axis of the given extent: as many as fit at `cell` (cells
/// only get wider than asked), at least 1, at most PG_MAX_SIDE.
static int32_t pg_side(double extent, double cell)
{
    double n = floor(extent / cell);
    if (!(n >= 1.0))
        n = 1.0;
    if (n > PG_MAX_SIDE)
        n = PG_MAX_SIDE;
    return (int32_t)n;
}

/// Quanta per world unit along an axis of `side` cells, kept a finite
/// normal float (a world of extent near 0 or past FLT_MAX still maps).
static float pg_scale(int32_t side, double extent)
{
    double s = (double)side * PG_Q / extent;
    if (s > 0x1p120)
        s = 0x1p120;
    if (s < 0x1p-120)
        s = 0x1p-120;
    return (float)s;
}

/// How many quanta apart the min corners of two overlapping boxes can map:
/// pad * scale in real numbers, plus 1 for the floors and 2 for the rounding
/// of the mapping (each under half a quantum while coordinates stay below
/// 2^22). Capped: any reach past a cell lets every point through anyway.
static int32_t pg_reach(float pad, float scale)
{
    const double r = ceil((double)pad * (double)scale) + 3.0;
    return r < 4 * PG_Q ? (int32_t)r : 4 * PG_Q;
}

/// A world: origin, extent and cells per axis.
typedef struct pg_world {
    double x0, y0, ex, ey;
    int32_t cols, rows;
} pg_world;

/// The cells of a world over [x0, x0 + ex] x [y0, y0 + ey] at the level's
/// cell size, at most `cells` in all and wide enough for the level's reach.
static pg_world pg_world_of(const pg_level *L, double x0, double y0, double ex, double ey, int64_t cells)
{
    pg_world w = {x0, y0, ex, ey, pg_side(ex, L->cell), pg_side(ey, L->cell)};
    if (cells > PG_MAX_CELLS)
        cells = PG_MAX_CELLS;
    while ((int64_t)w.cols * w.rows > cells) {
        // Halve the longer side: cells only get wider, which keeps every
        // requirement on them.
        if (w.cols >= w.rows)
            w.cols = (w.cols + 1) / 2;
        else
            w.rows = (w.rows + 1) / 2;
    }
    // The cell size keeps partners within one cell; this absorbs rounding.
    while (w.cols > 1 && pg_reach(L->pad, pg_scale(w.cols, ex)) > PG_MAX_REACH)
        w.cols--;
    while (w.rows > 1 && pg_reach(L->pad, pg_scale(w.rows, ey)) > PG_MAX_REACH)
        w.rows--;
    return w;
}

/// Makes w the level's world (the snapshot must be rebuilt after).
static void pg_set_world(pg_level *L, pg_world w)
{
    L->cols = w.cols;
    L->rows = w.rows;
    L->gmax_x = L->cols * PG_Q - 1;
    L->gmax_y = L->rows * PG_Q - 1;
    L->gmaxf_x = (float)L->gmax_x;
    L->gmaxf_y = (float)L->gmax_y;
    L->ox = (float)w.x0;
    L->oy = (float)w.y0;
    L->sx = pg_scale(L->cols, w.ex);
    L->sy = pg_scale(L->rows, w.ey);
    // Half a cell (64 quanta) leaves 32 quanta for the margin and over 30
    // for rounding before a point could pass a neighbour of its home.
    L->near_x = (float)(PG_Q / 2) / L->sx;
    L->near_y = (float)(PG_Q / 2) / L->sy;
    L->reach_x = pg_reach(L->pad, L->sx);
    L->reach_y = pg_reach(L->pad, L->sy);
    // A mapped width is below the reach: fifteen units cover it.
    L->unit_x = L->reach_x > 15 ? (L->reach_x + 14) / 15 : 1;
    L->unit_y = L->reach_y > 15 ? (L->reach_y + 14) / 15 : 1;
    pg_size_table(L->size_x, L->unit_x);
    pg_size_table(L->size_y, L->unit_y);
}

static int pg_cmp_int(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int pg_cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/// Pairs of sampled points that share a cell of world w: an estimate of the
/// pair work the world leaves to its cells (a pile of clamped points, or
/// cells far wider than asked, shows as many).
static int64_t pg_crowding(const float *xs, const float *ys, int32_t n, pg_world w, int32_t *scratch)
{
    const double fx = (double)w.cols / w.ex, fy = (double)w.rows / w.ey;
    for (int32_t i = 0; i < n; ++i) {
        double cx = floor(((double)xs[i] - w.x0) * fx), cy = floor(((double)ys[i] - w.y0) * fy);
        cx = cx < 0 ? 0 : cx >= w.cols ? w.cols - 1 : cx;
        cy = cy < 0 ? 0 : cy >= w.rows ? w.rows - 1 : cy;
        scratch[i] = (int32_t)cy * w.cols + (int32_t)cx;
    }
    qsort(scratch, (size_t)n, sizeof *scratch, pg_cmp_int);
    int64_t same = 0;
    int32_t run = 1;
    for (int32_t i = 1; i <= n; ++i) {
        if (i < n && scratch[i] == scratch[i - 1]) {
            run++;
            continue;
        }
        same += (int64_t)run * (run - 1) / 2;
        run = 1;
    }
    return same;
}

/// Listed elements in the level's border cells, where points outside the
/// world clamp to.
static int64_t pg_border_count(const pg_level *L)
{
    const int32_t *start = L->start;
    const int32_t cols = L->cols, rows = L->rows;
    int64_t n = (int64_t)start[cols] - start[0] + (start[rows * cols] - start[(rows - 1) * cols]);
    for (int32_t r = 1; r + 1 < rows; ++r)
        n += (start[r * cols + 1] - start[r * cols]) + (start[(r + 1) * cols] - start[(r + 1) * cols - 1]);
    return n;
}

/// True when the border cells are crowded far past the inside ones: points
/// outside the world piling up there. Cheap (the cells' starts only), so
/// every qg_cleanup asks; pg_refit keeps it from asking again about a pile
/// it chose to keep.
static bool pg_border_crowded(const pg_level *L)
{
    if (L->cols < 3 || L->rows < 3 || L->count < 64)
        return false;
    const int64_t border_cells = 2 * ((int64_t)L->cols + L->rows) - 4;
    const int64_t inner_cells = (int64_t)L->cols * L->rows - border_cells;
    const int64_t border = pg_border_count(L), inner = L->listed - border;
    return border > L->calm && border * inner_cells > 4 * (inner + inner_cells) * border_cells;
}

/// Min corners of up to PG_SAMPLE of level k's elements, evenly spread over
/// its handles (the same sample for the same index).
static int32_t pg_sample(const point_grid *g, int32_t k, float *xs, float *ys)
{
    const pg_level *L = &g->level[k];
    const uint32_t key = (uint32_t)k << 4;
    const int32_t stride = L->count > PG_SAMPLE ? L->count / PG_SAMPLE : 1;
    int32_t n = 0, seen = 0;
    for (int32_t h = 0; h < g->base.box_high && n < PG_SAMPLE; ++h) {
        if ((g->hb[h] & PG_HB_LEVEL) != key || seen++ % stride != 0)
            continue;
        xs[n] = g->base.boxes[h].min_x;
        ys[n] = g->base.boxes[h].min_y;
        n++;
    }
    return n;
}

/// The range [lo, hi] of the sorted values v[0..n) without the outer
/// 256ths, widened by an eighth on each side and kept within the values,
/// at least `least` wide.
static void pg_fit_range(float *v, int32_t n, double least, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof *v, pg_cmp_float);
    const int32_t cut = n / 256;
    const double a = v[cut], b = v[n - 1 - cut], w = b - a;
    *lo = a - w / 8 > (double)v[0] ? a - w / 8 : (double)v[0];
    *hi = b + w / 8 < (double)v[n - 1] ? b + w / 8 : (double)v[n - 1];
    if (*hi - *lo < least) {
        const double mid = (*lo + *hi) / 2;
        *lo = mid - least / 2;
        *hi = mid + least / 2;
    }
    // A point exactly at hi maps past the last cell; a hair more keeps it in.
    *hi += (*hi - *lo) * 0x1p-20;
}

/// Considers moving level k's world to its elements, given the extent of
/// their points. Called by pg_rebuild, which re-sorts after a move. True
/// when the world moved. Never allocates: a fit wider than the level's
/// cells records the want for the next insert or move.
static bool pg_refit(point_grid *g, int32_t k, float x0, float y0, float x1, float y1)
{
    pg_level *L = &g->level[k];
    const bool asked = L->refit;
    L->refit = false;
    if (L->count < 2 || !(x0 <= x1) || !isfinite(L->cell))
        return false;
    const double gx0 = L->ox, gy0 = L->oy;
    const double gx1 = gx0 + (double)(L->gmax_x + 1) / L->sx, gy1 = gy0 + (double)(L->gmax_y + 1) / L->sy;
    const int64_t cells = (int64_t)L->cols * L->rows;
    // The cells the points span; a world that the points spill out of, or
    // fill only a corner of, is worth a look.
    const double span = ((double)x1 - x0) * L->sx / PG_Q * (((double)y1 - y0) * L->sy / PG_Q);
    const bool spill = x0 < gx0 || y0 < gy0 || x1 >= gx1 || y1 >= gy1;
    if (!spill && !asked && !(span * 4 < (double)cells && cells > 16))
        return false;
    // A level that keeps a few elements outside its world (or in a corner
    // of it) by choice is looked at again when it was asked to, or once its
    // population doubled or halved: a bulk insert re-sorts every eighth of
    // its growth and need not sample each time.
    if (!asked && L->fit_count > 0 && L->count < 2 * L->fit_count && 2 * L->count > L->fit_count)
        return false;
    L->fit_count = L->count;
    float xs[PG_SAMPLE], ys[PG_SAMPLE];
    union {
        float f[PG_SAMPLE];
        int32_t i[PG_SAMPLE];
    } buf;
    const int32_t n = pg_sample(g, k, xs, ys);
    double tx0, tx1, ty0, ty1;
    memcpy(buf.f, xs, (size_t)n * sizeof(float));
    pg_fit_range(buf.f, n, L->cell, &tx0, &tx1);
    memcpy(buf.f, ys, (size_t)n * sizeof(float));
    pg_fit_range(buf.f, n, L->cell, &ty0, &ty1);
    const pg_world cur = {gx0, gy0, gx1 - gx0, gy1 - gy0, L->cols, L->rows};
    int64_t room = L->start_capacity - 1;
    pg_world now = pg_world_of(L, tx0, ty0, tx1 - tx0, ty1 - ty0, room);
    if (now.rows > L->tail_head_capacity)
        now.rows = L->tail_head_capacity;
    // Cells past the configured ones: at most two per element.
    const int64_t budget = (int64_t)L->count * 2 + 4096 > L->config_cells ? (int64_t)L->count * 2 + 4096 : L->config_cells;
    const pg_world full = pg_world_of(L, tx0, ty0, tx1 - tx0, ty1 - ty0, budget);
    const int64_t c_cur = pg_crowding(xs, ys, n, cur, buf.i);
    const int64_t c_now = pg_crowding(xs, ys, n, now, buf.i);
    bool moved = false;
    int64_t base = c_cur;
    if (2 * c_now < c_cur || (cells > 8 * (int64_t)now.cols * now.rows && c_now <= c_cur)) {
        pg_set_world(L, now);
        moved = true;
        base = c_now;
        L->calm = 0;
    } else {
        // Keeping this world: its border pile (counted before the re-sort,
        // a fair estimate) is not worth asking about again until it doubles.
        L->calm = 2 * pg_border_count(L);
    }
    const int64_t full_cells = (int64_t)full.cols * full.rows;
    if (full_cells > room && 2 * pg_crowding(xs, ys, n, full, buf.i) < base) {
        L->want_cells = (int32_t)full_cells;
        g->want = true;
    }
    return moved;
}

/// Reserves the cells re-fits asked for (see pg_refit); the next qg_cleanup
/// re-sorts into them. False when an allocation fails (nothing to undo
/// beyond the txn).
static bool pg_grow(point_grid *g, qg_txn *txn)
{
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        pg_level *L = &g->level[k];
        if (L->want_cells == 0 || L->want_cells <= L->start_capacity - 1)
            continue;
        const int32_t rows = L->want_cells < PG_MAX_SIDE ? L->want_cells : PG_MAX_SIDE;
        if (!qg_txn_reserve(txn, (void **)&L->start, &L->start_capacity, sizeof(int32_t), (int64_t)L->want_cells + 1) ||
            !qg_txn_reserve(txn, (void **)&L->tail_head, &L->tail_head_capacity, sizeof(uint16_t), rows))
            return false;
    }
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        if (g->level[k].want_cells > 0) {
            g->level[k].want_cells = 0;
            g->level[k].refit = true;
        }
    }
    g->want = false;
    return true;
}

/// Lists every element of level k in the cell of its point: a counting sort
/// by cell, straight from the base's boxes (the level's handles found by
/// their hb byte). Handles ascend within a cell. Needs room for the level's
/// count slots; never allocates. Re-fits the world first when pg_refit says
/// so.
static void pg_rebuild(point_grid *g, int32_t k)
{
    pg_level *L = &g->level[k];
    const qg_rect *boxes = g->base.boxes;
    uint8_t *hb = g->hb;
    const int32_t high = g->base.box_high;
    const uint32_t key = (uint32_t)k << 4;
    int32_t *start = L->start;
    for (int pass = 0;; ++pass) {
        memset(start, 0, ((size_t)L->cols * L->rows + 1) * sizeof(int32_t));
        float x0 = INFINITY, y0 = INFINITY, x1 = -INFINITY, y1 = -INFINITY;
        for (int32_t h = 0; h < high; ++h) {
            if ((hb[h] & PG_HB_LEVEL) != key)
                continue;
            const qg_rect b = boxes[h];
            x0 = b.min_x < x0 ? b.min_x : x0;
            y0 = b.min_y < y0 ? b.min_y : y0;
            x1 = b.min_x > x1 ? b.min_x : x1;
            y1 = b.min_y > y1 ? b.min_y : y1;
            start[pg_cell_of(L, pg_box_point(L, b))]++;
        }
        if (pass > 0 || !pg_refit(g, k, x0, y0, x1, y1))
            break;
    }
    // Ends of the cells; the scatter below counts each back to its start.
    const int32_t cells = L->cols * L->rows;
    int32_t sum = 0;
    for (int32_t c = 0; c < cells; ++c) {
        sum += start[c];
        start[c] = sum;
    }
    start[cells] = sum;
    for (int32_t h = high - 1; h >= 0; --h) {
        if ((hb[h] & PG_HB_LEVEL) != key)
            continue;
        pg_point p, m;
        pg_corners(L, boxes[h], &p, &m);
        const int32_t cx = p.x >> PG_QBITS, cy = p.y >> PG_QBITS;
        pg_write_slot(L, --start[cy * L->cols + cx], (uint32_t)h, p, m, cx, cy);
        hb[h] = (uint8_t)(key | (uint32_t)(cx & 3) | (uint32_t)(cy & 3) << 2);
    }
    for (int32_t r = 0; r < L->rows; ++r)
        L->tail_head[r] = PG_TAIL_END;
    L->listed = sum;
    L->tail = 0;
    L->tombstones = 0;
    L->fresh = true;
}

/// Distance, in slots, at which pg_refresh fetches a box ahead of its use:
/// far enough for the random reads of the base's box array to overlap.
#define PG_AHEAD 64

/// Makes the snapshot fresh again without moving anything: every listed
/// element is still within the margins of its home (a move past them went
/// to the tail), so its slot stays and only its offsets and size byte are
/// rewritten from its box. One walk of the snapshot in slot order: the
/// writes are sequential, and the box reads, random by handle, are
/// prefetched PG_AHEAD slots early so they overlap. About a third of the
/// counting sort's cost, whose scatter writes every slot at random.
static void pg_refresh(pg_level *L, const qg_rect *boxes)
{
    const uint32_t *order = L->order;
    const int32_t *start = L->start;
    const int32_t listed = L->listed;
    int32_t s = 0;
    for (int32_t cy = 0; cy < L->rows; ++cy) {
        for (int32_t cx = 0; cx < L->cols; ++cx) {
            const int32_t end = start[cy * L->cols + cx + 1];
            for (; s < end; ++s) {
                const int32_t ahead = s + PG_AHEAD < listed ? s + PG_AHEAD : listed - 1;
                const uint32_t va = order[ahead] & PG_MAX_HANDLES;
                if (va != PG_MAX_HANDLES)
                    PG_PREFETCH(&boxes[va]);
                const uint32_t v = order[s] & PG_MAX_HANDLES;
                if (v == PG_MAX_HANDLES)
                    continue;
                pg_point p, m;
                pg_corners(L, boxes[v], &p, &m);
                pg_write_slot(L, s, v, p, m, cx, cy);
            }
        }
    }
    L->fresh = true;
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

/// Adds h (box already in boxes[h], hb[h] naming level k) to level k's
/// tail, or rebuilds the level when the tail is full. The caller has made
/// room for the level's count slots.
static void pg_tail_add(point_grid *g, int32_t k, qg_handle h)
{
    pg_level *L = &g->level[k];
    if (L->tail >= pg_tail_limit(L) || L->listed + L->tail >= L->order_capacity - PG_PAD) {
        pg_rebuild(g, k);
        return;
    }
    const pg_point p = pg_box_point(L, g->base.boxes[h]);
    const int32_t s = L->listed + L->tail;
    const int32_t row = p.y >> PG_QBITS;
    pg_set_order(L, s, h, pg_tail_col(p));
    L->sq[s] = L->tail_head[row];
    L->tail_head[row] = (uint16_t)L->tail++;
    g->hb[h] = (uint8_t)((uint32_t)k << 4 | PG_HB_TAIL);
}

/// Takes tail element h out of the list of `row`, leaving a tombstone.
static void pg_tail_unlink(pg_level *L, qg_handle h, int32_t row)
{
    uint16_t *link = &L->tail_head[row];
    while (*link != PG_TAIL_END) {
        const int32_t s = L->listed + *link;
        if (pg_order(L, s) == h) {
            *link = L->sq[s];
            pg_set_order(L, s, -1, 0);
            L->tombstones++;
            return;
        }
        link = &L->sq[s];
    }
}

/// Leaves a tombstone in the home cell slot of listed element h, whose
/// current point is p.
static void pg_unlist(pg_level *L, uint32_t bits, qg_handle h, pg_point p)
{
    const int32_t hx = pg_home(p.x >> PG_QBITS, bits & 3), hy = pg_home(p.y >> PG_QBITS, bits >> 2 & 3);
    const int32_t c = hy * L->cols + hx;
    for (int32_t s = L->start[c]; s < L->start[c + 1]; ++s) {
        if (pg_order(L, s) == h) {
            pg_set_order(L, s, -1, 0);
            break;
        }
    }
    L->tombstones++;
}

/// Takes h (box `box`, the one it was listed with) out of its level.
static void pg_take_out(point_grid *g, qg_handle h, qg_rect box)
{
    const uint32_t bits = g->hb[h];
    pg_level *L = &g->level[pg_level_bits(bits)];
    const pg_point p = pg_box_point(L, box);
    if (bits & PG_HB_TAIL)
        pg_tail_unlink(L, h, p.y >> PG_QBITS);
    else
        pg_unlist(L, bits, h, p);
    L->count--;
    g->hb[h] = PG_HB_NONE;
}

static qg_status point_grid_configure(qg_config *config)
{
    const float extent = qg_rect_extent(config->bounds);
    if (config->max_element_size == 0.0f) {
        // Twice the typical width; with no typical width either, a 256th of
        // the bounds. Larger boxes go to coarser levels either way.
        config->max_element_size = config->element_size > 0.0f ? 2.0f * config->element_size : extent / 256.0f;
        if (!(config->max_element_size > 0.0f))
            config->max_element_size = FLT_MIN;
    }
    // A cell must be wider than the pair reach plus both margins and a unit
    // of rounding (a little under two and a half bounds), so that partners
    // are never two cells apart. The default, six bounds, measured fastest
    // at the agents workload (against five and seven; eight is slower, its
    // coarser points letting more candidates through), and its cells' 4
    // bytes are about half a byte per element there. Wider cells also have
    // wider margins, so fewer elements leave them between re-sorts.
    const float least = config->max_element_size * 2.5f;
    if (config->cell_size == 0.0f)
        config->cell_size = 6.0f * config->max_element_size;
    if (config->cell_size < least || !isfinite(config->cell_size))
        config->cell_size = isfinite(least) ? least : extent;
    return QG_OK;
}

/// Level k's bound, cell size and world over the configured bounds (no
/// memory yet: a level gets its arrays with its first element).
static void pg_level_init(pg_level *L, const qg_config *c, int32_t k)
{
    float scale = 1.0f;
    for (int32_t i = 0; i < k; ++i)
        scale *= 4.0f;
    L->bound = k == PG_LEVELS - 1 ? INFINITY : c->max_element_size * scale;
    L->cell = k == PG_LEVELS - 1 ? INFINITY : c->cell_size * scale;
    L->pad = nextafterf(L->bound + L->bound * 0x1p-20f, INFINITY);
    const qg_rect b = c->bounds;
    // Levels above the finest start small: their elements are few, and a
    // re-fit gives them more cells when they are not.
    const int64_t most = k == 0 ? PG_MAX_CELLS : 1 << 16;
    const pg_world w = pg_world_of(L, b.min_x, b.min_y, qg_extent(b.min_x, b.max_x), qg_extent(b.min_y, b.max_y), most);
    pg_set_world(L, w);
    L->config_cells = w.cols * w.rows;
    L->fresh = true;
}

/// Gives level k its arrays (start, tail_head) if it has none, and room for
/// `more` elements beyond its count. Grow first: nothing changes here but
/// capacities.
static bool pg_reserve_level(point_grid *g, qg_txn *txn, int32_t k, int32_t more)
{
    pg_level *L = &g->level[k];
    if (!L->live &&
        (!qg_txn_reserve(txn, (void **)&L->start, &L->start_capacity, sizeof(int32_t), (int64_t)L->cols * L->rows + 1) ||
         !qg_txn_reserve(txn, (void **)&L->tail_head, &L->tail_head_capacity, sizeof(uint16_t), L->rows)))
        return false;
    const int64_t slots = (int64_t)L->count + more + PG_PAD;
    return qg_txn_reserve(txn, (void **)&L->order, &L->order_capacity, sizeof(uint32_t), slots) &&
           qg_txn_reserve(txn, (void **)&L->sq, &L->sq_capacity, sizeof(uint16_t), L->order_capacity);
}

/// Makes a level whose arrays were just reserved an empty grid.
static void pg_make_live(point_grid *g, int32_t k)
{
    pg_level *L = &g->level[k];
    if (L->live)
        return;
    L->live = true;
    pg_rebuild(g, k);
}

static qg_status point_grid_init(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    for (int32_t k = 0; k < PG_LEVELS; ++k)
        pg_level_init(&g->level[k], &index->config, k);
    g->steady_high = -1;
#if defined(PG_HAVE_AVX2)
    g->wide = __builtin_cpu_supports("avx2");
#endif
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    if (!pg_reserve_level(g, &txn, 0, 0)) {
        qg_txn_rollback(&txn);
        return QG_ERR_NOMEM;
    }
    pg_make_live(g, 0);
    return QG_OK;
}

static void point_grid_destroy(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    qg_array_free(&index->alloc, (void **)&g->hb, &g->hb_capacity, sizeof(uint8_t));
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        pg_level *L = &g->level[k];
        qg_array_free(&index->alloc, (void **)&L->start, &L->start_capacity, sizeof(int32_t));
        qg_array_free(&index->alloc, (void **)&L->order, &L->order_capacity, sizeof(uint32_t));
        qg_array_free(&index->alloc, (void **)&L->sq, &L->sq_capacity, sizeof(uint16_t));
        qg_array_free(&index->alloc, (void **)&L->tail_head, &L->tail_head_capacity, sizeof(uint16_t));
    }
}

static qg_status point_grid_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    point_grid *g = (point_grid *)index;
    if (h >= PG_MAX_HANDLES)
        return QG_ERR_CAPACITY;
    const int32_t k = pg_level_of(g, box);
    if (!qg_txn_reserve(txn, (void **)&g->hb, &g->hb_capacity, sizeof(uint8_t), (int64_t)h + 1) ||
        !pg_reserve_level(g, txn, k, 1) || (g->want && !pg_grow(g, txn)))
        return QG_ERR_NOMEM;
    // A new handle's hb byte is not set yet: the rebuild that makes a level
    // live must not find h in it.
    g->hb[h] = PG_HB_NONE;
    pg_make_live(g, k);
    g->level[k].count++;
    g->hb[h] = (uint8_t)((uint32_t)k << 4 | PG_HB_TAIL);
    pg_tail_add(g, k, h);
    return QG_OK;
}

static void point_grid_remove(qg_index *index, qg_handle h)
{
    pg_take_out((point_grid *)index, h, index->boxes[h]);
}

/// The moves the common case leaves, within one level: a point past its
/// home's margins, a long step, a tail element. The base's box is already
/// the new one.
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void pg_move_far(point_grid *g, int32_t k, qg_handle h, qg_rect old, qg_rect box)
{
    pg_level *L = &g->level[k];
    pg_point op, np;
    pg_point_pair(L, old, box, &op, &np);
    const uint32_t bits = g->hb[h];
    if (!(bits & PG_HB_TAIL)) {
        const int32_t hx = pg_home(op.x >> PG_QBITS, bits & 3), hy = pg_home(op.y >> PG_QBITS, bits >> 2 & 3);
        if (pg_in_margins(np, hx, hy))
            return;
        pg_unlist(L, bits, h, op);
    } else {
        // A tail element keeps its slot while its point stays in its cell
        // (its row's list, its column byte).
        const int32_t orow = op.y >> PG_QBITS;
        if (orow == np.y >> PG_QBITS && (op.x >> PG_QBITS) == (np.x >> PG_QBITS))
            return;
        pg_tail_unlink(L, h, orow);
    }
    pg_tail_add(g, k, h);
}

/// Writes a box into the base's slot as two 8-byte halves, the two
/// registers the calling convention passes a qg_rect in. One 16-byte store
/// made the compiler assemble the box through the stack, and reading it
/// back whole stalled on store forwarding (6 ms per million moves).
static inline void pg_store_box(qg_rect *slot, qg_rect box)
{
    float lo[2] = {box.min_x, box.min_y}, hi[2] = {box.max_x, box.max_y};
    memcpy(&slot->min_x, lo, sizeof lo);
    memcpy(&slot->max_x, hi, sizeof hi);
}

/// A move within level k, the common case: a listed element keeps its slot
/// while its new point stays in the margins of its home cell. Its old point
/// lies in those margins, so after a step of at most near_x and near_y (half
/// a cell, with room for rounding) the new point's cell is within one of
/// home, and home follows from that cell and the home bits: the common move
/// maps one point, not two. `old` is the box the base held, already
/// replaced by `box`.
static inline void pg_move_within(point_grid *g, pg_level *L, int32_t k, uint32_t bits, qg_handle h, qg_rect old,
                                  qg_rect box)
{
    L->fresh = false;
    if (!(bits & PG_HB_TAIL) && (fabsf(box.min_x - old.min_x) <= L->near_x) &
                                    (fabsf(box.min_y - old.min_y) <= L->near_y)) {
        const pg_point np = pg_box_point(L, box);
        const int32_t hx = pg_home(np.x >> PG_QBITS, bits & 3), hy = pg_home(np.y >> PG_QBITS, bits >> 2 & 3);
        if (pg_in_margins(np, hx, hy))
            return;
    }
    pg_move_far(g, k, h, old, box);
}

/// A move to another level, or one that first reserves the cells a re-fit
/// asked for. Grow first: every reservation before any change.
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static qg_status pg_move_other(point_grid *g, qg_txn *txn, qg_handle h, qg_rect box)
{
    const int32_t k = pg_level_bits(g->hb[h]), kn = pg_level_of(g, box);
    if ((kn != k && !pg_reserve_level(g, txn, kn, 1)) || (g->want && !pg_grow(g, txn)))
        return QG_ERR_NOMEM;
    qg_rect *const slot = &g->base.boxes[h];
    const qg_rect old = *slot;
    if (kn == k) {
        pg_store_box(slot, box);
        pg_move_within(g, &g->level[k], k, g->hb[h], h, old, box);
        return QG_OK;
    }
    g->level[k].fresh = false;
    pg_take_out(g, h, old);
    *slot = box;
    pg_make_live(g, kn);
    g->level[kn].count++;
    g->hb[h] = (uint8_t)((uint32_t)kn << 4 | PG_HB_TAIL);
    pg_tail_add(g, kn, h);
    return QG_OK;
}

static qg_status point_grid_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    point_grid *g = (point_grid *)index;
    // Level 0 by name: its fields at fixed offsets, as with one level.
    if (!g->want && pg_fits(&g->level[0], box)) {
        qg_rect *const slot = &index->boxes[h];
        const qg_rect old = *slot;
        const uint32_t bits = g->hb[h];
        if ((bits & PG_HB_LEVEL) == 0) {
            pg_store_box(slot, box);
            pg_move_within(g, &g->level[0], 0, bits, h, old, box);
            return QG_OK;
        }
    }
    return pg_move_other(g, txn, h, box);
}

/// Gives back the spare capacity of a per-handle or per-slot array.
static void pg_trim(qg_alloc *alloc, void **data, int32_t *capacity, size_t elem, int32_t keep)
{
    if (keep < 16)
        keep = 16; // the smallest block qg_txn_reserve makes
    if (*capacity <= keep + keep / 64)
        return;
    *data = qg_mem_resize(alloc, *data, (size_t)*capacity * elem, (size_t)keep * elem);
    *capacity = keep;
}

static void point_grid_cleanup(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    // Once no handle was issued since the last cleanup (a steady
    // population), the arrays shrink to what is in use. Waiting for a steady
    // call keeps a growing population from paying a shrink and a regrow
    // every frame.
    const int32_t high = index->box_high;
    const bool steady = high > 0 && high == g->steady_high;
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        pg_level *L = &g->level[k];
        if (!L->live)
            continue;
        // Rebuild once the tail and the tombstones are more than a sliver of
        // the level, or a re-fit waits; otherwise, after any move, refresh
        // the snapshot's points in place (searches read boxes until then).
        const int64_t stale = (int64_t)L->tail + L->tombstones;
        if (L->refit || (stale > 0 && stale * 64 >= L->count) || pg_border_crowded(L))
            pg_rebuild(g, k);
        else if (!L->fresh)
            pg_refresh(L, index->boxes);
        if (steady && L->tail == 0 && L->tombstones == 0) {
            pg_trim(&index->alloc, (void **)&L->order, &L->order_capacity, sizeof(uint32_t),
                    L->count + pg_tail_room(L->count) + PG_PAD);
            pg_trim(&index->alloc, (void **)&L->sq, &L->sq_capacity, sizeof(uint16_t), L->order_capacity);
        }
        // Cells a re-fit left unused (a world that shrank to its elements).
        const int32_t cells = L->cols * L->rows;
        if (steady && L->start_capacity > 2 * (cells + 1) + 1024 && L->want_cells == 0) {
            pg_trim(&index->alloc, (void **)&L->start, &L->start_capacity, sizeof(int32_t), cells + 1);
            pg_trim(&index->alloc, (void **)&L->tail_head, &L->tail_head_capacity, sizeof(uint16_t), L->rows);
        }
    }
    if (steady) {
        pg_trim(&index->alloc, (void **)&index->boxes, &index->box_capacity, sizeof(qg_rect), high);
        pg_trim(&index->alloc, (void **)&g->hb, &g->hb_capacity, sizeof(uint8_t), high);
    }
    g->steady_high = high;
}

static void point_grid_clear(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    if (g->hb_capacity > 0)
        memset(g->hb, PG_HB_NONE, (size_t)g->hb_capacity);
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        pg_level *L = &g->level[k];
        L->count = 0;
        if (!L->live)
            continue;
        memset(L->start, 0, ((size_t)L->cols * L->rows + 1) * sizeof(int32_t));
        for (int32_t r = 0; r < L->rows; ++r)
            L->tail_head[r] = PG_TAIL_END;
        L->listed = L->tail = L->tombstones = 0;
        L->fresh = true;
    }
}

/// qg_query on one level; false when the callback asked to stop.
static bool pg_query_level(const pg_level *L, const qg_rect *boxes, qg_rect area, qg_query_fn *fn, void *user,
                           qg_query_stats *stats)
{
    const pg_point lo = pg_point_of(L, pg_widen(L, area.min_x), pg_widen(L, area.min_y));
    const pg_point hi = pg_point_of(L, area.max_x, area.max_y);
    int32_t cx0, cy0, cx1, cy1;
    pg_cell_range(L, lo, hi, &cx0, &cy0, &cx1, &cy1);
    for (int32_t cy = cy0; cy <= cy1; ++cy) {
        for (int32_t cx = cx0; cx <= cx1; ++cx) {
            const int32_t c = cy * L->cols + cx;
            stats->nodes_visited++;
            for (int32_t s = L->start[c]; s < L->start[c + 1]; ++s) {
                const qg_handle h = pg_order(L, s);
                if (h < 0)
                    continue;
                const pg_point p = pg_slot_point(L, boxes, s, h, cx, cy);
                if ((p.x < lo.x) | (p.x > hi.x) | (p.y < lo.y) | (p.y > hi.y))
                    continue;
                stats->elements_tested++;
                if (qg_overlaps(boxes[h], area) && !fn(h, user))
                    return false;
            }
        }
    }
    if (L->tail == 0)
        return true;
    const int32_t tx0 = lo.x >> PG_QBITS, tx1 = hi.x >> PG_QBITS;
    for (int32_t row = lo.y >> PG_QBITS; row <= hi.y >> PG_QBITS; ++row) {
        for (uint32_t t = L->tail_head[row]; t != PG_TAIL_END;) {
            const int32_t s = L->listed + (int32_t)t;
            const qg_handle h = pg_order(L, s);
            t = L->sq[s];
            if (!pg_tail_in_cols(L, s, tx0, tx1))
                continue;
            stats->elements_tested++;
            if (qg_overlaps(boxes[h], area) && !fn(h, user))
                return false;
        }
    }
    return true;
}

static void point_grid_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                             qg_query_stats *stats)
{
    const point_grid *g = (const point_grid *)index;
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        const pg_level *L = &g->level[k];
        if (L->count > 0 && !pg_query_level(L, index->boxes, area, fn, user, stats))
            return;
    }
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
static bool pg_flush(pg_batch *bt, qg_pair_fn *fn, void *user)
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

/// Candidates of a (point pa) among the slots [s_lo, s_hi) of cell (nx, ny):
/// those whose points are within reach.
static bool pg_scan(const pg_level *L, pg_batch *bt, qg_handle a, pg_point pa, int32_t s_lo, int32_t s_hi, int32_t nx,
                    int32_t ny, qg_pair_fn *fn, void *user)
{
    for (int32_t s = s_lo; s < s_hi; ++s) {
        const qg_handle b = pg_order(L, s);
        if (b < 0)
            continue;
        const pg_point pb = pg_slot_point(L, bt->boxes, s, b, nx, ny);
        const int32_t dx = pb.x - pa.x, dy = pb.y - pa.y;
        if ((dx >= -L->reach_x) & (dx <= L->reach_x) & (dy >= -L->reach_y) & (dy <= L->reach_y) &&
            !pg_candidate(bt, a, b, fn, user))
            return false;
    }
    return true;
}

/// Pairs of the listed elements of cell (cx, cy) with the elements listed
/// after them in the cell, in the next cell of the row and in the three
/// cells below. Partners are never two cells apart, so each pair is found
/// once: within a row from its element in the earlier slot, across rows
/// from its element in the upper row.
static bool pg_pairs_cell(const pg_level *L, pg_batch *bt, int32_t cx, int32_t cy, qg_pair_fn *fn, void *user)
{
    const int32_t c = cy * L->cols + cx;
    const int32_t *start = L->start;
    const bool east = cx + 1 < L->cols;
    const int32_t bx0 = cx > 0 ? cx - 1 : 0, bx1 = east ? cx + 1 : cx;
    for (int32_t sa = start[c]; sa < start[c + 1]; ++sa) {
        const qg_handle a = pg_order(L, sa);
        if (a < 0)
            continue;
        const pg_point pa = pg_slot_point(L, bt->boxes, sa, a, cx, cy);
        if (!pg_scan(L, bt, a, pa, sa + 1, start[c + 1], cx, cy, fn, user))
            return false;
        if (east && !pg_scan(L, bt, a, pa, start[c + 1], start[c + 2], cx + 1, cy, fn, user))
            return false;
        if (cy == 0)
            continue;
        for (int32_t bx = bx0; bx <= bx1; ++bx) {
            const int32_t b = c - L->cols + (bx - cx);
            if (!pg_scan(L, bt, a, pa, start[b], start[b + 1], bx, cy - 1, fn, user))
                return false;
        }
    }
    return true;
}

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
        if ((L->lx[i] + ux1 <= ahx) & (alx + ux1 <= L->lxh[i]) & (L->ly[i] + uy1 <= ahy) & (aly + uy1 <= L->lyh[i])) {
            bt->tested++;
            if (!qg_report_pair(fn, user, a, b))
                return false;
        } else if (!pg_candidate(bt, a, b, fn, user)) {
            return false;
        }
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
__attribute__((target("avx2"))) static bool pg_pairs_cell_wide(const pg_level *Lv, pg_batch *bt, int32_t cx,
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

/// Pairs of tail element a (tail index t, point p) with the snapshot and
/// with the tail elements after it.
static bool pg_pairs_tail(const pg_level *L, pg_batch *bt, int32_t t, qg_handle a, pg_point p, qg_pair_fn *fn,
                          void *user)
{
    const pg_point lo = {p.x - L->reach_x, p.y - L->reach_y};
    const pg_point hi = {p.x + L->reach_x, p.y + L->reach_y};
    int32_t cx0, cy0, cx1, cy1;
    pg_cell_range(L, lo, hi, &cx0, &cy0, &cx1, &cy1);
    for (int32_t cy = cy0; cy <= cy1; ++cy) {
        for (int32_t cx = cx0; cx <= cx1; ++cx) {
            const int32_t c = cy * L->cols + cx;
            if (!pg_scan(L, bt, a, p, L->start[c], L->start[c + 1], cx, cy, fn, user))
                return false;
        }
    }
    const int32_t r0 = lo.y > 0 ? lo.y >> PG_QBITS : 0;
    const int32_t r1 = (hi.y >> PG_QBITS) < L->rows ? hi.y >> PG_QBITS : L->rows - 1;
    const int32_t tx0 = lo.x > 0 ? lo.x >> PG_QBITS : 0, tx1 = hi.x >> PG_QBITS;
    for (int32_t row = r0; row <= r1; ++row) {
        for (uint32_t u = L->tail_head[row]; u != PG_TAIL_END;) {
            const int32_t s = L->listed + (int32_t)u;
            if ((int32_t)u > t && pg_tail_in_cols(L, s, tx0, tx1) && !pg_candidate(bt, a, pg_order(L, s), fn, user))
                return false;
            u = L->sq[s];
        }
    }
    return true;
}

#if defined(PG_HAVE_AVX2)
/// Cells cx0..cx1 of row cy for pg_cross on a fresh snapshot, sixteen
/// slots per compare. The cells of a row are one run of the snapshot, so the
/// run is loaded straight through; each lane is moved to cell cx0's origin
/// by the cells that begin before its slot. The lanes hold points relative
/// to that origin and the max corners' bounds from the size nibbles; b's
/// mapped corners, moved there and clamped to what 16 bits hold, decide each
/// lane as in pg_cross. False when the callback asked to stop.
__attribute__((target("avx2"))) static bool pg_cross_row_wide(const pg_level *L, pg_batch *bt, qg_handle b,
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
            if (!(doubt >> (2 * i) & 1u)) {
                bt->tested++;
                if (!qg_report_pair(fn, user, a, b))
                    return false;
            } else if (!pg_candidate(bt, a, b, fn, user)) {
                return false;
            }
        }
    }
    return true;
}
#endif

/// Pairs of element b (box `area`, of a coarser level) with the elements of
/// level L: the query of its box. On a fresh snapshot each listed point
/// comes with its size byte, which bounds its max corner from both sides:
/// with b's corners mapped exactly, most elements are proven apart or
/// overlapping without reading their boxes (the reasoning of
/// pg_wide_hits); the rest are candidates.
static bool pg_cross(const pg_level *L, bool wide, pg_batch *bt, qg_handle b, qg_rect area, qg_pair_fn *fn,
                     void *user)
{
    const pg_point lo = pg_point_of(L, pg_widen(L, area.min_x), pg_widen(L, area.min_y));
    pg_point bl, bh;
    pg_corners(L, area, &bl, &bh);
    const int32_t ux = L->unit_x, uy = L->unit_y;
    int32_t cx0, cy0, cx1, cy1;
    pg_cell_range(L, lo, bh, &cx0, &cy0, &cx1, &cy1);
    for (int32_t cy = cy0; cy <= cy1; ++cy) {
#if defined(PG_HAVE_AVX2)
        if (wide && L->fresh) {
            // Runs of at most 64 cells keep every lane within 16 bits.
            for (int32_t sx = cx0; sx <= cx1; sx += 64) {
                if (!pg_cross_row_wide(L, bt, b, sx, sx + 63 < cx1 ? sx + 63 : cx1, cy, bl, bh, fn, user))
                    return false;
            }
            continue;
        }
#else
        (void)wide;
#endif
        for (int32_t cx = cx0; cx <= cx1; ++cx) {
            const int32_t c = cy * L->cols + cx;
            for (int32_t s = L->start[c]; s < L->start[c + 1]; ++s) {
                const qg_handle a = pg_order(L, s);
                if (a < 0)
                    continue;
                if (!L->fresh) {
                    const pg_point p = pg_box_point(L, bt->boxes[a]);
                    if ((p.x >= lo.x) & (p.x <= bh.x) & (p.y >= lo.y) & (p.y <= bh.y) &&
                        !pg_candidate(bt, a, b, fn, user))
                        return false;
                    continue;
                }
                const pg_point p = pg_listed_point(L->sq[s], cx, cy);
                const uint32_t z = L->order[s] >> 24;
                const int32_t ahx = p.x + (int32_t)(z & 15) * ux, ahy = p.y + (int32_t)(z >> 4) * uy;
                if ((p.x > bh.x) | (p.y > bh.y) | (ahx < bl.x) | (ahy < bl.y))
                    continue;
                if ((p.x < bh.x) & (p.y < bh.y) & (bl.x + ux <= ahx) & (bl.y + uy <= ahy)) {
                    bt->tested++;
                    if (!qg_report_pair(fn, user, a, b))
                        return false;
                } else if (!pg_candidate(bt, a, b, fn, user)) {
                    return false;
                }
            }
        }
    }
    if (L->tail == 0)
        return true;
    const int32_t tx0 = lo.x >> PG_QBITS, tx1 = bh.x >> PG_QBITS;
    for (int32_t row = lo.y >> PG_QBITS; row <= bh.y >> PG_QBITS; ++row) {
        for (uint32_t t = L->tail_head[row]; t != PG_TAIL_END;) {
            const int32_t s = L->listed + (int32_t)t;
            t = L->sq[s];
            if (pg_tail_in_cols(L, s, tx0, tx1) && !pg_candidate(bt, pg_order(L, s), b, fn, user))
                return false;
        }
    }
    return true;
}

/// Starts fetching what pg_cross will read for a search of `area` in level
/// L: stage 0 the cell starts of its rows, stage 1 (once those arrived) the
/// first slots of each row's run. The runs of different rows lie far apart
/// in the snapshot, so without this each row of each search waits for
/// memory in turn.
static void pg_cross_prefetch(const pg_level *L, qg_rect area, int stage)
{
    const pg_point lo = pg_point_of(L, pg_widen(L, area.min_x), pg_widen(L, area.min_y));
    const pg_point hi = pg_point_of(L, area.max_x, area.max_y);
    int32_t cx0, cy0, cx1, cy1;
    pg_cell_range(L, lo, hi, &cx0, &cy0, &cx1, &cy1);
    for (int32_t cy = cy0; cy <= cy1; ++cy) {
        const int32_t c = cy * L->cols + cx0;
        if (stage == 0) {
            PG_PREFETCH(&L->start[c]);
            continue;
        }
        const int32_t t = L->start[c];
        PG_PREFETCH(&L->sq[t]);
        PG_PREFETCH(&L->order[t]);
        PG_PREFETCH(&L->order[t] + 16);
    }
}

/// Searches of level k's slots [s0, s1) in the levels from..to-1 that hold
/// elements, each with its element's box. The searches of the next
/// elements are fetched ahead (boxes eight ahead, cell starts two, slots
/// one).
static bool pg_search_slots(const point_grid *g, int32_t k, int32_t s0, int32_t s1, int32_t from, int32_t to,
                            pg_batch *bt, qg_pair_fn *fn, void *user)
{
    const pg_level *L = &g->level[k];
    for (int32_t s = s0; s < s1; ++s) {
        if (s + 8 < s1 && pg_order(L, s + 8) >= 0)
            PG_PREFETCH(&bt->boxes[pg_order(L, s + 8)]);
        for (int32_t ahead = 2; ahead >= 1; --ahead) {
            const qg_handle n = s + ahead < s1 ? pg_order(L, s + ahead) : -1;
            for (int32_t j = from; n >= 0 && j < to; ++j) {
                if (g->level[j].count > 0)
                    pg_cross_prefetch(&g->level[j], bt->boxes[n], ahead == 2 ? 0 : 1);
            }
        }
        const qg_handle b = pg_order(L, s);
        if (b < 0)
            continue;
        const qg_rect area = bt->boxes[b];
        for (int32_t j = from; j < to; ++j) {
            if (g->level[j].count > 0 && !pg_cross(&g->level[j], g->wide, bt, b, area, fn, user))
                return false;
        }
    }
    return true;
}

/// The searches of the coarser levels in the lowest populated one (`base`),
/// run during its cell walk: a coarser level's row of searches runs once the
/// walk has passed the last row of `base` they read, while those rows are
/// still in cache (run all at the end, the searches waited on memory for
/// each row they read: a third of qg_pairs at the mixed workload). The
/// order only decides what is in cache; every search reads a finished
/// snapshot.
typedef struct pg_sched {
    int32_t base;
    int32_t row[PG_LEVELS]; ///< next row of each coarser level to search from
} pg_sched;

/// The last row of level B that a search from row R of level K can read
/// (the point of an element listed in R lies within R's margins; its box
/// ends at most a bound above it). Only cache locality depends on it.
static int32_t pg_sched_limit(const pg_level *B, const pg_level *K, int32_t R)
{
    const double y = (double)K->oy + ((double)(R + 1) * PG_Q + PG_M + 1) / K->sy + (double)K->pad;
    if (!(y < (double)FLT_MAX))
        return INT32_MAX;
    const float yf = y > -(double)FLT_MAX ? (float)y : -FLT_MAX;
    return ((pg_map(yf, B->oy, B->sy, B->gmaxf_y) + PG_M) >> PG_QBITS) + 1;
}

/// Runs the searches whose rows of `base` are all walked once row r is
/// (r = INT32_MAX: every one left, the tails too).
static bool pg_sched_run(const point_grid *g, pg_sched *sc, int32_t r, pg_batch *bt, qg_pair_fn *fn, void *user)
{
    const pg_level *B = &g->level[sc->base];
    for (int32_t k = sc->base + 1; k < PG_LEVELS; ++k) {
        const pg_level *K = &g->level[k];
        if (K->count == 0)
            continue;
        while (sc->row[k] < K->rows && (r == INT32_MAX || pg_sched_limit(B, K, sc->row[k]) <= r)) {
            const int32_t R = sc->row[k]++;
            if (!pg_search_slots(g, k, K->start[R * K->cols], K->start[(R + 1) * K->cols], sc->base, sc->base + 1, bt,
                                 fn, user))
                return false;
        }
        if (r == INT32_MAX && !pg_search_slots(g, k, K->listed, K->listed + K->tail, sc->base, sc->base + 1, bt, fn, user))
            return false;
    }
    return true;
}

/// Every pair within one level; with a scheduler, the coarser levels'
/// searches in this one too, row by row.
static bool pg_pairs_level(const point_grid *g, const pg_level *L, pg_sched *sc, pg_batch *bt, qg_pair_fn *fn,
                           void *user)
{
    for (int32_t cy = 0; cy < L->rows; ++cy) {
        for (int32_t cx = 0; cx < L->cols; ++cx) {
#if defined(PG_HAVE_AVX2)
            bool stop = false;
            if (L->fresh && g->wide && pg_pairs_cell_wide(L, bt, cx, cy, fn, user, &stop)) {
                if (stop)
                    return false;
                continue;
            }
#endif
            if (!pg_pairs_cell(L, bt, cx, cy, fn, user))
                return false;
        }
        if (sc != NULL && !pg_sched_run(g, sc, cy, bt, fn, user))
            return false;
    }
    for (int32_t t = 0; t < L->tail; ++t) {
        const qg_handle a = pg_order(L, L->listed + t);
        if (a >= 0 && !pg_pairs_tail(L, bt, t, a, pg_box_point(L, bt->boxes[a]), fn, user))
            return false;
    }
    return sc == NULL || pg_sched_run(g, sc, INT32_MAX, bt, fn, user);
}

static void point_grid_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    const point_grid *g = (const point_grid *)index;
    pg_batch bt;
    bt.boxes = index->boxes;
    bt.head = bt.tail = 0;
    bt.tested = 0;
    // Pairs within each level, and across: each element of a coarser level
    // searches the finer ones with its box (the lowest during its walk).
    pg_sched sc = {-1, {0}};
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        const pg_level *L = &g->level[k];
        if (L->count == 0)
            continue;
        stats->nodes_visited += (int64_t)L->cols * L->rows;
        if (sc.base < 0) {
            sc.base = k;
            if (!pg_pairs_level(g, L, &sc, &bt, fn, user))
                goto stop;
            continue;
        }
        if (!pg_pairs_level(g, L, NULL, &bt, fn, user) ||
            !pg_search_slots(g, k, 0, L->listed + L->tail, sc.base + 1, k, &bt, fn, user))
            goto stop;
    }
    pg_flush(&bt, fn, user);
stop:
    stats->elements_tested = bt.tested;
}

static void point_grid_stats(const qg_index *index, qg_stats *stats)
{
    const point_grid *g = (const point_grid *)index;
    stats->nodes = 0;
    stats->max_depth_reached = 0;
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        const pg_level *L = &g->level[k];
        if (!L->live)
            continue;
        stats->nodes += L->cols * L->rows;
        if (L->count > 0)
            stats->max_depth_reached = k;
    }
    stats->leaves = stats->nodes;
}

/// qg_visit on one level: its cells at depth k.
static void pg_visit_level(const pg_level *L, const qg_rect *boxes, int32_t k, qg_visit_fn *fn, void *user)
{
    // Cell edges from the mapping's inverse (the world's origin and scale).
    const double wx = (double)PG_Q / L->sx, wy = (double)PG_Q / L->sy;
    // Tail elements count in the cell of their point, gathered a chunk of
    // columns at a time (one walk of the row's list per chunk).
    enum { CHUNK = 256 };
    int32_t extra[CHUNK];
    for (int32_t cy = 0; cy < L->rows; ++cy) {
        for (int32_t x0 = 0; x0 < L->cols; x0 += CHUNK) {
            const int32_t x1 = x0 + CHUNK < L->cols ? x0 + CHUNK : L->cols;
            memset(extra, 0, sizeof extra);
            for (uint32_t t = L->tail_head[cy]; t != PG_TAIL_END;) {
                const int32_t s = L->listed + (int32_t)t;
                const int32_t cx = pg_box_point(L, boxes[pg_order(L, s)]).x >> PG_QBITS;
                if (cx >= x0 && cx < x1)
                    extra[cx - x0]++;
                t = L->sq[s];
            }
            for (int32_t cx = x0; cx < x1; ++cx) {
                const int32_t c = cy * L->cols + cx;
                int32_t count = extra[cx - x0];
                for (int32_t s = L->start[c]; s < L->start[c + 1]; ++s)
                    count += pg_order(L, s) >= 0;
                const qg_rect r = {(float)(L->ox + cx * wx), (float)(L->oy + cy * wy), (float)(L->ox + (cx + 1) * wx),
                                   (float)(L->oy + (cy + 1) * wy)};
                fn(r, k, count, user);
            }
        }
    }
}

static void point_grid_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    const point_grid *g = (const point_grid *)index;
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        const pg_level *L = &g->level[k];
        if (L->live && (k == 0 || L->count > 0))
            pg_visit_level(L, index->boxes, k, fn, user);
    }
}

/// True when the element at slot s of cell (cx, cy) of level k is live,
/// listed there (its level, its point in the cell's margins, its home bits
/// naming the cell, its offsets exact while fresh) and at no earlier slot of
/// the cell.
static bool pg_listed_valid(const point_grid *g, int32_t k, qg_handle h, int32_t s, int32_t cx, int32_t cy)
{
    const qg_index *index = &g->base;
    const pg_level *L = &g->level[k];
    if (!qg_slot_live(index, h) || pg_level_of(g, index->boxes[h]) != k)
        return false;
    const uint32_t bits = g->hb[h];
    if (bits != ((uint32_t)k << 4 | (uint32_t)((cx & 3) | (cy & 3) << 2)))
        return false;
    const pg_point p = pg_box_point(L, index->boxes[h]);
    if (!pg_in_margins(p, cx, cy))
        return false;
    if (L->fresh && (L->sq[s] != pg_offsets(p, cx, cy) ||
                     L->order[s] >> 24 != pg_size(L, p, pg_point_of(L, index->boxes[h].max_x, index->boxes[h].max_y))))
        return false;
    for (int32_t e = L->start[cy * L->cols + cx]; e < s; ++e) {
        if (pg_order(L, e) == h)
            return false;
    }
    return true;
}

/// Checks one level; adds its elements to *elements and its bytes to *bytes.
static qg_status pg_validate_level(const point_grid *g, int32_t k, int64_t *elements, size_t *bytes)
{
    const qg_index *index = &g->base;
    const pg_level *L = &g->level[k];
    *bytes += (size_t)L->start_capacity * sizeof(int32_t) + (size_t)L->order_capacity * sizeof(uint32_t) +
              (size_t)L->sq_capacity * sizeof(uint16_t) + (size_t)L->tail_head_capacity * sizeof(uint16_t);
    if (!L->live)
        return L->count == 0 && L->start_capacity == 0 ? QG_OK : QG_ERR_INVALID;
    const int64_t cells = (int64_t)L->cols * L->rows;
    if (cells < 1 || cells + 1 > L->start_capacity || L->rows > L->tail_head_capacity ||
        (L->reach_x > PG_MAX_REACH && L->cols > 1) || (L->reach_y > PG_MAX_REACH && L->rows > 1))
        return QG_ERR_INVALID;
    if (L->listed < 0 || L->tail < 0 || L->tail > (int32_t)PG_TAIL_END || L->sq_capacity < L->order_capacity ||
        (int64_t)L->listed + L->tail > L->order_capacity - PG_PAD || L->order_capacity < L->count + PG_PAD)
        return QG_ERR_INVALID;
    if (L->start[0] != 0 || L->start[cells] != L->listed)
        return QG_ERR_INVALID;
    // The snapshot: every slot of every cell a tombstone or an element
    // listed there, once.
    int64_t listed = 0, tombs = 0;
    for (int32_t cy = 0; cy < L->rows; ++cy) {
        for (int32_t cx = 0; cx < L->cols; ++cx) {
            const int32_t c = cy * L->cols + cx;
            if (L->start[c] > L->start[c + 1])
                return QG_ERR_INVALID;
            for (int32_t s = L->start[c]; s < L->start[c + 1]; ++s) {
                const qg_handle h = pg_order(L, s);
                if (h == -1) {
                    tombs++;
                    continue;
                }
                if (!pg_listed_valid(g, k, h, s, cx, cy))
                    return QG_ERR_INVALID;
                listed++;
            }
        }
    }
    // The tail: each used slot a tombstone or in the list of its point's row.
    int64_t tail = 0;
    for (int32_t t = 0; t < L->tail; ++t) {
        const qg_handle h = pg_order(L, L->listed + t);
        if (h == -1) {
            tombs++;
            continue;
        }
        if (!qg_slot_live(index, h) || g->hb[h] != ((uint32_t)k << 4 | PG_HB_TAIL) ||
            pg_level_of(g, index->boxes[h]) != k)
            return QG_ERR_INVALID;
        tail++;
        const pg_point p = pg_box_point(L, index->boxes[h]);
        if (L->order[L->listed + t] >> 24 != pg_tail_col(p))
            return QG_ERR_INVALID;
        const int32_t row = p.y >> PG_QBITS;
        int32_t steps = 0;
        uint32_t u = L->tail_head[row];
        while (u != PG_TAIL_END && (int32_t)u != t) {
            if ((int32_t)u >= L->tail || ++steps > L->tail)
                return QG_ERR_INVALID;
            u = L->sq[L->listed + (int32_t)u];
        }
        if (u == PG_TAIL_END)
            return QG_ERR_INVALID;
    }
    // The lists hold exactly the live tail slots (a tombstone is unlinked).
    int64_t linked = 0;
    for (int32_t r = 0; r < L->rows; ++r) {
        for (uint32_t u = L->tail_head[r]; u != PG_TAIL_END; ++linked) {
            if ((int32_t)u >= L->tail || linked > L->tail || pg_order(L, L->listed + (int32_t)u) < 0)
                return QG_ERR_INVALID;
            u = L->sq[L->listed + (int32_t)u];
        }
    }
    if (listed + tail != L->count || linked != tail || tombs != L->tombstones)
        return QG_ERR_INVALID;
    *elements += L->count;
    return QG_OK;
}

static qg_status point_grid_validate(const qg_index *index, size_t *bytes)
{
    const point_grid *g = (const point_grid *)index;
    if (index->box_high > 0 && g->hb_capacity < index->box_high)
        return QG_ERR_INVALID;
    // A free handle belongs to no level (a rebuild finds levels by hb).
    for (int32_t h = 0; h < index->box_high; ++h) {
        if (!qg_slot_live(index, h) && (g->hb[h] & PG_HB_LEVEL) != PG_HB_NONE)
            return QG_ERR_INVALID;
    }
    int64_t elements = 0;
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        const qg_status s = pg_validate_level(g, k, &elements, bytes);
        if (s != QG_OK)
            return s;
    }
    if (elements != index->count)
        return QG_ERR_INVALID;
    *bytes += (size_t)g->hb_capacity * sizeof(uint8_t);
    return QG_OK;
}

const qg_kind_class qg_point_grid_class = {
    .kind = QG_POINT_GRID,
    .size = sizeof(point_grid),
    .configure = point_grid_configure,
    .init = point_grid_init,
    .destroy = point_grid_destroy,
    .insert = point_grid_insert,
    .remove = point_grid_remove,
    .move = point_grid_move,
    .cleanup = point_grid_cleanup,
    .clear = point_grid_clear,
    .query = point_grid_query,
    .pairs = point_grid_pairs,
    .stats = point_grid_stats,
    .visit = point_grid_visit,
    .validate = point_grid_validate,
};
