// SPDX-License-Identifier: MIT
/* quadgrid-bench rays and knn (docs/workloads.md, docs/benchmarks.md).
 *
 * Both run over the boxes of `static`: frame 0 of the agents generator for N.
 * rays: R segments drawn right after the boxes (the generator goes on, as
 * static's queries do): origin ox = W*u, oy = W*u; angle a = 6.28318530718f*u;
 * direction (cosf(a), sinf(a)); length L = 256. Reported: hits and checksum
 * over every hit (all-hits mode), and the rays that hit something with the
 * checksum of each one's closest hit (smallest t, ties to the smaller box).
 * knn: Q points px = W*u, py = W*u drawn right after the boxes; the k = 8
 * nearest boxes of each by (d2, box) ascending; the checksum over all.
 *
 * Each implementation is built with its bulk step (as static), then timed
 * over all rays (all hits), all rays (closest hit) or all points, --repeat
 * passes, the median reported per ray / per point. --verify compares every
 * ray's and point's answer with a plain reference written here from the
 * definition's formulas (not the library's): rays over the sort-and-sweep
 * reference's window candidates, knn a loop over every box; it is computed
 * once per process and shared by all implementations. */
#include "bench.h"

#define RAY_LENGTH 256.0f
#define KNN_K 8

/* ------------------------------------------------------------------------ */
/* The workload's formulas, written out for the reference                   */

/* The hit test of `rays`: float, no fused multiply-add (-ffp-contract=off). */
static bool ref_ray_box(const qg_rect *b, const bench_ray *r, float *t) {
    float t0 = 0.0f, t1 = r->max_t;
    if (r->dx == 0.0f) {
        if (r->ox < b->min_x || r->ox > b->max_x) return false;
    } else {
        float inv = 1.0f / r->dx;
        float ta = (b->min_x - r->ox) * inv, tb = (b->max_x - r->ox) * inv;
        if (ta > tb) {
            float s = ta;
            ta = tb, tb = s;
        }
        t0 = ta > t0 ? ta : t0;
        t1 = tb < t1 ? tb : t1;
    }
    if (r->dy == 0.0f) {
        if (r->oy < b->min_y || r->oy > b->max_y) return false;
    } else {
        float inv = 1.0f / r->dy;
        float ta = (b->min_y - r->oy) * inv, tb = (b->max_y - r->oy) * inv;
        if (ta > tb) {
            float s = ta;
            ta = tb, tb = s;
        }
        t0 = ta > t0 ? ta : t0;
        t1 = tb < t1 ? tb : t1;
    }
    if (!(t0 <= t1)) return false;
    *t = t0;
    return true;
}

/* The distance of `knn`: ex = max(min_x - px, 0, px - max_x), ey likewise. */
static float ref_distance2(const qg_rect *b, float px, float py) {
    float ex = b->min_x - px, fx = px - b->max_x;
    float ey = b->min_y - py, fy = py - b->max_y;
    ex = fx > ex ? fx : ex;
    ey = fy > ey ? fy : ey;
    ex = ex > 0.0f ? ex : 0.0f;
    ey = ey > 0.0f ? ey : 0.0f;
    float xx = ex * ex, yy = ey * ey;
    return xx + yy;
}

/* ------------------------------------------------------------------------ */
/* The input                                                                */

typedef struct rays_input {
    qgw_agents a;
    bench_ray *rays; /* rays */
    float *px, *py;  /* knn */
} rays_input;

static void input_free(rays_input *in) {
    qgw_agents_free(&in->a);
    free(in->rays), free(in->px), free(in->py);
    memset(in, 0, sizeof *in);
}

