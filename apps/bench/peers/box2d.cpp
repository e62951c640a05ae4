// SPDX-License-Identifier: MIT
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

#include <box2d/b2_broad_phase.h>
#include <box2d/b2_dynamic_tree.h>

#include <cstdint>
#include <new>
#include <utility>
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

// ---- level: b2BroadPhase and a contact list, as b2World keeps them ---------
//
// One b2BroadPhase holds every proxy, as in b2World: a tile's proxy is created
// once and never moved (a static body's fixture), an agent's is moved every
// frame with MoveProxy and its displacement (b2Body::SynchronizeFixtures).
// b2BroadPhase::UpdatePairs reports only pairs that involve a proxy whose fat
// box changed since the last call: Box2D is built around a persistent contact
// list, and this peer keeps one exactly as b2ContactManager does:
// - AddPair (from UpdatePairs): no contact between two static proxies
//   (b2Body::ShouldCollide: at least one body must be dynamic); none if the
//   pair already has one (found by walking the contact edges of one of the
//   two, as b2ContactManager::AddPair walks bodyB's edges); else a new one.
// - Collide (every frame, after UpdatePairs): a contact whose fat boxes no
//   longer overlap (b2BroadPhase::TestOverlap) is destroyed; every other one
//   gets the narrow phase, here the workload's exact box test.
// Every current pair is then a contact (a pair whose fat boxes started to
// overlap has a proxy whose fat box changed, which UpdatePairs queried), so
// the touching contacts are exactly the workload's pairs. Events come from
// the contacts' touching flags (b2Contact::Update's BeginContact and
// EndContact); a destroyed contact that touched ends. TouchProxy would make
// UpdatePairs report every pair of the touched proxies again, but not once
// each (its duplicate test reads the moved flag, which TouchProxy does not
// set), and b2World never relies on it for this.
//
// Units: Box2D is tuned for meters (its FAQ: moving objects between 0.1 and
// 10 m; the fat margin b2_aabbExtension is 0.1 m, the displacement
// prediction b2_aabbMultiplier 4 times a step's motion), and asks users of
// other units to scale. This peer gives it the level in meters of one tile:
// every coordinate times 1/16, a power of two, so the boxes Box2D sees are
// the workload's exactly, scaled (agents 0.125-0.5 m moving 2-7.5 m/s at
// 60 steps a second). The exact test reads the workload's own boxes.

namespace {

constexpr float kMetersPerUnit = 1.0f / 16.0f;

b2AABB to_meters(const qg_rect &r) {
    b2AABB a;
    a.lowerBound.Set(r.min_x * kMetersPerUnit, r.min_y * kMetersPerUnit);
    a.upperBound.Set(r.max_x * kMetersPerUnit, r.max_y * kMetersPerUnit);
    return a;
}

struct B2Contact {
    int32_t e[2];          // the two elements, e[0] < e[1]
    int32_t next[2], prev[2];  // edges of e[0] and of e[1]: edge = 2*contact + side
    bool touching;
};

struct B2Level {
    b2BroadPhase bp;
    std::vector<int32_t> proxy_of;  // element -> proxy
    std::vector<qg_rect> prev;      // agents' last boxes, for the displacement
    std::vector<int32_t> head;      // element -> its first contact edge, -1 none
    std::vector<B2Contact> contacts;
    const qg_rect *tiles = nullptr, *agents = nullptr;
    int32_t s = 0, a = 0;
    const char *err = nullptr;

    const qg_rect &box(int32_t i) const { return i < s ? tiles[i] : agents[i - s]; }

    void link(int32_t c) {
        for (int side = 0; side < 2; side++) {
            B2Contact &k = contacts[static_cast<size_t>(c)];
            int32_t &h = head[static_cast<size_t>(k.e[side])];
            k.prev[side] = -1;
            k.next[side] = h;
            if (h >= 0) contacts[static_cast<size_t>(h >> 1)].prev[h & 1] = 2 * c + side;
            h = 2 * c + side;
        }
    }

    void unlink(int32_t c) {
        B2Contact &k = contacts[static_cast<size_t>(c)];
        for (int side = 0; side < 2; side++) {
            const int32_t p = k.prev[side], n = k.next[side];
            if (p >= 0) contacts[static_cast<size_t>(p >> 1)].next[p & 1] = n;
            else head[static_cast<size_t>(k.e[side])] = n;
            if (n >= 0) contacts[static_cast<size_t>(n >> 1)].prev[n & 1] = p;
        }
    }

    // Removes contact c; the last contact takes its place (its edges renamed).
    void destroy(int32_t c) {
        unlink(c);
        const int32_t last = static_cast<int32_t>(contacts.size()) - 1;
        if (c != last) {
            contacts[static_cast<size_t>(c)] = contacts[static_cast<size_t>(last)];
            B2Contact &k = contacts[static_cast<size_t>(c)];
            for (int side = 0; side < 2; side++) {
                const int32_t p = k.prev[side], n = k.next[side];
                if (p >= 0) contacts[static_cast<size_t>(p >> 1)].next[p & 1] = 2 * c + side;
                else head[static_cast<size_t>(k.e[side])] = 2 * c + side;
                if (n >= 0) contacts[static_cast<size_t>(n >> 1)].prev[n & 1] = 2 * c + side;
            }
        }
        contacts.pop_back();
    }

