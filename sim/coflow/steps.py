"""coflowsim's coflow schedulers (SEBF, FIFO) stepped 8 ms at a time, as coflowsim runs them.

Why stepping, where coflowsim-compatible fair (:mod:`sim.coflow.compat`) is
event-driven: coflowsim keeps two byte counts for every reducer, the remaining bytes of each of
its flows and the reducer's own running total (``shuffleBytesLeft``), and both are
decremented once per flow per 8-ms step. Its Varys rate rule (MADD) takes the
receiver side of a coflow's bottleneck from the running total and the sender side
from the flows. In exact arithmetic the two agree; in floating point, after
thousands of steps, the total drifts from the sum of its flows (by up to 6 bytes in
1.1e11 on FB2010). MADD then leaves ``free x (1 - sum / total)`` unallocated at a
bottleneck receiver port: negative or ulp-sized (port full) when the total is below
the sum, but above coflowsim's "zero" of 1e-3 bit/s when it is far enough above
(6 bytes in 1.1e11 is 0.06 bit/s of a 2^30 bit/s port). A port with a few hundredths
of a bit/s left is not full, so the next coflow that uses it is not set aside for an
even share of what is left: it gets MADD rates computed against that sliver, i.e.
almost nothing, until work conservation or the next rate change. Which way each
remainder falls depends on the exact sequence of subtractions, so the only faithful
way to get coflowsim's rates is to do its subtractions: every flow, every step, in
its order (per reducer, mappers by port). Measured on FB2010 (docs/measurements/simulator.md):
this loop gives FIFO 82,648.96 ms and SEBF 28,528.46 ms against coflowsim's
published 82,649 and 28,529 ms, where an event-driven loop (receiver bytes = sum of
the flows; removed 2026-12-02) was 6.0 % above and 3.1 % below.

The rate rule itself is :func:`sim.coflow.rates.madd` (with the counter); this
module is the time loop: admission at epochs, one step at a time, a reducer done
when its counter or its flow count reaches zero, a coflow done with its last
reducer, rates recomputed at admissions and departures only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit  # type: ignore[import-untyped]

from sim.coflow.rates import madd


@njit(cache=True, error_model="numpy")  # type: ignore[misc]
def step_coflows(
    arr_ms: Any,
    alpha0: Any,
    deadline: Any,
    sebf: bool,
    first: Any,
    count: Any,
    src: Any,
    dst: Any,
    size: Any,
    red_of: Any,
    red_job: Any,
    red_bytes: Any,
    ports: int,
    cap_bps: float,
    epoch_ms: int,
    step_ms: int,
    second_ms: int,
    zero: float,
    negative_counters: bool,
    relayout: bool,
) -> tuple[Any, Any, int]:  # pragma: no cover - compiled
    """Start and finish (ms) of every coflow, and the number of rate updates."""
    n_cf = len(arr_ms)
    n_red = len(red_bytes)
    rem = size.copy()
    bps = np.zeros(len(size))
    counter = red_bytes.copy()  # the reducers' running totals
    red_flows = np.zeros(n_red, dtype=np.int64)  # unfinished flows per reducer
    for r in red_of:
        red_flows[r] += 1
    red_done = np.zeros(n_red, dtype=np.bool_)
    red_left = np.zeros(n_cf, dtype=np.int64)  # unfinished reducers per coflow
    for r in range(n_red):
        red_left[red_job[r]] += 1
    start = np.full(n_cf, np.nan)
    finish = np.full(n_cf, np.nan)
    jobs = np.empty(0, dtype=np.int64)  # admitted, unfinished, in scheduling order
    act = np.empty(0, dtype=np.int64)  # admitted, unfinished flows
    moving = np.empty(0, dtype=np.int64)  # those with a rate
    frac = 1.0 * step_ms / second_ms
    events = 0
    nxt = 0
    t = 0
    while nxt < n_cf or len(jobs) > 0:
        added = False
        if relayout and nxt < n_cf and arr_ms[nxt] <= t + epoch_ms:
            # coflowsim lays the flows out afresh at an admission, from unfinished
            # reducers only: a flow left over in a reducer its counter already closed
            # stops moving (it only moves until then)
            act = act[~red_done[red_of[act]]]
        while nxt < n_cf and arr_ms[nxt] <= t + epoch_ms:
            c = nxt
            nxt += 1
            start[c] = t
            pos = len(jobs)
            if sebf:  # before the first coflow with a larger initial bottleneck
                pos = 0
                while pos < len(jobs) and not alpha0[c] < alpha0[jobs[pos]]:
                    pos += 1
            jobs = np.concatenate((jobs[:pos], np.array([c]), jobs[pos:]))
            act = np.concatenate((act, np.arange(first[c], first[c] + count[c])))
            added = True
        if added:
            madd(
                jobs,
                start,
                deadline,
                t,
                first,
                count,
                src,
                dst,
                rem,
                bps,
                ports,
                cap_bps,
                zero,
                red_of,
                counter,
                negative_counters,
            )
            events += 1
            act = act[rem[act] > 0.0]
            moving = act[bps[act] > 0.0]
        i = 0
        while i < epoch_ms and len(jobs) > 0:
            now = t + i
            departed = False
            for k in moving:
                if rem[k] <= 0.0:
                    continue
                moved = min((bps[k] / 8.0) * frac, rem[k])
                rem[k] -= moved
                r = red_of[k]
                if rem[k] <= zero:
                    rem[k] = 0.0  # finished (coflowsim drops it with its last crumb)
                    red_flows[r] -= 1
                counter[r] -= moved
                if (counter[r] <= zero or red_flows[r] == 0) and not red_done[r]:
                    red_done[r] = True
                    counter[r] = 0.0
                    job = red_job[r]
                    red_left[job] -= 1
                    if red_left[job] == 0:
                        finish[job] = now + step_ms
                        departed = True
            if departed:
                jobs = jobs[np.isnan(finish[jobs])]
                madd(
                    jobs,
                    start,
                    deadline,
                    now,
                    first,
                    count,
                    src,
                    dst,
                    rem,
                    bps,
                    ports,
                    cap_bps,
                    zero,
                    red_of,
                    counter,
                    negative_counters,
                )
                events += 1
                act = act[rem[act] > 0.0]
                moving = act[bps[act] > 0.0]
            i += step_ms
        t += epoch_ms
    return start, finish, events
