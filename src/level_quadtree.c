// SPDX-License-Identifier: MIT
// QG_LEVEL_QUADTREE: the "instant insertion" quadtree (docs/kinds.md).
//
// - Learning (tune.c): element_size = the 97th percentile of the
//   elements' larger sides (a box sits in the deepest cell holding it whole:
//   cells over the median left half of them a level up, 1.04-1.27x the best
//   hand tuning at 200,000) sets the preallocated depth (capped at
//   LV_DEFAULT_MAX_DEPTH); the world is the elements' bounding box. A
//   re-tune allocates the new levels beside the old ones and swaps them in.
// - Every level of a complete quadtree is allocated up front in one block,
//   level after level, each level a row-major grid of 2^L x 2^L nodes: the
//   node of cell (x, y) on level L is at offset[L] + y * 2^L + x, so parents,
//   children and the node of a box are computed, never stored or searched.
//   max_depth is the deepest level (root = 0): the text's 8 levels are
//   max_depth 7, 21,845 nodes.
// - An element's node is found without descending: its box is mapped to
//   integer coordinates 0 .. 2^max_depth - 1 (conservative and monotonic, as
//   in QG_QUADTREE), the highest bit in which its corners differ gives its
//   level (max_depth - bit_length((x0 ^ x1) | (y0 ^ y1)); no differing bit
//   means the deepest level), and its top-left corner shifted right gives the
//   node on that level ("the bit hack from Game Programming Gems II"). Boxes
//   not wholly inside the world are clamped onto its border cells like any
//   other (the text puts them in the root, where every query and every pair
//   search would test them): the cell of a node holds the clamped integer
//   box of each of its elements, and queries clamp the same way.
// - The configured bounds are a hint: the tree maps its own square world,
//   re-fitted in qg_cleanup to the elements when a sixteenth of them lie
//   outside it (the new world takes in the old one, half as wide again) or
//   when they fill less than an eighth of it on both axes. Inserts and moves
//   count the boxes that end outside (four comparisons); cleanup scans the
//   boxes only when a sixteenth of the moves since the last scan did, or the
//   population doubled or halved. A re-fit relinks every element (no
//   allocation: the levels are all there); its depth puts the smallest cells
//   at the elements' mean size (or element_size, if larger) but never below
//   the levels allocated at creation. The mapping is computed in double, so
//   any finite bounds work.
// - Each element remembers its node, and a node's elements are an intrusive
//   doubly-linked list threaded through a per-handle array (the base's
//   handle free list is the list's free list), so removal is O(1) and there
//   is no container per node.
// - A node is 8 bytes: the head of its list and the number of elements in
//   its whole subtree. The count lets queries skip empty subtrees at once;
//   keeping it costs one increment per level on insert, and a move that
//   changes node only touches the levels below the common ancestor.
// - A query visits, on each level, only the nodes whose cell overlaps the
//   area's integer box, starting at the root and stopping at empty
//   subtrees; the cell of a node holds every element in it, so this misses
//   nothing, and the final test is on the float box, so it is exact.
// - Pairs: two overlapping boxes have overlapping cells, and two overlapping
//   quadtree cells are the same cell or one holds the other. So every pair is
//   found once by testing each node's elements among themselves and each
//   element against the elements of the descendants its box overlaps.
// - Ray casts and nearest searches walk the levels themselves,
//   depth first with an explicit stack, a node's own elements tested when it
//   is reached, empty subtrees (total 0) skipped, children near first (by
//   the segment's entry parameter, by distance2), and a node skipped when
//   the segment misses its region or enters it past the current max_t, or
//   its distance2 passes the k-th best (strictly: ties are still entered).
//   A node's region is its cell in world units, border sides infinite and
//   inner sides pushed out by a hair for rounding (qg_tree_region): it holds
//   every point the mapping sends into the cell, so the box of every element
//   at or below the node. Each element is in one node: reported once.
#include "tree_common.h"
#include "kind.h"
#include "state.h"

/// Deepest level a caller may ask for: level 11 is 4^11 cells, 5.6 million
/// nodes (45 MB) in all. Deeper requests are clamped to it.
#define LV_MAX_DEPTH 11
/// Deepest level chosen from element_size: 1.4 million nodes, 11 MB.
#define LV_DEFAULT_MAX_DEPTH 10
/// Without element_size: the text's 8 levels.
#define LV_DEFAULT_DEPTH 7
/// Depth-first traversal pops one node and pushes at most 4.
#define LV_STACK (3 * LV_MAX_DEPTH + 8)
/// Nodes up to this many elements are copied to the C stack for pairs.
#define LV_GATHER QG_LANES

