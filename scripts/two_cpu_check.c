// SPDX-License-Identifier: MIT
// Do two threads on this machine slow each other down? Two threads each chase
// pointers through their own 32 MB ring (memory-latency bound, like a pair
// search at 1,000,000), alone and then together. Build: cc -O2 -pthread
// scripts/two_cpu_check.c -o two_cpu_check. A ratio near 1 means two independent
// CPUs; 1.3-1.5 means they share a core or its memory path (as the README's
// two-thread figures say this machine does at times).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
enum { N = 8 << 20, STEPS = 20 << 20 };
static uint32_t *ring[2];
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void *chase(void *arg) {
    uint32_t *r = ring[(intptr_t)arg], i = 0;
    double t0 = now();
    for (int s = 0; s < STEPS; s++) i = r[i];
    double *out = malloc(sizeof *out); *out = now() - t0 + (i == 7 ? 1e-12 : 0);
    return out;
}
int main(void) {
    for (int k = 0; k < 2; k++) {
        ring[k] = malloc(sizeof(uint32_t) * N);
        uint32_t *perm = malloc(sizeof(uint32_t) * N);
        for (uint32_t i = 0; i < N; i++) perm[i] = i;
        srand(k + 1);
        for (uint32_t i = N - 1; i > 0; i--) { uint32_t j = ((uint32_t)rand() << 8 ^ rand()) % (i + 1); uint32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
        for (uint32_t i = 0; i < N; i++) ring[k][perm[i]] = perm[(i + 1) % N];
        free(perm);
    }
    void *r;
    pthread_t a, b;
    pthread_create(&a, NULL, chase, (void *)0); pthread_join(a, &r); double alone = *(double *)r;
    pthread_create(&a, NULL, chase, (void *)0); pthread_create(&b, NULL, chase, (void *)1);
    pthread_join(a, &r); double t1 = *(double *)r; pthread_join(b, &r); double t2 = *(double *)r;
    printf("alone %.3f s, together %.3f / %.3f s: %.2fx slower\n", alone, t1, t2, (t1 + t2) / 2 / alone);
    return 0;
}
