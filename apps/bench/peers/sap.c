// SPDX-License-Identifier: MIT
/* sap: an expert's sort-and-sweep, as the strongest form of the idea the
 * plain `sweep` peer is the textbook form of. Built from the published
 * ideas of Pierre Terdiman's "Box pruning revisited" series (2017) and of
 * bepu's broad phase, written here from those descriptions:
 *
 * - Integer keys: every float bound becomes an int32 whose signed order is
 *   the float order (negative floats' magnitude bits flipped, -0 folded
 *   into +0), so the sort and every test of the sweep are integer compares
 *   (Terdiman, Box pruning revisited part 7, integer boxes, and part 14d,
 *   the float encoding; also his "Radix Sort Revisited").
 * - Boxes copied into sorted order (part 6b), x split from y as structure
 *   of arrays (parts 10-11), so the sweep streams memory and never follows
 *   an id.
 * - Sentinels (INT32_MAX min_x) after every sorted run: the inner loop's
 *   only exit is its x test, no bound check (part 4; integer sentinels,
 *   part 14d).
 * - The overlap test of 8 candidates at once with AVX2, 4 with SSE2 (part 9
 *   for SSE, part 15 for AVX), scalar elsewhere; the x test, both y tests
 *   and the visitor test in one mask.
 * - A fresh build radix-sorts (LSD, 11-bit digits, every histogram in one
 *   pass, passes whose digit is the same for every key skipped); a frame
 *   starts from last frame's order and mends it with an insertion sort, the
 *   series' choice for coherent frames (radix for one-shot sorts), falling
 *   back to the radix build when the order is far off.
 * - Partitioning in y (bepu's broad phase splits the world so that dense
 *   long stacks along the sort axis do not make every box meet sqrt(n)
 *   candidates): the world is cut into horizontal slabs whose height is
 *   learned from the boxes (about SAP_CANDIDATES x-candidates a box). A box
 *   lives in the slab of its min_y; a box whose max_y reaches slabs above is
 *   copied into their runs as a "visitor" (id stored as ~id), and each
 *   slab's run, members and visitors sorted together, is swept once, two
 *   visitors never paired. The slab of a value is a monotone function f, so
 *   a pair (a, b) with f(a.min_y) <= f(b.min_y) can overlap only if
 *   f(b.min_y) <= f(a.max_y): it is met exactly once, in b's slab, where b
 *   is a member. Tall boxes need no special case; their copies are bounded
 *   by coarsening the slabs until the visitor copies are at most 2n.
 *
 * Rays and nearest neighbours are window queries with the workload's exact
 * tests on top, as in sweep.c. The level tables are at the end. */
#include "peer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
#define SAP_X86 1
#include <immintrin.h>
#else
#define SAP_X86 0
#endif

/* The slab height: about this many x-candidates per box (smaller slabs
 * mean fewer candidates but more visitor copies and more boxes changing
 * slab each frame; measured best near 3 on `agents`), and at least this
 * many median heights. */
#define SAP_CANDIDATES 3.0
#define SAP_MIN_SLAB 2.0
/* Sentinel slots after each sorted run: an 8-wide load starting at or
 * before the first sentinel never leaves the run's sentinels. */
enum { PAD = 8 };
#define SENTINEL INT32_MAX

/* One box in key form, as passes gather it. */
typedef struct rec {
    int32_t mnx, mxx, mny, mxy, id, s, e;
} rec;

/* A sorted run of boxes, structure of arrays. */
typedef struct soa {
    int32_t *mnx, *mxx, *mny, *mxy, *id, *e;
    int32_t cap;
} soa;

struct bench_impl {
    int32_t n, S;
    /* f(y) = clamp(floor((y - y0) * inv_h), 0, S - 1) in float: each step
     * rounds monotonically, so f is monotone, which is all exactness needs
     * (an overflow to infinity clamps; inv_h = 0 only when S = 1). */
    float y0, inv_h;
    /* Slab s's run: A[start[s], end[s]), sorted by min_x, PAD sentinels
     * after. It holds the slab's members (id >= 0) and its visitors, the
     * boxes of lower slabs whose max_y reaches it (id stored as ~id). */
    soa A;
    int32_t *start, *end;
    int32_t slab_cap;
    /* Frame scratch: the stayers of each slab, compacted, then mended. */
    soa B;
    int32_t *bcount;
    rec *arr, *arr2; /* boxes that changed slab */
    int32_t arr_cap;
    int32_t *acount;
    /* For rays, nearest and queries. */
    const qg_rect *boxes;
    double *wmax; /* widest box per run (lazy) */
    bool wdirty;
    double max_width;
    bool nomem;
    int simd; /* 2 avx2, 1 sse2, 0 scalar */
    bool fixed_slabs; /* level: the slabs are shared with the tiles, never relearned */
    size_t bytes;
};

/* ---- keys ----------------------------------------------------------------- */

/* The float order as int32 order (Terdiman's radix sort of floats: flip
 * the magnitude bits of negatives). x + 0.0f folds -0 into +0 so that the
 * closed tests agree with the float ones. */
static inline int32_t key_of(float x) {
    x += 0.0f;
    int32_t k;
    memcpy(&k, &x, sizeof k);
    return k ^ ((k >> 31) & 0x7FFFFFFF);
}

static inline float float_of(int32_t k) {
    k ^= (k >> 31) & 0x7FFFFFFF;
    float x;
    memcpy(&x, &k, sizeof x);
    return x;
}

/* A visitor's id is stored as ~id. */
static inline int32_t real_id(int32_t id) {
    return id ^ (id >> 31);
}

static inline int32_t slab_of(const bench_impl *s, float y) {
    float t = (y - s->y0) * s->inv_h;
    if (!(t >= 0.0f)) return 0;
    if (t >= (float)(s->S - 1)) return s->S - 1;
    return (int32_t)t;
}

/* ---- memory --------------------------------------------------------------- */

static void soa_free(soa *a) {
    free(a->mnx), free(a->mxx), free(a->mny), free(a->mxy), free(a->id), free(a->e);
    memset(a, 0, sizeof *a);
}

static size_t soa_bytes(const soa *a, bool with_mny) {
    return (size_t)a->cap * sizeof(int32_t) * (with_mny ? 6u : 5u);
}

