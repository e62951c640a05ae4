// SPDX-License-Identifier: MIT
// Index free lists: the "array with holes" every kind uses, written once.
//
// An element node is one link of a singly-linked index list (a leaf's or a
// cell's elements). Freed nodes go on a free list threaded through `next`, and
// the next insert takes them back, so a running simulation stops allocating.
#ifndef QG_POOL_H
#define QG_POOL_H

#include "alloc.h"

/// One link of an element list: the next link (-1 ends the list) and the
/// element's handle.
typedef struct qg_enode {
    int32_t next;
    int32_t element;
} qg_enode;

/// A free-listed array of element nodes.
typedef struct qg_enode_pool {
    qg_enode *data;
    int32_t capacity;
    int32_t high;      ///< slots ever used: [0, high)
    int32_t free_head; ///< first free slot below high, -1 if none
    int32_t live;      ///< slots in use
} qg_enode_pool;

static inline void qg_enode_pool_reset(qg_enode_pool *p)
{
    p->high = 0;
    p->free_head = -1;
    p->live = 0;
}

/// Makes sure `extra` nodes can be taken without allocating.
static inline bool qg_enode_reserve(qg_txn *txn, qg_enode_pool *p, int64_t extra)
{
    int64_t spare = (int64_t)(p->high - p->live); // free-listed slots
    if (extra <= spare)
        return true;
    return qg_txn_reserve(txn, (void **)&p->data, &p->capacity, sizeof(qg_enode),
                          (int64_t)p->high + (extra - spare));
}

/// Takes a node; the caller reserved it first.
static inline int32_t qg_enode_take(qg_enode_pool *p, int32_t element, int32_t next)
{
    int32_t i;
    if (p->free_head >= 0) {
        i = p->free_head;
        p->free_head = p->data[i].next;
    } else {
        i = p->high++;
    }
    p->data[i].next = next;
    p->data[i].element = element;
    p->live++;
    return i;
}

/// Counts the free list (for validation): should equal high - live.
static inline int64_t qg_enode_free_count(const qg_enode_pool *p)
{
    int64_t n = 0;
    for (int32_t i = p->free_head; i >= 0 && n <= p->high; i = p->data[i].next)
        n++;
    return n;
}

#endif
