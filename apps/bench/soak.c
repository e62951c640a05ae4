// SPDX-License-Identifier: MIT
/* quadgrid-bench soak: the `agents` and `mixed` workloads for many frames
 * with churn, checking that memory stays flat and answers stay exact.
 *
 * Each frame: every agent moves (qgw_agents_move); a share of the agents
 * (--churn, default 1%, drawn from a fixed seed) is removed with qg_remove,
 * the others are moved with qg_move, the removed ones are inserted again with
 * their new box (so handles are freed and reused every frame); then one
 * qg_cleanup and one qg_pairs. Checked:
 *
 * - answers: on sampled frames (the first, every --verify-every-th, the last)
 *   the pair count and checksum, named by agent, equal the sort-and-sweep
 *   reference's (qgw_reference_sum); qg_validate passes on those frames;
 * - memory: qg_get_stats' memory_bytes and the process's resident set (the
 *   current one, /proc/self/statm, not the peak) after the warm-up (--warmup
 *   frames, default a tenth of the run, at least 5) never exceed the largest
 *   value seen during the warm-up by more than 1% (RSS: 1% or 64 pages,
 *   whichever is larger: at small n, 1% of the process is less than what one
 *   stdio buffer or malloc's top-chunk trimming moves).
 *
 * Exit status: 0 all passed, 1 setup failure (memory, bad option), 2 a check
 * failed. One line per (kind, workload), plus a verdict. */
#define _POSIX_C_SOURCE 200809L

#include "workload.h"

#include <inttypes.h>
#include <quadgrid.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int bench_soak_main(int argc, char **argv);

typedef struct soak_options {
    const char *kinds;
    const char *workloads;
    int32_t n, frames, warmup, verify_every;
    double churn;
    uint64_t seed;
} soak_options;

typedef struct soak_pairs {
    const int32_t *agent_of;
    qgw_sum sum;
} soak_pairs;

static bool soak_pair(qg_handle a, qg_handle b, void *user) {
    soak_pairs *p = user;
    int32_t i = p->agent_of[a], j = p->agent_of[b];
    if (i > j) {
        int32_t t = i;
        i = j;
        j = t;
    }
    p->sum.count++;
    p->sum.checksum += qgw_pair_term(i, j);
    return true;
}

/* The resident set now, in bytes (0 when unknown). */
static size_t rss_now(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, resident = 0;
    int got = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return got == 2 && page > 0 ? (size_t)resident * (size_t)page : 0;
}

typedef struct soak_result {
    int64_t removes, inserts, moves, pairs_verified;
    int32_t verified_frames;
    size_t mem_base, mem_max, mem_min_after, rss_base, rss_max;
    double seconds;
} soak_result;

static int soak_fail(const char *kind, const char *wl, int32_t frame, const soak_options *o,
                     const char *what) {
    fprintf(stderr,
            "soak FAILED: kind %s, workload %s, n %d, frame %d, seed %" PRIu64 ": %s\n", kind, wl,
            o->n, frame, o->seed, what);
    return 2;
}

