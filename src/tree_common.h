// SPDX-License-Identifier: MIT
// What the four tree kinds (quadtree, loose_quadtree, level_quadtree,
// bucket_quadtree) share, written once: the world a tree maps onto integer
// coordinates and when to re-fit it, the conservative float-to-integer
// mapping, the square world a re-fit picks, and the explicit-stack
// depth-first walk with the stats and validation built on it.
//
// The hot helpers (mapping, the outside count, cell arithmetic) are static
// inline here so every kind's insert, move and query keep them inlined with
// their own constants; what runs once per re-fit, stats, visit or validate
// lives in tree_common.c. Only tree files include this header.
#ifndef QG_TREE_COMMON_H
#define QG_TREE_COMMON_H

#include "kind.h"
#include "ray_nearest_kernels.h"

/// Integer coordinates span [0, QG_TREE_SIDE) on each axis: depth 15 is the
/// deepest level whose cells are still at least one integer unit wide.
#define QG_TREE_BITS 15
#define QG_TREE_SIDE (1 << QG_TREE_BITS)
/// Depth-first traversal pops one node and pushes at most 4.
#define QG_TREE_STACK (3 * QG_TREE_BITS + 8)

/// An inclusive range of integer cells.
typedef struct qg_tree_ibox {
    int32_t x0, y0, x1, y1;
} qg_tree_ibox;

/// A node of a pointer tree (children in blocks of 4) and its cell: x, y
/// are the integer min corner, the side is QG_TREE_SIDE >> depth.
typedef struct qg_tree_cell {
    int32_t node, x, y, depth;
} qg_tree_cell;

/// Child i (0-3: TL, TR, BL, BR) of c, whose block starts at first_child:
/// children's cells are computed, never stored.
static inline qg_tree_cell qg_tree_child_cell(qg_tree_cell c, int32_t first_child, int i)
{
    const int32_t half = (QG_TREE_SIDE >> c.depth) >> 1;
    return (qg_tree_cell){first_child + i, c.x + (i & 1) * half, c.y + (i >> 1) * half, c.depth + 1};
}

/// Bits 0-3: which quadrants (TL, TR, BL, BR) around the integer point
/// (mx, my) the box b overlaps; the quadrants own the coordinates >= mx and
/// >= my on their right and bottom.
static inline unsigned qg_tree_quadrants(int32_t mx, int32_t my, qg_tree_ibox b)
{
    const unsigned left = b.x0 < mx, right = b.x1 >= mx, top = b.y0 < my, bottom = b.y1 >= my;
    return (left & top) | (right & top) << 1 | (left & bottom) << 2 | (right & bottom) << 3;
}

/// Bits 0-3: which children of the cell c the box b overlaps.
static inline unsigned qg_tree_child_mask(qg_tree_cell c, qg_tree_ibox b)
{
    const int32_t half = (QG_TREE_SIDE >> c.depth) >> 1;
    return qg_tree_quadrants(c.x + half, c.y + half, b);
}

/// How many low bits b's corners differ in: b lies in one aligned cell
/// 2^spread units wide, and in no smaller one. Lets a kind find the deepest
/// node that can hold a box without comparing at every level.
static inline int qg_tree_spread(qg_tree_ibox b)
{
    uint32_t v = (uint32_t)((b.x0 ^ b.x1) | (b.y0 ^ b.y1));
#if defined(__GNUC__)
    return v ? 32 - __builtin_clz(v) : 0;
#else
    int n = 0;
    while (v) {
        v >>= 1;
        n++;
    }
    return n;
#endif
}

/// The box a tree maps onto its integer coordinates, and the counts that say
/// when to look at the elements again for a better one.
typedef struct qg_tree_world {
    qg_rect box;
    float scale_x, scale_y; ///< integer units per world unit
    int32_t scan_count;     ///< live elements at the last scan of the boxes
    int64_t outside_moves;  ///< inserts and moves outside the world since that scan
} qg_tree_world;

/// v as a float, saturated at +-FLT_MAX (world arithmetic is done in double).
static inline float qg_tree_to_float(double v)
{
    return v > (double)FLT_MAX ? FLT_MAX : v < -(double)FLT_MAX ? -FLT_MAX : (float)v;
}

/// The larger of a world's two extents, in double (it may pass FLT_MAX).
static inline double qg_tree_extent(qg_rect w)
{
    const double x = qg_extent(w.min_x, w.max_x), y = qg_extent(w.min_y, w.max_y);
    return x > y ? x : y;
}

/// Deepest level, at most `cap`, whose cells are still at least
/// element_size wide in a world `extent` wide: "a max depth set so that the
/// smallest cell size is a little over the size of your average agent". In
/// double: extents pass FLT_MAX.
static inline int qg_tree_depth_for(double extent, double element_size, int cap)
{
    int depth = 0;
    while (depth < cap && extent / (double)(2 << depth) >= element_size)
        depth++;
    return depth < 1 ? 1 : depth;
}

