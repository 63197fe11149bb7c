"""coflowsim's rate rule for coflow schedulers (SEBF, FIFO): MADD, even split, work conservation.

Used by the 8-ms stepping loop of :mod:`sim.coflow.steps`; learnt from coflowsim's
``CoflowSimulator`` (``updateRatesDynamicAlpha`` and the methods it calls), not copied.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit  # type: ignore[import-untyped]


@njit(cache=True, error_model="numpy")  # type: ignore[misc]
def madd(
    order: Any,
    start: Any,
    deadline: Any,
    now: float,
    first: Any,
    count: Any,
    src: Any,
    dst: Any,
    rem: Any,
    bps: Any,
    ports: int,
    cap_bps: float,
    zero: float,
    red_of: Any,
    counter: Any,
    negative_counters: bool,
) -> None:  # pragma: no cover - compiled
    """coflowsim's rates for the coflows ``order`` (their flows ``first[c]:first[c] +
    count[c]``, reducer-major, ``rem > 0`` = unfinished), written into ``bps``.

    MADD in ``order`` (every flow paced to end with its coflow's bottleneck, computed
    against what earlier coflows left), an even split of what is left among the
    coflows that found a port of theirs full, then work conservation in deadline
    order at ``now``: a stable sort on Java's ``(int)`` of the time left to
    ``start + deadline``. The receiver side of a bottleneck is the reducer's running total
    ``counter[red_of[i]]`` as coflowsim keeps it, not the sum of its unfinished flows
    (:mod:`sim.coflow.steps` says why that matters);
    ``negative_counters``: like coflowsim, also take ``counter * 8 / free`` into the
    bottleneck when both are negative (a finished reducer whose counter went below
    zero, over a port overdrawn by rounding), which its unguarded division does.
    """
    left = np.empty(len(order), dtype=np.int64)
    for q in range(len(order)):
        left[q] = np.int64(start[order[q]] + deadline[order[q]] - now)
    edf = order[np.argsort(left, kind="mergesort")]
    send_free = np.full(ports, cap_bps)
    recv_free = np.full(ports, cap_bps)
    s_bytes = np.zeros(ports)
    r_bytes = np.zeros(ports)
    s_used = np.zeros(ports)
    r_used = np.zeros(ports)
    skipped = np.zeros(order.shape[0], dtype=np.int64)
    n_skip = 0
    for c in order:
        lo = first[c]
        hi = lo + count[c]
        for i in range(lo, hi):
            bps[i] = 0.0  # every rate is decided afresh
            s_bytes[src[i]] = 0.0
            r_bytes[dst[i]] = 0.0
            s_used[src[i]] = 0.0
            r_used[dst[i]] = 0.0
        for i in range(lo, hi):
            if rem[i] > 0.0:
                s_bytes[src[i]] += rem[i]
        for i in range(lo, hi):  # also for a finished reducer (its counter is <= 0)
            r_bytes[dst[i]] = counter[red_of[i]]
        alpha = 0.0
        skip = False
        for i in range(lo, hi):
            sb = s_bytes[src[i]]
            rb = r_bytes[dst[i]]
            if sb > 0.0:
                if send_free[src[i]] <= zero:
                    skip = True
                else:
                    alpha = max(alpha, sb * 8.0 / send_free[src[i]])
            if rb > 0.0:
                if recv_free[dst[i]] <= zero:
                    skip = True
                else:
                    alpha = max(alpha, rb * 8.0 / recv_free[dst[i]])
            elif negative_counters and rb < 0.0 and recv_free[dst[i]] < 0.0:
                # a finished reducer's counter gone below zero (a leftover flow
                # moved after it closed) over a port overdrawn by rounding:
                # coflowsim takes this quotient into the maximum as well
                alpha = max(alpha, rb * 8.0 / recv_free[dst[i]])
        if skip or alpha <= 0.0:
            skipped[n_skip] = c
            n_skip += 1
            continue
        i = lo
        while i < hi:  # one reducer (same dst) at a time
            j = i
            while j < hi and dst[j] == dst[i]:
                j += 1
            if recv_free[dst[i]] > zero:
                for k in range(i, j):
                    if rem[k] <= 0.0:
                        continue
                    cur = rem[k] * 8.0 / alpha
                    if cur > send_free[src[k]] or cur > recv_free[dst[k]]:
                        cur = min(send_free[src[k]], recv_free[dst[k]])
                    s_used[src[k]] += cur
                    r_used[dst[k]] += cur
                    bps[k] = cur
            i = j
        for i in range(lo, hi):
            send_free[src[i]] -= s_used[src[i]]
            s_used[src[i]] = 0.0
            recv_free[dst[i]] -= r_used[dst[i]]
            r_used[dst[i]] = 0.0
    # coflows that could not get their bottleneck share split what is left evenly
    n_map = np.zeros(ports, dtype=np.int64)
    n_red = np.zeros(ports, dtype=np.int64)
    for q in range(n_skip):
        c = skipped[q]
        for k in range(first[c], first[c] + count[c]):
            if rem[k] > 0.0 and recv_free[dst[k]] > zero and send_free[src[k]] > zero:
                n_map[src[k]] += 1
                n_red[dst[k]] += 1
    s_used[:] = 0.0
    r_used[:] = 0.0
    for q in range(n_skip):
        c = skipped[q]
        for k in range(first[c], first[c] + count[c]):
            if rem[k] <= 0.0 or recv_free[dst[k]] <= zero or n_red[dst[k]] == 0:
                continue
            if send_free[src[k]] <= zero or n_map[src[k]] == 0:
                continue
            m = min(send_free[src[k]] / n_map[src[k]], recv_free[dst[k]] / n_red[dst[k]])
            if m <= zero:
                m = 0.0
            bps[k] = m
            s_used[src[k]] += m
            r_used[dst[k]] += m
    send_free -= s_used
    recv_free -= r_used
    for c in edf:  # work conservation
        lo = first[c]
        hi = lo + count[c]
        i = lo
        while i < hi:
            j = i
            while j < hi and dst[j] == dst[i]:
                j += 1
            if recv_free[dst[i]] > zero:
                for k in range(i, j):
                    if rem[k] <= 0.0:
                        continue
                    m = min(send_free[src[k]], recv_free[dst[k]])
                    if m <= zero:
                        m = 0.0
                    bps[k] += m
                    send_free[src[k]] -= m
                    recv_free[dst[k]] -= m
            i = j
