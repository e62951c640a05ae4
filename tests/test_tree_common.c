// SPDX-License-Identifier: MIT
/* The helpers the tree kinds share (src/tree_common.h), tested directly:
 * every tree's exactness rests on its float-to-integer mapping being
 * conservative (a box's integer range covers the cell of every point in the
 * box), whatever the world: tiny, huge, far off, +-FLT_MAX, and boxes
 * outside it. Also the re-fit's square world, depth choice and the cell
 * arithmetic (quadrant masks, spread). Internal header: static inline
 * helpers only, so nothing here needs a symbol the library hides. */
#include "../src/tree_common.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1du;
}

/// Uniform in [0, 1).
static double unit(void)
{
    return (double)(rng() >> 11) * (1.0 / 9007199254740992.0);
}

/// Any finite float, spread over every exponent.
static float any_float(void)
{
    for (;;) {
        const uint32_t bits = (uint32_t)rng();
        float f;
        memcpy(&f, &bits, sizeof f);
        if (isfinite(f))
            return f;
    }
}

/// A float between lo and hi (lo <= hi), in double so huge spans stay finite.
static float between(float lo, float hi)
{
    double v = (double)lo + ((double)hi - (double)lo) * unit();
    float f = qg_tree_to_float(v);
    return f < lo ? lo : f > hi ? hi : f;
}

/// A world of one of the shapes the README promises to handle exactly.
static qg_rect random_world(void)
{
    switch (rng() % 7) {
    case 0:
        return (qg_rect){0, 0, 1024, 1024};
    case 1:
        return (qg_rect){-FLT_MAX, -FLT_MAX, FLT_MAX, FLT_MAX};
    case 2: { /* 1e-30 wide somewhere */
        const float c = any_float() * 1e-10f;
        return (qg_rect){c, c, c + 1e-30f > c ? c + 1e-30f : nextafterf(c, FLT_MAX),
                         c + 1e-30f > c ? c + 1e-30f : nextafterf(c, FLT_MAX)};
    }
    case 3: /* far off, narrow against its magnitude */
        return (qg_rect){1e30f, -3e30f, 1.0001e30f, -2.9999e30f};
    case 4: /* one side at the float limit */
        return (qg_rect){-FLT_MAX, 0, 0, FLT_MAX};
    case 5: { /* one ulp wide */
        const float c = any_float();
        const float n = nextafterf(c, FLT_MAX);
        if (!(n > c) || !isfinite(n))
            return (qg_rect){0, 0, 1, 1};
        return (qg_rect){c, c, n, n};
    }
    default: { /* any two finite floats on each axis */
        float a = any_float(), b = any_float(), c = any_float(), d = any_float();
        if (a == b || c == d)
            return (qg_rect){-1, -1, 1, 1};
        return (qg_rect){a < b ? a : b, c < d ? c : d, a < b ? b : a, c < d ? d : c};
    }
    }
}

/// A box near, inside, around or far outside world w: tiny, huge, zero-size.
static qg_rect random_box(qg_rect w)
{
    float x0, y0, x1, y1;
    switch (rng() % 5) {
    case 0: /* inside */
        x0 = between(w.min_x, w.max_x), x1 = between(x0, w.max_x);
        y0 = between(w.min_y, w.max_y), y1 = between(y0, w.max_y);
        break;
    case 1: /* a point, anywhere */
        x0 = x1 = any_float(), y0 = y1 = any_float();
        break;
    case 2: /* huge */
        x0 = -FLT_MAX, x1 = between(0, FLT_MAX), y0 = between(-FLT_MAX, 0), y1 = FLT_MAX;
        break;
    case 3: /* one ulp around a point inside */
        x0 = between(w.min_x, w.max_x), y0 = between(w.min_y, w.max_y);
        x1 = nextafterf(x0, FLT_MAX), y1 = nextafterf(y0, FLT_MAX);
        break;
    default: { /* any finite corners */
        const float a = any_float(), b = any_float(), c = any_float(), d = any_float();
        x0 = a < b ? a : b, x1 = a < b ? b : a, y0 = c < d ? c : d, y1 = c < d ? d : c;
    }
    }
    return (qg_rect){x0, y0, x1, y1};
}

