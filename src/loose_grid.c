// QG_LOOSE_GRID: the loose/tight double grid of seed 003, part 5.
//
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
//   margin, and rebuilds the tight cells' lists to match (lg_relink). The
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
//   does (lg_refit); a failure leaves the old world untouched. Extents are
//   in double, so any finite bounds work.
// - Memory: 20 bytes per loose cell plus 8 (`start`, `count`), 4 per tight
//   cell, 8 per link (the link count changes only when a loose box crosses
//   a tight-cell line), and per element 16 for the base's box, 4 for
//   `cell`, 20 for its item and 4 for `next`. Once the population is
//   steady, qg_cleanup gives back the spare capacity the 1.5x growth of the
//   per-element arrays left (shrinking never fails).
#include "index_internal.h"
#include "pool.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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
} loose_grid;

static const lg_loose lg_empty = {-1, INFINITY, INFINITY, -INFINITY, -INFINITY};

/// Cell of v along an axis, clamped into [0, last]. Monotonic in v.
static inline int32_t lg_map(float v, float origin, float scale, int32_t last)
{
    const float f = (v - origin) * scale;
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
/// coordinates, at once with SSE (this runs for every element in the pair
/// loop and for every loose cell in qg_cleanup).
static inline lg_range lg_range_of(const loose_grid *g, float l, float t, float r, float b)
{
    if (!(l <= r))
        return (lg_range){0, 0, -1, -1};
#if defined(__SSE2__)
    __m128 f = _mm_mul_ps(_mm_sub_ps(_mm_setr_ps(l, t, r, b), _mm_setr_ps(g->ox, g->oy, g->ox, g->oy)),
                          _mm_setr_ps(g->tsx, g->tsy, g->tsx, g->tsy));
    const float lx = (float)(g->tcols - 1), ly = (float)(g->trows - 1);
    f = _mm_min_ps(_mm_max_ps(f, _mm_setzero_ps()), _mm_setr_ps(lx, ly, lx, ly));
    int32_t out[4];
    _mm_storeu_si128((__m128i *)out, _mm_cvttps_epi32(f));
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

/// Links loose cell i into the tight cells of `grown` that are not in `had`
/// (had lies inside grown: a box only grows here). Links were reserved.
static void lg_link_new(loose_grid *g, int32_t i, lg_range had, lg_range grown)
{
    for (int32_t ty = grown.y0; ty <= grown.y1; ++ty) {
        for (int32_t tx = grown.x0; tx <= grown.x1; ++tx) {
            if (lg_range_has(had, tx, ty))
                continue;
            int32_t *head = &g->tight[ty * g->tcols + tx];
            *head = qg_enode_take(&g->links, i, *head);
        }
    }
}

/// Makes loose cell i's box hold `box`, linking it into newly covered tight
/// cells; reserves the links first. Fails only with QG_ERR_NOMEM, before
/// any change.
static qg_status lg_grow(loose_grid *g, qg_txn *txn, int32_t i, qg_rect box)
{
    lg_loose *c = &g->loose[i];
    if (lg_inside_loose(box, c))
        return QG_OK;
    const float l = c->l < box.min_x ? c->l : box.min_x, t = c->t < box.min_y ? c->t : box.min_y;
    const float r = c->r > box.max_x ? c->r : box.max_x, b = c->b > box.max_y ? c->b : box.max_y;
    const lg_range had = lg_cell_range(g, c), grown = lg_range_of(g, l, t, r, b);
    const int64_t more = lg_range_size(grown) - lg_range_size(had);
    if (more > 0) {
        if (!qg_enode_reserve(txn, &g->links, more))
            return QG_ERR_NOMEM;
        lg_link_new(g, i, had, grown);
    }
    c->l = l, c->t = t, c->r = r, c->b = b;
    return QG_OK;
}

/// Makes sure lg_take_item will not allocate.
static bool lg_reserve_item(loose_grid *g, qg_txn *txn)
{
    if (g->free_item >= 0)
        return true;
    const int64_t need = (int64_t)g->item_high + 1;
    return qg_txn_reserve(txn, (void **)&g->items, &g->items_capacity, sizeof(lg_item), need) &&
           qg_txn_reserve(txn, (void **)&g->next, &g->next_capacity, sizeof(int32_t), need);
}

/// A slot for a new node: a freed one after the packed part, or a new one.
static int32_t lg_take_item(loose_grid *g)
{
    int32_t k = g->free_item;
    if (k >= 0)
        g->free_item = g->next[k];
    else
        k = g->item_high++;
    return k;
}

/// Puts element h with box `box` at the head of loose cell i's list.
static void lg_push(loose_grid *g, int32_t i, qg_handle h, qg_rect box)
{
    const int32_t k = lg_take_item(g);
    g->items[k] = (lg_item){h, box};
    g->next[k] = g->loose[i].head;
    g->loose[i].head = k;
    g->cell[h] = lg_cell_word(g, i);
}

/// Takes element h's node out of loose cell i's list; returns its slot.
static int32_t lg_detach(loose_grid *g, int32_t i, qg_handle h)
{
    int32_t *link = &g->loose[i].head;
    while (g->items[*link].h != h)
        link = &g->next[*link];
    const int32_t k = *link;
    *link = g->next[k];
    return k;
}

/// Takes element h out of loose cell i's list. A slot of the packed part
/// stays a hole until cleanup (keeping the free list out of the runs); one
/// after it is reused.
static void lg_unlink(loose_grid *g, int32_t i, qg_handle h)
{
    const int32_t k = lg_detach(g, i, h);
    g->items[k].h = -1;
    if (k >= g->packed) {
        g->next[k] = g->free_item;
        g->free_item = k;
    }
}

static int32_t lg_side(double extent, double cell)
{
    double n = floor(extent / cell);
    if (!(n >= 1.0))
        n = 1.0;
    if (n > LG_MAX_SIDE)
        n = LG_MAX_SIDE;
    return (int32_t)n;
}

/// Sets the mapping for the world [x0, x1] x [y0, y1] of lcols x lrows
/// loose cells (extents in double: finite for any finite floats).
static void lg_layout(loose_grid *g, float x0, float y0, float x1, float y1, int32_t lcols, int32_t lrows)
{
    const double ex = qg_extent(x0, x1), ey = qg_extent(y0, y1);
    g->wx0 = x0, g->wy0 = y0, g->wx1 = x1, g->wy1 = y1;
    g->lcols = lcols;
    g->lrows = lrows;
    g->tcols = (lcols + LG_TIGHT_RATIO - 1) / LG_TIGHT_RATIO;
    g->trows = (lrows + LG_TIGHT_RATIO - 1) / LG_TIGHT_RATIO;
    g->ox = x0;
    g->oy = y0;
    g->lsx = (float)((double)g->lcols / ex);
    g->lsy = (float)((double)g->lrows / ey);
    g->tsx = (float)((double)g->tcols / ex);
    g->tsy = (float)((double)g->trows / ey);
}

/// Typical element width: the configured one, or one the bounds suggest.
static float lg_element_size(const qg_config *config)
{
    return config->element_size > 0.0f ? config->element_size : qg_rect_extent(config->bounds) / 256.0f;
}

static qg_status loose_grid_configure(qg_config *config)
{
    if (config->cell_size == 0.0f) {
        // A loose cell ten typical elements wide: smaller cells cost more
        // memory and cleanup time per element than they save in the pair
        // loop (measured on the agents workload, 1,000,000 elements: the
        // total is flat from 8 to 13 widths, worse at 4 and 16).
        config->cell_size = LG_CELL_WIDTHS * lg_element_size(config);
    }
    if (!isfinite(config->cell_size))
        config->cell_size = qg_rect_extent(config->bounds);
    return QG_OK;
}

static qg_status loose_grid_init(qg_index *index)
{
    loose_grid *g = (loose_grid *)index;
    const qg_config *c = &index->config;
    const qg_rect w = c->bounds;
    const double ex = qg_extent(w.min_x, w.max_x), ey = qg_extent(w.min_y, w.max_y);
    int32_t lcols = lg_side(ex, c->cell_size), lrows = lg_side(ey, c->cell_size);
    while ((int64_t)lcols * lrows > LG_MAX_CELLS) {
        if (lcols >= lrows)
            lcols = (lcols + 1) / 2;
        else
            lrows = (lrows + 1) / 2;
    }
    lg_layout(g, w.min_x, w.min_y, w.max_x, w.max_y, lcols, lrows);
    g->fit_next = LG_FIT_MIN;
    // Half a typical element: covers a frame's move of anything that moves
    // less than its own size per frame, and barely widens the loose boxes.
    g->margin = 0.5f * (c->element_size > 0.0f ? c->element_size : c->cell_size / LG_CELL_WIDTHS);
    g->steady_high = -1;
    g->free_item = -1;
    if (!isfinite(g->margin))
        g->margin = 0.0f;
    g->cfg_margin = g->margin;
    g->cell_w = c->cell_size;
    g->auto_size = c->element_size == 0.0f && c->cell_size == LG_CELL_WIDTHS * lg_element_size(c);
    qg_enode_pool_reset(&g->links);
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    const int32_t nl = g->lcols * g->lrows, nt = g->tcols * g->trows;
    if (!qg_txn_reserve(&txn, (void **)&g->loose, &g->loose_capacity, sizeof(lg_loose), nl) ||
        !qg_txn_reserve(&txn, (void **)&g->tight, &g->tight_capacity, sizeof(int32_t), nt) ||
        !qg_txn_reserve(&txn, (void **)&g->start, &g->start_capacity, sizeof(int32_t), (int64_t)nl + 1) ||
        !qg_txn_reserve(&txn, (void **)&g->count, &g->count_capacity, sizeof(int32_t), nl)) {
        qg_txn_rollback(&txn);
        return QG_ERR_NOMEM;
    }
    for (int32_t i = 0; i < nl; ++i)
        g->loose[i] = lg_empty;
    memset(g->tight, 0xff, (size_t)nt * sizeof(int32_t));
    memset(g->start, 0, ((size_t)nl + 1) * sizeof(int32_t));
    memset(g->count, 0, (size_t)nl * sizeof(int32_t));
    return QG_OK;
}

static void loose_grid_destroy(qg_index *index)
{
    loose_grid *g = (loose_grid *)index;
    qg_array_free(&index->alloc, (void **)&g->loose, &g->loose_capacity, sizeof(lg_loose));
    qg_array_free(&index->alloc, (void **)&g->tight, &g->tight_capacity, sizeof(int32_t));
    qg_array_free(&index->alloc, (void **)&g->links.data, &g->links.capacity, sizeof(qg_enode));
    qg_array_free(&index->alloc, (void **)&g->start, &g->start_capacity, sizeof(int32_t));
    qg_array_free(&index->alloc, (void **)&g->count, &g->count_capacity, sizeof(int32_t));
    qg_array_free(&index->alloc, (void **)&g->cell, &g->cell_capacity, sizeof(uint32_t));
    qg_array_free(&index->alloc, (void **)&g->items, &g->items_capacity, sizeof(lg_item));
    qg_array_free(&index->alloc, (void **)&g->next, &g->next_capacity, sizeof(int32_t));
}

/// A world for the elements: see the file's header.
typedef struct lg_plan {
    float x0, y0, x1, y1; ///< the world
    int32_t lcols, lrows;
    float cell, margin;
    float qx0, qy0, qx1, qy1; ///< the quantile box of the sampled centres
} lg_plan;

static void lg_plan_world(const loose_grid *g, int32_t n, qg_handle oh, qg_rect obox, lg_plan *p);
static bool lg_plan_better(const loose_grid *g, const lg_plan *p);
static qg_status lg_refit(loose_grid *g, qg_txn *txn, const lg_plan *p, qg_handle oh, qg_rect obox, bool insert);

/// After a look at the world: the next look comes when the population
/// doubled or cleanup sees crowding again. Crowding that a re-fit would not
/// help (the world is already the plan's) is not looked at again for a few
/// cleanups, so it costs a plan now and then, not every frame.
static void lg_looked(loose_grid *g, int32_t n, bool refitted)
{
    if (g->refit && !refitted)
        g->fit_wait = LG_FIT_WAIT;
    g->refit = false;
    g->strays = 0;
    g->fit_next = n > INT32_MAX / 2 ? INT32_MAX : 2 * n;
}

/// Counts an element placed outside the world (clamped onto a border cell)
/// by an insert or a far move; once a 32nd of the population has, the next
/// insert or move looks at the world. A crowd that teleports out is then
/// followed within the frame, not a frame later by cleanup's check.
static inline void lg_stray(loose_grid *g, qg_rect b)
{
    const float cx = b.min_x * 0.5f + b.max_x * 0.5f, cy = b.min_y * 0.5f + b.max_y * 0.5f;
    if ((cx < g->wx0) | (cx > g->wx1) | (cy < g->wy0) | (cy > g->wy1))
        g->refit |= ++g->strays > g->base.count / 32 + LG_FIT_MIN;
}

static qg_status lg_insert_here(loose_grid *g, qg_txn *txn, qg_handle h, qg_rect box)
{
    const int32_t i = lg_loose_of(g, box);
    const qg_status s = lg_grow(g, txn, i, lg_fatten(g, box));
    if (s != QG_OK)
        return s;
    g->fresh = false;
    lg_push(g, i, h, box);
    lg_stray(g, box);
    return QG_OK;
}

static qg_status loose_grid_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    loose_grid *g = (loose_grid *)index;
    if (!qg_txn_reserve(txn, (void **)&g->cell, &g->cell_capacity, sizeof(uint32_t), (int64_t)h + 1) ||
        !lg_reserve_item(g, txn))
        return QG_ERR_NOMEM;
    const int32_t n = index->count + 1;
    if (!g->refit && n < g->fit_next)
        return lg_insert_here(g, txn, h, box);
    // Time to look at the world (the population doubled, or cleanup saw
    // crowding): a build is fitted before its first cleanup, in O(n) in
    // all over the doublings.
    lg_plan p;
    lg_plan_world(g, n, h, box, &p);
    const bool better = lg_plan_better(g, &p);
    const qg_status s = better ? lg_refit(g, txn, &p, h, box, true) : lg_insert_here(g, txn, h, box);
    if (s == QG_OK)
        lg_looked(g, n, better);
    return s;
}

static void loose_grid_remove(qg_index *index, qg_handle h)
{
    loose_grid *g = (loose_grid *)index;
    g->fresh = false;
    lg_unlink(g, (int32_t)(g->cell[h] & LG_CELL_MASK), h);
}

/// A move the margin does not cover, or one to another cell: the loose
/// cell of the new centre grows to hold the new box plus the margin (if it
/// does not already hold the box), and the element moves to its list.
static qg_status lg_move_far(loose_grid *g, qg_txn *txn, qg_handle h, qg_rect box, int32_t ni)
{
    const int32_t ci = (int32_t)(g->cell[h] & LG_CELL_MASK);
    if (!lg_inside_loose(box, &g->loose[ni])) {
        const qg_status s = lg_grow(g, txn, ni, lg_fatten(g, box));
        if (s != QG_OK)
            return s;
    }
    if (ni != ci) {
        // The node keeps its slot: cleanup's sort then moves it only as far
        // as the cells are apart.
        const int32_t k = lg_detach(g, ci, h);
        g->items[k].box = box;
        g->next[k] = g->loose[ni].head;
        g->loose[ni].head = k;
    }
    g->cell[h] = lg_cell_word(g, ni);
    g->base.boxes[h] = box;
    lg_stray(g, box);
    return QG_OK;
}

static inline qg_status lg_move_plain(loose_grid *g, qg_txn *txn, qg_handle h, qg_rect box)
{
    qg_index *index = &g->base;
    g->fresh = false;
    const uint32_t w = g->cell[h];
    const int32_t ni = lg_loose_of(g, box);
    if ((w >> LG_CELL_BITS) != g->epoch && (w & LG_CELL_MASK) == (uint32_t)ni &&
        lg_inside(box, lg_fatten(g, index->boxes[h]))) {
        // The first move since cleanup, within the margin of the box the
        // cleanup saw and in the same cell: the loose box already holds it.
        // Nothing but the element's own (sequential) data is touched.
        index->boxes[h] = box;
        g->cell[h] = (w & LG_CELL_MASK) | g->epoch << LG_CELL_BITS;
        return QG_OK;
    }
    return lg_move_far(g, txn, h, box, ni);
}

static qg_status loose_grid_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    loose_grid *g = (loose_grid *)index;
    if (g->refit) {
        // Cleanup saw crowding and could not allocate: this move looks at
        // the world and re-fits it if that helps.
        lg_plan p;
        lg_plan_world(g, index->count, h, box, &p);
        const bool better = lg_plan_better(g, &p);
        const qg_status s = better ? lg_refit(g, txn, &p, h, box, false) : lg_move_plain(g, txn, h, box);
        if (s == QG_OK)
            lg_looked(g, index->count, better);
        return s;
    }
    return lg_move_plain(g, txn, h, box);
}

