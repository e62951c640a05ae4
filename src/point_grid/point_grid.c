// SPDX-License-Identifier: MIT
// QG_POINT_GRID: the kind's table and its structure calls: inserts, removes
// and moves through the levels' tails and home cells, qg_cleanup's choice
// between refresh and re-sort, queries, stats, visit and validate. The
// overview of the kind is in point_grid.h; point_grid_world.c owns the levels' worlds
// and re-sorts, point_grid_pairs.c and point_grid_pairs_avx2.c the pair search.
#include "point_grid.h"
#include "../kind.h"
#include "../state.h"

/// Adds h (box already in boxes[h], hb[h] naming level k) to level k's
/// tail, or rebuilds the level when the tail is full. The caller has made
/// room for the level's count slots.
static void pg_tail_add(point_grid *g, int32_t k, qg_handle h)
{
    pg_level *L = &g->level[k];
    if (L->tail >= pg_tail_limit(L) || L->listed + L->tail >= L->order_capacity - PG_PAD) {
        qg_pg_rebuild(g, k);
        return;
    }
    const pg_point p = pg_box_point(L, g->base.boxes[h]);
    const int32_t s = L->listed + L->tail;
    const int32_t row = p.y >> PG_QBITS;
    pg_set_order(L, s, h, pg_tail_col(p));
    L->sq[s] = L->tail_head[row];
    L->tail_head[row] = (uint16_t)L->tail++;
    g->hb[h] = (uint8_t)((uint32_t)k << 4 | PG_HB_TAIL);
}

/// Takes tail element h out of the list of `row`, leaving a tombstone.
static void pg_tail_unlink(pg_level *L, qg_handle h, int32_t row)
{
    uint16_t *link = &L->tail_head[row];
    while (*link != PG_TAIL_END) {
        const int32_t s = L->listed + *link;
        if (pg_order(L, s) == h) {
            *link = L->sq[s];
            pg_set_order(L, s, -1, 0);
            L->tombstones++;
            return;
        }
        link = &L->sq[s];
    }
}

/// Leaves a tombstone in the home cell slot of listed element h, whose
/// current point is p.
static void pg_unlist(pg_level *L, uint32_t bits, qg_handle h, pg_point p)
{
    const int32_t hx = pg_home(p.x >> PG_QBITS, bits & 3), hy = pg_home(p.y >> PG_QBITS, bits >> 2 & 3);
    const int32_t c = hy * L->cols + hx;
    for (int32_t s = L->start[c]; s < L->start[c + 1]; ++s) {
        if (pg_order(L, s) == h) {
            pg_set_order(L, s, -1, 0);
            break;
        }
    }
    L->tombstones++;
}

/// Takes h (box `box`, the one it was listed with) out of its level.
static void pg_take_out(point_grid *g, qg_handle h, qg_rect box)
{
    const uint32_t bits = g->hb[h];
    pg_level *L = &g->level[pg_level_bits(bits)];
    const pg_point p = pg_box_point(L, box);
    if (bits & PG_HB_TAIL)
        pg_tail_unlink(L, h, p.y >> PG_QBITS);
    else
        pg_unlist(L, bits, h, p);
    L->count--;
    g->hb[h] = PG_HB_NONE;
}

static qg_status point_grid_configure(qg_config *config)
{
    const float extent = qg_rect_extent(config->bounds);
    if (config->max_element_size == 0.0f) {
        // Twice the typical width; with no typical width either, a 256th of
        // the bounds. Larger boxes go to coarser levels either way.
        config->max_element_size = config->element_size > 0.0f ? 2.0f * config->element_size : extent / 256.0f;
        if (!(config->max_element_size > 0.0f))
            config->max_element_size = FLT_MIN;
    }
    // A cell must be wider than the pair reach plus both margins and a unit
    // of rounding (a little under two and a half bounds), so that partners
    // are never two cells apart. The default, six bounds, measured fastest
    // at the agents workload (against five and seven; eight is slower, its
    // coarser points letting more candidates through), and its cells' 4
    // bytes are about half a byte per element there. Wider cells also have
    // wider margins, so fewer elements leave them between re-sorts.
    const float least = config->max_element_size * 2.5f;
    if (config->cell_size == 0.0f)
        config->cell_size = 6.0f * config->max_element_size;
    if (config->cell_size < least || !isfinite(config->cell_size))
        config->cell_size = isfinite(least) ? least : extent;
    return QG_OK;
}


/// Gives level k its arrays (start, tail_head) if it has none, and room for
/// `more` elements beyond its count. Grow first: nothing changes here but
/// capacities.
static bool pg_reserve_level(point_grid *g, qg_txn *txn, int32_t k, int32_t more)
{
    pg_level *L = &g->level[k];
    if (!L->live &&
        (!qg_txn_reserve(txn, (void **)&L->start, &L->start_capacity, sizeof(int32_t), (int64_t)L->cols * L->rows + 1) ||
         !qg_txn_reserve(txn, (void **)&L->tail_head, &L->tail_head_capacity, sizeof(uint16_t), L->rows)))
        return false;
    const int64_t slots = (int64_t)L->count + more + PG_PAD;
    return qg_txn_reserve(txn, (void **)&L->order, &L->order_capacity, sizeof(uint32_t), slots) &&
           qg_txn_reserve(txn, (void **)&L->sq, &L->sq_capacity, sizeof(uint16_t), L->order_capacity);
}

/// Makes a level whose arrays were just reserved an empty grid.
static void pg_make_live(point_grid *g, int32_t k)
{
    pg_level *L = &g->level[k];
    if (L->live)
        return;
    L->live = true;
    qg_pg_rebuild(g, k);
}

static qg_status point_grid_init(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    for (int32_t k = 0; k < PG_LEVELS; ++k)
        qg_pg_level_init(&g->level[k], &index->config, k);
    g->steady_high = -1;
#if defined(PG_HAVE_AVX2)
    g->wide = qg_cpu_avx2();
#endif
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    if (!pg_reserve_level(g, &txn, 0, 0)) {
        qg_txn_rollback(&txn);
        return QG_ERR_NOMEM;
    }
    pg_make_live(g, 0);
    return QG_OK;
}

static void point_grid_destroy(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    qg_array_free(&index->alloc, (void **)&g->hb, &g->hb_capacity, sizeof(uint8_t));
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        pg_level *L = &g->level[k];
        qg_array_free(&index->alloc, (void **)&L->start, &L->start_capacity, sizeof(int32_t));
        qg_array_free(&index->alloc, (void **)&L->order, &L->order_capacity, sizeof(uint32_t));
        qg_array_free(&index->alloc, (void **)&L->sq, &L->sq_capacity, sizeof(uint16_t));
        qg_array_free(&index->alloc, (void **)&L->tail_head, &L->tail_head_capacity, sizeof(uint16_t));
    }
}