typedef struct lv_node {
    int32_t head;  ///< first element of the node's list, -1 if none
    int32_t total; ///< elements in this node and all its descendants
} lv_node;
_Static_assert(sizeof(lv_node) == 8, "a level quadtree node is 8 bytes");

typedef struct lv_link {
    int32_t node; ///< the node holding the element
    int32_t next, prev;
} lv_link;

typedef qg_tree_ibox lv_ibox;

/// A node named by level and coordinates on that level.
typedef struct lv_cell {
    int32_t level, x, y;
} lv_cell;

typedef struct level_quadtree {
    qg_index base;
    lv_node *nodes;
    int32_t node_count;
    lv_link *links; ///< per handle
    int32_t link_capacity;
    int32_t depth;       ///< deepest level in use
    int32_t alloc_depth; ///< deepest level allocated (the configured max_depth)
    qg_tree_world world; ///< mapped onto the integer coordinates of the levels in use
    int32_t offset[LV_MAX_DEPTH + 2]; ///< first node of each level
} level_quadtree;

/// Maps `world` onto the integer coordinates of the levels in use.
static void lv_set_world(level_quadtree *lv, qg_rect world, int depth)
{
    lv->depth = depth;
    qg_tree_world_set(&lv->world, world, 1 << depth);
}

/// Conservative integer box, clamped to [0, 2^depth - 1].
static inline lv_ibox lv_map_box(const level_quadtree *lv, qg_rect r)
{
    return qg_tree_map_box(&lv->world, r, 1 << lv->depth);
}

static inline int32_t lv_index(const level_quadtree *lv, lv_cell c)
{
    return lv->offset[c.level] + (c.y << c.level) + c.x;
}

/// The node of a box, without descending.
static inline lv_cell lv_locate(const level_quadtree *lv, qg_rect r)
{
    const lv_ibox ib = lv_map_box(lv, r);
    const int shift = qg_tree_spread(ib);
    return (lv_cell){lv->depth - shift, ib.x0 >> shift, ib.y0 >> shift};
}

/// The cell of node index i (levels are found by their offsets).
static inline lv_cell lv_cell_of(const level_quadtree *lv, int32_t i)
{
    int32_t level = 0;
    while (i >= lv->offset[level + 1])
        level++;
    const int32_t r = i - lv->offset[level];
    return (lv_cell){level, r & ((1 << level) - 1), r >> level};
}

static inline lv_cell lv_parent(lv_cell c)
{
    return (lv_cell){c.level - 1, c.x >> 1, c.y >> 1};
}

static void lv_link_in(level_quadtree *lv, int32_t node, qg_handle h)
{
    lv_node *n = &lv->nodes[node];
    lv->links[h] = (lv_link){node, n->head, -1};
    if (n->head >= 0)
        lv->links[n->head].prev = h;
    n->head = h;
}

static void lv_link_out(level_quadtree *lv, qg_handle h)
{
    const lv_link l = lv->links[h];
    if (l.prev >= 0)
        lv->links[l.prev].next = l.next;
    else
        lv->nodes[l.node].head = l.next;
    if (l.next >= 0)
        lv->links[l.next].prev = l.prev;
}

/// Adds `delta` to the subtree counts of c and its ancestors.
static void lv_count_up(level_quadtree *lv, lv_cell c, int32_t delta)
{
    for (;;) {
        lv->nodes[lv_index(lv, c)].total += delta;
        if (c.level == 0)
            return;
        c = lv_parent(c);
    }
}

static qg_status level_quadtree_configure(qg_config *config)
{
    if (config->max_depth > LV_MAX_DEPTH)
        config->max_depth = LV_MAX_DEPTH; // 4^depth nodes: deeper does not fit
    if (config->max_depth == 0)
        config->max_depth = qg_tree_chosen_depth(config, LV_DEFAULT_DEPTH, LV_DEFAULT_MAX_DEPTH);
    if (config->leaf_capacity == 0)
        config->leaf_capacity = 1; // unused: nodes never split
    return QG_OK;
}

