// SPDX-License-Identifier: MIT
// QG_BUCKET_QUADTREE: the classic bucket quadtree (docs/kinds.md), the textbook
// baseline the README compares the other kinds against.
//
// - Learning (tune.c): its depth, BQ_DEFAULT_DEPTH whatever the
//   config's element_size, becomes the other trees' rule for the learned
//   median larger side (deepest level whose cells are at least that wide);
//   the world is the elements' bounding box.
// - Each node has a bucket of elements. A leaf whose bucket is full
//   (leaf_capacity elements, default 32) splits into 4 equal quadrants when
//   the next element arrives, unless it is at max_depth (default 5).
// - An element that fits entirely in one child goes down into it; one that
//   straddles the children stays in the branch ("we assign elements that
//   fail to fit into a single child leaf node to the parent (split) node").
//   So every element is in exactly one node, and which one is a function of
//   the tree's shape and the element's box: descend from the root while the
//   box fits a child. Removal finds the node the same way, as in the text.
// - Removal merges eagerly: the shallowest branch on the element's path whose
//   elements and all its descendants' fit in one bucket becomes a leaf
//   holding them all (the text's Merge, run on the way back up).
// - Queries search breadth-first with a queue (a ring on the C stack; the
//   rare overflow of a very deep tree continues depth-first), testing each
//   node's own bucket.
// - A bucket's pairs are found in blocks of 256 elements copied to the C
//   stack, each block against itself and every later one: the quadratic
//   loop runs on contiguous boxes however long the bucket and however moves
//   have shuffled its list (at 1,000,000 agents a depth-5 leaf holds about
//   1,000; walking the list in the inner loop cost 2.7 s a frame, the
//   blocks 0.8 s).
// - Written as C, not as the C# of the text: nodes are 16 bytes in one array
//   with children in blocks of 4 and a free list of blocks, and a bucket is
//   an intrusive doubly-linked list threaded through two arrays indexed by
//   handle, so there is no allocation per node or per bucket and unlinking is
//   O(1). A node keeps the element count of its whole subtree, so the merge
//   test ("CountElements() <= capacity") is one comparison, not a walk.
// - Node cells are never stored: they come from integer coordinates
//   (conservative, monotonic mapping, as in QG_QUADTREE), and the final test
//   is always on the stored float box, so answers are exact. Boxes outside
//   the world clamp to the border cells, which the same mapping of a query
//   finds again.
// - The configured bounds are a hint, as in QG_QUADTREE: the tree maps its
//   own square world, re-fitted in qg_cleanup to the elements when a
//   sixteenth of them lie outside it (the new world takes in the old one,
//   half as wide again) or when they fill less than an eighth of it on both
//   axes. A re-fit re-inserts every element from an empty root, splitting
//   only into the blocks of nodes the old tree held (no allocation); later
//   inserts split the rest as usual. The mapping is computed in double: any
//   finite bounds.
// - Ray casts and nearest searches walk the tree themselves,
//   depth first with an explicit stack (near to far is what lets a
//   closest-hit cast stop early; breadth first cannot), each node's bucket
//   tested when it is reached, empty subtrees (total 0) skipped, children
//   near first (by the segment's entry parameter, by distance2), and a node
//   skipped when the segment misses its region or enters it past the
//   current max_t, or its distance2 passes the k-th best (strictly: ties are
//   still entered). A node's region is its cell in world units, border
//   sides infinite and inner sides pushed out by a hair (qg_tree_region):
//   it holds every point the mapping sends into the cell, so the box of
//   every element at or below the node (an element goes down only into a
//   child that holds its whole integer box). One node per element: each
//   reported once.
#include "tree_common.h"
#include "kind.h"
#include "state.h"

#define BQ_BITS QG_TREE_BITS
#define BQ_SIDE QG_TREE_SIDE
#define BQ_DEFAULT_DEPTH 5
#define BQ_DEFAULT_CAPACITY 32
/// Breadth-first queue of a query: a power of two. A full queue (only in
/// trees deeper than 5 levels) makes the search finish that subtree
/// depth-first instead.
#define BQ_QUEUE 512
#define BQ_STACK QG_TREE_STACK
/// A bucket's pair loop runs on blocks of this many elements copied to the
/// C stack, by axis (tree_common.h's lanes, tested four at a time).
#define BQ_GATHER QG_LANES

typedef struct bq_node {
    int32_t first_child; ///< first of 4 children, -1 for a leaf
    int32_t head;        ///< first element of the bucket, -1 if empty
    int32_t count;       ///< elements in the bucket
    int32_t total;       ///< elements in the bucket and every descendant's
} bq_node;

typedef qg_tree_ibox bq_ibox;
typedef qg_tree_cell bq_cell;

