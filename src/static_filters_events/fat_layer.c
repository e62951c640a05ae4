// SPDX-License-Identifier: MIT
// The fat layer (see fat_layer.h for what it holds and why it is exact).
#include "engine.h"

#include <float.h>

/// Cell coordinates are clamped to +-2^30: far boxes share the edge cells
/// (still exact, the grid only narrows the search).
#define FL_CLAMP 1073741824.0
/// A new fat box: a tenth of the box's larger extent around it, stretched
/// this many frames of its last motion the way it goes. Swept at 100,000
/// (`level`, ms a frame): a half 0.060-0.063, a fifth or a tenth
/// 0.055-0.057, none 0.056-0.060; 16, 20, 24 and 32 frames ahead 0.057,
/// 0.057-0.062, 0.055-0.057, 0.060-0.063 (fewer refits against more
/// partners a list).
#define FL_SCALE 0.1f
#define FL_AHEAD 24.0f
/// qg_cleanup calls between checks of the grid's cell size.
#define FL_RELAYOUT 256u

typedef struct fl_range {
    int32_t x0, y0, x1, y1;
} fl_range;

/// The cell of coordinate v, clamped; a NaN (which no box overlaps) maps to
/// `nan_cell`, so nothing out of range or NaN is ever converted to int and
/// a range's width stays under 2^31 + 2 (its area fits in int64).
static inline int32_t fl_coord(float v, double inv, double nan_cell)
{
    double c = (double)v * inv;
    c = c < -FL_CLAMP ? -FL_CLAMP : c > FL_CLAMP ? FL_CLAMP : c == c ? c : nan_cell;
    const int32_t i = (int32_t)c; // toward zero: one less below zero
    return i - (c < (double)i);
}

/// A NaN side takes the whole clamped range (its cells are then more than
/// the elements, and fl_search reads the level once).
static inline fl_range fl_range_of(const qg_fat_layer *fl, qg_rect r, int level)
{
    const double inv = fl->inv[level];
    return (fl_range){fl_coord(r.min_x, inv, -FL_CLAMP), fl_coord(r.min_y, inv, -FL_CLAMP),
                      fl_coord(r.max_x, inv, FL_CLAMP), fl_coord(r.max_y, inv, FL_CLAMP)};
}

static inline uint32_t fl_bucket(const qg_fat_layer *fl, int32_t x, int32_t y, int level)
{
    uint32_t h = (uint32_t)x * 0x9E3779B1u ^ (uint32_t)y * 0x85EBCA77u ^ (uint32_t)level * 0xC2B2AE3Du;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    return h & fl->mask;
}

/// The bucket of entry t's k-th filed cell.
static inline uint32_t fl_bucket_of(const qg_fat_layer *fl, const qg_fat_entry *t, int32_t k)
{
    return fl_bucket(fl, t->cx0 + (k & (t->cw - 1)), t->cy0 + (k >> (t->cw - 1)), t->in - 1);
}

static inline float fl_clamp(float v)
{
    return v < -FLT_MAX ? -FLT_MAX : v > FLT_MAX ? FLT_MAX : v;
}

void qg_fat_reset(qg_fat_layer *fl)
{
    fl->built = false;
    fl->mask = 0;
    fl->huge = -1;
    fl->huges = 0;
    fl->count = 0;
    fl->crowded = 0;
    fl->age = 0;
    fl->top = 0;
    fl->off = false;
    fl->retry = 0;
    fl->backoff = QG_FAT_RETRY;
    fl->watch = 0;
    memset(fl->filed, 0, sizeof fl->filed);
}

/// Position p's busy byte, from its entry.
static inline void fl_touch(qg_fat_layer *fl, int32_t p)
{
    const qg_fat_entry *t = &fl->entry[p];
    fl->busy[p] = !t->in || t->npart == QG_FAT_CROWDED ? QG_FAT_SEARCH : t->npart != 0 ? QG_FAT_LISTED : 0;
}

/* ---- the grid ----------------------------------------------------------- */

