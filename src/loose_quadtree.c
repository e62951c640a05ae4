// SPDX-License-Identifier: MIT
// QG_LOOSE_QUADTREE: the loose quadtree (docs/kinds.md).
//
// - Learning (tune.c): as QG_QUADTREE: element_size = the median
//   larger side sets max_depth; the world is the elements' bounding box.
// - A node is 20 bytes, as in the text: its loose box (float rect[4]) and
//   `children`, negative for a branch (minus the first of its 4 contiguous
//   children) and non-negative for a leaf (its first element + 1; 0 is an
//   empty leaf). Blocks of 4 children are freed and reused through a free
//   list, as in QG_QUADTREE.
// - An element is treated as its centre point: it is in exactly one leaf,
//   the one whose cell holds its centre, so the largest element costs no
//   more memory than the smallest. Every node on the way down grows its box
//   to contain the element's box, so a node's box always holds the boxes of
//   everything below it. A leaf over leaf_capacity splits at its centre,
//   moving its elements to children by centre and growing their boxes.
// - qg_cleanup recomputes every box bottom-up from what the node holds (the
//   only place boxes shrink) and merges every branch whose 4 children are
//   leaves holding at most leaf_capacity elements in all back into one leaf
//   (in one pass: a parent is finished after its children, so merges
//   cascade). Staying fresh: the elements' lists are threaded
//   through per-handle records, so they have no pool to scatter; what aged
//   was the tree itself. Leaves split when a ninth element came in and,
//   before merging, came back only when all 4 children were empty, so a
//   tree of moving agents only deepened: nearly twice the nodes after 300
//   frames of `agents` (84,000 instead of 45,000 at 100,000), every one
//   walked by each qg_pairs and held in memory. Merging needs no memory and
//   keeps an aged tree the size of a fresh one.
// - Queries descend into every child whose box overlaps the area, and test
//   the float boxes of the elements of the leaves reached: exact.
// - Pairs: a dual-tree walk over pairs of nodes whose boxes overlap (a node
//   with itself, then its children with each other), splitting the larger
//   node of a pair until both are leaves. Each element is in one leaf and
//   each pair of leaves is reached once, so each pair is reported once.
// - Cells are never stored: a centre is mapped to integer coordinates
//   (conservative and monotonic, as in QG_QUADTREE) and its bits pick the
//   child at each depth. Centres outside the world clamp to the border
//   cells; the loose boxes make that correct anyway.
// - The configured bounds are a hint, as in QG_QUADTREE: the tree maps its
//   own square world, re-fitted in qg_cleanup to the elements when a
//   sixteenth of them lie outside it (the new world takes in the old one,
//   half as wide again) or when they fill less than an eighth of it on both
//   axes (bounds [-3e38, 3e38] around agents in [0, 5000]). Inserts and
//   moves count the boxes that end outside (four comparisons); cleanup scans
//   the boxes only when a sixteenth of the moves since the last scan did, or
//   the population doubled or halved. A re-fit rebuilds the tree in the
//   nodes the old one held (an element needs no node of its own), splitting
//   level by level; leaves left over-full are split by the next insert or
//   move, which may allocate. The new max_depth puts the smallest cells at
//   the elements' mean size (or element_size, if larger), under a max_depth
//   the user chose. The mapping is computed in double: any finite bounds.
// - Ray casts and nearest searches walk the tree themselves,
//   depth first with an explicit stack, children near first (by the
//   segment's entry parameter into their boxes, by distance2 to them),
//   skipping a node the segment misses or enters past the current max_t, or
//   whose distance2 passes the k-th best (strictly: ties are still entered).
//   A node's box holds its elements' float boxes, and both the ray test's
//   slab parameters and the distance are monotonic in a box's sides, so a
//   node's interval holds its elements' and its distance2 is at most
//   theirs: no widening, nothing skipped. (One exception, handled in
//   qg_tree_span: a direction so small that 1 / d is infinite, with the
//   origin on a node's side, gives 0 * inf = NaN there; that axis then
//   narrows nothing.) One leaf per element: each reported once.
// - qg_insert_many places the elements in the Morton order of their centres
//   (one radix sort), so consecutive descents share their nodes in cache and
//   a leaf fills and splits while hot: a bulk build of 1,000,000 boxes takes
//   about half the time.
#include "tree_common.h"
#include "kind.h"
#include "state.h"

#define LQ_BITS QG_TREE_BITS
#define LQ_SIDE QG_TREE_SIDE
#define LQ_DEFAULT_DEPTH 8
#define LQ_DEFAULT_CAPACITY 8
#define LQ_STACK QG_TREE_STACK
/// Post-order cleanup: a node, its finishing mark and its 4 children per
/// level.
#define LQ_POST_STACK (5 * LQ_BITS + 8)
/// What a branch that stayed a branch counts as in qg_cleanup's merge
/// test: more than any leaf_capacity, even summed 4 times.
#define LQ_HELD_BRANCH (INT32_MAX / 4)
/// Dual-tree pair walk: a node with itself pushes 10 pairs, a split pair 4,
/// and a pair descends at most twice the depth from where it started.
#define LQ_PAIR_STACK (10 * (LQ_BITS + 1) + 4 * 2 * (LQ_BITS + 1) + 16)
/// Leaves up to this size are copied to the C stack for the pair loops.
#define LQ_GATHER QG_LANES

typedef struct lq_node {
    float rect[4];    ///< min_x, min_y, max_x, max_y; empty: +max, -max
    int32_t children; ///< branch: -(first child); leaf: first element + 1, 0 if empty
} lq_node;
_Static_assert(sizeof(lq_node) == 20, "a loose quadtree node is 20 bytes");

