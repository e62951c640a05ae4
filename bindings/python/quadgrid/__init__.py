# SPDX-License-Identifier: MIT
"""quadgrid for NumPy: exact 2D broad-phase collision detection.

Every call takes and returns NumPy arrays and runs its loop in C (the
library's own sources, compiled into the extension), with the GIL released
while C runs. Boxes are rows ``(min_x, min_y, max_x, max_y)`` of float32;
handles are int32. Any error raises and leaves the index exactly as it was.
"""
import copy as _copy
import math
import operator
import threading

import numpy as np

from ._quadgrid import ffi, lib

__all__ = ["Index", "KINDS", "kinds", "version"]

version = "%d.%d.%d" % (lib.QG_VERSION_MAJOR, lib.QG_VERSION_MINOR, lib.QG_VERSION_PATCH)

#: Names of the index kinds this build has, in the C library's order.
KINDS = tuple(
    ffi.string(lib.qg_kind_name(k)).decode()
    for k in range(lib.QG_KIND_COUNT)
    if lib.qg_kind_available(k)
)
_KIND_IDS = {
    ffi.string(lib.qg_kind_name(k)).decode(): k for k in range(lib.QG_KIND_COUNT) if lib.qg_kind_available(k)
}

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_SNAP_VERSION = 1  # the snapshot version this build writes (src/snapshot.c)


def _count(v, what):
    """A count (k, threads) as an int: a fractional or non-numeric value is a
    TypeError (as range() gives), never truncated."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError("%s must be an integer, got %r" % (what, v))
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError("%s must be an integer, got %r" % (what, v)) from None


def kinds():
    """The index kind names, as a list (the same as ``KINDS``)."""
    return list(KINDS)


def _box_reason(box):
    """Why a stored box is refused, in the words the JavaScript package uses:
    ": not finite" or ": min > max"."""
    if not all(math.isfinite(float(v)) for v in box):
        return ": box [%s] is not finite" % ", ".join(repr(float(v)) for v in box)
    return ": box [%s] has min > max" % ", ".join(repr(float(v)) for v in box)


def _raise(status, what, row=None, detail=""):
    name = ffi.string(lib.qg_status_name(status)).decode()
    if row is None and detail and status == lib.QG_ERR_INVALID:
        where = " (%s)" % detail
    else:
        where = "" if row is None or row < 0 else " (row %d%s)" % (row, detail)
    msg = "%s: %s%s" % (what, name, where)
    if status == lib.QG_ERR_INVALID:
        raise ValueError(msg)
    if status == lib.QG_ERR_HANDLE:
        raise KeyError(msg)
    if status == lib.QG_ERR_NOMEM:
        raise MemoryError(msg)
    if status == lib.QG_ERR_CAPACITY:
        raise OverflowError(msg)
    raise RuntimeError(msg)


def _floats(a, cols, name, allow_1d=False):
    """a as a C-contiguous float32 (n, cols) array: converted once from other
    real dtypes or layouts; other shapes and dtypes are refused."""
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiu":
        raise TypeError("%s: expected real numbers (float32 preferred), got dtype %s" % (name, arr.dtype))
    if allow_1d and arr.ndim == 1 and arr.shape[0] == cols:
        arr = arr.reshape(1, cols)
    if arr.ndim != 2 or arr.shape[1] != cols:
        raise ValueError("%s: expected shape (n, %d), got %s" % (name, cols, arr.shape))
    if arr.dtype == np.float32 and arr.flags.c_contiguous and arr.flags.aligned:
        return arr
    # float64 values past float32's range become +-inf here, which every
    # call then refuses by row; nothing is silently clamped.
    with np.errstate(over="ignore", invalid="ignore"):
        return np.ascontiguousarray(arr, dtype=np.float32)


def _handles(a, name="handles"):
    """a as a C-contiguous int32 vector; values that int32 cannot hold are
    dead handles (KeyError with the row), never wrapped around."""
    arr = np.asarray(a)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.dtype.kind not in "iu":
        if arr.size == 0 and arr.dtype.kind == "f":
            arr = arr.astype(np.int32)
        else:
            raise TypeError("%s: expected integers (int32 preferred), got dtype %s" % (name, arr.dtype))
    if arr.ndim != 1:
        raise ValueError("%s: expected a 1-D array, got shape %s" % (name, arr.shape))
    if arr.dtype != np.int32:
        if arr.size:
            bad = np.flatnonzero((arr < _I32_MIN) | (arr > _I32_MAX)) if arr.dtype.kind == "i" else np.flatnonzero(
                arr > _I32_MAX
            )
            if bad.size:
                raise KeyError("%s: QG_ERR_HANDLE (row %d: %d is no int32 handle)" % (name, bad[0], arr[bad[0]]))
        arr = arr.astype(np.int32)
    return np.ascontiguousarray(arr)


def _p(ctype, arr):
    return ffi.cast(ctype, arr.ctypes.data)


# The snapshot's header (docs/rollback.md): magic, version, kind, length,
# checksum; read here only to say why the library refused some bytes.
_SNAP_MAGIC = b"quadgrid"
_SNAP_HEADER = 32


def _snapshot_reason(data):
    """Why qg_snapshot_read refused ``data`` (a contiguous byte view), in the
    words the JavaScript package uses."""
    n = len(data)
    if n < _SNAP_HEADER:
        return "%d bytes, shorter than the %d-byte header" % (n, _SNAP_HEADER)
    head = bytes(data[:_SNAP_HEADER])
    if head[:8] != _SNAP_MAGIC:
        return "not a quadgrid snapshot (no \"quadgrid\" magic)"
    version = int.from_bytes(head[8:12], "little")
    kind = int.from_bytes(head[12:16], "little")
    length = int.from_bytes(head[16:24], "little")
    if length != n:
        return "truncated or extended: the header says %d bytes, got %d" % (length, n)
    if kind >= lib.QG_KIND_COUNT or not lib.qg_kind_available(kind):
        return "kind %d, which this build lacks" % kind
    if version != _SNAP_VERSION:
        return "version %d, this build reads version %d" % (version, _SNAP_VERSION)
    return "corrupted: its checksum or structure does not agree"


def _snapshot_view(data, what):
    """``data`` as a C-contiguous byte memoryview; TypeError for objects that
    are not bytes-like (str, int, lists...)."""
    if isinstance(data, str):
        raise TypeError("%s: expected bytes (a snapshot), got str" % what)
    try:
        mv = memoryview(data)
    except TypeError:
        raise TypeError("%s: expected bytes (a snapshot), got %s" % (what, type(data).__name__)) from None
    if not mv.c_contiguous:
        mv = memoryview(mv.tobytes())
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


def _unpickle(cls, data):
    """pickle's constructor for an Index (``Index.__reduce__``)."""
    return cls.from_snapshot(data)