typedef struct bucket_quadtree {
    qg_index base;
    bq_node *nodes;
    int32_t node_capacity;
    int32_t node_high;
    int32_t free_block; ///< first node of the first free block of 4, -1 if none
    int32_t free_blocks;
    int32_t *next, *prev; ///< per handle: bucket links
    int32_t next_capacity, prev_capacity;
    qg_tree_world world;
    int32_t max_depth, capacity;
} bucket_quadtree;

static const bq_cell bq_root = {0, 0, 0, 0};

/// Conservative integer box: monotonic per coordinate, clamped to the world.
static inline bq_ibox bq_map_box(const bucket_quadtree *bq, qg_rect r)
{
    return qg_tree_map_box(&bq->world, r, BQ_SIDE);
}

/// The shared walks' view of a node: its first child, -1 for a leaf.
static int32_t bq_children(const void *tree, int32_t node)
{
    return ((const bucket_quadtree *)tree)->nodes[node].first_child;
}

/// The child of c that holds all of b, or -1 when b straddles the children
/// ("GetContainingChild").
static inline int bq_containing_child(bq_cell c, bq_ibox b)
{
    const int32_t half = (BQ_SIDE >> c.depth) >> 1;
    const int32_t mx = c.x + half, my = c.y + half;
    const int right = b.x0 >= mx, bottom = b.y0 >= my;
    if ((b.x1 >= mx) != right || (b.y1 >= my) != bottom)
        return -1;
    return right | bottom << 1;
}

/// The node that holds (or would hold, before any split) the integer box b:
/// descend while b fits one child. Fills path[0..depth] when path is given.
static bq_cell bq_find(const bucket_quadtree *bq, bq_ibox b, int32_t *path)
{
    bq_cell c = bq_root;
    for (;;) {
        if (path)
            path[c.depth] = c.node;
        const int32_t fc = bq->nodes[c.node].first_child;
        if (fc < 0)
            return c;
        const int i = bq_containing_child(c, b);
        if (i < 0)
            return c;
        c = qg_tree_child_cell(c, fc, i);
    }
}

static void bq_link(bucket_quadtree *bq, int32_t node, qg_handle h)
{
    bq_node *n = &bq->nodes[node];
    bq->next[h] = n->head;
    bq->prev[h] = -1;
    if (n->head >= 0)
        bq->prev[n->head] = h;
    n->head = h;
    n->count++;
}

static void bq_unlink(bucket_quadtree *bq, int32_t node, qg_handle h)
{
    bq_node *n = &bq->nodes[node];
    const int32_t nx = bq->next[h], pv = bq->prev[h];
    if (pv >= 0)
        bq->next[pv] = nx;
    else
        n->head = nx;
    if (nx >= 0)
        bq->prev[nx] = pv;
    n->count--;
}

/// Blocks of 4 that can be taken without allocating.
static inline int64_t bq_spare_blocks(const bucket_quadtree *bq)
{
    return (int64_t)bq->free_blocks + (bq->node_capacity - bq->node_high) / 4;
}

/// Makes sure `blocks` splits can happen without allocating.
static bool bq_reserve_blocks(bucket_quadtree *bq, qg_txn *txn, int64_t blocks)
{
    const int64_t spare = bq_spare_blocks(bq);
    if (blocks <= spare)
        return true;
    return qg_txn_reserve(txn, (void **)&bq->nodes, &bq->node_capacity, sizeof(bq_node),
                          (int64_t)bq->node_high + 4 * (blocks - bq->free_blocks));
}

/// Splits leaf c ("Split"): 4 empty children, then every element of the
/// bucket that fits entirely in one child moves down into it. The caller
/// reserved the block.
static void bq_split(bucket_quadtree *bq, bq_cell c)
{
    int32_t fc;
    if (bq->free_block >= 0) {
        fc = bq->free_block;
        bq->free_block = bq->nodes[fc].first_child;
        bq->free_blocks--;
    } else {
        fc = bq->node_high;
        bq->node_high += 4;
    }
    for (int i = 0; i < 4; ++i)
        bq->nodes[fc + i] = (bq_node){-1, -1, 0, 0};
    bq->nodes[c.node].first_child = fc;
    int32_t h = bq->nodes[c.node].head;
    while (h >= 0) {
        const int32_t next = bq->next[h];
        const int i = bq_containing_child(c, bq_map_box(bq, bq->base.boxes[h]));
        if (i >= 0) {
            bq_unlink(bq, c.node, h);
            bq_link(bq, fc + i, h);
            bq->nodes[fc + i].total++;
        }
        h = next;
    }
}

