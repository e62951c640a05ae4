// The uniform grid with row-based element lists that QG_GRID is and that
// QG_MULTI_GRID refines (seed 003, part 2 "Fundamentals", "Row-Based
// Optimizations"; part 7 "Row-Based Optimizations", "hierarchical bitset").
// Shared by src/grid.c and src/multi_grid.c only.
//
// - A cell is 4 bytes: the int32 head of a singly-linked index list of element
//   nodes, -1 when empty.
// - Element nodes live in one free-listed array per row ("singly-linked array
//   list"), so the nodes of a row stay close in memory and a row's list grows
//   and shrinks on its own. A row with no nodes gives its memory back at the
//   next qg_cleanup: its cell array and node array become NULL, and the next
//   insert into it allocates them again.
// - Coordinates map to cells with one monotonic float expression, clamped to
//   the border cells, so boxes outside the bounds are stored in border cells
//   and the mapping of a point inside a box lies inside the box's cell range.
//   Because the map is monotonic it commutes with max: the cell of the
//   top-left corner of an overlap is (max of the two min-corner cells), which
//   lets queries and pairs report each answer in exactly one cell.
// - The hierarchical bitset (gr_bits) sits above the fine cells: level 1 has
//   one 64-bit word per 8x8 block of fine cells, one bit per occupied cell;
//   each level above has one word per 8x8 block of the level below, one bit
//   per non-zero word. It is kept exact at every empty <-> occupied change.
#ifndef QG_GRID_ROWS_H
#define QG_GRID_ROWS_H

#include "index_internal.h"
#include "pool.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/// Resolution limits: at most this many cells per axis and in all. A finer
/// cell_size is raised to fit (config.cell_size then reports the one used).
#define GR_MAX_SIDE 16384
#define GR_MAX_CELLS (1 << 24)
/// Cells per axis when element_size is 0.
#define GR_DEFAULT_SIDE 128
/// Default cell size as a multiple of element_size, measured on `agents`
/// (element_size 5; cells of 10, 20, 32, 48, 64: 32 was fastest, moves
/// relink less and the pair loop gathers fewer duplicate nodes).
#define GR_CELL_PER_ELEMENT 6.0f
/// Elements of one cell gathered on the C stack for the pair loop; longer
/// lists are walked in place.
#define GR_GATHER 64
/// Levels of the hierarchical bitset: 8^6 covers GR_MAX_SIDE.
#define GR_MAX_LEVELS 6

typedef struct gr_ibox {
    int32_t x0, y0, x1, y1; ///< inclusive cell range
} gr_ibox;
_Static_assert(sizeof(gr_ibox) == 16, "gr_ibox is stored and compared as one SSE register");

/// One row: its cells and its own free-listed array of element nodes.
typedef struct gr_row {
    int32_t *cells; ///< cols heads, or NULL when the row's memory is given back
    qg_enode *nodes;
    int32_t capacity, high, free_head, live;
    /// Rollback of the current call: node capacity before it grew the row
    /// (-1: not grown), and whether it allocated the cells.
    int32_t undo_capacity, undo_cells;
    /// 1 when removals emptied the row: the next qg_cleanup gives its memory
    /// back. qg_clear keeps the memory for reuse, so it does not set it.
    int32_t emptied;
} gr_row;

typedef struct gr_level {
    uint64_t *words;
    int32_t cols, rows; ///< words per axis
} gr_level;

/// The hierarchical bitset of occupied fine cells. level[0] is level 1 (one
/// bit per fine cell); level[count - 1] is the coarsest.
typedef struct gr_bits {
    gr_level level[GR_MAX_LEVELS];
    int count;
} gr_bits;

typedef struct gr_grid {
    gr_row *rows;
    int32_t cols, nrows;
    float ox, oy; ///< bounds min corner
    float inv;    ///< cells per world unit
    float cell;   ///< cell size in world units
    /// cols - 1, nrows - 1, cols - 1, nrows - 1: the clamps (a plain array:
    /// a user allocator need not align the struct to 16 bytes).
    float limit[4];
} gr_grid;

