// SPDX-License-Identifier: MIT
/* Shared helpers of the quadgrid tests: a checking, counting, fault-injecting
 * allocator and the loop over every failure point of a call; a seeded RNG;
 * growable result lists; an independent closed-box overlap test; snapshot
 * checks (same answers as an oracle, nothing changed); the main() every test
 * program shares and cases that carry their kind; the bounds-are-a-hint
 * sequences and re-fit scenes several kinds' own tests run. Written against
 * the public header only, so that a check written once here serves every
 * program. */
#ifndef QG_TEST_UTIL_H
#define QG_TEST_UTIL_H

#include <quadgrid.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- allocator ------------------------------------------------------- */

typedef enum tu_fail_mode {
    /* Fail only the fail_at-th grow request of the run. */
    TU_FAIL_ONCE,
    /* Fail the fail_at-th grow request and every later one until the test
     * calls tu_alloc_end_call: recovery code that allocates fails too. */
    TU_FAIL_STICKY,
    /* The test sets `failing` before each call itself: every grow request of
     * that call fails (fail_at is not used). */
    TU_FAIL_EACH_CALL,
} tu_fail_mode;

typedef struct tu_alloc {
    size_t bytes;        /* bytes of the blocks the library holds now */
    size_t blocks;       /* blocks the library holds now */
    long grow_requests;  /* allocate or grow requests seen so far */
    long fail_at;        /* 1-based grow request to fail; 0 = never */
    tu_fail_mode mode;
    bool failing;        /* sticky mode: failing until the call ends */
    long injected;       /* failures injected so far */
    long errors;         /* misuse seen: wrong old_size, unknown pointer */
    char last_error[160];
} tu_alloc;

void tu_alloc_init(tu_alloc *a);
/* The qg_allocator that routes through `a`. */
qg_allocator tu_allocator(tu_alloc *a);
/* Ends the current API call for sticky mode. */
void tu_alloc_end_call(tu_alloc *a);

/* Arms `a` so that the k-th grow request from now fails (once or from then
 * on, as a->mode says); tu_alloc_disarm ends the call and fails no more. */
void tu_alloc_fail_in(tu_alloc *a, long k);
void tu_alloc_disarm(tu_alloc *a);

/* Every failure point of one call: fail-once, then fail-from-then-on, runs
 * `run` with k = 1, 2, ... on a fresh allocator in that mode until a run
 * where the call succeeded with no failure injected (a run past max_k fails
 * the case). `run` builds its indexes on the allocator, arms it with
 * tu_alloc_fail_in(a, k) just before the call under test and disarms it
 * after, checks the answers, destroys its indexes and returns the call's
 * status; the allocator must then hold nothing and have seen no misuse.
 * Prints how many failure points each mode had. */
typedef qg_status (*tu_fail_run)(tu_alloc *a, long k, void *user);
void tu_each_failure_point(const char *what, long max_k, tu_fail_run run, void *user);

/* ---- RNG ------------------------------------------------------------- */

typedef struct tu_rng {
    uint64_t s;
} tu_rng;

void tu_rng_seed(tu_rng *r, uint64_t seed);
uint64_t tu_rng_next(tu_rng *r);
/* Uniform in [0, n). */
uint32_t tu_rng_below(tu_rng *r, uint32_t n);
/* Uniform in [0, 1). */
double tu_rng_unit(tu_rng *r);
/* Uniform in [lo, hi]. */
float tu_rng_range(tu_rng *r, float lo, float hi);
bool tu_rng_chance(tu_rng *r, double p);

/* ---- result lists ---------------------------------------------------- */

typedef struct tu_vec {
    int64_t *v;
    size_t n, cap;
} tu_vec;

void tu_vec_push(tu_vec *a, int64_t x);
void tu_vec_clear(tu_vec *a);
void tu_vec_free(tu_vec *a);
void tu_vec_sort(tu_vec *a);
/* Index of the first element that differs after both are sorted, or -1. */
long tu_vec_first_diff(const tu_vec *a, const tu_vec *b);
/* True when a sorted vector holds a value twice. */
bool tu_vec_has_dup(const tu_vec *a, int64_t *dup);

/* Query/pair callbacks that collect handles into a tu_vec. A pair (a,b) is
 * stored as a * 2^32 + b. `bad_order` counts pairs with a >= b. */
typedef struct tu_collect {
    tu_vec out;
    long calls;
    long stop_after; /* return false after this many calls; 0 = never */
    long bad_order;
} tu_collect;

bool tu_collect_query(qg_handle h, void *user);
bool tu_collect_pair(qg_handle a, qg_handle b, void *user);
void tu_collect_reset(tu_collect *c, long stop_after);

/* ---- geometry -------------------------------------------------------- */