/// Splits that inserting b could cause: the full leaf b reaches and each new
/// leaf below it, down to max depth.
static int64_t bq_splits_needed(const bucket_quadtree *bq, bq_ibox b)
{
    const bq_cell c = bq_find(bq, b, NULL);
    if (bq->nodes[c.node].count >= bq->capacity && c.depth < bq->max_depth)
        return bq->max_depth - c.depth;
    return 0;
}

/// Insert as in the text: at each node on the way down, a full leaf splits
/// first; then the element goes into the child that contains it, or stays.
static void bq_place(bucket_quadtree *bq, qg_handle h, bq_ibox b)
{
    bq_cell c = bq_root;
    for (;;) {
        bq_node *n = &bq->nodes[c.node];
        n->total++;
        // The reservation covers every split here; a re-fit reserves none
        // and splits only into blocks it holds.
        if (n->first_child < 0 && n->count >= bq->capacity && c.depth < bq->max_depth && bq_spare_blocks(bq) > 0)
            bq_split(bq, c);
        const int32_t fc = bq->nodes[c.node].first_child;
        const int i = fc >= 0 ? bq_containing_child(c, b) : -1;
        if (i < 0) {
            bq_link(bq, c.node, h);
            return;
        }
        c = qg_tree_child_cell(c, fc, i);
    }
}

/// Turns branch `node` back into a leaf holding every element of its
/// subtree ("Merge"), freeing the blocks below it.
static void bq_merge(bucket_quadtree *bq, int32_t node)
{
    int32_t stack[BQ_STACK];
    int top = 0;
    bq_node *m = &bq->nodes[node];
    stack[top++] = m->first_child;
    m->first_child = -1;
    while (top > 0) {
        const int32_t fc = stack[--top];
        for (int i = 0; i < 4; ++i) {
            bq_node *n = &bq->nodes[fc + i];
            if (n->first_child >= 0)
                stack[top++] = n->first_child;
            // Splice the child's bucket onto the front of the merged one.
            for (int32_t h = n->head; h >= 0;) {
                const int32_t next = bq->next[h];
                bq_link(bq, node, h);
                h = next;
            }
        }
        bq->nodes[fc].first_child = bq->free_block;
        bq->free_block = fc;
        bq->free_blocks++;
    }
}

/// Takes h out of the tree along the path to its node, then merges eagerly.
static void bq_take_out(bucket_quadtree *bq, qg_handle h)
{
    int32_t path[BQ_BITS + 1];
    const bq_cell c = bq_find(bq, bq_map_box(bq, bq->base.boxes[h]), path);
    bq_unlink(bq, c.node, h);
    int merge = -1;
    for (int d = c.depth; d >= 0; --d) {
        bq_node *n = &bq->nodes[path[d]];
        n->total--;
        if (n->first_child >= 0 && n->total <= bq->capacity)
            merge = d; // the shallowest wins: it takes the deeper ones in
    }
    if (merge >= 0)
        bq_merge(bq, path[merge]);
}

static qg_status bucket_quadtree_configure(qg_config *config)
{
    if (config->max_depth > BQ_BITS)
        config->max_depth = BQ_BITS; // integer cells would be empty below
    if (config->max_depth == 0)
        config->max_depth = BQ_DEFAULT_DEPTH;
    if (config->leaf_capacity == 0)
        config->leaf_capacity = BQ_DEFAULT_CAPACITY;
    return QG_OK;
}

static qg_status bucket_quadtree_init(qg_index *index)
{
    bucket_quadtree *bq = (bucket_quadtree *)index;
    qg_tree_world_set(&bq->world, index->config.bounds, BQ_SIDE);
    bq->max_depth = index->config.max_depth;
    bq->capacity = index->config.leaf_capacity;
    bq->free_block = -1;
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    if (!qg_txn_reserve(&txn, (void **)&bq->nodes, &bq->node_capacity, sizeof(bq_node), 1))
        return QG_ERR_NOMEM;
    bq->nodes[0] = (bq_node){-1, -1, 0, 0};
    bq->node_high = 1;
    return QG_OK;
}

static void bucket_quadtree_destroy(qg_index *index)
{
    bucket_quadtree *bq = (bucket_quadtree *)index;
    qg_array_free(&index->alloc, (void **)&bq->nodes, &bq->node_capacity, sizeof(bq_node));
    qg_array_free(&index->alloc, (void **)&bq->next, &bq->next_capacity, sizeof(int32_t));
    qg_array_free(&index->alloc, (void **)&bq->prev, &bq->prev_capacity, sizeof(int32_t));
}

