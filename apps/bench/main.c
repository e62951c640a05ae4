/* quadgrid-bench: the standard workloads (agents, mixed, static, rays, knn,
 * level) plus extras (sparse, insert, scenes, drift) for every quadgrid kind
 * that is built and for peer libraries, all in one process on the same
 * boxes. See docs/benchmarks.md. */
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

#include "peers/peer.h"
#include "level.h"
#include "rays.h"
#include "workload.h"

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

typedef enum workload { W_AGENTS, W_MIXED, W_STATIC, W_SPARSE, W_INSERT, W_CHECK, W_SCENES, W_DRIFT, W_RAYS, W_KNN, W_LEVEL, W_KNOBS } workload;
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

int bench_knobs(const char *kinds, const char *scenes, int32_t n, int frames, bool json); /* knobs.c */

/* Frames 1-3 after the build warm caches and let lazy structures settle. */
enum { WARMUP_FRAMES = 3 };
/* `--kind all` leaves out O(n^2) implementations above this many elements. */
enum { QUADRATIC_LIMIT = 20000 };

/* The agents generator draws half-sizes in [1,4]: mean width 5, largest 8. */
#define TYPICAL_WIDTH 5.0f
#define LARGEST_WIDTH 8.0f

static const char *workload_name(workload w) {
    static const char *names[] = {"agents", "mixed", "static", "sparse", "insert", "check", "scenes", "drift", "rays", "knn", "level", "knobs"};
    return names[w];
}

/* ------------------------------------------------------------------------ */
/* The implementations                                                      */

static const qg_kind qg_kinds[QG_KIND_COUNT] = {
    QG_QUADTREE,   QG_LOOSE_QUADTREE, QG_LEVEL_QUADTREE, QG_BUCKET_QUADTREE, QG_GRID,
    QG_MULTI_GRID, QG_LOOSE_GRID,     QG_POINT_GRID,     QG_BRUTE_FORCE,
};

/* A peer runs the workloads its tables have: `vt` all but level, `level`
 * the level workload (Box2D's level is its b2BroadPhase, a peer of its own
 * name; its b2DynamicTree peer has no level). */
static const bench_peer peers[] = {
    {"sweep", &bench_sweep_vtable, NULL, BENCH_BYTES_EXACT, false, &bench_sweep_level_vtable},
#ifdef QG_BENCH_HAVE_CHIPMUNK
    {"chipmunk_bbtree", &bench_chipmunk_bbtree_vtable, NULL, BENCH_BYTES_HEAP_DELTA, false,
     &bench_chipmunk_bbtree_level_vtable},
    {"chipmunk_spacehash", &bench_chipmunk_spacehash_vtable, NULL, BENCH_BYTES_HEAP_DELTA, false,
     &bench_chipmunk_spacehash_level_vtable},
#endif
#ifdef QG_BENCH_HAVE_BOX2D
    {"box2d_dynamic_tree", &bench_box2d_vtable, NULL, BENCH_BYTES_HEAP_DELTA, false, NULL},
    {"box2d_broadphase", NULL, NULL, BENCH_BYTES_HEAP_DELTA, false, &bench_box2d_level_vtable},
#endif
#ifdef QG_BENCH_HAVE_BOOST
    {"boost_rtree", &bench_boost_rtree_vtable, NULL, BENCH_BYTES_HEAP_DELTA, false,
     &bench_boost_rtree_level_vtable},
#endif
};
enum { PEER_COUNT = sizeof peers / sizeof peers[0] };

/* Peers that were asked for but are not built, so the message can say why. */
static const char *const missing_peers[] = {
#ifndef QG_BENCH_HAVE_CHIPMUNK
    "chipmunk_bbtree", "chipmunk_spacehash",
#endif
#ifndef QG_BENCH_HAVE_BOX2D
    "box2d_dynamic_tree", "box2d_broadphase",
#endif
#ifndef QG_BENCH_HAVE_BOOST
    "boost_rtree",
#endif
    NULL,
};

static bench_peer quadgrid_peer(qg_kind k) {
    bench_peer p = {qg_kind_name(k), &bench_quadgrid_vtable, &qg_kinds[k], BENCH_BYTES_EXACT,
                    k == QG_BRUTE_FORCE, &bench_quadgrid_level_vtable};
    return p;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                   */

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

static int column_width(const field *f) {
    int w = (int)strlen(f->key);
    int min = f->type == F_STR ? 18 : f->type == F_HEX ? 16 : 9;
    if (strcmp(f->key, "workload") == 0 || strcmp(f->key, "index_bytes_how") == 0 ||
        strcmp(f->key, "scene") == 0)
        min = 10;
    if (f->type == F_RATIO || strcmp(f->key, "status") == 0) min = 7;
    return w > min ? w : min;
}

static void format_value(char *buf, size_t size, const field *f) {
    switch (f->type) {
    case F_STR: snprintf(buf, size, "%s", f->s); break;
    case F_INT: snprintf(buf, size, "%" PRId64, f->i); break;
    case F_MS: snprintf(buf, size, "%.3f", f->d); break;
    case F_HEX: snprintf(buf, size, "%016" PRIx64, f->u); break;
    case F_RATIO: snprintf(buf, size, "%.2f", f->d); break;
    }
}

/* One result line. The table and CSV print a header before the first line of
 * each workload; JSON lines stand alone. */
static void emit(const options *o, const field *fs, int count) {
    static int header_for = -1;
    char buf[64];
    bool header = header_for != (int)o->wl;
    header_for = (int)o->wl;
    if (o->format == OUT_JSON) {
        putchar('{');
        for (int i = 0; i < count; i++) {
            format_value(buf, sizeof buf, &fs[i]);
            bool quoted = fs[i].type == F_STR || fs[i].type == F_HEX;
            printf("%s\"%s\":%s%s%s", i ? "," : "", fs[i].key, quoted ? "\"" : "", buf,
                   quoted ? "\"" : "");
        }
        puts("}");
    } else if (o->format == OUT_CSV) {
        if (header) {
            for (int i = 0; i < count; i++) printf("%s%s", i ? "," : "", fs[i].key);
            putchar('\n');
        }
        for (int i = 0; i < count; i++) {
            format_value(buf, sizeof buf, &fs[i]);
            printf("%s%s", i ? "," : "", buf);
        }
        putchar('\n');
    } else {
        if (header) {
            putchar('\n');
            for (int i = 0; i < count; i++) {
                int w = column_width(&fs[i]);
                printf(fs[i].type == F_STR ? "%-*s " : "%*s ", w, fs[i].key);
            }
            putchar('\n');
        }
        for (int i = 0; i < count; i++) {
            format_value(buf, sizeof buf, &fs[i]);
            printf(fs[i].type == F_STR ? "%-*s " : "%*s ", column_width(&fs[i]), buf);
        }
        putchar('\n');
    }
    fflush(stdout);
}

/* Notes go to stderr so stdout stays machine-readable in --json/--csv mode. */
static void note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("quadgrid-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* A progress line, only on a terminal and only once a run has taken over a
 * second, redrawn at most ten times a second. */
typedef struct progress {
    bool tty, shown;
    uint64_t start, last;
} progress;

static progress progress_start(void) {
    progress p = {isatty(STDERR_FILENO) == 1, false, qgw_now_ns(), 0};
    return p;
}

static void progress_update(progress *p, const char *what, const char *kind, int64_t done,
                            int64_t total) {
    if (!p->tty) return;
    uint64_t now = qgw_now_ns();
    if (now - p->start < UINT64_C(1000000000) || now - p->last < UINT64_C(100000000)) return;
    p->last = now;
    p->shown = true;
    fprintf(stderr, "\r%s: %s %" PRId64 "/%" PRId64 "   ", kind, what, done, total);
    fflush(stderr);
}

static void progress_end(progress *p) {
    if (p->shown) fputs("\r\033[K", stderr);
    p->shown = false;
}

/* ------------------------------------------------------------------------ */
/* Measurement helpers                                                      */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_ms(uint64_t *ns, int32_t count) {
    if (count <= 0) return 0.0;
    qsort(ns, (size_t)count, sizeof *ns, cmp_u64);
    double m = count % 2 ? (double)ns[count / 2]
                         : ((double)ns[count / 2 - 1] + (double)ns[count / 2]) / 2.0;
    return m / 1e6;
}

/* Memory of a run: the implementation's own count when it has one, else
 * the growth of the C heap since just before it was created. */
typedef struct mem_probe {
    size_t heap0;
    bool heap_known;
} mem_probe;

static mem_probe mem_begin(void) {
    mem_probe m;
    qgw_heap_trim();
    qgw_peak_rss_reset();
    m.heap0 = qgw_heap_in_use(&m.heap_known);
    return m;
}

static size_t mem_index_bytes(const mem_probe *m, const bench_peer *p, bench_impl *impl) {
    if (p->bytes_how == BENCH_BYTES_EXACT) return p->vt->bytes(impl);
    bool known;
    size_t now = qgw_heap_in_use(&known);
    return known && m->heap_known && now > m->heap0 ? now - m->heap0 : 0;
}

static const char *bytes_how_name(const bench_peer *p, const mem_probe *m) {
    if (p->bytes_how == BENCH_BYTES_EXACT) return "exact";
    return m->heap_known ? "heap_delta" : "unknown";
}

static int impl_failed(const bench_peer *p, bench_impl *impl, const char *step) {
    const char *e = impl ? p->vt->error(impl) : NULL;
    note("%s: %s failed%s%s", p->name, step, e ? ": " : "", e ? e : "");
    return 1;
}

/* Collects pairs as (i << 32 | j) for a readable diff after a mismatch. */
typedef struct pair_list {
    uint64_t *v;
    size_t len, cap;
    bool nomem;
} pair_list;

static bool collect_pair(qg_handle a, qg_handle b, void *user) {
    pair_list *l = user;
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        uint64_t *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->nomem = true;
            return false;
        }
        l->v = v, l->cap = cap;
    }
    l->v[l->len++] = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    return true;
}

