// SPDX-License-Identifier: MIT
// Learning sizes and world from the elements; re-tuning by rebuild. See
// tune.h for when, docs/tuning.md for what each kind learns and the figures.
//
// What is learned, from a sample of the elements' larger sides (max of width
// and height) and their bounding box:
// - element_size: the median side (half the elements are smaller). It is
//   what the bench's hand tuning gives every kind (the typical width) and
//   what each kind's configure() already turns into its layout: the trees'
//   depth (smallest cell a little over it), the grids' cells (6 of it), the
//   loose grid's cells (10 of it). bucket_quadtree, whose configure ignores
//   element_size, gets the same depth rule as the other trees. The level
//   quadtree is given the 97th percentile instead (see tune_config).
// - the point grid's max_element_size: the 97th percentile side, plus a
//   sixteenth (the bench's hand tuning is the largest ordinary box; a few
//   boxes 16x larger go to coarser levels, which is what those levels are
//   for). It re-tunes as soon as that percentile passes the bound in force
//   (level 1's cells are 4x as wide: a bound under the boxes is a cliff),
//   or falls under half of it.
// - hysteresis: the grids and the loose grid re-tune when the median moved
//   2x from the one in force, the trees 1.5x (their depth moves in 2x steps).
// - the world: the elements' bounding box. The grids wrap around (a torus),
//   so their cell table follows it; the trees, the loose grid and the point
//   grid also re-fit their world themselves as before.
// cell_size and max_depth are then re-chosen by the kind's configure();
// leaf_capacity is kept.
#include "tune.h"
#include "state.h"

/// Sizes a measure sorts: a cleanup's sample, and a re-tune's.
#define QG_TUNE_SAMPLE 256
#define QG_TUNE_SAMPLE_BIG 2048

static float box_side(qg_rect b)
{
    const double w = qg_extent(b.min_x, b.max_x), h = qg_extent(b.min_y, b.max_y);
    const double s = w > h ? w : h;
    return s < (double)FLT_MAX ? (float)s : FLT_MAX;
}

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void grow_world(qg_rect *w, qg_rect b)
{
    w->min_x = fminf(w->min_x, b.min_x);
    w->min_y = fminf(w->min_y, b.min_y);
    w->max_x = fmaxf(w->max_x, b.max_x);
    w->max_y = fmaxf(w->max_y, b.max_y);
}

