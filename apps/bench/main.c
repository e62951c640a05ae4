/* quadgrid-bench: the standard workloads (agents, static) plus two extras
 * (sparse, insert) for every quadgrid kind that is built and for peer
 * libraries, all in one process on the same boxes. See docs/benchmarks.md. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <quadgrid.h>

#include "peers/peer.h"
#include "workload.h"

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

typedef enum workload { W_AGENTS, W_STATIC, W_SPARSE, W_INSERT, W_CHECK } workload;
typedef enum out_format { OUT_TABLE, OUT_JSON, OUT_CSV } out_format;

typedef struct options {
    workload wl;
    const char *kinds;
    int32_t n;
    int32_t frames;
    int32_t queries;
    int32_t repeat;
    out_format format;
    bool verify;
    bench_setup tune; /* element sizes and quadgrid tuning; bounds/n set per run */
} options;

/* Frames 1-3 after the build warm caches and let lazy structures settle. */
enum { WARMUP_FRAMES = 3 };
/* `--kind all` leaves out O(n^2) implementations above this many elements. */
enum { QUADRATIC_LIMIT = 20000 };

/* The agents generator draws half-sizes in [1,4]: mean width 5, largest 8. */
#define TYPICAL_WIDTH 5.0f
#define LARGEST_WIDTH 8.0f

static const char *workload_name(workload w) {
    static const char *names[] = {"agents", "static", "sparse", "insert", "check"};
    return names[w];
}

/* ------------------------------------------------------------------------ */
/* The implementations                                                      */

static const qg_kind qg_kinds[QG_KIND_COUNT] = {
    QG_QUADTREE,   QG_LOOSE_QUADTREE, QG_LEVEL_QUADTREE, QG_BUCKET_QUADTREE, QG_GRID,
    QG_MULTI_GRID, QG_LOOSE_GRID,     QG_POINT_GRID,     QG_BRUTE_FORCE,
};

static const bench_peer peers[] = {
    {"sweep", &bench_sweep_vtable, NULL, BENCH_BYTES_EXACT, false},
#ifdef QG_BENCH_HAVE_CHIPMUNK
    {"chipmunk_bbtree", &bench_chipmunk_bbtree_vtable, NULL, BENCH_BYTES_HEAP_DELTA, false},
    {"chipmunk_spacehash", &bench_chipmunk_spacehash_vtable, NULL, BENCH_BYTES_HEAP_DELTA, false},
#endif
#ifdef QG_BENCH_HAVE_BOX2D
    {"box2d_dynamic_tree", &bench_box2d_vtable, NULL, BENCH_BYTES_HEAP_DELTA, false},
#endif
};
enum { PEER_COUNT = sizeof peers / sizeof peers[0] };

/* Peers that were asked for but are not built, so the message can say why. */
static const char *const missing_peers[] = {
#ifndef QG_BENCH_HAVE_CHIPMUNK
    "chipmunk_bbtree", "chipmunk_spacehash",
#endif
#ifndef QG_BENCH_HAVE_BOX2D
    "box2d_dynamic_tree",
#endif
    NULL,
};

