// SPDX-License-Identifier: MIT
// The grid family's ray casts and nearest searches.
#ifndef QG_GRID_RAYS_H
#define QG_GRID_RAYS_H

#include "rows.h"

/* ---- ray casts and nearest searches (issue 13) --------------------------- */
// Both walk unwrapped cells (so a segment or ring that wraps round the torus
// meets each wrapped cell once per unwrapped copy) clipped to the reach, and
// fall back to one pass over every wrapped cell when the walk would visit
// more cells than the torus has: exact either way, and never slower than
// that pass by more than a constant.
//
// Rounding: a point v maps to cell floor(v * inv - org); the world lines of
// the cells are computed in double as (u + org) / inv. The two disagree by
// a few float ulps of |v| and of the world's centre (org / inv), so every
// band and every distance bound is widened by gr_hair, 1e-5 of those
// magnitudes (about a hundred ulps): a point is always inside the widened
// box of the cell it maps to.

/// |v| when finite, else 0 (a hair is taken from the finite coordinates
/// involved; an infinite end is clipped to the reach anyway).
static inline double gr_fin(double v)
{
    return isfinite(v) ? fabs(v) : 0.0;
}

/// World coordinate of unwrapped cell line u on the axis whose centre is
/// `org` cells: the inverse of gr_map, in double.
static inline double gr_line(const gr_grid *g, int64_t u, float org)
{
    return ((double)u + (double)org) / (double)g->inv;
}

/// The widening that covers gr_map's rounding near coordinates of magnitude
/// `a` on an axis whose centre is `org` cells.
static inline double gr_hair(const gr_grid *g, double a, float org)
{
    return 1e-5 * (a + fabs((double)org / (double)g->inv)) + 1e-30;
}

/// The elements of wrapped cell x of `row`, visited as unwrapped cell
/// (ux, uy): each hit element is reported only when P, the hit point
/// clamped into its box, maps to (ux, uy). P lies in the box, so (gr_map
/// being monotonic) P's cell is one of the box's cells and the element is
/// listed there; P lies on the segment up to rounding, so the widened walk
/// visits P's unwrapped cell; and that cell is one: each element is
/// reported once, with no visited set, however often the walk meets its
/// wrapped cells. P does not depend on max_t, so every visit agrees.
static inline bool gr_ray_cell(const gr_grid *g, const gr_row *row, int32_t x, int32_t ux, int32_t uy,
                               const qg_rect *boxes, qg_ray *r)
{
    // The hit test with the ray's inverses (computed once per cast): the
    // same roundings as qg_ray_box, so the same answers bit for bit.
    for (int32_t e = row->cells[x]; e >= 0; e = row->nodes[e].next) {
        const qg_handle h = row->nodes[e].element;
        const qg_rect b = boxes[h];
        float t0, t1;
        if (!qg_ray_span(r, b, &t0, &t1))
            continue;
        const float t = t0;
        const float mx = t * r->dx, my = t * r->dy;
        float px = r->dx == 0.0f ? r->ox : r->ox + mx, py = r->dy == 0.0f ? r->oy : r->oy + my;
        px = px < b.min_x ? b.min_x : (px > b.max_x ? b.max_x : px);
        py = py < b.min_y ? b.min_y : (py > b.max_y ? b.max_y : py);
        if (gr_map(px, g->inv, g->org[0]) != ux || gr_map(py, g->inv, g->org[1]) != uy)
            continue;
        if (!qg_ray_report(r, h, t))
            return false;
    }
    return true;
}

