# SPDX-License-Identifier: MIT
"""Every kind against the NumPy brute force on mixed random scenes."""
import numpy as np
import pytest

import quadgrid
from conftest import Mirror, brute_query, point_d2, ray_box, scene, sort_pairs

SEEDS = [11, 2026]
BOUNDS = (0.0, 0.0, 100.0, 100.0)


def test_every_kind_is_built():
    assert set(quadgrid.KINDS) >= {"quadtree", "loose_quadtree", "level_quadtree", "bucket_quadtree", "grid",
                                   "multi_grid", "loose_grid", "point_grid", "brute_force"}


def build(kind, seed, n=300, bounds=BOUNDS):
    print("kind", kind, "seed", seed)
    ix = quadgrid.Index(kind, bounds, element_size=2.0)
    m = Mirror()
    boxes = scene(seed, n)
    h = ix.insert(boxes)
    assert h.dtype == np.int32 and h.shape == (n,)
    m.insert(h, boxes)
    return ix, m


def churn(ix, m, rng, seed, frames=2):
    """Moves, removes and inserts, the mirror following."""
    for f in range(frames):
        live = np.array(sorted(m.boxes), np.int32)
        mv = rng.choice(live, size=len(live) // 2, replace=False).astype(np.int32)
        nb = scene(seed * 7 + f, len(mv))
        ix.move(mv, nb)
        m.move(mv, nb)
        rm = rng.choice(np.setdiff1d(live, mv), size=20, replace=False).astype(np.int32)
        ix.remove(rm)
        m.remove(rm)
        nb = scene(seed * 13 + f, 25)
        h = ix.insert(nb)
        m.insert(h, nb)
        ix.cleanup()
        yield set(rm.tolist()) & set(h.tolist())  # handles removed and reused


@pytest.mark.parametrize("kind", quadgrid.KINDS)
@pytest.mark.parametrize("seed", SEEDS)
def test_pairs(kind, seed):
    ix, m = build(kind, seed)
    rng = np.random.default_rng(seed)
    ix.cleanup()
    p = ix.pairs()
    assert p.dtype == np.int32 and p.ndim == 2 and p.shape[1] == 2
    assert np.all(p[:, 0] < p[:, 1])
    np.testing.assert_array_equal(sort_pairs(p), m.pairs())
    assert len(m.pairs()) > 100  # the scene does overlap
    for _ in churn(ix, m, rng, seed):
        np.testing.assert_array_equal(sort_pairs(ix.pairs()), m.pairs())
        assert len(ix) == len(m.boxes)
    ix.validate()


@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_queries(kind):
    seed = SEEDS[0]
    ix, m = build(kind, seed)
    rng = np.random.default_rng(seed)
    for _ in churn(ix, m, rng, seed, frames=1):
        pass
    hs, bx, *_ = m.arrays()
    c = rng.uniform(-10, 110, size=(60, 2)).astype(np.float32)
    r = rng.uniform(0, 15, size=(60, 2)).astype(np.float32)
    areas = np.concatenate([c - r, c + r], axis=1)
    areas[0] = (-np.inf, -np.inf, np.inf, np.inf)
    areas[1] = (-np.inf, 20, 30, np.inf)
    areas[2] = (50, 50, 50, 50)
    areas[3] = (1e6, -4e6, 4e6, 4e6)
    got, off = ix.query_many(areas)
    assert off.shape == (61,) and off[0] == 0 and off[-1] == len(got)
    for i, a in enumerate(areas):
        np.testing.assert_array_equal(got[off[i]:off[i + 1]], brute_query(hs, bx, a), err_msg="area %d" % i)
    np.testing.assert_array_equal(ix.query(areas[5]), brute_query(hs, bx, areas[5]))


@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_rays(kind):
    seed = SEEDS[1]
    ix, m = build(kind, seed)
    rng = np.random.default_rng(seed)
    for _ in churn(ix, m, rng, seed, frames=1):
        pass
    hs, bx, *_ = m.arrays()
    n = 60
    o = rng.uniform(-20, 120, size=(n, 2)).astype(np.float32)
    ang = rng.uniform(0, 2 * np.pi, size=n)
    d = np.stack([np.cos(ang), np.sin(ang)], axis=1).astype(np.float32)
    d[0] = (0, 0)
    d[1] = (1, 0)
    d[2] = (0, -1)
    max_t = rng.uniform(0, 200, size=n).astype(np.float32)
    max_t[3] = np.inf
    h, t, off = ix.raycast(o, d, max_t)
    ch, ct = ix.raycast(o, d, max_t, closest=True)
    for i in range(n):
        ok, tt = ray_box(bx, o[i], d[i], max_t[i])
        exp_h, exp_t = hs[ok], tt[ok]
        order = np.lexsort((exp_h, exp_t))
        np.testing.assert_array_equal(h[off[i]:off[i + 1]], exp_h[order], err_msg="ray %d" % i)
        np.testing.assert_array_equal(t[off[i]:off[i + 1]], exp_t[order], err_msg="ray %d" % i)
        if ok.any():
            assert (ch[i], ct[i]) == (exp_h[order][0], exp_t[order][0]), "ray %d" % i
        else:
            assert ch[i] == -1 and ct[i] == np.inf
    assert off[-1] > n  # the rays do hit


@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_nearest(kind):
    seed = SEEDS[0]
    ix, m = build(kind, seed)
    rng = np.random.default_rng(seed + 1)
    for _ in churn(ix, m, rng, seed, frames=1):
        pass
    hs, bx, *_ = m.arrays()
    pts = rng.uniform(-20, 120, size=(40, 2)).astype(np.float32)
    pts[0] = (5e6, 5e6)
    k = 6
    h, d2 = ix.nearest(pts, k)
    assert h.shape == (40, k) and d2.shape == (40, k)
    for i, (x, y) in enumerate(pts):
        dd = point_d2(bx, x, y)
        order = np.lexsort((hs, dd))[:k]
        np.testing.assert_array_equal(h[i], hs[order], err_msg="point %d" % i)
        np.testing.assert_array_equal(d2[i], dd[order], err_msg="point %d" % i)
    # a radius: fewer than k found pads with -1 / inf
    h, d2 = ix.nearest(pts[1:2], len(m.boxes) + 5, max_distance2=4.0)
    dd = point_d2(bx, *pts[1])
    keep = np.lexsort((hs, dd))
    keep = keep[dd[keep] <= 4.0]
    np.testing.assert_array_equal(h[0, :len(keep)], hs[keep])
    assert np.all(h[0, len(keep):] == -1) and np.all(np.isinf(d2[0, len(keep):]))


@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_static_and_filters(kind):
    seed = SEEDS[1]
    ix, m = build(kind, seed)
    rng = np.random.default_rng(seed)
    live = np.array(sorted(m.boxes), np.int32)
    st = rng.choice(live, size=len(live) // 3, replace=False)
    ix.set_static(st)
    for h in st.tolist():
        m.static[h] = True
    fl = rng.choice(live, size=len(live) // 4, replace=False)
    cat = rng.integers(1, 4, size=len(fl)).astype(np.uint32)
    msk = rng.integers(0, 8, size=len(fl)).astype(np.uint32)
    ix.set_filter(fl, cat, msk)
    for h, c_, k_ in zip(fl.tolist(), cat.tolist(), msk.tolist()):
        m.filt[h] = (c_, k_)
    ix.cleanup()
    np.testing.assert_array_equal(sort_pairs(ix.pairs()), m.pairs())
    back = st[: len(st) // 2]
    ix.set_static(back, False)
    for h in back.tolist():
        m.static[h] = False
    for _ in churn(ix, m, rng, seed, frames=1):
        np.testing.assert_array_equal(sort_pairs(ix.pairs()), m.pairs())
    # queries see static and filtered elements alike
    hs, bx, *_ = m.arrays()
    np.testing.assert_array_equal(ix.query((-np.inf, -np.inf, np.inf, np.inf)), hs)
    ix.validate()


@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_pair_events(kind):
    seed = SEEDS[0]
    ix, m = build(kind, seed)
    rng = np.random.default_rng(seed)
    ix.cleanup()
    began, ended = ix.pair_events()
    prev = m.pairs()
    np.testing.assert_array_equal(sort_pairs(began), prev)
    assert ended.shape == (0, 2)
    for reused in churn(ix, m, rng, seed, frames=3):
        began, ended = ix.pair_events()
        now = m.pairs()
        ps = {tuple(r) for r in prev.tolist()}
        ns = {tuple(r) for r in now.tolist()}
        # a removed handle reused by an insert: its old pairs end and its new
        # ones begin, even a pair that reads the same
        again = {p for p in ps & ns if p[0] in reused or p[1] in reused}
        assert len(began) == len(set(map(tuple, began.tolist())))
        assert set(map(tuple, began.tolist())) == (ns - ps) | again
        assert set(map(tuple, ended.tolist())) == (ps - ns) | again
        prev = now
    b2, e2 = ix.pair_events()
    assert b2.shape == (0, 2) and e2.shape == (0, 2)


@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_threads_same_answers(kind):
    seed = 7
    n = 4000
    rng = np.random.default_rng(seed)
    boxes = scene(seed, n, world=400.0)
    one = quadgrid.Index(kind, (0, 0, 400, 400), element_size=2.0)
    two = quadgrid.Index(kind, (0, 0, 400, 400), element_size=2.0)
    h1 = one.insert(boxes)
    h2 = two.insert(boxes)
    np.testing.assert_array_equal(h1, h2)
    for f in range(2):
        nb = scene(seed + 100 + f, n, world=400.0)
        perm = rng.permutation(n).astype(np.int32)
        one.move(h1[perm], nb[perm], threads=1)
        two.move(h2[perm], nb[perm], threads=2)
        one.cleanup(threads=1)
        two.cleanup(threads=2)
        p1 = sort_pairs(one.pairs(threads=1))
        np.testing.assert_array_equal(p1, sort_pairs(two.pairs(threads=2)))
        np.testing.assert_array_equal(p1, sort_pairs(one.pairs(threads=2)))
        np.testing.assert_array_equal(one.boxes(h1), two.boxes(h2))
    two.validate()


def header_kinds():
    """QG_KIND_LIST's names, parsed from the C header the package was built
    from (the list's own text, not a copy)."""
    import os
    import re
    root = os.environ.get("QUADGRID_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "..")
    with open(os.path.join(root, "include", "quadgrid.h")) as f:
        text = f.read()
    block = text[text.index("#define QG_KIND_LIST(X)"):]
    block = block[:block.index("\n\n")]
    return re.findall(r"^\s*X\([A-Z_0-9]+, ([a-z_0-9]+),", block, re.M)


def test_kinds_are_the_headers():
    """The package asks the library for its kinds (QG_KIND_COUNT,
    qg_kind_name): a kind added to QG_KIND_LIST appears here, in its order,
    with no edit to the binding."""
    kinds = header_kinds()
    assert len(kinds) >= 9
    assert list(quadgrid.KINDS) == kinds
    for k in kinds:
        assert quadgrid.Index(k).kind == k


def test_version_is_the_headers():
    import os
    import re
    root = os.environ.get("QUADGRID_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "..")
    with open(os.path.join(root, "include", "quadgrid.h")) as f:
        text = f.read()
    v = ".".join(re.search(r"^#define QG_VERSION_%s (\d+)$" % p, text, re.M).group(1) for p in ("MAJOR", "MINOR", "PATCH"))
    assert quadgrid.version == v
    from importlib.metadata import version
    assert version("quadgrid-broadphase") == v


def test_no_hand_copy_of_the_kind_list():
    """The package's sources (the cffi cdef included) name no kind but the
    default: the list lives in QG_KIND_LIST only."""
    import os
    import re
    pkg = os.path.dirname(quadgrid.__file__)
    src = os.path.join(os.path.dirname(__file__), "..", "quadgrid")
    names = [k for k in header_kinds() if k != "point_grid"]
    for d in {pkg, src}:
        for f in ("__init__.py", "__init__.pyi", "_build.py"):
            p = os.path.join(d, f)
            if not os.path.exists(p):
                continue
            with open(p) as fh:
                text = fh.read()
            hits = [k for k in names if re.search(r"[\"']%s[\"']|QG_%s\b" % (k, k.upper()), text)]
            assert hits == [], "%s names kinds itself: %s" % (p, hits)
