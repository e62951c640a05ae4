// SPDX-License-Identifier: MIT
/* quadgrid-bench: `check`: the sort-and-sweep reference against plain loops. */
#include "bench.h"

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

int run_check(const options *o) {
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