/// Rebuilds every tight cell's list from the loose boxes, in place: a
/// counting sort by tight cell into the link pool. Each tight cell's links
/// end up contiguous and in loose-cell order, so the pair loop and queries
/// stream them instead of chasing links that months of frees and takes have
/// scattered over the pool. Needs no more links than the pool holds live,
/// as long as no loose range grew since the links were made.
static void lg_relink(loose_grid *g)
{
    const int32_t nl = g->lcols * g->lrows, nt = g->tcols * g->trows;
    int32_t *tight = g->tight; // counts, then segment ends, then starts
    qg_enode *links = g->links.data;
    memset(tight, 0, (size_t)nt * sizeof(int32_t));
    for (int32_t i = 0; i < nl; ++i) {
        const lg_range r = lg_cell_range(g, &g->loose[i]);
        for (int32_t ty = r.y0; ty <= r.y1; ++ty)
            for (int32_t tx = r.x0; tx <= r.x1; ++tx)
                tight[ty * g->tcols + tx]++;
    }
    int32_t total = 0;
    for (int32_t t = 0; t < nt; ++t) {
        total += tight[t];
        tight[t] = total;
    }
    for (int32_t i = nl - 1; i >= 0; --i) {
        const lg_range r = lg_cell_range(g, &g->loose[i]);
        for (int32_t ty = r.y0; ty <= r.y1; ++ty)
            for (int32_t tx = r.x0; tx <= r.x1; ++tx)
                links[--tight[ty * g->tcols + tx]].element = i;
    }
    for (int32_t t = nt - 1, end = total; t >= 0; --t) {
        const int32_t start = tight[t];
        if (start == end) {
            tight[t] = -1;
            continue;
        }
        for (int32_t k = start; k < end - 1; ++k)
            links[k].next = k + 1;
        links[end - 1].next = -1;
        end = start;
    }
    g->links.high = total;
    g->links.live = total;
    g->links.free_head = -1;
}

