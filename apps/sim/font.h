// SPDX-License-Identifier: MIT
// A tiny 5x7 bitmap font for the overlay: enough for numbers, names and
// labels. Lower case is drawn as upper case.
#ifndef QG_SIM_FONT_H
#define QG_SIM_FONT_H

#include <stdint.h>

enum { FONT_W = 5, FONT_H = 7 };

/// Seven rows for character c, bit 4 of each row is the leftmost pixel.
/// Unknown characters give a filled box.
const uint8_t *font_glyph(char c);

#endif
