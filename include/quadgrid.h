// SPDX-License-Identifier: MIT
/// quadgrid: 2D spatial indexes for collision detection (the broad phase).
///
/// One header, one interface, several index kinds. Every kind gives exactly the
/// answers a brute-force loop gives on closed float boxes; the kinds differ only
/// in speed and memory. See README.md for the table of kinds and measured figures.
///
/// Threading: functions that take `const qg_index *` never change the index and
/// may run at the same time from several threads on one index, as long as no
/// thread changes it. The library has no global state and never prints, aborts
/// or exits.
#ifndef QUADGRID_H
#define QUADGRID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(QUADGRID_SHARED)
#  if defined(QUADGRID_BUILDING)
#    define QG_API __declspec(dllexport)
#  else
#    define QG_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define QG_API __attribute__((visibility("default")))
#else
#  define QG_API
#endif

/// Library version.
#define QG_VERSION_MAJOR 0
#define QG_VERSION_MINOR 2
#define QG_VERSION_PATCH 0

/// A closed axis-aligned box: a point has min == max. Stored boxes must be
/// finite with min <= max on both axes.
typedef struct qg_rect {
    float min_x, min_y, max_x, max_y;
} qg_rect;

/// Names a live element: >= 0, stable until the element is removed. Freed
/// handles are reused by later inserts. A negative value returned by
/// qg_insert is a qg_status.
typedef int32_t qg_handle;

/// An index of one kind. Opaque: create it with qg_create.
typedef struct qg_index qg_index;

/// Result of a call. Every error leaves the index exactly as it was.
typedef enum qg_status {
    QG_OK = 0,
    /// NaN or infinite coordinate, min > max, bad config or argument.
    QG_ERR_INVALID = -1,
    /// Not a live handle of this index.
    QG_ERR_HANDLE = -2,
    /// An allocation failed; the index is exactly as it was before the call.
    QG_ERR_NOMEM = -3,
    /// The element count would pass what the index can address (INT32_MAX
    /// handles; QG_POINT_GRID: 16,777,215 elements). Never a box's size or
    /// position: every kind takes any finite box.
    QG_ERR_CAPACITY = -4,
} qg_status;

/// The index kinds, one line each: X(ENUM, name, summary). The enum below,
/// qg_kind_name, the library's class table, the tests, CI and the bench all
/// derive from this list, so a new kind is one line here plus its files.
/// docs/kinds.md says which to choose for which scene.
#define QG_KIND_LIST(X)                                                                              \
    X(QUADTREE, quadtree, "tight quadtree, 8-byte nodes, deferred cleanup")                         \
    X(LOOSE_QUADTREE, loose_quadtree, "loose quadtree, one leaf per element")                       \
    X(LEVEL_QUADTREE, level_quadtree, "complete preallocated quadtree, O(1) insert/remove")         \
    X(BUCKET_QUADTREE, bucket_quadtree, "the classic textbook bucket quadtree")                     \
    X(GRID, grid, "uniform grid, 4-byte cells, row lists")                                          \
    X(MULTI_GRID, multi_grid, "fine grid plus coarse occupancy levels")                             \
    X(LOOSE_GRID, loose_grid, "loose/tight double grid")                                            \
    X(POINT_GRID, point_grid, "one point (the min corner) per element, in size levels")             \
    X(BRUTE_FORCE, brute_force, "flat array; the oracle every test compares with")

/// The index kinds: QG_QUADTREE, QG_LOOSE_QUADTREE, ... (QG_KIND_LIST).
///
/// Cost at mixed scales (what tests/test_hostile_scales.c checks, with
/// qg_default_config): on boxes of sides 2^-100 and 2^100 (or 2^-120 and
/// 2^120) mixed at centres u * 2^e over 200-250 binades, and on crowds of
/// small boxes crossed by boxes 2e30 long, every kind holds at most 512
/// bytes per element plus 16 MiB and makes at most 16 times brute force's
/// n(n-1)/2 pair tests (plus 64 per element) in qg_pairs (docs/kinds.md,
/// "Cost at mixed scales").
typedef enum qg_kind {
#define QG_KIND_ENUM_(NAME, name, summary) QG_##NAME,
    QG_KIND_LIST(QG_KIND_ENUM_)
#undef QG_KIND_ENUM_
    QG_KIND_COUNT
} qg_kind;

