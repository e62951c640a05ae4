#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""quadgrid against the spatial tools Python users have, on the `agents`
workload (examples/agents.py): one frame = update the structure with every
agent's new box and find every overlapping pair as an (m, 2) array.

    python3 bench.py                      # N = 10,000, 100,000, 1,000,000
    python3 bench.py --n 100000 --vs-c    # also the same frame in C

Every method's pairs are checked against quadgrid's for the same frame (and
quadgrid's against a NumPy brute force at N <= 20,000); a mismatch stops the
run with exit status 2. Times are medians over frames, the methods run in
turn within each frame.
"""
import argparse
import glob
import json
import os
import platform
import subprocess
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# The installed package, not the source folder beside this script (which has
# no compiled extension).
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.path.insert(0, os.path.join(HERE, "examples"))
import quadgrid  # noqa: E402
from agents import Agents  # noqa: E402

# quadgrid-bench's tuning for agents (apps/bench/main.c: typical width 5,
# largest 8); everything else left to the library.
TUNED = dict(element_size=5.0, max_element_size=8.0)
SLOW_LIMIT_S = 30.0


def sort_pairs(p):
    p = np.asarray(p, dtype=np.int32).reshape(-1, 2)
    if len(p) == 0:
        return p
    return p[np.lexsort((p[:, 1], p[:, 0]))]


def exact(boxes, i, j):
    """Keeps the candidate pairs (i, j) whose closed boxes overlap, i < j."""
    a, b = boxes[i], boxes[j]
    ok = ((a[:, 0] <= b[:, 2]) & (b[:, 0] <= a[:, 2]) & (a[:, 1] <= b[:, 3]) & (b[:, 1] <= a[:, 3]) & (i != j))
    lo, hi = np.minimum(i, j)[ok], np.maximum(i, j)[ok]
    p = np.stack([lo, hi], axis=1).astype(np.int32)
    return np.unique(p, axis=0) if len(p) else p.reshape(0, 2)


class Quadgrid:
    def __init__(self, agents, kind, tuned=True, threads=1):
        self.name = "quadgrid %s%s%s" % (kind, "" if tuned else " (default config)",
                                         "" if threads == 1 else ", %d threads" % threads)
        W = float(agents.world)
        self.ix = quadgrid.Index(kind, (0.0, 0.0, W, W), **(TUNED if tuned else {}))
        self.h = self.ix.insert(agents.boxes)
        assert np.array_equal(self.h, np.arange(agents.n)), "a fresh index numbers from 0"
        self.ix.cleanup()
        self.threads = threads

    def frame(self, agents):
        self.ix.move(self.h, agents.boxes, threads=self.threads)
        self.ix.cleanup(threads=self.threads)
        return self.ix.pairs(threads=self.threads)


class KDTree:
    """cKDTree.query_pairs on the centres with the L-infinity radius of the
    two largest half-sizes (plus a few float32 ulps of the world, which box
    coordinates' rounding can add), then the exact box test in NumPy."""

    name = "scipy cKDTree.query_pairs + exact filter"

    def __init__(self, agents):
        from scipy.spatial import cKDTree

        self.cKDTree = cKDTree
        self.r = 2.0 * float(agents.h.max()) + 4.0 * float(np.spacing(np.float32(agents.world)))

    def frame(self, agents):
        b = agents.boxes
        c = np.stack([agents.x, agents.y], axis=1).astype(np.float64)
        cand = self.cKDTree(c).query_pairs(self.r, p=np.inf, output_type="ndarray")
        return exact(b, cand[:, 0], cand[:, 1])


class STRtreePerFrame:
    """shapely's STRtree built each frame; each box queried against it.
    Debian's shapely is 1.8 (no vectorised query, no predicate= argument):
    query_items per box (its envelopes are the boxes), then the exact test."""

    name = "shapely STRtree (built per frame)"

    def __init__(self, agents):
        import shapely
        from shapely.geometry import box
        from shapely.strtree import STRtree

        self.box, self.STRtree = box, STRtree
        if shapely.__version__ >= "2":
            self.name += " [shapely %s]" % shapely.__version__

    def frame(self, agents):
        b = agents.boxes
        geoms = [self.box(*r) for r in b.tolist()]
        tree = self.STRtree(geoms)
        ii, jj = [], []
        for i, g in enumerate(geoms):
            items = tree.query_items(g)
            ii.append(np.full(len(items), i, np.int64))
            jj.append(np.asarray(items, np.int64))
        i, j = np.concatenate(ii), np.concatenate(jj)
        keep = i < j
        return exact(b, i[keep], j[keep])


def _rtree_pairs(idx, b):
    ii, jj = [], []
    for i, r in enumerate(b.tolist()):
        items = list(idx.intersection(r))
        ii.append(np.full(len(items), i, np.int64))
        jj.append(np.asarray(items, np.int64))
    i, j = np.concatenate(ii), np.concatenate(jj)
    keep = i < j
    return exact(b, i[keep], j[keep])


class RtreeBulk:
    """rtree (libspatialindex) bulk-loaded from a stream each frame, then one
    intersection query per box (rtree 1.0 has no vectorised query)."""

    name = "rtree (bulk-loaded per frame)"

    def __init__(self, agents):
        import rtree

        self.rtree = rtree

    def frame(self, agents):
        b = agents.boxes
        idx = self.rtree.index.Index(((i, tuple(r), None) for i, r in enumerate(b.tolist())))
        return _rtree_pairs(idx, b)


class RtreeMoved:
    """rtree kept from frame to frame: delete + insert of every box (the
    only way to move one), then one intersection query per box."""

    name = "rtree (moved incrementally)"

    def __init__(self, agents):
        import rtree

        b = agents.boxes.tolist()
        self.idx = rtree.index.Index(((i, tuple(r), None) for i, r in enumerate(b)))
        self.old = b

    def frame(self, agents):
        b = agents.boxes
        new = b.tolist()
        idx = self.idx
        for i, (o, r) in enumerate(zip(self.old, new)):
            idx.delete(i, o)
            idx.insert(i, r)
        self.old = new
        return _rtree_pairs(idx, b)


class Brute:
    """NumPy broadcast of every box against every later one, in row blocks."""

    name = "numpy brute force"

    def __init__(self, agents):
        pass

    def frame(self, agents):
        b = agents.boxes
        n = len(b)
        out = []
        step = max(1, 4_000_000 // n)
        for s in range(0, n, step):
            a = b[s:s + step]
            m = ((a[:, None, 0] <= b[None, :, 2]) & (b[None, :, 0] <= a[:, None, 2]) &
                 (a[:, None, 1] <= b[None, :, 3]) & (b[None, :, 1] <= a[:, None, 3]))
            i, j = np.nonzero(m)
            i += s
            keep = i < j
            out.append(np.stack([i[keep], j[keep]], axis=1))
        return np.concatenate(out).astype(np.int32)


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def build_c_frame(out_dir):
    """Compiles c_frame.c with the library's sources and the C build's flags."""
    root = os.path.abspath(os.path.join(HERE, "..", ".."))
    exe = os.path.join(out_dir, "c_frame")
    srcs = sorted(glob.glob(os.path.join(root, "src", "**", "*.c"), recursive=True))
    cmd = (["cc", "-std=c11", "-O3", "-DNDEBUG", "-ffp-contract=off", "-DQUADGRID_BUILDING",
            "-I" + os.path.join(root, "include"), "-I" + os.path.join(root, "src"),
            "-I" + os.path.join(root, "apps", "common")] + srcs +
           [os.path.join(root, "apps", "common", "workload.c"), os.path.join(HERE, "c_frame.c"),
            "-lm", "-pthread", "-o", exe])
    subprocess.run(cmd, check=True)
    return exe


def vs_c(args, kind):
    """The same frame through Python and in C, runs alternating."""
    os.makedirs(args.build, exist_ok=True)
    exe = build_c_frame(args.build)
    for n in args.n:
        frames = max(5, min(60, 2_000_000 // n))
        py, c = [], []
        for rnd in range(args.rounds):
            out = subprocess.run([exe, kind, str(n), str(frames), "1"], check=True, capture_output=True, text=True)
            c.append(json.loads(out.stdout)["median_ms"])
            agents = Agents(n)
            q = Quadgrid(agents, kind)
            t = []
            for _ in range(frames):
                agents.move()
                t0 = time.perf_counter()
                q.frame(agents)
                t.append(time.perf_counter() - t0)
            py.append(1e3 * float(np.median(t)))
            print("  round %d: C %.3f ms, Python %.3f ms" % (rnd + 1, c[-1], py[-1]), flush=True)
        pm, cm = float(np.median(py)), float(np.median(c))
        print("N=%d %s one frame (move all + cleanup + pairs): Python %.3f ms, C %.3f ms, ratio %.3f "
              "(medians of %d alternating rounds of %d frames)" % (n, kind, pm, cm, pm / cm, args.rounds, frames))


def run(args):
    kind = args.kind
    print("CPU: %s; Python %s, numpy %s; command: %s" % (cpu_model(), platform.python_version(), np.__version__,
                                                      " ".join(sys.argv)))
    skipped = {}
    rows = []
    for n in args.n:
        agents = Agents(n)
        methods = [Quadgrid(agents, kind), Quadgrid(agents, kind, tuned=False)]
        if args.threads > 1:
            methods.append(Quadgrid(agents, kind, threads=args.threads))
        slow = []
        for cls in (KDTree, STRtreePerFrame, RtreeBulk, RtreeMoved):
            if cls.name in skipped:
                print("  %s: skipped at N=%d (%s)" % (cls.name, n, skipped[cls.name]))
                continue
            m = cls(agents)
            (slow if cls is not KDTree else methods).append(m)
        if n <= 20_000:
            slow.append(Brute(agents))
        frames = args.frames or max(5, min(50, 1_000_000 // n))
        slow_frames = 3 if n <= 10_000 else (2 if n <= 100_000 else 1)
        times = {m.name: [] for m in methods + slow}
        pairs_count = None
        for f in range(frames):
            agents.move()
            ref = None
            todo = methods + (slow if f < slow_frames else [])
            # rotate the order each frame so no method always runs first
            k = f % len(todo)
            for m in todo[k:] + todo[:k]:
                t0 = time.perf_counter()
                p = m.frame(agents)
                times[m.name].append(time.perf_counter() - t0)
                p = sort_pairs(p)
                if ref is None:
                    ref, ref_name = p, m.name
                elif not np.array_equal(p, ref):
                    print("MISMATCH at N=%d frame %d: %s gives %d pairs, %s %d" % (n, f + 1, m.name, len(p),
                                                                                   ref_name, len(ref)))
                    sys.exit(2)
            pairs_count = len(ref)
        print("N = %d (%d pairs in the last frame; %d frames, %d for the slow methods; all answers equal)"
              % (n, pairs_count, frames, slow_frames))
        best_alt = None
        for name, t in times.items():
            med = 1e3 * float(np.median(t))
            rows.append((n, name, med, len(t)))
            if not name.startswith("quadgrid") and (best_alt is None or med < best_alt[1]):
                best_alt = (name, med)
            print("  %-48s %10.3f ms a frame" % (name, med), flush=True)
            if med / 1e3 * 10 > SLOW_LIMIT_S and not name.startswith("quadgrid"):
                skipped[name] = "%.1f s a frame at N=%d; at 10x N it would pass %d s" % (med / 1e3, n, SLOW_LIMIT_S)
        qg = 1e3 * float(np.median(times[methods[0].name]))
        if best_alt:
            print("  quadgrid %s is %.1fx the fastest alternative (%s)" % (kind, best_alt[1] / qg, best_alt[0]))
    return rows


def main():
    warnings.filterwarnings("ignore", message="STRtree will be changed")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--kind", default="point_grid", choices=quadgrid.KINDS)
    ap.add_argument("--frames", type=int, default=0, help="quadgrid frames (default by N)")
    ap.add_argument("--threads", type=int, default=1, help="also run quadgrid on this many threads")
    ap.add_argument("--kinds", action="store_true", help="only time every quadgrid kind (tuned)")
    ap.add_argument("--vs-c", action="store_true", help="only compare with the same frame in C")
    ap.add_argument("--rounds", type=int, default=5, help="--vs-c: alternating rounds")
    ap.add_argument("--build", default=os.path.join(HERE, "build", "bench"), help="--vs-c: where c_frame goes")
    args = ap.parse_args()
    if args.vs_c:
        print("CPU: %s; command: %s" % (cpu_model(), " ".join(sys.argv)))
        vs_c(args, args.kind)
    elif args.kinds:
        print("CPU: %s; command: %s" % (cpu_model(), " ".join(sys.argv)))
        for n in args.n:
            agents = Agents(n)
            # the brute-force kind (the tests' oracle) takes seconds a frame here
            ms = [Quadgrid(agents, k) for k in quadgrid.KINDS if n <= 20_000 or k != "brute_force"]
            t = {m.name: [] for m in ms}
            for f in range(args.frames or 10):
                agents.move()
                for m in ms[f % len(ms):] + ms[:f % len(ms)]:
                    t0 = time.perf_counter()
                    m.frame(agents)
                    t[m.name].append(time.perf_counter() - t0)
            for name, v in sorted(t.items(), key=lambda kv: np.median(kv[1])):
                print("N=%d %-36s %9.3f ms" % (n, name, 1e3 * float(np.median(v))))
    else:
        run(args)


if __name__ == "__main__":
    main()
