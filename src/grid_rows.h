// The uniform grid with row-based element lists that QG_GRID is and that
// QG_MULTI_GRID refines (seed 003, part 2 "Fundamentals", "Row-Based
// Optimizations"; part 7 "Row-Based Optimizations", "hierarchical bitset").
// Shared by src/grid.c and src/multi_grid.c only.
//
// - A cell is 4 bytes: the int32 head of a singly-linked index list of element
//   nodes, -1 when empty.
// - Element nodes live in one free-listed array per row ("singly-linked array
//   list"), so the nodes of a row stay close in memory and a row's list grows
//   and shrinks on its own. A row with no nodes gives its memory back at the
//   next qg_cleanup: its cell array and node array become NULL, and the next
//   insert into it allocates them again. A row holding far more node slots
//   than nodes is compacted and shrunk by qg_cleanup (GR_ROW_TARGET), so
//   memory follows the rows' occupancy, not its high-water mark.
// - A box covering more than GR_BOX_CELLS cells (64 x 64), the whole torus
//   included, is kept once in the wide list instead of in its cells: every
//   query and the pair search test it in full. So no box costs more than
//   GR_BOX_CELLS nodes, whatever the configured cell size: a cell size far
//   too small for the boxes makes a slow index (quadratic pairs among the
//   wide boxes), never one with unbounded memory.
// - The grid is a torus: cells per axis are a power of two, and the cell of
//   a coordinate is its unwrapped cell (floor(v / cell) from an origin at
//   the bounds' centre, clamped to +-GR_REACH) masked to the grid. Boxes
//   outside the bounds therefore land in ordinary cells, spread like the
//   ones inside, instead of piling into the border cells (the bounds are
//   only a hint of where most elements are); a box covers at most every
//   column or row once (a box wider than the world does not wrap onto
//   itself). Cells far from the bounds share lists with cells inside, which
//   costs a few extra overlap tests, never an answer.
// - The unwrapped map is monotonic, so it commutes with max: the unwrapped
//   cell of the top-left corner of an overlap is (max of the two
//   min-corner cells), and it lies in both boxes' ranges. Queries and pairs
//   report each answer only in the wrapped cell of that corner, which is
//   unique, so each answer comes once with no visited set, however the
//   ranges wrap.
// - Huge bounds do not make huge cells: the cell size comes from
//   element_size and the cell counts are capped (GR_MAX_SIDE); a world
//   wider than the grid wraps instead of coarsening. Extents are computed
//   in double, coordinates as v * inv - origin (no v - origin, which
//   overflows for bounds near +-FLT_MAX).
// - The hierarchical bitset (gr_bits) sits above the fine cells: level 1 has
//   one 64-bit word per 8x8 block of fine cells, one bit per occupied cell;
//   each level above has one word per 8x8 block of the level below, one bit
//   per non-zero word. It is kept exact at every empty <-> occupied change.
// - The reach: the grow-only union of the unwrapped cell ranges linked since
//   the last qg_clear. Every listed element's cells lie in it, so the ray
//   and nearest walks (at the end of this file, with why they are exact)
//   stop at its edge instead of following a ray to infinity.
#ifndef QG_GRID_ROWS_H
#define QG_GRID_ROWS_H

#include "index_internal.h"
#include "pool.h"
#include "query_util.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/// Resolution limits: cells per axis are a power of two, at most this many
/// (a world wider than that wraps). With NULL empty rows the cost of a wide
/// grid is a row struct per row and a row of cells per occupied row.
#define GR_MAX_SIDE 2048
/// Cells per axis when element_size is 0.
#define GR_DEFAULT_SIDE 128
/// At least this many cells per axis, however small the bounds: boxes
/// outside small bounds then spread over 128x128 cells, not a handful
/// (`outside`: 100,000 boxes over 81x the default bounds, 32x32 cells of
/// the bounds' own size, measured ~100 per cell). The cost is a row struct
/// per row and 512 bytes per occupied row.
#define GR_MIN_SIDE 128
/// Default cell size as a multiple of element_size, measured on `agents`
/// (element_size 5; cells of 10, 20, 32, 48, 64: 32 was fastest, moves
/// relink less and the pair loop gathers fewer duplicate nodes).
#define GR_CELL_PER_ELEMENT 6.0f
/// A default cell may grow by this factor so the bounds fill a power of two
/// cells per axis instead of leaving nearly half the columns unused.
#define GR_CELL_STRETCH 1.25
/// Unwrapped cell coordinates clamp to [-GR_REACH, GR_REACH]: every width
/// then fits an int32, and the float cell coordinate still resolves single
/// cells up to 2^24 cells from the bounds' centre.
#define GR_REACH 536870912.0f
/// Elements of one cell gathered on the C stack for the pair loop; longer
/// lists are walked in place.
#define GR_GATHER 64
/// Levels of the hierarchical bitset: 8^4 covers GR_MAX_SIDE.
#define GR_MAX_LEVELS 6
/// The most cells a box is linked into (64 x 64, 32 KiB of nodes): a box
/// covering more goes to the wide list (gr_grid.wide), which every query
/// and the pair search test in full. This bounds the memory of any box,
/// whatever cell_size or element_size says (cells of 1e-3 under boxes 20
/// wide would otherwise link each box into 2048 x 2048 cells). `agents`,
/// `mixed` and `dragons` boxes cover at most 9 x 9 cells at the default
/// cell size, so only boxes far larger than element_size get there.
#define GR_BOX_CELLS 4096
/// Smallest cell: 1 / cell must be a finite float (FLT_MAX / 4 cells per
/// unit). A world smaller than one such cell (bounds [0, FLT_TRUE_MIN]^2)
/// works as one cell.
#define GR_MIN_CELL (4.0f / FLT_MAX)
/// A row's node capacity follows its occupancy, not its high-water mark
/// (which crept up +17% over 3,000 frames of the soak at n = 10,000):
/// - a row that must grow takes the size class of GR_ROW_TARGET(needed),
///   an eighth more than it needs plus 16 nodes; growing again before the
///   next qg_cleanup (a build, many inserts into one row) it grows by half;
/// - qg_cleanup compacts and shrinks a row holding more than
///   GR_ROW_TARGET(live) + live / 8 + 16 slots to GR_ROW_TARGET(live);
/// - capacities are size classes: 8, 16, then 2^GR_CLASS_BITS a doubling
///   (multiples of 2^(floor(log2 n) - GR_CLASS_BITS)), so the arrays rows
///   grow and shrink come in few sizes, which the allocator reuses.
/// Measured with `quadgrid-bench soak --kind grid,multi_grid` (RSS with
/// glibc's malloc): n = 10,000, 10,000 frames: memory_bytes after the
/// warm-up at most its warm-up maximum, RSS +0.25%; n = 100,000, 1,000
/// frames: memory_bytes +0.6%, RSS +1.2%, and the RSS still creeps (the
/// heap's holes: +1.7% by frame 2,000, memory_bytes flat); about 0.4
/// resizes a frame at both sizes. Shrinking to live + live/16 + 8 and
/// growing by half resized ten times as often, and the RSS passed +1.7% at
/// frame 250 of n = 100,000; a target of a quarter more made memory_bytes
/// climb 4% over the first 300 frames.
#define GR_ROW_TARGET(n) ((n) + ((n) >> 3) + 16)
#define GR_CLASS_BITS 3

typedef struct gr_ibox {
    int32_t x0, y0, x1, y1; ///< inclusive unwrapped cell range
} gr_ibox;
_Static_assert(sizeof(gr_ibox) == 16, "gr_ibox is stored and compared as one SSE register");

/// One row: its cells and its own free-listed array of element nodes.
typedef struct gr_row {
    int32_t *cells; ///< cols heads, or NULL when the row's memory is given back
    qg_enode *nodes;
    int32_t capacity, high, free_head, live;
    /// Rollback of the current call: node capacity before it grew the row
    /// (-1: not grown), and whether it allocated the cells.
    int32_t undo_capacity, undo_cells;
    /// 1 when removals emptied the row: the next qg_cleanup gives its memory
    /// back. qg_clear keeps the memory for reuse, so it does not set it.
    int32_t emptied;
    /// 1 when the row's node array grew since the last qg_cleanup: growing
    /// again before it, it grows by half (gr_grown_capacity).
    int32_t grown;
} gr_row;

typedef struct gr_level {
    uint64_t *words;
    int32_t cols, rows; ///< words per axis
} gr_level;

/// The hierarchical bitset of occupied fine cells. level[0] is level 1 (one
/// bit per fine cell); level[count - 1] is the coarsest.
typedef struct gr_bits {
    gr_level level[GR_MAX_LEVELS];
    int count;
} gr_bits;

typedef struct gr_grid {
    gr_row *rows;
    int32_t cols, nrows; ///< powers of two
    int32_t mx, my;      ///< cols - 1, nrows - 1: the wrap masks
    float inv;           ///< cells per world unit
    float cell;          ///< cell size in world units
    /// The bounds' centre in cells, per lane (x, y, x, y): a coordinate's
    /// cell is floor(v * inv - org) (a plain array: a user allocator need
    /// not align the struct to 16 bytes).
    float org[4];
    int32_t home_x, home_y; ///< unwrapped cell of the bounds' min corner
    /// The wide list: elements whose range covers more than GR_BOX_CELLS
    /// wrapped cells (the whole torus, or far more cells than element_size
    /// promised), listed here once instead of in every cell, so a box costs
    /// at most GR_BOX_CELLS nodes, and a few boxes much wider than the
    /// cells cost a test per element, not a node and a test per cell.
    int32_t *wide;
    int32_t wide_count, wide_capacity;
    /// Grow-only union of the unwrapped cell ranges linked since the last
    /// qg_clear (empty: x0 > x1): every listed element's cells lie in it,
    /// so ray casts and nearest searches walk only its cells (an infinite
    /// ray stops at its edge). It never shrinks on removes and moves: a
    /// wider reach costs walk steps, never an answer.
    gr_ibox reach;
} gr_grid;

/// Unwrapped cell of coordinate v: floor(v * inv - org) clamped to
/// +-GR_REACH. Monotonic in v (each step rounds monotonically); infinities
/// and overflows clamp; NaN never arrives.
static inline int32_t gr_map(float v, float inv, float org)
{
    float f = v * inv - org;
    f = f > -GR_REACH ? f : -GR_REACH;
    f = f < GR_REACH ? f : GR_REACH;
    return (int32_t)floorf(f);
}

#if defined(__SSE2__)
/// gr_map_box's SSE path, for a box already held as one vector (qg_rect_vec).
static inline gr_ibox gr_map_vec(const gr_grid *g, __m128 r)
{
    __m128 f = _mm_sub_ps(_mm_mul_ps(r, _mm_set1_ps(g->inv)),
                          _mm_loadu_ps(g->org));
    f = _mm_min_ps(_mm_max_ps(f, _mm_set1_ps(-GR_REACH)), _mm_set1_ps(GR_REACH));
    const __m128i t = _mm_cvttps_epi32(f);
    const __m128i up = _mm_castps_si128(_mm_cmpgt_ps(_mm_cvtepi32_ps(t), f)); // -1 where t > f
    gr_ibox out;
    _mm_storeu_si128((__m128i *)&out, _mm_add_epi32(t, up));
    return out;
}
#endif

/// gr_map on the four coordinates of a box. With SSE the four are mapped at
/// once without branches (this runs twice for every move): the same clamps,
/// and truncation corrected down where it rounded a negative value up is
/// the same floor, so both paths give the same cells.
static inline gr_ibox gr_map_box(const gr_grid *g, qg_rect r)
{
#if defined(__SSE2__)
    return gr_map_vec(g, qg_rect_vec(r));
#else
    return (gr_ibox){gr_map(r.min_x, g->inv, g->org[0]), gr_map(r.min_y, g->inv, g->org[1]),
                     gr_map(r.max_x, g->inv, g->org[0]), gr_map(r.max_y, g->inv, g->org[1])};
#endif
}

