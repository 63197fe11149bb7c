"""Steady state: jobs that keep iterating, measured after their cold start.

Why this exists: training jobs run thousands of iterations, while a closed batch of
three iterations that all start at t = 0 is decided largely by its cold start (who
goes first). Here every job of a draw iterates until a horizon, and only a window
after a warm-up is measured.

The rules (stated in the report, :func:`rules`):

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

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sim.core.engine import JobRun, SimConfig, Simulator
from sim.core.results import SimResult
from sim.eval.experiments import NETWORK, POLICIES, REPLAN_INTERVAL_S
from sim.points import Inputs, Point, load_inputs, point_jobs
from sim.topology import hosts_of

#: Horizon in units of the draw's largest contention-free iteration time.
HORIZON = 40.0
#: Iterations every job must have ended before the window may open.
WARMUP = 2
#: Iterations of a job run alone to measure its contention-free time.
ALONE_ITERATIONS = 4
#: Host-link Gbit/s of the steady-state grid and its mixes.
GBITS = (100.0, 25.0, 10.0)
MIXES = ("hybrid", "dp", "mixed")
#: "Long-running": a job never runs out of iterations before the horizon.
FOREVER = 10**9


def points(seeds: Sequence[int], policies: Sequence[str] = POLICIES) -> list[Point]:
    """Every (mix, bandwidth, policy, seed) on 8 queues."""
    return [
        Point(mix, pol, 8, None, seed, 8, FOREVER, json.dumps({**NETWORK, "gbit": g}),
              replan_interval=REPLAN_INTERVAL_S)
        for mix in MIXES
        for g in GBITS
        for pol in policies
        for seed in seeds
    ]  # fmt: skip


def alone_time(net: Any, run: JobRun) -> float:
    """``c_j``: the job alone on the network, mean iteration time after its first."""
    cfg = SimConfig(policy="fair", record_flows=False)
    res = Simulator(net, [JobRun(run.spec, 0.0, ALONE_ITERATIONS)], cfg).run()
    d = [r.duration for r in res.iterations]
    return float(np.mean(d[1:])) if len(d) > 1 else float(d[0])


def measure(res: SimResult, alone: Mapping[str, float], horizon: float) -> dict[str, Any]:
    """The steady-state numbers of one run stopped at ``horizon`` (module rules)."""
    ends: dict[str, list[float]] = {j: [] for j in alone}
    for r in res.iterations:
        ends[r.job].append(r.end)
    ready = [e[WARMUP - 1] if len(e) >= WARMUP else math.inf for e in ends.values()]
    t_w = min(max(horizon / 4, max(ready, default=0.0)), horizon / 2)
    durations = [r.duration for r in res.iterations if t_w <= r.end <= horizon]
    per_job: dict[str, dict[str, float]] = {}
    censored = 0
    for j, c in alone.items():
        inside = [e for e in ends[j] if t_w <= e <= horizon]
        # the iteration still open at the horizon started at the job's last end
        open_s = horizon - (ends[j][-1] if ends[j] else 0.0)
        durations.append(open_s)
        if len(inside) >= 2:
            t = max((inside[-1] - inside[0]) / (len(inside) - 1), open_s)
        else:
            censored += 1
            t = max(open_s, horizon - t_w)
        per_job[j] = {"steady_s": t, "alone_s": c, "slowdown": t / c, "iters": len(inside)}
    t_all = np.array([v["steady_s"] for v in per_job.values()])
    rate = np.array([v["alone_s"] / v["steady_s"] for v in per_job.values()])
    return {
        "steady_mean": float(t_all.mean()),
        "steady_p99": float(np.percentile(durations, 99)) if durations else math.nan,
        "worst_slowdown": float(max(v["slowdown"] for v in per_job.values())),
        "jain": float(rate.sum() ** 2 / (len(rate) * (rate**2).sum())),
        "min_iters": int(min(v["iters"] for v in per_job.values())),
        "censored": censored,
        "horizon_s": horizon,
        "warm_s": t_w,
        "jobs": per_job,
    }


def run_steady(point: Point, inputs: Inputs | None = None) -> dict[str, Any]:
    """One steady-state run (a :class:`sim.points.PointFn` for :func:`sim.sweep.run_sweep`)."""
    inputs = inputs or load_inputs(point)
    net, jobs = point_jobs(point, inputs)
    runs = [j.to_run(hosts_of(net)) for j in jobs]
    return run_jobs(point, net, runs)


def run_jobs(point: Point, net: Any, runs: Sequence[JobRun]) -> dict[str, Any]:
    """Steady state of ``runs`` (their ``iterations`` ignored: they iterate until the
    horizon) under the point's policy and levels."""
    alone = {r.spec.job_id: alone_time(net, r) for r in runs}
    horizon = HORIZON * max(alone.values())
    cfg = SimConfig(
        policy=point.policy,
        levels=point.levels,
        replan_interval=point.replan_interval,
        record_flows=False,
        until=horizon,
    )
    forever = [JobRun(r.spec, r.arrival, FOREVER) for r in runs]
    res = Simulator(net, forever, cfg).run()
    return {**point.label(), "wall_s": res.wall_s, **measure(res, alone, horizon)}