typedef struct lq_elem {
    int32_t leaf; ///< the leaf holding the element
    int32_t next; ///< next element of that leaf, -1 ends
} lq_elem;

typedef struct lq_point {
    int32_t x, y;
} lq_point;

typedef struct lq_pair {
    int32_t a, b; ///< a == b: the node with itself
} lq_pair;

typedef struct loose_quadtree {
    qg_index base;
    lq_node *nodes;
    int32_t node_capacity;
    int32_t node_high;
    int32_t free_block; ///< first node of the first free block of 4, -1 if none
    int32_t free_blocks;
    lq_elem *elems; ///< per handle
    int32_t elem_capacity;
    uint8_t *depths; ///< per handle: depth of its leaf
    int32_t depth_capacity;
    qg_tree_world world;
    int32_t max_depth, leaf_capacity;
    int32_t depth_cap; ///< a re-fit's max_depth: the configured one if the user chose it, else LQ_BITS
    bool resplit;      ///< a re-fit left over-full leaves: the next insert or move splits them
} loose_quadtree;

static inline bool lq_is_branch(lq_node n)
{
    return n.children < 0;
}

static inline int32_t lq_first_child(lq_node n)
{
    return -n.children;
}

static inline int32_t lq_head(lq_node n)
{
    return n.children - 1;
}

static inline void lq_set_empty(lq_node *n)
{
    n->rect[0] = n->rect[1] = FLT_MAX;
    n->rect[2] = n->rect[3] = -FLT_MAX;
}

/// True when the node holds nothing: its box is still the empty one (an
/// empty box would look whole to the ray test once its slabs are swapped).
static inline bool lq_empty(const lq_node *n)
{
    return n->rect[0] > n->rect[2];
}

static inline void lq_grow(lq_node *n, qg_rect r)
{
    n->rect[0] = r.min_x < n->rect[0] ? r.min_x : n->rect[0];
    n->rect[1] = r.min_y < n->rect[1] ? r.min_y : n->rect[1];
    n->rect[2] = r.max_x > n->rect[2] ? r.max_x : n->rect[2];
    n->rect[3] = r.max_y > n->rect[3] ? r.max_y : n->rect[3];
}

static inline void lq_grow_rect(lq_node *n, const float *r)
{
    lq_grow(n, (qg_rect){r[0], r[1], r[2], r[3]});
}

static inline bool lq_holds(const lq_node *n, qg_rect r)
{
    return (n->rect[0] <= r.min_x) & (n->rect[1] <= r.min_y) & (n->rect[2] >= r.max_x) & (n->rect[3] >= r.max_y);
}

static inline qg_rect lq_rect(const lq_node *n)
{
    return (qg_rect){n->rect[0], n->rect[1], n->rect[2], n->rect[3]};
}

/// The integer centre of a box (halves first: the sum could overflow).
static inline lq_point lq_centre(const loose_quadtree *lq, qg_rect r)
{
    const qg_tree_world *w = &lq->world;
    return (lq_point){qg_tree_map(r.min_x * 0.5f + r.max_x * 0.5f, w->box.min_x, w->scale_x, LQ_SIDE),
                      qg_tree_map(r.min_y * 0.5f + r.max_y * 0.5f, w->box.min_y, w->scale_y, LQ_SIDE)};
}

/// The shared walks' view of a node: its first child, -1 for a leaf.
static int32_t lq_children(const void *tree, int32_t node)
{
    const lq_node n = ((const loose_quadtree *)tree)->nodes[node];
    return lq_is_branch(n) ? lq_first_child(n) : -1;
}

/// Which child of a node at `depth` holds point p.
static inline int lq_child_of(lq_point p, int depth)
{
    const int shift = LQ_BITS - 1 - depth;
    return ((p.x >> shift) & 1) | ((p.y >> shift) & 1) << 1;
}

/// True when p and q fall in the same cell of the given depth.
static inline bool lq_same_cell(lq_point p, lq_point q, int depth)
{
    const int shift = LQ_BITS - depth;
    return ((p.x >> shift) == (q.x >> shift)) & ((p.y >> shift) == (q.y >> shift));
}

static int32_t lq_leaf_count(const loose_quadtree *lq, int32_t node)
{
    int32_t k = 0;
    for (int32_t h = lq_head(lq->nodes[node]); h >= 0; h = lq->elems[h].next)
        k++;
    return k;
}

static inline void lq_link(loose_quadtree *lq, int32_t node, qg_handle h, int depth)
{
    lq_node *n = &lq->nodes[node];
    lq->elems[h] = (lq_elem){node, lq_head(*n)};
    n->children = h + 1;
    lq->depths[h] = (uint8_t)depth;
}

static void lq_unlink(loose_quadtree *lq, qg_handle h)
{
    lq_node *n = &lq->nodes[lq->elems[h].leaf];
    const int32_t next = lq->elems[h].next;
    int32_t e = lq_head(*n);
    if (e == h) {
        n->children = next + 1;
        return;
    }
    while (lq->elems[e].next != h)
        e = lq->elems[e].next;
    lq->elems[e].next = next;
}

