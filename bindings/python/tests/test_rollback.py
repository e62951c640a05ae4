# SPDX-License-Identifier: MIT
"""Rollback: clone, copy.copy, copy.deepcopy, pickle, snapshot /
from_snapshot and copy_from give an index that continues exactly as the
original (every answer equal, pairs in the same order), independently of it;
bad snapshot bytes raise and hold nothing."""
import copy
import json
import os
import pickle
import shutil
import subprocess

import numpy as np
import pytest

import quadgrid
from conftest import scene

# Every test below runs on every kind of quadgrid.KINDS, and the random
# sequences include the engine's calls (static elements, filters, overlap
# events): its state is carried by every copy too.
SEED = 44
BOUNDS = (0.0, 0.0, 100.0, 100.0)


class Ops:
    """A random operation sequence run on several indexes in lockstep: the
    same calls on each, every answer compared across them (exactly: pairs
    in the same order). The handles live are tracked here, so the sequence
    depends only on the seed."""

    def __init__(self, seed, live=()):
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.live = list(live)

    def boxes(self, n):
        r = self.rng
        c = r.uniform(-10, 110, size=(n, 2))
        h = r.uniform(0, 6, size=(n, 2)) * (r.random((n, 1)) < 0.95) + r.uniform(0, 40, size=(n, 2)) * (
            r.random((n, 1)) < 0.05)
        return np.concatenate([c - h, c + h], axis=1).astype(np.float32)

    def step(self, ixs):
        """One random call on every index of ixs; returns a short name."""
        r = self.rng
        op = r.choice(["insert", "move", "remove", "pairs", "query", "nearest", "raycast", "cleanup",
                       "static", "filter", "events"])
        if op in ("move", "remove", "static", "filter") and not self.live:
            op = "insert"
        if op == "insert":
            b = self.boxes(int(r.integers(1, 40)))
            hs = [ix.insert(b) for ix in ixs]
            self.same(op, hs)
            self.live.extend(hs[0].tolist())
        elif op == "move":
            k = int(r.integers(1, len(self.live) + 1))
            h = np.array(r.choice(self.live, size=k, replace=False), np.int32)
            b = self.boxes(k)
            for ix in ixs:
                ix.move(h, b)
        elif op == "remove":
            k = int(r.integers(1, min(len(self.live), 15) + 1))
            h = np.array(r.choice(self.live, size=k, replace=False), np.int32)
            for ix in ixs:
                ix.remove(h)
            gone = set(h.tolist())
            self.live = [x for x in self.live if x not in gone]
        elif op == "pairs":
            self.same(op, [ix.pairs() for ix in ixs])
        elif op == "query":
            a = self.boxes(3)
            self.same(op, [ix.query_many(a) for ix in ixs])
        elif op == "nearest":
            p = r.uniform(-10, 110, size=(3, 2)).astype(np.float32)
            self.same(op, [ix.nearest(p, 4) for ix in ixs])
        elif op == "raycast":
            o = r.uniform(-10, 110, size=(3, 2)).astype(np.float32)
            d = r.uniform(-1, 1, size=(3, 2)).astype(np.float32)
            self.same(op, [ix.raycast(o, d, 80.0) for ix in ixs])
            self.same(op, [ix.raycast(o, d, 80.0, closest=True) for ix in ixs])
        elif op == "cleanup":
            for ix in ixs:
                ix.cleanup()
        elif op == "static":
            h = np.array(r.choice(self.live, size=min(len(self.live), 5), replace=False), np.int32)
            flag = bool(r.random() < 0.7)
            for ix in ixs:
                ix.set_static(h, flag)
        elif op == "filter":
            h = np.array(r.choice(self.live, size=min(len(self.live), 5), replace=False), np.int32)
            cat, mask = int(r.integers(1, 8)), int(r.integers(0, 8))
            for ix in ixs:
                ix.set_filter(h, cat, mask)
        elif op == "events":
            self.same(op, [ix.pair_events() for ix in ixs])
        return op

    def run(self, ixs, steps):
        for i in range(steps):
            op = self.step(ixs)
            if i % 10 == 9:
                self.same("len", [len(ix) for ix in ixs])
                self.same("stats", [ix.stats for ix in ixs])
                self.same("pairs", [ix.pairs() for ix in ixs])
        for ix in ixs:
            ix.validate()
        return op

    def same(self, what, answers):
        first = answers[0]
        for a in answers[1:]:
            if isinstance(first, tuple):
                assert len(a) == len(first), what
                for x, y in zip(first, a):
                    np.testing.assert_array_equal(x, y, err_msg="%s (seed %d)" % (what, self.seed))
            elif isinstance(first, np.ndarray):
                np.testing.assert_array_equal(first, a, err_msg="%s (seed %d)" % (what, self.seed))
            else:
                assert first == a, "%s (seed %d)" % (what, self.seed)