static void print_pair_diff(const bench_peer *p, bench_impl *impl, qgw_sweep *ref) {
    pair_list got = {0}, want = {0};
    p->vt->pairs(impl, collect_pair, &got);
    qgw_sweep_pairs(ref, collect_pair, &want);
    if (got.nomem || want.nomem) {
        note("  (out of memory listing the differing pairs)");
    } else {
        qsort(got.v, got.len, sizeof *got.v, cmp_u64);
        qsort(want.v, want.len, sizeof *want.v, cmp_u64);
        size_t i = 0, j = 0;
        int shown = 0;
        while ((i < got.len || j < want.len) && shown < 10) {
            if (j == want.len || (i < got.len && got.v[i] < want.v[j])) {
                note("  extra pair   (%u, %u)", (unsigned)(got.v[i] >> 32), (unsigned)got.v[i]);
                i++, shown++;
            } else if (i == got.len || want.v[j] < got.v[i]) {
                note("  missing pair (%u, %u)", (unsigned)(want.v[j] >> 32), (unsigned)want.v[j]);
                j++, shown++;
            } else {
                i++, j++;
            }
        }
    }
    free(got.v);
    free(want.v);
}

/* The answers of each run, compared across implementations at the end. */
typedef struct answer {
    const char *name;
    uint64_t count, checksum;
} answer;

static answer answers[QG_KIND_COUNT + PEER_COUNT];
static int answer_count;