/// Cell index of coordinate v: floor((v - origin) * inv) clamped to
/// [0, n - 1]. Monotonic in v; infinities clamp; NaN never arrives.
static inline int32_t gr_map(float v, float origin, float inv, int32_t n)
{
    const float f = (v - origin) * inv;
    if (!(f > 0.0f))
        return 0;
    if (f >= (float)(n - 1))
        return n - 1;
    return (int32_t)f;
}

/// gr_map on the four coordinates of a box. With SSE the four are mapped at
/// once without branches (this runs twice for every move): max with 0 and
/// min with n - 1 are the same clamps, and truncation of the clamped value
/// is the same floor, so both paths give the same cells.
static inline gr_ibox gr_map_box(const gr_grid *g, qg_rect r)
{
#if defined(__SSE2__)
    __m128 f = _mm_mul_ps(_mm_sub_ps(_mm_setr_ps(r.min_x, r.min_y, r.max_x, r.max_y),
                                     _mm_setr_ps(g->ox, g->oy, g->ox, g->oy)),
                          _mm_set1_ps(g->inv));
    f = _mm_min_ps(_mm_max_ps(f, _mm_setzero_ps()), _mm_loadu_ps(g->limit));
    gr_ibox out;
    _mm_storeu_si128((__m128i *)&out, _mm_cvttps_epi32(f));
    return out;
#else
    return (gr_ibox){gr_map(r.min_x, g->ox, g->inv, g->cols), gr_map(r.min_y, g->oy, g->inv, g->nrows),
                     gr_map(r.max_x, g->ox, g->inv, g->cols), gr_map(r.max_y, g->oy, g->inv, g->nrows)};
#endif
}

static inline bool gr_ibox_equal(gr_ibox a, gr_ibox b)
{
#if defined(__SSE2__)
    const __m128i x = _mm_loadu_si128((const __m128i *)&a), y = _mm_loadu_si128((const __m128i *)&b);
    return _mm_movemask_epi8(_mm_cmpeq_epi32(x, y)) == 0xffff;
#else
    return ((a.x0 == b.x0) & (a.x1 == b.x1)) & ((a.y0 == b.y0) & (a.y1 == b.y1));
#endif
}

static inline int64_t gr_ibox_cells(gr_ibox b)
{
    return (int64_t)(b.x1 - b.x0 + 1) * (b.y1 - b.y0 + 1);
}

/// The world box of cell (x, y), for drawing.
static inline qg_rect gr_cell_rect(const gr_grid *g, int32_t x, int32_t y, int32_t span)
{
    return (qg_rect){g->ox + (float)x * g->cell, g->oy + (float)y * g->cell, g->ox + (float)(x + span) * g->cell,
                     g->oy + (float)(y + span) * g->cell};
}

/* ---- configuration ------------------------------------------------------ */

/// Resolves cell_size: about GR_CELL_PER_ELEMENT x element_size, or
/// bounds / GR_DEFAULT_SIDE, raised until the grid fits the limits.
static inline qg_status gr_configure(qg_config *c)
{
    const float w = c->bounds.max_x - c->bounds.min_x, h = c->bounds.max_y - c->bounds.min_y;
    float cell = c->cell_size;
    if (cell == 0.0f)
        cell = c->element_size > 0.0f ? GR_CELL_PER_ELEMENT * c->element_size
                                      : qg_rect_extent(c->bounds) / (float)GR_DEFAULT_SIDE;
    if (!(cell > 0.0f) || !isfinite(cell))
        return QG_ERR_INVALID;
    // Straight to the smallest cell that fits, then a few steps for rounding.
    const double fit = fmax(fmax((double)w / GR_MAX_SIDE, (double)h / GR_MAX_SIDE),
                            sqrt((double)w * (double)h / GR_MAX_CELLS));
    if ((double)cell < fit)
        cell = (float)fit;
    for (int guard = 0; guard < 64; ++guard) {
        const double cols = ceil((double)w / cell), rows = ceil((double)h / cell);
        if (cols <= GR_MAX_SIDE && rows <= GR_MAX_SIDE && cols * rows <= GR_MAX_CELLS)
            break;
        cell *= 1.25f;
    }
    c->cell_size = cell;
    return QG_OK;
}