/// Sizes of up to `cap` elements, strided over the held ones and `extra`
/// (in proportion), into L; the world from the same sample, or from every
/// element when `full`. False when there is nothing to measure.
static bool tune_measure(const qg_index *index, const qg_rect *extra, int32_t n_extra, int32_t cap, bool full,
                         qg_learned *L)
{
    float sz[QG_TUNE_SAMPLE_BIG];
    if (cap > QG_TUNE_SAMPLE_BIG)
        cap = QG_TUNE_SAMPLE_BIG;
    const int64_t held = index->count, total = held + n_extra;
    if (total <= 0)
        return false;
    qg_rect w = {INFINITY, INFINITY, -INFINITY, -INFINITY};
    int32_t m = 0;
    const int64_t take_held = (int64_t)cap * held / total, take_extra = cap - take_held;
    if (take_held > 0) {
        // One slot from each of take_held equal stretches, at an offset that
        // varies from stretch to stretch (a plain stride aliases with
        // periodic data: every hundredth box large, sampled every 390th,
        // read as 10% large).
        const int64_t high = index->box_high;
        for (int64_t j = 0; j < take_held && m < cap; ++j) {
            const int64_t lo = j * high / take_held, hi = (j + 1) * high / take_held;
            if (hi <= lo)
                continue;
            const int64_t h = lo + (int64_t)(qg_handle_term((qg_handle)j) % (uint64_t)(hi - lo));
            const qg_rect b = index->boxes[h];
            if (isnan(b.min_x))
                continue;
            sz[m++] = box_side(b);
            grow_world(&w, b);
        }
    }
    if (take_extra > 0 && n_extra > 0) {
        for (int64_t j = 0; j < take_extra && m < cap; ++j) {
            const int64_t lo = j * n_extra / take_extra, hi = (j + 1) * n_extra / take_extra;
            if (hi <= lo)
                continue;
            const int64_t i = lo + (int64_t)(qg_handle_term((qg_handle)j) % (uint64_t)(hi - lo));
            sz[m++] = box_side(extra[i]);
            grow_world(&w, extra[i]);
        }
    }
    if (full) {
        for (int32_t h = 0; h < index->box_high; ++h)
            if (!isnan(index->boxes[h].min_x))
                grow_world(&w, index->boxes[h]);
        for (int32_t i = 0; i < n_extra; ++i)
            grow_world(&w, extra[i]);
    }
    if (m == 0)
        return false;
    qsort(sz, (size_t)m, sizeof sz[0], cmp_float);
    float elem = sz[m / 2], bound = sz[(int64_t)m * 97 / 100];
    const double extent = fmax(qg_extent(w.min_x, w.max_x), qg_extent(w.min_y, w.max_y));
    if (!(elem > 0.0f)) {
        // Points (or mostly): the spacing of the elements stands in for
        // their size, so cells hold a few each.
        const double spacing = extent / sqrt((double)total);
        elem = bound > 0.0f ? bound : spacing > 0.0 && spacing < FLT_MAX ? (float)spacing : 1.0f;
    }
    if (bound < elem)
        bound = elem;

    // A world of one point (every element in one spot) gets an extent.
    if (!(w.max_x > w.min_x) || !(w.max_y > w.min_y)) {
        const float pad = fmaxf(elem, fmaxf(fmaxf(fabsf(w.min_x), fabsf(w.min_y)) * 1e-6f, 1e-30f));
        if (!(w.max_x > w.min_x)) {
            w.min_x -= pad;
            w.max_x += pad;
        }
        if (!(w.max_y > w.min_y)) {
            w.min_y -= pad;
            w.max_y += pad;
        }
    }
    if (!isfinite(w.min_x) || !isfinite(w.min_y) || !isfinite(w.max_x) || !isfinite(w.max_y) ||
        !(w.max_x > w.min_x) || !(w.max_y > w.min_y))
        return false;
    L->elem = elem;
    L->bound = bound;
    L->world = w;
    return true;
}

static bool tune_differs(const qg_index *index, const qg_tune *t, const qg_learned *L)
{
    return t->real->tune->differs(&index->config, (qg_in_force){t->elem, t->bound}, L);
}

/// The config a re-tune builds with: the one in force with the learned
/// sizes and world, the derived fields re-chosen by the kind (its rule's
/// config, then its configure).
static bool tune_config(const qg_index *index, const qg_tune *t, const qg_learned *L, qg_config *c)
{
    *c = index->config;
    c->bounds = L->world;
    c->element_size = L->elem;
    c->max_element_size = 0.0f;
    c->cell_size = 0.0f;
    c->max_depth = 0;
    if (t->real->tune->config != NULL)
        t->real->tune->config(c, L);
    if (t->user_depth > 0)
        c->max_depth = t->user_depth;
    return t->real->configure(c) == QG_OK;
}

