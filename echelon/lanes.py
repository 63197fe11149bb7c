"""The closed loop's rules: per-host lanes of compute tasks, a local barrier, releases.

Two drivers play these rules, each with its own clock: the host agents on the wall
clock (:mod:`hostagent.closedloop`) and the packet-level model in simulated time
(:mod:`sim.packet`, built to be compared with the emulation). They share this one
implementation so that the model plays exactly what the agents play; it lives in
the core because neither may import the other.

Each ``(job, host)`` taking part in a job is one *lane*: it runs that job's tasks
on that host one at a time, in plan order, iteration after iteration. A task
starts when the lane is free, its ``after_tasks`` have ended and its
``after_flows`` have fully arrived; it runs for its ``duration``, and its end
releases the flows it produces (the driver's business: :class:`Ended`). A lane
enters iteration ``i + 1`` when it has finished its own iteration-``i`` tasks (a
*local* barrier, not the fluid engine's global one); entering releases the flows
of that iteration the host sends that no task produces (a parameter server's
pull, :class:`Entered`). Every lane enters its first iteration at time 0.

Times are the instants the conditions held (arrival stamps, the previous task's
end), not when the driver looked, so a driver that looks late (a sleeping
sender) still gets the times a prompt one would.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar


class LoopTask(Protocol):
    """What the rules read of a task (:class:`echelon.model.ComputeTask` and the host
    agent's :class:`hostagent.scenario.TaskSpec` both are one)."""

    @property
    def id(self) -> str: ...
    @property
    def duration(self) -> float: ...
    @property
    def after_tasks(self) -> tuple[str, ...]: ...
    @property
    def after_flows(self) -> tuple[Hashable, ...]: ...


T = TypeVar("T", bound=LoopTask)
F = TypeVar("F")  # how the driver names a flow it releases


@dataclass
class Lane(Generic[T, F]):
    """One (job, host): its tasks and producer-less flows per iteration."""

    job: str
    host: str
    iterations: list[int]  # the iterations it walks, in order
    tasks: dict[int, deque[T]]  # per iteration, in plan order
    fresh: dict[int, list[F]]  # per iteration: flows released on entry
    current: int = -1  # position in ``iterations``; -1 before the first
    free_at: float = 0.0  # when its last task ended
    running: tuple[T, float, float] | None = None  # (task, start, end)
    entered: dict[int, float] = field(default_factory=dict)  # iteration -> instant

    def done(self) -> bool:
        return self.current >= len(self.iterations)


@dataclass(frozen=True)
class Entered(Generic[F]):
    """A lane entered ``iteration`` at ``at``: release ``flows`` then."""

    job: str
    host: str
    iteration: int
    at: float
    flows: list[F]


@dataclass(frozen=True)
class Started(Generic[T]):
    """A lane's ``task`` (of ``iteration``) runs from ``start`` to ``end``."""

    job: str
    host: str
    iteration: int
    task: T
    start: float
    end: float


@dataclass(frozen=True)
class Ended(Generic[T]):
    """A lane's ``task`` ended: release what it produces at ``end``."""

    job: str
    host: str
    iteration: int
    task: T
    start: float
    end: float


Step = Entered[F] | Started[T] | Ended[T]


class Lanes(Generic[T, F]):
    """Every lane of a run (or of one host), and the arrivals and ends they wait for."""

    def __init__(self) -> None:
        self.lanes: dict[tuple[str, str], Lane[T, F]] = {}
        self.arrived: dict[Hashable, float] = {}  # flow -> when it fully arrived
        self.ended: dict[str, float] = {}  # task id -> when it ended

    def lane(self, job: str, host: str, iterations: Iterable[int]) -> Lane[T, F]:
        """The lane of ``(job, host)``, made on first use; lanes advance in that order."""
        if (job, host) not in self.lanes:
            its = list(iterations)
            self.lanes[(job, host)] = Lane(
                job, host, its, {i: deque() for i in its}, {i: [] for i in its}
            )
        return self.lanes[(job, host)]

    def finished(self) -> bool:
        """Every lane walked all its iterations."""
        return all(ln.done() for ln in self.lanes.values())

    def advance(self, now: float, end_by: float = -math.inf) -> list[Step[F, T]]:
        """Run every lane as far as it can go at ``now``; what happened, in order.

        A running task ends here if it ends by ``end_by`` (the wall-clock driver: its
        ``now``); otherwise only through :meth:`end` (the event-driven driver)."""
        steps: list[Step[F, T]] = []
        for ln in self.lanes.values():
            while not ln.done():
                if ln.running is not None:
                    if ln.running[2] > end_by:
                        break
                    steps.append(self._end(ln))
                    continue
                if ln.current < 0 or not ln.tasks[ln.iterations[ln.current]]:
                    ln.current += 1  # local barrier: this lane's iteration is over
                    if ln.done():
                        break
                    i = ln.iterations[ln.current]
                    ln.entered[i] = ln.free_at
                    steps.append(Entered(ln.job, ln.host, i, ln.free_at, ln.fresh[i]))
                    continue
                i = ln.iterations[ln.current]
                task = ln.tasks[i][0]
                ready = self.ready_at(task)
                if ready is None:
                    break
                ln.tasks[i].popleft()
                start = max(ln.free_at, ready)
                ln.running = (task, start, start + task.duration)
                steps.append(Started(ln.job, ln.host, i, task, start, start + task.duration))
        return steps

    def end(self, job: str, host: str) -> Ended[T]:
        """End the running task of lane ``(job, host)`` (the event-driven driver, at its
        end event); call :meth:`advance` next."""
        return self._end(self.lanes[(job, host)])

    def _end(self, ln: Lane[T, F]) -> Ended[T]:
        if ln.running is None:
            raise RuntimeError(f"lane {ln.job}@{ln.host} runs no task")
        task, start, end = ln.running
        ln.running = None
        ln.free_at = end
        self.ended[task.id] = end
        return Ended(ln.job, ln.host, ln.iterations[ln.current], task, start, end)

    def ready_at(self, task: LoopTask) -> float | None:
        """When ``task``'s inputs were all there, or None while one is missing."""
        times = [0.0]
        for flow in task.after_flows:
            if flow not in self.arrived:
                return None
            times.append(self.arrived[flow])
        for tid in task.after_tasks:
            if tid not in self.ended:
                return None
            times.append(self.ended[tid])
        return max(times)
