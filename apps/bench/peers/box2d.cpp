// Box2D 2.4's b2DynamicTree (the tree inside b2BroadPhase) behind the bench's
// C interface. The fat margin b2_aabbExtension is a compile-time constant of
// the installed library, so the tree is driven exactly as b2BroadPhase drives
// it (MoveProxy with the displacement, which also enlarges by
// b2_aabbMultiplier * displacement), and every candidate is checked with the
// workload's exact float test so the answers equal quadgrid's.
//
// All pairs every frame: each element queries the tree with its own tight box
// and keeps the partners with a larger index. b2BroadPhase itself queries only
// proxies whose fat box changed, because Box2D keeps contacts alive between
// frames; the workload asks for every overlapping pair each frame instead.
#include "peer.h"

#include <box2d/b2_dynamic_tree.h>

#include <cstdint>
#include <new>
#include <vector>

#include "workload.h"

struct bench_impl {
    b2DynamicTree tree;
    std::vector<int32_t> proxy_of;  // agent -> proxy id
    std::vector<qg_rect> prev;      // last boxes given, for the displacement
    const qg_rect *boxes = nullptr;
    int32_t n = 0;
    const char *err = nullptr;
};

namespace {

b2AABB to_aabb(const qg_rect &r) {
    b2AABB a;
    a.lowerBound.Set(r.min_x, r.min_y);
    a.upperBound.Set(r.max_x, r.max_y);
    return a;
}

int32_t agent_of(const b2DynamicTree &tree, int32_t proxy) {
    return static_cast<int32_t>(reinterpret_cast<intptr_t>(tree.GetUserData(proxy)));
}

struct PairCollector {
    const bench_impl *self;
    qg_pair_fn *fn;
    void *user;
    int32_t i;
    bool stopped;

    bool QueryCallback(int32_t proxy) {
        int32_t j = agent_of(self->tree, proxy);
        if (j <= i || !qgw_overlap(&self->boxes[i], &self->boxes[j])) return true;
        if (!fn(i, j, user)) stopped = true;
        return !stopped;
    }
};

struct QueryCollector {
    const bench_impl *self;
    qg_query_fn *fn;
    void *user;
    qg_rect area;
    bool stopped;

    bool QueryCallback(int32_t proxy) {
        int32_t j = agent_of(self->tree, proxy);
        if (!qgw_overlap(&area, &self->boxes[j])) return true;
        if (!fn(j, user)) stopped = true;
        return !stopped;
    }
};

bool b2_create(bench_impl **out, const bench_setup *setup, const void *) {
    bench_impl *s = new (std::nothrow) bench_impl;
    *out = s;
    if (!s) return false;
    try {
        s->proxy_of.reserve(static_cast<size_t>(setup->n));
        s->prev.reserve(static_cast<size_t>(setup->n));
    } catch (...) {
        s->err = "out of memory";
        return false;
    }
    return true;
}

bool b2_build(bench_impl *s, const qg_rect *boxes, int32_t n, bool bulk) {
    try {
        s->proxy_of.resize(static_cast<size_t>(n));
        s->prev.assign(boxes, boxes + n);
    } catch (...) {
        s->err = "out of memory";
        return false;
    }
    for (int32_t i = 0; i < n; i++) {
        s->proxy_of[static_cast<size_t>(i)] =
            s->tree.CreateProxy(to_aabb(boxes[i]), reinterpret_cast<void *>(static_cast<intptr_t>(i)));
    }
    // No bulk step: b2DynamicTree::RebuildBottomUp searches all node pairs at
    // every merge (cubic in the proxy count), which is unusable at this size.
    (void)bulk;
    s->boxes = boxes;
    s->n = n;
    return true;
}

bool b2_update(bench_impl *s, const qg_rect *boxes, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        qg_rect &old = s->prev[static_cast<size_t>(i)];
        const qg_rect &box = boxes[i];
        b2Vec2 d(box.min_x - old.min_x, box.min_y - old.min_y);
        s->tree.MoveProxy(s->proxy_of[static_cast<size_t>(i)], to_aabb(box), d);
        old = box;
    }
    s->boxes = boxes;
    return true;
}

