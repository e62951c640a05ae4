// SPDX-License-Identifier: MIT
// The public calls: each checks its arguments once, then dispatches through
// the kind's table. The base's element slots (boxes and the handle free list)
// are managed here, so every kind gets handle checks, qg_get and qg_count for
// free and cannot get them wrong.
#include "static_filters_events/engine.h"
#include "tune.h"

/// The table of kinds and their names, indexed by qg_kind (QG_KIND_LIST).
#define KIND_CLASS_(NAME, name, summary) [QG_##NAME] = &qg_##name##_class,
static const qg_kind_class *const kind_classes[QG_KIND_COUNT] = {QG_KIND_LIST(KIND_CLASS_)};
#undef KIND_CLASS_
#define KIND_NAME_(NAME, name, summary) [QG_##NAME] = #name,
static const char *const kind_names[QG_KIND_COUNT] = {QG_KIND_LIST(KIND_NAME_)};
#undef KIND_NAME_

static bool box_valid(qg_rect b)
{
    return qg_box_valid(b);
}

static bool area_valid(qg_rect b)
{
    return !isnan(b.min_x) && !isnan(b.min_y) && !isnan(b.max_x) && !isnan(b.max_y) &&
           b.min_x <= b.max_x && b.min_y <= b.max_y;
}

static bool size_valid(float v)
{
    return isfinite(v) && v >= 0.0f;
}

/// The bits of a free slot: NaN marks it free, min_y carries the next free
/// handle.
static void slot_free(qg_index *index, qg_handle h)
{
    qg_rect *r = &index->boxes[h];
    r->min_x = NAN;
    memcpy(&r->min_y, &index->free_head, sizeof(int32_t));
    index->free_head = h;
}

static int32_t slot_next_free(const qg_index *index, qg_handle h)
{
    int32_t next;
    memcpy(&next, &index->boxes[h].min_y, sizeof(int32_t));
    return next;
}

qg_config qg_default_config(qg_kind kind)
{
    qg_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    return c; // bounds all zero: no hint
}

const qg_kind_class *qg_kind_class_of(qg_kind kind)
{
    return (unsigned)kind < QG_KIND_COUNT ? kind_classes[kind] : NULL;
}

bool qg_kind_available(qg_kind kind)
{
    return (unsigned)kind < QG_KIND_COUNT && kind_classes[kind] != NULL;
}

qg_status qg_create(const qg_config *config, qg_index **out)
{
    if (out == NULL)
        return QG_ERR_INVALID;
    *out = NULL;
    if (config == NULL || !qg_kind_available(config->kind))
        return QG_ERR_INVALID;
    qg_rect b = config->bounds;
    // All zero: no hint; the index starts at [0,1024]^2 and learns its world.
    const bool no_bounds = b.min_x == 0.0f && b.min_y == 0.0f && b.max_x == 0.0f && b.max_y == 0.0f;
    if (no_bounds)
        b = (qg_rect){0.0f, 0.0f, 1024.0f, 1024.0f};
    // Any finite bounds: an extent past FLT_MAX (bounds [-3e38, 3e38]) is
    // fine, every kind computes extents in double (qg_rect_extent).
    if (!box_valid(b) || !(b.min_x < b.max_x) || !(b.min_y < b.max_y))
        return QG_ERR_INVALID;
    if (!size_valid(config->element_size) || !size_valid(config->max_element_size) ||
        !size_valid(config->cell_size) || config->max_depth < 0 || config->leaf_capacity < 0)
        return QG_ERR_INVALID;
    if (config->allocator.realloc == NULL && config->allocator.user != NULL)
        return QG_ERR_INVALID; // user data without a function is a mistake
    const qg_kind_class *klass = kind_classes[config->kind];
    qg_config resolved = *config;
    resolved.bounds = b;
    qg_status s = klass->configure(&resolved);
    if (s != QG_OK)
        return s;

    qg_alloc alloc;
    qg_alloc_init(&alloc, &config->allocator);
    qg_index *index = qg_mem_alloc(&alloc, klass->size);
    if (index == NULL)
        return QG_ERR_NOMEM;
    memset(index, 0, klass->size);
    index->klass = klass;
    index->alloc = alloc;
    index->config = resolved;
    index->free_head = -1;
    s = klass->init(index);
    if (s == QG_OK && (s = qg_tune_create(index)) != QG_OK)
        klass->destroy(index);
    if (s != QG_OK) {
        alloc = index->alloc;
        qg_mem_free(&alloc, index, klass->size);
        return s;
    }
    qg_tune_hint(index, config);
    *out = index;
    return QG_OK;
}

