# SPDX-License-Identifier: MIT
"""The GIL is free while C runs: another Python thread keeps running during
one long call (with the GIL held it would stall for the whole call)."""
import threading
import time

import numpy as np

import quadgrid
from conftest import scene


def test_long_call_lets_python_run():
    ix = quadgrid.Index("brute_force", (0, 0, 100, 100))
    ix.insert(scene(3, 3000))
    areas = np.tile(np.array([[0, 0, 100, 100]], np.float32), (400, 1))
    t0 = time.perf_counter()
    ix.query_many(areas)
    one = time.perf_counter() - t0
    reps = max(1, int(0.4 / max(one, 1e-4)))
    areas = np.tile(areas, (reps, 1))  # one call of about 0.4 s
    done = threading.Event()
    took = []

    def work():
        t = time.perf_counter()
        ix.query_many(areas)
        took.append(time.perf_counter() - t)
        done.set()

    th = threading.Thread(target=work)
    gaps, last = [], None
    th.start()
    while not done.is_set():
        now = time.perf_counter()
        if last is not None:
            gaps.append(now - last)
        last = now
        time.sleep(0.001)
    th.join()
    print("call %.3f s, %d ticks, longest gap %.3f s" % (took[0], len(gaps), max(gaps, default=0)))
    assert took[0] > 0.1
    assert len(gaps) > 10 and max(gaps) < 0.5 * took[0]
