#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocator ------------------------------------------------------- */

/* Every block carries a header with its size, so the allocator can tell when
 * the library passes a wrong old_size (which would make memory_bytes lie) or
 * a pointer it never got. */
#define TU_MAGIC 0x71676164u /* "qgad" */
#define TU_DEAD 0xdeadbeefu

typedef union tu_hdr {
    struct {
        size_t size;
        uint32_t magic;
    } h;
    max_align_t align;
} tu_hdr;

void tu_alloc_init(tu_alloc *a)
{
    memset(a, 0, sizeof *a);
}

void tu_alloc_end_call(tu_alloc *a)
{
    a->failing = false;
}

static void tu_alloc_error(tu_alloc *a, const char *msg, size_t x, size_t y)
{
    a->errors++;
    snprintf(a->last_error, sizeof a->last_error, "%s (%zu vs %zu)", msg, x, y);
}

static void *tu_realloc(void *ptr, size_t old_size, size_t new_size, void *user)
{
    tu_alloc *a = user;
    tu_hdr *h = NULL;
    if (ptr) {
        h = (tu_hdr *)ptr - 1;
        if (h->h.magic != TU_MAGIC) {
            tu_alloc_error(a, "pointer not from this allocator or already freed", 0, 0);
            return NULL;
        }
        if (h->h.size != old_size) {
            tu_alloc_error(a, "old_size differs from the block's size", old_size, h->h.size);
            old_size = h->h.size;
        }
    } else if (old_size != 0) {
        tu_alloc_error(a, "old_size must be 0 with a NULL pointer", old_size, 0);
        old_size = 0;
    }

    if (new_size == 0) {
        if (h) {
            h->h.magic = TU_DEAD;
            a->bytes -= old_size;
            a->blocks--;
            free(h);
        }
        return NULL;
    }

    bool grow = !ptr || new_size > old_size;
    if (grow) {
        a->grow_requests++;
        if (a->fail_at > 0 && a->grow_requests == a->fail_at) {
            a->injected++;
            if (a->mode == TU_FAIL_STICKY)
                a->failing = true;
            return NULL;
        }
        if (a->failing) {
            a->injected++;
            return NULL;
        }
    } else if (new_size == old_size) {
        return ptr;
    }

    if (new_size > (size_t)-1 - sizeof(tu_hdr))
        return NULL;
    tu_hdr *n = realloc(h, sizeof(tu_hdr) + new_size);
    if (!n)
        return NULL;
    n->h.size = new_size;
    n->h.magic = TU_MAGIC;
    a->bytes = a->bytes - old_size + new_size;
    if (!ptr)
        a->blocks++;
    return n + 1;
}

qg_allocator tu_allocator(tu_alloc *a)
{
    qg_allocator al = {tu_realloc, a};
    return al;
}

/* ---- RNG: splitmix64, small and good enough ---------------------------- */

void tu_rng_seed(tu_rng *r, uint64_t seed)
{
    r->s = seed;
}

