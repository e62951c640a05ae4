// SPDX-License-Identifier: MIT
// The C side of the JavaScript binding: one call per batch, never one per
// element or pair. JavaScript copies its typed arrays into scratch buffers
// here, calls one of these functions, and copies the answer out of the
// result buffers (qgjs_out_*), so the wasm boundary is crossed a few times a
// frame whatever the element count.
//
// Every function that changes an index checks all of its input first and
// then makes calls that cannot fail on checked input, or a library batch
// call that is all or nothing: an error leaves the index as it was.
#include <quadgrid.h>

#include <emscripten/emscripten.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

#define EXPORT EMSCRIPTEN_KEEPALIVE

/* ---- Memory accounting ----------------------------------------------------
 * Every byte an index holds comes through count_realloc, and every glue
 * buffer through glue_grow, so the tests can see that free() and destroy
 * give everything back. */

static double index_bytes; // bytes all live indexes hold
static double glue_bytes;  // bytes of the scratch and result buffers

static void *count_realloc(void *ptr, size_t old_size, size_t new_size, void *user)
{
    (void)user;
    if (new_size == 0) {
        free(ptr);
        index_bytes -= (double)old_size;
        return NULL;
    }
    void *p = realloc(ptr, new_size);
    if (p != NULL)
        index_bytes += (double)new_size - (double)old_size;
    return p;
}

/* ---- The kind list, for index.js: the library's own, never a copy ------- */

EXPORT int32_t qgjs_kind_count(void) { return QG_KIND_COUNT; }
EXPORT const char *qgjs_kind_name(int32_t kind) { return qg_kind_name((qg_kind)kind); }
EXPORT int32_t qgjs_kind_available(int32_t kind) { return qg_kind_available((qg_kind)kind); }

EXPORT double qgjs_index_bytes(void) { return index_bytes; }
EXPORT double qgjs_glue_bytes(void) { return glue_bytes; }

/// A buffer that only grows (doubling), kept between calls.
typedef struct buf {
    void *p;
    size_t cap; // bytes
} buf;

static bool glue_grow(buf *b, size_t bytes)
{
    if (bytes <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < bytes)
        cap *= 2;
    void *p = realloc(b->p, cap);
    if (p == NULL)
        return false;
    glue_bytes += (double)(cap - b->cap);
    b->p = p;
    b->cap = cap;
    return true;
}

/* Scratch buffers JavaScript writes its input into (slot 0: handles, slot 1:
 * boxes or other per-element data, slot 2: a third array). */
enum { SCRATCH_SLOTS = 3 };
static buf scratch[SCRATCH_SLOTS];

/// A scratch buffer of at least `bytes` (0 when out of memory or a bad slot).
EXPORT void *qgjs_scratch(int32_t slot, double bytes)
{
    if (slot < 0 || slot >= SCRATCH_SLOTS || !(bytes >= 0) || bytes > 4.0e9)
        return NULL;
    return glue_grow(&scratch[slot], (size_t)bytes + 16) ? scratch[slot].p : NULL;
}

/* Results: out_i[0] and out_i[1] are int32 lists (pairs, hits, began and
 * ended events), out_f a float list beside out_i[0] (ray t, distances). */
static buf out_i[2], out_f;
static int32_t out_len[3];

EXPORT int32_t *qgjs_out_ptr(int32_t which)
{
    return which == 2 ? (int32_t *)out_f.p : (int32_t *)out_i[which & 1].p;
}
EXPORT int32_t qgjs_out_len(int32_t which) { return out_len[which < 0 || which > 2 ? 0 : which]; }

/// Frees the glue's buffers (for the memory tests: everything back).
EXPORT void qgjs_release_buffers(void)
{
    for (int i = 0; i < SCRATCH_SLOTS; ++i) {
        free(scratch[i].p);
        glue_bytes -= (double)scratch[i].cap;
        scratch[i] = (buf){NULL, 0};
    }
    buf *outs[3] = {&out_i[0], &out_i[1], &out_f};
    for (int i = 0; i < 3; ++i) {
        free(outs[i]->p);
        glue_bytes -= (double)outs[i]->cap;
        *outs[i] = (buf){NULL, 0};
        out_len[i] = 0;
    }
}

/* A list being collected: a failed grow stops the search (callbacks return
 * false) and the call answers QG_ERR_NOMEM. */
typedef struct list {
    buf *b;
    int32_t *len;
    bool oom;
} list;

