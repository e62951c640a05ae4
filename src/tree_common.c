// SPDX-License-Identifier: MIT
// The cold half of tree_common.h: what the tree kinds run once per re-fit,
// qg_get_stats, qg_visit or qg_validate (the re-fit scan, the depth-first
// walk, level-by-level splitting, the free-block check). Out of line and
// behind function pointers: none of it is on an insert, move, query or
// pair path.
#include "tree_common.h"

#include "state.h"

bool qg_tree_fit(const qg_tree_world *w, const qg_index *ix, qg_handle skip, bool to_bounds, qg_rect *out,
                 double *size)
{
    const qg_rect wb = w->box;
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
        outside += qg_tree_outside(w, r);
        const double rw = qg_extent(r.min_x, r.max_x), rh = qg_extent(r.min_y, r.max_y);
        widths += rw > rh ? rw : rh;
    }
    if (scanned == 0)
        return false;
    if (size)
        *size = widths / (double)scanned;
    const double wx = qg_extent(wb.min_x, wb.max_x), wy = qg_extent(wb.min_y, wb.max_y);
    const bool spill = outside * 16 > scanned;
    const bool sparse = qg_extent(lx, hx) * 8 < wx && qg_extent(ly, hy) * 8 < wy;
    if (!spill && !sparse)
        return false;
    if (!sparse) {
        lx = wb.min_x < lx ? wb.min_x : lx;
        ly = wb.min_y < ly ? wb.min_y : ly;
        hx = wb.max_x > hx ? wb.max_x : hx;
        hy = wb.max_y > hy ? wb.max_y : hy;
        const qg_rect b = ix->config.bounds;
        if (to_bounds && lx >= b.min_x && ly >= b.min_y && hx <= b.max_x && hy <= b.max_y &&
            !(qg_extent(lx, hx) * 8 < qg_extent(b.min_x, b.max_x) &&
              qg_extent(ly, hy) * 8 < qg_extent(b.min_y, b.max_y))) {
            *out = b;
            return true;
        }
    }
    *out = qg_tree_square_world(lx, ly, hx, hy);
    return true;
}

int qg_tree_refit_depth(const qg_config *config, qg_rect world, double size, int cap)
{
    if (memcmp(&world, &config->bounds, sizeof world) == 0)
        return config->max_depth; // back to the configured tree
    const double es = (double)config->element_size > size ? (double)config->element_size : size;
    const int depth = qg_tree_depth_for(qg_tree_extent(world), es, QG_TREE_BITS);
    return depth < cap ? depth : cap;
}

void qg_tree_walk(const void *tree, qg_tree_children_fn *children, qg_tree_visit_node_fn *visit, void *ctx)
{
    qg_tree_cell stack[QG_TREE_STACK];
    int top = 0;
    stack[top++] = (qg_tree_cell){0, 0, 0, 0};
    while (top > 0) {
        const qg_tree_cell c = stack[--top];
        const int32_t fc = children(tree, c.node);
        visit(tree, c, fc, ctx);
        // The depth bound keeps a broken tree from overrunning the stack;
        // validation reports the branch that is too deep.
        if (fc >= 0 && c.depth < QG_TREE_BITS) {
            for (int i = 3; i >= 0; --i)
                stack[top++] = qg_tree_child_cell(c, fc, i);
        }
    }
}

static void tree_stats_visit(const void *tree, qg_tree_cell c, int32_t children, void *ctx)
{
    (void)tree;
    qg_stats *s = ctx;
    s->nodes++;
    s->leaves += children < 0;
    if (c.depth > s->max_depth_reached)
        s->max_depth_reached = c.depth;
}

void qg_tree_stats(const void *tree, qg_tree_children_fn *children, qg_stats *stats)
{
    qg_tree_walk(tree, children, tree_stats_visit, stats);
}