static bool soa_reserve(soa *a, int32_t cap, bool with_mny) {
    if (cap <= a->cap) return true;
    soa b = {0};
    size_t sz = (size_t)cap * sizeof(int32_t);
    b.mnx = malloc(sz), b.mxx = malloc(sz), b.mxy = malloc(sz), b.id = malloc(sz), b.e = malloc(sz);
    b.mny = with_mny ? malloc(sz) : NULL;
    if (!b.mnx || !b.mxx || !b.mxy || !b.id || !b.e || (with_mny && !b.mny)) {
        soa_free(&b);
        return false;
    }
    b.cap = cap;
    soa_free(a);
    *a = b;
    return true;
}

static bool reserve_slabs(bench_impl *s, int32_t S) {
    if (S <= s->slab_cap) return true;
    size_t sz = (size_t)S * sizeof(int32_t);
    int32_t *p0 = malloc(sz), *p1 = malloc(sz), *p2 = malloc(sz), *p3 = malloc(sz);
    double *w = malloc((size_t)S * sizeof(double));
    if (!p0 || !p1 || !p2 || !p3 || !w) {
        free(p0), free(p1), free(p2), free(p3), free(w);
        return false;
    }
    free(s->start), free(s->end), free(s->bcount), free(s->acount), free(s->wmax);
    s->start = p0, s->end = p1, s->bcount = p2, s->acount = p3, s->wmax = w;
    s->slab_cap = S;
    return true;
}

static bool reserve_arr(bench_impl *s, int32_t cap) {
    if (cap <= s->arr_cap) return true;
    rec *a = malloc((size_t)cap * sizeof *a), *b = malloc((size_t)cap * sizeof *b);
    if (!a || !b) {
        free(a), free(b);
        return false;
    }
    free(s->arr), free(s->arr2);
    s->arr = a, s->arr2 = b, s->arr_cap = cap;
    return true;
}

static void count_bytes(bench_impl *s) {
    s->bytes = sizeof *s + soa_bytes(&s->A, true) + soa_bytes(&s->B, true) +
               (size_t)s->slab_cap * (4 * sizeof(int32_t) + sizeof(double)) +
               (size_t)s->arr_cap * 2 * sizeof(rec);
}

/* ---- learning the slabs --------------------------------------------------- */

/* The k-th smallest of a[0, m) (quickselect; a is reordered). */
static float select_k(float *a, int32_t m, int32_t k) {
    int32_t lo = 0, hi = m - 1;
    while (lo < hi) {
        float pivot = a[lo + (hi - lo) / 2];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i <= j) {
                float t = a[i];
                a[i] = a[j], a[j] = t;
                i++, j--;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else break;
    }
    return a[k];
}

/* Sets y0, inv_h and S for `slabs` slabs over [lo, hi]. */
static void set_slabs(bench_impl *s, double lo, double hi, int32_t slabs) {
    s->S = slabs, s->y0 = (float)lo;
    double inv = slabs > 1 && hi > lo ? (double)slabs / (hi - lo) : 0.0;
    s->inv_h = inv < 3e38 ? (float)inv : 3e38f;
    if (!(s->inv_h > 0.0f)) s->S = 1, s->inv_h = 0.0f;
}

/* y0, the slab height and the slab count from a sample of the boxes: the
 * 0.5% and 99.5% quantiles of min_y bound the slabs (boxes beyond fall in
 * the end slabs, which stays exact), and the height is chosen for about
 * SAP_CANDIDATES x-candidates per box. build_fresh then coarsens the slabs
 * while the visitor copies (the sum of e - s) exceed 2n, so tall boxes
 * cannot blow up memory or time. */
static void learn_slabs(bench_impl *s, const qg_rect *boxes, int32_t n, double *lo_out, double *hi_out) {
    enum { SAMPLE = 2048 };
    float ys[SAMPLE], hs[SAMPLE], xs[SAMPLE], ws[SAMPLE];
    int32_t m = n < SAMPLE ? n : SAMPLE;
    for (int32_t k = 0; k < m; k++) {
        const qg_rect *b = &boxes[(int64_t)k * n / m];
        ys[k] = b->min_y, xs[k] = b->min_x;
        hs[k] = b->max_y - b->min_y, ws[k] = b->max_x - b->min_x;
    }
    set_slabs(s, 0.0, 0.0, 1);
    *lo_out = *hi_out = 0.0;
    if (m < 2) return;
    const int32_t q0 = m / 200, q1 = m - 1 - m / 200;
    double lo = select_k(ys, m, q0), hi = select_k(ys, m, q1);
    double xr = (double)select_k(xs, m, q1) - (double)select_k(xs, m, q0);
    double mh = select_k(hs, m, m / 2), mw = select_k(ws, m, m / 2);
    if (!isfinite(mh)) mh = 0.0;
    if (!isfinite(mw)) mw = 0.0;
    if (mw < xr / n) mw = xr / n;
    /* A slab of height H holds about n H / yr boxes, so a box meets about
     * (n H / (xr yr)) (2 mw) x-candidates: H is chosen for SAP_CANDIDATES
     * of them, and at least SAP_MIN_SLAB median heights (so most boxes stay
     * in one slab). */
    double h = mw > 0.0 ? SAP_CANDIDATES * xr * (hi - lo) / ((double)n * 2.0 * mw) : 0.0;
    if (h < SAP_MIN_SLAB * mh) h = SAP_MIN_SLAB * mh;
    int32_t smax = n / 16 > 1 ? n / 16 : 1;
    if (smax > (1 << 22)) smax = 1 << 22; /* two 11-bit radix digits */
    if (!(h > 0.0) || !isfinite(h)) h = (hi - lo) / smax;
    if (!(hi > lo && h > 0.0)) return;
    double count = (hi - lo) / h;
    set_slabs(s, lo, hi, count >= smax ? smax : (int32_t)count + 1);
    *lo_out = lo, *hi_out = hi;
}

static inline void put(soa *a, int32_t at, const rec *r) {
    a->mnx[at] = r->mnx, a->mxx[at] = r->mxx, a->mny[at] = r->mny, a->mxy[at] = r->mxy;
    a->id[at] = r->id, a->e[at] = r->e;
}

