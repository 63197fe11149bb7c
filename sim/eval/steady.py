"""Steady state: jobs that keep iterating, measured after their cold start.

Why this exists: training jobs run thousands of iterations, while a closed batch of
three iterations that all start at t = 0 is decided largely by its cold start (who
goes first). Here every job of a draw iterates until a horizon, and only a window
after a warm-up is measured.

The rules (the report states them with its constants):

* **Contention-free time** ``c_j``: the job alone on the same network (fair sharing,
  ideal ranks, :data:`ALONE_ITERATIONS` iterations, the mean of all but the first).
  Slowdown = steady iteration time / ``c_j``.
* **Horizon** ``H = HORIZON × max_j c_j``: every job keeps iterating until then.
* **Warm-up**: the window starts at ``T_w = max(H / 4, when every job has ended
  WARMUP iterations)``, at most ``H / 2``; it ends at ``H``.
* **A job's steady iteration time**: over the iterations that end in the window,
  ``(last end - first end) / (count - 1)``; but at least the time its iteration
  still open at ``H`` has run (a starved job's open iteration is its real cost).
  With fewer than two ends in the window it is censored: the open time (or the
  window) is a lower bound, and the row counts such jobs (``censored``).
* **p99** over every iteration that ends in the window plus each job's open
  iteration at ``H``; **worst job** = the largest slowdown; **Jain's index** over
  the jobs' normalised rates ``c_j / t_j`` (1 = every job slowed alike).

Per-job results travel in the row (``jobs``) for the interleaving scenario.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from echelon.model import IterationPlan
from sim.core.engine import JobRun, SimConfig, Simulator
from sim.core.results import IterationRecord
from sim.eval.experiments import REPLAN_INTERVAL_S, STEADY_HORIZON, network_at
from sim.points import Inputs, Point, load_inputs, point_jobs
from sim.topology import hosts_of

#: Horizon in units of the draw's largest contention-free iteration time.
HORIZON = STEADY_HORIZON
#: Iterations every job must have ended before the window may open.
WARMUP = 2
#: Iterations of a job run alone to measure its contention-free time.
ALONE_ITERATIONS = 4
#: "Long-running": a job never runs out of iterations before the horizon.
FOREVER = 10**9


def points(
    seeds: Sequence[int],
    policies: Sequence[str],
    mixes: Sequence[str],
    gbits: Sequence[float],
    n_jobs: int = 8,
) -> list[Point]:
    """Every (mix, host-link Gbit/s, seed, policy) on 8 queues, a draw's policies together
    (the grid is the profile's: :class:`sim.eval.experiments.Profile`)."""
    return [
        Point(mix, pol, 8, None, seed, n_jobs, FOREVER, json.dumps(network_at(g)),
              replan_interval=REPLAN_INTERVAL_S)
        for mix in mixes
        for g in gbits
        for seed in seeds
        for pol in policies
    ]  # fmt: skip


def alone_time(net: Any, run: JobRun) -> float:
    """``c_j``: the job alone on the network, mean iteration time after its first."""
    cfg = SimConfig(policy="fair", record_flows=False)
    res = Simulator(net, [cached(run, ALONE_ITERATIONS)], cfg).run()
    return alone_mean([r.duration for r in res.iterations])


def alone_mean(durations: Sequence[float]) -> float:
    """``c_j`` from a lone run's iteration times: the mean of all but the first (its
    cold start), or the first when it is all there is. The emulation's contention-free
    time (:mod:`topo.interleave`) is taken by the same rule."""
    d = list(durations)
    return float(np.mean(d[1:])) if len(d) > 1 else float(d[0])


def window_start(ends: Mapping[str, Sequence[float]], horizon: float) -> float:
    """``T_w``: ``H / 4``, or later when some job has not ended :data:`WARMUP`
    iterations by then; never after ``H / 2``."""
    ready = [e[WARMUP - 1] if len(e) >= WARMUP else math.inf for e in ends.values()]
    return min(max(horizon / 4, max(ready, default=0.0)), horizon / 2)


def per_job_time(ends: Sequence[float], t_w: float, horizon: float) -> tuple[float, int]:
    """A job's steady iteration time over the window ``[t_w, horizon]`` and the number of
    iteration ends in it (fewer than 2: censored, the value is a lower bound)."""
    inside = [e for e in ends if t_w <= e <= horizon]
    open_s = horizon - (ends[-1] if ends else 0.0)  # the iteration still open at the stop
    if len(inside) >= 2:
        return max((inside[-1] - inside[0]) / (len(inside) - 1), open_s), len(inside)
    return max(open_s, horizon - t_w), len(inside)


def measure_iterations(
    iterations: Sequence[IterationRecord], alone: Mapping[str, float], horizon: float
) -> dict[str, Any]:
    """The steady-state numbers of one run's iterations (simulated, or emulated:
    :mod:`topo.interleave`) stopped at ``horizon`` (module rules), and ``half_gap``:
    how far the mean over jobs from the window's first half alone is from the one
    from its second half (relative), the stability check of the estimate."""
    ends: dict[str, list[float]] = {j: [] for j in alone}
    for r in sorted(iterations, key=lambda r: r.end):
        ends[r.job].append(r.end)
    t_w = window_start(ends, horizon)
    durations = [r.duration for r in iterations if t_w <= r.end <= horizon]
    per_job: dict[str, dict[str, float]] = {}
    for j, c in alone.items():
        t, n = per_job_time(ends[j], t_w, horizon)
        durations.append(horizon - (ends[j][-1] if ends[j] else 0.0))
        per_job[j] = {"steady_s": t, "alone_s": c, "slowdown": t / c, "iters": n}
    censored = sum(1 for v in per_job.values() if v["iters"] < 2)
    mid = (t_w + horizon) / 2
    halves = [
        np.mean([per_job_time([e for e in ends[j] if e <= b], a, b)[0] for j in alone])
        for a, b in ((t_w, mid), (mid, horizon))
    ]
    t_all = np.array([v["steady_s"] for v in per_job.values()])
    rate = np.array([v["alone_s"] / v["steady_s"] for v in per_job.values()])
    return {
        "steady_mean": float(t_all.mean()),
        "steady_p99": float(np.percentile(durations, 99)) if durations else math.nan,
        "worst_slowdown": float(max(v["slowdown"] for v in per_job.values())),
        "jain": float(rate.sum() ** 2 / (len(rate) * (rate**2).sum())),
        "min_iters": int(min(v["iters"] for v in per_job.values())),
        "censored": censored,
        "half_gap": float(abs(halves[0] - halves[1]) / max(halves[0], halves[1])),
        "horizon_s": horizon,
        "warm_s": t_w,
        "jobs": per_job,
    }


def run_steady(
    point: Point, inputs: Inputs | None = None, horizon: float = HORIZON
) -> dict[str, Any]:
    """One steady-state run (with ``functools.partial`` for the horizon, a
    :class:`sim.points.PointFn` for :func:`sim.sweep.run_sweep`)."""
    inputs = inputs or load_inputs(point)
    net, jobs = point_jobs(point, inputs)
    runs = [j.to_run(hosts_of(net)) for j in jobs]
    return run_jobs(point, net, runs, horizon)


#: ``c_j`` by (job description, network links): a worker process meets the same draw
#: under several policies, and its jobs' time alone does not depend on the policy.
_ALONE: dict[tuple[str, str], float] = {}


#: Iteration plans at ``t0 = 0`` by job description, of the last :data:`PLAN_JOBS` jobs a
#: worker process met: it meets one draw under every policy, and an iteration's plan
#: does not depend on the policy (building them was a third of a baseline's run).
_PLANS: OrderedDict[str, dict[int, IterationPlan]] = OrderedDict()
PLAN_JOBS = 32


class CachedPlans:
    """A job whose iteration plans are built once per worker process and moved in time:
    ``plan(i, t0)`` is ``plan(i, 0)`` with every ``t_ref`` moved by ``t0`` (the only
    field ``t0`` sets, :mod:`echelon.paradigms.plan`), in the same (``t_ref``, group)
    order, so a run sees the very plans the job itself would build."""

    def __init__(self, spec: Any, key: str) -> None:
        self.spec = spec
        self.job_id: str = spec.job_id
        self.ideal_iteration_s = getattr(spec, "ideal_iteration_s", None)
        if key not in _PLANS:
            _PLANS[key] = {}
            while len(_PLANS) > PLAN_JOBS:
                _PLANS.popitem(last=False)
        _PLANS.move_to_end(key)
        self._plans = _PLANS[key]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = self.spec.to_dict()
        return out

    def plan(self, iteration: int = 0, t0: float = 0.0) -> IterationPlan:
        base = self._plans.get(iteration)
        if base is None:
            base = self._plans[iteration] = self.spec.plan(iteration, 0.0)
        start = float(t0)
        moved = [dataclasses.replace(ef, t_ref=start + ef.t_ref) for ef in base.echelons]
        moved.sort(key=lambda ef: (ef.t_ref, ef.group))
        return dataclasses.replace(base, echelons=tuple(moved))


def cached(run: JobRun, iterations: int) -> JobRun:
    """``run`` with ``iterations`` and, for a job that describes itself (``to_dict``),
    its plans cached (:class:`CachedPlans`)."""
    to_dict = getattr(run.spec, "to_dict", None)
    spec = run.spec if to_dict is None else CachedPlans(run.spec, repr(to_dict()))
    return JobRun(spec, run.arrival, iterations)


def run_jobs(
    point: Point, net: Any, runs: Sequence[JobRun], horizon_c: float = HORIZON
) -> dict[str, Any]:
    """Steady state of ``runs`` (their ``iterations`` ignored: they iterate until
    ``horizon_c`` times the largest contention-free iteration) under the point's
    policy and levels."""
    alone = {}
    links = repr(sorted(net.links.items()))
    for r in runs:
        to_dict = getattr(r.spec, "to_dict", None)
        if to_dict is None:
            alone[r.spec.job_id] = alone_time(net, r)
            continue
        key = (repr(to_dict()), links)
        if key not in _ALONE:
            _ALONE[key] = alone_time(net, r)
        alone[r.spec.job_id] = _ALONE[key]
    horizon = horizon_c * max(alone.values())
    cfg = SimConfig(
        policy=point.policy,
        levels=point.levels,
        replan_interval=point.replan_interval,
        record_flows=False,
        until=horizon,
    )
    forever = [cached(r, FOREVER) for r in runs]
    res = Simulator(net, forever, cfg).run()
    measured = measure_iterations(res.iterations, alone, horizon)
    return {**point.label(), "wall_s": res.wall_s, **measured}
