// SPDX-License-Identifier: MIT
// The base of every index and the table of functions each kind serves.
//
// Data flows one way: public call (index.c) -> argument checks, done once ->
// the kind's function -> shared helpers. A kind never re-checks NaN, handles
// or min > max: by the time it is called, its inputs are valid.
#ifndef QG_KIND_H
#define QG_KIND_H

#include "alloc.h"
#include "geom.h"
#include "tune_rule.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct qg_kind_class qg_kind_class;
struct qg_state;

/// The base every kind's struct starts with.
///
/// The base owns the element slots: the box of every element, live or free,
/// and the free list of handles. A free slot has NaN in min_x (a stored box is
/// never NaN) and the next free handle in the bits of min_y. Kinds keep their
/// own per-element data in parallel arrays indexed by handle.
struct qg_index {
    const qg_kind_class *klass;
    qg_alloc alloc;
    qg_config config; ///< resolved: every "0 = choose" filled in
    qg_rect *boxes;
    int32_t box_capacity;
    int32_t box_high;  ///< handles ever issued: [0, box_high)
    int32_t free_head; ///< first free handle, -1 if none
    int32_t count;     ///< live elements in the kind's structure (static ones in the static layer are not)
    /// Static elements, filters and events (engine.c); NULL until the first
    /// call that needs them, so an index that never uses them pays nothing.
    struct qg_engine *engine;
    /// Learning and re-tuning (tune.h); NULL for brute_force and fixed_sizes.
    struct qg_tune *tune;
};

/// The functions a kind serves (Chipmunk's cpSpatialIndexClass). Every
/// function takes the base type and casts inside. Mutating functions follow
/// "grow first, then mutate": they reserve through `txn` and return
/// QG_ERR_NOMEM before changing anything; index.c rolls the txn back.
struct qg_kind_class {
    qg_kind kind;
    size_t size; ///< sizeof the kind's struct, base first
    /// How the kind learns its sizes (tune.c applies it); NULL: it never
    /// learns (brute_force).
    const qg_tune_rule *tune;
    /// Resolves the kind's "0 = choose" fields and rejects bad ones.
    qg_status (*configure)(qg_config *config);
    /// Allocates the kind's arrays (the struct is zeroed, the base filled).
    /// On failure it frees what it allocated.
    qg_status (*init)(qg_index *index);
    /// Frees the kind's arrays (not the struct, not the base's).
    void (*destroy)(qg_index *index);
    /// Adds handle h (slot already taken, boxes[h] already set) to the
    /// structure. May fail only with QG_ERR_NOMEM or QG_ERR_CAPACITY, then
    /// before any change.
    qg_status (*insert)(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box);
    /// Takes live handle h out of the structure (boxes[h] still holds its box).
    void (*remove)(qg_index *index, qg_handle h);
    /// Gives live handle h the box `box`; the kind writes boxes[h] itself.
    qg_status (*move)(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box);
    /// qg_move of a handle the kind holds (made by QG_KIND_CLASS around
    /// move: the box's check, the transaction, the engine's hook). qg_move
    /// jumps here without a frame of its own, so the kind's path has one
    /// call and the engine's (a level's agents) none set up for the kind.
    qg_status (*move_one)(qg_index *index, qg_handle h, qg_rect box);
    void (*cleanup)(qg_index *index);
    /// Empties the structure, keeping its memory (the base resets the slots).
    void (*clear)(qg_index *index);
    /// `area` is not NaN and min <= max; it may be infinite. `stats` is never
    /// NULL and starts zeroed: add the nodes/cells visited and boxes tested.
    void (*query)(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user, qg_query_stats *stats);
    void (*pairs)(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats);
    /// Fills nodes, leaves, max_depth_reached.
    void (*stats)(const qg_index *index, qg_stats *stats);
    void (*visit)(const qg_index *index, qg_visit_fn *fn, void *user);
    /// Checks the kind's invariants and adds the bytes its arrays hold to
    /// *bytes.
    qg_status (*validate)(const qg_index *index, size_t *bytes);
    /// The kind's part of the state walk (state.h): every field and array
    /// that decides a later answer or its order, from src to d.
    void (*state)(struct qg_state *s, qg_index *d, const qg_index *src);

    /* Optional: NULL = the generic form in index.c (serial). */

