"""Compiled (numba) kernels: strict priority across levels, max-min fair inside one.

The simulator's one allocator. Model: levels served in ascending key order, each
level progressively filled ("max-min fair") against what the levels before it
left, at a cost that grows linearly in flows: flows come sorted by key, a level's
flows are indexed by link once (a CSR adjacency), and each filling round only
touches the flows of the links that just saturated and the level's own links. A
level of ``n`` flows on ``u`` links costs ``O(n * hops + rounds * u)`` with
``rounds <= u``; a lone flow costs ``O(hops)``. Per-flow strict priority on
two-hop paths has a faster special case in :mod:`sim.core.heads`.

Why numba: a pure-numpy filling (kept as a test oracle,
``tests/sim/numpy_alloc.py``) pays ~10 numpy calls per round over all of the
level's flows; on the coflow trace (tens of thousands of
flows in flight, hundreds of rounds, 36k events) that was most of a 26-minute
run (docs/measurements/simulator.md has the numbers). The kernels are compiled once per
machine (``cache=True`` keeps them next to this file).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit  # type: ignore[import-untyped]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Relative tolerance when deciding that a link is saturated (as in the numpy oracle).
REL_EPS = 1e-9


@njit(cache=True)  # type: ignore[misc]
def _lone(paths: Any, i: int, resid: Any, rates: Any) -> None:  # pragma: no cover - compiled
    """A flow alone at its level takes the smallest residual on its path."""
    n_links = resid.shape[0]
    r = np.inf
    for k in range(paths.shape[1]):
        lk = paths[i, k]
        if lk < n_links and resid[lk] < r:
            r = resid[lk]
    if r > 0.0 and r < np.inf:
        rates[i] = r
        for k in range(paths.shape[1]):
            lk = paths[i, k]
            if lk < n_links:
                resid[lk] -= r
    elif r == np.inf:
        rates[i] = np.inf
    else:
        rates[i] = 0.0


@njit(cache=True)  # type: ignore[misc]
def _fill_level(
    paths: Any,
    lo: int,
    hi: int,
    resid: Any,
    rates: Any,
    cnt: Any,
    pos: Any,
    eps: float,
    dead: Any,
) -> None:  # pragma: no cover - compiled
    n_links = resid.shape[0]
    hops = paths.shape[1]
    # live flows: all links still have capacity
    live = np.zeros(hi - lo, dtype=np.bool_)
    touched = np.empty(min(n_links, (hi - lo) * hops) + 1, dtype=np.int64)
    n_t = 0
    alone = -1  # the one flow not dead (-2: several): a level is its flows not dead
    for i in range(lo, hi):
        rates[i] = 0.0
        if dead[i]:
            continue
        alone = i if alone == -1 else -2
        ok = True
        for k in range(hops):
            lk = paths[i, k]
            if lk < n_links and resid[lk] <= 0.0:
                ok = False
                break
        if not ok:
            continue
        live[i - lo] = True
        for k in range(hops):
            lk = paths[i, k]
            if lk < n_links:
                if cnt[lk] == 0:
                    touched[n_t] = lk
                    pos[lk] = n_t
                    n_t += 1
                cnt[lk] += 1
    if alone != -2:  # as in compacted arrays (filling would round differently)
        for j in range(n_t):
            cnt[touched[j]] = 0
        if alone >= 0:
            _lone(paths, alone, resid, rates)
        return
    if n_t == 0:
        for i in range(lo, hi):
            if live[i - lo]:
                rates[i] = np.inf
        return
    # CSR adjacency: touched link -> live flows on it
    start = np.zeros(n_t + 1, dtype=np.int64)
    for j in range(n_t):
        start[j + 1] = start[j] + cnt[touched[j]]
    fill = start[:-1].copy()
    adj = np.empty(start[n_t], dtype=np.int64)
    for i in range(lo, hi):
        if not live[i - lo]:
            continue
        for k in range(hops):
            lk = paths[i, k]
            if lk < n_links:
                j = pos[lk]
                adj[fill[j]] = i
                fill[j] += 1
    full = np.empty(n_t, dtype=np.int64)
    water = 0.0
    left = 0
    for i in range(lo, hi):
        if live[i - lo]:
            left += 1
    while left > 0:
        inc = np.inf
        for j in range(n_t):
            lk = touched[j]
            if cnt[lk] > 0:
                s = resid[lk] / cnt[lk]
                if s < inc:
                    inc = s
        if inc == np.inf:  # remaining flows cross no real link
            for i in range(lo, hi):
                if live[i - lo]:
                    rates[i] = np.inf
            break
        if inc < 0.0:
            inc = 0.0
        water += inc
        limit = inc * (1.0 + eps)
        # first charge this round to every link (counts as they were), then freeze
        n_full = 0
        for j in range(n_t):
            lk = touched[j]
            c = cnt[lk]
            if c > 0:
                if resid[lk] / c <= limit:
                    resid[lk] = 0.0
                    full[n_full] = j
                    n_full += 1
                else:
                    resid[lk] -= inc * c
        for q in range(n_full):
            j = full[q]
            for a in range(start[j], start[j + 1]):
                i = adj[a]
                if not live[i - lo]:
                    continue
                live[i - lo] = False
                left -= 1
                rates[i] = water
                for k in range(hops):
                    l2 = paths[i, k]
                    if l2 < n_links:
                        cnt[l2] -= 1
    for j in range(n_t):
        cnt[touched[j]] = 0


@njit(cache=True)  # type: ignore[misc]
def _allocate_sorted(
    paths: Any, keys: Any, capacity: Any, rates: Any, eps: float, dead: Any, rem: Any
) -> float:  # pragma: no cover - compiled
    """Fill ``rates``; return the seconds until the first live flow finishes (``rem``)."""
    n = paths.shape[0]
    n_links = capacity.shape[0]
    resid = capacity.copy()
    cnt = np.zeros(n_links, dtype=np.int64)
    pos = np.zeros(n_links, dtype=np.int64)
    lo = 0
    while lo < n:
        hi = lo + 1
        while hi < n and keys[hi] == keys[lo]:
            hi += 1
        if hi - lo == 1 and dead[lo]:
            rates[lo] = 0.0
        elif hi - lo == 1:
            _lone(paths, lo, resid, rates)
        else:
            _fill_level(paths, lo, hi, resid, rates, cnt, pos, eps, dead)
        lo = hi
    best = np.inf
    for i in range(n):
        if rates[i] > 0.0 and not dead[i]:
            t = rem[i] / rates[i]
            if t < best:
                best = t
    return float(best)


def allocate_sorted(paths: IntArray, keys: IntArray, capacity: FloatArray) -> FloatArray:
    """Rates for flows already sorted by ``keys`` (ascending = served first).

    ``paths`` is ``n x hops`` with padding ``len(capacity)`` meaning "no link".
    """
    n = paths.shape[0]
    rates = np.zeros(n, dtype=np.float64)
    if n:
        _allocate_sorted(
            np.ascontiguousarray(paths, dtype=np.int64),
            np.ascontiguousarray(keys, dtype=np.int64),
            np.ascontiguousarray(capacity, dtype=np.float64),
            rates,
            REL_EPS,
            np.zeros(n, dtype=np.bool_),
            np.ones(n, dtype=np.float64),
        )
    return rates


def allocate_live(
    paths: IntArray,
    keys: IntArray,
    capacity: FloatArray,
    dead: npt.NDArray[np.bool_],
    rem: FloatArray,
    rates: FloatArray,
) -> float:
    """In-place variant for an engine that keeps finished flows in its arrays
    (``dead``) between compactions: fills ``rates`` (0 for dead flows) and returns
    the seconds until the first live flow finishes at those rates (inf if none)."""
    if not paths.shape[0]:
        return float("inf")
    return float(_allocate_sorted(paths, keys, capacity, rates, REL_EPS, dead, rem))


def allocate(paths: IntArray, keys: IntArray, capacity: FloatArray) -> FloatArray:
    """Rates for flows given in any key order (sorted stably here, then :func:`allocate_sorted`)."""
    n = paths.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    order = np.argsort(keys, kind="stable")
    got = allocate_sorted(paths[order], keys[order], capacity)
    rates = np.empty(n, dtype=np.float64)
    rates[order] = got
    return rates


@njit(cache=True)  # type: ignore[misc]
def advance_and_mark(
    gid: Any, rem: Any, rate: Any, dead: Any, dt: float, time_eps: float, done: Any
) -> int:  # pragma: no cover - compiled
    """Advance every live flow by ``dt`` seconds and mark the finished ones dead.

    A flow is finished when less than ``time_eps`` seconds (or 1e-6 bytes) of sending
    are left. Nothing moves: the engine compacts its arrays only once many flows are
    dead (amortised O(1) per flow), so an event costs one pass over the rate array.
    Returns how many finished; their ids are ``done[:finished]``.
    """
    nd = 0
    for i in range(gid.shape[0]):
        if dead[i]:
            continue
        if dt > 0.0 and rate[i] > 0.0:
            rem[i] -= rate[i] * dt
        if rem[i] <= rate[i] * time_eps + 1e-6:
            dead[i] = True
            rate[i] = 0.0
            done[nd] = gid[i]
            nd += 1
    return nd


@njit(cache=True)  # type: ignore[misc]
def time_to_next(rem: Any, rate: Any) -> float:  # pragma: no cover - compiled
    """Seconds until the first flow finishes at its rate (inf if none moves)."""
    best = np.inf
    for i in range(rem.shape[0]):
        if rate[i] > 0.0:
            t = rem[i] / rate[i]
            if t < best:
                best = t
    return float(best)
