"""The EchelonFlow abstraction (Pan et al., HotNets '22) and its metrics.

An EchelonFlow is a group of flows whose data is consumed at staggered times.
Flow ``j`` ideally finishes at ``t_ref + A(j)``, where ``A`` is the arrangement
function of the computation that consumes the group (non-decreasing, ``A`` of
the first flow is 0). A Coflow is the special case ``A == 0``.

Times are seconds (float) everywhere in the core; the wire carries ``A(j)`` in
integer microseconds (:func:`offset_us`). Sizes are bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from echelon.errors import SpecError

FlowKey = tuple[str, int]
"""Identifies a flow everywhere: ``(echelon name, flow index)``."""


@dataclass(frozen=True, slots=True)
class Flow:
    """One flow of an EchelonFlow: ``size`` bytes from ``src`` to ``dst``.

    ``index`` is the flow's position in the formation and ``offset`` its
    arrangement value ``A(index)`` in seconds. ``slack`` is the flow's total
    float in the job's contention-free timeline: how much later than
    ``t_ref + A(index)`` it may finish without delaying the end of its
    iteration (0 for flows on the critical path; builders fill it in from the
    computation DAG, hand-made flows default to 0). Schedulers use it to let
    transfers that can wait yield to ones that cannot; the wire never carries it.
    """

    index: int
    src: str
    dst: str
    size: int
    offset: float
    slack: float = 0.0

    @property
    def offset_us(self) -> int:
        return offset_us(self.offset)


@dataclass(frozen=True, slots=True)
class EchelonFlow:
    """A group of flows with an arrangement function.

    ``name`` is unique among the EchelonFlows alive at one time (paradigm builders
    use ``<job>/<iteration>/<kind>/...``); ``job`` names the training job;
    ``group`` names the recurring group inside the job that is the same in every
    iteration (the controller gives each group one echelon ID); ``t_ref`` is the
    reference time of this instance (seconds, e.g. when its first consumer may
    start); ``weight`` scales its importance in inter-group ordering.
    """

    name: str
    job: str
    group: str
    flows: tuple[Flow, ...]
    t_ref: float = 0.0
    weight: float = 1.0

    def __post_init__(self) -> None:
        validate(self)

    @property
    def is_coflow(self) -> bool:
        return all(f.offset == 0.0 for f in self.flows)

    def key(self, flow: Flow) -> FlowKey:
        return (self.name, flow.index)

    def ideal_finish(self, index: int) -> float:
        """``t_ref + A(index)``."""
        return self.t_ref + self.flows[index].offset

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.flows)

    @property
    def span(self) -> float:
        """``A(last)``: how far the formation stretches after ``t_ref``."""
        return self.flows[-1].offset if self.flows else 0.0


def offset_us(seconds: float) -> int:
    """Arrangement offset as the wire carries it: whole microseconds, rounded."""
    return round(seconds * 1e6)


def validate(ef: EchelonFlow) -> None:
    """Check the invariants of an EchelonFlow; raise :class:`SpecError` naming the field."""
    if not ef.name:
        raise SpecError("name", "must not be empty")
    if not ef.flows:
        raise SpecError(f"{ef.name}.flows", "an EchelonFlow needs at least one flow")
    if ef.weight <= 0:
        raise SpecError(f"{ef.name}.weight", f"must be positive, got {ef.weight}")
    prev = 0.0
    for pos, f in enumerate(ef.flows):
        where = f"{ef.name}.flows[{pos}]"
        if f.index != pos:
            raise SpecError(f"{where}.index", f"must equal its position {pos}, got {f.index}")
        if f.size <= 0:
            raise SpecError(f"{where}.size", f"must be positive, got {f.size}")
        if not f.src or not f.dst:
            raise SpecError(f"{where}.src", "source and destination hosts are required")
        if f.offset < 0 or (pos == 0 and f.offset != 0.0):
            raise SpecError(f"{where}.offset", "A(first) must be 0 and offsets non-negative")
        if not f.slack >= 0:
            raise SpecError(f"{where}.slack", f"must be non-negative, got {f.slack}")
        if f.offset < prev:
            raise SpecError(
                f"{where}.offset", f"arrangement must be non-decreasing ({f.offset} < {prev})"
            )
        prev = f.offset


# ---------------------------------------------------------------- metrics


def lateness(ef: EchelonFlow, finish: Mapping[int, float]) -> dict[int, float]:
    """Per-flow lateness ``max(0, C_j - (t_ref + A(j)))`` for the finish times ``C_j``."""
    return {j: max(0.0, finish[j] - ef.ideal_finish(j)) for j in _indices(ef, finish)}


def completion_time(ef: EchelonFlow, finish: Mapping[int, float]) -> float:
    """EchelonFlow completion time: ``max_j (C_j - A(j)) - t_ref``.

    The time, relative to ``t_ref``, at which the formation is complete; equal to
    the coflow completion time when ``A == 0``.
    """
    return max(finish[j] - ef.flows[j].offset for j in _indices(ef, finish)) - ef.t_ref


def total_tardiness(ef: EchelonFlow, finish: Mapping[int, float]) -> float:
    return sum(lateness(ef, finish).values())


def max_tardiness(ef: EchelonFlow, finish: Mapping[int, float]) -> float:
    return max(lateness(ef, finish).values())


def _indices(ef: EchelonFlow, finish: Mapping[int, float]) -> Sequence[int]:
    missing = [f.index for f in ef.flows if f.index not in finish]
    if missing:
        raise SpecError(f"{ef.name}.finish", f"no finish time for flows {missing}")
    return [f.index for f in ef.flows]


# ---------------------------------------------------------------- computation


@dataclass(frozen=True, slots=True)
class ComputeTask:
    """A piece of computation of one training iteration, on one host.

    It starts when every task in ``after_tasks`` has finished and every flow in
    ``after_flows`` has fully arrived, and runs for ``duration`` seconds (tasks on
    one host run one at a time, in the order given by ``IterationPlan.tasks``).
    This is what lets a simulator stretch iteration time when communication is late.
    """

    id: str
    host: str
    duration: float
    after_tasks: tuple[str, ...] = ()
    after_flows: tuple[FlowKey, ...] = ()


@dataclass(frozen=True)
class IterationPlan:
    """One iteration of a training job: its EchelonFlows and the computation around them.

    ``producer`` maps every flow to the task whose end releases it (flows with no
    producer are released at the iteration's start). The EchelonFlows' ``t_ref``
    and offsets are the ideal (contention-free) consumption times of this plan,
    relative to the iteration's start.
    """

    job: str
    iteration: int
    echelons: tuple[EchelonFlow, ...]
    tasks: tuple[ComputeTask, ...]
    producer: Mapping[FlowKey, str]
