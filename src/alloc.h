// SPDX-License-Identifier: MIT
// The allocator wrapper every kind uses: counts the bytes an index holds and
// provides the "grow first, then mutate" transaction that lets a call undo its
// own growth when a later allocation fails.
#ifndef QG_ALLOC_H
#define QG_ALLOC_H

#include "quadgrid.h"

/// The user's allocator plus the exact number of bytes held through it.
typedef struct qg_alloc {
    qg_allocator fn;
    size_t bytes;
} qg_alloc;

/// Fills in the C library's realloc/free when the user gave none.
void qg_alloc_init(qg_alloc *a, const qg_allocator *user);

/// Allocates a block; NULL on failure.
void *qg_mem_alloc(qg_alloc *a, size_t size);

/// Frees a block of the given size (NULL is fine).
void qg_mem_free(qg_alloc *a, void *ptr, size_t size);

/// Resizes a block. Growing may fail (NULL, the old block untouched);
/// shrinking never fails by the allocator's contract.
void *qg_mem_resize(qg_alloc *a, void *ptr, size_t old_size, size_t new_size);

/// Up to this many arrays can grow inside one call (the point grid's bulk
/// insert may grow six arrays in each of its seven levels; the entries are
/// only written when an array grows, so a larger table costs nothing).
#define QG_TXN_MAX 48

/// A record of the arrays a call has grown, so a failure later in the same
/// call can shrink them back: the index then holds exactly the bytes it held
/// before the call.
typedef struct qg_txn {
    qg_alloc *alloc;
    int count;
    struct {
        void **data;
        int32_t *capacity;
        int32_t old_capacity;
        size_t elem_size;
    } entry[QG_TXN_MAX];
} qg_txn;

/// Starts an empty transaction. Inline: every insert and move starts one.
static inline void qg_txn_begin(qg_txn *txn, qg_alloc *alloc)
{
    txn->alloc = alloc;
    txn->count = 0;
}

/// Makes sure *data has room for `needed` elements (growing by about 1.5x).
/// Returns false when the allocation fails or `needed` passes INT32_MAX;
/// nothing is changed then.
bool qg_txn_reserve(qg_txn *txn, void **data, int32_t *capacity, size_t elem_size,
                    int64_t needed);

/// Shrinks every array grown in this transaction back to its old capacity.
/// Only valid while nothing has been written into the grown part.
void qg_txn_rollback(qg_txn *txn);

/// Frees a whole array and zeroes its capacity.
void qg_array_free(qg_alloc *a, void **data, int32_t *capacity, size_t elem_size);
/// Shrinks an array to `keep` elements when it holds more (a batch's growth
/// given back). Shrinking never fails: it never allocates.
void qg_array_shrink(qg_alloc *a, void **data, int32_t *capacity, size_t elem_size, int32_t keep);

#endif
