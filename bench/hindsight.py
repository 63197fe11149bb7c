"""Hindsight search: how close can *any* tiering of (job, iteration) get to a target?

``python -m bench.hindsight --mix hybrid --seed 0 --steps 150`` answers, for one closed
batch of the evaluation (same jobs, network, 8 queues and re-plan interval as
``python -m sim.eval``), what a schedule that knows the whole run in advance could
reach in the family "each (job, iteration) gets a tier; flows rank by (tier, latest
finish)". It is evidence for docs/model.md, not a policy: the tiers are searched with
the run's outcome in hand.

Why this family: the scheduling targets need a low mean (small jobs finish their
iterations at once) *and* a short tail (large jobs share the links instead of waiting
for one another), and a tier per (job, iteration) expresses both -- strict priority
between tiers, EDF on latest finish (``T_ref + A(j) + slack``) inside one.

The search: every "the ``c`` smallest jobs (iteration bytes) in tier 0, the rest in
tier 1" and "one tier for all" are tried first; from the best, each step proposes two
neighbours (one to three (job, iteration) tiers moved by one, tiers 0..5) and keeps
the better if it lowers ``mean / best_mean + weight * max(0, p99 / best_p99 - 1)``,
where the best mean and p99 are the seed's best baselines on the same 8 queues.
Random, seeded by the batch's seed: the same command gives the same answer.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from bench.harness import run_cli
from echelon.errors import SpecError
from echelon.policies.table import FlowTable, TablePolicy, dense_rank
from echelon.schedule import Network, Schedule
from sim.core.config import JobRun, SimConfig
from sim.core.engine import Simulator
from sim.eval.experiments import BASELINES, NETWORK, REPLAN_INTERVAL_S
from sim.points import Point, load_inputs, point_jobs
from sim.topology import hosts_of

#: (job, iteration) -> tier; absent: the last tier.
Tiers = Mapping[tuple[str, int], int]

#: Tiers a step may move a (job, iteration) between.
MAX_TIER = 5


def instance_of(name: str) -> tuple[str, int]:
    """``(job, iteration)`` of an EchelonFlow named ``<job>/<iteration>/...`` (the
    paradigm builders' names, docs/model.md)."""
    parts = name.split("/", 2)
    if len(parts) < 3 or not parts[1].isdigit():
        raise SpecError("name", f"{name!r} is not <job>/<iteration>/<group>")
    return parts[0], int(parts[1])


class TierPolicy(TablePolicy):
    """Rank = (tier of the group's (job, iteration), latest finish); interleaved."""

    name = "hindsight-tiers"

    def __init__(self, tiers: Tiers) -> None:
        self.tiers = dict(tiers)

    def decide(self, t: FlowTable, now: float) -> Schedule:
        tier = np.array(
            [self.tiers.get(instance_of(n), MAX_TIER + 1) for n in t.names], dtype=np.int64
        )
        rank = dense_rank(tier[t.ech], t.latest)
        order = np.lexsort((t.name_rank, tier))
        return Schedule(
            self.name,
            tuple(t.names[i] for i in order.tolist()),
            dict(zip(t.keys, rank.tolist(), strict=True)),
            interleaved=True,
        )


@dataclass(frozen=True)
class Batch:
    """One closed batch of the evaluation: its network, jobs and 8-queue settings."""

    mix: str
    seed: int
    n_jobs: int = 8
    iterations: int = 3
    levels: int = 8

    def runs(self) -> tuple[Network, list[JobRun]]:
        """The batch's network and jobs: those of ``python -m sim.eval``'s point."""
        return _runs(self)

    def simulate(self, policy: str | TablePolicy) -> tuple[float, float]:
        """(mean, p99) iteration time of the batch under ``policy``."""
        net, runs = self.runs()
        cfg = SimConfig(
            policy=policy,
            levels=self.levels,
            replan_interval=REPLAN_INTERVAL_S,
            record_flows=False,
        )
        s = Simulator(net, runs, cfg).run().summary()
        return float(s["iter_mean"]), float(s["iter_p99"])

    def jobs_by_size(self) -> list[str]:
        """Job names, fewest bytes per iteration first (ties by name)."""
        _net, runs = self.runs()
        size = {}
        for run in runs:
            plan = run.spec.plan(0, 0.0)
            size[plan.job] = sum(f.size for ef in plan.echelons for f in ef.flows)
        return sorted(size, key=lambda j: (size[j], j))


@functools.cache
def _runs(batch: Batch) -> tuple[Network, list[JobRun]]:
    """Read and generated once per process: every candidate simulates the same jobs."""
    point = Point(
        batch.mix, "echelon", batch.levels, None, batch.seed, batch.n_jobs, batch.iterations,
        json.dumps(NETWORK), replan_interval=REPLAN_INTERVAL_S,
    )  # fmt: skip
    net, jobs = point_jobs(point, load_inputs(point))
    hosts = hosts_of(net)
    return net, [j.to_run(hosts) for j in jobs]


def _simulate_tiers(args: tuple[Batch, dict[tuple[str, int], int]]) -> tuple[float, float]:
    batch, tiers = args
    return batch.simulate(TierPolicy(tiers))


@dataclass(frozen=True)
class Result:
    best_mean: float
    best_mean_policy: str
    best_p99: float
    best_p99_policy: str
    starts: dict[str, tuple[float, float]]
    #: the ``echelon`` policy's (mean, p99) on the same batch, for reference
    echelon: tuple[float, float]
    tiers: dict[tuple[str, int], int]
    mean: float
    p99: float
    steps_accepted: int

    def as_json(self) -> dict[str, object]:
        return {
            "best_mean": [self.best_mean_policy, self.best_mean],
            "best_p99": [self.best_p99_policy, self.best_p99],
            "starts": self.starts,
            "echelon": self.echelon,
            "tiers": {f"{j}/{i}": v for (j, i), v in sorted(self.tiers.items())},
            "mean": self.mean,
            "p99": self.p99,
            "mean_vs_best": self.mean / self.best_mean - 1,
            "p99_vs_best": self.p99 / self.best_p99 - 1,
            "steps_accepted": self.steps_accepted,
        }


def search(
    batch: Batch,
    steps: int,
    weight: float = 3.0,
    workers: int = 2,
    baselines: Sequence[str] = BASELINES,
) -> Result:
    """The search of the module doc; ``workers`` processes simulate candidates."""
    if steps < 0:
        raise SpecError("steps", f"must be >= 0, got {steps}")
    base = {p: batch.simulate(p) for p in baselines}
    bm_pol = min(base, key=lambda p: base[p][0])
    bp_pol = min(base, key=lambda p: base[p][1])
    bm, bp = base[bm_pol][0], base[bp_pol][1]

    def objective(r: tuple[float, float]) -> float:
        return r[0] / bm + weight * max(0.0, r[1] / bp - 1.0)

    jobs = batch.jobs_by_size()
    items = [(j, i) for j in jobs for i in range(batch.iterations)]
    starts: dict[str, dict[tuple[str, int], int]] = {
        f"{c} smallest first": {
            (j, i): int(k >= c) for k, j in enumerate(jobs) for i in range(batch.iterations)
        }
        for c in range(1, len(jobs))
    }
    starts["one tier"] = dict.fromkeys(items, 0)
    rng = random.Random(batch.seed)
    with ProcessPoolExecutor(max(1, workers)) as pool:
        measured = dict(
            zip(
                starts,
                pool.map(_simulate_tiers, [(batch, s) for s in starts.values()]),
                strict=True,
            )
        )
        name = min(measured, key=lambda k: objective(measured[k]))
        cur, cur_r, accepted = dict(starts[name]), measured[name], 0
        for _ in range(steps):
            cands = []
            for _ in range(2):
                c = dict(cur)
                for _ in range(rng.choice((1, 1, 2, 3))):
                    it = rng.choice(items)
                    c[it] = max(0, min(MAX_TIER, c[it] + rng.choice((-1, 1))))
                cands.append(c)
            rs = list(pool.map(_simulate_tiers, [(batch, c) for c in cands]))
            k = min(range(len(rs)), key=lambda i: objective(rs[i]))
            if objective(rs[k]) < objective(cur_r):
                cur, cur_r, accepted = cands[k], rs[k], accepted + 1
    ours = batch.simulate("echelon")
    return Result(bm, bm_pol, bp, bp_pol, measured, ours, cur, cur_r[0], cur_r[1], accepted)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.hindsight", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--mix", default="hybrid")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--weight", type=float, default=3.0, help="p99 excess weight")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=8, help="jobs in the batch")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    a = ap.parse_args(argv)
    batch = functools.partial(Batch, a.mix, a.seed, a.jobs, a.iterations)
    return run_cli(lambda: show(a, search(batch(), a.steps, a.weight, a.workers)))


