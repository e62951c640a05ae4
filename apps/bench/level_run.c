// SPDX-License-Identifier: MIT
/* quadgrid-bench: `level`: a static tile map and the agents that cross it. */
#include "bench.h"

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

int run_level(const options *o, const bench_peer *p) {
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
