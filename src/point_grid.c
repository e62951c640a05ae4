// QG_POINT_GRID: the uniform upper-bound grid of "Dirty Trick: Uniform Sizes"
// (seed 003, part 6).
//
// - config.max_element_size is the upper bound on every box's width and
//   height; a larger box is refused with QG_ERR_CAPACITY and nothing changes.
//   0 means "choose": twice element_size; with no element_size either, no
//   bound (every box fits, the grid is one cell: correct, not fast).
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
//
// Layout: a cell-sorted snapshot, because handles are spatially random and
// anything read by handle is a cache miss per element when the grid is
// walked in space order (the per-handle linked lists this replaced spent
// most of qg_pairs chasing them).
// - `order` holds the handles cell by cell, `sq` their points (offsets in
//   the cell, a byte per axis) beside them; cell c owns slots [start[c],
//   start[c+1]). 6 bytes per element, 4 per cell. A removed element leaves a
//   tombstone until the next rebuild. Handles take 24 bits of `order` (the
//   kind holds at most 16,777,215 elements, QG_ERR_CAPACITY past that); the
//   other byte is the size the seed's trick leaves out of the hot data
//   elsewhere: the box's mapped width and height, a nibble each, rounded up.
//   It costs nothing in memory and lets the pair kernel test each min corner
//   against an upper bound of the other's max corner, so almost every
//   candidate it passes to the exact test overlaps (at 1M agents: 232,217
//   candidates for 206,845 pairs, against 664,431 with points alone).
// - A home cell is loose: it lists elements whose point lies within a margin
//   of PG_M quanta around it, so a move keeps the element's slot and writes
//   nothing but the base's box while the point stays there. Searches widen
//   by the margin; one cell is still wider than the pair reach plus both
//   margins, so partners are never two cells apart. Each element keeps one
//   byte `hb[h]`: its home cell's column and row modulo 4, enough to tell
//   the home from the point (at most one cell away), and a tail flag.
// - The snapshot's points are exact until a listed element moves (`fresh`);
//   after that searches read each listed element's point from its box (the
//   same answers, a cache miss each) until qg_cleanup refreshes or re-sorts.
// - A move whose step is under half a cell maps only its new point: the old
//   one was within the home's margins, so home is within one cell of the new
//   point's cell and follows from that cell and the home bits.
// - The tail: elements inserted since the last re-sort, or moved past their
//   margin, sit after the snapshot in `order`, in one singly-linked list per
//   row (the row-based lists of part 2) linked through `sq`; the slot's top
//   byte holds the point's column (mod 256), so searches pass over tail
//   elements of far columns without reading their boxes.
// - qg_cleanup, once a frame: while the tail and the tombstones are a sliver
//   (under 1/64 of the population) it refreshes the snapshot in place. Every
//   listed element is still within its home's margins, so its slot stays
//   and only its point and size byte are rewritten from its box: a walk in
//   slot order with sequential writes, its random box reads prefetched ahead
//   (about 5.5 ms at 1M agents, against 10-11 ms for the re-sort, whose
//   scatter writes every slot at random). Past the sliver it re-sorts. At
//   the agents workload (1M, default cells) no element leaves its margins
//   for several frames after a re-sort, then more and more do: a re-sort
//   comes about every 26 frames. `order` keeps tail room for them
//   (pg_tail_room), so the re-sort happens here and not inside a qg_move
//   that finds no slot.
// - Re-sort (pg_rebuild): a counting sort of every live handle by cell,
//   straight from the base's boxes, into `order`, `sq` and `start` in place:
//   no allocation, so qg_cleanup can run it, and so does an insert or move
//   whose tail is full. It is one pass over the boxes and a scatter.
// - Pairs walk the cells in order; each element is compared with the later
//   slots of its cell, the next cell of its row and the three cells of the
//   row below: short contiguous ranges of the snapshot, sixteen points per
//   AVX2 compare where the processor has it (chosen at qg_create), one at a
//   time otherwise. A pair of one row is found from its element in the
//   earlier slot, a pair across two rows from the upper row: every pair
//   once, with no sorting and no visited set. The size byte bounds each max
//   corner from below as well as above, so a candidate whose min corners map
//   below the other's lowest possible max corner overlaps for certain and is
//   reported without reading a box (four in five at the agents workload);
//   the others wait in a ring, their boxes prefetched, for the exact test.
//   Tail elements then search the snapshot and the later tail elements
//   around them.
// - Memory per element: 16 (the base's box) + 4 (order: handle and size) +
//   2 (sq) + 1 (hb), plus 4 per cell and the tail room (pg_tail_room);
//   qg_cleanup gives other spare capacity back once the population is
//   steady.
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
/// hb: home column mod 4 in bits 0-1, home row mod 4 in bits 2-3.
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

#if defined(__GNUC__)
#define PG_PREFETCH(p) __builtin_prefetch(p)
#else
#define PG_PREFETCH(p) ((void)(p))
#endif

typedef struct point_grid {
    qg_index base;
    int32_t *start; ///< per cell, plus one: the cell's first slot
    int32_t start_capacity;
    /// Per slot: handle (low 24 bits) in cell order, then the tail; the top
    /// byte is the box's width (low nibble) and height in units, rounded up.
    /// PG_PAD slots of slack at the end.
    uint32_t *order;
    int32_t order_capacity;
    uint16_t *sq; ///< per slot: offsets from home - PG_M (listed), next tail index (tail)
    int32_t sq_capacity;
    uint8_t *hb; ///< per handle: home cell bits, PG_HB_TAIL
    int32_t hb_capacity;
    uint16_t *tail_head; ///< per row: first tail index, PG_TAIL_END if none
    int32_t tail_head_capacity;
    int32_t listed;     ///< slots of the snapshot: [0, listed)
    int32_t tail;       ///< tail slots used: [listed, listed + tail)
    int32_t tombstones; ///< dead slots in the snapshot and the tail
    bool fresh;         ///< sq holds every listed element's current point
    bool wide;          ///< the processor runs AVX2 (pg_pairs_cell_wide)
    int32_t cols, rows;
    int32_t gmax_x, gmax_y; ///< largest fixed-point coordinate: cols * PG_Q - 1
    float gmaxf_x, gmaxf_y; ///< the same as floats (exact: below 2^24)
    float ox, oy;           ///< world origin
    float sx, sy;           ///< quanta per world unit
    float bound;            ///< max_element_size
    float pad;              ///< bound, rounded up (see pg_widen)
    float near_x, near_y;   ///< half a cell in world units: a move this short keeps the home's neighbourhood
    int32_t reach_x, reach_y; ///< quanta two points of an overlapping pair can differ by, at most
    int32_t unit_x, unit_y;   ///< quanta per unit of the size byte
    /// Size nibble of a mapped width (x) or height (y) d, for d below
    /// 256 (larger ones count as 255): min(ceil(d / unit), 15), without a
    /// division per box.
    uint8_t size_x[256], size_y[256];
    int32_t steady_high;    ///< box_high seen by the last qg_cleanup
} point_grid;