/// The first node of each level of a tree allocated `alloc_depth` deep
/// (at most LV_MAX_DEPTH); returns the nodes of all its levels.
static int32_t lv_offsets(level_quadtree *lv, int32_t alloc_depth)
{
    lv->offset[0] = 0;
    for (int l = 0; l <= alloc_depth; ++l)
        lv->offset[l + 1] = lv->offset[l] + (1 << (2 * l));
    return lv->offset[alloc_depth + 1];
}

static qg_status level_quadtree_init(qg_index *index)
{
    level_quadtree *lv = (level_quadtree *)index;
    lv->alloc_depth = index->config.max_depth;
    lv_set_world(lv, index->config.bounds, lv->alloc_depth);
    lv->node_count = lv_offsets(lv, lv->alloc_depth);
    lv->nodes = qg_mem_alloc(&index->alloc, (size_t)lv->node_count * sizeof(lv_node));
    if (lv->nodes == NULL)
        return QG_ERR_NOMEM;
    for (int32_t i = 0; i < lv->node_count; ++i)
        lv->nodes[i] = (lv_node){-1, 0};
    return QG_OK;
}

static void level_quadtree_destroy(qg_index *index)
{
    level_quadtree *lv = (level_quadtree *)index;
    qg_mem_free(&index->alloc, lv->nodes, (size_t)lv->node_count * sizeof(lv_node));
    lv->nodes = NULL;
    qg_array_free(&index->alloc, (void **)&lv->links, &lv->link_capacity, sizeof(lv_link));
}

static qg_status level_quadtree_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    level_quadtree *lv = (level_quadtree *)index;
    if (!qg_txn_reserve(txn, (void **)&lv->links, &lv->link_capacity, sizeof(lv_link), (int64_t)h + 1))
        return QG_ERR_NOMEM;
    qg_tree_note(&lv->world, box);
    const lv_cell c = lv_locate(lv, box);
    lv_link_in(lv, lv_index(lv, c), h);
    lv_count_up(lv, c, 1);
    return QG_OK;
}

/// qg_insert_many: the links reserved once for the highest handle, then
/// every insert, none of which can fail. A batch that lacks memory so fails
/// before it changes anything and holds what it held (one by one, a late
/// failure kept the links the earlier inserts grew).
static qg_status level_quadtree_insert_many(qg_index *index, qg_txn *txn, const qg_handle *handles, int32_t n)
{
    level_quadtree *lv = (level_quadtree *)index;
    qg_handle top = 0;
    for (int32_t i = 0; i < n; ++i)
        top = handles[i] > top ? handles[i] : top;
    if (!qg_txn_reserve(txn, (void **)&lv->links, &lv->link_capacity, sizeof(lv_link), (int64_t)top + 1))
        return QG_ERR_NOMEM;
    for (int32_t i = 0; i < n; ++i) {
        const qg_rect box = index->boxes[handles[i]];
        qg_tree_note(&lv->world, box);
        const lv_cell c = lv_locate(lv, box);
        lv_link_in(lv, lv_index(lv, c), handles[i]);
        lv_count_up(lv, c, 1);
    }
    return QG_OK;
}

static void level_quadtree_remove(qg_index *index, qg_handle h)
{
    level_quadtree *lv = (level_quadtree *)index;
    const int32_t node = lv->links[h].node;
    lv_link_out(lv, h);
    lv_count_up(lv, lv_cell_of(lv, node), -1);
}

static QG_NOINLINE qg_status level_quadtree_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    (void)txn;
    level_quadtree *lv = (level_quadtree *)index;
    index->boxes[h] = box;
    qg_tree_note(&lv->world, box);
    lv_cell to = lv_locate(lv, box);
    const int32_t old = lv->links[h].node, now = lv_index(lv, to);
    if (old == now)
        return QG_OK;
    lv_link_out(lv, h);
    lv_link_in(lv, now, h);
    // Counts change only below the common ancestor of the two nodes.
    lv_cell from = lv_cell_of(lv, old);
    while (from.level > to.level) {
        lv->nodes[lv_index(lv, from)].total--;
        from = lv_parent(from);
    }
    while (to.level > from.level) {
        lv->nodes[lv_index(lv, to)].total++;
        to = lv_parent(to);
    }
    while (from.x != to.x || from.y != to.y) {
        lv->nodes[lv_index(lv, from)].total--;
        lv->nodes[lv_index(lv, to)].total++;
        from = lv_parent(from);
        to = lv_parent(to);
    }
    return QG_OK;
}