/// Splits leaf `node` at `depth` once if it is over capacity: 1 when it
/// split, 0 when it need not, -1 when the memory was not there. Splitting is
/// upkeep, not meaning: without memory the leaf stays larger (answers do not
/// change) and a later insert tries again. With `grow` false it uses only
/// the nodes already held (qg_cleanup's re-fit, which must not allocate).
static int lq_split_leaf(loose_quadtree *lq, int32_t node, int depth, bool grow)
{
    if (depth >= lq->max_depth || lq_leaf_count(lq, node) <= lq->leaf_capacity)
        return 0;
    if (lq->free_block < 0) {
        if (!grow) {
            if (lq->node_high + 4 > lq->node_capacity)
                return -1;
        } else {
            qg_txn txn;
            qg_txn_begin(&txn, &lq->base.alloc);
            if (!qg_txn_reserve(&txn, (void **)&lq->nodes, &lq->node_capacity, sizeof(lq_node),
                                (int64_t)lq->node_high + 4))
                return -1;
        }
    }
    int32_t fc;
    if (lq->free_block >= 0) {
        fc = lq->free_block;
        lq->free_block = lq->nodes[fc].children;
        lq->free_blocks--;
    } else {
        fc = lq->node_high;
        lq->node_high += 4;
    }
    for (int i = 0; i < 4; ++i) {
        lq->nodes[fc + i].children = 0;
        lq_set_empty(&lq->nodes[fc + i]);
    }
    int32_t h = lq_head(lq->nodes[node]);
    lq->nodes[node].children = -fc;
    while (h >= 0) {
        const int32_t next = lq->elems[h].next;
        const qg_rect r = lq->base.boxes[h];
        const int32_t child = fc + lq_child_of(lq_centre(lq, r), depth);
        lq_link(lq, child, h, depth + 1);
        lq_grow(&lq->nodes[child], r);
        h = next;
    }
    return 1;
}

/// lq_split_leaf as the shared level-by-level split calls it.
static int lq_split_any(void *tree, qg_tree_cell c, bool grow)
{
    return lq_split_leaf(tree, c.node, c.depth, grow);
}

/// Splits leaf `node` if it is over capacity, then its children the same
/// way (allocating as needed).
static void lq_try_split(loose_quadtree *lq, int32_t node, int depth)
{
    if (lq_split_leaf(lq, node, depth, true) != 1)
        return;
    const int32_t fc = lq_first_child(lq->nodes[node]);
    for (int i = 0; i < 4; ++i)
        lq_try_split(lq, fc + i, depth + 1);
}

/// Puts h (box r) in the leaf holding its centre, growing the boxes on the
/// way, and splits that leaf if it is over capacity.
static void lq_place(loose_quadtree *lq, qg_handle h, qg_rect r)
{
    const lq_point p = lq_centre(lq, r);
    int32_t node = 0;
    int depth = 0;
    for (;;) {
        lq_node *n = &lq->nodes[node];
        lq_grow(n, r);
        if (!lq_is_branch(*n))
            break;
        node = lq_first_child(*n) + lq_child_of(p, depth);
        depth++;
    }
    lq_link(lq, node, h, depth);
    if (depth < lq->max_depth)
        lq_try_split(lq, node, depth);
}

static qg_status loose_quadtree_configure(qg_config *config)
{
    if (config->max_depth > LQ_BITS)
        config->max_depth = LQ_BITS; // integer cells would be empty below
    if (config->max_depth == 0)
        config->max_depth = qg_tree_chosen_depth(config, LQ_DEFAULT_DEPTH, LQ_BITS);
    if (config->leaf_capacity == 0)
        config->leaf_capacity = LQ_DEFAULT_CAPACITY;
    return QG_OK;
}

static void lq_reset_root(loose_quadtree *lq)
{
    lq->nodes[0].children = 0;
    lq_set_empty(&lq->nodes[0]);
    lq->node_high = 1;
    lq->free_block = -1;
    lq->free_blocks = 0;
}

static void lq_resplit_visit(const void *tree, qg_tree_cell c, int32_t children, void *ctx)
{
    (void)ctx;
    // The walk only reads; the tree it is given is not const (lq_resplit's).
    // It read `children` before this split, so it does not go into the new
    // leaves: lq_try_split has split them as far as they need.
    if (children < 0)
        lq_try_split((loose_quadtree *)tree, c.node, c.depth);
}

/// Splits every over-full leaf a re-fit left (it could use only the nodes it
/// had). Runs at the start of the next insert or move, where allocating is
/// allowed; a failed allocation leaves the leaf as it is.
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void lq_resplit(loose_quadtree *lq)
{
    lq->resplit = false;
    qg_tree_walk(lq, lq_children, lq_resplit_visit, NULL);
}

/// Rebuilds the tree over a new world without allocating: every element
/// starts in the root, then leaves split level by level while the nodes the
/// old tree held last, so a shortage leaves the whole tree a little shallow
/// rather than one corner deep and the rest in a pile.
static void lq_rebuild(loose_quadtree *lq, qg_rect world, double size, qg_handle skip, bool grow)
{
    qg_index *ix = &lq->base;
    qg_tree_world_set(&lq->world, world, LQ_SIDE);
    lq->max_depth = qg_tree_refit_depth(&ix->config, world, size, lq->depth_cap);
    lq_reset_root(lq);
    for (qg_handle h = ix->box_high - 1; h >= 0; --h) {
        if (qg_slot_live(ix, h) && h != skip) {
            lq_link(lq, 0, h, 0);
            lq_grow(&lq->nodes[0], ix->boxes[h]);
        }
    }
    lq->resplit = qg_tree_split_levels(lq, lq->max_depth, lq_children, lq_split_any, grow) < 0;
}

/// The re-fit check: O(1) unless a sixteenth of the moves since the last
/// scan ended outside the world or the population doubled or halved since
/// it. True when it rebuilt the tree. qg_cleanup calls it with `grow` false
/// (it must not allocate); qg_insert calls it with `grow` true (and `skip`
/// the element being inserted) when the population doubled, so a tree built
/// by inserts alone is fitted and fully split before its first pairs.
static bool lq_refit(loose_quadtree *lq, qg_handle skip, bool grow)
{
    qg_rect world;
    double size;
    if (!qg_tree_scan_due(&lq->world, lq->base.count) || !qg_tree_fit(&lq->world, &lq->base, skip, true, &world, &size))
        return false;
    lq_rebuild(lq, world, size, skip, grow);
    return true;
}

