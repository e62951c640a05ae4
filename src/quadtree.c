// QG_QUADTREE: the tight quadtree of "Efficient Quadtrees" (seed 003, part 1).
//
// - A node is 8 bytes: first_child (a branch's first child, or a leaf's first
//   element node) and count (-1 for a branch). Only the root box is stored;
//   child boxes are computed during traversal with shifts on integer
//   coordinates. Boxes are mapped to integers conservatively (floor, clamped),
//   and the final overlap test uses the stored float box, so results are exact.
// - The 4 children of a branch are contiguous and are freed and reclaimed as
//   one block of 4 through a free list.
// - An element is stored once (the base's box array); every leaf its box
//   overlaps holds an element node in a singly-linked index list.
// - Removal leaves empty leaves in place; qg_cleanup collapses a branch whose
//   4 children are empty leaves, one level per call (deferred cleanup).
// - Each element remembers one byte: the depth of the deepest leaf it is in.
//   Leaves no deeper than that are unions of cells of that depth, so a move
//   whose box covers the same cells of that depth stays in exactly the same
//   leaves and touches no node at all ("if it's still encompassed entirely in
//   that leaf node, we don't even need to work our way back up again from the
//   root"), whether the element is in one leaf or several. Other moves walk
//   only the subtree of the deepest node holding the old and new boxes.
// - Pairs walk the leaves in tree order and report a pair only in the leaf
//   that holds the top-left corner of the two boxes' overlap, so each pair is
//   reported once without a visited set.
// - The configured bounds are a hint. The tree maps its own world box, which
//   starts as the bounds and is re-fitted in qg_cleanup to the elements when
//   a sixteenth of them lie outside it (the new world takes in the old one,
//   half as wide again, so a spreading population re-fits a logarithmic
//   number of times) or when they fill less than an eighth of it on both
//   axes (bounds [-3e38, 3e38] around agents in [0, 5000]). The check costs
//   four comparisons per insert or move: cleanup scans the boxes only when
//   a sixteenth of the moves since the last scan ended outside the world, or
//   the population doubled or halved since it. A re-fit rebuilds the tree in
//   the memory the old one held (every element needs one element node at the
//   root, and it had at least one), splitting level by level while nodes are
//   there; leaves left over-full are split by the next insert or move, which
//   may allocate. With element_size given, max_depth follows the new world.
//   A world is square in world units (cells as wide as tall): its mapping to
//   integers is computed in double, so any finite bounds work.
#include "index_internal.h"
#include "pool.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/// Integer coordinates span [0, QT_SIDE) on each axis: depth 15 is the
/// deepest level whose cells are still at least one integer unit wide.
#define QT_BITS 15
#define QT_SIDE (1 << QT_BITS)
#define QT_DEFAULT_DEPTH 8
#define QT_DEFAULT_LEAF_CAPACITY 8
/// A leaf's elements are gathered into arrays of this size on the C stack
/// for the pair loop; larger leaves (only possible at max depth) are walked
/// in place.
#define QT_GATHER 64
/// Depth-first traversal pops one node and pushes at most 4.
#define QT_STACK (3 * QT_BITS + 8)

typedef struct qt_node {
    int32_t first_child; ///< branch: first of 4 children; leaf: first element node
    int32_t count;       ///< leaf: element nodes in it; branch: -1
} qt_node;
_Static_assert(sizeof(qt_node) == 8, "a quadtree node is 8 bytes");

typedef struct qt_ibox {
    int32_t x0, y0, x1, y1; ///< inclusive integer cell range
} qt_ibox;

typedef struct qt_cell {
    int32_t node, x, y, depth; ///< x, y: integer min corner
} qt_cell;

typedef struct quadtree {
    qg_index base;
    qt_node *nodes;
    int32_t node_capacity;
    int32_t node_high;  ///< nodes ever used: [0, node_high)
    int32_t free_block; ///< first node of the first free block of 4, -1 if none
    int32_t free_blocks;
    qg_enode_pool enodes;
    uint8_t *depths; ///< per element: depth of the deepest leaf it is in, or more
    int32_t depth_capacity;
    qg_rect world;          ///< the box mapped onto the integer coordinates
    float scale_x, scale_y; ///< integer units per world unit
    int32_t max_depth, leaf_capacity;
    int32_t depth_cap; ///< a re-fit's max_depth: the configured one if the user chose it, else QT_BITS
    bool resplit;    ///< a re-fit left over-full leaves: the next insert or move splits them
    int32_t scan_count;     ///< live elements at the last scan of the boxes
    int64_t outside_moves;  ///< inserts and moves outside the world since that scan
} quadtree;

/// v as a float, saturated at +-FLT_MAX (world arithmetic is done in double).
static inline float qt_to_float(double v)
{
    return v > (double)FLT_MAX ? FLT_MAX : v < -(double)FLT_MAX ? -FLT_MAX : (float)v;
}

/// Deepest level whose cells are still at least element_size wide in a world
/// `extent` wide: "a max depth set so that the smallest cell size is a little
/// over the size of your average agent". In double: extents pass FLT_MAX.
static int qt_depth_for(double extent, double element_size)
{
    int depth = 0;
    while (depth < QT_BITS && extent / (double)(2 << depth) >= element_size)
        depth++;
    return depth < 1 ? 1 : depth;
}

static inline double qt_world_extent(qg_rect w)
{
    const double x = qg_extent(w.min_x, w.max_x), y = qg_extent(w.min_y, w.max_y);
    return x > y ? x : y;
}

/// Maps `world` onto the integer coordinates. The scale saturates at
/// FLT_MAX for worlds under 1e-34 wide (coarser cells, same answers).
static void qt_set_world(quadtree *qt, qg_rect world)
{
    qt->world = world;
    qt->scale_x = qt_to_float(QT_SIDE / qg_extent(world.min_x, world.max_x));
    qt->scale_y = qt_to_float(QT_SIDE / qg_extent(world.min_y, world.max_y));
}