static inline void gr_row_reset_undo(gr_row *r)
{
    r->undo_capacity = -1;
    r->undo_cells = 0;
}

static inline qg_status gr_init(gr_grid *g, qg_alloc *alloc, const qg_config *c)
{
    const float w = c->bounds.max_x - c->bounds.min_x, h = c->bounds.max_y - c->bounds.min_y;
    g->cell = c->cell_size;
    g->inv = 1.0f / c->cell_size;
    g->ox = c->bounds.min_x;
    g->oy = c->bounds.min_y;
    double cols = ceil((double)w / c->cell_size), rows = ceil((double)h / c->cell_size);
    g->cols = cols < 1 ? 1 : (int32_t)cols;
    g->nrows = rows < 1 ? 1 : (int32_t)rows;
    g->limit[0] = g->limit[2] = (float)(g->cols - 1);
    g->limit[1] = g->limit[3] = (float)(g->nrows - 1);
    g->rows = qg_mem_alloc(alloc, (size_t)g->nrows * sizeof(gr_row));
    if (g->rows == NULL)
        return QG_ERR_NOMEM;
    for (int32_t y = 0; y < g->nrows; ++y) {
        g->rows[y] = (gr_row){NULL, NULL, 0, 0, -1, 0, -1, 0, 0};
    }
    return QG_OK;
}

static inline void gr_row_release(qg_alloc *alloc, const gr_grid *g, gr_row *r)
{
    qg_mem_free(alloc, r->cells, r->cells ? (size_t)g->cols * sizeof(int32_t) : 0);
    qg_mem_free(alloc, r->nodes, (size_t)r->capacity * sizeof(qg_enode));
    r->cells = NULL;
    r->nodes = NULL;
    r->capacity = 0;
    r->high = 0;
    r->free_head = -1;
    r->live = 0;
}

static inline void gr_destroy(gr_grid *g, qg_alloc *alloc)
{
    if (g->rows == NULL)
        return;
    for (int32_t y = 0; y < g->nrows; ++y)
        gr_row_release(alloc, g, &g->rows[y]);
    qg_mem_free(alloc, g->rows, (size_t)g->nrows * sizeof(gr_row));
    g->rows = NULL;
}

/// Deferred upkeep: every row that removals left without nodes gives its
/// memory back (rows emptied by qg_clear keep theirs for the refill).
static inline void gr_cleanup(gr_grid *g, qg_alloc *alloc)
{
    for (int32_t y = 0; y < g->nrows; ++y) {
        gr_row *r = &g->rows[y];
        if (r->emptied) {
            if (r->live == 0)
                gr_row_release(alloc, g, r);
            r->emptied = 0;
        }
    }
}

/// Empties every list, keeping the rows' memory.
static inline void gr_clear(gr_grid *g)
{
    for (int32_t y = 0; y < g->nrows; ++y) {
        gr_row *r = &g->rows[y];
        if (r->cells != NULL)
            memset(r->cells, 0xff, (size_t)g->cols * sizeof(int32_t)); // all -1
        r->high = 0;
        r->free_head = -1;
        r->live = 0;
        r->emptied = 0;
    }
}

/* ---- grow first --------------------------------------------------------- */

