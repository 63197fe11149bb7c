"""The evaluation's grids: policies x mixes x loads x levels, and the scale runs.

All runs go through :mod:`sim.sweep` (local processes). Results are averaged
over seeds; p99 columns are the mean over seeds of each run's p99.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echelon.policies import POLICIES as CORE_POLICIES
from sim.points import Point, Progress, load_inputs, point_jobs
from sim.sweep import run_sweep

#: Every policy of the core, ours first (echelon.policies.POLICIES).
POLICIES = CORE_POLICIES
BASELINES = POLICIES[1:]
#: Ablations of the echelon policy (section 3b), compared with echelon and echelon-v1.
ABLATION_POLICIES = (
    "echelon",
    "echelon-noslack",
    "echelon-noclass",
    "echelon-jobtier",
    "echelon-edf",
    "echelon-serial",
    "echelon-grouped",
    "echelon-nograce",
    "echelon-noswap",
    "echelon-swapany",
    "echelon-noguard",
    "echelon-v1",
)
#: Variants also run on the held-out seeds, so that the (mean, p99) plane there has the
#: points nearest the target box (sim.eval.headline.frontier), not only the baselines.
HOLDOUT_VARIANTS = ("echelon-jobtier", "echelon-noswap", "echelon-serial", "echelon-edf")
#: Mixes and host-link Gbit/s of the ablation.
ABLATION_MIXES = ("hybrid", "dp", "mixed")
ABLATION_GBIT = (100.0, 25.0)
#: Least time between two re-plans in every run (a controller's re-plan budget):
#: policies are asked again at group release/finish events, at most this often.
REPLAN_INTERVAL_S = 0.01
MIXES = ("pipeline", "hybrid", "dp", "mixed")
#: 16 hosts at 100 Gbit/s under 4 leaves, 2 spines, 2:1 oversubscribed uplinks.
NETWORK = {
    "kind": "leafspine",
    "leaves": 4,
    "hosts_per_leaf": 4,
    "spines": 2,
    "gbit": 100,
    "oversubscription": 2.0,
}
METRICS = (
    "iter_mean",
    "iter_p99",
    "iter_first_mean",
    "iter_later_mean",
    "slowdown_mean",
    "slowdown_p99",
    "job_slowdown_max",
    "job_slowdown_min",
    "ecct_mean",
    "tardiness_total",
    "jct_mean",
    "jct_p99",
    "flows",
    "wall_s",
    "reranks_per_s",
    "level_updates_per_s",
)


#: Horizon of a steady-state run, in the draw's largest contention-free iteration times.
STEADY_HORIZON = 20.0
#: Seeds of the steady-state headline (0-2 design seeds, the rest held out); what the
#: committed report ran is stated in it (``--steady-seeds`` overrides the count).
STEADY_SEEDS = 10


@dataclass(frozen=True)
class Profile:
    """How big an evaluation run is. ``tiny`` exists for the end-to-end test."""

    seeds: tuple[int, ...]
    loads: tuple[float, ...]
    batch_jobs: int
    load_jobs: int
    iterations: int
    scale_targets: tuple[int, ...]
    bandwidths: tuple[float, ...] = (100,)
    """Host-link Gbit/s of the network-bound sweep (:mod:`sim.eval.bandwidth`)."""
    holdout_seeds: tuple[int, ...] = ()
    """Seeds not used to choose the policy or its parameters: the headline re-run on them
    (every policy on 8 queues) shows whether the result generalises."""
    steady_seeds: tuple[int, ...] = (0,)
    """Seeds of the steady-state headline (:mod:`sim.eval.steady`; ``--steady-seeds``)."""
    steady_gbits: tuple[float, ...] = (100.0, 25.0, 10.0)
    steady_mixes: tuple[str, ...] = ("hybrid", "dp", "mixed")
    steady_policies: tuple[str, ...] = (*CORE_POLICIES, "echelon-noguard")
    steady_horizon: float = STEADY_HORIZON
    """Horizon of a steady-state run in the draw's largest contention-free iterations."""


#: Held-out seeds of the full profile (3, 4, ...): enough for a seed-level interval
#: (sim.eval.seeds). 3-5 were looked at once while choosing the grace; 6-17 were first
#: run after the policy was fixed (docs/model.md says what was run on them).
HOLDOUT_SEEDS = 15
#: Host links of the bandwidth sweep; sources in :data:`sim.eval.bandwidth.SOURCES`.
SWEEP_GBIT = (100.0, 25.0, 10.0, 1.0)

PROFILES = {
    "full": Profile(
        (0, 1, 2),
        (0.3, 0.6, 0.9),
        8,
        12,
        3,
        (1_000, 10_000, 100_000),
        SWEEP_GBIT,
        tuple(range(3, 3 + HOLDOUT_SEEDS)),
        tuple(range(STEADY_SEEDS)),
    ),
    "quick": Profile(
        (0,), (0.5,), 8, 12, 3, (1_000, 10_000), SWEEP_GBIT, (3,), tuple(range(STEADY_SEEDS))
    ),
    "tiny": Profile(
        (0,),
        (0.5,),
        3,
        3,
        1,
        (300,),
        (100.0, 10.0),
        (3,),
        (0, 1),
        (100.0, 10.0),
        ("dp",),
        ("echelon", "fair", "echelon-v1"),
        6.0,
    ),
}


