// SPDX-License-Identifier: MIT
// clock_gettime needs POSIX.
#define _POSIX_C_SOURCE 200809L

#include "sim.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

double sim_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

qg_status sim_step(sim_world *w, sim_times *t) {
    double t0 = sim_now_ms();
    world_move(w);
    double t1 = sim_now_ms();
    qg_status st = world_update_index(w);
    double t2 = sim_now_ms();
    // The frame the README gives: move what moved, clean up once, then ask
    // for the pairs (the point grid re-sorts in qg_cleanup, and its pair
    // search is several times slower on moves it has not sorted yet).
    world_cleanup(w);
    double t3 = sim_now_ms();
    if (st == QG_OK) st = world_find_pairs(w);
    double t4 = sim_now_ms();
    if (st == QG_OK) world_respond(w);
    double t5 = sim_now_ms();
    t->move = t1 - t0;
    t->update = t2 - t1;
    t->cleanup = t3 - t2;
    t->pairs = t4 - t3;
    t->response = t5 - t4;
    return st;
}

void sim_draw(raster *r, const raster_view *v, const sim_world *w, bool cells,
              raster_colour colour, const char *overlay) {
    raster_clear(r, 0xff0c0f14u);
    if (w->nwalls > 0) raster_walls(r, v, w);
    raster_agents(r, v, w, colour);
    if (cells) raster_cells(r, v, w->index);
    if (overlay && *overlay) {
        int scale = r->width >= 900 ? 2 : 1;
        raster_text(r, 8 * scale, 8 * scale, scale, overlay, 0xfff0f0f0u);
    }
}

void sim_overlay(char *buf, size_t cap, const sim_world *w, const sim_times *avg,
                 const char *extra) {
    char level[96] = "";
    if (w->level)
        snprintf(level, sizeof level, "\n%d static walls  wall pairs %zu  bounces %" PRIu64, (int)w->nwalls,
                 w->nwall_pairs, w->wall_bounces);
    snprintf(buf, cap,
             "%d agents  kind %s\n"
             "sim %.2f ms/frame (move %.2f, update %.2f, pairs %.2f, response %.2f)\n"
             "draw %.2f ms  pairs %zu%s%s%s",
             (int)w->n, qg_kind_name(w->kind), sim_ms(avg), avg->move, avg->update, avg->pairs,
             avg->response, avg->draw, w->npairs, level, extra && *extra ? "\n" : "", extra ? extra : "");
}
