// SPDX-License-Identifier: MIT
#include "raster.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "font.h"

enum { PALETTE = 64, BY_SPEED2 = 256 };
static uint32_t speed_palette[PALETTE];
// Indexed by squared speed, so drawing needs no square root per agent.
static uint32_t speed2_palette[BY_SPEED2];
static const float top_speed = 2.6f;

static uint32_t rgb(float r, float g, float b) {
    int R = (int)(r * 255.0f + 0.5f), G = (int)(g * 255.0f + 0.5f), B = (int)(b * 255.0f + 0.5f);
    return 0xff000000u | (uint32_t)R << 16 | (uint32_t)G << 8 | (uint32_t)B;
}

// Slow agents blue, through cyan, green and yellow, to fast ones red: the
// crowd's bounces show up as colour changes.
static void build_palette(void) {
    static const float stops[5][3] = {
        {0.20f, 0.35f, 1.00f}, {0.10f, 0.85f, 0.95f}, {0.25f, 0.90f, 0.30f},
        {1.00f, 0.90f, 0.15f}, {1.00f, 0.25f, 0.15f},
    };
    for (int k = 0; k < PALETTE; k++) {
        float t = (float)k / (PALETTE - 1) * 4.0f;
        int s = (int)t;
        if (s > 3) s = 3;
        float f = t - (float)s;
        speed_palette[k] = rgb(stops[s][0] + (stops[s + 1][0] - stops[s][0]) * f,
                               stops[s][1] + (stops[s + 1][1] - stops[s][1]) * f,
                               stops[s][2] + (stops[s + 1][2] - stops[s][2]) * f);
    }
    for (int k = 0; k < BY_SPEED2; k++) {
        float speed = sqrtf((float)k / (BY_SPEED2 - 1)) * top_speed;
        int j = (int)(speed / top_speed * (PALETTE - 1) + 0.5f);
        speed2_palette[k] = speed_palette[j < PALETTE ? j : PALETTE - 1];
    }
}

// floor for v >= -1, without a libm call (floorf is not inlined without SSE4.1).
static inline int floor_pos(float v) { return (int)(v + 1.0f) - 1; }

bool raster_init(raster *r, int width, int height) {
    if (!speed_palette[0]) build_palette();
    memset(r, 0, sizeof *r);
    r->width = width;
    r->height = height;
    r->pixels = malloc((size_t)width * (size_t)height * sizeof *r->pixels);
    return r->pixels != NULL;
}

void raster_free(raster *r) {
    free(r->pixels);
    memset(r, 0, sizeof *r);
}

raster_view raster_fit(const raster *r, float world_size, float zoom, float centre_x,
                       float centre_y) {
    int side = r->width < r->height ? r->width : r->height;
    raster_view v;
    v.scale = (float)side / world_size * zoom;
    v.origin_x = centre_x - 0.5f * (float)r->width / v.scale;
    v.origin_y = centre_y - 0.5f * (float)r->height / v.scale;
    return v;
}

void raster_clear(raster *r, uint32_t colour) {
    size_t n = (size_t)r->width * (size_t)r->height;
    uint32_t *p = r->pixels;
    for (size_t k = 0; k < n; k++) p[k] = colour;
}

static inline void fill(raster *r, int x0, int y0, int x1, int y1, uint32_t c) {
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 >= r->width) x1 = r->width - 1;
    if (y1 >= r->height) y1 = r->height - 1;
    for (int y = y0; y <= y1; y++) {
        uint32_t *row = r->pixels + (size_t)y * (size_t)r->width;
        for (int x = x0; x <= x1; x++) row[x] = c;
    }
}