static inline void put_sentinels(soa *a, int32_t at, bool with_mny) {
    for (int k = 0; k < PAD; k++) {
        a->mnx[at + k] = SENTINEL, a->mxx[at + k] = 0, a->mxy[at + k] = 0, a->id[at + k] = -1;
        a->e[at + k] = -1;
        if (with_mny) a->mny[at + k] = 0;
    }
}

/* ---- filling the runs from the sorted sources ---------------------------- */

/* Slab s's run is the merge of three sorted sources: its stayers
 * B[bfrom, bfrom + bn), its arrivals arr2[afrom, afrom + an), and the
 * entries of slab s - 1's run (members or visitors) whose max_y reaches
 * slab s, which become visitors. `copies` is the number of visitor entries
 * (the sum of e - s), so A is sized before it is written. */
static bool fill(bench_impl *s, int64_t copies) {
    const int32_t S = s->S;
    int64_t need = (int64_t)s->n + copies + (int64_t)S * PAD + PAD;
    if (need > INT32_MAX / 2) return false;
    if (need > s->A.cap && !soa_reserve(&s->A, (int32_t)(need + need / 8), true)) return false;
    soa *A = &s->A, *B = &s->B;
    int32_t bfrom = 0, afrom = 0, at = 0, pf = 0, pt = 0;
    for (int32_t sl = 0; sl < S; sl++) {
        const int32_t bt = bfrom + s->bcount[sl], an = s->acount[sl];
        const rec *ar = s->arr2 + afrom;
        int32_t b = bfrom, j = 0, p = pf;
        s->start[sl] = at;
        for (;;) {
            while (p < pt && A->e[p] < sl) p++;
            const int32_t ka = j < an ? ar[j].mnx : SENTINEL, kp = p < pt ? A->mnx[p] : SENTINEL;
            const int32_t m = ka < kp ? ka : kp;
            /* The stayers come in long runs between two arrivals or
             * visitors: one predictable compare each. */
            for (; b < bt && B->mnx[b] <= m; b++, at++) {
                A->mnx[at] = B->mnx[b], A->mxx[at] = B->mxx[b], A->mny[at] = B->mny[b];
                A->mxy[at] = B->mxy[b], A->id[at] = B->id[b], A->e[at] = B->e[b];
            }
            if (m == SENTINEL) break;
            if (ka <= kp) {
                put(A, at, &ar[j++]);
            } else {
                const int32_t id = A->id[p];
                A->mnx[at] = kp, A->mxx[at] = A->mxx[p], A->mny[at] = A->mny[p];
                A->mxy[at] = A->mxy[p], A->id[at] = id < 0 ? id : ~id, A->e[at] = A->e[p];
                p++;
            }
            at++;
        }
        s->end[sl] = at;
        pf = s->start[sl], pt = at;
        put_sentinels(A, at, true);
        at += PAD;
        bfrom = bt, afrom += an;
    }
    s->wdirty = true;
    return true;
}

/* ---- fresh build: radix sort -------------------------------------------- */

/* LSD radix sort of (slab, min_x key) with 11-bit digits (Terdiman, "Radix
 * Sort Revisited"): every histogram in the one read pass that makes the
 * keys, a pass skipped when one bucket holds every key, and the last pass
 * (by slab) writes the boxes straight into their sorted records. The
 * triples (key, slab, id) ping-pong in A's arrays, which fill() rewrites
 * afterwards, so the build allocates nothing of its own. */
enum { RBITS = 11, RBUCKETS = 1 << RBITS };

static bool build_fresh(bench_impl *s, const qg_rect *boxes, int32_t n) {
    s->n = n;
    s->boxes = boxes;
    double lo = 0.0, hi = 0.0;
    if (!s->fixed_slabs) learn_slabs(s, boxes, n, &lo, &hi);
    /* A: the scratch of the sort now, the runs after (visitor copies are
     * a few percent of n on ordinary scenes; fill() grows A if not). */
    if (!soa_reserve(&s->A, n + n / 8 + (s->S + 2) * PAD, true) || !soa_reserve(&s->B, n > 0 ? n : 1, true) ||
        !reserve_arr(s, n / 16 + 64))
        return false;
    uint32_t hist[5][RBUCKETS]; /* 40 KiB of stack */
    uint32_t *key = (uint32_t *)s->A.mnx, *slab = (uint32_t *)s->A.mxx, *idv = (uint32_t *)s->A.mny;
    uint32_t *key2 = (uint32_t *)s->A.mxy, *slab2 = (uint32_t *)s->A.id, *id2 = (uint32_t *)s->A.e;
    int64_t copies;
    for (;;) {
        if (!reserve_slabs(s, s->S)) return false;
        memset(hist, 0, sizeof hist);
        for (int32_t sl = 0; sl < s->S; sl++) s->bcount[sl] = 0, s->acount[sl] = 0;
        copies = 0;
        for (int32_t i = 0; i < n; i++) {
            const uint32_t k = (uint32_t)key_of(boxes[i].min_x) ^ 0x80000000u;
            const int32_t sl = slab_of(s, boxes[i].min_y), e = slab_of(s, boxes[i].max_y);
            copies += e > sl ? e - sl : 0;
            key[i] = k, slab[i] = (uint32_t)sl, idv[i] = (uint32_t)i;
            hist[0][k & (RBUCKETS - 1)]++, hist[1][(k >> RBITS) & (RBUCKETS - 1)]++, hist[2][k >> (2 * RBITS)]++;
            hist[3][sl & (RBUCKETS - 1)]++, hist[4][sl >> RBITS]++;
            s->bcount[sl]++;
        }
        if (copies <= 2 * (int64_t)n || s->S == 1 || s->fixed_slabs) break;
        set_slabs(s, lo, hi, (s->S + 1) / 2);
    }
    const int last = s->S > RBUCKETS ? 4 : 3;
    for (int p = 0; p < last; p++) {
        const uint32_t *src = p < 3 ? key : slab;
        const int sh = p < 3 ? p * RBITS : 0;
        if (n == 0 || hist[p][(src[0] >> sh) & (RBUCKETS - 1)] == (uint32_t)n) continue;
        uint32_t off[RBUCKETS], sum = 0;
        for (int b = 0; b < RBUCKETS; b++) off[b] = sum, sum += hist[p][b];
        for (int32_t i = 0; i < n; i++) {
            uint32_t d = off[(src[i] >> sh) & (RBUCKETS - 1)]++;
            key2[d] = key[i], slab2[d] = slab[i], id2[d] = idv[i];
        }
        uint32_t *t = key;
        key = key2, key2 = t;
        t = slab, slab = slab2, slab2 = t;
        t = idv, idv = id2, id2 = t;
    }
    /* The last pass, by the slab's top digit: into B's records. */
    {
        const int p = last, sh = last == 4 ? RBITS : 0;
        uint32_t off[RBUCKETS], sum = 0;
        for (int b = 0; b < RBUCKETS; b++) off[b] = sum, sum += hist[p][b];
        for (int32_t i = 0; i < n; i++) {
            uint32_t d = off[(slab[i] >> sh) & (RBUCKETS - 1)]++;
            const int32_t id = (int32_t)idv[i];
            const qg_rect *b = &boxes[id];
            if (i + 16 < n) __builtin_prefetch(&boxes[idv[i + 16]]);
            const int32_t e = slab_of(s, b->max_y);
            s->B.mnx[d] = (int32_t)(key[i] ^ 0x80000000u), s->B.mxx[d] = key_of(b->max_x);
            s->B.mny[d] = key_of(b->min_y), s->B.mxy[d] = key_of(b->max_y), s->B.id[d] = id;
            s->B.e[d] = e > (int32_t)slab[i] ? e : (int32_t)slab[i];
        }
    }
    bool ok = fill(s, copies);
    count_bytes(s);
    return ok;
}

