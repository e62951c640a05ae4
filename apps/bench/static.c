// SPDX-License-Identifier: MIT
/* quadgrid-bench: `static` and `sparse`: window queries over boxes built once. */
#include "bench.h"

/* static and sparse: window queries                                        */



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
int run_queries(const options *o, const bench_peer *p) {
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
