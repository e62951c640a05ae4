// SPDX-License-Identifier: MIT
// POSIX popen/pclose and access.
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output.h"

static bool on_path(const char *prog) {
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    char buf[4096];
    while (*path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && len + strlen(prog) + 2 < sizeof buf) {
            memcpy(buf, path, len);
            buf[len] = '/';
            strcpy(buf + len + 1, prog);
            if (access(buf, X_OK) == 0) return true;
        }
        path += len;
        if (*path == ':') path++;
    }
    return false;
}

// Wraps s in single quotes for /bin/sh, escaping any quote inside.
static bool shell_quote(char *out, size_t cap, const char *s) {
    size_t k = 0;
    if (cap < 3) return false;
    out[k++] = '\'';
    for (; *s; s++) {
        if (*s == '\'') {
            if (k + 5 >= cap) return false;
            memcpy(out + k, "'\\''", 4);
            k += 4;
        } else {
            if (k + 2 >= cap) return false;
            out[k++] = *s;
        }
    }
    out[k++] = '\'';
    out[k] = 0;
    return true;
}

static bool ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

bool video_open(video *v, const char *path, int width, int height, int fps) {
    memset(v, 0, sizeof *v);
    if (!on_path("ffmpeg")) {
        fprintf(stderr,
                "quadgrid-sim: --video needs ffmpeg, which is not installed.\n"
                "  On Debian/Ubuntu: sudo apt-get install ffmpeg\n");
        return false;
    }
    char quoted[2048];
    if (!shell_quote(quoted, sizeof quoted, path)) {
        fprintf(stderr, "quadgrid-sim: video path too long\n");
        return false;
    }
    // The framebuffer's uint32 0xAARRGGBB is B,G,R,A in memory: "bgra".
    const char *codec;
    if (ends_with(path, ".gif"))
        codec = "-vf 'split[a][b];[a]palettegen=max_colors=64[p];[b][p]paletteuse=dither=none'";
    else if (ends_with(path, ".mp4") || ends_with(path, ".mkv") || ends_with(path, ".mov"))
        codec = "-c:v libx264 -preset veryfast -crf 23 -pix_fmt yuv420p";
    else
        codec = "";
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "ffmpeg -hide_banner -loglevel error -y -f rawvideo -pix_fmt bgra -s %dx%d -r %d "
             "-i - %s %s",
             width, height, fps, codec, quoted);
    v->pipe = popen(cmd, "w");
    if (!v->pipe) {
        perror("quadgrid-sim: cannot start ffmpeg");
        return false;
    }
    v->width = width;
    v->height = height;
    return true;
}

bool video_frame(video *v, const raster *r) {
    if (!v->pipe || r->width != v->width || r->height != v->height) return false;
    size_t n = (size_t)r->width * (size_t)r->height;
    if (fwrite(r->pixels, sizeof *r->pixels, n, v->pipe) != n) return false;
    v->frames++;
    return true;
}

bool video_close(video *v) {
    if (!v->pipe) return false;
    int rc = pclose(v->pipe);
    v->pipe = NULL;
    if (rc != 0) {
        fprintf(stderr, "quadgrid-sim: ffmpeg failed (status %d)\n", rc);
        return false;
    }
    return true;
}