/// Relinks every element under a new world. Allocation-free: every level is
/// already there.
static void lv_rebuild(level_quadtree *lv, qg_rect world, double size)
{
    qg_index *ix = &lv->base;
    // Cells a little over the larger of the configured and the measured
    // element size, within the levels allocated.
    const double es = (double)ix->config.element_size > size ? (double)ix->config.element_size : size;
    lv_set_world(lv, world, qg_tree_depth_for(qg_tree_extent(world), es, lv->alloc_depth));
    for (int32_t i = 0; i < lv->node_count; ++i)
        lv->nodes[i] = (lv_node){-1, 0};
    for (qg_handle h = ix->box_high - 1; h >= 0; --h) {
        if (!qg_slot_live(ix, h))
            continue;
        const lv_cell c = lv_locate(lv, ix->boxes[h]);
        lv_link_in(lv, lv_index(lv, c), h);
        lv_count_up(lv, c, 1);
    }
}

static void level_quadtree_cleanup(qg_index *index)
{
    // Nothing is deferred (nodes never split or merge) but the re-fit check:
    // O(1) unless a sixteenth of the moves since the last scan ended outside
    // the world or the population doubled or halved since it.
    level_quadtree *lv = (level_quadtree *)index;
    qg_rect world;
    double size;
    if (qg_tree_scan_due(&lv->world, index->count) && qg_tree_fit(&lv->world, index, -1, false, &world, &size))
        lv_rebuild(lv, world, size);
}

static void level_quadtree_clear(qg_index *index)
{
    level_quadtree *lv = (level_quadtree *)index;
    for (int32_t i = 0; i < lv->node_count; ++i)
        lv->nodes[i] = (lv_node){-1, 0};
    // Back to the configured world: the next elements may be anywhere.
    lv->depth = lv->alloc_depth;
    qg_tree_world_reset(&lv->world, index->config.bounds, 1 << lv->depth);
}

/// Bits 0-3: the children of c whose cells overlap the integer box b.
static inline unsigned lv_child_mask(const level_quadtree *lv, lv_cell c, lv_ibox b)
{
    const int s = lv->depth - c.level - 1; // children's cells are 2^s units
    return qg_tree_quadrants((2 * c.x + 1) << s, (2 * c.y + 1) << s, b);
}

static inline lv_cell lv_child(lv_cell c, int i)
{
    return (lv_cell){c.level + 1, 2 * c.x + (i & 1), 2 * c.y + (i >> 1)};
}

static void level_quadtree_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                                 qg_query_stats *stats)
{
    const level_quadtree *lv = (const level_quadtree *)index;
    const lv_ibox qb = lv_map_box(lv, area);
    lv_cell stack[LV_STACK];
    int top = 0;
    stack[top++] = (lv_cell){0, 0, 0};
    while (top > 0) {
        const lv_cell c = stack[--top];
        const lv_node n = lv->nodes[lv_index(lv, c)];
        stats->nodes_visited++;
        int32_t own = 0;
        for (int32_t h = n.head; h >= 0; h = lv->links[h].next) {
            own++;
            if (qg_overlaps(index->boxes[h], area) && !fn(h, user))
                return;
        }
        stats->elements_tested += own;
        if (c.level == lv->depth || n.total == own)
            continue; // no descendant holds anything
        const unsigned mask = lv_child_mask(lv, c, qb);
        for (int i = 3; i >= 0; --i) {
            if (!(mask >> i & 1))
                continue;
            const lv_cell child = lv_child(c, i);
            if (lv->nodes[lv_index(lv, child)].total > 0)
                stack[top++] = child;
        }
    }
}

/// Element a (box ra, integer box b) of node c against the elements of c's
/// descendants whose cells b overlaps; false when the callback stopped.
static bool lv_pairs_below(const level_quadtree *lv, lv_cell c, qg_handle a, qg_rect ra, lv_ibox b,
                           qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    lv_cell stack[LV_STACK];
    int top = 0;
    stack[top++] = c;
    while (top > 0) {
        const lv_cell n = stack[--top];
        const unsigned mask = lv_child_mask(lv, n, b);
        for (int i = 3; i >= 0; --i) {
            if (!(mask >> i & 1))
                continue;
            const lv_cell child = lv_child(n, i);
            const lv_node cn = lv->nodes[lv_index(lv, child)];
            if (cn.total == 0)
                continue;
            stats->nodes_visited++;
            int32_t own = 0;
            for (int32_t h = cn.head; h >= 0; h = lv->links[h].next) {
                own++;
                if (qg_overlaps(ra, lv->base.boxes[h]) && !qg_report_pair(fn, user, a, h))
                    return false;
            }
            stats->elements_tested += own;
            if (child.level < lv->depth && cn.total > own)
                stack[top++] = child;
        }
    }
    return true;
}

