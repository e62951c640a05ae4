// SPDX-License-Identifier: MIT
// The uniform grid with row-based element lists that QG_GRID is and that
// QG_MULTI_GRID refines (docs/kinds.md, "grid" and "multi_grid").
// Shared by src/grid/grid.c and src/grid/multi_grid.c only. The family's
// headers, by what they do: rows.h (this one: the layout, sizes, memory,
// the bitset, links), update.h (insert, remove, move), search.h (queries and
// pairs), batch.h (the batch move and insert), check.h (stats, visit,
// validate), rays.h (ray casts and nearest searches).
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
//   and nearest walks (rays.h, with why they are exact)
//   stop at its edge instead of following a ray to infinity.
#ifndef QG_GRID_ROWS_H
#define QG_GRID_ROWS_H

#include "../kind.h"
#include "../pool.h"
#include "../queries.h"

#include "../vec.h"

/// A prefetch hint (the pair loop, the ray walk).
#if defined(__GNUC__)
#define GR_PREFETCH(p) __builtin_prefetch(p)
#else
#define GR_PREFETCH(p) ((void)(p))
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
_Static_assert(sizeof(gr_ibox) == 16, "gr_ibox is stored and compared as one vector");

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

#if defined(QV_HAVE)
/// gr_map_box's vector path, for a box already held as one vector (qg_rect_vec).
static inline gr_ibox gr_map_vec(const gr_grid *g, qv_f32 r)
{
    qv_f32 f = r * qv_splat(g->inv) - qv_loadf(g->org);
    f = qv_min(qv_max(f, qv_splat(-GR_REACH)), qv_splat(GR_REACH));
    const qv_i32 t = qv_trunc(f);
    const qv_i32 up = qv_lt(f, qv_float(t)); // -1 where t > f
    gr_ibox out;
    qv_store_i32(&out, t + up);
    return out;
}
#endif

/// gr_map on the four coordinates of a box. With vectors the four are mapped at
/// once without branches (this runs twice for every move): the same clamps,
/// and truncation corrected down where it rounded a negative value up is
/// the same floor, so both paths give the same cells.
static inline gr_ibox gr_map_box(const gr_grid *g, qg_rect r)
{
#if defined(QV_HAVE)
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
#if defined(QV_HAVE)
    return qv_all(qv_load_i32(&a) == qv_load_i32(&b));
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

/* ---- a batch's capacity, given back ------------------------------------- */

/// A row's memory as gr_mark found it.
typedef struct gr_mark_row {
    int32_t capacity;
    uint8_t had_cells, grown, emptied;
} gr_mark_row;

/// The grid's capacities before qg_move_many's one-by-one path (a batch
/// with static elements: index.c, move_many_serial). Each of its moves
/// grows rows and the wide list on its own, and its undo returns every
/// element but none of that memory (a row's undo record lasts one move), so
/// this note of every row (8 bytes a row, at most GR_MAX_SIDE rows) lets
/// gr_trim give it back.
typedef struct gr_mark {
    gr_ibox reach;
    int32_t wide_capacity, nrows;
    gr_mark_row rows[];
} gr_mark;

static inline size_t gr_mark_bytes(int32_t nrows)
{
    return sizeof(gr_mark) + (size_t)nrows * sizeof(gr_mark_row);
}

/// Notes g's capacities; NULL when that allocation fails (nothing changed).
static inline gr_mark *gr_mark_take(const gr_grid *g, qg_alloc *alloc)
{
    gr_mark *m = qg_mem_alloc(alloc, gr_mark_bytes(g->nrows));
    if (m == NULL)
        return NULL;
    m->reach = g->reach;
    m->wide_capacity = g->wide_capacity;
    m->nrows = g->nrows;
    for (int32_t y = 0; y < g->nrows; ++y) {
        const gr_row *r = &g->rows[y];
        m->rows[y] = (gr_mark_row){r->capacity, r->cells != NULL, (uint8_t)r->grown, (uint8_t)r->emptied};
    }
    return m;
}

/// Frees the mark; after an undo (`undone`) first gives back every row's
/// and the wide list's growth since it was taken. The undo left each row
/// its old live count, which fits the old capacity, but its nodes may sit
/// in other slots (an undone move frees one slot and takes another), so a
/// grown row is compacted as qg_cleanup would (gr_row_shrink: the lists'
/// order kept). Shrinks only: never allocates, cannot fail.
static inline void gr_trim(gr_grid *g, qg_alloc *alloc, gr_mark *m, bool undone)
{
    if (undone) {
        for (int32_t y = 0; y < g->nrows; ++y) {
            gr_row *r = &g->rows[y];
            const gr_mark_row *was = &m->rows[y];
            if (r->capacity > was->capacity)
                gr_row_shrink(g, alloc, r, was->capacity); // nodes NULL when that is 0
            if (r->cells != NULL && !was->had_cells) {
                // The batch gave this row its cells; the undo left it empty.
                qg_mem_free(alloc, r->cells, (size_t)g->cols * sizeof(int32_t));
                r->cells = NULL;
                r->high = 0;
                r->free_head = -1;
            }
            r->grown = was->grown;
            r->emptied = was->emptied;
        }
        if (g->wide_capacity > m->wide_capacity) {
            // The undo took every element the batch put there off again.
            g->wide = qg_mem_resize(alloc, g->wide, (size_t)g->wide_capacity * sizeof(int32_t),
                                    (size_t)m->wide_capacity * sizeof(int32_t));
            g->wide_capacity = m->wide_capacity;
        }
        g->reach = m->reach; // what the undone moves linked is gone
    }
    qg_mem_free(alloc, m, gr_mark_bytes(m->nrows));
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

/// The grid family's learning rule (grid.c): cells of 6 median elements,
/// and the world, which the table wraps around, followed too.
extern const qg_tune_rule qg_grid_tune_rule;

#endif