/// True when r is not wholly inside the world: what re-fitting counts.
static inline bool qt_outside(const quadtree *qt, qg_rect r)
{
    const qg_rect w = qt->world;
    return (r.min_x < w.min_x) | (r.min_y < w.min_y) | (r.max_x > w.max_x) | (r.max_y > w.max_y);
}

/// Maps a coordinate to its integer cell, clamped into [0, QT_SIDE - 1].
/// Monotonic in v (float subtraction and scaling round monotonically), which
/// is what makes the mapping conservative: a point inside a box maps inside
/// the box's integer range. Infinite v clamps; NaN never reaches here.
static inline int32_t qt_map(float v, float origin, float scale)
{
    float f = (v - origin) * scale;
    if (!(f > 0.0f))
        return 0;
    if (f >= (float)(QT_SIDE - 1))
        return QT_SIDE - 1;
    return (int32_t)f;
}

/// qt_map on the four coordinates of a box. With SSE the four are mapped at
/// once, without branches: this runs twice for every move.
static inline qt_ibox qt_map_box(const quadtree *qt, qg_rect r)
{
    const qg_rect b = qt->world;
#if defined(__SSE2__)
    __m128 f = _mm_mul_ps(_mm_sub_ps(_mm_setr_ps(r.min_x, r.min_y, r.max_x, r.max_y),
                                     _mm_setr_ps(b.min_x, b.min_y, b.min_x, b.min_y)),
                          _mm_setr_ps(qt->scale_x, qt->scale_y, qt->scale_x, qt->scale_y));
    // max(f, 0) then min(f, side - 1): the same clamps as qt_map (maxps
    // returns its second operand for NaN, which never arrives anyway).
    f = _mm_min_ps(_mm_max_ps(f, _mm_setzero_ps()), _mm_set1_ps((float)(QT_SIDE - 1)));
    int32_t out[4];
    _mm_storeu_si128((__m128i *)out, _mm_cvttps_epi32(f));
    return (qt_ibox){out[0], out[1], out[2], out[3]};
#else
    qt_ibox ib = {qt_map(r.min_x, b.min_x, qt->scale_x), qt_map(r.min_y, b.min_y, qt->scale_y),
                  qt_map(r.max_x, b.min_x, qt->scale_x), qt_map(r.max_y, b.min_y, qt->scale_y)};
    return ib;
#endif
}

static inline bool qt_ibox_overlaps(qt_ibox a, qt_ibox b)
{
    return a.x0 <= b.x1 && b.x0 <= a.x1 && a.y0 <= b.y1 && b.y0 <= a.y1;
}

static inline qt_ibox qt_cell_box(qt_cell c)
{
    const int32_t s = QT_SIDE >> c.depth;
    return (qt_ibox){c.x, c.y, c.x + s - 1, c.y + s - 1};
}

/// True when integer point (px, py) lies in cell c.
static inline bool qt_cell_holds(qt_cell c, int32_t px, int32_t py)
{
    const uint32_t s = (uint32_t)QT_SIDE >> c.depth;
    return (uint32_t)(px - c.x) < s && (uint32_t)(py - c.y) < s;
}

/// Depth-first iteration over the leaves whose cells overlap an integer box.
/// The stack lives on the C stack: no allocation per traversal.
typedef struct qt_iter {
    qt_cell stack[QT_STACK];
    int top;
} qt_iter;

static const qt_cell qt_root = {0, 0, 0, 0};

static inline void qt_iter_start(qt_iter *it, qt_cell from)
{
    it->stack[0] = from;
    it->top = 1;
}

/// Next leaf overlapping b, in tree order (TL, TR, BL, BR); false when done.
static inline bool qt_next_leaf(const quadtree *qt, qt_iter *it, qt_ibox b, qt_cell *out)
{
    while (it->top > 0) {
        const qt_cell c = it->stack[--it->top];
        const qt_node n = qt->nodes[c.node];
        if (n.count != -1) {
            *out = c;
            return true;
        }
        // Centre of the node: children are computed, never stored.
        const int32_t half = (QT_SIDE >> c.depth) >> 1;
        const int32_t mx = c.x + half, my = c.y + half, d = c.depth + 1, fc = n.first_child;
        // Pushed in reverse so the top-left child pops first.
        if (b.x1 >= mx && b.y1 >= my)
            it->stack[it->top++] = (qt_cell){fc + 3, mx, my, d};
        if (b.x0 < mx && b.y1 >= my)
            it->stack[it->top++] = (qt_cell){fc + 2, c.x, my, d};
        if (b.x1 >= mx && b.y0 < my)
            it->stack[it->top++] = (qt_cell){fc + 1, mx, c.y, d};
        if (b.x0 < mx && b.y0 < my)
            it->stack[it->top++] = (qt_cell){fc + 0, c.x, c.y, d};
    }
    return false;
}


/// True when a and b cover the same cells of the given depth.
static inline bool qt_same_cells(qt_ibox a, qt_ibox b, int depth)
{
    const int shift = QT_BITS - depth;
    return ((a.x0 >> shift) == (b.x0 >> shift)) & ((a.x1 >> shift) == (b.x1 >> shift)) &
           ((a.y0 >> shift) == (b.y0 >> shift)) & ((a.y1 >> shift) == (b.y1 >> shift));
}

/// Bits 0-3: which children of the cell `c` the box b overlaps (TL, TR, BL, BR).
static inline unsigned qt_child_mask(qt_cell c, qt_ibox b)
{
    const int32_t half = (QT_SIDE >> c.depth) >> 1;
    const int32_t mx = c.x + half, my = c.y + half;
    const unsigned left = b.x0 < mx, right = b.x1 >= mx, top = b.y0 < my, bottom = b.y1 >= my;
    return (left & top) | (right & top) << 1 | (left & bottom) << 2 | (right & bottom) << 3;
}

