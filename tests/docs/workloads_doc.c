// SPDX-License-Identifier: MIT
/* The check values of docs/workloads.md, recomputed from that page alone: its
 * generator, moves, tile map, ray test and distance are written out here
 * again (not taken from apps/common), and quadgrid only lists candidate
 * pairs and window hits. Prints each value as the row of the page's table
 * (workloads_doc_test.sh finds every row in the page): a page that drifts
 * from the workloads, or a workload that drifts from its page, fails. */
#include <inttypes.h>
#include <math.h>
#include <quadgrid.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state;

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float draw(void)
{
    state += 0x9E3779B97F4A7C15ull;
    return (float)(mix(state) >> 40) * 0x1p-24f;
}

static uint64_t term(uint32_t i, uint32_t j)
{
    return mix(((uint64_t)i << 32) | j);
}

/* 12345 -> "12,345" */
static const char *commas(uint64_t v, char *buf)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%" PRIu64, v), o = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
    return buf;
}

typedef struct agents {
    float *x, *y, *vx, *vy, *h;
    qg_rect *box;
    int n;
    float w;
} agents;

static void *must(void *p)
{
    if (p == NULL) {
        fputs("workloads_doc: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

static void agents_make(agents *a, int n, float w, int mixed)
{
    a->n = n, a->w = w;
    a->x = must(malloc(sizeof(float) * (size_t)n)), a->y = must(malloc(sizeof(float) * (size_t)n));
    a->vx = must(malloc(sizeof(float) * (size_t)n)), a->vy = must(malloc(sizeof(float) * (size_t)n));
    a->h = must(malloc(sizeof(float) * (size_t)n));
    a->box = must(malloc(sizeof(qg_rect) * (size_t)n));
    for (int i = 0; i < n; i++) {
        float h = 1.0f + 3.0f * draw();
        if (mixed && i % 100 == 0)
            h *= 16.0f;
        const float x = h + (w - 2.0f * h) * draw();
        const float y = h + (w - 2.0f * h) * draw();
        const float angle = 6.28318530718f * draw();
        const float speed = 0.5f + 1.5f * draw();
        a->x[i] = x, a->y[i] = y, a->h[i] = h;
        a->vx[i] = speed * cosf(angle), a->vy[i] = speed * sinf(angle);
        a->box[i] = (qg_rect){x - h, y - h, x + h, y + h};
    }
}

static void agents_free(agents *a)
{
    free(a->x), free(a->y), free(a->vx), free(a->vy), free(a->h), free(a->box);
}

static void agents_move(agents *a)
{
    for (int i = 0; i < a->n; i++) {
        const float h = a->h[i];
        float x = a->x[i] + a->vx[i], y = a->y[i] + a->vy[i];
        if (x < h || x > a->w - h) {
            a->vx[i] = -a->vx[i];
            x = x < h ? h : a->w - h;
        }
        if (y < h || y > a->w - h) {
            a->vy[i] = -a->vy[i];
            y = y < h ? h : a->w - h;
        }
        a->x[i] = x, a->y[i] = y;
        a->box[i] = (qg_rect){x - h, y - h, x + h, y + h};
    }
}

typedef struct sum {
    uint64_t count, checksum;
    int tiles; /* pairs of two handles below this are tile-tile: dropped */
    uint32_t query;
} sum;

static bool add_pair(qg_handle a, qg_handle b, void *user)
{
    sum *s = user;
    if (a < s->tiles && b < s->tiles)
        return true;
    s->count++, s->checksum += term((uint32_t)a, (uint32_t)b);
    return true;
}

static bool add_hit(qg_handle h, void *user)
{
    sum *s = user;
    s->count++, s->checksum += term(s->query, (uint32_t)h);
    return true;
}

static qg_index *index_of(const qg_rect *boxes, int n)
{
    qg_config c = qg_default_config(QG_GRID);
    qg_index *ix = NULL;
    qg_handle *handles = must(malloc(sizeof(qg_handle) * (size_t)n));
    if (qg_create(&c, &ix) != QG_OK || qg_insert_many(ix, boxes, n, handles) != QG_OK) {
        fputs("workloads_doc: the index failed\n", stderr);
        exit(1);
    }
    free(handles);
    return ix;
}

static sum pairs_of(const qg_rect *boxes, int n, int tiles)
{
    qg_index *ix = index_of(boxes, n);
    sum s = {0, 0, tiles, 0};
    qg_pairs(ix, add_pair, &s);
    qg_destroy(ix);
    return s;
}

/* One row of the page's table; `first` is its first cell as written there. */
static void row(const char *first, const char *n, const char *what, const char *count, uint64_t checksum)
{
    printf("| %s | %s | %s | %s | `%016" PRIx64 "` |\n", first, n, what, count, checksum);
}

static void run_agents(int n, int frames, int mixed)
{
    char b1[32], b2[32], what[32];
    agents a;
    state = 12345;
    agents_make(&a, n, sqrtf((float)n) * 16.0f, mixed);
    for (int f = 0; f < frames; f++)
        agents_move(&a);
    const sum s = pairs_of(a.box, n, 0);
    snprintf(what, sizeof what, "frame %d", frames);
    row(mixed ? "`mixed`" : "`agents`", commas((uint64_t)n, b1), what, commas(s.count, b2), s.checksum);
    agents_free(&a);
}

static void run_level(int n, int frames)
{
    const int g = (int)sqrtf((float)n), movers = n / 25;
    qg_rect *boxes = must(malloc(sizeof(qg_rect) * (size_t)(g * g + movers)));
    int tiles = 0;
    for (int y = 0; y < g; y++)
        for (int x = 0; x < g; x++)
            if (mix(((uint64_t)y << 32) | (uint64_t)x) % 100 < 40)
                boxes[tiles++] = (qg_rect){16.0f * x, 16.0f * y, 16.0f * x + 16, 16.0f * y + 16};
    agents a;
    state = 12345;
    agents_make(&a, movers, 16.0f * g, 0);
    for (int f = 0; f < frames; f++)
        agents_move(&a);
    memcpy(boxes + tiles, a.box, sizeof(qg_rect) * (size_t)movers);
    const sum s = pairs_of(boxes, tiles + movers, tiles);
    char b1[32], b2[32], b3[32], b4[32], label[96], what[32];
    snprintf(label, sizeof label, "%s (S %s, A %s)", commas((uint64_t)n, b1), commas((uint64_t)tiles, b2),
             commas((uint64_t)movers, b3));
    snprintf(what, sizeof what, "frame %d", frames);
    row("`level`", label, what, commas(s.count, b4), s.checksum);
    free(boxes);
    agents_free(&a);
}

static void run_static(int n, int queries)
{
    agents a;
    state = 12345;
    agents_make(&a, n, sqrtf((float)n) * 16.0f, 0);
    qg_index *ix = index_of(a.box, n);
    sum s = {0, 0, 0, 0};
    for (int q = 0; q < queries; q++) {
        const float cx = a.w * draw();
        const float cy = a.w * draw();
        s.query = (uint32_t)q;
        qg_query(ix, (qg_rect){cx - 8, cy - 8, cx + 8, cy + 8}, add_hit, &s);
    }
    char b1[32], b2[32], b3[32], what[48];
    snprintf(what, sizeof what, "%s queries", commas((uint64_t)queries, b3));
    row("`static`", commas((uint64_t)n, b1), what, commas(s.count, b2), s.checksum);
    qg_destroy(ix);
    agents_free(&a);
}

/* One axis of the segment test as the page writes it: a zero direction
 * needs the origin inside the slab, any other narrows [t0, t1]. */
static int slab(float lo, float hi, float o, float d, float *t0, float *t1)
{
    if (d == 0)
        return o >= lo && o <= hi;
    const float inv = 1.0f / d;
    float ta = (lo - o) * inv, tb = (hi - o) * inv;
    if (ta > tb) {
        const float s = ta;
        ta = tb, tb = s;
    }
    *t0 = fmaxf(*t0, ta), *t1 = fminf(*t1, tb);
    return 1;
}

/* The segment test: both slabs narrow [0, L]; *t is the entry. */
static int ray_hits(qg_rect b, float ox, float oy, float dx, float dy, float length, float *t)
{
    float t0 = 0, t1 = length;
    if (!slab(b.min_x, b.max_x, ox, dx, &t0, &t1) || !slab(b.min_y, b.max_y, oy, dy, &t0, &t1))
        return 0;
    *t = t0;
    return t0 <= t1;
}

static void run_rays(int n, int rays)
{
    agents a;
    state = 12345;
    agents_make(&a, n, sqrtf((float)n) * 16.0f, 0);
    uint64_t hits = 0, checksum = 0, closest = 0, closest_sum = 0;
    for (int r = 0; r < rays; r++) {
        const float ox = a.w * draw();
        const float oy = a.w * draw();
        const float angle = 6.28318530718f * draw();
        const float dx = cosf(angle), dy = sinf(angle);
        int best = -1;
        float best_t = INFINITY;
        for (int i = 0; i < n; i++) {
            float t;
            if (ray_hits(a.box[i], ox, oy, dx, dy, 256.0f, &t)) {
                hits++, checksum += term((uint32_t)r, (uint32_t)i);
                if (t < best_t)
                    best_t = t, best = i;
            }
        }
        if (best >= 0)
            closest++, closest_sum += term((uint32_t)r, (uint32_t)best);
    }
    char b1[32], b2[32], b3[32], what[48];
    snprintf(what, sizeof what, "%s rays", commas((uint64_t)rays, b3));
    row("`rays`, all hits", commas((uint64_t)n, b1), what, commas(hits, b2), checksum);
    char count[48];
    snprintf(count, sizeof count, "%s rays", commas(closest, b2));
    row("`rays`, closest", commas((uint64_t)n, b1), what, count, closest_sum);
    agents_free(&a);
}

static void run_knn(int n, int points)
{
    agents a;
    state = 12345;
    agents_make(&a, n, sqrtf((float)n) * 16.0f, 0);
    uint64_t results = 0, checksum = 0;
    for (int q = 0; q < points; q++) {
        const float px = a.w * draw();
        const float py = a.w * draw();
        float best[8];
        int which[8], k = 0;
        for (int i = 0; i < n; i++) {
            const qg_rect b = a.box[i];
            const float ex = fmaxf(fmaxf(b.min_x - px, 0.0f), px - b.max_x);
            const float ey = fmaxf(fmaxf(b.min_y - py, 0.0f), py - b.max_y);
            const float d2 = ex * ex + ey * ey;
            if (k == 8 && !(d2 < best[7]))
                continue; /* a tie keeps the smaller index, seen first */
            int p = k < 8 ? k++ : 7;
            while (p > 0 && best[p - 1] > d2) {
                best[p] = best[p - 1], which[p] = which[p - 1];
                p--;
            }
            best[p] = d2, which[p] = i;
        }
        for (int j = 0; j < k; j++)
            results++, checksum += term((uint32_t)q, (uint32_t)which[j]);
    }
    char b1[32], b2[32], b3[32], what[48];
    snprintf(what, sizeof what, "%s points", commas((uint64_t)points, b3));
    row("`knn`", commas((uint64_t)n, b1), what, commas(results, b2), checksum);
    agents_free(&a);
}

/* 16 squares covering 5% of a world 20 times the agents' area; one query
 * over the lower-left quarter. */
static void run_sparse(int n)
{
    state = 12345;
    const float w = sqrtf((float)n * 20.0f) * 16.0f, side = w * sqrtf(0.05f / 16.0f), c = w * 0.25f;
    float ox[16], oy[16];
    for (int k = 0; k < 16; k++) {
        const float ux = draw();
        const float uy = draw();
        ox[k] = (float)(k % 4) * c + (c - side) * ux;
        oy[k] = (float)(k / 4) * c + (c - side) * uy;
    }
    uint64_t hits = 0, checksum = 0;
    for (int i = 0; i < n; i++) {
        const int k = i % 16;
        const float h = 1.0f + 3.0f * draw();
        const float x = ox[k] + h + (side - 2.0f * h) * draw();
        const float y = oy[k] + h + (side - 2.0f * h) * draw();
        if (x - h <= w * 0.5f && y - h <= w * 0.5f)
            hits++, checksum += term(0, (uint32_t)i);
    }
    char b1[32], b2[32];
    row("`sparse`", commas((uint64_t)n, b1), "one query", commas(hits, b2), checksum);
}

int main(void)
{
    run_agents(10000, 13, 0);
    run_agents(100000, 63, 0);
    run_agents(10000, 1, 1);
    run_agents(100000, 1, 1);
    run_static(100000, 20000);
    run_sparse(100000);
    run_rays(100000, 2000);
    run_knn(100000, 2000);
    run_level(10000, 1);
    run_level(100000, 33);
    run_level(1000000, 13);
    return 0;
}