static qg_status loose_quadtree_init(qg_index *index)
{
    loose_quadtree *lq = (loose_quadtree *)index;
    const qg_config *config = &index->config;
    qg_tree_world_set(&lq->world, config->bounds, LQ_SIDE);
    lq->max_depth = config->max_depth;
    // A max_depth the user chose stays a bound; a chosen one is re-chosen.
    const int chosen = qg_tree_chosen_depth(config, LQ_DEFAULT_DEPTH, LQ_BITS);
    lq->depth_cap = config->max_depth == chosen ? LQ_BITS : config->max_depth;
    lq->leaf_capacity = index->config.leaf_capacity;
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    if (!qg_txn_reserve(&txn, (void **)&lq->nodes, &lq->node_capacity, sizeof(lq_node), 1))
        return QG_ERR_NOMEM;
    lq_reset_root(lq);
    return QG_OK;
}

static void loose_quadtree_destroy(qg_index *index)
{
    loose_quadtree *lq = (loose_quadtree *)index;
    qg_array_free(&index->alloc, (void **)&lq->nodes, &lq->node_capacity, sizeof(lq_node));
    qg_array_free(&index->alloc, (void **)&lq->elems, &lq->elem_capacity, sizeof(lq_elem));
    qg_array_free(&index->alloc, (void **)&lq->depths, &lq->depth_capacity, sizeof(uint8_t));
}

static qg_status loose_quadtree_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    loose_quadtree *lq = (loose_quadtree *)index;
    if (!qg_txn_reserve(txn, (void **)&lq->elems, &lq->elem_capacity, sizeof(lq_elem), (int64_t)h + 1) ||
        !qg_txn_reserve(txn, (void **)&lq->depths, &lq->depth_capacity, sizeof(uint8_t), (int64_t)h + 1))
        return QG_ERR_NOMEM;
    if (lq->resplit)
        lq_resplit(lq);
    if (qg_tree_grown(&lq->world, index->count))
        lq_refit(lq, h, true);
    qg_tree_note(&lq->world, box);
    lq_place(lq, h, box);
    return QG_OK;
}


/// qg_insert_many: one sort, then the elements go down the tree in the
/// order of their centres' cells, so each descent walks the nodes the last
/// one left in the cache and a leaf fills and splits while it is hot. The
/// result is what the same inserts one by one in that order would give,
/// with one re-fit check for the whole batch instead of one per doubling.
/// All or nothing: the per-handle arrays are reserved first, the only
/// failure; the sort's scratch is not needed for a correct tree (without
/// it the elements go down in the order given) and splitting without
/// memory leaves a leaf larger, as in any insert.
static qg_status loose_quadtree_insert_many(qg_index *index, qg_txn *txn, const qg_handle *handles, int32_t n)
{
    loose_quadtree *lq = (loose_quadtree *)index;
    qg_handle top = 0;
    for (int32_t i = 0; i < n; ++i)
        top = handles[i] > top ? handles[i] : top;
    if (!qg_txn_reserve(txn, (void **)&lq->elems, &lq->elem_capacity, sizeof(lq_elem), (int64_t)top + 1) ||
        !qg_txn_reserve(txn, (void **)&lq->depths, &lq->depth_capacity, sizeof(uint8_t), (int64_t)top + 1))
        return QG_ERR_NOMEM;
    if (lq->resplit)
        lq_resplit(lq);
    // Counted in for the re-fit check, as one insert at a time would have
    // counted them (index.c adds n once when this returns).
    index->count += n;
    // A re-fit rebuilds from every live slot, the new ones included.
    const bool rebuilt = qg_tree_grown(&lq->world, index->count) && lq_refit(lq, -1, true);
    index->count -= n;
    if (rebuilt)
        return QG_OK;
    for (int32_t i = 0; i < n; ++i)
        qg_tree_note(&lq->world, index->boxes[handles[i]]);
    const size_t bytes = (size_t)n * sizeof(uint64_t);
    uint64_t *key = n > 1 ? qg_mem_alloc(&index->alloc, 2 * bytes) : NULL;
    if (key == NULL) {
        for (int32_t i = 0; i < n; ++i)
            lq_place(lq, handles[i], index->boxes[handles[i]]);
        return QG_OK;
    }
    // Keys: the centre's cell (30 bits of Morton order) above the position
    // in `handles`.
    uint64_t *const block = key;
    for (int32_t i = 0; i < n; ++i) {
        const lq_point p = lq_centre(lq, index->boxes[handles[i]]);
        key[i] = (uint64_t)qg_tree_morton((uint32_t)p.x, (uint32_t)p.y) << 32 | (uint32_t)i;
    }
    key = qg_tree_sort_morton(key, key + n, n);
    // In this order the handles, boxes and per-handle records are read
    // and written anywhere: their loads are started well ahead.
    for (int32_t i = 0; i < n; ++i) {
#if defined(__GNUC__)
        if (i + 16 < n)
            __builtin_prefetch(&handles[(uint32_t)key[i + 16]]);
        if (i + 8 < n) {
            const qg_handle a = handles[(uint32_t)key[i + 8]];
            __builtin_prefetch(&index->boxes[a]);
            __builtin_prefetch(&lq->elems[a], 1);
            __builtin_prefetch(&lq->depths[a], 1);
        }
#endif
        const qg_handle h = handles[(uint32_t)key[i]];
        lq_place(lq, h, index->boxes[h]);
    }
    qg_mem_free(&index->alloc, block, 2 * bytes);
    return QG_OK;
}