static inline qt_cell qt_child_cell(qt_cell c, int32_t first_child, int i)
{
    const int32_t half = (QT_SIDE >> c.depth) >> 1;
    return (qt_cell){first_child + i, c.x + (i & 1) * half, c.y + (i >> 1) * half, c.depth + 1};
}

static inline int qt_popcount4(unsigned m)
{
    return (int)((m & 1) + (m >> 1 & 1) + (m >> 2 & 1) + (m >> 3 & 1));
}

static inline int qt_bit_length(uint32_t v)
{
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

/// The deepest node under `c` whose cell contains all of b (b inside c). The
/// deepest level that can hold b is read off the highest bit in which b's
/// corners differ, so the walk down only follows coordinate bits.
static qt_cell qt_descend(const quadtree *qt, qt_cell c, qt_ibox b)
{
    const int stop = QT_BITS - qt_bit_length((uint32_t)((b.x0 ^ b.x1) | (b.y0 ^ b.y1)));
    while (c.depth < stop) {
        const qt_node n = qt->nodes[c.node];
        if (n.count != -1)
            break;
        const int shift = QT_BITS - 1 - c.depth;
        const int i = ((b.x0 >> shift) & 1) | ((b.y0 >> shift) & 1) << 1;
        c = qt_child_cell(c, n.first_child, i);
    }
    return c;
}

/// At most how many leaves b can overlap: the max-depth cells it overlaps.
static inline int64_t qt_leaf_bound(const quadtree *qt, qt_ibox b)
{
    const int shift = QT_BITS - qt->max_depth;
    return (int64_t)((b.x1 >> shift) - (b.x0 >> shift) + 1) * ((b.y1 >> shift) - (b.y0 >> shift) + 1);
}

static void qt_link(quadtree *qt, int32_t node, qg_handle h)
{
    qt_node *n = &qt->nodes[node];
    n->first_child = qg_enode_take(&qt->enodes, h, n->first_child);
    n->count++;
}

static void qt_unlink(quadtree *qt, int32_t node, qg_handle h)
{
    qt_node *n = &qt->nodes[node];
    int32_t *link = &n->first_child;
    while (*link >= 0) {
        const int32_t e = *link;
        if (qt->enodes.data[e].element == h) {
            *link = qt->enodes.data[e].next;
            qg_enode_give(&qt->enodes, e);
            n->count--;
            return;
        }
        link = &qt->enodes.data[e].next;
    }
}

/// Splits leaf c once, if that separates its elements: 1 when it split, 0
/// when it need not, -1 when the memory was not there. Splitting is upkeep,
/// not meaning: without memory the leaf simply stays larger than
/// leaf_capacity (answers do not change) and a later insert tries again. With
/// `grow` false it uses only the capacity already held (qg_cleanup's
/// re-fit, which must not allocate). It reserves everything before it
/// changes anything, so it happens whole or not at all.
static int qt_split_leaf(quadtree *qt, qt_cell c, bool grow)
{
    qt_node *n = &qt->nodes[c.node];
    if (n->count <= qt->leaf_capacity || c.depth >= qt->max_depth)
        return 0;
    // Elements covering the whole cell would go to all 4 children: splitting
    // does not separate them, so only the others count towards capacity.
    // Without this, a few world-sized boxes would subdivide the whole world
    // down to max depth.
    const qt_ibox cell = qt_cell_box(c);
    int32_t partial = 0;
    int64_t need = 0;
    for (int32_t e = n->first_child; e >= 0; e = qt->enodes.data[e].next) {
        const qt_ibox b = qt_map_box(qt, qt->base.boxes[qt->enodes.data[e].element]);
        if (!(b.x0 <= cell.x0 && b.y0 <= cell.y0 && b.x1 >= cell.x1 && b.y1 >= cell.y1))
            partial++;
        need += qt_popcount4(qt_child_mask(c, b));
    }
    if (partial <= qt->leaf_capacity)
        return 0;

    if (grow) {
        qg_txn txn;
        qg_txn_begin(&txn, &qt->base.alloc);
        if ((qt->free_block < 0 && !qg_txn_reserve(&txn, (void **)&qt->nodes, &qt->node_capacity,
                                                   sizeof(qt_node), (int64_t)qt->node_high + 4)) ||
            !qg_enode_reserve(&txn, &qt->enodes, need)) {
            qg_txn_rollback(&txn);
            return -1;
        }
    } else if ((qt->free_block < 0 && qt->node_high + 4 > qt->node_capacity) ||
               need - n->count > (int64_t)qt->enodes.capacity - qt->enodes.live) {
        // Exact here: each element gives its node back before it takes its
        // 1-4 new ones, so the pool peaks at the end, `need - count` higher.
        return -1;
    }
    n = &qt->nodes[c.node]; // the array may have moved
    int32_t fc;
    if (qt->free_block >= 0) {
        fc = qt->free_block;
        qt->free_block = qt->nodes[fc].first_child;
        qt->free_blocks--;
    } else {
        fc = qt->node_high;
        qt->node_high += 4;
    }
    for (int i = 0; i < 4; ++i)
        qt->nodes[fc + i] = (qt_node){-1, 0};
    int32_t e = n->first_child;
    while (e >= 0) {
        const int32_t next = qt->enodes.data[e].next;
        const qg_handle h = qt->enodes.data[e].element;
        qg_enode_give(&qt->enodes, e);
        const unsigned mask = qt_child_mask(c, qt_map_box(qt, qt->base.boxes[h]));
        for (int i = 0; i < 4; ++i) {
            if (mask >> i & 1)
                qt_link(qt, fc + i, h);
        }
        if (qt->depths[h] < c.depth + 1)
            qt->depths[h] = (uint8_t)(c.depth + 1);
        e = next;
    }
    n->first_child = fc;
    n->count = -1;
    return 1;
}

/// Splits leaf c if that separates its elements, then its children the same
/// way (allocating as needed).
static void qt_try_split(quadtree *qt, qt_cell c)
{
    if (qt_split_leaf(qt, c, true) != 1)
        return;
    const int32_t fc = qt->nodes[c.node].first_child;
    for (int i = 0; i < 4; ++i)
        qt_try_split(qt, qt_child_cell(c, fc, i));
}

/// Splits the over-full leaves under `from` that b overlaps.
static void qt_split_leaves(quadtree *qt, qt_cell from, qt_ibox b)
{
    qt_iter it;
    qt_cell c;
    qt_iter_start(&it, from);
    while (qt_next_leaf(qt, &it, b, &c)) {
        // Splitting c does not disturb the iteration: c is already popped and
        // the stack holds only nodes outside c.
        if (qt->nodes[c.node].count > qt->leaf_capacity && c.depth < qt->max_depth)
            qt_try_split(qt, c);
    }
}

/// Splits every over-full leaf a re-fit left (it could use only the memory
/// it had). Runs at the start of the next insert or move, where allocating
/// is allowed; a failed allocation leaves the leaf as it is, as in any split.
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void qt_resplit(quadtree *qt)
{
    qt->resplit = false;
    qt_split_leaves(qt, qt_root, (qt_ibox){0, 0, QT_SIDE - 1, QT_SIDE - 1});
}

/// A square world around [lx, hx] x [ly, hy], half as wide again as its
/// larger side, so a population that moves a little does not leave it.
static qg_rect qt_square_world(double lx, double ly, double hx, double hy)
{
    const double ex = hx - lx, ey = hy - ly;
    const double half = 0.75 * (ex > ey ? ex : ey);
    const double cx = lx + 0.5 * ex, cy = ly + 0.5 * ey;
    qg_rect w = {qt_to_float(cx - half), qt_to_float(cy - half), qt_to_float(cx + half), qt_to_float(cy + half)};
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

/// Scans every box and decides whether the world should change: when a
/// sixteenth of the elements lie outside it (it then grows to take them in,
/// keeping the old world), or when the elements fill less than an eighth of
/// it on both axes (it then shrinks to them). *size is the elements' mean
/// width (the larger side), which picks the new max_depth: cells must not
/// get smaller than the elements, or each would sit in many leaves.
static bool qt_fit(const quadtree *qt, qg_handle skip, qg_rect *out, double *size)
{
    const qg_index *ix = &qt->base;
    const qg_rect w = qt->world;
    float lx = FLT_MAX, ly = FLT_MAX, hx = -FLT_MAX, hy = -FLT_MAX;
    int64_t outside = 0, scanned = 0;
    double widths = 0.0;
    for (qg_handle h = 0; h < ix->box_high; ++h) {
        const qg_rect r = ix->boxes[h];
        if (isnan(r.min_x) || h == skip)
            continue; // a free slot, or the element being inserted
        scanned++;
        lx = r.min_x < lx ? r.min_x : lx;
        ly = r.min_y < ly ? r.min_y : ly;
        hx = r.max_x > hx ? r.max_x : hx;
        hy = r.max_y > hy ? r.max_y : hy;
        outside += qt_outside(qt, r);
        const double rw = qg_extent(r.min_x, r.max_x), rh = qg_extent(r.min_y, r.max_y);
        widths += rw > rh ? rw : rh;
    }
    if (scanned == 0)
        return false;
    *size = widths / (double)scanned;
    const double wx = qg_extent(w.min_x, w.max_x), wy = qg_extent(w.min_y, w.max_y);
    const bool spill = outside * 16 > scanned;
    const bool sparse = qg_extent(lx, hx) * 8 < wx && qg_extent(ly, hy) * 8 < wy;
    if (!spill && !sparse)
        return false;
    if (!sparse) {
        lx = w.min_x < lx ? w.min_x : lx;
        ly = w.min_y < ly ? w.min_y : ly;
        hx = w.max_x > hx ? w.max_x : hx;
        hy = w.max_y > hy ? w.max_y : hy;
        // Growing back inside the configured bounds (the first inserts of a
        // build made the world shrink to them) and filling them: the bounds
        // are the world.
        const qg_rect b = ix->config.bounds;
        if (lx >= b.min_x && ly >= b.min_y && hx <= b.max_x && hy <= b.max_y &&
            !(qg_extent(lx, hx) * 8 < qg_extent(b.min_x, b.max_x) && qg_extent(ly, hy) * 8 < qg_extent(b.min_y, b.max_y))) {
            *out = b;
            return true;
        }
    }
    *out = qt_square_world(lx, ly, hx, hy);
    return true;
}

/// Rebuilds the tree over a new world without allocating: every element
/// starts in the root (one element node each; the old tree held at least as
/// many), then leaves split level by level while the nodes and element
/// nodes the old tree held last, so a shortage leaves the whole tree a
/// little shallow rather than one corner deep and the rest in a pile.
static void qt_rebuild(quadtree *qt, qg_rect world, double size, qg_handle skip, bool grow)
{
    qg_index *ix = &qt->base;
    qt_set_world(qt, world);
    // The larger of the configured and the measured element size.
    const double es = (double)ix->config.element_size > size ? (double)ix->config.element_size : size;
    const int depth = qt_depth_for(qt_world_extent(world), es);
    qt->max_depth = depth < qt->depth_cap ? depth : qt->depth_cap;
    if (memcmp(&world, &ix->config.bounds, sizeof world) == 0)
        qt->max_depth = ix->config.max_depth; // back to the configured tree
    qt->nodes[0] = (qt_node){-1, 0};
    qt->node_high = 1;
    qt->free_block = -1;
    qt->free_blocks = 0;
    qg_enode_pool_reset(&qt->enodes);
    for (qg_handle h = ix->box_high - 1; h >= 0; --h) {
        if (qg_slot_live(ix, h) && h != skip) {
            qt_link(qt, 0, h);
            qt->depths[h] = 0;
        }
    }
    bool short_of_memory = false;
    for (int depth = 0; depth < qt->max_depth; ++depth) {
        qt_cell stack[QT_STACK];
        int top = 0;
        stack[top++] = qt_root;
        while (top > 0) {
            const qt_cell c = stack[--top];
            const qt_node n = qt->nodes[c.node];
            if (n.count != -1) {
                if (c.depth == depth && qt_split_leaf(qt, c, grow) < 0)
                    short_of_memory = true;
            } else if (c.depth < depth) {
                for (int i = 3; i >= 0; --i)
                    stack[top++] = qt_child_cell(c, n.first_child, i);
            }
        }
    }
    qt->resplit = short_of_memory;
}

/// The re-fit check: O(1) unless a sixteenth of the moves since the last
/// scan ended outside the world or the population doubled or halved since
/// it. True when it rebuilt the tree. qg_cleanup calls it with `grow` false
/// (it must not allocate); qg_insert calls it with `grow` true (and `skip`
/// the element being inserted) when the population doubled, so a tree built
/// by inserts alone, then asked for pairs, is fitted and fully split even
/// when the tree it replaces was a pile that held few nodes.
static bool qt_refit(quadtree *qt, qg_handle skip, bool grow)
{
    const int64_t n = qt->base.count;
    if (n == 0 || !(qt->outside_moves * 16 > n || n >= 2 * (int64_t)qt->scan_count || 2 * n <= qt->scan_count))
        return false;
    qt->outside_moves = 0;
    qt->scan_count = (int32_t)n;
    qg_rect world;
    double size;
    // The rebuild needs an element node per element in the root.
    if (!qt_fit(qt, skip, &world, &size) || qt->enodes.capacity < n)
        return false;
    qt_rebuild(qt, world, size, skip, grow);
    return true;
}

static qg_status quadtree_configure(qg_config *config)
{
    if (config->max_depth > QT_BITS)
        return QG_ERR_INVALID;
    if (config->max_depth == 0) {
        int depth = QT_DEFAULT_DEPTH;
        if (config->element_size > 0.0f)
            depth = qt_depth_for(qt_world_extent(config->bounds), config->element_size);
        config->max_depth = depth;
    }
    if (config->leaf_capacity == 0)
        config->leaf_capacity = QT_DEFAULT_LEAF_CAPACITY;
    return QG_OK;
}

static qg_status quadtree_init(qg_index *index)
{
    quadtree *qt = (quadtree *)index;
    const qg_config *config = &index->config;
    qt_set_world(qt, config->bounds);
    qt->max_depth = config->max_depth;
    // A max_depth the user chose stays a bound; a chosen one is re-chosen.
    const int chosen = config->element_size > 0.0f
                           ? qt_depth_for(qt_world_extent(config->bounds), config->element_size)
                           : QT_DEFAULT_DEPTH;
    qt->depth_cap = config->max_depth == chosen ? QT_BITS : config->max_depth;
    qt->leaf_capacity = index->config.leaf_capacity;
    qt->free_block = -1;
    qg_enode_pool_reset(&qt->enodes);
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    if (!qg_txn_reserve(&txn, (void **)&qt->nodes, &qt->node_capacity, sizeof(qt_node), 1))
        return QG_ERR_NOMEM;
    qt->nodes[0] = (qt_node){-1, 0};
    qt->node_high = 1;
    return QG_OK;
}

static void quadtree_destroy(qg_index *index)
{
    quadtree *qt = (quadtree *)index;
    qg_array_free(&index->alloc, (void **)&qt->nodes, &qt->node_capacity, sizeof(qt_node));
    qg_array_free(&index->alloc, (void **)&qt->enodes.data, &qt->enodes.capacity, sizeof(qg_enode));
    qg_array_free(&index->alloc, (void **)&qt->depths, &qt->depth_capacity, sizeof(uint8_t));
}

static qg_status quadtree_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    quadtree *qt = (quadtree *)index;
    if (qt->resplit)
        qt_resplit(qt);
    if (index->count >= 2 * (int64_t)qt->scan_count)
        qt_refit(qt, h, true);
    const qt_ibox b = qt_map_box(qt, box);
    const qt_cell from = qt_descend(qt, qt_root, b);
    qt_iter it;
    qt_cell c;
    int64_t leaves = 0;
    qt_iter_start(&it, from);
    while (qt_next_leaf(qt, &it, b, &c))
        leaves++;
    if (!qg_txn_reserve(txn, (void **)&qt->depths, &qt->depth_capacity, sizeof(uint8_t), (int64_t)h + 1) ||
        !qg_enode_reserve(txn, &qt->enodes, leaves))
        return QG_ERR_NOMEM;

    bool overfull = false;
    int deepest = 0;
    qt_iter_start(&it, from);
    while (qt_next_leaf(qt, &it, b, &c)) {
        qt_link(qt, c.node, h);
        overfull |= qt->nodes[c.node].count > qt->leaf_capacity && c.depth < qt->max_depth;
        deepest = c.depth > deepest ? c.depth : deepest;
    }
    qt->depths[h] = (uint8_t)deepest;
    qt->outside_moves += qt_outside(qt, box);
    if (overfull)
        qt_split_leaves(qt, from, b);
    return QG_OK;
}

static void quadtree_remove(qg_index *index, qg_handle h)
{
    quadtree *qt = (quadtree *)index;
    const qt_ibox b = qt_map_box(qt, index->boxes[h]);
    qt_iter it;
    qt_cell c;
    qt_iter_start(&it, qt_descend(qt, qt_root, b));
    while (qt_next_leaf(qt, &it, b, &c))
        qt_unlink(qt, c.node, h);
}

/// A move that changes leaves. Kept out of line so the common case in
/// quadtree_move stays a few instructions with no register spills.
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static qg_status qt_move_slow(quadtree *qt, qg_txn *txn, qg_handle h, qg_rect box, qt_ibox ob, qt_ibox nb)
{
    qg_index *index = &qt->base;
    // One walk over the union of old and new boxes, from the deepest node that
    // holds both: leaves in both keep their element node, so a move is cheaper
    // than remove + insert, and the walk stays in a small subtree.
    const qt_ibox ub = {ob.x0 < nb.x0 ? ob.x0 : nb.x0, ob.y0 < nb.y0 ? ob.y0 : nb.y0,
                        ob.x1 > nb.x1 ? ob.x1 : nb.x1, ob.y1 > nb.y1 ? ob.y1 : nb.y1};
    const qt_cell from = qt_descend(qt, qt_root, ub);
    qt_iter it;
    qt_cell c;
    // Grow first. Counting the leaves gained needs a walk; skip it when the
    // spare element nodes already cover the most the new box could need.
    const int64_t spare = (int64_t)qt->enodes.capacity - qt->enodes.live;
    if (spare < qt_leaf_bound(qt, nb)) {
        int64_t gained = 0;
        qt_iter_start(&it, from);
        while (qt_next_leaf(qt, &it, ub, &c)) {
            const qt_ibox cb = qt_cell_box(c);
            gained += qt_ibox_overlaps(cb, nb) && !qt_ibox_overlaps(cb, ob);
        }
        if (!qg_enode_reserve(txn, &qt->enodes, gained))
            return QG_ERR_NOMEM;
    }

    index->boxes[h] = box;
    bool overfull = false;
    int deepest = 0;
    qt_iter_start(&it, from);
    while (qt_next_leaf(qt, &it, ub, &c)) {
        const qt_ibox cb = qt_cell_box(c);
        const bool in_old = qt_ibox_overlaps(cb, ob), in_new = qt_ibox_overlaps(cb, nb);
        if (in_old && !in_new) {
            qt_unlink(qt, c.node, h);
        } else if (in_new) {
            if (!in_old) {
                qt_link(qt, c.node, h);
                overfull |= qt->nodes[c.node].count > qt->leaf_capacity && c.depth < qt->max_depth;
            }
            deepest = c.depth > deepest ? c.depth : deepest;
        }
    }
    qt->depths[h] = (uint8_t)deepest;
    if (overfull)
        qt_split_leaves(qt, from, nb);
    return QG_OK;
}

static qg_status quadtree_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    quadtree *qt = (quadtree *)index;
    if (qt->resplit)
        qt_resplit(qt);
    qt->outside_moves += qt_outside(qt, box);
    const qt_ibox nb = qt_map_box(qt, box);
    const qt_ibox ob = qt_map_box(qt, index->boxes[h]);
    if (qt_same_cells(ob, nb, qt->depths[h])) {
        index->boxes[h] = box; // same leaves: no node changes
        return QG_OK;
    }
    return qt_move_slow(qt, txn, h, box, ob, nb);
}

