// SPDX-License-Identifier: MIT
// The out-of-line part of ray_nearest_kernels.h's k-best register
// (qg_near_push, qg_near_finish): beneath the kinds, beside its header.
#include "ray_nearest_kernels.h"

/// Puts (h, d) at slot i of a heap of c->n and sifts it down: the
/// replace-the-top step of both the offer and the final sort.
static void near_sift_down(qg_near *c, int32_t i, qg_handle h, float d)
{
    const bool cached = c->k <= QG_NEAR_CACHE;
    for (;;) {
        const int32_t l = 2 * i + 1;
        if (l >= c->n)
            break;
        int32_t m = l;
        if (l + 1 < c->n && qg_near_before(qg_near_dist(c, l), c->heap[l], qg_near_dist(c, l + 1), c->heap[l + 1]))
            m = l + 1;
        if (!qg_near_before(d, h, qg_near_dist(c, m), c->heap[m]))
            break;
        c->heap[i] = c->heap[m];
        if (cached)
            c->d2[i] = c->d2[m];
        i = m;
    }
    c->heap[i] = h;
    if (cached)
        c->d2[i] = d;
}

/// Makes the c->n held a max-heap (bottom up).
static void near_heapify(qg_near *c)
{
    for (int32_t i = c->n / 2 - 1; i >= 0; --i)
        near_sift_down(c, i, c->heap[i], qg_near_dist(c, i));
}

/// The worst held, once k are held.
static inline void near_note_worst(qg_near *c)
{
    if (c->n < c->k)
        return;
    const int32_t w = c->k <= QG_NEAR_SORTED ? c->n - 1 : 0;
    c->worst = qg_near_dist(c, w);
    c->worst_h = c->heap[w];
}

void qg_near_push(qg_near *c, qg_handle h, float d)
{
    if (c->k <= QG_NEAR_SORTED) {
        // Sorted: find where (d, h) goes. An element offered before has
        // the same distance (the same box), so if held it sits just before
        // that place: one comparison instead of a scan.
        int32_t j = c->n;
        while (j > 0 && qg_near_before(d, h, c->d2[j - 1], c->heap[j - 1]))
            --j;
        if (j > 0 && c->heap[j - 1] == h)
            return;
        // Move in from the end, dropping the worst when full.
        int32_t i = c->n < c->k ? c->n++ : c->n - 1;
        for (; i > j; --i) {
            c->heap[i] = c->heap[i - 1];
            c->d2[i] = c->d2[i - 1];
        }
        c->heap[j] = h;
        c->d2[j] = d;
        near_note_worst(c);
        return;
    }
    if (!c->once)
        for (int32_t i = 0; i < c->n; ++i) // offered twice (a kind listing it in two cells)
            if (c->heap[i] == h)
                return;
    if (c->n == c->k) {
        near_sift_down(c, 0, h, d);
        near_note_worst(c);
        return;
    }
    // Appended until k are held, then made a heap at once (linear).
    const int32_t i = c->n++;
    c->heap[i] = h;
    if (c->k <= QG_NEAR_CACHE)
        c->d2[i] = d;
    if (c->n == c->k) {
        near_heapify(c);
        near_note_worst(c);
    }
}

void qg_near_scan(qg_near *c)
{
    const qg_index *index = c->index;
    c->n = 0;
    c->worst = c->max_d2;
    c->worst_h = -1;
    c->once = true;
    for (qg_handle h = 0; h < index->box_high; ++h) {
        const qg_rect b = index->boxes[h];
        if (!isnan(b.min_x))
            qg_near_offer(c, h, qg_point_box_d2_fast(b, c->x, c->y));
    }
}

int32_t qg_near_finish(qg_near *c)
{
    if (c->k <= QG_NEAR_SORTED)
        return c->n; // kept sorted
    // Heap sort in place: the worst held goes to the end, one at a time.
    if (c->n < c->k)
        near_heapify(c);
    const int32_t found = c->n;
    while (c->n > 1) {
        const int32_t last = c->n - 1;
        const qg_handle top = c->heap[0], h = c->heap[last];
        const float td = qg_near_dist(c, 0), d = qg_near_dist(c, last);
        c->n = last;
        near_sift_down(c, 0, h, d);
        c->heap[last] = top;
        if (c->k <= QG_NEAR_CACHE)
            c->d2[last] = td;
    }
    c->n = found;
    return found;
}
