# SPDX-License-Identifier: MIT
"""Bad input raises a clear error and changes nothing; other dtypes and
layouts are converted once, never misread."""
import math

import numpy as np
import pytest

import quadgrid
from conftest import scene, sort_pairs

SEED = 5


def snapshot(ix):
    return sort_pairs(ix.pairs()).tolist(), len(ix), ix.stats


@pytest.fixture(params=quadgrid.KINDS)
def ix(request):
    print("kind", request.param, "seed", SEED)
    ix = quadgrid.Index(request.param, (0, 0, 100, 100))
    ix.insert(scene(SEED, 200))
    ix.cleanup()
    return ix


def unchanged(ix, exc, fn, match=None):
    before = snapshot(ix)
    with pytest.raises(exc, match=match):
        fn()
    assert snapshot(ix) == before
    ix.validate()


def test_bad_inserts(ix):
    good = scene(SEED + 1, 10)
    for bad_row, bad in [(3, (0, 0, math.nan, 1)), (0, (0, math.inf, 1, 1)), (9, (2, 0, 1, 1)),
                         (4, (0, 3, 1, 2)), (7, (-math.inf, 0, 1, 1))]:
        b = good.copy()
        b[bad_row] = bad
        unchanged(ix, ValueError, lambda: ix.insert(b), match="row %d" % bad_row)
    # float64 past float32's range is refused by row, not clamped
    b = good.astype(np.float64)
    b[2, 2] = 1e300
    unchanged(ix, ValueError, lambda: ix.insert(b), match="row 2")
    unchanged(ix, ValueError, lambda: ix.insert(good[:, :3]), match="shape")
    unchanged(ix, ValueError, lambda: ix.insert(good.reshape(-1)), match="shape")
    unchanged(ix, ValueError, lambda: ix.insert(good.reshape(5, 2, 4)), match="shape")
    unchanged(ix, TypeError, lambda: ix.insert(good.astype(np.complex64)), match="dtype")
    unchanged(ix, TypeError, lambda: ix.insert(good.astype(object)), match="dtype")
    unchanged(ix, TypeError, lambda: ix.insert([["a", "b", "c", "d"]]), match="dtype")
    unchanged(ix, TypeError, lambda: ix.insert(good > 0), match="dtype")


def test_bad_moves(ix):
    live = ix.query((-np.inf, -np.inf, np.inf, np.inf))
    h = live[:10].copy()
    b = scene(SEED + 2, 10)
    bb = b.copy()
    bb[6, 0] = math.nan
    unchanged(ix, ValueError, lambda: ix.move(h, bb), match="row 6")
    ix.remove(live[-1:])
    dead = h.copy()
    dead[4] = live[-1]
    unchanged(ix, KeyError, lambda: ix.move(dead, b), match="row 4")
    neg = h.copy()
    neg[8] = -3
    unchanged(ix, KeyError, lambda: ix.move(neg, b), match="row 8")
    big = h.astype(np.int64)
    big[1] = 2**32 + int(h[0])  # would wrap to a live handle if cast blindly
    unchanged(ix, KeyError, lambda: ix.move(big, b), match="row 1")
    rep = h.copy()
    rep[5] = rep[2]
    unchanged(ix, ValueError, lambda: ix.move(rep, b), match="row 5.*twice")
    unchanged(ix, ValueError, lambda: ix.move(h[:9], b), match="9 handles but 10 boxes")
    unchanged(ix, TypeError, lambda: ix.move(h.astype(np.float32), b), match="dtype")
    unchanged(ix, ValueError, lambda: ix.move(h, b, threads=0), match="threads")
    unchanged(ix, ValueError, lambda: ix.move(h.reshape(2, 5), b), match="1-D")


def test_bad_removes(ix):
    live = ix.query((-np.inf, -np.inf, np.inf, np.inf))
    h = live[:10].copy()
    rep = h.copy()
    rep[9] = rep[0]
    unchanged(ix, ValueError, lambda: ix.remove(rep), match="row 9.*twice")
    dead = h.copy()
    dead[3] = 10**6
    unchanged(ix, KeyError, lambda: ix.remove(dead), match="row 3")
    ix.remove(h[:1])
    unchanged(ix, KeyError, lambda: ix.remove(h), match="row 0")
    unchanged(ix, KeyError, lambda: ix.set_static(h), match="row 0")
    unchanged(ix, KeyError, lambda: ix.set_filter(h, 2, 2), match="row 0")
    unchanged(ix, ValueError, lambda: ix.set_filter(h[1:], -1, 2), match="uint32")


def test_bad_queries(ix):
    unchanged(ix, ValueError, lambda: ix.query_many([[0, 0, 1, 1], [0, math.nan, 1, 1]]), match="row 1")
    o = np.zeros((3, 2), np.float32)
    d = np.ones((3, 2), np.float32)
    d[2, 0] = math.inf
    unchanged(ix, ValueError, lambda: ix.raycast(o, d, 10.0), match="row 2")
    unchanged(ix, ValueError, lambda: ix.raycast(o, np.ones((3, 2)), [1, -1, 1]), match="row 1")
    unchanged(ix, ValueError, lambda: ix.raycast(o, np.ones((2, 2)), 1.0), match="3 origins but 2")
    p = np.zeros((4, 2), np.float32)
    p[3, 1] = math.nan
    unchanged(ix, ValueError, lambda: ix.nearest(p, 3), match="row 3")
    unchanged(ix, ValueError, lambda: ix.nearest(p[:3], -1), match="k")
    unchanged(ix, ValueError, lambda: ix.nearest(p[:3], 2, max_distance2=-1.0), match="row 0")


