// SPDX-License-Identifier: MIT
// quadgrid-sim: agents moving and bouncing off each other, found through any
// quadgrid index kind, timed, and drawn to a PNG, a video or a window.
//
// POSIX for isatty, getrusage and SIGPIPE.
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "output.h"
#include "sim.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: quadgrid-sim [options]\n"
            "Agents move, collide through a quadgrid index, push apart and bounce.\n"
            "\n"
            "  --agents N          number of agents (default 100000)\n"
            "  --frames N          frames to simulate (default 300; with --view: until closed)\n"
            "  --seconds S         also stop after S seconds of wall time\n"
            "  --kind NAME         index kind (default: the fastest built for the scene)\n"
            "  --list-kinds        print every kind and whether it is built, then exit\n"
            "  --version           print the library's version, then exit\n"
            "  --seed N            random seed (default 12345: the `agents` workload)\n"
            "  --threads N         workers for the motion and the index calls\n"
            "                      (qg_move_many, qg_cleanup_parallel, qg_pairs_parallel);\n"
            "                      default: the number of cores; 1 = the one-thread calls\n"
            "  --start MODE        uniform (default), clusters or spot (all in one spot)\n"
            "  --dragons N         make N agents dragons, 20-50x larger (mixed sizes)\n"
            "  --level             walls: the `level` workload's tile map (16x16 tiles on 40%%\n"
            "                      of the world), static elements (qg_set_static) the agents\n"
            "                      bounce off when their overlap begins (qg_pair_events)\n"
            "  --level-walls P     with --level: tiles on P%% of the map (default 40)\n"
            "  --png FILE          write the last frame as a PNG\n"
            "  --video FILE        encode every frame with ffmpeg (.mp4, .gif, ...)\n"
            "  --fps N             video frame rate (default 30)\n"
            "  --size W[xH]        picture size in pixels (default 1024)\n"
            "  --zoom Z            magnify the picture around the world's centre (default 1)\n"
            "  --cells             draw the index's nodes/cells over the agents\n"
            "  --color MODE        speed (default) or collision\n"
            "  --view              open an interactive window (SDL2)\n"
            "  --screenshot FILE   with --view: save the window's picture as a PNG...\n"
            "  --screenshot-frame N  ...after frame N (default 60)\n"
            "  --json              print one JSON line of results at the end (table to stderr)\n"
            "  --hash-log FILE     write 'frame pairs hash' per frame (determinism checks)\n"
            "  --quiet             no summary table\n"
            "  --workload-order    keep agents in the workload generator's order (default:\n"
            "                      renumbered in Z-order of their start positions)\n"
            "  --no-progress       no progress bar\n"
            "\n"
            "Window keys: 1-9 switch kind, c cells, v colouring, space pause, +/- add/remove\n"
            "10000 agents, click spawns a dragon, wheel zooms, drag pans, 0 resets the view,\n"
            "right-button drag casts a ray (its closest hit in yellow, qg_raycast) and rings the\n"
            "8 agents nearest to where it began (cyan, qg_nearest), Esc quits.\n");
}

static bool parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static int bad(const char *opt, const char *val) {
    fprintf(stderr, "quadgrid-sim: bad value for %s: '%s' (see --help)\n", opt, val ? val : "");
    return 1;
}

static void list_kinds(void) {
    for (int k = 0; k < QG_KIND_COUNT; k++)
        printf("%d %-16s %s\n", k + 1, qg_kind_name((qg_kind)k),
               qg_kind_available((qg_kind)k) ? "built" : "not built");
}

