// SPDX-License-Identifier: MIT
// The interactive window: the same simulation and rasterizer as the batch
// runs, shown through an SDL2 streaming texture.
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "sim.h"

#ifndef QG_SIM_HAVE_SDL2

int view_run(sim_world *w, const sim_options *o) {
    (void)w;
    (void)o;
    fprintf(stderr, "quadgrid-sim: this build has no window (SDL2 was not found when it was "
                    "built).\n  Install libsdl2-dev and rebuild, or use --png / --video.\n");
    return 2;
}

#else

#include <SDL.h>

typedef struct view_state {
    float cx, cy, zoom; // world point at the window's centre, magnification
    bool paused, cells;
    raster_colour colour;
    char message[128];
    double message_until;
} view_state;

static void say(view_state *s, const char *msg) {
    snprintf(s->message, sizeof s->message, "%s", msg);
    s->message_until = sim_now_ms() + 2500.0;
}

static void switch_kind(sim_world *w, view_state *s, qg_kind kind) {
    char msg[128];
    if (!qg_kind_available(kind)) {
        snprintf(msg, sizeof msg, "kind %s is not built yet", qg_kind_name(kind));
    } else if (kind == QG_BRUTE_FORCE && w->n > 20000) {
        // Every pair of 100k agents is seconds a frame: the window would freeze.
        snprintf(msg, sizeof msg, "brute_force is for <= 20000 agents: press - first");
    } else {
        double t0 = sim_now_ms();
        qg_status st = world_build_index(w, kind);
        if (st == QG_OK)
            snprintf(msg, sizeof msg, "rebuilt as %s in %.1f ms", qg_kind_name(kind),
                     sim_now_ms() - t0);
        else
            snprintf(msg, sizeof msg, "cannot build %s: %s", qg_kind_name(kind),
                     qg_status_name(st));
    }
    say(s, msg);
}

static bool make_target(SDL_Renderer *ren, SDL_Texture **tex, raster *r, int width, int height) {
    if (*tex) SDL_DestroyTexture(*tex);
    raster_free(r);
    *tex = SDL_CreateTexture(ren, SDL_PIXELFORMAT_ARGB8888, SDL_TEXTUREACCESS_STREAMING, width,
                             height);
    return *tex && raster_init(r, width, height);
}