static inline bool push2(list *l, int32_t a, int32_t b)
{
    const size_t need = ((size_t)*l->len + 2) * sizeof(int32_t);
    if (need > l->b->cap && !glue_grow(l->b, need)) {
        l->oom = true;
        return false;
    }
    int32_t *p = (int32_t *)l->b->p + *l->len;
    p[0] = a;
    p[1] = b;
    *l->len += 2;
    return true;
}

static inline bool push1(list *l, int32_t a)
{
    const size_t need = ((size_t)*l->len + 1) * sizeof(int32_t);
    if (need > l->b->cap && !glue_grow(l->b, need)) {
        l->oom = true;
        return false;
    }
    ((int32_t *)l->b->p)[(*l->len)++] = a;
    return true;
}

static bool on_pair(qg_handle a, qg_handle b, void *user) { return push2(user, a, b); }
static bool on_hit(qg_handle h, void *user) { return push1(user, h); }

static void reset_out(void) { out_len[0] = out_len[1] = out_len[2] = 0; }

/* ---- Index ------------------------------------------------------------ */

/// f: bounds (4), element_size, max_element_size, cell_size.
EXPORT int32_t qgjs_create(int32_t kind, const float *f, int32_t max_depth, int32_t leaf_capacity,
                           qg_index **out)
{
    *out = NULL;
    if (kind < 0 || kind >= QG_KIND_COUNT)
        return QG_ERR_INVALID;
    qg_config c = qg_default_config((qg_kind)kind);
    c.bounds = (qg_rect){f[0], f[1], f[2], f[3]};
    c.element_size = f[4];
    c.max_element_size = f[5];
    c.cell_size = f[6];
    c.max_depth = max_depth;
    c.leaf_capacity = leaf_capacity;
    c.allocator = (qg_allocator){count_realloc, NULL};
    return qg_create(&c, out);
}

EXPORT void qgjs_destroy(qg_index *ix) { qg_destroy(ix); }
EXPORT int32_t qgjs_count(const qg_index *ix) { return qg_count(ix); }
EXPORT void qgjs_cleanup(qg_index *ix) { qg_cleanup(ix); }
EXPORT void qgjs_clear(qg_index *ix) { qg_clear(ix); }
EXPORT int32_t qgjs_validate(const qg_index *ix) { return qg_validate(ix); }

/// out: memory_bytes, elements, nodes, leaves, max_depth_reached.
EXPORT void qgjs_stats(const qg_index *ix, double *out)
{
    const qg_stats s = qg_get_stats(ix);
    out[0] = (double)s.memory_bytes;
    out[1] = s.elements;
    out[2] = s.nodes;
    out[3] = s.leaves;
    out[4] = s.max_depth_reached;
}

EXPORT int32_t qgjs_insert_many(qg_index *ix, const qg_rect *boxes, int32_t n, qg_handle *handles)
{
    return qg_insert_many(ix, boxes, n, handles);
}

/// Every handle live, boxes[i] for handles[i]; checked first by the library.
EXPORT int32_t qgjs_move_many(qg_index *ix, const qg_handle *handles, const qg_rect *boxes, int32_t n)
{
    return qg_move_many(ix, NULL, handles, boxes, n);
}

/// A mark a handle of the batch, to find one listed twice (scratch slot 2).
static bool marks_clear(const qg_handle *handles, int32_t n, uint8_t **marks)
{
    int32_t max = 0;
    for (int32_t i = 0; i < n; ++i)
        max = handles[i] > max ? handles[i] : max;
    buf *b = &scratch[2];
    if (!glue_grow(b, (size_t)max + 1))
        return false;
    *marks = b->p;
    for (int32_t i = 0; i < n; ++i)
        (*marks)[handles[i]] = 0;
    return true;
}

/// The checks every per-handle batch shares: n >= 0, each handle live and
/// listed once. QG_OK when the batch may go ahead.
static int32_t check_handles(const qg_index *ix, const qg_handle *handles, int32_t n)
{
    if (n < 0)
        return QG_ERR_INVALID;
    qg_rect b;
    for (int32_t i = 0; i < n; ++i)
        if (qg_get(ix, handles[i], &b) != QG_OK)
            return QG_ERR_HANDLE;
    uint8_t *marks;
    if (!marks_clear(handles, n, &marks))
        return QG_ERR_NOMEM;
    for (int32_t i = 0; i < n; ++i) {
        if (marks[handles[i]])
            return QG_ERR_INVALID;
        marks[handles[i]] = 1;
    }
    return QG_OK;
}

