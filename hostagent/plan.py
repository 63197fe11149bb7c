"""Turn iteration plans into a scenario: when each flow is released, and its formation.

The agent follows the plan's *release times* rather than waiting for upstream
arrivals across hosts (documented simplification): a flow is released when its
producer task ends in the ideal schedule, where every flow arrives exactly at its
ideal finish ``t_ref + A(j)``. That keeps hosts independent (no notifications
between namespaces) and makes the offered load identical under every policy, so
policies differ only in how the network orders the bytes — which is what the
demo compares. Iteration ``k`` starts when the ideal iteration ``k-1`` ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from echelon.errors import SpecError
from echelon.model import IterationPlan
from hostagent.scenario import EchelonSpec, FlowSpec, Scenario

FIRST_SPORT = 20000


def ideal_schedule(plan: IterationPlan) -> tuple[dict[str, float], float]:
    """Task end times (relative to the iteration start) and the iteration's ideal makespan.

    Tasks of one host run one at a time in plan order; a task starts when its
    host is free, its ``after_tasks`` ended and its ``after_flows`` reached their
    ideal finish.
    """
    ideal = {(ef.name, f.index): ef.ideal_finish(f.index) for ef in plan.echelons for f in ef.flows}
    queues: dict[str, list[int]] = {}
    for i, t in enumerate(plan.tasks):
        queues.setdefault(t.host, []).append(i)
    end: dict[str, float] = {}
    free: dict[str, float] = dict.fromkeys(queues, 0.0)
    progress = True
    while progress:
        progress = False
        for host, todo in queues.items():
            while todo:
                t = plan.tasks[todo[0]]
                if any(dep not in end for dep in t.after_tasks):
                    break
                missing = [k for k in t.after_flows if k not in ideal]
                if missing:
                    raise SpecError(f"tasks.{t.id}.after_flows", f"unknown flows {missing}")
                start = max(
                    [
                        free[host],
                        *(end[d] for d in t.after_tasks),
                        *(ideal[k] for k in t.after_flows),
                    ]
                )
                end[t.id] = free[host] = start + t.duration
                todo.pop(0)
                progress = True
    stuck = [plan.tasks[q[0]].id for q in queues.values() if q]
    if stuck:
        raise SpecError("tasks", f"dependency cycle or unknown task before {stuck}")
    makespan = max([*end.values(), *ideal.values(), 0.0])
    return end, makespan


def release_times(plan: IterationPlan) -> dict[tuple[str, int], float]:
    """When each flow may start: its producer's ideal end, or 0 without producer."""
    end, _ = ideal_schedule(plan)
    out = {}
    for ef in plan.echelons:
        for f in ef.flows:
            producer = plan.producer.get((ef.name, f.index))
            if producer is not None and producer not in end:
                raise SpecError(f"producer.{ef.name}#{f.index}", f"unknown task {producer!r}")
            out[(ef.name, f.index)] = end[producer] if producer else 0.0
    return out


def build_scenario(
    plans: Sequence[IterationPlan],
    echelon_ids: Mapping[tuple[str, str], int],
    hosts: Mapping[str, str],
    *,
    start_at: float,
    job_offset: Mapping[str, float] | None = None,
    scale: float = 1.0,
    packet_bytes: int = 1000,
    rate_mbit: Mapping[str, float] | None = None,
    default_rate_mbit: float = 20.0,
    timeout_s: float = 60.0,
) -> Scenario:
    """A scenario playing ``plans`` (iterations of one or more jobs, in order).

    ``echelon_ids`` maps ``(job, group)`` to the ID the controller assigned;
    ``job_offset`` delays a job's first iteration; ``scale`` multiplies every
    flow size (the demo shrinks real jobs to tens of seconds).
    """
    next_start: dict[str, float] = dict(job_offset or {})
    sport: dict[str, int] = {}
    specs: list[EchelonSpec] = []
    for plan in plans:
        base = next_start.get(plan.job, 0.0)
        release = release_times(plan)
        for ef in plan.echelons:
            key = (ef.job, ef.group)
            if key not in echelon_ids:
                raise SpecError(f"{ef.name}.group", f"no echelon ID registered for {key}")
            flows = []
            for f in ef.flows:
                port = sport.get(f.src, FIRST_SPORT)
                sport[f.src] = port + 1
                flows.append(
                    FlowSpec(
                        f.index,
                        f.src,
                        f.dst,
                        max(1, round(f.size * scale)),
                        f.offset,
                        base + release[(ef.name, f.index)],
                        port,
                    )
                )
            specs.append(
                EchelonSpec(
                    ef.name, ef.job, ef.group, echelon_ids[key], base + ef.t_ref, tuple(flows)
                )
            )
        next_start[plan.job] = base + ideal_schedule(plan)[1]
    return Scenario(
        start_at=start_at,
        hosts=dict(hosts),
        echelons=tuple(specs),
        packet_bytes=packet_bytes,
        rate_mbit=dict(rate_mbit or {}),
        default_rate_mbit=default_rate_mbit,
        timeout_s=timeout_s,
    )
