"""Typed model of the host agents' scenario file (``hostagent.scenario``).

The scenario is written by the demo and read by every emulated host; its shape
lives here with the other user-facing models (:mod:`echelon.specs`) so unknown
keys and wrong types are refused the same way, naming the field
(``echelons[0].flows[2].sport``). These models are also what the agents use (the
one definition of the file): :mod:`hostagent.scenario` names them ``Scenario``,
``EchelonSpec``, ``FlowSpec``, ``TaskSpec`` and checks what spans fields (ports
used twice, tasks on the right host) in :func:`hostagent.scenario.parse`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema
from pydantic.functional_validators import PlainValidator

from echelon.constants import ECHELON_HEADER_LEN, MAX_ECHELON_ID
from echelon.model import EchelonFlow, Flow
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
)

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


class FlowEntry(SpecModel):
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


class EchelonEntry(SpecModel):
    """One EchelonFlow instance with the echelon ID the controller gave its group."""

    name: Text = ""
    job: Text = ""
    group: Text = ""
    echelon_id: EchelonId
    t_ref: Seconds
    flows: tuple[FlowEntry, ...]
    iteration: Index = 0

    def echelonflow(self) -> EchelonFlow:
        return EchelonFlow(
            self.name,
            self.job,
            self.group,
            tuple(Flow(f.index, f.src, f.dst, f.size, f.offset) for f in self.flows),
            t_ref=self.t_ref,
        )

    def uid(self, flow: FlowEntry) -> str:
        return flow_uid(self.name, flow.index)


class TaskEntry(SpecModel):
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


class ScenarioFile(SpecModel):
    """What every agent of one run reads."""

    start_at: NonNegative
    hosts: Annotated[dict[str, Text], Field(min_length=1)]
    echelons: tuple[EchelonEntry, ...]
    packet_bytes: bounded_int(64, 1472, "one Ethernet frame") = 1000  # type: ignore[valid-type]
    rate_mbit: dict[str, Positive] = Field(default_factory=dict)
    default_rate_mbit: Positive = 20.0
    timeout_s: Positive = 60.0
    #: an agent waiting for packets that ends when nothing moved on its host this long
    #: (a lost packet would otherwise hold a closed-loop run until ``timeout_s``)
    idle_timeout_s: Positive | None = None
    release: Literal["closed", "open"] = "closed"
    tasks: tuple[TaskEntry, ...] = ()

    @property
    def chunk(self) -> int:
        """Payload bytes of the job's data in one packet (after the echelon header)."""
        return int(self.packet_bytes) - ECHELON_HEADER_LEN

    def packets(self, flow: FlowEntry) -> int:
        return max(1, -(-flow.size // self.chunk))

    def rate_of(self, host: str) -> float:
        return float(self.rate_mbit.get(host, self.default_rate_mbit))

    def flows_from(self, host: str) -> list[tuple[EchelonEntry, FlowEntry]]:
        return [(e, f) for e in self.echelons for f in e.flows if f.src == host]

    def flows_to(self, host: str) -> list[tuple[EchelonEntry, FlowEntry]]:
        return [(e, f) for e in self.echelons for f in e.flows if f.dst == host]

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=1)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())
