// SPDX-License-Identifier: MIT
/* quadgrid-bench: the standard workloads (agents, mixed, static, rays, knn,
 * level) plus extras (sparse, insert, scenes, drift) for every quadgrid kind
 * that is built and for peer libraries, all in one process on the same
 * boxes. See docs/benchmarks.md. */
#include "bench.h"

/* ------------------------------------------------------------------------ */
/* Options                                                                  */



/* ------------------------------------------------------------------------ */
/* The implementations                                                      */

/* Every kind of QG_KIND_LIST, each a peer of the bench (its config points
 * at its entry). */
#define BENCH_KIND_(NAME, name, summary) QG_##NAME,
static const qg_kind qg_kinds[QG_KIND_COUNT] = {QG_KIND_LIST(BENCH_KIND_)};
#undef BENCH_KIND_

/* A peer runs the workloads its tables have: `vt` all but level, `level`
 * the level workload (Box2D's level is its b2BroadPhase, a peer of its own
 * name; its b2DynamicTree peer has no level). */
static const bench_peer peers[] = {
    {"sweep", &bench_sweep_vtable, NULL, BENCH_BYTES_EXACT, false, &bench_sweep_level_vtable},
    {"sap", &bench_sap_vtable, NULL, BENCH_BYTES_EXACT, false, &bench_sap_level_vtable},
#ifdef QG_BENCH_HAVE_CHIPMUNK
    {"chipmunk_bbtree", &bench_chipmunk_bbtree_vtable, NULL, BENCH_BYTES_HEAP_DELTA, false,
     &bench_chipmunk_bbtree_level_vtable},
    {"chipmunk_spacehash", &bench_chipmunk_spacehash_vtable, NULL, BENCH_BYTES_HEAP_DELTA, false,
     &bench_chipmunk_spacehash_level_vtable},
#endif
#ifdef QG_BENCH_HAVE_BOX2D
    {"box2d_dynamic_tree", &bench_box2d_vtable, NULL, BENCH_BYTES_HEAP_DELTA, false, NULL},
    {"box2d_broadphase", NULL, NULL, BENCH_BYTES_HEAP_DELTA, false, &bench_box2d_level_vtable},
#endif
#ifdef QG_BENCH_HAVE_BOOST
    {"boost_rtree", &bench_boost_rtree_vtable, NULL, BENCH_BYTES_HEAP_DELTA, false,
     &bench_boost_rtree_level_vtable},
#endif
};
enum { PEER_COUNT = sizeof peers / sizeof peers[0] };

/* Peers that were asked for but are not built, so the message can say why. */
static const char *const missing_peers[] = {
#ifndef QG_BENCH_HAVE_CHIPMUNK
    "chipmunk_bbtree", "chipmunk_spacehash",
#endif
#ifndef QG_BENCH_HAVE_BOX2D
    "box2d_dynamic_tree", "box2d_broadphase",
#endif
#ifndef QG_BENCH_HAVE_BOOST
    "boost_rtree",
#endif
    NULL,
};