/// A point of box b: a corner, an ulp inside a corner, or anywhere in it.
static float point_in(float lo, float hi)
{
    switch (rng() % 4) {
    case 0:
        return lo;
    case 1:
        return hi;
    case 2: {
        const float n = nextafterf(lo, hi);
        return n <= hi ? n : hi;
    }
    default:
        return between(lo, hi);
    }
}

static int32_t random_side(void)
{
    /* The pointer trees' fixed side, or a level quadtree's 2^depth. */
    return rng() % 2 ? QG_TREE_SIDE : 1 << (1 + rng() % 11);
}

static void test_map_conservative(void **state)
{
    (void)state;
    for (int round = 0; round < 20000; ++round) {
        const qg_rect world = random_world();
        const int32_t side = random_side();
        qg_tree_world w;
        qg_tree_world_reset(&w, world, side);
        assert_true(w.scale_x > 0.0f && isfinite(w.scale_x));
        assert_true(w.scale_y > 0.0f && isfinite(w.scale_y));
        for (int k = 0; k < 8; ++k) {
            const qg_rect b = random_box(world);
            const qg_tree_ibox ib = qg_tree_map_box(&w, b, side);
            /* The vector map is the scalar map of each corner. */
            assert_int_equal(ib.x0, qg_tree_map(b.min_x, world.min_x, w.scale_x, side));
            assert_int_equal(ib.y0, qg_tree_map(b.min_y, world.min_y, w.scale_y, side));
            assert_int_equal(ib.x1, qg_tree_map(b.max_x, world.min_x, w.scale_x, side));
            assert_int_equal(ib.y1, qg_tree_map(b.max_y, world.min_y, w.scale_y, side));
            assert_true(0 <= ib.x0 && ib.x0 <= ib.x1 && ib.x1 < side);
            assert_true(0 <= ib.y0 && ib.y0 <= ib.y1 && ib.y1 < side);
            /* Every point of the box maps into the box's range. */
            for (int p = 0; p < 8; ++p) {
                const int32_t px = qg_tree_map(point_in(b.min_x, b.max_x), world.min_x, w.scale_x, side);
                const int32_t py = qg_tree_map(point_in(b.min_y, b.max_y), world.min_y, w.scale_y, side);
                assert_true(ib.x0 <= px && px <= ib.x1);
                assert_true(ib.y0 <= py && py <= ib.y1);
            }
            /* So overlapping boxes have overlapping ranges: a box that
             * shares one point with b. */
            const float sx = point_in(b.min_x, b.max_x), sy = point_in(b.min_y, b.max_y);
            const qg_rect o = {between(-FLT_MAX, sx), between(-FLT_MAX, sy), between(sx, FLT_MAX),
                               between(sy, FLT_MAX)};
            const qg_tree_ibox io = qg_tree_map_box(&w, o, side);
            assert_true(io.x0 <= ib.x1 && ib.x0 <= io.x1 && io.y0 <= ib.y1 && ib.y0 <= io.y1);
        }
    }
}

static void test_map_covers_world(void **state)
{
    (void)state;
    /* A world wider than 1e-33 spreads over every cell: its corners map to
     * the first and last; anything outside clamps onto the border. */
    const qg_rect worlds[] = {{0, 0, 1024, 1024},
                              {-FLT_MAX, -FLT_MAX, FLT_MAX, FLT_MAX},
                              {5.0f, 5.0f, 5.0f + 1e-6f, 5.0f + 1e-6f},
                              {-1e-30f, -1e-30f, 1e-30f, 1e-30f},
                              {1e30f, 1e30f, 3e30f, 3e30f}};
    for (size_t i = 0; i < sizeof worlds / sizeof worlds[0]; ++i) {
        for (int32_t side = 2; side <= QG_TREE_SIDE; side *= 2) {
            qg_tree_world w;
            qg_tree_world_set(&w, worlds[i], side);
            const qg_tree_ibox all = qg_tree_map_box(&w, worlds[i], side);
            assert_int_equal(all.x0, 0);
            assert_int_equal(all.y0, 0);
            assert_int_equal(all.x1, side - 1);
            assert_int_equal(all.y1, side - 1);
            const qg_tree_ibox out = qg_tree_map_box(&w, (qg_rect){-FLT_MAX, FLT_MAX, -FLT_MAX, FLT_MAX}, side);
            assert_int_equal(out.x0, 0);
            assert_int_equal(out.y0, side - 1);
            assert_false(qg_tree_outside(&w, worlds[i]));
            assert_true(qg_tree_outside(&w, (qg_rect){worlds[i].min_x, worlds[i].min_y, worlds[i].max_x,
                                                      nextafterf(worlds[i].max_y, INFINITY)}));
        }
    }
}