int view_run(sim_world *w, const sim_options *o) {
    const char *display = getenv("DISPLAY"), *wayland = getenv("WAYLAND_DISPLAY");
    const char *driver = getenv("SDL_VIDEODRIVER");
    if ((!display || !*display) && (!wayland || !*wayland) && (!driver || !*driver)) {
        fprintf(stderr, "quadgrid-sim: --view needs a display, and there is none (DISPLAY and "
                        "WAYLAND_DISPLAY are not set).\n  Run it on a desktop, under xvfb-run, "
                        "or use --png / --video instead.\n");
        return 2;
    }
    if (SDL_Init(SDL_INIT_VIDEO) != 0) {
        fprintf(stderr, "quadgrid-sim: cannot open a window: %s\n  Use --png / --video instead.\n",
                SDL_GetError());
        return 2;
    }
    SDL_Window *win = SDL_CreateWindow("quadgrid-sim", SDL_WINDOWPOS_CENTERED,
                                       SDL_WINDOWPOS_CENTERED, o->width, o->height,
                                       SDL_WINDOW_RESIZABLE);
    SDL_Renderer *ren = win ? SDL_CreateRenderer(win, -1, 0) : NULL;
    if (win && !ren) ren = SDL_CreateRenderer(win, -1, SDL_RENDERER_SOFTWARE);
    if (!win || !ren) {
        fprintf(stderr, "quadgrid-sim: cannot open a window: %s\n", SDL_GetError());
        if (win) SDL_DestroyWindow(win);
        SDL_Quit();
        return 2;
    }
    raster r = {0};
    SDL_Texture *tex = NULL;
    int rc = 0;
    if (!make_target(ren, &tex, &r, o->width, o->height)) {
        fprintf(stderr, "quadgrid-sim: cannot create the framebuffer: %s\n", SDL_GetError());
        rc = 1;
        goto done;
    }

    view_state s = {.cx = 0.5f * w->size, .cy = 0.5f * w->size, .zoom = o->zoom,
                    .cells = o->cells, .colour = o->colour};
    say(&s, "1-9 kind  c cells  v colour  space pause  +/- agents  click dragon  wheel zoom  "
            "right-drag ray + nearest");
    // The probe: a right-button drag casts a ray (closest hit) from where it
    // began and shows the agents nearest to that point; it stays on screen,
    // answered again every frame as the agents move.
    raster_probe probe = {0};
    bool probing = false, probe_drag = false;
    sim_times avg = {0}, t = {0};
    bool dragging = false, moved = false;
    int drag_x = 0, drag_y = 0;
    long frame = 0;
    const double frame_ms = 1000.0 / 60.0;
    bool running = true, shot = false;
    double started = sim_now_ms();
    while (running) {
        double f0 = sim_now_ms();
        raster_view v = raster_fit(&r, w->size, s.zoom, s.cx, s.cy);
        SDL_Event e;
        while (SDL_PollEvent(&e)) {
            switch (e.type) {
            case SDL_QUIT:
                running = false;
                break;
            case SDL_KEYDOWN: {
                SDL_Keycode k = e.key.keysym.sym;
                if (k == SDLK_ESCAPE || k == SDLK_q) running = false;
                else if (k >= SDLK_1 && k <= SDLK_9) switch_kind(w, &s, (qg_kind)(k - SDLK_1));
                else if (k >= SDLK_KP_1 && k <= SDLK_KP_9) switch_kind(w, &s, (qg_kind)(k - SDLK_KP_1));
                else if (k == SDLK_c) s.cells = !s.cells;
                else if (k == SDLK_v)
                    s.colour = s.colour == RASTER_BY_SPEED ? RASTER_BY_COLLISION : RASTER_BY_SPEED;
                else if (k == SDLK_SPACE) s.paused = !s.paused;
                else if (k == SDLK_PLUS || k == SDLK_EQUALS || k == SDLK_KP_PLUS) {
                    qg_status st = world_add_random(w, 10000);
                    say(&s, st == QG_OK ? "added 10000 agents" : qg_status_name(st));
                } else if (k == SDLK_MINUS || k == SDLK_KP_MINUS) {
                    world_remove_last(w, 10000);
                    say(&s, "removed 10000 agents");
                } else if (k == SDLK_0 || k == SDLK_HOME) {
                    s.cx = s.cy = 0.5f * w->size;
                    s.zoom = 1.0f;
                }
                break;
            }
            case SDL_MOUSEBUTTONDOWN:
                if (e.button.button == SDL_BUTTON_RIGHT) {
                    probing = probe_drag = true;
                    probe.ax = probe.bx = v.origin_x + (float)e.button.x / v.scale;
                    probe.ay = probe.by = v.origin_y + (float)e.button.y / v.scale;
                }
                if (e.button.button == SDL_BUTTON_LEFT) {
                    dragging = true;
                    moved = false;
                    drag_x = e.button.x;
                    drag_y = e.button.y;
                }
                break;
            case SDL_MOUSEMOTION:
                if (probe_drag) {
                    probe.bx = v.origin_x + (float)e.motion.x / v.scale;
                    probe.by = v.origin_y + (float)e.motion.y / v.scale;
                }
                if (dragging) {
                    int dx = e.motion.x - drag_x, dy = e.motion.y - drag_y;
                    if (moved || dx * dx + dy * dy > 16) {
                        moved = true;
                        s.cx -= (float)dx / v.scale;
                        s.cy -= (float)dy / v.scale;
                        drag_x = e.motion.x;
                        drag_y = e.motion.y;
                        v = raster_fit(&r, w->size, s.zoom, s.cx, s.cy);
                    }
                }
                break;
            case SDL_MOUSEBUTTONUP:
                if (e.button.button == SDL_BUTTON_RIGHT && probe_drag) {
                    probe_drag = false;
                    char msg[128];
                    if (raster_probe_update(&probe, w->index) == QG_OK) {
                        snprintf(msg, sizeof msg, "ray hit %d at t %.3f, %d nearest: first %d", probe.hit,
                                 (double)probe.hit_t, probe.nnear, probe.nnear > 0 ? probe.near[0] : -1);
                        printf("probe: ray (%.2f, %.2f) -> (%.2f, %.2f): %s\n", (double)probe.ax, (double)probe.ay,
                               (double)probe.bx, (double)probe.by, msg);
                        say(&s, msg);
                    }
                }
                if (e.button.button == SDL_BUTTON_LEFT && dragging && !moved) {
                    float wx = v.origin_x + (float)e.button.x / v.scale;
                    float wy = v.origin_y + (float)e.button.y / v.scale;
                    qg_status st = world_add_dragon(w, wx, wy);
                    say(&s, st == QG_OK ? "a dragon!" : qg_status_name(st));
                }
                if (e.button.button == SDL_BUTTON_LEFT) dragging = false;
                break;
            case SDL_MOUSEWHEEL: {
                int mx, my;
                SDL_GetMouseState(&mx, &my);
                // Keep the world point under the mouse where it is.
                float wx = v.origin_x + (float)mx / v.scale, wy = v.origin_y + (float)my / v.scale;
                float f = e.wheel.y > 0 ? 1.25f : (e.wheel.y < 0 ? 0.8f : 1.0f);
                s.zoom *= f;
                if (s.zoom < 0.25f) s.zoom = 0.25f;
                if (s.zoom > 500.0f) s.zoom = 500.0f;
                float scale = raster_fit(&r, w->size, s.zoom, 0.0f, 0.0f).scale;
                s.cx = wx - ((float)mx - 0.5f * (float)r.width) / scale;
                s.cy = wy - ((float)my - 0.5f * (float)r.height) / scale;
                v = raster_fit(&r, w->size, s.zoom, s.cx, s.cy);
                break;
            }
            case SDL_WINDOWEVENT:
                if (e.window.event == SDL_WINDOWEVENT_SIZE_CHANGED && e.window.data1 >= 64 &&
                    e.window.data2 >= 64) {
                    if (!make_target(ren, &tex, &r, e.window.data1, e.window.data2)) {
                        fprintf(stderr, "quadgrid-sim: out of memory on resize\n");
                        rc = 1;
                        goto done;
                    }
                    v = raster_fit(&r, w->size, s.zoom, s.cx, s.cy);
                }
                break;
            default:
                break;
            }
        }
        if (!running) break;

        if (!s.paused) {
            qg_status st = sim_step(w, &t);
            if (st != QG_OK) say(&s, qg_status_name(st));
            double a = frame == 0 ? 1.0 : 0.05;
            avg.move += a * (t.move - avg.move);
            avg.update += a * (t.update - avg.update);
            avg.pairs += a * (t.pairs - avg.pairs);
            avg.response += a * (t.response - avg.response);
            avg.cleanup += a * (t.cleanup - avg.cleanup);
            frame++;
        }
        char extra[200], text[512];
        snprintf(extra, sizeof extra, "frame %ld%s%s%s", frame, s.paused ? "  [paused]" : "",
                 sim_now_ms() < s.message_until ? "\n" : "",
                 sim_now_ms() < s.message_until ? s.message : "");
        sim_overlay(text, sizeof text, w, &avg, extra);
        double d0 = sim_now_ms();
        sim_draw(&r, &v, w, s.cells, s.colour, text);
        if (probing && raster_probe_update(&probe, w->index) == QG_OK) raster_probe_draw(&r, &v, w->index, &probe);
        avg.draw += (frame <= 1 ? 1.0 : 0.05) * (sim_now_ms() - d0 - avg.draw);
        SDL_UpdateTexture(tex, NULL, r.pixels, r.width * (int)sizeof *r.pixels);
        SDL_RenderClear(ren);
        SDL_RenderCopy(ren, tex, NULL, NULL);
        SDL_RenderPresent(ren);

        if (o->screenshot && !shot && frame >= o->screenshot_frame) {
            shot = true;
            if (png_write(o->screenshot, &r)) fprintf(stderr, "quadgrid-sim: wrote %s\n", o->screenshot);
            else rc = 1;
        }
        if (o->frames_set && frame >= o->frames) running = false;
        if (o->seconds > 0 && sim_now_ms() - started >= o->seconds * 1000.0) running = false;
        // Real time: at most 60 simulated frames a second.
        double spent = sim_now_ms() - f0;
        if (spent < frame_ms) SDL_Delay((Uint32)(frame_ms - spent));
    }
done:
    raster_free(&r);
    if (tex) SDL_DestroyTexture(tex);
    SDL_DestroyRenderer(ren);
    SDL_DestroyWindow(win);
    SDL_Quit();
    return rc;
}

#endif
