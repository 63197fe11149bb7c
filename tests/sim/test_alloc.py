"""The vectorised allocator against a direct reference implementation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sim.numpy_alloc import allocate


def reference(paths: list[list[int]], keys: list[int], cap: list[float]) -> list[float]:
    """Textbook strict priority + progressive filling, one level at a time."""
    resid = list(cap)
    rates = [0.0] * len(paths)
    for level in sorted(set(keys)):
        live = [i for i, k in enumerate(keys) if k == level]
        while live:
            count: dict[int, int] = {}
            for i in live:
                for lk in paths[i]:
                    count[lk] = count.get(lk, 0) + 1
            inc = min(resid[lk] / c for lk, c in count.items())
            for lk, c in count.items():
                resid[lk] -= inc * c
            for i in live:
                rates[i] += inc
            full = {lk for lk in count if resid[lk] <= 1e-9 * cap[lk]}
            live = [i for i in live if not full.intersection(paths[i])]
    return rates


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[list[int]], list[int], list[float]]:
    n_links = draw(st.integers(1, 6))
    cap = [float(draw(st.integers(1, 100))) for _ in range(n_links)]
    n = draw(st.integers(1, 80))
    paths = [
        sorted(draw(st.sets(st.integers(0, n_links - 1), min_size=1, max_size=3))) for _ in range(n)
    ]
    keys = [draw(st.integers(0, draw(st.integers(0, 12)))) for _ in range(n)]
    return paths, keys, cap


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(instances())
def test_matches_reference(inst: tuple[list[list[int]], list[int], list[float]]) -> None:
    paths, keys, cap = inst
    pad = len(cap)
    width = max(len(p) for p in paths)
    arr = np.array([p + [pad] * (width - len(p)) for p in paths], dtype=np.int64)
    got = allocate(arr, np.array(keys, dtype=np.int64), np.array(cap))
    want = reference(paths, keys, cap)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-7)
    # feasibility: no link over capacity
    load = np.zeros(pad)
    for p, r in zip(paths, got, strict=True):
        load[p] += r
    assert (load <= np.array(cap) * (1 + 1e-9)).all()
