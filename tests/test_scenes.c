// SPDX-License-Identifier: MIT
/* The scene table (docs/scenes.md) at small sizes: one kind (argv[1]) against
 * QG_BRUTE_FORCE on every scene, frame by frame, with the configuration a
 * user would give (apps/common's qgw_scene_config). Every frame: the same
 * pairs as sets, the same answers to a few queries (one unbounded, some far
 * outside the bounds, some windows), and qg_validate. Plus the check values
 * of the `mixed` workload (docs/workloads.md) and the exactness of the
 * huge and tiny scenes (agents scaled by 2^100 and 2^-100 give exactly the
 * agents' pairs).
 *
 * Boxes come from the workload generator (seed 12345, fixed); the query
 * windows from a tu_rng seeded with QG_TEST_SEED or the default below. Both
 * are printed on failure. To reproduce: QG_TEST_SEED=<seed> test_scenes KIND. */
#include "test_util.h"
#include "workload.h"

#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static qg_kind g_kind = QG_BRUTE_FORCE;
static uint64_t g_seed = 0x5ce9e5ull;

/* Sizes: a few thousand boxes, a few frames (the outside scene spreads its
 * boxes over 81 times the default bounds, so it needs more of them to have
 * pairs at all). */
enum { SCENE_N = 3000, OUTSIDE_N = 5000, FRAMES = 4 };

static int32_t scene_n(qgw_scene_id id)
{
    return id == QGW_SCENE_OUTSIDE ? OUTSIDE_N : SCENE_N;
}

/* What is running, for failure messages. */
typedef struct where {
    const char *scene;
    int32_t n;
    int frame;
    const char *what;
} where;

static void sfail(const where *w, const char *fmt, ...)
{
    char context[256], hint[128];
    snprintf(context, sizeof context,
             "kind=%s scene=%s n=%d frame=%d (%s) workload seed=%" PRIu64 " query seed=%#" PRIx64,
             qg_kind_name(g_kind), w->scene, (int)w->n, w->frame, w->what, (uint64_t)QGW_SEED, g_seed);
    snprintf(hint, sizeof hint, "  reproduce: QG_TEST_SEED=%#" PRIx64 " test_scenes %s\n", g_seed,
             qg_kind_name(g_kind));
    va_list ap;
    va_start(ap, fmt);
    tu_vfail(context, hint, fmt, ap);
    va_end(ap);
}

/* ---- one index over a scene's boxes, answers named by agent ------------- */

typedef struct ix {
    qg_kind kind;
    qg_index *index;
    qg_handle *handle;  /* agent -> handle */
    int32_t *agent_of;  /* handle -> agent */
    int32_t agent_cap;
} ix;

static void ix_open(ix *x, qg_kind kind, const qgw_scene *s, where *w)
{
    memset(x, 0, sizeof *x);
    x->kind = kind;
    const int32_t n = s->agents.n;
    qg_config cfg = qgw_scene_config(s, kind);
    qg_status st = qg_create(&cfg, &x->index);
    if (st != QG_OK)
        sfail(w, "qg_create(%s, bounds [%g %g %g %g], element_size %g, max_element_size %g): %s",
              qg_kind_name(kind), (double)cfg.bounds.min_x, (double)cfg.bounds.min_y,
              (double)cfg.bounds.max_x, (double)cfg.bounds.max_y, (double)cfg.element_size,
              (double)cfg.max_element_size, qg_status_name(st));
    x->handle = malloc((size_t)(n > 0 ? n : 1) * sizeof *x->handle);
    assert_non_null(x->handle);
    for (int32_t i = 0; i < n; i++) {
        qg_handle h = qg_insert(x->index, s->boxes[i]);
        if (h < 0) {
            qg_rect b = s->boxes[i];
            sfail(w, "%s: qg_insert of agent %d [%g %g %g %g] (width %g): %s", qg_kind_name(kind),
                  (int)i, (double)b.min_x, (double)b.min_y, (double)b.max_x, (double)b.max_y,
                  (double)(b.max_x - b.min_x), qg_status_name((qg_status)h));
        }
        x->handle[i] = h;
        if (h >= x->agent_cap) {
            int32_t cap = x->agent_cap ? x->agent_cap : 1024;
            while (cap <= h) cap *= 2;
            x->agent_of = realloc(x->agent_of, (size_t)cap * sizeof *x->agent_of);
            assert_non_null(x->agent_of);
            x->agent_cap = cap;
        }
        x->agent_of[h] = i;
    }
    qg_cleanup(x->index);
}

