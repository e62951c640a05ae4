// SPDX-License-Identifier: MIT
/* POSIX clocks and getrusage; glibc malloc introspection when available. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1

#include "workload.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#if defined(QGW_HAVE_MALLINFO2) || defined(QGW_HAVE_MALLOC_TRIM)
#include <malloc.h>
#endif

/* The workload is defined in IEEE single precision. Where the compiler would
 * evaluate float expressions in a wider type (x87), results would silently
 * differ from every other implementation, so refuse to build instead. */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "the workload generator needs FLT_EVAL_METHOD == 0 (e.g. -mfpmath=sse)"
#endif

/* ------------------------------------------------------------------------ */

qgw_rng qgw_rng_new(uint64_t seed) {
    qgw_rng r = {seed};
    return r;
}

uint64_t qgw_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

uint64_t qgw_next(qgw_rng *rng) {
    rng->state += UINT64_C(0x9E3779B97F4A7C15);
    return qgw_mix(rng->state);
}

float qgw_uniform(qgw_rng *rng) {
    return (float)(qgw_next(rng) >> 40) * 0x1p-24f;
}

bool qgw_sum_pair(qg_handle a, qg_handle b, void *user) {
    qgw_sum *s = user;
    s->count++;
    s->checksum += qgw_pair_term(a, b);
    return true;
}

/* ------------------------------------------------------------------------ */

float qgw_agents_world(int32_t n) {
    return sqrtf((float)n) * 16.0f;
}

static bool agents_alloc(qgw_agents *a, int32_t n) {
    memset(a, 0, sizeof *a);
    if (n < 0) return false;
    size_t count = n > 0 ? (size_t)n : 1;
    a->n = n;
    a->x = malloc(count * sizeof *a->x);
    a->y = malloc(count * sizeof *a->y);
    a->vx = calloc(count, sizeof *a->vx);
    a->vy = calloc(count, sizeof *a->vy);
    a->h = malloc(count * sizeof *a->h);
    a->boxes = malloc(count * sizeof *a->boxes);
    if (!a->x || !a->y || !a->vx || !a->vy || !a->h || !a->boxes) {
        qgw_agents_free(a);
        return false;
    }
    return true;
}

static qg_rect box_of(float x, float y, float h) {
    qg_rect r = {x - h, y - h, x + h, y + h};
    return r;
}

/* The agents generator with world side W; `mixed` scales every hundredth
 * half-size by 16 right after it is drawn (the `mixed` workload). */
static bool agents_draw(qgw_agents *a, int32_t n, float W, bool mixed) {
    if (!agents_alloc(a, n)) return false;
    a->world = W;
    qgw_rng rng = qgw_rng_new(QGW_SEED);
    for (int32_t i = 0; i < n; i++) {
        /* Separate statements: the draw order is part of the definition and C
         * leaves the order of evaluation within one expression unspecified. */
        float h = 1.0f + 3.0f * qgw_uniform(&rng);
        if (mixed && i % 100 == 0) h *= 16.0f;
        float x = h + (W - 2.0f * h) * qgw_uniform(&rng);
        float y = h + (W - 2.0f * h) * qgw_uniform(&rng);
        float angle = 6.28318530718f * qgw_uniform(&rng);
        float speed = 0.5f + 1.5f * qgw_uniform(&rng);
        a->h[i] = h;
        a->x[i] = x;
        a->y[i] = y;
        a->vx[i] = speed * cosf(angle);
        a->vy[i] = speed * sinf(angle);
        a->boxes[i] = box_of(x, y, h);
    }
    a->rng = rng;
    return true;
}

bool qgw_agents_init(qgw_agents *a, int32_t n) {
    return agents_draw(a, n, qgw_agents_world(n), false);
}

bool qgw_agents_init_mixed(qgw_agents *a, int32_t n) {
    return agents_draw(a, n, qgw_agents_world(n), true);
}