static bench_peer quadgrid_peer(qg_kind k) {
    bench_peer p = {qg_kind_name(k), &bench_quadgrid_vtable, &qg_kinds[k], BENCH_BYTES_EXACT,
                    k == QG_BRUTE_FORCE, &bench_quadgrid_level_vtable};
    return p;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                             */

static void usage(FILE *f) {
    fputs("usage: quadgrid-bench <workload> [options]\n"
          "       quadgrid-bench --help | --version | --list\n"
          "workloads (docs/workloads.md defines each):\n"
          "  agents   N moving squares, all overlapping pairs every frame\n"
          "  mixed    agents with 1% of them 16 times larger (same options and fields)\n"
          "  scenes   the scene table (docs/scenes.md): every scene, every kind, beside\n"
          "           sort-and-sweep; options --kind --n --frames --age --json --verify\n"
          "           --scene NAME[,NAME] (agents,mixed,dragons,outside,huge,tiny)\n"
          "           --budget S (seconds one kind may take in one scene, default 20)\n"
          "  static   N boxes, window queries\n"
          "  rays     segment casts (length 256) over the static boxes: all hits and closest hit\n"
          "  knn      the 8 nearest static boxes to each of Q points\n"
          "  level    a static 40% tile map (about 0.4 N tiles, static) and N/25 agents\n"
          "           crossing it; every pair but tile-tile each frame (--events: the\n"
          "           overlap events instead, qg_pair_events; fields began, ended)\n"
          "  knobs    every kind from qg_default_config and bounds-only beside its best hand\n"
          "           tuning (docs/tuning.md); --scene small,tiny,large,mixed,grow,gather,arrive\n"
          "           (default all), --n (default 200000), --frames (default 10), --json\n"
          "  sparse   quarter-world query on a world 95% empty\n"
          "  insert   ns per insert into an empty index\n"
          "  rollback qg_copy, qg_snapshot_write/read and qg_clone of an aged index beside a\n"
          "           memcpy of its memory_bytes, per quadgrid kind (--n default 1000000)\n"
          "  check    test the sort-and-sweep reference and the sap peer against plain loops\n"
          "  drift    agents medians fresh, aged (--age F, default 300) and rebuilt, and\n"
          "           the index's bytes at each, per kind\n"
          "  soak     agents and mixed with churn for many frames: memory held flat, pairs\n"
          "           exact; its own options (quadgrid-bench soak --help)\n"
          "options:\n"
          "  --kind K[,K...]|all  quadgrid kinds and peers (default all; --list shows them)\n"
          "  --config C           what quadgrid is told: default (qg_default_config alone,\n"
          "                       the default), bounds (the bounds only), tuned (bounds and sizes)\n"
          "  --n N                elements (agents/mixed/sparse/scenes/level 100000, static/insert 1000000)\n"
          "  --frames F           measured frames after 3 warm-up frames (default 60, scenes 10)\n"
          "  --age F              agents, mixed, scenes, level: F more unmeasured frames before the measured\n"
          "                       ones, so the figures are those of an aged layout (default 0)\n"
          "  --threads T          workers for quadgrid's parallel calls (qg_move_many,\n"
          "                       qg_cleanup_parallel, qg_pairs_parallel; static: the queries\n"
          "                       split over them) and the agents' own motion; peers run on\n"
          "                       one thread (default 1; JSON field threads)\n"
          "  --queries Q          static/rays/knn 100000, sparse 100\n"
          "  --repeat R           insert: builds, rays/knn: timed passes; median reported (default 3)\n"
          "  --json | --csv       one line per (workload, kind, n)\n"
          "  --verify             compare every frame/query with sort-and-sweep, fail on mismatch\n"
          "  --events             level: measure overlap events (qg_pair_events) instead of pairs\n"
          "                       (scenes: pairs are always compared; --verify adds queries)\n"
          "  --element-size S     with --config tuned, the typical width quadgrid is told\n"
          "                       (default 5; ignored by quadgrid otherwise); in every mode\n"
          "                       the cell size of Chipmunk2D's cpSpaceHash\n"
          "  --max-element-size S with --config tuned, the largest width quadgrid is told\n"
          "                       (default 8)\n"
          "  --cell-size S --max-depth D --leaf-capacity C   with --config tuned, quadgrid's\n"
          "                       cell size, depth and leaf capacity (0 = the kind's default)\n"
          "  --list               list the kinds and peers this build can run\n"
          "  --version            print the library's version\n"
          "exit status: 0 every answer agreed, 1 an implementation failed, 2 a wrong\n"
          "answer or a bad command line\n",
          f);
}

static qg_thread_pool *pool_to_stop;

static void stop_pool(void) {
    qg_thread_pool_destroy(pool_to_stop);
    pool_to_stop = NULL;
}

static bool parse_int(const char *s, int32_t min, int32_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > INT32_MAX) return false;
    *out = (int32_t)v;
    return true;
}

static bool parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !(v >= 0.0f) || v > 1e30f) return false;
    *out = v;
    return true;
}

static void list_kinds(void) {
    for (int k = 0; k < QG_KIND_COUNT; k++)
        printf("%-20s quadgrid%s\n", qg_kind_name((qg_kind)k),
               qg_kind_available((qg_kind)k) ? "" : " (not built in this version)");
    for (int i = 0; i < PEER_COUNT; i++)
        printf("%-20s peer%s\n", peers[i].name,
               !peers[i].vt ? " (level only)" : !peers[i].level ? " (no level: see box2d_broadphase)" : "");
    for (int i = 0; missing_peers[i]; i++)
        printf("%-20s peer (not built: QG_BENCH_PEERS=OFF or library not found at configure time)\n", missing_peers[i]);
}

