// SPDX-License-Identifier: MIT
// The Python binding's loops: every call of the NumPy API is one call here,
// so Python never runs per element or per pair. The C API is the contract
// (include/quadgrid.h); this file only batches it, grows result buffers and
// finds which row of a refused batch was bad, so the index is never left
// half-changed and the Python error can name the row.
#include "qg_py.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(qg_rect) == 4 * sizeof(float), "qg_rect is four packed floats");

static bool vec_reserve(qgpy_vec *v, int64_t extra)
{
    if (v->len + extra <= v->cap) return true;
    int64_t cap = v->cap > 0 ? v->cap : 1024;
    while (cap < v->len + extra) cap *= 2;
    int32_t *p = realloc(v->data, (size_t)cap * sizeof *p);
    if (p == NULL) {
        v->failed = true;
        return false;
    }
    v->data = p;
    v->cap = cap;
    return true;
}

static inline bool vec_push2(qgpy_vec *v, int32_t a, int32_t b)
{
    if (v->len + 2 > v->cap && !vec_reserve(v, 2)) return false;
    v->data[v->len] = a;
    v->data[v->len + 1] = b;
    v->len += 2;
    return true;
}

static inline bool vec_push1(qgpy_vec *v, int32_t a)
{
    if (v->len + 1 > v->cap && !vec_reserve(v, 1)) return false;
    v->data[v->len++] = a;
    return true;
}

static void vec_reset(qgpy_vec *v)
{
    v->len = 0;
    v->failed = false;
}

static void vec_free(qgpy_vec *v)
{
    free(v->data);
    memset(v, 0, sizeof *v);
}

int qgpy_open(const qg_config *config, qgpy **out)
{
    *out = NULL;
    qgpy *s = calloc(1, sizeof *s);
    if (s == NULL) return QG_ERR_NOMEM;
    qg_status st = qg_create(config, &s->index);
    if (st != QG_OK) {
        free(s);
        return st;
    }
    *out = s;
    return QG_OK;
}

void qgpy_close(qgpy *s)
{
    if (s == NULL) return;
    qg_destroy(s->index);
    qg_thread_pool_destroy(s->pool);
    for (int i = 0; i < QGPY_MAX_PARTS; i++) vec_free(&s->parts[i]);
    vec_free(&s->out);
    vec_free(&s->out2);
    free(s);
}

/* The jobs for `threads` workers: NULL for one (the calling thread does the
 * work, as the C API's NULL jobs means), otherwise the index's own pool,
 * remade when the count changes. */
static int jobs_for(qgpy *s, int32_t threads, const qg_jobs **jobs)
{
    *jobs = NULL;
    if (threads < 1 || threads > QGPY_MAX_PARTS) return QG_ERR_INVALID;
    if (threads == 1) return QG_OK;
    if (s->pool == NULL || s->pool_workers != threads) {
        qg_thread_pool_destroy(s->pool);
        s->pool = NULL;
        s->pool_workers = 0;
        qg_status st = qg_thread_pool_create(threads, &s->pool);
        if (st != QG_OK) return st;
        s->pool_workers = threads;
        s->jobs = qg_thread_pool_jobs(s->pool);
    }
    *jobs = &s->jobs;
    return QG_OK;
}

int64_t qgpy_bad_box(const float *boxes, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float *b = boxes + 4 * i;
        // x - x is NaN for NaN and both infinities: one test for finiteness.
        if (!(b[0] - b[0] == 0.0f && b[1] - b[1] == 0.0f && b[2] - b[2] == 0.0f &&
              b[3] - b[3] == 0.0f && b[0] <= b[2] && b[1] <= b[3]))
            return i;
    }
    return -1;
}

int64_t qgpy_bad_area(const float *boxes, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float *b = boxes + 4 * i;
        if (isnan(b[0]) || isnan(b[1]) || isnan(b[2]) || isnan(b[3])) return i;
    }
    return -1;
}

int qgpy_check_handles(const qgpy *s, const int32_t *handles, int64_t n, int64_t *bad_row)
{
    *bad_row = -1;
    int32_t max_h = -1;
    qg_rect r;
    for (int64_t i = 0; i < n; i++) {
        if (qg_get(s->index, handles[i], &r) != QG_OK) {
            *bad_row = i;
            return QG_ERR_HANDLE;
        }
        if (handles[i] > max_h) max_h = handles[i];
    }
    if (n < 2) return QG_OK;
    // Every handle is live, so max_h is bounded by the index's size.
    unsigned char *seen = calloc((size_t)max_h / 8 + 1, 1);
    if (seen == NULL) return QG_ERR_NOMEM;
    int st = QG_OK;
    for (int64_t i = 0; i < n; i++) {
        uint32_t h = (uint32_t)handles[i];
        if (seen[h >> 3] & (1u << (h & 7))) {
            *bad_row = i;
            st = QG_ERR_INVALID;
            break;
        }
        seen[h >> 3] |= (unsigned char)(1u << (h & 7));
    }
    free(seen);
    return st;
}

