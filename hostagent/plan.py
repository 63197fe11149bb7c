"""Turn jobs into a scenario: flow instances with their formation, and the compute tasks.

The agents play each job's ``JobSpec.plan(i, t0)`` -- the EchelonFlows and
compute tasks the paradigm builder derives from the job description -- for
iterations ``i = 0, 1, ...``.

Closed loop (default, ``release="closed"``): the plans are built at ``t0 = 0``
and the scenario carries their tasks; the agents run them
(:mod:`hostagent.closedloop`), so an iteration starts when the previous one
really ended, and the report places each instance's ``t_ref`` at its
iteration's actual start (:func:`hostagent.report.iteration_times`): the ideal
finish of a flow is ``t_ref + A(j)`` of the plan instance built at the start the
iteration really had, so ECT measures how late the network made the flows
relative to *that* iteration, not the delay accumulated by earlier ones.

Open loop (``release="open"``): iteration ``i`` starts at ``t0 = i *
spec.ideal_iteration_s`` and a flow is released when its producer ends in the
plan's ideal (contention-free) timeline
(:func:`echelon.paradigms.plan.ideal_timeline`), at the iteration start if it
has no producer, whatever the network did. Kept for comparison: iterations then
overlap as no training job's could.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from echelon.errors import SpecError
from echelon.jobs import JobSpec
from echelon.model import FlowKey, IterationPlan
from echelon.paradigms.plan import ideal_timeline
from hostagent.scenario import (
    RELEASE_MODES,
    EchelonSpec,
    FlowSpec,
    Scenario,
    TaskSpec,
    flow_uid,
)

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


def iteration_plans(
    jobs: Sequence[JobSpec], iterations: int, release: str = "open"
) -> list[tuple[float, IterationPlan]]:
    """``(t0, plan)`` of every job's iterations ``0..iterations-1``, jobs interleaved.

    ``t0`` is the ideal start (open loop) or 0 (closed loop: the actual start is
    only known when the iteration runs)."""
    if iterations < 1:
        raise SpecError("iterations", f"must be at least 1, got {iterations}")
    if release not in RELEASE_MODES:
        raise SpecError("release", f"must be one of {list(RELEASE_MODES)}, got {release!r}")
    out = []
    for i in range(iterations):
        for spec in jobs:
            t0 = i * spec.ideal_iteration_s if release == "open" else 0.0
            out.append((t0, spec.plan(i, t0)))
    return out


def task_specs(plan: IterationPlan) -> list[TaskSpec]:
    """The plan's compute tasks with their flows named by uid, for the closed loop."""
    produces: dict[str, list[str]] = {}
    for key, task in plan.producer.items():
        produces.setdefault(task, []).append(flow_uid(*key))
    return [
        TaskSpec(id=t.id, job=plan.job, iteration=plan.iteration, host=t.host,
                 duration=t.duration, after_tasks=t.after_tasks,
                 after_flows=tuple(flow_uid(*k) for k in t.after_flows),
                 produces=tuple(sorted(produces.get(t.id, []))))
        for t in plan.tasks
    ]  # fmt: skip


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
    release: str = "closed",
    idle_timeout_s: float | None = None,
) -> Scenario:
    """A scenario playing ``iterations`` iterations of every job in ``jobs``.

    ``echelon_ids`` maps ``(job, group)`` to the ID the controller assigned.
    Sizes, offsets and ``t_ref`` are the plan's own (the plan is built at its
    ``t0``, see :func:`iteration_plans`); only source ports are added.
    """
    sport: dict[str, int] = {}
    specs: list[EchelonSpec] = []
    tasks: list[TaskSpec] = []
    for t0, plan in iteration_plans(jobs, iterations, release):
        if release == "closed":
            tasks += task_specs(plan)
        ideal = release_times(plan)
        for ef in plan.echelons:
            key = (ef.job, ef.group)
            if key not in echelon_ids:
                raise SpecError(f"{ef.name}.group", f"no echelon ID registered for {key}")
            flows = []
            for f in ef.flows:
                port = sport.get(f.src, FIRST_SPORT)
                sport[f.src] = port + 1
                rel = t0 + ideal[(ef.name, f.index)]
                flows.append(
                    FlowSpec(
                        index=f.index,
                        src=f.src,
                        dst=f.dst,
                        size=f.size,
                        offset=f.offset,
                        release=rel,
                        sport=port,
                    )
                )
            specs.append(
                EchelonSpec(name=ef.name, job=ef.job, group=ef.group, echelon_id=echelon_ids[key],
                            t_ref=ef.t_ref, flows=tuple(flows), iteration=plan.iteration)
            )  # fmt: skip
    return Scenario(
        start_at=start_at,
        hosts=dict(hosts),
        echelons=tuple(specs),
        packet_bytes=packet_bytes,
        rate_mbit=dict(rate_mbit or {}),
        default_rate_mbit=default_rate_mbit,
        timeout_s=timeout_s,
        release="open" if release == "open" else "closed",  # checked above
        tasks=tuple(tasks),
        idle_timeout_s=idle_timeout_s,
    )