/// The fallback of a ray whose walk would be longer than the torus: every
/// element is tested once, in the wrapped cell of its box's min corner.
static inline void gr_ray_scan(const gr_grid *g, const qg_rect *boxes, qg_ray *r)
{
    for (int32_t y = 0; y < g->nrows; ++y) {
        const gr_row *row = &g->rows[y];
        if (row->cells == NULL || row->live == 0)
            continue;
        for (int32_t x = 0; x < g->cols; ++x) {
            for (int32_t e = row->cells[x]; e >= 0; e = row->nodes[e].next) {
                const qg_handle h = row->nodes[e].element;
                const qg_rect b = boxes[h];
                float t;
                if (!qg_ray_box_fast(b, r->ox, r->oy, r->dx, r->dy, r->max_t, &t))
                    continue;
                const gr_ibox ib = gr_map_box(g, b);
                if ((ib.x0 & g->mx) == x && (ib.y0 & g->my) == y && !qg_ray_report(r, h, t))
                    return;
            }
        }
    }
}

/// Unwrapped cell of the double coordinate v (rounded to float, then
/// gr_map: the widenings are far wider than that rounding).
static inline int32_t gr_map_d(const gr_grid *g, double v, float org)
{
    return gr_map((float)v, g->inv, org);
}

/// Cells of a ray walk gathered before their elements are tested: the
/// boxes sit at random places in the base's array, so each test is a cache
/// miss; a first pass over a batch's lists prefetches them all, so the
/// misses overlap instead of following one another.
#define GR_RAY_BATCH 16

typedef struct gr_ray_cellref {
    const gr_row *row;
    int32_t x, ux, uy;
    double te; ///< a ray: where it enters the cell's widened box; a nearest search: its distance2
} gr_ray_cellref;

/// Prefetches the boxes of the batch's lists. The lists' nodes lie
/// scattered in their rows' arrays (in insertion order), so each list is a
/// chain of dependent misses: the chains advance one node each in turn, so
/// the batch's chains miss at the same time rather than one after another.
static inline void gr_prefetch_lists(const gr_ray_cellref *batch, int n, const qg_rect *boxes)
{
    int32_t cur[GR_RAY_BATCH];
    for (int i = 0; i < n; ++i)
        cur[i] = batch[i].row->cells[batch[i].x];
    for (bool more = true; more;) {
        more = false;
        for (int i = 0; i < n; ++i) {
            const int32_t e = cur[i];
            if (e < 0)
                continue;
            const qg_enode node = batch[i].row->nodes[e];
            GR_PREFETCH(&boxes[node.element]);
            cur[i] = node.next;
            more = true;
        }
    }
}

/// Tests the batch's cells in walk order, skipping those entered past the
/// current max_t (strictly: ties are seen). False when the cast stopped.
static inline bool gr_ray_flush(const gr_grid *g, const gr_ray_cellref *batch, int n, const qg_rect *boxes, qg_ray *r)
{
    gr_prefetch_lists(batch, n, boxes);
    for (int i = 0; i < n; ++i)
        if (!(batch[i].te > (double)r->max_t) &&
            !gr_ray_cell(g, batch[i].row, batch[i].x, batch[i].ux, batch[i].uy, boxes, r))
            return false;
    return true;
}

