// SPDX-License-Identifier: MIT
// Learning sizes and world from the elements, and re-tuning by rebuild
//. index.c calls these hooks; the logic is in tune.c.
//
// Every kind but brute_force gets a qg_tune at qg_create unless the config
// says fixed_sizes. It measures the elements (quantiles of their larger
// sides and their bounding box) at the first qg_cleanup or qg_insert_many
// with QG_TUNE_MIN or more of them, when their number doubled or halved
// since the last measure (qg_insert looks too, with one compare), and every
// QG_TUNE_EVERY cleanups from a sample. When the learned sizes (and, for
// the grids, which wrap around a torus, the world) differ from those in
// force (2x; trees 1.5x; the point grid: its boxes pass its bound), the kind
// is rebuilt with a config made from them:
// base slots and handles untouched, the kind's part built anew beside the
// old one and swapped in only when every allocation succeeded.
//
// Not while index->engine exists (static elements, filters, events): its
// layers and caches keep what the kind was when they were made (the fat
// layer's and static caches' cell sizes), so an index that uses them keeps
// the sizes it had; qg_insert stops looking then.
//
// qg_cleanup never allocates: it only marks the re-tune pending, by pointing
// index->klass at the tune's copy of the kind's table whose move_one
// re-tunes first (qg_move's dispatcher stays as it is: no test there);
// qg_insert, qg_insert_many and qg_move_many test qg_tune_pending. A refused
// allocation leaves the old structure (the call goes on untuned) and waits
// 16, 32, ... cleanups before the next attempt.
#ifndef QG_TUNE_H
#define QG_TUNE_H

#include "kind.h"

/// Elements below which an index is never measured (a few hundred boxes
/// search fast in any layout).
#define QG_TUNE_MIN 256
/// A sample every this many qg_cleanup calls.
#define QG_TUNE_EVERY 16

typedef struct qg_tune {
    /// The kind's table with move_one (and insert) re-tuning first;
    /// index->klass points here while a re-tune is pending.
    qg_kind_class pending;
    const qg_kind_class *real;
    int32_t check_at; ///< qg_insert measures when count reaches this
    int32_t measured; ///< count at the last measure (0: never)
    int32_t cleanups; ///< cleanups since the last sample
    int32_t wait;     ///< cleanups to wait after a refused re-tune
    int32_t backoff;  ///< the next wait
    int32_t retunes;
    /// In force: the typical element size the layout was chosen for, and the
    /// point grid's finest level bound.
    float elem, bound;
    /// A max_depth the user set: kept through re-tunes (a bound, as the
    /// trees' re-fits keep it).
    int32_t user_depth;
    /// qg_insert_many's planned rebuild (made before it takes its slots,
    /// run after: the new structure holds the batch too).
    bool planned;
    float plan_elem, plan_bound;
    qg_config plan;
} qg_tune;

/// Gives the index its tune state (none for brute_force or fixed_sizes).
qg_status qg_tune_create(qg_index *index);
/// Notes what the user's config says is in force (after qg_tune_create).
void qg_tune_hint(qg_index *index, const qg_config *user);
void qg_tune_destroy(qg_index *index);
/// The decision, after the kind's cleanup. Never allocates.
void qg_tune_cleanup(qg_index *index);
/// After qg_insert succeeded, when qg_tune_due.
void qg_tune_insert(qg_index *index);
/// Before qg_insert_many takes its slots: learns from the elements held and
/// `boxes`; true when a rebuild is planned. Changes nothing.
bool qg_tune_insert_many(qg_index *index, const qg_rect *boxes, int32_t n);
/// The planned rebuild, once qg_insert_many has taken `adding` slots for
/// its boxes: true when the new structure holds them all (the batch is
/// then inserted); false (nothing changed) when none was planned or its
/// memory was refused.
bool qg_tune_insert_many_commit(qg_index *index, int32_t adding);
/// A pending re-tune, performed now (after a qg_move_many that succeeded).
void qg_tune_perform_pending(qg_index *index);
void qg_tune_clear(qg_index *index);
void qg_tune_stats(const qg_index *index, qg_stats *s);
size_t qg_tune_bytes(const qg_index *index);
struct qg_state;
/// The tuner's part of the state walk (state.h).
void qg_tune_state(struct qg_state *s, qg_index *d, const qg_index *src);
/// The table of a kind (index.c).
const qg_kind_class *qg_kind_class_of(qg_kind kind);

static inline bool qg_tune_pending(const qg_index *index)
{
    return index->tune != NULL && index->klass == &index->tune->pending;
}

/// The kind's own table (not a re-tune's copy, nor the engine's).
static inline const qg_kind_class *qg_tune_real(const qg_index *index)
{
    return index->tune != NULL ? index->tune->real : index->klass;
}

/// qg_insert's one test: a re-tune pending or a measure due.
static inline bool qg_tune_due(const qg_index *index)
{
    return index->tune != NULL && (index->klass == &index->tune->pending || index->count >= index->tune->check_at);
}

#endif