/// Pairs among the elements of one node; false when the callback stopped.
static bool lv_pairs_within(const level_quadtree *lv, int32_t head, int32_t count, qg_pair_fn *fn, void *user)
{
    const qg_rect *boxes = lv->base.boxes;
    if (count <= LV_GATHER) {
        qg_lanes L;
        qg_handle ids[LV_GATHER];
        int k = 0;
        for (int32_t h = head; h >= 0; h = lv->links[h].next) {
            ids[k] = h;
            qg_lanes_put(&L, k++, boxes[h]);
        }
        qg_lanes_end(&L, k);
        uint64_t hit[LV_GATHER];
        return qg_lanes_self(&L, k, hit) == 0 || qg_lanes_report(ids, k, ids, hit, fn, user);
    }
    for (int32_t a = head; a >= 0; a = lv->links[a].next) {
        const qg_rect ra = boxes[a];
        for (int32_t b = lv->links[a].next; b >= 0; b = lv->links[b].next) {
            if (qg_overlaps(ra, boxes[b]) && !qg_report_pair(fn, user, a, b))
                return false;
        }
    }
    return true;
}

static void level_quadtree_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    const level_quadtree *lv = (const level_quadtree *)index;
    lv_cell stack[LV_STACK];
    int top = 0;
    stack[top++] = (lv_cell){0, 0, 0};
    while (top > 0) {
        const lv_cell c = stack[--top];
        const lv_node n = lv->nodes[lv_index(lv, c)];
        stats->nodes_visited++;
        int32_t own = 0;
        for (int32_t h = n.head; h >= 0; h = lv->links[h].next)
            own++;
        stats->elements_tested += (int64_t)own * (own - 1) / 2;
        if (own >= 2 && !lv_pairs_within(lv, n.head, own, fn, user))
            return;
        if (c.level == lv->depth || n.total == own)
            continue;
        for (int32_t h = n.head; h >= 0; h = lv->links[h].next) {
            const qg_rect r = index->boxes[h];
            if (!lv_pairs_below(lv, c, h, r, lv_map_box(lv, r), fn, user, stats))
                return;
        }
        for (int i = 3; i >= 0; --i) {
            const lv_cell child = lv_child(c, i);
            if (lv->nodes[lv_index(lv, child)].total > 0)
                stack[top++] = child;
        }
    }
}

static void level_quadtree_stats(const qg_index *index, qg_stats *stats)
{
    const level_quadtree *lv = (const level_quadtree *)index;
    stats->nodes = lv->offset[lv->depth + 1]; // the levels in use
    stats->leaves = lv->offset[lv->depth + 1] - lv->offset[lv->depth];
    // The tree is complete; report the deepest level that holds anything,
    // walking only non-empty subtrees.
    lv_cell stack[LV_STACK];
    int top = 0;
    stack[top++] = (lv_cell){0, 0, 0};
    while (top > 0) {
        const lv_cell c = stack[--top];
        const lv_node n = lv->nodes[lv_index(lv, c)];
        if (n.head >= 0 && c.level > stats->max_depth_reached)
            stats->max_depth_reached = c.level;
        if (c.level == lv->depth)
            continue;
        for (int i = 3; i >= 0; --i) {
            const lv_cell child = lv_child(c, i);
            if (lv->nodes[lv_index(lv, child)].total > 0)
                stack[top++] = child;
        }
    }
}

static void level_quadtree_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    // Only the root and the nodes of non-empty subtrees: the full tree can
    // hold millions of nodes, nearly all of them empty.
    const level_quadtree *lv = (const level_quadtree *)index;
    lv_cell stack[LV_STACK];
    int top = 0;
    stack[top++] = (lv_cell){0, 0, 0};
    while (top > 0) {
        const lv_cell c = stack[--top];
        const lv_node n = lv->nodes[lv_index(lv, c)];
        int32_t own = 0;
        for (int32_t h = n.head; h >= 0; h = lv->links[h].next)
            own++;
        fn(qg_tree_cell_rect(&lv->world, c.x, c.y, 1, 1 << c.level), c.level, own, user);
        if (c.level == lv->depth)
            continue;
        for (int i = 3; i >= 0; --i) {
            const lv_cell child = lv_child(c, i);
            if (lv->nodes[lv_index(lv, child)].total > 0)
                stack[top++] = child;
        }
    }
}