/// The depth a configuration picks when max_depth is left to the kind: from
/// element_size when given, else the kind's default.
static inline int qg_tree_chosen_depth(const qg_config *config, int default_depth, int cap)
{
    if (!(config->element_size > 0.0f))
        return default_depth;
    return qg_tree_depth_for(qg_tree_extent(config->bounds), config->element_size, cap);
}

/// Maps `box` onto [0, side) integer units per axis. In double: the scale
/// saturates at FLT_MAX for worlds under 1e-34 wide (coarser cells, same
/// answers) and never reaches 0 for worlds +-FLT_MAX wide.
static inline void qg_tree_world_set(qg_tree_world *w, qg_rect box, int32_t side)
{
    w->box = box;
    w->scale_x = qg_tree_to_float((double)side / qg_extent(box.min_x, box.max_x));
    w->scale_y = qg_tree_to_float((double)side / qg_extent(box.min_y, box.max_y));
}

/// Back to `box` with no scan behind it (qg_clear): the next elements may be
/// anywhere.
static inline void qg_tree_world_reset(qg_tree_world *w, qg_rect box, int32_t side)
{
    qg_tree_world_set(w, box, side);
    w->scan_count = 0;
    w->outside_moves = 0;
}

/// True when r is not wholly inside the world: what re-fitting counts.
static inline bool qg_tree_outside(const qg_tree_world *w, qg_rect r)
{
#if defined(QV_HAVE)
    const qv_f32 v = qg_rect_vec(r), b = qg_rect_vec(w->box);
    // lanes 0, 1: r's min below the world's; lanes 2, 3: r's max above it
    return ((qv_bits(qv_lt(v, b)) & 3) | (qv_bits(qv_lt(b, v)) & 12)) != 0;
#else
    const qg_rect b = w->box;
    return (r.min_x < b.min_x) | (r.min_y < b.min_y) | (r.max_x > b.max_x) | (r.max_y > b.max_y);
#endif
}

/// Counts an insert or move that ends at r: four comparisons, so the re-fit
/// check stays O(1) until enough of them are outside.
static inline void qg_tree_note(qg_tree_world *w, qg_rect r)
{
    w->outside_moves += qg_tree_outside(w, r);
}

/// True when the population doubled since the last scan (qg_insert re-fits
/// then, so a tree built by inserts alone is fitted before its first pairs).
static inline bool qg_tree_grown(const qg_tree_world *w, int64_t count)
{
    return count >= 2 * (int64_t)w->scan_count;
}

/// The re-fit check: true (and the counts restart) when a sixteenth of the
/// moves since the last scan ended outside the world or the population
/// doubled or halved since it; the caller then scans with qg_tree_fit.
static inline bool qg_tree_scan_due(qg_tree_world *w, int64_t count)
{
    if (count == 0 || !(w->outside_moves * 16 > count || qg_tree_grown(w, count) || 2 * count <= w->scan_count))
        return false;
    w->outside_moves = 0;
    w->scan_count = (int32_t)count;
    return true;
}

/// Maps a coordinate to its integer cell, clamped into [0, side - 1].
/// Monotonic in v (float subtraction and scaling round monotonically, and
/// overflow to infinity keeps the order), which is what makes the mapping
/// conservative: a point inside a box maps inside the box's integer range.
/// Infinite v clamps; NaN never reaches here.
static inline int32_t qg_tree_map(float v, float origin, float scale, int32_t side)
{
    const float f = (v - origin) * scale;
    if (!(f > 0.0f))
        return 0;
    if (f >= (float)(side - 1))
        return side - 1;
    return (int32_t)f;
}

/// qg_tree_map on the four coordinates of a box. With a vector unit the
/// four are mapped at once, without branches: it runs twice for every move.
static inline qg_tree_ibox qg_tree_map_box(const qg_tree_world *w, qg_rect r, int32_t side)
{
    const qg_rect b = w->box;
#if defined(QV_HAVE)
    qv_f32 f = (qg_rect_vec(r) - (qv_f32){b.min_x, b.min_y, b.min_x, b.min_y}) *
               (qv_f32){w->scale_x, w->scale_y, w->scale_x, w->scale_y};
    // max(f, 0) then min(f, side - 1): the same clamps as qg_tree_map
    // (qv_max returns its second operand for NaN, which never arrives anyway).
    f = qv_min(qv_max(f, qv_splat(0.0f)), qv_splat((float)(side - 1)));
    int32_t out[4];
    qv_store_i32(out, qv_trunc(f));
    return (qg_tree_ibox){out[0], out[1], out[2], out[3]};
#else
    return (qg_tree_ibox){qg_tree_map(r.min_x, b.min_x, w->scale_x, side),
                          qg_tree_map(r.min_y, b.min_y, w->scale_y, side),
                          qg_tree_map(r.max_x, b.min_x, w->scale_x, side),
                          qg_tree_map(r.max_y, b.min_y, w->scale_y, side)};
#endif
}

