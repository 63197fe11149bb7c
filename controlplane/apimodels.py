"""The HTTP API's response and small request models: the contract of ``docs/api-openapi.json``.

Request bodies of registrations are the core's models (``echelon.jobs``:
one per paradigm plus the explicit spec); this module types what the
controller answers, so the published schema says what a client gets, and the
typed client (:mod:`controlplane.client`) reads the answers with the same
classes. Responses allow fields they do not declare (``extra="allow"``): a newer
controller may add some, and an older client must still read the answer.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from echelon.specs import Name, SpecModel


class Response(BaseModel):
    """Base of the answers: tolerant of fields a newer controller adds."""

    model_config = ConfigDict(extra="allow")


class ErrorBody(BaseModel):
    """Every 4xx/5xx the API gives: ``detail`` = ``field: message``."""

    detail: str
    field: str
    message: str


class PolicyBody(SpecModel):
    """``PUT /policy``."""

    name: Name = Field(
        description="a policy the switch can express (echelon list), or package.module:Class"
    )


class RangeView(Response):
    """A deadline range of a group's band: offsets ``lo_us..hi_us`` (µs) get ``priority``."""

    lo_us: int
    hi_us: int
    priority: int


class GroupView(Response):
    """A registered group: its echelon ID and class slot; with ``show``, its levels."""

    group: str
    echelon_id: int
    class_id: int
    sources: list[str] | None = None
    priority: int | None = Field(None, description="band top level (7 first, 0 best-effort)")
    ranges: list[RangeView] | None = None
    switches: list[str] | None = Field(
        None, description="the switches its packets cross: where its entries are"
    )


class JobSummary(Response):
    """One entry of ``GET /jobs``."""

    job: str
    seq: int
    groups: list[GroupView]
    orphaned: str | None = None


class FlowView(Response):
    index: int
    src: str
    dst: str
    size: int = Field(description="bytes")
    offset: float = Field(description="A(j), seconds")
    offset_us: int


class EchelonFlowView(Response):
    name: str
    group: str
    t_ref: float = Field(description="seconds")
    weight: float
    flows: list[FlowView]


class JobView(JobSummary):
    """``GET /jobs/{job}`` and the answer to a registration."""

    policy: str | None = None
    spec: dict[str, Any] = Field(default_factory=dict, description="the description registered")
    echelonflows: list[EchelonFlowView] = Field(default_factory=list)
    installed: dict[str, bool] = Field(default_factory=dict)
    warnings: list[str] = Field(
        default_factory=list,
        description="implausible but valid values (units, most likely): 'field: message'",
    )


class GroupMove(Response):
    """A registered group whose plan a registration would change."""

    job: str
    group: str
    priority_before: int
    priority_after: int
    ranges_before: int = Field(description="deadline ranges before")
    ranges_after: int = Field(description="deadline ranges after")


class PlanView(JobView):
    """``POST /plan``: the job as a registration now would install it (nothing is
    installed: ``installed`` is false everywhere), and the registered groups it moves."""

    moves: list[GroupMove] = Field(default_factory=list)


class Removed(Response):
    removed: str


class PolicyView(Response):
    policy: str
    available: list[str]


class Counter(Response):
    packets: int
    bytes: int


class StatsGroup(Response):
    """Packets/bytes of one registered group, summed over the switches."""

    job: str
    group: str
    echelon_id: int
    class_id: int
    priority: int = Field(0, description="band top level installed")
    packets: int
    bytes: int


class QueueStat(Response):
    """One priority queue of one egress port, as the switch's egress last recorded it."""

    port: int
    priority: int
    depth: int = Field(description="packets the last departing packet left behind")
    max_depth: int = Field(description="most packets held at once since the last reset")
    sojourn_us: int = Field(description="time the last departing packet spent queued")


class SwitchStats(Response):
    """One switch's part of ``/stats``: its counters and queues, or why it gave none."""

    unprioritized: dict[str, Counter] | None = None
    queues: list[QueueStat] | None = None
    queues_error: str | None = None
    error: str | None = None


class QueueResetView(Response):
    """``POST /stats/queues/reset``: the switches whose maximum depths were zeroed."""

    reset: list[str]
    errors: dict[str, str]


class StatsView(Response):
    groups: list[StatsGroup]
    unprioritized: dict[str, Counter] = Field(description="packets without echelon priority")
    switches: dict[str, SwitchStats]


class SwitchStatus(Response):
    grpc: str
    device_id: int
    connected: bool
    primary: bool
    in_sync: bool
    pipeline_cookie: int | None = None
    last_error: str | None = None
    agent_alive: bool = Field(default=True, description="the switch's agent thread runs")
    unavailable: str | None = Field(
        default=None, description="why a change would be refused now (HTTP 503), or null"
    )
    entries: dict[str, int] = Field(default_factory=dict)


class StatusView(Response):
    policy: str
    replan: str
    jobs: int
    orphaned_jobs: dict[str, Any] = Field(default_factory=dict)
    registry: dict[str, Any] = Field(default_factory=dict)
    switches: dict[str, SwitchStatus]


class ProgressReply(Response):
    changed: bool
    replan: str


class ProgressView(Response):
    replan: str
    reports: int
    ignored: int
    jobs: Any = None
