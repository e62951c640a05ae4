// SPDX-License-Identifier: MIT
// Boost.Geometry's R-tree (boost::geometry::index::rtree, header-only) behind
// the bench's C interface: float boxes with the element index as value, the
// quadratic split with 16 elements a node. The bulk build (static, rays,
// knn) is the packing constructor (Boost's STR-like bulk load); otherwise
// elements are inserted one at a time, and an update removes and re-inserts
// each element whose box changed.
//
// Pairs: each element queries the tree with its own box and keeps the
// partners with a larger index (the R-tree has no all-pairs call). Window
// queries: bgi::intersects. Every candidate is checked with the workload's
// exact float test before it counts.
//
// Nearest: bgi::nearest(point, m), Boost's own best-first search, ordered by
// its comparable distance (computed in its own arithmetic). The adapter
// computes the workload's distance (qg_point_box_distance2) for the m
// candidates and sorts them by (d2, element). Boost's answer is complete for
// the first k when the k-th exact d2 is below Boost's m-th distance by more
// than the rounding of either: every element left out is at least as far in
// Boost's measure. Otherwise m doubles and the search runs again.
//
// No ray casts: the R-tree's segment predicate uses Boost's own
// segment-box test, not a traversal with a callback the workload's test
// could be put behind.
#include "peer.h"

#include <boost/geometry.hpp>
#include <boost/geometry/geometries/box.hpp>
#include <boost/geometry/geometries/point.hpp>
#include <boost/geometry/index/rtree.hpp>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <new>
#include <utility>
#include <vector>

#include "workload.h"

namespace bg = boost::geometry;
namespace bgi = boost::geometry::index;

namespace {

using Point = bg::model::point<float, 2, bg::cs::cartesian>;
using Box = bg::model::box<Point>;
using Value = std::pair<Box, int32_t>;
using Tree = bgi::rtree<Value, bgi::quadratic<16>>;

Box to_box(const qg_rect &r) {
    return Box(Point(r.min_x, r.min_y), Point(r.max_x, r.max_y));
}

// Calls f(value) for each value the query reaches, without a result vector.
template <typename F>
struct CallOut {
    using iterator_category = std::output_iterator_tag;
    using value_type = void;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = void;
    F *f;
    CallOut &operator*() { return *this; }
    CallOut &operator++() { return *this; }
    CallOut &operator++(int) { return *this; }
    CallOut &operator=(const Value &v) {
        (*f)(v);
        return *this;
    }
};

template <typename F>
CallOut<F> call_out(F &f) {
    return CallOut<F>{&f};
}

}  // namespace

struct bench_impl {
    Tree tree;
    std::vector<qg_rect> boxes;  // the boxes last given (the tree's values)
    std::vector<Value> found;    // nearest: Boost's candidates
    std::vector<std::pair<float, int32_t>> ranked;
    const char *err = nullptr;
};