/// Gives back what gr_reserve grew in rows [y0, y1].
static inline void gr_rollback(gr_grid *g, qg_alloc *alloc, int32_t y0, int32_t y1)
{
    for (int32_t y = y0; y <= y1; ++y) {
        gr_row *r = &g->rows[y];
        if (r->undo_capacity >= 0) {
            r->nodes = qg_mem_resize(alloc, r->nodes, (size_t)r->capacity * sizeof(qg_enode),
                                     (size_t)r->undo_capacity * sizeof(qg_enode));
            r->capacity = r->undo_capacity;
        }
        if (r->undo_cells) {
            qg_mem_free(alloc, r->cells, (size_t)g->cols * sizeof(int32_t));
            r->cells = NULL;
        }
        gr_row_reset_undo(r);
    }
}

/// Makes sure every row of nb can link the cells of nb that are not in ob
/// (ob may be NULL: all of nb) without allocating: cells allocated, enough
/// spare nodes. Either every row is ready, or nothing changed and false is
/// returned. The row arrays are many and the txn holds few, so rows keep
/// their own rollback record.
static inline bool gr_reserve(gr_grid *g, qg_alloc *alloc, gr_ibox nb, const gr_ibox *ob)
{
    const int32_t width = nb.x1 - nb.x0 + 1;
    int32_t overlap = 0;
    if (ob != NULL) {
        const int32_t a = nb.x0 > ob->x0 ? nb.x0 : ob->x0, b = nb.x1 < ob->x1 ? nb.x1 : ob->x1;
        overlap = b >= a ? b - a + 1 : 0;
    }
    for (int32_t y = nb.y0; y <= nb.y1; ++y) {
        gr_row *r = &g->rows[y];
        const int32_t need = (ob != NULL && y >= ob->y0 && y <= ob->y1) ? width - overlap : width;
        if (need == 0)
            continue;
        if (r->cells == NULL) {
            r->cells = qg_mem_alloc(alloc, (size_t)g->cols * sizeof(int32_t));
            if (r->cells == NULL) {
                gr_rollback(g, alloc, nb.y0, y);
                return false;
            }
            memset(r->cells, 0xff, (size_t)g->cols * sizeof(int32_t));
            r->undo_cells = 1;
        }
        const int64_t needed = (int64_t)r->live + need;
        if (needed > r->capacity) {
            int64_t cap = (int64_t)r->capacity + r->capacity / 2;
            if (cap < needed)
                cap = needed;
            if (cap < 8)
                cap = 8;
            void *p = cap > INT32_MAX ? NULL
                                      : qg_mem_resize(alloc, r->nodes, (size_t)r->capacity * sizeof(qg_enode),
                                                      (size_t)cap * sizeof(qg_enode));
            if (p == NULL) {
                gr_rollback(g, alloc, nb.y0, y);
                return false;
            }
            r->undo_capacity = r->capacity;
            r->nodes = p;
            r->capacity = (int32_t)cap;
        }
    }
    for (int32_t y = nb.y0; y <= nb.y1; ++y)
        gr_row_reset_undo(&g->rows[y]);
    return true;
}

/* ---- hierarchical bitset ------------------------------------------------- */

static inline void gr_bits_set(gr_bits *b, int32_t x, int32_t y)
{
    for (int l = 0; l < b->count; ++l) {
        gr_level *lv = &b->level[l];
        uint64_t *w = &lv->words[(size_t)(y >> 3) * (size_t)lv->cols + (size_t)(x >> 3)];
        const uint64_t was = *w;
        *w = was | (uint64_t)1 << ((y & 7) << 3 | (x & 7));
        if (was != 0)
            return; // the levels above already say this block is occupied
        x >>= 3;
        y >>= 3;
    }
}

static inline void gr_bits_clear(gr_bits *b, int32_t x, int32_t y)
{
    for (int l = 0; l < b->count; ++l) {
        gr_level *lv = &b->level[l];
        uint64_t *w = &lv->words[(size_t)(y >> 3) * (size_t)lv->cols + (size_t)(x >> 3)];
        *w &= ~((uint64_t)1 << ((y & 7) << 3 | (x & 7)));
        if (*w != 0)
            return;
        x >>= 3;
        y >>= 3;
    }
}

/* ---- links --------------------------------------------------------------- */