/* One (kind, workload) soak. */
static int soak_one(const soak_options *o, qg_kind kind, bool mixed, soak_result *res) {
    const char *kname = qg_kind_name(kind), *wl = mixed ? "mixed" : "agents";
    memset(res, 0, sizeof *res);
    res->mem_min_after = SIZE_MAX;
    qgw_agents a;
    if (!(mixed ? qgw_agents_init_mixed(&a, o->n) : qgw_agents_init(&a, o->n))) {
        fprintf(stderr, "soak: out of memory for %d agents\n", o->n);
        return 1;
    }
    const int32_t n = a.n;
    /* Handles stay below n + the churned count (freed handles are reused
     * first); twice n is room to spare, and checked. */
    const int32_t cap = 2 * n + 64;
    qg_handle *handle_of = malloc((size_t)(n > 0 ? n : 1) * sizeof *handle_of);
    int32_t *agent_of = malloc((size_t)cap * sizeof *agent_of);
    unsigned char *churned = calloc((size_t)(n > 0 ? n : 1), 1);
    int32_t *picks = malloc((size_t)(n > 0 ? n : 1) * sizeof *picks);
    qgw_sweep ref = {0};
    qg_index *index = NULL;
    int rc = 0;
    char msg[256];
    if (!handle_of || !agent_of || !churned || !picks) {
        fprintf(stderr, "soak: out of memory\n");
        rc = 1;
        goto out;
    }
    qg_config cfg = qg_default_config(kind);
    cfg.bounds = qgw_agents_bounds(&a);
    cfg.element_size = 5.0f;     /* the bench's typical width */
    cfg.max_element_size = 8.0f; /* and its largest agent */
    qg_status st = qg_create(&cfg, &index);
    if (st != QG_OK) {
        snprintf(msg, sizeof msg, "qg_create = %s", qg_status_name(st));
        rc = soak_fail(kname, wl, 0, o, msg);
        goto out;
    }
    for (int32_t i = 0; i < n; i++) {
        qg_handle h = qg_insert(index, a.boxes[i]);
        if (h < 0 || h >= cap) {
            snprintf(msg, sizeof msg, "qg_insert = %d", h);
            rc = soak_fail(kname, wl, 0, o, msg);
            goto out;
        }
        handle_of[i] = h;
        agent_of[h] = i;
    }
    qg_cleanup(index);

    qgw_rng rng = qgw_rng_new(o->seed);
    const int32_t per_frame = (int32_t)((double)n * o->churn);
    const uint64_t t0 = qgw_now_ns();
    for (int32_t frame = 1; frame <= o->frames; frame++) {
        qgw_agents_move(&a);
        /* Churn: remove a share, move the rest, insert the share again. */
        int32_t k = 0;
        for (int32_t t = 0; t < per_frame && n > 0; t++) {
            int32_t i = (int32_t)(qgw_next(&rng) % (uint64_t)n);
            if (churned[i]) continue;
            churned[i] = 1;
            picks[k++] = i;
            if ((st = qg_remove(index, handle_of[i])) != QG_OK) {
                snprintf(msg, sizeof msg, "qg_remove(agent %d) = %s", i, qg_status_name(st));
                rc = soak_fail(kname, wl, frame, o, msg);
                goto out;
            }
        }
        res->removes += k;
        for (int32_t i = 0; i < n; i++) {
            if (churned[i]) continue;
            if ((st = qg_move(index, handle_of[i], a.boxes[i])) != QG_OK) {
                snprintf(msg, sizeof msg, "qg_move(agent %d) = %s", i, qg_status_name(st));
                rc = soak_fail(kname, wl, frame, o, msg);
                goto out;
            }
        }
        res->moves += n - k;
        for (int32_t t = 0; t < k; t++) {
            int32_t i = picks[t];
            churned[i] = 0;
            qg_handle h = qg_insert(index, a.boxes[i]);
            if (h < 0 || h >= cap) {
                snprintf(msg, sizeof msg, "qg_insert(agent %d) = %d", i, h);
                rc = soak_fail(kname, wl, frame, o, msg);
                goto out;
            }
            handle_of[i] = h;
            agent_of[h] = i;
        }
        res->inserts += k;
        qg_cleanup(index);
        soak_pairs sp = {agent_of, {0, 0}};
        if ((st = qg_pairs(index, soak_pair, &sp)) != QG_OK) {
            snprintf(msg, sizeof msg, "qg_pairs = %s", qg_status_name(st));
            rc = soak_fail(kname, wl, frame, o, msg);
            goto out;
        }

        bool verify = frame == 1 || frame == o->frames || frame % o->verify_every == 0;
        if (verify) {
            qgw_sum want;
            if (!qgw_reference_sum(&ref, a.boxes, n, &want)) {
                fprintf(stderr, "soak: out of memory for the reference\n");
                rc = 1;
                goto out;
            }
            if (want.count != sp.sum.count || want.checksum != sp.sum.checksum) {
                snprintf(msg, sizeof msg,
                         "pairs %" PRIu64 " checksum %016" PRIx64 ", sort-and-sweep %" PRIu64
                         " checksum %016" PRIx64,
                         sp.sum.count, sp.sum.checksum, want.count, want.checksum);
                rc = soak_fail(kname, wl, frame, o, msg);
                goto out;
            }
            if ((st = qg_validate(index)) != QG_OK) {
                snprintf(msg, sizeof msg, "qg_validate = %s", qg_status_name(st));
                rc = soak_fail(kname, wl, frame, o, msg);
                goto out;
            }
            res->verified_frames++;
            res->pairs_verified += (int64_t)want.count;
        }

        size_t mem = qg_get_stats(index).memory_bytes, rss = rss_now();
        if (frame <= o->warmup) {
            if (mem > res->mem_base) res->mem_base = mem;
            if (rss > res->rss_base) res->rss_base = rss;
            continue;
        }
        if (mem > res->mem_max) res->mem_max = mem;
        if (mem < res->mem_min_after) res->mem_min_after = mem;
        if (rss > res->rss_max) res->rss_max = rss;
        if ((double)mem > (double)res->mem_base * 1.01) {
            snprintf(msg, sizeof msg, "memory_bytes %zu, over 1%% above the warm-up's %zu", mem,
                     res->mem_base);
            rc = soak_fail(kname, wl, frame, o, msg);
            goto out;
        }
        size_t slack = res->rss_base / 100;
        long page = sysconf(_SC_PAGESIZE);
        if (page > 0 && slack < 64 * (size_t)page) slack = 64 * (size_t)page;
        if (rss && res->rss_base && rss > res->rss_base + slack) {
            snprintf(msg, sizeof msg, "RSS %zu, over the warm-up's %zu plus %zu", rss,
                     res->rss_base, slack);
            rc = soak_fail(kname, wl, frame, o, msg);
            goto out;
        }
    }
    res->seconds = (double)(qgw_now_ns() - t0) * 1e-9;

out:
    qg_destroy(index);
    qgw_sweep_free(&ref);
    free(handle_of);
    free(agent_of);
    free(churned);
    free(picks);
    qgw_agents_free(&a);
    return rc;
}