/* ---- a frame: mend last frame's order ---------------------------------------- */

/* Walks last frame's order: a box still in its slab is appended to the
 * slab's stayers in B with an insertion step (it moved a little, so it
 * moves back a few places at most: Terdiman's coherent insertion sort); a
 * box that changed slab goes to the arrivals. Then the arrivals are grouped
 * by slab (a stable counting pass) and mended the same way, and fill()
 * merges the two. The work is bounded: too many moves or arrivals, or boxes
 * escaping the learned slabs, and the frame is a fresh build instead. */
static bool update_coherent(bench_impl *s, const qg_rect *boxes, int32_t n) {
    const int32_t S = s->S;
    const int32_t *restrict aid = s->A.id;
    int32_t *restrict bmnx = s->B.mnx, *restrict bmxx = s->B.mxx, *restrict bmny = s->B.mny;
    int32_t *restrict bmxy = s->B.mxy, *restrict bid = s->B.id, *restrict be = s->B.e;
    int64_t budget = 8 * (int64_t)n + 1024, moves = 0;
    int32_t narr = 0, bat = 0, escaped = 0;
    const int32_t arr_limit = n / 16 + 64, esc_limit = n / 16 + 16;
    if (!reserve_arr(s, arr_limit)) return false;
    int64_t copies = 0;
    const float y0 = s->y0, inv_h = s->inv_h, top = (float)(S - 1);
    for (int32_t sl = 0; sl < S; sl++) s->acount[sl] = 0;
    for (int32_t sl = 0; sl < S; sl++) {
        const int32_t from = s->start[sl], to = s->end[sl], bfrom = bat;
        for (int32_t j = from; j < to; j++) {
            const int32_t id = aid[j];
            if (id < 0) continue; /* a visitor: it is walked in its own slab */
            /* The boxes are read in last frame's sorted order, which is
             * random in memory: fetch ahead. */
            if (j + 16 < to) __builtin_prefetch(&boxes[real_id(aid[j + 16])]);
            const qg_rect *b = &boxes[id];
            const float ty = (b->min_y - y0) * inv_h, te = (b->max_y - y0) * inv_h;
            int32_t ns, ne;
            if (!(ty >= 0.0f)) ns = 0, escaped += ty < -1.0f;
            else if (ty >= top) ns = S - 1, escaped += ty >= top + 2.0f;
            else ns = (int32_t)ty;
            if (!(te >= 0.0f)) ne = 0;
            else if (te >= top) ne = S - 1;
            else ne = (int32_t)te;
            if (ne < ns) ne = ns;
            copies += ne - ns;
            const int32_t mnx = key_of(b->min_x), mxx = key_of(b->max_x);
            const int32_t mny = key_of(b->min_y), mxy = key_of(b->max_y);
            if (ns == sl) {
                int32_t at = bat++;
                while (at > bfrom && bmnx[at - 1] > mnx) {
                    bmnx[at] = bmnx[at - 1], bmxx[at] = bmxx[at - 1], bmny[at] = bmny[at - 1];
                    bmxy[at] = bmxy[at - 1], bid[at] = bid[at - 1], be[at] = be[at - 1];
                    at--;
                }
                moves += bat - 1 - at;
                bmnx[at] = mnx, bmxx[at] = mxx, bmny[at] = mny, bmxy[at] = mxy, bid[at] = id, be[at] = ne;
            } else {
                if (narr == arr_limit) return build_fresh(s, boxes, n);
                rec *r = &s->arr[narr++];
                r->mnx = mnx, r->mxx = mxx, r->mny = mny, r->mxy = mxy, r->id = id, r->s = ns, r->e = ne;
                s->acount[ns]++;
            }
        }
        s->bcount[sl] = bat - bfrom;
        if (moves > budget || escaped > esc_limit || copies > 3 * (int64_t)n + 64)
            return build_fresh(s, boxes, n);
    }
    /* Arrivals: grouped by slab (stable), then an insertion sort per group
     * (each group is a few sorted runs, one per slab it came from). */
    int32_t off = 0;
    for (int32_t sl = 0; sl < S; sl++) {
        int32_t c = s->acount[sl];
        s->acount[sl] = off; /* start, for now */
        off += c;
    }
    for (int32_t k = 0; k < narr; k++) s->arr2[s->acount[s->arr[k].s]++] = s->arr[k];
    int32_t prev = 0;
    for (int32_t sl = 0; sl < S; sl++) {
        int32_t endg = s->acount[sl];
        for (int32_t k = prev + 1; k < endg; k++) {
            rec r = s->arr2[k];
            int32_t at = k;
            while (at > prev && s->arr2[at - 1].mnx > r.mnx) s->arr2[at] = s->arr2[at - 1], at--;
            s->arr2[at] = r;
        }
        s->acount[sl] = endg - prev;
        prev = endg;
    }
    s->boxes = boxes;
    return fill(s, copies);
}