/// Pushes h on cell (x, y); the row was reserved. Returns true when the cell
/// was empty.
static inline bool gr_link(gr_row *r, int32_t x, qg_handle h)
{
    int32_t i;
    if (r->free_head >= 0) {
        i = r->free_head;
        r->free_head = r->nodes[i].next;
    } else {
        i = r->high++;
    }
    const int32_t head = r->cells[x];
    r->nodes[i].next = head;
    r->nodes[i].element = h;
    r->cells[x] = i;
    r->live++;
    return head < 0;
}

/// Takes h off cell (x, y). Returns true when the cell became empty.
static inline bool gr_unlink(gr_row *r, int32_t x, qg_handle h)
{
    int32_t *link = &r->cells[x];
    while (*link >= 0) {
        const int32_t e = *link;
        if (r->nodes[e].element == h) {
            *link = r->nodes[e].next;
            r->nodes[e].next = r->free_head;
            r->nodes[e].element = -1;
            r->free_head = e;
            r->emptied |= --r->live == 0;
            break;
        }
        link = &r->nodes[e].next;
    }
    return r->cells[x] < 0;
}

/// Links h into every cell of b (reserved). bits may be NULL.
static inline void gr_link_box(gr_grid *g, gr_bits *bits, gr_ibox b, qg_handle h)
{
    for (int32_t y = b.y0; y <= b.y1; ++y) {
        gr_row *r = &g->rows[y];
        for (int32_t x = b.x0; x <= b.x1; ++x) {
            if (gr_link(r, x, h) && bits != NULL)
                gr_bits_set(bits, x, y);
        }
    }
}

static inline void gr_unlink_box(gr_grid *g, gr_bits *bits, gr_ibox b, qg_handle h)
{
    for (int32_t y = b.y0; y <= b.y1; ++y) {
        gr_row *r = &g->rows[y];
        for (int32_t x = b.x0; x <= b.x1; ++x) {
            if (gr_unlink(r, x, h) && bits != NULL)
                gr_bits_clear(bits, x, y);
        }
    }
}

static inline bool gr_in(gr_ibox b, int32_t x, int32_t y)
{
    return x >= b.x0 && x <= b.x1 && y >= b.y0 && y <= b.y1;
}

/// Moves h from the cells of ob to those of nb, touching only the cells in
/// one and not the other (nb reserved against ob).
static inline void gr_relink(gr_grid *g, gr_bits *bits, gr_ibox ob, gr_ibox nb, qg_handle h)
{
    for (int32_t y = ob.y0; y <= ob.y1; ++y) {
        gr_row *r = &g->rows[y];
        for (int32_t x = ob.x0; x <= ob.x1; ++x) {
            if (!gr_in(nb, x, y) && gr_unlink(r, x, h) && bits != NULL)
                gr_bits_clear(bits, x, y);
        }
    }
    for (int32_t y = nb.y0; y <= nb.y1; ++y) {
        gr_row *r = &g->rows[y];
        for (int32_t x = nb.x0; x <= nb.x1; ++x) {
            if (!gr_in(ob, x, y) && gr_link(r, x, h) && bits != NULL)
                gr_bits_set(bits, x, y);
        }
    }
}

/* ---- kind operations shared by both grids -------------------------------- */

static inline qg_status gr_insert(gr_grid *g, gr_bits *bits, qg_index *index, qg_handle h, qg_rect box)
{
    const gr_ibox b = gr_map_box(g, box);
    if (!gr_reserve(g, &index->alloc, b, NULL))
        return QG_ERR_NOMEM;
    gr_link_box(g, bits, b, h);
    return QG_OK;
}

static inline qg_status gr_move(gr_grid *g, gr_bits *bits, qg_index *index, qg_handle h, qg_rect box)
{
    const gr_ibox nb = gr_map_box(g, box);
    const gr_ibox ob = gr_map_box(g, index->boxes[h]);
    if (!gr_ibox_equal(ob, nb)) {
        if (!gr_reserve(g, &index->alloc, nb, &ob))
            return QG_ERR_NOMEM;
        gr_relink(g, bits, ob, nb, h);
    }
    index->boxes[h] = box;
    return QG_OK;
}