static qg_status bucket_quadtree_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    bucket_quadtree *bq = (bucket_quadtree *)index;
    const bq_ibox b = bq_map_box(bq, box);
    if (!qg_txn_reserve(txn, (void **)&bq->next, &bq->next_capacity, sizeof(int32_t), (int64_t)h + 1) ||
        !qg_txn_reserve(txn, (void **)&bq->prev, &bq->prev_capacity, sizeof(int32_t), (int64_t)h + 1) ||
        !bq_reserve_blocks(bq, txn, bq_splits_needed(bq, b)))
        return QG_ERR_NOMEM;
    qg_tree_note(&bq->world, box);
    bq_place(bq, h, b);
    return QG_OK;
}

/// qg_insert_many: the per-handle lists reserved once for the highest
/// handle (the only memory an insert cannot do without), then every insert,
/// none of which can fail: each reserves the blocks its splits want, and
/// when memory is refused goes on with the blocks held, as a move does (a
/// leaf left over capacity splits at a later insert). So a batch that lacks
/// memory fails before it changes anything and holds what it held.
static qg_status bucket_quadtree_insert_many(qg_index *index, qg_txn *txn, const qg_handle *handles, int32_t n)
{
    bucket_quadtree *bq = (bucket_quadtree *)index;
    qg_handle top = 0;
    for (int32_t i = 0; i < n; ++i)
        top = handles[i] > top ? handles[i] : top;
    if (!qg_txn_reserve(txn, (void **)&bq->next, &bq->next_capacity, sizeof(int32_t), (int64_t)top + 1) ||
        !qg_txn_reserve(txn, (void **)&bq->prev, &bq->prev_capacity, sizeof(int32_t), (int64_t)top + 1))
        return QG_ERR_NOMEM;
    for (int32_t i = 0; i < n; ++i) {
        const qg_handle h = handles[i];
        const qg_rect box = index->boxes[h];
        const bq_ibox b = bq_map_box(bq, box);
        // Growth kept on success: its own transaction, never rolled back.
        qg_txn blocks;
        qg_txn_begin(&blocks, &index->alloc);
        (void)bq_reserve_blocks(bq, &blocks, bq_splits_needed(bq, b));
        qg_tree_note(&bq->world, box);
        bq_place(bq, h, b);
    }
    return QG_OK;
}

static void bucket_quadtree_remove(qg_index *index, qg_handle h)
{
    bq_take_out((bucket_quadtree *)index, h);
}

static QG_NOINLINE qg_status bucket_quadtree_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    bucket_quadtree *bq = (bucket_quadtree *)index;
    qg_tree_note(&bq->world, box);
    const bq_ibox nb = bq_map_box(bq, box);
    const bq_cell from = bq_find(bq, bq_map_box(bq, index->boxes[h]), NULL);
    const bq_cell to = bq_find(bq, nb, NULL);
    if (from.node == to.node) {
        // Removing and re-adding would put it back in the same bucket (a
        // merge on the way could only be undone by the re-add).
        index->boxes[h] = box;
        return QG_OK;
    }
    // Remove then re-add, as the text's usage does. A merge on the way out
    // can make the re-add split down to max depth from anywhere: blocks for
    // that are reserved, and when memory is refused the move goes on with
    // the blocks held (bq_place splits only into those, as a re-fit does; a
    // leaf left over capacity splits at a later insert). So a move never
    // fails, and a failed batch's undo (qg_move_many moves this kind one
    // element at a time, and moves them back) always can: the undo of a
    // move that split may want blocks the batch's later moves took.
    (void)bq_reserve_blocks(bq, txn, bq->max_depth);
    bq_take_out(bq, h);
    index->boxes[h] = box;
    bq_place(bq, h, nb);
    return QG_OK;
}

static void bucket_quadtree_cleanup(qg_index *index)
{
    // Merging is eager: only the re-fit check is left for here. O(1) unless
    // a sixteenth of the moves since the last scan ended outside the world
    // or the population doubled or halved since it.
    bucket_quadtree *bq = (bucket_quadtree *)index;
    qg_rect world;
    if (!qg_tree_scan_due(&bq->world, index->count) || !qg_tree_fit(&bq->world, index, -1, false, &world, NULL))
        return;
    // Re-insert everything from an empty root, in the blocks already held:
    // the node array's capacity bounds the splits (bq_place checks).
    qg_tree_world_set(&bq->world, world, BQ_SIDE);
    bq->nodes[0] = (bq_node){-1, -1, 0, 0};
    bq->node_high = 1;
    bq->free_block = -1;
    bq->free_blocks = 0;
    for (qg_handle h = 0; h < index->box_high; ++h) {
        if (qg_slot_live(index, h))
            bq_place(bq, h, bq_map_box(bq, index->boxes[h]));
    }
}

static void bucket_quadtree_clear(qg_index *index)
{
    bucket_quadtree *bq = (bucket_quadtree *)index;
    bq->nodes[0] = (bq_node){-1, -1, 0, 0};
    bq->node_high = 1;
    bq->free_block = -1;
    bq->free_blocks = 0;
    // Back to the configured world: the next elements may be anywhere.
    qg_tree_world_reset(&bq->world, index->config.bounds, BQ_SIDE);
}