void qgw_agents_free(qgw_agents *a) {
    free(a->x);
    free(a->y);
    free(a->vx);
    free(a->vy);
    free(a->h);
    free(a->boxes);
    memset(a, 0, sizeof *a);
}

void qgw_agents_move(qgw_agents *a) {
    qgw_agents_move_range(a, 0, a->n);
}

void qgw_agents_move_range(qgw_agents *a, int32_t begin, int32_t end) {
    const float W = a->world;
    for (int32_t i = begin; i < end; i++) {
        const float h = a->h[i];
        const float hi = W - h;
        float x = a->x[i] + a->vx[i];
        float y = a->y[i] + a->vy[i];
        if (x < h || x > hi) {
            a->vx[i] = -a->vx[i];
            x = x < h ? h : hi;
        }
        if (y < h || y > hi) {
            a->vy[i] = -a->vy[i];
            y = y < h ? h : hi;
        }
        a->x[i] = x;
        a->y[i] = y;
        a->boxes[i] = box_of(x, y, h);
    }
}

qg_rect qgw_agents_bounds(const qgw_agents *a) {
    qg_rect r = {0.0f, 0.0f, a->world, a->world};
    return r;
}

/* ------------------------------------------------------------------------ */

qg_rect qgw_static_query(qgw_rng *rng, float world) {
    float cx = world * qgw_uniform(rng);
    float cy = world * qgw_uniform(rng);
    qg_rect r = {cx - 8.0f, cy - 8.0f, cx + 8.0f, cy + 8.0f};
    return r;
}

void qgw_static_queries(qgw_agents *a, int32_t count, qg_rect *out) {
    for (int32_t q = 0; q < count; q++) out[q] = qgw_static_query(&a->rng, a->world);
}

/* ------------------------------------------------------------------------ */

bool qgw_sparse_init(qgw_agents *a, int32_t n) {
    if (!agents_alloc(a, n)) return false;
    /* 20x the agents' area: the boxes keep the agents' density in the 5% of
     * the world they occupy. */
    const float W = sqrtf((float)n * 20.0f) * 16.0f;
    const float side = W * sqrtf(0.05f / (float)QGW_SPARSE_CLUSTERS);
    const float cell = W * 0.25f;
    a->world = W;
    qgw_rng rng = qgw_rng_new(QGW_SEED);
    float ox[QGW_SPARSE_CLUSTERS], oy[QGW_SPARSE_CLUSTERS];
    for (int k = 0; k < QGW_SPARSE_CLUSTERS; k++) {
        float ux = qgw_uniform(&rng);
        float uy = qgw_uniform(&rng);
        ox[k] = (float)(k % 4) * cell + (cell - side) * ux;
        oy[k] = (float)(k / 4) * cell + (cell - side) * uy;
    }
    for (int32_t i = 0; i < n; i++) {
        int k = (int)(i % QGW_SPARSE_CLUSTERS);
        float h = 1.0f + 3.0f * qgw_uniform(&rng);
        float x = ox[k] + h + (side - 2.0f * h) * qgw_uniform(&rng);
        float y = oy[k] + h + (side - 2.0f * h) * qgw_uniform(&rng);
        a->h[i] = h;
        a->x[i] = x;
        a->y[i] = y;
        a->boxes[i] = box_of(x, y, h);
    }
    a->rng = rng;
    return true;
}

qg_rect qgw_sparse_query(const qgw_agents *a) {
    qg_rect r = {0.0f, 0.0f, a->world * 0.5f, a->world * 0.5f};
    return r;
}

/* ------------------------------------------------------------------------ */
/* The scene table (docs/scenes.md)                                         */

static const char *const scene_names[QGW_SCENE_COUNT] = {
    "agents", "mixed", "dragons", "outside", "huge", "tiny",
};

/* outside: the agents generator in a world of side 9 * 1024, shifted so the
 * default bounds [0,1024]^2 sit in its middle (81 times their area). */