static qg_status level_quadtree_validate(const qg_index *index, size_t *bytes)
{
    const level_quadtree *lv = (const level_quadtree *)index;
    if (lv->depth < 0 || lv->depth > lv->alloc_depth || lv->alloc_depth > LV_MAX_DEPTH ||
        lv->node_count != lv->offset[lv->alloc_depth + 1] ||
        lv->link_capacity < index->box_high)
        return QG_ERR_INVALID;
    // Every live element is in the node its box locates, and its links agree
    // with its neighbours'.
    int64_t live = 0;
    for (qg_handle h = 0; h < index->box_high; ++h) {
        if (!qg_slot_live(index, h))
            continue;
        const lv_link l = lv->links[h];
        if (l.node != lv_index(lv, lv_locate(lv, index->boxes[h])))
            return QG_ERR_INVALID;
        if (l.prev >= 0 ? (l.prev >= index->box_high || lv->links[l.prev].next != h) : lv->nodes[l.node].head != h)
            return QG_ERR_INVALID;
        if (l.next >= 0 && (l.next >= index->box_high || lv->links[l.next].prev != h))
            return QG_ERR_INVALID;
        live++;
    }
    // Every list holds only live elements of that node, and the subtree
    // counts add up. Only non-empty subtrees are walked (the tree can hold
    // millions of nodes): an element anywhere else was found above by its
    // link but is missed here, and the totals then disagree.
    int64_t listed = 0;
    lv_cell stack[LV_STACK];
    int top = 0;
    stack[top++] = (lv_cell){0, 0, 0};
    while (top > 0) {
        const lv_cell c = stack[--top];
        const int32_t i = lv_index(lv, c);
        int64_t own = 0;
        for (int32_t h = lv->nodes[i].head; h >= 0; h = lv->links[h].next) {
            if (!qg_slot_live(index, h) || lv->links[h].node != i || ++own > index->count)
                return QG_ERR_INVALID;
        }
        listed += own;
        int64_t sum = own;
        if (c.level < lv->depth) {
            for (int k = 3; k >= 0; --k) {
                const lv_cell child = lv_child(c, k);
                const lv_node cn = lv->nodes[lv_index(lv, child)];
                if (cn.total < 0 || (cn.total == 0 && cn.head >= 0))
                    return QG_ERR_INVALID;
                sum += cn.total;
                if (cn.total > 0)
                    stack[top++] = child;
            }
        }
        if (sum != lv->nodes[i].total)
            return QG_ERR_INVALID;
    }
    if (listed != live || lv->nodes[0].total != index->count)
        return QG_ERR_INVALID;
    *bytes += (size_t)lv->node_count * sizeof(lv_node) + (size_t)lv->link_capacity * sizeof(lv_link);
    return QG_OK;
}