static qg_status point_grid_insert(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    point_grid *g = (point_grid *)index;
    if (h >= PG_MAX_HANDLES)
        return QG_ERR_CAPACITY;
    const int32_t k = pg_level_of(g, box);
    if (!qg_txn_reserve(txn, (void **)&g->hb, &g->hb_capacity, sizeof(uint8_t), (int64_t)h + 1) ||
        !pg_reserve_level(g, txn, k, 1) || (g->want && !qg_pg_grow(g, txn)))
        return QG_ERR_NOMEM;
    // A new handle's hb byte is not set yet: the rebuild that makes a level
    // live must not find h in it.
    g->hb[h] = PG_HB_NONE;
    pg_make_live(g, k);
    g->level[k].count++;
    g->hb[h] = (uint8_t)((uint32_t)k << 4 | PG_HB_TAIL);
    pg_tail_add(g, k, h);
    return QG_OK;
}

/// qg_insert_many in bulk: every reservation first (each level's slots and
/// tail room, the cells its world may fit, hb), then each level that takes
/// new elements re-sorted once with them (one counting sort) instead of n
/// tail inserts and the re-sorts the tail limit triggers on the way.
static qg_status point_grid_insert_many(qg_index *index, qg_txn *txn, const qg_handle *handles, int32_t n)
{
    point_grid *g = (point_grid *)index;
    int64_t more[PG_LEVELS] = {0};
    qg_handle top = -1;
    for (int32_t i = 0; i < n; ++i) {
        const qg_handle h = handles[i];
        if (h >= PG_MAX_HANDLES)
            return QG_ERR_CAPACITY;
        top = h > top ? h : top;
        more[pg_level_of(g, index->boxes[h])]++;
    }
    // Every slot below box_high gets a byte, free ones PG_HB_NONE: a re-tune's
    // rebuild (tune.c) inserts into a fresh grid whose free slots never had
    // one (the re-sorts read every slot's byte).
    const int32_t had = g->hb_capacity;
    if (top < index->box_high - 1)
        top = index->box_high - 1;
    if (!qg_txn_reserve(txn, (void **)&g->hb, &g->hb_capacity, sizeof(uint8_t), (int64_t)top + 1))
        return QG_ERR_NOMEM;
    if (g->hb_capacity > had)
        memset(g->hb + had, PG_HB_NONE, (size_t)(g->hb_capacity - had));
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        const pg_level *L = &g->level[k];
        if (more[k] > 0 && (!pg_reserve_level(g, txn, k, (int32_t)(more[k] + pg_tail_room(L->count + (int32_t)more[k]))) ||
                            !qg_pg_reserve_cells(g, txn, k, more[k])))
            return QG_ERR_NOMEM;
    }
    if (g->want && !qg_pg_grow(g, txn))
        return QG_ERR_NOMEM;
    // The new handles are in no level while the levels that take them are
    // made live (an empty level's first re-sort must not list them).
    for (int32_t i = 0; i < n; ++i)
        g->hb[handles[i]] = PG_HB_NONE;
    for (int32_t k = 0; k < PG_LEVELS; ++k)
        if (more[k] > 0)
            pg_make_live(g, k);
    for (int32_t i = 0; i < n; ++i) {
        const qg_handle h = handles[i];
        g->hb[h] = (uint8_t)((uint32_t)pg_level_of(g, index->boxes[h]) << 4);
    }
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        if (more[k] == 0)
            continue;
        g->level[k].count += (int32_t)more[k];
        qg_pg_rebuild(g, k);
    }
    return QG_OK;
}

static void point_grid_remove(qg_index *index, qg_handle h)
{
    pg_take_out((point_grid *)index, h, index->boxes[h]);
}

/// The moves the common case leaves, within one level: a point past its
/// home's margins, a long step, a tail element. The base's box is already
/// the new one.
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void pg_move_far(point_grid *g, int32_t k, qg_handle h, qg_rect old, qg_rect box)
{
    pg_level *L = &g->level[k];
    pg_point op, np;
    pg_point_pair(L, old, box, &op, &np);
    const uint32_t bits = g->hb[h];
    if (!(bits & PG_HB_TAIL)) {
        const int32_t hx = pg_home(op.x >> PG_QBITS, bits & 3), hy = pg_home(op.y >> PG_QBITS, bits >> 2 & 3);
        if (pg_in_margins(np, hx, hy))
            return;
        pg_unlist(L, bits, h, op);
    } else {
        // A tail element keeps its slot while its point stays in its cell
        // (its row's list, its column byte).
        const int32_t orow = op.y >> PG_QBITS;
        if (orow == np.y >> PG_QBITS && (op.x >> PG_QBITS) == (np.x >> PG_QBITS))
            return;
        pg_tail_unlink(L, h, orow);
    }
    pg_tail_add(g, k, h);
}

/// Writes a box into the base's slot as two 8-byte halves, the two
/// registers the calling convention passes a qg_rect in. One 16-byte store
/// made the compiler assemble the box through the stack, and reading it
/// back whole stalled on store forwarding (6 ms per million moves).
static inline void pg_store_box(qg_rect *slot, qg_rect box)
{
    float lo[2] = {box.min_x, box.min_y}, hi[2] = {box.max_x, box.max_y};
    memcpy(&slot->min_x, lo, sizeof lo);
    memcpy(&slot->max_x, hi, sizeof hi);
}

/// A move within level k, the common case: a listed element keeps its slot
/// while its new point stays in the margins of its home cell. Its old point
/// lies in those margins, so after a step of at most near_x and near_y (half
/// a cell, with room for rounding) the new point's cell is within one of
/// home, and home follows from that cell and the home bits: the common move
/// maps one point, not two. `old` is the box the base held, already
/// replaced by `box`.
static inline void pg_move_within(point_grid *g, pg_level *L, int32_t k, uint32_t bits, qg_handle h, qg_rect old,
                                  qg_rect box)
{
    L->fresh = false;
    if (!(bits & PG_HB_TAIL) && (fabsf(box.min_x - old.min_x) <= L->near_x) &
                                    (fabsf(box.min_y - old.min_y) <= L->near_y)) {
        const pg_point np = pg_box_point(L, box);
        const int32_t hx = pg_home(np.x >> PG_QBITS, bits & 3), hy = pg_home(np.y >> PG_QBITS, bits >> 2 & 3);
        if (pg_in_margins(np, hx, hy))
            return;
    }
    pg_move_far(g, k, h, old, box);
}

/// The move of h from level k to `box`, of level kn, past the common case,
/// its memory already held: within level k through pg_move_within, or to
/// another level (room for one more element there reserved). Never
/// allocates. Inline: the rare path of qg_move pays no call for it.
static inline void pg_move_rest(point_grid *g, qg_handle h, qg_rect box, int32_t k, int32_t kn)
{
    qg_rect *const slot = &g->base.boxes[h];
    const qg_rect old = *slot;
    if (kn == k) {
        pg_store_box(slot, box);
        pg_move_within(g, &g->level[k], k, g->hb[h], h, old, box);
        return;
    }
    g->level[k].fresh = false;
    pg_take_out(g, h, old);
    *slot = box;
    pg_make_live(g, kn);
    g->level[kn].count++;
    g->hb[h] = (uint8_t)((uint32_t)kn << 4 | PG_HB_TAIL);
    pg_tail_add(g, kn, h);
}

