// SPDX-License-Identifier: MIT
/* A program built against an installed quadgrid (pkg-config or
 * find_package): it must compile with only the installed header, link with
 * only the installed library, and get the answers its own loop gets. */
#include <quadgrid.h>

#include <stdio.h>

static bool count_hit(qg_handle h, void *user)
{
    (void)h;
    ++*(int *)user;
    return true;
}

static bool count_pair(qg_handle a, qg_handle b, void *user)
{
    if (a >= b)
        return false;
    ++*(int *)user;
    return true;
}

static bool overlap(qg_rect a, qg_rect b)
{
    return a.min_x <= b.max_x && b.min_x <= a.max_x && a.min_y <= b.max_y && b.min_y <= a.max_y;
}

int main(void)
{
    enum { N = 400 };
    qg_rect boxes[N];
    int failures = 0;
    const qg_kind kinds[] = {QG_QUADTREE, QG_BRUTE_FORCE};
    for (int k = 0; k < 2; k++) {
        qg_config cfg = qg_default_config(kinds[k]);
        qg_index *idx = NULL;
        if (qg_create(&cfg, &idx) != QG_OK) {
            fprintf(stderr, "qg_create(%s) failed\n", qg_kind_name(kinds[k]));
            return 1;
        }
        /* A deterministic scatter, some boxes outside the bounds. */
        unsigned s = 12345;
        for (int i = 0; i < N; i++) {
            s = s * 1103515245u + 12345u;
            float x = (float)(s >> 8 & 1023) * 1.1f - 50;
            s = s * 1103515245u + 12345u;
            float y = (float)(s >> 8 & 1023) * 1.1f - 50;
            float w = (float)(i % 40);
            boxes[i] = (qg_rect){x, y, x + w, y + w / 2};
            if (qg_insert(idx, boxes[i]) < 0)
                return 1;
        }
        qg_rect area = {100, 200, 600, 500};
        int hits = 0, want_hits = 0, pairs = 0, want_pairs = 0;
        qg_query(idx, area, count_hit, &hits);
        qg_pairs(idx, count_pair, &pairs);
        for (int i = 0; i < N; i++) {
            want_hits += overlap(boxes[i], area);
            for (int j = i + 1; j < N; j++)
                want_pairs += overlap(boxes[i], boxes[j]);
        }
        qg_stats st = qg_get_stats(idx);
        printf("%s: %d hits (want %d), %d pairs (want %d), %zu bytes\n", qg_kind_name(kinds[k]),
               hits, want_hits, pairs, want_pairs, st.memory_bytes);
        failures += hits != want_hits || pairs != want_pairs || qg_count(idx) != N ||
                    st.memory_bytes == 0;
        qg_destroy(idx);
    }
    printf("quadgrid %d.%d.%d consumer: %s\n", QG_VERSION_MAJOR, QG_VERSION_MINOR,
           QG_VERSION_PATCH, failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