/// Gives back the spare capacity of an array (shrinking never fails).
static void lg_trim(qg_alloc *alloc, void **data, int32_t *capacity, size_t elem, int32_t keep, int32_t slack)
{
    if (keep < 16)
        keep = 16; // the smallest block qg_txn_reserve makes
    if (*capacity <= keep + slack)
        return;
    *data = qg_mem_resize(alloc, *data, (size_t)*capacity * elem, (size_t)keep * elem);
    *capacity = keep;
}

/// Once no handle was issued since the last cleanup (a steady population),
/// the per-element arrays shrink to what is in use, the base's boxes
/// included: after start-up, memory is what the elements need, not what the
/// last growth step left. Waiting for a steady call keeps a growing
/// population from shrinking and regrowing every frame. The items keep a
/// sixteenth spare for the relinks of far moves between cleanups.
static void lg_trim_steady(loose_grid *g)
{
    qg_index *index = &g->base;
    const int32_t high = index->box_high;
    if (high > 0 && high == g->steady_high) {
        lg_trim(&index->alloc, (void **)&index->boxes, &index->box_capacity, sizeof(qg_rect), high, high / 64);
        lg_trim(&index->alloc, (void **)&g->cell, &g->cell_capacity, sizeof(uint32_t), high, high / 64);
        const int32_t n = index->count, keep = n + n / 16;
        lg_trim(&index->alloc, (void **)&g->items, &g->items_capacity, sizeof(lg_item), keep, n / 8);
        lg_trim(&index->alloc, (void **)&g->next, &g->next_capacity, sizeof(int32_t), keep, n / 8);
    }
    g->steady_high = high;
}

/// Cleanup, step 1: every live item, in slot order, gets its element's
/// current box and its loose cell (the cell of its centre, kept in `next`
/// as the sort key, counted in `count`); holes close up. Returns the number
/// of items.
static int32_t lg_collect(loose_grid *g)
{
    lg_item *items = g->items;
    int32_t *key = g->next, *count = g->count;
    const qg_rect *boxes = g->base.boxes;
    const uint32_t *cell = g->cell;
    const int32_t high = g->item_high;
    int32_t w = 0;
    for (int32_t k = 0; k < high; ++k) {
        if (k + LG_AHEAD < high && items[k + LG_AHEAD].h >= 0)
            LG_PREFETCH(&boxes[items[k + LG_AHEAD].h]);
        const qg_handle h = items[k].h;
        if (h < 0)
            continue;
        const int32_t c = (int32_t)(cell[h] & LG_CELL_MASK);
        items[w] = (lg_item){h, boxes[h]};
        key[w] = c;
        count[c]++;
        w++;
    }
    return w;
}

/// The margin would take loose box `fit` into tight cells its old box `old`
/// was not linked in: it is clipped to the old box instead (which holds
/// every element's box: each is inside its cell's loose box), so the cell
/// needs no new link and cleanup no memory. The elements whose margin no
/// longer fits are marked as moved in this epoch: their next move checks
/// the loose box itself.
static void lg_clip(loose_grid *g, lg_loose *fit, const lg_loose *old, const lg_item *items, int32_t s0, int32_t end)
{
    fit->l = fit->l > old->l ? fit->l : old->l;
    fit->t = fit->t > old->t ? fit->t : old->t;
    fit->r = fit->r < old->r ? fit->r : old->r;
    fit->b = fit->b < old->b ? fit->b : old->b;
    for (int32_t q = s0; q < end; ++q) {
        if (!lg_inside_loose(lg_fatten(g, items[q].box), fit)) {
            const qg_handle h = items[q].h;
            g->cell[h] = (g->cell[h] & LG_CELL_MASK) | g->epoch << LG_CELL_BITS;
        }
    }
}