static void ix_validate(const ix *x, where *w)
{
    qg_status st = qg_validate(x->index);
    if (st != QG_OK)
        sfail(w, "qg_validate(%s): %s", qg_kind_name(x->kind), qg_status_name(st));
    if (qg_count(x->index) != w->n)
        sfail(w, "qg_count(%s) = %d", qg_kind_name(x->kind), (int)qg_count(x->index));
}

/* Step 2 of a frame: every agent's new box, then the once-a-frame upkeep. */
static void ix_update(ix *x, const qgw_scene *s, where *w)
{
    for (int32_t i = 0; i < s->agents.n; i++) {
        qg_status st = qg_move(x->index, x->handle[i], s->boxes[i]);
        if (st != QG_OK)
            sfail(w, "%s: qg_move of agent %d: %s", qg_kind_name(x->kind), (int)i,
                  qg_status_name(st));
    }
    qg_cleanup(x->index);
}

static void ix_close(ix *x)
{
    qg_destroy(x->index);
    free(x->handle);
    free(x->agent_of);
    memset(x, 0, sizeof *x);
}

typedef struct named {
    const ix *x;
    tu_vec out;
    long bad_order;
} named;

static bool named_pair(qg_handle a, qg_handle b, void *user)
{
    named *c = user;
    if (a >= b)
        c->bad_order++;
    int32_t i = c->x->agent_of[a], j = c->x->agent_of[b];
    if (i > j) {
        int32_t t = i;
        i = j;
        j = t;
    }
    tu_vec_push(&c->out, ((int64_t)i << 32) | j);
    return true;
}

static bool named_hit(qg_handle h, void *user)
{
    named *c = user;
    tu_vec_push(&c->out, c->x->agent_of[h]);
    return true;
}

/* The pairs of x as sorted (lo agent << 32 | hi agent), duplicates kept. */
static void ix_pairs(const ix *x, tu_vec *out, where *w)
{
    named c = {x, {0}, 0};
    qg_status st = qg_pairs(x->index, named_pair, &c);
    if (st != QG_OK)
        sfail(w, "qg_pairs(%s): %s", qg_kind_name(x->kind), qg_status_name(st));
    if (c.bad_order)
        sfail(w, "qg_pairs(%s): %ld pairs with a >= b", qg_kind_name(x->kind), c.bad_order);
    tu_vec_sort(&c.out);
    *out = c.out;
}

static void ix_query(const ix *x, qg_rect area, tu_vec *out, where *w)
{
    named c = {x, {0}, 0};
    qg_status st = qg_query(x->index, area, named_hit, &c);
    if (st != QG_OK)
        sfail(w, "qg_query(%s, [%g %g %g %g]): %s", qg_kind_name(x->kind), (double)area.min_x,
              (double)area.min_y, (double)area.max_x, (double)area.max_y, qg_status_name(st));
    tu_vec_sort(&c.out);
    *out = c.out;
}

/* got and want (sorted) must be the same set, each element once. */
static void same_set(const tu_vec *got, const tu_vec *want, bool pairs, where *w)
{
    int64_t dup;
    if (tu_vec_has_dup(got, &dup))
        sfail(w, "%s reported twice", pairs ? "a pair was" : "an element was");
    long d = tu_vec_first_diff(got, want);
    if (d < 0)
        return;
    int64_t g = (size_t)d < got->n ? got->v[d] : -1, r = (size_t)d < want->n ? want->v[d] : -1;
    if (pairs)
        sfail(w, "%zu pairs, brute_force %zu; first difference at %ld: (%d, %d) vs (%d, %d)",
              got->n, want->n, d, (int)(g >> 32), (int)(g & 0xffffffff), (int)(r >> 32),
              (int)(r & 0xffffffff));
    else
        sfail(w, "%zu hits, brute_force %zu; first difference at %ld: agent %d vs %d", got->n,
              want->n, d, (int)g, (int)r);
}