namespace {

bool br_create(bench_impl **out, const bench_setup *setup, const void *) {
    bench_impl *s = new (std::nothrow) bench_impl;
    *out = s;
    if (!s) return false;
    try {
        s->boxes.reserve(static_cast<size_t>(setup->n > 0 ? setup->n : 0));
    } catch (...) {
        s->err = "out of memory";
        return false;
    }
    return true;
}

bool br_build(bench_impl *s, const qg_rect *boxes, int32_t n, bool bulk) {
    try {
        s->boxes.assign(boxes, boxes + n);
        if (bulk) {
            std::vector<Value> values;
            values.reserve(static_cast<size_t>(n));
            for (int32_t i = 0; i < n; i++) values.emplace_back(to_box(boxes[i]), i);
            Tree packed(values.begin(), values.end());
            s->tree = std::move(packed);
        } else {
            for (int32_t i = 0; i < n; i++) s->tree.insert(Value(to_box(boxes[i]), i));
        }
    } catch (...) {
        s->err = "out of memory";
        return false;
    }
    return true;
}

bool same_box(const qg_rect &a, const qg_rect &b) {
    return a.min_x == b.min_x && a.min_y == b.min_y && a.max_x == b.max_x && a.max_y == b.max_y;
}

bool br_update(bench_impl *s, const qg_rect *boxes, int32_t n) {
    try {
        for (int32_t i = 0; i < n; i++) {
            qg_rect &old = s->boxes[static_cast<size_t>(i)];
            if (same_box(old, boxes[i])) continue;
            if (s->tree.remove(Value(to_box(old), i)) != 1) {
                s->err = "an element was not found to remove";
                return false;
            }
            old = boxes[i];
            s->tree.insert(Value(to_box(old), i));
        }
    } catch (...) {
        s->err = "out of memory";
        return false;
    }
    return true;
}

bool br_pairs(bench_impl *s, qg_pair_fn *fn, void *user) {
    const int32_t n = static_cast<int32_t>(s->boxes.size());
    bool stopped = false;
    for (int32_t i = 0; i < n && !stopped; i++) {
        const qg_rect &a = s->boxes[static_cast<size_t>(i)];
        auto f = [&](const Value &v) {
            int32_t j = v.second;
            if (stopped || j <= i || !qgw_overlap(&a, &s->boxes[static_cast<size_t>(j)])) return;
            if (!fn(i, j, user)) stopped = true;
        };
        s->tree.query(bgi::intersects(to_box(a)), call_out(f));
    }
    return true;
}

bool br_query(bench_impl *s, qg_rect area, qg_query_fn *fn, void *user) {
    bool stopped = false;
    auto f = [&](const Value &v) {
        if (stopped || !qgw_overlap(&area, &s->boxes[static_cast<size_t>(v.second)])) return;
        if (!fn(v.second, user)) stopped = true;
    };
    s->tree.query(bgi::intersects(to_box(area)), call_out(f));
    return true;
}

bool br_nearest(bench_impl *s, float x, float y, int32_t k, int32_t *out, float *d2, int32_t *found) {
    *found = 0;
    if (k <= 0) return k == 0;
    const Point p(x, y);
    const size_t size = s->tree.size();
    try {
        for (size_t m = 2 * static_cast<size_t>(k);; m *= 2) {
            s->found.clear();
            s->tree.query(bgi::nearest(p, static_cast<unsigned>(m)), std::back_inserter(s->found));
            s->ranked.clear();
            double boost_max = 0.0;
            for (const Value &v : s->found) {
                s->ranked.emplace_back(qg_point_box_distance2(s->boxes[static_cast<size_t>(v.second)], x, y),
                                       v.second);
                double d = static_cast<double>(bg::comparable_distance(p, v.first));
                if (d > boost_max) boost_max = d;
            }
            const size_t keep = std::min(static_cast<size_t>(k), s->ranked.size());
            std::partial_sort(s->ranked.begin(), s->ranked.begin() + static_cast<std::ptrdiff_t>(keep),
                              s->ranked.end());
            // Complete: Boost returned everything, or whatever it left out
            // is farther (in both measures) than the k-th exact distance.
            const bool complete = s->found.size() < m || s->found.size() == size ||
                                  (keep == static_cast<size_t>(k) &&
                                   static_cast<double>(s->ranked[keep - 1].first) < boost_max * (1.0 - 1e-5));
            if (complete) {
                for (size_t i = 0; i < keep; i++) {
                    out[i] = s->ranked[i].second;
                    if (d2) d2[i] = s->ranked[i].first;
                }
                *found = static_cast<int32_t>(keep);
                return true;
            }
        }
    } catch (...) {
        s->err = "out of memory";
        return false;
    }
}

size_t br_bytes(bench_impl *) {
    return 0;  // the tree cannot say; the bench measures the heap
}

void br_destroy(bench_impl *s) {
    delete s;
}

const char *br_error(bench_impl *s) {
    return s->err;
}

}  // namespace

extern "C" const bench_vtable bench_boost_rtree_vtable = {
    br_create, br_build, br_update, br_pairs, br_query, br_bytes, br_destroy, br_error, nullptr, nullptr,
    nullptr, nullptr, br_nearest,
};