/// Cleanup, step 2: the items into cell order, in place (American flag
/// sort: each bucket's next unsorted slot is `count`), and then, cell by
/// cell while its run is in cache, the run's list, the loose box of its
/// fattened boxes, and the run's start. Leaves `count` zeroed.
static void lg_sort(loose_grid *g, int32_t n)
{
    const int32_t nl = g->lcols * g->lrows;
    lg_item *items = g->items;
    int32_t *key = g->next, *count = g->count, *start = g->start;
    int32_t sum = 0;
    for (int32_t c = 0; c < nl; ++c) {
        const int32_t m = count[c];
        start[c] = sum;
        count[c] = sum;
        sum += m;
    }
    start[nl] = n;
    const float m = g->margin;
    for (int32_t c = 0; c < nl; ++c) {
        const int32_t s0 = start[c], end = start[c + 1];
        for (int32_t p = count[c]; p < end; p = count[c]) {
            lg_item it = items[p];
            int32_t k = key[p];
            while (k != c) {
                // Place `it` at the first unsorted slot of its bucket,
                // skipping the ones already holding their own.
                int32_t q = count[k];
                while (key[q] == k)
                    ++q;
                count[k] = q + 1;
                const lg_item t = items[q];
                const int32_t tk = key[q];
                items[q] = it;
                key[q] = k;
                it = t;
                k = tk;
            }
            items[p] = it;
            count[c] = p + 1;
        }
        count[c] = 0;
        lg_loose *lc = &g->loose[c];
        if (s0 == end) {
            *lc = lg_empty;
            continue;
        }
        float l = INFINITY, t = INFINITY, r = -INFINITY, b = -INFINITY;
        for (int32_t q = s0; q < end; ++q) {
            const qg_rect e = items[q].box;
            l = e.min_x < l ? e.min_x : l;
            t = e.min_y < t ? e.min_y : t;
            r = e.max_x > r ? e.max_x : r;
            b = e.max_y > b ? e.max_y : b;
            key[q] = q + 1;
        }
        key[end - 1] = -1;
        // (the same rounding as lg_fatten, so the moves' test agrees)
        lg_loose fit = {s0, l - m, t - m, r + m, b + m};
        const lg_range had = lg_cell_range(g, lc), now = lg_range_of(g, fit.l, fit.t, fit.r, fit.b);
        if (now.x0 < had.x0 || now.y0 < had.y0 || now.x1 > had.x1 || now.y1 > had.y1)
            lg_clip(g, &fit, lc, items, s0, end);
        *lc = fit;
    }
}