/// A user allocator, used for every byte an index holds (the qg_index struct
/// included). Works like realloc: `ptr == NULL` allocates, `new_size == 0`
/// frees and returns NULL, otherwise resizes. Returns NULL on failure, in which
/// case `ptr` must stay valid. `old_size` is the size of the block `ptr` names
/// (0 when ptr is NULL). A request to shrink or free a block must not fail;
/// a request to allocate or grow may, and quadgrid then answers QG_ERR_NOMEM
/// and leaves the index as it was.
typedef struct qg_allocator {
    void *(*realloc)(void *ptr, size_t old_size, size_t new_size, void *user);
    void *user;
} qg_allocator;

/// Configuration of a new index. qg_default_config alone is a fast index:
/// every kind (QG_BRUTE_FORCE aside) learns its sizes and world from the
/// elements it holds (docs/tuning.md). A value set here is where the index
/// starts, a hint it corrects when its elements show it 2x or more off,
/// unless fixed_sizes holds the values exactly.
typedef struct qg_config {
    qg_kind kind;
    /// The world, as a hint (all zero: no hint; the index starts at
    /// [0,1024]^2 and learns it): boxes partly or wholly outside it are stored,
    /// found and paired like the others at about the same cost, and bounds
    /// far larger than the elements' spread do not slow an index down. Trees
    /// and the point grid re-fit their world to the elements (in qg_cleanup,
    /// from memory they hold, or in qg_insert/qg_move, which may then
    /// allocate); grids wrap cells around (a torus). Any finite values with
    /// min < max on both axes, up to +-FLT_MAX and down to tiny extents.
    qg_rect bounds;
    /// Typical element width; 0 = learn it (the median of the elements'
    /// larger sides). Tunes depth and cell size.
    float element_size;
    /// QG_POINT_GRID: the largest width and height of its finest size level.
    /// A larger box goes to a coarser level (each level's bound 4 times the
    /// last's, the top one unbounded), so any size is accepted; answers are
    /// exact across levels. 0 = twice element_size, or with neither a 256th of
    /// the bounds. Set it to the size most elements stay under.
    float max_element_size;
    /// Trees: maximum depth (root = 0); 0 = choose so the smallest cell is a
    /// little over element_size.
    int max_depth;
    /// Trees: elements a leaf holds before it splits; 0 = the kind's default.
    int leaf_capacity;
    /// Grids: cell width and height; 0 = choose from element_size
    /// (QG_POINT_GRID: six times max_element_size, at least two and a half;
    /// level k's cells are 4^k times as wide).
    float cell_size;
    /// All zero = the C library's realloc/free; on Linux, blocks of 2 MiB and
    /// more then ask for transparent huge pages (madvise, a hint: fewer TLB
    /// misses on the big arrays every query reads at random).
    qg_allocator allocator;
    /// True: hold element_size, max_element_size, max_depth, cell_size and
    /// the bounds exactly as given (0 still means the kind's fixed default
    /// from the bounds); the index never re-tunes. False (the default): the
    /// sizes given are starting hints; the index measures its elements at
    /// the first qg_cleanup or qg_insert_many with 256 or more of them, again
    /// when their number doubled or halved and every 16 qg_cleanup calls (a
    /// sample of 256 boxes), and rebuilds its structure with the learned
    /// sizes (and, for the grids, world) when they differ from the ones in
    /// force by 2x or more (trees: 1.5x; QG_POINT_GRID: its boxes pass its
    /// size bound, or fall under half of it). cell_size and max_depth are
    /// then chosen from the learned sizes; leaf_capacity and a max_depth
    /// the user set are kept. Not while
    /// the index has static elements, filters or events (qg_set_static,
    /// qg_set_filter, qg_pair_events): it keeps the sizes it has then.
    /// docs/tuning.md says what each kind learns.
    bool fixed_sizes;
} qg_config;

