// SPDX-License-Identifier: MIT
// qg_clone, qg_copy and snapshots: the state walk of state.h run in each of
// its modes over the base, the kind, the tuner and the engine.
//
// The snapshot (docs/rollback.md): a 32-byte header (magic, version, kind,
// length, checksum of the rest) and then the walk's fields in walk order,
// little-endian, with no padding. Every platform quadgrid builds for is
// little-endian with IEEE floats, so a field is its bytes; a big-endian
// build refuses at compile time rather than write another format.
#include "state.h"

#include "static_filters_events/engine.h"
#include "tune.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "quadgrid's snapshot format is little-endian; this platform is not"
#endif

#define SNAP_MAGIC "quadgrid"
#define SNAP_VERSION 1u
#define SNAP_HEADER 32
/// A read may allocate arrays of at most this many bytes of capacity per
/// byte of snapshot, plus SNAP_SLACK: an index emptied after holding many
/// elements keeps its capacity (it is state), which a short snapshot
/// describes in a few bytes; a hostile one cannot make a read take more.
#define SNAP_PER_BYTE 64u
#define SNAP_SLACK ((size_t)64 << 20)



void qg_st_fail(qg_state *s, qg_status status)
{
    if (s->ok) {
        s->ok = false;
        s->status = status;
    }
}

void qg_st_val(qg_state *s, void *d, const void *src, size_t n)
{
    if (!s->ok)
        return;
    switch (s->mode) {
    case QG_ST_SIZE:
        s->pos += n;
        break;
    case QG_ST_WRITE:
        memcpy(s->out + s->pos, src, n);
        s->pos += n;
        break;
    case QG_ST_READ:
        if (n > s->len - s->pos) {
            qg_st_fail(s, QG_ERR_INVALID);
            return;
        }
        memcpy(d, s->in + s->pos, n);
        s->pos += n;
        break;
    case QG_ST_FITS:
        break;
    case QG_ST_COPY:
        if (d != src)
            memmove(d, src, n);
        break;
    }
}

void qg_st_size(qg_state *s, size_t *d, const size_t *src)
{
    uint64_t v = s->mode == QG_ST_READ ? 0 : (uint64_t)*src, out = 0;
    qg_st_val(s, &out, &v, sizeof v);
    if (s->ok && s->mode == QG_ST_READ) {
        if (out > SIZE_MAX) {
            qg_st_fail(s, QG_ERR_INVALID);
            return;
        }
        *d = (size_t)out;
    } else if (s->ok && s->mode == QG_ST_COPY) {
        *d = *src;
    }
}

void qg_st_bool(qg_state *s, bool *d, const bool *src)
{
    uint8_t v = s->mode == QG_ST_READ ? 0 : (uint8_t)(*src ? 1 : 0), out = 0;
    qg_st_val(s, &out, &v, 1);
    if (s->ok && s->mode == QG_ST_READ) {
        if (out > 1) {
            qg_st_fail(s, QG_ERR_INVALID);
            return;
        }
        *d = out != 0;
    } else if (s->ok && s->mode == QG_ST_COPY) {
        *d = *src;
    }
}

/// Reading: takes `bytes` of capacity from the budget.
static bool take_budget(qg_state *s, size_t bytes)
{
    if (bytes > s->budget) {
        qg_st_fail(s, QG_ERR_INVALID);
        return false;
    }
    s->budget -= bytes;
    return true;
}

