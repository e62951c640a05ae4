#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The `agents` workload (docs/workloads.md, apps/common/workload.c)
in NumPy: N squares move and bounce in a W x W world, and every frame quadgrid
finds all overlapping pairs. Draws the last frame to a PNG with matplotlib.

    python3 examples/agents.py --n 2000 --frames 60 --png agents.png
"""
import argparse
import time

import numpy as np

import quadgrid

SEED = 12345
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(z):
    """splitmix64's output function on a uint64 array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniforms(count, seed=SEED, start=0):
    """The workload's uniform floats u_start .. u_start+count-1 of the stream."""
    with np.errstate(over="ignore"):
        k = np.arange(start + 1, start + count + 1, dtype=np.uint64)
        z = _mix(np.uint64(seed) + k * _GOLDEN)
    return (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24)


def checksum(pairs):
    """Sum of mix((i << 32) | j) over the pairs, modulo 2^64 (order-free)."""
    p = np.asarray(pairs, dtype=np.uint64).reshape(-1, 2)
    with np.errstate(over="ignore"):
        return int(_mix((p[:, 0] << np.uint64(32)) | p[:, 1]).sum(dtype=np.uint64))


class Agents:
    """N agents in float32, drawn and moved exactly as the C definition does
    (five draws per agent, in order; cos/sin through NumPy's float32, which
    may differ from the C library's cosf in the last bit)."""

    def __init__(self, n, mixed=False):
        f = np.float32
        self.n = n
        self.world = W = f(np.sqrt(f(n))) * f(16.0)
        u = uniforms(5 * n).reshape(n, 5)
        h = f(1.0) + f(3.0) * u[:, 0]
        if mixed:
            h[::100] *= f(16.0)
        span = W - f(2.0) * h
        self.h = h
        self.x = h + span * u[:, 1]
        self.y = h + span * u[:, 2]
        angle = f(6.28318530718) * u[:, 3]
        speed = f(0.5) + f(1.5) * u[:, 4]
        self.vx = speed * np.cos(angle)
        self.vy = speed * np.sin(angle)
        self.boxes = np.empty((n, 4), dtype=np.float32)
        self._box()

    def _box(self):
        b = self.boxes
        np.subtract(self.x, self.h, out=b[:, 0])
        np.subtract(self.y, self.h, out=b[:, 1])
        np.add(self.x, self.h, out=b[:, 2])
        np.add(self.y, self.h, out=b[:, 3])

    def move(self):
        """One frame's step 1: move, bounce off the walls, new boxes."""
        h, W = self.h, self.world
        hi = W - h
        for p, v in ((self.x, self.vx), (self.y, self.vy)):
            p += v
            out = (p < h) | (p > hi)
            v[out] = -v[out]
            np.clip(p, h, hi, out=p)
        self._box()


def draw(agents, pairs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    hit = np.zeros(agents.n, bool)
    hit[pairs.reshape(-1)] = True
    b = agents.boxes
    fig, ax = plt.subplots(figsize=(7, 7), dpi=110)
    for mask, color in ((~hit, "#4a78b5"), (hit, "#d6402b")):
        rects = [Rectangle((x0, y0), x1 - x0, y1 - y0) for x0, y0, x1, y1 in b[mask]]
        ax.add_collection(PatchCollection(rects, facecolor=color, edgecolor="none", alpha=0.85))
    ax.set_xlim(0, agents.world)
    ax.set_ylim(0, agents.world)
    ax.set_aspect("equal")
    ax.set_title("agents: N = %d, %d overlapping pairs (red: in a pair)" % (agents.n, len(pairs)))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--kind", default="point_grid", choices=quadgrid.KINDS)
    ap.add_argument("--mixed", action="store_true", help="every hundredth agent 16x larger")
    ap.add_argument("--png", default="agents.png")
    a = ap.parse_args()

    agents = Agents(a.n, a.mixed)
    # The C bench's tuning for agents: typical width 5, largest 8.
    index = quadgrid.Index(a.kind, (0, 0, float(agents.world), float(agents.world)),
                           element_size=5.0, max_element_size=8.0)
    handles = index.insert(agents.boxes)
    index.cleanup()
    t_index = 0.0
    for frame in range(1, a.frames + 1):
        agents.move()
        t0 = time.perf_counter()
        index.move(handles, agents.boxes)
        index.cleanup()
        pairs = index.pairs()
        t_index += time.perf_counter() - t0
        if frame in (1, a.frames):
            print("frame %d: %d pairs, checksum %016x" % (frame, len(pairs), checksum(pairs)))
    print("%s: %.3f ms a frame (move + cleanup + pairs)" % (a.kind, 1e3 * t_index / a.frames))
    if a.png:
        draw(agents, pairs, a.png)
        print("wrote", a.png)


if __name__ == "__main__":
    main()