#define OUTSIDE_SIDE 9216.0f
#define OUTSIDE_SHIFT (-4096.0f)
#define HUGE_SCALE 0x1p100f
#define TINY_SCALE 0x1p-100f

const char *qgw_scene_name(qgw_scene_id id) {
    return (unsigned)id < QGW_SCENE_COUNT ? scene_names[id] : NULL;
}

bool qgw_scene_from_name(const char *name, qgw_scene_id *out) {
    for (int k = 0; k < QGW_SCENE_COUNT; k++)
        if (strcmp(name, scene_names[k]) == 0) {
            *out = (qgw_scene_id)k;
            return true;
        }
    return false;
}

int32_t qgw_scene_dragons(int32_t n) {
    return n > 0 ? n / 200 : 0;
}

static qg_rect scene_map_box(const qgw_scene *s, qg_rect r) {
    const float k = s->scale, o = s->offset;
    qg_rect m = {r.min_x * k + o, r.min_y * k + o, r.max_x * k + o, r.max_y * k + o};
    return m;
}

qg_rect qgw_scene_map(const qgw_scene *s, qg_rect r) {
    return scene_map_box(s, r);
}

static void scene_map_all(qgw_scene *s) {
    if (s->boxes == s->agents.boxes) return;
    for (int32_t i = 0; i < s->agents.n; i++) s->boxes[i] = scene_map_box(s, s->agents.boxes[i]);
}

/* quadgrid-sim's --dragons, drawn after every agent from the same generator:
 * agent k*n/D becomes a dragon 20-50 times an average agent's half-size
 * (capped at W/6 so it fits between the walls), walking at 0.3 times its
 * speed. */
static void scene_add_dragons(qgw_agents *a) {
    const int32_t n = a->n, d = qgw_scene_dragons(n);
    const float W = a->world;
    for (int32_t k = 0; k < d; k++) {
        int32_t i = (int32_t)((int64_t)k * n / d);
        float h = 2.5f * (20.0f + 30.0f * qgw_uniform(&a->rng));
        h = fminf(h, W / 6.0f);
        float x = h + (W - 2.0f * h) * qgw_uniform(&a->rng);
        float y = h + (W - 2.0f * h) * qgw_uniform(&a->rng);
        a->h[i] = h;
        a->x[i] = x;
        a->y[i] = y;
        a->vx[i] *= 0.3f;
        a->vy[i] *= 0.3f;
        a->boxes[i] = box_of(x, y, h);
    }
}

bool qgw_scene_init(qgw_scene *s, qgw_scene_id id, int32_t n) {
    memset(s, 0, sizeof *s);
    if ((unsigned)id >= QGW_SCENE_COUNT || n < 0) return false;
    const float W = id == QGW_SCENE_OUTSIDE ? OUTSIDE_SIDE : qgw_agents_world(n);
    if (!agents_draw(&s->agents, n, W, id == QGW_SCENE_MIXED)) return false;
    if (id == QGW_SCENE_DRAGONS) scene_add_dragons(&s->agents);
    s->id = id;
    s->scale = 1.0f;
    s->offset = 0.0f;
    s->bounds = (qg_rect){0.0f, 0.0f, W, W};
    s->element_size = 5.0f;
    s->max_element_size = 8.0f;
    switch (id) {
    case QGW_SCENE_OUTSIDE:
        s->offset = OUTSIDE_SHIFT;
        s->bounds = qg_default_config(QG_BRUTE_FORCE).bounds;
        break;
    case QGW_SCENE_HUGE:
        s->scale = HUGE_SCALE;
        s->bounds = (qg_rect){-3e38f, -3e38f, 3e38f, 3e38f};
        break;
    case QGW_SCENE_TINY:
        s->scale = TINY_SCALE;
        s->bounds = (qg_rect){0.0f, 0.0f, W * TINY_SCALE, W * TINY_SCALE};
        break;
    default: break;
    }
    s->element_size *= s->scale;
    s->max_element_size *= s->scale;
    if (s->scale == 1.0f && s->offset == 0.0f) {
        s->boxes = s->agents.boxes;
    } else {
        s->boxes = malloc((n > 0 ? (size_t)n : 1) * sizeof *s->boxes);
        if (!s->boxes) {
            qgw_agents_free(&s->agents);
            return false;
        }
        scene_map_all(s);
    }
    return true;
}

