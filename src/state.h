// SPDX-License-Identifier: MIT
// An index's state as a value: one walk over it serves qg_snapshot_size,
// qg_snapshot_write, qg_snapshot_read and qg_copy (snapshot.c).
//
// Each kind (and the engine, and the tuner) writes one function that names
// every field that decides a later answer or its order, and every array with
// its capacity, in a fixed order:
//
//     static void grid_state(qg_state *s, qg_index *d, const qg_index *src)
//     {
//         QG_ST(s, dg, sg, cols);
//         qg_st_array(s, (void **)&dg->cells, &dg->cells_cap, sg->cells, sg->cells_cap,
//                     sg->cell_count, sizeof(int32_t));
//     }
//
// The same function runs in every mode; `src` is the index read from, `d` the
// one written to (the same index when writing a snapshot, or when reading
// one: then the fields come from the bytes). Why one function and not four:
// a field named in one place cannot be saved and then forgotten on restore.
//
// Rules for a state function:
// - Plain fields only through QG_ST (fixed-size integers, floats, bools,
//   arrays of them): never a pointer, size_t or long, whose size differs
//   between platforms (QG_ST_SIZE for a size_t). A field that describes the
//   machine (an AVX2 flag) is not state: set it from the machine when
//   reading (qg_st_reading).
// - Arrays of plain elements through qg_st_array with their capacity and the
//   count of elements that are meaningful (the rest is neither written nor
//   copied; reading zeroes it). An array whose elements hold pointers (a
//   row's own arrays) is walked element by element.
// - Reading: the bytes may be hostile. After a failed call (qg_st_ok false)
//   the rest of the walk reads nothing, and the kind's destroy must still be
//   safe: a count that destroy walks is set only once the array it counts is
//   read (or is zeroed again when the read fails). Whatever the walk
//   accepts, qg_validate checks after it, so a kind checks here only what
//   its destroy or validate would trip on.
// - Copying (dst's memory reused): a fits pass runs first and must find every
//   array qg_copy would grow (qg_st_array does; a kind whose structure in dst
//   differs from src's in a way it cannot reuse calls qg_st_refuse, and the
//   copy then goes through a fresh clone). The copy pass itself then never
//   allocates, so never fails.
#ifndef QG_STATE_H
#define QG_STATE_H

#include "kind.h"

typedef enum qg_st_mode {
    QG_ST_SIZE,  ///< count the bytes a snapshot takes
    QG_ST_WRITE, ///< write the snapshot
    QG_ST_READ,  ///< read it into a zeroed index
    QG_ST_FITS,  ///< qg_copy's first pass: does dst hold room for src?
    QG_ST_COPY,  ///< qg_copy's second pass: src into dst, never allocating
} qg_st_mode;

typedef struct qg_state {
    qg_st_mode mode;
    bool ok;          ///< false: bad bytes, no memory, or (fits) no room; the walk then does nothing
    qg_status status; ///< why not ok
    unsigned char *out;
    const unsigned char *in;
    size_t pos, len;
    qg_alloc *alloc; ///< read, copy: d's allocator
    size_t budget;   ///< read: bytes of array capacity still allowed
} qg_state;

/// Fails the walk with `status` (the first failure is kept).
void qg_st_fail(qg_state *s, qg_status status);

/// A fits pass that found dst's structure not reusable for src's: qg_copy
/// then makes a fresh clone instead (in other modes it does nothing).
static inline void qg_st_refuse(qg_state *s)
{
    if (s->mode == QG_ST_FITS)
        qg_st_fail(s, QG_ERR_NOMEM);
}

static inline bool qg_st_ok(const qg_state *s)
{
    return s->ok;
}

static inline bool qg_st_reading(const qg_state *s)
{
    return s->mode == QG_ST_READ;
}

/// n bytes of plain data, from src to d.
void qg_st_val(qg_state *s, void *d, const void *src, size_t n);

/// A plain field of the structs d and src.
#define QG_ST(s, d, src, field) qg_st_val((s), &(d)->field, &(src)->field, sizeof((d)->field))

/// A size_t field, as 8 bytes.
void qg_st_size(qg_state *s, size_t *d, const size_t *src);
#define QG_ST_SIZE(s, d, src, field) qg_st_size((s), &(d)->field, &(src)->field)

/// A bool field, as one byte 0 or 1 (reading refuses any other).
void qg_st_bool(qg_state *s, bool *d, const bool *src);
#define QG_ST_BOOL(s, d, src, field) qg_st_bool((s), &(d)->field, &(src)->field)

/// An array of plain `elem`-byte elements: *d with capacity *dcap becomes
/// src's `sarr` with capacity `scap`, its first `used` elements (0 <= used <=
/// scap) carried over. Reading allocates scap elements (within the budget)
/// and zeroes those past `used`; copying shrinks a larger dst array to scap.
/// A read's used and capacity come from the bytes: the kind checks after the
/// call that they agree with its fields (qg_st_fail when not). Returns
/// qg_st_ok.
bool qg_st_array(qg_state *s, void **d, int32_t *dcap, const void *sarr, int32_t scap, int64_t used, size_t elem);

/// A block of `bytes` the kind sizes from fields it already walked (no
/// capacity field of its own): *d, now `dbytes` long (d's old size: a copy
/// computes it before the walk overwrote the fields), becomes src's, all of
/// it carried over. Returns qg_st_ok.
bool qg_st_block(qg_state *s, void **d, size_t dbytes, const void *sblock, size_t bytes);

/// An optional struct of `size` bytes the index owns through *d (the engine,
/// the tuner): present or not as *src is. Returns true when the caller should
/// walk its fields now (it is present in src, and in d: reading allocated it
/// zeroed). When src has none and d has one, it returns false and sets
/// *drop: the caller frees d's (a copy; never in a fits pass).
bool qg_st_struct(qg_state *s, void **d, const void *src, size_t size, bool *drop);

#endif
