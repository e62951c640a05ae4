// SPDX-License-Identifier: MIT
// What main.c (batch runs) and view.c (the window) share: one timed frame of
// the simulation, and drawing a frame with its overlay.
#ifndef QG_SIM_SIM_H
#define QG_SIM_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "raster.h"
#include "world.h"

/// Milliseconds each part of one frame took.
typedef struct sim_times {
    double move, update, pairs, response, cleanup, draw;
} sim_times;

/// Everything but drawing: the figure the bars are about.
static inline double sim_ms(const sim_times *t) {
    return t->move + t->update + t->pairs + t->response + t->cleanup;
}

typedef struct sim_options {
    int32_t agents;
    long frames;         // 0 = until closed (window) or the default (batch)
    bool frames_set;
    double seconds;      // > 0: also stop after this much wall time
    qg_kind kind;
    bool kind_set;
    uint64_t seed;
    int32_t dragons;
    sim_start start;
    int width, height;
    float zoom;
    const char *png, *video, *hash_log, *screenshot;
    long screenshot_frame;
    int fps;
    int32_t threads;     // workers for the index calls and the motion (default: cores)
    bool cells, json, quiet, view, progress, workload_order;
    bool level;          // --level: walls (static elements) and overlap events
    int level_walls;     // percent of the map under walls (default 40)
    raster_colour colour;
} sim_options;

/// A monotonic clock in milliseconds.
double sim_now_ms(void);

/// One frame: move, index update, pairs, response, cleanup, each timed.
qg_status sim_step(sim_world *w, sim_times *t);

/// Clears, draws the agents, the cells (if asked) and the overlay text.
void sim_draw(raster *r, const raster_view *v, const sim_world *w, bool cells,
              raster_colour colour, const char *overlay);

/// Formats the overlay: agents, kind, ms per frame split.
void sim_overlay(char *buf, size_t cap, const sim_world *w, const sim_times *avg,
                 const char *extra);

/// Runs the interactive window; returns the process exit code (2 when there
/// is no display or the program was built without SDL2).
int view_run(sim_world *w, const sim_options *o);

#endif