static void loose_quadtree_remove(qg_index *index, qg_handle h)
{
    lq_unlink((loose_quadtree *)index, h); // boxes shrink in qg_cleanup
}

static QG_NOINLINE qg_status loose_quadtree_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    (void)txn;
    loose_quadtree *lq = (loose_quadtree *)index;
    if (lq->resplit)
        lq_resplit(lq);
    qg_tree_note(&lq->world, box);
    const lq_point p = lq_centre(lq, box);
    if (lq_same_cell(lq_centre(lq, index->boxes[h]), p, lq->depths[h])) {
        // Same leaf. Its box holds the new one: so do all its ancestors'.
        index->boxes[h] = box;
        if (lq_holds(&lq->nodes[lq->elems[h].leaf], box))
            return QG_OK;
        int32_t node = 0;
        for (int depth = 0;; ++depth) {
            lq_node *n = &lq->nodes[node];
            lq_grow(n, box);
            if (!lq_is_branch(*n))
                return QG_OK;
            node = lq_first_child(*n) + lq_child_of(p, depth);
        }
    }
    lq_unlink(lq, h);
    index->boxes[h] = box;
    lq_place(lq, h, box);
    return QG_OK;
}

/// Turns branch `node` at `depth`, whose 4 children (first fc) are leaves
/// holding at most leaf_capacity elements in all, back into one leaf: the
/// children's lists are chained into one (each element now names `node` as
/// its leaf, at `depth`), the leaf's box is the union of theirs, and the
/// block of 4 goes on the free list. Needs no memory.
static void lq_merge(loose_quadtree *lq, int32_t node, int depth, int32_t fc)
{
    int32_t head = -1, tail = -1;
    for (int i = 0; i < 4; ++i) {
        for (int32_t h = lq_head(lq->nodes[fc + i]); h >= 0; h = lq->elems[h].next) {
            lq->elems[h].leaf = node;
            lq->depths[h] = (uint8_t)depth;
            if (tail < 0)
                head = h;
            else
                lq->elems[tail].next = h;
            tail = h;
        }
    }
    if (tail >= 0)
        lq->elems[tail].next = -1;
    lq->nodes[fc].children = lq->free_block;
    lq->free_block = fc;
    lq->free_blocks++;
    lq->nodes[node].children = head + 1;
}

static void loose_quadtree_cleanup(qg_index *index)
{
    loose_quadtree *lq = (loose_quadtree *)index;
    if (lq_refit(lq, -1, false))
        return; // the rebuild computed every box
    const qg_rect *boxes = index->boxes;
    // Post-order: an entry >= 0 expands a node, ~node finishes it after its
    // children are finished. `depth` runs beside the entries; `held` is a
    // second stack with one entry per finished node: a leaf's element
    // count, or LQ_HELD_BRANCH for a node that stayed a branch. A branch
    // finished finds its 4 children's entries on top (child 3 last).
    //
    // A branch whose children are leaves holding at most leaf_capacity
    // elements in all becomes one leaf again, as a fresh build would have
    // left it: without that, a tree of moving agents only ever deepens
    // (leaves split when a ninth element comes in and stayed split), to
    // nearly twice the nodes after 300 frames of `agents`, every one of them
    // walked by each qg_pairs and held in memory.
    int32_t stack[LQ_POST_STACK];
    uint8_t depth[LQ_POST_STACK];
    int32_t held[LQ_POST_STACK];
    int top = 0, htop = 0;
    stack[top] = 0;
    depth[top++] = 0;
    while (top > 0) {
        --top;
        const int32_t s = stack[top];
        const int d = depth[top];
        if (s >= 0) {
            lq_node *n = &lq->nodes[s];
            if (!lq_is_branch(*n)) {
                int32_t k = 0;
                lq_set_empty(n);
                for (int32_t h = lq_head(*n); h >= 0; h = lq->elems[h].next) {
                    lq_grow(n, boxes[h]);
                    k++;
                }
                held[htop++] = k;
                continue;
            }
            stack[top] = ~s;
            depth[top++] = (uint8_t)d;
            for (int i = 3; i >= 0; --i) {
                stack[top] = lq_first_child(*n) + i;
                depth[top++] = (uint8_t)(d + 1);
            }
            continue;
        }
        lq_node *n = &lq->nodes[~s];
        const int32_t fc = lq_first_child(*n);
        int64_t total = 0;
        lq_set_empty(n);
        for (int i = 0; i < 4; ++i) {
            total += held[htop - 4 + i];
            lq_grow_rect(n, lq->nodes[fc + i].rect);
        }
        htop -= 4;
        if (total <= lq->leaf_capacity) {
            lq_merge(lq, ~s, d, fc);
            held[htop++] = (int32_t)total;
        } else {
            held[htop++] = LQ_HELD_BRANCH;
        }
    }
}

static void loose_quadtree_clear(qg_index *index)
{
    loose_quadtree *lq = (loose_quadtree *)index;
    lq_reset_root(lq);
    // Back to the configured world: the next elements may be anywhere.
    qg_tree_world_reset(&lq->world, index->config.bounds, LQ_SIDE);
    lq->max_depth = index->config.max_depth;
    lq->resplit = false;
}