/// qg_raycast for both grids: the wide list tested in full, then the rows
/// the segment crosses in the direction of dy, each row's cells in the
/// direction of dx, both clipped to the reach and widened by the hair (a
/// cell lists every element overlapping it: no margin). A row whose
/// widened band the segment enters past max_t ends the walk, a cell past it
/// ends its row (strictly past: ties are seen), so closest-hit casts stop
/// near their hit.
static inline void gr_raycast(const gr_grid *g, const qg_index *index, qg_ray *r)
{
    const qg_rect *boxes = index->boxes;
    for (int32_t i = 0; i < g->wide_count; ++i)
        if (!qg_ray_offer(r, g->wide[i], boxes[g->wide[i]]))
            return;
    const gr_ibox re = g->reach;
    if (re.x0 > re.x1)
        return;
    const double ox = r->ox, oy = r->oy;
    // The segment's extent (an infinite max_t gives an infinite end).
    const double xe = r->dx == 0.0f ? ox : ox + (double)r->max_t * r->dx;
    const double ye = r->dy == 0.0f ? oy : oy + (double)r->max_t * r->dy;
    const double xl = fmin(ox, xe), xh = fmax(ox, xe), yl = fmin(oy, ye), yh = fmax(oy, ye);
    const double hx = gr_hair(g, fabs(ox) + gr_fin(xl) + gr_fin(xh), g->org[0]);
    const double hy = gr_hair(g, fabs(oy) + gr_fin(yl) + gr_fin(yh), g->org[1]);
    int32_t y0 = gr_map_d(g, yl - hy, g->org[1]), y1 = gr_map_d(g, yh + hy, g->org[1]);
    int32_t x0 = gr_map_d(g, xl - hx, g->org[0]), x1 = gr_map_d(g, xh + hx, g->org[0]);
    y0 = y0 > re.y0 ? y0 : re.y0;
    y1 = y1 < re.y1 ? y1 : re.y1;
    x0 = x0 > re.x0 ? x0 : re.x0;
    x1 = x1 < re.x1 ? x1 : re.x1;
    if (y0 > y1 || x0 > x1)
        return;
    // About rows + columns cells, plus the hair's columns on every row:
    // past the torus's cell count one pass over the torus is cheaper.
    const double rows = (double)y1 - y0 + 1, cols = (double)x1 - x0 + 1;
    // A component so small that its inverse overflows leaves the rows'
    // column ranges undecided (from the origin on): count them all.
    const bool tiny = (r->dx != 0.0f && isinf(1.0f / r->dx)) || (r->dy != 0.0f && isinf(1.0f / r->dy));
    const double walk = tiny ? rows * cols : rows + cols + rows * (2.0 * hx * g->inv + 2.0);
    if (walk > (double)g->cols * g->nrows) {
        gr_ray_scan(g, boxes, r);
        return;
    }
    // Batches of 2, 4, 8, then 16 cells: a closest-hit cast, which mostly
    // ends in its first cells, prefetches little past its hit.
    gr_ray_cellref batch[GR_RAY_BATCH];
    int n = 0, lim = 2;
    qg_ray unbounded = *r; // band entries unclipped by max_t, to end the walk
    unbounded.max_t = INFINITY;
    const int32_t sy = r->dy < 0.0f ? -1 : 1, sx = r->dx < 0.0f ? -1 : 1;
    for (int32_t i = 0, uy = sy > 0 ? y0 : y1; i <= y1 - y0; ++i, uy += sy) {
        const gr_row *row = &g->rows[uy & g->my];
        if (row->cells == NULL || row->live == 0)
            continue;
        const double bl = gr_line(g, uy, g->org[1]), bh = gr_line(g, (int64_t)uy + 1, g->org[1]);
        const double hb = gr_hair(g, fabs(bl) + fabs(bh) + fabs(oy), g->org[1]);
        qg_rect band = {-INFINITY, (float)(bl - hb), INFINITY, (float)(bh + hb)};
        if (uy <= -(int32_t)GR_REACH)
            band.min_y = -INFINITY; // the clamped end cells reach to infinity
        if (uy >= (int32_t)GR_REACH)
            band.max_y = INFINITY;
        float ta, tb;
        if (!qg_ray_span(&unbounded, band, &ta, &tb))
            continue;
        if (ta > r->max_t)
            break; // the next rows' bands are entered later still
        tb = tb < r->max_t ? tb : r->max_t;
        // An entry at infinity (an overflowed inverse) says nothing of x:
        // the row is walked from the origin's column on.
        const double xa = r->dx == 0.0f || !isfinite(ta) ? ox : ox + (double)ta * r->dx;
        const double xb = r->dx == 0.0f ? ox : ox + (double)tb * r->dx;
        const double cl = fmin(xa, xb), ch = fmax(xa, xb);
        const double hc = gr_hair(g, fabs(ox) + gr_fin(cl) + gr_fin(ch), g->org[0]);
        int32_t c0 = gr_map_d(g, cl - hc, g->org[0]), c1 = gr_map_d(g, ch + hc, g->org[0]);
        c0 = c0 > re.x0 ? c0 : re.x0;
        c1 = c1 < re.x1 ? c1 : re.x1;
        for (int32_t m = 0, ux = sx > 0 ? c0 : c1; m <= c1 - c0; ++m, ux += sx) {
            const int32_t x = ux & g->mx;
            if (row->cells[x] < 0)
                continue;
            double te = ta;
            // The clamped end column on the side the walk comes from reaches
            // to infinity (as the end rows' bands do): a segment that starts
            // beyond its nominal edge is inside it from t = 0.
            const bool open = sx > 0 ? ux <= -(int32_t)GR_REACH : ux >= (int32_t)GR_REACH;
            if (r->dx != 0.0f && !open) {
                // The segment enters this (widened) column at tc: past
                // max_t, so are the columns after it.
                const double edge = sx > 0 ? gr_line(g, ux, g->org[0]) - hc : gr_line(g, (int64_t)ux + 1, g->org[0]) + hc;
                const double tc = (edge - ox) / r->dx;
                if (tc > (double)r->max_t)
                    break;
                te = tc > te ? tc : te;
            }
            batch[n++] = (gr_ray_cellref){row, x, ux, uy, te};
            if (n == lim) {
                if (!gr_ray_flush(g, batch, n, boxes, r))
                    return;
                n = 0;
                lim = lim * 2 < GR_RAY_BATCH ? lim * 2 : GR_RAY_BATCH;
            }
        }
    }
    gr_ray_flush(g, batch, n, boxes, r);
}