// Returns -1 to go on, else an exit code.
static int parse(int argc, char **argv, sim_options *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        long v;
#define NEED_VAL                                                      \
    do {                                                              \
        if (!val) {                                                   \
            fprintf(stderr, "quadgrid-sim: %s needs a value\n", a);   \
            return 1;                                                 \
        }                                                             \
        i++;                                                          \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--list-kinds")) {
            list_kinds();
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("quadgrid-sim %d.%d.%d\n", QG_VERSION_MAJOR, QG_VERSION_MINOR, QG_VERSION_PATCH);
            return 0;
        } else if (!strcmp(a, "--agents")) {
            NEED_VAL;
            if (!parse_long(val, 1, 50000000, &v)) return bad(a, val);
            o->agents = (int32_t)v;
        } else if (!strcmp(a, "--frames")) {
            NEED_VAL;
            if (!parse_long(val, 1, 100000000, &v)) return bad(a, val);
            o->frames = v;
            o->frames_set = true;
        } else if (!strcmp(a, "--seconds")) {
            NEED_VAL;
            char *end;
            o->seconds = strtod(val, &end);
            if (end == val || *end || !(o->seconds > 0)) return bad(a, val);
        } else if (!strcmp(a, "--kind")) {
            NEED_VAL;
            if (qg_kind_from_name(val, &o->kind) != QG_OK) {
                fprintf(stderr, "quadgrid-sim: unknown kind '%s'; kinds are:\n", val);
                list_kinds();
                return 1;
            }
            o->kind_set = true;
        } else if (!strcmp(a, "--seed")) {
            NEED_VAL;
            char *end;
            errno = 0;
            o->seed = strtoull(val, &end, 0);
            if (errno || end == val || *end) return bad(a, val);
        } else if (!strcmp(a, "--start")) {
            NEED_VAL;
            if (!strcmp(val, "uniform")) o->start = SIM_START_UNIFORM;
            else if (!strcmp(val, "clusters")) o->start = SIM_START_CLUSTERS;
            else if (!strcmp(val, "spot")) o->start = SIM_START_SPOT;
            else return bad(a, val);
        } else if (!strcmp(a, "--dragons")) {
            NEED_VAL;
            if (!parse_long(val, 0, 1000000, &v)) return bad(a, val);
            o->dragons = (int32_t)v;
        } else if (!strcmp(a, "--level")) {
            o->level = true;
        } else if (!strcmp(a, "--level-walls")) {
            NEED_VAL;
            if (!parse_long(val, 0, 100, &v)) return bad(a, val);
            o->level_walls = (int)v;
            o->level = true;
        } else if (!strcmp(a, "--png")) {
            NEED_VAL;
            o->png = val;
        } else if (!strcmp(a, "--video")) {
            NEED_VAL;
            o->video = val;
        } else if (!strcmp(a, "--fps")) {
            NEED_VAL;
            if (!parse_long(val, 1, 240, &v)) return bad(a, val);
            o->fps = (int)v;
        } else if (!strcmp(a, "--size")) {
            NEED_VAL;
            int w = 0, h = 0;
            char tail;
            int got = sscanf(val, "%dx%d%c", &w, &h, &tail);
            if (got == 1) h = w;
            if ((got != 1 && got != 2) || w < 64 || h < 64 || w > 8192 || h > 8192)
                return bad(a, val);
            o->width = w;
            o->height = h;
        } else if (!strcmp(a, "--zoom")) {
            NEED_VAL;
            char *end;
            o->zoom = strtof(val, &end);
            if (end == val || *end || !(o->zoom >= 0.05f && o->zoom <= 1000.0f)) return bad(a, val);
        } else if (!strcmp(a, "--cells")) {
            o->cells = true;
        } else if (!strcmp(a, "--color") || !strcmp(a, "--colour")) {
            NEED_VAL;
            if (!strcmp(val, "speed")) o->colour = RASTER_BY_SPEED;
            else if (!strcmp(val, "collision")) o->colour = RASTER_BY_COLLISION;
            else return bad(a, val);
        } else if (!strcmp(a, "--view")) {
            o->view = true;
        } else if (!strcmp(a, "--screenshot")) {
            NEED_VAL;
            o->screenshot = val;
        } else if (!strcmp(a, "--screenshot-frame")) {
            NEED_VAL;
            if (!parse_long(val, 1, 100000000, &v)) return bad(a, val);
            o->screenshot_frame = v;
        } else if (!strcmp(a, "--threads")) {
            NEED_VAL;
            if (!parse_long(val, 1, 256, &v)) return bad(a, val);
            o->threads = (int32_t)v;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--hash-log")) {
            NEED_VAL;
            o->hash_log = val;
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = true;
        } else if (!strcmp(a, "--workload-order")) {
            o->workload_order = true;
        } else if (!strcmp(a, "--no-progress")) {
            o->progress = false;
        } else {
            fprintf(stderr, "quadgrid-sim: unknown option '%s' (see --help)\n", a);
            return 1;
        }
#undef NEED_VAL
    }
    return -1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Median and maximum of n samples; sorts a scratch copy.
static void stats(const double *v, long n, double *scratch, double *median, double *max) {
    *median = *max = 0.0;
    if (n <= 0) return;
    memcpy(scratch, v, (size_t)n * sizeof *v);
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_double);
    *median = n % 2 ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
    *max = scratch[n - 1];
}