/* The closed-box overlap test, written independently of the library. */
static inline bool tu_overlap(qg_rect a, qg_rect b)
{
    return a.min_x <= b.max_x && b.min_x <= a.max_x && a.min_y <= b.max_y &&
           b.min_y <= a.max_y;
}

static inline qg_rect tu_rect(float x0, float y0, float x1, float y1)
{
    qg_rect r = {x0, y0, x1, y1};
    return r;
}

static inline bool tu_rect_same(qg_rect a, qg_rect b)
{
    return a.min_x == b.min_x && a.min_y == b.min_y && a.max_x == b.max_x &&
           a.max_y == b.max_y;
}

/* ---- snapshots: what an index answers, to prove "nothing changed" ------- */

typedef struct tu_snapshot {
    int32_t count;
    int32_t stat_elements;
    int32_t probe;      /* handles 0..probe-1 were read with qg_get */
    qg_status *status;  /* qg_get status per probed handle */
    qg_rect *box;       /* qg_get box per probed handle (when QG_OK) */
    tu_vec all;         /* sorted handles from a query of the whole plane */
    tu_vec pairs;       /* sorted pairs */
    qg_status query_status, pairs_status;
} tu_snapshot;

/* Reads everything the index answers about handles 0..probe-1. */
void tu_snapshot_take(const qg_index *idx, int32_t probe, tu_snapshot *s);
/* Returns true when both snapshots are the same answers; otherwise writes
 * the first difference into msg. */
bool tu_snapshot_equal(const tu_snapshot *a, const tu_snapshot *b, char *msg, size_t msg_size);
void tu_snapshot_free(tu_snapshot *s);

/* Snapshots of `idx` and `want` (handles 0..probe-1) must be the same
 * answers, and `idx` must validate; a failure names the case with the
 * printf-style `fmt` before the first difference. */