    /// Part `part` of `parts` of the pair search: the kind splits its work
    /// into `parts` disjoint shares, the same way for the same state, whose
    /// union is pairs(). Parts run at the same time on different threads.
    void (*pairs_part)(const qg_index *index, int32_t part, int32_t parts, qg_pair_fn *fn, void *user,
                       qg_query_stats *stats);
    /// Moves handles[i] to boxes[i], i < n: live handles, valid boxes, no
    /// handle twice (index.c checked). All or nothing: QG_ERR_NOMEM only
    /// before any change.
    qg_status (*move_many)(qg_index *index, const qg_jobs *jobs, const qg_handle *handles,
                           const qg_rect *boxes, int32_t n);
    /// move_many, unchecked: the kind checks the moves in its first pass
    /// (qg_move_checks) and answers as index.c's checks would, before any
    /// change. Optional; called without the engine's layer and with at most
    /// QG_CHECK_PARTS workers.
    qg_status (*move_many_checked)(qg_index *index, const qg_jobs *jobs, const qg_handle *handles,
                                   const qg_rect *boxes, int32_t n);
    /// cleanup() with its work spread over `jobs` (never NULL here).
    void (*cleanup_parallel)(qg_index *index, const qg_jobs *jobs);
    /// qg_raycast with valid arguments and at least one element.
    void (*raycast)(const qg_index *index, float ox, float oy, float dx, float dy, float max_t, qg_ray_fn *fn,
                    void *user);
    /// qg_nearest with valid arguments, k >= 1 and at least one element.
    int32_t (*nearest)(const qg_index *index, float x, float y, int32_t k, float max_distance2,
                       qg_handle *handles, float *distances2);
    /// Adds handles[0..n) (slots taken, boxes set, all valid) in one go. All
    /// or nothing: may fail only with QG_ERR_NOMEM or QG_ERR_CAPACITY, then
    /// before any change.
    qg_status (*insert_many)(qg_index *index, qg_txn *txn, const qg_handle *handles, int32_t n);
    /// For qg_move_many's one-by-one path (a batch of n moves with static
    /// elements, index.c): its undo returns every element, but a kind whose
    /// moves grow memory that their own undo record holds for one move only
    /// keeps that growth. batch_mark notes the kind's capacities before the
    /// batch (NULL: no memory, nothing changed) and may hold back, until
    /// batch_trim, the upkeep that would change the kind's shape and so make
    /// an undo's move back allocate (a re-fit of the world, a split);
    /// batch_trim frees the note, after an undo (`undone`) first giving back
    /// what grew since (never allocates), after a batch that succeeded
    /// running the upkeep it held. Optional: the other kinds' undo leaves
    /// nothing behind.
    void *(*batch_mark)(qg_index *index, int32_t n);
    /// Optional: called once before the undo's first move back.
    void (*batch_undo)(qg_index *index, void *mark);
    void (*batch_trim)(qg_index *index, void *mark, bool undone);
};

/// Defines the table of a kind whose struct is `type` and whose functions
/// are all named `prefix_<member>` (quadtree_insert, ...): each kind's file
/// ends with one line instead of the same fifteen-line table written out
/// again. The table is `qg_<prefix>_class`.
#define QG_KIND_CLASS(prefix, KIND, type) QG_KIND_CLASS_EX(prefix, KIND, type, .pairs_part = NULL)

/// The body of every kind's move_one: the box's check, the transaction, the
/// kind's move (a constant in each, so called directly). It knows nothing of
/// the engine: an index whose engine is in use points its klass at the
/// engine's copy of the table, whose move_one adds the engine's hook.
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline qg_status qg_kind_move_one(qg_index *index, qg_handle h, qg_rect box,
                                         qg_status (*move)(qg_index *, qg_txn *, qg_handle, qg_rect))
{
    if (!qg_box_valid(box))
        return QG_ERR_INVALID;
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    const qg_status s = move(index, &txn, h, box);
    if (s != QG_OK)
        qg_txn_rollback(&txn);
    return s;
}

/// QG_KIND_CLASS plus the optional members the kind serves, as designated
/// initializers: QG_KIND_CLASS_EX(grid, QG_GRID, grid, .pairs_part = grid_pairs_part).
/// It also makes the kind's move_one around its move (qg_kind_move_one).
/// The kind defines its move `static QG_NOINLINE`: inlined there, the
/// quadtree's and the point grid's moves ran 40% and 65% slower (`agents`
/// update at 100,000; the moves are tuned to keep their registers). The
/// attribute sits on the definition, as clang ignores one declared after it
/// (tests/noinline_test.sh checks every kind's move is out of line).
#define QG_KIND_CLASS_EX(prefix, KIND, type, ...)                                                    \
    static qg_status prefix##_move_one(qg_index *index, qg_handle h, qg_rect box)                   \
    {                                                                                                \
        return qg_kind_move_one(index, h, box, prefix##_move);                                       \
    }                                                                                                \
    const qg_kind_class qg_##prefix##_class = {                                                     \
        .kind = (KIND),                                                                              \
        .size = sizeof(type),                                                                        \
        .configure = prefix##_configure,                                                             \
        .init = prefix##_init,                                                                       \
        .destroy = prefix##_destroy,                                                                 \
        .insert = prefix##_insert,                                                                   \
        .remove = prefix##_remove,                                                                   \
        .move = prefix##_move,                                                                       \
        .move_one = prefix##_move_one,                                                               \
        .cleanup = prefix##_cleanup,                                                                 \
        .clear = prefix##_clear,                                                                     \
        .query = prefix##_query,                                                                     \
        .pairs = prefix##_pairs,                                                                     \
        .stats = prefix##_stats,                                                                     \
        .visit = prefix##_visit,                                                                     \
        .validate = prefix##_validate,                                                               \
        __VA_ARGS__                                                                                  \
    }