/// Offers the elements of wrapped cell x of `row`, visited as unwrapped
/// cell (ux, uy), that this cell reports: those whose box's point Q nearest
/// the query maps to (ux, uy). Q lies in the box, so (gr_map being
/// monotonic) its unwrapped cell is in the box's range, in the reach, and
/// lists it; Q's cell is no farther than the element, so the walk visits
/// it while the element can still enter: each element is offered once,
/// with no visited set, however many cells list it. The test runs only for
/// an element the bound lets in. Returns the nodes walked.
static inline int32_t gr_near_cell(const gr_grid *g, const gr_row *row, int32_t x, int32_t ux, int32_t uy,
                                   const qg_rect *boxes, qg_near *c)
{
    int32_t walked = 0;
    for (int32_t e = row->cells[x]; e >= 0; e = row->nodes[e].next, ++walked) {
        const qg_handle h = row->nodes[e].element;
        const qg_rect b = boxes[h];
        const float d = qg_point_box_d2_fast(b, c->x, c->y);
        if (!(d <= c->max_d2) || (c->n == c->k && !qg_near_before(d, h, c->worst, c->worst_h)))
            continue;
        const float qx = c->x < b.min_x ? b.min_x : (c->x > b.max_x ? b.max_x : c->x);
        const float qy = c->y < b.min_y ? b.min_y : (c->y > b.max_y ? b.max_y : c->y);
        if (gr_map(qx, g->inv, g->org[0]) != ux || gr_map(qy, g->inv, g->org[1]) != uy)
            continue;
        qg_near_push(c, h, d);
    }
    return walked;
}

/// Offers the elements of the batch's cells, their boxes prefetched first
/// (as a ray's, gr_prefetch_lists). Returns 0, the batch's new size.
/// The cells go nearest first (te holds their widened box's distance2):
/// the heap then fills with near elements early, later offers are refused
/// at the first comparison, and a cell past the bound ends the batch.
static inline int gr_near_flush(const gr_grid *g, gr_ray_cellref *batch, int n, const qg_rect *boxes, qg_near *c,
                                int64_t *work)
{
    gr_prefetch_lists(batch, n, boxes);
    for (int a = 1; a < n; ++a) { // insertion sort: at most GR_RAY_BATCH cells
        const gr_ray_cellref v = batch[a];
        int b = a;
        for (; b > 0 && batch[b - 1].te > v.te; --b)
            batch[b] = batch[b - 1];
        batch[b] = v;
    }
    for (int i = 0; i < n; ++i) {
        if (batch[i].te > (double)qg_near_bound(c))
            break;
        *work += gr_near_cell(g, batch[i].row, batch[i].x, batch[i].ux, batch[i].uy, boxes, c);
    }
    return 0;
}