/* ---- the queries of a frame -------------------------------------------- */

enum { QUERIES = 9 };

/* In the scene's coordinates: the whole plane (unbounded); the half plane
 * left of a third of the world; everything left of the bounds; an area far
 * outside both the bounds and the world; an area far outside the bounds
 * whatever the world (past its corner by the bounds' own size); four
 * windows 16x16 around agents chosen by the rng (mapped like the boxes). */
static void frame_queries(const qgw_scene *s, tu_rng *rng, qg_rect q[QUERIES])
{
    const float inf = INFINITY, W = s->agents.world;
    const qg_rect b = s->bounds;
    q[0] = tu_rect(-inf, -inf, inf, inf);
    q[1] = qgw_scene_map(s, tu_rect(-inf, -inf, W / 3.0f, inf));
    q[2] = tu_rect(-inf, -inf, b.min_x, inf);
    q[3] = qgw_scene_map(s, tu_rect(3.0f * W, -5.0f * W, 5.0f * W, -3.0f * W));
    float sx = b.max_x - b.min_x, sy = b.max_y - b.min_y;
    q[4] = isfinite(sx) && isfinite(sy) && isfinite(b.max_x + 3.0f * sx)
               ? tu_rect(b.max_x + 2.0f * sx, b.max_y + 2.0f * sy, b.max_x + 3.0f * sx, inf)
               : tu_rect(b.max_x, b.max_y, inf, inf);
    for (int k = 5; k < QUERIES; k++) {
        int32_t i = (int32_t)tu_rng_below(rng, (uint32_t)s->agents.n);
        float x = s->agents.x[i], y = s->agents.y[i];
        q[k] = qgw_scene_map(s, tu_rect(x - 8.0f, y - 8.0f, x + 8.0f, y + 8.0f));
    }
}

/* ---- the oracle ---------------------------------------------------------- */

/* The answers every kind must give: QG_BRUTE_FORCE's. When the kind under
 * test is QG_BRUTE_FORCE itself, a second one would only repeat it (at twice
 * the O(n^2) cost), so it is checked against the workload's sort-and-sweep
 * pairs and plain loops instead. */
typedef struct oracle {
    bool plain;
    ix bf;
    const qgw_scene *s;
    qgw_sweep sweep;
} oracle;

static void oracle_open(oracle *o, const qgw_scene *s, where *w)
{
    memset(o, 0, sizeof *o);
    o->s = s;
    o->plain = g_kind == QG_BRUTE_FORCE;
    if (!o->plain)
        ix_open(&o->bf, QG_BRUTE_FORCE, s, w);
}

static void oracle_update(oracle *o, where *w)
{
    if (!o->plain) {
        ix_update(&o->bf, o->s, w);
        ix_validate(&o->bf, w);
    }
}

static bool plain_pair(qg_handle a, qg_handle b, void *user)
{
    tu_vec_push(user, ((int64_t)a << 32) | b);
    return true;
}

static void oracle_pairs(oracle *o, tu_vec *out, where *w)
{
    if (!o->plain) {
        ix_pairs(&o->bf, out, w);
        return;
    }
    memset(out, 0, sizeof *out);
    assert_true(qgw_sweep_sort(&o->sweep, o->s->boxes, o->s->agents.n));
    qgw_sweep_pairs(&o->sweep, plain_pair, out);
    tu_vec_sort(out);
}

static void oracle_query(oracle *o, qg_rect area, tu_vec *out, where *w)
{
    if (!o->plain) {
        ix_query(&o->bf, area, out, w);
        return;
    }
    memset(out, 0, sizeof *out);
    for (int32_t i = 0; i < o->s->agents.n; i++)
        if (tu_overlap(area, o->s->boxes[i]))
            tu_vec_push(out, i);
}