static void loose_quadtree_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                                 qg_query_stats *stats)
{
    const loose_quadtree *lq = (const loose_quadtree *)index;
    int32_t stack[LQ_STACK];
    int top = 0;
    stack[top++] = 0;
    while (top > 0) {
        const lq_node n = lq->nodes[stack[--top]];
        stats->nodes_visited++;
        if (lq_is_branch(n)) {
            const int32_t fc = lq_first_child(n);
            for (int i = 3; i >= 0; --i) {
                if (qg_overlaps(lq_rect(&lq->nodes[fc + i]), area))
                    stack[top++] = fc + i;
            }
            continue;
        }
        for (int32_t h = lq_head(n); h >= 0; h = lq->elems[h].next) {
            stats->elements_tested++;
            if (qg_overlaps(index->boxes[h], area) && !fn(h, user))
                return;
        }
    }
}

/// Gathers the elements of leaf n whose boxes overlap `filter` into ids/r;
/// returns how many, or -1 when more than LQ_GATHER would.
static int lq_gather(const loose_quadtree *lq, lq_node n, qg_rect filter, qg_handle *ids, qg_lanes *L)
{
    int k = 0;
    for (int32_t h = lq_head(n); h >= 0; h = lq->elems[h].next) {
        const qg_rect b = lq->base.boxes[h];
        if (!qg_overlaps(b, filter))
            continue;
        if (k == LQ_GATHER)
            return -1;
        ids[k] = h;
        qg_lanes_put(L, k++, b);
    }
    qg_lanes_end(L, k);
    return k;
}

/// Pairs within one leaf; false when the callback stopped.
static bool lq_pairs_self(const loose_quadtree *lq, lq_node n, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    qg_handle ids[LQ_GATHER];
    qg_lanes L;
    const int k = lq_gather(lq, n, lq_rect(&n), ids, &L);
    if (k >= 0) {
        stats->elements_tested += (int64_t)k * (k - 1) / 2;
        uint64_t hit[LQ_GATHER];
        return qg_lanes_self(&L, k, hit) == 0 || qg_lanes_report(ids, k, ids, hit, fn, user);
    }
    const qg_rect *boxes = lq->base.boxes;
    for (int32_t a = lq_head(n); a >= 0; a = lq->elems[a].next) {
        const qg_rect ra = boxes[a];
        for (int32_t b = lq->elems[a].next; b >= 0; b = lq->elems[b].next) {
            stats->elements_tested++;
            if (qg_overlaps(ra, boxes[b]) && !qg_report_pair(fn, user, a, b))
                return false;
        }
    }
    return true;
}

/// Pairs between two different leaves. Only the elements of each that reach
/// into the other's box can take part.
static bool lq_pairs_cross(const loose_quadtree *lq, lq_node x, lq_node y, qg_pair_fn *fn, void *user,
                           qg_query_stats *stats)
{
    qg_handle ids[LQ_GATHER];
    qg_lanes L;
    const int k = lq_gather(lq, y, lq_rect(&x), ids, &L);
    const qg_rect yr = lq_rect(&y);
    for (int32_t a = lq_head(x); a >= 0; a = lq->elems[a].next) {
        const qg_rect ra = lq->base.boxes[a];
        if (!qg_overlaps(ra, yr))
            continue;
        if (k >= 0) {
            stats->elements_tested += k;
            for (uint64_t bits = qg_lanes_hits(&L, 0, k, ra); bits != 0; bits &= bits - 1) {
                if (!qg_report_pair(fn, user, a, ids[qg_ctz64(bits)]))
                    return false;
            }
        } else {
            for (int32_t b = lq_head(y); b >= 0; b = lq->elems[b].next) {
                stats->elements_tested++;
                if (qg_overlaps(ra, lq->base.boxes[b]) && !qg_report_pair(fn, user, a, b))
                    return false;
            }
        }
    }
    return true;
}

static inline float lq_area(const lq_node *n)
{
    return (n->rect[2] - n->rect[0]) * (n->rect[3] - n->rect[1]);
}

static void loose_quadtree_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    const loose_quadtree *lq = (const loose_quadtree *)index;
    const lq_node *nodes = lq->nodes;
    lq_pair stack[LQ_PAIR_STACK];
    int top = 0;
    stack[top++] = (lq_pair){0, 0};
    while (top > 0) {
        const lq_pair p = stack[--top];
        const lq_node a = nodes[p.a];
        stats->nodes_visited++;
        if (p.a == p.b) {
            if (!lq_is_branch(a)) {
                if (!lq_pairs_self(lq, a, fn, user, stats))
                    return;
                continue;
            }
            // Each child with itself, and each two children whose boxes meet.
            const int32_t fc = lq_first_child(a);
            for (int i = 3; i >= 0; --i) {
                const qg_rect ri = lq_rect(&nodes[fc + i]);
                for (int j = 3; j > i; --j) {
                    if (qg_overlaps(ri, lq_rect(&nodes[fc + j])))
                        stack[top++] = (lq_pair){fc + i, fc + j};
                }
                if (nodes[fc + i].children != 0)
                    stack[top++] = (lq_pair){fc + i, fc + i};
            }
            continue;
        }
        const lq_node b = nodes[p.b];
        if (!lq_is_branch(a) && !lq_is_branch(b)) {
            if (a.children != 0 && b.children != 0 && !lq_pairs_cross(lq, a, b, fn, user, stats))
                return;
            continue;
        }
        // Split the branch with the larger box (or the only branch); its
        // children that meet the other node's box pair with it.
        const bool split_a = lq_is_branch(a) && (!lq_is_branch(b) || lq_area(&a) >= lq_area(&b));
        const int32_t keep = split_a ? p.b : p.a;
        const qg_rect kr = lq_rect(&nodes[keep]);
        const int32_t fc = lq_first_child(split_a ? a : b);
        for (int i = 3; i >= 0; --i) {
            if (qg_overlaps(lq_rect(&nodes[fc + i]), kr))
                stack[top++] = (lq_pair){fc + i, keep};
        }
    }
}

