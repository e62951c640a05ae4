// SPDX-License-Identifier: MIT
// QG_GRID: the uniform grid with row-based element lists (docs/kinds.md,
// "grid"). The structure and its operations live in
// grid_rows.inc, shared with QG_MULTI_GRID:
//
// - Learning (tune.c): element_size = the median larger side of its
//   elements (cells GR_CELL_PER_ELEMENT of it, as for a given one) and its
//   world = their bounding box (the torus' size); a re-tune rebuilds when
//   either moved 2x from what is in force.
// - 4-byte cells: the int32 head of a singly-linked index list, -1 = empty.
// - An element is stored once (the base's box array) and has an element node
//   in every cell its box overlaps, up to GR_BOX_CELLS (32 x 32) cells; a box
//   covering more (the whole torus, or far more cells than element_size
//   promised) is kept once in the wide list, which queries and the pair
//   search test in full.
// - Any cell size is taken (a working index, never
//   QG_ERR_INVALID for a finite positive size): one too small for the boxes
//   (cell_size or element_size 1e-3 under boxes 20 wide, which would link
//   each box into 2048 x 2048 cells) puts those boxes on the wide list, so
//   memory stays at most GR_BOX_CELLS nodes (8 KiB) a box plus the rows,
//   and the pair search among them turns quadratic: slow, bounded, exact.
//   A cell is at least GR_MIN_CELL (4 / FLT_MAX, so that 1 / cell is
//   finite): a world smaller than that (bounds [0, FLT_TRUE_MIN]^2) is one
//   cell, and works.
// - Element nodes live in one free-listed array per row; a row without nodes
//   gives its cells and nodes back at qg_cleanup (NULL row) and allocates them
//   again on the next insert into it; a row with far more node slots than
//   nodes is compacted and shrunk there (GR_ROW_TARGET), so memory_bytes
//   follows the occupancy and stays flat over a long run. qg_cleanup never
//   allocates.
// - The grid is a torus of power-of-two sides: a cell is (cx mod cols,
//   cy mod rows) of the unwrapped cell, so boxes outside the bounds spread
//   over the cells like the ones inside, and huge bounds keep cells sized by
//   element_size (the world wraps instead of the cells growing). A box
//   takes each wrapped cell at most once.
// - qg_move relinks only the cells in the old range and not the new one, and
//   the reverse; a move within the same cell range only writes the box.
// - Queries and pairs walk rows in order and report each element or pair in
//   the one wrapped cell holding the top-left corner of the overlap: no
//   visited set, even where ranges wrap.
// - Several cores (grid_rows.inc, gr_pairs_part and gr_move_many): the pair
//   search splits into bands of rows balanced by element nodes; a pair is
//   reported in one wrapped cell, which lies in one band, so each pair comes
//   from exactly one part, torus wrap included (the wide list's pairs
//   split by handle range). A batch move finds in parallel which moves change
//   cells (about 10% of a frame's on `agents` at 1,000,000), reserves every
//   row they need serially (QG_ERR_NOMEM before any change), then each part
//   stores its share of the boxes and relinks its own band of rows, unlinks
//   before links. Cleanup only frees emptied rows: it stays serial.
// - Ray casts and nearest searches walk the cells themselves
//   (grid_rows.inc, gr_raycast / gr_nearest, shared with QG_MULTI_GRID). A
//   ray goes row by row in the direction of dy and along each row in the
//   direction of dx over the unwrapped cells its segment crosses, widened
//   by a hair for rounding (a cell lists every element overlapping it: no
//   margin), clipped to the reach (the grow-only range of every cell ever
//   linked: an infinite ray stops where the elements end). A hit is
//   reported only in the unwrapped cell of its hit point clamped into its
//   box: that point is in the box, so its cell is one the box is listed
//   in, the walk visits it, and it is one cell, so each hit comes once
//   with no visited set, wraps and all. Nearest: rings of unwrapped cells
//   around the point's, each cell skipped when its widened box is past
//   qg_near_bound, the rings stopped when the next one is (strictly, so
//   ties are seen) or they hold the reach; an element's nearest point lies
//   in a cell it is listed in, so none that can enter is missed, and
//   offering it twice is harmless. Both test the wide list in full, and
//   both fall back to one pass over the torus when the walk would visit
//   more cells than it has (a ray across a reach stretched by an element
//   far away): exact either way. The boxes sit at random places in the
//   base's array, so the cells are gathered in small batches whose lists'
//   boxes are prefetched together (the misses overlap).
// - qg_insert_many writes each row's new nodes cell by cell, so a cell's
//   list is contiguous after a bulk build (one-at-a-time inserts leave
//   them in insertion order): a walk then reads a line or two per cell.
#include "grid_family/grid_update.inc"
#include "grid_family/grid_search.inc"
#include "grid_family/grid_batch.inc"
#include "grid_family/grid_check.inc"
#include "grid_family/grid_rays.inc"
#include "grid_family/grid_state.inc"
#include "kind.h"

typedef struct grid {
    qg_index base;
    gr_grid g;
} grid;

static qg_status grid_configure(qg_config *config)
{
    return gr_configure(config);
}

