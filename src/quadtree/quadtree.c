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
#include "../state.h"

#include <stdatomic.h>
#include <string.h>

#include "quadtree_nodes.inc"

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

/// qt_split_due for a leaf a batch took from `before` to `after` elements:
/// true when one of the counts it passed through is one at which an insert
/// would have tried (so a batch tries a leaf at most once, and no leaf an
/// insert at a time would not have tried).
static inline bool qt_split_due_batch(int32_t before, int32_t after, int32_t capacity)
{
    const int32_t lo = before >= capacity ? before + 1 : capacity + 1;
    if (after < lo)
        return false;
    if (lo <= 2 * capacity)
        return true;
    int32_t p = after; // the highest power of two up to `after`
    while (p & (p - 1))
        p &= p - 1;
    return p >= lo;
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

/// The splits a batch's links call for: the leaves under b's descent that
/// the batch over-filled (added[]: its links per node that was there before
/// it; qt_split_due_batch), each tried once (its added[] entry is then 0).
/// Nodes the splits make lie past `nodes` or came off the free list, and
/// the batch linked none of them.
static void qt_split_batch_leaves(quadtree *qt, qt_ibox b, int32_t *added, int32_t nodes)
{
    qt_iter it;
    qt_cell c;
    qt_iter_start(&it, qt_descend(qt, qt_root, b));
    while (qt_next_leaf(qt, &it, b, &c)) {
        if (c.node >= nodes || added[c.node] == 0)
            continue;
        const int32_t count = qt->nodes[c.node].count;
        const int32_t before = count - added[c.node];
        added[c.node] = 0;
        if (c.depth < qt->max_depth && qt_split_due_batch(before, count, qt->leaf_capacity))
            qt_try_split(qt, c);
    }
}

/// qg_insert_many: one re-fit check for the whole batch (a re-fit rebuilds
/// from every live slot, the new ones included, and is then the whole
/// job; the blocks it needs, one per QT_SLOTS elements in the root, are
/// reserved first, so a first batch into an empty tree is fitted and split
/// level by level rather than left in one leaf), else one sort and the
/// inserts in the order of the boxes' min corners' cells, so each descent
/// walks the nodes the last one left in the cache (their loads started well ahead: in that order handles, boxes and
/// depths lie anywhere). All or nothing, and no trace: every block the
/// batch links into the leaves it finds is counted and reserved before
/// anything changes (a leaf's links need a new block each QT_SLOTS), then
/// every element is linked, then the leaves it over-filled split (each
/// tried once, as qt_split_due_batch says), each split allocating on its
/// own as any split does (a refused one leaves the leaf fuller). Without
/// memory for the sort's scratch the boxes go in the order given.
static qg_status quadtree_insert_many(qg_index *index, qg_txn *txn, const qg_handle *handles, int32_t n)
{
    quadtree *qt = (quadtree *)index;
    qg_handle top = 0;
    for (int32_t i = 0; i < n; ++i)
        top = handles[i] > top ? handles[i] : top;
    if (!qg_txn_reserve(txn, (void **)&qt->depths, &qt->depth_capacity, sizeof(uint8_t), (int64_t)top + 1))
        return QG_ERR_NOMEM;
    const int64_t count = (int64_t)index->count + n;
    // Grow first: the re-fit rebuilds only with the root's blocks in hand
    // (without them the batch would go in unfitted and unsplit). It changes
    // nothing before this reservation, and nothing can fail after it.
    if (qg_tree_grown(&qt->world, count) &&
        !qg_txn_reserve(txn, (void **)&qt->blocks.data, &qt->blocks.capacity, sizeof(qt_block),
                        qt_blocks_for(count)))
        return QG_ERR_NOMEM;
    if (qg_tree_grown(&qt->world, count) && qt_refit(qt, -1, true, count))
        return QG_OK;
    const int32_t nodes = qt->node_high;
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
    if (!qt_blocks_reserve(txn, &qt->blocks, need)) {
        if (block != NULL)
            qg_mem_free(&index->alloc, block, 2 * bytes);
        qg_mem_free(&index->alloc, added, added_bytes);
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
            qt_split_batch_leaves(qt, qt_map_box(qt, index->boxes[h]), added, nodes);
        }
    }
    if (block != NULL)
        qg_mem_free(&index->alloc, block, 2 * bytes);
    qg_mem_free(&index->alloc, added, added_bytes);
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

#include "quadtree_batch.inc"

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

#include "quadtree_rays.inc"

#include "quadtree_undo.inc"

/// What qt_read_check's walk gathers.
typedef struct qt_read {
    uint64_t *map;    ///< a bit per block below the pool's mark: met once
    int32_t *stamp;   ///< per handle: the last leaf that listed it
    int64_t marked;
    bool ok;
} qt_read;

/// Marks block b of a chain; false when it lies outside the pool's mark or
/// was met before.
static bool qt_read_mark(const quadtree *qt, qt_read *r, int32_t b)
{
    if (b >= qt->blocks.high || (r->map[(uint32_t)b >> 6] >> ((uint32_t)b & 63) & 1))
        return false;
    r->map[(uint32_t)b >> 6] |= 1ull << ((uint32_t)b & 63);
    r->marked++;
    return true;
}

static void qt_read_visit(const void *tree, qt_cell c, int32_t children, void *ctx)
{
    const quadtree *qt = tree;
    qt_read *r = ctx;
    if (children >= 0 || !r->ok)
        return;
    const qt_node n = qt->nodes[c.node];
    if (n.count < 0) {
        r->ok = false;
        return;
    }
    for (int32_t b = n.first_child, fill = qt_head_fill(n.count); b >= 0; b = qt->blocks.data[b].next, fill = QT_SLOTS) {
        if (!qt_read_mark(qt, r, b)) {
            r->ok = false;
            return;
        }
        for (int32_t i = 0; i < fill; ++i) {
            const qg_handle h = qt->blocks.data[b].h[i];
            if (h < 0 || h >= qt->base.box_high || r->stamp[h] == c.node) {
                r->ok = false;
                return;
            }
            r->stamp[h] = c.node;
        }
    }
}

/// Reading a snapshot, once its nodes are a tree: every block below the
/// pool's mark lies in one leaf's chain or on the free list, once, and no
/// leaf lists a handle twice. quadtree_validate checks the counts, boxes and
/// depths, but tells a handle listed twice from two handles only in the
/// leaves it gathers, and a block in two chains (or in a chain and on the
/// free list) adds up as two would: the next link, split or merge would
/// then write one leaf's handles into another's.
static qg_status qt_read_check(quadtree *qt)
{
    qg_alloc *alloc = &qt->base.alloc;
    if (qt->blocks.high < 0 || qt->blocks.high > qt->blocks.capacity)
        return QG_ERR_INVALID;
    // One block: the map (whole words), then the stamps. Neither is read
    // when its count is 0 (no block or handle passes the range checks).
    const size_t map_bytes = ((size_t)qt->blocks.high + 63) / 64 * sizeof(uint64_t);
    const size_t bytes = map_bytes + (size_t)qt->base.box_high * sizeof(int32_t);
    unsigned char *scratch = bytes > 0 ? qg_mem_alloc(alloc, bytes) : NULL;
    if (bytes > 0 && scratch == NULL)
        return QG_ERR_NOMEM;
    qt_read r = {(uint64_t *)(void *)scratch, scratch ? (int32_t *)(void *)(scratch + map_bytes) : NULL, 0, true};
    if (bytes > 0) {
        memset(scratch, 0, map_bytes);
        memset(scratch + map_bytes, 0xFF, bytes - map_bytes); // -1: no leaf (leaves are nodes >= 0)
    }
    qg_tree_walk(qt, qt_children, qt_read_visit, &r);
    for (int32_t b = qt->blocks.free_head; r.ok && b >= 0;) {
        r.ok = qt_read_mark(qt, &r, b);
        b = r.ok ? qt->blocks.data[b].next : -1;
    }
    qg_mem_free(alloc, scratch, bytes);
    return r.ok && r.marked == qt->blocks.high ? QG_OK : QG_ERR_INVALID;
}

/// The state walk (state.h). Everything that decides a later answer or its
/// order is here: the nodes (their order is the order leaves are walked),
/// the blocks (a leaf's handles lie in them in the order pairs and queries
/// report them; the free list decides which block the next link takes),
/// the depths, the world and its re-fit counts, the depths and capacity in
/// force, and the pools' capacities (a re-fit rebuilds only when the blocks
/// hold every element in the root; splits in a re-fit use what the pools
/// hold). `hold` and `held` live inside one qg_move_many call (batch_mark
/// to batch_trim), zero between calls: not state.
static void quadtree_state(qg_state *s, qg_index *d, const qg_index *src)
{
    quadtree *dq = (quadtree *)d;
    const quadtree *sq = (const quadtree *)src;
    QG_ST(s, dq, sq, max_depth);
    QG_ST(s, dq, sq, leaf_capacity);
    QG_ST(s, dq, sq, depth_cap);
    QG_ST_BOOL(s, dq, sq, resplit);
    qg_tree_world_state(s, &dq->world, &sq->world);
    QG_TREE_NODES_STATE(s, dq, sq, sizeof(qt_node));
    QG_ST(s, dq, sq, blocks.high);
    QG_ST(s, dq, sq, blocks.free_head);
    QG_ST(s, dq, sq, blocks.live);
    qg_st_array(s, (void **)&dq->blocks.data, &dq->blocks.capacity, sq->blocks.data, sq->blocks.capacity,
                sq->blocks.high, sizeof(qt_block));
    qg_st_array(s, (void **)&dq->depths, &dq->depth_capacity, sq->depths, sq->depth_capacity,
                qg_tree_slots_used(sq->depth_capacity, src->box_high), sizeof(uint8_t));
    if (!qg_st_reading(s) || !qg_st_ok(s))
        return;
    // What quadtree_validate and the later calls trust without checking:
    // depths within the integer cells (shifts, stacks), a tree (its walks).
    if (dq->max_depth < 0 || dq->max_depth > QT_BITS || dq->depth_cap < 0 || dq->depth_cap > QT_BITS ||
        dq->leaf_capacity < 1 || !qg_tree_world_ok(&dq->world, QT_SIDE) || !qg_tree_config_ok(&d->config, QT_BITS)) {
        qg_st_fail(s, QG_ERR_INVALID);
        return;
    }
    qg_status st = qg_tree_shape_check(&d->alloc, dq, qt_children, dq->nodes, sizeof(qt_node),
                                       offsetof(qt_node, first_child), dq->free_block, dq->node_high,
                                       dq->node_capacity);
    if (st == QG_OK)
        st = qt_read_check(dq);
    if (st != QG_OK)
        qg_st_fail(s, st);
}

QG_KIND_CLASS_EX(quadtree, QG_QUADTREE, quadtree, .tune = &qg_tree_tune_rule, .state = quadtree_state, .pairs_part = quadtree_pairs_part, .raycast = quadtree_raycast,
                 .nearest = quadtree_nearest, .insert_many = quadtree_insert_many, .move_many = quadtree_move_many,
                 .batch_mark = quadtree_batch_mark, .batch_undo = quadtree_batch_undo,
                 .batch_trim = quadtree_batch_trim);