void tu_expect_same(const qg_index *idx, const qg_index *want, int32_t probe, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* A fresh snapshot of `idx` (the handles `before` probed) must be the same
 * answers as `before`, which is freed; a failure names the case with the
 * printf-style `fmt` before the first difference. */
void tu_expect_unchanged(const qg_index *idx, tu_snapshot *before, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Fails the running cmocka case with what was running: prints "FAILED
 * <context>: <message>" and then `hint` (how to replay it; "" for none). */
void tu_vfail(const char *context, const char *hint, const char *fmt, va_list ap);

/* ---- indexes with a checking allocator ------------------------------- */

/* Creates an index of config `c` whose allocator is `a` (initialised here). */
qg_index *tu_open(qg_config c, tu_alloc *a);
/* Validates `idx`, checks its memory stat is what `a` holds, destroys it
 * and checks every block came back and `a` saw no misuse. */
void tu_close(qg_index *idx, tu_alloc *a);

/* The start of a differential case: QG_TEST_SEED or `fallback`, printed so a
 * failure can be replayed, seeds `r`, and creates `*idx` of config `c` and
 * `*oracle`, QG_BRUTE_FORCE of its default config. */
uint64_t tu_begin_pair(uint64_t fallback, tu_rng *r, qg_config c, qg_index **idx, qg_index **oracle);

/* QG_TEST_SCALE from the environment (default 1, clamped to [0.01, 1000]). */
double tu_scale(void);
/* n scaled by QG_TEST_SCALE, at least 1. */
long tu_scaled(long n);

/* ---- runner: the main() every test program shares ------------------- */

struct CMUnitTest;

/* Parses the kind name in argv[1]; prints usage and returns false if bad. */
bool tu_kind_arg(int argc, char **argv, qg_kind *kind);

/* QG_TEST_SEED from the environment (any base strtoull reads: 42, 0x2a),
 * else `fallback`. Print what it returns, so a failure can be replayed. */
uint64_t tu_env_seed(uint64_t fallback);

/* A program run once per kind (ctest's <prefix>_<kind>, the kind parsed by
 * tu_kind_arg): runs `tests` as the cmocka group "<prefix>_<kind name>",
 * only the cases QG_TEST_FILTER's glob picks when it is set. Returns main's
 * status: 1 when a case failed, else 77 when the kind is not built (ctest's
 * SKIP_RETURN_CODE; the cases run anyway, those that need the kind skip
 * themselves), else 0. */
int tu_run_kind_group(const char *prefix, qg_kind kind, const struct CMUnitTest *tests, size_t n);
#define tu_run_kind_tests(prefix, kind, tests) \
    tu_run_kind_group((prefix), (kind), (tests), sizeof(tests) / sizeof *(tests))

/* A kind's own invariants (tests/test_<kind>.c): 77 at once when `kind` is
 * not built, else runs `tests` as the cmocka group `group` (QG_TEST_FILTER
 * applies) and returns 1 when a case failed, else 0. */
int tu_run_own_group(const char *group, qg_kind kind, const struct CMUnitTest *tests, size_t n);
#define tu_run_own_tests(group, kind, tests) \
    tu_run_own_group((group), (kind), (tests), sizeof(tests) / sizeof *(tests))

/* A program run once per kind: its main(). Parses the kind in argv[1] into
 * *kind (usage and 2 when bad), then tu_run_kind_group. */
int tu_kind_main(int argc, char **argv, const char *prefix, qg_kind *kind, const struct CMUnitTest *tests,
                 size_t n);
#define tu_kind_main_tests(argc, argv, prefix, kind, tests) \
    tu_kind_main((argc), (argv), (prefix), (kind), (tests), sizeof(tests) / sizeof *(tests))

/* Cases shared by several kinds' own programs take their kind from cmocka's
 * initial state: TU_KIND_CASE(name, fn, QG_GRID) is a table entry that runs
 * fn on QG_GRID under `name` (names stay what QG_TEST_FILTER picks). */
extern const qg_kind tu_kind_ids[QG_KIND_COUNT];
#define TU_KIND_CASE(name, fn, kind) {(name), (fn), NULL, NULL, (void *)&tu_kind_ids[(kind)]}
/* The kind a TU_KIND_CASE entry carries. */
qg_kind tu_case_kind(void **state);

/* Skips the running cmocka case when `kind` is not built. */
void tu_skip_unless_built(qg_kind kind);

/* ---- bounds are a hint: sequences every kind's file can run -- */

/* A world the elements leave or dwarf: boxes of 2..8 units times `scale`,
 * spread over [-4096, 5120]^2 around [0, 1024]^2 bounds (`outside`) or
 * over [0, 5000]^2. */
typedef struct tu_scene {
    const char *name;
    qg_rect bounds;
    float scale;
    float element_size;
    bool outside;
} tu_scene;

qg_rect tu_scene_box(tu_rng *r, const tu_scene *s);
/* A scene's two indexes: `*k` of `kind` (on allocator `a`, initialised
 * here, unless NULL) and `*b` brute force, both over the scene's bounds;
 * `*r` seeded with `seed` and n scene boxes inserted into both (handles
 * 0..n-1). */
void tu_scene_fill(qg_kind kind, const tu_scene *s, tu_alloc *a, uint64_t seed, int32_t n, tu_rng *r,
                   qg_index **k, qg_index **b);
/* The sorted pairs of `ix` into `out` (the caller frees it), `st` its stats
 * when not NULL; each pair must come as (low, high). */
void tu_scene_pairs(const qg_index *ix, tu_vec *out, qg_query_stats *st);
/* `k` valid, with the pairs of `b` (the brute-force index) at no more than
 * max_tests pair tests an element (+1000: a pile of elements in a few
 * leaves or cells would test ~n^2/2), and the same answers as `b` to 20
 * grown scene boxes shifted by (dx, dy) and to the whole plane. */
void tu_scene_compare(const qg_index *k, const qg_index *b, tu_rng *r, const tu_scene *s, float dx, float dy,
                      int64_t max_tests);

/* Outside-heavy, huge-bounds and tiny-world scenes beside QG_BRUTE_FORCE:
 * 3,000 boxes, 12 frames of small moves, teleports and churn, and once the
 * whole population walking far off (so the kinds that re-fit do); the same
 * pairs and query answers and qg_validate after every frame, and at most
 * 200 pair tests an element (a pile in one leaf or cell would test ~n^2/2). */
void tu_hint_refit_scenes(qg_kind kind);
/* Fault injection on the calls that may allocate after a re-fit: run k fails
 * the k-th allocation; a call that answers QG_ERR_NOMEM leaves the index
 * answering as before, valid, holding exactly what its allocator gave. */
void tu_hint_refit_oom(qg_kind kind);
/* Six worlds (outside the bounds, bounds far off, huge bounds with boxes in a
 * corner or spread, tiny worlds) of boxes with points, big boxes and boxes
 * wider than the scene, beside QG_BRUTE_FORCE; every few inserts and moves
 * also run once with every allocation failing, which must answer
 * QG_ERR_NOMEM and change nothing (or succeed without allocating). */
void tu_hint_failing_worlds(qg_kind kind);

/* The same three as cmocka cases of a TU_KIND_CASE entry. */
void tu_case_refit_scenes(void **state);
void tu_case_refit_oom(void **state);
void tu_case_failing_worlds(void **state);

/* Band and range splits of qg_pairs_parallel on scenes that stress them
 * (one thin row, tall boxes over every band, crowds outside the bounds, a
 * box over everything, batch moves across bands, parallel and serial
 * cleanups): after each step the kind's pairs equal the oracle's, and for
 * 2, 3, 7 and 64 parts the parts' pairs together are that set, each pair in
 * one part only. `idx` is empty, its bounds [0, 1024]^2. */
void tu_parts_scenes(qg_index *idx);

#endif