/* ---- the sweep kernels ------------------------------------------------------- */

/* Pairs found are buffered and handed to the callback in batches, so the
 * sweep loop holds no call (a call would make the compiler spill the
 * vector registers and clear their upper halves around it). */
enum { PAIR_BUF = 512 };
typedef struct pair_buf {
    int32_t a[PAIR_BUF], b[PAIR_BUF];
    int32_t count;
    int32_t off_a, off_b; /* added to a and b when handed over (level: agents after the tiles) */
    qg_pair_fn *fn;
    void *user;
} pair_buf;

__attribute__((noinline)) static bool flush(pair_buf *pb) {
    for (int32_t k = 0; k < pb->count; k++) {
        const int32_t a = pb->a[k] + pb->off_a, b = pb->b[k] + pb->off_b;
        if (!(a < b ? pb->fn(a, b, pb->user) : pb->fn(b, a, pb->user))) return false;
    }
    pb->count = 0;
    return true;
}

/* Buffers (a, b); flushes before the buffer could overflow (a chunk adds
 * at most 8). */
#define EMIT(p_, q_) (pb->a[pb->count] = (p_), pb->b[pb->count] = (q_), pb->count++)
#define MAYBE_FLUSH()                                                                                             do {                                                                                                              if (pb->count > PAIR_BUF - 8 && !flush(pb)) return false;                                                } while (0)

/* A run against itself: for each entry, the later entries whose min_x is
 * at most its max_x (the sentinel ends the loop), then the y test; two
 * visitors (both ids negative) are never a pair here, they met in a lower
 * slab. */
static bool self_scalar(const soa *A, int32_t from, int32_t to, pair_buf *pb) {
    const int32_t *mnx = A->mnx, *mny = A->mny, *mxy = A->mxy, *id = A->id;
    for (int32_t i = from; i < to; i++) {
        const int32_t x1 = A->mxx[i], y0 = mny[i], y1 = mxy[i], a = id[i];
        for (int32_t j = i + 1; mnx[j] <= x1; j++)
            if (mny[j] <= y1 && y0 <= mxy[j] && (a & id[j]) >= 0) {
                EMIT(real_id(a), real_id(id[j]));
                MAYBE_FLUSH();
            }
    }
    return true;
}

#if SAP_X86
/* The same loop 4 candidates at a time (SSE2, the x86-64 baseline): the x
 * test, the y tests and the visitor test in one mask (Terdiman, Box pruning
 * revisited part 9 for SSE, part 15 for AVX). The sentinels fail the x test, and every lane past
 * the first x failure fails it too (sorted), so a chunk with any x failure
 * is the last. */
static bool self_sse2(const soa *A, int32_t from, int32_t to, pair_buf *pb) {
    const int32_t *mnx = A->mnx, *mny = A->mny, *mxy = A->mxy, *id = A->id;
    const __m128i zero = _mm_setzero_si128();
    for (int32_t i = from; i < to; i++) {
        const int32_t a = id[i];
        const __m128i x1 = _mm_set1_epi32(A->mxx[i]), y0 = _mm_set1_epi32(mny[i]), y1 = _mm_set1_epi32(mxy[i]),
                      va = _mm_set1_epi32(a);
        for (int32_t j = i + 1;; j += 4) {
            __m128i xf = _mm_cmpgt_epi32(_mm_loadu_si128((const __m128i *)(mnx + j)), x1);
            __m128i yf = _mm_or_si128(_mm_cmpgt_epi32(_mm_loadu_si128((const __m128i *)(mny + j)), y1),
                                      _mm_cmpgt_epi32(y0, _mm_loadu_si128((const __m128i *)(mxy + j))));
            __m128i vf = _mm_cmpgt_epi32(zero, _mm_and_si128(va, _mm_loadu_si128((const __m128i *)(id + j))));
            int fail = _mm_movemask_ps(_mm_castsi128_ps(xf));
            int hit = ~_mm_movemask_ps(_mm_castsi128_ps(_mm_or_si128(_mm_or_si128(xf, yf), vf))) & 0xF;
            while (hit) {
                int b = __builtin_ctz((unsigned)hit);
                hit &= hit - 1;
                EMIT(real_id(a), real_id(id[j + b]));
            }
            MAYBE_FLUSH();
            if (fail) break;
        }
    }
    return true;
}

/* 8 at a time with AVX2, chosen at run time (__builtin_cpu_supports). */
__attribute__((target("avx2"))) static bool self_avx2(const soa *A, int32_t from, int32_t to, pair_buf *pb) {
    const int32_t *mnx = A->mnx, *mny = A->mny, *mxy = A->mxy, *id = A->id;
    const __m256i zero = _mm256_setzero_si256();
    for (int32_t i = from; i < to; i++) {
        const int32_t a = id[i];
        const __m256i x1 = _mm256_set1_epi32(A->mxx[i]), y0 = _mm256_set1_epi32(mny[i]),
                      y1 = _mm256_set1_epi32(mxy[i]), va = _mm256_set1_epi32(a);
        for (int32_t j = i + 1;; j += 8) {
            __m256i xf = _mm256_cmpgt_epi32(_mm256_loadu_si256((const __m256i *)(mnx + j)), x1);
            __m256i yf =
                _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_loadu_si256((const __m256i *)(mny + j)), y1),
                                _mm256_cmpgt_epi32(y0, _mm256_loadu_si256((const __m256i *)(mxy + j))));
            __m256i vf =
                _mm256_cmpgt_epi32(zero, _mm256_and_si256(va, _mm256_loadu_si256((const __m256i *)(id + j))));
            int fail = _mm256_movemask_ps(_mm256_castsi256_ps(xf));
            int hit =
                ~_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(_mm256_or_si256(xf, yf), vf))) & 0xFF;
            while (hit) {
                int b = __builtin_ctz((unsigned)hit);
                hit &= hit - 1;
                EMIT(real_id(a), real_id(id[j + b]));
            }
            MAYBE_FLUSH();
            if (fail) break;
        }
    }
    return true;
}
#endif