static void oracle_close(oracle *o)
{
    if (!o->plain)
        ix_close(&o->bf);
    qgw_sweep_free(&o->sweep);
}

/* ---- the scenes ---------------------------------------------------------- */

static void test_scene(void **state)
{
    const qgw_scene_id id = *(const qgw_scene_id *)*state;
    const int32_t n = scene_n(id);
    where w = {qgw_scene_name(id), n, 0, "build"};
    qgw_scene s;
    assert_true(qgw_scene_init(&s, id, n));
    ix k;
    oracle bf;
    ix_open(&k, g_kind, &s, &w);
    oracle_open(&bf, &s, &w);
    tu_rng rng;
    tu_rng_seed(&rng, g_seed ^ (uint64_t)id);
    qgw_sweep sweep = {0};
    uint64_t total_pairs = 0, total_hits = 0;
    for (int frame = 0; frame <= FRAMES; frame++) {
        w.frame = frame;
        if (frame > 0) {
            w.what = "update";
            qgw_scene_move(&s);
            ix_update(&k, &s, &w);
            oracle_update(&bf, &w);
        }
        w.what = "validate";
        ix_validate(&k, &w);

        w.what = "pairs";
        tu_vec got, want;
        ix_pairs(&k, &got, &w);
        oracle_pairs(&bf, &want, &w);
        same_set(&got, &want, true, &w);
        /* The oracle itself against the workload's reference. */
        qgw_sum ref;
        assert_true(qgw_reference_sum(&sweep, s.boxes, n, &ref));
        if (ref.count != want.n)
            sfail(&w, "brute_force has %zu pairs, the sort-and-sweep reference %" PRIu64, want.n,
                  ref.count);
        total_pairs += want.n;
        tu_vec_free(&got);
        tu_vec_free(&want);

        qg_rect q[QUERIES];
        frame_queries(&s, &rng, q);
        for (int i = 0; i < QUERIES; i++) {
            char what[160];
            snprintf(what, sizeof what, "query %d [%g %g %g %g]", i, (double)q[i].min_x,
                     (double)q[i].min_y, (double)q[i].max_x, (double)q[i].max_y);
            w.what = what;
            ix_query(&k, q[i], &got, &w);
            oracle_query(&bf, q[i], &want, &w);
            same_set(&got, &want, false, &w);
            if (i == 0 && want.n != (size_t)n)
                sfail(&w, "the whole plane holds %zu of %d boxes", want.n, (int)n);
            total_hits += want.n;
            tu_vec_free(&got);
            tu_vec_free(&want);
        }
        /* A point query at an agent's centre finds at least that agent. */
        int32_t a = (int32_t)tu_rng_below(&rng, (uint32_t)n);
        qg_rect c = qgw_scene_map(&s, tu_rect(s.agents.x[a], s.agents.y[a], s.agents.x[a],
                                              s.agents.y[a]));
        w.what = "point query";
        ix_query(&k, c, &got, &w);
        oracle_query(&bf, c, &want, &w);
        same_set(&got, &want, false, &w);
        if (want.n == 0)
            sfail(&w, "the point query at agent %d's centre finds nothing", (int)a);
        tu_vec_free(&got);
        tu_vec_free(&want);
    }
    /* Every scene has pairs to compare, and queries with hits. */
    if (total_pairs == 0)
        sfail(&w, "no pairs in %d frames: the scene tests nothing", FRAMES + 1);
    print_message("scene %s n=%d: %" PRIu64 " pairs and %" PRIu64 " hits over %d frames, same as brute_force\n",
                  w.scene, (int)n, total_pairs, total_hits, FRAMES + 1);
    (void)total_hits;
    qgw_sweep_free(&sweep);
    ix_close(&k);
    oracle_close(&bf);
    qgw_scene_free(&s);
}

/* ---- check values and exactness ---------------------------------------- */