/// The empty reach (gr_grid.reach).
static const gr_ibox gr_no_reach = {INT32_MAX, INT32_MAX, INT32_MIN, INT32_MIN};

/// Widens the reach to hold range b (serial callers only).
static inline void gr_reach_add(gr_grid *g, gr_ibox b)
{
    g->reach.x0 = b.x0 < g->reach.x0 ? b.x0 : g->reach.x0;
    g->reach.y0 = b.y0 < g->reach.y0 ? b.y0 : g->reach.y0;
    g->reach.x1 = b.x1 > g->reach.x1 ? b.x1 : g->reach.x1;
    g->reach.y1 = b.y1 > g->reach.y1 ? b.y1 : g->reach.y1;
}

static inline bool gr_ibox_equal(gr_ibox a, gr_ibox b)
{
#if defined(__SSE2__)
    const __m128i x = _mm_loadu_si128((const __m128i *)&a), y = _mm_loadu_si128((const __m128i *)&b);
    return _mm_movemask_epi8(_mm_cmpeq_epi32(x, y)) == 0xffff;
#else
    return ((a.x0 == b.x0) & (a.x1 == b.x1)) & ((a.y0 == b.y0) & (a.y1 == b.y1));
#endif
}

/// Distinct wrapped cells of the unwrapped range [a0, a1] on an axis of n.
static inline int32_t gr_span(int32_t a0, int32_t a1, int32_t n)
{
    const int32_t w = a1 - a0 + 1;
    return w < n ? w : n;
}

static inline int64_t gr_ibox_cells(const gr_grid *g, gr_ibox b)
{
    return (int64_t)gr_span(b.x0, b.x1, g->cols) * gr_span(b.y0, b.y1, g->nrows);
}

/// Whether wrapped cell (x, y) is one of b's cells.
static inline bool gr_in(const gr_grid *g, gr_ibox b, int32_t x, int32_t y)
{
    return ((x - b.x0) & g->mx) < gr_span(b.x0, b.x1, g->cols) &&
           ((y - b.y0) & g->my) < gr_span(b.y0, b.y1, g->nrows);
}

/// 1 when the top-left corner of the overlap of two ranges starting at
/// unwrapped cells a and b lies in wrapped cell x: max(a, b) wraps to x.
/// Encoded as 2a + (a wraps to x), the bit of the larger code is the answer
/// (equal starts wrap alike), so the pair loop needs one max per axis.
static inline int32_t gr_key(int32_t a, int32_t x, int32_t mask)
{
    return 2 * a + ((a & mask) == x);
}

/// The world box of unwrapped cells [x, x + span) x [y, y + span), for
/// drawing (saturated to finite floats).
static inline float gr_world(const gr_grid *g, int32_t u, float org)
{
    double v = ((double)u + (double)org) * (double)g->cell;
    v = v < -(double)FLT_MAX ? -(double)FLT_MAX : v;
    v = v > (double)FLT_MAX ? (double)FLT_MAX : v;
    return (float)v;
}

static inline qg_rect gr_cell_rect(const gr_grid *g, int32_t x, int32_t y, int32_t span)
{
    return (qg_rect){gr_world(g, x, g->org[0]), gr_world(g, y, g->org[1]), gr_world(g, x + span, g->org[0]),
                     gr_world(g, y + span, g->org[1])};
}

/// The unwrapped cell of wrapped x inside the bounds' window (for drawing).
static inline int32_t gr_unwrap(int32_t x, int32_t home, int32_t mask)
{
    return home + ((x - home) & mask);
}

/// Whether a box with cell range b goes to the wide list: it covers more
/// than GR_BOX_CELLS wrapped cells (every box covering the whole torus
/// does, as the torus has at least GR_MIN_SIDE^2 cells).
static inline bool gr_is_wide(const gr_grid *g, gr_ibox b)
{
    return gr_ibox_cells(g, b) > GR_BOX_CELLS;
}

/* ---- configuration ------------------------------------------------------ */

/// Smallest power of two >= n, within [GR_MIN_SIDE, GR_MAX_SIDE].
static inline int32_t gr_side(double n)
{
    int32_t p = GR_MIN_SIDE;
    while (p < GR_MAX_SIDE && (double)p < n)
        p *= 2;
    return p;
}

/// Resolves cell_size: about GR_CELL_PER_ELEMENT x element_size, or
/// bounds / GR_DEFAULT_SIDE; a default may stretch by GR_CELL_STRETCH so
/// the bounds fill whole powers of two. Never raised to fit the bounds in
/// the grid: the world wraps instead, so huge bounds keep element-sized
/// cells. Only raised to GR_MIN_CELL, so that 1 / cell is a finite float
/// (a default that underflows, in bounds [0, FLT_TRUE_MIN]^2, too). Any
/// config qg_create lets through is taken: a cell size far too small for
/// the boxes costs at most GR_BOX_CELLS nodes a box (the wide list).
static inline qg_status gr_configure(qg_config *c)
{
    const double w = qg_extent(c->bounds.min_x, c->bounds.max_x), h = qg_extent(c->bounds.min_y, c->bounds.max_y);
    float cell = c->cell_size;
    if (cell == 0.0f) {
        cell = c->element_size > 0.0f ? GR_CELL_PER_ELEMENT * c->element_size
                                      : qg_rect_extent(c->bounds) / (float)GR_DEFAULT_SIDE;
        if (!isfinite(cell))
            cell = FLT_MAX;
        const double sx = gr_side(w / cell) / 2, sy = gr_side(h / cell) / 2;
        const double stretched = fmax(w / fmax(sx, 1.0), h / fmax(sy, 1.0));
        if (stretched > cell && stretched <= GR_CELL_STRETCH * cell && stretched < FLT_MAX)
            cell = (float)stretched;
    }
    // qg_create took cell_size finite and >= 0; a default is finite too.
    if (!(cell >= GR_MIN_CELL))
        cell = GR_MIN_CELL;
    c->cell_size = cell;
    return QG_OK;
}

/// The size class of n nodes (GR_CLASS_BITS): the smallest class >= n.
static inline int64_t gr_node_class(int64_t n)
{
    if (n <= 16)
        return n <= 8 ? 8 : 16;
    int b = 0;
    while ((n >> (b + 1)) != 0)
        ++b;
    const int64_t step = (int64_t)1 << (b > GR_CLASS_BITS ? b - GR_CLASS_BITS : 0);
    return (n + step - 1) & ~(step - 1);
}

/// The capacity a full row grows to when it needs `needed` nodes: the size
/// class of GR_ROW_TARGET(needed), or of half as much again when the row
/// already grew since the last qg_cleanup (`grown`).
static inline int64_t gr_grown_capacity(const gr_row *r, int64_t needed)
{
    int64_t cap = GR_ROW_TARGET(needed);
    if (r->grown) {
        const int64_t half = (int64_t)r->capacity + r->capacity / 2;
        cap = cap < half ? half : cap;
    }
    return gr_node_class(cap);
}

static inline void gr_row_reset_undo(gr_row *r)
{
    r->undo_capacity = -1;
    r->undo_cells = 0;
}

static inline qg_status gr_init(gr_grid *g, qg_alloc *alloc, const qg_config *c)
{
    const qg_rect b = c->bounds;
    g->cell = c->cell_size;
    g->inv = 1.0f / c->cell_size;
    g->cols = gr_side(qg_extent(b.min_x, b.max_x) / c->cell_size);
    g->nrows = gr_side(qg_extent(b.min_y, b.max_y) / c->cell_size);
    g->mx = g->cols - 1;
    g->my = g->nrows - 1;
    // The centre, in cells, computed in double (the sum of the bounds may
    // overflow a float); then rounded once, as the map uses it.
    const double cx = ((double)b.min_x + (double)b.max_x) * 0.5 * (double)g->inv;
    const double cy = ((double)b.min_y + (double)b.max_y) * 0.5 * (double)g->inv;
    g->org[0] = g->org[2] = (float)fmax(fmin(cx, (double)FLT_MAX), -(double)FLT_MAX);
    g->org[1] = g->org[3] = (float)fmax(fmin(cy, (double)FLT_MAX), -(double)FLT_MAX);
    g->home_x = gr_map(b.min_x, g->inv, g->org[0]);
    g->home_y = gr_map(b.min_y, g->inv, g->org[1]);
    g->reach = gr_no_reach;
    g->rows = qg_mem_alloc(alloc, (size_t)g->nrows * sizeof(gr_row));
    if (g->rows == NULL)
        return QG_ERR_NOMEM;
    for (int32_t y = 0; y < g->nrows; ++y) {
        g->rows[y] = (gr_row){NULL, NULL, 0, 0, -1, 0, -1, 0, 0, 0};
    }
    return QG_OK;
}

static inline void gr_row_release(qg_alloc *alloc, const gr_grid *g, gr_row *r)
{
    qg_mem_free(alloc, r->cells, r->cells ? (size_t)g->cols * sizeof(int32_t) : 0);
    qg_mem_free(alloc, r->nodes, (size_t)r->capacity * sizeof(qg_enode));
    r->cells = NULL;
    r->nodes = NULL;
    r->capacity = 0;
    r->high = 0;
    r->free_head = -1;
    r->live = 0;
}

static inline void gr_destroy(gr_grid *g, qg_alloc *alloc)
{
    if (g->rows == NULL)
        return;
    for (int32_t y = 0; y < g->nrows; ++y)
        gr_row_release(alloc, g, &g->rows[y]);
    qg_mem_free(alloc, g->rows, (size_t)g->nrows * sizeof(gr_row));
    g->rows = NULL;
    qg_array_free(alloc, (void **)&g->wide, &g->wide_capacity, sizeof(int32_t));
    g->wide_count = 0;
}

/// Moves a row's live nodes into slots [0, live) (each list keeps its
/// order: a node above is copied into the lowest free slot and its link
/// redirected), then resizes the node array to `cap` >= live. A shrink
/// cannot fail (the allocator contract), so this never allocates.
static inline void gr_row_shrink(const gr_grid *g, qg_alloc *alloc, gr_row *r, int32_t cap)
{
    if (r->high > r->live) {
        int32_t f = 0; // free slots below live: as many as live nodes above
        for (int32_t x = 0; x < g->cols; ++x) {
            for (int32_t *link = &r->cells[x]; *link >= 0; link = &r->nodes[*link].next) {
                const int32_t e = *link;
                if (e < r->live)
                    continue;
                while (r->nodes[f].element >= 0)
                    ++f;
                r->nodes[f] = r->nodes[e];
                *link = f;
            }
        }
        r->high = r->live;
        r->free_head = -1;
    }
    r->nodes = qg_mem_resize(alloc, r->nodes, (size_t)r->capacity * sizeof(qg_enode), (size_t)cap * sizeof(qg_enode));
    r->capacity = cap;
}

/// Deferred upkeep: every row that removals left without nodes gives its
/// memory back (rows emptied by qg_clear keep theirs for the refill), and
/// a row holding far more node slots than nodes gives the excess back
/// (GR_ROW_TARGET). Never allocates.
static inline void gr_cleanup(gr_grid *g, qg_alloc *alloc)
{
    for (int32_t y = 0; y < g->nrows; ++y) {
        gr_row *r = &g->rows[y];
        r->grown = 0;
        if (r->emptied) {
            if (r->live == 0)
                gr_row_release(alloc, g, r);
            r->emptied = 0;
        }
        const int64_t live = r->live;
        if (live > 0 && r->capacity > GR_ROW_TARGET(live) + (live >> 3) + 16) {
            const int64_t cap = gr_node_class(GR_ROW_TARGET(live));
            if (cap < r->capacity)
                gr_row_shrink(g, alloc, r, (int32_t)cap);
        }
    }
}