def batch_point(
    profile: Profile,
    mix: str,
    policy: str,
    levels: int | None,
    seed: int,
    network: Mapping[str, Any] = NETWORK,
    load: float | None = None,
) -> Point:
    """A closed batch of the profile's size on ``network`` (with ``load``: the profile's
    Poisson arrivals at that offered load), re-planned at most every
    :data:`REPLAN_INTERVAL_S`: the point of every grid of the report's sections 3-7."""
    n_jobs = profile.batch_jobs if load is None else profile.load_jobs
    return Point(mix, policy, levels, load, seed, n_jobs, profile.iterations,
                 json.dumps(network), replan_interval=REPLAN_INTERVAL_S)  # fmt: skip


def network_at(gbit: float) -> dict[str, Any]:
    """The evaluation's leaf-spine with host links of ``gbit`` (same oversubscription,
    so the uplinks scale with the host links)."""
    return {**NETWORK, "gbit": gbit}


def main_points(profile: Profile) -> list[Point]:
    """Closed batches (every job contends from t=0) with ideal ranks and K=8, plus
    Poisson arrivals at several offered loads with ideal ranks."""
    pts = [
        batch_point(profile, mix, pol, levels, seed)
        for mix in MIXES
        for pol in POLICIES
        for levels in (None, 8)
        for seed in profile.seeds
    ]
    pts += [
        batch_point(profile, mix, pol, None, seed, load=load)
        for mix in MIXES
        for pol in POLICIES
        for load in profile.loads
        for seed in profile.seeds
    ]
    return pts


def ablation_points(profile: Profile) -> list[Point]:
    """Closed batches on 8 queues for each ablation of the echelon policy, at the
    main grid's bandwidth and at 25 Gbit/s (or the profile's slowest, if higher)."""
    gbits = sorted({g for g in ABLATION_GBIT if g in profile.bandwidths or g == NETWORK["gbit"]})
    return [
        batch_point(profile, mix, pol, 8, seed, network_at(g))
        for g in gbits
        for mix in ABLATION_MIXES
        for pol in ABLATION_POLICIES
        for seed in profile.seeds
    ]


def holdout_points(profile: Profile) -> list[Point]:
    """The closed-batch headline (every policy on 8 queues, main network) on the
    profile's held-out seeds, for the mixes the scheduling targets are set on, and the
    same for :data:`HOLDOUT_VARIANTS`."""
    return [
        batch_point(profile, mix, pol, 8, seed)
        for mix in ABLATION_MIXES
        for pol in (*POLICIES, *HOLDOUT_VARIANTS)
        for seed in profile.holdout_seeds
    ]


def average(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """Mean of :data:`METRICS` over rows sharing ``keys`` (i.e. over seeds)."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    out = []
    for key, rs in groups.items():
        row: dict[str, Any] = dict(zip(keys, key, strict=True))
        for m in METRICS:
            vals = [float(r[m]) for r in rs if m in r and not math.isnan(float(r[m]))]
            row[m] = sum(vals) / len(vals) if vals else math.nan
        row["seeds"] = len(rs)
        out.append(row)
    return out


def scale_points(profile: Profile) -> list[Point]:
    """Runs of the ``mixed`` mix sized to about 1k, 10k (and 100k) flows; the flows per
    iteration of a draw are counted on the jobs :func:`sim.points.point_jobs` draws."""
    from sim.workloads import job_demand

    net_json = json.dumps(NETWORK)
    per_iter = {}
    for n_jobs in (2, 4, 8):
        probe = Point("mixed", "", None, None, 0, n_jobs, 1, net_json)
        jobs = point_jobs(probe, load_inputs(probe))[1]
        per_iter[n_jobs] = sum(job_demand(j.description)[0] for j in jobs)
    out = []
    for target in profile.scale_targets:
        # as many concurrent jobs as fit (one iteration may overshoot by half)
        fits = [n for n, f in per_iter.items() if f <= 1.5 * target]
        n_jobs = max(fits) if fits else min(per_iter)
        iters = max(1, round(target / per_iter[n_jobs]))
        for pol in ("echelon", "fair", "varys"):
            out.append(Point("mixed", pol, None, None, 0, n_jobs, iters, net_json))
    return out


def run_scale(profile: Profile, progress: Progress | None = None) -> list[dict[str, Any]]:
    """Serial (one process) so wall-clock times are comparable. ``progress`` is called
    after each run (a :class:`sim.points.Done`)."""
    return run_sweep(scale_points(profile), 1, progress=progress)


def job_draw(rows: Sequence[Mapping[str, Any]], mix: str, seed: int) -> str:
    """What a closed batch of ``mix`` drew on ``seed``: its jobs' paradigms, most frequent
    first (``"3 fsdp, 3 dp_allreduce, 2 dp_ps"``), from the network and job count of the
    first of ``rows`` that ran it (the draw does not depend on the policy)."""
    row = next((r for r in rows if r["mix"] == mix and int(r["seed"]) == seed), None)
    if row is None:
        raise ValueError(f"rows: no run of mix {mix!r} on seed {seed}")
    point = Point(
        mix, str(row["policy"]), None, None, seed, int(row["n_jobs"]), 1, str(row["network"])
    )
    _, jobs = point_jobs(point, load_inputs(point))
    counts = Counter(str(j.description["paradigm"]) for j in jobs)
    return ", ".join(f"{n} {paradigm}" for paradigm, n in counts.most_common())