/// A move to another level, or one that first reserves the cells a re-fit
/// asked for. Grow first: every reservation before any change.
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static qg_status pg_move_other(point_grid *g, qg_txn *txn, qg_handle h, qg_rect box)
{
    const int32_t k = pg_level_bits(g->hb[h]), kn = pg_level_of(g, box);
    if ((kn != k && !pg_reserve_level(g, txn, kn, 1)) || (g->want && !qg_pg_grow(g, txn)))
        return QG_ERR_NOMEM;
    pg_move_rest(g, h, box, k, kn);
    return QG_OK;
}

static QG_NOINLINE qg_status point_grid_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)
{
    point_grid *g = (point_grid *)index;
    // Level 0 by name: its fields at fixed offsets, as with one level.
    if (!g->want && pg_fits(&g->level[0], box)) {
        qg_rect *const slot = &index->boxes[h];
        const qg_rect old = *slot;
        const uint32_t bits = g->hb[h];
        if ((bits & PG_HB_LEVEL) == 0) {
            pg_store_box(slot, box);
            pg_move_within(g, &g->level[0], 0, bits, h, old, box);
            return QG_OK;
        }
    }
    return pg_move_other(g, txn, h, box);
}

/* ---- qg_move_many ------------------------------------------------------- */

/// What one worker of qg_move_many's classification found, padded to a
/// cache line of its own (the workers write them at the same time; padding
/// rather than _Alignas, as the block comes from the allocator).
typedef struct pg_batch_count {
    int32_t in[PG_LEVELS]; ///< moves into each level from another
    int32_t rest;          ///< moves past the common case
    uint32_t touched;      ///< levels with a common move (bit k)
    uint8_t pad[64 - (PG_LEVELS + 2) * sizeof(int32_t)];
} pg_batch_count;

/// More workers than this run qg_move_many's classification as this many
/// parts (index.c caps worker_count at 256 too).
#define PG_MAX_WORKERS 256

typedef struct pg_batch_task {
    point_grid *g;
    const qg_handle *handles;
    const qg_rect *boxes;
    uint8_t *rest;        ///< per move: 1 = past the common case
    qg_move_checks *chk;  ///< the moves' checks, made in the classification; NULL: index.c made them
    pg_batch_count count[PG_MAX_WORKERS];
} pg_batch_task;

/// True when moving h from its box to `box` only stores the box: the same
/// level, and a listed element's new point within its home's margins, or a
/// tail element's within its cell (what pg_move_within and pg_move_far
/// return early on). Reads the index only.
static bool pg_move_is_store(const point_grid *g, qg_handle h, qg_rect box)
{
    const uint32_t bits = g->hb[h];
    const int32_t k = pg_level_bits(bits);
    const pg_level *L = &g->level[k];
    if (!pg_fits(L, box) || (k > 0 && pg_fits(&g->level[k - 1], box)))
        return false;
    const qg_rect old = g->base.boxes[h];
    if (!(bits & PG_HB_TAIL) && (fabsf(box.min_x - old.min_x) <= L->near_x) &
                                    (fabsf(box.min_y - old.min_y) <= L->near_y)) {
        const pg_point np = pg_box_point(L, box);
        const int32_t hx = pg_home(np.x >> PG_QBITS, bits & 3), hy = pg_home(np.y >> PG_QBITS, bits >> 2 & 3);
        if (pg_in_margins(np, hx, hy))
            return true;
    }
    pg_point op, np;
    pg_point_pair(L, old, box, &op, &np);
    if (bits & PG_HB_TAIL)
        return (op.y >> PG_QBITS) == (np.y >> PG_QBITS) && (op.x >> PG_QBITS) == (np.x >> PG_QBITS);
    const int32_t hx = pg_home(op.x >> PG_QBITS, bits & 3), hy = pg_home(op.y >> PG_QBITS, bits >> 2 & 3);
    return pg_in_margins(np, hx, hy);
}

/// Classifies moves [begin, end): reads the index, writes rest[i] and the
/// worker's counts.
static void pg_batch_classify(int32_t begin, int32_t end, int32_t worker, void *context)
{
    pg_batch_task *t = context;
    const point_grid *g = t->g;
    // Locals, written back once: the flag stores (bytes, which may alias
    // anything) would otherwise reload every field each move.
    const qg_handle *handles = t->handles;
    const qg_rect *boxes = t->boxes;
    const uint8_t *hb = g->hb;
    uint8_t *flags = t->rest;
    int32_t in[PG_LEVELS] = {0}, rest = 0;
    uint32_t touched = 0;
    // The checks (when this pass makes them): the map's word stores are
    // the only shared writes, and they touch the map alone.
    qg_move_checks *chk = t->chk;
    const int32_t slot = chk != NULL ? worker % chk->workers : 0; // worker < workers, for a job system that keeps to it
    uint64_t *map = chk != NULL ? qg_move_checks_map(chk, slot) : NULL;
    const qg_index *base = &g->base;
    qg_status fault = QG_OK;
    bool twice = false;
    int32_t i = begin;
    for (; i < end; ++i) {
        const qg_handle h = handles[i];
        const qg_rect box = boxes[i];
        if (map != NULL) {
            if ((fault = qg_move_fault(base, h, box)) != QG_OK)
                break; // the call fails; the rest of the range comes later in the batch
            twice |= qg_move_mark(map, h);
        }
        const int32_t k = pg_level_bits(hb[h]);
        const bool store = pg_move_is_store(g, h, box);
        flags[i] = !store;
        if (store) {
            touched |= 1u << k;
            continue;
        }
        rest++;
        const int32_t kn = pg_level_of(g, box);
        in[kn] += kn != k;
    }
    if (chk != NULL)
        qg_move_checks_note(chk, slot, i, fault, twice);
    pg_batch_count *c = &t->count[worker % PG_MAX_WORKERS];
    for (int32_t k = 0; k < PG_LEVELS; ++k)
        c->in[k] += in[k];
    c->rest += rest;
    c->touched |= touched;
}

/// Stores the boxes of the common moves among [begin, end): each writes its
/// own handle's box only.
static void pg_batch_store(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    pg_batch_task *t = context;
    qg_rect *boxes = t->g->base.boxes;
    for (int32_t i = begin; i < end; ++i) {
        if (!t->rest[i])
            pg_store_box(&boxes[t->handles[i]], t->boxes[i]);
    }
}