/// Files entry p under the cells of its fat box on the finest level where
/// it covers at most 2x2 (or on the huge list).
static void fl_file(qg_fat_layer *fl, int32_t p)
{
    qg_fat_entry *t = &fl->entry[p];
    for (int level = 0; level < QG_FAT_LEVELS; ++level) {
        const fl_range r = fl_range_of(fl, t->fat, level);
        const int64_t w = (int64_t)r.x1 - r.x0 + 1, h = (int64_t)r.y1 - r.y0 + 1;
        if (w > 2 || h > 2)
            continue;
        t->in = (uint8_t)(level + 1);
        t->cx0 = r.x0;
        t->cy0 = r.y0;
        t->cw = (uint8_t)w;
        t->ch = (uint8_t)h;
        for (int32_t k = 0; k < w * h; ++k) {
            int32_t *head = &fl->heads[fl_bucket_of(fl, t, k)];
            t->next[k] = *head;
            *head = p * 4 + k;
        }
        fl->filed[level]++;
        if (level >= fl->top)
            fl->top = level + 1;
        return;
    }
    t->in = QG_FAT_HUGE;
    t->cw = t->ch = 0;
    t->next[0] = fl->huge;
    fl->huge = p * 4;
    fl->huges++;
}

/// The link that holds entry id `id` in the list starting at *head.
static int32_t *fl_link_to(qg_fat_layer *fl, int32_t *head, int32_t id)
{
    int32_t *link = head;
    while (*link != id)
        link = &fl->entry[*link >> 2].next[*link & 3];
    return link;
}

/// Takes entry p out of the grid (it stays `in`, at its level).
static void fl_unfile(qg_fat_layer *fl, int32_t p)
{
    qg_fat_entry *t = &fl->entry[p];
    if (t->in == QG_FAT_HUGE) {
        int32_t *link = fl_link_to(fl, &fl->huge, p * 4);
        *link = t->next[0];
        fl->huges--;
        return;
    }
    for (int32_t k = 0; k < t->cw * t->ch; ++k) {
        int32_t *link = fl_link_to(fl, &fl->heads[fl_bucket_of(fl, t, k)], p * 4 + k);
        *link = t->next[k];
    }
    if (--fl->filed[t->in - 1] == 0 && t->in == fl->top)
        while (fl->top > 0 && fl->filed[fl->top - 1] == 0)
            fl->top--;
}

typedef bool fl_visit_fn(int32_t q, void *ctx);

/// Visits once each layer position whose fat box overlaps `area`.
static bool fl_search(const qg_engine *e, qg_rect area, fl_visit_fn *fn, void *ctx, int64_t *tested)
{
    const qg_fat_layer *fl = &e->fl;
    fl_range ranges[QG_FAT_LEVELS];
    for (int level = 0; level < fl->top; ++level) {
        if (fl->filed[level] == 0)
            continue;
        const fl_range a = ranges[level] = fl_range_of(fl, area, level);
        if (((int64_t)a.x1 - a.x0 + 1) * ((int64_t)a.y1 - a.y0 + 1) <= (int64_t)fl->filed[level] + 16)
            continue;
        // More cells than elements on a level: every element once.
        for (int32_t q = 0; q < e->dyn_count; ++q) {
            const qg_fat_entry *t = &fl->entry[q];
            if (!t->in)
                continue;
            ++*tested;
            if (qg_overlaps(t->fat, area) && !fn(q, ctx))
                return false;
        }
        return true;
    }
    for (int level = 0; level < fl->top; ++level) {
        if (fl->filed[level] == 0)
            continue;
        const fl_range a = ranges[level];
        for (int64_t y = a.y0; y <= a.y1; ++y) {
            for (int64_t x = a.x0; x <= a.x1; ++x) {
                for (int32_t id = fl->heads[fl_bucket(fl, (int32_t)x, (int32_t)y, level)]; id >= 0;) {
                    const int32_t q = id >> 2, k = id & 3;
                    const qg_fat_entry *t = &fl->entry[q];
                    id = t->next[k];
                    // Another cell or level of the bucket, or not the first
                    // cell the entry and the area share (visited there).
                    if (t->in != level + 1 || t->cx0 + (k & (t->cw - 1)) != x || t->cy0 + (k >> (t->cw - 1)) != y)
                        continue;
                    if ((a.x0 > t->cx0 ? a.x0 : t->cx0) != x || (a.y0 > t->cy0 ? a.y0 : t->cy0) != y)
                        continue;
                    ++*tested;
                    if (qg_overlaps(t->fat, area) && !fn(q, ctx))
                        return false;
                }
            }
        }
    }
    for (int32_t id = fl->huge; id >= 0;) {
        const int32_t q = id >> 2;
        const qg_fat_entry *t = &fl->entry[q];
        id = t->next[0];
        ++*tested;
        if (qg_overlaps(t->fat, area) && !fn(q, ctx))
            return false;
    }
    return true;
}