/// The k-th smallest of a[0, n) (quickselect; the values are finite).
static float lg_select(float *a, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const float pivot = a[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot)
                ++i;
            while (a[j] > pivot)
                --j;
            if (i <= j) {
                const float t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
    return a[k];
}

/// Centres of up to LG_SAMPLE live elements, evenly spread over the
/// handles (element oh taken with box obox). Returns how many.
static int lg_sample(const loose_grid *g, qg_handle oh, qg_rect obox, float *xs, float *ys, float *ws)
{
    const qg_index *index = &g->base;
    const int32_t high = index->box_high, stride = high / LG_SAMPLE + 1;
    int m = 0;
    for (int32_t h = 0; h < high && m < LG_SAMPLE; h += stride) {
        if (!qg_slot_live(index, h))
            continue;
        const qg_rect b = h == oh ? obox : index->boxes[h];
        xs[m] = b.min_x * 0.5f + b.max_x * 0.5f;
        ys[m] = b.min_y * 0.5f + b.max_y * 0.5f;
        const float w = b.max_x - b.min_x, hgt = b.max_y - b.min_y; // (may overflow to +inf: still ordered)
        ws[m] = w > hgt ? w : hgt;
        m++;
    }
    return m;
}

static float lg_to_float(double v)
{
    return v < -(double)FLT_MAX ? -FLT_MAX : v > (double)FLT_MAX ? FLT_MAX : (float)v;
}

/// [lo - pad, hi + pad] in float, never empty.
static void lg_widen(float lo, float hi, double pad, float *a, float *b)
{
    *a = lg_to_float((double)lo - pad);
    *b = lg_to_float((double)hi + pad);
    if (!(*a < *b)) {
        *a = nextafterf(*a, -FLT_MAX);
        *b = nextafterf(*b, FLT_MAX);
    }
}

/// The world for n elements (element oh with box obox): the configured one
/// when a sample of their centres fills the bounds, else fitted to the
/// sample (see the file's header).
static void lg_plan_world(const loose_grid *g, int32_t n, qg_handle oh, qg_rect obox, lg_plan *p)
{
    const qg_config *c = &g->base.config;
    const qg_rect bd = c->bounds;
    float xs[LG_SAMPLE], ys[LG_SAMPLE], ws[LG_SAMPLE];
    const int m = n >= LG_FIT_MIN ? lg_sample(g, oh, obox, xs, ys, ws) : 0;
    const double bx = qg_extent(bd.min_x, bd.max_x), by = qg_extent(bd.min_y, bd.max_y);
    *p = (lg_plan){bd.min_x, bd.min_y, bd.max_x, bd.max_y, 0, 0, c->cell_size, g->cfg_margin,
                   bd.min_x, bd.min_y, bd.max_x, bd.max_y};
    bool configured = true;
    if (m >= LG_FIT_MIN) {
        const int k = m / 256;
        p->qx0 = lg_select(xs, m, k);
        p->qx1 = lg_select(xs, m, m - 1 - k);
        p->qy0 = lg_select(ys, m, k);
        p->qy1 = lg_select(ys, m, m - 1 - k);
        const double ex = qg_extent(p->qx0, p->qx1), ey = qg_extent(p->qy0, p->qy1);
        configured = p->qx0 >= bd.min_x && p->qx1 <= bd.max_x && p->qy0 >= bd.min_y && p->qy1 <= bd.max_y &&
                     2.0 * ex >= bx && 2.0 * ey >= by;
        if (!configured) {
            // An eighth more than the quantiles (and a cell, for a pile in
            // one spot): a crowd that wanders stays inside for a while.
            if (g->auto_size) {
                // Cells chosen from bounds far too large for the elements
                // would hold them all: size cells and margin by the
                // elements' median width instead.
                const float w = lg_select(ws, m, m / 2);
                if (w > 0.0f && w < FLT_MAX / (2.0f * LG_CELL_WIDTHS)) {
                    p->cell = LG_CELL_WIDTHS * w;
                    p->margin = 0.5f * w;
                }
            }
            const double cell = p->cell;
            lg_widen(p->qx0, p->qx1, ex / 8.0 + cell, &p->x0, &p->x1);
            lg_widen(p->qy0, p->qy1, ey / 8.0 + cell, &p->y0, &p->y1);
            int32_t cols = lg_side(qg_extent(p->x0, p->x1), cell), rows = lg_side(qg_extent(p->y0, p->y1), cell);
            // Cells of the configured size, but not many more than the
            // elements (an empty cell still costs its 32 bytes; bounds far
            // too large configure a million).
            int64_t cap = 2 * (int64_t)n > LG_FIT_CELLS ? 2 * (int64_t)n : LG_FIT_CELLS;
            cap = cap < LG_MAX_CELLS ? cap : LG_MAX_CELLS;
            if ((int64_t)cols * rows > cap) {
                const double f = sqrt((double)cap / ((double)cols * (double)rows));
                cols = (int32_t)((double)cols * f);
                rows = (int32_t)((double)rows * f);
                cols = cols < 1 ? 1 : cols;
                rows = rows < 1 ? 1 : rows;
            }
            p->lcols = cols;
            p->lrows = rows;
        }
    }
    if (configured) {
        int32_t cols = lg_side(bx, c->cell_size), rows = lg_side(by, c->cell_size);
        while ((int64_t)cols * rows > LG_MAX_CELLS) {
            if (cols >= rows)
                cols = (cols + 1) / 2;
            else
                rows = (rows + 1) / 2;
        }
        p->lcols = cols;
        p->lrows = rows;
    }
}

/// Whether re-fitting to plan p is worth a rebuild: the elements' quantile
/// box leaves the world (they pile on its border cells), the world is far
/// larger than the plan's (they crowd a few cells), or the population has
/// grown to allow twice the cells. Otherwise the world is good enough: the
/// margins keep a re-fit from following every small drift.
static bool lg_plan_better(const loose_grid *g, const lg_plan *p)
{
    if (p->x0 == g->wx0 && p->y0 == g->wy0 && p->x1 == g->wx1 && p->y1 == g->wy1 && p->lcols == g->lcols &&
        p->lrows == g->lrows && p->margin == g->margin)
        return false;
    if (p->cell > 4.0f * g->cell_w || g->cell_w > 4.0f * p->cell)
        return true;
    if (p->qx0 < g->wx0 || p->qx1 > g->wx1 || p->qy0 < g->wy0 || p->qy1 > g->wy1)
        return true;
    const double have = qg_extent(g->wx0, g->wx1) * qg_extent(g->wy0, g->wy1);
    const double want = qg_extent(p->x0, p->x1) * qg_extent(p->y0, p->y1);
    if (have > 4.0 * want)
        return true;
    return (int64_t)p->lcols * p->lrows >= 2 * (int64_t)g->lcols * g->lrows;
}

/// Whether cleanup should ask the next insert or move to look at the world:
/// a sample of the items (in cell order, boxes current) has a 32nd of its
/// centres outside the world, or lies in under an eighth of it.
static bool lg_crowded(const loose_grid *g, int32_t n)
{
    const int32_t stride = n / LG_CROWD_SAMPLE + 1;
    int32_t m = 0, out = 0;
    float l = INFINITY, t = INFINITY, r = -INFINITY, b = -INFINITY;
    for (int32_t k = 0; k < n; k += stride, ++m) {
        const qg_rect e = g->items[k].box;
        const float cx = e.min_x * 0.5f + e.max_x * 0.5f, cy = e.min_y * 0.5f + e.max_y * 0.5f;
        out += (cx < g->wx0) | (cx > g->wx1) | (cy < g->wy0) | (cy > g->wy1);
        l = cx < l ? cx : l;
        t = cy < t ? cy : t;
        r = cx > r ? cx : r;
        b = cy > b ? cy : b;
    }
    if (32 * out > m)
        return true;
    const double cell = g->cell_w;
    const double need = (qg_extent(l, r) + 2.0 * cell) * (qg_extent(t, b) + 2.0 * cell);
    return 8.0 * need < qg_extent(g->wx0, g->wx1) * qg_extent(g->wy0, g->wy1);
}

/// lg_collect for a new world: each element's loose cell is computed from
/// its box (and written to its `cell` word, with an epoch other than the
/// current one: the rebuilt loose box holds its box plus the margin).
static int32_t lg_collect_refit(loose_grid *g)
{
    lg_item *items = g->items;
    int32_t *key = g->next, *count = g->count;
    const qg_rect *boxes = g->base.boxes;
    const int32_t high = g->item_high;
    const uint32_t seen = (g->epoch + LG_EPOCHS - 1) % LG_EPOCHS;
    int32_t w = 0;
    for (int32_t k = 0; k < high; ++k) {
        const qg_handle h = items[k].h;
        if (h < 0)
            continue;
        const int32_t c = lg_loose_of(g, boxes[h]);
        g->cell[h] = (uint32_t)c | seen << LG_CELL_BITS;
        items[w] = (lg_item){h, boxes[h]};
        key[w] = c;
        count[c]++;
        w++;
    }
    return w;
}

/// Moves the index into plan p's world (element oh given box obox: the box
/// of a move, or of an insert whose slot is taken and whose item is
/// reserved). Everything is allocated first: the new cell arrays, and the
/// links their loose boxes need (computed from the elements, before any
/// change); QG_ERR_NOMEM then leaves the index as it was (the caller's txn
/// shrinks the links back). Then the old arrays go, and every element is
/// re-filed as qg_cleanup does (the loose boxes come out as computed, so
/// nothing is clipped and the links suffice).
static qg_status lg_refit(loose_grid *g, qg_txn *txn, const lg_plan *p, qg_handle oh, qg_rect obox, bool insert)
{
    qg_index *index = &g->base;
    qg_alloc *alloc = &index->alloc;
    loose_grid next = *g; // the new mapping, computed with before any change
    lg_layout(&next, p->x0, p->y0, p->x1, p->y1, p->lcols, p->lrows);
    next.margin = p->margin;
    const int32_t nl = next.lcols * next.lrows, nt = next.tcols * next.trows;
    const size_t loose_bytes = (size_t)nl * sizeof(lg_loose), tight_bytes = (size_t)nt * sizeof(int32_t),
                 start_bytes = ((size_t)nl + 1) * sizeof(int32_t), count_bytes = (size_t)nl * sizeof(int32_t);
    lg_loose *loose = qg_mem_alloc(alloc, loose_bytes);
    int32_t *tight = loose ? qg_mem_alloc(alloc, tight_bytes) : NULL;
    int32_t *start = tight ? qg_mem_alloc(alloc, start_bytes) : NULL;
    int32_t *count = start ? qg_mem_alloc(alloc, count_bytes) : NULL;
    bool ok = count != NULL;
    if (ok) {
        for (int32_t i = 0; i < nl; ++i)
            loose[i] = lg_empty;
        for (qg_handle h = 0; h < index->box_high; ++h) {
            if (!qg_slot_live(index, h))
                continue;
            // (the cell from the box itself, as lg_collect_refit files it)
            const qg_rect e = h == oh ? obox : index->boxes[h], b = lg_fatten(&next, e);
            lg_loose *c = &loose[lg_loose_of(&next, e)];
            c->l = b.min_x < c->l ? b.min_x : c->l;
            c->t = b.min_y < c->t ? b.min_y : c->t;
            c->r = b.max_x > c->r ? b.max_x : c->r;
            c->b = b.max_y > c->b ? b.max_y : c->b;
        }
        int64_t links = 0;
        for (int32_t i = 0; i < nl; ++i)
            links += lg_range_size(lg_cell_range(&next, &loose[i]));
        ok = qg_txn_reserve(txn, (void **)&g->links.data, &g->links.capacity, sizeof(qg_enode), links);
    }
    if (!ok) {
        qg_mem_free(alloc, count, count_bytes);
        qg_mem_free(alloc, start, start_bytes);
        qg_mem_free(alloc, tight, tight_bytes);
        qg_mem_free(alloc, loose, loose_bytes);
        return QG_ERR_NOMEM;
    }
    qg_array_free(alloc, (void **)&g->loose, &g->loose_capacity, sizeof(lg_loose));
    qg_array_free(alloc, (void **)&g->tight, &g->tight_capacity, sizeof(int32_t));
    qg_array_free(alloc, (void **)&g->start, &g->start_capacity, sizeof(int32_t));
    qg_array_free(alloc, (void **)&g->count, &g->count_capacity, sizeof(int32_t));
    g->loose = loose, g->loose_capacity = nl;
    g->tight = tight, g->tight_capacity = nt;
    g->start = start, g->start_capacity = nl + 1;
    g->count = count, g->count_capacity = nl;
    memset(count, 0, count_bytes);
    lg_layout(g, p->x0, p->y0, p->x1, p->y1, p->lcols, p->lrows);
    g->margin = p->margin;
    g->cell_w = p->cell;
    if (insert)
        g->items[lg_take_item(g)].h = oh;
    else
        index->boxes[oh] = obox;
    g->epoch = (g->epoch + 1) % LG_EPOCHS;
    const int32_t n = lg_collect_refit(g);
    lg_sort(g, n);
    g->packed = n;
    g->item_high = n;
    g->free_item = -1;
    g->fresh = true;
    lg_relink(g);
    return QG_OK;
}

static void loose_grid_cleanup(qg_index *index)
{
    loose_grid *g = (loose_grid *)index;
    g->epoch = (g->epoch + 1) % LG_EPOCHS;
    const int32_t n = lg_collect(g);
    lg_sort(g, n);
    g->packed = n;
    g->item_high = n;
    g->free_item = -1;
    g->fresh = true;
    lg_relink(g);
    lg_trim_steady(g);
    // A re-fit allocates, so cleanup only looks for crowding (a sample of
    // LG_CROWD_SAMPLE items) and leaves the re-fit to the next insert or
    // move.
    g->strays = 0;
    if (g->fit_wait > 0)
        g->fit_wait--;
    else if (n >= LG_FIT_MIN && !g->refit)
        g->refit = lg_crowded(g, n);
}

static void loose_grid_clear(qg_index *index)
{
    loose_grid *g = (loose_grid *)index;
    const int32_t nl = g->lcols * g->lrows, nt = g->tcols * g->trows;
    g->fresh = false;
    for (int32_t i = 0; i < nl; ++i)
        g->loose[i] = lg_empty;
    memset(g->tight, 0xff, (size_t)nt * sizeof(int32_t));
    memset(g->start, 0, ((size_t)nl + 1) * sizeof(int32_t));
    qg_enode_pool_reset(&g->links);
    g->item_high = 0;
    g->packed = 0;
    g->free_item = -1;
    g->refit = false;
    g->strays = 0;
    g->fit_wait = 0;
    g->fit_next = LG_FIT_MIN; // the world stays; the next build looks again
}

static inline int32_t lg_max32(int32_t a, int32_t b)
{
    return a > b ? a : b;
}

/// The box of item k: its copy while fresh, else the base's.
static inline qg_rect lg_item_box(const loose_grid *g, int32_t k)
{
    return g->fresh ? g->items[k].box : g->base.boxes[g->items[k].h];
}

static void loose_grid_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                             qg_query_stats *stats)
{
    const loose_grid *g = (const loose_grid *)index;
    const lg_range q = lg_range_of(g, area.min_x, area.min_y, area.max_x, area.max_y);
    for (int32_t ty = q.y0; ty <= q.y1; ++ty) {
        for (int32_t tx = q.x0; tx <= q.x1; ++tx) {
            stats->nodes_visited++;
            for (int32_t e = g->tight[ty * g->tcols + tx]; e >= 0; e = g->links.data[e].next) {
                const int32_t i = g->links.data[e].element;
                const lg_loose *c = &g->loose[i];
                if (!lg_box_overlaps(c, area))
                    continue;
                // Once: in the first tight cell both ranges share.
                const lg_range cr = lg_cell_range(g, c);
                if (lg_max32(cr.x0, q.x0) != tx || lg_max32(cr.y0, q.y0) != ty)
                    continue;
                stats->nodes_visited++;
                for (int32_t k = c->head; k >= 0; k = g->next[k]) {
                    stats->elements_tested++;
                    if (qg_overlaps(lg_item_box(g, k), area) && !fn(g->items[k].h, user))
                        return;
                }
            }
        }
    }
}