void qg_destroy(qg_index *index)
{
    if (index == NULL)
        return;
    qg_tune_destroy(index);
    index->klass->destroy(index);
    qg_engine_destroy(index);
    qg_array_free(&index->alloc, (void **)&index->boxes, &index->box_capacity, sizeof(qg_rect));
    qg_alloc alloc = index->alloc;
    qg_mem_free(&alloc, index, index->klass->size);
}

qg_handle qg_insert(qg_index *index, qg_rect box)
{
    if (index == NULL || !box_valid(box))
        return QG_ERR_INVALID;
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    const bool reuse = index->free_head >= 0;
    qg_handle h;
    if (reuse) {
        h = index->free_head;
    } else {
        if (index->box_high == INT32_MAX)
            return QG_ERR_CAPACITY;
        if (!qg_txn_reserve(&txn, (void **)&index->boxes, &index->box_capacity, sizeof(qg_rect),
                            (int64_t)index->box_high + 1))
            return QG_ERR_NOMEM;
        h = index->box_high;
    }
    // The engine's per-slot arrays grow in their own txn (the kind's may
    // fill the other).
    qg_txn etxn;
    qg_txn_begin(&etxn, &index->alloc);
    if (index->engine != NULL && !qg_engine_reserve_insert(index, &etxn, reuse ? index->box_high : index->box_high + 1, 1)) {
        qg_txn_rollback(&etxn);
        qg_txn_rollback(&txn);
        return QG_ERR_NOMEM;
    }
    // Take the slot, so the kind sees boxes[h]; a failure puts it back
    // bit for bit.
    const qg_rect saved = index->boxes[h];
    if (reuse)
        index->free_head = slot_next_free(index, h);
    else
        index->box_high++;
    index->boxes[h] = box;
    qg_status s = index->klass->insert(index, &txn, h, box);
    if (s != QG_OK) {
        index->boxes[h] = saved;
        if (reuse)
            index->free_head = h;
        else
            index->box_high--;
        qg_txn_rollback(&etxn);
        qg_txn_rollback(&txn);
        return s;
    }
    index->count++;
    if (index->engine != NULL)
        qg_engine_inserted(index, h);
    // Learning after the insert: a re-tune that ran first and then saw the
    // insert refused would leave the index changed.
    if (qg_tune_due(index))
        qg_tune_insert(index);
    return h;
}

qg_status qg_remove(qg_index *index, qg_handle handle)
{
    if (index == NULL)
        return QG_ERR_INVALID;
    if (!qg_handle_live(index, handle))
        return QG_ERR_HANDLE;
    if (index->engine != NULL) {
        qg_engine_remove(index, handle);
    } else {
        index->klass->remove(index, handle);
        index->count--;
    }
    slot_free(index, handle);
    return QG_OK;
}

qg_status qg_move(qg_index *index, qg_handle handle, qg_rect box)
{
    // A dispatcher without a frame: the kind's path needs one (a
    // transaction), the engine's fast path none, and the compiler sets one
    // up before any test when both are in one function.
    if (index == NULL)
        return QG_ERR_INVALID;
    if ((uint32_t)handle >= (uint32_t)index->box_high) // box_high >= 0: also a handle < 0
        return QG_ERR_HANDLE;
    // The slot's NaN tested on its bits: a float compare would take a
    // vector register, and the compiler parks the box's second half
    // (passed in one) in an integer register and back, on the kind's path
    // (`agents` update 2-5% slower).
    uint32_t bits;
    memcpy(&bits, &index->boxes[handle].min_x, sizeof bits);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u)
        return qg_engine_move(index, handle, box);
    return index->klass->move_one(index, handle, box);
}

qg_status qg_get(const qg_index *index, qg_handle handle, qg_rect *box)
{
    if (index == NULL || box == NULL)
        return QG_ERR_INVALID;
    if (!qg_handle_live(index, handle))
        return QG_ERR_HANDLE;
    *box = qg_element_box(index, handle);
    return QG_OK;
}

int32_t qg_count(const qg_index *index)
{
    return index ? qg_live_count(index) : 0;
}