/// Reports the elements of cell (x, y) that overlap area, each only in the
/// cell holding the top-left corner of its overlap with the area: the cell
/// (max(box x0, area x0), max(box y0, area y0)). In the area's first column
/// or row that half of the test always holds. False when fn asked to stop.
static inline bool gr_query_cell(const gr_grid *g, const gr_row *r, int32_t x, int32_t y, gr_ibox qb,
                                 const qg_rect *boxes, qg_rect area, qg_query_fn *fn, void *user,
                                 qg_query_stats *stats)
{
    const bool first_col = x == qb.x0, first_row = y == qb.y0;
    for (int32_t e = r->cells[x]; e >= 0; e = r->nodes[e].next) {
        const qg_handle h = r->nodes[e].element;
        const qg_rect b = boxes[h];
        stats->elements_tested++;
        if (!qg_overlaps(b, area))
            continue;
        if ((first_col || gr_map(b.min_x, g->ox, g->inv, g->cols) == x) &&
            (first_row || gr_map(b.min_y, g->oy, g->inv, g->nrows) == y) && !fn(h, user))
            return false;
    }
    return true;
}

/// QG_GRID's query: every cell of the area's range, row by row.
static inline void gr_query(const gr_grid *g, const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                            qg_query_stats *stats)
{
    const gr_ibox qb = gr_map_box(g, area);
    for (int32_t y = qb.y0; y <= qb.y1; ++y) {
        const gr_row *r = &g->rows[y];
        if (r->cells == NULL) {
            stats->nodes_visited++; // one look at the row says all its cells are empty
            continue;
        }
        stats->nodes_visited += qb.x1 - qb.x0 + 1;
        for (int32_t x = qb.x0; x <= qb.x1; ++x) {
            if (r->cells[x] >= 0 && !gr_query_cell(g, r, x, y, qb, index->boxes, area, fn, user, stats))
                return;
        }
    }
}

/// Pairs of a cell with more than GR_GATHER elements, walked in place.
static inline bool gr_pairs_long(const gr_grid *g, const gr_row *r, int32_t x, int32_t y, const qg_rect *boxes,
                                 qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    for (int32_t e = r->cells[x]; e >= 0; e = r->nodes[e].next) {
        const qg_handle ha = r->nodes[e].element;
        const qg_rect a = boxes[ha];
        const bool ax = gr_map(a.min_x, g->ox, g->inv, g->cols) == x;
        const bool ay = gr_map(a.min_y, g->oy, g->inv, g->nrows) == y;
        for (int32_t f = r->nodes[e].next; f >= 0; f = r->nodes[f].next) {
            const qg_handle hb = r->nodes[f].element;
            const qg_rect b = boxes[hb];
            stats->elements_tested++;
            if (!qg_overlaps(a, b))
                continue;
            if ((ax || gr_map(b.min_x, g->ox, g->inv, g->cols) == x) &&
                (ay || gr_map(b.min_y, g->oy, g->inv, g->nrows) == y) && !qg_report_pair(fn, user, ha, hb))
                return false;
        }
    }
    return true;
}

#if defined(__GNUC__)
#define GR_PREFETCH(p) __builtin_prefetch(p)
#else
#define GR_PREFETCH(p) ((void)(p))
#endif

/// Element nodes gathered per batch in gr_pairs.
#define GR_BATCH 512