/// Handles are stored in 24 bits: the kind holds at most this many
/// (QG_ERR_CAPACITY past it); the largest value marks a tombstone.
#define PG_MAX_HANDLES 0xFFFFFF

static inline qg_handle pg_order(const point_grid *g, int32_t s)
{
    const uint32_t v = g->order[s] & PG_MAX_HANDLES;
    return v == PG_MAX_HANDLES ? -1 : (qg_handle)v;
}

/// Sets the handle of slot s (-1: a tombstone) and its size byte.
static inline void pg_set_order(point_grid *g, int32_t s, qg_handle h, uint32_t size)
{
    g->order[s] = (h < 0 ? PG_MAX_HANDLES : (uint32_t)h) | size << 24;
}

typedef struct pg_point {
    int32_t x, y; ///< fixed-point grid coordinates
} pg_point;

/// Fixed-point coordinate of v, clamped into [0, gmax]. Monotonic in v, so
/// a point inside a range maps inside the mapped range.
static inline int32_t pg_map(float v, float origin, float scale, float gmax)
{
    float f = (v - origin) * scale;
    f = f > 0.0f ? f : 0.0f; // NaN (a free slot's box) maps to 0
    f = f < gmax ? f : gmax;
    return (int32_t)f;
}

static inline pg_point pg_point_of(const point_grid *g, float x, float y)
{
    return (pg_point){pg_map(x, g->ox, g->sx, g->gmaxf_x), pg_map(y, g->oy, g->sy, g->gmaxf_y)};
}

static inline pg_point pg_box_point(const point_grid *g, qg_rect b)
{
    return pg_point_of(g, b.min_x, b.min_y);
}

/// The points of two boxes' min corners at once (one move maps both). Same
/// clamps as pg_map, without branches.
static inline void pg_point_pair(const point_grid *g, qg_rect a, qg_rect b, pg_point *pa, pg_point *pb)
{
#if defined(__SSE2__)
    __m128 f = _mm_mul_ps(_mm_sub_ps(_mm_setr_ps(a.min_x, a.min_y, b.min_x, b.min_y),
                                     _mm_setr_ps(g->ox, g->oy, g->ox, g->oy)),
                          _mm_setr_ps(g->sx, g->sy, g->sx, g->sy));
    f = _mm_min_ps(_mm_max_ps(f, _mm_setzero_ps()),
                   _mm_setr_ps(g->gmaxf_x, g->gmaxf_y, g->gmaxf_x, g->gmaxf_y));
    int32_t out[4];
    _mm_storeu_si128((__m128i *)out, _mm_cvttps_epi32(f));
    *pa = (pg_point){out[0], out[1]};
    *pb = (pg_point){out[2], out[3]};
#else
    *pa = pg_box_point(g, a);
    *pb = pg_box_point(g, b);
#endif
}