class Index:
    """A spatial index of boxes.

    ``Index(kind="point_grid", bounds=None, element_size=0, max_element_size=0,
    max_depth=0, leaf_capacity=0, cell_size=0, fixed_sizes=False)``. ``kind``
    is one of :data:`KINDS`. Nothing else needs setting: the index learns the
    sizes of its boxes and the world they fill (docs/tuning.md). ``bounds``
    ``(min_x, min_y, max_x, max_y)`` is a hint of the world (boxes outside it
    work the same); ``None`` gives none. The other settings are hints the
    index starts from (0 = learn it), held exactly with ``fixed_sizes=True``;
    see qg_config in include/quadgrid.h. Safe to share between Python threads (calls on one
    index take turns); the GIL is released while C runs.
    """

    def __init__(self, kind="point_grid", bounds=None, *, element_size=0.0, max_element_size=0.0,
                 max_depth=0, leaf_capacity=0, cell_size=0.0, fixed_sizes=False):
        if kind not in _KIND_IDS:
            raise ValueError("unknown kind %r; one of %s" % (kind, ", ".join(KINDS)))
        cfg = ffi.new("qg_config *", lib.qg_default_config(_KIND_IDS[kind]))
        if bounds is not None:
            b = [float(v) for v in bounds]
            if len(b) != 4:
                raise ValueError("bounds: expected (min_x, min_y, max_x, max_y), got %r" % (bounds,))
            cfg.bounds.min_x, cfg.bounds.min_y, cfg.bounds.max_x, cfg.bounds.max_y = b
        cfg.element_size = element_size
        cfg.max_element_size = max_element_size
        cfg.max_depth = max_depth
        cfg.leaf_capacity = leaf_capacity
        cfg.cell_size = cell_size
        cfg.fixed_sizes = bool(fixed_sizes)
        out = ffi.new("qgpy **")
        st = lib.qgpy_open(cfg, out)
        if st != lib.QG_OK:
            _raise(st, "Index(kind=%r)" % kind)
        self._s = ffi.gc(out[0], lib.qgpy_close)
        self._lock = threading.Lock()
        self.kind = kind

    # -- elements -----------------------------------------------------------

    def insert(self, boxes):
        """Inserts boxes, an (n, 4) array of (min_x, min_y, max_x, max_y).
        Returns their handles (int32, shape (n,)). All or nothing: a NaN or
        infinite coordinate or min > max raises ValueError naming the row."""
        b = _floats(boxes, 4, "boxes")
        n = b.shape[0]
        out = np.empty(n, dtype=np.int32)
        row = ffi.new("int64_t *")
        with self._lock:
            st = lib.qgpy_insert(self._s, _p("float *", b), n, _p("int32_t *", out), row)
        if st != lib.QG_OK:
            _raise(st, "insert", row[0], _box_reason(b[row[0]]) if row[0] >= 0 else "")
        return out

    def move(self, handles, boxes, threads=1):
        """Gives each live handle its new box (row i of the (n, 4) ``boxes``),
        on ``threads`` workers. Checked first: a dead handle raises KeyError, a
        bad box or a handle listed twice ValueError, each naming the row, and
        nothing moves."""
        h = _handles(handles)
        b = _floats(boxes, 4, "boxes")
        if b.shape[0] != h.shape[0]:
            raise ValueError("move: %d handles but %d boxes" % (h.shape[0], b.shape[0]))
        threads = self._threads(threads)
        row = ffi.new("int64_t *")
        what = ffi.new("int *")
        with self._lock:
            st = lib.qgpy_move(self._s, _p("int32_t *", h), _p("float *", b), h.shape[0], threads, row, what)
        if st != lib.QG_OK:
            detail = {2: ": handle %d is not live", 3: ": handle %d listed twice"}
            d = detail.get(what[0], "")
            if "%d" in d:
                d = d % h[row[0]]
            elif what[0] == 1 and row[0] >= 0:
                d = _box_reason(b[row[0]])
            _raise(st, "move", row[0], d)

    def remove(self, handles):
        """Removes live elements. All are checked first: a dead handle raises
        KeyError, a handle listed twice ValueError, and nothing is removed."""
        h = _handles(handles)
        row = ffi.new("int64_t *")
        with self._lock:
            st = lib.qgpy_remove(self._s, _p("int32_t *", h), h.shape[0], row)
        if st != lib.QG_OK:
            d = ": handle %d %s" % (h[row[0]], "is not live" if st == lib.QG_ERR_HANDLE else "listed twice")
            _raise(st, "remove", row[0], d)

    def boxes(self, handles):
        """The (n, 4) float32 boxes of live handles (KeyError for a dead one)."""
        h = _handles(handles)
        out = np.empty((h.shape[0], 4), dtype=np.float32)
        row = ffi.new("int64_t *")
        with self._lock:
            st = lib.qgpy_get_boxes(self._s, _p("int32_t *", h), h.shape[0], _p("float *", out), row)
        if st != lib.QG_OK:
            _raise(st, "boxes", row[0])
        return out

    def cleanup(self, threads=1):
        """Once-a-frame upkeep, after the moves and before the queries and
        pairs of a frame (answers are exact either way; some kinds are faster
        after it)."""
        threads = self._threads(threads)
        with self._lock:
            lib.qgpy_cleanup(self._s, threads)

    def clear(self):
        """Removes every element (handles start again from 0)."""
        with self._lock:
            lib.qg_clear(self._s.index)

    def set_static(self, handles, static=True):
        """Marks elements static (or dynamic again with ``static=False``; a
        bool or one per handle). Two static elements are never paired."""
        h = _handles(handles)
        f = np.ascontiguousarray(np.broadcast_to(np.asarray(static, dtype=bool), h.shape), dtype=np.uint8)
        row = ffi.new("int64_t *")
        with self._lock:
            st = lib.qgpy_set_static(self._s, _p("int32_t *", h), _p("uint8_t *", f), h.shape[0], row)
        if st != lib.QG_OK:
            _raise(st, "set_static", row[0], ": handle %d" % h[row[0]] if row[0] >= 0 else "")

    def set_filter(self, handles, category=1, mask=0xFFFFFFFF):
        """Sets collision filters: a and b pair only when
        ``(a.category & b.mask) and (b.category & a.mask)``. ``category`` and
        ``mask`` are uint32 values, one or one per handle."""
        h = _handles(handles)
        cm = []
        for name, v in (("category", category), ("mask", mask)):
            a = np.asarray(v)
            if a.dtype.kind not in "iu":
                raise TypeError("set_filter: %s must be integers, got dtype %s" % (name, a.dtype))
            if a.size and (a.min() < 0 or a.max() > 0xFFFFFFFF):
                raise ValueError("set_filter: %s values must fit in uint32" % name)
            cm.append(np.ascontiguousarray(np.broadcast_to(a, h.shape), dtype=np.uint32))
        row = ffi.new("int64_t *")
        with self._lock:
            st = lib.qgpy_set_filter(self._s, _p("int32_t *", h), _p("uint32_t *", cm[0]), _p("uint32_t *", cm[1]),
                                     h.shape[0], row)
        if st != lib.QG_OK:
            _raise(st, "set_filter", row[0], ": handle %d" % h[row[0]] if row[0] >= 0 else "")

    # -- answers ------------------------------------------------------------

    def pairs(self, threads=1):
        """Every overlapping pair of live boxes (closed boxes: touching
        counts), as an (m, 2) int32 array with a < b in each row, except pairs
        of two static elements and pairs the filters keep apart. Row order is
        unspecified (deterministic for the same calls and threads)."""
        threads = self._threads(threads)
        with self._lock:
            m = lib.qgpy_pairs(self._s, threads)
            if m < 0:
                _raise(m, "pairs")
            out = np.empty((m, 2), dtype=np.int32)
            if m:
                lib.qgpy_pairs_copy(self._s, _p("int32_t *", out))
        return out

    def query(self, box):
        """Handles (sorted int32) of the live boxes overlapping the closed
        area ``box`` = (min_x, min_y, max_x, max_y); it may be infinite, not NaN."""
        b = _floats(box, 4, "box", allow_1d=True)
        if b.shape[0] != 1:
            raise ValueError("query: expected one area, shape (4,) or (1, 4), got %s" % (np.shape(box),))
        h, _ = self.query_many(b)
        return h

    def query_many(self, boxes):
        """For each area (row of an (n, 4) array) the live boxes overlapping
        it: ``(handles, offsets)``, area i's sorted handles being
        ``handles[offsets[i]:offsets[i+1]]`` (offsets int64, n + 1 long)."""
        b = _floats(boxes, 4, "boxes")
        n = b.shape[0]
        offsets = np.empty(n + 1, dtype=np.int64)
        bad = lib.qgpy_bad_area(_p("float *", b), n)
        if bad >= 0:
            raise ValueError("query: QG_ERR_INVALID (row %d: NaN coordinate)" % bad)
        row = ffi.new("int64_t *")
        with self._lock:
            st = lib.qgpy_query_many(self._s, _p("float *", b), n, _p("int64_t *", offsets), row)
            if st != lib.QG_OK:
                _raise(st, "query", row[0])
            out = np.empty(lib.qgpy_out_len(self._s), dtype=np.int32)
            lib.qgpy_out_copy(self._s, _p("int32_t *", out))
        return out, offsets

    def raycast(self, origins, directions, max_t=math.inf, closest=False):
        """Casts segments origin + t * direction, t in [0, max_t] (``max_t`` a
        number or one per ray), against the closed boxes.

        ``closest=True``: ``(handles, t)``, each (n,): the nearest hit per ray
        (ties: lowest handle), -1 and inf for a miss. Otherwise every hit:
        ``(handles, t, offsets)``, ray i's hits near to far (ties by handle)
        in ``[offsets[i]:offsets[i+1]]``."""
        o = _floats(origins, 2, "origins")
        d = _floats(directions, 2, "directions")
        n = o.shape[0]
        if d.shape[0] != n:
            raise ValueError("raycast: %d origins but %d directions" % (n, d.shape[0]))
        mt = np.asarray(max_t)
        if mt.dtype.kind not in "fiu":
            raise TypeError("raycast: max_t must be real, got dtype %s" % mt.dtype)
        if mt.ndim > 1 or (mt.ndim == 1 and mt.shape[0] != n):
            raise ValueError("raycast: max_t must be a number or one per ray, got shape %s" % (mt.shape,))
        mt = np.ascontiguousarray(np.broadcast_to(mt.astype(np.float32), (n,)))
        row = ffi.new("int64_t *")
        if closest:
            bh = np.empty(n, dtype=np.int32)
            bt = np.empty(n, dtype=np.float32)
            with self._lock:
                st = lib.qgpy_raycast_many(self._s, _p("float *", o), _p("float *", d), _p("float *", mt), n, True,
                                           _p("int32_t *", bh), _p("float *", bt), ffi.NULL, row)
            if st != lib.QG_OK:
                _raise(st, "raycast", row[0], ": finite origin and direction, max_t >= 0")
            return bh, bt
        offsets = np.empty(n + 1, dtype=np.int64)
        with self._lock:
            st = lib.qgpy_raycast_many(self._s, _p("float *", o), _p("float *", d), _p("float *", mt), n, False,
                                       ffi.NULL, ffi.NULL, _p("int64_t *", offsets), row)
            if st != lib.QG_OK:
                _raise(st, "raycast", row[0], ": finite origin and direction, max_t >= 0")
            buf = np.empty(lib.qgpy_out_len(self._s), dtype=np.int32)
            lib.qgpy_out_copy(self._s, _p("int32_t *", buf))
        hits = buf.reshape(-1, 2)
        return hits[:, 0].copy(), hits[:, 1].view(np.float32).copy(), offsets

    def nearest(self, points, k, max_distance2=math.inf):
        """The k live boxes nearest each point (row of an (n, 2) array), by
        squared distance to the box (0 inside), ties by handle:
        ``(handles, distances2)``, each (n, k); missing ones are -1 and inf."""
        p = _floats(points, 2, "points")
        k = _count(k, "nearest: k")
        if k < 0:
            raise ValueError("nearest: k must be >= 0, got %d" % k)
        n = p.shape[0]
        h = np.empty((n, k), dtype=np.int32)
        d2 = np.empty((n, k), dtype=np.float32)
        row = ffi.new("int64_t *")
        with self._lock:
            st = lib.qgpy_nearest_many(self._s, _p("float *", p), n, k, float(max_distance2), _p("int32_t *", h),
                                       _p("float *", d2), row)
        if st != lib.QG_OK:
            _raise(st, "nearest", row[0], ": finite point, max_distance2 >= 0")
        return h, d2

    def pair_events(self):
        """Overlap events since the previous call: ``(began, ended)``, (m, 2)
        int32 arrays of pairs (a < b) that are paired now and were not, and
        were paired and are not (a removed element's pairs end with its old
        handle). The first call reports every current pair as began."""
        with self._lock:
            st = lib.qgpy_pair_events(self._s)
            if st != lib.QG_OK:
                _raise(st, "pair_events")
            began = np.empty(lib.qgpy_out_len(self._s), dtype=np.int32)
            ended = np.empty(lib.qgpy_out2_len(self._s), dtype=np.int32)
            lib.qgpy_out_copy(self._s, _p("int32_t *", began))
            lib.qgpy_out2_copy(self._s, _p("int32_t *", ended))
        return began.reshape(-1, 2), ended.reshape(-1, 2)

    # -- state --------------------------------------------------------------

    def __len__(self):
        """The number of live elements."""
        return int(lib.qg_count(self._s.index))

    @property
    def stats(self):
        """What the index holds now and what it learned: a dict of
        memory_bytes, elements, nodes, leaves, max_depth_reached, and the
        sizes in force: element_size, size_bound, cell_size, max_depth, world
        (min_x, min_y, max_x, max_y) and retunes."""
        with self._lock:
            s = lib.qg_get_stats(self._s.index)
        return {"memory_bytes": int(s.memory_bytes), "elements": s.elements, "nodes": s.nodes, "leaves": s.leaves,
                "max_depth_reached": s.max_depth_reached, "element_size": float(s.element_size),
                "size_bound": float(s.size_bound), "cell_size": float(s.cell_size), "max_depth": s.max_depth,
                "world": (float(s.world.min_x), float(s.world.min_y), float(s.world.max_x), float(s.world.max_y)),
                "retunes": s.retunes}

    def validate(self):
        """Checks the index's internal invariants (slow; for tests). Raises
        RuntimeError if they do not hold."""
        with self._lock:
            st = lib.qg_validate(self._s.index)
        if st != lib.QG_OK:
            raise RuntimeError("validate: the index's invariants do not hold (%s)"
                               % ffi.string(lib.qg_status_name(st)).decode())

    # -- rollback: copies and snapshots ------------------------------------

    # Attributes that are the C index and its lock: never copied; every
    # other attribute (``kind``, a subclass's own) travels with the copy.
    _OWN = ("_s", "_lock")

    @staticmethod
    def _adopt(cls, s, kind):
        """A new cls around the qgpy ``s`` (ownership passes to it)."""
        new = cls.__new__(cls)
        new._s = ffi.gc(s, lib.qgpy_close)
        new._lock = threading.Lock()
        new.kind = kind
        return new

    def clone(self):
        """An independent copy (``qg_clone``): it answers every later call
        exactly as this index would, in the same order (pairs included), and
        the two change separately. ``copy.copy`` and ``copy.deepcopy`` give
        the same. MemoryError when memory runs out."""
        out = ffi.new("qgpy **")
        with self._lock:
            st = lib.qgpy_clone(self._s, out)
        if st != lib.QG_OK:
            _raise(st, "clone")
        return Index._adopt(type(self), out[0], self.kind)

    def __copy__(self):
        new = self.clone()
        for k, v in self.__dict__.items():
            if k not in self._OWN:
                new.__dict__[k] = v
        return new

    def __deepcopy__(self, memo):
        new = self.clone()
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            if k not in self._OWN:
                new.__dict__[k] = _copy.deepcopy(v, memo)
        return new

    def copy_from(self, other):
        """Makes this index a copy of ``other`` (``qg_copy``), reusing this
        one's memory (no allocation when it already holds enough: a rollback
        every frame). Both must be of the same kind (ValueError otherwise);
        MemoryError when more memory is needed and none is left. On any error
        this index is unchanged."""
        if not isinstance(other, Index):
            raise TypeError("copy_from: expected a quadgrid.Index, got %s" % type(other).__name__)
        if other.kind != self.kind:
            raise ValueError("copy_from: QG_ERR_INVALID (kinds differ: this index is %s, the other %s)"
                             % (self.kind, other.kind))
        if other is self:
            return
        # Two locks, always taken in the same order: a.copy_from(b) and
        # b.copy_from(a) on two threads cannot deadlock.
        first, second = (self, other) if id(self) < id(other) else (other, self)
        with first._lock, second._lock:
            st = lib.qgpy_copy(self._s, other._s)
        if st != lib.QG_OK:
            _raise(st, "copy_from")

    def snapshot(self):
        """The index's whole state as ``bytes`` (``qg_snapshot_write``):
        versioned, little-endian, checksummed (docs/rollback.md), portable
        between machines and between this package and the JavaScript one.
        ``Index.from_snapshot`` reads it back into an index that continues
        exactly as this one."""
        with self._lock:
            n = lib.qgpy_snapshot_size(self._s)
            buf = bytearray(n)
            st = lib.qgpy_snapshot_write(self._s, ffi.from_buffer(buf), n) if n else lib.QG_ERR_INVALID
        if st != lib.QG_OK:
            _raise(st, "snapshot")
        return bytes(buf)

    @classmethod
    def from_snapshot(cls, data):
        """A new index from ``snapshot()``'s bytes (any bytes-like object),
        continuing exactly as the index they were written from. ValueError
        for bytes that are not a whole, unchanged snapshot of this version
        (empty, truncated, corrupted, of a kind this build lacks), TypeError
        for an object that is not bytes-like, MemoryError when memory runs
        out."""
        mv = _snapshot_view(data, "from_snapshot")
        out = ffi.new("qgpy **")
        kind = ffi.new("int32_t *")
        n = mv.nbytes
        st = lib.qgpy_snapshot_read(ffi.from_buffer(mv) if n else ffi.NULL, n, out, kind)
        if st != lib.QG_OK:
            if st == lib.QG_ERR_INVALID:
                raise ValueError("from_snapshot: QG_ERR_INVALID (%s)" % _snapshot_reason(mv))
            _raise(st, "from_snapshot")
        return Index._adopt(cls, out[0], ffi.string(lib.qg_kind_name(kind[0])).decode())

    def __reduce__(self):
        # pickle: the snapshot, and the instance's other attributes as state.
        state = {k: v for k, v in self.__dict__.items() if k not in self._OWN and k != "kind"}
        return (_unpickle, (type(self), self.snapshot()), state or None)

    def __repr__(self):
        return "<quadgrid.Index kind=%s len=%d>" % (self.kind, len(self))

    @staticmethod
    def _threads(threads):
        t = _count(threads, "threads")
        if t < 1 or t > 256:
            raise ValueError("threads must be in [1, 256], got %d" % t)
        return t
