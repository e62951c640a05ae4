// SPDX-License-Identifier: MIT
// Each dynamic element's static neighbours (see static_cache.h for why).
#include "static_cache.h"

#include <float.h>
// The join's AVX2 form is chosen at run time (the engine asks the processor
// once), so the library still runs on any x86-64; -DQV_SCALAR leaves it out
// with the other vector forms.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(QV_SCALAR) && QG_CACHE_ITEMS == 8
#    include <immintrin.h>
#    define QG_CACHE_AVX2 1
#endif

#include "engine.h"

#if defined(__GNUC__)
#    define SC_PREFETCH(p) __builtin_prefetch(p)
#else
#    define SC_PREFETCH(p) ((void)(p))
#endif

/// Fat boxes reach this times an element's larger extent around it, and
/// this many frames of its motion ahead (fewer when the items would not
/// fit); the motion is measured between fills at most SC_TRACK_FRAMES apart.
#define SC_SCALE 0.5f
#define SC_AHEAD_FRAMES 24.0f
#define SC_AHEAD_SHORT 6.0f
#define SC_TRACK_FRAMES 64u

static inline float clamp_finite(float v)
{
    return v < -FLT_MAX ? -FLT_MAX : v > FLT_MAX ? FLT_MAX : v;
}

/// The fat box of `box` moving (vx, vy) a frame: `scale` times its larger
/// extent around it (at least an eighth of the layer's finest cell, so a
/// point has room to move), stretched `ahead` frames of its motion the way
/// it goes (elements mostly keep going: a box that stays inside longer is
/// refilled less often). Never NaN (each side adds terms of its own sign, a
/// product of an infinity and 0 left out), clamped to the finite floats.
static qg_rect cache_fat(const qg_static_layer *layer, qg_rect box, float vx, float vy, float scale, float ahead)
{
    const float w = box.max_x - box.min_x, h = box.max_y - box.min_y;
    const float least = (float)(layer->level[0].cell * 0.125);
    float m = scale * (w > h ? w : h);
    if (!(m >= least))
        m = least >= 0.0f ? least : 0.0f; // also 0 * infinity
    qg_rect f = {box.min_x - m, box.min_y - m, box.max_x + m, box.max_y + m};
    if (ahead > 0.0f) {
        if (vx > 0.0f)
            f.max_x += vx * ahead;
        else if (vx < 0.0f)
            f.min_x += vx * ahead;
        if (vy > 0.0f)
            f.max_y += vy * ahead;
        else if (vy < 0.0f)
            f.min_y += vy * ahead;
    }
    f.min_x = clamp_finite(f.min_x);
    f.min_y = clamp_finite(f.min_y);
    f.max_x = clamp_finite(f.max_x);
    f.max_y = clamp_finite(f.max_y);
    return f;
}

/// The element's motion a frame since its last fill (0 without one).
static void cache_velocity(const qg_static_cache *c, qg_rect box, uint32_t frame, float *vx, float *vy)
{
    const uint32_t dt = frame - c->at_frame;
    *vx = *vy = 0.0f;
    if (c->gen == 0 || dt == 0 || dt > SC_TRACK_FRAMES)
        return;
    *vx = (box.min_x - c->at_x) / (float)dt;
    *vy = (box.min_y - c->at_y) / (float)dt;
}

/// Stores the first c->count of `found` in the slots; the unused ones get
/// a box that overlaps nothing (the join tests every slot).
static void cache_store(qg_static_cache *c, const qg_static_item *found)
{
    for (int32_t k = 0; k < QG_CACHE_ITEMS; ++k) {
        const bool used = k < c->count;
        c->min_x[k] = used ? found[k].box.min_x : NAN;
        c->min_y[k] = used ? found[k].box.min_y : NAN;
        c->max_x[k] = used ? found[k].box.max_x : NAN;
        c->max_y[k] = used ? found[k].box.max_y : NAN;
        c->item[k] = used ? found[k].handle : -1;
    }
}