/// The finest cell: a power of two at least the mean extent of the fat
/// boxes (the boxes', doubled, before they have any), so most cover at most
/// 2x2 cells of the finest level (`level` at 100,000: 1 to 4 cells and
/// about 6 entries a search), and a quarter of the
/// spacing of n elements spread evenly over their bounds (so points and
/// tiny boxes do not share one cell). Larger fat boxes go up a level.
static void fl_choose_cell(qg_fat_layer *fl, const qg_engine *e)
{
    double sum = 0.0, lo_x = INFINITY, lo_y = INFINITY, hi_x = -INFINITY, hi_y = -INFINITY;
    int32_t n = 0;
    for (int32_t p = 0; p < e->dyn_count; ++p) {
        const bool in = fl->entry[p].in != 0;
        const qg_rect r = in ? fl->entry[p].fat : e->dbox[p];
        const double w = (double)r.max_x - r.min_x, h = (double)r.max_y - r.min_y;
        sum += (in ? 1.0 : 2.0) * (w > h ? w : h);
        const double cx = 0.5 * ((double)r.min_x + r.max_x), cy = 0.5 * ((double)r.min_y + r.max_y);
        lo_x = cx < lo_x ? cx : lo_x;
        lo_y = cy < lo_y ? cy : lo_y;
        hi_x = cx > hi_x ? cx : hi_x;
        hi_y = cy > hi_y ? cy : hi_y;
        n++;
    }
    double want = 1.0;
    if (n > 0) {
        const double mean = sum / n,
                     spread = (hi_x - lo_x > hi_y - lo_y ? hi_x - lo_x : hi_y - lo_y) / (4.0 * sqrt((double)n));
        want = mean > spread ? mean : spread;
    }
    if (!(want >= 0x1p-60))
        want = want > 0.0 ? 0x1p-60 : 1.0;
    if (want > 0x1p100)
        want = 0x1p100;
    int ex;
    const double m = frexp(want, &ex); // want = m * 2^ex, m in [0.5, 1)
    const double cell = ldexp(1.0, m == 0.5 ? ex - 1 : ex);
    fl->cell = (float)cell;
    for (int level = 0; level < QG_FAT_LEVELS; ++level)
        fl->inv[level] = ldexp(1.0 / cell, -2 * level);
}

void qg_fat_layout(qg_engine *e)
{
    qg_fat_layer *fl = &e->fl;
    uint32_t buckets = 1;
    while ((int64_t)buckets * 2 <= fl->heads_cap)
        buckets *= 2;
    fl->age++;
    bool due = !fl->built || buckets != fl->mask + 1;
    if (due || fl->age >= FL_RELAYOUT || (fl->age >= 16 && (int64_t)fl->huges * 8 > (int64_t)fl->count + 64)) {
        // The cell again; the grid is laid out anew only when it changed
        // (or the buckets did).
        const float old_cell = fl->cell;
        fl_choose_cell(fl, e);
        due |= fl->cell != old_cell;
        // Chosen from boxes without fat boxes yet: again once they have some.
        fl->age = fl->count < e->dyn_count / 2 ? FL_RELAYOUT - 16 : 0;
    }
    if (!due)
        return;
    fl->mask = buckets - 1;
    fl->built = true;
    for (uint32_t b = 0; b < buckets; ++b)
        fl->heads[b] = -1;
    fl->huge = -1;
    fl->huges = 0;
    fl->top = 0;
    memset(fl->filed, 0, sizeof fl->filed);
    for (int32_t p = 0; p < e->dyn_count; ++p)
        if (fl->entry[p].in)
            fl_file(fl, p);
}

/* ---- partners ----------------------------------------------------------- */

/// Takes position p off position q's list (if it is there).
static void fl_unlist(qg_fat_layer *fl, int32_t q, int32_t p)
{
    qg_fat_entry *t = &fl->entry[q];
    if (t->npart == QG_FAT_CROWDED)
        return;
    for (int32_t k = 0; k < t->npart; ++k) {
        if (t->part[k] == p) {
            t->part[k] = t->part[--t->npart];
            fl_touch(fl, q);
            return;
        }
    }
}

