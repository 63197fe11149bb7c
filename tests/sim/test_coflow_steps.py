"""coflowsim's per-reducer byte counter: the rate rule with it, and the 8-ms stepping loop.

Rates in the unit tests are worked out by hand from coflowsim's rule (MADD in
coflow order, an even split for coflows that find a port full, then work
conservation in deadline order) at 8e6 bit/s ports.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim.coflow.rates import madd

CAP = 8e6  # bit/s: 1e6 bytes/s, so a flow of 1e6 bytes paced over 1 s gets 8e6 bit/s
ZERO = 1e-3


def _rates(
    coflows: list[list[tuple[int, int, float, float]]],
    order: list[int],
    edf: list[int],
    negative_counters: bool = True,
) -> list[float]:
    """``coflows[c]`` = flows ``(src, dst, remaining bytes, counter of dst's reducer)``,
    reducer-major; returns every flow's rate (bit/s) after one rate update, in that order."""
    flows = [f for cf in coflows for f in cf]
    first = np.cumsum([0] + [len(cf) for cf in coflows])[:-1].astype(np.int64)
    count = np.array([len(cf) for cf in coflows], dtype=np.int64)
    src = np.array([f[0] for f in flows], dtype=np.int64)
    dst = np.array([f[1] for f in flows], dtype=np.int64)
    rem = np.array([f[2] for f in flows])
    counter = np.array([f[3] for f in flows])  # one reducer per flow here: red_of = index
    red_of = np.arange(len(flows), dtype=np.int64)
    bps = np.zeros(len(flows))
    deadline = np.zeros(len(coflows))
    deadline[edf] = np.arange(len(edf))  # work conservation in ``edf`` order at now = 0
    madd(
        np.array(order, dtype=np.int64),
        np.zeros(len(coflows)),
        deadline,
        0.0,
        first,
        count,
        src,
        dst,
        rem,
        bps,
        4,
        CAP,
        ZERO,
        red_of,
        counter,
        negative_counters,
    )
    return [float(b) for b in bps]


def test_receiver_side_of_the_bottleneck_is_the_reducers_counter() -> None:
    # one coflow, flows 0->2 and 1->2 of 1e6 bytes each (one reducer at port 2)
    # a counter equal to the sum of the flows, 2e6 bytes: bottleneck 2 s, each flow
    # 4e6 bit/s, port 2 full
    exact = [(0, 2, 1e6, 2e6), (1, 2, 1e6, 2e6)]
    assert _rates([exact], [0], [0]) == [4e6, 4e6]
    # the reducer's counter says 4e6 bytes: bottleneck 4 s, MADD gives each 2e6 bit/s,
    # then work conservation hands port 2's other 4e6 bit/s to the first flow
    flows = [(0, 2, 1e6, 4e6), (1, 2, 1e6, 4e6)]
    assert _rates([flows], [0], [0]) == [6e6, 2e6]


def test_negative_counter_over_an_overdrawn_port_counts_in_the_bottleneck() -> None:
    # x: 0->3 and 1->3 (1e6 bytes each) but its reducer's counter says 1.5e6: bottleneck
    # 1.5 s, each flow 8e6 / 1.5 bit/s, port 3 overdrawn to 8e6 - 16e6 / 1.5 = -8e6 / 3
    x = [(0, 3, 1e6, 1.5e6), (1, 3, 1e6, 1.5e6)]
    # y: 2->1 (1e6 bytes), and a finished reducer at port 3 whose counter is -1e6
    y = [(2, 1, 1e6, 1e6), (2, 3, 0.0, -1e6)]
    # z: 2->0 (1e6 bytes); work conservation serves z first
    z = [(2, 0, 1e6, 1e6)]
    # coflowsim divides -1e6 x 8 by -8e6 / 3: 3 s, y's bottleneck: y gets 8e6 / 3 and
    # z MADD-paces over what is left at port 2 (16e6 / 3 bit/s): 1.5 s, 16e6 / 3 bit/s
    got = _rates([x, y, z], [0, 1, 2], [2, 0, 1])
    assert got == pytest.approx([8e6 / 1.5, 8e6 / 1.5, 8e6 / 3, 0.0, 16e6 / 3], rel=1e-12)
    # without that quotient y's bottleneck is 1 s: y takes port 2 whole, z finds it
    # full and gets an even split of nothing
    got = _rates([x, y, z], [0, 1, 2], [2, 0, 1], negative_counters=False)
    assert got == pytest.approx([8e6 / 1.5, 8e6 / 1.5, 8e6, 0.0, 0.0], rel=1e-12)
