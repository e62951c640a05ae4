// SPDX-License-Identifier: MIT
// Ray casts and nearest neighbours: the public calls, their argument checks,
// the exact tests every kind shares (qg_ray_box, qg_point_box_distance2),
// and the forms a kind without its own traversal gets, built on its
// rectangle query.
//
// Generic ray cast: the segment is cut into pieces about four typical
// elements long, each piece's bounding box is queried near to far, and an
// element is reported only by the piece its entry parameter t falls in, so
// it is reported once without any memory of what was seen. Closest-hit
// callbacks shrink max_t, and the pieces past it are never queried.
//
// Generic nearest: a square around the point is queried, growing 4x until
// it holds k elements all nearer than its inscribed circle (or max_distance
// or every element); the k best so far live in the caller's handles array
// as a max-heap keyed by (distance2, handle), distances recomputed from the
// base's boxes, so the call never allocates.
#include "static_filters_events/engine.h"
#include "ray_nearest_kernels.h"

/// The generic forms' query: the kind's elements, then the static layer's.
static void query_all(const qg_index *index, qg_rect area, qg_query_fn *fn, void *user, qg_query_stats *stats)
{
    if (index->count > 0)
        index->klass->query(index, area, fn, user, stats);
    qg_engine_query(index, area, fn, user, stats);
}

/// True when the engine's layers hold elements: the kinds' own traversals
/// see only their structure, so the generic forms (over all) answer.
static bool has_layer(const qg_index *index)
{
    return qg_engine_holds(index);
}

/// A slab parameter (side - o) / d where the float formula overflows: the
/// float product when it is finite (so a side shared by a cell and an
/// element gives both the same parameter), else the quotient in double,
/// which neither overflows nor meets inf * 0 for finite coordinates (a
/// difference up to 2 FLT_MAX over a direction down to FLT_TRUE_MIN stays
/// far inside double's range).
static inline double ray_param(float side, float o, float d, float inv)
{
    const float p = (side - o) * inv;
    if (p - p == 0.0f)
        return p;
    return ((double)side - (double)o) / (double)d;
}

// Declared in queries.h (what it answers and why).
bool qg_ray_slabs_wide(qg_rect box, float ox, float oy, float dx, float dy, float ix, float iy, float max_t,
                       float *t0, float *t1)
{
    double a = 0.0, b = max_t;
    if (dx == 0.0f) {
        if (ox < box.min_x || ox > box.max_x)
            return false;
    } else {
        double ta = ray_param(box.min_x, ox, dx, ix), tb = ray_param(box.max_x, ox, dx, ix);
        if (ta > tb) {
            const double s = ta;
            ta = tb;
            tb = s;
        }
        a = ta > a ? ta : a;
        b = tb < b ? tb : b;
    }
    if (dy == 0.0f) {
        if (oy < box.min_y || oy > box.max_y)
            return false;
    } else {
        double ta = ray_param(box.min_y, oy, dy, iy), tb = ray_param(box.max_y, oy, dy, iy);
        if (ta > tb) {
            const double s = ta;
            ta = tb;
            tb = s;
        }
        a = ta > a ? ta : a;
        b = tb < b ? tb : b;
    }
    if (!(a <= b))
        return false;
    *t0 = (float)a;
    *t1 = (float)b;
    return true;
}

bool qg_ray_box(qg_rect box, float ox, float oy, float dx, float dy, float max_t, float *t)
{
    float t0;
    if (!qg_ray_box_fast(box, ox, oy, dx, dy, max_t, &t0))
        return false;
    if (t != NULL)
        *t = t0;
    return true;
}

float qg_point_box_distance2(qg_rect box, float x, float y)
{
    return qg_point_box_d2_fast(box, x, y);
}

/* ---- ray casts ---------------------------------------------------------- */

typedef struct ray_ctx {
    const qg_index *index;
    float ox, oy, dx, dy;
    float max_t;       ///< current, as the callback left it
    float lo, hi;      ///< this piece owns entry parameters [lo, hi) ([lo, hi] for the last)
    bool last, stop;
    qg_ray_fn *fn;
    void *user;
} ray_ctx;

static bool ray_candidate(qg_handle h, void *user)
{
    ray_ctx *r = user;
    float t;
    if (r->stop)
        return false; // the static layer's share after a stop
    if (!qg_ray_box_fast(qg_element_box(r->index, h), r->ox, r->oy, r->dx, r->dy, r->max_t, &t))
        return true;
    if (t < r->lo || (t >= r->hi && !r->last))
        return true; // another piece reports it
    const float m = r->fn(h, t, r->user);
    if (!(m >= 0.0f)) {
        r->stop = true;
        return false;
    }
    r->max_t = m < r->max_t ? m : r->max_t;
    return true;
}