/* docs/workloads.md: mixed, frame 1 (after the first move). */
static void test_mixed_check_values(void **state)
{
    (void)state;
    static const struct {
        int32_t n;
        uint64_t pairs, checksum;
    } check[] = {
        {10000, 5469, UINT64_C(0xb84f8925109999a7)},
        {100000, 52066, UINT64_C(0x8986f0ae09f3c05c)},
    };
    for (size_t c = 0; c < sizeof check / sizeof check[0]; c++) {
        qgw_agents a;
        assert_true(qgw_agents_init_mixed(&a, check[c].n));
        /* 1% of the agents, exactly every hundredth, are the large ones. */
        for (int32_t i = 0; i < a.n; i++)
            if ((a.h[i] >= 16.0f) != (i % 100 == 0))
                fail_msg("mixed n=%d: agent %d has h %g", (int)a.n, (int)i, (double)a.h[i]);
        qgw_agents_move(&a);
        qgw_sweep sweep = {0};
        qgw_sum ref;
        assert_true(qgw_reference_sum(&sweep, a.boxes, a.n, &ref));
        if (ref.count != check[c].pairs || ref.checksum != check[c].checksum)
            fail_msg("mixed n=%d frame 1: %" PRIu64 " pairs checksum %016" PRIx64
                     ", workloads.md says %" PRIu64 " %016" PRIx64,
                     (int)a.n, ref.count, ref.checksum, check[c].pairs, check[c].checksum);
        print_message("mixed n=%d frame 1: %" PRIu64 " pairs, checksum %016" PRIx64 "\n", (int)a.n,
                      ref.count, ref.checksum);
        qgw_sweep_free(&sweep);
        qgw_agents_free(&a);
    }

    /* The kind itself, through the mixed scene (the same boxes, with the
     * bench's configuration), at N = 10,000 frame 1. */
    qgw_scene s;
    assert_true(qgw_scene_init(&s, QGW_SCENE_MIXED, check[0].n));
    where w = {"mixed", check[0].n, 0, "build"};
    ix k;
    ix_open(&k, g_kind, &s, &w);
    qgw_scene_move(&s);
    w.frame = 1;
    w.what = "update";
    ix_update(&k, &s, &w);
    qgw_sum sum = {0, 0};
    w.what = "pairs";
    assert_int_equal(qg_pairs(k.index, qgw_sum_pair, &sum), QG_OK);
    /* The handles are the agents when the kind numbers them in order. */
    bool identity = true;
    for (int32_t i = 0; i < s.agents.n; i++) identity = identity && k.handle[i] == i;
    if (identity && (sum.count != check[0].pairs || sum.checksum != check[0].checksum))
        sfail(&w, "%" PRIu64 " pairs checksum %016" PRIx64 ", workloads.md says %" PRIu64
                  " %016" PRIx64,
              sum.count, sum.checksum, check[0].pairs, check[0].checksum);
    if (!identity) {
        tu_vec got;
        ix_pairs(&k, &got, &w);
        qgw_sum named_sum = {0, 0};
        for (size_t i = 0; i < got.n; i++)
            qgw_sum_pair((qg_handle)(got.v[i] >> 32), (qg_handle)(got.v[i] & 0xffffffff), &named_sum);
        if (named_sum.count != check[0].pairs || named_sum.checksum != check[0].checksum)
            sfail(&w, "%" PRIu64 " pairs checksum %016" PRIx64 ", workloads.md says %" PRIu64
                      " %016" PRIx64,
                  named_sum.count, named_sum.checksum, check[0].pairs, check[0].checksum);
        sum = named_sum;
        tu_vec_free(&got);
    }
    print_message("mixed n=%d frame 1 through %s: %" PRIu64 " pairs, checksum %016" PRIx64 "\n",
                  (int)s.agents.n, qg_kind_name(g_kind), sum.count, sum.checksum);
    ix_close(&k);
    qgw_scene_free(&s);
}

/* Scaling by 2^100 or 2^-100 is exact, so huge and tiny are agents: the
 * kind must give exactly the agents' pairs, frame by frame, and every box
 * must be the agents' box times the scale. */