/// qg_raycast: nodes near to far by the parameter at which the segment
/// enters their regions, a node's own elements tested when it is reached,
/// empty subtrees (total 0) never entered. Each element is in one node, and
/// that node's cell holds the element's clamped integer box, so the cell's
/// world region (qg_tree_region: border sides infinite, inner sides pushed
/// out by a hair for rounding) holds its float box, and so do the regions of
/// all the cell's ancestors: a node the segment misses, or enters past the
/// current max_t, holds no hit left to report below it (a tie at max_t is
/// still entered). Each element reported once, by its node.
static void level_quadtree_raycast(const qg_index *index, float ox, float oy, float dx, float dy, float max_t,
                                   qg_ray_fn *fn, void *user)
{
    const level_quadtree *lv = (const level_quadtree *)index;
    const float reach = fabsf(ox) > fabsf(oy) ? fabsf(ox) : fabsf(oy);
    const qg_tree_frame f = qg_tree_frame_make(&lv->world, 1 << lv->depth, reach);
    qg_tree_ray r = qg_tree_ray_start(ox, oy, dx, dy, max_t, fn, user);
    qg_tree_pending stack[LV_STACK];
    int top = 0;
    stack[top++] = (qg_tree_pending){{0, 0, 0, 0}, 0.0f}; // depth holds the level
    while (top > 0) {
        const qg_tree_pending p = stack[--top];
        if (p.key > r.r.max_t)
            continue;
        const lv_cell c = {p.c.depth, p.c.x, p.c.y};
        const lv_node n = lv->nodes[lv_index(lv, c)];
        int32_t own = 0;
        for (int32_t h = n.head; h >= 0; h = lv->links[h].next) {
            own++;
            if (!qg_tree_ray_offer(&r, h, index->boxes[h]))
                return;
        }
        if (c.level == lv->depth || n.total == own)
            continue;
        const int shift = lv->depth - c.level;
        float t0[4];
        const unsigned hit = qg_tree_child_spans(&r, &f, c.x << shift, c.y << shift, 1 << shift, t0);
        qg_tree_pending ch[4];
        int k = 0;
        for (int i = 0; i < 4; ++i) {
            const lv_cell cc = lv_child(c, i);
            if ((hit >> i & 1) && lv->nodes[lv_index(lv, cc)].total > 0)
                ch[k++] = (qg_tree_pending){{0, cc.x, cc.y, cc.level}, t0[i]};
        }
        qg_tree_push_sorted(stack, &top, ch, k);
    }
}

/// qg_nearest: depth first, children nearest first by the distance2 to
/// their regions, skipping empty subtrees and every node farther than the
/// k-th best so far (qg_near_bound; a tie is still entered, it may win on
/// its handle). A region holds the boxes of every element at or below its
/// node (see level_quadtree_raycast), so its distance2 is at most theirs.
static int32_t level_quadtree_nearest(const qg_index *index, float x, float y, int32_t k, float max_distance2,
                                      qg_handle *handles, float *distances2)
{
    (void)distances2;
    const level_quadtree *lv = (const level_quadtree *)index;
    const qg_tree_frame f = qg_tree_frame_make(&lv->world, 1 << lv->depth, 0.0f);
    qg_near c;
    qg_near_start(&c, index, x, y, k, max_distance2, handles);
    c.once = true; // each element is listed in one node or cell
    // Each pop pushes at most 5: its own elements and 4 children.
    qg_tree_pending stack[4 * (LV_MAX_DEPTH + 2)];
    int top = 0;
    stack[top++] = (qg_tree_pending){{0, 0, 0, 0}, 0.0f}; // node 1: the node's own elements only
    while (top > 0) {
        const qg_tree_pending p = stack[--top];
        if (p.key > qg_near_bound(&c))
            continue;
        const lv_cell cell = {p.c.depth, p.c.x, p.c.y};
        const lv_node n = lv->nodes[lv_index(lv, cell)];
        if (p.c.node == 1 || cell.level == lv->depth) {
            for (int32_t h = n.head; h >= 0; h = lv->links[h].next)
                qg_near_offer(&c, h, qg_point_box_d2_fast(index->boxes[h], x, y));
            continue;
        }
        // The node's own elements after its children: they straddle its
        // centre lines, most far from the point, and by then the k best
        // so far turn nearly all of them away at the first comparison.
        if (n.head >= 0)
            stack[top++] = (qg_tree_pending){{1, cell.x, cell.y, cell.level}, p.key};
        const int shift = lv->depth - cell.level;
        const float bound = qg_near_bound(&c);
        float d2[4];
        qg_tree_child_d2(&f, cell.x << shift, cell.y << shift, 1 << shift, x, y, d2);
        qg_tree_pending ch[4];
        int m = 0;
        for (int i = 0; i < 4; ++i) {
            const lv_cell cc = lv_child(cell, i);
            if (!(d2[i] > bound) && lv->nodes[lv_index(lv, cc)].total > 0)
                ch[m++] = (qg_tree_pending){{0, cc.x, cc.y, cc.level}, d2[i]};
        }
        qg_tree_push_sorted(stack, &top, ch, m);
    }
    return qg_near_finish(&c);
}

/// The level quadtree places a box in the deepest cell that holds it whole:
/// cells sized for the median leave half the boxes a level up, so it is
/// sized for the 97th percentile (measured: 1.14-1.2x the best hand tuning
/// at 200,000 from the median, the best being the largest box).
static void level_quadtree_tune_config(qg_config *c, const qg_learned *learned)
{
    c->element_size = learned->bound;
}