/// Empties every list, keeping the rows' memory.
static inline void gr_clear(gr_grid *g)
{
    g->wide_count = 0;
    g->reach = gr_no_reach;
    for (int32_t y = 0; y < g->nrows; ++y) {
        gr_row *r = &g->rows[y];
        if (r->cells != NULL)
            memset(r->cells, 0xff, (size_t)g->cols * sizeof(int32_t)); // all -1
        r->high = 0;
        r->free_head = -1;
        r->live = 0;
        r->emptied = 0;
    }
}

/* ---- grow first --------------------------------------------------------- */

/// Gives back what gr_reserve grew in the first `done` rows of b.
static inline void gr_rollback(gr_grid *g, qg_alloc *alloc, gr_ibox b, int32_t done)
{
    for (int32_t i = 0; i < done; ++i) {
        gr_row *r = &g->rows[(b.y0 + i) & g->my];
        if (r->undo_capacity >= 0) {
            r->nodes = qg_mem_resize(alloc, r->nodes, (size_t)r->capacity * sizeof(qg_enode),
                                     (size_t)r->undo_capacity * sizeof(qg_enode));
            r->capacity = r->undo_capacity;
        }
        if (r->undo_cells) {
            qg_mem_free(alloc, r->cells, (size_t)g->cols * sizeof(int32_t));
            r->cells = NULL;
        }
        gr_row_reset_undo(r);
    }
}

/// Makes sure every row of nb can link the cells of nb that are not in ob
/// (ob may be NULL: all of nb) without allocating: cells allocated, enough
/// spare nodes. Either every row is ready, or nothing changed and false is
/// returned. The row arrays are many and the txn holds few, so rows keep
/// their own rollback record.
static inline bool gr_reserve(gr_grid *g, qg_alloc *alloc, gr_ibox nb, const gr_ibox *ob)
{
    const int32_t nx = gr_span(nb.x0, nb.x1, g->cols), ny = gr_span(nb.y0, nb.y1, g->nrows);
    for (int32_t i = 0; i < ny; ++i) {
        const int32_t y = (nb.y0 + i) & g->my;
        gr_row *r = &g->rows[y];
        int32_t need = nx;
        if (ob != NULL && ((y - ob->y0) & g->my) < gr_span(ob->y0, ob->y1, g->nrows)) {
            for (int32_t j = 0; j < nx; ++j)
                need -= gr_in(g, *ob, (nb.x0 + j) & g->mx, y);
        }
        if (need == 0)
            continue;
        if (r->cells == NULL) {
            r->cells = qg_mem_alloc(alloc, (size_t)g->cols * sizeof(int32_t));
            if (r->cells == NULL) {
                gr_rollback(g, alloc, nb, i + 1);
                return false;
            }
            memset(r->cells, 0xff, (size_t)g->cols * sizeof(int32_t));
            r->undo_cells = 1;
        }
        const int64_t needed = (int64_t)r->live + need;
        if (needed > r->capacity) {
            const int64_t cap = gr_grown_capacity(r, needed);
            void *p = cap > INT32_MAX ? NULL
                                      : qg_mem_resize(alloc, r->nodes, (size_t)r->capacity * sizeof(qg_enode),
                                                      (size_t)cap * sizeof(qg_enode));
            if (p == NULL) {
                gr_rollback(g, alloc, nb, i + 1);
                return false;
            }
            r->undo_capacity = r->capacity;
            r->grown = 1;
            r->nodes = p;
            r->capacity = (int32_t)cap;
        }
    }
    for (int32_t i = 0; i < ny; ++i)
        gr_row_reset_undo(&g->rows[(nb.y0 + i) & g->my]);
    return true;
}

/* ---- hierarchical bitset ------------------------------------------------- */

static inline void gr_bits_set(gr_bits *b, int32_t x, int32_t y)
{
    for (int l = 0; l < b->count; ++l) {
        gr_level *lv = &b->level[l];
        uint64_t *w = &lv->words[(size_t)(y >> 3) * (size_t)lv->cols + (size_t)(x >> 3)];
        const uint64_t was = *w;
        *w = was | (uint64_t)1 << ((y & 7) << 3 | (x & 7));
        if (was != 0)
            return; // the levels above already say this block is occupied
        x >>= 3;
        y >>= 3;
    }
}

static inline void gr_bits_clear(gr_bits *b, int32_t x, int32_t y)
{
    for (int l = 0; l < b->count; ++l) {
        gr_level *lv = &b->level[l];
        uint64_t *w = &lv->words[(size_t)(y >> 3) * (size_t)lv->cols + (size_t)(x >> 3)];
        *w &= ~((uint64_t)1 << ((y & 7) << 3 | (x & 7)));
        if (*w != 0)
            return;
        x >>= 3;
        y >>= 3;
    }
}

/* ---- links --------------------------------------------------------------- */

/// Pushes h on cell (x, y); the row was reserved. Returns true when the cell
/// was empty.
static inline bool gr_link(gr_row *r, int32_t x, qg_handle h)
{
    int32_t i;
    if (r->free_head >= 0) {
        i = r->free_head;
        r->free_head = r->nodes[i].next;
    } else {
        i = r->high++;
    }
    const int32_t head = r->cells[x];
    r->nodes[i].next = head;
    r->nodes[i].element = h;
    r->cells[x] = i;
    r->live++;
    return head < 0;
}

/// Takes h off cell (x, y). Returns true when the cell became empty.
static inline bool gr_unlink(gr_row *r, int32_t x, qg_handle h)
{
    int32_t *link = &r->cells[x];
    while (*link >= 0) {
        const int32_t e = *link;
        if (r->nodes[e].element == h) {
            *link = r->nodes[e].next;
            r->nodes[e].next = r->free_head;
            r->nodes[e].element = -1;
            r->free_head = e;
            r->emptied |= --r->live == 0;
            break;
        }
        link = &r->nodes[e].next;
    }
    return r->cells[x] < 0;
}

/// Links h into every cell of b (reserved). bits may be NULL.
static inline void gr_link_box(gr_grid *g, gr_bits *bits, gr_ibox b, qg_handle h)
{
    const int32_t nx = gr_span(b.x0, b.x1, g->cols), ny = gr_span(b.y0, b.y1, g->nrows);
    for (int32_t i = 0; i < ny; ++i) {
        const int32_t y = (b.y0 + i) & g->my;
        gr_row *r = &g->rows[y];
        for (int32_t j = 0; j < nx; ++j) {
            const int32_t x = (b.x0 + j) & g->mx;
            if (gr_link(r, x, h) && bits != NULL)
                gr_bits_set(bits, x, y);
        }
    }
}

static inline void gr_unlink_box(gr_grid *g, gr_bits *bits, gr_ibox b, qg_handle h)
{
    const int32_t nx = gr_span(b.x0, b.x1, g->cols), ny = gr_span(b.y0, b.y1, g->nrows);
    for (int32_t i = 0; i < ny; ++i) {
        const int32_t y = (b.y0 + i) & g->my;
        gr_row *r = &g->rows[y];
        for (int32_t j = 0; j < nx; ++j) {
            const int32_t x = (b.x0 + j) & g->mx;
            if (gr_unlink(r, x, h) && bits != NULL)
                gr_bits_clear(bits, x, y);
        }
    }
}

/// Moves h from the cells of ob to those of nb, touching only the cells in
/// one and not the other (nb reserved against ob).
static inline void gr_relink(gr_grid *g, gr_bits *bits, gr_ibox ob, gr_ibox nb, qg_handle h)
{
    const int32_t onx = gr_span(ob.x0, ob.x1, g->cols), ony = gr_span(ob.y0, ob.y1, g->nrows);
    for (int32_t i = 0; i < ony; ++i) {
        const int32_t y = (ob.y0 + i) & g->my;
        gr_row *r = &g->rows[y];
        for (int32_t j = 0; j < onx; ++j) {
            const int32_t x = (ob.x0 + j) & g->mx;
            if (!gr_in(g, nb, x, y) && gr_unlink(r, x, h) && bits != NULL)
                gr_bits_clear(bits, x, y);
        }
    }
    const int32_t nnx = gr_span(nb.x0, nb.x1, g->cols), nny = gr_span(nb.y0, nb.y1, g->nrows);
    for (int32_t i = 0; i < nny; ++i) {
        const int32_t y = (nb.y0 + i) & g->my;
        gr_row *r = &g->rows[y];
        for (int32_t j = 0; j < nnx; ++j) {
            const int32_t x = (nb.x0 + j) & g->mx;
            if (!gr_in(g, ob, x, y) && gr_link(r, x, h) && bits != NULL)
                gr_bits_set(bits, x, y);
        }
    }
}

/* ---- kind operations shared by both grids -------------------------------- */

/// Takes h off the wide list (order kept deterministic: the last
/// entry takes its place).
static inline void gr_wide_remove(gr_grid *g, qg_handle h)
{
    for (int32_t i = 0; i < g->wide_count; ++i) {
        if (g->wide[i] == h) {
            g->wide[i] = g->wide[--g->wide_count];
            return;
        }
    }
}

static inline qg_status gr_insert(gr_grid *g, gr_bits *bits, qg_index *index, qg_txn *txn, qg_handle h,
                                  qg_rect box)
{
    const gr_ibox b = gr_map_box(g, box);
    if (gr_is_wide(g, b)) {
        if (!qg_txn_reserve(txn, (void **)&g->wide, &g->wide_capacity, sizeof(int32_t), (int64_t)g->wide_count + 1))
            return QG_ERR_NOMEM;
        g->wide[g->wide_count++] = h;
        return QG_OK;
    }
    if (!gr_reserve(g, &index->alloc, b, NULL))
        return QG_ERR_NOMEM;
    gr_link_box(g, bits, b, h);
    gr_reach_add(g, b);
    return QG_OK;
}

static inline void gr_remove(gr_grid *g, gr_bits *bits, const qg_index *index, qg_handle h)
{
    const gr_ibox b = gr_map_box(g, index->boxes[h]);
    if (gr_is_wide(g, b))
        gr_wide_remove(g, h);
    else
        gr_unlink_box(g, bits, b, h);
}

static inline qg_status gr_move(gr_grid *g, gr_bits *bits, qg_index *index, qg_txn *txn, qg_handle h,
                                qg_rect box)
{
#if defined(__SSE2__)
    // The box kept as one vector: GCC would otherwise spill its two halves
    // and reload them as one (a store-forwarding stall on every move).
    const __m128 v = qg_rect_vec(box);
    const gr_ibox nb = gr_map_vec(g, v);
#else
    const gr_ibox nb = gr_map_box(g, box);
#endif
    const gr_ibox ob = gr_map_box(g, index->boxes[h]);
    if (!gr_ibox_equal(ob, nb)) {
        const bool ow = gr_is_wide(g, ob), nw = gr_is_wide(g, nb);
        if (ow && nw) {
            // still on the wide list
        } else if (nw) {
            if (!qg_txn_reserve(txn, (void **)&g->wide, &g->wide_capacity, sizeof(int32_t),
                                (int64_t)g->wide_count + 1))
                return QG_ERR_NOMEM;
            gr_unlink_box(g, bits, ob, h);
            g->wide[g->wide_count++] = h;
        } else if (ow) {
            if (!gr_reserve(g, &index->alloc, nb, NULL))
                return QG_ERR_NOMEM;
            gr_wide_remove(g, h);
            gr_link_box(g, bits, nb, h);
            gr_reach_add(g, nb);
        } else {
            if (!gr_reserve(g, &index->alloc, nb, &ob))
                return QG_ERR_NOMEM;
            gr_relink(g, bits, ob, nb, h);
            gr_reach_add(g, nb);
        }
    }
#if defined(__SSE2__)
    _mm_storeu_ps(&index->boxes[h].min_x, v);
#else
    index->boxes[h] = box;
#endif
    return QG_OK;
}