/// Lists position p on position q's entry; a full list makes q crowded.
static void fl_list(qg_fat_layer *fl, int32_t q, int32_t p)
{
    qg_fat_entry *t = &fl->entry[q];
    if (t->npart == QG_FAT_CROWDED)
        return;
    for (int32_t k = 0; k < t->npart; ++k)
        if (t->part[k] == p)
            return;
    if (t->npart == QG_FAT_PARTS) {
        t->npart = QG_FAT_CROWDED; // its full list stays, for fl_forget
        fl->crowded++;
    } else {
        t->part[t->npart++] = p;
    }
    fl_touch(fl, q);
}

/// p's listed partners forget it; its list empties.
static void fl_forget(qg_engine *e, int32_t p)
{
    qg_fat_layer *fl = &e->fl;
    qg_fat_entry *t = &fl->entry[p];
    const bool crowded = t->npart == QG_FAT_CROWDED;
    const int32_t n = crowded ? QG_FAT_PARTS : t->npart;
    fl->crowded -= crowded;
    for (int32_t k = 0; k < n; ++k) {
        const int32_t q = t->part[k];
        if (q < e->dyn_count && fl->entry[q].in)
            fl_unlist(fl, q, p);
    }
    t->npart = 0;
    fl_touch(fl, p);
}

typedef struct fl_gather {
    const qg_fat_layer *fl;
    int32_t self, n;
    int32_t found[QG_FAT_PARTS];
} fl_gather;

static bool fl_gather_visit(int32_t q, void *ctx)
{
    fl_gather *g = ctx;
    // A crowded element is no one's partner (its own search reports its
    // pairs): one with a huge fat box does not crowd the others.
    if (q == g->self || g->fl->busy[q] == QG_FAT_SEARCH)
        return true;
    if (g->n < QG_FAT_PARTS)
        g->found[g->n] = q;
    return ++g->n <= QG_FAT_PARTS; // past that p is crowded: stop
}

/// Lists p's partners from the grid (p filed, its list empty) and lists p
/// on theirs.
static void fl_partner(qg_engine *e, int32_t p)
{
    qg_fat_layer *fl = &e->fl;
    qg_fat_entry *t = &fl->entry[p];
    fl_gather g = {fl, p, 0, {0}};
    int64_t tested = 0;
    fl_search(e, t->fat, fl_gather_visit, &g, &tested);
    if (g.n > QG_FAT_PARTS) {
        // Its pairs come from a search each frame; the first it found are
        // kept only so fl_forget may take it off their lists.
        t->npart = QG_FAT_CROWDED;
        for (int32_t k = 0; k < QG_FAT_PARTS; ++k)
            t->part[k] = g.found[k];
        fl->crowded++;
        fl_touch(fl, p);
        return;
    }
    t->npart = (uint8_t)g.n;
    fl_touch(fl, p);
    for (int32_t k = 0; k < g.n; ++k) {
        t->part[k] = g.found[k];
        fl_list(fl, g.found[k], p);
    }
}

/* ---- life --------------------------------------------------------------- */

/// The fat box of `box`, moving (vx, vy) a frame.
static qg_rect fl_fat(const qg_fat_layer *fl, qg_rect box, float vx, float vy)
{
    return qg_fat_box(box, vx, vy, fl->built ? 2.0f * fl->cell : 0.0f);
}

/// v * FL_AHEAD, at most `cap` either way (a jump is not a motion to keep).
static inline float fl_ahead(float v, float cap)
{
    const float d = v * FL_AHEAD;
    return d > cap ? cap : d < -cap ? -cap : d;
}

qg_rect qg_fat_box(qg_rect box, float vx, float vy, float cap)
{
    const float w = box.max_x - box.min_x, h = box.max_y - box.min_y;
    const float m = FL_SCALE * (w > h ? w : h);
    qg_rect f = {box.min_x - m, box.min_y - m, box.max_x + m, box.max_y + m};
    const float dx = fl_ahead(vx, cap), dy = fl_ahead(vy, cap);
    if (dx > 0.0f)
        f.max_x += dx;
    else if (dx < 0.0f)
        f.min_x += dx;
    if (dy > 0.0f)
        f.max_y += dy;
    else if (dy < 0.0f)
        f.min_y += dy;
    f.min_x = fl_clamp(f.min_x);
    f.min_y = fl_clamp(f.min_y);
    f.max_x = fl_clamp(f.max_x);
    f.max_y = fl_clamp(f.max_y);
    // Rounding never leaves the box outside (m >= 0, the clamps keep order).
    if (!qg_rect_inside(box, f))
        f = box;
    return f;
}

