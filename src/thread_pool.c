// SPDX-License-Identifier: MIT
// qg_thread_pool: the job system that ships with the library, for users
// without one of their own. workers - 1 threads wait on a condition variable
// between calls; the calling thread is worker 0 and works too, so a pool of
// one worker creates no thread and runs everything inline.
//
// A call splits [0, count) into chunks and every worker takes chunks from
// one atomic counter until none is left: a worker that finishes early takes
// more (the parts quadgrid hands out are not always equal). The call returns
// once every thread has left the task, so the next call never races with a
// late one.
//
// Between tasks a thread polls for a while before it sleeps: quadgrid's
// batch calls run several short tasks back to back (qg_move_many's checks,
// classify and store passes, the refills, the pair parts), and a thread
// woken from a condition variable arrives tens of microseconds late, as
// long as a whole pass over 40,000 moves takes.
#define _POSIX_C_SOURCE 200809L

#include "quadgrid.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#define QG_POOL_MAX_WORKERS 256
/// Polls before a waiting thread sleeps (with PAUSE between them: about
/// 50-100 microseconds on x86).
#define QG_POOL_SPIN 4096

/// One poll's pause: tells the core this is a spin (it then saves power and
/// leaves a hyperthread sibling the pipeline).
static inline void pool_relax(void)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_ia32_pause();
#endif
}

typedef struct pool_thread {
    struct qg_thread_pool *pool;
    pthread_t thread;
    int32_t id;
} pool_thread;

struct qg_thread_pool {
    int32_t workers;
    pool_thread *threads; ///< workers - 1 of them
    pthread_mutex_t lock;
    pthread_cond_t wake; ///< a new task (generation) or stop
    pthread_cond_t done; ///< the last thread left the task
    _Atomic uint64_t generation; ///< atomic: polled without the lock
    atomic_int busy; ///< threads that have not left the current task (polled)
    bool stop;
    // The current task, written under the lock before the generation moves.
    qg_task_fn *task;
    void *context;
    int32_t count, chunk, chunks;
    atomic_int next; ///< next chunk to take
};

static void pool_work(struct qg_thread_pool *p, int32_t worker)
{
    for (;;) {
        const int c = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (c >= p->chunks)
            return;
        const int32_t begin = c * p->chunk;
        const int32_t end = begin + p->chunk < p->count ? begin + p->chunk : p->count;
        p->task(begin, end, worker, p->context);
    }
}

static void *pool_main(void *arg)
{
    pool_thread *t = arg;
    struct qg_thread_pool *p = t->pool;
    uint64_t seen = 0;
    for (;;) {
        // A new task seen while polling is still taken under the lock, so
        // the task's fields are read after the lock that wrote them.
        for (int i = 0; i < QG_POOL_SPIN && atomic_load_explicit(&p->generation, memory_order_relaxed) == seen; ++i)
            pool_relax();
        pthread_mutex_lock(&p->lock);
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->lock);
        if (p->stop) {
            pthread_mutex_unlock(&p->lock);
            break;
        }
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        pool_work(p, t->id);
        pthread_mutex_lock(&p->lock);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

static void pool_run(qg_task_fn *task, int32_t count, void *context, void *user)
{
    struct qg_thread_pool *p = user;
    if (count <= 0)
        return;
    if (p->workers == 1 || count == 1) {
        task(0, count, 0, context);
        return;
    }
    // Up to four chunks a worker: room to even out unequal parts, few
    // enough that taking one costs nothing next to running it.
    int32_t chunks = p->workers * 4;
    if (chunks > count)
        chunks = count;
    const int32_t chunk = (int32_t)(((int64_t)count + chunks - 1) / chunks);
    pthread_mutex_lock(&p->lock);
    p->task = task;
    p->context = context;
    p->count = count;
    p->chunk = chunk;
    p->chunks = (int32_t)(((int64_t)count + chunk - 1) / chunk);
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    p->busy = p->workers - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pool_work(p, 0);
    for (int i = 0; i < QG_POOL_SPIN && atomic_load_explicit(&p->busy, memory_order_relaxed) > 0; ++i)
        pool_relax();
    pthread_mutex_lock(&p->lock);
    while (p->busy > 0)
        pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

static void pool_stop(struct qg_thread_pool *p, int32_t started)
{
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    p->generation++; // ends the polls at once
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int32_t i = 0; i < started; ++i)
        pthread_join(p->threads[i].thread, NULL);
}

qg_status qg_thread_pool_create(int32_t workers, qg_thread_pool **out)
{
    if (out == NULL)
        return QG_ERR_INVALID;
    *out = NULL;
    if (workers < 1 || workers > QG_POOL_MAX_WORKERS)
        return QG_ERR_INVALID;
    struct qg_thread_pool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return QG_ERR_NOMEM;
    p->workers = workers;
    if (workers > 1 && (p->threads = calloc((size_t)workers - 1, sizeof *p->threads)) == NULL) {
        free(p);
        return QG_ERR_NOMEM;
    }
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p->threads);
        free(p);
        return QG_ERR_NOMEM;
    }
    if (pthread_cond_init(&p->wake, NULL) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p->threads);
        free(p);
        return QG_ERR_NOMEM;
    }
    if (pthread_cond_init(&p->done, NULL) != 0) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->lock);
        free(p->threads);
        free(p);
        return QG_ERR_NOMEM;
    }
    atomic_init(&p->next, 0);
    atomic_init(&p->generation, 0);
    atomic_init(&p->busy, 0);
    for (int32_t i = 0; i + 1 < workers; ++i) {
        p->threads[i].pool = p;
        p->threads[i].id = i + 1;
        if (pthread_create(&p->threads[i].thread, NULL, pool_main, &p->threads[i]) != 0) {
            pool_stop(p, i);
            pthread_cond_destroy(&p->done);
            pthread_cond_destroy(&p->wake);
            pthread_mutex_destroy(&p->lock);
            free(p->threads);
            free(p);
            return QG_ERR_NOMEM;
        }
    }
    *out = p;
    return QG_OK;
}

void qg_thread_pool_destroy(qg_thread_pool *pool)
{
    if (pool == NULL)
        return;
    pool_stop(pool, pool->workers - 1);
    pthread_cond_destroy(&pool->done);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->lock);
    free(pool->threads);
    free(pool);
}

qg_jobs qg_thread_pool_jobs(qg_thread_pool *pool)
{
    qg_jobs j = {1, NULL, NULL};
    if (pool != NULL) {
        j.worker_count = pool->workers;
        j.run = pool_run;
        j.user = pool;
    }
    return j;
}

int32_t qg_cpu_count(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > QG_POOL_MAX_WORKERS ? QG_POOL_MAX_WORKERS : (int32_t)n;
}