/// Fills c and *fat for `box` from the fat box `wide` (its cells `span`,
/// when the layer is one dense level).
static void cache_fill_from(const qg_static_layer *layer, qg_static_cache *c, qg_rect *fat, qg_rect box,
                            qg_rect wide, const qg_static_span *span, float vx, float vy, uint32_t frame)
{
    c->gen = layer->gen;
    c->kills = layer->kills;
    c->at_x = box.min_x;
    c->at_y = box.min_y;
    c->at_frame = frame;
    qg_static_item found[QG_CACHE_ITEMS];
    c->count = span != NULL ? qg_static_collect_span(layer, *span, wide, found, QG_CACHE_ITEMS)
                            : qg_static_collect(layer, wide, found, QG_CACHE_ITEMS);
    if (c->count <= QG_CACHE_ITEMS) {
        *fat = wide;
        cache_store(c, found);
        return;
    }
    // Too many for the entry: shorter fat boxes may still fit (the element
    // then refills sooner); if none does, the wide one is kept, so the
    // element refills no more often while the join searches the layer for it.
    const qg_rect shorter = cache_fat(layer, box, vx, vy, SC_SCALE, SC_AHEAD_SHORT);
    int32_t k = qg_static_collect(layer, shorter, found, QG_CACHE_ITEMS);
    if (k <= QG_CACHE_ITEMS) {
        *fat = shorter;
        c->count = k;
        cache_store(c, found);
        return;
    }
    const qg_rect tight = cache_fat(layer, box, 0.0f, 0.0f, 0.0f, 0.0f);
    k = qg_static_collect(layer, tight, found, QG_CACHE_ITEMS);
    *fat = k <= QG_CACHE_ITEMS ? tight : wide;
    c->count = k;
    if (k <= QG_CACHE_ITEMS)
        cache_store(c, found);
}

/// Fills c and *fat for box `box` at `frame` (any layer).
static void cache_fill(const qg_static_layer *layer, qg_static_cache *c, qg_rect *fat, qg_rect box, uint32_t frame)
{
    if (layer->levels == 0) {
        c->gen = layer->gen;
        c->kills = layer->kills;
        c->at_x = box.min_x;
        c->at_y = box.min_y;
        c->at_frame = frame;
        *fat = box;
        c->count = 0;
        cache_store(c, NULL);
        return;
    }
    float vx, vy;
    cache_velocity(c, box, frame, &vx, &vy);
    const qg_rect wide = cache_fat(layer, box, vx, vy, SC_SCALE, SC_AHEAD_FRAMES);
    if (qg_static_dense(layer)) {
        const qg_static_span span = qg_static_span_of(layer, wide);
        cache_fill_from(layer, c, fat, box, wide, &span, vx, vy, frame);
    } else {
        cache_fill_from(layer, c, fat, box, wide, NULL, vx, vy, frame);
    }
}

void qg_cache_blank(qg_static_cache *c, qg_rect *fat, qg_handle h, qg_rect box)
{
    c->handle = h;
    c->gen = 0;
    c->kills = 0;
    c->count = QG_CACHE_FULL;
    c->at_x = c->at_y = 0.0f;
    c->at_frame = 0;
    *fat = box;
}

/// How far ahead the refill of a dense layer reads: the element's box, old
/// fat box and entry SC_AHEAD * 2 on; the new fat box's cells and their
/// bucket starts SC_AHEAD on; the first items of its rows SC_AHEAD / 2 on
/// (each a load the next stage waits for).
#define SC_AHEAD 16

typedef struct sc_pending {
    qg_rect box, wide;
    qg_static_span span;
    float vx, vy;
} sc_pending;