bool b2_pairs(bench_impl *s, qg_pair_fn *fn, void *user) {
    PairCollector c{s, fn, user, 0, false};
    for (int32_t i = 0; i < s->n && !c.stopped; i++) {
        c.i = i;
        s->tree.Query(&c, to_aabb(s->boxes[i]));
    }
    return true;
}

bool b2_query(bench_impl *s, qg_rect area, qg_query_fn *fn, void *user) {
    QueryCollector c{s, fn, user, area, false};
    s->tree.Query(&c, to_aabb(area));
    return true;
}

// Rays: b2DynamicTree::RayCast from p1 = origin to p2 = origin +
// max_t*direction. Its traversal (fat-box overlap with the segment's box, then
// the separating-axis test, both in float) reaches the leaves; the callback
// applies the workload's float test (qg_ray_box). The tree's leaves are fat
// by b2_aabbExtension, so its pruning is conservative. All hits: the callback
// returns the input's maxFraction (go on, no clipping). Closest hit: it
// returns the fraction of the best t so far plus a little slack, and the
// tree clips the segment there (elements at the same t, which the tie-break
// needs, still reach the callback; 0 would stop the cast, so the slack also
// keeps a hit at t = 0 from ending it).
constexpr float kRaySlack = 0.01f;

struct RayAll {
    const bench_impl *self;
    const bench_ray *ray;
    qg_query_fn *fn;
    void *user;

    float RayCastCallback(const b2RayCastInput &input, int32_t proxy) {
        int32_t j = agent_of(self->tree, proxy);
        if (qg_ray_box(self->boxes[j], ray->ox, ray->oy, ray->dx, ray->dy, ray->max_t, nullptr)) fn(j, user);
        return input.maxFraction;
    }
};

struct RayClosest {
    const bench_impl *self;
    const bench_ray *ray;
    int32_t best;
    float best_t;

    float RayCastCallback(const b2RayCastInput &input, int32_t proxy) {
        int32_t j = agent_of(self->tree, proxy);
        float t;
        if (qg_ray_box(self->boxes[j], ray->ox, ray->oy, ray->dx, ray->dy, ray->max_t, &t) &&
            (best < 0 || t < best_t || (t == best_t && j < best))) {
            best = j;
            best_t = t;
            float f = (t + kRaySlack) / ray->max_t;
            return f < input.maxFraction ? f : input.maxFraction;
        }
        return input.maxFraction;
    }
};

b2RayCastInput ray_input(const bench_ray *r) {
    b2RayCastInput in;
    in.p1.Set(r->ox, r->oy);
    in.p2.Set(r->ox + r->max_t * r->dx, r->oy + r->max_t * r->dy);
    in.maxFraction = 1.0f;
    return in;
}

bool b2_ray_all(bench_impl *s, const bench_ray *ray, qg_query_fn *fn, void *user) {
    if (!(ray->max_t > 0.0f) || (ray->dx == 0.0f && ray->dy == 0.0f)) {
        s->err = "Box2D casts need a segment of non-zero length";
        return false;
    }
    RayAll c{s, ray, fn, user};
    s->tree.RayCast(&c, ray_input(ray));
    return true;
}

bool b2_ray_closest(bench_impl *s, const bench_ray *ray, int32_t *hit, float *t) {
    if (!(ray->max_t > 0.0f) || (ray->dx == 0.0f && ray->dy == 0.0f)) {
        s->err = "Box2D casts need a segment of non-zero length";
        return false;
    }
    RayClosest c{s, ray, -1, 0.0f};
    s->tree.RayCast(&c, ray_input(ray));
    *hit = c.best;
    *t = c.best_t;
    return true;
}

size_t b2_bytes(bench_impl *) {
    return 0;  // the tree's capacity is private; the bench measures the heap
}

void b2_destroy(bench_impl *s) {
    delete s;
}

const char *b2_error(bench_impl *s) {
    return s->err;
}

}  // namespace

extern "C" const bench_vtable bench_box2d_vtable = {
    b2_create, b2_build, b2_update, b2_pairs, b2_query, b2_bytes, b2_destroy, b2_error, nullptr, nullptr,
    b2_ray_all, b2_ray_closest, nullptr,
};