/// Runs task over [0, count) on `jobs`, or on this thread as one range when
/// jobs is NULL or has one worker. Kinds call this for their parallel
/// phases.
static inline void qg_jobs_run(const qg_jobs *jobs, qg_task_fn *task, int32_t count, void *context)
{
    if (count <= 0)
        return;
    if (jobs == NULL || jobs->worker_count <= 1 || count == 1)
        task(0, count, 0, context);
    else
        jobs->run(task, count, context, jobs->user);
}

/// The share [*begin, *end) of [0, n) that part `part` of `parts` takes:
/// even splits, the same for the same arguments.
static inline void qg_part_range(int64_t n, int32_t part, int32_t parts, int64_t *begin, int64_t *end)
{
    *begin = n * part / parts;
    *end = n * (part + 1) / parts;
}

/// One table per kind (QG_KIND_LIST), each the only symbol its file
/// exports; index.c indexes them by qg_kind.
#define QG_KIND_EXTERN_(NAME, name, summary) extern const qg_kind_class qg_##name##_class;
QG_KIND_LIST(QG_KIND_EXTERN_)
#undef QG_KIND_EXTERN_

/// True when slot h holds a live element.
static inline bool qg_slot_live(const qg_index *index, qg_handle h)
{
    return h >= 0 && h < index->box_high && !isnan(index->boxes[h].min_x);
}

/// qg_move_many's checks split over at most this many workers, each with a
/// map of the handles (more would make the maps cost more than they save).
#define QG_CHECK_PARTS 16

/// qg_move_many's checks made during a kind's own first pass over the moves,
/// which must only read the index (qg_kind_class.move_many_checked): one
/// pass over a million moves fewer than checking first. Each worker notes
/// the first bad move it saw and marks the handles it saw in a map of its
/// own; qg_move_checks_end merges them. Same answers as the checks of
/// qg_move_many: the first bad move in batch order decides, then a handle
/// listed twice.
typedef struct qg_move_checks {
    qg_index *index;
    int32_t n, workers;
    size_t words;   ///< words of one map
    uint64_t *seen; ///< the workers' maps
    struct {
        int32_t bad;      ///< first bad move the worker saw, or n
        qg_status status; ///< what was wrong with it
        bool twice;       ///< a handle the worker saw twice
        uint8_t pad[64 - 2 * sizeof(int32_t) - sizeof(bool)];
    } w[QG_CHECK_PARTS]; ///< a cache line each: the workers write them at once
} qg_move_checks;

/// Takes the maps of `workers` (1 to QG_CHECK_PARTS) workers or parts
/// (QG_ERR_NOMEM, nothing taken).
qg_status qg_move_checks_begin(qg_move_checks *c, qg_index *index, int32_t workers, int32_t n);

/// What is wrong with moving h to box: QG_ERR_HANDLE, QG_ERR_INVALID, or
/// QG_OK, without the engine's layer (live means in the kind). Reads only:
/// a pass can keep its state in registers around it.
static inline qg_status qg_move_fault(const qg_index *index, qg_handle h, qg_rect box)
{
    if (!qg_slot_live(index, h))
        return QG_ERR_HANDLE;
    return qg_box_valid(box) ? QG_OK : QG_ERR_INVALID;
}

/// Marks h in a worker's map (qg_move_checks_map); true when it was marked.
static inline bool qg_move_mark(uint64_t *map, qg_handle h)
{
    uint64_t *word = &map[(uint32_t)h >> 6];
    const uint64_t bit = 1ull << ((uint32_t)h & 63);
    const bool seen = (*word & bit) != 0;
    *word |= bit;
    return seen;
}

/// The map of `worker` (< c->workers: two ranges that run at once must pass
/// different ones).
static inline uint64_t *qg_move_checks_map(qg_move_checks *c, int32_t worker)
{
    return c->seen + (size_t)worker * c->words;
}

/// Notes what a worker's range found: its first bad move (`status` not
/// QG_OK) and whether it saw a handle twice. Once per range, so the pass
/// writes nothing shared move by move.
static inline void qg_move_checks_note(qg_move_checks *c, int32_t worker, int32_t i, qg_status status, bool twice)
{
    if (status != QG_OK && i < c->w[worker].bad) {
        c->w[worker].bad = i;
        c->w[worker].status = status;
    }
    c->w[worker].twice |= twice;
}

/// The checks' answer (QG_OK, QG_ERR_HANDLE or QG_ERR_INVALID); gives the
/// maps back.
qg_status qg_move_checks_end(qg_move_checks *c, const qg_jobs *jobs);

#endif