/// The box of the segment between parameters a and b, widened by a hair
/// for rounding in the points and in the entry parameters. In double: a
/// parameter up to FLT_MAX times a direction up to FLT_MAX, or a far end
/// past FLT_MAX, is exact enough there and never inf - inf. The box is
/// clipped to +-FLT_MAX (no element reaches past it); false when nothing
/// of it is left, so there is nothing to query.
static bool ray_piece(const ray_ctx *r, double a, double b, qg_rect *out)
{
    const double ax = r->ox + a * r->dx, ay = r->oy + a * r->dy;
    const double bx = r->ox + b * r->dx, by = r->oy + b * r->dy;
    // An entry parameter under FLT_MIN is rounded to a multiple of
    // FLT_TRUE_MIN: a few of them times the direction is the hair that adds.
    const double ex = 1e-5 * (fabs(ax) + fabs(bx) + fabs((double)r->ox)) + 1e-30 + 4.0 * FLT_TRUE_MIN * fabs((double)r->dx);
    const double ey = 1e-5 * (fabs(ay) + fabs(by) + fabs((double)r->oy)) + 1e-30 + 4.0 * FLT_TRUE_MIN * fabs((double)r->dy);
    const double x0 = (ax < bx ? ax : bx) - ex, x1 = (ax < bx ? bx : ax) + ex;
    const double y0 = (ay < by ? ay : by) - ey, y1 = (ay < by ? by : ay) + ey;
    if (x0 > FLT_MAX || x1 < -FLT_MAX || y0 > FLT_MAX || y1 < -FLT_MAX)
        return false;
    // The widening above covers float's rounding to nearest here.
    out->min_x = x0 < -FLT_MAX ? -FLT_MAX : (float)x0;
    out->min_y = y0 < -FLT_MAX ? -FLT_MAX : (float)y0;
    out->max_x = x1 > FLT_MAX ? FLT_MAX : (float)x1;
    out->max_y = y1 > FLT_MAX ? FLT_MAX : (float)y1;
    return true;
}

static void ray_generic(const qg_index *index, float ox, float oy, float dx, float dy, float max_t, qg_ray_fn *fn,
                        void *user)
{
    ray_ctx r = {index, ox, oy, dx, dy, max_t, 0.0f, 0.0f, false, false, fn, user};
    qg_query_stats stats = {0, 0};
    // In double: a float dx * dx underflows to 0 for |dx| under 1e-23 (the
    // ray would be cast as a point) and overflows past 1.8e19.
    const double len = sqrt((double)dx * dx + (double)dy * dy);
    if (len == 0.0) {
        // A point: every box holding the origin, at t = 0. (With max_t 0 and
        // a direction, the slab parameters of a box beside the origin may
        // round to 0: the piece [0, 0] below, widened, finds those.)
        r.last = true;
        query_all(index, (qg_rect){ox, oy, ox, oy}, ray_candidate, &r, &stats);
        return;
    }
    // Pieces about four typical elements long (the config says how big
    // elements are), at most 4,096 of them over the finite part; past the
    // bounds' diagonal one last piece reaches to max_t (it may be infinite).
    // The finite part ends by FLT_MAX, so every piece's ends are floats: an
    // entry parameter past it is inf, and the last piece owns it.
    const qg_rect b = index->config.bounds;
    float typical = index->config.element_size > 0.0f ? index->config.element_size : qg_rect_extent(b) / 64.0f;
    if (!(typical > 0.0f))
        typical = 1.0f;
    const double reach = fabs((double)ox - b.min_x) + fabs((double)ox - b.max_x) + fabs((double)oy - b.min_y) +
                         fabs((double)oy - b.max_y);
    double finite = reach / len;
    if (finite > max_t)
        finite = max_t;
    if (finite > FLT_MAX)
        finite = FLT_MAX;
    finite = (float)finite;
    double step = 4.0 * typical / len;
    if (finite / step > 4096.0)
        step = finite / 4096.0;
    const int32_t pieces = finite > 0.0 ? (int32_t)ceil(finite / step) : 0;
    qg_rect q;
    for (int32_t i = 0; i < pieces && !r.stop; ++i) {
        r.lo = (float)(step * i);
        r.hi = i + 1 == pieces ? (float)finite : (float)(step * (i + 1));
        if (r.lo > r.max_t)
            return;
        r.last = i + 1 == pieces && finite >= max_t;
        if (ray_piece(&r, r.lo, r.hi < r.max_t ? r.hi : r.max_t, &q))
            query_all(index, q, ray_candidate, &r, &stats);
    }
    if (r.stop || (pieces > 0 && finite >= max_t))
        return;
    // The rest, [finite, max_t]: its box may reach to the float range's end.
    r.lo = pieces > 0 ? (float)finite : 0.0f;
    r.hi = r.max_t;
    r.last = true;
    if (r.lo > r.max_t)
        return;
    if (isinf(r.max_t)) {
        // A start past the float range was reached going outward on that
        // axis, and the ray only goes farther: nothing is left to hit.
        if (!ray_piece(&r, r.lo, r.lo, &q))
            return;
        q.min_x = dx < 0.0f ? -FLT_MAX : q.min_x;
        q.max_x = dx > 0.0f ? FLT_MAX : q.max_x;
        q.min_y = dy < 0.0f ? -FLT_MAX : q.min_y;
        q.max_y = dy > 0.0f ? FLT_MAX : q.max_y;
    } else if (!ray_piece(&r, r.lo, r.max_t, &q)) {
        return;
    }
    query_all(index, q, ray_candidate, &r, &stats);
}