static qg_status grid_init(qg_index *index)
{
    grid *gd = (grid *)index;
    return gr_init(&gd->g, &index->alloc, &index->config);
}

static void grid_destroy(qg_index *index)
{
    grid *gd = (grid *)index;
    gr_destroy(&gd->g, &index->alloc);
}

static qg_status grid_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    // The row arrays keep their own rollback record; txn holds the wide
    // list.
    return gr_insert(&((grid *)index)->g, NULL, index, txn, h, box);
}

static void grid_remove(qg_index *index, qg_handle h)
{
    gr_remove(&((grid *)index)->g, NULL, index, h);
}

static QG_NOINLINE qg_status grid_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    return gr_move(&((grid *)index)->g, NULL, index, txn, h, box);
}

static void grid_cleanup(qg_index *index)
{
    gr_cleanup(&((grid *)index)->g, &index->alloc);
}

static void grid_clear(qg_index *index)
{
    gr_clear(&((grid *)index)->g);
}

static void grid_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user, qg_query_stats *stats)
{
    gr_query(&((const grid *)index)->g, index, area, fn, user, stats);
}

static void grid_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    gr_pairs(&((const grid *)index)->g, index, fn, user, stats);
}

static void grid_stats(const qg_index *index, qg_stats *stats)
{
    const gr_grid *g = &((const grid *)index)->g;
    stats->nodes = g->cols * g->nrows;
    stats->leaves = stats->nodes;
    stats->max_depth_reached = 0;
}

/// Reports the non-empty cells only (a 2000x2000 grid is mostly empty).
static void grid_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    gr_visit_cells(&((const grid *)index)->g, 0, fn, user);
}

static qg_status grid_validate(const qg_index *index, size_t *bytes)
{
    return gr_validate(&((const grid *)index)->g, index, bytes) ? QG_OK : QG_ERR_INVALID;
}

static void grid_pairs_part(const qg_index *index, int32_t part, int32_t parts, qg_pair_fn *fn, void *user,
                            qg_query_stats *stats)
{
    gr_pairs_part(&((const grid *)index)->g, index, part, parts, fn, user, stats);
}

static qg_status grid_move_many(qg_index *index, const qg_jobs *jobs, const qg_handle *handles,
                                const qg_rect *boxes, int32_t n)
{
    return gr_move_many(&((grid *)index)->g, NULL, index, jobs, handles, boxes, n);
}

static void grid_raycast(const qg_index *index, float ox, float oy, float dx, float dy, float max_t, qg_ray_fn *fn,
                         void *user)
{
    qg_ray r = qg_ray_start(ox, oy, dx, dy, max_t, fn, user);
    gr_raycast(&((const grid *)index)->g, index, &r);
}

static int32_t grid_nearest(const qg_index *index, float x, float y, int32_t k, float max_distance2,
                            qg_handle *handles, float *distances2)
{
    (void)distances2; // qg_nearest fills them from the boxes
    return gr_nearest(&((const grid *)index)->g, index, x, y, k, max_distance2, handles);
}

static qg_status grid_insert_many(qg_index *index, qg_txn *txn, const qg_handle *handles, int32_t n)
{
    return gr_insert_many(&((grid *)index)->g, NULL, index, txn, handles, n);
}

static void *grid_batch_mark(qg_index *index, int32_t n)
{
    (void)n;
    return gr_mark_take(&((grid *)index)->g, &index->alloc);
}

static void grid_batch_trim(qg_index *index, void *mark, bool undone)
{
    gr_trim(&((grid *)index)->g, &index->alloc, mark, undone);
}

static qg_in_force grid_tune_hint(const qg_config *c, const qg_config *user)
{
    (void)c;
    const float elem = user->element_size > 0.0f ? user->element_size
                       : user->cell_size > 0.0f  ? user->cell_size / 6.0f
                                                 : 0.0f;
    return (qg_in_force){elem, 0.0f};
}

/// The grids wrap around a torus: a world grown 2x folds twice as many
/// elements onto each cell, so the world re-tunes as the size does.
static bool grid_tune_differs(const qg_config *c, qg_in_force now, const qg_learned *learned)
{
    return qg_tune_off_by(now.elem, learned->elem, QG_TUNE_RATIO) || qg_tune_world_off(c->bounds, learned->world);
}

static void grid_tune_stats(const qg_config *c, qg_stats *s)
{
    s->cell_size = c->cell_size;
}

/// The grid is the whole kind (grid_state.inc).
static void grid_state(qg_state *s, qg_index *d, const qg_index *src)
{
    gr_state(s, &((grid *)d)->g, &((const grid *)src)->g, &d->config, d->box_high);
}

const qg_tune_rule qg_grid_tune_rule = {
    .hint = grid_tune_hint,
    .differs = grid_tune_differs,
    .stats = grid_tune_stats,
};

QG_KIND_CLASS_EX(grid, QG_GRID, grid, .state = grid_state, .tune = &qg_grid_tune_rule, .pairs_part = grid_pairs_part, .move_many = grid_move_many,
                 .raycast = grid_raycast, .nearest = grid_nearest,
                 .insert_many = grid_insert_many, .batch_mark = grid_batch_mark,
                 .batch_trim = grid_batch_trim);
