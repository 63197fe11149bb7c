"""Merge the agents' records into the formation report: actual vs ideal finish per flow.

Per EchelonFlow instance: every flow's ideal finish ``t_ref + A(j)``, its actual
finish (last byte at the receiver), lateness, and the EchelonFlow completion
time ``max_j (C_j - A(j)) - t_ref`` — computed with the core's metric functions
on the rebuilt :class:`echelon.model.EchelonFlow`, so emulation, simulator and
controller all mean the same thing by these words. Per job: the mean and
largest completion time of its EchelonFlows, total lateness and when its last
flow finished. A flow that never completed makes its EchelonFlow's metrics null
and the job ``complete: false``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from echelon.model import completion_time, lateness
from echelon.specs import read_file
from hostagent.scenario import Scenario


def merge_records(records: Iterable[Mapping[str, Any]]) -> dict[str, float | None]:
    """``{flow uid: finish time or None}`` from the ``received`` part of agent records."""
    out: dict[str, float | None] = {}
    for rec in records:
        for uid, r in dict(rec.get("received", {})).items():
            out[uid] = r.get("finish")
    return out


def iteration_times(
    sc: Scenario, records: Iterable[Mapping[str, Any]], ideal: Mapping[str, float] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Per job and iteration: actual ``start``, ``end``, ``time`` (end - start) and ``ideal``.

    ``start`` is the first instant any host began the iteration -- a task start, or
    the release of the iteration's flows that no task produces (a PS's pull: the
    iteration begins when its parameters are sent, not when a worker can first
    compute) -- and ``end`` the last task end, over all hosts' records (an iteration
    with no task: its last flow's arrival). So
    iteration ``i + 1`` starts where ``i`` ends in the demo's jobs, and the times
    add up to the run. ``None`` where a task never ran.
    """
    records = list(records)
    starts: dict[tuple[str, int], list[float]] = {}
    ends: dict[tuple[str, int], list[float]] = {}
    for rec in records:
        for t in dict(rec.get("tasks", {})).values():
            key = (str(t["job"]), int(t["iteration"]))
            starts.setdefault(key, []).append(float(t["start"]))
            ends.setdefault(key, []).append(float(t["end"]))
        for job, its in dict(rec.get("iteration_starts", {})).items():
            for i, t in dict(its).items():
                starts.setdefault((str(job), int(i)), []).append(float(t))
    planned: dict[tuple[str, int], int] = {}
    for task in sc.tasks:
        planned[(task.job, task.iteration)] = planned.get((task.job, task.iteration), 0) + 1
    keys = sorted({(e.job, e.iteration) for e in sc.echelons} | set(planned))
    # an iteration without tasks (a job of flows only, e.g. a trace's bare collective)
    # ends when its last flow has arrived
    arrived = merge_records(records)
    flow_ends: dict[tuple[str, int], list[float | None]] = {}
    for ech in sc.echelons:
        key = (ech.job, ech.iteration)
        flow_ends.setdefault(key, []).extend(arrived.get(ech.uid(f)) for f in ech.flows)
    out: dict[str, list[dict[str, Any]]] = {}
    for job, i in keys:
        done = len(ends.get((job, i), [])) >= planned.get((job, i), 0) and (job, i) in starts
        s = min(starts[(job, i)]) if done else None
        if (job, i) in ends:
            e = max(ends[(job, i)]) if done else None
        else:
            fl = flow_ends.get((job, i), [])
            e = max(x for x in fl if x is not None) if done and fl and None not in fl else None
        out.setdefault(job, []).append(
            {"iteration": i, "start": s, "end": e,
             "time": None if s is None or e is None else e - s,
             "ideal": None if ideal is None else ideal.get(job)}
        )  # fmt: skip
    return out


def formation_report(
    sc: Scenario,
    records: Iterable[Mapping[str, Any]],
    ideal_iteration_s: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The report from the agents' records: each flow's finish from its receiver's
    (:func:`merge_records`), closed loop the iterations from their tasks."""
    records = list(records)
    finish = merge_records(records)
    its = iteration_times(sc, records, ideal_iteration_s) if sc.release == "closed" else {}
    begin = {(job, r["iteration"]): r["start"] for job, rs in its.items() for r in rs}
    jobs: dict[str, dict[str, Any]] = {}
    for spec in sc.echelons:
        if sc.release == "closed":
            t0 = begin.get((spec.job, spec.iteration))
            if t0 is None:  # the iteration never (fully) ran: no reference
                finish = {**finish, **{spec.uid(f): None for f in spec.flows}}
                t0 = 0.0
            spec = spec.model_copy(update={"t_ref": t0 + spec.t_ref})
        ef = spec.echelonflow()
        actual = {f.index: finish.get(spec.uid(f)) for f in spec.flows}
        done = {j: t for j, t in actual.items() if t is not None}
        late = lateness(ef, done) if len(done) == len(actual) else None
        flows = [
            {"index": f.index, "src": f.src, "dst": f.dst, "size": f.size,
             "release": f.release, "ideal": ef.ideal_finish(f.index), "actual": actual[f.index],
             "lateness": None if late is None else late[f.index]}
            for f in spec.flows
        ]  # fmt: skip
        job = jobs.setdefault(spec.job, {"echelons": [], "missing": []})
        job["missing"] += [spec.uid(f) for f in spec.flows if actual[f.index] is None]
        job["echelons"].append(
            {
                "name": spec.name,
                "group": spec.group,
                "echelon_id": spec.echelon_id,
                "t_ref": spec.t_ref,
                "flows": flows,
                "completion_time": None if late is None else completion_time(ef, done),
                "total_lateness": None if late is None else sum(late.values()),
            }
        )
    for job in jobs.values():
        ects = [e["completion_time"] for e in job["echelons"]]
        job["complete"] = not job["missing"]
        ok = [x for x in ects if x is not None]
        job["ect_mean"] = sum(ok) / len(ok) if job["complete"] and ok else None
        job["ect_max"] = max(ok) if job["complete"] and ok else None
        job["total_lateness"] = (
            sum(e["total_lateness"] for e in job["echelons"]) if job["complete"] else None
        )
        ends = [f["actual"] for e in job["echelons"] for f in e["flows"] if f["actual"] is not None]
        job["finish"] = max(ends) if job["complete"] and ends else None
    for name, job in jobs.items():
        rows = its.get(name, [])
        times = [r["time"] for r in rows]
        job["iterations"] = rows
        measured = bool(rows) and all(t is not None for t in times)
        job["iteration_time_mean"] = sum(times) / len(times) if measured else None
        job["iteration_time_ideal"] = (ideal_iteration_s or {}).get(name)
    return {"start_at": sc.start_at, "release": sc.release, "jobs": jobs}


def load_records(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    return [read_file(p) for p in paths]