static inline int32_t pg_cell_of(const point_grid *g, pg_point p)
{
    return (p.y >> PG_QBITS) * g->cols + (p.x >> PG_QBITS);
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

/// True when the box is within the bound. Same float subtraction as the
/// contract's definition of "width".
static inline bool pg_fits(const point_grid *g, qg_rect b)
{
    return (b.max_x - b.min_x <= g->bound) & (b.max_y - b.min_y <= g->bound);
}

/// The lower search limit for an area starting at v: every box that fits the
/// bound and reaches v has its min corner at or above the result.
///
/// Such a box has min >= v - bound * (1 + 2^-24) in real numbers (its width
/// passed pg_fits after one rounding). pad is above bound * (1 + 2^-24), so
/// v - pad is below that; v - pad is then rounded to the nearest float, and
/// no float lies between a real number and its nearest float, so a float
/// min at or above v - pad is at or above the rounded result too.
static inline float pg_widen(const point_grid *g, float v)
{
    return v - g->pad;
}

/// The cells whose listed elements may have points in [lo, hi] (margins
/// included), as inclusive column and row ranges.
static inline void pg_cell_range(const point_grid *g, pg_point lo, pg_point hi, int32_t *cx0, int32_t *cy0,
                                 int32_t *cx1, int32_t *cy1)
{
    *cx0 = lo.x > PG_M ? (lo.x - PG_M) >> PG_QBITS : 0;
    *cy0 = lo.y > PG_M ? (lo.y - PG_M) >> PG_QBITS : 0;
    *cx1 = (hi.x + PG_M) >> PG_QBITS;
    *cy1 = (hi.y + PG_M) >> PG_QBITS;
    if (*cx1 >= g->cols)
        *cx1 = g->cols - 1;
    if (*cy1 >= g->rows)
        *cy1 = g->rows - 1;
}

/// The point of the element at slot s, listed in cell (cx, cy).
static inline pg_point pg_slot_point(const point_grid *g, int32_t s, qg_handle h, int32_t cx, int32_t cy)
{
    return g->fresh ? pg_listed_point(g->sq[s], cx, cy) : pg_box_point(g, g->base.boxes[h]);
}

/// Most tail slots before a rebuild: a fraction of the population, so bulk
/// inserts rebuild geometrically rarely, capped by the 16-bit links.
static int32_t pg_tail_limit(const point_grid *g)
{
    int32_t limit = g->base.count / 8;
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
static inline uint32_t pg_size(const point_grid *g, pg_point p, pg_point m)
{
    const uint32_t w = (uint32_t)(m.x - p.x), h = (uint32_t)(m.y - p.y);
    return (uint32_t)g->size_x[w < 255 ? w : 255] | (uint32_t)g->size_y[h < 255 ? h : 255] << 4;
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
static inline void pg_corners(const point_grid *g, qg_rect b, pg_point *p, pg_point *m)
{
    pg_point_pair(g, b, (qg_rect){b.max_x, b.max_y, 0, 0}, p, m);
}

/// Writes slot s of cell (cx, cy): handle h, the size byte of corners p and
/// m, and p's offsets.
static inline void pg_write_slot(point_grid *g, int32_t s, uint32_t h, pg_point p, pg_point m, int32_t cx, int32_t cy)
{
    g->order[s] = h | pg_size(g, p, m) << 24;
    g->sq[s] = (uint16_t)pg_offsets(p, cx, cy);
}

/// Lists every live element in the cell of its point: a counting sort by
/// cell, straight from the base's boxes. Handles ascend within a cell. Needs
/// room for count slots; never allocates.
static void pg_rebuild(point_grid *g)
{
    const qg_index *index = &g->base;
    const qg_rect *boxes = index->boxes;
    const int32_t high = index->box_high;
    const int32_t cells = g->cols * g->rows;
    int32_t *start = g->start;
    memset(start, 0, ((size_t)cells + 1) * sizeof(int32_t));
    // Two boxes per mapping; a free slot (NaN) maps to a clamped point of
    // no consequence and is not counted.
    int32_t h = 0;
    for (; h + 1 < high; h += 2) {
        pg_point p0, p1;
        pg_point_pair(g, boxes[h], boxes[h + 1], &p0, &p1);
        start[pg_cell_of(g, p0)] += !isnan(boxes[h].min_x);
        start[pg_cell_of(g, p1)] += !isnan(boxes[h + 1].min_x);
    }
    if (h < high && !isnan(boxes[h].min_x))
        start[pg_cell_of(g, pg_box_point(g, boxes[h]))]++;
    // Ends of the cells; the scatter below counts each back to its start.
    int32_t sum = 0;
    for (int32_t c = 0; c < cells; ++c) {
        sum += start[c];
        start[c] = sum;
    }
    start[cells] = sum;
    for (h = high - 1; h >= 0; --h) {
        const qg_rect b = boxes[h];
        if (isnan(b.min_x))
            continue;
        pg_point p, m;
        pg_corners(g, b, &p, &m);
        const int32_t cx = p.x >> PG_QBITS, cy = p.y >> PG_QBITS;
        pg_write_slot(g, --start[cy * g->cols + cx], (uint32_t)h, p, m, cx, cy);
        g->hb[h] = (uint8_t)((cx & 3) | (cy & 3) << 2);
    }
    for (int32_t r = 0; r < g->rows; ++r)
        g->tail_head[r] = PG_TAIL_END;
    g->listed = sum;
    g->tail = 0;
    g->tombstones = 0;
    g->fresh = true;
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
static void pg_refresh(point_grid *g)
{
    const qg_rect *boxes = g->base.boxes;
    const uint32_t *order = g->order;
    const int32_t *start = g->start;
    const int32_t listed = g->listed;
    int32_t s = 0;
    for (int32_t cy = 0; cy < g->rows; ++cy) {
        for (int32_t cx = 0; cx < g->cols; ++cx) {
            const int32_t end = start[cy * g->cols + cx + 1];
            for (; s < end; ++s) {
                const int32_t ahead = s + PG_AHEAD < listed ? s + PG_AHEAD : listed - 1;
                const uint32_t va = order[ahead] & PG_MAX_HANDLES;
                if (va != PG_MAX_HANDLES)
                    PG_PREFETCH(&boxes[va]);
                const uint32_t v = order[s] & PG_MAX_HANDLES;
                if (v == PG_MAX_HANDLES)
                    continue;
                pg_point p, m;
                pg_corners(g, boxes[v], &p, &m);
                pg_write_slot(g, s, v, p, m, cx, cy);
            }
        }
    }
    g->fresh = true;
}

/// A tail slot's top byte: the column of the element's point, modulo 256,
/// so searches pass over tail elements of the row in far columns without
/// reading their boxes.
static inline uint32_t pg_tail_col(pg_point p)
{
    return (uint32_t)(p.x >> PG_QBITS) & 0xFFu;
}

/// True when tail slot s may hold a point of a column in [cx0, cx1].
static inline bool pg_tail_in_cols(const point_grid *g, int32_t s, int32_t cx0, int32_t cx1)
{
    return cx1 - cx0 >= 255 || (((g->order[s] >> 24) - (uint32_t)cx0) & 0xFFu) <= (uint32_t)(cx1 - cx0);
}

/// Adds h (box already in boxes[h], point p) to the tail, or rebuilds when
/// the tail is full. The caller has made room for count slots.
static void pg_tail_add(point_grid *g, qg_handle h, pg_point p)
{
    if (g->tail >= pg_tail_limit(g) || g->listed + g->tail >= g->order_capacity - PG_PAD) {
        pg_rebuild(g);
        return;
    }
    const int32_t s = g->listed + g->tail;
    const int32_t row = p.y >> PG_QBITS;
    pg_set_order(g, s, h, pg_tail_col(p));
    g->sq[s] = g->tail_head[row];
    g->tail_head[row] = (uint16_t)g->tail++;
    g->hb[h] = PG_HB_TAIL;
}

/// Takes tail element h out of the list of `row`, leaving a tombstone.
static void pg_tail_unlink(point_grid *g, qg_handle h, int32_t row)
{
    uint16_t *link = &g->tail_head[row];
    while (*link != PG_TAIL_END) {
        const int32_t s = g->listed + *link;
        if (pg_order(g, s) == h) {
            *link = g->sq[s];
            pg_set_order(g, s, -1, 0);
            g->tombstones++;
            return;
        }
        link = &g->sq[s];
    }
}

/// Leaves a tombstone in the home cell slot of listed element h, whose
/// current point is p.
static void pg_unlist(point_grid *g, qg_handle h, pg_point p)
{
    const uint32_t bits = g->hb[h];
    const int32_t hx = pg_home(p.x >> PG_QBITS, bits & 3), hy = pg_home(p.y >> PG_QBITS, bits >> 2 & 3);
    const int32_t c = hy * g->cols + hx;
    for (int32_t s = g->start[c]; s < g->start[c + 1]; ++s) {
        if (pg_order(g, s) == h) {
            pg_set_order(g, s, -1, 0);
            break;
        }
    }
    g->tombstones++;
}

static qg_status point_grid_configure(qg_config *config)
{
    const float extent = qg_rect_extent(config->bounds);
    if (config->max_element_size == 0.0f) {
        // Twice the typical width; with no typical width either, no bound
        // at all: one cell, every box accepted, correct but no faster than
        // brute force. Set max_element_size to get the speed.
        config->max_element_size = config->element_size > 0.0f ? 2.0f * config->element_size : INFINITY;
        if (!(config->max_element_size > 0.0f))
            return QG_ERR_INVALID;
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

/// Cells along an axis of the given extent: as many as fit at cell_size
/// (cells only get wider than asked), at least 1, at most PG_MAX_SIDE.
static int32_t pg_side(float extent, float cell)
{
    double n = floor((double)extent / (double)cell);
    if (!(n >= 1.0))
        n = 1.0;
    if (n > PG_MAX_SIDE)
        n = PG_MAX_SIDE;
    return (int32_t)n;
}

/// Quanta per world unit along an axis of `side` cells.
static float pg_scale(int32_t side, float extent)
{
    return (float)((double)side * PG_Q / (double)extent);
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

static qg_status point_grid_init(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    const qg_config *c = &index->config;
    const float ex = c->bounds.max_x - c->bounds.min_x, ey = c->bounds.max_y - c->bounds.min_y;
    g->bound = c->max_element_size;
    g->pad = nextafterf(g->bound + g->bound * 0x1p-20f, INFINITY);
    g->cols = pg_side(ex, c->cell_size);
    g->rows = pg_side(ey, c->cell_size);
    while ((int64_t)g->cols * g->rows > PG_MAX_CELLS) {
        // Halve the longer side: cells only get wider, which keeps every
        // requirement on them.
        if (g->cols >= g->rows)
            g->cols = (g->cols + 1) / 2;
        else
            g->rows = (g->rows + 1) / 2;
    }
    // Configure made cells wide enough; this absorbs rounding.
    while (g->cols > 1 && pg_reach(g->pad, pg_scale(g->cols, ex)) > PG_MAX_REACH)
        g->cols--;
    while (g->rows > 1 && pg_reach(g->pad, pg_scale(g->rows, ey)) > PG_MAX_REACH)
        g->rows--;
    g->gmax_x = g->cols * PG_Q - 1;
    g->gmax_y = g->rows * PG_Q - 1;
    g->gmaxf_x = (float)g->gmax_x;
    g->gmaxf_y = (float)g->gmax_y;
    g->ox = c->bounds.min_x;
    g->oy = c->bounds.min_y;
    g->sx = pg_scale(g->cols, ex);
    g->sy = pg_scale(g->rows, ey);
    // Half a cell (64 quanta) leaves 32 quanta for the margin and over 30
    // for rounding before a point could pass a neighbour of its home.
    g->near_x = (float)(PG_Q / 2) / g->sx;
    g->near_y = (float)(PG_Q / 2) / g->sy;
    g->reach_x = pg_reach(g->pad, g->sx);
    g->reach_y = pg_reach(g->pad, g->sy);
    // A mapped width is below the reach: fifteen units cover it.
    g->unit_x = g->reach_x > 15 ? (g->reach_x + 14) / 15 : 1;
    g->unit_y = g->reach_y > 15 ? (g->reach_y + 14) / 15 : 1;
    pg_size_table(g->size_x, g->unit_x);
    pg_size_table(g->size_y, g->unit_y);
    g->steady_high = -1;
#if defined(PG_HAVE_AVX2)
    g->wide = __builtin_cpu_supports("avx2");
#endif
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    const int32_t cells = g->cols * g->rows;
    if (!qg_txn_reserve(&txn, (void **)&g->start, &g->start_capacity, sizeof(int32_t), (int64_t)cells + 1) ||
        !qg_txn_reserve(&txn, (void **)&g->tail_head, &g->tail_head_capacity, sizeof(uint16_t), g->rows)) {
        qg_txn_rollback(&txn);
        return QG_ERR_NOMEM;
    }
    pg_rebuild(g);
    return QG_OK;
}

static void point_grid_destroy(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    qg_array_free(&index->alloc, (void **)&g->start, &g->start_capacity, sizeof(int32_t));
    qg_array_free(&index->alloc, (void **)&g->order, &g->order_capacity, sizeof(uint32_t));
    qg_array_free(&index->alloc, (void **)&g->sq, &g->sq_capacity, sizeof(uint16_t));
    qg_array_free(&index->alloc, (void **)&g->hb, &g->hb_capacity, sizeof(uint8_t));
    qg_array_free(&index->alloc, (void **)&g->tail_head, &g->tail_head_capacity, sizeof(uint16_t));
}

static qg_status point_grid_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    point_grid *g = (point_grid *)index;
    if (!pg_fits(g, box) || h >= PG_MAX_HANDLES)
        return QG_ERR_CAPACITY;
    // count does not include h yet: a rebuild lists count + 1 elements.
    const int64_t slots = (int64_t)index->count + 1 + PG_PAD;
    if (!qg_txn_reserve(txn, (void **)&g->hb, &g->hb_capacity, sizeof(uint8_t), (int64_t)h + 1) ||
        !qg_txn_reserve(txn, (void **)&g->order, &g->order_capacity, sizeof(uint32_t), slots) ||
        !qg_txn_reserve(txn, (void **)&g->sq, &g->sq_capacity, sizeof(uint16_t), g->order_capacity))
        return QG_ERR_NOMEM;
    pg_tail_add(g, h, pg_box_point(g, box));
    return QG_OK;
}

static void point_grid_remove(qg_index *index, qg_handle h)
{
    point_grid *g = (point_grid *)index;
    const pg_point p = pg_box_point(g, index->boxes[h]);
    if (g->hb[h] & PG_HB_TAIL)
        pg_tail_unlink(g, h, p.y >> PG_QBITS);
    else
        pg_unlist(g, h, p);
}

/// The moves the common case leaves: a point past its home's margins, a
/// long step, a tail element. The base's box is already the new one.
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void pg_move_far(point_grid *g, qg_handle h, qg_rect old, qg_rect box)
{
    pg_point op, np;
    pg_point_pair(g, old, box, &op, &np);
    const uint32_t bits = g->hb[h];
    if (!(bits & PG_HB_TAIL)) {
        const int32_t hx = pg_home(op.x >> PG_QBITS, bits & 3), hy = pg_home(op.y >> PG_QBITS, bits >> 2 & 3);
        if (pg_in_margins(np, hx, hy))
            return;
        pg_unlist(g, h, op);
    } else {
        // A tail element keeps its slot while its point stays in its cell
        // (its row's list, its column byte).
        const int32_t orow = op.y >> PG_QBITS;
        if (orow == np.y >> PG_QBITS && (op.x >> PG_QBITS) == (np.x >> PG_QBITS))
            return;
        pg_tail_unlink(g, h, orow);
    }
    pg_tail_add(g, h, np);
}

static qg_status point_grid_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    (void)txn; // a move never allocates: the slots hold every element
    point_grid *g = (point_grid *)index;
    if (!pg_fits(g, box))
        return QG_ERR_CAPACITY;
    qg_rect *const slot = &index->boxes[h];
    const qg_rect old = *slot;
    *slot = box;
    g->fresh = false;
    // A listed element keeps its slot while its new point stays in the
    // margins of its home cell. Its old point lies in those margins, so
    // after a step of at most near_x and near_y (half a cell, with room for
    // rounding) the new point's cell is within one of home, and home
    // follows from that cell and the home bits: the common move maps one
    // point, not two.
    const uint32_t bits = g->hb[h];
    if (!(bits & PG_HB_TAIL) && (fabsf(box.min_x - old.min_x) <= g->near_x) &
                                    (fabsf(box.min_y - old.min_y) <= g->near_y)) {
        const pg_point np = pg_box_point(g, box);
        const int32_t hx = pg_home(np.x >> PG_QBITS, bits & 3), hy = pg_home(np.y >> PG_QBITS, bits >> 2 & 3);
        if (pg_in_margins(np, hx, hy))
            return QG_OK;
    }
    pg_move_far(g, h, old, box);
    return QG_OK;
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
    // Rebuild once the tail and the tombstones are more than a sliver of the
    // population; otherwise, after any move, refresh the snapshot's points
    // in place (searches read boxes until then).
    const int64_t stale = (int64_t)g->tail + g->tombstones;
    if (stale > 0 && stale * 64 >= index->count)
        pg_rebuild(g);
    else if (!g->fresh)
        pg_refresh(g);
    // Memory: once no handle was issued since the last cleanup (a steady
    // population), the arrays shrink to what is in use. Waiting for a steady
    // call keeps a growing population from paying a shrink and a regrow
    // every frame.
    const int32_t high = index->box_high;
    if (high > 0 && high == g->steady_high) {
        pg_trim(&index->alloc, (void **)&index->boxes, &index->box_capacity, sizeof(qg_rect), high);
        pg_trim(&index->alloc, (void **)&g->hb, &g->hb_capacity, sizeof(uint8_t), high);
        if (g->tail == 0 && g->tombstones == 0) {
            pg_trim(&index->alloc, (void **)&g->order, &g->order_capacity, sizeof(uint32_t),
                    index->count + pg_tail_room(index->count) + PG_PAD);
            pg_trim(&index->alloc, (void **)&g->sq, &g->sq_capacity, sizeof(uint16_t), g->order_capacity);
        }
    }
    g->steady_high = high;
}

static void point_grid_clear(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    // The base has not reset its slots yet: a rebuild would list them.
    memset(g->start, 0, ((size_t)g->cols * g->rows + 1) * sizeof(int32_t));
    for (int32_t r = 0; r < g->rows; ++r)
        g->tail_head[r] = PG_TAIL_END;
    g->listed = g->tail = g->tombstones = 0;
    g->fresh = true;
}

static void point_grid_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                             qg_query_stats *stats)
{
    const point_grid *g = (const point_grid *)index;
    const pg_point lo = pg_point_of(g, pg_widen(g, area.min_x), pg_widen(g, area.min_y));
    const pg_point hi = pg_point_of(g, area.max_x, area.max_y);
    int32_t cx0, cy0, cx1, cy1;
    pg_cell_range(g, lo, hi, &cx0, &cy0, &cx1, &cy1);
    for (int32_t cy = cy0; cy <= cy1; ++cy) {
        for (int32_t cx = cx0; cx <= cx1; ++cx) {
            const int32_t c = cy * g->cols + cx;
            stats->nodes_visited++;
            for (int32_t s = g->start[c]; s < g->start[c + 1]; ++s) {
                const qg_handle h = pg_order(g, s);
                if (h < 0)
                    continue;
                const pg_point p = pg_slot_point(g, s, h, cx, cy);
                if ((p.x < lo.x) | (p.x > hi.x) | (p.y < lo.y) | (p.y > hi.y))
                    continue;
                stats->elements_tested++;
                if (qg_overlaps(index->boxes[h], area) && !fn(h, user))
                    return;
            }
        }
    }
    if (g->tail == 0)
        return;
    const int32_t tx0 = lo.x >> PG_QBITS, tx1 = hi.x >> PG_QBITS;
    for (int32_t row = lo.y >> PG_QBITS; row <= hi.y >> PG_QBITS; ++row) {
        for (uint32_t t = g->tail_head[row]; t != PG_TAIL_END;) {
            const int32_t s = g->listed + (int32_t)t;
            const qg_handle h = pg_order(g, s);
            t = g->sq[s];
            if (!pg_tail_in_cols(g, s, tx0, tx1))
                continue;
            stats->elements_tested++;
            if (qg_overlaps(index->boxes[h], area) && !fn(h, user))
                return;
        }
    }
}

/// Candidate pairs waiting for their exact test, in a ring: each is tested
/// PG_DELAY candidates after it was queued, when the boxes prefetched for
/// it have had time to arrive.
typedef struct pg_batch {
    qg_handle a[PG_BATCH], b[PG_BATCH];
    uint32_t head, tail; ///< queued and tested so far (the ring wraps)
    int64_t tested;
} pg_batch;

/// Tests the oldest queued candidate; false when the callback asked to stop.
static inline bool pg_test_oldest(const point_grid *g, pg_batch *bt, qg_pair_fn *fn, void *user)
{
    const uint32_t i = bt->tail++ % PG_BATCH;
    const qg_rect *boxes = g->base.boxes;
    return !qg_overlaps(boxes[bt->a[i]], boxes[bt->b[i]]) || qg_report_pair(fn, user, bt->a[i], bt->b[i]);
}

/// Tests every queued candidate; false when the callback asked to stop.
static bool pg_flush(const point_grid *g, pg_batch *bt, qg_pair_fn *fn, void *user)
{
    while (bt->tail != bt->head) {
        if (!pg_test_oldest(g, bt, fn, user))
            return false;
    }
    return true;
}

/// Queues a candidate, fetching its boxes, and tests the one queued
/// PG_DELAY candidates earlier.
static inline bool pg_candidate(const point_grid *g, pg_batch *bt, qg_handle a, qg_handle b, qg_pair_fn *fn,
                                void *user)
{
    PG_PREFETCH(&g->base.boxes[a]);
    PG_PREFETCH(&g->base.boxes[b]);
    const uint32_t i = bt->head++ % PG_BATCH;
    bt->a[i] = a;
    bt->b[i] = b;
    bt->tested++;
    return bt->head - bt->tail < PG_DELAY || pg_test_oldest(g, bt, fn, user);
}

/// Candidates of a (point pa) among the slots [s_lo, s_hi) of cell (nx, ny):
/// those whose points are within reach.
static bool pg_scan(const point_grid *g, pg_batch *bt, qg_handle a, pg_point pa, int32_t s_lo, int32_t s_hi, int32_t nx,
                    int32_t ny, qg_pair_fn *fn, void *user)
{
    for (int32_t s = s_lo; s < s_hi; ++s) {
        const qg_handle b = pg_order(g, s);
        if (b < 0)
            continue;
        const pg_point pb = pg_slot_point(g, s, b, nx, ny);
        const int32_t dx = pb.x - pa.x, dy = pb.y - pa.y;
        if ((dx >= -g->reach_x) & (dx <= g->reach_x) & (dy >= -g->reach_y) & (dy <= g->reach_y) &&
            !pg_candidate(g, bt, a, b, fn, user))
            return false;
    }
    return true;
}

/// Pairs of the listed elements of cell (cx, cy) with the elements listed
/// after them in the cell, in the next cell of the row and in the three
/// cells below. Partners are never two cells apart, so each pair is found
/// once: within a row from its element in the earlier slot, across rows
/// from its element in the upper row.
static bool pg_pairs_cell(const point_grid *g, pg_batch *bt, int32_t cx, int32_t cy, qg_pair_fn *fn, void *user)
{
    const int32_t c = cy * g->cols + cx;
    const int32_t *start = g->start;
    const bool east = cx + 1 < g->cols;
    const int32_t bx0 = cx > 0 ? cx - 1 : 0, bx1 = east ? cx + 1 : cx;
    for (int32_t sa = start[c]; sa < start[c + 1]; ++sa) {
        const qg_handle a = pg_order(g, sa);
        if (a < 0)
            continue;
        const pg_point pa = pg_slot_point(g, sa, a, cx, cy);
        if (!pg_scan(g, bt, a, pa, sa + 1, start[c + 1], cx, cy, fn, user))
            return false;
        if (east && !pg_scan(g, bt, a, pa, start[c + 1], start[c + 2], cx + 1, cy, fn, user))
            return false;
        if (cy == 0)
            continue;
        for (int32_t bx = bx0; bx <= bx1; ++bx) {
            const int32_t b = c - g->cols + (bx - cx);
            if (!pg_scan(g, bt, a, pa, start[b], start[b + 1], bx, cy - 1, fn, user))
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
static bool pg_wide_hits(const point_grid *g, pg_batch *bt, const pg_lanes *L, int32_t s0, int32_t j, int32_t k,
                         uint32_t mask, qg_pair_fn *fn, void *user)
{
    const qg_handle a = pg_order(g, s0 + j);
    if (a < 0)
        return true;
    const int32_t alx = L->lx[j], aly = L->ly[j], ahx = L->lxh[j], ahy = L->lyh[j];
    const int32_t ux1 = g->unit_x, uy1 = g->unit_y;
    while (mask != 0) {
        const int32_t i = 16 * k + (__builtin_ctz(mask) >> 1);
        mask &= mask - 1u;
        mask &= mask - 1u; // two bits per 16-bit lane
        const qg_handle b = pg_order(g, L->slot[k] + (i & 15));
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
        } else if (!pg_candidate(g, bt, a, b, fn, user)) {
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
__attribute__((target("avx2"))) static inline bool pg_wide_test(const point_grid *g, pg_batch *bt, const pg_lanes *L,
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
    return mask == 0 || pg_wide_hits(g, bt, L, s0, j, k, mask, fn, user);
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
__attribute__((target("avx2"))) static bool pg_pairs_cell_wide(const point_grid *g, pg_batch *bt, int32_t cx,
                                                                int32_t cy, qg_pair_fn *fn, void *user, bool *stop)
{
    const int32_t c = cy * g->cols + cx;
    const int32_t *start = g->start;
    const int32_t s0 = start[c], s1 = start[c + 1];
    if (s0 == s1)
        return true;
    // Range 0: this cell and the next one of the row; range 1: the cells
    // below, columns bx0..bx1. b1, b2: where the second and third cell of
    // a range begin (INT32_MAX when there is none).
    const int32_t bx0 = cx > 0 ? cx - 1 : 0, bx1 = cx + 1 < g->cols ? cx + 1 : cx;
    int32_t lo[2], hi[2], b1[2], b2[2], sh0[2], shy[2], nr = 0;
    lo[nr] = s0, hi[nr] = bx1 > cx ? start[c + 2] : s1, b1[nr] = s1, b2[nr] = INT32_MAX, sh0[nr] = 0, shy[nr++] = 0;
    if (cy > 0) {
        const int32_t b = c - g->cols + (bx0 - cx);
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
    const __m256i ux = _mm256_set1_epi16((int16_t)g->unit_x), uy = _mm256_set1_epi16((int16_t)g->unit_y);
    for (int32_t r = 0; r < nr; ++r) {
        for (int32_t t = lo[r]; t < hi[r]; t += 16) {
            if (nc == PG_WIDE_CHUNKS)
                return false;
            const __m256i v = _mm256_loadu_si256((const __m256i *)(g->sq + t));
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
                _mm256_packus_epi32(_mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(g->order + t)), 24),
                                    _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(g->order + t + 8)), 24)),
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
                if (!pg_wide_test(g, bt, &L, s0, j, k, x, xh, y, yh, keep & later, fn, user)) {
                    *stop = true;
                    return true;
                }
            }
        }
        for (int32_t j = 0; j < before; ++j) {
            if (!pg_wide_test(g, bt, &L, s0, j, k, x, xh, y, yh, keep, fn, user)) {
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
static bool pg_pairs_tail(const point_grid *g, pg_batch *bt, int32_t t, qg_handle a, pg_point p, qg_pair_fn *fn,
                          void *user)
{
    const pg_point lo = {p.x - g->reach_x, p.y - g->reach_y};
    const pg_point hi = {p.x + g->reach_x, p.y + g->reach_y};
    int32_t cx0, cy0, cx1, cy1;
    pg_cell_range(g, lo, hi, &cx0, &cy0, &cx1, &cy1);
    for (int32_t cy = cy0; cy <= cy1; ++cy) {
        for (int32_t cx = cx0; cx <= cx1; ++cx) {
            const int32_t c = cy * g->cols + cx;
            if (!pg_scan(g, bt, a, p, g->start[c], g->start[c + 1], cx, cy, fn, user))
                return false;
        }
    }
    const int32_t r0 = lo.y > 0 ? lo.y >> PG_QBITS : 0;
    const int32_t r1 = (hi.y >> PG_QBITS) < g->rows ? hi.y >> PG_QBITS : g->rows - 1;
    const int32_t tx0 = lo.x > 0 ? lo.x >> PG_QBITS : 0, tx1 = hi.x >> PG_QBITS;
    for (int32_t row = r0; row <= r1; ++row) {
        for (uint32_t u = g->tail_head[row]; u != PG_TAIL_END;) {
            const int32_t s = g->listed + (int32_t)u;
            if ((int32_t)u > t && pg_tail_in_cols(g, s, tx0, tx1) && !pg_candidate(g, bt, a, pg_order(g, s), fn, user))
                return false;
            u = g->sq[s];
        }
    }
    return true;
}

static void point_grid_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    const point_grid *g = (const point_grid *)index;
    pg_batch bt;
    bt.head = bt.tail = 0;
    bt.tested = 0;
    stats->nodes_visited = (int64_t)g->cols * g->rows;
    for (int32_t cy = 0; cy < g->rows; ++cy) {
        for (int32_t cx = 0; cx < g->cols; ++cx) {
#if defined(PG_HAVE_AVX2)
            bool stop = false;
            if (g->fresh && g->wide && pg_pairs_cell_wide(g, &bt, cx, cy, fn, user, &stop)) {
                if (stop)
                    goto stop;
                continue;
            }
#endif
            if (!pg_pairs_cell(g, &bt, cx, cy, fn, user))
                goto stop;
        }
    }
    for (int32_t t = 0; t < g->tail; ++t) {
        const qg_handle a = pg_order(g, g->listed + t);
        if (a >= 0 && !pg_pairs_tail(g, &bt, t, a, pg_box_point(g, index->boxes[a]), fn, user))
            goto stop;
    }
    pg_flush(g, &bt, fn, user);
stop:
    stats->elements_tested = bt.tested;
}

static void point_grid_stats(const qg_index *index, qg_stats *stats)
{
    const point_grid *g = (const point_grid *)index;
    stats->nodes = g->cols * g->rows;
    stats->leaves = g->cols * g->rows;
    stats->max_depth_reached = 0;
}

static void point_grid_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    const point_grid *g = (const point_grid *)index;
    const qg_rect b = index->config.bounds;
    const float w = (b.max_x - b.min_x) / (float)g->cols, hgt = (b.max_y - b.min_y) / (float)g->rows;
    // Tail elements count in the cell of their point, gathered a chunk of
    // columns at a time (one walk of the row's list per chunk).
    enum { CHUNK = 256 };
    int32_t extra[CHUNK];
    for (int32_t cy = 0; cy < g->rows; ++cy) {
        for (int32_t x0 = 0; x0 < g->cols; x0 += CHUNK) {
            const int32_t x1 = x0 + CHUNK < g->cols ? x0 + CHUNK : g->cols;
            memset(extra, 0, sizeof extra);
            for (uint32_t t = g->tail_head[cy]; t != PG_TAIL_END;) {
                const int32_t s = g->listed + (int32_t)t;
                const int32_t cx = pg_box_point(g, index->boxes[pg_order(g, s)]).x >> PG_QBITS;
                if (cx >= x0 && cx < x1)
                    extra[cx - x0]++;
                t = g->sq[s];
            }
            for (int32_t cx = x0; cx < x1; ++cx) {
                const int32_t c = cy * g->cols + cx;
                int32_t count = extra[cx - x0];
                for (int32_t s = g->start[c]; s < g->start[c + 1]; ++s)
                    count += pg_order(g, s) >= 0;
                const qg_rect r = {b.min_x + (float)cx * w, b.min_y + (float)cy * hgt,
                                   cx + 1 == g->cols ? b.max_x : b.min_x + (float)(cx + 1) * w,
                                   cy + 1 == g->rows ? b.max_y : b.min_y + (float)(cy + 1) * hgt};
                fn(r, 0, count, user);
            }
        }
    }
}

/// True when the element at slot s of cell (cx, cy) is live, listed there
/// (its point in the cell's margins, its home bits naming the cell, its
/// offsets exact while fresh) and at no earlier slot of the cell.
static bool pg_listed_valid(const point_grid *g, qg_handle h, int32_t s, int32_t cx, int32_t cy)
{
    const qg_index *index = &g->base;
    if (!qg_slot_live(index, h) || !pg_fits(g, index->boxes[h]))
        return false;
    const uint32_t bits = g->hb[h];
    if (bits != (uint32_t)((cx & 3) | (cy & 3) << 2))
        return false;
    const pg_point p = pg_box_point(g, index->boxes[h]);
    if (!pg_in_margins(p, cx, cy))
        return false;
    if (g->fresh && (g->sq[s] != pg_offsets(p, cx, cy) ||
                     g->order[s] >> 24 != pg_size(g, p, pg_point_of(g, index->boxes[h].max_x, index->boxes[h].max_y))))
        return false;
    for (int32_t e = g->start[cy * g->cols + cx]; e < s; ++e) {
        if (pg_order(g, e) == h)
            return false;
    }
    return true;
}

static qg_status point_grid_validate(const qg_index *index, size_t *bytes)
{
    const point_grid *g = (const point_grid *)index;
    const int64_t cells = (int64_t)g->cols * g->rows;
    if (cells < 1 || cells + 1 > g->start_capacity || g->rows > g->tail_head_capacity ||
        (g->reach_x > PG_MAX_REACH && g->cols > 1) || (g->reach_y > PG_MAX_REACH && g->rows > 1))
        return QG_ERR_INVALID;
    if (index->box_high > 0 && g->hb_capacity < index->box_high)
        return QG_ERR_INVALID;
    if (g->listed < 0 || g->tail < 0 || g->tail > (int32_t)PG_TAIL_END || g->sq_capacity < g->order_capacity ||
        (g->order_capacity > 0 && (int64_t)g->listed + g->tail > g->order_capacity - PG_PAD) ||
        (int64_t)g->order_capacity < (int64_t)index->count + (index->count > 0 ? PG_PAD : 0))
        return QG_ERR_INVALID;
    if (g->start[0] != 0 || g->start[cells] != g->listed)
        return QG_ERR_INVALID;
    // The snapshot: every slot of every cell a tombstone or an element
    // listed there, once.
    int64_t listed = 0, tombs = 0;
    for (int32_t cy = 0; cy < g->rows; ++cy) {
        for (int32_t cx = 0; cx < g->cols; ++cx) {
            const int32_t c = cy * g->cols + cx;
            if (g->start[c] > g->start[c + 1])
                return QG_ERR_INVALID;
            for (int32_t s = g->start[c]; s < g->start[c + 1]; ++s) {
                const qg_handle h = pg_order(g, s);
                if (h == -1) {
                    tombs++;
                    continue;
                }
                if (!pg_listed_valid(g, h, s, cx, cy))
                    return QG_ERR_INVALID;
                listed++;
            }
        }
    }
    // The tail: each used slot a tombstone or in the list of its point's row.
    int64_t tail = 0;
    for (int32_t t = 0; t < g->tail; ++t) {
        const qg_handle h = pg_order(g, g->listed + t);
        if (h == -1) {
            tombs++;
            continue;
        }
        if (!qg_slot_live(index, h) || !(g->hb[h] & PG_HB_TAIL) || !pg_fits(g, index->boxes[h]))
            return QG_ERR_INVALID;
        tail++;
        const pg_point p = pg_box_point(g, index->boxes[h]);
        if (g->order[g->listed + t] >> 24 != pg_tail_col(p))
            return QG_ERR_INVALID;
        const int32_t row = p.y >> PG_QBITS;
        int32_t steps = 0;
        uint32_t u = g->tail_head[row];
        while (u != PG_TAIL_END && (int32_t)u != t) {
            if ((int32_t)u >= g->tail || ++steps > g->tail)
                return QG_ERR_INVALID;
            u = g->sq[g->listed + (int32_t)u];
        }
        if (u == PG_TAIL_END)
            return QG_ERR_INVALID;
    }
    // The lists hold exactly the live tail slots (a tombstone is unlinked).
    int64_t linked = 0;
    for (int32_t r = 0; r < g->rows; ++r) {
        for (uint32_t u = g->tail_head[r]; u != PG_TAIL_END; ++linked) {
            if ((int32_t)u >= g->tail || linked > g->tail || pg_order(g, g->listed + (int32_t)u) < 0)
                return QG_ERR_INVALID;
            u = g->sq[g->listed + (int32_t)u];
        }
    }
    if (listed + tail != index->count || linked != tail || tombs != g->tombstones)
        return QG_ERR_INVALID;
    *bytes += (size_t)g->start_capacity * sizeof(int32_t) + (size_t)g->order_capacity * sizeof(uint32_t) +
              (size_t)g->sq_capacity * sizeof(uint16_t) + (size_t)g->hb_capacity * sizeof(uint8_t) +
              (size_t)g->tail_head_capacity * sizeof(uint16_t);
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