/* ---- the vtable ---------------------------------------------------------------- */

/* SAP_SIMD=0/1/2 in the environment forces scalar, SSE2 or AVX2 (for the
 * check and for measuring one form against another). */
static int pick_simd(void) {
    const char *env = getenv("SAP_SIMD");
    int want = env && *env ? atoi(env) : 2;
#if SAP_X86
    if (want >= 2 && __builtin_cpu_supports("avx2")) return 2;
    return want >= 1 ? 1 : 0;
#else
    (void)want;
    return 0;
#endif
}

static bool sap_create(bench_impl **out, const bench_setup *setup, const void *arg) {
    (void)setup, (void)arg;
    bench_impl *s = calloc(1, sizeof *s);
    *out = s;
    if (!s) return false;
    s->simd = pick_simd();
    s->S = 0;
    count_bytes(s);
    return true;
}

static bool sap_build(bench_impl *s, const qg_rect *boxes, int32_t n, bool bulk) {
    (void)bulk;
    s->nomem = !build_fresh(s, boxes, n);
    return !s->nomem;
}

static bool sap_update(bench_impl *s, const qg_rect *boxes, int32_t n) {
    bool ok = (n != s->n || s->S == 0) ? build_fresh(s, boxes, n) : update_coherent(s, boxes, n);
    count_bytes(s);
    s->nomem = !ok;
    return ok;
}

static bool sap_pairs(bench_impl *s, qg_pair_fn *fn, void *user) {
    pair_buf pb;
    pb.count = 0, pb.off_a = pb.off_b = 0, pb.fn = fn, pb.user = user;
    for (int32_t sl = 0; sl < s->S; sl++) {
        const int32_t f = s->start[sl], t = s->end[sl];
        bool go;
#if SAP_X86
        if (s->simd == 2) go = self_avx2(&s->A, f, t, &pb);
        else if (s->simd == 1) go = self_sse2(&s->A, f, t, &pb);
        else
#endif
            go = self_scalar(&s->A, f, t, &pb);
        if (!go) return true;
    }
    flush(&pb);
    return true;
}

/* Per-run widest box, for where a window query's scan starts; computed at
 * the first query after a change. */
static void widths(bench_impl *s) {
    if (!s->wdirty) return;
    double mw = 0.0;
    for (int32_t sl = 0; sl < s->S; sl++) {
        double w = 0.0;
        for (int32_t j = s->start[sl]; j < s->end[sl]; j++) {
            double d = (double)float_of(s->A.mxx[j]) - (double)float_of(s->A.mnx[j]);
            if (d > w) w = d;
        }
        s->wmax[sl] = w;
        if (w > mw) mw = w;
    }
    s->max_width = mw;
    s->wdirty = false;
}

/* The first index of [from, to) whose min_x can reach x0 (a box there has
 * min_x >= x0 - wmax; the start is rounded down, so it is conservative). */
/* The smallest key a box reaching x0 can start at, when no box is wider
 * than wmax: x0 - wmax with a margin, rounded to float, then one float
 * lower (the key order is the float order, so one float lower is key - 1);
 * conservative. */
static inline int32_t reach_key(float x0, double wmax) {
    double lo = (double)x0 - wmax * (1.0 + 1e-6) - 1e-30;
    if (!(lo > -3.4e38)) return INT32_MIN;
    int32_t k = key_of((float)lo);
    return k > INT32_MIN ? k - 1 : k;
}

/* The first index of [from, to) whose min_x can reach x0 (binary search). */
static int32_t scan_from(const int32_t *mnx, int32_t from, int32_t to, float x0, double wmax) {
    const int32_t k = reach_key(x0, wmax);
    int32_t a = from, b = to;
    while (a < b) {
        int32_t m = a + (b - a) / 2;
        if (mnx[m] < k) a = m + 1;
        else b = m;
    }
    return a;
}

/* Every box overlapping the area: the runs of the slabs from f(min_y) to
 * f(max_y); the first run's visitors are the boxes of lower slabs that
 * reach it, later runs' visitors were members of a run already read. */
static bool sap_query(bench_impl *s, qg_rect area, qg_query_fn *fn, void *user) {
    if (s->n == 0 || s->S == 0) return true;
    widths(s);
    const int32_t x0 = key_of(area.min_x), x1 = key_of(area.max_x), y0 = key_of(area.min_y),
                  y1 = key_of(area.max_y);
    const int32_t s0 = slab_of(s, area.min_y), s1 = slab_of(s, area.max_y);
    const soa *A = &s->A;
    for (int32_t sl = s0; sl <= s1; sl++)
        for (int32_t j = scan_from(A->mnx, s->start[sl], s->end[sl], area.min_x, s->wmax[sl]); A->mnx[j] <= x1;
             j++)
            if ((sl == s0 || A->id[j] >= 0) && A->mxx[j] >= x0 && A->mny[j] <= y1 && A->mxy[j] >= y0 &&
                !fn(real_id(A->id[j]), user))
                return true;
    return true;
}

static size_t sap_bytes(bench_impl *s) {
    return s->bytes;
}

static void sap_destroy(bench_impl *s) {
    if (!s) return;
    soa_free(&s->A), soa_free(&s->B);
    free(s->start), free(s->end), free(s->bcount), free(s->acount);
    free(s->wmax), free(s->arr), free(s->arr2);
    free(s);
}

static const char *sap_error(bench_impl *s) {
    return s->nomem ? "out of memory" : NULL;
}

/* ---- rays and knn: window queries with the exact tests (as sweep.c) ------------- */

typedef struct ray_ctx {
    const qg_rect *boxes;
    const bench_ray *ray;
    qg_query_fn *fn;
    void *user;
    int32_t best;
    float best_t;
} ray_ctx;

