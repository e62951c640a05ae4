// SPDX-License-Identifier: MIT
/* quadgrid-bench: `rollback`: what an index's state costs to carry, per
 * quadgrid kind (peers have no such calls). N agents from qg_default_config,
 * aged 20 frames of the agents workload; then, each timed `repeat` times
 * and the median kept: a memcpy of memory_bytes (the yardstick), qg_copy
 * into a copy of the same index (equal capacities: the rollback a game does
 * every frame), qg_snapshot_write into a buffer of qg_snapshot_size,
 * qg_snapshot_read from it, qg_clone. Every buffer is touched before it is
 * timed, so no figure includes page faults of fresh memory. */
#include "bench.h"

static uint64_t time_copy(qg_index *dst, const qg_index *src, int *bad)
{
    const uint64_t t0 = qgw_now_ns();
    *bad |= qg_copy(dst, src) != QG_OK;
    return qgw_now_ns() - t0;
}

int run_rollback(const options *o, const bench_peer *p)
{
    if (p->vt != &bench_quadgrid_vtable || p->arg == NULL) {
        note("%s has no rollback workload (quadgrid kinds only)", p->name);
        return 0;
    }
    const qg_kind kind = *(const qg_kind *)p->arg;
    qgw_agents a;
    if (!qgw_agents_init(&a, o->n)) return note("out of memory for %d boxes", o->n), 1;
    qg_config c = qg_default_config(kind);
    qg_index *ix = NULL, *dst = NULL;
    int bad = qg_create(&c, &ix) != QG_OK;
    qg_handle *h = malloc(sizeof *h * (size_t)(a.n > 0 ? a.n : 1));
    uint64_t *ns[5];
    for (int k = 0; k < 5; ++k) ns[k] = calloc((size_t)o->repeat, sizeof(uint64_t));
    bad |= h == NULL || ns[4] == NULL || ns[3] == NULL || ns[2] == NULL || ns[1] == NULL || ns[0] == NULL;
    if (!bad) bad |= qg_insert_many(ix, a.boxes, a.n, h) != QG_OK;
    for (int f = 0; f < 20 && !bad; ++f) {
        qgw_agents_move(&a);
        for (int32_t i = 0; i < a.n; ++i) bad |= qg_move(ix, h[i], a.boxes[i]) != QG_OK;
        qg_cleanup(ix);
    }
    if (!bad) bad |= qg_clone(ix, &dst) != QG_OK;
    const size_t bytes = bad ? 0 : qg_get_stats(ix).memory_bytes;
    const size_t snap = bad ? 0 : qg_snapshot_size(ix);
    unsigned char *from = bad ? NULL : malloc(bytes), *to = bad ? NULL : malloc(bytes);
    unsigned char *buf = bad ? NULL : malloc(snap);
    bad |= from == NULL || to == NULL || buf == NULL;
    if (!bad) {
        memset(from, 1, bytes), memset(to, 2, bytes), memset(buf, 3, snap);
        bad |= qg_copy(dst, ix) != QG_OK; /* the same capacities from here on */
    }
    for (int32_t r = 0; r < o->repeat && !bad; ++r) {
        uint64_t t0 = qgw_now_ns();
        memcpy(to, from, bytes);
        ns[0][r] = qgw_now_ns() - t0;
        from[r % (bytes ? bytes : 1)] ^= to[(r * 7) % (bytes ? bytes : 1)]; /* keep the copy */
        ns[1][r] = time_copy(dst, ix, &bad);
        t0 = qgw_now_ns();
        bad |= qg_snapshot_write(ix, buf, snap) != QG_OK;
        ns[2][r] = qgw_now_ns() - t0;
        qg_index *back = NULL;
        t0 = qgw_now_ns();
        bad |= qg_snapshot_read(buf, snap, NULL, &back) != QG_OK;
        ns[3][r] = qgw_now_ns() - t0;
        qg_destroy(back);
        qg_index *cl = NULL;
        t0 = qgw_now_ns();
        bad |= qg_clone(ix, &cl) != QG_OK;
        ns[4][r] = qgw_now_ns() - t0;
        qg_destroy(cl);
    }
    int rc = 0;
    if (bad) {
        rc = 1;
        note("%s: rollback failed", p->name);
    } else {
        const double m = median_ms(ns[0], o->repeat), cp = median_ms(ns[1], o->repeat),
                     w = median_ms(ns[2], o->repeat), rd = median_ms(ns[3], o->repeat),
                     cl = median_ms(ns[4], o->repeat);
        field fs[] = {
            FS("workload", "rollback"),   FS("kind", p->name),
            FI("n", a.n),                 FI("repeat", o->repeat),
            FI("memory_bytes", bytes),    FI("snapshot_bytes", snap),
            FD("memcpy_ms", m),           FD("copy_ms", cp),
            FD("write_ms", w),            FD("read_ms", rd),
            FD("clone_ms", cl),           FR("copy_per_memcpy", m > 0 ? cp / m : 0.0),
            FR("write_per_memcpy", m > 0 ? w / m : 0.0), FR("read_per_memcpy", m > 0 ? rd / m : 0.0),
        };
        emit(o, fs, (int)(sizeof fs / sizeof fs[0]));
    }
    qg_destroy(dst), qg_destroy(ix);
    free(from), free(to), free(buf), free(h);
    for (int k = 0; k < 5; ++k) free(ns[k]);
    qgw_agents_free(&a);
    return rc;
}
