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

from echelon.constants import MAX_DEADLINE_US, MAX_ECHELON_ID
from echelon.errors import SpecError
from echelon.model import EchelonFlow, Flow

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
    """Build and validate a :class:`Scenario`; :class:`SpecError` names the bad field."""
    if not isinstance(data, dict):
        raise SpecError("scenario", "must be a JSON object")
    hosts = data.get("hosts")
    if not isinstance(hosts, dict) or not hosts:
        raise SpecError("hosts", "must map host names to IPv4 addresses")
    echelons = []
    for i, e in enumerate(_list(data, "echelons")):
        where = f"echelons[{i}]"
        if not isinstance(e, dict):
            raise SpecError(where, "must be an object")
        eid = _num(e, "echelon_id", where, int)
        if not 1 <= eid <= MAX_ECHELON_ID:
            raise SpecError(f"{where}.echelon_id", f"must be 1..{MAX_ECHELON_ID}, got {eid}")
        flows = tuple(
            _flow(f, f"{where}.flows[{j}]", hosts) for j, f in enumerate(_list(e, "flows"))
        )
        spec = EchelonSpec(
            str(e.get("name", "")), str(e.get("job", "")), str(e.get("group", "")),
            eid, float(_num(e, "t_ref", where, float)), flows,
            int(_num(e, "iteration", where, int)) if "iteration" in e else 0,
        )  # fmt: skip
        spec.echelonflow()  # the core validates the formation
        echelons.append(spec)
    sc = Scenario(
        start_at=float(_num(data, "start_at", "scenario", float)),
        hosts={str(k): str(v) for k, v in hosts.items()},
        echelons=tuple(echelons),
        packet_bytes=int(data.get("packet_bytes", 1000)),
        rate_mbit={str(k): float(v) for k, v in dict(data.get("rate_mbit", {})).items()},
        default_rate_mbit=float(data.get("default_rate_mbit", 20.0)),
        timeout_s=float(data.get("timeout_s", 60.0)),
        release=str(data.get("release", "closed")),
        tasks=tuple(_task(t, f"tasks[{i}]") for i, t in enumerate(data.get("tasks", []))),
    )
    if sc.release not in RELEASE_MODES:
        raise SpecError("release", f"must be one of {list(RELEASE_MODES)}, got {sc.release!r}")
    _check_tasks(sc)
    if not 64 <= sc.packet_bytes <= 1472:
        raise SpecError(
            "packet_bytes", f"must be 64..1472 (one Ethernet frame), got {sc.packet_bytes}"
        )
    ports: set[tuple[str, int]] = set()
    for e in sc.echelons:
        for f in e.flows:
            if (f.src, f.sport) in ports:
                raise SpecError(
                    f"{e.name}.flows[{f.index}].sport", f"{f.sport} used twice by {f.src}"
                )
            ports.add((f.src, f.sport))
            if f.offset * 1e6 > MAX_DEADLINE_US:
                raise SpecError(f"{e.name}.flows[{f.index}].offset", "does not fit 32 bits of µs")
    return sc


def _list(data: dict[str, Any], key: str) -> list[Any]:
    v = data.get(key)
    if not isinstance(v, list):
        raise SpecError(key, "must be a list")
    return v


def _num(data: dict[str, Any], key: str, where: str, kind: type) -> Any:
    v = data.get(key)
    if (
        isinstance(v, bool)
        or not isinstance(v, int | float)
        or (kind is int and not isinstance(v, int))
    ):
        raise SpecError(f"{where}.{key}", f"must be a {kind.__name__}, got {v!r}")
    return v


def _flow(f: Any, where: str, hosts: Mapping[str, Any]) -> FlowSpec:
    if not isinstance(f, dict):
        raise SpecError(where, "must be an object")
    for end in ("src", "dst"):
        if f.get(end) not in hosts:
            raise SpecError(f"{where}.{end}", f"unknown host {f.get(end)!r}")
    sport = _num(f, "sport", where, int)
    if not 1024 <= sport < 65536 or sport == 0xEC00:
        raise SpecError(f"{where}.sport", f"must be 1024..65535 and not 60416, got {sport}")
    release = float(_num(f, "release", where, float))
    if release < 0:
        raise SpecError(f"{where}.release", f"must be >= 0, got {release}")
    return FlowSpec(
        index=_num(f, "index", where, int), src=str(f["src"]), dst=str(f["dst"]),
        size=_num(f, "size", where, int), offset=float(_num(f, "offset", where, float)),
        release=release, sport=sport,
    )  # fmt: skip


def _task(t: Any, where: str) -> TaskSpec:
    if not isinstance(t, dict):
        raise SpecError(where, "must be an object")
    duration = float(_num(t, "duration", where, float))
    if duration < 0:
        raise SpecError(f"{where}.duration", f"must be >= 0, got {duration}")
    lists = {}
    for key in ("after_tasks", "after_flows", "produces"):
        v = t.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise SpecError(f"{where}.{key}", "must be a list of strings")
        lists[key] = tuple(v)
    return TaskSpec(
        str(t.get("id", "")), str(t.get("job", "")), int(_num(t, "iteration", where, int)),
        str(t.get("host", "")), duration, lists["after_tasks"], lists["after_flows"],
        lists["produces"],
    )  # fmt: skip


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
