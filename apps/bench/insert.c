// SPDX-License-Identifier: MIT
/* quadgrid-bench: `insert`: building an index from empty, one box at a time. */
#include "bench.h"

/* insert: building an index from empty, one box at a time                  */

int run_insert(const options *o, const bench_peer *p) {
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