bool qg_st_array(qg_state *s, void **d, int32_t *dcap, const void *sarr, int32_t scap, int64_t used, size_t elem)
{
    if (!s->ok)
        return false;
    switch (s->mode) {
    case QG_ST_SIZE:
    case QG_ST_WRITE: {
        const int32_t u = (int32_t)used;
        qg_st_val(s, NULL, &scap, sizeof scap);
        qg_st_val(s, NULL, &u, sizeof u);
        const size_t n = (size_t)used * elem;
        if (s->mode == QG_ST_WRITE && n > 0)
            memcpy(s->out + s->pos, sarr, n);
        s->pos += n;
        return true;
    }
    case QG_ST_READ: {
        int32_t cap = 0, u = 0;
        qg_st_val(s, &cap, &cap, sizeof cap);
        qg_st_val(s, &u, &u, sizeof u);
        if (!s->ok)
            return false;
        if (cap < 0 || u < 0 || u > cap || (size_t)u > (s->len - s->pos) / (elem ? elem : 1)) {
            qg_st_fail(s, QG_ERR_INVALID);
            return false;
        }
        const size_t bytes = (size_t)cap * elem, n = (size_t)u * elem;
        if (!take_budget(s, bytes))
            return false;
        void *p = NULL;
        if (bytes > 0) {
            p = qg_mem_alloc(s->alloc, bytes);
            if (p == NULL) {
                qg_st_fail(s, QG_ERR_NOMEM);
                return false;
            }
            if (n > 0)
                memcpy(p, s->in + s->pos, n);
            memset((unsigned char *)p + n, 0, bytes - n);
        }
        s->pos += n;
        *d = p;
        *dcap = cap;
        return true;
    }
    case QG_ST_FITS:
        if (*dcap < scap)
            qg_st_fail(s, QG_ERR_NOMEM);
        return s->ok;
    case QG_ST_COPY:
        if (*dcap != scap) {
            // Never a growth: the fits pass saw room. A shrink cannot fail.
            void *p = qg_mem_resize(s->alloc, *d, (size_t)*dcap * elem, (size_t)scap * elem);
            if (p == NULL && scap > 0) {
                qg_st_fail(s, QG_ERR_NOMEM);
                return false;
            }
            *d = p;
            *dcap = scap;
        }
        if (used > 0 && *d != sarr)
            memcpy(*d, sarr, (size_t)used * elem);
        return true;
    }
    return false;
}

bool qg_st_block(qg_state *s, void **d, size_t dbytes, const void *sblock, size_t bytes)
{
    if (!s->ok)
        return false;
    switch (s->mode) {
    case QG_ST_SIZE:
    case QG_ST_WRITE:
        if (s->mode == QG_ST_WRITE && bytes > 0)
            memcpy(s->out + s->pos, sblock, bytes);
        s->pos += bytes;
        return true;
    case QG_ST_READ: {
        if (bytes > s->len - s->pos || !take_budget(s, bytes)) {
            qg_st_fail(s, QG_ERR_INVALID);
            return false;
        }
        void *p = NULL;
        if (bytes > 0 && (p = qg_mem_alloc(s->alloc, bytes)) == NULL) {
            qg_st_fail(s, QG_ERR_NOMEM);
            return false;
        }
        if (bytes > 0)
            memcpy(p, s->in + s->pos, bytes);
        s->pos += bytes;
        *d = p;
        return true;
    }
    case QG_ST_FITS:
        if (dbytes < bytes)
            qg_st_fail(s, QG_ERR_NOMEM);
        return s->ok;
    case QG_ST_COPY:
        if (dbytes != bytes) {
            void *p = qg_mem_resize(s->alloc, *d, dbytes, bytes);
            if (p == NULL && bytes > 0) {
                qg_st_fail(s, QG_ERR_NOMEM);
                return false;
            }
            *d = p;
        }
        if (bytes > 0 && *d != sblock)
            memcpy(*d, sblock, bytes);
        return true;
    }
    return false;
}

bool qg_st_struct(qg_state *s, void **d, const void *src, size_t size, bool *drop)
{
    *drop = false;
    if (!s->ok)
        return false;
    bool here = src != NULL;
    qg_st_bool(s, &here, &here);
    if (!s->ok)
        return false;
    switch (s->mode) {
    case QG_ST_SIZE:
    case QG_ST_WRITE:
        return here;
    case QG_ST_READ:
        if (!here)
            return false;
        if (!take_budget(s, size))
            return false;
        if ((*d = qg_mem_alloc(s->alloc, size)) == NULL) {
            qg_st_fail(s, QG_ERR_NOMEM);
            return false;
        }
        memset(*d, 0, size);
        return true;
    case QG_ST_FITS:
        if (here && *d == NULL)
            qg_st_fail(s, QG_ERR_NOMEM); // a copy would allocate it: clone instead
        return here && s->ok;
    case QG_ST_COPY:
        if (!here) {
            *drop = *d != NULL;
            return false;
        }
        return true;
    }
    return false;
}