void qg_cleanup(qg_index *index)
{
    if (index == NULL)
        return;
    // The engine first: settled statics leave the kind before it tidies up.
    if (index->engine != NULL)
        qg_engine_cleanup(index, NULL);
    index->klass->cleanup(index);
    qg_tune_cleanup(index);
}

void qg_clear(qg_index *index)
{
    if (index == NULL)
        return;
    qg_tune_clear(index);
    index->klass->clear(index);
    if (index->engine != NULL)
        qg_engine_clear(index);
    index->box_high = 0;
    index->free_head = -1;
    index->count = 0;
}

/// A query callback that remembers a stop, so the static layer's share is
/// not searched after it.
typedef struct stop_ctx {
    qg_query_fn *fn;
    void *user;
    bool stopped;
} stop_ctx;

static bool stop_query(qg_handle h, void *user)
{
    stop_ctx *c = user;
    if (c->fn(h, c->user))
        return true;
    c->stopped = true;
    return false;
}

qg_status qg_query_with_stats(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user,
                              qg_query_stats *stats)
{
    qg_query_stats local = {0, 0};
    if (index == NULL || fn == NULL || !area_valid(area))
        return QG_ERR_INVALID;
    if (qg_engine_holds(index)) {
        stop_ctx c = {fn, user, false};
        if (index->count > 0)
            index->klass->query(index, area, stop_query, &c, &local);
        if (!c.stopped)
            qg_engine_query(index, area, fn, user, &local);
    } else if (index->count > 0) {
        index->klass->query(index, area, fn, user, &local);
    }
    if (stats != NULL)
        *stats = local;
    return QG_OK;
}

qg_status qg_query(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user)
{
    return qg_query_with_stats(index, area, fn, user, NULL);
}

qg_status qg_query_point(const qg_index *index, float x, float y, qg_query_fn *fn, void *user)
{
    return qg_query_with_stats(index, (qg_rect){x, y, x, y}, fn, user, NULL);
}

qg_status qg_pairs_with_stats(const qg_index *index, qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    qg_query_stats local = {0, 0};
    if (index == NULL || fn == NULL)
        return QG_ERR_INVALID;
    if (index->engine != NULL)
        qg_engine_pairs_part(index, 0, 1, fn, user, &local);
    else if (index->count > 1)
        index->klass->pairs(index, fn, user, &local);
    if (stats != NULL)
        *stats = local;
    return QG_OK;
}

qg_status qg_pairs(const qg_index *index, qg_pair_fn *fn, void *user)
{
    return qg_pairs_with_stats(index, fn, user, NULL);
}

qg_stats qg_get_stats(const qg_index *index)
{
    qg_stats s;
    memset(&s, 0, sizeof s);
    if (index == NULL)
        return s;
    s.memory_bytes = index->alloc.bytes;
    s.elements = index->count;
    index->klass->stats(index, &s);
    qg_tune_stats(index, &s);
    if (index->engine != NULL)
        qg_engine_stats(index, &s);
    return s;
}

void qg_visit(const qg_index *index, qg_visit_fn *fn, void *user)
{
    if (index == NULL || fn == NULL)
        return;
    index->klass->visit(index, fn, user);
    if (index->engine != NULL)
        qg_engine_visit(index, fn, user);
}

qg_status qg_validate(const qg_index *index)
{
    if (index == NULL)
        return QG_ERR_INVALID;
    if (index->box_high < 0 || index->box_high > index->box_capacity || index->count < 0 ||
        index->count > index->box_high)
        return QG_ERR_INVALID;
    int32_t live = 0;
    for (int32_t h = 0; h < index->box_high; ++h) {
        if (qg_slot_live(index, h)) {
            if (!box_valid(index->boxes[h]))
                return QG_ERR_INVALID;
            live++;
        }
    }
    if (live != index->count)
        return QG_ERR_INVALID;
    // The free list holds every dead slot below box_high once, and nothing else.
    int32_t free_count = 0;
    for (int32_t h = index->free_head; h >= 0; h = slot_next_free(index, h)) {
        if (h >= index->box_high || !isnan(index->boxes[h].min_x) ||
            ++free_count > index->box_high - live)
            return QG_ERR_INVALID;
    }
    // Static elements in the layer hold dead-looking slots off the list.
    const int32_t layered = qg_engine_held(index);
    if (free_count != index->box_high - live - layered)
        return QG_ERR_INVALID;
    size_t bytes = index->klass->size + (size_t)index->box_capacity * sizeof(qg_rect) + qg_tune_bytes(index);
    if (index->engine != NULL) {
        for (int32_t h = index->free_head; h >= 0; h = slot_next_free(index, h))
            if (qg_engine_in_layer(index, h))
                return QG_ERR_INVALID;
        qg_status s = qg_engine_validate(index, &bytes);
        if (s != QG_OK)
            return s;
    }
    qg_status s = index->klass->validate(index, &bytes);
    if (s != QG_OK)
        return s;
    return bytes == index->alloc.bytes ? QG_OK : QG_ERR_INVALID;
}

