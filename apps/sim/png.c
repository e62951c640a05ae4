// SPDX-License-Identifier: MIT
#include <png.h>
#include <stdint.h>
#include <stdlib.h>

#include "output.h"

bool png_write(const char *path, const raster *r) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return false;
    }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    // volatile: it is read after libpng's longjmp back into this frame.
    unsigned char *volatile row = malloc((size_t)r->width * 3);
    if (!png || !info || !row) {
        fprintf(stderr, "quadgrid-sim: out of memory writing %s\n", path);
        png_destroy_write_struct(&png, &info);
        free(row);
        fclose(f);
        return false;
    }
    if (setjmp(png_jmpbuf(png))) {
        fprintf(stderr, "quadgrid-sim: libpng failed writing %s\n", path);
        png_destroy_write_struct(&png, &info);
        free(row);
        fclose(f);
        return false;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)r->width, (png_uint_32)r->height, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < r->height; y++) {
        const uint32_t *src = r->pixels + (size_t)y * (size_t)r->width;
        for (int x = 0; x < r->width; x++) {
            row[3 * x + 0] = (unsigned char)(src[x] >> 16);
            row[3 * x + 1] = (unsigned char)(src[x] >> 8);
            row[3 * x + 2] = (unsigned char)src[x];
        }
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(row);
    if (fclose(f) != 0) {
        perror(path);
        return false;
    }
    return true;
}