/// Which table index->klass is: the kind's own, a pending re-tune's, the
/// engine's (tune.h, engine.h), as one byte.
enum { KLASS_KIND, KLASS_TUNE, KLASS_ENGINE };

/// The base: the configuration (its allocator aside), the element slots and
/// the handle free list.
static void base_state(qg_state *s, qg_index *d, const qg_index *src)
{
    int32_t kind = (int32_t)src->config.kind;
    qg_st_val(s, &kind, &kind, sizeof kind);
    if (s->ok && s->mode == QG_ST_READ && kind != (int32_t)d->config.kind)
        qg_st_fail(s, QG_ERR_INVALID);
    QG_ST(s, d, src, config.bounds);
    QG_ST(s, d, src, config.element_size);
    QG_ST(s, d, src, config.max_element_size);
    QG_ST(s, d, src, config.max_depth);
    QG_ST(s, d, src, config.leaf_capacity);
    QG_ST(s, d, src, config.cell_size);
    QG_ST_BOOL(s, d, src, config.fixed_sizes);
    QG_ST(s, d, src, box_high);
    QG_ST(s, d, src, free_head);
    QG_ST(s, d, src, count);
    // The configuration as qg_create checks it: a later re-fit or re-tune
    // builds a world from it.
    const qg_config *c = &d->config;
    if (s->mode == QG_ST_READ && s->ok &&
        (d->box_high < 0 || d->count < 0 || d->count > d->box_high || !qg_box_valid(c->bounds) ||
         !(c->bounds.min_x < c->bounds.max_x) || !(c->bounds.min_y < c->bounds.max_y) ||
         !(isfinite(c->element_size) && c->element_size >= 0.0f) ||
         !(isfinite(c->max_element_size) && c->max_element_size >= 0.0f) ||
         !(isfinite(c->cell_size) && c->cell_size >= 0.0f) || c->max_depth < 0 || c->leaf_capacity < 0)) {
        qg_st_fail(s, QG_ERR_INVALID);
        return;
    }
    qg_st_array(s, (void **)&d->boxes, &d->box_capacity, src->boxes, src->box_capacity, src->box_high,
                sizeof(qg_rect));
    if (s->mode == QG_ST_READ && s->ok && d->box_high > d->box_capacity)
        qg_st_fail(s, QG_ERR_INVALID);
}