/// Builds the kind anew with config `c` beside the old structure and swaps
/// it in; on any failure frees what it took and changes nothing. `adding`:
/// slots qg_insert_many has taken for elements the old structure does not
/// hold yet (the new one holds them too; the caller counts them).
static qg_status tune_rebuild(qg_index *index, const qg_config *c, int32_t adding)
{
    const qg_kind_class *k = index->tune->real;
    qg_index *tmp = qg_mem_alloc(&index->alloc, k->size);
    if (tmp == NULL)
        return QG_ERR_NOMEM;
    memset(tmp, 0, k->size);
    memcpy(tmp, index, sizeof(qg_index));
    tmp->klass = k;
    tmp->config = *c;
    tmp->count = 0;
    tmp->tune = NULL;
    const size_t b0 = index->alloc.bytes; // tmp->alloc counts from here
    const int32_t n = index->count + adding, high = index->box_high;
    // init sees an empty base, as at qg_create (the point grid's first
    // level is laid out over the slots there are).
    tmp->box_high = 0;
    tmp->free_head = -1;
    qg_status s = k->init(tmp);
    tmp->box_high = index->box_high;
    tmp->free_head = index->free_head;
    if (s == QG_OK) {
        qg_handle *handles = NULL;
        qg_rect *shadow = NULL;
        if (k->insert_many != NULL) {
            // The slots are all taken, as in qg_insert_many.
            handles = n > 0 ? qg_mem_alloc(&tmp->alloc, (size_t)n * sizeof *handles) : NULL;
            if (n > 0 && handles == NULL) {
                s = QG_ERR_NOMEM;
            } else {
                int32_t m = 0;
                for (int32_t h = 0; h < high; ++h)
                    if (!isnan(index->boxes[h].min_x))
                        handles[m++] = h;
                qg_txn txn;
                qg_txn_begin(&txn, &tmp->alloc);
                s = n > 0 ? k->insert_many(tmp, &txn, handles, n) : QG_OK;
                if (s != QG_OK)
                    qg_txn_rollback(&txn);
                else
                    tmp->count = n;
                qg_mem_free(&tmp->alloc, handles, (size_t)n * sizeof *handles);
            }
        } else if (high > 0) {
            // One insert at a time, each slot taken just before its insert,
            // as qg_insert_many does (a kind's insert may walk the live
            // slots): the rebuild sees a copy of the slots filled as it goes.
            shadow = qg_mem_alloc(&tmp->alloc, (size_t)high * sizeof *shadow);
            if (shadow == NULL) {
                s = QG_ERR_NOMEM;
            } else {
                for (int32_t h = 0; h < high; ++h)
                    shadow[h] = (qg_rect){NAN, 0.0f, 0.0f, 0.0f};
                tmp->boxes = shadow;
                for (int32_t h = 0; h < high && s == QG_OK; ++h) {
                    if (isnan(index->boxes[h].min_x))
                        continue;
                    shadow[h] = index->boxes[h];
                    qg_txn one;
                    qg_txn_begin(&one, &tmp->alloc);
                    s = k->insert(tmp, &one, h, shadow[h]);
                    if (s != QG_OK)
                        qg_txn_rollback(&one);
                    else
                        tmp->count++;
                }
                tmp->boxes = index->boxes;
                qg_mem_free(&tmp->alloc, shadow, (size_t)high * sizeof *shadow);
            }
        }
        if (s != QG_OK)
            k->destroy(tmp);
    }
    if (s != QG_OK) {
        qg_mem_free(&index->alloc, tmp, k->size);
        return s == QG_ERR_CAPACITY ? QG_ERR_NOMEM : s;
    }
    const size_t grown = tmp->alloc.bytes - b0;
    k->destroy(index);
    index->alloc.bytes += grown;
    memcpy((char *)index + sizeof(qg_index), (char *)tmp + sizeof(qg_index), k->size - sizeof(qg_index));
    index->config = *c;
    qg_mem_free(&index->alloc, tmp, k->size);
    return QG_OK;
}

/// Measures every element (and `extra`, about to be inserted): true, with
/// the config to rebuild with in *c, when the learned sizes differ 2x from
/// those in force. Changes nothing but the measure's counters.
static bool tune_plan(qg_index *index, const qg_rect *extra, int32_t n_extra, float *elem, float *bound,
                      qg_config *c)
{
    qg_tune *t = index->tune;
    const int64_t total = (int64_t)index->count + n_extra;
    t->measured = (int32_t)(total < INT32_MAX ? total : INT32_MAX);
    t->check_at = total < INT32_MAX / 2 ? (int32_t)(2 * total) : INT32_MAX;
    if (total < QG_TUNE_MIN)
        return false;
    // A small sample decides; only a re-tune pays for the large one and the
    // scan of every box for the world (a bulk build of 200,000 boxes into
    // the point grid takes 4 ms: the scan and sort cost it a third more).
    qg_learned L;
    if (!tune_measure(index, extra, n_extra, QG_TUNE_SAMPLE, false, &L) || !tune_differs(index, t, &L))
        return false;
    if (!tune_measure(index, extra, n_extra, QG_TUNE_SAMPLE_BIG, true, &L) || !tune_differs(index, t, &L))
        return false;
    if (!tune_config(index, t, &L, c))
        return false;
    *elem = L.elem;
    *bound = c->max_element_size > 0.0f ? c->max_element_size : L.bound;
    return true;
}

