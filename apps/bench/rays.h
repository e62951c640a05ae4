// SPDX-License-Identifier: MIT
/* quadgrid-bench rays and knn: segment casts and k nearest boxes over the
 * `static` boxes (docs/benchmarks.md, docs/workloads.md). */
#ifndef QG_BENCH_RAYS_H
#define QG_BENCH_RAYS_H

#include <stdbool.h>
#include <stdint.h>

#include "peers/peer.h"

typedef struct bench_rays_options {
    bool knn;              /* false: rays, true: knn */
    int32_t n;             /* boxes */
    int32_t queries;       /* R rays or Q points */
    int32_t repeat;        /* timed passes; the median is reported */
    bool verify;           /* every answer against the plain reference */
    int format;            /* 0 table, 1 JSON lines, 2 CSV */
    const bench_setup *tune; /* element sizes and quadgrid tuning */
} bench_rays_options;

/* Runs the workload for one implementation and prints its line. Returns 0,
 * 1 when the implementation failed (or memory ran out), 2 on a wrong answer
 * (--verify). An implementation without the calls is skipped (0). */
int bench_rays_run(const bench_rays_options *o, const bench_peer *p);

/* After every implementation ran: did they agree on the counts and
 * checksums? Prints the verdict; 0 yes (or fewer than two ran), 2 no. */
int bench_rays_cross_check(void);

#endif /* QG_BENCH_RAYS_H */
