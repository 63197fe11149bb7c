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

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from echelon.constants import MAX_DEADLINE_US
from echelon.errors import SpecError
from echelon.model import EchelonFlow, Flow
from echelon.scenario import ScenarioFile
from echelon.specs import validate

#: Bytes of the IPv4 + UDP headers in front of the echelon header.
IP_UDP_OVERHEAD = 28
#: How the agents release flows (module docstring).
RELEASE_MODES = ("closed", "open")


@dataclass(frozen=True)
class FlowSpec:
    """One flow instance: its place in the formation and how the sender plays it.

    ``release`` is when its producer's computation ends (the sender may start),
    ``sport`` the UDP source port that tells this instance apart from the same
    flow of other iterations (same echelon ID and index) at the receiver.
    """

    index: int
    src: str
    dst: str
    size: int
    offset: float
    release: float
    sport: int


@dataclass(frozen=True)
class EchelonSpec:
    """One EchelonFlow instance with the echelon ID the controller gave its group."""

    name: str
    job: str
    group: str
    echelon_id: int
    t_ref: float
    flows: tuple[FlowSpec, ...]
    iteration: int = 0

    def echelonflow(self) -> EchelonFlow:
        return EchelonFlow(
            self.name,
            self.job,
            self.group,
            tuple(Flow(f.index, f.src, f.dst, f.size, f.offset) for f in self.flows),
            t_ref=self.t_ref,
        )

    def uid(self, flow: FlowSpec) -> str:
        return flow_uid(self.name, flow.index)


@dataclass(frozen=True)
class TaskSpec:
    """One compute task instance a host runs in closed loop (:class:`echelon.model.ComputeTask`).

    ``after_flows`` and ``produces`` are flow uids (:func:`flow_uid`): the flows
    that must have fully arrived before it starts, and the flows its end releases.
    """

    id: str
    job: str
    iteration: int
    host: str
    duration: float
    after_tasks: tuple[str, ...] = ()
    after_flows: tuple[str, ...] = ()
    produces: tuple[str, ...] = ()


def flow_uid(echelon: str, index: int) -> str:
    """The key of a flow instance in agent records: ``<echelon name>#<index>``."""
    return f"{echelon}#{index}"


@dataclass(frozen=True)
class Scenario:
    """What every agent of one run needs."""

    start_at: float
    hosts: Mapping[str, str]  # name -> IPv4 address
    echelons: tuple[EchelonSpec, ...]
    packet_bytes: int = 1000
    rate_mbit: Mapping[str, float] = field(default_factory=dict)
    default_rate_mbit: float = 20.0
    timeout_s: float = 60.0
    release: str = "closed"
    tasks: tuple[TaskSpec, ...] = ()
    #: End early when nothing was sent or received on this host for this long while
    #: flows are still missing (None: wait until ``timeout_s``). A packet lost on the
    #: way never arrives, so in closed loop everything waiting on it waits forever.
    idle_timeout_s: float | None = None

    @property
    def chunk(self) -> int:
        """Payload bytes of the job's data in one packet (after the echelon header)."""
        return self.packet_bytes - 16

    def packets(self, flow: FlowSpec) -> int:
        return max(1, -(-flow.size // self.chunk))

    def rate_of(self, host: str) -> float:
        return float(self.rate_mbit.get(host, self.default_rate_mbit))

    def flows_from(self, host: str) -> list[tuple[EchelonSpec, FlowSpec]]:
        return [(e, f) for e in self.echelons for f in e.flows if f.src == host]

    def flows_to(self, host: str) -> list[tuple[EchelonSpec, FlowSpec]]:
        return [(e, f) for e in self.echelons for f in e.flows if f.dst == host]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())


def load(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except OSError as exc:
        raise SpecError("scenario", f"cannot read {p}: {exc.strerror}") from exc
    except ValueError as exc:
        raise SpecError("scenario", f"{p} is not JSON: {exc}") from exc
    return parse(data)


def parse(data: Any) -> Scenario:
    """Build and validate a :class:`Scenario`; :class:`SpecError` names the bad field.

    Types and unknown keys: the core's :class:`echelon.scenario.ScenarioFile`;
    here what spans fields (hosts of flows, ports, task placement)."""
    if not isinstance(data, dict):
        raise SpecError("scenario", "must be a JSON object")
    m = validate(ScenarioFile, data)
    echelons = []
    for i, e in enumerate(m.echelons):
        flows = []
        for j, f in enumerate(e.flows):
            for end in ("src", "dst"):
                if getattr(f, end) not in m.hosts:
                    where = f"echelons[{i}].flows[{j}].{end}"
                    raise SpecError(where, f"unknown host {getattr(f, end)!r}")
            flows.append(FlowSpec(f.index, f.src, f.dst, f.size, f.offset, f.release, f.sport))
        spec = EchelonSpec(e.name, e.job, e.group, e.echelon_id, e.t_ref, tuple(flows), e.iteration)
        spec.echelonflow()  # the core validates the formation
        echelons.append(spec)
    sc = Scenario(
        start_at=m.start_at,
        hosts=dict(m.hosts),
        echelons=tuple(echelons),
        packet_bytes=m.packet_bytes,
        rate_mbit=dict(m.rate_mbit),
        default_rate_mbit=m.default_rate_mbit,
        timeout_s=m.timeout_s,
        idle_timeout_s=m.idle_timeout_s,
        release=m.release,
        tasks=tuple(
            TaskSpec(
                t.id,
                t.job,
                t.iteration,
                t.host,
                t.duration,
                t.after_tasks,
                t.after_flows,
                t.produces,
            )
            for t in m.tasks
        ),
    )
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