/// The planned rebuild (with `adding` slots taken beyond what the kind
/// holds); a refused one changes nothing and waits before the next try.
static bool tune_apply(qg_index *index, float elem, float bound, const qg_config *c, int32_t adding)
{
    qg_tune *t = index->tune;
    if (tune_rebuild(index, c, adding) == QG_OK) {
        t->elem = elem;
        t->bound = bound;
        t->retunes++;
        t->backoff = QG_TUNE_EVERY;
        return true;
    }
    t->wait = t->backoff;
    t->backoff = t->backoff < 4096 ? 2 * t->backoff : t->backoff;
    return false;
}

/// Measures every element (and `extra`, about to be inserted) and rebuilds
/// when the learned sizes differ 2x from those in force.
static void tune_perform(qg_index *index, const qg_rect *extra, int32_t n_extra)
{
    float elem, bound;
    qg_config c;
    if (tune_plan(index, extra, n_extra, &elem, &bound, &c))
        (void)tune_apply(index, elem, bound, &c, 0);
}

void qg_tune_perform_pending(qg_index *index)
{
    qg_tune *t = index->tune;
    if (t == NULL || index->klass != &t->pending)
        return;
    index->klass = t->real;
    if (index->engine == NULL)
        tune_perform(index, NULL, 0);
}

/// move_one while a re-tune is pending: the kind's move, then, when it
/// succeeded, the re-tune (so a move that fails leaves no trace of one).
static qg_status tune_move_one(qg_index *index, qg_handle h, qg_rect box)
{
    const qg_status s = index->tune->real->move_one(index, h, box);
    if (s == QG_OK)
        qg_tune_perform_pending(index);
    return s;
}

qg_status qg_tune_create(qg_index *index)
{
    const qg_config *c = &index->config;
    if (index->klass->tune == NULL || c->fixed_sizes)
        return QG_OK;
    qg_tune *t = qg_mem_alloc(&index->alloc, sizeof *t);
    if (t == NULL)
        return QG_ERR_NOMEM;
    memset(t, 0, sizeof *t);
    t->real = index->klass;
    t->pending = *index->klass;
    t->pending.move_one = tune_move_one;
    t->check_at = QG_TUNE_MIN;
    t->backoff = QG_TUNE_EVERY;
    index->tune = t;
    return QG_OK;
}

void qg_tune_hint(qg_index *index, const qg_config *user)
{
    qg_tune *t = index->tune;
    if (t == NULL)
        return;
    t->user_depth = user->max_depth;
    if (t->real->tune->hint != NULL) {
        const qg_in_force f = t->real->tune->hint(&index->config, user);
        t->elem = f.elem;
        t->bound = f.bound;
    }
}

void qg_tune_destroy(qg_index *index)
{
    if (index->tune == NULL)
        return;
    if (index->klass == &index->tune->pending)
        index->klass = index->tune->real;
    qg_mem_free(&index->alloc, index->tune, sizeof *index->tune);
    index->tune = NULL;
}

void qg_tune_cleanup(qg_index *index)
{
    qg_tune *t = index->tune;
    if (t == NULL || index->engine != NULL || index->klass == &t->pending)
        return;
    if (t->wait > 0) {
        t->wait--;
        return;
    }
    const int32_t n = index->count;
    if (n < QG_TUNE_MIN)
        return;
    const bool changed = t->measured == 0 || n >= 2 * (int64_t)t->measured || n <= t->measured / 2;
    if (!changed && ++t->cleanups < QG_TUNE_EVERY)
        return;
    t->cleanups = 0;
    if (changed) {
        t->measured = n;
        t->check_at = n < INT32_MAX / 2 ? 2 * n : INT32_MAX;
    }
    qg_learned L;
    if (tune_measure(index, NULL, 0, QG_TUNE_SAMPLE, false, &L) && tune_differs(index, t, &L))
        index->klass = &t->pending;
}