/// The whole walk: base, kind, tuner, engine, then which table is in force.
static void index_state(qg_state *s, qg_index *d, const qg_index *src)
{
    const qg_kind_class *kc = qg_kind_class_of(src->config.kind);
    if (kc->state == NULL) {
        qg_st_fail(s, QG_ERR_INVALID);
        return;
    }
    base_state(s, d, src);
    kc->state(s, d, src);
    qg_tune_state(s, d, src);
    qg_engine_state(s, d, src);
    uint8_t which = KLASS_KIND;
    if (s->mode == QG_ST_SIZE || s->mode == QG_ST_WRITE || s->mode == QG_ST_COPY) {
        if (src->tune != NULL && src->klass == &src->tune->pending)
            which = KLASS_TUNE;
        else if (src->engine != NULL && src->klass == &src->engine->table)
            which = KLASS_ENGINE;
    }
    qg_st_val(s, &which, &which, 1);
    if (!s->ok || s->mode == QG_ST_SIZE || s->mode == QG_ST_WRITE || s->mode == QG_ST_FITS)
        return;
    if ((which == KLASS_TUNE && d->tune == NULL) || (which == KLASS_ENGINE && d->engine == NULL) ||
        which > KLASS_ENGINE) {
        qg_st_fail(s, QG_ERR_INVALID);
        return;
    }
    d->klass = which == KLASS_TUNE ? &d->tune->pending : which == KLASS_ENGINE ? &d->engine->table : kc;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void put64(unsigned char *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

/// The checksum of a snapshot's body: four lanes of a multiply-xor mix, 32
/// bytes a step (a byte-at-a-time hash would cost more than the copy); the
/// last partial step is zero-padded, and the length goes in at the end.
static uint64_t checksum(const unsigned char *p, size_t n)
{
    const uint64_t m = 0x9E3779B97F4A7C15ull;
    uint64_t h[4] = {0x243F6A8885A308D3ull, 0x13198A2E03707344ull, 0xA4093822299F31D0ull, 0x082EFA98EC4E6C89ull};
    unsigned char last[32];
    for (size_t i = 0; i < n; i += 32) {
        const unsigned char *q = p + i;
        if (n - i < 32) {
            memset(last, 0, sizeof last);
            memcpy(last, q, n - i);
            q = last;
        }
        for (int k = 0; k < 4; ++k) {
            h[k] = (h[k] ^ get64(q + 8 * (size_t)k)) * m;
            h[k] ^= h[k] >> 29;
        }
    }
    uint64_t r = (uint64_t)n * m;
    for (int k = 0; k < 4; ++k) {
        r = (r ^ h[k]) * m;
        r ^= r >> 31;
    }
    return r;
}

size_t qg_snapshot_size(const qg_index *index)
{
    if (index == NULL)
        return 0;
    qg_state s = {.mode = QG_ST_SIZE, .ok = true};
    index_state(&s, (qg_index *)index, index);
    return SNAP_HEADER + s.pos;
}

qg_status qg_snapshot_write(const qg_index *index, void *buf, size_t len)
{
    if (index == NULL || buf == NULL)
        return QG_ERR_INVALID;
    const size_t need = qg_snapshot_size(index);
    if (len < need)
        return QG_ERR_INVALID;
    unsigned char *out = buf;
    qg_state s = {.mode = QG_ST_WRITE, .ok = true, .out = out + SNAP_HEADER, .len = need - SNAP_HEADER};
    index_state(&s, (qg_index *)index, index);
    if (!s.ok || s.pos != need - SNAP_HEADER)
        return QG_ERR_INVALID;
    memcpy(out, SNAP_MAGIC, 8);
    const uint32_t version = SNAP_VERSION, kind = (uint32_t)index->config.kind;
    memcpy(out + 8, &version, 4);
    memcpy(out + 12, &kind, 4);
    put64(out + 16, (uint64_t)need);
    put64(out + 24, checksum(out + SNAP_HEADER, need - SNAP_HEADER));
    return QG_OK;
}

/// Frees what a read or a clone built so far (the walk left it safe to
/// destroy) and the struct itself.
static void drop_index(qg_index *index)
{
    qg_tune_destroy(index);
    qg_kind_class_of(index->config.kind)->destroy(index);
    qg_engine_destroy(index);
    qg_array_free(&index->alloc, (void **)&index->boxes, &index->box_capacity, sizeof(qg_rect));
    qg_alloc alloc = index->alloc;
    qg_mem_free(&alloc, index, qg_kind_class_of(index->config.kind)->size);
}

/// qg_snapshot_read; `trusted`: the bytes were just written here from a
/// valid index (a clone), so no budget bounds the capacities they ask for
/// and the index they make is not validated again.
static qg_status read_snapshot(const void *buf, size_t len, const qg_allocator *allocator, bool trusted,
                               qg_index **out)
{
    if (out == NULL)
        return QG_ERR_INVALID;
    *out = NULL;
    if (buf == NULL || len < SNAP_HEADER)
        return QG_ERR_INVALID;
    if (allocator != NULL && allocator->realloc == NULL && allocator->user != NULL)
        return QG_ERR_INVALID;
    const unsigned char *in = buf;
    uint32_t version, kind;
    memcpy(&version, in + 8, 4);
    memcpy(&kind, in + 12, 4);
    if (memcmp(in, SNAP_MAGIC, 8) != 0 || version != SNAP_VERSION || get64(in + 16) != (uint64_t)len ||
        !qg_kind_available((qg_kind)kind) || kind >= QG_KIND_COUNT)
        return QG_ERR_INVALID;
    if (get64(in + 24) != checksum(in + SNAP_HEADER, len - SNAP_HEADER))
        return QG_ERR_INVALID;
    const qg_kind_class *kc = qg_kind_class_of((qg_kind)kind);
    qg_alloc alloc;
    qg_alloc_init(&alloc, allocator);
    qg_index *index = qg_mem_alloc(&alloc, kc->size);
    if (index == NULL)
        return QG_ERR_NOMEM;
    memset(index, 0, kc->size);
    index->klass = kc;
    index->alloc = alloc;
    index->config.kind = (qg_kind)kind;
    if (allocator != NULL)
        index->config.allocator = *allocator;
    index->free_head = -1;
    const size_t body = len - SNAP_HEADER;
    qg_state s = {.mode = QG_ST_READ,
                  .ok = true,
                  .in = in + SNAP_HEADER,
                  .len = body,
                  .alloc = &index->alloc,
                  .budget = trusted || body > (SIZE_MAX - SNAP_SLACK) / SNAP_PER_BYTE
                                ? SIZE_MAX
                                : body * SNAP_PER_BYTE + SNAP_SLACK};
    index_state(&s, index, index);
    qg_status st = s.ok ? QG_OK : s.status;
    if (st == QG_OK && s.pos != body)
        st = QG_ERR_INVALID; // bytes left over: not what this version writes
    // Bytes from outside are checked whole: the walk checked what the
    // kinds' own code would trip on, qg_validate checks the rest. A clone's
    // bytes come from a valid index this call just wrote: no need.
    if (st == QG_OK && !trusted && qg_validate(index) != QG_OK)
        st = QG_ERR_INVALID;
    if (st != QG_OK) {
        index->klass = kc;
        drop_index(index);
        return st;
    }
    *out = index;
    return QG_OK;
}

qg_status qg_snapshot_read(const void *buf, size_t len, const qg_allocator *allocator, qg_index **out)
{
    return read_snapshot(buf, len, allocator, false, out);
}

/// A clone of src whose memory comes from `fn`.
static qg_status clone_with(const qg_index *src, const qg_allocator *fn, qg_index **out)
{
    const size_t n = qg_snapshot_size(src);
    qg_alloc scratch;
    qg_alloc_init(&scratch, fn);
    void *buf = qg_mem_alloc(&scratch, n);
    if (buf == NULL)
        return QG_ERR_NOMEM;
    qg_status st = qg_snapshot_write(src, buf, n);
    if (st == QG_OK)
        st = read_snapshot(buf, n, fn, true, out);
    qg_mem_free(&scratch, buf, n);
    if (st == QG_OK)
        (*out)->config.allocator = src->config.allocator;
    return st;
}

qg_status qg_clone(const qg_index *index, qg_index **out)
{
    if (out == NULL)
        return QG_ERR_INVALID;
    *out = NULL;
    if (index == NULL)
        return QG_ERR_INVALID;
    return clone_with(index, &index->alloc.fn, out);
}

qg_status qg_copy(qg_index *dst, const qg_index *src)
{
    if (dst == NULL || src == NULL || dst->config.kind != src->config.kind)
        return QG_ERR_INVALID;
    if (dst == src)
        return QG_OK;
    qg_state s = {.mode = QG_ST_FITS, .ok = true, .alloc = &dst->alloc};
    index_state(&s, dst, src);
    if (s.ok) {
        s = (qg_state){.mode = QG_ST_COPY, .ok = true, .alloc = &dst->alloc};
        index_state(&s, dst, src);
        return s.ok ? QG_OK : s.status; // the fits pass makes a failure here impossible
    }
    // dst lacks room (or its structure differs): a fresh clone, swapped in
    // once it is whole, so a failure leaves dst as it was.
    qg_index *fresh;
    const qg_status st = clone_with(src, &dst->alloc.fn, &fresh);
    if (st != QG_OK)
        return st;
    const qg_kind_class *kc = qg_kind_class_of(dst->config.kind);
    const qg_allocator keep = dst->config.allocator;
    qg_tune_destroy(dst);
    kc->destroy(dst);
    qg_engine_destroy(dst);
    qg_array_free(&dst->alloc, (void **)&dst->boxes, &dst->box_capacity, sizeof(qg_rect));
    const qg_allocator fn = dst->alloc.fn;
    memcpy(dst, fresh, kc->size);
    dst->config.allocator = keep;
    // fresh's struct was counted in its bytes as dst's is: the count carries over.
    fn.realloc(fresh, kc->size, 0, fn.user);
    return QG_OK;
}