// ---- level: a packed static tree and a dynamic tree ------------------------
//
// The tiles in an R-tree built once by the packing constructor (Boost's bulk
// load, for data that does not change), the agents in a second R-tree kept
// up to date by remove and insert, as above. Pairs: each agent queries the
// static tree (its tile pairs) and the dynamic tree (its pairs with agents
// of larger index). Candidates get the exact test.

namespace {

struct BoostLevel {
    Tree tiles_tree, agents_tree;
    const qg_rect *tiles = nullptr;
    std::vector<qg_rect> agents;  // the agents' boxes last given (the dynamic tree's values)
    int32_t s = 0;
    const char *err = nullptr;
};

BoostLevel *bl(bench_level *l) {
    return reinterpret_cast<BoostLevel *>(l);
}

bool brl_create(bench_level **out, const bench_setup *, const void *) {
    BoostLevel *b = new (std::nothrow) BoostLevel;
    *out = reinterpret_cast<bench_level *>(b);
    return b != nullptr;
}

bool brl_build(bench_level *l, const qg_rect *tiles, int32_t s, const qg_rect *agents, int32_t a) {
    BoostLevel *b = bl(l);
    try {
        b->tiles = tiles, b->s = s;
        std::vector<Value> values;
        values.reserve(static_cast<size_t>(s));
        for (int32_t i = 0; i < s; i++) values.emplace_back(to_box(tiles[i]), i);
        Tree packed(values.begin(), values.end());
        b->tiles_tree = std::move(packed);
        b->agents.assign(agents, agents + a);
        for (int32_t k = 0; k < a; k++) b->agents_tree.insert(Value(to_box(agents[k]), s + k));
    } catch (...) {
        b->err = "out of memory";
        return false;
    }
    return true;
}

bool brl_update(bench_level *l, const qg_rect *agents, int32_t a) {
    BoostLevel *b = bl(l);
    try {
        for (int32_t k = 0; k < a; k++) {
            qg_rect &old = b->agents[static_cast<size_t>(k)];
            if (same_box(old, agents[k])) continue;
            if (b->agents_tree.remove(Value(to_box(old), b->s + k)) != 1) {
                b->err = "an agent was not found to remove";
                return false;
            }
            old = agents[k];
            b->agents_tree.insert(Value(to_box(old), b->s + k));
        }
    } catch (...) {
        b->err = "out of memory";
        return false;
    }
    return true;
}

bool brl_pairs(bench_level *l, qg_pair_fn *fn, void *user) {
    BoostLevel *b = bl(l);
    const int32_t a = static_cast<int32_t>(b->agents.size()), s = b->s;
    bool stopped = false;
    for (int32_t k = 0; k < a && !stopped; k++) {
        const int32_t i = s + k;
        const qg_rect &box = b->agents[static_cast<size_t>(k)];
        auto tile = [&](const Value &v) {
            const int32_t t = v.second;
            if (stopped || !qgw_overlap(&box, &b->tiles[t])) return;
            if (!fn(t, i, user)) stopped = true;
        };
        b->tiles_tree.query(bgi::intersects(to_box(box)), call_out(tile));
        auto agent = [&](const Value &v) {
            const int32_t j = v.second;
            if (stopped || j <= i || !qgw_overlap(&box, &b->agents[static_cast<size_t>(j - s)])) return;
            if (!fn(i, j, user)) stopped = true;
        };
        b->agents_tree.query(bgi::intersects(to_box(box)), call_out(agent));
    }
    return true;
}

size_t brl_bytes(bench_level *) {
    return 0;  // the bench measures the heap
}

void brl_destroy(bench_level *l) {
    delete bl(l);
}

const char *brl_error(bench_level *l) {
    return bl(l)->err;
}

}  // namespace

extern "C" const bench_level_vtable bench_boost_rtree_level_vtable = {
    brl_create, brl_build, brl_update, brl_pairs, nullptr, nullptr, brl_bytes, brl_destroy, brl_error,
};
