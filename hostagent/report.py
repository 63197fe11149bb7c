"""Merge the agents' records into the formation report: actual vs ideal finish per flow.

Per EchelonFlow instance: every flow's ideal finish ``t_ref + A(j)``, its actual
finish (last byte at the receiver), lateness, and the EchelonFlow completion
time ``max_j (C_j - A(j)) - t_ref`` — computed with the core's metric functions
on the rebuilt :class:`echelon.model.EchelonFlow`, so emulation, simulator and
controller all mean the same thing by these words. Per job: the mean and
largest completion time of its EchelonFlows, total lateness and when its last
flow finished. A flow that never completed makes its EchelonFlow's metrics null
and the job ``complete: false``. Per agent: how it fared (packets lost, stopped
early, started late), the machine's part in a run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from echelon.model import completion_time, lateness
from hostagent.closedloop import ClosedLoop
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
    (:func:`merge_records`), closed loop the iterations from their tasks; and how the
    agents fared: each one's end, the packets lost between them (:func:`lost_packets`),
    the agents that stopped unfinished and why (:func:`stalls`), and how late each
    released its first flow (:func:`first_flow_delays`)."""
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
    return {
        "start_at": sc.start_at,
        "release": sc.release,
        "jobs": jobs,
        "agents": {d["host"]: {"complete": d["complete"], "unknown": d["unknown_packets"],
                               "stalled": d.get("stalled", False)} for d in records},
        "lost_packets": lost_packets(records),
        "stalls": stalls(sc, records),
        "agent_delays": first_flow_delays(sc, records, ideal_iteration_s or {}),
    }  # fmt: skip


def lost_packets(records: Sequence[Mapping[str, Any]]) -> int:
    """Packets the agents sent that no agent received (duplicates are not counted twice
    by the receivers): lost on the way, or still queued when the run ended."""
    sent = sum(int(f.get("packets") or 0) for r in records for f in r.get("sent", {}).values())
    got = sum(int(f.get("packets") or 0) for r in records for f in r.get("received", {}).values())
    return max(0, sent - got)


#: How many flows a stall message names (the rest are counted).
STALL_FLOWS_SHOWN = 3


def stalls(sc: Scenario, records: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per agent that ended unfinished: which host, why it stopped (the
    scenario's ``idle_timeout_s`` or ``timeout_s``), and which flows it still waited
    for (packets in / expected) or had not sent in full.

    Why: "its flows are reported incomplete" alone sent a user looking at the switch,
    which had lost nothing; the agent had given up waiting behind the bottleneck."""
    out = []
    for r in records:
        if r.get("complete"):
            continue
        why = (
            f"nothing sent or received for {sc.idle_timeout_s:.1f} s (idle timeout)"
            if r.get("stalled")
            else f"the run's deadline ({sc.timeout_s:.0f} s) passed"
        )
        waiting = [f"{uid} ({f['packets']}/{f['expected']} packets)"
                   for uid, f in r.get("received", {}).items()
                   if int(f.get("packets") or 0) < int(f.get("expected") or 0)]  # fmt: skip
        unsent = [uid for uid, f in r.get("sent", {}).items()
                  if int(f.get("packets") or 0) < int(f.get("expected") or 0)]  # fmt: skip
        parts = []
        if waiting:
            parts.append("waiting for " + _some(waiting))
        if unsent:
            parts.append("had not sent all of " + _some(unsent))
        if not parts:
            parts.append("its compute tasks had not all run")
        out.append(f"agent {r.get('host')}: stopped after {why}; " + "; ".join(parts))
    return out


def _some(items: Sequence[str]) -> str:
    shown = ", ".join(items[:STALL_FLOWS_SHOWN])
    more = len(items) - STALL_FLOWS_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def first_flow_delays(
    sc: Scenario, records: Sequence[Mapping[str, Any]], ideal: Mapping[str, float]
) -> dict[str, dict[str, Any]]:
    """Per agent, how late it released its first flow against the plan: for each job it
    sends in, its earliest-planned flow of the first iteration that waits on no other
    flow (the agent's own closed loop, :class:`hostagent.closedloop.ClosedLoop`, releases
    it with nothing ever arriving: no producer, or one whose inputs are all local), its
    planned release and the record's actual one (seconds from the shared start); the
    job where the delay is the largest part of the job's ideal iteration is kept.

    Why only those flows: their release depends on nothing but the agent itself (it
    read the start signal late, or did not get the CPU), so a delay there is the
    machine's, never the policy's; any later flow also waits on the network.
    :func:`topo.report.late_agents` judges them against :data:`topo.report.LATE_FRACTION`."""
    out: dict[str, dict[str, Any]] = {}
    for rec in records:
        host = str(rec.get("host"))
        free = set(ClosedLoop(sc, host).due(math.inf))  # released if nothing ever arrives
        first: dict[str, tuple[float, str]] = {}
        for e, f in sc.flows_from(host):
            uid = e.uid(f)
            if e.iteration != 0 or uid not in free:
                continue
            if e.job not in first or f.release < first[e.job][0]:
                first[e.job] = (f.release, uid)
        rows = []
        for job, (planned, uid) in sorted(first.items()):
            released = dict(rec.get("sent", {})).get(uid, {}).get("released")
            if released is None or not ideal.get(job):
                continue  # never released: a stall, reported as one
            late = released - planned
            rows.append({"job": job, "flow": uid, "planned_s": planned, "released_s": released,
                         "late_s": late, "ideal_iteration_s": ideal[job]})  # fmt: skip
        if rows:
            out[host] = max(rows, key=lambda r: r["late_s"] / r["ideal_iteration_s"])
    return out