/// Defaults for a kind: bounds all zero (no hint), sizes 0 (learn them),
/// fixed_sizes false. Nothing else needs setting.
QG_API qg_config qg_default_config(qg_kind kind);

/// Creates an index. On success *out is the index and QG_OK is returned; on
/// failure *out is set to NULL. QG_ERR_INVALID for a bad config or a kind that
/// is not built; QG_ERR_NOMEM when the allocator fails.
QG_API qg_status qg_create(const qg_config *config, qg_index **out);

/// Frees every byte the index holds. qg_destroy(NULL) does nothing.
QG_API void qg_destroy(qg_index *index);

/// Inserts a box. Returns its handle (>= 0) or a negative qg_status.
QG_API qg_handle qg_insert(qg_index *index, qg_rect box);

/// Removes a live element. QG_ERR_HANDLE if the handle is not live.
QG_API qg_status qg_remove(qg_index *index, qg_handle handle);

/// Gives a live element a new box; the handle stays the same.
QG_API qg_status qg_move(qg_index *index, qg_handle handle, qg_rect box);

/// Reads the box of a live element.
QG_API qg_status qg_get(const qg_index *index, qg_handle handle, qg_rect *box);

/// Number of live elements (0 for NULL).
QG_API int32_t qg_count(const qg_index *index);

/// Deferred upkeep (for trees: collapse empty leaves; for loose kinds: shrink
/// boxes; for QG_POINT_GRID: refresh the cell-ordered points in place, or
/// re-sort them once enough elements left their cells; for the kinds that
/// re-fit their world to the elements: the re-fit, when enough of them are
/// outside it or it is far too large). Call once a frame, after the moves and
/// before the queries and qg_pair calls of that frame: answers are exact
/// either way, but the point grid searches several times slower until its
/// moves are refreshed. Never allocates: a re-fit that wants more memory
/// than the index holds takes it in the next qg_insert or qg_move.
QG_API void qg_cleanup(qg_index *index);

/// Removes every element, keeps the memory for reuse.
QG_API void qg_clear(qg_index *index);

/// Query callback. Return false to stop early. Must not change the index that
/// calls it.
typedef bool qg_query_fn(qg_handle handle, void *user);

/// Pair callback, called with a < b. Return false to stop early. Must not
/// change the index that calls it.
typedef bool qg_pair_fn(qg_handle a, qg_handle b, void *user);

/// Calls fn once for each live element whose closed box overlaps the closed
/// `area`, and for no other. The area may be unbounded (+/-infinity), not NaN.
QG_API qg_status qg_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user);

/// qg_query with the area [x,x] x [y,y].
QG_API qg_status qg_query_point(const qg_index *index, float x, float y, qg_query_fn *fn,
                                void *user);

/// Calls fn exactly once for each unordered pair of live elements whose closed
/// boxes overlap, with a < b, except pairs of two static elements and pairs
/// their filters keep apart (qg_set_static, qg_set_filter). Order is
/// unspecified but deterministic for the same sequence of calls.
QG_API qg_status qg_pairs(const qg_index *index, qg_pair_fn *fn, void *user);

/// What a query or pair search did: the work behind its answer, for tuning
/// and for comparing kinds (Box2D-style stats returned by queries).
typedef struct qg_query_stats {
    /// Nodes or cells the search looked at (for grids: cells, at every level).
    int64_t nodes_visited;
    /// Element boxes tested against the area (or pair tests, for pairs).
    int64_t elements_tested;
} qg_query_stats;

/// qg_query that also reports what the search did into *stats (which may be
/// NULL).
QG_API qg_status qg_query_with_stats(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                                     qg_query_stats *stats);

/// qg_pairs that also reports what the search did into *stats (which may be
/// NULL).
QG_API qg_status qg_pairs_with_stats(const qg_index *index, qg_pair_fn *fn, void *user,
                                     qg_query_stats *stats);