static qg_rect ray_window(const bench_ray *r) {
    float ex = r->ox + r->max_t * r->dx, ey = r->oy + r->max_t * r->dy;
    qg_rect w = {r->ox < ex ? r->ox : ex, r->oy < ey ? r->oy : ey, r->ox > ex ? r->ox : ex,
                 r->oy > ey ? r->oy : ey};
    w.min_x -= 1.0f, w.min_y -= 1.0f, w.max_x += 1.0f, w.max_y += 1.0f;
    return w;
}

static bool ray_all_cand(qg_handle i, void *user) {
    ray_ctx *c = user;
    const bench_ray *r = c->ray;
    if (qg_ray_box(c->boxes[i], r->ox, r->oy, r->dx, r->dy, r->max_t, NULL)) c->fn(i, c->user);
    return true;
}

static bool ray_closest_cand(qg_handle i, void *user) {
    ray_ctx *c = user;
    const bench_ray *r = c->ray;
    float t;
    if (qg_ray_box(c->boxes[i], r->ox, r->oy, r->dx, r->dy, r->max_t, &t) &&
        (c->best < 0 || t < c->best_t || (t == c->best_t && i < c->best)))
        c->best = i, c->best_t = t;
    return true;
}

static bool sap_ray_all(bench_impl *s, const bench_ray *ray, qg_query_fn *fn, void *user) {
    ray_ctx c = {s->boxes, ray, fn, user, -1, 0.0f};
    return sap_query(s, ray_window(ray), ray_all_cand, &c);
}

static bool sap_ray_closest(bench_impl *s, const bench_ray *ray, int32_t *hit, float *t) {
    ray_ctx c = {s->boxes, ray, NULL, NULL, -1, 0.0f};
    bool ok = sap_query(s, ray_window(ray), ray_closest_cand, &c);
    *hit = c.best;
    *t = c.best_t;
    return ok;
}

typedef struct near_ctx {
    const qg_rect *boxes;
    float x, y;
    int32_t k, count, seen;
    int32_t id[BENCH_KNN_MAX];
    float d2[BENCH_KNN_MAX];
} near_ctx;

static bool near_cand(qg_handle i, void *user) {
    near_ctx *c = user;
    c->seen++;
    float d = qg_point_box_distance2(c->boxes[i], c->x, c->y);
    int32_t j = c->count;
    if (j == c->k) {
        if (d > c->d2[j - 1] || (d == c->d2[j - 1] && i > c->id[j - 1])) return true;
        j--;
    } else {
        c->count++;
    }
    for (; j > 0 && (c->d2[j - 1] > d || (c->d2[j - 1] == d && c->id[j - 1] > i)); j--) {
        c->d2[j] = c->d2[j - 1];
        c->id[j] = c->id[j - 1];
    }
    c->d2[j] = d;
    c->id[j] = i;
    return true;
}

/* Growing squares around the point until the k-th best distance is inside
 * the square (or the square held every box), as sweep.c. */
static bool sap_nearest(bench_impl *s, float x, float y, int32_t k, int32_t *out, float *d2, int32_t *found) {
    near_ctx c;
    c.boxes = s->boxes, c.x = x, c.y = y, c.k = k;
    *found = 0;
    if (k <= 0 || k > BENCH_KNN_MAX || s->n == 0) return k >= 0 && k <= BENCH_KNN_MAX;
    widths(s);
    for (float r = 2.0f * (float)s->max_width + 1.0f;; r *= 2.0f) {
        c.count = 0, c.seen = 0;
        float m = r + 1.0f + r * 1e-5f;
        qg_rect w = {x - m, y - m, x + m, y + m};
        sap_query(s, w, near_cand, &c);
        if (c.seen == s->n || (c.count == k && c.d2[k - 1] <= r * r) || !(r < 3e38f)) break;
    }
    for (int32_t i = 0; i < c.count; i++) {
        out[i] = c.id[i];
        if (d2) d2[i] = c.d2[i];
    }
    *found = c.count;
    return true;
}

const bench_vtable bench_sap_vtable = {
    sap_create, sap_build, sap_update, sap_pairs, sap_query, sap_bytes, sap_destroy, sap_error, NULL, NULL,
    sap_ray_all, sap_ray_closest, sap_nearest,
};

/* ---- level: static tiles, moving agents ------------------------------------------
 *
 * Two sap indexes on the same slabs (learned once from tiles and agents
 * together): the tiles', built once by the radix sort and never touched
 * again, and the agents', mended every frame. Pairs are the agents' own
 * sweep plus, slab by slab, each agent entry probing the tiles' run (the
 * bipartite box pruning of the series' original code, with the static side
 * searched instead of swept), so no tile-tile pair is ever
 * looked at and a frame costs nothing per tile. A tile-agent pair is met
 * in the slab of the higher min_y, where one of the two is a member: two
 * visitors are skipped, as in the single sweep. */

struct bench_level {
    bench_impl *tiles, *agents;
    int32_t s, a;
    bool nomem;
};

static bool sapl_create(bench_level **out, const bench_setup *setup, const void *arg) {
    bench_level *l = calloc(1, sizeof *l);
    *out = l;
    if (!l) return false;
    if (!sap_create(&l->tiles, setup, arg) || !sap_create(&l->agents, setup, arg)) return false;
    l->tiles->fixed_slabs = l->agents->fixed_slabs = true;
    return true;
}

static bool sapl_build(bench_level *l, const qg_rect *tiles, int32_t s, const qg_rect *agents, int32_t a) {
    l->s = s, l->a = a;
    /* The slabs from both sets: a sample of their union. */
    qg_rect *all = malloc(((size_t)s + (size_t)a + 1) * sizeof *all);
    if (!all) return !(l->nomem = true);
    memcpy(all, tiles, (size_t)s * sizeof *all);
    memcpy(all + s, agents, (size_t)a * sizeof *all);
    double lo, hi;
    learn_slabs(l->tiles, all, s + a, &lo, &hi);
    free(all);
    l->agents->S = l->tiles->S, l->agents->y0 = l->tiles->y0, l->agents->inv_h = l->tiles->inv_h;
    bool ok = build_fresh(l->tiles, tiles, s) && build_fresh(l->agents, agents, a);
    if (ok) widths(l->tiles); /* once: the tiles never change */
    count_bytes(l->tiles), count_bytes(l->agents);
    l->nomem = !ok;
    return ok;
}

