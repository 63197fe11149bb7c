"""What a simulation is given: jobs (anything with ``plan()``), and how to run them.

Kept apart from :mod:`sim.core.engine` so that sweeps, traces and the CLI can build
configurations without importing the event loop.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from echelon.errors import EchelonError, SpecError
from echelon.model import IterationPlan
from echelon.schedule import Policy


class SimError(EchelonError):
    """The simulation cannot proceed (e.g. a dependency cycle in a plan)."""


class Plannable(Protocol):
    """What the engine needs of a job: the core's ``JobSpec`` satisfies it."""

    @property
    def job_id(self) -> str: ...

    def plan(self, iteration: int = 0, t0: float = 0.0) -> IterationPlan: ...


@dataclass(frozen=True)
class JobRun:
    """A job to simulate: arrives at ``arrival`` and runs ``iterations`` iterations."""

    spec: Plannable
    arrival: float = 0.0
    iterations: int = 1


@dataclass(frozen=True)
class SimConfig:
    """How to run: policy name (or object), levels (``None`` = ideal ranks, else K
    switch queues), when to re-rank, packet overhead, and what to record.

    ``header_bytes``/``payload_bytes`` turn a flow's ``size`` into bytes on the
    wire: ``size + ceil(size / payload_bytes) * header_bytes``.

    ``replan_interval`` is the least time between two policy calls, as a
    controller that re-plans at most that often: group events closer than that to
    the last re-plan are coalesced into one re-plan when the interval has passed
    (flows released meanwhile without a rank wait on the lowest level).

    ``policy_sizes`` is what the policy is told about bytes: ``remaining`` (each
    flow's bytes still to send, finished flows 0: a coordinator that sees bytes) or
    ``registered`` (every flow of a group in flight at its registered size, finished
    or not: what the online controller knows, since progress reports carry only
    releases and finishes, :mod:`controlplane.progress`). The cross-check of the
    online mode (``topo.crosscheck``) uses ``registered``.

    ``replan_delay`` (seconds) models the controller's reaction: a group event is
    acted on that long after it happened (the report's way to the controller plus
    the re-plan until the switch acknowledged it), coalesced as above.
    ``keep_levels`` models ``--idle-level keep`` (K levels only): a flow released
    before the re-plan covering it competes at the level its (job, group, flow
    index) had in the last plan that ranked it -- an earlier iteration's, or
    ``initial_levels`` (the static plan installed at registration) -- instead of
    the lowest level.

    ``sender_round_robin`` models hosts that pace their released flows round-robin
    packet by packet (``hostagent.sender``): on its source host's first link a flow
    gets an equal share of that link among the host's active flows, whatever its
    rank (a host knows no priorities; only switches do), and strict priority applies
    from the first switch on. Off: every link, host links included, serves by rank.

    ``until`` (seconds) stops the run at that simulated time whatever is left: jobs
    that keep iterating (a training job's steady state, :mod:`sim.eval.steady`) are
    measured on what completed by then, and jobs left unfinished are not an error.
    """

    policy: str | Policy = "echelon"
    levels: int | None = None
    rerank: Literal["group", "flow"] = "group"
    replan_interval: float = 0.0
    policy_sizes: Literal["remaining", "registered"] = "remaining"
    replan_delay: float = 0.0
    keep_levels: bool = False
    initial_levels: Mapping[tuple[str, str, int], int] | None = None
    sender_round_robin: bool = False
    header_bytes: int = 0
    payload_bytes: int = 1400
    record_flows: bool = True
    record_tasks: bool = False
    until: float | None = None

    def wire_bytes(self, size: int) -> float:
        if self.header_bytes <= 0:
            return float(size)
        return float(size + math.ceil(size / self.payload_bytes) * self.header_bytes)


def levels_label(levels: int | None) -> str:
    """``ideal`` or ``K=8``: how results, sweep rows and progress lines name the levels."""
    return "ideal" if levels is None else f"K={levels}"


def parse_levels(value: str | int | None, field: str = "levels") -> int | None:
    """``None``, ``ideal``, ``none`` or ``inf``: a level per rank (``None``); ``8``,
    ``k8`` or the int 8: that many switch queues (at least 2). The CLI's ``--levels``
    and :func:`sim.predict.predict_finish_times`' ``levels_mode``; a bad value raises
    :class:`SpecError` on ``field``."""
    if value is None or value in ("ideal", "none", "inf"):
        return None
    if isinstance(value, int):
        k = value
    else:
        try:
            k = int(value.lower().lstrip("k"))
        except ValueError:
            raise SpecError(field, f"'ideal' or a queue count like 8, got {value!r}") from None
    if k < 2:
        raise SpecError(field, f"need at least 2 queues, got {k}")
    return k