void qgw_scene_move(qgw_scene *s) {
    qgw_agents_move(&s->agents);
    scene_map_all(s);
}

qg_config qgw_scene_config(const qgw_scene *s, qg_kind kind) {
    qg_config c = qg_default_config(kind);
    c.bounds = s->bounds;
    c.element_size = s->element_size;
    c.max_element_size = s->max_element_size;
    return c;
}

void qgw_scene_free(qgw_scene *s) {
    if (s->boxes != s->agents.boxes) free(s->boxes);
    qgw_agents_free(&s->agents);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------------------ */
/* Sort and sweep. Radix sort rather than qsort: it is the baseline other
 * kinds are measured against, so it should not be needlessly slow. */

static uint32_t float_key(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    /* Order-preserving map of IEEE bits to unsigned integers. */
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static bool sweep_reserve(qgw_sweep *s, int32_t n) {
    if (n <= s->capacity) return true;
    int32_t cap = s->capacity > 0 ? s->capacity : 64;
    while (cap < n) cap = cap > INT32_MAX / 2 ? n : cap * 2;
    size_t c = (size_t)cap;
    uint32_t *k = malloc(c * sizeof *k), *kt = malloc(c * sizeof *kt);
    int32_t *o = malloc(c * sizeof *o), *ot = malloc(c * sizeof *ot);
    float *a = malloc(c * sizeof *a), *b = malloc(c * sizeof *b), *cc = malloc(c * sizeof *cc),
          *d = malloc(c * sizeof *d);
    int32_t *id = malloc(c * sizeof *id);
    if (!k || !kt || !o || !ot || !a || !b || !cc || !d || !id) {
        free(k), free(kt), free(o), free(ot), free(a), free(b), free(cc), free(d), free(id);
        return false;
    }
    qgw_sweep_free(s);
    s->keys = k, s->keys_tmp = kt, s->order = o, s->order_tmp = ot;
    s->min_x = a, s->max_x = b, s->min_y = cc, s->max_y = d, s->id = id;
    s->capacity = cap;
    return true;
}

bool qgw_sweep_sort(qgw_sweep *s, const qg_rect *boxes, int32_t n) {
    if (!sweep_reserve(s, n)) {
        s->n = 0;
        return false;
    }
    enum { B0 = 11, B1 = 11, B2 = 10 };
    static const int shift[3] = {0, B0, B0 + B1};
    static const uint32_t mask[3] = {(1u << B0) - 1, (1u << B1) - 1, (1u << B2) - 1};
    uint32_t hist[3][1u << 11];
    memset(hist, 0, sizeof hist);
    float max_width = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        uint32_t k = float_key(boxes[i].min_x);
        s->keys[i] = k;
        s->order[i] = i;
        for (int p = 0; p < 3; p++) hist[p][(k >> shift[p]) & mask[p]]++;
        float w = boxes[i].max_x - boxes[i].min_x;
        if (w > max_width) max_width = w;
    }
    uint32_t *ks = s->keys, *kd = s->keys_tmp;
    int32_t *os = s->order, *od = s->order_tmp;
    for (int p = 0; p < 3; p++) {
        uint32_t sum = 0;
        for (uint32_t b = 0; b <= mask[p]; b++) {
            uint32_t c = hist[p][b];
            hist[p][b] = sum;
            sum += c;
        }
        for (int32_t i = 0; i < n; i++) {
            uint32_t dst = hist[p][(ks[i] >> shift[p]) & mask[p]]++;
            kd[dst] = ks[i];
            od[dst] = os[i];
        }
        uint32_t *tk = ks;
        ks = kd, kd = tk;
        int32_t *to = os;
        os = od, od = to;
    }
    for (int32_t i = 0; i < n; i++) {
        const qg_rect *b = &boxes[os[i]];
        s->min_x[i] = b->min_x;
        s->max_x[i] = b->max_x;
        s->min_y[i] = b->min_y;
        s->max_y[i] = b->max_y;
        s->id[i] = os[i];
    }
    s->n = n;
    s->max_width = max_width;
    return true;
}

void qgw_sweep_pairs(const qgw_sweep *s, qg_pair_fn *fn, void *user) {
    const int32_t n = s->n;
    const float *min_x = s->min_x, *min_y = s->min_y, *max_y = s->max_y;
    for (int32_t i = 0; i < n; i++) {
        /* Sorted by min_x, so for j > i: min_x[i] <= min_x[j] <= max_x[j]
         * already holds and the x test reduces to the loop condition. */
        const float mx = s->max_x[i], y0 = min_y[i], y1 = max_y[i];
        const int32_t a = s->id[i];
        for (int32_t j = i + 1; j < n && min_x[j] <= mx; j++) {
            if (min_y[j] <= y1 && y0 <= max_y[j]) {
                const int32_t b = s->id[j];
                if (!(a < b ? fn(a, b, user) : fn(b, a, user))) return;
            }
        }
    }
}

void qgw_sweep_query(const qgw_sweep *s, qg_rect area, qg_query_fn *fn, void *user) {
    /* Every box that can reach area.min_x starts at or after this. */
    const float from = area.min_x - s->max_width;
    int32_t lo = 0, hi = s->n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (s->min_x[mid] < from) lo = mid + 1;
        else hi = mid;
    }
    for (int32_t j = lo; j < s->n && s->min_x[j] <= area.max_x; j++) {
        if (area.min_x <= s->max_x[j] && s->min_y[j] <= area.max_y && area.min_y <= s->max_y[j]) {
            if (!fn(s->id[j], user)) return;
        }
    }
}