void qg_fat_admit(qg_engine *e, int32_t p)
{
    qg_fat_layer *fl = &e->fl;
    qg_fat_entry *t = &fl->entry[p];
    t->npart = 0;
    t->fat = fl_fat(fl, e->dbox[p], 0.0f, 0.0f);
    fl->count++;
    fl_file(fl, p);
    fl_partner(e, p);
    qg_engine_inner(e, p);
}

void qg_fat_leave(qg_engine *e, int32_t p)
{
    qg_fat_layer *fl = &e->fl;
    fl_forget(e, p);
    fl_unfile(fl, p);
    qg_fat_out(fl, p);
    fl->count--;
}

void qg_fat_refit(qg_engine *e, int32_t p, qg_rect old)
{
    qg_fat_layer *fl = &e->fl;
    qg_fat_entry *t = &fl->entry[p];
    const qg_rect box = e->dbox[p];
    fl_forget(e, p);
    fl_unfile(fl, p);
    t->fat = fl_fat(fl, box, box.min_x - old.min_x, box.min_y - old.min_y);
    fl_file(fl, p);
    fl_partner(e, p);
    qg_engine_inner(e, p);
}

void qg_fat_moved_pos(qg_engine *e, int32_t from, int32_t to)
{
    qg_fat_layer *fl = &e->fl;
    if (from == to)
        return;
    // Filed again rather than relinked: a bucket may hold two of its cells,
    // and a walk would read the old entry's links after the copy.
    const bool in = fl->entry[from].in;
    if (in)
        fl_unfile(fl, from);
    fl->entry[to] = fl->entry[from];
    fl->busy[to] = fl->busy[from];
    fl->entry[from].in = 0;
    if (!in)
        return;
    fl_file(fl, to);
    // Its partners list it by position: `from` becomes `to` (dropped where
    // `to` is listed already, a leftover of the element that left it).
    qg_fat_entry *t = &fl->entry[to];
    for (int32_t k = 0; t->npart != QG_FAT_CROWDED && k < t->npart;) {
        if (t->part[k] == to || t->part[k] == from)
            t->part[k] = t->part[--t->npart]; // itself, by either position
        else
            ++k;
    }
    fl_touch(fl, to);
    const int32_t n = t->npart == QG_FAT_CROWDED ? QG_FAT_PARTS : t->npart;
    for (int32_t k = 0; k < n; ++k) {
        const int32_t q = t->part[k];
        if (q >= e->dyn_count || !fl->entry[q].in || fl->entry[q].npart == QG_FAT_CROWDED)
            continue;
        qg_fat_entry *u = &fl->entry[q];
        bool has_to = false;
        for (int32_t j = 0; j < u->npart; ++j)
            has_to |= u->part[j] == to;
        for (int32_t j = 0; j < u->npart; ++j) {
            if (u->part[j] == from) {
                if (has_to)
                    u->part[j] = u->part[--u->npart];
                else
                    u->part[j] = to;
                fl_touch(fl, q);
                break;
            }
        }
    }
}

/* ---- pairs and queries -------------------------------------------------- */

typedef struct fl_pair_ctx {
    const qg_engine *e;
    const qg_filter *filters;
    qg_pair_fn *fn;
    void *user;
    qg_rect box;
    qg_handle h;
    int32_t self;
    bool crowded; ///< h is a crowded layer element (others: in the kind)
} fl_pair_ctx;

static bool fl_pair_visit(int32_t q, void *ctx)
{
    fl_pair_ctx *c = ctx;
    const qg_engine *e = c->e;
    if (q == c->self)
        return true;
    const qg_handle g = e->dyn[q];
    if (c->crowded && e->fl.busy[q] == QG_FAT_SEARCH && q < c->self)
        return true; // q's own search reports it
    if (!qg_overlaps(e->dbox[q], c->box))
        return true;
    if (c->filters != NULL) {
        const qg_filter fa = c->filters[c->h], fb = c->filters[g];
        if ((fa.category & fb.mask) == 0 || (fb.category & fa.mask) == 0)
            return true;
    }
    return qg_report_pair(c->fn, c->user, c->h, g);
}