/// The wide list's part of a query. False when fn asked to stop.
static inline bool gr_query_wide(const gr_grid *g, const qg_rect *boxes, qg_rect area, qg_query_fn *fn, void *user,
                                 qg_query_stats *stats)
{
    stats->elements_tested += g->wide_count;
    for (int32_t i = 0; i < g->wide_count; ++i) {
        const qg_handle h = g->wide[i];
        if (qg_overlaps(boxes[h], area) && !fn(h, user))
            return false;
    }
    return true;
}

/// The wide list's pairs: among its elements (when `among`), then
/// each of them with every other live element of handles [h0, h1) (one
/// pass over the boxes; an overlapping one is skipped when it is on the
/// list too, as that pair came first). False when fn asked to stop.
static inline bool gr_pairs_wide(const gr_grid *g, const qg_index *index, qg_pair_fn *fn, void *user,
                                 qg_query_stats *stats, qg_handle h0, qg_handle h1, bool among)
{
    const qg_rect *boxes = index->boxes;
    const int32_t w = g->wide_count;
    stats->elements_tested += (among ? (int64_t)w * (w - 1) / 2 : 0) + (int64_t)w * (h1 - h0);
    if (among) {
        for (int32_t i = 0; i < w; ++i) {
            const qg_rect a = boxes[g->wide[i]];
            for (int32_t j = i + 1; j < w; ++j) {
                if (qg_overlaps(a, boxes[g->wide[j]]) && !qg_report_pair(fn, user, g->wide[i], g->wide[j]))
                    return false;
            }
        }
    }
    for (qg_handle h = h0; h < h1; ++h) {
        const qg_rect b = boxes[h];
        if (isnan(b.min_x))
            continue;
        bool listed = false, known = false;
        for (int32_t i = 0; i < w; ++i) {
            if (!qg_overlaps(boxes[g->wide[i]], b))
                continue;
            if (!known) {
                listed = gr_is_wide(g, gr_map_box(g, b));
                known = true;
            }
            if (!listed && !qg_report_pair(fn, user, g->wide[i], h))
                return false;
        }
    }
    return true;
}

/// Reports the elements of wrapped cell (x, y) that overlap area (whose
/// unwrapped range is qb), each only in the cell of the top-left corner of
/// its overlap with the area. False when fn asked to stop.
static inline bool gr_query_cell(const gr_grid *g, const gr_row *r, int32_t x, int32_t y, gr_ibox qb,
                                 const qg_rect *boxes, qg_rect area, qg_query_fn *fn, void *user,
                                 qg_query_stats *stats)
{
    const int32_t qx = gr_key(qb.x0, x, g->mx), qy = gr_key(qb.y0, y, g->my);
    for (int32_t e = r->cells[x]; e >= 0; e = r->nodes[e].next) {
        const qg_handle h = r->nodes[e].element;
        const qg_rect b = boxes[h];
        stats->elements_tested++;
        if (!qg_overlaps(b, area))
            continue;
        const gr_ibox bb = gr_map_box(g, b);
        const int32_t kx = gr_key(bb.x0, x, g->mx), ky = gr_key(bb.y0, y, g->my);
        if ((kx > qx ? kx : qx) & (ky > qy ? ky : qy) & 1 && !fn(h, user))
            return false;
    }
    return true;
}

/// QG_GRID's query: every wrapped cell of the area's range, row by row.
static inline void gr_query(const gr_grid *g, const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                            qg_query_stats *stats)
{
    if (!gr_query_wide(g, index->boxes, area, fn, user, stats))
        return;
    const gr_ibox qb = gr_map_box(g, area);
    const int32_t nx = gr_span(qb.x0, qb.x1, g->cols), ny = gr_span(qb.y0, qb.y1, g->nrows);
    for (int32_t i = 0; i < ny; ++i) {
        const int32_t y = (qb.y0 + i) & g->my;
        const gr_row *r = &g->rows[y];
        if (r->cells == NULL) {
            stats->nodes_visited++; // one look at the row says all its cells are empty
            continue;
        }
        stats->nodes_visited += nx;
        for (int32_t j = 0; j < nx; ++j) {
            const int32_t x = (qb.x0 + j) & g->mx;
            if (r->cells[x] >= 0 && !gr_query_cell(g, r, x, y, qb, index->boxes, area, fn, user, stats))
                return;
        }
    }
}

/// Pairs of a cell with more than GR_GATHER elements, walked in place.
static inline bool gr_pairs_long(const gr_grid *g, const gr_row *r, int32_t x, int32_t y, const qg_rect *boxes,
                                 qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    for (int32_t e = r->cells[x]; e >= 0; e = r->nodes[e].next) {
        const qg_handle ha = r->nodes[e].element;
        const qg_rect a = boxes[ha];
        const gr_ibox ab = gr_map_box(g, a);
        const int32_t ax = gr_key(ab.x0, x, g->mx), ay = gr_key(ab.y0, y, g->my);
        for (int32_t f = r->nodes[e].next; f >= 0; f = r->nodes[f].next) {
            const qg_handle hb = r->nodes[f].element;
            const qg_rect b = boxes[hb];
            stats->elements_tested++;
            if (!qg_overlaps(a, b))
                continue;
            const gr_ibox bb = gr_map_box(g, b);
            const int32_t bx = gr_key(bb.x0, x, g->mx), by = gr_key(bb.y0, y, g->my);
            if ((ax > bx ? ax : bx) & (ay > by ? ay : by) & 1 && !qg_report_pair(fn, user, ha, hb))
                return false;
        }
    }
    return true;
}

#if defined(__GNUC__)
#define GR_PREFETCH(p) __builtin_prefetch(p)
#else
#define GR_PREFETCH(p) ((void)(p))
#endif

/// The pair loop is written once for the serial search and the parts; forced
/// inline so each caller gets its own copy, compiled as the one loop was
/// (out of line, the serial search ran 2.5% more instructions).
#if defined(__GNUC__)
#define GR_FORCE_INLINE static inline __attribute__((always_inline))
#else
#define GR_FORCE_INLINE static inline
#endif

/// Element nodes gathered per batch in gr_pairs.
#define GR_BATCH 512

/// Pairs among the k elements of wrapped cell (x, y), gathered in ids.
static inline bool gr_pairs_among(const gr_grid *g, int32_t x, int32_t y, const qg_handle *ids, int k,
                                  const qg_rect *boxes, qg_pair_fn *fn, void *user)
{
    qg_rect rb[GR_GATHER];
    int32_t kx[GR_GATHER], ky[GR_GATHER];
    for (int i = 0; i < k; ++i) {
        const qg_rect b = boxes[ids[i]];
        const gr_ibox bb = gr_map_box(g, b);
        rb[i] = b;
        kx[i] = gr_key(bb.x0, x, g->mx);
        ky[i] = gr_key(bb.y0, y, g->my);
    }
    for (int i = 0; i < k; ++i) {
        const qg_rect a = rb[i];
        const int32_t ax = kx[i], ay = ky[i];
        for (int j = i + 1; j < k; ++j) {
            const int32_t mx = ax > kx[j] ? ax : kx[j], my = ay > ky[j] ? ay : ky[j];
            if ((mx & my & 1) & qg_overlaps(a, rb[j]) && !qg_report_pair(fn, user, ids[i], ids[j]))
                return false;
        }
    }
    return true;
}

/// The pairs of rows [y0, y1): rows in order, cells in order; a pair is
/// reported only in the wrapped cell of the top-left corner of the two
/// boxes' overlap (gr_key). The lists of a run of cells are gathered first,
/// prefetching every element's box, so the boxes' cache misses overlap
/// instead of queueing one behind the other. False when fn asked to stop.
GR_FORCE_INLINE bool gr_pairs_rows(const gr_grid *g, const qg_index *index, int32_t y0, int32_t y1, qg_pair_fn *fn,
                                 void *user, qg_query_stats *stats)
{
    const qg_rect *boxes = index->boxes;
    qg_handle ids[GR_BATCH];
    int32_t cell_x[GR_BATCH / 2];
    int start[GR_BATCH / 2 + 1];
    for (int32_t y = y0; y < y1; ++y) {
        const gr_row *r = &g->rows[y];
        if (r->cells == NULL || r->live < 2) {
            stats->nodes_visited++; // one look at the row says no cell holds two
            continue;
        }
        stats->nodes_visited += g->cols;
        const int32_t *cells = r->cells;
        const qg_enode *nodes = r->nodes;
        int32_t x = 0;
        while (x < g->cols) {
            int n = 0, fill = 0;
            start[0] = 0;
            for (; x < g->cols && fill + GR_GATHER <= GR_BATCH && n < GR_BATCH / 2; ++x) {
                const int32_t head = cells[x];
                if (head < 0 || nodes[head].next < 0)
                    continue;
                int k = 0;
                int32_t e = head;
                for (; e >= 0 && k < GR_GATHER; e = nodes[e].next, ++k) {
                    const qg_handle h = nodes[e].element;
                    GR_PREFETCH(&boxes[h]);
                    ids[fill + k] = h;
                }
                if (e >= 0) {
                    if (!gr_pairs_long(g, r, x, y, boxes, fn, user, stats))
                        return false;
                    continue;
                }
                stats->elements_tested += (int64_t)k * (k - 1) / 2;
                cell_x[n++] = x;
                fill += k;
                start[n] = fill;
            }
            for (int i = 0; i < n; ++i) {
                if (!gr_pairs_among(g, cell_x[i], y, ids + start[i], start[i + 1] - start[i], boxes, fn, user))
                    return false;
            }
        }
    }
    return true;
}

/// Every overlapping pair once: the wide list's, then every row's.
static inline void gr_pairs(const gr_grid *g, const qg_index *index, qg_pair_fn *fn, void *user,
                            qg_query_stats *stats)
{
    if (g->wide_count > 0 && !gr_pairs_wide(g, index, fn, user, stats, 0, index->box_high, true))
        return;
    gr_pairs_rows(g, index, 0, g->nrows, fn, user, stats);
}

/// The band of rows [*y0, *y1) that part `part` of `parts` takes: bands
/// are contiguous and balanced by the rows' element nodes (a row goes to
/// the part its middle node falls in), so uneven scenes still split evenly.
/// Every part computes all the bands the same way from the same state.
static inline void gr_band(const gr_grid *g, int32_t part, int32_t parts, int32_t *y0, int32_t *y1)
{
    int64_t total = 0;
    for (int32_t y = 0; y < g->nrows; ++y)
        total += g->rows[y].live;
    if (total == 0) {
        int64_t b, e;
        qg_part_range(g->nrows, part, parts, &b, &e);
        *y0 = (int32_t)b;
        *y1 = (int32_t)e;
        return;
    }
    int64_t before = 0;
    int32_t y = 0;
    *y0 = -1;
    for (; y < g->nrows; ++y) {
        const int64_t live = g->rows[y].live;
        const int64_t owner = (2 * before + live) * parts / (2 * total);
        if (owner >= part && *y0 < 0)
            *y0 = y;
        if (owner > part)
            break;
        before += live;
    }
    if (*y0 < 0)
        *y0 = y;
    // Rows past the last live one belong to the last band: a batch move
    // links into rows that are empty before it (they once fell in no band,
    // and a box moved into them was stored but never linked).
    *y1 = part == parts - 1 ? g->nrows : y;
}

/// Part `part` of `parts` of gr_pairs: the wide list's pairs split by
/// handle range (those among the list in part 0), then a band of rows
/// (gr_band). A pair is reported in one cell only, and a cell lies in one
/// band, so the parts are disjoint and their union is gr_pairs' set: the
/// torus wrap changes nothing, as the reporting cell is a wrapped cell.
static inline void gr_pairs_part(const gr_grid *g, const qg_index *index, int32_t part, int32_t parts,
                                 qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    if (g->wide_count > 0) {
        int64_t b, e;
        qg_part_range(index->box_high, part, parts, &b, &e);
        if (!gr_pairs_wide(g, index, fn, user, stats, (qg_handle)b, (qg_handle)e, part == 0))
            return;
    }
    int32_t y0, y1;
    gr_band(g, part, parts, &y0, &y1);
    gr_pairs_rows(g, index, y0, y1, fn, user, stats);
}