/// Tests the bucket of node against area; false when the callback stopped.
static inline bool bq_query_bucket(const bucket_quadtree *bq, int32_t node, qg_rect area, qg_query_fn *fn,
                                   void *user, qg_query_stats *stats)
{
    const bq_node n = bq->nodes[node];
    stats->nodes_visited++;
    stats->elements_tested += n.count;
    for (int32_t h = n.head; h >= 0; h = bq->next[h]) {
        if (qg_overlaps(bq->base.boxes[h], area) && !fn(h, user))
            return false;
    }
    return true;
}

/// Depth-first search of the subtree at c, for a queue that ran full.
static bool bq_query_dfs(const bucket_quadtree *bq, bq_cell from, bq_ibox qb, qg_rect area, qg_query_fn *fn,
                         void *user, qg_query_stats *stats)
{
    bq_cell stack[BQ_STACK];
    int top = 0;
    stack[top++] = from;
    while (top > 0) {
        const bq_cell c = stack[--top];
        if (!bq_query_bucket(bq, c.node, area, fn, user, stats))
            return false;
        const int32_t fc = bq->nodes[c.node].first_child;
        if (fc < 0)
            continue;
        const unsigned mask = qg_tree_child_mask(c, qb);
        for (int i = 3; i >= 0; --i) {
            if (mask >> i & 1)
                stack[top++] = qg_tree_child_cell(c, fc, i);
        }
    }
    return true;
}

static void bucket_quadtree_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                                  qg_query_stats *stats)
{
    const bucket_quadtree *bq = (const bucket_quadtree *)index;
    const bq_ibox qb = bq_map_box(bq, area);
    // "nodes.Enqueue(this); while (nodes.Count > 0) ..."
    bq_cell queue[BQ_QUEUE];
    uint32_t head = 0, tail = 0;
    queue[tail++ & (BQ_QUEUE - 1)] = bq_root;
    while (head != tail) {
        const bq_cell c = queue[head++ & (BQ_QUEUE - 1)];
        if (!bq_query_bucket(bq, c.node, area, fn, user, stats))
            return;
        const int32_t fc = bq->nodes[c.node].first_child;
        if (fc < 0)
            continue;
        const unsigned mask = qg_tree_child_mask(c, qb);
        for (int i = 0; i < 4; ++i) {
            if (!(mask >> i & 1))
                continue;
            const bq_cell child = qg_tree_child_cell(c, fc, i);
            if (bq->nodes[child.node].total == 0)
                continue; // nothing below: the text would visit it, we need not
            if (tail - head < BQ_QUEUE) {
                queue[tail++ & (BQ_QUEUE - 1)] = child;
            } else if (!bq_query_dfs(bq, child, qb, area, fn, user, stats)) {
                return;
            }
        }
    }
}

/// Copies up to BQ_GATHER elements of a bucket, from element h on, into L
/// and ids; returns how many and sets *rest to the first element not taken
/// (-1 at the end of the bucket).
static int bq_gather(const bucket_quadtree *bq, int32_t h, qg_lanes *L, qg_handle *ids, int32_t *rest)
{
    const qg_rect *boxes = bq->base.boxes;
    int k = 0;
    for (; h >= 0 && k < BQ_GATHER; h = bq->next[h]) {
        ids[k] = h;
        qg_lanes_put(L, k++, boxes[h]);
    }
    qg_lanes_end(L, k);
    *rest = h;
    return k;
}

/// Pairs within one bucket; false when the callback stopped. The bucket is
/// taken in blocks of BQ_GATHER copied to the stack, each block against
/// itself and against every later block, so the quadratic loop always runs
/// on contiguous boxes: a bucket's list follows handles, and once moves have
/// relinked it for a while its order is random in memory (at 1M elements,
/// depth 5 leaves hold about 1,000 each and walking their lists in the inner
/// loop made the frame miss the cache on almost every test).
static bool bq_pairs_within(const bucket_quadtree *bq, const bq_node *n, qg_pair_fn *fn, void *user)
{
    qg_lanes la, lb;
    qg_handle ia[BQ_GATHER], ib[BQ_GATHER];
    uint64_t hit[BQ_GATHER];
    for (int32_t a0 = n->head; a0 >= 0;) {
        int32_t after;
        const int ka = bq_gather(bq, a0, &la, ia, &after);
        if (qg_lanes_self(&la, ka, hit) != 0 && !qg_lanes_report(ia, ka, ia, hit, fn, user))
            return false;
        for (int32_t b0 = after; b0 >= 0;) {
            const int kb = bq_gather(bq, b0, &lb, ib, &b0);
            if (qg_lanes_cross(&la, ka, &lb, kb, hit) != 0 && !qg_lanes_report(ia, ka, ib, hit, fn, user))
                return false;
        }
        a0 = after;
    }
    return true;
}