/// What an index holds right now.
typedef struct qg_stats {
    /// Bytes this index holds from its allocator right now, exactly.
    size_t memory_bytes;
    /// nodes/leaves: cells for grids.
    int32_t elements, nodes, leaves, max_depth_reached;
    /// What is in force (learned, or as configured): the typical element
    /// width, the size bound (QG_POINT_GRID's finest level; the others: the
    /// element size the layout was chosen for), the cell width (grids; 0 for
    /// trees) or the maximum depth (trees; 0 for grids), and the world the
    /// structure was laid out for (trees and the point grid re-fit it further
    /// as elements spread).
    float element_size, size_bound, cell_size;
    int32_t max_depth;
    qg_rect world;
    /// Re-tunes (rebuilds with learned sizes) this index has made.
    int32_t retunes;
} qg_stats;

/// Reads the stats (all zero for NULL).
QG_API qg_stats qg_get_stats(const qg_index *index);

/// Visit callback: one node or cell, its box, its depth (0 = root or grid
/// level), and how many element entries it holds.
typedef void qg_visit_fn(qg_rect cell, int depth, int32_t elements, void *user);

/// Calls fn for every node or cell, for drawing.
QG_API void qg_visit(const qg_index *index, qg_visit_fn *fn, void *user);

/// The kind's name in QG_KIND_LIST ("quadtree", "loose_quadtree", ...,
/// "brute_force"); NULL if unknown.
QG_API const char *qg_kind_name(qg_kind kind);

/// The kind for a name given by qg_kind_name. QG_ERR_INVALID if unknown.
QG_API qg_status qg_kind_from_name(const char *name, qg_kind *out);

/// "QG_OK", "QG_ERR_INVALID", ...; "QG_ERR_UNKNOWN" for other values.
QG_API const char *qg_status_name(qg_status status);

/// True when qg_create can build this kind in this version of the library.
QG_API bool qg_kind_available(qg_kind kind);

/// Checks the index's internal invariants (lists, counts, free lists, memory
/// accounting). Returns QG_OK or QG_ERR_INVALID. For tests and debugging; it
/// walks everything, so it is slow.
QG_API qg_status qg_validate(const qg_index *index);

/* ---- Ray casts, nearest neighbours, bulk insert ------------------------ */

/// Ray callback: `handle` is hit at parameter t (the point origin + t*direction).
/// Return the new max_t: the current max_t to go on, t to keep only hits no
/// farther than this one (closest-hit search), any negative value to stop.
typedef float qg_ray_fn(qg_handle handle, float t, void *user);

/// The hit test every ray call uses, exactly the formula of the `rays` workload
/// (docs/workloads.md): true when the segment origin + t*(dx,dy), t in
/// [0, max_t], touches the closed box; *t = the entry parameter (0 inside).
/// Per axis with a non-zero direction the slab parameters (min - o) / d and
/// (max - o) / d narrow [0, max_t] (in float; where a float parameter would
/// be infinite or NaN, from coordinates whose difference passes FLT_MAX or a
/// direction so small that 1/d overflows, the interval is narrowed in double,
/// and an entry past FLT_MAX is t = inf); a zero direction needs the origin
/// inside the slab. `t` may be NULL.
QG_API bool qg_ray_box(qg_rect box, float ox, float oy, float dx, float dy, float max_t, float *t);

/// Calls fn once for each live element qg_ray_box accepts at the current
/// max_t (each at most once, in any order; near to far where the kind can).
/// A direction (0,0) tests the origin point. QG_ERR_INVALID for a NaN or
/// infinite origin or direction, or max_t NaN or < 0 (max_t may be +inf).
/// In closest-hit mode (fn returns t) fn still sees every element whose t
/// equals the smallest t, so ties can be broken by handle.
QG_API qg_status qg_raycast(const qg_index *index, float ox, float oy, float dx, float dy,
                            float max_t, qg_ray_fn *fn, void *user);