/// Removes handles[0..n): all live and distinct, else nothing is removed.
EXPORT int32_t qgjs_remove_many(qg_index *ix, const qg_handle *handles, int32_t n)
{
    int32_t s = check_handles(ix, handles, n);
    for (int32_t i = 0; i < n && s == QG_OK; ++i)
        s = qg_remove(ix, handles[i]);
    return s;
}

/// Reads the boxes of handles[0..n) into out (4n floats).
EXPORT int32_t qgjs_get_many(const qg_index *ix, const qg_handle *handles, int32_t n, qg_rect *out)
{
    if (n < 0)
        return QG_ERR_INVALID;
    for (int32_t i = 0; i < n; ++i)
        if (qg_get(ix, handles[i], &out[i]) != QG_OK)
            return QG_ERR_HANDLE;
    return QG_OK;
}

/// Marks handles[0..n) static (flags[i] != 0) or dynamic. Making an element
/// static may allocate; on a failure the flags already changed are put back
/// (a return to a state the index had never allocates), so a failed batch
/// changes nothing.
EXPORT int32_t qgjs_set_static_many(qg_index *ix, const qg_handle *handles, const uint8_t *flags,
                                    int32_t n)
{
    int32_t s = check_handles(ix, handles, n);
    if (s != QG_OK)
        return s;
    // check_handles left a mark per handle in scratch 2: keep the old flag there.
    uint8_t *was = scratch[2].p;
    for (int32_t i = 0; i < n; ++i)
        was[handles[i]] = qg_is_static(ix, handles[i]);
    for (int32_t i = 0; i < n; ++i) {
        s = qg_set_static(ix, handles[i], flags[i] != 0);
        if (s != QG_OK) {
            for (int32_t j = i; j-- > 0;)
                (void)qg_set_static(ix, handles[j], was[handles[j]] != 0);
            return s;
        }
    }
    return QG_OK;
}

/// Sets the filters of handles[0..n): filters[2i] the category, [2i+1] the mask.
EXPORT int32_t qgjs_set_filter_many(qg_index *ix, const qg_handle *handles, const uint32_t *filters,
                                    int32_t n)
{
    int32_t s = check_handles(ix, handles, n);
    // Only the first non-default filter of an index allocates (the
    // per-element table), and that is the first call here that can fail.
    for (int32_t i = 0; i < n && s == QG_OK; ++i)
        s = qg_set_filter(ix, handles[i], (qg_filter){filters[2 * i], filters[2 * i + 1]});
    return s;
}

/// Reads the filters of handles[0..n) into out (2n).
EXPORT int32_t qgjs_get_filter_many(const qg_index *ix, const qg_handle *handles, int32_t n,
                                    uint32_t *out)
{
    for (int32_t i = 0; i < n; ++i) {
        qg_filter f;
        if (qg_get_filter(ix, handles[i], &f) != QG_OK)
            return QG_ERR_HANDLE;
        out[2 * i] = f.category;
        out[2 * i + 1] = f.mask;
    }
    return QG_OK;
}

/// Static flags of handles[0..n) into out (0 or 1; 0 for a handle not live).
EXPORT void qgjs_is_static_many(const qg_index *ix, const qg_handle *handles, int32_t n, uint8_t *out)
{
    for (int32_t i = 0; i < n; ++i)
        out[i] = qg_is_static(ix, handles[i]);
}

/// Every pair into out 0 (a, b, a, b, ...).
EXPORT int32_t qgjs_pairs(const qg_index *ix)
{
    reset_out();
    list l = {&out_i[0], &out_len[0], false};
    int32_t s = qg_pairs(ix, on_pair, &l);
    return l.oom ? QG_ERR_NOMEM : s;
}

/// The pair count only (no list): for timing the search itself.
static bool count_pair(qg_handle a, qg_handle b, void *user)
{
    (void)a, (void)b;
    ++*(int32_t *)user;
    return true;
}

EXPORT int32_t qgjs_pair_count(const qg_index *ix)
{
    int32_t n = 0;
    int32_t s = qg_pairs(ix, count_pair, &n);
    return s == QG_OK ? n : s;
}

/// Handles whose boxes overlap the area into out 0.
EXPORT int32_t qgjs_query(const qg_index *ix, float x0, float y0, float x1, float y1)
{
    reset_out();
    list l = {&out_i[0], &out_len[0], false};
    int32_t s = qg_query(ix, (qg_rect){x0, y0, x1, y1}, on_hit, &l);
    return l.oom ? QG_ERR_NOMEM : s;
}

