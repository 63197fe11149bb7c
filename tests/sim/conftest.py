"""Small hand-made jobs, networks and policies for the simulator tests.

They stand in for the core's paradigm builders where a test needs an instance
whose answer can be computed by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from echelon.model import EchelonFlow, FlowKey, IterationPlan
from echelon.schedule import Network, Schedule
from sim.core.config import JobRun, SimConfig
from sim.core.engine import Simulator
from sim.core.results import SimResult


class Links:
    """A network given by explicit links and per-pair paths (``a->b`` -> link names)."""

    def __init__(self, links: Mapping[str, float], paths: Mapping[tuple[str, str], Sequence[str]]):
        self._links = dict(links)
        self._paths = {k: tuple(v) for k, v in paths.items()}

    @property
    def links(self) -> Mapping[str, float]:
        return self._links

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        return self._paths[(src, dst)]


@dataclass
class PlanJob:
    """A job whose plan comes from a function ``(iteration, t0) -> IterationPlan``."""

    job_id: str
    make: Callable[[int, float], IterationPlan]

    def plan(self, iteration: int = 0, t0: float = 0.0) -> IterationPlan:
        return self.make(iteration, t0)


class RankPolicy:
    """Test double: ranks from a function of (echelon, flow index)."""

    def __init__(self, name: str, fn: Callable[[EchelonFlow, int], int]):
        self.name = name
        self.fn = fn

    def schedule(
        self,
        echelons: Sequence[EchelonFlow],
        network: Network,
        remaining: Mapping[FlowKey, int] | None = None,
        now: float = 0.0,
    ) -> Schedule:
        ranks = {(ef.name, f.index): self.fn(ef, f.index) for ef in echelons for f in ef.flows}
        return Schedule(self.name, tuple(ef.name for ef in echelons), ranks)


FAIR = RankPolicy("fair", lambda ef, j: 0)


def simulate(
    network: Network, jobs: Sequence[JobRun], config: SimConfig | None = None
) -> SimResult:
    """One run of the engine (the tests' shorthand for ``Simulator(...).run()``)."""
    return Simulator(network, jobs, config or SimConfig()).run()
