# SPDX-License-Identifier: MIT
"""examples/agents.py: the NumPy port of the agents workload gives the check
values of the workload definition, and the example draws its PNG."""
import os
import sys

import numpy as np
import pytest

import quadgrid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from agents import Agents, checksum, draw  # noqa: E402


@pytest.mark.parametrize("kind", ["point_grid", "grid", "quadtree"])
def test_mixed_check_values(kind):
    # docs/workloads.md: mixed, N = 10,000, frame 1.
    a = Agents(10_000, mixed=True)
    ix = quadgrid.Index(kind, (0, 0, float(a.world), float(a.world)), element_size=5.0, max_element_size=8.0)
    h = ix.insert(a.boxes)
    np.testing.assert_array_equal(h, np.arange(10_000))
    a.move()
    ix.move(h, a.boxes)
    ix.cleanup()
    p = ix.pairs()
    assert (len(p), "%016x" % checksum(p)) == (5469, "b84f8925109999a7")
    assert checksum(p[::-1]) == checksum(p)


def test_example_draws(tmp_path):
    pytest.importorskip("matplotlib")
    a = Agents(500)
    ix = quadgrid.Index("point_grid", (0, 0, float(a.world), float(a.world)))
    ix.insert(a.boxes)
    out = tmp_path / "agents.png"
    draw(a, ix.pairs(), str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