/// Squared distance from a point to a closed box (0 inside), exactly the
/// formula of the `knn` workload.
QG_API float qg_point_box_distance2(qg_rect box, float x, float y);

/// The k live elements nearest to (x, y) with distance2 <= max_distance2, in
/// (distance2, handle) ascending order: handles[0..*found), and their squared
/// distances in distances2 when it is not NULL. Never allocates. QG_ERR_INVALID
/// for a NaN or infinite point, k < 0, max_distance2 NaN or < 0, or handles
/// NULL with k > 0 (or found NULL).
QG_API qg_status qg_nearest(const qg_index *index, float x, float y, int32_t k,
                            float max_distance2, qg_handle *handles, float *distances2,
                            int32_t *found);

/// Inserts boxes[0..n): handles[i] becomes the handle of boxes[i], the same
/// handles n successive qg_insert calls would have returned. All or nothing:
/// any bad box gives QG_ERR_INVALID, a failed allocation QG_ERR_NOMEM, and the
/// index is then exactly as it was, memory_bytes included.
/// QG_ERR_CAPACITY when the count would pass what the kind addresses, and
/// nothing is inserted. On every refusal with n > 0 and handles not NULL
/// (the index NULL or boxes NULL included) handles[0..n) are all -1; with
/// n <= 0 handles[] is not touched. A refused call also leaves what the
/// index learned (docs/tuning.md) as it was, so its retry builds what one
/// call never refused builds. Kinds may build in bulk (one sort) here.
QG_API qg_status qg_insert_many(qg_index *index, const qg_rect *boxes, int32_t n,
                                qg_handle *handles);

/* ---- Several cores ------------------------------------------------------
 *
 * quadgrid never creates threads behind your back: it splits its work into
 * tasks and hands them to the job system you pass in a qg_jobs (the
 * convention of Box2D v3's task callbacks). Without a job system of your
 * own, qg_thread_pool is a ready one.
 *
 * Thread rules for the calls below: qg_pairs_parallel is const (it may run
 * beside other const calls on the same index, like qg_pairs); qg_move_many
 * and qg_cleanup_parallel change the index, so nothing else may use that
 * index while they run. Callbacks run on the job system's threads: a pair
 * callback gets the user pointer of its part and nothing else touches that
 * pointer during the call, so it needs no locks; it must not change the
 * index. Distinct indexes are independent: calls on them may run at once. */

/// A task over the items [begin, end) run on the job system's worker
/// `worker` (0 <= worker < worker_count; two ranges that run at the same time
/// have different workers).
typedef void qg_task_fn(int32_t begin, int32_t end, int32_t worker, void *context);

/// Runs `task` over the items [0, count), split into disjoint ranges that
/// together cover every item once, on the job system's workers, and returns
/// when every range is done. `user` is qg_jobs.user.
typedef void qg_run_fn(qg_task_fn *task, int32_t count, void *context, void *user);

/// An application's job system, as quadgrid sees it.
typedef struct qg_jobs {
    /// How many workers `run` may use at once (>= 1): quadgrid splits a
    /// parallel call into this many parts.
    int32_t worker_count;
    qg_run_fn *run;
    void *user;
} qg_jobs;

/// A ready job system: `workers` threads in all, the calling thread being
/// one of them (workers - 1 are created here and reused by every call until
/// qg_thread_pool_destroy). QG_ERR_INVALID for workers < 1 or > 256;
/// QG_ERR_NOMEM when a thread or its memory cannot be had.
typedef struct qg_thread_pool qg_thread_pool;
QG_API qg_status qg_thread_pool_create(int32_t workers, qg_thread_pool **out);

/// Stops and joins the pool's threads and frees it. NULL does nothing.
QG_API void qg_thread_pool_destroy(qg_thread_pool *pool);

/// The pool as a qg_jobs. One pool runs one call at a time: do not pass it
/// to two calls that run at once from different threads.
QG_API qg_jobs qg_thread_pool_jobs(qg_thread_pool *pool);