/// Adds unwrapped cell (ux, uy) to the batch unless it is empty or its
/// widened box is farther than the bound: an element that could still
/// enter has its nearest point in a cell no farther than that, and is
/// listed there. Flushes a full batch.
static inline void gr_near_visit(const gr_grid *g, int64_t ux, int64_t uy, const qg_rect *boxes, qg_near *c,
                                 gr_ray_cellref *batch, int *n, int64_t *work)
{
    const gr_row *row = &g->rows[uy & g->my];
    const int32_t x = (int32_t)(ux & g->mx);
    if (row->cells == NULL || row->cells[x] < 0)
        return;
    const double l = gr_line(g, ux, g->org[0]), rr = gr_line(g, ux + 1, g->org[0]);
    const double b = gr_line(g, uy, g->org[1]), t = gr_line(g, uy + 1, g->org[1]);
    double ex = fmax(l - c->x, c->x - rr) - gr_hair(g, fabs(l) + fabs(rr) + fabs(c->x), g->org[0]);
    double ey = fmax(b - c->y, c->y - t) - gr_hair(g, fabs(b) + fabs(t) + fabs(c->y), g->org[1]);
    // The end cells of the clamp reach to infinity.
    if (ux <= -(int64_t)GR_REACH || ux >= (int64_t)GR_REACH)
        ex = 0.0;
    if (uy <= -(int64_t)GR_REACH || uy >= (int64_t)GR_REACH)
        ey = 0.0;
    // The floor of the formula's rounding (a subnormal world's distances2
    // underflow to ties at 0: a double square would prune those ties).
    const float d2 = qg_near_floor2_xy(ex, ey);
    if (d2 > qg_near_bound(c))
        return;
    batch[(*n)++] = (gr_ray_cellref){row, x, (int32_t)ux, (int32_t)uy, d2};
    if (*n == GR_RAY_BATCH)
        *n = gr_near_flush(g, batch, *n, boxes, c, work);
}