static void quadtree_cleanup(qg_index *index)
{
    quadtree *qt = (quadtree *)index;
    if (qt_refit(qt, -1, false))
        return; // a fresh tree: nothing to collapse
    if (qt->nodes[0].count != -1)
        return;
    // A branch pushed here is examined after its parent, so a parent can only
    // collapse on a later call: one level per call, as in the text.
    int32_t stack[QT_STACK];
    int top = 0;
    stack[top++] = 0;
    while (top > 0) {
        qt_node *n = &qt->nodes[stack[--top]];
        int empty = 0;
        for (int i = 0; i < 4; ++i) {
            const qt_node child = qt->nodes[n->first_child + i];
            if (child.count == 0)
                empty++;
            else if (child.count == -1)
                stack[top++] = n->first_child + i;
        }
        if (empty == 4) {
            qt->nodes[n->first_child].first_child = qt->free_block;
            qt->nodes[n->first_child].count = 0;
            qt->free_block = n->first_child;
            qt->free_blocks++;
            *n = (qt_node){-1, 0};
        }
    }
}

static void quadtree_clear(qg_index *index)
{
    quadtree *qt = (quadtree *)index;
    qt->nodes[0] = (qt_node){-1, 0};
    qt->node_high = 1;
    qt->free_block = -1;
    qt->free_blocks = 0;
    qg_enode_pool_reset(&qt->enodes);
    // Back to the configured world: the next elements may be anywhere.
    qt_set_world(qt, index->config.bounds);
    qt->max_depth = index->config.max_depth;
    qt->resplit = false;
    qt->scan_count = 0;
    qt->outside_moves = 0;
}

