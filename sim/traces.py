"""Trace files: which jobs arrive when, on which network.

JSON or YAML::

    network: {kind: leafspine, leaves: 4, hosts_per_leaf: 4, spines: 2, gbit: 100,
              oversubscription: 2}
    jobs:
      - {arrival: 0.0, iterations: 3, job: {job: a, paradigm: gpipe, hosts: [...], ...}}

CSV (one job per row, built from a template of :mod:`sim.workloads`)::

    arrival,iterations,name,paradigm,model,hosts,micro_batches,batch,dp,tp
    0.0,3,a,gpipe,gpt2-xl,h0;h1;h2;h3,8,4,1,1

A CSV trace has no network section; the CLI's ``--net`` options give it.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from echelon.errors import SpecError
from echelon.specs import read_file
from sim.workloads import Template, TraceJob, describe


def load_trace(path: str | Path) -> tuple[dict[str, Any] | None, list[TraceJob]]:
    """Read a trace; returns (network description or None, jobs). A JSON/YAML trace is
    read by the core's one file reader (:func:`echelon.specs.read_file`)."""
    p = Path(path)
    if p.suffix != ".csv":
        return parse_trace(read_file(p))
    try:
        text = p.read_text()
    except OSError as exc:
        raise SpecError("trace", f"cannot read {p}: {exc.strerror or exc}") from None
    return None, _csv_jobs(text)


def parse_trace(data: Any) -> tuple[dict[str, Any] | None, list[TraceJob]]:
    if not isinstance(data, Mapping) or not isinstance(data.get("jobs"), list):
        raise SpecError("trace.jobs", "a trace is a mapping with a list of jobs")
    net = data.get("network")
    if net is not None and not isinstance(net, Mapping):
        raise SpecError("trace.network", "must be a mapping")
    jobs = []
    for i, row in enumerate(data["jobs"]):
        where = f"trace.jobs[{i}]"
        if not isinstance(row, Mapping) or not isinstance(row.get("job"), Mapping):
            raise SpecError(f"{where}.job", "each entry needs a job description mapping")
        jobs.append(
            TraceJob(
                dict(row["job"]),
                _num(row, "arrival", where, 0.0),
                int(_num(row, "iterations", where, 1, integer=True)),
            )
        )
    return (dict(net) if net is not None else None), jobs


def _num(
    row: Mapping[str, Any], key: str, where: str, default: float, integer: bool = False
) -> float:
    v = row.get(key, default)
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            raise SpecError(f"{where}.{key}", f"not a number: {v!r}") from None
    if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
        raise SpecError(f"{where}.{key}", f"must be a non-negative number, got {v!r}")
    if integer and (v != int(v) or v < 1):
        raise SpecError(f"{where}.{key}", f"must be a positive integer, got {v!r}")
    return float(v)


def _csv_jobs(text: str) -> list[TraceJob]:
    rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise SpecError("trace", "CSV trace has no rows")
    missing = {"arrival", "paradigm", "model", "hosts"} - set(rows[0])
    if missing:
        raise SpecError("trace", f"CSV trace lacks columns {sorted(missing)}")
    jobs = []
    for i, row in enumerate(rows):
        where = f"trace.rows[{i}]"
        hosts = [h for h in (row.get("hosts") or "").split(";") if h]
        knobs: dict[str, int] = {}
        for key in ("micro_batches", "batch", "dp", "tp"):
            if row.get(key):
                knobs[key] = int(_num(row, key, where, 0, integer=key != "batch"))
        tmpl = Template(row["paradigm"], row["model"], len(hosts), **knobs)
        name = row.get("name") or f"job{i}"
        jobs.append(
            TraceJob(
                describe(name, tmpl, hosts),
                _num(row, "arrival", where, 0.0),
                int(_num(row, "iterations", where, 1, integer=True)),
            )
        )
    return jobs


def write_trace(
    path: str | Path, jobs: Sequence[TraceJob], network: Mapping[str, Any] | None
) -> Path:
    """Write a JSON/YAML trace (by suffix) that :func:`load_trace` reads back."""
    p = Path(path)
    data: dict[str, Any] = {}
    if network is not None:
        data["network"] = dict(network)
    data["jobs"] = [
        {"arrival": j.arrival, "iterations": j.iterations, "job": dict(j.description)} for j in jobs
    ]
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix in (".yaml", ".yml"):
        p.write_text(yaml.safe_dump(data, sort_keys=False))
    else:
        p.write_text(json.dumps(data, indent=1))
    return p