void qg_tune_insert(qg_index *index)
{
    qg_tune *t = index->tune;
    if (index->engine != NULL) {
        // The engine's layers are not rebuilt: no re-tunes beside them
        // (index->klass is the engine's table, never a re-tune pending).
        t->check_at = INT32_MAX;
        return;
    }
    if (index->klass == &t->pending) {
        qg_tune_perform_pending(index);
        return;
    }
    tune_perform(index, NULL, 0);
}

bool qg_tune_insert_many(qg_index *index, const qg_rect *boxes, int32_t n)
{
    qg_tune *t = index->tune;
    if (t == NULL)
        return false;
    if (index->engine != NULL)
        return false;
    const bool pending = index->klass == &t->pending;
    index->klass = t->real;
    t->planned = (pending || (int64_t)index->count + n >= t->check_at) &&
                 tune_plan(index, boxes, n, &t->plan_elem, &t->plan_bound, &t->plan);
    return t->planned;
}

bool qg_tune_insert_many_commit(qg_index *index, int32_t adding)
{
    qg_tune *t = index->tune;
    if (t == NULL || !t->planned)
        return false;
    t->planned = false;
    return tune_apply(index, t->plan_elem, t->plan_bound, &t->plan, adding);
}

void qg_tune_clear(qg_index *index)
{
    qg_tune *t = index->tune;
    if (t == NULL)
        return;
    if (index->klass == &t->pending)
        index->klass = t->real;
    t->measured = 0;
    t->cleanups = 0;
    t->check_at = QG_TUNE_MIN;
}

void qg_tune_stats(const qg_index *index, qg_stats *s)
{
    const qg_config *c = &index->config;
    const qg_tune *t = index->tune;
    const qg_tune_rule *rule = index->klass->tune;
    s->element_size = t != NULL && t->elem > 0.0f ? t->elem : c->element_size;
    s->size_bound = s->element_size;
    s->cell_size = 0.0f;
    s->max_depth = 0;
    if (rule != NULL)
        rule->stats(c, s);
    s->world = c->bounds;
    s->retunes = t != NULL ? t->retunes : 0;
}

size_t qg_tune_bytes(const qg_index *index)
{
    return index->tune != NULL ? sizeof *index->tune : 0;
}

void qg_tune_state(qg_state *s, qg_index *d, const qg_index *src)
{
    bool drop;
    if (!qg_st_struct(s, (void **)&d->tune, src->tune, sizeof(qg_tune), &drop)) {
        if (drop)
            qg_tune_destroy(d);
        return;
    }
    qg_tune *t = d->tune;
    const qg_tune *f = src->tune;
    if (qg_st_reading(s)) {
        // The tables are code, not data: this build's own.
        t->real = qg_kind_class_of(d->config.kind);
        t->pending = *t->real;
        t->pending.move_one = tune_move_one;
    }
    QG_ST(s, t, f, check_at);
    QG_ST(s, t, f, measured);
    QG_ST(s, t, f, cleanups);
    QG_ST(s, t, f, wait);
    QG_ST(s, t, f, backoff);
    QG_ST(s, t, f, retunes);
    QG_ST(s, t, f, elem);
    QG_ST(s, t, f, bound);
    QG_ST(s, t, f, user_depth);
    // A planned rebuild lives inside one qg_insert_many call: never between calls.
    if (qg_st_reading(s) && qg_st_ok(s) && (t->check_at < 0 || t->measured < 0 || t->cleanups < 0 ||
                                            t->wait < 0 || t->backoff < 0 || t->retunes < 0))
        qg_st_fail(s, QG_ERR_INVALID);
}