int qgpy_insert(qgpy *s, const float *boxes, int64_t n, int32_t *handles, int64_t *bad_row)
{
    *bad_row = -1;
    if (n > INT32_MAX) return QG_ERR_CAPACITY;
    // Checked here first: qg_insert_many may keep capacity a refused batch
    // grew, and a refused insert should not change even the index's memory.
    *bad_row = qgpy_bad_box(boxes, n);
    if (*bad_row >= 0) return QG_ERR_INVALID;
    return qg_insert_many(s->index, (const qg_rect *)boxes, (int32_t)n, handles);
}

int qgpy_move(qgpy *s, const int32_t *handles, const float *boxes, int64_t n, int32_t threads,
              int64_t *bad_row, int *bad_what)
{
    *bad_row = -1;
    *bad_what = 0;
    if (n > INT32_MAX) return QG_ERR_INVALID;
    const qg_jobs *jobs;
    int st = jobs_for(s, threads, &jobs);
    if (st != QG_OK) return st;
    // qg_move_many checks everything before it changes anything; only a
    // refused batch pays for finding the row to name.
    st = qg_move_many(s->index, jobs, handles, (const qg_rect *)boxes, (int32_t)n);
    if (st == QG_ERR_INVALID || st == QG_ERR_HANDLE) {
        int64_t box_row = qgpy_bad_box(boxes, n), h_row;
        int hs = qgpy_check_handles(s, handles, n, &h_row);
        if (box_row >= 0 && (h_row < 0 || box_row <= h_row)) {
            *bad_row = box_row;
            *bad_what = 1;
            return QG_ERR_INVALID;
        }
        if (hs != QG_OK) {
            *bad_row = h_row;
            *bad_what = hs == QG_ERR_HANDLE ? 2 : 3;
            return hs;
        }
    }
    return st;
}

int qgpy_remove(qgpy *s, const int32_t *handles, int64_t n, int64_t *bad_row)
{
    int st = qgpy_check_handles(s, handles, n, bad_row);
    if (st != QG_OK) return st;
    for (int64_t i = 0; i < n; i++) qg_remove(s->index, handles[i]);
    return QG_OK;
}

void qgpy_cleanup(qgpy *s, int32_t threads)
{
    const qg_jobs *jobs;
    if (jobs_for(s, threads, &jobs) != QG_OK) jobs = NULL;
    qg_cleanup_parallel(s->index, jobs);
}

static bool pair_cb(qg_handle a, qg_handle b, void *user)
{
    return vec_push2(user, a, b);
}

int64_t qgpy_pairs(qgpy *s, int32_t threads)
{
    const qg_jobs *jobs;
    int st = jobs_for(s, threads, &jobs);
    if (st != QG_OK) return st;
    int parts = jobs ? jobs->worker_count : 1;
    void *users[QGPY_MAX_PARTS];
    for (int p = 0; p < parts; p++) {
        vec_reset(&s->parts[p]);
        users[p] = &s->parts[p];
    }
    s->nparts = parts;
    if (jobs == NULL)
        st = qg_pairs(s->index, pair_cb, users[0]);
    else
        st = qg_pairs_parallel(s->index, jobs, pair_cb, users, NULL);
    if (st != QG_OK) return st;
    int64_t total = 0;
    for (int p = 0; p < parts; p++) {
        if (s->parts[p].failed) return QG_ERR_NOMEM;
        total += s->parts[p].len / 2;
    }
    return total;
}

void qgpy_pairs_copy(qgpy *s, int32_t *out)
{
    for (int p = 0; p < s->nparts; p++) {
        memcpy(out, s->parts[p].data, (size_t)s->parts[p].len * sizeof *out);
        out += s->parts[p].len;
    }
}