const char *qg_kind_name(qg_kind kind)
{
    return (unsigned)kind < QG_KIND_COUNT ? kind_names[kind] : NULL;
}

qg_status qg_kind_from_name(const char *name, qg_kind *out)
{
    if (name == NULL || out == NULL)
        return QG_ERR_INVALID;
    for (int k = 0; k < QG_KIND_COUNT; ++k) {
        if (strcmp(name, kind_names[k]) == 0) {
            *out = (qg_kind)k;
            return QG_OK;
        }
    }
    return QG_ERR_INVALID;
}

const char *qg_status_name(qg_status status)
{
    switch (status) {
    case QG_OK: return "QG_OK";
    case QG_ERR_INVALID: return "QG_ERR_INVALID";
    case QG_ERR_HANDLE: return "QG_ERR_HANDLE";
    case QG_ERR_NOMEM: return "QG_ERR_NOMEM";
    case QG_ERR_CAPACITY: return "QG_ERR_CAPACITY";
    }
    return "QG_ERR_UNKNOWN";
}

/* ---- Several cores ---------------------------------------------------- */

/// More parts than this is a mistake, not a machine (and bounds the per-part
/// stats on the stack: const calls never allocate).
#define QG_MAX_PARTS 256

static bool jobs_valid(const qg_jobs *jobs)
{
    return jobs == NULL ||
           (jobs->worker_count >= 1 && jobs->worker_count <= QG_MAX_PARTS &&
            (jobs->run != NULL || jobs->worker_count == 1));
}

typedef struct pairs_task {
    const qg_index *index;
    qg_pair_fn *fn;
    void *const *users;
    int32_t parts;
    qg_query_stats stats[QG_MAX_PARTS];
} pairs_task;

static void pairs_part_task(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    pairs_task *t = context;
    const qg_kind_class *klass = t->index->klass;
    for (int32_t p = begin; p < end; ++p) {
        void *user = t->users != NULL ? t->users[p] : NULL;
        if (t->index->engine != NULL)
            qg_engine_pairs_part(t->index, p, t->parts, t->fn, user, &t->stats[p]);
        else if (klass->pairs_part != NULL)
            klass->pairs_part(t->index, p, t->parts, t->fn, user, &t->stats[p]);
        else if (p == 0)
            klass->pairs(t->index, t->fn, user, &t->stats[p]); // a kind that runs serially
    }
}

qg_status qg_pairs_parallel(const qg_index *index, const qg_jobs *jobs, qg_pair_fn *fn, void *const *users,
                            qg_query_stats *stats)
{
    if (index == NULL || fn == NULL || !jobs_valid(jobs))
        return QG_ERR_INVALID;
    pairs_task t;
    t.index = index;
    t.fn = fn;
    t.users = users;
    t.parts = jobs != NULL ? jobs->worker_count : 1;
    memset(t.stats, 0, sizeof(qg_query_stats) * (size_t)t.parts);
    if (qg_live_count(index) > 1)
        qg_jobs_run(jobs, pairs_part_task, t.parts, &t);
    if (stats != NULL) {
        stats->nodes_visited = stats->elements_tested = 0;
        for (int32_t p = 0; p < t.parts; ++p) {
            stats->nodes_visited += t.stats[p].nodes_visited;
            stats->elements_tested += t.stats[p].elements_tested;
        }
    }
    return QG_OK;
}