/// A loose cell's elements, gathered.
typedef struct lg_gathered {
    int n;
    qg_handle h[LG_GATHER];
    qg_rect box[LG_GATHER];
} lg_gathered;

static bool lg_gather(const loose_grid *g, int32_t head, lg_gathered *out)
{
    int n = 0;
    for (int32_t k = head; k >= 0; k = g->next[k]) {
        if (n == LG_GATHER)
            return false;
        out->h[n] = g->items[k].h;
        out->box[n] = g->base.boxes[out->h[n]];
        n++;
    }
    out->n = n;
    return true;
}

/// Pairs of element a (box ab, in loose cell ia) with the elements of the
/// loose cells after ia whose boxes overlap ab, walking the lists (after a
/// change without cleanup): "each element against the
/// loose cells near it". A loose cell linked in several of the tight cells
/// ab covers is taken in the first of them only.
static bool lg_pairs_of(const loose_grid *g, int32_t ia, qg_handle a, qg_rect ab, qg_pair_fn *fn, void *user,
                        qg_query_stats *stats)
{
    const lg_range ra = lg_range_of(g, ab.min_x, ab.min_y, ab.max_x, ab.max_y);
    const bool one = ra.x0 == ra.x1 && ra.y0 == ra.y1;
    const qg_enode *links = g->links.data;
    for (int32_t ty = ra.y0; ty <= ra.y1; ++ty) {
        for (int32_t tx = ra.x0; tx <= ra.x1; ++tx) {
            for (int32_t e = g->tight[ty * g->tcols + tx]; e >= 0; e = links[e].next) {
                const int32_t ib = links[e].element;
                if (ib <= ia)
                    continue;
                const lg_loose *cb = &g->loose[ib];
                if (cb->head < 0 || !lg_box_overlaps(cb, ab))
                    continue;
                if (!one) {
                    const lg_range rb = lg_cell_range(g, cb);
                    if (lg_max32(ra.x0, rb.x0) != tx || lg_max32(ra.y0, rb.y0) != ty)
                        continue;
                }
                stats->nodes_visited++;
                for (int32_t k = cb->head; k >= 0; k = g->next[k]) {
                    stats->elements_tested++;
                    const qg_handle h = g->items[k].h;
                    if (qg_overlaps(ab, g->base.boxes[h]) && !qg_report_pair(fn, user, a, h))
                        return false;
                }
            }
        }
    }
    return true;
}

/// A loose cell near the one being paired: its box and its run of items.
typedef struct lg_near {
    float l, t, r, b;
    int32_t k0, k1;
} lg_near;

/// Loose cells gathered at once in lg_pairs_cell_fresh.
#define LG_NEAR 64

/// A's items [k0, k1) against the gathered cells: each element is tested
/// against a cell's box first, then against its elements.
static bool lg_pairs_near(const lg_item *it, int32_t k0, int32_t k1, const lg_near *near, int nn, qg_pair_fn *fn,
                          void *user, int64_t *tested)
{
    for (int32_t i = k0; i < k1; ++i) {
        const qg_rect ab = it[i].box;
        for (int m = 0; m < nn; ++m) {
            const lg_near *nb = &near[m];
            if (!((nb->l <= ab.max_x) & (ab.min_x <= nb->r) & (nb->t <= ab.max_y) & (ab.min_y <= nb->b)))
                continue;
            *tested += nb->k1 - nb->k0;
            for (int32_t q = nb->k0; q < nb->k1; ++q) {
                if (qg_overlaps(ab, it[q].box) && !qg_report_pair(fn, user, it[i].h, it[q].h))
                    return false;
            }
        }
    }
    return true;
}