void qg_cache_refill(const qg_static_layer *layer, qg_static_cache *cache, qg_rect *fat, const uint64_t *order,
                     int32_t m, const qg_rect *dbox, uint32_t frame)
{
    if (!qg_static_dense(layer)) {
        for (int32_t i = 0; i < m; ++i) {
            const int32_t p = (int32_t)(uint32_t)order[i];
            cache_fill(layer, &cache[p], &fat[p], dbox[p], frame);
        }
        return;
    }
    sc_pending ring[2 * SC_AHEAD];
    for (int32_t i = -SC_AHEAD; i < m; ++i) {
        if (i + 2 * SC_AHEAD < m) {
            const int32_t p = (int32_t)(uint32_t)order[i + 2 * SC_AHEAD];
            SC_PREFETCH(&dbox[p]);
            SC_PREFETCH(&fat[p]);
            SC_PREFETCH(&cache[p]);
        }
        if (i + SC_AHEAD < m) {
            const int32_t p = (int32_t)(uint32_t)order[i + SC_AHEAD];
            sc_pending *q = &ring[(i + SC_AHEAD) & (2 * SC_AHEAD - 1)];
            q->box = dbox[p];
            cache_velocity(&cache[p], q->box, frame, &q->vx, &q->vy);
            q->wide = cache_fat(layer, q->box, q->vx, q->vy, SC_SCALE, SC_AHEAD_FRAMES);
            q->span = qg_static_span_of(layer, q->wide);
            qg_static_prefetch_span(layer, q->span);
        }
        if (i + SC_AHEAD / 2 >= 0 && i + SC_AHEAD / 2 < m)
            qg_static_prefetch_items(layer, ring[(i + SC_AHEAD / 2) & (2 * SC_AHEAD - 1)].span);
        if (i >= 0) {
            const int32_t p = (int32_t)(uint32_t)order[i];
            const sc_pending *q = &ring[i & (2 * SC_AHEAD - 1)];
            cache_fill_from(layer, &cache[p], &fat[p], q->box, q->wide, &q->span, q->vx, q->vy, frame);
        }
    }
}

/// Bit k set when slot k's box overlaps b (closed; a NaN slot never does).
static inline unsigned cache_hits(const qg_static_cache *c, qg_rect b)
{
#if defined(QV_HAVE) && QG_CACHE_ITEMS % 4 == 0
    const qg_box4 b4 = qg_box4_of(b);
    unsigned hits = 0;
    for (int k = 0; k < QG_CACHE_ITEMS; k += 4)
        hits |= qg_overlaps4(b4, c->min_x + k, c->min_y + k, c->max_x + k, c->max_y + k) << k;
    return hits;
#else
    unsigned hits = 0;
    for (int k = 0; k < QG_CACHE_ITEMS; ++k)
        hits |= (unsigned)((c->min_x[k] <= b.max_x) & (b.min_x <= c->max_x[k]) & (c->min_y[k] <= b.max_y) &
                           (b.min_y <= c->max_y[k]))
                << k;
    return hits;
#endif
}

#if defined(QG_CACHE_AVX2)
/// cache_hits with the eight slots in one AVX2 compare a coordinate.
/// The box's coordinates are broadcast from memory (one load each, no
/// shuffle).
__attribute__((target("avx2"))) static inline unsigned cache_hits_wide(const qg_static_cache *c, const qg_rect *b)
{
    const __m256 x0 = _mm256_broadcast_ss(&b->min_x), y0 = _mm256_broadcast_ss(&b->min_y);
    const __m256 x1 = _mm256_broadcast_ss(&b->max_x), y1 = _mm256_broadcast_ss(&b->max_y);
    const __m256 x = _mm256_and_ps(_mm256_cmp_ps(_mm256_loadu_ps(c->min_x), x1, _CMP_LE_OQ),
                                   _mm256_cmp_ps(x0, _mm256_loadu_ps(c->max_x), _CMP_LE_OQ));
    const __m256 y = _mm256_and_ps(_mm256_cmp_ps(_mm256_loadu_ps(c->min_y), y1, _CMP_LE_OQ),
                                   _mm256_cmp_ps(y0, _mm256_loadu_ps(c->max_y), _CMP_LE_OQ));
    return (unsigned)_mm256_movemask_ps(_mm256_and_ps(x, y));
}
#endif

/// Handles the join hands to the layer search (entries it cannot answer):
/// gathered, so the search's look-ahead has a run to work on.
#define CACHE_MISS_RUN 64
/// Entries whose hits the join gathers before it reports them.
#define CACHE_HIT_RUN 64
/// Set in a gathered pair's first handle when the entry was filled before a
/// kill: the item must still be in the layer (handles are >= 0).
#define CACHE_CHECK 0x80000000u