bool qg_fat_pairs(const qg_index *index, int32_t b, int32_t end, bool statics, const qg_filter *filters,
                  qg_pair_fn *fn, void *user, qg_query_stats *stats)
{
    const qg_engine *e = index->engine;
    const qg_fat_layer *fl = &e->fl;
    fl_pair_ctx c = {e, filters, fn, user, {0, 0, 0, 0}, 0, -1, false};
    int64_t tested = 0;
    for (int32_t p0 = b; p0 < end; p0 += 16) {
        // The busy positions of the next 16 as bits (busy has 16 bytes of
        // room past the last position).
#if defined(QV_HAVE)
        uint32_t mask = qv_nonzero8(fl->busy + p0);
#else
        uint32_t mask = 0;
        for (int k = 0; k < 16; ++k)
            mask |= (uint32_t)(fl->busy[p0 + k] != 0) << k;
#endif
        if (end - p0 < 16)
            mask &= (1u << (end - p0)) - 1;
        for (; mask != 0; mask &= mask - 1) {
            const int32_t p = p0 + qg_ctz64(mask);
            const qg_fat_entry *t = &fl->entry[p];
            const qg_handle h = e->dyn[p];
            if (fl->busy[p] == QG_FAT_LISTED) {
                // The list: each pair reported by its smaller position (both
                // list it); a partner that searches reports its own.
                for (int32_t k = 0; k < t->npart; ++k) {
                    const int32_t q = t->part[k];
                    if (q <= p || fl->busy[q] != QG_FAT_LISTED)
                        continue;
                    tested++;
                    if (!qg_overlaps(e->dbox[q], e->dbox[p]))
                        continue;
                    const qg_handle g = e->dyn[q];
                    if (filters != NULL) {
                        const qg_filter fa = filters[h], fb = filters[g];
                        if ((fa.category & fb.mask) == 0 || (fb.category & fa.mask) == 0)
                            continue;
                    }
                    if (!qg_report_pair(fn, user, h, g)) {
                        stats->elements_tested += tested;
                        return false;
                    }
                }
                continue;
            }
            // A crowded element, or one in the kind: a search of the grid.
            c.box = e->dbox[p];
            c.h = h;
            c.self = p;
            c.crowded = t->in != 0;
            if (!fl_search(e, c.box, fl_pair_visit, &c, &tested)) {
                stats->elements_tested += tested;
                return false;
            }
        }
    }
    // Pending statics (in the kind) against the layer.
    for (qg_handle h = 0; statics && h < index->box_high; ++h) {
        if ((e->flags[h] & (QG_F_STATIC | QG_F_LAYER)) != QG_F_STATIC)
            continue;
        c.box = index->boxes[h];
        c.h = h;
        c.self = -1;
        c.crowded = false;
        if (!fl_search(e, c.box, fl_pair_visit, &c, &tested)) {
            stats->elements_tested += tested;
            return false;
        }
    }
    stats->elements_tested += tested;
    return true;
}

typedef struct fl_query_ctx {
    const qg_engine *e;
    qg_rect area;
    qg_query_fn *fn;
    void *user;
} fl_query_ctx;

static bool fl_query_visit(int32_t q, void *ctx)
{
    const fl_query_ctx *c = ctx;
    if (!qg_overlaps(c->e->dbox[q], c->area))
        return true;
    return c->fn(c->e->dyn[q], c->user);
}

void qg_fat_visit(const qg_engine *e, qg_visit_fn *fn, void *user)
{
    for (int32_t p = 0; e->fl.count > 0 && p < e->dyn_count; ++p)
        if (e->fl.entry[p].in)
            fn(e->fl.entry[p].fat, 0, 1, user);
}

bool qg_fat_query(const qg_engine *e, qg_rect area, qg_query_fn *fn, void *user, qg_query_stats *stats)
{
    fl_query_ctx c = {e, area, fn, user};
    return fl_search(e, area, fl_query_visit, &c, &stats->elements_tested);
}

/* ---- checks ------------------------------------------------------------- */

