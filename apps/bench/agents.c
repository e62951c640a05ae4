// SPDX-License-Identifier: MIT
/* quadgrid-bench: `agents` and `mixed` (moving squares, every pair every frame) and `drift`
 * (how a layout ages). */
#include "bench.h"

/* agents                                                                   */

/* `mixed` is `agents` with 1% of the agents 16 times larger: same frames,
 * same fields, same check. */
int run_agents(const options *o, const bench_peer *p) {
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

/* How a layout ages: `agents` frames measured fresh (after the
 * build and the warm-up), aged (after --age more frames, default 300), and
 * rebuilt (the same boxes inserted into a new index, which then gets the
 * same warm-up). A kind whose aged figure drifts above its fresh and rebuilt
 * ones loses speed to its layout, not to the scene. */
int run_drift(const options *o, const bench_peer *p) {
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
