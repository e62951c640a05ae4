# SPDX-License-Identifier: MIT
"""NumPy brute force: the answers every kind must give, computed without the
library (float32 arithmetic in the C library's own formulas)."""
import numpy as np

F32_MAX = np.finfo(np.float32).max


def scene(seed, n=300, world=100.0):
    """A random scene of n boxes mixing ordinary, tiny, zero-size, huge,
    coincident and far-out boxes (fixed seed, printed by the tests)."""
    rng = np.random.default_rng(seed)
    c = rng.uniform(0, world, size=(n, 2))
    h = rng.uniform(0.2, 4.0, size=(n, 2))
    kind = rng.integers(0, 10, size=n)
    h[kind == 1] = 1e-5  # tiny
    h[kind == 2] = 0.0  # points
    far = kind == 3
    c[far] = rng.uniform(-3e6, 3e6, size=(far.sum(), 2))  # far outside the bounds
    boxes = np.concatenate([c - h, c + h], axis=1).astype(np.float32)
    huge = np.flatnonzero(kind == 4)[:3]
    if huge.size:
        boxes[huge[0]] = (-F32_MAX, -F32_MAX, F32_MAX, F32_MAX)
    if huge.size > 1:
        boxes[huge[1]] = (-1e30, 10.0, 1e30, 12.0)
    if huge.size > 2:
        boxes[huge[2]] = (40.0, -1e20, 41.0, 1e20)
    dup = np.flatnonzero(kind == 5)
    if dup.size:  # coincident: exact copies of other boxes
        boxes[dup] = boxes[rng.integers(0, n, size=dup.size)]
    return boxes


def overlap_matrix(a, b):
    return ((a[:, None, 0] <= b[None, :, 2]) & (b[None, :, 0] <= a[:, None, 2]) &
            (a[:, None, 1] <= b[None, :, 3]) & (b[None, :, 1] <= a[:, None, 3]))


def brute_pairs(handles, boxes, static=None, category=None, mask=None):
    """Sorted (m, 2) pairs (a < b) of the given live handles and boxes."""
    handles = np.asarray(handles)
    m = overlap_matrix(boxes, boxes)
    if static is not None:
        m &= ~(static[:, None] & static[None, :])
    if category is not None:
        m &= ((category[:, None] & mask[None, :]) != 0) & ((category[None, :] & mask[:, None]) != 0)
    i, j = np.nonzero(np.triu(m, 1))
    a, b = handles[i], handles[j]
    return sort_pairs(np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1))


def sort_pairs(p):
    p = np.asarray(p, dtype=np.int64).reshape(-1, 2)
    return p[np.lexsort((p[:, 1], p[:, 0]))]


def brute_query(handles, boxes, area):
    m = overlap_matrix(np.asarray(area, np.float32).reshape(1, 4), boxes)[0]
    return np.sort(np.asarray(handles)[m])


def ray_box(boxes, o, d, max_t):
    """qg_ray_box for one ray against every box: (hit mask, t)."""
    f = np.float32
    with np.errstate(all="ignore"):
        a = np.zeros(len(boxes), f)
        b = np.full(len(boxes), f(max_t), f)
        ok = np.ones(len(boxes), bool)
        for ax in (0, 1):
            lo, hi = boxes[:, ax], boxes[:, ax + 2]
            if d[ax] == 0:
                ok &= ~((o[ax] < lo) | (o[ax] > hi))
            else:
                inv = f(1) / f(d[ax])
                ta = (lo - f(o[ax])) * inv
                tb = (hi - f(o[ax])) * inv
                sw = ta > tb
                ta, tb = np.where(sw, tb, ta), np.where(sw, ta, tb)
                a = np.where(ta > a, ta, a)
                b = np.where(tb < b, tb, b)
        ok &= a <= b
    return ok, a


def point_d2(boxes, x, y):
    f = np.float32
    ex = boxes[:, 0] - f(x)
    ey = boxes[:, 1] - f(y)
    fx = f(x) - boxes[:, 2]
    fy = f(y) - boxes[:, 3]
    ex = np.maximum(np.where(fx > ex, fx, ex), f(0))
    ey = np.maximum(np.where(fy > ey, fy, ey), f(0))
    with np.errstate(over="ignore"):
        return ex * ex + ey * ey


class Mirror:
    """What an index should hold: handle -> box, static flag, filter."""

    def __init__(self):
        self.boxes = {}
        self.static = {}
        self.filt = {}

    def insert(self, handles, boxes):
        for h, b in zip(handles.tolist(), boxes):
            assert h not in self.boxes
            self.boxes[h] = np.array(b, np.float32)
            self.static[h] = False
            self.filt[h] = (1, 0xFFFFFFFF)

    def move(self, handles, boxes):
        for h, b in zip(handles.tolist(), boxes):
            self.boxes[h] = np.array(b, np.float32)

    def remove(self, handles):
        for h in handles.tolist():
            del self.boxes[h], self.static[h], self.filt[h]

    def arrays(self):
        hs = np.array(sorted(self.boxes), dtype=np.int64)
        bx = np.array([self.boxes[h] for h in hs.tolist()], np.float32).reshape(-1, 4)
        st = np.array([self.static[h] for h in hs.tolist()], bool)
        cat = np.array([self.filt[h][0] for h in hs.tolist()], np.uint64)
        msk = np.array([self.filt[h][1] for h in hs.tolist()], np.uint64)
        return hs, bx, st, cat, msk

    def pairs(self):
        hs, bx, st, cat, msk = self.arrays()
        return brute_pairs(hs, bx, st, cat, msk)