def test_layouts_are_converted_not_misread(ix):
    b = scene(SEED + 3, 50)
    f = np.asfortranarray(b)
    strided = np.zeros((50, 8), np.float32)
    strided[:, ::2] = b
    for variant in (f, strided[:, ::2], b.astype(np.float64), b.tolist(), b[::-1][::-1]):
        before = len(ix)
        h = ix.insert(variant)
        assert len(ix) == before + 50
        np.testing.assert_array_equal(ix.boxes(h), b)
        hh = h.astype(np.int64)[::-1]
        ix.move(hh, np.ascontiguousarray(b[::-1]) + 1)
        np.testing.assert_array_equal(ix.boxes(h), b + 1)
        ix.remove(h.astype(np.uint16))
        assert len(ix) == before
    ix.validate()


def test_index_config():
    ix = quadgrid.Index()
    assert ix.kind == "point_grid" and len(ix) == 0
    ix.insert([[1e7, 1e7, 1e7 + 1, 1e7 + 1], [-5, -5, -4, -4]])
    assert ix.pairs().shape == (0, 2)
    for kind in quadgrid.KINDS:
        ix = quadgrid.Index(kind, bounds=None, element_size=3.0, cell_size=0)
        h = ix.insert([[0, 0, 1, 1], [1, 1, 2, 2]])
        np.testing.assert_array_equal(ix.pairs(), [h])
    with pytest.raises(ValueError, match="unknown kind"):
        quadgrid.Index("octree")
    with pytest.raises(TypeError):
        quadgrid.Index("grid", no_such_setting=1)
    with pytest.raises(ValueError):
        quadgrid.Index("grid", bounds=(0, 0, math.nan, 1))
    with pytest.raises(ValueError):
        quadgrid.Index("grid", bounds=(0, 0, 1))
    e = quadgrid.Index("grid")
    assert e.pairs().shape == (0, 2) and e.query((0, 0, 1, 1)).shape == (0,)
    assert e.insert(np.zeros((0, 4), np.float32)).shape == (0,)
    e.move([], np.zeros((0, 4)))
    e.remove([])


def test_capacity_is_overflow_error():
    # The point grid addresses 16,777,215 elements: one batch past that is
    # refused whole (zeros: calloc'd pages, cheap to make).
    ix = quadgrid.Index("point_grid", (0, 0, 100, 100))
    ix.insert(scene(SEED, 10))
    big = np.zeros((2**24, 4), np.float32)
    unchanged(ix, OverflowError, lambda: ix.insert(big), match="CAPACITY")
    unchanged(ix, ValueError, lambda: ix.query(np.zeros((2, 4))), match="one area")


def test_learns_sizes_unless_fixed():
    """From the defaults the index learns its boxes' sizes (stats say what it
    chose); fixed_sizes holds the given ones. Answers are the same."""
    rng = np.random.default_rng(20261128)
    n = 2000
    lo = rng.uniform(0, 5000, size=(n, 2)).astype(np.float32)
    side = rng.uniform(20, 60, size=(n, 1)).astype(np.float32)
    boxes = np.hstack([lo, lo + side]).astype(np.float32)
    learned = quadgrid.Index(kind="grid")
    fixed = quadgrid.Index(kind="grid", element_size=1.0, fixed_sizes=True)
    for ix in (learned, fixed):
        ix.insert(boxes)
        ix.cleanup()
    s = learned.stats
    assert s["retunes"] >= 1
    assert 20.0 <= s["element_size"] <= 60.0
    assert fixed.stats["retunes"] == 0 and fixed.stats["element_size"] == 1.0
    a, b = learned.pairs(), fixed.pairs()
    assert a.shape == b.shape and len(a) > 0
    assert np.array_equal(a[np.lexsort(a.T[::-1])], b[np.lexsort(b.T[::-1])])


def test_counts_and_masks_refused_alike(ix):
    """The same refusals as the JavaScript package (bindings/js/test/errors.test.js):
    a fractional count is refused, never truncated; a filter mask or
    category past 32 bits is refused, never wrapped."""
    p = np.zeros((2, 2), np.float32)
    unchanged(ix, TypeError, lambda: ix.nearest(p, 2.5), match="k must be an integer")
    unchanged(ix, TypeError, lambda: ix.nearest(p, 2.0), match="k must be an integer")
    unchanged(ix, TypeError, lambda: ix.nearest(p, True), match="k must be an integer")
    unchanged(ix, TypeError, lambda: ix.pairs(threads=1.5), match="threads must be an integer")
    live = ix.query((-np.inf, -np.inf, np.inf, np.inf))[:3]
    unchanged(ix, ValueError, lambda: ix.set_filter(live, 1, 2**32), match="mask.*uint32")
    unchanged(ix, ValueError, lambda: ix.set_filter(live, 2**32 + 1, 1), match="category.*uint32")
    unchanged(ix, TypeError, lambda: ix.set_filter(live, 1, 1.5), match="mask must be integers")
    h, _ = ix.nearest(p, np.int64(2))
    assert h.shape == (2, 2)


def test_bad_box_names_row_and_reason(ix):
    b = scene(SEED + 4, 5)
    b[2] = (3, 0, 1, 1)
    unchanged(ix, ValueError, lambda: ix.insert(b), match=r"row 2: box \[3.0, 0.0, 1.0, 1.0\] has min > max")
    b[2] = (0, 0, math.nan, 1)
    unchanged(ix, ValueError, lambda: ix.insert(b), match=r"row 2: box .* is not finite")