def built(kind, seed=SEED, steps=120):
    """An index of `kind` after a random history, and the sequence (whose
    state, the live handles, goes on from there)."""
    print("kind", kind, "seed", seed)
    ix = quadgrid.Index(kind, BOUNDS)
    ops = Ops(seed)
    h = ix.insert(scene(seed, 150))
    ops.live.extend(h.tolist())
    ops.run([ix], steps)
    return ix, ops


class Tagged(quadgrid.Index):
    """A subclass with its own attribute: copies keep the class and the attribute."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.tag = {"name": "tagged", "frames": [1, 2]}


COPIES = {
    "clone": lambda ix: ix.clone(),
    "copy.copy": copy.copy,
    "copy.deepcopy": copy.deepcopy,
    "pickle": lambda ix: pickle.loads(pickle.dumps(ix)),
    "pickle0": lambda ix: pickle.loads(pickle.dumps(ix, protocol=0)),
    "snapshot": lambda ix: quadgrid.Index.from_snapshot(ix.snapshot()),
    "snapshot bytearray": lambda ix: quadgrid.Index.from_snapshot(bytearray(ix.snapshot())),
    "snapshot numpy": lambda ix: quadgrid.Index.from_snapshot(np.frombuffer(ix.snapshot(), np.uint8)),
}


def copy_into(ix):
    """copy_from into an index of the same kind that holds other elements."""
    dst = quadgrid.Index(ix.kind, (0, 0, 10, 10), element_size=3.0)
    dst.insert(scene(SEED + 1, 40))
    dst.copy_from(ix)
    return dst


COPIES["copy_from"] = copy_into


@pytest.mark.parametrize("how", sorted(COPIES))
@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_copy_continues_identically(kind, how):
    ix, ops = built(kind)
    c = COPIES[how](ix)
    assert type(c) is quadgrid.Index and c.kind == ix.kind and c is not ix
    assert len(c) == len(ix) and c.stats == ix.stats
    c.validate()
    np.testing.assert_array_equal(c.pairs(), ix.pairs())
    assert c.snapshot() == ix.snapshot()
    # Then the same random calls on both: every answer equal, in order.
    ops.run([ix, c], 200)
    assert c.snapshot() == ix.snapshot()


@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_copies_are_independent(kind):
    ix, ops = built(kind)
    before = ix.snapshot()
    pairs = ix.pairs()
    copies = [f(ix) for f in COPIES.values()]
    # Changing each copy changes neither the original nor the other copies.
    for i, c in enumerate(copies):
        Ops(SEED + 100 + i, ops.live).run([c], 60)
    assert ix.snapshot() == before
    np.testing.assert_array_equal(ix.pairs(), pairs)
    # And changing the original changes none of the copies.
    snaps = [c.snapshot() for c in copies]
    ops.run([ix], 60)
    assert [c.snapshot() for c in copies] == snaps


@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_rollback_loop(kind):
    """A game's rollback: keep a saved index, run frames, go back to the save
    (copy_from), run the same frames again: the same answers both times."""
    ix, ops = built(kind)
    save = ix.clone()
    live = list(ops.live)
    seen = []
    for attempt in range(3):
        o = Ops(SEED + 7, live)
        rec = Recorder(ix)
        o.run([rec], 80)
        seen.append(rec.log)
        ix.copy_from(save)
        assert ix.snapshot() == save.snapshot()
    for log in seen[1:]:
        assert len(log) == len(seen[0])
        for (w0, a0), (w1, a1) in zip(seen[0], log):
            assert w0 == w1
            Ops(0).same(w0, [a0, a1])
    ix.copy_from(ix)  # a copy onto itself does nothing
    assert ix.snapshot() == save.snapshot()


class Recorder:
    """An index whose every answer is logged (for comparing runs in time)."""

    def __init__(self, ix):
        self.ix = ix
        self.log = []

    def __getattr__(self, name):
        fn = getattr(self.ix, name)
        if not callable(fn):
            self.log.append((name, fn))
            return fn

        def call(*a, **kw):
            r = fn(*a, **kw)
            self.log.append((name, r))
            return r

        return call

    def __len__(self):
        return len(self.ix)


@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_empty_and_fresh(kind):
    for ix in (quadgrid.Index(kind), quadgrid.Index(kind, BOUNDS, element_size=2.0, fixed_sizes=True)):
        for c in (ix.clone(), quadgrid.Index.from_snapshot(ix.snapshot()), pickle.loads(pickle.dumps(ix))):
            assert len(c) == 0 and c.stats == ix.stats and c.snapshot() == ix.snapshot()
            Ops(SEED + 3).run([ix.clone(), c], 50)
    ix = quadgrid.Index(kind, BOUNDS)
    ix.insert(scene(SEED, 100))
    ix.clear()
    c = quadgrid.Index.from_snapshot(ix.snapshot())
    assert len(c) == 0 and c.snapshot() == ix.snapshot()
    Ops(SEED + 4).run([ix, c], 50)


@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_subclass_and_attributes_travel(kind):
    ix = Tagged(kind, BOUNDS)
    ix.insert(scene(SEED, 50))
    for how in ("clone", "copy.copy", "copy.deepcopy", "pickle"):
        c = COPIES[how](ix)
        assert type(c) is Tagged, how
        if how == "clone":
            continue
        assert c.tag == ix.tag, how
        if how == "copy.copy":
            assert c.tag is ix.tag  # shallow, as copy.copy is
        else:
            assert c.tag is not ix.tag
    c = Tagged.from_snapshot(ix.snapshot())
    assert type(c) is Tagged and c.kind == kind
    # deepcopy of a structure holding the index twice: one copy, shared.
    both = copy.deepcopy([ix, ix])
    assert both[0] is both[1] and both[0] is not ix


def test_copy_from_refuses_other_kinds_and_types():
    a = quadgrid.Index("brute_force", BOUNDS)
    a.insert(scene(SEED, 30))
    before = a.snapshot()
    other = next(k for k in quadgrid.KINDS if k != "brute_force")
    b = quadgrid.Index(other, BOUNDS)
    with pytest.raises(ValueError, match="copy_from: QG_ERR_INVALID .*kinds differ"):
        a.copy_from(b)
    with pytest.raises(ValueError, match="kinds differ"):
        b.copy_from(a)
    for bad in (None, 3, "brute_force", a.snapshot()):
        with pytest.raises(TypeError, match="copy_from: expected a quadgrid.Index"):
            a.copy_from(bad)
    assert a.snapshot() == before


@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_copy_from_both_ways_on_two_threads(kind):
    """a.copy_from(b) and b.copy_from(a) at once: the locks are taken in one
    order, so neither thread waits on the other forever."""
    import threading

    a, _ = built(kind, SEED, 20)
    b, _ = built(kind, SEED + 1, 20)
    errors = []

    def work(dst, src):
        try:
            for _ in range(200):
                dst.copy_from(src)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(a, b)), threading.Thread(target=work, args=(b, a))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not any(t.is_alive() for t in ts), "deadlock"
    assert not errors
    a.validate()
    b.validate()


def flip(data, i, bit=0):
    b = bytearray(data)
    b[i] ^= 1 << bit
    return bytes(b)


@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_bad_bytes_raise(kind):
    ix, _ = built(kind, steps=40)
    good = ix.snapshot()
    n = len(good)
    assert good[:8] == b"quadgrid" and int.from_bytes(good[16:24], "little") == n
    cases = [
        ("empty", b"", "shorter than the 32-byte header"),
        ("one byte", b"q", "shorter than"),
        ("header only", good[:32], "the header says"),
        ("truncated by one", good[:-1], "the header says %d bytes, got %d" % (n, n - 1)),
        ("truncated half", good[: n // 2], "truncated"),
        ("one byte more", good + b"\0", "got %d" % (n + 1)),
        ("magic", flip(good, 0), "no \"quadgrid\" magic"),
        ("version", flip(good, 8), "version"),
        ("kind past the list", good[:12] + (1000).to_bytes(4, "little") + good[16:], "kind 1000"),
        ("length", flip(good, 16), "the header says"),
        ("checksum", flip(good, 24), "corrupted"),
        ("last byte", flip(good, n - 1, 7), "corrupted"),
        ("zeros", bytes(n), "magic"),
    ]
    rng = np.random.default_rng(SEED)
    for i in sorted(set(rng.integers(32, n, size=40).tolist())):
        cases.append(("body byte %d" % i, flip(good, i, int(rng.integers(0, 8))), "corrupted"))
    for i in range(32):  # every header byte, every bit of the first
        for bit in range(8) if i == 0 else (int(rng.integers(0, 8)),):
            cases.append(("header byte %d bit %d" % (i, bit), flip(good, i, bit), ""))
    # Another kind in the header over this kind's body (checksum still right).
    for k in quadgrid.KINDS:
        if k != kind:
            kid = list(quadgrid.KINDS).index(k)
            cases.append(("kind %s" % k, good[:12] + kid.to_bytes(4, "little") + good[16:], ""))
    for what, data, reason in cases:
        with pytest.raises(ValueError, match="from_snapshot: QG_ERR_INVALID") as e:
            quadgrid.Index.from_snapshot(data)
        assert reason in str(e.value), (what, str(e.value))
        with pytest.raises(ValueError, match="from_snapshot: QG_ERR_INVALID"):
            quadgrid.Index.from_snapshot(memoryview(data))
    # Wrong types: TypeError, naming what was expected.
    for bad in (None, 5, 1.5, "quadgrid", [0, 1, 2], {"a": 1}, ix):
        with pytest.raises(TypeError, match="from_snapshot: expected bytes"):
            quadgrid.Index.from_snapshot(bad)
    # The good bytes still read, from any bytes-like object (also strided).
    assert quadgrid.Index.from_snapshot(memoryview(good)).snapshot() == good
    strided = np.zeros(2 * n, np.uint8)
    strided[::2] = np.frombuffer(good, np.uint8)
    assert quadgrid.Index.from_snapshot(strided[::2]).snapshot() == good
    words = np.frombuffer(good + bytes(-n % 4), np.uint32)  # read as its bytes
    if n % 4:
        with pytest.raises(ValueError, match="got %d" % (n + -n % 4)):
            quadgrid.Index.from_snapshot(words)
    else:
        assert quadgrid.Index.from_snapshot(words).snapshot() == good
    # A pickle whose bytes were changed raises too, and the original is untouched.
    p = pickle.dumps(ix)
    i = p.index(good[40:48]) + 2
    bad = bytearray(p)
    bad[i] ^= 0x10
    with pytest.raises(ValueError, match="from_snapshot: QG_ERR_INVALID"):
        pickle.loads(bytes(bad))
    assert ix.snapshot() == good


@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_events_continue_after_a_snapshot(kind):
    """The event state is state: a copy reports the same began/ended events."""
    ix, ops = built(kind)
    ix.set_static(np.array(ops.live[:10], np.int32))
    ix.set_filter(np.array(ops.live[10:20], np.int32), 2, 2)
    ix.pair_events()
    later = Ops(SEED + 9, ops.live)  # its live handles go on from here
    later.run([ix], 30)
    for c in (ix.clone(), quadgrid.Index.from_snapshot(ix.snapshot()), pickle.loads(pickle.dumps(ix)),
              copy_into(ix)):
        twin = ix.clone()
        Ops(SEED + 10).same("events", [twin.pair_events(), c.pair_events()])
        # And on from there in lockstep, the engine's calls included.
        Ops(SEED + 11, later.live).run([twin, c], 40)
        assert c.snapshot() == twin.snapshot()


NODE = shutil.which("node")
JS_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "js")
JS_BUILT = os.path.isfile(os.path.join(JS_DIR, "dist", "quadgrid-scalar.mjs"))

CROSS_JS = r"""
import { readFileSync, writeFileSync } from "node:fs";
import { init, Index } from "%(index)s";
await init({ simd: false });
const [inPath, outPath, gone] = process.argv.slice(2);
const ix = Index.fromSnapshot(readFileSync(inPath));
const pairs = Array.from(ix.pairs());
writeFileSync(outPath, ix.snapshot());
ix.insert([1, 1, 30, 30, 50, 50, 52, 52]);
ix.remove([Number(gone)]);
ix.cleanup();
console.log(JSON.stringify({ kind: ix.kind, count: ix.count, pairs, after: Array.from(ix.pairs()) }));
ix.free();
"""


@pytest.mark.skipif(NODE is None or not JS_BUILT, reason="node and the JavaScript build (bindings/js/dist) needed")
@pytest.mark.parametrize("kind", quadgrid.KINDS)
def test_snapshot_reads_in_javascript(kind, tmp_path):
    """A snapshot written here reads in the JavaScript package (wasm32) and
    continues the same there; the snapshot it writes back is byte for byte
    this one, and reads here."""
    ix, ops = built(kind)
    gone = ops.live[len(ops.live) // 2]
    good = ix.snapshot()
    src, back = tmp_path / "py.qgsnap", tmp_path / "js.qgsnap"
    src.write_bytes(good)
    script = tmp_path / "cross.mjs"
    index = "file://" + os.path.abspath(os.path.join(JS_DIR, "index.js"))
    script.write_text(CROSS_JS % {"index": index})
    r = subprocess.run([NODE, str(script), str(src), str(back), str(gone)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["kind"] == kind
    np.testing.assert_array_equal(np.array(got["pairs"], np.int32).reshape(-1, 2), ix.pairs())
    assert back.read_bytes() == good
    c = quadgrid.Index.from_snapshot(back.read_bytes())
    c.insert([[1, 1, 30, 30], [50, 50, 52, 52]])
    c.remove([gone])
    c.cleanup()
    assert got["count"] == len(c)
    np.testing.assert_array_equal(np.array(got["after"], np.int32).reshape(-1, 2), c.pairs())