/// qg_move_many: the moves that only store a box (nearly all of a frame's)
/// on the workers, the rest in order on this thread. Grow first: the
/// classification reads the index only; every reservation the rest can
/// need (room in each level for the moves into it, the cells re-fits asked
/// for) is made before any change, so QG_ERR_NOMEM leaves the index as it
/// was. The rest then never allocates (a re-fit's new want waits for the
/// next insert or move, as with any qg_cleanup's).
///
/// With `chk`, the classification makes qg_move_many's checks too (it reads
/// each move's handle and old box anyway), and a bad batch is answered
/// before any reservation.
static qg_status pg_move_many(qg_index *index, const qg_jobs *jobs, const qg_handle *handles, const qg_rect *boxes,
                              int32_t n, qg_move_checks *chk)
{
    point_grid *g = (point_grid *)index;
    pg_batch_task *t = qg_mem_alloc(&index->alloc, sizeof *t + (size_t)n);
    if (t == NULL)
        return QG_ERR_NOMEM;
    if (chk != NULL) {
        const qg_status s = qg_move_checks_begin(chk, index, jobs == NULL ? 1 : jobs->worker_count, n);
        if (s != QG_OK) {
            qg_mem_free(&index->alloc, t, sizeof *t + (size_t)n);
            return s;
        }
    }
    memset(t->count, 0, sizeof t->count);
    t->g = g;
    t->handles = handles;
    t->boxes = boxes;
    t->rest = (uint8_t *)(t + 1);
    t->chk = chk;
    qg_jobs_run(jobs, pg_batch_classify, n, t);
    if (chk != NULL) {
        const qg_status s = qg_move_checks_end(chk, jobs);
        if (s != QG_OK) {
            qg_mem_free(&index->alloc, t, sizeof *t + (size_t)n);
            return s;
        }
    }
    int32_t in[PG_LEVELS] = {0}, rest = 0;
    uint32_t touched = 0;
    for (int32_t w = 0; w < PG_MAX_WORKERS; ++w) {
        for (int32_t k = 0; k < PG_LEVELS; ++k)
            in[k] += t->count[w].in[k];
        rest += t->count[w].rest;
        touched |= t->count[w].touched;
    }
    // One transaction per level (a level made live grows four arrays) and
    // one for the cells re-fits asked for.
    qg_txn txn[PG_LEVELS + 1];
    int32_t used = 0;
    bool ok = true;
    for (int32_t k = 0; k < PG_LEVELS && ok; ++k) {
        if (in[k] == 0)
            continue;
        qg_txn_begin(&txn[used], &index->alloc);
        ok = pg_reserve_level(g, &txn[used++], k, in[k]);
    }
    // As the first qg_move after a re-fit would: a frame of batch moves is
    // the only chance a steady population gives.
    if (ok && g->want) {
        qg_txn_begin(&txn[used], &index->alloc);
        ok = qg_pg_grow(g, &txn[used++]);
    }
    if (!ok) {
        while (used-- > 0)
            qg_txn_rollback(&txn[used]);
        qg_mem_free(&index->alloc, t, sizeof *t + (size_t)n);
        return QG_ERR_NOMEM;
    }
    qg_jobs_run(jobs, pg_batch_store, n, t);
    // Set here, once: the workers' stores read the levels' fields, so none
    // of them may write one.
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        if (touched >> k & 1u)
            g->level[k].fresh = false;
    }
    // The rest in batch order, eight flags a step: a frame's few thousand
    // among a million moves, so the scan itself must not cost a pass.
    for (int32_t i = 0; i < n && rest > 0;) {
        uint64_t word;
        if (i + 8 <= n && (memcpy(&word, &t->rest[i], sizeof word), word == 0)) {
            i += 8;
            continue;
        }
        if (t->rest[i]) {
            pg_move_rest(g, handles[i], boxes[i], pg_level_bits(g->hb[handles[i]]), pg_level_of(g, boxes[i]));
            rest--;
        }
        ++i;
    }
    qg_mem_free(&index->alloc, t, sizeof *t + (size_t)n);
    return QG_OK;
}

static qg_status point_grid_move_many(qg_index *index, const qg_jobs *jobs, const qg_handle *handles,
                                      const qg_rect *boxes, int32_t n)
{
    return pg_move_many(index, jobs, handles, boxes, n, NULL);
}

static qg_status point_grid_move_many_checked(qg_index *index, const qg_jobs *jobs, const qg_handle *handles,
                                              const qg_rect *boxes, int32_t n)
{
    qg_move_checks chk;
    return pg_move_many(index, jobs, handles, boxes, n, &chk);
}

/* ---- a batch with static elements, given back -------------------------- */

/// What point_grid_batch_mark noted: every level as it was, and hb's
/// capacity.
typedef struct pg_mark {
    int32_t hb_capacity;
    bool want;
    pg_level level[PG_LEVELS];
} pg_mark;

/// Before qg_move_many's one-by-one path (index.c, move_many_serial): notes
/// the levels (4.5 KB). A static element's move inserts it into the kind,
/// which takes a tail slot in its level (growing order and sq), may make a
/// level live, and reserves the cells a re-fit asked for; the undo takes it
/// out again, leaving a tombstone, and keeps that growth. While the mark
/// stands no re-sort re-fits a world (held in pg_refit): a world that moved
/// would make the undo's moves back reserve cells again, which may fail. So
/// the undo never allocates, and the worlds stay the ones noted.
static void *point_grid_batch_mark(qg_index *index, int32_t n)
{
    (void)n;
    point_grid *g = (point_grid *)index;
    pg_mark *m = qg_mem_alloc(&index->alloc, sizeof *m);
    if (m == NULL)
        return NULL;
    m->hb_capacity = g->hb_capacity;
    m->want = g->want;
    memcpy(m->level, g->level, sizeof m->level);
    g->hold = true;
    return m;
}

/// After the batch: ends the hold, and after an undo (`undone`) first gives
/// back what the batch grew. A level the batch made live is empty again and
/// goes back to its note, arrays freed. A level whose slots grew is
/// re-sorted (qg_pg_rebuild, which packs its elements, as many as before,
/// into its first slots: the tombstones and tail go) and its slots shrink
/// back. Cells a re-fit had asked for before the batch, which its first
/// move reserved, are given back and asked for again (the world never moved
/// into them: the batch held re-fits). Shrinks only: never allocates.
static void point_grid_batch_trim(qg_index *index, void *mark, bool undone)
{
    point_grid *g = (point_grid *)index;
    pg_mark *m = mark;
    qg_alloc *alloc = &index->alloc;
    for (int32_t k = 0; k < PG_LEVELS && undone; ++k) {
        pg_level *L = &g->level[k];
        const pg_level *was = &m->level[k];
        if (!L->live)
            continue;
        if (!was->live) {
            if (L->count != 0)
                continue; // (the undo empties it)
            qg_array_shrink(alloc, (void **)&L->start, &L->start_capacity, sizeof(int32_t), was->start_capacity);
            qg_array_shrink(alloc, (void **)&L->order, &L->order_capacity, sizeof(uint32_t), was->order_capacity);
            qg_array_shrink(alloc, (void **)&L->sq, &L->sq_capacity, sizeof(uint16_t), was->sq_capacity);
            qg_array_shrink(alloc, (void **)&L->tail_head, &L->tail_head_capacity, sizeof(uint16_t),
                            was->tail_head_capacity);
            pg_level back = *was;
            back.start = L->start, back.order = L->order, back.sq = L->sq, back.tail_head = L->tail_head;
            *L = back;
            continue;
        }
        if (L->order_capacity > was->order_capacity || L->sq_capacity > was->sq_capacity) {
            qg_pg_rebuild(g, k);
            const int32_t keep = L->count + PG_PAD;
            qg_array_shrink(alloc, (void **)&L->order, &L->order_capacity, sizeof(uint32_t),
                            was->order_capacity > keep ? was->order_capacity : keep);
            qg_array_shrink(alloc, (void **)&L->sq, &L->sq_capacity, sizeof(uint16_t),
                            was->sq_capacity > keep ? was->sq_capacity : keep);
        }
        const int32_t cells = L->cols * L->rows + 1;
        qg_array_shrink(alloc, (void **)&L->start, &L->start_capacity, sizeof(int32_t),
                        was->start_capacity > cells ? was->start_capacity : cells);
        qg_array_shrink(alloc, (void **)&L->tail_head, &L->tail_head_capacity, sizeof(uint16_t),
                        was->tail_head_capacity > L->rows ? was->tail_head_capacity : L->rows);
        L->want_cells = was->want_cells;
        L->want_rows = was->want_rows;
        L->refit = was->refit;
    }
    if (undone) {
        g->want = m->want;
        // The handles in the kind are the ones before the batch.
        qg_array_shrink(alloc, (void **)&g->hb, &g->hb_capacity, sizeof(uint8_t), m->hb_capacity);
    }
    g->hold = false;
    qg_mem_free(alloc, m, sizeof *m);
}