static void test_square_world(void **state)
{
    (void)state;
    /* The re-fitted world holds every element's box, is square in world
     * units where floats allow, and has min < max even for one point. */
    for (int round = 0; round < 100000; ++round) {
        const qg_rect b = round % 3 == 0 ? (qg_rect){any_float(), any_float(), 0, 0} : random_box(random_world());
        const qg_rect e = round % 3 == 0 ? (qg_rect){b.min_x, b.min_y, b.min_x, b.min_y} : b;
        const qg_rect w = qg_tree_square_world(e.min_x, e.min_y, e.max_x, e.max_y);
        assert_true(isfinite(w.min_x) && isfinite(w.max_x) && isfinite(w.min_y) && isfinite(w.max_y));
        assert_true(w.min_x < w.max_x && w.min_y < w.max_y);
        assert_true(w.min_x <= e.min_x && w.min_y <= e.min_y && w.max_x >= e.max_x && w.max_y >= e.max_y);
    }
    const qg_rect w = qg_tree_square_world(0, 0, 100, 10);
    assert_true(w.min_x == -25 && w.max_x == 125 && w.min_y == -70 && w.max_y == 80);
}

static void test_depth_for(void **state)
{
    (void)state;
    assert_int_equal(qg_tree_depth_for(1024, 10, QG_TREE_BITS), 6); /* cells of 16, not 8 */
    assert_int_equal(qg_tree_depth_for(1024, 16, QG_TREE_BITS), 6);
    assert_int_equal(qg_tree_depth_for(1024, 10, 4), 4);
    assert_int_equal(qg_tree_depth_for(1024, 5000, QG_TREE_BITS), 1);
    assert_int_equal(qg_tree_depth_for(2.0 * FLT_MAX, 5, QG_TREE_BITS), QG_TREE_BITS);
    assert_int_equal(qg_tree_depth_for(1e-30, 5, QG_TREE_BITS), 1);
    qg_config c = qg_default_config(QG_QUADTREE);
    c.bounds = (qg_rect){0, 0, 1024, 1024}; /* the default's are zero: no hint */
    assert_int_equal(qg_tree_chosen_depth(&c, 8, QG_TREE_BITS), 8);
    c.element_size = 10;
    assert_int_equal(qg_tree_chosen_depth(&c, 8, QG_TREE_BITS), 6);
}

static void test_refit_counts(void **state)
{
    (void)state;
    qg_tree_world w;
    qg_tree_world_reset(&w, (qg_rect){0, 0, 100, 100}, QG_TREE_SIDE);
    assert_false(qg_tree_scan_due(&w, 0));
    assert_true(qg_tree_scan_due(&w, 100)); /* never scanned: doubled */
    assert_false(qg_tree_scan_due(&w, 100));
    assert_false(qg_tree_scan_due(&w, 199));
    assert_true(qg_tree_grown(&w, 200));
    for (int i = 0; i < 6; ++i)
        qg_tree_note(&w, (qg_rect){-1, 0, 1, 1});
    qg_tree_note(&w, (qg_rect){0, 0, 100, 100});
    assert_int_equal(w.outside_moves, 6);
    assert_false(qg_tree_scan_due(&w, 100)); /* 6 of 100: under a sixteenth */
    qg_tree_note(&w, (qg_rect){0, 0, 100, 101});
    assert_true(qg_tree_scan_due(&w, 100));
    assert_int_equal(w.outside_moves, 0);
    assert_true(qg_tree_scan_due(&w, 50)); /* halved */
}