/* ---- several cores: the batch move --------------------------------------- */

/// The most parts a job system may ask for (index.c's limit).
#define GR_MAX_PARTS 256

/// One move of a batch whose cells change: its handle, its old and new
/// cell ranges and whether each is on the wide list instead.
typedef struct gr_change {
    gr_ibox ob, nb;
    qg_handle h;
    int32_t ow, nw;
} gr_change;

/// A batch move's shared state (gr_move_many).
typedef struct gr_batch {
    gr_grid *g;
    qg_rect *base_boxes;
    const qg_handle *handles;
    const qg_rect *boxes;
    uint8_t *moved; ///< per move: 1 when its cells change (phase 1)
    gr_change *changes;
    int32_t nchanges, n, parts;
    int32_t band[GR_MAX_PARTS + 1]; ///< part p relinks rows [band[p], band[p + 1])
} gr_batch;

/// Phase 1, over ranges of the batch: which moves change cells. Reads only.
static inline void gr_batch_classify(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    gr_batch *b = context;
    const gr_grid *g = b->g;
    for (int32_t i = begin; i < end; ++i) {
        const gr_ibox nb = gr_map_box(g, b->boxes[i]), ob = gr_map_box(g, b->base_boxes[b->handles[i]]);
        // A box that stays on the wide list changes no cell either.
        b->moved[i] = !gr_ibox_equal(ob, nb) && !(gr_is_wide(g, ob) && gr_is_wide(g, nb));
    }
}

/// Phase 2, one part each: the part's share of the batch stores its boxes,
/// then the part unlinks and links the changed moves' cells in its band of
/// rows: every unlink of the band before any link, so a row never holds
/// more nodes than it holds at the end (what was reserved). Rows are the
/// only shared structure touched, and each row has one owner. The bitset
/// of QG_MULTI_GRID is shared across bands: it is brought up to date after.
static inline void gr_batch_relink(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    gr_batch *b = context;
    gr_grid *g = b->g;
    for (int32_t p = begin; p < end; ++p) {
        int64_t i0, i1;
        qg_part_range(b->n, p, b->parts, &i0, &i1);
        for (int64_t i = i0; i < i1; ++i)
            b->base_boxes[b->handles[i]] = b->boxes[i];
        const int32_t y0 = b->band[p], y1 = b->band[p + 1];
        if (y0 == y1)
            continue;
        for (int32_t c = 0; c < b->nchanges; ++c) {
            const gr_change *m = &b->changes[c];
            if (m->ow)
                continue;
            const gr_ibox ob = m->ob, nb = m->nb;
            const int32_t nx = gr_span(ob.x0, ob.x1, g->cols), ny = gr_span(ob.y0, ob.y1, g->nrows);
            for (int32_t k = 0; k < ny; ++k) {
                const int32_t y = (ob.y0 + k) & g->my;
                if (y < y0 || y >= y1)
                    continue;
                gr_row *r = &g->rows[y];
                for (int32_t j = 0; j < nx; ++j) {
                    const int32_t x = (ob.x0 + j) & g->mx;
                    if (m->nw || !gr_in(g, nb, x, y))
                        gr_unlink(r, x, m->h);
                }
            }
        }
        for (int32_t c = 0; c < b->nchanges; ++c) {
            const gr_change *m = &b->changes[c];
            if (m->nw)
                continue;
            const gr_ibox ob = m->ob, nb = m->nb;
            const int32_t nx = gr_span(nb.x0, nb.x1, g->cols), ny = gr_span(nb.y0, nb.y1, g->nrows);
            for (int32_t k = 0; k < ny; ++k) {
                const int32_t y = (nb.y0 + k) & g->my;
                if (y < y0 || y >= y1)
                    continue;
                gr_row *r = &g->rows[y];
                for (int32_t j = 0; j < nx; ++j) {
                    const int32_t x = (nb.x0 + j) & g->mx;
                    if (m->ow || !gr_in(g, ob, x, y))
                        gr_link(r, x, m->h);
                }
            }
        }
    }
}

/// Adds to delta[y] the nodes row y gains (+) and loses (-) when h goes from
/// range `from` to range `to` (cells of `from` not in `to`: -1 each; a
/// wide range has no cells), and marks in adds[y] that the row gains one.
static inline void gr_batch_count(const gr_grid *g, const gr_change *m, int32_t *delta, uint8_t *adds)
{
    if (!m->ow) {
        const int32_t nx = gr_span(m->ob.x0, m->ob.x1, g->cols), ny = gr_span(m->ob.y0, m->ob.y1, g->nrows);
        for (int32_t k = 0; k < ny; ++k) {
            const int32_t y = (m->ob.y0 + k) & g->my;
            for (int32_t j = 0; j < nx; ++j)
                delta[y] -= m->nw || !gr_in(g, m->nb, (m->ob.x0 + j) & g->mx, y);
        }
    }
    if (!m->nw) {
        const int32_t nx = gr_span(m->nb.x0, m->nb.x1, g->cols), ny = gr_span(m->nb.y0, m->nb.y1, g->nrows);
        for (int32_t k = 0; k < ny; ++k) {
            const int32_t y = (m->nb.y0 + k) & g->my;
            int32_t gain = 0;
            for (int32_t j = 0; j < nx; ++j)
                gain += m->ow || !gr_in(g, m->ob, (m->nb.x0 + j) & g->mx, y);
            delta[y] += gain;
            adds[y] |= gain > 0;
        }
    }
}

/// Gives every row what the batch's relinks need (cells where it gains
/// nodes and has none, nodes for its live count at the end); on failure
/// gives back what it grew and returns false (the rows' undo records).
static inline bool gr_batch_reserve(gr_grid *g, qg_alloc *alloc, const int32_t *delta, const uint8_t *adds)
{
    bool ok = true;
    for (int32_t y = 0; y < g->nrows && ok; ++y) {
        gr_row *r = &g->rows[y];
        if (!adds[y])
            continue;
        if (r->cells == NULL) {
            r->cells = qg_mem_alloc(alloc, (size_t)g->cols * sizeof(int32_t));
            if (r->cells == NULL) {
                ok = false;
                break;
            }
            memset(r->cells, 0xff, (size_t)g->cols * sizeof(int32_t));
            r->undo_cells = 1;
        }
        const int64_t needed = (int64_t)r->live + delta[y];
        if (needed > r->capacity) {
            const int64_t cap = gr_grown_capacity(r, needed);
            void *q = cap > INT32_MAX ? NULL
                                      : qg_mem_resize(alloc, r->nodes, (size_t)r->capacity * sizeof(qg_enode),
                                                      (size_t)cap * sizeof(qg_enode));
            if (q == NULL) {
                ok = false;
                break;
            }
            r->undo_capacity = r->capacity;
            r->grown = 1;
            r->nodes = q;
            r->capacity = (int32_t)cap;
        }
    }
    for (int32_t y = 0; y < g->nrows; ++y) {
        gr_row *r = &g->rows[y];
        if (!ok && r->undo_capacity >= 0) {
            r->nodes = qg_mem_resize(alloc, r->nodes, (size_t)r->capacity * sizeof(qg_enode),
                                     (size_t)r->undo_capacity * sizeof(qg_enode));
            r->capacity = r->undo_capacity;
        }
        if (!ok && r->undo_cells) {
            qg_mem_free(alloc, r->cells, (size_t)g->cols * sizeof(int32_t));
            r->cells = NULL;
        }
        gr_row_reset_undo(r);
    }
    return ok;
}

/// qg_move_many for both grids (bits: QG_MULTI_GRID's bitset, else NULL).
/// 1. In parallel over the batch: which moves change cells (reads only).
/// 2. Serially over the changed ones (a few percent of a frame's moves on
///    `agents`): their ranges, each row's node balance, and every
///    allocation (the wide list through a txn, the rows with their
///    undo records); QG_ERR_NOMEM here leaves the index as it was.
/// 3. In parallel, one part each: a share of the box stores, and the
///    relinks of a band of rows (gr_batch_relink).
/// 4. Serially: the wide list and the bitset of the changed moves.
/// The lists end up holding what n qg_move calls give (node order within a
/// cell may differ, which no answer depends on).
static inline qg_status gr_move_many(gr_grid *g, gr_bits *bits, qg_index *index, const qg_jobs *jobs,
                                     const qg_handle *handles, const qg_rect *boxes, int32_t n)
{
    qg_alloc *alloc = &index->alloc;
    gr_batch *b = qg_mem_alloc(alloc, sizeof(gr_batch));
    uint8_t *moved = qg_mem_alloc(alloc, (size_t)n);
    int32_t *delta = qg_mem_alloc(alloc, (size_t)g->nrows * sizeof(int32_t));
    uint8_t *adds = qg_mem_alloc(alloc, (size_t)g->nrows);
    gr_change *changes = NULL;
    size_t changes_bytes = 0;
    qg_status s = QG_ERR_NOMEM;
    if (b == NULL || moved == NULL || delta == NULL || adds == NULL)
        goto out;
    b->g = g;
    b->base_boxes = index->boxes;
    b->handles = handles;
    b->boxes = boxes;
    b->moved = moved;
    b->n = n;
    b->parts = jobs != NULL && jobs->worker_count > 1 ? jobs->worker_count : 1;
    qg_jobs_run(jobs, gr_batch_classify, n, b);
    int32_t nchanges = 0;
    for (int32_t i = 0; i < n; ++i)
        nchanges += moved[i];
    changes_bytes = (size_t)nchanges * sizeof(gr_change);
    if (nchanges > 0 && (changes = qg_mem_alloc(alloc, changes_bytes)) == NULL)
        goto out;
    memset(delta, 0, (size_t)g->nrows * sizeof(int32_t));
    memset(adds, 0, (size_t)g->nrows);
    int64_t wide_net = 0;
    for (int32_t i = 0, c = 0; i < n; ++i) {
        if (!moved[i])
            continue;
        gr_change *m = &changes[c++];
        m->h = handles[i];
        m->ob = gr_map_box(g, index->boxes[m->h]);
        m->nb = gr_map_box(g, boxes[i]);
        m->ow = gr_is_wide(g, m->ob);
        m->nw = gr_is_wide(g, m->nb);
        wide_net += m->nw - m->ow;
        gr_batch_count(g, m, delta, adds);
        if (!m->nw)
            gr_reach_add(g, m->nb); // grow-only: harmless if the batch fails
    }
    qg_txn txn;
    qg_txn_begin(&txn, alloc);
    if (wide_net > 0 && !qg_txn_reserve(&txn, (void **)&g->wide, &g->wide_capacity, sizeof(int32_t),
                                        (int64_t)g->wide_count + wide_net))
        goto out;
    if (!gr_batch_reserve(g, alloc, delta, adds)) {
        qg_txn_rollback(&txn);
        goto out;
    }
    // Nothing can fail from here on. The bands are fixed before any row
    // changes (gr_band reads the rows' counts).
    s = QG_OK;
    b->changes = changes;
    b->nchanges = nchanges;
    for (int32_t p = 0; p < b->parts; ++p)
        gr_band(g, p, b->parts, &b->band[p], &b->band[p + 1]);
    qg_jobs_run(jobs, gr_batch_relink, b->parts, b);
    for (int32_t c = 0; c < nchanges; ++c) {
        const gr_change *m = &changes[c];
        if (m->ow && !m->nw)
            gr_wide_remove(g, m->h);
    }
    for (int32_t c = 0; c < nchanges; ++c) {
        const gr_change *m = &changes[c];
        if (m->nw && !m->ow)
            g->wide[g->wide_count++] = m->h;
    }
    if (bits != NULL) {
        // Each changed cell's bit from its list, in any order: a set or a
        // clear keeps the levels above consistent with level 1.
        for (int32_t c = 0; c < nchanges; ++c) {
            const gr_change *m = &changes[c];
            for (int w = 0; w < 2; ++w) {
                const gr_ibox r = w ? m->nb : m->ob;
                if (w ? m->nw : m->ow)
                    continue;
                const int32_t nx = gr_span(r.x0, r.x1, g->cols), ny = gr_span(r.y0, r.y1, g->nrows);
                for (int32_t k = 0; k < ny; ++k) {
                    const int32_t y = (r.y0 + k) & g->my;
                    const gr_row *row = &g->rows[y];
                    for (int32_t j = 0; j < nx; ++j) {
                        const int32_t x = (r.x0 + j) & g->mx;
                        if (row->cells != NULL && row->cells[x] >= 0)
                            gr_bits_set(bits, x, y);
                        else
                            gr_bits_clear(bits, x, y);
                    }
                }
            }
        }
    }
out:
    qg_mem_free(alloc, changes, changes_bytes);
    qg_mem_free(alloc, adds, (size_t)g->nrows);
    qg_mem_free(alloc, delta, (size_t)g->nrows * sizeof(int32_t));
    qg_mem_free(alloc, moved, (size_t)n);
    qg_mem_free(alloc, b, sizeof(gr_batch));
    return s;
}