/// Gives back the spare capacity of a per-handle or per-slot array.
static void pg_trim(qg_alloc *alloc, void **data, int32_t *capacity, size_t elem, int32_t keep)
{
    if (keep < 16)
        keep = 16; // the smallest block qg_txn_reserve makes
    if (*capacity <= keep + keep / 64)
        return;
    *data = qg_mem_resize(alloc, *data, (size_t)*capacity * elem, (size_t)keep * elem);
    *capacity = keep;
}

/// The refresh of level L, its bands of rows on the workers of `jobs`.
typedef struct pg_refresh_task {
    pg_level *L;
    const qg_rect *boxes;
    int32_t parts;
} pg_refresh_task;

static void pg_refresh_part(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    const pg_refresh_task *t = context;
    for (int32_t p = begin; p < end; ++p)
        qg_pg_refresh_rows(t->L, t->boxes, qg_pg_band_edge(t->L, p, t->parts), qg_pg_band_edge(t->L, p + 1, t->parts));
}

/// qg_cleanup, its refreshes spread over `jobs` (NULL: this thread). The
/// re-sorts and trims stay serial: a re-sort's counting sort would need
/// per-worker counts, memory cleanup may not take, and the refresh is the
/// pass a steady population runs every frame.
static void pg_cleanup(qg_index *index, const qg_jobs *jobs)
{
    point_grid *g = (point_grid *)index;
    // Once no handle was issued since the last cleanup (a steady
    // population), the arrays shrink to what is in use. Waiting for a steady
    // call keeps a growing population from paying a shrink and a regrow
    // every frame.
    const int32_t high = index->box_high;
    const bool steady = high > 0 && high == g->steady_high;
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        pg_level *L = &g->level[k];
        if (!L->live)
            continue;
        // Rebuild once the tail and the tombstones are more than a sliver of
        // the level, or a re-fit waits; otherwise, after any move, refresh
        // the snapshot's points in place (searches read boxes until then).
        const int64_t stale = (int64_t)L->tail + L->tombstones;
        if (L->refit || (stale > 0 && stale * 64 >= L->count) || qg_pg_border_crowded(L))
            qg_pg_rebuild(g, k);
        else if (!L->fresh && jobs == NULL)
            qg_pg_refresh(L, index->boxes);
        else if (!L->fresh) {
            pg_refresh_task t = {L, index->boxes, jobs->worker_count};
            qg_jobs_run(jobs, pg_refresh_part, t.parts, &t);
            L->fresh = true;
            L->snug = false;
        }
        if (steady && L->tail == 0 && L->tombstones == 0) {
            pg_trim(&index->alloc, (void **)&L->order, &L->order_capacity, sizeof(uint32_t),
                    L->count + pg_tail_room(L->count) + PG_PAD);
            pg_trim(&index->alloc, (void **)&L->sq, &L->sq_capacity, sizeof(uint16_t), L->order_capacity);
        }
        // Cells a re-fit left unused (a world that shrank to its elements),
        // or the overshoot of the starts' growth while the level grew.
        const int32_t cells = L->cols * L->rows;
        if (steady && L->start_capacity > (cells + 1) + (cells + 1) / 8 + 1024 && L->want_cells == 0) {
            pg_trim(&index->alloc, (void **)&L->start, &L->start_capacity, sizeof(int32_t), cells + 1);
            pg_trim(&index->alloc, (void **)&L->tail_head, &L->tail_head_capacity, sizeof(uint16_t), L->rows);
        }
    }
    if (steady) {
        pg_trim(&index->alloc, (void **)&index->boxes, &index->box_capacity, sizeof(qg_rect), high);
        pg_trim(&index->alloc, (void **)&g->hb, &g->hb_capacity, sizeof(uint8_t), high);
    }
    g->steady_high = high;
}

static void point_grid_cleanup(qg_index *index)
{
    pg_cleanup(index, NULL);
}

static void point_grid_cleanup_parallel(qg_index *index, const qg_jobs *jobs)
{
    pg_cleanup(index, jobs);
}

static void point_grid_clear(qg_index *index)
{
    point_grid *g = (point_grid *)index;
    if (g->hb_capacity > 0)
        memset(g->hb, PG_HB_NONE, (size_t)g->hb_capacity);
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        pg_level *L = &g->level[k];
        L->count = 0;
        if (!L->live)
            continue;
        memset(L->start, 0, ((size_t)L->cols * L->rows + 1) * sizeof(int32_t));
        for (int32_t r = 0; r < L->rows; ++r)
            L->tail_head[r] = PG_TAIL_END;
        L->listed = L->tail = L->tombstones = 0;
        L->fresh = true;
    }
}

/// Candidates of a query whose boxes are being fetched: the exact tests run
/// once a batch is full or the level's cells are read, so the boxes' cache
/// misses (handles are spatially random) overlap instead of following one
/// another.
#define PG_QUERY_BATCH 32

typedef struct pg_query_batch {
    qg_handle h[PG_QUERY_BATCH];
    int32_t n;
} pg_query_batch;

/// Tests and reports the queued candidates; false when the callback asked
/// to stop.
static bool pg_query_flush(const qg_rect *boxes, qg_rect area, pg_query_batch *b, qg_query_fn *fn, void *user)
{
    for (int32_t i = 0; i < b->n; ++i)
        if (qg_overlaps(boxes[b->h[i]], area) && !fn(b->h[i], user))
            return false;
    b->n = 0;
    return true;
}

static inline bool pg_query_queue(const qg_rect *boxes, qg_rect area, pg_query_batch *b, qg_handle h,
                                  qg_query_fn *fn, void *user)
{
    PG_PREFETCH(&boxes[h]);
    b->h[b->n++] = h;
    return b->n < PG_QUERY_BATCH || pg_query_flush(boxes, area, b, fn, user);
}