int qg_tree_split_levels(void *tree, int max_depth, qg_tree_children_fn *children,
                         int (*split)(void *tree, qg_tree_cell c, bool grow), bool grow)
{
    int result = 0;
    for (int level = 0; level < max_depth; ++level) {
        qg_tree_cell stack[QG_TREE_STACK];
        int top = 0;
        stack[top++] = (qg_tree_cell){0, 0, 0, 0};
        while (top > 0) {
            const qg_tree_cell c = stack[--top];
            const int32_t fc = children(tree, c.node);
            if (fc < 0) {
                if (c.depth == level && split(tree, c, grow) < 0)
                    result = -1;
            } else if (c.depth < level) {
                for (int i = 3; i >= 0; --i)
                    stack[top++] = qg_tree_child_cell(c, fc, i);
            }
        }
    }
    return result;
}

bool qg_tree_blocks_ok(const void *nodes, size_t stride, size_t link_offset, int32_t free_block,
                       int32_t free_blocks, int32_t node_high, int64_t branches)
{
    int32_t found = 0;
    for (int32_t b = free_block; b >= 0;) {
        if (!qg_tree_block_ok(b, node_high) || ++found > free_blocks)
            return false;
        memcpy(&b, (const char *)nodes + (size_t)b * stride + link_offset, sizeof b);
    }
    // Every node is either reachable or in a free block, never both.
    return found == free_blocks && 1 + 4 * branches + 4 * (int64_t)found == node_high;
}

void qg_tree_world_state(qg_state *s, qg_tree_world *d, const qg_tree_world *src)
{
    QG_ST(s, d, src, box);
    QG_ST(s, d, src, scale_x);
    QG_ST(s, d, src, scale_y);
    QG_ST(s, d, src, scan_count);
    QG_ST(s, d, src, outside_moves);
}

void qg_tree_nodes_state(qg_state *s, void **dnodes, int32_t *dcap, int32_t *dhigh, int32_t *dfree,
                         int32_t *dfree_blocks, const void *snodes, int32_t scap, const int32_t *shigh,
                         const int32_t *sfree, const int32_t *sfree_blocks, size_t elem)
{
    qg_st_val(s, dhigh, shigh, sizeof *dhigh);
    qg_st_val(s, dfree, sfree, sizeof *dfree);
    qg_st_val(s, dfree_blocks, sfree_blocks, sizeof *dfree_blocks);
    if (!qg_st_array(s, dnodes, dcap, snodes, scap, *shigh, elem))
        return;
    // Reading (d is src): the mark just read must lie in the capacity read.
    if (qg_st_reading(s) && !qg_tree_high_ok(*dhigh, *dcap))
        qg_st_fail(s, QG_ERR_INVALID);
}

bool qg_tree_world_ok(const qg_tree_world *w, int32_t side)
{
    const qg_rect b = w->box;
    if (!(isfinite(b.min_x) && isfinite(b.min_y) && isfinite(b.max_x) && isfinite(b.max_y) && b.min_x < b.max_x &&
          b.min_y < b.max_y) ||
        w->scan_count < 0 || w->outside_moves < 0 || w->outside_moves > INT64_MAX / 16) // the re-fit check's * 16
        return false;
    qg_tree_world fresh;
    qg_tree_world_set(&fresh, b, side);
    return memcmp(&fresh.scale_x, &w->scale_x, sizeof w->scale_x) == 0 &&
           memcmp(&fresh.scale_y, &w->scale_y, sizeof w->scale_y) == 0;
}

bool qg_tree_config_ok(const qg_config *c, int32_t cap)
{
    return c->max_depth >= 1 && c->max_depth <= cap && c->leaf_capacity >= 1;
}

/// Marks node i in the map; false when it was marked already.
static bool shape_mark(uint64_t *map, int32_t i)
{
    const uint64_t bit = 1ull << ((uint32_t)i & 63);
    if (map[(uint32_t)i >> 6] & bit)
        return false;
    map[(uint32_t)i >> 6] |= bit;
    return true;
}

