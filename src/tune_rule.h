// SPDX-License-Identifier: MIT
// What a kind says about learning its sizes: the rule tune.c applies to it,
// a member of its class table (kind.h), filled in by the kind's own file.
// tune.c measures the elements and rebuilds; which sizes count, when they
// are far enough off and what config a rebuild gets is the kind's to say,
// so tune.c names no kind and a new kind is tuned by its own rule.
#ifndef QG_TUNE_RULE_H
#define QG_TUNE_RULE_H

#include "geom.h"

/// What a measure learned from the elements (a sample of their larger
/// sides, and their bounding box).
typedef struct qg_learned {
    float elem;     ///< the median side
    float bound;    ///< the 97th percentile side (at least elem)
    qg_rect world;  ///< the elements' bounding box (finite, not flat)
} qg_learned;

/// What the layout in force was chosen for: the typical element size and a
/// bound on the sizes (each 0 when nothing is known yet: the first measure
/// re-tunes).
typedef struct qg_in_force {
    float elem, bound;
} qg_in_force;

/// A kind's learning rule. `differs` and `stats` are required; `hint` and
/// `config` may be NULL (nothing in force from the user's values; the
/// common config as it is).
typedef struct qg_tune_rule {
    /// What the user's values (`user`, as passed to qg_create) say is in
    /// force in the resolved config `c`.
    qg_in_force (*hint)(const qg_config *c, const qg_config *user);
    /// True when what was learned is far enough from what is in force (in
    /// the config `c`) that a rebuild pays.
    bool (*differs)(const qg_config *c, qg_in_force now, const qg_learned *learned);
    /// The kind's part of a rebuild's config. `c` arrives as the config in
    /// force with the learned world as bounds, element_size the learned
    /// median and cell_size, max_depth and max_element_size 0 (re-chosen by
    /// the kind's configure); a max_depth the user set is put back after.
    void (*config)(qg_config *c, const qg_learned *learned);
    /// qg_get_stats' view of the settings: `s->element_size` is filled in;
    /// the rule fills size_bound, cell_size and max_depth from `c`.
    void (*stats)(const qg_config *c, qg_stats *s);
} qg_tune_rule;

/// A learned size must differ this much from the one in force (either way).
#define QG_TUNE_RATIO 2.0f

/// True when `want` is `ratio` or more from `now` either way, or nothing is
/// in force yet (now 0).
static inline bool qg_tune_off_by(float now, float want, float ratio)
{
    if (!(now > 0.0f))
        return true;
    const float r = want / now;
    return r >= ratio || r <= 1.0f / ratio;
}

/// True when either axis of the world `want` is QG_TUNE_RATIO or more from
/// `now`'s.
static inline bool qg_tune_world_off(qg_rect now, qg_rect want)
{
    return qg_tune_off_by((float)qg_extent(now.min_x, now.max_x), (float)qg_extent(want.min_x, want.max_x),
                          QG_TUNE_RATIO) ||
           qg_tune_off_by((float)qg_extent(now.min_y, now.max_y), (float)qg_extent(want.min_y, want.max_y),
                          QG_TUNE_RATIO);
}

#endif