static bool query_cb(qg_handle h, void *user)
{
    return vec_push1(user, h);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int qgpy_query_many(qgpy *s, const float *areas, int64_t n, int64_t *offsets, int64_t *bad_row)
{
    *bad_row = -1;
    vec_reset(&s->out);
    offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *a = areas + 4 * i;
        qg_rect r = {a[0], a[1], a[2], a[3]};
        int64_t start = s->out.len;
        int st = qg_query(s->index, r, query_cb, &s->out);
        if (s->out.failed) return QG_ERR_NOMEM;
        if (st != QG_OK) {
            *bad_row = i;
            return st;
        }
        // Sorted per area: the kinds answer in their own orders.
        qsort(s->out.data + start, (size_t)(s->out.len - start), sizeof(int32_t), cmp_i32);
        offsets[i + 1] = s->out.len;
    }
    return QG_OK;
}

typedef struct ray_ctx {
    float best_t;
    int32_t best_h;
} ray_ctx;

static float ray_cb(qg_handle h, float t, void *user)
{
    ray_ctx *c = user;
    // Ties at the smallest t all reach here: keep the lowest handle.
    if (c->best_h < 0 || t < c->best_t || (t == c->best_t && h < c->best_h)) {
        c->best_t = t;
        c->best_h = h;
    }
    return t;
}

static int cmp_hit(const void *a, const void *b)
{
    const int32_t *x = a, *y = b;
    float tx, ty;
    memcpy(&tx, &x[1], sizeof tx);
    memcpy(&ty, &y[1], sizeof ty);
    if (tx != ty) return tx < ty ? -1 : 1;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

typedef struct ray_all {
    qgpy *s;
    float max_t;
} ray_all;

static float ray_all_cb(qg_handle h, float t, void *user)
{
    ray_all *c = user;
    int32_t bits;
    memcpy(&bits, &t, sizeof bits);
    if (!vec_push2(&c->s->out, h, bits)) return -1.0f;
    return c->max_t;
}

int qgpy_raycast_many(qgpy *s, const float *origins, const float *dirs, const float *max_t, int64_t n,
                      bool closest, int32_t *best_h, float *best_t, int64_t *offsets, int64_t *bad_row)
{
    *bad_row = -1;
    vec_reset(&s->out);
    if (!closest) offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        const float ox = origins[2 * i], oy = origins[2 * i + 1];
        const float dx = dirs[2 * i], dy = dirs[2 * i + 1];
        int st;
        if (closest) {
            ray_ctx c = {INFINITY, -1};
            st = qg_raycast(s->index, ox, oy, dx, dy, max_t[i], ray_cb, &c);
            best_h[i] = c.best_h;
            best_t[i] = c.best_h >= 0 ? c.best_t : INFINITY;
        } else {
            int64_t start = s->out.len;
            ray_all c = {s, max_t[i]};
            st = qg_raycast(s->index, ox, oy, dx, dy, max_t[i], ray_all_cb, &c);
            if (s->out.failed) return QG_ERR_NOMEM;
            // Near to far, ties by handle: the same order from every kind.
            qsort(s->out.data + start, (size_t)(s->out.len - start) / 2, 2 * sizeof(int32_t), cmp_hit);
            offsets[i + 1] = s->out.len / 2;
        }
        if (st != QG_OK) {
            *bad_row = i;
            return st;
        }
    }
    return QG_OK;
}

void qgpy_out_copy(const qgpy *s, int32_t *out)
{
    if (s->out.len > 0) memcpy(out, s->out.data, (size_t)s->out.len * sizeof *out);
}

void qgpy_out2_copy(const qgpy *s, int32_t *out)
{
    if (s->out2.len > 0) memcpy(out, s->out2.data, (size_t)s->out2.len * sizeof *out);
}

int64_t qgpy_out_len(const qgpy *s)
{
    return s->out.len;
}

int64_t qgpy_out2_len(const qgpy *s)
{
    return s->out2.len;
}

int qgpy_nearest_many(const qgpy *s, const float *points, int64_t n, int32_t k, float max_distance2,
                      int32_t *handles, float *distances2, int64_t *bad_row)
{
    *bad_row = -1;
    for (int64_t i = 0; i < n; i++) {
        int32_t *h = handles + (int64_t)k * i;
        float *d = distances2 + (int64_t)k * i;
        int32_t found = 0;
        int st = qg_nearest(s->index, points[2 * i], points[2 * i + 1], k, max_distance2, h, d, &found);
        if (st != QG_OK) {
            *bad_row = i;
            return st;
        }
        for (int32_t j = found; j < k; j++) {
            h[j] = -1;
            d[j] = INFINITY;
        }
    }
    return QG_OK;
}

static bool began_cb(qg_handle a, qg_handle b, void *user)
{
    qgpy *s = user;
    vec_push2(&s->out, a, b);
    return true;
}