static void loose_quadtree_stats(const qg_index *index, qg_stats *stats)
{
    qg_tree_stats(index, lq_children, stats);
}

static void lq_user_visit(const void *tree, qg_tree_cell c, int32_t children, void *ctx)
{
    // The loose box is what a query tests, so that is what is drawn; an
    // empty leaf has none and shows its cell instead.
    const loose_quadtree *lq = tree;
    const qg_tree_visit_ctx *v = ctx;
    const lq_node n = lq->nodes[c.node];
    qg_rect r = lq_rect(&n);
    if (!(r.min_x <= r.max_x))
        r = qg_tree_cell_rect(&lq->world, c.x, c.y, LQ_SIDE >> c.depth, LQ_SIDE);
    v->fn(r, c.depth, children >= 0 ? 0 : lq_leaf_count(lq, c.node), v->user);
}

static void loose_quadtree_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    qg_tree_visit_ctx v = {fn, user};
    qg_tree_walk(index, lq_children, lq_user_visit, &v);
}

/// Checks one node: a branch's children's boxes lie in its box; a leaf's
/// elements are live, linked to it, inside its box, and have their centres
/// in its cell.
static void lq_check_visit(const void *tree, qg_tree_cell c, int32_t fc, void *ctx)
{
    const loose_quadtree *lq = tree;
    qg_tree_check *k = ctx;
    if (!qg_tree_check_node(k, c, fc, lq->node_high, lq->max_depth))
        return;
    const lq_node n = lq->nodes[c.node];
    // A box is a box (no NaN, min <= max) or the empty one lq_set_empty
    // writes: growing any other keeps a min past its max (or a NaN), which
    // the parent's box need not hold, and the test below would skip it.
    if (!(n.rect[0] <= n.rect[2] && n.rect[1] <= n.rect[3]) &&
        !(n.rect[0] == FLT_MAX && n.rect[1] == FLT_MAX && n.rect[2] == -FLT_MAX && n.rect[3] == -FLT_MAX)) {
        k->ok = false;
        return;
    }
    if (fc >= 0) {
        // A child's box lies in its parent's (or is empty).
        for (int i = 0; i < 4; ++i) {
            const qg_rect r = lq_rect(&lq->nodes[fc + i]);
            if (r.min_x <= r.max_x && !lq_holds(&n, r))
                k->ok = false;
        }
        return;
    }
    int64_t len = 0;
    for (int32_t h = lq_head(n); h >= 0; h = lq->elems[h].next) {
        // A next below -1 ends the list here, but an unlink would copy it
        // into the leaf's `children` (next + 1), which then reads as a branch.
        if (h >= lq->base.box_high || !qg_slot_live(&lq->base, h) || ++len > lq->base.count ||
            lq->elems[h].next < -1) {
            k->ok = false;
            return;
        }
        const qg_rect r = lq->base.boxes[h];
        const lq_point p = lq_centre(lq, r);
        const int32_t size = LQ_SIDE >> c.depth;
        if (lq->elems[h].leaf != c.node || lq->depths[h] != c.depth || !lq_holds(&n, r) || p.x < c.x ||
            p.x >= c.x + size || p.y < c.y || p.y >= c.y + size)
            k->ok = false;
    }
    k->elements += len;
}

static qg_status loose_quadtree_validate(const qg_index *index, size_t *bytes)
{
    const loose_quadtree *lq = (const loose_quadtree *)index;
    if (!qg_tree_high_ok(lq->node_high, lq->node_capacity) || lq->elem_capacity < index->box_high ||
        lq->depth_capacity < index->box_high)
        return QG_ERR_INVALID;
    qg_tree_check k = {true, 0, 0};
    qg_tree_walk(lq, lq_children, lq_check_visit, &k);
    if (!k.ok || k.elements != index->count ||
        !qg_tree_blocks_ok(lq->nodes, sizeof(lq_node), offsetof(lq_node, children), lq->free_block, lq->free_blocks,
                           lq->node_high, k.branches))
        return QG_ERR_INVALID;
    *bytes += (size_t)lq->node_capacity * sizeof(lq_node) + (size_t)lq->elem_capacity * sizeof(lq_elem) +
              (size_t)lq->depth_capacity * sizeof(uint8_t);
    return QG_OK;
}

/// qg_raycast: nodes near to far by the parameter at which the segment
/// enters their boxes. A node's box holds the float boxes of everything
/// below it, and the ray test's slab parameters are monotonic in the box's
/// sides (one subtraction and one product, each rounding monotonically), so
/// an element's [t0, t1] lies inside its node's: a node the segment misses,
/// or enters past the current max_t, holds no hit left to report (a tie at
/// max_t is still entered), with no widening at all. Each element is in one
/// leaf: reported once.
static void loose_quadtree_raycast(const qg_index *index, float ox, float oy, float dx, float dy, float max_t,
                                   qg_ray_fn *fn, void *user)
{
    const loose_quadtree *lq = (const loose_quadtree *)index;
    qg_tree_ray r = qg_tree_ray_start(ox, oy, dx, dy, max_t, fn, user);
    qg_tree_pending stack[LQ_STACK];
    int top = 0;
    float t0;
    if (lq_empty(&lq->nodes[0]) || !qg_tree_span(&r, lq_rect(&lq->nodes[0]), &t0))
        return;
    stack[top++] = (qg_tree_pending){{0, 0, 0, 0}, t0};
    while (top > 0) {
        const qg_tree_pending p = stack[--top];
        if (p.key > r.r.max_t)
            continue;
        const lq_node n = lq->nodes[p.c.node];
        if (!lq_is_branch(n)) {
            for (int32_t h = lq_head(n); h >= 0; h = lq->elems[h].next) {
                if (!qg_tree_ray_offer(&r, h, index->boxes[h]))
                    return;
            }
            continue;
        }
        const int32_t fc = lq_first_child(n);
        qg_tree_pending ch[4];
        int k = 0;
        for (int i = 0; i < 4; ++i) {
            const lq_node *c = &lq->nodes[fc + i];
            if (!lq_empty(c) && qg_tree_span(&r, lq_rect(c), &t0))
                ch[k++] = (qg_tree_pending){{fc + i, 0, 0, 0}, t0};
        }
        qg_tree_push_sorted(stack, &top, ch, k);
    }
}

