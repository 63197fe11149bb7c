"""Interleaving: jobs whose communication phases fit into each other's compute.

Why this exists: two data-parallel jobs that share a link and communicate for a
small part of their iteration are *compatible* (CASSINI, NSDI '24): shifted by
half a period, each one's all-reduce runs while the other computes, and both
iterate at their contention-free speed. Started together they collide instead;
fair sharing keeps them in lockstep (both slowed), while a consistent order
between the jobs on strict-priority queues lets the lower job's communication
slide into the higher job's compute. *Incompatible* jobs communicate for most of
their iteration: no shift lets both run at full speed.

Every scenario runs on a big switch whose host links carry 1 MB/s (1 MB takes
1 s); every job is a 2-host ring all-reduce (``dp_allreduce``) through host
``h0``, so all of them share ``h0``'s up- and downlink. The jobs run in steady
state with the rules of :mod:`sim.eval.steady` (every policy on 8 queues), and
each job's steady iteration time is set against its time alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echelon.errors import SpecError
from echelon.jobs import load_job
from echelon.network import BigSwitch
from sim.core.engine import JobRun
from sim.eval import steady
from sim.eval.cases import CAP, HOSTS, MB
from sim.eval.experiments import POLICIES, REPLAN_INTERVAL_S
from sim.eval.report import fmt, table
from sim.points import Point


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    #: per job: (compute seconds per iteration, gradient MB all-reduced per iteration)
    jobs: tuple[tuple[float, float], ...]
    compatible: bool


SCENARIOS = (
    Scenario("compatible-2", "two jobs whose all-reduces fit into each other's compute",
             ((2.0, 1.6), (2.0, 1.6)), True),
    Scenario("compatible-3", "three jobs whose all-reduces fit into the others' compute",
             ((3.0, 1.4), (3.0, 1.4), (3.0, 1.4)), True),
    Scenario("incompatible-2", "two jobs that communicate for most of their iteration",
             ((1.0, 3.0), (1.0, 3.0)), False),
)  # fmt: skip


def job(name: str, peer: str, compute_s: float, grad_mb: float) -> dict[str, Any]:
    """A 2-host all-reduce job on (``peer``, ``h0``): one layer, backward two thirds of
    the compute, the gradient all-reduced when backward ends."""
    return {
        "job": name,
        "paradigm": "dp_allreduce",
        "hosts": [peer, "h0"],
        "bucket_bytes": 0,
        "layers": [
            {"fwd_s": compute_s / 3, "bwd_s": 2 * compute_s / 3, "grad_bytes": int(grad_mb * MB)}
        ],
        "optimizer_s": 0.0,
    }


def descriptions(scenario: Scenario) -> list[dict[str, Any]]:
    """The scenario's job descriptions: job ``j{i}`` on (``h{1 + i % 3}``, ``h0``). The
    emulation plays these too (:mod:`topo.interleave`), scaled to its links."""
    return [job(f"j{i}", HOSTS[1 + i % 3], c, g) for i, (c, g) in enumerate(scenario.jobs)]


def by_key(key: str) -> Scenario:
    """The scenario called ``key``; an unknown key names the known ones."""
    for s in SCENARIOS:
        if s.key == key:
            return s
    raise SpecError("scenario", f"unknown {key!r} (known: {', '.join(s.key for s in SCENARIOS)})")


def run(scenario: Scenario, policy: str, horizon: float = steady.HORIZON) -> dict[str, Any]:
    """One scenario in steady state under ``policy`` on 8 queues."""
    net = BigSwitch.uniform(HOSTS, CAP)
    runs = [JobRun(load_job(d), 0.0, 1) for d in descriptions(scenario)]
    point = Point(scenario.key, policy, 8, replan_interval=REPLAN_INTERVAL_S)
    return steady.run_jobs(point, net, runs, horizon)


def run_all(policies: Sequence[str] = POLICIES) -> dict[str, dict[str, dict[str, Any]]]:
    """``{scenario: {policy: row}}`` for every scenario and policy."""
    return {s.key: {p: run(s, p) for p in policies} for s in SCENARIOS}


def worst_ratio(row: Mapping[str, Any]) -> float:
    """The largest steady / contention-free ratio over a run's jobs."""
    return max(float(j["slowdown"]) for j in row["jobs"].values())


def verdict(results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """One sentence for the summary: echelon's and fair's worst job per compatible
    scenario."""
    parts = [
        f"{s.key}: worst job {worst_ratio(results[s.key]['echelon']):.3f}× contention-free "
        f"under echelon, {worst_ratio(results[s.key]['fair']):.3f}× under fair"
        for s in SCENARIOS
        if s.compatible and {"echelon", "fair"} <= set(results[s.key])
    ]
    return "; ".join(parts)


def section(w: Any, results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
    """The interleaving scenario: each job's steady iteration time against its
    contention-free time, under every policy."""
    w("### Interleaving: compatible and incompatible jobs\n")
    w((__doc__ or "").split("\n", 1)[1].strip() + "\n")
    for s in SCENARIOS:
        per = results[s.key]
        w(f"#### {s.key}: {s.title}\n")
        any_row = next(iter(per.values()))
        names = list(any_row["jobs"])
        body = [
            [
                p,
                *(fmt(float(r["jobs"][j]["steady_s"])) for j in names),
                fmt(worst_ratio(r)),
            ]
            for p, r in per.items()
        ]
        alone = [float(any_row["jobs"][j]["alone_s"]) for j in names]
        w(
            "Contention-free iteration (s) and the share of it spent communicating: "
            + ", ".join(
                f"{j} {fmt(a)} ({(1 - c / a) * 100:.0f} %)"
                for j, a, (c, _) in zip(names, alone, s.jobs, strict=True)
            )
            + ".\n"
        )
        w(table(["policy", *(f"{j} steady (s)" for j in names), "worst job / alone"], body) + "\n")
        if "echelon" in per and "fair" in per:
            e, f = worst_ratio(per["echelon"]), worst_ratio(per["fair"])
            target = (
                f"target within 10 % of contention-free: {'met' if e <= 1.10 else 'missed'}"
                if s.compatible
                else "no target (no order can run both at full speed)"
            )
            w(f"Under `echelon` the worst job runs at {e:.3f}× its contention-free time, "
              f"under `fair` at {f:.3f}× ({target}).\n")  # fmt: skip