static bool ended_cb(qg_handle a, qg_handle b, void *user)
{
    qgpy *s = user;
    vec_push2(&s->out2, a, b);
    return true;
}

int qgpy_pair_events(qgpy *s)
{
    vec_reset(&s->out);
    vec_reset(&s->out2);
    int st = qg_pair_events(s->index, began_cb, ended_cb, s);
    if (st != QG_OK) return st;
    // A buffer that could not grow lost events the index now counts as
    // reported: say so rather than hand back a partial list.
    if (s->out.failed || s->out2.failed) return QG_ERR_NOMEM;
    return QG_OK;
}

int qgpy_set_static(qgpy *s, const int32_t *handles, const uint8_t *flags, int64_t n, int64_t *bad_row)
{
    int st = qgpy_check_handles(s, handles, n, bad_row);
    if (st != QG_OK) return st;
    bool *was = malloc((size_t)(n > 0 ? n : 1) * sizeof *was);
    if (was == NULL) return QG_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) was[i] = qg_is_static(s->index, handles[i]);
    for (int64_t i = 0; i < n; i++) {
        st = qg_set_static(s->index, handles[i], flags[i] != 0);
        if (st != QG_OK) {
            // Undo the ones already set so the index is as it was.
            *bad_row = i;
            for (int64_t j = i - 1; j >= 0; j--) qg_set_static(s->index, handles[j], was[j]);
            break;
        }
    }
    free(was);
    return st;
}

int qgpy_set_filter(qgpy *s, const int32_t *handles, const uint32_t *category, const uint32_t *mask,
                    int64_t n, int64_t *bad_row)
{
    int st = qgpy_check_handles(s, handles, n, bad_row);
    if (st != QG_OK) return st;
    for (int64_t i = 0; i < n; i++) {
        qg_filter f = {category[i], mask[i]};
        // Only the index's first non-default filter allocates, so a failure
        // can only come at row 0, before anything changed.
        st = qg_set_filter(s->index, handles[i], f);
        if (st != QG_OK) {
            *bad_row = i;
            return st;
        }
    }
    return QG_OK;
}

int qgpy_get_boxes(const qgpy *s, const int32_t *handles, int64_t n, float *boxes, int64_t *bad_row)
{
    *bad_row = -1;
    for (int64_t i = 0; i < n; i++) {
        qg_rect r;
        int st = qg_get(s->index, handles[i], &r);
        if (st != QG_OK) {
            *bad_row = i;
            return st;
        }
        memcpy(boxes + 4 * i, &r, sizeof r);
    }
    return QG_OK;
}

/* ---- Rollback: clones, copies and snapshots (qg_clone, qg_copy,
 * qg_snapshot_*). The index is state; the thread pool and the result
 * buffers are not (a clone starts without them, a copy keeps dst's). */

/// A new qgpy around a new index: fails with *out NULL and nothing held.
static int wrap_new(qgpy **out)
{
    *out = calloc(1, sizeof **out);
    return *out == NULL ? QG_ERR_NOMEM : QG_OK;
}

int qgpy_clone(const qgpy *src, qgpy **out)
{
    int st = wrap_new(out);
    if (st != QG_OK) return st;
    st = qg_clone(src->index, &(*out)->index);
    if (st != QG_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

int qgpy_copy(qgpy *dst, const qgpy *src)
{
    return qg_copy(dst->index, src->index);
}

int64_t qgpy_snapshot_size(const qgpy *s)
{
    return (int64_t)qg_snapshot_size(s->index);
}

int qgpy_snapshot_write(const qgpy *s, void *buf, int64_t len)
{
    if (len < 0) return QG_ERR_INVALID;
    return qg_snapshot_write(s->index, buf, (size_t)len);
}

int qgpy_snapshot_read(const void *buf, int64_t len, qgpy **out, int32_t *kind)
{
    *kind = -1;
    if (len < 0) return QG_ERR_INVALID;
    int st = wrap_new(out);
    if (st != QG_OK) return st;
    st = qg_snapshot_read(buf, (size_t)len, NULL, &(*out)->index);
    if (st != QG_OK) {
        free(*out);
        *out = NULL;
        return st;
    }
    // The read accepted the header: its kind field (bytes 12..16, a
    // little-endian uint32; docs/rollback.md) is the index's kind.
    uint32_t k;
    memcpy(&k, (const unsigned char *)buf + 12, sizeof k);
    *kind = (int32_t)k;
    return QG_OK;
}