/// Pairs of element a (in the bucket of branch c) with the elements of c's
/// descendants: a query of a's box below c. Any element a can overlap lives
/// in c's bucket, in a descendant's or in an ancestor's, so testing each
/// element against its own bucket and its descendants' finds every pair
/// once.
static bool bq_pairs_below(const bucket_quadtree *bq, bq_cell c, qg_handle a, qg_pair_fn *fn, void *user,
                           qg_query_stats *stats)
{
    const qg_rect ra = bq->base.boxes[a];
    const bq_ibox b = bq_map_box(bq, ra);
    bq_cell stack[BQ_STACK];
    int top = 0;
    stack[top++] = c;
    while (top > 0) {
        const bq_cell n = stack[--top];
        const int32_t fc = bq->nodes[n.node].first_child;
        if (fc < 0)
            continue;
        const unsigned mask = qg_tree_child_mask(n, b);
        for (int i = 3; i >= 0; --i) {
            if (!(mask >> i & 1))
                continue;
            const bq_cell child = qg_tree_child_cell(n, fc, i);
            const bq_node cn = bq->nodes[child.node];
            if (cn.total == 0)
                continue;
            stats->nodes_visited++;
            stats->elements_tested += cn.count;
            for (int32_t h = cn.head; h >= 0; h = bq->next[h]) {
                if (qg_overlaps(ra, bq->base.boxes[h]) && !qg_report_pair(fn, user, a, h))
                    return false;
            }
            stack[top++] = child;
        }
    }
    return true;
}

static void bucket_quadtree_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    const bucket_quadtree *bq = (const bucket_quadtree *)index;
    bq_cell stack[BQ_STACK];
    int top = 0;
    stack[top++] = bq_root;
    while (top > 0) {
        const bq_cell c = stack[--top];
        const bq_node n = bq->nodes[c.node];
        stats->nodes_visited++;
        stats->elements_tested += (int64_t)n.count * (n.count - 1) / 2;
        if (n.count >= 2 && !bq_pairs_within(bq, &n, fn, user))
            return;
        if (n.first_child < 0)
            continue;
        for (int32_t h = n.head; h >= 0; h = bq->next[h]) {
            if (!bq_pairs_below(bq, c, h, fn, user, stats))
                return;
        }
        for (int i = 3; i >= 0; --i) {
            const bq_cell child = qg_tree_child_cell(c, n.first_child, i);
            if (bq->nodes[child.node].total > 0)
                stack[top++] = child;
        }
    }
}

static void bucket_quadtree_stats(const qg_index *index, qg_stats *stats)
{
    qg_tree_stats(index, bq_children, stats);
}

static void bq_user_visit(const void *tree, bq_cell c, int32_t children, void *ctx)
{
    (void)children;
    const bucket_quadtree *bq = tree;
    const qg_tree_visit_ctx *v = ctx;
    const qg_rect r = qg_tree_cell_rect(&bq->world, c.x, c.y, BQ_SIDE >> c.depth, BQ_SIDE);
    v->fn(r, c.depth, bq->nodes[c.node].count, v->user);
}

static void bucket_quadtree_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    qg_tree_visit_ctx v = {fn, user};
    qg_tree_walk(index, bq_children, bq_user_visit, &v);
}

/// Checks one node: its bucket's links and count, that every element in it
/// is where the descent puts it, and (bottom-up via the parent's check) the
/// subtree totals.
static void bq_check_visit(const void *tree, bq_cell c, int32_t children, void *ctx)
{
    const bucket_quadtree *bq = tree;
    qg_tree_check *k = ctx;
    if (!qg_tree_check_node(k, c, children, bq->node_high, bq->max_depth))
        return;
    const bq_node n = bq->nodes[c.node];
    if (n.count < 0 || n.total < n.count) {
        k->ok = false;
        return;
    }
    int32_t len = 0, prev = -1;
    for (int32_t h = n.head; h >= 0 && len <= n.count; h = bq->next[h]) {
        if (!qg_slot_live(&bq->base, h) || h >= bq->next_capacity || bq->prev[h] != prev) {
            k->ok = false;
            return;
        }
        if (bq_find(bq, bq_map_box(bq, bq->base.boxes[h]), NULL).node != c.node)
            k->ok = false;
        prev = h;
        len++;
    }
    if (len != n.count)
        k->ok = false;
    k->elements += len;
    int64_t sum = n.count;
    if (children >= 0) {
        for (int i = 0; i < 4; ++i)
            sum += bq->nodes[n.first_child + i].total;
        // Eager merge: no branch whose subtree fits one bucket survives.
        if (n.total <= bq->capacity)
            k->ok = false;
    }
    if (sum != n.total)
        k->ok = false;
}