/// qg_query on one level; false when the callback asked to stop.
static bool pg_query_level(const pg_level *L, const qg_rect *boxes, qg_rect area, qg_query_fn *fn, void *user,
                           qg_query_stats *stats)
{
    const pg_point lo = pg_point_of(L, pg_widen(L, area.min_x), pg_widen(L, area.min_y));
    const pg_point hi = pg_point_of(L, area.max_x, area.max_y);
    int32_t cx0, cy0, cx1, cy1;
    pg_cell_range(L, lo, hi, &cx0, &cy0, &cx1, &cy1);
    // A small query's rows: their starts, then their slots, fetched before
    // any is read.
    if (cy1 - cy0 < 4 && cx1 - cx0 < 8) {
        for (int32_t cy = cy0; cy <= cy1; ++cy) {
            PG_PREFETCH(&L->start[cy * L->cols + cx0]);
            PG_PREFETCH(&L->start[cy * L->cols + cx1 + 1]);
        }
        for (int32_t cy = cy0; cy <= cy1; ++cy) {
            const int32_t s0 = L->start[cy * L->cols + cx0], s1 = L->start[cy * L->cols + cx1 + 1];
            for (int32_t s = s0; s < s1; s += 16) {
                PG_PREFETCH(&L->order[s]);
                PG_PREFETCH(&L->sq[s]);
            }
        }
    }
    pg_query_batch b;
    b.n = 0;
    for (int32_t cy = cy0; cy <= cy1; ++cy) {
        for (int32_t cx = cx0; cx <= cx1; ++cx) {
            const int32_t c = cy * L->cols + cx;
            stats->nodes_visited++;
            for (int32_t s = L->start[c]; s < L->start[c + 1]; ++s) {
                const qg_handle h = pg_order(L, s);
                if (h < 0)
                    continue;
                const pg_point p = pg_slot_point(L, boxes, s, h, cx, cy);
                if ((p.x < lo.x) | (p.x > hi.x) | (p.y < lo.y) | (p.y > hi.y))
                    continue;
                stats->elements_tested++;
                if (!pg_query_queue(boxes, area, &b, h, fn, user))
                    return false;
            }
        }
    }
    if (!pg_query_flush(boxes, area, &b, fn, user))
        return false;
    if (L->tail == 0)
        return true;
    const int32_t tx0 = lo.x >> PG_QBITS, tx1 = hi.x >> PG_QBITS;
    for (int32_t row = lo.y >> PG_QBITS; row <= hi.y >> PG_QBITS; ++row) {
        for (uint32_t t = L->tail_head[row]; t != PG_TAIL_END;) {
            const int32_t s = L->listed + (int32_t)t;
            const qg_handle h = pg_order(L, s);
            t = L->sq[s];
            if (!pg_tail_in_cols(L, s, tx0, tx1))
                continue;
            stats->elements_tested++;
            if (qg_overlaps(boxes[h], area) && !fn(h, user))
                return false;
        }
    }
    return true;
}

static void point_grid_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                             qg_query_stats *stats)
{
    const point_grid *g = (const point_grid *)index;
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        const pg_level *L = &g->level[k];
        if (L->count > 0 && !pg_query_level(L, index->boxes, area, fn, user, stats))
            return;
    }
}


static void point_grid_stats(const qg_index *index, qg_stats *stats)
{
    const point_grid *g = (const point_grid *)index;
    stats->nodes = 0;
    stats->max_depth_reached = 0;
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        const pg_level *L = &g->level[k];
        if (!L->live)
            continue;
        stats->nodes += L->cols * L->rows;
        if (L->count > 0)
            stats->max_depth_reached = k;
    }
    stats->leaves = stats->nodes;
}

/// qg_visit on one level: its cells at depth k.
static void pg_visit_level(const pg_level *L, const qg_rect *boxes, int32_t k, qg_visit_fn *fn, void *user)
{
    // Cell edges from the mapping's inverse (the world's origin and scale).
    const double wx = (double)PG_Q / L->sx, wy = (double)PG_Q / L->sy;
    // Tail elements count in the cell of their point, gathered a chunk of
    // columns at a time (one walk of the row's list per chunk).
    enum { CHUNK = 256 };
    int32_t extra[CHUNK];
    for (int32_t cy = 0; cy < L->rows; ++cy) {
        for (int32_t x0 = 0; x0 < L->cols; x0 += CHUNK) {
            const int32_t x1 = x0 + CHUNK < L->cols ? x0 + CHUNK : L->cols;
            memset(extra, 0, sizeof extra);
            for (uint32_t t = L->tail_head[cy]; t != PG_TAIL_END;) {
                const int32_t s = L->listed + (int32_t)t;
                const int32_t cx = pg_box_point(L, boxes[pg_order(L, s)]).x >> PG_QBITS;
                if (cx >= x0 && cx < x1)
                    extra[cx - x0]++;
                t = L->sq[s];
            }
            for (int32_t cx = x0; cx < x1; ++cx) {
                const int32_t c = cy * L->cols + cx;
                int32_t count = extra[cx - x0];
                for (int32_t s = L->start[c]; s < L->start[c + 1]; ++s)
                    count += pg_order(L, s) >= 0;
                const qg_rect r = {(float)(L->ox + cx * wx), (float)(L->oy + cy * wy), (float)(L->ox + (cx + 1) * wx),
                                   (float)(L->oy + (cy + 1) * wy)};
                fn(r, k, count, user);
            }
        }
    }
}

static void point_grid_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    const point_grid *g = (const point_grid *)index;
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        const pg_level *L = &g->level[k];
        if (L->live && (k == 0 || L->count > 0))
            pg_visit_level(L, index->boxes, k, fn, user);
    }
}

/// True when the element at slot s of cell (cx, cy) of level k is live,
/// listed there (its level, its point in the cell's margins, its home bits
/// naming the cell, its offsets exact while fresh, its point in the cell
/// proper while snug). That it is listed once
/// is the caller's check (qg_handle_term sums).
static bool pg_listed_valid(const point_grid *g, int32_t k, qg_handle h, int32_t s, int32_t cx, int32_t cy)
{
    const qg_index *index = &g->base;
    const pg_level *L = &g->level[k];
    if (!qg_slot_live(index, h) || pg_level_of(g, index->boxes[h]) != k)
        return false;
    const uint32_t bits = g->hb[h];
    if (bits != ((uint32_t)k << 4 | (uint32_t)((cx & 3) | (cy & 3) << 2)))
        return false;
    const pg_point p = pg_box_point(L, index->boxes[h]);
    if (!pg_in_margins(p, cx, cy))
        return false;
    if (L->fresh && L->snug && (p.x >> PG_QBITS != cx || p.y >> PG_QBITS != cy))
        return false;
    if (L->fresh && (L->sq[s] != pg_offsets(p, cx, cy) ||
                     L->order[s] >> 24 != pg_size(L, p, pg_point_of(L, index->boxes[h].max_x, index->boxes[h].max_y))))
        return false;
    return true;
}