bool qg_fat_validate(const qg_engine *e)
{
    const qg_fat_layer *fl = &e->fl;
    int32_t count = 0, crowded = 0, cells = 0, huges = 0, filed[QG_FAT_LEVELS] = {0};
    if (fl->count > 0 && (!fl->built || (int64_t)fl->mask + 1 > fl->heads_cap))
        return false;
    for (int32_t p = e->dyn_count; p < fl->busy_cap; ++p)
        if (fl->busy[p])
            return false;
    for (int32_t p = 0; p < e->dyn_count; ++p) {
        const qg_fat_entry *t = &fl->entry[p];
        const qg_handle h = e->dyn[p];
        if (fl->busy[p] != (!t->in || t->npart == QG_FAT_CROWDED ? QG_FAT_SEARCH : t->npart != 0 ? QG_FAT_LISTED : 0))
            return false;
        if (!t->in) {
            if (e->flags[h] & QG_F_FAT)
                return false;
            continue;
        }
        if (!(e->flags[h] & QG_F_FAT) || !qg_rect_inside(e->dbox[p], t->fat) || t->in > QG_FAT_HUGE)
            return false;
        count++;
        // Filed on the finest level where it covers at most 2x2 cells.
        int level = 0;
        fl_range r = {0, 0, 0, 0};
        for (; level < QG_FAT_LEVELS; ++level) {
            r = fl_range_of(fl, t->fat, level);
            if ((int64_t)r.x1 - r.x0 < 2 && (int64_t)r.y1 - r.y0 < 2)
                break;
        }
        if (level == QG_FAT_LEVELS) {
            if (t->in != QG_FAT_HUGE)
                return false;
            huges++;
        } else {
            if (t->in != level + 1 || r.x0 != t->cx0 || r.y0 != t->cy0 || t->cw != r.x1 - r.x0 + 1 ||
                t->ch != r.y1 - r.y0 + 1)
                return false;
            filed[level]++;
            cells += t->cw * t->ch;
        }
        if (t->npart == QG_FAT_CROWDED) {
            crowded++;
            continue;
        }
        if (t->npart > QG_FAT_PARTS)
            return false;
        for (int32_t k = 0; k < t->npart; ++k) {
            if (t->part[k] == p)
                return false;
            for (int32_t j = k + 1; j < t->npart; ++j)
                if (t->part[k] == t->part[j])
                    return false;
        }
    }
    if (count != fl->count || crowded != fl->crowded || huges != fl->huges ||
        memcmp(filed, fl->filed, sizeof filed) != 0)
        return false;
    // Every filed id sits in the bucket of its cell, once.
    int32_t seen = 0;
    for (uint32_t b = 0; fl->built && b <= fl->mask; ++b) {
        for (int32_t id = fl->heads[b]; id >= 0;) {
            const int32_t q = id >> 2, k = id & 3;
            if (q >= e->dyn_count || !fl->entry[q].in || fl->entry[q].in == QG_FAT_HUGE ||
                k >= fl->entry[q].cw * fl->entry[q].ch)
                return false;
            const qg_fat_entry *t = &fl->entry[q];
            if (fl_bucket_of(fl, t, k) != b || ++seen > cells)
                return false;
            id = t->next[k];
        }
    }
    int32_t seen_huge = 0;
    for (int32_t id = fl->huge; id >= 0; id = fl->entry[id >> 2].next[0])
        if ((id & 3) != 0 || id >> 2 >= e->dyn_count || fl->entry[id >> 2].in != QG_FAT_HUGE || ++seen_huge > huges)
            return false;
    if (seen != cells || seen_huge != huges)
        return false;
    // The invariant: listed elements whose fat boxes overlap list each other
    // (quadratic: checked up to a few thousand elements).
    if (e->dyn_count > 4096)
        return true;
    for (int32_t p = 0; p < e->dyn_count; ++p) {
        const qg_fat_entry *t = &fl->entry[p];
        if (!t->in || t->npart == QG_FAT_CROWDED)
            continue;
        for (int32_t q = 0; q < e->dyn_count; ++q) {
            const qg_fat_entry *u = &fl->entry[q];
            if (q == p || !u->in || u->npart == QG_FAT_CROWDED || !qg_overlaps(t->fat, u->fat))
                continue;
            bool listed = false;
            for (int32_t k = 0; k < t->npart && !listed; ++k)
                listed = t->part[k] == q;
            if (!listed)
                return false;
        }
    }
    return true;
}
