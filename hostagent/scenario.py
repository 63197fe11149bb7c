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

The file's typed models are built from the core's field types (:mod:`echelon.specs`),
so unknown keys and wrong types are refused the same way as in job files, naming the
field (``echelons[0].flows[2].sport``); :func:`parse` then checks what spans fields
(ports used twice, tasks on the right host).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema
from pydantic.functional_validators import PlainValidator

from echelon.constants import (
    ECHELON_HEADER_LEN,
    IPV4_HEADER_LEN,
    LINK_MTU,
    MAX_DEADLINE_US,
    MAX_ECHELON_ID,
    UDP_HEADER_LEN,
)
from echelon.errors import SpecError, UnknownHostError
from echelon.model import EchelonFlow, Flow, offset_us
from echelon.specs import (
    Bytes,
    Index,
    NonNegative,
    Positive,
    Seconds,
    SpecModel,
    Text,
    bounded_int,
    fail,
    read_file,
    validate,
)

#: How the agents release flows (module docstring).
RELEASE_MODES = ("closed", "open")

EchelonId: Any = bounded_int(1, MAX_ECHELON_ID, "echelon ID given by the controller")


def _sport(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(f"must be an int, got {value!r}")
    if not 1024 <= value < 65536 or value == 0xEC00:
        raise fail(f"must be 1024..65535 and not 60416, got {value}")
    return value


SourcePort = Annotated[
    int,
    PlainValidator(_sport),
    WithJsonSchema({"type": "integer", "minimum": 1024, "maximum": 65535}),
]


def flow_uid(echelon: str, index: int) -> str:
    """The key of a flow instance in agent records: ``<echelon name>#<index>``."""
    return f"{echelon}#{index}"


class FlowSpec(SpecModel):
    """One flow instance: its place in the formation and how the sender plays it.

    ``release`` is when its producer's computation ends (the sender may start),
    ``sport`` the UDP source port that tells this instance apart from the same
    flow of other iterations (same echelon ID and index) at the receiver.
    """

    index: Index
    src: Text
    dst: Text
    size: Bytes
    offset: Seconds
    release: Seconds
    sport: SourcePort


class EchelonSpec(SpecModel):
    """One EchelonFlow instance with the echelon ID the controller gave its group."""

    name: Text = ""
    job: Text = ""
    group: Text = ""
    echelon_id: EchelonId
    t_ref: Seconds
    flows: tuple[FlowSpec, ...]
    iteration: Index = 0

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


class TaskSpec(SpecModel):
    """One compute task instance a host runs in closed loop (:class:`echelon.model.ComputeTask`).

    ``after_flows`` and ``produces`` are flow uids (:func:`flow_uid`): the flows
    that must have fully arrived before it starts, and the flows its end releases.
    """

    id: Text = ""
    job: Text = ""
    iteration: Index
    host: Text = ""
    duration: Seconds
    after_tasks: tuple[Text, ...] = ()
    after_flows: tuple[Text, ...] = ()
    produces: tuple[Text, ...] = ()


#: A packet's UDP payload (the echelon header inside it): from 64 bytes to one jumbo
#: frame, the emulated links' MTU less the IPv4 and UDP headers.
MIN_PACKET_BYTES = 64
MAX_PACKET_BYTES = LINK_MTU - IPV4_HEADER_LEN - UDP_HEADER_LEN


class Scenario(SpecModel):
    """What every agent of one run reads."""

    start_at: NonNegative
    hosts: Annotated[dict[str, Text], Field(min_length=1)]
    echelons: tuple[EchelonSpec, ...]
    packet_bytes: bounded_int(MIN_PACKET_BYTES, MAX_PACKET_BYTES, "one jumbo frame") = 1000  # type: ignore[valid-type]
    rate_mbit: dict[str, Positive] = Field(default_factory=dict)
    default_rate_mbit: Positive = 20.0
    timeout_s: Positive = 60.0
    #: an agent waiting for packets that ends when nothing moved on its host this long
    #: (a lost packet would otherwise hold a closed-loop run until ``timeout_s``)
    idle_timeout_s: Positive | None = None
    release: Literal["closed", "open"] = "closed"
    tasks: tuple[TaskSpec, ...] = ()

    @property
    def chunk(self) -> int:
        """Payload bytes of the job's data in one packet (after the echelon header)."""
        return int(self.packet_bytes) - ECHELON_HEADER_LEN

    def packets(self, flow: FlowSpec) -> int:
        return max(1, -(-flow.size // self.chunk))

    def rate_of(self, host: str) -> float:
        return float(self.rate_mbit.get(host, self.default_rate_mbit))

    def flows_from(self, host: str) -> list[tuple[EchelonSpec, FlowSpec]]:
        return [(e, f) for e in self.echelons for f in e.flows if f.src == host]

    def flows_to(self, host: str) -> list[tuple[EchelonSpec, FlowSpec]]:
        return [(e, f) for e in self.echelons for f in e.flows if f.dst == host]

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=1)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())


def load(path: str | Path) -> Scenario:
    return parse(read_file(path))


def parse(data: Any) -> Scenario:
    """Build and validate a :class:`Scenario`; :class:`SpecError` names the bad field.

    Types and unknown keys: the models above; here what spans fields (hosts of flows,
    ports, task placement)."""
    if not isinstance(data, dict):
        raise SpecError("scenario", "must be a JSON object")
    sc = validate(Scenario, data)
    for i, e in enumerate(sc.echelons):
        for j, f in enumerate(e.flows):
            for end in ("src", "dst"):
                if getattr(f, end) not in sc.hosts:
                    where = f"echelons[{i}].flows[{j}].{end}"
                    raise UnknownHostError(where, f"unknown host {getattr(f, end)!r}")
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
            if offset_us(fs.offset) > MAX_DEADLINE_US:  # as the sender puts it on the wire
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
            raise UnknownHostError(f"tasks.{t.id}.host", f"unknown host {t.host!r}")
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