static bool all_selected(const options *o) {
    return strcmp(o->kinds, "all") == 0;
}

/* Runs one implementation; `from_all` applies the size limit of quadratic
 * implementations. */
static int run_one(const options *o, const bench_peer *p, bool from_all) {
    bool limited = o->wl == W_AGENTS || o->wl == W_MIXED || o->wl == W_STATIC || o->wl == W_DRIFT ||
                   o->wl == W_RAYS || o->wl == W_KNN || o->wl == W_LEVEL;
    if ((o->wl == W_LEVEL && !p->level) || (o->wl != W_LEVEL && !p->vt)) {
        /* Not every peer has every workload (Box2D: its b2DynamicTree for
         * the others, its b2BroadPhase for level). */
        if (!from_all) note("%s has no %s workload", p->name, workload_name(o->wl));
        return from_all ? 0 : 1;
    }
    if (from_all && p->quadratic && limited && o->n > QUADRATIC_LIMIT) {
        note("skipping %s: O(n^2) above n=%d (ask for it with --kind %s)", p->name, QUADRATIC_LIMIT,
             p->name);
        return 0;
    }
    switch (o->wl) {
    case W_AGENTS:
    case W_MIXED: return run_agents(o, p);
    case W_STATIC:
    case W_SPARSE: return run_queries(o, p);
    case W_INSERT: return run_insert(o, p);
    case W_ROLLBACK: return run_rollback(o, p);
    case W_DRIFT: return run_drift(o, p);
    case W_LEVEL: return run_level(o, p);
    case W_RAYS:
    case W_KNN: /* rays.c */
        return bench_rays_run(&(bench_rays_options){o->wl == W_KNN, o->n, o->queries, o->repeat, o->verify,
                                                    (int)o->format, &o->tune}, p);
    case W_CHECK:
    case W_SCENES:
    case W_KNOBS: break;
    }
    return 1;
}

static int run_named(const options *o, const char *name) {
    qg_kind k;
    if (qg_kind_from_name(name, &k) == QG_OK) {
        if (!qg_kind_available(k)) {
            note("kind %s is not built in this version of quadgrid", name);
            return 1;
        }
        bench_peer p = quadgrid_peer(k);
        return run_one(o, &p, false);
    }
    for (int i = 0; i < PEER_COUNT; i++)
        if (strcmp(peers[i].name, name) == 0) return run_one(o, &peers[i], false);
    for (int i = 0; missing_peers[i]; i++)
        if (strcmp(missing_peers[i], name) == 0) {
            note("peer %s is not built (QG_BENCH_PEERS=OFF or its library was not found at configure time)", name);
            return 1;
        }
    note("unknown kind '%s' (see --list)", name);
    return 2;
}

/* scenes: the implementations --kind names, besides the sort-and-sweep
 * reference, which always runs. Returns 0, or 2 for an unknown name and 1
 * for one that is not built. */