def show(a: argparse.Namespace, res: Result) -> None:
    """The search's result, as text or (``--json``) JSON."""
    if a.json:
        print(json.dumps(res.as_json(), indent=1))
        return
    print(
        f"{a.mix} seed {a.seed}: best baseline mean {res.best_mean_policy} {res.best_mean:.3f} s, "
        f"p99 {res.best_p99_policy} {res.best_p99:.3f} s (8 queues)"
    )
    em, ep = res.echelon
    print(f"  policy echelon: mean {em:.3f} s ({em / res.best_mean - 1:+.1%}), "
          f"p99 {ep:.3f} s ({ep / res.best_p99 - 1:+.1%})")  # fmt: skip
    for k, (m, p) in res.starts.items():
        print(
            f"  start {k:>18}: mean {m:.3f} s ({m / res.best_mean - 1:+.1%}), "
            f"p99 {p:.3f} s ({p / res.best_p99 - 1:+.1%})"
        )
    print(
        f"after {a.steps} steps ({res.steps_accepted} accepted): mean {res.mean:.3f} s "
        f"({res.mean / res.best_mean - 1:+.1%}), "
        f"p99 {res.p99:.3f} s ({res.p99 / res.best_p99 - 1:+.1%})"
    )
    jobs = sorted({j for j, _ in res.tiers})
    print(
        "  tiers per job and iteration: "
        + " ".join(
            f"{j}:{''.join(str(res.tiers[(j, i)]) for i in range(a.iterations))}" for j in jobs
        )
    )


if __name__ == "__main__":
    raise SystemExit(main())
