// SPDX-License-Identifier: MIT
/* quadgrid-bench's shared parts: the options, the result line every
 * workload prints (table, JSON or CSV), and the helpers the workload files
 * share. One file a workload: agents.c (agents, mixed, drift), static.c
 * (static, sparse), insert.c, scenes.c, check.c, level_run.c, rays.c (rays,
 * knn), soak.c; main.c reads the command line and runs them. */
#ifndef QG_BENCH_H
#define QG_BENCH_H

#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <quadgrid.h>

#include "level.h"
#include "peers/peer.h"
#include "rays.h"
#include "workload.h"

typedef enum workload { W_AGENTS, W_MIXED, W_STATIC, W_SPARSE, W_INSERT, W_CHECK, W_SCENES, W_DRIFT, W_RAYS, W_KNN, W_LEVEL, W_KNOBS, W_ROLLBACK } workload;
typedef enum out_format { OUT_TABLE, OUT_JSON, OUT_CSV } out_format;

typedef struct options {
    workload wl;
    const char *kinds;
    int32_t n;
    int32_t frames;
    int32_t age;          /* agents, mixed: unmeasured frames after the warm-up */
    int32_t queries;
    int32_t repeat;
    double budget_s;      /* scenes: time one implementation may take per scene */
    unsigned scene_mask;  /* scenes: bit k = scene k selected */
    out_format format;
    bool verify;
    bool events;          /* level: qg_pair_events instead of qg_pairs */
    int32_t threads;      /* --threads: workers for quadgrid's parallel calls */
    const qg_jobs *jobs;  /* the pool's job system when threads > 1, else NULL */
    bench_setup tune; /* element sizes and quadgrid tuning; bounds/n set per run */
    const char *knob_scenes; /* knobs: --scene, a comma list */
} options;

/* Frames 1-3 after the build warm caches and let lazy structures settle. */
enum { WARMUP_FRAMES = 3 };
/* `--kind all` leaves out O(n^2) implementations above this many elements. */
enum { QUADRATIC_LIMIT = 20000 };

/* The agents generator draws half-sizes in [1,4]: mean width 5, largest 8. */
#define TYPICAL_WIDTH 5.0f
#define LARGEST_WIDTH 8.0f

typedef enum field_type { F_STR, F_INT, F_MS, F_HEX, F_RATIO } field_type;

typedef struct field {
    const char *key;
    field_type type;
    const char *s;
    int64_t i;
    double d;
    uint64_t u;
} field;

#define FS(k, v) ((field){k, F_STR, v, 0, 0.0, 0})
#define FI(k, v) ((field){k, F_INT, NULL, (int64_t)(v), 0.0, 0})
#define FD(k, v) ((field){k, F_MS, NULL, 0, (v), 0})
#define FH(k, v) ((field){k, F_HEX, NULL, 0, 0.0, (v)})
#define FR(k, v) ((field){k, F_RATIO, NULL, 0, (v), 0})

/* A progress line, only on a terminal and only once a run has taken over a
 * second, redrawn at most ten times a second. */
typedef struct progress {
    bool tty, shown;
    uint64_t start, last;
} progress;

/* Memory of a run: the implementation's own count when it has one, else
 * the growth of the C heap since just before it was created. */
typedef struct mem_probe {
    size_t heap0;
    bool heap_known;
} mem_probe;

/* Collects pairs as (i << 32 | j) for a readable diff after a mismatch. */
typedef struct pair_list {
    uint64_t *v;
    size_t len, cap;
    bool nomem;
} pair_list;

/* The answers of each run, compared across implementations at the end. */
typedef struct answer {
    const char *name;
    uint64_t count, checksum;
} answer;

/* The answers of this run, one an implementation (cross_check in main.c). */
enum { MAX_ANSWERS = 64 };
extern answer answers[MAX_ANSWERS];
extern int answer_count;

enum { MAX_THREADS = 256 };

typedef struct hit_sum {
    int32_t query;
    uint64_t hits, checksum;
} hit_sum;

/* knobs.c: every kind from defaults and bounds-only beside its hand tuning. */
int bench_knobs(const char *kinds, const char *scenes, int32_t n, int frames, bool json);

/* ---- The functions the workload files share ---------------------------- */

/* report.c: output in three formats, notes, progress, medians, memory, answers, threads */
const char *workload_name(workload w);
void emit(const options *o, const field *fs, int count);
void emit_line(out_format format, workload wl, const field *fs, int count);
int cmp_u64(const void *a, const void *b);
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
progress progress_start(void);
void progress_update(progress *p, const char *what, const char *kind, int64_t done,
                            int64_t total);
void progress_end(progress *p);
double median_ms(uint64_t *ns, int32_t count);
mem_probe mem_begin(void);
size_t mem_index_bytes(const mem_probe *m, const bench_peer *p, bench_impl *impl);
const char *bytes_how_name(const bench_peer *p, const mem_probe *m);
int impl_failed(const bench_peer *p, bench_impl *impl, const char *step);
void print_pair_diff(const bench_peer *p, bench_impl *impl, qgw_sweep *ref);
void record_answer(const char *name, uint64_t count, uint64_t checksum);
int32_t threads_of(const options *o, const bench_peer *p);
bool bench_pairs(const options *o, const bench_peer *p, bench_impl *impl, qgw_sum *sum);
void move_agents(const options *o, qgw_agents *a);
bool sum_hit(qg_handle box, void *user);

/* agents.c: agents, mixed and drift */
int run_agents(const options *o, const bench_peer *p);
int run_drift(const options *o, const bench_peer *p);

/* static.c: static and sparse (window queries) */
int run_queries(const options *o, const bench_peer *p);

/* insert.c */
int run_insert(const options *o, const bench_peer *p);
int run_rollback(const options *o, const bench_peer *p);

/* scenes.c: the scene table */
int run_scenes(const options *o, const bench_peer *reference, const bench_peer *impls, int impl_count);

/* check.c */
int run_check(const options *o);

/* level_run.c: the level workload */
int run_level(const options *o, const bench_peer *p);


#endif /* QG_BENCH_H */