/// The batch as n qg_move calls; on QG_ERR_NOMEM at move i the moves before
/// it are undone in reverse order. Each undo returns the structure to a state
/// it held earlier in this call (the kinds whose upkeep would change their
/// shape hold it until the batch ends: batch_mark), with capacity that only
/// grew since, so an undo finds the memory it needs already held; what grew
/// is given back after (the layer's room through the txn, the kind's
/// through batch_trim, a cache the moves made).
static qg_status move_many_serial(qg_index *index, const qg_handle *handles, const qg_rect *boxes, int32_t n)
{
    // Per move: the old box, and where a static element sat in the layer
    // (-1: in the kind; -2, fat: its move may take it to the kind). A move
    // changes only its own element's place (the layer's slots stay put until
    // a rebuild), so both are read before the first.
    const size_t bytes = (size_t)n * (sizeof(qg_rect) + sizeof(int32_t));
    qg_rect *old = qg_mem_alloc(&index->alloc, bytes);
    if (old == NULL)
        return QG_ERR_NOMEM;
    int32_t *layer_pos = (int32_t *)(old + n);
    int32_t leaving = 0;
    for (int32_t j = 0; j < n; ++j) {
        old[j] = qg_element_box(index, handles[j]);
        layer_pos[j] = qg_engine_place(index, handles[j]);
        leaving += layer_pos[j] >= 0;
    }
    // A dynamic element's move may make the engine's cache (qg_engine_moved).
    const bool had_cache = qg_engine_has_cache(index);
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    void *mark = NULL;
    if ((leaving > 0 && !qg_engine_reserve_layer_moves(index, &txn, leaving)) ||
        (index->klass->batch_mark != NULL && (mark = index->klass->batch_mark(index, n)) == NULL)) {
        qg_txn_rollback(&txn);
        qg_mem_free(&index->alloc, old, bytes);
        return QG_ERR_NOMEM;
    }
    qg_status s = QG_OK;
    int32_t i = 0;
    for (; i < n; ++i) {
        s = qg_move(index, handles[i], boxes[i]);
        if (s != QG_OK)
            break;
    }
    // A static element the batch took out of the static layer goes back to
    // its place there (kept until the next rebuild); the others move back.
    if (s != QG_OK && mark != NULL && index->klass->batch_undo != NULL)
        index->klass->batch_undo(index, mark);
    while (s != QG_OK && i-- > 0) {
        if (layer_pos[i] >= 0)
            qg_engine_unmove(index, handles[i], layer_pos[i], old[i]);
        else if (layer_pos[i] == -2)
            qg_engine_unmove_fat(index, handles[i], old[i]);
        else
            (void)qg_move(index, handles[i], old[i]); // cannot fail (see above); the index stays valid
    }
    if (mark != NULL)
        index->klass->batch_trim(index, mark, s != QG_OK);
    if (s != QG_OK) {
        if (!had_cache && qg_engine_has_cache(index))
            qg_engine_drop_cache(index);
        qg_txn_rollback(&txn);
    }
    qg_mem_free(&index->alloc, old, bytes);
    return s;
}

/// Below this many moves the checks run as one part (a job costs more).
#define QG_CHECK_SERIAL 16384

/// qg_move_many's checks as a pass of their own (qg_move_checks, one map
/// per part). Each part takes its share of the moves in order and notes its
/// first bad one (no atomics: a repeat within the part is seen as it is
/// marked, a repeat across parts when the maps are merged).
typedef struct move_check_task {
    qg_move_checks c;
    const qg_handle *handles;
    const qg_rect *boxes;
} move_check_task;

static void move_check_part(int32_t begin, int32_t end, int32_t worker, void *context)
{
    (void)worker;
    move_check_task *t = context;
    qg_move_checks *c = &t->c;
    for (int32_t p = begin; p < end; ++p) {
        int64_t i0, i1;
        qg_part_range(c->n, p, c->workers, &i0, &i1);
        uint64_t *map = qg_move_checks_map(c, p);
        qg_status fault = QG_OK;
        bool twice = false;
        int64_t i = i0;
        for (; i < i1; ++i) {
            const qg_handle h = t->handles[i];
            // Live in the kind or in the engine's layer.
            if (!qg_handle_live(c->index, h)) {
                fault = QG_ERR_HANDLE;
                break;
            }
            if (!box_valid(t->boxes[i])) {
                fault = QG_ERR_INVALID;
                break;
            }
            twice |= qg_move_mark(map, h);
        }
        qg_move_checks_note(c, p, (int32_t)i, fault, twice);
    }
}

static qg_status move_many(qg_index *index, const qg_jobs *jobs, const qg_handle *handles, const qg_rect *boxes,
                           int32_t n);