/// Reports the gathered pairs (a[k] the element, with CACHE_CHECK, b[k] the
/// item); false when fn stopped it.
static bool cache_report(const uint32_t *a, const qg_handle *b, int32_t n, const uint8_t *flags,
                         const qg_filter *filters, qg_pair_fn *fn, void *user)
{
    for (int32_t k = 0; k < n; ++k) {
        const qg_handle h = (qg_handle)(a[k] & ~CACHE_CHECK), it = b[k];
        if ((a[k] & CACHE_CHECK) && !(flags[it] & QG_F_LAYER))
            continue;
        if (filters != NULL) {
            const qg_filter fa = filters[h], fb = filters[it];
            if ((fa.category & fb.mask) == 0 || (fb.category & fa.mask) == 0)
                continue;
        }
        if (!qg_report_pair(fn, user, h, it))
            return false;
    }
    return true;
}

/// Bits [at, at + 64) of a bitmap of `words` words (0 past its end).
static inline uint64_t bits_at(const uint64_t *w, int64_t words, int64_t at)
{
    const int64_t k = at >> 6;
    const int s = (int)(at & 63);
    uint64_t v = k < words ? w[k] >> s : 0;
    if (s != 0 && k + 1 < words)
        v |= w[k + 1] << (64 - s);
    return v;
}

/// The join, written once for both forms: `wide` is a constant in each
/// caller, so each gets its own copy with its own slot test.
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline bool cache_join(const qg_static_layer *layer, const qg_static_cache *cache, const uint64_t *stale,
                              const uint64_t *full, int64_t words, int32_t base, const qg_rect *dbox, int32_t n,
                              const uint8_t *flags, const qg_filter *filters, qg_pair_fn *fn, void *user,
                              qg_query_stats *stats, bool wide)
{
    const uint32_t kills = layer->kills;
    qg_handle miss[CACHE_MISS_RUN];
    qg_rect miss_box[CACHE_MISS_RUN];
    // Each entry adds at most QG_CACHE_ITEMS pairs.
    uint32_t pa[CACHE_HIT_RUN * QG_CACHE_ITEMS];
    qg_handle pb[CACHE_HIT_RUN * QG_CACHE_ITEMS];
    int32_t misses = 0;
    int64_t tested = 0;
    bool go = true;
    for (int32_t i0 = 0; i0 < n && go; i0 += CACHE_HIT_RUN) {
        const int32_t i1 = n - i0 > CACHE_HIT_RUN ? i0 + CACHE_HIT_RUN : n;
        int32_t np = 0;
        // A position not stale is inside its fat box (every move that
        // leaves it marks it) and filled for this generation (a blank one
        // is stale), and one not full holds what its fat box overlaps: two
        // bits instead of the entry's fields and the fat box's test.
        uint64_t search = bits_at(stale, words, (int64_t)base + i0) | bits_at(full, words, (int64_t)base + i0);
        // Walked by pointer, the search bits shifted out one by one: clang
        // otherwise multiplies i by the entry's size and reloads spilled
        // values on every entry (`level` 10% slower than with gcc).
        const qg_static_cache *c = cache + i0;
        const qg_rect *d = dbox + i0;
        for (const qg_static_cache *end = cache + i1; c < end; ++c, ++d, search >>= 1) {
            if (search & 1) {
                const qg_rect b = *d;
                miss_box[misses] = b;
                miss[misses++] = c->handle;
                if (misses == CACHE_MISS_RUN) {
                    go = qg_static_join(layer, NULL, miss, miss_box, misses, filters, fn, user, stats);
                    misses = 0;
                    if (!go)
                        break;
                }
                continue;
            }
            tested += c->count;
            // Every slot tested (the unused ones hold an empty box), and the
            // first two hits stored without a branch: whether an element
            // touches 0, 1 or 2 items is a coin toss the predictor loses
            // (a walk of the hits by bit cost a third of the join at
            // 1,000,000). The top slot's index stands in for "none" (its
            // store is not counted).
#if defined(QG_CACHE_AVX2)
            const unsigned hits = wide ? cache_hits_wide(c, d) : cache_hits(c, *d);
#else
            const unsigned hits = cache_hits(c, *d);
            (void)wide;
#endif
            const unsigned rest = hits & (hits - 1);
            const unsigned top = 1u << (QG_CACHE_ITEMS - 1);
            const uint32_t a = (uint32_t)c->handle | (c->kills != kills ? CACHE_CHECK : 0u);
            pa[np] = a;
            pb[np] = c->item[qg_ctz64(hits | top)];
            np += hits != 0;
            pa[np] = a;
            pb[np] = c->item[qg_ctz64(rest | top)];
            np += rest != 0;
            for (unsigned more = rest & (rest - 1); more != 0; more &= more - 1) {
                pa[np] = a;
                pb[np++] = c->item[qg_ctz64(more)];
            }
        }
        if (go)
            go = cache_report(pa, pb, np, flags, filters, fn, user);
    }
    if (go && misses > 0)
        go = qg_static_join(layer, NULL, miss, miss_box, misses, filters, fn, user, stats);
    stats->nodes_visited += n;
    stats->elements_tested += tested;
    return go;
}