static int scene_impls(const options *o, bench_peer *out, int *count) {
    *count = 0;
    if (all_selected(o)) {
        for (int k = 0; k < QG_KIND_COUNT; k++) {
            if (!qg_kind_available((qg_kind)k)) continue;
            bench_peer p = quadgrid_peer((qg_kind)k);
            if (p.quadratic && o->n > QUADRATIC_LIMIT) {
                note("skipping %s: O(n^2) above n=%d (ask for it with --kind %s)", p.name,
                     QUADRATIC_LIMIT, p.name);
                continue;
            }
            out[(*count)++] = p;
        }
        return 0;
    }
    char *list = strdup(o->kinds);
    if (!list) return note("out of memory"), 1;
    int rc = 0;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name && rc == 0;
         name = strtok_r(NULL, ",", &save)) {
        qg_kind k;
        bool found = false;
        if (strcmp(name, peers[0].name) == 0) continue; /* the reference runs anyway */
        for (int i = 0; i < *count; i++) found = found || strcmp(out[i].name, name) == 0;
        if (found) continue;
        if (qg_kind_from_name(name, &k) == QG_OK) {
            if (!qg_kind_available(k)) {
                note("kind %s is not built in this version of quadgrid", name);
                rc = 1;
            } else {
                out[(*count)++] = quadgrid_peer(k);
            }
            continue;
        }
        for (int i = 1; i < PEER_COUNT && !found; i++)
            if (strcmp(peers[i].name, name) == 0) {
                found = true;
                if (peers[i].vt) {
                    out[(*count)++] = peers[i];
                } else {
                    note("%s has no scenes workload (it runs level only)", name);
                    rc = 1;
                }
            }
        for (int i = 0; missing_peers[i] && !found; i++)
            if (strcmp(missing_peers[i], name) == 0) {
                note("peer %s is not built (QG_BENCH_PEERS=OFF or its library was not found at configure time)", name);
                rc = 1, found = true;
            }
        if (!found) {
            note("unknown kind '%s' (see --list)", name);
            rc = 2;
        }
    }
    free(list);
    return rc;
}

/* --scene NAME[,NAME...]: the bit mask of the scenes, or 0 after a message
 * naming the bad one. */
static unsigned parse_scenes(const char *arg) {
    char *list = strdup(arg);
    if (!list) return note("out of memory"), 0u;
    unsigned mask = 0;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        qgw_scene_id id;
        if (!qgw_scene_from_name(name, &id)) {
            note("unknown scene '%s' (scenes: agents, mixed, dragons, outside, huge, tiny)", name);
            mask = 0;
            break;
        }
        mask |= 1u << id;
    }
    free(list);
    if (mask == 0 && !*arg) note("--scene needs at least one scene name");
    return mask;
}

/* After several implementations ran the same workload: did they agree? */
static int cross_check(const options *o) {
    if (answer_count < 2) return 0;
    const char *what = o->wl == W_AGENTS || o->wl == W_MIXED || o->wl == W_LEVEL ? "pairs" : "hits";
    int bad = 0;
    for (int i = 1; i < answer_count; i++)
        if (answers[i].count != answers[0].count || answers[i].checksum != answers[0].checksum) {
            note("MISMATCH: %s gives %s %" PRIu64 " checksum %016" PRIx64 ", %s gives %" PRIu64
                 " checksum %016" PRIx64,
                 answers[i].name, what, answers[i].count, answers[i].checksum, answers[0].name,
                 answers[0].count, answers[0].checksum);
            bad = 1;
        }
    if (!bad)
        note("all %d implementations agree: %s %" PRIu64 ", checksum %016" PRIx64, answer_count,
             what, answers[0].count, answers[0].checksum);
    return bad ? 2 : 0;
}

/* Exit status: 0 every answer agreed; 1 an implementation failed (or memory
 * ran out); 2 a wrong answer, or a bad command line. */
