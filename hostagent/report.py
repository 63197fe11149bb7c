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

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from echelon.errors import SpecError
from echelon.model import completion_time, lateness
from hostagent.scenario import Scenario


def merge_records(records: Iterable[Mapping[str, Any]]) -> dict[str, float | None]:
    """``{flow uid: finish time or None}`` from the ``received`` part of agent records."""
    out: dict[str, float | None] = {}
    for rec in records:
        for uid, r in dict(rec.get("received", {})).items():
            out[uid] = r.get("finish")
    return out


def formation_report(sc: Scenario, finish: Mapping[str, float | None]) -> dict[str, Any]:
    jobs: dict[str, dict[str, Any]] = {}
    for spec in sc.echelons:
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
    return {"start_at": sc.start_at, "jobs": jobs}


def load_records(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    out = []
    for p in paths:
        try:
            out.append(json.loads(Path(p).read_text()))
        except OSError as exc:
            raise SpecError("records", f"cannot read {p}: {exc.strerror}") from exc
        except ValueError as exc:
            raise SpecError("records", f"{p} is not JSON: {exc}") from exc
    return out