/// Checks one level; adds its elements to *elements and its bytes to *bytes.
static qg_status pg_validate_level(const point_grid *g, int32_t k, uint64_t want_sum, int64_t *elements,
                                   size_t *bytes)
{
    const qg_index *index = &g->base;
    const pg_level *L = &g->level[k];
    *bytes += (size_t)L->start_capacity * sizeof(int32_t) + (size_t)L->order_capacity * sizeof(uint32_t) +
              (size_t)L->sq_capacity * sizeof(uint16_t) + (size_t)L->tail_head_capacity * sizeof(uint16_t);
    if (!L->live)
        return L->count == 0 && L->start_capacity == 0 ? QG_OK : QG_ERR_INVALID;
    const int64_t cells = (int64_t)L->cols * L->rows;
    if (cells < 1 || cells + 1 > L->start_capacity || L->rows > L->tail_head_capacity ||
        (L->reach_x > PG_MAX_REACH && L->cols > 1) || (L->reach_y > PG_MAX_REACH && L->rows > 1))
        return QG_ERR_INVALID;
    if (L->listed < 0 || L->tail < 0 || L->tail > (int32_t)PG_TAIL_END || L->sq_capacity < L->order_capacity ||
        (int64_t)L->listed + L->tail > L->order_capacity - PG_PAD || L->order_capacity < L->count + PG_PAD)
        return QG_ERR_INVALID;
    if (L->start[0] != 0 || L->start[cells] != L->listed)
        return QG_ERR_INVALID;
    // The snapshot: every slot of every cell a tombstone or an element
    // listed there, once.
    int64_t listed = 0, tombs = 0;
    uint64_t sum = 0;
    for (int32_t cy = 0; cy < L->rows; ++cy) {
        for (int32_t cx = 0; cx < L->cols; ++cx) {
            const int32_t c = cy * L->cols + cx;
            if (L->start[c] > L->start[c + 1])
                return QG_ERR_INVALID;
            for (int32_t s = L->start[c]; s < L->start[c + 1]; ++s) {
                const qg_handle h = pg_order(L, s);
                if (h == -1) {
                    tombs++;
                    continue;
                }
                if (!pg_listed_valid(g, k, h, s, cx, cy))
                    return QG_ERR_INVALID;
                sum += qg_handle_term(h);
                listed++;
            }
        }
    }
    // The tail: each used slot a tombstone or in the list of its point's row.
    int64_t tail = 0;
    for (int32_t t = 0; t < L->tail; ++t) {
        const qg_handle h = pg_order(L, L->listed + t);
        if (h == -1) {
            tombs++;
            continue;
        }
        if (!qg_slot_live(index, h) || g->hb[h] != ((uint32_t)k << 4 | PG_HB_TAIL) ||
            pg_level_of(g, index->boxes[h]) != k)
            return QG_ERR_INVALID;
        tail++;
        sum += qg_handle_term(h);
        const pg_point p = pg_box_point(L, index->boxes[h]);
        if (L->order[L->listed + t] >> 24 != pg_tail_col(p))
            return QG_ERR_INVALID;
    }
    // The lists hold exactly the live tail slots, each in its point's row's
    // list: every linked slot is live and in the row it is linked in, the
    // walk stops past as many links as there are live slots (a cycle, or
    // two lists joined, would pass that), and the links count the live
    // slots. One walk, so a crowded row costs no more than a sparse one.
    int64_t linked = 0;
    for (int32_t r = 0; r < L->rows; ++r) {
        for (uint32_t u = L->tail_head[r]; u != PG_TAIL_END; ++linked) {
            if ((int32_t)u >= L->tail || linked >= tail)
                return QG_ERR_INVALID;
            const qg_handle h = pg_order(L, L->listed + (int32_t)u);
            if (h < 0 || (pg_box_point(L, index->boxes[h]).y >> PG_QBITS) != r)
                return QG_ERR_INVALID;
            u = L->sq[L->listed + (int32_t)u];
        }
    }
    // Listed once: the entries' terms sum to the level's live handles'
    // (every entry is a live handle of this level, checked above, and as
    // many entries as handles; a handle twice and another missing would
    // need two 64-bit mixes to cancel).
    if (listed + tail != L->count || linked != tail || tombs != L->tombstones || sum != want_sum)
        return QG_ERR_INVALID;
    *elements += L->count;
    return QG_OK;
}

static qg_status point_grid_validate(const qg_index *index, size_t *bytes)
{
    const point_grid *g = (const point_grid *)index;
    if (index->box_high > 0 && g->hb_capacity < index->box_high)
        return QG_ERR_INVALID;
    // A free handle belongs to no level (a rebuild finds levels by hb);
    // each level's live handles' terms, for its listed-once check.
    uint64_t want[PG_LEVELS] = {0};
    for (int32_t h = 0; h < index->box_high; ++h) {
        const uint32_t level = g->hb[h] & PG_HB_LEVEL;
        if (!qg_slot_live(index, h)) {
            if (level != PG_HB_NONE)
                return QG_ERR_INVALID;
            continue;
        }
        if (level == PG_HB_NONE)
            return QG_ERR_INVALID;
        want[pg_level_bits(level)] += qg_handle_term(h);
    }
    int64_t elements = 0;
    for (int32_t k = 0; k < PG_LEVELS; ++k) {
        const qg_status s = pg_validate_level(g, k, want[k], &elements, bytes);
        if (s != QG_OK)
            return s;
    }
    if (elements != index->count)
        return QG_ERR_INVALID;
    *bytes += (size_t)g->hb_capacity * sizeof(uint8_t);
    return QG_OK;
}

/// qg_pairs: the search lives in point_grid_pairs.c.
static void point_grid_pairs(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    qg_pg_pairs(index, fn, user, stats);
}

/// qg_pairs_parallel's parts: point_grid_pairs.c.
static void point_grid_pairs_part(const qg_index *index, int32_t part, int32_t parts, qg_pair_fn *fn, void *user,
                                  qg_query_stats *stats)
{
    qg_pg_pairs_part(index, part, parts, fn, user, stats);
}

/// The learned bound over the measured 97th percentile: a sample's
/// percentile drifts by a few percent from frame to frame.
#define PG_TUNE_HEADROOM 1.0625f

static qg_in_force point_grid_tune_hint(const qg_config *c, const qg_config *user)
{
    const bool said = user->max_element_size > 0.0f || user->element_size > 0.0f || user->cell_size > 0.0f;
    return (qg_in_force){0.0f, said ? c->max_element_size : 0.0f};
}

/// Boxes past level 0's bound go to level 1, whose cells are 4x as wide: a
/// bound even a little under the typical box is a cliff (measured: `grow`
/// ends 1.76x past a bound learned on its way, 4.7x slower than a fresh
/// tuning), so past it by 1% re-tunes; a bound 2x too large costs what it
/// costs the other grids.
static bool point_grid_tune_differs(const qg_config *c, qg_in_force now, const qg_learned *learned)
{
    (void)c;
    return !(now.bound > 0.0f) || learned->bound > 1.01f * now.bound || learned->bound < now.bound / QG_TUNE_RATIO;
}

static void point_grid_tune_config(qg_config *c, const qg_learned *learned)
{
    c->max_element_size = learned->bound * PG_TUNE_HEADROOM;
}

static void point_grid_tune_stats(const qg_config *c, qg_stats *s)
{
    s->size_bound = c->max_element_size;
    s->cell_size = c->cell_size;
}

static const qg_tune_rule point_grid_tune = {
    .hint = point_grid_tune_hint,
    .differs = point_grid_tune_differs,
    .config = point_grid_tune_config,
    .stats = point_grid_tune_stats,
};

/* ---- the state walk (state.h) -------------------------------------------- */

/// Fields qg_pg_world_derive makes from the walked ones: carried by a copy as
/// they are (the table fills cost more than the copy of a small index),
/// remade by a read, never written to a snapshot.
static void pg_st_derived(qg_state *s, void *d, const void *src, size_t n)
{
    if (qg_st_ok(s) && s->mode == QG_ST_COPY && d != src)
        memcpy(d, src, n);
}

#define PG_ST_DERIVED(s, d, src, field) pg_st_derived((s), &(d)->field, &(src)->field, sizeof((d)->field))

