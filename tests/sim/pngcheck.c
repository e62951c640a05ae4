// SPDX-License-Identifier: MIT
// Checks that a PNG shows something: several colours, and a fair share of
// pixels that differ from the most common one (the background); and, when
// asked, that one colour (RRGGBB in hex) covers at least a share of it.
// usage: qg-sim-pngcheck FILE [min_colours] [min_foreground_percent] [RRGGBB min_percent]
#include <png.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SLOTS = 1 << 16 };

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [min_colours] [min_foreground_percent] [RRGGBB min_percent]\n",
                argv[0]);
        return 2;
    }
    int min_colours = argc > 2 ? atoi(argv[2]) : 4;
    double min_fg = argc > 3 ? atof(argv[3]) : 1.0;
    const bool want_colour = argc > 5;
    const uint32_t colour = want_colour ? (uint32_t)strtoul(argv[4], NULL, 16) & 0xffffffu : 0;
    const double min_colour = want_colour ? atof(argv[5]) : 0.0;
    size_t of_colour = 0;
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, argv[1])) {
        fprintf(stderr, "%s: %s\n", argv[1], img.message);
        return 1;
    }
    img.format = PNG_FORMAT_RGB;
    size_t n = (size_t)img.width * img.height;
    unsigned char *px = malloc(n * 3);
    if (!px || !png_image_finish_read(&img, NULL, px, 0, NULL)) {
        fprintf(stderr, "%s: cannot decode: %s\n", argv[1], img.message);
        return 1;
    }
    // Open addressing over 24-bit colours; counts stop mattering past SLOTS/2.
    uint32_t *key = malloc(SLOTS * sizeof *key);
    size_t *count = calloc(SLOTS, sizeof *count);
    if (!key || !count) return 1;
    memset(key, 0xff, SLOTS * sizeof *key);
    int distinct = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t c = (uint32_t)px[3 * k] << 16 | (uint32_t)px[3 * k + 1] << 8 | px[3 * k + 2];
        of_colour += c == colour;
        uint32_t s = (c * 2654435761u) >> 16;
        while (key[s] != UINT32_MAX && key[s] != c) s = (s + 1) & (SLOTS - 1);
        if (key[s] == UINT32_MAX) {
            if (distinct >= SLOTS / 2) continue;
            key[s] = c;
            distinct++;
        }
        count[s]++;
    }
    size_t most = 0;
    for (int s = 0; s < SLOTS; s++)
        if (count[s] > most) most = count[s];
    double fg = 100.0 * (double)(n - most) / (double)n;
    free(px);
    free(key);
    free(count);
    printf("%s: %ux%u, %d colours, %.1f%% foreground\n", argv[1], img.width, img.height, distinct, fg);
    if (distinct < min_colours || fg < min_fg) {
        fprintf(stderr, "%s: looks blank (need >= %d colours and >= %.1f%% foreground)\n", argv[1],
                min_colours, min_fg);
        return 1;
    }
    if (want_colour) {
        double share = 100.0 * (double)of_colour / (double)n;
        printf("%s: %06x covers %.1f%%\n", argv[1], (unsigned)colour, share);
        if (share < min_colour) {
            fprintf(stderr, "%s: colour %06x covers %.1f%%, expected >= %.1f%%\n", argv[1], (unsigned)colour,
                    share, min_colour);
            return 1;
        }
    }
    return 0;
}
