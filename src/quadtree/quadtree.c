// SPDX-License-Identifier: MIT
// QG_QUADTREE: the tight quadtree (docs/kinds.md).
// - Learning (tune.c): from qg_default_config it learns
//   element_size (the median of the elements' larger sides), which sets
//   max_depth as a given one would (smallest cell a little over it), and its
//   world (their bounding box; the re-fits below keep following it). A re-tune
//   rebuilds the tree when the median moved 2x from the one in force.
//
// - A node is 8 bytes: first_child (a branch's first child, or a leaf's first
//   element block) and count (-1 for a branch). Only the root box is stored;
//   child boxes are computed during traversal with shifts on integer
//   coordinates. Boxes are mapped to integers conservatively (floor, clamped),
//   and the final overlap test uses the stored float box, so results are exact.
// - The 4 children of a branch are contiguous and are freed and reclaimed as
//   one block of 4 through a free list.
// - An element is stored once (the base's box array); every leaf its box
//   overlaps holds its handle. A leaf's handles lie in a chain of 32-byte
//   blocks of 7 (a free-listed pool): the head block holds the odd ones,
//   every later block is full, so a leaf of up to 7 elements is one block.
//   Adding appends to the head block (a new head when it is full); taking
//   out moves the head's last handle into the hole and gives an emptied
//   head back. The order of handles in a leaf means nothing.
// - Removal leaves empty leaves in place; qg_cleanup collapses a branch whose
//   4 children are leaves holding at most leaf_capacity elements in all
//   (empty ones included), one level per call (deferred cleanup). Merging
//   the under-full branches, not only the empty ones, is what keeps an aged
//   tree the size of a fresh one: agents that crowd in split leaves, agents
//   that spread out leave them split (40% more nodes after 300
//   frames of `agents`, all walked by every qg_pairs).
// - Staying fresh. With one element node per handle in a linked
//   list, what aged was the order of the nodes: freed and reused in any
//   order, they scattered a leaf's list over the pool, so pairs and moves
//   walked a chain of dependent cache misses per leaf; keeping them in
//   order took a re-lay of the whole pool every ~20 frames at 1,000,000,
//   a frame of hundreds of ms. Blocks keep each leaf's handles together by
//   construction: reading a leaf is one or two cache misses however the
//   pool is ordered, so nothing is re-laid, cleanup costs the merge walk
//   only (no spike) and an aged tree runs as fast as a fresh one. The
//   blocks of a batch of leaves are requested together in qg_pairs, so
//   their misses overlap. Blocks are private: handles, boxes and answers
//   do not change.
// - Each element remembers one byte: the depth of the deepest leaf it is in.
//   Leaves no deeper than that are unions of cells of that depth, so a move
//   whose box covers the same cells of that depth stays in exactly the same
//   leaves and touches no node at all ("if it's still encompassed entirely in
//   that leaf node, we don't even need to work our way back up again from the
//   root"), whether the element is in one leaf or several. Other moves walk
//   only the subtree of the deepest node holding the old and new boxes.
// - Pairs walk the leaves in tree order and report a pair only in the leaf
//   that holds the top-left corner of the two boxes' overlap, so each pair is
//   reported once without a visited set. Within a leaf, a box is tested
//   against 4 others at once (SSE2), so a full leaf of 21 costs few
//   branches.
// - Leaves hold 21 elements before they split by default (three full
//   blocks), not the 8 of the linked-list tree: a leaf that costs a block
//   or three to read may be larger, and the shallower tree sends fewer
//   moves down the slow path (agents at 1,000,000 about 40% faster; the
//   queries no slower).
// - The configured bounds are a hint. The tree maps its own world box, which
//   starts as the bounds and is re-fitted in qg_cleanup to the elements when
//   a sixteenth of them lie outside it (the new world takes in the old one,
//   half as wide again, so a spreading population re-fits a logarithmic
//   number of times) or when they fill less than an eighth of it on both
//   axes (bounds [-3e38, 3e38] around agents in [0, 5000]). The check costs
//   four comparisons per insert or move: cleanup scans the boxes only when
//   a sixteenth of the moves since the last scan ended outside the world, or
//   the population doubled or halved since it. A re-fit rebuilds the tree in
//   the memory the old one held (the root needs a block per 7 elements, and
//   the old tree, each element in a leaf, held at least that), splitting level by level while nodes are
//   there; leaves left over-full are split by the next insert or move, which
//   may allocate. With element_size given, max_depth follows the new world.
//   A world is square in world units (cells as wide as tall): its mapping to
//   integers is computed in double, so any finite bounds work.
// - Ray casts and nearest searches walk the tree themselves,
//   depth first with an explicit stack, children near first (by the
//   segment's entry parameter, by distance2), skipping a node whose region
//   the segment misses or enters past the current max_t, or whose distance2
//   passes the k-th best (strictly: ties are still entered). A node's region
//   is its cell turned back into world units, border sides infinite (the
//   mapping clamps outside elements there) and inner sides pushed out by a
//   hair for rounding (qg_tree_region), so it holds every point the mapping
//   sends into the cell. An element listed in several leaves is reported by
//   one without a visited set: the leaf holding P, its hit point clamped
//   into its box, which the mapping sends into the box's integer range (so
//   that leaf lists it) and which lies on the segment to within the hair
//   (so the walk reaches that leaf, and its ancestors, while the element is
//   still a hit). Nearest is exact the same way: the point of an element's
//   box nearest the query lies in a leaf that lists it, whose region (and
//   its ancestors') is no farther. Nearest offers an element from every
//   leaf that lists it: the heap takes it once.
// - qg_insert_many inserts in the Morton order of the boxes' min corners
//   (one radix sort), so consecutive descents share their nodes in cache:
//   a bulk build of 1,000,000 boxes takes about three quarters of the time.
// - qg_move_many on several workers: the workers classify the
//   moves, store the boxes of those that keep their leaves, and run the
//   others (7% of an `agents` frame at 1,000,000) by subtree: a move's
//   bucket is the deepest node of depth 4, 3 or 2 whose cell holds its old
//   and new boxes, found by arithmetic in the classify pass (the tree's top
//   levels are read once per batch). The buckets of one depth are disjoint
//   subtrees, so they run at once, depth 4 first (95% of the moves); each
//   takes element blocks from its own stash, which keeps the blocks its
//   moves give up and is topped up from the pool under a lock, so the
//   workers rarely meet. A bucket the pool cannot serve stops; this thread
//   finishes it, and runs the few moves no bucket holds, allocating as any
//   move does; QG_ERR_NOMEM there undoes every move of the call, last
//   first, each bucket's within its own stash (which holds every block it
//   ever took, so an undo cannot run short). Splits wait until all moves
//   are done (the branches must not change while buckets run). On one
//   thread the same moves run in batch order, undone in reverse on
//   QG_ERR_NOMEM. Left serial: those splits and qg_cleanup's merge walk; 2
//   threads gave 1.8-1.9x at 1,000,000 (README).
#include "../tree_common.h"
#include "../kind.h"

#include <stdatomic.h>
#include <string.h>

#define QT_BITS QG_TREE_BITS
#define QT_SIDE QG_TREE_SIDE
#define QT_DEFAULT_DEPTH 8
/// Three full blocks of 7 handles. With a leaf's handles in one or a few
/// blocks, a larger leaf costs little to read, and a shallower tree with
/// larger cells sends fewer moves down the slow path (a descent whose last
/// levels miss the cache, then a block read per leaf left or entered).
/// Measured against 8 (the linked-list tree's value): agents 1,000,000
/// 99 -> 61 ms, 100,000 6.4 -> 5.0 ms; static, rays, knn and level as fast or
/// faster at both sizes.
#define QT_DEFAULT_LEAF_CAPACITY (3 * QT_SLOTS)
/// A leaf's elements are gathered into arrays of this size on the C stack
/// for the pair loop; larger leaves (only possible at max depth) are walked
/// in place.
#define QT_GATHER QG_LANES
#define QT_STACK QG_TREE_STACK

typedef struct qt_node {
    int32_t first_child; ///< branch: first of 4 children; leaf: first block of its elements, -1 if none
    int32_t count;       ///< leaf: elements in it; branch: -1
} qt_node;
_Static_assert(sizeof(qt_node) == 8, "a quadtree node is 8 bytes");

/// Handles per element block.
#define QT_SLOTS 7

/// A leaf's elements lie in a chain of blocks of QT_SLOTS handles: the first
/// (head) block holds qt_head_fill(count) of them, every later one is full.
/// A leaf of up to 7 elements is one 32-byte block, so reading its list is
/// one cache miss instead of a chain of dependent ones, and it stays so
/// however the pool ages (no re-lay needed).
typedef struct qt_block {
    int32_t next;              ///< next block of the leaf (-1 ends it); free: next free block
    qg_handle h[QT_SLOTS];
} qt_block;
_Static_assert(sizeof(qt_block) == 32, "an element block is 32 bytes");

/// A free-listed array of element blocks.
typedef struct qt_blocks {
    qt_block *data;
    int32_t capacity;
    int32_t high;      ///< blocks ever used: [0, high)
    int32_t free_head; ///< first free block below high, -1 if none
    int32_t live;      ///< blocks in use
} qt_blocks;

typedef qg_tree_ibox qt_ibox;
typedef qg_tree_cell qt_cell;

typedef struct quadtree {
    qg_index base;
    qt_node *nodes;
    int32_t node_capacity;
    int32_t node_high;  ///< nodes ever used: [0, node_high)
    int32_t free_block; ///< first node of the first free block of 4, -1 if none
    int32_t free_blocks;
    qt_blocks blocks;
    uint8_t *depths; ///< per element: depth of the deepest leaf it is in, or more
    int32_t depth_capacity;
    qg_tree_world world;
    int32_t max_depth, leaf_capacity;
    int32_t depth_cap; ///< a re-fit's max_depth: the configured one if the user chose it, else QT_BITS
    bool resplit;    ///< a re-fit left over-full leaves: the next insert or move splits them
    /// A batch with static elements is running (quadtree_batch_mark): no
    /// split or re-fit until it ends (QT_HOLD_BATCH), and its undo's moves
    /// need no reservation (QT_HOLD_UNDO).
    uint8_t hold;
    uint8_t held; ///< what the hold put off: QT_HELD_SPLIT, QT_HELD_UPKEEP
} quadtree;

#define QT_HOLD_BATCH 1
#define QT_HOLD_UNDO 2
/// A held insert or move over-filled a leaf.
#define QT_HELD_SPLIT 1
/// A held insert put off its upkeep (qt_upkeep), or a held move a resplit.
#define QT_HELD_UPKEEP 2

/// Handles in the head block of a leaf holding `count` elements (0 for none).
static inline int32_t qt_head_fill(int32_t count)
{
    return count > 0 ? (count - 1) % QT_SLOTS + 1 : 0;
}

/// Blocks a leaf of `count` elements holds.
static inline int64_t qt_blocks_for(int64_t count)
{
    return (count + QT_SLOTS - 1) / QT_SLOTS;
}

static inline void qt_blocks_reset(qt_blocks *p)
{
    p->high = 0;
    p->free_head = -1;
    p->live = 0;
}