/// Pairs among the k elements of cell (x, y), gathered in ids.
static inline bool gr_pairs_among(const gr_grid *g, int32_t x, int32_t y, const qg_handle *ids, int k,
                                  const qg_rect *boxes, qg_pair_fn *fn, void *user)
{
    qg_rect rb[GR_GATHER];
    unsigned home[GR_GATHER];
    for (int i = 0; i < k; ++i) {
        const qg_rect b = boxes[ids[i]];
        rb[i] = b;
        home[i] = (unsigned)(gr_map(b.min_x, g->ox, g->inv, g->cols) == x) |
                  (unsigned)(gr_map(b.min_y, g->oy, g->inv, g->nrows) == y) << 1;
    }
    for (int i = 0; i < k; ++i) {
        const qg_rect a = rb[i];
        const unsigned ha = home[i];
        for (int j = i + 1; j < k; ++j) {
            if (((ha | home[j]) == 3) & qg_overlaps(a, rb[j]) && !qg_report_pair(fn, user, ids[i], ids[j]))
                return false;
        }
    }
    return true;
}

/// Every overlapping pair once: rows in order, cells in order; a pair is
/// reported only in the cell holding the top-left corner of the two boxes'
/// overlap, i.e. where at least one box starts in this column and at least
/// one starts in this row (`home` bits 0 and 1). The lists of a run of cells
/// are gathered first, prefetching every element's box, so the boxes' cache
/// misses overlap instead of queueing one behind the other.
static inline void gr_pairs(const gr_grid *g, const qg_index *index, qg_pair_fn *fn, void *user,
                            qg_query_stats *stats)
{
    const qg_rect *boxes = index->boxes;
    qg_handle ids[GR_BATCH];
    int32_t cell_x[GR_BATCH / 2];
    int start[GR_BATCH / 2 + 1];
    for (int32_t y = 0; y < g->nrows; ++y) {
        const gr_row *r = &g->rows[y];
        if (r->cells == NULL || r->live < 2) {
            stats->nodes_visited++; // one look at the row says no cell holds two
            continue;
        }
        stats->nodes_visited += g->cols;
        const int32_t *cells = r->cells;
        const qg_enode *nodes = r->nodes;
        int32_t x = 0;
        while (x < g->cols) {
            int n = 0, fill = 0;
            start[0] = 0;
            for (; x < g->cols && fill + GR_GATHER <= GR_BATCH && n < GR_BATCH / 2; ++x) {
                const int32_t head = cells[x];
                if (head < 0 || nodes[head].next < 0)
                    continue;
                int k = 0;
                int32_t e = head;
                for (; e >= 0 && k < GR_GATHER; e = nodes[e].next, ++k) {
                    const qg_handle h = nodes[e].element;
                    GR_PREFETCH(&boxes[h]);
                    ids[fill + k] = h;
                }
                if (e >= 0) {
                    if (!gr_pairs_long(g, r, x, y, boxes, fn, user, stats))
                        return;
                    continue;
                }
                stats->elements_tested += (int64_t)k * (k - 1) / 2;
                cell_x[n++] = x;
                fill += k;
                start[n] = fill;
            }
            for (int i = 0; i < n; ++i) {
                if (!gr_pairs_among(g, cell_x[i], y, ids + start[i], start[i + 1] - start[i], boxes, fn, user))
                    return;
            }
        }
    }
}

/* ---- stats, visit, validate ---------------------------------------------- */

static inline int64_t gr_cell_length(const gr_row *r, int32_t x)
{
    int64_t n = 0;
    for (int32_t e = r->cells[x]; e >= 0 && n <= r->high; e = r->nodes[e].next)
        n++;
    return n;
}

/// Calls fn for every non-empty fine cell, depth `depth`.
static inline void gr_visit_cells(const gr_grid *g, int depth, qg_visit_fn *fn, void *user)
{
    for (int32_t y = 0; y < g->nrows; ++y) {
        const gr_row *r = &g->rows[y];
        if (r->cells == NULL || r->live == 0)
            continue;
        for (int32_t x = 0; x < g->cols; ++x) {
            if (r->cells[x] >= 0)
                fn(gr_cell_rect(g, x, y, 1), depth, (int32_t)gr_cell_length(r, x), user);
        }
    }
}