/// The cores this machine has (at least 1), for sizing a pool.
QG_API int32_t qg_cpu_count(void);

/// qg_pairs on the workers of `jobs`: the search is split into
/// jobs->worker_count parts, deterministically; part p reports its pairs with
/// fn(a, b, users[p]) (a < b). Every overlapping pair is reported exactly
/// once, in exactly one part; the union over the parts is qg_pairs' set. The
/// same calls give the same pairs to the same parts. A false return from fn
/// stops that part only. `users` may be NULL (every part gets NULL); `jobs`
/// may be NULL (one part, on this thread). `stats`, if not NULL, receives the
/// sum over the parts. QG_ERR_INVALID for a NULL index or fn, or a jobs with
/// worker_count outside [1, 256] or no run function (allowed with one worker).
QG_API qg_status qg_pairs_parallel(const qg_index *index, const qg_jobs *jobs, qg_pair_fn *fn,
                                   void *const *users, qg_query_stats *stats);

/// Moves many elements: handles[i] gets boxes[i], as n qg_move calls would,
/// with the kind's work spread over the workers of `jobs` where it allows
/// (NULL = this thread). Everything is checked first: a handle that is not
/// live gives QG_ERR_HANDLE, a bad box, a handle listed twice, n < 0 or NULL
/// arrays with n > 0 give QG_ERR_INVALID, and nothing changes. All or
/// nothing: on QG_ERR_NOMEM no element has moved and the index is exactly as
/// it was, memory_bytes included, with or without workers, static elements
/// (qg_set_static) in the batch or not.
QG_API qg_status qg_move_many(qg_index *index, const qg_jobs *jobs, const qg_handle *handles,
                              const qg_rect *boxes, int32_t n);

/// qg_cleanup with its parallel-friendly work spread over the workers of
/// `jobs` (NULL = this thread): the point grid's refresh and re-sort, the
/// loose kinds' shrink. Same result as qg_cleanup; never allocates. A jobs
/// qg_pairs_parallel would reject makes it a plain qg_cleanup.
QG_API void qg_cleanup_parallel(qg_index *index, const qg_jobs *jobs);

/* ---- Engine scenes: static elements, collision filters, overlap events ---
 *
 * A level is mostly static: walls and tiles that never move, actors that
 * cross them. Mark the static elements with qg_set_static: they leave the
 * kind's structure for a compact static layer ordered by cell, and the pair
 * search walks only what moves (dynamic elements, and static ones moved since
 * the last qg_cleanup) against everything else; two static elements are never
 * paired. Filters and events follow Box2D's category/mask bits and
 * begin/end contact events. Queries, ray casts and nearest see every element,
 * static or not, unfiltered. */

/// Collision filter: elements a and b are paired (qg_pairs, qg_pair_events) only when
/// (a.category & b.mask) != 0 and (b.category & a.mask) != 0. Queries and ray casts are
/// not filtered. Every element starts with qg_default_filter() (pairs with everything).
typedef struct qg_filter {
    uint32_t category; ///< the bits this element is
    uint32_t mask;     ///< the bits it pairs with
} qg_filter;

/// {category 1, mask 0xFFFFFFFF}.
QG_API qg_filter qg_default_filter(void);

/// Sets an element's filter. QG_ERR_HANDLE for a handle that is not live;
/// QG_ERR_NOMEM (the first non-default filter of an index allocates the
/// per-element filters) leaves the filter as it was. A removed element's
/// filter is forgotten: a new element on its handle starts with the default.
QG_API qg_status qg_set_filter(qg_index *index, qg_handle handle, qg_filter filter);

/// Reads an element's filter into *filter. QG_ERR_HANDLE for a handle that is
/// not live.
QG_API qg_status qg_get_filter(const qg_index *index, qg_handle handle, qg_filter *filter);