static const qg_tune_rule level_quadtree_tune = {
    .hint = qg_tree_tune_hint,
    .differs = qg_tree_tune_differs,
    .config = level_quadtree_tune_config,
    .stats = qg_tree_tune_stats,
};

/// Reading a snapshot: what level_quadtree_validate cannot see, as it walks
/// only the non-empty subtrees. A node below an empty one, or on a level
/// past the one in use, holds nothing and counts nothing (an insert there
/// would otherwise make its hostile list reachable and link into it), and a
/// list's head is a live element that names the node as its own.
static bool lv_read_check(const level_quadtree *lv)
{
    const qg_index *ix = &lv->base;
    for (int32_t l = 0; l <= lv->alloc_depth; ++l) {
        for (int32_t r = 0; r < (1 << (2 * l)); ++r) {
            const int32_t i = lv->offset[l] + r;
            const lv_node n = lv->nodes[i];
            if (n.total < 0 || n.head < -1 || (n.total == 0 && n.head >= 0) ||
                (l > lv->depth && n.total != 0))
                return false;
            if (l > 0 && n.total > 0) {
                const int32_t x = r & ((1 << l) - 1), y = r >> l;
                if (lv->nodes[lv_index(lv, lv_parent((lv_cell){l, x, y}))].total == 0)
                    return false;
            }
            if (n.head >= 0 && (n.head >= ix->box_high || n.head >= lv->link_capacity ||
                                !qg_slot_live(ix, n.head) || lv->links[n.head].node != i))
                return false;
        }
    }
    return true;
}

/// The state walk (state.h): the levels allocated and in use, the world
/// and its re-fit counts, every node (one block, its size a function of
/// alloc_depth: the lists' heads and the subtree counts) and the elements'
/// links (each list runs through them, in the order its elements are
/// reported). The offsets and node_count follow from alloc_depth: made
/// again, never carried.
static void level_quadtree_state(qg_state *s, qg_index *d, const qg_index *src)
{
    level_quadtree *dl = (level_quadtree *)d;
    const level_quadtree *sl = (const level_quadtree *)src;
    // d's block as it is now: a copy overwrites alloc_depth below.
    const size_t dbytes = (size_t)dl->node_count * sizeof(lv_node);
    QG_ST(s, dl, sl, alloc_depth);
    QG_ST(s, dl, sl, depth);
    if (qg_st_reading(s) && qg_st_ok(s) &&
        (dl->alloc_depth < 1 || dl->alloc_depth > LV_MAX_DEPTH || dl->depth < 0 || dl->depth > dl->alloc_depth ||
         !qg_tree_config_ok(&d->config, LV_MAX_DEPTH))) {
        qg_st_fail(s, QG_ERR_INVALID);
        return;
    }
    qg_tree_world_state(s, &dl->world, &sl->world);
    if (s->mode == QG_ST_READ) {
        // The block's size from the alloc_depth just read; node_count is set
        // once the block is there (destroy frees node_count nodes).
        const int32_t n = lv_offsets(dl, dl->alloc_depth);
        if (qg_st_block(s, (void **)&dl->nodes, 0, NULL, (size_t)n * sizeof(lv_node)))
            dl->node_count = n;
    } else if (qg_st_block(s, (void **)&dl->nodes, dbytes, sl->nodes, (size_t)sl->node_count * sizeof(lv_node)) &&
               s->mode == QG_ST_COPY) {
        memcpy(dl->offset, sl->offset, sizeof dl->offset);
        dl->node_count = sl->node_count;
    }
    qg_st_array(s, (void **)&dl->links, &dl->link_capacity, sl->links, sl->link_capacity,
                qg_tree_slots_used(sl->link_capacity, src->box_high), sizeof(lv_link));
    if (qg_st_reading(s) && qg_st_ok(s) && (!qg_tree_world_ok(&dl->world, 1 << dl->depth) || !lv_read_check(dl)))
        qg_st_fail(s, QG_ERR_INVALID);
}

QG_KIND_CLASS_EX(level_quadtree, QG_LEVEL_QUADTREE, level_quadtree, .tune = &level_quadtree_tune, .state = level_quadtree_state, .raycast = level_quadtree_raycast,
                 .nearest = level_quadtree_nearest, .insert_many = level_quadtree_insert_many);