qg_status qg_move_many(qg_index *index, const qg_jobs *jobs, const qg_handle *handles, const qg_rect *boxes,
                       int32_t n)
{
    if (index == NULL || n < 0 || (n > 0 && (handles == NULL || boxes == NULL)) || !jobs_valid(jobs))
        return QG_ERR_INVALID;
    if (n == 0)
        return QG_OK;
    // A pending re-tune after the batch, when it succeeded: one before it,
    // or in it (the one-by-one path's qg_move re-tunes first when one is
    // pending), would stay when the batch is then refused.
    const qg_kind_class *klass = index->klass;
    if (qg_tune_pending(index))
        index->klass = index->tune->real;
    const qg_status s = move_many(index, jobs, handles, boxes, n);
    index->klass = klass;
    if (s == QG_OK && qg_tune_pending(index))
        qg_tune_perform_pending(index);
    return s;
}

/// qg_move_many's checks and dispatch, n > 0.
static qg_status move_many(qg_index *index, const qg_jobs *jobs, const qg_handle *handles, const qg_rect *boxes,
                           int32_t n)
{
    // A kind that checks the moves in its own first pass saves one.
    if (index->klass->move_many_checked != NULL && index->engine == NULL &&
        (jobs == NULL || jobs->worker_count <= QG_CHECK_PARTS))
        return index->klass->move_many_checked(index, jobs, handles, boxes, n);
    // Every move is checked before anything changes: the first bad one (in
    // batch order) decides the answer, and a handle listed twice would make
    // the answer depend on order (and race in a parallel move). At 1,000,000
    // moves the checks took 3 ms on one thread, so they run on the workers.
    move_check_task *t = qg_mem_alloc(&index->alloc, sizeof *t);
    if (t == NULL)
        return QG_ERR_NOMEM;
    t->handles = handles;
    t->boxes = boxes;
    const int32_t parts = jobs == NULL || n < QG_CHECK_SERIAL ? 1
                          : jobs->worker_count < QG_CHECK_PARTS ? jobs->worker_count
                                                                : QG_CHECK_PARTS;
    qg_status status = qg_move_checks_begin(&t->c, index, parts, n);
    if (status == QG_OK) {
        qg_jobs_run(parts > 1 ? jobs : NULL, move_check_part, parts, t);
        status = qg_move_checks_end(&t->c, jobs);
    }
    qg_mem_free(&index->alloc, t, sizeof *t);
    if (status != QG_OK)
        return status;
    if (index->engine != NULL && qg_engine_all_fat(index, handles, n))
        return qg_engine_move_many_fat(index, jobs, handles, boxes, n);
    if (index->engine != NULL && qg_engine_any_static(index, handles, n))
        return move_many_serial(index, handles, boxes, n);
    if (index->klass->move_many == NULL)
        return move_many_serial(index, handles, boxes, n);
    const qg_status s = index->klass->move_many(index, jobs, handles, boxes, n);
    if (s == QG_OK && index->engine != NULL)
        qg_engine_moved_many(index, jobs, handles, n);
    return s;
}

void qg_cleanup_parallel(qg_index *index, const qg_jobs *jobs)
{
    if (index == NULL)
        return;
    if (index->engine != NULL)
        qg_engine_cleanup(index, jobs != NULL && jobs_valid(jobs) ? jobs : NULL);
    if (jobs != NULL && jobs_valid(jobs) && jobs->worker_count > 1 && index->klass->cleanup_parallel != NULL)
        index->klass->cleanup_parallel(index, jobs);
    else
        index->klass->cleanup(index);
    qg_tune_cleanup(index);
}

/* ---- Bulk insert -------------------------------------------------------- */

/// Takes the slot the next qg_insert would take and stores `box` in it
/// (capacity reserved by the caller).
static qg_handle slot_take(qg_index *index, qg_rect box)
{
    qg_handle h;
    if (index->free_head >= 0) {
        h = index->free_head;
        index->free_head = slot_next_free(index, h);
    } else {
        h = index->box_high++;
    }
    index->boxes[h] = box;
    return h;
}

/// Every entry of handles[0..n) -1: what qg_insert_many leaves on a refusal.
static qg_status insert_many_refused(qg_handle *handles, int32_t n, qg_status s)
{
    for (int32_t i = 0; handles != NULL && i < n; ++i)
        handles[i] = -1;
    return s;
}

