"""coflowsim-compatible semantics: the peer simulator's modelling choices, as options.

coflowsim (the Varys/Aalo authors' simulator) and the fluid engine
(:mod:`sim.coflow.workload`) model the same trace differently. This module
re-implements coflowsim's choices (learnt from reading its source; nothing is
copied) so that each difference can be switched on and its effect measured:

* **time**: 8 ms steps; a "second" is 1,024 simulated ms in which a port moves
  2^27 bytes (so 2^30 bit/s ports run 2.4 % slower than in real time); a flow
  or reducer that finishes inside a step finishes at the step's end.
* **arrivals**: coflows are admitted at the start of 10,240-ms epochs, every coflow
  arriving before the *next* epoch starts is admitted now, and its completion time
  is counted from that admission (so up to 10.24 s before its trace arrival).
* **sizes**: a reducer's bytes are rounded up to a multiple of ``mappers`` MB and
  every flow is at least 1 MB (:func:`sim.coflow.trace.flow_arrays`).
* **fair**: not max-min: every step a flow moves ``min(C / n_down, C / n_up)`` with
  ``n`` the flows at its reducer's and mapper's port (capacity a bottleneck
  leaves unused is not redistributed).
* **varys (SEBF) / fifo**: coflows ordered by their *initial* bottleneck (SEBF) or
  admission (FIFO); inside a coflow MADD rates (every flow paced to finish with
  the coflow's bottleneck, ``remaining / alpha``); then spare capacity is handed
  out greedily flow by flow, coflows in order of ``start + deadline`` (a random
  deadline multiple in [1, 2) of the bottleneck time, drawn from Java's
  ``Random(17)`` as coflowsim does). A coflow that finds a port of its full
  (no bottleneck rate) gets an even split of what is left instead. Rates change
  only when a coflow is admitted or completes -- a flow that finishes earlier
  leaves its bandwidth idle.
  (coflowsim's FIFO is FIFO between coflows; :mod:`echelon.policies` ``fifo`` is
  per-flow FIFO, another difference.) The receiver side of a coflow's bottleneck
  is each reducer's own running byte count, decremented flow by flow every step,
  not the sum of its flows: the two drift apart by float rounding and coflowsim's
  rates depend on which way (:mod:`sim.coflow.steps`).
* coflowsim declares "at most 5 concurrent flows per reducer" but its FAIR
  simulator overrides the limit with the reducer's flow count, so every flow
  starts at once; ``max_flows_per_reducer`` is therefore off by default.

Fair is event-driven: between events the per-step bytes of every flow are
constant, so the simulator jumps to the step where the next flow finishes, or to
the next admission epoch. Varys and fifo step every 8 ms (:mod:`sim.coflow.steps`),
because the reducers' counters need coflowsim's exact sequence of subtractions.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from echelon.errors import SpecError
from sim.coflow.steps import step_coflows
from sim.coflow.trace import CoflowTrace, flow_arrays
from sim.coflow.workload import CoflowResult

#: coflowsim's floating-point "zero" (bytes and bits/s).
ZERO = 1e-3
POLICIES = {"fair": "fair", "varys": "sebf", "sebf": "sebf", "fifo": "fifo"}


@dataclass(frozen=True)
class CompatOptions:
    """Which of coflowsim's choices to apply (all on = coflowsim's defaults)."""

    step_ms: int = 8
    second_ms: int = 1024
    epoch_ms: int = 10240
    sizes: bool = True
    max_flows_per_reducer: int | None = None
    # varys/fifo (probes of two details of coflowsim's source, both on by default
    # as coflowsim does them; ``python -m bench.coflow probe``): a finished
    # reducer's counter below zero over an
    # overdrawn port counts in the bottleneck (its unguarded division); at an
    # admission, flows left in a reducer its counter closed stop moving (it lays the
    # flows out afresh from unfinished reducers only)
    negative_counters: bool = True
    relayout: bool = True


class JavaRandom:
    """java.util.Random's documented 48-bit linear congruential generator."""

    _MULT = 0x5DEECE66D
    _MASK = (1 << 48) - 1

    def __init__(self, seed: int) -> None:
        self.seed = (seed ^ self._MULT) & self._MASK

    def _next(self, bits: int) -> int:
        self.seed = (self.seed * self._MULT + 0xB) & self._MASK
        return self.seed >> (48 - bits)

    def next_double(self) -> float:
        return ((self._next(26) << 27) + self._next(27)) * 2.0**-53


