// SPDX-License-Identifier: MIT
// QG_LOOSE_GRID: the loose/tight double grid (docs/kinds.md).
//
// - Learning (tune.c): element_size = the median larger side of
//   its elements: loose cells LG_CELL_WIDTHS of it, margins half of it; the
//   world keeps following the elements (loose_grid_world.c).
// - Loose cells are {int32 head; float l, t, r, b}: 20 bytes. An element is
//   inserted once, into the loose cell holding its centre, and the loose
//   cell's box grows to contain it ("each element only needs to be inserted
//   once into the grid based on which cell its center position lands
//   inside"); a move to another cell relinks it. The elements of a loose
//   cell are a singly-linked index list of item nodes {handle, box}
//   (`items`, with the links in `next`).
// - Tight cells are the coarse grid: each is the head of a singly-linked
//   index list of links {next, loose cell} (the shared element-node pool),
//   naming every loose cell whose box overlaps it. When a loose box grows
//   it is linked into the tight cells it newly covers; boxes only grow
//   between cleanups, so a move or insert never unlinks.
// - qg_cleanup is the only place boxes shrink. It writes the item nodes out
//   in loose-cell order with their current boxes (each cell's list becomes
//   a contiguous run), sets every loose box to its elements' boxes plus the
//   margin, and rebuilds the tight cells' lists to match (qg_lg_relink in loose_grid_world.c). The
//   reorder is an in-place counting sort (American flag): the order of the
//   last cleanup is nearly right, so it only shuffles items over short
//   distances. Where the margin would carry a box into a tight cell it was
//   not linked in, the box is clipped to its old one (lg_clip), so ranges
//   only shrink and the relink needs no more links than it holds. Cleanup
//   uses `next` and `count` as scratch: it never allocates.
// - Why this layout: the moves come in handle order, which has nothing to do
//   with space. What is indexed by handle (the base's box, the 4-byte
//   `cell` word) is streamed by the moves; what is in cell order (items,
//   loose cells, links) is streamed by cleanup and the pair loop. Cleanup
//   reads each element's box once, at a handle it knows ahead from the item
//   it streams, so every read is prefetched and none is a chain of
//   dependent loads.
// - The margin (half a typical element) makes a frame's move touch only the
//   element's own box and `cell` word: after a cleanup every loose box holds
//   its elements' boxes plus the margin, so the first move of an element
//   after a cleanup that stays within the margin of the box the cleanup saw,
//   and in the same cell, needs nothing else. The `cell` word holds the
//   element's loose cell and, in its top bits, the cleanup epoch of its
//   last change; any other move checks the loose box itself, grows it, or
//   relinks the element (its node keeps its slot; cleanup re-sorts it).
// - Invariant: loose cell i is linked in tight cell t exactly when t is in
//   the tight range of i's box (both mapped with the same monotonic,
//   clamped function). So a query reports a loose cell only in the first
//   tight cell of the overlap of the two ranges, and pairs of loose cells
//   likewise: no visited set.
// - Query: tight cells overlapping the area -> loose cells whose box
//   overlaps (each once) -> their elements, tested exactly.
// - Pairs: "each element against the loose cells near it". Right after
//   cleanup (no change since) the items stream in cell order with their
//   boxes, and the loose cells overlapping a cell's box are found once per
//   cell: by adjacency when both boxes stay within half a cell of their
//   cells (lg_small: then only neighbours can overlap), else through the
//   tight cells. After a change without cleanup, each element walks the
//   tight cells its box covers and the lists, with the base's boxes (same
//   answers).
// - Bounds are a hint: the world re-fits to the elements (no torus: a
//   loose cell's box must stay near its cell, which wrapping would break).
//   The fitted world is the 1/256..255/256 quantiles of a fixed sample of
//   the elements' centres, widened by an eighth and a cell (the few outliers
//   clamp onto its border cells), with cells of the configured size and at
//   most max(1024, 2 per element) of them; when the quantiles
//   fill at least half of the configured bounds on both axes and lie inside
//   them, the world is the configured one, as created. A re-fit needs new
//   cell arrays and links, so it runs only where an allocation may fail
//   cleanly: in qg_insert when the population doubled since the last look,
//   and in the qg_insert or qg_move after crowding was seen: by qg_cleanup
//   (a 32nd of a sample outside the world, or the sample in under an eighth
//   of it) or by the inserts and far moves (a 32nd of the population placed
//   outside the world since the last cleanup). It
//   allocates everything first, then re-files every element as qg_cleanup
//   does (qg_lg_refit); a failure leaves the old world untouched. Extents are
//   in double, so any finite bounds work.
// - Memory: 20 bytes per loose cell plus 8 (`start`, `count`), 4 per tight
//   cell, 8 per link (the link count changes only when a loose box crosses
//   a tight-cell line), and per element 16 for the base's box, 4 for
//   `cell`, 20 for its item and 4 for `next`. Once the population is
//   steady, qg_cleanup gives back the spare capacity the 1.5x growth of the
//   per-element arrays left (shrinking never fails).
// - Several cores: the pair search splits into ranges of loose cells cut
//   where the last cleanup's runs (start[]) split the items evenly; a pair
//   is reported from one loose cell, so from one part. A batch move finds in
//   parallel the near moves (the first since cleanup, within the margin, in
//   the same cell: they write only their own box and `cell` word), runs the
//   far ones serially first (they grow loose boxes and relink; undone in
//   reverse on QG_ERR_NOMEM), then stores the near ones in parallel. A
//   parallel cleanup gathers the boxes and shrinks the loose boxes of the
//   sorted runs on the workers; the in-place permutation and the relink of
//   the tight cells stay serial.
// - Ray casts and nearest searches (loose_grid.c) walk the tight
//   cells: a ray row by row in the direction of dy and along each row in
//   the direction of dx, widened by a hair for rounding (the loose boxes
//   are tested exactly, so the walk needs no margin for the looseness);
//   nearest in rings around the point's tight cell until the next ring is
//   past qg_near_bound (strictly: ties may win by handle) or the rings
//   hold the grid. The border tight cells reach to infinity (the map
//   clamps), so elements outside the world are in the walk like the rest.
//   A loose cell is linked in every tight cell its box maps to; it is
//   handled in one only, the tight cell of a point of its box fixed by the
//   query (the ray's entry point into the box, or the box's point nearest
//   the query point, clamped into the box): that cell lists it, the walk
//   reaches it whenever the box can still matter, and it is one, so each
//   element (in one loose cell) is offered once. The nearest search takes
//   the loose cells of a ring nearest box first, and skips a box past the
//   bound: no element of it can be nearer than the box.
#ifndef QG_LOOSE_GRID_H
#define QG_LOOSE_GRID_H