static qg_status insert_many(qg_index *index, const qg_rect *boxes, int32_t n, qg_handle *handles);

qg_status qg_insert_many(qg_index *index, const qg_rect *boxes, int32_t n, qg_handle *handles)
{
    if (index == NULL || n < 0 || (n > 0 && (boxes == NULL || handles == NULL)))
        return insert_many_refused(handles, n, QG_ERR_INVALID);
    for (int32_t i = 0; i < n; ++i)
        if (!box_valid(boxes[i]))
            return insert_many_refused(handles, n, QG_ERR_INVALID);
    if (n == 0)
        return QG_OK;
    // What the index has learned is kept aside: the call measures before it
    // can be refused, and a refused call must leave the learning as it was,
    // or its retry would skip the re-tune the call planned.
    qg_tune saved;
    const qg_kind_class *klass = index->klass;
    if (index->tune != NULL)
        saved = *index->tune;
    const qg_status s = insert_many(index, boxes, n, handles);
    if (s != QG_OK) {
        if (index->tune != NULL) {
            *index->tune = saved;
            index->klass = klass == saved.real ? saved.real : &index->tune->pending;
        }
        return insert_many_refused(handles, n, s);
    }
    return QG_OK;
}

/// qg_insert_many with valid arguments, n > 0.
static qg_status insert_many(qg_index *index, const qg_rect *boxes, int32_t n, qg_handle *handles)
{
    // Learning plans here, from the boxes held and these, and rebuilds once
    // the slots are taken: the new structure then holds the batch too, and
    // a rebuild refused its memory leaves nothing behind.
    const bool retune = qg_tune_insert_many(index, boxes, n);
    int32_t reusable = 0;
    for (int32_t h = index->free_head; h >= 0 && reusable < n; h = slot_next_free(index, h))
        reusable++;
    const int64_t high = (int64_t)index->box_high + (n - reusable);
    if (high > INT32_MAX)
        return QG_ERR_CAPACITY;
    qg_txn txn;
    qg_txn_begin(&txn, &index->alloc);
    if (!qg_txn_reserve(&txn, (void **)&index->boxes, &index->box_capacity, sizeof(qg_rect), high))
        return QG_ERR_NOMEM;
    qg_txn etxn;
    qg_txn_begin(&etxn, &index->alloc);
    if (index->engine != NULL && !qg_engine_reserve_insert(index, &etxn, (int32_t)high, n)) {
        qg_txn_rollback(&etxn);
        qg_txn_rollback(&txn);
        return QG_ERR_NOMEM;
    }
    const int32_t old_high = index->box_high;
    qg_status s = QG_OK;
    int32_t taken = 0;
    if (index->klass->insert_many != NULL) {
        for (; taken < n; ++taken)
            handles[taken] = slot_take(index, boxes[taken]);
        if (!(retune && qg_tune_insert_many_commit(index, n)))
            s = index->klass->insert_many(index, &txn, handles, n);
    } else {
        // One insert at a time, each slot taken just before its insert (a
        // kind may walk the live slots); a failure takes the ones before it
        // out again (removal never allocates).
        for (; taken < n; ++taken) {
            handles[taken] = slot_take(index, boxes[taken]);
            qg_txn one;
            qg_txn_begin(&one, &index->alloc);
            s = index->klass->insert(index, &one, handles[taken], boxes[taken]);
            if (s != QG_OK) {
                qg_txn_rollback(&one);
                taken++; // its slot is given back below
                break;
            }
            // Counted as it goes in, as qg_insert does: a kind's insert may
            // read the count (the quadtree re-fits when it doubled).
            index->count++;
        }
        if (s != QG_OK) {
            for (int32_t i = taken - 1; i-- > 0;) {
                index->klass->remove(index, handles[i]);
                index->count--;
            }
        } else {
            index->count -= n; // added once below, for both paths
        }
    }
    if (s != QG_OK) {
        // Handles issued beyond the old high water mark go away; reused ones
        // go back on the free list in their old order.
        for (int32_t i = taken; i-- > 0;)
            if (handles[i] < old_high)
                slot_free(index, handles[i]);
        index->box_high = old_high;
        qg_txn_rollback(&etxn);
        qg_txn_rollback(&txn);
        return s;
    }
    index->count += n;
    if (index->engine != NULL)
        for (int32_t i = 0; i < n; ++i)
            qg_engine_inserted(index, handles[i]);
    return QG_OK;
}