static bench_peer quadgrid_peer(qg_kind k) {
    bench_peer p = {qg_kind_name(k), &bench_quadgrid_vtable, &qg_kinds[k], BENCH_BYTES_EXACT,
                    k == QG_BRUTE_FORCE};
    return p;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                   */

typedef enum field_type { F_STR, F_INT, F_MS, F_HEX } field_type;

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

static int column_width(const field *f) {
    int w = (int)strlen(f->key);
    int min = f->type == F_STR ? 18 : f->type == F_HEX ? 16 : 9;
    if (strcmp(f->key, "workload") == 0 || strcmp(f->key, "index_bytes_how") == 0) min = 10;
    return w > min ? w : min;
}

static void format_value(char *buf, size_t size, const field *f) {
    switch (f->type) {
    case F_STR: snprintf(buf, size, "%s", f->s); break;
    case F_INT: snprintf(buf, size, "%" PRId64, f->i); break;
    case F_MS: snprintf(buf, size, "%.3f", f->d); break;
    case F_HEX: snprintf(buf, size, "%016" PRIx64, f->u); break;
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
/* agents                                                                   */

static int run_agents(const options *o, const bench_peer *p) {
    qgw_agents a;
    if (!qgw_agents_init(&a, o->n)) return note("out of memory for %d agents", o->n), 1;
    qgw_sweep ref = {0};
    if (o->verify && !qgw_sweep_sort(&ref, a.boxes, a.n)) {
        qgw_agents_free(&a);
        return note("out of memory for the reference"), 1;
    }
    const int32_t total_frames = o->frames + WARMUP_FRAMES;
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
        qgw_agents_move(&a);
        if (!p->vt->update(impl, a.boxes, a.n)) {
            rc = impl_failed(p, impl, "update");
            goto out;
        }
        uint64_t t1 = qgw_now_ns();
        sum = (qgw_sum){0, 0};
        if (!p->vt->pairs(impl, qgw_sum_pair, &sum)) {
            rc = impl_failed(p, impl, "pairs");
            goto out;
        }
        uint64_t t2 = qgw_now_ns();
        if (frame > WARMUP_FRAMES) {
            int32_t m = frame - WARMUP_FRAMES - 1;
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
        FS("workload", "agents"),
        FS("kind", p->name),
        FI("n", a.n),
        FI("frames", o->frames),
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
    for (int32_t q = 0; q < o->queries; q++) {
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
        FD("build_ms", (double)(t1 - t0) / 1e6),
        FI("query_ns", o->queries > 0 ? (query_ns + (uint64_t)o->queries / 2) / (uint64_t)o->queries : 0),
        FI("hits", total.hits),
        FH("checksum", total.checksum),
        FI("index_bytes", index_bytes),
        FS("index_bytes_how", bytes_how_name(p, &mem)),
        FI("peak_rss_bytes", rss),
        /* Per query, from qg_query_with_stats; -1 for peers, which cannot say. */
        FI("cells_visited", p->vt->query_stats && o->queries > 0 ? cells_visited / o->queries : -1),
        FI("boxes_tested", p->vt->query_stats && o->queries > 0 ? boxes_tested / o->queries : -1),
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
/* check: the reference against plain loops, independent of the library     */

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
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                             */

static void usage(FILE *f) {
    fputs("usage: quadgrid-bench <workload> [options]\n"
          "workloads:\n"
          "  agents   N moving squares, all overlapping pairs every frame\n"
          "  static   N boxes, window queries\n"
          "  sparse   quarter-world query on a world 95% empty\n"
          "  insert   ns per insert into an empty index\n"
          "  check    test the sort-and-sweep reference against plain loops\n"
          "options:\n"
          "  --kind K[,K...]|all  quadgrid kinds and peers (default all; --list shows them)\n"
          "  --n N                elements (agents/sparse 100000, static/insert 1000000)\n"
          "  --frames F           measured frames after 3 warm-up frames (default 60)\n"
          "  --queries Q          static 100000, sparse 100\n"
          "  --repeat R           insert: builds, median reported (default 3)\n"
          "  --json | --csv       one line per (workload, kind, n)\n"
          "  --verify             compare every frame/query with sort-and-sweep, fail on mismatch\n"
          "  --element-size S     typical width given to every index (default 5)\n"
          "  --cell-size S --max-depth D --leaf-capacity C   quadgrid tuning (0 = default)\n"
          "  --list               list the kinds this build can run\n",
          f);
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
    for (int i = 0; i < PEER_COUNT; i++) printf("%-20s peer\n", peers[i].name);
    for (int i = 0; missing_peers[i]; i++)
        printf("%-20s peer (not built: QG_BENCH_PEERS=OFF or library not found at configure time)\n", missing_peers[i]);
}

static bool all_selected(const options *o) {
    return strcmp(o->kinds, "all") == 0;
}

/* Runs one implementation; `from_all` applies the size limit of quadratic
 * implementations. */
static int run_one(const options *o, const bench_peer *p, bool from_all) {
    bool limited = o->wl == W_AGENTS || o->wl == W_STATIC;
    if (from_all && p->quadratic && limited && o->n > QUADRATIC_LIMIT) {
        note("skipping %s: O(n^2) above n=%d (ask for it with --kind %s)", p->name, QUADRATIC_LIMIT,
             p->name);
        return 0;
    }
    switch (o->wl) {
    case W_AGENTS: return run_agents(o, p);
    case W_STATIC:
    case W_SPARSE: return run_queries(o, p);
    case W_INSERT: return run_insert(o, p);
    case W_CHECK: break;
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
    return 1;
}

/* After several implementations ran the same workload: did they agree? */
static int cross_check(const options *o) {
    if (answer_count < 2) return 0;
    const char *what = o->wl == W_AGENTS ? "pairs" : "hits";
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

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 1;
    }
    options o = {0};
    o.kinds = "all";
    o.tune.element_size = TYPICAL_WIDTH;
    o.tune.max_element_size = LARGEST_WIDTH;
    bool have_n = false, have_queries = false, have_frames = false;

    const char *wl = argv[1];
    if (strcmp(wl, "--help") == 0 || strcmp(wl, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(wl, "--list") == 0) {
        list_kinds();
        return 0;
    }
    if (strcmp(wl, "agents") == 0) o.wl = W_AGENTS;
    else if (strcmp(wl, "static") == 0) o.wl = W_STATIC;
    else if (strcmp(wl, "sparse") == 0) o.wl = W_SPARSE;
    else if (strcmp(wl, "insert") == 0) o.wl = W_INSERT;
    else if (strcmp(wl, "check") == 0) o.wl = W_CHECK;
    else {
        note("unknown workload '%s'", wl);
        usage(stderr);
        return 1;
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
        else if (strcmp(arg, "--queries") == 0)
            ok = val && parse_int(val, 1, &o.queries), have_queries = true;
        else if (strcmp(arg, "--repeat") == 0) ok = val && parse_int(val, 1, &o.repeat);
        else if (strcmp(arg, "--element-size") == 0) ok = val && parse_float(val, &o.tune.element_size);
        else if (strcmp(arg, "--cell-size") == 0) ok = val && parse_float(val, &o.tune.cell_size);
        else if (strcmp(arg, "--max-depth") == 0) ok = val && parse_int(val, 0, &o.tune.max_depth);
        else if (strcmp(arg, "--leaf-capacity") == 0)
            ok = val && parse_int(val, 0, &o.tune.leaf_capacity);
        else {
            takes = false;
            if (strcmp(arg, "--json") == 0) o.format = OUT_JSON;
            else if (strcmp(arg, "--csv") == 0) o.format = OUT_CSV;
            else if (strcmp(arg, "--verify") == 0) o.verify = true;
            else if (strcmp(arg, "--list") == 0) {
                list_kinds();
                return 0;
            } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
                usage(stdout);
                return 0;
            } else {
                note("unknown option '%s'", arg);
                usage(stderr);
                return 1;
            }
        }
        if (!ok) {
            note("bad or missing value for %s", arg);
            return 1;
        }
        if (takes) i++;
    }
    if (!have_n) o.n = (o.wl == W_STATIC || o.wl == W_INSERT) ? 1000000 : o.wl == W_CHECK ? 3000 : 100000;
    if (!have_queries) o.queries = o.wl == W_STATIC ? 100000 : o.wl == W_CHECK ? 1000 : 100;
    if (o.wl == W_CHECK) {
        if (!have_frames) o.frames = 10;
        return run_check(&o);
    }

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
        int r = cross_check(&o);
        if (r > rc) rc = r;
    }
    return rc;
}