static bool sapl_update(bench_level *l, const qg_rect *agents, int32_t a) {
    bool ok = a == l->a ? update_coherent(l->agents, agents, a) : build_fresh(l->agents, agents, a);
    count_bytes(l->agents);
    l->nomem = !ok;
    return ok;
}

/* Agents G[gf, gt) against tiles T[tf, tt): the tiles never move, so
 * rather than sweeping every tile each frame (cost in the tiles), each
 * agent entry finds its first candidate tile (a tile reaching the agent's
 * min_x starts at most the run's widest tile before it), skipping 16 tiles
 * at a time, and scans to its max_x: the tiles far from every agent are
 * skipped, not tested. Full x and y tests,
 * two visitors skipped. */
/* The agents come in min_x order, so the first tile each can reach only
 * moves forward: it is advanced, 16 at a time while it can, then one by
 * one (the sentinel stops it). */
static inline int32_t advance(const int32_t *mnx, int32_t p, int32_t to, int32_t k) {
    while (p + 16 < to && mnx[p + 16] < k) p += 16;
    while (mnx[p] < k) p++;
    return p;
}

static bool probe_scalar(const soa *G, int32_t gf, int32_t gt, const soa *T, int32_t tf, int32_t tt, double twmax,
                         pair_buf *pb) {
    int32_t p = tf;
    for (int32_t i = gf; i < gt; i++) {
        const int32_t x0 = G->mnx[i], x1 = G->mxx[i], y0 = G->mny[i], y1 = G->mxy[i], a = G->id[i];
        p = advance(T->mnx, p, tt, reach_key(float_of(x0), twmax));
        for (int32_t j = p; T->mnx[j] <= x1; j++)
            if (T->mxx[j] >= x0 && T->mny[j] <= y1 && y0 <= T->mxy[j] && (a & T->id[j]) >= 0) {
                EMIT(real_id(T->id[j]), real_id(a));
                MAYBE_FLUSH();
            }
    }
    return true;
}

#if SAP_X86
__attribute__((target("avx2"))) static bool probe_avx2(const soa *G, int32_t gf, int32_t gt, const soa *T, int32_t tf,
                                                      int32_t tt, double twmax, pair_buf *pb) {
    const __m256i zero = _mm256_setzero_si256();
    int32_t p = tf;
    for (int32_t i = gf; i < gt; i++) {
        const int32_t a = G->id[i];
        p = advance(T->mnx, p, tt, reach_key(float_of(G->mnx[i]), twmax));
        const __m256i x0 = _mm256_set1_epi32(G->mnx[i]), x1 = _mm256_set1_epi32(G->mxx[i]),
                      y0 = _mm256_set1_epi32(G->mny[i]), y1 = _mm256_set1_epi32(G->mxy[i]), va = _mm256_set1_epi32(a);
        for (int32_t j = p;; j += 8) {
            __m256i xf = _mm256_cmpgt_epi32(_mm256_loadu_si256((const __m256i *)(T->mnx + j)), x1);
            __m256i bad = _mm256_or_si256(
                _mm256_or_si256(_mm256_cmpgt_epi32(x0, _mm256_loadu_si256((const __m256i *)(T->mxx + j))),
                                _mm256_cmpgt_epi32(_mm256_loadu_si256((const __m256i *)(T->mny + j)), y1)),
                _mm256_or_si256(_mm256_cmpgt_epi32(y0, _mm256_loadu_si256((const __m256i *)(T->mxy + j))),
                                _mm256_cmpgt_epi32(zero, _mm256_and_si256(va, _mm256_loadu_si256((const __m256i *)(T->id + j))))));
            int fail = _mm256_movemask_ps(_mm256_castsi256_ps(xf));
            int hit = ~_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(xf, bad))) & 0xFF;
            while (hit) {
                int b = __builtin_ctz((unsigned)hit);
                hit &= hit - 1;
                EMIT(real_id(T->id[j + b]), real_id(a));
            }
            MAYBE_FLUSH();
            if (fail) break;
        }
    }
    return true;
}
#endif

static bool sapl_pairs(bench_level *l, qg_pair_fn *fn, void *user) {
    bench_impl *T = l->tiles, *G = l->agents;
    pair_buf pb;
    pb.count = 0, pb.off_a = pb.off_b = l->s, pb.fn = fn, pb.user = user;
    /* The agents' own pairs. */
    for (int32_t sl = 0; sl < G->S; sl++) {
        const int32_t f = G->start[sl], t = G->end[sl];
        bool go;
#if SAP_X86
        if (G->simd == 2) go = self_avx2(&G->A, f, t, &pb);
        else if (G->simd == 1) go = self_sse2(&G->A, f, t, &pb);
        else
#endif
            go = self_scalar(&G->A, f, t, &pb);
        if (!go) return true;
    }
    if (!flush(&pb)) return true;
    /* Tiles against agents, emitted (tile, agent). */
    pb.off_a = 0, pb.off_b = l->s;
    const int32_t S = T->S < G->S ? T->S : G->S;
    for (int32_t sl = 0; sl < S; sl++) {
        const int32_t gf = G->start[sl], gt = G->end[sl], tf = T->start[sl], tt = T->end[sl];
        if (gf == gt || tf == tt) continue;
        bool go;
#if SAP_X86
        if (G->simd == 2) go = probe_avx2(&G->A, gf, gt, &T->A, tf, tt, T->wmax[sl], &pb);
        else
#endif
            go = probe_scalar(&G->A, gf, gt, &T->A, tf, tt, T->wmax[sl], &pb);
        if (!go) return true;
    }
    flush(&pb);
    return true;
}

static size_t sapl_bytes(bench_level *l) {
    return sizeof *l + sap_bytes(l->tiles) + sap_bytes(l->agents);
}

static void sapl_destroy(bench_level *l) {
    if (!l) return;
    sap_destroy(l->tiles), sap_destroy(l->agents);
    free(l);
}

static const char *sapl_error(bench_level *l) {
    return l->nomem ? "out of memory" : NULL;
}

const bench_level_vtable bench_sap_level_vtable = {
    sapl_create, sapl_build, sapl_update, sapl_pairs, NULL, NULL, sapl_bytes, sapl_destroy, sapl_error,
};