void raster_agents(raster *r, const raster_view *v, const sim_world *w, raster_colour mode) {
    const float ox = v->origin_x, oy = v->origin_y, s = v->scale;
    const float fw = (float)r->width, fh = (float)r->height;
    const uint32_t dragon = 0xffff66ddu, hit = 0xffff5a28u, calm = 0xff2f5faau;
    uint32_t *pix = r->pixels;
    const size_t stride = (size_t)r->width;
    for (int32_t i = 0; i < w->n; i++) {
        float h = w->h[i];
        float sx0 = (w->x[i] - h - ox) * s, sx1 = (w->x[i] + h - ox) * s;
        float sy0 = (w->y[i] - h - oy) * s, sy1 = (w->y[i] + h - oy) * s;
        if (sx1 < 0.0f || sy1 < 0.0f || sx0 >= fw || sy0 >= fh) continue;
        uint32_t c;
        if (h > 8.0f) {
            c = dragon;
        } else if (mode == RASTER_BY_COLLISION) {
            c = w->hit_frame[i] == w->frame ? hit : calm;
        } else {
            float sp2 = w->vx[i] * w->vx[i] + w->vy[i] * w->vy[i];
            int k = (int)(sp2 * ((BY_SPEED2 - 1) / (top_speed * top_speed)));
            c = speed2_palette[k < BY_SPEED2 ? k : BY_SPEED2 - 1];
        }
        // Floor both edges; a box thinner than a pixel still covers one, and
        // an edge in the first half of a pixel leaves that pixel out.
        int x0 = floor_pos(sx0 < -1.0f ? -1.0f : sx0), x1 = floor_pos(sx1 > fw ? fw : sx1);
        int y0 = floor_pos(sy0 < -1.0f ? -1.0f : sy0), y1 = floor_pos(sy1 > fh ? fh : sy1);
        if (x1 > x0 && sx1 - (float)x1 < 0.5f) x1--;
        if (y1 > y0 && sy1 - (float)y1 < 0.5f) y1--;
        // Zoomed out, nearly every agent is 1 or 2 pixels a side, in a random
        // mix: four unconditional stores (duplicates when x0 == x1 or
        // y0 == y1) beat loops whose branches cannot be predicted.
        if (x1 - x0 <= 1 && y1 - y0 <= 1 && x0 >= 0 && y0 >= 0 && x1 < r->width &&
            y1 < r->height) {
            uint32_t *a = pix + (size_t)y0 * stride, *b = pix + (size_t)y1 * stride;
            a[x0] = c;
            a[x1] = c;
            b[x0] = c;
            b[x1] = c;
        } else {
            fill(r, x0, y0, x1, y1, c);
        }
    }
}

void raster_walls(raster *r, const raster_view *v, const sim_world *w) {
    const float ox = v->origin_x, oy = v->origin_y, s = v->scale;
    const float fw = (float)r->width, fh = (float)r->height;
    for (int32_t k = 0; k < w->nwalls; k++) {
        const qg_rect b = w->walls[k];
        float sx0 = (b.min_x - ox) * s, sx1 = (b.max_x - ox) * s;
        float sy0 = (b.min_y - oy) * s, sy1 = (b.max_y - oy) * s;
        if (sx1 < 0.0f || sy1 < 0.0f || sx0 >= fw || sy0 >= fh) continue;
        // Edges floored as the agents' are: neighbouring tiles meet without
        // a gap, so the walls read as solid rock.
        int x0 = floor_pos(sx0 < -1.0f ? -1.0f : sx0), x1 = floor_pos(sx1 > fw ? fw : sx1);
        int y0 = floor_pos(sy0 < -1.0f ? -1.0f : sy0), y1 = floor_pos(sy1 > fh ? fh : sy1);
        fill(r, x0, y0, x1, y1, RASTER_WALL);
    }
}

// A quarter of the line colour over the picture: the cells read as a faint
// mesh and the agents stay visible through it.
static inline uint32_t blend(uint32_t p, uint32_t c) {
    return 0xff000000u | (((p >> 1) & 0x7f7f7fu) + ((p >> 2) & 0x3f3f3fu) + ((c >> 2) & 0x3f3f3fu));
}