/// True when boxes a and b map onto the same cells of a level whose cells
/// are 2^shift units wide (shift in [0, 31]): the mapping of qg_tree_map_box,
/// the two compared as one vector (every move runs it).
static inline bool qg_tree_same_cells(const qg_tree_world *w, qg_rect a, qg_rect b, int32_t side, int shift)
{
#if defined(QV_HAVE)
    const qg_rect o = w->box;
    const qv_f32 origin = {o.min_x, o.min_y, o.min_x, o.min_y};
    const qv_f32 scale = {w->scale_x, w->scale_y, w->scale_x, w->scale_y};
    const qv_f32 top = qv_splat((float)(side - 1)), zero = qv_splat(0.0f);
    const qv_f32 fa = (qg_rect_vec(a) - origin) * scale;
    const qv_f32 fb = (qg_rect_vec(b) - origin) * scale;
    const qv_i32 ia = qv_trunc(qv_min(qv_max(fa, zero), top));
    const qv_i32 ib = qv_trunc(qv_min(qv_max(fb, zero), top));
    // Same cell: the coordinates differ only below bit `shift`.
    return qv_none((qv_i32)((qv_u32)(ia ^ ib) >> shift));
#else
    const qg_tree_ibox ia = qg_tree_map_box(w, a, side), ib = qg_tree_map_box(w, b, side);
    return ((ia.x0 ^ ib.x0) >> shift) == 0 && ((ia.y0 ^ ib.y0) >> shift) == 0 && ((ia.x1 ^ ib.x1) >> shift) == 0 &&
           ((ia.y1 ^ ib.y1) >> shift) == 0;
#endif
}

/// The world-unit box of the integer square [x, x + size) x [y, y + size)
/// in a world of `side` units per axis (for qg_visit). In double: the
/// world's extent may pass FLT_MAX.
static inline qg_rect qg_tree_cell_rect(const qg_tree_world *w, double x, double y, double size, double side)
{
    const qg_rect b = w->box;
    const double ux = qg_extent(b.min_x, b.max_x) / side, uy = qg_extent(b.min_y, b.max_y) / side;
    return (qg_rect){qg_tree_to_float(b.min_x + x * ux), qg_tree_to_float(b.min_y + y * uy),
                     qg_tree_to_float(b.min_x + (x + size) * ux), qg_tree_to_float(b.min_y + (y + size) * uy)};
}

/// A square world around [lx, hx] x [ly, hy], half as wide again as its
/// larger side, so a population that moves a little does not leave it.
/// Computed in double and saturated: it holds every point of the given box.
static inline qg_rect qg_tree_square_world(double lx, double ly, double hx, double hy)
{
    const double ex = hx - lx, ey = hy - ly;
    const double half = 0.75 * (ex > ey ? ex : ey);
    const double cx = lx + 0.5 * ex, cy = ly + 0.5 * ey;
    qg_rect w = {qg_tree_to_float(cx - half), qg_tree_to_float(cy - half), qg_tree_to_float(cx + half),
                 qg_tree_to_float(cy + half)};
    // All elements at one point: the world still needs min < max.
    if (!(w.min_x < w.max_x)) {
        if (w.min_x > -FLT_MAX)
            w.min_x = nextafterf(w.min_x, -FLT_MAX);
        else
            w.max_x = nextafterf(w.max_x, FLT_MAX);
    }
    if (!(w.min_y < w.max_y)) {
        if (w.min_y > -FLT_MAX)
            w.min_y = nextafterf(w.min_y, -FLT_MAX);
        else
            w.max_y = nextafterf(w.max_y, FLT_MAX);
    }
    return w;
}

/// Scans every live box (but `skip`, the element being inserted) and decides
/// whether the world should change: when a sixteenth of the elements lie
/// outside it (it then grows to take them in, keeping the old world), or
/// when they fill less than an eighth of it on both axes (it then shrinks to
/// them). With `to_bounds`, a grown world that fits in the configured bounds
/// and fills them is the bounds (the first inserts of a build made the world
/// shrink to them). *size, when asked for, is the elements' mean width (the
/// larger side): cells must not get smaller than the elements.
bool qg_tree_fit(const qg_tree_world *w, const qg_index *ix, qg_handle skip, bool to_bounds, qg_rect *out,
                 double *size);

/// A re-fit's max_depth: the configured one when the world is back to the
/// configured bounds, else the depth whose cells are a little over the
/// larger of element_size and the elements' mean width `size`, at most cap.
int qg_tree_refit_depth(const qg_config *config, qg_rect world, double size, int cap);

/// The first of node's 4 children, -1 when it is a leaf: the one thing the
/// shared walks need to know about a kind's nodes.
typedef int32_t qg_tree_children_fn(const void *tree, int32_t node);

