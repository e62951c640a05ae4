// The base of every index and the table of functions each kind serves.
//
// Data flows one way: public call (index.c) -> argument checks, done once ->
// the kind's function -> shared helpers. A kind never re-checks NaN, handles
// or min > max: by the time it is called, its inputs are valid.
#ifndef QG_INDEX_INTERNAL_H
#define QG_INDEX_INTERNAL_H

#include "alloc.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#    include <emmintrin.h>
#endif

typedef struct qg_kind_class qg_kind_class;

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
};

/// Defines the table of a kind whose struct is `type` and whose functions
/// are all named `prefix_<member>` (quadtree_insert, ...): each kind's file
/// ends with one line instead of the same fifteen-line table written out
/// again. The table is `qg_<prefix>_class`.
#define QG_KIND_CLASS(prefix, KIND, type) QG_KIND_CLASS_EX(prefix, KIND, type, .pairs_part = NULL)

/// QG_KIND_CLASS plus the optional members the kind serves, as designated
/// initializers: QG_KIND_CLASS_EX(grid, QG_GRID, grid, .pairs_part = grid_pairs_part).
/// It also makes the kind's move_one around its move (qg_kind_move_one: the
/// kind's file includes engine.h), the move kept out of line: inlined
/// there, the quadtree's and the point grid's moves ran 40% and 65% slower
/// (`agents` update at 100,000; the moves are tuned to keep their
/// registers).
#define QG_KIND_CLASS_EX(prefix, KIND, type, ...)                                                    \
    static qg_status prefix##_move(qg_index *index, qg_txn *txn, qg_handle h, qg_rect box)          \
        QG_NOINLINE;                                                                                 \
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

/// One table per kind, each the only symbol its file exports. index.c lists
/// the ones that are built.
extern const qg_kind_class qg_quadtree_class;
extern const qg_kind_class qg_loose_quadtree_class;
extern const qg_kind_class qg_level_quadtree_class;
extern const qg_kind_class qg_bucket_quadtree_class;
extern const qg_kind_class qg_grid_class;
extern const qg_kind_class qg_multi_grid_class;
extern const qg_kind_class qg_loose_grid_class;
extern const qg_kind_class qg_point_grid_class;
extern const qg_kind_class qg_brute_force_class;

#if defined(__SSE2__)
/// A box as one vector (min_x, min_y, max_x, max_y). Built from its four
/// floats rather than loaded from its address: a box passed by value
/// arrives in two registers, and a 16-byte load of the two 8-byte halves
/// spilled to the stack stalls on store forwarding (GCC and Clang: the SSE2
/// paths are theirs).
static inline __m128 qg_rect_vec(qg_rect r)
{
    // Two 8-byte halves joined in registers (unpcklpd); _mm_setr_ps of the
    // four floats compiles to the spill and 16-byte reload.
    typedef float qg_v2sf __attribute__((vector_size(8)));
    const qg_v2sf lo = {r.min_x, r.min_y}, hi = {r.max_x, r.max_y};
    double dl, dh;
    memcpy(&dl, &lo, sizeof dl);
    memcpy(&dh, &hi, sizeof dh);
    return _mm_castpd_ps(_mm_setr_pd(dl, dh));
}
#endif

#if defined(__SSE2__)
/// A box broadcast for qg_overlaps4: each coordinate in all four lanes.
typedef struct qg_box4 {
    __m128 x0, y0, x1, y1;
} qg_box4;

static inline qg_box4 qg_box4_of(qg_rect r)
{
    return (qg_box4){_mm_set1_ps(r.min_x), _mm_set1_ps(r.min_y), _mm_set1_ps(r.max_x), _mm_set1_ps(r.max_y)};
}