static void hline(raster *r, int x0, int x1, int y, uint32_t c) {
    if (y < 0 || y >= r->height) return;
    if (x0 < 0) x0 = 0;
    if (x1 >= r->width) x1 = r->width - 1;
    uint32_t *row = r->pixels + (size_t)y * (size_t)r->width;
    for (int x = x0; x <= x1; x++) row[x] = blend(row[x], c);
}

static void vline(raster *r, int x, int y0, int y1, uint32_t c) {
    if (x < 0 || x >= r->width) return;
    if (y0 < 0) y0 = 0;
    if (y1 >= r->height) y1 = r->height - 1;
    for (int y = y0; y <= y1; y++) {
        uint32_t *p = r->pixels + (size_t)y * (size_t)r->width + x;
        *p = blend(*p, c);
    }
}

typedef struct cell_ctx {
    raster *r;
    raster_view v;
} cell_ctx;

static void draw_cell(qg_rect cell, int depth, int32_t elements, void *user) {
    (void)elements;
    cell_ctx *ctx = user;
    raster *r = ctx->r;
    float s = ctx->v.scale;
    float sx0 = (cell.min_x - ctx->v.origin_x) * s, sx1 = (cell.max_x - ctx->v.origin_x) * s;
    float sy0 = (cell.min_y - ctx->v.origin_y) * s, sy1 = (cell.max_y - ctx->v.origin_y) * s;
    // Outlines of cells under 4 pixels would only paint the picture grey.
    if (sx1 - sx0 < 4.0f || sy1 - sy0 < 4.0f) return;
    float fw = (float)r->width, fh = (float)r->height;
    if (sx1 < 0.0f || sy1 < 0.0f || sx0 >= fw || sy0 >= fh) return;
    // Clamp before converting: a root cell far off-screen must not overflow int.
    int x0 = floor_pos(sx0 < -1.0f ? -1.0f : sx0), x1 = floor_pos(sx1 > fw ? fw : sx1);
    int y0 = floor_pos(sy0 < -1.0f ? -1.0f : sy0), y1 = floor_pos(sy1 > fh ? fh : sy1);
    static const uint32_t by_depth[4] = {0xffe0e0e0u, 0xffb8f0b8u, 0xff90d0ffu, 0xffffd090u};
    uint32_t c = by_depth[depth & 3];
    // All four edges: some kinds visit only occupied cells, so a neighbour
    // cannot be counted on to draw the shared edge.
    hline(r, x0, x1, y0, c);
    hline(r, x0, x1, y1, c);
    vline(r, x0, y0 + 1, y1 - 1, c);
    vline(r, x1, y0 + 1, y1 - 1, c);
}

void raster_cells(raster *r, const raster_view *v, const qg_index *index) {
    cell_ctx ctx = {r, *v};
    qg_visit(index, draw_cell, &ctx);
}

typedef struct probe_best {
    qg_handle h;
    float t;
} probe_best;

static float probe_closest(qg_handle h, float t, void *user) {
    probe_best *b = user;
    if (t < b->t || (t == b->t && h < b->h)) {
        b->h = h;
        b->t = t;
    }
    return t; // only hits no farther than this one from now on
}

qg_status raster_probe_update(raster_probe *p, const qg_index *index) {
    probe_best best = {-1, INFINITY};
    qg_status st = qg_raycast(index, p->ax, p->ay, p->bx - p->ax, p->by - p->ay, 1.0f, probe_closest, &best);
    if (st != QG_OK) return st;
    p->hit = best.h;
    p->hit_t = best.t;
    return qg_nearest(index, p->ax, p->ay, RASTER_PROBE_K, INFINITY, p->near, NULL, &p->nnear);
}

static void plot(raster *r, int x, int y, uint32_t c) {
    if (x >= 0 && y >= 0 && x < r->width && y < r->height) r->pixels[(size_t)y * (size_t)r->width + x] = c;
}