#if defined(QG_CACHE_AVX2)
__attribute__((target("avx2"))) static bool cache_join_wide(const qg_static_layer *layer,
                                                            const qg_static_cache *cache, const uint64_t *stale,
                                                            const uint64_t *full, int64_t words, int32_t base,
                                                            const qg_rect *dbox, int32_t n, const uint8_t *flags,
                                                            const qg_filter *filters, qg_pair_fn *fn, void *user,
                                                            qg_query_stats *stats)
{
    return cache_join(layer, cache, stale, full, words, base, dbox, n, flags, filters, fn, user, stats, true);
}
#endif

bool qg_cache_join(const qg_static_layer *layer, const qg_static_cache *cache, const uint64_t *stale,
                   const uint64_t *full, int64_t words, int32_t base, const qg_rect *dbox, int32_t n,
                   const uint8_t *flags, const qg_filter *filters, qg_pair_fn *fn, void *user, qg_query_stats *stats,
                   bool wide)
{
#if defined(QG_CACHE_AVX2)
    if (wide)
        return cache_join_wide(layer, cache, stale, full, words, base, dbox, n, flags, filters, fn, user, stats);
#endif
    (void)wide;
    return cache_join(layer, cache, stale, full, words, base, dbox, n, flags, filters, fn, user, stats, false);
}

bool qg_cache_valid(const qg_static_layer *layer, const qg_static_cache *c, qg_rect fat, const uint8_t *flags)
{
    if (c->count < 0 || c->count > QG_CACHE_FULL)
        return false;
    if (c->gen != layer->gen || c->count > QG_CACHE_ITEMS || layer->levels == 0)
        return true; // searched in full by the join
    // Every live item the fat box overlaps is held, and each held item that
    // is still live is the layer's item as it is.
    qg_static_item found[QG_CACHE_ITEMS];
    const int32_t k = qg_static_collect(layer, fat, found, QG_CACHE_ITEMS);
    if (k > c->count)
        return false;
    for (int32_t i = 0; i < k; ++i) {
        bool held = false;
        for (int32_t j = 0; j < c->count && !held; ++j) {
            const qg_rect r = {c->min_x[j], c->min_y[j], c->max_x[j], c->max_y[j]};
            held = c->item[j] == found[i].handle && memcmp(&r, &found[i].box, sizeof(qg_rect)) == 0;
        }
        if (!held)
            return false;
    }
    int32_t live = 0;
    for (int32_t j = 0; j < c->count; ++j) {
        if (!(flags[c->item[j]] & QG_F_LAYER)) {
            if (c->kills == layer->kills)
                return false; // gone without a kill counted since the fill
            continue;
        }
        live++;
    }
    return live <= k;
}