static void quadtree_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                           qg_query_stats *stats)
{
    const quadtree *qt = (const quadtree *)index;
    const qg_rect bounds = qt->world;
    const qt_ibox qb = qt_map_box(qt, area);
    qt_iter it;
    qt_cell c;
    qt_iter_start(&it, qt_root);
    while (qt_next_leaf(qt, &it, qb, &c)) {
        stats->nodes_visited++;
        stats->elements_tested += qt->nodes[c.node].count;
        for (int32_t e = qt->nodes[c.node].first_child; e >= 0; e = qt->enodes.data[e].next) {
            const qg_handle h = qt->enodes.data[e].element;
            const qg_rect r = index->boxes[h];
            if (!qg_overlaps(r, area))
                continue;
            // Report in the one leaf holding the top-left corner of the overlap.
            const float px = r.min_x > area.min_x ? r.min_x : area.min_x;
            const float py = r.min_y > area.min_y ? r.min_y : area.min_y;
            if (qt_cell_holds(c, qt_map(px, bounds.min_x, qt->scale_x), qt_map(py, bounds.min_y, qt->scale_y)) &&
                !fn(h, user))
                return;
        }
    }
}

/// True when the pair (a, b), known to overlap, belongs to leaf c: the leaf
/// holding the top-left corner of their overlap.
static inline bool qt_pair_here(const quadtree *qt, qt_cell c, qg_rect a, qg_rect b)
{
    const qg_rect bounds = qt->world;
    const float px = a.min_x > b.min_x ? a.min_x : b.min_x;
    const float py = a.min_y > b.min_y ? a.min_y : b.min_y;
    return qt_cell_holds(c, qt_map(px, bounds.min_x, qt->scale_x), qt_map(py, bounds.min_y, qt->scale_y));
}