/// Makes sure `extra` blocks can be taken without allocating.
static inline bool qt_blocks_reserve(qg_txn *txn, qt_blocks *p, int64_t extra)
{
    if (extra <= (int64_t)p->capacity - p->live)
        return true;
    const int64_t spare = (int64_t)p->high - p->live; // free-listed blocks
    return qg_txn_reserve(txn, (void **)&p->data, &p->capacity, sizeof(qt_block), (int64_t)p->high + (extra - spare));
}

/// Takes a block; the caller reserved it first.
static inline int32_t qt_block_take(qt_blocks *p)
{
    int32_t i;
    if (p->free_head >= 0) {
        i = p->free_head;
        p->free_head = p->data[i].next;
    } else {
        i = p->high++;
    }
    p->live++;
    return i;
}

/// Gives a block back to the free list.
static inline void qt_block_give(qt_blocks *p, int32_t i)
{
    p->data[i].next = p->free_head;
    p->free_head = i;
    p->live--;
}

/// Iterates the handles of leaf node `n`: block `b_`, `fill_` handles in it.
#define QT_FOR_BLOCKS(qt, n, b_, fill_)                                                                  \
    for (int32_t b_ = (n).first_child, fill_ = qt_head_fill((n).count); b_ >= 0;                       \
         b_ = (qt)->blocks.data[b_].next, fill_ = QT_SLOTS)

static inline qt_ibox qt_map_box(const quadtree *qt, qg_rect r)
{
    return qg_tree_map_box(&qt->world, r, QT_SIDE);
}