/// qg_insert_many for both grids (bits: QG_MULTI_GRID's bitset, else NULL).
/// The boxes are bucketed by row, then each row's new nodes are written
/// cell by cell, so a cell's new nodes are contiguous (in handle order):
/// the walks of a ray cast or a nearest search, which follow a cell's list,
/// then read one or two cache lines per cell instead of a scattered node
/// per element (one-at-a-time inserts leave a row's nodes in insertion
/// order). A row holding free slots takes its nodes through its free list
/// as gr_link does. Every allocation comes first (the wide list through
/// txn, the rows with their undo records, the scratch arrays): QG_ERR_NOMEM
/// leaves the index unchanged.
static inline qg_status gr_insert_many(gr_grid *g, gr_bits *bits, qg_index *index, qg_txn *txn,
                                       const qg_handle *handles, int32_t n)
{
    qg_alloc *alloc = &index->alloc;
    const size_t nr = (size_t)g->nrows;
    int32_t *delta = qg_mem_alloc(alloc, nr * sizeof(int32_t));
    uint8_t *adds = qg_mem_alloc(alloc, nr);
    int32_t *start = qg_mem_alloc(alloc, (nr + 1) * sizeof(int32_t));
    int32_t *count = qg_mem_alloc(alloc, (size_t)g->cols * sizeof(int32_t));
    int32_t *items = NULL;
    size_t items_bytes = 0;
    qg_status s = QG_ERR_NOMEM;
    if (delta == NULL || adds == NULL || start == NULL || count == NULL)
        goto out;
    memset(delta, 0, nr * sizeof(int32_t));
    memset(adds, 0, nr);
    int64_t wide = 0, entries = 0;
    for (int32_t i = 0; i < n; ++i) {
        const gr_ibox b = gr_map_box(g, index->boxes[handles[i]]);
        if (gr_is_wide(g, b)) {
            wide++;
            continue;
        }
        const int32_t nx = gr_span(b.x0, b.x1, g->cols), ny = gr_span(b.y0, b.y1, g->nrows);
        for (int32_t k = 0; k < ny; ++k) {
            const int32_t y = (b.y0 + k) & g->my;
            delta[y] += nx;
            adds[y] = 1;
        }
        entries += ny;
    }
    // The (row, element) entries, bucketed by row.
    items_bytes = (size_t)entries * sizeof(int32_t);
    if (entries > INT32_MAX || (entries > 0 && (items = qg_mem_alloc(alloc, items_bytes)) == NULL))
        goto out;
    if (wide > 0 && !qg_txn_reserve(txn, (void **)&g->wide, &g->wide_capacity, sizeof(int32_t),
                                    (int64_t)g->wide_count + wide))
        goto out;
    if (!gr_batch_reserve(g, alloc, delta, adds))
        goto out; // the caller rolls txn back
    // Nothing can fail from here on.
    s = QG_OK;
    // Row bucket sizes: the boxes touching each row (delta counted nodes).
    memset(start, 0, (nr + 1) * sizeof(int32_t));
    for (int32_t i = 0; i < n; ++i) {
        const qg_handle h = handles[i];
        const gr_ibox b = gr_map_box(g, index->boxes[h]);
        if (gr_is_wide(g, b)) {
            g->wide[g->wide_count++] = h;
            continue;
        }
        gr_reach_add(g, b);
        for (int32_t k = 0, ny = gr_span(b.y0, b.y1, g->nrows); k < ny; ++k)
            start[((b.y0 + k) & g->my) + 1]++;
    }
    for (size_t y = 0; y < nr; ++y)
        start[y + 1] += start[y];
    for (int32_t i = 0; i < n; ++i) {
        const qg_handle h = handles[i];
        const gr_ibox b = gr_map_box(g, index->boxes[h]);
        if (gr_is_wide(g, b))
            continue;
        for (int32_t k = 0, ny = gr_span(b.y0, b.y1, g->nrows); k < ny; ++k)
            items[start[(b.y0 + k) & g->my]++] = h;
    }
    // start[y] is now where row y's bucket ends: row y's is [start[y - 1], start[y]).
    for (int32_t y = 0; y < g->nrows; ++y) {
        const int32_t i0 = y > 0 ? start[y - 1] : 0, i1 = start[y];
        if (i0 == i1)
            continue;
        gr_row *r = &g->rows[y];
        if (r->free_head >= 0) {
            for (int32_t i = i0; i < i1; ++i) {
                const qg_handle h = items[i];
                const gr_ibox b = gr_map_box(g, index->boxes[h]);
                for (int32_t j = 0, nx = gr_span(b.x0, b.x1, g->cols); j < nx; ++j) {
                    const int32_t x = (b.x0 + j) & g->mx;
                    if (gr_link(r, x, h) && bits != NULL)
                        gr_bits_set(bits, x, y);
                }
            }
            continue;
        }
        // Counting sort by cell: count[x] new nodes, then slots from high.
        memset(count, 0, (size_t)g->cols * sizeof(int32_t));
        for (int32_t i = i0; i < i1; ++i) {
            const gr_ibox b = gr_map_box(g, index->boxes[items[i]]);
            for (int32_t j = 0, nx = gr_span(b.x0, b.x1, g->cols); j < nx; ++j)
                count[(b.x0 + j) & g->mx]++;
        }
        const int32_t old_high = r->high; // == live: no free slot
        int32_t at = old_high;
        for (int32_t x = 0; x < g->cols; ++x) {
            const int32_t c = count[x];
            if (c == 0)
                continue;
            // Slots [at, at + c) chain in order onto the old list.
            for (int32_t j = 0; j < c; ++j)
                r->nodes[at + j].next = j + 1 < c ? at + j + 1 : r->cells[x];
            if (r->cells[x] < 0 && bits != NULL)
                gr_bits_set(bits, x, y);
            r->cells[x] = at;
            count[x] = at; // next slot to fill
            at += c;
        }
        r->high = at;
        r->live += at - old_high;
        for (int32_t i = i0; i < i1; ++i) {
            const qg_handle h = items[i];
            const gr_ibox b = gr_map_box(g, index->boxes[h]);
            for (int32_t j = 0, nx = gr_span(b.x0, b.x1, g->cols); j < nx; ++j)
                r->nodes[count[(b.x0 + j) & g->mx]++].element = h;
        }
    }
out:
    qg_mem_free(alloc, items, items_bytes);
    qg_mem_free(alloc, count, (size_t)g->cols * sizeof(int32_t));
    qg_mem_free(alloc, start, (nr + 1) * sizeof(int32_t));
    qg_mem_free(alloc, adds, nr);
    qg_mem_free(alloc, delta, nr * sizeof(int32_t));
    return s;
}

/* ---- stats, visit, validate ---------------------------------------------- */

static inline int64_t gr_cell_length(const gr_row *r, int32_t x)
{
    int64_t n = 0;
    for (int32_t e = r->cells[x]; e >= 0 && n <= r->high; e = r->nodes[e].next)
        n++;
    return n;
}

/// Calls fn for every non-empty fine cell, depth `depth`, drawn where it
/// falls in the bounds' window.
static inline void gr_visit_cells(const gr_grid *g, int depth, qg_visit_fn *fn, void *user)
{
    for (int32_t y = 0; y < g->nrows; ++y) {
        const gr_row *r = &g->rows[y];
        if (r->cells == NULL || r->live == 0)
            continue;
        for (int32_t x = 0; x < g->cols; ++x) {
            if (r->cells[x] >= 0)
                fn(gr_cell_rect(g, gr_unwrap(x, g->home_x, g->mx), gr_unwrap(y, g->home_y, g->my), 1), depth,
                   (int32_t)gr_cell_length(r, x), user);
        }
    }
}

/// A well-mixed 64-bit value of v and a salt (splitmix64's finaliser).
static inline uint64_t gr_mix(uint64_t v, uint64_t salt)
{
    v += salt * 0x9e3779b97f4a7c15ull;
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
    return (v ^ (v >> 31)) | 1;
}

/// The element's factor in the fingerprint: one multiply, as it runs for
/// every node (the cell factors are mixed well, once per cell).
static inline uint64_t gr_elem_print(qg_handle h)
{
    return ((uint64_t)(uint32_t)h * 2 + 1) * 0xd6e8feb86659fd93ull;
}

/// Checks every row, free list and list, and that the element nodes are
/// exactly "h in every cell of its box, once". The last part compares two
/// fingerprints of the set of (element, x, y) triples, one summed over the
/// nodes and one over the cells every element's box maps to, with the term
/// a(h) * b(x) * c(y): separable, so an element's whole cell range sums in
/// O(columns + rows), and a node in a wrong cell, a duplicate or a missing
/// node changes the sum (except with probability ~2^-60). Plain
/// comparisons could not do it in linear time without allocating. Adds the
/// rows' bytes. `bits` are checked by the caller.
static inline bool gr_validate(const gr_grid *g, const qg_index *index, size_t *bytes)
{
    if (g->rows == NULL || g->cols < 1 || g->nrows < 1 || (g->cols & g->mx) != 0 || (g->nrows & g->my) != 0 ||
        g->mx != g->cols - 1 || g->my != g->nrows - 1)
        return false;
    int64_t nodes_seen = 0;
    uint64_t print_nodes = 0;
    size_t b = (size_t)g->nrows * sizeof(gr_row);
    for (int32_t y = 0; y < g->nrows; ++y) {
        const gr_row *r = &g->rows[y];
        if (r->undo_capacity != -1 || r->undo_cells != 0 || (r->emptied & ~1) != 0 || (r->grown & ~1) != 0)
            return false;
        if (r->high < 0 || r->high > r->capacity || r->live < 0 || r->live > r->high ||
            (r->capacity > 0) != (r->nodes != NULL))
            return false;
        if (r->cells == NULL) {
            if (r->live != 0)
                return false;
        } else {
            b += (size_t)g->cols * sizeof(int32_t);
        }
        b += (size_t)r->capacity * sizeof(qg_enode);
        // Free list: exactly the dead slots below high.
        int64_t free_count = 0;
        for (int32_t e = r->free_head; e >= 0; e = r->nodes[e].next) {
            if (e >= r->high || r->nodes[e].element != -1 || ++free_count > r->high - r->live)
                return false;
        }
        if (free_count != r->high - r->live)
            return false;
        if (r->cells == NULL || r->live == 0)
            continue;
        const uint64_t cy = gr_mix((uint64_t)y, 3);
        int64_t in_row = 0;
        for (int32_t x = 0; x < g->cols; ++x) {
            const uint64_t cxy = gr_mix((uint64_t)x, 2) * cy;
            for (int32_t e = r->cells[x]; e >= 0; e = r->nodes[e].next) {
                if (e >= r->high || ++in_row > r->live)
                    return false;
                const qg_handle h = r->nodes[e].element;
                if (!qg_slot_live(index, h))
                    return false;
                print_nodes += gr_elem_print(h) * cxy;
            }
        }
        if (in_row != r->live)
            return false;
        nodes_seen += in_row;
    }
    // The wide list: exactly the live wide elements, once each (a
    // fingerprint again, as the list may be long).
    if (g->wide_count < 0 || g->wide_count > g->wide_capacity || (g->wide_capacity > 0) != (g->wide != NULL))
        return false;
    uint64_t print_wide = 0, print_wide_live = 0;
    for (int32_t i = 0; i < g->wide_count; ++i) {
        const qg_handle h = g->wide[i];
        if (!qg_slot_live(index, h) || !gr_is_wide(g, gr_map_box(g, index->boxes[h])))
            return false;
        print_wide += gr_elem_print(h);
    }
    int64_t expected = 0, wide_live = 0;
    uint64_t print_boxes = 0;
    for (qg_handle h = 0; h < index->box_high; ++h) {
        if (!qg_slot_live(index, h))
            continue;
        const gr_ibox ib = gr_map_box(g, index->boxes[h]);
        if (gr_is_wide(g, ib)) {
            wide_live++;
            print_wide_live += gr_elem_print(h);
            continue;
        }
        // The ray and nearest walks stop at the reach's edge.
        if (ib.x0 < g->reach.x0 || ib.y0 < g->reach.y0 || ib.x1 > g->reach.x1 || ib.y1 > g->reach.y1)
            return false;
        expected += gr_ibox_cells(g, ib);
        uint64_t sx = 0, sy = 0;
        for (int32_t j = 0, nx = gr_span(ib.x0, ib.x1, g->cols); j < nx; ++j)
            sx += gr_mix((uint64_t)((ib.x0 + j) & g->mx), 2);
        for (int32_t i = 0, ny = gr_span(ib.y0, ib.y1, g->nrows); i < ny; ++i)
            sy += gr_mix((uint64_t)((ib.y0 + i) & g->my), 3);
        print_boxes += gr_elem_print(h) * sx * sy;
    }
    if (expected != nodes_seen || print_nodes != print_boxes || wide_live != g->wide_count ||
        print_wide != print_wide_live)
        return false;
    *bytes += b + (size_t)g->wide_capacity * sizeof(int32_t);
    return true;
}