/// What a walk calls for each node; `children` is the node's first child as
/// read before the call (-1: a leaf), so a call may split a leaf without the
/// walk going into it.
typedef void qg_tree_visit_node_fn(const void *tree, qg_tree_cell c, int32_t children, void *ctx);

/// Pre-order, depth first, children in order 0-3, from the root (node 0,
/// the whole integer square). The stack lives on the C stack.
void qg_tree_walk(const void *tree, qg_tree_children_fn *children, qg_tree_visit_node_fn *visit, void *ctx);

/// qg_get_stats for a pointer tree: nodes, leaves, deepest depth.
void qg_tree_stats(const void *tree, qg_tree_children_fn *children, qg_stats *stats);

/// The user's visit callback, for the kinds' own walk visits.
typedef struct qg_tree_visit_ctx {
    qg_visit_fn *fn;
    void *user;
} qg_tree_visit_ctx;

/// Splits a rebuilt tree level by level, up to max_depth: every leaf of a
/// level before any of the next, so memory that runs short leaves the whole
/// tree a little shallow rather than one corner deep and the rest in a
/// pile. `split` returns -1 when it lacked memory; so does this (else 0).
int qg_tree_split_levels(void *tree, int max_depth, qg_tree_children_fn *children,
                         int (*split)(void *tree, qg_tree_cell c, bool grow), bool grow);

/// A node array's fill: node 0 (the root) and whole blocks of 4 after it.
static inline bool qg_tree_high_ok(int32_t node_high, int32_t node_capacity)
{
    return node_high >= 1 && node_high <= node_capacity && (node_high - 1) % 4 == 0;
}

/// True when `first` can start a block of 4 children below node_high. (No
/// `first + 4`: a snapshot's hostile link may be INT32_MAX.)
static inline bool qg_tree_block_ok(int32_t first, int32_t node_high)
{
    return first >= 1 && first <= node_high - 4 && (first - 1) % 4 == 0;
}

/// What a validating walk adds up.
typedef struct qg_tree_check {
    bool ok;
    int64_t branches, elements;
} qg_tree_check;

/// The checks every node of a pointer tree passes: in the array, no deeper
/// than max_depth, and a branch's block of children whole and above
/// max_depth (branches are counted). True when the node passed; the kind
/// then checks what is its own (elements, boxes, counts).
static inline bool qg_tree_check_node(qg_tree_check *k, qg_tree_cell c, int32_t children, int32_t node_high,
                                      int32_t max_depth)
{
    bool ok = c.node < node_high && c.depth <= max_depth;
    if (ok && children >= 0) {
        k->branches++;
        ok = qg_tree_block_ok(children, node_high) && c.depth < max_depth;
    }
    k->ok &= ok;
    return ok;
}

/// Validates the free list of blocks (linked through the int32 at
/// `link_offset` of each block's first node, nodes `stride` bytes apart) and
/// that every node is the root, in a branch's block or in a free block.
bool qg_tree_blocks_ok(const void *nodes, size_t stride, size_t link_offset, int32_t free_block,
                       int32_t free_blocks, int32_t node_high, int64_t branches);

/* ---- The state walk (state.h) of what the trees share ------------------- */

struct qg_state;

/// A tree's world, field by field (the struct has padding before
/// outside_moves, which a snapshot must not carry).
void qg_tree_world_state(struct qg_state *s, qg_tree_world *d, const qg_tree_world *src);

/// A pointer tree's node array: the high-water mark and the free blocks of
/// 4, then the nodes below the mark (every node above it is written before
/// it is read) with the array's capacity. The fields are passed one by one
/// because each kind's struct names them alike but lays out its own nodes;
/// QG_TREE_NODES_STATE passes them.
void qg_tree_nodes_state(struct qg_state *s, void **dnodes, int32_t *dcap, int32_t *dhigh, int32_t *dfree,
                         int32_t *dfree_blocks, const void *snodes, int32_t scap, const int32_t *shigh,
                         const int32_t *sfree, const int32_t *sfree_blocks, size_t elem);
#define QG_TREE_NODES_STATE(s, d, src, elem)                                                                 \
    qg_tree_nodes_state((s), (void **)&(d)->nodes, &(d)->node_capacity, &(d)->node_high, &(d)->free_block,   \
                        &(d)->free_blocks, (src)->nodes, (src)->node_capacity, &(src)->node_high,            \
                        &(src)->free_block, &(src)->free_blocks, (elem))

/// How many slots of a per-handle array (capacity `cap`) a snapshot
/// carries: those of every handle ever issued. A slot of a free handle is
/// written by the insert that takes the handle again before anything reads
/// it, so none past box_high is state.
static inline int32_t qg_tree_slots_used(int32_t cap, int32_t box_high)
{
    return cap < box_high ? cap : box_high;
}