static size_t peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024u; // kilobytes on Linux
}

static void progress(long frame, long frames, double ms) {
    enum { WIDTH = 30 };
    int filled = frames > 0 ? (int)(WIDTH * frame / frames) : 0;
    char bar[WIDTH + 1];
    for (int k = 0; k < WIDTH; k++) bar[k] = k < filled ? '#' : '.';
    bar[WIDTH] = 0;
    fprintf(stderr, "\r[%s] %ld/%ld frames  %.2f ms/frame", bar, frame, frames, ms);
    fflush(stderr);
}

static const char *fmt_bytes(char *buf, size_t cap, size_t b) {
    if (b >= 10u * 1024 * 1024) snprintf(buf, cap, "%.1f MB", (double)b / (1024.0 * 1024.0));
    else snprintf(buf, cap, "%.1f KB", (double)b / 1024.0);
    return buf;
}

typedef struct frame_rec {
    sim_times t;
    size_t pairs;
} frame_rec;

// The batch run: simulate, time, draw to PNG/video, summarise. Every exit
// goes through one cleanup so leak checkers see a clean process.
static int run_batch(sim_world *w, sim_options *o, double build_ms) {
    long frames = o->frames_set ? o->frames : 300;
    bool drawing = o->png || o->video;
    if (o->video) {
        // yuv420p wants even sizes.
        o->width &= ~1;
        o->height &= ~1;
    }
    int rc = 1;
    raster r = {0};
    video vid = {0};
    FILE *hash_log = NULL;
    // Grown as frames go by: --seconds may stop long before --frames.
    long rec_cap = frames < 4096 ? frames : 4096;
    frame_rec *rec = malloc((size_t)rec_cap * sizeof *rec);
    double *col = NULL, *scratch = NULL;
    if (!rec || (drawing && !raster_init(&r, o->width, o->height))) {
        fprintf(stderr, "quadgrid-sim: out of memory\n");
        goto out;
    }
    if (o->hash_log && !(hash_log = fopen(o->hash_log, "w"))) {
        perror(o->hash_log);
        goto out;
    }
    if (o->video) {
        // A dying ffmpeg must give an error message, not a silent SIGPIPE death.
        signal(SIGPIPE, SIG_IGN);
        if (!video_open(&vid, o->video, r.width, r.height, o->fps)) goto out;
    }
    raster_view view = {0};
    if (drawing) view = raster_fit(&r, w->size, o->zoom, 0.5f * w->size, 0.5f * w->size);

    bool tty = o->progress && isatty(2);
    double start = sim_now_ms(), last_bar = 0.0;
    size_t index_peak = 0;
    sim_times avg = {0};
    long done = 0;
    for (long f = 0; f < frames; f++) {
        if (f == rec_cap) {
            long cap = rec_cap * 2 < frames ? rec_cap * 2 : frames;
            frame_rec *p = realloc(rec, (size_t)cap * sizeof *p);
            if (!p) {
                fprintf(stderr, "quadgrid-sim: out of memory at frame %ld\n", f + 1);
                goto out;
            }
            rec = p;
            rec_cap = cap;
        }
        sim_times *t = &rec[f].t;
        qg_status st = sim_step(w, t);
        if (st != QG_OK) {
            fprintf(stderr, "quadgrid-sim: frame %ld failed: %s\n", f + 1, qg_status_name(st));
            goto out;
        }
        rec[f].pairs = w->npairs;
        // A running average keeps the overlay's figures from flickering.
        double a = f == 0 ? 1.0 : 0.1;
        avg.move += a * (t->move - avg.move);
        avg.update += a * (t->update - avg.update);
        avg.pairs += a * (t->pairs - avg.pairs);
        avg.response += a * (t->response - avg.response);
        avg.cleanup += a * (t->cleanup - avg.cleanup);
        if (hash_log) fprintf(hash_log, "%ld %zu %016" PRIx64 "\n", f + 1, w->npairs, world_hash(w));
        t->draw = 0.0;
        if (drawing) {
            char text[512];
            sim_overlay(text, sizeof text, w, &avg, NULL);
            double d0 = sim_now_ms();
            sim_draw(&r, &view, w, o->cells, o->colour, text);
            t->draw = sim_now_ms() - d0;
            avg.draw += a * (t->draw - avg.draw);
            if (o->video && !video_frame(&vid, &r)) {
                fprintf(stderr, "quadgrid-sim: writing to ffmpeg failed\n");
                goto out;
            }
        }
        if (f % 16 == 0) {
            size_t b = qg_get_stats(w->index).memory_bytes;
            if (b > index_peak) index_peak = b;
        }
        done = f + 1;
        double now = sim_now_ms();
        if (tty && now - start > 1000.0 && now - last_bar > 100.0) {
            progress(done, frames, sim_ms(&avg));
            last_bar = now;
        }
        if (o->seconds > 0 && now - start >= o->seconds * 1000.0) break;
    }
    double wall_ms = sim_now_ms() - start;
    if (last_bar > 0.0) fprintf(stderr, "\r\033[K");
    if (hash_log) {
        fclose(hash_log);
        hash_log = NULL;
    }
    if (o->png && !png_write(o->png, &r)) goto out;
    if (o->video) {
        bool ok = video_close(&vid);
        if (!ok) goto out;
    }

    qg_stats qs = qg_get_stats(w->index);
    if (qs.memory_bytes > index_peak) index_peak = qs.memory_bytes;
    size_t rss = peak_rss_bytes();

    col = malloc((size_t)done * sizeof *col);
    scratch = malloc((size_t)done * sizeof *scratch);
    if (!col || !scratch) {
        fprintf(stderr, "quadgrid-sim: out of memory\n");
        goto out;
    }
    static const char *names[] = {"move", "index update", "pairs", "response", "cleanup",
                                  "sim (all but draw)", "draw"};
    double med[7], max[7];
    for (int k = 0; k < 7; k++) {
        for (long f = 0; f < done; f++) {
            const sim_times *t = &rec[f].t;
            double vals[7] = {t->move, t->update, t->pairs, t->response, t->cleanup, sim_ms(t), t->draw};
            col[f] = vals[k];
        }
        stats(col, done, scratch, &med[k], &max[k]);
    }
    double pairs_med = 0.0, pairs_max = 0.0;
    for (long f = 0; f < done; f++) col[f] = (double)rec[f].pairs;
    stats(col, done, scratch, &pairs_med, &pairs_max);

    if (!o->quiet) {
        // With --json, stdout carries only the JSON line.
        FILE *out = o->json ? stderr : stdout;
        char b1[32], b2[32], b3[32];
        fprintf(out, "quadgrid-sim: %d agents, kind %s, %ld frames, world %.0f x %.0f, seed %" PRIu64 "\n",
                (int)w->n, qg_kind_name(w->kind), done, w->size, w->size, o->seed);
        fprintf(out, "  %-20s %10s %10s\n", "per frame", "median ms", "worst ms");
        for (int k = 0; k < 7; k++) {
            if (k == 6 && !drawing) {
                fprintf(out, "  %-20s %10s %10s\n", names[k], "off", "off");
                continue;
            }
            fprintf(out, "  %-20s %10.3f %10.3f\n", names[k], med[k], max[k]);
        }
        fprintf(out, "  frames per second without drawing: %.1f (median frame)\n",
                med[5] > 0 ? 1000.0 / med[5] : 0.0);
        fprintf(out, "  colliding pairs per frame: median %.0f, most %.0f\n", pairs_med, pairs_max);
        if (w->level)
            fprintf(out, "  walls: %d static tiles; %" PRIu64 " wall bounces (began agent-wall events)\n",
                    (int)w->nwalls, w->wall_bounces);
        fprintf(out, "  index memory: %s now, %s peak; %d nodes/cells; index built in %.1f ms\n",
                fmt_bytes(b1, sizeof b1, qs.memory_bytes), fmt_bytes(b2, sizeof b2, index_peak),
                (int)qs.nodes, build_ms);
        fprintf(out, "  peak RSS: %s; wall time %.2f s\n", fmt_bytes(b3, sizeof b3, rss),
                wall_ms / 1000.0);
        if (o->png) fprintf(out, "  wrote %s\n", o->png);
        if (o->video) fprintf(out, "  wrote %s (%ld frames)\n", o->video, vid.frames);
    }
    if (o->json) {
        printf("{\"agents\":%d,\"kind\":\"%s\",\"threads\":%d,\"frames\":%ld,\"sim_ms_median\":%.4f,"
               "\"sim_ms_max\":%.4f,\"draw_ms_median\":%.4f,\"index_bytes\":%zu,"
               "\"index_bytes_peak\":%zu,\"peak_rss_bytes\":%zu,\"move_ms_median\":%.4f,"
               "\"update_ms_median\":%.4f,\"pairs_ms_median\":%.4f,\"response_ms_median\":%.4f,"
               "\"cleanup_ms_median\":%.4f,\"fps_no_draw\":%.1f,\"pairs_median\":%.0f,"
               "\"build_ms\":%.3f,\"seed\":%" PRIu64 ",\"state_hash\":\"%016" PRIx64 "\","
               "\"level\":%s,\"walls\":%d,\"wall_bounces\":%" PRIu64 "}\n",
               (int)w->n, qg_kind_name(w->kind), (int)o->threads, done, med[5], max[5], drawing ? med[6] : 0.0,
               qs.memory_bytes, index_peak, rss, med[0], med[1], med[2], med[3], med[4],
               med[5] > 0 ? 1000.0 / med[5] : 0.0, pairs_med, build_ms, o->seed, world_hash(w),
               w->level ? "true" : "false", (int)w->nwalls, w->wall_bounces);
    }
    rc = 0;
out:
    if (vid.pipe) video_close(&vid);
    if (hash_log) fclose(hash_log);
    free(rec);
    free(col);
    free(scratch);
    raster_free(&r);
    return rc;
}