#include "../kind.h"
#include "../pool.h"

#include "../vec.h"

#if defined(__GNUC__)
#define LG_PREFETCH(p) __builtin_prefetch(p)
#else
#define LG_PREFETCH(p) ((void)(p))
#endif
/// How far ahead, in items, cleanup prefetches the boxes it will read.
#define LG_AHEAD 24

/// At most this many loose cells (20 MiB of them); a cell index fits in
/// LG_CELL_BITS, the rest of a `cell` word is the epoch.
#define LG_MAX_CELLS (1 << 20)
#define LG_CELL_BITS 20
#define LG_CELL_MASK ((UINT32_C(1) << LG_CELL_BITS) - 1)
#define LG_EPOCHS (UINT32_C(1) << (32 - LG_CELL_BITS))
#define LG_MAX_SIDE 4096
/// Tight cells are this many loose cells wide.
#define LG_TIGHT_RATIO 2
/// Default loose cell width, in typical element widths.
#define LG_CELL_WIDTHS 10.0f
/// Below this many elements the world stays as created: clamping a few
/// onto border cells costs nothing.
#define LG_FIT_MIN 32
/// Centres sampled to fit the world in qg_insert and qg_move (on the stack),
/// and to look for crowding in qg_cleanup.
#define LG_SAMPLE 2048
/// A fitted world has at most max(LG_FIT_CELLS, 2 per element) loose cells.
#define LG_FIT_CELLS 1024
#define LG_CROWD_SAMPLE 256
/// Cleanups without a crowding check after crowding a re-fit would not help.
#define LG_FIT_WAIT 8
/// Elements of a loose cell gathered on the C stack for the pair loop;
/// bigger cells are walked in place.
#define LG_GATHER 64

_Static_assert(LG_MAX_CELLS <= (1 << LG_CELL_BITS), "a cell index fits its bits");

typedef struct lg_loose {
    int32_t head;       ///< first item of its list, -1 if none
    float l, t, r, b;   ///< loose box; the empty box is (+inf, +inf, -inf, -inf)
} lg_loose;
_Static_assert(sizeof(lg_loose) == 20, "a loose cell is 20 bytes");

typedef struct lg_range {
    int32_t x0, y0, x1, y1; ///< inclusive tight-cell range; empty when x0 > x1
} lg_range;

/// An element's node in its loose cell's list; h < 0 marks a free slot.
typedef struct lg_item {
    qg_handle h;
    qg_rect box; ///< its box at the last cleanup or relink
} lg_item;
_Static_assert(sizeof(lg_item) == 20, "an item is 20 bytes");