typedef struct ray_ctx {
    list l;
    bool closest;
    float best;
    qg_handle best_h;
} ray_ctx;

static float on_ray(qg_handle h, float t, void *user)
{
    ray_ctx *r = user;
    if (r->closest) {
        if (t < r->best || (t == r->best && h < r->best_h))
            r->best = t, r->best_h = h;
        return t;
    }
    // The float list grows with the int list, same count.
    const size_t need = ((size_t)*r->l.len + 1) * sizeof(float);
    if ((need > out_f.cap && !glue_grow(&out_f, need)) || !push1(&r->l, h)) {
        r->l.oom = true;
        return -1.0f;
    }
    ((float *)out_f.p)[*r->l.len - 1] = t;
    return INFINITY;
}

/// Every hit (handles out 0, t out 2), or with `closest` the nearest one
/// (ties to the smaller handle), as one entry or none.
EXPORT int32_t qgjs_raycast(const qg_index *ix, float ox, float oy, float dx, float dy, float max_t,
                            int32_t closest)
{
    reset_out();
    ray_ctx r = {{&out_i[0], &out_len[0], false}, closest != 0, INFINITY, -1};
    int32_t s = qg_raycast(ix, ox, oy, dx, dy, max_t, on_ray, &r);
    if (s != QG_OK)
        return s;
    if (r.l.oom)
        return QG_ERR_NOMEM;
    if (r.closest && r.best_h >= 0) {
        if (!glue_grow(&out_f, sizeof(float)) || !push1(&r.l, r.best_h))
            return QG_ERR_NOMEM;
        ((float *)out_f.p)[0] = r.best;
    }
    out_len[2] = out_len[0];
    return QG_OK;
}

/// The k nearest (handles out 0, distances2 out 2).
EXPORT int32_t qgjs_nearest(const qg_index *ix, float x, float y, int32_t k, float max_d2)
{
    reset_out();
    if (k < 0)
        return QG_ERR_INVALID;
    const size_t bytes = ((size_t)k + 1) * 4;
    if (!glue_grow(&out_i[0], bytes) || !glue_grow(&out_f, bytes))
        return QG_ERR_NOMEM;
    int32_t found = 0;
    int32_t s = qg_nearest(ix, x, y, k, max_d2, out_i[0].p, out_f.p, &found);
    if (s == QG_OK)
        out_len[0] = out_len[2] = found;
    return s;
}

typedef struct events_ctx {
    list began, ended;
} events_ctx;

static bool on_began(qg_handle a, qg_handle b, void *user) { return push2(&((events_ctx *)user)->began, a, b); }
static bool on_ended(qg_handle a, qg_handle b, void *user) { return push2(&((events_ctx *)user)->ended, a, b); }

/// Overlap events: began into out 0, ended into out 1. Reported events cannot
/// be asked for again, so both lists are grown first to what they can need:
/// began to the current pair count, ended to the previous call's
/// (`previous`, kept by the caller); the pushes then never fail.
EXPORT int32_t qgjs_pair_events(qg_index *ix, int32_t previous)
{
    reset_out();
    int32_t now = 0;
    int32_t s = qg_pairs(ix, count_pair, &now);
    if (s != QG_OK)
        return s;
    if (!glue_grow(&out_i[0], ((size_t)now * 2 + 2) * sizeof(int32_t)) ||
        !glue_grow(&out_i[1], ((size_t)previous * 2 + 2) * sizeof(int32_t)))
        return QG_ERR_NOMEM;
    events_ctx c = {{&out_i[0], &out_len[0], false}, {&out_i[1], &out_len[1], false}};
    return qg_pair_events(ix, on_began, on_ended, &c);
}

/* ---- Rollback: clones, copies and snapshots ------------------------------
 * The library's calls as they are; the clone keeps the original's allocator
 * (count_realloc), a read index gets it too, so their bytes are counted. */

EXPORT int32_t qgjs_clone(const qg_index *ix, qg_index **out) { return qg_clone(ix, out); }
EXPORT int32_t qgjs_copy(qg_index *dst, const qg_index *src) { return qg_copy(dst, src); }
EXPORT double qgjs_snapshot_size(const qg_index *ix) { return (double)qg_snapshot_size(ix); }

EXPORT int32_t qgjs_snapshot_write(const qg_index *ix, void *buf, double len)
{
    if (!(len >= 0))
        return QG_ERR_INVALID;
    return qg_snapshot_write(ix, buf, (size_t)len);
}