static qg_status bucket_quadtree_validate(const qg_index *index, size_t *bytes)
{
    const bucket_quadtree *bq = (const bucket_quadtree *)index;
    if (!qg_tree_high_ok(bq->node_high, bq->node_capacity) || bq->next_capacity != bq->prev_capacity ||
        bq->next_capacity < index->box_high)
        return QG_ERR_INVALID;
    qg_tree_check k = {true, 0, 0};
    qg_tree_walk(bq, bq_children, bq_check_visit, &k);
    if (!k.ok || k.elements != index->count || bq->nodes[0].total != index->count ||
        !qg_tree_blocks_ok(bq->nodes, sizeof(bq_node), offsetof(bq_node, first_child), bq->free_block,
                           bq->free_blocks, bq->node_high, k.branches))
        return QG_ERR_INVALID;
    *bytes += (size_t)bq->node_capacity * sizeof(bq_node) + (size_t)bq->next_capacity * sizeof(int32_t) +
              (size_t)bq->prev_capacity * sizeof(int32_t);
    return QG_OK;
}

/// qg_raycast: nodes near to far by the parameter at which the segment
/// enters their regions, a node's bucket tested when it is reached, empty
/// subtrees (total 0) never entered. Each element is in one node, whose
/// cell holds the element's clamped integer box (it went down only into
/// children that held all of it), so the cell's world region
/// (qg_tree_region: border sides infinite, inner sides pushed out by a hair
/// for rounding) holds its float box, and so do the regions of the cell's
/// ancestors: a node the segment misses, or enters past the current max_t,
/// holds no hit left to report below it (a tie at max_t is still entered).
/// Each element reported once, by its node. Depth first rather than the
/// queries' breadth first: near to far is what lets closest-hit stop early.
static void bucket_quadtree_raycast(const qg_index *index, float ox, float oy, float dx, float dy, float max_t,
                                    qg_ray_fn *fn, void *user)
{
    const bucket_quadtree *bq = (const bucket_quadtree *)index;
    const float reach = fabsf(ox) > fabsf(oy) ? fabsf(ox) : fabsf(oy);
    const qg_tree_frame f = qg_tree_frame_make(&bq->world, BQ_SIDE, reach);
    qg_tree_ray r = qg_tree_ray_start(ox, oy, dx, dy, max_t, fn, user);
    qg_tree_pending stack[BQ_STACK];
    int top = 0;
    stack[top++] = (qg_tree_pending){bq_root, 0.0f};
    while (top > 0) {
        const qg_tree_pending p = stack[--top];
        if (p.key > r.r.max_t)
            continue;
        const bq_node n = bq->nodes[p.c.node];
        for (int32_t h = n.head; h >= 0; h = bq->next[h]) {
            if (!qg_tree_ray_offer(&r, h, index->boxes[h]))
                return;
        }
        if (n.first_child < 0 || n.total == n.count)
            continue;
        float t0[4];
        const unsigned hit = qg_tree_child_spans(&r, &f, p.c.x, p.c.y, BQ_SIDE >> p.c.depth, t0);
        qg_tree_pending ch[4];
        int k = 0;
        for (int i = 0; i < 4; ++i) {
            const bq_cell cc = qg_tree_child_cell(p.c, n.first_child, i);
            if ((hit >> i & 1) && bq->nodes[cc.node].total > 0)
                ch[k++] = (qg_tree_pending){cc, t0[i]};
        }
        qg_tree_push_sorted(stack, &top, ch, k);
    }
}

