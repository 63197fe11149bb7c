"""Types shared by every scheduling policy, the quantiser, the controller and the simulator.

A policy looks at the active EchelonFlows and the network and returns a
:class:`Schedule`: a rank for every flow (0 is served first; equal ranks share
bandwidth max-min fairly). :mod:`echelon.quantize` maps ranks to the K
strict-priority levels of a switch and to the deadline ranges the data plane
matches on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from echelon.model import EchelonFlow, FlowKey


@runtime_checkable
class Network(Protocol):
    """What a policy needs to know of the network: links, capacities and paths.

    Capacities are bytes per second. A path is the tuple of link names a flow
    from ``src`` to ``dst`` crosses. Implementations: ``echelon.network.BigSwitch``
    (one up and one down link per host) and the simulator's leaf-spine.
    """

    @property
    def links(self) -> Mapping[str, float]: ...

    def path(self, src: str, dst: str) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Schedule:
    """A policy's decision.

    ``echelon_order`` lists EchelonFlow names, most important first (empty for
    policies with no notion of groups). ``flow_rank`` gives every flow a rank;
    0 is served first and equal ranks share fairly. ``interleaved`` says the
    ranks of different groups interleave (a group's later flows may rank below
    another group's earlier ones), so the quantiser maps ranks to levels flow by
    flow instead of giving each group a contiguous band. ``live`` names the flows
    that still have bytes to send (``None``: all of them): finished flows send no
    packets, so the quantiser spends no level on telling them apart.
    """

    policy: str
    echelon_order: tuple[str, ...]
    flow_rank: Mapping[FlowKey, int]
    interleaved: bool = False
    live: frozenset[FlowKey] | None = None


@runtime_checkable
class Policy(Protocol):
    """A scheduling policy. ``remaining`` maps flows to bytes still to send (all of
    a flow's bytes when absent); ``now`` is the current time in seconds.

    The simulator, the packet model and the online controller each ask one object
    again at every re-plan of a run, with ``now`` not going back, so a policy may
    remember between calls (how long a group has waited, who passed whom); an earlier
    ``now`` means a new run. Of the built-in policies only ``echelon`` does: its
    starvation guard fixes each flow's reference when it first sees the flow
    (``echelon.policies.pace``)."""

    name: str

    def schedule(
        self,
        echelons: Sequence[EchelonFlow],
        network: Network,
        remaining: Mapping[FlowKey, int] | None = None,
        now: float = 0.0,
    ) -> Schedule: ...


@dataclass(frozen=True)
class DeadlineRange:
    """Flows of one echelon whose offset ``A(j)`` in microseconds lies in
    ``[lo_us, hi_us]`` (inclusive) get ``priority``."""

    lo_us: int
    hi_us: int
    priority: int


@dataclass(frozen=True)
class EchelonLevels:
    """What the data plane installs for one EchelonFlow.

    ``priority`` is the level of the echelon's band used when no deadline range
    matches (the band's top level); ``ranges`` split the echelon's offsets into
    levels inside the band, earlier offsets never lower than later ones.
    """

    echelon: str
    priority: int
    ranges: tuple[DeadlineRange, ...]