/// The shared walks' view of a node: its first child, -1 for a leaf.
static int32_t qt_children(const void *tree, int32_t node)
{
    const qt_node n = ((const quadtree *)tree)->nodes[node];
    return n.count == -1 ? n.first_child : -1;
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

/// True when the world point (px, py) maps into cell c: the one leaf that
/// reports a query answer or a pair, the one holding their overlap's
/// top-left corner.
static inline bool qt_corner_here(const quadtree *qt, qt_cell c, float px, float py)
{
    const qg_tree_world *w = &qt->world;
    return qt_cell_holds(c, qg_tree_map(px, w->box.min_x, w->scale_x, QT_SIDE),
                         qg_tree_map(py, w->box.min_y, w->scale_y, QT_SIDE));
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

/// The deepest node under `c` whose cell contains all of b (b inside c). The
/// deepest level that can hold b is read off the highest bit in which b's
/// corners differ, so the walk down only follows coordinate bits.
static qt_cell qt_descend(const quadtree *qt, qt_cell c, qt_ibox b)
{
    const int stop = QT_BITS - qg_tree_spread(b);
    while (c.depth < stop) {
        const qt_node n = qt->nodes[c.node];
        if (n.count != -1)
            break;
        const int shift = QT_BITS - 1 - c.depth;
        const int i = ((b.x0 >> shift) & 1) | ((b.y0 >> shift) & 1) << 1;
        c = qg_tree_child_cell(c, n.first_child, i);
    }
    return c;
}

/// At most how many leaves b can overlap: the max-depth cells it overlaps.
static inline int64_t qt_leaf_bound(const quadtree *qt, qt_ibox b)
{
    const int shift = QT_BITS - qt->max_depth;
    return (int64_t)((b.x1 >> shift) - (b.x0 >> shift) + 1) * ((b.y1 >> shift) - (b.y0 >> shift) + 1);
}

/// A parallel batch's private list of free blocks (one per bucket): what its
/// moves give back and take first, so the workers rarely share the pool.
/// A chain through the blocks' `next`, with its tail, so it goes back to the
/// pool in one splice.
typedef struct qt_stash {
    int32_t head, tail, count;
} qt_stash;

/// Takes a block for a link: from the pool, or (a parallel batch) from the
/// stash its caller made sure holds enough.
static inline int32_t qt_take(quadtree *qt, qt_stash *stash)
{
    if (stash == NULL)
        return qt_block_take(&qt->blocks);
    const int32_t b = stash->head;
    stash->head = qt->blocks.data[b].next;
    if (--stash->count == 0)
        stash->tail = -1;
    return b;
}

/// Gives a block back: to the pool, or to the stash.
static inline void qt_give(quadtree *qt, qt_stash *stash, int32_t b)
{
    if (stash == NULL) {
        qt_block_give(&qt->blocks, b);
        return;
    }
    qt->blocks.data[b].next = stash->head;
    if (stash->count++ == 0)
        stash->tail = b;
    stash->head = b;
}

/// Adds h to leaf `node`: into its head block, or a new head block when that
/// one is full (the caller reserved it; `stash` as in qt_take).
static inline void qt_link_in(quadtree *qt, int32_t node, qg_handle h, qt_stash *stash)
{
    qt_node *n = &qt->nodes[node];
    const int32_t fill = n->count % QT_SLOTS;
    if (fill == 0) {
        const int32_t b = qt_take(qt, stash);
        qt->blocks.data[b].next = n->first_child;
        n->first_child = b;
    }
    qt->blocks.data[n->first_child].h[fill] = h;
    n->count++;
}

static inline void qt_link(quadtree *qt, int32_t node, qg_handle h)
{
    qt_link_in(qt, node, h, NULL);
}

/// Takes h out of leaf `node`: the head block's last handle fills its slot,
/// and an emptied head block goes back (`stash` as in qt_take).
static void qt_unlink_in(quadtree *qt, int32_t node, qg_handle h, qt_stash *stash)
{
    qt_node *n = &qt->nodes[node];
    qt_block *const data = qt->blocks.data;
    const int32_t head = n->first_child, last = qt_head_fill(n->count) - 1;
    QT_FOR_BLOCKS(qt, *n, b, fill) {
        for (int32_t i = 0; i < fill; ++i) {
            if (data[b].h[i] == h) {
                data[b].h[i] = data[head].h[last];
                n->count--;
                if (last == 0) {
                    n->first_child = data[head].next;
                    qt_give(qt, stash, head);
                }
                return;
            }
        }
    }
}

static void qt_unlink(quadtree *qt, int32_t node, qg_handle h)
{
    qt_unlink_in(qt, node, h, NULL);
}

/// Takes apart the next block of a chain a split or merge empties: copies
/// its handles to ids and gives the block back first (so relinking them
/// never needs more blocks than were given), then steps *b to the next
/// block, all of whose QT_SLOTS slots are full. Returns how many handles.
static inline int32_t qt_chain_pop(quadtree *qt, int32_t *b, int32_t *fill, qg_handle ids[QT_SLOTS])
{
    const int32_t m = *fill;
    for (int32_t i = 0; i < m; ++i)
        ids[i] = qt->blocks.data[*b].h[i];
    const int32_t next = qt->blocks.data[*b].next;
    qt_block_give(&qt->blocks, *b);
    *b = next;
    *fill = QT_SLOTS;
    return m;
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
    // Of the others, those that straddle the cell's midlines go to 2 or 4
    // children: when nearly all do (many boxes whose edges run through the
    // same thin strip of cells: 2^100-wide boxes with corners near 0 among
    // 2^-100-wide ones), a split copies the leaf instead of dividing it, and
    // the children split again the same way, down to max depth (measured:
    // 390 boxes in 185,000 leaves, 112 MB).
    const qt_ibox cell = qt_cell_box(c);
    int32_t partial = 0, straddle = 0;
    int64_t per_child[4] = {0, 0, 0, 0};
    QT_FOR_BLOCKS(qt, *n, b, fill) {
        for (int32_t i = 0; i < fill; ++i) {
            const qt_ibox e = qt_map_box(qt, qt->base.boxes[qt->blocks.data[b].h[i]]);
            const unsigned mask = qg_tree_child_mask(c, e);
            if (!(e.x0 <= cell.x0 && e.y0 <= cell.y0 && e.x1 >= cell.x1 && e.y1 >= cell.y1)) {
                partial++;
                straddle += (mask & (mask - 1)) != 0;
            }
            for (int k = 0; k < 4; ++k)
                per_child[k] += mask >> k & 1;
        }
    }
    if (partial <= qt->leaf_capacity || (int64_t)straddle * 8 > (int64_t)partial * 7)
        return 0;
    // The leaf's blocks go back one by one (head first, so every later one is
    // full) before their handles are linked into the children, so the pool
    // peaks at most 3 blocks above the end's count (each child's partly
    // filled head block): this bound is what must be spare.
    const int64_t held = qt_blocks_for(n->count);
    int64_t need = 3 - held;
    for (int k = 0; k < 4; ++k)
        need += qt_blocks_for(per_child[k]);

    if (grow) {
        qg_txn txn;
        qg_txn_begin(&txn, &qt->base.alloc);
        if ((qt->free_block < 0 && !qg_txn_reserve(&txn, (void **)&qt->nodes, &qt->node_capacity,
                                                   sizeof(qt_node), (int64_t)qt->node_high + 4)) ||
            !qt_blocks_reserve(&txn, &qt->blocks, need)) {
            qg_txn_rollback(&txn);
            return -1;
        }
    } else if ((qt->free_block < 0 && qt->node_high + 4 > qt->node_capacity) ||
               need > (int64_t)qt->blocks.capacity - qt->blocks.live) {
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
    int32_t b = n->first_child, fill = qt_head_fill(n->count);
    n->first_child = fc;
    n->count = -1;
    while (b >= 0) {
        qg_handle ids[QT_SLOTS];
        const int32_t m = qt_chain_pop(qt, &b, &fill, ids);
        for (int32_t i = 0; i < m; ++i) {
            const qg_handle h = ids[i];
            const unsigned mask = qg_tree_child_mask(c, qt_map_box(qt, qt->base.boxes[h]));
            for (int k = 0; k < 4; ++k) {
                if (mask >> k & 1)
                    qt_link(qt, fc + k, h);
            }
            if (qt->depths[h] < c.depth + 1)
                qt->depths[h] = (uint8_t)(c.depth + 1);
        }
    }
    return 1;
}

/// qt_split_leaf as the shared level-by-level split calls it.
static int qt_split_any(void *tree, qt_cell c, bool grow)
{
    return qt_split_leaf(tree, c, grow);
}

/// Splits leaf c if that separates its elements, then its children the same
/// way (allocating as needed).
static void qt_try_split(quadtree *qt, qt_cell c)
{
    if (qt_split_leaf(qt, c, true) != 1)
        return;
    const int32_t fc = qt->nodes[c.node].first_child;
    for (int i = 0; i < 4; ++i)
        qt_try_split(qt, qg_tree_child_cell(c, fc, i));
}

/// True when an insert or move that left `count` elements in a leaf should
/// try to split it. A leaf past twice the capacity is one whose split was
/// refused (it would not separate its elements) or could not grow: trying
/// again at every insert or move would read the whole leaf each time, so it
/// is tried again only as its count reaches a power of two (the reads add
/// up to about one per element that came in).
static inline bool qt_split_due(int32_t count, int32_t capacity)
{
    return count > capacity && (count <= 2 * capacity || (count & (count - 1)) == 0);
}

/// Splits the over-full leaves under `from` that b overlaps (`all`: every
/// one, else those qt_split_due names).
static void qt_split_leaves(quadtree *qt, qt_cell from, qt_ibox b, bool all)
{
    qt_iter it;
    qt_cell c;
    qt_iter_start(&it, from);
    while (qt_next_leaf(qt, &it, b, &c)) {
        // Splitting c does not disturb the iteration: c is already popped and
        // the stack holds only nodes outside c.
        const int32_t count = qt->nodes[c.node].count;
        if (c.depth < qt->max_depth &&
            (all ? count > qt->leaf_capacity : qt_split_due(count, qt->leaf_capacity)))
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
    qt_split_leaves(qt, qt_root, (qt_ibox){0, 0, QT_SIDE - 1, QT_SIDE - 1}, true);
}

/// Rebuilds the tree over a new world without allocating: every element
/// starts in the root (a block per 7 elements; the old tree held at least as
/// many), then leaves split level by level while the nodes and blocks the
/// old tree held last, so a shortage leaves the whole tree a
/// little shallow rather than one corner deep and the rest in a pile.
static void qt_rebuild(quadtree *qt, qg_rect world, double size, qg_handle skip, bool grow)
{
    qg_index *ix = &qt->base;
    qg_tree_world_set(&qt->world, world, QT_SIDE);
    qt->max_depth = qg_tree_refit_depth(&ix->config, world, size, qt->depth_cap);
    qt->nodes[0] = (qt_node){-1, 0};
    qt->node_high = 1;
    qt->free_block = -1;
    qt->free_blocks = 0;
    qt_blocks_reset(&qt->blocks);
    for (qg_handle h = ix->box_high - 1; h >= 0; --h) {
        if (qg_slot_live(ix, h) && h != skip) {
            qt_link(qt, 0, h);
            qt->depths[h] = 0;
        }
    }
    qt->resplit = qg_tree_split_levels(qt, qt->max_depth, qt_children, qt_split_any, grow) < 0;
}

/// The re-fit check: O(1) unless a sixteenth of the moves since the last
/// scan ended outside the world or the population doubled or halved since
/// it. True when it rebuilt the tree. qg_cleanup calls it with `grow` false
/// (it must not allocate); qg_insert calls it with `grow` true (and `skip`
/// the element being inserted) when the population doubled, so a tree built
/// by inserts alone, then asked for pairs, is fitted and fully split even
/// when the tree it replaces was a pile that held few nodes.
static bool qt_refit(quadtree *qt, qg_handle skip, bool grow, int64_t n)
{
    if (!qg_tree_scan_due(&qt->world, n))
        return false;
    qg_rect world;
    double size;
    // The rebuild needs the blocks of all elements in the root.
    if (!qg_tree_fit(&qt->world, &qt->base, skip, true, &world, &size) || qt->blocks.capacity < qt_blocks_for(n))
        return false;
    qt_rebuild(qt, world, size, skip, grow);
    return true;
}

static qg_status quadtree_configure(qg_config *config)
{
    if (config->max_depth > QT_BITS)
        return QG_ERR_INVALID;
    if (config->max_depth == 0)
        config->max_depth = qg_tree_chosen_depth(config, QT_DEFAULT_DEPTH, QT_BITS);
    if (config->leaf_capacity == 0)
        config->leaf_capacity = QT_DEFAULT_LEAF_CAPACITY;
    return QG_OK;
}

static qg_status quadtree_init(qg_index *index)
{
    quadtree *qt = (quadtree *)index;
    const qg_config *config = &index->config;
    qg_tree_world_set(&qt->world, config->bounds, QT_SIDE);
    qt->max_depth = config->max_depth;
    // A max_depth the user chose stays a bound; a chosen one is re-chosen.
    const int chosen = qg_tree_chosen_depth(config, QT_DEFAULT_DEPTH, QT_BITS);
    qt->depth_cap = config->max_depth == chosen ? QT_BITS : config->max_depth;
    qt->leaf_capacity = index->config.leaf_capacity;
    qt->free_block = -1;
    qt_blocks_reset(&qt->blocks);
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
    qg_array_free(&index->alloc, (void **)&qt->blocks.data, &qt->blocks.capacity, sizeof(qt_block));
    qg_array_free(&index->alloc, (void **)&qt->depths, &qt->depth_capacity, sizeof(uint8_t));
}

/// The upkeep an insert or move leaves for after its own work succeeded, so
/// that a call failing with QG_ERR_NOMEM finds the tree (and the bytes it
/// holds) exactly as it was: the splits a re-fit in qg_cleanup could not
/// make (they allocate through their own transactions; a failure only
/// leaves a leaf fuller), and the re-fit an insert makes when the
/// population (`count`, the new element included) doubled.
static void qt_upkeep(quadtree *qt, int64_t count)
{
    if (qt->resplit)
        qt_resplit(qt);
    if (qg_tree_grown(&qt->world, count))
        qt_refit(qt, -1, true, count);
}

/// Links h (box `box`) into every leaf its box overlaps and splits the
/// leaves it filled: an insert without the re-fit check.
static qg_status qt_insert_one(quadtree *qt, qg_txn *txn, qg_handle h, qg_rect box)
{
    const qt_ibox b = qt_map_box(qt, box);
    const qt_cell from = qt_descend(qt, qt_root, b);
    qt_iter it;
    qt_cell c;
    int64_t leaves = 0;
    qt_iter_start(&it, from);
    while (qt_next_leaf(qt, &it, b, &c))
        leaves++;
    if (!qg_txn_reserve(txn, (void **)&qt->depths, &qt->depth_capacity, sizeof(uint8_t), (int64_t)h + 1) ||
        !qt_blocks_reserve(txn, &qt->blocks, leaves))
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
    qg_tree_note(&qt->world, box);
    if (overfull && qt->hold)
        qt->held |= QT_HELD_SPLIT;
    else if (overfull)
        qt_split_leaves(qt, from, b, false);
    return QG_OK;
}

static qg_status quadtree_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    quadtree *qt = (quadtree *)index;
    const qg_status s = qt_insert_one(qt, txn, h, box);
    if (s == QG_OK && qt->hold)
        qt->held |= QT_HELD_UPKEEP;
    else if (s == QG_OK)
        qt_upkeep(qt, index->count + 1);
    return s;
}

/// qg_insert_many: one re-fit check for the whole batch (a re-fit rebuilds
/// from every live slot, the new ones included, and is then the whole
/// job), else one sort and the inserts in the order of the boxes' min
/// corners' cells, so each descent walks the nodes the last one left in the
/// cache (their loads started well ahead: in that order handles, boxes and
/// depths lie anywhere). All or nothing, and no trace: every block the
/// batch links into the leaves it finds is counted and reserved before
/// anything changes (a leaf's links need a new block each QT_SLOTS), then
/// every element is linked, then the leaves it over-filled split, each
/// split allocating on its own as any split does (a refused one leaves the
/// leaf fuller). Without memory for the sort's scratch the boxes go in the
/// order given.
static qg_status quadtree_insert_many(qg_index *index, qg_txn *txn, const qg_handle *handles, int32_t n)
{
    quadtree *qt = (quadtree *)index;
    qg_handle top = 0;
    for (int32_t i = 0; i < n; ++i)
        top = handles[i] > top ? handles[i] : top;
    if (!qg_txn_reserve(txn, (void **)&qt->depths, &qt->depth_capacity, sizeof(uint8_t), (int64_t)top + 1))
        return QG_ERR_NOMEM;
    const int64_t count = (int64_t)index->count + n;
    if (qg_tree_grown(&qt->world, count) && qt_refit(qt, -1, true, count))
        return QG_OK;
    // The links each leaf takes, to count the blocks they need.
    const size_t added_bytes = (size_t)qt->node_high * sizeof(int32_t);
    int32_t *const added = qg_mem_alloc(&index->alloc, added_bytes);
    if (added == NULL)
        return QG_ERR_NOMEM;
    memset(added, 0, added_bytes);
    const size_t bytes = (size_t)n * sizeof(uint64_t);
    uint64_t *const block = n > 1 ? qg_mem_alloc(&index->alloc, 2 * bytes) : NULL;
    uint64_t *key = block;
    if (key != NULL) {
        // Keys: the min corner's cell (30 bits of Morton order) above the
        // position in `handles`.
        for (int32_t i = 0; i < n; ++i) {
            const qt_ibox b = qt_map_box(qt, index->boxes[handles[i]]);
            key[i] = (uint64_t)qg_tree_morton((uint32_t)b.x0, (uint32_t)b.y0) << 32 | (uint32_t)i;
        }
        key = qg_tree_sort_morton(key, key + n, n);
    }
    int64_t need = 0;
    for (int32_t i = 0; i < n; ++i) {
        const qt_ibox b = qt_map_box(qt, index->boxes[handles[i]]);
        qt_iter it;
        qt_cell c;
        qt_iter_start(&it, qt_descend(qt, qt_root, b));
        while (qt_next_leaf(qt, &it, b, &c))
            need += (qt->nodes[c.node].count + added[c.node]++) % QT_SLOTS == 0;
    }
    qg_mem_free(&index->alloc, added, added_bytes);
    if (!qt_blocks_reserve(txn, &qt->blocks, need)) {
        if (block != NULL)
            qg_mem_free(&index->alloc, block, 2 * bytes);
        return QG_ERR_NOMEM;
    }
    // Nothing allocates from here on but the splits, which may fail. The
    // sort's other half notes which elements over-filled a leaf that may
    // split (without it, every element looks).
    uint64_t *const filled = key == NULL ? NULL : key == block ? block + n : block;
    for (int32_t done = 0; done < n; ++done) {
        const int32_t i = key != NULL ? (int32_t)(uint32_t)key[done] : done;
#if defined(__GNUC__)
        if (key != NULL && done + 16 < n)
            __builtin_prefetch(&handles[(uint32_t)key[done + 16]]);
        if (key != NULL && done + 8 < n) {
            const qg_handle a = handles[(uint32_t)key[done + 8]];
            __builtin_prefetch(&index->boxes[a]);
            __builtin_prefetch(&qt->depths[a], 1);
        }
#endif
        const qg_handle h = handles[i];
        const qg_rect box = index->boxes[h];
        const qt_ibox b = qt_map_box(qt, box);
        qt_iter it;
        qt_cell c;
        int deepest = 0;
        bool overfull = false;
        qt_iter_start(&it, qt_descend(qt, qt_root, b));
        while (qt_next_leaf(qt, &it, b, &c)) {
            qt_link(qt, c.node, h);
            overfull |= qt->nodes[c.node].count > qt->leaf_capacity && c.depth < qt->max_depth;
            deepest = c.depth > deepest ? c.depth : deepest;
        }
        qt->depths[h] = (uint8_t)deepest;
        qg_tree_note(&qt->world, box);
        if (filled != NULL)
            filled[done] = overfull;
    }
    if (qt->resplit) {
        qt_resplit(qt);
    } else {
        for (int32_t done = 0; done < n; ++done) {
            if (filled != NULL && !filled[done])
                continue;
            const qg_handle h = handles[key != NULL ? (int32_t)(uint32_t)key[done] : done];
            const qt_ibox b = qt_map_box(qt, index->boxes[h]);
            qt_split_leaves(qt, qt_descend(qt, qt_root, b), b, false);
        }
    }
    if (block != NULL)
        qg_mem_free(&index->alloc, block, 2 * bytes);
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
static qg_status qt_move_slow(quadtree *qt, qg_txn *txn, qg_handle h, qg_rect box, qt_ibox ob, qt_ibox nb,
                              bool *defer, qt_stash *stash)
{
    qg_index *index = &qt->base;
    // One walk over the union of old and new boxes, from the deepest node that
    // holds both: leaves in both keep their entry, so a move is cheaper
    // than remove + insert, and the walk stays in a small subtree.
    const qt_ibox ub = {ob.x0 < nb.x0 ? ob.x0 : nb.x0, ob.y0 < nb.y0 ? ob.y0 : nb.y0,
                        ob.x1 > nb.x1 ? ob.x1 : nb.x1, ob.y1 > nb.y1 ? ob.y1 : nb.y1};
    const qt_cell from = qt_descend(qt, qt_root, ub);
    qt_iter it;
    qt_cell c;
    // Grow first (a leaf entered takes at most one block). Counting the
    // leaves gained needs a walk; skip it when the spare blocks already
    // cover the most the new box could need.
    // A bucket's stash already holds what the move may need (and the pool is
    // not this worker's to read).
    // An undo's move back needs none (quadtree_batch_mark).
    if (stash == NULL && qt->hold != QT_HOLD_UNDO &&
        (int64_t)qt->blocks.capacity - qt->blocks.live < qt_leaf_bound(qt, nb)) {
        int64_t gained = 0;
        qt_iter_start(&it, from);
        while (qt_next_leaf(qt, &it, ub, &c)) {
            const qt_ibox cb = qt_cell_box(c);
            gained += qt_ibox_overlaps(cb, nb) && !qt_ibox_overlaps(cb, ob);
        }
        if (!qt_blocks_reserve(txn, &qt->blocks, gained))
            return QG_ERR_NOMEM;
    }

    index->boxes[h] = box;
    // Leaves left first, leaves entered second: a head block the old leaf
    // empties is the one the free list hands out next, so a crossing that
    // needs a new head block reuses it (the pool holds fewer blocks live).
    qt_iter_start(&it, from);
    while (qt_next_leaf(qt, &it, ob, &c)) {
        if (!qt_ibox_overlaps(qt_cell_box(c), nb))
            qt_unlink_in(qt, c.node, h, stash);
    }
    bool overfull = false;
    int deepest = 0;
    qt_iter_start(&it, from);
    while (qt_next_leaf(qt, &it, nb, &c)) {
        if (!qt_ibox_overlaps(qt_cell_box(c), ob)) {
            qt_link_in(qt, c.node, h, stash);
            overfull |= qt->nodes[c.node].count > qt->leaf_capacity && c.depth < qt->max_depth;
        }
        deepest = c.depth > deepest ? c.depth : deepest;
    }
    qt->depths[h] = (uint8_t)deepest;
    if (defer != NULL)
        *defer = overfull; // a batch splits once its moves are done (qt_move_many)
    else if (overfull && qt->hold)
        qt->held |= QT_HELD_SPLIT;
    else if (overfull)
        qt_split_leaves(qt, from, nb, false);
    return QG_OK;
}

static QG_NOINLINE qg_status quadtree_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    quadtree *qt = (quadtree *)index;
    const qg_rect old = index->boxes[h];
    if (qg_tree_same_cells(&qt->world, old, box, QT_SIDE, QT_BITS - qt->depths[h])) {
        index->boxes[h] = box; // same leaves: no node changes
    } else {
        const qg_status s = qt_move_slow(qt, txn, h, box, qt_map_box(qt, old), qt_map_box(qt, box), NULL, NULL);
        if (s != QG_OK)
            return s;
    }
    qg_tree_note(&qt->world, box);
    if (qt->resplit && qt->hold)
        qt->held |= QT_HELD_UPKEEP;
    else if (qt->resplit)
        qt_resplit(qt); // after the move succeeded: see qt_upkeep
    return QG_OK;
}

/* ---- qg_move_many ------------------------------------------------------- */

/// More workers than this run the batch's parallel passes as this many parts.
#define QT_BATCH_PARTS 256

/// The parallel batch runs the moves that change leaves by subtree. A move's
/// bucket is the deepest node of depth 4, 3 or 2 (a level) whose cell holds
/// its old and new boxes. The buckets of one level are disjoint subtrees and
/// run at once on the workers: depth 4 first (95% of an `agents` frame's
/// moves), then 3, then 2. The moves no bucket holds (and large boxes) run
/// on this thread.
#define QT_PAR_DEPTH 4
#define QT_PAR_LEVELS 3
#define QT_PAR_BUCKETS (256 + 64 + 16)
#define QT_PAR_NONE QT_PAR_BUCKETS
/// A move whose new box could enter more leaves than this runs on this
/// thread: a bucket keeps at hand as many blocks as its next move may need.
#define QT_PAR_BOUND 64
/// Blocks a bucket takes from the pool beyond its next move's need, so it
/// comes back for more rarely.
#define QT_STASH_MORE 8
/// A move's key when it keeps its leaves.
#define QT_KEEP 0xFFFF

/// First bucket of each level (depth 4, 3, 2), and the end.
static const int32_t qt_par_first[QT_PAR_LEVELS + 1] = {0, 256, 320, QT_PAR_BUCKETS};

/// The bucket of the level's cell that holds integer point (x, y).
static inline int32_t qt_par_bucket(int level, int32_t x, int32_t y)
{
    const int d = QT_PAR_DEPTH - level, sh = QT_BITS - d;
    return qt_par_first[level] + ((x >> sh) | (y >> sh) << d);
}

/// A move that changes leaves, as the parallel batch runs it.
/// Its boxes are copied here so the buckets read their moves in order
/// rather than from two arrays at random.
typedef struct qt_plan {
    qg_rect old;   ///< its box before the batch (for an undo)
    qg_rect box;   ///< its new box
    qg_handle h;   ///< its element
    int32_t over;  ///< it left a leaf over-full (the split is deferred)
} qt_plan;

/// A batch move's shared state. The parts' counts sit a cache line apart
/// (the workers write them at once).
typedef struct qt_batch {
    quadtree *qt;
    const qg_handle *handles;
    const qg_rect *boxes;
    uint16_t *key; ///< per move: QT_KEEP when it keeps its leaves, else its bucket (one part: 0)
    int32_t n, parts;
    struct {
        int64_t rest, outside;
        uint8_t pad[64 - 2 * sizeof(int64_t)];
    } count[QT_BATCH_PARTS];
    int32_t *cursor; ///< per part, per bucket and none: its moves, then its next plan entry (NULL: one part)
    qt_plan *plan;   ///< the moves that change leaves, by bucket, in batch order within one
    int32_t start[QT_PAR_BUCKETS + 2]; ///< per bucket and none: its first plan entry; the end
    int32_t stop[QT_PAR_BUCKETS];      ///< per bucket: the entry it stopped at (its end when it ran all)
    qt_stash stash[QT_PAR_BUCKETS];
    /// Per bucket: blocks it may still take from the pool in this level. A
    /// share of the pool's spare blocks fixed before the level runs, so
    /// where a bucket stops depends on its own moves, never on which bucket
    /// reached the pool first (and the batch's result never on timing).
    int64_t quota[QT_PAR_BUCKETS];
    uint8_t held[QT_PAR_BUCKETS]; ///< per bucket: the tree has its node
    int level;                    ///< the level the workers run
    atomic_flag pool_lock;        ///< the block pool, while buckets run
    /// The block pool before the batch, and a bit per block below its
    /// high-water mark: an undone batch gives back what its moves grew.
    int32_t block_high, block_capacity;
    uint32_t *used;
} qt_batch;

static void qt_blocks_give_back(quadtree *qt, int32_t high, int32_t capacity, uint32_t *used);

/// Marks the buckets whose nodes the tree has (a node of depth 2 to 4 exists
/// when its parent is a branch).
static void qt_par_held(qt_batch *b)
{
    const quadtree *qt = b->qt;
    memset(b->held, 0, sizeof b->held);
    qt_cell stack[QT_STACK];
    int top = 0;
    stack[top++] = qt_root;
    while (top > 0) {
        const qt_cell c = stack[--top];
        if (c.depth >= QT_PAR_DEPTH - QT_PAR_LEVELS + 1)
            b->held[qt_par_bucket(QT_PAR_DEPTH - c.depth, c.x, c.y)] = 1;
        const qt_node n = qt->nodes[c.node];
        if (c.depth < QT_PAR_DEPTH && n.count == -1)
            for (int i = 0; i < 4; ++i)
                stack[top++] = qg_tree_child_cell(c, n.first_child, i);
    }
}

/// The bucket of a move from ob to nb (QT_PAR_NONE when it has none).
static inline uint16_t qt_par_key(const qt_batch *b, qt_ibox ob, qt_ibox nb)
{
    if (qt_leaf_bound(b->qt, nb) > QT_PAR_BOUND)
        return QT_PAR_NONE;
    const qt_ibox ub = {ob.x0 < nb.x0 ? ob.x0 : nb.x0, ob.y0 < nb.y0 ? ob.y0 : nb.y0,
                        ob.x1 > nb.x1 ? ob.x1 : nb.x1, ob.y1 > nb.y1 ? ob.y1 : nb.y1};
    const int deepest = QT_BITS - qg_tree_spread(ub); // the deepest level whose cells can hold ub
    for (int level = 0; level < QT_PAR_LEVELS; ++level) {
        if (QT_PAR_DEPTH - level <= deepest) {
            const int32_t k = qt_par_bucket(level, ub.x0, ub.y0);
            if (b->held[k])
                return (uint16_t)k;
        }
    }
    return QT_PAR_NONE;
}

/// Classifies part p's moves: those that keep their leaves (the fast path
/// of quadtree_move) and the rest, with their buckets counted when there
/// are several parts. Reads the index only.
static void qt_batch_classify(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    qt_batch *b = context;
    const quadtree *qt = b->qt;
    const qg_rect *old = qt->base.boxes;
    for (int32_t p = begin; p < end; ++p) {
        int32_t *cnt = b->cursor != NULL ? b->cursor + (size_t)p * (QT_PAR_BUCKETS + 1) : NULL;
        if (cnt != NULL)
            memset(cnt, 0, (QT_PAR_BUCKETS + 1) * sizeof(int32_t));
        int64_t i0, i1, rest = 0, outside = 0;
        qg_part_range(b->n, p, b->parts, &i0, &i1);
        for (int64_t i = i0; i < i1; ++i) {
            const qg_handle h = b->handles[i];
            uint16_t k = QT_KEEP;
            if (!qg_tree_same_cells(&qt->world, old[h], b->boxes[i], QT_SIDE, QT_BITS - qt->depths[h])) {
                k = 0;
                if (cnt != NULL)
                    cnt[k = qt_par_key(b, qt_map_box(qt, old[h]), qt_map_box(qt, b->boxes[i]))]++;
                rest++;
            }
            b->key[i] = k;
            outside += qg_tree_outside(&qt->world, b->boxes[i]);
        }
        b->count[p].rest = rest;
        b->count[p].outside = outside;
    }
}

/// Writes part p's moves that change leaves into the plan, at their
/// buckets' places (a counting sort, the parts' cursors made from their
/// counts): the parts are in batch order, so each bucket is too.
static void qt_batch_scatter(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    qt_batch *b = context;
    const qg_rect *boxes = b->qt->base.boxes;
    for (int32_t p = begin; p < end; ++p) {
        int32_t *at = b->cursor + (size_t)p * (QT_PAR_BUCKETS + 1);
        int64_t i0, i1;
        qg_part_range(b->n, p, b->parts, &i0, &i1);
        for (int64_t i = i0; i < i1; ++i) {
            const uint16_t k = b->key[i];
            if (k != QT_KEEP) {
                const qg_handle h = b->handles[i];
                b->plan[at[k]++] = (qt_plan){boxes[h], b->boxes[i], h, 0};
            }
        }
    }
}

/// Stores the boxes of part p's moves that keep their leaves: each writes
/// its own handle's box only.
static void qt_batch_store(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    qt_batch *b = context;
    qg_rect *boxes = b->qt->base.boxes;
    for (int32_t p = begin; p < end; ++p) {
        int64_t i0, i1;
        qg_part_range(b->n, p, b->parts, &i0, &i1);
        for (int64_t i = i0; i < i1; ++i)
            if (b->key[i] == QT_KEEP)
                boxes[b->handles[i]] = b->boxes[i];
    }
}

/// Tops bucket k's stash up from the pool to `need` blocks and a few more,
/// under the pool's lock (the only state the buckets share). False, taking
/// nothing, when its quota cannot give `need`.
static bool qt_stash_fill(qt_batch *b, int32_t k, qt_stash *st, int64_t need)
{
    quadtree *qt = b->qt;
    int64_t want = need - st->count;
    if (want > b->quota[k])
        return false;
    want = want + QT_STASH_MORE <= b->quota[k] ? want + QT_STASH_MORE : want;
    b->quota[k] -= want;
    while (atomic_flag_test_and_set_explicit(&b->pool_lock, memory_order_acquire))
        qv_pause(); // held for a few free-list pops: spin politely
    for (; want > 0; --want)
        qt_give(qt, st, qt_block_take(&qt->blocks));
    atomic_flag_clear_explicit(&b->pool_lock, memory_order_release);
    return true;
}

/// Each bucket of the level about to run gets its share of the pool's
/// spare blocks, in proportion to its moves (the shares sum to at most the
/// spare: the pool never runs short under a bucket).
static void qt_batch_quotas(qt_batch *b)
{
    const quadtree *qt = b->qt;
    const int32_t k0 = qt_par_first[b->level], k1 = qt_par_first[b->level + 1];
    const int64_t spare = (int64_t)qt->blocks.capacity - qt->blocks.live;
    const int64_t moves = b->start[k1] - b->start[k0];
    for (int32_t k = k0; k < k1; ++k)
        b->quota[k] = moves > 0 ? spare * (b->start[k + 1] - b->start[k]) / moves : 0;
}

/// Runs the moves of the current level's buckets [begin, end), each bucket
/// in batch order with blocks from its own stash. Buckets of one level are
/// disjoint subtrees: the nodes, blocks, boxes and depths one writes no
/// other reads. A bucket whose next move could need more blocks than the
/// pool can give stops there (this thread finishes it).
static void qt_batch_buckets(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    qt_batch *b = context;
    quadtree *qt = b->qt;
    for (int32_t j = begin; j < end; ++j) {
        const int32_t k = qt_par_first[b->level] + j;
        qt_stash *st = &b->stash[k];
        const int32_t e1 = b->start[k + 1];
        for (int32_t e = b->start[k]; e < e1; ++e) {
#if defined(__GNUC__)
            // What the move writes outside the subtree lies anywhere.
            if (e + 8 < e1) {
                __builtin_prefetch(&qt->base.boxes[b->plan[e + 8].h], 1);
                __builtin_prefetch(&qt->depths[b->plan[e + 8].h], 1);
            }
#endif
            qt_plan *m = &b->plan[e];
            const qt_ibox nb = qt_map_box(qt, m->box);
            const int64_t need = qt_leaf_bound(qt, nb);
            if (st->count < need && !qt_stash_fill(b, k, st, need)) {
                b->stop[k] = e;
                break;
            }
            bool o = false;
            (void)qt_move_slow(qt, NULL, m->h, m->box, qt_map_box(qt, m->old), nb, &o, st);
            m->over = o;
        }
    }
}

/// Puts plan entry e's element back to its old box (the moves are undone
/// last first, so each undo finds the blocks its move gave up: in `stash`
/// for a bucket's move, in the pool for this thread's).
static void qt_batch_undo(quadtree *qt, const qt_batch *b, int32_t e, qt_stash *stash)
{
    const qt_plan *m = &b->plan[e];
    qg_txn txn;
    qg_txn_begin(&txn, &qt->base.alloc);
    bool o;
    (void)qt_move_slow(qt, &txn, m->h, m->old, qt_map_box(qt, m->box), qt_map_box(qt, m->old), &o,
                       stash); // cannot fail (see above)
}

/// The serial share of a parallel batch, in order: the moves of no bucket,
/// then each bucket's moves from where it stopped. Range r of them.
static inline void qt_batch_serial_range(const qt_batch *b, int32_t r, int32_t *e0, int32_t *e1)
{
    const int32_t k = r == 0 ? QT_PAR_NONE : r - 1;
    *e0 = r == 0 ? b->start[QT_PAR_NONE] : b->stop[k];
    *e1 = b->start[k + 1];
}

/// The moves that change leaves with several workers. The buckets run level
/// by level on the workers, each taking blocks from its stash, which it
/// fills from the pool's spare capacity under a lock (blocks its moves give
/// up stay in it, so a bucket comes back rarely); a bucket the pool cannot
/// serve stops. This thread then runs the moves of no bucket and what the
/// buckets left, allocating as any move does. QG_ERR_NOMEM there undoes
/// every move of the call, last first: this thread's with the pool, then
/// each bucket's with its own stash, which holds all it ever took, so an
/// undo never needs a block it cannot find. The stashes go back to the pool
/// last. The tree's branches do not change meanwhile (splits are deferred),
/// so each move's bucket holds from the classification to the move.
static qg_status qt_batch_parallel(quadtree *qt, const qg_jobs *jobs, qt_batch *b, int64_t rest)
{
    qg_index *index = &qt->base;
    b->plan = qg_mem_alloc(&index->alloc, (size_t)rest * sizeof(qt_plan));
    if (b->plan == NULL)
        return QG_ERR_NOMEM;
    // Each bucket's place, and each part's first entry in it.
    int32_t at = 0;
    for (int32_t k = 0; k <= QT_PAR_BUCKETS; ++k) {
        b->start[k] = at;
        for (int32_t p = 0; p < b->parts; ++p) {
            int32_t *c = &b->cursor[(size_t)p * (QT_PAR_BUCKETS + 1) + k];
            const int32_t m = *c;
            *c = at;
            at += m;
        }
    }
    b->start[QT_PAR_BUCKETS + 1] = at;
    qg_jobs_run(jobs, qt_batch_scatter, b->parts, b);
    for (int32_t k = 0; k < QT_PAR_BUCKETS; ++k) {
        b->stash[k] = (qt_stash){-1, -1, 0};
        b->stop[k] = b->start[k + 1];
    }
    atomic_flag_clear(&b->pool_lock);
    for (b->level = 0; b->level < QT_PAR_LEVELS; ++b->level) {
        qt_batch_quotas(b);
        qg_jobs_run(jobs, qt_batch_buckets, qt_par_first[b->level + 1] - qt_par_first[b->level], b);
    }

    qg_status s = QG_OK;
    int32_t r = 0, e = 0, e0, e1;
    for (; r <= QT_PAR_BUCKETS && s == QG_OK; ++r) {
        qt_batch_serial_range(b, r, &e0, &e1);
        for (e = e0; e < e1; ++e) {
            qt_plan *m = &b->plan[e];
            qg_txn txn;
            qg_txn_begin(&txn, &index->alloc);
            bool o = false;
            s = qt_move_slow(qt, &txn, m->h, m->box, qt_map_box(qt, m->old), qt_map_box(qt, m->box), &o, NULL);
            if (s != QG_OK) {
                qg_txn_rollback(&txn);
                break;
            }
            m->over = o;
        }
    }
    if (s != QG_OK) {
        // Range r - 1 failed at entry e: back from there, then the buckets.
        // Each move back returns the pool to a state it held in this call
        // (the stashes do not change meanwhile): it needs no reservation,
        // and must not make one that a failing allocator would refuse.
        const uint8_t hold = qt->hold;
        qt->hold = QT_HOLD_UNDO;
        for (--r; r >= 0; --r) {
            qt_batch_serial_range(b, r, &e0, &e1);
            for (e = e < e1 ? e : e1; e-- > e0;)
                qt_batch_undo(qt, b, e, NULL);
            e = INT32_MAX;
        }
        for (int32_t k = QT_PAR_BUCKETS; k-- > 0;)
            for (e = b->stop[k]; e-- > b->start[k];)
                qt_batch_undo(qt, b, e, &b->stash[k]);
        qt->hold = hold;
    }
    for (int32_t k = 0; k < QT_PAR_BUCKETS; ++k) {
        qt_stash *st = &b->stash[k];
        if (st->count > 0) {
            qt->blocks.data[st->tail].next = qt->blocks.free_head;
            qt->blocks.free_head = st->head;
            qt->blocks.live -= st->count;
        }
    }
    if (s != QG_OK) {
        qt_blocks_give_back(qt, b->block_high, b->block_capacity, b->used);
        qg_mem_free(&index->alloc, b->plan, (size_t)rest * sizeof(qt_plan));
    }
    return s;
}

/// Splits the leaves a move of the batch left over-full, once they are all
/// done (`over` set, new box `nb`).
static void qt_batch_split(quadtree *qt, qg_rect box)
{
    const qt_ibox nb = qt_map_box(qt, box);
    qt_split_leaves(qt, qt_descend(qt, qt_root, nb), nb, false);
}

/// qg_move_many: the moves that keep their leaves (nearly all of an
/// `agents` frame's with leaves of 21) classified and stored on the workers,
/// the rest by subtree on the workers too (qt_batch_parallel), or in batch
/// order on one thread.
///
/// All or nothing without copying a million old boxes: the rest go first,
/// with their splits deferred, so they change no other element's leaves or
/// depth and the classification of the others still holds when they are
/// stored; a rest move's only failure is the block it needs to enter a
/// leaf, and then the rest moves made are undone in reverse (each undo
/// returns the tree to a state it held in this call, with as many spare
/// blocks, so it cannot fail) before any box was stored. The deferred
/// splits run last; like every split, one that finds no memory leaves its
/// leaf over-full for a later move to split.
static qg_status quadtree_move_many(qg_index *index, const qg_jobs *jobs, const qg_handle *handles,
                                    const qg_rect *boxes, int32_t n)
{
    quadtree *qt = (quadtree *)index;
    const int32_t parts =
        jobs == NULL ? 1 : jobs->worker_count < QT_BATCH_PARTS ? jobs->worker_count : QT_BATCH_PARTS;
    const size_t cursor_bytes = parts > 1 ? (size_t)parts * (QT_PAR_BUCKETS + 1) * sizeof(int32_t) : 0;
    const size_t used_bytes = ((size_t)qt->blocks.high + 31) / 32 * sizeof(uint32_t);
    const size_t head = sizeof(qt_batch) + cursor_bytes + used_bytes + (size_t)n * sizeof(uint16_t);
    qt_batch *b = qg_mem_alloc(&index->alloc, head);
    if (b == NULL)
        return QG_ERR_NOMEM;
    b->qt = qt;
    b->handles = handles;
    b->boxes = boxes;
    b->n = n;
    b->parts = parts;
    b->cursor = parts > 1 ? (int32_t *)(b + 1) : NULL;
    b->used = (uint32_t *)((char *)(b + 1) + cursor_bytes);
    b->key = (uint16_t *)((char *)(b + 1) + cursor_bytes + used_bytes);
    b->block_high = qt->blocks.high;
    b->block_capacity = qt->blocks.capacity;
    if (parts > 1)
        qt_par_held(b);
    qg_jobs_run(parts > 1 ? jobs : NULL, qt_batch_classify, parts, b);
    int64_t rest = 0, outside = 0;
    for (int32_t p = 0; p < parts; ++p) {
        rest += b->count[p].rest;
        outside += b->count[p].outside;
    }
    if (parts > 1 && rest > 0) {
        const qg_status s = qt_batch_parallel(qt, jobs, b, rest);
        if (s != QG_OK) {
            qg_mem_free(&index->alloc, b, head);
            return s;
        }
        qg_jobs_run(jobs, qt_batch_store, parts, b);
        qt->world.outside_moves += outside;
        for (int64_t e = 0; e < rest; ++e)
            if (b->plan[e].over)
                qt_batch_split(qt, b->plan[e].box);
        if (qt->resplit)
            qt_resplit(qt);
        qg_mem_free(&index->alloc, b->plan, (size_t)rest * sizeof(qt_plan));
        qg_mem_free(&index->alloc, b, head);
        return QG_OK;
    }
    // One part: per rest move, its old box (for an undo) and whether it
    // left a leaf over-full (for the deferred split).
    const size_t undo_bytes = (size_t)rest * (sizeof(qg_rect) + 1);
    qg_rect *old = rest > 0 ? qg_mem_alloc(&index->alloc, undo_bytes) : NULL;
    if (rest > 0 && old == NULL) {
        qg_mem_free(&index->alloc, b, head);
        return QG_ERR_NOMEM;
    }
    // No rest moves, no block (and no pointer arithmetic on NULL).
    uint8_t *over = old != NULL ? (uint8_t *)(old + rest) : NULL;
    int32_t done = 0, i = 0;
    qg_status s = QG_OK;
    for (; i < n && done < rest; ++i) {
        if (b->key[i] == QT_KEEP)
            continue;
        const qg_handle h = handles[i];
        qg_txn txn;
        qg_txn_begin(&txn, &index->alloc);
        old[done] = index->boxes[h];
        bool o = false;
        s = qt_move_slow(qt, &txn, h, boxes[i], qt_map_box(qt, old[done]), qt_map_box(qt, boxes[i]), &o, NULL);
        if (s != QG_OK) {
            qg_txn_rollback(&txn);
            break;
        }
        over[done++] = o;
    }
    if (s != QG_OK) {
        // Move i failed and changed nothing; the rest moves before it go
        // back, last first.
        while (i-- > 0) {
            if (b->key[i] == QT_KEEP)
                continue;
            --done;
            qg_txn txn;
            qg_txn_begin(&txn, &index->alloc);
            bool o;
            (void)qt_move_slow(qt, &txn, handles[i], old[done], qt_map_box(qt, boxes[i]), qt_map_box(qt, old[done]),
                               &o, NULL); // cannot fail (see above)
        }
        // The moves before the refused one kept the blocks they grew the
        // pool by: given back, the call leaves the bytes it found.
        qt_blocks_give_back(qt, b->block_high, b->block_capacity, b->used);
        qg_mem_free(&index->alloc, old, undo_bytes);
        qg_mem_free(&index->alloc, b, head);
        return s;
    }
    qg_jobs_run(parts > 1 ? jobs : NULL, qt_batch_store, parts, b);
    qt->world.outside_moves += outside;
    for (int32_t i = 0, j = 0; i < n && j < rest; ++i) {
        if (b->key[i] == QT_KEEP)
            continue;
        if (over[j++])
            qt_batch_split(qt, boxes[i]);
    }
    if (qt->resplit)
        qt_resplit(qt);
    qg_mem_free(&index->alloc, old, undo_bytes);
    qg_mem_free(&index->alloc, b, head);
    return QG_OK;
}

/// Index (0-3) of the lowest set bit of a non-zero 4-bit mask.
static inline int qt_first_quadrant(unsigned m)
{
    return (m & 1) ? 0 : (m & 2) ? 1 : (m & 4) ? 2 : 3;
}

/// Turns branch c (first child fc, 4 leaves) back into one leaf: each
/// element is kept from the first child it was in. Each child block goes
/// back to the pool before its kept handles are linked into the leaf, which
/// never holds more blocks than were given back, so no allocation. The
/// block of 4 nodes goes on the free list. Elements' depths are left as
/// they were: a depth may exceed the deepest leaf, which only sends a few
/// more moves down the slow path.
static void qt_merge(quadtree *qt, qt_cell c, int32_t fc)
{
    qt->nodes[c.node] = (qt_node){-1, 0};
    for (int k = 0; k < 4; ++k) {
        const qt_node child = qt->nodes[fc + k];
        int32_t b = child.first_child, fill = qt_head_fill(child.count);
        while (b >= 0) {
            qg_handle ids[QT_SLOTS];
            const int32_t m = qt_chain_pop(qt, &b, &fill, ids);
            for (int32_t i = 0; i < m; ++i) {
                const qt_ibox e = qt_map_box(qt, qt->base.boxes[ids[i]]);
                if (qt_first_quadrant(qg_tree_child_mask(c, e)) == k)
                    qt_link(qt, c.node, ids[i]);
            }
        }
    }
    qt->nodes[fc].first_child = qt->free_block;
    qt->nodes[fc].count = 0;
    qt->free_block = fc;
    qt->free_blocks++;
}

static void quadtree_cleanup(qg_index *index)
{
    quadtree *qt = (quadtree *)index;
    if (qt_refit(qt, -1, false, index->count))
        return; // a fresh tree: nothing to collapse
    // A branch whose 4 children are leaves that would not split again as
    // one becomes that leaf (empty children are the common case after
    // removals; few elements after agents moved apart). A branch pushed
    // here is examined after its parent, so a parent can only collapse on
    // a later call: one level per call, as in the text. Without merging
    // the partly empty branches, a tree of moving agents only ever deepens:
    // 40% more nodes after 300 frames of `agents`, each walked by every
    // qg_pairs.
    qt_cell stack[QT_STACK];
    int top = 0;
    if (qt->nodes[0].count == -1)
        stack[top++] = qt_root;
    while (top > 0) {
        const qt_cell c = stack[--top];
        const int32_t fc = qt->nodes[c.node].first_child;
        int leaves = 0;
        int64_t total = 0;
        for (int i = 0; i < 4; ++i) {
            const qt_node child = qt->nodes[fc + i];
            if (child.count == -1) {
                stack[top++] = qg_tree_child_cell(c, fc, i);
            } else {
                leaves++;
                total += child.count;
            }
        }
        if (leaves == 4 && total <= qt->leaf_capacity)
            qt_merge(qt, c, fc);
    }
}

static void quadtree_clear(qg_index *index)
{
    quadtree *qt = (quadtree *)index;
    qt->nodes[0] = (qt_node){-1, 0};
    qt->node_high = 1;
    qt->free_block = -1;
    qt->free_blocks = 0;
    qt_blocks_reset(&qt->blocks);
    // Back to the configured world: the next elements may be anywhere.
    qg_tree_world_reset(&qt->world, index->config.bounds, QT_SIDE);
    qt->max_depth = index->config.max_depth;
    qt->resplit = false;
}

static void quadtree_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                           qg_query_stats *stats)
{
    const quadtree *qt = (const quadtree *)index;
    const qt_ibox qb = qt_map_box(qt, area);
    qt_iter it;
    qt_cell c;
    qt_iter_start(&it, qt_root);
    while (qt_next_leaf(qt, &it, qb, &c)) {
        stats->nodes_visited++;
        const qt_node n = qt->nodes[c.node];
        stats->elements_tested += n.count;
        QT_FOR_BLOCKS(qt, n, b, fill) {
            for (int32_t i = 0; i < fill; ++i) {
                const qg_handle h = qt->blocks.data[b].h[i];
                const qg_rect r = index->boxes[h];
                if (!qg_overlaps(r, area))
                    continue;
                // Report in the one leaf holding the top-left corner of the overlap.
                const float px = r.min_x > area.min_x ? r.min_x : area.min_x;
                const float py = r.min_y > area.min_y ? r.min_y : area.min_y;
                if (qt_corner_here(qt, c, px, py) && !fn(h, user))
                    return;
            }
        }
    }
}

/// True when the pair (a, b), known to overlap, belongs to leaf c: the leaf
/// holding the top-left corner of their overlap.
static inline bool qt_pair_here(const quadtree *qt, qt_cell c, qg_rect a, qg_rect b)
{
    const float px = a.min_x > b.min_x ? a.min_x : b.min_x;
    const float py = a.min_y > b.min_y ? a.min_y : b.min_y;
    return qt_corner_here(qt, c, px, py);
}

#if defined(__GNUC__)
#define QT_PREFETCH(p) __builtin_prefetch(p)
#else
#define QT_PREFETCH(p) ((void)(p))
#endif

/// Leaves gathered per batch in qg_pairs.
#define QT_BATCH 32

/// Reports the pairs (i, j) of bit j in hit[i] that belong to leaf c;
/// false when the callback asked to stop.
static bool qt_report_hits(const quadtree *qt, qt_cell c, const qg_handle *ids, int k, const qg_lanes *L,
                           const uint64_t *hit, qg_pair_fn *fn, void *user)
{
    for (int i = 0; i + 1 < k; ++i) {
        for (uint64_t bits = hit[i]; bits != 0; bits &= bits - 1) {
            const int j = qg_ctz64(bits);
            const float px = L->x0[i] > L->x0[j] ? L->x0[i] : L->x0[j];
            const float py = L->y0[i] > L->y0[j] ? L->y0[i] : L->y0[j];
            if (qt_corner_here(qt, c, px, py) && !qg_report_pair(fn, user, ids[i], ids[j]))
                return false;
        }
    }
    return true;
}

/// Pairs among the k elements of one leaf, given their handles; false when
/// the callback asked to stop. Each overlapping pair is reported in the
/// leaf holding the top-left corner of the overlap, in the order of the
/// handles in the leaf.
static bool qt_pairs_among(const quadtree *qt, qt_cell c, const qg_handle *ids, int k, qg_pair_fn *fn,
                           void *user)
{
    qg_lanes L;
    const qg_rect *boxes = qt->base.boxes;
    for (int i = 0; i < k; ++i)
        qg_lanes_put(&L, i, boxes[ids[i]]);
    qg_lanes_end(&L, k);
    uint64_t hit[QG_LANES];
    return qg_lanes_self(&L, k, hit) == 0 || qt_report_hits(qt, c, ids, k, &L, hit, fn, user);
}

/// Pairs in a leaf too big to gather (only possible at max depth), walked in
/// place: each handle against the rest of its block and the blocks after it.
static bool qt_pairs_big_leaf(const quadtree *qt, qt_cell c, qg_pair_fn *fn, void *user)
{
    const qt_block *bl = qt->blocks.data;
    const qg_rect *boxes = qt->base.boxes;
    const qt_node n = qt->nodes[c.node];
    QT_FOR_BLOCKS(qt, n, b, fill) {
        for (int32_t i = 0; i < fill; ++i) {
            const qg_handle ha = bl[b].h[i];
            const qg_rect a = boxes[ha];
            for (int32_t d = b, j = i + 1, dfill = fill; d >= 0; d = bl[d].next, j = 0, dfill = QT_SLOTS) {
                for (; j < dfill; ++j) {
                    const qg_handle hb = bl[d].h[j];
                    if (qg_overlaps(a, boxes[hb]) && qt_pair_here(qt, c, a, boxes[hb]) &&
                        !qg_report_pair(fn, user, ha, hb))
                        return false;
                }
            }
        }
    }
    return true;
}

/// Copies the handles of a batch of leaves out of their blocks, prefetching
/// each element's box. All head blocks are requested before the first is
/// read and a leaf's next block as soon as its link is known, one block of
/// each leaf per round, so the blocks' cache misses overlap.
static void qt_gather_batch(const quadtree *qt, const qt_cell *leaf, int n, qg_handle *ids, int *start)
{
    const qt_block *bl = qt->blocks.data;
    int32_t cursor[QT_BATCH], take[QT_BATCH];
    int fill[QT_BATCH];
    start[0] = 0;
    for (int i = 0; i < n; ++i) {
        const qt_node node = qt->nodes[leaf[i].node];
        cursor[i] = node.first_child;
        take[i] = qt_head_fill(node.count);
        fill[i] = start[i];
        start[i + 1] = start[i] + node.count;
        QT_PREFETCH(&bl[cursor[i]]);
    }
    for (bool active = true; active;) {
        active = false;
        for (int i = 0; i < n; ++i) {
            const int32_t b = cursor[i];
            if (b < 0)
                continue;
            const int32_t next = bl[b].next;
            if (next >= 0)
                QT_PREFETCH(&bl[next]);
            for (int32_t j = 0; j < take[i]; ++j) {
                const qg_handle h = bl[b].h[j];
                QT_PREFETCH(&qt->base.boxes[h]);
                ids[fill[i]++] = h;
            }
            cursor[i] = next;
            take[i] = QT_SLOTS;
            active = true;
        }
    }
}

/// The pairs of the leaves whose lowest row lies in [y0, y1): every leaf
/// has one such row, so bands of rows split the search without a pair
/// reported twice (a pair is reported in one leaf, and each leaf is in one
/// band).
static void qt_pairs_band(const quadtree *qt, int32_t y0, int32_t y1, qg_pair_fn *fn, void *user,
                          qg_query_stats *stats)
{
    const qt_ibox band = {0, y0, QT_SIDE - 1, y1 - 1};
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
            if (!qt_next_leaf(qt, &it, band, &c)) {
                more = false;
                break;
            }
            if (c.y < y0)
                continue; // a leaf reaching down from the band before
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

static void quadtree_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    qt_pairs_band((const quadtree *)index, 0, QT_SIDE, fn, user, stats);
}

/// qg_pairs_parallel: part p takes the p-th of `parts` equal bands of rows
/// of the tree's world (the elements' spread, after the re-fit).
static void quadtree_pairs_part(const qg_index *index, int32_t part, int32_t parts, qg_pair_fn *fn, void *user,
                                qg_query_stats *stats)
{
    const int32_t y0 = (int32_t)((int64_t)QT_SIDE * part / parts), y1 = (int32_t)((int64_t)QT_SIDE * (part + 1) / parts);
    if (y0 < y1)
        qt_pairs_band((const quadtree *)index, y0, y1, fn, user, stats);
}

static void quadtree_stats(const qg_index *index, qg_stats *stats)
{
    qg_tree_stats(index, qt_children, stats);
}

static void qt_user_visit(const void *tree, qt_cell c, int32_t children, void *ctx)
{
    (void)children;
    const quadtree *qt = tree;
    const qg_tree_visit_ctx *v = ctx;
    const qg_rect r = qg_tree_cell_rect(&qt->world, c.x, c.y, QT_SIDE >> c.depth, QT_SIDE);
    const int32_t count = qt->nodes[c.node].count;
    v->fn(r, c.depth, count < 0 ? 0 : count, v->user);
}

static void quadtree_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    qg_tree_visit_ctx v = {fn, user};
    qg_tree_walk(index, qt_children, qt_user_visit, &v);
}

/// What the walk of qg_validate gathers: the shared checks and the blocks met.
typedef struct qt_check {
    qg_tree_check k; ///< first, so the shared node checks can take this as theirs
    int64_t blocks;
} qt_check;

/// Checks one leaf: its blocks (in range, the head's fill and every later one
/// full add up to its count) and that every element in it is live, overlaps
/// it, and is there once. (k->elements counts the leaves' entries.)
static void qt_check_visit(const void *tree, qt_cell c, int32_t children, void *ctx)
{
    const quadtree *qt = tree;
    qt_check *q = ctx;
    qg_tree_check *k = &q->k;
    if (!qg_tree_check_node(k, c, children, qt->node_high, qt->max_depth) || children >= 0)
        return;
    const qt_node n = qt->nodes[c.node];
    if (n.count < 0 || (n.count == 0) != (n.first_child < 0)) {
        k->ok = false;
        return;
    }
    int32_t len = 0;
    int64_t blocks = 0;
    qg_handle seen[QT_GATHER];
    const qt_ibox cell = qt_cell_box(c);
    for (int32_t b = n.first_child, fill = qt_head_fill(n.count); b >= 0 && len <= n.count;
         b = qt->blocks.data[b].next, fill = QT_SLOTS) {
        if (b >= qt->blocks.high || blocks > qt_blocks_for(n.count)) {
            k->ok = false;
            return;
        }
        blocks++;
        for (int32_t i = 0; i < fill; ++i) {
            const qg_handle h = qt->blocks.data[b].h[i];
            if (!qg_slot_live(&qt->base, h) || !qt_ibox_overlaps(cell, qt_map_box(qt, qt->base.boxes[h]))) {
                k->ok = false;
                return;
            }
            if (n.count <= QT_GATHER) {
                for (int32_t j = 0; j < len; ++j)
                    if (seen[j] == h)
                        k->ok = false; // twice in one leaf
                if (len < QT_GATHER)
                    seen[len] = h;
            }
            len++;
        }
    }
    if (len != n.count || blocks != qt_blocks_for(n.count))
        k->ok = false;
    k->elements += len;
    q->blocks += blocks;
}

/// Counts the free blocks (for validation): should equal high - live.
static int64_t qt_free_count(const qt_blocks *p)
{
    int64_t n = 0;
    for (int32_t i = p->free_head; i >= 0 && i < p->high && n <= p->high; i = p->data[i].next)
        n++;
    return n;
}

static qg_status quadtree_validate(const qg_index *index, size_t *bytes)
{
    const quadtree *qt = (const quadtree *)index;
    if (!qg_tree_high_ok(qt->node_high, qt->node_capacity) || qt->blocks.high > qt->blocks.capacity)
        return QG_ERR_INVALID;
    qt_check q = {{true, 0, 0}, 0};
    qg_tree_walk(qt, qt_children, qt_check_visit, &q);
    if (!q.k.ok || !qg_tree_blocks_ok(qt->nodes, sizeof(qt_node), offsetof(qt_node, first_child), qt->free_block,
                                      qt->free_blocks, qt->node_high, q.k.branches))
        return QG_ERR_INVALID;
    if (q.blocks != qt->blocks.live || qt_free_count(&qt->blocks) != qt->blocks.high - qt->blocks.live)
        return QG_ERR_INVALID;
    // Every live element is in exactly the leaves its box overlaps (the sum
    // matches the entries found above), none deeper than its depth.
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
    if (expected != q.k.elements)
        return QG_ERR_INVALID;
    *bytes += (size_t)qt->node_capacity * sizeof(qt_node) + (size_t)qt->blocks.capacity * sizeof(qt_block) +
              (size_t)qt->depth_capacity * sizeof(uint8_t);
    return QG_OK;
}

/// Tests element h for the ray in leaf c and reports it when c is its
/// reporting leaf (see quadtree_raycast); false once the callback stopped.
static inline bool qt_ray_element(const quadtree *qt, qg_tree_ray *r, qt_cell c, qg_handle h)
{
    const qg_rect b = qt->base.boxes[h];
    float t;
    if (!qg_tree_ray_hit(r, b, &t))
        return true;
    float px = r->r.ox, py = r->r.oy;
    if (r->r.dx != 0.0f) {
        const float s = t * r->r.dx; // t is +inf only where dx pushes toward the box
        px += s;
    }
    if (r->r.dy != 0.0f) {
        const float s = t * r->r.dy;
        py += s;
    }
    px = px < b.min_x ? b.min_x : px > b.max_x ? b.max_x : px;
    py = py < b.min_y ? b.min_y : py > b.max_y ? b.max_y : py;
    return !qt_corner_here(qt, c, px, py) || qg_ray_report(&r->r, h, t);
}

/// qg_raycast: the cells the segment crosses, near to far. Each node's
/// region (qg_tree_region: border sides infinite, inner sides pushed out by
/// a hair) holds every point the mapping sends into its cell, so a node
/// whose region the segment misses, or enters past the current max_t, holds
/// no reporting leaf (below) of a hit left to report; a tie at max_t still
/// enters (the skip is strictly greater).
/// Children are taken in the order the segment enters them, so closest-hit
/// callbacks shrink max_t early.
///
/// An element listed in several leaves is reported by one: the leaf that
/// holds P, the hit point origin + t * direction clamped into the element's
/// box (t does not depend on max_t, so every leaf computes the same P). P
/// is in the box, so the monotonic mapping sends it into the box's integer
/// range and the leaf holding it lists the element; P is on the segment to
/// within rounding (the clamp only moves it by that much, the hair covers
/// it), so the walk reaches that leaf whenever the element is still a hit.
/// The hair grows with the origin's magnitude: origin + t * direction
/// carries the rounding of the larger of the two.
static void quadtree_raycast(const qg_index *index, float ox, float oy, float dx, float dy, float max_t,
                             qg_ray_fn *fn, void *user)
{
    const quadtree *qt = (const quadtree *)index;
    const float reach = fabsf(ox) > fabsf(oy) ? fabsf(ox) : fabsf(oy);
    const qg_tree_frame f = qg_tree_frame_make(&qt->world, QT_SIDE, reach);
    qg_tree_ray r = qg_tree_ray_start(ox, oy, dx, dy, max_t, fn, user);
    // A finite segment starts at the deepest node whose cell holds all of
    // it, pushed out by twice the hair: every point P below maps into it
    // (monotonic mapping), so the nodes above hold no other reporting leaf.
    qt_cell from = qt_root;
    if (max_t < INFINITY) {
        float ex = ox, ey = oy;
        if (dx != 0.0f) {
            const float s = max_t * dx;
            ex = ox + s;
        }
        if (dy != 0.0f) {
            const float s = max_t * dy;
            ey = oy + s;
        }
        const float h = 2.0f * f.hair;
        const qg_rect seg = {(ox < ex ? ox : ex) - h, (oy < ey ? oy : ey) - h, (ox < ex ? ex : ox) + h,
                             (oy < ey ? ey : oy) + h};
        from = qt_descend(qt, qt_root, qt_map_box(qt, seg));
    }
    qg_tree_pending stack[QT_STACK];
    int top = 0;
    stack[top++] = (qg_tree_pending){from, 0.0f};
    while (top > 0) {
        const qg_tree_pending p = stack[--top];
        if (p.key > r.r.max_t)
            continue;
        const qt_cell c = p.c;
        const qt_node n = qt->nodes[c.node];
        if (n.count != -1) {
            if (n.count <= QT_GATHER) {
                // The handles first, each box's load started: the boxes lie
                // anywhere in memory, and their misses then overlap.
                qg_handle ids[QT_GATHER];
                int m = 0;
                QT_FOR_BLOCKS(qt, n, b, fill) {
                    for (int32_t i = 0; i < fill; ++i) {
                        ids[m] = qt->blocks.data[b].h[i];
                        QT_PREFETCH(&index->boxes[ids[m]]);
                        m++;
                    }
                }
                for (int i = 0; i < m; ++i)
                    if (!qt_ray_element(qt, &r, c, ids[i]))
                        return;
            } else {
                QT_FOR_BLOCKS(qt, n, b, fill) {
                    for (int32_t i = 0; i < fill; ++i)
                        if (!qt_ray_element(qt, &r, c, qt->blocks.data[b].h[i]))
                            return;
                }
            }
            continue;
        }
        float t0[4];
        const unsigned hit = qg_tree_child_spans(&r, &f, c.x, c.y, QT_SIDE >> c.depth, t0);
        qg_tree_pending ch[4];
        int k = 0;
        for (int i = 0; i < 4; ++i)
            if (hit >> i & 1)
                ch[k++] = (qg_tree_pending){qg_tree_child_cell(c, n.first_child, i), t0[i]};
        qg_tree_push_sorted(stack, &top, ch, k);
    }
}

/// Offers element h from leaf c when c is the leaf that reports it (see
/// quadtree_nearest); only an element the bound lets in is mapped.
static inline void qt_near_element(const quadtree *qt, qg_near *c, qt_cell leaf, qg_handle h)
{
    const qg_rect b = qt->base.boxes[h];
    const float d = qg_point_box_d2_fast(b, c->x, c->y);
    if (!(d <= c->max_d2) || (c->n == c->k && !qg_near_before(d, h, c->worst, c->worst_h)))
        return;
    const float px = c->x < b.min_x ? b.min_x : (c->x > b.max_x ? b.max_x : c->x);
    const float py = c->y < b.min_y ? b.min_y : (c->y > b.max_y ? b.max_y : c->y);
    if (qt_corner_here(qt, leaf, px, py))
        qg_near_push(c, h, d);
}

/// qg_nearest: depth first, children nearest first, skipping every node
/// whose region is farther than the k-th best so far (qg_near_bound; a tie
/// is still entered, it may win on its handle). The point Q of an element's
/// box nearest the query is in the box, so the mapping sends it into the
/// box's integer range: the leaf holding Q lists the element, and that
/// leaf's region and its ancestors' hold Q, so they are no farther than the
/// element and are never skipped while it could enter. That leaf alone
/// offers it, so an element listed in many leaves (a long box) is offered
/// once. The walk ends when every element is held, and past
/// qg_near_budget one pass over every box finishes.
static int32_t quadtree_nearest(const qg_index *index, float x, float y, int32_t k, float max_distance2,
                                qg_handle *handles, float *distances2)
{
    (void)distances2;
    const quadtree *qt = (const quadtree *)index;
    const qg_tree_frame f = qg_tree_frame_make(&qt->world, QT_SIDE, 0.0f);
    qg_near c;
    qg_near_start(&c, index, x, y, k, max_distance2, handles);
    c.once = true;
    const int64_t budget = qg_near_budget(index);
    int64_t work = 0;
    qg_tree_pending stack[QT_STACK];
    int top = 0;
    stack[top++] = (qg_tree_pending){qt_root, 0.0f};
    while (top > 0) {
        const qg_tree_pending p = stack[--top];
        if (p.key > qg_near_bound(&c))
            continue;
        if (++work > budget) {
            qg_near_scan(&c);
            break;
        }
        const qt_node n = qt->nodes[p.c.node];
        if (n.count != -1) {
            if (n.count <= QT_GATHER) {
                qg_handle ids[QT_GATHER]; // as in quadtree_raycast: the boxes' misses overlap
                int m = 0;
                QT_FOR_BLOCKS(qt, n, b, fill) {
                    for (int32_t i = 0; i < fill; ++i) {
                        ids[m] = qt->blocks.data[b].h[i];
                        QT_PREFETCH(&index->boxes[ids[m]]);
                        m++;
                    }
                }
                work += m;
                for (int i = 0; i < m; ++i)
                    qt_near_element(qt, &c, p.c, ids[i]);
            } else {
                QT_FOR_BLOCKS(qt, n, b, fill) {
                    work += fill;
                    for (int32_t i = 0; i < fill; ++i)
                        qt_near_element(qt, &c, p.c, qt->blocks.data[b].h[i]);
                }
            }
            if (qg_near_all(&c))
                break;
            continue;
        }
        const float bound = qg_near_bound(&c);
        float d2[4];
        qg_tree_child_d2(&f, p.c.x, p.c.y, QT_SIDE >> p.c.depth, x, y, d2);
        qg_tree_pending ch[4];
        int m = 0;
        for (int i = 0; i < 4; ++i)
            if (!(d2[i] > bound))
                ch[m++] = (qg_tree_pending){qg_tree_child_cell(p.c, n.first_child, i), d2[i]};
        qg_tree_push_sorted(stack, &top, ch, m);
    }
    return qg_near_finish(&c);
}

/* ---- a batch with static elements, given back -------------------------- */

/// What quadtree_batch_mark noted.
typedef struct qt_mark {
    size_t bytes;
    int32_t block_capacity, block_high, depth_capacity;
    qg_tree_world world;
    uint32_t used[]; ///< a bit per block below block_high: quadtree_batch_trim's scratch
} qt_mark;

/// Before qg_move_many's one-by-one path (index.c, move_many_serial): notes
/// the pools' capacities and holds the tree's shape until the batch ends.
/// A static element's move inserts it into the kind, linking it into
/// leaves, which takes blocks and may split them; the undo takes it out
/// again and keeps that growth. While the hold stands no leaf splits (an
/// over-full leaf is a legal state; the splits run after a batch that
/// succeeded) and no re-fit runs, so the nodes never change. Each leaf then
/// holds ceil(count / 7) blocks, a function of the leaves' counts, and each
/// undone move returns the leaves' counts to an earlier state's: its move
/// back unlinks first and links second, so it peaks at that state's blocks,
/// which the pool held then and, growing only, holds now. The undo's moves
/// back need no reservation, and no allocation can fail them.
static void *quadtree_batch_mark(qg_index *index, int32_t n)
{
    (void)n;
    quadtree *qt = (quadtree *)index;
    const size_t bytes = sizeof(qt_mark) + ((size_t)qt->blocks.high + 31) / 32 * sizeof(uint32_t);
    qt_mark *m = qg_mem_alloc(&index->alloc, bytes);
    if (m == NULL)
        return NULL;
    m->bytes = bytes;
    m->block_capacity = qt->blocks.capacity;
    m->block_high = qt->blocks.high;
    m->depth_capacity = qt->depth_capacity;
    m->world = qt->world;
    qt->hold = QT_HOLD_BATCH;
    qt->held = 0;
    return m;
}

static void quadtree_batch_undo(qg_index *index, void *mark)
{
    (void)mark;
    ((quadtree *)index)->hold = QT_HOLD_UNDO;
}

/// Moves every live block at or above the old high-water mark into a free
/// one below it (the undo left as many blocks live as before the batch,
/// all of which fit below it), and makes the free list the rest below it.
/// Two walks over the leaves: the first marks the live blocks below, the
/// second relinks the ones above.
static void qt_blocks_compact(quadtree *qt, int32_t high, uint32_t *used)
{
    if (qt->blocks.live > high)
        return; // (not after an undo)
    memset(used, 0, ((size_t)high + 31) / 32 * sizeof(uint32_t));
    const qt_ibox all = {0, 0, QT_SIDE - 1, QT_SIDE - 1};
    qt_block *data = qt->blocks.data;
    qt_iter it;
    qt_cell c;
    qt_iter_start(&it, qt_root);
    while (qt_next_leaf(qt, &it, all, &c))
        for (int32_t b = qt->nodes[c.node].first_child; b >= 0; b = data[b].next)
            if (b < high)
                used[b >> 5] |= UINT32_C(1) << (b & 31);
    int32_t f = 0;
    qt_iter_start(&it, qt_root);
    while (qt_next_leaf(qt, &it, all, &c)) {
        for (int32_t *link = &qt->nodes[c.node].first_child; *link >= 0; link = &data[*link].next) {
            if (*link < high)
                continue;
            while (used[f >> 5] >> (f & 31) & 1)
                f++;
            used[f >> 5] |= UINT32_C(1) << (f & 31);
            data[f] = data[*link];
            *link = f;
        }
    }
    qt->blocks.free_head = -1;
    for (int32_t b = high; b-- > 0;) {
        if (!(used[b >> 5] >> (b & 31) & 1)) {
            data[b].next = qt->blocks.free_head;
            qt->blocks.free_head = b;
        }
    }
    qt->blocks.high = high;
}

/// After an undone batch: the pool back to the high-water mark `high` and
/// the capacity `capacity` it had before (`used`: a bit per block below
/// `high`, scratch). Shrinks only, never allocates.
static void qt_blocks_give_back(quadtree *qt, int32_t high, int32_t capacity, uint32_t *used)
{
    if (qt->blocks.high > high)
        qt_blocks_compact(qt, high, used);
    qg_array_shrink(&qt->base.alloc, (void **)&qt->blocks.data, &qt->blocks.capacity, sizeof(qt_block),
                    qt->blocks.high > capacity ? qt->blocks.high : capacity);
}

/// After the batch: ends the hold. After an undo (`undone`) it gives back
/// the blocks and per-handle bytes the batch grew (shrinks only, never
/// allocates); after a batch that succeeded it runs the upkeep the hold put
/// off (the splits of the leaves it over-filled, a re-fit an insert would
/// have made), allocating as any split does (a refused one leaves a leaf
/// fuller).
static void quadtree_batch_trim(qg_index *index, void *mark, bool undone)
{
    quadtree *qt = (quadtree *)index;
    qt_mark *m = mark;
    qg_alloc *alloc = &index->alloc;
    const uint8_t held = qt->held;
    qt->hold = 0;
    qt->held = 0;
    if (undone) {
        qt->world = m->world; // (its counters: the box never changed)
        qt_blocks_give_back(qt, m->block_high, m->block_capacity, m->used);
        qg_array_shrink(alloc, (void **)&qt->depths, &qt->depth_capacity, sizeof(uint8_t), m->depth_capacity);
    } else if (held) {
        qt->resplit |= (held & QT_HELD_SPLIT) != 0;
        qt_upkeep(qt, index->count);
    }
    qg_mem_free(alloc, m, m->bytes);
}

QG_KIND_CLASS_EX(quadtree, QG_QUADTREE, quadtree, .tune = &qg_tree_tune_rule, .pairs_part = quadtree_pairs_part, .raycast = quadtree_raycast,
                 .nearest = quadtree_nearest, .insert_many = quadtree_insert_many, .move_many = quadtree_move_many,
                 .batch_mark = quadtree_batch_mark, .batch_undo = quadtree_batch_undo,
                 .batch_trim = quadtree_batch_trim);