/// Level k's part of the walk: its counts and flags, its world (what the
/// rest of it follows from), then its arrays, each carried as far as any
/// later call reads it.
static void pg_level_state(qg_state *s, pg_level *d, const pg_level *src)
{
    QG_ST(s, d, src, count);
    QG_ST(s, d, src, listed);
    QG_ST(s, d, src, tail);
    QG_ST(s, d, src, tombstones);
    QG_ST_BOOL(s, d, src, live);
    QG_ST_BOOL(s, d, src, fresh);
    QG_ST_BOOL(s, d, src, snug);
    QG_ST_BOOL(s, d, src, refit);
    QG_ST(s, d, src, want_cells);
    QG_ST(s, d, src, want_rows);
    QG_ST(s, d, src, calm);
    QG_ST(s, d, src, fit_count);
    QG_ST_BOOL(s, d, src, on_config);
    QG_ST(s, d, src, config_cells);
    QG_ST(s, d, src, cols);
    QG_ST(s, d, src, rows);
    QG_ST(s, d, src, ox);
    QG_ST(s, d, src, oy);
    QG_ST(s, d, src, sx);
    QG_ST(s, d, src, sy);
    QG_ST(s, d, src, cell);
    QG_ST(s, d, src, bound);
    QG_ST(s, d, src, pad);
    if (qg_st_reading(s) && qg_st_ok(s)) {
        // What a world made by pg_set_world always holds, and what the
        // mapping, the cell indexing and the growths trust: cells within
        // the sides' and the total's limits, scales pg_scale can give, no
        // want past what a re-fit may ask. The rest is qg_validate's.
        const bool ok = d->cols >= 1 && d->cols <= PG_MAX_SIDE && d->rows >= 1 && d->rows <= PG_MAX_SIDE &&
                        (int64_t)d->cols * d->rows <= PG_MAX_CELLS && d->sx >= 0x1p-120f && d->sx <= 0x1p120f &&
                        d->sy >= 0x1p-120f && d->sy <= 0x1p120f && d->config_cells >= 1 &&
                        d->config_cells <= PG_MAX_CELLS && d->want_cells >= 0 && d->want_cells <= PG_MAX_CELLS &&
                        d->want_rows >= 0 && d->want_rows <= PG_MAX_SIDE && d->count >= 0 &&
                        (d->live || (d->count == 0 && d->listed == 0 && d->tail == 0 && d->tombstones == 0));
        if (!ok) {
            qg_st_fail(s, QG_ERR_INVALID);
            return;
        }
        qg_pg_world_derive(d);
    }
    PG_ST_DERIVED(s, d, src, gmax_x);
    PG_ST_DERIVED(s, d, src, gmax_y);
    PG_ST_DERIVED(s, d, src, gmaxf_x);
    PG_ST_DERIVED(s, d, src, gmaxf_y);
    PG_ST_DERIVED(s, d, src, hx);
    PG_ST_DERIVED(s, d, src, hy);
    PG_ST_DERIVED(s, d, src, s2x);
    PG_ST_DERIVED(s, d, src, s2y);
    PG_ST_DERIVED(s, d, src, near_x);
    PG_ST_DERIVED(s, d, src, near_y);
    PG_ST_DERIVED(s, d, src, reach_x);
    PG_ST_DERIVED(s, d, src, reach_y);
    PG_ST_DERIVED(s, d, src, unit_x);
    PG_ST_DERIVED(s, d, src, unit_y);
    PG_ST_DERIVED(s, d, src, size_x);
    PG_ST_DERIVED(s, d, src, size_y);
    // The starts and row heads of a live level's world; the slots in use
    // (the snapshot and the tail: the kernels' loads past them are masked
    // off, and a slot past them is written before it is read).
    const int64_t cells = src->live ? (int64_t)src->cols * src->rows + 1 : 0;
    const int64_t rows = src->live ? src->rows : 0;
    const int64_t slots = (int64_t)src->listed + src->tail;
    qg_st_array(s, (void **)&d->start, &d->start_capacity, src->start, src->start_capacity, cells, sizeof(int32_t));
    qg_st_array(s, (void **)&d->order, &d->order_capacity, src->order, src->order_capacity, slots, sizeof(uint32_t));
    qg_st_array(s, (void **)&d->sq, &d->sq_capacity, src->sq, src->sq_capacity, slots, sizeof(uint16_t));
    qg_st_array(s, (void **)&d->tail_head, &d->tail_head_capacity, src->tail_head, src->tail_head_capacity, rows,
                sizeof(uint16_t));
    // The capacities the fields index by: qg_validate checks them on a live
    // level, and a level made live later reserves from them.
    if (qg_st_reading(s) && qg_st_ok(s) &&
        (d->listed < 0 || d->tail < 0 || (int64_t)d->listed + d->tail > d->order_capacity ||
         d->sq_capacity < d->order_capacity || (d->live && (cells > d->start_capacity || rows > d->tail_head_capacity))))
        qg_st_fail(s, QG_ERR_INVALID);
}

/// The kind's state: the per-handle bytes, the flags, the levels. `wide` is
/// the machine's (set as init sets it); `hold` lives inside one qg_move_many
/// call (false between calls).
static void point_grid_state(qg_state *s, qg_index *d, const qg_index *src)
{
    point_grid *dg = (point_grid *)d;
    const point_grid *sg = (const point_grid *)src;
    QG_ST_BOOL(s, dg, sg, want);
    QG_ST(s, dg, sg, steady_high);
    // Bytes past box_high are written before they are read (an insert marks
    // its handle PG_HB_NONE first); a read gives them the mark clear leaves.
    const int64_t high = src->box_high < sg->hb_capacity ? src->box_high : sg->hb_capacity;
    qg_st_array(s, (void **)&dg->hb, &dg->hb_capacity, sg->hb, sg->hb_capacity, high, sizeof(uint8_t));
    if (qg_st_reading(s) && qg_st_ok(s)) {
        if (d->box_high > 0 && dg->hb_capacity < d->box_high) {
            qg_st_fail(s, QG_ERR_INVALID);
            return;
        }
        if (dg->hb_capacity > d->box_high)
            memset(dg->hb + d->box_high, PG_HB_NONE, (size_t)(dg->hb_capacity - d->box_high));
#if defined(PG_HAVE_AVX2)
        dg->wide = qg_cpu_avx2();
#endif
    }
    if (s->mode == QG_ST_READ || s->mode == QG_ST_COPY)
        dg->hold = false;
    for (int32_t k = 0; k < PG_LEVELS; ++k)
        pg_level_state(s, &dg->level[k], &sg->level[k]);
}

QG_KIND_CLASS_EX(point_grid, QG_POINT_GRID, point_grid, .state = point_grid_state, .tune = &point_grid_tune,
                 .pairs_part = point_grid_pairs_part,
                 .move_many = point_grid_move_many, .move_many_checked = point_grid_move_many_checked,
                 .cleanup_parallel = point_grid_cleanup_parallel,
                 .raycast = qg_pg_raycast, .nearest = qg_pg_nearest, .insert_many = point_grid_insert_many,
                 .batch_mark = point_grid_batch_mark, .batch_trim = point_grid_batch_trim);