/// Whether loose cell (cx, cy)'s box stays within half a cell of the cell:
/// its corners, mapped at twice the loose resolution (monotonic, clamped),
/// fall in [2c - 1, 2c + 2] on both axes. Two such boxes that overlap share
/// a point, whose mapping lies in both ranges, so their cells are
/// neighbours: the pair loop finds them by adjacency, without the tight
/// lists. An empty box is not small.
static inline bool lg_small(const loose_grid *g, const lg_loose *c, int32_t cx, int32_t cy)
{
    if (!(c->l <= c->r))
        return false;
    const int32_t lx = 2 * g->lcols - 1, ly = 2 * g->lrows - 1;
    const float sx = 2.0f * g->lsx, sy = 2.0f * g->lsy;
    return lg_map(c->l, g->ox, sx, lx) >= 2 * cx - 1 && lg_map(c->r, g->ox, sx, lx) <= 2 * cx + 2 &&
           lg_map(c->t, g->oy, sy, ly) >= 2 * cy - 1 && lg_map(c->b, g->oy, sy, ly) <= 2 * cy + 2;
}

/// Adds loose cell ib to the gathered cells when its box overlaps A's.
static inline int lg_near_add(const loose_grid *g, lg_near *near, int nn, const lg_loose *ca, int32_t ib)
{
    const lg_loose *cb = &g->loose[ib];
    near[nn] = (lg_near){cb->l, cb->t, cb->r, cb->b, g->start[ib], g->start[ib + 1]};
    return nn + ((cb->l <= ca->r) & (ca->l <= cb->r) & (cb->t <= ca->b) & (ca->t <= cb->b));
}

/// The pairs of loose cell ia = (cx, cy) right after cleanup: within the
/// cell, then against the other loose cells whose boxes overlap its box (a
/// pair of overlapping elements lies in two overlapping loose boxes). Each
/// pair of cells is taken once:
/// - both small (lg_small, the common case): from the lower cell, which
///   looks at its four later neighbours;
/// - one small, one big: from the big one;
/// - both big: from the lower one.
/// A big cell finds the others through the tight cells of its box, each in
/// the first tight cell the two ranges share. The cells found are gathered
/// with their boxes and runs on the C stack (in batches), then each element
/// is tested against a cell's box before its elements.
static bool lg_pairs_cell_fresh(const loose_grid *g, int32_t ia, int32_t cx, int32_t cy, qg_pair_fn *fn, void *user,
                                qg_query_stats *stats)
{
    const lg_item *it = g->items;
    const int32_t k0 = g->start[ia], k1 = g->start[ia + 1];
    int64_t tested = 0, visited = 1;
    for (int32_t i = k0; i < k1; ++i) {
        const qg_rect ab = it[i].box;
        tested += k1 - i - 1;
        for (int32_t j = i + 1; j < k1; ++j) {
            if (qg_overlaps(ab, it[j].box) && !qg_report_pair(fn, user, it[i].h, it[j].h))
                return false;
        }
    }
    const lg_loose *ca = &g->loose[ia];
    lg_near near[LG_NEAR];
    int nn = 0;
    bool go = true;
    if (lg_small(g, ca, cx, cy)) {
        const int32_t w = g->lcols;
        if (cx + 1 < w && lg_small(g, &g->loose[ia + 1], cx + 1, cy))
            nn = lg_near_add(g, near, nn, ca, ia + 1);
        if (cy + 1 < g->lrows) {
            for (int32_t dx = cx > 0 ? -1 : 0; dx <= 1 && cx + dx < w; ++dx) {
                if (lg_small(g, &g->loose[ia + w + dx], cx + dx, cy + 1))
                    nn = lg_near_add(g, near, nn, ca, ia + w + dx);
            }
        }
    } else {
        const lg_range ra = lg_cell_range(g, ca);
        const qg_enode *links = g->links.data;
        for (int32_t ty = ra.y0; ty <= ra.y1 && go; ++ty) {
            for (int32_t tx = ra.x0; tx <= ra.x1 && go; ++tx) {
                for (int32_t e = g->tight[ty * g->tcols + tx]; e >= 0; e = links[e].next) {
                    const int32_t ib = links[e].element;
                    const lg_loose *cb = &g->loose[ib];
                    if (ib == ia || !(ib > ia || lg_small(g, cb, ib % g->lcols, ib / g->lcols)))
                        continue;
                    const lg_range rb = lg_cell_range(g, cb);
                    if (lg_max32(ra.x0, rb.x0) != tx || lg_max32(ra.y0, rb.y0) != ty)
                        continue;
                    nn = lg_near_add(g, near, nn, ca, ib);
                    if (nn == LG_NEAR) {
                        visited += nn;
                        if (!(go = lg_pairs_near(it, k0, k1, near, nn, fn, user, &tested)))
                            break;
                        nn = 0;
                    }
                }
            }
        }
    }
    visited += nn;
    if (go && nn > 0)
        go = lg_pairs_near(it, k0, k1, near, nn, fn, user, &tested);
    stats->nodes_visited += visited;
    stats->elements_tested += tested;
    return go;
}

static void loose_grid_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    const loose_grid *g = (const loose_grid *)index;
    const qg_rect *boxes = index->boxes;
    const int32_t nl = g->lcols * g->lrows;
    if (g->fresh) {
        // Right after qg_cleanup: everything streams from the items.
        for (int32_t cy = 0, ia = 0; cy < g->lrows; ++cy) {
            for (int32_t cx = 0; cx < g->lcols; ++cx, ++ia) {
                if (g->start[ia] != g->start[ia + 1] && !lg_pairs_cell_fresh(g, ia, cx, cy, fn, user, stats))
                    return;
            }
        }
        return;
    }
    lg_gathered A;
    for (int32_t ia = 0; ia < nl; ++ia) {
        const lg_loose *ca = &g->loose[ia];
        if (ca->head < 0)
            continue;
        stats->nodes_visited++;
        if (lg_gather(g, ca->head, &A)) {
            for (int i = 0; i < A.n; ++i) {
                for (int j = i + 1; j < A.n; ++j) {
                    stats->elements_tested++;
                    if (qg_overlaps(A.box[i], A.box[j]) && !qg_report_pair(fn, user, A.h[i], A.h[j]))
                        return;
                }
                if (!lg_pairs_of(g, ia, A.h[i], A.box[i], fn, user, stats))
                    return;
            }
        } else {
            for (int32_t ka = ca->head; ka >= 0; ka = g->next[ka]) {
                const qg_handle a = g->items[ka].h;
                for (int32_t kb = g->next[ka]; kb >= 0; kb = g->next[kb]) {
                    const qg_handle b = g->items[kb].h;
                    stats->elements_tested++;
                    if (qg_overlaps(boxes[a], boxes[b]) && !qg_report_pair(fn, user, a, b))
                        return;
                }
                if (!lg_pairs_of(g, ia, a, boxes[a], fn, user, stats))
                    return;
            }
        }
    }
}

static void loose_grid_stats(const qg_index *index, qg_stats *stats)
{
    const loose_grid *g = (const loose_grid *)index;
    stats->leaves = g->lcols * g->lrows;
    stats->nodes = stats->leaves + g->tcols * g->trows;
    stats->max_depth_reached = 1;
}

