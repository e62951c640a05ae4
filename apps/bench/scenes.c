// SPDX-License-Identifier: MIT
/* quadgrid-bench: `scenes`: the scene table (docs/workloads.md), every kind beside the
 * sort-and-sweep. */
#include "bench.h"

/* scenes: the scene table of docs/scenes.md                                */

/* The bar of the scene table: a frame in at most this many sort-and-sweep frames. */
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

int run_scenes(const options *o, const bench_peer *reference, const bench_peer *impls, int impl_count) {
    const int32_t total_frames = o->frames + WARMUP_FRAMES + o->age;
    qgw_sum *ref = calloc((size_t)total_frames, sizeof *ref);
    scene_worst *worst = calloc((size_t)impl_count, sizeof *worst);
    if (!ref || !worst) {
        free(ref), free(worst);
        return note("out of memory"), 1;
    }
    const bench_peer sweep = *reference;
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