static void test_huge_tiny_are_agents(void **state)
{
    (void)state;
    const int32_t n = SCENE_N;
    static const qgw_scene_id ids[3] = {QGW_SCENE_AGENTS, QGW_SCENE_HUGE, QGW_SCENE_TINY};
    qgw_scene s[3];
    ix k[3];
    for (int j = 0; j < 3; j++) {
        where w = {qgw_scene_name(ids[j]), n, 0, "build"};
        assert_true(qgw_scene_init(&s[j], ids[j], n));
        ix_open(&k[j], g_kind, &s[j], &w);
    }
    assert_true(s[1].scale == 0x1p100f && s[2].scale == 0x1p-100f);
    for (int frame = 0; frame <= FRAMES; frame++) {
        tu_vec agents_pairs = {0};
        for (int j = 0; j < 3; j++) {
            where w = {qgw_scene_name(ids[j]), n, frame, "update"};
            if (frame > 0) {
                qgw_scene_move(&s[j]);
                ix_update(&k[j], &s[j], &w);
            }
            for (int32_t i = 0; i < n && j > 0; i++) {
                const qg_rect a = s[0].boxes[i], b = s[j].boxes[i];
                const float m = s[j].scale;
                if (!(b.min_x == a.min_x * m && b.min_y == a.min_y * m && b.max_x == a.max_x * m &&
                      b.max_y == a.max_y * m && b.min_x / m == a.min_x && b.max_y / m == a.max_y &&
                      (b.max_x > b.min_x) == (a.max_x > a.min_x)))
                    sfail(&w, "agent %d: box [%g %g %g %g] is not the agents' box [%g %g %g %g] "
                              "scaled exactly", (int)i, (double)b.min_x, (double)b.min_y,
                          (double)b.max_x, (double)b.max_y, (double)a.min_x, (double)a.min_y,
                          (double)a.max_x, (double)a.max_y);
            }
            w.what = "pairs";
            tu_vec got;
            ix_pairs(&k[j], &got, &w);
            if (j == 0) {
                agents_pairs = got;
                if (got.n == 0) sfail(&w, "agents has no pairs");
                continue;
            }
            long d = tu_vec_first_diff(&got, &agents_pairs);
            if (d >= 0)
                sfail(&w, "%zu pairs, agents at the same n and frame %zu (first difference at %ld)",
                      got.n, agents_pairs.n, d);
            tu_vec_free(&got);
        }
        tu_vec_free(&agents_pairs);
    }
    for (int j = 0; j < 3; j++) {
        ix_close(&k[j]);
        qgw_scene_free(&s[j]);
    }
}

int main(int argc, char **argv)
{
    if (!tu_kind_arg(argc, argv, &g_kind))
        return 2;
    /* Unlike the other per-kind programs, no case here can run without the
     * kind, so it skips before printing the seeds. */
    if (!qg_kind_available(g_kind))
        return 77;
    g_seed = tu_env_seed(g_seed);
    fprintf(stderr, "scenes %s: workload seed %" PRIu64 ", query seed %#" PRIx64 "\n", argv[1],
            (uint64_t)QGW_SEED, g_seed);
    static qgw_scene_id ids[QGW_SCENE_COUNT];
    static char names[QGW_SCENE_COUNT][32];
    struct CMUnitTest tests[QGW_SCENE_COUNT + 2];
    for (int i = 0; i < QGW_SCENE_COUNT; i++) {
        ids[i] = (qgw_scene_id)i;
        snprintf(names[i], sizeof names[i], "scene_%s", qgw_scene_name(ids[i]));
        tests[i] = (struct CMUnitTest){names[i], test_scene, NULL, NULL, &ids[i]};
    }
    tests[QGW_SCENE_COUNT] =
        (struct CMUnitTest)cmocka_unit_test(test_mixed_check_values);
    tests[QGW_SCENE_COUNT + 1] =
        (struct CMUnitTest)cmocka_unit_test(test_huge_tiny_are_agents);
    return tu_run_kind_tests("scenes", g_kind, tests);
}