/// A snapshot's world as qg_tree_world_set leaves it: a finite box, min
/// below max, and the scales that box maps onto `side` units (the mapping
/// reads the scales, the re-fit checks the box: apart, they put an element
/// in one cell and look for it in another).
bool qg_tree_world_ok(const qg_tree_world *w, int32_t side);

/// A snapshot's configuration as a tree kind resolves it (max_depth in [1,
/// `cap`], leaf_capacity at least 1): a clear or a re-fit goes back to it,
/// and a depth past the integer cells would overrun the walks' stacks.
bool qg_tree_config_ok(const qg_config *c, int32_t cap);

/// A snapshot's pointer tree, before qg_validate walks it: from the root,
/// every branch's children a whole block below node_high and no branch at
/// depth QG_TREE_BITS, each node reached once, and with the free blocks
/// (linked as qg_tree_blocks_ok reads them) every node once. The shared
/// walks and the kinds' descents trust that shape: a child block pointing
/// back up would make them loop or, past depth 15, overrun their stacks.
/// QG_ERR_NOMEM when the map of the nodes (node_high bits, freed before
/// returning) cannot be had.
qg_status qg_tree_shape_check(qg_alloc *alloc, const void *tree, qg_tree_children_fn *children,
                              const void *nodes, size_t stride, size_t link_offset, int32_t free_block,
                              int32_t node_high, int32_t node_capacity);

/* ---- Ray casts and nearest searches over integer cells ------------------
 *
 * The kinds whose nodes are integer cells (quadtree, level_quadtree,
 * bucket_quadtree) turn a cell back into the world region of the points the
 * conservative mapping sends into it, to test the ray or the point against
 * it. The region holds every point the mapping sends into the cell (for
 * level_quadtree and bucket_quadtree, whose cells hold their elements'
 * integer boxes, so every box the node holds; for the quadtree, every
 * point of a listed box that maps into the leaf). Two things make it so:
 * - a cell on the border of the integer square takes every point beyond
 *   the world on that side (the mapping clamps), so those sides are
 *   infinite;
 * - the region's inner sides are computed in double and rounded to float,
 *   and the mapping rounds too, so they are pushed out by a hair that
 *   dwarfs both roundings: 4e-5 of the largest magnitude involved (the
 *   world's corners, and for a ray its origin, since a point on the segment
 *   carries the rounding of origin + t * direction, a few ulps of the
 *   larger of the two). The hair only ever makes regions larger: a cell
 *   visited for nothing costs time, never an answer. */

/// The frame that maps a tree's integer cells back to world regions.
typedef struct qg_tree_frame {
    double x0, y0;       ///< the world's min corner
    double ux, uy;       ///< world units per integer unit: 1 / the mapping's float scale
    float over_x, over_y; ///< past these, v - min overflows to +inf: the last cell
    float hair;          ///< how far each inner side is pushed out
    int32_t side;        ///< integer units per axis
} qg_tree_frame;

/// The frame of world `w` mapped onto `side` units per axis, for a search
/// around a point of magnitude `reach` (a ray's origin; 0 for nearest).
/// The units come from the mapping's own float scale (it saturates for
/// worlds under 1e-34 wide), not from the world's extent.
static inline qg_tree_frame qg_tree_frame_make(const qg_tree_world *w, int32_t side, float reach)
{
    const qg_rect b = w->box;
    float m = reach;
    m = fabsf(b.min_x) > m ? fabsf(b.min_x) : m;
    m = fabsf(b.max_x) > m ? fabsf(b.max_x) : m;
    m = fabsf(b.min_y) > m ? fabsf(b.min_y) : m;
    m = fabsf(b.max_y) > m ? fabsf(b.max_y) : m;
    const double ox = (double)b.min_x + FLT_MAX, oy = (double)b.min_y + FLT_MAX;
    qg_tree_frame f = {b.min_x,
                       b.min_y,
                       1.0 / (double)w->scale_x,
                       1.0 / (double)w->scale_y,
                       (float)(ox < FLT_MAX ? ox : FLT_MAX),
                       (float)(oy < FLT_MAX ? oy : FLT_MAX),
                       4e-5f * m + 1e-30f,
                       side};
    return f;
}

/// The world region of the integer square [x, x + size) x [y, y + size):
/// every point the mapping sends into it lies inside (see above). A world
/// wider than FLT_MAX sends every point whose distance from its min side
/// overflows to the last cell, however far from that cell it lies.
static inline qg_rect qg_tree_region(const qg_tree_frame *f, int32_t x, int32_t y, int32_t size)
{
    const float inf = INFINITY;
    qg_rect r;
    r.min_x = x == 0 ? -inf : qg_tree_to_float(f->x0 + x * f->ux);
    r.min_y = y == 0 ? -inf : qg_tree_to_float(f->y0 + y * f->uy);
    r.max_x = inf, r.max_y = inf;
    if (x + size < f->side)
        r.max_x = qg_tree_to_float(f->x0 + (x + size) * f->ux) + f->hair;
    else if (f->over_x < r.min_x)
        r.min_x = f->over_x;
    if (y + size < f->side)
        r.max_y = qg_tree_to_float(f->y0 + (y + size) * f->uy) + f->hair;
    else if (f->over_y < r.min_y)
        r.min_y = f->over_y;
    r.min_x -= f->hair, r.min_y -= f->hair;
    return r;
}

