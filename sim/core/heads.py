"""Compiled kernels for strict per-flow priority (every flow its own rank) on two-hop paths.

Under per-flow FIFO (or any policy that gives every flow a distinct rank) the
allocation of :mod:`sim.core.alloc` is a greedy pass: in rank order each flow gets
``min(residual of its two links)``. On the coflow trace that pass walks every
flow in flight (~68k on average over FB2010's first 300 coflows under ``fifo``;
584k events on the whole trace) although only ~100 flows get a rate: it was 3/4
of a 193-s run.

Why only the *head* of each (uplink, downlink) pair matters: the first live flow
of a pair, in rank order, either gets ``r = min(residuals) > 0`` -- and subtracting
``r`` leaves the smaller residual exactly 0.0 -- or finds a link already full;
either way every later flow of the same pair finds a full link and gets 0. So
the pass needs only the pair heads (at most ports^2; ~15k of the 22.5k possible
on those 300 coflows), in rank order.
They are kept as a dense rank-ordered list (position and both links, so the
pass reads memory in order), with a per-flow link to the next live flow of the
same pair, which takes the head's place when the head finishes.
Rates, finish times and the next-finish time are exactly those of
:func:`sim.core.alloc.allocate_live` and :func:`sim.core.alloc.advance_and_mark`
(same operations in the same order on the same values); only the flows that have
a rate are advanced, because the others' remaining bytes do not change. Flows
that would finish on arrival (at most 1e-6 bytes) are the one case these
kernels do not cover; the engine keeps them on the general path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit  # type: ignore[import-untyped]


@njit(cache=True)  # type: ignore[misc]
def build_heads(
    paths: Any, dead: Any, links: int, nxt: Any, hpos: Any, hu: Any, hd: Any, tail: Any
) -> int:  # pragma: no cover - compiled
    """Pair heads of rank-sorted flows, in rank order: ``hpos[:h]`` their positions,
    ``hu``/``hd`` their two links; ``nxt[i]`` is the next live flow of ``i``'s pair
    (-1: none). A flow's path is two link ids below ``links``.
    ``tail`` is scratch of ``links**2`` entries, all -1 on entry and on return.
    Returns ``h``."""
    n = paths.shape[0]
    h = 0
    for i in range(n):
        nxt[i] = -1
        if dead[i]:
            continue
        p = paths[i, 0] * links + paths[i, 1]
        t = tail[p]
        if t < 0:
            hpos[h] = i
            hu[h] = paths[i, 0]
            hd[h] = paths[i, 1]
            h += 1
        else:
            nxt[t] = i
        tail[p] = i
    for i in range(n):
        if not dead[i]:
            tail[paths[i, 0] * links + paths[i, 1]] = -1
    return h


@njit(cache=True)  # type: ignore[misc]
def allocate_heads(
    hpos: Any,
    hu: Any,
    hd: Any,
    h: int,
    capacity: Any,
    rates: Any,
    rem: Any,
    moving: Any,
    n_moving: int,
    out: Any,
) -> int:  # pragma: no cover - compiled
    """Greedy strict-priority rates over the pair heads, in rank order.

    ``moving[:n_moving]`` lists the flows that had a rate (they are reset to 0);
    on return it lists those that have one now, in rank order, and the count is
    returned. ``out[0]`` gets the seconds until the first of them finishes.
    """
    for q in range(n_moving):
        rates[moving[q]] = 0.0
    resid = capacity.copy()
    n_open = 0
    for lk in range(resid.shape[0]):
        if resid[lk] > 0.0:
            n_open += 1
    m = 0
    best = np.inf
    for k in range(h):
        u = hu[k]
        d = hd[k]
        r = resid[u] if resid[u] < resid[d] else resid[d]
        if r > 0.0:
            i = hpos[k]
            rates[i] = r
            resid[u] -= r
            resid[d] -= r
            moving[m] = i
            m += 1
            t = rem[i] / r
            if t < best:
                best = t
            if resid[u] <= 0.0:
                n_open -= 1
            if resid[d] <= 0.0:
                n_open -= 1
            if n_open <= 0:
                break
    out[0] = best
    return m


@njit(cache=True)  # type: ignore[misc]
def _first_at_least(a: Any, h: int, x: int) -> int:  # pragma: no cover - compiled
    lo = 0
    hi = h
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)  # type: ignore[misc]
def advance_heads(
    gid: Any,
    rem: Any,
    rate: Any,
    dead: Any,
    paths: Any,
    nxt: Any,
    hpos: Any,
    hu: Any,
    hd: Any,
    h: Any,
    moving: Any,
    n_moving: int,
    dt: float,
    time_eps: float,
    done: Any,
) -> int:  # pragma: no cover - compiled
    """Advance the moving flows by ``dt`` and mark the finished ones dead (the rule of
    :func:`sim.core.alloc.advance_and_mark`); a finished head hands its place in
    the rank-ordered head list to its pair's next flow. ``h[0]`` is the number of
    heads (updated). Returns how many finished; their ids are ``done[:finished]``."""
    nd = 0
    for q in range(n_moving):
        i = moving[q]
        if dead[i]:
            continue
        if dt > 0.0 and rate[i] > 0.0:
            rem[i] -= rate[i] * dt
        if rem[i] <= rate[i] * time_eps + 1e-6:
            dead[i] = True
            rate[i] = 0.0
            done[nd] = gid[i]
            nd += 1
            n = h[0]
            k = _first_at_least(hpos, n, i)
            j = nxt[i]
            if j < 0:  # the pair is done: drop its head
                for a in range(k, n - 1):
                    hpos[a] = hpos[a + 1]
                    hu[a] = hu[a + 1]
                    hd[a] = hd[a + 1]
                h[0] = n - 1
            else:  # the successor (later in rank) takes the pair's place
                m = _first_at_least(hpos, n, j)
                for a in range(k, m - 1):
                    hpos[a] = hpos[a + 1]
                    hu[a] = hu[a + 1]
                    hd[a] = hd[a + 1]
                hpos[m - 1] = j
                hu[m - 1] = paths[j, 0]
                hd[m - 1] = paths[j, 1]
    return nd


@njit(cache=True)  # type: ignore[misc]
def time_to_next_moving(
    rem: Any, rate: Any, moving: Any, n_moving: int
) -> float:  # pragma: no cover
    """Seconds until the first moving flow finishes at its rate (inf if none)."""
    best = np.inf
    for q in range(n_moving):
        i = moving[q]
        if rate[i] > 0.0:
            t = rem[i] / rate[i]
            if t < best:
                best = t
    return float(best)
