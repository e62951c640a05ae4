// SPDX-License-Identifier: MIT
// Writing frames out: one PNG (libpng) or a video (ffmpeg through a pipe).
#ifndef QG_SIM_OUTPUT_H
#define QG_SIM_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>

#include "raster.h"

/// Writes the framebuffer as an 8-bit RGB PNG. On failure prints why to
/// stderr and returns false.
bool png_write(const char *path, const raster *r);

typedef struct video {
    FILE *pipe;
    int width, height;
    long frames;
} video;

/// Starts ffmpeg encoding to path (.mp4, .gif, or anything ffmpeg knows by
/// its extension). Prints a clear message and returns false when ffmpeg is
/// not installed or cannot start.
bool video_open(video *v, const char *path, int width, int height, int fps);
bool video_frame(video *v, const raster *r);
/// Waits for ffmpeg to finish the file; false if it failed.
bool video_close(video *v);

#endif