#if defined(__GNUC__)
#define QT_PREFETCH(p) __builtin_prefetch(p)
#else
#define QT_PREFETCH(p) ((void)(p))
#endif

/// Leaves gathered per batch in qg_pairs.
#define QT_BATCH 32

/// Pairs among the k elements of one leaf, given their handles; false when
/// the callback asked to stop.
static bool qt_pairs_among(const quadtree *qt, qt_cell c, const qg_handle *ids, int k, qg_pair_fn *fn,
                           void *user)
{
    qg_rect r[QT_GATHER];
    for (int i = 0; i < k; ++i)
        r[i] = qt->base.boxes[ids[i]];
    for (int i = 0; i < k; ++i) {
        const qg_rect a = r[i];
        for (int j = i + 1; j < k; ++j) {
            if (qg_overlaps(a, r[j]) && qt_pair_here(qt, c, a, r[j]) &&
                !qg_report_pair(fn, user, ids[i], ids[j]))
                return false;
        }
    }
    return true;
}

/// Pairs in a leaf too big to gather (only possible at max depth), walked in
/// place.
static bool qt_pairs_big_leaf(const quadtree *qt, qt_cell c, qg_pair_fn *fn, void *user)
{
    const qg_enode *en = qt->enodes.data;
    const qg_rect *boxes = qt->base.boxes;
    for (int32_t e = qt->nodes[c.node].first_child; e >= 0; e = en[e].next) {
        const qg_handle ha = en[e].element;
        const qg_rect a = boxes[ha];
        for (int32_t f = en[e].next; f >= 0; f = en[f].next) {
            const qg_handle hb = en[f].element;
            if (qg_overlaps(a, boxes[hb]) && qt_pair_here(qt, c, a, boxes[hb]) &&
                !qg_report_pair(fn, user, ha, hb))
                return false;
        }
    }
    return true;
}