/// A ray whose arithmetic stays far from float's ends: an origin within
/// 2^100, each direction component 0 or within 2^-40 .. 2^40, a finite
/// segment's reach within 2^100. The kinds' own walks step cells and nodes
/// in float and double parameters that are exact there; a ray outside it
/// (from near +-FLT_MAX, along a subnormal or huge direction) takes the
/// generic form, whose pieces are computed in double and bounded in number
/// (4,096), so it is exact by qg_ray_box and costs at most a few thousand
/// queries.
static bool ray_plain(float ox, float oy, float dx, float dy, float max_t)
{
    const float far = 0x1p100f, big = 0x1p40f, small = 0x1p-40f;
    const float ax = fabsf(dx), ay = fabsf(dy), m = ax > ay ? ax : ay;
    if (!(fabsf(ox) <= far && fabsf(oy) <= far))
        return false;
    if ((ax != 0.0f && (ax < small || ax > big)) || (ay != 0.0f && (ay < small || ay > big)))
        return false;
    return isinf(max_t) || (double)max_t * m <= (double)far;
}

qg_status qg_raycast(const qg_index *index, float ox, float oy, float dx, float dy, float max_t, qg_ray_fn *fn,
                     void *user)
{
    if (index == NULL || fn == NULL || !isfinite(ox) || !isfinite(oy) || !isfinite(dx) || !isfinite(dy) ||
        isnan(max_t) || max_t < 0.0f)
        return QG_ERR_INVALID;
    if (qg_live_count(index) == 0)
        return QG_OK;
    if (index->klass->raycast != NULL && !has_layer(index) && ray_plain(ox, oy, dx, dy, max_t))
        index->klass->raycast(index, ox, oy, dx, dy, max_t, fn, user);
    else
        ray_generic(index, ox, oy, dx, dy, max_t, fn, user);
    return QG_OK;
}

/* ---- nearest ------------------------------------------------------------ */

typedef struct near_query {
    qg_near *near;
    int32_t seen; ///< elements the query reported
} near_query;

static bool near_candidate(qg_handle h, void *user)
{
    near_query *q = user;
    q->seen++;
    qg_near_offer(q->near, h, qg_point_box_d2_fast(qg_element_box(q->near->index, h), q->near->x, q->near->y));
    return true;
}

static int32_t nearest_generic(const qg_index *index, float x, float y, int32_t k, float max_d2, qg_handle *handles)
{
    qg_near c;
    qg_near_start(&c, index, x, y, k, max_d2, handles);
    c.box = qg_element_box; // the engine's layers hold elements too
    c.once = true; // the kind's query and the engine's report each element once
    float r = index->config.element_size > 0.0f ? 2.0f * index->config.element_size
                                                 : qg_rect_extent(index->config.bounds) / 64.0f;
    if (!(r > 0.0f))
        r = 1.0f;
    for (;;) {
        near_query q = {&c, 0};
        c.n = 0;
        c.worst = max_d2;
        c.worst_h = -1;
        qg_query_stats stats = {0, 0};
        const qg_rect area = {x - r, y - r, x + r, y + r};
        query_all(index, area, near_candidate, &q, &stats);
        // Done when nothing outside the square can enter: the square holds
        // every element, or an element outside it, whose gap to the point
        // is past the square's on some axis, has a distance2 (as the float
        // formula rounds it) past the bound: max_distance2 or the k-th
        // best held, strictly, as a tie may still win on its handle. The
        // bound on the formula is taken in float (qg_near_floor2): in a
        // subnormal world every distance2 underflows to 0 and ties, however
        // far the square reaches in exact terms.
        if (q.seen == qg_live_count(index) || isinf(r))
            break;
        const double gap = fmin(fmin((double)area.max_x - x, (double)x - area.min_x),
                                fmin((double)area.max_y - y, (double)y - area.min_y));
        if (qg_near_floor2(gap) > qg_near_bound(&c))
            break;
        r *= 4.0f;
    }
    return qg_near_finish(&c);
}

qg_status qg_nearest(const qg_index *index, float x, float y, int32_t k, float max_distance2, qg_handle *handles,
                     float *distances2, int32_t *found)
{
    if (found != NULL)
        *found = 0;
    if (index == NULL || found == NULL || !isfinite(x) || !isfinite(y) || k < 0 || isnan(max_distance2) ||
        max_distance2 < 0.0f || (handles == NULL && k > 0))
        return QG_ERR_INVALID;
    if (k == 0 || qg_live_count(index) == 0)
        return QG_OK;
    const int32_t n = index->klass->nearest != NULL && !has_layer(index)
                          ? index->klass->nearest(index, x, y, k, max_distance2, handles, distances2)
                          : nearest_generic(index, x, y, k, max_distance2, handles);
    if (distances2 != NULL)
        for (int32_t i = 0; i < n; ++i)
            distances2[i] = qg_point_box_distance2(qg_element_box(index, handles[i]), x, y);
    *found = n;
    return QG_OK;
}