static bool parse_i32(const char *s, int32_t lo, int32_t *out) {
    char *end;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || *end || v < lo || v > INT32_MAX) return false;
    *out = (int32_t)v;
    return true;
}

static void soak_usage(FILE *f) {
    fputs("usage: quadgrid-bench soak [options]\n"
          "  agents and mixed with churn for many frames: memory_bytes and RSS must stay\n"
          "  within 1% of the warm-up's, pairs exact against sort-and-sweep on sampled frames\n"
          "  --kind K[,K...]|all   kinds (default all built kinds but brute_force)\n"
          "  --workload W          agents, mixed or both (default both)\n"
          "  --n N                 agents (default 10000)\n"
          "  --frames F            frames (default 1000)\n"
          "  --warmup W            frames before memory is held flat (default frames/10, >= 5)\n"
          "  --churn P             share removed and re-inserted each frame (default 0.01)\n"
          "  --verify-every V      check pairs and qg_validate every V frames (default 50)\n"
          "  --seed S              the churn's seed (default 14)\n"
          "exit status: 0 passed, 1 setup failure, 2 a check failed\n",
          f);
}

int bench_soak_main(int argc, char **argv) {
    soak_options o = {"all", "both", 10000, 1000, -1, 50, 0.01, 14};
    /* Every option but --help takes a value: two arguments a step. */
    for (int i = 1; i < argc; i += 2) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            soak_usage(stdout);
            return 0;
        } else if (strcmp(arg, "--kind") == 0) ok = val != NULL, o.kinds = val;
        else if (strcmp(arg, "--workload") == 0) ok = val != NULL, o.workloads = val;
        else if (strcmp(arg, "--n") == 0) ok = parse_i32(val, 1, &o.n);
        else if (strcmp(arg, "--frames") == 0) ok = parse_i32(val, 1, &o.frames);
        else if (strcmp(arg, "--warmup") == 0) ok = parse_i32(val, 0, &o.warmup);
        else if (strcmp(arg, "--verify-every") == 0) ok = parse_i32(val, 1, &o.verify_every);
        else if (strcmp(arg, "--churn") == 0) {
            char *end;
            o.churn = val ? strtod(val, &end) : -1;
            ok = val && !*end && o.churn >= 0 && o.churn <= 1;
        } else if (strcmp(arg, "--seed") == 0) {
            char *end;
            o.seed = val ? strtoull(val, &end, 0) : 0;
            ok = val && !*end;
        } else {
            fprintf(stderr, "soak: unknown option '%s'\n", arg);
            soak_usage(stderr);
            return 1;
        }
        if (!ok) {
            fprintf(stderr, "soak: bad or missing value for %s\n", arg);
            return 1;
        }
    }
    if (o.warmup < 0) o.warmup = o.frames / 10 > 5 ? o.frames / 10 : 5;
    if (o.warmup >= o.frames) {
        fprintf(stderr, "soak: --warmup must be below --frames\n");
        return 1;
    }
    bool do_agents = strcmp(o.workloads, "both") == 0 || strcmp(o.workloads, "agents") == 0;
    bool do_mixed = strcmp(o.workloads, "both") == 0 || strcmp(o.workloads, "mixed") == 0;
    if (!do_agents && !do_mixed) {
        fprintf(stderr, "soak: unknown workload '%s' (agents, mixed or both)\n", o.workloads);
        return 1;
    }
    bool want[QG_KIND_COUNT] = {false};
    if (strcmp(o.kinds, "all") == 0) {
        /* brute_force is the tests' oracle: quadratic pairs, not a soak. */
        for (int k = 0; k < QG_KIND_COUNT; k++)
            want[k] = qg_kind_available((qg_kind)k) && k != QG_BRUTE_FORCE;
    } else {
        char *list = strdup(o.kinds);
        if (!list) return 1;
        for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
             name = strtok_r(NULL, ",", &save)) {
            qg_kind k;
            if (qg_kind_from_name(name, &k) != QG_OK || !qg_kind_available(k)) {
                fprintf(stderr, "soak: kind '%s' is not built\n", name);
                free(list);
                return 1;
            }
            want[k] = true;
        }
        free(list);
    }
    printf("soak: n %d, frames %d (warm-up %d), churn %.3f a frame, verify every %d frames, "
           "seed %" PRIu64 "\n",
           o.n, o.frames, o.warmup, o.churn, o.verify_every, o.seed);
    int rc = 0, runs = 0;
    int64_t total_frames = 0, total_ops = 0;
    for (int k = 0; k < QG_KIND_COUNT; k++) {
        if (!want[k]) continue;
        for (int w = 0; w < 2; w++) {
            if (!(w ? do_mixed : do_agents)) continue;
            soak_result r;
            fflush(stdout);
            int one = soak_one(&o, (qg_kind)k, w == 1, &r);
            if (one > rc) rc = one;
            if (one) continue;
            runs++;
            total_frames += o.frames;
            total_ops += r.removes + r.inserts + r.moves;
            printf("soak %-16s %-6s frames %d: %" PRId64 " moves, %" PRId64 " removes, %" PRId64
                   " inserts; %d frames verified (%" PRId64 " pairs); memory_bytes warm-up max "
                   "%zu, after %zu..%zu; RSS warm-up max %zu, after max %zu; %.1f s: ok\n",
                   qg_kind_name((qg_kind)k), w ? "mixed" : "agents", o.frames, r.moves, r.removes,
                   r.inserts, r.verified_frames, r.pairs_verified, r.mem_base, r.mem_min_after,
                   r.mem_max, r.rss_base, r.rss_max, r.seconds);
        }
    }
    printf("soak: %d runs passed, %" PRId64 " frames, %" PRId64 " operations%s\n", runs,
           total_frames, total_ops, rc ? "; FAILED" : "");
    return rc;
}
