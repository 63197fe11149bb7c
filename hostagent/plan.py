"""Turn jobs into a scenario: each flow instance's release time, size and formation.

The agents play each job's ``JobSpec.plan(i, t0)`` -- the EchelonFlows the
paradigm builder derives from the job description -- for iterations
``i = 0, 1, ...``, iteration ``i`` starting at ``t0 = i * spec.ideal_iteration_s``
(when the contention-free iteration ``i-1`` ends).

A flow is released when its producer task ends in the plan's ideal
(contention-free) timeline (:func:`echelon.paradigms.plan.ideal_timeline`), at
the iteration start if it has no producer. The agents follow these release
times rather than waiting for upstream arrivals across hosts (documented
simplification): that keeps hosts independent (no notifications between
namespaces) and makes the offered load identical under every policy, so
policies differ only in how the network orders the bytes -- which is what the
demo compares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from echelon.errors import SpecError
from echelon.jobs import JobSpec
from echelon.model import FlowKey, IterationPlan
from echelon.paradigms.plan import ideal_timeline
from hostagent.scenario import EchelonSpec, FlowSpec, Scenario

FIRST_SPORT = 20000


def release_times(plan: IterationPlan) -> dict[FlowKey, float]:
    """When each flow may start, relative to the iteration start: its producer's ideal end."""
    timeline = ideal_timeline(plan)
    out: dict[FlowKey, float] = {}
    for ef in plan.echelons:
        for f in ef.flows:
            producer = plan.producer.get((ef.name, f.index))
            if producer is not None and producer not in timeline:
                raise SpecError(f"producer.{ef.name}#{f.index}", f"unknown task {producer!r}")
            out[(ef.name, f.index)] = timeline[producer][1] if producer else 0.0
    return out


def iteration_plans(jobs: Sequence[JobSpec], iterations: int) -> list[tuple[float, IterationPlan]]:
    """``(t0, plan)`` of every job's iterations ``0..iterations-1``, jobs interleaved."""
    if iterations < 1:
        raise SpecError("iterations", f"must be at least 1, got {iterations}")
    return [
        (i * spec.ideal_iteration_s, spec.plan(i, i * spec.ideal_iteration_s))
        for i in range(iterations)
        for spec in jobs
    ]


def build_scenario(
    jobs: Sequence[JobSpec],
    iterations: int,
    echelon_ids: Mapping[tuple[str, str], int],
    hosts: Mapping[str, str],
    *,
    start_at: float,
    packet_bytes: int = 1000,
    rate_mbit: Mapping[str, float] | None = None,
    default_rate_mbit: float = 20.0,
    timeout_s: float = 60.0,
) -> Scenario:
    """A scenario playing ``iterations`` iterations of every job in ``jobs``.

    ``echelon_ids`` maps ``(job, group)`` to the ID the controller assigned.
    Sizes, offsets and ``t_ref`` are the plan's own (already absolute: the plan
    is built at its ``t0``); only source ports are added.
    """
    sport: dict[str, int] = {}
    specs: list[EchelonSpec] = []
    for t0, plan in iteration_plans(jobs, iterations):
        release = release_times(plan)
        for ef in plan.echelons:
            key = (ef.job, ef.group)
            if key not in echelon_ids:
                raise SpecError(f"{ef.name}.group", f"no echelon ID registered for {key}")
            flows = []
            for f in ef.flows:
                port = sport.get(f.src, FIRST_SPORT)
                sport[f.src] = port + 1
                rel = t0 + release[(ef.name, f.index)]
                flows.append(FlowSpec(f.index, f.src, f.dst, f.size, f.offset, rel, port))
            specs.append(
                EchelonSpec(ef.name, ef.job, ef.group, echelon_ids[key], ef.t_ref, tuple(flows))
            )
    return Scenario(
        start_at=start_at,
        hosts=dict(hosts),
        echelons=tuple(specs),
        packet_bytes=packet_bytes,
        rate_mbit=dict(rate_mbit or {}),
        default_rate_mbit=default_rate_mbit,
        timeout_s=timeout_s,
    )