/// Walks the element lists of a batch of leaves side by side, one link of
/// each per round, prefetching each element's box. A leaf's list is a chain
/// of dependent loads; walking many chains at once lets their cache misses
/// overlap instead of queueing one behind the other.
static void qt_gather_batch(const quadtree *qt, const qt_cell *leaf, int n, qg_handle *ids, int *start)
{
    const qg_enode *en = qt->enodes.data;
    int32_t cursor[QT_BATCH];
    int fill[QT_BATCH];
    start[0] = 0;
    for (int i = 0; i < n; ++i) {
        const qt_node node = qt->nodes[leaf[i].node];
        cursor[i] = node.first_child;
        fill[i] = start[i];
        start[i + 1] = start[i] + node.count;
        QT_PREFETCH(&en[cursor[i]]);
    }
    for (bool active = true; active;) {
        active = false;
        for (int i = 0; i < n; ++i) {
            const int32_t e = cursor[i];
            if (e < 0)
                continue;
            const qg_handle h = en[e].element;
            QT_PREFETCH(&qt->base.boxes[h]);
            ids[fill[i]++] = h;
            cursor[i] = en[e].next;
            if (cursor[i] >= 0)
                QT_PREFETCH(&en[cursor[i]]);
            active = true;
        }
    }
}

static void quadtree_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    const quadtree *qt = (const quadtree *)index;
    const qt_ibox all = {0, 0, QT_SIDE - 1, QT_SIDE - 1};
    qt_iter it;
    qt_cell c;
    qt_cell leaf[QT_BATCH];
    int start[QT_BATCH + 1];
    qg_handle ids[QT_BATCH * QT_GATHER];
    qt_iter_start(&it, qt_root);
    for (bool more = true; more;) {
        // Leaves in tree order, a batch at a time.
        int n = 0;
        while (n < QT_BATCH) {
            if (!qt_next_leaf(qt, &it, all, &c)) {
                more = false;
                break;
            }
            const int64_t k = qt->nodes[c.node].count;
            stats->nodes_visited++;
            stats->elements_tested += k * (k - 1) / 2;
            if (k > QT_GATHER) {
                if (!qt_pairs_big_leaf(qt, c, fn, user))
                    return;
            } else if (k >= 2) {
                leaf[n++] = c;
            }
        }
        qt_gather_batch(qt, leaf, n, ids, start);
        for (int i = 0; i < n; ++i) {
            if (!qt_pairs_among(qt, leaf[i], ids + start[i], start[i + 1] - start[i], fn, user))
                return;
        }
    }
}

/// Calls visit for every node (branches too), depth first.
static void qt_walk(const quadtree *qt, void (*visit)(const quadtree *, qt_cell, void *), void *ctx)
{
    qt_cell stack[QT_STACK];
    int top = 0;
    stack[top++] = (qt_cell){0, 0, 0, 0};
    while (top > 0) {
        const qt_cell c = stack[--top];
        visit(qt, c, ctx);
        const qt_node n = qt->nodes[c.node];
        if (n.count == -1) {
            for (int i = 3; i >= 0; --i)
                stack[top++] = qt_child_cell(c, n.first_child, i);
        }
    }
}

static void qt_stats_visit(const quadtree *qt, qt_cell c, void *ctx)
{
    qg_stats *s = ctx;
    s->nodes++;
    s->leaves += qt->nodes[c.node].count != -1;
    if (c.depth > s->max_depth_reached)
        s->max_depth_reached = c.depth;
}