uint64_t tu_rng_next(tu_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint32_t tu_rng_below(tu_rng *r, uint32_t n)
{
    return n ? (uint32_t)((tu_rng_next(r) >> 32) * (uint64_t)n >> 32) : 0;
}

double tu_rng_unit(tu_rng *r)
{
    return (double)(tu_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

float tu_rng_range(tu_rng *r, float lo, float hi)
{
    float v = (float)(lo + (hi - (double)lo) * tu_rng_unit(r));
    return v < lo ? lo : v > hi ? hi : v;
}

bool tu_rng_chance(tu_rng *r, double p)
{
    return tu_rng_unit(r) < p;
}

/* ---- vectors --------------------------------------------------------- */

void tu_vec_push(tu_vec *a, int64_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int64_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) {
            fprintf(stderr, "test: out of memory\n");
            abort();
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
}

void tu_vec_clear(tu_vec *a)
{
    a->n = 0;
}

void tu_vec_free(tu_vec *a)
{
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

static int tu_cmp64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

void tu_vec_sort(tu_vec *a)
{
    if (a->n > 1)
        qsort(a->v, a->n, sizeof *a->v, tu_cmp64);
}

long tu_vec_first_diff(const tu_vec *a, const tu_vec *b)
{
    size_t n = a->n < b->n ? a->n : b->n;
    for (size_t i = 0; i < n; i++)
        if (a->v[i] != b->v[i])
            return (long)i;
    return a->n == b->n ? -1 : (long)n;
}

bool tu_vec_has_dup(const tu_vec *a, int64_t *dup)
{
    for (size_t i = 1; i < a->n; i++)
        if (a->v[i] == a->v[i - 1]) {
            if (dup)
                *dup = a->v[i];
            return true;
        }
    return false;
}

bool tu_collect_query(qg_handle h, void *user)
{
    tu_collect *c = user;
    tu_vec_push(&c->out, h);
    c->calls++;
    return !(c->stop_after > 0 && c->calls >= c->stop_after);
}

bool tu_collect_pair(qg_handle a, qg_handle b, void *user)
{
    tu_collect *c = user;
    if (a >= b)
        c->bad_order++;
    tu_vec_push(&c->out, (int64_t)a * 4294967296ll + b);
    c->calls++;
    return !(c->stop_after > 0 && c->calls >= c->stop_after);
}

void tu_collect_reset(tu_collect *c, long stop_after)
{
    tu_vec_clear(&c->out);
    c->calls = 0;
    c->bad_order = 0;
    c->stop_after = stop_after;
}

/* ---- snapshots ------------------------------------------------------ */

void tu_snapshot_take(const qg_index *idx, int32_t probe, tu_snapshot *s)
{
    tu_snapshot_free(s);
    s->count = qg_count(idx);
    s->stat_elements = qg_get_stats(idx).elements;
    s->probe = probe;
    s->status = calloc((size_t)probe + 1, sizeof *s->status);
    s->box = calloc((size_t)probe + 1, sizeof *s->box);
    if (!s->status || !s->box) {
        fprintf(stderr, "test: out of memory\n");
        abort();
    }
    for (int32_t h = 0; h < probe; h++)
        s->status[h] = qg_get(idx, h, &s->box[h]);

    tu_collect c = {0};
    const float inf = (float)INFINITY;
    s->query_status = qg_query(idx, tu_rect(-inf, -inf, inf, inf), tu_collect_query, &c);
    tu_vec_sort(&c.out);
    s->all = c.out;

    tu_collect p = {0};
    s->pairs_status = qg_pairs(idx, tu_collect_pair, &p);
    tu_vec_sort(&p.out);
    s->pairs = p.out;
}

bool tu_snapshot_equal(const tu_snapshot *a, const tu_snapshot *b, char *msg, size_t msg_size)
{
    if (a->count != b->count) {
        snprintf(msg, msg_size, "qg_count %d became %d", a->count, b->count);
        return false;
    }
    if (a->stat_elements != b->stat_elements) {
        snprintf(msg, msg_size, "stats.elements %d became %d", a->stat_elements,
                 b->stat_elements);
        return false;
    }
    int32_t probe = a->probe < b->probe ? a->probe : b->probe;
    for (int32_t h = 0; h < probe; h++) {
        if (a->status[h] != b->status[h]) {
            snprintf(msg, msg_size, "qg_get(%d) status %s became %s", h,
                     qg_status_name(a->status[h]), qg_status_name(b->status[h]));
            return false;
        }
        if (a->status[h] == QG_OK && !tu_rect_same(a->box[h], b->box[h])) {
            snprintf(msg, msg_size, "qg_get(%d) box (%g,%g,%g,%g) became (%g,%g,%g,%g)", h,
                     (double)a->box[h].min_x, (double)a->box[h].min_y, (double)a->box[h].max_x,
                     (double)a->box[h].max_y, (double)b->box[h].min_x, (double)b->box[h].min_y,
                     (double)b->box[h].max_x, (double)b->box[h].max_y);
            return false;
        }
    }
    if (a->query_status != b->query_status || a->pairs_status != b->pairs_status) {
        snprintf(msg, msg_size, "query/pairs status changed");
        return false;
    }
    long d = tu_vec_first_diff(&a->all, &b->all);
    if (d >= 0) {
        snprintf(msg, msg_size, "whole-plane query: %zu results became %zu (first difference at %ld)",
                 a->all.n, b->all.n, d);
        return false;
    }
    d = tu_vec_first_diff(&a->pairs, &b->pairs);
    if (d >= 0) {
        snprintf(msg, msg_size, "qg_pairs: %zu pairs became %zu (first difference at %ld)",
                 a->pairs.n, b->pairs.n, d);
        return false;
    }
    return true;
}

void tu_snapshot_free(tu_snapshot *s)
{
    free(s->status);
    free(s->box);
    tu_vec_free(&s->all);
    tu_vec_free(&s->pairs);
    memset(s, 0, sizeof *s);
}

/* ---- misc ------------------------------------------------------------ */

double tu_scale(void)
{
    /* QG_TEST_SCALE is the user's; QG_TEST_SCALE_DEFAULT is set by ctest for
     * slow (sanitized) builds. */
    const char *s = getenv("QG_TEST_SCALE");
    if (!s || !*s)
        s = getenv("QG_TEST_SCALE_DEFAULT");
    double v = s && *s ? strtod(s, NULL) : 1.0;
    if (!(v >= 0.01))
        v = v > 0 ? 0.01 : 1.0;
    if (v > 1000)
        v = 1000;
    return v;
}

long tu_scaled(long n)
{
    double v = (double)n * tu_scale();
    return v < 1 ? 1 : (long)v;
}

bool tu_kind_arg(int argc, char **argv, qg_kind *kind)
{
    if (argc < 2 || qg_kind_from_name(argv[1], kind) != QG_OK) {
        fprintf(stderr, "usage: %s KIND   (KIND is a name from qg_kind_name, e.g. quadtree)\n",
                argc > 0 ? argv[0] : "test");
        return false;
    }
    return true;
}
