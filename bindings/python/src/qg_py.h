// SPDX-License-Identifier: MIT
// The Python binding's C side: batched forms of the C API (qg_py.c). The
// declarations the cffi module sees are repeated in quadgrid/_build.py.
#ifndef QG_PY_H
#define QG_PY_H

#include "quadgrid.h"

#define QGPY_MAX_PARTS 256

/// A growing int32 buffer, reused from call to call.
typedef struct qgpy_vec {
    int32_t *data;
    int64_t len, cap;
    bool failed;
} qgpy_vec;

/// One Python Index: the C index, its thread pool, its result buffers.
typedef struct qgpy {
    qg_index *index;
    qg_thread_pool *pool;
    int32_t pool_workers;
    qg_jobs jobs;
    int nparts;
    qgpy_vec parts[QGPY_MAX_PARTS];
    qgpy_vec out, out2;
} qgpy;

int qgpy_open(const qg_config *config, qgpy **out);
void qgpy_close(qgpy *s);
int64_t qgpy_bad_box(const float *boxes, int64_t n);
int64_t qgpy_bad_area(const float *boxes, int64_t n);
int qgpy_check_handles(const qgpy *s, const int32_t *handles, int64_t n, int64_t *bad_row);
int qgpy_insert(qgpy *s, const float *boxes, int64_t n, int32_t *handles, int64_t *bad_row);
int qgpy_move(qgpy *s, const int32_t *handles, const float *boxes, int64_t n, int32_t threads,
              int64_t *bad_row, int *bad_what);
int qgpy_remove(qgpy *s, const int32_t *handles, int64_t n, int64_t *bad_row);
void qgpy_cleanup(qgpy *s, int32_t threads);
int64_t qgpy_pairs(qgpy *s, int32_t threads);
void qgpy_pairs_copy(qgpy *s, int32_t *out);
int qgpy_query_many(qgpy *s, const float *areas, int64_t n, int64_t *offsets, int64_t *bad_row);
int qgpy_raycast_many(qgpy *s, const float *origins, const float *dirs, const float *max_t, int64_t n,
                      bool closest, int32_t *best_h, float *best_t, int64_t *offsets, int64_t *bad_row);
void qgpy_out_copy(const qgpy *s, int32_t *out);
void qgpy_out2_copy(const qgpy *s, int32_t *out);
int64_t qgpy_out_len(const qgpy *s);
int64_t qgpy_out2_len(const qgpy *s);
int qgpy_nearest_many(const qgpy *s, const float *points, int64_t n, int32_t k, float max_distance2,
                      int32_t *handles, float *distances2, int64_t *bad_row);
int qgpy_pair_events(qgpy *s);
int qgpy_set_static(qgpy *s, const int32_t *handles, const uint8_t *flags, int64_t n, int64_t *bad_row);
int qgpy_set_filter(qgpy *s, const int32_t *handles, const uint32_t *category, const uint32_t *mask,
                    int64_t n, int64_t *bad_row);
int qgpy_get_boxes(const qgpy *s, const int32_t *handles, int64_t n, float *boxes, int64_t *bad_row);
int qgpy_clone(const qgpy *src, qgpy **out);
int qgpy_copy(qgpy *dst, const qgpy *src);
int64_t qgpy_snapshot_size(const qgpy *s);
int qgpy_snapshot_write(const qgpy *s, void *buf, int64_t len);
int qgpy_snapshot_read(const void *buf, int64_t len, qgpy **out, int32_t *kind);

#endif
