"""The closed loop's rules, played by the host agents on the wall clock
(:mod:`hostagent.closedloop`) and by the packet-level model in simulated time
(:mod:`sim.packet`): one implementation, so the model plays what the agents play.

Each ``(job, host)`` taking part in a job is one *lane*: it runs that job's tasks
on that host one at a time, in plan order, iteration after iteration. A task
starts when the lane is free, its ``after_tasks`` have ended and its
``after_flows`` have fully arrived; its end releases the flows it produces. A
lane enters iteration ``i + 1`` when it has finished its own iteration-``i`` tasks
(a *local* barrier, not the fluid engine's global one); entering releases the
flows of that iteration the host sends that no task produces (a parameter
server's pull). Every lane enters its first iteration at time 0.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar


class LoopTask(Protocol):
    """What the rules read of a task (:class:`echelon.model.ComputeTask`, the host
    agent's :class:`hostagent.scenario.TaskSpec`)."""

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
    fresh: dict[int, list[F]]  # per iteration: the flows released on entering it
    current: int = -1  # position in ``iterations``; -1 before the first
    free_at: float = 0.0  # when its last task ended
    running: tuple[T, float, float] | None = None  # (task, start, end)
    entered: dict[int, float] = field(default_factory=dict)  # iteration -> instant

    def done(self) -> bool:
        return self.current >= len(self.iterations)


@dataclass(frozen=True)
class Entered(Generic[T, F]):
    """``lane`` entered ``iteration`` at ``at``: release ``lane.fresh[iteration]`` then."""

    lane: Lane[T, F]
    iteration: int
    at: float


@dataclass(frozen=True)
class Started(Generic[T, F]):
    """``lane`` runs ``task`` (of ``iteration``) from ``start`` to ``end``."""

    lane: Lane[T, F]
    iteration: int
    task: T
    start: float
    end: float


@dataclass(frozen=True)
class Ended(Generic[T, F]):
    """``lane``'s ``task`` (of ``iteration``) ran from ``start`` to ``end``: release what
    it produces at ``end``."""

    lane: Lane[T, F]
    iteration: int
    task: T
    start: float
    end: float


Step = Entered[T, F] | Started[T, F] | Ended[T, F]


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

    def advance(self, now: float, end_by: float = -math.inf) -> list[Step[T, F]]:
        """Run every lane as far as it can go at ``now``; what happened, in order.

        A running task ends here if it ends by ``end_by`` (the wall-clock driver passes
        its ``now``), else only through :meth:`end` (the event-driven driver). Times are
        the instants the conditions held, not ``now``: a driver that looks late gets
        the times a prompt one would."""
        steps: list[Step[T, F]] = []
        for ln in self.lanes.values():
            while not ln.done():
                if ln.running is not None:
                    if ln.running[2] > end_by:
                        break
                    steps.append(self.end(ln))
                elif ln.current < 0 or not ln.tasks[ln.iterations[ln.current]]:
                    ln.current += 1  # local barrier: this lane's iteration is over
                    if not ln.done():
                        ln.entered[ln.iterations[ln.current]] = ln.free_at
                        steps.append(Entered(ln, ln.iterations[ln.current], ln.free_at))
                else:
                    i = ln.iterations[ln.current]
                    ready = self.ready_at(ln.tasks[i][0])
                    if ready is None:
                        break
                    task = ln.tasks[i].popleft()
                    start = max(ln.free_at, ready)
                    ln.running = (task, start, start + task.duration)
                    steps.append(Started(ln, i, task, start, start + task.duration))
        return steps

    def end(self, ln: Lane[T, F]) -> Ended[T, F]:
        """End ``ln``'s running task (the event-driven driver: at its end event; call
        :meth:`advance` next)."""
        if ln.running is None:
            raise RuntimeError(f"lane {ln.job}@{ln.host} runs no task")
        task, start, end = ln.running
        ln.running = None
        ln.free_at = end
        self.ended[task.id] = end
        return Ended(ln, ln.iterations[ln.current], task, start, end)

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
