"""The scenario file: every flow instance the agents play in one run, with its formation.

One JSON file is shared by all hosts (they read the same file system): each
agent picks the flows it sends (``src == host``) and the flows it receives
(``dst == host``). It mirrors :class:`echelon.model.EchelonFlow` so the report
can rebuild the EchelonFlows and use the core's metrics unchanged.

Times inside are seconds relative to ``start_at``, a wall-clock (``time.time``)
instant: all emulated hosts share the machine's clock, so one number
synchronises them, and receive timestamps (``SO_TIMESTAMPNS``) use that clock.

``release`` says how flows are released (:mod:`hostagent.closedloop`):
``"closed"`` (default) -- the agents run the jobs' compute ``tasks`` and a flow
leaves when its producer task ends (``FlowSpec.release`` is then only the ideal
release, for the record, and ``t_ref`` is relative to the iteration's actual
start); ``"open"`` -- every flow leaves at its fixed ``FlowSpec.release`` and
``t_ref`` is absolute.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echelon.constants import MAX_DEADLINE_US
from echelon.errors import SpecError
from echelon.scenario import EchelonEntry as EchelonSpec
from echelon.scenario import FlowEntry as FlowSpec
from echelon.scenario import ScenarioFile as Scenario
from echelon.scenario import TaskEntry as TaskSpec
from echelon.scenario import flow_uid
from echelon.specs import read_file, validate

__all__ = ["EchelonSpec", "FlowSpec", "Scenario", "TaskSpec", "flow_uid", "load", "parse"]

#: Bytes of the IPv4 + UDP headers in front of the echelon header.
IP_UDP_OVERHEAD = 28
#: How the agents release flows (module docstring).
RELEASE_MODES = ("closed", "open")


def load(path: str | Path) -> Scenario:
    return parse(read_file(path))


def parse(data: Any) -> Scenario:
    """Build and validate a :class:`Scenario`; :class:`SpecError` names the bad field.

    Types and unknown keys: the core's model (:mod:`echelon.scenario`); here what
    spans fields (hosts of flows, ports, task placement)."""
    if not isinstance(data, dict):
        raise SpecError("scenario", "must be a JSON object")
    sc = validate(Scenario, data)
    for i, e in enumerate(sc.echelons):
        for j, f in enumerate(e.flows):
            for end in ("src", "dst"):
                if getattr(f, end) not in sc.hosts:
                    where = f"echelons[{i}].flows[{j}].{end}"
                    raise SpecError(where, f"unknown host {getattr(f, end)!r}")
        e.echelonflow()  # the core validates the formation
    _check_tasks(sc)
    ports: set[tuple[str, int]] = set()
    for es in sc.echelons:
        for fs in es.flows:
            if (fs.src, fs.sport) in ports:
                raise SpecError(
                    f"{es.name}.flows[{fs.index}].sport", f"{fs.sport} used twice by {fs.src}"
                )
            ports.add((fs.src, fs.sport))
            if fs.offset * 1e6 > MAX_DEADLINE_US:
                raise SpecError(f"{es.name}.flows[{fs.index}].offset", "does not fit 32 bits of µs")
    return sc


def _check_tasks(sc: Scenario) -> None:
    """Closed loop is local to each host: a task's inputs must arrive at its own host,
    its predecessors run there, and the flows it produces leave from there."""
    flows = {e.uid(f): f for e in sc.echelons for f in e.flows}
    tasks = {t.id: t for t in sc.tasks}
    if len(tasks) != len(sc.tasks):
        raise SpecError("tasks", "task ids must be unique")
    produced: set[str] = set()
    for t in sc.tasks:
        if t.host not in sc.hosts:
            raise SpecError(f"tasks.{t.id}.host", f"unknown host {t.host!r}")
        for d in t.after_tasks:
            if d not in tasks or tasks[d].host != t.host:
                raise SpecError(f"tasks.{t.id}.after_tasks", f"{d!r} is no task on {t.host}")
        for uid in t.after_flows:
            if uid not in flows or flows[uid].dst != t.host:
                raise SpecError(f"tasks.{t.id}.after_flows", f"{uid!r} is no flow to {t.host}")
        for uid in t.produces:
            if uid not in flows or flows[uid].src != t.host or uid in produced:
                msg = f"{uid!r} is no flow from {t.host} or is produced twice"
                raise SpecError(f"tasks.{t.id}.produces", msg)
            produced.add(uid)