static void quadtree_stats(const qg_index *index, qg_stats *stats)
{
    qt_walk((const quadtree *)index, qt_stats_visit, stats);
}

typedef struct qt_visit_ctx {
    qg_visit_fn *fn;
    void *user;
} qt_visit_ctx;

static void qt_user_visit(const quadtree *qt, qt_cell c, void *ctx)
{
    const qt_visit_ctx *v = ctx;
    const qg_rect b = qt->world;
    // In double: the world's extent may pass FLT_MAX.
    const double s = (double)(QT_SIDE >> c.depth);
    const double ux = qg_extent(b.min_x, b.max_x) / QT_SIDE, uy = qg_extent(b.min_y, b.max_y) / QT_SIDE;
    const qg_rect r = {qt_to_float(b.min_x + c.x * ux), qt_to_float(b.min_y + c.y * uy),
                       qt_to_float(b.min_x + (c.x + s) * ux), qt_to_float(b.min_y + (c.y + s) * uy)};
    const int32_t count = qt->nodes[c.node].count;
    v->fn(r, c.depth, count < 0 ? 0 : count, v->user);
}

static void quadtree_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    qt_visit_ctx v = {fn, user};
    qt_walk((const quadtree *)index, qt_user_visit, &v);
}

typedef struct qt_check {
    bool ok;
    int64_t branches, enodes_in_leaves;
} qt_check;

static void qt_check_visit(const quadtree *qt, qt_cell c, void *ctx)
{
    qt_check *k = ctx;
    const qt_node n = qt->nodes[c.node];
    if (c.depth > qt->max_depth || c.node >= qt->node_high) {
        k->ok = false;
        return;
    }
    if (n.count == -1) {
        k->branches++;
        if (n.first_child < 1 || n.first_child + 4 > qt->node_high || (n.first_child - 1) % 4 != 0 ||
            c.depth >= qt->max_depth)
            k->ok = false;
        return;
    }
    int32_t len = 0;
    qg_handle seen[QT_GATHER];
    const qt_ibox cell = qt_cell_box(c);
    for (int32_t e = n.first_child; e >= 0 && len <= n.count; e = qt->enodes.data[e].next) {
        if (e >= qt->enodes.high) {
            k->ok = false;
            return;
        }
        const qg_handle h = qt->enodes.data[e].element;
        if (!qg_slot_live(&qt->base, h) || !qt_ibox_overlaps(cell, qt_map_box(qt, qt->base.boxes[h]))) {
            k->ok = false;
            return;
        }
        if (n.count <= QT_GATHER) {
            for (int32_t i = 0; i < len; ++i)
                if (seen[i] == h)
                    k->ok = false; // twice in one leaf
            if (len < QT_GATHER)
                seen[len] = h;
        }
        len++;
    }
    if (len != n.count)
        k->ok = false;
    k->enodes_in_leaves += len;
}

static qg_status quadtree_validate(const qg_index *index, size_t *bytes)
{
    const quadtree *qt = (const quadtree *)index;
    if (qt->node_high < 1 || qt->node_high > qt->node_capacity || (qt->node_high - 1) % 4 != 0)
        return QG_ERR_INVALID;
    qt_check k = {true, 0, 0};
    qt_walk(qt, qt_check_visit, &k);
    if (!k.ok)
        return QG_ERR_INVALID;
    // Every node is either reachable or in a free block, never both.
    int32_t free_blocks = 0;
    for (int32_t b = qt->free_block; b >= 0; b = qt->nodes[b].first_child) {
        if (b < 1 || b + 4 > qt->node_high || (b - 1) % 4 != 0 || ++free_blocks > qt->free_blocks)
            return QG_ERR_INVALID;
    }
    if (free_blocks != qt->free_blocks || 1 + 4 * k.branches + 4 * (int64_t)free_blocks != qt->node_high)
        return QG_ERR_INVALID;
    if (k.enodes_in_leaves != qt->enodes.live || qg_enode_free_count(&qt->enodes) != qt->enodes.high - qt->enodes.live)
        return QG_ERR_INVALID;
    // Every live element is in exactly the leaves its box overlaps (the sum
    // matches the element nodes found above), none deeper than its depth.
    int64_t expected = 0;
    for (qg_handle h = 0; h < index->box_high; ++h) {
        if (!qg_slot_live(index, h))
            continue;
        if (h >= qt->depth_capacity || qt->depths[h] > qt->max_depth)
            return QG_ERR_INVALID;
        const qt_ibox b = qt_map_box(qt, index->boxes[h]);
        qt_iter it;
        qt_cell leaf;
        qt_iter_start(&it, qt_root);
        while (qt_next_leaf(qt, &it, b, &leaf)) {
            if (leaf.depth > qt->depths[h])
                return QG_ERR_INVALID;
            expected++;
        }
    }
    if (expected != qt->enodes.live)
        return QG_ERR_INVALID;
    *bytes += (size_t)qt->node_capacity * sizeof(qt_node) + (size_t)qt->enodes.capacity * sizeof(qg_enode) +
              (size_t)qt->depth_capacity * sizeof(uint8_t);
    return QG_OK;
}

const qg_kind_class qg_quadtree_class = {
    .kind = QG_QUADTREE,
    .size = sizeof(quadtree),
    .configure = quadtree_configure,
    .init = quadtree_init,
    .destroy = quadtree_destroy,
    .insert = quadtree_insert,
    .remove = quadtree_remove,
    .move = quadtree_move,
    .cleanup = quadtree_cleanup,
    .clear = quadtree_clear,
    .query = quadtree_query,
    .pairs = quadtree_pairs,
    .stats = quadtree_stats,
    .visit = quadtree_visit,
    .validate = quadtree_validate,
};