/// A qg_raycast in progress with the direction's inverses computed once
/// (the hit test divides per element otherwise).
typedef struct qg_tree_ray {
    qg_ray r;
    float ix, iy; ///< 1 / dx, 1 / dy (0 for a zero component: not used)
} qg_tree_ray;

static inline qg_tree_ray qg_tree_ray_start(float ox, float oy, float dx, float dy, float max_t, qg_ray_fn *fn,
                                            void *user)
{
    qg_tree_ray q = {qg_ray_start(ox, oy, dx, dy, max_t, fn, user), dx != 0.0f ? 1.0f / dx : 0.0f,
                     dy != 0.0f ? 1.0f / dy : 0.0f};
    return q;
}

/// qg_ray_box_fast at the current max_t with the inverses computed once:
/// the same operations on the same values (1 / dx rounds the same every
/// time), so the same answers bit for bit.
static inline bool qg_tree_ray_hit(const qg_tree_ray *q, qg_rect box, float *t)
{
    float t1;
    return qg_ray_slabs(box, q->r.ox, q->r.oy, q->r.dx, q->r.dy, q->ix, q->iy, q->r.max_t, t, &t1);
}

/// qg_ray_offer with the inverses computed once.
static inline bool qg_tree_ray_offer(qg_tree_ray *q, qg_handle h, qg_rect box)
{
    float t;
    return !qg_tree_ray_hit(q, box, &t) || qg_ray_report(&q->r, h, t);
}

/// The entry parameter *t0 of the segment (at the current max_t) into a
/// node's box; false when it misses it. The hit test's formula, whose slab
/// parameters are monotonic in the box's sides, so a box holding an
/// element's box gets an interval holding the element's, with one
/// exception this test removes: a direction component so small that its
/// inverse is infinite, with the origin exactly on one of the box's sides
/// on that axis, gives 0 * inf = NaN for that side and +-inf for the other,
/// and the hit test's swap then narrows to nothing (a zero-width element
/// there, both NaN, is still hit). A NaN on an axis here narrows nothing
/// on that axis, which holds every element's interval.
static inline bool qg_tree_span(const qg_tree_ray *q, qg_rect c, float *t0)
{
    float a = 0.0f, b = q->r.max_t;
    if (q->r.dx == 0.0f) {
        if (q->r.ox < c.min_x || q->r.ox > c.max_x)
            return false;
    } else {
        float ta = (c.min_x - q->r.ox) * q->ix, tb = (c.max_x - q->r.ox) * q->ix;
        if (ta > tb) {
            const float s = ta;
            ta = tb;
            tb = s;
        }
        if (!isnan(ta) && !isnan(tb)) {
            a = ta > a ? ta : a;
            b = tb < b ? tb : b;
        }
    }
    if (q->r.dy == 0.0f) {
        if (q->r.oy < c.min_y || q->r.oy > c.max_y)
            return false;
    } else {
        float ta = (c.min_y - q->r.oy) * q->iy, tb = (c.max_y - q->r.oy) * q->iy;
        if (ta > tb) {
            const float s = ta;
            ta = tb;
            tb = s;
        }
        if (!isnan(ta) && !isnan(tb)) {
            a = ta > a ? ta : a;
            b = tb < b ? tb : b;
        }
    }
    if (!(a <= b))
        return false;
    *t0 = a;
    return true;
}

/// One axis of qg_tree_child_spans: the parameter intervals [a[j], b[j]]
/// of the low (j = 0) and high (j = 1) child's region sides lo[j], hi[j],
/// as qg_tree_span computes them.
static inline void qg_tree_axis_spans(float o, float d, float inv, const float *lo, const float *hi, float *a,
                                      float *b)
{
    for (int j = 0; j < 2; ++j) {
        if (d == 0.0f) {
            const bool in = !(o < lo[j] || o > hi[j]);
            a[j] = in ? -INFINITY : INFINITY;
            b[j] = in ? INFINITY : -INFINITY;
            continue;
        }
        float ta = (lo[j] - o) * inv, tb = (hi[j] - o) * inv;
        if (ta > tb) {
            const float s = ta;
            ta = tb;
            tb = s;
        }
        const bool nan = isnan(ta) || isnan(tb);
        a[j] = nan ? -INFINITY : ta;
        b[j] = nan ? INFINITY : tb;
    }
}

