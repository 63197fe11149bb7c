"""Turn a computation pattern into an :class:`~echelon.model.IterationPlan`.

A paradigm module only describes *what* runs where: compute tasks (in per-host
order) and the flows between them (which task releases a flow, which tasks
consume it). :class:`PlanBuilder` then derives every EchelonFlow's ``t_ref`` and
arrangement ``A`` from the contention-free timeline, in one place, so that all
paradigms follow the same rule:

* the **ideal timeline** runs every task as early as its host and its
  dependencies allow, with every flow arriving the instant it is released
  (infinite bandwidth);
* a flow's **ideal finish** is the ideal start of the first task that consumes
  it (when its data is needed, not when it could be sent) -- a flow nobody
  waits for in this iteration ideally finishes when it is released;
* an EchelonFlow groups the flows of one ``group``; its flows are indexed in
  order of ideal finish, ``t_ref`` is the earliest ideal finish and
  ``A(j) = ideal_finish(j) - t_ref``;
* a flow's **slack** is its total float in that timeline (critical-path method,
  backward pass over task dependencies, each host's task sequence and flow
  consumers, from the iteration's end): how much later than its ideal finish it
  may arrive without making the iteration longer. A gradient all-reduce of an
  early pipeline stage, needed only by that stage's optimizer step, has slack up
  to the end of the iteration; an activation the next stage waits for has none.

Offsets are computed relative to the iteration's start, so they are identical in
every iteration (the switch keys on them); only ``t_ref`` moves with ``t0``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from echelon.errors import SpecError
from echelon.model import ComputeTask, EchelonFlow, Flow, FlowKey, IterationPlan

#: Offsets are rounded to nanoseconds so float noise never breaks monotonicity
#: or makes two iterations' offsets differ.
_OFFSET_DIGITS = 9


@dataclass(frozen=True)
class _Draft:
    seq: int
    group: str
    src: str
    dst: str
    size: int
    producer: str | None


class PlanBuilder:
    """Collects tasks and flows of one iteration; :meth:`build` derives the arrangement."""

    def __init__(self, job: str, iteration: int, t0: float, weight: float = 1.0) -> None:
        self.job = job
        self.iteration = iteration
        self.t0 = t0
        self.weight = weight
        self._prefix = f"{job}/{iteration}/"
        self._tasks: list[ComputeTask] = []
        self._task_flows: list[tuple[int, ...]] = []
        self._ids: set[str] = set()
        self._flows: list[_Draft] = []
        #: Ideal iteration time (end of the last task), set by :meth:`build`.
        self.makespan = 0.0

    def task(
        self,
        name: str,
        host: str,
        duration: float,
        after_tasks: Iterable[str] = (),
        after_flows: Iterable[int] = (),
    ) -> str:
        """Add a task (appended to ``host``'s sequence); returns its id.

        Task ids are ``<job>/<iteration>/<name>`` so that plans of several jobs and
        iterations can live in one simulation without clashing.
        """
        tid = self.tid(name)
        if tid in self._ids:
            raise SpecError("tasks", f"duplicate task {tid!r} (builder bug)")
        self._ids.add(tid)
        self._tasks.append(ComputeTask(tid, host, duration, tuple(after_tasks), ()))
        self._task_flows.append(tuple(after_flows))
        return tid

    def tid(self, name: str) -> str:
        """The id :meth:`task` gives (or will give) the task called ``name``; lets a
        paradigm add a flow before the task that releases it."""
        return self._prefix + name

    def flow(self, group: str, src: str, dst: str, size: int, producer: str | None) -> int:
        """Add a flow released when ``producer`` ends (at the start if None); returns a handle."""
        handle = len(self._flows)
        self._flows.append(_Draft(handle, group, src, dst, size, producer))
        return handle

    def build(self) -> IterationPlan:
        tasks_rel = [
            ComputeTask(t.id, t.host, t.duration, t.after_tasks, tuple(("", h) for h in hs))
            for t, hs in zip(self._tasks, self._task_flows, strict=True)
        ]
        ends: dict[str, float] = {}

        def release(key: FlowKey) -> float | None:
            producer = self._flows[int(key[1])].producer
            return 0.0 if producer is None else ends.get(producer)

        starts, _ = _timeline(tasks_rel, release, ends)
        self.makespan = max(ends.values(), default=0.0)
        latest = _latest_starts(self._tasks, self._task_flows, self._flows, self.makespan)
        finish = [0.0 if d.producer is None else ends[d.producer] for d in self._flows]
        consumed = [False] * len(self._flows)
        due = [self.makespan] * len(self._flows)  # latest finish (end of iteration if unconsumed)
        for t, hs in zip(self._tasks, self._task_flows, strict=True):
            for h in hs:
                if not consumed[h] or starts[t.id] < finish[h]:
                    finish[h] = starts[t.id]
                consumed[h] = True
                due[h] = min(due[h], latest[t.id])

        by_group: dict[str, list[_Draft]] = {}
        for d in self._flows:
            if d.size > 0:
                by_group.setdefault(d.group, []).append(d)
        keys: dict[int, FlowKey] = {}
        echelons: list[EchelonFlow] = []
        for group, drafts in by_group.items():
            drafts.sort(key=lambda d: (finish[d.seq], d.seq))
            ref = finish[drafts[0].seq]
            name = f"{self.job}/{self.iteration}/{group}"
            flows = []
            for j, d in enumerate(drafts):
                offset = round(finish[d.seq] - ref, _OFFSET_DIGITS)
                slack = max(0.0, round(due[d.seq] - finish[d.seq], _OFFSET_DIGITS))
                flows.append(Flow(j, d.src, d.dst, d.size, offset, slack))
                keys[d.seq] = (name, j)
            echelons.append(
                EchelonFlow(name, self.job, group, tuple(flows), self.t0 + ref, self.weight)
            )
        echelons.sort(key=lambda e: (e.t_ref, e.group))
        tasks = tuple(
            ComputeTask(t.id, t.host, t.duration, t.after_tasks, _keys(hs, keys))
            for t, hs in zip(self._tasks, self._task_flows, strict=True)
        )
        producer = {
            keys[d.seq]: d.producer for d in self._flows if d.producer is not None and d.seq in keys
        }
        return IterationPlan(self.job, self.iteration, tuple(echelons), tasks, producer)


def _latest_starts(
    tasks: list[ComputeTask],
    task_flows: list[tuple[int, ...]],
    flows: list[_Draft],
    makespan: float,
) -> dict[str, float]:
    """Latest start of every task that does not lengthen the iteration (CPM backward pass).

    A task must end before each of its successors starts: tasks that name it in
    ``after_tasks``, the next task on its host (the ideal timeline keeps each
    host's order), and every consumer of a flow it releases (flows take no time
    in the contention-free timeline). Tasks without successors may end at the
    makespan; so may producers of flows nobody consumes, since the iteration
    ends only when all of its flows have arrived.
    """
    succ: dict[str, list[str]] = {t.id: [] for t in tasks}
    last_on_host: dict[str, str] = {}
    for t in tasks:
        prev = last_on_host.get(t.host)
        if prev is not None:
            succ[prev].append(t.id)
        last_on_host[t.host] = t.id
        for dep in t.after_tasks:
            succ[dep].append(t.id)
    consumers: dict[int, list[str]] = {}
    for t, hs in zip(tasks, task_flows, strict=True):
        for h in hs:
            consumers.setdefault(h, []).append(t.id)
    for d in flows:
        if d.producer is not None:
            succ[d.producer].extend(consumers.get(d.seq, ()))
    duration = {t.id: t.duration for t in tasks}
    latest: dict[str, float] = {}
    # iterative post-order DFS (task graphs of large jobs are deep)
    for root in duration:
        if root in latest:
            continue
        stack = [(root, False)]
        while stack:
            tid, expanded = stack.pop()
            if tid in latest:
                continue
            if expanded:
                end = min((latest[s] for s in succ[tid]), default=makespan)
                latest[tid] = min(end, makespan) - duration[tid]
                continue
            stack.append((tid, True))
            stack.extend((s, False) for s in succ[tid] if s not in latest)
    return latest


def _keys(handles: tuple[int, ...], keys: Mapping[int, FlowKey]) -> tuple[FlowKey, ...]:
    return tuple(keys[h] for h in handles if h in keys)


def ideal_timeline(plan: IterationPlan) -> dict[str, tuple[float, float]]:
    """Contention-free ``(start, end)`` of every task of ``plan``, relative to its start.

    Flows arrive the instant their producer ends. This is the reference the
    arrangement is derived from; a simulator can compare its timeline against it.
    """
    producer = plan.producer
    holder: dict[str, float] = {}

    def release(key: FlowKey) -> float | None:
        name = producer.get(key)
        return 0.0 if name is None else holder.get(name)

    starts, ends = _timeline(plan.tasks, release, holder)
    return {t.id: (starts[t.id], ends[t.id]) for t in plan.tasks}


def _timeline(
    tasks: Iterable[ComputeTask],
    release: Callable[[FlowKey], float | None],
    ends: dict[str, float] | None = None,
) -> tuple[dict[str, float], dict[str, float]]:
    """List-schedule ``tasks``: each host runs its tasks in the given order, a task
    starts once its host is free, its ``after_tasks`` ended and its flows arrived.

    ``release(flow_key)`` returns a flow's arrival time, or None while its producer
    has not been scheduled yet. Raises SpecError on a dependency cycle.
    """
    ends = {} if ends is None else ends
    starts: dict[str, float] = {}
    queues: dict[str, deque[ComputeTask]] = {}
    for t in tasks:
        queues.setdefault(t.host, deque()).append(t)
    free = dict.fromkeys(queues, 0.0)
    pending = sum(len(q) for q in queues.values())
    while pending:
        progressed = False
        for host_name, queue in queues.items():
            while queue:
                t = queue[0]
                times = [free[host_name]]
                blocked = False
                for dep in t.after_tasks:
                    if dep not in ends:
                        blocked = True
                        break
                    times.append(ends[dep])
                if not blocked:
                    for key in t.after_flows:
                        arrival = release(key)
                        if arrival is None:
                            blocked = True
                            break
                        times.append(arrival)
                if blocked:
                    break
                start = max(times)
                starts[t.id] = start
                ends[t.id] = free[host_name] = start + t.duration
                queue.popleft()
                pending -= 1
                progressed = True
        if not progressed:
            stuck = sorted(q[0].id for q in queues.values() if q)
            raise SpecError("tasks", f"dependency cycle or missing producer at {stuck}")
    return starts, ends