static void test_cells(void **state)
{
    (void)state;
    for (int round = 0; round < 100000; ++round) {
        const int depth = (int)(rng() % QG_TREE_BITS);
        const int32_t size = QG_TREE_SIDE >> depth;
        const qg_tree_cell c = {0, (int32_t)(rng() % (QG_TREE_SIDE / size)) * size,
                                (int32_t)(rng() % (QG_TREE_SIDE / size)) * size, depth};
        int32_t a = (int32_t)(rng() % QG_TREE_SIDE), b = (int32_t)(rng() % QG_TREE_SIDE);
        int32_t d = (int32_t)(rng() % QG_TREE_SIDE), e = (int32_t)(rng() % QG_TREE_SIDE);
        if (rng() % 2) { /* mostly near the cell */
            a = c.x + (int32_t)(rng() % (uint32_t)size), b = a + (int32_t)(rng() % 4);
            d = c.y + (int32_t)(rng() % (uint32_t)size), e = d + (int32_t)(rng() % 4);
            b = b < QG_TREE_SIDE ? b : QG_TREE_SIDE - 1, e = e < QG_TREE_SIDE ? e : QG_TREE_SIDE - 1;
        }
        const qg_tree_ibox box = {a < b ? a : b, d < e ? d : e, a < b ? b : a, d < e ? e : d};
        const unsigned mask = qg_tree_child_mask(c, box);
        for (int i = 0; i < 4; ++i) {
            const qg_tree_cell k = qg_tree_child_cell(c, 4, i);
            const int32_t ks = size >> 1;
            assert_int_equal(k.node, 4 + i);
            assert_int_equal(k.depth, depth + 1);
            const bool meets = box.x0 < k.x + ks && k.x <= box.x1 && box.y0 < k.y + ks && k.y <= box.y1;
            /* The mask speaks of boxes that meet the cell (as descents use it). */
            const bool in_cell = box.x0 < c.x + size && c.x <= box.x1 && box.y0 < c.y + size && c.y <= box.y1;
            if (in_cell)
                assert_int_equal((mask >> i) & 1, meets);
        }
        const int s = qg_tree_spread(box);
        assert_true(box.x0 >> s == box.x1 >> s && box.y0 >> s == box.y1 >> s);
        if (s > 0)
            assert_false(box.x0 >> (s - 1) == box.x1 >> (s - 1) && box.y0 >> (s - 1) == box.y1 >> (s - 1));
    }
}

/// The regions the trees' ray casts and nearest searches test:
/// every point lies in the region of each cell, at every depth, that the
/// mapping sends it into, whatever the world and wherever the point, and
/// for a ray's reach too.
static void test_region_holds_mapped_points(void **state)
{
    (void)state;
    for (int round = 0; round < 200000; ++round) {
        const qg_rect world = random_world();
        const int32_t side = random_side();
        qg_tree_world w;
        qg_tree_world_reset(&w, world, side);
        const qg_tree_frame f = qg_tree_frame_make(&w, side, rng() % 2 ? 0.0f : fabsf(any_float()));
        const qg_rect b = random_box(world);
        const float x = point_in(b.min_x, b.max_x), y = point_in(b.min_y, b.max_y);
        const int32_t mx = qg_tree_map(x, w.box.min_x, w.scale_x, side);
        const int32_t my = qg_tree_map(y, w.box.min_y, w.scale_y, side);
        for (int32_t size = side; size >= 1; size >>= 1) {
            const int32_t cx = mx / size * size, cy = my / size * size;
            const qg_rect r = qg_tree_region(&f, cx, cy, size);
            if (!(r.min_x <= x && x <= r.max_x && r.min_y <= y && y <= r.max_y))
                fail_msg("world (%g,%g,%g,%g) side %d: (%g,%g) maps to cell (%d,%d) size %d, region (%g,%g,%g,%g)",
                         (double)world.min_x, (double)world.min_y, (double)world.max_x, (double)world.max_y,
                         (int)side, (double)x, (double)y, (int)cx, (int)cy, (int)size, (double)r.min_x,
                         (double)r.min_y, (double)r.max_x, (double)r.max_y);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_conservative),           cmocka_unit_test(test_map_covers_world),
        cmocka_unit_test(test_square_world),               cmocka_unit_test(test_depth_for),
        cmocka_unit_test(test_refit_counts),               cmocka_unit_test(test_cells),
        cmocka_unit_test(test_region_holds_mapped_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
