// SPDX-License-Identifier: MIT
// madvise and MADV_HUGEPAGE are BSD/Linux extensions beyond POSIX.
#if defined(__linux__)
#define _DEFAULT_SOURCE 1
#endif

#include "alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

/// Blocks this large (a 2 MiB page fits inside) get transparent huge pages where the system offers
/// them on request (Linux, THP in "madvise" mode, the common default).
#define QG_HUGE_MIN ((size_t)2 << 20)

/// Asks for huge pages under the 2 MiB-aligned inside of block [p, p + n).
///
/// Why: every kind's big arrays (boxes, slots, nodes, cells) are read at
/// spatially random places, and with 4 KiB pages nearly every such read of
/// a 1,000,000-element index also misses the TLB: a page walk on the
/// critical path of each query's dependent loads (start -> slots -> boxes).
/// With 2 MiB pages the 16 MB box array is eight TLB entries. It is only a
/// hint: the memory, its contents and every answer are the same, and a
/// system without THP ignores it. A user allocator decides for itself.
static void qg_advise_huge(void *p, size_t n)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p == NULL || n < QG_HUGE_MIN)
        return;
    const uintptr_t page = (uintptr_t)2 << 20;
    const uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + n) & ~(page - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

static void *libc_realloc(void *ptr, size_t old_size, size_t new_size, void *user)
{
    (void)old_size;
    (void)user;
    if (new_size == 0) {
        free(ptr);
        return NULL;
    }
    void *p = realloc(ptr, new_size);
    qg_advise_huge(p, new_size);
    return p;
}

void qg_alloc_init(qg_alloc *a, const qg_allocator *user)
{
    a->bytes = 0;
    if (user != NULL && user->realloc != NULL) {
        a->fn = *user;
    } else {
        a->fn.realloc = libc_realloc;
        a->fn.user = NULL;
    }
}

void *qg_mem_alloc(qg_alloc *a, size_t size)
{
    void *p = a->fn.realloc(NULL, 0, size, a->fn.user);
    if (p != NULL)
        a->bytes += size;
    return p;
}

void qg_mem_free(qg_alloc *a, void *ptr, size_t size)
{
    if (ptr == NULL)
        return;
    a->fn.realloc(ptr, size, 0, a->fn.user);
    a->bytes -= size;
}

void *qg_mem_resize(qg_alloc *a, void *ptr, size_t old_size, size_t new_size)
{
    if (ptr == NULL)
        return new_size ? qg_mem_alloc(a, new_size) : NULL;
    if (new_size == 0) {
        qg_mem_free(a, ptr, old_size);
        return NULL;
    }
    void *p = a->fn.realloc(ptr, old_size, new_size, a->fn.user);
    if (p != NULL)
        a->bytes = a->bytes - old_size + new_size;
    return p;
}

bool qg_txn_reserve(qg_txn *txn, void **data, int32_t *capacity, size_t elem_size,
                    int64_t needed)
{
    if (needed <= *capacity)
        return true;
    if (needed > INT32_MAX || txn->count == QG_TXN_MAX)
        return false;
    int64_t cap = (int64_t)*capacity + *capacity / 2;
    if (cap < needed)
        cap = needed;
    if (cap < 16)
        cap = 16;
    if (cap > INT32_MAX)
        cap = INT32_MAX;
    if ((uint64_t)cap > SIZE_MAX / elem_size)
        return false;
    void *p = qg_mem_resize(txn->alloc, *data, (size_t)*capacity * elem_size, (size_t)cap * elem_size);
    if (p == NULL)
        return false;
    txn->entry[txn->count].data = data;
    txn->entry[txn->count].capacity = capacity;
    txn->entry[txn->count].old_capacity = *capacity;
    txn->entry[txn->count].elem_size = elem_size;
    txn->count++;
    // The grown part starts zeroed: a kind may carry slots it has not yet
    // written into a snapshot (state.h), and the same state must make the
    // same bytes (rollback netcode compares them), never the heap's leftovers.
    memset((unsigned char *)p + (size_t)*capacity * elem_size, 0, (size_t)(cap - *capacity) * elem_size);
    *data = p;
    *capacity = (int32_t)cap;
    return true;
}

void qg_txn_rollback(qg_txn *txn)
{
    // Newest first, so an array grown twice ends at its first old size.
    for (int i = txn->count - 1; i >= 0; --i) {
        void **data = txn->entry[i].data;
        int32_t *capacity = txn->entry[i].capacity;
        size_t elem = txn->entry[i].elem_size;
        *data = qg_mem_resize(txn->alloc, *data, (size_t)*capacity * elem,
                              (size_t)txn->entry[i].old_capacity * elem);
        *capacity = txn->entry[i].old_capacity;
    }
    txn->count = 0;
}

void qg_array_free(qg_alloc *a, void **data, int32_t *capacity, size_t elem_size)
{
    qg_mem_free(a, *data, (size_t)*capacity * elem_size);
    *data = NULL;
    *capacity = 0;
}

void qg_array_shrink(qg_alloc *a, void **data, int32_t *capacity, size_t elem_size, int32_t keep)
{
    if (*capacity <= keep)
        return;
    *data = qg_mem_resize(a, *data, (size_t)*capacity * elem_size, (size_t)keep * elem_size);
    *capacity = keep;
}