/// Bit l set when box b overlaps the box in lane l of four boxes stored a
/// coordinate at a time (x0[0..4), ...): qg_overlaps' test (<=, false for
/// NaN), four at once. The leaf kernels of the trees and the static
/// caches' slot test share it.
static inline unsigned qg_overlaps4(qg_box4 b, const float *x0, const float *y0, const float *x1, const float *y1)
{
    const __m128 ox = _mm_and_ps(_mm_cmple_ps(b.x0, _mm_loadu_ps(x1)), _mm_cmple_ps(_mm_loadu_ps(x0), b.x1));
    const __m128 oy = _mm_and_ps(_mm_cmple_ps(b.y0, _mm_loadu_ps(y1)), _mm_cmple_ps(_mm_loadu_ps(y0), b.y1));
    return (unsigned)_mm_movemask_ps(_mm_and_ps(ox, oy));
}
#endif

/// *dst = r without the spill and 16-byte reload a struct copy of a box
/// passed by value compiles to (see qg_rect_vec).
static inline void qg_rect_store(qg_rect *dst, qg_rect r)
{
#if defined(__SSE2__)
    _mm_storeu_ps(&dst->min_x, qg_rect_vec(r));
#else
    *dst = r;
#endif
}

/// True when `inner` lies inside `outer` (closed; false when a coordinate
/// of either is NaN). Every move runs it (the engine's fat box), as one
/// vector compare each way.
static inline bool qg_rect_inside(qg_rect inner, qg_rect outer)
{
#if defined(__SSE2__)
    const __m128 i = qg_rect_vec(inner), o = qg_rect_vec(outer);
    // lanes 0, 1: outer's min <= inner's; lanes 2, 3: inner's max <= outer's
    return ((_mm_movemask_ps(_mm_cmple_ps(o, i)) & 3) | (_mm_movemask_ps(_mm_cmple_ps(i, o)) & 12)) == 15;
#else
    return inner.min_x >= outer.min_x && inner.min_y >= outer.min_y && inner.max_x <= outer.max_x &&
           inner.max_y <= outer.max_y;
#endif
}

/// qg_rect_inside, and `inner` ordered (min <= max on both axes): one
/// test for a move's box against a fat box.
static inline bool qg_rect_inside_ordered(qg_rect inner, qg_rect outer)
{
#if defined(__SSE2__)
    const __m128 i = qg_rect_vec(inner), o = qg_rect_vec(outer);
    const int m = (_mm_movemask_ps(_mm_cmple_ps(o, i)) & 3) | (_mm_movemask_ps(_mm_cmple_ps(i, o)) & 12) |
                  (_mm_movemask_ps(_mm_cmple_ps(i, _mm_movehl_ps(i, i))) & 3) << 4;
    return m == 63;
#else
    return qg_rect_inside(inner, outer) && inner.min_x <= inner.max_x && inner.min_y <= inner.max_y;
#endif
}

/// True when `box` is ordered (min <= max) and lies inside the box whose
/// sides are w = (min_x, min_y, -max_x, -max_y) (its max side stored
/// negated, so all four sides test one way in one compare); false when a
/// coordinate is NaN. A fat layer element's every move runs it.
static inline bool qg_rect_inside_negated(qg_rect box, const float *w)
{
#if defined(__SSE2__)
    const __m128 v = _mm_xor_ps(qg_rect_vec(box), _mm_setr_ps(0.0f, 0.0f, -0.0f, -0.0f));
    const __m128 in = _mm_cmple_ps(_mm_loadu_ps(w), v);
    // Lanes 2, 3: -max <= -min.
    const __m128 ord = _mm_cmple_ps(v, _mm_xor_ps(_mm_movelh_ps(v, v), _mm_set1_ps(-0.0f)));
    return (_mm_movemask_ps(in) & (_mm_movemask_ps(ord) | 3)) == 15;
#else
    return w[0] <= box.min_x && w[1] <= box.min_y && w[2] <= -box.max_x && w[3] <= -box.max_y &&
           box.min_x <= box.max_x && box.min_y <= box.max_y;
#endif
}