/// A well-mixed 64-bit value of v and a salt (splitmix64's finaliser).
static inline uint64_t gr_mix(uint64_t v, uint64_t salt)
{
    v += salt * 0x9e3779b97f4a7c15ull;
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
    return (v ^ (v >> 31)) | 1;
}

/// The element's factor in the fingerprint: one multiply, as it runs for
/// every node (the cell factors are mixed well, once per cell).
static inline uint64_t gr_elem_print(qg_handle h)
{
    return ((uint64_t)(uint32_t)h * 2 + 1) * 0xd6e8feb86659fd93ull;
}

/// Checks every row, free list and list, and that the element nodes are
/// exactly "h in every cell of its box, once". The last part compares two
/// fingerprints of the set of (element, x, y) triples, one summed over the
/// nodes and one over the cells every element's box maps to, with the term
/// a(h) * b(x) * c(y): separable, so an element's whole cell range sums in
/// O(columns + rows), and a node in a wrong cell, a duplicate or a missing
/// node changes the sum (except with probability ~2^-60). Plain
/// comparisons could not do it in linear time without allocating. Adds the
/// rows' bytes. `bits` are checked by the caller.
static inline bool gr_validate(const gr_grid *g, const qg_index *index, size_t *bytes)
{
    if (g->rows == NULL || g->cols < 1 || g->nrows < 1)
        return false;
    int64_t nodes_seen = 0;
    uint64_t print_nodes = 0;
    size_t b = (size_t)g->nrows * sizeof(gr_row);
    for (int32_t y = 0; y < g->nrows; ++y) {
        const gr_row *r = &g->rows[y];
        if (r->undo_capacity != -1 || r->undo_cells != 0 || (r->emptied & ~1) != 0)
            return false;
        if (r->high < 0 || r->high > r->capacity || r->live < 0 || r->live > r->high ||
            (r->capacity > 0) != (r->nodes != NULL))
            return false;
        if (r->cells == NULL) {
            if (r->live != 0)
                return false;
        } else {
            b += (size_t)g->cols * sizeof(int32_t);
        }
        b += (size_t)r->capacity * sizeof(qg_enode);
        // Free list: exactly the dead slots below high.
        int64_t free_count = 0;
        for (int32_t e = r->free_head; e >= 0; e = r->nodes[e].next) {
            if (e >= r->high || r->nodes[e].element != -1 || ++free_count > r->high - r->live)
                return false;
        }
        if (free_count != r->high - r->live)
            return false;
        if (r->cells == NULL || r->live == 0)
            continue;
        const uint64_t cy = gr_mix((uint64_t)y, 3);
        int64_t in_row = 0;
        for (int32_t x = 0; x < g->cols; ++x) {
            const uint64_t cxy = gr_mix((uint64_t)x, 2) * cy;
            for (int32_t e = r->cells[x]; e >= 0; e = r->nodes[e].next) {
                if (e >= r->high || ++in_row > r->live)
                    return false;
                const qg_handle h = r->nodes[e].element;
                if (!qg_slot_live(index, h))
                    return false;
                print_nodes += gr_elem_print(h) * cxy;
            }
        }
        if (in_row != r->live)
            return false;
        nodes_seen += in_row;
    }
    int64_t expected = 0;
    uint64_t print_boxes = 0;
    for (qg_handle h = 0; h < index->box_high; ++h) {
        if (!qg_slot_live(index, h))
            continue;
        const gr_ibox ib = gr_map_box(g, index->boxes[h]);
        expected += gr_ibox_cells(ib);
        uint64_t sx = 0, sy = 0;
        for (int32_t x = ib.x0; x <= ib.x1; ++x)
            sx += gr_mix((uint64_t)x, 2);
        for (int32_t y = ib.y0; y <= ib.y1; ++y)
            sy += gr_mix((uint64_t)y, 3);
        print_boxes += gr_elem_print(h) * sx * sy;
    }
    if (expected != nodes_seen || print_nodes != print_boxes)
        return false;
    *bytes += b;
    return true;
}

#endif