/// A new index from len bytes at buf; *kind its kind (the header's, which
/// the read checked against the body).
EXPORT int32_t qgjs_snapshot_read(const void *buf, double len, qg_index **out, int32_t *kind)
{
    *out = NULL;
    *kind = -1;
    if (!(len >= 0))
        return QG_ERR_INVALID;
    const qg_allocator a = {count_realloc, NULL};
    const qg_status st = qg_snapshot_read(buf, (size_t)len, &a, out);
    if (st == QG_OK) {
        uint32_t k;
        memcpy(&k, (const unsigned char *)buf + 12, sizeof k); // docs/rollback.md: the kind, LE
        *kind = (int32_t)k;
    }
    return st;
}

typedef struct events_count {
    int32_t began, ended;
} events_count;

static bool count_began(qg_handle a, qg_handle b, void *user)
{
    (void)a, (void)b;
    ++((events_count *)user)->began;
    return true;
}

static bool count_ended(qg_handle a, qg_handle b, void *user)
{
    (void)a, (void)b;
    ++((events_count *)user)->ended;
    return true;
}

/// The number of pairs the index's next qg_pair_events compares with (the
/// `previous` of qgjs_pair_events), for an index read from a snapshot, where
/// JavaScript did not see the calls: asked of a clone, whose events are
/// consumed there (the index is untouched): now - began + ended. A status
/// (< 0) when the clone or its calls fail.
EXPORT int32_t qgjs_event_pairs(const qg_index *ix)
{
    qg_index *c;
    qg_status st = qg_clone(ix, &c);
    if (st != QG_OK)
        return st;
    int32_t now = 0;
    events_count n = {0, 0};
    st = qg_pairs(c, count_pair, &now);
    if (st == QG_OK)
        st = qg_pair_events(c, count_began, count_ended, &n);
    qg_destroy(c);
    return st != QG_OK ? st : now - n.began + n.ended;
}

/* ---- The agents workload (apps/common/workload.c), for the demo page and
 * the benchmark: the same bits as quadgrid-bench's frames. ---------------- */

/// N agents (mixed: the `mixed` workload); NULL when out of memory.
EXPORT qgw_agents *qgjs_agents_new(int32_t n, int32_t mixed)
{
    qgw_agents *a = malloc(sizeof *a);
    if (a == NULL)
        return NULL;
    if (!(mixed ? qgw_agents_init_mixed(a, n) : qgw_agents_init(a, n))) {
        free(a);
        return NULL;
    }
    return a;
}

EXPORT void qgjs_agents_free(qgw_agents *a)
{
    if (a != NULL)
        qgw_agents_free(a);
    free(a);
}

EXPORT void qgjs_agents_move(qgw_agents *a) { qgw_agents_move(a); }
EXPORT qg_rect *qgjs_agents_boxes(const qgw_agents *a) { return a->boxes; }
EXPORT float *qgjs_agents_field(const qgw_agents *a, int32_t which)
{
    float *f[5] = {a->x, a->y, a->vx, a->vy, a->h};
    return which >= 0 && which < 5 ? f[which] : NULL;
}
EXPORT float qgjs_agents_world(const qgw_agents *a) { return a->world; }


/* ---- Cells, for drawing ------------------------------------------------- */

typedef struct visit_ctx {
    int32_t n;
    bool oom;
} visit_ctx;

static void on_visit(qg_rect cell, int depth, int32_t elements, void *user)
{
    visit_ctx *v = user;
    if (v->oom || !glue_grow(&out_f, ((size_t)v->n + 1) * 6 * sizeof(float))) {
        v->oom = true;
        return;
    }
    float *p = (float *)out_f.p + (size_t)v->n * 6;
    p[0] = cell.min_x, p[1] = cell.min_y, p[2] = cell.max_x, p[3] = cell.max_y;
    p[4] = (float)depth, p[5] = (float)elements;
    v->n++;
}

/// Every node or cell (qg_visit) into out 2: min_x, min_y, max_x, max_y,
/// depth, elements (six floats each); out_len[2] counts floats.
EXPORT int32_t qgjs_visit(const qg_index *ix)
{
    reset_out();
    visit_ctx v = {0, false};
    qg_visit(ix, on_visit, &v);
    if (v.oom)
        return QG_ERR_NOMEM;
    out_len[2] = v.n * 6;
    return QG_OK;
}