/// qg_tree_span of qg_tree_region of each of the 4 children (TL, TR, BL,
/// BR) of the cell [x, x + size) x [y, y + size), with the same values
/// (the children share their sides, so each is converted once): bit i of
/// the result is set when the segment reaches child i, t0[i] its entry.
static inline unsigned qg_tree_child_spans(const qg_tree_ray *q, const qg_tree_frame *f, int32_t x, int32_t y,
                                           int32_t size, float *t0)
{
    const int32_t half = size >> 1;
    const qg_rect lo = qg_tree_region(f, x, y, half), hi = qg_tree_region(f, x + half, y + half, half);
    const float xl[2] = {lo.min_x, hi.min_x}, xh[2] = {lo.max_x, hi.max_x};
    const float yl[2] = {lo.min_y, hi.min_y}, yh[2] = {lo.max_y, hi.max_y};
    float ax[2], bx[2], ay[2], by[2];
    qg_tree_axis_spans(q->r.ox, q->r.dx, q->ix, xl, xh, ax, bx);
    qg_tree_axis_spans(q->r.oy, q->r.dy, q->iy, yl, yh, ay, by);
    unsigned mask = 0;
    for (int i = 0; i < 4; ++i) {
        float a = 0.0f, b = q->r.max_t;
        a = ax[i & 1] > a ? ax[i & 1] : a;
        a = ay[i >> 1] > a ? ay[i >> 1] : a;
        b = bx[i & 1] < b ? bx[i & 1] : b;
        b = by[i >> 1] < b ? by[i >> 1] : b;
        t0[i] = a;
        mask |= (unsigned)(a <= b) << i;
    }
    return mask;
}

/// qg_point_box_d2_fast of qg_tree_region of each of the 4 children of the
/// cell [x, x + size) x [y, y + size), from their shared sides: d2[i] for
/// child i (TL, TR, BL, BR).
static inline void qg_tree_child_d2(const qg_tree_frame *f, int32_t x, int32_t y, int32_t size, float px, float py,
                                    float *d2)
{
    const int32_t half = size >> 1;
    const qg_rect lo = qg_tree_region(f, x, y, half), hi = qg_tree_region(f, x + half, y + half, half);
    float ex[2], ey[2];
    ex[0] = lo.min_x - px > px - lo.max_x ? lo.min_x - px : px - lo.max_x;
    ex[1] = hi.min_x - px > px - hi.max_x ? hi.min_x - px : px - hi.max_x;
    ey[0] = lo.min_y - py > py - lo.max_y ? lo.min_y - py : py - lo.max_y;
    ey[1] = hi.min_y - py > py - hi.max_y ? hi.min_y - py : py - hi.max_y;
    for (int j = 0; j < 2; ++j) {
        ex[j] = ex[j] > 0.0f ? ex[j] : 0.0f;
        ey[j] = ey[j] > 0.0f ? ey[j] : 0.0f;
        const float sx = ex[j] * ex[j], sy = ey[j] * ey[j];
        ex[j] = sx, ey[j] = sy;
    }
    for (int i = 0; i < 4; ++i)
        d2[i] = ex[i & 1] + ey[i >> 1];
}

/// A node waiting on a ray cast's or nearest search's stack, with its key:
/// the entry parameter or the distance2 it had when pushed (the key only
/// falls short of the truth, so a node popped with a key past the current
/// bound is skipped).
typedef struct qg_tree_pending {
    qg_tree_cell c;
    float key;
} qg_tree_pending;

/// Pushes the n children in ch (keys set) so the smallest key pops first:
/// sorted by key, largest pushed first. n <= 4.
static inline void qg_tree_push_sorted(qg_tree_pending *stack, int *top, qg_tree_pending *ch, int n)
{
    for (int i = 1; i < n; ++i) {
        const qg_tree_pending v = ch[i];
        int j = i;
        while (j > 0 && ch[j - 1].key < v.key) {
            ch[j] = ch[j - 1];
            j--;
        }
        ch[j] = v;
    }
    for (int i = 0; i < n; ++i)
        stack[(*top)++] = ch[i];
}


/// Interleaves the low 15 bits of x and y (x in the even bits): the order
/// of a depth-first walk of a tree's cells (the keys of qg_tree_sort_morton).
static inline uint32_t qg_tree_morton(uint32_t x, uint32_t y)
{
    x = (x | x << 8) & 0x00FF00FFu;
    x = (x | x << 4) & 0x0F0F0F0Fu;
    x = (x | x << 2) & 0x33333333u;
    x = (x | x << 1) & 0x55555555u;
    y = (y | y << 8) & 0x00FF00FFu;
    y = (y | y << 4) & 0x0F0F0F0Fu;
    y = (y | y << 2) & 0x33333333u;
    y = (y | y << 1) & 0x55555555u;
    return x | y << 1;
}

/* ---- a node's pairs, tested a vector at a time --------------------------- */

/// Boxes a node's pair search gathers at most (the hit masks are 64 bits).
#define QG_LANES 64