typedef struct loose_grid {
    qg_index base;
    lg_loose *loose;
    int32_t loose_capacity;
    int32_t *tight; ///< per tight cell: first link, -1 if none
    int32_t tight_capacity;
    qg_enode_pool links; ///< element = loose cell index
    /// Per loose cell: first item of its run in the packed part; [nl] ends
    /// the packed part.
    int32_t *start;
    int32_t start_capacity;
    int32_t *count; ///< per loose cell: all zero outside qg_cleanup
    int32_t count_capacity;
    uint32_t *cell; ///< per handle: loose cell of its list | epoch << LG_CELL_BITS
    int32_t cell_capacity;
    lg_item *items; ///< the list nodes
    int32_t items_capacity;
    int32_t *next; ///< per item: next item of its list, or next free slot
    int32_t next_capacity;
    int32_t item_high; ///< slots ever used since cleanup: [0, item_high)
    /// Items [0, packed) were written in cell order by the last cleanup;
    /// their holes wait for the next one.
    int32_t packed;
    int32_t free_item; ///< first free slot at or after packed, -1 if none
    uint32_t epoch;    ///< cleanups so far, modulo LG_EPOCHS
    bool fresh;        ///< no change since the last cleanup
    int32_t steady_high; ///< box_high seen by the last qg_cleanup
    float margin;
    float cell_w;       ///< loose cell width the world was laid out for
    float cfg_margin;   ///< the margin of the configured world
    bool auto_size;     ///< no element_size or cell_size given: fitted worlds size cells by the elements
    int32_t fit_next;   ///< population at which qg_insert looks at the world again
    int32_t fit_wait;   ///< cleanups before the next crowding check
    bool refit;         ///< crowding seen: the next insert or move looks
    int32_t strays;     ///< far moves and inserts outside the world since the last look or cleanup
    float wx0, wy0, wx1, wy1; ///< the world: the bounds, or fitted to the elements
    int32_t lcols, lrows, tcols, trows;
    float ox, oy;
    float lsx, lsy; ///< loose cells per world unit
    float tsx, tsy; ///< tight cells per world unit
    /// A batch is running (loose_grid_batch_mark, loose_grid_move_many):
    /// the loose boxes its moves grow are logged there, and no re-fit runs.
    struct lg_mark *mark;
} loose_grid;

static const lg_loose lg_empty = {-1, INFINITY, INFINITY, -INFINITY, -INFINITY};

/// Cell of v along an axis, clamped into [0, last]. Monotonic in v.
///
/// The difference is taken of the halves: v - origin passes FLT_MAX in a
/// world wider than FLT_MAX (bounds of +-FLT_MAX), and its infinity would
/// put half the world in the last cell, where the walks of the ray casts and
/// nearest searches (world lines in double) do not look for it. Halving is
/// exact and commutes with rounding, so below overflow and outside the
/// subnormals this is (v - origin) * scale bit for bit; 2 * scale is exact
/// (qg_lg_layout keeps scales at most 2^120).
static inline int32_t lg_map(float v, float origin, float scale, int32_t last)
{
    const float f = (0.5f * v - 0.5f * origin) * (2.0f * scale);
    if (!(f > 0.0f))
        return 0;
    if (f >= (float)last)
        return last;
    return (int32_t)f;
}

/// The loose cell of a box: the cell of its centre. The centre is only a
/// choice of cell (the loose box then holds the whole box), so its rounding
/// does not matter, as long as it is the same every time for the same box.
static inline int32_t lg_loose_of(const loose_grid *g, qg_rect b)
{
    const float cx = b.min_x * 0.5f + b.max_x * 0.5f, cy = b.min_y * 0.5f + b.max_y * 0.5f;
    return lg_map(cy, g->oy, g->lsy, g->lrows - 1) * g->lcols + lg_map(cx, g->ox, g->lsx, g->lcols - 1);
}

/// The tight-cell range of the box (l, t, r, b): lg_map on its four
/// coordinates, at once with vectors (this runs for every element in the pair
/// loop and for every loose cell in qg_cleanup).
static inline lg_range lg_range_of(const loose_grid *g, float l, float t, float r, float b)
{
    if (!(l <= r))
        return (lg_range){0, 0, -1, -1};
#if defined(QV_HAVE)
    // lg_map's halves, four at once.
    const float hx = 0.5f * g->ox, hy = 0.5f * g->oy, sx = 2.0f * g->tsx, sy = 2.0f * g->tsy;
    qv_f32 f = ((qv_f32){l, t, r, b} * qv_splat(0.5f) - (qv_f32){hx, hy, hx, hy}) * (qv_f32){sx, sy, sx, sy};
    const float lx = (float)(g->tcols - 1), ly = (float)(g->trows - 1);
    f = qv_min(qv_max(f, qv_splat(0.0f)), (qv_f32){lx, ly, lx, ly});
    int32_t out[4];
    qv_store_i32(out, qv_trunc(f));
    return (lg_range){out[0], out[1], out[2], out[3]};
#else
    return (lg_range){lg_map(l, g->ox, g->tsx, g->tcols - 1), lg_map(t, g->oy, g->tsy, g->trows - 1),
                      lg_map(r, g->ox, g->tsx, g->tcols - 1), lg_map(b, g->oy, g->tsy, g->trows - 1)};
#endif
}