static bool input_init(rays_input *in, bool knn, int32_t n, int32_t queries) {
    memset(in, 0, sizeof *in);
    if (!qgw_agents_init(&in->a, n)) return false;
    const float w = in->a.world;
    qgw_rng *rng = &in->a.rng; /* goes on after the boxes */
    size_t count = queries > 0 ? (size_t)queries : 1;
    if (!knn) {
        in->rays = malloc(count * sizeof *in->rays);
        if (!in->rays) return input_free(in), false;
        for (int32_t r = 0; r < queries; r++) {
            float ox = w * qgw_uniform(rng);
            float oy = w * qgw_uniform(rng);
            float ang = 6.28318530718f * qgw_uniform(rng);
            in->rays[r] = (bench_ray){ox, oy, cosf(ang), sinf(ang), RAY_LENGTH};
        }
    } else {
        in->px = malloc(count * sizeof *in->px);
        in->py = malloc(count * sizeof *in->py);
        if (!in->px || !in->py) return input_free(in), false;
        for (int32_t q = 0; q < queries; q++) {
            in->px[q] = w * qgw_uniform(rng);
            in->py[q] = w * qgw_uniform(rng);
        }
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Answers                                                                  */

/* What one implementation (or the reference) answered, per ray or point. */
typedef struct rays_answers {
    int32_t queries;
    uint32_t *hits;     /* rays: hits of ray r (all-hits mode) */
    uint64_t *sums;     /* rays: checksum of ray r's hits */
    int32_t *closest;   /* rays: closest box of ray r, -1 none */
    int32_t *near;      /* knn: near[q*K .. q*K+found[q]) */
    int32_t *found;     /* knn */
} rays_answers;

static void answers_free(rays_answers *ans) {
    free(ans->hits), free(ans->sums), free(ans->closest), free(ans->near), free(ans->found);
    memset(ans, 0, sizeof *ans);
}

static bool answers_init(rays_answers *ans, bool knn, int32_t queries) {
    memset(ans, 0, sizeof *ans);
    ans->queries = queries;
    size_t q = queries > 0 ? (size_t)queries : 1;
    if (!knn) {
        ans->hits = calloc(q, sizeof *ans->hits);
        ans->sums = calloc(q, sizeof *ans->sums);
        ans->closest = calloc(q, sizeof *ans->closest);
        if (ans->hits && ans->sums && ans->closest) return true;
    } else {
        ans->near = calloc(q * KNN_K, sizeof *ans->near);
        ans->found = calloc(q, sizeof *ans->found);
        if (ans->near && ans->found) return true;
    }
    answers_free(ans);
    return false;
}

/* The totals the workload reports. */
typedef struct rays_totals {
    uint64_t hits, checksum;                  /* rays all-hits; knn: results, checksum */
    uint64_t closest_rays, closest_checksum;  /* rays closest mode */
} rays_totals;

static rays_totals totals_of(bool knn, const rays_answers *ans) {
    rays_totals t = {0, 0, 0, 0};
    for (int32_t q = 0; q < ans->queries; q++) {
        if (!knn) {
            t.hits += ans->hits[q];
            t.checksum += ans->sums[q];
            if (ans->closest[q] >= 0) {
                t.closest_rays++;
                t.closest_checksum += qgw_pair_term(q, ans->closest[q]);
            }
        } else {
            for (int32_t i = 0; i < ans->found[q]; i++) {
                t.hits++;
                t.checksum += qgw_pair_term(q, ans->near[(size_t)q * KNN_K + (size_t)i]);
            }
        }
    }
    return t;
}

/* ------------------------------------------------------------------------ */
/* The reference: computed once per process, shared by every implementation */

static struct {
    bool valid, knn;
    int32_t n, queries;
    rays_answers ans;
} ref;

typedef struct ref_ray_ctx {
    const qg_rect *boxes;
    const bench_ray *ray;
    int32_t ray_index;
    uint32_t hits;
    uint64_t sum;
    int32_t best;
    float best_t;
} ref_ray_ctx;

static bool ref_ray_candidate(qg_handle i, void *user) {
    ref_ray_ctx *c = user;
    float t;
    if (!ref_ray_box(&c->boxes[i], c->ray, &t)) return true;
    c->hits++;
    c->sum += qgw_pair_term(c->ray_index, i);
    if (c->best < 0 || t < c->best_t || (t == c->best_t && i < c->best)) c->best = i, c->best_t = t;
    return true;
}

static bool reference(bool knn, const rays_input *in, int32_t queries) {
    if (ref.valid && ref.knn == knn && ref.n == in->a.n && ref.queries == queries) return true;
    answers_free(&ref.ans);
    ref.valid = false;
    if (!answers_init(&ref.ans, knn, queries)) return false;
    const qg_rect *boxes = in->a.boxes;
    const int32_t n = in->a.n;
    if (!knn) {
        /* Candidates: the boxes overlapping the segment's bounding box
         * widened by 1 (a box the float test accepts is within rounding of
         * the segment, far less than 1), from the sort-and-sweep reference. */
        qgw_sweep sweep = {0};
        if (!qgw_sweep_sort(&sweep, boxes, n)) return false;
        for (int32_t r = 0; r < queries; r++) {
            const bench_ray *ray = &in->rays[r];
            float ex = ray->ox + ray->max_t * ray->dx, ey = ray->oy + ray->max_t * ray->dy;
            qg_rect w = {fminf(ray->ox, ex) - 1.0f, fminf(ray->oy, ey) - 1.0f, fmaxf(ray->ox, ex) + 1.0f,
                         fmaxf(ray->oy, ey) + 1.0f};
            ref_ray_ctx c = {boxes, ray, r, 0, 0, -1, 0.0f};
            qgw_sweep_query(&sweep, w, ref_ray_candidate, &c);
            ref.ans.hits[r] = c.hits;
            ref.ans.sums[r] = c.sum;
            ref.ans.closest[r] = c.best;
        }
        qgw_sweep_free(&sweep);
    } else {
        /* A loop over every box, keeping the k best by (d2, box). */
        for (int32_t q = 0; q < queries; q++) {
            int32_t id[KNN_K];
            float d2[KNN_K];
            int32_t count = 0;
            const float px = in->px[q], py = in->py[q];
            for (int32_t i = 0; i < n; i++) {
                float d = ref_distance2(&boxes[i], px, py);
                if (count == KNN_K && !(d < d2[KNN_K - 1])) continue; /* ties: i is larger */
                int32_t j = count < KNN_K ? count++ : KNN_K - 1;
                for (; j > 0 && d2[j - 1] > d; j--) d2[j] = d2[j - 1], id[j] = id[j - 1];
                d2[j] = d, id[j] = i;
            }
            ref.ans.found[q] = count;
            memcpy(&ref.ans.near[(size_t)q * KNN_K], id, (size_t)count * sizeof *id);
        }
    }
    ref.valid = true, ref.knn = knn, ref.n = n, ref.queries = queries;
    return true;
}

/* ------------------------------------------------------------------------ */
/* The cross-check                                                          */

enum { MAX_RESULTS = 64 };

static struct {
    const char *name;
    bool knn;
    rays_totals t;
} results[MAX_RESULTS];
static int result_count;

int bench_rays_cross_check(void) {
    if (result_count < 2) return 0;
    const rays_totals *a = &results[0].t;
    int bad = 0;
    for (int i = 1; i < result_count; i++) {
        const rays_totals *b = &results[i].t;
        if (b->hits != a->hits || b->checksum != a->checksum || b->closest_rays != a->closest_rays ||
            b->closest_checksum != a->closest_checksum) {
            note("MISMATCH: %s gives %" PRIu64 " %s checksum %016" PRIx64 " (closest: %" PRIu64
                  " rays, checksum %016" PRIx64 "), %s gives %" PRIu64 " checksum %016" PRIx64
                  " (closest: %" PRIu64 " rays, checksum %016" PRIx64 ")",
                  results[i].name, b->hits, results[i].knn ? "results" : "hits", b->checksum, b->closest_rays,
                  b->closest_checksum, results[0].name, a->hits, a->checksum, a->closest_rays,
                  a->closest_checksum);
            bad = 1;
        }
    }
    if (!bad) {
        if (results[0].knn)
            note("all %d implementations agree: results %" PRIu64 ", checksum %016" PRIx64, result_count,
                  a->hits, a->checksum);
        else
            note("all %d implementations agree: hits %" PRIu64 ", checksum %016" PRIx64 "; closest: %" PRIu64
                  " rays, checksum %016" PRIx64,
                  result_count, a->hits, a->checksum, a->closest_rays, a->closest_checksum);
    }
    return bad ? 2 : 0;
}

/* ------------------------------------------------------------------------ */
/* One implementation                                                       */

typedef struct ray_sum {
    int32_t ray;
    uint32_t hits;
    uint64_t sum;
} ray_sum;

static bool add_hit(qg_handle box, void *user) {
    ray_sum *s = user;
    s->hits++;
    s->sum += qgw_pair_term(s->ray, box);
    return true;
}

static uint64_t median_u64(uint64_t *v, int32_t count) {
    qsort(v, (size_t)count, sizeof *v, cmp_u64);
    return count % 2 ? v[count / 2] : (v[count / 2 - 1] + v[count / 2]) / 2;
}

static uint64_t per_query(uint64_t ns, int32_t queries) {
    return queries > 0 ? (ns + (uint64_t)queries / 2) / (uint64_t)queries : 0;
}

/* The first ray or point whose answer differs from the reference's. */
static int compare(const bench_rays_options *o, const bench_peer *p, const rays_input *in,
                   const rays_answers *got) {
    for (int32_t q = 0; q < o->queries; q++) {
        if (!o->knn) {
            const bench_ray *r = &in->rays[q];
            if (got->hits[q] != ref.ans.hits[q] || got->sums[q] != ref.ans.sums[q]) {
                note("MISMATCH: %s, rays n=%d, ray %d (origin %.9g %.9g, direction %.9g %.9g): %u hits "
                      "checksum %016" PRIx64 ", reference %u hits checksum %016" PRIx64,
                      p->name, in->a.n, q, (double)r->ox, (double)r->oy, (double)r->dx, (double)r->dy,
                      got->hits[q], got->sums[q], ref.ans.hits[q], ref.ans.sums[q]);
                return 2;
            }
            if (got->closest[q] != ref.ans.closest[q]) {
                note("MISMATCH: %s, rays n=%d, ray %d (origin %.9g %.9g, direction %.9g %.9g): closest box "
                      "%d, reference %d",
                      p->name, in->a.n, q, (double)r->ox, (double)r->oy, (double)r->dx, (double)r->dy,
                      got->closest[q], ref.ans.closest[q]);
                return 2;
            }
        } else {
            const int32_t *g = &got->near[(size_t)q * KNN_K], *w = &ref.ans.near[(size_t)q * KNN_K];
            bool same = got->found[q] == ref.ans.found[q];
            for (int32_t i = 0; same && i < got->found[q]; i++) same = g[i] == w[i];
            if (!same) {
                char gs[160] = "", ws[160] = "";
                for (int32_t i = 0; i < got->found[q] && i < KNN_K; i++)
                    snprintf(gs + strlen(gs), sizeof gs - strlen(gs), " %d", g[i]);
                for (int32_t i = 0; i < ref.ans.found[q] && i < KNN_K; i++)
                    snprintf(ws + strlen(ws), sizeof ws - strlen(ws), " %d", w[i]);
                note("MISMATCH: %s, knn n=%d, point %d (%.9g %.9g): boxes%s, reference%s", p->name, in->a.n, q,
                      (double)in->px[q], (double)in->py[q], gs, ws);
                return 2;
            }
        }
    }
    return 0;
}

int bench_rays_run(const bench_rays_options *o, const bench_peer *p) {
    const char *wl = o->knn ? "knn" : "rays";
    if (o->knn ? !p->vt->nearest : !p->vt->ray_all || !p->vt->ray_closest) {
        note("skipping %s: it has no %s", p->name, o->knn ? "nearest-neighbour search" : "ray casts");
        return 0;
    }
    rays_input in;
    if (!input_init(&in, o->knn, o->n, o->queries)) return note("out of memory for %d boxes", o->n), 1;
    rays_answers got;
    const int32_t repeat = o->repeat > 0 ? o->repeat : 1;
    uint64_t *pass_ns = calloc((size_t)repeat, sizeof *pass_ns);
    if (!answers_init(&got, o->knn, o->queries) || !pass_ns) {
        input_free(&in);
        free(pass_ns);
        return note("out of memory for the answers"), 1;
    }
    int rc = 0;
    bench_impl *impl = NULL;
    if (o->verify && !reference(o->knn, &in, o->queries)) {
        rc = 1;
        note("out of memory for the reference");
        goto out;
    }

    bench_setup setup = *o->tune;
    setup.bounds = qgw_agents_bounds(&in.a);
    setup.n = in.a.n;
    setup.jobs = NULL;
    uint64_t t0 = qgw_now_ns();
    if (!p->vt->create(&impl, &setup, p->arg)) {
        rc = impl_failed(p, impl, "create");
        goto out;
    }
    if (!p->vt->build(impl, in.a.boxes, in.a.n, true)) {
        rc = impl_failed(p, impl, "build");
        goto out;
    }
    const double build_ms = (double)(qgw_now_ns() - t0) / 1e6;

    uint64_t all_ns = 0, closest_ns = 0, knn_ns = 0;
    /* Each mode: `repeat` timed passes over every ray or point, the answers
     * of the last kept (every pass gives the same). */
    for (int mode = 0; mode < (o->knn ? 1 : 2); mode++) {
        for (int32_t pass = 0; pass < repeat; pass++) {
            uint64_t s0 = qgw_now_ns();
            bool ok = true;
            if (o->knn) {
                for (int32_t q = 0; q < o->queries && ok; q++)
                    ok = p->vt->nearest(impl, in.px[q], in.py[q], KNN_K, &got.near[(size_t)q * KNN_K], NULL,
                                        &got.found[q]);
            } else if (mode == 0) {
                for (int32_t r = 0; r < o->queries && ok; r++) {
                    ray_sum s = {r, 0, 0};
                    ok = p->vt->ray_all(impl, &in.rays[r], add_hit, &s);
                    got.hits[r] = s.hits;
                    got.sums[r] = s.sum;
                }
            } else {
                for (int32_t r = 0; r < o->queries && ok; r++) {
                    float t;
                    ok = p->vt->ray_closest(impl, &in.rays[r], &got.closest[r], &t);
                }
            }
            pass_ns[pass] = qgw_now_ns() - s0;
            if (!ok) {
                rc = impl_failed(p, impl, o->knn ? "nearest" : mode == 0 ? "ray cast (all hits)" : "ray cast (closest)");
                goto out;
            }
        }
        uint64_t ns = per_query(median_u64(pass_ns, repeat), o->queries);
        if (o->knn)
            knn_ns = ns;
        else if (mode == 0)
            all_ns = ns;
        else
            closest_ns = ns;
    }

    if (o->verify && (rc = compare(o, p, &in, &got)) != 0) goto out;

    rays_totals t = totals_of(o->knn, &got);
    if (o->knn) {
        field fs[] = {
            FS("workload", wl),  FS("kind", p->name),        FI("n", in.a.n),          FI("queries", o->queries),
            FI("threads", 1),    FI("k", KNN_K),              FD("build_ms", build_ms), FI("query_ns", knn_ns),
            FI("results", t.hits), FH("checksum", t.checksum),
        };
        emit_line((out_format)o->format, o->knn ? W_KNN : W_RAYS, fs, (int)(sizeof fs / sizeof fs[0]));
    } else {
        field fs[] = {
            FS("workload", wl),
            FS("kind", p->name),
            FI("n", in.a.n),
            FI("queries", o->queries),
            FI("threads", 1),
            FD("build_ms", build_ms),
            FI("ray_ns", all_ns),
            FI("closest_ns", closest_ns),
            FI("hits", t.hits),
            FH("checksum", t.checksum),
            FI("closest_rays", t.closest_rays),
            FH("closest_checksum", t.closest_checksum),
        };
        emit_line((out_format)o->format, o->knn ? W_KNN : W_RAYS, fs, (int)(sizeof fs / sizeof fs[0]));
    }
    if (result_count < MAX_RESULTS) {
        results[result_count].name = p->name;
        results[result_count].knn = o->knn;
        results[result_count].t = t;
        result_count++;
    }

out:
    if (impl) p->vt->destroy(impl);
    answers_free(&got);
    free(pass_ns);
    input_free(&in);
    return rc;
}