/// Tight cells at depth 0 (with the loose cells linked in them as the
/// count), then every non-empty loose box at depth 1 (with its elements).
static void loose_grid_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    const loose_grid *g = (const loose_grid *)index;
    const double w = qg_extent(g->wx0, g->wx1) / g->tcols, hgt = qg_extent(g->wy0, g->wy1) / g->trows;
    for (int32_t ty = 0; ty < g->trows; ++ty) {
        for (int32_t tx = 0; tx < g->tcols; ++tx) {
            int32_t count = 0;
            for (int32_t e = g->tight[ty * g->tcols + tx]; e >= 0; e = g->links.data[e].next)
                count++;
            const qg_rect r = {(float)(g->wx0 + tx * w), (float)(g->wy0 + ty * hgt),
                               tx + 1 == g->tcols ? g->wx1 : (float)(g->wx0 + (tx + 1) * w),
                               ty + 1 == g->trows ? g->wy1 : (float)(g->wy0 + (ty + 1) * hgt)};
            fn(r, 0, count, user);
        }
    }
    const int32_t nl = g->lcols * g->lrows;
    for (int32_t i = 0; i < nl; ++i) {
        const lg_loose *c = &g->loose[i];
        if (!(c->l <= c->r))
            continue;
        int32_t count = 0;
        for (int32_t k = c->head; k >= 0; k = g->next[k])
            count++;
        fn((qg_rect){c->l, c->t, c->r, c->b}, 1, count, user);
    }
}

/// True when item slot k is in loose cell i's list.
static bool lg_listed(const loose_grid *g, int32_t i, int32_t k, int64_t bound)
{
    for (int32_t j = g->loose[i].head; j >= 0 && bound-- > 0; j = g->next[j]) {
        if (j == k)
            return true;
    }
    return false;
}

static qg_status loose_grid_validate(const qg_index *index, size_t *bytes)
{
    const loose_grid *g = (const loose_grid *)index;
    const int32_t nl = g->lcols * g->lrows, nt = g->tcols * g->trows;
    if (nl < 1 || nl > g->loose_capacity || nt < 1 || nt > g->tight_capacity || g->start_capacity < nl + 1 ||
        g->count_capacity < nl || !(g->wx0 < g->wx1) || !(g->wy0 < g->wy1) ||
        g->tcols != (g->lcols + LG_TIGHT_RATIO - 1) / LG_TIGHT_RATIO ||
        g->trows != (g->lrows + LG_TIGHT_RATIO - 1) / LG_TIGHT_RATIO)
        return QG_ERR_INVALID;
    if (index->box_high > 0 && g->cell_capacity < index->box_high)
        return QG_ERR_INVALID;
    if (g->item_high < 0 || g->item_high > g->items_capacity || g->item_high > g->next_capacity ||
        g->packed < 0 || g->packed > g->item_high || g->start[0] != 0 || g->start[nl] != g->packed)
        return QG_ERR_INVALID;
    for (int32_t i = 0; i < nl; ++i) {
        if (g->start[i] > g->start[i + 1] || g->count[i] != 0)
            return QG_ERR_INVALID;
    }
    // Items: every live one names a live element whose `cell` is a list that
    // holds it.
    int64_t live = 0, holes_after = 0;
    for (int32_t k = 0; k < g->item_high; ++k) {
        const qg_handle h = g->items[k].h;
        if (h < 0) {
            holes_after += k >= g->packed;
            continue;
        }
        if (!qg_slot_live(index, h))
            return QG_ERR_INVALID;
        const int32_t i = (int32_t)(g->cell[h] & LG_CELL_MASK);
        if (i >= nl || !lg_listed(g, i, k, index->count))
            return QG_ERR_INVALID;
        live++;
    }
    if (live != index->count)
        return QG_ERR_INVALID;
    int64_t free_items = 0;
    for (int32_t k = g->free_item; k >= 0; k = g->next[k]) {
        if (k < g->packed || k >= g->item_high || g->items[k].h >= 0 || ++free_items > holes_after)
            return QG_ERR_INVALID;
    }
    if (free_items != holes_after)
        return QG_ERR_INVALID;
    // Lists: each holds count items at most, each inside its loose box, and
    // with the margin unless it moved since the last cleanup.
    int64_t listed = 0, expected_links = 0;
    for (int32_t i = 0; i < nl; ++i) {
        const lg_loose *c = &g->loose[i];
        int64_t len = 0;
        for (int32_t k = c->head; k >= 0; k = g->next[k]) {
            if (++len > index->count || k >= g->item_high || g->items[k].h < 0)
                return QG_ERR_INVALID;
            const qg_handle h = g->items[k].h;
            const qg_rect b = index->boxes[h];
            if ((g->cell[h] & LG_CELL_MASK) != (uint32_t)i || lg_loose_of(g, b) != i || !lg_inside_loose(b, c) ||
                ((g->cell[h] >> LG_CELL_BITS) != g->epoch && !lg_inside_loose(lg_fatten(g, b), c)))
                return QG_ERR_INVALID;
            if (g->fresh && (k != g->start[i] + len - 1 ||
                             memcmp(&g->items[k].box, &b, sizeof b) != 0))
                return QG_ERR_INVALID;
        }
        if (g->fresh && len != g->start[i + 1] - g->start[i])
            return QG_ERR_INVALID;
        listed += len;
        if ((c->l <= c->r) != (c->t <= c->b) || isnan(c->l) || isnan(c->t) || isnan(c->r) || isnan(c->b))
            return QG_ERR_INVALID;
        expected_links += lg_range_size(lg_cell_range(g, c));
    }
    if (listed != index->count || (g->fresh && (g->packed != index->count || g->item_high != g->packed)))
        return QG_ERR_INVALID;
    // Links: every link in a tight cell names a loose cell whose range holds
    // that tight cell, at most once per tight cell; with the count matching
    // the sum of the ranges, every range is fully linked.
    int64_t links = 0;
    for (int32_t t = 0; t < nt; ++t) {
        const int32_t tx = t % g->tcols, ty = t / g->tcols;
        for (int32_t e = g->tight[t]; e >= 0; e = g->links.data[e].next) {
            if (e >= g->links.high || ++links > g->links.live)
                return QG_ERR_INVALID;
            const int32_t i = g->links.data[e].element;
            if (i < 0 || i >= nl || !lg_range_has(lg_cell_range(g, &g->loose[i]), tx, ty))
                return QG_ERR_INVALID;
            for (int32_t f = g->links.data[e].next; f >= 0; f = g->links.data[f].next) {
                if (g->links.data[f].element == i)
                    return QG_ERR_INVALID;
            }
        }
    }
    if (links != g->links.live || links != expected_links ||
        qg_enode_free_count(&g->links) != g->links.high - g->links.live)
        return QG_ERR_INVALID;
    *bytes += (size_t)g->loose_capacity * sizeof(lg_loose) + (size_t)g->tight_capacity * sizeof(int32_t) +
              (size_t)g->links.capacity * sizeof(qg_enode) + (size_t)g->start_capacity * sizeof(int32_t) +
              (size_t)g->count_capacity * sizeof(int32_t) + (size_t)g->cell_capacity * sizeof(uint32_t) +
              (size_t)g->items_capacity * sizeof(lg_item) + (size_t)g->next_capacity * sizeof(int32_t);
    return QG_OK;
}

const qg_kind_class qg_loose_grid_class = {
    .kind = QG_LOOSE_GRID,
    .size = sizeof(loose_grid),
    .configure = loose_grid_configure,
    .init = loose_grid_init,
    .destroy = loose_grid_destroy,
    .insert = loose_grid_insert,
    .remove = loose_grid_remove,
    .move = loose_grid_move,
    .cleanup = loose_grid_cleanup,
    .clear = loose_grid_clear,
    .query = loose_grid_query,
    .pairs = loose_grid_pairs,
    .stats = loose_grid_stats,
    .visit = loose_grid_visit,
    .validate = loose_grid_validate,
};