/* ---- ray casts and nearest searches (issue 13) --------------------------- */
// Both walk unwrapped cells (so a segment or ring that wraps round the torus
// meets each wrapped cell once per unwrapped copy) clipped to the reach, and
// fall back to one pass over every wrapped cell when the walk would visit
// more cells than the torus has: exact either way, and never slower than
// that pass by more than a constant.
//
// Rounding: a point v maps to cell floor(v * inv - org); the world lines of
// the cells are computed in double as (u + org) / inv. The two disagree by
// a few float ulps of |v| and of the world's centre (org / inv), so every
// band and every distance bound is widened by gr_hair, 1e-5 of those
// magnitudes (about a hundred ulps): a point is always inside the widened
// box of the cell it maps to.

/// |v| when finite, else 0 (a hair is taken from the finite coordinates
/// involved; an infinite end is clipped to the reach anyway).
static inline double gr_fin(double v)
{
    return isfinite(v) ? fabs(v) : 0.0;
}

/// World coordinate of unwrapped cell line u on the axis whose centre is
/// `org` cells: the inverse of gr_map, in double.
static inline double gr_line(const gr_grid *g, int64_t u, float org)
{
    return ((double)u + (double)org) / (double)g->inv;
}

/// The widening that covers gr_map's rounding near coordinates of magnitude
/// `a` on an axis whose centre is `org` cells.
static inline double gr_hair(const gr_grid *g, double a, float org)
{
    return 1e-5 * (a + fabs((double)org / (double)g->inv)) + 1e-30;
}

/// The elements of wrapped cell x of `row`, visited as unwrapped cell
/// (ux, uy): each hit element is reported only when P, the hit point
/// clamped into its box, maps to (ux, uy). P lies in the box, so (gr_map
/// being monotonic) P's cell is one of the box's cells and the element is
/// listed there; P lies on the segment up to rounding, so the widened walk
/// visits P's unwrapped cell; and that cell is one: each element is
/// reported once, with no visited set, however often the walk meets its
/// wrapped cells. P does not depend on max_t, so every visit agrees.
static inline bool gr_ray_cell(const gr_grid *g, const gr_row *row, int32_t x, int32_t ux, int32_t uy,
                               const qg_rect *boxes, qg_ray *r)
{
    // The hit test with the ray's inverses (computed once per cast): the
    // same roundings as qg_ray_box, so the same answers bit for bit.
    for (int32_t e = row->cells[x]; e >= 0; e = row->nodes[e].next) {
        const qg_handle h = row->nodes[e].element;
        const qg_rect b = boxes[h];
        float t0, t1;
        if (!qg_ray_span(r, b, &t0, &t1))
            continue;
        const float t = t0;
        const float mx = t * r->dx, my = t * r->dy;
        float px = r->dx == 0.0f ? r->ox : r->ox + mx, py = r->dy == 0.0f ? r->oy : r->oy + my;
        px = px < b.min_x ? b.min_x : (px > b.max_x ? b.max_x : px);
        py = py < b.min_y ? b.min_y : (py > b.max_y ? b.max_y : py);
        if (gr_map(px, g->inv, g->org[0]) != ux || gr_map(py, g->inv, g->org[1]) != uy)
            continue;
        if (!qg_ray_report(r, h, t))
            return false;
    }
    return true;
}

/// The fallback of a ray whose walk would be longer than the torus: every
/// element is tested once, in the wrapped cell of its box's min corner.
static inline void gr_ray_scan(const gr_grid *g, const qg_rect *boxes, qg_ray *r)
{
    for (int32_t y = 0; y < g->nrows; ++y) {
        const gr_row *row = &g->rows[y];
        if (row->cells == NULL || row->live == 0)
            continue;
        for (int32_t x = 0; x < g->cols; ++x) {
            for (int32_t e = row->cells[x]; e >= 0; e = row->nodes[e].next) {
                const qg_handle h = row->nodes[e].element;
                const qg_rect b = boxes[h];
                float t;
                if (!qg_ray_box_fast(b, r->ox, r->oy, r->dx, r->dy, r->max_t, &t))
                    continue;
                const gr_ibox ib = gr_map_box(g, b);
                if ((ib.x0 & g->mx) == x && (ib.y0 & g->my) == y && !qg_ray_report(r, h, t))
                    return;
            }
        }
    }
}

/// Unwrapped cell of the double coordinate v (rounded to float, then
/// gr_map: the widenings are far wider than that rounding).
static inline int32_t gr_map_d(const gr_grid *g, double v, float org)
{
    return gr_map((float)v, g->inv, org);
}

/// Cells of a ray walk gathered before their elements are tested: the
/// boxes sit at random places in the base's array, so each test is a cache
/// miss; a first pass over a batch's lists prefetches them all, so the
/// misses overlap instead of following one another.
#define GR_RAY_BATCH 16

typedef struct gr_ray_cellref {
    const gr_row *row;
    int32_t x, ux, uy;
    double te; ///< a ray: where it enters the cell's widened box; a nearest search: its distance2
} gr_ray_cellref;

/// Prefetches the boxes of the batch's lists. The lists' nodes lie
/// scattered in their rows' arrays (in insertion order), so each list is a
/// chain of dependent misses: the chains advance one node each in turn, so
/// the batch's chains miss at the same time rather than one after another.
static inline void gr_prefetch_lists(const gr_ray_cellref *batch, int n, const qg_rect *boxes)
{
    int32_t cur[GR_RAY_BATCH];
    for (int i = 0; i < n; ++i)
        cur[i] = batch[i].row->cells[batch[i].x];
    for (bool more = true; more;) {
        more = false;
        for (int i = 0; i < n; ++i) {
            const int32_t e = cur[i];
            if (e < 0)
                continue;
            const qg_enode node = batch[i].row->nodes[e];
            GR_PREFETCH(&boxes[node.element]);
            cur[i] = node.next;
            more = true;
        }
    }
}

/// Tests the batch's cells in walk order, skipping those entered past the
/// current max_t (strictly: ties are seen). False when the cast stopped.
static inline bool gr_ray_flush(const gr_grid *g, const gr_ray_cellref *batch, int n, const qg_rect *boxes, qg_ray *r)
{
    gr_prefetch_lists(batch, n, boxes);
    for (int i = 0; i < n; ++i)
        if (!(batch[i].te > (double)r->max_t) &&
            !gr_ray_cell(g, batch[i].row, batch[i].x, batch[i].ux, batch[i].uy, boxes, r))
            return false;
    return true;
}