/// qg_nearest: depth first, children nearest first by the distance2 to
/// their boxes, skipping every node farther than the k-th best so far
/// (qg_near_bound; a tie is still entered, it may win on its handle). A
/// node's box holds its elements' boxes and the distance formula is
/// monotonic in the box's sides, so a node's distance2 is at most any of
/// its elements': nothing nearer is ever skipped.
static int32_t loose_quadtree_nearest(const qg_index *index, float x, float y, int32_t k, float max_distance2,
                                      qg_handle *handles, float *distances2)
{
    (void)distances2;
    const loose_quadtree *lq = (const loose_quadtree *)index;
    qg_near c;
    qg_near_start(&c, index, x, y, k, max_distance2, handles);
    c.once = true; // each element is listed in one node or cell
    qg_tree_pending stack[LQ_STACK];
    int top = 0;
    if (lq_empty(&lq->nodes[0]))
        return 0;
    stack[top++] = (qg_tree_pending){{0, 0, 0, 0}, 0.0f};
    while (top > 0) {
        const qg_tree_pending p = stack[--top];
        if (p.key > qg_near_bound(&c))
            continue;
        const lq_node n = lq->nodes[p.c.node];
        if (!lq_is_branch(n)) {
            for (int32_t h = lq_head(n); h >= 0; h = lq->elems[h].next)
                qg_near_offer(&c, h, qg_point_box_d2_fast(index->boxes[h], x, y));
            continue;
        }
        const int32_t fc = lq_first_child(n);
        const float bound = qg_near_bound(&c);
        qg_tree_pending ch[4];
        int m = 0;
        for (int i = 0; i < 4; ++i) {
            const lq_node *cn = &lq->nodes[fc + i];
            if (lq_empty(cn))
                continue;
            const float d = qg_point_box_d2_fast(lq_rect(cn), x, y);
            if (!(d > bound))
                ch[m++] = (qg_tree_pending){{fc + i, 0, 0, 0}, d};
        }
        qg_tree_push_sorted(stack, &top, ch, m);
    }
    return qg_near_finish(&c);
}

/// The state walk (state.h): the nodes (their loose boxes and the order of
/// their children decide which pairs a walk meets first), the per-handle
/// records (each leaf's list runs through them, in the order its elements
/// are reported), the depths, the world and its re-fit counts, the depths
/// and capacity in force, and the node array's capacity (a re-fit splits
/// only into the nodes it holds).
static void loose_quadtree_state(qg_state *s, qg_index *d, const qg_index *src)
{
    loose_quadtree *dq = (loose_quadtree *)d;
    const loose_quadtree *sq = (const loose_quadtree *)src;
    QG_ST(s, dq, sq, max_depth);
    QG_ST(s, dq, sq, leaf_capacity);
    QG_ST(s, dq, sq, depth_cap);
    QG_ST_BOOL(s, dq, sq, resplit);
    qg_tree_world_state(s, &dq->world, &sq->world);
    QG_TREE_NODES_STATE(s, dq, sq, sizeof(lq_node));
    const int32_t used = src->box_high;
    qg_st_array(s, (void **)&dq->elems, &dq->elem_capacity, sq->elems, sq->elem_capacity,
                qg_tree_slots_used(sq->elem_capacity, used), sizeof(lq_elem));
    qg_st_array(s, (void **)&dq->depths, &dq->depth_capacity, sq->depths, sq->depth_capacity,
                qg_tree_slots_used(sq->depth_capacity, used), sizeof(uint8_t));
    if (!qg_st_reading(s) || !qg_st_ok(s))
        return;
    // What loose_quadtree_validate and the later calls trust without
    // checking: depths within the integer cells (shifts, stacks), a tree.
    if (dq->max_depth < 0 || dq->max_depth > LQ_BITS || dq->depth_cap < 0 || dq->depth_cap > LQ_BITS ||
        dq->leaf_capacity < 1 || !qg_tree_world_ok(&dq->world, LQ_SIDE) || !qg_tree_config_ok(&d->config, LQ_BITS)) {
        qg_st_fail(s, QG_ERR_INVALID);
        return;
    }
    // lq_first_child negates `children`: INT32_MIN has no negation (no real
    // node's link is below -node_high).
    for (int32_t i = 0; i < dq->node_high && i < dq->node_capacity; ++i) {
        if (dq->nodes[i].children == INT32_MIN) {
            qg_st_fail(s, QG_ERR_INVALID);
            return;
        }
    }
    const qg_status st = qg_tree_shape_check(&d->alloc, dq, lq_children, dq->nodes, sizeof(lq_node),
                                             offsetof(lq_node, children), dq->free_block, dq->node_high,
                                             dq->node_capacity);
    if (st != QG_OK)
        qg_st_fail(s, st);
}

QG_KIND_CLASS_EX(loose_quadtree, QG_LOOSE_QUADTREE, loose_quadtree, .tune = &qg_tree_tune_rule, .state = loose_quadtree_state, .raycast = loose_quadtree_raycast,
                 .nearest = loose_quadtree_nearest, .insert_many = loose_quadtree_insert_many);