/// A node's gathered boxes by axis: k of them, then padding lanes the tests
/// read and mask off. With a vector unit a box is tested against 4 others
/// at once (one by one, the branch on each overlap mispredicted: the top
/// cost of the quadtree's qg_pairs at 1,000,000).
typedef struct qg_lanes {
    float x0[QG_LANES + 3], y0[QG_LANES + 3], x1[QG_LANES + 3], y1[QG_LANES + 3];
} qg_lanes;

/// Lane i holds r.
static inline void qg_lanes_put(qg_lanes *L, int i, qg_rect r)
{
    L->x0[i] = r.min_x;
    L->y0[i] = r.min_y;
    L->x1[i] = r.max_x;
    L->y1[i] = r.max_y;
}

/// Lane i's box.
static inline qg_rect qg_lanes_get(const qg_lanes *L, int i)
{
    return (qg_rect){L->x0[i], L->y0[i], L->x1[i], L->y1[i]};
}

/// After lanes [0, k) are put: the padding the tests read.
static inline void qg_lanes_end(qg_lanes *L, int k)
{
    for (int i = k; i < k + 3; ++i)
        L->x0[i] = L->y0[i] = L->x1[i] = L->y1[i] = 0.0f;
}

/// Bit j set for each lane j in [from, k) whose box overlaps r (closed,
/// qg_overlaps' test: <=, false for NaN).
static inline uint64_t qg_lanes_hits(const qg_lanes *L, int from, int k, qg_rect r)
{
    uint64_t m = 0;
#if defined(QV_HAVE)
    const qg_box4 b = qg_box4_of(r);
    for (int j = from; j < k; j += 4) // lanes past 63 shift out
        m |= (uint64_t)qg_overlaps4(b, L->x0 + j, L->y0 + j, L->x1 + j, L->y1 + j) << j;
    return k >= 64 ? m : m & (((uint64_t)1 << k) - 1);
#else
    for (int j = from; j < k; ++j)
        m |= (uint64_t)qg_overlaps(r, qg_lanes_get(L, j)) << j;
    return m;
#endif
}

/// The pairs among lanes [0, k): bit j of hit[i] (j > i) when lanes i and j
/// overlap. All of them are found before any is reported: with no call in
/// the loop, its vectors stay in registers (a call clobbers them all),
/// which made the quadtree's leaf loop of the level workload half as long.
/// Fills hit[0..k) (the last one 0); returns the union of the masks (0: no
/// pair).
static inline uint64_t qg_lanes_self(const qg_lanes *L, int k, uint64_t *hit)
{
    uint64_t any = 0;
    for (int i = 0; i < k; ++i) {
        hit[i] = qg_lanes_hits(L, i + 1, k, qg_lanes_get(L, i));
        any |= hit[i];
    }
    return any;
}

/// The pairs between lanes A[0, ka) and B[0, kb): bit j of hit[i] when A's
/// lane i overlaps B's lane j. Returns the union of the masks.
static inline uint64_t qg_lanes_cross(const qg_lanes *A, int ka, const qg_lanes *B, int kb, uint64_t *hit)
{
    uint64_t any = 0;
    for (int i = 0; i < ka; ++i) {
        hit[i] = qg_lanes_hits(B, 0, kb, qg_lanes_get(A, i));
        any |= hit[i];
    }
    return any;
}

/// Reports the pairs (a[i], b[j]) of bit j in hit[i], i < ka, of the masks
/// qg_lanes_cross filled (qg_lanes_self's: b is a); false when fn stopped.
static inline bool qg_lanes_report(const qg_handle *a, int ka, const qg_handle *b, const uint64_t *hit,
                                   qg_pair_fn *fn, void *user)
{
    for (int i = 0; i < ka; ++i) {
        for (uint64_t bits = hit[i]; bits != 0; bits &= bits - 1) {
            if (!qg_report_pair(fn, user, a[i], b[qg_ctz64(bits)]))
                return false;
        }
    }
    return true;
}

/// Sorts n keys whose bits 32..61 hold a cell's Morton code (the low 32
/// bits a position, which keeps the sort stable): least significant digit
/// first, 10 bits at a time, between `key` and `tmp` (n each). A bulk
/// insert in this order walks the tree the way its nodes lie. Returns the
/// array holding the sorted keys (after three passes, `tmp`).
uint64_t *qg_tree_sort_morton(uint64_t *key, uint64_t *tmp, int32_t n);

/// The trees' learning rule (tune_rule.h): the depth follows the median
/// element size; the level and bucket quadtrees make theirs from these parts.
extern const qg_tune_rule qg_tree_tune_rule;
/// What the user's element_size (or max_depth) says is in force.
qg_in_force qg_tree_tune_hint(const qg_config *c, const qg_config *user);
/// A median QG_TREE_TUNE_RATIO or more off.
bool qg_tree_tune_differs(const qg_config *c, qg_in_force now, const qg_learned *learned);
/// A tree reports its depth, and no cells.
void qg_tree_tune_stats(const qg_config *c, qg_stats *s);

#endif