int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    options o = {0};
    o.kinds = "all";
    o.threads = 1;
    o.tune.element_size = TYPICAL_WIDTH;
    o.tune.max_element_size = LARGEST_WIDTH;
    bool have_n = false, have_queries = false, have_frames = false, have_tune = false, have_age = false;
    bool have_scene = false, have_budget = false;
    o.budget_s = 20.0;
    o.scene_mask = (1u << QGW_SCENE_COUNT) - 1u;

    const char *wl = argv[1];
    if (strcmp(wl, "--help") == 0 || strcmp(wl, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(wl, "--list") == 0) {
        list_kinds();
        return 0;
    }
    if (strcmp(wl, "--version") == 0) {
        printf("quadgrid-bench %d.%d.%d\n", QG_VERSION_MAJOR, QG_VERSION_MINOR, QG_VERSION_PATCH);
        return 0;
    }
    int bench_soak_main(int argc, char **argv); /* soak.c: its own options */
    if (strcmp(wl, "soak") == 0) return bench_soak_main(argc - 1, argv + 1);
    if (strcmp(wl, "agents") == 0) o.wl = W_AGENTS;
    else if (strcmp(wl, "mixed") == 0) o.wl = W_MIXED;
    else if (strcmp(wl, "scenes") == 0) o.wl = W_SCENES;
    else if (strcmp(wl, "drift") == 0) o.wl = W_DRIFT;
    else if (strcmp(wl, "static") == 0) o.wl = W_STATIC;
    else if (strcmp(wl, "sparse") == 0) o.wl = W_SPARSE;
    else if (strcmp(wl, "insert") == 0) o.wl = W_INSERT;
    else if (strcmp(wl, "check") == 0) o.wl = W_CHECK;
    else if (strcmp(wl, "rays") == 0) o.wl = W_RAYS;
    else if (strcmp(wl, "knn") == 0) o.wl = W_KNN;
    else if (strcmp(wl, "level") == 0) o.wl = W_LEVEL;
    else if (strcmp(wl, "knobs") == 0) o.wl = W_KNOBS;
    else if (strcmp(wl, "rollback") == 0) o.wl = W_ROLLBACK;
    else {
        note("unknown workload '%s'", wl);
        usage(stderr);
        return 2;
    }
    o.frames = 60;
    o.repeat = 3;

    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true, takes = true;
        if (strcmp(arg, "--kind") == 0) ok = val != NULL, o.kinds = val;
        else if (strcmp(arg, "--n") == 0) ok = val && parse_int(val, 0, &o.n), have_n = true;
        else if (strcmp(arg, "--frames") == 0) ok = val && parse_int(val, 1, &o.frames), have_frames = true;
        else if (strcmp(arg, "--age") == 0) ok = val && parse_int(val, 0, &o.age), have_age = true;
        else if (strcmp(arg, "--threads") == 0)
            ok = val && parse_int(val, 1, &o.threads) && o.threads <= MAX_THREADS;
        else if (strcmp(arg, "--queries") == 0)
            ok = val && parse_int(val, 1, &o.queries), have_queries = true;
        else if (strcmp(arg, "--repeat") == 0) ok = val && parse_int(val, 1, &o.repeat);
        else if (strcmp(arg, "--element-size") == 0)
            ok = val && parse_float(val, &o.tune.element_size), have_tune = true;
        else if (strcmp(arg, "--max-element-size") == 0)
            ok = val && parse_float(val, &o.tune.max_element_size), have_tune = true;
        else if (strcmp(arg, "--cell-size") == 0)
            ok = val && parse_float(val, &o.tune.cell_size), have_tune = true;
        else if (strcmp(arg, "--max-depth") == 0)
            ok = val && parse_int(val, 0, &o.tune.max_depth), have_tune = true;
        else if (strcmp(arg, "--leaf-capacity") == 0)
            ok = val && parse_int(val, 0, &o.tune.leaf_capacity), have_tune = true;
        else if (strcmp(arg, "--scene") == 0 && o.wl == W_KNOBS)
            ok = val != NULL, o.knob_scenes = val;
        else if (strcmp(arg, "--scene") == 0)
            ok = val && (o.scene_mask = parse_scenes(val)) != 0, have_scene = true;
        else if (strcmp(arg, "--config") == 0) {
            ok = val != NULL;
            if (ok && strcmp(val, "default") == 0) o.tune.config_mode = BENCH_CONFIG_DEFAULT;
            else if (ok && strcmp(val, "bounds") == 0) o.tune.config_mode = BENCH_CONFIG_BOUNDS;
            else if (ok && strcmp(val, "tuned") == 0) o.tune.config_mode = BENCH_CONFIG_TUNED;
            else ok = false;
        }
        else if (strcmp(arg, "--budget") == 0) {
            int32_t b = 0;
            ok = val && parse_int(val, 1, &b);
            o.budget_s = b, have_budget = true;
        }
        else {
            takes = false;
            if (strcmp(arg, "--json") == 0) o.format = OUT_JSON;
            else if (strcmp(arg, "--csv") == 0) o.format = OUT_CSV;
            else if (strcmp(arg, "--verify") == 0) o.verify = true;
            else if (strcmp(arg, "--events") == 0) o.events = true;
            else if (strcmp(arg, "--list") == 0) {
                list_kinds();
                return 0;
            } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
                usage(stdout);
                return 0;
            } else {
                note("unknown option '%s'", arg);
                usage(stderr);
                return 2;
            }
        }
        if (!ok) {
            note("bad or missing value for %s", arg);
            return 2;
        }
        if (takes) i++;
    }
    if (!have_n) o.n = (o.wl == W_STATIC || o.wl == W_INSERT || o.wl == W_ROLLBACK || o.wl == W_RAYS || o.wl == W_KNN) ? 1000000 : o.wl == W_CHECK ? 3000 : 100000;
    if (!have_queries) o.queries = (o.wl == W_STATIC || o.wl == W_RAYS || o.wl == W_KNN) ? 100000 : o.wl == W_CHECK ? 1000 : 100;
    /* One pool for the whole run, its threads reused by every call. */
    static qg_thread_pool *pool;
    static qg_jobs jobs;
    if (o.threads > 1) {
        if (qg_thread_pool_create(o.threads, &pool) != QG_OK) return note("cannot start %d threads", o.threads), 1;
        atexit(stop_pool);
        pool_to_stop = pool;
        jobs = qg_thread_pool_jobs(pool);
        o.jobs = &jobs;
    }
    if (o.wl == W_CHECK) {
        if (!have_frames) o.frames = 10;
        return run_check(&o);
    }
    if (o.wl == W_KNOBS) {
        if (!have_n) o.n = 200000;
        if (!have_frames) o.frames = 10;
        return bench_knobs(o.kinds, o.knob_scenes ? o.knob_scenes : "small,tiny,large,mixed,grow,gather,arrive", o.n,
                           o.frames, o.format == OUT_JSON);
    }
    if (have_age && o.wl != W_AGENTS && o.wl != W_MIXED && o.wl != W_DRIFT && o.wl != W_LEVEL &&
        o.wl != W_SCENES) {
        note("--age is an option of the agents, mixed, scenes, drift and level workloads");
        return 2;
    }
    if (o.events && o.wl != W_LEVEL) {
        note("--events is an option of the level workload");
        return 2;
    }
    if ((o.wl == W_RAYS || o.wl == W_KNN) && o.threads > 1) {
        note("rays and knn run on one thread (--threads does not apply)");
        return 2;
    }
    if ((have_scene || have_budget) && o.wl != W_SCENES) {
        note("--scene and --budget are options of the scenes workload");
        return 2;
    }
    if (o.wl == W_SCENES) {
        if (have_tune) {
            note("scenes: each scene has its own configuration (docs/scenes.md); "
                 "--element-size, --max-element-size, --cell-size, --max-depth and --leaf-capacity do not apply");
            return 2;
        }
        if (have_queries || o.format == OUT_CSV) {
            note("scenes: --queries and --csv do not apply");
            return 2;
        }
        if (o.n < 1) {
            note("scenes: --n must be at least 1");
            return 2;
        }
        if (!have_frames) o.frames = 10;
        bench_peer impls[QG_KIND_COUNT + PEER_COUNT];
        int impl_count = 0;
        int r = scene_impls(&o, impls, &impl_count);
        if (r) return r;
        return run_scenes(&o, &peers[0], impls, impl_count);
    }

    if (o.wl == W_DRIFT && !have_frames) o.frames = 20;
    int rc = 0;
    if (all_selected(&o)) {
        for (int k = 0; k < QG_KIND_COUNT; k++) {
            if (!qg_kind_available((qg_kind)k)) continue;
            bench_peer p = quadgrid_peer((qg_kind)k);
            int r = run_one(&o, &p, true);
            if (r > rc) rc = r;
        }
        for (int i = 0; i < PEER_COUNT; i++) {
            int r = run_one(&o, &peers[i], true);
            if (r > rc) rc = r;
        }
        for (int i = 0; missing_peers[i]; i++)
            note("peer %s not built: QG_BENCH_PEERS=OFF or its library was not found at configure time", missing_peers[i]);
    } else {
        char *list = strdup(o.kinds);
        if (!list) return note("out of memory"), 1;
        for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
             name = strtok_r(NULL, ",", &save)) {
            int r = run_named(&o, name);
            if (r > rc) rc = r;
        }
        free(list);
    }
    if (o.wl != W_INSERT && o.wl != W_ROLLBACK) {
        int r = o.wl == W_RAYS || o.wl == W_KNN ? bench_rays_cross_check() : cross_check(&o);
        if (r > rc) rc = r;
    }
    return rc;
}