def simulate_compat(
    trace: CoflowTrace,
    policy: str,
    port_bytes_per_s: float,
    options: CompatOptions | None = None,
) -> CoflowResult:
    """Run ``fair``, ``varys`` (SEBF) or ``fifo`` with coflowsim's semantics."""
    opt = options or CompatOptions()
    algo = POLICIES.get(policy)
    if algo is None:
        raise SpecError("policy", f"--coflowsim supports {sorted(POLICIES)}, not {policy!r}")
    wall = time.perf_counter()
    fa = flow_arrays(trace, coflowsim_sizes=opt.sizes)
    n_cf = len(fa.names)
    cf_of = np.repeat(np.arange(n_cf, dtype=np.int64), fa.count)
    for c in range(n_cf):
        lo, hi = fa.first[c], fa.first[c] + fa.count[c]
        if len(np.unique(fa.src[lo:hi])) * len(np.unique(fa.dst[lo:hi])) != hi - lo:
            raise SpecError(f"coflow {fa.names[c]}", "--coflowsim needs distinct mapper ports")
    # coflowsim's flow order inside a coflow: reducers by port, then mappers by port
    order = np.lexsort((fa.src, fa.dst, cf_of))
    src, dst, size = fa.src[order], fa.dst[order], fa.size[order]
    cap_bps = port_bytes_per_s * 8.0
    step_bytes_per_bps = opt.step_ms / opt.second_ms / 8.0  # bytes per step for 1 bit/s
    arr_ms = fa.arrival * 1000.0
    if algo != "fair":
        # static alpha (bytes) and deadline (ms), as coflowsim computes them at load time
        rng = JavaRandom(17)
        deadline = np.zeros(n_cf)
        alpha0 = np.zeros(n_cf)
        for c in range(n_cf):
            lo, hi = int(fa.first[c]), int(fa.first[c] + fa.count[c])
            m = len(np.unique(src[lo:hi]))
            per_red = np.bincount(dst[lo:hi], weights=size[lo:hi])
            alpha0[c] = max(per_red.sum() / m, per_red.max())
            mult = 1.0 + rng.next_double()
            deadline[c] = alpha0[c] / port_bytes_per_s * mult * 1000.0
        # reducers: runs of one (coflow, port) in the sorted flows
        new = np.r_[True, (cf_of[1:] != cf_of[:-1]) | (dst[1:] != dst[:-1])]
        red_of = np.cumsum(new) - 1
        red_job = cf_of[new]
        red_bytes = np.bincount(red_of, weights=size)
        start, finish, events = step_coflows(
            arr_ms,
            alpha0,
            deadline,
            algo == "sebf",
            fa.first,
            fa.count,
            src,
            dst,
            size,
            red_of,
            red_job,
            red_bytes,
            fa.ports,
            cap_bps,
            opt.epoch_ms,
            opt.step_ms,
            opt.second_ms,
            ZERO,
            opt.negative_counters,
            opt.relayout,
        )
        return _result(algo, fa, start, finish, events, wall, opt)
    rem = size.copy()
    left = fa.count.copy()
    start = np.full(n_cf, math.nan)
    finish = np.full(n_cf, math.nan)
    act = np.zeros(0, dtype=np.int64)  # admitted, unfinished flows
    limit = opt.max_flows_per_reducer
    now = 0  # ms, on the step grid
    nxt = 0  # next coflow to admit
    events = 0
    while nxt < n_cf or len(act):
        epoch = (now // opt.epoch_ms) * opt.epoch_ms
        if now == epoch and nxt < n_cf:
            while nxt < n_cf and arr_ms[nxt] <= now + opt.epoch_ms:
                c = nxt
                nxt += 1
                start[c] = now
                lo, hi = int(fa.first[c]), int(fa.first[c] + fa.count[c])
                act = np.concatenate((act, np.arange(lo, hi)))
        # the next epoch that admits a coflow (epochs without arrivals change nothing)
        nxt_epoch = math.inf
        if nxt < n_cf:
            after = (now // opt.epoch_ms + 1) * opt.epoch_ms
            due = math.ceil((arr_ms[nxt] - opt.epoch_ms) / opt.epoch_ms) * opt.epoch_ms
            nxt_epoch = max(after, due)
        if not len(act):  # idle until then
            now = int(nxt_epoch)
            continue
        # per-step bytes of every active flow
        sending = act if limit is None else _first_per_reducer(act, dst, cf_of[order], limit)
        n_up = np.bincount(src[sending], minlength=fa.ports)
        n_down = np.bincount(dst[sending], minlength=fa.ports)
        full = cap_bps * step_bytes_per_bps
        step = np.zeros(len(act))
        mask = np.isin(act, sending) if limit is not None else np.ones(len(act), bool)
        step[mask] = np.minimum(full / n_down[dst[act[mask]]], full / n_up[src[act[mask]]])
        r = rem[act]
        with np.errstate(divide="ignore", invalid="ignore"):
            k_flow = np.where(step > 0, np.ceil((r - ZERO) / step), np.inf)
        k = float(np.maximum(k_flow, 1).min())
        if nxt < n_cf:
            k = min(k, float((nxt_epoch - now) // opt.step_ms))
        if k == math.inf:
            raise SpecError("coflowsim", "no flow can make progress")
        k = max(int(k), 1)
        moved = np.minimum(step * k, r)
        rem[act] = r - moved
        now += k * opt.step_ms
        events += 1
        done = rem[act] <= ZERO
        if done.any():
            gone = act[done]
            rem[gone] = 0.0
            act = act[~done]
            cfs, counts = np.unique(cf_of[order][gone], return_counts=True)
            left[cfs] -= counts
            ended = cfs[left[cfs] == 0]
            finish[ended] = now
    return _result(algo, fa, start, finish, events, wall, opt)


def _result(
    algo: str, fa: Any, start: Any, finish: Any, events: int, wall: float, opt: CompatOptions
) -> CoflowResult:
    return CoflowResult(
        policy=f"coflowsim-{algo}",
        model="coflow",
        names=list(fa.names),
        arrival=start / 1000.0,
        finish=finish / 1000.0,
        n_flows=fa.n_flows,
        n_events=events,
        wall_s=time.perf_counter() - wall,
        options={
            "step_ms": opt.step_ms,
            "second_ms": opt.second_ms,
            "epoch_ms": opt.epoch_ms,
            "coflowsim_sizes": opt.sizes,
        },
    )


def _first_per_reducer(act: Any, dst: Any, job: Any, limit: int) -> Any:
    """The first ``limit`` unfinished flows of every (coflow, reducer)."""
    key = job[act] * (int(dst.max()) + 1) + dst[act]
    first = np.r_[True, key[1:] != key[:-1]]
    run = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    rank = np.arange(len(act)) - starts[run]
    return act[rank < limit]