/// True when AVX2 kernels may run (the point grid's cell pairs, the static
/// caches' join): the processor has AVX2 and the
/// environment does not set QG_NO_AVX2. Asked once per index. The
/// switch lets the tests run the SSE2 kernels on a processor with AVX2
/// (each form is compared with brute force) and a user rule out the wide
/// form when chasing a difference.
static inline bool qg_cpu_avx2(void)
{
#if defined(__GNUC__) && defined(__x86_64__)
    return __builtin_cpu_supports("avx2") && getenv("QG_NO_AVX2") == NULL;
#else
    return false;
#endif
}

/// A storable box: finite, min <= max on both axes. x - x is 0 for every
/// finite x and NaN for NaN and both infinities, so one comparison checks all
/// four coordinates (this runs on every move; it relies on strict IEEE
/// arithmetic, which the build keeps).
static inline bool qg_box_valid(qg_rect b)
{
#if defined(__SSE2__)
    // The same tests on one vector: x - x == 0 in all four lanes, and
    // (min_x, min_y) <= (max_x, max_y) in the low two.
    const __m128 v = qg_rect_vec(b);
    const int finite = _mm_movemask_ps(_mm_cmpeq_ps(_mm_sub_ps(v, v), _mm_setzero_ps()));
    const int ordered = _mm_movemask_ps(_mm_cmple_ps(v, _mm_movehl_ps(v, v)));
    return (finite & (ordered | 12)) == 15;
#else
    const float z = (b.min_x - b.min_x) + (b.min_y - b.min_y) + (b.max_x - b.max_x) + (b.max_y - b.max_y);
    return (z == 0.0f) & (b.min_x <= b.max_x) & (b.min_y <= b.max_y);
#endif
}

#if defined(__GNUC__)
#    define QG_NOINLINE __attribute__((noinline))
#else
#    define QG_NOINLINE
#endif

/// A handle's term in the sums a kind's qg_validate compares to prove each
/// element listed once without memory (splitmix64's finaliser): the listed
/// entries' terms sum to the live handles', and a handle twice with another
/// missing would need two 64-bit mixes to cancel.
static inline uint64_t qg_handle_term(qg_handle h)
{
    uint64_t z = (uint64_t)h + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/// The closed-box overlap test every kind and the oracle share.
/// Bitwise & rather than &&: one well-predicted branch instead of four
/// unpredictable ones in the pair loops.
static inline bool qg_overlaps(qg_rect a, qg_rect b)
{
    return (a.min_x <= b.max_x) & (b.min_x <= a.max_x) & (a.min_y <= b.max_y) &
           (b.min_y <= a.max_y);
}

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

/// Reports an unordered pair with the smaller handle first.
static inline bool qg_report_pair(qg_pair_fn *fn, void *user, qg_handle a, qg_handle b)
{
    return a < b ? fn(a, b, user) : fn(b, a, user);
}

/// Index of the lowest set bit of v (v != 0).
static inline int qg_ctz64(uint64_t v)
{
#if defined(__GNUC__)
    return __builtin_ctzll(v);
#else
    int n = 0;
    while (!(v & 1)) {
        v >>= 1;
        ++n;
    }
    return n;
#endif
}

/// Extent of [lo, hi] in double: finite for any finite floats (hi - lo in
/// float overflows to infinity past FLT_MAX, as with bounds [-3e38, 3e38]).
static inline double qg_extent(float lo, float hi)
{
    return (double)hi - (double)lo;
}

/// Largest of the two axes' extents of `r` (for choosing defaults), as a
/// float: FLT_MAX when it would overflow.
static inline float qg_rect_extent(qg_rect r)
{
    const double w = qg_extent(r.min_x, r.max_x), h = qg_extent(r.min_y, r.max_y);
    const double e = w > h ? w : h;
    return e < (double)FLT_MAX ? (float)e : FLT_MAX;
}

#endif