qg_status qg_tree_shape_check(qg_alloc *alloc, const void *tree, qg_tree_children_fn *children,
                              const void *nodes, size_t stride, size_t link_offset, int32_t free_block,
                              int32_t node_high, int32_t node_capacity)
{
    if (!qg_tree_high_ok(node_high, node_capacity))
        return QG_ERR_INVALID;
    const size_t words = ((size_t)node_high + 63) / 64, bytes = words * sizeof(uint64_t);
    uint64_t *map = qg_mem_alloc(alloc, bytes);
    if (map == NULL)
        return QG_ERR_NOMEM;
    memset(map, 0, bytes);
    bool ok = shape_mark(map, 0);
    int64_t marked = 1;
    // Depth first from the root, as qg_tree_walk goes: a node is pushed only
    // when its block was marked just now, so the stack holds at most 3 per
    // level and the walk ends after node_high nodes.
    qg_tree_cell stack[QG_TREE_STACK];
    int top = 0;
    stack[top++] = (qg_tree_cell){0, 0, 0, 0};
    while (ok && top > 0) {
        const qg_tree_cell c = stack[--top];
        const int32_t fc = children(tree, c.node);
        if (fc < 0)
            continue;
        if (c.depth >= QG_TREE_BITS || !qg_tree_block_ok(fc, node_high)) {
            ok = false;
            break;
        }
        for (int i = 0; i < 4 && ok; ++i)
            ok = shape_mark(map, fc + i);
        marked += 4;
        for (int i = 3; i >= 0 && ok; --i)
            stack[top++] = qg_tree_child_cell(c, fc, i);
    }
    for (int32_t b = free_block; ok && b >= 0;) {
        if (!qg_tree_block_ok(b, node_high)) {
            ok = false;
            break;
        }
        for (int i = 0; i < 4 && ok; ++i)
            ok = shape_mark(map, b + i);
        marked += 4;
        memcpy(&b, (const char *)nodes + (size_t)b * stride + link_offset, sizeof b);
    }
    qg_mem_free(alloc, map, bytes);
    return ok && marked == node_high ? QG_OK : QG_ERR_INVALID;
}

uint64_t *qg_tree_sort_morton(uint64_t *key, uint64_t *tmp, int32_t n)
{
    for (int shift = 32; shift < 62; shift += 10) {
        int32_t count[1025] = {0};
        for (int32_t i = 0; i < n; ++i)
            count[(key[i] >> shift & 1023) + 1]++;
        for (int d = 0; d < 1024; ++d)
            count[d + 1] += count[d];
        for (int32_t i = 0; i < n; ++i)
            tmp[count[key[i] >> shift & 1023]++] = key[i];
        uint64_t *s = key;
        key = tmp;
        tmp = s;
    }
    return key;
}

/// A tree's learned size must differ this much: its setting, the depth,
/// moves in steps of 2x, and a size 1.5x off already sits a level from
/// where a fresh tree would put it (measured: the loose quadtree 1.36x its
/// fresh tuning with the size 1.8x off after `grow`).
#define QG_TREE_TUNE_RATIO 1.5f

qg_in_force qg_tree_tune_hint(const qg_config *c, const qg_config *user)
{
    // 0 = nothing said: the first measure re-tunes.
    const float elem = user->element_size > 0.0f ? user->element_size
                       : user->max_depth > 0     ? (float)(qg_tree_extent(c->bounds) / (double)(1 << c->max_depth))
                                                 : 0.0f;
    return (qg_in_force){elem, 0.0f};
}

bool qg_tree_tune_differs(const qg_config *c, qg_in_force now, const qg_learned *learned)
{
    (void)c;
    return qg_tune_off_by(now.elem, learned->elem, QG_TREE_TUNE_RATIO);
}

void qg_tree_tune_stats(const qg_config *c, qg_stats *s)
{
    s->max_depth = c->max_depth;
}

const qg_tune_rule qg_tree_tune_rule = {
    .hint = qg_tree_tune_hint,
    .differs = qg_tree_tune_differs,
    .stats = qg_tree_tune_stats,
};
