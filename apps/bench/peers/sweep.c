/* sweep: the classic sort-and-sweep on x, as the baseline every spatial index
 * should beat. The update step re-sorts (radix sort of the min_x bits, so it
 * costs the same every frame whatever the motion); the pairs step sweeps. */
#include "peer.h"

#include <stdlib.h>

#include "workload.h"

struct bench_impl {
    qgw_sweep sweep;
    bool nomem;
};

static bool sw_create(bench_impl **out, const bench_setup *setup, const void *arg) {
    (void)setup, (void)arg;
    *out = calloc(1, sizeof **out);
    return *out != NULL;
}

static bool sw_update(bench_impl *s, const qg_rect *boxes, int32_t n) {
    s->nomem = !qgw_sweep_sort(&s->sweep, boxes, n);
    return !s->nomem;
}

static bool sw_build(bench_impl *s, const qg_rect *boxes, int32_t n, bool bulk) {
    (void)bulk;
    return sw_update(s, boxes, n);
}

static bool sw_pairs(bench_impl *s, qg_pair_fn *fn, void *user) {
    qgw_sweep_pairs(&s->sweep, fn, user);
    return true;
}

static bool sw_query(bench_impl *s, qg_rect area, qg_query_fn *fn, void *user) {
    qgw_sweep_query(&s->sweep, area, fn, user);
    return true;
}

static size_t sw_bytes(bench_impl *s) {
    return qgw_sweep_bytes(&s->sweep);
}

static void sw_destroy(bench_impl *s) {
    if (!s) return;
    qgw_sweep_free(&s->sweep);
    free(s);
}

static const char *sw_error(bench_impl *s) {
    return s->nomem ? "out of memory" : NULL;
}

const bench_vtable bench_sweep_vtable = {
    sw_create, sw_build, sw_update, sw_pairs, sw_query, sw_bytes, sw_destroy, sw_error, NULL, NULL,
};