/// Marks an element static (or dynamic again). Two static elements are never paired.
/// Static elements are expected to move rarely: qg_move on one is allowed and exact, and
/// may cost more. New elements are dynamic. QG_ERR_HANDLE for a handle that is not live;
/// QG_ERR_NOMEM leaves the element as it was. qg_is_static is false for a handle that is
/// not live.
QG_API qg_status qg_set_static(qg_index *index, qg_handle handle, bool is_static);

/// True when the live element `handle` is static.
QG_API bool qg_is_static(const qg_index *index, qg_handle handle);

/// Overlap events since the previous call on this index: began(a, b) for each pair that is
/// paired now (qg_pairs' set: overlapping, filters, static rule) and was not at the previous
/// call; ended(a, b) for each pair that was paired at the previous call and is not now,
/// including pairs whose element was removed (reported with the handle it had, even when a
/// later insert reused that handle: then its new pairs are reported as began). The first call
/// reports every current pair as began. In each event a < b. Either callback may be NULL.
/// Every event is reported; the callbacks' return values are ignored. The index keeps the
/// set of current pairs (counted in memory_bytes); QG_ERR_NOMEM reports nothing and keeps the
/// previous set, so the next call reports the same events again. Not const: one thread.
QG_API qg_status qg_pair_events(qg_index *index, qg_pair_fn *began, qg_pair_fn *ended, void *user);


/* ---- Rollback: an index as a value ------------------------------------- */

/// The state of an index is everything that decides a later answer or its
/// order: the boxes, the handles and the order free handles are reused in,
/// the structure with its arrays' capacities, the learned sizes and re-tune
/// counters, static elements, filters and the event state (the pairs the
/// next qg_pair_events compares with). The allocator is not state: a clone
/// or copy keeps its own (qg_clone: the original's), and qg_pair_events takes
/// its callbacks at every call, so an index read from a snapshot reports the
/// same began/ended events as the original would. The calls below carry the
/// state over exactly: the copy answers every later call as the original
/// would, in the same order. docs/rollback.md describes the snapshot format.

/// A new index that answers every later call exactly as `index` would, in the
/// same order, with `index`'s allocator. QG_ERR_INVALID for NULL arguments;
/// QG_ERR_NOMEM when the allocator fails (*out is NULL then, nothing is held).
QG_API qg_status qg_clone(const qg_index *index, qg_index **out);

/// Makes dst a copy of src (the same kind); no allocation when dst already
/// holds enough memory (a rollback every frame without the allocator).
/// Capacities are state, so dst's arrays take src's exactly: where dst's are
/// larger they shrink (the allocator is asked to shrink, which cannot fail),
/// where all are equal (a rollback to a copy of the same index) the allocator
/// is not called at all. On any error dst is unchanged: QG_ERR_INVALID for
/// NULL arguments or indexes of different kinds, QG_ERR_NOMEM when dst lacks
/// room and the allocator refuses it.
QG_API qg_status qg_copy(qg_index *dst, const qg_index *src);

/// Bytes qg_snapshot_write needs for this index now (0 for NULL).
QG_API size_t qg_snapshot_size(const qg_index *index);

/// The whole state in a portable form: versioned, little-endian, with a
/// checksum (docs/rollback.md). `len` must be at least qg_snapshot_size;
/// QG_ERR_INVALID (nothing written) otherwise or for NULL arguments.
QG_API qg_status qg_snapshot_write(const qg_index *index, void *buf, size_t len);

/// A new index from a snapshot, its memory from `allocator` (NULL: the
/// default allocator). It continues exactly as the index the snapshot was
/// written from, on any platform. QG_ERR_INVALID for bytes that are not a
/// whole, unchanged snapshot of this version (truncated, corrupted, a
/// checksum or structure that does not agree, a kind this build lacks, or
/// capacities past 64 times the snapshot's size plus 64 MiB); QG_ERR_NOMEM
/// when the allocator fails. On any error *out is NULL and nothing is held.
QG_API qg_status qg_snapshot_read(const void *buf, size_t len, const qg_allocator *allocator,
                                  qg_index **out);

#ifdef __cplusplus
}
#endif

#endif /* QUADGRID_H */