/// qg_nearest: depth first, children nearest first by the distance2 to
/// their regions, skipping empty subtrees and every node farther than the
/// k-th best so far (qg_near_bound; a tie is still entered, it may win on
/// its handle). A region holds the boxes of every element at or below its
/// node (see bucket_quadtree_raycast), so its distance2 is at most theirs.
static int32_t bucket_quadtree_nearest(const qg_index *index, float x, float y, int32_t k, float max_distance2,
                                       qg_handle *handles, float *distances2)
{
    (void)distances2;
    const bucket_quadtree *bq = (const bucket_quadtree *)index;
    const qg_tree_frame f = qg_tree_frame_make(&bq->world, BQ_SIDE, 0.0f);
    qg_near c;
    qg_near_start(&c, index, x, y, k, max_distance2, handles);
    c.once = true; // each element is listed in one node or cell
    // Each pop pushes at most 5: its own bucket and 4 children.
    qg_tree_pending stack[4 * (BQ_BITS + 2)];
    int top = 0;
    stack[top++] = (qg_tree_pending){bq_root, 0.0f};
    while (top > 0) {
        const qg_tree_pending p = stack[--top];
        if (p.key > qg_near_bound(&c))
            continue;
        const bq_node n = bq->nodes[p.c.node < 0 ? ~p.c.node : p.c.node];
        if (p.c.node < 0 || n.first_child < 0) { // a bucket alone (node ~i), or a leaf
            for (int32_t h = n.head; h >= 0; h = bq->next[h])
                qg_near_offer(&c, h, qg_point_box_d2_fast(index->boxes[h], x, y));
            continue;
        }
        // A branch's bucket after its children: its elements straddle its
        // centre lines, most far from the point, and by then the k best so
        // far turn nearly all of them away at the first comparison.
        if (n.count > 0)
            stack[top++] = (qg_tree_pending){{~p.c.node, p.c.x, p.c.y, p.c.depth}, p.key};
        if (n.total == n.count)
            continue;
        const float bound = qg_near_bound(&c);
        float d2[4];
        qg_tree_child_d2(&f, p.c.x, p.c.y, BQ_SIDE >> p.c.depth, x, y, d2);
        qg_tree_pending ch[4];
        int m = 0;
        for (int i = 0; i < 4; ++i) {
            const bq_cell cc = qg_tree_child_cell(p.c, n.first_child, i);
            if (!(d2[i] > bound) && bq->nodes[cc.node].total > 0)
                ch[m++] = (qg_tree_pending){cc, d2[i]};
        }
        qg_tree_push_sorted(stack, &top, ch, m);
    }
    return qg_near_finish(&c);
}

/// Its configure ignores element_size: a rebuild gets the other trees'
/// depth rule for the learned median.
static void bucket_quadtree_tune_config(qg_config *c, const qg_learned *learned)
{
    c->max_depth = qg_tree_depth_for(qg_tree_extent(learned->world), learned->elem, QG_TREE_BITS);
}

static const qg_tune_rule bucket_quadtree_tune = {
    .hint = qg_tree_tune_hint,
    .differs = qg_tree_tune_differs,
    .config = bucket_quadtree_tune_config,
    .stats = qg_tree_tune_stats,
};

/// The state walk (state.h): the nodes, the buckets' links (their order
/// is the order a bucket's elements are reported in), the world and its
/// re-fit counts, the depth and bucket size in force, and the node array's
/// capacity (a re-fit and a move whose reservation failed split only into
/// the blocks it holds).
static void bucket_quadtree_state(qg_state *s, qg_index *d, const qg_index *src)
{
    bucket_quadtree *dq = (bucket_quadtree *)d;
    const bucket_quadtree *sq = (const bucket_quadtree *)src;
    QG_ST(s, dq, sq, max_depth);
    QG_ST(s, dq, sq, capacity);
    qg_tree_world_state(s, &dq->world, &sq->world);
    QG_TREE_NODES_STATE(s, dq, sq, sizeof(bq_node));
    const int32_t used = src->box_high;
    qg_st_array(s, (void **)&dq->next, &dq->next_capacity, sq->next, sq->next_capacity,
                qg_tree_slots_used(sq->next_capacity, used), sizeof(int32_t));
    qg_st_array(s, (void **)&dq->prev, &dq->prev_capacity, sq->prev, sq->prev_capacity,
                qg_tree_slots_used(sq->prev_capacity, used), sizeof(int32_t));
    if (!qg_st_reading(s) || !qg_st_ok(s))
        return;
    // What bucket_quadtree_validate and the later calls trust without
    // checking: a depth within the integer cells (the paths and stacks are
    // sized for it), a tree.
    if (dq->max_depth < 0 || dq->max_depth > BQ_BITS || dq->capacity < 1 ||
        !qg_tree_world_ok(&dq->world, BQ_SIDE) || !qg_tree_config_ok(&d->config, BQ_BITS)) {
        qg_st_fail(s, QG_ERR_INVALID);
        return;
    }
    const qg_status st = qg_tree_shape_check(&d->alloc, dq, bq_children, dq->nodes, sizeof(bq_node),
                                             offsetof(bq_node, first_child), dq->free_block, dq->node_high,
                                             dq->node_capacity);
    if (st != QG_OK)
        qg_st_fail(s, st);
}

QG_KIND_CLASS_EX(bucket_quadtree, QG_BUCKET_QUADTREE, bucket_quadtree, .tune = &bucket_quadtree_tune, .state = bucket_quadtree_state, .raycast = bucket_quadtree_raycast,
                 .nearest = bucket_quadtree_nearest, .insert_many = bucket_quadtree_insert_many);