    // b2ContactManager::AddPair.
    void AddPair(void *user_a, void *user_b) {
        int32_t i = static_cast<int32_t>(reinterpret_cast<intptr_t>(user_a));
        int32_t j = static_cast<int32_t>(reinterpret_cast<intptr_t>(user_b));
        if (i < s && j < s) return;  // two static bodies never collide
        if (i > j) std::swap(i, j);
        for (int32_t e = head[static_cast<size_t>(j)]; e >= 0;) {
            const B2Contact &k = contacts[static_cast<size_t>(e >> 1)];
            if (k.e[0] == i && k.e[1] == j) return;  // a contact exists
            e = k.next[e & 1];
        }
        B2Contact k;
        k.e[0] = i, k.e[1] = j;
        k.touching = false;
        contacts.push_back(k);
        link(static_cast<int32_t>(contacts.size()) - 1);
    }
};

B2Level *b2l(bench_level *l) {
    return reinterpret_cast<B2Level *>(l);
}

bool b2l_create(bench_level **out, const bench_setup *, const void *) {
    B2Level *s = new (std::nothrow) B2Level;
    *out = reinterpret_cast<bench_level *>(s);
    return s != nullptr;
}

bool b2l_build(bench_level *l, const qg_rect *tiles, int32_t s, const qg_rect *agents, int32_t a) {
    B2Level *b = b2l(l);
    try {
        b->tiles = tiles, b->agents = agents, b->s = s, b->a = a;
        b->proxy_of.resize(static_cast<size_t>(s) + static_cast<size_t>(a));
        b->head.assign(static_cast<size_t>(s) + static_cast<size_t>(a), -1);
        b->prev.assign(agents, agents + a);
        for (int32_t i = 0; i < s + a; i++)
            b->proxy_of[static_cast<size_t>(i)] =
                b->bp.CreateProxy(to_meters(b->box(i)), reinterpret_cast<void *>(static_cast<intptr_t>(i)));
        // The first step's FindNewContacts: every proxy is new.
        b->bp.UpdatePairs(b);
    } catch (...) {
        b->err = "out of memory";
        return false;
    }
    return true;
}

bool b2l_update(bench_level *l, const qg_rect *agents, int32_t a) {
    B2Level *b = b2l(l);
    b->agents = agents;
    for (int32_t k = 0; k < a; k++) {
        qg_rect &old = b->prev[static_cast<size_t>(k)];
        const qg_rect &box = agents[k];
        b2Vec2 d((box.min_x - old.min_x) * kMetersPerUnit, (box.min_y - old.min_y) * kMetersPerUnit);
        b->bp.MoveProxy(b->proxy_of[static_cast<size_t>(b->s + k)], to_meters(box), d);
        old = box;
    }
    return true;
}

// FindNewContacts, then Collide: fn(i, j) for each touching contact
// (pairs), or began/ended on the touching flag's changes (events).
bool b2l_collide(bench_level *l, qg_pair_fn *fn, qg_pair_fn *began, qg_pair_fn *ended, void *user) {
    B2Level *b = b2l(l);
    try {
        b->bp.UpdatePairs(b);
    } catch (...) {
        b->err = "out of memory";
        return false;
    }
    for (int32_t c = 0; c < static_cast<int32_t>(b->contacts.size());) {
        B2Contact &k = b->contacts[static_cast<size_t>(c)];
        const int32_t i = k.e[0], j = k.e[1];
        if (!b->bp.TestOverlap(b->proxy_of[static_cast<size_t>(i)], b->proxy_of[static_cast<size_t>(j)])) {
            if (k.touching && ended) ended(i, j, user);
            b->destroy(c);
            continue;
        }
        const bool touching = qgw_overlap(&b->box(i), &b->box(j));
        if (fn) {
            if (touching) fn(i, j, user);
        } else if (touching != k.touching) {
            if (touching && began) began(i, j, user);
            if (!touching && ended) ended(i, j, user);
        }
        k.touching = touching;
        c++;
    }
    return true;
}

bool b2l_pairs(bench_level *l, qg_pair_fn *fn, void *user) {
    return b2l_collide(l, fn, nullptr, nullptr, user);
}

bool b2l_events(bench_level *l, qg_pair_fn *began, qg_pair_fn *ended, void *user) {
    return b2l_collide(l, nullptr, began, ended, user);
}

size_t b2l_bytes(bench_level *) {
    return 0;  // the bench measures the heap
}

void b2l_destroy(bench_level *l) {
    delete b2l(l);
}

const char *b2l_error(bench_level *l) {
    return b2l(l)->err;
}

}  // namespace

extern "C" const bench_level_vtable bench_box2d_level_vtable = {
    b2l_create, b2l_build, b2l_update, b2l_pairs, b2l_events, nullptr, b2l_bytes, b2l_destroy, b2l_error,
};
