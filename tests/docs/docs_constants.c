// SPDX-License-Identifier: MIT
/* The constants the docs quote, from the code itself: each line is
 * "NAME VALUE" with VALUE as the pages write it (docs_constants_test.sh
 * finds each quoted figure in its page and compares). */
#include <quadgrid.h>
#include <stdint.h>
#include <stdio.h>

#include "point_grid/point_grid.h"
#include "tune.h"

/* 16777215 -> "16,777,215", the way the pages write counts. */
static void print_grouped(const char *name, unsigned long long v)
{
    char digits[32], out[48];
    int n = snprintf(digits, sizeof digits, "%llu", v), o = 0;
    for (int i = 0; i < n; ++i) {
        if (i > 0 && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
    printf("%s %s\n", name, out);
}

int main(void)
{
    printf("tune_state_bytes %zu\n", sizeof(qg_tune));
    print_grouped("point_grid_max_elements", PG_MAX_HANDLES);
    print_grouped("handle_max", INT32_MAX);
    printf("kind_count %d\n", (int)QG_KIND_COUNT);
    return 0;
}