int main(int argc, char **argv) {
    sim_options o = {
        .agents = 100000,
        .seed = 12345,
        .start = SIM_START_UNIFORM,
        .width = 1024,
        .height = 1024,
        .zoom = 1.0f,
        .screenshot_frame = 60,
        .fps = 30,
        .progress = true,
        .colour = RASTER_BY_SPEED,
        .level_walls = 40,
    };
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;

    if (!o.kind_set) {
        o.kind = world_default_kind(o.dragons > 0);
        if (o.kind == QG_KIND_COUNT) {
            fprintf(stderr, "quadgrid-sim: this build of the library has no index kind\n");
            return 1;
        }
    } else if (!qg_kind_available(o.kind)) {
        fprintf(stderr, "quadgrid-sim: kind '%s' is not built in this version; built kinds:\n",
                qg_kind_name(o.kind));
        list_kinds();
        return 1;
    }
    sim_world w;
    if (!world_init(&w, o.agents, o.seed, o.start, o.dragons)) {
        fprintf(stderr, "quadgrid-sim: out of memory for %d agents\n", (int)o.agents);
        world_free(&w);
        return 1;
    }
    if (o.level && !world_make_level(&w, o.level_walls)) {
        fprintf(stderr, "quadgrid-sim: out of memory for the level\n");
        world_free(&w);
        return 1;
    }
    // Numbering agents in Z-order of their start positions puts neighbours in
    // the same cache lines, as an engine keeps its entities; the workload's
    // generator order scatters them over memory.
    if (!o.workload_order && !world_sort_spatial(&w)) {
        fprintf(stderr, "quadgrid-sim: out of memory\n");
        world_free(&w);
        return 1;
    }
    double tb = sim_now_ms();
    qg_status st = world_build_index(&w, o.kind);
    double build_ms = sim_now_ms() - tb;
    if (st != QG_OK) {
        fprintf(stderr, "quadgrid-sim: cannot build the %s index: %s\n", qg_kind_name(o.kind),
                qg_status_name(st));
        world_free(&w);
        return 1;
    }

    // Same pictures, same pairs, same state hash with any thread count: the
    // pairs are sorted before the response, and every other step is per
    // agent.
    qg_thread_pool *pool = NULL;
    qg_jobs jobs;
    if (o.threads == 0) o.threads = qg_cpu_count();
    if (o.threads > 1) {
        if (qg_thread_pool_create(o.threads, &pool) != QG_OK) {
            fprintf(stderr, "quadgrid-sim: cannot start %d threads\n", (int)o.threads);
            world_free(&w);
            return 1;
        }
        jobs = qg_thread_pool_jobs(pool);
        if (!world_set_jobs(&w, &jobs)) {
            fprintf(stderr, "quadgrid-sim: out of memory\n");
            world_free(&w);
            qg_thread_pool_destroy(pool);
            return 1;
        }
    }

    if (o.view) {
        rc = view_run(&w, &o);
        world_free(&w);
        qg_thread_pool_destroy(pool);
        return rc;
        world_free(&w);
        return rc;
    }
    if (o.screenshot) fprintf(stderr, "quadgrid-sim: --screenshot works with --view; use --png\n");

    rc = run_batch(&w, &o, build_ms);
    world_free(&w);
    qg_thread_pool_destroy(pool);
    return rc;
}
