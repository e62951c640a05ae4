// SPDX-License-Identifier: MIT
// A CPU rasterizer into a 32-bit framebuffer (0xAARRGGBB in a uint32_t, which
// is B,G,R,A in memory on little-endian machines: what SDL's ARGB8888 textures
// and ffmpeg's "bgra" input expect without a conversion).
#ifndef QG_SIM_RASTER_H
#define QG_SIM_RASTER_H

#include <stdbool.h>
#include <stdint.h>

#include "world.h"

typedef struct raster {
    int width, height;
    uint32_t *pixels; // width*height, rows top to bottom
} raster;

/// Which part of the world the picture shows: screen = (world - origin) * scale.
typedef struct raster_view {
    float origin_x, origin_y, scale;
} raster_view;

typedef enum raster_colour {
    RASTER_BY_SPEED,     ///< slow blue to fast red
    RASTER_BY_COLLISION, ///< agents that collided this frame stand out
} raster_colour;

bool raster_init(raster *r, int width, int height);
void raster_free(raster *r);

/// The whole world, centred, shrunk by `zoom` (1 = whole world fits).
raster_view raster_fit(const raster *r, float world_size, float zoom, float centre_x,
                       float centre_y);

void raster_clear(raster *r, uint32_t colour);
void raster_agents(raster *r, const raster_view *v, const sim_world *w, raster_colour mode);
/// The colour walls (--level) are drawn in: slate, apart from every agent colour.
#define RASTER_WALL 0xff3c4454u
/// --level's walls, filled in RASTER_WALL (draw before the agents).
void raster_walls(raster *r, const raster_view *v, const sim_world *w);
/// The index's nodes or cells, from qg_visit, as outlines blended over the picture.
void raster_cells(raster *r, const raster_view *v, const qg_index *index);
/// Elements the window's probe highlights around its point.
#define RASTER_PROBE_K 8

/// The window's probe (right-button drag): a ray cast from (ax, ay) towards
/// (bx, by), its closest hit, and the elements nearest to (ax, ay), as the
/// index answers qg_raycast and qg_nearest.
typedef struct raster_probe {
    float ax, ay, bx, by;
    qg_handle hit; ///< the closest hit, -1 for none
    float hit_t;   ///< its entry parameter, in units of (b - a)
    qg_handle near[RASTER_PROBE_K];
    int32_t nnear;
} raster_probe;

/// Asks the index for the probe's closest hit and nearest elements.
qg_status raster_probe_update(raster_probe *p, const qg_index *index);
/// The probe's ray (to its hit or its end), the hit box outlined in yellow,
/// the nearest boxes in cyan.
void raster_probe_draw(raster *r, const raster_view *v, const qg_index *index, const raster_probe *p);

/// Text in the built-in 5x7 font, scaled up by `scale`, on a dark box.
void raster_text(raster *r, int x, int y, int scale, const char *text, uint32_t colour);
/// Width in pixels of text at the given scale.
int raster_text_width(const char *text, int scale);

#endif