/// qg_nearest for both grids: the wide list, then rings of unwrapped cells
/// around the point's cell, clipped to the reach, until the next ring is
/// farther than qg_near_bound (strictly: a tie may win on its handle) or
/// the rings hold the reach. An element's nearest point lies in one of its
/// cells (gr_map is monotonic), at least as far from the point as that
/// cell's ring: so every element that can enter is offered. When the rings
/// would pass the torus's cell count, one pass over every cell finishes.
static inline int32_t gr_nearest(const gr_grid *g, const qg_index *index, float x, float y, int32_t k,
                                 float max_d2, qg_handle *handles)
{
    const qg_rect *boxes = index->boxes;
    qg_near c;
    qg_near_start(&c, index, x, y, k, max_d2, handles);
    c.once = true; // each element from one cell only (gr_near_cell)
    for (int32_t i = 0; i < g->wide_count; ++i)
        qg_near_offer(&c, g->wide[i], qg_point_box_d2_fast(boxes[g->wide[i]], x, y));
    const gr_ibox re = g->reach;
    if (re.x0 > re.x1)
        return qg_near_finish(&c);
    const int64_t qx = gr_map(x, g->inv, g->org[0]), qy = gr_map(y, g->inv, g->org[1]);
    // The first ring that meets the reach.
    int64_t r0 = 0;
    r0 = re.x0 - qx > r0 ? re.x0 - qx : r0;
    r0 = qx - re.x1 > r0 ? qx - re.x1 : r0;
    r0 = re.y0 - qy > r0 ? re.y0 - qy : r0;
    r0 = qy - re.y1 > r0 ? qy - re.y1 : r0;
    // Past the budget (rings over a sparse or skewed reach, long boxes
    // listed in thousands of cells), one pass over every box finishes.
    const int64_t budget = qg_near_budget(index) + g->wide_count;
    int64_t seen = g->wide_count;
    gr_ray_cellref batch[GR_RAY_BATCH];
    int n = 0;
    for (int64_t r = r0;; ++r) {
        if (r > 0) {
            // Cells of this ring and beyond lie outside the square of the
            // rings before it: their distance is at least the square's
            // nearest side that has reach cells beyond it.
            double lo = INFINITY;
            bool more = false;
            if (re.x0 < qx - r + 1) {
                const double e = gr_line(g, qx - r + 1, g->org[0]);
                lo = fmin(lo, x - e - gr_hair(g, fabs(e) + fabs(x), g->org[0]));
                more = true;
            }
            if (re.x1 > qx + r - 1) {
                const double e = gr_line(g, qx + r, g->org[0]);
                lo = fmin(lo, e - x - gr_hair(g, fabs(e) + fabs(x), g->org[0]));
                more = true;
            }
            if (re.y0 < qy - r + 1) {
                const double e = gr_line(g, qy - r + 1, g->org[1]);
                lo = fmin(lo, y - e - gr_hair(g, fabs(e) + fabs(y), g->org[1]));
                more = true;
            }
            if (re.y1 > qy + r - 1) {
                const double e = gr_line(g, qy + r, g->org[1]);
                lo = fmin(lo, e - y - gr_hair(g, fabs(e) + fabs(y), g->org[1]));
                more = true;
            }
            if (!more || qg_near_floor2(lo) > qg_near_bound(&c) || qg_near_all(&c))
                break;
        }
        // The ring's cells inside the reach: rows qy - r and qy + r, then
        // columns qx - r and qx + r between them.
        const int64_t ax = qx - r > re.x0 ? qx - r : re.x0, bx = qx + r < re.x1 ? qx + r : re.x1;
        const int64_t ay = qy - r + 1 > re.y0 ? qy - r + 1 : re.y0, by = qy + r - 1 < re.y1 ? qy + r - 1 : re.y1;
        const bool bottom = qy - r >= re.y0 && qy - r <= re.y1, top = r > 0 && qy + r >= re.y0 && qy + r <= re.y1;
        const bool left = qx - r >= re.x0 && qx - r <= re.x1, right = r > 0 && qx + r >= re.x0 && qx + r <= re.x1;
        const int64_t w = bx >= ax ? bx - ax + 1 : 0, hgt = by >= ay ? by - ay + 1 : 0;
        seen += 1 + (bottom + top) * w + (left + right) * hgt; // a ring costs a step even where the reach is thin
        if (seen > budget) {
            qg_near_scan(&c);
            return qg_near_finish(&c);
        }
        for (int64_t ux = ax; ux <= bx; ++ux) {
            if (bottom)
                gr_near_visit(g, ux, qy - r, boxes, &c, batch, &n, &seen);
            if (top)
                gr_near_visit(g, ux, qy + r, boxes, &c, batch, &n, &seen);
        }
        for (int64_t uy = ay; uy <= by; ++uy) {
            if (left)
                gr_near_visit(g, qx - r, uy, boxes, &c, batch, &n, &seen);
            if (right)
                gr_near_visit(g, qx + r, uy, boxes, &c, batch, &n, &seen);
        }
        // The next ring's bound needs this ring's offers; the first ring
        // (mostly the point's own cell, too few elements to fill the heap)
        // shares its batch with the next.
        if (r > r0)
            n = gr_near_flush(g, batch, n, boxes, &c, &seen);
    }
    (void)gr_near_flush(g, batch, n, boxes, &c, &seen);
    return qg_near_finish(&c);
}

#endif