static void record_answer(const char *name, uint64_t count, uint64_t checksum) {
    if (answer_count < (int)(sizeof answers / sizeof answers[0]))
        answers[answer_count++] = (answer){name, count, checksum};
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                  */

/* The threads an implementation actually uses: --threads for quadgrid, one
 * for the peers, which have no parallel calls. */
static int32_t threads_of(const options *o, const bench_peer *p) {
    return o->jobs && p->vt->pairs_parts ? o->threads : 1;
}

enum { MAX_THREADS = 256 };

/* Step 3 of a frame: every pair into *sum. With --threads, each part of
 * qg_pairs_parallel sums its own pairs; the sums add up (the checksum is a
 * sum too), so the answer is the one-thread answer. */
static bool bench_pairs(const options *o, const bench_peer *p, bench_impl *impl, qgw_sum *sum) {
    *sum = (qgw_sum){0, 0};
    if (threads_of(o, p) == 1) return p->vt->pairs(impl, qgw_sum_pair, sum);
    qgw_sum parts[MAX_THREADS];
    void *users[MAX_THREADS];
    for (int32_t i = 0; i < o->threads; i++) {
        parts[i] = (qgw_sum){0, 0};
        users[i] = &parts[i];
    }
    if (!p->vt->pairs_parts(impl, qgw_sum_pair, users)) return false;
    for (int32_t i = 0; i < o->threads; i++) {
        sum->count += parts[i].count;
        sum->checksum += parts[i].checksum;
    }
    return true;
}

static void move_agents_task(int32_t begin, int32_t end, int32_t worker, void *context) {
    (void)worker;
    qgw_agents_move_range(context, begin, end);
}

/* Step 1 of a frame: the workload's own motion, on the same workers. */
static void move_agents(const options *o, qgw_agents *a) {
    if (o->jobs)
        o->jobs->run(move_agents_task, a->n, a, o->jobs->user);
    else
        qgw_agents_move(a);
}

/* ------------------------------------------------------------------------ */
/* agents                                                                   */

/* `mixed` is `agents` with 1% of the agents 16 times larger: same frames,
 * same fields, same check. */
static int run_agents(const options *o, const bench_peer *p) {
    qgw_agents a;
    bool made = o->wl == W_MIXED ? qgw_agents_init_mixed(&a, o->n) : qgw_agents_init(&a, o->n);
    if (!made) return note("out of memory for %d agents", o->n), 1;
    qgw_sweep ref = {0};
    if (o->verify && !qgw_sweep_sort(&ref, a.boxes, a.n)) {
        qgw_agents_free(&a);
        return note("out of memory for the reference"), 1;
    }
    /* Aged figures: `--age F` frames run unmeasured after the warm-up, so
     * the medians are those of a layout that has aged (a long-running
     * program's), not of a fresh build. */
    const int32_t skip = WARMUP_FRAMES + o->age;
    const int32_t total_frames = o->frames + skip;
    uint64_t *upd = calloc((size_t)o->frames + 1, sizeof *upd);
    uint64_t *prs = calloc((size_t)o->frames + 1, sizeof *prs);
    uint64_t *tot = calloc((size_t)o->frames + 1, sizeof *tot);
    int rc = 0;
    bench_impl *impl = NULL;
    if (!upd || !prs || !tot) {
        rc = 1;
        note("out of memory");
        goto out;
    }

    mem_probe mem = mem_begin();
    bench_setup setup = o->tune;
    setup.bounds = qgw_agents_bounds(&a);
    setup.n = a.n;
    setup.jobs = o->jobs;
    if (!p->vt->create(&impl, &setup, p->arg)) {
        rc = impl_failed(p, impl, "create");
        goto out;
    }
    if (!p->vt->build(impl, a.boxes, a.n, false)) {
        rc = impl_failed(p, impl, "build");
        goto out;
    }

    progress prog = progress_start();
    qgw_sum sum = {0, 0};
    for (int32_t frame = 1; frame <= total_frames; frame++) {
        uint64_t t0 = qgw_now_ns();
        move_agents(o, &a);
        if (!p->vt->update(impl, a.boxes, a.n)) {
            rc = impl_failed(p, impl, "update");
            goto out;
        }
        uint64_t t1 = qgw_now_ns();
        if (!bench_pairs(o, p, impl, &sum)) {
            rc = impl_failed(p, impl, "pairs");
            goto out;
        }
        uint64_t t2 = qgw_now_ns();
        if (frame > skip) {
            int32_t m = frame - skip - 1;
            upd[m] = t1 - t0;
            prs[m] = t2 - t1;
            tot[m] = t2 - t0;
        }
        if (o->verify) {
            qgw_sum want;
            if (!qgw_reference_sum(&ref, a.boxes, a.n, &want)) {
                rc = 1;
                note("out of memory for the reference");
                goto out;
            }
            if (want.count != sum.count || want.checksum != sum.checksum) {
                progress_end(&prog);
                note("MISMATCH: %s, n=%d, frame %d: pairs %" PRIu64 " checksum %016" PRIx64
                     ", reference pairs %" PRIu64 " checksum %016" PRIx64,
                     p->name, a.n, frame, sum.count, sum.checksum, want.count, want.checksum);
                print_pair_diff(p, impl, &ref);
                rc = 2;
                goto out;
            }
        }
        progress_update(&prog, "frame", p->name, frame, total_frames);
    }
    progress_end(&prog);

    size_t index_bytes = mem_index_bytes(&mem, p, impl);
    size_t rss = qgw_peak_rss_bytes();
    field fs[] = {
        FS("workload", workload_name(o->wl)),
        FS("kind", p->name),
        FI("n", a.n),
        FI("frames", o->frames),
        FI("age", o->age),
        FI("threads", threads_of(o, p)),
        FD("update_ms", median_ms(upd, o->frames)),
        FD("pairs_ms", median_ms(prs, o->frames)),
        FD("total_ms", median_ms(tot, o->frames)),
        FI("pairs", sum.count),
        FH("checksum", sum.checksum),
        FI("index_bytes", index_bytes),
        FS("index_bytes_how", bytes_how_name(p, &mem)),
        FI("peak_rss_bytes", rss),
    };
    emit(o, fs, (int)(sizeof fs / sizeof fs[0]));
    record_answer(p->name, sum.count, sum.checksum);

out:
    if (impl) p->vt->destroy(impl);
    free(upd), free(prs), free(tot);
    qgw_sweep_free(&ref);
    qgw_agents_free(&a);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* static and sparse: window queries                                        */

typedef struct hit_sum {
    int32_t query;
    uint64_t hits, checksum;
} hit_sum;

static bool sum_hit(qg_handle box, void *user) {
    hit_sum *h = user;
    h->hits++;
    h->checksum += qgw_pair_term(h->query, box);
    return true;
}

/* --threads: the queries split into one share a worker (qg_query is const,
 * so shares run at once on one index), each summing its own hits. */
typedef struct query_task {
    const bench_peer *p;
    bench_impl *impl;
    const qg_rect *queries;
    int32_t count, parts;
    bool sparse;
    hit_sum sums[MAX_THREADS];
    bool failed[MAX_THREADS];
} query_task;

static void query_task_run(int32_t begin, int32_t end, int32_t worker, void *context) {
    (void)worker;
    query_task *t = context;
    for (int32_t part = begin; part < end; part++) {
        const int32_t q0 = (int32_t)((int64_t)t->count * part / t->parts);
        const int32_t q1 = (int32_t)((int64_t)t->count * (part + 1) / t->parts);
        hit_sum total = {0, 0, 0};
        for (int32_t q = q0; q < q1 && !t->failed[part]; q++) {
            hit_sum h = {t->sparse ? 0 : q, 0, 0};
            t->failed[part] = !t->p->vt->query(t->impl, t->queries[q], sum_hit, &h);
            if (t->sparse) /* one query, repeated: its answer, not a sum */
                total = h;
            else
                total.hits += h.hits, total.checksum += h.checksum;
        }
        t->sums[part] = total;
    }
}

/* `sparse` repeats one query (the lower-left quarter of a 95% empty world);
 * `static` runs the standard workload's window queries. */
static int run_queries(const options *o, const bench_peer *p) {
    const bool sparse = o->wl == W_SPARSE;
    qgw_agents a;
    bool ok = sparse ? qgw_sparse_init(&a, o->n) : qgw_agents_init(&a, o->n);
    if (!ok) return note("out of memory for %d boxes", o->n), 1;
    qg_rect *queries = malloc((size_t)(o->queries > 0 ? o->queries : 1) * sizeof *queries);
    if (!queries) {
        qgw_agents_free(&a);
        return note("out of memory for the queries"), 1;
    }
    if (sparse) {
        for (int32_t q = 0; q < o->queries; q++) queries[q] = qgw_sparse_query(&a);
    } else {
        qgw_static_queries(&a, o->queries, queries);
    }
    qgw_sweep ref = {0};
    int rc = 0;
    bench_impl *impl = NULL;
    if (o->verify && !qgw_sweep_sort(&ref, a.boxes, a.n)) {
        rc = 1;
        note("out of memory for the reference");
        goto out;
    }

    mem_probe mem = mem_begin();
    bench_setup setup = o->tune;
    setup.bounds = qgw_agents_bounds(&a);
    setup.n = a.n;
    setup.jobs = o->jobs;
    uint64_t t0 = qgw_now_ns();
    if (!p->vt->create(&impl, &setup, p->arg)) {
        rc = impl_failed(p, impl, "create");
        goto out;
    }
    if (!p->vt->build(impl, a.boxes, a.n, true)) {
        rc = impl_failed(p, impl, "build");
        goto out;
    }
    uint64_t t1 = qgw_now_ns();

    progress prog = progress_start();
    hit_sum total = {0, 0, 0};
    uint64_t query_ns = 0;
    int64_t cells_visited = 0, boxes_tested = 0; /* summed over queries */
    const int32_t threads = threads_of(o, p);
    if (threads > 1) {
        /* The wall time of all the queries on every worker, per query. */
        query_task *t = calloc(1, sizeof *t);
        if (!t) {
            rc = 1;
            note("out of memory");
            goto out;
        }
        *t = (query_task){.p = p, .impl = impl, .queries = queries, .count = o->queries, .parts = threads,
                          .sparse = sparse};
        uint64_t q0 = qgw_now_ns();
        o->jobs->run(query_task_run, threads, t, o->jobs->user);
        query_ns = qgw_now_ns() - q0;
        bool failed = false;
        for (int32_t i = 0; i < threads; i++) {
            failed |= t->failed[i];
            if (sparse)
                total = t->sums[i].hits || t->sums[i].checksum ? t->sums[i] : total;
            else
                total.hits += t->sums[i].hits, total.checksum += t->sums[i].checksum;
        }
        free(t);
        if (failed) {
            rc = impl_failed(p, impl, "query");
            goto out;
        }
        if (o->verify) {
            hit_sum want = {0, 0, 0};
            for (int32_t q = 0; q < o->queries; q++) {
                hit_sum w = {sparse ? 0 : q, 0, 0};
                qgw_sweep_query(&ref, queries[q], sum_hit, &w);
                want.hits += w.hits, want.checksum += w.checksum;
                if (sparse) break;
            }
            if (want.hits != total.hits || want.checksum != total.checksum) {
                note("MISMATCH: %s, %s n=%d, %d threads: hits %" PRIu64 " checksum %016" PRIx64
                     ", reference hits %" PRIu64 " checksum %016" PRIx64,
                     p->name, workload_name(o->wl), a.n, threads, total.hits, total.checksum, want.hits,
                     want.checksum);
                rc = 2;
                goto out;
            }
        }
    }
    for (int32_t q = 0; q < o->queries && threads == 1; q++) {
        /* Every sparse query is the same window, numbered 0 for the checksum,
         * so hits and checksum describe one query. */
        hit_sum h = {sparse ? 0 : q, 0, 0};
        uint64_t q0 = qgw_now_ns();
        qg_query_stats qs = {0, 0};
        if (!(p->vt->query_stats ? p->vt->query_stats(impl, queries[q], sum_hit, &h, &qs)
                                 : p->vt->query(impl, queries[q], sum_hit, &h))) {
            rc = impl_failed(p, impl, "query");
            goto out;
        }
        query_ns += qgw_now_ns() - q0;
        cells_visited += qs.nodes_visited;
        boxes_tested += qs.elements_tested;
        if (o->verify) {
            hit_sum want = {h.query, 0, 0};
            qgw_sweep_query(&ref, queries[q], sum_hit, &want);
            if (want.hits != h.hits || want.checksum != h.checksum) {
                progress_end(&prog);
                note("MISMATCH: %s, %s n=%d, query %d: hits %" PRIu64 " checksum %016" PRIx64
                     ", reference hits %" PRIu64 " checksum %016" PRIx64,
                     p->name, workload_name(o->wl), a.n, q, h.hits, h.checksum, want.hits,
                     want.checksum);
                rc = 2;
                goto out;
            }
        }
        if (sparse) {
            total.hits = h.hits, total.checksum = h.checksum;
        } else {
            total.hits += h.hits, total.checksum += h.checksum;
        }
        if ((q & 1023) == 0) progress_update(&prog, "query", p->name, q, o->queries);
    }
    progress_end(&prog);

    size_t index_bytes = mem_index_bytes(&mem, p, impl);
    size_t rss = qgw_peak_rss_bytes();
    field fs[] = {
        FS("workload", workload_name(o->wl)),
        FS("kind", p->name),
        FI("n", a.n),
        FI("queries", o->queries),
        FI("threads", threads),
        FD("build_ms", (double)(t1 - t0) / 1e6),
        FI("query_ns", o->queries > 0 ? (query_ns + (uint64_t)o->queries / 2) / (uint64_t)o->queries : 0),
        FI("hits", total.hits),
        FH("checksum", total.checksum),
        FI("index_bytes", index_bytes),
        FS("index_bytes_how", bytes_how_name(p, &mem)),
        FI("peak_rss_bytes", rss),
        /* Per query, from qg_query_with_stats; -1 for peers, which cannot say. */
        FI("cells_visited", p->vt->query_stats && threads == 1 && o->queries > 0 ? cells_visited / o->queries : -1),
        FI("boxes_tested", p->vt->query_stats && threads == 1 && o->queries > 0 ? boxes_tested / o->queries : -1),
    };
    emit(o, fs, (int)(sizeof fs / sizeof fs[0]));
    record_answer(p->name, total.hits, total.checksum);

out:
    if (impl) p->vt->destroy(impl);
    qgw_sweep_free(&ref);
    free(queries);
    qgw_agents_free(&a);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* insert: building an index from empty, one box at a time                  */

static int run_insert(const options *o, const bench_peer *p) {
    qgw_agents a;
    if (!qgw_agents_init(&a, o->n)) return note("out of memory for %d boxes", o->n), 1;
    uint64_t *ns = calloc((size_t)o->repeat, sizeof *ns);
    if (!ns) {
        qgw_agents_free(&a);
        return note("out of memory"), 1;
    }
    int rc = 0;
    size_t index_bytes = 0;
    const char *how = "exact";
    bench_setup setup = o->tune;
    setup.bounds = qgw_agents_bounds(&a);
    setup.n = a.n;
    setup.jobs = o->jobs;
    for (int32_t r = 0; r < o->repeat && rc == 0; r++) {
        mem_probe mem = mem_begin();
        bench_impl *impl = NULL;
        if (!p->vt->create(&impl, &setup, p->arg)) {
            rc = impl_failed(p, impl, "create");
        } else {
            /* Creation is left out: the figure is the cost of the inserts. */
            uint64_t t0 = qgw_now_ns();
            if (!p->vt->build(impl, a.boxes, a.n, false)) rc = impl_failed(p, impl, "build");
            ns[r] = qgw_now_ns() - t0;
            index_bytes = mem_index_bytes(&mem, p, impl);
            how = bytes_how_name(p, &mem);
        }
        if (impl) p->vt->destroy(impl);
    }
    if (rc == 0) {
        size_t rss = qgw_peak_rss_bytes();
        double build_ms = median_ms(ns, o->repeat);
        field fs[] = {
            FS("workload", "insert"),
            FS("kind", p->name),
            FI("n", a.n),
            FI("repeat", o->repeat),
            FI("threads", 1), /* inserts are one thread's calls */
            FD("build_ms", build_ms),
            FD("insert_ns", a.n > 0 ? build_ms * 1e6 / a.n : 0.0),
            FI("index_bytes", index_bytes),
            FS("index_bytes_how", how),
            FI("peak_rss_bytes", rss),
        };
        emit(o, fs, (int)(sizeof fs / sizeof fs[0]));
    }
    free(ns);
    qgw_agents_free(&a);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* scenes: the scene table of docs/scenes.md                                */

/* The bar of issue 11: a frame in at most this many sort-and-sweep frames. */
#define SCENE_BAR 3.0
/* Smallest n the bar is judged at (see the verdict in run_scenes). */
#define SCENE_BAR_MIN_N 10000

/* What one implementation did in one scene. */
typedef struct scene_result {
    bool failed, cut;
    int32_t frames_done; /* frames run after the build, warm-up included */
    int32_t measured;    /* frames the medians are over */
    double build_ms, update_ms, pairs_ms, frame_ms;
    size_t bytes;
    const char *bytes_how;
    qgw_sum last; /* answers of the last frame run */
} scene_result;

/* The queries --verify checks every frame, in the agents' world (mapped
 * into the scene's coordinates like the boxes): the whole plane, unbounded;
 * half planes; an area far outside the world; and 16x16 windows around a
 * few agents. */
enum { SCENE_QUERIES = 8 };

static void scene_queries(const qgw_scene *s, int32_t frame, qg_rect out[SCENE_QUERIES]) {
    const float inf = (float)INFINITY, W = s->agents.world;
    out[0] = (qg_rect){-inf, -inf, inf, inf};
    out[1] = qgw_scene_map(s, (qg_rect){-inf, -inf, W / 3.0f, inf});
    out[2] = qgw_scene_map(s, (qg_rect){W * 0.5f, -inf, inf, W * 0.25f});
    out[3] = qgw_scene_map(s, (qg_rect){W * 3.0f, W * -4.0f, W * 5.0f, W * -2.0f});
    for (int q = 4; q < SCENE_QUERIES; q++) {
        int32_t i = s->agents.n > 0
                        ? (int32_t)(qgw_mix((uint64_t)frame * SCENE_QUERIES + (uint64_t)q) %
                                    (uint64_t)s->agents.n)
                        : 0;
        float x = s->agents.n > 0 ? s->agents.x[i] : 0.0f, y = s->agents.n > 0 ? s->agents.y[i] : 0.0f;
        out[q] = qgw_scene_map(s, (qg_rect){x - 8.0f, y - 8.0f, x + 8.0f, y + 8.0f});
    }
}

/* Every query of the frame against a plain loop over the boxes. Returns 0 or
 * 2 (a wrong answer), 1 when the implementation failed. */
static int scene_check_queries(const bench_peer *p, bench_impl *impl, const qgw_scene *s,
                               int32_t frame) {
    qg_rect areas[SCENE_QUERIES];
    scene_queries(s, frame, areas);
    for (int q = 0; q < SCENE_QUERIES; q++) {
        hit_sum got = {q, 0, 0}, want = {q, 0, 0};
        if (!p->vt->query(impl, areas[q], sum_hit, &got)) return impl_failed(p, impl, "query");
        for (int32_t i = 0; i < s->agents.n; i++)
            if (qgw_overlap(&areas[q], &s->boxes[i])) sum_hit(i, &want);
        if (got.hits != want.hits || got.checksum != want.checksum) {
            note("MISMATCH: %s, scene %s n=%d, frame %d, query %d [%g %g %g %g]: hits %" PRIu64
                 " checksum %016" PRIx64 ", plain loop hits %" PRIu64 " checksum %016" PRIx64,
                 p->name, qgw_scene_name(s->id), s->agents.n, frame, q, (double)areas[q].min_x,
                 (double)areas[q].min_y, (double)areas[q].max_x, (double)areas[q].max_y, got.hits,
                 got.checksum, want.hits, want.checksum);
            return 2;
        }
    }
    return 0;
}

/* Runs one implementation on one scene: build, then every frame. `ref` holds
 * the sort-and-sweep's answer of every frame (NULL when this run is the
 * sort-and-sweep, which then fills `mine`). Returns 0, 1 (the implementation
 * failed or memory ran out) or 2 (a wrong answer). */
static int run_scene_impl(const options *o, const bench_peer *p, qgw_scene_id id,
                          const qgw_sum *ref, qgw_sum *mine, scene_result *r) {
    memset(r, 0, sizeof *r);
    r->bytes_how = "exact";
    qgw_scene s;
    if (!qgw_scene_init(&s, id, o->n)) {
        r->failed = true;
        return note("out of memory for scene %s, n=%d", qgw_scene_name(id), o->n), 1;
    }
    const int32_t total_frames = o->frames + WARMUP_FRAMES + o->age;
    uint64_t *upd = calloc((size_t)total_frames, sizeof *upd);
    uint64_t *prs = calloc((size_t)total_frames, sizeof *prs);
    uint64_t *tot = calloc((size_t)total_frames, sizeof *tot);
    bench_impl *impl = NULL;
    qgw_sweep diff = {0};
    int rc = 0;
    if (!upd || !prs || !tot) {
        rc = 1;
        note("out of memory");
        goto out;
    }

    mem_probe mem = mem_begin();
    bench_setup setup = {0};
    setup.bounds = s.bounds;
    setup.n = s.agents.n;
    setup.element_size = s.element_size;
    setup.max_element_size = s.max_element_size;
    setup.config_mode = o->tune.config_mode;
    setup.jobs = o->jobs;
    const uint64_t start = qgw_now_ns();
    const uint64_t budget_ns = (uint64_t)(o->budget_s * 1e9);
    if (!p->vt->create(&impl, &setup, p->arg)) {
        rc = impl_failed(p, impl, "create");
        goto out;
    }
    uint64_t t0 = qgw_now_ns();
    if (!p->vt->build(impl, s.boxes, s.agents.n, false)) {
        rc = impl_failed(p, impl, "build");
        goto out;
    }
    r->build_ms = (double)(qgw_now_ns() - t0) / 1e6;

    progress prog = progress_start();
    for (int32_t frame = 1; frame <= total_frames; frame++) {
        /* Stop when the next frame, as long as the last one, would end past
         * the budget (the first frame always runs). */
        if (frame > 1 && qgw_now_ns() - start + tot[frame - 2] > budget_ns) {
            r->cut = true;
            break;
        }
        t0 = qgw_now_ns();
        qgw_scene_move(&s);
        if (!p->vt->update(impl, s.boxes, s.agents.n)) {
            rc = impl_failed(p, impl, "update");
            goto out;
        }
        uint64_t t1 = qgw_now_ns();
        qgw_sum sum = {0, 0};
        if (!bench_pairs(o, p, impl, &sum)) {
            rc = impl_failed(p, impl, "pairs");
            goto out;
        }
        uint64_t t2 = qgw_now_ns();
        upd[frame - 1] = t1 - t0;
        prs[frame - 1] = t2 - t1;
        tot[frame - 1] = t2 - t0;
        r->frames_done = frame;
        r->last = sum;
        if (!ref) {
            mine[frame - 1] = sum;
        } else if (ref[frame - 1].count != sum.count || ref[frame - 1].checksum != sum.checksum) {
            progress_end(&prog);
            note("MISMATCH: %s, scene %s n=%d, frame %d: pairs %" PRIu64 " checksum %016" PRIx64
                 ", sort-and-sweep pairs %" PRIu64 " checksum %016" PRIx64,
                 p->name, qgw_scene_name(id), s.agents.n, frame, sum.count, sum.checksum,
                 ref[frame - 1].count, ref[frame - 1].checksum);
            if (qgw_sweep_sort(&diff, s.boxes, s.agents.n)) print_pair_diff(p, impl, &diff);
            rc = 2;
            goto out;
        }
        if (o->verify && p->vt->query_stats) {
            /* quadgrid kinds only: the peers' libraries are not asked
             * unbounded or far-away areas. */
            rc = scene_check_queries(p, impl, &s, frame);
            if (rc) goto out;
        }
        progress_update(&prog, qgw_scene_name(id), p->name, frame, total_frames);
    }
    progress_end(&prog);

    /* The medians are over the frames after the warm-up and --age; a run
     * cut short before it got there reports its last frames. */
    int32_t from = WARMUP_FRAMES + o->age;
    if (r->frames_done <= from) from = r->frames_done > o->frames ? r->frames_done - o->frames : 0;
    r->measured = r->frames_done - from;
    r->update_ms = median_ms(upd + from, r->measured);
    r->pairs_ms = median_ms(prs + from, r->measured);
    r->frame_ms = median_ms(tot + from, r->measured);
    r->bytes = mem_index_bytes(&mem, p, impl);
    r->bytes_how = bytes_how_name(p, &mem);

out:
    if (rc) r->failed = true;
    if (impl) p->vt->destroy(impl);
    free(upd), free(prs), free(tot);
    qgw_sweep_free(&diff);
    qgw_scene_free(&s);
    return rc;
}

static void emit_scene(const options *o, qgw_scene_id id, const bench_peer *p,
                       const scene_result *r, double ref_frame_ms) {
    char status[32];
    if (r->failed) snprintf(status, sizeof status, "FAILED");
    else if (r->cut) snprintf(status, sizeof status, "cut@%d", (int)r->frames_done);
    else snprintf(status, sizeof status, "ok");
    double ratio = ref_frame_ms > 0.0 ? r->frame_ms / ref_frame_ms : 0.0;
    field fs[] = {
        FS("workload", "scenes"),
        FS("scene", qgw_scene_name(id)),
        FS("kind", p->name),
        FI("n", o->n),
        FI("frames", r->measured),
        FI("threads", threads_of(o, p)),
        FI("age", o->age),
        FD("build_ms", r->build_ms),
        FD("update_ms", r->update_ms),
        FD("pairs_ms", r->pairs_ms),
        FD("frame_ms", r->frame_ms),
        FR("ratio", ratio),
        FI("index_bytes", r->bytes),
        FI("pairs", r->last.count),
        FH("checksum", r->last.checksum),
        FS("status", status),
    };
    emit(o, fs, (int)(sizeof fs / sizeof fs[0]));
}

/* One implementation's worst scene, for the lines after the table. */
typedef struct scene_worst {
    bench_peer peer;
    double ratio;
    qgw_scene_id scene;
    int scenes_run, cut, failed;
} scene_worst;

static bool in_bar(const bench_peer *p) {
    /* The bar is for the quadgrid indexes: not the textbook baseline, not
     * the brute-force oracle, not the peer libraries. */
    qg_kind k;
    return p->vt == &bench_quadgrid_vtable && qg_kind_from_name(p->name, &k) == QG_OK &&
           k != QG_BUCKET_QUADTREE && k != QG_BRUTE_FORCE;
}

static int run_scenes(const options *o, const bench_peer *impls, int impl_count) {
    const int32_t total_frames = o->frames + WARMUP_FRAMES + o->age;
    qgw_sum *ref = calloc((size_t)total_frames, sizeof *ref);
    scene_worst *worst = calloc((size_t)impl_count, sizeof *worst);
    if (!ref || !worst) {
        free(ref), free(worst);
        return note("out of memory"), 1;
    }
    const bench_peer sweep = peers[0];
    int rc = 0;
    for (int k = 0; k < impl_count; k++) worst[k].peer = impls[k];
    for (int id = 0; id < QGW_SCENE_COUNT; id++) {
        if (!(o->scene_mask & (1u << id))) continue;
        scene_result sr;
        int r = run_scene_impl(o, &sweep, (qgw_scene_id)id, NULL, ref, &sr);
        emit_scene(o, (qgw_scene_id)id, &sweep, &sr, sr.frame_ms);
        if (r) {
            note("scene %s: the sort-and-sweep reference failed; skipping the scene",
                 qgw_scene_name((qgw_scene_id)id));
            if (r > rc) rc = r;
            continue;
        }
        for (int k = 0; k < impl_count; k++) {
            scene_result kr;
            r = run_scene_impl(o, &impls[k], (qgw_scene_id)id, ref, NULL, &kr);
            if (r > rc) rc = r;
            emit_scene(o, (qgw_scene_id)id, &impls[k], &kr, sr.frame_ms);
            if (kr.cut)
                note("%s, scene %s: cut short after %d frames (budget %.0f s)", impls[k].name,
                     qgw_scene_name((qgw_scene_id)id), (int)kr.frames_done, o->budget_s);
            scene_worst *w = &worst[k];
            double ratio = sr.frame_ms > 0.0 ? kr.frame_ms / sr.frame_ms : 0.0;
            w->scenes_run++;
            if (kr.cut) w->cut++;
            if (kr.failed) w->failed++;
            if (w->scenes_run == 1 || ratio > w->ratio) {
                w->ratio = ratio;
                w->scene = (qgw_scene_id)id;
            }
        }
    }

    /* Per kind: its worst scene; then the verdict on the bar. Timing only:
     * the exit status depends on the answers alone. */
    char over[1024] = "";
    size_t used = 0;
    bool met = true;
    int in_bar_count = 0;
    for (int k = 0; k < impl_count; k++) {
        const scene_worst *w = &worst[k];
        if (!w->scenes_run) continue;
        bool bar = in_bar(&w->peer);
        bool ok = !w->failed && !w->cut && w->ratio <= SCENE_BAR;
        if (bar) {
            in_bar_count++;
            if (!ok) {
                met = false;
                int len = snprintf(over + used, sizeof over - used, "%s%s %.1fx (%s)%s%s",
                                   used ? ", " : "", w->peer.name, w->ratio,
                                   qgw_scene_name(w->scene), w->cut ? ", cut short" : "",
                                   w->failed ? ", FAILED" : "");
                if (len > 0 && (size_t)len < sizeof over - used) used += (size_t)len;
            }
        }
        if (o->format == OUT_JSON) {
            printf("{\"workload\":\"scenes_worst\",\"kind\":\"%s\",\"worst_ratio\":%.2f,"
                   "\"worst_scene\":\"%s\",\"scenes\":%d,\"cut\":%d,\"failed\":%d,\"in_bar\":%s}\n",
                   w->peer.name, w->ratio, qgw_scene_name(w->scene), w->scenes_run, w->cut,
                   w->failed, bar ? "true" : "false");
        } else {
            printf("worst %-18s %8.2fx sort-and-sweep (%s)%s%s%s\n", w->peer.name, w->ratio,
                   qgw_scene_name(w->scene), w->cut ? ", cut short by the time budget" : "",
                   w->failed ? ", FAILED" : "", bar ? "" : "  [not held to the bar]");
        }
    }
    char scenes[128] = "";
    size_t sl = 0;
    for (int id = 0; id < QGW_SCENE_COUNT; id++)
        if (o->scene_mask & (1u << id)) {
            int len = snprintf(scenes + sl, sizeof scenes - sl, "%s%s", sl ? "," : "",
                               qgw_scene_name((qgw_scene_id)id));
            if (len > 0 && (size_t)len < sizeof scenes - sl) sl += (size_t)len;
        }
    /* The bar is about scenes of tens of thousands of boxes and more (the
     * README's table runs 100,000). Below SCENE_BAR_MIN_N the frames last
     * microseconds and a kind's fixed per-frame work (walking its cells)
     * weighs against a sort of a few thousand keys: such a run checks
     * answers, and the ratios are printed, not judged. */
    const char *verdict = o->n < SCENE_BAR_MIN_N   ? "NOT JUDGED (n below 10000: answers only)"
                          : in_bar_count == 0 ? "NO KIND HELD TO IT RAN"
                          : met               ? "MET"
                                              : "NOT MET";
    if (o->format == OUT_JSON) {
        printf("{\"workload\":\"scenes_verdict\",\"bar\":%.1f,\"n\":%d,\"scenes\":\"%s\","
               "\"verdict\":\"%s\",\"over\":\"%s\"}\n",
               SCENE_BAR, o->n, scenes, verdict, over);
    } else {
        printf("bar: every kind except bucket_quadtree (and the brute_force oracle) <= %.0fx the "
               "sort-and-sweep frame in every scene (%s, n=%d): %s%s%s\n",
               SCENE_BAR, scenes, o->n, verdict, used ? ": " : "", over);
    }
    fflush(stdout);
    free(ref);
    free(worst);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* check: the reference against plain loops, independent of the library     */

/* The level reference (sort-and-sweep, tile-tile pairs dropped) against
 * plain loops over every agent and every element, each frame. */
static int run_check_level(const options *o) {
    bench_level_scene sc;
    if (!bench_level_init(&sc, o->n)) return note("out of memory"), 1;
    qgw_sweep ref = {0};
    int rc = 0;
    const int32_t S = sc.tiles, A = sc.agents.n;
    if (o->format == OUT_TABLE) printf("level n=%d: %d tiles, %d agents\n", o->n, S, A);
    for (int32_t frame = 0; frame <= o->frames + WARMUP_FRAMES && rc == 0; frame++) {
        if (frame > 0) {
            qgw_agents_move(&sc.agents);
            bench_level_sync(&sc);
        }
        qgw_sum fast, slow = {0, 0};
        if (!bench_level_reference(&sc, &ref, &fast, NULL)) {
            rc = 1;
            break;
        }
        for (int32_t i = 0; i < S + A; i++)
            for (int32_t j = (i < S ? S : i + 1); j < S + A; j++)
                if (qgw_overlap(&sc.all[i], &sc.all[j])) qgw_sum_pair(i, j, &slow);
        if (fast.count != slow.count || fast.checksum != slow.checksum) {
            note("MISMATCH: level reference at frame %d: %" PRIu64 " pairs vs %" PRIu64, frame, fast.count,
                 slow.count);
            rc = 2;
        } else if (o->format == OUT_TABLE) {
            printf("level frame %3d: pairs %8" PRIu64 "  checksum %016" PRIx64 "\n", frame, fast.count,
                   fast.checksum);
        }
    }
    if (rc == 0) note("check: level reference equals plain loops (n=%d)", o->n);
    qgw_sweep_free(&ref);
    bench_level_free(&sc);
    return rc;
}

static int run_check(const options *o) {
    qgw_agents a;
    if (!qgw_agents_init(&a, o->n)) return note("out of memory"), 1;
    qgw_sweep ref = {0};
    int rc = 0;
    for (int32_t frame = 0; frame <= o->frames + WARMUP_FRAMES && rc == 0; frame++) {
        if (frame > 0) qgw_agents_move(&a);
        qgw_sum fast, slow = {0, 0};
        if (!qgw_reference_sum(&ref, a.boxes, a.n, &fast)) {
            rc = 1;
            break;
        }
        for (int32_t i = 0; i < a.n; i++)
            for (int32_t j = i + 1; j < a.n; j++)
                if (qgw_overlap(&a.boxes[i], &a.boxes[j])) qgw_sum_pair(i, j, &slow);
        if (fast.count != slow.count || fast.checksum != slow.checksum) {
            note("MISMATCH: sweep reference at frame %d: %" PRIu64 " pairs vs %" PRIu64, frame,
                 fast.count, slow.count);
            rc = 2;
        } else if (o->format == OUT_TABLE) {
            printf("frame %3d: pairs %8" PRIu64 "  checksum %016" PRIx64 "\n", frame, fast.count,
                   fast.checksum);
        }
    }
    /* Window queries of the static workload against plain loops. */
    for (int32_t q = 0; q < o->queries && rc == 0; q++) {
        qg_rect area = qgw_static_query(&a.rng, a.world);
        hit_sum fast = {q, 0, 0}, slow = {q, 0, 0};
        qgw_sweep_query(&ref, area, sum_hit, &fast);
        for (int32_t i = 0; i < a.n; i++)
            if (qgw_overlap(&area, &a.boxes[i])) sum_hit(i, &slow);
        if (fast.hits != slow.hits || fast.checksum != slow.checksum) {
            note("MISMATCH: sweep query %d: %" PRIu64 " hits vs %" PRIu64, q, fast.hits, slow.hits);
            rc = 2;
        }
    }
    if (rc == 0) note("check: sort-and-sweep reference equals plain loops (n=%d)", a.n);
    qgw_sweep_free(&ref);
    qgw_agents_free(&a);
    if (rc == 0) rc = run_check_level(o);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                             */

static void usage(FILE *f) {
    fputs("usage: quadgrid-bench <workload> [options]\n"
          "workloads:\n"
          "  agents   N moving squares, all overlapping pairs every frame\n"
          "  mixed    agents with 1% of them 16 times larger (same options and fields)\n"
          "  scenes   the scene table (docs/scenes.md): every scene, every kind, beside\n"
          "           sort-and-sweep; options --kind --n --frames --age --json --verify\n"
          "           --scene NAME[,NAME] (agents,mixed,dragons,outside,huge,tiny)\n"
          "           --budget S (seconds one kind may take in one scene, default 20)\n"
          "  static   N boxes, window queries\n"
          "  rays     segment casts (length 256) over the static boxes: all hits and closest hit\n"
          "  knn      the 8 nearest static boxes to each of Q points\n"
          "  level    a static 40% tile map (about 0.4 N tiles, static) and N/25 agents\n"
          "           crossing it; every pair but tile-tile each frame (--events: the\n"
          "           overlap events instead, qg_pair_events; fields began, ended)\n"
          "  knobs    every kind from qg_default_config and bounds-only beside its best hand\n"
          "           tuning (docs/tuning.md); --scene small,tiny,large,mixed,grow,gather,arrive\n"
          "           (default all), --n (default 200000), --frames (default 10), --json\n"
          "  sparse   quarter-world query on a world 95% empty\n"
          "  insert   ns per insert into an empty index\n"
          "  check    test the sort-and-sweep reference against plain loops\n"
          "  drift    agents medians fresh, aged (--age F, default 300) and rebuilt, and\n"
          "           the index's bytes at each, per kind (issue 17)\n"
          "options:\n"
          "  --kind K[,K...]|all  quadgrid kinds and peers (default all; --list shows them)\n"
          "  --config C           what quadgrid is told: default (qg_default_config alone,\n"
          "                       the default), bounds (the bounds only), tuned (bounds and sizes)\n"
          "  --n N                elements (agents/mixed/sparse/scenes/level 100000, static/insert 1000000)\n"
          "  --frames F           measured frames after 3 warm-up frames (default 60, scenes 10)\n"
          "  --age F              agents, mixed, scenes, level: F more unmeasured frames before the measured\n"
          "                       ones, so the figures are those of an aged layout (default 0)\n"
          "  --threads T          workers for quadgrid's parallel calls (qg_move_many,\n"
          "                       qg_cleanup_parallel, qg_pairs_parallel; static: the queries\n"
          "                       split over them) and the agents' own motion; peers run on\n"
          "                       one thread (default 1; JSON field threads)\n"
          "  --queries Q          static/rays/knn 100000, sparse 100\n"
          "  --repeat R           insert: builds, rays/knn: timed passes; median reported (default 3)\n"
          "  --json | --csv       one line per (workload, kind, n)\n"
          "  --verify             compare every frame/query with sort-and-sweep, fail on mismatch\n"
          "  --events             level: measure overlap events (qg_pair_events) instead of pairs\n"
          "                       (scenes: pairs are always compared; --verify adds queries)\n"
          "  --element-size S     typical width given to every index (default 5)\n"
          "  --max-element-size S point grid's finest level bound (default 8; with\n"
          "                       --element-size 0 too, every index untuned: its defaults)\n"
          "  --cell-size S --max-depth D --leaf-capacity C   quadgrid tuning (0 = default)\n"
          "  --list               list the kinds this build can run\n",
          f);
}

static qg_thread_pool *pool_to_stop;

static void stop_pool(void) {
    qg_thread_pool_destroy(pool_to_stop);
    pool_to_stop = NULL;
}

static bool parse_int(const char *s, int32_t min, int32_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > INT32_MAX) return false;
    *out = (int32_t)v;
    return true;
}

static bool parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !(v >= 0.0f) || v > 1e30f) return false;
    *out = v;
    return true;
}

static void list_kinds(void) {
    for (int k = 0; k < QG_KIND_COUNT; k++)
        printf("%-20s quadgrid%s\n", qg_kind_name((qg_kind)k),
               qg_kind_available((qg_kind)k) ? "" : " (not built in this version)");
    for (int i = 0; i < PEER_COUNT; i++)
        printf("%-20s peer%s\n", peers[i].name,
               !peers[i].vt ? " (level only)" : !peers[i].level ? " (no level: see box2d_broadphase)" : "");
    for (int i = 0; missing_peers[i]; i++)
        printf("%-20s peer (not built: QG_BENCH_PEERS=OFF or library not found at configure time)\n", missing_peers[i]);
}

static bool all_selected(const options *o) {
    return strcmp(o->kinds, "all") == 0;
}

/* Runs one implementation; `from_all` applies the size limit of quadratic
 * implementations. */
/* ------------------------------------------------------------------------ */
/* drift                                                                    */

/* Runs `frames` frames of `agents` on impl; each frame's ns in tot. */
static int drift_frames(const options *o, const bench_peer *p, bench_impl *impl, qgw_agents *a, int32_t frames,
                        uint64_t *tot, qgw_sum *sum) {
    for (int32_t f = 0; f < frames; f++) {
        uint64_t t0 = qgw_now_ns();
        move_agents(o, a);
        if (!p->vt->update(impl, a->boxes, a->n)) return impl_failed(p, impl, "update");
        if (!bench_pairs(o, p, impl, sum)) return impl_failed(p, impl, "pairs");
        if (tot) tot[f] = qgw_now_ns() - t0;
    }
    return 0;
}

/* How a layout ages (issue 17): `agents` frames measured fresh (after the
 * build and the warm-up), aged (after --age more frames, default 300), and
 * rebuilt (the same boxes inserted into a new index, which then gets the
 * same warm-up). A kind whose aged figure drifts above its fresh and rebuilt
 * ones loses speed to its layout, not to the scene. */
static int run_drift(const options *o, const bench_peer *p) {
    qgw_agents a;
    if (!qgw_agents_init(&a, o->n)) return note("out of memory for %d agents", o->n), 1;
    const int32_t f = o->frames, age = o->age > 0 ? o->age : 300;
    uint64_t *tot = calloc((size_t)f, sizeof *tot);
    bench_impl *impl = NULL;
    bench_setup setup = o->tune;
    setup.bounds = qgw_agents_bounds(&a);
    setup.n = a.n;
    setup.jobs = o->jobs;
    qgw_sum sum = {0, 0};
    double ms[3] = {0, 0, 0};
    size_t bytes[3] = {0, 0, 0};
    int rc = 0;
    if (!tot) {
        rc = 1;
        note("out of memory");
        goto out;
    }
    for (int phase = 0; phase < 3 && rc == 0; phase++) {
        if (phase != 1) {
            /* A new index from the boxes as they are (fresh: frame 0). */
            if (impl) p->vt->destroy(impl), impl = NULL;
            mem_probe mem = mem_begin();
            if (!p->vt->create(&impl, &setup, p->arg)) {
                rc = impl_failed(p, impl, "create");
                break;
            }
            if (!p->vt->build(impl, a.boxes, a.n, false)) {
                rc = impl_failed(p, impl, "build");
                break;
            }
            rc = drift_frames(o, p, impl, &a, WARMUP_FRAMES, NULL, &sum);
            if (rc == 0) rc = drift_frames(o, p, impl, &a, f, tot, &sum);
            ms[phase] = median_ms(tot, f);
            bytes[phase] = mem_index_bytes(&mem, p, impl);
        } else {
            mem_probe mem = mem_begin();
            rc = drift_frames(o, p, impl, &a, age, NULL, &sum);
            if (rc == 0) rc = drift_frames(o, p, impl, &a, f, tot, &sum);
            ms[1] = median_ms(tot, f);
            bytes[1] = mem_index_bytes(&mem, p, impl);
        }
    }
    if (rc == 0) {
        field fs[] = {
            FS("workload", "drift"),
            FS("kind", p->name),
            FI("n", a.n),
            FI("frames", f),
            FI("age", age),
            FI("threads", threads_of(o, p)),
            FD("fresh_ms", ms[0]),
            FD("aged_ms", ms[1]),
            FD("aged_ratio", ms[0] > 0 ? ms[1] / ms[0] : 0),
            FD("rebuilt_ms", ms[2]),
            FI("fresh_bytes", bytes[0]),
            FI("aged_bytes", bytes[1]),
            FI("rebuilt_bytes", bytes[2]),
        };
        emit(o, fs, (int)(sizeof fs / sizeof fs[0]));
    }
out:
    if (impl) p->vt->destroy(impl);
    free(tot);
    qgw_agents_free(&a);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* level: a static tile map and the agents that cross it                    */

/* The threads an implementation uses in the level workload. */
static int32_t level_threads(const options *o, const bench_peer *p) {
    return o->jobs && p->level->pairs_parts ? o->threads : 1;
}

/* Overlap events of one frame, summed as pairs are. */
typedef struct event_sums {
    qgw_sum began, ended;
} event_sums;

static bool sum_began(qg_handle a, qg_handle b, void *user) {
    return qgw_sum_pair(a, b, &((event_sums *)user)->began);
}

static bool sum_ended(qg_handle a, qg_handle b, void *user) {
    return qgw_sum_pair(a, b, &((event_sums *)user)->ended);
}

static bool same_sum(qgw_sum a, qgw_sum b) {
    return a.count == b.count && a.checksum == b.checksum;
}

/* Step 3 of a level frame, pairs mode: every pair into *sum. */
static bool level_pairs(const options *o, const bench_peer *p, bench_level *impl, qgw_sum *sum) {
    *sum = (qgw_sum){0, 0};
    if (level_threads(o, p) == 1) return p->level->pairs(impl, qgw_sum_pair, sum);
    qgw_sum parts[MAX_THREADS];
    void *users[MAX_THREADS];
    for (int32_t i = 0; i < o->threads; i++) {
        parts[i] = (qgw_sum){0, 0};
        users[i] = &parts[i];
    }
    if (!p->level->pairs_parts(impl, qgw_sum_pair, users)) return false;
    for (int32_t i = 0; i < o->threads; i++) {
        sum->count += parts[i].count;
        sum->checksum += parts[i].checksum;
    }
    return true;
}

/* Step 3 of a level frame, events mode: the implementation's own events,
 * or, for one without, this frame's pairs sorted and compared with the
 * previous frame's (what a user of that library would write). */
static bool level_events(const bench_peer *p, bench_level *impl, bench_pair_set *prev, bench_pair_set *cur,
                         event_sums *ev) {
    *ev = (event_sums){{0, 0}, {0, 0}};
    if (p->level->events) return p->level->events(impl, sum_began, sum_ended, ev);
    cur->n = 0;
    cur->nomem = false;
    if (!p->level->pairs(impl, bench_pair_set_add, cur)) return false;
    if (!bench_pair_set_sort(cur)) return false;
    bench_pair_set_diff(prev, cur, sum_began, sum_ended, ev);
    bench_pair_set_swap(prev, cur);
    return true;
}

static int level_failed(const bench_peer *p, bench_level *impl, const char *step) {
    const char *e = impl ? p->level->error(impl) : NULL;
    note("%s: %s failed%s%s", p->name, step, e ? ": " : "", e ? e : "");
    return 1;
}

static bool note_extra(qg_handle a, qg_handle b, void *user) {
    int *shown = user;
    if ((*shown)++ < 10) note("  extra pair   (%d, %d)", (int)a, (int)b);
    return true;
}

static bool note_missing(qg_handle a, qg_handle b, void *user) {
    int *shown = user;
    if ((*shown)++ < 10) note("  missing pair (%d, %d)", (int)a, (int)b);
    return true;
}

/* After a mismatch in pairs mode: the first differing pairs. */
static void level_pair_diff(const bench_peer *p, bench_level *impl, const bench_pair_set *want) {
    bench_pair_set got = {0};
    if (!p->level->pairs(impl, bench_pair_set_add, &got) || !bench_pair_set_sort(&got)) {
        note("  (could not list the differing pairs)");
    } else {
        int shown = 0;
        bench_pair_set_diff(want, &got, note_extra, note_missing, &shown);
    }
    bench_pair_set_free(&got);
}

static int run_level(const options *o, const bench_peer *p) {
    bench_level_scene sc;
    if (!bench_level_init(&sc, o->n)) return note("out of memory for the level of n=%d", o->n), 1;
    const int32_t S = sc.tiles, A = sc.agents.n;
    const int32_t skip = WARMUP_FRAMES + o->age;
    const int32_t total_frames = o->frames + skip;
    uint64_t *upd = calloc((size_t)o->frames + 1, sizeof *upd);
    uint64_t *prs = calloc((size_t)o->frames + 1, sizeof *prs);
    uint64_t *tot = calloc((size_t)o->frames + 1, sizeof *tot);
    qgw_sweep ref = {0};
    bench_pair_set prev = {0}, cur = {0}, ref_prev = {0}, ref_cur = {0};
    int rc = 0;
    bench_level *impl = NULL;
    if (!upd || !prs || !tot) {
        rc = 1;
        note("out of memory");
        goto out;
    }

    mem_probe mem = mem_begin();
    bench_setup setup = o->tune;
    setup.bounds = (qg_rect){0.0f, 0.0f, sc.world, sc.world};
    setup.n = S + A;
    /* The typical width is the agents' (the elements that move; --element-size
     * overrides it), the widest box a tile. */
    if (setup.max_element_size < BENCH_LEVEL_TILE) setup.max_element_size = BENCH_LEVEL_TILE;
    setup.jobs = o->jobs;
    if (!p->level->create(&impl, &setup, p->arg)) {
        rc = level_failed(p, impl, "create");
        goto out;
    }
    uint64_t b0 = qgw_now_ns();
    if (!p->level->build(impl, sc.tile_boxes, S, sc.agents.boxes, A)) {
        rc = level_failed(p, impl, "build");
        goto out;
    }
    const double build_ms = (double)(qgw_now_ns() - b0) / 1e6;

    progress prog = progress_start();
    qgw_sum sum = {0, 0};       /* pairs of the frame (events: the running set's) */
    event_sums ev = {{0, 0}, {0, 0}};
    for (int32_t frame = 1; frame <= total_frames; frame++) {
        uint64_t t0 = qgw_now_ns();
        move_agents(o, &sc.agents);
        if (!p->level->update(impl, sc.agents.boxes, A)) {
            rc = level_failed(p, impl, "update");
            goto out;
        }
        uint64_t t1 = qgw_now_ns();
        if (!o->events) {
            if (!level_pairs(o, p, impl, &sum)) {
                rc = level_failed(p, impl, "pairs");
                goto out;
            }
        } else {
            if (!level_events(p, impl, &prev, &cur, &ev)) {
                rc = impl && p->level->error(impl) ? level_failed(p, impl, "events") : (note("out of memory"), 1);
                goto out;
            }
            sum.count += ev.began.count - ev.ended.count;
            sum.checksum += ev.began.checksum - ev.ended.checksum;
        }
        uint64_t t2 = qgw_now_ns();
        if (frame > skip) {
            int32_t m = frame - skip - 1;
            upd[m] = t1 - t0;
            prs[m] = t2 - t1;
            tot[m] = t2 - t0;
        }
        if (o->verify) {
            qgw_sum want;
            bench_level_sync(&sc);
            if (!bench_level_reference(&sc, &ref, &want, &ref_cur)) {
                rc = 1;
                note("out of memory for the reference");
                goto out;
            }
            event_sums want_ev = {{0, 0}, {0, 0}};
            bench_pair_set_diff(&ref_prev, &ref_cur, sum_began, sum_ended, &want_ev);
            bool bad = !same_sum(want, sum) ||
                       (o->events && (!same_sum(want_ev.began, ev.began) || !same_sum(want_ev.ended, ev.ended)));
            if (bad) {
                progress_end(&prog);
                note("MISMATCH: %s, level n=%d, frame %d: pairs %" PRIu64 " checksum %016" PRIx64
                     ", reference pairs %" PRIu64 " checksum %016" PRIx64,
                     p->name, o->n, frame, sum.count, sum.checksum, want.count, want.checksum);
                if (o->events)
                    note("  events: began %" PRIu64 " (%016" PRIx64 ") ended %" PRIu64 " (%016" PRIx64
                         "), reference began %" PRIu64 " (%016" PRIx64 ") ended %" PRIu64 " (%016" PRIx64 ")",
                         ev.began.count, ev.began.checksum, ev.ended.count, ev.ended.checksum,
                         want_ev.began.count, want_ev.began.checksum, want_ev.ended.count,
                         want_ev.ended.checksum);
                else
                    level_pair_diff(p, impl, &ref_cur);
                rc = 2;
                goto out;
            }
            bench_pair_set_swap(&ref_prev, &ref_cur);
        }
        progress_update(&prog, "frame", p->name, frame, total_frames);
    }
    progress_end(&prog);

    size_t index_bytes = p->bytes_how == BENCH_BYTES_EXACT ? p->level->bytes(impl) : mem_index_bytes(&mem, p, NULL);
    size_t rss = qgw_peak_rss_bytes();
    field fs[] = {
        FS("workload", "level"),
        FS("kind", p->name),
        FI("n", o->n),
        FI("frames", o->frames),
        FI("age", o->age),
        /* --events: qg_pair_events runs on one thread, the moves and cleanup
         * on the workers */
        FI("threads", o->events ? (o->jobs && p->vt == &bench_quadgrid_vtable ? o->threads : 1)
                                : level_threads(o, p)),
        FI("tiles", S),
        FI("agents", A),
        FI("events", o->events),
        FD("build_ms", build_ms),
        FD("update_ms", median_ms(upd, o->frames)),
        FD("pairs_ms", median_ms(prs, o->frames)),
        FD("total_ms", median_ms(tot, o->frames)),
        FI("pairs", sum.count),
        FH("checksum", sum.checksum),
        FI("began", o->events ? (int64_t)ev.began.count : -1),
        FI("ended", o->events ? (int64_t)ev.ended.count : -1),
        FI("index_bytes", index_bytes),
        FS("index_bytes_how", bytes_how_name(p, &mem)),
        FI("peak_rss_bytes", rss),
    };
    emit(o, fs, (int)(sizeof fs / sizeof fs[0]));
    record_answer(p->name, sum.count, sum.checksum);

out:
    if (impl) p->level->destroy(impl);
    free(upd), free(prs), free(tot);
    qgw_sweep_free(&ref);
    bench_pair_set_free(&prev);
    bench_pair_set_free(&cur);
    bench_pair_set_free(&ref_prev);
    bench_pair_set_free(&ref_cur);
    bench_level_free(&sc);
    return rc;
}

static int run_one(const options *o, const bench_peer *p, bool from_all) {
    bool limited = o->wl == W_AGENTS || o->wl == W_MIXED || o->wl == W_STATIC || o->wl == W_DRIFT ||
                   o->wl == W_RAYS || o->wl == W_KNN || o->wl == W_LEVEL;
    if ((o->wl == W_LEVEL && !p->level) || (o->wl != W_LEVEL && !p->vt)) {
        /* Not every peer has every workload (Box2D: its b2DynamicTree for
         * the others, its b2BroadPhase for level). */
        if (!from_all) note("%s has no %s workload", p->name, workload_name(o->wl));
        return from_all ? 0 : 1;
    }
    if (from_all && p->quadratic && limited && o->n > QUADRATIC_LIMIT) {
        note("skipping %s: O(n^2) above n=%d (ask for it with --kind %s)", p->name, QUADRATIC_LIMIT,
             p->name);
        return 0;
    }
    switch (o->wl) {
    case W_AGENTS:
    case W_MIXED: return run_agents(o, p);
    case W_STATIC:
    case W_SPARSE: return run_queries(o, p);
    case W_INSERT: return run_insert(o, p);
    case W_DRIFT: return run_drift(o, p);
    case W_LEVEL: return run_level(o, p);
    case W_RAYS:
    case W_KNN: /* rays.c */
        return bench_rays_run(&(bench_rays_options){o->wl == W_KNN, o->n, o->queries, o->repeat, o->verify,
                                                    (int)o->format, &o->tune}, p);
    case W_CHECK:
    case W_SCENES:
    case W_KNOBS: break;
    }
    return 1;
}

static int run_named(const options *o, const char *name) {
    qg_kind k;
    if (qg_kind_from_name(name, &k) == QG_OK) {
        if (!qg_kind_available(k)) {
            note("kind %s is not built in this version of quadgrid", name);
            return 1;
        }
        bench_peer p = quadgrid_peer(k);
        return run_one(o, &p, false);
    }
    for (int i = 0; i < PEER_COUNT; i++)
        if (strcmp(peers[i].name, name) == 0) return run_one(o, &peers[i], false);
    for (int i = 0; missing_peers[i]; i++)
        if (strcmp(missing_peers[i], name) == 0) {
            note("peer %s is not built (QG_BENCH_PEERS=OFF or its library was not found at configure time)", name);
            return 1;
        }
    note("unknown kind '%s' (see --list)", name);
    return 2;
}

/* scenes: the implementations --kind names, besides the sort-and-sweep
 * reference, which always runs. Returns 0, or 2 for an unknown name and 1
 * for one that is not built. */
static int scene_impls(const options *o, bench_peer *out, int *count) {
    *count = 0;
    if (all_selected(o)) {
        for (int k = 0; k < QG_KIND_COUNT; k++) {
            if (!qg_kind_available((qg_kind)k)) continue;
            bench_peer p = quadgrid_peer((qg_kind)k);
            if (p.quadratic && o->n > QUADRATIC_LIMIT) {
                note("skipping %s: O(n^2) above n=%d (ask for it with --kind %s)", p.name,
                     QUADRATIC_LIMIT, p.name);
                continue;
            }
            out[(*count)++] = p;
        }
        return 0;
    }
    char *list = strdup(o->kinds);
    if (!list) return note("out of memory"), 1;
    int rc = 0;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name && rc == 0;
         name = strtok_r(NULL, ",", &save)) {
        qg_kind k;
        bool found = false;
        if (strcmp(name, peers[0].name) == 0) continue; /* the reference runs anyway */
        for (int i = 0; i < *count; i++) found = found || strcmp(out[i].name, name) == 0;
        if (found) continue;
        if (qg_kind_from_name(name, &k) == QG_OK) {
            if (!qg_kind_available(k)) {
                note("kind %s is not built in this version of quadgrid", name);
                rc = 1;
            } else {
                out[(*count)++] = quadgrid_peer(k);
            }
            continue;
        }
        for (int i = 1; i < PEER_COUNT && !found; i++)
            if (strcmp(peers[i].name, name) == 0) {
                found = true;
                if (peers[i].vt) {
                    out[(*count)++] = peers[i];
                } else {
                    note("%s has no scenes workload (it runs level only)", name);
                    rc = 1;
                }
            }
        for (int i = 0; missing_peers[i] && !found; i++)
            if (strcmp(missing_peers[i], name) == 0) {
                note("peer %s is not built (QG_BENCH_PEERS=OFF or its library was not found at configure time)", name);
                rc = 1, found = true;
            }
        if (!found) {
            note("unknown kind '%s' (see --list)", name);
            rc = 2;
        }
    }
    free(list);
    return rc;
}

/* --scene NAME[,NAME...]: the bit mask of the scenes, or 0 after a message
 * naming the bad one. */
static unsigned parse_scenes(const char *arg) {
    char *list = strdup(arg);
    if (!list) return note("out of memory"), 0u;
    unsigned mask = 0;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        qgw_scene_id id;
        if (!qgw_scene_from_name(name, &id)) {
            note("unknown scene '%s' (scenes: agents, mixed, dragons, outside, huge, tiny)", name);
            mask = 0;
            break;
        }
        mask |= 1u << id;
    }
    free(list);
    if (mask == 0 && !*arg) note("--scene needs at least one scene name");
    return mask;
}

/* After several implementations ran the same workload: did they agree? */
static int cross_check(const options *o) {
    if (answer_count < 2) return 0;
    const char *what = o->wl == W_AGENTS || o->wl == W_MIXED || o->wl == W_LEVEL ? "pairs" : "hits";
    int bad = 0;
    for (int i = 1; i < answer_count; i++)
        if (answers[i].count != answers[0].count || answers[i].checksum != answers[0].checksum) {
            note("MISMATCH: %s gives %s %" PRIu64 " checksum %016" PRIx64 ", %s gives %" PRIu64
                 " checksum %016" PRIx64,
                 answers[i].name, what, answers[i].count, answers[i].checksum, answers[0].name,
                 answers[0].count, answers[0].checksum);
            bad = 1;
        }
    if (!bad)
        note("all %d implementations agree: %s %" PRIu64 ", checksum %016" PRIx64, answer_count,
             what, answers[0].count, answers[0].checksum);
    return bad ? 2 : 0;
}

/* Exit status: 0 every answer agreed; 1 an implementation failed (or memory
 * ran out); 2 a wrong answer, or a bad command line. */
int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    options o = {0};
    o.kinds = "all";
    o.threads = 1;
    o.tune.element_size = TYPICAL_WIDTH;
    o.tune.max_element_size = LARGEST_WIDTH;
    bool have_n = false, have_queries = false, have_frames = false, have_tune = false, have_age = false;
    bool have_scene = false, have_budget = false;
    o.budget_s = 20.0;
    o.scene_mask = (1u << QGW_SCENE_COUNT) - 1u;

    const char *wl = argv[1];
    if (strcmp(wl, "--help") == 0 || strcmp(wl, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(wl, "--list") == 0) {
        list_kinds();
        return 0;
    }
    int bench_soak_main(int argc, char **argv); /* soak.c: its own options */
    if (strcmp(wl, "soak") == 0) return bench_soak_main(argc - 1, argv + 1);
    if (strcmp(wl, "agents") == 0) o.wl = W_AGENTS;
    else if (strcmp(wl, "mixed") == 0) o.wl = W_MIXED;
    else if (strcmp(wl, "scenes") == 0) o.wl = W_SCENES;
    else if (strcmp(wl, "drift") == 0) o.wl = W_DRIFT;
    else if (strcmp(wl, "static") == 0) o.wl = W_STATIC;
    else if (strcmp(wl, "sparse") == 0) o.wl = W_SPARSE;
    else if (strcmp(wl, "insert") == 0) o.wl = W_INSERT;
    else if (strcmp(wl, "check") == 0) o.wl = W_CHECK;
    else if (strcmp(wl, "rays") == 0) o.wl = W_RAYS;
    else if (strcmp(wl, "knn") == 0) o.wl = W_KNN;
    else if (strcmp(wl, "level") == 0) o.wl = W_LEVEL;
    else if (strcmp(wl, "knobs") == 0) o.wl = W_KNOBS;
    else {
        note("unknown workload '%s'", wl);
        usage(stderr);
        return 2;
    }
    o.frames = 60;
    o.repeat = 3;

    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true, takes = true;
        if (strcmp(arg, "--kind") == 0) ok = val != NULL, o.kinds = val;
        else if (strcmp(arg, "--n") == 0) ok = val && parse_int(val, 0, &o.n), have_n = true;
        else if (strcmp(arg, "--frames") == 0) ok = val && parse_int(val, 1, &o.frames), have_frames = true;
        else if (strcmp(arg, "--age") == 0) ok = val && parse_int(val, 0, &o.age), have_age = true;
        else if (strcmp(arg, "--threads") == 0)
            ok = val && parse_int(val, 1, &o.threads) && o.threads <= MAX_THREADS;
        else if (strcmp(arg, "--queries") == 0)
            ok = val && parse_int(val, 1, &o.queries), have_queries = true;
        else if (strcmp(arg, "--repeat") == 0) ok = val && parse_int(val, 1, &o.repeat);
        else if (strcmp(arg, "--element-size") == 0)
            ok = val && parse_float(val, &o.tune.element_size), have_tune = true;
        else if (strcmp(arg, "--max-element-size") == 0)
            ok = val && parse_float(val, &o.tune.max_element_size), have_tune = true;
        else if (strcmp(arg, "--cell-size") == 0)
            ok = val && parse_float(val, &o.tune.cell_size), have_tune = true;
        else if (strcmp(arg, "--max-depth") == 0)
            ok = val && parse_int(val, 0, &o.tune.max_depth), have_tune = true;
        else if (strcmp(arg, "--leaf-capacity") == 0)
            ok = val && parse_int(val, 0, &o.tune.leaf_capacity), have_tune = true;
        else if (strcmp(arg, "--scene") == 0 && o.wl == W_KNOBS)
            ok = val != NULL, o.knob_scenes = val;
        else if (strcmp(arg, "--scene") == 0)
            ok = val && (o.scene_mask = parse_scenes(val)) != 0, have_scene = true;
        else if (strcmp(arg, "--config") == 0) {
            ok = val != NULL;
            if (ok && strcmp(val, "default") == 0) o.tune.config_mode = BENCH_CONFIG_DEFAULT;
            else if (ok && strcmp(val, "bounds") == 0) o.tune.config_mode = BENCH_CONFIG_BOUNDS;
            else if (ok && strcmp(val, "tuned") == 0) o.tune.config_mode = BENCH_CONFIG_TUNED;
            else ok = false;
        }
        else if (strcmp(arg, "--budget") == 0) {
            int32_t b = 0;
            ok = val && parse_int(val, 1, &b);
            o.budget_s = b, have_budget = true;
        }
        else {
            takes = false;
            if (strcmp(arg, "--json") == 0) o.format = OUT_JSON;
            else if (strcmp(arg, "--csv") == 0) o.format = OUT_CSV;
            else if (strcmp(arg, "--verify") == 0) o.verify = true;
            else if (strcmp(arg, "--events") == 0) o.events = true;
            else if (strcmp(arg, "--list") == 0) {
                list_kinds();
                return 0;
            } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
                usage(stdout);
                return 0;
            } else {
                note("unknown option '%s'", arg);
                usage(stderr);
                return 2;
            }
        }
        if (!ok) {
            note("bad or missing value for %s", arg);
            return 2;
        }
        if (takes) i++;
    }
    if (!have_n) o.n = (o.wl == W_STATIC || o.wl == W_INSERT || o.wl == W_RAYS || o.wl == W_KNN) ? 1000000 : o.wl == W_CHECK ? 3000 : 100000;
    if (!have_queries) o.queries = (o.wl == W_STATIC || o.wl == W_RAYS || o.wl == W_KNN) ? 100000 : o.wl == W_CHECK ? 1000 : 100;
    /* One pool for the whole run, its threads reused by every call. */
    static qg_thread_pool *pool;
    static qg_jobs jobs;
    if (o.threads > 1) {
        if (qg_thread_pool_create(o.threads, &pool) != QG_OK) return note("cannot start %d threads", o.threads), 1;
        atexit(stop_pool);
        pool_to_stop = pool;
        jobs = qg_thread_pool_jobs(pool);
        o.jobs = &jobs;
    }
    if (o.wl == W_CHECK) {
        if (!have_frames) o.frames = 10;
        return run_check(&o);
    }
    if (o.wl == W_KNOBS) {
        if (!have_n) o.n = 200000;
        if (!have_frames) o.frames = 10;
        return bench_knobs(o.kinds, o.knob_scenes ? o.knob_scenes : "small,tiny,large,mixed,grow,gather,arrive", o.n,
                           o.frames, o.format == OUT_JSON);
    }
    if (have_age && o.wl != W_AGENTS && o.wl != W_MIXED && o.wl != W_DRIFT && o.wl != W_LEVEL &&
        o.wl != W_SCENES) {
        note("--age is an option of the agents, mixed, scenes, drift and level workloads");
        return 2;
    }
    if (o.events && o.wl != W_LEVEL) {
        note("--events is an option of the level workload");
        return 2;
    }
    if ((o.wl == W_RAYS || o.wl == W_KNN) && o.threads > 1) {
        note("rays and knn run on one thread (--threads does not apply)");
        return 2;
    }
    if ((have_scene || have_budget) && o.wl != W_SCENES) {
        note("--scene and --budget are options of the scenes workload");
        return 2;
    }
    if (o.wl == W_SCENES) {
        if (have_tune) {
            note("scenes: each scene has its own configuration (docs/scenes.md); "
                 "--element-size, --max-element-size, --cell-size, --max-depth and --leaf-capacity do not apply");
            return 2;
        }
        if (have_queries || o.format == OUT_CSV) {
            note("scenes: --queries and --csv do not apply");
            return 2;
        }
        if (o.n < 1) {
            note("scenes: --n must be at least 1");
            return 2;
        }
        if (!have_frames) o.frames = 10;
        bench_peer impls[QG_KIND_COUNT + PEER_COUNT];
        int impl_count = 0;
        int r = scene_impls(&o, impls, &impl_count);
        if (r) return r;
        return run_scenes(&o, impls, impl_count);
    }

    if (o.wl == W_DRIFT && !have_frames) o.frames = 20;
    int rc = 0;
    if (all_selected(&o)) {
        for (int k = 0; k < QG_KIND_COUNT; k++) {
            if (!qg_kind_available((qg_kind)k)) continue;
            bench_peer p = quadgrid_peer((qg_kind)k);
            int r = run_one(&o, &p, true);
            if (r > rc) rc = r;
        }
        for (int i = 0; i < PEER_COUNT; i++) {
            int r = run_one(&o, &peers[i], true);
            if (r > rc) rc = r;
        }
        for (int i = 0; missing_peers[i]; i++)
            note("peer %s not built: QG_BENCH_PEERS=OFF or its library was not found at configure time", missing_peers[i]);
    } else {
        char *list = strdup(o.kinds);
        if (!list) return note("out of memory"), 1;
        for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
             name = strtok_r(NULL, ",", &save)) {
            int r = run_named(&o, name);
            if (r > rc) rc = r;
        }
        free(list);
    }
    if (o.wl != W_INSERT) {
        int r = o.wl == W_RAYS || o.wl == W_KNN ? bench_rays_cross_check() : cross_check(&o);
        if (r > rc) rc = r;
    }
    return rc;
}