size_t qgw_sweep_bytes(const qgw_sweep *s) {
    return (size_t)s->capacity * (2 * sizeof(uint32_t) + 3 * sizeof(int32_t) + 4 * sizeof(float));
}

void qgw_sweep_free(qgw_sweep *s) {
    free(s->keys), free(s->keys_tmp), free(s->order), free(s->order_tmp);
    free(s->min_x), free(s->max_x), free(s->min_y), free(s->max_y), free(s->id);
    memset(s, 0, sizeof *s);
}

bool qgw_reference_sum(qgw_sweep *scratch, const qg_rect *boxes, int32_t n, qgw_sum *out) {
    out->count = 0;
    out->checksum = 0;
    if (!qgw_sweep_sort(scratch, boxes, n)) return false;
    qgw_sweep_pairs(scratch, qgw_sum_pair, out);
    return true;
}

/* ------------------------------------------------------------------------ */

uint64_t qgw_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

size_t qgw_peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
#if defined(__APPLE__)
    return (size_t)ru.ru_maxrss; /* bytes on macOS */
#else
    return (size_t)ru.ru_maxrss * 1024u; /* kilobytes on Linux and the BSDs */
#endif
}

bool qgw_peak_rss_reset(void) {
#if defined(__linux__)
    /* "5" resets the mm's high-water RSS, which getrusage reports. */
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = fputs("5", f) >= 0;
    if (fclose(f) != 0) ok = false;
    return ok;
#else
    return false;
#endif
}

size_t qgw_heap_in_use(bool *known) {
#if defined(QGW_HAVE_MALLINFO2)
    struct mallinfo2 mi = mallinfo2();
    *known = true;
    return mi.uordblks + mi.hblkhd;
#else
    *known = false;
    return 0;
#endif
}

void qgw_heap_trim(void) {
#if defined(QGW_HAVE_MALLOC_TRIM)
    malloc_trim(0);
#endif
}