/// qg_raycast for both grids: the wide list tested in full, then the rows
/// the segment crosses in the direction of dy, each row's cells in the
/// direction of dx, both clipped to the reach and widened by the hair (a
/// cell lists every element overlapping it: no margin). A row whose
/// widened band the segment enters past max_t ends the walk, a cell past it
/// ends its row (strictly past: ties are seen), so closest-hit casts stop
/// near their hit.
static inline void gr_raycast(const gr_grid *g, const qg_index *index, qg_ray *r)
{
    const qg_rect *boxes = index->boxes;
    for (int32_t i = 0; i < g->wide_count; ++i)
        if (!qg_ray_offer(r, g->wide[i], boxes[g->wide[i]]))
            return;
    const gr_ibox re = g->reach;
    if (re.x0 > re.x1)
        return;
    const double ox = r->ox, oy = r->oy;
    // The segment's extent (an infinite max_t gives an infinite end).
    const double xe = r->dx == 0.0f ? ox : ox + (double)r->max_t * r->dx;
    const double ye = r->dy == 0.0f ? oy : oy + (double)r->max_t * r->dy;
    const double xl = fmin(ox, xe), xh = fmax(ox, xe), yl = fmin(oy, ye), yh = fmax(oy, ye);
    const double hx = gr_hair(g, fabs(ox) + gr_fin(xl) + gr_fin(xh), g->org[0]);
    const double hy = gr_hair(g, fabs(oy) + gr_fin(yl) + gr_fin(yh), g->org[1]);
    int32_t y0 = gr_map_d(g, yl - hy, g->org[1]), y1 = gr_map_d(g, yh + hy, g->org[1]);
    int32_t x0 = gr_map_d(g, xl - hx, g->org[0]), x1 = gr_map_d(g, xh + hx, g->org[0]);
    y0 = y0 > re.y0 ? y0 : re.y0;
    y1 = y1 < re.y1 ? y1 : re.y1;
    x0 = x0 > re.x0 ? x0 : re.x0;
    x1 = x1 < re.x1 ? x1 : re.x1;
    if (y0 > y1 || x0 > x1)
        return;
    // About rows + columns cells, plus the hair's columns on every row:
    // past the torus's cell count one pass over the torus is cheaper.
    const double rows = (double)y1 - y0 + 1, cols = (double)x1 - x0 + 1;
    // A component so small that its inverse overflows leaves the rows'
    // column ranges undecided (from the origin on): count them all.
    const bool tiny = (r->dx != 0.0f && isinf(1.0f / r->dx)) || (r->dy != 0.0f && isinf(1.0f / r->dy));
    const double walk = tiny ? rows * cols : rows + cols + rows * (2.0 * hx * g->inv + 2.0);
    if (walk > (double)g->cols * g->nrows) {
        gr_ray_scan(g, boxes, r);
        return;
    }
    // Batches of 2, 4, 8, then 16 cells: a closest-hit cast, which mostly
    // ends in its first cells, prefetches little past its hit.
    gr_ray_cellref batch[GR_RAY_BATCH];
    int n = 0, lim = 2;
    qg_ray unbounded = *r; // band entries unclipped by max_t, to end the walk
    unbounded.max_t = INFINITY;
    const int32_t sy = r->dy < 0.0f ? -1 : 1, sx = r->dx < 0.0f ? -1 : 1;
    for (int32_t i = 0, uy = sy > 0 ? y0 : y1; i <= y1 - y0; ++i, uy += sy) {
        const gr_row *row = &g->rows[uy & g->my];
        if (row->cells == NULL || row->live == 0)
            continue;
        const double bl = gr_line(g, uy, g->org[1]), bh = gr_line(g, (int64_t)uy + 1, g->org[1]);
        const double hb = gr_hair(g, fabs(bl) + fabs(bh) + fabs(oy), g->org[1]);
        qg_rect band = {-INFINITY, (float)(bl - hb), INFINITY, (float)(bh + hb)};
        if (uy <= -(int32_t)GR_REACH)
            band.min_y = -INFINITY; // the clamped end cells reach to infinity
        if (uy >= (int32_t)GR_REACH)
            band.max_y = INFINITY;
        float ta, tb;
        if (!qg_ray_span(&unbounded, band, &ta, &tb))
            continue;
        if (ta > r->max_t)
            break; // the next rows' bands are entered later still
        tb = tb < r->max_t ? tb : r->max_t;
        // An entry at infinity (an overflowed inverse) says nothing of x:
        // the row is walked from the origin's column on.
        const double xa = r->dx == 0.0f || !isfinite(ta) ? ox : ox + (double)ta * r->dx;
        const double xb = r->dx == 0.0f ? ox : ox + (double)tb * r->dx;
        const double cl = fmin(xa, xb), ch = fmax(xa, xb);
        const double hc = gr_hair(g, fabs(ox) + gr_fin(cl) + gr_fin(ch), g->org[0]);
        int32_t c0 = gr_map_d(g, cl - hc, g->org[0]), c1 = gr_map_d(g, ch + hc, g->org[0]);
        c0 = c0 > re.x0 ? c0 : re.x0;
        c1 = c1 < re.x1 ? c1 : re.x1;
        for (int32_t m = 0, ux = sx > 0 ? c0 : c1; m <= c1 - c0; ++m, ux += sx) {
            const int32_t x = ux & g->mx;
            if (row->cells[x] < 0)
                continue;
            double te = ta;
            // The clamped end column on the side the walk comes from reaches
            // to infinity (as the end rows' bands do): a segment that starts
            // beyond its nominal edge is inside it from t = 0.
            const bool open = sx > 0 ? ux <= -(int32_t)GR_REACH : ux >= (int32_t)GR_REACH;
            if (r->dx != 0.0f && !open) {
                // The segment enters this (widened) column at tc: past
                // max_t, so are the columns after it.
                const double edge = sx > 0 ? gr_line(g, ux, g->org[0]) - hc : gr_line(g, (int64_t)ux + 1, g->org[0]) + hc;
                const double tc = (edge - ox) / r->dx;
                if (tc > (double)r->max_t)
                    break;
                te = tc > te ? tc : te;
            }
            batch[n++] = (gr_ray_cellref){row, x, ux, uy, te};
            if (n == lim) {
                if (!gr_ray_flush(g, batch, n, boxes, r))
                    return;
                n = 0;
                lim = lim * 2 < GR_RAY_BATCH ? lim * 2 : GR_RAY_BATCH;
            }
        }
    }
    gr_ray_flush(g, batch, n, boxes, r);
}

/// Offers every element of wrapped cell x of `row` (an element listed in
/// several cells may be offered several times: harmless).
static inline void gr_near_cell(const gr_row *row, int32_t x, const qg_rect *boxes, qg_near *c)
{
    for (int32_t e = row->cells[x]; e >= 0; e = row->nodes[e].next) {
        const qg_handle h = row->nodes[e].element;
        qg_near_offer(c, h, qg_point_box_d2_fast(boxes[h], c->x, c->y));
    }
}

/// Offers the elements of the batch's cells, their boxes prefetched first
/// (as a ray's, gr_prefetch_lists). Returns 0, the batch's new size.
/// The cells go nearest first (te holds their widened box's distance2):
/// the heap then fills with near elements early, later offers are refused
/// at the first comparison, and a cell past the bound ends the batch.
static inline int gr_near_flush(gr_ray_cellref *batch, int n, const qg_rect *boxes, qg_near *c)
{
    gr_prefetch_lists(batch, n, boxes);
    for (int a = 1; a < n; ++a) { // insertion sort: at most GR_RAY_BATCH cells
        const gr_ray_cellref v = batch[a];
        int b = a;
        for (; b > 0 && batch[b - 1].te > v.te; --b)
            batch[b] = batch[b - 1];
        batch[b] = v;
    }
    for (int i = 0; i < n; ++i) {
        if (batch[i].te > (double)qg_near_bound(c))
            break;
        gr_near_cell(batch[i].row, batch[i].x, boxes, c);
    }
    return 0;
}

/// Adds unwrapped cell (ux, uy) to the batch unless it is empty or its
/// widened box is farther than the bound: an element that could still
/// enter has its nearest point in a cell no farther than that, and is
/// listed there. Flushes a full batch.
static inline void gr_near_visit(const gr_grid *g, int64_t ux, int64_t uy, const qg_rect *boxes, qg_near *c,
                                 gr_ray_cellref *batch, int *n)
{
    const gr_row *row = &g->rows[uy & g->my];
    const int32_t x = (int32_t)(ux & g->mx);
    if (row->cells == NULL || row->cells[x] < 0)
        return;
    const double l = gr_line(g, ux, g->org[0]), rr = gr_line(g, ux + 1, g->org[0]);
    const double b = gr_line(g, uy, g->org[1]), t = gr_line(g, uy + 1, g->org[1]);
    double ex = fmax(l - c->x, c->x - rr) - gr_hair(g, fabs(l) + fabs(rr) + fabs(c->x), g->org[0]);
    double ey = fmax(b - c->y, c->y - t) - gr_hair(g, fabs(b) + fabs(t) + fabs(c->y), g->org[1]);
    // The end cells of the clamp reach to infinity.
    if (ux <= -(int64_t)GR_REACH || ux >= (int64_t)GR_REACH)
        ex = 0.0;
    if (uy <= -(int64_t)GR_REACH || uy >= (int64_t)GR_REACH)
        ey = 0.0;
    ex = ex > 0.0 ? ex : 0.0;
    ey = ey > 0.0 ? ey : 0.0;
    const double d2 = ex * ex + ey * ey;
    if (d2 > (double)qg_near_bound(c))
        return;
    batch[(*n)++] = (gr_ray_cellref){row, x, (int32_t)ux, (int32_t)uy, d2};
    if (*n == GR_RAY_BATCH)
        *n = gr_near_flush(batch, *n, boxes, c);
}

/// qg_nearest for both grids: the wide list, then rings of unwrapped cells
/// around the point's cell, clipped to the reach, until the next ring is
/// farther than qg_near_bound (strictly: a tie may win on its handle) or
/// the rings hold the reach. An element's nearest point lies in one of its
/// cells (gr_map is monotonic), at least as far from the point as that
/// cell's ring: so every element that can enter is offered. When the rings
/// would pass the torus's cell count, one pass over every cell finishes.
static inline int32_t gr_nearest(const gr_grid *g, const qg_index *index, float x, float y, int32_t k,
                                 float max_d2, qg_handle *handles)
{
    const qg_rect *boxes = index->boxes;
    qg_near c;
    qg_near_start(&c, index, x, y, k, max_d2, handles);
    for (int32_t i = 0; i < g->wide_count; ++i)
        qg_near_offer(&c, g->wide[i], qg_point_box_d2_fast(boxes[g->wide[i]], x, y));
    const gr_ibox re = g->reach;
    if (re.x0 > re.x1)
        return qg_near_finish(&c);
    const int64_t qx = gr_map(x, g->inv, g->org[0]), qy = gr_map(y, g->inv, g->org[1]);
    // The first ring that meets the reach.
    int64_t r0 = 0;
    r0 = re.x0 - qx > r0 ? re.x0 - qx : r0;
    r0 = qx - re.x1 > r0 ? qx - re.x1 : r0;
    r0 = re.y0 - qy > r0 ? re.y0 - qy : r0;
    r0 = qy - re.y1 > r0 ? qy - re.y1 : r0;
    const int64_t budget = (int64_t)g->cols * g->nrows;
    int64_t seen = 0;
    gr_ray_cellref batch[GR_RAY_BATCH];
    int n = 0;
    for (int64_t r = r0;; ++r) {
        if (r > 0) {
            // Cells of this ring and beyond lie outside the square of the
            // rings before it: their distance is at least the square's
            // nearest side that has reach cells beyond it.
            double lo = INFINITY;
            bool more = false;
            if (re.x0 < qx - r + 1) {
                const double e = gr_line(g, qx - r + 1, g->org[0]);
                lo = fmin(lo, x - e - gr_hair(g, fabs(e) + fabs(x), g->org[0]));
                more = true;
            }
            if (re.x1 > qx + r - 1) {
                const double e = gr_line(g, qx + r, g->org[0]);
                lo = fmin(lo, e - x - gr_hair(g, fabs(e) + fabs(x), g->org[0]));
                more = true;
            }
            if (re.y0 < qy - r + 1) {
                const double e = gr_line(g, qy - r + 1, g->org[1]);
                lo = fmin(lo, y - e - gr_hair(g, fabs(e) + fabs(y), g->org[1]));
                more = true;
            }
            if (re.y1 > qy + r - 1) {
                const double e = gr_line(g, qy + r, g->org[1]);
                lo = fmin(lo, e - y - gr_hair(g, fabs(e) + fabs(y), g->org[1]));
                more = true;
            }
            if (!more || (lo > 0.0 && lo * lo > (double)qg_near_bound(&c)))
                break;
        }
        // The ring's cells inside the reach: rows qy - r and qy + r, then
        // columns qx - r and qx + r between them.
        const int64_t ax = qx - r > re.x0 ? qx - r : re.x0, bx = qx + r < re.x1 ? qx + r : re.x1;
        const int64_t ay = qy - r + 1 > re.y0 ? qy - r + 1 : re.y0, by = qy + r - 1 < re.y1 ? qy + r - 1 : re.y1;
        const bool bottom = qy - r >= re.y0 && qy - r <= re.y1, top = r > 0 && qy + r >= re.y0 && qy + r <= re.y1;
        const bool left = qx - r >= re.x0 && qx - r <= re.x1, right = r > 0 && qx + r >= re.x0 && qx + r <= re.x1;
        const int64_t w = bx >= ax ? bx - ax + 1 : 0, hgt = by >= ay ? by - ay + 1 : 0;
        seen += 1 + (bottom + top) * w + (left + right) * hgt; // a ring costs a step even where the reach is thin
        if (seen > budget) {
            for (int32_t yy = 0; yy < g->nrows; ++yy) {
                const gr_row *row = &g->rows[yy];
                if (row->cells == NULL || row->live == 0)
                    continue;
                for (int32_t xx = 0; xx < g->cols; ++xx)
                    gr_near_cell(row, xx, boxes, &c);
            }
            break;
        }
        for (int64_t ux = ax; ux <= bx; ++ux) {
            if (bottom)
                gr_near_visit(g, ux, qy - r, boxes, &c, batch, &n);
            if (top)
                gr_near_visit(g, ux, qy + r, boxes, &c, batch, &n);
        }
        for (int64_t uy = ay; uy <= by; ++uy) {
            if (left)
                gr_near_visit(g, qx - r, uy, boxes, &c, batch, &n);
            if (right)
                gr_near_visit(g, qx + r, uy, boxes, &c, batch, &n);
        }
        // The next ring's bound needs this ring's offers; the first ring
        // (mostly the point's own cell, too few elements to fill the heap)
        // shares its batch with the next.
        if (r > r0)
            n = gr_near_flush(batch, n, boxes, &c);
    }
    (void)gr_near_flush(batch, n, boxes, &c);
    return qg_near_finish(&c);
}

#endif