/// A solid line in screen coordinates, at most a few screens long.
static void line(raster *r, float x0, float y0, float x1, float y1, uint32_t c) {
    float dx = x1 - x0, dy = y1 - y0;
    float n = fabsf(dx) > fabsf(dy) ? fabsf(dx) : fabsf(dy);
    if (!(n < 16384.0f)) n = 16384.0f;
    int steps = (int)n + 1;
    for (int i = 0; i <= steps; i++) {
        float f = (float)i / (float)steps;
        plot(r, floor_pos(x0 + f * dx), floor_pos(y0 + f * dy), c);
    }
}

static void outline(raster *r, const raster_view *v, const qg_index *index, qg_handle h, uint32_t c) {
    qg_rect b;
    if (qg_get(index, h, &b) != QG_OK) return;
    float s = v->scale;
    // Two pixels out, so a one-pixel agent still shows a ring.
    float x0 = (b.min_x - v->origin_x) * s - 2.0f, x1 = (b.max_x - v->origin_x) * s + 2.0f;
    float y0 = (b.min_y - v->origin_y) * s - 2.0f, y1 = (b.max_y - v->origin_y) * s + 2.0f;
    line(r, x0, y0, x1, y0, c);
    line(r, x0, y1, x1, y1, c);
    line(r, x0, y0, x0, y1, c);
    line(r, x1, y0, x1, y1, c);
}

void raster_probe_draw(raster *r, const raster_view *v, const qg_index *index, const raster_probe *p) {
    float s = v->scale;
    float t = p->hit >= 0 ? p->hit_t : 1.0f;
    float ex = p->ax + t * (p->bx - p->ax), ey = p->ay + t * (p->by - p->ay);
    float sx = (p->ax - v->origin_x) * s, sy = (p->ay - v->origin_y) * s;
    for (int32_t i = 0; i < p->nnear; i++) outline(r, v, index, p->near[i], 0xff40e0f0u);
    line(r, sx, sy, (ex - v->origin_x) * s, (ey - v->origin_y) * s, 0xffffe040u);
    if (p->hit >= 0) outline(r, v, index, p->hit, 0xffffe040u);
    line(r, sx - 4.0f, sy, sx + 4.0f, sy, 0xffffffffu);
    line(r, sx, sy - 4.0f, sx, sy + 4.0f, 0xffffffffu);
}

int raster_text_width(const char *text, int scale) {
    int best = 0, cur = 0;
    for (const char *p = text; *p; p++) {
        if (*p == '\n') {
            cur = 0;
            continue;
        }
        cur += (FONT_W + 1) * scale;
        if (cur > best) best = cur;
    }
    return best;
}

void raster_text(raster *r, int x, int y, int scale, const char *text, uint32_t colour) {
    int lines = 1;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    int line_h = (FONT_H + 3) * scale;
    // A dark backing box keeps the text readable over a busy crowd.
    int pad = 2 * scale;
    int bx1 = x + raster_text_width(text, scale) + pad, by1 = y + lines * line_h + pad - 2 * scale;
    for (int yy = y - pad; yy <= by1; yy++) {
        if (yy < 0 || yy >= r->height) continue;
        uint32_t *row = r->pixels + (size_t)yy * (size_t)r->width;
        for (int xx = x - pad; xx <= bx1; xx++)
            if (xx >= 0 && xx < r->width) row[xx] = 0xff000000u | ((row[xx] >> 2) & 0x3f3f3fu);
    }
    int cx = x, cy = y;
    for (const char *p = text; *p; p++) {
        if (*p == '\n') {
            cx = x;
            cy += line_h;
            continue;
        }
        const uint8_t *g = font_glyph(*p);
        for (int row = 0; row < FONT_H; row++)
            for (int col = 0; col < FONT_W; col++)
                if (g[row] & (0x10 >> col))
                    fill(r, cx + col * scale, cy + row * scale, cx + col * scale + scale - 1,
                         cy + row * scale + scale - 1, colour);
        cx += (FONT_W + 1) * scale;
    }
}