static inline lg_range lg_cell_range(const loose_grid *g, const lg_loose *c)
{
    return lg_range_of(g, c->l, c->t, c->r, c->b);
}

static inline int64_t lg_range_size(lg_range r)
{
    return r.x0 > r.x1 ? 0 : (int64_t)(r.x1 - r.x0 + 1) * (r.y1 - r.y0 + 1);
}

static inline bool lg_range_has(lg_range r, int32_t x, int32_t y)
{
    return x >= r.x0 && x <= r.x1 && y >= r.y0 && y <= r.y1;
}

static inline bool lg_box_overlaps(const lg_loose *c, qg_rect a)
{
    return (c->l <= a.max_x) & (a.min_x <= c->r) & (c->t <= a.max_y) & (a.min_y <= c->b);
}

/// The box plus the margin on every side. Rounding only widens it.
static inline qg_rect lg_fatten(const loose_grid *g, qg_rect b)
{
    const float m = g->margin;
    return (qg_rect){b.min_x - m, b.min_y - m, b.max_x + m, b.max_y + m};
}

static inline bool lg_inside(qg_rect in, qg_rect out)
{
    return (out.min_x <= in.min_x) & (out.min_y <= in.min_y) & (in.max_x <= out.max_x) & (in.max_y <= out.max_y);
}

static inline bool lg_inside_loose(qg_rect in, const lg_loose *c)
{
    return (c->l <= in.min_x) & (c->t <= in.min_y) & (in.max_x <= c->r) & (in.max_y <= c->b);
}

static inline uint32_t lg_cell_word(const loose_grid *g, int32_t i)
{
    return (uint32_t)i | g->epoch << LG_CELL_BITS;
}

static inline int32_t lg_max32(int32_t a, int32_t b)
{
    return a > b ? a : b;
}

/// The first loose cell whose run of the last cleanup starts at or after
/// item `item` (start[] never decreases): where the parallel passes cut the
/// cells into pieces of about equal items.
static inline int32_t qg_lg_cell_at(const loose_grid *g, int64_t item)
{
    int32_t lo = 0, hi = g->lcols * g->lrows;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (g->start[mid] < item)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/// A world for the elements: see the file's header.
typedef struct lg_plan {
    float x0, y0, x1, y1; ///< the world
    int32_t lcols, lrows;
    float cell, margin;
    float qx0, qy0, qx1, qy1; ///< the quantile box of the sampled centres
} lg_plan;

void qg_lg_plan_world(const loose_grid *g, int32_t n, qg_handle oh, qg_rect obox, lg_plan *p);
bool qg_lg_plan_better(const loose_grid *g, const lg_plan *p);
qg_status qg_lg_refit(loose_grid *g, qg_txn *txn, const lg_plan *p, qg_handle oh, qg_rect obox, bool insert);


/* ---- what the files of the kind share ----------------------------------- */
// loose_grid.c: the structure; loose_grid_world.c: cleanup's re-sort and relink, and the
// re-fit; loose_grid_pairs.c: the pair search.
int32_t qg_lg_take_item(loose_grid *g);
int32_t qg_lg_side(double extent, double cell);
void qg_lg_layout(loose_grid *g, float x0, float y0, float x1, float y1, int32_t lcols, int32_t lrows);
void qg_lg_trim_steady(loose_grid *g);
int32_t qg_lg_collect(loose_grid *g);
void qg_lg_refile(loose_grid *g, int32_t n);
void qg_lg_relink(loose_grid *g);
int32_t qg_lg_collect_refile_parallel(loose_grid *g, const qg_jobs *jobs);
bool qg_lg_crowded(const loose_grid *g, int32_t n);
void qg_lg_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats);
void qg_lg_pairs_part(const qg_index *index, int32_t part, int32_t parts, qg_pair_fn *fn, void *user,
                      qg_query_stats *stats);

/// loose_grid_check.c: the kind's validate (its invariants, its bytes added
/// to *bytes).
qg_status qg_lg_validate(const qg_index *index, size_t *bytes);

#endif
